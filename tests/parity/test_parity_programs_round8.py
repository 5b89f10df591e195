"""Training programs of kinds earlier rounds left out, run once with `torch` bound to ember and
once to PyTorch from the same NumPy weights and data: CPU autocast bfloat16 training of a CNN and
a small transformer, a U-Net (ConvTranspose2d, skip concatenation), a GRU seq2seq with attention
and teacher forcing, a GAN step (two optimizers, detach), REINFORCE with Categorical, a CLIP-style
contrastive loss with a learned temperature, gradient accumulation with clipping, per-sample
gradients through func.functional_call, and a GradScaler run whose loss overflows once (whose
backward must stay silent, as PyTorch's does)."""

import math
import warnings

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def dtype_name(tensor):
    """`bfloat16` for both libraries' `torch.bfloat16`/`ember.bfloat16`."""
    return str(tensor.dtype).rsplit(".", 1)[-1]


def amp_cnn_program(torch):
    """A BatchNorm CNN trained under CPU autocast to bfloat16 with SGD and momentum."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 5))
    fill_(torch, model, rng, 0.2)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = normal(torch, rng, 8, 3, 12, 12), torch.from_numpy(rng.integers(0, 5, 8))
    losses, dtypes = [], []
    for _ in range(6):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
            loss = F.cross_entropy(out, y)
            dtypes += [dtype_name(out), dtype_name(model[1](model[0](x))), dtype_name(loss)]
        loss.backward()
        opt.step()
        losses.append(loss.item())
    dtypes.append(dtype_name(model[0].weight.grad))
    return {"loss": losses, "dtypes": dtypes, "running_mean": model[1].running_mean}


def amp_transformer_program(torch):
    """A causal TransformerEncoderLayer language model trained under bfloat16 autocast."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2)
    emb = nn.Embedding(20, 16)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    head = nn.Linear(16, 20)
    params = [*emb.parameters(), *layer.parameters(), *head.parameters()]
    fill_(torch, params, rng, 0.2)
    opt = torch.optim.Adam(params, lr=3e-3)
    tokens = torch.from_numpy(rng.integers(0, 20, (4, 10)))
    mask = nn.Transformer.generate_square_subsequent_mask(9)
    losses, dtypes = [], []
    for _ in range(5):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = layer(emb(tokens[:, :-1]), src_mask=mask, is_causal=True)
            logits = head(hidden)
            loss = F.cross_entropy(logits.reshape(-1, 20), tokens[:, 1:].reshape(-1))
            dtypes += [dtype_name(hidden), dtype_name(logits)]
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"loss": losses, "dtypes": dtypes}


def unet_program(torch):
    """A two-level U-Net (GroupNorm, SiLU, ConvTranspose2d, skip cat) with RMSprop."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(4)

    def block(c_in, c_out):
        return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.GroupNorm(2, c_out),
                             nn.SiLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2 = block(1, 4), block(4, 8)
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.u1, self.out = block(8, 4), nn.Conv2d(4, 1, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(F.max_pool2d(a, 2))
            return self.out(self.u1(torch.cat([self.up(b), a], dim=1)))

    model = UNet()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    x = normal(torch, rng, 2, 1, 8, 8)
    target = (x > 0).float()
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(x), target,
                                                  pos_weight=torch.tensor([2.0]))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"loss": losses, "up_grad": model.up.weight.grad, "up": model.up.weight}


def seq2seq_program(torch):
    """A bidirectional GRU encoder, a GRUCell decoder with dot attention, teacher forcing."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(5)
    V, H = 12, 16
    enc_emb, enc = nn.Embedding(V, H), nn.GRU(H, H, batch_first=True, bidirectional=True)
    dec_emb, dec = nn.Embedding(V, H), nn.GRUCell(3 * H, H)
    query, out = nn.Linear(H, 2 * H, bias=False), nn.Linear(3 * H, V)
    params = [p for m in (enc_emb, enc, dec_emb, dec, query, out) for p in m.parameters()]
    fill_(torch, params, rng, 0.2)
    opt = torch.optim.Adam(params, lr=5e-3)
    src = torch.from_numpy(rng.integers(2, V, (3, 7)))
    tgt = torch.flip(src, [1])
    teacher = rng.random((6, 7)) < 0.5
    losses = []
    for step in range(6):
        opt.zero_grad()
        states, last = enc(enc_emb(src))
        h = last[0] + last[1]
        inp = torch.zeros(3, dtype=torch.long)
        loss = 0
        for t in range(7):
            w = torch.softmax(torch.bmm(states, query(h).unsqueeze(2)).squeeze(2), dim=1)
            ctx = torch.bmm(w.unsqueeze(1), states).squeeze(1)
            h = dec(torch.cat([dec_emb(inp), ctx], 1), h)
            logits = out(torch.cat([h, ctx], 1))
            loss = loss + F.nll_loss(F.log_softmax(logits, -1), tgt[:, t])
            inp = tgt[:, t] if teacher[step, t] else logits.argmax(-1).detach()
        (loss / 7).backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item() / 7)
    return {"loss": losses, "out": out.weight}


