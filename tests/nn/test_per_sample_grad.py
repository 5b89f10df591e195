"""call_for_per_sample_grads / ExpandedWeight: per-sample gradients against NumPy formulas and
against a loop of ordinary backward passes, one sample at a time."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.nn.utils._expanded_weights import ExpandedWeight
from ember.nn.utils._per_sample_grad import call_for_per_sample_grads


def _loop_reference(module, x, scale=1.0):
    """Each parameter's gradient of ``(module(x_i) * scale).sum()`` for every sample i."""
    out = {n: [] for n, p in module.named_parameters() if p.requires_grad}
    for i in range(x.shape[0]):
        module.zero_grad()
        (module(x[i:i + 1]) * scale).sum().backward()
        for n, p in module.named_parameters():
            if p.requires_grad:
                out[n].append(p.grad.numpy().copy())
    module.zero_grad()
    return {n: np.stack(v) for n, v in out.items()}


CASES = [
    (lambda: nn.Linear(4, 3), (5, 7, 4), False),
    (lambda: nn.Conv1d(4, 6, 3, groups=2, padding=1), (5, 4, 7), False),
    (lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1), (5, 2, 6, 6), False),
    (lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular"), (4, 2, 5, 5), False),
    (lambda: nn.Conv3d(2, 4, 2, groups=2, dilation=1), (3, 2, 3, 3, 3), False),
    (lambda: nn.Embedding(10, 3), (5, 4), True),
    (lambda: nn.LayerNorm(4), (5, 2, 4), False),
    (lambda: nn.GroupNorm(2, 4), (5, 4, 3), False),
    (lambda: nn.InstanceNorm1d(4, affine=True), (5, 4, 3), False),
    (lambda: nn.InstanceNorm2d(4, affine=True, track_running_stats=True), (5, 4, 3, 3), False),
]


@pytest.mark.parametrize("make,shape,indices", CASES)
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_matches_per_sample_loop(make, shape, indices, reduction):
    ember.manual_seed(0)
    module = make()
    with ember.no_grad():      # non-trivial affine parameters for the norms
        for p in module.parameters():
            p.add_(ember.randn(p.shape) * 0.5)
    x = ember.randint(0, 10, shape) if indices else ember.randn(shape)
    weights = ember.randn(module(x).shape[1:])
    loss = (call_for_per_sample_grads(module, loss_reduction=reduction)(x) * weights)
    # "mean" scales each sample's gradient by the batch size, undoing a mean over the batch
    (loss.sum() if reduction == "sum" else loss.sum() / x.shape[0]).backward()
    ref = _loop_reference(module, x, weights)
    for name, p in module.named_parameters():
        assert p.grad is None
        np.testing.assert_allclose(p.grad_sample.numpy(), ref[name], rtol=1e-4, atol=1e-5)
        assert p.grad_sample.shape == (x.shape[0], *p.shape)


def test_linear_against_numpy():
    ember.manual_seed(1)
    m = nn.Linear(4, 3)
    x = ember.randn(6, 4)
    g = ember.randn(6, 3)
    (call_for_per_sample_grads(m)(x) * g).sum().backward()
    xn, gn = x.numpy(), g.numpy()
    np.testing.assert_allclose(m.weight.grad_sample.numpy(), gn[:, :, None] * xn[:, None, :],
                               rtol=1e-6)
    np.testing.assert_allclose(m.bias.grad_sample.numpy(), gn, rtol=1e-6)


