"""Modern LLM optimizers written as their reference repositories write them in torch, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights: torch.optim.Adafactor
(factored and unfactored states, weight decay, maximize, foreach, state_dict round trip, its
errors), Muon by hand (Newton-Schulz in bfloat16, Nesterov momentum, AdamW for the rest), Lion,
schedule-free AdamW (train/eval parameter swap), SOAP-lite eigenbases through linalg.eigh,
GaLore projections through linalg.svd, AdamW/SGD foreach and fused=False variants with per-group
learning rates, gradient accumulation with a no_sync-like flag, and gradient clipping through
clip_grad_norm_, get_total_norm and clip_grads_with_norm_."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _mlp(torch, rng, d=6, hdn=8, out=3):
    m = torch.nn.Sequential(torch.nn.Linear(d, hdn), torch.nn.GELU(), torch.nn.Linear(hdn, out))
    fill_(torch, m, rng, 0.4)
    return m


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is the result
        return [type(e).__name__, str(e)]
    return ["none"]


def adafactor_program(torch):
    """torch.optim.Adafactor on a small MLP: factored row/col variances for matrices, a full
    variance for vectors, weight decay and maximize variants, lr as a tensor, foreach on and
    off, state names and steps, state_dict round trip, and the constructor's errors."""
    rng = np.random.default_rng(10)
    res = {}
    x, y = normal(torch, rng, 5, 6), normal(torch, rng, 5, 3)
    for name, kw in [("plain", {}), ("wd", {"weight_decay": 0.1, "lr": 0.05}),
                     ("max", {"maximize": True, "beta2_decay": -0.5, "d": 2.0}),
                     ("fe", {"foreach": True, "eps": (1e-3, 1e-2)}),
                     ("tlr", {"lr": torch.tensor(0.02), "foreach": False})]:
        m = _mlp(torch, np.random.default_rng(11))
        opt = torch.optim.Adafactor(m.parameters(), **kw)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        res[name + "_losses"] = losses
        res[name + "_w"] = m[0].weight
        res[name + "_b"] = m[2].bias
    st = opt.state[m[0].weight]
    res["state_keys"] = sorted(st.keys())
    res["row_var"], res["col_var"] = st["row_var"], st["col_var"]
    res["vec_state_keys"] = sorted(opt.state[m[0].bias].keys())
    res["vec_var"] = opt.state[m[0].bias]["variance"]
    res["step"] = float(st["step"])
    res["step_meta"] = [str(st["step"].dtype).rsplit(".", 1)[-1], str(tuple(st["step"].shape))]
    res["shapes"] = [str(tuple(st["row_var"].shape)), str(tuple(st["col_var"].shape))]
    sd = opt.state_dict()
    res["group_keys"] = sorted(sd["param_groups"][0].keys())
    m2 = _mlp(torch, np.random.default_rng(11))
    opt2 = torch.optim.Adafactor(m2.parameters(), lr=0.02)
    opt2.load_state_dict(sd)
    m2.load_state_dict(m.state_dict())
    for opt_, mod in ((opt, m), (opt2, m2)):
        opt_.zero_grad()
        torch.nn.functional.mse_loss(mod(x), y).backward()
        opt_.step()
    res["resumed"] = m2[0].weight
    res["same"] = [bool(torch.equal(m[0].weight, m2[0].weight))]
    p = [torch.nn.Parameter(torch.ones(2))]
    res["err_lr"] = _err(lambda: torch.optim.Adafactor(p, lr=-1.0))
    res["err_eps"] = _err(lambda: torch.optim.Adafactor(p, eps=(None, -1.0)))
    res["err_b2"] = _err(lambda: torch.optim.Adafactor(p, beta2_decay=0.5))
    res["err_wd"] = _err(lambda: torch.optim.Adafactor(p, weight_decay=-0.1))
    res["err_d"] = _err(lambda: torch.optim.Adafactor(p, d=-1.0))
    cplx = torch.nn.Parameter(torch.ones(2, dtype=torch.complex64))
    cplx.grad = torch.ones(2, dtype=torch.complex64)
    res["err_complex"] = _err(lambda: torch.optim.Adafactor([cplx]).step())
    sp = torch.nn.Parameter(torch.ones(2))
    sp.grad = torch.ones(2).to_sparse()
    res["err_sparse"] = _err(lambda: torch.optim.Adafactor([sp]).step())
    return res


