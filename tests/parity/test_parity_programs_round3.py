"""Short training programs written as a PyTorch user writes them, run once with `torch` bound to
ember and once to PyTorch; weights and data come from one NumPy generator, so the losses,
gradients and outputs must agree: a LLaMA-style block (RMSNorm, complex RoPE, SwiGLU, kv-cache
generation), PPO with GAE and a clipped objective, a message-passing GNN (index_add_,
scatter_reduce, bincount), per-sample gradients with func.vmap/grad, and LoRA through
nn.utils.parametrize."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def llama_program(torch, seed=0):
    """Train a tiny LLaMA block for 3 AdamW steps, then decode greedily with a kv cache."""
    nn, F = torch.nn, torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rope(xq, xk, freqs):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs = freqs.view(1, xq_.shape[1], 1, xq_.shape[-1])
        return (torch.view_as_real(xq_ * freqs).flatten(3).type_as(xq),
                torch.view_as_real(xk_ * freqs).flatten(3).type_as(xk))

    class Block(nn.Module):
        def __init__(self, dim=16, heads=2, vocab=11):
            super().__init__()
            self.heads, self.hd = heads, dim // heads
            self.emb = nn.Embedding(vocab, dim)
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
            self.w1, self.w3 = nn.Linear(dim, 24, bias=False), nn.Linear(dim, 24, bias=False)
            self.w2 = nn.Linear(24, dim, bias=False)
            self.n1, self.n2, self.nf = RMSNorm(dim), RMSNorm(dim), RMSNorm(dim)
            self.out = nn.Linear(dim, vocab, bias=False)

        def forward(self, tokens, freqs, cache=None, start=0):
            x = self.emb(tokens)
            B, T, _ = x.shape
            h = self.n1(x)
            q, k, v = (w(h).view(B, T, self.heads, self.hd) for w in (self.wq, self.wk, self.wv))
            q, k = rope(q, k, freqs[start:start + T])
            if cache is not None:
                cache["k"][:B, start:start + T] = k
                cache["v"][:B, start:start + T] = v
                k, v = cache["k"][:B, :start + T], cache["v"][:B, :start + T]
            q, k, v = (z.transpose(1, 2) for z in (q, k, v))
            scores = q @ k.transpose(2, 3) / math.sqrt(self.hd)
            if T > 1:
                mask = torch.full((T, T), float("-inf")).triu(1)
                scores = scores + torch.hstack([torch.zeros((T, start)), mask])
            att = F.softmax(scores.float(), dim=-1).type_as(q) @ v
            x = x + self.wo(att.transpose(1, 2).contiguous().view(B, T, -1))
            h = self.n2(x)
            return self.out(self.nf(x + self.w2(F.silu(self.w1(h)) * self.w3(h))))

    rng = np.random.default_rng(seed)
    model = Block()
    fill_(torch, model.parameters(), rng, 0.1)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 8, 2)[:4].float() / 8))
    angles = torch.outer(torch.arange(32), inv).float()
    freqs = torch.polar(torch.ones_like(angles), angles)
    data = torch.from_numpy(rng.integers(0, 11, (3, 9)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(data[:, :-1], freqs).reshape(-1, 11), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    cache = {"k": torch.zeros(1, 16, 2, 8), "v": torch.zeros(1, 16, 2, 8)}
    generated = []
    with torch.inference_mode():
        logits = model(data[:1, :3], freqs, cache, 0)
        for pos in range(3, 7):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            generated.append(nxt.item())
            logits = model(nxt, freqs, cache, pos)
    return {"loss": losses, "generated": generated, "last_logits": logits[0, -1].numpy(),
            "w1": model.w1.weight.detach().numpy()}


def ppo_program(torch, seed=2):
    """GAE over a fixed rollout, then 2 epochs of clipped-PPO minibatch updates."""
    nn = torch.nn
    Categorical = torch.distributions.Categorical

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
            self.pi, self.v = nn.Linear(16, 3), nn.Linear(16, 1)

        def forward(self, x):
            h = self.body(x)
            return Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)

    rng = np.random.default_rng(seed)
    ac = ActorCritic()
    fill_(torch, ac.parameters(), rng, 0.5)
    obs = torch.from_numpy(rng.standard_normal((12, 4)).astype(np.float32))
    actions = torch.from_numpy(rng.integers(0, 3, 12))
    rewards = torch.from_numpy(rng.standard_normal(12).astype(np.float32))
    dones = torch.tensor(rng.random(12) < 0.2, dtype=torch.float32)
    with torch.no_grad():
        dist, values = ac(obs)
        old_logp = dist.log_prob(actions)
        adv, last = torch.zeros_like(rewards), 0
        for t in reversed(range(12)):
            next_value = torch.tensor(0.3) if t == 11 else values[t + 1]
            live = 1.0 - dones[t]
            delta = rewards[t] + 0.99 * next_value * live - values[t]
            adv[t] = last = delta + 0.99 * 0.95 * live * last
        returns = adv + values
    opt = torch.optim.Adam(ac.parameters(), lr=3e-3, eps=1e-5)
    stats = []
    for _ in range(2):
        for idx in (torch.arange(0, 6), torch.arange(6, 12)):
            dist, v = ac(obs[idx])
            ratio = (dist.log_prob(actions[idx]) - old_logp[idx]).exp()
            a = (adv[idx] - adv[idx].mean()) / (adv[idx].std() + 1e-8)
            pg = torch.max(-a * ratio, -a * torch.clamp(ratio, 0.8, 1.2)).mean()
            entropy = dist.entropy().mean()
            loss = pg + 0.25 * ((v - returns[idx]) ** 2).mean() - 0.01 * entropy
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(ac.parameters(), 0.5)
            opt.step()
            clipped = ((ratio - 1).abs() > 0.2).float().mean()
            stats.append([loss.item(), entropy.item(), clipped.item()])
    return {"adv": adv.numpy(), "returns": returns.numpy(), "stats": stats,
            "probs": dist.probs.detach().numpy()}


def mpnn_program(torch, seed=15):
    """A message-passing GNN: index_add_ and scatter_reduce aggregation, GRUCell update, pooling."""
    nn = torch.nn

    class MPLayer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.msg, self.upd = nn.Linear(2 * d + 1, d), nn.GRUCell(2 * d, d)

        def forward(self, h, edge_index, edge_attr):
            src, dst = edge_index
            m = torch.relu(self.msg(torch.cat([h[src], h[dst], edge_attr], -1)))
            total = torch.zeros_like(h).index_add_(0, dst, m)
            most = h.new_zeros(h.shape).scatter_reduce(0, dst.unsqueeze(-1).expand_as(m), m,
                                                       reduce="amax", include_self=False)
            deg = torch.bincount(dst, minlength=h.shape[0]).clamp(min=1).unsqueeze(-1)
            return self.upd(torch.cat([total / deg, most], -1), h)

    rng = np.random.default_rng(seed)
    layers = nn.ModuleList([MPLayer(5), MPLayer(5)])
    readout = nn.Linear(5, 1)
    params = list(layers.parameters()) + list(readout.parameters())
    fill_(torch, params, rng, 0.3)
    x = torch.from_numpy(rng.standard_normal((7, 5)).astype(np.float32))
    edges = torch.from_numpy(rng.integers(0, 7, (2, 14)))
    edge_attr = torch.from_numpy(rng.random((14, 1)).astype(np.float32))
    graph = torch.tensor([0, 0, 0, 1, 1, 1, 1]).view(-1, 1).expand(-1, 5)
    y = torch.tensor([[1.0], [-1.0]])
    opt = torch.optim.AdamW(params, lr=5e-3)
    losses = []
    for _ in range(3):
        h = x
        for layer in layers:
            h = layer(h, edges, edge_attr)
        mean = torch.zeros(2, 5).scatter_reduce(0, graph, h, reduce="mean", include_self=False)
        low = torch.full((2, 5), 5.0).scatter_reduce(0, graph, h, reduce="amin")
        loss = nn.functional.huber_loss(readout(mean + low), y, delta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"loss": losses, "h": h.detach().numpy(), "g_msg": layers[0].msg.weight.grad.numpy(),
            "g_hh": layers[1].upd.weight_hh.grad.numpy()}


def per_sample_program(torch, seed=18):
    """DP-SGD style per-sample gradients with func.vmap(grad(...)) and functional_call."""
    nn = torch.nn
    functional_call, vmap, grad = torch.func.functional_call, torch.func.vmap, torch.func.grad
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    fill_(torch, model.parameters(), rng, 0.5)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.from_numpy(rng.standard_normal((6, 4)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 6))

    def loss_fn(params, xi, yi):
        out = functional_call(model, params, (xi.unsqueeze(0),))
        return nn.functional.cross_entropy(out, yi.unsqueeze(0))

    per_sample = vmap(grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in per_sample.values()], 1).norm(dim=1)
    factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
    clipped = {k: torch.einsum("i,i...->...", factor, g) / 6 for k, g in per_sample.items()}
    grads, values = vmap(torch.func.grad_and_value(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    jac = torch.func.jacrev(lambda p: functional_call(model, p, (x,)).sum(0))(params)
    return {"per_sample": per_sample["0.weight"].numpy(), "norms": norms.numpy(),
            "clipped": clipped["2.weight"].numpy(), "values": values.numpy(),
            "g_bias": grads["0.bias"].numpy(), "jac": jac["2.bias"].numpy()}


def lora_program(torch, seed=16):
    """LoRA adapters registered with nn.utils.parametrize, trained, then merged."""
    nn = torch.nn
    parametrize = torch.nn.utils.parametrize

    class LoRA(nn.Module):
        def __init__(self, fan_out, fan_in, rank=2, alpha=4.0):
            super().__init__()
            self.A = nn.Parameter(torch.zeros(rank, fan_in))
            self.B = nn.Parameter(torch.zeros(fan_out, rank))
            self.scale, self.enabled = alpha / rank, True

        def forward(self, W):
            return W + (self.B @ self.A) * self.scale if self.enabled else W

    rng = np.random.default_rng(seed)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    fill_(torch, net.parameters(), rng, 0.4)
    for layer in (net[0], net[2]):
        lora = LoRA(*layer.weight.shape)
        fill_(torch, [lora.A], rng, 1.0)
        parametrize.register_parametrization(layer, "weight", lora)
    for name, p in net.named_parameters():
        p.requires_grad_("parametrizations" in name and "original" not in name)
    trained = [n for n, p in net.named_parameters() if p.requires_grad]
    x = torch.from_numpy(rng.standard_normal((9, 6)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 9))
    opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(3):
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with parametrize.cached():
        cached = net(x)
    net[0].parametrizations.weight[0].enabled = False
    base = net(x)
    net[0].parametrizations.weight[0].enabled = True
    parametrize.remove_parametrizations(net[0], "weight", leave_parametrized=True)
    return {"loss": losses, "trained": trained, "cached": cached.detach().numpy(),
            "base": base.detach().numpy(), "merged": net(x).detach().numpy(),
            "keys": list(net.state_dict().keys())}


def assert_same_results(ours, theirs, rtol=2e-5):
    """Every entry equal: names and integers exactly, floats to float32 rounding."""
    assert ours.keys() == theirs.keys()
    for key, expected in theirs.items():
        got = ours[key]
        if isinstance(expected, list) and expected and isinstance(expected[0], (str, int)):
            assert got == expected, key
        else:
            np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=rtol,
                                       atol=2e-6, err_msg=key)


@pytest.mark.parametrize("program", [llama_program, ppo_program, mpnn_program,
                                     per_sample_program, lora_program],
                         ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch))
