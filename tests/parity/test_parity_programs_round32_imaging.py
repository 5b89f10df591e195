"""Computational imaging programs written as fastMRI, CT and deconvolution repositories write them
in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights:
complex k-space with centred ortho fft2/ifft2, view_as_real/view_as_complex round trips, coil
root-sum-of-squares, sensitivity-map expand/reduce, a VarNet-lite unrolled network with soft data
consistency and complex multiplication by hand, an SSIM loss through avg_pool2d; a CT Radon
transform and filtered backprojection by grid_sample over rotated grids with an rfft ramp filter;
Wiener and Richardson-Lucy deconvolution. _imaging_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _fft2c(torch, x):
    """fastMRI's centred 2-D FFT on a (..., H, W, 2) real view."""
    x = torch.fft.ifftshift(x, dim=(-3, -2))
    x = torch.view_as_real(torch.fft.fftn(torch.view_as_complex(x), dim=(-2, -1), norm="ortho"))
    return torch.fft.fftshift(x, dim=(-3, -2))


def _ifft2c(torch, x):
    x = torch.fft.ifftshift(x, dim=(-3, -2))
    x = torch.view_as_real(torch.fft.ifftn(torch.view_as_complex(x), dim=(-2, -1), norm="ortho"))
    return torch.fft.fftshift(x, dim=(-3, -2))


def _complex_mul(torch, x, y):
    """fastMRI's complex multiplication by hand on (..., 2) real views."""
    re = x[..., 0] * y[..., 0] - x[..., 1] * y[..., 1]
    im = x[..., 0] * y[..., 1] + x[..., 1] * y[..., 0]
    return torch.stack((re, im), dim=-1)


def _complex_conj(torch, x):
    return torch.stack((x[..., 0], -x[..., 1]), dim=-1)


def _rss(torch, x, dim=0):
    return torch.sqrt((x ** 2).sum(dim))


def _rss_complex(torch, x, dim=0):
    return torch.sqrt(x.pow(2).sum(dim=-1).sum(dim))


def _ssim_loss(torch, x, y, data_range, win_size=3, k1=0.01, k2=0.03):
    w = torch.ones(1, 1, win_size, win_size) / win_size ** 2
    np_ = win_size ** 2
    cov_norm = np_ / (np_ - 1)
    c1 = (k1 * data_range) ** 2
    c2 = (k2 * data_range) ** 2
    ux = torch.nn.functional.conv2d(x, w)
    uy = torch.nn.functional.conv2d(y, w)
    uxx = torch.nn.functional.conv2d(x * x, w)
    uyy = torch.nn.functional.conv2d(y * y, w)
    uxy = torch.nn.functional.conv2d(x * y, w)
    vx = cov_norm * (uxx - ux * ux)
    vy = cov_norm * (uyy - uy * uy)
    vxy = cov_norm * (uxy - ux * uy)
    a1, a2, b1, b2 = (2 * ux * uy + c1, 2 * vxy + c2, ux ** 2 + uy ** 2 + c1, vx + vy + c2)
    s = (a1 * a2) / (b1 * b2)
    return 1 - s.mean()


