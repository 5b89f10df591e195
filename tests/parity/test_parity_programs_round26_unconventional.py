"""Unconventional networks written the way their reference repositories write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
spiking networks (snnTorch / SpikingJelly: surrogate-gradient Functions, reset by subtraction
with detach, BPTT), modern Hopfield retrieval and pooling, a growing neural cellular automaton
(grouped Sobel perception, stochastic and alive masks, a sample pool, per-parameter gradient
normalisation) and KAN (efficient-kan: Cox-de Boor B-splines on a grid buffer, lstsq grid
update, regularisation)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _surrogates(torch):
    """snnTorch's fast sigmoid and SpikingJelly's arctangent surrogate spike functions."""

    class FastSigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input_, slope=25):
            ctx.save_for_backward(input_)
            ctx.slope = slope
            out = (input_ > 0).float()
            return out

        @staticmethod
        def backward(ctx, grad_output):
            (input_,) = ctx.saved_tensors
            grad_input = grad_output.clone()
            grad = grad_input / (ctx.slope * torch.abs(input_) + 1.0) ** 2
            return grad, None

    class ATan(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            if x.requires_grad:
                ctx.save_for_backward(x)
                ctx.alpha = alpha
            return torch.heaviside(x, torch.tensor(0.0, dtype=x.dtype))

        @staticmethod
        def backward(ctx, grad_output):
            grad_x = None
            if ctx.needs_input_grad[0]:
                x = ctx.saved_tensors[0]
                grad_x = ctx.alpha / 2 / (1 + (math.pi / 2 * ctx.alpha * x).pow_(2)) * grad_output
            return grad_x, None

    return FastSigmoid, ATan


def snn_program(torch):
    """A two-layer snnTorch-style network of Leaky neurons (learnable beta clamped to [0, 1],
    reset by subtraction of a detached spike) and a SpikingJelly-style multi-step LIF layer
    (charge with decay_input, hard reset to v_reset, detach_reset), rate-coded inputs, BPTT
    over 6 steps with a rate cross-entropy and a membrane MSE, Adam."""
    nn, F = torch.nn, torch.nn.functional
    FastSigmoid, ATan = _surrogates(torch)
    rng = np.random.default_rng(2601)
    res = {}

    class Leaky(nn.Module):
        def __init__(self, beta, threshold=1.0, learn_beta=True):
            super().__init__()
            if learn_beta:
                self.beta = nn.Parameter(torch.as_tensor(beta))
            else:
                self.register_buffer("beta", torch.as_tensor(beta))
            self.register_buffer("threshold", torch.as_tensor(threshold))
            self.spike_grad = FastSigmoid.apply

        def fire(self, mem):
            mem_shift = mem - self.threshold
            return self.spike_grad(mem_shift)

        def forward(self, input_, mem):
            reset = self.fire(mem).clone().detach()
            mem = self.beta.clamp(0, 1) * mem + input_ - reset * self.threshold
            spk = self.fire(mem)
            return spk, mem

    class MultiStepLIF(nn.Module):
        def __init__(self, tau=2.0, v_threshold=1.0, v_reset=0.0, detach_reset=True):
            super().__init__()
            self.tau, self.v_threshold, self.v_reset = tau, v_threshold, v_reset
            self.detach_reset = detach_reset
            self.v = 0.0

        def neuronal_charge(self, x):
            self.v = self.v + (x - (self.v - self.v_reset)) / self.tau

        def forward(self, x_seq):
            spikes = []
            for x in x_seq:
                if not isinstance(self.v, torch.Tensor):
                    self.v = torch.full_like(x, self.v)
                self.neuronal_charge(x)
                spike = ATan.apply(self.v - self.v_threshold, 2.0)
                spike_d = spike.detach() if self.detach_reset else spike
                self.v = (1.0 - spike_d) * self.v + spike_d * self.v_reset
                spikes.append(spike)
            return torch.stack(spikes)

        def reset(self):
            self.v = 0.0

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(12, 10)
            self.lif1 = Leaky(beta=0.9)
            self.fc2 = nn.Linear(10, 8)
            self.lif2 = MultiStepLIF()
            self.fc3 = nn.Linear(8, 3)
            self.lif3 = Leaky(beta=0.8, learn_beta=False)

        def forward(self, x_seq):
            mem1 = torch.zeros(x_seq.size(1), 10)
            spk1_rec = []
            for step in range(x_seq.size(0)):
                cur1 = self.fc1(x_seq[step])
                spk1, mem1 = self.lif1(cur1, mem1)
                spk1_rec.append(spk1)
            spk1_seq = torch.stack(spk1_rec, dim=0)
            T, B = spk1_seq.shape[:2]
            cur2 = self.fc2(spk1_seq.flatten(0, 1)).reshape(T, B, -1)
            spk2_seq = self.lif2(cur2)
            mem3 = torch.zeros(B, 3)
            spk3_rec, mem3_rec = [], []
            for step in range(T):
                spk3, mem3 = self.lif3(self.fc3(spk2_seq[step]), mem3)
                spk3_rec.append(spk3)
                mem3_rec.append(mem3)
            return torch.stack(spk3_rec), torch.stack(mem3_rec), spk1_seq, spk2_seq

    net = Net()
    fill_(torch, net, rng, 0.8)
    opt = torch.optim.Adam(net.parameters(), lr=5e-3, betas=(0.9, 0.999))
    num_steps, B = 6, 5
    data = rng.random((3, B, 12)).astype(np.float32)
    uniforms = rng.random((3, num_steps, B, 12)).astype(np.float32)
    targets = [torch.from_numpy(rng.integers(0, 3, B)) for _ in range(3)]
    losses, counts = [], []
    for it in range(3):
        x = torch.from_numpy(data[it])
        # spikegen.rate: Bernoulli draws with p = intensity, here against fixed uniforms
        spike_data = (torch.from_numpy(uniforms[it]) < x.repeat(num_steps, 1, 1)).float()
        net.lif2.reset()
        spk_rec, mem_rec, spk1, spk2 = net(spike_data)
        log_p_y = F.log_softmax(spk_rec.sum(0) / num_steps * 5, dim=-1)
        loss_ce = F.nll_loss(log_p_y, targets[it])
        on_target = F.one_hot(targets[it], 3).float()
        loss_mse = sum(F.mse_loss(mem_rec[t], on_target) for t in range(num_steps))
        loss = loss_ce + 0.1 * loss_mse
        opt.zero_grad()
        loss.backward()
        res[f"beta_grad{it}"] = net.lif1.beta.grad.clone()
        opt.step()
        losses.append(loss.item())
        counts.append(int(spk1.sum().item()) + int(spk2.sum().item()))
        res[f"spk_rec{it}"] = spk_rec
    res.update(loss=losses, counts=counts, params=list(net.parameters()),
               beta_buffer=net.lif3.beta, grad_fn=[type(spk_rec.grad_fn).__name__],
               acc=[(spk_rec.sum(0).argmax(1) == targets[-1]).float().mean().item()])
    return res


def hopfield_program(torch):
    """Modern Hopfield networks: iterated retrieval xi <- X softmax(beta X^T xi) from corrupted
    queries with its log-sum-exp energy, a classical binary Hopfield net (Hebbian outer
    products, fill_diagonal_, sign updates), and a trainable HopfieldPooling layer (a learned
    state pattern, scaled softmax over projected stored patterns) trained for a few steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2602)
    res = {}
    d, N, beta = 16, 6, 8.0
    X = normal(torch, rng, d, N)
    X = X / X.norm(dim=0, keepdim=True)
    xi = X[:, :3].T + 0.3 * normal(torch, rng, 3, d)

    def energy(state):
        lse = torch.logsumexp(beta * state @ X, dim=-1) / beta
        return -lse + 0.5 * (state * state).sum(-1) + math.log(N) / beta \
            + 0.5 * X.norm(dim=0).max() ** 2

    energies, steps = [energy(xi)], 0
    while True:
        new = torch.softmax(beta * xi @ X, dim=-1) @ X.T
        steps += 1
        energies.append(energy(new))
        if torch.allclose(new, xi, atol=1e-6) or steps == 8:
            xi = new
            break
        xi = new
    res["retrieved"] = xi
    res["energies"] = torch.stack(energies)
    res["matches"] = (xi @ X).argmax(-1).tolist()
    res["steps"] = [steps]

    # classical Hopfield: Hebbian storage of +-1 patterns, asynchronous sign updates
    P = torch.from_numpy(np.sign(rng.standard_normal((3, 20))).astype(np.float32))
    W = sum(torch.outer(p, p) for p in P) / P.size(1)
    W.fill_diagonal_(0)
    s = P[1].clone()
    s[torch.tensor([0, 3, 7, 11])] *= -1
    order = rng.permutation(20)
    for _ in range(2):
        for i in order:
            h = torch.dot(W[i], s)
            s[i] = torch.sign(h) if h != 0 else s[i]
    res["classical"] = s
    res["classical_energy"] = [(-0.5 * s @ W @ s).item()]
    res["overlaps"] = (P @ s / 20).tolist()

    class HopfieldPooling(nn.Module):
        def __init__(self, input_size, hidden_size, num_heads=2, scaling=None):
            super().__init__()
            self.num_heads, self.hidden = num_heads, hidden_size
            self.pooling_weights = nn.Parameter(torch.empty(1, 1, hidden_size * num_heads))
            # no key bias: with one query it shifts all scores equally (a zero gradient
            # that Adam would blow up from rounding noise)
            self.k_proj = nn.Linear(input_size, hidden_size * num_heads, bias=False)
            self.v_proj = nn.Linear(input_size, hidden_size * num_heads, bias=False)
            self.out_proj = nn.Linear(hidden_size * num_heads, input_size)
            self.scaling = scaling if scaling is not None else 1.0 / math.sqrt(hidden_size)

        def forward(self, stored, mask=None):
            B, L, _ = stored.shape
            q = self.pooling_weights.expand(B, -1, -1)
            k = self.k_proj(stored).view(B, L, self.num_heads, -1).transpose(1, 2)
            v = self.v_proj(stored).view(B, L, self.num_heads, -1).transpose(1, 2)
            q = q.view(B, 1, self.num_heads, -1).transpose(1, 2)
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.scaling
            if mask is not None:
                scores = scores.masked_fill(mask[:, None, None, :], float("-inf"))
            assoc = F.softmax(scores, dim=-1)
            out = (assoc @ v).transpose(1, 2).reshape(B, 1, -1)
            return self.out_proj(out).squeeze(1), assoc

    pool = HopfieldPooling(5, 4)
    head = nn.Linear(5, 2)
    fill_(torch, list(pool.parameters()) + list(head.parameters()), rng, 0.5)
    opt = torch.optim.AdamW(list(pool.parameters()) + list(head.parameters()), lr=1e-2,
                            weight_decay=0.05)
    bags = normal(torch, rng, 4, 7, 5)
    mask = torch.from_numpy(np.arange(7)[None, :] >= np.array([7, 5, 6, 3])[:, None])
    labels = torch.tensor([0, 1, 1, 0])
    losses = []
    for _ in range(4):
        pooled, assoc = pool(bags, mask)
        loss = F.cross_entropy(head(pooled), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res.update(loss=losses, assoc=assoc, pool_params=list(pool.parameters()))
    return res


def nca_program(torch):
    """Growing neural cellular automata: identity + Sobel perception by a depthwise conv2d
    (groups=channels) on circular padding, a 1x1-conv update with a zero-initialised last layer,
    stochastic update masks and alive masks by max_pool2d, a sample pool with the worst sample
    replaced by the seed, per-parameter gradient normalisation, Adam with MultiStepLR."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2603)
    res = {}
    C, H, W = 8, 9, 9

    ident = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    sobel_x = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8.0
    lap = torch.tensor([[1.0, 2.0, 1.0], [2.0, -12, 2.0], [1.0, 2.0, 1.0]]) / 16.0

    class CA(nn.Module):
        def __init__(self, chn=C, hidden_n=32):
            super().__init__()
            self.chn = chn
            self.w1 = nn.Conv2d(chn * 4, hidden_n, 1)
            self.w2 = nn.Conv2d(hidden_n, chn, 1, bias=False)
            with torch.no_grad():
                self.w2.weight.zero_()
            kernel = torch.stack([ident, sobel_x, sobel_x.T, lap])
            self.register_buffer("kernel", kernel.repeat(chn, 1, 1)[:, None])

        def perceive(self, x):
            x = F.pad(x, [1, 1, 1, 1], "circular")
            return F.conv2d(x, self.kernel, groups=self.chn)

        def forward(self, x, update_mask):
            pre_life = F.max_pool2d(x[:, 3:4], 3, 1, 1) > 0.1
            y = self.perceive(x)
            y = self.w2(torch.relu(self.w1(y)))
            x = x + y * update_mask
            post_life = F.max_pool2d(x[:, 3:4], 3, 1, 1) > 0.1
            alive = (pre_life & post_life).float()
            return x * alive

    ca = CA()
    fill_(torch, ca.w1, rng, 0.2)
    with torch.no_grad():
        ca.w2.weight.copy_(torch.from_numpy(
            rng.standard_normal(tuple(ca.w2.weight.shape)).astype(np.float32) * 0.02))
    opt = torch.optim.Adam(ca.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [2], 0.3)
    target = torch.from_numpy(rng.random((4, H, W)).astype(np.float32))
    target[3] = (target[3] > 0.4).float()
    target[:3] *= target[3:4]
    seed = torch.zeros(C, H, W)
    seed[3:, H // 2, W // 2] = 1.0
    pool = seed[None].repeat(6, 1, 1, 1)
    losses, lrs = [], []
    for it in range(3):
        idx = torch.from_numpy(rng.choice(6, 3, replace=False))
        x = pool[idx]
        with torch.no_grad():
            per = (x[:, :4] - target).pow(2).mean([1, 2, 3])
        worst = per.argsort(descending=True)
        x[worst[:1]] = seed
        for step in range(4):
            fire = torch.from_numpy(rng.random((3, 1, H, W)).astype(np.float32))
            x = ca(x, (fire <= 0.5).float())
        overflow = (x - x.clamp(-1.0, 1.0)).abs().sum()
        loss = (x[:, :4] - target).pow(2).mean([1, 2, 3]).mean() + overflow
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in ca.parameters():
                p.grad /= (p.grad.norm() + 1e-8)
        opt.step()
        sched.step()
        pool[idx] = x.detach()
        losses.append(loss.item())
        lrs.append(sched.get_last_lr()[0])
    res.update(loss=losses, lr=lrs, pool=pool, params=list(ca.parameters()),
               alive=[int((pool[:, 3:4] > 0.1).sum().item())])
    return res


def _kan(torch):
    """efficient-kan's KANLinear and KAN."""
    nn, F = torch.nn, torch.nn.functional

    class KANLinear(nn.Module):
        def __init__(self, in_features, out_features, grid_size=5, spline_order=3,
                     grid_eps=0.02, grid_range=(-1, 1)):
            super().__init__()
            self.in_features, self.out_features = in_features, out_features
            self.grid_size, self.spline_order = grid_size, spline_order
            h = (grid_range[1] - grid_range[0]) / grid_size
            grid = ((torch.arange(-spline_order, grid_size + spline_order + 1) * h
                     + grid_range[0]).expand(in_features, -1).contiguous())
            self.register_buffer("grid", grid)
            self.base_weight = nn.Parameter(torch.Tensor(out_features, in_features))
            self.spline_weight = nn.Parameter(
                torch.Tensor(out_features, in_features, grid_size + spline_order))
            self.spline_scaler = nn.Parameter(torch.Tensor(out_features, in_features))
            self.base_activation = nn.SiLU()
            self.grid_eps = grid_eps

        def b_splines(self, x):
            assert x.dim() == 2 and x.size(1) == self.in_features
            grid = self.grid
            x = x.unsqueeze(-1)
            bases = ((x >= grid[:, :-1]) & (x < grid[:, 1:])).to(x.dtype)
            for k in range(1, self.spline_order + 1):
                bases = (
                    (x - grid[:, : -(k + 1)]) / (grid[:, k:-1] - grid[:, : -(k + 1)])
                    * bases[:, :, :-1]
                ) + (
                    (grid[:, k + 1:] - x) / (grid[:, k + 1:] - grid[:, 1:(-k)])
                    * bases[:, :, 1:]
                )
            assert bases.size() == (x.size(0), self.in_features,
                                    self.grid_size + self.spline_order)
            return bases.contiguous()

        def curve2coeff(self, x, y):
            A = self.b_splines(x).transpose(0, 1)
            B = y.transpose(0, 1)
            solution = torch.linalg.lstsq(A, B).solution
            result = solution.permute(2, 0, 1)
            return result.contiguous()

        @property
        def scaled_spline_weight(self):
            return self.spline_weight * self.spline_scaler.unsqueeze(-1)

        def forward(self, x):
            original_shape = x.shape
            x = x.reshape(-1, self.in_features)
            base_output = F.linear(self.base_activation(x), self.base_weight)
            spline_output = F.linear(self.b_splines(x).view(x.size(0), -1),
                                     self.scaled_spline_weight.view(self.out_features, -1))
            output = base_output + spline_output
            return output.reshape(*original_shape[:-1], self.out_features)

        @torch.no_grad()
        def update_grid(self, x, margin=0.01):
            batch = x.size(0)
            splines = self.b_splines(x).permute(1, 0, 2)
            orig_coeff = self.scaled_spline_weight.permute(1, 2, 0)
            unreduced = torch.bmm(splines, orig_coeff).permute(1, 0, 2)
            x_sorted = torch.sort(x, dim=0)[0]
            grid_adaptive = x_sorted[torch.linspace(0, batch - 1, self.grid_size + 1,
                                                    dtype=torch.int64)]
            uniform_step = (x_sorted[-1] - x_sorted[0] + 2 * margin) / self.grid_size
            grid_uniform = (torch.arange(self.grid_size + 1, dtype=torch.float32).unsqueeze(1)
                            * uniform_step + x_sorted[0] - margin)
            grid = self.grid_eps * grid_uniform + (1 - self.grid_eps) * grid_adaptive
            grid = torch.concatenate([
                grid[:1] - uniform_step * torch.arange(self.spline_order, 0, -1).unsqueeze(1),
                grid,
                grid[-1:] + uniform_step * torch.arange(1, self.spline_order + 1).unsqueeze(1),
            ], dim=0)
            self.grid.copy_(grid.T)
            self.spline_weight.data.copy_(self.curve2coeff(x, unreduced))

        def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0):
            l1_fake = self.spline_weight.abs().mean(-1)
            regularization_loss_activation = l1_fake.sum()
            p = l1_fake / regularization_loss_activation
            regularization_loss_entropy = -torch.sum(p * p.log())
            return (regularize_activation * regularization_loss_activation
                    + regularize_entropy * regularization_loss_entropy)

    class KAN(nn.Module):
        def __init__(self, layers_hidden, **kw):
            super().__init__()
            self.layers = nn.ModuleList(KANLinear(i, o, **kw)
                                        for i, o in zip(layers_hidden, layers_hidden[1:]))

        def forward(self, x, update_grid=False):
            for layer in self.layers:
                if update_grid:
                    layer.update_grid(x)
                x = layer(x)
            return x

        def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0):
            return sum(layer.regularization_loss(regularize_activation, regularize_entropy)
                       for layer in self.layers)

    return KAN


