"""The discrete distributions (and their relaxations) against PyTorch: log_prob, moments,
mode, entropy, enumerate_support, expand and the KL divergences of every pair registered
with a discrete first argument; errors with PyTorch's type and message."""

import math
import re

import numpy as np
import pytest

import ember
import ember.distributions as ed
from ember.distributions.relaxed_bernoulli import LogitRelaxedBernoulli
from ember.distributions.relaxed_categorical import ExpRelaxedCategorical
from tests.parity._compare import assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity
td = torch.distributions


class T:
    """An array that becomes a float64 tensor in both libraries."""

    def __init__(self, value, dtype="float64"):
        self.value, self.dtype = np.asarray(value), dtype


def _build(lib, value):
    if not isinstance(value, T):
        return value
    if lib is ember:
        return ember.tensor(value.value, dtype=getattr(ember, value.dtype))
    return torch.tensor(value.value, dtype=getattr(torch, value.dtype))


def _classes(name):
    """The class of ``name`` in ember and in torch."""
    if name == "LogitRelaxedBernoulli":
        return LogitRelaxedBernoulli, td.relaxed_bernoulli.LogitRelaxedBernoulli
    if name == "ExpRelaxedCategorical":
        return ExpRelaxedCategorical, td.relaxed_categorical.ExpRelaxedCategorical
    return getattr(ed, name), getattr(td, name)


def _make(name, kwargs):
    ours, theirs = _classes(name)
    return (ours(**{k: _build(ember, v) for k, v in kwargs.items()}),
            theirs(**{k: _build(torch, v) for k, v in kwargs.items()}))


def _close(a, b):
    """Assert ember's ``a`` matches torch's ``b`` in shape, dtype and values."""
    assert_close(a, b, 1e-7, 1e-9, same_dtype=True, float32=(1e-5, 1e-6))


