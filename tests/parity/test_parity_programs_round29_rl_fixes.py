"""What the reinforcement-learning and structured-prediction programs of round 29
(test_parity_programs_round29_rl.py and its _returns and _structured siblings) found, each
pinned against PyTorch: gradcheck runs a vector-Jacobian product twice over the same graph, so a
custom Function whose backward draws at random fails with torch's "Backward is not reentrant"
GradcheckError (or False, or passes within ``nondet_tol``), and soft-DTW's backward that edits
the R chart it saved fails on the second pass with the in-place RuntimeError. A3C's shared
optimizers set ``state["step"] = torch.zeros(1)`` (a one-element count every optimizer steps
with) or a plain number (PyTorch's "API has changed" RuntimeError; ASGD counts on a copy).
Old actor-critic code's matrix products in PyTorch's deprecated beta-first forms
(``m.addmm(beta, [alpha,] a, b)``, ``torch.addmm(beta, m, [alpha,] a, b)``, addmv, addr, addbmm,
baddbmm) compute, differentiate and warn as PyTorch's do. pytorch-crf's ``torch.where`` on a
ByteTensor mask warns at every call under set_warn_always (not once per dtype combination), and
masked_scatter given such a mask warns, at every call, before it refuses it."""

import math
import re
import warnings

import numpy as np
import pytest

import ember
from tests.autograd.test_gradcheck_reentrant_round29 import drifting

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(call):
    try:
        return ("returned", call())
    except Exception as e:  # noqa: BLE001 - the error is the result compared
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("kwargs,expected", [
    ({}, "GradcheckError"), ({"raise_exception": False}, "returned"),
    ({"nondet_tol": 1e-2}, "returned"), ({"nondet_tol": 1e-6}, "GradcheckError")])
def test_gradcheck_non_reentrant_backward_like_torch(kwargs, expected):
    def run(lib):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        return _outcome(lambda: lib.autograd.gradcheck(drifting(lib).apply, (x,), **kwargs))
    ours, theirs = run(ember), run(torch)
    assert ours == theirs
    assert theirs[0] == expected


def _editing_soft_min(lib):
    """Soft-DTW's pattern on a 1-D chart: backward writes into the tensor it saved."""
    class SoftMinChart(lib.autograd.Function):
        @staticmethod
        def forward(ctx, d):
            r = lib.cumsum(d, 0)
            ctx.save_for_backward(r.clone())
            return r[-1:]

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            r[-1] = -math.inf
            return g.expand(r.shape) * lib.ones_like(r)
    return SoftMinChart


def test_gradcheck_backward_editing_saved_tensor_like_torch():
    def run(lib):
        d = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        return _outcome(lambda: lib.autograd.gradcheck(_editing_soft_min(lib).apply, (d,)))
    ours, theirs = run(ember), run(torch)
    assert theirs[0] == "RuntimeError"
    assert ours[0] == theirs[0]
    assert ours[1].replace("ember", "torch") == theirs[1]


def test_gradcheck_deterministic_function_still_passes():
    for lib in (ember, torch):
        d = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        assert lib.autograd.gradcheck(lambda t: lib.logcumsumexp(t, 0).exp(), (d,))


_OPTIMIZERS = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad", "RMSprop", "Adadelta",
               "ASGD", "Rprop", "Adafactor"]
_STEPS = {"int": lambda lib: 1, "float": lambda lib: 1.0, "zeros1": lambda lib: lib.ones(1),
          "scalar": lambda lib: lib.tensor(1.0)}


def _steps_with(lib, name, make_step):
    """Two steps of ``name`` after its step count is replaced, as A3C's SharedAdam/SharedRMSprop
    set ``state["step"] = torch.zeros(1)`` (or a plain 0) before training."""
    p = lib.nn.Parameter(lib.tensor([0.3, -0.2, 0.9]))
    opt = getattr(lib.optim, name)([p], lr=0.01)
    (p * p).sum().backward()
    opt.step()
    opt.state[p]["step"] = make_step(lib)
    for _ in range(2):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
    step = opt.state[p]["step"]
    return (p.detach().numpy().tolist(), type(step).__name__,
            step.tolist() if hasattr(step, "tolist") else step)


@pytest.mark.parametrize("kind", list(_STEPS))
@pytest.mark.parametrize("name", _OPTIMIZERS)
def test_optimizer_step_count_kinds_like_torch(name, kind):
    ours = _outcome(lambda: _steps_with(ember, name, _STEPS[kind]))
    theirs = _outcome(lambda: _steps_with(torch, name, _STEPS[kind]))
    assert ours[0] == theirs[0], (ours, theirs)
    if theirs[0] == "returned":
        (p_ours, *rest_ours), (p_theirs, *rest_theirs) = ours[1], theirs[1]
        assert rest_ours == rest_theirs
        assert p_ours == pytest.approx(p_theirs, rel=1e-6, abs=1e-7)
    else:
        assert ours == theirs


