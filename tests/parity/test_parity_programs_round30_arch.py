"""Group-equivariant and capsule programs written as their reference repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy data:
p4 lifting and group convolutions (filters rotated by torch.rot90 and flipped, the group axis
cyclically shifted with torch.roll), group pooling and equivariance errors, harmonic (steerable)
filters built from a radial basis through torch.polar and a complex convolution, real spherical
harmonics by the associated-Legendre recursion, and a capsule network (squash, dynamic routing by
agreement, margin loss, reconstruction masked by the true class). Sibling file _arch_mixers:
Perceiver IO, MLP-Mixer, gMLP, ConvMixer, PoolFormer, ResMLP, CoAtNet, ViT heads, drop_path,
LayerScale, parametrizations; _arch_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _p4_layers(torch):
    """The lifting (Z2 -> p4) and group (p4 -> p4) convolutions of GrouPy-style code."""
    nn, F = torch.nn, torch.nn.functional

    class P4Lift(nn.Module):
        def __init__(self, cin, cout, k):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(cout, cin, k, k))
            self.bias = nn.Parameter(torch.zeros(cout))

        def forward(self, x):
            w = torch.stack([torch.rot90(self.weight, r, dims=(-2, -1)) for r in range(4)], 1)
            w = w.reshape(-1, *self.weight.shape[1:])
            out = F.conv2d(x, w, padding=self.weight.shape[-1] // 2)
            out = out.view(x.shape[0], -1, 4, *out.shape[-2:])
            return out + self.bias.view(1, -1, 1, 1, 1)

    class P4Conv(nn.Module):
        def __init__(self, cin, cout, k):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(cout, cin, 4, k, k))

        def forward(self, x):
            ws = []
            for r in range(4):
                # rotating a p4 filter rotates each plane and shifts the rotation axis cyclically
                ws.append(torch.roll(self.weight.rot90(r, [3, 4]), shifts=r, dims=2))
            w = torch.stack(ws, dim=1).flatten(0, 1).flatten(1, 2)
            b, c, g, h, wd = x.shape
            out = F.conv2d(x.reshape(b, c * g, h, wd), w, padding=self.weight.shape[-1] // 2)
            return out.unflatten(1, (-1, 4))

    return P4Lift, P4Conv


def p4_gcnn_program(torch):
    """A P4 CNN: lift, two group convs, group max-pool, GAP; the rotation equivariance error
    of each layer and the invariance of the logits; a few SGD steps with Nesterov momentum."""
    rng = np.random.default_rng(3001)
    nn, F = torch.nn, torch.nn.functional
    P4Lift, P4Conv = _p4_layers(torch)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = P4Lift(1, 4, 3)
            self.g1 = P4Conv(4, 4, 3)
            self.bn = nn.BatchNorm3d(4)
            self.g2 = P4Conv(4, 6, 3)
            self.head = nn.Linear(6, 3)

        def forward(self, x):
            h = F.relu(self.lift(x))
            h = F.relu(self.bn(self.g1(h)))
            h = self.g2(h)
            h = h.amax(dim=2)                                    # pool over the group
            return self.head(F.adaptive_avg_pool2d(h, 1).flatten(1))

    net = Net()
    fill_(torch, net, rng, 0.4)
    x = normal(torch, rng, 3, 1, 7, 7)
    y = torch.tensor([0, 2, 1])
    res = {}
    net.eval()
    with torch.no_grad():
        f = net.lift(x)
        f_rot = net.lift(torch.rot90(x, 1, (-2, -1)))
        # rotating the input rotates the maps and shifts the group axis by one
        expect = torch.roll(torch.rot90(f, 1, (-2, -1)), 1, dims=2)
        # equivariance errors are float32 noise: compare them as flags, not values
        res["lift_equivariant"] = [bool((f_rot - expect).abs().max() < 1e-4)]
        g = net.g1(f)
        g_rot = net.g1(expect)
        g_err = (g_rot - torch.roll(torch.rot90(g, 1, (3, 4)), 1, 2)).abs().max()
        res["gconv_equivariant"] = [bool(g_err < 1e-4)]
        logits = net(x)
        res["invariant"] = [bool((net(torch.rot90(x, r, [2, 3])) - logits).abs().max() < 1e-4)
                            for r in range(1, 4)]
        flipped = net(torch.flip(x, dims=(-1,)))
        res["flip_not_invariant"] = [bool((flipped - logits).abs().max() > 1e-3)]
        res["logits_eval"] = logits
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)
    losses = []
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["lift_grad"] = net.lift.weight.grad
    res["g2_weight"] = net.g2.weight
    res["bn_running_var"] = net.bn.running_var
    res["num_batches_tracked"] = [int(net.bn.num_batches_tracked)]
    return res


def p4m_pool_program(torch):
    """p4m (rotations and mirror) lifting by flipping then rotating, group average pooling and
    an orbit-averaged (invariant) readout with its gradient; invariance to all eight elements."""
    rng = np.random.default_rng(3002)
    F = torch.nn.functional
    w = normal(torch, rng, 3, 2, 3, 3).mul_(0.5).requires_grad_()
    x = normal(torch, rng, 2, 2, 6, 6)

    def lift(x, w):
        bank = []
        for m in (False, True):
            base = torch.flip(w, dims=[-1]) if m else w
            bank += [base.rot90(r, (2, 3)) for r in range(4)]
        filt = torch.cat(bank, 0)                                 # (8*cout, cin, k, k)
        out = F.conv2d(x, filt, padding="same")
        return out.view(x.size(0), 8, -1, *out.shape[2:]).transpose(1, 2)

    def readout(x, w):
        f = lift(x, w)                                            # (b, c, 8, h, w)
        return f.mean(2).pow(2).sum((-1, -2)).sqrt()

    r0 = readout(x, w)
    errs = []
    for m in (False, True):
        for r in range(4):
            xt = torch.flip(x, [-1]) if m else x
            errs.append((readout(xt.rot90(r, [-2, -1]), w) - r0).abs().max())
    r0.sum().backward()
    return {"readout": r0, "grad": w.grad, "invariant": [bool(e < 1e-4) for e in errs],
            "lift_shape": [*lift(x, w).shape], "contig": [lift(x, w).is_contiguous()]}


def harmonic_filter_program(torch):
    """Harmonic-network style steerable filters: a Gaussian radial basis times e^{i m phi}
    built with torch.polar, a complex conv2d of a complex input, magnitude nonlinearity on
    the modulus, and rotation steering by multiplying the weights with e^{i m theta}."""
    rng = np.random.default_rng(3003)
    F = torch.nn.functional
    k = 5
    coords = torch.arange(k, dtype=torch.float32) - k // 2
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    r = torch.sqrt(xx ** 2 + yy ** 2)
    phi = torch.atan2(yy, xx)
    radii = torch.linspace(0, 2, 3)
    basis_r = torch.exp(-((r[None] - radii[:, None, None]) ** 2) / (2 * 0.6 ** 2))   # (R, k, k)
    res = {}
    radial_w = normal(torch, rng, 2, 1, 3).requires_grad_()                         # (cout, cin, R)
    phase = normal(torch, rng, 2, 1).requires_grad_()
    x = normal(torch, rng, 1, 1, 9, 9)
    orders = torch.tensor([0.0, 1.0])

    def filters(theta=0.0):
        mag = torch.einsum("oir,rhw->oihw", radial_w, basis_r)
        ang = orders.view(-1, 1, 1, 1) * (phi + theta) + phase[..., None, None]
        return torch.polar(mag, ang)                                  # complex64 (cout, cin, k, k)

    w = filters()
    res["filter_dtype"] = [str(w.dtype).split(".")[1]]
    res["filter_ri"] = torch.view_as_real(w)
    xc = torch.complex(x, torch.zeros_like(x))
    out = F.conv2d(xc, w, padding=k // 2)
    res["conv_dtype"] = [str(out.dtype).split(".")[1]]
    mag = out.abs()
    act = torch.relu(mag - 0.1) / (mag + 1e-6) * out                 # modulus ReLU keeps phase
    res["act_ri"] = torch.view_as_real(act)
    loss = act.abs().pow(2).mean() + torch.angle(out[:, 1, 4, 4]).sum()
    loss.backward()
    res["loss"] = loss
    res["radial_grad"] = radial_w.grad
    res["phase_grad"] = phase.grad
    with torch.no_grad():
        steered = filters(math.pi / 2)
        direct = torch.rot90(filters(), 1, (-2, -1))
        # steering by theta rotates the filter's modulus and turns mode m's phase by m theta
        res["steer_modulus"] = [bool((steered.abs() - direct.abs()).abs().max() < 1e-5)]
        res["steer_turn"] = torch.angle(steered[1] * filters()[1].conj())[..., 0, :]
    return res


def _real_sph_harm(torch, lmax, xyz):
    """Real spherical harmonics Y_lm (lmax <= 3) from unit vectors by the associated Legendre
    recursion in cos(theta) and the Chebyshev recursion in phi, as spherical-CNN code does."""
    x, y, z = xyz.unbind(-1)
    ct = z.clamp(-1, 1)
    st = torch.sqrt((1 - ct * ct).clamp_min(1e-12))
    phi = torch.atan2(y, x)
    P = {(0, 0): torch.ones_like(ct)}
    for m in range(1, lmax + 1):
        P[(m, m)] = -(2 * m - 1) * st * P[(m - 1, m - 1)]
    for m in range(0, lmax):
        P[(m + 1, m)] = (2 * m + 1) * ct * P[(m, m)]
    for m in range(0, lmax + 1):
        for l_ in range(m + 2, lmax + 1):
            P[(l_, m)] = ((2 * l_ - 1) * ct * P[(l_ - 1, m)]
                          - (l_ + m - 1) * P[(l_ - 2, m)]) / (l_ - m)
    out = []
    for l_ in range(lmax + 1):
        for m in range(-l_, l_ + 1):
            am = abs(m)
            norm = math.sqrt((2 * l_ + 1) / (4 * math.pi) * math.factorial(l_ - am)
                             / math.factorial(l_ + am))
            if m == 0:
                out.append(norm * P[(l_, 0)])
            elif m > 0:
                out.append(math.sqrt(2) * norm * P[(l_, am)] * torch.cos(am * phi))
            else:
                out.append(math.sqrt(2) * norm * P[(l_, am)] * torch.sin(am * phi))
    return torch.stack(out, -1)


def spherical_program(torch):
    """Spherical CNN-lite: real SH on a Fibonacci grid, the SH transform by quadrature, a
    per-degree (isotropic) spectral filter expanded with repeat_interleave, the inverse
    transform, a learnable filter fitted for a few Adam steps; orthonormality check."""
    rng = np.random.default_rng(3004)
    n, lmax = 64, 3
    i = torch.arange(n, dtype=torch.float64) + 0.5
    polar = torch.arccos(1 - 2 * i / n)
    azim = math.pi * (1 + 5 ** 0.5) * i
    xyz = torch.stack([polar.sin() * azim.cos(), polar.sin() * azim.sin(), polar.cos()], -1)
    Y = _real_sph_harm(torch, lmax, xyz.float())                            # (n, 16)
    area = 4 * math.pi / n
    gram = Y.T @ Y * area
    res = {"sh_first_rows": Y[:5], "gram_diag": gram.diagonal(),
           "gram_offdiag_max": (gram - torch.diag(gram.diagonal())).abs().max()}
    degrees = torch.arange(lmax + 1).repeat_interleave(2 * torch.arange(lmax + 1) + 1)
    res["degrees"] = degrees.tolist()
    signal = normal(torch, rng, 2, n)
    target = normal(torch, rng, 2, n)
    h = torch.nn.Parameter(torch.ones(lmax + 1))
    opt = torch.optim.Adam([h], lr=0.1, amsgrad=True)
    losses = []
    for _ in range(4):
        coeffs = signal @ Y * area                                          # forward SHT
        filtered = coeffs * h[degrees]                                      # isotropic filter
        recon = filtered @ Y.T
        loss = torch.nn.functional.mse_loss(recon, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["h"] = h
    res["power_spectrum"] = torch.zeros(2, lmax + 1).index_add_(1, degrees, coeffs.detach() ** 2)
    return res


def capsnet_program(torch):
    """CapsNet (Sabour et al.) on tiny inputs: primary capsules from a conv, squash, the
    prediction vectors u_hat by einsum, three routing iterations (softmax over the output
    capsules, agreement b += <u_hat, v>, u_hat detached in the inner iterations), margin loss,
    reconstruction decoder masked by the true class (eval: by the longest capsule)."""
    rng = np.random.default_rng(3005)
    nn, F = torch.nn, torch.nn.functional

    def squash(s, dim=-1, eps=1e-8):
        sq = (s ** 2).sum(dim=dim, keepdim=True)
        return sq / (1 + sq) * s / torch.sqrt(sq + eps)

    class CapsNet(nn.Module):
        def __init__(self, n_classes=3, in_caps=2 * 3 * 3, in_dim=4, out_dim=6):
            super().__init__()
            self.conv = nn.Conv2d(1, 8, 3)
            self.primary = nn.Conv2d(8, 2 * in_dim, 3, stride=2)
            self.W = nn.Parameter(torch.randn(1, in_caps, n_classes, out_dim, in_dim))
            self.decoder = nn.Sequential(nn.Linear(n_classes * out_dim, 16), nn.ReLU(inplace=True),
                                         nn.Linear(16, 81), nn.Sigmoid())
            self.in_dim, self.n_classes = in_dim, n_classes

        def forward(self, x, y=None, iters=3):
            h = F.relu(self.conv(x))
            u = self.primary(h)                                    # (b, 2*in_dim, 3, 3)
            b = x.shape[0]
            u = u.view(b, 2, self.in_dim, -1).permute(0, 1, 3, 2).reshape(b, -1, self.in_dim)
            u = squash(u)
            u_hat = torch.einsum("bijdk,bik->bijd", self.W.expand(b, -1, -1, -1, -1), u)
            logits = torch.zeros(*u_hat.shape[:3], device=x.device)
            u_hat_d = u_hat.detach()
            for it in range(iters):
                c = F.softmax(logits, dim=2)
                uh = u_hat if it == iters - 1 else u_hat_d
                v = squash((c.unsqueeze(-1) * uh).sum(dim=1))      # (b, J, D)
                if it < iters - 1:
                    logits = logits + (uh * v.unsqueeze(1)).sum(-1)
            lengths = v.norm(dim=-1)
            if y is None:
                y = lengths.argmax(1)
            mask = F.one_hot(y, self.n_classes).type_as(v)
            recon = self.decoder((v * mask[..., None]).flatten(1))
            return lengths, recon, c

    def margin_loss(lengths, y, m_pos=0.9, m_neg=0.1, lam=0.5):
        t = F.one_hot(y, lengths.size(1)).float()
        loss = t * F.relu(m_pos - lengths) ** 2 + lam * (1 - t) * F.relu(lengths - m_neg) ** 2
        return loss.sum(1).mean()

    net = CapsNet()
    fill_(torch, net, rng, 0.5)
    x = torch.from_numpy(rng.random((4, 1, 9, 9)).astype(np.float32))
    y = torch.tensor([0, 1, 2, 1])
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    res, losses = {}, []
    for _ in range(3):
        lengths, recon, c = net(x, y)
        loss = margin_loss(lengths, y) + 0.0005 * F.mse_loss(recon, x.flatten(1), reduction="sum")
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["coupling_sums"] = c.sum(2)
    # older CapsNet code calls softmax without dim= (warns; a 2-D input takes dim 1)
    res["implicit_softmax"] = F.softmax(torch.zeros(3, 4) + torch.arange(4.0))
    res["W_grad"] = net.W.grad
    with torch.no_grad():
        lengths, recon, c = net(x)
    res["eval_lengths"] = lengths
    res["eval_recon"] = recon
    res["pred"] = lengths.argmax(1).tolist()
    return res


PROGRAMS = [p4_gcnn_program, p4m_pool_program, harmonic_filter_program, spherical_program,
            capsnet_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 conv accumulation order through BatchNorm (1/std amplifies) and 3 SGD steps
        "p4_gcnn_program": (1e-4, 1e-5),
    })
