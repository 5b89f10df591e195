"""gradcheck and gradgradcheck on CUDA inputs (a SoftRas-style custom Function checked on the
GPU, as its repository does): the probe cotangents and tangents are made on the outputs' and
inputs' device, and the finite differences read the GPU values back to the host. Before, the
cotangents were CPU tensors and the backward raised a device mismatch."""

import numpy as np
import pytest

import ember
from ember.autograd import GradcheckError, gradcheck, gradgradcheck

pytestmark = pytest.mark.cuda


def _cuda(*shape, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape)
    return ember.from_numpy(values).cuda().requires_grad_()


class _SoftCoverage(ember.autograd.Function):
    """1 - prod(1 - sigmoid(x / sigma)) over dim 0, with a hand-written backward."""

    @staticmethod
    def forward(ctx, x, sigma):
        D = ember.sigmoid(x / sigma)
        out = 1 - ember.prod(1 - D, dim=0)
        ctx.save_for_backward(D, out)
        ctx.sigma = sigma
        return out

    @staticmethod
    def backward(ctx, grad):
        D, out = ctx.saved_tensors
        return grad * (1 - out) / (1 - D) * D * (1 - D) / ctx.sigma, None


class _WrongSlope(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_gradcheck_of_a_custom_function_on_cuda():
    x = _cuda(4, 5)
    assert gradcheck(lambda v: _SoftCoverage.apply(v, 0.5), (x,))


def test_gradcheck_finds_a_wrong_gradient_on_cuda():
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(_WrongSlope.apply, (_cuda(3),))
    assert gradcheck(_WrongSlope.apply, (_cuda(3),), raise_exception=False) is False


def test_gradcheck_on_cuda_with_many_outputs_and_a_scalar():
    # more than 32 output elements: random cotangents, drawn on the host, placed on the GPU
    x, w = _cuda(6, 7), _cuda(7, 5, seed=1)
    assert gradcheck(lambda a, b: (ember.tanh(a @ b), (a ** 2).sum()), (x, w))


def test_gradcheck_of_a_non_contiguous_cuda_input_and_forward_ad():
    x = _cuda(5, 4).detach().t().requires_grad_()
    assert not x.is_contiguous()
    assert gradcheck(lambda v: ember.sin(v).cumsum(0), (x,), check_forward_ad=True)


def test_gradgradcheck_on_cuda():
    x = _cuda(3, 3)
    assert gradgradcheck(lambda v: (v.exp() * v).sum(-1), (x,))
    grad_out = ember.ones(3, dtype=ember.float64, device="cuda", requires_grad=True)
    assert gradgradcheck(lambda v: (v.exp() * v).sum(-1), (x,), (grad_out,))
