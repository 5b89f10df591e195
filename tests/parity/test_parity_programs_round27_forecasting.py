"""Transformer forecasters written as Time-Series-Library writes them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: Informer
(ProbSparse attention on NumPy-given key samples, topk of the sparsity measure, gathered and
scattered queries, ProbMask, distilling circular conv + BatchNorm + ELU + max_pool1d),
Autoformer (moving-average decomposition with replicate padding, auto-correlation through
rfft/irfft, topk delays aggregated by roll in training and by gather in inference) and
FEDformer (frequency-enhanced block: complex weights on selected modes, by real einsums and by a
complex Parameter). Sibling file _forecasting_models: PatchTST, TimesNet, N-BEATS/N-HiTS and
DLinear trained with the repositories' Adam, adjust_learning_rate and early stopping;
_forecasting_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _token_embedding(torch, c_in, d_model):
    """TSLib's DataEmbedding without the time features: a circular Conv1d token embedding plus
    the sin/cos positional buffer."""
    nn = torch.nn

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
            # TSLib: `1 if torch.__version__ >= "1.5.0" else 2`; ember's version is 0.1.0
            padding = 1
            self.tokenConv = nn.Conv1d(in_channels=c_in, out_channels=d_model, kernel_size=3,
                                       padding=padding, padding_mode="circular", bias=False)
            for m in self.modules():
                if isinstance(m, nn.Conv1d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="leaky_relu")

        def forward(self, x):
            return self.tokenConv(x.permute(0, 2, 1)).transpose(1, 2)

    class DataEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.value_embedding = TokenEmbedding(c_in, d_model)
            self.position_embedding = PositionalEmbedding(d_model)
            self.dropout = nn.Dropout(p=0.0)

        def forward(self, x):
            return self.dropout(self.value_embedding(x) + self.position_embedding(x))
    return DataEmbedding()


def informer_program(torch):
    """Informer's encoder-decoder as TSLib writes it: ProbAttention with the key samples and the
    top queries chosen as the repository does (``index_sample`` given from NumPy instead of
    torch.randint), masked ProbSparse self-attention in the decoder (ProbMask gathered from a
    triu mask, cumsum initial context, masked_fill_ of -inf), the distilling ConvLayer, Adam
    and a few steps of MSE training; the eval forward runs under no_grad."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2701)
    B, L, C, D, H, pred, label = 2, 16, 3, 8, 2, 4, 8

    class ProbMask:
        def __init__(self, B, H, L, index, scores):
            _mask = torch.ones(L, scores.shape[-1], dtype=torch.bool).triu(1)
            _mask_ex = _mask[None, None, :].expand(B, H, L, scores.shape[-1])
            indicator = _mask_ex[torch.arange(B)[:, None, None],
                                 torch.arange(H)[None, :, None], index, :]
            self._mask = indicator.view(scores.shape)

        @property
        def mask(self):
            return self._mask

    class ProbAttention(nn.Module):
        def __init__(self, mask_flag, factor, samples):
            super().__init__()
            self.factor, self.mask_flag, self.samples = factor, mask_flag, samples

        def _prob_QK(self, Q, K, sample_k, n_top):
            B, H, L_K, E = K.shape
            _, _, L_Q, _ = Q.shape
            K_expand = K.unsqueeze(-3).expand(B, H, L_Q, L_K, E)
            index_sample = torch.from_numpy(self.samples[L_Q, L_K][:, :sample_k])
            K_sample = K_expand[:, :, torch.arange(L_Q).unsqueeze(1), index_sample, :]
            Q_K_sample = torch.matmul(Q.unsqueeze(-2), K_sample.transpose(-2, -1)).squeeze()
            M = Q_K_sample.max(-1)[0] - torch.div(Q_K_sample.sum(-1), L_K)
            M_top = M.topk(n_top, sorted=False)[1]
            Q_reduce = Q[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None],
                         M_top, :]
            return torch.matmul(Q_reduce, K.transpose(-2, -1)), M_top

        def _get_initial_context(self, V, L_Q):
            B, H, L_V, D = V.shape
            if not self.mask_flag:
                V_sum = V.mean(dim=-2)
                return V_sum.unsqueeze(-2).expand(B, H, L_Q, V_sum.shape[-1]).clone()
            assert L_Q == L_V
            return V.cumsum(dim=-2)

        def _update_context(self, context_in, V, scores, index, L_Q):
            B, H, L_V, D = V.shape
            if self.mask_flag:
                attn_mask = ProbMask(B, H, L_Q, index, scores)
                scores.masked_fill_(attn_mask.mask, -np.inf)
            attn = torch.softmax(scores, dim=-1)
            context_in[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None],
                       index, :] = torch.matmul(attn, V).type_as(context_in)
            return context_in

        def forward(self, queries, keys, values):
            B, L_Q, H, D = queries.shape
            _, L_K, _, _ = keys.shape
            queries, keys, values = (t.transpose(2, 1) for t in (queries, keys, values))
            U_part = self.factor * np.ceil(np.log(L_K)).astype("int").item()
            u = self.factor * np.ceil(np.log(L_Q)).astype("int").item()
            U_part = U_part if U_part < L_K else L_K
            u = u if u < L_Q else L_Q
            scores_top, index = self._prob_QK(queries, keys, sample_k=U_part, n_top=u)
            scores_top = scores_top * (1.0 / math.sqrt(D))
            context = self._get_initial_context(values, L_Q)
            context = self._update_context(context, values, scores_top, index, L_Q)
            return context.contiguous()

    class AttentionLayer(nn.Module):
        def __init__(self, attention, mix=False):
            super().__init__()
            self.inner_attention = attention
            self.query_projection = nn.Linear(D, D)
            self.key_projection = nn.Linear(D, D)
            self.value_projection = nn.Linear(D, D)
            self.out_projection = nn.Linear(D, D)
            self.mix = mix

        def forward(self, queries, keys, values):
            B, L, _ = queries.shape
            _, S, _ = keys.shape
            out = self.inner_attention(self.query_projection(queries).view(B, L, H, -1),
                                       self.key_projection(keys).view(B, S, H, -1),
                                       self.value_projection(values).view(B, S, H, -1))
            out = out.transpose(2, 1).contiguous() if self.mix else out.transpose(2, 1)
            return self.out_projection(out.reshape(B, L, -1))

    class ConvLayer(nn.Module):
        def __init__(self, c_in):
            super().__init__()
            self.downConv = nn.Conv1d(c_in, c_in, kernel_size=3, padding=2,
                                      padding_mode="circular")
            self.norm = nn.BatchNorm1d(c_in)
            self.activation = nn.ELU()
            self.maxPool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

        def forward(self, x):
            x = self.downConv(x.permute(0, 2, 1))
            x = self.maxPool(self.activation(self.norm(x)))
            return x.transpose(1, 2)

    class EncoderLayer(nn.Module):
        def __init__(self, attention):
            super().__init__()
            self.attention = attention
            self.conv1 = nn.Conv1d(in_channels=D, out_channels=2 * D, kernel_size=1)
            self.conv2 = nn.Conv1d(in_channels=2 * D, out_channels=D, kernel_size=1)
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)

        def forward(self, x):
            x = self.norm1(x + self.attention(x, x, x))
            y = F.gelu(self.conv1(x.transpose(-1, 1)))
            y = self.conv2(y).transpose(-1, 1)
            return self.norm2(x + y)

    class DecoderLayer(nn.Module):
        def __init__(self, self_attention, cross_attention):
            super().__init__()
            self.self_attention, self.cross_attention = self_attention, cross_attention
            self.conv1 = nn.Conv1d(D, 2 * D, 1)
            self.conv2 = nn.Conv1d(2 * D, D, 1)
            self.norm1, self.norm2, self.norm3 = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)

        def forward(self, x, cross):
            x = self.norm1(x + self.self_attention(x, x, x))
            x = self.norm2(x + self.cross_attention(x, cross, cross))
            y = F.relu(self.conv1(x.transpose(-1, 1)))
            return self.norm3(x + self.conv2(y).transpose(-1, 1))

    samples = {(lq, lk): rng.integers(0, lk, (lq, lk)).astype(np.int64)
               for lq, lk in [(16, 16), (9, 9), (12, 12), (12, 9), (8, 8)]}

    class Informer(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc_embedding = _token_embedding(torch, C, D)
            self.dec_embedding = _token_embedding(torch, C, D)
            self.attn_layers = nn.ModuleList(
                [EncoderLayer(AttentionLayer(ProbAttention(False, 1, samples)))
                 for _ in range(2)])
            self.conv_layers = nn.ModuleList([ConvLayer(D)])
            self.enc_norm = nn.LayerNorm(D)
            self.decoder = DecoderLayer(AttentionLayer(ProbAttention(True, 1, samples), mix=True),
                                        AttentionLayer(ProbAttention(False, 1, samples)))
            self.dec_norm = nn.LayerNorm(D)
            self.projection = nn.Linear(D, C, bias=True)

        def forward(self, x_enc, x_dec):
            enc_out = self.enc_embedding(x_enc)
            for attn_layer, conv_layer in zip(self.attn_layers, self.conv_layers):
                enc_out = conv_layer(attn_layer(enc_out))
            enc_out = self.enc_norm(self.attn_layers[-1](enc_out))
            dec_out = self.dec_norm(self.decoder(self.dec_embedding(x_dec), enc_out))
            return self.projection(dec_out)[:, -pred:, :]

    model = Informer()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()
    series = normal(torch, rng, B, L + pred, C).cumsum(1)
    batch_x, batch_y = series[:, :L], series[:, L - label:]
    res = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        dec_inp = torch.zeros_like(batch_y[:, -pred:, :]).float()
        dec_inp = torch.cat([batch_y[:, :label, :], dec_inp], dim=1).float()
        outputs = model(batch_x, dec_inp)
        loss = criterion(outputs, batch_y[:, -pred:, :])
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        # downConv's bias feeds BatchNorm only: its gradient is float noise, and Adam turns
        # that into +-lr steps, so the running mean is compared after the first step only
        res.setdefault("bn_mean", model.conv_layers[0].norm.running_mean.clone())
    res["grads"] = [p.grad for p in model.parameters()]
    res["bn_stats"] = [model.conv_layers[0].norm.running_var,
                       model.conv_layers[0].norm.num_batches_tracked]
    model.eval()
    with torch.no_grad():
        res["eval"] = model(batch_x, dec_inp)
    q = normal(torch, rng, B, 8, H, 4)
    att = ProbAttention(False, 1, samples)
    _, top = att._prob_QK(q.transpose(2, 1), q.transpose(2, 1), 3, 3)
    res["top_sorted"] = top.sort(-1).values
    return res


def _series_decomp(torch, kernel_size):
    """Autoformer's series_decomp: moving average with replicate padding by repeat + cat."""
    nn = torch.nn

    class moving_avg(nn.Module):
        def __init__(self, kernel_size, stride):
            super().__init__()
            self.kernel_size = kernel_size
            self.avg = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=0)

        def forward(self, x):
            front = x[:, 0:1, :].repeat(1, (self.kernel_size - 1) // 2, 1)
            end = x[:, -1:, :].repeat(1, (self.kernel_size - 1) // 2, 1)
            x = torch.cat([front, x, end], dim=1)
            return self.avg(x.permute(0, 2, 1)).permute(0, 2, 1)

    class series_decomp(nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            self.moving_avg = moving_avg(kernel_size, stride=1)

        def forward(self, x):
            moving_mean = self.moving_avg(x)
            return x - moving_mean, moving_mean
    return series_decomp(kernel_size)


def autoformer_program(torch):
    """Autoformer's encoder and decoder layers: AutoCorrelation by rfft/irfft of the permuted
    queries and keys, time_delay_agg_training (topk of the batch-mean correlation, torch.roll by
    ``-int(index[i])``, softmax weights repeated to the value shape) and, under eval,
    time_delay_agg_inference (topk per sample, gather on the values repeated twice), the
    series decomposition and my_Layernorm; Adam with TSLib's type1 adjust_learning_rate."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2702)
    B, L, C, D, H, pred, label = 2, 16, 2, 8, 2, 4, 8

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
            batch, head, channel, length = values.shape
            init_index = torch.arange(length).unsqueeze(0).unsqueeze(0).unsqueeze(0).repeat(
                batch, head, channel, 1).to(values.device)
            top_k = int(self.factor * math.log(length))
            mean_value = torch.mean(torch.mean(corr, dim=1), dim=1)
            weights, delay = torch.topk(mean_value, top_k, dim=-1)
            tmp_corr = torch.softmax(weights, dim=-1)
            tmp_values = values.repeat(1, 1, 1, 2)
            delays_agg = torch.zeros_like(values).float()
            for i in range(top_k):
                tmp_delay = init_index + delay[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(
                    1).repeat(1, head, channel, length)
                pattern = torch.gather(tmp_values, dim=-1, index=tmp_delay)
                delays_agg = delays_agg + pattern * (
                    tmp_corr[:, i].unsqueeze(1).unsqueeze(1).unsqueeze(1)
                    .repeat(1, head, channel, length))
            return delays_agg

        def forward(self, queries, keys, values):
            B, L, H, E = queries.shape
            _, S, _, D = values.shape
            if L > S:
                zeros = torch.zeros_like(queries[:, :(L - S), :]).float()
                values = torch.cat([values, zeros], dim=1)
                keys = torch.cat([keys, zeros], dim=1)
            else:
                values, keys = values[:, :L, :, :], keys[:, :L, :, :]
            q_fft = torch.fft.rfft(queries.permute(0, 2, 3, 1).contiguous(), dim=-1)
            k_fft = torch.fft.rfft(keys.permute(0, 2, 3, 1).contiguous(), dim=-1)
            res = q_fft * torch.conj(k_fft)
            corr = torch.fft.irfft(res, n=L, dim=-1)
            agg = self.time_delay_agg_training if self.training else \
                self.time_delay_agg_inference
            V = agg(values.permute(0, 2, 3, 1).contiguous(), corr).permute(0, 3, 1, 2)
            return V.contiguous()

    class AutoCorrelationLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner_correlation = AutoCorrelation()
            self.query_projection = nn.Linear(D, D)
            self.key_projection = nn.Linear(D, D)
            self.value_projection = nn.Linear(D, D)
            self.out_projection = nn.Linear(D, D)

        def forward(self, queries, keys, values):
            B, L, _ = queries.shape
            _, S, _ = keys.shape
            out = self.inner_correlation(self.query_projection(queries).view(B, L, H, -1),
                                         self.key_projection(keys).view(B, S, H, -1),
                                         self.value_projection(values).view(B, S, H, -1))
            return self.out_projection(out.view(B, L, -1))

    class my_Layernorm(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.layernorm = nn.LayerNorm(channels)

        def forward(self, x):
            x_hat = self.layernorm(x)
            bias = torch.mean(x_hat, dim=1).unsqueeze(1).repeat(1, x.shape[1], 1)
            return x_hat - bias

    class EncoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = AutoCorrelationLayer()
            self.conv1 = nn.Conv1d(D, 2 * D, kernel_size=1, bias=False)
            self.conv2 = nn.Conv1d(2 * D, D, kernel_size=1, bias=False)
            self.decomp1, self.decomp2 = _series_decomp(torch, 5), _series_decomp(torch, 5)

        def forward(self, x):
            x, _ = self.decomp1(x + self.attention(x, x, x))
            y = F.relu(self.conv1(x.transpose(-1, 1)))
            res, _ = self.decomp2(x + self.conv2(y).transpose(-1, 1))
            return res

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attention = AutoCorrelationLayer()
            self.cross_attention = AutoCorrelationLayer()
            self.conv1 = nn.Conv1d(D, 2 * D, kernel_size=1, bias=False)
            self.conv2 = nn.Conv1d(2 * D, D, kernel_size=1, bias=False)
            self.decomp1, self.decomp2, self.decomp3 = (_series_decomp(torch, 5)
                                                        for _ in range(3))
            self.projection = nn.Conv1d(D, C, kernel_size=3, stride=1, padding=1,
                                        padding_mode="circular", bias=False)

        def forward(self, x, cross):
            x, trend1 = self.decomp1(x + self.self_attention(x, x, x))
            x, trend2 = self.decomp2(x + self.cross_attention(x, cross, cross))
            y = F.relu(self.conv1(x.transpose(-1, 1)))
            x, trend3 = self.decomp3(x + self.conv2(y).transpose(-1, 1))
            residual_trend = trend1 + trend2 + trend3
            residual_trend = self.projection(residual_trend.permute(0, 2, 1)).transpose(1, 2)
            return x, residual_trend

    class Autoformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.decomp = _series_decomp(torch, 5)
            self.enc_embedding = _token_embedding(torch, C, D)
            self.dec_embedding = _token_embedding(torch, C, D)
            self.encoder = EncoderLayer()
            self.enc_norm = my_Layernorm(D)
            self.decoder = DecoderLayer()
            self.dec_norm = my_Layernorm(D)
            self.projection = nn.Linear(D, C, bias=True)

        def forward(self, x_enc):
            mean = torch.mean(x_enc, dim=1).unsqueeze(1).repeat(1, pred, 1)
            zeros = torch.zeros([x_enc.shape[0], pred, x_enc.shape[2]], device=x_enc.device)
            seasonal_init, trend_init = self.decomp(x_enc)
            trend_init = torch.cat([trend_init[:, -label:, :], mean], dim=1)
            seasonal_init = torch.cat([seasonal_init[:, -label:, :], zeros], dim=1)
            enc_out = self.enc_norm(self.encoder(self.enc_embedding(x_enc)))
            seasonal_part, trend_part = self.decoder(self.dec_embedding(seasonal_init),
                                                     enc_out)
            seasonal_part = self.projection(self.dec_norm(seasonal_part))
            return (trend_init + trend_part + seasonal_part)[:, -pred:, :]

    def adjust_learning_rate(optimizer, epoch, learning_rate):
        lr_adjust = {epoch: learning_rate * (0.5 ** ((epoch - 1) // 1))}
        if epoch in lr_adjust.keys():
            lr = lr_adjust[epoch]
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr

    model = Autoformer()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()
    series = normal(torch, rng, B, L + pred, C).cumsum(1)
    res = {"losses": [], "lrs": []}
    for epoch in range(3):
        model.train()
        opt.zero_grad()
        loss = criterion(model(series[:, :L]), series[:, -pred:])
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        adjust_learning_rate(opt, epoch + 1, 1e-3)
        res["lrs"].append(opt.param_groups[0]["lr"])
    # biases whose gradient is zero in exact arithmetic (the projections before
    # auto-correlation, the LayerNorm bias my_Layernorm subtracts) get Adam steps of +-lr from
    # float noise in both libraries: compared through their gradients' size only
    res["params"] = [p for p in model.parameters() if p.grad.abs().max() > 1e-4]
    res["noise_grads"] = [p.grad.abs().max() < 1e-4 for p in model.parameters()]
    model.eval()
    with torch.no_grad():
        res["eval"] = model(series[:, :L])
    return res


def fedformer_program(torch):
    """FEDformer's FourierBlock as both generations of the repository write it: modes chosen
    from a NumPy permutation, the real (weights1, weights2) pair combined with torch.complex and
    multiplied by compl_mul1d's four real einsums, and the older complex-dtype Parameter
    (scale * rand(..., dtype=cfloat), from NumPy here) multiplied by a complex einsum; each
    writes the selected modes into a cfloat zeros buffer and irfft's it back; Adam steps on the
    complex Parameter too."""
    nn = torch.nn
    rng = np.random.default_rng(2703)
    B, L, H, E, modes = 2, 12, 2, 4, 3
    index = sorted(rng.permutation(L // 2)[:modes].tolist())

    class FourierBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.index = index
            self.scale = 1 / (H * E * H * E)
            self.weights1 = nn.Parameter(self.scale * torch.rand(H, E, E, len(self.index),
                                                                 dtype=torch.float))
            self.weights2 = nn.Parameter(self.scale * torch.rand(H, E, E, len(self.index),
                                                                 dtype=torch.float))

        def compl_mul1d(self, order, x, weights):
            x_flag = True
            w_flag = True
            if not torch.is_complex(x):
                x_flag = False
                x = torch.complex(x, torch.zeros_like(x).to(x.device))
            if not torch.is_complex(weights):
                w_flag = False
                weights = torch.complex(weights, torch.zeros_like(weights).to(weights.device))
            if x_flag or w_flag:
                return torch.complex(
                    torch.einsum(order, x.real, weights.real)
                    - torch.einsum(order, x.imag, weights.imag),
                    torch.einsum(order, x.real, weights.imag)
                    + torch.einsum(order, x.imag, weights.real))
            return torch.einsum(order, x.real, weights.real)

        def forward(self, q):
            B, L, H, E = q.shape
            x = q.permute(0, 2, 3, 1)
            x_ft = torch.fft.rfft(x, dim=-1)
            out_ft = torch.zeros(B, H, E, L // 2 + 1, device=x.device, dtype=torch.cfloat)
            for wi, i in enumerate(self.index):
                if i >= x_ft.shape[3] or wi >= out_ft.shape[3]:
                    continue
                out_ft[:, :, :, wi] = self.compl_mul1d(
                    "bhi,hio->bho", x_ft[:, :, :, i],
                    torch.complex(self.weights1, self.weights2)[:, :, :, wi])
            return torch.fft.irfft(out_ft, n=x.size(-1))

    class FourierBlockComplex(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.index = index
            self.weights1 = nn.Parameter(torch.from_numpy(w))

        def forward(self, q):
            B, L, H, E = q.shape
            x_ft = torch.fft.rfft(q.permute(0, 2, 3, 1), dim=-1)
            out_ft = torch.zeros(B, H, E, L // 2 + 1, device=q.device, dtype=torch.cfloat)
            for wi, i in enumerate(self.index):
                out_ft[:, :, :, wi] = torch.einsum("bhi,hio->bho", x_ft[:, :, :, i],
                                                   self.weights1[:, :, :, wi])
            return torch.fft.irfft(out_ft, n=L)

    res = {"index": index}
    block = FourierBlock()
    fill_(torch, block, rng)
    w = (rng.random((H, E, E, modes)) + 1j * rng.random((H, E, E, modes))).astype(np.complex64)
    cblock = FourierBlockComplex(w / (H * E * H * E))
    q = normal(torch, rng, B, L, H, E)
    target = normal(torch, rng, B, H, E, L)
    for name, m in (("real", block), ("complex", cblock)):
        opt = torch.optim.Adam(m.parameters(), lr=1e-2)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            out = m(q)
            loss = ((out - target) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        res[name + "_losses"] = losses
        res[name + "_out"] = out
        res[name + "_dtype"] = [str(out.dtype).rsplit(".", 1)[-1],
                                str(next(m.parameters()).grad.dtype).rsplit(".", 1)[-1]]
        res[name + "_params"] = [torch.view_as_real(p) if p.is_complex() else p
                                 for p in m.parameters()]
        st = opt.state[next(m.parameters())]
        res[name + "_state"] = [torch.view_as_real(st["exp_avg"]) if st["exp_avg"].is_complex()
                                else st["exp_avg"], st["exp_avg_sq"]]
    return res


PROGRAMS = [informer_program, autoformer_program, fedformer_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 FFT / attention accumulation order over a few Adam steps
        "autoformer_program": (1e-4, 1e-5),
        "informer_program": (1e-4, 1e-5),
        "fedformer_program": (1e-4, 1e-5),
    })
