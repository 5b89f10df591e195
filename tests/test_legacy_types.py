"""PyTorch's legacy tensor types: ``FloatTensor(2, 3)``, ``isinstance(x, LongTensor)``,
``x.type(DoubleTensor)`` and ``set_default_tensor_type``."""

import warnings

import pytest

import ember


def test_types_build_tensors_of_their_dtype():
    assert ember.FloatTensor(2, 3).shape == (2, 3)
    assert ember.FloatTensor(ember.Size([4])).dtype == ember.float32
    assert ember.FloatTensor().shape == (0,)
    assert ember.FloatTensor([1, 2]).tolist() == [1.0, 2.0]
    assert ember.FloatTensor((2, 3)).tolist() == [2.0, 3.0]         # a tuple is data
    long = ember.LongTensor([1.5, -2.5])
    assert long.dtype == ember.int64 and long.tolist() == [1, -2]
    assert ember.ByteTensor([3]).dtype == ember.uint8
    assert ember.BoolTensor([0, 2]).tolist() == [False, True]
    assert ember.BFloat16Tensor(1).dtype == ember.bfloat16


def test_a_tensor_of_the_same_type_passes_through_and_another_is_refused():
    x = ember.ones(2)
    alias = ember.FloatTensor(x)            # as PyTorch's: an alias, a view of all of x
    assert alias is not x and alias._base is x and alias.data_ptr() == x.data_ptr()
    with pytest.raises(TypeError, match=r"^expected TensorOptions\(dtype=float, device=cpu, "
                                        r".*\(got TensorOptions\(dtype=double, device=cpu, "):
        ember.FloatTensor(x.double())


def test_isinstance_checks_dtype_and_device_type():
    x = ember.ones(2)
    assert isinstance(x, ember.FloatTensor) and isinstance(x.long(), ember.LongTensor)
    assert not isinstance(x, ember.DoubleTensor) and not isinstance(x, ember.cuda.FloatTensor)
    assert not isinstance([1.0], ember.FloatTensor)
    assert not issubclass(ember.FloatTensor, ember.Tensor)          # as in PyTorch
    assert ember.FloatTensor.dtype is ember.float32 and not ember.FloatTensor.is_cuda
    assert ember.cuda.HalfTensor.is_cuda and ember.cuda.HalfTensor.dtype is ember.float16
    assert repr(ember.cuda.LongTensor) == "<class 'ember.cuda.LongTensor'>"


def test_type_casts_to_a_legacy_type_or_its_name():
    x = ember.tensor([1.5, 2.0])
    assert x.type(ember.DoubleTensor).dtype == ember.float64
    assert x.type("torch.LongTensor").tolist() == [1, 2]
    assert x.type("ember.HalfTensor").dtype == ember.float16
    assert x.type(ember.int32).dtype == ember.int32
    assert x.type() == "ember.FloatTensor"
    with pytest.raises(ValueError, match="^invalid type: 'torch.Float'$"):
        x.type("torch.Float")


@pytest.mark.skipif(ember.cuda.is_available(), reason="checks the answers without CUDA")
def test_cuda_types_need_cuda():
    with pytest.raises(TypeError, match="^type ember.cuda.FloatTensor not available. ember not "
                                        "compiled with CUDA enabled.$"):
        ember.cuda.FloatTensor(2)
    with pytest.raises(RuntimeError, match="not compiled with CUDA enabled"):
        ember.ones(2).type("torch.cuda.FloatTensor")


def test_set_default_tensor_type_sets_the_default_dtype():
    ember.set_warn_always(True)         # (PyTorch warns once per process otherwise)
    try:
        with pytest.warns(UserWarning, match=r"set_default_tensor_type\(\) is deprecated"):
            ember.set_default_tensor_type(ember.DoubleTensor)
        assert ember.get_default_dtype() is ember.float64 and ember.ones(1).dtype == ember.float64
        with pytest.warns(UserWarning):
            ember.set_default_tensor_type("torch.HalfTensor")
        assert ember.tensor([1.0]).dtype == ember.float16
        with pytest.warns(UserWarning), pytest.raises(
                TypeError, match="^only floating-point types are supported as the default type$"):
            ember.set_default_tensor_type(ember.LongTensor)
        assert ember.get_default_dtype() is ember.float16
    finally:
        ember.set_default_dtype(ember.float32)
        ember.set_warn_always(False)


def test_set_default_tensor_type_warns_once_unless_warn_always():
    try:
        ember.set_default_tensor_type(ember.FloatTensor)        # (the once may be spent)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            ember.set_default_tensor_type(ember.FloatTensor)
            ember.set_warn_always(True)
            ember.set_default_tensor_type(ember.FloatTensor)
        assert len(seen) == 1 and "is deprecated" in str(seen[0].message)
        assert seen[0].filename == __file__
    finally:
        ember.set_warn_always(False)
        ember.set_default_dtype(ember.float32)
