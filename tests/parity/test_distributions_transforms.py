"""ember.distributions transforms, biject_to/transform_to, TransformedDistribution,
Independent and MixtureSameFamily against torch.distributions: values, log-dets, shapes,
reprs, KL and error messages."""

import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.parity._compare import assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity
TD = torch.distributions

LIBS = [(ember, ED), (torch, TD)]


def _tensor(lib, values):
    return lib.tensor(values, dtype=lib.float64)


def _close(ours, theirs, rtol=1e-10, atol=1e-10):
    """Assert two tensors (or values) match in shape and values."""
    assert_close(ours, theirs, rtol, atol)


def _text(obj):
    return str(obj).replace("torch.Size", "Size").replace("ember.Size", "Size") \
        .replace("torch.", "").replace("ember.", "")


# Each case builds a transform from (lib, D) and gives an input batch for it.
TRANSFORMS = {
    "exp": (lambda L, D: D.transforms.ExpTransform(), [[-1.0, 0.5], [2.0, 0.0]]),
    "power": (lambda L, D: D.transforms.PowerTransform(_tensor(L, [2.5, -0.5])),
              [[0.5, 1.5], [3.0, 0.2]]),
    "sigmoid": (lambda L, D: D.transforms.SigmoidTransform(), [[-40.0, 0.5], [2.0, 30.0]]),
    "tanh": (lambda L, D: D.transforms.TanhTransform(), [[-5.0, 0.5], [2.0, 0.1]]),
    "softplus": (lambda L, D: D.transforms.SoftplusTransform(), [[-5.0, 0.5], [2.0, 25.0]]),
    "abs": (lambda L, D: D.transforms.AbsTransform(), [[-5.0, 0.5], [2.0, -0.1]]),
    "affine": (lambda L, D: D.transforms.AffineTransform(1.5, -2.0), [[-1.0, 0.5], [2.0, 3.0]]),
    "affine_event": (lambda L, D: D.transforms.AffineTransform(
        _tensor(L, [1.0, 2.0]), _tensor(L, [[0.5, -3.0]]), event_dim=1),
        [[-1.0, 0.5], [2.0, 3.0]]),
    "softmax": (lambda L, D: D.transforms.SoftmaxTransform(), [[-1.0, 0.5, 2.0]]),
    "stick": (lambda L, D: D.transforms.StickBreakingTransform(),
              [[-1.0, 0.5, 2.0], [0.0, 0.0, 0.0]]),
    "corr": (lambda L, D: D.transforms.CorrCholeskyTransform(),
             [[-1.0, 0.5, 2.0, 0.3, -0.7, 1.1], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]]),
    "lower_cholesky": (lambda L, D: D.transforms.LowerCholeskyTransform(),
                       [[[0.5, 2.0], [-1.0, 0.1]]]),
    "positive_definite": (lambda L, D: D.transforms.PositiveDefiniteTransform(),
                          [[[0.5, 2.0], [-1.0, 0.1]]]),
    "reshape": (lambda L, D: D.transforms.ReshapeTransform((4,), (2, 2)),
                [[1.0, 2.0, 3.0, 4.0]]),
    "independent": (lambda L, D: D.transforms.IndependentTransform(
        D.transforms.SigmoidTransform(), 1), [[-1.0, 0.5], [2.0, 3.0]]),
    "compose": (lambda L, D: D.transforms.ComposeTransform([
        D.transforms.AffineTransform(0.5, 2.0), D.transforms.ExpTransform(),
        D.transforms.StickBreakingTransform()]), [[-1.0, 0.5], [2.0, 0.3]]),
    "compose_reshape": (lambda L, D: D.transforms.ComposeTransform([
        D.transforms.ExpTransform(), D.transforms.ReshapeTransform((4,), (2, 2))]),
        [[-1.0, 0.5, 2.0, 0.3]]),
    "cat": (lambda L, D: D.transforms.CatTransform([
        D.transforms.ExpTransform(), D.transforms.AffineTransform(1.0, 3.0)], 1, [1, 2]),
        [[-1.0, 0.5, 2.0], [0.3, 0.1, 0.2]]),
    "stack": (lambda L, D: D.transforms.StackTransform([
        D.transforms.ExpTransform(), D.transforms.TanhTransform()], 1),
        [[-1.0, 0.5], [0.3, 0.1]]),
    "cdf": (lambda L, D: D.transforms.CumulativeDistributionTransform(
        D.Normal(_tensor(L, 0.5), _tensor(L, 2.0))), [[-1.0, 0.5], [2.0, 3.0]]),
    "inverse_exp": (lambda L, D: D.transforms.ExpTransform().inv, [[0.5, 1.0], [3.0, 0.2]]),
    "identity": (lambda L, D: D.transforms.identity_transform, [[0.5, 1.0]]),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transform_values_match(name):
    build, values = TRANSFORMS[name]
    (ours, theirs) = [build(L, D) for L, D in LIBS]
    x_ours, x_theirs = _tensor(ember, values), _tensor(torch, values)
    y_ours, y_theirs = ours(x_ours), theirs(x_theirs)
    _close(y_ours, y_theirs)
    _close(ours.inv(y_ours), theirs.inv(y_theirs))
    assert ours.bijective == theirs.bijective
    assert _text(ours) == _text(theirs)
    assert repr(ours.domain) == repr(theirs.domain)
    assert repr(ours.codomain) == repr(theirs.codomain)
    assert tuple(ours.forward_shape(x_ours.shape)) == tuple(theirs.forward_shape(x_theirs.shape))
    assert tuple(ours.inverse_shape(y_ours.shape)) == tuple(theirs.inverse_shape(y_theirs.shape))
    try:
        expected = theirs.log_abs_det_jacobian(x_theirs, y_theirs)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            ours.log_abs_det_jacobian(x_ours, y_ours)
    else:
        _close(ours.log_abs_det_jacobian(x_ours, y_ours), expected)
    try:
        sign = theirs.sign
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            ours.sign
    else:
        _close(ours.sign, sign)


