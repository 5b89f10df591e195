"""More equivariant and capsule programs of round 30, as e2cnn/escnn-style, SO(2)-harmonic and
capsule repositories write them in torch, run once with `torch` bound to ember and once to
PyTorch from the same NumPy data: a steerable kernel basis solved from the equivariance
constraint (Kronecker products of representations, the null space by SVD, compared as a
projector), a C_n group convolution as a Conv3d with circular padding over the rotation axis
and arbitrary-angle equivariance through affine_grid/grid_sample, capsule EM routing
(Gaussian log-likelihoods, logsumexp, a custom autograd.Function squash), and an SO(2)
irreps network (rotations by matrix_exp of the generator, norm nonlinearities, gated
features)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def steerable_basis_program(torch):
    """The kernel constraint K(g x) = rho_out(g) K(x) rho_in(g)^T for C4 acting on 3x3 patches
    and on regular features: the constraint matrix from kron products, its null space from
    torch.linalg.svd, the basis projector (sign-free), an equivariant conv built from learned
    basis coefficients, and its rotation equivariance error and gradients."""
    rng = np.random.default_rng(3021)
    F = torch.nn.functional
    n = 4
    perm = torch.roll(torch.eye(n), 1, dims=0)                          # regular rep of a 90deg
    idx = torch.arange(9).view(3, 3)
    spatial = torch.zeros(9, 9)
    spatial[torch.rot90(idx, -1, (0, 1)).flatten(), idx.flatten()] = 1  # rotates a 3x3 patch
    # K in R^{n x n x 9}, vec(K): rho_out (x) rho_in (x) P acting on it must leave it fixed
    act = torch.kron(torch.kron(perm, perm), spatial)
    constraint = act - torch.eye(act.shape[0])
    _, s, vh = torch.linalg.svd(constraint)
    null = vh[s < 1e-5]                                                 # (k, n*n*9)
    proj = null.T @ null
    res = {"dim": [int(null.shape[0])],
           "proj_trace": proj.trace(), "proj_idem": [bool((proj @ proj - proj).abs().max() < 1e-4)],
           "proj_diag": proj.diagonal()[:20]}
    # a reproducible basis: project NumPy draws and orthonormalise by QR
    draws = torch.from_numpy(rng.standard_normal((n * n * 9, null.shape[0])).astype(np.float32))
    q, r = torch.linalg.qr(proj @ draws)
    q = q * torch.sign(torch.diagonal(r))                               # QR's sign fixed
    basis = q.T.reshape(-1, n, n, 3, 3)                                 # (k, out, in, 3, 3)
    coeff = torch.nn.Parameter(normal(torch, rng, 2, 2, basis.shape[0]) * 0.3)

    def weight():
        w = torch.einsum("oik,kabxy->oaibxy", coeff, basis)
        return w.reshape(2 * n, 2 * n, 3, 3)

    x = normal(torch, rng, 1, 2 * n, 6, 6)
    y = F.conv2d(x, weight(), padding=1)
    xr = torch.rot90(x, 1, (2, 3)).unflatten(1, (2, n)).roll(1, 2).flatten(1, 2)
    yr = F.conv2d(xr, weight(), padding=1)
    expect = torch.rot90(y, 1, (2, 3)).unflatten(1, (2, n)).roll(1, 2).flatten(1, 2)
    res["equivariant"] = [bool((yr - expect).abs().max() < 1e-4)]
    loss = y.pow(2).mean() + yr.tanh().sum() * 1e-2
    loss.backward()
    res["loss"] = loss
    res["coeff_grad"] = coeff.grad
    return res


def cn_conv3d_program(torch):
    """A C8 group conv as e2cnn's regular-representation layers lower it: the group axis as a
    depth axis of a Conv3d with circular padding (cyclic over rotations), lifting by rotating
    the input with affine_grid/grid_sample at 45 degree steps, group max pooling, a few Adam
    steps; the cyclic shift equivariance of the group conv exactly, and the lifting's
    equivariance up to interpolation (a flag)."""
    rng = np.random.default_rng(3022)
    nn, F = torch.nn, torch.nn.functional
    n = 8

    def rotate(img, angle):
        c, s = math.cos(angle), math.sin(angle)
        theta = torch.tensor([[c, -s, 0.0], [s, c, 0.0]], dtype=img.dtype)
        grid = F.affine_grid(theta.expand(img.shape[0], 2, 3), list(img.shape),
                             align_corners=False)
        return F.grid_sample(img, grid, mode="bilinear", padding_mode="zeros",
                             align_corners=False)

    class Lift(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 3, 3, padding=1)

        def forward(self, x):
            # rotate the image instead of the filter: f(R_g^{-1} . ) correlated with psi
            outs = [rotate(self.conv(rotate(x, -2 * math.pi * g / n)), 2 * math.pi * g / n)
                    for g in range(n)]
            return torch.stack(outs, 2)                                  # (b, c, n, h, w)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = Lift()
            self.gconv = nn.Conv3d(3, 4, (3, 1, 1), padding=(1, 0, 0), padding_mode="circular")
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            h = F.relu(self.lift(x))
            h = F.relu(self.gconv(h))
            return self.head(h.amax(2).mean((-1, -2))), h

    net = Net()
    fill_(torch, net, rng, 0.4)
    x = normal(torch, rng, 2, 1, 9, 9)
    y = torch.tensor([1, 0])
    res = {}
    with torch.no_grad():
        h = F.relu(net.lift(x))
        g = net.gconv(h)
        g_shift = net.gconv(torch.roll(h, 3, dims=2))
        res["gconv_cyclic"] = [bool((g_shift - torch.roll(g, 3, 2)).abs().max() < 1e-5)]
        res["lift_values"] = h[0, :, :, 4, 4]
        # 90 degrees is exact for a 9x9 grid up to bilinear noise: compare coarsely
        turned = F.relu(net.lift(torch.rot90(x, 1, (2, 3))))
        err = (turned - torch.roll(torch.rot90(h, 1, (3, 4)), 2, 2))[..., 2:-2, 2:-2].abs()
        res["lift_roughly_equivariant"] = [bool(err.mean() < 0.1 * h.abs().mean())]
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        logits, _ = net(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["gconv_grad"] = net.gconv.weight.grad
    res["lift_grad"] = net.lift.conv.weight.grad
    return res


def em_capsules_program(torch):
    """Matrix capsules with EM routing (Hinton et al. 2018), small: 4x4 pose votes by matmul,
    an E-step from diagonal Gaussian log-likelihoods and logsumexp, an M-step of weighted
    means and variances, activations by a sigmoid of lambda (beta_a - cost); the squash of
    vector capsules as a custom autograd.Function with its own backward, checked against
    autograd; spread loss with an annealed margin."""
    rng = np.random.default_rng(3023)
    nn, F = torch.nn, torch.nn.functional
    eps = 1e-6

    class Squash(torch.autograd.Function):
        @staticmethod
        def forward(ctx, s):
            n2 = (s * s).sum(-1, keepdim=True)
            scale = n2 / (1 + n2) / torch.sqrt(n2 + 1e-8)
            ctx.save_for_backward(s, n2)
            return scale * s

        @staticmethod
        def backward(ctx, g):
            s, n2 = ctx.saved_tensors
            r = torch.sqrt(n2 + 1e-8)
            a = n2 / ((1 + n2) * r)
            # d a / d n2, by the quotient rule, then chain through n2 = |s|^2
            da = ((1 + n2) * r - n2 * (r + (1 + n2) / (2 * r))) / ((1 + n2) * r) ** 2
            return a * g + 2 * s * da * (g * s).sum(-1, keepdim=True)

    class EMRouting(nn.Module):
        def __init__(self, n_in=6, n_out=3, iters=3):
            super().__init__()
            self.W = nn.Parameter(torch.empty(1, n_in, n_out, 4, 4))
            self.beta_u = nn.Parameter(torch.zeros(n_out))
            self.beta_a = nn.Parameter(torch.zeros(n_out))
            self.iters, self.n_out = iters, n_out

        def forward(self, pose, act, lam=1e-2):
            b, n_in = pose.shape[:2]
            votes = (pose.unsqueeze(2) @ self.W).flatten(-2)             # (b, in, out, 16)
            R = torch.full((b, n_in, self.n_out), 1.0 / self.n_out, dtype=pose.dtype)
            for it in range(self.iters):
                Ra = R * act.unsqueeze(-1)                                 # M-step
                denom = Ra.sum(1, keepdim=True) + eps
                mu = (Ra.unsqueeze(-1) * votes).sum(1, keepdim=True) / denom.unsqueeze(-1)
                sigma2 = (Ra.unsqueeze(-1) * (votes - mu) ** 2).sum(1, keepdim=True) \
                    / denom.unsqueeze(-1) + eps
                cost = (self.beta_u.view(1, 1, -1, 1) + 0.5 * torch.log(sigma2)) \
                    * denom.unsqueeze(-1)
                a_out = torch.sigmoid(lam * (self.beta_a - cost.sum(-1).squeeze(1)))
                if it < self.iters - 1:                                    # E-step
                    log_p = -0.5 * (((votes - mu) ** 2) / sigma2
                                    + torch.log(2 * math.pi * sigma2)).sum(-1)
                    logits = torch.log(a_out + eps).unsqueeze(1) + log_p
                    R = torch.exp(logits - torch.logsumexp(logits, dim=2, keepdim=True))
                lam = lam * 2
            return mu.squeeze(1), a_out, R

    routing = EMRouting()
    fill_(torch, routing, rng, 0.3)
    # in float64: the variances of 6 votes are near eps, and float32 moves W's gradient by 5%
    routing.double()
    pose = normal(torch, rng, 4, 6, 4, 4).double()
    act = torch.sigmoid(normal(torch, rng, 4, 6)).double()
    y = torch.tensor([0, 2, 1, 1])
    opt = torch.optim.SGD(routing.parameters(), lr=0.5)
    res, losses = {}, []
    for step in range(3):
        mu, a_out, R = routing(pose, act)
        margin = 0.2 + 0.1 * step
        at = a_out.gather(1, y[:, None])
        loss = (F.relu(margin - (at - a_out)) ** 2).masked_fill(F.one_hot(y, 3).bool(), 0)
        loss = loss.sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res.update(losses=losses, R_sums=R.sum(2), a_out=a_out, W_grad=routing.W.grad,
               beta_a=routing.beta_a)
    s = normal(torch, rng, 3, 5).double().requires_grad_()
    v = Squash.apply(s)
    g = normal(torch, rng, 3, 5).double()
    ours = torch.autograd.grad(v, s, g)[0]
    n2 = (s * s).sum(-1, keepdim=True)
    ref = torch.autograd.grad(n2 / (1 + n2) / torch.sqrt(n2 + 1e-8) * s, s, g)[0]
    res["custom_vs_autograd"] = [bool(torch.allclose(ours, ref))]
    res["squash_grad"] = ours
    res["gradcheck"] = [torch.autograd.gradcheck(Squash.apply, (s,))]
    return res


def so2_irreps_program(torch):
    """An SO(2)-equivariant point network with irreps features: frequency-m features rotate
    by matrix_exp(m theta J) with J the so(2) generator; a norm nonlinearity (scale by a
    function of the invariant norm) and gates from scalars; messages summed over neighbours;
    rotation equivariance of the output vectors and invariance of the scalars; Adam steps."""
    rng = np.random.default_rng(3024)
    nn, F = torch.nn, torch.nn.functional
    J = torch.tensor([[0.0, -1.0], [1.0, 0.0]])

    def rot(m, theta):
        return torch.linalg.matrix_exp(m * theta * J)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.radial = nn.Sequential(nn.Linear(1, 8), nn.SiLU(), nn.Linear(8, 3))
            self.gate = nn.Linear(2, 2)
            self.bias = nn.Parameter(torch.zeros(1))

        def forward(self, pos, s, v):
            rel = pos[None, :, :] - pos[:, None, :]                         # (n, n, 2)
            dist = rel.norm(dim=-1, keepdim=True)
            mask = (dist > 0).float()
            unit = rel / dist.clamp_min(1e-6)
            w = self.radial(dist) * mask                                      # (n, n, 3)
            ang = torch.atan2(unit[..., 1], unit[..., 0])
            # frequency-2 harmonic of the direction: (cos 2a, sin 2a)
            freq2 = torch.stack([torch.cos(2 * ang), torch.sin(2 * ang)], -1)
            msg_s = (w[..., :1] * s[None, :, :]).sum(1)
            msg_v = (w[..., 1:2] * unit).sum(1) + (w[..., 2:3] * freq2 @ rot(1, 0.0)).sum(1) * 0
            v = v + msg_v
            n = v.norm(dim=-1, keepdim=True)
            v = v * torch.sigmoid(n - 1 + self.bias)                          # norm nonlinearity
            g = torch.sigmoid(self.gate(torch.cat([msg_s, n], -1)))
            return F.silu(s + msg_s) * g[:, :1], v * g[:, 1:]

    layers = nn.ModuleList([Layer(), Layer()])
    fill_(torch, layers, rng, 0.5)
    pos = normal(torch, rng, 5, 2)
    s0 = normal(torch, rng, 5, 1)
    v0 = torch.zeros(5, 2)
    target = normal(torch, rng, 5, 2)

    def run(p):
        s, v = s0, v0
        for layer in layers:
            s, v = layer(p, s, v)
        return s, v

    res = {}
    with torch.no_grad():
        s, v = run(pos)
        R = rot(1, 0.7)
        s_r, v_r = run(pos @ R.T)
        res["scalars_invariant"] = [bool((s_r - s).abs().max() < 1e-5)]
        res["vectors_equivariant"] = [bool((v_r - v @ R.T).abs().max() < 1e-5)]
        res["rot2"] = rot(2, 0.7)
    opt = torch.optim.Adam(layers.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        s, v = run(pos)
        loss = F.mse_loss(v, target) + s.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res.update(losses=losses, v=v, radial_grad=layers[0].radial[0].weight.grad)
    return res


PROGRAMS = [steerable_basis_program, cn_conv3d_program, em_capsules_program, so2_irreps_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 SVD / QR of a 144x144 constraint: the basis is compared through a projector
        "steerable_basis_program": (1e-4, 1e-5),
        # bilinear grid_sample sums and 3 Adam steps in float32
        "cn_conv3d_program": (1e-4, 1e-5),
    })
