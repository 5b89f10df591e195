"""VITS's adversarial half written as the VITS repository writes it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: a HiFi-GAN generator
under the old weight_norm hooks (removed for inference), multi-period and multi-scale
discriminators (reflect padding, the 2-D period view, parametrized spectral_norm with its power
iteration in place), a mel loss through stft, feature matching, least-squares GAN losses, two
AdamW optimizers with ExponentialLR and a disabled GradScaler. Sibling of _speech."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def vits_gan_program(torch):
    """VITS's adversarial half: a HiFi-GAN-lite generator (weight_norm ConvTranspose1d and
    ResBlock1, removed for inference), multi-period (reflect pad, 2-D view) and scale
    (parametrized spectral_norm, power iteration in place) discriminators, mel loss through
    stft, feature matching, two AdamW optimizers with ExponentialLR, a disabled GradScaler."""
    rng = np.random.default_rng(4)
    F = torch.nn.functional
    LRELU_SLOPE = 0.1

    def get_padding(kernel_size, dilation=1):
        return int((kernel_size * dilation - dilation) / 2)

    class ResBlock1(torch.nn.Module):
        def __init__(self, channels, kernel_size=3, dilation=(1, 3)):
            super().__init__()
            wn = torch.nn.utils.weight_norm
            self.convs1 = torch.nn.ModuleList([
                wn(torch.nn.Conv1d(channels, channels, kernel_size, 1, dilation=d,
                                   padding=get_padding(kernel_size, d))) for d in dilation])
            self.convs2 = torch.nn.ModuleList([
                wn(torch.nn.Conv1d(channels, channels, kernel_size, 1, dilation=1,
                                   padding=get_padding(kernel_size, 1))) for _ in dilation])

        def forward(self, x, x_mask=None):
            for c1, c2 in zip(self.convs1, self.convs2):
                xt = F.leaky_relu(x, LRELU_SLOPE)
                xt = c1(xt)
                xt = F.leaky_relu(xt, LRELU_SLOPE)
                xt = c2(xt)
                x = xt + x
            return x

        def remove_weight_norm(self):
            for layer in self.convs1:
                torch.nn.utils.remove_weight_norm(layer)
            for layer in self.convs2:
                torch.nn.utils.remove_weight_norm(layer)

    class Generator(torch.nn.Module):
        def __init__(self, c_in=4, ch=8):
            super().__init__()
            self.conv_pre = torch.nn.Conv1d(c_in, ch, 7, 1, padding=3)
            self.ups = torch.nn.ModuleList([
                torch.nn.utils.weight_norm(torch.nn.ConvTranspose1d(ch, ch // 2, 4, 2, padding=1)),
                torch.nn.utils.weight_norm(torch.nn.ConvTranspose1d(ch // 2, ch // 4, 4, 2,
                                                                    padding=1))])
            self.resblocks = torch.nn.ModuleList([ResBlock1(ch // 2), ResBlock1(ch // 4)])
            self.conv_post = torch.nn.Conv1d(ch // 4, 1, 7, 1, padding=3, bias=False)

        def forward(self, x):
            x = self.conv_pre(x)
            for up, rb in zip(self.ups, self.resblocks):
                x = F.leaky_relu(x, LRELU_SLOPE)
                x = rb(up(x))
            x = F.leaky_relu(x)
            return torch.tanh(self.conv_post(x))

        def remove_weight_norm(self):
            for layer in self.ups:
                torch.nn.utils.remove_weight_norm(layer)
            for layer in self.resblocks:
                layer.remove_weight_norm()

    class DiscriminatorP(torch.nn.Module):
        def __init__(self, period):
            super().__init__()
            self.period = period
            norm_f = torch.nn.utils.weight_norm
            self.convs = torch.nn.ModuleList([
                norm_f(torch.nn.Conv2d(1, 4, (5, 1), (3, 1), padding=(get_padding(5, 1), 0))),
                norm_f(torch.nn.Conv2d(4, 4, (3, 1), 1, padding=(1, 0)))])
            self.conv_post = norm_f(torch.nn.Conv2d(4, 1, (3, 1), 1, padding=(1, 0)))

        def forward(self, x):
            fmap = []
            b, c, t = x.shape
            if t % self.period != 0:
                n_pad = self.period - (t % self.period)
                x = F.pad(x, (0, n_pad), "reflect")
                t = t + n_pad
            x = x.view(b, c, t // self.period, self.period)
            for layer in self.convs:
                x = F.leaky_relu(layer(x), LRELU_SLOPE)
                fmap.append(x)
            x = self.conv_post(x)
            fmap.append(x)
            return torch.flatten(x, 1, -1), fmap

    class DiscriminatorS(torch.nn.Module):
        def __init__(self):
            super().__init__()
            norm_f = torch.nn.utils.parametrizations.spectral_norm
            self.convs = torch.nn.ModuleList([
                norm_f(torch.nn.Conv1d(1, 4, 5, 1, padding=2)),
                norm_f(torch.nn.Conv1d(4, 4, 5, 2, groups=2, padding=2))])
            self.conv_post = norm_f(torch.nn.Conv1d(4, 1, 3, 1, padding=1))

        def forward(self, x):
            fmap = []
            for layer in self.convs:
                x = F.leaky_relu(layer(x), LRELU_SLOPE)
                fmap.append(x)
            x = self.conv_post(x)
            fmap.append(x)
            return torch.flatten(x, 1, -1), fmap

    class MultiPeriodDiscriminator(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.discriminators = torch.nn.ModuleList([DiscriminatorS(), DiscriminatorP(2),
                                                       DiscriminatorP(3)])

        def forward(self, y, y_hat):
            y_d_rs, y_d_gs, fmap_rs, fmap_gs = [], [], [], []
            for d in self.discriminators:
                y_d_r, fmap_r = d(y)
                y_d_g, fmap_g = d(y_hat)
                y_d_rs.append(y_d_r)
                y_d_gs.append(y_d_g)
                fmap_rs.append(fmap_r)
                fmap_gs.append(fmap_g)
            return y_d_rs, y_d_gs, fmap_rs, fmap_gs

    def feature_loss(fmap_r, fmap_g):
        loss = 0
        for dr, dg in zip(fmap_r, fmap_g):
            for rl, gl in zip(dr, dg):
                rl = rl.float().detach()
                gl = gl.float()
                loss += torch.mean(torch.abs(rl - gl))
        return loss * 2

    def discriminator_loss(disc_real_outputs, disc_generated_outputs):
        loss, r_losses, g_losses = 0, [], []
        for dr, dg in zip(disc_real_outputs, disc_generated_outputs):
            dr, dg = dr.float(), dg.float()
            r_loss = torch.mean((1 - dr) ** 2)
            g_loss = torch.mean(dg ** 2)
            loss += (r_loss + g_loss)
            r_losses.append(r_loss.item())
            g_losses.append(g_loss.item())
        return loss, r_losses, g_losses

    def generator_loss(disc_outputs):
        loss, gen_losses = 0, []
        for dg in disc_outputs:
            dg = dg.float()
            l_ = torch.mean((1 - dg) ** 2)
            gen_losses.append(l_)
            loss += l_
        return loss, gen_losses

    mel_basis = torch.from_numpy(np.abs(rng.standard_normal((6, 9))).astype(np.float32))

    def mel_spectrogram_torch(y, n_fft=16, hop_size=4, win_size=16):
        y = F.pad(y.unsqueeze(1), (int((n_fft - hop_size) / 2), int((n_fft - hop_size) / 2)),
                  mode="reflect").squeeze(1)
        spec = torch.stft(y, n_fft, hop_length=hop_size, win_length=win_size,
                          window=torch.hann_window(win_size).to(dtype=y.dtype, device=y.device),
                          center=False, pad_mode="reflect", normalized=False, onesided=True,
                          return_complex=True)
        spec = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-6)
        spec = torch.matmul(mel_basis, spec)
        return torch.log(torch.clamp(spec, min=1e-5) * 1)

    net_g, net_d = Generator(), MultiPeriodDiscriminator()
    fill_(torch, net_g, rng, 0.3)
    fill_(torch, net_d, rng, 0.3)
    with torch.no_grad():
        for m in net_d.modules():
            if type(m).__name__ == "_SpectralNorm":
                m._u.copy_(torch.nn.functional.normalize(normal(torch, rng, *m._u.shape), dim=0))
                m._v.copy_(torch.nn.functional.normalize(normal(torch, rng, *m._v.shape), dim=0))
    optim_g = torch.optim.AdamW(net_g.parameters(), 2e-3, betas=(0.8, 0.99), eps=1e-9)
    optim_d = torch.optim.AdamW(net_d.parameters(), 2e-3, betas=(0.8, 0.99), eps=1e-9)
    scheduler_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=0.999875, last_epoch=-1)
    scheduler_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=0.999875, last_epoch=-1)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    z = normal(torch, rng, 2, 4, 8)
    y = torch.tanh(normal(torch, rng, 2, 1, 32))
    res = {"loss_d": [], "loss_g": [], "r_losses": [], "grad_norm_d": []}
    for _ in range(2):
        y_hat = net_g(z)
        y_mel = mel_spectrogram_torch(y.squeeze(1))
        y_hat_mel = mel_spectrogram_torch(y_hat.squeeze(1))
        y_d_hat_r, y_d_hat_g, _, _ = net_d(y, y_hat.detach())
        loss_disc, losses_disc_r, losses_disc_g = discriminator_loss(y_d_hat_r, y_d_hat_g)
        optim_d.zero_grad()
        scaler.scale(loss_disc).backward()
        scaler.unscale_(optim_d)
        grad_norm_d = torch.nn.utils.clip_grad_norm_(net_d.parameters(), 1e3)
        scaler.step(optim_d)
        y_d_hat_r, y_d_hat_g, fmap_r, fmap_g = net_d(y, y_hat)
        loss_mel = F.l1_loss(y_mel, y_hat_mel) * 45
        loss_fm = feature_loss(fmap_r, fmap_g)
        loss_gen, losses_gen = generator_loss(y_d_hat_g)
        loss_gen_all = loss_gen + loss_fm + loss_mel
        optim_g.zero_grad()
        scaler.scale(loss_gen_all).backward()
        scaler.unscale_(optim_g)
        scaler.step(optim_g)
        scaler.update()
        scheduler_g.step()
        scheduler_d.step()
        res["loss_d"].append(loss_disc.item())
        res["loss_g"].append(loss_gen_all.item())
        res["r_losses"].extend(losses_disc_r + losses_disc_g)
        res["grad_norm_d"].append(grad_norm_d.item())
    sn = net_d.discriminators[0].convs[1].parametrizations.weight
    res["sn_u"], res["sn_weight"] = sn[0]._u, net_d.discriminators[0].convs[1].weight
    res["wn_g"] = net_g.ups[0].weight_g
    res["lr"] = scheduler_g.get_last_lr()
    net_g.eval()
    net_g.remove_weight_norm()
    with torch.no_grad():
        res["audio"] = net_g(z)
    res["names"] = sorted(n for n, _ in net_g.ups[1].named_parameters())
    res["d_names"] = sorted(net_d.discriminators[0].convs[0].state_dict().keys())
    return res



PROGRAMS = [vits_gan_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
