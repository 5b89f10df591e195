"""3-D human pose programs written as VideoPose3D, integral regression and SPIN/HMR write them
in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights:
a temporal model of dilated conv1d blocks with residual slicing and BatchNorm momentum decay,
MPJPE / N-MPJPE / P-MPJPE (Procrustes through SVD with the determinant sign fix) and velocity
error, heatmap soft-argmax with a temperature, perspective projection with focal length and
principal point, and weak-perspective cameras."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _temporal_model(torch):
    nn = torch.nn

    class TemporalModelBase(nn.Module):
        def __init__(self, num_joints_in, in_features, num_joints_out, filter_widths,
                     causal, dropout, channels):
            super().__init__()
            for fw in filter_widths:
                assert fw % 2 != 0, 'Only odd filter widths are supported'
            self.num_joints_in, self.in_features = num_joints_in, in_features
            self.num_joints_out, self.filter_widths = num_joints_out, filter_widths
            self.drop = nn.Dropout(dropout)
            self.relu = nn.ReLU(inplace=True)
            self.pad = [filter_widths[0] // 2]
            self.expand_bn = nn.BatchNorm1d(channels, momentum=0.1)
            self.shrink = nn.Conv1d(channels, num_joints_out * 3, 1)

        def set_bn_momentum(self, momentum):
            self.expand_bn.momentum = momentum
            for bn in self.layers_bn:
                bn.momentum = momentum

        def receptive_field(self):
            frames = 0
            for f in self.pad:
                frames += f
            return 1 + 2 * frames

        def forward(self, x):
            assert len(x.shape) == 4
            assert x.shape[-2] == self.num_joints_in
            assert x.shape[-1] == self.in_features
            sz = x.shape[:3]
            x = x.view(x.shape[0], x.shape[1], -1)
            x = x.permute(0, 2, 1)
            x = self._forward_blocks(x)
            x = x.permute(0, 2, 1)
            return x.view(sz[0], -1, self.num_joints_out, 3)

    class TemporalModel(TemporalModelBase):
        def __init__(self, num_joints_in, in_features, num_joints_out, filter_widths,
                     causal=False, dropout=0.25, channels=1024, dense=False):
            super().__init__(num_joints_in, in_features, num_joints_out, filter_widths,
                             causal, dropout, channels)
            self.expand_conv = nn.Conv1d(num_joints_in * in_features, channels,
                                         filter_widths[0], bias=False)
            layers_conv, layers_bn = [], []
            self.causal_shift = [(filter_widths[0]) // 2 if causal else 0]
            next_dilation = filter_widths[0]
            for i in range(1, len(filter_widths)):
                self.pad.append((filter_widths[i] - 1) * next_dilation // 2)
                self.causal_shift.append((filter_widths[i] // 2 * next_dilation)
                                         if causal else 0)
                layers_conv.append(nn.Conv1d(
                    channels, channels, filter_widths[i] if not dense else
                    (2 * self.pad[-1] + 1), dilation=next_dilation if not dense else 1,
                    bias=False))
                layers_bn.append(nn.BatchNorm1d(channels, momentum=0.1))
                layers_conv.append(nn.Conv1d(channels, channels, 1, dilation=1, bias=False))
                layers_bn.append(nn.BatchNorm1d(channels, momentum=0.1))
                next_dilation *= filter_widths[i]
            self.layers_conv = nn.ModuleList(layers_conv)
            self.layers_bn = nn.ModuleList(layers_bn)

        def _forward_blocks(self, x):
            x = self.drop(self.relu(self.expand_bn(self.expand_conv(x))))
            for i in range(len(self.pad) - 1):
                pad = self.pad[i + 1]
                shift = self.causal_shift[i + 1]
                res = x[:, :, pad + shift: x.shape[2] - pad + shift]
                x = self.drop(self.relu(self.layers_bn[2 * i](self.layers_conv[2 * i](x))))
                x = res + self.drop(self.relu(
                    self.layers_bn[2 * i + 1](self.layers_conv[2 * i + 1](x))))
            return self.shrink(x)
    return TemporalModel


def _metrics(torch):
    def mpjpe(predicted, target):
        assert predicted.shape == target.shape
        return torch.mean(torch.norm(predicted - target, dim=len(target.shape) - 1))

    def n_mpjpe(predicted, target):
        norm_predicted = torch.mean(torch.sum(predicted ** 2, dim=3, keepdim=True), dim=2,
                                    keepdim=True)
        norm_target = torch.mean(torch.sum(target * predicted, dim=3, keepdim=True), dim=2,
                                 keepdim=True)
        scale = norm_target / norm_predicted
        return mpjpe(scale * predicted, target)

    def p_mpjpe(predicted, target, in_place=True):
        muX = torch.mean(target, dim=1, keepdim=True)
        muY = torch.mean(predicted, dim=1, keepdim=True)
        X0, Y0 = target - muX, predicted - muY
        normX = torch.sqrt(torch.sum(X0 ** 2, dim=(1, 2), keepdim=True))
        normY = torch.sqrt(torch.sum(Y0 ** 2, dim=(1, 2), keepdim=True))
        if in_place:
            X0 /= normX
            Y0 /= normY
        else:
            X0, Y0 = X0 / normX, Y0 / normY
        H = torch.matmul(X0.transpose(1, 2), Y0)
        U, s, Vt = torch.linalg.svd(H)
        V = Vt.transpose(1, 2)
        R = torch.matmul(V, U.transpose(1, 2))
        # avoid improper rotations (reflections), i.e. rotations with det(R) = -1
        sign_detR = torch.sign(torch.unsqueeze(torch.linalg.det(R), 1))
        if in_place:            # as the repo writes it: fine without autograd only
            V[:, :, -1] *= sign_detR
            s[:, -1] *= sign_detR.flatten()
        else:
            flip = torch.cat([torch.ones_like(s[:, :-1]), sign_detR], dim=1)
            V, s = V * flip.unsqueeze(1), s * flip
        R = torch.matmul(V, U.transpose(1, 2))
        tr = torch.unsqueeze(torch.sum(s, dim=1, keepdim=True), 2)
        a = tr * normX / normY
        t = muX - a * torch.matmul(muY, R)
        predicted_aligned = a * torch.matmul(predicted, R) + t
        err = torch.norm(predicted_aligned - target, dim=len(target.shape) - 1)
        return torch.mean(err), R, a

    def mean_velocity_error(predicted, target):
        velocity_predicted = torch.diff(predicted, dim=0)
        velocity_target = torch.diff(target, dim=0)
        return torch.mean(torch.norm(velocity_predicted - velocity_target,
                                     dim=len(target.shape) - 1))
    return mpjpe, n_mpjpe, p_mpjpe, mean_velocity_error


def videopose3d_program(torch):
    rng = np.random.default_rng(0)
    model = _temporal_model(torch)(5, 2, 5, filter_widths=[3, 3], dropout=0.0, channels=16)
    # BatchNorm keeps its (1, 0) init: a bias feeding an all-active ReLU and the next
    # BatchNorm has a zero gradient, whose rounding noise Adam would blow up to a full step
    fill_(torch, [p for n, p in model.named_parameters() if "bn" not in n], rng, 0.2)
    mpjpe, n_mpjpe, _, mve = _metrics(torch)
    rf = model.receptive_field()
    inputs_2d = normal(torch, rng, 2, rf + 3, 5, 2)
    target = normal(torch, rng, 2, 4, 5, 3)
    target[:, :, :1] = 0                   # root-relative, as the repo trains
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, amsgrad=True)
    lr, lr_decay = 1e-3, 0.95
    initial_momentum, final_momentum, epochs = 0.1, 0.001, 3
    res = {"losses": [], "lrs": [], "rf": [rf], "pad": list(model.pad)}
    for epoch in range(epochs):
        model.train()
        pred = model(inputs_2d)
        loss = mpjpe(pred, target) + 0.1 * n_mpjpe(pred, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
        lr *= lr_decay
        for param_group in opt.param_groups:
            param_group['lr'] *= lr_decay
        res["lrs"].append(opt.param_groups[0]["lr"])
        momentum = initial_momentum * np.exp(-(epoch + 1) / epochs
                                             * np.log(initial_momentum / final_momentum))
        model.set_bn_momentum(momentum)
    res["momentum"] = [model.layers_bn[0].momentum]
    res["running"] = [model.expand_bn.running_mean, model.layers_bn[1].running_var]
    res["batches"] = int(model.expand_bn.num_batches_tracked)
    with torch.no_grad():
        model.eval()
        # test-time flip augmentation: swap left/right joints, mirror x, average
        flipped = inputs_2d.clone()
        flipped[:, :, :, 0] *= -1
        kps_left, kps_right = [1, 2], [3, 4]
        flipped[:, :, kps_left + kps_right] = flipped[:, :, kps_right + kps_left]
        out = model(torch.cat((inputs_2d, flipped)))
        out[2:, :, :, 0] *= -1
        out[2:, :, kps_left + kps_right] = out[2:, :, kps_right + kps_left]
        pred = torch.mean(out.view(2, 2, 4, 5, 3), dim=0, keepdim=False)
        res["eval_pred"] = pred
        res["mve"] = mve(pred[0], target[0])
    res["n_params"] = sum(p.numel() for p in model.parameters())
    return res


def procrustes_program(torch):
    rng = np.random.default_rng(1)
    _, _, p_mpjpe, _ = _metrics(torch)
    target = normal(torch, rng, 3, 8, 3)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    if np.linalg.det(q) < 0:
        q[:, 0] *= -1
    rot = torch.from_numpy(q.astype(np.float32))
    noise = normal(torch, rng, 3, 8, 3) * 0.05
    predicted = 1.7 * target @ rot + 0.3 + noise
    predicted[2] = target[2] * torch.tensor([-1.0, 1.0, 1.0])    # a mirror image: det -1
    err, R, a = p_mpjpe(predicted.clone(), target)
    res = {"err": err, "R": R, "a": a, "detR": torch.linalg.det(R)}
    # differentiable: the SVD's gradient flows into the predicted joints
    pred = predicted[:2].clone().requires_grad_(True)
    err2, _, _ = p_mpjpe(pred, target[:2])
    with pytest.raises(RuntimeError) as info:       # the SVD saved V before the sign fix
        err2.backward(retain_graph=True)
    res["error"] = [str(info.value).replace(torch.__name__ + ".", "lib.")]
    pred.grad = None
    err2, _, _ = p_mpjpe(pred, target[:2], in_place=False)
    err2.backward()
    res["err2"], res["grad"] = err2.detach(), pred.grad
    return res


def heatmap_program(torch):
    rng = np.random.default_rng(2)
    F = torch.nn.functional
    B, K, H, W = 2, 4, 8, 10

    def soft_argmax(heatmaps, beta=10.0):
        b, k, h, w = heatmaps.shape
        heatmaps = heatmaps.reshape((b, k, -1))
        heatmaps = F.softmax(heatmaps * beta, dim=2)
        heatmaps = heatmaps.reshape((b, k, h, w))
        accu_x = heatmaps.sum(dim=2)
        accu_y = heatmaps.sum(dim=3)
        accu_x = accu_x * torch.arange(w, dtype=torch.float32, device=heatmaps.device)
        accu_y = accu_y * torch.arange(h, dtype=torch.float32, device=heatmaps.device)[None]
        x = accu_x.sum(dim=2, keepdim=True)
        y = accu_y.sum(dim=2, keepdim=True)
        return torch.cat((x, y), dim=2), heatmaps

    def argmax_coords(heatmaps):           # the non-differentiable HRNet decode
        b, k, h, w = heatmaps.shape
        flat = heatmaps.reshape(b, k, -1)
        maxvals, idx = torch.max(flat, 2)
        preds = idx.unsqueeze(-1).repeat(1, 1, 2).float()
        preds[:, :, 0] = preds[:, :, 0] % w
        preds[:, :, 1] = torch.floor(preds[:, :, 1] / w)
        mask = maxvals.gt(0.0).unsqueeze(-1).repeat(1, 1, 2).float()
        return preds * mask, maxvals

    head = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                               torch.nn.ReLU(), torch.nn.Conv2d(8, K, 1))
    fill_(torch, head, rng, 0.3)
    img = normal(torch, rng, B, 3, H, W)
    gt = torch.from_numpy(np.stack([rng.uniform(0, W - 1, (B, K)),
                                    rng.uniform(0, H - 1, (B, K))], -1).astype(np.float32))
    vis = torch.tensor([[1, 1, 0, 1], [1, 0, 1, 1]], dtype=torch.float32).unsqueeze(-1)
    opt = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    res = {"losses": []}
    for _ in range(3):
        coords, probs = soft_argmax(head(img))
        loss = (F.l1_loss(coords, gt, reduction='none') * vis).sum() / vis.sum().clamp(min=1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["coords"], res["probs_sum"] = coords.detach(), probs.sum((2, 3)).detach()
    with torch.no_grad():
        hm = head(img)
        preds, maxvals = argmax_coords(hm)
    res["preds"], res["maxvals"] = preds, maxvals
    # gaussian target heatmaps (SimpleBaseline) and a weighted MSE
    xs = torch.arange(W, dtype=torch.float32)
    ys = torch.arange(H, dtype=torch.float32)[:, None]
    tgt = torch.exp(-((xs - gt[..., :1, None]) ** 2 + (ys - gt[..., 1:, None]) ** 2) / 2)
    res["target_hm"] = tgt
    res["hm_loss"] = 0.5 * F.mse_loss(hm * vis[..., None], tgt * vis[..., None])
    return res


def projection_program(torch):
    rng = np.random.default_rng(3)

    def perspective_projection(points, rotation, translation, focal_length, camera_center):
        batch_size = points.shape[0]
        K = torch.zeros([batch_size, 3, 3], device=points.device)
        K[:, 0, 0] = focal_length
        K[:, 1, 1] = focal_length
        K[:, 2, 2] = 1.
        K[:, :-1, -1] = camera_center
        points = torch.einsum('bij,bkj->bki', rotation, points)
        points = points + translation.unsqueeze(1)
        projected_points = points / points[:, :, -1].unsqueeze(-1)
        projected_points = torch.einsum('bij,bkj->bki', K, projected_points)
        return projected_points[:, :, :-1]

    def weak_perspective(X, camera):
        camera = camera.view(-1, 1, 3)
        X_trans = X[:, :, :2] + camera[:, :, 1:]
        shape = X_trans.shape
        return (camera[:, :, 0] * X_trans.view(shape[0], -1)).view(shape)

    def estimate_translation(S, joints_2d, focal_length=500., img_size=64.):
        # SPIN's closed-form camera translation, one weighted least squares
        num_joints = S.shape[0]
        f = np.array([focal_length, focal_length])
        center = np.array([img_size / 2., img_size / 2.])
        Z = np.reshape(np.tile(S[:, 2], (2, 1)).T, -1)
        XY = np.reshape(S[:, 0:2], -1)
        O_ = np.tile(center, num_joints)
        F_ = np.tile(f, num_joints)
        weight2 = np.reshape(np.tile(np.sqrt(np.ones(num_joints)), (2, 1)).T, -1)
        Q = np.array([F_ * np.tile(np.array([1, 0]), num_joints),
                      F_ * np.tile(np.array([0, 1]), num_joints),
                      O_ - np.reshape(joints_2d, -1)]).T
        c = (np.reshape(joints_2d, -1) - O_) * Z - F_ * XY
        W = np.diagflat(weight2)
        Q, c = np.dot(W, Q), np.dot(c, W)
        return np.linalg.solve(np.dot(Q.T, Q), np.dot(Q.T, c))

    B, N = 2, 7
    points = normal(torch, rng, B, N, 3) * 0.3
    cam_t = torch.nn.Parameter(torch.tensor([[0., 0., 5.], [0.1, -0.1, 6.]]))
    rotation = torch.eye(3).unsqueeze(0).expand(B, -1, -1)
    center = torch.full((B, 2), 32.)
    target_2d = normal(torch, rng, B, N, 2) * 5 + 32
    opt = torch.optim.Adam([cam_t], lr=0.1)
    res = {"losses": []}
    for _ in range(3):
        proj = perspective_projection(points, rotation, cam_t, 500., center)
        loss = torch.nn.functional.smooth_l1_loss(proj, target_2d, beta=2.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["proj"], res["cam_t"] = proj.detach(), cam_t.detach()
    cam = torch.tensor([[0.9, 0.1, -0.2], [1.1, 0.0, 0.3]], requires_grad=True)
    wp = weak_perspective(points, cam)
    wp.pow(2).sum().backward()
    res["weak"], res["cam_grad"] = wp.detach(), cam.grad
    # SPIN converts weak-perspective to a translation with the focal length
    pred_cam_t = torch.stack([cam[:, 1], cam[:, 2],
                              2 * 500. / (64. * cam[:, 0] + 1e-9)], dim=-1)
    res["pred_cam_t"] = pred_cam_t.detach()
    t_np = estimate_translation(points[0].numpy().astype(np.float64),
                                target_2d[0].numpy().astype(np.float64))
    res["t_closed"] = torch.from_numpy(t_np)
    return res


PROGRAMS = [videopose3d_program, procrustes_program, heatmap_program, projection_program]

TOLERANCES = {
    # float32 SVD backward: PyTorch's own gradient is 9e-7 off its float64 value there
    "procrustes_program": (1e-5, 3e-6),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
