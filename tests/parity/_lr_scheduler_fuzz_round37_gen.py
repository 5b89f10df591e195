"""The random programs of test_parity_lr_scheduler_fuzz_round37.py: one optimizer (SGD with
or without momentum, Adam, AdamW, NAdam, Adamax, RAdam (foreach), RMSprop, Adagrad, or none)
with one to three param groups whose lrs are floats, ints or 0-d tensors (float32, float64,
bfloat16, float16), one scheduler of optim.lr_scheduler, swa_utils.SWALR or a user's subclass
with random arguments (valid and not), alone or composed in a SequentialLR or a
ChainedScheduler (nested too), then a random sequence of actions: optimizer and scheduler
steps (the scheduler's first step before the optimizer's too), deprecated ``step(epoch)``
calls, ReduceLROnPlateau metrics (NaN, inf, tensors, wrong types, the epoch argument),
``get_lr()`` / ``get_last_lr()`` / ``print_lr()`` calls, ``state_dict`` round trips into the
same scheduler or into a fresh optimizer and scheduler (a checkpoint resume, shared or deep
copied), deepcopy and pickle of the scheduler, a user's own ``optimizer.step``, a param group
added mid-run, an lr set by hand and schedulers resumed with ``last_epoch`` (with
``initial_lr`` set or missing), run in ember and torch side by side.

Compared after each action: the lr of every group (exact: its type, dtype and value), its
momentum / betas and the schedule's keys in the group, ``last_epoch``, the action's result,
its error (type and first line of the message) and its warnings; at the end the parameters.
"""

import copy
import math
import pickle
import random

import ember
from tests.parity._compare import ok, recorded
from tests.parity._fft_fuzz_round36_gen import _msg

try:
    import torch
except ImportError:     # the test module skips
    torch = None


def _call(fn, *args):
    """``((ok, value or (error type, message)), sorted warnings)`` of ``fn(*args)``, with
    PyTorch's names read as ember's and messages cut to their first line."""
    answer, caught = recorded(fn, *args, describe=ok, message=_msg)
    result = (True, answer[1]) if answer[0] == "ok" else (False, answer)
    return result, sorted({(category, _msg(text)[:90]) for category, text in caught})


# --- the functions a program hands to schedulers (one code for both libraries) --------------

class _Factor:
    """A callable object: its attributes travel in the scheduler's state_dict."""

    def __init__(self, base):
        self.base = base

    def __call__(self, x):
        return self.base ** x


_LAMBDAS = {
    "pow95": lambda e: 0.95 ** e,
    "inv": lambda e: 1.0 / (e + 1),
    "step3": lambda e: 0.5 if e >= 3 else 1.0,
    "two": lambda e: 2,
    "zero": lambda e: 0,
    "obj": "obj",
    "notfn": "notfn",
}
_SCALES = {"half": lambda x: 0.5, "decay": lambda x: 1.0 / (x + 1), "obj": "obj"}


def _fn(table, name):
    fn = table[name]
    return _Factor(0.9) if fn == "obj" else 0.5 if fn == "notfn" else fn


# --- the program's spec (plain data, drawn from the seed) ------------------------------------

def _pick(rng, *values):
    return rng.choice(values)


def _lr_spec(rng):
    value = _pick(rng, 0.1, 0.1, 0.05, 0.01, 1.0, 0.3, 2.0, 1)
    if rng.random() < 0.35:
        return ("tensor", _pick(rng, "float32", "float32", "float64", "bfloat16", "float16"),
                value)
    return ("float", value)


def _opt_spec(rng):
    kind = _pick(rng, "SGD", "SGD", "SGDm", "Adam", "Adam", "AdamW", "RMSprop", "Adagrad",
                 "NAdam", "Adamax", "RAdam",
                 *(["none"] if rng.random() < 0.05 else []))
    groups = [_lr_spec(rng) for _ in range(_pick(rng, 1, 1, 2, 2, 3))]
    return kind, groups


def _per_group(rng, n, values, p=0.25):
    """One of ``values``, or a list of them (sometimes of a wrong length)."""
    if rng.random() < p:
        k = n if rng.random() < 0.85 else _pick(rng, max(0, n - 1), n + 1)
        return [rng.choice(values) for _ in range(k)]
    return rng.choice(values)


