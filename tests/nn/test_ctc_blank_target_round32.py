"""ctc_loss's log_probs gradient for a target ending in the blank index, against a NumPy
reference that enumerates the paths through the extended label lattice: the derivative of the
loss, both end positions' shares included at the last frame (PyTorch's kernel drops the final
blank's there; see test_parity_programs_round32_ssl_fixes.py)."""

import itertools

import numpy as np

import ember


def _reference(lp, target, blank):
    t_max = lp.shape[0]
    ext = [blank]
    for label in target:
        ext += [label, blank]
    s_len = len(ext)
    total, gamma = 0.0, np.zeros_like(lp)
    for path in itertools.product(range(s_len), repeat=t_max):
        if path[0] > 1 or path[-1] < s_len - 2:
            continue
        steps = [b - a for a, b in zip(path, path[1:])]
        if any(d < 0 or d > 2 or (d == 2 and (b % 2 == 0 or ext[b] == ext[b - 2]))
               for d, b in zip(steps, path[1:])):
            continue
        weight = np.exp(sum(lp[t, ext[s]] for t, s in enumerate(path)))
        total += weight
        for t, s in enumerate(path):
            gamma[t, ext[s]] += weight
    return -np.log(total), np.exp(lp) - gamma / total


def test_ctc_grad_matches_lattice_reference():
    rng = np.random.default_rng(0)
    raw = rng.standard_normal((4, 3))
    lp = raw - np.log(np.exp(raw).sum(-1, keepdims=True))
    for target in ([1, 0], [2, 1], [0]):
        x = ember.tensor(lp, requires_grad=True)
        loss = ember.nn.functional.ctc_loss(x, ember.tensor(target), ember.tensor(4),
                                            ember.tensor(len(target)), reduction="sum")
        loss.backward()
        want_loss, want_grad = _reference(lp, target, 0)
        np.testing.assert_allclose(loss.item(), want_loss, rtol=1e-10)
        np.testing.assert_allclose(x.grad.numpy(), want_grad, rtol=1e-9, atol=1e-12)
