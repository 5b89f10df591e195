"""The multivariate distributions against torch.distributions: the same parameters in both,
then log_prob, entropy, moments, the matrix properties, KL divergences, log_prob gradients and
error messages compared."""

import re
import warnings

import numpy as np
import pytest

import ember
import ember.distributions as D
from tests.parity._compare import assert_close

torch = pytest.importorskip("torch")
TD = torch.distributions
pytestmark = pytest.mark.parity

RNG = np.random.default_rng(0)


def _spd(n, *batch):
    a = RNG.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _tril(n, *batch):
    return np.linalg.cholesky(_spd(n, *batch))


def _corr_tril(n, *batch):
    cov = _spd(n, *batch)
    scale = 1 / np.sqrt(np.diagonal(cov, axis1=-2, axis2=-1))
    return np.linalg.cholesky(cov * scale[..., :, None] * scale[..., None, :])


# (name, constructor keywords as NumPy arrays or numbers, values for log_prob)
CASES = [
    ("MultivariateNormal", {"loc": RNG.standard_normal(3), "covariance_matrix": _spd(3)},
     RNG.standard_normal((4, 3))),
    ("MultivariateNormal", {"loc": RNG.standard_normal((2, 1, 3)),
                            "precision_matrix": _spd(3, 4)}, RNG.standard_normal((5, 1, 4, 3))),
    ("MultivariateNormal", {"loc": RNG.standard_normal((4, 2)), "scale_tril": _tril(2)},
     RNG.standard_normal(2)),
    ("LowRankMultivariateNormal", {"loc": RNG.standard_normal(4),
                                   "cov_factor": RNG.standard_normal((4, 2)),
                                   "cov_diag": RNG.random(4) + 0.2},
     RNG.standard_normal((3, 4))),
    ("LowRankMultivariateNormal", {"loc": RNG.standard_normal((2, 1, 3)),
                                   "cov_factor": RNG.standard_normal((5, 3, 1)),
                                   "cov_diag": RNG.random((2, 1, 3)) + 0.2},
     RNG.standard_normal(3)),
    ("Wishart", {"df": 5.5, "covariance_matrix": _spd(3)}, _spd(3, 4)),
    ("Wishart", {"df": np.array([2.5, 4.0]), "scale_tril": _tril(2, 3, 1)}, _spd(2, 2)),
    ("Wishart", {"df": np.array(6.0), "precision_matrix": _spd(3, 2)}, _spd(3)),
    ("LKJCholesky", {"dim": 3, "concentration": np.array([0.4, 1.0, 2.5])}, _corr_tril(3, 2, 3)),
    ("LKJCholesky", {"dim": 5, "concentration": np.array(1.7)}, _corr_tril(5, 4)),
    ("LKJCholesky", {"dim": 2}, _corr_tril(2)),
]
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(CASES)]


def _pair(params, grad=False):
    """The parameters as ember and torch float64 tensors (numbers stay numbers)."""
    ours, theirs = {}, {}
    for key, value in params.items():
        if isinstance(value, np.ndarray):
            ours[key] = ember.tensor(value, dtype=ember.float64, requires_grad=grad)
            theirs[key] = torch.tensor(value, dtype=torch.float64, requires_grad=grad)
        else:
            ours[key] = theirs[key] = value
    return ours, theirs


