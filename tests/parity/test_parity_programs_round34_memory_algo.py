"""Algorithmic-reasoning models written as their reference repositories write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: the
Neural GPU (convolutional GRU with sigmoid cutoff on binary addition), a Universal Transformer
with adaptive computation time (halting masks, remainders, step/position timing signals),
neural execution of Bellman-Ford and BFS (max/min aggregation by scatter_reduce, a termination
head), SoftSort and a differentiable odd-even sorting network, associative recall and repeat
copy with get_total_norm/clip_grads_with_norm_, a modern Hopfield layer, and holographic
reduced representations with the complex-valued Associative LSTM. The sibling file
without _algo covers the memory-augmented networks."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def neural_gpu_program(torch):
    """Kaiser & Sutskever's Neural GPU as the pytorch ports write it: digits embedded into the
    first column of a (B, C, W, L) mental image, convolutional GRU steps with
    sigmoid_cutoff = clamp(1.2 sigmoid - 0.1, 0, 1) and tanh_cutoff, the same cell applied
    L times, output read from the first column; binary addition, Adam(amsgrad) and
    clip_grad_norm_ with norm_type inf."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3450)
    B, L, C, Wd, K = 3, 8, 8, 4, 3

    def sigmoid_cutoff(x, cutoff=1.2):
        return torch.clamp(cutoff * torch.sigmoid(x) - 0.5 * (cutoff - 1.0), 0.0, 1.0)

    def tanh_cutoff(x, cutoff=1.1):
        return torch.clamp(cutoff * torch.tanh(x), -1.0, 1.0)

    class CGRU(nn.Module):
        def __init__(self):
            super().__init__()
            self.gates = nn.Conv2d(C, 2 * C, K, padding=K // 2)
            self.cand = nn.Conv2d(C, C, K, padding=K // 2)

        def forward(self, s):
            u, r = sigmoid_cutoff(self.gates(s)).chunk(2, dim=1)
            c = tanh_cutoff(self.cand(r * s))
            return u * s + (1 - u) * c

    class NeuralGPU(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(4, C)
            self.cells = nn.ModuleList([CGRU(), CGRU()])
            self.out = nn.Linear(C, 3)

        def forward(self, x):
            e = self.embed(x).permute(0, 2, 1)                      # (B, C, L)
            s = torch.zeros(x.size(0), C, Wd, x.size(1))
            s[:, :, 0, :] = e
            for _ in range(x.size(1)):
                for cell in self.cells:
                    s = cell(s)
            return self.out(s[:, :, 0, :].transpose(1, 2))

    model = NeuralGPU()
    fill_(torch, model, rng, 0.3)
    # a + b in binary, little-endian, '+' token 3 between them, answers 0/1 (2 = pad)
    a = rng.integers(0, 2, (B, 3))
    b = rng.integers(0, 2, (B, 3))
    x = np.concatenate([a, np.full((B, 1), 3), b, np.zeros((B, 1), dtype=np.int64)], 1)
    av = (a * 2 ** np.arange(3)).sum(1)
    bv = (b * 2 ** np.arange(3)).sum(1)
    y = np.full((B, L), 2)
    for i in range(B):
        s = av[i] + bv[i]
        y[i, :4] = [(s >> k) & 1 for k in range(4)]
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
    res, losses, norms = {}, [], []
    for _ in range(3):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, 3), y.reshape(-1), ignore_index=2)
        opt.zero_grad()
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type="inf"))
        opt.step()
        losses.append(loss.detach())
    res.update(losses=torch.stack(losses), norms=torch.stack(norms), logits=logits.detach(),
               max_sq=opt.state[model.out.weight]["max_exp_avg_sq"],
               pred=logits.argmax(-1).tolist(),
               cut=sigmoid_cutoff(torch.tensor([-5.0, 0.0, 5.0])))
    return res


