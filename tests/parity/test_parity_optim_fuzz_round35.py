"""Random training trajectories of every optimizer x LR scheduler, run in ember and torch.

A seeded generator draws a plan: a few parameters (0-d, a vector, a non-contiguous matrix;
float64, some float32/bfloat16 runs), an optimizer of ``torch.optim`` with random flags (lr
as a float or a tensor, momentum/nesterov, weight decay, maximize, amsgrad, foreach, fused,
centered, ...), one to three param groups with their own options, a scheduler (every one of
``lr_scheduler``, composed by SequentialLR/ChainedScheduler) and a list of actions: new
gradients (some None, sparse for SparseAdam), optimizer steps (LBFGS with a closure),
``zero_grad``, scheduler steps (with an epoch or a metric), ``add_param_group`` and a
state_dict round trip into a fresh optimizer and scheduler. The same plan runs in both
libraries; after every action the error (type, message), the warnings, the parameters, the
optimizer's state, its param_groups and the scheduler's last lrs and state_dict must agree.
"""

import math
import random
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

OPTIMIZERS = ["SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "Adamax", "ASGD", "NAdam",
              "RAdam", "RMSprop", "Rprop", "LBFGS", "SparseAdam", "Adafactor", "Muon"]
SCHEDULERS = ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
              "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR", "LinearLR", "ConstantLR",
              "PolynomialLR", "LambdaLR", "MultiplicativeLR", "SequentialLR", "ChainedScheduler",
              "ReduceLROnPlateau", None]


# --- the plan: plain data drawn from the seed, the same for both libraries ------------------

def _lr(rng):
    lr = rng.choice([0.01, 0.05, 0.1, 0.003])
    if rng.random() < 0.15:     # a float32 or a float64 tensor
        return (rng.choice(["tensor", "tensor64"]), lr)
    return lr


def _pick(rng, **choices):
    """A random subset of ``choices`` (name -> list of values), each drawn."""
    return {k: rng.choice(v) for k, v in choices.items() if rng.random() < 0.6}


def _options(rng, name):  # noqa: C901 - one branch per optimizer
    o = {"lr": _lr(rng)} if rng.random() < 0.9 else {}
    common = dict(weight_decay=[0, 0.01, 0.1], maximize=[False, True],
                  foreach=[None, True, False])
    if rng.random() < 0.04:
        o["differentiable"] = True
    if name == "SGD":
        o.update(_pick(rng, momentum=[0, 0.9, 0.5], dampening=[0, 0.1], nesterov=[False, True],
                       fused=[None, True], **common))
        if rng.random() < 0.8 and o.get("nesterov"):
            o.update(momentum=0.9, dampening=0)
        if o.get("nesterov") and o.get("foreach"):
            o["foreach"] = None     # (PyTorch's foreach nesterov step adds into p.grad)
    elif name in ("Adam", "AdamW"):
        o.update(_pick(rng, betas=[(0.9, 0.999), (0.8, 0.99), ("tensor", 0.9, 0.99)],
                       eps=[1e-8, 1e-3], amsgrad=[False, True], fused=[None, True], **common))
        if name == "Adam" and rng.random() < 0.3:
            o["decoupled_weight_decay"] = True
    elif name == "Adadelta":
        o.update(_pick(rng, rho=[0.9, 0.5], eps=[1e-6, 1e-3], **common))
    elif name == "Adagrad":
        o.update(_pick(rng, lr_decay=[0, 0.1], initial_accumulator_value=[0, 0.5],
                       eps=[1e-10, 1e-3], fused=[None, True], **common))
    elif name == "Adamax":
        o.update(_pick(rng, betas=[(0.9, 0.999), (0.5, 0.9)], eps=[1e-8, 1e-2], **common))
    elif name == "ASGD":
        o.update(_pick(rng, lambd=[1e-4, 0.1], alpha=[0.75, 0.5], t0=[1e6, 2.0, 0.0], **common))
    elif name == "NAdam":
        o.update(_pick(rng, betas=[(0.9, 0.999), (0.8, 0.9)], momentum_decay=[0.004, 0.1],
                       decoupled_weight_decay=[False, True], **common))
    elif name == "RAdam":
        o.update(_pick(rng, betas=[(0.9, 0.999), (0.5, 0.6)],
                       decoupled_weight_decay=[False, True], **common))
    elif name == "RMSprop":
        o.update(_pick(rng, alpha=[0.99, 0.5], eps=[1e-8, 1e-2], momentum=[0, 0.9],
                       centered=[False, True], **common))
    elif name == "Rprop":
        o.update(_pick(rng, etas=[(0.5, 1.2), (0.3, 1.5)], step_sizes=[(1e-6, 50), (0.01, 0.2)],
                       maximize=[False, True], foreach=[None, True, False]))
    elif name == "LBFGS":
        o = {"lr": rng.choice([1, 0.5, ("tensor", 0.8)])}
        o.update(_pick(rng, max_iter=[2, 3, 5], history_size=[2, 3, 10],
                       line_search_fn=[None, "strong_wolfe"], tolerance_change=[1e-9, 1e-3]))
    elif name == "SparseAdam":
        o.update(_pick(rng, betas=[(0.9, 0.999), (0.5, 0.9)], eps=[1e-8, 1e-2],
                       maximize=[False, True]))
    elif name == "Adafactor":
        o.update(_pick(rng, beta2_decay=[-0.8, -0.5], eps=[(None, 1e-3), (1e-3, 1e-2)],
                       d=[1.0, 0.5], **common))
    elif name == "Muon":
        o = {"lr": rng.choice([0.01, 0.05])}
        o.update(_pick(rng, weight_decay=[0.1, 0], momentum=[0.95, 0.5], nesterov=[True, False],
                       ns_steps=[5, 2], adjust_lr_fn=[None, "original", "match_rms_adamw"]))
    return o


