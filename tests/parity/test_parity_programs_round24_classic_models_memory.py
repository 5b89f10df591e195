"""Classic research models of round 24, continued (see
test_parity_programs_round24_classic_models.py): few-shot and continual learning
(prototypical networks on episodes, Reptile's outer update on a deepcopy, EWC with a Fisher
diagonal from autograd.grad kept in registered buffers) and a Neural Turing Machine (content
addressing by cosine similarity, interpolation, circular shifts three ways, sharpening,
erase/add writes, an LSTMCell controller trained on a copy task with clip_grad_value_), run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data.
What they found is pinned in test_parity_programs_round24_classic_models_fixes.py."""

import copy

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

# --------------------------------------------------------------------------- few-shot / EWC

def few_shot_program(torch):
    """Prototypical networks on episodes drawn with randperm, Reptile's outer update on a
    deepcopy of the model, and EWC: a Fisher diagonal from autograd.grad over sampled
    log-likelihoods, stored in registered buffers, as a penalty on the next task."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(243)
    res = {}

    # no bias before the batch norm: its gradient is rounding noise, which Adam's normalised
    # steps would turn into full-size moves of either sign
    def conv_block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o),
                             nn.ReLU(),
                             nn.MaxPool2d(2))

    encoder = nn.Sequential(conv_block(1, 8), conv_block(8, 8), nn.Flatten())
    fill_(torch, [p for p in encoder.parameters() if p.dim() > 1], rng, 0.3)

    # a pool of 6 classes x 10 examples, 8x8 "images" with a class-dependent pattern
    n_classes, per_class = 6, 10
    centres = rng.standard_normal((n_classes, 1, 8, 8)).astype(np.float32)
    pool_x = torch.from_numpy(np.concatenate([
        centres[c] + 1.5 * rng.standard_normal((per_class, 1, 8, 8)).astype(np.float32)
        for c in range(n_classes)]))
    pool_y = torch.arange(n_classes).repeat_interleave(per_class)

    # each library's randperm stream is its own: the episode's classes and split come from
    # NumPy, and torch.randperm shuffles the queries (and their targets) as loaders do, which
    # leaves the mean loss and the batch statistics unchanged
    def episode(gen, n_way=3, k_shot=2, n_query=3):
        classes = torch.from_numpy(rng.permutation(n_classes)[:n_way])
        support, query = [], []
        for c in classes:
            idx = (pool_y == c).nonzero(as_tuple=True)[0]
            perm = idx[torch.from_numpy(rng.permutation(idx.numel()))]
            support.append(pool_x[perm[:k_shot]])
            query.append(pool_x[perm[k_shot:k_shot + n_query]])
        target = torch.arange(n_way).repeat_interleave(n_query)
        order = torch.randperm(n_way * n_query, generator=gen)
        return torch.stack(support), torch.cat(query)[order], target[order], classes

    opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    res["proto_loss"], res["proto_acc"] = [], []
    episodes = []
    for _ in range(4):
        support, query, target, classes = episode(gen)
        episodes.append(classes.tolist())
        n_way, k_shot = support.shape[:2]
        z = encoder(torch.cat([support.flatten(0, 1), query]))
        z_support = z[:n_way * k_shot].view(n_way, k_shot, -1)
        prototypes = z_support.mean(dim=1)
        z_query = z[n_way * k_shot:]
        dists = torch.cdist(z_query, prototypes).pow(2)
        log_p_y = F.log_softmax(-dists, dim=1)
        loss = -log_p_y.gather(1, target.view(-1, 1)).squeeze().mean()
        # the same distances written out, as half the repositories do
        manual = (z_query.unsqueeze(1) - prototypes.unsqueeze(0)).pow(2).sum(2)
        res.setdefault("dist_forms_close", []).append(
            bool(torch.allclose(dists, manual, rtol=1e-4, atol=1e-4)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["proto_loss"].append(loss.item())
        res["proto_acc"].append(log_p_y.argmax(1).eq(target).float().mean().item())
    res["episodes_valid"] = [all(len(set(e)) == 3 and max(e) < n_classes for e in episodes)]
    res["bn_running"] = [encoder[0][1].running_mean, encoder[1][1].running_var]
    res["bn_tracked"] = [int(encoder[0][1].num_batches_tracked)]
    res["encoder"] = [p.detach() for p in encoder.parameters()]

    # --- Reptile on sine-wave regression ---
    net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                        nn.Linear(16, 1))
    fill_(torch, net, rng, 0.5)
    amps = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    phases = rng.uniform(0, np.pi, 3).astype(np.float32)
    xs = torch.linspace(-3, 3, 12).unsqueeze(1)
    outer_eps, inner_steps = 0.5, 3
    res["reptile_inner"] = []
    for task in range(3):
        y = float(amps[task]) * torch.sin(xs + float(phases[task]))
        fast = copy.deepcopy(net)
        inner_opt = torch.optim.SGD(fast.parameters(), lr=0.02)
        for _ in range(inner_steps):
            inner_loss = F.mse_loss(fast(xs), y)
            inner_opt.zero_grad()
            inner_loss.backward()
            inner_opt.step()
            res["reptile_inner"].append(inner_loss.item())
        with torch.no_grad():
            for p, p_fast in zip(net.parameters(), fast.parameters()):
                p.data.add_(outer_eps * (p_fast.data - p.data))
        # the state_dict form of the same interpolation, on a copy
        target_sd = copy.deepcopy(net.state_dict())
        res.setdefault("deepcopy_independent", []).append(
            target_sd["0.weight"].data_ptr() != net[0].weight.data_ptr())
    res["reptile"] = [p.detach() for p in net.parameters()]
    fast_sd = fast.state_dict()
    blended = {k: v + 0.1 * (fast_sd[k] - v) for k, v in net.state_dict().items()}
    net.load_state_dict(blended)
    res["reptile_blended"] = [p.detach() for p in net.parameters()]
    res["fast_grads_kept"] = [all(p.grad is not None for p in fast.parameters()),
                              all(p.grad is None for p in net.parameters())]

    # --- EWC: task A, Fisher diagonal, task B with the penalty ---
    clf = nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 3))
    fill_(torch, clf, rng, 0.5)
    xa, xb = normal(torch, rng, 24, 4), normal(torch, rng, 24, 4)
    ya = torch.from_numpy(rng.integers(0, 3, 24))
    yb = torch.from_numpy(rng.integers(0, 3, 24))
    opt = torch.optim.SGD(clf.parameters(), lr=0.1, momentum=0.9)
    for _ in range(5):
        loss = F.cross_entropy(clf(xa), ya)
        opt.zero_grad()
        loss.backward()
        opt.step()
    res["task_a_loss"] = loss.detach()

    class EWC(nn.Module):
        def __init__(self, model, data, n_samples, gen):
            super().__init__()
            params = {n: p for n, p in model.named_parameters() if p.requires_grad}
            fisher = {n: torch.zeros_like(p) for n, p in params.items()}
            model.eval()
            for i in range(data.size(0)):
                logits = model(data[i:i + 1])
                probs = F.softmax(logits, dim=1)
                for _ in range(n_samples):
                    sampled = torch.multinomial(probs.detach(), 1, generator=gen).view(-1)
                    loglik = F.log_softmax(logits, dim=1).gather(1, sampled.view(1, 1))
                    grads = torch.autograd.grad(loglik.sum(), list(params.values()),
                                                retain_graph=True)
                    for (n, _), g in zip(params.items(), grads):
                        fisher[n] += g.detach() ** 2 / (data.size(0) * n_samples)
            model.train()
            for n, p in params.items():
                key = n.replace(".", "__")
                self.register_buffer(f"{key}_mean", p.detach().clone())
                self.register_buffer(f"{key}_fisher", fisher[n])

        def penalty(self, model):
            total = 0
            for n, p in model.named_parameters():
                key = n.replace(".", "__")
                mean = getattr(self, f"{key}_mean")
                fisher = getattr(self, f"{key}_fisher")
                total = total + (fisher * (p - mean) ** 2).sum()
            return total

    # the sampled labels depend on each library's generator stream: so does the Fisher;
    # with the empirical Fisher (the true labels) both libraries agree exactly
    gen = torch.Generator().manual_seed(3)
    sampled_ewc = EWC(clf, xa[:6], 2, gen)
    res["fisher_buffers"] = sorted(n for n, _ in sampled_ewc.named_buffers())
    res["fisher_nonneg"] = [all(bool((b >= 0).all()) for b in sampled_ewc.buffers())]

    params = dict(clf.named_parameters())
    emp = {n: torch.zeros_like(p) for n, p in params.items()}
    for i in range(xa.size(0)):
        clf.zero_grad()
        F.nll_loss(F.log_softmax(clf(xa[i:i + 1]), dim=1), ya[i:i + 1]).backward()
        for n, p in params.items():
            emp[n] += p.grad.detach().pow(2) / xa.size(0)
    ewc = EWC(clf, xa[:0], 1, gen)
    for n in params:
        getattr(ewc, n.replace(".", "__") + "_fisher").copy_(emp[n])
    res["fisher"] = [emp[n] for n in sorted(emp)]
    res["ewc_state"] = sorted(ewc.state_dict().keys())
    lam = 50.0
    res["task_b"], res["penalty"] = [], []
    for _ in range(5):
        ce = F.cross_entropy(clf(xb), yb)
        pen = ewc.penalty(clf)
        loss = ce + lam / 2 * pen
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["task_b"].append(ce.item())
        res["penalty"].append(float(pen.detach()))
    res["clf"] = [p.detach() for p in clf.parameters()]
    res["clf_a_after"] = F.cross_entropy(clf(xa), ya).detach()
    return res


# --------------------------------------------------------------------------- NTM

def ntm_program(torch):
    """A Neural Turing Machine (Graves et al.) as pytorch-ntm writes it: an LSTMCell controller,
    read and write heads with content addressing (cosine similarity, softplus key strength),
    interpolation, a circular shift convolution and sharpening, erase/add writes through outer
    products, trained on a copy task with clip_grad_value_ and RMSprop."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(244)
    res = {}
    N, M, seq_width, seq_len, batch = 10, 6, 4, 3, 2
    ctrl_size, in_size = 16, seq_width + 1

    class Memory(nn.Module):
        def __init__(self, N, M):
            super().__init__()
            self.N, self.M = N, M
            self.register_buffer("mem_bias", torch.Tensor(N, M))
            stdev = 1 / (np.sqrt(N + M))
            nn.init.uniform_(self.mem_bias, -stdev, stdev)

        def reset(self, batch_size):
            self.memory = self.mem_bias.clone().repeat(batch_size, 1, 1)

        def read(self, w):
            return torch.matmul(w.unsqueeze(1), self.memory).squeeze(1)

        def write(self, w, e, a):
            self.prev_mem = self.memory
            erase = torch.matmul(w.unsqueeze(-1), e.unsqueeze(1))
            add = torch.matmul(w.unsqueeze(-1), a.unsqueeze(1))
            self.memory = self.prev_mem * (1 - erase) + add

        def address(self, k, beta, g, s, gamma, w_prev, shift_mode):
            wc = self._similarity(k, beta)
            wg = g * wc + (1 - g) * w_prev
            w_hat = self._shift(wg, s, shift_mode)
            w = w_hat ** gamma
            return torch.div(w, torch.sum(w, dim=1).view(-1, 1) + 1e-16)

        def _similarity(self, k, beta):
            k = k.view(k.size(0), 1, -1)
            return F.softmax(beta * F.cosine_similarity(self.memory + 1e-16, k + 1e-16, dim=-1),
                             dim=1)

        def _shift(self, wg, s, mode):
            if mode == "conv":          # pytorch-ntm: circular padding + conv1d per sample
                out = []
                for b in range(wg.size(0)):
                    t = torch.cat([wg[b, -1:], wg[b], wg[b, :1]])
                    out.append(F.conv1d(t.view(1, 1, -1), s[b].view(1, 1, -1)).view(-1))
                return torch.stack(out)
            if mode == "pad":           # F.pad(mode="circular") + unfold
                padded = F.pad(wg.unsqueeze(1), (1, 1), mode="circular").squeeze(1)
                windows = padded.unfold(1, 3, 1)                       # (B, N, 3)
                return torch.einsum("bnk,bk->bn", windows, s)
            # roll: w~(i) = s0 wg(i - 1) + s1 wg(i) + s2 wg(i + 1)
            return sum(torch.roll(wg, shifts=sh, dims=1) * s[:, j:j + 1]
                       for j, sh in enumerate((1, 0, -1)))

    class Head(nn.Module):
        def __init__(self, memory, ctrl, write):
            super().__init__()
            self.memory, self.write_head = memory, write
            sizes = [M, 1, 1, 3, 1] + ([M, M] if write else [])
            self.sizes = sizes
            self.fc = nn.Linear(ctrl, sum(sizes))

        def create_new_state(self, batch_size):
            return torch.zeros(batch_size, N)

        def forward(self, h, w_prev, shift_mode):
            o = self.fc(h)
            parts = torch.split(o, self.sizes, dim=1)
            k, beta, g, s, gamma = parts[:5]
            k = k.clone()
            beta = F.softplus(beta)
            g = torch.sigmoid(g)
            s = F.softmax(s, dim=1)
            gamma = 1 + F.softplus(gamma)
            w = self.memory.address(k, beta, g, s, gamma, w_prev, shift_mode)
            if self.write_head:
                e, a = torch.sigmoid(parts[5]), parts[6]
                self.memory.write(w, e, a)
                return None, w
            return self.memory.read(w), w

    class NTM(nn.Module):
        def __init__(self, shift_mode):
            super().__init__()
            self.shift_mode = shift_mode
            self.memory = Memory(N, M)
            self.controller = nn.LSTMCell(in_size + M, ctrl_size)
            self.read_head = Head(self.memory, ctrl_size, write=False)
            self.write_head = Head(self.memory, ctrl_size, write=True)
            self.fc = nn.Linear(ctrl_size + M, seq_width)
            self.register_buffer("init_r", torch.randn(1, M) * 0.01)

        def init_sequence(self, batch_size):
            self.memory.reset(batch_size)
            self.prev_read = self.init_r.clone().repeat(batch_size, 1)
            self.state = (torch.zeros(batch_size, ctrl_size), torch.zeros(batch_size, ctrl_size))
            self.w_read = self.read_head.create_new_state(batch_size)
            self.w_write = self.write_head.create_new_state(batch_size)

        def forward(self, x=None):
            if x is None:
                x = torch.zeros(self.prev_read.size(0), in_size)
            h, c = self.controller(torch.cat([x, self.prev_read], dim=1), self.state)
            self.state = (h, c)
            r, self.w_read = self.read_head(h, self.w_read, self.shift_mode)
            _, self.w_write = self.write_head(h, self.w_write, self.shift_mode)
            self.prev_read = r
            return torch.sigmoid(self.fc(torch.cat([h, r], dim=1)))

    def copy_batch(rng):
        seq = rng.binomial(1, 0.5, (seq_len, batch, seq_width)).astype(np.float32)
        inp = np.zeros((seq_len + 1, batch, in_size), dtype=np.float32)
        inp[:seq_len, :, :seq_width] = seq
        inp[seq_len, :, seq_width] = 1.0          # delimiter channel
        return torch.from_numpy(inp), torch.from_numpy(seq)

    data = [copy_batch(rng) for _ in range(3)]
    for mode in ("conv", "pad", "roll"):
        net = NTM(mode)
        fill_(torch, net, np.random.default_rng(11), 0.3)
        with torch.no_grad():
            init_rng = np.random.default_rng(12)
            net.init_r.copy_(normal(torch, init_rng, 1, M) * 0.01)
            bound = 1 / np.sqrt(N + M)
            net.memory.mem_bias.copy_(torch.from_numpy(
                init_rng.uniform(-bound, bound, (N, M)).astype(np.float32)))
        # pytorch-ntm's settings (its small lr also keeps the first step's near-zero gradients,
        # which RMSprop divides by their own size, from moving weights by more than 1e-6)
        opt = torch.optim.RMSprop(net.parameters(), lr=1e-4, momentum=0.9, alpha=0.95)
        losses, costs = [], []
        for inp, target in data:
            net.init_sequence(batch)
            opt.zero_grad()
            for t in range(inp.size(0)):
                net(inp[t])
            y_out = torch.stack([net() for _ in range(seq_len)])
            loss = F.binary_cross_entropy(y_out, target)
            loss.backward()
            nn.utils.clip_grad_value_(net.parameters(), 10)
            opt.step()
            losses.append(loss.item())
            costs.append((y_out.detach() > 0.5).float().ne(target).sum().item() / batch)
        res[f"{mode}_loss"] = losses
        res[f"{mode}_cost"] = costs
        res[f"{mode}_params"] = [p.detach() for p in net.parameters()]
        res[f"{mode}_memory"] = net.memory.memory.detach()
        res[f"{mode}_w"] = [net.w_read.detach(), net.w_write.detach()]

    # the write step three ways: torch.ger (per sample), einsum and unsqueeze broadcasting
    w = F.softmax(normal(torch, rng, batch, N), dim=1)
    e = torch.sigmoid(normal(torch, rng, batch, M))
    a = normal(torch, rng, batch, M)
    mem = normal(torch, rng, batch, N, M)
    by_ger = torch.stack([mem[b] * (1 - torch.ger(w[b], e[b])) + torch.outer(w[b], a[b])
                          for b in range(batch)])
    by_einsum = mem * (1 - torch.einsum("bn,bm->bnm", w, e)) + torch.einsum("bn,bm->bnm", w, a)
    by_bcast = mem * (1 - w.unsqueeze(2) * e.unsqueeze(1)) + w[:, :, None] * a[:, None, :]
    res["write_forms"] = [by_ger, by_einsum, by_bcast]
    res["cos_sim_bcast"] = F.cosine_similarity(mem, a.unsqueeze(1), dim=2, eps=1e-8)
    res["cos_sim_zero"] = F.cosine_similarity(torch.zeros(2, 3), torch.ones(2, 3))

    # clip_grad_value_ on a mix of gradients: returns None, clamps in place, skips None grads
    p1 = nn.Parameter(torch.zeros(3))
    p2 = nn.Parameter(torch.zeros(2))
    p1.grad = torch.tensor([-20.0, 0.5, 30.0])
    ret = nn.utils.clip_grad_value_([p1, p2], clip_value=1.5)
    res["clip_value"] = [p1.grad, torch.tensor([float(ret is None), float(p2.grad is None)])]
    # ...and raises when no parameter has a gradient yet (clipping before the first backward)
    try:
        nn.utils.clip_grad_value_(NTM("roll").parameters(), 10)
        res["clip_before_backward"] = ["no error"]
    except RuntimeError as error:
        res["clip_before_backward"] = [str(error)]
    return res


PROGRAMS = [few_shot_program, ntm_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