def fastmri_transforms_program(torch):
    """fastMRI data transforms: to_tensor, masking, zero-filled recon, crops, normalisation."""
    rng = np.random.default_rng(0)
    kspace_np = (rng.standard_normal((4, 12, 10)) + 1j * rng.standard_normal((4, 12, 10)))
    kspace_np = kspace_np.astype(np.complex64)
    res = {}
    # to_tensor: np.stack((real, imag), -1) then from_numpy
    kspace = torch.from_numpy(np.stack((kspace_np.real, kspace_np.imag), axis=-1))
    res["shape"] = tuple(kspace.shape)
    # equispaced-ish mask along width: centre fraction + every 3rd line
    mask = torch.zeros(10, dtype=torch.bool)
    mask[3:7] = True
    mask[::3] = True
    mask_t = mask.reshape(1, 1, 10, 1).float()
    masked = kspace * mask_t + 0.0
    res["masked_sum"] = masked.abs().sum()
    image = _ifft2c(torch, masked)
    res["image"] = image
    # complex_center_crop and complex_abs
    w_from, h_from = (12 - 8) // 2, (10 - 8) // 2
    crop = image[..., w_from:w_from + 8, h_from:h_from + 8, :]
    abs_img = (crop ** 2).sum(dim=-1).sqrt()
    rss = _rss(torch, abs_img)
    res["rss"] = rss
    res["rss_complex"] = _rss_complex(torch, crop)
    # normalize_instance and clamp
    mean, std = rss.mean(), rss.std()
    norm = ((rss - mean) / (std + 1e-11)).clamp(-6, 6)
    res["norm"] = norm
    # native complex path: torch.complex64 tensors
    kc = torch.view_as_complex(kspace)
    ic = torch.fft.fftshift(torch.fft.ifft2(torch.fft.ifftshift(kc * mask.reshape(1, 1, 10)),
                                            norm="ortho"))
    res["is_complex"] = [kc.is_complex(), kc.dtype == torch.complex64, ic.dtype == torch.complex64,
                         str(ic.dtype).split(".")[-1]]
    res["native_vs_real"] = torch.view_as_real(ic)
    res["abs_complex"] = ic.abs()
    res["angle"] = ic.angle()[0]
    res["rss_native"] = torch.sqrt((ic.abs() ** 2).sum(0))
    res["fft_roundtrip"] = torch.fft.ifft2(torch.fft.fft2(kc, norm="ortho"), norm="ortho").real
    # rfft / irfft shape corner
    res["rfft"] = torch.view_as_real(torch.fft.rfft2(rss, norm="ortho"))
    res["irfft"] = torch.fft.irfft2(torch.fft.rfft2(rss), s=rss.shape)
    res["conj_phys"] = torch.view_as_real(ic.conj().resolve_conj())[0, 0]
    res["conj_mul"] = torch.view_as_real(ic * ic.conj())[0, 0]
    res["polar"] = torch.view_as_real(torch.polar(ic.abs(), ic.angle()))[1, 2]
    return res