def _group_override(rng, name, defaults):
    keys = [k for k in defaults if k in ("lr", "weight_decay", "momentum", "betas", "eps",
                                         "maximize", "amsgrad", "rho", "alpha", "centered",
                                         "lr_decay", "etas", "lambd")]
    o = {}
    for k in keys:
        if rng.random() < 0.4:
            o[k] = _options(random.Random(rng.random()), name).get(k, defaults[k])
    if rng.random() < 0.3 and name not in ("LBFGS", "Muon"):
        o["lr"] = _lr(rng)
    return o


def _scheduler(rng, name, ngroups, depth=0):  # noqa: C901 - one branch per scheduler
    if name == "StepLR":
        return (name, dict(step_size=rng.randint(1, 3), gamma=rng.choice([0.5, 0.1])))
    if name == "MultiStepLR":
        return (name, dict(milestones=sorted(rng.sample(range(1, 8), 2)), gamma=0.5))
    if name == "ExponentialLR":
        return (name, dict(gamma=rng.choice([0.9, 0.5])))
    if name == "CosineAnnealingLR":
        return (name, dict(T_max=rng.randint(1, 6), eta_min=rng.choice([0, 0.001])))
    if name == "CosineAnnealingWarmRestarts":
        return (name, dict(T_0=rng.randint(1, 3), T_mult=rng.randint(1, 2),
                           eta_min=rng.choice([0, 0.001])))
    if name == "CyclicLR":
        o = dict(base_lr=rng.choice([0.001, [0.001] * ngroups]), max_lr=0.02,
                 step_size_up=rng.randint(1, 3))
        o.update(_pick(rng, step_size_down=[None, 2], mode=["triangular", "triangular2",
                                                             "exp_range"],
                       gamma=[1.0, 0.9], scale_mode=["cycle", "iterations"],
                       cycle_momentum=[True, False], base_momentum=[0.8, 0.5],
                       max_momentum=[0.9, 0.95]))
        return (name, o)
    if name == "OneCycleLR":
        o = dict(max_lr=rng.choice([0.02, [0.03] * ngroups]), total_steps=rng.randint(3, 12))
        o.update(_pick(rng, pct_start=[0.3, 0.5], anneal_strategy=["cos", "linear"],
                       cycle_momentum=[True, False], three_phase=[False, True],
                       div_factor=[25.0, 5.0], final_div_factor=[1e4, 10.0]))
        return (name, o)
    if name == "LinearLR":
        return (name, dict(start_factor=rng.choice([0.25, 0.5]), end_factor=rng.choice([1.0, 0.5]),
                           total_iters=rng.randint(1, 4)))
    if name == "ConstantLR":
        return (name, dict(factor=rng.choice([0.5, 0.25]), total_iters=rng.randint(1, 4)))
    if name == "PolynomialLR":
        return (name, dict(total_iters=rng.randint(2, 5), power=rng.choice([1.0, 2.0, 0.5])))
    if name in ("LambdaLR", "MultiplicativeLR"):
        kind = rng.choice(["inv", "exp", "list"])
        return (name, dict(lr_lambda=("list", ngroups) if kind == "list" else kind))
    if name in ("SequentialLR", "ChainedScheduler") and depth == 0:
        plain = ["StepLR", "ExponentialLR", "LinearLR", "ConstantLR", "CosineAnnealingLR",
                 "MultiStepLR", "PolynomialLR", "LambdaLR"]
        kids = [_scheduler(rng, rng.choice(plain), ngroups, 1) for _ in range(2)]
        if name == "SequentialLR":
            return (name, dict(schedulers=kids, milestones=[rng.randint(1, 4)]))
        return (name, dict(schedulers=kids))
    if name == "ReduceLROnPlateau":
        return (name, _pick(rng, mode=["min", "max"], factor=[0.5, 0.1], patience=[0, 1, 2],
                            threshold=[1e-4, 0.1], threshold_mode=["rel", "abs"],
                            cooldown=[0, 1, 2], min_lr=[0, 0.004], eps=[1e-8, 0.01]))
    return None


