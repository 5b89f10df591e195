"""Subscripts (``x[key]``, ``x[key] = value``) and in-place indexing beyond the OpInfo checks."""

import time
import warnings

import numpy as np
import pytest

import ember

_ = slice(None)


def _arange(*shape, dtype=ember.float32):
    return ember.tensor(np.arange(int(np.prod(shape))).reshape(shape), dtype=dtype)


def _equal(t, array):
    array = np.asarray(array)
    assert tuple(t.shape) == array.shape, (t.shape, array.shape)
    assert np.array_equal(np.asarray(t), array), (t, array)


# --- reading ------------------------------------------------------------------------------------

# keys whose meaning NumPy and PyTorch share
SHARED_KEYS = [
    1, -1, (1, 2), slice(1, None), (_, 1), (1, slice(1, 3)), None, ..., (..., None), (None, 1),
    (1, None), (..., 1), (0, ..., 1), (slice(None, None, 2), None, slice(3, 1)), [0, 2],
    ([0, 1], _, [1, 2]), (_, [0, 1], [1, 2]), ([[0], [1]], _, [1, 2, 3]), ([0, 1], 0),
    (_, 0, [0, 1]), np.array([2, 0]), ([True, False, True],), (1, [True, False, True, False]),
    slice(-10, 2), (_, slice(5, 10)), [], (_, []),
]


@pytest.mark.parametrize("key", SHARED_KEYS, ids=repr)
def test_getitem_matches_numpy(key):
    x = _arange(3, 4, 5)
    _equal(x[key], np.arange(60).reshape(3, 4, 5)[key])


def test_int_next_to_advanced_index_selects_first():
    # PyTorch applies ints as selects before advanced indices; NumPy would give (2, 4)
    x = _arange(3, 4, 5)
    out = x[0, :, [1, 2]]
    assert out.shape == (4, 2)
    _equal(out, np.arange(60).reshape(3, 4, 5)[0][:, [1, 2]])


def test_bool_scalars_and_masks():
    x = _arange(3, 4, 5)
    assert x[True].shape == (1, 3, 4, 5)
    assert x[False].shape == (0, 3, 4, 5)
    assert x[1, True].shape == (1, 4, 5)
    assert x[ember.tensor(True)].shape == (1, 3, 4, 5)
    mask = ember.tensor([[True, False, False, True]] * 3)
    _equal(x[mask], np.arange(60).reshape(3, 4, 5)[np.asarray(mask)])
    assert x[None, _, mask[0]].shape == (1, 3, 2, 5)
    assert x[0, ember.zeros(4, 5, dtype=ember.bool)].shape == (0,)


def test_zero_dim_tensor_keys_are_ints():
    x = _arange(3, 4)
    out = x[ember.tensor(1), ember.tensor(2, dtype=ember.int32)]
    assert out.shape == () and out.item() == 6
    assert out.grad_fn is None and out._base is x


def test_basic_indexing_returns_views():
    x = _arange(3, 4)
    for key in (1, (slice(1, 3), 2), None, ..., (_, slice(None, None, 2))):
        view = x[key]
        assert view._base is x
        assert np.shares_memory(view._data, x._data)
    advanced = x[[0, 1]]
    assert advanced._base is None and not np.shares_memory(advanced._data, x._data)
    v = x[1]
    x[1, 2] = 100
    assert v[2].item() == 100


def test_getitem_on_zero_dim_and_empty():
    s = ember.tensor(3.0)
    assert s[None].shape == (1,) and s[...].shape == () and s[()].shape == ()
    assert s[True].shape == (1,) and s[None, None].shape == (1, 1)
    e = ember.zeros(0, 3)
    assert e[:, 1].shape == (0,) and e[[]].shape == (0, 3)
    assert e[:, [2]].shape == (0, 1)
    assert e[:, [4]].shape == (0, 1)          # PyTorch only checks the indices it reads


