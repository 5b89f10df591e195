"""Tensors as Python objects and next to NumPy: conversions, operators with arrays and big
ints, construction from nested data and arrays, copy/pickle, DLPack (PyTorch's behaviour)."""

import copy
import pickle
import warnings

import numpy as np
import pytest

import ember


def test_complex_of_several_elements_raises_value_error():
    with pytest.raises(ValueError, match="^only one element tensors can be converted to "
                                         "Python scalars$"):
        complex(ember.ones(2))
    assert complex(ember.tensor([2.5])) == 2.5 + 0j


def test_operators_with_arrays_are_computed_by_numpy():
    t = ember.tensor([1.5, 2.0])
    total = t + np.array([1, 2])                  # NumPy's promotion: float32 + int64
    assert type(total) is ember.Tensor and total.dtype is ember.float64
    assert total.tolist() == [2.5, 4.0]
    assert (t * np.array(2.0)).dtype is ember.float64     # a 0-d array is not weak there
    assert (ember.tensor([3, 4], dtype=ember.int32) + np.array(2)).dtype is ember.int64
    assert (t @ np.array([1.0, 2.0])).tolist() == 5.5
    with pytest.raises(TypeError, match="'<' not supported between instances of 'Tensor' "
                                        "and 'numpy.ndarray'"):
        t < np.array([1.0, 5.0])
    with pytest.raises(RuntimeError, match="^Can't call numpy\\(\\) on Tensor that requires "
                                           "grad"):
        ember.ones(2, requires_grad=True) + np.ones(2)
    eq = ember.tensor([1, 2]) == np.array([1.0, 3.0])    # == and != read the array as a tensor
    assert eq.dtype is ember.bool and eq.tolist() == [True, False]
    assert (t != np.array([1.5, 0.0])).tolist() == [False, True]


def test_augmented_assignment_with_an_array_rebinds():
    x = ember.tensor([1, 2])
    alias = x
    x += np.array([0.5, 0.5])                     # a new float64 tensor, not in place
    assert x is not alias and x.dtype is ember.float64 and x.tolist() == [1.5, 2.5]
    assert alias.tolist() == [1, 2]


def test_python_ints_outside_int64_raise_overflow_error():
    i = ember.tensor([3, 4])
    for op in (lambda: i + 2 ** 70, lambda: 2 ** 70 * i):
        with pytest.raises(OverflowError, match="^int too big to convert$"):
            op()
    with pytest.raises(OverflowError, match="^can't convert negative int to unsigned$"):
        i + -2 ** 65
    with pytest.raises(OverflowError, match="^int too big to convert$"):
        ember.full((2,), 2 ** 70)
    with pytest.raises(RuntimeError, match="^value cannot be converted to type int64_t "
                                           "without overflow$"):
        ember.full((2,), 2 ** 63)


def test_arrays_with_negative_strides_or_foreign_byte_order_are_refused():
    with pytest.raises(ValueError, match="^At least one stride in the given numpy array is "
                                         "negative"):
        ember.tensor(np.arange(6.0)[::-1])
    assert ember.tensor(np.arange(6.0)[::-1].copy()).tolist()[0] == 5.0
    for make in (ember.tensor, ember.as_tensor, ember.from_numpy):
        with pytest.raises(ValueError, match="^given numpy array has byte order different from "
                                             "the native byte order. Conversion between byte "
                                             "orders is currently not supported.$"):
            make(np.array([1, 2], dtype=np.dtype(np.int32).newbyteorder()))
    with pytest.raises(TypeError, match="^can't convert np.ndarray of type numpy.object_"):
        ember.tensor(np.array([1, 2], dtype=object))


