"""Optimizer corners as training repositories write them in torch, run once with `torch` bound
to ember and once to PyTorch from the same NumPy weights and data: LBFGS with
``line_search_fn="strong_wolfe"`` and closures, ``swa_utils`` (AveragedModel with a custom
avg_fn and ``get_ema_multi_avg_fn``, SWALR, ``update_bn`` over a DataLoader), LARS and LAMB
written by hand as Optimizer subclasses with ``_foreach_*`` ops, a Lookahead wrapper, an EMA by
``_foreach_mul_``/``_foreach_add_``, composed schedulers and optimizer state_dict round trips
with param-group changes. Sibling of test_parity_programs_round29_privacy.py."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests
from tests.parity.test_parity_programs_round23_self_supervised import lars_class

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def lbfgs_program(torch):
    """Full-batch LBFGS with the strong Wolfe line search on a small regression net (the
    closure zeroes grads, calls backward and returns the loss), history_size 3 and max_iter 5,
    several ``step(closure)`` calls; the state's ``func_evals``/``n_iter`` counters, the
    d/t/old_dirs state, and a plain-LBFGS (no line search) run on the Rosenbrock function."""
    nn = torch.nn
    rng = np.random.default_rng(2911)
    net = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    fill_(torch, net, rng, 0.5)
    x = normal(torch, rng, 16, 3)
    y = (x[:, :1] * 0.7 - x[:, 1:2].sin()).detach()
    opt = torch.optim.LBFGS(net.parameters(), lr=1, max_iter=5, history_size=3,
                            line_search_fn="strong_wolfe")
    evals = []

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        evals.append(loss.item())
        return loss

    res = {"step_losses": [opt.step(closure).item() for _ in range(3)]}
    res["evals"] = evals
    st = opt.state[opt._params[0]]
    res["counters"] = [int(st["func_evals"]), int(st["n_iter"]), len(st["old_dirs"])]
    res["t"] = float(st["t"])
    res["d"] = st["d"]
    res["params"] = list(net.parameters())

    xy = torch.tensor([-1.2, 1.0], requires_grad=True)
    opt2 = torch.optim.LBFGS([xy], lr=0.5, max_iter=10, tolerance_change=1e-12)

    def rosen():
        opt2.zero_grad()
        f = (1 - xy[0]) ** 2 + 10 * (xy[1] - xy[0] ** 2) ** 2
        f.backward()
        return f

    for _ in range(2):
        opt2.step(rosen)
    res["rosen"] = xy
    sd = opt2.state_dict()
    res["rosen_state_keys"] = sorted(sd["state"][0].keys())
    return res


def swa_program(torch):
    """SWA as the torchcontrib/PyTorch recipe: CosineAnnealingLR then SWALR from epoch 2 (linear
    anneal, anneal_epochs 2), AveragedModel updated each epoch after the switch, update_bn over a
    DataLoader of (x, y) pairs (the loader yields lists), an EMA model by
    ``get_ema_multi_avg_fn`` with ``use_buffers=True`` and a custom ``avg_fn`` (a clipped
    geometric mean of weights); ``n_averaged`` and the BN buffers compared."""
    nn, F = torch.nn, torch.nn.functional
    swa_utils = torch.optim.swa_utils
    data = torch.utils.data
    rng = np.random.default_rng(2912)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    fill_(torch, model, rng)
    x = normal(torch, rng, 12, 4)
    y = torch.from_numpy(rng.integers(0, 2, 12))
    loader = data.DataLoader(data.TensorDataset(x, y), batch_size=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)
    swa_model = swa_utils.AveragedModel(model)
    swa_sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy="linear")
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9),
                                  use_buffers=True)

    def geo(avg, cur, n):
        return (avg.abs().clamp(min=1e-3) * cur.abs().clamp(min=1e-3)).sqrt() * cur.sign()
    custom = swa_utils.AveragedModel(model, avg_fn=geo)
    res = {"lrs": []}
    for epoch in range(5):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            ema.update_parameters(model)
        if epoch >= 2:
            swa_model.update_parameters(model)
            custom.update_parameters(model)
            swa_sched.step()
        else:
            sched.step()
        res["lrs"].append(opt.param_groups[0]["lr"])
    swa_utils.update_bn(loader, swa_model)
    res["n_averaged"] = [int(swa_model.n_averaged), int(ema.n_averaged),
                         int(custom.n_averaged)]
    res["swa_params"] = list(swa_model.parameters())
    res["swa_bn"] = [swa_model.module[1].running_mean, swa_model.module[1].running_var]
    res["bn_batches"] = [int(swa_model.module[1].num_batches_tracked)]
    res["momentum_after"] = [swa_model.module[1].momentum]
    res["ema_params"] = list(ema.parameters())
    res["ema_buffers"] = [b.float() for b in ema.module.buffers()]
    res["custom"] = list(custom.module.parameters())
    swa_model.eval()
    with torch.no_grad():
        res["swa_out"] = swa_model(x)
    res["swa_keys"] = list(swa_model.state_dict().keys())
    res["swalr_state"] = sorted(k for k in swa_sched.state_dict() if not k.startswith("_"))
    return res


def _lars_lamb(torch):
    """LARS (with the trust ratio excluded for biases and norms, as SimCLR/BYOL code does) and
    LAMB written the way repositories write them."""

    LARS = lars_class(torch)

    class Lamb(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0):
            if not 0.0 <= lr:
                raise ValueError("Invalid learning rate: {}".format(lr))
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                          weight_decay=weight_decay))

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                grads = [p.grad for p in params]
                states = [self.state[p] for p in params]
                for p, s in zip(params, states):
                    if len(s) == 0:
                        s["step"] = torch.tensor(0.0)
                        s["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                        s["exp_avg_sq"] = torch.zeros_like(p)
                m = [s["exp_avg"] for s in states]
                v = [s["exp_avg_sq"] for s in states]
                steps = [s["step"] for s in states]
                torch._foreach_add_(steps, 1)
                b1, b2 = group["betas"]
                torch._foreach_lerp_(m, grads, 1 - b1)
                torch._foreach_mul_(v, b2)
                torch._foreach_addcmul_(v, grads, grads, value=1 - b2)
                bc1 = [1 - b1 ** s.item() for s in steps]
                bc2 = [1 - b2 ** s.item() for s in steps]
                m_hat = torch._foreach_div(m, bc1)
                v_hat = torch._foreach_div(v, bc2)
                torch._foreach_sqrt_(v_hat)
                torch._foreach_add_(v_hat, group["eps"])
                upd = torch._foreach_div(m_hat, v_hat)
                if group["weight_decay"]:
                    torch._foreach_add_(upd, params, alpha=group["weight_decay"])
                w_norm = torch._foreach_norm(params)
                u_norm = torch._foreach_norm(upd)
                for p, u, wn, un in zip(params, upd, w_norm, u_norm):
                    trust = torch.where((wn > 0) & (un > 0), wn / un, torch.ones_like(wn))
                    self.state[p]["trust"] = trust
                    p.add_(u * trust, alpha=-group["lr"])
            return loss
    return LARS, Lamb


def lars_lamb_program(torch):
    """A few steps of LARS (bias and 1-D params excluded from decay and adaptation through the
    filters, the BYOL way: two param groups) and LAMB (foreach ops, step kept as a tensor), a
    Lookahead wrapper around LAMB (slow weights in its own state, k=2, alpha=0.5), and an EMA
    teacher by ``_foreach_mul_``/``_foreach_add_``; the LARS state_dict round trip into a fresh
    optimizer continues identically."""
    nn, F = torch.nn, torch.nn.functional
    LARS, Lamb = _lars_lamb(torch)
    rng = np.random.default_rng(2913)
    x = normal(torch, rng, 8, 5)
    y = torch.from_numpy(rng.integers(0, 3, 8))

    def make():
        m = nn.Sequential(nn.Linear(5, 6), nn.LayerNorm(6), nn.SiLU(), nn.Linear(6, 3))
        fill_(torch, m, np.random.default_rng(7))
        return m

    res = {}
    model = make()
    regular = [p for p in model.parameters() if p.ndim > 1]
    excluded = [p for p in model.parameters() if p.ndim <= 1]
    lars = LARS([{"params": regular}, {"params": excluded, "weight_decay_filter": True,
                                       "lars_adaptation_filter": True}],
                lr=0.5, weight_decay=1e-2, weight_decay_filter=lambda p: p.ndim == 1,
                lars_adaptation_filter=lambda p: p.ndim == 1)
    for g in lars.param_groups[1:]:
        g["weight_decay_filter"] = g["lars_adaptation_filter"] = (lambda p: True)
    for _ in range(3):
        lars.zero_grad()
        F.cross_entropy(model(x), y).backward()
        lars.step()
    res["lars"] = list(model.parameters())
    sd = lars.state_dict()
    res["lars_sd"] = [str(sorted(sd["state"].keys())), str(sd["param_groups"][1]["params"])]
    twin = make()
    with torch.no_grad():
        for a, b in zip(twin.parameters(), model.parameters()):
            a.copy_(b)
    lars2 = LARS([{"params": [p for p in twin.parameters() if p.ndim > 1]},
                  {"params": [p for p in twin.parameters() if p.ndim <= 1]}],
                 lr=0.5, weight_decay=1e-2)
    lars2.load_state_dict(sd)
    for opt_, net in ((lars, model), (lars2, twin)):
        opt_.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt_.step()
    res["lars_resumed"] = [list(model.parameters())[0], list(twin.parameters())[0]]

    model = make()
    teacher = make()
    lamb = Lamb(model.parameters(), lr=0.05, weight_decay=0.01)
    slow = [p.detach().clone() for p in model.parameters()]
    losses = []
    for step in range(4):
        loss = lamb.step(lambda: _closure(lamb, model, x, y, F))
        losses.append(loss.item())
        if (step + 1) % 2 == 0:   # Lookahead: slow += alpha * (fast - slow); fast = slow
            with torch.no_grad():
                fast = list(model.parameters())
                torch._foreach_add_(slow, torch._foreach_sub(fast, slow), alpha=0.5)
                torch._foreach_copy_(fast, slow)
        with torch.no_grad():
            tp = list(teacher.parameters())
            torch._foreach_mul_(tp, 0.9)
            torch._foreach_add_(tp, list(model.parameters()), alpha=0.1)
    res["lamb_losses"] = losses
    res["lamb"] = list(model.parameters())
    res["teacher"] = list(teacher.parameters())
    res["trust"] = [lamb.state[p]["trust"] for p in model.parameters()]
    res["lamb_step"] = [lamb.state[p]["step"] for p in model.parameters()]
    return res


def _closure(opt, model, x, y, F):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss


def schedulers_program(torch):
    """Composed schedules on one toy optimizer each: SequentialLR (LinearLR warmup then
    CosineAnnealingWarmRestarts), ChainedScheduler (ConstantLR and ExponentialLR), OneCycleLR
    ``three_phase=True`` with momentum cycling of Adam's beta1, ReduceLROnPlateau with cooldown,
    threshold_mode "abs" and min_lr per group, CAWR stepped with fractional epochs, and a
    LambdaLR state_dict round trip (the lambda not saved, its callable-object state kept)."""
    sched = torch.optim.lr_scheduler
    res = {}

    def opt_of(lr=0.1, kind="SGD", **kw):
        return getattr(torch.optim, kind)([torch.nn.Parameter(torch.ones(2))], lr=lr, **kw)

    o = opt_of()
    s = sched.SequentialLR(o, [sched.LinearLR(o, start_factor=0.1, total_iters=3),
                               sched.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2,
                                                                 eta_min=0.01)],
                           milestones=[3])
    lrs = []
    for _ in range(12):
        o.step()
        s.step()
        lrs.append(s.get_last_lr()[0])
    res["sequential"] = lrs

    o = opt_of()
    s = sched.ChainedScheduler([sched.ConstantLR(o, factor=0.5, total_iters=2),
                                sched.ExponentialLR(o, gamma=0.9)], optimizer=o)
    lrs = []
    for _ in range(5):
        o.step()
        s.step()
        lrs.append(o.param_groups[0]["lr"])
    res["chained"] = lrs

    o = opt_of(kind="Adam", betas=(0.95, 0.999))
    s = sched.OneCycleLR(o, max_lr=0.5, total_steps=12, three_phase=True, pct_start=0.25,
                         anneal_strategy="linear", div_factor=10, final_div_factor=100)
    lrs, moms = [], []
    for _ in range(11):
        o.step()
        s.step()
        lrs.append(o.param_groups[0]["lr"])
        moms.append(o.param_groups[0]["betas"][0])
    res["onecycle"] = lrs
    res["onecycle_beta1"] = moms
    res["onecycle_keys"] = sorted(k for k in o.param_groups[0] if "lr" in k or "momentum" in k)

    o = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.ones(1))]},
                         {"params": [torch.nn.Parameter(torch.ones(1))], "lr": 1.0}], lr=0.5)
    s = sched.ReduceLROnPlateau(o, mode="max", factor=0.5, patience=1, cooldown=2,
                                threshold=0.1, threshold_mode="abs", min_lr=[0.1, 0.3])
    lrs = []
    for metric in [1.0, 1.05, 1.08, 1.0, 0.9, 0.9, 0.9, 1.5, 1.55, 1.5, 1.4, 1.3, 1.2]:
        o.step()
        s.step(torch.tensor(metric))
        lrs.append([g["lr"] for g in o.param_groups])
    res["plateau"] = lrs
    res["plateau_state"] = [s.num_bad_epochs, s.cooldown_counter, float(s.best)]
    res["plateau_last"] = s.get_last_lr()

    o = opt_of()
    s = sched.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=1)
    lrs = []
    for i in range(8):
        s.step(i / 3)
        lrs.append(o.param_groups[0]["lr"])
    res["cawr_fractional"] = lrs
    res["cawr_state"] = [s.T_cur, s.T_i]

    class Warm:
        def __init__(self, warm):
            self.warm = warm

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.warm)

    o = opt_of()
    s = sched.LambdaLR(o, [Warm(4)])
    for _ in range(2):
        o.step()
        s.step()
    sd = s.state_dict()
    res["lambda_sd_keys"] = sorted(sd.keys())
    res["lambda_sd_lambdas"] = [str(sd["lr_lambdas"])]
    o2 = opt_of()
    o2.load_state_dict(o.state_dict())
    s2 = sched.LambdaLR(o2, [Warm(10)])
    s2.load_state_dict(sd)
    o2.step()
    s2.step()
    res["lambda_resumed"] = [s2.last_epoch, s2.lr_lambdas[0].warm, o2.param_groups[0]["lr"]]
    return res


def optimizer_state_program(torch):
    """Optimizer plumbing: ``add_param_group`` mid-training (a new head, its own lr), AdamW
    state_dict saved, loaded into an optimizer whose groups were built in another order of
    params of the same shapes, zero_grad(set_to_none=False) versus True, a param group removed
    by editing ``param_groups`` and state pruned; the mismatched-group-size errors."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2914)
    body, head = nn.Linear(4, 4), nn.Linear(4, 2)
    fill_(torch, [*body.parameters(), *head.parameters()], rng)
    x = normal(torch, rng, 6, 4)
    y = torch.from_numpy(rng.integers(0, 2, 6))
    opt = torch.optim.AdamW(body.parameters(), lr=0.01, amsgrad=True)
    res = {}
    for step in range(3):
        if step == 1:
            opt.add_param_group({"params": head.parameters(), "lr": 0.1, "betas": (0.5, 0.9)})
        opt.zero_grad(set_to_none=step != 2)
        F.cross_entropy(head(torch.relu(body(x))), y).backward()
        opt.step()
    res["groups"] = [str(sorted(k for k in g if k != "params")) for g in opt.param_groups]
    res["group_lrs"] = [g["lr"] for g in opt.param_groups]
    sd = opt.state_dict()
    res["sd_params"] = [str(g["params"]) for g in sd["param_groups"]]
    res["sd_state"] = [sd["state"][i]["max_exp_avg_sq"] for i in sorted(sd["state"])]
    res["steps"] = [float(sd["state"][i]["step"]) for i in sorted(sd["state"])]
    # load into a fresh optimizer over copies
    b2, h2 = nn.Linear(4, 4), nn.Linear(4, 2)
    b2.load_state_dict(body.state_dict())
    h2.load_state_dict(head.state_dict())
    opt2 = torch.optim.AdamW([{"params": b2.parameters()},
                              {"params": h2.parameters(), "lr": 0.3}], lr=0.5)
    opt2.load_state_dict(sd)
    res["loaded_lrs"] = [g["lr"] for g in opt2.param_groups]
    res["loaded_betas"] = [g["betas"][0] for g in opt2.param_groups]
    for o, (b, h) in ((opt, (body, head)), (opt2, (b2, h2))):
        o.zero_grad()
        F.cross_entropy(h(torch.relu(b(x))), y).backward()
        o.step()
    res["resumed"] = [head.weight, h2.weight, body.bias, b2.bias]
    # zero_grad(set_to_none=False) keeps zeros
    opt.zero_grad(set_to_none=False)
    res["zeroed"] = [p.grad is None for p in body.parameters()]
    res["zero_vals"] = [float(p.grad.abs().sum()) for p in body.parameters()]
    opt.zero_grad()
    res["none"] = [p.grad is None for p in body.parameters()]
    # bad loads
    bad = torch.optim.AdamW([{"params": b2.parameters()}], lr=0.1)
    for attempt in (sd, {"state": {}, "param_groups": [
            {**sd["param_groups"][0], "params": [0]}, sd["param_groups"][1]]}):
        try:
            bad.load_state_dict(attempt)
            res.setdefault("errors", []).append("ok")
        except ValueError as e:
            res.setdefault("errors", []).append(str(e))
    try:
        opt.add_param_group({"params": head.parameters()})
    except ValueError as e:
        res["dup"] = [str(e)]
    # removing a group and its state, as progressive-freezing code does
    removed = opt.param_groups.pop(1)
    for p in removed["params"]:
        opt.state.pop(p, None)
    res["after_pop"] = [len(opt.state), len(opt.state_dict()["param_groups"])]
    return res