CATEGORICAL_PROBS = [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]
CASES = [
    ("Bernoulli", {"probs": T([0.2, 0.5, 0.9, 0.0, 1.0])}, T([[0, 1, 1, 0, 1], [1, 0, 1, 0, 1]])),
    ("Bernoulli", {"logits": T([[-1.0, 0.5], [2.0, 0.1]])}, T([1.0, 0.0])),
    ("Bernoulli", {"probs": 0.3}, T([0.0, 1.0, 1.0], "float32")),
    ("Binomial", {"total_count": T([4.0, 4.0, 4.0]), "probs": T([0.2, 0.6, 1.0])},
     T([[0.0, 3.0, 4.0], [4.0, 1.0, 2.0]])),
    ("Binomial", {"total_count": T([3.0, 7.0]), "logits": T([[0.3], [-1.2]])},
     T([[1.0, 2.0], [3.0, 0.0]])),
    ("Binomial", {"total_count": 10, "probs": 0.3}, T([0.0, 3.0, 10.0], "float32")),
    ("Binomial", {"total_count": 5, "probs": T([0.5, 0.2])}, T([2.0, 0.0])),   # logit 0: a kink
    ("Binomial", {"total_count": 4, "logits": T([0.0, -1.0])}, T([1.0, 3.0])),
    ("Categorical", {"probs": T(CATEGORICAL_PROBS)}, T([[0, 2], [1, 1], [2, 0]], "int64")),
    ("Categorical", {"probs": T([2.0, 1.0, 0.0])}, T([0.0, 1.0, 2.0])),
    ("Categorical", {"logits": T([1.0, -0.5, 0.2, 0.0])}, T([3, 0], "int64")),
    ("Categorical", {"logits": T([-math.inf, 0.5, 0.2])}, T([1, 2], "int64")),
    ("OneHotCategorical", {"probs": T(CATEGORICAL_PROBS)}, T([[0, 0, 1.0], [1.0, 0, 0]])),
    ("OneHotCategorical", {"logits": T([1.0, -0.5, 0.2, 0.0])}, T([[0, 1.0, 0, 0]])),
    ("OneHotCategoricalStraightThrough", {"probs": T(CATEGORICAL_PROBS)},
     T([[0, 1.0, 0], [0, 0, 1.0]])),
    ("Geometric", {"probs": T([0.3, 0.8, 1.0])}, T([[0.0, 4.0, 0.0], [2.0, 1.0, 3.0]])),
    ("Geometric", {"logits": T([[-0.5], [1.0]])}, T([0.0, 5.0])),
    ("Geometric", {"probs": 0.25}, T([0.0, 3.0], "float32")),
    # below float32's eps, where the log-odds are clamped (entropy: PyTorch's rounding)
    ("Geometric", {"probs": T([1e-30, 1e-8, 1e-7, 1.3e-7, 2e-7], "float32")},
     T([0.0, 3.0, 1.0, 2.0, 0.0], "float32")),
    ("Multinomial", {"total_count": 5, "probs": T([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])},
     T([[1.0, 2.0, 2.0], [5.0, 0.0, 0.0]])),
    ("Multinomial", {"total_count": 3, "logits": T([0.1, -0.4, 1.0, 0.0])},
     T([[0.0, 1.0, 2.0, 0.0], [1.0, 1.0, 0.0, 0.0]])),
    ("Multinomial", {"total_count": 4, "probs": T([0.0, 0.5, 0.5])}, T([0.0, 2.0, 2.0])),
    ("NegativeBinomial", {"total_count": T([2.5, 4.0, 0.0]), "probs": T([0.3, 0.6, 0.4])},
     T([[0.0, 3.0, 0.0], [7.0, 1.0, 2.0]])),
    ("NegativeBinomial", {"total_count": 3.0, "logits": T([[0.2], [-1.0]])}, T([0.0, 6.0])),
    ("Poisson", {"rate": T([0.5, 3.0, 10.0, 0.0])}, T([[0.0, 3.0, 12.0, 0.0],
                                                       [2.0, 0.0, 1.0, 1.0]])),
    ("Poisson", {"rate": 2.0}, T([0.0, 5.0], "float32")),
    ("LogitRelaxedBernoulli", {"temperature": T(0.5), "probs": T([0.3, 0.8])},
     T([[-1.5, 0.2], [3.0, -0.1]])),
    ("LogitRelaxedBernoulli", {"temperature": T([0.7, 1.5]), "logits": T([[0.2, -1.0]])},
     T([0.4, -2.0])),
    ("RelaxedBernoulli", {"temperature": T(0.5), "probs": T([0.3, 0.8])},
     T([[0.1, 0.5], [0.99, 0.3]])),
    ("RelaxedBernoulli", {"temperature": T([0.7, 1.5]), "logits": T([[0.2, -1.0]])},
     T([0.4, 0.02])),
    ("ExpRelaxedCategorical", {"temperature": T(0.5), "probs": T(CATEGORICAL_PROBS)},
     T([[-1.0, -0.5, -2.0], [-0.1, -3.0, -2.5]])),
    ("ExpRelaxedCategorical", {"temperature": T(1.2), "logits": T([0.1, -0.4, 1.0])},
     T([-1.2, -0.7, -1.5])),
    ("RelaxedOneHotCategorical", {"temperature": T(0.5), "probs": T(CATEGORICAL_PROBS)},
     T([[0.3, 0.5, 0.2], [0.05, 0.9, 0.05]])),
    ("RelaxedOneHotCategorical", {"temperature": T(1.2), "logits": T([0.1, -0.4, 1.0])},
     T([0.2, 0.2, 0.6])),
]
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(CASES)]


def _same_outcome(ours, theirs):
    """Call both; compare values, or the raised error types."""
    try:
        expected = theirs()
    except (NotImplementedError, AttributeError) as error:
        with pytest.raises(type(error)):
            ours()
        return
    _close(ours(), expected)


