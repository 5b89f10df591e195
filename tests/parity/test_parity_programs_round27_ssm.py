"""State-space sequence models written as their reference repositories write them in torch,
run once with `torch` bound to ember and once to PyTorch from the same NumPy data: S4D (complex
diagonal kernel as the exp of a complex Vandermonde product, FFT convolution with rfft/irfft at
n=2L, log-parameterised dt, C stored through view_as_real, the repo's `_optim` attribute
turned into AdamW param groups with no weight decay and a lower lr, CosineAnnealingLR), the
full S4 kernel's bilinear discretisation with a low-rank term, and Mamba (depthwise causal
conv1d padded then sliced, softplus dt with the inverse-softplus bias init, selective scan as
a sequential loop, as a cumsum/logcumsumexp form over complex logs and as a Blelloch scan in a
custom autograd.Function). Sibling files: _ssm_retention (RetNet, Hyena), _ssm_operators (FNO,
DeepONet, Hamiltonian and Lagrangian networks); _ssm_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _dtype(t):
    return str(t.dtype).rsplit(".", 1)[-1]


def _register(module, name, tensor, lr=None):
    """state-spaces' OptimModule.register: a buffer at lr 0, else a parameter tagged `_optim`."""
    if lr == 0.0:
        module.register_buffer(name, tensor)
        return
    module.register_parameter(name, module._lib.nn.Parameter(tensor))
    optim = {"weight_decay": 0.0}
    if lr is not None:
        optim["lr"] = lr
    setattr(getattr(module, name), "_optim", optim)


def _setup_optimizer(torch, model, lr, weight_decay, epochs):
    """state-spaces' example.py: AdamW over the plain parameters, one extra group per distinct
    `_optim` dict, CosineAnnealingLR."""
    all_parameters = list(model.parameters())
    params = [p for p in all_parameters if not hasattr(p, "_optim")]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    hps = [getattr(p, "_optim") for p in all_parameters if hasattr(p, "_optim")]
    hps = [dict(s) for s in sorted(list(dict.fromkeys(frozenset(hp.items()) for hp in hps)))]
    for hp in hps:
        params = [p for p in all_parameters if getattr(p, "_optim", None) == hp]
        optimizer.add_param_group({"params": params, **hp})
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
    groups = [f"Optimizer group {i}: {len(g['params'])} tensors, "
              + ", ".join(f"{k} {g[k]}" for k in ["lr", "weight_decay"])
              for i, g in enumerate(optimizer.param_groups)]
    return optimizer, scheduler, groups


