"""The strides of size-1 dims in views of GPU tensors are PyTorch's, as on the CPU
(unflatten's reshape took the CuPy module's function, whose result the stand-in wraps anew;
restriding float8 arrays read their dtype back from '<f1', which names no type)."""

import pytest

import ember

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e5m2", "bool", "complex64"])
def test_views_of_a_gpu_slice_have_pytorchs_strides(dtype):
    if dtype == "float8_e5m2" and ember.backend.cuda_backend().cupy.__version__ != "fake":
        pytest.skip("float8 arrays: the CuPy stand-in's (ml_dtypes)")
    a = ember.zeros(2, 5, device="cuda", dtype=getattr(ember, dtype))
    x = a[:, 1:2]
    assert x.view(1, 2, 1, 1).stride() == (10, 5, 1, 1)
    assert x.reshape(1, 2, 1, 1).stride() == (10, 5, 1, 1)
    assert x.unflatten(0, (1, 2, 1)).stride() == (10, 5, 1, 1)
    v = x.view(1, 2, 1, 1)
    assert v.device == a.device and v.dtype == a.dtype
    v.fill_(1)
    assert a.to(ember.float32).sum().item() == 2
