"""Point-cloud programs written as their reference repositories write them in torch, run once
with `torch` bound to ember and once to PyTorch from the same NumPy data: PointNet (T-Nets
adding a Variable identity, the feature-transform orthogonality regulariser through bmm and a
matrix norm, StepLR), PointNet++ (farthest point sampling, ball query by masked assignment and
sort, 3-NN feature propagation) and DGCNN (knn by pairwise distances and topk, edge features
gathered by index arithmetic, smoothed cross entropy, cosine annealing). Sibling files: _3d_seg
(volumetric segmentation), _3d_flow (optical flow, super-resolution, stereo) and _3d_fixes."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def pointnet_program(torch):
    """fxia22/pointnet.pytorch: STN3d and STNkd add a flattened identity built with
    ``Variable(torch.from_numpy(...)).view(1, k*k).repeat(B, 1)``, the classifier takes
    log_softmax, the loss is nll_loss plus 0.001 times the feature-transform regulariser
    ``mean(norm(bmm(T, T^T) - I, dim=(1, 2)))``, Adam with StepLR, accuracy by
    ``pred.data.max(1)[1].eq(target.data).cpu().sum()``; then the segmentation head."""
    nn, F = torch.nn, torch.nn.functional
    Variable = torch.autograd.Variable
    rng = np.random.default_rng(2701)

    class STNkd(nn.Module):
        def __init__(self, k=3):
            super().__init__()
            self.conv1 = torch.nn.Conv1d(k, 16, 1)
            self.conv2 = torch.nn.Conv1d(16, 32, 1)
            self.fc1 = nn.Linear(32, 16)
            self.fc2 = nn.Linear(16, k * k)
            self.relu = nn.ReLU()
            self.bn1 = nn.BatchNorm1d(16)
            self.bn2 = nn.BatchNorm1d(32)
            self.bn3 = nn.BatchNorm1d(16)
            self.k = k

        def forward(self, x):
            batchsize = x.size()[0]
            x = F.relu(self.bn1(self.conv1(x)))
            x = F.relu(self.bn2(self.conv2(x)))
            x = torch.max(x, 2, keepdim=True)[0]
            x = x.view(-1, 32)
            x = F.relu(self.bn3(self.fc1(x)))
            x = self.fc2(x)
            iden = Variable(torch.from_numpy(np.eye(self.k).flatten().astype(np.float32))).view(
                1, self.k * self.k).repeat(batchsize, 1)
            if x.is_cuda:
                iden = iden.cuda()
            x = x + iden
            x = x.view(-1, self.k, self.k)
            return x

    class PointNetfeat(nn.Module):
        def __init__(self, global_feat=True, feature_transform=False):
            super().__init__()
            self.stn = STNkd(3)
            self.conv1 = torch.nn.Conv1d(3, 8, 1)
            self.conv2 = torch.nn.Conv1d(8, 16, 1)
            self.conv3 = torch.nn.Conv1d(16, 24, 1)
            self.bn1 = nn.BatchNorm1d(8)
            self.bn2 = nn.BatchNorm1d(16)
            self.bn3 = nn.BatchNorm1d(24)
            self.global_feat = global_feat
            self.feature_transform = feature_transform
            if self.feature_transform:
                self.fstn = STNkd(k=8)

        def forward(self, x):
            n_pts = x.size()[2]
            trans = self.stn(x)
            x = x.transpose(2, 1)
            x = torch.bmm(x, trans)
            x = x.transpose(2, 1)
            x = F.relu(self.bn1(self.conv1(x)))
            if self.feature_transform:
                trans_feat = self.fstn(x)
                x = x.transpose(2, 1)
                x = torch.bmm(x, trans_feat)
                x = x.transpose(2, 1)
            else:
                trans_feat = None
            pointfeat = x
            x = F.relu(self.bn2(self.conv2(x)))
            x = self.bn3(self.conv3(x))
            x = torch.max(x, 2, keepdim=True)[0]
            x = x.view(-1, 24)
            if self.global_feat:
                return x, trans, trans_feat
            x = x.view(-1, 24, 1).repeat(1, 1, n_pts)
            return torch.cat([x, pointfeat], 1), trans, trans_feat

    class PointNetCls(nn.Module):
        def __init__(self, k=2, feature_transform=False):
            super().__init__()
            self.feat = PointNetfeat(global_feat=True, feature_transform=feature_transform)
            self.fc1 = nn.Linear(24, 16)
            self.fc2 = nn.Linear(16, k)
            self.dropout = nn.Dropout(p=0.0)
            self.bn1 = nn.BatchNorm1d(16)
            self.relu = nn.ReLU()

        def forward(self, x):
            x, trans, trans_feat = self.feat(x)
            x = F.relu(self.bn1(self.dropout(self.fc1(x))))
            x = self.fc2(x)
            return F.log_softmax(x, dim=1), trans, trans_feat

    class PointNetDenseCls(nn.Module):
        def __init__(self, k=2, feature_transform=False):
            super().__init__()
            self.k = k
            self.feat = PointNetfeat(global_feat=False, feature_transform=feature_transform)
            self.conv1 = torch.nn.Conv1d(32, 16, 1)
            self.conv2 = torch.nn.Conv1d(16, self.k, 1)
            self.bn1 = nn.BatchNorm1d(16)

        def forward(self, x):
            batchsize = x.size()[0]
            n_pts = x.size()[2]
            x, trans, trans_feat = self.feat(x)
            x = F.relu(self.bn1(self.conv1(x)))
            x = self.conv2(x)
            x = x.transpose(2, 1).contiguous()
            x = F.log_softmax(x.view(-1, self.k), dim=-1)
            x = x.view(batchsize, n_pts, self.k)
            return x, trans, trans_feat

    def feature_transform_regularizer(trans):
        d = trans.size()[1]
        eye = torch.eye(d)[None, :, :]
        if trans.is_cuda:
            eye = eye.cuda()
        loss = torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - eye, dim=(1, 2)))
        return loss

    res = {}
    B, N, num_classes = 4, 12, 3
    classifier = PointNetCls(k=num_classes, feature_transform=True)
    fill_(torch, classifier, rng, 0.2)
    # eps 1e-5, not 1e-8: gradients that are zero up to rounding (biases before BatchNorm,
    # channels the max-pool never picks) would otherwise take Adam steps of about lr whose
    # sign is float32 noise, in either library
    optimizer = torch.optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999),
                                 eps=1e-5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    losses, correct, lrs = [], [], []
    for step in range(3):
        points = normal(torch, rng, B, N, 3)
        target = torch.from_numpy(rng.integers(0, num_classes, (B, 1)))
        target = target[:, 0]
        points = points.transpose(2, 1)
        optimizer.zero_grad()
        classifier = classifier.train()
        pred, trans, trans_feat = classifier(points)
        loss = F.nll_loss(pred, target)
        loss += feature_transform_regularizer(trans_feat) * 0.001
        loss.backward()
        if step == 0:
            res["grads"] = [p.grad.clone() for p in classifier.parameters()]
        optimizer.step()
        scheduler.step()
        pred_choice = pred.data.max(1)[1]
        correct.append(pred_choice.eq(target.data).cpu().sum().item())
        losses.append(loss.item())
        lrs.append(optimizer.param_groups[0]["lr"])
    classifier = classifier.eval()
    with torch.no_grad():
        pred, trans, _ = classifier(normal(torch, rng, B, 3, N))
    res.update(losses=losses, correct=correct, lrs=lrs, eval_pred=pred, eval_trans=trans,
               params=list(classifier.parameters()),
               running=[classifier.feat.bn3.running_mean, classifier.feat.bn3.running_var,
                        classifier.feat.bn3.num_batches_tracked])

    seg = PointNetDenseCls(k=num_classes, feature_transform=False)
    fill_(torch, seg, rng, 0.2)
    optimizer = torch.optim.Adam(seg.parameters(), lr=0.001, eps=1e-5)
    seg_losses = []
    for step in range(2):
        points = normal(torch, rng, B, N, 3).transpose(2, 1)
        target = torch.from_numpy(rng.integers(1, num_classes + 1, (B, N)))
        optimizer.zero_grad()
        pred, trans, trans_feat = seg(points)
        pred = pred.view(-1, num_classes)
        target = target.view(-1, 1)[:, 0] - 1
        loss = F.nll_loss(pred, target)
        loss.backward()
        optimizer.step()
        seg_losses.append(loss.item())
    res.update(seg_losses=seg_losses, seg_params=list(seg.parameters()),
               seg_flags=[trans_feat is None, pred.is_contiguous(), trans.requires_grad])
    return res


def _pointnet2_ops(torch):
    """The sampling and grouping functions of yanx27/Pointnet_Pointnet2_pytorch."""

    def square_distance(src, dst):
        B, N, _ = src.shape
        _, M, _ = dst.shape
        dist = -2 * torch.matmul(src, dst.permute(0, 2, 1))
        dist += torch.sum(src ** 2, -1).view(B, N, 1)
        dist += torch.sum(dst ** 2, -1).view(B, 1, M)
        return dist

    def index_points(points, idx):
        device = points.device
        B = points.shape[0]
        view_shape = list(idx.shape)
        view_shape[1:] = [1] * (len(view_shape) - 1)
        repeat_shape = list(idx.shape)
        repeat_shape[0] = 1
        batch_indices = torch.arange(B, dtype=torch.long).to(device).view(view_shape).repeat(
            repeat_shape)
        new_points = points[batch_indices, idx, :]
        return new_points

    def farthest_point_sample(xyz, npoint, farthest):
        device = xyz.device
        B, N, C = xyz.shape
        centroids = torch.zeros(B, npoint, dtype=torch.long).to(device)
        distance = torch.ones(B, N).to(device) * 1e10
        batch_indices = torch.arange(B, dtype=torch.long).to(device)
        for i in range(npoint):
            centroids[:, i] = farthest
            centroid = xyz[batch_indices, farthest, :].view(B, 1, 3)
            dist = torch.sum((xyz - centroid) ** 2, -1)
            mask = dist < distance
            distance[mask] = dist[mask]
            farthest = torch.max(distance, -1)[1]
        return centroids

    def query_ball_point(radius, nsample, xyz, new_xyz):
        device = xyz.device
        B, N, C = xyz.shape
        _, S, _ = new_xyz.shape
        group_idx = torch.arange(N, dtype=torch.long).to(device).view(1, 1, N).repeat([B, S, 1])
        sqrdists = square_distance(new_xyz, xyz)
        group_idx[sqrdists > radius ** 2] = N
        group_idx = group_idx.sort(dim=-1)[0][:, :, :nsample]
        group_first = group_idx[:, :, 0].view(B, S, 1).repeat([1, 1, nsample])
        mask = group_idx == N
        group_idx[mask] = group_first[mask]
        return group_idx

    return square_distance, index_points, farthest_point_sample, query_ball_point


def pointnet2_program(torch):
    """PointNet++ SSG classification and a feature-propagation head: set abstraction layers
    (FPS from a fixed start, ball query, relative coordinates concatenated to the grouped
    features, Conv2d+BatchNorm2d MLP, max over the neighbourhood), a group-all layer, and
    three-nearest-neighbour inverse-distance interpolation sorted with ``dists.sort``."""
    nn, F = torch.nn, torch.nn.functional
    square_distance, index_points, farthest_point_sample, query_ball_point = \
        _pointnet2_ops(torch)
    rng = np.random.default_rng(2702)

    def sample_and_group(npoint, radius, nsample, xyz, points, start):
        B, N, C = xyz.shape
        S = npoint
        fps_idx = farthest_point_sample(xyz, npoint, start)
        new_xyz = index_points(xyz, fps_idx)
        idx = query_ball_point(radius, nsample, xyz, new_xyz)
        grouped_xyz = index_points(xyz, idx)
        grouped_xyz_norm = grouped_xyz - new_xyz.view(B, S, 1, C)
        if points is not None:
            grouped_points = index_points(points, idx)
            new_points = torch.cat([grouped_xyz_norm, grouped_points], dim=-1)
        else:
            new_points = grouped_xyz_norm
        return new_xyz, new_points, fps_idx, idx

    def sample_and_group_all(xyz, points):
        device = xyz.device
        B, N, C = xyz.shape
        new_xyz = torch.zeros(B, 1, C).to(device)
        grouped_xyz = xyz.view(B, 1, N, C)
        if points is not None:
            new_points = torch.cat([grouped_xyz, points.view(B, 1, N, -1)], dim=-1)
        else:
            new_points = grouped_xyz
        return new_xyz, new_points

    class PointNetSetAbstraction(nn.Module):
        def __init__(self, npoint, radius, nsample, in_channel, mlp, group_all):
            super().__init__()
            self.npoint = npoint
            self.radius = radius
            self.nsample = nsample
            self.mlp_convs = nn.ModuleList()
            self.mlp_bns = nn.ModuleList()
            last_channel = in_channel
            for out_channel in mlp:
                self.mlp_convs.append(nn.Conv2d(last_channel, out_channel, 1))
                self.mlp_bns.append(nn.BatchNorm2d(out_channel))
                last_channel = out_channel
            self.group_all = group_all

        def forward(self, xyz, points, start=None):
            xyz = xyz.permute(0, 2, 1)
            if points is not None:
                points = points.permute(0, 2, 1)
            if self.group_all:
                new_xyz, new_points = sample_and_group_all(xyz, points)
                self.last_idx = None
            else:
                new_xyz, new_points, fps, idx = sample_and_group(
                    self.npoint, self.radius, self.nsample, xyz, points, start)
                self.last_idx = (fps, idx)
            new_points = new_points.permute(0, 3, 2, 1)
            for i, conv in enumerate(self.mlp_convs):
                bn = self.mlp_bns[i]
                new_points = F.relu(bn(conv(new_points)))
            new_points = torch.max(new_points, 2)[0]
            new_xyz = new_xyz.permute(0, 2, 1)
            return new_xyz, new_points

    class PointNetFeaturePropagation(nn.Module):
        def __init__(self, in_channel, mlp):
            super().__init__()
            self.mlp_convs = nn.ModuleList()
            self.mlp_bns = nn.ModuleList()
            last_channel = in_channel
            for out_channel in mlp:
                self.mlp_convs.append(nn.Conv1d(last_channel, out_channel, 1))
                self.mlp_bns.append(nn.BatchNorm1d(out_channel))
                last_channel = out_channel

        def forward(self, xyz1, xyz2, points1, points2):
            xyz1 = xyz1.permute(0, 2, 1)
            xyz2 = xyz2.permute(0, 2, 1)
            points2 = points2.permute(0, 2, 1)
            B, N, C = xyz1.shape
            _, S, _ = xyz2.shape
            if S == 1:
                interpolated_points = points2.repeat(1, N, 1)
            else:
                dists = square_distance(xyz1, xyz2)
                dists, idx = dists.sort(dim=-1)
                dists, idx = dists[:, :, :3], idx[:, :, :3]
                dist_recip = 1.0 / (dists + 1e-8)
                norm = torch.sum(dist_recip, dim=2, keepdim=True)
                weight = dist_recip / norm
                interpolated_points = torch.sum(
                    index_points(points2, idx) * weight.view(B, N, 3, 1), dim=2)
            if points1 is not None:
                points1 = points1.permute(0, 2, 1)
                new_points = torch.cat([points1, interpolated_points], dim=-1)
            else:
                new_points = interpolated_points
            new_points = new_points.permute(0, 2, 1)
            for i, conv in enumerate(self.mlp_convs):
                bn = self.mlp_bns[i]
                new_points = F.relu(bn(conv(new_points)))
            return new_points

    class get_model(nn.Module):
        def __init__(self, num_class):
            super().__init__()
            self.sa1 = PointNetSetAbstraction(8, 0.8, 4, 3 + 3, [8, 8], False)
            self.sa2 = PointNetSetAbstraction(None, None, None, 8 + 3, [16], True)
            self.fp = PointNetFeaturePropagation(8 + 3, [8])
            self.fc1 = nn.Linear(16, 8)
            self.bn1 = nn.BatchNorm1d(8)
            self.drop1 = nn.Dropout(0.0)
            self.fc2 = nn.Linear(8, num_class)
            self.seg = nn.Conv1d(8, num_class, 1)

        def forward(self, xyz, start):
            B, _, _ = xyz.shape
            norm = xyz[:, 3:, :]
            xyz = xyz[:, :3, :]
            l1_xyz, l1_points = self.sa1(xyz, norm, start)
            l2_xyz, l2_points = self.sa2(l1_xyz, l1_points)
            x = l2_points.view(B, 16)
            x = self.drop1(F.relu(self.bn1(self.fc1(x))))
            x = self.fc2(x)
            x = F.log_softmax(x, -1)
            l0_points = self.fp(xyz, l1_xyz, xyz, l1_points)
            seg = F.log_softmax(self.seg(l0_points), dim=1).permute(0, 2, 1)
            return x, seg, l2_points

    B, N, num_class = 3, 16, 4
    model = get_model(num_class)
    fill_(torch, model, rng, 0.3)
    # eps 1e-5 for the reason pointnet_program gives
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, betas=(0.9, 0.999), eps=1e-05,
                                 weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    res = {"losses": [], "fps": [], "ball": [], "lrs": []}
    for step in range(3):
        points = normal(torch, rng, B, N, 6)
        points[:, :, 0:3] = points[:, :, 0:3] * 0.5
        target = torch.tensor(rng.integers(0, num_class, B))
        seg_target = torch.tensor(rng.integers(0, num_class, (B, N)))
        start = torch.tensor(rng.integers(0, N, B))
        points = points.transpose(2, 1)
        optimizer.zero_grad()
        model = model.train()
        pred, seg, trans_feat = model(points, start)
        loss = F.nll_loss(pred, target.long()) + F.nll_loss(
            seg.reshape(-1, num_class), seg_target.view(-1))
        loss.backward()
        optimizer.step()
        scheduler.step()
        fps, idx = model.sa1.last_idx
        res["fps"] += fps.flatten().tolist()
        res["ball"] += idx.flatten().tolist()
        res["losses"].append(loss.item())
        res["lrs"].append(scheduler.get_last_lr()[0])
    res["params"] = list(model.parameters())
    res["dtypes"] = [str(t.dtype).rsplit(".", 1)[-1] for t in (fps, idx, trans_feat)]
    return res


def dgcnn_program(torch):
    """WangYueFt/dgcnn: knn from ``-xx - inner - xx^T`` and topk, edge features through
    ``idx + arange(B).view(-1, 1, 1) * N`` into a flattened ``x.view(B*N, -1)[idx, :]``,
    EdgeConv Conv2d + LeakyReLU + max over k, adaptive max and avg pool1d, label-smoothed
    cross entropy from ``zeros_like(pred).scatter(1, gold.view(-1, 1), 1)``, SGD with momentum
    and CosineAnnealingLR, eval with ``preds = logits.max(dim=1)[1]``."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2703)

    def knn(x, k):
        inner = -2 * torch.matmul(x.transpose(2, 1), x)
        xx = torch.sum(x ** 2, dim=1, keepdim=True)
        pairwise_distance = -xx - inner - xx.transpose(2, 1)
        idx = pairwise_distance.topk(k=k, dim=-1)[1]
        return idx

    def get_graph_feature(x, k=4, idx=None):
        batch_size = x.size(0)
        num_points = x.size(2)
        x = x.view(batch_size, -1, num_points)
        if idx is None:
            idx = knn(x, k=k)
        device = torch.device("cpu")
        idx_base = torch.arange(0, batch_size, device=device).view(-1, 1, 1) * num_points
        idx = idx + idx_base
        idx = idx.view(-1)
        _, num_dims, _ = x.size()
        x = x.transpose(2, 1).contiguous()
        feature = x.view(batch_size * num_points, -1)[idx, :]
        feature = feature.view(batch_size, num_points, k, num_dims)
        x = x.view(batch_size, num_points, 1, num_dims).repeat(1, 1, k, 1)
        feature = torch.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()
        return feature

    class DGCNN(nn.Module):
        def __init__(self, k=4, emb_dims=16, output_channels=5):
            super().__init__()
            self.k = k
            self.bn1 = nn.BatchNorm2d(8)
            self.bn2 = nn.BatchNorm2d(8)
            self.bn5 = nn.BatchNorm1d(emb_dims)
            self.conv1 = nn.Sequential(nn.Conv2d(6, 8, kernel_size=1, bias=False), self.bn1,
                                       nn.LeakyReLU(negative_slope=0.2))
            self.conv2 = nn.Sequential(nn.Conv2d(8 * 2, 8, kernel_size=1, bias=False),
                                       self.bn2, nn.LeakyReLU(negative_slope=0.2))
            self.conv5 = nn.Sequential(nn.Conv1d(16, emb_dims, kernel_size=1, bias=False),
                                       self.bn5, nn.LeakyReLU(negative_slope=0.2))
            self.linear1 = nn.Linear(emb_dims * 2, 12, bias=False)
            self.bn6 = nn.BatchNorm1d(12)
            self.dp1 = nn.Dropout(p=0.0)
            self.linear3 = nn.Linear(12, output_channels)

        def forward(self, x):
            batch_size = x.size(0)
            x = get_graph_feature(x, k=self.k)
            x = self.conv1(x)
            x1 = x.max(dim=-1, keepdim=False)[0]
            x = get_graph_feature(x1, k=self.k)
            x = self.conv2(x)
            x2 = x.max(dim=-1, keepdim=False)[0]
            x = torch.cat((x1, x2), dim=1)
            x = self.conv5(x)
            x1 = F.adaptive_max_pool1d(x, 1).view(batch_size, -1)
            x2 = F.adaptive_avg_pool1d(x, 1).view(batch_size, -1)
            x = torch.cat((x1, x2), 1)
            x = F.leaky_relu(self.bn6(self.linear1(x)), negative_slope=0.2)
            x = self.dp1(x)
            x = self.linear3(x)
            return x

    def cal_loss(pred, gold, smoothing=True):
        gold = gold.contiguous().view(-1)
        if smoothing:
            eps = 0.2
            n_class = pred.size(1)
            one_hot = torch.zeros_like(pred).scatter(1, gold.view(-1, 1), 1)
            one_hot = one_hot * (1 - eps) + (1 - one_hot) * eps / (n_class - 1)
            log_prb = F.log_softmax(pred, dim=1)
            loss = -(one_hot * log_prb).sum(dim=1).mean()
        else:
            loss = F.cross_entropy(pred, gold, reduction="mean")
        return loss

    model = DGCNN()
    fill_(torch, model, rng, 0.3)
    model = nn.DataParallel(model) if False else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 4, eta_min=0.001)
    res = {"losses": [], "lrs": [], "knn": []}
    B, N = 3, 10
    for epoch in range(3):
        data = normal(torch, rng, B, N, 3)
        label = torch.tensor(rng.integers(0, 5, (B, 1)))
        data, label = data, label.squeeze()
        data = data.permute(0, 2, 1)
        model.train()
        opt.zero_grad()
        logits = model(data)
        loss = cal_loss(logits, label)
        loss.backward()
        if epoch == 0:
            res["grads"] = [p.grad.clone() for p in model.parameters()]
        opt.step()
        scheduler.step()
        preds = logits.max(dim=1)[1]
        res["losses"].append(loss.item())
        res["lrs"].append(opt.param_groups[0]["lr"])
        res["knn"] += knn(data, 4).flatten().tolist()
        res.setdefault("train_true", []).append(label.cpu().numpy().tolist()[0])
        res.setdefault("train_pred", []).append(preds.detach().cpu().numpy().tolist()[0])
    model.eval()
    with torch.no_grad():
        res["eval_logits"] = model(normal(torch, rng, B, 3, N))
    res["params"] = list(model.parameters())
    res["momentum"] = [opt.state[p]["momentum_buffer"] for p in model.parameters()]
    res["cross_entropy"] = [cal_loss(res["eval_logits"], label, smoothing=False).item()]
    return res


PROGRAMS = [pointnet_program, pointnet2_program, dgcnn_program]


# Each of these agrees at 1e-5 in its step-0 gradients; later steps differ by float32
# accumulation order, amplified by BatchNorm over 3-4 clouds, max-pooling and Adam's
# normalised steps: about as much as PyTorch differs from itself run on 1 thread instead of
# several (PointNet's parameters by 1e-4, PointNet++'s results by 4e-6), with no bias
TOLERANCES = {"pointnet_program": (1e-4, 2e-4), "pointnet2_program": (1e-4, 1e-5),
              "dgcnn_program": (1e-4, 2e-6)}


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
