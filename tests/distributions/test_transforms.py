"""Transforms, biject_to/transform_to, TransformedDistribution, Independent and
MixtureSameFamily: round trips, log-dets against autograd Jacobians, caching, equality,
shapes, errors, closed forms and seeded moments."""

import math
import pickle

import pytest

import ember
from ember.autograd.functional import jacobian
from ember.distributions import constraints as C
from ember.distributions import (Categorical, Independent, MixtureSameFamily, Normal,
                                 TransformedDistribution, Uniform, biject_to, kl_divergence,
                                 transform_to)
from ember.distributions import transforms as T
from ember.distributions.constraint_registry import ConstraintRegistry
from ember.distributions.utils import tril_matrix_to_vec


def _t(values, grad=False):
    return ember.tensor(values, dtype=ember.float64, requires_grad=grad)


@pytest.fixture(autouse=True)
def _seeded():
    ember.manual_seed(0)


def _flat(y):
    return y.reshape(-1)


def _simplex_coords(y):
    return y[..., :-1].reshape(-1)


def _corr_coords(y):
    return tril_matrix_to_vec(y, diag=-1)


# (transform, one input event, coordinates of the output in which the Jacobian is square)
BIJECTIONS = [
    (T.ExpTransform(), _t([-1.0, 0.3, 2.0]), _flat),
    (T.PowerTransform(2.5), _t([0.5, 1.0, 3.0]), _flat),
    (T.PowerTransform(_t([-1.5, 0.5, 3.0])), _t([0.5, 1.0, 3.0]), _flat),
    (T.SigmoidTransform(), _t([-3.0, 0.1, 4.0]), _flat),
    (T.TanhTransform(), _t([-2.0, 0.1, 1.5]), _flat),
    (T.SoftplusTransform(), _t([-3.0, 0.1, 4.0]), _flat),
    (T.AffineTransform(1.5, -2.0), _t([-1.0, 0.0, 2.0]), _flat),
    (T.AffineTransform(_t([1.0, 2.0, 3.0]), _t([0.5, -2.0, 3.0]), event_dim=1),
     _t([-1.0, 0.0, 2.0]), _flat),
    (T.StickBreakingTransform(), _t([0.3, -1.0, 2.0]), _simplex_coords),
    (T.CorrCholeskyTransform(), _t([0.3, -1.0, 2.0, 0.5, -0.2, 0.1]), _corr_coords),
    (T.ReshapeTransform((6,), (2, 3)), _t([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), _flat),
    (T.IndependentTransform(T.SigmoidTransform(), 1), _t([-1.0, 0.5]), _flat),
    (T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0),
                         T.PowerTransform(0.5)]), _t([-1.0, 0.5]), _flat),
    (T.ComposeTransform([T.AffineTransform(0.5, 2.0), T.StickBreakingTransform()]),
     _t([0.2, 0.5]), _simplex_coords),
    (T.CatTransform([T.ExpTransform(), T.SigmoidTransform()], -1, [1, 2]),
     _t([0.3, -1.0, 2.0]), _flat),
    (T.StackTransform([T.ExpTransform(), T.TanhTransform()], -1), _t([0.3, -1.0]), _flat),
    (T.CumulativeDistributionTransform(Normal(_t(0.5), _t(2.0))), _t([-1.0, 0.5, 3.0]), _flat),
    (T.ExpTransform().inv, _t([0.5, 1.0, 3.0]), _flat),
]
IDS = [repr(t).split("(")[0] + f"-{i}" for i, (t, _, _) in enumerate(BIJECTIONS)]


@pytest.mark.parametrize("transform,x,coords", BIJECTIONS, ids=IDS)
def test_round_trip_and_codomain(transform, x, coords):
    y = transform(x)
    assert bool(transform.codomain.check(y).all())
    assert ember.allclose(transform.inv(y), x, atol=1e-10)
    assert transform.bijective