@pytest.mark.parametrize("key,error,match", [
    (5, IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    (-4, IndexError, "index -4 is out of bounds for dimension 0 with size 3"),
    ((1, 5), IndexError, "index 5 is out of bounds for dimension 1 with size 4"),
    ((_, _, [7]), IndexError, "index 7 is out of bounds for dimension 0 with size 5"),
    (([0], [9]), IndexError, "index 9 is out of bounds for dimension 1 with size 4"),
    (slice(None, None, -1), ValueError, "step must be greater than zero"),
    (slice(None, None, 0), ValueError, "slice step cannot be zero"),
    ((10, slice(None, None, -1)), IndexError, "index 10 is out of bounds"),
    ((1, 2, 3, 4), IndexError, "too many indices for tensor of dimension 3"),
    ((..., 0, 0, 0, 0), IndexError, "too many indices for tensor of dimension 3"),
    (1.5, IndexError, r"only integers, slices \(`:`\), ellipsis \(`...`\), None and long or "
                      r"byte Variables are valid indices \(got float\)"),
    ("a", TypeError, r"new\(\): invalid data type 'str'"),     # a sequence to PyTorch
    (np.bool_(True), IndexError, r"valid indices \(got numpy.bool"),
    (ember.tensor([0.0, 1.0]), IndexError,
     "tensors used as indices must be long, int, byte or bool tensors"),
    (ember.tensor([1], dtype=ember.int16), IndexError, "must be long, int, byte or bool"),
    (ember.ones(4, dtype=ember.bool), IndexError,
     r"The shape of the mask \[4\] at index 0 does not match the shape of the indexed tensor "
     r"\[3, 4, 5\] at index 0"),
    ((0, ember.ones(5, dtype=ember.bool)), IndexError,
     r"The shape of the mask \[5\] at index 0 does not match the shape of the indexed tensor "
     r"\[4, 5\] at index 0"),
    ((None, ember.ones(4, dtype=ember.bool)), IndexError,
     r"mask \[4\] at index 0 .* indexed tensor \[1, 3, 4, 5\] at index 1"),
    ((_, ember.ones(3, 4, dtype=ember.bool)), IndexError,
     r"mask \[3, 4\] at index 0 .* \[3, 4, 5\] at index 1"),
])
def test_getitem_errors(key, error, match):
    with pytest.raises(error, match=match):
        _arange(3, 4, 5)[key]


def test_zero_dim_errors():
    s = ember.tensor(3.0)
    with pytest.raises(IndexError, match=r"invalid index of a 0-dim tensor. Use `tensor.item\(\)`"):
        s[0]
    with pytest.raises(IndexError, match=r"slice\(\) cannot be applied to a 0-dim tensor."):
        s[:]


def test_index_shapes_that_do_not_broadcast():
    with pytest.raises(IndexError, match=r"shape mismatch: indexing tensors could not be "
                       r"broadcast together with shapes \[2\], \[3\]"):
        _arange(3, 4, 5)[[0, 1], [0, 1, 2]]


def test_sequence_keys_follow_pytorch():
    x = _arange(3, 4, 5)
    assert x[[0, 1]].shape == (2, 4, 5)           # a list of ints is one index tensor
    with pytest.warns(UserWarning, match="Using a non-tuple sequence for multidimensional"):
        out = x[[[1, 2], [0, 0]]]                 # a list holding sequences is a tuple
    assert out.shape == (2, 5)
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        assert x[[0, None]].shape == (1, 4, 5)


def test_range_and_nested_tuple_keys_are_index_sequences():
    # "What is torch.nn really?" picks log-probabilities with input[range(n), target]
    t = ember.arange(20.0).view(4, 5)
    assert t[range(4), [0, 1, 2, 3]].tolist() == [0.0, 6.0, 12.0, 18.0]
    assert t[range(1, 4, 2), 1:3].tolist() == [[6.0, 7.0], [16.0, 17.0]]
    assert t[range(0)].shape == (0, 5)
    assert t[(0, 2), ].tolist() == [[0.0, 1.0, 2.0, 3.0, 4.0], [10.0, 11.0, 12.0, 13.0, 14.0]]
    assert t[((0, 2), (1, 1))].tolist() == [1.0, 11.0]
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        assert t[[range(2), range(2)]].tolist() == [0.0, 6.0]
    t[range(2), 0] = -1.0
    assert t[:, 0].tolist() == [-1.0, -1.0, 10.0, 15.0]


def test_uint8_masks_warn():
    x = _arange(3)
    with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
        out = x[ember.tensor([1, 0, 1], dtype=ember.uint8)]
    assert out.tolist() == [0.0, 2.0]


def test_uint8_mask_warning_points_at_the_users_line():
    # (one value through a uint8 mask goes to masked_fill_, which refuses it, as in PyTorch)
    x = _arange(3)
    with pytest.warns(UserWarning, match="uint8 is now deprecated") as record:
        x[ember.tensor([1, 0, 1], dtype=ember.uint8)] = ember.tensor([5.0, 6.0])
    assert record[0].filename == __file__ and x.tolist() == [5.0, 1.0, 6.0]


@pytest.mark.parametrize("key,name", [
    (1, "SelectBackward0"), ((1, 2), "SelectBackward0"), (slice(1, None), "SliceBackward0"),
    ((_,), "AliasBackward0"), (..., "AliasBackward0"), ((_, 1), "SelectBackward0"),
    ((1, slice(1, 3)), "SliceBackward0"), (None, "UnsqueezeBackward0"),
    ((None, 1), "SelectBackward0"), ((1, None), "UnsqueezeBackward0"),
    ([0, 1], "IndexBackward0"), (True, "IndexBackward0"), ((0, _, [1]), "IndexBackward0"),
])
def test_grad_fn_names(key, name):
    x = ember.ones(3, 4, 5, requires_grad=True)
    assert x[key].grad_fn.name() == name


def test_gradients_through_getitem():
    x = _arange(3, 4).requires_grad_()
    x[[0, 0, 2]].sum().backward()                 # duplicates accumulate
    assert x.grad.tolist() == [[2.0] * 4, [0.0] * 4, [1.0] * 4]
    x.grad = None
    mask = ember.tensor([[False] * 4, [False, False, True, True], [True] * 4])
    y = x[mask]
    (y * y).sum().backward()
    _equal(x.grad, np.where(np.asarray(mask), 2 * np.arange(12).reshape(3, 4), 0))


def test_double_backward_through_getitem():
    x = _arange(3, 4, dtype=ember.float64).requires_grad_()
    y = x[1:, [0, 2]]
    g, = ember.autograd.grad((y * y).sum(), x, create_graph=True)
    assert g.grad_fn.name() == "SliceBackwardBackward0"     # the last backward step, as in torch
    assert g.tolist() == [[0, 0, 0, 0], [8, 0, 12, 0], [16, 0, 20, 0]]
    h, = ember.autograd.grad(g.sum(), x)
    assert h.tolist() == [[0, 0, 0, 0], [2, 0, 2, 0], [2, 0, 2, 0]]
    y = x[[0, 2]]
    g, = ember.autograd.grad((y * y).sum(), x, create_graph=True)
    assert g.grad_fn.name() == "IndexPutImplBackward0"      # torch's _index_put_impl_


# --- writing --------------------------------------------------------------------------------------

@pytest.mark.parametrize("key,value", [
    (1, 5.0), ((_, 2), np.float64(3)), (slice(0, 2), [[1.0]]), (..., 2.0), ((1, [0, 2]), 9.0),
    ([0, 2], [[1.0, 2.0, 3.0, 4.0]]), (([0, 2], [1, 3]), [7.0, 8.0]),
    ((_, [1, 3]), [[1.0], [2.0], [3.0]]),
    ([True, False, True], 4.0), ((None, 1), [1.0, 2.0, 3.0, 4.0]), (_, [[[1.0, 2.0, 3.0, 4.0]]]),
])
def test_setitem_matches_numpy(key, value):
    x = _arange(3, 4)
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = ember.tensor(value) if isinstance(value, list) else value
    before = x._data
    x[key] = v
    value = np.asarray(value, dtype=np.float32)
    while value.ndim and value.shape[0] == 1:     # PyTorch drops leading 1s of the value
        value = value[0]
    expected[key] = value
    assert x._data is before and x._version == 1
    _equal(x, expected)


def test_setitem_on_a_view_changes_the_base():
    base = ember.zeros(2, 3)
    v = base[0]
    v[1] = 5
    assert base.tolist() == [[0, 5, 0], [0, 0, 0]]
    assert base._version == v._version == 1
    c = base[1][1:]
    c[[0]] = 7
    assert base.tolist() == [[0, 5, 0], [0, 7, 0]]


def test_setitem_casts_and_checks_values():
    x = ember.zeros(3, dtype=ember.int64)
    x[0] = 1.7
    x[1] = ember.tensor(2.9)                      # basic indexing copies with a cast
    assert x.tolist() == [1, 2, 0]
    b = ember.zeros(3, dtype=ember.bool)
    b[0] = 3
    assert b.tolist() == [True, False, False]
    u = ember.zeros(3, dtype=ember.uint8)
    u[0] = -1
    assert u.tolist() == [255, 0, 0]
    with pytest.warns(UserWarning, match="Casting complex values to real"):
        ember.zeros(3)[0] = ember.tensor(1 + 2j)


@pytest.mark.parametrize("dtype,key,value,error,match", [
    (ember.int64, [0], ember.tensor([1.5]), RuntimeError,
     "Index put requires the source and destination dtypes match, got Long for the destination "
     "and Float for the source."),
    (ember.float32, ember.tensor([True, False, True]), ember.tensor([5, 6]), RuntimeError,
     "got Float for the destination and Long for the source"),
    (ember.uint8, 0, 300, RuntimeError, "value cannot be converted to type uint8_t without "
                                        "overflow"),
    (ember.uint8, 0, -256, RuntimeError, "uint8_t without overflow"),
    (ember.int8, 0, 127.5, RuntimeError, "int8_t without overflow"),
    (ember.uint8, 0, -1.0, RuntimeError, "uint8_t without overflow"),    # an int -1 wraps
    (ember.uint8, 0, -0.5, RuntimeError, "uint8_t without overflow"),
    (ember.complex64, 0, 3.5e38, RuntimeError, "c10::complex<float> without overflow"),
    (ember.int32, 0, float("nan"), RuntimeError, "type int without overflow"),
    (ember.float32, 0, 1e300, RuntimeError, "type float without overflow"),
    (ember.float64, 0, 1 + 1j, RuntimeError, "type double without overflow"),
    (ember.int64, 0, 2 ** 63, ValueError, "Overflow when unpacking long long"),
    (ember.float32, 0, "a", TypeError, "can't assign a str to a torch.FloatTensor"),
    (ember.float32, 0, [1], TypeError, "can't assign a list to a torch.FloatTensor"),
    (ember.float32, 0, np.ones(1), TypeError, "can't assign a numpy.ndarray"),
    (ember.float32, slice(0, 2), ember.ones(3), RuntimeError,
     r"The expanded size of the tensor \(2\) must match the existing size \(3\) at "
     r"non-singleton dimension 0.  Target sizes: \[2\].  Tensor sizes: \[3\]"),
    (ember.float32, slice(0, 2), ember.ones(2, 2), RuntimeError,
     r"expand\(torch.FloatTensor\{\[2, 2\]\}, size=\[2\]\): the number of sizes provided \(1\) "
     r"must be greater or equal to the number of dimensions in the tensor \(2\)"),
    (ember.float32, [0, 1], ember.ones(3), RuntimeError,
     r"shape mismatch: value tensor of shape \[3\] cannot be broadcast to indexing result of "
     r"shape \[2\]"),
    (ember.float32, 5, 1.0, IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
])
def test_setitem_errors(dtype, key, value, error, match):
    x = ember.zeros(3, dtype=dtype)
    with pytest.raises(error, match=match):
        x[key] = value
    assert x._version == 0


def test_setitem_keeps_floats_that_overflow_16_bits():
    x = ember.zeros(2, dtype=ember.float16)
    x[0] = 1e10                                   # PyTorch checks float32 only
    assert x.tolist()[0] == float("inf")


def test_setitem_leaf_checks():
    x = ember.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                       "being used in an in-place operation."):
        x[0] = 1.0
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used "
                       "in an in-place operation."):
        x[[0]] = 1.0
    with ember.no_grad():
        x[0] = 5
    assert x.tolist() == [5, 0, 0] and x._version == 1 and x.is_leaf