_CHAINABLE = ["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
              "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
              "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR", "SWALR", "Custom",
              "CustomClosed"]


def _leaf_spec(rng, n, allow_plateau=True):
    names = _CHAINABLE + (["ReduceLROnPlateau"] * 2 if allow_plateau else [])
    name = rng.choice(names)
    kw = {}

    def maybe(key, *values, p=0.6):
        if rng.random() < p:
            kw[key] = rng.choice(values)
    if name in ("LambdaLR", "MultiplicativeLR"):
        kw["lr_lambda"] = _per_group(rng, n, list(_LAMBDAS), 0.3)
    elif name == "StepLR":
        kw["step_size"] = _pick(rng, 1, 2, 2, 3, 3, 0)
        maybe("gamma", 0.1, 0.5, 0.9, 1.0, 2.0)
    elif name == "MultiStepLR":
        kw["milestones"] = [rng.randrange(0, 8) for _ in range(rng.randrange(0, 4))]
        maybe("gamma", 0.1, 0.5, 0.9, 2.0)
    elif name == "ConstantLR":
        maybe("factor", 0.5, 1 / 3, 1.0, 0.0, 0.25, 1.5, -0.1)
        maybe("total_iters", 0, 1, 2, 3, 5)
    elif name == "LinearLR":
        maybe("start_factor", 1 / 3, 0.5, 1.0, 0.25, 0.0, 1.5)
        maybe("end_factor", 1.0, 0.5, 0.0, 0.1, 1.2)
        maybe("total_iters", 1, 2, 3, 5, 0)
    elif name == "ExponentialLR":
        kw["gamma"] = _pick(rng, 0.9, 0.5, 0.99, 1.0, 1.1)
    elif name == "PolynomialLR":
        maybe("total_iters", 1, 2, 3, 5, 0)
        maybe("power", 1.0, 2.0, 0.5, 0.0, 3)
    elif name == "CosineAnnealingLR":
        kw["T_max"] = _pick(rng, 1, 2, 3, 4, 5, 10)
        maybe("eta_min", 0.0, 0.001, 0.01, 0.5)
    elif name == "CosineAnnealingWarmRestarts":
        kw["T_0"] = _pick(rng, 1, 2, 3, 3, 4, 0, 2.0)
        maybe("T_mult", 1, 1, 2, 3, 0, 1.5)
        maybe("eta_min", 0.0, 0.01, 0.001, "a")
    elif name == "CyclicLR":
        kw["base_lr"] = _per_group(rng, n, [0.01, 0.001, 0.05])
        kw["max_lr"] = _per_group(rng, n, [0.1, 0.2, 1.0])
        kw["step_size_up"] = _pick(rng, 1, 2, 3, 4, 5)
        maybe("step_size_down", None, 1, 2, 3, 6)
        maybe("mode", "triangular", "triangular2", "exp_range", "bad")
        maybe("gamma", 1.0, 0.9, 0.5)
        maybe("scale_fn", None, *_SCALES, p=0.25)
        maybe("scale_mode", "cycle", "iterations", p=0.3)
        maybe("cycle_momentum", True, False)
        maybe("base_momentum", *(0.8, 0.85, 0.5), p=0.3)
        maybe("max_momentum", *(0.9, 0.95, 0.99), p=0.3)
    elif name == "OneCycleLR":
        kw["max_lr"] = _per_group(rng, n, [0.1, 0.2, 1.0, 0.05])
        r = rng.random()
        if r < 0.7:
            kw["total_steps"] = _pick(rng, 5, 8, 10, 12, 20, 3, 0, -1, 2.5)
        elif r < 0.95:
            kw["epochs"] = _pick(rng, 2, 3, 0, 1.5)
            kw["steps_per_epoch"] = _pick(rng, 2, 3, 4, -1)
        maybe("pct_start", 0.3, 0.25, 0.5, 0.4, 1.0, 0.0, 1, 1.5)
        maybe("anneal_strategy", "cos", "linear", "bad")
        maybe("three_phase", False, True)
        maybe("div_factor", 25.0, 10.0, 2.0, 4)
        maybe("final_div_factor", 1e4, 100.0, 10.0)
        maybe("cycle_momentum", True, False)
        maybe("base_momentum", 0.85, 0.8, p=0.3)
        maybe("max_momentum", 0.95, 0.9, p=0.3)
    elif name == "ReduceLROnPlateau":
        maybe("mode", "min", "max", "bad", p=0.5)
        maybe("factor", 0.1, 0.5, 0.5, 1.0, 2.0)
        maybe("patience", 0, 1, 2, 3, -1)
        maybe("threshold", 1e-4, 0.1, 0.0, 0.5)
        maybe("threshold_mode", "rel", "abs", "bad", p=0.4)
        maybe("cooldown", 0, 1, 2)
        if rng.random() < 0.5:
            kw["min_lr"] = _per_group(rng, n, [0.0, 0.01, 0.001, 0.05], 0.4)
        maybe("eps", 1e-8, 0.1, 1e-3, p=0.3)
    elif name == "SWALR":
        kw["swa_lr"] = _per_group(rng, n, [0.05, 0.01, 0.5])
        if rng.random() < 0.15:
            kw["swa_lr"] = ("tensor", _pick(rng, "float32", "float64"), 0.05)
        maybe("anneal_epochs", 0, 1, 2, 3, 5, -1, 1.5)
        maybe("anneal_strategy", "cos", "linear", "bad")
    elif name in ("Custom", "CustomClosed"):
        kw["factor"] = _pick(rng, 0.5, 0.9)
    if name not in ("ReduceLROnPlateau",) and rng.random() < 0.12:
        kw["last_epoch"] = _pick(rng, 0, 2, 3)
        if rng.random() < 0.6:      # the groups hold initial_lr (as after a resume)
            kw["_preset"] = True
    if rng.random() < 0.04:
        kw["verbose"] = _pick(rng, True, "deprecated")
    return ("leaf", name, kw)