def universal_transformer_program(torch):
    """A Universal Transformer (Dehghani et al., andreamad8's port) with ACT: sinusoidal timing
    and per-step signals, a shared encoder layer, halting probabilities from a sigmoid, the
    still-running mask, new_halted / remainders / n_updates bookkeeping, an update weight
    blending previous and new states, a while loop bounded by max_hop; ponder cost added to the
    loss, gradients through the remainders."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3460)
    B, T, D, max_hop, thr = 2, 5, 8, 4, 0.99

    def timing_signal(length, channels, min_timescale=1.0, max_timescale=1.0e4):
        position = np.arange(length)
        num_timescales = channels // 2
        log_inc = math.log(float(max_timescale) / float(min_timescale)) / (num_timescales - 1)
        inv = min_timescale * np.exp(np.arange(num_timescales).astype(np.float64) * -log_inc)
        scaled = np.expand_dims(position, 1) * np.expand_dims(inv, 0)
        signal = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
        signal = np.pad(signal, [[0, 0], [0, channels % 2]], "constant")
        return torch.from_numpy(signal.reshape([1, length, channels])).float()

    class ACT(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Linear(D, 1)
            self.p.bias.data.fill_(1)

        def forward(self, state, fn, time_enc, pos_enc, mask):
            halting = torch.zeros(state.shape[0], state.shape[1])
            remainders = torch.zeros_like(halting)
            n_updates = torch.zeros_like(halting)
            previous = torch.zeros_like(state)
            step = 0
            while ((halting < thr) & (n_updates < max_hop)).byte().any():
                state = state + time_enc[:, :state.shape[1], :].type_as(state)
                state = state + pos_enc[:, step, :].unsqueeze(1).repeat(1, state.shape[1], 1)
                p = torch.sigmoid(self.p(state)).squeeze(-1)
                still = (halting < 1.0).float()
                new_halted = (halting + p * still > thr).float() * still
                still = (halting + p * still <= thr).float() * still
                halting = halting + p * still
                remainders = remainders + new_halted * (1 - halting)
                halting = halting + new_halted * remainders
                n_updates = n_updates + still + new_halted
                update_w = p * still + new_halted * remainders
                state = fn(state, src_key_padding_mask=mask)
                previous = (state * update_w.unsqueeze(-1)) + (
                    previous * (1 - update_w.unsqueeze(-1)))
                step += 1
            return previous, (remainders, n_updates)

    layer = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
    act = ACT()
    head = nn.Linear(D, 3)
    modules = nn.ModuleList([layer, act, head])
    fill_(torch, modules, rng, 0.3)
    with torch.no_grad():
        act.p.bias.fill_(-0.5)
    time_enc, pos_enc = timing_signal(T, D), timing_signal(max_hop, D)
    x = normal(torch, rng, B, T, D)
    mask = torch.tensor([[False] * T, [False] * (T - 2) + [True] * 2])
    y = torch.from_numpy(rng.integers(0, 3, (B, T)))
    out, (rem, nup) = act(x, layer, time_enc, pos_enc, mask)
    logits = head(out)
    ce = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")
    ce = ce.masked_fill(mask, 0).sum() / (~mask).sum()
    ponder = (rem + nup).mean()
    loss = ce + 1e-3 * ponder
    loss.backward()
    return dict(out=out, remainders=rem, n_updates=nup, loss=loss,
                g_p=act.p.weight.grad, g_attn=layer.self_attn.in_proj_weight.grad,
                g_head=head.bias.grad, signal=time_enc)


def neural_execution_program(torch):
    """Veličković et al.'s neural execution of graph algorithms: an MPNN processor with
    max aggregation (scatter_reduce 'amax', include_self False) over edges with weights,
    encoders/decoders per algorithm, BFS reachability and Bellman-Ford distances and
    predecessors supervised step by step with teacher forcing, a termination head averaged
    over nodes, BCE with pos_weight; the ground truth from a NumPy Bellman-Ford and the same
    relaxation in torch through scatter_reduce 'amin'."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3470)
    n, H = 6, 16
    src = np.array([0, 0, 1, 2, 2, 3, 4, 1, 5, 3])
    dst = np.array([1, 2, 3, 3, 4, 5, 5, 0, 4, 1])
    w = rng.uniform(0.2, 1.0, len(src)).astype(np.float32)
    # self loops so that every node keeps its own value
    src_t = torch.from_numpy(np.concatenate([src, np.arange(n)]))
    dst_t = torch.from_numpy(np.concatenate([dst, np.arange(n)]))
    w_t = torch.from_numpy(np.concatenate([w, np.zeros(n, np.float32)]))

    # ground truth Bellman-Ford traces from node 0
    INF = 1e4
    dist = torch.full((n,), INF)
    dist[0] = 0
    traces, reach = [dist.clone()], [(dist < INF).float()]
    for _ in range(n - 1):
        cand = dist[src_t] + w_t
        new = dist.scatter_reduce(0, dst_t, cand, reduce="amin", include_self=True)
        if torch.equal(new, dist):
            break
        dist = new
        traces.append(dist.clone())
        reach.append((dist < INF).float())
    pred_src = torch.where(dist[src_t] + w_t == dist[dst_t], src_t, torch.full_like(src_t, -1))
    pred = torch.full((n,), -1, dtype=torch.long).scatter_reduce(
        0, dst_t, pred_src, reduce="amax", include_self=True)

    class MPNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(2 + H, H)
            self.msg = nn.Linear(2 * H + 1, H)
            self.upd = nn.Linear(2 * H, H)
            self.dec_dist = nn.Linear(2 * H, 1)
            self.dec_reach = nn.Linear(2 * H, 1)
            self.term = nn.Linear(H, 1)

        def forward(self, x, h):
            z = self.enc(torch.cat([x, h], -1))
            m = F.relu(self.msg(torch.cat([z[src_t], z[dst_t], w_t.unsqueeze(-1)], -1)))
            agg = torch.zeros(n, H).scatter_reduce(0, dst_t.unsqueeze(-1).expand(-1, H), m,
                                                   reduce="amax", include_self=False)
            h = F.relu(self.upd(torch.cat([z, agg], -1)))
            zh = torch.cat([z, h], -1)
            stop = self.term(h.mean(0, keepdim=True))
            return self.dec_dist(zh).squeeze(-1), self.dec_reach(zh).squeeze(-1), stop, h

    model = MPNN()
    fill_(torch, model, rng, 0.12)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    res, losses = {}, []
    for _ in range(3):
        h = torch.zeros(n, H)
        loss = 0
        for t in range(len(traces) - 1):
            d_in = traces[t].clamp(max=10.0)                         # teacher forcing
            x = torch.stack([d_in, reach[t]], -1)
            d_out, r_out, stop, h = model(x, h)
            target_d = traces[t + 1].clamp(max=10.0)
            loss = loss + F.mse_loss(d_out, target_d)
            loss = loss + F.binary_cross_entropy_with_logits(
                r_out, reach[t + 1], pos_weight=torch.tensor(2.0))
            last = torch.tensor([[float(t == len(traces) - 2)]])
            loss = loss + F.binary_cross_entropy_with_logits(stop, last)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    res.update(dist=dist, pred=pred.tolist(), n_steps=len(traces), losses=torch.stack(losses),
               d_out=d_out.detach(), h=h.detach(), g_msg=model.msg.weight.grad)
    # the amax aggregation's gradient goes to the winning message only (ties split evenly)
    m = torch.tensor([[1.0, 2.0], [3.0, 2.0], [3.0, 0.5]]).requires_grad_()
    idx = torch.tensor([[0, 0], [0, 0], [0, 0]])
    agg = torch.zeros(1, 2).scatter_reduce(0, idx, m, reduce="amax", include_self=False)
    agg.sum().backward()
    res.update(tie_agg=agg, tie_grad=m.grad)
    mean = torch.zeros(2, 2).scatter_reduce(0, torch.tensor([[1, 1], [1, 0], [0, 1]]),
                                            m.detach(), reduce="mean", include_self=False)
    res["mean_agg"] = mean
    return res