def test_setitem_autograd():
    w = ember.tensor(2.0, requires_grad=True)
    x0 = ember.zeros(3, requires_grad=True)
    x = x0.clone()
    x[1] = w
    assert x.grad_fn.name() == "torch::autograd::CopySlices"
    (x * ember.tensor([1.0, 3.0, 5.0])).sum().backward()
    assert w.grad.item() == 3.0 and x0.grad.tolist() == [1.0, 0.0, 5.0]
    x = ember.zeros(2, 3, requires_grad=True).clone()
    v = ember.ones(1, 3, requires_grad=True)
    x[[0, 1]] = v
    assert x.grad_fn.name() == "IndexPutBackward0"
    (x * 2).sum().backward()
    assert v.grad.tolist() == [[4.0, 4.0, 4.0]]


def test_setitem_on_a_view_of_a_tensor_that_requires_grad():
    x0 = _arange(3, 4).requires_grad_()
    w = ember.tensor(2.0, requires_grad=True)
    x = x0 * 1
    v = x[1:]
    v[0, 1:3] = w * 3
    assert x.grad_fn.name() == "torch::autograd::CopySlices"
    assert v.tolist()[0] == [4.0, 6.0, 6.0, 7.0]
    (x * x).sum().backward()
    assert w.grad.item() == 72.0
    assert x0.grad.tolist() == [[0, 2, 4, 6], [8, 0, 0, 14], [16, 18, 20, 22]]