@pytest.mark.parametrize("transform,x,coords", BIJECTIONS, ids=IDS)
def test_log_abs_det_jacobian_matches_autograd(transform, x, coords):
    jac = jacobian(lambda v: coords(transform(v)), x)
    assert jac.shape[0] == jac.shape[1]
    expected = ember.linalg.slogdet(jac).logabsdet
    got = transform.log_abs_det_jacobian(x, transform(x)).sum()
    assert ember.allclose(got, expected, atol=1e-9)


@pytest.mark.parametrize("transform,x,coords", BIJECTIONS, ids=IDS)
def test_batched_log_det_keeps_batch_dims(transform, x, coords):
    xs = ember.stack([x, x, x])
    ys = transform(xs)
    assert ys.shape == (3,) + transform(x).shape
    assert ys.shape == transform.forward_shape(xs.shape)
    assert transform.inverse_shape(ys.shape) == xs.shape
    log_det = transform.log_abs_det_jacobian(xs, ys)
    # a stack along the last dim counts that dim as an event, but keeps one log-det per slice
    event_dim = 0 if isinstance(transform, T.StackTransform) else transform.domain.event_dim
    assert log_det.shape == xs.shape[:xs.dim() - event_dim]


def test_inverse_log_det_is_negated():
    t = T.StickBreakingTransform()
    y = _t([0.2, 0.3, 0.1, 0.4])
    x = t.inv(y)
    assert ember.allclose(t.inv.log_abs_det_jacobian(y, x), -t.log_abs_det_jacobian(x, y))
    assert t.inv.forward_shape((4,)) == (3,) and t.inv.inverse_shape((3,)) == (4,)


def test_known_values():
    x = _t([-1.0, 0.0, 2.0])
    assert ember.allclose(T.ExpTransform()(x), x.exp())
    assert ember.allclose(T.AffineTransform(1.0, -2.0)(x), _t([3.0, 1.0, -3.0]))
    assert ember.allclose(T.SigmoidTransform().inv(_t([0.5, 0.75])), _t([0.0, math.log(3)]))
    # x = 0 breaks the stick into equal parts
    assert ember.allclose(T.StickBreakingTransform()(ember.zeros(3, dtype=ember.float64)),
                          ember.full((4,), 0.25, dtype=ember.float64))
    # tanh' = 1 - tanh^2, computed stably even where tanh saturates
    big = _t([30.0, -30.0])
    expected = ember.log(4.0 * ember.exp(-60.0 * ember.ones_like(big)))
    got = T.TanhTransform().log_abs_det_jacobian(big, big.tanh())
    assert ember.allclose(got, expected)
    assert bool(ember.isfinite(T.SigmoidTransform().log_abs_det_jacobian(big, None)).all())
    assert T.AbsTransform()(_t([-2.0])).item() == 2.0
    assert T.AbsTransform().inv(_t([-2.0])).item() == -2.0


def test_non_bijective_transforms():
    x = _t([[0.5, 2.0], [-1.0, 0.1]])
    lower = T.LowerCholeskyTransform()(x)
    assert bool(C.lower_cholesky.check(lower))
    assert ember.allclose(T.LowerCholeskyTransform().inv(lower), x.tril())   # drops x_01
    pd = T.PositiveDefiniteTransform()(x)
    assert bool(C.positive_definite.check(pd))
    assert ember.allclose(pd, lower @ lower.mT)
    assert ember.allclose(T.PositiveDefiniteTransform().inv(pd), x.tril())
    probs = T.SoftmaxTransform()(_t([1.0, 2.0, 3.0]))
    assert ember.allclose(probs.sum(), _t(1.0))
    assert ember.allclose(T.SoftmaxTransform()(T.SoftmaxTransform().inv(probs)), probs)
    for t in [T.AbsTransform(), T.SoftmaxTransform(), T.LowerCholeskyTransform(),
              T.PositiveDefiniteTransform()]:
        assert not t.bijective
        with pytest.raises(NotImplementedError):
            t.log_abs_det_jacobian(x, x)


