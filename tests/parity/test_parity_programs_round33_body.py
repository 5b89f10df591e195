"""Parametric body and hand models written as smplx/MANO/HybrIK/SPIN write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights: SMPL-style
linear blend skinning (batch_rodrigues with its small-angle eps, pose blend shapes from R - I,
shape blend shapes through einsum, the joint regressor, a kinematic chain over parents with 4x4
transforms built by F.pad), MANO's PCA hand pose through einsum with a list operand, 6-D
rotations by Gram-Schmidt, quaternion/axis-angle round trips with atan2, inverse kinematics by
LBFGS with strong Wolfe line search, and an SPIN-style iterative regressor."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

PARENTS = [-1, 0, 1, 2, 0, 4, 5, 0, 7]       # a small SMPL-like tree: two legs and a spine
J, V, NB = len(PARENTS), 40, 6


def _smpl_data(rng):
    """Template, blend shapes, regressor and skinning weights of a toy SMPL model."""
    weights = rng.uniform(0, 1, (V, J)) ** 4
    reg = rng.uniform(0, 1, (J, V)) ** 3
    return dict(
        v_template=rng.standard_normal((V, 3)).astype(np.float32),
        shapedirs=(rng.standard_normal((V, 3, NB)) * 0.05).astype(np.float32),
        posedirs=(rng.standard_normal(((J - 1) * 9, V * 3)) * 0.01).astype(np.float32),
        J_regressor=(reg / reg.sum(1, keepdims=True)).astype(np.float32),
        weights=(weights / weights.sum(1, keepdims=True)).astype(np.float32),
    )


def _lbs_functions(torch):
    F = torch.nn.functional

    def batch_rodrigues(rot_vecs, epsilon=1e-8, dtype=torch.float32):
        batch_size = rot_vecs.shape[0]
        device = rot_vecs.device
        angle = torch.norm(rot_vecs + 1e-8, dim=1, keepdim=True)
        rot_dir = rot_vecs / angle
        cos = torch.unsqueeze(torch.cos(angle), dim=1)
        sin = torch.unsqueeze(torch.sin(angle), dim=1)
        rx, ry, rz = torch.split(rot_dir, 1, dim=1)
        K = torch.zeros((batch_size, 3, 3), dtype=dtype, device=device)
        zeros = torch.zeros((batch_size, 1), dtype=dtype, device=device)
        K = torch.cat([zeros, -rz, ry, rz, zeros, -rx, -ry, rx, zeros], dim=1) \
            .view((batch_size, 3, 3))
        ident = torch.eye(3, dtype=dtype, device=device).unsqueeze(dim=0)
        return ident + sin * K + (1 - cos) * torch.bmm(K, K)

    def transform_mat(R, t):
        return torch.cat([F.pad(R, [0, 0, 0, 1]), F.pad(t, [0, 0, 0, 1], value=1)], dim=2)

    def batch_rigid_transform(rot_mats, joints, parents, dtype=torch.float32):
        joints = torch.unsqueeze(joints, dim=-1)
        rel_joints = joints.clone()
        rel_joints[:, 1:] -= joints[:, parents[1:]]
        transforms_mat = transform_mat(rot_mats.reshape(-1, 3, 3),
                                       rel_joints.reshape(-1, 3, 1)).reshape(
            -1, joints.shape[1], 4, 4)
        transform_chain = [transforms_mat[:, 0]]
        for i in range(1, parents.shape[0]):
            curr_res = torch.matmul(transform_chain[parents[i]], transforms_mat[:, i])
            transform_chain.append(curr_res)
        transforms = torch.stack(transform_chain, dim=1)
        posed_joints = transforms[:, :, :3, 3]
        joints_homogen = F.pad(joints, [0, 0, 0, 1])
        rel_transforms = transforms - F.pad(
            torch.matmul(transforms, joints_homogen), [3, 0, 0, 0, 0, 0, 0, 0])
        return posed_joints, rel_transforms

    def blend_shapes(betas, shape_disps):
        return torch.einsum('bl,mkl->bmk', [betas, shape_disps])

    def vertices2joints(J_regressor, vertices):
        return torch.einsum('bik,ji->bjk', [vertices, J_regressor])

    def lbs(betas, pose, v_template, shapedirs, posedirs, J_regressor, parents, lbs_weights,
            pose2rot=True):
        batch_size = max(betas.shape[0], pose.shape[0])
        device, dtype = betas.device, betas.dtype
        v_shaped = v_template + blend_shapes(betas, shapedirs)
        J_ = vertices2joints(J_regressor, v_shaped)
        ident = torch.eye(3, dtype=dtype, device=device)
        if pose2rot:
            rot_mats = batch_rodrigues(pose.view(-1, 3)).view([batch_size, -1, 3, 3])
            pose_feature = (rot_mats[:, 1:, :, :] - ident).view([batch_size, -1])
            pose_offsets = torch.matmul(pose_feature, posedirs).view(batch_size, -1, 3)
        else:
            pose_feature = pose[:, 1:].view(batch_size, -1, 3, 3) - ident
            rot_mats = pose.view(batch_size, -1, 3, 3)
            pose_offsets = torch.matmul(pose_feature.view(batch_size, -1),
                                        posedirs).view(batch_size, -1, 3)
        v_posed = pose_offsets + v_shaped
        J_transformed, A = batch_rigid_transform(rot_mats, J_, parents, dtype=dtype)
        W = lbs_weights.unsqueeze(dim=0).expand([batch_size, -1, -1])
        num_joints = J_regressor.shape[0]
        T = torch.matmul(W, A.view(batch_size, num_joints, 16)).view(batch_size, -1, 4, 4)
        homogen_coord = torch.ones([batch_size, v_posed.shape[1], 1], dtype=dtype,
                                   device=device)
        v_posed_homo = torch.cat([v_posed, homogen_coord], dim=2)
        v_homo = torch.matmul(T, torch.unsqueeze(v_posed_homo, dim=-1))
        verts = v_homo[:, :, :3, 0]
        return verts, J_transformed

    return batch_rodrigues, lbs


def _smpl_class(torch):
    _, lbs = _lbs_functions(torch)

    class SMPL(torch.nn.Module):
        def __init__(self, data, batch_size=2):
            super().__init__()
            self.register_buffer("v_template", torch.tensor(data["v_template"]))
            self.register_buffer("shapedirs", torch.from_numpy(data["shapedirs"]))
            self.register_buffer("posedirs", torch.tensor(data["posedirs"],
                                                          dtype=torch.float32))
            self.register_buffer("J_regressor", torch.from_numpy(data["J_regressor"]))
            parents = torch.tensor(PARENTS, dtype=torch.long)
            parents[0] = -1
            self.register_buffer("parents", parents)
            self.register_buffer("lbs_weights", torch.from_numpy(data["weights"]))
            default = torch.zeros([batch_size, NB], dtype=torch.float32)
            self.register_parameter("betas", torch.nn.Parameter(default, requires_grad=True))
            self.global_orient = torch.nn.Parameter(torch.zeros([batch_size, 3]))
            self.body_pose = torch.nn.Parameter(torch.zeros([batch_size, (J - 1) * 3]))
            self.transl = torch.nn.Parameter(torch.zeros([batch_size, 3]))

        def forward(self, betas=None, body_pose=None, global_orient=None, transl=None):
            global_orient = global_orient if global_orient is not None else self.global_orient
            body_pose = body_pose if body_pose is not None else self.body_pose
            betas = betas if betas is not None else self.betas
            transl = transl if transl is not None else self.transl
            full_pose = torch.cat([global_orient, body_pose], dim=1)
            vertices, joints = lbs(betas, full_pose, self.v_template, self.shapedirs,
                                   self.posedirs, self.J_regressor, self.parents,
                                   self.lbs_weights)
            joints = joints + transl.unsqueeze(dim=1)
            vertices = vertices + transl.unsqueeze(dim=1)
            return vertices, joints, full_pose
    return SMPL


def smpl_fitting_program(torch):
    rng = np.random.default_rng(0)
    data = _smpl_data(rng)
    model = _smpl_class(torch)(data)
    batch_rodrigues, lbs = _lbs_functions(torch)
    target_pose = normal(torch, rng, 2, (J - 1) * 3) * 0.4
    target_betas = normal(torch, rng, 2, NB)
    with torch.no_grad():
        _, target_joints, _ = model(betas=target_betas, body_pose=target_pose)
        model.global_orient.copy_(normal(torch, rng, 2, 3) * 0.1)
    opt = torch.optim.Adam([model.body_pose, model.betas, model.global_orient, model.transl],
                           lr=0.05)
    res = {"losses": []}
    for _ in range(4):
        opt.zero_grad()
        verts, joints, full_pose = model()
        loss = ((joints - target_joints) ** 2).sum(-1).mean() \
            + 1e-3 * (model.betas ** 2).sum() + 1e-4 * full_pose.pow(2).sum()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["verts"], res["joints"] = verts.detach(), joints.detach()
    res["grads"] = [p.grad for p in (model.body_pose, model.betas, model.transl)]
    res["buffers"] = sorted(n for n, _ in model.named_buffers())
    res["params"] = [n for n, _ in model.named_parameters()]
    # rotation matrices as input (pose2rot=False), and the identity at the zero vector
    rots = batch_rodrigues(torch.cat([torch.zeros(1, 3), normal(torch, rng, J - 1, 3)]))
    with torch.no_grad():
        v2, j2 = lbs(model.betas, rots.unsqueeze(0).repeat(2, 1, 1, 1),
                     model.v_template, model.shapedirs, model.posedirs, model.J_regressor,
                     model.parents, model.lbs_weights, pose2rot=False)
    res["v2"], res["j2"], res["rot0"] = v2, j2, rots[0]
    res["orthonormal"] = torch.allclose(rots @ rots.transpose(1, 2), torch.eye(3).expand(J, 3, 3),
                                        atol=1e-5)
    res["det"] = torch.det(rots)
    # small-angle rodrigues stays differentiable at zero thanks to the +1e-8
    z = torch.zeros(3, 3, requires_grad=True)
    batch_rodrigues(z).sum().backward()
    res["zero_grad"] = z.grad
    return res


def mano_pca_program(torch):
    rng = np.random.default_rng(1)
    ncomps, F = 6, torch.nn.functional
    # float64 as IK fitters often run: LBFGS's line search amplifies float32 rounding
    comps = torch.from_numpy(np.linalg.qr(rng.standard_normal((45, 45)))[0][:ncomps])
    hands_mean = normal(torch, rng, 45).double() * 0.1
    hand_pose = torch.nn.Parameter(torch.zeros(3, ncomps, dtype=torch.float64))
    wrist = torch.nn.Parameter(normal(torch, rng, 3, 3).to(torch.float64) * 0.1)
    batch_rodrigues, _ = _lbs_functions(torch)
    target = normal(torch, rng, 3, 16, 3).double()
    lengths = torch.linspace(0.5, 1.5, 15, dtype=torch.float64)
    parents = torch.tensor([-1] + [0, 1, 2] * 5)
    parents[1:] = torch.tensor([0, 1, 2, 0, 4, 5, 0, 7, 8, 0, 10, 11, 0, 13, 14])
    opt = torch.optim.LBFGS([hand_pose, wrist], lr=1, max_iter=8, history_size=5,
                            line_search_fn="strong_wolfe")

    def fk():
        full = torch.einsum('bi,ij->bj', [hand_pose, comps]) + hands_mean
        pose = torch.cat([wrist, full], dim=1).view(-1, 16, 3)
        R = batch_rodrigues(pose.reshape(-1, 3), dtype=pose.dtype).view(-1, 16, 3, 3)
        offs = F.pad(lengths.view(1, 15, 1), (0, 2)).expand(pose.shape[0], -1, -1)
        glob, pos = [R[:, 0]], [pose.new_zeros(pose.shape[0], 3)]
        for i in range(1, 16):
            p = int(parents[i])
            glob.append(glob[p] @ R[:, i])
            pos.append(pos[p] + (glob[p] @ offs[:, i - 1].unsqueeze(-1)).squeeze(-1))
        return torch.stack(pos, dim=1)

    calls = []

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(fk(), target) + 1e-3 * hand_pose.square().sum()
        loss.backward()
        calls.append(loss.item())
        return loss

    res = {"step_losses": []}
    for _ in range(2):
        res["step_losses"].append(opt.step(closure))
    res["n_calls"] = [len(calls)]
    res["calls"] = calls
    res["pose"], res["wrist"] = hand_pose.detach(), wrist.detach()
    state = opt.state[opt._params[0]]
    res["state"] = [int(state["n_iter"]), int(state["func_evals"])]
    res["parents_dtype"] = [str(parents.dtype).split(".")[-1]]
    return res


def rotations_program(torch):
    rng = np.random.default_rng(2)
    F = torch.nn.functional

    def rot6d_to_rotmat(x):
        x = x.reshape(-1, 3, 2)
        a1, a2 = x[:, :, 0], x[:, :, 1]
        b1 = F.normalize(a1)
        b2 = F.normalize(a2 - torch.einsum('bi,bi->b', b1, a2).unsqueeze(-1) * b1)
        b3 = torch.cross(b1, b2, dim=1)
        return torch.stack((b1, b2, b3), dim=-1)

    def rotmat_to_quat(R):
        m = R.reshape(-1, 9)
        w = torch.sqrt(torch.clamp(1 + m[:, 0] + m[:, 4] + m[:, 8], min=1e-8)) / 2
        x = (m[:, 7] - m[:, 5]) / (4 * w)
        y = (m[:, 2] - m[:, 6]) / (4 * w)
        z = (m[:, 3] - m[:, 1]) / (4 * w)
        return torch.stack([w, x, y, z], -1)

    def quat_to_axis_angle(q):
        norms = torch.norm(q[..., 1:], p=2, dim=-1, keepdim=True)
        half = torch.atan2(norms, q[..., :1])
        angles = 2 * half
        eps = 1e-6
        small = angles.abs() < eps
        sin_half_over = torch.empty_like(angles)
        sin_half_over[~small] = torch.sin(half[~small]) / angles[~small]
        sin_half_over[small] = 0.5 - (angles[small] * angles[small]) / 48
        return q[..., 1:] / sin_half_over

    def axis_angle_to_quat(aa):
        angles = torch.norm(aa, p=2, dim=-1, keepdim=True)
        half = angles * 0.5
        eps = 1e-6
        small = angles.abs() < eps
        s = torch.where(small, 0.5 - angles * angles / 48, torch.sin(half) / angles)
        return torch.cat([torch.cos(half), aa * s], dim=-1)

    class Regressor(torch.nn.Module):          # SPIN/HMR iterative error feedback
        def __init__(self, feat=16, npose=J * 6):
            super().__init__()
            self.fc1 = torch.nn.Linear(feat + npose + NB + 3, 32)
            self.drop1 = torch.nn.Dropout()
            self.decpose = torch.nn.Linear(32, npose)
            self.decshape = torch.nn.Linear(32, NB)
            self.deccam = torch.nn.Linear(32, 3)
            torch.nn.init.xavier_uniform_(self.decpose.weight, gain=0.01)
            mean = torch.from_numpy(np.tile([1., 0., 0., 1., 0., 0.], J).astype(np.float32))
            self.register_buffer('init_pose', mean.unsqueeze(0))
            self.register_buffer('init_shape', torch.zeros(1, NB))
            self.register_buffer('init_cam', torch.tensor([[0.9, 0., 0.]]))

        def forward(self, x, n_iter=3):
            b = x.shape[0]
            pred_pose = self.init_pose.expand(b, -1)
            pred_shape, pred_cam = self.init_shape.expand(b, -1), self.init_cam.expand(b, -1)
            for _ in range(n_iter):
                xc = torch.cat([x, pred_pose, pred_shape, pred_cam], 1)
                xc = self.drop1(self.fc1(xc))
                pred_pose = self.decpose(xc) + pred_pose
                pred_shape = self.decshape(xc) + pred_shape
                pred_cam = self.deccam(xc) + pred_cam
            return rot6d_to_rotmat(pred_pose).view(b, J, 3, 3), pred_shape, pred_cam

    reg = Regressor()
    fill_(torch, [reg.fc1.weight, reg.deccam.weight, reg.decshape.weight], rng, 0.2)
    with torch.no_grad():
        reg.decpose.weight.mul_(0).add_(normal(torch, rng, *reg.decpose.weight.shape) * 0.02)
    reg.eval()
    feats = normal(torch, rng, 4, 16)
    target_rot = rot6d_to_rotmat(normal(torch, rng, 4 * J, 6)).view(4, J, 3, 3)
    opt = torch.optim.AdamW(reg.parameters(), lr=1e-2, weight_decay=1e-4)
    res = {"losses": []}
    for _ in range(3):
        rotmat, shape, cam = reg(feats)
        loss = F.mse_loss(rotmat, target_rot) + 0.1 * (shape ** 2).mean() \
            + ((torch.exp(-cam[:, 0] * 10)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["rotmat"] = rotmat.detach()
    res["det"] = torch.linalg.det(rotmat.detach())
    # quaternion / axis-angle round trips, including a zero rotation
    aa = torch.cat([torch.zeros(1, 3), normal(torch, rng, 5, 3)]).requires_grad_()
    q = axis_angle_to_quat(aa)
    back = quat_to_axis_angle(q)
    back.sum().backward()
    res["q"], res["back"], res["aa_grad"] = q.detach(), back.detach(), aa.grad
    Rq = rot6d_to_rotmat(normal(torch, rng, 3, 6))
    res["q_from_R"] = rotmat_to_quat(Rq)
    res["q_unit"] = torch.linalg.vector_norm(res["q_from_R"], dim=-1)
    # angle between rotations by the trace, clamped as the geodesic loss does
    cos = (torch.einsum('bii->b', Rq.transpose(1, 2) @ Rq.roll(1, 0)) - 1) / 2
    res["geodesic"] = torch.acos(torch.clamp(cos, -1 + 1e-7, 1 - 1e-7))
    return res


PROGRAMS = [smpl_fitting_program, mano_pca_program, rotations_program]
TOLERANCES = {}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