def test_setitem_into_plain_tensor_from_value_that_requires_grad():
    x = ember.zeros(4)
    w = ember.ones(2, requires_grad=True)
    x[1:3] = w * 5
    assert x.requires_grad and x.grad_fn.name() == "torch::autograd::CopySlices"
    (x * ember.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert w.grad.tolist() == [10.0, 15.0]


def test_setitem_cost_follows_the_region():
    big = ember.zeros(4000, 4000)
    start = time.perf_counter()
    big.clone()
    copy_time = time.perf_counter() - start
    start = time.perf_counter()
    for _i in range(10):
        big[3, 5] = 1.0
        big[[1, 2]] = 2.0
    region_time = (time.perf_counter() - start) / 10
    assert region_time < copy_time / 5, (region_time, copy_time)


# --- index_put_ and masked_fill_ ------------------------------------------------------------------

def test_index_put_in_place():
    x = ember.zeros(3)
    out = x.index_put_((ember.tensor([0, 0, 2]),), ember.tensor([1.0, 2.0, 3.0]), accumulate=True)
    assert out is x and x.tolist() == [3.0, 0.0, 3.0] and x._version == 1
    x.index_put_((ember.tensor([True, False, True]),), ember.tensor(7.0))
    assert x.tolist() == [7.0, 0.0, 7.0]
    y = ember.index_put(x, (ember.tensor([1]),), ember.tensor([5.0]))
    assert y.tolist() == [7.0, 5.0, 7.0] and x.tolist() == [7.0, 0.0, 7.0]


def test_masked_fill_in_place():
    x = _arange(2, 3)
    mask = ember.tensor([True, False, True])
    assert x.masked_fill_(mask, -1) is x
    assert x.tolist() == [[-1, 1, -1], [-1, 4, -1]] and x._version == 1
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the "
                       r"broadcast shape \[2, 3\]"):
        ember.zeros(3).masked_fill_(ember.ones(2, 3, dtype=ember.bool), 1.0)
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of "
                       r"tensor b \(4\) at non-singleton dimension 1"):
        ember.zeros(2, 3).masked_fill_(ember.ones(4, dtype=ember.bool), 1.0)