def muon_lion_program(torch):
    """Keller Jordan's Muon: quintic Newton-Schulz in bfloat16 on the momentum (Nesterov),
    scaled by max(1, rows/cols) ** 0.5, for the 2-D hidden weights; AdamW for biases and the
    head; then Lion (sign of interpolated momentum, decoupled weight decay) by hand."""
    rng = np.random.default_rng(12)

    def zeropower_via_newtonschulz5(G, steps=5):
        assert G.ndim >= 2
        a, b, c = (3.4445, -4.7750, 2.0315)
        X = G.bfloat16()
        if G.size(-2) > G.size(-1):
            X = X.mT
        X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
        for _ in range(steps):
            A = X @ X.mT
            B = b * A + c * A @ A
            X = a * X + B @ X
        if G.size(-2) > G.size(-1):
            X = X.mT
        return X

    class Muon(torch.optim.Optimizer):
        def __init__(self, params, lr=0.02, weight_decay=0.0, momentum=0.95):
            super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum))

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if len(state) == 0:
                        state["momentum_buffer"] = torch.zeros_like(p)
                    buf = state["momentum_buffer"]
                    grad = p.grad
                    buf.lerp_(grad, 1 - group["momentum"])
                    update = grad.lerp_(buf, group["momentum"])
                    update = zeropower_via_newtonschulz5(update)
                    update *= max(1, p.size(-2) / p.size(-1)) ** 0.5
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    p.add_(update.reshape(p.shape), alpha=-group["lr"])

    class Lion(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
            super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data.mul_(1 - group["lr"] * group["weight_decay"])
                    grad, state = p.grad, self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                    exp_avg = state["exp_avg"]
                    beta1, beta2 = group["betas"]
                    update = exp_avg * beta1 + grad * (1 - beta1)
                    p.add_(update.sign_(), alpha=-group["lr"])
                    exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)
            return loss

    res = {}
    x, y = normal(torch, rng, 8, 6), normal(torch, rng, 8, 3)
    m = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 10),
                            torch.nn.ReLU(), torch.nn.Linear(10, 3))
    fill_(torch, m, rng, 0.4)
    hidden = [p for n, p in m.named_parameters() if p.ndim >= 2 and not n.startswith("4")]
    rest = [p for n, p in m.named_parameters() if p.ndim < 2 or n.startswith("4")]
    # lr a power of two: PyTorch fuses p.add_(u, alpha=-lr), ember rounds twice (see
    # test_parity_fused_rounding_round29), and bf16 Newton-Schulz would amplify that 1 ulp
    opts = [Muon(hidden, lr=2.0 ** -6, weight_decay=0.01),
            torch.optim.AdamW(rest, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)]
    losses = []
    for _ in range(3):
        loss = torch.nn.functional.mse_loss(m(x), y)
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss.backward()
        for o in opts:
            o.step()
        losses.append(loss.item())
    res["muon_losses"] = losses
    res["muon_w0"], res["muon_w2"], res["adam_w4"] = m[0].weight, m[2].weight, m[4].weight
    g = normal(torch, rng, 5, 7)
    o = zeropower_via_newtonschulz5(g)
    res["ns"], res["ns_dtype"] = o, [str(o.dtype).rsplit(".", 1)[-1]]
    res["ns_gram"] = (o.float() @ o.float().mT)
    m2 = _mlp(torch, rng)
    lion = Lion(m2.parameters(), lr=1e-3, weight_decay=0.1)
    losses = []
    for _ in range(3):
        lion.zero_grad()
        losses.append(lion.step(lambda: (lambda l_: (l_.backward(), l_)[1])(
            torch.nn.functional.mse_loss(m2(x[:, :6]), y))).item())
    res["lion_losses"], res["lion_w"] = losses, m2[0].weight
    res["lion_state"] = lion.state[m2[0].weight]["exp_avg"]
    return res


