"""Inverse-problem programs of computational imaging written as their reference repositories write
them in torch, run with `torch` bound to ember and to PyTorch from the same NumPy data:
Gerchberg-Saxton phase retrieval with angle/polar and a gradient-based (Wirtinger) variant with a
complex Parameter under Adam; a deep image prior with a noise input, Adam and early stopping on
PSNR; ISTA with soft thresholding and LISTA with learned step sizes and thresholds; complex-tensor
corners these codes touch (view_as_complex layouts, fft padding with s=, fftfreq, conj views)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn):
    try:
        out = fn()
    except Exception as e:                          # noqa: BLE001 (the error is the result)
        return [type(e).__name__, str(e).split("\n")[0]]
    return out


def gerchberg_saxton_program(torch):
    """GS: alternate between a known object-plane amplitude and a measured Fourier amplitude."""
    rng = np.random.default_rng(10)
    n = 16
    amp = torch.from_numpy(rng.random((n, n)).astype(np.float32) + 0.5)
    phase = torch.from_numpy((rng.random((n, n)).astype(np.float32) - 0.5) * 2)
    field = torch.polar(amp, phase)
    meas = torch.fft.fft2(field).abs()
    init_phase = torch.from_numpy((rng.random((n, n)).astype(np.float32) - 0.5) * 6)
    est = amp * torch.exp(1j * init_phase)
    res = {"est_dtype": [str(est.dtype).split(".")[-1]], "err": []}
    for _ in range(6):
        f = torch.fft.fft2(est)
        f = meas * torch.exp(1j * torch.angle(f))
        est = torch.fft.ifft2(f)
        est = torch.polar(amp, est.angle())
        res["err"].append(((torch.fft.fft2(est).abs() - meas) ** 2).mean().item())
    res["est"] = torch.view_as_real(est)
    res["phase_diff"] = torch.remainder(est.angle() - phase + torch.pi, 2 * torch.pi)[:3]
    # gradient-based: a complex Parameter under Adam (Adam views complex params as real)
    obj = torch.nn.Parameter(torch.polar(amp, init_phase).clone())
    opt = torch.optim.Adam([obj], lr=0.05)
    res["wirtinger"] = []
    for _ in range(4):
        opt.zero_grad()
        loss = ((torch.fft.fft2(obj, norm="ortho").abs() - meas / n) ** 2).sum()
        loss = loss + 0.1 * ((obj.abs() - amp) ** 2).sum()
        loss.backward()
        opt.step()
        res["wirtinger"].append(loss.item())
    res["obj"] = torch.view_as_real(obj.detach())
    res["obj_grad"] = torch.view_as_real(obj.grad)
    res["state"] = torch.view_as_real(opt.state[obj]["exp_avg_sq"])
    res["state_dtype"] = [opt.state[obj]["exp_avg_sq"].dtype == torch.complex64]
    return res


def deep_image_prior_program(torch):
    """DIP: an hourglass net on a fixed noise input, Adam, input-noise regularisation drawn from
    NumPy, an exponential moving average of outputs and early stopping on PSNR."""
    rng = np.random.default_rng(11)
    nn = torch.nn
    # no conv bias before BatchNorm: its gradient is float32 noise around 0, which Adam's
    # normalisation turns into +-lr steps whose sign differs between libraries
    net = nn.Sequential(
        nn.ReflectionPad2d(1), nn.Conv2d(4, 8, 3, stride=2, bias=False), nn.BatchNorm2d(8),
        nn.LeakyReLU(0.2), nn.ReflectionPad2d(1), nn.Conv2d(8, 8, 3, bias=False),
        nn.BatchNorm2d(8), nn.LeakyReLU(0.2),
        nn.Upsample(scale_factor=2, mode="bilinear"),
        nn.Conv2d(8, 3, 1), nn.Sigmoid())
    fill_(torch, net, rng, 0.3)
    net_input = torch.from_numpy((rng.random((1, 4, 16, 16)) * 0.1).astype(np.float32))
    net_input_saved = net_input.detach().clone()
    noise_saved = net_input.detach().clone()
    clean = torch.from_numpy(rng.random((1, 3, 16, 16)).astype(np.float32))
    noisy = (clean + torch.from_numpy(rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
             * 0.1).clamp(0, 1)
    # eps=1e-6: channels of the first BN bias whose LeakyReLU stays linear get gradients that are
    # ~1e-10 noise (the second BN removes the shift); Adam's eps=1e-8 would blow them up to +-lr
    opt = torch.optim.Adam(net.parameters(), lr=0.01, eps=1e-6)
    res = {"loss": [], "psnr": [], "best_it": [-1]}
    out_avg, best_psnr, best = None, -1.0, None
    for it in range(6):
        opt.zero_grad()
        reg = torch.from_numpy(rng.standard_normal(noise_saved.shape).astype(np.float32))
        net_input = net_input_saved + noise_saved.normal_(0, 1).mul_(0).add_(reg) * (1.0 / 30)
        out = net(net_input)
        out_avg = out.detach() if out_avg is None else out_avg * 0.99 + out.detach() * 0.01
        loss = torch.nn.functional.mse_loss(out, noisy)
        loss.backward()
        opt.step()
        mse = torch.mean((out.detach() - clean) ** 2)
        psnr = (10 * torch.log10(1.0 / mse)).item()
        res["loss"].append(loss.item())
        res["psnr"].append(psnr)
        if psnr > best_psnr:
            best_psnr, best = psnr, {k: v.clone() for k, v in net.state_dict().items()}
            res["best_it"] = [it]
    net.load_state_dict(best)
    net.eval()
    with torch.no_grad():
        res["final"] = net(net_input_saved)
    res["avg"] = out_avg
    res["bn_var"] = net[2].running_var
    res["tracked"] = [int(net[2].num_batches_tracked)]
    return res


def _soft(torch, x, thr):
    return torch.sign(x) * torch.clamp(torch.abs(x) - thr, min=0)


def ista_lista_program(torch):
    """ISTA with a Lipschitz step from the spectral norm, FISTA momentum, and LISTA with learned
    per-layer step sizes and thresholds (softshrink vs. the hand formula), trained a few steps."""
    rng = np.random.default_rng(12)
    m, n, batch = 10, 20, 8
    A = normal(torch, rng, m, n) / np.sqrt(m)
    x_true = torch.from_numpy((rng.standard_normal((batch, n)) *
                               (rng.random((batch, n)) < 0.2)).astype(np.float32))
    y = x_true @ A.T
    L = torch.linalg.matrix_norm(A, ord=2) ** 2
    res = {"L": L, "svals": torch.linalg.svdvals(A)}
    lam = 0.05
    x = torch.zeros(batch, n)
    z, t = x.clone(), 1.0
    for _ in range(20):
        x_new = _soft(torch, z - (z @ A.T - y) @ A / L, lam / L)
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        z = x_new + ((t - 1) / t_new) * (x_new - x)
        x, t = x_new, t_new
    res["fista"] = x
    res["softshrink_eq"] = torch.nn.functional.softshrink(z, 0.1) - _soft(torch, z, 0.1)
    res["sparsity"] = (x != 0).float().mean()

    class LISTA(torch.nn.Module):
        def __init__(self, A, layers=3):
            super().__init__()
            self.register_buffer("A", A)
            self.W = torch.nn.Linear(m, n, bias=False)
            self.S = torch.nn.Linear(n, n, bias=False)
            with torch.no_grad():
                self.W.weight.copy_(A.T / L)
                self.S.weight.copy_(torch.eye(n) - A.T @ A / L)
            self.theta = torch.nn.Parameter(torch.full((layers,), lam) / L)
            self.gamma = torch.nn.ParameterList(
                [torch.nn.Parameter(torch.ones(1)) for _ in range(layers)])
            self.shrink = torch.nn.Softshrink(0.0)

        def forward(self, y):
            b = self.W(y)
            x = _soft(torch, b, self.theta[0])
            for k in range(1, self.theta.numel()):
                x = _soft(torch, self.gamma[k] * (self.S(x) + b), self.theta[k])
            return x

    net = LISTA(A)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    res["loss"] = []
    for _ in range(4):
        opt.zero_grad()
        xh = net(y)
        loss = torch.nn.functional.mse_loss(xh, x_true, reduction="sum") / batch
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
    res["theta"] = net.theta.detach()
    res["theta_grad"] = net.theta.grad
    res["gamma_grads"] = [g.grad for g in net.gamma[1:]]
    res["gamma0_grad"] = [net.gamma[0].grad is None]
    res["names"] = [name for name, _ in net.named_parameters()]
    res["buffers"] = [name for name, _ in net.named_buffers()]
    res["shrink_repr"] = [repr(net.shrink)]
    res["nmse_db"] = 10 * torch.log10(((xh.detach() - x_true) ** 2).sum() / (x_true ** 2).sum())
    return res


def complex_corners_program(torch):
    """Corners imaging code touches: view_as_complex needs a last dim of stride 1 and size 2;
    view_as_real of a conj view refuses; fft with s= pads/crops; fftfreq with d; conj views."""
    rng = np.random.default_rng(13)
    x = normal(torch, rng, 3, 4, 2)
    res = {}
    res["t_ok"] = torch.view_as_real(torch.view_as_complex(x.transpose(0, 1)))
    res["t_err"] = _outcome(lambda: torch.view_as_complex(normal(torch, rng, 3, 3)[:, 1:]))
    res["t_err2"] = _outcome(lambda: torch.view_as_complex(normal(torch, rng, 3, 6)[:, 1:3]))
    res["last_err"] = _outcome(lambda: torch.view_as_complex(normal(torch, rng, 3, 3)))
    res["stride_err"] = _outcome(lambda: torch.view_as_complex(normal(torch, rng, 2, 4)[:, ::2]))
    c = torch.view_as_complex(x)
    res["conj_err"] = _outcome(lambda: torch.view_as_real(c.conj()))
    res["is_conj"] = [c.conj().is_conj(), c.conj().resolve_conj().is_conj()]
    res["view_shares"] = [c.data_ptr() == x.data_ptr()]
    c.mul_(2)
    res["x_after"] = x
    res["fft_s"] = torch.view_as_real(torch.fft.fft2(c, s=(5, 3), norm="forward"))
    res["ifftn_s"] = torch.view_as_real(torch.fft.ifftn(c, s=(2,), dim=(0,)))
    res["fftfreq"] = torch.fft.fftfreq(6, d=0.5)
    res["fftshift_all"] = torch.fft.fftshift(torch.arange(12).reshape(3, 4))
    res["ifftshift_all"] = torch.fft.ifftshift(torch.arange(12.0).reshape(3, 4), dim=1)
    res["real_assign"] = torch.view_as_real(c.real.clone() + 1j * c.imag)
    c2 = c.clone()
    c2.imag.zero_()
    res["imag_zeroed"] = torch.view_as_real(c2)
    res["abs_dtype"] = [str(c.abs().dtype).split(".")[-1], str(c.angle().dtype).split(".")[-1]]
    res["angle_real"] = torch.angle(torch.tensor([-1.0, 0.0, 2.0]))
    res["complex_sum"] = torch.view_as_real(c.sum(dim=0))
    res["complex_mean"] = torch.view_as_real(c.mean())
    res["matmul"] = torch.view_as_real(c @ c.mT.conj())
    res["hfft"] = torch.fft.hfft(c[0], n=6)
    # gradients through abs at zero, polar, view_as_real
    z = torch.zeros(2, dtype=torch.complex64, requires_grad=True)
    (g,) = torch.autograd.grad(z.abs().sum(), z)
    res["abs0_grad"] = torch.view_as_real(g)
    r = torch.tensor([1.0, 2.0], requires_grad=True)
    th = torch.tensor([0.3, -0.7], requires_grad=True)
    p = torch.polar(r, th)
    loss = torch.view_as_real(p * p).pow(2).sum() + p.real.sum()
    gr, gth = torch.autograd.grad(loss, (r, th))
    res["polar_grads"] = [gr, gth]
    res["promote"] = [str((c * 2.0).dtype).split(".")[-1],
                      str((torch.ones(2) * 1j).dtype).split(".")[-1],
                      str((torch.ones(2, dtype=torch.float64) + 1j).dtype).split(".")[-1]]
    return res


PROGRAMS = [gerchberg_saxton_program, deep_image_prior_program, ista_lista_program,
            complex_corners_program]

TOLERANCES = {
    # 6 GS iterations amplify float32 fft rounding in phases where the amplitude is small
    "gerchberg_saxton_program": (1e-4, 1e-5),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
