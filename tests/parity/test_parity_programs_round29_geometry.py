"""3-D geometry and robotics programs written as pytorch3d and robotics repositories write them
in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy data:
pytorch3d's rotation conversions (quaternion <-> matrix with _sqrt_positive_part and the argmax
candidate pick, axis-angle with its small-angle branch, 6-D, Euler), so3_exp_map / so3_log_map
(Taylor branches by masks and by torch.where, acos linear extrapolation), se3 through
linalg.matrix_exp, Kabsch / Procrustes through svd with the det sign fix and its gradients,
ICP by cdist + argmin, chamfer distance with padded lengths and normals. Sibling file
_geometry_robotics: camera projection, forward kinematics, bundle adjustment; _geometry_graphs:
R-GCN, Graphormer, TGN-lite, link prediction; _geometry_fixes pins what they found."""

import functools
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _rotation_lib(torch):
    """pytorch3d.transforms' conversions, written as that library writes them."""
    F = torch.nn.functional

    def quaternion_to_matrix(quaternions):
        r, i, j, k = torch.unbind(quaternions, -1)
        two_s = 2.0 / (quaternions * quaternions).sum(-1)
        o = torch.stack((1 - two_s * (j * j + k * k), two_s * (i * j - k * r),
                         two_s * (i * k + j * r), two_s * (i * j + k * r),
                         1 - two_s * (i * i + k * k), two_s * (j * k - i * r),
                         two_s * (i * k - j * r), two_s * (j * k + i * r),
                         1 - two_s * (i * i + j * j)), -1)
        return o.reshape(quaternions.shape[:-1] + (3, 3))

    def _sqrt_positive_part(x):
        ret = torch.zeros_like(x)
        positive_mask = x > 0
        if torch.is_grad_enabled():
            ret[positive_mask] = torch.sqrt(x[positive_mask])
        else:
            ret = torch.where(positive_mask, torch.sqrt(x), ret)
        return ret

    def standardize_quaternion(quaternions):
        return torch.where(quaternions[..., 0:1] < 0, -quaternions, quaternions)

    def matrix_to_quaternion(matrix):
        if matrix.size(-1) != 3 or matrix.size(-2) != 3:
            raise ValueError(f"Invalid rotation matrix shape {matrix.shape}.")
        batch_dim = matrix.shape[:-2]
        m00, m01, m02, m10, m11, m12, m20, m21, m22 = torch.unbind(
            matrix.reshape(batch_dim + (9,)), dim=-1)
        q_abs = _sqrt_positive_part(torch.stack([1.0 + m00 + m11 + m22, 1.0 + m00 - m11 - m22,
                                                 1.0 - m00 + m11 - m22,
                                                 1.0 - m00 - m11 + m22], dim=-1))
        quat_by_rijk = torch.stack([
            torch.stack([q_abs[..., 0] ** 2, m21 - m12, m02 - m20, m10 - m01], dim=-1),
            torch.stack([m21 - m12, q_abs[..., 1] ** 2, m10 + m01, m02 + m20], dim=-1),
            torch.stack([m02 - m20, m10 + m01, q_abs[..., 2] ** 2, m12 + m21], dim=-1),
            torch.stack([m10 - m01, m20 + m02, m21 + m12, q_abs[..., 3] ** 2], dim=-1),
        ], dim=-2)
        flr = torch.tensor(0.1).to(dtype=q_abs.dtype, device=q_abs.device)
        quat_candidates = quat_by_rijk / (2.0 * q_abs[..., None].max(flr))
        out = quat_candidates[F.one_hot(q_abs.argmax(dim=-1), num_classes=4) > 0.5, :]
        return standardize_quaternion(out.reshape(batch_dim + (4,)))

    def axis_angle_to_quaternion(axis_angle):
        angles = torch.norm(axis_angle, p=2, dim=-1, keepdim=True)
        half_angles = angles * 0.5
        eps = 1e-6
        small_angles = angles.abs() < eps
        sin_half_angles_over_angles = torch.empty_like(angles)
        sin_half_angles_over_angles[~small_angles] = (torch.sin(half_angles[~small_angles])
                                                      / angles[~small_angles])
        sin_half_angles_over_angles[small_angles] = (
            0.5 - (angles[small_angles] * angles[small_angles]) / 48)
        return torch.cat([torch.cos(half_angles), axis_angle * sin_half_angles_over_angles],
                         dim=-1)

    def quaternion_to_axis_angle(quaternions):
        norms = torch.norm(quaternions[..., 1:], p=2, dim=-1, keepdim=True)
        half_angles = torch.atan2(norms, quaternions[..., :1])
        angles = 2 * half_angles
        eps = 1e-6
        small_angles = angles.abs() < eps
        sin_half_angles_over_angles = torch.empty_like(angles)
        sin_half_angles_over_angles[~small_angles] = (torch.sin(half_angles[~small_angles])
                                                      / angles[~small_angles])
        sin_half_angles_over_angles[small_angles] = (
            0.5 - (angles[small_angles] * angles[small_angles]) / 48)
        return quaternions[..., 1:] / sin_half_angles_over_angles

    def quaternion_raw_multiply(a, b):
        aw, ax, ay, az = torch.unbind(a, -1)
        bw, bx, by, bz = torch.unbind(b, -1)
        return torch.stack((aw * bw - ax * bx - ay * by - az * bz,
                            aw * bx + ax * bw + ay * bz - az * by,
                            aw * by - ax * bz + ay * bw + az * bx,
                            aw * bz + ax * by - ay * bx + az * bw), -1)

    def quaternion_invert(quaternion):
        scaling = torch.tensor([1, -1, -1, -1], device=quaternion.device)
        return quaternion * scaling

    def quaternion_apply(quaternion, point):
        if point.size(-1) != 3:
            raise ValueError(f"Points are not in 3D, {point.shape}.")
        real_parts = point.new_zeros(point.shape[:-1] + (1,))
        point_as_quaternion = torch.cat((real_parts, point), -1)
        out = quaternion_raw_multiply(quaternion_raw_multiply(quaternion, point_as_quaternion),
                                      quaternion_invert(quaternion))
        return out[..., 1:]

    def _axis_angle_rotation(axis, angle):
        cos, sin = torch.cos(angle), torch.sin(angle)
        one, zero = torch.ones_like(angle), torch.zeros_like(angle)
        if axis == "X":
            R_flat = (one, zero, zero, zero, cos, -sin, zero, sin, cos)
        elif axis == "Y":
            R_flat = (cos, zero, sin, zero, one, zero, -sin, zero, cos)
        else:
            R_flat = (cos, -sin, zero, sin, cos, zero, zero, zero, one)
        return torch.stack(R_flat, -1).reshape(angle.shape + (3, 3))

    def euler_angles_to_matrix(euler_angles, convention):
        matrices = [_axis_angle_rotation(c, e)
                    for c, e in zip(convention, torch.unbind(euler_angles, -1))]
        return functools.reduce(torch.matmul, matrices)

    def rotation_6d_to_matrix(d6):
        a1, a2 = d6[..., :3], d6[..., 3:]
        b1 = F.normalize(a1, dim=-1)
        b2 = a2 - (b1 * a2).sum(-1, keepdim=True) * b1
        b2 = F.normalize(b2, dim=-1)
        b3 = torch.cross(b1, b2, dim=-1)
        return torch.stack((b1, b2, b3), dim=-2)

    def matrix_to_rotation_6d(matrix):
        batch_dim = matrix.size()[:-2]
        return matrix[..., :2, :].clone().reshape(batch_dim + (6,))

    return dict(q2m=quaternion_to_matrix, m2q=matrix_to_quaternion,
                aa2q=axis_angle_to_quaternion, q2aa=quaternion_to_axis_angle,
                qmul=quaternion_raw_multiply, qinv=quaternion_invert, qapply=quaternion_apply,
                euler=euler_angles_to_matrix, r6d2m=rotation_6d_to_matrix,
                m2r6d=matrix_to_rotation_6d, sqrt_pos=_sqrt_positive_part)