def test_masked_fill_gradients():
    x = ember.ones(2, 3, requires_grad=True)
    w = ember.tensor(2.0, requires_grad=True)
    mask = ember.tensor([True, False, True])
    ember.masked_fill(x, mask, w).sum().backward()
    assert w.grad.item() == 4.0
    assert x.grad.tolist() == [[0.0, 1.0, 0.0]] * 2


def test_argument_type_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(TypeError, match="must be tuple of Tensors, not Tensor"):
        ember.index_put(x, ember.tensor([0]), ember.ones(()))
    with pytest.raises(TypeError, match="expected Tensor as element 0 in argument 1, but got list"):
        ember.index_put(x, ([0],), ember.ones(()))
    with pytest.raises(TypeError, match=r"masked_fill\(\) received an invalid combination "
                       r"of arguments - got \(Tensor, bool, float\)"):
        ember.masked_fill(x, True, 1.0)


def test_warnings_point_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _arange(3)[ember.tensor([1, 0, 1], dtype=ember.uint8)]
    assert caught and caught[0].filename == __file__


# --- fill_diagonal_ -----------------------------------------------------------------------------

def test_fill_diagonal_writes_in_place_through_views():
    x = ember.zeros(4, 6)
    view = x[:, ::2]
    assert view.fill_diagonal_(1) is view and view._version == 1
    expected = np.zeros((4, 6))
    expected[[0, 1, 2], [0, 2, 4]] = 1
    _equal(x, expected)
    tall = ember.zeros(3, 8).t()                # (8, 3), transposed: wraps every 4 rows
    tall.fill_diagonal_(2, wrap=True)
    expected = np.zeros((8, 3))
    for row in (0, 1, 2, 4, 5, 6):
        expected[row, row % 4] = 2
    _equal(tall, expected)
    assert not hasattr(ember, "fill_diagonal_") and not hasattr(x, "fill_diagonal")