def gan_program(torch):
    """Alternating discriminator/generator Adam steps; the fake batch detached for D."""
    nn = torch.nn
    rng = np.random.default_rng(6)
    G = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    fill_(torch, G, rng, 0.3)
    fill_(torch, D, rng, 0.3)
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    criterion = nn.BCEWithLogitsLoss()
    d_losses, g_losses = [], []
    for _ in range(5):
        real = normal(torch, rng, 16, 2) * 0.5 + 1.0
        fake = G(normal(torch, rng, 16, 4))
        opt_d.zero_grad()
        loss_d = (criterion(D(real), torch.ones(16, 1))
                  + criterion(D(fake.detach()), torch.zeros(16, 1)))
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = criterion(D(fake), torch.ones(16, 1))
        loss_g.backward()
        opt_g.step()
        d_losses.append(loss_d.item())
        g_losses.append(loss_g.item())
    return {"d_loss": d_losses, "g_loss": g_losses, "g": G[2].weight, "d_grad": D[0].weight.grad}


def policy_gradient_program(torch):
    """REINFORCE: normalized discounted returns, Categorical log-probs and an entropy bonus."""
    nn = torch.nn
    Categorical = torch.distributions.Categorical
    rng = np.random.default_rng(7)
    policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    fill_(torch, policy, rng, 0.4)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    losses, entropies = [], []
    for _ in range(4):
        dist = Categorical(logits=policy(normal(torch, rng, 10, 4)))
        actions = torch.from_numpy(rng.integers(0, 3, 10))
        rewards = torch.from_numpy(rng.random(10).astype(np.float32))
        returns, g = torch.zeros(10), 0.0
        for t in reversed(range(10)):
            g = rewards[t] + 0.99 * g
            returns[t] = g
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
        loss = -(dist.log_prob(actions) * returns).sum() - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        entropies.append(dist.entropy().mean().item())
    fixed = Categorical(probs=torch.tensor([0.2, 0.3, 0.5]))
    return {"loss": losses, "entropy": entropies, "logits": fixed.logits,
            "log_prob_dtype": [dtype_name(dist.log_prob(actions))]}


def contrastive_program(torch):
    """Symmetric InfoNCE on normalized embeddings with a clamped learned log temperature."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(9)
    encoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))
    fill_(torch, encoder, rng, 0.3)
    logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
    opt = torch.optim.SGD([*encoder.parameters(), logit_scale], lr=0.1, nesterov=True,
                          momentum=0.9)
    labels = torch.arange(12)
    losses = []
    for _ in range(5):
        x = normal(torch, rng, 12, 8)
        a = F.normalize(encoder(x + 0.1 * normal(torch, rng, 12, 8)), dim=-1)
        b = F.normalize(encoder(x + 0.1 * normal(torch, rng, 12, 8)), dim=-1)
        logits = logit_scale.exp() * a @ b.t()
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            logit_scale.clamp_(0, math.log(100))
        losses.append(loss.item())
    return {"loss": losses, "scale": logit_scale,
            "similarity": F.cosine_similarity(a[:1], b, dim=-1)}


def grad_accumulation_program(torch):
    """Micro-batches accumulate into .grad; every second one: clip by norm and value, step."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(10)
    model = nn.Sequential(nn.Linear(6, 12), nn.Mish(), nn.Linear(12, 1))
    fill_(torch, model, rng, 0.5)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    x, y = normal(torch, rng, 32, 6), normal(torch, rng, 32, 1)
    losses, norms = [], []
    opt.zero_grad(set_to_none=True)
    for i, (xb, yb) in enumerate(zip(x.split(8), y.split(8))):
        loss = F.smooth_l1_loss(model(xb), yb, beta=0.5) / 2
        loss.backward()
        losses.append(loss.item())
        if i % 2 == 1:
            norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5).item())
            nn.utils.clip_grad_value_(model.parameters(), 0.1)
            opt.step()
            opt.zero_grad()
    total = nn.utils.get_total_norm([torch.ones(3), torch.ones(4) * 2], norm_type=3.0)
    return {"loss": losses, "norms": norms, "total": total, "w": model[2].weight,
            "grad_is_none": [p.grad is None for p in model.parameters()]}