def test_cache():
    x = _t([0.5, 1.0])
    cached = T.ExpTransform(cache_size=1)
    y = cached(x)
    assert cached(x) is y and cached.inv(y) is x
    y2 = _t([3.0])
    x2 = cached.inv(y2)
    assert cached(x2) is y2 and cached._cached_x_y == (x2, y2)
    plain = T.ExpTransform()
    assert plain(x) is not plain(x)
    assert plain.with_cache(0) is plain
    assert plain.with_cache(1)._cache_size == 1
    assert plain.inv.with_cache(1)._cache_size == 1
    compose = T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], cache_size=1)
    assert all(part._cache_size == 1 for part in compose.parts)
    indep = T.IndependentTransform(T.ExpTransform(), 1).with_cache(1)
    assert indep.base_transform._cache_size == 1
    for bad in (2, -1):
        with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
            T.ExpTransform(cache_size=bad)
    with pytest.raises(NotImplementedError, match="with_cache is not implemented"):
        _Custom().with_cache(1)


class _Custom(T.Transform):
    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale


def test_inverse_is_cached_weakly_and_round_trips():
    t = T.ExpTransform()
    inv = t.inv
    assert t.inv is inv and inv.inv is t
    assert inv.domain is t.codomain and inv.codomain is t.domain and inv.sign == 1
    assert repr(inv) == "_InverseTransform(ExpTransform())"
    compose = T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)])
    assert compose.inv.inv is compose
    assert compose.inv.parts[0] == T.AffineTransform(1.0, 2.0).inv
    restored = pickle.loads(pickle.dumps(t))
    assert restored == T.ExpTransform() and restored._inv is None


def test_equality():
    assert T.ExpTransform() == T.ExpTransform()
    assert T.ExpTransform() != T.SigmoidTransform()
    assert T.AffineTransform(1.0, 2.0) == T.AffineTransform(_t(1.0), 2.0)
    assert T.AffineTransform(_t([1.0, 2.0]), 2.0) != T.AffineTransform(_t([1.0, 3.0]), 2.0)
    assert T.PowerTransform(2.0) == T.PowerTransform(2.0) != T.PowerTransform(3.0)
    assert T.ExpTransform().inv == T.ExpTransform().inv
    assert T.ComposeTransform([T.ExpTransform()]) == T.ComposeTransform([T.ExpTransform()])
    assert T.ReshapeTransform((2,), (2,)) != T.ReshapeTransform((2,), (2,))
    assert T.Transform() != T.Transform()
    assert T.ExpTransform() != 3
    with pytest.raises(TypeError):
        hash(T.ExpTransform())


def test_attributes_and_errors():
    with pytest.raises(ValueError, match="Please use either .domain.event_dim"):
        T.ReshapeTransform((6,), (2, 3)).event_dim
    for t in [T.Transform(), T.AbsTransform(), T.StickBreakingTransform()]:
        with pytest.raises(NotImplementedError):
            t.sign
    assert T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, -2.0)]).sign == -1
    assert T.AffineTransform(1.0, 0.0).sign == 0
    assert ember.equal(T.PowerTransform(_t([2.0, -1.0])).sign, _t([1.0, -1.0]))
    assert T.PowerTransform(2).exponent.dtype == ember.get_default_dtype()
    identity = T.identity_transform
    assert identity.domain is C.real and identity.bijective and identity.sign == 1
    x = _t([1.0, 2.0])
    assert identity(x) is x
    assert ember.equal(identity.log_abs_det_jacobian(x, x), ember.zeros_like(x))
    compose = T.ComposeTransform([T.ExpTransform(), T.StickBreakingTransform()])
    assert repr(compose.domain) == "IndependentConstraint(Real(), 1)"
    assert compose.codomain is C.simplex
    with pytest.raises(ValueError, match="different numbers of elements"):
        T.ReshapeTransform((2, 3), (4,))
    with pytest.raises(ValueError, match="Too few dimensions on input"):
        T.IndependentTransform(T.ExpTransform(), 2)(ember.ones(3))
    with pytest.raises(AssertionError, match="All elements of tseq must be Transform"):
        T.CatTransform([3])
    with pytest.raises(AssertionError, match=r"lengths \(1\) must match transforms \(2\)"):
        T.CatTransform([T.ExpTransform(), T.ExpTransform()], lengths=[1])
    with pytest.raises(AssertionError, match=r"x.size\(0\) = 3 must equal length 1"):
        T.CatTransform([T.ExpTransform()])(ember.ones(3))
    with pytest.raises(AssertionError, match="dim 3 out of range"):
        T.StackTransform([T.ExpTransform()], 3)(ember.ones(1))


