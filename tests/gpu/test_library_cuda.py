"""Custom ops (ember.library) on CUDA tensors: the kernel is picked by the tensors' device,
and autograd runs there too."""

import pytest

import ember
import ember.library as library
from ember import Tensor

pytestmark = pytest.mark.cuda


def test_custom_op_dispatches_on_the_tensor_device():
    @library.custom_op("embertest_cuda::plus", mutates_args=(), device_types="cpu")
    def plus(x: Tensor) -> Tensor:
        return x + 1

    @plus.register_kernel("cuda")
    def _(x):
        assert x.device.type == "cuda"
        return x + 2

    def setup_context(ctx, inputs, output):
        pass

    plus.register_autograd(lambda ctx, grad: grad * 3, setup_context=setup_context)
    assert plus(ember.zeros(2)).tolist() == [1.0, 1.0]
    x = ember.zeros(2, device="cuda", requires_grad=True)
    y = plus(x)
    assert y.device.type == "cuda" and y.cpu().tolist() == [2.0, 2.0]
    y.sum().backward()
    assert x.grad.device.type == "cuda" and x.grad.cpu().tolist() == [3.0, 3.0]


def test_cpu_only_op_refuses_cuda_tensors():
    @library.custom_op("embertest_cuda::cpu_only", mutates_args=(), device_types="cpu")
    def cpu_only(x: Tensor) -> Tensor:
        return x * 2

    with pytest.raises(NotImplementedError, match="^Could not run 'embertest_cuda::cpu_only' "
                       "with arguments from the 'CUDA' backend"):
        cpu_only(ember.ones(1, device="cuda"))


def test_library_cuda_kernel_and_mutation():
    lib = library.Library("embertest_cuda_lib", "FRAGMENT")
    try:
        lib.define("fill_(Tensor(a!) x, float v) -> ()")

        def fill_(x, v):
            x.fill_(v)

        lib.impl("fill_", fill_, "CUDA")
        t = ember.zeros(3, device="cuda")
        before = t._version
        ember.ops.embertest_cuda_lib.fill_(t, 4.0)
        assert t.cpu().tolist() == [4.0] * 3 and t._version > before
        with pytest.raises(NotImplementedError, match="from the 'CPU' backend"):
            ember.ops.embertest_cuda_lib.fill_(ember.zeros(1), 1.0)
    finally:
        lib._destroy()
