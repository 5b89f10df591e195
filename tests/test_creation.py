"""Making tensors: ember.tensor's dtype inference, factories, *_like, ranges."""

import math
import warnings

import numpy as np
import pytest

import ember


@pytest.mark.parametrize("data,dtype", [
    ([1, 2], ember.int64), ([1.0, 2], ember.float32), ([True, False], ember.bool),
    ([1, 2j], ember.complex64), (3, ember.int64), (2.5, ember.float32), ([], ember.float32),
    ([[1, 2], [3, 4]], ember.int64), ([True, 2], ember.int64),
    (np.array([1.0]), ember.float64), (np.array([1], dtype=np.int32), ember.int32),
    (np.float32(2.0), ember.float32),
])
def test_tensor_infers_pytorch_dtypes(data, dtype):
    assert ember.tensor(data).dtype is dtype


def test_tensor_copies_and_accepts_dtype():
    a = np.array([1.0, 2.0])
    t = ember.tensor(a)
    a[0] = 9
    assert t.tolist() == [1.0, 2.0]
    assert ember.tensor([1.7, -1.7], dtype=ember.int64).tolist() == [1, -1]
    assert ember.tensor([ember.tensor(1.0), ember.tensor(2.0)]).tolist() == [1.0, 2.0]


def test_tensor_from_tensor_warns():
    with pytest.warns(UserWarning, match="clone\\(\\).detach\\(\\)|detach\\(\\).clone\\(\\)"):
        ember.tensor(ember.ones(1))


def test_tensor_bad_data():
    with pytest.raises(ValueError, match="sequence"):
        ember.tensor([[1, 2], [3]])
    with pytest.raises(ValueError, match="^too many dimensions 'str'$"):
        ember.tensor(["a"])                 # (strings are sequences of strings)
    with pytest.raises(RuntimeError, match="^Could not infer dtype of object$"):
        ember.tensor([object()])            # (a RuntimeError in PyTorch)


def test_as_tensor_and_asarray_share_memory():
    a = np.zeros(3, dtype=np.float32)
    t = ember.as_tensor(a)
    a[1] = 5
    assert t.tolist() == [0.0, 5.0, 0.0]
    assert ember.as_tensor(t) is t
    assert ember.as_tensor(a, dtype=ember.float64).dtype is ember.float64
    assert np.shares_memory(ember.asarray(a).numpy(), a)
    assert not np.shares_memory(ember.asarray(a, copy=True).numpy(), a)


def test_asarray_of_a_tensor_with_history():
    a = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a + 2
    assert ember.asarray(b) is b
    c = ember.asarray(b, requires_grad=False)        # detached, same memory
    assert c.grad_fn is None and not c.requires_grad and c.data_ptr() == b.data_ptr()
    assert repr(c) == "tensor([3., 4., 5.])"
    assert a.requires_grad and ember.asarray(a, requires_grad=False).requires_grad is False
    d = ember.asarray(b, copy=True)                   # copies stay differentiable
    assert d.grad_fn.name() == "CloneBackward0" and d.data_ptr() != b.data_ptr()
    e = ember.asarray(b, dtype=ember.float64)
    assert e.grad_fn.name() == "ToCopyBackward0" and e.tolist() == [3.0, 4.0, 5.0]


@pytest.mark.parametrize("factory,value", [(ember.zeros, 0), (ember.ones, 1), (ember.empty, 0)])
def test_factories_accept_size_forms(factory, value):
    for args in ((2, 3), ((2, 3),), ([2, 3],), (ember.Size([2, 3]),)):
        t = factory(*args)
        assert t.shape == (2, 3) and t.dtype is ember.float32
        assert t.tolist() == [[value] * 3] * 2
    assert factory(()).shape == () and factory(0).shape == (0,)
    assert factory(2, dtype=ember.int16).dtype is ember.int16
    assert factory(2, requires_grad=True).requires_grad


def test_negative_size():
    with pytest.raises(RuntimeError, match=r"^Trying to create tensor with negative dimension "
                                           r"-1: \[2, -1\]$"):
        ember.ones(2, -1)
    with pytest.raises(RuntimeError, match="^zeros: Dimension size must be non-negative.$"):
        ember.zeros(2, -1)                  # PyTorch words zeros' check its own way