def test_cat_and_stack_errors_name_the_side_that_is_wrong():
    cat = T.CatTransform([T.ExpTransform(), T.ExpTransform()], lengths=[1, 1])
    with pytest.raises(AssertionError, match=r"^y.size\(0\) = 3 must equal length 2$"):
        cat.inv(ember.ones(3))
    with pytest.raises(AssertionError, match=r"^y.size\(0\) = 3 must equal length 2$"):
        cat.log_abs_det_jacobian(ember.ones(2), ember.ones(3))
    stack = T.StackTransform([T.ExpTransform(), T.ExpTransform()])
    with pytest.raises(AssertionError, match=r"^y.size\(0\) = 3 must equal len\(transforms\) 2$"):
        stack.inv(ember.ones(3))


def test_cat_constraint_checks_only_the_given_lengths():
    """As PyTorch, which narrows: entries past sum(lengths) are left out, and a value too
    short for the lengths raises."""
    cat = C.cat([C.positive, C.real], 0, [2, 2])
    assert cat.check(_t([1.0, -1.0, -1.0, 2.0, -5.0])).tolist() == [True, False, True, True]
    assert C.cat([C.positive, C.real], 0).check(_t([1.0, -1.0, 3.0])).tolist() == [True, True]
    with pytest.raises(RuntimeError, match=r"start \(2\) \+ length \(2\) exceeds dimension"):
        cat.check(_t([1.0, -1.0, -1.0]))


def test_cat_and_stack_constraint_errors():
    with pytest.raises(AssertionError, match=r"^lengths \(3\) must match cseq \(2\)$"):
        C.cat([C.positive, C.real], 0, [1, 2, 3])
    for make in (C.cat, C.stack):
        with pytest.raises(AssertionError, match="^All elements of cseq must be Constraint"):
            make([C.positive, 1], 0)
        with pytest.raises(AssertionError, match="^dim -3 out of range for value with 1 dim"):
            make([C.positive, C.real], -3).check(_t([1.0, 2.0]))


def test_integer_interval_compares_the_bound_first():
    """As PyTorch, a bound that does not broadcast is named as tensor a in the error."""
    bounded = C.integer_interval(ember.tensor([0, 1]), ember.tensor([2, 3]))
    with pytest.raises(RuntimeError, match=r"size of tensor a \(2\) must match the size of "
                                           r"tensor b \(3\)"):
        bounded.check(_t([1.0, 2.0, 3.0]))


def test_corr_cholesky_rejects_a_size_that_is_no_triangle():
    with pytest.raises(ValueError, match="^The size of last dimension is 2 which cannot be "
                                         "expressed as the lower triangular part of a square"):
        T.CorrCholeskyTransform()(_t([0.3, 0.2]))


