"""Sparse autoencoders and influence functions written as SAELens and the influence-function
repositories write them in torch, run once with `torch` bound to ember and once to PyTorch from
the same NumPy weights and data: an untied ReLU SAE with b_dec subtraction, L1 penalty scaled by
decoder norms, ghost grads on dead neurons, the decoder-norm constraint by in-place renorm
under no_grad and the gradient component parallel to the decoder directions removed before
Adam steps with a warmup LambdaLR; a tied SAE (decoder ``W_enc.t()``); a top-k SAE scattering
the kept activations into zeros, with an AuxK loss on dead latents; and influence functions by
Hessian-vector products (``autograd.grad(..., create_graph=True)`` then a second grad with
grad_outputs) solved by conjugate gradient, checked against ``autograd.functional.hvp`` and
``torch.func`` per-sample gradients (TracIn)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _sae(torch, d_in, d_sae, rng, tied=False):
    """SAELens's training SAE: W_enc, b_enc, W_dec (rows unit norm at init), b_dec."""
    nn = torch.nn

    class SAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_enc = nn.Parameter(torch.from_numpy(
                rng.standard_normal((d_in, d_sae)).astype(np.float32) * 0.3))
            self.b_enc = nn.Parameter(torch.zeros(d_sae))
            if not tied:
                w = rng.standard_normal((d_sae, d_in)).astype(np.float32)
                self.W_dec = nn.Parameter(torch.from_numpy(w))
                with torch.no_grad():
                    self.W_dec.data /= torch.norm(self.W_dec.data, dim=1, keepdim=True)
            self.b_dec = nn.Parameter(torch.zeros(d_in))

        @property
        def decoder(self):
            return self.W_enc.t() if tied else self.W_dec

        def encode(self, x):
            hidden_pre = (x - self.b_dec) @ self.W_enc + self.b_enc
            return hidden_pre, torch.nn.functional.relu(hidden_pre)

        def forward(self, x):
            hidden_pre, acts = self.encode(x)
            return acts @ self.decoder + self.b_dec, acts, hidden_pre

        @torch.no_grad()
        def set_decoder_norm_to_unit_norm(self):
            self.W_dec.data /= torch.norm(self.W_dec.data, dim=1, keepdim=True)

        @torch.no_grad()
        def remove_gradient_parallel_to_decoder_directions(self):
            parallel = torch.einsum("sd,sd->s", self.W_dec.grad, self.W_dec.data)
            self.W_dec.grad -= torch.einsum("s,sd->sd", parallel, self.W_dec.data)
    return SAE()


def sae_program(torch):
    """SAELens-style training: b_dec initialised to the data mean, MSE + L1 (feature
    activations weighted by decoder row norms), ghost-grad loss on neurons not fired for a
    window (exp of hidden_pre, rescaled by detached norms, NaN-guarded with torch.where), the
    decoder-parallel gradient removed, Adam with a warmup LambdaLR, the decoder renormed in
    place after each step; L0, explained variance and the dead mask tracked; the tied variant
    trained alongside."""
    F = torch.nn.functional
    rng = np.random.default_rng(2921)
    d_in, d_sae, n = 6, 12, 32
    data = normal(torch, rng, n, d_in) + 0.5
    res = {}
    for tied in (False, True):
        sae = _sae(torch, d_in, d_sae, rng, tied=tied)
        with torch.no_grad():
            sae.b_dec.data = data.mean(0)
        opt = torch.optim.Adam(sae.parameters(), lr=3e-3, betas=(0.9, 0.999))
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 3))
        steps_since_fired = torch.zeros(d_sae)
        dead_window = 1
        losses, l0s, lrs = [], [], []
        for step in range(4):
            batch = data[(step * 8) % n:(step * 8) % n + 8]
            opt.zero_grad()
            out, acts, hidden_pre = sae(batch)
            per_item_mse = F.mse_loss(out, batch, reduction="none")
            mse = per_item_mse.sum(-1).mean()
            l1 = (acts * sae.decoder.norm(dim=1)).sum(-1).mean()
            loss = mse + 0.05 * l1
            dead = steps_since_fired > dead_window
            if not tied and dead.any():
                residual = batch - out
                l2_resid = torch.norm(residual, dim=-1)
                ghost = torch.exp(hidden_pre[:, dead]) @ sae.W_dec[dead, :]
                scale = l2_resid / (1e-6 + torch.norm(ghost, dim=-1) * 2)
                ghost = ghost * scale[:, None].detach()
                ghost_mse = F.mse_loss(ghost, residual.detach(), reduction="none").sum(-1)
                rescale = (per_item_mse.sum(-1) / (ghost_mse + 1e-6)).detach()
                ghost_mse = rescale * ghost_mse
                ghost_mse = torch.where(torch.isnan(ghost_mse), torch.zeros_like(ghost_mse),
                                        ghost_mse)
                loss = loss + ghost_mse.mean()
            loss.backward()
            if not tied:
                sae.remove_gradient_parallel_to_decoder_directions()
            opt.step()
            sched.step()
            if not tied:
                sae.set_decoder_norm_to_unit_norm()
            fired = (acts > 0).float().sum(0) > 0
            steps_since_fired += 1
            steps_since_fired[fired] = 0
            losses.append(loss.item())
            l0s.append((acts > 0).float().sum(-1).mean().item())
            lrs.append(sched.get_last_lr()[0])
        tag = "tied_" if tied else ""
        with torch.no_grad():
            out, acts, _ = sae(data)
            res[tag + "explained_var"] = 1 - (data - out).var(0).sum() / data.var(0).sum()
        res[tag + "losses"] = losses
        res[tag + "l0"] = l0s
        res[tag + "lrs"] = lrs
        res[tag + "params"] = [p.detach().clone() for p in sae.parameters()]
        res[tag + "dead"] = steps_since_fired
    return res


