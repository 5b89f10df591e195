"""numpy() and np.asarray of a tensor that requires grad: refused while grad mode is on,
allowed under no_grad and inference_mode, and so inside a custom Function's forward."""

import numpy as np
import pytest

import ember


def test_numpy_of_requires_grad_tensor_raises_with_grad_mode_on():
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Use tensor.detach\(\).numpy\(\) instead"):
        x.numpy()
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(x)


@pytest.mark.parametrize("mode", [ember.no_grad, ember.inference_mode])
def test_numpy_of_requires_grad_tensor_is_allowed_without_grad_mode(mode):
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with mode():
        assert np.array_equal(x.numpy(), [1.0, 2.0])
        assert np.array_equal(np.asarray(x), [1.0, 2.0])


def test_custom_function_forward_may_call_numpy():
    class NumpyExp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = ember.from_numpy(np.exp(x.numpy()))
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, grad):
            out, = ctx.saved_tensors
            return grad * out

    x = ember.tensor([0.0, 1.0], requires_grad=True)
    NumpyExp.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, np.e], rtol=1e-6)
