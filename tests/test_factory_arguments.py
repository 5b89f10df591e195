"""Factories' argument checks and ``out=`` handling, with PyTorch's results and messages."""

import warnings
from fractions import Fraction

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.filterwarnings("ignore:torch.range is deprecated")


def test_asarray_requires_grad_on_integers_gives_the_factory_error():
    with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex dtype "
                                           "can require gradients$"):
        ember.asarray([1, 2], requires_grad=True)
    assert ember.asarray([1.0, 2.0], requires_grad=True).requires_grad


def test_list_of_arrays_warning_blames_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.tensor([np.array([1, 2]), np.array([3, 4])])
    assert [w.filename for w in caught] == [__file__]


@pytest.mark.parametrize("call,message", [
    (lambda: ember.arange(ember.tensor([3])),
     "arange(): argument 'end' must be Number, not Tensor"),
    (lambda: ember.arange(ember.tensor(3.0, requires_grad=True)),
     "arange(): argument 'end' must be Number, not Tensor"),
    (lambda: ember.range(0, ember.tensor([3])),
     "range(): argument 'end' must be Number, not Tensor"),
    (lambda: ember.linspace("a", 1, 3), "linspace(): argument 'start' must be Number, not str"),
    (lambda: ember.full(3, 1.0), "full(): argument 'size' (position 1) must be tuple of ints, "
                                 "not int"),
    (lambda: ember.full((2,), ember.tensor([3])),
     "full(): argument 'fill_value' (position 2) must be Number, not Tensor"),
    (lambda: ember.full((2,), ember.tensor(1.0, requires_grad=True)),
     "full(): argument 'fill_value' (position 2) must be Number, not Tensor"),
    (lambda: ember.full((2,), "a"), "full(): argument 'fill_value' (position 2) must be Number, "
                                    "not str"),
    (lambda: ember.full((2,), Fraction(1, 2)),
     "full(): argument 'fill_value' (position 2) must be Number, not Fraction"),
    (lambda: ember.tensor([1.0]).new_full(2, 1.0),
     "new_full(): argument 'size' (position 1) must be tuple of ints, not int"),
    (lambda: ember.scalar_tensor(ember.tensor([1.0])),
     "scalar_tensor(): argument 's' (position 1) must be Number, not Tensor"),
    (lambda: ember.frombuffer(bytearray(8)),
     'frombuffer() missing 1 required positional arguments: "dtype"'),
    (lambda: ember.set_default_dtype("float64"),
     "invalid dtype object: only floating-point types are supported as the default type"),
])
def test_argument_type_errors_as_pytorch(call, message):
    with pytest.raises(TypeError) as info:
        call()
    assert str(info.value) == message


def test_zero_dim_tensor_arguments_still_accepted():
    assert ember.arange(ember.tensor(3)).tolist() == [0, 1, 2]
    assert ember.full((2,), ember.tensor(3)).tolist() == [3, 3]
    assert ember.zeros(size=()).shape == ()
    grad_end = ember.tensor(1.0, requires_grad=True)          # linspace takes it
    assert ember.linspace(0, grad_end, 3).tolist() == [0.0, 0.5, 1.0]


@pytest.mark.parametrize("start,end,got", [
    (ember.tensor([0.0]), 1, "start with 1 dimension(s)"),
    (0, ember.tensor([[1.0]]), "end with 2 dimension(s)"),
    (ember.tensor(0.0), ember.tensor([1.0, 2.0]),
     "start with 0 dimension(s) and end with 1 dimension(s)"),
])
def test_linspace_logspace_refuse_non_scalar_tensor_ends(start, end, got):
    for name in ("linspace", "logspace"):
        with pytest.raises(RuntimeError) as info:
            getattr(ember, name)(start, end, 3)
        assert str(info.value) == (f"{name} only supports 0-dimensional start and end "
                                   f"tensors, but got {got}.")


def test_arange_numpy_float_bounds_give_float_dtype():
    assert ember.arange(np.float32(2.5)).dtype is ember.float32
    assert ember.arange(np.float32(2.5)).tolist() == [0.0, 1.0, 2.0]
    assert ember.arange(np.int32(3)).dtype is ember.int64


def test_frombuffer_of_a_non_buffer_raises_value_error():
    with pytest.raises(ValueError, match="^object does not implement Python buffer protocol.$"):
        ember.frombuffer([1, 2], dtype=ember.int32)


@pytest.mark.parametrize("make,dtype,values", [
    (lambda o: ember.zeros(2, out=o), ember.float64, [0.0, 0.0]),
    (lambda o: ember.ones(2, out=o), ember.int32, [1, 1]),
    (lambda o: ember.full((2,), 2.5, out=o), ember.int64, [2, 2]),
    (lambda o: ember.arange(3, out=o), ember.float64, [0.0, 1.0, 2.0]),
    (lambda o: ember.arange(3.0, out=o), ember.int64, [0, 1, 2]),
    (lambda o: ember.linspace(0, 1, 3, out=o), ember.float64, [0.0, 0.5, 1.0]),
    (lambda o: ember.logspace(0, 2, 3, out=o), ember.float64, [1.0, 10.0, 100.0]),
    (lambda o: ember.range(0, 2, out=o), ember.float64, [0.0, 1.0, 2.0]),
    (lambda o: ember.eye(2, out=o), ember.float64, [[1.0, 0.0], [0.0, 1.0]]),
])
def test_factory_out_keeps_its_dtype(make, dtype, values):
    out = ember.empty(np.array(values).shape, dtype=dtype)
    assert make(out) is out
    assert out.dtype is dtype and out.tolist() == values


def test_factory_out_is_written_in_place_so_views_see_it():
    buf = ember.ones(4)
    view = buf[:2]
    ember.zeros(4, out=buf)
    assert view.tolist() == [0.0, 0.0]
    resized = ember.arange(5, out=ember.empty(3, dtype=ember.float64))
    assert resized.dtype is ember.float64 and resized.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("call,message", [
    (lambda o: ember.zeros(2, dtype=ember.float32, out=o), "dtype Float does not match"),
    (lambda o: ember.arange(2, dtype=ember.int64, out=o), "dtype Long does not match"),
    (lambda o: ember.full((2,), 1.0, dtype=ember.float32, out=o), "dtype Float does not match"),
    (lambda o: ember.linspace(0, 1, 2, dtype=ember.float32, out=o),
     "dtype Float does not match"),
])
def test_factory_out_with_another_dtype_raises(call, message):
    with pytest.raises(RuntimeError) as info:
        call(ember.empty(2, dtype=ember.float64))
    assert str(info.value) == f"{message} dtype of out parameter (Double)"


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_factories_need_a_size(name):
    factory = getattr(ember, name)
    with pytest.raises(TypeError, match=f'^{name}\\(\\) missing 1 required positional '
                                        f'arguments: "size"$'):
        factory(dtype=ember.float64)
    assert factory(()).shape == () and factory(size=()).shape == ()