def test_full_dtype_follows_fill_value():
    assert ember.full((2,), 7).dtype is ember.int64
    assert ember.full((2,), 7.0).dtype is ember.float32
    assert ember.full((2,), True).dtype is ember.bool
    assert ember.full((2,), 1j).dtype is ember.complex64
    assert ember.full((2, 2), 3, dtype=ember.float64).tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_like_factories():
    x = ember.ones(2, 3, dtype=ember.float64)
    for fn in (ember.zeros_like, ember.ones_like, ember.empty_like):
        y = fn(x)
        assert y.shape == x.shape and y.dtype is ember.float64
    assert ember.full_like(x, 4).tolist() == [[4.0] * 3] * 2
    assert ember.zeros_like(x, dtype=ember.int8).dtype is ember.int8


def test_arange():
    assert ember.arange(5).tolist() == [0, 1, 2, 3, 4] and ember.arange(5).dtype is ember.int64
    assert ember.arange(1, 4).tolist() == [1, 2, 3]
    assert ember.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert ember.arange(0, 1, 0.25).dtype is ember.float32
    assert ember.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert ember.arange(3, dtype=ember.float64).dtype is ember.float64
    assert len(ember.arange(0, 1, 0.1)) == 10
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        ember.arange(0, 1, 0)
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        ember.arange(0, 5, -1)


def test_linspace_logspace_eye():
    assert ember.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert ember.linspace(0, 1, 5).dtype is ember.float32
    assert ember.linspace(-1, 1, 1).tolist() == [-1.0]
    assert ember.linspace(0, 10, 3, dtype=ember.int64).tolist() == [0, 5, 10]
    assert ember.logspace(0, 2, 3).tolist() == [1.0, 10.0, 100.0]
    assert ember.logspace(0, 3, 4, base=2).tolist() == [1.0, 2.0, 4.0, 8.0]
    assert ember.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert ember.eye(2, 3).shape == (2, 3)
    assert math.isclose(ember.linspace(0, 1, 3, dtype=ember.float64)[1].item()
                        if hasattr(ember.Tensor, "__getitem__") else 0.5, 0.5)


def test_out_argument_of_factories():
    out = ember.empty(0)
    r = ember.zeros(2, 2, out=out)
    assert r is out and out.shape == (2, 2)
    ember.arange(3, out=out)
    assert out.tolist() == [0, 1, 2]


def test_scalar_tensor():
    t = ember.scalar_tensor(3)
    assert t.shape == () and t.dtype is ember.float32 and t.item() == 3.0


def test_new_factories_follow_the_tensor():
    x = ember.ones(2, dtype=ember.float64)
    assert x.new_zeros(3).dtype is ember.float64 and x.new_zeros(3).shape == (3,)
    assert x.new_ones((2, 2)).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert x.new_full((2,), 5).tolist() == [5.0, 5.0]
    assert x.new_empty(1).dtype is ember.float64
    assert x.new_tensor([1, 2]).dtype is ember.float64
    assert x.new_zeros(2, dtype=ember.int8).dtype is ember.int8


def test_float8_saturates_and_full_checks_range():
    assert ember.tensor([1e6, -3.0], dtype=ember.float8_e4m3fn).tolist() == [448.0, -3.0]
    with pytest.raises(RuntimeError, match="without overflow"):
        ember.full((2,), 1000.0, dtype=ember.float8_e4m3fn)
    with pytest.raises(RuntimeError, match="uint8_t without overflow"):
        ember.full((2,), 300, dtype=ember.uint8)
    assert ember.full((1,), -1, dtype=ember.uint8).tolist() == [255]


def test_out_of_range_floats_become_inf_without_numpys_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # NumPy's "overflow encountered in cast"
        assert ember.tensor([1e40, -1e40]).tolist() == [math.inf, -math.inf]
        assert ember.tensor([1e10], dtype=ember.float16).tolist() == [math.inf]
    with pytest.warns(RuntimeWarning, match="overflow"):    # NumPy's own warnings stay on
        np.float64(1e300) * np.float64(1e300)


def test_new_factories_take_size_by_keyword():
    x = ember.ones(1, dtype=ember.int16)
    assert x.new_zeros(size=(2, 3)).shape == (2, 3) and x.new_ones(size=[2]).dtype is ember.int16


