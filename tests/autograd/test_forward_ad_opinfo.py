"""Forward-mode AD over every differentiable OpInfo (tests/ops/opdb/), by construction.

For each float64 grad sample, the tangents that dual tensors carry through the op (``J t`` for
seeded random tangents ``t`` of every input that requires grad) must match reverse mode:
``Re<u, J t> == sum_i Re<J_i^H u, t_i>`` for random cotangents ``u`` (PyTorch's gradient
convention makes this hold for real and complex tensors alike). Reverse mode is checked
numerically by tests/ops/test_opinfo.py, so this ties forward mode to the finite differences.
``ember.func.jvp`` and the ops' in-place methods on dual tensors are checked against the same
tangents. (ember's ``gradcheck(..., check_forward_ad=True)`` does PyTorch's check too, one
input element at a time: too slow to run over every op.)
"""

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD
from ember.ops._registry import REGISTRY

from tests.ops.opdb import OPDB
from tests.ops.opdb.core import replace_tensors, tensor_args

PROJECTIONS = 3         # random cotangents per sample

# Ops that refuse forward AD as PyTorch's kernels do (``Op.refuse_forward_ad``): always, or
# (a function deciding per call) for some calls only, which must then refuse in its words.
UNSUPPORTED = {name for name, op in REGISTRY.items() if isinstance(op.forward_ad_refusal, str)}
SOMETIMES = {name for name, op in REGISTRY.items() if callable(op.forward_ad_refusal)}


def _cases():
    return [pytest.param(info, id=info.name) for info in OPDB
            if "grad" not in info.skips and info.grad and ember.float64 in info.dtypes]


def _grad_samples(info):
    ember.manual_seed(0)
    make = info.grad_samples or info.sample_inputs
    return list(make(ember.float64, True))


def _random_like(t, rng):
    values = rng.standard_normal(tuple(t.shape))
    if t.is_complex():
        values = values + 1j * rng.standard_normal(tuple(t.shape))
    return ember.tensor(values, dtype=t.dtype)


def _floating_outputs(result):
    outs = result if isinstance(result, (tuple, list)) else (result,)
    return [o if isinstance(o, ember.Tensor) and (o.is_floating_point() or o.is_complex())
            else None for o in outs]


def _call(fn, sample, tensors):
    s = replace_tensors(sample, tensors)
    ember.manual_seed(0)            # random ops (dropout) draw the same mask each time
    return fn(s.input, *s.args, **s.kwargs)


def _forward_tangents(fn, sample, tangents):
    """The op's outputs and their tangents with the grad inputs made dual."""
    args = tensor_args(sample)
    with fwAD.dual_level():
        duals = iter(tangents)
        tensors = [fwAD.make_dual(t.detach(), next(duals)) if t.requires_grad else t
                   for t in args]
        outs = _floating_outputs(_call(fn, sample, tensors))
        unpacked = [None if o is None else fwAD.unpack_dual(o) for o in outs]
        return [None if u is None else (u.primal.detach(), u.tangent) for u in unpacked]


def _vdot(a, b):
    """Re(sum(conj(a) * b)) of two tensors (or 0 when either is None)."""
    if a is None or b is None:
        return 0.0
    a, b = (np.asarray(t.detach().resolve_conj().resolve_neg().numpy()) for t in (a, b))
    return float(np.real(np.vdot(a.astype(np.complex128), b.astype(np.complex128))))


def _check_sample(fn, sample, rng):
    inputs = [t for t in tensor_args(sample) if t.requires_grad]
    tangents = [_random_like(t, rng) for t in inputs]
    forward = _forward_tangents(fn, sample, tangents)
    outs = _floating_outputs(_call(fn, sample, tensor_args(sample)))
    assert len(forward) == len(outs), sample
    for k, (o, f) in enumerate(zip(outs, forward)):
        if o is None:
            assert f is None, f"{sample}: output {k}"
            continue
        tangent = f[1]
        if tangent is not None:
            assert tangent.shape == o.shape, f"{sample}: output {k} tangent shape"
            assert tangent.dtype is o.dtype, f"{sample}: output {k} tangent dtype"
            # a plain tensor, or a lazy conjugated or negated view (PyTorch's conj/neg bits)
            assert type(tangent) is ember.Tensor or tangent.is_conj() or tangent.is_neg(), \
                f"{sample}: output {k} tangent type"
    diff = [(o, f[1]) for o, f in zip(outs, forward) if o is not None and o.requires_grad]
    if not diff:
        for f in forward:
            assert f is None or f[1] is None or not f[1].abs().sum().item(), sample
        return
    for _ in range(PROJECTIONS):
        us = [_random_like(o, rng) for o, _ in diff]
        grads = ember.autograd.grad([o for o, _ in diff], inputs, us, retain_graph=True,
                                    allow_unused=True)
        reverse = sum(_vdot(g, t) for g, t in zip(grads, tangents))
        forward_side = sum(_vdot(u, t) for u, (_, t) in zip(us, diff))
        assert np.isclose(forward_side, reverse, rtol=1e-6, atol=1e-8), \
            f"{sample}: <u, J t> forward {forward_side} != reverse {reverse}"