def test_shapes():
    assert T.ReshapeTransform((6,), (2, 3)).forward_shape((4, 6)) == (4, 2, 3)
    with pytest.raises(ValueError, match=r"Shape mismatch: expected \(4, 3\)"):
        T.ReshapeTransform((2, 3), (6,)).forward_shape((4, 3))
    assert T.StickBreakingTransform().forward_shape((2, 3)) == (2, 4)
    assert T.StickBreakingTransform().inverse_shape((4,)) == (3,)
    assert T.CorrCholeskyTransform().forward_shape((5, 6)) == (5, 4, 4)
    assert T.CorrCholeskyTransform().inverse_shape((4, 4)) == (6,)
    with pytest.raises(ValueError, match="Input is not a flattened lower-diagonal number"):
        T.CorrCholeskyTransform().forward_shape((4,))
    with pytest.raises(ValueError, match="Input is not square"):
        T.CorrCholeskyTransform().inverse_shape((3, 4))
    with pytest.raises(ValueError, match="Too few dimensions on input"):
        T.SoftmaxTransform().forward_shape(())
    assert T.AffineTransform(ember.zeros(3), 1.0).forward_shape((2, 1)) == (2, 3)
    log_det = T.AffineTransform(1.0, _t([1.0, 2.0, 3.0]), event_dim=1).log_abs_det_jacobian(
        ember.zeros(2, 3, dtype=ember.float64), None)
    assert ember.allclose(log_det, ember.full((2,), math.log(6.0), dtype=ember.float64))


def test_cat_and_stack_log_det_layout():
    cat = T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], 1, [1, 2])
    x = ember.ones(4, 3, dtype=ember.float64)
    expected = _t([[1.0, math.log(2), math.log(2)]] * 4)
    assert ember.allclose(cat.log_abs_det_jacobian(x, cat(x)), expected)
    stack = T.StackTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], 1)
    x = ember.ones(4, 2, dtype=ember.float64)
    assert ember.allclose(stack.log_abs_det_jacobian(x, stack(x)), expected[:, :2])


CONSTRAINTS = [(C.real, 4), (C.positive, 4), (C.nonnegative, 4), (C.greater_than(2.0), 4),
               (C.greater_than_eq(-1.0), 4), (C.less_than(3.0), 4), (C.unit_interval, 4),
               (C.interval(-1.0, 2.0), 4), (C.half_open_interval(0.0, 1.0), 4),
               (C.simplex, 3), (C.corr_cholesky, 6), (C.real_vector, 3),
               (C.independent(C.positive, 1), 3),
               (C.cat([C.real, C.positive, C.unit_interval], 0, [1, 2, 1]), 4),
               (C.stack([C.positive, C.interval(0.0, 2.0), C.real], 0), 3)]


@pytest.mark.parametrize("constraint,size", CONSTRAINTS, ids=[repr(c) for c, _ in CONSTRAINTS])
def test_biject_to_lands_in_the_constraint(constraint, size):
    t = biject_to(constraint)
    assert t.bijective
    x = 2 * ember.randn(size, dtype=ember.float64)
    y = t(x)
    assert bool(constraint.check(y).all())
    assert ember.allclose(t.inv(y), x, atol=1e-8)
    assert bool(constraint.check(transform_to(constraint)(x)).all())


def test_transform_to_only_constraints():
    x = ember.randn(3, 3, dtype=ember.float64)
    assert bool(C.lower_cholesky.check(transform_to(C.lower_cholesky)(x)))
    assert bool(C.positive_definite.check(transform_to(C.positive_definite)(x)))
    assert isinstance(transform_to(C.positive_semidefinite), T.PositiveDefiniteTransform)
    assert isinstance(transform_to(C.simplex), T.SoftmaxTransform)
    assert isinstance(biject_to(C.unit_interval), T.SigmoidTransform)
    with pytest.raises(NotImplementedError, match="Cannot transform _LowerCholesky constraints"):
        biject_to(C.lower_cholesky)
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        transform_to(C.boolean)


def test_registry_register():
    registry = ConstraintRegistry()
    registry.register(C.positive, lambda c: T.ExpTransform())
    assert registry(C.greater_than(5.0)) == T.ExpTransform()

    @registry.register(C.simplex)
    def _factory(constraint):
        return T.SoftmaxTransform()

    assert registry(C.simplex) == T.SoftmaxTransform()
    with pytest.raises(TypeError, match="Expected constraint to be either a Constraint"):
        registry.register(3, lambda c: None)


# TransformedDistribution