def test_layer_norm_and_embedding_against_numpy():
    ember.manual_seed(2)
    ln = nn.LayerNorm(5)
    x = ember.randn(4, 5)
    g = ember.randn(4, 5)
    (call_for_per_sample_grads(ln)(x) * g).sum().backward()
    xn = x.numpy().astype(np.float64)
    xhat = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(xn.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln.weight.grad_sample.numpy(), g.numpy() * xhat, rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(ln.bias.grad_sample.numpy(), g.numpy(), rtol=1e-6)

    # as PyTorch's: frequency scaling and padding_idx are ignored per sample
    emb = nn.Embedding(4, 2, scale_grad_by_freq=True, padding_idx=0)
    idx = ember.tensor([[0, 0, 1], [2, 2, 2]])
    call_for_per_sample_grads(emb)(idx).sum().backward()
    expected = np.zeros((2, 4, 2), np.float32)
    for i, row in enumerate(idx.numpy()):
        np.add.at(expected[i], row, 1.0)
    np.testing.assert_array_equal(emb.weight.grad_sample.numpy(), expected)


def test_input_grad_and_accumulation_within_one_call():
    ember.manual_seed(3)
    m = nn.Linear(4, 3)
    x = ember.randn(5, 4, requires_grad=True)
    f = call_for_per_sample_grads(m)
    (f(x).sum() + 2 * f(x).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.broadcast_to(m.weight.detach().numpy()
                                                                   .sum(0), (5, 4)), rtol=1e-5)
    np.testing.assert_allclose(m.weight.grad_sample.numpy(),
                               3 * np.broadcast_to(x.detach().numpy()[:, None, :], (5, 3, 4)),
                               rtol=1e-5)
    assert m.weight.grad is None


def test_frozen_parameter_and_running_stats():
    m = nn.Linear(4, 3)
    m.bias.requires_grad_(False)
    call_for_per_sample_grads(m)(ember.randn(5, 4)).sum().backward()
    assert getattr(m.bias, "grad_sample", None) is None and m.bias.grad is None
    inn = nn.InstanceNorm1d(3, affine=True, track_running_stats=True)
    x = ember.randn(5, 3, 4) + 2
    call_for_per_sample_grads(inn)(x).sum().backward()
    # updated once, by the forward (not again by the per-sample backward)
    expected = 0.9 * np.zeros(3) + 0.1 * x.numpy().mean(axis=(2,)).mean(0)
    np.testing.assert_allclose(inn.running_mean.numpy(), expected, rtol=1e-5)


@pytest.mark.parametrize("call,message", [
    (lambda: call_for_per_sample_grads(nn.Linear(2, 2), loss_reduction="foo"),
     "Expected loss_reduction argument to be sum or mean, got foo"),
    (lambda: call_for_per_sample_grads(nn.Linear(2, 2), batch_size=2.0),
     "Batch size passed must be None or an integer, got float"),
    (lambda: call_for_per_sample_grads(nn.Linear(2, 2), batch_size=0),
     "Batch size must be positive, got 0"),
    (lambda: call_for_per_sample_grads(3), "Module passed must be nn.Module, got int"),
    (lambda: call_for_per_sample_grads(nn.Linear(2, 2))(ember.randn(5, 2), ember.randn(3, 2)),
     "When computing batch size, found at least one input with batch size 5 and one with batch "
     "size 3."),
    (lambda: call_for_per_sample_grads(nn.Linear(2, 2))(4.0),
     "Unable to find a tensor in the passed args and kwargs."),
    (lambda: call_for_per_sample_grads(nn.Linear(2, 2), batch_size=3)(ember.randn(5, 2)),
     "Expected ExpandedWeights to have batch size matching input but got input batch size of "
     "5 with ExpandedWeight of batch size 3"),
    (lambda: call_for_per_sample_grads(nn.BatchNorm1d(2))(ember.randn(5, 2)),
     "Expanded Weights encountered but cannot handle function batch_norm"),
    (lambda: call_for_per_sample_grads(nn.Conv1d(2, 2, 1))(ember.randn(2, 5)),
     "Expanded Weights only support convolution with batched input"),
    (lambda: F.linear(ember.randn(4), ExpandedWeight(ember.randn(2, 4, requires_grad=True), 4,
                                                     "sum")),
     "Input does not have a batch dimension. Expanded Weights expected input of at least rank "
     "2, got of rank 1"),
    (lambda: ExpandedWeight(ember.randn(2), 4, "sum"),
     "Can only build ExpandedWeights objects of tensors that requires_grad"),
])
def test_errors(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    assert str(info.value).startswith(message)


def test_second_call_accumulates_and_a_second_wrapper_raises():
    m = nn.Linear(2, 2)
    f = call_for_per_sample_grads(m)
    x = [ember.randn(3, 2) for _ in range(2)]
    for xi in x:
        f(xi).sum().backward()        # one wrapper's calls add up, as PyTorch's do
    np.testing.assert_allclose(m.weight.grad_sample.numpy(),
                               np.ones((3, 2, 1)) * (x[0] + x[1]).numpy()[:, None, :],
                               rtol=1e-6)
    with pytest.raises(RuntimeError, match="Current Expanded Weights accumulates the gradients"):
        call_for_per_sample_grads(m)
    m.weight.grad_sample = m.bias.grad_sample = None
    call_for_per_sample_grads(m)(ember.randn(3, 2))


def test_grad_fn_names_and_no_grad():
    m = nn.Conv2d(1, 1, 1)
    out = call_for_per_sample_grads(m)(ember.randn(2, 1, 2, 2))
    assert type(out.grad_fn).__name__ == "ConvPerSampleGradBackward"
    with ember.no_grad():
        assert call_for_per_sample_grads(nn.Linear(2, 2))(ember.randn(3, 2)).grad_fn is None