def lookahead_program(torch):
    """timm's Lookahead: an Optimizer subclass that never runs ``Optimizer.__init__`` (it
    shares the base optimizer's param_groups and defaults, adds ``lookahead_*`` group keys,
    keeps the slow weights in the base optimizer's state), driven by CosineAnnealingLR; its
    state_dict is the base's, loaded back, then ``sync_lookahead``."""
    from collections import defaultdict
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2915)

    class Lookahead(torch.optim.Optimizer):
        def __init__(self, base_optimizer, alpha=0.5, k=6):
            defaults = dict(lookahead_alpha=alpha, lookahead_k=k, lookahead_step=0)
            self._base_optimizer = base_optimizer
            self.param_groups = base_optimizer.param_groups
            self.defaults = base_optimizer.defaults
            self.defaults.update(defaults)
            self.state = defaultdict(dict)
            for group in self.param_groups:
                for k, v in defaults.items():
                    group.setdefault(k, v)

        @torch.no_grad()
        def update_slow(self, group):
            for fast_p in group["params"]:
                if fast_p.grad is None:
                    continue
                param_state = self._base_optimizer.state[fast_p]
                if "lookahead_slow_buff" not in param_state:
                    param_state["lookahead_slow_buff"] = torch.empty_like(fast_p)
                    param_state["lookahead_slow_buff"].copy_(fast_p)
                slow = param_state["lookahead_slow_buff"]
                slow.add_(fast_p - slow, alpha=group["lookahead_alpha"])
                fast_p.copy_(slow)

        def sync_lookahead(self):
            for group in self.param_groups:
                self.update_slow(group)

        @torch.no_grad()
        def step(self, closure=None):
            loss = self._base_optimizer.step(closure)
            for group in self.param_groups:
                group["lookahead_step"] += 1
                if group["lookahead_step"] % group["lookahead_k"] == 0:
                    self.update_slow(group)
            return loss

        def state_dict(self):
            return self._base_optimizer.state_dict()

        def load_state_dict(self, state_dict):
            self._base_optimizer.load_state_dict(state_dict)
            self.param_groups = self._base_optimizer.param_groups

    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    fill_(torch, model, rng)
    x, y = normal(torch, rng, 8, 3), normal(torch, rng, 8, 1)
    opt = Lookahead(torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.05), k=2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.01)
    res = {"losses": [], "lrs": []}
    for _ in range(5):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(opt.param_groups[0]["lr"])
    sd = opt.state_dict()
    res["group_keys"] = sorted(sd["param_groups"][0].keys())
    res["slow"] = [sd["state"][i]["lookahead_slow_buff"] for i in sorted(sd["state"])]
    opt.load_state_dict(sd)
    opt.sync_lookahead()
    res["params"] = list(model.parameters())
    res["steps"] = [g["lookahead_step"] for g in opt.param_groups]
    return res


PROGRAMS = [lbfgs_program, swa_program, lars_lamb_program, schedulers_program,
            optimizer_state_program, lookahead_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # LBFGS's line search compares float32 losses: accumulation-order noise moves t
        "lbfgs_program": (1e-4, 1e-5),
    })