@pytest.mark.parametrize("name,kwargs,value", CASES, ids=IDS)
def test_against_torch(name, kwargs, value):
    ours, theirs = _make(name, kwargs)
    assert type(ours).__name__ == type(theirs).__name__
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    assert ours.has_rsample == theirs.has_rsample
    assert ours.has_enumerate_support == theirs.has_enumerate_support
    _close(ours.log_prob(_build(ember, value)), theirs.log_prob(_build(torch, value)))
    for prop in ("mean", "mode", "variance", "stddev", "probs", "logits"):
        _same_outcome(lambda: getattr(ours, prop), lambda: getattr(theirs, prop))
    _same_outcome(ours.entropy, theirs.entropy)
    if theirs.has_enumerate_support:
        for expand in (True, False):
            _same_outcome(lambda: ours.enumerate_support(expand),
                          lambda: theirs.enumerate_support(expand))
    assert repr(ours).replace("ember.Size", "torch.Size") == repr(theirs)
    assert repr(ours.support).replace("ember", "torch") == repr(theirs.support)


@pytest.mark.parametrize("name,kwargs,value", CASES, ids=IDS)
def test_expand_against_torch(name, kwargs, value):
    ours, theirs = _make(name, kwargs)
    shape = (2, 1) + tuple(theirs.batch_shape)
    ours, theirs = ours.expand(shape), theirs.expand(shape)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    _close(ours.log_prob(_build(ember, value)), theirs.log_prob(_build(torch, value)))
    _same_outcome(lambda: ours.mean, lambda: theirs.mean)


@pytest.mark.parametrize("name,kwargs,value", CASES, ids=IDS)
def test_sample_dtype_and_shape(name, kwargs, value):
    ours, theirs = _make(name, kwargs)
    got, expected = ours.sample((4,)), theirs.sample((4,))
    assert tuple(got.shape) == tuple(expected.shape)
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]


KL_CASES = [
    ("Bernoulli", {"probs": T([0.0, 0.3, 1.0, 0.3, 0.5, 0.6])},
     "Bernoulli", {"probs": T([0.0, 0.5, 1.0, 0.0, 1.0, 0.2])}),
    ("Bernoulli", {"logits": T([0.3, -2.0])}, "Bernoulli", {"logits": T([1.0, 0.5])}),
    ("Bernoulli", {"probs": T([0.0, 0.3, 1.0, 0.3])}, "Poisson", {"rate": T([1.0, 0.5, 1.0, 0.0])}),
    ("Binomial", {"total_count": 3, "probs": T([0.0, 0.3, 0.3, 0.7])},
     "Binomial", {"total_count": 3, "probs": T([0.0, 0.5, 0.0, 0.2])}),
    ("Binomial", {"total_count": T([4.0, 3.0]), "probs": T([0.2, 0.3])},
     "Binomial", {"total_count": 3, "probs": T([0.5, 0.5])}),
    ("Categorical", {"probs": T([[0.0, 0.3, 0.7], [0.2, 0.3, 0.5]])},
     "Categorical", {"probs": T([[0.2, 0.0, 0.8], [0.1, 0.1, 0.8]])}),
    ("Categorical", {"logits": T([0.3, -1.0, 2.0])},
     "Categorical", {"logits": T([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])}),
    ("OneHotCategorical", {"probs": T([[0.0, 0.3, 0.7], [0.2, 0.3, 0.5]])},
     "OneHotCategorical", {"probs": T([[0.2, 0.0, 0.8], [0.1, 0.1, 0.8]])}),
    ("Geometric", {"probs": T([1.0, 0.3, 0.5, 0.9])},
     "Geometric", {"probs": T([0.5, 0.5, 1.0, 0.05])}),
    ("Poisson", {"rate": T([0.3, 1.0, 0.3, 4.0])}, "Poisson", {"rate": T([0.5, 0.0, 2.0, 4.5])}),
    ("Poisson", {"rate": T([0.3, 2.0])}, "Bernoulli", {"probs": T([0.0, 0.5])}),
    ("Poisson", {"rate": T([0.3, 2.0])}, "Binomial", {"total_count": 3, "probs": T([0.1, 0.5])}),
]


