"""StyleGAN2 and score-based generative models written as their popular implementations write
them (rosinality's StyleGAN2 port, NVIDIA's EDM, NCSN and sliced score matching), run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: equalised
learning rate, modulated and demodulated grouped convolutions, upfirdn2d by F.pad and depthwise
convolutions, minibatch stddev, logistic losses, R1 and path-length penalties with an EMA
buffer; EDM preconditioning, log-normal noise levels, the Karras schedule, the Heun sampler
with churn in float64, denoising and sliced score matching, annealed Langevin dynamics.
The other generative programs are in test_parity_programs_round23_generative.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests
from tests.parity.test_parity_programs_round23_generative import _name, _names

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def stylegan2_program(torch):
    """StyleGAN2's building blocks as rosinality's port writes them: equalised-lr mapping
    network with fused leaky ReLU, modulated convolutions with demodulation as grouped
    convolutions (plain and transposed), noise injection, upfirdn2d by padding, reshapes and a
    flipped depthwise kernel, minibatch stddev, logistic losses, lazy R1 and path-length
    regularisation with an EMA buffer, and a generator EMA by accumulate()."""
    nn, F = torch.nn, torch.nn.functional
    autograd = torch.autograd
    rng = np.random.default_rng(233)
    res = {}
    style_dim, channels, batch = 8, 4, 2

    def fused_leaky_relu(x, bias, negative_slope=0.2, scale=2 ** 0.5):
        rest_dim = [1] * (x.ndim - bias.ndim - 1)
        return F.leaky_relu(x + bias.view(1, bias.shape[0], *rest_dim),
                            negative_slope=negative_slope) * scale

    def make_kernel(k):
        k = torch.tensor(k, dtype=torch.float32)
        if k.ndim == 1:
            k = k[None, :] * k[:, None]
        k /= k.sum()
        return k

    def upfirdn2d(input, kernel, up=1, down=1, pad=(0, 0)):
        _, channel, in_h, in_w = input.shape
        pad_x0, pad_x1, pad_y0, pad_y1 = pad[0], pad[1], pad[0], pad[1]
        input = input.reshape(-1, in_h, in_w, 1)
        _, in_h, in_w, minor = input.shape
        kernel_h, kernel_w = kernel.shape
        out = input.view(-1, in_h, 1, in_w, 1, minor)
        out = F.pad(out, [0, 0, 0, up - 1, 0, 0, 0, up - 1])
        out = out.view(-1, in_h * up, in_w * up, minor)
        out = F.pad(out, [0, 0, max(pad_x0, 0), max(pad_x1, 0), max(pad_y0, 0),
                          max(pad_y1, 0)])
        out = out[:, max(-pad_y0, 0): out.shape[1] - max(-pad_y1, 0),
                  max(-pad_x0, 0): out.shape[2] - max(-pad_x1, 0), :]
        out = out.permute(0, 3, 1, 2)
        out = out.reshape([-1, 1, in_h * up + pad_y0 + pad_y1, in_w * up + pad_x0 + pad_x1])
        w = torch.flip(kernel, [0, 1]).view(1, 1, kernel_h, kernel_w)
        out = F.conv2d(out, w)
        out = out.reshape(-1, minor, in_h * up + pad_y0 + pad_y1 - kernel_h + 1,
                          in_w * up + pad_x0 + pad_x1 - kernel_w + 1)
        out = out.permute(0, 2, 3, 1)
        out = out[:, ::down, ::down, :]
        out_h = (in_h * up + pad_y0 + pad_y1 - kernel_h) // down + 1
        out_w = (in_w * up + pad_x0 + pad_x1 - kernel_w) // down + 1
        return out.reshape(-1, channel, out_h, out_w)

    class Blur(nn.Module):
        def __init__(self, kernel, pad, upsample_factor=1):
            super().__init__()
            kernel = make_kernel(kernel)
            if upsample_factor > 1:
                kernel = kernel * (upsample_factor ** 2)
            self.register_buffer("kernel", kernel)
            self.pad = pad

        def forward(self, input):
            return upfirdn2d(input, self.kernel, pad=self.pad)

    class EqualLinear(nn.Module):
        def __init__(self, in_dim, out_dim, bias=True, bias_init=0, lr_mul=1, activation=None):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(out_dim, in_dim).div_(lr_mul))
            self.bias = nn.Parameter(torch.zeros(out_dim).fill_(bias_init)) if bias else None
            self.activation = activation
            self.scale = (1 / math.sqrt(in_dim)) * lr_mul
            self.lr_mul = lr_mul

        def forward(self, input):
            if self.activation:
                out = F.linear(input, self.weight * self.scale)
                return fused_leaky_relu(out, self.bias * self.lr_mul)
            return F.linear(input, self.weight * self.scale, bias=self.bias * self.lr_mul)

        def extra_repr(self):
            return f"{self.weight.shape[1]}, {self.weight.shape[0]}"

    class EqualConv2d(nn.Module):
        def __init__(self, in_channel, out_channel, kernel_size, stride=1, padding=0):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(out_channel, in_channel, kernel_size,
                                                   kernel_size))
            self.scale = 1 / math.sqrt(in_channel * kernel_size ** 2)
            self.stride, self.padding = stride, padding
            self.bias = nn.Parameter(torch.zeros(out_channel))

        def forward(self, input):
            return F.conv2d(input, self.weight * self.scale, bias=self.bias,
                            stride=self.stride, padding=self.padding)

    class PixelNorm(nn.Module):
        def forward(self, input):
            return input * torch.rsqrt(torch.mean(input ** 2, dim=1, keepdim=True) + 1e-8)

    class ModulatedConv2d(nn.Module):
        def __init__(self, in_channel, out_channel, kernel_size, style_dim, demodulate=True,
                     upsample=False, blur_kernel=(1, 3, 3, 1)):
            super().__init__()
            self.eps, self.kernel_size = 1e-8, kernel_size
            self.in_channel, self.out_channel = in_channel, out_channel
            self.upsample, self.demodulate = upsample, demodulate
            if upsample:
                factor = 2
                p = (len(blur_kernel) - factor) - (kernel_size - 1)
                self.blur = Blur(list(blur_kernel), pad=((p + 1) // 2 + factor - 1, p // 2 + 1),
                                 upsample_factor=factor)
            self.scale = 1 / math.sqrt(in_channel * kernel_size ** 2)
            self.padding = kernel_size // 2
            self.weight = nn.Parameter(torch.randn(1, out_channel, in_channel, kernel_size,
                                                   kernel_size))
            self.modulation = EqualLinear(style_dim, in_channel, bias_init=1)

        def forward(self, input, style):
            batch, in_channel, height, width = input.shape
            style = self.modulation(style).view(batch, 1, in_channel, 1, 1)
            weight = self.scale * self.weight * style
            if self.demodulate:
                demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
                weight = weight * demod.view(batch, self.out_channel, 1, 1, 1)
            weight = weight.view(batch * self.out_channel, in_channel, self.kernel_size,
                                 self.kernel_size)
            if self.upsample:
                input = input.view(1, batch * in_channel, height, width)
                weight = weight.view(batch, self.out_channel, in_channel, self.kernel_size,
                                     self.kernel_size)
                weight = weight.transpose(1, 2).reshape(batch * in_channel, self.out_channel,
                                                        self.kernel_size, self.kernel_size)
                out = F.conv_transpose2d(input, weight, padding=0, stride=2, groups=batch)
                _, _, height, width = out.shape
                out = out.view(batch, self.out_channel, height, width)
                return self.blur(out)
            input = input.view(1, batch * in_channel, height, width)
            out = F.conv2d(input, weight, padding=self.padding, groups=batch)
            _, _, height, width = out.shape
            return out.view(batch, self.out_channel, height, width)

    class NoiseInjection(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(1))

        def forward(self, image, noise=None):
            if noise is None:
                batch, _, height, width = image.shape
                noise = image.new_empty(batch, 1, height, width).normal_()
            return image + self.weight * noise

    class StyledConv(nn.Module):
        def __init__(self, in_channel, out_channel, kernel_size, style_dim, upsample=False):
            super().__init__()
            self.conv = ModulatedConv2d(in_channel, out_channel, kernel_size, style_dim,
                                        upsample=upsample)
            self.noise = NoiseInjection()
            self.activate_bias = nn.Parameter(torch.zeros(out_channel))

        def forward(self, input, style, noise=None):
            out = self.noise(self.conv(input, style), noise=noise)
            return fused_leaky_relu(out, self.activate_bias)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [PixelNorm()] + [EqualLinear(style_dim, style_dim, lr_mul=0.01,
                                                  activation="fused_lrelu") for _ in range(3)]
            self.style = nn.Sequential(*layers)
            self.input = nn.Parameter(torch.randn(1, channels, 4, 4))
            self.conv1 = StyledConv(channels, channels, 3, style_dim)
            self.up = StyledConv(channels, channels, 3, style_dim, upsample=True)
            self.to_rgb = ModulatedConv2d(channels, 3, 1, style_dim, demodulate=False)
            self.rgb_bias = nn.Parameter(torch.zeros(1, 3, 1, 1))
            self.n_latent = 3

        def mean_latent(self, latents):
            return self.style(latents).mean(0, keepdim=True)

        def forward(self, z, noises, truncation=1, truncation_latent=None, return_latents=False):
            w = self.style(z)
            if truncation < 1:
                w = truncation_latent + truncation * (w - truncation_latent)
            latent = w.unsqueeze(1).repeat(1, self.n_latent, 1)
            out = self.input.repeat(z.shape[0], 1, 1, 1)
            out = self.conv1(out, latent[:, 0], noise=noises[0])
            out = self.up(out, latent[:, 1], noise=noises[1])
            image = self.to_rgb(out, latent[:, 2]) + self.rgb_bias
            return (image, latent) if return_latents else (image, None)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = EqualConv2d(3, channels, 3, padding=1)
            self.blur = Blur([1, 3, 3, 1], pad=(2, 1))
            self.down = EqualConv2d(channels, channels, 3, stride=2, padding=1)
            self.stddev_group, self.stddev_feat = 2, 1
            self.final = EqualLinear((channels + 1) * 4 * 4, 1)

        def forward(self, input):
            out = fused_leaky_relu(self.conv(input), torch.zeros(channels))
            out = fused_leaky_relu(self.down(self.blur(out)), torch.zeros(channels))
            batch, channel, height, width = out.shape
            group = min(batch, self.stddev_group)
            stddev = out.view(group, -1, self.stddev_feat, channel // self.stddev_feat,
                              height, width)
            stddev = torch.sqrt(stddev.var(0, unbiased=False) + 1e-8)
            stddev = stddev.mean([2, 3, 4], keepdims=True).squeeze(2)
            stddev = stddev.repeat(group, 1, height, width)
            out = torch.cat([out, stddev], 1)
            return self.final(out.view(batch, -1))

    def requires_grad(model, flag=True):
        for p in model.parameters():
            p.requires_grad = flag

    def accumulate(model1, model2, decay=0.999):
        par1, par2 = dict(model1.named_parameters()), dict(model2.named_parameters())
        for k in par1.keys():
            par1[k].data.mul_(decay).add_(par2[k].data, alpha=1 - decay)

    def d_logistic_loss(real_pred, fake_pred):
        return F.softplus(-real_pred).mean() + F.softplus(fake_pred).mean()

    def d_r1_loss(real_pred, real_img):
        grad_real, = autograd.grad(outputs=real_pred.sum(), inputs=real_img, create_graph=True)
        grad_nodes.extend(_names(grad_real))
        return grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()

    def g_nonsaturating_loss(fake_pred):
        return F.softplus(-fake_pred).mean()

    def g_path_regularize(fake_img, latents, mean_path_length, noise, decay=0.01):
        noise = noise / math.sqrt(fake_img.shape[2] * fake_img.shape[3])
        grad, = autograd.grad(outputs=(fake_img * noise).sum(), inputs=latents,
                              create_graph=True)
        grad_nodes.extend(_names(grad))
        path_lengths = torch.sqrt(grad.pow(2).sum(2).mean(1))
        path_mean = mean_path_length + decay * (path_lengths.mean() - mean_path_length)
        path_penalty = (path_lengths - path_mean).pow(2).mean()
        return path_penalty, path_mean.detach(), path_lengths

    grad_nodes = []
    generator, discriminator, g_ema = Generator(), Discriminator(), Generator()
    fill_(torch, generator, rng, 1.0)
    fill_(torch, discriminator, rng, 1.0)
    g_ema.eval()
    accumulate(g_ema, generator, 0)
    res["g_ema_repr"] = [repr(g_ema.style[1])]
    # lazy regularisation rescales the hyperparameters: 0 ** ratio is the float 0.0
    g_reg_ratio, d_reg_ratio = 4 / 5, 16 / 17
    g_optim = torch.optim.Adam(generator.parameters(), lr=2e-3 * g_reg_ratio,
                               betas=(0 ** g_reg_ratio, 0.99 ** g_reg_ratio))
    d_optim = torch.optim.Adam(discriminator.parameters(), lr=2e-3 * d_reg_ratio,
                               betas=(0 ** d_reg_ratio, 0.99 ** d_reg_ratio))
    real = torch.tanh(normal(torch, rng, 6, 3, 8, 8))
    mean_path_length = torch.zeros(())
    d_losses, g_losses, r1s, paths, path_means = [], [], [], [], []
    for step in range(3):
        real_img = real[step * 2:(step + 1) * 2]
        noises = [normal(torch, rng, batch, 1, 4, 4), normal(torch, rng, batch, 1, 8, 8)]
        z = normal(torch, rng, batch, style_dim)

        requires_grad(generator, False)
        requires_grad(discriminator, True)
        fake_img, _ = generator(z, noises)
        d_loss = d_logistic_loss(discriminator(real_img), discriminator(fake_img))
        discriminator.zero_grad()
        d_loss.backward()
        d_optim.step()
        d_losses.append(d_loss.item())

        if step % 2 == 0:  # lazy R1
            real_img.requires_grad = True
            r1_loss = d_r1_loss(discriminator(real_img), real_img)
            discriminator.zero_grad()
            (10 / 2 * r1_loss * 2 + 0 * discriminator(real_img)[0]).backward()
            d_optim.step()
            r1s.append(r1_loss.item())

        requires_grad(generator, True)
        requires_grad(discriminator, False)
        fake_img, _ = generator(z, noises)
        g_loss = g_nonsaturating_loss(discriminator(fake_img))
        generator.zero_grad()
        g_loss.backward()
        g_optim.step()
        g_losses.append(g_loss.item())

        fake_img, latents = generator(z, noises, return_latents=True)
        path_loss, mean_path_length, path_lengths = g_path_regularize(
            fake_img, latents, mean_path_length, normal(torch, rng, *fake_img.shape))
        generator.zero_grad()
        weighted = 2 * 2 * path_loss + 0 * fake_img[0, 0, 0, 0]
        weighted.backward()
        g_optim.step()
        paths.append(path_lengths)
        path_means.append(mean_path_length.item())
        grad_nodes.extend(_names(d_loss, g_loss, r1_loss, weighted, path_lengths))
        accumulate(g_ema, generator, 0.5)
    res["d_losses"], res["g_losses"], res["r1"] = d_losses, g_losses, r1s
    res["path_lengths"], res["path_means"] = paths, path_means
    res["grad_nodes"] = grad_nodes
    res["g_ema_input"] = g_ema.input
    res["rgb_weight_grad"] = generator.to_rgb.weight.grad
    res["flags"] = [discriminator.conv.weight.requires_grad, mean_path_length.requires_grad,
                    g_ema.training, generator.training]

    # truncation trick and noise drawn by new_empty().normal_()
    with torch.no_grad():
        z = normal(torch, rng, 4, style_dim)
        mean_latent = g_ema.mean_latent(normal(torch, rng, 16, style_dim))
        noises = [normal(torch, rng, 4, 1, 4, 4), normal(torch, rng, 4, 1, 8, 8)]
        sample, _ = g_ema(z, noises, truncation=0.7, truncation_latent=mean_latent)
        res["truncated_sample"] = sample
        res["image_range"] = torch.aminmax(sample)
        random_noise = g_ema.up.noise(torch.zeros(2, 4, 8, 8))
        res["noise_meta"] = [_name(random_noise.dtype), *random_noise.shape]

    # upfirdn2d against its definitions: blur as a reflect-padded depthwise convolution
    img = normal(torch, rng, 2, 3, 6, 6)
    k = make_kernel([1, 3, 3, 1])
    res["upfirdn_blur"] = upfirdn2d(img, k, pad=(2, 1))
    depthwise = k[None, None].repeat(3, 1, 1, 1)
    res["depthwise_blur"] = F.conv2d(F.pad(img, (2, 1, 2, 1)), depthwise.flip([2, 3]), groups=3)
    res["reflect_blur"] = F.conv2d(F.pad(img, (2, 1, 2, 1), mode="reflect"), depthwise, groups=3)
    res["upfirdn_up"] = upfirdn2d(img, make_kernel([1, 3, 3, 1]) * 4, up=2, pad=(2, 1))
    res["upfirdn_down"] = upfirdn2d(img, k, down=2, pad=(1, 1))
    res["interp_ref"] = F.interpolate(img, scale_factor=2, mode="bilinear", align_corners=False)
    return res


def edm_program(torch):
    """Score-based models: EDM preconditioning and loss with log-normal noise levels, the
    Karras schedule and the stochastic Heun sampler in float64, NCSN's annealed denoising score
    matching with Langevin dynamics, and sliced score matching with variance reduction."""
    nn, F = torch.nn, torch.nn.functional
    autograd = torch.autograd
    rng = np.random.default_rng(234)
    res = {}
    dim = 2

    class FourierFeatures(nn.Module):
        def __init__(self, num_channels, scale=16):
            super().__init__()
            self.register_buffer("freqs", torch.randn(num_channels // 2) * scale)

        def forward(self, x):
            x = x.ger((2 * np.pi * self.freqs).to(x.dtype))
            return torch.cat([x.cos(), x.sin()], dim=1)

    class Denoiser(nn.Module):
        def __init__(self, hidden=32):
            super().__init__()
            self.map_noise = FourierFeatures(8)
            self.emb = nn.Linear(8, hidden)
            self.inp = nn.Linear(dim, hidden)
            self.out = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                     nn.Linear(hidden, dim))

        def forward(self, x, noise_labels):
            return self.out(self.inp(x) + F.silu(self.emb(self.map_noise(noise_labels))))

    class EDMPrecond(nn.Module):
        def __init__(self, sigma_min=0.002, sigma_max=80, sigma_data=0.5):
            super().__init__()
            self.sigma_min, self.sigma_max, self.sigma_data = sigma_min, sigma_max, sigma_data
            self.model = Denoiser()

        def forward(self, x, sigma, force_fp32=False):
            x = x.to(torch.float32)
            sigma = sigma.to(torch.float32).reshape(-1, 1)
            dtype = torch.float32
            c_skip = self.sigma_data ** 2 / (sigma ** 2 + self.sigma_data ** 2)
            c_out = sigma * self.sigma_data / (sigma ** 2 + self.sigma_data ** 2).sqrt()
            c_in = 1 / (self.sigma_data ** 2 + sigma ** 2).sqrt()
            c_noise = sigma.log() / 4
            F_x = self.model((c_in * x).to(dtype), c_noise.flatten())
            assert F_x.dtype == dtype
            return c_skip * x + c_out * F_x.to(torch.float32)

        def round_sigma(self, sigma):
            return torch.as_tensor(sigma)

    net = EDMPrecond()
    fill_(torch, net, rng, 0.3)
    net.model.map_noise.freqs.copy_(normal(torch, rng, 4) * 4)

    def edm_loss(net, images, rnd_normal, noise, P_mean=-1.2, P_std=1.2, sigma_data=0.5):
        sigma = (rnd_normal * P_std + P_mean).exp()
        weight = (sigma ** 2 + sigma_data ** 2) / (sigma * sigma_data) ** 2
        n = noise * sigma
        D_yn = net(images + n, sigma)
        return weight * ((D_yn - images) ** 2)

    angles = rng.uniform(0, 2 * np.pi, 48)
    data = torch.from_numpy(np.stack([np.cos(angles), np.sin(angles)], 1).astype(np.float32))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    ema = torch.optim.swa_utils.AveragedModel(
        net, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    losses = []
    for step in range(4):
        images = data[step * 12:(step + 1) * 12]
        loss = edm_loss(net, images, normal(torch, rng, 12, 1), normal(torch, rng, 12, dim))
        opt.zero_grad(set_to_none=True)
        loss.sum().mul(1 / 12).backward()
        for param in net.parameters():
            if param.grad is not None:
                torch.nan_to_num(param.grad, nan=0, posinf=1e5, neginf=-1e5, out=param.grad)
        opt.step()
        ema.update_parameters(net)
        losses.append(loss.mean().item())
    res["losses"] = losses
    res["nodes"] = _names(loss)
    res["ema_weight"] = ema.module.model.emb.weight
    res["ema_steps"] = [int(ema.n_averaged)]

    @torch.no_grad()
    def edm_sampler(net, latents, randn_like, num_steps=6, sigma_min=0.002, sigma_max=80,
                    rho=7, S_churn=40, S_min=0.05, S_max=50, S_noise=1.003):
        step_indices = torch.arange(num_steps, dtype=torch.float64, device=latents.device)
        t_steps = (sigma_max ** (1 / rho) + step_indices / (num_steps - 1)
                   * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho
        t_steps = torch.cat([net.round_sigma(t_steps), torch.zeros_like(t_steps[:1])])
        x_next = latents.to(torch.float64) * t_steps[0]
        for i, (t_cur, t_next) in enumerate(zip(t_steps[:-1], t_steps[1:])):
            x_cur = x_next
            gamma = min(S_churn / num_steps, np.sqrt(2) - 1) if S_min <= t_cur <= S_max else 0
            t_hat = net.round_sigma(t_cur + gamma * t_cur)
            x_hat = x_cur + (t_hat ** 2 - t_cur ** 2).sqrt() * S_noise * randn_like(x_cur)
            denoised = net(x_hat, t_hat).to(torch.float64)
            d_cur = (x_hat - denoised) / t_hat
            x_next = x_hat + (t_next - t_hat) * d_cur
            if i < num_steps - 1:
                denoised = net(x_next, t_next).to(torch.float64)
                d_prime = (x_next - denoised) / t_next
                x_next = x_hat + (t_next - t_hat) * (0.5 * d_cur + 0.5 * d_prime)
        return x_next, t_steps

    churn = rng.standard_normal((6, 5, dim))
    draws = iter(churn)

    def numpy_randn_like(x):
        return torch.from_numpy(next(draws)).to(x.dtype)

    sample, t_steps = edm_sampler(ema.module, normal(torch, rng, 5, dim), numpy_randn_like)
    res["t_steps"], res["edm_sample"] = t_steps, sample
    res["edm_meta"] = [_name(sample.dtype), _name(t_steps.dtype)]
    torch.manual_seed(1)
    a, _ = edm_sampler(ema.module, torch.ones(3, dim), torch.randn_like)
    torch.manual_seed(1)
    b, _ = edm_sampler(ema.module, torch.ones(3, dim), torch.randn_like)
    res["edm_reproducible"] = [torch.equal(a, b), bool(torch.isfinite(a).all())]

    # NCSN: annealed denoising score matching over geometric noise levels
    sigmas = torch.tensor(np.exp(np.linspace(np.log(1.0), np.log(0.01), 5))).float()

    class ScoreNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(len(sigmas), 16)
            self.lin1, self.lin2 = nn.Linear(dim, 16), nn.Linear(16, dim)

        def forward(self, x, labels):
            h = F.softplus(self.lin1(x)) * self.embed(labels)
            return self.lin2(F.softplus(h)) / sigmas[labels].view(x.shape[0], 1)

    score = ScoreNet()
    fill_(torch, score, rng, 0.4)
    opt = torch.optim.Adam(score.parameters(), lr=1e-3)
    dsm = []
    for step in range(3):
        samples = data[step * 16:(step + 1) * 16]
        labels = torch.from_numpy(rng.integers(0, len(sigmas), 16))
        used_sigmas = sigmas[labels].view(samples.shape[0], *([1] * len(samples.shape[1:])))
        perturbed = samples + normal(torch, rng, *samples.shape) * used_sigmas
        target = -1 / (used_sigmas ** 2) * (perturbed - samples)
        scores = score(perturbed, labels)
        target = target.view(target.shape[0], -1)
        scores = scores.view(scores.shape[0], -1)
        loss = 1 / 2. * ((scores - target) ** 2).sum(dim=-1) * used_sigmas.squeeze() ** 2
        loss = loss.mean(dim=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        dsm.append(loss.item())
    res["dsm"] = dsm
    res["dsm_nodes"] = _names(loss, scores)

    @torch.no_grad()
    def anneal_langevin_dynamics(x_mod, scorenet, sigmas, n_steps_each=3, step_lr=2e-5):
        images = []
        for c, sigma in enumerate(sigmas):
            labels = torch.ones(x_mod.shape[0], device=x_mod.device) * c
            labels = labels.long()
            step_size = step_lr * (sigma / sigmas[-1]) ** 2
            for s in range(n_steps_each):
                images.append(torch.clamp(x_mod, -3.0, 3.0).to("cpu"))
                noise = normal(torch, rng, *x_mod.shape) * torch.sqrt(step_size * 2)
                grad = scorenet(x_mod, labels)
                x_mod = x_mod + step_size * grad + noise
        return images

    chain = anneal_langevin_dynamics(normal(torch, rng, 4, dim), score, sigmas)
    res["langevin_last"], res["langevin_len"] = chain[-1], [len(chain)]

    # sliced score matching with variance reduction (Song et al.)
    def sliced_score_estimation_vr(score_net, samples, vectors, n_particles=2):
        dup_samples = samples.unsqueeze(0).expand(n_particles, *samples.shape).contiguous()
        dup_samples = dup_samples.view(-1, *samples.shape[1:])
        dup_samples.requires_grad_(True)
        grad1 = score_net(dup_samples)
        gradv = torch.sum(grad1 * vectors)
        grad2 = autograd.grad(gradv, dup_samples, create_graph=True)[0]
        ssm_nodes.extend(_names(grad1, grad2))
        grad1 = grad1.view(dup_samples.shape[0], -1)
        loss1 = torch.sum(grad1 * grad1, dim=-1) / 2.
        loss2 = torch.sum((vectors * grad2).view(dup_samples.shape[0], -1), dim=-1)
        loss1 = loss1.view(n_particles, -1).mean(dim=0)
        loss2 = loss2.view(n_particles, -1).mean(dim=0)
        loss = loss1 + loss2
        return loss.mean(), loss1.mean(), loss2.mean()

    ssm_nodes = []
    energy = nn.Sequential(nn.Linear(dim, 16), nn.Softplus(), nn.Linear(16, 16), nn.ELU(),
                           nn.Linear(16, dim))
    fill_(torch, energy, rng, 0.4)
    opt = torch.optim.SGD(energy.parameters(), lr=0.05, momentum=0.9)
    ssm = []
    for step in range(3):
        samples = data[step * 8:(step + 1) * 8]
        vectors = normal(torch, rng, 16, dim)
        vectors = vectors / torch.norm(vectors, dim=-1, keepdim=True) * math.sqrt(dim)
        loss, l1, l2 = sliced_score_estimation_vr(energy, samples, vectors)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ssm.append([loss.item(), l1.item(), l2.item()])
    res["ssm"] = ssm
    res["ssm_nodes"] = ssm_nodes
    res["ssm_grad"] = energy[0].weight.grad
    return res


PROGRAMS = [stylegan2_program, edm_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
