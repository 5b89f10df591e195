"""Regression tests for the gather / scatter family bugs the round-37 differential fuzzer found
(tests/parity/_scatter_fuzz_round37_gen.py); the expected values are PyTorch's."""

import warnings

import pytest

import ember


def _long(values):
    return ember.tensor(values, dtype=ember.int64)


def _raises(error, match, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=match):
            fn()


# --- scatter, scatter_add, scatter_reduce, gather ---------------------------------------------

def test_an_empty_index_of_any_dtype_scatters_nothing():
    x = ember.tensor([1.0, 2.0, 3.0])
    empty = ember.zeros(0)
    assert x.scatter(0, empty, empty).tolist() == [1.0, 2.0, 3.0]
    assert x.scatter(0, empty, 5.0).tolist() == [1.0, 2.0, 3.0]
    assert x.scatter_add(0, empty, empty).tolist() == [1.0, 2.0, 3.0]
    assert x.scatter_reduce(0, empty, empty, "sum").tolist() == [1.0, 2.0, 3.0]
    out = x.gather(0, empty)
    assert out.shape == (0,) and out.dtype is ember.float32
    _raises(RuntimeError, "reduce argument must be either sum, prod, mean, amax or amin",
            lambda: x.scatter_reduce(0, empty, empty, "bad"))


def test_scatter_checks_src_dims_as_pytorch():
    x = ember.zeros(2, 3)
    _raises(RuntimeError, "same number of dimensions as src tensor",
            lambda: x.scatter(1, _long([[0, 1]]), ember.tensor(1.0)))
    _raises(RuntimeError, "same number of dimensions as src tensor",        # before self's
            lambda: x.scatter_add(0, _long([[0], [1], [0]]), ember.tensor(1.0)))
    _raises(IndexError, r"Dimension out of range \(expected to be in range of \[-1, 0\], but "
            r"got 1\)", lambda: x.scatter_reduce(0, _long([[0]]), ember.ones(4), "sum"))
    _raises(RuntimeError, r"Expected index \[3\] to be no larger than self \[\] apart from "
            r"dimension 0 and to be no larger size than src \[\]",
            lambda: ember.tensor(1.0).scatter_add(0, _long([0, 0, 0]), ember.tensor(2.0)))


def test_scatter_checks_reduce_after_dtypes_and_shapes():
    x = ember.zeros(3)
    _raises(IndexError, "Dimension out of range",
            lambda: x.scatter(4, _long([0]), ember.ones(1), reduce="bad"))
    _raises(RuntimeError, "Expected self.dtype to be equal to src.dtype",
            lambda: x.scatter(0, _long([0]), ember.ones(1, dtype=ember.int64), reduce="bad"))
    _raises(RuntimeError, r"scatter\(\): Expected dtype int32/int64 for index",
            lambda: x.scatter_reduce(0, ember.zeros(1), ember.ones(1), "bad"))
    _raises(RuntimeError, "reduce argument must be either add or multiply",
            lambda: x.scatter(0, _long([7]), ember.ones(1), reduce="mean"))
    _raises(TypeError, r"scatter_reduce\(\): argument 'reduce' must be str, not NoneType",
            lambda: x.scatter_reduce(0, _long([0]), ember.ones(1), reduce=None))


def test_scatter_reduce_kernel_refusals_come_after_the_empty_index():
    c = ember.zeros(3, dtype=ember.complex64)
    assert c.scatter_reduce(0, _long([]), ember.zeros(0, dtype=ember.complex64),
                            "amax").tolist() == [0j, 0j, 0j]
    b = ember.zeros(3, dtype=ember.bool)
    _raises(NotImplementedError, "\"div_floor_cpu\" not implemented for 'Bool'",
            lambda: b.scatter_reduce(0, _long([]), ember.zeros(0, dtype=ember.bool), "mean"))


def test_complex_reductions_refuse_grad_when_called():
    x = ember.ones(3, dtype=ember.complex128, requires_grad=True)
    src = ember.ones(1, dtype=ember.complex128)
    _raises(RuntimeError, "scatter_reduce does not support automatic differentiation",
            lambda: x.scatter_reduce(0, _long([0]), src, "sum"))
    x2 = ember.ones(1, 4, dtype=ember.complex64, requires_grad=True)
    _raises(RuntimeError, "index_reduce does not support automatic differentiation",
            lambda: x2.index_reduce(0, _long([0]), ember.ones(1, 4, dtype=ember.complex64),
                                    "mean"))