def rotations_program(torch):
    """pytorch3d's conversions round trip, with gradients through the masked assignment of
    _sqrt_positive_part, the one-hot candidate pick and the small-angle branch (an exact zero
    axis-angle included), quaternion composition against matrix products, Euler angles by
    functools.reduce(matmul), the 6-D representation, and the same under no_grad (where
    _sqrt_positive_part takes its torch.where path)."""
    rot = _rotation_lib(torch)
    rng = np.random.default_rng(2901)
    res = {}
    quats = normal(torch, rng, 5, 4)
    quats = quats / quats.norm(dim=-1, keepdim=True)
    R = rot["q2m"](quats)
    res["matrix"] = R
    q = rot["m2q"](R)
    res["quaternion"] = q
    with torch.no_grad():
        res["quaternion_no_grad"] = rot["m2q"](R)
    # gradients through the boolean-mask assignment and the candidate pick
    Rg = R.detach().clone().requires_grad_(True)
    q = rot["m2q"](Rg)
    (q * torch.arange(1.0, 5.0)).sum().backward()
    res["m2q_grad"] = Rg.grad
    # a rotation by pi about x: q_abs has zeros, _sqrt_positive_part's mask matters
    flip = torch.tensor([[1.0, 0, 0], [0, -1.0, 0], [0, 0, -1.0]], requires_grad=True)
    qf = rot["m2q"](flip[None])
    qf.sum().backward()
    res["flip_quaternion"] = qf
    res["flip_grad"] = flip.grad
    # axis-angle with the small-angle branch (one exact zero, one tiny)
    aa = torch.cat([normal(torch, rng, 3, 3), torch.zeros(1, 3), torch.full((1, 3), 1e-8)])
    aa.requires_grad_(True)
    qa = rot["aa2q"](aa)
    res["aa2q"] = qa
    qa.pow(2).mul(torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    res["aa2q_grad"] = aa.grad
    res["q2aa"] = rot["q2aa"](qa.detach())
    # composition: quaternion product against matrix product; apply to points
    q1, q2 = quats[:2], quats[2:4]
    res["compose"] = (rot["q2m"](rot["qmul"](q1, q2)) - R[:2] @ R[2:4]).abs().max()
    pts = normal(torch, rng, 2, 3)
    res["apply"] = rot["qapply"](q1, pts)
    res["apply_vs_matrix"] = (rot["qapply"](q1, pts) - (R[:2] @ pts[..., None])[..., 0]).abs().max()
    res["qinv_dtype"] = [str(rot["qinv"](q1).dtype).rsplit(".", 1)[-1]]
    try:
        rot["qapply"](q1, normal(torch, rng, 2, 4))
    except ValueError as e:     # ember's Size prints as ember.Size by design
        res["apply_error"] = [str(e).replace("ember.Size", "torch.Size")]
    # Euler angles by reduce(matmul)
    eul = normal(torch, rng, 4, 3).requires_grad_(True)
    Re = rot["euler"](eul, "ZYX")
    res["euler"] = Re
    torch.linalg.matrix_norm(Re - torch.eye(3), ord="fro").sum().backward()
    res["euler_grad"] = eul.grad
    # 6-D representation round trip
    d6 = rot["m2r6d"](Re.detach())
    res["r6d"] = d6
    res["r6d_back"] = rot["r6d2m"](d6)
    try:
        rot["m2q"](torch.zeros(2, 4, 3))
    except ValueError as e:
        res["bad_shape"] = [str(e).replace("ember.Size", "torch.Size")]
    return res


def so3_program(torch):
    """pytorch3d.transforms.so3: hat/hat_inv, so3_exp_map with its clamp of the squared norm,
    so3_rotation_angle with the trace check and acos_linear_extrapolation (masked branches),
    so3_log_map's Taylor branch by masks, the same log map written with torch.where (double
    where to keep gradients finite at zero), gradients in float64 at and near the identity,
    se(3) exp through linalg.matrix_exp of 4x4 twists against the closed-form V matrix."""
    rng = np.random.default_rng(2902)
    res = {}

    def hat(v):
        N, dim = v.shape
        if dim != 3:
            raise ValueError("Input vectors have to be 3-dimensional.")
        h = torch.zeros((N, 3, 3), dtype=v.dtype, device=v.device)
        x, y, z = v.unbind(1)
        h[:, 0, 1] = -z
        h[:, 0, 2] = y
        h[:, 1, 0] = z
        h[:, 1, 2] = -x
        h[:, 2, 0] = -y
        h[:, 2, 1] = x
        return h

    def hat_inv(h):
        N, dim1, dim2 = h.shape
        if dim1 != 3 or dim2 != 3:
            raise ValueError("Input has to be a batch of 3x3 Tensors.")
        ss_diff = torch.abs(h + h.permute(0, 2, 1)).max()
        if float(ss_diff) > 1e-5:
            raise ValueError("One of input matrices is not skew-symmetric.")
        return torch.stack((h[:, 2, 1], h[:, 0, 2], h[:, 1, 0]), dim=1)

    def so3_exp_map(log_rot, eps=1e-4):
        nrms = (log_rot * log_rot).sum(1)
        rot_angles = torch.clamp(nrms, eps).sqrt()
        rot_angles_inv = 1.0 / rot_angles
        fac1 = rot_angles_inv * rot_angles.sin()
        fac2 = rot_angles_inv * rot_angles_inv * (1.0 - rot_angles.cos())
        skews = hat(log_rot)
        skews_square = torch.bmm(skews, skews)
        return (fac1[:, None, None] * skews + fac2[:, None, None] * skews_square
                + torch.eye(3, dtype=log_rot.dtype, device=log_rot.device)[None])

    def _dacos_dx(x):
        return (-1.0) / math.sqrt(1.0 - x * x)

    def acos_linear_extrapolation(x, bounds=(-0.9999, 0.9999)):
        lower_bound, upper_bound = bounds
        acos_extrap = torch.empty_like(x)
        x_upper = x >= upper_bound
        x_lower = x <= lower_bound
        x_mid = (~x_upper) & (~x_lower)
        acos_extrap[x_mid] = torch.acos(x[x_mid])
        acos_extrap[x_upper] = ((x[x_upper] - upper_bound) * _dacos_dx(upper_bound)
                                + math.acos(upper_bound))
        acos_extrap[x_lower] = ((x[x_lower] - lower_bound) * _dacos_dx(lower_bound)
                                + math.acos(lower_bound))
        return acos_extrap

    def so3_rotation_angle(R, eps=1e-4, cos_angle=False, cos_bound=1e-4):
        N, dim1, dim2 = R.shape
        if dim1 != 3 or dim2 != 3:
            raise ValueError("Input has to be a batch of 3x3 Tensors.")
        rot_trace = R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2]
        if ((rot_trace < -1.0 - eps) + (rot_trace > 3.0 + eps)).any():
            raise ValueError("A matrix has trace outside valid range [-1-eps,3+eps].")
        phi_cos = (rot_trace - 1.0) * 0.5
        if cos_angle:
            return phi_cos
        if cos_bound > 0.0:
            bound = 1.0 - cos_bound
            return acos_linear_extrapolation(phi_cos, (-bound, bound))
        return torch.acos(phi_cos)

    def so3_log_map(R, eps=1e-4, cos_bound=1e-4):
        phi = so3_rotation_angle(R, cos_angle=False, eps=eps, cos_bound=cos_bound)
        phi_sin = torch.sin(phi)
        phi_factor = torch.empty_like(phi)
        ok_denom = phi_sin.abs() > (0.5 * eps)
        phi_factor[~ok_denom] = 0.5 + (phi[~ok_denom] ** 2) * (1.0 / 12)
        phi_factor[ok_denom] = phi[ok_denom] / (2.0 * phi_sin[ok_denom])
        log_rot_hat = phi_factor[:, None, None] * (R - R.permute(0, 2, 1))
        return hat_inv(log_rot_hat)

    def so3_log_map_where(R):
        cos = ((R.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1 + 1e-7, 1 - 1e-7)
        phi = torch.acos(cos)
        small = phi < 1e-3
        safe = torch.where(small, torch.ones_like(phi), phi)   # the double-where trick
        factor = torch.where(small, 0.5 + phi ** 2 / 12, safe / (2 * torch.sin(safe)))
        w = R - R.transpose(-1, -2)
        return factor[..., None] * torch.stack([w[..., 2, 1], w[..., 0, 2], w[..., 1, 0]], -1)

    log_rot = torch.cat([normal(torch, rng, 4, 3) * 0.8, torch.zeros(1, 3),
                         torch.full((1, 3), 1e-3)])
    R = so3_exp_map(log_rot)
    res["exp"] = R
    res["exp_matrix_exp"] = (torch.linalg.matrix_exp(hat(log_rot)) - R).abs().max()
    res["log"] = so3_log_map(R)
    res["log_where"] = so3_log_map_where(R)
    res["angle"] = so3_rotation_angle(R)
    res["cos_angle"] = so3_rotation_angle(R, cos_angle=True)
    res["acos_extrap"] = acos_linear_extrapolation(torch.linspace(-1.2, 1.2, 9), (-0.9, 0.9))
    # float64 gradients, through the exp map and back through the log map
    lr64 = log_rot.double().requires_grad_(True)
    back = so3_log_map(so3_exp_map(lr64))
    (back * torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)).sum().backward()
    res["exp_log_grad"] = lr64.grad
    Rg = R.double().requires_grad_(True)
    g = torch.autograd.grad(so3_log_map_where(Rg).pow(2).sum(), Rg)[0]
    res["log_where_grad"] = g
    res["log_where_grad_finite"] = [bool(torch.isfinite(g).all())]
    Rx = R.double().requires_grad_(True)
    ang = so3_rotation_angle(Rx)
    ang.sum().backward()
    res["angle_grad"] = Rx.grad
    for bad, key in ((torch.zeros(2, 3, 4), "shape_error"),
                     (3 * torch.eye(3)[None], "trace_error")):
        try:
            so3_rotation_angle(bad)
        except ValueError as e:
            res[key] = [str(e)]
    try:
        hat_inv(torch.ones(1, 3, 3))
    except ValueError as e:
        res["skew_error"] = [str(e)]

    # se(3): exp of a 4x4 twist against R, V t closed form
    xi = normal(torch, rng, 3, 6) * 0.7
    twist = torch.zeros(3, 4, 4)
    twist[:, :3, :3] = hat(xi[:, 3:])
    twist[:, :3, 3] = xi[:, :3]
    T = torch.linalg.matrix_exp(twist)
    res["se3"] = T
    th = xi[:, 3:].norm(dim=-1)[:, None, None]
    W = hat(xi[:, 3:])
    V = (torch.eye(3) + (1 - th.cos()) / th ** 2 * W + (th - th.sin()) / th ** 3 * (W @ W))
    res["se3_V"] = (V @ xi[:, :3, None])[..., 0]
    res["se3_bottom"] = T[:, 3]
    xi64 = xi.double().requires_grad_(True)
    tw = torch.cat([torch.cat([hat(xi64[:, 3:]), xi64[:, :3, None]], -1),
                    torch.zeros(3, 1, 4, dtype=torch.float64)], -2)
    T64 = torch.linalg.matrix_exp(tw)
    res["se3_grad"] = torch.autograd.grad(T64[:, :3, 3].sum() + T64[:, 0, 1].sum(), xi64)[0]
    return res