def schedule_free_program(torch):
    """Schedule-free AdamW (Defazio et al.) by hand: y = (1 - beta1) z + beta1 x is where the
    gradient is taken, z takes the Adam step, x averages z with weights lr^2-warmup; train()
    and eval() swap the parameter between y and x with lerp_ under no_grad."""
    rng = np.random.default_rng(13)

    class AdamWScheduleFree(torch.optim.Optimizer):
        def __init__(self, params, lr=0.0025, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                     warmup_steps=2, r=0.0, weight_lr_power=2.0):
            defaults = dict(lr=lr, betas=betas, eps=eps, r=r, k=0, warmup_steps=warmup_steps,
                            train_mode=False, weight_sum=0.0, lr_max=-1.0,
                            weight_lr_power=weight_lr_power, weight_decay=weight_decay)
            super().__init__(params, defaults)

        @torch.no_grad()
        def eval(self):
            for group in self.param_groups:
                if group["train_mode"]:
                    for p in group["params"]:
                        state = self.state[p]
                        if "z" in state:
                            p.lerp_(end=state["z"].to(p.device), weight=1 - 1 / group["betas"][0])
                    group["train_mode"] = False

        @torch.no_grad()
        def train(self):
            for group in self.param_groups:
                if not group["train_mode"]:
                    for p in group["params"]:
                        state = self.state[p]
                        if "z" in state:
                            p.lerp_(end=state["z"].to(p.device), weight=1 - group["betas"][0])
                    group["train_mode"] = True

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                eps, lr, decay = group["eps"], group["lr"], group["weight_decay"]
                beta1, beta2 = group["betas"]
                k = group["k"]
                sched = (k + 1) / group["warmup_steps"] if k < group["warmup_steps"] else 1.0
                bias_correction2 = 1 - beta2 ** (k + 1)
                lr = group["lr"] * sched * math.sqrt(bias_correction2)
                lr_max = group["lr_max"] = max(lr, group["lr_max"])
                weight = (k + 1) ** group["r"] * (lr_max ** group["weight_lr_power"])
                weight_sum = group["weight_sum"] = group["weight_sum"] + weight
                ckp1 = weight / weight_sum if weight_sum != 0 else 0
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    y, grad, state = p.data, p.grad.data, self.state[p]
                    if "z" not in state:
                        state["z"] = torch.clone(y, memory_format=torch.preserve_format)
                        state["exp_avg_sq"] = torch.zeros_like(p.data)
                    z, exp_avg_sq = state["z"], state["exp_avg_sq"]
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    denom = exp_avg_sq.sqrt().add_(eps)
                    grad_normalized = grad.div_(denom)
                    grad_normalized.add_(y, alpha=decay)
                    y.lerp_(end=z, weight=ckp1)
                    y.add_(grad_normalized, alpha=lr * (beta1 * (1 - ckp1) - 1))
                    z.sub_(grad_normalized, alpha=lr)
                group["k"] = k + 1

    res = {}
    m = _mlp(torch, rng)
    x, yt = normal(torch, rng, 8, 6), normal(torch, rng, 8, 3)
    opt = AdamWScheduleFree(m.parameters(), lr=0.01, weight_decay=0.01)
    losses, evals = [], []
    for _ in range(4):
        m.train()
        opt.train()
        loss = torch.nn.functional.mse_loss(m(x), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        m.eval()
        opt.eval()
        with torch.inference_mode():
            evals.append(torch.nn.functional.mse_loss(m(x), yt).item())
    res["losses"], res["evals"] = losses, evals
    res["x"], res["z"] = m[0].weight, opt.state[m[0].weight]["z"]
    res["weight_sum"] = [opt.param_groups[0]["weight_sum"]]
    res["train_mode"] = [opt.param_groups[0]["train_mode"]]
    return res


def soap_galore_program(torch):
    """SOAP-lite: Kronecker factors L = G G^T, R = G^T G accumulated with beta2, eigenbases from
    torch.linalg.eigh (descending, via flip), Adam run in the rotated basis and rotated back;
    GaLore: gradient projected on the top-r left singular vectors from torch.linalg.svd
    (full_matrices=False), Adam moments in the low-rank space, update projected back."""
    rng = np.random.default_rng(14)
    res = {}
    W = torch.nn.Parameter(normal(torch, rng, 6, 4) * 0.5)
    W2 = torch.nn.Parameter(W.detach().clone())
    X, Y = normal(torch, rng, 10, 6), normal(torch, rng, 10, 4)
    L, R = torch.diag(torch.arange(1.0, 7.0)) * 1e-3, torch.diag(torch.arange(1.0, 5.0)) * 1e-3
    m_, v_ = torch.zeros(6, 4), torch.zeros(6, 4)
    losses, eigs = [], []
    for t in range(1, 4):
        loss = ((X @ W - Y) ** 2).mean()
        (g,) = torch.autograd.grad(loss, W)
        with torch.no_grad():
            L.mul_(0.95).add_(g @ g.T, alpha=0.05)
            R.mul_(0.95).add_(g.T @ g, alpha=0.05)
            evl, QL = torch.linalg.eigh(L + 1e-12 * torch.eye(6))
            evr, QR = torch.linalg.eigh(R + 1e-12 * torch.eye(4))
            QL, QR = torch.flip(QL, [1]), torch.flip(QR, [1])
            # eigenvector signs are arbitrary: fix them so the basis is deterministic
            QL = QL * torch.sign(QL[QL.abs().argmax(0), torch.arange(6)])
            QR = QR * torch.sign(QR[QR.abs().argmax(0), torch.arange(4)])
            gr = QL.T @ g @ QR
            m_.mul_(0.9).add_(gr, alpha=0.1)
            v_.mul_(0.95).addcmul_(gr, gr, value=0.05)
            upd = (m_ / (1 - 0.9 ** t)) / ((v_ / (1 - 0.95 ** t)).sqrt() + 1e-8)
            W.sub_(QL @ upd @ QR.T, alpha=0.05)
        losses.append(loss.item())
        eigs.append(evl.flip(0)[:2])
    res["soap_losses"], res["soap_W"], res["soap_eigs"] = losses, W, eigs
    rank, m2, v2, losses = 2, torch.zeros(2, 4), torch.zeros(2, 4), []
    for t in range(1, 4):
        loss = ((X @ W2 - Y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            g = W2.grad
            if t % 2 == 1:
                U, S, Vh = torch.linalg.svd(g, full_matrices=False)
                U = U * torch.sign(U[0:1, :])
                P = U[:, :rank].contiguous()
                res[f"svals_{t}"] = S
            lg = P.T @ g
            m2.mul_(0.9).add_(lg, alpha=0.1)
            v2.mul_(0.999).addcmul_(lg, lg, value=0.001)
            upd = (m2 / (1 - 0.9 ** t)) / ((v2 / (1 - 0.999 ** t)).sqrt() + 1e-8)
            W2.add_(P @ upd, alpha=-0.05 * 0.25)
            W2.grad = None
        losses.append(loss.item())
    res["galore_losses"], res["galore_W"], res["proj_shape"] = losses, W2, [str(tuple(P.shape))]
    return res


def foreach_clip_accum_program(torch):
    """The same model stepped by AdamW and SGD in foreach=True, foreach=False and fused=False
    forms with two param groups at different lrs; gradients accumulated over micro-batches
    with a no_sync-like flag deciding when to clip and step; clipping through clip_grad_norm_
    (foreach, inf norm, error_if_nonfinite), get_total_norm + clip_grads_with_norm_, and
    clip_grad_value_."""
    U = torch.nn.utils
    res = {}
    x, y = normal(torch, np.random.default_rng(15), 8, 6), normal(
        torch, np.random.default_rng(16), 8, 3)
    variants = [("adamw_fe", torch.optim.AdamW, {"foreach": True}),
                ("adamw_loop", torch.optim.AdamW, {"foreach": False}),
                ("adamw_nofuse", torch.optim.AdamW, {"fused": False, "amsgrad": True}),
                ("sgd_fe", torch.optim.SGD, {"foreach": True, "momentum": 0.9,
                                             "nesterov": True}),
                ("sgd_loop", torch.optim.SGD, {"foreach": False, "momentum": 0.9,
                                               "dampening": 0.1})]
    for name, cls, kw in variants:
        m = _mlp(torch, np.random.default_rng(17))
        opt = cls([{"params": m[0].parameters(), "lr": 0.05},
                   {"params": m[2].parameters()}], lr=0.01, **kw)
        norms, accum = [], 2
        for step in range(2):
            for micro in range(accum):
                sync = micro == accum - 1
                xb, yb = x[micro * 4:(micro + 1) * 4], y[micro * 4:(micro + 1) * 4]
                loss = torch.nn.functional.mse_loss(m(xb), yb) / accum
                loss.backward()
                if not sync:
                    continue
                if step == 0:
                    norms.append(U.clip_grad_norm_(m.parameters(), 0.1, foreach=True))
                else:
                    grads = [p.grad for p in m.parameters()]
                    total = U.get_total_norm(grads, norm_type=2.0, foreach=False)
                    U.clip_grads_with_norm_(m.parameters(), 0.1, total)
                    norms.append(total)
                opt.step()
                opt.zero_grad()
        res[name + "_norms"] = norms
        res[name + "_w"] = m[0].weight
        res[name + "_b"] = m[2].bias
    res["state_keys"] = sorted(opt.state[m[0].weight].keys())
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.tensor([3.0, -4.0, 0.5])
    q = torch.nn.Parameter(torch.ones(2))
    q.grad = torch.tensor([1.0, -2.0])
    res["inf_norm"] = U.clip_grad_norm_([p, q], 1.0, norm_type="inf")
    res["after_inf"] = torch.cat([p.grad, q.grad])
    res["total_1"] = U.get_total_norm([p.grad, q.grad], norm_type=1)
    U.clip_grad_value_([p, q], 0.1, foreach=True)
    res["after_value"] = torch.cat([p.grad, q.grad])
    res["none_grad"] = U.clip_grad_norm_([torch.nn.Parameter(torch.ones(2))], 1.0)
    p.grad = torch.tensor([float("inf"), 1.0, 0.0])
    res["err_nonfinite"] = _err(lambda: U.clip_grad_norm_([p], 1.0, error_if_nonfinite=True))
    res["nonfinite_norm"] = [str(U.clip_grad_norm_([q], 1.0, norm_type=0.5).item() > 0)]
    res["err_fused"] = _err(lambda: torch.optim.AdamW([p], fused=True, foreach=True))
    return res


def pure_bf16_program(torch):
    """Pure-bfloat16 training as memory-bound LLM repos do it: the model cast with
    .to(torch.bfloat16), logits upcast to float32 for the loss, and AdamW (foreach),
    Adafactor and SGD with momentum (foreach) stepping bfloat16 parameters and states."""
    F = torch.nn.functional
    res = {}
    x = normal(torch, np.random.default_rng(18), 8, 6).bfloat16()
    y = torch.from_numpy(np.random.default_rng(19).integers(0, 3, 8))
    for name, make in [("adamw", lambda ps: torch.optim.AdamW(ps, lr=1e-2, betas=(0.9, 0.95),
                                                             weight_decay=0.1, foreach=True)),
                       ("adafactor", lambda ps: torch.optim.Adafactor(ps, lr=1e-2)),
                       ("sgd", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                          foreach=True))]:
        m = _mlp(torch, np.random.default_rng(20)).to(torch.bfloat16)
        opt = make(m.parameters())
        losses = []
        for _ in range(3):
            loss = F.cross_entropy(m(x).float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        res[name + "_losses"], res[name + "_w"] = losses, m[0].weight
        res[name + "_dtype"] = [str(m[0].weight.dtype).rsplit(".", 1)[-1]]
    return res


PROGRAMS = [adafactor_program, muon_lion_program, schedule_free_program, soap_galore_program,
            foreach_clip_accum_program, pure_bf16_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 eigh/svd bases then three rotated Adam steps
        "soap_galore_program": (1e-4, 1e-5),
    })
