"""PyTorch's once-per-process warnings (TORCH_WARN_ONCE) come every time after
``set_warn_always(True)``, in ember as in torch, and once otherwise."""

import re
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _square(lib):
    return lib.tensor(np.arange(9.0).reshape(3, 3) + np.eye(3) * 10)


CALLS = {
    "index_reduce": lambda lib: _square(lib).index_reduce(
        0, lib.tensor([0, 1, 0]), lib.ones(3, 3, dtype=lib.float64), "prod"),
    "cross": lambda lib: lib.cross(_square(lib), _square(lib)),
    "lu": lambda lib: lib.lu(_square(lib)),
    "lu_solve": lambda lib: lib.lu_solve(_square(lib), *lib.linalg.lu_factor(_square(lib))),
    "searchsorted": lambda lib: lib.searchsorted(lib.arange(10.0, dtype=lib.float64)[::2],
                                                 _square(lib).t()),
    "scatter reduce": lambda lib: _square(lib).scatter(
        0, lib.tensor([[0], [1], [0]]).expand(3, 3), _square(lib), reduce="add"),
    "float of grad": lambda lib: float(lib.ones((), requires_grad=True)),
    "rms_norm weight dtype": lambda lib: lib.nn.functional.rms_norm(
        lib.ones(2, 3), [3], lib.ones(3, dtype=lib.float64)),
    "padding same": lambda lib: lib.nn.functional.conv1d(
        lib.ones(1, 1, 5), lib.ones(1, 1, 2), padding="same"),
    "sparse coo invariants": lambda lib: lib.sparse_coo_tensor(
        lib.tensor([[0]]), lib.tensor([1.0]), (1,)),
    "stft without window": lambda lib: lib.stft(lib.ones(64), 16, return_complex=True),
    "scalar-first add": lambda lib: lib.ones(2).add(2, lib.ones(2)),
    "sparse csr beta": lambda lib: lib.sparse_csr_tensor(
        lib.tensor([0, 1]), lib.tensor([0]), lib.tensor([1.0]), (1, 1)),
}


def _messages(lib, call, always):
    """The warnings two calls of ``call`` give under ``set_warn_always(always)``."""
    lib.set_warn_always(always)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(lib)
            call(lib)
    finally:
        lib.set_warn_always(False)
    # torch's C++ warnings end with where they were raised: not part of the text compared
    return [re.sub(r" \(Triggered internally at .*\)$", "", str(w.message), flags=re.S)
            for w in caught]


@pytest.mark.parametrize("name", CALLS)
def test_warn_always_repeats_the_once_per_process_warnings(name):
    ours, theirs = (_messages(lib, CALLS[name], True) for lib in (ember, torch))
    assert ours == theirs and len(ours) >= 2


@pytest.mark.parametrize("name", CALLS)
def test_without_warn_always_they_come_once(name):
    from ember import _warn
    _warn._WARNED_ONCE.clear()
    ours = _messages(ember, CALLS[name], False)
    assert len(ours) == len(set(ours)) >= 1
    assert _messages(ember, CALLS[name], False) == []
