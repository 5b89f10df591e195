"""DLPack exchange (``ember.from_dlpack``, ``ember.utils.dlpack``): memory shared, not copied."""

import gc

import numpy as np
import pytest

import ember
from ember.utils import dlpack


def test_from_dlpack_shares_a_numpy_arrays_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ember.from_dlpack(a)
    assert t.dtype == ember.float32 and t.shape == (2, 3)
    a[1, 2] = -1.0
    assert t[1, 2].item() == -1.0
    assert np.from_dlpack(t).ctypes.data == a.ctypes.data


def test_a_capsule_round_trip_shares_memory():
    t = ember.arange(4)
    capsule = ember.to_dlpack(t)
    assert dlpack.to_dlpack is ember.to_dlpack and dlpack.from_dlpack is ember.from_dlpack
    u = ember.from_dlpack(capsule)
    u[0] = 10                                       # writable, as PyTorch's
    assert t.tolist() == [10, 1, 2, 3] and u.dtype == ember.int64
    del t, capsule
    gc.collect()
    assert u.tolist() == [10, 1, 2, 3]              # the memory lives as long as u


def test_a_noncontiguous_view_keeps_its_strides():
    base = ember.arange(12.0).reshape(3, 4)
    u = ember.from_dlpack(base.t())
    assert u.shape == (4, 3) and u.stride() == (1, 4)
    assert ember.equal(u, base.t())


def test_tensors_that_require_grad_are_refused():
    with pytest.raises(BufferError, match="^Can't export tensors that require gradient, use "
                                           r"tensor.detach\(\)$"):
        ember.from_dlpack(ember.ones(2, requires_grad=True))
    assert ember.from_dlpack(np.ones(2, np.uint32)).dtype is ember.uint32   # (PyTorch's too)


def test_cpu_tensors_have_no_cuda_array_interface():
    t = ember.ones(2)
    assert not hasattr(t, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="^Can't get __cuda_array_interface__ on non-CUDA "
                                             "tensor type: ember.FloatTensor If CUDA data"):
        t.__cuda_array_interface__


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float8_e4m3fn, ember.float8_e5m2])
def test_dtypes_numpy_cannot_carry(dtype):
    x = ember.tensor([1.0, 2.0]).to(dtype)
    y = ember.from_dlpack(x)            # an ember tensor is shared directly
    y[0] = 7
    assert y.dtype is dtype and x.float().tolist() == [7.0, 2.0]
    with pytest.raises(BufferError) as info:
        ember.utils.dlpack.to_dlpack(x)
    assert str(info.value) == (f"ember cannot export a CPU tensor of dtype {dtype} through "
                               f"DLPack (NumPy's DLPack has no such type); convert it first, "
                               f"e.g. with tensor.float()")
