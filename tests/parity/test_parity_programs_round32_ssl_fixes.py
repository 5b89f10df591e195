"""What the speech self-supervision programs of round 32
(test_parity_programs_round32_ssl*.py) found, pinned against PyTorch.

- ``ctc_loss``'s gradient for a target that ends in the blank index (HuBERT/wav2vec label
  pipelines that map a padding or silence unit to 0 and use it as the blank): PyTorch's kernel
  writes the last frame's two end positions into the gradient without adding them, so the
  final blank's share is overwritten by the last label's there; ember added both and differed
  in the blank column of each such sample's last frame. The loss itself always agreed."""

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


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("concat", [False, True])
def test_ctc_grad_target_ending_in_blank(case, dtype, concat):
    raw = np.random.default_rng(3).standard_normal((6, 2, 4)).astype(np.float32)
    want = _grad(torch, raw, *case, getattr(torch, dtype), concat)
    got = _grad(ember, raw, *case, getattr(ember, dtype), concat)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_ctc_grad_unbatched_target_ending_in_blank():
    raw = np.random.default_rng(4).standard_normal((5, 3)).astype(np.float32)
    res = []
    for lib in (ember, torch):
        x = lib.from_numpy(raw).log_softmax(-1).detach().requires_grad_()
        lib.nn.functional.ctc_loss(x, lib.tensor([2, 0]), lib.tensor(5), lib.tensor(2)).backward()
        res.append(x.grad.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-5, atol=1e-6)