_PRODUCTS = {"addmm": ((2, 3), (2, 4), (4, 3)), "addbmm": ((2, 3), (2, 2, 4), (2, 4, 3)),
             "baddbmm": ((2, 2, 3), (2, 2, 4), (2, 4, 3)), "addmv": ((2,), (2, 4), (4,)),
             "addr": ((2, 3), (2,), (3,))}


def _beta_first_call(lib, name, kind, with_alpha):
    """``m.addmm(beta, [alpha,] a, b)``, its in-place form, or ``torch.addmm(beta, m, [alpha,]
    a, b)`` (old actor-critic code's linear layers): value, gradients and warnings."""
    shapes = _PRODUCTS[name]
    m, a, b = (lib.from_numpy(np.linspace(-1, 1, int(np.prod(s)), dtype=np.float32)
                              .reshape(s)).requires_grad_() for s in shapes)
    alpha = (2.0,) if with_alpha else ()
    lib.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if kind == "function":
                out = getattr(lib, name)(0.5, m, *alpha, a, b)
            elif kind == "method":
                out = getattr(m, name)(0.5, *alpha, a, b)
            else:
                out = getattr(m.detach().clone(), name + "_")(0.5, *alpha, a.detach(), b.detach())
    finally:
        lib.set_warn_always(False)
    grads = []
    if out.requires_grad:
        out.pow(2).sum().backward()
        grads = [t.grad.numpy().tolist() for t in (m, a, b)]
    messages = [(w.category.__name__, re.sub(r" \(Triggered internally at .*\)$", "",
                                              str(w.message))) for w in caught]
    return out.detach().numpy().tolist(), grads, messages


@pytest.mark.parametrize("with_alpha", [False, True])
@pytest.mark.parametrize("kind", ["method", "inplace", "function"])
@pytest.mark.parametrize("name", list(_PRODUCTS))
def test_beta_first_product_overloads_like_torch(name, kind, with_alpha):
    ours = _beta_first_call(ember, name, kind, with_alpha)
    theirs = _beta_first_call(torch, name, kind, with_alpha)
    np.testing.assert_allclose(np.asarray(ours[0]), np.asarray(theirs[0]), rtol=1e-6)
    assert len(ours[1]) == len(theirs[1])
    for g, e in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5)
    assert ours[2] == theirs[2] and len(theirs[2]) == 1


@pytest.mark.parametrize("call", [
    lambda lib, o: o(2, 2).addmm(o(2, 2), o(2, 2), o(2, 2)),
    lambda lib, o: o(2, 2).addmm(0.5, o(2, 2), o(2, 2), alpha=2),
    lambda lib, o: o(2, 2).addmv(0.5, o(2, 2), o(2), beta=2),
    lambda lib, o: o(2, 2).addr_(0.5, o(2), o(2), o(2)),
], ids=["three_tensors", "alpha_keyword_too", "beta_keyword_too", "addr_tensor_scalar"])
def test_beta_first_refusals_like_torch(call):
    def run(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _outcome(lambda: call(lib, lib.ones))
    ours, theirs = run(ember), run(torch)
    assert theirs[0] == "TypeError"
    assert ours == theirs


def test_where_uint8_condition_warns_at_every_call_under_warn_always():
    """pytorch-crf's ``torch.where(mask[i].unsqueeze(1), next_score, score)`` with a ByteTensor
    mask: PyTorch warns at each call under set_warn_always, whatever the dtypes seen before
    (ember's warning sat in the cached dtype rule: once per dtype combination)."""
    def count(lib):
        lib.set_warn_always(True)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                mask = lib.tensor([[1, 1, 0], [1, 0, 0]], dtype=lib.uint8)
                lib.where(mask, lib.ones(2, 3), lib.zeros(2, 3))
                lib.where(mask[:, 1].unsqueeze(1), lib.ones(2, 3), lib.zeros(2, 3))
                lib.where(mask[:, 1:2], 1.0, 0.0)
        finally:
            lib.set_warn_always(False)
        return [(w.category.__name__, re.sub(r" \(Triggered internally at .*\)$", "",
                                              str(w.message))) for w in caught]
    ours, theirs = count(ember), count(torch)
    assert ours == theirs and len(theirs) == 3


@pytest.mark.parametrize("inplace", [False, True])
def test_masked_scatter_uint8_mask_warns_then_refuses_like_torch(inplace):
    def run(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x, mask = lib.zeros(2, 3), lib.ones(2, 3, dtype=lib.uint8)
            fn = x.masked_scatter_ if inplace else x.masked_scatter
            outcome = _outcome(lambda: fn(mask, lib.arange(6.0)))
        return outcome, [re.sub(r" \(Triggered internally at .*\)$", "", str(w.message))
                         for w in caught]
    ours, theirs = run(ember), run(torch)
    assert ours == theirs and theirs[0][0] == "RuntimeError" and len(theirs[1]) == 1
