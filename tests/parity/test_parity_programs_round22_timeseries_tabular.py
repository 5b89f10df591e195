"""More time-series and tabular programs (see test_parity_programs_round22_timeseries.py), run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
Temporal Fusion Transformer pieces (GRN with GLU, variable selection by softmax and
einsum/bmm, interpretable attention with shared values, pinball loss), a tabular MLP
(RevIN-style running statistics, nan_to_num, bucketize/searchsorted binning, categorical
embeddings, bincount class weights in cross_entropy with label smoothing, OneCycleLR, early
stopping) and Autoformer/FEDformer pieces (series decomposition, FFT auto-correlation with
time-delay aggregation, complex Fourier weights trained by Adam, PatchTST patching). Then
what running them with float64 parameters found in the norms' CPU dtype checks."""

import math
import warnings

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results
from tests.parity.test_parity_programs_round22_timeseries import _name, _structure

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def tft_program(torch):
    """Temporal Fusion Transformer pieces: GLU gates, gated residual networks, variable selection
    (softmax over variables, einsum/bmm weighting), static enrichment, interpretable multi-head
    attention with shared values, quantile (pinball) loss."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2204)
    res = {}
    batch, enc_len, dec_len, n_vars, n_static, hidden, heads = 3, 8, 3, 4, 2, 8, 2
    quantiles = [0.1, 0.5, 0.9]
    T = enc_len + dec_len

    class GatedLinearUnit(nn.Module):
        def __init__(self, d_in, d_out, dropout=0.0):
            super().__init__()
            self.dropout = nn.Dropout(dropout) if dropout else None
            self.fc = nn.Linear(d_in, d_out * 2)

        def forward(self, x):
            if self.dropout is not None:
                x = self.dropout(x)
            return F.glu(self.fc(x), dim=-1)

    class AddNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.mask = nn.Parameter(torch.zeros(d))   # trainable skip gate
            self.gate = nn.Sigmoid()

        def forward(self, x, skip):
            return self.norm(x + skip * self.gate(self.mask) * 2.0)

    class GatedResidualNetwork(nn.Module):
        def __init__(self, d_in, d_hidden, d_out, context_size=None):
            super().__init__()
            self.resample = nn.Linear(d_in, d_out) if d_in != d_out else nn.Identity()
            self.fc1 = nn.Linear(d_in, d_hidden)
            self.elu = nn.ELU(alpha=1.0)
            self.context = (nn.Linear(context_size, d_hidden, bias=False)
                            if context_size else None)
            self.fc2 = nn.Linear(d_hidden, d_hidden)
            self.glu = GatedLinearUnit(d_hidden, d_out)
            self.add_norm = AddNorm(d_out)

        def forward(self, x, context=None):
            residual = self.resample(x)
            h = self.fc1(x)
            if context is not None:
                h = h + self.context(context)
            h = self.fc2(self.elu(h))
            return self.add_norm(self.glu(h), residual)

    class VariableSelectionNetwork(nn.Module):
        def __init__(self, n_inputs, d_hidden, context_size=None):
            super().__init__()
            self.prescalers = nn.ModuleDict({f"v{i}": nn.Linear(1, d_hidden)
                                             for i in range(n_inputs)})
            self.single = nn.ModuleList([GatedResidualNetwork(d_hidden, d_hidden, d_hidden)
                                         for _ in range(n_inputs)])
            self.flattened = GatedResidualNetwork(n_inputs * d_hidden, d_hidden, n_inputs,
                                                  context_size)
            self.softmax = nn.Softmax(dim=-1)

        def forward(self, x, context=None):
            embedded = [self.prescalers[f"v{i}"](x[..., i:i + 1]) for i in range(x.shape[-1])]
            flat = torch.cat(embedded, dim=-1)
            weights = self.softmax(self.flattened(flat, context)).unsqueeze(-2)
            transformed = torch.stack([grn(e) for grn, e in zip(self.single, embedded)], dim=-1)
            combined = (transformed * weights).sum(dim=-1)
            # the same weighting as an einsum and as a batched matmul
            alt = torch.einsum("...hv,...v->...h", transformed, weights.squeeze(-2))
            bt, bw = transformed.reshape(-1, hidden, x.shape[-1]), weights.reshape(-1, 1,
                                                                                   x.shape[-1])
            alt2 = torch.bmm(bt, bw.transpose(1, 2)).view_as(combined)
            return combined, weights.squeeze(-2), alt, alt2

    class InterpretableMultiHeadAttention(nn.Module):
        def __init__(self, n_head, d_model):
            super().__init__()
            self.d_k = self.d_q = self.d_v = d_model // n_head
            self.v_layer = nn.Linear(d_model, self.d_v)          # shared across heads
            self.q_layers = nn.ModuleList([nn.Linear(d_model, self.d_q) for _ in range(n_head)])
            self.k_layers = nn.ModuleList([nn.Linear(d_model, self.d_k) for _ in range(n_head)])
            self.w_h = nn.Linear(self.d_v, d_model, bias=False)

        def forward(self, q, k, v, mask=None):
            heads, attns = [], []
            vs = self.v_layer(v)
            for q_layer, k_layer in zip(self.q_layers, self.k_layers):
                scores = torch.bmm(q_layer(q), k_layer(k).permute(0, 2, 1))
                scores = scores / torch.sqrt(torch.tensor(self.d_k, dtype=scores.dtype))
                if mask is not None:
                    scores = scores.masked_fill(mask, -1e9)
                attn = F.softmax(scores, dim=2)
                heads.append(torch.bmm(attn, vs))
                attns.append(attn)
            head = torch.stack(heads, dim=2) if len(heads) > 1 else heads[0]
            attn = torch.stack(attns, dim=2)
            outputs = torch.mean(head, dim=2) if len(heads) > 1 else head
            return self.w_h(outputs), attn

    class TFT(nn.Module):
        def __init__(self):
            super().__init__()
            self.static_vsn = VariableSelectionNetwork(n_static, hidden)
            self.static_context = GatedResidualNetwork(hidden, hidden, hidden)
            self.enc_vsn = VariableSelectionNetwork(n_vars, hidden, hidden)
            self.dec_vsn = VariableSelectionNetwork(n_vars - 1, hidden, hidden)
            self.lstm_enc = nn.LSTM(hidden, hidden, batch_first=True)
            self.lstm_dec = nn.LSTM(hidden, hidden, batch_first=True)
            self.post_lstm_gate = GatedLinearUnit(hidden, hidden)
            self.post_lstm_norm = nn.LayerNorm(hidden)
            self.enrichment = GatedResidualNetwork(hidden, hidden, hidden, hidden)
            self.attention = InterpretableMultiHeadAttention(heads, hidden)
            self.post_attn = GatedLinearUnit(hidden, hidden)
            self.post_attn_norm = nn.LayerNorm(hidden)
            self.output = nn.Linear(hidden, len(quantiles))

        def forward(self, static, enc, dec):
            s, s_weights, _, _ = self.static_vsn(static)
            ctx = self.static_context(s)
            ctx_t = ctx.unsqueeze(1)
            e, e_weights, e_alt, e_alt2 = self.enc_vsn(enc, ctx_t.expand(-1, enc_len, -1))
            d, _, _, _ = self.dec_vsn(dec, ctx_t.expand(-1, dec_len, -1))
            h0 = ctx.unsqueeze(0)
            enc_out, (hn, cn) = self.lstm_enc(e, (h0, torch.zeros_like(h0)))
            dec_out, _ = self.lstm_dec(d, (hn, cn))
            lstm_out = torch.cat([enc_out, dec_out], dim=1)
            skip = torch.cat([e, d], dim=1)
            temporal = self.post_lstm_norm(self.post_lstm_gate(lstm_out) + skip)
            enriched = self.enrichment(temporal, ctx_t.expand(-1, T, -1))
            causal = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
            mask = causal[-dec_len:].unsqueeze(0).expand(enriched.size(0), -1, -1)
            attn_out, attn = self.attention(enriched[:, -dec_len:], enriched, enriched, mask)
            out = self.post_attn_norm(self.post_attn(attn_out) + enriched[:, -dec_len:])
            return self.output(out), dict(static=s_weights, enc=e_weights, attn=attn,
                                          alt=(e_alt, e_alt2, e))

    def quantile_loss(pred, target, qs):
        losses = []
        for i, q in enumerate(qs):
            errors = target - pred[..., i]
            losses.append(torch.max((q - 1) * errors, q * errors).unsqueeze(-1))
        return torch.mean(torch.sum(torch.cat(losses, dim=-1), dim=-1))

    def pinball(pred, target, qs):
        q = torch.tensor(qs).view(1, 1, -1)
        err = target.unsqueeze(-1) - pred
        return torch.maximum(q * err, (q - 1) * err).sum(-1).mean()

    model = TFT()
    res["repr"] = _structure(model)
    fill_(torch, model, rng, 0.25)
    static = normal(torch, rng, batch, n_static)
    enc = normal(torch, rng, batch, enc_len, n_vars)
    dec = normal(torch, rng, batch, dec_len, n_vars - 1)
    target = normal(torch, rng, batch, dec_len)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    res["loss"], res["pinball"], res["grad_norm"] = [], [], []
    for _ in range(3):
        pred, info = model(static, enc, dec)
        loss = quantile_loss(pred, target, quantiles)
        opt.zero_grad()
        loss.backward()
        res["grad_norm"].append(nn.utils.clip_grad_norm_(model.parameters(), 0.1,
                                                         norm_type=2.0).item())
        opt.step()
        res["loss"].append(loss.item())
        res["pinball"].append(pinball(pred, target, quantiles).item())
    res["pred"] = pred
    res["static_weights"] = info["static"]
    res["enc_weights"] = info["enc"]
    res["attn"] = info["attn"]
    res["vsn_forms"] = list(info["alt"])
    # interpretability summaries as pytorch-forecasting reports them
    res["attn_by_lag"] = info["attn"].mean(dim=(0, 2)).sum(0)
    res["var_importance"] = info["enc"].sum(dim=(0, 1)) / info["enc"].sum()
    res["median_rank"] = torch.argsort(pred[..., 1], dim=-1, descending=True)
    res["crossing"] = (pred.diff(dim=-1) < 0).sum()
    res["glu_grad"] = model.post_attn.fc.weight.grad
    res["meta"] = [str(tuple(info["attn"].shape)), _name(res["crossing"].dtype)]
    return res


def tabular_program(torch):
    """Tabular preprocessing + MLP: RevIN-style instance norm with running statistics,
    nan_to_num, bucketize/searchsorted binning, categorical embeddings, class weights from
    bincount in cross_entropy(weight=, label_smoothing=), OneCycleLR, early stopping."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2205)
    res = {}
    n, n_num, cards, n_classes = 48, 4, (5, 3), 3

    numeric = (rng.standard_normal((n, n_num)) * [1.0, 10.0, 0.1, 3.0]).astype(np.float32)
    numeric[rng.random((n, n_num)) < 0.08] = np.nan
    numeric[3, 1], numeric[7, 2] = np.inf, -np.inf
    cats = np.stack([rng.integers(0, c, n) for c in cards], 1).astype(np.int64)
    labels = rng.choice(n_classes, n, p=[0.6, 0.3, 0.1]).astype(np.int64)
    x_num, x_cat, y = torch.from_numpy(numeric), torch.from_numpy(cats), torch.from_numpy(labels)

    # cleaning: NaN -> column mean of the finite values, +-inf clipped
    finite = torch.isfinite(x_num)
    col_mean = torch.where(finite, x_num, torch.zeros_like(x_num)).sum(0) / finite.sum(0)
    res["nan_to_num_default"] = torch.nan_to_num(x_num[:8]).clamp(-1e30, 1e30)
    res["nan_to_num_f16"] = torch.nan_to_num(x_num[:8].half(), nan=0.5, neginf=-7.0)
    x_clean = torch.nan_to_num(x_num, nan=0.0, posinf=5.0, neginf=-5.0)
    x_clean = torch.where(torch.isnan(x_num), col_mean.expand_as(x_num), x_clean)
    res["col_mean"] = col_mean

    # KNN imputation (sklearn's nan-euclidean distance over the features both rows observe)
    observed = (~torch.isnan(x_num)).float()
    zeroed = torch.nan_to_num(x_num, nan=0.0, posinf=0.0, neginf=0.0) / col_mean.abs().clamp(
        min=1.0)
    sq = torch.cdist(zeroed * observed, zeroed * observed).pow(2)
    both = observed @ observed.T
    dist = torch.sqrt(sq * n_num / both.clamp(min=1))
    dist.fill_diagonal_(float("inf"))
    near_d, near_i = torch.topk(dist, 3, dim=1, largest=False)
    neighbour_vals = x_num[near_i]                                  # (n, 3, n_num)
    knn_fill = torch.nanmean(neighbour_vals.masked_fill(~torch.isfinite(neighbour_vals),
                                                        float("nan")), dim=1)
    res["knn"] = [near_d, near_i, torch.where(torch.isnan(x_num), knn_fill, x_num)[:12]]

    # quantile transform to a normal: empirical CDF by searchsorted, lerp, then ndtri
    refs = torch.linspace(0, 1, 11)
    ref_q = torch.quantile(x_clean, refs, dim=0).T.contiguous()    # (n_num, 11)
    pos = torch.searchsorted(ref_q, x_clean.T.contiguous()).clamp(1, 10)
    lo, hi = torch.gather(ref_q, 1, pos - 1), torch.gather(ref_q, 1, pos)
    frac = ((x_clean.T - lo) / (hi - lo).clamp(min=1e-12)).clamp(0, 1)
    uniform = torch.lerp(refs[pos - 1], refs[pos], frac).clamp(1e-3, 1 - 1e-3)
    res["quantile_transform"] = [uniform, torch.special.ndtri(uniform),
                                 torch.erfinv(2 * uniform - 1) * math.sqrt(2)]

    # binning: quantile edges from the training split, bucketize and searchsorted variants
    train_idx, val_idx = torch.arange(0, 36), torch.arange(36, n)
    edges = torch.quantile(x_clean[train_idx, 0], torch.tensor([0.25, 0.5, 0.75]))
    bins = torch.bucketize(x_clean[:, 0].contiguous(), edges)
    bins_right = torch.bucketize(x_clean[:, 0], edges, right=True, out_int32=True)
    edge_rows = edges.unsqueeze(0).repeat(n_num, 1).contiguous()
    ss_left = torch.searchsorted(edge_rows, x_clean.T.contiguous())
    ss_right = torch.searchsorted(edge_rows, x_clean.T.contiguous(), side="right",
                                  out_int32=True)
    unsorted = torch.tensor([0.75, -0.5, 0.25, 0.0])
    sorter = torch.argsort(unsorted)
    ss_sorter = torch.searchsorted(unsorted, torch.tensor([-1.0, 0.1, 0.5, 2.0]),
                                   sorter=sorter)
    res["bins"] = [bins, bins_right, ss_left, ss_right, ss_sorter]
    res["bin_meta"] = [_name(bins.dtype), _name(bins_right.dtype), _name(ss_left.dtype),
                       _name(ss_right.dtype), str(bool(torch.equal(bins_right.long(),
                                                                   ss_right[0].long())))]
    res["scalar_bucket"] = torch.bucketize(0.3, edges)

    class RevIN(nn.Module):
        """Standardisation with running statistics (train: batch stats; eval: running)."""

        def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True):
            super().__init__()
            self.eps, self.momentum = eps, momentum
            self.register_buffer("running_mean", torch.zeros(num_features))
            self.register_buffer("running_var", torch.ones(num_features))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
            if affine:
                self.affine_weight = nn.Parameter(torch.ones(num_features))
                self.affine_bias = nn.Parameter(torch.zeros(num_features))

        def forward(self, x, mode="norm"):
            if mode == "norm":
                if self.training:
                    mean = x.mean(0)
                    var = x.var(0, unbiased=False)
                    with torch.no_grad():
                        self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                        unbiased = var * x.shape[0] / (x.shape[0] - 1)
                        self.running_var.lerp_(unbiased, self.momentum)
                        self.num_batches_tracked += 1
                else:
                    mean, var = self.running_mean, self.running_var
                self._mean, self._std = mean.detach(), torch.sqrt(var + self.eps).detach()
                return (x - mean) / torch.sqrt(var + self.eps) * self.affine_weight \
                    + self.affine_bias
            x = (x - self.affine_bias) / (self.affine_weight + self.eps * self.eps)
            return x * self._std + self._mean

    class TabularMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = RevIN(n_num)
            self.embeds = nn.ModuleList([nn.Embedding(c + 1, min(50, (c + 1) // 2), padding_idx=0)
                                         for c in cards])
            self.bin_embed = nn.Embedding(4, 2, scale_grad_by_freq=True)
            width = n_num + sum(e.embedding_dim for e in self.embeds) + 2
            # BatchNorm after the activation: straight after a Linear it would cancel that
            # Linear's bias (and RevIN's), whose rounding-noise gradients AdamW amplifies
            self.mlp = nn.Sequential(nn.Linear(width, 16), nn.SiLU(), nn.BatchNorm1d(16),
                                     nn.Dropout(0.0), nn.Linear(16, n_classes))

        def forward(self, num, cat, bins):
            emb = [e(cat[:, i] + 1) for i, e in enumerate(self.embeds)]
            h = torch.cat([self.norm(num)] + emb + [self.bin_embed(bins)], dim=1)
            return self.mlp(h)

    model = TabularMLP()
    res["repr"] = _structure(model)
    fill_(torch, model, rng, 0.3)
    counts = torch.bincount(y[train_idx], minlength=n_classes)
    weights = counts.sum() / (n_classes * counts.float())
    res["counts"] = counts
    res["class_weights"] = weights
    sample_w = weights[y[train_idx]]
    res["weighted_bincount"] = torch.bincount(y[train_idx], weights=sample_w)
    criterion = nn.CrossEntropyLoss(weight=weights, label_smoothing=0.1)
    epochs, batch_size = 6, 12
    steps_per_epoch = math.ceil(len(train_idx) / batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=5e-2, epochs=epochs,
                                                steps_per_epoch=steps_per_epoch,
                                                pct_start=0.3, anneal_strategy="cos",
                                                div_factor=10.0, final_div_factor=100.0)
    perm = torch.from_numpy(np.stack([rng.permutation(36) for _ in range(epochs)]))
    best, best_state, patience, bad = float("inf"), None, 2, 0
    res["train_loss"], res["val_loss"], res["lr"], res["momentum"] = [], [], [], []
    stopped_at = epochs
    for epoch in range(epochs):
        model.train()
        for chunk in perm[epoch].split(batch_size):
            idx = train_idx[chunk]
            logits = model(x_clean[idx], x_cat[idx], bins[idx])
            loss = criterion(logits, y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            res["train_loss"].append(loss.item())
            res["lr"].append(sched.get_last_lr()[0])
            res["momentum"].append(opt.param_groups[0]["betas"][0])
        model.eval()
        with torch.inference_mode():
            val_logits = model(x_clean[val_idx], x_cat[val_idx], bins[val_idx])
            val_loss = F.cross_entropy(val_logits, y[val_idx], weight=weights,
                                       label_smoothing=0.1).item()
        res["val_loss"].append(val_loss)
        if val_loss < best - 1e-4:
            best, bad = val_loss, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
            if bad >= patience:
                stopped_at = epoch
                break
    model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        logits = model(x_clean, x_cat, bins)
        probs = logits.softmax(-1)
        pred = probs.argmax(-1)
        restored = model.norm(model.norm(x_clean), mode="denorm")
    res["stopped_at"] = [stopped_at]
    res["probs"] = probs
    res["restored"] = restored
    res["running"] = [model.norm.running_mean, model.norm.running_var,
                      model.mlp[2].running_mean]
    res["tracked"] = [int(model.norm.num_batches_tracked), int(model.mlp[2].num_batches_tracked)]
    confusion = torch.zeros(n_classes, n_classes, dtype=torch.long)
    confusion.index_put_((y, pred), torch.ones_like(y), accumulate=True)
    res["confusion"] = confusion
    res["balanced_acc"] = (confusion.diag() / confusion.sum(1).clamp(min=1)).mean()
    res["ce_variants"] = [
        F.cross_entropy(logits, y, reduction="none", label_smoothing=0.2),
        F.cross_entropy(logits, y, weight=weights, reduction="sum", label_smoothing=0.2),
        F.cross_entropy(logits, F.one_hot(y, n_classes).float(), weight=weights,
                        label_smoothing=0.2),
        F.cross_entropy(logits, y, weight=weights, ignore_index=2, label_smoothing=0.3),
    ]
    res["padding_rows"] = [e.weight[0] for e in model.embeds]
    return res


def autoformer_program(torch):
    """Autoformer/FEDformer pieces: moving-average series decomposition with replicated ends,
    FFT auto-correlation with time-delay aggregation (topk lags, roll and gather over a doubled
    series), a Fourier block with complex weights trained by Adam, PatchTST-style patching."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2206)
    res = {}
    batch, length, channels, d_model, heads, modes = 2, 12, 2, 8, 2, 3

    class MovingAvg(nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            self.kernel_size = kernel_size
            self.avg = nn.AvgPool1d(kernel_size=kernel_size, stride=1, padding=0)

        def forward(self, x):
            front = x[:, 0:1, :].repeat(1, (self.kernel_size - 1) // 2, 1)
            end = x[:, -1:, :].repeat(1, (self.kernel_size - 1) // 2, 1)
            x = torch.cat([front, x, end], dim=1)
            return self.avg(x.permute(0, 2, 1)).permute(0, 2, 1)

    class SeriesDecomp(nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            self.moving_avg = MovingAvg(kernel_size)

        def forward(self, x):
            trend = self.moving_avg(x)
            return x - trend, trend

    class AutoCorrelation(nn.Module):
        def __init__(self, factor=1):
            super().__init__()
            self.factor = factor

        def time_delay_agg_training(self, values, corr):
            head, channel, length = values.shape[1], values.shape[2], values.shape[3]
            top_k = int(self.factor * math.log(length))
            mean_value = torch.mean(torch.mean(corr, dim=1), dim=1)
            index = torch.topk(torch.mean(mean_value, dim=0), top_k, dim=-1)[1]
            weights = torch.stack([mean_value[:, index[i]] for i in range(top_k)], dim=-1)
            tmp_corr = torch.softmax(weights, dim=-1)
            delays_agg = torch.zeros_like(values).float()
            for i in range(top_k):
                pattern = torch.roll(values, -int(index[i]), -1)
                delays_agg = delays_agg + pattern * (
                    tmp_corr[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(1)
                    .repeat(1, head, channel, length))
            return delays_agg

        def time_delay_agg_inference(self, values, corr):
            b, head, channel, length = values.shape
            init_index = torch.arange(length).unsqueeze(0).unsqueeze(0).unsqueeze(0) \
                .repeat(b, head, channel, 1)
            top_k = int(self.factor * math.log(length))
            mean_value = torch.mean(torch.mean(corr, dim=1), dim=1)
            weights, delay = torch.topk(mean_value, top_k, dim=-1)
            tmp_corr = torch.softmax(weights, dim=-1)
            tmp_values = values.repeat(1, 1, 1, 2)
            delays_agg = torch.zeros_like(values).float()
            for i in range(top_k):
                tmp_delay = init_index + delay[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(1) \
                    .repeat(1, head, channel, length)
                pattern = torch.gather(tmp_values, dim=-1, index=tmp_delay)
                delays_agg = delays_agg + pattern * (
                    tmp_corr[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(1)
                    .repeat(1, head, channel, length))
            return delays_agg

        def forward(self, queries, keys, values):
            q_fft = torch.fft.rfft(queries.permute(0, 2, 3, 1).contiguous(), dim=-1)
            k_fft = torch.fft.rfft(keys.permute(0, 2, 3, 1).contiguous(), dim=-1)
            res_ = q_fft * torch.conj(k_fft)
            corr = torch.fft.irfft(res_, n=queries.shape[1], dim=-1)
            v = values.permute(0, 2, 3, 1).contiguous()
            if self.training:
                out = self.time_delay_agg_training(v, corr)
            else:
                out = self.time_delay_agg_inference(v, corr)
            return out.permute(0, 3, 1, 2), corr.permute(0, 3, 1, 2)

    class FourierBlock(nn.Module):
        def __init__(self, in_channels, out_channels, modes):
            super().__init__()
            self.index = list(range(modes))
            self.scale = 1 / (in_channels * out_channels)
            self.weights1 = nn.Parameter(self.scale * torch.ones(
                heads, in_channels // heads, out_channels // heads, len(self.index),
                dtype=torch.cfloat))

        def forward(self, q):
            B, L, H, E = q.shape
            x = q.permute(0, 2, 3, 1)
            x_ft = torch.fft.rfft(x, dim=-1)
            out_ft = torch.zeros(B, H, E, L // 2 + 1, device=x.device, dtype=torch.cfloat)
            for wi, i in enumerate(self.index):
                out_ft[:, :, :, wi] = torch.einsum("bhi,hio->bho", x_ft[:, :, :, i],
                                                    self.weights1[:, :, :, wi])
            return torch.fft.irfft(out_ft, n=x.size(-1))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.decomp = SeriesDecomp(5)
            self.embed = nn.Linear(channels, d_model)
            self.q = nn.Linear(d_model, d_model)
            self.k = nn.Linear(d_model, d_model)
            self.v = nn.Linear(d_model, d_model)
            self.corr = AutoCorrelation()
            self.fourier = FourierBlock(d_model, d_model, modes)
            self.trend_proj = nn.Conv1d(channels, channels, 3, padding=1,
                                        padding_mode="circular", bias=False)
            self.out = nn.Linear(2 * d_model, channels)

        def forward(self, x):
            seasonal, trend = self.decomp(x)
            h = self.embed(seasonal)
            B, L, _ = h.shape
            q = self.q(h).view(B, L, heads, -1)
            k = self.k(h).view(B, L, heads, -1)
            v = self.v(h).view(B, L, heads, -1)
            agg, corr = self.corr(q, k, v)
            four = self.fourier(q).permute(0, 3, 1, 2)
            feats = torch.cat([agg.reshape(B, L, -1), four.reshape(B, L, -1)], dim=-1)
            trend_out = self.trend_proj(trend.permute(0, 2, 1)).permute(0, 2, 1)
            return self.out(feats) + trend_out, corr

    model = Model()
    fill_(torch, [p for p in model.parameters() if not p.is_complex()], rng, 0.3)
    with torch.no_grad():
        w = rng.standard_normal((2,) + tuple(model.fourier.weights1.shape)).astype(np.float32)
        model.fourier.weights1.copy_(torch.complex(torch.from_numpy(w[0]),
                                                   torch.from_numpy(w[1])) * 0.1)
    t = np.arange(length + 4, dtype=np.float32)
    base = np.stack([np.sin(2 * np.pi * t / 4), np.cos(2 * np.pi * t / 6)], -1)
    series = torch.from_numpy((base[None] + 0.1 * rng.standard_normal(
        (batch, length + 4, channels))).astype(np.float32))
    x, y = series[:, :length], series[:, 4:]
    # the key bias shifts every lag's correlation alike, which the softmax over lags cancels:
    # its gradient is rounding noise that Adam's default eps would turn into +-lr steps
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-6)
    res["loss"] = []
    for _ in range(3):
        model.train()
        pred, corr = model(x)
        loss = F.l1_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["complex_grad"] = torch.view_as_real(model.fourier.weights1.grad)
    res["complex_weights"] = torch.view_as_real(model.fourier.weights1.detach())
    res["adam_state"] = torch.view_as_real(opt.state[model.fourier.weights1]["exp_avg_sq"])
    res["corr"] = corr
    model.eval()
    with torch.no_grad():
        res["eval_pred"] = model(x)[0]
    seasonal, trend = model.decomp(x)
    res["decomp"] = [seasonal, trend]
    # PatchTST-style patching of the series: replicate-pad the end, then unfold into patches
    patches = nn.ReplicationPad1d((0, 2))(x.permute(0, 2, 1)).unfold(dimension=-1, size=4,
                                                                     step=2)
    res["patches"] = nn.Flatten(start_dim=-2)(patches)
    res["meta"] = [str(tuple(patches.shape)), _name(model.fourier.weights1.dtype),
                   _name(model.fourier.weights1.grad.dtype), _name(corr.dtype),
                   str(sorted(opt.state[model.fourier.weights1].keys()))]
    return res


PROGRAMS = [tft_program, tabular_program, autoformer_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)


# --- what the programs found ----------------------------------------------------------------
# (run under set_default_dtype(float64), the programs' float32 data met float64 parameters:
# the norms' CPU dtype checks answered in other words than PyTorch's)

_F32, _F64, _BF16, _F16 = "float32", "float64", "bfloat16", "float16"


def _norm_call(lib, kind, x_dtype, weight, bias, running_mean, running_var):
    F = lib.nn.functional

    def vec(dtype, value):
        return None if dtype is None else lib.full((3,), value, dtype=getattr(lib, dtype))
    x = (lib.arange(24.0).reshape(2, 3, 4) / 7).to(getattr(lib, x_dtype))
    w, b = vec(weight, 1.5), vec(bias, 0.25)
    rm, rv = vec(running_mean, 0.1234567), vec(running_var, 1.7654321)
    if kind == "layer_norm":
        return F.layer_norm(x.transpose(1, 2), (3,), w, b)
    if kind == "group_norm":
        return F.group_norm(x, 1, w, b)
    if kind == "instance_norm":
        return F.instance_norm(x, rm, rv, w, b, use_input_stats=True), rm, rv
    if kind == "update_stats":
        return lib.batch_norm_update_stats(x, rm, rv, 0.1), rm, rv
    return F.batch_norm(x, rm, rv, w, b, training=kind == "batch_norm_train"), rm, rv


@pytest.mark.parametrize("case", [
    # (kind, input, weight, bias, running_mean, running_var)
    ("layer_norm", _F32, _F64, _F32, None, None),        # first parameter not the input's
    ("layer_norm", _F32, _F32, _F64, None, None),        # first is: the odd one is named
    ("layer_norm", _F64, _F32, _F32, None, None),        # all float32 for a float64 input
    ("layer_norm", _F64, None, _F32, None, None),
    ("layer_norm", _F16, _F32, _F16, None, None),        # float32 and half parameters mixed
    ("layer_norm", _BF16, _F32, _F32, None, None),       # float32 ones serve a 16-bit input
    ("layer_norm", _BF16, _BF16, _F32, None, None),
    ("group_norm", _F32, None, _BF16, None, None),
    ("group_norm", _F16, _F16, _F64, None, None),
    ("batch_norm_train", _F32, _F32, _F64, _F32, _BF16),   # training reads the stats first
    ("batch_norm_eval", _F32, _F32, _F64, _F32, _BF16),    # evaluation reads the bias first
    ("batch_norm_train", _F32, None, _F64, _F32, _F32),
    ("batch_norm_eval", _F64, None, None, _F32, _F32),
    ("batch_norm_eval", _BF16, None, None, _F32, _BF16),
    ("update_stats", _F32, None, None, _F32, _F16),
    ("update_stats", _F32, None, None, _F16, None),
    ("update_stats", _BF16, None, None, _F32, _F32),
    ("instance_norm", _F64, _F32, _F32, _BF16, _F64),    # stats taken in the weight's dtype
    ("instance_norm", _F64, _F64, _F32, _BF16, _BF16),
    ("instance_norm", _F32, None, None, _F32, _F64),     # running_var alone is not converted
    ("instance_norm", _F32, None, None, _F64, _F16),
], ids=lambda case: "-".join(str(part) for part in case))
def test_norm_parameter_dtypes_are_checked_like_torch(case):
    def run(lib):
        answer = _answer(_norm_call, lib, *case)
        return answer if isinstance(answer[0], str) else _values(answer)
    ours, theirs = run(ember), run(torch)
    if isinstance(theirs[0], str):
        assert ours == theirs
    else:
        for got, want in zip(ours, theirs):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _answer(fn, *args):
    """(error type name, message with PyTorch's names as ember's), or the result."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)
    except Exception as error:      # noqa: BLE001 (the error is the answer compared)
        return type(error).__name__, str(error).split("\n")[0].replace("torch.", "ember.")


def _values(result):
    """A norm's output (and running statistics) as float64 arrays."""
    if not isinstance(result, tuple):
        result = (result,)
    flat = []
    for r in result:
        flat.extend(_values(r) if isinstance(r, tuple) else
                    [None if r is None else r.detach().double().numpy()])
    return [v for v in flat if v is not None]


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 3), lib.zeros(3), None, training=True),
    lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 3), None, lib.ones(3), training=True),
    lambda lib: lib.native_batch_norm(lib.ones(2, 3), None, None, lib.zeros(3), None, True, 0.1,
                                      1e-5),
    lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 3), lib.zeros(4), None, training=True),
    lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 3, dtype=lib.int64), lib.zeros(3),
                                             None, training=True),
    lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 3), lib.zeros(3), None),
    lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 3), None, lib.ones(3)),
    lambda lib: lib.nn.functional.instance_norm(lib.ones(2, 3, 4), lib.zeros(3), None),
    lambda lib: lib.nn.functional.instance_norm(lib.ones(2, 3, 4), lib.zeros(3), None,
                                                use_input_stats=False),
    lambda lib: lib.nn.functional.instance_norm(lib.ones(2, 3, 4), None, None,
                                                use_input_stats=False),
], ids=["train-mean-only", "train-var-only", "native", "size-first", "before-dtype",
        "eval-mean-only", "eval-var-only", "instance-train", "instance-eval",
        "instance-eval-none"])