def test_fill_diagonal_gradient_is_zero_on_the_diagonal():
    a = ember.arange(10.).reshape(5, 2).requires_grad_()
    b = a.clone()
    b.fill_diagonal_(0, wrap=True)
    (b * b).sum().backward()
    mask = np.ones((5, 2))
    mask[[0, 1, 3, 4], [0, 1, 0, 1]] = 0
    _equal(a.grad, 2 * np.arange(10.).reshape(5, 2) * mask)
    # through a view, the base's other elements keep their gradient
    a = ember.ones(4, 4, requires_grad=True)
    b = a * 1
    b[1:, 1:].fill_diagonal_(5)
    b.sum().backward()
    _equal(a.grad, 1 - np.diag([0, 1, 1, 1]))


def test_fill_diagonal_refuses_leaves_as_pytorch():
    a = ember.ones(3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                                           "being used in an in-place operation."):
        a.fill_diagonal_(1)
    with ember.no_grad():
        a.fill_diagonal_(2)
    _equal(a.detach(), 1 + np.eye(3))


# --- unravel_index ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3), (3, 5, 7), (4,), (1, 1, 6), (2**40, 2**3)])
def test_unravel_index_matches_numpy(shape):
    numel = int(np.prod(np.array(shape, dtype=object)))
    flat = np.array([0, 1, 5, min(numel, 10**6) - 1]) % min(numel, 10**6)
    got = ember.unravel_index(ember.tensor(flat.reshape(2, 2)), shape)
    want = np.unravel_index(flat.reshape(2, 2), shape)
    assert len(got) == len(shape)
    for g, w in zip(got, want):
        assert g.dtype is ember.int64
        _equal(g, w)