def kabsch_icp_program(torch):
    """pytorch3d's corresponding_points_alignment (torch.svd on the weighted covariance, the
    det sign fix on E, optional scale) with gradients into both point sets through the SVD; a
    reflection case; then ICP: torch.cdist + argmin correspondences, gather, re-align, RMSE
    per iteration, and the converged transform."""
    rng = np.random.default_rng(2903)
    res = {}

    def corresponding_points_alignment(X, Y, weights=None, estimate_scale=False,
                                       allow_reflection=False, eps=1e-9):
        b, n, dim = X.shape
        if weights is None:
            Xmu, Ymu = X.mean(1, keepdim=True), Y.mean(1, keepdim=True)
        else:
            w = weights[..., None]
            total = torch.clamp(w.sum(1, keepdim=True), eps)
            Xmu, Ymu = (X * w).sum(1, keepdim=True) / total, (Y * w).sum(1, keepdim=True) / total
        Xc, Yc = X - Xmu, Y - Ymu
        if weights is not None:
            Xc_w = Xc * weights[..., None]
        else:
            Xc_w = Xc
        XYcov = torch.bmm(Xc_w.transpose(2, 1), Yc) / n
        U, S, V = torch.svd(XYcov)
        E = torch.eye(dim, dtype=XYcov.dtype, device=XYcov.device)[None].repeat(b, 1, 1)
        if not allow_reflection:
            R_test = torch.bmm(U, V.transpose(2, 1))
            E[:, -1, -1] = torch.det(R_test)
        R = torch.bmm(U, torch.bmm(E, V.transpose(2, 1)))
        if estimate_scale:
            trace_ES = (torch.diagonal(E, dim1=1, dim2=2) * S).sum(1)
            Xcov = (Xc * Xc).sum((1, 2)) / n
            s = trace_ES / torch.clamp(Xcov, eps)
            T = Ymu[:, 0, :] - s[:, None] * torch.bmm(Xmu, R)[:, 0, :]
        else:
            T = Ymu[:, 0, :] - torch.bmm(Xmu, R)[:, 0, :]
            s = T.new_ones(b)
        return R, T, s

    n = 12
    X = normal(torch, rng, 2, n, 3)
    theta = torch.tensor([0.4, -1.1])
    c, s_ = theta.cos(), theta.sin()
    z, o = torch.zeros(2), torch.ones(2)
    Rz = torch.stack([c, -s_, z, s_, c, z, z, z, o], -1).view(2, 3, 3)
    Y = 1.5 * torch.bmm(X, Rz) + torch.tensor([0.3, -0.2, 1.0]) + 0.02 * normal(torch, rng, 2, n, 3)
    Y[1, :, 2] = -Y[1, :, 2]                  # the second set is reflected
    Xg, Yg = X.clone().requires_grad_(True), Y.clone().requires_grad_(True)
    R, T, s = corresponding_points_alignment(Xg, Yg, estimate_scale=True)
    res["R"], res["T"], res["s"] = R, T, s
    res["det"] = torch.linalg.det(R)
    aligned = s[:, None, None] * torch.bmm(Xg, R) + T[:, None, :]
    err = (aligned - Yg).pow(2).sum(-1).mean(-1)
    res["err"] = err
    err.sum().backward()
    res["grad_X"], res["grad_Y"] = Xg.grad, Yg.grad
    w = torch.from_numpy(rng.random((2, n)).astype(np.float32))
    Rw, Tw, _ = corresponding_points_alignment(X, Y, weights=w, allow_reflection=True)
    res["R_weighted_reflect"] = Rw
    res["T_weighted"] = Tw
    res["det_reflect"] = torch.det(Rw)

    # ICP on a shuffled, rotated copy: nearest neighbours by cdist + argmin
    src = normal(torch, rng, 1, 30, 3)
    perm = torch.from_numpy(rng.permutation(30))
    tgt = torch.bmm(src, so3_small(torch)) + torch.tensor([0.05, 0.0, -0.05])
    tgt = tgt[:, perm]
    cur = src.clone()
    rmse, idxs = [], []
    for _ in range(4):
        d = torch.cdist(cur, tgt)
        nn_idx = d.argmin(-1)
        idxs.append(nn_idx)
        matched = torch.gather(tgt, 1, nn_idx[..., None].expand(-1, -1, 3))
        Ri, Ti, _ = corresponding_points_alignment(cur, matched)
        cur = torch.bmm(cur, Ri) + Ti[:, None]
        rmse.append(((cur - matched) ** 2).sum(-1).mean().sqrt())
    res["icp_rmse"] = torch.stack(rmse)
    res["icp_idx"] = torch.stack(idxs)
    res["icp_final"] = cur
    # cdist's matmul path leaves ~1e-4 noise at zero distance: compare by differences
    res["icp_dist"] = (cur[:, :, None] - tgt[:, None]).norm(dim=-1).min(-1).values
    # cdist p=1 and p=inf with gradients
    a = normal(torch, rng, 5, 3).requires_grad_(True)
    b = normal(torch, rng, 4, 3)
    dd = torch.cdist(a, b, p=1).sum() + torch.cdist(a, b, p=float("inf")).sum()
    dd.backward()
    res["cdist_p_grad"] = a.grad
    return res


