"""Behaviours of the sorting family that OpInfo samples cannot express: once-per-process
warnings, gradients through NaN, backward errors of ops without derivatives, and PyTorch's
results where its algorithms (not a formula) define them. Expected values come from
PyTorch 2.13."""

import warnings

import numpy as np
import pytest

import ember

NAN = float("nan")


def _values(t):
    return np.asarray(t.detach()).tolist()


# --- cross's default dim ------------------------------------------------------------------------

def test_cross_default_dim_is_first_of_size_3_and_warns_once(monkeypatch):
    a, b = ember.randn(3, 4), ember.randn(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = ember.cross(a, b)
        second = a.cross(b)
    assert len(caught) == 1 and caught[0].category is UserWarning
    assert str(caught[0].message).startswith(
        "Using torch.cross without specifying the dim arg is deprecated.")
    expected = ember.cross(a, b, dim=0)
    assert ember.equal(first, expected) and ember.equal(second, expected)


def test_cross_default_dim_follows_the_input_not_the_other(monkeypatch):
    a, b = ember.randn(1, 3), ember.randn(3, 3)    # other's first dim of size 3 is dim 0
    assert ember.equal(ember.cross(a, b), ember.cross(a, b, dim=1))
    with pytest.raises(RuntimeError, match="no dimension of size 3 in input"):
        ember.cross(ember.ones(2, 4), ember.ones(2, 4))


# --- searchsorted, bucketize --------------------------------------------------------------------

def test_nan_boundaries_follow_pytorchs_bisection():
    seq = ember.tensor([1., 2., 2., 3., NAN])
    values = ember.tensor([[2., 0., 5., NAN, 3.]])
    assert _values(ember.searchsorted(seq, values)) == [[1, 0, 5, 5, 5]]
    assert _values(ember.searchsorted(seq, values, right=True)) == [[5, 0, 5, 5, 5]]
    assert _values(ember.bucketize(values, seq)) == [[1, 0, 5, 5, 5]]


def test_noncontiguous_operands_warn_once_each(monkeypatch):
    seq = ember.tensor([1., 2., 3.])
    values = ember.ones(4, 3).t()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.searchsorted(seq, values)
        ember.searchsorted(seq, values)
        ember.bucketize(values, seq)
        ember.searchsorted(ember.ones(3, 4).t(), ember.ones(4, 2))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2
    assert messages[0].startswith("torch.searchsorted(): input value tensor is non-contiguous")
    assert messages[1].startswith("torch.searchsorted(): boundary tensor is non-contiguous")


def test_bin_indices_take_no_gradient():
    seq = ember.tensor([1., 2., 3.], requires_grad=True)
    assert not ember.searchsorted(seq, ember.tensor([2.5])).requires_grad
    assert not ember.histc(ember.tensor([1., 2.], requires_grad=True), 4).requires_grad


# --- histogram ----------------------------------------------------------------------------------

def test_histogram_with_unsorted_bins_bisects_them_as_given():
    x = ember.tensor([1., 2., 1., 2.5, 4., 0.])
    hist, edges = ember.histogram(x, ember.tensor([3., 1., 5.]))
    assert _values(hist) == [0., 1.] and _values(edges) == [3., 1., 5.]


def test_histogram_result_names_its_fields():
    result = ember.tensor([1., 2.]).histogram(2)
    assert _values(result.hist) == [1., 1.] and _values(result.bin_edges) == [1., 1.5, 2.]
    assert repr(result).startswith("ember.return_types.histogram(\nhist=tensor(")


# --- backward through ops without a derivative --------------------------------------------------

@pytest.mark.parametrize("call,error,message", [
    (lambda x: ember.unique(x), NotImplementedError,
     "the derivative for '_unique2' is not implemented."),
    (lambda x: ember.unique(x, return_counts=True)[0], NotImplementedError,
     "the derivative for '_unique2' is not implemented."),
    (lambda x: ember.unique(x, dim=0), NotImplementedError,
     "the derivative for 'unique_dim' is not implemented."),
    (lambda x: ember.unique_consecutive(x), NotImplementedError,
     "the derivative for 'unique_consecutive' is not implemented."),
    (lambda x: ember.histogram(x, 3).hist, RuntimeError,
     "derivative for aten::histogram is not implemented"),
    (lambda x: ember.bincount(ember.tensor([0, 2, 2, 1]), x), RuntimeError,
     "derivative for aten::bincount is not implemented"),
])
def test_backward_raises_where_pytorch_has_no_derivative(call, error, message):
    x = ember.tensor([2., 1., 2., 3.], requires_grad=True)
    out = call(x)
    assert out.requires_grad
    with pytest.raises(error, match=message):
        out.sum().backward()


# --- quantile gradients through NaN -------------------------------------------------------------

@pytest.mark.parametrize("fn,grad_x,grad_q", [
    (ember.quantile, [[0.1, 0.5, 1.4, 0.], [2., 0., 0., 0.]], [3., 3.]),
    (ember.nanquantile, [[0.1, 0.5, 1.4, 0.], [0., 0.4, 1.6, 0.]], [5., 3.]),
])
def test_quantile_gradient_with_nan_rows(fn, grad_x, grad_q):
    x = ember.tensor([[1., 3., 2., 7.], [NAN, 1., 2., 3.]], dtype=ember.float64,
                     requires_grad=True)
    q = ember.tensor([0.3, 0.5], dtype=ember.float64, requires_grad=True)
    gx, gq = ember.autograd.grad(fn(x, q, dim=1).sum(), [x, q])
    np.testing.assert_allclose(_values(gx), grad_x, atol=1e-12)
    np.testing.assert_allclose(_values(gq), grad_q, atol=1e-12)


def test_quantile_q_gradient_only_for_linear_interpolation():
    x = ember.tensor([1., 3., 2., 7.], requires_grad=True)
    q = ember.tensor([0.3], requires_grad=True)
    out = ember.quantile(x, q, interpolation="midpoint")
    gx, gq = ember.autograd.grad(out.sum(), [x, q], allow_unused=True)
    assert _values(gx) == [0.5, 0., 0.5, 0.] and gq is None


# --- shapes PyTorch's out= variants cannot produce ----------------------------------------------

def test_diff_along_an_empty_dim_is_empty():
    out = ember.diff(ember.ones(2, 0))
    assert out.shape == (2, 0)


def test_mode_picks_the_smallest_most_frequent_value_and_its_last_index():
    values, indices = ember.tensor([[1, 5, 3, 5, 5, 1, 1], [2, 5, 3, 5, 2, 1, 0]]).mode()
    assert _values(values) == [1, 2] and _values(indices) == [6, 4]


def test_topk_unsorted_returns_the_same_selection():
    x = ember.randn(20)
    unsorted = ember.topk(x, 5, sorted=False).values
    assert ember.equal(unsorted.sort(descending=True).values, ember.topk(x, 5).values)


def test_trapz_is_trapezoid():
    assert ember.trapz._ember_op is ember.trapezoid._ember_op
    assert _values(ember.trapz(ember.tensor([1., 2., 4.]), dx=2)) == 9.0
