"""Round-33 whole programs on the GPU path: each runs with ``torch`` bound to ember, once on
the CPU and once with CUDA as the default device (NumPy data uploaded), and the results
agree. The sweep of all 137 (121 agree; the others are programs' own CPU-only idioms: the
legacy ``Tensor(...)`` constructor, SobolEngine, ``.numpy()``, explicit CPU devices, CPU
autocast) found that vmap's randomness rules skipped GPU draws (sde_ensemble_program).
A sample of them stays here; the parity modules need PyTorch installed to import."""

import contextlib
import importlib
import warnings

import pytest

import ember

pytestmark = pytest.mark.cuda
pytest.importorskip("torch")

_PROGRAMS = [("physics_second", "sde_ensemble_program"), ("sensing_array", "mvdr_program"),
             ("seq", "music_transformer_program"), ("bio_chem", "chemprop_program"),
             ("seq_video", "convlstm_program"), ("causal", "golem_program")]


def _cpu(v):
    if isinstance(v, dict):
        return {k: _cpu(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_cpu(x) for x in v)
    return v.detach().cpu() if isinstance(v, ember.Tensor) else v


@contextlib.contextmanager
def _on_cuda(monkeypatch):
    from_numpy = ember.from_numpy
    monkeypatch.setattr(ember, "from_numpy", lambda a: from_numpy(a).cuda())
    ember.set_default_device("cuda")
    try:
        yield
    finally:
        ember.set_default_device(None)


@pytest.mark.parametrize("module,name", _PROGRAMS, ids=[n for _, n in _PROGRAMS])
def test_round33_program_on_the_gpu_path(module, name, monkeypatch):
    from tests.parity.test_parity_programs_round9 import assert_same_results
    program = getattr(importlib.import_module(f"tests.parity.test_parity_programs_round33_"
                                              f"{module}"), name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.manual_seed(0)
        want = program(ember)
        with _on_cuda(monkeypatch):
            ember.manual_seed(0)
            got = _cpu(program(ember))
    assert_same_results(got, want, rtol=1e-4, atol=1e-5)
