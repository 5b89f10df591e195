"""nn.grad: convolution gradients with respect to input and weight equal autograd's, keep
the forward's shape errors, and are differentiable themselves."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn import grad as nn_grad

CASES = [  # (dims, input shape, weight shape, options)
    (1, (2, 4, 11), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    (2, (2, 3, 9, 8), (5, 3, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    (3, (1, 2, 5, 6, 5), (4, 2, 2, 3, 2), dict(stride=1, padding=1)),
]


@pytest.mark.parametrize("dims,x_shape,w_shape,options", CASES)
def test_gradients_equal_autograd(dims, x_shape, w_shape, options):
    rng = np.random.default_rng(dims)
    x = ember.tensor(rng.standard_normal(x_shape), requires_grad=True)
    w = ember.tensor(rng.standard_normal(w_shape), requires_grad=True)
    conv = getattr(F, f"conv{dims}d")
    out = conv(x, w, **options)
    g = ember.tensor(rng.standard_normal(tuple(out.shape)))
    expected_x, expected_w = ember.autograd.grad(out, (x, w), g)
    got_x = getattr(nn_grad, f"conv{dims}d_input")(x.shape, w, g, **options)
    got_w = getattr(nn_grad, f"conv{dims}d_weight")(x, w.shape, g, **options)
    np.testing.assert_allclose(got_x.detach().numpy(), expected_x.numpy(), rtol=1e-10)
    np.testing.assert_allclose(got_w.detach().numpy(), expected_w.numpy(), rtol=1e-10)


def test_input_gradient_is_differentiable_in_the_weight():
    x_shape = (1, 1, 5, 5)
    w = ember.randn(2, 1, 3, 3, dtype=ember.float64, requires_grad=True)
    g = ember.randn(1, 2, 3, 3, dtype=ember.float64)
    assert ember.autograd.gradcheck(lambda w: nn_grad.conv2d_input(x_shape, w, g), (w,))


def test_shape_errors_are_the_forwards():
    w = ember.randn(6, 2, 3, 3)
    g = ember.randn(2, 6, 7, 7)
    with pytest.raises(RuntimeError, match="Expected 4-dimensional input for 4-dimensional "
                                           "weight"):
        nn_grad.conv2d_input((2, 4, 9), w, g)
    with pytest.raises(RuntimeError, match="expected input\\[2, 4, 9, 9\\] to have 2 "
                                           "channels, but got 4 channels instead"):
        nn_grad.conv2d_input([2, 4, 9, 9], w, g)
