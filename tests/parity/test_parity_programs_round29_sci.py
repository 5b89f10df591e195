"""Scientific ML, second wave, written as NVlabs/FourCastNet, e3nn, difftaichi-style simulators
and torchdiffeq write it in torch, run once with `torch` bound to ember and once to PyTorch from
the same NumPy weights and data: FourCastNet's AFNO filter (rfft2/irfft2 with norm="ortho",
block-diagonal complex weights applied by einsum on .real/.imag into preallocated zero buffers
sliced by kept modes, softshrink, view_as_complex, a complex weight stored as view_as_real);
an e3nn-lite layer (real spherical harmonics up to l=2, tensor products by einsum with
Clebsch-Gordan tables, a radial MLP, index_add_ message passing, equivariance under a random
rotation); a mass-spring cloth simulated by semi-implicit Euler with a floor constraint,
backpropagated through time to the initial velocity and the log-stiffness; and an RK4 solver
whose gradient is a hand-written adjoint (an autograd.Function integrating the augmented state
backwards with torch.autograd.grad) next to plain backprop through the same solver; and
in-place difftaichi-style particles (index_put pinning, clamp_ on a slice, per-step gradient
hooks, a collision autograd.Function, torch.func jacobians). The dense prediction programs are
in _dense."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def afno_program(torch):
    """Two FourCastNet blocks (AFNO filter + MLP, double skip) on a 6x8 grid, AdamW steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(290)

    class AFNO2D(nn.Module):
        def __init__(self, hidden, num_blocks=2, sparsity=0.01, fraction=1.0, factor=1):
            super().__init__()
            self.hidden_size, self.num_blocks = hidden, num_blocks
            self.block_size = hidden // num_blocks
            self.sparsity_threshold, self.fraction, self.factor = sparsity, fraction, factor
            self.scale = 0.02
            bs = self.block_size
            self.w1 = nn.Parameter(self.scale * torch.ones(2, num_blocks, bs, bs * factor))
            self.b1 = nn.Parameter(self.scale * torch.ones(2, num_blocks, bs * factor))
            self.w2 = nn.Parameter(self.scale * torch.ones(2, num_blocks, bs * factor, bs))
            self.b2 = nn.Parameter(self.scale * torch.ones(2, num_blocks, bs))

        def forward(self, x):
            bias = x
            dtype = x.dtype
            x = x.float()
            B, H, W, C = x.shape
            x = torch.fft.rfft2(x, dim=(1, 2), norm="ortho")
            x = x.reshape(B, H, W // 2 + 1, self.num_blocks, self.block_size)
            shape1 = [B, H, W // 2 + 1, self.num_blocks, self.block_size * self.factor]
            o1_real = torch.zeros(shape1, device=x.device)
            o1_imag = torch.zeros(shape1, device=x.device)
            o2_real = torch.zeros(x.shape, device=x.device)
            o2_imag = torch.zeros(x.shape, device=x.device)
            total = H // 2 + 1
            kept = int(total * self.fraction)
            sl = (slice(None), slice(total - kept, total + kept), slice(None, kept))
            xr, xi = x[sl].real, x[sl].imag
            o1_real[sl] = F.relu(torch.einsum("...bi,bio->...bo", xr, self.w1[0])
                                 - torch.einsum("...bi,bio->...bo", xi, self.w1[1])
                                 + self.b1[0])
            o1_imag[sl] = F.relu(torch.einsum("...bi,bio->...bo", xi, self.w1[0])
                                 + torch.einsum("...bi,bio->...bo", xr, self.w1[1])
                                 + self.b1[1])
            o2_real[sl] = (torch.einsum("...bi,bio->...bo", o1_real[sl], self.w2[0])
                           - torch.einsum("...bi,bio->...bo", o1_imag[sl], self.w2[1])
                           + self.b2[0])
            o2_imag[sl] = (torch.einsum("...bi,bio->...bo", o1_imag[sl], self.w2[0])
                           + torch.einsum("...bi,bio->...bo", o1_real[sl], self.w2[1])
                           + self.b2[1])
            x = torch.stack([o2_real, o2_imag], dim=-1)
            x = F.softshrink(x, lambd=self.sparsity_threshold)
            x = torch.view_as_complex(x)
            x = x.reshape(B, H, W // 2 + 1, C)
            x = torch.fft.irfft2(x, s=(H, W), dim=(1, 2), norm="ortho")
            x = x.type(dtype)
            return x + bias

    class Block(nn.Module):
        def __init__(self, dim, fraction):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.filter = AFNO2D(dim, fraction=fraction)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
            self.double_skip = True

        def forward(self, x):
            residual = x
            x = self.filter(self.norm1(x))
            if self.double_skip:
                x = x + residual
                residual = x
            x = self.mlp(self.norm2(x))
            return x + residual

    class SpectralMix(nn.Module):
        """A per-mode complex weight kept as a real parameter (view_as_real storage)."""

        def __init__(self, c, h, w):
            super().__init__()
            self.weight = nn.Parameter(torch.view_as_real(
                torch.complex(torch.ones(h, w // 2 + 1, c), torch.zeros(h, w // 2 + 1, c))))

        def forward(self, x):
            X = torch.fft.rfft2(x, dim=(1, 2), norm="ortho")
            X = X * torch.view_as_complex(self.weight)
            return torch.fft.irfft2(X, s=x.shape[1:3], dim=(1, 2), norm="ortho")

    dim, H, W = 4, 6, 8
    blocks = nn.Sequential(Block(dim, 1.0), Block(dim, 0.5), )
    mix = SpectralMix(dim, H, W)
    fill_(torch, blocks, rng, 0.3)
    fill_(torch, mix, rng, 0.5)
    params = list(blocks.parameters()) + list(mix.parameters())
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.05)
    res = {"loss": []}
    for step in range(3):
        x = normal(torch, rng, 2, H, W, dim)
        target = normal(torch, rng, 2, H, W, dim)
        y = mix(blocks(x))
        loss = F.mse_loss(y, target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        res.setdefault("grad_w1", []).append(blocks[0].filter.w1.grad.clone())
        res.setdefault("grad_mix", []).append(mix.weight.grad.clone())
        opt.step()
        res["loss"].append(loss.item())
    spec = torch.fft.rfft2(y.detach(), dim=(1, 2), norm="ortho")
    res["spec_dtype"] = [str(spec.dtype).split(".")[-1],
                         str(torch.view_as_real(spec).dtype).split(".")[-1]]
    res["spec_shape"] = list(spec.shape)
    res["spec_abs"] = spec.abs()
    res["shrunk"] = F.softshrink(normal(torch, rng, 10), 0.5)
    res["params"] = [p.detach().clone() for p in params]
    return res


def _real_sh(torch, vec):
    """e3nn's component-normalised real spherical harmonics l=0,1,2 of unit vectors (y, z, x
    order for l=1, as e3nn)."""
    x, y, z = vec.unbind(-1)
    s3, s5, s15 = math.sqrt(3.0), math.sqrt(5.0), math.sqrt(15.0)
    sh0 = torch.ones_like(x).unsqueeze(-1)
    sh1 = s3 * torch.stack([y, z, x], dim=-1)
    sh2 = torch.stack([s15 * x * y, s15 * y * z, s5 / 2 * (3 * z ** 2 - 1), s15 * x * z,
                       s15 / 2 * (x ** 2 - y ** 2)], dim=-1)
    return sh0, sh1, sh2


def _cg_tables():
    """Clebsch-Gordan tables (1 x 1 -> 0, 1, 2) in the y, z, x basis, from NumPy."""
    perm = [1, 2, 0]                       # y, z, x -> cartesian x, y, z
    eye = np.eye(3)
    c0 = eye[perm][:, perm][..., None] / np.sqrt(3)
    eps = np.zeros((3, 3, 3))
    for i, j, k in [(0, 1, 2), (1, 2, 0), (2, 0, 1)]:
        eps[i, j, k], eps[j, i, k] = 1.0, -1.0
    c1 = eps[perm][:, perm][:, :, perm] / np.sqrt(2)
    # symmetric traceless basis matching _real_sh's l=2 components (x, y, z cartesian)
    q = np.zeros((5, 3, 3))
    q[0, 0, 1] = q[0, 1, 0] = 1
    q[1, 1, 2] = q[1, 2, 1] = 1
    q[2] = np.diag([-1, -1, 2]) / np.sqrt(3)
    q[3, 0, 2] = q[3, 2, 0] = 1
    q[4] = np.diag([1, -1, 0])
    q /= np.sqrt(2)
    c2 = q[:, perm][:, :, perm].transpose(1, 2, 0)
    return [t.astype(np.float32) for t in (c0, c1, c2)]


def e3nn_program(torch):
    """Two equivariant convolutions on a small point cloud, an invariant energy, its forces by
    autograd, an equivariance check under a random rotation, and Adam steps."""
    nn = torch.nn
    rng = np.random.default_rng(291)
    c0, c1, c2 = (torch.from_numpy(t) for t in _cg_tables())
    n, mul = 6, 3
    src = torch.tensor([i for i in range(n) for j in range(n) if i != j])
    dst = torch.tensor([j for i in range(n) for j in range(n) if i != j])

    class Conv(nn.Module):
        def __init__(self):
            super().__init__()
            self.radial = nn.Sequential(nn.Linear(4, 8), nn.SiLU(), nn.Linear(8, 5 * mul))
            self.lin0 = nn.Linear(2 * mul, mul, bias=False)
            self.lin1 = nn.Linear(3 * mul, mul, bias=False)

        def forward(self, pos, s, v):
            rel = pos[dst] - pos[src]
            r = rel.norm(dim=-1, keepdim=True)
            sh0, sh1, sh2 = _real_sh(torch, rel / r)
            centers = torch.linspace(0.5, 2.5, 4)
            emb = torch.exp(-((r - centers) ** 2) / 0.5)
            cut = 0.5 * (torch.cos(math.pi * torch.clamp(r / 3.0, max=1.0)) + 1)
            w = (self.radial(emb) * cut).view(-1, 5, mul)
            sj, vj = s[src], v[src]                        # (E, mul), (E, mul, 3)
            m0 = torch.cat([w[:, 0] * sj,
                            w[:, 1] * torch.einsum("eui,ei,ijk->euk", vj, sh1, c0)[..., 0]],
                           dim=-1)
            m1 = torch.cat([w[:, 2, :, None] * sj[..., None] * sh1[:, None, :],
                            w[:, 3, :, None] * torch.einsum("eui,ej,ijk->euk", vj, sh1, c1),
                            w[:, 4, :, None] * torch.einsum("eui,ejk->euj", vj,
                                                            torch.einsum("ea,ija->eij", sh2, c2)
                                                            )], dim=1)
            out0 = torch.zeros(pos.shape[0], 2 * mul).index_add_(0, dst, m0)
            out1 = torch.zeros(pos.shape[0], 3 * mul, 3).index_add_(0, dst, m1)
            out0 = self.lin0(out0 / math.sqrt(n - 1))
            out1 = torch.einsum("nci,dc->ndi", out1 / math.sqrt(n - 1), self.lin1.weight)
            gate = torch.sigmoid(out0)
            return s + torch.nn.functional.silu(out0), v + gate[..., None] * out1

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(3, mul)
            self.convs = nn.ModuleList([Conv(), Conv()])
            self.readout = nn.Linear(mul, 1)

        def forward(self, pos, z):
            s = self.embed(z)
            v = torch.zeros(pos.shape[0], mul, 3)
            for conv in self.convs:
                s, v = conv(pos, s, v)
            scalar = s + (v * v).sum(-1)
            return self.readout(scalar).sum(), v

    net = Net()
    fill_(torch, net, rng, 0.4)
    z = torch.tensor([0, 1, 2, 1, 0, 2])
    pos0 = normal(torch, rng, n, 3)
    a = rng.standard_normal((3, 3))
    qmat, rmat = np.linalg.qr(a)
    qmat = qmat * np.sign(np.diag(rmat))
    if np.linalg.det(qmat) < 0:
        qmat[:, 0] *= -1
    R = torch.from_numpy(qmat.astype(np.float32))
    res = {}
    pos = pos0.clone().requires_grad_(True)
    energy, v = net(pos, z)
    forces = -torch.autograd.grad(energy, pos, create_graph=True)[0]
    pos_r = (pos0 @ R.T).requires_grad_(True)
    energy_r, v_r = net(pos_r, z)
    forces_r = -torch.autograd.grad(energy_r, pos_r)[0]
    res["energy"] = [energy.item(), energy_r.item()]
    res["invariant"] = [abs(energy.item() - energy_r.item()) < 1e-4]
    res["equivariant"] = [torch.allclose(forces @ R.T, forces_r, atol=1e-4),
                          torch.allclose(v @ R.T, v_r, atol=1e-4)]
    res["forces"] = forces.detach()
    sh = _real_sh(torch, torch.nn.functional.normalize(pos0, dim=-1))
    res["sh_norms"] = [t.pow(2).sum(-1) for t in sh]
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    target_f = normal(torch, rng, n, 3)
    res["loss"] = []
    for step in range(3):
        pos = pos0.clone().requires_grad_(True)
        energy, _ = net(pos, z)
        forces = -torch.autograd.grad(energy, pos, create_graph=True)[0]
        loss = (energy - 1.0) ** 2 + 0.5 * (forces - target_f).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["params"] = [p.detach().clone() for p in net.parameters()]
    return res


def cloth_program(torch):
    """A 4x4 mass-spring cloth, 40 semi-implicit Euler steps with a floor, backprop through
    time to the initial velocity and the log-stiffness, a few Adam steps."""
    rng = np.random.default_rng(292)
    side, dt, steps = 4, 0.02, 40
    ii, jj = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    grid = np.stack([ii.ravel(), jj.ravel()], -1).astype(np.float32) * 0.5
    idx = np.arange(side * side).reshape(side, side)
    springs = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], -1),
                              np.stack([idx[:-1].ravel(), idx[1:].ravel()], -1),
                              np.stack([idx[:-1, :-1].ravel(), idx[1:, 1:].ravel()], -1)])
    a = torch.from_numpy(springs[:, 0].copy())
    b = torch.from_numpy(springs[:, 1].copy())
    x0 = torch.from_numpy(np.concatenate([grid, np.full((side * side, 1), 1.0, np.float32)], 1))
    rest = (x0[a] - x0[b]).norm(dim=1)
    mass = torch.full((side * side, 1), 0.1)
    gravity = torch.tensor([0.0, 0.0, -9.8])
    target = x0 + normal(torch, rng, side * side, 3) * 0.1 + torch.tensor([0.3, 0.0, -0.4])

    log_k = torch.tensor(math.log(30.0), requires_grad=True)
    v_init = (normal(torch, rng, side * side, 3) * 0.1).requires_grad_()

    def simulate(log_k, v_init):
        x, v = x0.clone(), v_init
        k = log_k.exp()
        for _ in range(steps):
            d = x[a] - x[b]
            length = torch.linalg.norm(d, dim=1, keepdim=True)
            f_s = -k * (length - rest[:, None]) * d / length
            force = torch.zeros_like(x).index_add(0, a, f_s).index_add(0, b, -f_s)
            v = v + dt * (force / mass + gravity)
            v = v * math.exp(-dt * 0.5)
            x = x + dt * v
            below = x[:, 2:] < 0
            x = torch.cat([x[:, :2], torch.where(below, torch.zeros_like(x[:, 2:]), x[:, 2:])],
                          dim=1)
            v = torch.cat([v[:, :2], torch.where(below, -0.5 * v[:, 2:], v[:, 2:])], dim=1)
        return x, v

    opt = torch.optim.Adam([log_k, v_init], lr=0.05)
    res = {"loss": [], "grad_k": []}
    for it in range(3):
        x, v = simulate(log_k, v_init)
        loss = (x - target).pow(2).sum(1).mean() + 1e-3 * v.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        res["loss"].append(loss.item())
        res["grad_k"].append(log_k.grad.item())
        res.setdefault("grad_v", []).append(v_init.grad.clone())
        torch.nn.utils.clip_grad_norm_([log_k, v_init], 5.0)
        opt.step()
    res["log_k"] = log_k.detach()
    with torch.no_grad():
        x, _ = simulate(log_k, v_init)
    res["final"] = x
    res["min_z"] = [bool((x[:, 2] >= 0).all())]
    return res


def rk4_adjoint_program(torch):
    """A neural ODE integrated by fixed-step RK4 whose gradient comes from a hand-written
    adjoint (torchdiffeq's OdeintAdjointMethod shape) next to plain backprop."""
    nn = torch.nn
    rng = np.random.default_rng(293)

    class Field(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))

        def forward(self, t, y):
            return self.net(torch.cat([y, t.expand(y.shape[0], 1)], dim=1))

    def rk4(func, y0, t0, t1, n):
        h = (t1 - t0) / n
        y, t = y0, t0
        for _ in range(n):
            k1 = func(t, y)
            k2 = func(t + h / 2, y + h / 2 * k1)
            k3 = func(t + h / 2, y + h / 2 * k2)
            k4 = func(t + h, y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t = t + h
        return y

    class Adjoint(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y0, func, n, *params):
            t0, t1 = torch.tensor(0.0), torch.tensor(1.0)
            with torch.no_grad():
                y1 = rk4(func, y0, t0, t1, n)
            ctx.func, ctx.n = func, n
            ctx.save_for_backward(y1, *params)
            return y1

        @staticmethod
        def backward(ctx, grad_y1):
            y1, *params = ctx.saved_tensors
            func, n = ctx.func, ctx.n
            shapes = [p.shape for p in params]
            sizes = [p.numel() for p in params]

            def aug(t, state):
                y, a = state[:, :2], state[:, 2:4]
                with torch.enable_grad():
                    y = y.detach().requires_grad_(True)
                    f = func(t, y)
                    vjp_y, *vjp_p = torch.autograd.grad(f, (y, *params), -a,
                                                        allow_unused=True)
                flat = torch.cat([g.reshape(-1) for g in vjp_p])
                return torch.cat([f, vjp_y, flat.expand(y.shape[0], -1) / y.shape[0]], dim=1)

            zeros = torch.zeros(y1.shape[0], sum(sizes))
            state = torch.cat([y1, grad_y1, zeros], dim=1)
            state = rk4(aug, state, torch.tensor(1.0), torch.tensor(0.0), n)
            grad_y0 = state[:, 2:4]
            flat = state[:, 4:].sum(0)
            grads = [g.view(s) for g, s in zip(flat.split(sizes), shapes)]
            return (grad_y0, None, None, *grads)

    func = Field()
    fill_(torch, func, rng, 0.5)
    params = list(func.parameters())
    y0 = normal(torch, rng, 4, 2).requires_grad_()
    target = normal(torch, rng, 4, 2)
    res = {}
    y1 = Adjoint.apply(y0, func, 8, *params)
    loss = (y1 - target).pow(2).sum()
    grads_adj = torch.autograd.grad(loss, [y0, *params])
    y1_bp = rk4(func, y0, torch.tensor(0.0), torch.tensor(1.0), 8)
    loss_bp = (y1_bp - target).pow(2).sum()
    grads_bp = torch.autograd.grad(loss_bp, [y0, *params])
    res["y1"] = [y1.detach(), y1_bp.detach()]
    res["grad_fn"] = [type(y1.grad_fn).__name__]
    res["grads_adj"] = list(grads_adj)
    res["grads_bp"] = list(grads_bp)
    res["close"] = [all(torch.allclose(g, h, rtol=1e-2, atol=1e-3)
                        for g, h in zip(grads_adj, grads_bp))]
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.5)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    res["loss"] = []
    for step in range(3):
        y1 = Adjoint.apply(y0.detach(), func, 6, *params)
        loss = (y1 - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
    res["params"] = [p.detach().clone() for p in params]
    return res


def inplace_sim_program(torch):
    """difftaichi-style particles written with in-place idioms: pinned rows re-set by index_put,
    a floor clamp_ on a slice, per-step gradient clipping hooks on the velocity, a collision
    autograd.Function with a non-differentiable hit mask, and torch.func jacobians of a
    rollout w.r.t. the stiffness, batched over stiffnesses by vmap."""
    rng = np.random.default_rng(297)
    x_init, v_init = normal(torch, rng, 6, 3), normal(torch, rng, 6, 3)

    class Collide(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, v):
            hit = x[:, 2] < 0
            ctx.save_for_backward(hit)
            ctx.mark_non_differentiable(hit)
            x2, v2 = x.clone(), v.clone()
            x2[hit, 2] = 0
            v2[hit, 2] = -0.5 * v[hit, 2]
            return x2, v2, hit

        @staticmethod
        def backward(ctx, gx, gv, ghit):
            hit, = ctx.saved_tensors
            gx, gv = gx.clone(), gv.clone()
            gx[hit, 2] = 0
            gv[hit, 2] = -0.5 * gv[hit, 2]
            return gx, gv

    res = {}
    v0 = v_init.clone().requires_grad_()
    k = torch.tensor(3.0, requires_grad=True)
    pinned = torch.tensor([0, 5])
    x, v = x_init.clone(), v0 * 1.0
    for step in range(10):
        v = v - 0.05 * k * (x - x.mean(0, keepdim=True))
        v.register_hook(lambda g: g.clamp(-1, 1))
        x = x + 0.05 * v
        x[pinned] = x_init[pinned]
        x[:, 2].clamp_(min=-0.5)
        v = v.masked_fill(x[:, 2:3] <= -0.5, 0.0)
        v[:, 2] *= 0.9
    loss = x.pow(2).sum() + v.abs().sum()
    loss.backward()
    res["hooked"] = [loss.detach(), v0.grad, k.grad]
    res["hooked_fn"] = [type(x.grad_fn).__name__, type(v.grad_fn).__name__]

    x0, v0 = x_init.clone().requires_grad_(), v_init.clone().requires_grad_()
    x, v, hits = x0, v0, []
    for step in range(6):
        v = v + 0.1 * torch.tensor([0.0, 0.0, -9.8])
        x = x + 0.1 * v
        x, v, hit = Collide.apply(x, v)
        hits.append(int(hit.sum()))
    (x.sum() + v.pow(2).sum()).backward()
    res["collide"] = [x.detach(), v.detach(), x0.grad, v0.grad]
    res["hits"] = hits
    res["hit_flags"] = [hit.requires_grad, hit.dtype == torch.bool, type(x.grad_fn).__name__]

    def rollout(k, x, v):
        for _ in range(5):
            v = v - 0.1 * k * x
            x = x + 0.1 * v
        return x

    res["jacfwd_k"] = torch.func.jacfwd(rollout)(torch.tensor(2.0), x_init, v_init)
    res["jacrev_xv"] = list(torch.func.jacrev(rollout, argnums=(1, 2))(
        torch.tensor(2.0), x_init[0], v_init[0]))
    res["vmap_k"] = torch.vmap(rollout, in_dims=(0, None, None))(
        torch.tensor([1.0, 2.0, 3.0]), x_init, v_init)
    return res


PROGRAMS = [afno_program, e3nn_program, cloth_program, rk4_adjoint_program,
            inplace_sim_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # 40 chained Euler steps through stiff springs (k=30, dt=0.02): float32 rounding of
        # the spring forces compounds to ~1e-5 relative in the trajectory
        "cloth_program": (1e-4, 1e-5),
    })