def test_complex_scatter_reduce_in_place_has_a_gradient():
    x = ember.ones(3, dtype=ember.complex64, requires_grad=True)
    y = x * 1
    y.scatter_reduce_(0, _long([1]), ember.full((1,), 2 + 0j, dtype=ember.complex64), "sum")
    y.abs().sum().backward()
    assert x.grad.tolist() == [1 + 0j, 1 + 0j, 1 + 0j]


def test_scatter_reduce_mean_backward_over_an_empty_dim():
    x = ember.zeros(3, 0, 3, dtype=ember.float64, requires_grad=True)
    src = ember.ones(3, 1, 1, dtype=ember.float64, requires_grad=True)
    y = x.scatter_reduce(-1, ember.zeros(3, 0, 0, dtype=ember.int64), src, "mean",
                         include_self=False)
    y.sum().backward()                  # (was a ZeroDivisionError)
    assert x.grad.shape == (3, 0, 3)
    assert src.grad.tolist() == [[[0.0]], [[0.0]], [[0.0]]]


# --- take, take_along_dim ---------------------------------------------------------------------

def test_take_results_are_contiguous():
    x = ember.arange(10.0)
    index = _long([[1, 2, 3], [4, 5, 6]]).t()
    out = x.take(index)
    assert out.stride() == (2, 1) and out.tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    assert x.take(_long(3)).shape == ()
    along = ember.take_along_dim(x.reshape(2, 5), _long([[0, 1], [1, 0]]).t(), 1)
    assert along.stride() == (2, 1) and along.tolist() == [[0.0, 1.0], [6.0, 5.0]]


def test_take_along_dim_checks_in_pytorchs_order():
    scalar = ember.tensor(1.0)
    _raises(RuntimeError, "input and indices should have the same number of dimensions",
            lambda: ember.take_along_dim(scalar, _long([0]), 5))
    _raises(RuntimeError, "input and indices should have the same number of dimensions",
            lambda: ember.take_along_dim(scalar, ember.zeros(0, dtype=ember.int32), 0))
    _raises(TypeError, r"take_along_dim\(\): argument 'dim' \(position 3\) must be int, not "
            r"float", lambda: ember.take_along_dim(ember.zeros(3), _long([0]).bool(), 1.5))
    _raises(RuntimeError, r"gather\(\): Expected dtype int32/int64 for index",
            lambda: ember.take_along_dim(ember.zeros(3), ember.zeros(2)))
    assert ember.take_along_dim(ember.zeros(3), ember.zeros(0)).shape == (0,)


# --- index_add, index_reduce, index_copy, index_select ----------------------------------------

def test_index_ops_with_a_0d_source_and_several_indices():
    x = ember.tensor(1.0)
    _raises(IndexError, "Dimension specified as 0 but tensor has no dimensions",
            lambda: x.index_add(0, _long([0, 0]), ember.tensor(1.0)))
    _raises(IndexError, "Dimension specified as 0 but tensor has no dimensions",
            lambda: ember.zeros(3, 2).index_reduce(0, _long([0, 0]), ember.tensor(1.0),
                                                   "prod"))
    _raises(IndexError, r"When source is scalar, index should have one element \(got 0\)",
            lambda: x.index_copy(0, _long([]), ember.tensor(1)))
    assert x.index_add(0, _long([0]), ember.tensor(3.0)).item() == 4.0


def test_index_add_bounds_and_empty_tensors():
    assert ember.zeros(0, 5).index_add(0, _long([3]), ember.ones(1, 5)).shape == (0, 5)
    assert ember.zeros(2, 0, 3).index_add(1, _long([1]), ember.ones(2, 1, 3)).shape == \
        (2, 0, 3)
    x = ember.zeros(3, 3, 5)
    _raises(RuntimeError, "index 7 is out of bounds for dimension 0 with size 3",
            lambda: x.index_add(0, _long([7]), ember.ones(1, 3, 5)))
    _raises(IndexError, "index out of range in self",          # an int32 index
            lambda: x.index_add(0, _long([7]).int(), ember.ones(1, 3, 5)))
    _raises(IndexError, "index out of range in self",          # a middle dim
            lambda: x.index_add(1, _long([7]), ember.ones(3, 1, 5)))
    _raises(IndexError, "index out of range in self",          # alpha other than 1
            lambda: x.index_add(2, _long([7]), ember.ones(3, 3, 1), alpha=2))
    _raises(IndexError, "index out of range in self",
            lambda: ember.zeros(0).index_add(0, _long([3]), ember.ones(1)))