def plan(seed):
    rng = random.Random(seed)
    name = OPTIMIZERS[seed % len(OPTIMIZERS)] if rng.random() < 0.7 else rng.choice(OPTIMIZERS)
    dtype = "float64" if rng.random() < 0.75 else rng.choice(["float32", "bfloat16"])
    if name == "Muon" and dtype == "bfloat16":
        # (PyTorch's bfloat16 Muon divides its momentum buffer in place by its norm: the
        # Newton-Schulz iteration's .bfloat16() is no copy there)
        dtype = "float32"
    if name == "LBFGS":     # (its line search turns on single ulps of the loss below float64)
        dtype = "float64"
    if name == "Muon":
        shapes = [(2, 3), (3, 2), (2, 2), (3, 3), (2, 4)] if rng.random() < 0.95 \
            else [(3,), (2, 2), (2, 3), (2, 2), (3, 3)]
    elif name == "SparseAdam":
        shapes = [(3,), (4, 2), (2, 3), (3, 2), (4,)]
    else:
        shapes = [(), (3,), (2, 3), (2, 2), (3,)]
    # the last parameter is kept for add_param_group; the others go in 1 to 3 groups
    order = list(range(4))
    rng.shuffle(order)
    ngroups = 1 if name in ("LBFGS",) and rng.random() < 0.95 else rng.randint(1, 3)
    cuts = sorted(rng.sample(range(1, 4), ngroups - 1))
    groups = [order[a:b] for a, b in zip([0] + cuts, cuts + [4])]
    defaults = _options(rng, name)
    overrides = [_group_override(rng, name, defaults) if rng.random() < 0.5 else {}
                 for _ in groups]
    sname = rng.choice(SCHEDULERS)
    sched = _scheduler(rng, sname, ngroups) if name not in ("LBFGS",) or rng.random() < 0.5 \
        else None
    if name == "LBFGS" and isinstance(defaults.get("lr"), tuple):
        # (PyTorch's state["t"] is then the lr tensor itself, which a scheduler changes before
        # the next step reads it as the last step's length: not copied)
        sched = None
    grad_kind = "sparse" if name == "SparseAdam" and rng.random() < 0.95 else "dense"
    if name in ("SGD", "Adagrad") and rng.random() < 0.15:
        grad_kind = "sparse"
    actions, added = [], False
    for _ in range(rng.randint(4, 14)):
        r = rng.random()
        if r < 0.35:
            actions.append(("grads", [rng.random() < 0.15 for _ in range(5)],
                            rng.choice([1.0, -0.5, 2.0])))
            actions.append(("step",))
        elif r < 0.6:
            if sched is not None and sched[0] == "ReduceLROnPlateau":
                actions.append(("sched", "metric", rng.choice([1.0, 0.9, 0.9, 1.1, 0.5, 0.5])))
            elif rng.random() < 0.06:
                actions.append(("sched", "epoch", rng.randint(0, 8)))
            else:
                actions.append(("sched", None, None))
        elif r < 0.7:
            actions.append(("zero_grad", rng.random() < 0.7))
        elif r < 0.78 and not added:
            added = True
            actions.append(("add_group", _group_override(rng, name, defaults)))
        elif r < 0.88:
            actions.append(("reload",))
        elif r < 0.94:
            actions.append(("step",))
        else:
            actions.append(("sched_reload",))
    return dict(name=name, dtype=dtype, shapes=shapes, groups=groups, defaults=defaults,
                overrides=overrides, sched=sched, grad_kind=grad_kind, actions=actions)


