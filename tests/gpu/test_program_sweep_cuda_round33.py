"""CUDA-path bugs the whole-program sweep under the CuPy stand-in found: ``fft.fftfreq`` on
the GPU (its scale reached CuPy as a host array), pickled GPU tensors (they came back on the
host), and the saved-tensor version error's type name (it named the CPU type)."""

import pickle

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("fn", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16])
def test_fft_frequencies_on_cuda(fn, dtype):
    got = getattr(ember.fft, fn)(7, d=0.3, dtype=dtype, device="cuda")
    want = getattr(ember.fft, fn)(7, d=0.3, dtype=dtype)
    assert got.device.type == "cuda" and got.dtype == dtype
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


def test_pickled_cuda_tensors_come_back_on_their_gpu():
    # they came back on the host (pickled as host arrays); PyTorch's return to their device
    t = ember.arange(6.0, device="cuda")
    p = ember.nn.Parameter(t * 2)
    p.label = "w"
    for got, want in [(pickle.loads(pickle.dumps(t)), t), (pickle.loads(pickle.dumps(p)), p),
                      (pickle.loads(pickle.dumps(t[::2])), t[::2])]:
        assert got.device.type == "cuda" and type(got) is type(want)
        np.testing.assert_array_equal(got.detach().cpu().numpy(), want.detach().cpu().numpy())
    back = pickle.loads(pickle.dumps(p))
    assert back.requires_grad and back.label == "w"


@pytest.mark.parametrize("dtype,kind", [(ember.float32, "ember.cuda.FloatTensor"),
                                        (ember.complex64, "CUDAComplexFloatType"),
                                        (ember.bfloat16, "CUDABFloat16Type")])
def test_modified_saved_tensor_error_names_the_cuda_type(dtype, kind):
    # it named the CPU type ("ember.FloatTensor"); PyTorch's names the tensor's backend
    x = ember.ones(2, 3, device="cuda", dtype=dtype, requires_grad=True)
    y = x * 2
    z = y.sin()             # saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match=rf"inplace operation: \[{kind} \[2, 3\]\], which "
                                           r"is output 0 of Add, is at version 1"):
        z.real.sum().backward() if dtype.is_complex else z.sum().backward()
    a = ember.ones(3, device="cuda", requires_grad=True)
    b = a.exp()             # saves its output
    b.mul_(2)
    with pytest.raises(RuntimeError, match=r"\[ember.cuda.FloatTensor \[3\]\], which is "
                                           r"output 0 of Exp,"):
        b.sum().backward()
