"""More state-space layers written as their reference code writes them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy data: the Linear Recurrent Unit
(complex parameters made with torch.complex, exp-parameterised eigenvalues, gamma
normalisation, a step loop writing into torch.empty by index), S4's NPLR kernel by the naive
Cauchy product on the roots of unity with the Woodbury correction and irfft, Mamba-2's SSD
(chunked segsum form against a recurrent scan) and Mamba's cached one-step decoding (conv and
SSM states updated in place with roll and copy_ under inference_mode). Siblings: _ssm,
_ssm_retention, _ssm_operators."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _np(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def lru_program(torch):
    """The LRU of Orvieto et al. in its common torch port: AdamW with the eigenvalue
    parameters in a group of their own (lower lr, no decay), complex B and C updated by AdamW,
    the state carried across two calls and detached between them."""
    nn = torch.nn
    rng = np.random.default_rng(2731)
    d_in, d_out, n, T, B = 3, 2, 4, 5, 2
    rmin, rmax, max_phase = 0.4, 0.9, 6.283

    class LRU(nn.Module):
        def __init__(self):
            super().__init__()
            self.out_features = d_out
            u1 = torch.from_numpy(rng.random(n).astype(np.float32))
            u2 = torch.from_numpy(rng.random(n).astype(np.float32))
            self.nu_log = nn.Parameter(torch.log(-0.5 * torch.log(
                u1 * (rmax + rmin) * (rmax - rmin) + rmin ** 2)))
            self.theta_log = nn.Parameter(torch.log(max_phase * u2))
            Lambda_mod = torch.exp(-torch.exp(self.nu_log))
            self.gamma_log = nn.Parameter(torch.log(torch.sqrt(
                torch.ones_like(Lambda_mod) - torch.square(Lambda_mod))))
            B_re = torch.from_numpy(_np(rng, n, d_in)) / math.sqrt(2 * d_in)
            B_im = torch.from_numpy(_np(rng, n, d_in)) / math.sqrt(2 * d_in)
            self.B = nn.Parameter(torch.complex(B_re, B_im))
            C_re = torch.from_numpy(_np(rng, d_out, n)) / math.sqrt(n)
            C_im = torch.from_numpy(_np(rng, d_out, n)) / math.sqrt(n)
            self.C = nn.Parameter(torch.complex(C_re, C_im))
            self.D = nn.Parameter(torch.from_numpy(_np(rng, d_out, d_in)) / math.sqrt(d_in))
            self.state = torch.complex(torch.zeros(B, n), torch.zeros(B, n))

        def forward(self, input):
            Lambda_mod = torch.exp(-torch.exp(self.nu_log))
            Lambda_re = Lambda_mod * torch.cos(torch.exp(self.theta_log))
            Lambda_im = Lambda_mod * torch.sin(torch.exp(self.theta_log))
            Lambda = torch.complex(Lambda_re, Lambda_im)
            gammas = torch.exp(self.gamma_log)
            output = torch.empty([i for i in input.shape[:-1]] + [self.out_features])
            for i, step in enumerate(input):
                self.state = (Lambda * self.state
                              + gammas * (step.to(dtype=self.B.dtype) @ self.B.T))
                out_step = (self.state @ self.C.T).real + step @ self.D.T
                output[i] = out_step
            return output

    model = LRU()
    head = nn.Linear(d_out, 1)
    with torch.no_grad():
        head.weight.copy_(torch.from_numpy(_np(rng, 1, d_out)))
        head.bias.zero_()
    ssm = [model.nu_log, model.theta_log, model.gamma_log]
    rest = [model.B, model.C, model.D] + list(head.parameters())
    opt = torch.optim.AdamW([{"params": rest},
                             {"params": ssm, "lr": 1e-3, "weight_decay": 0.0}],
                            lr=1e-2, weight_decay=0.05)
    res = {"dtypes": [str(p.dtype).rsplit(".", 1)[-1] for p in model.parameters()]}
    losses = []
    for step in range(3):
        x = normal(torch, rng, T, B, d_in)
        y = normal(torch, rng, T, B, 1)
        out = head(model(x))
        loss = ((out - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        if step == 0:
            res["grads"] = [p.grad for p in model.parameters()]
        opt.step()
        model.state = model.state.detach()
        losses.append(loss.item())
    res["losses"], res["params"] = losses, list(model.parameters())
    res["state"] = torch.view_as_real(model.state)
    return res


def s4_cauchy_program(torch):
    """state-spaces' SSKernelNPLR on its naive path: w, B, C, P stored as view_as_real
    parameters, _omega's powers of a complex scalar tensor, cauchy_naive over the conjugate
    pairs, the rank-one Woodbury correction, k_f * 2 / (1 + omega) then irfft, a few AdamW
    steps with the SSM group at a lower lr."""
    nn = torch.nn
    rng = np.random.default_rng(2732)
    H, N2, L = 2, 3, 8

    def _r2c(x):
        return torch.view_as_complex(x)

    def _conj(x):
        return torch.cat([x, x.conj()], dim=-1)

    def _omega(L):
        omega = torch.tensor(np.exp(-2j * np.pi / L), dtype=torch.cfloat)
        omega = omega ** torch.arange(0, L // 2 + 1)
        z = 2 * (1 - omega) / (1 + omega)
        return omega, z

    def cauchy_naive(v, z, w):
        v = _conj(v)
        w = _conj(w)
        cauchy_matrix = v.unsqueeze(-1) / (z.unsqueeze(-2) - w.unsqueeze(-1))
        return torch.sum(cauchy_matrix, dim=-2)

    def c_param(*shape, scale=0.5):
        return nn.Parameter(torch.from_numpy(_np(rng, *shape, 2, scale=scale)))

    w_np = np.stack([-0.5 * np.ones((H, N2)), np.pi * np.arange(N2)[None].repeat(H, 0)], -1)
    params = {"w": nn.Parameter(torch.from_numpy(w_np.astype(np.float32))),
              "B": c_param(1, H, N2), "C": c_param(1, H, N2), "P": c_param(1, H, N2, scale=0.2),
              "log_dt": nn.Parameter(torch.tensor([-2.0, -1.0]))}
    D = nn.Parameter(torch.from_numpy(_np(rng, H)))

    def kernel():
        omega, z = _omega(L)
        w = _r2c(params["w"])
        B, C, P = _r2c(params["B"]), _r2c(params["C"]), _r2c(params["P"])
        Q = P.conj()
        dt = torch.exp(params["log_dt"])
        w = w * dt.unsqueeze(-1)
        B = torch.cat([B, P], dim=-3)
        C = torch.cat([C, Q], dim=-3)
        v = B.unsqueeze(-3) * C.unsqueeze(-4)
        r = cauchy_naive(v, z, w)
        r = r * dt[None, None, :, None]
        k_f = r[:-1, :-1, :, :] - r[:-1, -1:, :, :] * r[-1:, :-1, :, :] / (1 + r[-1:, -1:, :, :])
        k_f = k_f * 2 / (1 + omega)
        return torch.fft.irfft(k_f, n=L)[0, 0]

    opt = torch.optim.AdamW([{"params": [D]},
                             {"params": list(params.values()), "lr": 1e-3,
                              "weight_decay": 0.0}], lr=1e-2, weight_decay=0.1)
    res, losses = {}, []
    for step in range(3):
        u = normal(torch, rng, 2, H, L)
        target = normal(torch, rng, 2, H, L)
        k = kernel()
        y = torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(k, n=2 * L),
                            n=2 * L)[..., :L] + u * D.unsqueeze(-1)
        loss = torch.nn.functional.mse_loss(y, target)
        opt.zero_grad()
        loss.backward()
        if step == 0:
            res["kernel"] = k
            res["grads"] = [p.grad for p in params.values()]
        opt.step()
        losses.append(loss.item())
    res["losses"], res["params"] = losses, list(params.values()) + [D]
    return res


def _segsum(torch, x):
    T = x.size(-1)
    x = x[..., None].repeat(*([1] * x.dim()), T)
    mask = torch.tril(torch.ones(T, T, dtype=bool), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    x_segsum = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(T, T, dtype=bool), diagonal=0)
    return x_segsum.masked_fill(~mask, -torch.inf)


def _ssd(torch, X, A, B, C, block_len):
    """Mamba-2's ssd_minimal_discrete, with einops' rearranges written as reshape/permute."""
    F = torch.nn.functional
    b, T, h, p = X.shape
    c = T // block_len
    X, B, C = [x.reshape(b, c, block_len, *x.shape[2:]) for x in (X, B, C)]
    A = A.reshape(b, c, block_len, h).permute(0, 3, 1, 2)
    A_cumsum = torch.cumsum(A, dim=-1)
    L = torch.exp(_segsum(torch, A))
    Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, X)
    decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_states, X)
    initial_states = torch.zeros_like(states[:, :1])
    states = torch.cat([initial_states, states], dim=1)
    decay_chunk = torch.exp(_segsum(torch, F.pad(A_cumsum[:, :, :, -1], (1, 0))))
    new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    states, final_state = new_states[:, :-1], new_states[:, -1]
    state_decay_out = torch.exp(A_cumsum)
    Y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, states, state_decay_out)
    return (Y_diag + Y_off).reshape(b, T, h, p), final_state


def ssd_program(torch):
    """Mamba-2's SSD layer trained a few steps with its chunked form; the recurrent scan of
    the same inputs agrees (flag), and the final state is returned."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2733)
    b, T, h, p, n, d = 2, 8, 2, 2, 3, 4
    in_proj = nn.Linear(d, h * p + 2 * n + h)
    out_proj = nn.Linear(h * p, d, bias=False)
    A_log = nn.Parameter(torch.log(torch.arange(1, h + 1, dtype=torch.float32)))
    dt_bias = nn.Parameter(torch.tensor([-1.0, -2.0]))
    with torch.no_grad():
        for lin in (in_proj, out_proj):
            for q in lin.parameters():
                q.copy_(torch.from_numpy(_np(rng, *q.shape, scale=0.4)))
    opt = torch.optim.AdamW([{"params": list(in_proj.parameters())
                              + list(out_proj.parameters())},
                             {"params": [A_log, dt_bias], "weight_decay": 0.0}],
                            lr=1e-2, weight_decay=0.1)

    def forward(u):
        zxbcdt = in_proj(u)
        x, Bm, Cm, dt = torch.split(zxbcdt, [h * p, n, n, h], dim=-1)
        dt = F.softplus(dt + dt_bias)
        A = -torch.exp(A_log)
        x = x.reshape(b, T, h, p)
        Bm = Bm.unsqueeze(2).expand(b, T, h, n)
        Cm = Cm.unsqueeze(2).expand(b, T, h, n)
        y, final = _ssd(torch, x * dt.unsqueeze(-1), A * dt, Bm, Cm, block_len=4)
        return out_proj(y.reshape(b, T, h * p)), (x, Bm, Cm, dt, A, y, final)

    res, losses = {}, []
    for step in range(3):
        u = normal(torch, rng, b, T, d)
        out, parts = forward(u)
        loss = (out - u).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    x, Bm, Cm, dt, A, y, final = parts
    with torch.no_grad():
        state = torch.zeros(b, h, p, n)
        ys = []
        for t in range(T):
            dA = torch.exp(dt[:, t] * A)
            state = state * dA[:, :, None, None] + torch.einsum(
                "bhp,bhn->bhpn", x[:, t] * dt[:, t, :, None], Bm[:, t])
            ys.append(torch.einsum("bhpn,bhn->bhp", state, Cm[:, t]))
        rec = torch.stack(ys, 1)
    res["losses"], res["y"], res["final"] = losses, y, final
    res["agree"] = [bool(torch.allclose(rec, y, atol=1e-5)),
                    bool(torch.allclose(state, final, atol=1e-5))]
    res["params"] = [A_log, dt_bias] + list(in_proj.parameters())
    return res