# --- running a plan in one library ------------------------------------------------------------

def _materialize(lib, v):
    if isinstance(v, tuple) and v and v[0] in ("tensor", "tensor64"):
        dt = lib.float64 if v[0] == "tensor64" else lib.float32
        if len(v) == 3:     # betas of tensors
            return (lib.tensor(v[1], dtype=dt), lib.tensor(v[2], dtype=dt))
        return lib.tensor(v[1], dtype=dt)
    return v


def _lambda(kind, i=0):
    if kind == "inv":
        return lambda e: 1.0 / (e + 1)
    if kind == "exp":
        return lambda e: 0.9 ** e
    return (lambda e: 0.95) if i % 2 else (lambda e: 1.0 - 0.1 * min(e, 5))


def _make_scheduler(lib, spec, opt):
    name, kw = spec
    kw = dict(kw)
    cls = getattr(lib.optim.lr_scheduler, name)
    if name in ("SequentialLR", "ChainedScheduler"):
        kids = [_make_scheduler(lib, k, opt) for k in kw.pop("schedulers")]
        if name == "ChainedScheduler":
            return cls(kids, optimizer=opt)
        return cls(opt, kids, **kw)
    if "lr_lambda" in kw:
        f = kw["lr_lambda"]
        kw["lr_lambda"] = ([_lambda("mult" if name == "MultiplicativeLR" else "x", i)
                            for i in range(f[1])] if isinstance(f, tuple) else _lambda(f))
    return cls(opt, **kw)


def _err(exc):
    msg = str(exc).replace("ember.", "torch.").replace("ember", "torch")
    return ("error", type(exc).__name__, msg.split("\n")[0])