def test_list_of_arrays_warns_once():
    with pytest.warns(UserWarning, match="^Creating a tensor from a list of numpy.ndarrays"):
        ember.tensor([np.array([1, 2]), np.array([3, 4])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ember.tensor([np.array([1, 2])]).tolist() == [[1, 2]]


def test_list_holding_a_tensor_that_requires_grad_warns(monkeypatch):
    with pytest.warns(UserWarning, match="^Converting a tensor with requires_grad=True to a "
                                         "scalar may lead to unexpected behavior."):
        made = ember.tensor([ember.tensor(1.0, requires_grad=True), 2.0])
    assert made.tolist() == [1.0, 2.0] and not made.requires_grad


@pytest.mark.parametrize("data,dtype,error,message", [
    ([[1, 2], 3], None, TypeError, "not a sequence"),
    ([[[1], [2]], [3, 4]], None, TypeError, "not a sequence"),
    ([1, [2, 3]], None, TypeError, "'list' object cannot be interpreted as an integer"),
    ([1, (2,)], ember.int32, TypeError, "'tuple' object cannot be interpreted as an integer"),
    ([1.0, [2, 3]], None, TypeError, "must be real number, not list"),
    ([1, [2]], ember.float64, TypeError, "must be real number, not list"),
    ([1j, [1]], None, TypeError, "must be real number, not list"),
    ([1j, [1]], ember.float32, TypeError, "must be real number, not complex"),
    ([[1, 2], [3, 4, 5]], None, ValueError, "expected sequence of length 2 at dim 1 (got 3)"),
    ([[1], [2.5, None]], None, RuntimeError, "Could not infer dtype of NoneType"),
    ([[1], [2.5, None]], ember.float32, ValueError,
     "expected sequence of length 1 at dim 1 (got 2)"),
    ([[1, 2], None], ember.int64, TypeError, "not a sequence"),
    (["ab", "cd"], None, ValueError, "too many dimensions 'str'"),
    ([1, "a"], None, TypeError, "new(): invalid data type 'str'"),
    ([1, "a"], ember.float32, TypeError, "must be real number, not str"),
    ([1, {1: 2}], None, RuntimeError, "Could not infer dtype of dict"),
])
def test_nested_data_errors(data, dtype, error, message):
    with pytest.raises(error) as info:
        ember.tensor(data, dtype=dtype)
    assert str(info.value) == message


def test_copy_and_pickle_keep_attributes():
    x = ember.arange(6.0).reshape(2, 3)
    x.label = "weights"             # (not ``name``: a read-only slot, None, in PyTorch)
    assert copy.copy(x).label == "weights" and copy.deepcopy(x).label == "weights"
    back = pickle.loads(pickle.dumps(x))
    assert back.label == "weights" and back.tolist() == x.tolist()
    assert pickle.loads(pickle.dumps(x.t())).stride() == (1, 3)


def test_dlpack_refuses_grad_with_buffer_error_and_names_the_device():
    with pytest.raises(BufferError, match="^Can't export tensors that require gradient"):
        ember.ones(2, requires_grad=True).__dlpack__()
    kind, index = ember.ones(2).__dlpack_device__()
    assert kind is ember.utils.dlpack.DLDeviceType.kDLCPU and kind == 1 and index == 0


def test_arrays_passed_for_tensors_are_named_as_python_does():
    with pytest.raises(TypeError, match="^sum\\(\\): argument 'input' \\(position 1\\) must be "
                                        "Tensor, not numpy.ndarray$"):
        ember.sum(np.ones(2))
    with pytest.raises(TypeError, match="^expected Tensor as element 0 in argument 0, but got "
                                        "numpy.ndarray$"):
        ember.cat([np.ones(2)])
    with pytest.raises(TypeError, match="must be Tensor, not numpy.ndarray$"):
        ember.zeros_like(np.ones(2))


def test_numpy_array_of_a_tensor_copies_as_numpy_asks():
    t = ember.tensor([1.0, 2.0])
    assert not np.shares_memory(np.array(t), t.numpy())          # np.array copies
    assert not np.shares_memory(np.asarray(t, copy=True), t.numpy())
    assert np.shares_memory(np.asarray(t), t.numpy())            # np.asarray need not
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="^Unable to avoid copy while creating an array as "
                                         "requested.$"):
        np.asarray(t, dtype=np.float64, copy=False)
    with pytest.raises(TypeError, match="^can't convert meta device type tensor to numpy."):
        np.asarray(ember.ones(2, device="meta"))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")      # (np.matrix)
def test_ndarray_subclasses_give_their_values():
    masked = np.ma.masked_array([1.0, 2.0], mask=[0, 1])
    shared = ember.from_numpy(masked)
    masked[0] = 5.0
    assert type(shared._data) is np.ndarray and shared.tolist() == [5.0, 2.0]
    matrix = np.matrix([[1, 2]])
    for make in (ember.tensor, ember.as_tensor, ember.asarray):
        made = make(matrix)
        assert made.shape == (1, 2) and made.dtype is ember.int64 and made.tolist() == [[1, 2]]
    assert ember.as_tensor(matrix, dtype=ember.float32).tolist() == [[1.0, 2.0]]


def test_asarray_reads_buffers_as_bytes_of_the_dtype():
    import array
    buf = array.array("f", [1.0, 2.0])
    t = ember.asarray(buf)                          # the default dtype, sharing memory
    buf[0] = 7.0
    assert t.dtype is ember.float32 and t.tolist() == [7.0, 2.0]
    assert ember.asarray(bytearray(b"ab"), dtype=ember.uint8).tolist() == [97, 98]
    assert ember.asarray(array.array("i", [1, 2]), dtype=ember.int32).tolist() == [1, 2]
    copied = ember.asarray(buf, copy=True)
    buf[1] = 0.0
    assert copied.tolist() == [7.0, 2.0]
    with pytest.raises(ValueError, match="must be a multiple of element size \\(4\\)"):
        ember.asarray(bytearray(b"abc"))
    assert ember.asarray(np.bool_(True)).tolist() is True