def so3_small(torch):
    """A small fixed rotation about (1, 1, 0)/sqrt(2) by 0.3 rad, built in closed form."""
    k = torch.tensor([1.0, 1.0, 0.0]) / math.sqrt(2.0)
    K = torch.tensor([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return (torch.eye(3) + math.sin(0.3) * K + (1 - math.cos(0.3)) * K @ K)[None]


def chamfer_program(torch):
    """pytorch3d's chamfer_distance written with cdist: heterogeneous batches padded with
    x_lengths / y_lengths masks, point_reduction mean / sum, batch_reduction mean, the normals
    term by cosine similarity of the nearest neighbour's normal (gather by knn indices), the
    single-directional variant, and Adam deforming a point cloud towards a target."""
    F = torch.nn.functional
    rng = np.random.default_rng(2904)
    res = {}

    def chamfer(x, y, x_lengths, y_lengths, x_normals=None, y_normals=None,
                point_reduction="mean", single_directional=False):
        N, P1, _ = x.shape
        P2 = y.shape[1]
        x_mask = torch.arange(P1, device=x.device)[None] >= x_lengths[:, None]
        y_mask = torch.arange(P2, device=y.device)[None] >= y_lengths[:, None]
        d = torch.cdist(x, y) ** 2
        d_xy = d.masked_fill(y_mask[:, None, :], float("inf"))
        cham_x, idx_x = d_xy.min(2)
        cham_x = cham_x.masked_fill(x_mask, 0.0)
        d_yx = d.masked_fill(x_mask[:, :, None], float("inf"))
        cham_y, idx_y = d_yx.min(1)
        cham_y = cham_y.masked_fill(y_mask, 0.0)
        cham_norm_x = cham_norm_y = None
        if x_normals is not None:
            nn_y = y_normals.gather(1, idx_x[..., None].expand(-1, -1, 3))
            cham_norm_x = 1 - torch.abs(F.cosine_similarity(x_normals, nn_y, dim=2, eps=1e-6))
            cham_norm_x = cham_norm_x.masked_fill(x_mask, 0.0)
            nn_x = x_normals.gather(1, idx_y[..., None].expand(-1, -1, 3))
            cham_norm_y = 1 - torch.abs(F.cosine_similarity(y_normals, nn_x, dim=2, eps=1e-6))
            cham_norm_y = cham_norm_y.masked_fill(y_mask, 0.0)
        cham_x, cham_y = cham_x.sum(1), cham_y.sum(1)
        if cham_norm_x is not None:
            cham_norm_x, cham_norm_y = cham_norm_x.sum(1), cham_norm_y.sum(1)
        if point_reduction == "mean":
            xl = x_lengths.clamp(min=1).to(x.dtype)
            yl = y_lengths.clamp(min=1).to(x.dtype)
            cham_x, cham_y = cham_x / xl, cham_y / yl
            if cham_norm_x is not None:
                cham_norm_x, cham_norm_y = cham_norm_x / xl, cham_norm_y / yl
        dist = cham_x if single_directional else cham_x + cham_y
        normals = None
        if cham_norm_x is not None:
            normals = cham_norm_x if single_directional else cham_norm_x + cham_norm_y
            normals = normals.sum() / N
        return dist.sum() / N, normals, idx_x

    x = normal(torch, rng, 2, 9, 3)
    y = normal(torch, rng, 2, 7, 3)
    xl, yl = torch.tensor([9, 6]), torch.tensor([5, 7])
    xn = F.normalize(normal(torch, rng, 2, 9, 3), dim=-1)
    yn = F.normalize(normal(torch, rng, 2, 7, 3), dim=-1)
    xg = x.clone().requires_grad_(True)
    loss, loss_n, idx = chamfer(xg, y, xl, yl, xn, yn)
    (loss + 0.1 * loss_n).backward()
    res["chamfer"], res["normals"], res["idx"] = loss, loss_n, idx
    res["grad"] = xg.grad
    res["sum"] = chamfer(x, y, xl, yl, point_reduction="sum")[0]
    res["single"] = chamfer(x, y, xl, yl, single_directional=True)[0]
    # deform a sphere-ish cloud towards a target with Adam
    src = F.normalize(normal(torch, rng, 1, 20, 3), dim=-1)
    tgt = normal(torch, rng, 1, 16, 3) * torch.tensor([1.0, 0.5, 0.25])
    deform = torch.full(src.shape, 0.0, requires_grad=True)
    opt = torch.optim.Adam([deform], lr=0.05)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        new = src + deform
        lap = (new - new.mean(1, keepdim=True)).norm(dim=-1).var()
        loss = chamfer(new, tgt, torch.tensor([20]), torch.tensor([16]))[0] + 0.1 * lap
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["deform_losses"] = losses
    res["deform"] = deform
    return res


PROGRAMS = [rotations_program, so3_program, kabsch_icp_program, chamfer_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 SVD / cdist accumulation order, amplified by 4 ICP iterations
        "kabsch_icp_program": (1e-4, 1e-5),
        # float32 cdist then Adam steps
        "chamfer_program": (1e-4, 1e-5),
    })