def _norm(lib, v):
    """A value as plain comparable data."""
    if isinstance(v, lib.Tensor):
        t = v.detach()
        if t.is_sparse:
            t = t.to_dense()
        vals = t.to(lib.float64).numpy().copy() if t.dtype != lib.bool else t.numpy().copy()
        return ("T", str(t.dtype).split(".")[1], tuple(t.shape), vals)
    if isinstance(v, dict):
        return {k: _norm(lib, x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_norm(lib, x) for x in v]
    if callable(v):
        return "<fn>"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return ("num", float(v))
    return v


class Run:
    def __init__(self, lib, p):
        self.lib, self.p = lib, p
        dt = getattr(lib, p["dtype"])
        rs = np.random.RandomState(len(p["actions"]) * 7 + len(p["shapes"]))
        self.params, self.coef = [], []
        for i, shape in enumerate(p["shapes"]):
            init = rs.uniform(-1, 1, shape)
            # non-contiguous: a transposed parameter (not LBFGS's: PyTorch's flattens its
            # gradient with view(-1), which raises there)
            if i == 2 and len(shape) == 2 and p["name"] != "LBFGS":
                t = lib.tensor(init.T.copy()).to(dt).t()
            else:
                t = lib.tensor(init).to(dt)
            self.params.append(lib.nn.Parameter(t))
            self.coef.append((lib.tensor(rs.uniform(0.5, 2, shape)).to(dt),
                              lib.tensor(rs.uniform(-1, 1, shape)).to(dt)))
        self.step_no = 0
        self.opt = self._new_optimizer()
        self.sched = _make_scheduler(lib, p["sched"], self.opt) if p["sched"] else None

    def _groups(self, structure):
        out = []
        for idx, over in structure:
            g = {"params": [self.params[i] for i in idx]}
            g.update({k: _materialize(self.lib, v) for k, v in over.items()})
            out.append(g)
        return out

    def _new_optimizer(self, structure=None):
        p = self.p
        cls = getattr(self.lib.optim, p["name"])
        kw = {k: _materialize(self.lib, v) for k, v in p["defaults"].items()}
        if structure is None:
            structure = list(zip(p["groups"], p["overrides"]))
        groups = self._groups(structure)
        if len(groups) == 1 and not structure[0][1]:
            return cls(groups[0]["params"], **kw)
        return cls(groups, **kw)

    def _loss(self):
        total = 0
        for p, (c, d) in zip(self.params, self.coef):
            total = total + (0.5 * c * p * p + d * p).sum()
        return total

    def _grads(self, none, scale):
        lib = self.lib
        with lib.no_grad():
            for i, (p, (c, d)) in enumerate(zip(self.params, self.coef)):
                if none[i]:
                    p.grad = None
                    continue
                # laid out as the parameter, as autograd's gradients are (PyTorch's fused
                # kernels pair the two tensors' memory element by element)
                g = lib.empty_like(p).copy_((c * p.detach() + d) * scale)
                if self.p["grad_kind"] == "sparse" and g.dim() >= 1:
                    rows = [r for r in range(g.shape[0]) if (r + self.step_no + i) % 3 != 1]
                    idx = lib.tensor([rows], dtype=lib.int64)
                    g = lib.sparse_coo_tensor(idx, g[rows], tuple(g.shape))
                p.grad = g

    def act(self, a):
        lib, kind = self.lib, a[0]
        if kind == "grads":
            self._grads(a[1], a[2])
            self.step_no += 1
        elif kind == "step":
            if self.p["name"] == "LBFGS":
                def closure():
                    self.opt.zero_grad()
                    loss = self._loss()
                    loss.backward()
                    return loss
                out = self.opt.step(closure)
                return ("loss", _norm(lib, out))
            self.opt.step()
        elif kind == "zero_grad":
            self.opt.zero_grad(set_to_none=a[1])
        elif kind == "sched":
            if self.sched is None:
                return None
            if a[1] == "metric":
                self.sched.step(a[2])
            elif a[1] == "epoch":
                self.sched.step(a[2])
            else:
                self.sched.step()
        elif kind == "add_group":
            g = {"params": [self.params[4]]}
            g.update({k: _materialize(lib, v) for k, v in a[1].items()})
            self.opt.add_param_group(g)
        elif kind == "reload":
            sd = self.opt.state_dict()
            ssd = self.sched.state_dict() if self.sched is not None else None
            structure = [([next(i for i, q in enumerate(self.params) if q is x)
                           for x in g["params"]], {}) for g in self.opt.param_groups]
            self.opt = self._new_optimizer(structure)
            if self.sched is not None:
                self.sched = _make_scheduler(lib, self.p["sched"], self.opt)
            self.opt.load_state_dict(sd)
            if ssd is not None:
                self.sched.load_state_dict(ssd)
        elif kind == "sched_reload" and self.sched is not None:
            ssd = self.sched.state_dict()
            self.sched.load_state_dict(ssd)
        return None

    def observe(self):
        lib, opt = self.lib, self.opt
        obs = {"params": [_norm(lib, p) for p in self.params],
               "grads": [_norm(lib, p.grad) for p in self.params]}
        d = self.p["defaults"]
        if self.p["name"] == "SGD" and d.get("foreach") and d.get("nesterov"):
            del obs["grads"]    # (PyTorch's foreach nesterov step adds into p.grad: not copied)
        at = {id(q): i for i, q in enumerate(self.params)}
        obs["groups"] = [{k: ([at[id(x)] for x in v] if k == "params" else _norm(lib, v))
                          for k, v in g.items()} for g in opt.param_groups]
        obs["state"] = {at[id(k)]: _norm(lib, dict(v)) for k, v in opt.state.items()
                        if id(k) in at}
        if self.p["name"] == "LBFGS":
            # (PyTorch's state["t"] is the group's lr tensor itself after a first iteration,
            # which a scheduler then changes: not copied)
            for v in obs["state"].values():
                v.pop("t", None)
        sd = opt.state_dict()
        obs["sd_groups"] = [{k: _norm(lib, v) for k, v in g.items()} for g in sd["param_groups"]]
        obs["sd_state_keys"] = sorted(sd["state"])
        if self.sched is not None:
            obs["last_lr"] = _norm(lib, self.sched.get_last_lr()) \
                if hasattr(self.sched, "_last_lr") else None
            ssd = self.sched.state_dict()
            obs["sched_sd"] = {k: _norm(lib, v) for k, v in ssd.items()
                               if k not in ("_schedulers",)}
        return obs


def trace(lib, p):
    """[(label, observation)] for every action of plan ``p``; stops at the first error."""
    out = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run = Run(lib, p)
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            return [("init", _err(exc))]
        out.append(("init", run.observe(), _warned(caught)))
        for n, a in enumerate(p["actions"]):
            del caught[:]
            try:
                extra = run.act(a)
            except Exception as exc:  # noqa: BLE001
                out.append((f"{n}:{a[0]}", _err(exc), _warned(caught)))
                return out
            out.append((f"{n}:{a[0]}", extra, run.observe(), _warned(caught)))
    return out


def _warned(caught):
    # (not the sparse constructors' once-per-process warning: the test harness resets
    # ember's once between tests, PyTorch's stays spent)
    return sorted({(w.category.__name__, str(w.message).split(" (Triggered internally")[0]
                    .strip().replace("ember.", "torch.").replace("ember", "torch"))
                   for w in caught if "Sparse invariant checks" not in str(w.message)})


# --- comparing ---------------------------------------------------------------------------------

TOL = {"float64": (1e-12, 1e-14), "float32": (1e-5, 1e-7), "bfloat16": (2e-2, 1e-3)}


class _Diff(Exception):
    pass


def _same(a, b, path, tol, loose):
    if isinstance(a, tuple) and a and a[0] == "T" and isinstance(b, tuple) and b and b[0] == "T":
        if a[1:3] != b[1:3]:
            raise _Diff(path + ("dtype/shape",), a[1:3], b[1:3])
        x, y = a[3], b[3]
        if x.dtype == bool or y.dtype == bool:
            if not np.array_equal(x, y):
                raise _Diff(path, x, y)
            return
        if np.array_equal(x, y, equal_nan=True):
            return
        if np.allclose(x, y, rtol=tol[0], atol=tol[1], equal_nan=True):
            loose.append(path)
            return
        raise _Diff(path + ("values",), x.tolist(), y.tolist())
    if isinstance(a, tuple) and a and a[0] == "num" and isinstance(b, tuple) and b \
            and b[0] == "num":
        if a[1] == b[1] or (math.isnan(a[1]) and math.isnan(b[1])):
            return
        if math.isclose(a[1], b[1], rel_tol=tol[0], abs_tol=tol[1]):
            loose.append(path)
            return
        raise _Diff(path, a[1], b[1])
    if isinstance(a, dict) and isinstance(b, dict):
        if sorted(a, key=str) != sorted(b, key=str):
            raise _Diff(path + ("keys",), sorted(set(a) - set(b), key=str),
                        sorted(set(b) - set(a), key=str))
        for k in a:
            _same(a[k], b[k], path + (k,), tol, loose)
        return
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            raise _Diff(path + ("len",), a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, path + (i,), tol, loose)
        return
    if a != b:
        raise _Diff(path, a, b)


def compare(seed, loose=None):
    """None when ember's trace equals torch's, else (class, seed, where, ember's, torch's)."""
    p = plan(seed)
    ours, theirs = trace(ember, p), trace(torch, p)
    tol = TOL[p["dtype"]]
    if p["name"] == "LBFGS":    # sums and dot products of other orders
        tol = (1e-10, 1e-12)
    if p["name"] == "Muon":     # Newton-Schulz in bfloat16, accumulated in other orders
        tol = (1e-3, 1e-4)
    loose = [] if loose is None else loose
    try:
        _same(ours, theirs, (), tol, loose)
    except _Diff as d:
        where, a, b = d.args
        step = ours[where[0]][0] if where and isinstance(where[0], int) \
            and where[0] < len(ours) else "?"
        cls = (p["name"], p["sched"][0] if p["sched"] else None, step.split(":")[-1],
               tuple(str(w) for w in where[1:3] if not isinstance(w, int)))
        return (cls, seed, where, a, b)
    return None


# Seeds 0-79, and later ones of float32 tensor hyperparameters on float64 parameters that
# were off by ~1e-9 (NAdam/Adamax/RAdam foreach, RAdam's decoupled decay, fused Adagrad).
KNOWN = set()
CURATED = [s for s in range(80) if s not in KNOWN] + [290, 686, 709, 1085, 1115, 1178]


@pytest.mark.parametrize("seed", CURATED)
def test_trajectory_matches_torch(seed):
    diff = compare(seed)
    assert diff is None, diff


# --- the fixes, one program each ----------------------------------------------------------

def _bf16_zero_dim(lib, name):
    p = lib.nn.Parameter(lib.tensor(0.75).to(lib.bfloat16))
    opt = getattr(lib.optim, name)([p], lr=0.1, weight_decay=0.01)
    for k in range(3):
        p.grad = lib.tensor(0.5 - k).to(lib.bfloat16)
        opt.step()
    return [p.float().item()]


def _asgd_reloaded(lib, foreach):
    p = lib.nn.Parameter(lib.tensor([1.0, 2.0], dtype=lib.float64))
    opt = lib.optim.ASGD([p], lr=0.05, t0=1.0, foreach=foreach)
    out = []
    for k in range(4):
        if k == 2:
            fresh = lib.optim.ASGD([p], lr=0.05, t0=1.0, foreach=foreach)
            fresh.load_state_dict(opt.state_dict())
            opt = fresh
        p.grad = lib.tensor([0.5, -1.0], dtype=lib.float64)
        opt.step()
        out += [opt.state[p]["eta"].item(), opt.state[p]["mu"].item()] + p.tolist()
    return out


def _scheduled_tensor_lr(lib, sched):
    p = lib.nn.Parameter(lib.ones(2))
    opt = lib.optim.SGD([p], lr=lib.tensor(0.05))
    s = sched(lib.optim.lr_scheduler, opt)
    out = []
    for k in range(5):
        opt.step()
        s.step(1.0) if isinstance(s, lib.optim.lr_scheduler.ReduceLROnPlateau) else s.step()
        out.append(opt.param_groups[0]["lr"].item())
    return out


def _mixed_hyper(lib, name, kw):
    def make(v):
        return lib.tensor(v[1], dtype=getattr(lib, v[0])) if isinstance(v, tuple) else v
    kw = {k: (tuple(make(b) for b in v) if k == "betas" else make(v)) for k, v in kw.items()}
    p = lib.nn.Parameter(lib.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=lib.float64))
    opt = getattr(lib.optim, name)([p], **kw)
    for k in range(3):
        p.grad = lib.tensor([[0.5, -0.25], [0.125, 1.5]], dtype=lib.float64) * (k + 1)
        opt.step()
    return p.flatten().tolist()