def test_frombuffer_shares_a_buffers_memory():
    buffer = bytearray(b"\x01\x00\x00\x00\x02\x00\x00\x00")
    t = ember.frombuffer(buffer, dtype=ember.int32)
    assert t.tolist() == [1, 2]
    buffer[0] = 9
    assert t.tolist() == [9, 2]
    assert ember.frombuffer(buffer, dtype=ember.int32, count=1, offset=4).tolist() == [2]
    assert ember.frombuffer(b"\x00\x00\x80\x3f", dtype=ember.float32).tolist() == [1.0]
    for kwargs, message in [
            (dict(count=3), r"requested buffer length \(3 \* 4 bytes\) after offset \(0 bytes\)"),
            (dict(offset=9), r"offset \(9 bytes\) must be non-negative and no greater than"),
            (dict(dtype=ember.int64, offset=2), r"must be a multiple of element size \(8\)")]:
        with pytest.raises(ValueError, match=message):
            ember.frombuffer(buffer, **{"dtype": ember.int32, **kwargs})
    with pytest.raises(ValueError, match=r"both buffer length \(0\) and count \(-1\)"):
        ember.frombuffer(bytearray(), dtype=ember.int32)


def test_deprecated_range_includes_its_end():
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        r = ember.range(1, 4)
    assert r.tolist() == [1.0, 2.0, 3.0, 4.0] and r.dtype == ember.float32
    with pytest.warns(UserWarning):
        assert ember.range(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    with pytest.warns(UserWarning):
        assert ember.range(1, 3, dtype=ember.int64).tolist() == [1, 2, 3]
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="step must be nonzero"):
        ember.range(0, 1, 0)


def test_empty_permuted_lays_dims_out_in_the_order_given():
    t = ember.empty_permuted((2, 3, 4), (0, 2, 1))
    assert t.shape == (2, 3, 4) and t.stride() == (12, 1, 3)
    channels_last = ember.empty_permuted((2, 3, 4, 5), (0, 2, 3, 1), dtype=ember.float16,
                                         requires_grad=True)
    assert channels_last.stride() == (60, 1, 15, 3) and channels_last.requires_grad
    assert channels_last.is_leaf and channels_last.dtype == ember.float16
    with pytest.raises(RuntimeError, match="Duplicate dim not allowed"):
        ember.empty_permuted((2, 3), (0, 0))


def test_factories_take_size_as_a_keyword():
    for factory in (ember.zeros, ember.ones, ember.empty, ember.rand, ember.randn):
        assert factory(size=(2, 3)).shape == (2, 3)
        # (PyTorch declares rand and randn twice, with and without a generator)
        twice = factory in (ember.rand, ember.randn)
        with pytest.raises(TypeError, match=r"invalid combination of arguments - got \(tuple, "
                           r"size=tuple\)" if twice else r"got multiple values for argument "
                           r"'size'"):
            factory((2,), size=(2,))
    assert ember.randint(5, size=(4,)).shape == (4,)
    assert int(ember.randint(5, size=(100,)).max()) < 5


def test_ragged_data_and_huge_ints_raise_as_pytorch():
    with pytest.raises(ValueError, match=r"^expected sequence of length 2 at dim 1 \(got 3\)$"):
        ember.tensor([[1, 2], [3, 4, 5]])
    with pytest.raises(ValueError, match=r"^expected sequence of length 1 at dim 2 \(got 2\)$"):
        ember.tensor([[[1], [2]], [[3], [4, 5]]])
    for data in (2 ** 63, [2 ** 64], [-2 ** 63 - 1]):
        with pytest.raises(ValueError, match="^Overflow when unpacking long long$"):
            ember.tensor(data)
    assert ember.tensor([2 ** 63], dtype=ember.float64).item() == 2.0 ** 63


