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
    (optim.Adamax, T.adamax, dict(lr=0.05)),
    (optim.Adamax, T.adamax, dict(lr=0.05, betas=(0.8, 0.9), weight_decay=0.1, maximize=True)),
    (optim.NAdam, T.nadam, dict(lr=0.05)),
    (optim.NAdam, T.nadam, dict(lr=0.05, momentum_decay=0.1, weight_decay=0.1)),
    (optim.NAdam, T.nadam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True,
                                maximize=True)),
    (optim.RAdam, T.radam, dict(lr=0.05)),
    (optim.RAdam, T.radam, dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.1)),
    (optim.RAdam, T.radam, dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.1,
                                decoupled_weight_decay=True, maximize=True)),
    (optim.Adagrad, T.adagrad, dict(lr=0.1)),
    (optim.Adagrad, T.adagrad, dict(lr=0.1, lr_decay=0.2, weight_decay=0.1,
                                    initial_accumulator_value=0.5, eps=1e-6, maximize=True)),
    (optim.Adadelta, T.adadelta, dict()),
    (optim.Adadelta, T.adadelta, dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1,
                                      maximize=True)),
    (optim.RMSprop, T.rmsprop, dict()),
    (optim.RMSprop, T.rmsprop, dict(alpha=0.9, weight_decay=0.1, momentum=0.5)),
    (optim.RMSprop, T.rmsprop, dict(centered=True, momentum=0.5, maximize=True)),
    (optim.Rprop, T.rprop, dict()),
    (optim.Rprop, T.rprop, dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(0.01, 0.2),
                                maximize=True)),
    (optim.ASGD, T.asgd, dict(lr=0.1)),
    (optim.ASGD, T.asgd, dict(lr=0.1, lambd=0.01, alpha=0.5, t0=2, weight_decay=0.1,
                              maximize=True)),
    (optim.SparseAdam, T.sparse_adam, dict(lr=0.05)),
    (optim.SparseAdam, T.sparse_adam, dict(lr=0.05, betas=(0.8, 0.9), maximize=True)),
]

# PyTorch keeps some scalar state in float32 (NAdam's mu_product, ASGD's eta and mu), so
# float64 trajectories agree with the exact rule to float32 precision only.
FLOAT32_STATE = (optim.NAdam, optim.ASGD)


def _ids(case):
    cls, _, options = case
    return cls.__name__ + "-" + "-".join(f"{k}={v}" for k, v in options.items())


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_trajectory_matches_the_documented_rule(case):
    cls, rule, options = case
    grads, params0 = T.gradient_sequence(sparse=cls is optim.SparseAdam), T.initial_params()
    ours, _ = T.run_ember(lambda ps: cls(ps, **options), params0, grads)
    tol = 1e-6 if cls in FLOAT32_STATE else 1e-12
    ref_options = dict(options)
    if cls is optim.AdamW:
        ref_options.update(decoupled_weight_decay=True)
    want = T.run_reference(rule, params0, grads, **ref_options)
    for got_step, want_step in zip(ours, want):
        for got, expected in zip(got_step, want_step):
            np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("cls", sorted({c[0] for c in CASES}, key=lambda c: c.__name__))
def test_float32_trajectory_is_the_float64_one_rounded(cls):
    grads, params0 = T.gradient_sequence(), T.initial_params()
    wide, _ = T.run_ember(lambda ps: cls(ps, lr=0.05), params0, grads)
    narrow, _ = T.run_ember(lambda ps: cls(ps, lr=0.05),
                            [p.astype(np.float32) for p in params0],
                            [[g.astype(np.float32) for g in gs] for gs in grads])
    for w, n in zip(wide[-1], narrow[-1]):
        assert n.dtype == np.float32
        np.testing.assert_allclose(n, w, rtol=2e-5, atol=2e-6)