def topk_sae_program(torch):
    """A top-k SAE (OpenAI / SAELens TopK): ``topk`` of the pre-activations, ReLU of the kept
    values scattered into ``zeros_like``; the AuxK loss reconstructing the residual from the top
    dead latents (dead mask by ``masked_fill`` of -inf); normalised MSE; the decoder renormed
    and the parallel gradient removed with ``W_dec.grad.sub_``; plus a JumpReLU threshold
    forward with a straight-through rectangle estimator as an ``autograd.Function``."""
    rng = np.random.default_rng(2922)
    d_in, d_sae, k, n = 6, 16, 3, 24
    data = normal(torch, rng, n, d_in)
    sae = _sae(torch, d_in, d_sae, rng)
    opt = torch.optim.Adam(sae.parameters(), lr=5e-3)
    dead = torch.zeros(d_sae, dtype=torch.bool)
    dead[::3] = True
    res = {"losses": [], "aux": []}
    for step in range(3):
        opt.zero_grad()
        hidden_pre = (data - sae.b_dec) @ sae.W_enc + sae.b_enc
        topk = torch.topk(hidden_pre, k, dim=-1)
        acts = torch.zeros_like(hidden_pre).scatter(-1, topk.indices, torch.relu(topk.values))
        out = acts @ sae.W_dec + sae.b_dec
        err = data - out
        mse = err.pow(2).sum(-1).mean() / (data - data.mean(0)).pow(2).sum(-1).mean()
        aux_pre = hidden_pre.masked_fill(~dead, float("-inf"))
        aux = torch.topk(aux_pre, 2, dim=-1, sorted=False)
        aux_acts = torch.zeros_like(hidden_pre).scatter_(-1, aux.indices, aux.values.relu())
        aux_loss = (aux_acts @ sae.W_dec - err.detach()).pow(2).sum(-1).mean()
        loss = mse + aux_loss / 32
        loss.backward()
        with torch.no_grad():
            parallel = (sae.W_dec.grad * sae.W_dec.data).sum(-1, keepdim=True)
            sae.W_dec.grad.sub_(parallel * sae.W_dec.data)
        opt.step()
        with torch.no_grad():
            sae.W_dec.div_(sae.W_dec.norm(dim=-1, keepdim=True))
        res["losses"].append(loss.item())
        res["aux"].append(aux_loss.item())
    res["indices"] = torch.sort(topk.indices, dim=-1).values.flatten().tolist()
    res["params"] = list(sae.parameters())

    class Step(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, threshold, bandwidth):
            ctx.save_for_backward(x, threshold)
            ctx.bandwidth = bandwidth
            return (x > threshold).to(x.dtype)

        @staticmethod
        def backward(ctx, grad_output):
            x, threshold = ctx.saved_tensors
            window = ((x - threshold).abs() < ctx.bandwidth / 2).to(x.dtype)
            grad_threshold = -(1.0 / ctx.bandwidth) * window * grad_output
            return torch.zeros_like(x), grad_threshold.sum(0), None

    log_threshold = torch.full((d_sae,), -1.0, requires_grad=True)
    hp = ((data - sae.b_dec) @ sae.W_enc + sae.b_enc).detach().requires_grad_()
    threshold = log_threshold.exp()
    feats = hp.relu() * Step.apply(hp, threshold, 0.5)
    l0 = Step.apply(hp, threshold, 0.5).sum(-1).mean()
    (feats.sum() + l0).backward()
    res["jump_feats"] = feats
    res["log_threshold_grad"] = log_threshold.grad
    res["hp_grad"] = hp.grad
    return res