def test_from_numpy_warns_once_for_a_read_only_array(monkeypatch):
    from ember import _warn
    monkeypatch.setattr(_warn, "_WARNED_ONCE", set())
    frozen = np.ones(3)
    frozen.flags.writeable = False
    with pytest.warns(UserWarning, match="The given NumPy array is not writable"):
        ember.from_numpy(frozen)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.from_numpy(frozen)                    # suppressed from now on
        ember.as_tensor(frozen)
    monkeypatch.setattr(_warn, "_WARNED_ONCE", set())
    for convert in (ember.as_tensor, ember.asarray, ember.Tensor, ember.DoubleTensor):
        with pytest.warns(UserWarning, match="The given NumPy array is not writable"):
            ember.set_warn_always(True)             # (each warns, as under PyTorch's)
            try:
                convert(frozen)
            finally:
                ember.set_warn_always(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.set_warn_always(True)
        try:                                        # copies do not warn
            ember.tensor(frozen), ember.asarray(frozen, dtype=ember.float32)
        finally:
            ember.set_warn_always(False)


def test_read_only_warning_comes_before_the_checks_of_as_tensor_not_of_asarray():
    def warnings_of(convert, array):
        array.flags.writeable = False
        ember.set_warn_always(True)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with pytest.raises((TypeError, ValueError)):
                    convert(array)
        finally:
            ember.set_warn_always(False)
        return sum("NumPy array is not writable" in str(w.message) for w in caught)

    for make in (lambda: np.zeros(3, object), lambda: np.arange(3.0)[::-1]):
        assert warnings_of(ember.from_numpy, make()) == 1      # (as PyTorch's: then it raises)
        assert warnings_of(ember.as_tensor, make()) == 1
        assert warnings_of(ember.asarray, make()) == 0


def test_tensor_from_sequences_keeps_numpy_and_tensor_dtypes():
    # NumPy values and tensors inside a list count with their dtype, Python numbers with
    # the defaults, all promoted together (as PyTorch infers it)
    assert ember.tensor([np.float64(1), np.float64(2)]).dtype is ember.float64
    assert ember.tensor([np.int32(1), np.int32(2)]).dtype is ember.int32
    assert ember.tensor([np.int32(1), 2]).dtype is ember.int64
    assert ember.tensor([np.uint8(1), np.int8(2)]).dtype is ember.int16
    assert ember.tensor([np.float16(1), 1.5]).dtype is ember.float32
    assert ember.tensor([[1.5], [np.int32(1)]]).tolist() == [[1.5], [1.0]]
    assert ember.tensor([ember.tensor(1.0, dtype=ember.float64), 2.0]).dtype is ember.float64
    assert ember.tensor([ember.tensor(1, dtype=ember.int32)] * 2).dtype is ember.int32
    with pytest.warns(UserWarning, match="list of numpy.ndarrays is extremely slow"):
        t = ember.tensor([np.ones(2, np.float32), np.zeros(2)])
    assert t.dtype is ember.float64 and t.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert ember.tensor([1.0, 2.0]).dtype is ember.float32          # plain numbers unchanged


def test_numpy_conversion_errors_use_pytorchs_wording():
    with pytest.raises(TypeError, match=r"^can't convert np.ndarray of type numpy.object_\. "):
        ember.from_numpy(np.zeros(2, dtype=object))
    with pytest.raises(ValueError, match=r"a copy of your array  with array\.copy\(\)\.\) $"):
        ember.from_numpy(np.ones(3)[::-1])


@pytest.mark.parametrize("value, name", [
    ([1], "list"), (1.0, "float"), (np.float32(1), "numpy.float32"),
    (np.int64(2), "numpy.int64"), (ember.ones(1), "Tensor"),
])
def test_from_numpy_names_the_type_it_got_as_pytorch_does(value, name):
    with pytest.raises(TypeError) as info:
        ember.from_numpy(value)
    assert str(info.value) == f"expected np.ndarray (got {name})"


def test_complex_data_with_a_bfloat16_default_has_no_complex_dtype():
    ember.set_default_dtype(ember.bfloat16)
    try:
        with pytest.raises(RuntimeError, match="^invalid default scalar type for complex$"):
            ember.tensor([1j])
        assert (ember.zeros(1) + 1j).dtype is ember.complex64
    finally:
        ember.set_default_dtype(ember.float32)


def test_python_numbers_read_into_other_kinds_as_pytorch():
    # floats into an integral dtype must be numbers within its range (checked before the
    # truncation); into bool they count as nonzero; complex numbers fit complex dtypes only
    for value, dtype in [(float("nan"), ember.int64), (float("inf"), ember.int32),
                         (127.9, ember.int8), (-0.5, ember.uint8), (1e30, ember.int64)]:
        with pytest.raises(RuntimeError, match=f"^value cannot be converted to type "
                                               f"{dtype.name} without overflow$"):
            ember.tensor([value], dtype=dtype)
    scalar = ember.tensor(2.7, dtype=ember.int64)
    assert scalar.tolist() == 2 and type(scalar._data) is np.ndarray
    assert ember.tensor([1.5, -2.5, 0.0], dtype=ember.int16).tolist() == [1, -2, 0]
    assert ember.tensor([0.5, 0.0, float("nan")], dtype=ember.bool).tolist() == [True, False,
                                                                              True]
    assert ember.tensor([], dtype=ember.int64).shape == (0,)
    with pytest.raises(TypeError, match="^must be real number, not complex$"):
        ember.tensor([1 + 0j], dtype=ember.float32)
    with pytest.raises(TypeError, match="^'complex' object cannot be interpreted as an "
                                        "integer$"):
        ember.tensor([1 + 0j], dtype=ember.int64)
    assert ember.tensor([1j, 0j], dtype=ember.bool).tolist() == [True, False]
    for data, name in [(None, "NoneType"), ([1, None], "NoneType"), ({"a": 1}, "dict")]:
        with pytest.raises(RuntimeError, match=f"^Could not infer dtype of {name}$"):
            ember.tensor(data)


def test_asarray_without_copies_and_as_tensor_of_arrays():
    a = np.ones(2, np.float32)
    with pytest.raises(ValueError, match="^can't alias tensor with dtype 'Float' into dtype "
                                         "'Double'.$"):
        ember.asarray(a, dtype=ember.float64, copy=False)
    with pytest.raises(ValueError, match="^can't alias tensor with dtype 'Float' into dtype "
                                         "'Int'.$"):
        ember.asarray(ember.ones(2), dtype=ember.int32, copy=False)
    with pytest.raises(ValueError, match="^can't alias arbitrary sequence into a tensor.$"):
        ember.asarray([1.0], copy=False)
    assert np.shares_memory(ember.asarray(a, copy=False).numpy(), a)
    with pytest.raises(ValueError, match="At least one stride in the given numpy array is "
                                         "negative"):
        ember.as_tensor(np.arange(3)[::-1])
    for convert in (ember.as_tensor, ember.asarray):   # (a conversion too, as PyTorch 2.13)
        with pytest.raises(ValueError, match="At least one stride in the given numpy array "):
            convert(np.arange(3)[::-1], dtype=ember.float32)
    with pytest.raises(TypeError, match=r"^copy_\(\): argument 'other' \(position 1\) must be "
                                        r"Tensor, not numpy.ndarray$"):
        ember.zeros(2).copy_(np.ones(2))


def test_dtype_arguments_take_python_types_and_refuse_the_rest():
    for kind, dtype in [(float, ember.float64), (int, ember.int64), (bool, ember.bool),
                        (complex, ember.complex128)]:
        assert ember.ones(2, dtype=kind).dtype is dtype
        assert ember.tensor([1], dtype=kind).dtype is dtype
        assert ember.full((1,), 1, dtype=kind).dtype is dtype
        assert ember.ones(2).to(kind).dtype is dtype
    assert ember.ones(2).to("cpu", float).dtype is ember.float64
    with pytest.raises(TypeError, match=r"^tensor\(\): argument 'dtype' must be torch.dtype, "
                                        r"not type$"):
        ember.tensor([1], dtype=np.float32)
    with pytest.raises(TypeError, match=r"^zeros\(\): argument 'dtype' must be torch.dtype, "
                                        r"not str$"):
        ember.zeros(2, dtype="float32")


def test_linspace_values_are_pytorchs_to_the_last_bit():
    # counted up from start for the first half and back from end for the rest, each value
    # rounded once: a range symmetric about 0 comes out symmetric
    x = ember.linspace(-1, 1, 12)
    assert ember.equal(x, -x.flip(0))
    assert x[1].item() == -0.8181818127632141 and x[5].item() == -0.09090906381607056
    y = ember.linspace(-3.3, 7.1, 101)
    assert [y[i].item() for i in (1, 37, 50, 63, 99)] == [
        -3.19599986076355, 0.5479998588562012, 1.9000002145767212, 3.252000093460083,
        6.995999813079834]
    z = ember.linspace(1e-3, 5.5, 1000, dtype=ember.float64)
    assert [z[i].item() for i in (1, 333, 500, 777, 998)] == [
        0.0065045045045045045, 1.834, 2.7532522522522522, 4.278, 5.494495495495496]
    assert ember.linspace(2, 5, 1).tolist() == [2.0] and ember.linspace(2, 5, 0).numel() == 0
    c = ember.linspace(1j, -2 + 3j, 8)
    assert c.dtype == ember.complex64 and c[0].item() == 1j and c[-1].item() == -2 + 3j
    assert ember.linspace(0, 10, 4, dtype=ember.int64).tolist() == [0, 3, 6, 10]


def test_arange_bound_errors_name_pytorch_messages():
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step "
                                           "sign"):
        ember.arange(0, 5, -1)
    with pytest.raises(RuntimeError, match="unsupported range: 0 -> inf"):
        ember.arange(0, math.inf)
    with pytest.raises(RuntimeError, match="unsupported range: nan -> 1"):
        ember.arange(math.nan, 1.0)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        ember.arange(0, 5, math.nan)
    assert ember.arange(0, 5, math.inf).shape == (0,)


