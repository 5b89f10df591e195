"""Camera and robotics programs written as vision and robot-learning repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy data:
pinhole projection with intrinsics (points behind the camera masked by torch.where, NDC and
grid_sample lookup of the projected points, unprojection of a depth map by the inverse
intrinsics), differentiable forward kinematics of a DH chain (per-joint 4x4 transforms,
cumulative matrix products, Jacobian by autograd.functional.jacobian and by func.jacrev + vmap,
damped least-squares IK by linalg.solve), and a small bundle adjustment refined with LBFGS
(strong Wolfe) and with Adam on a Huber reprojection loss."""

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _skew(torch, v):
    """Batched 3x3 skew-symmetric matrices of 3-vectors."""
    z = torch.zeros_like(v[..., 0])
    return torch.stack([z, -v[..., 2], v[..., 1], v[..., 2], z, -v[..., 0],
                        -v[..., 1], v[..., 0], z], -1).unflatten(-1, (3, 3))


def _rodrigues(torch, w):
    """Rotation matrices of axis-angle vectors, with the Taylor branch at zero by torch.where."""
    th2 = (w * w).sum(-1, keepdim=True)[..., None]
    small = th2 < 1e-8
    th2s = torch.where(small, torch.ones_like(th2), th2)
    th = th2s.sqrt()
    a = torch.where(small, 1 - th2 / 6, th.sin() / th)
    b = torch.where(small, 0.5 - th2 / 24, (1 - th.cos()) / th2s)
    K = _skew(torch, w)
    return torch.eye(3, dtype=w.dtype) + a * K + b * (K @ K)


