"""Forecasting models written as Time-Series-Library and neuralforecast write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
PatchTST (RevIN with affine parameters and stored mean/stdev, ReplicationPad1d + unfold into
patches, channel-independent reshape, BatchNorm through Transpose), TimesNet (FFT period
detection with topk of amplitudes turned into NumPy periods, 1-D to 2-D reshape, Inception
blocks), N-BEATS and N-HiTS (identity/trend/seasonality bases, flipped backcast residual
stacking, max-pool with ceil_mode and interpolate) and DLinear trained by TSLib's loop (Adam,
OneCycleLR, adjust_learning_rate through param_group['lr'], early stopping keeping a
state_dict copy). See test_parity_programs_round27_forecasting.py for the transformers."""

import copy

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests
from tests.parity.test_parity_programs_round27_forecasting import _series_decomp

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _revin(torch, num_features, eps=1e-5):
    """RevIN as PatchTST's layers/RevIN.py writes it."""
    nn = torch.nn

    class RevIN(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_features, self.eps = num_features, eps
            self.affine_weight = nn.Parameter(torch.ones(self.num_features))
            self.affine_bias = nn.Parameter(torch.zeros(self.num_features))

        def forward(self, x, mode: str):
            if mode == "norm":
                dim2reduce = tuple(range(1, x.ndim - 1))
                self.mean = torch.mean(x, dim=dim2reduce, keepdim=True).detach()
                self.stdev = torch.sqrt(torch.var(x, dim=dim2reduce, keepdim=True,
                                                  unbiased=False) + self.eps).detach()
                x = (x - self.mean) / self.stdev
                return x * self.affine_weight + self.affine_bias
            x = x - self.affine_bias
            x = x / (self.affine_weight + self.eps * self.eps)
            return x * self.stdev + self.mean
    return RevIN()


def patchtst_program(torch):
    """PatchTST: RevIN, ReplicationPad1d((0, stride)), unfold(-1, patch_len, stride), patches
    of every channel reshaped into the batch, a Linear patch embedding plus a learned position
    Parameter, a TransformerEncoderLayer-like block with BatchNorm1d through Transpose, a
    flatten head, denormalisation; Adam under OneCycleLR stepped per batch as TSLib's 'TST'
    lradj does."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2711)
    B, L, C, D, H, P, S, pred = 3, 16, 2, 8, 2, 4, 2, 4
    n_patch = (L - P) // S + 2

    class Transpose(nn.Module):
        def __init__(self, *dims, contiguous=False):
            super().__init__()
            self.dims, self.contiguous = dims, contiguous

        def forward(self, x):
            return x.transpose(*self.dims).contiguous() if self.contiguous else \
                x.transpose(*self.dims)

    class PatchTST(nn.Module):
        def __init__(self):
            super().__init__()
            self.revin = _revin(torch, C)
            self.padding_patch_layer = nn.ReplicationPad1d((0, S))
            self.value_embedding = nn.Linear(P, D, bias=False)
            self.W_pos = nn.Parameter(torch.empty(n_patch, D).uniform_(-0.02, 0.02))
            self.attn = nn.MultiheadAttention(D, H, batch_first=True)
            self.norm_attn = nn.Sequential(Transpose(1, 2), nn.BatchNorm1d(D), Transpose(1, 2))
            self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
            self.norm_ffn = nn.Sequential(Transpose(1, 2), nn.BatchNorm1d(D), Transpose(1, 2))
            self.flatten = nn.Flatten(start_dim=-2)
            self.linear = nn.Linear(D * n_patch, pred)

        def forward(self, x_enc):
            x = self.revin(x_enc, "norm").permute(0, 2, 1)
            n_vars = x.shape[1]
            x = self.padding_patch_layer(x)
            x = x.unfold(dimension=-1, size=P, step=S)
            x = torch.reshape(x, (x.shape[0] * x.shape[1], x.shape[2], x.shape[3]))
            x = self.value_embedding(x) + self.W_pos
            x = self.norm_attn(x + self.attn(x, x, x, need_weights=False)[0])
            x = self.norm_ffn(x + self.ff(x))
            x = torch.reshape(x, (-1, n_vars, x.shape[-2], x.shape[-1])).permute(0, 1, 3, 2)
            dec_out = self.linear(self.flatten(x)).permute(0, 2, 1)
            return self.revin(dec_out, "denorm")

    model = PatchTST()
    fill_(torch, model, rng)
    with torch.no_grad():
        model.revin.affine_weight.add_(1.0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(optimizer=opt, steps_per_epoch=2, pct_start=0.3,
                                                epochs=2, max_lr=1e-3)
    series = normal(torch, rng, 2, B, L + pred, C).cumsum(2) * 3 + 5
    res = {"losses": [], "lrs": []}
    for epoch in range(2):
        for i in range(2):
            opt.zero_grad()
            out = model(series[i, :, :L])
            loss = F.mse_loss(out, series[i, :, L:])
            loss.backward()
            if "eval" not in res:
                # the value and out_proj biases feed BatchNorm only: their gradients are float
                # noise that Adam turns into +-lr steps, and so are the running means after
                # the first step; eval is compared there (before the step), and those
                # elements of the parameters are left out
                res["bn"] = [model.norm_attn[1].running_mean.clone(),
                             model.norm_ffn[1].running_mean.clone()]
                model.eval()
                with torch.no_grad():
                    res["eval"] = model(series[0, :, :L])
                model.train()
            opt.step()
            sched.step()
            res["losses"].append(loss.item())
            res["lrs"].append(sched.get_last_lr()[0])
    res["revin"] = [model.revin.mean, model.revin.stdev, model.revin.affine_weight.grad]
    res["params"] = [p[p.grad.abs() > 1e-4] for p in model.parameters()]
    res["bn_var"] = [model.norm_attn[1].running_var, model.norm_ffn[1].running_var]
    return res


def timesnet_program(torch):
    """TimesNet's TimesBlock: FFT_for_Period (rfft amplitude averaged with abs(), the DC term
    zeroed in place, topk, the periods computed as ``T // top_list`` on a NumPy array), zero
    padding to a multiple of each period with torch.zeros of NumPy ints, the 1-D to 2-D
    reshape, Inception_Block_V1 (Conv2d of kernel 1, 3, 5 averaged by stack/mean) and the
    softmax period weights; Adam steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2712)
    B, T, N, k = 2, 14, 4, 2

    def FFT_for_Period(x, k=2):
        xf = torch.fft.rfft(x, dim=1)
        frequency_list = abs(xf).mean(0).mean(-1)
        frequency_list[0] = 0
        _, top_list = torch.topk(frequency_list, k)
        top_list = top_list.detach().cpu().numpy()
        period = x.shape[1] // top_list
        return period, abs(xf).mean(-1)[:, top_list]

    class Inception_Block_V1(nn.Module):
        def __init__(self, in_channels, out_channels, num_kernels=3):
            super().__init__()
            self.kernels = nn.ModuleList([nn.Conv2d(in_channels, out_channels,
                                                    kernel_size=2 * i + 1, padding=i)
                                          for i in range(num_kernels)])
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)

        def forward(self, x):
            return torch.stack([k(x) for k in self.kernels], dim=-1).mean(-1)

    class TimesBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(Inception_Block_V1(N, 6), nn.GELU(),
                                      Inception_Block_V1(6, N))

        def forward(self, x):
            B, T, N = x.size()
            period_list, period_weight = FFT_for_Period(x, k)
            res = []
            for i in range(k):
                period = period_list[i]
                if T % period != 0:
                    length = ((T // period) + 1) * period
                    padding = torch.zeros([x.shape[0], (length - T), x.shape[2]]).to(x.device)
                    out = torch.cat([x, padding], dim=1)
                else:
                    length = T
                    out = x
                out = out.reshape(B, length // period, period, N).permute(0, 3, 1, 2).contiguous()
                out = self.conv(out)
                out = out.permute(0, 2, 3, 1).reshape(B, -1, N)
                res.append(out[:, :T, :])
            res = torch.stack(res, dim=-1)
            period_weight = F.softmax(period_weight, dim=1)
            period_weight = period_weight.unsqueeze(1).unsqueeze(1).repeat(1, T, N, 1)
            return torch.sum(res * period_weight, -1) + x, period_list

    block = TimesBlock()
    fill_(torch, block, rng)
    norm = nn.LayerNorm(N)
    opt = torch.optim.Adam(list(block.parameters()) + list(norm.parameters()), lr=1e-3)
    t = np.arange(T, dtype=np.float32)
    x = torch.from_numpy((np.sin(2 * np.pi * t / 7)[None, :, None]
                          + 0.5 * np.cos(2 * np.pi * t / 3)[None, :, None]
                          + 0.1 * rng.standard_normal((B, T, N))).astype(np.float32))
    res = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        out, periods = block(x)
        loss = norm(out).pow(2).mean()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["periods"] = [int(p) for p in periods]
    res["out"] = out
    res["params"] = list(block.parameters())
    return res


def _nbeats_bases(torch, backcast_size, forecast_size, n_basis):
    """neuralforecast's TrendBasis and SeasonalityBasis, with frozen basis Parameters."""
    nn = torch.nn

    class TrendBasis(nn.Module):
        def __init__(self, degree_of_polynomial):
            super().__init__()
            polynomial_size = degree_of_polynomial + 1
            self.backcast_basis = nn.Parameter(torch.tensor(np.concatenate(
                [np.power(np.arange(backcast_size, dtype=float) / backcast_size, i)[None, :]
                 for i in range(polynomial_size)]), dtype=torch.float32), requires_grad=False)
            self.forecast_basis = nn.Parameter(torch.tensor(np.concatenate(
                [np.power(np.arange(forecast_size, dtype=float) / forecast_size, i)[None, :]
                 for i in range(polynomial_size)]), dtype=torch.float32), requires_grad=False)

        def forward(self, theta):
            polynomial_size = self.forecast_basis.shape[0]
            backcast_theta = theta[:, :polynomial_size]
            forecast_theta = theta[:, polynomial_size:]
            backcast = torch.einsum("bp,pt->bt", backcast_theta, self.backcast_basis)
            forecast = torch.einsum("bpq,pt->btq", forecast_theta.unsqueeze(-1),
                                    self.forecast_basis)
            return backcast, forecast

    class SeasonalityBasis(nn.Module):
        def __init__(self, harmonics):
            super().__init__()
            frequency = np.append(np.zeros(1, dtype=float),
                                  np.arange(harmonics, harmonics / 2 * forecast_size,
                                            dtype=float) / harmonics)[None, :]
            grid_b = -2 * np.pi * (np.arange(backcast_size, dtype=float)[:, None]
                                   / forecast_size) * frequency
            grid_f = -2 * np.pi * (np.arange(forecast_size, dtype=float)[:, None]
                                   / forecast_size) * frequency
            bb = np.concatenate([np.transpose(np.cos(grid_b)), np.transpose(np.sin(grid_b))])
            fb = np.concatenate([np.transpose(np.cos(grid_f)), np.transpose(np.sin(grid_f))])
            self.backcast_basis = nn.Parameter(torch.tensor(bb, dtype=torch.float32),
                                               requires_grad=False)
            self.forecast_basis = nn.Parameter(torch.tensor(fb, dtype=torch.float32),
                                               requires_grad=False)

        def forward(self, theta):
            harmonic_size = self.forecast_basis.shape[0]
            backcast = torch.einsum("bp,pt->bt", theta[:, harmonic_size:], self.backcast_basis)
            forecast = torch.einsum("bpq,pt->btq", theta[:, :harmonic_size].unsqueeze(-1),
                                    self.forecast_basis)
            return backcast, forecast
    return TrendBasis(2), SeasonalityBasis(1)


def nbeats_nhits_program(torch):
    """N-BEATS with trend and seasonality bases and N-HiTS with MaxPool1d(ceil_mode=True)
    input pooling and linear/nearest interpolation of its forecast knots (bicubic on a 4-D
    view for the 'cubic' mode), both with neuralforecast's flipped residual stacking, the
    masked backcast and a Naive1 level; Adam with StepLR and clip_grad_norm_."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2713)
    B, L, h = 4, 12, 6
    trend, season = _nbeats_bases(torch, L, h, None)

    class Block(nn.Module):
        def __init__(self, n_theta, basis, pool=1):
            super().__init__()
            self.pooling_layer = nn.MaxPool1d(kernel_size=pool, stride=pool, ceil_mode=True)
            n_in = -(-L // pool)
            self.layers = nn.Sequential(nn.Linear(n_in, 16), nn.ReLU(), nn.Linear(16, 16),
                                        nn.ReLU(), nn.Linear(16, n_theta))
            self.basis = basis

        def forward(self, insample_y):
            insample_y = self.pooling_layer(insample_y.unsqueeze(1)).squeeze(1)
            return self.basis(self.layers(insample_y))

    class IdentityBasis(nn.Module):
        def __init__(self, mode):
            super().__init__()
            self.mode = mode

        def forward(self, theta):
            backcast = theta[:, :L]
            knots = theta[:, L:]
            knots = knots.reshape(len(knots), 1, -1)
            if self.mode in ["nearest", "linear"]:
                forecast = F.interpolate(knots, size=h, mode=self.mode)
            else:
                knots = knots[:, None, :, :]
                forecast = torch.zeros((len(knots), h)).to(knots.device)
                n_batches = int(np.ceil(len(knots) / 2))
                for i in range(n_batches):
                    forecast_i = F.interpolate(knots[i * 2:(i + 1) * 2], size=(1, h),
                                               mode="bicubic")
                    forecast[i * 2:(i + 1) * 2] += forecast_i[:, 0, 0, :]
                forecast = forecast[:, None, :]
            return backcast, forecast.permute(0, 2, 1)

    class Stacks(nn.Module):
        def __init__(self, blocks):
            super().__init__()
            self.blocks = nn.ModuleList(blocks)

        def forward(self, insample_y, insample_mask):
            residuals = insample_y.flip(dims=(-1,))
            insample_mask = insample_mask.flip(dims=(-1,))
            forecast = insample_y[:, -1:, None]
            for block in self.blocks:
                backcast, block_forecast = block(residuals)
                residuals = (residuals - backcast) * insample_mask
                forecast = forecast + block_forecast
            return forecast.squeeze(-1)

    models = {
        "nbeats": Stacks([Block(3 + 3, trend), Block(2 * season.forecast_basis.shape[0] // 2
                                                     * 2, season)]),
        "nhits": Stacks([Block(L + 2, IdentityBasis("linear"), pool=5),
                         Block(L + 3, IdentityBasis("nearest"), pool=2),
                         Block(L + 4, IdentityBasis("cubic"), pool=1)]),
    }
    y = normal(torch, rng, B, L + h).cumsum(1)
    mask = torch.from_numpy((rng.random((B, L)) > 0.2).astype(np.float32))
    res = {}
    for name, model in models.items():
        fill_(torch, model, rng, scale=0.2)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        losses, norms = [], []
        for _ in range(3):
            opt.zero_grad()
            forecast = model(y[:, :L], mask)
            loss = F.l1_loss(forecast, y[:, L:])
            loss.backward()
            norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
            opt.step()
            sched.step()
            losses.append(loss.item())
        res[name + "_losses"], res[name + "_norms"] = losses, norms
        res[name + "_forecast"] = forecast
        res[name + "_params"] = [p for p in model.parameters() if p.requires_grad]
        res[name + "_frozen"] = [n for n, p in model.named_parameters() if not p.requires_grad]
    return res


def dlinear_program(torch):
    """DLinear (individual and shared) trained by TSLib's exp_long_term_forecasting loop: the
    moving-average decomposition, Linear weights set to 1/seq_len * ones as Parameters, the
    per-channel ModuleList writing into a zeros output, Adam, vali() under model.eval() and
    no_grad with np.average of the batch losses, EarlyStopping keeping a deepcopy of the
    state_dict, type1 adjust_learning_rate, and the best state loaded back."""
    nn = torch.nn
    rng = np.random.default_rng(2714)
    B, L, C, pred = 4, 24, 3, 6

    class DLinear(nn.Module):
        def __init__(self, individual):
            super().__init__()
            self.decompsition = _series_decomp(torch, 5)
            self.individual = individual
            if individual:
                self.Linear_Seasonal = nn.ModuleList()
                self.Linear_Trend = nn.ModuleList()
                for i in range(C):
                    self.Linear_Seasonal.append(nn.Linear(L, pred))
                    self.Linear_Trend.append(nn.Linear(L, pred))
                    self.Linear_Seasonal[i].weight = nn.Parameter(
                        (1 / L) * torch.ones([pred, L]))
                    self.Linear_Trend[i].weight = nn.Parameter((1 / L) * torch.ones([pred, L]))
            else:
                self.Linear_Seasonal = nn.Linear(L, pred)
                self.Linear_Trend = nn.Linear(L, pred)
                self.Linear_Seasonal.weight = nn.Parameter((1 / L) * torch.ones([pred, L]))
                self.Linear_Trend.weight = nn.Parameter((1 / L) * torch.ones([pred, L]))

        def forward(self, x):
            seasonal_init, trend_init = self.decompsition(x)
            seasonal_init, trend_init = seasonal_init.permute(0, 2, 1), trend_init.permute(0, 2,
                                                                                           1)
            if self.individual:
                seasonal_output = torch.zeros([seasonal_init.size(0), seasonal_init.size(1),
                                               pred], dtype=seasonal_init.dtype).to(x.device)
                trend_output = torch.zeros([trend_init.size(0), trend_init.size(1), pred],
                                           dtype=trend_init.dtype).to(x.device)
                for i in range(C):
                    seasonal_output[:, i, :] = self.Linear_Seasonal[i](seasonal_init[:, i, :])
                    trend_output[:, i, :] = self.Linear_Trend[i](trend_init[:, i, :])
            else:
                seasonal_output = self.Linear_Seasonal(seasonal_init)
                trend_output = self.Linear_Trend(trend_init)
            return (seasonal_output + trend_output).permute(0, 2, 1)

    class EarlyStopping:
        def __init__(self, patience=2, delta=0):
            self.patience, self.counter, self.best_score = patience, 0, None
            self.early_stop, self.val_loss_min, self.delta = False, np.inf, delta
            self.best_state = None

        def __call__(self, val_loss, model):
            score = -val_loss
            if self.best_score is None:
                self.best_score = score
                self.save_checkpoint(val_loss, model)
            elif score < self.best_score + self.delta:
                self.counter += 1
                if self.counter >= self.patience:
                    self.early_stop = True
            else:
                self.best_score = score
                self.save_checkpoint(val_loss, model)
                self.counter = 0

        def save_checkpoint(self, val_loss, model):
            self.best_state = copy.deepcopy(model.state_dict())
            self.val_loss_min = val_loss

    def adjust_learning_rate(optimizer, epoch, learning_rate):
        lr = learning_rate * (0.5 ** ((epoch - 1) // 1))
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr

    data = normal(torch, rng, 6, B, L + pred, C).cumsum(2)
    train, val = data[:4], data[4:]
    res = {}
    for individual in (False, True):
        name = "individual" if individual else "shared"
        model = DLinear(individual)
        fill_(torch, [m.bias for m in model.modules() if isinstance(m, nn.Linear)], rng, 0.1)
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        criterion = nn.MSELoss()
        stopper = EarlyStopping(patience=2)
        train_losses, val_losses, lrs = [], [], []

        def vali():
            total_loss = []
            model.eval()
            with torch.no_grad():
                for batch in val:
                    outputs = model(batch[:, :L])
                    pred_ = outputs.detach().cpu()
                    true = batch[:, L:].detach().cpu()
                    total_loss.append(criterion(pred_, true))
            total_loss = np.average(total_loss)
            model.train()
            return total_loss

        for epoch in range(6):
            epoch_loss = []
            for batch in train:
                opt.zero_grad()
                loss = criterion(model(batch[:, :L])[:, -pred:, 0:], batch[:, L:, 0:])
                epoch_loss.append(loss.item())
                loss.backward()
                opt.step()
            train_losses.append(np.average(epoch_loss))
            val_loss = vali()
            val_losses.append(float(val_loss))
            stopper(val_loss, model)
            if stopper.early_stop:
                break
            adjust_learning_rate(opt, epoch + 1, 0.05)
            lrs.append(opt.param_groups[0]["lr"])
        model.load_state_dict(stopper.best_state)
        res[name + "_train"], res[name + "_val"], res[name + "_lrs"] = (train_losses,
                                                                       val_losses, lrs)
        res[name + "_stopped"] = [stopper.early_stop, stopper.counter]
        res[name + "_best"] = [stopper.val_loss_min]
        res[name + "_state"] = list(model.state_dict().values())
        res[name + "_keys"] = list(model.state_dict().keys())
        res[name + "_val_type"] = [type(val_loss).__name__]
    return res


PROGRAMS = [patchtst_program, timesnet_program, nbeats_nhits_program, dlinear_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 accumulation order over a few Adam steps (FFT, attention, conv sums)
        "patchtst_program": (1e-4, 1e-5),
        "timesnet_program": (1e-4, 1e-5),
        "nbeats_nhits_program": (1e-4, 1e-5),
        "dlinear_program": (1e-4, 1e-5),
    })