def _constraints(L, D):
    C = D.constraints
    return [C.real, C.positive, C.nonnegative, C.greater_than(2.0), C.greater_than_eq(-1.0),
            C.less_than(3.0), C.unit_interval, C.interval(-1.0, 2.0),
            C.interval(_tensor(L, [0.0, 1.0, 2.0]), _tensor(L, [1.0, 3.0, 2.5])),
            C.half_open_interval(0.0, 1.0), C.simplex, C.corr_cholesky, C.real_vector,
            C.independent(C.positive, 1), C.cat([C.real, C.positive], 0, [1, 2]),
            C.stack([C.positive, C.unit_interval, C.real], 0), C.lower_cholesky,
            C.positive_definite, C.positive_semidefinite, C.boolean]


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("index", range(20))
def test_constraint_registry_matches(registry, index):
    (c_ours, c_theirs) = [_constraints(L, D)[index] for L, D in LIBS]
    try:
        theirs = getattr(TD, registry)(c_theirs)
    except NotImplementedError as e:
        with pytest.raises(NotImplementedError) as ours_error:
            getattr(ED, registry)(c_ours)
        assert str(ours_error.value) == str(e)
        return
    ours = getattr(ED, registry)(c_ours)
    assert _text(ours) == _text(theirs)
    size = 6 if c_theirs.event_dim == 2 and "Corr" in repr(c_theirs) else 3
    values = np.linspace(-1.5, 2.0, size)
    if c_theirs.event_dim == 2 and size == 3:
        values = [[0.5, 2.0, 0.1], [-1.0, 0.1, 0.3], [0.2, 0.4, -0.6]]
    x_ours, x_theirs = _tensor(ember, values), _tensor(torch, values)
    y_ours, y_theirs = ours(x_ours), theirs(x_theirs)
    _close(y_ours, y_theirs)
    if theirs.bijective:
        _close(ours.log_abs_det_jacobian(x_ours, y_ours),
               theirs.log_abs_det_jacobian(x_theirs, y_theirs))