def test_unravel_index_forms_and_wrapping():
    # PyTorch's positions outside [0, numel) wrap around (floor division and remainder)
    rows, cols = ember.unravel_index(ember.tensor([6, -1, -7, 7]), (2, 3))
    assert rows.tolist() == [0, 1, 1, 0] and cols.tolist() == [0, 2, 2, 1]
    r, c = ember.unravel_index(4, (2, 3))                       # a Python int: 0-dim results
    assert (r.ndim, r.item(), c.item()) == (0, 1, 1)
    assert [t.tolist() for t in ember.unravel_index(ember.tensor(4), 6)] == [4]
    assert ember.unravel_index(ember.tensor([1, 2], dtype=ember.uint8), ember.Size([3]))[0] \
        .dtype is ember.int64
    assert ember.unravel_index(ember.tensor([0]), ()) == ()
    empty = ember.unravel_index(ember.tensor([], dtype=ember.int64), (2, 0))
    assert [t.shape for t in empty] == [(0,), (0,)]


@pytest.mark.parametrize("indices,shape,error,match", [
    (ember.tensor([1.0]), (2, 3), TypeError,
     "expected 'indices' to be integer dtype, but got ember.float32"),
    (ember.tensor([True]), (2, 3), TypeError,
     "expected 'indices' to be integer dtype, but got ember.bool"),
    (ember.tensor([0]), (2, -3), ValueError, r"'shape' cannot have negative values, but got "
                                             r"\(2, -3\)"),
    (ember.tensor([0]), (2, 3.0), TypeError,
     "expected 'shape' sequence to only contain ints, but got <class 'float'>"),
    (ember.tensor([0]), None, TypeError,
     "expected 'shape' to be int or sequence of ints, but got <class 'NoneType'>"),
    (ember.tensor([0]), (2, 0), RuntimeError, "ZeroDivisionError"),
    (ember.tensor([0]), (2**63,), ValueError, "Overflow when unpacking long long"),
    (1.5, (2, 3), TypeError, "expected 'indices' to be integer tensor or int"),
])
def test_unravel_index_errors(indices, shape, error, match):
    with pytest.raises(error, match=match):
        ember.unravel_index(indices, shape)


def test_none_in_a_subscript_gets_unsqueezes_stride():
    # NumPy gives a new axis stride 0; PyTorch that of unsqueeze in front of the input dim
    # that follows (its size times its stride), computed before later slices and selects
    a = ember.arange(24.0).view(2, 3, 4)
    assert a[None].stride() == (24, 12, 4, 1)
    assert a[:, None].stride() == (12, 12, 4, 1)
    assert a[..., None].stride() == (12, 4, 1, 1)
    assert a[None, 1:].stride() == (24, 12, 4, 1)
    assert a[None, ..., None, 0].stride() == (24, 12, 4, 4)
    assert a[None, None].stride() == (24, 24, 12, 4, 1)
    b = a.clone()
    b[None][0, 1, 2, 3] = -1.0                      # still a view that writes through
    assert b[1, 2, 3].item() == -1.0
    x = ember.ones(2, 3, requires_grad=True)
    x[None, :, None].sum().backward()
    assert x.grad.tolist() == [[1.0] * 3] * 2


# --- masked_fill's value: fill_'s checks, stricter than __setitem__'s -------------------------

@pytest.mark.parametrize("dtype,value,ctype", [
    (ember.uint8, -1.0, "uint8_t"), (ember.uint8, -0.5, "uint8_t"),
    (ember.float16, 65520.0, "c10::Half"), (ember.float16, 70000, "c10::Half"),
    (ember.bfloat16, 3.4e38, "c10::BFloat16"), (ember.complex64, 1e300, "c10::complex<float>"),
])
def test_masked_fill_value_overflow(dtype, value, ctype):
    x, mask = ember.ones(2, dtype=dtype), ember.tensor([True, False])
    with pytest.raises(RuntimeError, match=f"value cannot be converted to type {ctype} without "
                                           f"overflow"):
        x.masked_fill(mask, value)
    if value < 3e38:                # a 0-dim tensor's value is checked the same way
        with pytest.raises(RuntimeError, match=ctype):
            x.masked_fill_(mask, ember.tensor(value))