def _lbfgs_two_groups(lib):
    a, b = lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(2))
    opt = lib.optim.LBFGS([a])
    opt.add_param_group({"params": [b]})
    return opt.step(lambda: (a * a).sum())


def _group_after_load(lib):
    a, b = lib.nn.Parameter(lib.ones(2, 2)), lib.nn.Parameter(lib.ones(2))
    opt = lib.optim.Adafactor([a])
    opt.load_state_dict(opt.state_dict())
    opt.add_param_group({"params": [b]})
    return sorted(opt.param_groups[1])


T32 = ("float32", 0.05)
CASES = {
    **{f"bf16_0d_{n}": (_bf16_zero_dim, n) for n in ["NAdam", "Adamax", "RAdam", "RMSprop"]},
    "asgd_reload": (_asgd_reloaded, False), "asgd_reload_foreach": (_asgd_reloaded, True),
    "exp_lr": (_scheduled_tensor_lr, lambda m, o: m.ExponentialLR(o, 0.9)),
    "cosine_lr": (_scheduled_tensor_lr, lambda m, o: m.CosineAnnealingLR(o, 4, 0.001)),
    "plateau_lr": (_scheduled_tensor_lr, lambda m, o: m.ReduceLROnPlateau(o, patience=0)),
    "adam_fused_t32": (_mixed_hyper, "Adam", dict(lr=T32, fused=True)),
    "adamw_fused_t32": (_mixed_hyper, "AdamW", dict(lr=T32, fused=True, weight_decay=0.1)),
    "adam_betas_t32": (_mixed_hyper, "Adam", dict(betas=(("float32", 0.9), ("float32", 0.99)))),
    "adam_betas_lr_t64": (_mixed_hyper, "Adam", dict(lr=("float64", 0.05),
                                                    betas=(("float32", 0.9), ("float32", 0.99)))),
    "adafactor_t32": (_mixed_hyper, "Adafactor", dict(lr=T32, weight_decay=0.01)),
    "asgd_foreach_t64": (_mixed_hyper, "ASGD", dict(lr=("float64", 0.05), foreach=True)),
    "lbfgs_two_groups": (_lbfgs_two_groups,),
    "group_after_load": (_group_after_load,),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fixed_program_matches_torch(case):
    fn, *args = CASES[case]
    outs = []
    for lib in (ember, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                outs.append(_norm(lib, fn(lib, *args)))
            except Exception as exc:  # noqa: BLE001 - the error itself is compared
                outs.append(_err(exc))
    _same(outs[0], outs[1], (), (1e-15, 0), [])