ERRORS = [
    lambda L, D: D.transforms.Transform(cache_size=2),
    lambda L, D: D.transforms.ReshapeTransform((2, 3), (4,)),
    lambda L, D: D.transforms.ReshapeTransform((2, 3), (6,)).forward_shape((4, 3)),
    lambda L, D: D.transforms.ReshapeTransform((2, 3), (6,)).inverse_shape((5,)),
    lambda L, D: D.transforms.ReshapeTransform((6,), (2, 3)).event_dim,
    lambda L, D: D.transforms.IndependentTransform(D.transforms.ExpTransform(), 2)(L.ones(3)),
    lambda L, D: D.transforms.CorrCholeskyTransform().forward_shape((4,)),
    lambda L, D: D.transforms.CorrCholeskyTransform().inverse_shape((3, 4)),
    lambda L, D: D.transforms.StickBreakingTransform().inverse_shape(()),
    lambda L, D: D.transforms.CatTransform([3]),
    lambda L, D: D.transforms.CatTransform([D.transforms.ExpTransform()] * 2, lengths=[1]),
    lambda L, D: D.transforms.CatTransform([D.transforms.ExpTransform()])(L.ones(3)),
    lambda L, D: D.transforms.StackTransform([D.transforms.ExpTransform()])(L.ones(3)),
    lambda L, D: D.transforms.StackTransform([D.transforms.ExpTransform()], 2)(L.ones(3)),
    lambda L, D: D.transforms.AbsTransform().sign,
    lambda L, D: D.biject_to(D.constraints.positive_definite),
    lambda L, D: D.biject_to.register(3, lambda c: c),
    lambda L, D: D.TransformedDistribution(D.Normal(0.0, 1.0), 3),
    lambda L, D: D.TransformedDistribution(D.Normal(0.0, 1.0), [3]),
    lambda L, D: D.TransformedDistribution(D.Normal(0.0, 1.0),
                                           [D.transforms.StickBreakingTransform()]),
    lambda L, D: D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.ExpTransform()],
                                           validate_args=True).log_prob(L.tensor([-1.0])),
    lambda L, D: D.Independent(D.Normal(L.zeros(2, 3), 1.0), 3),
    lambda L, D: D.Independent(D.Normal(L.zeros(2, 3), 1.0), 1).enumerate_support(),
    lambda L, D: D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(L.zeros(2), 1.0)),
    lambda L, D: D.MixtureSameFamily(D.Categorical(L.ones(2)), 3),
    lambda L, D: D.MixtureSameFamily(D.Categorical(L.ones(2, 3)), D.Normal(L.zeros(4, 3), 1.0)),
    lambda L, D: D.MixtureSameFamily(D.Categorical(L.ones(3)), D.Normal(L.zeros(4, 2), 1.0)),
    lambda L, D: D.MixtureSameFamily(D.Categorical(L.ones(3)), D.Normal(L.zeros(3), 1.0)).mode,
    lambda L, D: D.kl_divergence(D.Independent(D.Normal(L.zeros(2, 3), 1.0), 1),
                                 D.Independent(D.Normal(L.zeros(2, 3), 1.0), 2)),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_errors_match(index):
    with pytest.raises(Exception) as theirs:
        ERRORS[index](torch, TD)
    with pytest.raises(type(theirs.value)) as ours:
        ERRORS[index](ember, ED)
    assert _text(ours.value) == _text(theirs.value)


def _distributions(L, D):
    T = D.transforms
    loc = _tensor(L, [[0.3, -0.2, 0.1], [1.0, 0.5, -1.5]])
    scale = _tensor(L, [1.0, 0.5, 2.0])
    return {
        "log_normal": D.TransformedDistribution(D.Normal(loc, scale), [T.ExpTransform()]),
        "decreasing": D.TransformedDistribution(D.Normal(loc, scale), T.AffineTransform(
            _tensor(L, [1.0, 0.0, -1.0]), _tensor(L, [-2.0, 3.0, -0.5]))),
        "sigmoid_affine": D.TransformedDistribution(D.Normal(loc, scale), [
            T.SigmoidTransform(), T.AffineTransform(-1.0, 3.0)]),
        "stick": D.TransformedDistribution(D.Normal(loc, scale), [T.StickBreakingTransform()]),
        "broadcast": D.TransformedDistribution(D.Normal(_tensor(L, 0.2), 0.4), [
            T.AffineTransform(_tensor(L, [[1.0], [-1.0]]), _tensor(L, [2.0, 0.5, 1.5]))]),
        "independent": D.Independent(D.Normal(loc, scale), 1),
        "independent2": D.Independent(D.Normal(loc, scale), 2),
        "mixture": D.MixtureSameFamily(D.Categorical(_tensor(L, [0.2, 0.5, 0.3])),
                                       D.Normal(loc, scale)),
        "mixture_batched": D.MixtureSameFamily(
            D.Categorical(logits=_tensor(L, [[0.0, 1.0, -1.0], [0.5, 0.5, 0.0]])),
            D.Normal(loc, scale)),
        "mixture_event": D.MixtureSameFamily(
            D.Categorical(logits=_tensor(L, [0.0, 1.0])),
            D.Independent(D.Normal(loc[:, :2], scale[:2]), 1)),
    }