def test_index_reduce_checks():
    _raises(IndexError, r"select\(\): index 0 out of range for tensor of size \[0, 3\] at "
            r"dimension 0", lambda: ember.zeros(0, 3).index_reduce(0, _long([5]),
                                                                   ember.zeros(1, 3), "amin"))
    _raises(IndexError, "index 7 is out of bounds for dimension 1 with size 5",
            lambda: ember.zeros(3, 5).index_reduce(1, _long([7]), ember.zeros(3, 1), "prod",
                                                   include_self=False))
    _raises(IndexError, "index out of range in self",
            lambda: ember.zeros(3, 5).index_reduce(1, _long([-1]), ember.zeros(3, 1), "prod",
                                                   include_self=False))
    _raises(TypeError, r"index_reduce\(\): argument 'dim' \(position 1\) must be int, not "
            r"float", lambda: ember.zeros(3, 4).index_reduce(1.5, _long([0]),
                                                             ember.zeros(3, 1), "sum"))
    c = ember.zeros(2, 5, dtype=ember.complex64)
    _raises(IndexError, "index out of range in self",          # before the kernel's dtype
            lambda: c.index_reduce(-1, _long([7]), ember.zeros(2, 1, dtype=ember.complex64),
                                   "amax"))
    b = ember.zeros(5, dtype=ember.bool)
    _raises(NotImplementedError, "\"index_func_\" not implemented for 'Bool'",
            lambda: b.index_reduce(0, _long([7, 9]), ember.zeros(2, dtype=ember.bool), "amax"))


def test_index_copy_checks_in_pytorchs_order():
    x = ember.zeros(2, 1)
    _raises(RuntimeError, "Source/destination tensor must have same slice shapes",
            lambda: x.index_copy(0, _long([0, 1]), ember.zeros(3, 2)))
    _raises(IndexError, "When source and destination are not scalars",
            lambda: x.index_copy(0, _long([0, 1]).int(), ember.zeros(3, 2, 1)))
    _raises(IndexError, r"Index should have dimension 1 or 0 \(got 2\)",
            lambda: ember.tensor(1.0).index_copy(0, _long([[0]]).int(), ember.tensor(1.0)))


def test_index_select_of_a_0d_tensor_counts_before_the_dtype():
    _raises(RuntimeError, "Index to scalar can have only 1 value, got 2 value",
            lambda: ember.tensor(1.0).index_select(0, _long([0, 0]).short()))
    _raises(RuntimeError, "Expected dtype int32 or int64 for index",
            lambda: ember.tensor(1.0).index_select(0, _long([0]).short()))


# --- index_fill --------------------------------------------------------------------------------

def test_index_fill_checks_in_pytorchs_order():
    x = ember.zeros(2)
    _raises(IndexError, r"index_fill_\(\): Expected dtype int64 for index",
            lambda: x.index_fill(-2, _long([0]).int(), 1.0))
    _raises(RuntimeError, "only supports a 0-dimensional value tensor",
            lambda: x.index_fill(-2, _long([0]), ember.zeros(1)))
    ints = ember.zeros(2, dtype=ember.int32)
    _raises(RuntimeError, "value cannot be converted to type int without overflow",
            lambda: ints.index_fill(0, _long([5]), float("inf")))
    _raises(RuntimeError, "Converting complex Scalar to non-complex type",
            lambda: ints.index_fill(0, _long([5]), 1j))
    _raises(RuntimeError, "Index has to be a vector/scalar",
            lambda: ints.index_fill(0, _long([[5]]), 1))
    assert ember.zeros(2, 0).index_fill(0, _long([5]), 1.0).shape == (2, 0)


