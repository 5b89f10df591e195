"""The gamma group (Gamma, Chi2, Beta, Dirichlet, StudentT, FisherSnedecor, InverseGamma,
VonMises, ContinuousBernoulli), its KL divergences and the primitives ``_standard_gamma``,
``_standard_gamma_grad`` and ``_sample_dirichlet`` against torch: values at fixed points,
moments, structure and error messages."""

import math
import re

import numpy as np
import pytest

import ember
import ember.distributions as ours
from ember.ops.gamma_sampling import _standard_gamma_grad
from tests.parity._compare import as_array, assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity
theirs = torch.distributions


def _both(values, dtype="float64"):
    """The same values as an ember and a torch tensor."""
    array = np.asarray(values, dtype=dtype)
    return ember.tensor(array), torch.from_numpy(array.copy())


def _build(name, **params):
    """The family ``name`` built by ember and by torch from the same numbers (lists become
    float64 tensors)."""
    mine, other = {}, {}
    for key, value in params.items():
        if isinstance(value, list):
            mine[key], other[key] = _both(value)
        else:
            mine[key] = other[key] = value
    return getattr(ours, name)(**mine), getattr(theirs, name)(**other)


# torch evaluates the Bessel functions of VonMises by polynomial approximations, good to about
# 1e-7 (ember: SciPy's i0e and i1e)
_LOOSER = {"VonMises": 3e-6}


def _close(got, expected, rtol=1e-9, atol=1e-12):
    """Assert ember's ``got`` matches torch's ``expected`` in shape, dtype and values."""
    assert_close(got, expected, rtol, atol, same_dtype=True, float32=(2e-6, 1e-7))


# name, parameters, points inside the support (broadcast against the batch)
FAMILIES = [
    ("Gamma", {"concentration": [0.3, 1.0, 4.5], "rate": [1.0, 0.5, 2.0]}, [0.2, 1.0, 3.5]),
    ("Gamma", {"concentration": 2.0, "rate": 3.0}, [0.0, 0.5, 4.0]),
    ("Chi2", {"df": [1.0, 2.0, 7.5]}, [0.3, 2.0, 9.0]),
    ("Beta", {"concentration1": [0.5, 2.0, 1.0], "concentration0": [0.7, 3.5, 1.0]},
     [0.1, 0.5, 0.99]),
    ("Beta", {"concentration1": 2.0, "concentration0": 5.0}, [0.0, 0.3, 1.0]),
    ("Dirichlet", {"concentration": [[0.6, 1.5, 3.0], [2.0, 2.0, 0.4]]},
     [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]),
    ("StudentT", {"df": [0.8, 1.5, 3.0, 30.0], "loc": [0.0, 1.0, -2.0, 0.5],
                  "scale": [1.0, 0.5, 2.0, 3.0]}, [0.3, -1.0, 2.5, 10.0]),
    ("StudentT", {"df": 4.0}, [-3.0, 0.0, 1.5]),
    ("FisherSnedecor", {"df1": [1.0, 3.0, 5.0, 8.0], "df2": [1.5, 3.0, 5.0, 12.0]},
     [0.1, 1.0, 2.0, 4.0]),
    ("InverseGamma", {"concentration": [0.5, 1.5, 3.0], "rate": [1.0, 2.0, 3.0]},
     [0.5, 1.0, 2.0]),
    ("VonMises", {"loc": [0.0, 1.0, -2.5], "concentration": [0.5, 4.0, 30.0]},
     [-3.0, 1.2, 0.0]),
    ("ContinuousBernoulli", {"probs": [0.1, 0.4995, 0.5, 0.5008, 0.9]},
     [0.0, 0.2, 0.5, 0.7, 1.0]),
    ("ContinuousBernoulli", {"logits": [-2.0, 0.0005, 0.0, 3.0]}, [0.1, 0.4, 0.6, 0.95]),
    ("ContinuousBernoulli", {"probs": 0.3, "lims": (0.2, 0.8)}, [0.1, 0.6, 0.9]),
]
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(FAMILIES)]


@pytest.mark.parametrize("name,params,points", FAMILIES, ids=IDS)
def test_structure_matches(name, params, points):
    mine, other = _build(name, **params)
    assert tuple(mine.batch_shape) == tuple(other.batch_shape)
    assert tuple(mine.event_shape) == tuple(other.event_shape)
    assert list(mine.arg_constraints) == list(other.arg_constraints)
    for key, constraint in mine.arg_constraints.items():
        assert repr(constraint) == repr(other.arg_constraints[key])
    assert repr(mine.support) == repr(other.support)
    assert mine.has_rsample == other.has_rsample
    assert [c.__name__ for c in type(mine).__mro__] == [c.__name__ for c in type(other).__mro__]
    assert repr(mine).replace("ember.", "torch.") == repr(other)
    expanded_mine = mine.expand((2,) + tuple(mine.batch_shape))
    expanded_other = other.expand((2,) + tuple(other.batch_shape))
    assert tuple(expanded_mine.batch_shape) == tuple(expanded_other.batch_shape)


