"""Optimizer flag combinations against PyTorch's: every ``torch.optim`` optimizer under each
foreach x differentiable x fused x capturable setting on CPU float32 parameters (which raise,
where, with what), and foreach/fused steps over mixed dtypes, a sparse gradient and a
complex parameter (the error, or the values after two steps). Skipped without PyTorch."""

import inspect
import itertools
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

NAMES = ["Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "ASGD", "LBFGS",
         "NAdam", "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam", "Muon"]
VALUES = [[1.0, -2.0], [0.5, 0.25]]
GRADS = [[0.3, -0.1], [0.2, 0.4]]


def _params(lib, case, graph=False):
    """Parameters with gradients: float32 (non-leaf clones under ``graph``), or a float32
    one beside a float64, float16 or complex64 one, or one with a sparse gradient."""
    dtypes = {"mixed64": [lib.float32, lib.float64], "mixed16": [lib.float32, lib.float16],
              "complex": [lib.float32, lib.complex64]}.get(case, [lib.float32])
    ps = [lib.tensor(VALUES, dtype=d, requires_grad=True) for d in dtypes]
    if graph:
        ps = [p.clone() for p in ps]
    for p in ps:
        g = lib.tensor(GRADS, dtype=p.dtype)
        p.grad = g * (1 + 0.5j) if p.is_complex() else g
    if case == "sparse":
        ps[0].grad = lib.sparse_coo_tensor([[1]], lib.tensor([[0.2, 0.4]]), (2, 2))
    return ps


def _outcome(lib, name, flags, case="plain", steps=1):
    """('ctor' or 'step', error type, message) where the optimizer raises, else ('ok', the
    parameters' values as float64 lists, complex as (re, im) pairs)."""
    cls = getattr(lib.optim, name)
    accepted = inspect.signature(cls.__init__).parameters
    options = {k: v for k, v in flags.items() if k in accepted}
    if name == "SGD":
        options.update(lr=0.01, momentum=0.9)
    ps = _params(lib, case, graph=bool(options.get("differentiable")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            opt = cls(ps, **options)
        except Exception as e:
            return ("ctor", type(e).__name__, str(e).replace("torch.", "ember."))
        try:
            for _ in range(steps):
                if name == "LBFGS":
                    opt.step(lambda: sum((p.abs() ** 2).sum().float() for p in ps))
                else:
                    opt.step()
        except Exception as e:
            return ("step", type(e).__name__, str(e).replace("torch.", "ember."))
    return ("ok", [(lib.view_as_real(p.detach()) if p.is_complex() else p.detach())
                   .double().tolist() for p in ps])


FLAGS = [dict(foreach=fe, differentiable=df, fused=fu, capturable=cap)
         for fe, df, fu, cap in itertools.product([True, None, False], [True, False],
                                                  [True, None], [True, False])]


def _same(ours, theirs):
    """The same error, or values equal to float32 rounding."""
    if ours[0] == theirs[0] == "ok":
        return all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(ours[1], theirs[1]))
    return ours == theirs


@pytest.mark.parametrize("name", NAMES)
def test_flag_combinations_raise_as_torch(name):
    bad = []
    for flags in FLAGS:
        ours, theirs = _outcome(ember, name, flags), _outcome(torch, name, flags)
        if not _same(ours, theirs):
            bad.append((flags, ours, theirs))
    assert not bad, bad


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", ["mixed64", "mixed16", "sparse", "complex"])
def test_foreach_and_fused_over_awkward_params(name, case):
    bad = []
    for foreach, fused in [(True, None), (None, None), (False, None), (None, True)]:
        flags = dict(foreach=foreach, fused=fused)
        ours = _outcome(ember, name, flags, case, steps=2)
        theirs = _outcome(torch, name, flags, case, steps=2)
        if ours[0] == theirs[0] == "ok" and case == "mixed16":
            ok = all(np.allclose(a, b, rtol=2e-3, atol=1e-3) for a, b in zip(ours[1], theirs[1]))
        else:
            ok = _same(ours, theirs)
        if not ok:
            bad.append((flags, ours, theirs))
    assert not bad, bad


@pytest.mark.parametrize("name", ["Adam", "Adagrad", "Adamax", "ASGD", "RMSprop"])
def test_foreach_graph_refusal_without_grads_or_with_sparse(name):
    """Adagrad and Adamax assert even with no gradient (and before a sparse one's error);
    the others step nothing, or raise their sparse gradient error first."""
    for case in ("nograd", "sparse"):
        outcomes = []
        for lib in (ember, torch):
            ps = _params(lib, case, graph=True)
            if case == "nograd":
                ps[0].grad = None
            opt = getattr(lib.optim, name)(ps, foreach=True, differentiable=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    opt.step()
                    outcomes.append("ok")
                except Exception as e:
                    outcomes.append((type(e).__name__, str(e)))
        assert outcomes[0] == outcomes[1], (case, outcomes)


@pytest.mark.parametrize("name", ["SGD", "Adagrad", "Adam"])
@pytest.mark.parametrize("order", ["complex_first", "complex_later", "first_without_grad"])
def test_fused_complex_param_error_by_position(name, order):
    """SGD's and Adagrad's fused steps check only the first parameter with a gradient for a
    floating-point dtype; Adam's check them all."""
    outcomes = []
    for lib in (ember, torch):
        ps = [lib.ones(2, dtype=lib.float32, requires_grad=True),
              lib.ones(2, dtype=lib.complex64, requires_grad=True)]
        if order == "complex_first":
            ps.reverse()
        for p in ps:
            p.grad = lib.ones_like(p)
        if order == "first_without_grad":
            ps[0].grad = None
        try:
            getattr(lib.optim, name)(ps, lr=0.1, fused=True).step()
            outcomes.append(("ok",))
        except Exception as e:
            outcomes.append((type(e).__name__, str(e).replace("torch.", "ember.")))
        outcomes[-1] += (ps[0].detach().real.tolist(),)
    assert outcomes[0] == outcomes[1]
