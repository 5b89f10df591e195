"""Creation and conversion: the bugs round 35's fuzzer against PyTorch found (values and errors
as PyTorch 2.13 gives them)."""

import warnings

import numpy as np
import pytest

import ember


@pytest.fixture
def warn_always():
    old = ember.is_warn_always_enabled()
    ember.set_warn_always(True)
    yield
    ember.set_warn_always(old)


def _caught(fn):
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        out = fn()
    return out, [(w.category, str(w.message)) for w in ws]


def test_complex_array_into_a_real_dtype_warns_as_pytorch(warn_always):
    out, ws = _caught(lambda: ember.tensor(np.array([1 + 2j, 3j]), dtype=ember.int16))
    assert out.tolist() == [1, 0]
    assert ws == [(UserWarning, "Casting complex values to real discards the imaginary part")]
    out, ws = _caught(lambda: ember.as_tensor(np.empty((0, 2), complex), dtype=ember.float32))
    assert out.shape == (0, 2) and ws == []                 # (nothing cast: no warning)
    out, ws = _caught(lambda: ember.tensor(np.array([1j, 0]), dtype=ember.bool))
    assert out.tolist() == [True, False] and ws == []


def test_an_empty_complex_tensor_cast_to_real_does_not_warn(warn_always):
    e = ember.empty(0, 2, dtype=ember.complex64)
    for fn in (lambda: e.to(ember.float32), lambda: ember.empty(0, 2).copy_(e), e.float):
        assert _caught(fn)[1] == []
    assert len(_caught(lambda: ember.ones(1, dtype=ember.cfloat).float())[1]) == 1


@pytest.mark.parametrize("data", [[1, 2 ** 63], [[1, 2], [3, 2 ** 63]], [2 ** 63 - 1, 2 ** 63]])
def test_python_ints_past_int64_overflow(data):
    with pytest.raises(ValueError, match="^Overflow when unpacking long long$"):
        ember.tensor(data)
    with pytest.raises(ValueError, match="^Overflow when unpacking long long$"):
        ember.as_tensor(data)


def test_python_ints_past_int64_read_as_floats_where_a_float_decides():
    assert ember.tensor([2 ** 63], dtype=ember.float32).tolist() == [2.0 ** 63]
    assert ember.tensor([1.5, 2 ** 63]).tolist() == [1.5, 2.0 ** 63]


def test_tensors_of_several_elements_inside_data():
    t = ember.ones(2, dtype=ember.int64)
    index_msg = "only integer tensors of a single element can be converted to an index"
    with pytest.raises(TypeError, match=index_msg):
        ember.tensor([t, t])
    with pytest.raises(TypeError, match=index_msg):
        ember.tensor([ember.ones(2, dtype=ember.bool)] * 2)
    with pytest.raises(TypeError, match=index_msg):
        ember.tensor([1, t])
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python"):
        ember.tensor([t, t], dtype=ember.float32)
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python"):
        ember.tensor([1, ember.ones(2)])


@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy.ndarrays")
@pytest.mark.parametrize("data, dtype, name", [
    ([np.float32(1.5), 1], ember.int64, "numpy.float32"),
    (np.bool_(True), ember.int16, "numpy.bool"),
    ([np.bool_(True), 1], None, "numpy.bool"),
    ([np.bool_(True), np.float32(2)], ember.bool, "numpy.float32"),
    ([np.array([1, 2], np.float32), np.array([3, 4])], ember.int32, "numpy.float32"),
    ([np.complex128(2 + 1j)], ember.int32, "numpy.complex128"),
    (np.float16(2), ember.uint8, "numpy.float16"),
])
def test_numpy_values_without_index_refused_into_integral_dtypes(data, dtype, name):
    with pytest.raises(TypeError, match=f"^'{name}' object cannot be interpreted as an integer$"):
        ember.tensor(data, dtype=dtype)


def test_values_read_into_integral_dtypes_that_have_an_index():
    assert ember.tensor([np.bool_(True), True], dtype=ember.bool).tolist() == [True, True]
    assert ember.tensor([np.float64(2.5), 1], dtype=ember.int64).tolist() == [2, 1]
    assert ember.tensor([np.int8(3), 1], dtype=ember.uint8).tolist() == [3, 1]
    assert ember.tensor([ember.tensor(True), 2], dtype=ember.int64).tolist() == [1, 2]


def test_float_tensors_inside_data_refused_into_integral_dtypes():
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        ember.tensor([ember.tensor(1.5), 1], dtype=ember.int64)
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        ember.tensor([ember.tensor([1.5])], dtype=ember.bool)


def test_complex_values_inside_data_into_a_float_dtype():
    with pytest.warns(np.exceptions.ComplexWarning):
        out = ember.tensor([np.complex64(2 + 1j), 3], dtype=ember.float32)
    assert out.tolist() == [2.0, 3.0]
    assert ember.tensor([ember.tensor(2 + 0j), 3], dtype=ember.float16).tolist() == [2.0, 3.0]
    with pytest.raises(RuntimeError, match="value cannot be converted to type double without"):
        ember.tensor([ember.tensor(2 + 1j), 3], dtype=ember.float32)
    with pytest.raises(TypeError, match="must be real number, not complex"):
        ember.tensor([2 + 1j, 3], dtype=ember.float32)          # (a Python complex)