VALUES = {
    "log_normal": [[0.5, 1.0, 2.0], [0.1, 3.0, 1.0]], "decreasing": [[0.5, -1.0, 2.0]],
    "sigmoid_affine": [[0.5, -0.9, 1.9], [0.0, 1.0, 0.1]], "stick": [[0.1, 0.2, 0.3, 0.4]],
    "broadcast": [[0.5, -1.0, 2.0], [0.1, 0.2, 0.3]], "independent": [[0.5, -1.0, 2.0]],
    "independent2": [[0.5, -1.0, 2.0], [0.0, 1.0, 3.0]], "mixture": [0.5, -1.0],
    "mixture_batched": [[0.5, -1.0]], "mixture_event": [[0.5, -1.0]],
}
METHODS = ["log_prob", "cdf", "icdf", "entropy", "mean", "variance", "mode", "stddev"]


@pytest.mark.parametrize("name", list(VALUES))
def test_distribution_values_match(name):
    ours, theirs = [_distributions(L, D)[name] for L, D in LIBS]
    assert ours.batch_shape == tuple(theirs.batch_shape)
    assert ours.event_shape == tuple(theirs.event_shape)
    assert _text(ours) == _text(theirs)
    assert repr(ours.support) == repr(theirs.support)
    assert ours.has_rsample == theirs.has_rsample
    assert ours.has_enumerate_support == theirs.has_enumerate_support
    for method in METHODS:
        values = VALUES[name]
        if method == "icdf":
            values = np.clip(np.abs(np.asarray(values)) / 4, 0.05, 0.95).tolist()
        try:
            attr = getattr(theirs, method)
            expected = attr(_tensor(torch, values)) if method in ("log_prob", "cdf", "icdf") \
                else attr() if method == "entropy" else attr
        except NotImplementedError:
            with pytest.raises(NotImplementedError):
                attr = getattr(ours, method)
                attr(_tensor(ember, values)) if method in ("log_prob", "cdf", "icdf") \
                    else attr() if method == "entropy" else attr
            continue
        attr = getattr(ours, method)
        got = attr(_tensor(ember, values)) if method in ("log_prob", "cdf", "icdf") \
            else attr() if method == "entropy" else attr
        _close(got, expected)


@pytest.mark.parametrize("name", list(VALUES))
def test_expand_matches(name):
    ours, theirs = [_distributions(L, D)[name].expand((4,) + tuple(
        _distributions(L, D)[name].batch_shape)) for L, D in LIBS]
    assert _text(ours) == _text(theirs)
    assert ours.batch_shape == tuple(theirs.batch_shape)
    value = VALUES[name]
    _close(ours.log_prob(_tensor(ember, value)), theirs.log_prob(_tensor(torch, value)))


def _kl_pairs(L, D):
    T = D.transforms
    p_loc = _tensor(L, [[0.3, -0.2, 0.1], [1.0, 0.5, -1.5]])
    q_loc = _tensor(L, [[0.0, 0.2, 1.1], [-1.0, 0.5, 0.5]])
    p, q = D.Normal(p_loc, 1.5), D.Normal(q_loc, _tensor(L, [1.0, 0.5, 2.0]))
    exp = T.ExpTransform()
    return [(D.Independent(p, 1), D.Independent(q, 1)),
            (D.Independent(p, 2), D.Independent(q, 2)),
            (D.TransformedDistribution(p, [exp]), D.TransformedDistribution(q, [exp])),
            (D.TransformedDistribution(p, [T.StickBreakingTransform()]),
             D.TransformedDistribution(q, [T.StickBreakingTransform()]))]


@pytest.mark.parametrize("index", range(4))
def test_kl_matches(index):
    (p_ours, q_ours), (p_theirs, q_theirs) = [_kl_pairs(L, D)[index] for L, D in LIBS]
    _close(ED.kl_divergence(p_ours, q_ours), TD.kl_divergence(p_theirs, q_theirs))
