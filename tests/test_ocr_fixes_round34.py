"""OCR corners found while writing the round-34 OCR programs (no torch needed)."""

import numpy as np

import ember


def _ctc(lp, blank):
    return ember.nn.functional.ctc_loss(lp, ember.tensor([[1, 2]]), ember.tensor([6]),
                                        ember.tensor([2]), blank=blank, reduction="sum")


def test_ctc_gradient_when_a_target_label_equals_blank_matches_finite_differences():
    # PyTorch 2.13's CPU kernel gives a wrong gradient at the last frame here (the target's
    # second label is the blank); ember keeps the value the loss itself implies. CTC's gradient
    # convention is exp(log_probs) - occupancy, i.e. exp(log_probs) + d loss / d log_probs.
    lp0 = np.log(np.random.default_rng(0).dirichlet(np.ones(5), (6, 1)))
    x = ember.from_numpy(lp0.copy()).requires_grad_()
    _ctc(x, blank=2).backward()
    eps = 1e-6
    numeric = np.zeros_like(lp0)
    for t in range(6):
        for c in range(5):
            up, down = lp0.copy(), lp0.copy()
            up[t, 0, c] += eps
            down[t, 0, c] -= eps
            numeric[t, 0, c] = (_ctc(ember.from_numpy(up), 2).item()
                                - _ctc(ember.from_numpy(down), 2).item()) / (2 * eps)
    np.testing.assert_allclose(np.asarray(x.grad.tolist()), np.exp(lp0) + numeric, atol=1e-6)
    # the last frame is certainly on class 2 (the label or the final blank): occupancy 1
    assert abs(x.grad[5, 0, 2].item() - (np.exp(lp0[5, 0, 2]) - 1.0)) < 1e-9
