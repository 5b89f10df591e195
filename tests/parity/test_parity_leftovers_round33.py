"""Round-33 leftovers against PyTorch: cumprod's gradient with inf/NaN beside zeros (first
order and under create_graph, double backward), the coalesced flag and errors of sparse COO
transposes, sparse COO under a meta default device, and a bare device index without a GPU.
Skipped without PyTorch."""

import math
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

INF, NAN = math.inf, math.nan
CASES = [[2, 0, 3, INF], [2, 0, 3, NAN], [2, 0, 3, -INF], [INF, 0, 3, 4], [2, INF, 0, 3],
         [0, 0, 3, 4], [2, 0, 0, INF], [1, 2, 0, 3, 0, INF], [NAN, 2, 0, 3], [2, 3, INF, 4],
         [0, INF], [INF, 0], [2, 0, INF, 0], [1, 2, 3, 0], [INF, 0, 0], [0, INF, 0, 5],
         [2, -INF, 0, 0, NAN]]
WEIGHTS = [([3, 0, 2, 5], [1, INF, 2, 3]), ([3, 0, 2, 5], [1, 2, INF, 3]),
           ([3, 0, 0, 5], [1, 2, 3, INF]), ([3, 0, 2, 5], [NAN, 1, 1, 1]), ([0, 0], [INF, INF])]


def _cumprod_grads(lib, values, weights, dim=0):
    """The gradient of ``cumprod`` against ``weights``, without and with create_graph, and (for
    finite values) the double backward of the latter's sum."""
    out = []
    for create in (False, True):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad(x.cumprod(dim), x, lib.tensor(weights, dtype=lib.float64),
                               create_graph=create)
        out.append(g.detach().numpy())
    if np.isfinite(values).all() and np.isfinite(weights).all():
        out.append(lib.autograd.grad(g.sum(), x)[0].numpy())
    return out


@pytest.mark.parametrize("values", CASES)
def test_cumprod_grad_with_inf_and_nan_after_zeros(values):
    ones = [1.0] * len(values)
    for ours, theirs in zip(_cumprod_grads(ember, values, ones),
                            _cumprod_grads(torch, values, ones), strict=True):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("values,weights", WEIGHTS)
def test_cumprod_grad_with_inf_and_nan_in_the_incoming_gradient(values, weights):
    for ours, theirs in zip(_cumprod_grads(ember, values, weights),
                            _cumprod_grads(torch, values, weights), strict=True):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("values", [[2, 0, 3, 4], [0, 0, 3, 4], [1, 2, 0, 3, 0, 5], [0, 2.5]])
def test_cumprod_double_backward_with_zeros(values):
    weights = [float(i + 1) for i in range(len(values))]
    for ours, theirs in zip(_cumprod_grads(ember, values, weights),
                            _cumprod_grads(torch, values, weights), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-14)


def test_cumprod_grad_along_each_dim_of_a_matrix():
    values = [[2., 0, 3, INF], [1, 2, 0, NAN], [0, 3, INF, 1]]
    weights = [[1., 2, 3, 4], [5, 6, 7, 8], [1, -1, 2, -2]]
    for dim in (0, 1, -1):
        for ours, theirs in zip(_cumprod_grads(ember, values, weights, dim),
                                _cumprod_grads(torch, values, weights, dim), strict=True):
            np.testing.assert_array_equal(ours, theirs)


def test_cumprod_grad_of_complex_input_with_zeros():
    values = [[1 + 2j, 0, 3 - 1j, 2j], [0, 1j, 0, 2]]
    weights = [[1 + 1j, 2, 3j, 1], [1, 2, 3, 4j]]
    for lib_pair in zip(*(_complex_grads(lib, values, weights) for lib in (ember, torch))):
        np.testing.assert_allclose(*lib_pair, rtol=1e-14, atol=1e-14)


def _complex_grads(lib, values, weights):
    out = []
    for create in (False, True):
        x = lib.tensor(values, dtype=lib.complex128, requires_grad=True)
        g, = lib.autograd.grad(x.cumprod(1), x, lib.tensor(weights, dtype=lib.complex128),
                               create_graph=create)
        out.append(g.detach().numpy())
    return out