@pytest.mark.parametrize("call, message", [
    (lambda: ember.arange(3, dtype=ember.bool), "\"arange_cpu\" not implemented for 'Bool'"),
    (lambda: ember.arange(3, dtype=ember.complex64),
     "\"arange_cpu\" not implemented for 'ComplexFloat'"),
    (lambda: ember.arange(3, dtype=ember.uint32), "\"arange_cpu\" not implemented for 'UInt32'"),
    (lambda: ember.linspace(0, 1, 3, dtype=ember.bool),
     "\"linspace_cpu\" not implemented for 'Bool'"),
    (lambda: ember.logspace(0, 1, 3, dtype=ember.float8_e5m2),
     "\"logspace_cpu\" not implemented for 'Float8_e5m2'"),
])
def test_range_factories_refuse_dtypes_pytorch_has_no_kernel_for(call, message):
    with pytest.raises(NotImplementedError, match=message):
        call()


def test_range_factories_keep_the_dtypes_they_support():
    assert ember.linspace(0, 1, 3, dtype=ember.complex64).dtype is ember.complex64
    assert ember.linspace(0, 1, 0, dtype=ember.bool).shape == (0,)
    assert ember.arange(3, dtype=ember.uint8).tolist() == [0, 1, 2]


def test_factory_size_and_like_errors_name_pytorch_messages():
    with pytest.raises(RuntimeError, match="^number of steps must be non-negative$"):
        ember.linspace(0, 1, -1)
    with pytest.raises(RuntimeError, match="m must be greater or equal to 0, got -1"):
        ember.eye(2, -1)
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        ember.eye(-1, -2)
    with pytest.raises(TypeError, match=r"zeros_like\(\): argument 'input' \(position 1\) "
                                        r"must be Tensor, not list"):
        ember.zeros_like([1, 2])
    with pytest.raises(TypeError, match=r"full_like\(\): argument 'input' .* not int"):
        ember.full_like(3, 1)
    with pytest.raises(TypeError, match=r"rand_like\(\): argument 'input' .* not list"):
        ember.rand_like([1.0])