def _s4d_model(torch, rng, H, N, n_layers, d_input, d_output, lr):
    nn = torch.nn

    class S4DKernel(nn.Module):
        _lib = torch

        def __init__(self, d_model, N=64, dt_min=0.001, dt_max=0.1, lr=None):
            super().__init__()
            H = d_model
            log_dt = torch.from_numpy(rng.random(H).astype(np.float32)) * (
                math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
            C = torch.from_numpy((rng.standard_normal((H, N // 2))
                                  + 1j * rng.standard_normal((H, N // 2))).astype(np.complex64)
                                 / np.sqrt(2)).to(torch.cfloat)
            self.C = nn.Parameter(torch.view_as_real(C))
            _register(self, "log_dt", log_dt, lr)
            log_A_real = torch.log(0.5 * torch.ones(H, N // 2))
            A_imag = math.pi * torch.arange(N // 2).unsqueeze(0).expand(H, -1).contiguous()
            _register(self, "log_A_real", log_A_real, lr)
            _register(self, "A_imag", A_imag, lr)

        def forward(self, L):
            dt = torch.exp(self.log_dt)
            C = torch.view_as_complex(self.C)
            A = -torch.exp(self.log_A_real) + 1j * self.A_imag
            dtA = A * dt.unsqueeze(-1)
            K = dtA.unsqueeze(-1) * torch.arange(L, device=A.device)
            C = C * (torch.exp(dtA) - 1.) / A
            K = 2 * torch.einsum('hn, hnl -> hl', C, torch.exp(K)).real
            return K

    class S4D(nn.Module):
        def __init__(self, d_model, d_state=64, transposed=True, **kernel_args):
            super().__init__()
            self.h, self.n, self.transposed = d_model, d_state, transposed
            self.D = nn.Parameter(torch.randn(self.h))
            self.kernel = S4DKernel(self.h, N=self.n, **kernel_args)
            self.activation = nn.GELU()
            self.dropout = nn.Identity()
            self.output_linear = nn.Sequential(
                nn.Conv1d(self.h, 2 * self.h, kernel_size=1), nn.GLU(dim=-2))

        def forward(self, u, **kwargs):
            if not self.transposed:
                u = u.transpose(-1, -2)
            L = u.size(-1)
            k = self.kernel(L=L)
            k_f = torch.fft.rfft(k, n=2 * L)
            u_f = torch.fft.rfft(u, n=2 * L)
            y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]
            y = y + u * self.D.unsqueeze(-1)
            y = self.dropout(self.activation(y))
            y = self.output_linear(y)
            if not self.transposed:
                y = y.transpose(-1, -2)
            return y, None

    class S4Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(d_input, H)
            self.s4_layers, self.norms, self.dropouts = (nn.ModuleList(), nn.ModuleList(),
                                                         nn.ModuleList())
            for _ in range(n_layers):
                self.s4_layers.append(S4D(H, d_state=N, transposed=True, lr=min(0.001, lr)))
                self.norms.append(nn.LayerNorm(H))
                self.dropouts.append(nn.Dropout1d(0.0))
            self.decoder = nn.Linear(H, d_output)

        def forward(self, x):
            x = self.encoder(x)
            x = x.transpose(-1, -2)
            for layer, norm, dropout in zip(self.s4_layers, self.norms, self.dropouts):
                z = x
                z = norm(z.transpose(-1, -2)).transpose(-1, -2)
                z, _ = layer(z)
                z = dropout(z)
                x = z + x
            x = x.transpose(-1, -2)
            x = x.mean(dim=1)
            return self.decoder(x)

    model = S4Model()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("log_dt", "log_A_real", "A_imag", ".C")):
                continue
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)
                                     * 0.3))
    return model


def s4d_program(torch):
    """state-spaces' example.py: an S4D stack on a sequence classification task, AdamW with the
    SSM parameters in their own group, CosineAnnealingLR, a few epochs."""
    rng = np.random.default_rng(2701)
    B, L, d_input, d_output, H, N = 3, 16, 2, 4, 6, 8
    model = _s4d_model(torch, rng, H, N, 2, d_input, d_output, lr=0.01)
    optimizer, scheduler, groups = _setup_optimizer(torch, model, lr=0.01, weight_decay=0.01,
                                                    epochs=4)
    criterion = torch.nn.CrossEntropyLoss()
    res = {"groups": groups, "names": [n for n, _ in model.named_parameters()],
           "buffers": [n for n, _ in model.named_buffers()],
           "C_shape": list(model.s4_layers[0].kernel.C.shape)}
    losses, lrs, correct = [], [], 0
    for epoch in range(4):
        inputs = normal(torch, rng, B, L, d_input)
        targets = torch.tensor(rng.integers(0, d_output, B))
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        if epoch == 0:
            res["C_grad"] = model.s4_layers[0].kernel.C.grad
            res["log_dt_grad"] = model.s4_layers[0].kernel.log_dt.grad
            res["A_imag_grad"] = model.s4_layers[0].kernel.A_imag.grad
        optimizer.step()
        scheduler.step()
        _, predicted = outputs.max(1)
        correct += predicted.eq(targets).sum().item()
        losses.append(loss.item())
        lrs.append([g["lr"] for g in optimizer.param_groups])
    res["losses"], res["lrs"], res["correct"] = losses, lrs, [correct]
    res["params"] = list(model.parameters())
    state = optimizer.state[model.s4_layers[1].kernel.C]
    res["C_state"] = [state["exp_avg"], state["exp_avg_sq"]]
    res["state_step"] = [float(state["step"])]
    model.eval()
    with torch.no_grad():
        k = model.s4_layers[0].kernel(L=L)
        res["kernel"] = k
        res["kernel_dtype"] = [_dtype(k)]
    return res


def s4_nplr_program(torch):
    """The full S4 kernel as the original repo's naive reference computes it: a DPLR state
    matrix A = diag(Lambda) - P P^*, bilinear discretisation with torch.linalg.solve on complex
    matrices, powers of dA by repeated matmul, the kernel as the real part of C dA^k dB, and the
    generating-function form via the Cauchy kernel on roots of unity, then irfft."""
    rng = np.random.default_rng(2702)
    N, L, H = 4, 8, 2
    lam = (-0.5 + 1j * np.pi * np.arange(N)).astype(np.complex64)
    P = (rng.standard_normal((N,)) * 0.3 + 0j).astype(np.complex64)
    B_ = (rng.standard_normal((H, N)) + 1j * rng.standard_normal((H, N))).astype(np.complex64)
    C_ = (rng.standard_normal((H, N)) + 1j * rng.standard_normal((H, N))).astype(np.complex64)
    Lambda = torch.nn.Parameter(torch.view_as_real(torch.from_numpy(lam)).clone())
    Pp = torch.nn.Parameter(torch.view_as_real(torch.from_numpy(P)).clone())
    Bp = torch.nn.Parameter(torch.view_as_real(torch.from_numpy(B_)).clone())
    Cp = torch.nn.Parameter(torch.view_as_real(torch.from_numpy(C_)).clone())
    log_dt = torch.nn.Parameter(torch.tensor([-2.0, -1.5]))
    res = {}

    def naive_kernel():
        lam_c, p_c = torch.view_as_complex(Lambda), torch.view_as_complex(Pp)
        A = torch.diag_embed(lam_c) - p_c.unsqueeze(-1) * p_c.conj().unsqueeze(0)
        eye = torch.eye(N, dtype=A.dtype)
        dt = torch.exp(log_dt).to(A.dtype)[:, None, None]
        BL = eye - dt / 2 * A
        dA = torch.linalg.solve(BL, eye + dt / 2 * A)
        dB = torch.linalg.solve(BL, dt * torch.view_as_complex(Bp).unsqueeze(-1)).squeeze(-1)
        ks, x = [], dB
        c = torch.view_as_complex(Cp)
        for _ in range(L):
            ks.append(torch.einsum("hn,hn->h", c, x))
            x = (dA @ x.unsqueeze(-1)).squeeze(-1)
        return 2 * torch.stack(ks, -1).real, dA

    def gen_fn_kernel(dA):
        # (C (I - dA^L)) (I - dA z)^{-1} dB evaluated at the L-th roots of unity
        omega = torch.exp(-2j * math.pi * torch.arange(L) / L)
        dAL = torch.linalg.matrix_power(dA, L)
        eye = torch.eye(N, dtype=dA.dtype)
        c = torch.view_as_complex(Cp)
        Ct = (c.unsqueeze(-2) @ (eye - dAL)).squeeze(-2)
        dt = torch.exp(log_dt).to(dA.dtype)[:, None, None]
        A = torch.diag_embed(torch.view_as_complex(Lambda))
        p_c = torch.view_as_complex(Pp)
        A = A - p_c.unsqueeze(-1) * p_c.conj().unsqueeze(0)
        dB = torch.linalg.solve(eye - dt / 2 * A, dt * torch.view_as_complex(Bp).unsqueeze(-1))
        Mz = eye - dA.unsqueeze(1) * omega[None, :, None, None]
        kf = (Ct[:, None, None, :] @ torch.linalg.solve(Mz, dB.unsqueeze(1))).reshape(H, L)
        return torch.fft.ifft(kf, n=L).real * 2

    k, dA = naive_kernel()
    k2 = gen_fn_kernel(dA)
    res["kernel"], res["gen_kernel"] = k, k2
    loss = (k ** 2).sum() + (k2 * torch.linspace(0, 1, L)).sum()
    loss.backward()
    res["grads"] = [Lambda.grad, Pp.grad, Bp.grad, Cp.grad, log_dt.grad]
    opt = torch.optim.AdamW([{"params": [Bp, Cp]},
                             {"params": [Lambda, Pp, log_dt], "lr": 1e-3,
                              "weight_decay": 0.0}], lr=1e-2, weight_decay=0.1)
    opt.step()
    res["after"] = [Lambda, Pp, Bp, Cp, log_dt]
    res["dtypes"] = [_dtype(dA), _dtype(k), _dtype(k2)]
    return res


class _MambaArgs:
    d_model, n_layer, vocab_size, d_state, expand, d_conv = 8, 2, 11, 4, 2, 3
    conv_bias, bias = True, False
    d_inner = 16
    dt_rank = math.ceil(8 / 16)


def _mamba(torch, rng, scan):
    """johnma2006/mamba-minimal, with the selective scan chosen by ``scan``."""
    nn, F = torch.nn, torch.nn.functional
    args = _MambaArgs

    class RMSNorm(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d_model))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class MambaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(args.d_model, args.d_inner * 2, bias=args.bias)
            self.conv1d = nn.Conv1d(in_channels=args.d_inner, out_channels=args.d_inner,
                                    bias=args.conv_bias, kernel_size=args.d_conv,
                                    groups=args.d_inner, padding=args.d_conv - 1)
            self.x_proj = nn.Linear(args.d_inner, args.dt_rank + args.d_state * 2, bias=False)
            self.dt_proj = nn.Linear(args.dt_rank, args.d_inner, bias=True)
            A = torch.arange(1, args.d_state + 1).unsqueeze(0).repeat(args.d_inner, 1)
            self.A_log = nn.Parameter(torch.log(A))
            self.A_log._no_weight_decay = True
            self.D = nn.Parameter(torch.ones(args.d_inner))
            self.D._no_weight_decay = True
            self.out_proj = nn.Linear(args.d_inner, args.d_model, bias=args.bias)

        def forward(self, x):
            (b, seqlen, d) = x.shape
            x_and_res = self.in_proj(x)
            (x, res) = x_and_res.split(split_size=[args.d_inner, args.d_inner], dim=-1)
            x = x.permute(0, 2, 1)
            x = self.conv1d(x)[:, :, :seqlen]
            x = x.permute(0, 2, 1)
            x = F.silu(x)
            y = self.ssm(x)
            y = y * F.silu(res)
            return self.out_proj(y)

        def ssm(self, x):
            (d_in, n) = self.A_log.shape
            A = -torch.exp(self.A_log.float())
            D = self.D.float()
            x_dbl = self.x_proj(x)
            (delta, B, C) = x_dbl.split(split_size=[args.dt_rank, n, n], dim=-1)
            delta = F.softplus(self.dt_proj(delta))
            return scan(torch, x, delta, A, B, C, D)

    class ResidualBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.mixer = MambaBlock()
            self.norm = RMSNorm(args.d_model)

        def forward(self, x):
            return self.mixer(self.norm(x)) + x

    class Mamba(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(args.vocab_size, args.d_model)
            self.layers = nn.ModuleList([ResidualBlock() for _ in range(args.n_layer)])
            self.norm_f = RMSNorm(args.d_model)
            self.lm_head = nn.Linear(args.d_model, args.vocab_size, bias=False)
            self.lm_head.weight = self.embedding.weight

        def forward(self, input_ids):
            x = self.embedding(input_ids)
            for layer in self.layers:
                x = layer(x)
            x = self.norm_f(x)
            return self.lm_head(x)

    model = Mamba()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("A_log", ".D")):
                continue
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)
                                     * 0.3))
        for layer in model.layers:
            # mamba_simple's dt init: dt in [dt_min, dt_max], bias = inverse softplus of dt
            dt = torch.exp(torch.from_numpy(rng.random(args.d_inner).astype(np.float32))
                           * (math.log(0.1) - math.log(0.001)) + math.log(0.001)
                           ).clamp(min=1e-4)
            inv_dt = dt + torch.log(-torch.expm1(-dt))
            layer.mixer.dt_proj.bias.copy_(inv_dt)
    layer.mixer.dt_proj.bias._no_reinit = True
    return model


