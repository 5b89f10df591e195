"""Time-series foundation models written as their reference repositories write them in torch,
run once with `torch` bound to ember and once to PyTorch from the same NumPy weights: Chronos
(mean scaling, uniform bins via bucketize, token ids with pad/eos, T5-style cross-entropy with
ignore_index, dequantisation of sampled ids), TimesFM/Lag-Llama (patching with unfold, lag
features by indexing, a Student-t head scored with distributions.StudentT.log_prob, quantile
losses). The siblings _mixture (Moirai, TabPFN) and _bolt
(Chronos-Bolt, cached rotary decoding) cover the rest; _fixes pins what they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


class _ChronosTokenizer:
    """chronos' MeanScaleUniformBins: context scaled by its mean |x|, then bucketized."""

    def __init__(self, torch, low=-3.0, high=3.0, n_tokens=24, n_special=2):
        self.torch = torch
        self.n_special = n_special
        self.n_tokens = n_tokens
        self.centers = torch.linspace(low, high, n_tokens - n_special - 1)
        self.boundaries = torch.concat((torch.tensor([-1e20]),
                                        (self.centers[1:] + self.centers[:-1]) / 2,
                                        torch.tensor([1e20])))

    def context_input_transform(self, context, scale=None):
        """Token ids, attention mask and scale of a padded (nan) context; labels are
        tokenised with their context's scale."""
        torch = self.torch
        context = context.to(dtype=torch.float32)
        attention_mask = ~torch.isnan(context)
        if scale is None:
            scale = torch.nansum(torch.abs(context) * attention_mask, dim=-1) / torch.nansum(
                attention_mask, dim=-1)
            scale[~(scale > 0)] = 1.0
        scaled = context / scale.unsqueeze(dim=-1)
        token_ids = torch.bucketize(scaled, boundaries=self.boundaries, right=True) \
            + self.n_special
        token_ids.clamp_(0, self.n_tokens - 1)
        token_ids[~attention_mask] = 0
        eos = torch.full((token_ids.shape[0], 1), fill_value=1)
        token_ids = torch.concat((token_ids, eos), dim=1)
        attention_mask = torch.concat(
            (attention_mask, torch.full((attention_mask.shape[0], 1), fill_value=True)), dim=1)
        return token_ids, attention_mask, scale

    def output_transform(self, samples, scale):
        """Sampled ids back to values: bin centres times the scale."""
        scale_unsqueezed = scale.unsqueeze(-1).unsqueeze(-1)
        indices = self.torch.clamp(samples - self.n_special - 1, min=0,
                                   max=len(self.centers) - 1)
        return self.centers[indices] * scale_unsqueezed


def chronos_program(torch):
    """Tokenise, a tiny encoder-decoder LM trained with ignore_index labels, then dequantise."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    tok = _ChronosTokenizer(torch)
    raw = rng.standard_normal((3, 10)).astype(np.float32) * 4 + 2
    raw[0, :3] = np.nan
    raw[2] = 0.0
    context = torch.from_numpy(raw)
    ids, mask, scale = tok.context_input_transform(context)
    res = {"ids": ids, "mask": mask, "scale": scale, "ids_long": ids.dtype == torch.int64}
    emb = nn.Embedding(tok.n_tokens, 8, padding_idx=0)
    enc = nn.GRU(8, 8, batch_first=True)
    head = nn.Linear(8, tok.n_tokens, bias=False)
    params = list(emb.parameters()) + list(enc.parameters()) + list(head.parameters())
    fill_(torch, params, rng)
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.01)
    target = torch.from_numpy(rng.standard_normal((3, 4)).astype(np.float32) * 4 + 2)
    labels, lmask, _ = tok.context_input_transform(target, scale)
    labels[~lmask] = -100
    labels[1, 2] = -100
    for _ in range(3):
        h, _ = enc(emb(ids) * mask.unsqueeze(-1).float())
        logits = head(h[:, -labels.shape[1]:])
        loss = F.cross_entropy(logits.reshape(-1, tok.n_tokens), labels.reshape(-1),
                               ignore_index=-100, label_smoothing=0.05)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        res.setdefault("loss", []).append(loss.item())
    res["emb_pad_grad"] = emb.weight.grad[0]
    with torch.no_grad():
        top = logits.topk(3, dim=-1).indices.transpose(1, 2)  # (B, samples, T)
        preds = tok.output_transform(top, scale)
        res["preds"] = preds
        res["median"] = preds.median(dim=1).values
        res["quantiles"] = torch.quantile(preds, torch.tensor([0.1, 0.5, 0.9]), dim=1)
    res["weight"] = head.weight
    return res


def _lagged_sequence(torch, prior, lags, sequence, subsequences_length=1):
    """lag-llama's get_lagged_subsequences_by_default: lag features by negative indexing."""
    sequence_length = sequence.shape[1]
    lagged = []
    for lag_index in lags:
        begin_index = -lag_index - subsequences_length
        end_index = -lag_index if lag_index > 0 else None
        lagged.append(sequence[:, begin_index:end_index, ...].unsqueeze(1))
    assert max(lags) + subsequences_length <= sequence_length + prior
    return torch.cat(lagged, dim=1).permute(0, 2, 3, 1)