def influence_program(torch):
    """Influence functions (Koh & Liang) on a small classifier: the test-loss gradient, the
    damped Hessian-vector product by double backward (first grads with ``create_graph=True``,
    second ``autograd.grad`` with ``grad_outputs``), conjugate gradient for the inverse-HVP,
    influence scores ``-ihvp . grad_train_i`` for each training point; the HVP checked against
    ``torch.autograd.functional.hvp`` on flattened parameters with ``functional_call``; TracIn
    scores from ``torch.func.vmap(grad(...))`` per-sample gradients."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2923)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    fill_(torch, model, rng, scale=0.5)
    model.double()      # CG on a damped, ill-conditioned Hessian: float64 as the repos use
    params = [p for p in model.parameters() if p.requires_grad]
    x_tr, y_tr = normal(torch, rng, 10, 3).double(), torch.from_numpy(rng.integers(0, 2, 10))
    x_te, y_te = normal(torch, rng, 2, 3).double(), torch.tensor([0, 1])
    damping = 0.01

    def train_loss():
        return F.cross_entropy(model(x_tr), y_tr) + 1e-3 * sum(p.pow(2).sum() for p in params)

    def hvp(v):
        grads = torch.autograd.grad(train_loss(), params, create_graph=True)
        hv = torch.autograd.grad(grads, params, grad_outputs=v)
        return [h + damping * vi for h, vi in zip(hv, v)]

    def dot(a, b):
        return sum((ai * bi).sum() for ai, bi in zip(a, b))

    g_test = torch.autograd.grad(F.cross_entropy(model(x_te), y_te), params)
    x = [torch.zeros_like(g) for g in g_test]
    r = [g.clone() for g in g_test]
    p = [g.clone() for g in g_test]
    rs = dot(r, r)
    residuals = []
    for _ in range(8):
        hp = hvp(p)
        alpha = rs / dot(p, hp)
        x = [xi + alpha * pi for xi, pi in zip(x, p)]
        r = [ri - alpha * hi for ri, hi in zip(r, hp)]
        rs_new = dot(r, r)
        p = [ri + (rs_new / rs) * pi for ri, pi in zip(r, p)]
        rs = rs_new
        residuals.append(rs.sqrt().item())
    res = {"ihvp": x, "residual_first": residuals[:3]}
    influences = []
    for i in range(10):
        gi = torch.autograd.grad(F.cross_entropy(model(x_tr[i:i + 1]), y_tr[i:i + 1]), params)
        influences.append(-dot(x, gi))
    res["influence"] = torch.stack(influences)
    res["ranking"] = torch.argsort(res["influence"], descending=True).tolist()

    names = [n for n, _ in model.named_parameters()]
    shapes = [q.shape for q in params]
    flat = torch.cat([q.detach().reshape(-1) for q in params])

    def loss_of_flat(theta):
        chunks = torch.split(theta, [s.numel() for s in shapes])
        state = {n: c.view(s) for n, c, s in zip(names, chunks, shapes)}
        out = torch.func.functional_call(model, state, (x_tr,))
        return F.cross_entropy(out, y_tr) + 1e-3 * theta.pow(2).sum()

    v = torch.cat([g.reshape(-1) for g in g_test])
    _, hv_func = torch.autograd.functional.hvp(loss_of_flat, flat, v)
    hv_tape = torch.cat([h.reshape(-1) for h in hvp(list(g_test))]) - damping * v
    res["hvp_func"] = hv_func
    res["hvp_tape"] = hv_tape

    state = {k: w.detach() for k, w in model.named_parameters()}

    def sample_loss(state, xb, yb):
        out = torch.func.functional_call(model, state, (xb.unsqueeze(0),))
        return F.cross_entropy(out, yb.unsqueeze(0))
    per_sample = torch.func.vmap(torch.func.grad(sample_loss), in_dims=(None, 0, 0))(
        state, x_tr, y_tr)
    test_g = torch.func.grad(lambda s: sample_loss(s, x_te[0], y_te[0]))(state)
    res["tracin"] = sum((per_sample[k].flatten(1) * test_g[k].flatten()).sum(1)
                        for k in per_sample) * 0.1
    res["per_sample_keys"] = sorted(per_sample)
    return res


PROGRAMS = [sae_program, topk_sae_program, influence_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 matmul accumulation over Adam steps
        "sae_program": (1e-4, 1e-5),
        "topk_sae_program": (1e-4, 1e-5),
    })