def test_masked_fill_value_that_fits():
    mask = ember.tensor([True, False])
    assert ember.tensor([1, 2], dtype=ember.uint8).masked_fill(mask, -1).tolist() == [255, 2]
    assert ember.ones(2, dtype=ember.float16).masked_fill(mask, 65504.0).tolist() == [65504, 1]
    assert ember.zeros(2, dtype=ember.bool).masked_fill(mask, 1j).tolist() == [True, False]
    assert ember.zeros(2).masked_fill(mask, 2 ** 64 - 1).tolist() == [2.0 ** 64, 0.0]
    with pytest.raises(OverflowError, match="int too big to convert"):
        ember.zeros(2).masked_fill(mask, 2 ** 64)


def test_setitem_half_overflow_gives_inf_as_pytorch():
    x = ember.zeros(2, dtype=ember.float16)
    x[0] = 70000.0
    assert x.tolist() == [float("inf"), 0.0]


def test_nonzero_as_tuple_gives_contiguous_tensors():
    x = ember.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    rows, cols = ember.nonzero(x, as_tuple=True)
    assert rows.tolist() == [0, 1, 1] and cols.tolist() == [1, 0, 2]
    assert rows.stride() == (1,) and cols.is_contiguous()
    assert all(t.is_contiguous() for t in ember.where(x > 0))


@pytest.mark.parametrize("key", [
    (_, ember.tensor([True, False, True])), (_, ember.tensor([True, False, True]), slice(1, 3)),
    (..., [0, 1]), (_, [0, 2], 1), (ember.tensor(1), _, ember.tensor([0, 3])),
])
def test_advanced_index_of_a_row_major_input_is_contiguous(key):
    x = _arange(2, 3, 4, 5)
    out = x[key]
    assert out.is_contiguous()
    assert out.view(-1).tolist() == np.asarray(out).reshape(-1).tolist()


@pytest.mark.parametrize("key", [[0], [-1], (_, [0])])
def test_index_into_an_empty_dim_names_no_index(key):
    x = ember.zeros(0, 0)
    with pytest.raises(IndexError, match=r"^index is out of bounds for dimension with size 0$"):
        x[key]
    with pytest.raises(IndexError, match="dimension with size 0"):
        x[key] = 1.0
    assert ember.zeros(0, 3)[ember.zeros(0, dtype=ember.int64)].shape == (0, 3)


@pytest.mark.parametrize("key", [2 ** 63, (0, 2 ** 70), (-2 ** 63 - 1, 0)])
def test_int_subscript_outside_int64_overflows_as_pytorch(key):
    x = ember.zeros(3, 3)
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        x[key]
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        x[key] = 1.0
    with pytest.raises(IndexError, match="index 9223372036854775807 is out of bounds"):
        x[0, 2 ** 63 - 1]


def test_advanced_index_of_a_transposed_tensor_is_row_major_as_torch():
    picked = ember.arange(16.0).reshape(4, 4).t()[:, [2, 1]]
    assert picked.stride() == (2, 1)
    assert picked.view(-1).tolist() == [8.0, 4.0, 9.0, 5.0, 10.0, 6.0, 11.0, 7.0]


def test_subscripts_of_a_0_dim_tensor_other_than_a_lone_int_or_slice_are_too_many():
    scalar = ember.tensor(3.0)
    with pytest.raises(IndexError, match="index 1 is out of bounds for dimension 0 with size 0"):
        scalar[1]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        scalar[::-1]
    for key in [(0,), ember.tensor(0), 1.0, [0]]:
        with pytest.raises(IndexError, match="too many indices for tensor of dimension 0"):
            scalar[key]


def test_out_of_range_int_names_its_place_in_the_subscript():
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 1"):
        ember.zeros(2, 3, 2, 1)[..., 5]


def test_index_fill_put_and_index_put_keep_a_transposed_layout():
    x = ember.arange(20.0).reshape(5, 4).t()
    index = ember.tensor([0])
    assert x.index_fill(0, index, 1.0).stride() == (1, 4)
    assert x.put(index, ember.tensor([7.0])).stride() == (1, 4)
    assert x.index_put((index,), ember.tensor(7.0)).stride() == (1, 4)
    assert x.put(index, ember.tensor([7.0]))[0, 0].item() == 7.0