def test_transformed_log_normal_closed_form():
    loc, scale = _t([0.2, -1.0]), _t([0.5, 1.2])
    d = TransformedDistribution(Normal(loc, scale), [T.ExpTransform()])
    y = _t([0.7, 2.5])
    expected = (-(y.log() - loc) ** 2 / (2 * scale**2) - scale.log() - y.log()
                - 0.5 * math.log(2 * math.pi))
    assert ember.allclose(d.log_prob(y), expected)
    assert ember.allclose(d.cdf(y), Normal(loc, scale).cdf(y.log()))
    assert ember.allclose(d.icdf(_t([0.5, 0.5])), loc.exp())
    samples = d.sample((40000,))
    mean = (loc + scale**2 / 2).exp()
    std = ((scale**2).exp() - 1).sqrt() * mean
    assert bool(((samples.mean(0) - mean).abs() < 6 * std / 200).all())
    assert d.support is C.positive and d.has_rsample
    assert repr(d) == "TransformedDistribution()"


def test_transformed_decreasing_cdf_is_flipped():
    d = TransformedDistribution(Normal(0.0, 1.0), [T.AffineTransform(1.0, -2.0)])
    # Y = 1 - 2X: P(Y <= y) = P(X >= (1 - y) / 2)
    y = ember.tensor([0.5, 3.0])
    assert ember.allclose(d.cdf(y), 1 - Normal(0.0, 1.0).cdf((1 - y) / 2))
    assert ember.allclose(d.icdf(d.cdf(y)), y)


def test_transformed_rsample_gradient():
    loc, scale = _t([0.3], grad=True), _t([0.8], grad=True)
    d = TransformedDistribution(Normal(loc, scale), T.ExpTransform())
    y = d.rsample()
    grad_loc, grad_scale = ember.autograd.grad(y.sum(), [loc, scale])
    eps = (y.log() - loc) / scale                 # y = exp(loc + scale * eps)
    assert ember.allclose(grad_loc, y.detach())
    assert ember.allclose(grad_scale, (y * eps).detach())


def test_transformed_shapes():
    d = TransformedDistribution(Normal(ember.zeros(3), 1.0), [T.StickBreakingTransform()])
    assert d.batch_shape == () and d.event_shape == (4,)
    assert isinstance(d.base_dist, Independent) and d.support is C.simplex
    assert d.sample((2,)).shape == (2, 4)
    d = TransformedDistribution(Normal(ember.zeros(4, 6), 1.0), [T.ReshapeTransform((6,), (2, 3))])
    assert d.batch_shape == (4,) and d.event_shape == (2, 3)
    assert repr(d.support) == "IndependentConstraint(Real(), 2)"
    d = TransformedDistribution(Normal(ember.zeros(3), 1.0),
                                [T.AffineTransform(ember.zeros(2, 3), 1.0)])
    assert d.batch_shape == (2, 3) and d.base_dist.batch_shape == (2, 3)
    e = d.expand((5, 2, 3))
    assert e.batch_shape == (5, 2, 3) and e.base_dist.batch_shape == (5, 2, 3)
    d = TransformedDistribution(Normal(ember.zeros(3), 1.0), [])
    assert d.support is C.real and d.batch_shape == (3,)


def test_transformed_log_prob_sums_event_log_dets():
    base = Normal(_t([[0.1, 0.2], [0.3, -0.4]]), 1.0)
    d = TransformedDistribution(base, [T.ExpTransform(), T.IndependentTransform(
        T.AffineTransform(0.0, 3.0), 1)])
    assert d.batch_shape == (2,) and d.event_shape == (2,)
    y = _t([[1.0, 2.0], [3.0, 0.5]])
    x = (y / 3).log()
    expected = (base.log_prob(x) - x - math.log(3.0)).sum(-1)
    assert ember.allclose(d.log_prob(y), expected)


