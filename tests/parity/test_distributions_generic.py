"""Every example distribution against torch.distributions built from the same numbers:
shapes, flags, moments, entropy, log_prob of torch's own samples and its gradients, cdf and
icdf, enumerate_support, and kl_divergence for every pair torch registers."""

import importlib

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_close
import ember.distributions as D
from tests.distributions.examples import CASE_IDS, CASES, EXAMPLES

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

import torch.distributions as TD  # noqa: E402


class _Unconvertible(Exception):
    """A parameter (a nested distribution or transform) this module does not translate."""


def _to_torch(value):
    if isinstance(value, ember.Tensor):
        theirs = torch.from_numpy(np.array(value.detach().numpy()))
        return theirs.requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_torch(v) for v in value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    raise _Unconvertible(type(value).__name__)


def _pair(cls, params):
    """The example built by ember and by torch, with torch's copies of the leaves."""
    try:
        theirs_params = {k: _to_torch(v) for k, v in params.items()}
    except _Unconvertible as e:
        pytest.skip(f"parameter of type {e} is compared in the family's own tests")
    theirs_cls = getattr(importlib.import_module(cls.__module__.replace("ember", "torch", 1)),
                         cls.__name__)
    return cls(**params), theirs_cls(**theirs_params), theirs_params


def _close(ours, theirs, rtol=1e-6, atol=1e-8):
    """Assert two tensors (or values) match in shape and values (float32: a few ulps)."""
    assert_close(ours, theirs, rtol, atol, float32=(1e-5, 1e-6))


def _both_or_neither(fn_ours, fn_theirs):
    """Both results, or skip when both raise NotImplementedError; one raising fails."""
    try:
        theirs = fn_theirs()
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            fn_ours()
        pytest.skip("not implemented in torch either")
    return fn_ours(), theirs


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_shapes_and_flags_match(cls, params):
    ours, theirs, _ = _pair(cls, params)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    assert ours.has_rsample == theirs.has_rsample
    assert ours.has_enumerate_support == theirs.has_enumerate_support
    assert set(ours.arg_constraints) == set(theirs.arg_constraints)
    assert repr(ours.support).replace("ember.", "torch.") == repr(theirs.support)
    assert repr(ours).replace("ember.", "torch.") == repr(theirs)
    assert str(ours.sample().dtype).split(".")[1] == str(theirs.sample().dtype).split(".")[1]


# where torch is wrong and ember is not (test id -> why)
KNOWN_DIFFERENCES = {
    "Kumaraswamy-mode": "torch 2.13 gives nan for every Kumaraswamy's mode; ember gives "
                        "((a-1)/(ab-1))**(1/a) where a, b >= 1 and nan elsewhere",
}


@pytest.mark.parametrize("name", ["mean", "mode", "variance", "stddev"])
@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_moments_match(cls, params, name):
    if f"{cls.__name__}-{name}" in KNOWN_DIFFERENCES:
        pytest.skip(KNOWN_DIFFERENCES[f"{cls.__name__}-{name}"])
    ours, theirs, _ = _pair(cls, params)
    ours_value, theirs_value = _both_or_neither(lambda: getattr(ours, name),
                                                lambda: getattr(theirs, name))
    _close(ours_value, theirs_value)


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_entropy_matches(cls, params):
    ours, theirs, _ = _pair(cls, params)
    ours_value, theirs_value = _both_or_neither(ours.entropy, theirs.entropy)
    _close(ours_value, theirs_value, rtol=1e-5)


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_log_prob_and_its_gradients_match(cls, params):
    ours, theirs, theirs_params = _pair(cls, params)
    torch.manual_seed(0)
    values = theirs.sample((5,))
    ours_lp = ours.log_prob(ember.tensor(values.numpy()))
    theirs_lp = theirs.log_prob(values)
    _close(ours_lp, theirs_lp, rtol=1e-5)
    names = [k for k, v in params.items() if isinstance(v, ember.Tensor) and v.requires_grad]
    if not names:
        return
    ours_grads = ember.autograd.grad(ours_lp.sum(), [params[k] for k in names],
                                     allow_unused=True)
    theirs_grads = torch.autograd.grad(theirs_lp.sum(), [theirs_params[k] for k in names],
                                       allow_unused=True)
    for name, g_ours, g_theirs in zip(names, ours_grads, theirs_grads):
        if g_theirs is None:
            assert g_ours is None or not bool(g_ours.any()), name
        else:
            _close(g_ours, g_theirs, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_cdf_and_icdf_match(cls, params):
    ours, theirs, _ = _pair(cls, params)
    torch.manual_seed(1)
    values = theirs.sample((4,))
    ours_cdf, theirs_cdf = _both_or_neither(lambda: ours.cdf(ember.tensor(values.numpy())),
                                            lambda: theirs.cdf(values))
    _close(ours_cdf, theirs_cdf, rtol=1e-5, atol=1e-7)
    u = torch.rand((4,) + tuple(theirs.batch_shape), dtype=values.dtype)
    ours_icdf, theirs_icdf = _both_or_neither(lambda: ours.icdf(ember.tensor(u.numpy())),
                                              lambda: theirs.icdf(u))
    _close(ours_icdf, theirs_icdf, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_enumerate_support_matches(cls, params):
    ours, theirs, _ = _pair(cls, params)
    if not theirs.has_enumerate_support:
        pytest.skip("no enumerable support")
    for expand in (True, False):
        _close(ours.enumerate_support(expand), theirs.enumerate_support(expand))


def _kl_cases():
    """(p example, q example) for every pair of types torch registers a KL for."""
    by_name = {cls.__name__: (cls, dicts) for cls, dicts in EXAMPLES}
    cases, ids = [], []
    for type_p, type_q in TD.kl._KL_REGISTRY:
        if type_p.__name__ not in by_name or type_q.__name__ not in by_name:
            continue
        (cls_p, dicts_p), (cls_q, dicts_q) = by_name[type_p.__name__], by_name[type_q.__name__]
        for i, p in enumerate(dicts_p):
            for j, q in enumerate(dicts_q):
                cases.append((cls_p, p, cls_q, q))
                ids.append(f"{cls_p.__name__}-{i}-{cls_q.__name__}-{j}")
    return cases, ids


_KL_CASES, _KL_IDS = _kl_cases()


@pytest.mark.parametrize("cls_p,p,cls_q,q", _KL_CASES, ids=_KL_IDS)
def test_kl_divergence_matches(cls_p, p, cls_q, q):
    ours_p, theirs_p, _ = _pair(cls_p, p)
    ours_q, theirs_q, _ = _pair(cls_q, q)
    if ours_p.batch_shape != ours_q.batch_shape:
        pytest.skip("torch misplaces inf entries when the batch shapes broadcast")
    try:
        theirs = TD.kl_divergence(theirs_p, theirs_q)
    except (ValueError, RuntimeError, NotImplementedError, IndexError) as e:
        pytest.skip(f"torch refuses this pair: {e}")
    ours = D.kl_divergence(ours_p, ours_q)
    _close(ours, theirs, rtol=1e-5, atol=1e-7)