def diff_sort_program(torch):
    """SoftSort (Prillo & Eisenschlos): softmax of -|sort(s) - s| / tau, its straight-through
    hard permutation by topk and scatter_; Petersen et al.'s differentiable odd-even sorting
    network with a logistic relaxation of min/max swaps, the accumulated permutation matrix
    by row mixing, and a ranking loss through both against a known order."""
    F = torch.nn.functional
    rng = np.random.default_rng(3480)
    B, n, tau = 2, 5, 0.3
    scores = normal(torch, rng, B, n).requires_grad_()
    target = torch.from_numpy(np.stack([rng.permutation(n) for _ in range(B)]))

    def soft_sort(s, tau, hard=False, pow=1.0):
        s = s.unsqueeze(-1)
        s_sorted = s.sort(descending=True, dim=1)[0]
        pairwise = (s.transpose(1, 2) - s_sorted).abs().pow(pow).neg() / tau
        P_hat = pairwise.softmax(-1)
        if hard:
            P = torch.zeros_like(P_hat, device=P_hat.device)
            P.scatter_(-1, P_hat.topk(1, -1)[1], value=1)
            P_hat = (P - P_hat).detach() + P_hat
        return P_hat

    res = {}
    P = soft_sort(scores, tau)
    Ph = soft_sort(scores, tau, hard=True, pow=2.0)
    onehot = F.one_hot(target, n).float()
    loss = torch.nn.BCELoss()(P.clamp(1e-6, 1 - 1e-6), onehot) + (Ph * onehot).sum() * 0.01
    g, = torch.autograd.grad(loss, scores)
    res.update(P=P, Ph=Ph, softsort_loss=loss, softsort_grad=g)

    def odd_even_network(n):
        layers = []
        for i in range(n):
            layers.append([(j, j + 1) for j in range(i % 2, n - 1, 2)])
        return layers

    def diff_sort(x, steepness=8.0):
        b = x.shape[0]
        X = torch.eye(n).repeat(b, 1, 1)
        for layer in odd_even_network(n):
            a_idx = torch.tensor([p[0] for p in layer])
            b_idx = torch.tensor([p[1] for p in layer])
            a, bb = x[:, a_idx], x[:, b_idx]
            alpha = torch.sigmoid((bb - a) * steepness)               # 1 when already ordered
            new_a = alpha * a + (1 - alpha) * bb
            new_b = alpha * bb + (1 - alpha) * a
            x = x.clone()
            x[:, a_idx] = new_a
            x[:, b_idx] = new_b
            Xa, Xb = X[:, :, a_idx], X[:, :, b_idx]
            al = alpha.unsqueeze(1)
            X = X.clone()
            X[:, :, a_idx] = al * Xa + (1 - al) * Xb
            X[:, :, b_idx] = al * Xb + (1 - al) * Xa
        return x, X

    sorted_x, X = diff_sort(scores)
    ranks = target.argsort(-1)
    perm = F.one_hot(ranks, n).transpose(-2, -1).float()
    ds_loss = F.binary_cross_entropy(X.clamp(1e-6, 1 - 1e-6), perm)
    ds_g, = torch.autograd.grad(ds_loss, scores)
    res.update(sorted_x=sorted_x, X=X, X_colsum=X.sum(1), ds_loss=ds_loss, ds_grad=ds_g,
               hard=torch.sort(scores, dim=-1).values)
    return res


