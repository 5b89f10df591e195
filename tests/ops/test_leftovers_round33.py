"""Round-33 leftovers, checked against closed forms without PyTorch: cumprod's gradient with
inf/NaN beside zeros, sparse COO transposes' coalesced flag and errors, sparse COO under a meta
default device, a bare device index without a GPU."""

import math
import warnings

import numpy as np
import pytest

import ember

INF, NAN = math.inf, math.nan


def _grad(values, create_graph=False):
    x = ember.tensor(values, dtype=ember.float64, requires_grad=True)
    g, = ember.autograd.grad(x.cumprod(0).sum(), x, create_graph=create_graph)
    return g.detach().numpy()


@pytest.mark.parametrize("values,expected", [
    # before the first zero: sum_{k<z} prod_{j<=k, j!=i} x_j; at it: the product before it times
    # the running products after it up to the second zero; after it: 0
    ([2, 0, 3, INF], [1, INF, 0, 0]),
    ([2, 0, 0, INF], [1, 2, 0, 0]),
    ([1, 2, 0, 3, 0, INF], [3, 1, 8, 0, 0, 0]),
    ([2, 0, INF, 0], [1, NAN, 0, 0]),
    ([INF, 0, 0], [NAN, INF, 0]),
    ([2, 0, 3, NAN], [1, NAN, 0, 0]),
])
def test_cumprod_grad_keeps_inf_after_a_zero_out_of_earlier_entries(values, expected):
    np.testing.assert_array_equal(_grad(values), expected)


@pytest.mark.parametrize("values,expected", [
    # sum over k >= i of prod_{j<=k, j!=i} x_j, each product taken as it comes
    ([2, 0, 3, INF], [NAN, INF, NAN, 0]),
    ([INF, 0, 3, 4], [1, INF, NAN, NAN]),
    ([2, INF, 0, 3], [NAN, 2, INF, NAN]),
])
def test_cumprod_grad_under_create_graph_with_inf(values, expected):
    np.testing.assert_array_equal(_grad(values, create_graph=True), expected)


@pytest.mark.parametrize("create_graph", [False, True])
def test_cumprod_grad_with_zeros_matches_the_derivative(create_graph):
    rng = np.random.default_rng(3)
    values = rng.standard_normal((3, 5))
    values[0, 1] = values[1, 1] = values[1, 3] = values[2, 0] = 0
    x = ember.tensor(values, requires_grad=True)
    w = rng.standard_normal((3, 5))
    g, = ember.autograd.grad(x.cumprod(1), x, ember.tensor(w), create_graph=create_graph)
    expected = np.zeros_like(values)
    for r in range(3):
        for i in range(5):
            for k in range(i, 5):
                expected[r, i] += w[r, k] * np.prod(np.delete(values[r, :k + 1], i))
    np.testing.assert_allclose(g.detach().numpy(), expected, rtol=1e-12, atol=1e-12)


def _coo(indices, values, size, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ember.sparse_coo_tensor(indices, values, size, **kwargs)


def test_sparse_transpose_drops_the_coalesced_flag_even_for_one_entry():
    hybrid = _coo([[1], [2]], [[1., 2.]], (3, 3, 2))
    assert hybrid.is_coalesced()
    assert not hybrid.transpose(0, 1).is_coalesced()
    assert not hybrid.transpose(0, 1).transpose(0, 1).is_coalesced()
    assert hybrid.transpose(1, 1).is_coalesced() and hybrid.transpose(2, -1).is_coalesced()
    empty = _coo(ember.zeros(2, 0, dtype=ember.long), [], (3, 3)).coalesce()
    assert empty.t().is_coalesced()
    total = hybrid + hybrid.transpose(0, 1)
    assert not total.is_coalesced()
    assert total._indices().tolist() == [[1, 2], [2, 1]]
    assert total._values().tolist() == [[1., 2.], [1., 2.]]


def test_sparse_transpose_of_a_dense_dim_raises():
    hybrid = _coo([[1], [2]], [[1., 2.]], (3, 3, 2))
    with pytest.raises(RuntimeError, match=r"^sparse transpose: transposed dimensions must be "
                                           r"sparse Got sparse_dim: 2, d0: 2, d1: 1$"):
        hybrid.transpose(-1, -2)
    dense_dims = _coo([[1]], ember.ones(1, 2, 3), (2, 2, 3))
    with pytest.raises(RuntimeError, match="sparse_dim: 1, d0: 1, d1: 2"):
        dense_dims.transpose(1, 2)


@pytest.mark.skipif(ember.cuda.is_available(), reason="the error is for a machine without a GPU")
@pytest.mark.parametrize("call", [lambda: ember.device(0), lambda: ember.Tensor(2, device=0),
                                  lambda: ember.ones(2).to(0)])
def test_bare_device_index_without_a_gpu(call):
    with pytest.raises(RuntimeError, match=r"^Cannot access accelerator device when none is "
                                           r"available\.$"):
        call()


def test_sparse_coo_tensor_under_a_meta_default_device():
    ember.set_default_device("meta")
    try:
        s = _coo([[0, 1], [1, 0]], [1., 2.], (2, 2))
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            _coo([[0, 1], [1, 0]], [1., 2.], (2, 2), check_invariants=True)
    finally:
        ember.set_default_device("cpu")
    assert (s.device.type, s.layout, tuple(s.shape), s._nnz()) == ("meta", ember.sparse_coo,
                                                                    (2, 2), 2)
    assert s._indices().device.type == "meta" and not s.is_coalesced()



def _others(values, i, k, skip=()):
    """prod_{j<=k, j != i, j not in skip} x_j."""
    return np.prod([v for j, v in enumerate(values[:k + 1]) if j != i and j not in skip])


@pytest.mark.parametrize("weights", [[INF, 1., 2., -1.], [1., NAN, 2., 3.], [2., -INF, 1., 0.5]])
def test_cumprod_double_backward_with_inf_in_the_incoming_gradient(weights):
    # d/dw_k of sum_i v_i grad_i is sum_{i<=k} v_i prod_{j<=k, j!=i} x_j, finite for finite x;
    # d/dx_m takes the w_k for which x_m is a factor of some product (m <= k), no others
    values, v = [2., 0., 3., -1.5], [1., -2., 0.5, 3.]
    x = ember.tensor(values, dtype=ember.float64, requires_grad=True)
    w = ember.tensor(weights, dtype=ember.float64, requires_grad=True)
    g, = ember.autograd.grad(x.cumprod(0), x, w, create_graph=True)
    gx, gw = ember.autograd.grad((g * ember.tensor(v, dtype=ember.float64)).sum(), (x, w))
    n = len(values)
    expected_w = [sum(v[i] * _others(values, i, k) for i in range(k + 1)) for k in range(n)]
    np.testing.assert_allclose(gw.numpy(), expected_w, rtol=1e-14)
    expected_x = [sum(v[i] * weights[k] * _others(values, i, k, (m,))
                      for i in range(n) for k in range(max(i, m), n) if i != m) for m in range(n)]
    np.testing.assert_allclose(gx.numpy(), expected_x, rtol=1e-14)
