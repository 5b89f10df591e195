"""What the speech self-supervision programs of round 32
(test_parity_programs_round32_ssl*.py) found about ``ctc_loss`` against PyTorch.

A target that ends in the blank index (HuBERT/wav2vec label pipelines that map a padding or
silence unit to 0 and use it as the blank): the losses agree, but PyTorch's gradient is not
its own loss's derivative there. Its kernel writes the last frame's two end positions into
the gradient without adding them, so the final blank's share is lost (central differences of
PyTorch's loss disagree with its gradient by ~0.06). ember keeps the derivative; everywhere
else the gradients agree with PyTorch's."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

CASES = [
    # (targets, input lengths, target lengths, reduction)
    ([[1, 2, 0], [0, 0, 0]], [6, 5], [2, 1], "mean"),
    ([[2, 0, 3], [0, 1, 0]], [6, 6], [3, 2], "none"),
    ([[0, 0, 1], [3, 0, 0]], [4, 6], [2, 2], "sum"),
    ([[1, 2, 0], [0, 0, 0]], [6, 0], [2, 1], "sum"),
    ([[1, 2, 0], [3, 1, 2]], [6, 5], [2, 3], "mean"),     # no blank in any target
]


def _grad(lib, raw, targets, il, tl, reduction, dtype, concat):
    x = lib.from_numpy(raw).to(dtype).log_softmax(-1).detach().requires_grad_()
    tg = lib.tensor(targets)
    if concat:
        tg = lib.cat([tg[i, :n] for i, n in enumerate(tl)])
    loss = lib.nn.functional.ctc_loss(x, tg, il, tl, reduction=reduction, zero_infinity=True)
    loss.sum().backward()
    return loss.detach().double().numpy(), x.grad.double().numpy()


def _torch_loss(raw, targets, il, tl, reduction):
    x = torch.from_numpy(raw).log_softmax(-1)
    loss = torch.nn.functional.ctc_loss(x, torch.tensor(targets), il, tl, reduction=reduction,
                                        zero_infinity=True)
    return float(loss.sum())


def _central_differences(raw, *case):
    eps, grad = 1e-6, np.zeros_like(raw)
    for i in np.ndindex(raw.shape):
        up, down = raw.copy(), raw.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (_torch_loss(up, *case) - _torch_loss(down, *case)) / (2 * eps)
    return grad


def _ends_in_blank(targets, il, tl):
    """The (frame, sample, blank) entries where PyTorch drops the final blank's share."""
    mask = np.zeros((6, 2, 4), bool)
    for b, (row, n) in enumerate(zip(targets, tl)):
        if n and il[b] and row[n - 1] == 0:
            mask[il[b] - 1, b, 0] = True
    return mask


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("concat", [False, True])
def test_ctc_target_ending_in_blank_agrees_but_where_torch_drops_a_share(case, dtype, concat):
    raw = np.random.default_rng(3).standard_normal((6, 2, 4)).astype(np.float32)
    want_loss, want = _grad(torch, raw, *case, getattr(torch, dtype), concat)
    got_loss, got = _grad(ember, raw, *case, getattr(ember, dtype), concat)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5, atol=1e-6)
    keep = ~_ends_in_blank(*case[:3])
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [CASES[0], CASES[2]])
def test_ctc_gradient_is_the_losss_derivative(case):
    """ember's gradient is the derivative of the loss both libraries compute; PyTorch's
    differs from it exactly at the entries it drops."""
    raw = np.random.default_rng(3).standard_normal((6, 2, 4))
    *_, got = _grad(ember, raw, *case, ember.float64, False)
    *_, theirs = _grad(torch, raw, *case, torch.float64, False)
    fd = _central_differences(raw, *case)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)
    dropped = _ends_in_blank(*case[:3])
    assert np.abs(theirs - fd)[dropped].min() > 1e-3
