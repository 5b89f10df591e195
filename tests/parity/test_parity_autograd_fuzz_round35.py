"""Random programs over autograd's user-facing API, run in ember and torch side by side.

Each program is ``_program(seed, lib)``: a seeded generator draws, step by step, one scenario
(a custom ``autograd.Function`` with random saving/marking/returned grads, tensor and node
hooks, ``autograd.grad`` with allow_unused/materialize_grads/grad_outputs/create_graph,
``backward(inputs=...)`` and retain_graph, saved-tensor hooks, anomaly mode, grad-mode
nesting, checkpoint, forward-mode AD, ``.grad`` assignment and leaf rules) with random
parameters. The draws never depend on results, so the same program runs in both libraries;
everything observable (values, dtype, shape, requires_grad, is_leaf, node names, errors'
type and first message line) is recorded and the two records must agree.
"""

import random
import warnings

import numpy as np
import pytest

import ember
from tests.parity._autograd_fuzz_round35_a import (_Rec, _anomaly, _checkpoint,
                                                   _custom_function, _dirty_function,
                                                   _double_backward, _err, _forward_ad,
                                                   _grad_api, _grad_assign, _grad_modes, _hooks,
                                                   _saved_hooks)
from tests.parity._autograd_fuzz_round35_b import (_backward_api, _checkpoint_more,
                                                   _custom_function_more, _edge_cases,
                                                   _forward_ad_more,
                                                   _func_transforms, _function_jvp_vmap,
                                                   _functional_api,
                                                   _grad_modes_more, _graph_api, _inplace_hooks,
                                                   _misc_api, _saved_hooks_more, _view_outputs)

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


_SCENARIOS = [_custom_function, _custom_function, _custom_function, _dirty_function, _hooks,
              _hooks, _grad_api, _grad_api, _saved_hooks, _anomaly, _grad_modes, _checkpoint,
              _forward_ad, _grad_assign, _double_backward, _function_jvp_vmap, _view_outputs,
              _misc_api, _misc_api, _checkpoint_more, _inplace_hooks, _inplace_hooks,
              _saved_hooks_more, _custom_function_more, _custom_function_more,
              _forward_ad_more, _forward_ad_more, _functional_api, _graph_api, _graph_api,
              _grad_modes_more, _grad_modes_more, _backward_api, _backward_api, _edge_cases,
              _edge_cases, _edge_cases, _func_transforms, _func_transforms]


def _program(seed, lib):
    rng = random.Random(seed)
    rec = _Rec(lib)
    for i in range(rng.randint(1, 3)):
        scen = rng.choice(_SCENARIOS)
        rec("scenario", lambda s=scen: s.__name__)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scen(rng, lib, rec)
        except Exception as exc:  # noqa: BLE001 - an escaping error is compared too
            rec.log.append(("escaped", _err(exc)))
    return rec.log


def _same(a, b):
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.shape == b.shape
                and np.allclose(a, b, rtol=1e-4, atol=1e-4, equal_nan=True))
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def run_program(seed):
    """None when torch and ember agree, else (step, torch's, ember's)."""
    want, got = _program(seed, torch), _program(seed, ember)
    for (tw, w), (tg, g) in zip(want, got):
        if tw != tg or not _same(w, g):
            return (tw, w, g)
    if len(want) != len(got):
        return ("length", len(want), len(got))
    return None


# --- the cases the fuzzing found, each a small program -------------------------------------------

def _batched_grad_frees(lib):
    a = lib.ones(2, 3, requires_grad=True)
    y = (a * a).sum(0)
    lib.autograd.grad(y, a, lib.ones(2, 3), is_grads_batched=True)
    return y.sum().backward()


def _materialized_with_graph(lib):
    a, u = lib.ones(3, requires_grad=True), lib.ones(2, requires_grad=True)
    return lib.autograd.grad((a * a).sum(), [a, u], materialize_grads=True, create_graph=True)


def _capture_before_prehook(lib):
    a = lib.ones(3, requires_grad=True)
    b = a * 2.0
    c = b.sin()
    b.grad_fn.register_prehook(lambda go: (go[0] * 2,))
    return lib.autograd.grad(c.sum(), [a, b])


def _backward_inputs_runs_node(lib):
    log = []
    a = lib.ones(3, requires_grad=True)
    b = a * a
    b.grad_fn.register_hook(lambda gi, go: log.append((gi, go)))
    (b * 3.0).sum().backward(inputs=[b])
    return log, _record(lib, lambda: (b * 1.0).sum().backward())


