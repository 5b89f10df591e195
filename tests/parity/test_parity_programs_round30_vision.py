"""Classical vision programs written as kornia writes them in plain torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy data: filter2d with reflect / replicate /
circular / constant padding, gaussian / box / median blur (by an identity-kernel conv and by
unfold), sobel and spatial_gradient through conv3d, Canny (non-max suppression by gather on
quantised angles, hysteresis until nothing changes), Harris / GFTT responses with max-pool NMS
and topk, Gaussian / Laplacian pyramids (antialiased, area, bicubic, nearest-exact resizing),
colour spaces (HSV by gather and %, Lab by pow and where, YUV, HLS through out=), histogram
equalisation (histc, bincount, cumsum, LUTs on uint8), morphology by unfold + amax, connected
components by iterated max_pool2d. Sibling file _warp: warps, registration, losses,
augmentation
_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _filters(torch):
    """kornia.filters' building blocks, written as that library writes them."""
    F = torch.nn.functional

    def _compute_padding(ks):
        comp = [k // 2 for k in ks]
        out = []
        for i in range(len(ks)):
            c = comp[-(i + 1)]
            pf = ks[-(i + 1)] - 1
            front = pf - c
            out += [front, c]
        return out

    def filter2d(input, kernel, border_type="reflect", normalized=False, padding="same"):
        b, c, h, w = input.shape
        tmp_kernel = kernel[:, None, ...].to(device=input.device, dtype=input.dtype)
        if normalized:
            tmp_kernel = tmp_kernel / tmp_kernel.abs().sum(dim=(-2, -1), keepdim=True)
        tmp_kernel = tmp_kernel.expand(-1, c, -1, -1)
        height, width = tmp_kernel.shape[-2:]
        if padding == "same":
            input = F.pad(input, _compute_padding([height, width]), mode=border_type)
        tmp_kernel = tmp_kernel.reshape(-1, 1, height, width)
        input = input.view(-1, tmp_kernel.size(0), input.size(-2), input.size(-1))
        output = F.conv2d(input, tmp_kernel, groups=tmp_kernel.size(0), padding=0, stride=1)
        if padding == "same":
            return output.view(b, c, h, w)
        return output.view(b, c, h - height + 1, w - width + 1)

    def gaussian(window_size, sigma):
        x = torch.arange(window_size, dtype=sigma.dtype) - window_size // 2
        if window_size % 2 == 0:
            x = x + 0.5
        gauss = torch.exp(-x.pow(2.0) / (2 * sigma.pow(2.0)))
        return gauss / gauss.sum(-1, keepdim=True)

    def get_gaussian_kernel2d(ks, sigma):
        sy, sx = sigma[:, 0, None], sigma[:, 1, None]
        ky, kx = gaussian(ks[0], sy), gaussian(ks[1], sx)
        return ky.unsqueeze(-1) * kx.unsqueeze(-2)

    def gaussian_blur2d(x, ks, sigma, border_type="reflect"):
        sigma = torch.tensor([sigma], dtype=x.dtype).expand(x.shape[0], 2)
        return filter2d(x, get_gaussian_kernel2d(ks, sigma), border_type)

    def box_blur(x, ks, border_type="reflect"):
        kernel = torch.ones(1, *ks, dtype=x.dtype) / (ks[0] * ks[1])
        return filter2d(x, kernel, border_type)

    def median_blur(x, ks):
        padding = [(k - 1) // 2 for k in ks]
        b, c, h, w = x.shape
        window = ks[0] * ks[1]
        kernel = torch.eye(window, dtype=x.dtype).view(window, 1, ks[0], ks[1])
        features = F.conv2d(x.reshape(b * c, 1, h, w), kernel, padding=padding, stride=1)
        features = features.view(b, c, -1, h, w)
        return torch.median(features, dim=2)[0]

    def median_blur_unfold(x, k):
        b, c, h, w = x.shape
        p = F.pad(x, [k // 2] * 4, mode="replicate")
        cols = F.unfold(p, k).view(b, c, k * k, h, w)
        return cols.median(dim=2).values

    def get_sobel_kernel2d():
        kx = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
        return torch.stack([kx, kx.transpose(0, 1)])

    def spatial_gradient(input, normalized=True):
        b, c, h, w = input.shape
        kernel = get_sobel_kernel2d()
        if normalized:
            kernel = kernel / kernel.abs().sum(dim=(-2, -1), keepdim=True)
        tmp_kernel = kernel.to(input).detach().unsqueeze(1).unsqueeze(1)
        kernel_flip = tmp_kernel.flip(-3)
        spatial_pad = [1, 1, 1, 1]
        out_channels = 2
        padded_inp = F.pad(input.reshape(b * c, 1, h, w), spatial_pad, "replicate")
        out = F.conv3d(padded_inp[:, :, None], kernel_flip, padding=0, groups=1)
        return out.reshape(b, c, out_channels, h, w)

    def sobel(input, normalized=True, eps=1e-6):
        edges = spatial_gradient(input, normalized)
        gx, gy = edges[:, :, 0], edges[:, :, 1]
        return torch.sqrt(gx * gx + gy * gy + eps)

    return dict(filter2d=filter2d, gaussian_blur2d=gaussian_blur2d, box_blur=box_blur,
                median_blur=median_blur, median_blur_unfold=median_blur_unfold,
                spatial_gradient=spatial_gradient, sobel=sobel,
                get_gaussian_kernel2d=get_gaussian_kernel2d, gaussian=gaussian)


def filters_program(torch):
    """filter2d in every border mode, blurs, sobel, and the gradient through all."""
    K = _filters(torch)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.random((2, 3, 9, 11)).astype(np.float32)).requires_grad_(True)
    res = {}
    ker = torch.from_numpy(rng.standard_normal((1, 3, 4)).astype(np.float32))
    for bt in ["reflect", "replicate", "circular", "constant"]:
        res["f_" + bt] = K["filter2d"](x, ker, bt, normalized=True)
    res["valid"] = K["filter2d"](x, ker, padding="valid")
    res["g"] = K["gaussian_blur2d"](x, (5, 5), (1.5, 1.5))
    res["box"] = K["box_blur"](x, (3, 3))
    res["med"] = K["median_blur"](x, (3, 3))
    res["medu"] = K["median_blur_unfold"](x, 3)
    res["sg"] = K["spatial_gradient"](x)
    res["sob"] = K["sobel"](x)
    loss = sum((v ** 2).mean() for v in res.values())
    loss.backward()
    res["grad"] = x.grad
    return res


def canny_harris_program(torch):
    """Canny with NMS by gather and hysteresis; Harris / GFTT with NMS and topk."""
    K = _filters(torch)
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    img = np.zeros((1, 1, 16, 16), np.float32)
    img[:, :, 4:12, 5:11] = 1.0
    img += rng.random(img.shape).astype(np.float32) * 0.1
    x = torch.from_numpy(img)
    res = {}
    # canny
    def canny(input, low=0.1, high=0.2, ks=(5, 5), sigma=(1, 1), hysteresis=True, eps=1e-6):
        device, dtype = input.device, input.dtype
        blurred = K["gaussian_blur2d"](input, ks, sigma)
        gradients = K["spatial_gradient"](blurred, normalized=False)
        gx, gy = gradients[:, :, 0], gradients[:, :, 1]
        magnitude = torch.sqrt(gx * gx + gy * gy + eps)
        angle = torch.atan2(gy, gx)
        angle = 180.0 * angle / math.pi
        angle = torch.round(angle / 45) * 45
        nms_kernels = torch.zeros(8, 1, 3, 3)
        offs = [(1, 2), (2, 2), (2, 1), (2, 0), (1, 0), (0, 0), (0, 1), (0, 2)]
        for i, (r, c) in enumerate(offs):
            nms_kernels[i, 0, 1, 1] = 1.0
            nms_kernels[i, 0, r, c] = -1.0
        nms_magnitude = F.conv2d(magnitude, nms_kernels.to(device, dtype),
                                 padding=nms_kernels.shape[-1] // 2)
        positive_idx = (angle / 45) % 8
        positive_idx = positive_idx.long()
        negative_idx = ((angle / 45) + 4) % 8
        negative_idx = negative_idx.long()
        channel_select_filtered_positive = torch.gather(nms_magnitude, 1, positive_idx)
        channel_select_filtered_negative = torch.gather(nms_magnitude, 1, negative_idx)
        channel_select_filtered = torch.stack(
            [channel_select_filtered_positive, channel_select_filtered_negative], 1)
        is_max = channel_select_filtered.min(dim=1)[0] > 0.0
        magnitude = magnitude * is_max
        edges = F.threshold(magnitude, low, 0.0)
        low_ = (edges > low).to(dtype)
        high_ = (edges > high).to(dtype)
        edges = low_ * 0.5 + high_ * 0.5
        edges = edges.to(dtype)
        if hysteresis:
            edges_old = -torch.ones(edges.shape, device=edges.device, dtype=dtype)
            hysteresis_kernels = torch.ones(8, 1, 3, 3)
            for i, (r, c) in enumerate(offs):
                hysteresis_kernels[i, 0] = 0
                hysteresis_kernels[i, 0, r, c] = 1
            hysteresis_kernels = hysteresis_kernels.to(device, dtype)
            it = 0
            while ((edges_old - edges).abs() != 0).any():
                weak = (edges == 0.5).float()
                strong = (edges == 1).float()
                hysteresis_magnitude = F.conv2d(edges, hysteresis_kernels,
                                                padding=hysteresis_kernels.shape[-1] // 2)
                hysteresis_magnitude = (hysteresis_magnitude == 1).any(1, keepdim=True).to(dtype)
                hysteresis_magnitude = hysteresis_magnitude * weak + strong
                edges_old = edges.clone()
                edges = hysteresis_magnitude + (hysteresis_magnitude == 0) * weak * 0.5
                it += 1
            edges = hysteresis_magnitude
        return magnitude, edges, it
    xg = x.clone().requires_grad_(True)
    mag, edges, it = canny(xg)
    res["mag"], res["edges"], res["it"] = mag, edges, [it]
    (mag * torch.linspace(0, 1, 16)).sum().backward()
    res["canny_grad"] = xg.grad
    # harris / gftt
    def harris(input, k=0.04, grads_mode="sobel", sigmas=None):
        gradients = K["spatial_gradient"](input, True)
        dx, dy = gradients[:, :, 0], gradients[:, :, 1]
        dx2 = K["gaussian_blur2d"](dx ** 2, (7, 7), (1.0, 1.0))
        dy2 = K["gaussian_blur2d"](dy ** 2, (7, 7), (1.0, 1.0))
        dxy = K["gaussian_blur2d"](dx * dy, (7, 7), (1.0, 1.0))
        det_m = dx2 * dy2 - dxy * dxy
        trace_m = dx2 + dy2
        scores = det_m - k * (trace_m ** 2)
        return scores, dx2, dy2, dxy
    def gftt(dx2, dy2, dxy):
        det_m = dx2 * dy2 - dxy * dxy
        trace_m = dx2 + dy2
        e1 = 0.5 * (trace_m + torch.sqrt((trace_m ** 2 - 4 * det_m).abs()))
        e2 = 0.5 * (trace_m - torch.sqrt((trace_m ** 2 - 4 * det_m).abs()))
        return torch.min(e1, e2)
    def nms2d(resp, k=3):
        mx = F.max_pool2d(resp, k, stride=1, padding=k // 2)
        return resp * (resp == mx).to(resp.dtype)
    xh = x.clone().requires_grad_(True)
    sc, dx2, dy2, dxy = harris(xh)
    g = gftt(dx2, dy2, dxy)
    res["harris"], res["gftt"] = sc, g
    n = nms2d(sc)
    vals, idx = n.flatten(1).topk(5)
    res["top_idx"] = idx.flatten().tolist()
    res["top_v"] = vals
    res["yx"] = torch.stack([idx // 16, idx % 16], -1)
    (sc.sum() + g.sum()).backward()
    res["harris_grad"] = xh.grad
    return res


def pyramids_program(torch):
    """Gaussian and Laplacian pyramids, pyrup, and every resize mode kornia uses."""
    K = _filters(torch)
    F = torch.nn.functional
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.random((2, 3, 17, 22)).astype(np.float32)).requires_grad_(True)
    res = {}
    def pyrdown(input, border_type="reflect", align_corners=False, factor=2.0):
        kernel = torch.tensor([[1.0, 4.0, 6.0, 4.0, 1.0], [4.0, 16.0, 24.0, 16.0, 4.0],
                               [6.0, 24.0, 36.0, 24.0, 6.0], [4.0, 16.0, 24.0, 16.0, 4.0],
                               [1.0, 4.0, 6.0, 4.0, 1.0]]) / 256.0
        _, _, height, width = input.shape
        x_blur = K["filter2d"](input, kernel[None], border_type)
        out = F.interpolate(x_blur, size=(int(float(height) / factor), int(float(width) // factor)),
                            mode="bilinear", align_corners=align_corners)
        return out
    def pyrup(input, border_type="reflect", align_corners=False):
        kernel = torch.tensor([[1.0, 4.0, 6.0, 4.0, 1.0]])
        kernel = (kernel.T @ kernel) / 256.0
        _, _, height, width = input.shape
        x_up = F.interpolate(input, size=(height * 2, width * 2), mode="bilinear",
                             align_corners=align_corners)
        return K["filter2d"](x_up, kernel[None], border_type)
    gp = [x]
    for _ in range(3):
        gp.append(pyrdown(gp[-1]))
    res["gp"] = gp[1:]
    lp = [gp[i] - F.interpolate(gp[i + 1], size=gp[i].shape[-2:], mode="bilinear",
                                align_corners=False) for i in range(3)]
    res["lp"] = lp
    res["up"] = pyrup(gp[2])
    res["aa"] = F.interpolate(x, scale_factor=0.37, mode="bilinear", antialias=True)
    res["aab"] = F.interpolate(x, size=(7, 9), mode="bicubic", antialias=True, align_corners=False)
    res["area"] = F.interpolate(x, size=(5, 7), mode="area")
    res["bic"] = F.interpolate(x, scale_factor=1.7, mode="bicubic", align_corners=True)
    res["bic2"] = F.interpolate(x, size=(20, 11), mode="bicubic", align_corners=False)
    res["near"] = F.interpolate(x, scale_factor=0.6, mode="nearest-exact")
    res["near2"] = F.interpolate(x, scale_factor=(0.5, 1.3), mode="nearest",
                                 recompute_scale_factor=True)
    res["pyr_ds"] = F.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False)
    loss = sum((v * v).mean() for vs in res.values()
               for v in (vs if isinstance(vs, list) else [vs]))
    loss.backward()
    res["grad"] = x.grad
    return res


def _colors(torch):
    """kornia.color's conversions, as that library writes them."""
    def rgb_to_hsv(image, eps=1e-8):
        max_rgb, argmax_rgb = image.max(-3)
        min_rgb, argmin_rgb = image.min(-3)
        deltac = max_rgb - min_rgb
        v = max_rgb
        s = deltac / (max_rgb + eps)
        deltac = torch.where(deltac == 0, torch.ones_like(deltac), deltac)
        rc, gc, bc = torch.unbind((max_rgb.unsqueeze(-3) - image), dim=-3)
        h1 = bc - gc
        h2 = (rc - bc) + 2.0 * deltac
        h3 = (gc - rc) + 4.0 * deltac
        h = torch.stack((h1, h2, h3), dim=-3) / deltac.unsqueeze(-3)
        h = torch.gather(h, dim=-3, index=argmax_rgb.unsqueeze(-3)).squeeze(-3)
        h = (h / 6.0) % 1.0
        h = 2.0 * math.pi * h
        return torch.stack((h, s, v), dim=-3)
    def hsv_to_rgb(image):
        h = image[..., 0, :, :] / (2 * math.pi)
        s = image[..., 1, :, :]
        v = image[..., 2, :, :]
        hi = torch.floor(h * 6) % 6
        f = ((h * 6) % 6) - hi
        one = torch.tensor(1.0, device=image.device, dtype=image.dtype)
        p = v * (one - s)
        q = v * (one - f * s)
        t = v * (one - (one - f) * s)
        hi = hi.long()
        indices = torch.stack([hi, hi + 6, hi + 12], dim=-3)
        out = torch.stack((v, q, p, p, t, v, t, v, v, q, p, p, p, p, t, v, v, q), dim=-3)
        out = torch.gather(out, -3, indices)
        return out
    def rgb_to_linear_rgb(image):
        return torch.where(image > 0.04045, torch.pow(((image + 0.055) / 1.055), 2.4),
                           image / 12.92)
    def linear_rgb_to_rgb(image):
        threshold = 0.0031308
        return torch.where(image > threshold,
                           1.055 * torch.pow(image.clamp(min=threshold), 1 / 2.4) - 0.055,
                           12.92 * image)
    def rgb_to_xyz(image):
        r, g, b = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
        x = 0.412453 * r + 0.357580 * g + 0.180423 * b
        y = 0.212671 * r + 0.715160 * g + 0.072169 * b
        z = 0.019334 * r + 0.119193 * g + 0.950227 * b
        return torch.stack([x, y, z], -3)
    def xyz_to_rgb(image):
        x, y, z = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
        r = 3.2404813432005266 * x + -1.5371515162713185 * y + -0.4985363261688878 * z
        g = -0.9692549499965682 * x + 1.8759900014898907 * y + 0.0415559265582928 * z
        b = 0.0556466391351772 * x + -0.2040413383665112 * y + 1.0573110696453443 * z
        return torch.stack([r, g, b], dim=-3)
    def rgb_to_lab(image):
        lin_rgb = rgb_to_linear_rgb(image)
        xyz_im = rgb_to_xyz(lin_rgb)
        xyz_ref_white = torch.tensor([0.95047, 1.0, 1.08883], device=xyz_im.device,
                                     dtype=xyz_im.dtype)[..., :, None, None]
        xyz_normalized = torch.div(xyz_im, xyz_ref_white)
        threshold = 0.008856
        power = torch.pow(xyz_normalized.clamp(min=threshold), 1 / 3.0)
        scale = 7.787 * xyz_normalized + 4.0 / 29.0
        xyz_int = torch.where(xyz_normalized > threshold, power, scale)
        x, y, z = xyz_int[..., 0, :, :], xyz_int[..., 1, :, :], xyz_int[..., 2, :, :]
        L = (116.0 * y) - 16.0
        a = 500.0 * (x - y)
        _b = 200.0 * (y - z)
        return torch.stack([L, a, _b], dim=-3)
    def lab_to_rgb(image, clip=True):
        L, a, _b = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
        fy = (L + 16.0) / 116.0
        fx = (a / 500.0) + fy
        fz = fy - (_b / 200.0)
        fz = fz.clamp(min=0.0)
        fxyz = torch.stack([fx, fy, fz], dim=-3)
        power = torch.pow(fxyz, 3.0)
        scale = (fxyz - 4.0 / 29.0) / 7.787
        xyz = torch.where(fxyz > 0.2068966, power, scale)
        xyz_ref_white = torch.tensor([0.95047, 1.0, 1.08883], device=xyz.device,
                                     dtype=xyz.dtype)[..., :, None, None]
        xyz_im = xyz * xyz_ref_white
        rgbs_im = xyz_to_rgb(xyz_im)
        rgb_im = linear_rgb_to_rgb(rgbs_im)
        if clip:
            rgb_im = torch.clamp(rgb_im, min=0.0, max=1.0)
        return rgb_im
    def rgb_to_yuv(image):
        r, g, b = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
        y = 0.299 * r + 0.587 * g + 0.114 * b
        u = -0.147 * r - 0.289 * g + 0.436 * b
        v = 0.615 * r - 0.515 * g - 0.100 * b
        return torch.stack([y, u, v], -3)
    def rgb_to_hls(image, eps=1e-8):
        _RGB2HSL_IDX = torch.tensor([[[0.0]], [[1.0]], [[2.0]]], device=image.device,
                                    dtype=image.dtype)
        _img_max = image.max(-3)
        maxc = _img_max[0]
        imax = _img_max[1]
        minc = image.min(-3)[0]
        if image.requires_grad:
            l_ = maxc + minc
            s = maxc - minc
            h = l_
            image_hls = l_
        else:
            image_hls = torch.empty_like(image)
            h, l_, s = image_hls[..., 0, :, :], image_hls[..., 1, :, :], image_hls[..., 2, :, :]
            torch.add(maxc, minc, out=l_)
            torch.sub(maxc, minc, out=s)
        im = image / (s + eps).unsqueeze(-3)
        s = s / torch.where(l_ < 1.0, l_, 2.0 - l_) + eps
        l_ = l_ / 2
        r, g, b = torch.unbind(im, -3)
        cond = imax[..., None, :, :] == _RGB2HSL_IDX
        if image.requires_grad:
            h = ((g - b) % 6) * cond[..., 0, :, :]
        else:
            torch.mul((g - b) % 6, cond[..., 0, :, :], out=h)
        h = h + (b - r + 2) * cond[..., 1, :, :]
        h = h + (r - g + 4) * cond[..., 2, :, :]
        h = h * math.pi / 3.0
        if image.requires_grad:
            return torch.stack([h, l_, s], dim=-3)
        return image_hls
    return dict(rgb_to_hsv=rgb_to_hsv, hsv_to_rgb=hsv_to_rgb, rgb_to_lab=rgb_to_lab,
                lab_to_rgb=lab_to_rgb, rgb_to_yuv=rgb_to_yuv, rgb_to_hls=rgb_to_hls)


def color_program(torch):
    """RGB to HSV / Lab / YUV / HLS and back, with gradients; hue arithmetic by fmod."""
    C = _colors(torch)
    rgb_to_hsv, hsv_to_rgb = C["rgb_to_hsv"], C["hsv_to_rgb"]
    rgb_to_lab, lab_to_rgb = C["rgb_to_lab"], C["lab_to_rgb"]
    rgb_to_yuv, rgb_to_hls = C["rgb_to_yuv"], C["rgb_to_hls"]
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.random((2, 3, 6, 7)).astype(np.float32))
    x[0, :, 0, 0] = 0.5  # gray pixel
    x[1, :, 1, 1] = torch.tensor([1.0, 1.0, 1.0])
    x.requires_grad_(True)
    res = {}
    hsv = rgb_to_hsv(x)
    res["hsv"] = hsv
    res["rgb"] = hsv_to_rgb(hsv)
    lab = rgb_to_lab(x)
    res["lab"] = lab
    res["lab_rgb"] = lab_to_rgb(lab)
    res["yuv"] = rgb_to_yuv(x)
    res["hls"] = rgb_to_hls(x)
    with torch.no_grad():
        res["hls_ng"] = rgb_to_hls(x.detach())
    loss = sum(v.square().mean() for v in res.values() if v.requires_grad)
    loss.backward()
    res["grad"] = x.grad
    # grayscale & sepia & fmod-based hue shift
    h2 = torch.fmod(hsv[:, 0] + 4.0, 2 * math.pi)
    res["fmod"] = h2
    res["fmodneg"] = torch.fmod(hsv[:, 0] - 7.0, 2 * math.pi)
    res["rem"] = torch.remainder(hsv[:, 0] - 7.0, 2 * math.pi)
    return res


def histogram_morphology_program(torch):
    """Histogram equalisation, morphology by unfold + amax, connected components."""
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    res = {}
    img = torch.from_numpy((rng.random((2, 1, 12, 12)) ** 2).astype(np.float32))
    # histogram equalisation (torchvision-style on uint8)
    u8 = (img * 255).to(torch.uint8)
    def equalize_single(ch):
        hist = torch.histc(ch.to(torch.float32), bins=256, min=0, max=255)
        nonzero_hist = hist[hist != 0]
        step = torch.div(nonzero_hist[:-1].sum(), 255, rounding_mode="floor")
        if step == 0:
            return ch
        lut = torch.div(torch.cumsum(hist, 0) + torch.div(step, 2, rounding_mode="floor"), step,
                        rounding_mode="floor")
        lut = F.pad(lut, [1, 0])[:-1].clamp(0, 255)
        return lut[ch.to(torch.int64)].to(torch.uint8)
    res["eq"] = torch.stack([equalize_single(u8[i, 0]) for i in range(2)])
    bc = torch.bincount(u8.flatten().long(), minlength=256)
    res["bincount"] = bc
    res["bc_w"] = torch.bincount(u8[0].flatten().long(), weights=img[0].flatten())
    res["cdf"] = bc.cumsum(0).float() / bc.sum()
    # kornia-style float equalize using histc on floats
    def equalize_f(x):
        out = []
        for c in x.flatten(0, 1):
            im = c * 255
            hist = torch.histc(im, bins=256, min=0, max=255)
            cdf = hist.cumsum(0)
            cdf_min = cdf[cdf > 0].min()
            lut = ((cdf - cdf_min) / (im.numel() - cdf_min) * 255).round().clamp(0, 255)
            out.append(lut[im.long().clamp(0, 255)] / 255)
        return torch.stack(out).view_as(x)
    res["eq_f"] = equalize_f(img)
    # morphology via unfold + amax
    def dilation(x, k):
        kh, kw = k.shape
        se = torch.where(k > 0, torch.zeros_like(k), torch.full_like(k, -float("inf")))
        b, c, h, w = x.shape
        xp = F.pad(x, [kw // 2, kw // 2, kh // 2, kh // 2], mode="constant", value=-1e4)
        unf = xp.unfold(2, kh, 1).unfold(3, kw, 1)
        return (unf + se.view(1, 1, 1, 1, kh, kw)).amax(dim=(4, 5))
    def erosion(x, k):
        return -dilation(-x, k)
    k = torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    x = img.clone().requires_grad_(True)
    d, e = dilation(x, k), erosion(x, k)
    opening, closing = dilation(erosion(x, k), k), erosion(dilation(x, k), k)
    grad_m = d - e
    tophat = x - opening
    res.update(dil=d, ero=e, opening=opening, closing=closing, mgrad=grad_m, tophat=tophat)
    (opening.sum() + 2 * closing.square().sum() + tophat.abs().sum()).backward()
    res["morph_grad"] = x.grad
    # unfold-based morphology with F.unfold + max
    cols = F.unfold(F.pad(img, [1, 1, 1, 1], mode="replicate"), 3).view(2, 1, 9, 12, 12)
    res["unf_max"], res["unf_arg"] = cols.max(dim=2)
    # connected components by iterative max_pool
    binary = (img > 0.4).float()
    def connected_components(image, num_iterations=100):
        H, W = image.shape[-2:]
        mask = image == 1
        B, _, _, _ = image.shape
        out = torch.arange(B * H * W, device=image.device, dtype=image.dtype).view((-1, 1, H, W))
        out[~mask] = 0
        for _ in range(num_iterations):
            out = F.max_pool2d(out, kernel_size=3, stride=1, padding=1)
            out = torch.mul(out, mask)
        return out
    lab = connected_components(binary, 30)
    res["cc"] = lab
    uniq, inv, counts = torch.unique(lab, return_inverse=True, return_counts=True)
    res["cc_n"] = [len(uniq)]
    res["cc_counts"] = counts
    res["cc_inv"] = inv
    return res



PROGRAMS = [filters_program, canny_harris_program, pyramids_program, color_program,
            histogram_morphology_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # Lab's cube root is float32 pow (PyTorch's is SLEEF's, ours NumPy's: an ulp apart),
        # amplified by a = 500 * (x - y)
        "color_program": (1e-4, 1e-5),
    })
