"""Small public names an API audit found missing (``torch.grid_sampler``,
``embedding_renorm_``, ``nn.factory_kwargs``, ``F.GRID_SAMPLE_*``, ``F.grad``, the autograd
multithreading flag): same results as PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_GRID = np.random.default_rng(0).uniform(-1.1, 1.1, (1, 3, 2, 2)).astype(np.float32)


@pytest.mark.parametrize("modes", [(0, 0, False), (1, 1, True), (2, 2, False)])
def test_grid_sampler_takes_mode_codes(modes):
    results = []
    for lib in (ember, torch):
        x = lib.arange(16.0).reshape(1, 1, 4, 4).requires_grad_()
        out = lib.grid_sampler(x, lib.tensor(_GRID), *modes)
        out.sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy(), type(out.grad_fn).__name__))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-5)
    assert results[0][2] == results[1][2]


def test_grid_sampler_nd_checks_the_rank():
    for lib in (ember, torch):
        x, grid = lib.ones(1, 1, 2, 2), lib.zeros(1, 1, 1, 2)
        assert lib.grid_sampler_2d(x, grid, 0, 0, True).shape == (1, 1, 1, 1)
        with pytest.raises(RuntimeError, match="expected 5D input and grid"):
            lib.grid_sampler_3d(x, grid, 0, 0, True)


def test_embedding_renorm_():
    results = []
    for lib in (ember, torch):
        w = lib.arange(12.0).reshape(4, 3)
        out = lib.embedding_renorm_(w, lib.tensor([0, 2, 2]), 3.0, 1.0)
        assert out is w
        results.append(w.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)


def _factory_outcomes(lib):
    out = []
    for kwargs in (None, {"device": "cpu", "dtype": None},
                   {"factory_kwargs": {"dtype": "d"}, "device": "cpu"}, {"foo": 1},
                   {"device": "cpu", "factory_kwargs": {"device": "cpu"}}):
        try:
            out.append(lib.nn.factory_kwargs(kwargs))
        except TypeError as e:
            out.append(str(e))
    return out


def test_factory_kwargs():
    assert _factory_outcomes(ember) == _factory_outcomes(torch)


def test_functional_constants_and_grad_module():
    import ember.nn.functional as F
    assert F.GRID_SAMPLE_INTERPOLATION_MODES == torch.nn.functional.GRID_SAMPLE_INTERPOLATION_MODES
    assert F.GRID_SAMPLE_PADDING_MODES == torch.nn.functional.GRID_SAMPLE_PADDING_MODES
    assert F.grad is ember.nn.grad


def _threading_flags(lib):
    A = lib.autograd
    seen = [A.is_multithreading_enabled(), A.is_view_replay_enabled()]
    with A.set_multithreading_enabled(False):
        seen.append(A.is_multithreading_enabled())
    seen.append(A.is_multithreading_enabled())
    manager = A.set_multithreading_enabled(False)
    seen.append(A.is_multithreading_enabled())
    manager.__exit__(None, None, None)
    seen.append(A.is_multithreading_enabled())
    try:
        A.set_multithreading_enabled(1)
    except TypeError as e:
        seen.append(str(e))
    return seen


def test_multithreading_flag():
    assert _threading_flags(ember) == _threading_flags(torch)
    assert ember.autograd.anomaly_mode.detect_anomaly is ember.autograd.detect_anomaly


def _resize_outcomes(lib):
    import warnings
    t = lib.arange(6.0, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = t.resize(2, 3)
        s = t.resize_as(lib.ones(3, 2))
        volatile = t.volatile
    (r * lib.arange(6.0).reshape(2, 3)).sum().backward()
    try:
        t.detach().resize(4)
    except RuntimeError as e:
        error = str(e)
    return [r.shape == (2, 3), s.shape == (3, 2), volatile, t.grad.tolist(),
            [str(w.message) for w in caught], error]


def test_deprecated_resize_and_volatile():
    assert _resize_outcomes(ember) == _resize_outcomes(torch)


_GMM = np.random.default_rng(1)


@pytest.mark.parametrize("shapes, offs", [
    (((6, 8), (2, 8, 4)), [2, 6]),
    (((4, 8), (8, 4)), [3, 8]),
    (((2, 4, 8), (8, 8)), [4, 8]),
    (((2, 4, 8), (2, 8, 4)), None),
])
def test_grouped_mm(shapes, offs):
    arrays = [_GMM.standard_normal(s).astype(np.float32) for s in shapes]
    results = []
    for lib in (ember, torch):
        a, b = (lib.tensor(x, requires_grad=True) for x in arrays)
        groups = None if offs is None else lib.tensor(offs, dtype=lib.int32)
        out = lib.nn.functional.grouped_mm(a, b, offs=groups)
        seed = np.random.default_rng(2).standard_normal(tuple(out.shape)).astype(np.float32)
        out.backward(lib.tensor(seed))     # (PyTorch's backward refuses a broadcast grad)
        results.append([out.detach().numpy(), a.grad.numpy(), b.grad.numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def _storage_facts(lib):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = lib.IntStorage([1, 2])
        facts = [type(s).__name__, str(s.dtype).split(".")[-1], s.tolist()]
        for dtype in (lib.float32, lib.float64, lib.int64, lib.bool, lib.uint8, lib.bfloat16):
            t = lib.ones(1, dtype=dtype)
            facts.append((t.storage_type().__name__, isinstance(t.storage(), lib.FloatStorage)))
    return facts


def test_legacy_storage_classes():
    assert _storage_facts(ember) == _storage_facts(torch)