def _build(name, params, grad=False):
    ours, theirs = _pair(params, grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # Wishart's low-df warning
        return getattr(D, name)(**ours), getattr(TD, name)(**theirs), ours, theirs


def _close(a, b, tol=1e-8):
    """Assert two tensors (or values) match in shape and values."""
    assert_close(a, b, tol, tol)


@pytest.mark.parametrize("name,params,values", CASES, ids=IDS)
def test_shapes_log_prob_and_moments(name, params, values):
    ours, theirs, _, _ = _build(name, params)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    x = values
    _close(ours.log_prob(ember.tensor(x)), theirs.log_prob(torch.tensor(x)))
    for attr in ["mean", "mode", "variance", "entropy", "covariance_matrix",
                 "precision_matrix", "scale_tril"]:
        try:
            expected = getattr(theirs, attr)
            expected = expected() if callable(expected) else expected
        except (NotImplementedError, AttributeError):
            continue
        got = getattr(ours, attr)
        _close(got() if callable(got) else got, expected)
    assert type(ours.support).__name__ == type(theirs.support).__name__
    assert ours.has_rsample == theirs.has_rsample


@pytest.mark.parametrize("name,params,values", CASES, ids=IDS)
def test_expand_matches(name, params, values):
    ours, theirs, _, _ = _build(name, params)
    shape = (2,) + tuple(ours.batch_shape)
    e, te = ours.expand(shape), theirs.expand(torch.Size(shape))
    assert tuple(e.batch_shape) == tuple(te.batch_shape)
    sample_dims = values.ndim - len(shape) + 1 - len(ours.event_shape)
    if sample_dims > 0:                                 # a unit dim for the new batch dim
        values = np.expand_dims(values, sample_dims)
    _close(e.log_prob(ember.tensor(values)), te.log_prob(torch.tensor(values)))


@pytest.mark.parametrize("name,params,values", CASES, ids=IDS)
def test_log_prob_gradients_match(name, params, values):
    ours, theirs, our_params, their_params = _build(name, params, grad=True)
    if not any(isinstance(v, np.ndarray) for v in params.values()):
        pytest.skip("no tensor parameter")
    ours.log_prob(ember.tensor(values)).sum().backward()
    theirs.log_prob(torch.tensor(values)).sum().backward()
    for key, value in our_params.items():
        if isinstance(value, ember.Tensor):             # every entry, as torch gives them
            _close(value.grad, their_params[key].grad, 1e-7)


_KL_PARAMS = [
    ("MultivariateNormal", RNG.standard_normal((2, 3)), {"covariance_matrix": _spd(3)}),
    ("MultivariateNormal", RNG.standard_normal(3), {"scale_tril": _tril(3, 4, 1)}),
    ("LowRankMultivariateNormal", RNG.standard_normal(3),
     {"cov_factor": RNG.standard_normal((2, 3, 2)), "cov_diag": RNG.random(3) + 0.3}),
    ("LowRankMultivariateNormal", RNG.standard_normal((4, 1, 3)),
     {"cov_factor": RNG.standard_normal((3, 1)), "cov_diag": RNG.random(3) + 0.3}),
]


def _gaussians(lib):
    """The _KL_PARAMS Gaussians of ``lib`` and their leaves, which require grad."""
    t = ((lambda a: ember.tensor(a, requires_grad=True)) if lib is D
         else (lambda a: torch.tensor(a, requires_grad=True)))
    dists, leaves = [], []
    for name, loc, rest in _KL_PARAMS:
        params = {"loc": t(loc), **{k: t(v) for k, v in rest.items()}}
        dists.append(getattr(lib, name)(**params))
        leaves.extend(params.values())
    return dists, leaves


def test_kl_divergence_of_every_pair_and_its_gradients():
    for i in range(len(_KL_PARAMS)):
        for j in range(len(_KL_PARAMS)):
            (ours, our_leaves), (theirs, their_leaves) = _gaussians(D), _gaussians(TD)
            kl, their_kl = D.kl_divergence(ours[i], ours[j]), TD.kl_divergence(theirs[i],
                                                                              theirs[j])
            _close(kl, their_kl)
            kl.sum().backward()
            their_kl.sum().backward()
            for a, b in zip(our_leaves, their_leaves):
                if b.grad is None:
                    assert a.grad is None
                else:
                    _close(a.grad, b.grad)


def _message(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except Exception as e:                                          # noqa: BLE001
        text = re.sub(r"\s+", " ", str(e))                          # torch wraps a KL message
        return type(e).__name__, text.replace("torch.Size", "Size").replace("ember.Size", "Size")
    return None


def _both(make):
    return _message(lambda: make(ember, D)), _message(lambda: make(torch, TD))


ERRORS = [
    lambda m, d: d.MultivariateNormal(m.zeros(2)),
    lambda m, d: d.MultivariateNormal(m.zeros(2), m.eye(2), scale_tril=m.eye(2)),
    lambda m, d: d.MultivariateNormal(m.tensor(0.0), m.eye(2)),
    lambda m, d: d.MultivariateNormal(m.zeros(2), m.ones(2)),
    lambda m, d: d.MultivariateNormal(m.zeros(2), precision_matrix=m.ones(2)),
    lambda m, d: d.MultivariateNormal(m.zeros(2), scale_tril=m.ones(2)),
    lambda m, d: d.MultivariateNormal(m.zeros(2), -m.eye(2)),
    lambda m, d: d.MultivariateNormal(m.zeros(2), m.eye(2)).log_prob(m.zeros(3)),
    lambda m, d: d.LowRankMultivariateNormal(m.tensor(0.0), m.ones(2, 1), m.ones(2)),
    lambda m, d: d.LowRankMultivariateNormal(m.zeros(2), m.ones(2), m.ones(2)),
    lambda m, d: d.LowRankMultivariateNormal(m.zeros(2), m.ones(3, 1), m.ones(2)),
    lambda m, d: d.LowRankMultivariateNormal(m.zeros(2), m.ones(2, 1), m.ones(3)),
    lambda m, d: d.LowRankMultivariateNormal(m.zeros(3, 2), m.ones(2, 2, 1), m.ones(2)),
    lambda m, d: d.LowRankMultivariateNormal(m.zeros(2), m.zeros(2, 1), -m.ones(2)),
    lambda m, d: d.Wishart(3.0),
    lambda m, d: d.Wishart(3.0, m.eye(2), precision_matrix=m.eye(2)),
    lambda m, d: d.Wishart(3.0, precision_matrix=m.ones(2)),
    lambda m, d: d.Wishart(0.5, m.eye(2)),
    lambda m, d: d.Wishart(1.0, m.eye(2), validate_args=False),
    lambda m, d: d.Wishart(3.0, m.eye(2)).log_prob(m.eye(3)),
    lambda m, d: d.LKJCholesky(1),
    lambda m, d: d.LKJCholesky(3).log_prob(m.eye(2)),
    lambda m, d: d.LKJCholesky(3).entropy(),
    lambda m, d: d.kl_divergence(d.MultivariateNormal(m.zeros(2), m.eye(2)),
                                 d.MultivariateNormal(m.zeros(3), m.eye(3))),
    lambda m, d: d.kl_divergence(
        d.LowRankMultivariateNormal(m.zeros(2), m.ones(2, 1), m.ones(2)),
        d.LowRankMultivariateNormal(m.zeros(3), m.ones(3, 1), m.ones(3))),
    lambda m, d: d.kl_divergence(d.MultivariateNormal(m.zeros(2), m.eye(2)),
                                 d.LowRankMultivariateNormal(m.zeros(3), m.ones(3, 1),
                                                             m.ones(3))),
]


@pytest.mark.parametrize("make", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_error_messages_match(make):
    ours, theirs = _both(make)
    assert theirs is not None and ours == theirs


def test_wishart_warnings_match():
    for lib, dist in [(ember, D), (torch, TD)]:
        with pytest.warns(UserWarning, match="^Low df values detected. Singular samples are "
                                             "highly likely to occur for ndim - 1 < df < ndim.$"):
            dist.Wishart(1.5, lib.eye(2))


def test_lkj_log_prob_is_normalized_like_torch():
    # log_prob's normalizing constant for several dims and concentrations
    for dim in (2, 3, 6):
        for eta in (0.3, 1.0, 4.2):
            x = _corr_tril(dim)
            ours = D.LKJCholesky(dim, ember.tensor(eta, dtype=ember.float64))
            theirs = TD.LKJCholesky(dim, torch.tensor(eta, dtype=torch.float64))
            _close(ours.log_prob(ember.tensor(x)), theirs.log_prob(torch.tensor(x)))
