"""Multi-view geometry, enhancement and feature programs written as kornia writes them in plain
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy data: the
weighted normalised 8-point fundamental matrix (svd, rank-2 projection, diag_embed, det) and
Sampson errors with gradients into the points, thin-plate splines (cdist, log kernel,
linalg.solve) warping an image, elastic transforms, motion-blur kernels rotated by warp_affine
and applied per sample, bilinear Bayer demosaicing, depth to normals (linalg.cross); CLAHE by
unfolded tiles, histc, clipping and lerp between tile LUTs; focal / dice / Lovasz-hinge losses
and a bincount confusion matrix; ZCA whitening (svd, eigh); a DoG scale space with 3-D
max-pool extrema and quadratic sub-pixel refinement by batched solve; distributions-drawn
augmentation parameters (shapes only); vmap / jacrev through affine_grid + grid_sample (with
PyTorch's fallback warning), DLT through svd, LBFGS registration."""

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests
from tests.parity.test_parity_programs_round30_vision import _filters
from tests.parity.test_parity_programs_round30_vision_warp import _warps

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def multiview_program(torch):
    """Fundamental matrix, Sampson error, TPS, elastic and motion blur, demosaic, normals."""
    K, W = _filters(torch), _warps(torch)
    F = torch.nn.functional
    rng = np.random.default_rng(12)
    res = {}
    # fundamental matrix: normalised 8-point with svd, rank-2 projection, sampson error
    p1 = torch.from_numpy(rng.uniform(0, 10, (2, 12, 2)).astype(np.float32))
    p2 = torch.from_numpy(rng.uniform(0, 10, (2, 12, 2)).astype(np.float32)).requires_grad_(True)

    def normalize_points(points, eps=1e-8):
        x_mean = torch.mean(points, dim=1, keepdim=True)
        scale = (points - x_mean).norm(dim=-1, p=2).mean(dim=-1)
        scale = torch.sqrt(torch.tensor(2.0)) / (scale + eps)
        ones, zeros = torch.ones_like(scale), torch.zeros_like(scale)
        transform = torch.stack(
            [
                scale,
                zeros,
                -scale * x_mean[..., 0, 0],
                zeros,
                scale,
                -scale * x_mean[..., 0, 1],
                zeros,
                zeros,
                ones,
            ],
            dim=-1,
        )
        transform = transform.view(-1, 3, 3)
        return W["transform_points"](transform, points), transform

    def find_fundamental(points1, points2, weights):
        points1_norm, transform1 = normalize_points(points1)
        points2_norm, transform2 = normalize_points(points2)
        x1, y1 = torch.chunk(points1_norm, dim=-1, chunks=2)
        x2, y2 = torch.chunk(points2_norm, dim=-1, chunks=2)
        ones = torch.ones_like(x1)
        X = torch.cat([x2 * x1, x2 * y1, x2, y2 * x1, y2 * y1, y2, x1, y1, ones], dim=-1)
        X = X.transpose(-2, -1) @ torch.diag_embed(weights, dim1=-2, dim2=-1) @ X
        _, _, V = torch.linalg.svd(X)
        F_mat = V[..., -1].view(-1, 3, 3)
        U, S, V = torch.linalg.svd(F_mat)
        rank_mask = torch.tensor([1.0, 1.0, 0.0], device=F_mat.device, dtype=F_mat.dtype)
        F_projected = U @ (torch.diag_embed(S * rank_mask) @ V)
        F_est = transform2.transpose(-2, -1) @ (F_projected @ transform1)
        return F_est / F_est[..., -1:, -1:]

    w = torch.from_numpy(rng.uniform(0.5, 1.0, (2, 12)).astype(np.float32))
    Fm = find_fundamental(p1.double(), p2.double(), w.double())

    def sampson(pts1, pts2, Fm, squared=True, eps=1e-8):
        pts1 = F.pad(pts1, [0, 1], value=1.0)
        pts2 = F.pad(pts2, [0, 1], value=1.0)
        F_t = Fm.transpose(-2, -1)
        line1_in_2 = pts1 @ F_t
        line2_in_1 = pts2 @ Fm
        numerator = (pts2 * line1_in_2).sum(dim=-1).pow(2)
        denominator = line1_in_2[..., :2].norm(2, dim=-1).pow(2) + line2_in_1[..., :2].norm(
            2, dim=-1
        ).pow(2)
        out = numerator / denominator
        return out if squared else (out + eps).sqrt()

    se = sampson(p1.double(), p2.double(), Fm)
    res["F_det"] = torch.linalg.det(Fm)
    res["sampson"] = se
    se.sum().backward()
    res["g_p2"] = p2.grad

    # thin plate spline
    def _kernel_distance(squared_distances, eps=1e-8):
        return 0.5 * squared_distances * squared_distances.add(eps).log()

    def get_tps_transform(points_src, points_dst):
        batch_size, num_points = points_src.shape[:2]
        pair_distance = torch.cdist(points_src, points_dst) ** 2
        k_matrix = _kernel_distance(pair_distance)
        zero_mat = torch.zeros(batch_size, 3, 3, dtype=points_src.dtype)
        one_mat = torch.ones(batch_size, num_points, 1, dtype=points_src.dtype)
        dest_with_zeros = torch.cat((points_dst, zero_mat[:, :, :2]), 1)
        p_matrix = torch.cat((one_mat, points_src), -1)
        p_matrix_t = torch.cat((p_matrix, zero_mat), 1).transpose(1, 2)
        l_matrix = torch.cat((k_matrix, p_matrix), -1)
        l_matrix = torch.cat((l_matrix, p_matrix_t), 1)
        weights = torch.linalg.solve(l_matrix, dest_with_zeros)
        return weights[:, :-3], weights[:, -3:]

    def warp_points_tps(points_src, kernel_centers, kernel_weights, affine_weights):
        pair_distance = torch.cdist(points_src, kernel_centers) ** 2
        k_matrix = _kernel_distance(pair_distance)
        warped = (
            k_matrix[..., None].mul(kernel_weights[:, None]).sum(-2)
            + points_src[..., None].mul(affine_weights[:, None, 1:]).sum(-2)
            + affine_weights[:, None, 0]
        )
        return warped

    src_pts = torch.tensor([[[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0], [0.0, 0.0]]])
    dst_pts = (
        src_pts + torch.from_numpy(rng.uniform(-0.2, 0.2, (1, 5, 2)).astype(np.float32))
    ).requires_grad_(True)
    kw_, aw = get_tps_transform(dst_pts, src_pts)
    img = torch.from_numpy(rng.random((1, 2, 9, 9)).astype(np.float32))
    grid = W["create_meshgrid"](9, 9).reshape(1, -1, 2)
    g2 = warp_points_tps(grid, dst_pts, kw_, aw).view(1, 9, 9, 2)
    tps_img = F.grid_sample(img, g2, align_corners=True)
    res.update(tps_kw=kw_, tps_aw=aw, tps=tps_img)
    tps_img.square().sum().backward()
    res["g_dst"] = dst_pts.grad
    # elastic transform
    noise = torch.from_numpy(rng.uniform(-1, 1, (1, 2, 9, 9)).astype(np.float32))
    disp = K["gaussian_blur2d"](noise, (7, 7), (3.0, 3.0)) * torch.tensor([[[[0.5]], [[0.3]]]])
    disp = disp.permute(0, 2, 3, 1)
    eg = (W["create_meshgrid"](9, 9) + disp).clamp(-1, 1)
    res["elastic"] = F.grid_sample(
        img, eg, align_corners=True, mode="bilinear", padding_mode="zeros"
    )

    # motion blur: rotated line kernels per sample, filter2d with a batch of kernels
    def motion_kernel(ks, angle, direction):
        B = angle.shape[0]
        kernel = torch.zeros(B, ks, ks)
        dvec = torch.linspace(0, 1, ks)
        line = torch.stack([dvec * (1 + d) + (1 - dvec) * (1 - d) for d in direction.tolist()])
        kernel[:, ks // 2, :] = line
        kernel = kernel.unsqueeze(1)
        center = torch.full((B, 2), (ks - 1) / 2)
        M = W["get_rotation_matrix2d"](center, angle, torch.ones(B, 2))
        kernel = W["warp_affine"](kernel, M, (ks, ks), mode="nearest", align_corners=True)
        kernel = kernel[:, 0]
        return kernel / kernel.sum(dim=(-2, -1), keepdim=True)

    mk = motion_kernel(5, torch.tensor([30.0, -60.0]), torch.tensor([0.5, -0.3]))
    imgs = torch.from_numpy(rng.random((2, 3, 8, 8)).astype(np.float32))
    res["mk"] = mk
    res["motion"] = K["filter2d"](imgs, mk, "replicate")
    # bayer demosaic (bilinear, RGGB)
    raw = torch.from_numpy(rng.random((1, 1, 6, 8)).astype(np.float32))
    rgb = torch.cat([raw] * 3, 1)
    pm = torch.zeros(1, 3, 6, 8)
    pm[:, 0, 0::2, 0::2] = 1
    pm[:, 1, 0::2, 1::2] = 1
    pm[:, 1, 1::2, 0::2] = 1
    pm[:, 2, 1::2, 1::2] = 1
    kern = torch.tensor([[0.25, 0.5, 0.25], [0.5, 1.0, 0.5], [0.25, 0.5, 0.25]])
    num = F.conv2d(F.pad(rgb * pm, [1, 1, 1, 1], mode="reflect"), kern.expand(3, 1, 3, 3), groups=3)
    den = F.conv2d(F.pad(pm, [1, 1, 1, 1], mode="reflect"), kern.expand(3, 1, 3, 3), groups=3)
    res["demosaic"] = num / den
    # depth to normals via spatial gradients and cross product
    depth = torch.from_numpy(rng.uniform(1, 2, (1, 1, 7, 8)).astype(np.float32)).requires_grad_(
        True
    )
    Kmat = torch.tensor([[[5.0, 0.0, 4.0], [0.0, 5.0, 3.5], [0.0, 0.0, 1.0]]])
    grid_px = W["create_meshgrid"](7, 8, normalized_coordinates=False)
    pts = F.pad(grid_px, [0, 1], value=1.0) @ torch.linalg.inv(Kmat).transpose(-1, -2).unsqueeze(1)
    xyz = (pts * depth.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
    gr = K["spatial_gradient"](xyz)
    a, b = gr[:, :, 0], gr[:, :, 1]
    normals = torch.linalg.cross(a, b, dim=1)
    res["normals"] = F.normalize(normals, dim=1, p=2)
    res["normals"].sum().backward()
    res["g_depth"] = depth.grad
    return res


def enhance_features_program(torch):
    """CLAHE, segmentation losses, ZCA whitening, DoG extrema with sub-pixel refinement."""
    K = _filters(torch)
    F = torch.nn.functional
    rng = np.random.default_rng(13)
    res = {}
    # CLAHE-lite: tiles by unfold, per-tile histc, clip + redistribute, LUT, bilinear between tiles
    img = torch.from_numpy((rng.random((1, 1, 16, 16)) ** 2).astype(np.float32))
    gh, gw = 2, 2
    th, tw = 8, 8
    tiles = img.unfold(2, th, th).unfold(3, tw, tw)  # 1,1,2,2,8,8
    tiles = tiles.reshape(-1, th * tw)
    bins = 32
    hist = torch.stack([torch.histc(t, bins=bins, min=0, max=1) for t in tiles])
    clip = 40.0 / bins * (th * tw) / 16
    clipped = hist.clamp(max=clip)
    excess = (hist - clipped).sum(-1, keepdim=True)
    redist = torch.div(excess, bins, rounding_mode="floor")
    hist2 = clipped + redist
    residual = excess - redist * bins
    hist2 = hist2 + (torch.arange(bins)[None] < residual).to(hist2.dtype)
    lut = (hist2.cumsum(-1) * (bins - 1) / (th * tw)).clamp(0, bins - 1) / (bins - 1)
    res.update(hist=hist, lut=lut)
    idx = (img * (bins - 1)).long().clamp(0, bins - 1).flatten()
    mapped = lut[:, idx].view(4, 16, 16)
    yy = ((torch.arange(16, dtype=torch.float32) + 0.5) / th - 0.5).clamp(0, gh - 1)
    xx = ((torch.arange(16, dtype=torch.float32) + 0.5) / tw - 0.5).clamp(0, gw - 1)
    wy = yy - yy.floor()
    wx = xx - xx.floor()
    top = torch.lerp(mapped[0], mapped[1], wx[None, :])
    bot = torch.lerp(mapped[2], mapped[3], wx[None, :])
    res["clahe"] = torch.lerp(top, bot, wy[:, None])
    # segmentation losses: focal, dice, lovasz hinge, mean IoU by bincount
    logits = torch.from_numpy(rng.standard_normal((2, 3, 5, 5)).astype(np.float32)).requires_grad_(
        True
    )
    labels = torch.from_numpy(rng.integers(0, 3, (2, 5, 5)))
    one_hot = F.one_hot(labels, 3).permute(0, 3, 1, 2).float()
    p = F.softmax(logits, 1)
    logp = F.log_softmax(logits, 1)
    alpha, gamma = 0.25, 2.0
    focal = -alpha * torch.pow(1.0 - p, gamma) * logp
    focal = torch.einsum("bc...,bc...->b...", one_hot, focal).mean()
    inter = torch.sum(p * one_hot, (2, 3))
    card = torch.sum(p + one_hot, (2, 3))
    dice = (1.0 - 2.0 * inter / (card + 1e-8)).mean()
    bin_logits = logits[:, 0].flatten(1)
    bin_lab = (labels == 0).float().flatten(1)
    signs = 2.0 * bin_lab - 1.0
    errors = 1.0 - bin_logits * signs
    errors_sorted, perm = torch.sort(errors, dim=1, descending=True)
    gt_sorted = torch.gather(bin_lab, 1, perm)
    gts = gt_sorted.sum(1, keepdim=True)
    intersection = gts - gt_sorted.cumsum(1)
    union = gts + (1.0 - gt_sorted).cumsum(1)
    jaccard = 1.0 - intersection / union
    jaccard[:, 1:] = jaccard[:, 1:] - jaccard[:, :-1]
    lovasz = torch.sum(F.relu(errors_sorted) * jaccard, 1).mean()
    (focal + dice + lovasz).backward()
    res.update(focal=focal, dice=dice, lovasz=lovasz, g_logits=logits.grad)
    pred = logits.argmax(1)
    cm = torch.bincount(labels.flatten() * 3 + pred.flatten(), minlength=9).view(3, 3)
    iou = cm.diag() / (cm.sum(0) + cm.sum(1) - cm.diag()).clamp(min=1)
    res.update(cm=cm, iou=iou)
    # ZCA whitening
    data = torch.from_numpy(rng.standard_normal((20, 6)).astype(np.float32)) @ torch.from_numpy(
        rng.standard_normal((6, 6)).astype(np.float32)
    )
    data = data.double()  # float32 leaves the smallest eigenvalue at noise level
    mean = data.mean(0, keepdim=True)
    xc = data - mean
    cov = xc.T @ xc / (data.shape[0] - 1)
    U, S, _ = torch.linalg.svd(cov)
    zca = U @ torch.diag(1.0 / torch.sqrt(S + 1e-6)) @ U.T
    white = xc @ zca
    res["white_cov"] = white.T @ white / 19
    evals, evecs = torch.linalg.eigh(cov)
    res["evals"] = evals
    # DoG scale space, nms3d, quadratic subpixel refinement
    img2 = torch.from_numpy(rng.random((1, 1, 16, 16)).astype(np.float32))
    sigmas = [1.0, 1.4, 2.0, 2.8]
    stack = torch.stack([K["gaussian_blur2d"](img2, (9, 9), (s, s)) for s in sigmas], 2)
    dog = stack[:, :, 1:] - stack[:, :, :-1]
    mx = F.max_pool3d(dog, 3, stride=1, padding=1)
    mn = -F.max_pool3d(-dog, 3, stride=1, padding=1)
    ext = ((dog == mx) | (dog == mn)) & (dog.abs() > 0.002)
    res["dog"], res["n_ext"] = dog, [int(ext.sum())]
    # finite-difference gradient and hessian in 3-D via conv3d, then solve
    # in float64, and damped: the Hessians of a float32 DoG stack are nearly singular
    dog = dog.double()
    kd = torch.zeros(3, 1, 3, 3, 3, dtype=torch.float64)
    kd[0, 0, 1, 1, 0], kd[0, 0, 1, 1, 2] = -0.5, 0.5
    kd[1, 0, 1, 0, 1], kd[1, 0, 1, 2, 1] = -0.5, 0.5
    kd[2, 0, 0, 1, 1], kd[2, 0, 2, 1, 1] = -0.5, 0.5
    grads = F.conv3d(F.pad(dog, [1] * 6, mode="replicate"), kd)
    hk = torch.zeros(3, 1, 3, 3, 3, dtype=torch.float64)
    hk[0, 0, 1, 1, 0] = hk[0, 0, 1, 1, 2] = 1
    hk[0, 0, 1, 1, 1] = -2
    hk[1, 0, 1, 0, 1] = hk[1, 0, 1, 2, 1] = 1
    hk[1, 0, 1, 1, 1] = -2
    hk[2, 0, 0, 1, 1] = hk[2, 0, 2, 1, 1] = 1
    hk[2, 0, 1, 1, 1] = -2
    hess_diag = F.conv3d(F.pad(dog, [1] * 6, mode="replicate"), hk)
    H = torch.diag_embed(hess_diag.permute(0, 2, 3, 4, 1))
    H = H - 0.05 * torch.eye(3, dtype=torch.float64)
    g = grads.permute(0, 2, 3, 4, 1)[ext[:, 0]]
    Hs = H[ext[:, 0]]
    off = -torch.linalg.solve(Hs, g.unsqueeze(-1)).squeeze(-1)
    res["offsets"] = off.clamp(-1, 1)
    nz = ext.nonzero()
    res["nz"] = nz
    # distributions-style parameter sampling (values depend on RNG: shapes only)
    u = torch.distributions.Uniform(torch.tensor(-10.0), torch.tensor(10.0))
    a = u.rsample((4,))
    bern = torch.distributions.Bernoulli(torch.tensor(0.5)).sample((4,))
    res["dist"] = [list(a.shape) == [4], bool((a.abs() <= 10).all()), bern.dtype == torch.float32]
    return res


def jacobians_lbfgs_program(torch):
    """vmap / jacrev through warps, the perspective transform's jacobian, DLT and eigh
    gradients, and an affine registration by LBFGS with strong-Wolfe line search."""
    K, W = _filters(torch), _warps(torch)
    F = torch.nn.functional
    rng = np.random.default_rng(15)
    res = {}
    img = torch.from_numpy(rng.random((3, 2, 7, 8)).astype(np.float32))
    theta = torch.from_numpy((rng.standard_normal((3, 2, 3)) * 0.2).astype(np.float32)) + torch.eye(
        2, 3
    )

    def warp_one(im, th):
        grid = F.affine_grid(th[None], [1, im.shape[0], 7, 8], align_corners=False)
        return F.grid_sample(im[None], grid, align_corners=False, padding_mode="border")[0]

    res["vmap_warp"] = torch.func.vmap(warp_one)(img, theta)
    res["jac_theta"] = torch.func.jacrev(lambda th: warp_one(img[0], th).sum(0))(theta[0])
    # jacobian of the perspective transform wrt the destination corners
    pts_src = torch.tensor([[0.0, 0.0], [7.0, 0.0], [7.0, 6.0], [0.0, 6.0]])
    pts_dst = pts_src + torch.from_numpy(rng.uniform(-1, 1, (4, 2)).astype(np.float32))
    res["jac_H"] = torch.autograd.functional.jacobian(
        lambda d: W["get_perspective_transform"](pts_src[None], d[None]), pts_dst
    )
    # DLT through svd, gradient into the points
    p1 = torch.from_numpy(rng.random((1, 6, 2))).requires_grad_(True)
    Hgt = torch.tensor(
        [[[1.1, 0.1, 0.05], [0.02, 0.9, -0.1], [0.1, 0.05, 1.0]]], dtype=torch.float64
    )
    ph = F.pad(p1, [0, 1], value=1.0) @ Hgt.transpose(-1, -2)
    p2 = ph[..., :2] / ph[..., 2:] + torch.from_numpy(rng.standard_normal((1, 6, 2)) * 0.01)
    x1, y1 = torch.chunk(p1, dim=-1, chunks=2)
    x2, y2 = torch.chunk(p2, dim=-1, chunks=2)
    ones, zeros = torch.ones_like(x1), torch.zeros_like(x1)
    ax = torch.cat([zeros, zeros, zeros, -x1, -y1, -ones, y2 * x1, y2 * y1, y2], dim=-1)
    ay = torch.cat([x1, y1, ones, zeros, zeros, zeros, -x2 * x1, -x2 * y1, -x2], dim=-1)
    A = torch.cat((ax, ay), dim=-1).reshape(ax.shape[0], -1, ax.shape[-1])
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    H = Vh[..., -1, :].view(-1, 3, 3)
    H = H / H[..., -1:, -1:]
    res["dlt"] = H
    H.sum().backward()
    res["g_p1"] = p1.grad
    # eigh gradient (structure tensor eigenvalues)
    M = torch.from_numpy(rng.standard_normal((5, 2, 2))).requires_grad_(True)
    sym = M @ M.transpose(-1, -2)
    ev, evec = torch.linalg.eigh(sym)
    (ev.sum() + evec[..., 0].abs().sum()).backward()
    res["g_M"] = M.grad
    # LBFGS registration of an affine warp
    src = K["gaussian_blur2d"](
        torch.from_numpy(rng.random((1, 1, 10, 10)).astype(np.float32)), (5, 5), (1.2, 1.2)
    )
    tgt_theta = torch.tensor([[[1.05, 0.05, 0.1], [-0.04, 0.95, -0.05]]])
    tgt = F.grid_sample(
        src, F.affine_grid(tgt_theta, [1, 1, 10, 10], align_corners=False), align_corners=False
    )
    th = torch.eye(2, 3)[None].clone().requires_grad_(True)
    opt = torch.optim.LBFGS([th], lr=0.5, max_iter=5, history_size=4, line_search_fn="strong_wolfe")
    losses = []

    def closure():
        opt.zero_grad()
        out = F.grid_sample(
            src, F.affine_grid(th, [1, 1, 10, 10], align_corners=False), align_corners=False
        )
        loss = (out - tgt).square().mean()
        loss.backward()
        losses.append(loss.item())
        return loss

    for _ in range(2):
        opt.step(closure)
    res["lbfgs_losses"] = losses
    res["lbfgs_theta"] = th
    return res


PROGRAMS = [multiview_program, enhance_features_program, jacobians_lbfgs_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS,
    ember,
    torch,
    {
        # sub-pixel offsets divide ulp-level differences of float32 blurs by small Hessians
        "enhance_features_program": (1e-4, 1e-5),
    },
)
