"""Every optimizer and option against a NumPy transcription of PyTorch's documented rule."""

import numpy as np
import pytest

from ember import optim
from tests.optim import trajectories as T

CASES = [
    (optim.SGD, T.sgd, dict(lr=0.1)),
    (optim.SGD, T.sgd, dict(lr=0.1, momentum=0.9)),
    (optim.SGD, T.sgd, dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.1)),
    (optim.SGD, T.sgd, dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    (optim.Adam, T.adam, dict(lr=0.05)),
    (optim.Adam, T.adam, dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (optim.Adam, T.adam, dict(lr=0.05, amsgrad=True, maximize=True)),
    (optim.Adam, T.adam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.AdamW, T.adam, dict(lr=0.05, weight_decay=0.1, amsgrad=True)),
]


def _ids(case):
    cls, _, options = case
    return cls.__name__ + "-" + "-".join(f"{k}={v}" for k, v in options.items())


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_trajectory_matches_the_documented_rule(case):
    cls, rule, options = case
    grads, params0 = T.gradient_sequence(), T.initial_params()
    ours, _ = T.run_ember(lambda ps: cls(ps, **options), params0, grads)
    ref_options = dict(options)
    if cls is optim.AdamW:
        ref_options.update(decoupled_weight_decay=True)
    want = T.run_reference(rule, params0, grads, **ref_options)
    for got_step, want_step in zip(ours, want):
        for got, expected in zip(got_step, want_step):
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam, optim.AdamW])
def test_float32_trajectory_is_the_float64_one_rounded(cls):
    grads, params0 = T.gradient_sequence(), T.initial_params()
    wide, _ = T.run_ember(lambda ps: cls(ps, lr=0.05), params0, grads)
    narrow, _ = T.run_ember(lambda ps: cls(ps, lr=0.05),
                            [p.astype(np.float32) for p in params0],
                            [[g.astype(np.float32) for g in gs] for gs in grads])
    for w, n in zip(wide[-1], narrow[-1]):
        assert n.dtype == np.float32
        np.testing.assert_allclose(n, w, rtol=2e-5, atol=2e-6)