@pytest.mark.parametrize("p_name,p_kwargs,q_name,q_kwargs", KL_CASES,
                         ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(KL_CASES)])
def test_kl_against_torch(p_name, p_kwargs, q_name, q_kwargs):
    p, tp = _make(p_name, p_kwargs)
    q, tq = _make(q_name, q_kwargs)
    _close(ed.kl_divergence(p, q), td.kl_divergence(tp, tq))


def _message(error):
    text = str(error).replace("torch.", "ember.")
    return re.sub(r"\s+", " ", text)


ERROR_CASES = [
    ("Bernoulli", {}),
    ("Bernoulli", {"probs": 0.3, "logits": 0.1}),
    ("Bernoulli", {"probs": T([1.2, 0.5])}),
    ("Binomial", {"total_count": 3}),
    ("Binomial", {"total_count": T([-1.0]), "probs": T([0.5])}),
    ("Binomial", {"total_count": T([1.5]), "probs": T([0.5])}),
    ("Categorical", {"probs": T(0.5)}),
    ("Categorical", {"logits": T(0.5)}),
    ("Categorical", {"probs": T([0.5, -0.1])}),
    ("Categorical", {"logits": T([0.5, math.nan])}),
    ("OneHotCategorical", {"probs": T([0.5, -0.1])}),
    ("OneHotCategorical", {}),
    ("Geometric", {"probs": T([0.0, 0.5])}),
    ("Geometric", {"probs": T([1.5])}),
    ("Geometric", {"logits": T([0.2]), "probs": T([0.5])}),
    ("Multinomial", {"total_count": T(5.0), "probs": T([0.5, 0.5])}),
    ("Multinomial", {"total_count": 2.5, "probs": T([0.5, 0.5])}),
    ("Multinomial", {"total_count": 3, "probs": T([0.5, -0.1])}),
    ("NegativeBinomial", {"total_count": T([3.0]), "probs": T([1.0])}),
    ("NegativeBinomial", {"total_count": T([-3.0]), "probs": T([0.1])}),
    ("NegativeBinomial", {"total_count": T([3.0])}),
    ("Poisson", {"rate": T([-1.0])}),
    ("LogitRelaxedBernoulli", {"temperature": T(0.5)}),
    ("RelaxedBernoulli", {"temperature": T(0.3), "probs": T([1.5])}),
    ("ExpRelaxedCategorical", {"temperature": T(0.3), "probs": T([0.5, -0.1])}),
    ("RelaxedOneHotCategorical", {"temperature": T(0.3), "probs": T(0.5)}),
]


@pytest.mark.parametrize("name,kwargs", ERROR_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ERROR_CASES)])
def test_constructor_errors_against_torch(name, kwargs):
    ours, theirs = _classes(name)
    with pytest.raises(Exception) as expected:
        theirs(**{k: _build(torch, v) for k, v in kwargs.items()})
    with pytest.raises(expected.type) as got:
        ours(**{k: _build(ember, v) for k, v in kwargs.items()})
    assert _message(got.value) == _message(expected.value)


CALL_ERROR_CASES = [
    ("Bernoulli", {"probs": T([0.3])}, "log_prob", T([0.5])),
    ("Binomial", {"total_count": T([3.0, 5.0]), "logits": T([0.2, 0.5])}, "log_prob",
     T([4.0, 2.0])),
    ("Binomial", {"total_count": T([3.0, 5.0]), "probs": T([0.2, 0.5])}, "entropy", None),
    ("Binomial", {"total_count": T([3.0, 5.0]), "probs": T([0.2, 0.5])},
     "enumerate_support", None),
    ("Categorical", {"probs": T(CATEGORICAL_PROBS)}, "log_prob", T([0, 3], "int64")),
    ("OneHotCategorical", {"probs": T(CATEGORICAL_PROBS)}, "log_prob", T([[1.0, 1.0, 0.0]])),
    ("Multinomial", {"total_count": 5, "probs": T([0.5, 0.5])}, "log_prob", T([3.0, 4.0])),
    ("Multinomial", {"total_count": 5, "probs": T([0.5, 0.5])}, "mode", None),
    ("Poisson", {"rate": T([1.0, 2.0])}, "log_prob", T([-1.0, 1.0])),
    ("Poisson", {"rate": T([1.0, 2.0])}, "entropy", None),
    ("Geometric", {"probs": T([0.5])}, "log_prob", T([1.5])),
    ("NegativeBinomial", {"total_count": T([2.0]), "probs": T([0.5])}, "entropy", None),
]