def _scan_sequential(torch, u, delta, A, B, C, D):
    """mamba-minimal's selective_scan: a Python loop over time."""
    (b, seqlen, d_in) = u.shape
    n = A.shape[1]
    deltaA = torch.exp(torch.einsum('bld,dn->bldn', delta, A))
    deltaB_u = torch.einsum('bld,bln,bld->bldn', delta, B, u)
    x = torch.zeros((b, d_in, n), device=deltaA.device)
    ys = []
    for i in range(seqlen):
        x = deltaA[:, i] * x + deltaB_u[:, i]
        y = torch.einsum('bdn,bn->bd', x, C[:, i, :])
        ys.append(y)
    y = torch.stack(ys, dim=1)
    return y + u * D


def _scan_logcumsumexp(torch, u, delta, A, B, C, D):
    """Heinsen's parallel scan: h_t = a*_t + logcumsumexp(log b - a*), in complex logs so that
    negative inputs survive the log."""
    deltaA = torch.einsum('bld,dn->bldn', delta, A)
    deltaB_u = torch.einsum('bld,bln,bld->bldn', delta, B, u)
    a_star = torch.cumsum(deltaA, dim=1)
    log_b = torch.log(deltaB_u.to(torch.complex64))
    log_h = a_star + torch.logcumsumexp(log_b - a_star, dim=1)
    hs = torch.exp(log_h).real
    y = (hs @ C.unsqueeze(-1)).squeeze(3)
    return y + D * u