def _make_varnet(torch, chans=4):
    nn = torch.nn

    class SmallUnet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Sequential(nn.Conv2d(2, chans, 3, padding=1, bias=False),
                                      nn.InstanceNorm2d(chans), nn.LeakyReLU(0.2, inplace=True))
            self.mid = nn.Sequential(nn.Conv2d(chans, chans, 3, padding=1, bias=False),
                                     nn.InstanceNorm2d(chans), nn.LeakyReLU(0.2, inplace=True))
            self.up = nn.ConvTranspose2d(chans, chans, 2, stride=2, bias=False)
            self.out = nn.Conv2d(2 * chans, 2, 1)

        def forward(self, x):
            d = self.down(x)
            m = self.mid(torch.nn.functional.avg_pool2d(d, 2, 2))
            return self.out(torch.cat([self.up(m), d], dim=1))

    class NormUnet(nn.Module):
        def __init__(self):
            super().__init__()
            self.unet = SmallUnet()

        def complex_to_chan_dim(self, x):
            b, c, h, w, two = x.shape
            return x.permute(0, 4, 1, 2, 3).reshape(b, 2 * c, h, w)

        def chan_complex_to_last_dim(self, x):
            b, c2, h, w = x.shape
            c = c2 // 2
            return x.view(b, 2, c, h, w).permute(0, 2, 3, 4, 1).contiguous()

        def norm(self, x):
            b, c, h, w = x.shape
            x = x.view(b, 2, c // 2 * h * w)
            mean = x.mean(dim=2).view(b, 2, 1, 1)
            std = x.std(dim=2).view(b, 2, 1, 1)
            x = x.view(b, c, h, w)
            return (x - mean) / std, mean, std

        def unnorm(self, x, mean, std):
            return x * std + mean

        def pad(self, x):
            _, _, h, w = x.shape
            w_mult, h_mult = ((w - 1) | 3) + 1, ((h - 1) | 3) + 1
            w_pad = [math.floor((w_mult - w) / 2), math.ceil((w_mult - w) / 2)]
            h_pad = [math.floor((h_mult - h) / 2), math.ceil((h_mult - h) / 2)]
            return torch.nn.functional.pad(x, w_pad + h_pad), (h_pad, w_pad, h_mult, w_mult)

        def unpad(self, x, h_pad, w_pad, h_mult, w_mult):
            return x[..., h_pad[0]:h_mult - h_pad[1], w_pad[0]:w_mult - w_pad[1]]

        def forward(self, x):
            if not x.shape[-1] == 2:
                raise ValueError("Last dimension must be 2 for complex.")
            x = self.complex_to_chan_dim(x)
            x, mean, std = self.norm(x)
            x, pad_sizes = self.pad(x)
            x = self.unet(x)
            x = self.unpad(x, *pad_sizes)
            x = self.unnorm(x, mean, std)
            return self.chan_complex_to_last_dim(x)

    class VarNetBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = NormUnet()
            self.dc_weight = nn.Parameter(torch.ones(1))

        def sens_expand(self, x, sens_maps):
            return _fft2c(torch, _complex_mul(torch, x, sens_maps))

        def sens_reduce(self, x, sens_maps):
            x = _complex_mul(torch, _ifft2c(torch, x), _complex_conj(torch, sens_maps))
            return x.sum(dim=1, keepdim=True)

        def forward(self, current_kspace, ref_kspace, mask, sens_maps):
            zero = torch.zeros(1, 1, 1, 1, 1).to(current_kspace)
            soft_dc = torch.where(mask, current_kspace - ref_kspace, zero) * self.dc_weight
            model_term = self.sens_expand(
                self.model(self.sens_reduce(current_kspace, sens_maps)), sens_maps)
            return current_kspace - soft_dc - model_term

    class VarNet(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.cascades = nn.ModuleList([VarNetBlock() for _ in range(n)])

        def forward(self, masked_kspace, mask, sens_maps):
            kspace_pred = masked_kspace.clone()
            for cascade in self.cascades:
                kspace_pred = cascade(kspace_pred, masked_kspace, mask, sens_maps)
            img = _ifft2c(torch, kspace_pred)
            return _rss(torch, (img ** 2).sum(-1).sqrt(), dim=1)
    return VarNet(2)


def varnet_program(torch):
    """VarNet-lite: two cascades, soft DC, sensitivity maps normalised by RSS, SSIM + L1 loss."""
    rng = np.random.default_rng(1)
    model = _make_varnet(torch)
    fill_(torch, model, rng, 0.2)
    with torch.no_grad():
        for c in model.cascades:
            c.dc_weight.fill_(1.0)
    sens = normal(torch, rng, 1, 3, 8, 8, 2)
    sens = sens / _rss_complex(torch, sens, dim=1).unsqueeze(1).unsqueeze(-1)
    target_img = normal(torch, rng, 1, 1, 8, 8, 2)
    full_k = _fft2c(torch, _complex_mul(torch, target_img, sens))
    mask = torch.zeros(1, 1, 1, 8, 1, dtype=torch.bool)
    mask[..., 2:6, :] = True
    mask[..., 0, :] = True
    masked_k = full_k * mask + 0.0
    target = _rss(torch, (_ifft2c(torch, full_k) ** 2).sum(-1).sqrt(), dim=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    res = {"loss": []}
    for _ in range(3):
        opt.zero_grad()
        out = model(masked_k, mask, sens)
        max_value = target.max()
        loss = _ssim_loss(torch, out, target, max_value) + 0.1 * torch.nn.functional.l1_loss(
            out, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
    res["out"] = out.detach()
    res["dc_weights"] = [c.dc_weight.detach().clone() for c in model.cascades]
    res["grad_first"] = model.cascades[0].model.unet.down[0].weight.grad
    res["lr"] = sched.get_last_lr()
    with torch.no_grad():
        try:
            model.cascades[0].model(torch.zeros(1, 1, 8, 8, 3))
        except ValueError as e:
            res["err"] = [str(e).split("\n")[0]]     # ember names the module on a 2nd line
    return res


def complex_native_varnet_program(torch):
    """A native-complex variant: complex64 parameters of a learned k-space filter, sens maps as
    complex tensors, hard DC via torch.where, loss on abs; gradients are conjugate Wirtinger."""
    rng = np.random.default_rng(2)
    sens = torch.complex(normal(torch, rng, 3, 8, 8), normal(torch, rng, 3, 8, 8))
    sens = sens / torch.sqrt((sens.abs() ** 2).sum(0, keepdim=True))
    img = torch.complex(normal(torch, rng, 8, 8), normal(torch, rng, 8, 8))
    full_k = torch.fft.fft2(sens * img, norm="ortho")
    mask = torch.zeros(8, 8, dtype=torch.bool)
    mask[:, ::2] = True
    masked = torch.where(mask, full_k, torch.zeros((), dtype=torch.complex64))
    filt = torch.nn.Parameter(torch.ones(8, 8, dtype=torch.complex64))
    step = torch.nn.Parameter(torch.tensor(0.5))
    opt = torch.optim.SGD([filt, step], lr=0.05, momentum=0.9)
    res = {"loss": [], "dtypes": (filt.dtype == torch.complex64, masked.dtype.is_complex)}
    for _ in range(3):
        opt.zero_grad()
        x = (torch.fft.ifft2(masked, norm="ortho") * sens.conj()).sum(0)
        for _ in range(2):
            k = torch.fft.fft2(sens * x, norm="ortho")
            k = k * filt
            grad = torch.fft.ifft2(torch.where(mask, k - masked, 0 * k), norm="ortho")
            x = x - step * (grad * sens.conj()).sum(0)
        loss = (x.abs() - img.abs()).pow(2).mean() + 1e-3 * filt.abs().sum()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["filt"] = torch.view_as_real(filt.detach())
    res["filt_grad"] = torch.view_as_real(filt.grad)
    res["step"] = step.detach()
    x = (torch.fft.ifft2(masked, norm="ortho") * sens.conj()).sum(0) * step
    res["angle_grad"] = torch.autograd.grad(torch.angle(x * (1 + 1j)).sum() + x.real.sum(),
                                            step)[0]
    res["sgn"] = torch.view_as_real(torch.sgn(x.detach()))
    return res


def _rotation_grid(torch, angles, size):
    cos, sin = torch.cos(angles), torch.sin(angles)
    zeros = torch.zeros_like(cos)
    theta = torch.stack([torch.stack([cos, sin, zeros], -1),
                         torch.stack([-sin, cos, zeros], -1)], dim=1)
    return torch.nn.functional.affine_grid(theta, (angles.shape[0], 1, size, size),
                                           align_corners=False)


def ct_fbp_program(torch):
    """CT: Radon by rotating the image with grid_sample and summing rows; ramp filter by rfft;
    backprojection by grid_sample of the smeared sinogram; a learned filter trained a few steps."""
    rng = np.random.default_rng(3)
    n, n_ang = 16, 12
    yy, xx = np.mgrid[-1:1:n * 1j, -1:1:n * 1j]
    phantom = ((xx ** 2 + (yy / 0.8) ** 2) < 0.6).astype(np.float32)
    phantom += 0.5 * (((xx - 0.2) ** 2 + yy ** 2) < 0.05)
    img = torch.from_numpy(phantom.astype(np.float32))[None, None]
    angles = torch.linspace(0, math.pi, n_ang + 1)[:-1]
    grid = _rotation_grid(torch, angles, n)
    rotated = torch.nn.functional.grid_sample(img.expand(n_ang, -1, -1, -1), grid,
                                              mode="bilinear", padding_mode="zeros",
                                              align_corners=False)
    sino = rotated.sum(dim=2).squeeze(1)                 # (n_ang, n)
    res = {"sino": sino}
    pad = 2 ** math.ceil(math.log2(2 * n))
    freqs = torch.fft.rfftfreq(pad)
    ramp = 2 * freqs.abs()
    res["ramp"] = ramp
    learned = torch.nn.Parameter(ramp.clone())
    opt = torch.optim.Adam([learned], lr=1e-2)

    def fbp(filt):
        padded = torch.nn.functional.pad(sino, (0, pad - n))
        f = torch.fft.irfft(torch.fft.rfft(padded, dim=-1) * filt, n=pad, dim=-1)[:, :n]
        smear = f[:, None, None, :].expand(n_ang, 1, n, n)
        back = torch.nn.functional.grid_sample(smear, _rotation_grid(torch, -angles, n),
                                               align_corners=False)
        return back.sum(0, keepdim=True) * math.pi / (2 * n_ang)

    res["fbp"] = fbp(ramp)
    res["loss"] = []
    for _ in range(3):
        opt.zero_grad()
        rec = fbp(learned)
        loss = torch.nn.functional.mse_loss(rec, img)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["learned"] = learned.detach()
    res["learned_grad"] = learned.grad
    res["hann"] = torch.hann_window(pad // 2 + 1, periodic=False)
    noise = normal(torch, rng, n_ang, n) * 0.01
    res["psnr"] = 10 * torch.log10(img.max() ** 2 / torch.nn.functional.mse_loss(
        fbp(ramp * torch.hann_window(pad // 2 + 1, periodic=False)), img))
    res["noisy_sino_fft"] = torch.fft.rfft(sino + noise, dim=-1).abs()[:, :6]
    return res


def deconvolution_program(torch):
    """Wiener filtering in Fourier space with psf2otf by roll, and Richardson-Lucy by conv2d with a
    flipped kernel; a blind step that learns the PSF by gradient descent."""
    rng = np.random.default_rng(4)
    h = w = 16
    x = torch.from_numpy(rng.random((1, 1, h, w)).astype(np.float32))
    g = np.exp(-((np.arange(5) - 2) ** 2) / 2.0)
    k = np.outer(g, g).astype(np.float32)
    k /= k.sum()
    psf = torch.from_numpy(k)[None, None]
    blurred = torch.nn.functional.conv2d(torch.nn.functional.pad(x, (2, 2, 2, 2), mode="circular"),
                                         psf)
    res = {"blurred": blurred}
    # psf2otf: pad to image size, roll centre to origin
    otf_in = torch.zeros(h, w)
    otf_in[:5, :5] = psf[0, 0]
    otf_in = torch.roll(otf_in, shifts=(-2, -2), dims=(0, 1))
    otf = torch.fft.fft2(otf_in)
    res["otf"] = torch.view_as_real(otf)
    nsr = 1e-2
    wiener = otf.conj() / (otf.abs() ** 2 + nsr)
    rec = torch.fft.ifft2(torch.fft.fft2(blurred[0, 0]) * wiener).real
    res["wiener"] = rec
    res["wiener_err"] = (rec - x[0, 0]).abs().mean()
    # Richardson-Lucy
    est = torch.full_like(blurred, 0.5)
    psf_flip = torch.flip(psf, dims=(-2, -1))
    for _ in range(5):
        conv = torch.nn.functional.conv2d(est, psf, padding=2)
        ratio = blurred / (conv + 1e-6)
        est = est * torch.nn.functional.conv2d(ratio, psf_flip, padding="same")
        est.clamp_(min=0)
    res["rl"] = est
    # blind: learn a 3x3 PSF (softmax-normalised logits) to explain blurred from x
    logits = torch.nn.Parameter(torch.zeros(9))
    opt = torch.optim.RMSprop([logits], lr=0.05)
    res["blind"] = []
    for _ in range(4):
        opt.zero_grad()
        kern = torch.softmax(logits, 0).view(1, 1, 3, 3)
        pred = torch.nn.functional.conv2d(x, kern, padding=1)
        loss = torch.nn.functional.mse_loss(pred, blurred)
        loss.backward()
        opt.step()
        res["blind"].append(loss.item())
    res["logits"] = logits.detach()
    res["tv"] = (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + torch.diff(x, dim=-1).abs().mean()
    return res


PROGRAMS = [fastmri_transforms_program, varnet_program, complex_native_varnet_program,
            ct_fbp_program, deconvolution_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