@pytest.mark.parametrize("name,params,points", FAMILIES, ids=IDS)
def test_values_match(name, params, points):
    mine, other = _build(name, **params)
    x_mine, x_other = _both(points, dtype=as_array(other.sample()).dtype)
    _close(mine.log_prob(x_mine), other.log_prob(x_other), rtol=1e-7)
    for method in ("cdf", "icdf", "entropy"):
        args_mine, args_other = ((), ()) if method == "entropy" else ((x_mine,), (x_other,))
        if method == "icdf":
            args_mine, args_other = _both(np.linspace(0.05, 0.95, len(points)),
                                          dtype=as_array(x_other).dtype)
            args_mine, args_other = (args_mine,), (args_other,)
        try:
            expected = getattr(other, method)(*args_other)
        except NotImplementedError:
            with pytest.raises(NotImplementedError):
                getattr(mine, method)(*args_mine)
            continue
        _close(getattr(mine, method)(*args_mine), expected, rtol=1e-7)


@pytest.mark.parametrize("name,params,points", FAMILIES, ids=IDS)
def test_moments_match(name, params, points):
    mine, other = _build(name, **params)
    for moment in ("mean", "mode", "variance", "stddev"):
        try:
            expected = getattr(other, moment)
        except NotImplementedError:
            with pytest.raises(NotImplementedError):
                getattr(mine, moment)
            continue
        _close(getattr(mine, moment), expected, rtol=_LOOSER.get(name, 1e-9))


@pytest.mark.parametrize("name,params,points", FAMILIES, ids=IDS)
def test_log_prob_gradients_match(name, params, points):
    grads = {}
    for lib, module in ((ember, ours), (torch, theirs)):
        leaves, built = {}, {}
        for key, value in params.items():
            if isinstance(value, list):
                leaves[key] = lib.tensor(value, dtype=lib.float64, requires_grad=True)
                built[key] = leaves[key]
            else:
                built[key] = value
        d = getattr(module, name)(**built)
        x = lib.tensor(points, dtype=lib.float64)
        if not leaves:
            return
        grads[lib] = lib.autograd.grad(d.log_prob(x).sum(), list(leaves.values()))
    for g_mine, g_other in zip(grads[ember], grads[torch]):
        _close(g_mine, g_other, rtol=_LOOSER.get(name, 1e-7), atol=1e-10)


# --- KL divergences ---------------------------------------------------------------------------

P_CHOICES = {
    "Gamma": {"concentration": [0.7, 3.0], "rate": [1.5, 0.4]},
    "Beta": {"concentration1": [2.0, 0.7], "concentration0": [3.0, 1.5]},
    "Dirichlet": {"concentration": [[1.5, 0.8, 2.5], [1.0, 1.0, 1.0]]},
    "ContinuousBernoulli": {"probs": [0.2, 0.5002]},
}
Q_CHOICES = {
    **P_CHOICES,
    "Chi2": {"df": [3.0, 0.5]},
    "Exponential": {"rate": [2.0, 0.5]},
    "Gumbel": {"loc": [0.3, -1.0], "scale": [0.7, 2.0]},
    "Normal": {"loc": [0.3, 2.0], "scale": [0.5, 1.5]},
    "Pareto": {"scale": [1.0, 0.5], "alpha": [2.0, 3.0]},
    "Uniform": {"low": [-0.5, 0.0], "high": [1.5, 1.0]},
}


def _kl_cases():
    for type_p, type_q in theirs.kl._KL_REGISTRY:
        if type_p.__name__ in P_CHOICES and type_q.__name__ in Q_CHOICES:
            yield pytest.param(type_p.__name__, type_q.__name__,
                               id=f"{type_p.__name__}-{type_q.__name__}")
    yield pytest.param("Chi2", "Gamma", id="Chi2-Gamma")
    yield pytest.param("Chi2", "Chi2", id="Chi2-Chi2")


@pytest.mark.parametrize("name_p,name_q", list(_kl_cases()))
def test_kl_divergence_matches(name_p, name_q):
    p_params = P_CHOICES.get(name_p, Q_CHOICES.get(name_p))
    p_mine, p_other = _build(name_p, **p_params)
    q_mine, q_other = _build(name_q, **Q_CHOICES[name_q])
    _close(ours.kl_divergence(p_mine, q_mine), theirs.kl_divergence(p_other, q_other),
           rtol=1e-7)


# --- error messages ---------------------------------------------------------------------------

def _normalized(message):
    return re.sub(r"(torch|ember)\.", "", message)


