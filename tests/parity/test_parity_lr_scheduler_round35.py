"""LR schedulers with tensor lrs vs PyTorch: ``get_lr()`` / ``_get_closed_form_lr()`` /
``get_last_lr()`` types, dtypes and exact values, ``state_dict`` round trips, and SWALR's
tensor ``swa_lr`` (cloned per group)."""

import importlib
import math
import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

LRS = ["float", "f64", "f32", "f16", "bf16"]


def _lr(mod, kind):
    if kind == "float":
        return 0.1
    dtype = {"f64": mod.float64, "f32": mod.float32, "f16": mod.float16,
             "bf16": mod.bfloat16}[kind]
    return mod.tensor(0.1, dtype=dtype)


def _schedulers(mod):
    L = mod.optim.lr_scheduler  # noqa: N806
    swa = importlib.import_module(mod.__name__ + ".optim.swa_utils")
    return {
        "lambda": lambda o: L.LambdaLR(o, lambda e: 0.9 ** e),
        "multiplicative": lambda o: L.MultiplicativeLR(o, lambda e: 0.9),
        "step": lambda o: L.StepLR(o, 2, 0.5),
        "multistep": lambda o: L.MultiStepLR(o, [1, 3], 0.5),
        "constant": lambda o: L.ConstantLR(o, 0.5, 2),
        "linear": lambda o: L.LinearLR(o, 0.5, 1.0, 3),
        "exponential": lambda o: L.ExponentialLR(o, 0.9),
        "polynomial": lambda o: L.PolynomialLR(o, 4, 2.0),
        "cosine": lambda o: L.CosineAnnealingLR(o, 2, 0.01),
        "warm_restarts": lambda o: L.CosineAnnealingWarmRestarts(o, 2, 2, 0.01),
        "cyclic": lambda o: L.CyclicLR(o, 0.01, 0.1, 2),
        "one_cycle": lambda o: L.OneCycleLR(o, 0.1, total_steps=10),
        "swalr": lambda o: swa.SWALR(o, 0.05, 2),
        "sequential": lambda o: L.SequentialLR(
            o, [L.ConstantLR(o, 0.5, 2), L.ExponentialLR(o, 0.9)], [2]),
        "chained": lambda o: L.ChainedScheduler([L.ConstantLR(o, 0.5, 2),
                                                 L.ExponentialLR(o, 0.9)]),
    }


def _desc(mod, v):
    if isinstance(v, mod.Tensor):
        return ("tensor", str(v.dtype).split(".")[-1], v.item())
    return (type(v).__name__ if type(v) in (float, int) else "scalar", float(v))


def _run(mod, name, kind, epoch_jump):
    p = mod.nn.Parameter(mod.zeros(2))
    opt = mod.optim.SGD([p], lr=_lr(mod, kind), momentum=0.9)
    make = _schedulers(mod)[name]
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = make(opt)
        for i in range(7):
            opt.step()
            if epoch_jump and i == 4 and name not in ("sequential", "chained", "cyclic",
                                                      "one_cycle", "swalr"):
                sched.step(5)
            else:
                sched.step()
            try:
                got = [_desc(mod, v) for v in sched.get_lr()]
            except NotImplementedError:
                got = "NotImplementedError"
            closed = ([_desc(mod, v) for v in sched._get_closed_form_lr()]
                      if hasattr(sched, "_get_closed_form_lr") else None)
            out.append((got, closed, [_desc(mod, v) for v in sched.get_last_lr()],
                        _desc(mod, opt.param_groups[0]["lr"])))
        state = sched.state_dict()
        out.append(sorted(k for k in state if k in ("base_lrs", "_last_lr")))
        out.append([_desc(mod, v) for v in state.get("base_lrs", [])])
        out.append([_desc(mod, v) for v in state.get("_last_lr", [])])
        p2 = mod.nn.Parameter(mod.zeros(2))
        opt2 = mod.optim.SGD([p2], lr=_lr(mod, kind), momentum=0.9)
        again = make(opt2)
        again.load_state_dict(state)
        out.append([_desc(mod, v) for v in getattr(again, "base_lrs", [])])
        out.append([_desc(mod, v) for v in again.get_last_lr()])
    return out


@pytest.mark.parametrize("kind", LRS)
@pytest.mark.parametrize("name", sorted(_schedulers(torch)))
def test_get_lr_types_and_values_match(name, kind):
    assert _run(ember, name, kind, False) == _run(torch, name, kind, False)


@pytest.mark.parametrize("kind", ["float", "f64", "f32"])
@pytest.mark.parametrize("name", ["step", "multistep", "exponential", "cosine", "linear",
                                  "polynomial", "constant"])
def test_closed_form_epoch_jump_matches(name, kind):
    assert _run(ember, name, kind, True) == _run(torch, name, kind, True)


@pytest.mark.parametrize("lr_kind", ["float", "f64", "f32", "f16"])
@pytest.mark.parametrize("swa_kind", ["float", "f64", "f32"])
def test_swalr_tensor_swa_lr(lr_kind, swa_kind):
    def run(mod):
        swa = importlib.import_module(mod.__name__ + ".optim.swa_utils")
        params = [mod.nn.Parameter(mod.zeros(2)) for _ in range(2)]
        opt = mod.optim.SGD([{"params": [p]} for p in params], lr=_lr(mod, lr_kind))
        swa_lr = _lr(mod, swa_kind) if swa_kind == "float" else \
            _lr(mod, swa_kind) * 0.5
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = swa.SWALR(opt, swa_lr, 3, "linear")
            groups = opt.param_groups
            same = [g["swa_lr"] is swa_lr for g in groups] + [groups[0]["swa_lr"]
                                                             is groups[1]["swa_lr"]]
            out = [same]
            for _ in range(5):
                opt.step()
                sched.step()
                out.append(([_desc(mod, v) for v in sched.get_lr()],
                            [_desc(mod, v) for v in sched.get_last_lr()]))
        return out
    expected = run(torch)
    if swa_kind != "float":
        assert expected[0] == [False, False, False]
    assert run(ember) == expected


def test_float_lr_get_lr_is_python_float():
    for mod in (torch, ember):
        p = mod.nn.Parameter(mod.zeros(2))
        opt = mod.optim.SGD([p], lr=0.1)
        sched = mod.optim.lr_scheduler.ExponentialLR(opt, 0.9)
        opt.step()
        sched.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = sched.get_lr()
        assert type(got[0]) is float and got[0] == 0.1 * 0.9 * 0.9
    assert math.isclose(got[0], 0.081)
