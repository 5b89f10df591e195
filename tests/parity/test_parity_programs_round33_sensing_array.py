"""Multichannel audio array processing written as pyroomacoustics / asteroid / nara_wpe's torch
code writes it, run once with `torch` bound to ember and once to PyTorch from the same NumPy
signals: complex STFT, spatial covariance by einsum, MVDR (solve with diagonal loading) and
istft, MUSIC (eigh noise subspace) and SRP-PHAT DOA, an NLMS echo canceller in a loop, WPE
dereverberation, and a mask-based neural beamformer trained a few steps with gradients through
the complex solve and eigh. _fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

C = 343.0
FS = 8000


def _mics(n=4, radius=0.05):
    ang = np.arange(n) * 2 * np.pi / n
    return np.stack([radius * np.cos(ang), radius * np.sin(ang)], 1)


def _array_signal(rng, n_mics=4, length=512, doa=1.0):
    """A plane wave from `doa` (radians) delayed by fractional delays in the frequency domain,
    plus noise: shape (n_mics, length), float32."""
    src = rng.standard_normal(length)
    mics = _mics(n_mics)
    delays = -(mics @ np.array([np.cos(doa), np.sin(doa)])) / C
    f = np.fft.rfftfreq(length, 1 / FS)
    spec = np.fft.rfft(src)[None] * np.exp(-2j * np.pi * f[None] * delays[:, None])
    x = np.fft.irfft(spec, n=length) + 0.05 * rng.standard_normal((n_mics, length))
    return x.astype(np.float32)


def _steering(torch, freqs, mics, angles):
    """Far-field steering vectors, (F, A, M) complex64."""
    direc = torch.stack([torch.cos(angles), torch.sin(angles)], -1)  # A, 2
    tau = -(direc @ mics.T) / C  # A, M
    return torch.exp(-2j * math.pi * freqs[:, None, None] * tau[None])


def mvdr_program(torch):
    """STFT, masked speech/noise covariances, MVDR by solve with diagonal loading (Souden's
    reference-channel form and the steering form), istft back."""
    rng = np.random.default_rng(0)
    # cond(phi_n) ~1e3 amplifies float32 rounding: in double, as ESPnet's beamformers do
    x = torch.from_numpy(_array_signal(rng)).double()
    n_fft, hop = 64, 16
    win = torch.hann_window(n_fft, dtype=x.dtype)
    X = torch.stft(x, n_fft, hop, window=win, return_complex=True)  # M, F, T
    res = {"X_shape": list(X.shape), "X_dtype": [str(X.dtype).split(".")[-1]]}
    res["X_abs"] = X.abs()
    mag = X.abs().mean(0)
    mask = (mag > mag.median()).double()  # speech mask
    Xt = X.permute(1, 2, 0)  # F, T, M
    phi_s = torch.einsum("ft,ftm,ftn->fmn", mask, Xt, Xt.conj()) / mask.sum(-1)[:, None, None]
    phi_n = torch.einsum("ft,ftm,ftn->fmn", 1 - mask, Xt, Xt.conj())
    phi_n = phi_n / (1 - mask).sum(-1).clamp(min=1)[:, None, None]
    m = phi_n.shape[-1]
    eye = torch.eye(m, dtype=phi_n.dtype)
    load = 1e-3 * torch.diagonal(phi_n, dim1=-2, dim2=-1).real.mean(-1)
    phi_n = phi_n + load[:, None, None] * eye
    res["herm"] = (phi_s - phi_s.mH).abs().max().item() < 1e-5
    # Souden MVDR: w = (phi_n^-1 phi_s) u / tr(phi_n^-1 phi_s)
    num = torch.linalg.solve(phi_n, phi_s)
    tr = torch.einsum("...ii->...", num)
    w = num[..., 0] / (tr[..., None] + 1e-8)
    res["w_souden"] = torch.view_as_real(w)
    # steering form: w = phi_n^-1 d / (d^H phi_n^-1 d)
    freqs = torch.fft.rfftfreq(n_fft, 1 / FS)
    mics = torch.from_numpy(_mics())
    d = _steering(torch, freqs.double(), mics, torch.tensor([1.0], dtype=torch.float64))[:, 0]
    pinv_d = torch.linalg.solve(phi_n, d.unsqueeze(-1)).squeeze(-1)
    w2 = pinv_d / torch.einsum("fm,fm->f", d.conj(), pinv_d)[:, None]
    res["w_steer"] = torch.view_as_real(w2.resolve_conj())
    res["distortionless"] = torch.view_as_real(torch.einsum("fm,fm->f", w2.conj(), d))
    Y = torch.einsum("fm,mft->ft", w.conj(), X)
    y = torch.istft(Y, n_fft, hop, window=win, length=x.shape[-1])
    res["y"] = y
    res["si_snr_ref"] = (10 * torch.log10((y ** 2).sum() / ((y - x[0]) ** 2).sum())).item()
    inv = torch.linalg.inv(phi_n)
    res["inv_err"] = (inv @ phi_n - eye).abs().amax().item() < 1e-3
    res["cond"] = torch.linalg.cond(phi_n[5])
    return res


def doa_program(torch):
    """MUSIC (eigh of the spatial covariance, noise-subspace projection) and SRP-PHAT (phase
    transform with abs/angle) over a grid, pyroomacoustics-style, on a known direction."""
    rng = np.random.default_rng(1)
    doa = 2.0
    # eigenvalues spread over 4e3: in double, as pyroomacoustics computes
    x = torch.from_numpy(_array_signal(rng, doa=doa, length=1024)).double()
    n_fft = 128
    X = torch.stft(x, n_fft, n_fft // 2, window=torch.hann_window(n_fft, dtype=x.dtype),
                   return_complex=True, center=False)
    freqs = torch.fft.rfftfreq(n_fft, 1 / FS)
    bins = torch.arange(4, 40)
    grid = torch.linspace(0, 2 * math.pi, 73)[:-1]
    mics = torch.from_numpy(_mics()).float()
    A = _steering(torch, freqs[bins], mics, grid).to(X.dtype)  # F, A, M
    Xb = X[:, bins].permute(1, 0, 2)  # F, M, T
    R = Xb @ Xb.mH / Xb.shape[-1]
    evals, evecs = torch.linalg.eigh(R)
    res = {"evals": evals, "evals_dtype": [str(evals.dtype).split(".")[-1]]}
    En = evecs[..., :-1]  # noise subspace (one source)
    proj = torch.einsum("fam,fmk->fak", A.conj(), En)
    p_music = 1.0 / (proj.abs() ** 2).sum(-1)
    music = (p_music / p_music.amax(dim=1, keepdim=True)).sum(0)
    res["music"] = music / music.max()
    res["music_doa"] = grid[music.argmax()].item()
    # SRP-PHAT
    Xn = Xb / (Xb.abs() + 1e-12)
    cross = torch.einsum("fmt,fnt->fmn", Xn, Xn.conj()) / Xb.shape[-1]
    srp = torch.einsum("fam,fmn,fan->a", A.conj(), cross, A).real
    res["srp"] = srp / srp.max()
    res["srp_doa"] = grid[srp.argmax()].item()
    # GCC-PHAT between two mics by irfft, tdoa by argmax; angle() of cross spectrum
    G = X[0] * X[2].conj()
    G = G / G.abs().clamp_min(1e-12)
    cc = torch.fft.irfft(G.mean(-1), n=n_fft)
    cc = torch.fft.fftshift(cc)
    res["gcc_lag"] = cc.argmax().item() - n_fft // 2
    res["phase"] = torch.angle(G[bins, :3])
    res["unwrap_like"] = torch.remainder(torch.angle(G[bins, 0]) + math.pi, 2 * math.pi)
    res["sgn"] = torch.view_as_real(torch.sgn(X[0, bins[:4], :2]))
    return res


def nlms_program(torch):
    """Frequency-free NLMS acoustic echo canceller in a sample loop (buffer roll, in-place
    updates under no_grad), then a block frequency-domain variant with rfft/irfft."""
    rng = np.random.default_rng(2)
    n, taps, mu, eps = 400, 16, 0.5, 1e-6
    far = rng.standard_normal(n).astype(np.float32)
    h = (rng.standard_normal(taps) * np.exp(-np.arange(taps) / 4)).astype(np.float32)
    near = 0.01 * rng.standard_normal(n).astype(np.float32)
    mic = np.convolve(far, h)[:n].astype(np.float32) + near
    far_t, mic_t = torch.from_numpy(far), torch.from_numpy(mic)
    w = torch.zeros(taps)
    buf = torch.zeros(taps)
    err = torch.empty(n)
    with torch.no_grad():
        for i in range(n):
            buf = torch.roll(buf, 1)
            buf[0] = far_t[i]
            e = mic_t[i] - torch.dot(w, buf)
            w.add_(mu * e * buf / (buf @ buf + eps))
            err[i] = e
    res = {"w": w, "err_tail": err[-20:], "erle": (10 * torch.log10(
        (mic_t[-100:] ** 2).sum() / (err[-100:] ** 2).sum())).item()}
    # frequency-domain block NLMS (overlap-save)
    B = taps
    W = torch.zeros(B + 1, dtype=torch.complex64)
    P = torch.full((B + 1,), 1e-2)
    errs = []
    for k in range(1, n // B):
        xb = far_t[(k - 1) * B:(k + 1) * B]
        Xf = torch.fft.rfft(xb)
        y = torch.fft.irfft(Xf * W, n=2 * B)[B:]
        e = mic_t[k * B:(k + 1) * B] - y
        Ef = torch.fft.rfft(torch.cat([torch.zeros(B), e]))
        P = 0.9 * P + 0.1 * Xf.abs() ** 2
        G = torch.fft.irfft(Xf.conj() * Ef / (P + eps), n=2 * B)
        G[B:] = 0
        W = W + 0.3 * torch.fft.rfft(G)
        errs.append(e.pow(2).mean())
    res["fd_err"] = torch.stack(errs)
    res["W"] = torch.view_as_real(W)
    return res


def wpe_program(torch):
    """nara_wpe's torch WPE: delayed multichannel linear prediction per frequency with power
    weighting, correlation matrices by einsum, solve, a few iterations."""
    rng = np.random.default_rng(3)
    x = torch.from_numpy(_array_signal(rng, n_mics=2, length=1024))
    # add a synthetic reverb tail
    tail = torch.from_numpy((rng.standard_normal((2, 200)) * np.exp(-np.arange(200) / 40)
                             ).astype(np.float32) * 0.3)
    x = x + torch.stack([torch.from_numpy(np.convolve(x[i].numpy(), tail[i].numpy())[:1024]
                                          .astype(np.float32)) for i in range(2)])
    # R is ill-conditioned (cond ~5e3): nara_wpe runs in double
    x = x.double()
    X = torch.stft(x, 64, 16, window=torch.hann_window(64, dtype=torch.float64),
                   return_complex=True)
    Y = X.permute(1, 0, 2)  # F, D, T
    taps, delay, iters = 3, 2, 2
    F_, D, T = Y.shape

    def build_y_tilde(Y):
        pad = torch.nn.functional.pad(torch.view_as_real(Y), (0, 0, taps + delay - 1, 0))
        Yp = torch.view_as_complex(pad)
        frames = [Yp[..., taps - 1 - k:taps - 1 - k + T] for k in range(taps)]
        return torch.stack(frames, 1).reshape(F_, taps * D, T)  # F, K*D, T

    Yt = build_y_tilde(Y)
    Z = Y
    res = {}
    for it in range(iters):
        power = (Z.real ** 2 + Z.imag ** 2).mean(1)
        inv_power = 1.0 / power.clamp(min=1e-10)
        R = torch.einsum("fkt,ft,flt->fkl", Yt, inv_power.to(Yt.dtype), Yt.conj())
        P = torch.einsum("fkt,ft,fdt->fkd", Yt, inv_power.to(Yt.dtype), Y.conj())
        G = torch.linalg.solve(R, P)
        Z = Y - torch.einsum("fkd,fkt->fdt", G.conj(), Yt)
        res[f"power{it}"] = power.sum(0)
    res["G"] = torch.view_as_real(G)
    res["Z"] = Z.abs()
    z = torch.istft(Z.permute(1, 0, 2), 64, 16, window=torch.hann_window(64, dtype=torch.float64),
                    length=1024)
    res["z"] = z
    res["is_complex"] = [Z.is_complex(), G.dtype == torch.complex128, z.dtype == torch.float64]
    return res


def neural_beamformer_program(torch):
    """A BLSTM mask estimator (speech and noise masks) feeding MVDR via solve, and a max-SNR
    (GEV) beamformer via eigh on a whitened covariance; trained a few steps on the SI-SNR of the
    beamformed output, gradients flowing through complex solve and eigh."""
    rng = np.random.default_rng(4)
    nn = torch.nn
    clean = _array_signal(rng, n_mics=3, length=512)
    noise = 0.5 * rng.standard_normal((3, 512)).astype(np.float32)
    x = torch.from_numpy(clean + noise)
    s = torch.from_numpy(clean[0])
    n_fft, hop = 64, 32
    win = torch.hann_window(n_fft)

    class MaskNet(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.lstm = nn.LSTM(f, 12, batch_first=True, bidirectional=True)
            self.out = nn.Linear(24, 2 * f)

        def forward(self, mag):  # M, F, T
            h, _ = self.lstm(torch.log1p(mag).transpose(1, 2))
            m = torch.sigmoid(self.out(h)).transpose(1, 2)  # M, 2F, T
            return m.chunk(2, dim=1)

    f = n_fft // 2 + 1
    net = MaskNet(f)
    fill_(torch, net, rng, 0.1)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)

    def si_snr(est, ref, eps=1e-8):
        est, ref = est - est.mean(), ref - ref.mean()
        proj = (est @ ref) / (ref @ ref + eps) * ref
        return 10 * torch.log10(proj.pow(2).sum() / ((est - proj).pow(2).sum() + eps))

    def covariance(X, mask):
        m = mask.mean(0)  # F, T
        Xt = X.permute(1, 0, 2)  # F, M, T
        phi = torch.einsum("ft,fmt,fnt->fmn", m.to(X.dtype), Xt, Xt.conj())
        return phi / m.sum(-1).clamp(min=1e-6)[:, None, None].to(X.dtype)

    res = {"losses": [], "gev_losses": []}
    for step in range(3):
        X = torch.stft(x, n_fft, hop, window=win, return_complex=True)
        ms, mn = net(X.abs())
        phi_s, phi_n = covariance(X, ms), covariance(X, mn)
        eye = torch.eye(3, dtype=X.dtype)
        phi_n = phi_n + 1e-3 * eye
        num = torch.linalg.solve(phi_n, phi_s)
        w = num[..., 0] / (torch.diagonal(num, dim1=-2, dim2=-1).sum(-1)[..., None] + 1e-8)
        Y = torch.einsum("fm,mft->ft", w.conj(), X)
        y = torch.istft(Y, n_fft, hop, window=win, length=512)
        loss = -si_snr(y, s)
        # GEV: whiten with the Cholesky factor of phi_n, principal eigenvector by eigh
        L = torch.linalg.cholesky(phi_n)
        Linv = torch.linalg.solve_triangular(L, eye.expand_as(phi_n), upper=False)
        Cm = Linv @ phi_s @ Linv.mH
        Cm = 0.5 * (Cm + Cm.mH)
        ev, V = torch.linalg.eigh(Cm)
        wg = Linv.mH @ V[..., -1:]
        # fix the eigenvector's phase so the loss does not depend on it
        ref_phase = wg[:, :1] / wg[:, :1].abs()
        wg = (wg / ref_phase).squeeze(-1)
        Yg = torch.einsum("fm,mft->ft", wg.conj(), X)
        gev_loss = (Yg.abs() ** 2).mean() / (ev[:, -1].mean() + 1) * 1e-3
        opt.zero_grad()
        (loss + gev_loss).backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        opt.step()
        res["losses"].append(loss.item())
        res["gev_losses"].append(gev_loss.item())
    res["w_ih_g"] = net.lstm.weight_ih_l0_reverse.grad
    res["out_g"] = net.out.weight.grad
    res["ev"] = ev[:4]
    res["w_real"] = torch.view_as_real(w.detach())[:4]
    # a direct complex-autograd probe: gradient of a real function of a solve and of eigh
    A = torch.from_numpy((rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3)))
                         .astype(np.complex64))
    A = (A @ A.mH + 3 * torch.eye(3, dtype=A.dtype)).requires_grad_()
    b = torch.from_numpy((rng.standard_normal(3) + 1j * rng.standard_normal(3))
                         .astype(np.complex64))
    sol = torch.linalg.solve(A, b)
    evals, evecs = torch.linalg.eigh(A)
    val = sol.abs().pow(2).sum() + evals[-1] + (evecs[:, -1].abs() ** 4).sum()
    (gA,) = torch.autograd.grad(val, A)
    res["gA"] = torch.view_as_real(gA)
    return res


PROGRAMS = [mvdr_program, doa_program, nlms_program, wpe_program, neural_beamformer_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
