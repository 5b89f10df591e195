"""Short programs written as PyTorch users write them, run once with `torch` bound to ember and
once to PyTorch (weights and data from one NumPy generator): a DDPM step and sampling loop with
a small UNet, Swin window attention, a top-k mixture of experts, a CTC speech model, seq2seq
with Bahdanau attention and beam search, WGAN-GP, a VQ-VAE with an EMA codebook, a spatial
transformer, a Gaussian process fit and BERT-style masked language modelling."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import normal
from tests.parity.test_parity_programs_round3 import assert_same_results, fill_

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def values(tensor):
    """The detached float values of `tensor` as a NumPy array."""
    return tensor.detach().float().numpy()


def ddpm_program(torch):
    """Three DDPM noise-prediction steps on a GroupNorm/SiLU/ConvTranspose2d UNet, then sampling."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)

    def time_embedding(t, dim=8):
        half = dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        angles = t[:, None].float() * freqs[None]
        return torch.cat([angles.sin(), angles.cos()], dim=-1)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inc, self.gn1 = nn.Conv2d(1, 8, 3, padding=1), nn.GroupNorm(4, 8)
            self.down, self.gn2 = nn.Conv2d(8, 16, 4, 2, 1), nn.GroupNorm(4, 16)
            self.time = nn.Linear(8, 16)
            self.up, self.out = nn.ConvTranspose2d(16, 8, 4, 2, 1), nn.Conv2d(16, 1, 3, padding=1)

        def forward(self, x, t):
            h1 = F.silu(self.gn1(self.inc(x)))
            h2 = F.silu(self.gn2(self.down(h1)) + self.time(time_embedding(t))[:, :, None, None])
            return self.out(torch.cat([self.up(h2), h1], 1))

    model = UNet()
    fill_(torch, model.parameters(), rng, 0.2)
    betas = torch.linspace(1e-4, 0.02, 50)
    alphas = 1 - betas
    alpha_bar = torch.cumprod(alphas, 0)
    x0 = normal(torch, rng, 4, 1, 8, 8)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(3):
        t = torch.from_numpy(rng.integers(0, 50, 4))
        noise = normal(torch, rng, 4, 1, 8, 8)
        a = alpha_bar.gather(0, t).view(-1, 1, 1, 1)
        loss = F.mse_loss(model(a.sqrt() * x0 + (1 - a).sqrt() * noise, t), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    x = normal(torch, rng, 2, 1, 8, 8)
    with torch.no_grad():
        for i in reversed(range(0, 50, 10)):
            eps = model(x, torch.full((2,), i, dtype=torch.long))
            x = (x - betas[i] / (1 - alpha_bar[i]).sqrt() * eps) / alphas[i].sqrt()
            if i > 0:
                x = x + betas[i].sqrt() * normal(torch, rng, 2, 1, 8, 8)
    return {"loss": losses, "sample": values(x)}


def swin_program(torch):
    """Shifted-window attention: roll, window partition, relative position bias by index."""
    nn = torch.nn
    rng = np.random.default_rng(2)
    ws, size, dim, heads = 2, 4, 8, 2
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij"))
    coords = coords.flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += ws - 1
    rel[:, :, 1] += ws - 1
    rel[:, :, 0] *= 2 * ws - 1
    index = rel.sum(-1)
    table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, heads))
    qkv, proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
    fill_(torch, [table, *qkv.parameters(), *proj.parameters()], rng, 0.3)
    x = torch.roll(normal(torch, rng, 2, size, size, dim), shifts=(-1, -1), dims=(1, 2))
    n = size // ws
    windows = x.view(2, n, ws, n, ws, dim).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, dim)
    b, tokens, _ = windows.shape
    q, k, v = qkv(windows).reshape(b, tokens, 3, heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
    att = (q * (dim // heads) ** -0.5) @ k.transpose(-2, -1)
    att = att + table[index.view(-1)].view(tokens, tokens, -1).permute(2, 0, 1).unsqueeze(0)
    out = proj((att.softmax(-1) @ v).transpose(1, 2).reshape(b, tokens, dim))
    out = out.view(2, n, n, ws, ws, dim).permute(0, 1, 3, 2, 4, 5).reshape(2, size, size, dim)
    out = torch.roll(out, shifts=(1, 1), dims=(1, 2))
    out.pow(2).mean().backward()
    return {"out": values(out), "table_grad": values(table.grad), "index": index.numpy(),
            "qkv_grad": values(qkv.weight.grad)}


def moe_program(torch):
    """A top-2 mixture of experts: index_add_ combine, scatter_add load counts, aux and z losses."""
    nn = torch.nn
    rng = np.random.default_rng(3)
    n_experts, dim = 4, 6
    gate = nn.Linear(dim, n_experts, bias=False)
    experts = nn.ModuleList(nn.Sequential(nn.Linear(dim, 8), nn.GELU(), nn.Linear(8, dim))
                            for _ in range(n_experts))
    params = [*gate.parameters(), *experts.parameters()]
    fill_(torch, params, rng, 0.4)
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True)
    x = normal(torch, rng, 10, dim)
    losses, counts = [], []
    for _ in range(3):
        logits = gate(x)
        probs = logits.softmax(-1)
        weight, chosen = probs.topk(2, dim=-1)
        weight = weight / weight.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(n_experts):
            token, slot = torch.where(chosen == e)
            if token.numel():
                out = out.index_add(0, token, experts[e](x[token]) * weight[token, slot, None])
        count = torch.zeros(n_experts).scatter_add(0, chosen.flatten(), torch.ones(chosen.numel()))
        aux = n_experts * (count / chosen.numel() * probs.mean(0)).sum()
        z_loss = torch.logsumexp(logits, -1).pow(2).mean()
        loss = (out - x.flip(0)).pow(2).mean() + 0.01 * aux + 1e-3 * z_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        counts.append(count.tolist())
    return {"loss": losses, "counts": np.array(counts), "gate": values(gate.weight)}


def ctc_program(torch):
    """Conv1d + BatchNorm1d + bidirectional GRU trained with F.ctc_loss, then greedy decoding."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(4)

    class SpeechModel(nn.Module):
        def __init__(self):
            super().__init__()
            # no conv bias before BatchNorm: its exact-zero gradient is rounding noise that Adam
            # would turn into full-size steps, different in each library
            self.conv, self.bn = nn.Conv1d(5, 8, 3, padding=1, bias=False), nn.BatchNorm1d(8)
            self.gru = nn.GRU(8, 6, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(12, 6)

        def forward(self, x):
            h = F.relu(self.bn(self.conv(x))).transpose(1, 2)
            return self.fc(self.gru(h)[0]).log_softmax(-1)

    model = SpeechModel()
    fill_(torch, model.parameters(), rng, 0.3)
    x = normal(torch, rng, 3, 5, 12)
    targets = torch.from_numpy(rng.integers(1, 6, (3, 4)))
    input_lengths, target_lengths = torch.tensor([12, 10, 9]), torch.tensor([4, 3, 2])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        log_probs = model(x).transpose(0, 1)
        loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, zero_infinity=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    flat = torch.cat([targets[0, :4], targets[1, :3], targets[2, :2]])
    per_item = nn.CTCLoss(reduction="none")(model(x).transpose(0, 1), flat, input_lengths,
                                            target_lengths)
    model.eval()
    return {"loss": losses, "per_item": values(per_item), "best": model(x).argmax(-1).numpy(),
            "running_mean": values(model.bn.running_mean)}


def seq2seq_program(torch):
    """GRU encoder, GRUCell decoder with masked Bahdanau attention, RMSprop, then beam search."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(5)
    vocab, hidden = 7, 8

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, hidden, padding_idx=0)
            self.enc = nn.GRU(hidden, hidden, batch_first=True)
            self.dec = nn.GRUCell(2 * hidden, hidden)
            self.w, self.u, self.v = (nn.Linear(hidden, hidden), nn.Linear(hidden, hidden),
                                      nn.Linear(hidden, 1))
            self.out = nn.Linear(2 * hidden, vocab)

        def step(self, token, h, enc, mask):
            energy = self.v(torch.tanh(self.w(h)[:, None] + self.u(enc))).squeeze(-1)
            attn = F.softmax(energy.masked_fill(~mask, float("-inf")), -1)
            context = torch.bmm(attn.unsqueeze(1), enc).squeeze(1)
            h = self.dec(torch.cat([self.emb(token), context], -1), h)
            return self.out(torch.cat([h, context], -1)), h

    model = Seq2Seq()
    fill_(torch, model.parameters(), rng, 0.3)
    src = torch.from_numpy(rng.integers(1, vocab, (2, 5)))
    src[1, 3:] = 0
    mask = src != 0
    tgt = torch.from_numpy(rng.integers(1, vocab, (2, 4)))
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(2):
        enc, h = model.enc(model.emb(src))
        h, token, loss = h[0], torch.ones(2, dtype=torch.long), 0
        for t in range(4):
            logits, h = model.step(token, h, enc, mask)
            loss = loss + F.cross_entropy(logits, tgt[:, t])
            token = tgt[:, t]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        enc, h = model.enc(model.emb(src[:1]))
        h, beams, scores = h[0], torch.zeros(1, 0, dtype=torch.long), torch.zeros(1)
        token = torch.ones(1, dtype=torch.long)
        for _ in range(3):
            width = h.shape[0]
            logits, h = model.step(token, h, enc.expand(width, -1, -1), mask[:1].expand(width, -1))
            scores, flat = (scores[:, None] + logits.log_softmax(-1)).view(-1).topk(3)
            beam, token = flat // vocab, flat % vocab
            beams = torch.cat([beams.index_select(0, beam), token[:, None]], 1)
            h = h[beam]
    return {"loss": losses, "beams": beams.numpy(), "scores": values(scores)}


def wgan_gp_program(torch):
    """WGAN-GP: the gradient penalty differentiates autograd.grad(create_graph=True) again."""
    nn = torch.nn
    rng = np.random.default_rng(8)
    critic = nn.Sequential(nn.Linear(3, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    gen = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
    fill_(torch, [*critic.parameters(), *gen.parameters()], rng, 0.3)
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.9))
    history = []
    for _ in range(3):
        real, z = normal(torch, rng, 6, 3), normal(torch, rng, 6, 2)
        fake = gen(z).detach()
        eps = torch.from_numpy(rng.random((6, 1)).astype(np.float32))
        mixed = (eps * real + (1 - eps) * fake).requires_grad_(True)
        grad, = torch.autograd.grad(critic(mixed), mixed, grad_outputs=torch.ones(6, 1),
                                    create_graph=True)
        penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()
        loss_c = critic(fake).mean() - critic(real).mean() + 10 * penalty
        opt_c.zero_grad()
        loss_c.backward()
        opt_c.step()
        loss_g = -critic(gen(z)).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        history.append([loss_c.item(), penalty.item(), loss_g.item()])
    return {"losses": np.array(history), "critic": values(critic[0].weight)}


def vqvae_program(torch):
    """VQ-VAE: nearest-code lookup, straight-through estimator, commitment loss, EMA codebook."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(13)
    codes, dim = 6, 4
    enc, dec = nn.Conv2d(2, dim, 3, padding=1), nn.Conv2d(dim, 2, 3, padding=1)
    fill_(torch, [*enc.parameters(), *dec.parameters()], rng, 0.3)
    codebook = normal(torch, rng, codes, dim)
    ema_count, ema_sum = torch.ones(codes), codebook.clone()
    x = normal(torch, rng, 3, 2, 4, 4)
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-2)
    losses = []
    for _ in range(3):
        z = enc(x).permute(0, 2, 3, 1).reshape(-1, dim)
        dist = z.pow(2).sum(1, keepdim=True) - 2 * z @ codebook.t() + codebook.pow(2).sum(1)
        index = dist.argmin(1)
        quantized = F.embedding(index, codebook)
        straight = z + (quantized - z).detach()
        recon = dec(straight.view(3, 4, 4, dim).permute(0, 3, 1, 2))
        loss = F.mse_loss(recon, x) + 0.25 * F.mse_loss(z, quantized.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            onehot = F.one_hot(index, codes).float()
            ema_count.mul_(0.99).add_(onehot.sum(0), alpha=0.01)
            total = ema_count.sum()
            smoothed = (ema_count + 1e-5) / (total + codes * 1e-5) * total
            ema_sum.mul_(0.99).add_(onehot.t() @ z, alpha=0.01)
            codebook = ema_sum / smoothed.unsqueeze(1)
        losses.append(loss.item())
    usage = onehot.mean(0)
    perplexity = torch.exp(-(usage * torch.log(usage + 1e-10)).sum())
    return {"loss": losses, "codebook": values(codebook), "perplexity": [perplexity.item()],
            "index": index.tolist()}


def spatial_transformer_program(torch):
    """A float64 spatial transformer: affine_grid + grid_sample in each mode and padding."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(33)
    loc = nn.Sequential(nn.Flatten(), nn.Linear(64, 6)).double()
    fill_(torch, loc.parameters(), rng, 0.05)
    with torch.no_grad():
        loc[1].bias.copy_(torch.tensor([1.0, 0, 0, 0, 1, 0]))
    x = normal(torch, rng, 2, 1, 8, 8).double().requires_grad_()
    theta = loc(x).view(-1, 2, 3)
    results, total = {}, 0
    for align in (False, True):
        grid = F.affine_grid(theta, x.size(), align_corners=align)
        for mode, padding in (("bilinear", "zeros"), ("nearest", "border"),
                              ("bilinear", "reflection"), ("bicubic", "zeros")):
            out = F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
            results[f"{mode}-{padding}-{align}"] = values(out)
            total = total + out.pow(2).sum()
    total.backward()
    return {**results, "x_grad": values(x.grad), "loc_grad": values(loc[1].weight.grad)}


def gaussian_process_program(torch):
    """Fit RBF kernel hyperparameters by the float64 marginal likelihood (cholesky), predict."""
    rng = np.random.default_rng(43)
    X = torch.from_numpy(rng.random((12, 1))) * 5
    Y = torch.sin(X).squeeze(1) + 0.1 * torch.from_numpy(rng.standard_normal(12))
    log_len, log_scale = (torch.zeros((), dtype=torch.float64, requires_grad=True)
                          for _ in range(2))
    log_noise = torch.tensor(-2.0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_len, log_scale, log_noise], lr=0.05)

    def kernel(a, b):
        return log_scale.exp() ** 2 * torch.exp(-0.5 * torch.cdist(a, b) ** 2 / log_len.exp() ** 2)

    nlls = []
    for _ in range(4):
        cov = kernel(X, X) + (log_noise.exp() ** 2 + 1e-6) * torch.eye(12, dtype=torch.float64)
        chol = torch.linalg.cholesky(cov)
        alpha = torch.cholesky_solve(Y[:, None], chol)
        nll = 0.5 * (Y[:, None] * alpha).sum() + chol.diagonal().log().sum()
        opt.zero_grad()
        nll.backward()
        opt.step()
        nlls.append(nll.item() + 6 * math.log(2 * math.pi))
    test = torch.linspace(0, 5, 7, dtype=torch.float64)[:, None]
    with torch.no_grad():
        cross = kernel(test, X)
        v = torch.linalg.solve_triangular(chol, cross.T, upper=False)
        var = kernel(test, test).diagonal() - (v ** 2).sum(0)
        sign, logabsdet = torch.linalg.slogdet(cov)
    return {"nll": nlls, "mean": values(cross @ alpha), "var": var.numpy(),
            "logdet": [torch.logdet(cov).item(), logabsdet.item(), sign.item()]}