def _coo(lib, indices, values, size, coalesce=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = lib.sparse_coo_tensor(indices, values, size)
    return t.coalesce() if coalesce else t


def _transposes(lib):
    hybrid = _coo(lib, [[1], [2]], [[1., 2.]], (3, 3, 2))
    one = _coo(lib, [[1], [2]], [1.], (3, 3))
    two = _coo(lib, [[0, 1], [2, 0]], [1., 2.], (3, 3), coalesce=True)
    empty = _coo(lib, lib.zeros(2, 0, dtype=lib.long), [], (3, 3), coalesce=True)
    cube = _coo(lib, [[0], [1], [2]], [1.], (2, 3, 3), coalesce=True)
    total = hybrid + hybrid.transpose(0, 1)
    return ([t.is_coalesced() for t in (
        hybrid, hybrid.transpose(0, 1), hybrid.transpose(1, 0), hybrid.transpose(0, 0),
        hybrid.transpose(2, 2), hybrid.transpose(-1, 2), hybrid.coalesce().transpose(0, 1),
        one.t(), one.coalesce().t(), two.t(), empty.t(), cube.transpose(1, 2),
        hybrid.transpose(0, 1).transpose(0, 1), total)],
        total._indices().tolist(), total._values().tolist())


def test_sparse_transpose_coalesced_flag():
    assert _transposes(ember) == _transposes(torch)


@pytest.mark.parametrize("dims", [(1, 2), (-1, -2), (0, 2)])
def test_sparse_transpose_of_a_dense_dim_raises(dims):
    def message(lib):
        with pytest.raises(RuntimeError) as info:
            _coo(lib, [[1], [2]], [[1., 2.]], (3, 3, 2)).transpose(*dims)
        return str(info.value)
    assert message(ember) == message(torch)


def _meta_coo(lib):
    lib.set_default_device("meta")
    try:
        s = _coo(lib, [[0, 1], [1, 0]], [1., 2.], (2, 2))
    finally:
        lib.set_default_device(None)    # (torch's "cpu" would leave a device mode installed)
    return (s.device.type, str(s.layout).split(".")[-1], list(s.shape), s._nnz(),
            s._indices().device.type, s._values().device.type, s.is_coalesced())


def test_sparse_coo_tensor_under_a_meta_default_device():
    assert _meta_coo(ember) == _meta_coo(torch)


@pytest.mark.skipif(torch.cuda.is_available() or ember.cuda.is_available(),
                    reason="the error is for a machine without a GPU")
@pytest.mark.parametrize("call", [lambda lib: lib.device(0), lambda lib: lib.Tensor(2, device=0),
                                  lambda lib: lib.zeros(2, device=0),
                                  lambda lib: lib.tensor(2., device=0)])
def test_bare_device_index_without_a_gpu(call):
    def message(lib):
        with pytest.raises(RuntimeError) as info:
            call(lib)
        return str(info.value)
    assert message(ember) == message(torch) == ("Cannot access accelerator device when none "
                                                "is available.")



def _same(ours, theirs, rtol):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert (np.isnan(ours) == np.isnan(theirs)).all(), (ours, theirs)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=rtol)


def _with_zeros(rng, shape, dim, dtype, special):
    """Random values with 1 or 2 zeros per slice along ``dim`` and sometimes ``special``."""
    x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dtype.is_complex else 0)
    moved = np.moveaxis(x, dim, -1)
    for idx in np.ndindex(moved.shape[:-1]):
        moved[idx + (rng.choice(moved.shape[-1], 1 + sum(idx) % 2, replace=False),)] = 0
        if special is not None and rng.random() < 0.5:
            moved[idx + (rng.integers(moved.shape[-1]),)] = special
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("special", [None, INF, NAN])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_cumprod_grad_with_zeros_along_each_dim(dtype, special, dim):
    rng = np.random.default_rng(dim)
    values = _with_zeros(rng, (3, 4, 5), dim, getattr(torch, dtype), special)
    weights = rng.standard_normal((3, 4, 5))
    weights.flat[rng.choice(60, 4, replace=False)] = [0, INF, -INF, 0]
    for create in (False, True):
        grads = []
        for lib in (ember, torch):
            x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
            w = lib.tensor(weights, dtype=getattr(lib, dtype))
            grads.append(lib.autograd.grad(x.cumprod(dim), x, w, create_graph=create)[0]
                         .detach().numpy())
        _same(*grads, 1e-5 if dtype == "float32" else 1e-10)


@pytest.mark.parametrize("weights", [[INF, 1, 2, 3, -1], [1, 2, NAN, 3, 4], [0, -INF, 1, INF, 2]])
def test_cumprod_double_backward_with_inf_in_the_incoming_gradient(weights):
    values, v = [[2, 0, 3, -1.5, 0.5], [0, 2, 0, 3, 4]], [1, -2, 0.5, 3, 0.25]
    grads = []
    for lib in (ember, torch):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        w = lib.tensor([weights, weights[::-1]], dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad(x.cumprod(1), x, w, create_graph=True)
        gx, gw = lib.autograd.grad((g * lib.tensor(v, dtype=lib.float64)).sum(), (x, w))
        grads.append([t.detach().numpy() for t in (g, gx, gw)])
    for ours, theirs in zip(*grads, strict=True):
        _same(ours, theirs, 1e-12)