def recall_tasks_program(torch):
    """The NTM paper's associative recall and repeat copy data (items of bit vectors between
    delimiter channels, a query item, the repeat count normalised into an extra channel) fed to
    an LSTM baseline, trained with the new utilities get_total_norm and clip_grads_with_norm_
    (per-parameter norms, foreach), RMSprop(momentum, alpha 0.95, eps 1e-10), per-sequence
    cost in bits by BCE summed and the binarised output error."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3490)
    W, item_len, n_items, B = 4, 2, 3, 2

    def assoc_batch():
        items = rng.binomial(1, 0.5, (n_items, item_len, B, W)).astype(np.float32)
        q = rng.integers(0, n_items - 1)
        T = (item_len + 1) * (n_items + 1) + 1
        inp = np.zeros((T, B, W + 2), np.float32)
        t = 0
        for i in range(n_items):
            inp[t, :, W] = 1
            inp[t + 1:t + 1 + item_len, :, :W] = items[i]
            t += item_len + 1
        inp[t, :, W + 1] = 1
        inp[t + 1:t + 1 + item_len, :, :W] = items[q]
        inp[t + 1 + item_len, :, W + 1] = 1
        return torch.from_numpy(inp), torch.from_numpy(items[q + 1])

    def repeat_batch(reps=2, seq_len=2):
        seq = rng.binomial(1, 0.5, (seq_len, B, W)).astype(np.float32)
        inp = np.zeros((seq_len + 2, B, W + 2), np.float32)
        inp[:seq_len, :, :W] = seq
        inp[seq_len, :, W] = 1.0
        inp[seq_len + 1, :, W + 1] = reps / 4.0
        out = np.zeros((seq_len * reps + 1, B, W + 1), np.float32)
        out[:seq_len * reps, :, :W] = np.tile(seq, (reps, 1, 1))
        out[-1, :, W] = 1.0
        return torch.from_numpy(inp), torch.from_numpy(out)

    class Baseline(nn.Module):
        def __init__(self, n_out):
            super().__init__()
            self.lstm = nn.LSTM(W + 2, 16, num_layers=2)
            self.fc = nn.Linear(16, n_out)

        def forward(self, x, n_out_steps):
            _, state = self.lstm(x)
            y, _ = self.lstm(torch.zeros(n_out_steps, x.size(1), W + 2), state)
            return self.fc(y)

    res = {}
    for name, batch, n_out in (("assoc", assoc_batch, W), ("repeat", repeat_batch, W + 1)):
        model = Baseline(n_out)
        fill_(torch, model, rng, 0.3)
        opt = torch.optim.RMSprop(model.parameters(), momentum=0.9, alpha=0.95, lr=1e-3,
                                  eps=1e-10)
        costs, norms = [], []
        for _ in range(3):
            x, y = batch()
            logits = model(x, y.size(0))
            loss = F.binary_cross_entropy_with_logits(logits, y)
            opt.zero_grad()
            loss.backward()
            grads = [p.grad for p in model.parameters()]
            total = nn.utils.get_total_norm(grads, norm_type=2.0, foreach=True)
            nn.utils.clip_grads_with_norm_(model.parameters(), 0.5, total, foreach=True)
            opt.step()
            out = torch.sigmoid(logits.detach())
            cost = (out.round() - y).abs().sum() / B
            costs.append(cost.item())
            norms.append(total)
        res.update({f"{name}_norms": torch.stack(norms), f"{name}_cost": costs,
                    f"{name}_bits": F.binary_cross_entropy(out, y, reduction="sum") / B,
                    f"{name}_w": model.fc.weight.detach()})
    return res


def hopfield_program(torch):
    """Modern Hopfield networks (Ramsauer et al.): retrieval by xi <- X softmax(beta X^T xi)
    iterated to a fixed point from a corrupted pattern, the energy
    -lse(beta, X^T xi) + xi^T xi / 2, a Hopfield layer with learned projections as attention
    (softmax over stored patterns) and Hopfield pooling with a learned query; its gradient and
    an LBFGS fit of the query."""
    F = torch.nn.functional
    nn = torch.nn
    rng = np.random.default_rng(3495)
    d, N, beta = 8, 5, 4.0
    X = torch.sign(normal(torch, rng, d, N))
    xi = X[:, 2].clone()
    xi[1] = -xi[1]                                                # corrupt one bit

    def energy(xi):
        return (-torch.logsumexp(beta * X.t() @ xi, 0) / beta + 0.5 * xi @ xi
                + math.log(N) / beta)

    energies, states = [energy(xi)], []
    for _ in range(3):
        xi = X @ torch.softmax(beta * X.t() @ xi, 0)
        energies.append(energy(xi))
        states.append(xi)
    res = dict(energies=torch.stack(energies), states=torch.stack(states),
               match=(torch.sign(xi) == X[:, 2]).all().item())

    class HopfieldPooling(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Parameter(torch.zeros(1, 1, d))
            self.W_k = nn.Linear(d, d, bias=False)
            self.W_v = nn.Linear(d, d, bias=False)
            self.scale = 1.0 / math.sqrt(d)

        def forward(self, stored):                                 # (B, N, d)
            k, v = self.W_k(stored), self.W_v(stored)
            a = F.softmax(self.scale * self.query @ k.transpose(1, 2), -1)
            return (a @ v).squeeze(1), a

    pool = HopfieldPooling()
    fill_(torch, pool, rng, 0.3)
    bags = normal(torch, rng, 3, N, d)
    y = torch.tensor([1.0, 0.0, 1.0])
    head = nn.Linear(d, 1)
    fill_(torch, head, rng, 0.3)
    opt = torch.optim.LBFGS([pool.query], lr=0.5, max_iter=5, history_size=3)

    def closure():
        opt.zero_grad()
        z, _ = pool(bags)
        loss = F.binary_cross_entropy_with_logits(head(z).squeeze(-1), y)
        loss.backward()
        return loss

    first = opt.step(closure)
    z, a = pool(bags)
    res.update(first=first.detach(), query=pool.query.detach(), attn=a.detach(),
               final=F.binary_cross_entropy_with_logits(head(z).squeeze(-1), y).detach(),
               n_iter=opt.state[opt._params[0]]["n_iter"])
    return res


def holographic_memory_program(torch):
    """Holographic reduced representations and the Associative LSTM (Danihelka et al.):
    binding by circular convolution through rfft/irfft, unbinding with the involution
    x[(-i) mod d] gathered by index, the same binding by torch.roll sums; an associative LSTM
    cell whose keys are unit complex numbers (view_as_complex of a bounded pair, normalised by
    abs), values bound by complex multiplication into a complex memory updated additively over
    permuted copies, read by the conjugate key; gradients through the complex ops into the
    real weights."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(3570)
    d, B, X, H, n_copies, T = 8, 2, 3, 4, 2, 4

    def bind(a, b):
        return torch.fft.irfft(torch.fft.rfft(a) * torch.fft.rfft(b), n=a.size(-1))

    def involution(a):
        idx = (-torch.arange(a.size(-1))) % a.size(-1)
        return a.index_select(-1, idx)

    def bind_roll(a, b):
        return sum(a[..., j:j + 1] * torch.roll(b, j, -1) for j in range(a.size(-1)))

    a = normal(torch, rng, B, d) / d ** 0.5
    b = normal(torch, rng, B, d).div(d ** 0.5).requires_grad_()
    c = bind(a, b)
    recovered = bind(c, involution(a))
    sim = F.cosine_similarity(recovered, b, dim=-1)
    g, = torch.autograd.grad(sim.sum(), b)
    res = dict(bind=c, bind_roll=bind_roll(a, b), recovered=recovered, sim=sim, g_hrr=g)

    perms = torch.from_numpy(np.stack([rng.permutation(H) for _ in range(n_copies)]))

    class AssocLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(X + 2 * H, 4 * H + 4 * H)

        def forward(self, xs):
            h = torch.zeros(B, 2 * H)
            mem = torch.zeros(n_copies, B, H, dtype=torch.complex64)
            outs = []
            for t in range(xs.size(0)):
                z = self.lin(torch.cat([xs[t], h], 1))
                gates, u, r_in, r_out = torch.split(z, [H, 2 * H, 2 * H, 3 * H], 1)
                f = torch.sigmoid(gates)
                u = torch.view_as_complex(torch.tanh(u).view(B, H, 2).contiguous())

                def key(v):
                    kc = torch.view_as_complex(v.view(B, H, 2).contiguous())
                    return kc / kc.abs().clamp(min=1.0)

                k_in, k_out = key(r_in), key(r_out[:, :2 * H])
                o = torch.sigmoid(r_out[:, 2 * H:])
                mem = f.unsqueeze(0) * mem + torch.stack(
                    [k_in[:, p] * u for p in perms])
                read = torch.stack([mem[i, :, perms[i]] * k_out[:, perms[i]].conj()
                                    for i in range(n_copies)]).mean(0)
                h = torch.view_as_real(read).reshape(B, 2 * H) * o.repeat(1, 2)
                outs.append(h)
            return torch.stack(outs), mem

    cell = AssocLSTM()
    fill_(torch, cell, rng, 0.4)
    xs = normal(torch, rng, T, B, X)
    out, mem = cell(xs)
    loss = out.pow(2).sum() + mem.abs().sum() * 0.1 + torch.angle(mem).cos().sum() * 0.01
    loss.backward()
    res.update(out=out, mem=torch.view_as_real(mem), loss=loss, g=cell.lin.weight.grad,
               mem_dtype=[str(mem.dtype).split(".")[-1]])
    return res


PROGRAMS = [neural_gpu_program, universal_transformer_program, neural_execution_program,
            diff_sort_program, recall_tasks_program, hopfield_program,
            holographic_memory_program]

# recurrent/iterated computations over several optimiser steps accumulate float32 noise
TOLERANCES = {name: (1e-4, 1e-5) for name in (
    "neural_gpu_program", "universal_transformer_program", "neural_execution_program",
    "recall_tasks_program", "hopfield_program", "diff_sort_program",
    "holographic_memory_program")}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