def _scan_cumsum(torch, u, delta, A, B, C, D):
    """The segsum form (Mamba-2's ssd_minimal): exp of masked pairwise cumsum differences."""
    dA = torch.einsum('bld,dn->bdnl', delta, A)
    T = dA.size(-1)
    x = dA[..., None].repeat(1, 1, 1, 1, T)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    segsum = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=0)
    segsum = segsum.masked_fill(~mask, -torch.inf)
    Lmat = torch.exp(segsum)
    dBu = torch.einsum('bld,bln,bld->bdnl', delta, B, u)
    h = torch.einsum('bdnts,bdns->bdnt', Lmat, dBu)
    y = torch.einsum('bdnt,btn->btd', h, C)
    return y + u * D


def _pscan_function(torch):
    """mamba.py's PScan: a Blelloch up/down sweep done in place on views, inside a custom
    autograd.Function whose backward runs the same scan reversed."""

    def npo2(n):
        return 2 ** math.ceil(math.log2(n))

    def pscan_(A, X):
        # A, X: (B, D, L, N) with L a power of two; in place
        Bsz, D, L, _ = A.size()
        num_steps = int(math.log2(L))
        Aa, Xa = A, X
        for _ in range(num_steps - 2):
            T = Xa.size(2)
            Aa = Aa.view(Bsz, D, T // 2, 2, -1)
            Xa = Xa.view(Bsz, D, T // 2, 2, -1)
            Xa[:, :, :, 1].add_(Aa[:, :, :, 1].mul(Xa[:, :, :, 0]))
            Aa[:, :, :, 1].mul_(Aa[:, :, :, 0])
            Aa, Xa = Aa[:, :, :, 1], Xa[:, :, :, 1]
        if Xa.size(2) == 4:
            Xa[:, :, 1].add_(Aa[:, :, 1].mul(Xa[:, :, 0]))
            Aa[:, :, 1].mul_(Aa[:, :, 0])
            Xa[:, :, 3].add_(Aa[:, :, 3].mul(Xa[:, :, 2] + Aa[:, :, 2].mul(Xa[:, :, 1])))
        elif Xa.size(2) == 2:
            Xa[:, :, 1].add_(Aa[:, :, 1].mul(Xa[:, :, 0]))
            return
        else:
            return
        Aa = A[:, :, 2 ** (num_steps - 2) - 1:L:2 ** (num_steps - 2)]
        Xa = X[:, :, 2 ** (num_steps - 2) - 1:L:2 ** (num_steps - 2)]
        Xa[:, :, 2].add_(Aa[:, :, 2].mul(Xa[:, :, 1]))
        Aa[:, :, 2].mul_(Aa[:, :, 1])
        for k in range(num_steps - 3, -1, -1):
            Aa = A[:, :, 2 ** k - 1:L:2 ** k]
            Xa = X[:, :, 2 ** k - 1:L:2 ** k]
            T = Xa.size(2)
            Aa = Aa.view(Bsz, D, T // 2, 2, -1)
            Xa = Xa.view(Bsz, D, T // 2, 2, -1)
            Xa[:, :, 1:, 0].add_(Aa[:, :, 1:, 0].mul(Xa[:, :, :-1, 1]))
            Aa[:, :, 1:, 0].mul_(Aa[:, :, :-1, 1])

    class PScan(torch.autograd.Function):
        @staticmethod
        def forward(ctx, A_in, X_in):
            L = X_in.size(1)
            if L == npo2(L):
                A, X = A_in.clone(), X_in.clone()
            else:
                A = torch.nn.functional.pad(A_in, (0, 0, 0, 0, 0, npo2(L) - L))
                X = torch.nn.functional.pad(X_in, (0, 0, 0, 0, 0, npo2(L) - L))
            A, X = A.transpose(2, 1), X.transpose(2, 1)
            # the sweep's views need contiguous (B, D, L, N) storage
            A, X = A.contiguous(), X.contiguous()
            pscan_(A, X)
            ctx.save_for_backward(A_in, X)
            return X.transpose(2, 1)[:, :L]

        @staticmethod
        def backward(ctx, grad_output_in):
            A_in, X = ctx.saved_tensors
            L = grad_output_in.size(1)
            if L == npo2(L):
                grad_output = grad_output_in.clone()
            else:
                grad_output = torch.nn.functional.pad(grad_output_in,
                                                      (0, 0, 0, 0, 0, npo2(L) - L))
                A_in = torch.nn.functional.pad(A_in, (0, 0, 0, 0, 0, npo2(L) - L))
            grad_output = grad_output.transpose(2, 1).contiguous()
            A_in = A_in.transpose(2, 1)
            A = torch.nn.functional.pad(A_in[:, :, 1:], (0, 0, 0, 1)).flip(2).contiguous()
            grad_output = grad_output.flip(2).contiguous()
            pscan_(A, grad_output)
            grad_output = grad_output.flip(2)
            Q = torch.zeros_like(X)
            Q[:, :, 1:].add_(X[:, :, :-1] * grad_output[:, :, 1:])
            return Q.transpose(2, 1)[:, :L], grad_output.transpose(2, 1)[:, :L]

    return PScan.apply


def _scan_pscan(torch, u, delta, A, B, C, D):
    """mamba.py's selective_scan with its parallel scan Function."""
    deltaA = torch.exp(delta.unsqueeze(-1) * A)
    deltaB = delta.unsqueeze(-1) * B.unsqueeze(2)
    BX = deltaB * u.unsqueeze(-1)
    hs = _pscan_function(torch)(deltaA, BX)
    y = (hs @ C.unsqueeze(-1)).squeeze(3)
    return y + D * u


def _mamba_program(torch, scan, steps=3):
    rng = np.random.default_rng(2703)
    model = _mamba(torch, rng, scan)
    args = _MambaArgs
    no_decay = [p for p in model.parameters() if getattr(p, "_no_weight_decay", False)]
    decay = [p for p in model.parameters() if not getattr(p, "_no_weight_decay", False)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0, "lr": 5e-3}],
                            lr=1e-2, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    res = {"n_params": [sum(p.numel() for p in model.parameters())],
           "tied": [model.lm_head.weight is model.embedding.weight],
           "no_decay": [len(no_decay)]}
    losses = []
    for step in range(steps):
        ids = torch.tensor(rng.integers(0, args.vocab_size, (2, 9)))
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab_size),
                                                 ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if step == 0:
            res["grads"] = [p.grad for p in model.parameters()]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["params"] = list(model.parameters())
    with torch.no_grad():
        ids = torch.tensor([[1, 2, 3]])
        for _ in range(3):
            nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
    res["generated"] = ids.flatten().tolist()
    return res


def mamba_sequential_program(torch):
    """mamba-minimal trained a few steps with its sequential selective scan."""
    return _mamba_program(torch, _scan_sequential)


def mamba_logcumsumexp_program(torch):
    """The same model with the scan as a complex logcumsumexp (Heinsen)."""
    return _mamba_program(torch, _scan_logcumsumexp)


def mamba_segsum_program(torch):
    """The same model with the scan as Mamba-2's masked cumsum (segsum) form."""
    return _mamba_program(torch, _scan_cumsum)


def mamba_pscan_program(torch):
    """The same model with mamba.py's in-place Blelloch scan in an autograd.Function."""
    return _mamba_program(torch, _scan_pscan)


def scan_forms_agree_program(torch):
    """All four scans of one input agree with each other (checked in the program) and their
    gradients are returned, with odd and power-of-two lengths."""
    rng = np.random.default_rng(2704)
    res = {}
    for L in (5, 8):
        u = normal(torch, rng, 2, L, 3).requires_grad_()
        delta = torch.nn.functional.softplus(normal(torch, rng, 2, L, 3)).requires_grad_()
        A = (-torch.exp(normal(torch, rng, 3, 4) * 0.3)).requires_grad_()
        B, C = normal(torch, rng, 2, L, 4), normal(torch, rng, 2, L, 4)
        D = torch.ones(3)
        outs = []
        for scan in (_scan_sequential, _scan_logcumsumexp, _scan_cumsum, _scan_pscan):
            y = scan(torch, u, delta, A, B, C, D)
            g = torch.autograd.grad((y * torch.linspace(-1, 1, 3)).sum(), (u, delta, A))
            outs.append((y, g))
        res[f"y{L}"] = outs[0][0]
        res[f"grads{L}"] = list(outs[0][1])
        res[f"agree{L}"] = [bool(torch.allclose(o[0], outs[0][0], rtol=1e-4, atol=1e-5))
                            for o in outs]
        res[f"grads_agree{L}"] = [bool(torch.allclose(a, b, rtol=1e-3, atol=1e-4))
                                  for o in outs for a, b in zip(o[1], outs[0][1])]
    return res


PROGRAMS = [s4d_program, s4_nplr_program, mamba_sequential_program, mamba_logcumsumexp_program,
            mamba_segsum_program, mamba_pscan_program, scan_forms_agree_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch,
    # complex exp/log chains of length L accumulate float32 rounding in another order
    {"s4_nplr_program": (1e-4, 1e-5), "mamba_logcumsumexp_program": (1e-4, 1e-5)})