@pytest.mark.parametrize("call,message", [
    (lambda: ember.zeros(2.5), "zeros(): argument 'size' (position 1) must be tuple of ints, "
                               "not float"),
    (lambda: ember.zeros((2, "a")), "zeros(): argument 'size' failed to unpack the object at "
                                    "pos 2 with error \"type must be tuple of ints,but got str\""),
    (lambda: ember.rand(2, 2.5), "rand(): argument 'size' failed to unpack the object at pos 2 "
                                 "with error \"type must be tuple of ints,but got float\""),
    (lambda: ember.ones([2], [3]), "ones() takes 1 positional argument but 2 were given"),
    (lambda: ember.empty(2.0, 3), "empty() takes 1 positional argument but 2 were given"),
    (lambda: ember.ones((True, 2)), "ones(): argument 'size' (position 1) must be tuple of "
                                    "ints, but found element of type bool at pos 0"),
    (lambda: ember.zeros(True), "zeros(): argument 'size' (position 1) must be tuple of ints, "
                                "not bool"),
    (lambda: ember.randn(ember.tensor(2.0)), "randn(): argument 'size' (position 1) must be "
                                             "tuple of ints, not Tensor"),
    (lambda: ember.ones(size=2.5), "ones(): argument 'size' must be tuple of ints, not float"),
    (lambda: ember.zeros(size=[2.5]), "zeros(): argument 'size' must be tuple of ints, not list"),
    (lambda: ember.full((2, "a"), 1.0), "full(): argument 'size' failed to unpack the object at "
                                        "pos 2 with error \"type must be tuple of ints,but got "
                                        "str\""),
    (lambda: ember.zeros(2).new_ones(2.5), "new_ones(): argument 'size' (position 1) must be "
                                           "tuple of ints, not float"),
    (lambda: ember.zeros(2).new_full(2.5, 1.0), "new_full(): argument 'size' (position 1) must "
                                                "be tuple of ints, not float"),
    (lambda: ember.eye(2.5), "eye(): argument 'n' (position 1) must be int, not float"),
])
def test_factories_refuse_sizes_that_are_not_ints(call, message):
    with pytest.raises(TypeError) as info:
        call()
    assert str(info.value) == message