def test_transformed_errors():
    base = Normal(ember.zeros(3), ember.ones(3))
    with pytest.raises(ValueError, match="transforms must be a Transform or list, but was 3"):
        TransformedDistribution(base, 3)
    with pytest.raises(ValueError, match="transforms must be a Transform or a list of Trans"):
        TransformedDistribution(base, [3])
    with pytest.raises(ValueError, match="needs to have shape with size at least 1"):
        TransformedDistribution(Normal(0.0, 1.0), [T.StickBreakingTransform()])
    d = TransformedDistribution(Normal(0.0, 1.0), [T.ExpTransform()], validate_args=True)
    with pytest.raises(ValueError, match="to be within the support"):
        d.log_prob(ember.tensor([-0.5]))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        d.log_prob(0.5)
    for name in ("mean", "variance"):
        with pytest.raises(NotImplementedError):
            getattr(d, name)
    with pytest.raises(NotImplementedError):
        d.entropy()
    with pytest.raises(NotImplementedError):
        TransformedDistribution(base, [T.StickBreakingTransform()]).cdf(ember.ones(4) / 4)


def test_transformed_kl_needs_equal_transforms():
    p = TransformedDistribution(Normal(_t([0.0, 1.0]), 1.0), [T.ExpTransform()])
    q = TransformedDistribution(Normal(_t([1.0, 0.0]), 2.0), [T.ExpTransform()])
    expected = kl_divergence(p.base_dist, q.base_dist)
    kl = kl_divergence(p, q)
    assert ember.allclose(kl, expected)
    samples = p.sample((20000,))
    log_ratio = p.log_prob(samples) - q.log_prob(samples)
    error = 6 * log_ratio.std(0) / math.sqrt(20000)
    assert bool(((log_ratio.mean(0) - kl).abs() < error).all())
    other = TransformedDistribution(Normal(1.0, 2.0), [T.AffineTransform(0.0, 1.0)])
    with pytest.raises(NotImplementedError):
        kl_divergence(p, other)


# Independent

def test_independent():
    base = Normal(_t([[0.0, 1.0, -2.0], [0.5, 0.5, 0.5]]), _t([1.0, 0.2, 3.0]))
    d = Independent(base, 1)
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    value = _t([0.1, 0.9, -1.0])
    assert ember.allclose(d.log_prob(value), base.log_prob(value).sum(-1))
    assert ember.allclose(d.entropy(), base.entropy().sum(-1))
    assert ember.equal(d.mean, base.mean) and ember.equal(d.variance, base.variance)
    assert repr(d.support) == "IndependentConstraint(Real(), 1)"
    assert d.has_rsample and not d.has_enumerate_support and d.arg_constraints == {}
    assert repr(d) == f"Independent({base}, 1)"
    e = d.expand((4, 2))
    assert e.batch_shape == (4, 2) and e.base_dist.batch_shape == (4, 2, 3)
    both = Independent(base, 2)
    assert both.batch_shape == () and both.event_shape == (2, 3)
    assert ember.allclose(both.log_prob(base.mean), base.log_prob(base.mean).sum())
    assert Independent(base, 0).support is C.real
    with pytest.raises(NotImplementedError, match="Enumeration over cartesian product"):
        d.enumerate_support()
    with pytest.raises(ValueError, match=r"reinterpreted_batch_ndims <= len\(base_distribution"
                                         r".batch_shape\), actual 3 vs 2"):
        Independent(base, 3)
    q = Independent(Normal(ember.zeros(2, 3, dtype=ember.float64), 2.0), 1)
    assert ember.allclose(kl_divergence(d, q), kl_divergence(base, q.base_dist).sum(-1))
    with pytest.raises(NotImplementedError):
        kl_divergence(d, Independent(q.base_dist, 2))


def test_independent_kl_against_monte_carlo():
    p = Independent(Uniform(_t([0.0, 1.0]), _t([1.0, 2.0])), 1)
    q = Independent(Uniform(_t([-1.0, 0.5]), _t([2.0, 3.0])), 1)
    samples = p.sample((1000,))
    estimate = (p.log_prob(samples) - q.log_prob(samples)).mean()
    assert ember.allclose(kl_divergence(p, q), estimate)            # constant log ratio


# MixtureSameFamily

def _mixture():
    return MixtureSameFamily(Categorical(probs=_t([0.3, 0.7])),
                             Normal(_t([-1.0, 2.0]), _t([1.0, 0.5])))


