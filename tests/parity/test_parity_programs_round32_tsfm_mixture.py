"""Moirai and TabPFN written as their reference repositories write them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: Moirai (any-variate
flattening of (B, T, V) into one token sequence with variate ids, packed scaler by
scatter/segment sums, binary attention bias between same/different variates, a mixture head
built from MixtureSameFamily of StudentT/Normal/LogNormal components) and TabPFN (per-feature
normalisation with nanmean/nan_to_num over the train rows only, a train/test attention mask,
ensembling over feature permutations and class shifts)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def moirai_program(torch):
    """Patch each variate, flatten variates into tokens, mixture NLL, two AdamW steps."""
    rng = np.random.default_rng(3)
    nn, F, D = torch.nn, torch.nn.functional, torch.distributions
    B, T, V, P = 2, 12, 3, 4
    target = torch.from_numpy(rng.standard_normal((B, T, V)).astype(np.float32) * 2 + 1)
    observed = torch.ones(B, T, V, dtype=torch.bool)
    observed[0, :3, 1] = False
    target = torch.where(observed, target, torch.nan)
    # patchify per variate, then (B, V*N, P): the any-variate flattening
    patches = target.transpose(1, 2).unfold(-1, P, P)           # B, V, N, P
    obs_p = observed.transpose(1, 2).unfold(-1, P, P)
    N = patches.shape[2]
    tokens = patches.reshape(B, V * N, P)
    obs_t = obs_p.reshape(B, V * N, P)
    variate_id = torch.arange(V).repeat_interleave(N).expand(B, -1)
    time_id = torch.arange(N).repeat(V).expand(B, -1)
    # PackedStdScaler: per (sample, variate) mean/std over observed values via scatter_add
    x0 = torch.nan_to_num(tokens, nan=0.0)
    cnt = torch.zeros(B, V).scatter_add_(1, variate_id, obs_t.sum(-1).float())
    tot = torch.zeros(B, V).scatter_add_(1, variate_id, (x0 * obs_t).sum(-1))
    loc = tot / cnt.clamp_min(1)
    sq = ((x0 - loc.gather(1, variate_id).unsqueeze(-1)) ** 2 * obs_t).sum(-1)
    var = torch.zeros(B, V).index_put_((torch.arange(B).unsqueeze(1).expand(-1, V * N),
                                        variate_id), sq, accumulate=True)
    scale = torch.sqrt(var / (cnt - 1).clamp_min(1) + 1e-5)
    loc_t, scale_t = loc.gather(1, variate_id)[..., None], scale.gather(1, variate_id)[..., None]
    scaled = (x0 - loc_t) / scale_t * obs_t
    res = {"loc": loc, "scale": scale, "cnt": cnt, "variate_id": variate_id}
    in_proj = nn.Linear(2 * P, 16)
    var_bias = nn.Embedding(2, 2)  # BinaryAttentionBias: same / different variate, per head
    qkv = nn.Linear(16, 48)
    o_proj = nn.Linear(16, 16)
    head = nn.Linear(16, P * 3 * 4)  # per patch step: weights + 3 components' params
    mods = nn.ModuleList([in_proj, var_bias, qkv, o_proj, head])
    fill_(torch, mods, rng, scale=0.2)
    opt = torch.optim.AdamW(mods.parameters(), lr=5e-3)
    same = (variate_id.unsqueeze(-1) == variate_id.unsqueeze(-2)).long()  # B, L, L
    for _ in range(2):
        h = in_proj(torch.cat([scaled, obs_t.float()], -1))
        q, k, v = qkv(h).view(B, -1, 3, 2, 8).permute(2, 0, 3, 1, 4)
        bias = var_bias(same).permute(0, 3, 1, 2)  # B, H, L, L
        # rotary-free time ordering: causal within each variate via time ids
        keep = time_id.unsqueeze(-1) >= time_id.unsqueeze(-2)
        bias = bias.masked_fill(~keep.unsqueeze(1), float("-inf"))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        h = h + o_proj(a.transpose(1, 2).reshape(B, -1, 16))
        raw = head(h).view(B, V * N, P, 4, 3)
        logits, p1, p2, p3 = raw.unbind(-2)
        comp = D.MixtureSameFamily(
            D.Categorical(logits=logits[..., 0].unsqueeze(-1).expand(-1, -1, -1, 2)
                          + torch.tensor([0.0, 0.5])),
            D.Normal(torch.stack([p1[..., 0], p2[..., 0]], -1),
                     F.softplus(torch.stack([p1[..., 1], p2[..., 1]], -1)) + 1e-3))
        student = D.StudentT(2.0 + F.softplus(p3[..., 0]), p3[..., 1],
                             F.softplus(p3[..., 2]) + 1e-3)
        y = torch.where(obs_t, scaled, torch.zeros(()))
        nll = -(comp.log_prob(y) + student.log_prob(y)) / 2
        loss = nll[obs_t].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("loss", []).append(loss.item())
    res["mix_mean"], res["mix_var"] = comp.mean, comp.variance
    res["mix_cdf"] = comp.cdf(y)
    res["bias_grad"] = var_bias.weight.grad
    res["batch_shape"] = list(comp.batch_shape)
    res["event_shape"] = list(comp.event_shape)
    res["params"] = [p for n, p in mods.named_parameters() if n != "2.bias"]
    return res


def _tabpfn_preprocess(torch, x, n_train):
    """TabPFN's per-feature normalisation fitted on the train rows, nan-aware."""
    train = x[:n_train]
    mean = torch.nanmean(train, dim=0)
    nan_mask = torch.isnan(x)
    x = torch.nan_to_num(x, nan=0.0) + nan_mask * mean
    std = torch.sqrt(torch.nanmean((train - mean) ** 2, dim=0))
    std = torch.where(std == 0, torch.ones_like(std), std)
    x = (x - mean) / (std + 1e-6)
    x = torch.clip(x, min=-100, max=100)
    return torch.cat([x, nan_mask.float()], -1)