def _anomaly_without_trace(lib):
    class NanGrad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")
    y = NanGrad.apply(lib.ones(3, requires_grad=True)).sum()
    rec = _Rec(lib)

    def run():
        with lib.autograd.detect_anomaly():
            y.backward()
    rec("bw", run)
    return rec.log


def _pack_hook_in_place(lib):
    a = lib.ones(3, requires_grad=True) * 1.0
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t.mul_(2.0), lambda p: p):
        return a * a


def _unpack_dual_levels(lib):
    fwAD = lib.autograd.forward_ad
    x = lib.ones(2)
    outside = fwAD.unpack_dual(x, level=0).tangent
    with fwAD.dual_level():
        d = fwAD.make_dual(x, lib.ones(2))
        return outside, fwAD.unpack_dual(x, level=3).tangent, _record(
            lib, lambda: fwAD.unpack_dual(d, level=3))


def _too_few_grads(lib):
    a = lib.ones(2, requires_grad=True)
    y = a * 2
    return (_record(lib, lambda: lib.autograd.backward([y, y.sum()], [lib.ones(2)])),
            _record(lib, lambda: lib.autograd.grad([y.sum()], a, [])))


def _grad_variables(lib):
    a = lib.ones(2, requires_grad=True)
    rec = _Rec(lib)
    rec("bw", lambda: lib.autograd.backward((a * 2).sum(), grad_variables=lib.tensor(3.0)))
    rec("both", lambda: lib.autograd.backward((a * 2).sum(), lib.tensor(1.0),
                                              grad_variables=lib.tensor(1.0)))
    return rec.log, a.grad


def _grad_requiring_grad(lib):
    a = lib.ones(3, requires_grad=True)
    g = lib.ones(3, requires_grad=True)
    a.grad = g
    (a * 2).sum().backward()
    return a.grad is g, a.grad


def _record(lib, fn):
    rec = _Rec(lib)
    rec("r", fn)
    return rec.log


_CASES = {
    "batched_grad_frees": _batched_grad_frees, "materialized_with_graph": _materialized_with_graph,
    "capture_before_prehook": _capture_before_prehook,
    "backward_inputs_runs_node": _backward_inputs_runs_node,
    "anomaly_without_trace": _anomaly_without_trace, "pack_hook_in_place": _pack_hook_in_place,
    "unpack_dual_levels": _unpack_dual_levels, "too_few_grads": _too_few_grads,
    "grad_variables": _grad_variables, "grad_requiring_grad": _grad_requiring_grad,
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_found_case_agrees(case):
    want = _record(torch, lambda: _CASES[case](torch))
    got = _record(ember, lambda: _CASES[case](ember))
    assert len(want) == len(got) and all(
        tw == tg and _same(w, g) for (tw, w), (tg, g) in zip(want, got)), (want, got)


def test_a_captured_gradient_is_hooked_alike():
    # PyTorch's autograd.grad gives b's gradient through b's tensor hook when only b is asked
    # for, and without it when a (below b) is asked for too: ember hooks it both times
    a = ember.ones(3, requires_grad=True)
    b = a * 2.0
    c = b * 5.0
    b.register_hook(lambda g: g * 3)
    (only,) = ember.autograd.grad(c.sum(), [b], retain_graph=True)
    _, both = ember.autograd.grad(c.sum(), [a, b])
    assert only.tolist() == both.tolist() == [15.0] * 3


_KNOWN = {}
_SEEDS = [s for s in range(400) if s not in _KNOWN]


@pytest.mark.parametrize("chunk", range(4))
def test_random_autograd_programs_agree(chunk):
    bad = [(s, run_program(s)) for s in _SEEDS[chunk::4]]
    bad = [b for b in bad if b[1] is not None]
    assert not bad, bad[:3]


if __name__ == "__main__":
    import collections
    import sys
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    buckets = collections.defaultdict(list)
    for s in range(n):
        r = run_program(s)
        if r is not None:
            buckets[str(r)[:300]].append(s)
    for k, v in sorted(buckets.items(), key=lambda kv: -len(kv[1])):
        print(len(v), v[:8], k)
    print("mismatching programs:", sum(map(len, buckets.values())), "of", n)