ERRORS = [
    ("Gamma", {"concentration": -1.0, "rate": 1.0}),
    ("Gamma", {"concentration": [1.0, 2.0], "rate": [0.0, 1.0]}),
    ("Chi2", {"df": -1.0}),
    ("Beta", {"concentration1": -1.0, "concentration0": 2.0}),
    ("Beta", {"concentration1": [1.0, -1.0], "concentration0": 2.0}),
    ("Dirichlet", {"concentration": [1.0, -1.0]}),
    ("StudentT", {"df": -1.0}),
    ("StudentT", {"df": 1.0, "loc": 0.0, "scale": -1.0}),
    ("FisherSnedecor", {"df1": 1.0, "df2": -1.0}),
    ("InverseGamma", {"concentration": -1.0, "rate": 1.0}),
    ("VonMises", {"loc": 0.0, "concentration": -1.0}),
    ("ContinuousBernoulli", {}),
    ("ContinuousBernoulli", {"probs": 0.5, "logits": 0.0}),
    ("ContinuousBernoulli", {"probs": 1.5, "validate_args": True}),
]


@pytest.mark.parametrize("name,params", ERRORS, ids=[e[0] for e in ERRORS])
def test_constructor_errors_match(name, params):
    with pytest.raises(ValueError) as expected:
        _build(name, **params)
    with pytest.raises(ValueError) as got:
        getattr(ours, name)(**{k: ember.tensor(v, dtype=ember.float64)
                               if isinstance(v, list) else v for k, v in params.items()})
    assert _normalized(str(got.value)) == _normalized(str(expected.value))


def test_dirichlet_scalar_and_sample_errors_match():
    for lib, module in ((ember, ours), (torch, theirs)):
        with pytest.raises(ValueError, match="`concentration` parameter must be at least "
                                             "one-dimensional."):
            module.Dirichlet(lib.tensor(1.0))
    mine, other = _build("Gamma", concentration=2.0, rate=1.0)
    messages = []
    for d, value in ((mine, ember.tensor(-1.0)), (other, torch.tensor(-1.0))):
        with pytest.raises(ValueError) as caught:
            d.log_prob(value)
        messages.append(_normalized(str(caught.value)))
    assert messages[0] == messages[1]


# --- the primitives ---------------------------------------------------------------------------

def test_standard_gamma_grad_close_to_torch():
    # torch's approximation is good to about 1e-3 over these; ember's to about 1e-9
    alpha = np.array([0.1, 0.5, 1.0, 2.0, 5.0, 20.0, 80.0])
    x = np.array([0.05, 0.3, 1.7, 2.5, 3.0, 25.0, 70.0])
    mine = _standard_gamma_grad(ember.tensor(alpha), ember.tensor(x))
    other = torch._standard_gamma_grad(torch.from_numpy(alpha), torch.from_numpy(x))
    np.testing.assert_allclose(as_array(mine), as_array(other), rtol=5e-3)


def test_primitive_errors_match():
    cases = [
        (lambda lib: lib._standard_gamma(lib.tensor([1, 2]))),
        (lambda lib: lib._standard_gamma(lib.tensor([1.0], dtype=lib.float16))),
        (lambda lib: lib._sample_dirichlet(lib.tensor([1, 2]))),
        (lambda lib: (_standard_gamma_grad if lib is ember else torch._standard_gamma_grad)(
            lib.tensor([1, 2]), lib.tensor([1, 2]))),
        (lambda lib: (_standard_gamma_grad if lib is ember else torch._standard_gamma_grad)(
            lib.tensor([1.0, 2.0]), lib.tensor([1, 2]))),
    ]
    for case in cases:
        with pytest.raises(Exception) as expected:
            case(torch)
        with pytest.raises(type(expected.value)) as got:
            case(ember)
        assert str(got.value) == str(expected.value)


def test_standard_gamma_matches_torch_structure():
    for lib in (ember, torch):
        alpha = lib.tensor([0.5, 2.0], dtype=lib.float64, requires_grad=True)
        sample = lib._standard_gamma(alpha)
        assert type(sample.grad_fn).__name__ == "StandardGammaBackward0"
        grad, = lib.autograd.grad(sample.sum(), alpha, create_graph=True)
        assert type(grad.grad_fn).__name__ == "MulBackward0"
        with pytest.raises(NotImplementedError, match="the derivative for "
                                                      "'_standard_gamma_grad' is not implemented"):
            lib.autograd.grad(grad.sum(), alpha)
    tiny = torch.finfo(torch.float32).tiny
    for lib in (ember, torch):
        out = lib._standard_gamma(lib.tensor([0.0, -1.0, math.nan, 1e-30]))
        np.testing.assert_array_equal(as_array(out), [tiny] * 4)
