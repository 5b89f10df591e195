"""Generative models written as their popular implementations write them, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights and data: a Gated PixelCNN
(masked Conv2d subclasses with a mask buffer and with a parametrization, vertical and
horizontal stacks, 256-way cross-entropy over pixels, pixel-by-pixel sampling with multinomial
and a Generator), MADE/MAF (degree masks, randperm orders, MaskedLinear through F.linear,
batch-norm flow layers, log-det accumulation, the sequential inverse) and flow matching
(sinusoidal time embedding, Euler and Heun sampling under inference_mode, a per-sample solver
under vmap writing into new_zeros/zeros_like buffers, exact divergences through torch.func and
autograd, Hutchinson estimates, likelihood by the instantaneous change of variables).
StyleGAN2 and EDM / score matching are in test_parity_programs_round23_generative_scores.py;
what the programs found is pinned in test_parity_programs_round23_generative_fixes.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _names(*tensors):
    """The names of the tensors' backward nodes (None for a tensor without one)."""
    return [None if t.grad_fn is None else t.grad_fn.name() for t in tensors]


def pixelcnn_program(torch):
    """A Gated PixelCNN with class conditioning on 6x6 images of 256 levels, a plain PixelCNN
    whose mask lives in a parametrization, cross-entropy training and sampling."""
    nn, F = torch.nn, torch.nn.functional
    parametrize = torch.nn.utils.parametrize
    rng = np.random.default_rng(230)
    res = {}
    levels, dim, n_classes, size = 256, 8, 3, 6

    class MaskedConv2d(nn.Conv2d):
        """PixelCNN's masked convolution: type A hides the centre pixel, type B shows it."""

        def __init__(self, mask_type, *args, **kwargs):
            super().__init__(*args, **kwargs)
            assert mask_type in {"A", "B"}
            self.register_buffer("mask", self.weight.data.clone())
            _, _, kh, kw = self.weight.size()
            self.mask.fill_(1)
            self.mask[:, :, kh // 2, kw // 2 + (mask_type == "B"):] = 0
            self.mask[:, :, kh // 2 + 1:] = 0

        def forward(self, x):
            self.weight.data *= self.mask
            return super().forward(x)

    class GatedActivation(nn.Module):
        def forward(self, x):
            x, y = x.chunk(2, dim=1)
            return F.tanh(x) * F.sigmoid(y)

    class GatedMaskedConv2d(nn.Module):
        def __init__(self, mask_type, dim, kernel, residual=True):
            super().__init__()
            self.mask_type, self.residual = mask_type, residual
            self.class_cond_embedding = nn.Embedding(n_classes, 2 * dim)
            self.vert_stack = nn.Conv2d(dim, dim * 2, (kernel // 2 + 1, kernel), 1,
                                        (kernel // 2, kernel // 2))
            self.vert_to_horiz = nn.Conv2d(2 * dim, 2 * dim, 1)
            self.horiz_stack = nn.Conv2d(dim, dim * 2, (1, kernel // 2 + 1), 1,
                                         (0, kernel // 2))
            self.horiz_resid = nn.Conv2d(dim, dim, 1)
            self.gate = GatedActivation()

        def make_causal(self):
            self.vert_stack.weight.data[:, :, -1].zero_()
            self.horiz_stack.weight.data[:, :, :, -1].zero_()

        def forward(self, x_v, x_h, h):
            if self.mask_type == "A":
                self.make_causal()
            h = self.class_cond_embedding(h)
            h_vert = self.vert_stack(x_v)
            h_vert = h_vert[:, :, :x_v.size(-1), :]
            out_v = self.gate(h_vert + h[:, :, None, None])
            h_horiz = self.horiz_stack(x_h)
            h_horiz = h_horiz[:, :, :, :x_h.size(-2)]
            v2h = self.vert_to_horiz(h_vert)
            out = self.gate(v2h + h_horiz + h[:, :, None, None])
            out_h = self.horiz_resid(out) + x_h if self.residual else self.horiz_resid(out)
            return out_v, out_h

    class GatedPixelCNN(nn.Module):
        def __init__(self, n_layers=3):
            super().__init__()
            self.embedding = nn.Embedding(levels, dim)
            self.layers = nn.ModuleList(
                GatedMaskedConv2d("A" if i == 0 else "B", dim, 7 if i == 0 else 3,
                                  residual=i > 0) for i in range(n_layers))
            self.output_conv = nn.Sequential(nn.Conv2d(dim, 32, 1), nn.ReLU(True),
                                             nn.Conv2d(32, levels, 1))

        def forward(self, x, label):
            x = self.embedding(x.view(-1)).view(x.shape + (-1,)).permute(0, 3, 1, 2)
            x_v, x_h = (x, x)
            for layer in self.layers:
                x_v, x_h = layer(x_v, x_h, label)
            return self.output_conv(x_h)

        @torch.no_grad()
        def generate(self, label, shape, batch_size, generator, temperature=1.0):
            x = torch.zeros((batch_size, *shape), dtype=torch.int64)
            for i in range(shape[0]):
                for j in range(shape[1]):
                    logits = self.forward(x, label)
                    probs = F.softmax(logits[:, :, i, j] / temperature, -1)
                    x.data[:, i, j].copy_(probs.multinomial(1, generator=generator).squeeze())
            return x

    model = GatedPixelCNN()
    fill_(torch, model, rng, 0.15)
    images = torch.from_numpy(rng.integers(0, levels, (4, size, size)))
    labels = torch.from_numpy(rng.integers(0, n_classes, 4))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, amsgrad=True)
    losses, bpd = [], []
    for _ in range(3):
        logits = model(images, labels)
        loss = F.cross_entropy(logits, images)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        bpd.append((loss / math.log(2)).item())
    res["losses"], res["bits_per_dim"] = losses, bpd
    res["nodes"] = _names(loss, logits, model.layers[0].gate(logits[:, :2]))
    res["logits_shape"] = list(logits.shape)
    res["vert_weight"] = model.layers[0].vert_stack.weight
    res["nll_map"] = F.cross_entropy(logits.detach(), images, reduction="none")[0]
    res["nll_smooth"] = F.cross_entropy(logits.detach(), images, label_smoothing=0.1)
    res["log_softmax_pick"] = -F.log_softmax(logits.detach(), 1).gather(
        1, images.unsqueeze(1)).mean()

    # causality: the output at (2, 3) must ignore pixels at and after it in raster order
    model.eval()
    x = images[:1].clone()
    emb = model.embedding(x.view(-1)).view(1, size, size, dim).permute(0, 3, 1, 2)
    emb = emb.detach().requires_grad_(True)
    x_v, x_h = emb, emb
    for layer in model.layers:
        x_v, x_h = layer(x_v, x_h, labels[:1])
    model.output_conv(x_h)[0, :, 2, 3].sum().backward()
    seen = emb.grad.abs().sum(1)[0] > 0
    res["receptive_field"] = seen.int()

    # nearly greedy sampling agrees across frameworks; sampling at temperature 1 is reproducible
    gen = torch.Generator().manual_seed(5)
    greedy = model.generate(labels[:2], (3, 3), 2, gen, temperature=1e-3)
    res["greedy"] = greedy
    gen.manual_seed(11)
    first = model.generate(labels[:2], (2, 2), 2, gen)
    gen.manual_seed(11)
    again = model.generate(labels[:2], (2, 2), 2, gen)
    res["sample_meta"] = [torch.equal(first, again), _name(first.dtype),
                          bool(((first >= 0) & (first < levels)).all())]
    probs = F.softmax(model(images[:2], labels[:2])[:, :, 0, 0], -1)
    draws = torch.multinomial(probs, 3, replacement=True, generator=gen)
    res["multinomial_meta"] = [_name(draws.dtype), str(draws.device), draws.is_contiguous(),
                               *draws.shape]

    # a plain PixelCNN whose mask is a parametrization: the stored weight stays unmasked
    class Mask(nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.register_buffer("mask", mask)

        def forward(self, weight):
            return weight * self.mask

    def masked_conv(mask_type, cin, cout, k):
        conv = nn.Conv2d(cin, cout, k, padding=k // 2, bias=False)
        mask = torch.ones_like(conv.weight)
        mask[:, :, k // 2, k // 2 + (mask_type == "B"):] = 0
        mask[:, :, k // 2 + 1:] = 0
        parametrize.register_parametrization(conv, "weight", Mask(mask))
        return conv

    plain = nn.Sequential(masked_conv("A", 1, 8, 5), nn.BatchNorm2d(8), nn.ReLU(),
                          masked_conv("B", 8, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, levels, 1))
    fill_(torch, plain, rng, 0.3)
    opt = torch.optim.RMSprop(plain.parameters(), lr=1e-3)
    xs = images.float().unsqueeze(1) / (levels - 1)
    plain_losses = []
    for _ in range(2):
        loss = F.cross_entropy(plain(xs), images)
        opt.zero_grad()
        loss.backward()
        opt.step()
        plain_losses.append(loss.item())
    res["plain_losses"] = plain_losses
    res["plain_nodes"] = _names(loss, plain[0](xs))
    conv0 = plain[0]
    res["plain_keys"] = sorted(plain.state_dict().keys())
    res["plain_param_names"] = [n for n, _ in plain.named_parameters()][:3]
    res["plain_original"] = conv0.parametrizations.weight.original
    res["plain_masked"] = conv0.weight
    res["plain_flags"] = [parametrize.is_parametrized(conv0),
                          parametrize.is_parametrized(conv0, "weight"),
                          type(conv0).__name__]
    with parametrize.cached():
        res["plain_cached"] = [conv0.weight is conv0.weight]
    parametrize.remove_parametrizations(conv0, "weight", leave_parametrized=True)
    res["plain_removed"] = conv0.weight
    res["plain_removed_meta"] = [type(conv0).__name__, parametrize.is_parametrized(conv0)]
    return res


def made_program(torch):
    """MADE masks from degree vectors (natural and randperm orders), a MAF of MADE blocks with
    batch-norm flows and reversals, trained by maximum likelihood, and its inverse."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(231)
    res = {}
    n_in, n_hidden = 4, 12

    def get_mask(in_features, out_features, in_flow_features, mask_type=None):
        if mask_type == "input":
            in_degrees = torch.arange(in_features) % in_flow_features
        else:
            in_degrees = torch.arange(in_features) % (in_flow_features - 1)
        if mask_type == "output":
            out_degrees = torch.arange(out_features) % in_flow_features - 1
        else:
            out_degrees = torch.arange(out_features) % (in_flow_features - 1)
        return (out_degrees.unsqueeze(-1) >= in_degrees.unsqueeze(0)).float()

    class MaskedLinear(nn.Module):
        def __init__(self, in_features, out_features, mask, cond_in_features=None, bias=True):
            super().__init__()
            self.linear = nn.Linear(in_features, out_features)
            if cond_in_features is not None:
                self.cond_linear = nn.Linear(cond_in_features, out_features, bias=False)
            self.register_buffer("mask", mask)

        def forward(self, inputs, cond_inputs=None):
            output = F.linear(inputs, self.linear.weight * self.mask, self.linear.bias)
            if cond_inputs is not None:
                output += self.cond_linear(cond_inputs)
            return output

    class MADE(nn.Module):
        def __init__(self, num_inputs, num_hidden, num_cond_inputs=None):
            super().__init__()
            input_mask = get_mask(num_inputs, num_hidden, num_inputs, mask_type="input")
            hidden_mask = get_mask(num_hidden, num_hidden, num_inputs)
            output_mask = get_mask(num_hidden, num_inputs * 2, num_inputs, mask_type="output")
            self.joiner = MaskedLinear(num_inputs, num_hidden, input_mask, num_cond_inputs)
            self.trunk = nn.Sequential(nn.ReLU(), MaskedLinear(num_hidden, num_hidden,
                                                               hidden_mask),
                                       nn.ReLU(), MaskedLinear(num_hidden, num_inputs * 2,
                                                               output_mask))

        def forward(self, inputs, cond_inputs=None, mode="direct"):
            if mode == "direct":
                h = self.joiner(inputs, cond_inputs)
                m, a = self.trunk(h).chunk(2, 1)
                u = (inputs - m) * torch.exp(-a)
                return u, -a.sum(-1, keepdim=True)
            x = torch.zeros_like(inputs)
            for i_col in range(inputs.shape[1]):
                h = self.joiner(x, cond_inputs)
                m, a = self.trunk(h).chunk(2, 1)
                x[:, i_col] = inputs[:, i_col] * torch.exp(a[:, i_col]) + m[:, i_col]
            return x, -a.sum(-1, keepdim=True)

    class BatchNormFlow(nn.Module):
        def __init__(self, num_inputs, momentum=0.0, eps=1e-5):
            super().__init__()
            self.log_gamma = nn.Parameter(torch.zeros(num_inputs))
            self.beta = nn.Parameter(torch.zeros(num_inputs))
            self.momentum, self.eps = momentum, eps
            self.register_buffer("running_mean", torch.zeros(num_inputs))
            self.register_buffer("running_var", torch.ones(num_inputs))

        def forward(self, inputs, cond_inputs=None, mode="direct"):
            if mode == "direct":
                if self.training:
                    self.batch_mean = inputs.mean(0)
                    self.batch_var = (inputs - self.batch_mean).pow(2).mean(0) + self.eps
                    self.running_mean.mul_(self.momentum)
                    self.running_var.mul_(self.momentum)
                    self.running_mean.add_(self.batch_mean.data * (1 - self.momentum))
                    self.running_var.add_(self.batch_var.data * (1 - self.momentum))
                    mean, var = self.batch_mean, self.batch_var
                else:
                    mean, var = self.running_mean, self.running_var
                x_hat = (inputs - mean) / var.sqrt()
                y = torch.exp(self.log_gamma) * x_hat + self.beta
                return y, (self.log_gamma - 0.5 * torch.log(var)).sum(-1, keepdim=True)
            mean, var = (self.batch_mean, self.batch_var) if self.training else \
                (self.running_mean, self.running_var)
            x_hat = (inputs - self.beta) / torch.exp(self.log_gamma)
            y = x_hat * var.sqrt() + mean
            return y, (-self.log_gamma + 0.5 * torch.log(var)).sum(-1, keepdim=True)

    class Reverse(nn.Module):
        def __init__(self, num_inputs):
            super().__init__()
            self.perm = np.array(np.arange(0, num_inputs)[::-1])
            self.inv_perm = np.argsort(self.perm)

        def forward(self, inputs, cond_inputs=None, mode="direct"):
            perm = self.perm if mode == "direct" else self.inv_perm
            return inputs[:, perm], torch.zeros(inputs.size(0), 1)

    class FlowSequential(nn.Sequential):
        def forward(self, inputs, cond_inputs=None, mode="direct", logdets=None):
            self.num_inputs = inputs.size(-1)
            if logdets is None:
                logdets = torch.zeros(inputs.size(0), 1, device=inputs.device)
            assert mode in ["direct", "inverse"]
            modules = self._modules.values() if mode == "direct" else \
                reversed(self._modules.values())
            for module in modules:
                inputs, logdet = module(inputs, cond_inputs, mode)
                logdets += logdet
            return inputs, logdets

        def log_probs(self, inputs, cond_inputs=None):
            u, log_jacob = self(inputs, cond_inputs)
            log_probs = (-0.5 * u.pow(2) - 0.5 * math.log(2 * math.pi)).sum(-1, keepdim=True)
            return (log_probs + log_jacob).sum(-1, keepdim=True)

    res["masks"] = [get_mask(n_in, n_hidden, n_in, "input"),
                    get_mask(n_hidden, n_in * 2, n_in, "output")]

    # batch norm in training mode right after a MADE makes that MADE's first shift and the
    # norm's own shift exact no-ops, whose rounding-level gradients Adam would blow up to lr
    # steps: the norm goes first, where it only whitens the data
    blocks = [BatchNormFlow(n_in)]
    for _ in range(3):
        blocks += [MADE(n_in, n_hidden, num_cond_inputs=2), Reverse(n_in)]
    flow = FlowSequential(*blocks)
    fill_(torch, flow, rng, 0.25)
    for module in flow.modules():
        if isinstance(module, BatchNormFlow):
            module.log_gamma.data.zero_()
            module.beta.data.zero_()
    data = normal(torch, rng, 24, n_in) * torch.tensor([1.0, 0.5, 2.0, 1.0])
    data[:, 1] += data[:, 0] ** 2 / 4
    cond = normal(torch, rng, 24, 2)
    opt = torch.optim.Adam(flow.parameters(), lr=1e-3, weight_decay=1e-6)
    losses = []
    for step in range(4):
        batch, c = data[step * 6:(step + 1) * 6], cond[step * 6:(step + 1) * 6]
        opt.zero_grad()
        loss = -flow.log_probs(batch, c).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(flow.parameters(), 5.0, error_if_nonfinite=True)
        opt.step()
        losses.append(loss.item())
        nodes = _names(loss, flow[1].joiner(batch, c))
        for module in flow.modules():
            if isinstance(module, BatchNormFlow):
                module.momentum = 0
        with torch.no_grad():
            flow(data, cond)
        for module in flow.modules():
            if isinstance(module, BatchNormFlow):
                module.momentum = 1
    res["losses"] = losses
    res["running_var"] = flow[0].running_var
    res["nodes"] = nodes
    flow.eval()
    with torch.no_grad():
        u, logdet = flow(data[:5], cond[:5])
        x_back, inv_logdet = flow(u, cond[:5], mode="inverse")
    res["u"], res["logdet"] = u, logdet
    res["inverse"], res["inv_logdet"] = x_back, inv_logdet
    res["roundtrip_close"] = [bool(torch.allclose(x_back, data[:5], atol=1e-4))]
    res["eval_log_probs"] = flow.log_probs(data[:5], cond[:5]).detach()

    # sampling: noise from NumPy through the inverse
    with torch.no_grad():
        z = normal(torch, rng, 3, n_in)
        samples, _ = flow(z, cond[:3], mode="inverse")
    res["samples"] = samples

    # the autoregressive property holds for any input order drawn with randperm
    gen = torch.Generator().manual_seed(3)
    order = torch.randperm(n_in, generator=gen)
    again = torch.randperm(n_in, generator=torch.Generator().manual_seed(3))
    hidden_deg = torch.randint(int(order.min()), n_in - 1, (n_hidden,), generator=gen)
    m_in = (hidden_deg[:, None] >= order[None, :]).float()
    m_out = (order[:, None] > hidden_deg[None, :]).float()
    connectivity = (m_out @ m_in) > 0
    res["order_meta"] = [sorted(order.tolist()) == list(range(n_in)), torch.equal(order, again),
                         _name(order.dtype), _name(hidden_deg.dtype),
                         bool((connectivity & (order[:, None] <= order[None, :])).any())]

    # the Jacobian of one MADE is triangular in the natural order
    made = flow[1]

    def shift(x):
        return made(x.unsqueeze(0), cond[:1])[0].squeeze(0)
    jac = torch.autograd.functional.jacobian(shift, data[0])
    res["jacobian"] = jac
    res["jacobian_upper_zero"] = [bool((jac.triu(1) == 0).all())]
    return res




def flow_matching_program(torch):
    """Conditional flow matching with straight (rectified) paths: sinusoidal time embedding, an
    MLP velocity field trained by MSE, Euler and Heun sampling under inference_mode, exact
    divergences (jacrev, jvp, autograd loops), Hutchinson estimates and log-likelihoods."""
    nn, F = torch.nn, torch.nn.functional
    func = torch.func
    rng = np.random.default_rng(232)
    res = {}
    dim, emb_dim = 2, 8

    class SinusoidalPosEmb(nn.Module):
        def __init__(self, dim, max_period=10000.0):
            super().__init__()
            self.dim, self.max_period = dim, max_period

        def forward(self, t):
            half = self.dim // 2
            freqs = torch.exp(-math.log(self.max_period)
                              * torch.arange(half, dtype=torch.float32, device=t.device) / half)
            args = t[:, None].float() * freqs[None] * 1000
            return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    class VelocityField(nn.Module):
        def __init__(self, hidden=32):
            super().__init__()
            self.time_embed = nn.Sequential(SinusoidalPosEmb(emb_dim), nn.Linear(emb_dim, hidden),
                                            nn.SiLU())
            self.inp = nn.Linear(dim, hidden)
            self.net = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                     nn.Linear(hidden, dim))

        def forward(self, t, x):
            if t.dim() == 0:
                t = t.expand(x.shape[0])
            return self.net(self.inp(x) + self.time_embed(t))

    model = VelocityField()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.99), weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=1e-4)
    angles = rng.uniform(0, 2 * np.pi, 64)
    target = torch.from_numpy(np.stack([np.cos(angles), np.sin(angles)], 1).astype(np.float32))
    target = target * 2 + 0.1 * normal(torch, rng, 64, dim)
    losses, lrs = [], []
    for step in range(5):
        x1 = target[step * 12:(step + 1) * 12]
        x0 = normal(torch, rng, 12, dim)
        t = torch.from_numpy(rng.uniform(size=12).astype(np.float32))
        sigma_min = 1e-4
        xt = (1 - (1 - sigma_min) * t[:, None]) * x0 + t[:, None] * x1
        ut = x1 - (1 - sigma_min) * x0
        loss = F.mse_loss(model(t, xt), ut)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(sched.get_last_lr()[0])
    res["losses"], res["lrs"] = losses, lrs
    res["nodes"] = _names(loss, xt, model(t, xt))
    res["time_embedding"] = model.time_embed[0](torch.linspace(0, 1, 3))

    x0 = normal(torch, rng, 6, dim)
    with torch.inference_mode():
        steps = 8
        ts = torch.linspace(0, 1, steps + 1)
        x_euler, x_heun = x0.clone(), x0.clone()
        trajectory = [x_euler]
        for t0, t1 in zip(ts[:-1], ts[1:]):
            dt = t1 - t0
            x_euler = x_euler + dt * model(t0, x_euler)
            trajectory.append(x_euler)
            v0 = model(t0.expand(x_heun.shape[0]), x_heun)
            x_pred = x_heun + dt * v0
            v1 = model(t1.expand(x_heun.shape[0]), x_pred)
            x_heun = x_heun + dt * 0.5 * (v0 + v1)
        traj = torch.stack(trajectory)
    res["euler"], res["heun"], res["trajectory"] = x_euler, x_heun, traj
    res["inference_flags"] = [x_euler.is_inference(), traj.requires_grad, x0.is_inference(),
                              torch.is_inference_mode_enabled()]
    res["midpoint"] = torch.lerp(x0, x_heun, 0.5)

    # a per-sample solver under vmap that writes its trajectory into preallocated buffers
    def solve_one(x, n_steps=4):
        traj = x.new_zeros(n_steps + 1, dim)
        speeds = torch.zeros_like(traj[:, 0])
        traj[0] = x
        for i in range(n_steps):
            v = model(torch.tensor(i / n_steps), traj[i].unsqueeze(0)).squeeze(0)
            speeds[i] = v.norm()
            traj[i + 1] = traj[i] + v / n_steps
        return traj, speeds

    with torch.no_grad():
        traj_vmap, speeds = torch.func.vmap(solve_one)(x0[:3])
    res["vmap_trajectory"], res["vmap_speeds"] = traj_vmap, speeds

    # Hutchinson probes drawn per sample inside vmap: different draws, same statistics
    def hutchinson_one(x, n_probes=2000):
        eps = torch.empty_like(x.expand(n_probes, dim)).normal_()
        _, vjp_fn = func.vjp(lambda y: model(torch.tensor(0.5), y), x.expand(n_probes, dim))
        return (vjp_fn(eps)[0] * eps).sum(-1).mean(), eps

    # exact divergence of the velocity field: four ways
    t_half = torch.tensor(0.5)

    def v_single(x):
        return model(t_half, x.unsqueeze(0)).squeeze(0)

    jac = func.vmap(func.jacrev(v_single))(x0)
    res["div_jacrev"] = jac.diagonal(dim1=-2, dim2=-1).sum(-1)
    basis = torch.eye(dim)
    div_jvp = sum(func.jvp(lambda x: model(t_half, x), (x0,), (basis[i].expand_as(x0),))[1][:, i]
                  for i in range(dim))
    res["div_jvp"] = div_jvp
    x_req = x0.clone().requires_grad_(True)
    v = model(t_half, x_req)
    div_loop = sum(torch.autograd.grad(v[:, i].sum(), x_req, retain_graph=True)[0][:, i]
                   for i in range(dim))
    res["div_loop"] = div_loop
    res["div_jacfwd"] = torch.einsum("bii->b", func.vmap(func.jacfwd(v_single))(x0))

    # Hutchinson: fixed probes for values, randn_like / randint_like probes for the estimator
    eps = normal(torch, rng, *x0.shape)
    _, vjp_fn = func.vjp(lambda x: model(t_half, x), x0)
    res["hutchinson_fixed"] = (vjp_fn(eps)[0] * eps).sum(-1)
    torch.manual_seed(0)
    probes = 4000
    xs = x0.repeat(probes, 1).requires_grad_(True)
    vs = model(t_half, xs)
    gauss = torch.randn_like(xs)
    rademacher = torch.randint_like(xs, low=0, high=2) * 2 - 1
    est = []
    for probe in (gauss, rademacher):
        g, = torch.autograd.grad((vs * probe).sum(), xs, retain_graph=True)
        est.append((g * probe).sum(-1).view(probes, -1).mean(0))
    res["hutchinson_close"] = [bool(torch.allclose(e, div_loop, atol=0.15)) for e in est]
    per_sample, eps = func.vmap(hutchinson_one, randomness="different")(x0)
    res["hutchinson_vmap"] = [bool(torch.allclose(per_sample, div_loop, atol=0.15)),
                              not torch.equal(eps[0], eps[1]), *eps.shape]
    res["probe_meta"] = [_name(gauss.dtype), _name(rademacher.dtype),
                         sorted(rademacher.unique().tolist()) == [-1.0, 1.0]]

    # log-likelihood: integrate the divergence backwards from data to noise (Euler)
    def log_likelihood(x1, n_steps=6):
        x, logdet = x1.clone(), torch.zeros(x1.shape[0])
        for t in torch.linspace(1, 0, n_steps + 1)[:-1]:
            with torch.enable_grad():
                x_ = x.detach().requires_grad_(True)
                v = model(t, x_)
                div = sum(torch.autograd.grad(v[:, i].sum(), x_, create_graph=False,
                                              retain_graph=i < dim - 1)[0][:, i]
                          for i in range(dim))
            x = x - v.detach() / n_steps
            logdet = logdet - div / n_steps
        prior = torch.distributions.Normal(0.0, 1.0)
        return prior.log_prob(x).sum(-1) + logdet * -1, x

    with torch.no_grad():
        ll, z = log_likelihood(target[:5])
    res["log_likelihood"], res["z"] = ll, z
    return res


PROGRAMS = [pixelcnn_program, made_program, flow_matching_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
