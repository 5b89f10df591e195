"""Audio models of round 22, written as torchaudio-free research code writes them, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: a WaveNet
(mu-law classes, causal dilated convolutions, gated units, residual and skip 1x1 convolutions,
both weight_norm APIs, incremental sampling), HiFi-GAN (MRF generator, multi-period and
multi-scale discriminators, spectral_norm, LSGAN and feature-matching losses) and a Conv-TasNet
separator (global layer norm, depthwise-separable TCN blocks, masks, overlap-add decoder,
SI-SNR with permutation-invariant training)."""

import itertools
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round22_signal import _name, _run
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def wavenet_program(torch):
    """WaveNet: mu-law classes, causal dilated convs, gated units, residual/skip 1x1 convs."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2203)
    res = {}
    channels = 256

    def mu_law_encode(x, mu=channels - 1):
        mu = torch.tensor(mu, dtype=x.dtype)
        fx = torch.sign(x) * torch.log1p(mu * torch.abs(x)) / torch.log1p(mu)
        return ((fx + 1) / 2 * mu + 0.5).to(torch.int64)

    def mu_law_decode(q, mu=channels - 1):
        y = 2 * (q.float() / mu) - 1
        return torch.sign(y) * (1.0 / mu) * ((1 + mu) ** torch.abs(y) - 1)

    class CausalConv1d(nn.Conv1d):
        def __init__(self, cin, cout, kernel_size, dilation=1):
            super().__init__(cin, cout, kernel_size, dilation=dilation)
            self.left = (kernel_size - 1) * dilation

        def forward(self, x):
            return super().forward(F.pad(x, (self.left, 0)))

    class ResidualBlock(nn.Module):
        def __init__(self, res_ch, skip_ch, dilation):
            super().__init__()
            self.dilated = nn.utils.weight_norm(CausalConv1d(res_ch, 2 * res_ch, 2, dilation))
            self.res = nn.utils.parametrizations.weight_norm(nn.Conv1d(res_ch, res_ch, 1))
            self.skip = nn.Conv1d(res_ch, skip_ch, 1)

        def forward(self, x):
            h = self.dilated(x)
            filt, gate = h.chunk(2, dim=1)
            z = torch.tanh(filt) * torch.sigmoid(gate)
            return (x + self.res(z)) * math.sqrt(0.5), self.skip(z)

    class WaveNet(nn.Module):
        def __init__(self, res_ch=8, skip_ch=8, dilations=(1, 2, 4, 8, 1, 2)):
            super().__init__()
            self.embed = nn.Embedding(channels, res_ch)
            self.causal = CausalConv1d(res_ch, res_ch, 2)
            self.blocks = nn.ModuleList([ResidualBlock(res_ch, skip_ch, d) for d in dilations])
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(skip_ch, skip_ch, 1), nn.ReLU(),
                                     nn.Conv1d(skip_ch, channels, 1))
            self.receptive_field = 1 + sum(dilations) + 1

        def forward(self, q):
            x = self.causal(self.embed(q).transpose(1, 2))
            skips = 0
            for block in self.blocks:
                x, s = block(x)
                skips = skips + s
            return self.out(skips)

    model = WaveNet()
    fill_(torch, model, rng, 0.2)
    res["param_names"] = [n for n, _ in model.named_parameters()]
    t = torch.arange(96, dtype=torch.float32)
    audio = 0.6 * torch.sin(2 * math.pi * t / 24.0) * torch.exp(-t / 200.0)
    audio = (audio.unsqueeze(0) + normal(torch, rng, 2, 96) * 0.05).clamp(-1, 1)
    q = mu_law_encode(audio)
    res["q"], res["q_meta"] = q, [_name(q.dtype)]
    res["decoded"] = mu_law_decode(q)
    # the same classes with bucketize, as some data loaders compute them
    mu = channels - 1
    companded = torch.sign(audio) * torch.log1p(mu * audio.abs()) / math.log1p(mu)
    edges = torch.linspace(-1, 1, channels + 1)[1:-1]
    res["bucketized"] = torch.bucketize(companded, edges)
    res["rounded"] = torch.round((companded + 1) / 2 * mu).long()
    res["bucket_meta"] = [_name(res["bucketized"].dtype), _name(res["rounded"].dtype)]

    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    res["loss"], res["acc"] = [], []
    inputs, targets = q[:, :-1], q[:, 1:]
    for _ in range(3):
        logits = model(inputs)
        loss = F.cross_entropy(logits, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["acc"].append((logits.argmax(1) == targets).float().mean().item())
    res["g_grad"] = model.blocks[0].dilated.weight_g.grad
    res["v_grad"] = model.blocks[0].dilated.weight_v.grad
    res["orig_grad"] = model.blocks[0].res.parametrizations.weight.original1.grad

    # causality: the first outputs ignore a change to the last input sample
    with torch.no_grad():
        changed = inputs.clone()
        changed[:, -1] = (changed[:, -1] + 17) % channels
        a, b = model(inputs), model(changed)
        res["causal_gap"] = (a[..., :-1] - b[..., :-1]).abs().max()
        res["last_gap_positive"] = [bool((a[..., -1] - b[..., -1]).abs().max() > 0)]

    # incremental sampling: greedy argmax and a multinomial draw from fixed uniforms
    model.eval()
    generated = q[:, :model.receptive_field]
    uniforms = torch.from_numpy(rng.random((4, 2)).astype(np.float32))
    with torch.no_grad():
        for step in range(4):
            logits = model(generated[:, -model.receptive_field:])[:, :, -1]
            probs = F.softmax(logits / 0.8, dim=-1)
            cdf = probs.cumsum(-1)
            draw = torch.searchsorted(cdf, uniforms[step].unsqueeze(-1)).clamp(max=channels - 1)
            generated = torch.cat([generated, draw], dim=1)
    res["generated"] = generated
    res["waveform"] = mu_law_decode(generated)
    nn.utils.remove_weight_norm(model.blocks[0].dilated)
    nn.utils.parametrize.remove_parametrizations(model.blocks[0].res, "weight")
    res["removed"] = [type(model.blocks[0].res.weight).__name__,
                      str(hasattr(model.blocks[0].dilated, "weight_g"))]
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    return res


def hifigan_program(torch):
    """HiFi-GAN: MRF generator, multi-period and multi-scale discriminators, LSGAN and
    feature-matching losses, spectral_norm/weight_norm, two AdamW optimizers, ExponentialLR."""
    nn, F = torch.nn, torch.nn.functional
    wn, sn = nn.utils.weight_norm, nn.utils.spectral_norm
    rng = np.random.default_rng(2206)
    res = {}

    def get_padding(k, d=1):
        return int((k * d - d) / 2)

    class ResBlock(nn.Module):
        def __init__(self, ch, k=3, dilations=(1, 3)):
            super().__init__()
            self.convs1 = nn.ModuleList([wn(nn.Conv1d(ch, ch, k, 1, dilation=d,
                                                      padding=get_padding(k, d)))
                                         for d in dilations])
            self.convs2 = nn.ModuleList([wn(nn.Conv1d(ch, ch, k, 1, dilation=1,
                                                      padding="same")) for _ in dilations])

        def forward(self, x):
            for c1, c2 in zip(self.convs1, self.convs2):
                xt = c2(F.leaky_relu(c1(F.leaky_relu(x, 0.1)), 0.1))
                x = xt + x
            return x

        def remove_weight_norm(self):
            for conv in [*self.convs1, *self.convs2]:
                nn.utils.remove_weight_norm(conv)

    class Generator(nn.Module):
        def __init__(self, mels=6, ch=8):
            super().__init__()
            self.conv_pre = wn(nn.Conv1d(mels, ch, 7, 1, padding=3))
            self.ups = nn.ModuleList([wn(nn.ConvTranspose1d(ch, ch // 2, 4, 2, padding=1)),
                                      wn(nn.ConvTranspose1d(ch // 2, ch // 4, 4, 2, padding=1))])
            self.resblocks = nn.ModuleList([ResBlock(ch // 2, 3), ResBlock(ch // 2, 5, (1, 2)),
                                            ResBlock(ch // 4, 3), ResBlock(ch // 4, 5, (1, 2))])
            self.conv_post = wn(nn.Conv1d(ch // 4, 1, 7, 1, padding=3, padding_mode="reflect"))

        def forward(self, x):
            x = self.conv_pre(x)
            for i, up in enumerate(self.ups):
                x = up(F.leaky_relu(x, 0.1))
                xs = sum(self.resblocks[i * 2 + j](x) for j in range(2))
                x = xs / 2
            return torch.tanh(self.conv_post(F.leaky_relu(x)))

    class DiscriminatorP(nn.Module):
        def __init__(self, period):
            super().__init__()
            self.period = period
            self.convs = nn.ModuleList([wn(nn.Conv2d(1, 4, (5, 1), (3, 1), padding=(2, 0))),
                                        wn(nn.Conv2d(4, 8, (5, 1), (3, 1), padding=(2, 0))),
                                        wn(nn.Conv2d(8, 8, (5, 1), 1, padding=(2, 0)))])
            self.conv_post = wn(nn.Conv2d(8, 1, (3, 1), 1, padding=(1, 0)))

        def forward(self, x):
            fmap = []
            b, c, t = x.shape
            if t % self.period != 0:
                n_pad = self.period - (t % self.period)
                x = F.pad(x, (0, n_pad), "reflect")
                t = t + n_pad
            x = x.view(b, c, t // self.period, self.period)
            for layer in self.convs:
                x = F.leaky_relu(layer(x), 0.1)
                fmap.append(x)
            x = self.conv_post(x)
            fmap.append(x)
            return torch.flatten(x, 1, -1), fmap

    class DiscriminatorS(nn.Module):
        def __init__(self, use_spectral_norm=False):
            super().__init__()
            norm_f = sn if use_spectral_norm else wn
            self.convs = nn.ModuleList([norm_f(nn.Conv1d(1, 8, 15, 1, padding=7)),
                                        norm_f(nn.Conv1d(8, 8, 41, 2, groups=4, padding=20)),
                                        norm_f(nn.Conv1d(8, 8, 5, 1, padding=2))])
            self.conv_post = norm_f(nn.Conv1d(8, 1, 3, 1, padding=1))

        def forward(self, x):
            fmap = []
            for layer in self.convs:
                x = F.leaky_relu(layer(x), 0.1)
                fmap.append(x)
            x = self.conv_post(x)
            fmap.append(x)
            return torch.flatten(x, 1, -1), fmap

    class MultiDiscriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.periods = nn.ModuleList([DiscriminatorP(p) for p in (2, 3, 5)])
            self.scales = nn.ModuleList([DiscriminatorS(True), DiscriminatorS()])
            self.meanpool = nn.AvgPool1d(4, 2, padding=2)

        def forward(self, y, y_hat):
            outs = []
            for d in self.periods:
                outs.append((d(y), d(y_hat)))
            for i, d in enumerate(self.scales):
                if i:
                    y, y_hat = self.meanpool(y), self.meanpool(y_hat)
                outs.append((d(y), d(y_hat)))
            return outs

    def feature_loss(fmap_r, fmap_g):
        loss = 0
        for dr, dg in zip(fmap_r, fmap_g):
            for rl, gl in zip(dr, dg):
                loss += torch.mean(torch.abs(rl - gl))
        return loss * 2

    def discriminator_loss(real_outs, gen_outs):
        loss = 0
        for dr, dg in zip(real_outs, gen_outs):
            loss += torch.mean((1 - dr) ** 2) + torch.mean(dg ** 2)
        return loss

    def generator_loss(gen_outs):
        return sum(torch.mean((1 - dg) ** 2) for dg in gen_outs)

    gen, disc = Generator(), MultiDiscriminator()
    fill_(torch, gen, rng, 0.3)
    fill_(torch, disc, rng, 0.2)
    with torch.no_grad():      # spectral_norm's power-iteration vectors start from the data
        for name, buf in disc.named_buffers():
            if name.endswith(("weight_u", "weight_v")):
                value = rng.standard_normal(tuple(buf.shape)).astype(np.float32)
                buf.copy_(F.normalize(torch.from_numpy(value), dim=0))
    res["disc_buffers"] = [n for n, _ in disc.named_buffers()]
    mel = normal(torch, rng, 2, 6, 16)
    wav = torch.tanh(normal(torch, rng, 2, 1, 64))
    opt_g = torch.optim.AdamW(gen.parameters(), 2e-3, betas=(0.8, 0.99))
    opt_d = torch.optim.AdamW(disc.parameters(), 2e-3, betas=(0.8, 0.99))
    sched_g = torch.optim.lr_scheduler.ExponentialLR(opt_g, gamma=0.999)
    sched_d = torch.optim.lr_scheduler.ExponentialLR(opt_d, gamma=0.999)
    res["d_loss"], res["g_loss"], res["fm"], res["lr"] = [], [], [], []
    for _ in range(3):
        y_hat = gen(mel)
        outs = disc(wav, y_hat.detach())
        loss_d = discriminator_loss([o[0][0] for o in outs], [o[1][0] for o in outs])
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()

        outs = disc(wav, y_hat)
        fm = feature_loss([o[0][1] for o in outs], [o[1][1] for o in outs])
        loss_g = generator_loss([o[1][0] for o in outs]) + fm + F.l1_loss(y_hat, wav) * 45
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        sched_g.step()
        sched_d.step()
        res["d_loss"].append(loss_d.item())
        res["g_loss"].append(loss_g.item())
        res["fm"].append(fm.item())
        res["lr"].append(sched_g.get_last_lr()[0])
    res["u"] = disc.scales[0].convs[0].weight_u
    res["sigma_weight"] = disc.scales[0].convs[1].weight
    disc.eval()
    with torch.no_grad():
        res["eval_scores"] = torch.cat([o[1][0] for o in disc(wav, gen(mel))], dim=1)
    gen.eval()
    for block in gen.resblocks:
        block.remove_weight_norm()
    for up in gen.ups:
        nn.utils.remove_weight_norm(up)
    with torch.no_grad():
        res["inference"] = gen(mel)
    res["gen_params"] = torch.cat([p.detach().flatten() for p in gen.parameters()])
    res["disc_params"] = torch.cat([p.detach().flatten() for p in disc.parameters()])
    return res



def separation_program(torch):
    """Conv-TasNet: learned encoder, gLN, separable dilated blocks, masks, SI-SNR with PIT."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2207)
    res = {}
    n_src, enc_dim, kernel = 2, 8, 8
    stride = kernel // 2

    class GlobalLayerNorm(nn.Module):
        def __init__(self, ch):
            super().__init__()
            self.gamma = nn.Parameter(torch.ones(1, ch, 1))
            self.beta = nn.Parameter(torch.zeros(1, ch, 1))

        def forward(self, y):
            mean = y.mean(dim=(1, 2), keepdim=True)
            var = ((y - mean) ** 2).mean(dim=(1, 2), keepdim=True)
            return self.gamma * (y - mean) / torch.pow(var + 1e-8, 0.5) + self.beta

    class TCNBlock(nn.Module):
        def __init__(self, ch, hidden, dilation):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv1d(ch, hidden, 1), nn.PReLU(), GlobalLayerNorm(hidden),
                nn.Conv1d(hidden, hidden, 3, padding=dilation, dilation=dilation,
                          groups=hidden, bias=False),
                nn.PReLU(num_parameters=hidden), nn.GroupNorm(1, hidden, eps=1e-8))
            self.res_out, self.skip_out = nn.Conv1d(hidden, ch, 1), nn.Conv1d(hidden, ch, 1)

        def forward(self, x):
            h = self.net(x)
            return x + self.res_out(h), self.skip_out(h)

    class ConvTasNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Conv1d(1, enc_dim, kernel, stride=stride, bias=False)
            self.ln = nn.GroupNorm(1, enc_dim)
            self.bottleneck = nn.Conv1d(enc_dim, enc_dim, 1)
            self.blocks = nn.ModuleList([TCNBlock(enc_dim, 12, 2 ** i) for i in range(3)])
            self.mask = nn.Sequential(nn.PReLU(), nn.Conv1d(enc_dim, n_src * enc_dim, 1))
            self.decoder = nn.ConvTranspose1d(enc_dim, 1, kernel, stride=stride, bias=False)

        def forward(self, mix):
            length = mix.shape[-1]
            rest = (stride - (length - kernel) % stride) % stride
            mix = F.pad(mix.unsqueeze(1), (stride, rest + stride))
            w = F.relu(self.encoder(mix))
            x = self.bottleneck(self.ln(w))
            skip = torch.zeros_like(x)
            for block in self.blocks:
                x, s = block(x)
                skip = skip + s
            masks = torch.sigmoid(self.mask(skip)).view(mix.shape[0], n_src, enc_dim, -1)
            est = (w.unsqueeze(1) * masks).flatten(0, 1)
            out = self.decoder(est).view(mix.shape[0], n_src, -1)
            return out[..., stride:stride + length]

    def si_snr(est, ref, eps=1e-8):
        est = est - est.mean(dim=-1, keepdim=True)
        ref = ref - ref.mean(dim=-1, keepdim=True)
        proj = torch.sum(est * ref, -1, keepdim=True) * ref / (ref.pow(2).sum(-1, keepdim=True)
                                                               + eps)
        noise = est - proj
        return 10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps)

    def pit_loss(est, ref):
        perms = list(itertools.permutations(range(n_src)))
        scores = torch.stack([si_snr(est[:, list(p)], ref).mean(-1) for p in perms], dim=1)
        best, idx = scores.max(dim=1)
        return -best.mean(), idx

    model = ConvTasNet()
    # gLN keeps its ones/zeros; the rest (conv and PReLU parameters) come from the data
    fill_(torch, [p for n, p in model.named_parameters() if not n.endswith(("gamma", "beta"))],
          rng, 0.3)
    t = torch.arange(62, dtype=torch.float32)
    sources = torch.stack([torch.sin(2 * math.pi * t / 9.0), torch.sign(torch.sin(t / 5.0))])
    sources = sources.unsqueeze(0) * torch.tensor([[[1.0], [0.5]], [[0.3], [1.2]]])
    sources = sources + normal(torch, rng, 2, n_src, 62) * 0.05
    mix = sources.sum(1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0)
    res["loss"], res["perm"], res["lr"] = [], [], []
    for _ in range(4):
        est = model(mix)
        loss, perm = pit_loss(est, sources)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0, norm_type=2.0)
        opt.step()
        sched.step(1.0)             # a flat validation metric: the rate halves from step 2
        res["loss"].append(loss.item())
        res["perm"].append(perm)
        res["lr"].append(opt.param_groups[0]["lr"])
    res["prelu_grad"] = model.blocks[0].net[1].weight.grad
    res["gln_grad"] = model.blocks[0].net[2].gamma.grad
    model.eval()
    with torch.no_grad():
        est = model(mix)
        res["est"] = est
        res["sdr_improvement"] = si_snr(est, sources) - si_snr(mix.unsqueeze(1).expand_as(
            sources), sources)
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    return res


PROGRAMS = [wavenet_program, hifigan_program, separation_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    ours, our_warnings = _run(ember, program)
    theirs, their_warnings = _run(torch, program)
    assert our_warnings == their_warnings
    assert_same_results(ours, theirs, rtol=2e-4, atol=2e-5)
