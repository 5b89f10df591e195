"""Random SWA/EMA programs run in ember and torch side by side (torch.optim.swa_utils).

A seeded generator builds a small float64 model (optionally BatchNorm, InstanceNorm with
running stats, int64/float32 buffers), an AveragedModel (default SWA, EMA/SWA avg_fn or
multi_avg_fn, a recording multi_avg_fn, custom avg_fn, use_buffers, device=), an SGD with one
or two groups (float or tensor lrs), optionally StepLR, and an SWALR (scalar/list swa_lr,
anneal_epochs, cos/linear or a bad strategy, last_epoch); it trains a few steps, updating the
average and the schedulers, then runs update_bn over tensor/list/tuple/dict/empty loaders.
After every step state dicts (incl. n_averaged), lrs, warnings and errors (type and message)
must agree.
"""

import random
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


class Div(Exception):
    pass


def _err(exc):
    msg = str(exc).replace("ember.", "torch.").replace("ember", "torch")
    return ("ERR", type(exc).__name__, msg.split("\n")[0])


def call(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = fn()
        except Exception as exc:
            out = _err(exc)
    return out, sorted({(x.category.__name__, str(x.message).replace("ember", "torch")) for x in w})


def snap(lib, obj):
    """a comparable picture of a value"""
    if isinstance(obj, lib.Tensor):
        return ("T", str(obj.dtype).split(".")[-1], tuple(obj.shape), obj.detach().numpy().copy())
    if isinstance(obj, dict):
        return {k: snap(lib, v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [snap(lib, v) for v in obj]
    if callable(obj):
        return "fn"
    return obj


def same(a, b, path=""):
    if isinstance(a, tuple) and a and a[0] == "T":
        if not (isinstance(b, tuple) and b and b[0] == "T"):
            raise Div(f"{path}: {a!r} vs {b!r}")
        if a[1:3] != b[1:3]:
            raise Div(f"{path}: meta {a[1:3]} vs {b[1:3]}")
        if not np.allclose(a[3], b[3], rtol=1e-7, atol=1e-10, equal_nan=True):
            raise Div(f"{path}: values {a[3]} vs {b[3]}")
        return
    if isinstance(a, dict):
        if not isinstance(b, dict) or list(a) != list(b):
            raise Div(f"{path}: keys {list(a)} vs {b}")
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
        return
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            raise Div(f"{path}: {a} vs {b}")
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
        return
    if isinstance(a, float) and isinstance(b, float):
        if not (abs(a - b) <= 1e-9 * max(1, abs(a)) or (a != a and b != b)):
            raise Div(f"{path}: {a} vs {b}")
        return
    if a != b or type(a) is not type(b):
        raise Div(f"{path}: {a!r} ({type(a).__name__}) vs {b!r} ({type(b).__name__})")


def build_model(lib, r, nr):
    nn = lib.nn
    layers = [nn.Linear(3, 4)]
    kind = r["norm"]
    if kind == "bn":
        layers.append(nn.BatchNorm1d(4, momentum=r["mom"]))
    elif kind == "bn_noaffine":
        layers.append(nn.BatchNorm1d(4, affine=False))
    elif kind == "in":
        layers.append(
            nn.Sequential(
                nn.Unflatten(1, (2, 2)),
                nn.InstanceNorm1d(2, track_running_stats=True),
                nn.Flatten(),
            )
        )
    layers += [nn.Tanh(), nn.Linear(4, 2)]
    m = nn.Sequential(*layers).double()
    if r["intbuf"]:
        m.register_buffer("count", lib.tensor([3, 7], dtype=lib.int64))
    if r["f32buf"]:
        m.register_buffer("f32", lib.tensor([0.25, -1.5], dtype=lib.float32))
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(nr.standard_normal(tuple(p.shape))))
    return m


def prog(lib, seed, log):
    rng = random.Random(seed)
    nr = np.random.default_rng(seed)
    r = dict(
        norm=rng.choice(["none", "bn", "bn_noaffine", "in"]),
        mom=rng.choice([0.1, 0.5, None]),
        intbuf=rng.random() < 0.3,
        f32buf=rng.random() < 0.3,
    )
    model = build_model(lib, r, nr)
    S = lib.optim.swa_utils
    avg = rng.choice(
        [
            "default",
            "ema",
            "ema_multi",
            "swa",
            "swa_multi",
            "custom",
            "both",
            "bad_decay",
            "record",
            "record",
        ]
    )
    decay = rng.choice([0.5, 0.9, 0.0, 1.0])
    kw = {}
    if avg == "ema":
        kw["avg_fn"] = S.get_ema_avg_fn(decay)
    elif avg == "ema_multi":
        kw["multi_avg_fn"] = S.get_ema_multi_avg_fn(decay)
    elif avg == "swa":
        kw["avg_fn"] = S.get_swa_avg_fn()
    elif avg == "swa_multi":
        kw["multi_avg_fn"] = S.get_swa_multi_avg_fn()
    elif avg == "custom":
        kw["avg_fn"] = lambda a, c, n: a * 0.25 + c * 0.75 + n * 0
    elif avg == "record":

        def rec(avgs, curs, n):
            log.append(("multi", [str(t.dtype).split(".")[-1] for t in avgs], snap(lib, n)))
            for p, c in zip(avgs, curs):
                p.copy_((p + c) / 2)

        kw["multi_avg_fn"] = rec
    elif avg == "both":
        kw["avg_fn"] = S.get_swa_avg_fn()
        kw["multi_avg_fn"] = S.get_swa_multi_avg_fn()
    elif avg == "bad_decay":
        log.append(call(lambda: S.get_ema_multi_avg_fn(1.5)))
        log.append(call(lambda: S.get_ema_avg_fn(-0.1)))
        return
    use_buffers = rng.random() < 0.5
    if rng.random() < 0.3:
        kw["device"] = "cpu"
    out, w = call(lambda: S.AveragedModel(model, use_buffers=use_buffers, **kw))
    log.append(("ctor", snap(lib, out) if isinstance(out, tuple) else "ok", w))
    if isinstance(out, tuple):
        return
    am = out
    log.append(("sd0", snap(lib, am.state_dict())))
    groups = [{"params": list(model[0].parameters()), "lr": rng.choice([0.1, 0.5])}]
    if rng.random() < 0.5:
        groups.append({"params": list(model[-1].parameters()), "lr": rng.choice([0.2, 1.0])})
    if rng.random() < 0.2:
        for g in groups:
            g["lr"] = lib.tensor(g["lr"], dtype=rng.choice([lib.float64, lib.float32]))
    opt = lib.optim.SGD(groups, lr=0.3, momentum=rng.choice([0.0, 0.9]))
    pre = None
    if rng.random() < 0.3:
        pre = lib.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    swa_lr = rng.choice([0.05, [0.05, 0.01], [0.3], (0.02,) * len(groups)])
    ae = rng.choice([0, 1, 3, 5, -1, 2.0])
    strat = rng.choice(["cos", "linear", "linear", "step"])
    le = -1 if rng.random() < 0.85 else rng.choice([0, 3])
    if le != -1 and rng.random() < 0.5:
        for g in opt.param_groups:
            g["initial_lr"] = 0.7
    out, w = call(
        lambda: S.SWALR(opt, swa_lr, anneal_epochs=ae, anneal_strategy=strat, last_epoch=le)
    )
    log.append(
        (
            "swalr",
            snap(lib, out) if isinstance(out, tuple) else "ok",
            w,
            [snap(lib, g.get("swa_lr")) for g in opt.param_groups],
        )
    )
    sched = None if isinstance(out, tuple) else out
    if sched is not None:
        log.append(
            ("lr0", snap(lib, sched.get_last_lr()), snap(lib, [g["lr"] for g in opt.param_groups]))
        )
    x = lib.tensor(nr.standard_normal((5, 3)))
    for step in range(rng.randint(1, 6)):
        act = rng.random()
        model.train(rng.random() < 0.8)
        opt.zero_grad()
        loss = model(x).tanh().sum() * 0.1
        loss.backward()
        opt.step()
        if sched is not None:
            if rng.random() < 0.1:
                o, w = call(lambda: sched.get_lr())
                log.append(("getlr", o if isinstance(o, tuple) else [float(v) for v in o], w))
            if pre is not None and rng.random() < 0.5:
                pre.step()
            out, w = call(lambda: sched.step())
            log.append(
                (
                    "sched",
                    w,
                    snap(lib, sched.get_last_lr()),
                    snap(lib, [g["lr"] for g in opt.param_groups]),
                    sched.last_epoch,
                )
            )
        if act < 0.8:
            out, w = call(lambda: am.update_parameters(model))
            log.append(("upd", step, snap(lib, out) if isinstance(out, tuple) else "ok", w))
        log.append(("sd", step, snap(lib, am.state_dict())))
    if sched is not None:
        sd = sched.state_dict()
        log.append(
            (
                "ssd",
                snap(
                    lib, {k: v for k, v in sorted(sd.items()) if not k.startswith("_get_lr_called")}
                ),
            )
        )
    # update_bn
    lk = rng.choice(["tensor", "list", "tuple", "dict", "empty"])
    data = [
        lib.tensor(nr.standard_normal((rng.choice([2, 4]), 3))) for _ in range(rng.randint(1, 3))
    ]
    if lk == "list":
        loader = [[d, 0] for d in data]
    elif lk == "tuple":
        loader = [(d,) for d in data]
    elif lk == "dict":
        loader = [{"x": d} for d in data]
    elif lk == "empty":
        loader = []
    else:
        loader = data
    target = am if rng.random() < 0.5 else model
    target.train(rng.random() < 0.5)
    dev = "cpu" if rng.random() < 0.3 else None
    out, w = call(lambda: S.update_bn(loader, target, device=dev))
    log.append(
        (
            "bn",
            snap(lib, out) if isinstance(out, tuple) else "ok",
            w,
            target.training,
            [m.training for m in target.modules()],
            [getattr(m, "momentum", "-") for m in target.modules()],
            snap(lib, target.state_dict()),
        )
    )


def run(seed):
    a, b = [], []
    ea = eb = None
    try:
        prog(ember, seed, a)
    except Exception as e:
        ea = _err(e)
    try:
        prog(torch, seed, b)
    except Exception as e:
        eb = _err(e)
    n = min(len(a), len(b))
    try:
        for i in range(n):
            same(snap(None, b[i]) if False else b[i], a[i], f"step{i}")
        if len(a) != len(b) or ea != eb:
            raise Div(f"len {len(a)} vs {len(b)}; ember err {ea} torch err {eb}")
    except Div as d:
        return str(d)
    return None


# a spread of seeds (every model/averaging/scheduler/loader kind) plus those that found bugs
_SEEDS = list(range(0, 40))


@pytest.mark.parametrize("seed", _SEEDS)
def test_swa_program_matches_torch(seed):
    assert run(seed) is None