def mamba_decode_program(torch):
    """Mamba's step(): the causal depthwise conv as a rolled conv_state times the squeezed
    conv weight, the SSM state updated with copy_, under inference_mode, checked against the
    full-sequence conv1d and scan; the caches stay inference tensors."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2734)
    d, w, n, T = 4, 3, 2, 6
    conv1d = nn.Conv1d(d, d, w, groups=d, padding=w - 1)
    with torch.no_grad():
        conv1d.weight.copy_(torch.from_numpy(_np(rng, d, 1, w)))
        conv1d.bias.copy_(torch.from_numpy(_np(rng, d)))
    A = -torch.exp(torch.from_numpy(_np(rng, d, n, scale=0.5)))
    xs = normal(torch, rng, 1, T, d)
    Bs, Cs = normal(torch, rng, 1, T, n), normal(torch, rng, 1, T, n)
    dts = F.softplus(normal(torch, rng, 1, T, d))
    with torch.inference_mode():
        conv_state = torch.zeros(1, d, w)
        ssm_state = torch.zeros(1, d, n)
        outs = []
        for t in range(T):
            conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))
            conv_state[:, :, -1] = xs[:, t]
            x = torch.sum(conv_state * conv1d.weight.squeeze(1), dim=-1)
            x = x + conv1d.bias
            x = F.silu(x)
            dA = torch.exp(torch.einsum("bd,dn->bdn", dts[:, t], A))
            dB = torch.einsum("bd,bn->bdn", dts[:, t], Bs[:, t])
            ssm_state.copy_(ssm_state * dA + x.unsqueeze(-1) * dB)
            outs.append(torch.einsum("bdn,bn->bd", ssm_state, Cs[:, t]))
        step_out = torch.stack(outs, 1)
    full_x = F.silu(conv1d(xs.transpose(1, 2))[..., :T]).transpose(1, 2)
    h = torch.zeros(1, d, n)
    ys = []
    for t in range(T):
        h = torch.exp(dts[:, t, :, None] * A) * h + (dts[:, t] * full_x[:, t]).unsqueeze(-1) \
            * Bs[:, t].unsqueeze(1)
        ys.append((h * Cs[:, t].unsqueeze(1)).sum(-1))
    full = torch.stack(ys, 1)
    return {"step": step_out, "full": full, "conv_state": conv_state, "ssm_state": ssm_state,
            "flags": [conv_state.is_inference(), step_out.requires_grad, full.requires_grad,
                      bool(torch.allclose(step_out, full, atol=1e-5))]}


PROGRAMS = [lru_program, s4_cauchy_program, ssd_program, mamba_decode_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