def per_sample_program(torch):
    """Per-sample gradients by vmap(grad(functional_call)), clipped per sample (DP-SGD)."""
    nn, F, func = torch.nn, torch.nn.functional, torch.func
    rng = np.random.default_rng(13)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
    fill_(torch, model, rng, 0.5)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_fn(p, x, y):
        out = func.functional_call(model, p, (x.unsqueeze(0),))
        return F.cross_entropy(out, y.unsqueeze(0))

    x, y = normal(torch, rng, 7, 3), torch.from_numpy(rng.integers(0, 2, 7))
    grads = func.vmap(func.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    g0, value = func.grad_and_value(loss_fn)(params, x[0], y[0])
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
    factor = 1.0 / torch.clamp(norms, min=1.0)
    clipped = (grads["2.weight"] * factor.view(-1, 1, 1)).mean(0)
    return {"first": grads["0.weight"], "bias": grads["2.bias"], "g0": g0["2.weight"],
            "value": value, "clipped": clipped, "keys": sorted(grads)}


def scaler_overflow_program(torch):
    """A GradScaler run under bfloat16 autocast whose third loss is infinite: skipped step."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(25)
    model = nn.Linear(4, 2)
    fill_(torch, model, rng)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
    x, y = normal(torch, rng, 8, 4), torch.from_numpy(rng.integers(0, 2, 8))
    scales, losses = [], []
    for i in range(5):
        opt.zero_grad()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        if i == 2:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return {"scales": scales, "loss": losses, "w": model.weight}


def values(value):
    """A tensor (any dtype, requiring grad or not) as a float64 NumPy array; others unchanged."""
    if hasattr(value, "detach"):
        return value.detach().float().numpy().astype(np.float64)
    if isinstance(value, list) and value and hasattr(value[0], "detach"):
        return np.stack([values(v) for v in value])
    return value


def assert_same_results(ours, theirs, rtol, atol):
    """Names, flags and dtypes equal; numbers within the tolerances."""
    assert ours.keys() == theirs.keys()
    for key, expected in theirs.items():
        got = ours[key]
        if isinstance(expected, list) and expected and isinstance(expected[0], (str, bool)):
            assert got == expected, key
        else:
            np.testing.assert_allclose(np.asarray(values(got), dtype=np.float64),
                                       np.asarray(values(expected), dtype=np.float64),
                                       rtol=rtol, atol=atol, err_msg=key)


FLOAT32_PROGRAMS = [unet_program, seq2seq_program, gan_program, policy_gradient_program,
                    contrastive_program, grad_accumulation_program, per_sample_program]
BFLOAT16_PROGRAMS = [amp_cnn_program, amp_transformer_program, scaler_overflow_program]


@pytest.mark.parametrize("program", FLOAT32_PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-6)


@pytest.mark.parametrize("program", BFLOAT16_PROGRAMS, ids=lambda f: f.__name__)
def test_autocast_program_stays_close_to_torch(program):
    """bfloat16 rounding differs in the last bit now and then: the trajectories stay close."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)     # an overflow stays silent
        ours = program(ember)
    assert_same_results(ours, program(torch), rtol=3e-2, atol=1e-4)
