"""Weather and climate models, fourth file (see _weather, _weather_grid, _weather_more): the
training and analysis machinery around the models. Aurora-style Perceiver aggregation of
pressure levels (nn.MultiheadAttention with kdim/vdim), Fourier lead-time encoding, an EMA of the
weights by AveragedModel(get_ema_multi_avg_fn, use_buffers), warmup-cosine LambdaLR and per-
parameter optimizers stepped from post-accumulate-grad hooks; forecast sensitivity to the
initial state (is_grads_batched rows of the Jacobian, forward-mode jacobian, forward-AD
tangents, hvp, vmap(jacrev)) through a rollout kept in a history buffer written in place;
Gauss-Legendre nodes by Golub-Welsch (eigh of the Jacobi matrix) with zonal harmonics from
torch.special.legendre_polynomial_p; station-based inference with a TransformerEncoder in eval
mode with a key padding mask (the nested-tensor path), activations offloaded by save_on_cpu
and packed to float16 by saved_tensors_hooks."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def aurora_program(torch):
    """Perceiver level aggregation (learned latent queries attend over pressure-level tokens
    of another width), Fourier lead-time encoding, EMA model with buffers, LambdaLR warmup +
    cosine, optimizer-in-backward via register_post_accumulate_grad_hook."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(360)
    L, Dl, D, n_lat = 4, 6, 8, 2

    def fourier(x, dim, lower, upper):
        wavelengths = torch.logspace(math.log10(lower), math.log10(upper), dim // 2,
                                     dtype=torch.float64)
        prod = torch.einsum("...i,j->...ij", x.double(), 2 * math.pi / wavelengths)
        return torch.cat((prod.sin(), prod.cos()), dim=-1).float()

    class LevelAggregation(nn.Module):
        def __init__(self):
            super().__init__()
            self.latents = nn.Parameter(torch.zeros(n_lat, D))
            # no in-projection bias: the key bias gets a pure-rounding gradient (softmax is
            # shift invariant) that Adam would amplify to +-lr steps
            self.attn = nn.MultiheadAttention(D, 2, kdim=Dl, vdim=Dl, batch_first=True,
                                              bias=False)
            # no affine LayerNorm: BatchNorm right after it would leave its bias a pure-rounding
            # gradient
            self.norm = nn.LayerNorm(D, elementwise_affine=False)
            self.lead = nn.Linear(D, D)
            self.bn = nn.BatchNorm1d(D)
            self.out = nn.Linear(n_lat * D, 3)

        def forward(self, levels, lead_hours):
            B = levels.shape[0]
            q = self.latents.unsqueeze(0).expand(B, -1, -1)
            z, w = self.attn(q, levels, levels, need_weights=True)
            z = self.bn(self.norm(z + q).transpose(1, 2)).transpose(1, 2)
            z = z + self.lead(fourier(lead_hours, D, 1, 1000)).unsqueeze(1)
            return self.out(z.flatten(1)), w

    model = LevelAggregation()
    fill_(torch, model, rng, 0.3)
    ema = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.8), use_buffers=True)
    opts = {p: torch.optim.AdamW([p], lr=1e-2, weight_decay=0.01) for p in model.parameters()}
    warm, total = 2, 5
    scheds = [torch.optim.lr_scheduler.LambdaLR(
        o, lambda e: (e + 1) / warm if e < warm
        else 0.5 * (1 + math.cos(math.pi * (e - warm) / (total - warm)))) for o in opts.values()]
    order = []

    def hook(p):
        order.append(tuple(p.shape))
        opts[p].step()
        opts[p].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)
    res = {"loss": [], "lr": []}
    for _ in range(4):
        levels = normal(torch, rng, 3, L, Dl)
        lead = torch.tensor([6.0, 24.0, 120.0])
        y = normal(torch, rng, 3, 3)
        pred, w = model(levels, lead)
        loss = F.huber_loss(pred, y, delta=0.5)
        loss.backward()
        for s in scheds:
            s.step()
        ema.update_parameters(model)
        res["loss"].append(loss.item())
        res["lr"].append(scheds[0].get_last_lr()[0])
    res["order"] = [str(s) for s in order[:len(list(model.parameters()))]]
    res["attn_w"] = w.detach()
    res["grads_none"] = [p.grad is None for p in model.parameters()]
    res["ema"] = [p.detach().clone() for p in ema.module.parameters()]
    res["ema_bn"] = [ema.module.bn.running_mean, ema.module.bn.running_var]
    res["n_averaged"] = [int(ema.n_averaged)]
    ema.eval()
    with torch.no_grad():
        res["ema_pred"] = ema(normal(torch, rng, 2, L, Dl), torch.tensor([12.0, 48.0]))[0]
    res["fourier"] = fourier(torch.tensor([0.0, 6.0, 240.0]), D, 1, 1000)
    return res


