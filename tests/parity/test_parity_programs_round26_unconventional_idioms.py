"""More idioms of the unconventional-network repositories, run with `torch` bound to ember and to
PyTorch from the same NumPy weights and data: SpikingJelly's stateful MemoryModule (attribute
overrides, reset_net / detach_net with detach_, a scripted surrogate), KAN variants (ChebyKAN,
FastKAN) trained by L-BFGS with a strong-Wolfe line search as pykan trains, a continuous
normalising flow with the exact divergence by double backward (FFJORD), xLSTM's official
parallel mLSTM and sLSTM pointwise kernels with a multi-head group-norm, and RWKV's L2Wrap
Function that returns its input."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def spikingjelly_program(torch):
    """SpikingJelly's MemoryModule (register_memory, __getattr__/__setattr__ over a memory
    dict, reset by deepcopy of the reset values), a multi-step LIF node whose surrogate is a
    scripted heaviside with a sigmoid backward, SeqToANNContainer (flatten(0, 1) then view),
    functional.reset_net over net.modules() and detach_net (detach_ on non-leaf membranes)
    for truncated BPTT, SGD with momentum."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2611)

    @torch.jit.script
    def heaviside(x: torch.Tensor):
        return (x >= 0).to(x)

    class SigmoidSurrogate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            if x.requires_grad:
                ctx.save_for_backward(x)
                ctx.alpha = alpha
            return heaviside(x)

        @staticmethod
        def backward(ctx, grad_output):
            sgax = (ctx.saved_tensors[0] * ctx.alpha).sigmoid_()
            return grad_output * (1.0 - sgax) * sgax * ctx.alpha, None

    class MemoryModule(nn.Module):
        def __init__(self):
            super().__init__()
            self._memories = {}
            self._memories_rv = {}

        def register_memory(self, name, value):
            assert not hasattr(self, name), f"{name} has been set as a member variable!"
            self._memories[name] = value
            self._memories_rv[name] = copy.deepcopy(value)

        def reset(self):
            for key in self._memories.keys():
                self._memories[key] = copy.deepcopy(self._memories_rv[key])

        def __getattr__(self, name):
            if "_memories" in self.__dict__:
                memories = self.__dict__["_memories"]
                if name in memories:
                    return memories[name]
            return super().__getattr__(name)

        def __setattr__(self, name, value):
            _memories = self.__dict__.get("_memories")
            if _memories is not None and name in _memories:
                _memories[name] = value
            else:
                super().__setattr__(name, value)

        def memories(self):
            for _, value in self._memories.items():
                yield value

        def detach(self):
            for key in self._memories.keys():
                if isinstance(self._memories[key], torch.Tensor):
                    self._memories[key].detach_()

    class LIFNode(MemoryModule):
        def __init__(self, tau=2.0, v_threshold=1.0, v_reset=None, alpha=4.0):
            super().__init__()
            self.register_memory("v", 0.0 if v_reset is None else v_reset)
            self.tau, self.v_threshold, self.v_reset, self.alpha = tau, v_threshold, v_reset, alpha

        def extra_repr(self):
            return f"v_threshold={self.v_threshold}, v_reset={self.v_reset}, tau={self.tau}"

        def single_step(self, x):
            if isinstance(self.v, float):
                self.v = torch.full_like(x.data, self.v)
            self.v = self.v + (x - self.v) / self.tau
            spike = SigmoidSurrogate.apply(self.v - self.v_threshold, self.alpha)
            if self.v_reset is None:
                self.v = self.v - spike.detach() * self.v_threshold
            else:
                self.v = (1.0 - spike) * self.v + spike * self.v_reset
            return spike

        def forward(self, x_seq):
            return torch.stack([self.single_step(x) for x in x_seq])

    class SeqToANNContainer(nn.Module):
        def __init__(self, *args):
            super().__init__()
            self.module = args[0] if len(args) == 1 else nn.Sequential(*args)

        def forward(self, x_seq):
            y_shape = [x_seq.shape[0], x_seq.shape[1]]
            y_seq = self.module(x_seq.flatten(0, 1))
            y_shape.extend(y_seq.shape[1:])
            return y_seq.view(y_shape)

    def reset_net(net):
        for m in net.modules():
            if hasattr(m, "reset"):
                m.reset()

    def detach_net(net):
        for m in net.modules():
            if isinstance(m, MemoryModule):
                m.detach()

    net = nn.Sequential(
        SeqToANNContainer(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)),
        LIFNode(),
        SeqToANNContainer(nn.AvgPool2d(2), nn.Flatten(), nn.Linear(16, 3)),
        LIFNode(v_reset=0.0, tau=1.5))
    fill_(torch, net, rng, 0.6)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x = torch.from_numpy((rng.random((2, 6, 3, 1, 4, 4)) < 0.4).astype(np.float32))
    y = torch.tensor([0, 2, 1])
    res = {"repr": [repr(net[1])], "mem_keys": list(net.state_dict().keys())}
    losses = []
    for batch in range(2):
        reset_net(net)
        for chunk in (x[batch, :3], x[batch, 3:]):
            out = net(chunk)
            loss = F.cross_entropy(out.mean(0) * 4, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            detach_net(net)
            losses.append(loss.item())
        res[f"v{batch}"] = net[1].v
        res[f"flags{batch}"] = [net[1].v.requires_grad, net[1].v.is_leaf,
                                net[1].v.grad_fn is None, "v" in net[1].__dict__]
    res.update(loss=losses, params=list(net.parameters()), running=net[0].module[1].running_mean,
               after_reset=[reset_net(net) or net[1].v, net[3].v])
    return res


def kan_variants_program(torch):
    """ChebyKAN (tanh-squashed input, acos, in-place multiply by the degree range, einsum with
    the coefficient tensor) and FastKAN (Gaussian RBFs on a grid, a LayerNorm before them,
    a SplineLinear initialised by trunc_normal_ shapes), trained in float64 by L-BFGS with a
    strong-Wolfe line search and pykan's tiny tolerances."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2612)
    res = {}

    class ChebyKANLayer(nn.Module):
        def __init__(self, input_dim, output_dim, degree):
            super().__init__()
            self.inputdim, self.outdim, self.degree = input_dim, output_dim, degree
            self.cheby_coeffs = nn.Parameter(torch.empty(input_dim, output_dim, degree + 1))
            nn.init.normal_(self.cheby_coeffs, mean=0.0, std=1 / (input_dim * (degree + 1)))
            self.register_buffer("arange", torch.arange(0, degree + 1, 1))

        def forward(self, x):
            x = torch.tanh(x)
            x = x.view((-1, self.inputdim, 1)).expand(-1, -1, self.degree + 1)
            x = x.acos()
            x *= self.arange
            x = x.cos()
            y = torch.einsum("bid,iod->bo", x, self.cheby_coeffs)
            return y.view(-1, self.outdim)

    class RadialBasisFunction(nn.Module):
        def __init__(self, grid_min=-2.0, grid_max=2.0, num_grids=6, denominator=None):
            super().__init__()
            grid = torch.linspace(grid_min, grid_max, num_grids)
            self.grid = torch.nn.Parameter(grid, requires_grad=False)
            self.denominator = denominator or (grid_max - grid_min) / (num_grids - 1)

        def forward(self, x):
            return torch.exp(-((x[..., None] - self.grid) / self.denominator) ** 2)

    class SplineLinear(nn.Linear):
        def __init__(self, in_features, out_features, init_scale=0.1, **kw):
            self.init_scale = init_scale
            super().__init__(in_features, out_features, bias=False, **kw)

        def reset_parameters(self):
            nn.init.trunc_normal_(self.weight, mean=0, std=self.init_scale)

    class FastKANLayer(nn.Module):
        def __init__(self, input_dim, output_dim, num_grids=6):
            super().__init__()
            self.layernorm = nn.LayerNorm(input_dim)
            self.rbf = RadialBasisFunction(num_grids=num_grids)
            self.spline_linear = SplineLinear(input_dim * num_grids, output_dim)
            self.base_linear = nn.Linear(input_dim, output_dim)

        def forward(self, x):
            spline_basis = self.rbf(self.layernorm(x))
            ret = self.spline_linear(spline_basis.view(*spline_basis.shape[:-2], -1))
            return ret + self.base_linear(F.silu(x))

    # pykan's tutorials train in float64 (torch.set_default_dtype); in float32 the line search
    # amplifies rounding (1e-7 in the fifth evaluation) into different steps
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _kan_variants(torch, ChebyKANLayer, FastKANLayer, rng, res)
    finally:
        torch.set_default_dtype(previous)
    return res


def _kan_variants(torch, ChebyKANLayer, FastKANLayer, rng, res):
    """Train each KAN variant by L-BFGS in the default dtype; results into ``res``."""
    nn, F = torch.nn, torch.nn.functional
    x = torch.from_numpy(rng.uniform(-1, 1, (24, 2)))
    y = torch.sin(2 * x[:, :1]) + x[:, 1:] ** 2
    res["dtypes"] = [x.dtype == torch.float64, torch.linspace(0, 1, 3).dtype == torch.float64]
    for name, model in [("cheby", nn.Sequential(ChebyKANLayer(2, 4, 3), nn.LayerNorm(4),
                                                 ChebyKANLayer(4, 1, 3))),
                        ("fast", nn.Sequential(FastKANLayer(2, 3), FastKANLayer(3, 1)))]:
        res[f"{name}_shapes"] = [str(tuple(p.shape)) for p in model.parameters()]
        res[f"{name}_trainable"] = [p.requires_grad for p in model.parameters()]
        fill_(torch, [p for p in model.parameters() if p.requires_grad], rng, 0.3)
        opt = torch.optim.LBFGS(model.parameters(), lr=1, history_size=10,
                                line_search_fn="strong_wolfe", tolerance_grad=1e-32,
                                tolerance_change=1e-32)
        losses = []

        def closure():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss

        for _ in range(3):
            losses.append(opt.step(closure).item())
        state = opt.state[opt._params[0]]
        res[f"{name}_loss"] = losses
        res[f"{name}_evals"] = [state["func_evals"], state["n_iter"]]
        res[f"{name}_params"] = [p for p in model.parameters() if p.requires_grad]
        res[f"{name}_dtype"] = [p.dtype == torch.float64 for p in model.parameters()]


def cnf_program(torch):
    """A continuous normalising flow (FFJORD): the log-density change integrated with the
    state by RK4, the divergence exact by one autograd.grad(create_graph=True) per dimension
    and also by Hutchinson's estimator with fixed Rademacher noise, a standard-normal base
    log-probability, trained by Adam through the double backward."""
    nn = torch.nn
    rng = np.random.default_rng(2613)

    class ODEnet(nn.Module):
        def __init__(self, dim=2, hidden=8):
            super().__init__()
            self.l1, self.l2 = nn.Linear(dim + 1, hidden), nn.Linear(hidden + 1, dim)

        def forward(self, t, z):
            tt = torch.full_like(z[:, :1], t)
            h = torch.nn.functional.softplus(self.l1(torch.cat([z, tt], 1)))
            return self.l2(torch.cat([h, tt], 1))

    def divergence_exact(f, z):
        div = 0.0
        for i in range(z.shape[1]):
            div += torch.autograd.grad(f[:, i].sum(), z, create_graph=True)[0][:, i]
        return div

    def divergence_hutch(f, z, e):
        e_dzdx = torch.autograd.grad(f, z, e, create_graph=True)[0]
        return (e_dzdx * e).view(z.shape[0], -1).sum(dim=1)

    class CNF(nn.Module):
        def __init__(self, exact=True):
            super().__init__()
            self.odefunc, self.exact, self.e = ODEnet(), exact, None

        def dynamics(self, t, z):
            with torch.set_grad_enabled(True):
                z = z if z.requires_grad else z.requires_grad_(True)
                dz = self.odefunc(t, z)
                div = divergence_exact(dz, z) if self.exact else divergence_hutch(dz, z, self.e)
            return dz, -div

        def forward(self, z, steps=4):
            logp = torch.zeros(z.shape[0])
            h = 1.0 / steps
            for i in range(steps):
                t = i * h
                k1z, k1p = self.dynamics(t, z)
                k2z, k2p = self.dynamics(t + h / 2, z + h / 2 * k1z)
                k3z, k3p = self.dynamics(t + h / 2, z + h / 2 * k2z)
                k4z, k4p = self.dynamics(t + h, z + h * k3z)
                z = z + h / 6 * (k1z + 2 * k2z + 2 * k3z + k4z)
                logp = logp + h / 6 * (k1p + 2 * k2p + 2 * k3p + k4p)
            return z, logp

    def standard_normal_logprob(z):
        log_z = -0.5 * math.log(2 * math.pi)
        return torch.sum(log_z - z.pow(2) / 2, 1, keepdim=True)

    res = {}
    x = normal(torch, rng, 6, 2) * 0.5 + torch.tensor([1.0, -0.5])
    for exact in (True, False):
        cnf = CNF(exact)
        fill_(torch, cnf, rng, 0.5)
        cnf.e = torch.from_numpy(np.sign(rng.standard_normal((6, 2))).astype(np.float32))
        opt = torch.optim.Adam(cnf.parameters(), lr=1e-2)
        losses = []
        for _ in range(2):
            z, delta_logp = cnf(x)
            logpx = standard_normal_logprob(z).squeeze(1) - delta_logp
            loss = -logpx.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        res[f"loss_{exact}"] = losses
        res[f"params_{exact}"] = list(cnf.parameters())
        res[f"z_{exact}"] = z
    return res


def xlstm_official_program(torch):
    """xLSTM's reference kernels: parallel_stabilized_simple (cumsum of logsigmoid forget
    gates, a repeated/transposed log-forget matrix, torch.where with -inf, max stabiliser),
    the sLSTM pointwise step (unbind of a 4-way view, the torch.all(n == 0) first-step branch,
    torch.stack of states), a causal conv1d by padding and slicing, and a multi-head layer
    norm by F.group_norm over the heads."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2614)

    def parallel_stabilized_simple(queries, keys, values, igate_preact, fgate_preact, eps=1e-6):
        B, NH, S, DH = queries.shape
        log_fgates = F.logsigmoid(fgate_preact)
        ltr = torch.tril(torch.ones((S, S), dtype=torch.bool))
        log_fgates_cumsum = torch.cat([torch.zeros((B, NH, 1, 1)),
                                       torch.cumsum(log_fgates, dim=-2)], dim=-2)
        rep_log_fgates_cumsum = log_fgates_cumsum.repeat(1, 1, 1, S + 1)
        _log_fg_matrix = rep_log_fgates_cumsum - rep_log_fgates_cumsum.transpose(-2, -1)
        log_fg_matrix = torch.where(ltr, _log_fg_matrix[:, :, 1:, 1:], -float("inf"))
        log_D_matrix = log_fg_matrix + igate_preact.transpose(-2, -1)
        max_log_D, _ = torch.max(log_D_matrix, dim=-1, keepdim=True)
        D_matrix = torch.exp(log_D_matrix - max_log_D)
        keys_scaled = keys / math.sqrt(DH)
        C_matrix = (queries @ keys_scaled.transpose(-2, -1)) * D_matrix
        normalizer = torch.maximum(C_matrix.sum(dim=-1, keepdim=True).abs(),
                                   torch.exp(-max_log_D))
        return (C_matrix / (normalizer + eps)) @ values

    def slstm_forward_pointwise(Wx, Ry, b, states):
        raw = Wx + Ry + b
        y, c, n, m = torch.unbind(states.view(4, states.shape[1], -1), dim=0)
        iraw, fraw, zraw, oraw = torch.unbind(raw.view(raw.shape[0], 4, -1), dim=1)
        logfplusm = m + F.logsigmoid(fraw)
        if torch.all(n == 0.0):
            mnew = iraw
        else:
            mnew = torch.max(iraw, logfplusm)
        ogate = torch.sigmoid(oraw)
        igate = torch.exp(iraw - mnew)
        fgate = torch.exp(logfplusm - mnew)
        cnew = fgate * c + igate * torch.tanh(zraw)
        nnew = fgate * n + igate
        ynew = ogate * cnew / nnew
        return (torch.stack((ynew, cnew, nnew, mnew), dim=0),
                torch.stack((igate, fgate, zraw, ogate), dim=0))

    class CausalConv1d(nn.Module):
        def __init__(self, feature_dim, kernel_size=3):
            super().__init__()
            self.pad = kernel_size - 1
            self.conv = nn.Conv1d(feature_dim, feature_dim, kernel_size, padding=self.pad,
                                  groups=feature_dim)

        def forward(self, x):
            y = self.conv(x.transpose(2, 1))
            return y[:, :, :-self.pad].transpose(2, 1)

    class MultiHeadLayerNorm(nn.LayerNorm):
        def forward(self, input):
            B, NH, S, DH = input.shape
            gn_in_1 = input.transpose(1, 2).reshape(B * S, NH * DH)
            out = F.group_norm(gn_in_1, num_groups=NH, weight=self.weight, bias=self.bias,
                               eps=self.eps)
            return out.view(B, S, NH, DH).transpose(1, 2)

    B, NH, S, DH, D = 2, 2, 5, 3, 6
    conv = CausalConv1d(D)
    qkv = nn.Linear(D, 3 * NH * DH, bias=False)
    gates = nn.Linear(3 * NH * DH, 2 * NH)
    norm = MultiHeadLayerNorm(NH * DH)
    # no input bias: from the zero state a constant input-gate shift cancels in c / n, a zero
    # gradient that Adam would turn into a step from rounding noise
    W = nn.Linear(D, 4 * D, bias=False)
    R = nn.Parameter(torch.empty(D, 4 * D))
    out = nn.Linear(NH * DH + D, 1)
    mods = nn.ModuleList([conv, qkv, gates, norm, W, out])
    params = list(mods.parameters()) + [R]
    fill_(torch, params, rng, 0.4)
    opt = torch.optim.Adam(params, lr=5e-3)
    x = normal(torch, rng, B, S, D)
    target = normal(torch, rng, B, 1)
    res, losses = {}, []
    for _ in range(3):
        xc = F.silu(conv(x))
        q, k, v = qkv(xc).view(B, S, 3, NH, DH).permute(2, 0, 3, 1, 4).unbind(0)
        g = gates(torch.cat([q, k, v], dim=-1).transpose(1, 2).reshape(B, S, -1))
        ig, fg = g.view(B, S, 2, NH).permute(2, 0, 3, 1).unsqueeze(-1).unbind(0)
        h = norm(parallel_stabilized_simple(q, k, v, ig, fg))
        states = torch.zeros(4, B, D)
        for t in range(S):
            states, gates_t = slstm_forward_pointwise(W(x[:, t]), states[0] @ R, 0.0,
                                                       states)
        feat = torch.cat([h[:, :, -1].reshape(B, -1), states[0]], dim=-1)
        loss = F.mse_loss(out(feat), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res.update(loss=losses, h=h, states=states, gates=gates_t, params=params)
    return res


def rwkv_l2wrap_program(torch):
    """RWKV-LM's L2Wrap (a Function whose forward returns the loss it was given and whose
    backward adds a push of the largest logit towards 0 by scatter_), the head-qk copy
    mechanism (a masked_fill with a tril buffer, @ one_hot(...).float()), and per-group
    learning-rate scales in the optimizer's param groups."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2615)

    class L2Wrap(torch.autograd.Function):
        @staticmethod
        def forward(ctx, loss, y):
            ctx.save_for_backward(y)
            return loss

        @staticmethod
        def backward(ctx, grad_output):
            y = ctx.saved_tensors[0]
            factor = 1e-4 / (y.shape[0] * y.shape[1])
            maxx, ids = torch.max(y, -1, keepdim=True)
            gy = torch.zeros_like(y)
            gy.scatter_(-1, ids, maxx * factor)
            return (grad_output, gy)

    V, C, T, QK = 7, 6, 5, 4
    emb, head = nn.Embedding(V, C), nn.Linear(C, V, bias=False)
    head_q, head_k = nn.Linear(C, QK, bias=False), nn.Linear(C, QK, bias=False)
    mods = nn.ModuleList([emb, head, head_q, head_k])
    mods.register_buffer("copy_mask", torch.tril(torch.ones(T, T)))
    fill_(torch, mods, rng, 0.5)
    opt = torch.optim.Adam([{"params": [emb.weight, head.weight], "my_lr_scale": 1.0},
                            {"params": [head_q.weight, head_k.weight], "my_lr_scale": 3.0}],
                           lr=1e-2, betas=(0.9, 0.99), eps=1e-8)
    idx = torch.from_numpy(rng.integers(0, V, (2, T + 1)))
    res, losses = {}, []
    for step in range(3):
        for group in opt.param_groups:
            group["lr"] = 1e-2 * group["my_lr_scale"] * (0.5 ** step)
        x = emb(idx[:, :-1])
        q, k = head_q(x)[:, :T, :], head_k(x)[:, :T, :]
        c = (q @ k.transpose(-2, -1)) * (1.0 / QK)
        c = c.masked_fill(mods.copy_mask[:T, :T] == 0, 0)
        c = c @ F.one_hot(idx[:, :-1], num_classes=V).float()
        logits = head(x) + c
        loss = F.cross_entropy(logits.view(-1, V), idx[:, 1:].reshape(-1))
        wrapped = L2Wrap.apply(loss, logits)
        opt.zero_grad()
        wrapped.backward()
        res[f"grad{step}"] = head.weight.grad.clone()
        opt.step()
        losses.append(wrapped.item())
    res.update(loss=losses, params=list(mods.parameters()),
               lrs=[g["lr"] for g in opt.param_groups],
               node=[type(wrapped.grad_fn).__name__, wrapped is loss],
               keys=sorted(opt.state_dict()["param_groups"][1].keys()))
    return res


PROGRAMS = [spikingjelly_program, kan_variants_program, cnf_program, xlstm_official_program,
            rwkv_l2wrap_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
