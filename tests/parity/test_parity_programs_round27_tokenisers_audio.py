"""Audio and token-generation programs of the tokeniser round, written as their reference
repositories write them in torch and run once with `torch` bound to ember and once to PyTorch
from the same NumPy data: HiFi-GAN (weight-normed generator with ConvTranspose1d upsampling and
dilated ResBlock1s, multi-period discriminators reshaping 1-D audio into 2-D after a reflect
pad, multi-scale discriminators with spectral_norm and AvgPool1d, feature-matching, LSGAN
losses, AdamW with ExponentialLR, remove_weight_norm for inference) and MaskGIT (cosine
mask schedule, masked-token cross entropy with ignore_index and label smoothing, iterative
confidence-based decoding with gather/sort/scatter and lucidrains' topk variant)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def hifigan_program(torch):
    """jik876/hifi-gan: Generator, MultiPeriodDiscriminator and MultiScaleDiscriminator as
    models.py writes them (LRELU_SLOPE 0.1, get_padding, init_weights then NumPy weights,
    spectral_norm's u set from NumPy), discriminator then generator steps with
    itertools.chain over both discriminators, feature_loss / discriminator_loss /
    generator_loss, schedulers stepped per epoch, then remove_weight_norm and inference."""
    import itertools

    nn, F = torch.nn, torch.nn.functional
    remove_weight_norm = torch.nn.utils.remove_weight_norm
    spectral_norm, weight_norm = torch.nn.utils.spectral_norm, torch.nn.utils.weight_norm
    rng = np.random.default_rng(2711)
    LRELU_SLOPE = 0.1

    def get_padding(kernel_size, dilation=1):
        return int((kernel_size * dilation - dilation) / 2)

    class ResBlock1(nn.Module):
        def __init__(self, channels, kernel_size=3, dilation=(1, 3)):
            super().__init__()
            self.convs1 = nn.ModuleList([
                weight_norm(nn.Conv1d(channels, channels, kernel_size, 1, dilation=d,
                                      padding=get_padding(kernel_size, d))) for d in dilation])
            self.convs2 = nn.ModuleList([
                weight_norm(nn.Conv1d(channels, channels, kernel_size, 1, dilation=1,
                                      padding=get_padding(kernel_size, 1))) for _ in dilation])

        def forward(self, x):
            for c1, c2 in zip(self.convs1, self.convs2):
                xt = F.leaky_relu(x, LRELU_SLOPE)
                xt = c1(xt)
                xt = F.leaky_relu(xt, LRELU_SLOPE)
                xt = c2(xt)
                x = xt + x
            return x

        def remove_weight_norm(self):
            for layer in self.convs1:
                remove_weight_norm(layer)
            for layer in self.convs2:
                remove_weight_norm(layer)

    class Generator(nn.Module):
        def __init__(self, rates=(2, 2), kernels=(4, 4), ch=8):
            super().__init__()
            self.num_kernels, self.num_upsamples = 1, len(rates)
            self.conv_pre = weight_norm(nn.Conv1d(4, ch, 7, 1, padding=3))
            self.ups = nn.ModuleList()
            for i, (u, k) in enumerate(zip(rates, kernels)):
                self.ups.append(weight_norm(nn.ConvTranspose1d(
                    ch // (2 ** i), ch // (2 ** (i + 1)), k, u, padding=(k - u) // 2)))
            self.resblocks = nn.ModuleList([ResBlock1(ch // (2 ** (i + 1)))
                                            for i in range(len(self.ups))])
            self.conv_post = weight_norm(nn.Conv1d(ch // 4, 1, 7, 1, padding=3))

        def forward(self, x):
            x = self.conv_pre(x)
            for i in range(self.num_upsamples):
                x = F.leaky_relu(x, LRELU_SLOPE)
                x = self.ups[i](x)
                xs = None
                for j in range(self.num_kernels):
                    r = self.resblocks[i * self.num_kernels + j](x)
                    xs = r if xs is None else xs + r
                x = xs / self.num_kernels
            x = F.leaky_relu(x)
            x = self.conv_post(x)
            return torch.tanh(x)

        def remove_weight_norm(self):
            for layer in self.ups:
                remove_weight_norm(layer)
            for block in self.resblocks:
                block.remove_weight_norm()
            remove_weight_norm(self.conv_pre)
            remove_weight_norm(self.conv_post)

    class DiscriminatorP(nn.Module):
        def __init__(self, period, kernel_size=5, stride=3):
            super().__init__()
            self.period = period
            self.convs = nn.ModuleList([
                weight_norm(nn.Conv2d(1, 4, (kernel_size, 1), (stride, 1),
                                      padding=(get_padding(5, 1), 0))),
                weight_norm(nn.Conv2d(4, 8, (kernel_size, 1), 1, padding=(2, 0)))])
            self.conv_post = weight_norm(nn.Conv2d(8, 1, (3, 1), 1, padding=(1, 0)))

        def forward(self, x):
            fmap = []
            b, c, t = x.shape
            if t % self.period != 0:
                n_pad = self.period - (t % self.period)
                x = F.pad(x, (0, n_pad), "reflect")
                t = t + n_pad
            x = x.view(b, c, t // self.period, self.period)
            for layer in self.convs:
                x = layer(x)
                x = F.leaky_relu(x, LRELU_SLOPE)
                fmap.append(x)
            x = self.conv_post(x)
            fmap.append(x)
            x = torch.flatten(x, 1, -1)
            return x, fmap

    class DiscriminatorS(nn.Module):
        def __init__(self, use_spectral_norm=False):
            super().__init__()
            norm_f = weight_norm if not use_spectral_norm else spectral_norm
            self.convs = nn.ModuleList([
                norm_f(nn.Conv1d(1, 4, 15, 1, padding=7)),
                norm_f(nn.Conv1d(4, 8, 41, 2, groups=4, padding=20))])
            self.conv_post = norm_f(nn.Conv1d(8, 1, 3, 1, padding=1))

        def forward(self, x):
            fmap = []
            for layer in self.convs:
                x = F.leaky_relu(layer(x), LRELU_SLOPE)
                fmap.append(x)
            x = self.conv_post(x)
            fmap.append(x)
            return torch.flatten(x, 1, -1), fmap

    class MultiDiscriminator(nn.Module):
        def __init__(self, discriminators, pools=None):
            super().__init__()
            self.discriminators = nn.ModuleList(discriminators)
            self.meanpools = nn.ModuleList(pools or [])

        def forward(self, y, y_hat):
            y_d_rs, y_d_gs, fmap_rs, fmap_gs = [], [], [], []
            for i, d in enumerate(self.discriminators):
                if self.meanpools and i != 0:
                    y = self.meanpools[i - 1](y)
                    y_hat = self.meanpools[i - 1](y_hat)
                y_d_r, fmap_r = d(y)
                y_d_g, fmap_g = d(y_hat)
                y_d_rs.append(y_d_r)
                fmap_rs.append(fmap_r)
                y_d_gs.append(y_d_g)
                fmap_gs.append(fmap_g)
            return y_d_rs, y_d_gs, fmap_rs, fmap_gs

    def feature_loss(fmap_r, fmap_g):
        loss = 0
        for dr, dg in zip(fmap_r, fmap_g):
            for rl, gl in zip(dr, dg):
                loss += torch.mean(torch.abs(rl - gl))
        return loss * 2

    def discriminator_loss(disc_real_outputs, disc_generated_outputs):
        loss, r_losses, g_losses = 0, [], []
        for dr, dg in zip(disc_real_outputs, disc_generated_outputs):
            r_loss = torch.mean((1 - dr) ** 2)
            g_loss = torch.mean(dg ** 2)
            loss += r_loss + g_loss
            r_losses.append(r_loss.item())
            g_losses.append(g_loss.item())
        return loss, r_losses, g_losses

    def generator_loss(disc_outputs):
        loss, gen_losses = 0, []
        for dg in disc_outputs:
            l_ = torch.mean((1 - dg) ** 2)
            gen_losses.append(l_)
            loss += l_
        return loss, gen_losses

    def init_weights(m, mean=0.0, std=0.01):
        if m.__class__.__name__.find("Conv") != -1:
            m.weight.data.normal_(mean, std)

    generator = Generator()
    generator.ups.apply(init_weights)
    mpd = MultiDiscriminator([DiscriminatorP(2), DiscriminatorP(3)])
    msd = MultiDiscriminator([DiscriminatorS(use_spectral_norm=True), DiscriminatorS()],
                             [nn.AvgPool1d(4, 2, padding=2)])
    for m in (generator, mpd, msd):
        fill_(torch, m, rng, 0.3)
    with torch.no_grad():
        for m in msd.modules():
            if hasattr(m, "weight_u"):
                u = rng.standard_normal(tuple(m.weight_u.shape)).astype(np.float32)
                m.weight_u.copy_(torch.from_numpy(u / np.linalg.norm(u)))
    optim_g = torch.optim.AdamW(generator.parameters(), 2e-3, betas=(0.8, 0.99))
    optim_d = torch.optim.AdamW(itertools.chain(msd.parameters(), mpd.parameters()), 2e-3,
                                betas=(0.8, 0.99))
    scheduler_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=0.9, last_epoch=-1)
    scheduler_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=0.9, last_epoch=-1)
    res = {"d": [], "g": [], "r_losses": [], "lr": [], "shapes": []}
    generator.train(), mpd.train(), msd.train()
    for epoch in range(3):
        x = normal(torch, rng, 2, 4, 5)
        y = normal(torch, rng, 2, 1, 20) * 0.5
        y_g_hat = generator(x)
        optim_d.zero_grad()
        y_df_hat_r, y_df_hat_g, _, _ = mpd(y, y_g_hat.detach())
        loss_disc_f, r_losses, _ = discriminator_loss(y_df_hat_r, y_df_hat_g)
        y_ds_hat_r, y_ds_hat_g, _, _ = msd(y, y_g_hat.detach())
        loss_disc_s, _, _ = discriminator_loss(y_ds_hat_r, y_ds_hat_g)
        loss_disc_all = loss_disc_s + loss_disc_f
        loss_disc_all.backward()
        optim_d.step()
        optim_g.zero_grad()
        loss_wav = F.l1_loss(y, y_g_hat) * 45
        y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = mpd(y, y_g_hat)
        y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = msd(y, y_g_hat)
        loss_fm_f = feature_loss(fmap_f_r, fmap_f_g)
        loss_fm_s = feature_loss(fmap_s_r, fmap_s_g)
        loss_gen_f, _ = generator_loss(y_df_hat_g)
        loss_gen_s, _ = generator_loss(y_ds_hat_g)
        loss_gen_all = loss_gen_s + loss_gen_f + loss_fm_s + loss_fm_f + loss_wav
        loss_gen_all.backward()
        optim_g.step()
        scheduler_g.step()
        scheduler_d.step()
        res["d"].append(loss_disc_all.item())
        res["g"].append(loss_gen_all.item())
        res["r_losses"].append(r_losses)
        res["lr"].append(scheduler_g.get_last_lr()[0])
        res["shapes"] += [tuple(f.shape) for fm in fmap_f_r for f in fm][:4]
    sn = msd.discriminators[0].convs[0]
    res["sn"] = [sn.weight_u, sn.weight_v, sn.weight_orig]
    res["g_params"] = [p for p in generator.parameters()]
    res["d_params"] = list(mpd.parameters()) + list(msd.parameters())
    generator.eval()
    generator.remove_weight_norm()
    with torch.no_grad():
        x = normal(torch, rng, 1, 4, 6)
        res["infer"] = generator(x).squeeze()
    res["names"] = sorted(generator.state_dict().keys())[:6]
    return res


def maskgit_program(torch):
    """MaskGIT as google-research/maskgit and lucidrains/muse-maskgit-pytorch write it: a
    bidirectional pre-norm TransformerEncoder over VQ tokens plus a mask token, the cosine
    schedule picking how many tokens to mask, masked positions chosen by argsort of NumPy
    scores and written with scatter, cross entropy on masked positions only (ignore_index,
    label smoothing); then iterative decoding: Gumbel-perturbed confidences (NumPy noise)
    annealed by the schedule, gather of the chosen tokens' probabilities, inf on known
    positions, a cut-off from sort + gather, and the topk/scatter remasking variant."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2712)
    V, n, dim, B = 7, 8, 16, 3
    mask_id = V

    class BidirectionalTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(V + 1, dim)
            self.pos_emb = nn.Parameter(torch.zeros(1, n, dim))
            layer = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.transformer = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.ln = nn.LayerNorm(dim)
            self.to_logits = nn.Linear(dim, V)

        def forward(self, ids):
            h = self.tok_emb(ids) + self.pos_emb[:, :ids.shape[1]]
            return self.to_logits(self.ln(self.transformer(h)))

    def cosine_schedule(t):
        return torch.cos(t * math.pi * 0.5)

    model = BidirectionalTransformer()
    fill_(torch, model, rng, 0.2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.96), weight_decay=0.045)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    res = {"losses": [], "n_masked": []}
    for _ in range(3):
        ids = torch.from_numpy(rng.integers(0, V, (B, n)))
        rand_time = torch.from_numpy(rng.uniform(0, 1, B).astype(np.float32))
        rand_mask_probs = cosine_schedule(rand_time)
        num_token_masked = (n * rand_mask_probs).round().clamp(min=1)
        scores = torch.from_numpy(rng.random((B, n)).astype(np.float32))
        ranks = scores.argsort(dim=-1).argsort(dim=-1)
        mask = ranks < num_token_masked[:, None]
        labels = torch.where(mask, ids, -1)
        x = torch.where(mask, mask_id, ids)
        logits = model(x)
        loss = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-1,
                               label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["n_masked"].append(num_token_masked.long().tolist())
    # the key projection's bias (and its weight along directions all tokens share) gets a
    # gradient of zero up to rounding, which AdamW's normalised step turns into noise: compare
    # the query and value rows of in_proj only
    res["params"] = [p for name, p in model.named_parameters() if "in_proj" not in name]
    res["in_proj_qv"] = [torch.cat([p[:dim], p[2 * dim:]]) for name, p in
                         model.named_parameters() if "in_proj" in name]

    # iterative decoding (maskgit's decode loop, choice_temperature annealed)
    model.eval()
    steps, choice_temperature = 4, 4.5
    ids = torch.full((B, n), mask_id, dtype=torch.long)
    unknown_number_in_the_beginning = torch.sum(ids == mask_id, dim=-1)
    trace = []
    with torch.no_grad():
        for step in range(steps):
            logits = model(ids)
            g = torch.from_numpy(-np.log(-np.log(rng.uniform(0.01, 0.99, (B, n, V))))
                                 .astype(np.float32))
            sampled_ids = torch.argmax(logits.log_softmax(-1) + g, dim=-1)
            unknown_map = ids == mask_id
            sampled_ids = torch.where(unknown_map, sampled_ids, ids)
            ratio = 1.0 * (step + 1) / steps
            mask_ratio = cosine_schedule(torch.tensor(ratio))
            probs = F.softmax(logits, dim=-1)
            selected_probs = torch.squeeze(
                torch.gather(probs, -1, sampled_ids.unsqueeze(-1)), -1)
            selected_probs = torch.where(unknown_map, selected_probs, math.inf)
            mask_len = torch.floor(unknown_number_in_the_beginning * mask_ratio).unsqueeze(1)
            mask_len = torch.maximum(torch.ones_like(mask_len),
                                     torch.minimum(torch.sum(unknown_map, dim=-1,
                                                             keepdim=True) - 1, mask_len))
            noise = torch.from_numpy(-np.log(-np.log(rng.uniform(0.01, 0.99, (B, n))))
                                     .astype(np.float32))
            confidence = torch.log(selected_probs) + choice_temperature * (1.0 - ratio) * noise
            sorted_confidence, _ = torch.sort(confidence, dim=-1)
            cut_off = torch.gather(sorted_confidence, -1, mask_len.long())
            masking = confidence < cut_off
            ids = torch.where(masking, mask_id, sampled_ids)
            trace.append(ids.flatten().tolist())
            res.setdefault("mask_len", []).append(mask_len.flatten().tolist())
    res["decode"] = trace
    res["decode_dtypes"] = [str(t.dtype).split(".")[-1]
                            for t in (mask_len, cut_off, selected_probs, ids)]

    # lucidrains' variant: remask the lowest-scoring tokens through topk + scatter
    ids = torch.full((B, n), mask_id, dtype=torch.long)
    scores = torch.zeros((B, n))
    picks = []
    with torch.no_grad():
        for step in range(3):
            t = torch.tensor((step + 1) / 3)
            num_masked = max(int((cosine_schedule(t) * n).item()), 1) if step < 2 else 0
            if num_masked:
                masked_indices = scores.topk(num_masked, dim=-1).indices
                ids = ids.scatter(1, masked_indices, mask_id)
            logits = model(ids)
            probs = logits.softmax(dim=-1)
            pred_ids = probs.argmax(dim=-1)
            is_mask = ids == mask_id
            ids = torch.where(is_mask, pred_ids, ids)
            probs_without_temperature = probs.gather(2, pred_ids[..., None])
            scores = 1 - probs_without_temperature.squeeze(-1)
            scores = scores.masked_fill(~is_mask, -1e5)
            picks += ids.flatten().tolist()
    res["topk_decode"] = picks
    res["scores"] = scores
    return res


PROGRAMS = [hifigan_program, maskgit_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