def test_mixture_closed_forms():
    m = _mixture()
    assert m.batch_shape == () and m.event_shape == ()
    assert ember.allclose(m.mean, _t(0.3 * -1.0 + 0.7 * 2.0))
    second = 0.3 * (1.0 + 1.0) + 0.7 * (0.25 + 4.0)
    assert ember.allclose(m.variance, _t(second - 1.1**2))
    x = _t([0.5, -2.0])
    components = Normal(_t([-1.0, 2.0]), _t([1.0, 0.5]))
    density = 0.3 * components.log_prob(x.unsqueeze(-1))[:, 0].exp() + \
        0.7 * components.log_prob(x.unsqueeze(-1))[:, 1].exp()
    assert ember.allclose(m.log_prob(x), density.log())
    cdf = (_t([0.3, 0.7]) * components.cdf(x.unsqueeze(-1))).sum(-1)
    assert ember.allclose(m.cdf(x), cdf)
    samples = m.sample((40000,))
    assert samples.shape == (40000,)
    assert abs(samples.mean().item() - 1.1) < 6 * math.sqrt(m.variance.item() / 40000)
    assert repr(m.support) == "MixtureSameFamilyConstraint(Real())"
    assert not m.has_rsample
    assert repr(m).startswith("MixtureSameFamily(\n  Categorical(")


def test_mixture_batched_event_shapes():
    comp = Independent(Normal(ember.zeros(2, 3, 4, dtype=ember.float64), 1.0), 1)
    m = MixtureSameFamily(Categorical(logits=ember.ones(2, 3, dtype=ember.float64)), comp)
    assert m.batch_shape == (2,) and m.event_shape == (4,)
    assert m.sample((5,)).shape == (5, 2, 4)
    assert m.mean.shape == (2, 4) and m.log_prob(ember.zeros(2, 4)).shape == (2,)
    e = m.expand((6, 2))
    assert e.batch_shape == (6, 2) and e.component_distribution.batch_shape == (6, 2, 3)
    assert e.mixture_distribution.batch_shape == (6, 2)
    m = MixtureSameFamily(Categorical(probs=ember.ones(3) / 3), Normal(ember.zeros(5, 2, 3), 1.0))
    assert m._pad_mixture_dimensions(ember.ones(3)).shape == (1, 1, 3)
    assert m._pad(ember.ones(5, 2)).shape == (5, 2, 1)


def test_mixture_support_check():
    m = MixtureSameFamily(Categorical(probs=ember.ones(3) / 3),
                          Uniform(ember.zeros(3), ember.tensor([1.0, 2.0, 3.0])))
    assert ember.equal(m.support.check(ember.tensor([0.5, 2.5])), ember.tensor([True, False]))
    with pytest.raises(ValueError, match="to be within the support"):
        MixtureSameFamily(m.mixture_distribution, m.component_distribution,
                          validate_args=True).log_prob(ember.tensor([2.5]))


def test_mixture_errors():
    comp = Normal(ember.zeros(2), 1.0)
    with pytest.raises(ValueError, match="needs to be an  instance of torch.distributions.Cat"):
        MixtureSameFamily(Normal(0.0, 1.0), comp)
    with pytest.raises(ValueError, match="needs to be an instance of torch.distributions.Dist"):
        MixtureSameFamily(Categorical(probs=ember.ones(2) / 2), 3)
    with pytest.raises(ValueError, match="is not compatible with"):
        MixtureSameFamily(Categorical(probs=ember.ones(2, 3) / 3), Normal(ember.zeros(4, 3), 1.0))
    with pytest.raises(ValueError, match=r"component` \(3\) does not equal"):
        MixtureSameFamily(Categorical(probs=ember.ones(3) / 3), Normal(ember.zeros(4, 2), 1.0))
    m = _mixture()
    for method in (m.entropy, m.rsample, m.enumerate_support):
        with pytest.raises(NotImplementedError):
            method()
    with pytest.raises(NotImplementedError, match="does not implement mode"):
        m.mode