def _sched_spec(rng, n):
    r = rng.random()
    if r < 0.72:
        return _leaf_spec(rng, n)
    k = _pick(rng, 1, 2, 2, 2, 3)
    children = [_leaf_spec(rng, n, rng.random() < 0.05) for _ in range(k)]
    if rng.random() < 0.15:     # a composite inside a composite
        children[-1] = _sched_spec(rng, n)
    if r < 0.87:
        points = sorted(rng.randrange(1, 8) for _ in range(k - 1))
        if rng.random() < 0.1:
            points = points + [6] if rng.random() < 0.5 else points[1:]
        kw = {}
        if rng.random() < 0.1:
            kw["last_epoch"] = _pick(rng, 0, 2)
        return ("seq", children, points, kw)
    return ("chain", children, rng.random() < 0.4)


def _actions(rng, plateau, n_steps):
    acts = []
    if rng.random() < 0.04:     # a user's own optimizer.step, set after the scheduler
        acts.append(("override",))
    if rng.random() < 0.7:
        acts.append(("opt_step",))
    for _ in range(n_steps):
        r = rng.random()
        if r < 0.55:
            if rng.random() < 0.9:
                acts.append(("opt_step",))
            if plateau:
                acts.append(("metric", _pick(rng, 1.0, 0.9, 0.9, 0.8, 1.1, 1.0, 0.5, 2.0,
                                             "nan", "t0.7", 0.95, 1, "inf",
                                             *(("pair", "bad", None, "i3")
                                               if rng.random() < 0.1 else ()))))
                if rng.random() < 0.05:
                    acts.append(("metric_epoch", _pick(rng, 1.0, 0.5), _pick(rng, 0, 3, 7)))
            else:
                acts.append(("step",))
        elif r < 0.63:
            acts.append(("step_epoch", _pick(rng, 0, 1, 2, 3, 5, 7, 2.5, -1)))
        elif r < 0.70:
            acts.append(("get_lr",))
        elif r < 0.76:
            acts.append(("get_last_lr",))
        elif r < 0.80:
            acts.append(("roundtrip",))
        elif r < 0.83:
            acts.append(("state",) if rng.random() < 0.8 else ("print_lr",))
        elif r < 0.91:
            acts.append(("resume",) if rng.random() < 0.6 else ("resume_copy",))
        elif r < 0.94:
            acts.append(("add_group",))
        elif r < 0.955:
            acts.append(("set_lr", _pick(rng, 0.2, 0.02)))
        elif r < 0.97:
            acts.append((_pick(rng, "deepcopy", "pickle"),))
        else:
            acts.append(("metric" if not plateau else "step", 1.0))
    return acts