def test_factories_take_int_like_sizes():
    assert ember.ones(np.int64(2), ember.tensor(3)).shape == (2, 3)
    assert ember.zeros((ember.tensor(2), 1)).shape == (2, 1)
    assert ember.zeros([]).shape == () and ember.zeros(ember.Size([2, 3])).shape == (2, 3)
    assert ember.zeros(2).new_zeros(size=(1, 2)).shape == (1, 2)


def test_copy_construct_warnings_name_the_call_at_the_callers_line():
    t = ember.tensor([1j, 0j])
    with pytest.warns(UserWarning, match=r"rather than tensor\.new_tensor\(sourceTensor\)") as rec:
        out = t.new_tensor(t, dtype=ember.bool)
    assert out.tolist() == [True, False] and rec[0].filename == __file__
    with pytest.warns(UserWarning, match=r"rather than ember\.tensor\(sourceTensor\)") as rec:
        ember.tensor(t)
    assert rec[0].filename == __file__


def test_full_of_one_16_bit_element_overflows_to_inf_as_pytorch():
    # PyTorch fills a single float16/bfloat16 element unchecked; more elements raise
    assert ember.full((1,), 70000.0, dtype=ember.float16).tolist() == [float("inf")]
    assert ember.zeros(1, dtype=ember.bfloat16).fill_(1e39).tolist() == [float("inf")]
    with pytest.raises(RuntimeError, match="value cannot be converted to type c10::Half"):
        ember.full((2,), 70000.0, dtype=ember.float16)
    with pytest.raises(RuntimeError, match="value cannot be converted to type float without"):
        ember.full((1,), 1e39, dtype=ember.float32)
    # float8 too: e5m2 overflows to inf, e4m3fn (which has no inf) saturates at 448
    assert ember.full((1,), -7e4, dtype=ember.float8_e5m2).float().tolist() == [-float("inf")]
    assert ember.full((1,), float("inf"), dtype=ember.float8_e4m3fn).float().tolist() == [448.0]
    with pytest.raises(RuntimeError, match="c10::Float8_e4m3fn without overflow"):
        ember.full((2,), 450.0, dtype=ember.float8_e4m3fn)


@pytest.mark.parametrize("make", [ember.from_numpy, ember.as_tensor, ember.asarray])
def test_numpy_alias_keeps_its_shape_when_the_array_is_reshaped(make):
    # PyTorch's tensor holds its own sizes: reshaping the array object in place leaves the
    # tensor's shape, while the memory stays shared both ways
    a = np.zeros((4, 4), np.float32)
    t = make(a)
    a.shape = (16,)
    assert tuple(t.shape) == (4, 4) and t.stride() == (4, 1)
    a[5] = 7.0
    t[2, 3] = 9.0
    assert t[1, 1].item() == 7.0 and a[11] == 9.0
    assert not t._is_view() and t._base is None
