"""Gather/scatter behaviour the OpInfo entries (tests/ops/opdb/scatter.py, index_dim.py) do not
reach: scatter's deprecated src+reduce form, nonzero's tuple form, in-place writes through
views, and gradients at the edges PyTorch defines."""

import warnings

import numpy as np
import pytest

import ember
from ember import _warn


def _long(values):
    return ember.tensor(values, dtype=ember.int64)


@pytest.mark.parametrize("reduce,expected", [("add", [[5.0, 2.0, 5.0]]),
                                             ("multiply", [[4.0, 2.0, 6.0]])])
def test_scatter_src_reduce_combines_repeats(reduce, expected):
    x = ember.tensor([[1.0, 2.0, 3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ember.scatter(x, 1, _long([[0, 0, 2]]), ember.tensor([[2.0, 2.0, 2.0]]),
                            reduce=reduce)
    assert out.tolist() == expected


def test_scatter_src_reduce_warns_once_per_process():
    x, index, src = ember.zeros(1, 3), _long([[0]]), ember.ones(1, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.scatter(x, 1, index, src, reduce="add")
        x.clone().scatter_(1, index, src, reduce="multiply")
        ember.scatter(x, 1, index, 2.0, reduce="add")       # a number: never warns
    assert [str(w.message)[:38] for w in caught] == ["The reduce argument of torch.scatter w"]
    assert caught[0].filename == __file__               # it names the caller's line
    for call in (lambda: x.scatter(1, index, src, reduce="add"),
                 lambda: x.clone().scatter_(1, index, src, reduce="add")):
        _warn._WARNED_ONCE.clear()                      # a fresh process
        with pytest.warns(UserWarning, match="The reduce argument") as again:
            call()
        assert again[0].filename == __file__


def test_scatter_reduce_form_has_no_derivative():
    x = ember.ones(1, 3, requires_grad=True)
    out = ember.scatter(x, 1, _long([[0, 0]]), 2.0, reduce="add")
    with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
        out.sum().backward()


@pytest.mark.parametrize("shape", [(2, 3), (5,), (), (0, 2)])
def test_nonzero_as_tuple_matches_numpy(shape):
    x = ember.tensor(np.random.default_rng(0).integers(-1, 2, shape))
    got = ember.nonzero(x, as_tuple=True)
    want = np.nonzero(np.atleast_1d(x.numpy()))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype is ember.int64 and g.tolist() == w.tolist()
    assert [t.tolist() for t in ember.where(x)] == [t.tolist() for t in got]
    assert [t.tolist() for t in x.nonzero(as_tuple=True)] == [t.tolist() for t in got]


def test_nonzero_of_0dim():
    assert ember.nonzero(ember.tensor(3.0)).shape == (1, 0)
    assert ember.nonzero(ember.tensor(0.0)).shape == (0, 0)
    assert ember.nonzero(ember.tensor(0.0), as_tuple=True)[0].shape == (0,)


def test_in_place_through_a_transposed_view_writes_the_base():
    base = ember.zeros(3, 2)
    view = base.t()                                     # (2, 3), not contiguous
    view.scatter_add_(1, _long([[0, 0], [2, 1]]), ember.ones(2, 2))
    assert base.tolist() == [[2.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
    view.index_fill_(1, _long([-1]), 7.0)
    view.put_(_long([0]), ember.tensor([5.0]))
    assert base.tolist() == [[5.0, 0.0], [0.0, 1.0], [7.0, 7.0]]


def test_in_place_into_an_expanded_tensor_raises():
    x = ember.zeros(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.scatter_(1, _long([[0]]), 1.0)


def test_take_along_dim_checks_the_bounds_pytorch_leaves_unchecked():
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1 with size 3"):
        ember.take_along_dim(ember.zeros(2, 3), _long([[0, 3]]), 1)


def test_amax_gradient_counts_self_as_a_tie_when_include_self_is_false():
    # as PyTorch: input's own value equal to the result gets no gradient where scattered, yet
    # counts among the ties, so the src elements share 1/3 each
    x = ember.tensor([[5.0, 2.0]], requires_grad=True)
    src = ember.tensor([[5.0, 5.0]], requires_grad=True)
    out = ember.scatter_reduce(x, 1, _long([[0, 0]]), src, "amax", include_self=False)
    gx, gs = ember.autograd.grad(out.sum(), (x, src))
    assert gx.tolist() == [[0.0, 1.0]]
    assert np.allclose(gs.numpy(), [[1 / 3, 1 / 3]])


def test_scatter_reduce_takes_max_and_min_as_amax_and_amin():
    x, index = ember.zeros(3), _long([0, 0, 2])
    src = ember.tensor([1.0, 5.0, -2.0], requires_grad=True)
    out = ember.scatter_reduce(x, 0, index, src, "max")
    assert out.tolist() == [5.0, 0.0, 0.0]
    assert x.scatter_reduce(0, index, src, "min", include_self=False).tolist() == [1.0, 0.0, -2.0]
    (g,) = ember.autograd.grad(out.sum(), src)
    assert g.tolist() == [0.0, 1.0, 0.0]
    with pytest.raises(RuntimeError, match="must be either sum, prod, mean, amax or amin, got "
                                           "maximum"):
        ember.scatter_reduce(x, 0, index, src, "maximum")


def test_scatter_reduce_complex_gradient_raises():
    x = ember.ones(3, dtype=ember.complex128, requires_grad=True)
    # as PyTorch, when the call records (round 37; it used to be at backward)
    with pytest.raises(RuntimeError, match="does not support automatic differentiation"):
        ember.scatter_reduce(x, 0, _long([0]), ember.ones(1, dtype=ember.complex128), "sum")


def test_index_fill_tensor_value_gradient_counts_each_slice_once():
    x = ember.zeros(2, 3, requires_grad=True)
    value = ember.tensor(1.0, requires_grad=True)
    out = ember.index_fill(x, 1, _long([0, 0, -3]), value)      # one slice, named three times
    gx, gv = ember.autograd.grad(out.sum(), (x, value))
    assert gv.item() == 2.0
    assert gx.tolist() == [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]


def test_gather_backward_of_a_large_index_is_vectorized():
    # an embedding-sized lookup: a Python loop over 200k elements would take seconds
    import time
    table = ember.randn(1000, 64, requires_grad=True)
    index = ember.randint(0, 1000, (3000, 64))
    start = time.perf_counter()
    ember.gather(table, 0, index).sum().backward()
    assert time.perf_counter() - start < 1.0
    counts = np.zeros((1000, 64))
    np.add.at(counts, (index.numpy(), np.arange(64)), 1)
    assert np.array_equal(table.grad.numpy(), counts)


# --- index_reduce -------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_index_reduce_extremum_gradient_shares_ties_as_scatter_reduce(reduce, include_self):
    # with include_self=False input's own value gets no gradient where indexed but, as in
    # PyTorch, still counts among the ties there
    x = ember.tensor([[1.0, 5.0]], dtype=ember.float64, requires_grad=True)
    src = ember.tensor([[1.0, 5.0], [1.0, 2.0]], dtype=ember.float64, requires_grad=True)
    out = ember.index_reduce(x, 0, _long([0, 0]), src, reduce, include_self=include_self)
    gx, gs = ember.autograd.grad(out.sum(), (x, src))
    if include_self:
        expected_x = [[1 / 3, 0.5 if reduce == "amax" else 0.0]]
        expected_src = ([[1 / 3, 0.5], [1 / 3, 0.0]] if reduce == "amax" else
                        [[1 / 3, 0.0], [1 / 3, 1.0]])
    else:
        expected_x = [[0.0, 0.0]]
        expected_src = ([[1 / 3, 0.5], [1 / 3, 0.0]] if reduce == "amax" else
                        [[1 / 3, 0.0], [1 / 3, 1.0]])
    assert np.allclose(gx.numpy(), expected_x) and np.allclose(gs.numpy(), expected_src)
    scattered = ember.scatter_reduce(x, 0, _long([[0, 0], [0, 0]]), src, reduce,
                                     include_self=include_self)
    assert ember.autograd.grad(scattered.sum(), src)[0].tolist() == gs.tolist()


def test_index_reduce_in_place_through_a_view_and_16_bit_rounding():
    base = ember.zeros(3, 4)
    view = base.t()                             # (4, 3), not contiguous
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert view.index_reduce_(0, _long([1, 1]), ember.ones(2, 3) * 3, "mean") is view
        assert base[:, 1].tolist() == [2.0, 2.0, 2.0] and base._version == 1
        # 16-bit floats round after every step, as PyTorch's kernel does: 2048 + 1 + 1
        # stays 2048 in float16
        half = ember.full((3,), 2048.0, dtype=ember.float16)
        out = ember.index_reduce(half, 0, _long([0, 0]), ember.ones(2, dtype=ember.float16),
                                 "mean")
    assert out.tolist() == [682.5, 2048.0, 2048.0]


def test_index_reduce_warns_once_per_process():
    x, index, src = ember.ones(2, 2), _long([0]), ember.ones(1, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.index_reduce(x, 0, index, src, "prod")
        x.clone().index_reduce_(0, index, src, "amax")
    assert [str(w.message) for w in caught] == \
        ["index_reduce() is in beta and the API may change at any time."]
    assert caught[0].filename == __file__       # the caller's line, as PyTorch reports it


@pytest.mark.parametrize("call", [
    lambda x, i, s: x.index_reduce(0, i, s, "amax"),
    lambda x, i, s: x.index_reduce_(0, i, s, "mean"),
])
def test_index_reduce_warning_points_at_the_caller(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(ember.ones(2, 2), _long([0]), ember.ones(1, 2))
    assert [w.filename for w in caught] == [__file__]


def test_index_add_out_of_range_errors_depend_on_the_rank():
    # PyTorch's 1-D kernel reports IndexError, the N-d one names the dim
    with pytest.raises(IndexError, match="^index out of range in self$"):
        ember.zeros(3).index_add_(0, ember.tensor([3]), ember.ones(1))
    with pytest.raises(IndexError, match="^index out of range in self$"):
        ember.zeros(3).index_add(0, ember.tensor([-4]), ember.ones(1))
    with pytest.raises(RuntimeError, match="^index 2 is out of bounds for dimension 1 with "
                                           "size 2$"):
        ember.zeros(3, 2).index_add(1, ember.tensor([2]), ember.ones(3, 1))


def test_take_along_dim_grad_fn_is_gather_backward_as_pytorch():
    x = ember.arange(6.0).reshape(2, 3).requires_grad_()
    out = ember.take_along_dim(x, _long([[2], [0]]), 1)
    assert out.grad_fn.name() == "GatherBackward0"
    assert "grad_fn=<GatherBackward0>" in repr(ember.take_along_dim(x, _long([5, 0])))
    out.sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