def _has_plateau(spec):
    if spec[0] == "leaf":
        return spec[1] == "ReduceLROnPlateau"
    return any(_has_plateau(c) for c in spec[1])


# --- building it in one library --------------------------------------------------------------

def _lr_value(lib, lr):
    if lr[0] == "tensor":
        return lib.tensor(lr[2], dtype=getattr(lib, lr[1]))
    return lr[1]


def _optimizer(lib, opt):
    kind, groups = opt
    params = [lib.nn.Parameter(lib.ones(2) * (i + 1)) for i in range(len(groups))]
    for p in params:
        p.grad = lib.full((2,), 0.5)
    dicts = [{"params": [p], "lr": _lr_value(lib, lr)} for p, lr in zip(params, groups)]
    if kind == "SGD":
        return lib.optim.SGD(dicts, lr=0.1)
    if kind == "SGDm":
        return lib.optim.SGD(dicts, lr=0.1, momentum=0.9)
    if kind in ("Adam", "none"):
        return lib.optim.Adam(dicts, lr=0.1, foreach=False)
    if kind == "AdamW":
        return lib.optim.AdamW(dicts, lr=0.1, betas=(0.8, 0.99), foreach=False)
    if kind == "RMSprop":
        return lib.optim.RMSprop(dicts, lr=0.1, momentum=0.5, foreach=False)
    if kind == "NAdam":
        return lib.optim.NAdam(dicts, lr=0.1, foreach=False)
    if kind == "Adamax":
        return lib.optim.Adamax(dicts, lr=0.1, foreach=False)
    if kind == "RAdam":         # (its foreach step, which takes a tensor lr)
        return lib.optim.RAdam(dicts, lr=0.1, foreach=True)
    return lib.optim.Adagrad(dicts, lr=0.1, lr_decay=0.05, foreach=False)


def _custom(lib, closed):
    """A user's scheduler: chainable ``get_lr`` (on the old base class ``_LRScheduler``), or
    with a closed form too, which ``step(epoch)`` uses."""
    L = lib.optim.lr_scheduler  # noqa: N806

    class Custom(L._LRScheduler):
        def __init__(self, optimizer, factor, last_epoch=-1):
            self.factor = factor
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            if self.last_epoch == 0:
                return [g["lr"] for g in self.optimizer.param_groups]
            return [g["lr"] * self.factor for g in self.optimizer.param_groups]

    class CustomClosed(L.LRScheduler):
        def __init__(self, optimizer, factor, last_epoch=-1):
            self.factor = factor
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [base * self.factor ** self.last_epoch for base in self.base_lrs]

        def _get_closed_form_lr(self):
            return [base * self.factor ** (self.last_epoch + 1) for base in self.base_lrs]
    return CustomClosed if closed else Custom


def _kwargs(lib, kw):
    out = {}
    for key, value in kw.items():
        if key == "_preset":
            continue
        if key in ("lr_lambda",):
            value = [_fn(_LAMBDAS, v) for v in value] if isinstance(value, list) \
                else _fn(_LAMBDAS, value)
        elif key == "scale_fn" and value is not None:
            value = _fn(_SCALES, value)
        elif key == "swa_lr" and isinstance(value, tuple):
            value = lib.tensor(value[2], dtype=getattr(lib, value[1]))
        out[key] = value
    return out