def test_batch_norm_with_one_running_statistic_fails_like_torch(call):
    def run(lib):
        answer = _answer(call, lib)
        return answer if isinstance(answer[0], str) else "returned"
    assert run(ember) == run(torch)


@pytest.mark.parametrize("momentum", [0.1, 0.3, None])
def test_float16_running_statistics_are_updated_like_torch(momentum):
    # PyTorch blends half running statistics in float32 and rounds once (exactly, here)
    data = np.random.default_rng(0).standard_normal((6, 5, 7)).astype(np.float32) * 3 + 1

    def run(lib):
        bn = lib.nn.BatchNorm1d(5, momentum=momentum).half()
        for _ in range(3):
            bn(lib.from_numpy(data).half())
        return bn.running_mean.float().numpy(), bn.running_var.float().numpy()
    for got, want in zip(run(ember), run(torch)):
        np.testing.assert_array_equal(got, want)


def test_instance_norm_takes_other_statistics_in_the_inputs_dtype_like_torch():
    # a bfloat16 input with float32 statistics (no weight): normalized with the statistics
    # rounded to bfloat16, as PyTorch does
    def run(lib):
        x = lib.tensor([[[1.0, 2.0, 3.0, 4.0]]]).to(lib.bfloat16)
        out = lib.nn.functional.instance_norm(x, lib.tensor([1.001]), lib.tensor([1.003]),
                                              use_input_stats=False)
        return out.float().numpy()
    np.testing.assert_array_equal(run(ember), run(torch))