def camera_program(torch):
    """A pinhole camera as NeRF / SfM code writes it: K from fx, fy, cx, cy; world-to-camera
    [R|t]; homogeneous coordinates; the division by depth guarded by torch.where; in-image
    masks; pixel to NDC; sampling an image at projected points with grid_sample (align_corners
    False and True); unprojection of a depth map by K^-1 and meshgrid(indexing='xy'); the
    projection's Jacobian w.r.t. the points."""
    F = torch.nn.functional
    rng = np.random.default_rng(2911)
    res = {}
    H, W = 6, 8
    fx, fy, cx, cy = 7.0, 6.5, W / 2 - 0.5, H / 2 - 0.5
    K = torch.tensor([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
    R = _rodrigues(torch, torch.tensor([0.1, -0.2, 0.05]))
    t = torch.tensor([0.1, 0.0, 2.0])
    world_to_cam = torch.eye(4)
    world_to_cam[:3, :3] = R
    world_to_cam[:3, 3] = t
    pts = normal(torch, rng, 12, 3) * 0.8
    pts[0] = torch.tensor([0.0, 0.0, -3.0])                  # ends up behind the camera
    pts_g = pts.clone().requires_grad_(True)
    homog = torch.cat([pts_g, torch.ones_like(pts_g[:, :1])], dim=-1)
    cam = (world_to_cam @ homog.T).T[:, :3]
    z = cam[:, 2:]
    valid = z > 1e-3
    uv = (K @ (cam / torch.where(valid, z, torch.ones_like(z))).T).T[:, :2]
    inside = valid[:, 0] & (uv[:, 0] >= 0) & (uv[:, 0] <= W - 1) & (uv[:, 1] >= 0) \
        & (uv[:, 1] <= H - 1)
    res["uv"], res["valid"], res["inside"] = uv, valid.squeeze(-1), inside
    (uv[inside] ** 2).sum().backward()
    res["uv_grad"] = pts_g.grad
    # bilinear lookup of an image at the projected pixels
    img = normal(torch, rng, 1, 2, H, W)
    ndc = torch.stack([uv[:, 0] / (W - 1) * 2 - 1, uv[:, 1] / (H - 1) * 2 - 1], -1).detach()
    for ac in (True, False):
        g = ndc if ac else (ndc * torch.tensor([(W - 1) / W, (H - 1) / H]))
        s = F.grid_sample(img, g[None, :, None], mode="bilinear", padding_mode="zeros",
                          align_corners=ac)
        res[f"sampled_{ac}"] = s[0, :, :, 0].T
    res["sampled_border"] = F.grid_sample(img, ndc[None, :, None] * 1.3, padding_mode="border",
                                          align_corners=False)
    # unproject a depth map with K^-1
    depth = torch.from_numpy(rng.uniform(1.0, 3.0, (H, W)).astype(np.float32))
    xs, ys = torch.meshgrid(torch.arange(W, dtype=torch.float32),
                            torch.arange(H, dtype=torch.float32), indexing="xy")
    pix = torch.stack([xs, ys, torch.ones_like(xs)], dim=-1)
    rays = pix @ torch.linalg.inv(K).T
    pts_cam = rays * depth[..., None]
    cam_to_world = torch.linalg.inv(world_to_cam)
    pts_world = pts_cam @ cam_to_world[:3, :3].T + cam_to_world[:3, 3]
    res["unprojected"] = pts_world
    res["inv_ex_info"] = torch.linalg.inv_ex(world_to_cam).info
    # reprojection round trip
    back = (K @ ((pts_world @ R.T + t) / (pts_world @ R.T + t)[..., 2:]).reshape(-1, 3).T).T
    res["roundtrip"] = (back[:, :2] - pix.reshape(-1, 3)[:, :2]).abs().max()

    def project(p):
        c = p @ R.T + t
        return (c[:, :2] / c[:, 2:]) * torch.tensor([fx, fy]) + torch.tensor([cx, cy])

    res["jacobian"] = torch.autograd.functional.jacobian(project, pts[1:3])
    return res


def fk_program(torch):
    """Forward kinematics of a 4-joint DH arm: per-joint transforms stacked from cos / sin,
    a cumulative product of 4x4 matrices kept as a list of frames, the end-effector pose, its
    positional Jacobian by autograd.functional.jacobian and by torch.func (jacrev under vmap
    over a batch of configurations), a few damped least-squares IK steps through linalg.solve,
    and joint limits by clamp_ under no_grad."""
    rng = np.random.default_rng(2912)
    res = {}
    a = torch.tensor([0.0, 0.5, 0.4, 0.1])
    alpha = torch.tensor([np.pi / 2, 0.0, 0.0, -np.pi / 2])
    d = torch.tensor([0.3, 0.0, 0.0, 0.05])

    def dh(theta, a_, alpha_, d_):
        ct, st = torch.cos(theta), torch.sin(theta)
        ca, sa = torch.cos(alpha_), torch.sin(alpha_)
        zero, one = torch.zeros_like(theta), torch.ones_like(theta)
        return torch.stack([
            torch.stack([ct, -st * ca, st * sa, a_ * ct], -1),
            torch.stack([st, ct * ca, -ct * sa, a_ * st], -1),
            torch.stack([zero, sa.expand_as(theta), ca.expand_as(theta), d_.expand_as(theta)],
                        -1),
            torch.stack([zero, zero, zero, one], -1)], -2)

    def fk(q):
        T = torch.eye(4, dtype=q.dtype).expand(q.shape[:-1] + (4, 4))
        frames = []
        for j in range(q.shape[-1]):
            T = T @ dh(q[..., j], a[j], alpha[j], d[j])
            frames.append(T)
        return torch.stack(frames, -3)

    q = torch.from_numpy(rng.uniform(-1, 1, (3, 4)).astype(np.float32)).requires_grad_(True)
    frames = fk(q)
    res["frames"] = frames
    ee = frames[..., -1, :3, 3]
    res["ee"] = ee
    ee.pow(2).sum().backward()
    res["q_grad"] = q.grad
    res["jac_functional"] = torch.autograd.functional.jacobian(
        lambda qq: fk(qq)[-1, :3, 3], q[0].detach())
    jac = torch.func.vmap(torch.func.jacrev(lambda qq: fk(qq)[-1, :3, 3]))(q.detach())
    res["jac_vmap"] = jac
    # damped least-squares IK towards a target
    target = torch.tensor([0.4, 0.3, 0.5])
    qi = q[0].detach().clone()
    errs = []
    for _ in range(4):
        J = torch.autograd.functional.jacobian(lambda qq: fk(qq)[-1, :3, 3], qi)
        e = target - fk(qi)[-1, :3, 3]
        dq = J.T @ torch.linalg.solve(J @ J.T + 0.01 * torch.eye(3), e)
        qi = qi + dq
        with torch.no_grad():
            qi.clamp_(-2.5, 2.5)
        errs.append(e.norm())
    res["ik_err"] = torch.stack(errs)
    res["ik_q"] = qi
    # the same solve by lstsq and pinv
    J = torch.autograd.functional.jacobian(lambda qq: fk(qq)[-1, :3, 3], qi)
    e = (target - fk(qi)[-1, :3, 3])[:, None]
    res["pinv_step"] = torch.linalg.pinv(J) @ e
    res["lstsq_step"] = torch.linalg.lstsq(J.T @ J + 0.1 * torch.eye(4), J.T @ e).solution
    return res


def bundle_adjustment_program(torch):
    """A 3-camera, 10-point bundle adjustment: camera poses as axis-angle + translation
    Parameters, points as a Parameter, observations with noise from NumPy, the Huber
    reprojection loss; LBFGS with strong-Wolfe line search and a closure, then Adam from the
    same start; the first camera fixed by zeroing its gradient with a hook."""
    F = torch.nn.functional
    rng = np.random.default_rng(2913)
    res = {}
    n_cam, n_pt = 3, 10
    f = 5.0
    true_w = torch.from_numpy(rng.normal(0, 0.1, (n_cam, 3)).astype(np.float32))
    true_t = torch.from_numpy(np.array([[0, 0, 4], [0.5, 0, 4], [-0.5, 0.2, 4]], np.float32))
    true_X = normal(torch, rng, n_pt, 3) * 0.5
    cam_idx = torch.arange(n_cam).repeat_interleave(n_pt)
    pt_idx = torch.arange(n_pt).repeat(n_cam)

    def project(w, t, X):
        Rm = _rodrigues(torch, w[cam_idx])
        c = (Rm @ X[pt_idx][..., None])[..., 0] + t[cam_idx]
        return f * c[:, :2] / c[:, 2:]

    obs = project(true_w, true_t, true_X) + 0.01 * normal(torch, rng, n_cam * n_pt, 2)
    init = (true_w + 0.05 * normal(torch, rng, n_cam, 3),
            true_t + 0.1 * normal(torch, rng, n_cam, 3),
            true_X + 0.1 * normal(torch, rng, n_pt, 3))
    init[0][0] = true_w[0]
    init[1][0] = true_t[0]

    def make():
        w = torch.nn.Parameter(init[0].clone())
        t = torch.nn.Parameter(init[1].clone())
        X = torch.nn.Parameter(init[2].clone())
        mask = torch.ones(n_cam, 1)
        mask[0] = 0
        w.register_hook(lambda g: g * mask)
        t.register_hook(lambda g: g * mask)
        return w, t, X

    w, t, X = make()
    opt = torch.optim.LBFGS([w, t, X], lr=1, max_iter=8, history_size=5,
                            line_search_fn="strong_wolfe")
    calls = []

    def closure():
        opt.zero_grad()
        loss = F.huber_loss(project(w, t, X), obs, delta=0.5)
        loss.backward()
        calls.append(loss.item())
        return loss

    for _ in range(2):
        opt.step(closure)
    res["lbfgs_losses"] = calls
    res["lbfgs_params"] = [w, t, X]
    res["lbfgs_state"] = [opt.state[opt._params[0]]["func_evals"],
                          opt.state[opt._params[0]]["n_iter"]]
    res["cam0_fixed"] = [bool(torch.equal(w[0], true_w[0]))]
    w, t, X = make()
    opt = torch.optim.Adam([{"params": [w, t], "lr": 0.01}, {"params": [X]}], lr=0.02)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = F.huber_loss(project(w, t, X), obs, delta=0.5, reduction="sum") / obs.shape[0]
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["adam_losses"] = losses
    res["adam_params"] = [w, t, X]
    return res


PROGRAMS = [camera_program, fk_program, bundle_adjustment_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 line search over 16 LBFGS iterations amplifies accumulation order
        "bundle_adjustment_program": (1e-4, 1e-5),
        # float32 IK iterations through solve / pinv
        "fk_program": (1e-4, 1e-5),
    })