def sensitivity_program(torch):
    """Sensitivity of a 4-step forecast to its initial state: a history buffer filled in
    place, rows of the Jacobian by is_grads_batched, the full Jacobian by forward mode, JVP by
    dual numbers, a Hessian-vector product of the final energy, per-sample vmap(jacrev), and
    the truncated gradient of a detach-every-2 rollout."""
    nn = torch.nn
    rng = np.random.default_rng(361)
    C, N = 2, 5
    model = nn.Sequential(nn.Conv1d(C, 4, 3, padding=1, padding_mode="circular"), nn.Tanh(),
                          nn.Conv1d(4, C, 1))
    fill_(torch, model, rng, 0.4)
    for p in model.parameters():
        p.requires_grad_(False)

    def step(x):
        return x + 0.5 * model(x)

    def forecast(x0, steps=4):
        buf = torch.zeros(x0.shape[0], steps + 1, C, N)
        buf[:, 0] = x0
        for k in range(steps):
            buf[:, k + 1] = step(buf[:, k])
        return buf

    x0 = normal(torch, rng, 1, C, N).requires_grad_()
    traj = forecast(x0)
    final = traj[:, -1].flatten()
    res = {"traj": traj.detach()}
    rows = torch.eye(final.numel())[[0, 3, 7]]
    res["jac_rows"] = torch.autograd.grad(final, x0, rows, is_grads_batched=True)[0]
    res["jac_fwd"] = torch.autograd.functional.jacobian(
        lambda x: forecast(x)[:, -1], x0.detach(), vectorize=True, strategy="forward-mode")
    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        dual = fwAD.make_dual(x0.detach(), torch.ones_like(x0))
        res["tangent"] = fwAD.unpack_dual(forecast(dual)[:, -1]).tangent
    res["hvp"] = torch.autograd.functional.hvp(
        lambda x: forecast(x)[:, -1].pow(2).sum(), x0.detach(), torch.ones_like(x0))[1]
    res["per_sample"] = torch.func.vmap(torch.func.jacrev(
        lambda x: step(step(x[None]))[0].sum(0)))(normal(torch, rng, 3, C, N))
    x = x0
    loss = 0.0
    for k in range(5):
        x = step(x)
        if (k + 1) % 2 == 0:
            x = x.detach()
        loss = loss + x.pow(2).mean()
    res["truncated_grad"] = torch.autograd.grad(loss, x0)[0]
    return res


def legendre_program(torch):
    """Gauss-Legendre latitudes by Golub-Welsch (eigh of the symmetric Jacobi matrix, weights
    from the first eigenvector components), zonal harmonics P_l(mu) from torch.special, a
    zonal-mean spectral truncation and its gradient, and Chebyshev fits by lstsq."""
    rng = np.random.default_rng(362)
    n, lmax = 8, 6
    k = torch.arange(1, n, dtype=torch.float64)
    beta = k / torch.sqrt(4 * k ** 2 - 1)
    J = torch.diag(beta, 1) + torch.diag(beta, -1)
    mu, vecs = torch.linalg.eigh(J)
    w = 2 * vecs[0] ** 2
    res = {"mu": mu, "w": w, "w_sum": w.sum()}
    ls = torch.arange(lmax, dtype=torch.float64)
    P = torch.special.legendre_polynomial_p(mu.unsqueeze(0), ls.unsqueeze(1))   # (l, n)
    norm = torch.sqrt((2 * ls + 1) / 2).unsqueeze(1)
    Pn = P * norm
    res["gram"] = (Pn * w) @ Pn.T
    field = torch.from_numpy(rng.standard_normal(n)).requires_grad_()
    coeffs = (Pn * w) @ field
    smooth = coeffs[:3] @ Pn[:3]
    res["coeffs"] = coeffs
    res["smooth"] = smooth
    res["smooth_grad"] = torch.autograd.grad(smooth.pow(2).sum(), field)[0]
    x = torch.linspace(-1, 1, 9)
    y = torch.from_numpy(np.tanh(3 * np.linspace(-1, 1, 9)).astype(np.float32))
    T = torch.stack([torch.special.chebyshev_polynomial_t(x, d) for d in range(4)], -1)
    sol = torch.linalg.lstsq(T, y.unsqueeze(-1)).solution
    res["cheb_coef"] = sol.squeeze(-1)
    res["cheb_resid"] = (T @ sol).squeeze(-1) - y
    res["P_float32"] = torch.special.legendre_polynomial_p(mu.float(), 3)
    return res


def stations_program(torch):
    """Station-based nowcasting: a variable number of stations per sample padded and masked;
    training with activations offloaded by save_on_cpu and the MLP's saved tensors packed to
    float16; then eval-mode inference under no_grad where the TransformerEncoder takes its
    nested-tensor path (padded positions come back as zeros)."""
    nn = torch.nn
    rng = np.random.default_rng(363)
    S, D = 5, 8
    counts = [5, 3, 2]
    pad = torch.tensor([[i >= c for i in range(S)] for c in counts])
    feats = normal(torch, rng, 3, S, 4).masked_fill(pad.unsqueeze(-1), 0.0)
    target = normal(torch, rng, 3, S)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(4, D)
            layer = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)
            self.head = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.Linear(D, 1))

        def forward(self, x, mask):
            h = self.encoder(self.embed(x), src_key_padding_mask=mask)
            with torch.autograd.graph.saved_tensors_hooks(lambda t: t.half(),
                                                          lambda t: t.float()):
                return self.head(h).squeeze(-1), h

    model = Net()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res = {"loss": []}
    for _ in range(2):
        with torch.autograd.graph.save_on_cpu(pin_memory=False):
            pred, _ = model(feats, pad)
            loss = ((pred - target) ** 2).masked_fill(pad, 0).sum() / (~pad).sum()
        opt.zero_grad()
        loss.backward()
        res.setdefault("head_grad", []).append(model.head[0].weight.grad.clone())
        opt.step()
        res["loss"].append(loss.item())
    model.eval()
    with torch.no_grad():
        pred, h = model(feats, pad)
    res["eval_pred"] = pred
    res["eval_h"] = h
    res["padded_zero"] = [bool((h[pad] == 0).all())]
    return res


PROGRAMS = [aurora_program, sensitivity_program, legendre_program, stations_program]

# attention stacks trained with Adam and float16-packed saved activations: rounding noise
TOLERANCES = {"aurora_program": (1e-4, 1e-5), "stations_program": (1e-4, 1e-5),
              "sensitivity_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