def kan_program(torch):
    """efficient-kan on a 2-D regression: B-spline bases by Cox-de Boor on the grid buffer,
    AdamW with ExponentialLR, an L1/entropy regularisation, then a grid update (sort,
    linspace indices, lstsq refit of the spline weights under no_grad) and more training."""
    F = torch.nn.functional
    KAN = _kan(torch)
    rng = np.random.default_rng(2604)
    model = KAN([2, 4, 1], grid_size=4)
    fill_(torch, model, rng, 0.3)
    x = torch.from_numpy(rng.uniform(-0.9, 0.9, (32, 2)).astype(np.float32))
    y = torch.sin(math.pi * x[:, :1]) * torch.exp(-x[:, 1:] ** 2)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-2, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.8)
    res, losses = {}, []
    for it in range(6):
        update = it == 3
        if update:
            with torch.no_grad():
                before = model(x)
        pred = model(x, update_grid=update)
        if update:
            res["grid"] = model.layers[0].grid.clone()
            res["refit_change"] = [(pred - before).abs().max().item()]
        loss = F.mse_loss(pred, y) + 1e-3 * model.regularization_loss()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    res.update(loss=losses, params=list(model.parameters()),
               bases=model.layers[0].b_splines(torch.tensor([[-0.5, 0.0], [0.3, 0.99]])),
               buffers=[n for n, _ in model.named_buffers()])
    return res


PROGRAMS = [snn_program, hopfield_program, nca_program, kan_program]

# the lstsq refit after a grid update solves a (32 x 7) system per input: float32 LAPACK noise
TOLERANCES = {"kan_program": (2e-5, 2e-6)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