def test_index_fill_of_a_0d_tensor_gives_the_value_its_gradient():
    x = ember.tensor(1.0, requires_grad=True)
    value = ember.tensor(2.0, requires_grad=True)
    gx, gv = ember.autograd.grad(x.clone().index_fill_(-1, _long([0, -1]), value), (x, value))
    assert (gx.item(), gv.item()) == (0.0, 1.0)
    y = ember.tensor(1.0, requires_grad=True)
    gy, gv = ember.autograd.grad(y.clone().index_fill_(-1, _long([]), value), (y, value))
    assert (gy.item(), gv.item()) == (1.0, 0.0)


# --- masked_fill_, masked_scatter(_) ---------------------------------------------------------

def test_masked_fill_in_place_checks_value_then_mask_then_shapes():
    x = ember.zeros(4, 4)
    _raises(RuntimeError, "only supports a 0-dimensional value tensor",
            lambda: x.masked_fill_(ember.ones(1, dtype=ember.uint8), ember.zeros(2)))
    _raises(RuntimeError, "masked_fill_ only supports boolean masks",
            lambda: ember.zeros(1, 3).masked_fill_(ember.ones(1, 1, 3, dtype=ember.uint8), 1))


def test_masked_scatter_in_place_expands_the_mask():
    _raises(RuntimeError, r"expand\(CPUBoolType\{\[1, 4\]\}, size=\[4\]\): the number of sizes "
            r"provided \(1\) must be greater or equal to the number of dimensions in the "
            r"tensor \(2\)", lambda: ember.zeros(4).masked_scatter_(
                ember.ones(1, 4, dtype=ember.bool), ember.ones(4)))
    _raises(RuntimeError, r"The expanded size of the tensor \(3\) must match the existing "
            r"size \(4\) at non-singleton dimension 1.  Target sizes: \[1, 3\].  Tensor "
            r"sizes: \[2, 4\]", lambda: ember.zeros(1, 3).masked_scatter_(
                ember.ones(2, 4, dtype=ember.bool), ember.ones(3)))
    _raises(RuntimeError, "expected self and source to have same dtypes",   # before expanding
            lambda: ember.zeros(2, 3).masked_scatter_(ember.ones(2, 4, dtype=ember.bool),
                                                      ember.ones(3, dtype=ember.int64)))
    x = ember.zeros(3, 4)
    mask = ember.tensor([True, False, True, False])
    assert x.masked_scatter_(mask, ember.arange(12.0)).tolist() == \
        [[0.0, 0.0, 1.0, 0.0], [2.0, 0.0, 3.0, 0.0], [4.0, 0.0, 5.0, 0.0]]


def test_masked_scatter_broadcasts_before_the_dtype_checks():
    _raises(RuntimeError, r"The size of tensor a \(6\) must match the size of tensor b \(5\)",
            lambda: ember.zeros(3, 5, dtype=ember.int8).masked_scatter(
                ember.ones(4, 6, dtype=ember.bool), ember.ones(3, dtype=ember.bool)))
    _raises(RuntimeError, "expected self and source to have same dtypes",
            lambda: ember.zeros(5, 1, dtype=ember.int16).masked_scatter(
                ember.ones(1, 1, dtype=ember.uint8), ember.ones(5, 1)))


# --- writing into an expanded tensor ----------------------------------------------------------

def test_in_place_ops_refuse_an_expanded_tensor_after_their_checks():
    expanded = ember.zeros(3, 1, dtype=ember.int8).expand(3, 2)
    _raises(IndexError, "Expected source and index to have the same number of elements",
            lambda: expanded.put_(_long([0, 1, 2, 3]), ember.ones(5, dtype=ember.int8)))
    _raises(RuntimeError, "Expected self.dtype to be equal to src.dtype",
            lambda: expanded.scatter_add_(-1, _long([[0]]), ember.ones(1, 1)))
    _raises(IndexError, "Index is supposed to be a vector",
            lambda: expanded.index_add_(0, _long([[0, 1]]), ember.ones(2, 2, dtype=ember.int8)))
    _raises(RuntimeError, "more than one element of the written-to tensor",
            lambda: expanded.put_(_long([0]), ember.ones(1, dtype=ember.int8)))
    _raises(RuntimeError, "more than one element of the written-to tensor",
            lambda: expanded.scatter_(0, _long([[0]]), ember.ones(1, 1, dtype=ember.int8)))