def _without_overlap(sample):
    """The sample with a contiguous copy of each input whose elements share memory (an
    expanded view): PyTorch refuses to give such a primal a tangent, and so does ember."""
    def fix(t):
        if any(s == 0 and n > 1 for n, s in zip(t.shape, t.stride())):
            return t.detach().contiguous().requires_grad_(t.requires_grad)
        return t
    return replace_tensors(sample, [fix(t) for t in tensor_args(sample)])


@pytest.mark.parametrize("info", _cases())
def test_forward_ad_matches_reverse(info):
    fn = info.function()
    rng = np.random.default_rng(0)
    for sample in _grad_samples(info):
        if not any(t.requires_grad for t in tensor_args(sample)):
            continue
        if info.name in UNSUPPORTED:
            with pytest.raises(NotImplementedError, match="Trying to use forward AD with"):
                _check_sample(fn, _without_overlap(sample), rng)
        elif info.name in SOMETIMES:
            _check_or_refused(fn, _without_overlap(sample), rng)
        else:
            _check_sample(fn, _without_overlap(sample), rng)


def _check_or_refused(fn, sample, rng):
    """A sample of an op that refuses forward AD for some calls: right tangents, or the
    refusal that the op's declaration gives for these operands."""
    try:
        _check_sample(fn, sample, rng)
    except NotImplementedError as e:
        assert str(e).startswith("Trying to use forward AD with "), sample


def _func_jvp_tangents(fn, sample, tangents):
    """The floating outputs' tangents by ``ember.func.jvp`` (run in reverse mode)."""
    args = tensor_args(sample)
    inputs = [t.detach() for t in args if t.requires_grad]

    def f(*primals):
        it = iter(primals)
        out = _call(fn, sample, [next(it) if t.requires_grad else t for t in args])
        return tuple(o for o in _floating_outputs(out) if o is not None)
    return ember.func.jvp(f, tuple(inputs), tuple(tangents))[1]


@pytest.mark.parametrize("info", [c for c in _cases()
                                  if c.values[0].name not in UNSUPPORTED | SOMETIMES])
def test_func_jvp_matches_dual_tensors(info):
    """``ember.func.jvp`` and dual tensors compute the same tangents (both by a double vjp,
    through different machinery: the engine's traced function, and dual dispatch)."""
    fn = info.function()
    rng = np.random.default_rng(1)
    for sample in _grad_samples(info)[:2]:
        sample = _without_overlap(sample)
        if not any(t.requires_grad for t in tensor_args(sample)):
            continue
        tangents = [_random_like(t, rng) for t in tensor_args(sample) if t.requires_grad]
        dual = [f for f in _forward_tangents(fn, sample, tangents) if f is not None]
        functional = _func_jvp_tangents(fn, sample, tangents)
        assert len(dual) == len(functional), sample
        for (primal, tangent), got in zip(dual, functional):
            want = ember.zeros_like(primal) if tangent is None else tangent
            ember.testing.assert_close(got, want, msg=lambda m, s=sample: f"{s}:\n{m}")


def _inplace_cases():
    return [c for c in _cases() if REGISTRY[c.values[0].name].inplace
            and c.values[0].name not in UNSUPPORTED | SOMETIMES]


def _inplace_tangent(info, sample, tangents):
    """``self``'s tangent after the op's in-place method, with the same operands dual."""
    op = REGISTRY[info.name]
    method = getattr(ember.Tensor, (op.method_name or op.short_name) + "_")
    args = tensor_args(sample)
    with fwAD.dual_level():
        duals = iter(tangents)
        tensors = [fwAD.make_dual(t.detach().clone(), next(duals)) if t.requires_grad
                   else t.clone() for t in args]
        s = replace_tensors(sample, tensors)
        ember.manual_seed(0)
        returned = method(s.input, *s.args, **s.kwargs)
        assert returned is s.input
        primal, tangent = fwAD.unpack_dual(returned)
        return primal.detach(), tangent


@pytest.mark.parametrize("info", _inplace_cases())
def test_inplace_variant_tangent(info):
    """``x.op_(...)`` on dual tensors gives ``x`` the tangent that ``op(x, ...)`` has."""
    fn = info.function()
    rng = np.random.default_rng(2)
    for sample in _grad_samples(info):
        sample = _without_overlap(sample)
        if not isinstance(sample.input, ember.Tensor) or not sample.input.requires_grad:
            continue
        tangents = [_random_like(t, rng) for t in tensor_args(sample) if t.requires_grad]
        primal, want = _forward_tangents(fn, sample, tangents)[0]
        if primal.shape != sample.input.shape or primal.dtype is not sample.input.dtype:
            continue
        got_primal, got = _inplace_tangent(info, sample, [t.clone() for t in tangents])
        ember.testing.assert_close(got_primal, primal, equal_nan=True)
        ember.testing.assert_close(got, want, equal_nan=True,
                                   msg=lambda m, s=sample: f"{s}:\n{m}")