def _scheduler(lib, opt, spec, bad=False):
    L = lib.optim.lr_scheduler  # noqa: N806
    if bad:                     # not an optimizer: the constructor's TypeError
        opt = opt.param_groups
    if spec[0] == "leaf":
        _, name, kw = spec
        if name == "SWALR":
            cls = __import__(lib.__name__ + ".optim.swa_utils", fromlist=["SWALR"]).SWALR
        elif name.startswith("Custom"):
            cls = _custom(lib, name == "CustomClosed")
        else:
            cls = getattr(L, name)
        return cls(opt, **_kwargs(lib, kw))
    children = [_scheduler(lib, opt, c) for c in spec[1]]
    if spec[0] == "seq":
        return L.SequentialLR(opt, children, spec[2], **spec[3])
    return L.ChainedScheduler(children, opt) if spec[2] else L.ChainedScheduler(children)


def _desc(lib, v):
    if isinstance(v, lib.Tensor):
        return ("T", str(v.dtype).split(".")[-1], tuple(v.shape), v.item() if v.numel() == 1
                else tuple(v.detach().flatten().tolist()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_desc(lib, x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((k, _desc(lib, v[k])) for k in sorted(v, key=str)))
    if callable(v):
        return ("callable", type(v).__name__)
    if isinstance(v, (bool, int, float, str)) or v is None:
        return (type(v).__name__, v)
    return (type(v).__name__, repr(v))


_KEYS = ("initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum", "swa_lr",
         "momentum", "betas")


def _snapshot(lib, opt, sched):
    groups = tuple(
        tuple((k, _desc(lib, g[k])) for k in ("lr",) + _KEYS if k in g)
        for g in opt.param_groups)
    return groups, _desc(lib, getattr(sched, "last_epoch", None))


def _metric(lib, m):
    if m in ("nan", "inf"):
        return float(m)
    if m == "pair":
        return lib.tensor([1.0, 2.0])
    if m == "i3":
        return lib.tensor(3)
    if m == "bad":
        return m
    if isinstance(m, str):
        return lib.tensor(float(m[1:]))
    return m


def play(lib, prog):
    """Run the program in ``lib``; the list of events (what each action gave)."""
    opt_spec, spec, acts = prog
    events = []
    (ok, opt), warns = _call(_optimizer, lib, opt_spec)
    if not ok:
        return [("optimizer", opt, warns)]
    (ok, sched), warns = _call(_prepare_and_build, lib, opt, spec, opt_spec[0] == "none")
    events.append(("ctor", (ok, None if ok else sched), warns,
                   _snapshot(lib, opt, sched if ok else None)))
    if not ok:
        return events
    state = {"opt": opt, "sched": sched}
    for act in acts:
        (ok, value), warns = _call(_act, lib, state, opt_spec, spec, act)
        events.append((act[0], (ok, value), warns,
                       _snapshot(lib, state["opt"], state["sched"])))
        if not ok and act[0].startswith("resume"):
            break
    params = tuple(_desc(lib, p.detach().clone()) for g in state["opt"].param_groups
                   for p in g["params"])
    events.append(("params", params, [], None))
    return events


def _prepare_and_build(lib, opt, spec, bad):
    if spec[0] == "leaf" and spec[2].get("_preset"):
        for group in opt.param_groups:
            lr = group["lr"]
            group["initial_lr"] = lr.clone() if isinstance(lr, lib.Tensor) else lr
    return _scheduler(lib, opt, spec, bad)


def _act(lib, state, opt_spec, spec, act):
    opt, sched = state["opt"], state["sched"]
    kind = act[0]
    if kind == "opt_step":
        opt.step()
        return None
    if kind == "step":
        return _desc(lib, sched.step())
    if kind == "step_epoch":
        return _desc(lib, sched.step(act[1]))
    if kind == "metric":
        return _desc(lib, sched.step(_metric(lib, act[1])))
    if kind == "metric_epoch":
        return _desc(lib, sched.step(act[1], act[2]))
    if kind == "state":
        return _desc(lib, sched.state_dict())
    if kind == "print_lr":
        return _desc(lib, sched.print_lr(True, 0, 0.1))
    if kind == "get_lr":
        return _desc(lib, sched.get_lr())
    if kind == "get_last_lr":
        return _desc(lib, sched.get_last_lr())
    if kind == "roundtrip":
        sched.load_state_dict(sched.state_dict())
        return None
    if kind in ("resume", "resume_copy"):
        new_opt = _optimizer(lib, opt_spec)
        new_sched = _scheduler(lib, new_opt, spec)
        states = opt.state_dict(), sched.state_dict()
        if kind == "resume_copy":       # as from a file: nothing shared with the old ones
            states = copy.deepcopy(states)
        new_opt.load_state_dict(states[0])
        new_sched.load_state_dict(states[1])
        state["opt"], state["sched"] = new_opt, new_sched
        return None
    if kind == "add_group":
        p = lib.nn.Parameter(lib.zeros(2))
        p.grad = lib.full((2,), 0.25)
        opt.add_param_group({"params": [p], "lr": 0.02})
        return None
    if kind == "override":
        step = opt.step
        opt.step = lambda *args, **kwargs: step(*args, **kwargs)
        return None
    if kind == "deepcopy":      # carry on with the copies
        new_sched = copy.deepcopy(sched)
        state["opt"], state["sched"] = new_sched.optimizer, new_sched
        return None
    if kind == "pickle":
        new_sched = pickle.loads(pickle.dumps(sched))
        state["opt"], state["sched"] = new_sched.optimizer, new_sched
        return None
    if kind == "set_lr":
        g = opt.param_groups[0]
        if isinstance(g["lr"], lib.Tensor):
            g["lr"].fill_(act[1])
        else:
            g["lr"] = act[1]
        return None
    raise AssertionError(kind)


# --- comparing -------------------------------------------------------------------------------

def _same(a, b, tol=0.0):
    """Equal structures; floats exactly (NaN matching NaN, -0.0 only -0.0) or within ``tol``."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if tol == 0.0:
            return a == b and math.copysign(1, a) == math.copysign(1, b)
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(
            _same(x, y, tol) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _label(prog):
    opt_spec, spec, acts = prog

    def name(s):
        if s[0] == "leaf":
            return f"{s[1]}({', '.join(f'{k}={v}' for k, v in s[2].items())})"
        inner = ", ".join(name(c) for c in s[1])
        if s[0] == "seq":
            return f"SequentialLR([{inner}], {s[2]}, {s[3]})"
        return f"ChainedScheduler([{inner}], optimizer={s[2]})"
    groups = ",".join(str(g[1]) if g[0] == "float" else f"{g[1]}:{g[2]}" for g in opt_spec[1])
    steps = " ".join(a[0] if len(a) == 1 else f"{a[0]}={a[1]}" for a in acts)
    return f"{opt_spec[0]}[{groups}]: {name(spec)} :: {steps}"


def make_program(seed):
    """The program (optimizer spec, scheduler spec, actions) that ``seed`` draws."""
    rng = random.Random(seed)
    opt_spec = _opt_spec(rng)
    spec = _sched_spec(rng, len(opt_spec[1]))
    acts = _actions(rng, _has_plateau(spec), rng.randrange(3, 16))
    return opt_spec, spec, acts


def run_program(seed):
    """One random program; None when both agree, else (label, what, torch's, ember's)."""
    prog = make_program(seed)
    label = _label(prog)
    theirs, ours = play(torch, prog), play(ember, prog)
    for i, (t, e) in enumerate(zip(theirs, ours)):
        if _same(t, e):
            continue
        what = t[0] if t[0] == e[0] else "event"
        if t[0] == "params":
            if _same(t[1], e[1], 1e-5):
                continue
            return label, "params", t[1], e[1]
        parts = ("result", "warnings", "groups")
        for k, part in enumerate(parts):
            if not _same(t[k + 1], e[k + 1]):
                tag = part
                if part == "result" and t[1][0] != e[1][0]:
                    tag = "raised"
                elif part == "result" and not t[1][0]:
                    tag = "error"
                elif _same(t[k + 1], e[k + 1], 1e-9):
                    tag += " ulp"
                return label, f"{what} {tag} @{i}", t[k + 1], e[k + 1]
        return label, f"{what} @{i}", t, e
    if len(theirs) != len(ours):
        return label, "length", theirs[len(ours):], ours[len(theirs):]
    return None


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, shown=3, width=700)