def masked_lm_program(torch):
    """BERT-style MLM: tied embeddings, padded TransformerEncoder, ignore_index, eval fast path."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(36)
    vocab, dim = 12, 8
    emb = nn.Embedding(vocab, dim)
    layer = nn.TransformerEncoderLayer(dim, 2, 16, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)
    head = nn.Linear(dim, vocab)
    head.weight = emb.weight
    params = list(dict.fromkeys([*emb.parameters(), *enc.parameters(), *head.parameters()]))
    fill_(torch, params, rng, 0.3)
    tokens = torch.from_numpy(rng.integers(3, vocab, (3, 7)))
    tokens[1, 5:] = 0
    tokens[2, 3:] = 0
    pad = tokens == 0
    chosen = torch.from_numpy(rng.random((3, 7)) < 0.3) & ~pad
    inputs = torch.where(chosen, torch.full_like(tokens, 2), tokens)
    labels = tokens.masked_fill(~chosen, -100)
    opt = torch.optim.Adam(params, lr=1e-2)
    losses = []
    for _ in range(3):
        hidden = enc(emb(inputs), src_key_padding_mask=pad)
        loss = F.cross_entropy(head(hidden).view(-1, vocab), labels.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    enc.eval()
    with torch.no_grad():
        evaluated = enc(emb(inputs), src_key_padding_mask=pad)
    return {"loss": losses, "eval": values(evaluated), "n_params": [len(params)]}


PROGRAMS = [ddpm_program, swin_program, moe_program, ctc_program, seq2seq_program,
            wgan_gp_program, vqvae_program, spatial_transformer_program,
            gaussian_process_program, masked_lm_program]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=1e-4)
