"""An input no needed gradient reads is not checked for in-place changes at backward (PyTorch
does not save it): ``y = h * c; h.add_(1)`` still backpropagates through ``y``."""

import pytest

import ember
import ember.nn.functional as F

C = [[0.5, -1.0], [2.0, 1.0]]


def _grad_after_writing(build, write=lambda h: h.add_(1)):
    w = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    c = ember.tensor(C)
    h = w * 1.5
    y = build(h, c)
    write(h)
    y.sum().backward()
    return w.grad


@pytest.mark.parametrize("build, expected", [
    (lambda h, c: h * 2, [[3.0, 3.0], [3.0, 3.0]]),
    (lambda h, c: c * h, [[0.75, -1.5], [3.0, 1.5]]),
    (lambda h, c: h / c, [[3.0, -1.5], [0.75, 1.5]]),
    (lambda h, c: h @ c, [[-0.75, 4.5], [-0.75, 4.5]]),
    (lambda h, c: c @ h, [[3.75, 3.75], [0.0, 0.0]]),
    (lambda h, c: h.expand(2, 2, 2) @ c, [[-1.5, 9.0], [-1.5, 9.0]]),
    (lambda h, c: F.linear(c, h, ember.ones(2)), [[3.75, 0.0], [3.75, 0.0]]),
    (lambda h, c: ember.addmm(c, h, c), [[-0.75, 4.5], [-0.75, 4.5]]),
    (lambda h, c: ember.addmm(h, c, c), [[1.5, 1.5], [1.5, 1.5]]),
    (lambda h, c: ember.outer(h[0], c[0]), [[-0.75, -0.75], [0.0, 0.0]]),
    (lambda h, c: ember.einsum("ij,jk->ik", h, c), [[-0.75, 4.5], [-0.75, 4.5]]),
])
def test_an_input_only_the_others_gradients_read_may_change(build, expected):
    assert ember.allclose(_grad_after_writing(build), ember.tensor(expected))


@pytest.mark.parametrize("build", [
    lambda h, c: h * h.detach().requires_grad_(),     # h is read by the other's gradient
    lambda h, c: c / h,                               # a divisor is read by its own
    lambda h, c: h.sin(),
])
def test_an_input_a_gradient_reads_may_not(build):
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _grad_after_writing(build)


def test_a_product_computes_only_the_gradients_that_are_needed():
    x = ember.ones(3, 4)
    w = ember.ones(4, 2, requires_grad=True)
    node = (x @ w).grad_fn
    gx, gw = node(ember.ones(3, 2))
    assert gx is None and gw.tolist() == [[3.0, 3.0]] * 4
