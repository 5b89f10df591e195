"""lerp's gradient to a tensor weight when the weight alone requires grad (round 34 review):
the node then keeps the weight as metadata only, and its gradient was dropped."""

import warnings

import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck


@pytest.mark.parametrize("shape", [(), (1,), (3,), (2, 1), (2, 3), (1, 1)])
@pytest.mark.parametrize("inplace", [False, True])
def test_weight_alone_requires_grad(shape, inplace):
    x = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    end = ember.tensor([[2.0, 0.0, 5.0], [1.0, -1.0, 9.0]])
    w = ember.full(shape, 0.25, requires_grad=True)
    up = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    if inplace:
        out = x.clone()
        out.lerp_(end, w)
    else:
        out = ember.lerp(x, end, w)
    assert out.grad_fn is not None and out.grad_fn.name() == "LerpBackward1"
    (out * up).sum().backward()
    expected = ((end - x) * up).sum_to_size(shape) if shape else ((end - x) * up).sum()
    assert w.grad is not None and w.grad.shape == w.shape
    assert ember.equal(w.grad, expected)


def test_weight_alone_0d_of_1d():
    w = ember.tensor(0.9, requires_grad=True)
    m = ember.zeros(3)
    m.lerp_(ember.tensor([1.0, 2.0, 3.0]), 1 - w)     # Adam's exp_avg.lerp_(grad, 1 - beta1)
    m.sum().backward()
    assert w.grad.item() == -6.0


def test_weight_alone_complex():
    x = ember.tensor([1 + 1j, 2 - 1j], dtype=ember.complex128)
    end = ember.tensor([3 + 0j, -1 + 2j], dtype=ember.complex128)
    w = ember.tensor(0.5 + 0.25j, dtype=ember.complex128, requires_grad=True)
    ember.lerp(x, end, w).real.sum().backward()
    assert w.grad.item() == pytest.approx(complex((end - x).sum().conj().item()))


def test_weight_alone_gradcheck_and_gradgradcheck():
    ember.manual_seed(0)
    x = ember.randn(2, 3, dtype=ember.float64)
    end = ember.randn(2, 3, dtype=ember.float64)
    w = ember.randn(3, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda w: ember.lerp(x, end, w), (w,))
    assert gradgradcheck(lambda w: ember.lerp(x, end, w), (w,))


def test_differentiable_adam_learnable_betas_match_finite_differences():
    """Adam(differentiable=True) with betas requiring grad: their gradients (through lerp_'s
    weight) against central differences of the same step."""
    def step(b1v, b2v, requires):
        w0 = ember.tensor([0.5, -1.0, 2.0], dtype=ember.float64)
        b1 = ember.tensor(b1v, dtype=ember.float64, requires_grad=requires)
        b2 = ember.tensor(b2v, dtype=ember.float64, requires_grad=requires)
        p = w0.clone().requires_grad_() * 1
        opt = ember.optim.Adam([p], lr=0.01, betas=(b1, b2), differentiable=True)
        opt.state[p] = {"step": ember.tensor(3.0),
                        "exp_avg": ember.tensor([0.2, -0.1, 0.4], dtype=ember.float64),
                        "exp_avg_sq": ember.tensor([0.05, 0.02, 0.3], dtype=ember.float64)}
        p.grad = ember.tensor([0.3, 0.7, -0.2], dtype=ember.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt.step()
        loss = (p * ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)).sum()
        return loss, b1, b2

    loss, b1, b2 = step(0.9, 0.99, True)
    loss.backward()
    h = 1e-6
    d1 = (step(0.9 + h, 0.99, False)[0] - step(0.9 - h, 0.99, False)[0]).item() / (2 * h)
    d2 = (step(0.9, 0.99 + h, False)[0] - step(0.9, 0.99 - h, False)[0]).item() / (2 * h)
    assert b1.grad is not None and b2.grad is not None
    assert abs(d1) > 1e-3 and abs(d2) > 1e-3
    assert b1.grad.item() == pytest.approx(d1, rel=1e-5)
    assert b2.grad.item() == pytest.approx(d2, rel=1e-5)
