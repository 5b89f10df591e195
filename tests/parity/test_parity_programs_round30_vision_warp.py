"""Geometric vision programs written as kornia writes them in plain torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy data: warp_affine (every mode, padding
and align_corners, and kornia's "fill" padding) and warp_perspective through normalised
homographies, affine_grid / meshgrid + transform_points and grid_sample, get_perspective_transform
by linalg.solve, gradients into the image, the angle, the scale and the corner points
image
registration of a homography by Adam through warp_perspective
SSIM / PSNR / total variation;
soft-histogram matching
colour jitter, random affine, flips, resized crops, posterize /
solarize / sharpness / autocontrast from NumPy-drawn parameters."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests
from tests.parity.test_parity_programs_round30_vision import _colors, _filters

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _warps(torch):
    """kornia.geometry's warps and homography helpers, as that library writes them."""
    F = torch.nn.functional
    def normal_transform_pixel(height, width, eps=1e-14, device=None, dtype=None):
        tr_mat = torch.tensor([[1.0, 0.0, -1.0], [0.0, 1.0, -1.0], [0.0, 0.0, 1.0]],
                              device=device, dtype=dtype)
        width_denom = eps if width == 1 else width - 1.0
        height_denom = eps if height == 1 else height - 1.0
        tr_mat[0, 0] = tr_mat[0, 0] * 2.0 / width_denom
        tr_mat[1, 1] = tr_mat[1, 1] * 2.0 / height_denom
        return tr_mat.unsqueeze(0)
    def normalize_homography(dst_pix_trans_src_pix, dsize_src, dsize_dst):
        src_h, src_w = dsize_src
        dst_h, dst_w = dsize_dst
        src_norm_trans_src_pix = normal_transform_pixel(src_h, src_w).to(dst_pix_trans_src_pix)
        src_pix_trans_src_norm = torch.inverse(src_norm_trans_src_pix)
        dst_norm_trans_dst_pix = normal_transform_pixel(dst_h, dst_w).to(dst_pix_trans_src_pix)
        return dst_norm_trans_dst_pix @ (dst_pix_trans_src_pix @ src_pix_trans_src_norm)
    def convert_affinematrix_to_homography(A):
        H = F.pad(A, [0, 0, 0, 1], "constant", value=0.0)
        H[..., -1, -1] += 1.0
        return H
    def warp_affine(src, M, dsize, mode="bilinear", padding_mode="zeros", align_corners=True,
                    fill_value=None):
        B, C, H, W = src.size()
        M_3x3 = convert_affinematrix_to_homography(M)
        dst_norm_trans_src_norm = normalize_homography(M_3x3, (H, W), dsize)
        src_norm_trans_dst_norm = torch.linalg.inv(dst_norm_trans_src_norm)
        grid = F.affine_grid(src_norm_trans_dst_norm[:, :2, :], [B, C, dsize[0], dsize[1]],
                             align_corners=align_corners)
        if padding_mode == "fill":
            ones_mask = torch.ones_like(src)
            inv_ones_mask = 1 - F.grid_sample(ones_mask, grid, align_corners=align_corners,
                                              mode=mode, padding_mode="zeros")
            inv_color_mask = inv_ones_mask * fill_value[..., None, None]
            return F.grid_sample(src, grid, align_corners=align_corners, mode=mode,
                                 padding_mode="zeros") + inv_color_mask
        return F.grid_sample(src, grid, align_corners=align_corners, mode=mode,
                             padding_mode=padding_mode)
    def create_meshgrid(height, width, normalized_coordinates=True, device=None, dtype=None):
        xs = torch.linspace(0, width - 1, width, device=device, dtype=dtype)
        ys = torch.linspace(0, height - 1, height, device=device, dtype=dtype)
        if normalized_coordinates:
            xs = (xs / (width - 1) - 0.5) * 2
            ys = (ys / (height - 1) - 0.5) * 2
        base_grid = torch.stack(torch.meshgrid([xs, ys], indexing="ij"), dim=-1)
        return base_grid.permute(1, 0, 2).unsqueeze(0)
    def convert_points_from_homogeneous(points, eps=1e-8):
        z_vec = points[..., -1:]
        mask = torch.abs(z_vec) > eps
        scale = torch.where(mask, 1.0 / (z_vec + eps), torch.ones_like(z_vec))
        return scale * points[..., :-1]
    def convert_points_to_homogeneous(points):
        return F.pad(points, [0, 1], "constant", 1.0)
    def transform_points(trans_01, points_1):
        shape_inp = list(points_1.shape)
        points_1 = points_1.reshape(-1, points_1.shape[-2], points_1.shape[-1])
        trans_01 = trans_01.reshape(-1, trans_01.shape[-2], trans_01.shape[-1])
        trans_01 = torch.repeat_interleave(trans_01, dim=0,
                                           repeats=points_1.shape[0] // trans_01.shape[0])
        points_1_h = convert_points_to_homogeneous(points_1)
        points_0_h = torch.bmm(points_1_h, trans_01.permute(0, 2, 1))
        points_0_h = torch.squeeze(points_0_h, dim=-1)
        points_0 = convert_points_from_homogeneous(points_0_h)
        shape_inp[-2] = points_0.shape[-2]
        shape_inp[-1] = points_0.shape[-1]
        return points_0.reshape(shape_inp)
    def warp_perspective(src, M, dsize, mode="bilinear", padding_mode="zeros", align_corners=True):
        B, _, H, W = src.size()
        h_out, w_out = dsize
        dst_norm_trans_src_norm = normalize_homography(M, (H, W), (h_out, w_out))
        src_norm_trans_dst_norm = torch.linalg.inv(dst_norm_trans_src_norm)
        grid = create_meshgrid(h_out, w_out, normalized_coordinates=True, device=src.device,
                               dtype=src.dtype)
        grid = grid.repeat(B, 1, 1, 1)
        grid = transform_points(src_norm_trans_dst_norm[:, None, None], grid)
        return F.grid_sample(src, grid, align_corners=align_corners, mode=mode,
                             padding_mode=padding_mode)
    def get_perspective_transform(points_src, points_dst):
        B = points_src.shape[0]
        x, y = points_src[..., 0], points_src[..., 1]
        u, v = points_dst[..., 0], points_dst[..., 1]
        ones, zeros = torch.ones_like(x), torch.zeros_like(x)
        ax = torch.stack([x, y, ones, zeros, zeros, zeros, -x * u, -y * u], -1)
        ay = torch.stack([zeros, zeros, zeros, x, y, ones, -x * v, -y * v], -1)
        A = torch.empty(B, 8, 8, dtype=points_src.dtype, device=points_src.device)
        A[:, 0::2, :] = ax
        A[:, 1::2, :] = ay
        b = points_dst.view(-1, 8, 1)
        X = torch.linalg.solve(A, b)
        M = torch.empty(B, 9, device=points_src.device, dtype=points_src.dtype)
        M[..., :8] = X.squeeze(-1)
        M[..., -1].fill_(1)
        return M.view(-1, 3, 3)
    def get_rotation_matrix2d(center, angle, scale):
        rad = angle * math.pi / 180.0
        alpha = scale[:, 0] * torch.cos(rad)
        beta = scale[:, 1] * torch.sin(rad)
        x, y = center[:, 0], center[:, 1]
        row0 = torch.stack([alpha, beta, (1 - alpha) * x - beta * y], -1)
        row1 = torch.stack([-beta, alpha, beta * x + (1 - alpha) * y], -1)
        return torch.stack([row0, row1], 1)
    return dict(warp_affine=warp_affine, warp_perspective=warp_perspective,
                get_perspective_transform=get_perspective_transform,
                get_rotation_matrix2d=get_rotation_matrix2d, transform_points=transform_points,
                create_meshgrid=create_meshgrid, normalize_homography=normalize_homography)


def warp_program(torch):
    """warp_affine / warp_perspective in every mode, gradients to image and parameters."""
    W = _warps(torch)
    rng = np.random.default_rng(6)
    res = {}
    src = torch.from_numpy(rng.random((2, 3, 10, 12)).astype(np.float32)).requires_grad_(True)
    angle = torch.tensor([15.0, -30.0], requires_grad=True)
    center = torch.tensor([[5.5, 4.5], [6.0, 5.0]])
    scale = torch.tensor([[1.1, 1.1], [0.8, 0.9]], requires_grad=True)
    M = W["get_rotation_matrix2d"](center, angle, scale)
    res["M"] = M
    outs = []
    for mode in ["bilinear", "nearest", "bicubic"]:
        for pm in ["zeros", "border", "reflection"]:
            for ac in [True, False]:
                outs.append(W["warp_affine"](src, M, (8, 9), mode, pm, ac))
    res["wa"] = outs
    res["fill"] = W["warp_affine"](src, M, (10, 12), padding_mode="fill",
                                   fill_value=torch.tensor([[0.2, 0.5, 0.9]]))
    pts_src = torch.tensor([[[0.0, 0.0], [11.0, 0.0], [11.0, 9.0], [0.0, 9.0]]]).repeat(2, 1, 1)
    pts_dst = pts_src + torch.from_numpy(rng.uniform(-2, 2, (2, 4, 2)).astype(np.float32))
    pts_dst.requires_grad_(True)
    H = W["get_perspective_transform"](pts_src, pts_dst)
    res["H"] = H
    res["tp"] = W["transform_points"](H, pts_src)
    wp = [W["warp_perspective"](src, H, (10, 12), mode, pm, ac)
          for mode in ["bilinear", "nearest"] for pm in ["zeros", "border", "reflection"]
          for ac in [True, False]]
    res["wp"] = wp
    loss = sum((o * torch.linspace(0, 1, o.shape[-1])).square().mean()
               for o in outs + wp + [res["fill"]])
    loss.backward()
    res["g_src"], res["g_angle"] = src.grad, angle.grad
    res["g_scale"], res["g_pts"] = scale.grad, pts_dst.grad
    return res


def registration_losses_program(torch):
    """Homography registration by Adam; SSIM, PSNR, TV; histogram matching."""
    W = _warps(torch)
    K = _filters(torch)
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    res = {}
    img = torch.from_numpy(rng.random((1, 1, 12, 12)).astype(np.float32))
    img = K["gaussian_blur2d"](img, (5, 5), (1.0, 1.0))
    Ht = torch.tensor([[[1.05, 0.05, 0.4], [-0.03, 0.97, -0.3], [0.002, 0.001, 1.0]]])
    target = W["warp_perspective"](img, Ht, (12, 12))
    # registration: optimise a homography parametrisation with Adam
    class Homography(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = torch.nn.Parameter(torch.eye(3))
        def forward(self):
            return torch.unsqueeze(self.model / self.model[2, 2], dim=0)
        def forward_inverse(self):
            return torch.unsqueeze(torch.inverse(self.model), dim=0)
    model = Homography()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    losses = []
    for it in range(6):
        opt.zero_grad()
        warped = W["warp_perspective"](img, model(), (12, 12))
        mask = W["warp_perspective"](torch.ones_like(img), model(), (12, 12))
        loss = F.l1_loss(warped * mask, target * mask, reduction="sum") / mask.sum().clamp(min=1)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    res["reg_losses"] = losses
    res["H_est"] = model.model
    res["H_inv"] = model.forward_inverse()
    # SSIM / PSNR / TV
    def ssim(img1, img2, window_size=5, max_val=1.0, eps=1e-12):
        C1 = (0.01 * max_val) ** 2
        C2 = (0.03 * max_val) ** 2
        sigma = torch.tensor([[1.5, 1.5]]).expand(img1.shape[0], 2)
        kernel = K["get_gaussian_kernel2d"]((window_size, window_size), sigma)
        mu1 = K["filter2d"](img1, kernel, "reflect", padding="valid")
        mu2 = K["filter2d"](img2, kernel, "reflect", padding="valid")
        mu1_sq, mu2_sq, mu1_mu2 = mu1 ** 2, mu2 ** 2, mu1 * mu2
        sigma1_sq = K["filter2d"](img1 ** 2, kernel, padding="valid") - mu1_sq
        sigma2_sq = K["filter2d"](img2 ** 2, kernel, padding="valid") - mu2_sq
        sigma12 = K["filter2d"](img1 * img2, kernel, padding="valid") - mu1_mu2
        num = (2.0 * mu1_mu2 + C1) * (2.0 * sigma12 + C2)
        den = (mu1_sq + mu2_sq + C1) * (sigma1_sq + sigma2_sq + C2)
        return num / (den + eps)
    def psnr(x, y, max_val=1.0):
        return 10.0 * torch.log10(max_val ** 2 / F.mse_loss(x, y, reduction="mean"))
    def total_variation(img, reduction="sum"):
        pixel_dif1 = img[..., 1:, :] - img[..., :-1, :]
        pixel_dif2 = img[..., :, 1:] - img[..., :, :-1]
        if reduction == "mean":
            return pixel_dif1.abs().mean(dim=(-3, -2, -1)) + pixel_dif2.abs().mean(dim=(-3, -2, -1))
        return pixel_dif1.abs().sum(dim=(-3, -2, -1)) + pixel_dif2.abs().sum(dim=(-3, -2, -1))
    x = torch.from_numpy(rng.random((2, 3, 14, 14)).astype(np.float32))
    noise = torch.from_numpy(rng.standard_normal((2, 3, 14, 14)).astype(np.float32))
    y = (x + 0.1 * noise).clamp(0, 1)
    y.requires_grad_(True)
    s = ssim(x, y)
    ssim_loss = torch.clamp((1.0 - s) / 2, min=0, max=1).mean()
    p = psnr(x, y)
    tv = total_variation(y).sum() + total_variation(y, "mean").sum()
    (ssim_loss - 0.01 * p + 0.001 * tv).backward()
    res["ssim"], res["psnr"], res["tv"], res["g_y"] = s, p, tv, y.grad
    # differentiable histogram matching (soft histograms with kernel density)
    def soft_hist(v, bins=16, bw=0.05):
        centers = torch.linspace(0, 1, bins)
        resid = v.flatten(1).unsqueeze(-1) - centers
        w = torch.exp(-0.5 * (resid / bw) ** 2)
        h = w.sum(1)
        return h / h.sum(-1, keepdim=True)
    src = torch.from_numpy(rng.random((1, 64)).astype(np.float32) ** 2).requires_grad_(True)
    ref = torch.from_numpy(rng.random((1, 64)).astype(np.float32))
    hs, hr = soft_hist(src), soft_hist(ref)
    cdf_s, cdf_r = hs.cumsum(-1), hr.cumsum(-1)
    emd = (cdf_s - cdf_r).abs().sum()
    emd.backward()
    res["emd"], res["g_src"] = emd, src.grad
    # classic (non-differentiable) histogram matching via sort + searchsorted + interp
    sv, si = src.detach().flatten().sort()
    rv, _ = ref.flatten().sort()
    q = torch.linspace(0, 1, 64)
    idx = torch.searchsorted(q, torch.rand(0).new_tensor([0.1, 0.5, 0.99]))
    matched = torch.empty_like(sv).scatter_(0, si, rv)
    res["matched"], res["ss_idx"] = matched, idx
    return res


def augmentation_program(torch):
    """Colour jitter and geometric augmentation from NumPy-drawn parameters."""
    W = _warps(torch)
    F = torch.nn.functional
    rng = np.random.default_rng(8)
    res = {}
    B = 4
    x = torch.from_numpy(rng.random((B, 3, 10, 10)).astype(np.float32)).requires_grad_(True)
    # parameters drawn by NumPy, as kornia's batch generators draw per-sample
    bri = torch.from_numpy(rng.uniform(0.8, 1.2, B).astype(np.float32))
    con = torch.from_numpy(rng.uniform(0.7, 1.3, B).astype(np.float32))
    sat = torch.from_numpy(rng.uniform(0.5, 1.5, B).astype(np.float32))
    hue = torch.from_numpy(rng.uniform(-0.1, 0.1, B).astype(np.float32))
    order = rng.permutation(4).tolist()
    def rgb_to_gray(im):
        r, g, b = im.unbind(-3)
        return (0.299 * r + 0.587 * g + 0.114 * b).unsqueeze(-3)
    def adjust_brightness(im, f):
        return (im * f.view(-1, 1, 1, 1)).clamp(0, 1)
    def adjust_contrast(im, f):
        mean = rgb_to_gray(im).mean(dim=(-3, -2, -1), keepdim=True)
        return ((im - mean) * f.view(-1, 1, 1, 1) + mean).clamp_(0, 1)
    def adjust_saturation(im, f):
        gray = rgb_to_gray(im).expand_as(im)
        return torch.lerp(gray, im, f.view(-1, 1, 1, 1)).clamp(0, 1)
    def adjust_hue(im, f):
        hsv = rgb_to_hsv(im)
        h, s, v = torch.chunk(hsv, chunks=3, dim=-3)
        divisor = 2 * math.pi
        h_out = torch.fmod(h + f.view(-1, 1, 1, 1) * divisor, divisor)
        return hsv_to_rgb(torch.cat([h_out, s, v], dim=-3))
    rgb_to_hsv, hsv_to_rgb = _colors(torch)["rgb_to_hsv"], _colors(torch)["hsv_to_rgb"]
    fns = [lambda im: adjust_brightness(im, bri), lambda im: adjust_contrast(im, con),
           lambda im: adjust_saturation(im, sat), lambda im: adjust_hue(im, hue)]
    out = x
    for i in order:
        out = fns[i](out)
    res["jitter"] = out
    # random affine from NumPy-drawn params
    ang = torch.from_numpy(rng.uniform(-20, 20, B).astype(np.float32))
    tr = torch.from_numpy(rng.uniform(-1.5, 1.5, (B, 2)).astype(np.float32))
    sc = torch.from_numpy(rng.uniform(0.9, 1.1, (B, 1)).astype(np.float32)).repeat(1, 2)
    sh = torch.from_numpy(rng.uniform(-0.2, 0.2, (B, 2)).astype(np.float32))
    center = torch.full((B, 2), 4.5)
    M = W["get_rotation_matrix2d"](center, ang, sc)
    M[..., 2] += tr
    Mh = F.pad(M, [0, 0, 0, 1], value=0.0)
    Mh[:, 2, 2] = 1.0
    shear = torch.eye(3).repeat(B, 1, 1)
    shear[:, 0, 1] = torch.tan(sh[:, 0])
    shear[:, 1, 0] = torch.tan(sh[:, 1])
    T = Mh @ shear
    aff = W["warp_affine"](out, T[:, :2], (10, 10), padding_mode="reflection")
    res["affine"] = aff
    flip = torch.from_numpy(rng.random(B) < 0.5)
    aff = torch.where(flip.view(-1, 1, 1, 1), aff.flip(-1), aff)
    # random resized crop via crop_by_indices (roi_align-lite through interpolate)
    y0, x0 = rng.integers(0, 4, B).tolist(), rng.integers(0, 4, B).tolist()
    crops = torch.cat([F.interpolate(aff[i:i + 1, :, y0[i]:y0[i] + 6, x0[i]:x0[i] + 6], size=(8, 8),
                                     mode="bilinear", align_corners=False, antialias=True)
                       for i in range(B)])
    res["crops"] = crops
    # posterize / solarize / sharpness / autocontrast on uint8 and float
    u8 = (crops.detach() * 255).round().to(torch.uint8)
    bits = 3
    mask = -int(2 ** (8 - bits))
    res["posterize"] = u8 & mask
    res["posterize2"] = torch.bitwise_and(u8, torch.tensor(0xE0, dtype=torch.uint8))
    res["solarize"] = torch.where(crops >= 0.6, 1.0 - crops, crops)
    sharp_k = torch.tensor([[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]]) / 13
    degenerate = F.conv2d(crops, sharp_k.view(1, 1, 3, 3).repeat(3, 1, 1, 1), groups=3)
    degenerate = torch.clamp(degenerate, 0.0, 1.0)
    mask_ = torch.ones_like(degenerate)
    padded_mask = F.pad(mask_, [1, 1, 1, 1])
    padded_degenerate = F.pad(degenerate, [1, 1, 1, 1])
    result = torch.where(padded_mask == 1, padded_degenerate, crops)
    res["sharp"] = torch.lerp(result, crops, 1.5).clamp(0, 1)
    mn = crops.amin(dim=(-2, -1), keepdim=True)
    mx = crops.amax(dim=(-2, -1), keepdim=True)
    res["autocontrast"] = ((crops - mn) / (mx - mn).clamp_min(1e-6)).clamp(0, 1)
    loss = sum(v.float().square().mean() for kk, v in res.items() if v.dtype.is_floating_point)
    loss.backward()
    res["g_x"] = x.grad
    # RNG-backed augmentation: only shapes/reproducibility
    g = torch.Generator().manual_seed(3)
    a1 = torch.rand(B, generator=g)
    g.manual_seed(3)
    a2 = torch.rand(B, generator=g)
    res["rng_repro"] = [bool(torch.equal(a1, a2)), bool(((a1 >= 0) & (a1 < 1)).all())]
    return res



PROGRAMS = [warp_program, registration_losses_program, augmentation_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 inverse of the normalised homography (LAPACK's order) moves sample points
        # by ulps, which bilinear weights near the border amplify
        "warp_program": (1e-4, 1e-5),
        # the same, then six Adam steps, whose normalised steps amplify tiny gradients
        "registration_losses_program": (1e-4, 1e-5),
    })