class _StudentTHead:
    """gluonts' StudentTOutput.domain_map: df = 2 + softplus, scale = softplus."""

    def __init__(self, torch, d):
        self.torch = torch
        self.proj = torch.nn.Linear(d, 3)

    def distribution(self, h, loc, scale):
        """An affine-transformed StudentT as gluonts builds it."""
        torch = self.torch
        df, mu, sigma = self.proj(h).unbind(-1)
        df = 2.0 + torch.nn.functional.softplus(df)
        sigma = torch.nn.functional.softplus(sigma).clamp_min(torch.finfo(sigma.dtype).eps)
        base = torch.distributions.StudentT(df, mu, sigma)
        return base, torch.distributions.TransformedDistribution(
            base, [torch.distributions.AffineTransform(loc=loc, scale=scale)])


def lag_llama_program(torch):
    """Robust scaling, lag features, a causal-attention decoder and a Student-t NLL."""
    rng = np.random.default_rng(1)
    nn = torch.nn
    past = torch.from_numpy((rng.standard_normal((2, 20)) * 3 + 5).astype(np.float32))
    observed = torch.ones_like(past)
    observed[0, :2] = 0
    # lag-llama's RobustScaler: median and IQR over observed values
    med = torch.median(past[:, 2:], dim=1, keepdim=True).values
    q1 = torch.quantile(past[:, 2:], 0.25, dim=1, keepdim=True)
    q3 = torch.quantile(past[:, 2:], 0.75, dim=1, keepdim=True)
    iqr = torch.maximum(q3 - q1, torch.full_like(q3, 1e-5))
    scaled = (past - med) / iqr
    lags = [0, 1, 2, 4, 7]
    seq = scaled.unsqueeze(-1)
    feats = _lagged_sequence(torch, 0, lags, seq, subsequences_length=12)
    feats = feats.reshape(2, 12, -1)
    log_abs_loc = torch.log1p(med.abs()).expand(-1, 12).unsqueeze(-1)
    log_scale = torch.log(iqr).expand(-1, 12).unsqueeze(-1)
    x = torch.cat([feats, log_abs_loc, log_scale], dim=-1)
    proj = nn.Linear(x.shape[-1], 16)
    attn = nn.MultiheadAttention(16, 2, batch_first=True)
    head = _StudentTHead(torch, 16)
    modules = nn.ModuleList([proj, attn, head.proj])
    fill_(torch, modules, rng)
    causal = torch.triu(torch.full((12, 12), float("-inf")), diagonal=1)
    opt = torch.optim.Adam(modules.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    target = past[:, -12:]
    res = {"feats": feats, "iqr": iqr, "med": med}
    for _ in range(3):
        h = proj(x)
        h, w = attn(h, h, h, attn_mask=causal, need_weights=True)
        base, distr = head.distribution(h, med, iqr)
        nll = -distr.log_prob(target)
        loss = (nll * observed[:, -12:]).sum() / observed[:, -12:].sum().clamp_min(1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res.setdefault("loss", []).append(loss.item())
    res["attn_w"] = w
    res["base_mean"], res["base_var"] = base.mean, base.variance
    res["entropy"] = base.entropy()
    res["cdf_like"] = torch.distributions.StudentT(torch.tensor(5.0)).log_prob(
        torch.tensor([-1.0, 0.0, 2.0]))
    res["lr"] = sched.get_last_lr()
    # the key bias gets a zero gradient (softmax is shift invariant): Adam turns its float32
    # noise into full steps, so the attention projections are compared by their gradients
    res["in_proj_grad"] = attn.in_proj_weight.grad
    res["params"] = [p for n, p in modules.named_parameters() if "in_proj" not in n]
    return res


def _quantile_loss(torch, pred, target, quantiles):
    """TimesFM-style pinball loss averaged over quantiles."""
    errors = target.unsqueeze(-1) - pred
    q = torch.tensor(quantiles).view(1, 1, -1)
    return torch.max((q - 1) * errors, q * errors).mean()


def timesfm_program(torch):
    """Patched input with a padding mask, residual MLP tokeniser, mean+quantile heads."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional
    patch, horizon, quantiles = 4, 4, [0.1, 0.5, 0.9]
    series = torch.from_numpy((rng.standard_normal((2, 24)) * 2 + 1).astype(np.float32))
    pad = torch.zeros(2, 24)
    pad[1, :5] = 1.0
    x = series.masked_fill(pad.bool(), 0.0)
    patches = x.unfold(dimension=-1, size=patch, step=patch)  # (B, N, P)
    pad_p = pad.unfold(-1, patch, patch)
    # TimesFM's _masked_mean_std over the first patch with observed values
    valid = 1 - pad_p
    num = (valid).sum(-1)
    first = torch.argmax((num > 0).to(torch.int32), dim=1)
    sel_p = patches[torch.arange(2), first]
    sel_v = valid[torch.arange(2), first]
    n = sel_v.sum(-1)
    mu = (sel_p * sel_v).sum(-1) / n
    var = ((sel_p - mu[:, None]) ** 2 * sel_v).sum(-1) / n
    sigma = torch.sqrt(torch.clamp(var, min=0.0))
    normed = (patches - mu[:, None, None]) / torch.where(sigma < 1e-6, 1.0, sigma)[:, None, None]
    normed = normed * valid
    tokeniser = nn.Sequential(nn.Linear(2 * patch, 16), nn.SiLU(), nn.Linear(16, 16))
    resid = nn.Linear(2 * patch, 16)
    pos = nn.Parameter(torch.zeros(1, patches.shape[1], 16))
    enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True,
                                     norm_first=True, activation="gelu")
    out = nn.Linear(16, horizon * (1 + len(quantiles)))
    mods = nn.ModuleList([tokeniser, resid, enc, out])
    fill_(torch, list(mods.parameters()) + [pos], rng, scale=0.2)
    opt = torch.optim.Adam(list(mods.parameters()) + [pos], lr=1e-2)
    target = torch.from_numpy(rng.standard_normal((2, horizon)).astype(np.float32))
    res = {"mu": mu, "sigma": sigma, "patches_shape": tuple(patches.shape),
           "stride": patches.stride(), "first": first}
    for _ in range(3):
        inp = torch.cat([normed, pad_p], dim=-1)
        h = tokeniser(inp) + resid(inp) + pos
        key_pad = pad_p.min(-1).values.bool()
        h = enc(h, src_key_padding_mask=key_pad)
        o = out(h[:, -1]).view(2, horizon, 1 + len(quantiles))
        o = o * sigma[:, None, None] + mu[:, None, None]
        mean_loss = F.mse_loss(o[..., 0], target)
        q_loss = _quantile_loss(torch, o[..., 1:], target, quantiles)
        loss = mean_loss + q_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("loss", []).append((mean_loss.item(), q_loss.item()))
    res["out"] = o
    res["pos_grad"] = pos.grad
    res["in_proj_grad"] = enc.self_attn.in_proj_weight.grad  # see lag_llama_program
    res["params"] = [p for n, p in mods.named_parameters() if "in_proj" not in n]
    return res


PROGRAMS = [chronos_program, lag_llama_program, timesfm_program]
TOLERANCES = {
    # attention softmax and layer norms over three Adam steps: float32 reduction order
    "timesfm_program": (1e-4, 1e-5),
    "lag_llama_program": (1e-4, 1e-5),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