def tabpfn_program(torch):
    """In-context classification: train rows attend to train rows, test rows attend to train."""
    rng = np.random.default_rng(4)
    nn, F = torch.nn, torch.nn.functional
    n_train, n_test, n_feat, n_cls, d = 10, 6, 4, 3, 16
    xs = rng.standard_normal((n_train + n_test, n_feat)).astype(np.float32)
    xs[rng.random(xs.shape) < 0.15] = np.nan
    xs[:, 3] = 2.0  # a constant feature: std 0
    X = torch.from_numpy(xs)
    y = torch.from_numpy(rng.integers(0, n_cls, n_train + n_test))
    enc_x = nn.Linear(2 * n_feat, d)
    enc_y = nn.Embedding(n_cls, d)
    layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=False)
    dec = nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, n_cls))
    mods = nn.ModuleList([enc_x, enc_y, layer, dec])
    fill_(torch, mods, rng, scale=0.2)
    L = n_train + n_test
    mask = torch.zeros(L, L, dtype=torch.bool)
    mask[:, n_train:] = True  # nobody attends to test rows ...
    mask.diagonal()[n_train:] = False  # ... except each test row to itself
    # eps 1e-6: a dead ReLU unit's 4e-8 gradient would otherwise turn float32 noise into steps
    opt = torch.optim.AdamW(mods.parameters(), lr=1e-2, eps=1e-6)
    res = {"mask_sum": int(mask.sum())}
    perms = [np.arange(n_feat), rng.permutation(n_feat)]
    for step in range(2):
        opt.zero_grad()
        total = 0
        for ens, perm in enumerate(perms):
            Xp = X[:, torch.from_numpy(perm)]
            shift = ens % n_cls
            feats = _tabpfn_preprocess(torch, Xp, n_train)
            y_in = (y + shift) % n_cls
            h = enc_x(feats)
            h[:n_train] += enc_y(y_in[:n_train])
            h = layer(h.unsqueeze(1), src_mask=mask).squeeze(1)
            logits = dec(h[n_train:])
            loss = F.cross_entropy(logits, y_in[n_train:])
            total = total + loss / len(perms)
            if step == 1:
                with torch.inference_mode():
                    probs = logits.detach().softmax(-1).roll(-shift, dims=-1)
                    res.setdefault("probs", []).append(probs)
        total.backward()
        nn.utils.clip_grad_value_(mods.parameters(), 0.5)
        opt.step()
        res.setdefault("loss", []).append(total.item())
    res["feats"] = feats
    res["ens"] = torch.stack(res.pop("probs")).mean(0)
    res["pred"] = res["ens"].argmax(-1)
    res["params"] = [p for n, p in mods.named_parameters() if "in_proj" not in n]
    res["in_proj_grad"] = layer.self_attn.in_proj_weight.grad
    return res


PROGRAMS = [moirai_program, tabpfn_program]
TOLERANCES = {
    # attention softmax and mixture logsumexp over Adam steps: float32 reduction order
    "moirai_program": (1e-4, 1e-5),
    "tabpfn_program": (1e-4, 1e-5),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
