"""nn.AdaptiveLogSoftmaxWithLoss: a full distribution over the classes, each target's
log-probability from it, gradients and PyTorch's errors (parity: tests/parity)."""

import pytest

import ember
from ember import nn


def _model():
    ember.manual_seed(0)
    return nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0)


def test_targets_take_their_log_probability_from_a_full_distribution():
    model = _model()
    x = ember.randn(6, 8, requires_grad=True)
    target = ember.tensor([0, 4, 7, 9, 2, 5])
    full = model.log_prob(x)
    assert full.shape == (6, 10)
    assert ember.allclose(full.exp().sum(1), ember.ones(6), atol=1e-5)
    output, loss = model(x, target)
    assert ember.allclose(output, full.gather(1, target.unsqueeze(1)).squeeze(1), atol=1e-6)
    assert ember.allclose(loss, -output.mean())
    assert ember.equal(model.predict(x), full.argmax(1))
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    single = model(x[1], target[1])
    assert single.output.shape == () and ember.allclose(single.output, output[1], atol=1e-6)
    assert model.tail[1][0].out_features == 2 and model.head.out_features == 5


def test_bad_cutoffs_and_targets():
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique, positive "
                                         "integers sorted in an increasing order"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, [6, 3])
    with pytest.raises(ValueError, match="between 1 and n_classes-1"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 10])
    model, x = _model(), ember.randn(4, 8)
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\], but values "
                                           r"in range \[0, 10\] were found."):
        model(x, ember.tensor([0, 4, 7, 10]))
    with pytest.raises(RuntimeError, match="Input and target should have the same size"):
        model(x, ember.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="1D target tensor expects 2D input tensors"):
        model(x.unsqueeze(2), ember.tensor([0, 1, 2, 3]))
