"""Dense vision corners written as kornia and torchvision write them in plain torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy data: uint8 resizing (antialiased
bilinear / bicubic, nearest), torch.gradient with spacings, histogram / histc / bucketize /
quantile, max_unpool2d, fold(unfold) with dilation, pixel (un)shuffle, reflect / circular /
replicate padding and padding_mode convolutions, grid_sample's grid gradient in every mode,
3-D affine grids, DLT homographies by svd and lstsq; the errors of bad vision inputs; bilateral
and guided filters (integral images), DSNT / spatial soft-argmax, conv_soft_argmax2d,
kornia's distance transform, MS-SSIM-style tensor powers and gamma adjustment;
differentiable JPEG (DCT by einsum, polynomial rounding)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests
from tests.parity.test_parity_programs_round30_vision import _filters

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def resampling_corners_program(torch):
    """uint8 resizing, gradients and histograms, padding, grid_sample, DLT."""
    F = torch.nn.functional
    rng = np.random.default_rng(9)
    res = {}
    x = torch.from_numpy(rng.random((2, 3, 9, 10)).astype(np.float32))
    u8 = (x * 255).to(torch.uint8)
    res["u8_aa"] = F.interpolate(u8, size=(5, 6), mode="bilinear", antialias=True)
    res["u8_bil"] = F.interpolate(u8, size=(13, 7), mode="bilinear", align_corners=False)
    res["u8_near"] = F.interpolate(u8, size=(13, 7), mode="nearest")
    res["u8_bic_aa"] = F.interpolate(u8, size=(5, 6), mode="bicubic", antialias=True)
    # torch.gradient for image derivatives
    gy, gx = torch.gradient(x[0, 0], spacing=(0.5, 2.0))
    res["tg"] = [gy, gx]
    res["tg2"] = list(torch.gradient(x[0, 0], dim=1, edge_order=2))
    coords = torch.linspace(0, 1, 10) ** 2
    res["tg3"] = list(torch.gradient(x[0, 0], spacing=(coords,), dim=1))
    res["hist"] = list(torch.histogram(x.flatten(), bins=7, range=(0.1, 0.9), density=True))
    res["hist_w"] = list(
        torch.histogram(
            x.flatten(), bins=torch.tensor([0.0, 0.2, 0.5, 1.0]), weight=x.flatten() * 2
        )
    )
    res["histc_auto"] = torch.histc(x, bins=5)
    res["bucket"] = torch.bucketize(x[0, 0], torch.tensor([0.25, 0.5, 0.75]), right=True)
    res["quant"] = torch.quantile(
        x.flatten(1), torch.tensor([0.02, 0.98]), dim=1, interpolation="nearest"
    )
    res["quant2"] = torch.quantile(x.flatten(1), 0.5, dim=1, keepdim=True, interpolation="midpoint")
    mp, idx = F.max_pool2d(x, 2, return_indices=True, ceil_mode=True)
    res["unpool"] = F.max_unpool2d(mp, idx, 2, output_size=x.shape[-2:])
    res["fold"] = F.fold(
        F.unfold(x, 3, dilation=2, padding=2, stride=2), (9, 10), 3, dilation=2, padding=2, stride=2
    )
    res["ps"] = F.pixel_unshuffle(F.pixel_shuffle(x[:, :1].repeat(1, 4, 1, 1), 2), 2)
    xr = x.clone().requires_grad_(True)
    p1 = F.pad(xr, [2, 3, 1, 4], mode="reflect")
    p2 = F.pad(xr, [2, 3, 1, 4], mode="circular")
    p3 = F.pad(xr, [2, 3, 1, 4], mode="replicate")
    conv = torch.nn.Conv2d(3, 2, 3, padding=2, padding_mode="reflect", dilation=2)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(rng.standard_normal((2, 3, 3, 3)).astype(np.float32)))
        conv.bias.zero_()
    c = conv(xr)
    conv2 = torch.nn.Conv2d(3, 2, 3, padding="same", padding_mode="circular", bias=False)
    with torch.no_grad():
        conv2.weight.copy_(conv.weight)
    c2 = conv2(xr)
    res.update(p1=p1, p2=p2, p3=p3, c=c, c2=c2)
    (
        p1.square().sum() + p2.sin().sum() + p3.cos().sum() + c.square().mean() + c2.abs().sum()
    ).backward()
    res["g_pad"] = xr.grad
    # grid_sample with grid gradient in all modes
    grid = torch.from_numpy(rng.uniform(-1.2, 1.2, (2, 5, 6, 2)).astype(np.float32)).requires_grad_(
        True
    )
    xs = x.clone().requires_grad_(True)
    outs = []
    for mode in ["bilinear", "bicubic", "nearest"]:
        for pm in ["zeros", "border", "reflection"]:
            for ac in [False, True]:
                outs.append(F.grid_sample(xs, grid, mode=mode, padding_mode=pm, align_corners=ac))
    res["gs"] = outs
    sum(o.square().sum() for o in outs).backward()
    res["g_grid"], res["g_xs"] = grid.grad, xs.grad
    # 3-D affine grid
    theta = torch.from_numpy(rng.standard_normal((2, 3, 4)).astype(np.float32) * 0.3) + torch.eye(
        3, 4
    )
    theta.requires_grad_(True)
    g3 = F.affine_grid(theta, [2, 1, 3, 4, 5], align_corners=False)
    vol = torch.from_numpy(rng.random((2, 1, 3, 4, 5)).astype(np.float32))
    v = F.grid_sample(vol, g3, align_corners=False, padding_mode="border")
    v.sum().backward()
    res["vol"], res["g_theta"] = v, theta.grad
    # DLT homography with svd and weighted lstsq
    pts1 = torch.from_numpy(rng.random((1, 6, 2)).astype(np.float64))
    Hgt = torch.tensor(
        [[[1.1, 0.1, 0.05], [0.02, 0.9, -0.1], [0.1, 0.05, 1.0]]], dtype=torch.float64
    )
    ph = F.pad(pts1, [0, 1], value=1.0) @ Hgt.transpose(-1, -2)
    pts2 = ph[..., :2] / ph[..., 2:]
    x1, y1 = torch.chunk(pts1, dim=-1, chunks=2)
    x2, y2 = torch.chunk(pts2, dim=-1, chunks=2)
    ones, zeros = torch.ones_like(x1), torch.zeros_like(x1)
    ax = torch.cat([zeros, zeros, zeros, -x1, -y1, -ones, y2 * x1, y2 * y1, y2], dim=-1)
    ay = torch.cat([x1, y1, ones, zeros, zeros, zeros, -x2 * x1, -x2 * y1, -x2], dim=-1)
    A = torch.cat((ax, ay), dim=-1).reshape(ax.shape[0], -1, ax.shape[-1])
    _, _, V = torch.linalg.svd(A.transpose(-2, -1) @ A)
    H = V[..., -1].view(-1, 3, 3)
    H = H / H[..., -1:, -1:]
    res["dlt"] = H
    sol = torch.linalg.lstsq(A[..., :8], -A[..., 8:], driver="gelsd").solution
    res["lstsq"] = sol
    res["solve_left"] = torch.linalg.solve(Hgt, torch.eye(3, dtype=torch.float64), left=False)
    return res


def errors_program(torch):
    """The errors (type and first line) of bad inputs to vision ops."""
    F = torch.nn.functional
    res = {}

    def err(name, fn):
        try:
            out = fn()
            res[name] = ["ok", str(getattr(out, "dtype", type(out).__name__)).split(".")[-1]]
        except Exception as e:
            # messages name the library's Size type; compare the rest
            message = str(e).split("\n")[0].replace(torch.__name__ + ".Size", "Size")
            res[name] = [type(e).__name__, message]

    x = torch.rand(1, 1, 3, 3)
    err("pad_reflect_big", lambda: F.pad(x, [3, 3, 0, 0], mode="reflect"))
    err("pad_circ_big", lambda: F.pad(x, [4, 4, 0, 0], mode="circular"))
    err("pad_neg_reflect", lambda: F.pad(x, [-1, 0, 0, 0], mode="reflect"))
    err("pad_odd", lambda: F.pad(x, [1, 1, 1], mode="reflect"))
    err("pad_replicate_2d", lambda: F.pad(torch.rand(3, 3), [1, 1, 1, 1], mode="replicate"))
    err("pad_reflect_5", lambda: F.pad(torch.rand(1, 1, 1, 3, 3), [1, 1, 1, 1], mode="reflect"))
    err("aa_nearest", lambda: F.interpolate(x, size=(2, 2), mode="nearest", antialias=True))
    err(
        "aa_3d",
        lambda: F.interpolate(torch.rand(1, 1, 4), size=(2,), mode="linear", antialias=True),
    )
    err("interp_both", lambda: F.interpolate(x, size=(2, 2), scale_factor=2.0))
    err(
        "interp_ac_nearest",
        lambda: F.interpolate(x, size=(2, 2), mode="nearest", align_corners=True),
    )
    err("interp_bad_mode", lambda: F.interpolate(x, size=(2, 2), mode="cubic"))
    err(
        "gs_u8",
        lambda: F.grid_sample(x.to(torch.uint8), torch.zeros(1, 2, 2, 2), align_corners=False),
    )
    err("gs_badgrid", lambda: F.grid_sample(x, torch.zeros(1, 2, 2, 3), align_corners=False))
    err(
        "gs_badmode",
        lambda: F.grid_sample(x, torch.zeros(1, 2, 2, 2), mode="area", align_corners=False),
    )
    err(
        "gs_bicubic5d",
        lambda: F.grid_sample(
            torch.rand(1, 1, 2, 2, 2),
            torch.zeros(1, 1, 1, 1, 3),
            mode="bicubic",
            align_corners=False,
        ),
    )
    err("histc_int", lambda: torch.histc(torch.tensor([1, 2, 3]), bins=3))
    err("histc_bad", lambda: torch.histc(x, bins=3, min=2, max=1))
    err("histc_grad", lambda: torch.histc(x.requires_grad_(), bins=3).sum().backward())
    x.requires_grad_(False)
    err("bincount_neg", lambda: torch.bincount(torch.tensor([-1, 2])))
    err("bincount_2d", lambda: torch.bincount(torch.tensor([[1, 2]])))
    err("bincount_float", lambda: torch.bincount(torch.tensor([1.0, 2.0])))
    err("bincount_w", lambda: torch.bincount(torch.tensor([1, 2]), weights=torch.tensor([1.0])))
    err("inv_sing", lambda: torch.linalg.inv(torch.zeros(3, 3)))
    err("inv_sing_b", lambda: torch.linalg.inv(torch.stack([torch.eye(3), torch.zeros(3, 3)])))
    err("solve_sing", lambda: torch.linalg.solve(torch.zeros(2, 3, 3), torch.ones(2, 3, 1)))
    err("inverse_nonsq", lambda: torch.inverse(torch.rand(2, 3)))
    err("solve_shape", lambda: torch.linalg.solve(torch.rand(3, 3), torch.rand(4)))
    err(
        "affine_grid_bad",
        lambda: F.affine_grid(torch.rand(1, 3, 3), [1, 1, 4, 4], align_corners=False),
    )
    err(
        "affine_grid_size",
        lambda: F.affine_grid(torch.rand(2, 2, 3), [1, 1, 4, 4], align_corners=False),
    )
    err("unfold_3d", lambda: F.unfold(torch.rand(1, 3, 3), 2))
    err("unfold_big", lambda: F.unfold(x, 5))
    err("fold_bad", lambda: F.fold(torch.rand(1, 5, 4), (3, 3), 2))
    err("median_empty", lambda: torch.rand(0).median())
    err("maxpool_big", lambda: F.max_pool2d(x, 5))
    err("conv_u8", lambda: F.conv2d(x.to(torch.uint8), torch.ones(1, 1, 2, 2, dtype=torch.uint8)))
    err("atan2_int", lambda: torch.atan2(torch.tensor([1]), torch.tensor([2])))
    err("fmod_int0", lambda: torch.fmod(torch.tensor([1]), 0))
    err("histogram_int", lambda: torch.histogram(torch.tensor([1, 2]), bins=2))
    err(
        "searchsorted_unsorted_dtype",
        lambda: torch.searchsorted(torch.tensor([1, 2]), torch.tensor([1.5])),
    )
    err("bucketize_2d", lambda: torch.bucketize(torch.tensor([1.0]), torch.tensor([[1.0]])))
    err("quantile_big", lambda: torch.quantile(torch.rand(4), 1.5))
    err("quantile_int", lambda: torch.quantile(torch.tensor([1, 2]), 0.5))
    err(
        "interp_int",
        lambda: F.interpolate(
            torch.ones(1, 1, 2, 2, dtype=torch.int32), size=(3, 3), mode="bilinear"
        ),
    )
    err(
        "interp_u8_bicubic",
        lambda: F.interpolate(
            torch.ones(1, 1, 2, 2, dtype=torch.uint8), size=(3, 3), mode="bicubic"
        ),
    )
    err(
        "interp_u8_area",
        lambda: F.interpolate(torch.ones(1, 1, 2, 2, dtype=torch.uint8), size=(3, 3), mode="area"),
    )
    err(
        "interp_u8_ne",
        lambda: F.interpolate(
            torch.ones(1, 1, 2, 2, dtype=torch.uint8), size=(3, 3), mode="nearest-exact"
        ),
    )
    err(
        "interp_u8_aa3",
        lambda: F.interpolate(
            torch.ones(1, 3, 4, 4, dtype=torch.uint8),
            size=(3, 3),
            mode="bilinear",
            antialias=True,
            align_corners=True,
        ),
    )
    err("maxpool_u8", lambda: F.max_pool2d(torch.ones(1, 1, 4, 4, dtype=torch.uint8), 2))
    err("avgpool_u8", lambda: F.avg_pool2d(torch.ones(1, 1, 4, 4, dtype=torch.uint8), 2))
    err("median_u8", lambda: torch.ones(1, 4, dtype=torch.uint8).median(dim=1))
    err("cumsum_u8", lambda: torch.ones(4, dtype=torch.uint8).cumsum(0))
    err("lerp_int", lambda: torch.lerp(torch.tensor([1]), torch.tensor([2]), 0.5))
    err("clamp_u8", lambda: torch.ones(4, dtype=torch.uint8).clamp(0, 300))
    err("u8_sub", lambda: torch.tensor([1], dtype=torch.uint8) - 300)
    err("u8_float", lambda: torch.tensor([200], dtype=torch.uint8) * 1.5)
    err("round_dec_u8", lambda: torch.ones(4, dtype=torch.uint8).round(decimals=1))
    return res


def dense_filters_program(torch):
    """Bilateral / guided filters, DSNT, soft-argmax, distance transform, gamma."""
    K = _filters(torch)
    F = torch.nn.functional
    rng = np.random.default_rng(11)
    res = {}
    x = torch.from_numpy(rng.random((2, 3, 12, 12)).astype(np.float32)).requires_grad_(True)

    # bilateral blur via unfold
    def bilateral(inp, ks=5, sigma_color=0.1, sigma_space=(1.5, 1.5)):
        kx = ks // 2
        padded = F.pad(inp, (kx, kx, kx, kx), mode="reflect")
        unf = padded.unfold(2, ks, 1).unfold(3, ks, 1).flatten(-2)
        diff = unf - inp.unsqueeze(-1)
        color_distance_sq = diff.abs().sum(1, keepdim=True).square()
        color_kernel = (-0.5 / sigma_color**2 * color_distance_sq).exp()
        space_kernel = K["get_gaussian_kernel2d"](
            (ks, ks), torch.tensor([sigma_space]).expand(inp.shape[0], 2)
        )
        space_kernel = space_kernel.view(-1, 1, 1, 1, ks * ks)
        kernel = space_kernel * color_kernel
        return (unf * kernel).sum(-1) / kernel.sum(-1)

    res["bilateral"] = bilateral(x)

    # guided filter with integral-image box filter
    def box_integral(inp, r):
        cs = F.pad(inp, (1, 0, 1, 0)).cumsum(-1).cumsum(-2)
        h, w = inp.shape[-2:]
        yy = torch.arange(h)
        xx = torch.arange(w)
        y0 = (yy - r).clamp(0, h)
        y1 = (yy + r + 1).clamp(0, h)
        x0 = (xx - r).clamp(0, w)
        x1 = (xx + r + 1).clamp(0, w)
        s = (
            cs[..., y1[:, None], x1]
            - cs[..., y0[:, None], x1]
            - cs[..., y1[:, None], x0]
            + cs[..., y0[:, None], x0]
        )
        area = (y1 - y0)[:, None] * (x1 - x0)
        return s / area

    def guided(guide, inp, r=2, eps=1e-2):
        mean_I, mean_p = box_integral(guide, r), box_integral(inp, r)
        cov_Ip = box_integral(guide * inp, r) - mean_I * mean_p
        var_I = box_integral(guide * guide, r) - mean_I**2
        a = cov_Ip / (var_I + eps)
        b = mean_p - a * mean_I
        return box_integral(a, r) * guide + box_integral(b, r)

    gray = x.mean(1, keepdim=True)
    res["guided"] = guided(gray, x)
    # DSNT / conv soft-argmax
    heat = torch.from_numpy(rng.standard_normal((2, 4, 8, 9)).astype(np.float32)).requires_grad_(
        True
    )

    def spatial_softmax2d(inp, temperature=torch.tensor(1.0)):
        b, c, h, w = inp.shape
        x_ = inp.view(b, c, -1)
        x_soft = F.softmax(x_ * temperature, dim=-1)
        return x_soft.view(b, c, h, w)

    def spatial_expectation2d(inp, normalized_coordinates=True):
        b, c, h, w = inp.shape
        xs = (
            torch.linspace(-1, 1, w) if normalized_coordinates else torch.arange(w, dtype=inp.dtype)
        )
        ys = (
            torch.linspace(-1, 1, h) if normalized_coordinates else torch.arange(h, dtype=inp.dtype)
        )
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        pos_x, pos_y = gx.reshape(-1), gy.reshape(-1)
        input_flat = inp.view(b, c, -1)
        expected_y = torch.sum(pos_y * input_flat, -1, keepdim=True)
        expected_x = torch.sum(pos_x * input_flat, -1, keepdim=True)
        return torch.cat([expected_x, expected_y], -1).view(b, c, 2)

    sm = spatial_softmax2d(heat, torch.tensor(2.0))
    coords = spatial_expectation2d(sm)
    coords_px = spatial_expectation2d(sm, False)
    target = torch.from_numpy(rng.uniform(-1, 1, (2, 4, 2)).astype(np.float32))

    def render_gaussian2d(mean, std, size):
        h, w = size
        xs = torch.linspace(-1, 1, w)
        ys = torch.linspace(-1, 1, h)
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        grid = torch.stack([gx, gy], -1)
        d = (grid[None, None] - mean[:, :, None, None]) / std
        g = torch.exp(-0.5 * d.pow(2).sum(-1))
        return g / g.sum((-2, -1), keepdim=True).clamp(min=1e-12)

    tg = render_gaussian2d(target, torch.tensor(0.3), (8, 9))
    js = (sm * (sm.clamp_min(1e-12).log() - tg.clamp_min(1e-12).log())).sum((-2, -1)).mean()

    def conv_soft_argmax2d(
        inp, ks=(3, 3), stride=(1, 1), padding=(1, 1), temperature=torch.tensor(1.0), eps=1e-8
    ):
        b, c, h, w = inp.shape
        ky, kx = ks
        inp = inp.view(b * c, 1, h, w)
        center_kernel = torch.zeros(2, 1, ky, kx)
        center_kernel[0, 0, ky // 2, kx // 2] = 1
        center_kernel[1, 0, ky // 2, kx // 2] = 1
        grid_global = torch.stack(
            torch.meshgrid(
                torch.arange(h, dtype=inp.dtype), torch.arange(w, dtype=inp.dtype), indexing="xy"
            )[::-1],
            0,
        )[[1, 0]].unsqueeze(0)
        grid_global = grid_global.flip(1)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, ky), torch.linspace(-1, 1, kx), indexing="ij")
        window = torch.stack([xx, yy], 0).unsqueeze(1)
        x_max = F.adaptive_max_pool2d(inp, (1, 1))
        x_exp = ((inp - x_max.detach()) / temperature).exp()
        pool_coef = float(kx * ky)
        den = pool_coef * F.avg_pool2d(x_exp, ks, stride=stride, padding=padding) + eps
        x_softmaxpool = (
            pool_coef * F.avg_pool2d(x_exp * inp, ks, stride=stride, padding=padding) / den
        )
        x_softmaxpool = x_softmaxpool.view(b, c, x_softmaxpool.size(2), x_softmaxpool.size(3))
        coords_ = F.conv2d(x_exp, window, stride=stride, padding=padding) / den
        return coords_.view(b, c, 2, h, w), x_softmaxpool

    csa, sp = conv_soft_argmax2d(heat, temperature=torch.tensor(0.5))
    res.update(sm=sm, coords=coords, coords_px=coords_px, js=js, csa=csa, sp=sp)

    # distance transform (kornia.contrib) by iterated conv
    def distance_transform(image, kernel_size=3, h=0.35):
        n_iters = math.ceil(max(image.shape[2], image.shape[3]) / math.floor(kernel_size / 2))
        yy, xx = torch.meshgrid(torch.arange(kernel_size), torch.arange(kernel_size), indexing="ij")
        grid = torch.stack([xx, yy], -1).float() - kernel_size // 2
        kernel = torch.hypot(grid[..., 0], grid[..., 1])
        kernel = torch.exp(kernel / -h).unsqueeze(0)
        out = torch.zeros_like(image)
        boundary = image.clone()
        signal_ones = torch.ones_like(boundary)
        for i in range(n_iters):
            cdt = K["filter2d"](boundary, kernel, border_type="replicate")
            cdt = -h * torch.log(cdt)
            cdt = torch.nan_to_num(cdt, posinf=0.0)
            mask = torch.where(cdt > 0, 1.0, 0.0)
            if mask.sum() == 0:
                break
            offset = i * (kernel_size // 2)
            out += (offset + cdt) * mask
            boundary = torch.where(mask == 1, signal_ones, boundary)
        return out

    bw = torch.zeros(1, 1, 10, 11)
    bw[..., 3, 4] = 1.0
    bw[..., 7, 9] = 1.0
    res["dt"] = distance_transform(bw)
    # MS-SSIM style weighting with tensor pow, gamma adjust
    vals = torch.tensor([0.9, 0.8, 0.95, 0.7, 0.85]).requires_grad_(True)
    weights = torch.tensor([0.0448, 0.2856, 0.3001, 0.2363, 0.1333])
    ms = torch.prod(F.relu(vals) ** weights)
    gamma = torch.from_numpy(rng.uniform(0.5, 2.0, (2, 1, 1, 1)).astype(np.float32)).requires_grad_(
        True
    )
    adj = (1.3 * torch.pow(x, gamma)).clamp(0, 1)
    logadj = 0.8 * torch.log2(1 + x)
    res.update(ms=ms, adj=adj, logadj=logadj)
    loss = sum(v.square().mean() for kk, v in res.items())
    loss.backward()
    res.update(g_x=x.grad, g_heat=heat.grad, g_vals=vals.grad, g_gamma=gamma.grad)
    return res


def jpeg_program(torch):
    """kornia's differentiable JPEG: YCbCr, chroma subsampling, 8x8 DCT by einsum, quality
    scaled tables, polynomial rounding; gradients to the image and the quality."""
    F = torch.nn.functional
    rng = np.random.default_rng(18)
    res = {}
    img = torch.from_numpy(rng.random((2, 3, 20, 18)).astype(np.float32)).requires_grad_(True)
    quality = torch.tensor([50.0, 80.0], requires_grad=True)
    qt_y = torch.from_numpy(rng.integers(5, 60, (8, 8)).astype(np.float32))
    qt_c = torch.from_numpy(rng.integers(10, 99, (8, 8)).astype(np.float32))

    def rgb_to_ycbcr(image):
        r, g, b = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
        delta = 0.5
        y = 0.299 * r + 0.587 * g + 0.114 * b
        cb = (b - y) * 0.564 + delta
        cr = (r - y) * 0.713 + delta
        return torch.stack([y, cb, cr], -3)

    def ycbcr_to_rgb(image):
        y, cb, cr = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
        cb_s, cr_s = cb - 0.5, cr - 0.5
        r = y + 1.403 * cr_s
        g = y - 0.714 * cr_s - 0.344 * cb_s
        b = y + 1.773 * cb_s
        return torch.stack([r, g, b], -3)

    def patchify_8x8(x):
        B, H, W = x.shape
        x = x.view(B, H // 8, 8, W // 8, 8)
        return x.permute(0, 1, 3, 2, 4).reshape(B, -1, 8, 8)

    def unpatchify_8x8(x, H, W):
        B = x.shape[0]
        x = x.view(B, H // 8, W // 8, 8, 8)
        return x.permute(0, 1, 3, 2, 4).reshape(B, H, W)

    def dct_basis():
        idx = torch.arange(8, dtype=torch.float32)
        basis = torch.cos(((2.0 * idx[:, None] + 1.0) * idx[None, :] * math.pi) / 16.0)
        alpha = torch.ones(8)
        alpha[0] = 1.0 / math.sqrt(2.0)
        return basis, torch.outer(alpha, alpha)

    basis, scale = dct_basis()

    def dct_8x8(x):
        x = x * 255.0 - 128.0
        d = torch.einsum("...ij,ix,jy->...xy", x, basis, basis)
        return 0.25 * scale * d

    def idct_8x8(x):
        x = x * scale
        out = 0.25 * torch.einsum("...xy,ix,jy->...ij", x, basis, basis)
        return (out + 128.0) / 255.0

    def diff_round(x):
        return torch.round(x) + (x - torch.round(x)) ** 3

    def quality_to_scale(q):
        s = torch.where(q < 50, 5000.0 / q, 200.0 - 2.0 * q)
        return torch.floor(s) / 100.0

    def quantize(x, qt, q):
        s = quality_to_scale(q).view(-1, 1, 1, 1)
        table = (qt * s).clamp(min=1.0)
        return diff_round(x / table) * table

    B, C, H, W = img.shape
    ph, pw = (16 - H % 16) % 16, (16 - W % 16) % 16
    x = F.pad(img, [0, pw, 0, ph], mode="replicate")
    ycc = rgb_to_ycbcr(x)
    y = ycc[:, 0]
    cbcr = F.avg_pool2d(ycc[:, 1:], 2)
    yq = idct_8x8(quantize(dct_8x8(patchify_8x8(y)), qt_y, quality))
    Hc, Wc = cbcr.shape[-2:]
    cq = [idct_8x8(quantize(dct_8x8(patchify_8x8(cbcr[:, i])), qt_c, quality)) for i in range(2)]
    y_rec = unpatchify_8x8(yq, y.shape[-2], y.shape[-1])
    c_rec = torch.stack([unpatchify_8x8(c, Hc, Wc) for c in cq], 1)
    c_up = c_rec.repeat_interleave(2, dim=-1).repeat_interleave(2, dim=-2)
    rgb = ycbcr_to_rgb(torch.cat([y_rec[:, None], c_up], 1))[..., :H, :W]
    out = rgb.clamp(0, 1)
    res["jpeg"] = out
    loss = (out - img.detach()).abs().mean()
    loss.backward()
    res["loss"], res["g_img"], res["g_q"] = loss, img.grad, quality.grad
    return res


PROGRAMS = [resampling_corners_program, errors_program, dense_filters_program, jpeg_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS,
    ember,
    torch,
    {
        # grid_sample's float32 grid gradient sums products that cancel (bicubic especially);
        # float64 agrees to 1e-14
        "resampling_corners_program": (1e-4, 1e-5),
    },
)
