"""More MRI reconstruction programs written as fastMRI and MoDL write them in torch, run with
`torch` bound to ember and to PyTorch from the same NumPy weights: E2E-VarNet's sensitivity-map
estimator (low-frequency width from argmin over a flipped int8 mask, batched_mask_center slicing
with tensor bounds, chans_to_batch_dim views, RSS normalisation), fastMRI's SSIMLoss module with
a registered window buffer and per-sample data ranges, gradient checkpointing of cascades, and
MoDL's conjugate-gradient data consistency unrolled inside autograd on complex64 tensors with a
shared denoiser and a learned regularisation weight."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _fft2c(torch, x):
    x = torch.fft.ifftshift(x, dim=(-3, -2))
    x = torch.view_as_real(torch.fft.fftn(torch.view_as_complex(x), dim=(-2, -1), norm="ortho"))
    return torch.fft.fftshift(x, dim=(-3, -2))


def _ifft2c(torch, x):
    x = torch.fft.ifftshift(x, dim=(-3, -2))
    x = torch.view_as_real(torch.fft.ifftn(torch.view_as_complex(x), dim=(-2, -1), norm="ortho"))
    return torch.fft.fftshift(x, dim=(-3, -2))


def _rss_complex(torch, x, dim=0):
    return torch.sqrt((x ** 2).sum(dim=-1).sum(dim))


def _batched_mask_center(torch, x, mask_from, mask_to):
    if not mask_from.shape == mask_to.shape:
        raise ValueError("mask_from and mask_to must match shapes.")
    if mask_from.shape[0] != x.shape[0]:
        raise ValueError("mask_from and mask_to must have batch_size length.")
    mask = torch.zeros_like(x)
    for i, (start, end) in enumerate(zip(mask_from, mask_to)):
        mask[i, :, :, start:end] = x[i, :, :, start:end]
    return mask


def _ssim_loss_class(torch):
    nn = torch.nn
    F = torch.nn.functional

    class SSIMLoss(nn.Module):
        def __init__(self, win_size=3, k1=0.01, k2=0.03):
            super().__init__()
            self.win_size, self.k1, self.k2 = win_size, k1, k2
            self.register_buffer("w", torch.ones(1, 1, win_size, win_size) / win_size ** 2)
            np_ = win_size ** 2
            self.cov_norm = np_ / (np_ - 1)

        def forward(self, X, Y, data_range):
            assert isinstance(self.w, torch.Tensor)
            data_range = data_range[:, None, None, None]
            C1 = (self.k1 * data_range) ** 2
            C2 = (self.k2 * data_range) ** 2
            ux, uy = F.conv2d(X, self.w), F.conv2d(Y, self.w)
            uxx, uyy = F.conv2d(X * X, self.w), F.conv2d(Y * Y, self.w)
            uxy = F.conv2d(X * Y, self.w)
            vx = self.cov_norm * (uxx - ux * ux)
            vy = self.cov_norm * (uyy - uy * uy)
            vxy = self.cov_norm * (uxy - ux * uy)
            A1, A2, B1, B2 = (2 * ux * uy + C1, 2 * vxy + C2, ux ** 2 + uy ** 2 + C1, vx + vy + C2)
            D = B1 * B2
            S = (A1 * A2) / D
            return 1 - S.mean()
    return SSIMLoss


def _sens_model(torch, chans=4):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(2, chans, 3, padding=1), nn.LeakyReLU(0.2),
                                      nn.Conv2d(chans, 2, 3, padding=1))

        def forward(self, x):
            b, c, h, w, two = x.shape
            x = x.permute(0, 4, 1, 2, 3).reshape(b, 2 * c, h, w)
            return self.body(x).view(b, 2, c, h, w).permute(0, 2, 3, 4, 1).contiguous()

    class SensitivityModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm_unet = Net()

        def chans_to_batch_dim(self, x):
            b, c, h, w, comp = x.shape
            return x.view(b * c, 1, h, w, comp), b

        def batch_chans_to_chan_dim(self, x, batch_size):
            bc, _, h, w, comp = x.shape
            c = bc // batch_size
            return x.view(batch_size, c, h, w, comp)

        def divide_root_sum_of_squares(self, x):
            return x / _rss_complex(torch, x, dim=1).unsqueeze(-1).unsqueeze(1)

        def get_pad_and_num_low_freqs(self, mask, num_low_frequencies=None):
            if num_low_frequencies is None or num_low_frequencies == 0:
                squeezed_mask = mask[:, 0, 0, :, 0].to(torch.int8)
                cent = squeezed_mask.shape[1] // 2
                left = torch.argmin(squeezed_mask[:, :cent].flip(1), dim=1)
                right = torch.argmin(squeezed_mask[:, cent:], dim=1)
                num_low_frequencies_tensor = torch.max(2 * torch.min(left, right),
                                                       torch.ones_like(left))
            else:
                num_low_frequencies_tensor = num_low_frequencies * torch.ones(
                    mask.shape[0], dtype=mask.dtype, device=mask.device)
            pad = (mask.shape[-2] - num_low_frequencies_tensor + 1) // 2
            return pad.type(torch.long), num_low_frequencies_tensor.type(torch.long)

        def forward(self, masked_kspace, mask, num_low_frequencies=None):
            pad, num_low_freqs = self.get_pad_and_num_low_freqs(mask, num_low_frequencies)
            masked_kspace = _batched_mask_center(torch, masked_kspace, pad, pad + num_low_freqs)
            images, batches = self.chans_to_batch_dim(_ifft2c(torch, masked_kspace))
            return self.divide_root_sum_of_squares(
                self.batch_chans_to_chan_dim(self.norm_unet(images), batches)), pad, num_low_freqs
    return SensitivityModel()


def sens_ssim_program(torch):
    """Sensitivity estimation from the ACS lines, then a checkpointed cascade, trained on SSIM."""
    from importlib import import_module
    checkpoint = import_module(torch.__name__ + ".utils.checkpoint").checkpoint
    rng = np.random.default_rng(20)
    sens_net = _sens_model(torch)
    fill_(torch, sens_net, rng, 0.3)
    refine = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
                                 torch.nn.Conv2d(4, 1, 3, padding=1))
    fill_(torch, refine, rng, 0.2)
    ssim = _ssim_loss_class(torch)()
    kspace = normal(torch, rng, 2, 3, 8, 10, 2)
    mask = torch.zeros(2, 1, 1, 10, 1, dtype=torch.bool)
    mask[0, ..., 3:7, :] = True
    mask[1, ..., 4:6, :] = True
    mask[..., ::4, :] = True
    masked = kspace * mask
    target = _rss_complex(torch, _ifft2c(torch, kspace), dim=1).unsqueeze(1)
    max_value = target.amax(dim=(1, 2, 3))
    params = list(sens_net.parameters()) + list(refine.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    res = {"loss": []}
    for _ in range(3):
        opt.zero_grad()
        sens, pad, nlf = sens_net(masked, mask)
        img = _ifft2c(torch, masked)
        comb = (img[..., 0] * sens[..., 0] + img[..., 1] * sens[..., 1]).sum(1, keepdim=True)
        out = comb + checkpoint(refine, comb, use_reentrant=False)
        loss = ssim(out, target, max_value)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["pad"] = pad
    res["nlf"] = nlf
    res["pad_dtype"] = [str(pad.dtype).split(".")[-1]]
    res["sens"] = sens.detach()
    res["grad"] = sens_net.norm_unet.body[0].weight.grad
    res["refine_grad"] = refine[2].weight.grad
    res["buffers"] = [k for k, _ in ssim.state_dict().items()]
    try:
        _batched_mask_center(torch, kspace, pad, pad[:1])
    except ValueError as e:
        res["err"] = [str(e)]
    return res


def modl_program(torch):
    """MoDL: x_{k+1} = (A^H A + lam I)^{-1} (A^H y + lam D(x_k)) by CG on complex64 images,
    differentiated through the CG iterations; a shared denoiser and a learned lam."""
    rng = np.random.default_rng(21)
    nn = torch.nn
    n_coils, h, w = 3, 8, 8
    sens = torch.complex(normal(torch, rng, n_coils, h, w), normal(torch, rng, n_coils, h, w))
    sens = sens / torch.linalg.vector_norm(sens, dim=0, keepdim=True)
    truth = torch.complex(normal(torch, rng, h, w), normal(torch, rng, h, w))
    mask = torch.from_numpy(rng.random((h, w)) < 0.4)
    mask[:, 3:5] = True

    def A(x):
        return torch.fft.fft2(sens * x, norm="ortho") * mask

    def AH(k):
        return (torch.fft.ifft2(k * mask, norm="ortho") * sens.conj()).sum(0)

    y = A(truth)

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            # no conv bias before BatchNorm (its gradient is float32 noise that Adam amplifies)
            self.net = nn.Sequential(nn.Conv2d(2, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6),
                                     nn.ReLU(),
                                     nn.Conv2d(6, 2, 3, padding=1))

        def forward(self, x):
            xr = torch.view_as_real(x).permute(2, 0, 1).unsqueeze(0)
            out = xr + self.net(xr)
            return torch.view_as_complex(out.squeeze(0).permute(1, 2, 0).contiguous())

    den = Denoiser()
    fill_(torch, den, rng, 0.2)
    lam = nn.Parameter(torch.tensor(0.05))

    def cg(rhs, lam, iters=4):
        x = torch.zeros_like(rhs)
        r, p = rhs.clone(), rhs.clone()
        rs = torch.sum(r.conj() * r).real
        for _ in range(iters):
            Ap = AH(A(p)) + lam * p
            alpha = rs / torch.sum(p.conj() * Ap).real
            x = x + alpha * p
            r = r - alpha * Ap
            rs_new = torch.sum(r.conj() * r).real
            p = r + (rs_new / rs) * p
            rs = rs_new
        return x

    opt = torch.optim.Adam(list(den.parameters()) + [lam], lr=5e-3)
    res = {"loss": []}
    for _ in range(3):
        opt.zero_grad()
        x = AH(y)
        for _ in range(2):
            x = cg(AH(y) + lam * den(x), lam)
        loss = torch.mean(torch.abs(x - truth) ** 2)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["x"] = torch.view_as_real(x.detach())
    res["lam"] = lam.detach()
    res["lam_grad"] = lam.grad
    res["den_grad"] = den.net[0].weight.grad
    res["bn_mean"] = den.net[1].running_mean
    den.eval()
    with torch.inference_mode():
        z = den(AH(y))
        res["inference"] = [z.is_inference(), z.requires_grad]
        res["z"] = torch.view_as_real(z)
    return res


def functorch_coils_program(torch):
    """torch.func over coils and samples: per-coil adjoints by vmap with conj().resolve_conj()
    viewed as real, per-sample gradients of a DC loss by vmap(grad), and the Jacobian of a
    phase-retrieval forward model by jacfwd and jacrev."""
    rng = np.random.default_rng(22)
    sens = torch.complex(normal(torch, rng, 3, 6, 6), normal(torch, rng, 3, 6, 6))
    kspace = torch.complex(normal(torch, rng, 3, 6, 6), normal(torch, rng, 3, 6, 6))
    func = torch.func

    def coil_adjoint(k, s):
        img = torch.fft.ifft2(k, norm="ortho")
        return torch.view_as_real(s.conj().resolve_conj() * img)

    res = {"adjoint": func.vmap(coil_adjoint)(kspace, sens).sum(0)}
    w = normal(torch, rng, 2, 6, 6)
    images = normal(torch, rng, 4, 6, 6)

    def dc_loss(weight, image):
        k = torch.fft.fft2(torch.complex(image * weight[0], image * weight[1]), norm="ortho")
        return (torch.view_as_real(k.conj().resolve_conj()) ** 2).mean() + weight.abs().mean()

    res["per_sample"] = func.vmap(func.grad(dc_loss), in_dims=(None, 0))(w, images)
    probe = torch.polar(torch.ones(4), normal(torch, rng, 4))

    def measure(phase):
        field = torch.polar(torch.ones_like(phase), phase) * probe
        return torch.fft.fft(field, norm="ortho").abs() ** 2

    phase = normal(torch, rng, 4)
    res["jacfwd"] = func.jacfwd(measure)(phase)
    res["jacrev"] = func.jacrev(measure)(phase)
    out, tangent = func.jvp(lambda x: torch.view_as_real(torch.fft.fft(x).conj().resolve_conj()),
                            (probe,), (probe * 1j,))
    res["jvp"] = [out, tangent]
    return res


PROGRAMS = [sens_ssim_program, modl_program, functorch_coils_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
