"""The multivariate distributions beyond the generic tests: error messages, the three
parameterizations of the Gaussian, SciPy's densities and entropies, Woodbury identities,
seeded sample moments, gradients through rsample, KL against closed forms and Monte Carlo."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import betaln

import ember
from ember.distributions import (LKJCholesky, LowRankMultivariateNormal, MultivariateNormal,
                                 Wishart, kl_divergence)
from ember.distributions.exp_family import ExponentialFamily

F64 = ember.float64
COV = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]])
LOC = np.array([0.5, -1.0, 2.0])
W = np.array([[1.0, 0.2], [0.5, -0.4], [-0.7, 0.3]])
DIAG = np.array([0.3, 1.2, 0.8])


def _t(values, grad=False):
    return ember.tensor(np.asarray(values), dtype=F64, requires_grad=grad)


def _np(t):
    return t.detach().numpy()


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(_np(a) if isinstance(a, ember.Tensor) else a,
                               _np(b) if isinstance(b, ember.Tensor) else b,
                               rtol=tol, atol=tol)


@pytest.fixture(autouse=True)
def _seeded():
    ember.manual_seed(0)


# ---------------------------------------------------------------- MultivariateNormal

def test_mvn_needs_exactly_one_matrix():
    message = "Exactly one of covariance_matrix or precision_matrix or scale_tril may be"
    with pytest.raises(ValueError, match=message):
        MultivariateNormal(_t(LOC))
    with pytest.raises(ValueError, match=message):
        MultivariateNormal(_t(LOC), _t(COV), scale_tril=_t(np.linalg.cholesky(COV)))


@pytest.mark.parametrize("kwargs,label", [
    ({"covariance_matrix": ember.ones(3, dtype=F64)}, "covariance_matrix"),
    ({"precision_matrix": ember.ones(3, dtype=F64)}, "precision_matrix"),
    ({"scale_tril": ember.ones(3, dtype=F64)}, "scale_tril matrix"),
])
def test_mvn_shape_errors(kwargs, label):
    with pytest.raises(ValueError, match=f"^{label} must be at least two-dimensional, with "
                                         "optional leading batch dimensions$"):
        MultivariateNormal(_t(LOC), **kwargs)
    with pytest.raises(ValueError, match="^loc must be at least one-dimensional.$"):
        MultivariateNormal(_t(1.0), _t(COV))


def test_mvn_validates_the_matrices():
    with pytest.raises(ValueError, match="covariance_matrix .* PositiveDefinite"):
        MultivariateNormal(_t(LOC), _t(-COV))
    with pytest.raises(ValueError, match="scale_tril .* LowerCholesky"):
        MultivariateNormal(_t(LOC), scale_tril=_t(np.triu(COV)))
    d = MultivariateNormal(_t(LOC), _t(COV))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        d.log_prob(ember.zeros(2, dtype=F64))
    with pytest.raises(ember.linalg.LinAlgError, match="not positive-definite"):
        MultivariateNormal(_t(LOC), _t(-COV), validate_args=False)


def test_mvn_three_parameterizations_agree():
    tril = np.linalg.cholesky(COV)
    prec = np.linalg.inv(COV)
    dists = [MultivariateNormal(_t(LOC), _t(COV)),
             MultivariateNormal(_t(LOC), precision_matrix=_t(prec)),
             MultivariateNormal(_t(LOC), scale_tril=_t(tril))]
    x = _t([[0.1, 0.2, 0.3], [2.0, -1.0, 0.0]])
    expected = stats.multivariate_normal(LOC, COV).logpdf(_np(x))
    for d in dists:
        _close(d.covariance_matrix, COV)
        _close(d.precision_matrix, prec)
        _close(d.scale_tril, tril)
        _close(d.log_prob(x), expected)
        _close(d.entropy(), stats.multivariate_normal(LOC, COV).entropy())
        _close(d.variance, np.diag(COV))
        _close(d.mean, LOC)
        _close(d.mode, LOC)


def test_mvn_batches_broadcast():
    covs = np.stack([COV, 2 * COV, COV + np.eye(3)])
    locs = np.arange(12.0).reshape(4, 1, 3) / 5
    d = MultivariateNormal(_t(locs), _t(covs))
    assert d.batch_shape == (4, 3) and d.event_shape == (3,)
    assert d.loc.shape == (4, 3, 3) and d.covariance_matrix.shape == (4, 3, 3, 3)
    assert d._unbroadcasted_scale_tril.shape == (3, 3, 3)
    x = _t([0.3, -0.5, 1.0])
    expected = [[stats.multivariate_normal(locs[i, 0], covs[j]).logpdf(_np(x))
                 for j in range(3)] for i in range(4)]
    _close(d.log_prob(x), expected)
    xs = np.random.default_rng(2).standard_normal((5, 1, 1, 3))      # sample dims folded
    expected = [[[stats.multivariate_normal(locs[i, 0], covs[j]).logpdf(xs[k, 0, 0])
                  for j in range(3)] for i in range(4)] for k in range(5)]
    _close(d.log_prob(_t(xs)), expected)
    _close(d.entropy()[0], [stats.multivariate_normal(None, c).entropy() for c in covs])
    with pytest.raises(RuntimeError, match="broadcast"):
        MultivariateNormal(ember.zeros(3, 2, dtype=F64), _t(np.stack([np.eye(2)] * 2)))


def test_mvn_expand():
    d = MultivariateNormal(_t(LOC), precision_matrix=_t(np.linalg.inv(COV)))
    e = d.expand((2, 5))
    assert e.batch_shape == (2, 5) and e.loc.shape == (2, 5, 3)
    assert e.precision_matrix.shape == (2, 5, 3, 3)
    assert e.rsample((4,)).shape == (4, 2, 5, 3)
    x = _t([1.0, 0.0, -1.0])
    _close(e.log_prob(x), np.full((2, 5), float(d.log_prob(x))))


def test_mvn_sample_moments():
    d = MultivariateNormal(_t(LOC), _t(COV))
    s = _np(d.sample((40000,)))
    assert np.abs(s.mean(0) - LOC).max() < 0.04
    assert np.abs(np.cov(s.T) - COV).max() < 0.06


def test_mvn_rsample_gradients():
    def sample(loc, a):
        ember.manual_seed(3)
        return MultivariateNormal(loc, scale_tril=a.tril(), validate_args=False).rsample((3,))

    def sample_cov(loc, a):
        ember.manual_seed(3)
        return MultivariateNormal(loc, a @ a.mT + ember.eye(3, dtype=F64)).rsample((2,))

    inputs = (_t(LOC, True), _t(np.linalg.cholesky(COV), True))
    assert ember.autograd.gradcheck(sample, inputs)
    assert ember.autograd.gradcheck(sample_cov, inputs)
    # d(sum of loc + L eps)/dloc counts the samples
    loc, tril = inputs
    sample(loc, tril).sum().backward()
    _close(loc.grad, np.full(3, 3.0))


def test_mvn_log_prob_gradient_is_the_score():
    # d log N(x; mu, S)/dmu = S^-1 (x - mu)
    loc = _t(LOC, True)
    x = np.array([0.0, 0.5, 1.0])
    MultivariateNormal(loc, _t(COV)).log_prob(_t(x)).backward()
    _close(loc.grad, np.linalg.solve(COV, x - LOC))


# ---------------------------------------------------------------- LowRankMultivariateNormal

@pytest.mark.parametrize("args,message", [
    ((_t(1.0), _t(W), _t(DIAG)), "^loc must be at least one-dimensional.$"),
    ((_t(LOC), _t(DIAG), _t(DIAG)), "^cov_factor must be at least two-dimensional, with "
                                    "optional leading batch dimensions$"),
    ((_t(LOC), _t(W[:2]), _t(DIAG)), "^cov_factor must be a batch of matrices with shape 3 x m$"),
    ((_t(LOC), _t(W), _t(DIAG[:2])),
     r"^cov_diag must be a batch of vectors with shape ember.Size\(\[3\]\)$"),
    ((_t(np.zeros((2, 3))), _t(np.stack([W] * 3)), _t(DIAG)),
     r"^Incompatible batch shapes: loc ember.Size\(\[2, 3\]\), cov_factor "
     r"ember.Size\(\[3, 3, 2\]\), cov_diag ember.Size\(\[3\]\)$"),
    # (a small factor keeps the capacitance definite: it is factored before validation)
    ((_t(LOC), _t(W * 0.01), _t(-DIAG)), "cov_diag .* IndependentConstraint"),
])
def test_lowrank_errors(args, message):
    with pytest.raises(ValueError, match=message):
        LowRankMultivariateNormal(*args)


def test_lowrank_matches_the_full_gaussian():
    d = LowRankMultivariateNormal(_t(LOC), _t(W), _t(DIAG))
    cov = W @ W.T + np.diag(DIAG)
    _close(d.covariance_matrix, cov)
    _close(d.precision_matrix, np.linalg.inv(cov))
    _close(d.scale_tril, np.linalg.cholesky(cov))
    _close(d.variance, np.diag(cov))
    _close(d._capacitance_tril @ d._capacitance_tril.mT,
           np.eye(2) + W.T @ np.diag(1 / DIAG) @ W)
    x = _t([[0.1, 0.2, 0.3], [2.0, -1.0, 0.0]])
    reference = stats.multivariate_normal(LOC, cov)
    _close(d.log_prob(x), reference.logpdf(_np(x)))
    _close(d.entropy(), reference.entropy())


def test_lowrank_batches_and_expand():
    factors = np.stack([W, 2 * W])                       # (2, 3, 2)
    d = LowRankMultivariateNormal(_t(np.zeros((4, 1, 3))), _t(factors), _t(DIAG))
    assert d.batch_shape == (4, 2) and d.cov_factor.shape == (4, 2, 3, 2)
    assert d._capacitance_tril.shape == (2, 2, 2)
    x = _t([0.3, -0.5, 1.0])
    expected = [stats.multivariate_normal(np.zeros(3), f @ f.T + np.diag(DIAG)).logpdf(_np(x))
                for f in factors]
    _close(d.log_prob(x), np.tile(expected, (4, 1)))
    e = d.expand((3, 4, 2))
    assert e.batch_shape == (3, 4, 2) and e.rsample().shape == (3, 4, 2, 3)
    _close(e.log_prob(x), np.tile(expected, (3, 4, 1)))


def test_lowrank_sample_moments_and_gradients():
    d = LowRankMultivariateNormal(_t(LOC), _t(W), _t(DIAG))
    s = _np(d.sample((40000,)))
    assert np.abs(s.mean(0) - LOC).max() < 0.04
    assert np.abs(np.cov(s.T) - (W @ W.T + np.diag(DIAG))).max() < 0.06

    def sample(loc, factor, diag):
        ember.manual_seed(5)
        return LowRankMultivariateNormal(loc, factor, diag).rsample((3,))

    assert ember.autograd.gradcheck(sample, (_t(LOC, True), _t(W, True), _t(DIAG, True)))


# ---------------------------------------------------------------- KL divergences

def _kl_reference(mu_p, cov_p, mu_q, cov_q):
    prec_q = np.linalg.inv(cov_q)
    diff = mu_q - mu_p
    return 0.5 * (np.trace(prec_q @ cov_p) + diff @ prec_q @ diff - len(mu_p)
                  + np.linalg.slogdet(cov_q)[1] - np.linalg.slogdet(cov_p)[1])


def _gaussians():
    loc2 = np.array([-0.5, 0.3, 1.0])
    w2 = np.array([[0.3], [-1.0], [0.4]])
    diag2 = np.array([1.0, 0.4, 0.9])
    cov2 = np.array([[1.0, -0.2, 0.1], [-0.2, 0.8, 0.0], [0.1, 0.0, 1.5]])
    return [(MultivariateNormal(_t(LOC), _t(COV)), LOC, COV),
            (MultivariateNormal(_t(loc2), scale_tril=_t(np.linalg.cholesky(cov2))), loc2, cov2),
            (LowRankMultivariateNormal(_t(LOC), _t(W), _t(DIAG)), LOC, W @ W.T + np.diag(DIAG)),
            (LowRankMultivariateNormal(_t(loc2), _t(w2), _t(diag2)), loc2,
             w2 @ w2.T + np.diag(diag2))]


def test_kl_closed_form_for_every_pair():
    dists = _gaussians()
    for p, mu_p, cov_p in dists:
        for q, mu_q, cov_q in dists:
            _close(kl_divergence(p, q), _kl_reference(mu_p, cov_p, mu_q, cov_q), 1e-9)


@pytest.mark.parametrize("i,j", [(0, 1), (2, 3), (2, 1), (0, 3)])
def test_kl_against_monte_carlo(i, j):
    dists = _gaussians()
    p, q = dists[i][0], dists[j][0]
    x = p.sample((40000,))
    ratio = _np(p.log_prob(x) - q.log_prob(x))
    error = 5 * ratio.std() / math.sqrt(len(ratio))
    assert abs(ratio.mean() - float(kl_divergence(p, q))) < error


def test_kl_batches_and_errors():
    p = MultivariateNormal(ember.zeros(3, 2, dtype=F64), ember.eye(2, dtype=F64))
    q = LowRankMultivariateNormal(ember.ones(4, 1, 2, dtype=F64), ember.ones(2, 1, dtype=F64),
                                  ember.ones(2, dtype=F64))
    assert kl_divergence(p, q).shape == (4, 3)
    assert kl_divergence(q, p).shape == (4, 3)
    reference = _kl_reference(np.zeros(2), np.eye(2), np.ones(2), np.ones((2, 2)) + np.eye(2))
    _close(kl_divergence(p, q), np.full((4, 3), reference))
    p3 = MultivariateNormal(_t(LOC), _t(COV))
    q3 = LowRankMultivariateNormal(_t(LOC), _t(W), _t(DIAG))
    for a, b, kind in [(p, p3, "Multivariate Normals"), (q, q3, "Low Rank Multivariate Normals"),
                       (p, q3, r"\(Low Rank\) Multivariate Normals"),
                       (q, p3, r"\(Low Rank\) Multivariate Normals")]:
        with pytest.raises(ValueError, match=f"^KL-divergence between two {kind} with "
                                             "different event shapes cannot be computed$"):
            kl_divergence(a, b)


def test_kl_gradient_vanishes_at_p_equals_q():
    loc = _t(LOC, True)
    p = MultivariateNormal(loc, _t(COV))
    kl = kl_divergence(p, MultivariateNormal(_t(LOC), _t(COV)))
    kl.backward()
    _close(kl, 0.0)
    _close(loc.grad, np.zeros(3))


# ---------------------------------------------------------------- Wishart

def test_wishart_errors_and_warnings():
    cov = _t(COV)
    message = "^Exactly one of covariance_matrix or precision_matrix or scale_tril may be"
    with pytest.raises(AssertionError, match=message):
        Wishart(4.0)
    with pytest.raises(AssertionError, match=message):
        Wishart(4.0, cov, precision_matrix=cov)
    with pytest.raises(ValueError, match="^scale_tril must be at least two-dimensional"):
        Wishart(4.0, precision_matrix=ember.ones(3, dtype=F64))
    with pytest.raises(ValueError, match=r"^Value of df=1.5 expected to be greater than "
                                         r"ndim - 1 = 2.$"):
        Wishart(1.5, cov, validate_args=False)
    with pytest.raises(ValueError, match=r"^Value of df=tensor\(\[3\., 2\.\], "
                                         r"dtype=ember.float64\) expected to be greater"):
        Wishart(_t([3.0, 2.0]), cov)
    with pytest.raises(ValueError, match="covariance_matrix .* PositiveDefinite"):
        Wishart(4.0, -cov)
    with pytest.warns(UserWarning, match="^Low df values detected. Singular samples are "
                                         "highly likely to occur for ndim - 1 < df < ndim.$"):
        Wishart(2.5, cov)
    d = Wishart(4.0, cov)
    with pytest.raises(ValueError, match="to be within the support"):
        d.log_prob(_t(np.diag([1.0, -1.0, 1.0])))
    assert d.arg_constraints["df"].lower_bound == 2


def test_wishart_against_scipy():
    df = np.array([4.5, 7.0])
    d = Wishart(_t(df), precision_matrix=_t(np.linalg.inv(COV)))
    assert d.batch_shape == (2,) and d.event_shape == (3, 3)
    x = np.array([[3.0, 0.5, -0.2], [0.5, 2.0, 0.1], [-0.2, 0.1, 1.0]])
    for i, nu in enumerate(df):
        ref = stats.wishart(df=nu, scale=COV)
        _close(d.log_prob(_t(x))[i], ref.logpdf(x))
        _close(d.entropy()[i], ref.entropy())
        _close(d.mean[i], ref.mean())
        _close(d.mode[i], ref.mode())
        _close(d.variance[i], ref.var())
    _close(d.scale_tril[0], np.linalg.cholesky(COV))
    _close(d.covariance_matrix[1], COV)
    # the exponential-family entropy (autograd of the log normalizer) agrees
    _close(ExponentialFamily.entropy(d), d.entropy())


def test_wishart_shapes_mode_and_expand():
    d = Wishart(_t([3.0, 4.0, 5.0]), _t(COV).expand(2, 1, 3, 3))
    assert d.batch_shape == (2, 3) and d.df.shape == (2, 3)
    mode = _np(d.mode)
    assert np.isnan(mode[:, :2]).all() and np.isfinite(mode[:, 2]).all()    # needs df > p + 1
    e = d.expand((4, 2, 3))
    assert e.batch_shape == (4, 2, 3) and e.covariance_matrix.shape == (4, 2, 3, 3, 3)
    x = _t(COV * 2)
    _close(e.log_prob(x), np.broadcast_to(_np(d.log_prob(x)), (4, 2, 3)))
    with pytest.raises(RuntimeError, match="broadcast"):
        Wishart(_t([3.0, 4.0, 5.0]), _t(COV).expand(2, 3, 3))


def test_wishart_sample_moments_and_gradient():
    df = 6.0
    d = Wishart(_t(df), _t(COV))
    s = _np(d.sample((20000,)))
    ref = stats.wishart(df=df, scale=COV)
    assert np.all(np.abs(s.mean(0) - ref.mean()) < 5 * np.sqrt(ref.var() / 20000))
    assert np.all(np.abs(s.var(0) - ref.var()) < 0.1 * ref.var())

    def sample(a):
        ember.manual_seed(7)
        return Wishart(_t(df), scale_tril=a.tril(), validate_args=False).rsample((2,))

    assert ember.autograd.gradcheck(sample, (_t(np.linalg.cholesky(COV), True),))
    nu = _t(df, True)
    Wishart(nu, _t(COV)).rsample((3,)).sum().backward()
    assert nu.grad is not None and bool(ember.isfinite(nu.grad)) and float(nu.grad) != 0


def test_wishart_redraws_singular_samples(monkeypatch):
    d = Wishart(_t(4.0), _t(np.eye(2)))
    singular, regular = ember.zeros(2, 2, dtype=F64), ember.eye(2, dtype=F64)
    draws = []

    def fake(sample_shape):
        draws.append(sample_shape)
        return singular if len(draws) < 3 else regular

    monkeypatch.setattr(d, "_bartlett_sampling", fake)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _close(d.rsample(), np.eye(2))                       # two redraws fix it
    assert len(draws) == 3
    draws.clear()
    with pytest.warns(UserWarning, match="^Singular sample detected.$"):
        _close(d.rsample(max_try_correction=1), np.zeros((2, 2)))
    assert len(draws) == 2


def test_wishart_kl_is_the_bregman_divergence_per_batch_element():
    # closed form: n1/2 (tr(V2^-1 V1) - p) + n2/2 log|V2|/|V1| + log G_p(n2/2) - log G_p(n1/2)
    #              + (n1 - n2)/2 psi_p(n1/2), with V1 = [[2, .5], [.5, 1]] and V2 = I
    v1 = _t([[2.0, 0.5], [0.5, 1.0]])
    p = Wishart(_t(4.0), v1)
    q = Wishart(_t([3.0, 5.0]), _t(np.eye(2)))
    _close(kl_divergence(p, q), [1.3902134726353876, 0.7767884837310859])
    _close(kl_divergence(p, p), 0.0)
    df = _t(3.0, True)
    kl = kl_divergence(Wishart(df, v1), p)
    _close(kl, 0.27036284546147815)
    kl.backward()                                   # differentiable in p's parameters too
    _close(df.grad, -0.6449340668707171, tol=1e-8)
    with pytest.raises(NotImplementedError, match="^The cross KL-divergence between different "
                                                  "exponential families cannot be computed"):
        kl_divergence(p, ember.distributions.Normal(0.0, 1.0))


# ---------------------------------------------------------------- LKJCholesky

def test_lkj_errors():
    with pytest.raises(ValueError, match="^Expected dim to be an integer greater than or equal "
                                         "to 2. Found dim=1.$"):
        LKJCholesky(1)
    with pytest.raises(TypeError):
        LKJCholesky(2.0)
    with pytest.raises(ValueError, match="concentration .* GreaterThan"):
        LKJCholesky(3, _t([1.0, -1.0]))
    with pytest.raises(ValueError, match="to be within the support"):
        LKJCholesky(3).log_prob(ember.ones(3, 3, dtype=F64))
    with pytest.raises(NotImplementedError):
        LKJCholesky(3).rsample()
    d = LKJCholesky(ember.tensor(3), _t([0.5, 2.0]))
    assert d.batch_shape == (2,) and d.event_shape == (3, 3)
    assert d.expand((4, 2)).batch_shape == (4, 2)


@pytest.mark.parametrize("eta", [0.5, 1.0, 3.0])
def test_lkj_two_by_two_density(eta):
    # M = [[1, r], [r, 1]], L = [[1, 0], [r, sqrt(1 - r^2)]]:
    # p(r) = (1 - r^2)^(eta - 1) / (2^(2 eta - 1) B(eta, eta)) on (-1, 1)
    r = np.array([-0.9, 0.0, 0.6])
    tril = np.zeros((3, 2, 2))
    tril[:, 0, 0], tril[:, 1, 0], tril[:, 1, 1] = 1.0, r, np.sqrt(1 - r**2)
    expected = (eta - 1) * np.log1p(-r**2) - (2 * eta - 1) * math.log(2) - betaln(eta, eta)
    _close(LKJCholesky(2, _t(eta)).log_prob(_t(tril)), expected)


def test_lkj_uniform_density_in_three_dims():
    # concentration 1 is uniform over 3x3 correlation matrices, whose set has volume pi^2/2;
    # the density of L over (L10, L20, L21) is that of M times the Jacobian |dM/dL| = L11.
    tril = _t([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.6, 0.8]])
    _close(LKJCholesky(3, _t(1.0)).log_prob(tril), math.log(0.8) - math.log(math.pi**2 / 2))
    grid = LKJCholesky(3, _t([0.5, 2.0]))
    assert grid.log_prob(tril).shape == (2,)


@pytest.mark.parametrize("dim,eta", [(2, 2.0), (4, 0.5), (4, 2.0)])
def test_lkj_samples_have_the_lkj_marginals(dim, eta):
    # Every off-diagonal correlation r_ij has (r + 1)/2 ~ Beta(a, a), a = eta - 1 + dim/2,
    # so E[r^2] = 1/(2a + 1) for every pair i != j.
    assert LKJCholesky(dim, eta).sample().dtype == ember.float32
    d = LKJCholesky(dim, _t(eta))
    tril = d.sample((20000,))
    assert tril.shape == (20000, dim, dim) and tril.dtype == F64
    assert bool(d.support.check(tril).all())
    corr = _np(tril @ tril.mT)
    np.testing.assert_allclose(np.diagonal(corr, axis1=1, axis2=2), 1.0, atol=1e-12)
    a = eta - 1 + dim / 2
    rows, cols = np.tril_indices(dim, -1)
    second = (corr[:, rows, cols] ** 2).mean(0)
    assert np.abs(second - 1 / (2 * a + 1)).max() < 0.02
    assert np.abs(corr[:, rows, cols].mean(0)).max() < 0.03