@pytest.mark.parametrize("name,kwargs,method,arg", CALL_ERROR_CASES,
                         ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CALL_ERROR_CASES)])
def test_call_errors_against_torch(name, kwargs, method, arg):
    ours, theirs = _make(name, kwargs)

    def call(dist, lib):
        attr = getattr(dist, method)
        return attr(_build(lib, arg)) if arg is not None else attr() if callable(attr) else attr

    with pytest.raises(Exception) as expected:
        call(theirs, torch)
    with pytest.raises(expected.type) as got:
        call(ours, ember)
    assert _message(got.value) == _message(expected.value)


def test_binomial_kl_error_against_torch():
    p, tp = _make("Binomial", {"total_count": T([2.0, 3.0]), "probs": T([0.2, 0.3])})
    q, tq = _make("Binomial", {"total_count": 3, "probs": T([0.5, 0.5])})
    with pytest.raises(NotImplementedError) as expected:
        td.kl_divergence(tp, tq)
    with pytest.raises(NotImplementedError) as got:
        ed.kl_divergence(p, q)
    assert str(got.value) == str(expected.value)


def test_registered_pairs_match_torch():
    mine = {"Bernoulli", "Binomial", "Categorical", "OneHotCategorical", "Geometric",
            "Multinomial", "NegativeBinomial", "Poisson", "LogitRelaxedBernoulli",
            "RelaxedBernoulli", "ExpRelaxedCategorical", "RelaxedOneHotCategorical",
            "OneHotCategoricalStraightThrough"}
    from ember.distributions.kl import _KL_REGISTRY
    expected = {(p.__name__, q.__name__) for p, q in td.kl._KL_REGISTRY if p.__name__ in mine}
    got = {(p.__name__, q.__name__) for p, q in _KL_REGISTRY if p.__name__ in mine}
    assert got == expected


def _make_with_grad(name, kwargs):
    """Both distributions, with every float tensor parameter a leaf requiring grad."""
    ours, theirs = _classes(name)
    leaves = {}
    for key, value in kwargs.items():
        if isinstance(value, T) and value.dtype == "float64" and key != "total_count":
            leaves[key] = (_build(ember, value).requires_grad_(),
                           _build(torch, value).requires_grad_())
    args = [{k: leaves[k][i] if k in leaves else _build(lib, v) for k, v in kwargs.items()}
            for i, lib in enumerate((ember, torch))]
    return ours(**args[0]), theirs(**args[1]), leaves


@pytest.mark.parametrize("name,kwargs,value", CASES, ids=IDS)
def test_log_prob_gradients_against_torch(name, kwargs, value):
    ours, theirs, leaves = _make_with_grad(name, kwargs)
    if not leaves:
        return
    got = ours.log_prob(_build(ember, value)).sum()
    expected = theirs.log_prob(_build(torch, value)).sum()
    names = sorted(leaves)
    got_grads = ember.autograd.grad(got, [leaves[k][0] for k in names], allow_unused=True)
    expected_grads = torch.autograd.grad(expected, [leaves[k][1] for k in names],
                                         allow_unused=True)
    for g, e in zip(got_grads, expected_grads):
        if e is None:
            assert g is None or not bool(g.ne(0).any())
        else:
            _close(g, e)