def test_asarray_reads_numpy_scalars_as_arrays_as_tensor_does_not():
    assert ember.asarray(np.float32(1.5), dtype=ember.int64).tolist() == 1
    assert ember.asarray(np.bool_(True), dtype=ember.uint8).tolist() == 1
    assert ember.asarray(np.int8(3)).dtype is ember.int8
    with pytest.raises(TypeError, match="'numpy.float32' object cannot be interpreted"):
        ember.as_tensor(np.float32(1.5), dtype=ember.int8)
    with pytest.raises(RuntimeError, match="^can't alias NumPy scalars. Either remove copy=False"):
        ember.asarray(np.int8(1), copy=False)
    with pytest.raises(ValueError, match="can't alias arbitrary sequence"):
        ember.asarray([1, 2], copy=False)


def test_negative_strides_are_refused_before_byte_order_and_dtype():
    a = np.arange(3, dtype=">i4")[::-1]
    for fn in (ember.from_numpy, ember.tensor, ember.as_tensor,
               lambda x: ember.asarray(np.arange(3)[::-1], dtype=ember.int16, copy=False)):
        with pytest.raises(ValueError, match="At least one stride in the given numpy array is "):
            fn(a)


@pytest.mark.parametrize("args, int64, uint8", [
    ((3, 10.5), [3, 4, 5, 6, 7, 8, 9], [3, 4, 5, 6, 7, 8, 9, 10]),
    ((2.5, 10.5), [2, 3, 4, 5, 6, 7, 8, 9], [2, 3, 4, 5, 6, 7, 8, 9]),
    ((0, 5, 1.5), [0, 1, 2, 3, 4], [0, 1, 2, 3]),
    ((0.5, 3.7, 1.2), [0, 1, 2], [0, 1, 2]),
    ((0, 5, 0.5), ValueError, [0] * 10),
])
def test_integral_arange_truncates_its_bounds(args, int64, uint8):
    if int64 is ValueError:
        with pytest.raises(ValueError, match="^step must be nonzero$"):
            ember.arange(*args, dtype=ember.int64)
    else:
        assert ember.arange(*args, dtype=ember.int64).tolist() == int64
    assert ember.arange(*args, dtype=ember.uint8).tolist() == uint8
    assert ember.arange(-2.5, 3, dtype=ember.int64).tolist() == [-2, -1, 0, 1, 2]
    assert ember.arange(2, 9, 3, dtype=ember.int8).tolist() == [2, 5, 8]


def test_arange_refuses_its_dtype_before_its_bounds():
    with pytest.raises(NotImplementedError, match="\"arange_cpu\" not implemented for 'Complex"):
        ember.arange(-2, dtype=ember.complex64)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        ember.arange(0, 5, 0, dtype=ember.int64)


def test_one_step_spaces_fill_without_the_kernel():
    assert ember.linspace(0, 1, 1, dtype=ember.bool).tolist() == [False]
    assert ember.logspace(-1, 1, 1, dtype=ember.bool).tolist() == [True]
    assert ember.logspace(2, 1, 1, dtype=ember.uint16).tolist() == [100]
    with pytest.raises(NotImplementedError, match="linspace_cpu"):
        ember.linspace(0, 1, 2, dtype=ember.bool)
    with pytest.raises(RuntimeError, match="^value cannot be converted to type int8_t without"):
        ember.logspace(40, 1, 1, dtype=ember.int8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # (NumPy's divide-by-zero stays quiet)
        assert ember.logspace(-1, 1, 1, base=0.0, dtype=ember.bool).tolist() == [True]


def test_numpy_refuses_conj_and_neg_views():
    c = ember.tensor([1 + 2j, 3 - 1j]).conj()
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that has conjugate"):
        np.asarray(c)
    with pytest.raises(RuntimeError, match="has negative bit set. Use tensor.resolve_neg"):
        np.asarray(c.imag)
    with pytest.raises(RuntimeError, match="has conjugate bit set"):
        c + np.ones(2)
    assert c.tolist() == [1 - 2j, 3 + 1j]
    assert np.asarray(c.resolve_conj()).tolist() == [1 - 2j, 3 + 1j]
    r = ember.tensor([1.0, 2.0], requires_grad=True).conj()   # (a real conj is no view)
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(r)


def test_dlpack_refuses_the_conjugate_bit():
    c = ember.tensor([1 + 2j]).conj()
    with pytest.raises(BufferError, match="Can't export tensors with the conjugate bit set"):
        ember.from_dlpack(c)
    with pytest.raises(BufferError, match="Can't export tensors with the conjugate bit set"):
        c.__dlpack__()
    assert ember.from_dlpack(c.imag).tolist() == [-2.0]     # (a negative bit: the values)