def test_the_overlap_check_sits_between_pytorchs_checks():
    expanded = ember.zeros(4, 1).expand(4, 3)
    # after the shape checks, before the index's dtype (index_copy_) or reduce (scatter_)
    _raises(RuntimeError, "more than one element of the written-to tensor",
            lambda: expanded.index_copy_(0, _long([]).int(), ember.zeros(0, 3)))
    _raises(RuntimeError, "more than one element of the written-to tensor",
            lambda: expanded.scatter_(-1, _long([[0]]), 1.0, reduce="mean"))
    _raises(RuntimeError, "more than one element of the written-to tensor",
            lambda: ember.zeros(3, 1, dtype=ember.bool).expand(3, 2).index_reduce_(
                -1, _long([]), ember.zeros(3, 0, dtype=ember.bool), "amax",
                include_self=False))
    _raises(IndexError, r"Dimension out of range \(expected to be in range of \[-1, 0\]",
            lambda: expanded.scatter_(-2, _long([[0]]), ember.ones(4)))


def test_scatter_with_self_too_small_checks_src_dims_first():
    _raises(RuntimeError, "same number of dimensions as src tensor",
            lambda: ember.zeros(1, 3, 4).scatter(1, ember.zeros(1, 1, 5, dtype=ember.int64),
                                                 ember.zeros(1, 2)))
    _raises(IndexError, r"expected to be in range of \[-2, 1\], but got 2",
            lambda: ember.zeros(1, 3, 4).scatter(1, ember.zeros(1, 1, 2, dtype=ember.int64),
                                                 ember.zeros(1, 2)))


def test_index_copy_of_a_0d_tensor_and_of_an_empty_one():
    x = ember.tensor(1.0, requires_grad=True)
    source = ember.tensor([3.0], requires_grad=True)
    out = ember.index_copy(x, 0, _long(0), source)
    gx, gs = ember.autograd.grad(out * 2, (x, source))      # (was an IndexError)
    assert out.item() == 3.0 and gx.item() == 0.0 and gs.tolist() == [2.0]
    empty = ember.zeros(4, 0, 3, dtype=ember.int64)
    assert empty.index_copy(-1, _long([-1]), ember.zeros(4, 0, 1, dtype=ember.int64)).shape == \
        (4, 0, 3)


def test_keyword_only_argument_errors_name_the_in_place_method():
    x, src = ember.zeros(3, 1), ember.ones(3, 1)
    _raises(TypeError, r"^scatter_reduce_\(\): argument 'include_self' must be bool, not "
            r"NoneType$", lambda: x.scatter_reduce_(1, _long([[0], [0], [0]]), src, "amin",
                                                    include_self=None))
    _raises(TypeError, r"^index_add_\(\): argument 'alpha' must be Number, not list$",
            lambda: x.index_add_(1, _long([0]), src, alpha=[0, 1]))
    _raises(TypeError, r"^index_add\(\): argument 'alpha' must be Number, not tuple$",
            lambda: x.index_add(1, _long([0]), src, alpha=(1,)))


def test_scatter_reduce_without_self_checks_bounds_before_the_kernel_dtype():
    c = ember.zeros(3, 4, dtype=ember.complex64)
    _raises(RuntimeError, "index 6 is out of bounds for dimension 1 with size 4",
            lambda: c.scatter_reduce(1, _long([[6]]), ember.ones(1, 1, dtype=ember.complex64),
                                     "amax", include_self=False))
    _raises(NotImplementedError, "\"scatter_gather_tensor_cpu_reduce_amax\" not implemented",
            lambda: c.scatter_reduce(1, _long([[6]]), ember.ones(1, 1, dtype=ember.complex64),
                                     "amax"))


def test_put_refuses_an_expanded_tensor_before_the_bounds():
    expanded = ember.zeros(2, 1, dtype=ember.int16).expand(2, 3)
    _raises(RuntimeError, "more than one element of the written-to tensor",
            lambda: expanded.put_(_long(6), ember.tensor(1, dtype=ember.int16)))
