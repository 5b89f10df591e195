"""Class weights that require grad: PyTorch's kernels have no derivative for them and refuse
the call (it would silently give no gradient), except cross_entropy with probability
targets, which is differentiable in its weight."""

import pytest

import ember
import ember.nn.functional as F

X = [[-1.0, 0.5, 2.0], [0.1, 0.2, 0.3]]


def _inputs():
    return (ember.tensor(X, requires_grad=True),
            ember.tensor([1.0, 2.0, 3.0], requires_grad=True))


@pytest.mark.parametrize("call, kernel, argument", [
    (lambda x, w: F.nll_loss(x, ember.tensor([0, 2]), weight=w), "nll_loss_forward", "weight"),
    (lambda x, w: F.cross_entropy(x, ember.tensor([0, 2]), weight=w, label_smoothing=0.1),
     "nll_loss_forward", "weight"),
    (lambda x, w: F.nll_loss(x.view(2, 3, 1), ember.tensor([[0], [2]]), weight=w),
     "nll_loss2d_forward", "weight"),
    (lambda x, w: F.binary_cross_entropy(x.sigmoid(), ember.full((2, 3), 0.5), weight=w),
     "binary_cross_entropy", "weight"),
    (lambda x, w: F.binary_cross_entropy_with_logits(x, ember.full((2, 3), 0.5), weight=w),
     "binary_cross_entropy_with_logits", "weight"),
    (lambda x, w: F.binary_cross_entropy_with_logits(x, ember.full((2, 3), 0.5), pos_weight=w),
     "binary_cross_entropy_with_logits", "pos_weight"),
    (lambda x, w: F.multi_margin_loss(x, ember.tensor([0, 2]), weight=w),
     "multi_margin_loss", "weight"),
])
def test_a_weight_requiring_grad_is_refused(call, kernel, argument):
    x, w = _inputs()
    message = (f"The function '{kernel}' is not differentiable with respect to argument "
               f"'{argument}'. This input cannot have requires_grad True.")
    with pytest.raises(RuntimeError) as info:
        call(x, w)
    assert str(info.value) == message
    with pytest.raises(RuntimeError):       # the input itself need not require grad
        call(x.detach(), w)


def test_without_recording_the_weight_is_accepted():
    x, w = _inputs()
    t = ember.tensor([0, 1])
    with ember.no_grad():
        assert F.nll_loss(x, t, weight=w).item() == pytest.approx(0.2)
    assert F.nll_loss(x, t, weight=w.detach()).item() == pytest.approx(0.2)


@pytest.mark.parametrize("reduction, smoothing, expected", [
    ("mean", 0.0, [0.244, 0.3357, 0.2787]),
    ("sum", 0.2, [0.6867, 0.7266, 0.5288]),
    ("none", 0.0, [0.4881, 0.6713, 0.5575]),
])
def test_cross_entropy_with_probability_targets_has_a_weight_gradient(reduction, smoothing,
                                                                      expected):
    x, w = _inputs()
    p = ember.softmax(x.detach(), 1)
    loss = F.cross_entropy(x, p, weight=w, reduction=reduction, label_smoothing=smoothing)
    gw, = ember.autograd.grad(loss.sum(), w)
    assert gw.tolist() == pytest.approx(expected, abs=1e-4)
