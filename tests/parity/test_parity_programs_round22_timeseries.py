"""Time-series forecasting programs, written as forecasting repositories write them, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: DeepAR
(lag windows by unfold/as_strided, StudentT and NegativeBinomial likelihoods, ancestral
sampling, quantile/nanquantile forecasts), N-BEATS (polynomial and Fourier bases, backcast
residuals, sMAPE/MASE with safe division, shared blocks) and an Informer-style transformer
(ProbSparse query selection, distilling conv + max-pool, time-feature embeddings, masked MSE).
The Temporal Fusion Transformer, Autoformer and tabular programs are in
test_parity_programs_round22_timeseries_tabular.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _structure(model):
    """The model's repr, then every submodule's name and class (shared ones repeated)."""
    return [repr(model)] + [f"{name}:{type(mod).__name__}"
                            for name, mod in model.named_modules(remove_duplicate=False)]


def _series(rng, batch, length, period=7):
    """Positive seasonal count-like series with a trend, float32, shape (batch, length)."""
    t = np.arange(length, dtype=np.float64)
    level = rng.uniform(5.0, 20.0, (batch, 1))
    season = 3.0 * np.sin(2 * np.pi * t / period)[None]
    trend = rng.uniform(-0.05, 0.1, (batch, 1)) * t[None]
    noise = rng.standard_normal((batch, length))
    return np.maximum(level + season + trend + noise, 0.1).astype(np.float32)


def deepar_program(torch):
    """LSTM over lag windows, StudentT and NegativeBinomial likelihoods, ancestral sampling,
    forecast quantiles with NaN gaps."""
    nn, F, D = torch.nn, torch.nn.functional, torch.distributions
    rng = np.random.default_rng(2201)
    res = {}
    batch, length, context, horizon, lags = 3, 24, 16, 4, (1, 2, 7)
    raw = torch.from_numpy(_series(rng, batch, length))
    max_lag = max(lags)

    # lag features: a sliding window of the last max_lag values per step, picked by lag index
    windows = raw.unfold(1, max_lag + 1, 1)                       # (B, L - max_lag, max_lag + 1)
    lag_idx = torch.tensor([max_lag - lag for lag in lags])
    lagged = windows.index_select(2, lag_idx)                      # (B, T, len(lags))
    strided = raw.as_strided((batch, length - max_lag, max_lag + 1), (length, 1, 1))
    res["unfold_is_view"] = [windows._base is not None if hasattr(windows, "_base") else True,
                             bool(torch.equal(windows, strided))]
    res["unfold_stride"] = list(windows.stride()) + list(strided.stride())
    target = raw[:, max_lag:]                                      # (B, T)
    scale = 1.0 + target[:, :context - max_lag].abs().mean(dim=1, keepdim=True)
    age = torch.log1p(torch.arange(target.shape[1], dtype=torch.float32)).expand(batch, -1)
    features = torch.cat([lagged / scale.unsqueeze(-1), age.unsqueeze(-1)], dim=-1)

    class DeepAR(nn.Module):
        def __init__(self, n_in, hidden):
            super().__init__()
            self.rnn = nn.LSTM(n_in, hidden, num_layers=2, batch_first=True, dropout=0.0)
            self.df = nn.Linear(hidden, 1)
            self.loc = nn.Linear(hidden, 1)
            self.scale = nn.Linear(hidden, 1)
            self.nb_mu = nn.Linear(hidden, 1)
            self.nb_alpha = nn.Linear(hidden, 1)

        def forward(self, x, state=None):
            out, state = self.rnn(x, state)
            df = 2.0 + F.softplus(self.df(out)).squeeze(-1)
            loc = self.loc(out).squeeze(-1)
            sc = F.softplus(self.scale(out)).squeeze(-1) + 1e-3
            mu = F.softplus(self.nb_mu(out)).squeeze(-1)
            alpha = F.softplus(self.nb_alpha(out)).squeeze(-1) + 1e-3
            return (df, loc, sc), (mu, alpha), state

    model = DeepAR(features.shape[-1], 8)
    res["repr"] = _structure(model)
    fill_(torch, model, rng, 0.2)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    steps_in = context - max_lag
    res["loss_t"], res["loss_nb"], res["grad_norm"] = [], [], []
    counts = torch.round(target)
    for _ in range(3):
        (df, loc, sc), (mu, alpha), _ = model(features[:, :steps_in])
        y = target[:, :steps_in] / scale
        student = D.StudentT(df, loc, sc)
        nll_t = -student.log_prob(y).mean()
        # gluonts' parameterisation: total_count = 1/alpha, logits = log(mu * alpha)
        total_count = 1.0 / alpha
        logits = torch.log(mu * scale * alpha)
        negbin = D.NegativeBinomial(total_count=total_count, logits=logits)
        nll_nb = -negbin.log_prob(counts[:, :steps_in]).mean()
        loss = nll_t + 0.1 * nll_nb
        opt.zero_grad()
        loss.backward()
        res["grad_norm"].append(nn.utils.clip_grad_norm_(model.parameters(), 10.0).item())
        opt.step()
        res["loss_t"].append(nll_t.item())
        res["loss_nb"].append(nll_nb.item())
    res["nb_mean"] = negbin.mean[:, :4]
    res["nb_var"] = negbin.variance[:, :4]
    res["t_var"] = student.variance[:, :4]
    res["t_entropy"] = student.entropy()[:, :4]

    # ancestral sampling: noise from NumPy so both frameworks follow the same paths
    n_paths = 5
    model.eval()
    with torch.no_grad():
        _, _, state = model(features[:, :steps_in])
        state = tuple(s.repeat_interleave(n_paths, dim=1) for s in state)
        history = target.repeat_interleave(n_paths, dim=0)     # (B * S, T)
        sc_rep = scale.repeat_interleave(n_paths, dim=0)
        eps = torch.from_numpy(rng.standard_normal((horizon, batch * n_paths)).astype(np.float32))
        chi = torch.from_numpy(rng.chisquare(5.0, (horizon, batch * n_paths)).astype(np.float32))
        paths = []
        for h in range(horizon):
            pos = steps_in + h
            last = torch.stack([history[:, pos - lag] for lag in lags], dim=-1) / sc_rep
            step_age = torch.log1p(torch.full((batch * n_paths, 1), float(pos)))
            x = torch.cat([last, step_age], dim=-1).unsqueeze(1)
            (df, loc, sc), _, state = model(x, state)
            draw = loc + sc * (eps[h] / torch.sqrt(chi[h] / 5.0)).unsqueeze(-1)
            value = draw.squeeze(-1) * sc_rep.squeeze(-1)
            history = history.clone()
            history[:, pos] = value
            paths.append(value)
        samples = torch.stack(paths, dim=-1).view(batch, n_paths, horizon)
    res["samples"] = samples
    levels = torch.tensor([0.1, 0.5, 0.9])
    res["q_linear"] = torch.quantile(samples, levels, dim=1)
    for how in ("lower", "higher", "nearest", "midpoint"):
        res["q_" + how] = samples.quantile(0.25, dim=1, keepdim=True, interpolation=how)
    gappy = target.clone()
    gappy[0, 3:6] = float("nan")
    gappy[2, ::4] = float("nan")
    res["nanquantile"] = torch.nanquantile(gappy, levels, dim=-1)
    res["nanmean"] = gappy.nanmean(dim=1)
    res["nanmedian"] = gappy.nanmedian(dim=1).values
    res["nan_count"] = torch.isnan(gappy).sum(dim=1)
    res["quantile_nan_poisons"] = torch.quantile(gappy, 0.5, dim=1)

    # probabilistic scores: closed-form Gaussian CRPS (with its gradient) and the sample-based
    # energy score; Gaussian and Poisson likelihoods as the auxiliary heads use them
    truth = target[:, steps_in:steps_in + horizon]
    mu = samples.mean(dim=1).requires_grad_()
    sigma = samples.std(dim=1).clamp_min(1e-3).requires_grad_()
    z = (truth - mu) / sigma
    std_normal = D.Normal(0.0, 1.0)
    crps = sigma * (z * (2 * std_normal.cdf(z) - 1) + 2 * std_normal.log_prob(z).exp()
                    - 1 / math.sqrt(math.pi))
    crps.mean().backward()
    res["crps"] = [crps, mu.grad, sigma.grad]
    spread = torch.cdist(samples.transpose(1, 2).unsqueeze(-1),
                         samples.transpose(1, 2).unsqueeze(-1), p=1)
    res["energy_score"] = ((samples - truth.unsqueeze(1)).abs().mean(1)
                           - 0.5 * spread.mean(dim=(-1, -2)))
    res["gaussian_nll"] = [F.gaussian_nll_loss(mu, truth, sigma ** 2, full=True),
                           nn.GaussianNLLLoss(eps=1e-2, reduction="none")(mu, truth,
                                                                         sigma[:, :1] ** 2)]
    res["poisson_nll"] = [F.poisson_nll_loss(mu.clamp_min(0.1), truth.round(), log_input=False,
                                             full=True),
                          nn.PoissonNLLLoss(reduction="sum")(torch.log(mu.clamp_min(0.1)),
                                                             truth.round())]

    # the same likelihoods sampled with the framework's own RNG: shapes, dtypes, reproducible
    torch.manual_seed(0)
    s1 = D.StudentT(df, loc, sc).sample((2,))
    nb_draw = D.NegativeBinomial(total_count=torch.tensor([3.0, 5.0]),
                                 logits=torch.tensor([0.1, -0.2])).sample((6,))
    torch.manual_seed(0)
    s2 = D.StudentT(df, loc, sc).sample((2,))
    gen = torch.Generator().manual_seed(7)
    g1 = torch.randn(4, generator=gen)
    gen.manual_seed(7)
    g2 = torch.randn(4, generator=gen)
    res["sampling_meta"] = [str(tuple(s1.shape)), _name(s1.dtype), _name(nb_draw.dtype),
                            str(tuple(nb_draw.shape)), bool(torch.equal(s1, s2)),
                            bool(torch.equal(g1, g2)),
                            bool((nb_draw >= 0).all() and (nb_draw == nb_draw.floor()).all())]
    return res


def nbeats_program(torch):
    """Trend (polynomial) and seasonality (Fourier) stacks with shared blocks, backcast residual
    subtraction, sMAPE and MASE losses with safe division."""
    nn = torch.nn
    rng = np.random.default_rng(2202)
    res = {}
    batch, backcast_len, forecast_len, period = 4, 14, 7, 7
    data = torch.from_numpy(_series(rng, batch, backcast_len + forecast_len, period))
    data[1, -3:] = 0.0                                     # zeros exercise the safe divisions
    x, y = data[:, :backcast_len], data[:, backcast_len:]

    def linspace(backcast_length, forecast_length):
        lin = np.linspace(-backcast_length, forecast_length, backcast_length + forecast_length)
        return lin[:backcast_length], lin[backcast_length:]

    class TrendBasis(nn.Module):
        def __init__(self, degree, backcast_size, forecast_size):
            super().__init__()
            back = torch.linspace(0, 1, backcast_size)
            fore = torch.arange(forecast_size, dtype=torch.float32) / forecast_size
            powers = torch.arange(degree + 1, dtype=torch.float32)
            self.register_buffer("backcast_basis", torch.pow(back[None], powers[:, None]))
            self.register_buffer("forecast_basis", torch.pow(fore.unsqueeze(0),
                                                             powers.unsqueeze(1)),
                                 persistent=False)

        def forward(self, theta):
            cut = self.forecast_basis.shape[0]
            backcast = torch.einsum("bp,pt->bt", theta[:, cut:], self.backcast_basis)
            forecast = torch.einsum("bp,pt->bt", theta[:, :cut], self.forecast_basis)
            return backcast, forecast

    class SeasonalityBasis(nn.Module):
        def __init__(self, harmonics, backcast_size, forecast_size):
            super().__init__()
            freq = np.append(np.zeros(1, dtype=np.float32),
                             np.arange(harmonics, harmonics / 2 * forecast_size,
                                       dtype=np.float32) / harmonics)[None, :]
            back_grid = -2 * np.pi * (np.arange(backcast_size, dtype=np.float32)[:, None]
                                      / forecast_size) * freq
            fore_grid = 2 * np.pi * (np.arange(forecast_size, dtype=np.float32)[:, None]
                                     / forecast_size) * freq
            back_grid = torch.tensor(back_grid, dtype=torch.float32)
            fore_grid = torch.from_numpy(fore_grid)
            self.backcast_cos = nn.Parameter(torch.cos(back_grid).T, requires_grad=False)
            self.backcast_sin = nn.Parameter(torch.sin(back_grid).T, requires_grad=False)
            self.forecast_cos = nn.Parameter(torch.transpose(torch.cos(fore_grid), 0, 1),
                                             requires_grad=False)
            self.forecast_sin = nn.Parameter(torch.sin(fore_grid).t(), requires_grad=False)
            self.n = self.forecast_cos.shape[0]

        def forward(self, theta):
            n = self.n
            b_harm = torch.einsum("bp,pt->bt", theta[:, 2 * n:3 * n], self.backcast_cos)
            b_harm = b_harm + torch.einsum("bp,pt->bt", theta[:, 3 * n:], self.backcast_sin)
            f_harm = theta[:, :n] @ self.forecast_cos + theta[:, n:2 * n] @ self.forecast_sin
            return b_harm, f_harm

    class Block(nn.Module):
        def __init__(self, theta_size, basis, units=16, layers=2):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(backcast_len, units)]
                                        + [nn.Linear(units, units) for _ in range(layers - 1)])
            self.theta = nn.Linear(units, theta_size, bias=False)
            self.basis = basis

        def forward(self, x):
            h = x
            for layer in self.layers:
                h = torch.relu(layer(h))
            return self.basis(self.theta(h))

    class NBeats(nn.Module):
        def __init__(self):
            super().__init__()
            degree, harmonics = 2, 1
            trend = Block(2 * (degree + 1), TrendBasis(degree, backcast_len, forecast_len))
            season_basis = SeasonalityBasis(harmonics, backcast_len, forecast_len)
            season = Block(4 * season_basis.n, season_basis)
            # weight sharing: each stack repeats one block object
            self.blocks = nn.ModuleList([trend] * 2 + [season] * 2)

        def forward(self, x, input_mask):
            residuals = x.flip(dims=(1,))
            input_mask = input_mask.flip(dims=(1,))
            forecast = x[:, -1:]
            stack_forecasts = []
            for block in self.blocks:
                backcast, block_forecast = block(residuals)
                residuals = (residuals - backcast) * input_mask
                forecast = forecast + block_forecast
                stack_forecasts.append(block_forecast)
            return forecast, torch.stack(stack_forecasts, dim=1)

    def divide_no_nan(a, b):
        result = a / b
        result[result != result] = 0.0
        result[result == float("inf")] = 0.0
        return result

    def smape_loss(forecast, target, mask):
        denom = forecast.detach().abs() + target.abs()
        return 200 * torch.mean(divide_no_nan(torch.abs(forecast - target), denom) * mask)

    def mase_loss(insample, freq, forecast, target, mask):
        masep = torch.mean(torch.abs(insample[:, freq:] - insample[:, :-freq]), dim=1)
        masked_masep_inv = divide_no_nan(mask, masep[:, None])
        return torch.mean(torch.abs(target - forecast) * masked_masep_inv)

    def safe_mape(forecast, target):
        denom = target.abs()
        ratio = torch.where(denom > 0, (forecast - target).abs() / torch.where(
            denom > 0, denom, torch.ones_like(denom)), torch.zeros_like(denom))
        return ratio.sum() / torch.count_nonzero(denom).clamp(min=1)

    model = NBeats()
    res["repr"] = _structure(model)
    res["n_params"] = [sum(p.numel() for p in model.parameters()),
                       sum(p.numel() for p in model.parameters() if p.requires_grad),
                       len(list(model.named_parameters())),
                       len(model.state_dict())]
    res["state_keys"] = sorted(model.state_dict().keys())
    fill_(torch, [p for p in model.parameters() if p.requires_grad], rng, 0.2)
    opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5,
                                                         patience=0, threshold=0.05,
                                                         cooldown=1, min_lr=1e-4)
    in_mask = torch.ones_like(x)
    in_mask[0, :3] = 0
    out_mask = (y != 0).float()
    res["smape"], res["mase"], res["lr"] = [], [], []
    for _ in range(6):
        model.train()
        forecast, _ = model(x, in_mask)
        smape = smape_loss(forecast, y, out_mask)
        mase = mase_loss(x, period, forecast, y, out_mask)
        loss = smape + mase
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        model.eval()
        with torch.no_grad():
            val = smape_loss(model(x.flip(0), in_mask)[0], y.flip(0), out_mask.flip(0))
        plateau.step(val)
        res["smape"].append(smape.item())
        res["mase"].append(mase.item())
        res["lr"].append(sched.get_last_lr()[0])
        res["plateau"] = [plateau.num_bad_epochs, plateau.cooldown_counter]
    res["shared_grad"] = model.blocks[0].theta.weight.grad
    res["same_block"] = [model.blocks[0] is model.blocks[1],
                         model.blocks[0].theta.weight is model.blocks[1].theta.weight]
    with torch.no_grad():
        forecast, stacks = model(x, in_mask)
    res["forecast"] = forecast
    res["stacks"] = stacks
    res["safe_mape"] = safe_mape(forecast, y)
    res["divide_no_nan"] = divide_no_nan(torch.tensor([1.0, 0.0, -1.0, 2.0]),
                                         torch.tensor([0.0, 0.0, 0.0, 4.0]))
    res["bases"] = [model.blocks[0].basis.backcast_basis, model.blocks[0].basis.forecast_basis,
                    model.blocks[2].basis.backcast_cos, model.blocks[2].basis.forecast_sin]
    res["ref_grid"] = torch.tensor(np.stack(linspace(backcast_len, forecast_len)[0:1]))
    return res


def informer_program(torch):
    """ProbSparse self-attention (topk over a sparsity measure, gather/scatter of the selected
    queries), distilling conv + max-pool, sinusoidal + learned time-feature embeddings, masked
    MSE with a padding mask."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2203)
    res = {}
    batch, seq_len, label_len, pred_len, c_in, d_model, heads = 2, 16, 4, 4, 3, 8, 2

    class PositionalEmbedding(nn.Module):
        def __init__(self, d_model, max_len=64):
            super().__init__()
            pe = torch.zeros(max_len, d_model).float()
            pe.require_grad = False
            position = torch.arange(0, max_len).float().unsqueeze(1)
            div_term = (torch.arange(0, d_model, 2).float()
                        * -(math.log(10000.0) / d_model)).exp()
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0))

        def forward(self, x):
            return self.pe[:, :x.size(1)]

    class TokenEmbedding(nn.Module):
        def __init__(self, c_in, d_model):
            super().__init__()
            self.tokenConv = nn.Conv1d(c_in, d_model, kernel_size=3, padding=1,
                                       padding_mode="circular", bias=False)
            for m in self.modules():
                if isinstance(m, nn.Conv1d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="leaky_relu")

        def forward(self, x):
            return self.tokenConv(x.permute(0, 2, 1)).transpose(1, 2)

    class TemporalEmbedding(nn.Module):
        def __init__(self, d_model):
            super().__init__()
            self.hour_embed = nn.Embedding(24, d_model)
            self.weekday_embed = nn.Embedding(7, d_model)
            self.month_embed = nn.Embedding(13, d_model)

        def forward(self, x_mark):
            x_mark = x_mark.long()
            return (self.hour_embed(x_mark[:, :, 2]) + self.weekday_embed(x_mark[:, :, 1])
                    + self.month_embed(x_mark[:, :, 0]))

    class DataEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.value = TokenEmbedding(c_in, d_model)
            self.position = PositionalEmbedding(d_model)
            self.temporal = TemporalEmbedding(d_model)
            self.dropout = nn.Dropout(p=0.0)

        def forward(self, x, x_mark):
            x = self.value(x) + self.position(x) + self.temporal(x_mark)
            return self.dropout(x)

    class ProbAttention(nn.Module):
        def __init__(self, factor=2, scale=None):
            super().__init__()
            self.factor, self.scale = factor, scale

        def _prob_QK(self, Q, K, sample_k, n_top, index_sample):
            B, H, L_K, E = K.shape
            _, _, L_Q, _ = Q.shape
            K_expand = K.unsqueeze(-3).expand(B, H, L_Q, L_K, E)
            K_sample = K_expand[:, :, torch.arange(L_Q).unsqueeze(1), index_sample, :]
            Q_K_sample = torch.matmul(Q.unsqueeze(-2), K_sample.transpose(-2, -1)).squeeze(-2)
            M = Q_K_sample.max(-1)[0] - torch.div(Q_K_sample.sum(-1), L_K)
            M_top = M.topk(n_top, sorted=False)[1]
            Q_reduce = Q[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None],
                         M_top, :]
            return torch.matmul(Q_reduce, K.transpose(-2, -1)), M_top, M

        def forward(self, queries, keys, values, index_sample, attn_mask=None):
            B, L_Q, H, D = queries.shape
            L_K = keys.shape[1]
            queries, keys, values = (queries.transpose(2, 1), keys.transpose(2, 1),
                                     values.transpose(2, 1))
            U_part = min(self.factor * int(np.ceil(np.log(L_K))), L_K)
            u = min(self.factor * int(np.ceil(np.log(L_Q))), L_Q)
            scores_top, index, M = self._prob_QK(queries, keys, U_part, u, index_sample)
            scores_top = scores_top * (self.scale or 1.0 / math.sqrt(D))
            # the lazy queries get the mean of V; the active ones their attention output
            context = values.mean(dim=-2).unsqueeze(-2).expand(B, H, L_Q, D).clone()
            attn = torch.softmax(scores_top, dim=-1)
            update = torch.matmul(attn, values).type_as(context)
            context[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], index, :] = \
                update
            # the same selection written with scatter (as other ports do)
            alt = values.mean(dim=-2, keepdim=True).expand(B, H, L_Q, D)
            scattered = alt.scatter(2, index.unsqueeze(-1).expand(-1, -1, -1, D), update)
            # topk(sorted=False) leaves the order of the chosen queries unspecified: sort them
            order = index.sort(dim=-1).values
            picked = torch.gather(context, 2, order.unsqueeze(-1).expand(-1, -1, -1, D))
            return context.transpose(2, 1).contiguous(), scattered, picked, M

    class AttentionLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = ProbAttention()
            self.q = nn.Linear(d_model, d_model)
            self.k = nn.Linear(d_model, d_model)
            self.v = nn.Linear(d_model, d_model)
            self.out = nn.Linear(d_model, d_model)

        def forward(self, x, index_sample):
            B, L, _ = x.shape
            q = self.q(x).view(B, L, heads, -1)
            k = self.k(x).view(B, L, heads, -1)
            v = self.v(x).view(B, L, heads, -1)
            out, scattered, picked, M = self.inner(q, k, v, index_sample)
            return self.out(out.view(B, L, -1)), scattered, picked, M

    class ConvLayer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.downConv = nn.Conv1d(c, c, kernel_size=3, padding=2, padding_mode="circular")
            self.norm = nn.BatchNorm1d(c)
            self.activation = nn.ELU()
            self.maxPool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

        def forward(self, x):
            x = self.downConv(x.permute(0, 2, 1))
            x = self.activation(self.norm(x))
            return self.maxPool(x).transpose(1, 2)

    class EncoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = AttentionLayer()
            self.conv1 = nn.Conv1d(d_model, 2 * d_model, kernel_size=1)
            self.conv2 = nn.Conv1d(2 * d_model, d_model, kernel_size=1)
            self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

        def forward(self, x, index_sample):
            new_x, scattered, picked, M = self.attention(x, index_sample)
            x = self.norm1(x + new_x)
            y = F.gelu(self.conv1(x.transpose(-1, 1)))
            y = self.conv2(y).transpose(-1, 1)
            return self.norm2(x + y), (scattered, picked, M)

    class Informer(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc_embedding = DataEmbedding()
            self.dec_embedding = DataEmbedding()
            self.layers = nn.ModuleList([EncoderLayer(), EncoderLayer()])
            self.distil = ConvLayer(d_model)
            self.cross = nn.MultiheadAttention(d_model, heads, batch_first=True)
            self.projection = nn.Linear(d_model, c_in)

        def forward(self, x_enc, mark_enc, x_dec, mark_dec, samples, dec_mask):
            h = self.enc_embedding(x_enc, mark_enc)
            h, extras = self.layers[0](h, samples[0])
            h = self.distil(h)
            h, extras2 = self.layers[1](h, samples[1])
            d = self.dec_embedding(x_dec, mark_dec)
            L = d.shape[1]
            causal = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
            d2, weights = self.cross(d, h, h, need_weights=True, average_attn_weights=False)
            d = d + d2.masked_fill(dec_mask.unsqueeze(-1), 0.0)
            self_out, _ = self.cross(d, d, d, attn_mask=causal, need_weights=False)
            return self.projection(d + self_out)[:, -pred_len:, :], extras, extras2, weights

    model = Informer()
    res["repr"] = _structure(model)
    fill_(torch, model, rng, 0.2)
    x_enc = normal(torch, rng, batch, seq_len, c_in)
    months = rng.integers(1, 13, (batch, seq_len + pred_len, 1))
    weekday = rng.integers(0, 7, (batch, seq_len + pred_len, 1))
    hour = rng.integers(0, 24, (batch, seq_len + pred_len, 1))
    marks = torch.from_numpy(np.concatenate([months, weekday, hour], -1).astype(np.float32))
    mark_enc, mark_dec = marks[:, :seq_len], marks[:, seq_len - label_len:]
    y = normal(torch, rng, batch, pred_len, c_in)
    x_dec = torch.cat([x_enc[:, -label_len:, :], torch.zeros_like(y)], dim=1).float()
    samples = []
    for L in (seq_len, (seq_len + 2) // 2):   # the distilling conv pads 2, the pool halves
        U = min(2 * int(np.ceil(np.log(L))), L)
        samples.append(torch.from_numpy(rng.integers(0, L, (L, U)).astype(np.int64)))
    pad = torch.zeros(batch, label_len + pred_len, dtype=torch.bool)
    pad[1, :2] = True
    target_mask = torch.ones(batch, pred_len, c_in)
    target_mask[0, -1] = 0
    # BatchNorm cancels the distilling conv's bias (and the LayerNorm bias before it), softmax
    # the key bias: their gradients are rounding noise (~1e-9) that Adam's default eps would
    # blow up to +-lr steps of arbitrary sign; eps=1e-6 keeps those steps near 1e-6
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, amsgrad=True, eps=1e-6)
    res["loss"], res["mse_none"] = [], []
    for _ in range(3):
        model.train()
        pred, extras, extras2, weights = model(x_enc, mark_enc, x_dec, mark_dec, samples, pad)
        err = F.mse_loss(pred, y, reduction="none")
        loss = (err * target_mask).sum() / target_mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["pred"] = pred
    res["sparsity_M"] = [extras[2], extras2[2]]
    res["scatter_vs_index"] = [extras[0], extras[1]]
    res["cross_weights"] = weights
    res["emb_grad"] = model.enc_embedding.temporal.hour_embed.weight.grad.abs().sum(-1)
    res["pe"] = model.enc_embedding.position.pe[0, :5]
    res["bn_stats"] = [model.distil.norm.running_mean, model.distil.norm.running_var]
    res["meta"] = [str(tuple(extras2[1].shape)), str(model.distil.norm.num_batches_tracked.item()),
                   _name(model.distil.norm.num_batches_tracked.dtype)]
    model.eval()
    with torch.no_grad():
        res["eval_pred"] = model(x_enc, mark_enc, x_dec, mark_dec, samples, pad)[0]
    return res


PROGRAMS = [deepar_program, nbeats_program, informer_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)
