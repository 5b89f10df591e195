"""soft_margin_loss, binary_cross_entropy_with_logits, multi_margin_loss and
multilabel_margin_loss against PyTorch's: one node of PyTorch's name over the network's
output, values, gradients and double backward in float64."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_REDUCTIONS = ("none", "mean", "sum")


def _graph(t):
    """(node name, names of the nodes its gradient-carrying edges lead to)."""
    node = t.grad_fn
    return type(node).__name__, [type(n).__name__ for n, _ in node.next_functions
                                 if n is not None]


def _cases(lib, r):
    F = lib.nn.functional
    lib.manual_seed(0)
    x = lib.tensor(np.linspace(-2, 2, 12).reshape(3, 4) ** 3, dtype=lib.float64,
                   requires_grad=True)
    a = x * 1.5
    sign = lib.tensor([[1.0, -1, 1, -1]] * 3, dtype=lib.float64)
    prob = lib.tensor([[0.1, 0.9, 0.3, 0.7]] * 3, dtype=lib.float64)
    w = lib.tensor([1.0, 2.0, 0.5, 1.0], dtype=lib.float64)
    labels = lib.tensor([0, 3, 1])
    lists = lib.tensor([[3, 0, -1, 1], [1, 2, 3, -1], [0, 2, 2, 1]])
    return x, [F.soft_margin_loss(a, sign, reduction=r),
               F.binary_cross_entropy_with_logits(a, prob, reduction=r),
               F.binary_cross_entropy_with_logits(a, prob, w, reduction=r, pos_weight=w * 2),
               F.multi_margin_loss(a, labels, reduction=r),
               F.multi_margin_loss(a, labels, p=2, margin=2.5, weight=w, reduction=r),
               F.multi_margin_loss(a[1], labels[1], reduction=r),
               F.multilabel_margin_loss(a, lists, reduction=r),
               F.multilabel_margin_loss(a[0], lists[0], reduction=r)]


@pytest.mark.parametrize("reduction", _REDUCTIONS)
def test_loss_kernels_graph_values_and_gradients(reduction):
    (tx, theirs), (ex, ours) = _cases(torch, reduction), _cases(ember, reduction)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert _graph(a) == _graph(b)
        assert a.shape == tuple(b.shape) and a.dtype is ember.float64
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
        (ga,) = ember.autograd.grad(a.sum(), ex, create_graph=True)
        (gb,) = torch.autograd.grad(b.sum(), tx, create_graph=True)
        np.testing.assert_allclose(ga.detach().numpy(), gb.detach().numpy(), rtol=1e-12,
                                   atol=1e-15)
        if i < 3:           # (PyTorch has no double backward for the margin losses)
            (ha,) = ember.autograd.grad((ga * ga).sum(), ex, retain_graph=True)
            (hb,) = torch.autograd.grad((gb * gb).sum(), tx, retain_graph=True)
            np.testing.assert_allclose(ha.numpy(), hb.numpy(), rtol=1e-12, atol=1e-15)


def _bce_target_gradients(lib):
    x = lib.tensor([[-3.0, 0.5], [2.0, -0.25]], dtype=lib.float64)
    t = lib.tensor([[0.2, 0.9], [0.5, 0.0]], dtype=lib.float64, requires_grad=True)
    pw = lib.tensor([3.0, 0.5], dtype=lib.float64)
    loss = lib.nn.functional.binary_cross_entropy_with_logits(x, t, pos_weight=pw)
    (g,) = lib.autograd.grad(loss, t, create_graph=True)
    return g.detach().numpy()


def test_bce_with_logits_target_gradient():
    np.testing.assert_allclose(_bce_target_gradients(ember), _bce_target_gradients(torch),
                               rtol=1e-12)


def test_soft_margin_refuses_a_target_that_requires_grad():
    x, t = ember.randn(3), ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="'soft_margin_loss' is not differentiable with "
                                           "respect to argument 'target'"):
        ember.nn.functional.soft_margin_loss(x, t)
    with pytest.raises(RuntimeError, match="'soft_margin_loss' is not differentiable"):
        torch.nn.functional.soft_margin_loss(torch.randn(3), torch.ones(3, requires_grad=True))


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32"),
                                    ("float32", "int64"), ("float16", "float16")])
def test_soft_margin_and_bce_with_logits_dtypes(dtypes):
    def run(lib):
        x = lib.tensor([[-3.0, 0.5], [2.0, -0.25]], dtype=getattr(lib, dtypes[0]))
        t = lib.tensor([[1, 0], [0, 1]], dtype=getattr(lib, dtypes[1]))
        F = lib.nn.functional
        out = [F.soft_margin_loss(x, t * 2 - 1, reduction="none")]
        if t.is_floating_point():
            out.append(F.binary_cross_entropy_with_logits(x, t, reduction="none"))
        return out
    for a, b in zip(run(ember), run(torch)):
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
        np.testing.assert_allclose(a.float().numpy(), b.float().numpy(), rtol=1e-3)
