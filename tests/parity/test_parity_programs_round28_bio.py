"""Biosignal classifiers written as their reference repositories write them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: EEGNet (braindecode
/ vlawhern style: temporal Conv2d, depthwise spatial Conv2d with a max-norm constraint applied by
``torch.renorm`` on ``weight.data``, separable Conv2d, BatchNorm2d with eps 1e-3, ELU, AvgPool2d,
a max-norm Linear clamped by ``renorm_`` under no_grad) and a 1-D ResNet for ECG (Hannun /
antonior92 style: Conv1d + BatchNorm1d residual blocks with max-pool + 1x1 skip downsampling,
class-weighted cross entropy from bincount, multi-label BCE with pos_weight, ReduceLROnPlateau)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def eegnet_program(torch):
    """EEGNet-4,2 on (batch, 1, channels, time) trials: the Conv2dWithConstraint subclass
    renorms its weight's data each forward, the classifier's max norm runs as an in-place
    ``renorm_`` after each Adam step; eval forward under no_grad; softmax probabilities."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2801)
    B, C, T, F1, D, F2, K = 4, 6, 32, 4, 2, 8, 3

    class Conv2dWithConstraint(nn.Conv2d):
        def __init__(self, *args, max_norm=1, **kwargs):
            self.max_norm = max_norm
            super().__init__(*args, **kwargs)

        def forward(self, x):
            self.weight.data = torch.renorm(self.weight.data, p=2, dim=0,
                                            maxnorm=self.max_norm)
            return super().forward(x)

    class EEGNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_temporal = nn.Conv2d(1, F1, (1, 9), stride=1, bias=False, padding=(0, 4))
            self.bnorm_temporal = nn.BatchNorm2d(F1, momentum=0.01, affine=True, eps=1e-3)
            self.conv_spatial = Conv2dWithConstraint(F1, F1 * D, (C, 1), max_norm=1,
                                                     stride=1, bias=False, groups=F1,
                                                     padding=(0, 0))
            self.bnorm_1 = nn.BatchNorm2d(F1 * D, momentum=0.01, affine=True, eps=1e-3)
            self.elu_1 = nn.ELU()
            self.pool_1 = nn.AvgPool2d(kernel_size=(1, 4), stride=(1, 4))
            self.drop_1 = nn.Dropout(p=0.0)
            self.conv_separable_depth = nn.Conv2d(F1 * D, F1 * D, (1, 5), stride=1, bias=False,
                                                  groups=F1 * D, padding=(0, 2))
            self.conv_separable_point = nn.Conv2d(F1 * D, F2, (1, 1), stride=1, bias=False,
                                                  padding=(0, 0))
            self.bnorm_2 = nn.BatchNorm2d(F2, momentum=0.01, affine=True, eps=1e-3)
            self.elu_2 = nn.ELU()
            self.pool_2 = nn.AvgPool2d(kernel_size=(1, 2), stride=(1, 2))
            self.classifier = nn.Linear(F2 * (T // 8), K)

        def forward(self, x):
            x = self.bnorm_temporal(self.conv_temporal(x))
            x = self.drop_1(self.pool_1(self.elu_1(self.bnorm_1(self.conv_spatial(x)))))
            x = self.conv_separable_point(self.conv_separable_depth(x))
            x = self.pool_2(self.elu_2(self.bnorm_2(x)))
            return self.classifier(x.flatten(start_dim=1))

    model = EEGNet()
    fill_(torch, model, rng, 0.5)
    x = normal(torch, rng, B, 1, C, T)
    y = torch.tensor([0, 2, 1, 2])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
    res = {"spatial_norms_before": model.conv_spatial.weight.flatten(1).norm(dim=1)}
    losses = []
    for _ in range(3):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.classifier.weight.renorm_(2, 0, 0.5)
        losses.append(loss.item())
    res["losses"] = losses
    res["spatial_norms_after"] = model.conv_spatial.weight.flatten(1).norm(dim=1)
    res["classifier_norms"] = model.classifier.weight.norm(dim=1)
    res["params"] = list(model.parameters())
    res["bn_stats"] = [model.bnorm_1.running_mean, model.bnorm_1.running_var,
                       model.bnorm_2.num_batches_tracked]
    model.eval()
    with torch.no_grad():
        probs = F.softmax(model(x), dim=1)
    res["probs"] = probs
    res["pred"] = probs.argmax(dim=1).tolist()
    res["renorm_shapes"] = [list(torch.renorm(model.conv_spatial.weight.detach(), 2, 0, 1.)
                                 .shape)]
    res["renorm_p1_dim1"] = torch.renorm(normal(torch, rng, 3, 4, 2), 1, 1, 0.7)
    res["renorm_inf"] = torch.renorm(normal(torch, rng, 3, 5), float("inf"), 0, 0.4)
    w = normal(torch, rng, 4, 3).requires_grad_()
    out = torch.renorm(w, 2, 0, 1.0)
    (out * normal(torch, rng, 4, 3)).sum().backward()
    res["renorm_grad"] = w.grad
    try:
        torch.renorm(w.detach(), 2, 0, -1.0)
    except RuntimeError as e:
        res["renorm_err"] = [str(e)]
    try:
        torch.renorm(w.detach(), 0, 0, 1.0)
    except RuntimeError as e:
        res["renorm_err_p"] = [str(e)]
    return res


def ecg_resnet_program(torch):
    """A 1-D residual ECG classifier (antonior92's ResBlk1d: skip = 1x1 conv of a max-pooled
    input, main path Conv1d-BN-ReLU-Dropout-Conv1d, post-add BN-ReLU) trained with class
    weights from ``bincount``, a multi-label head under BCEWithLogits(pos_weight), gradient
    clipping and ReduceLROnPlateau; eval metrics with sigmoid thresholds."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2802)
    B, leads, T, K = 6, 3, 64, 3

    class ResBlock1d(nn.Module):
        def __init__(self, n_in, n_out, downsample, kernel_size=5):
            super().__init__()
            padding = (kernel_size - 1) // 2
            self.conv1 = nn.Conv1d(n_in, n_out, kernel_size, padding=padding, bias=False)
            self.bn1 = nn.BatchNorm1d(n_out)
            self.relu = nn.ReLU()
            self.dropout1 = nn.Dropout(0.0)
            self.conv2 = nn.Conv1d(n_out, n_out, kernel_size, stride=downsample,
                                   padding=padding, bias=False)
            self.bn2 = nn.BatchNorm1d(n_out)
            self.dropout2 = nn.Dropout(0.0)
            skip = []
            if downsample > 1:
                skip += [nn.MaxPool1d(downsample, stride=downsample)]
            if n_in != n_out:
                skip += [nn.Conv1d(n_in, n_out, 1, bias=False)]
            self.skip_connection = nn.Sequential(*skip) if skip else None

        def forward(self, x, y):
            if self.skip_connection is not None:
                y = self.skip_connection(y)
            x = self.dropout1(self.relu(self.bn1(self.conv1(x))))
            x = self.conv2(x)
            x += y
            y = x
            x = self.dropout2(self.relu(self.bn2(x)))
            return x, y

    class ResNet1d(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv1d(leads, 8, 7, padding=3, bias=False, stride=1)
            self.bn1 = nn.BatchNorm1d(8)
            self.blocks = nn.ModuleList([ResBlock1d(8, 8, 2), ResBlock1d(8, 12, 2),
                                         ResBlock1d(12, 16, 4)])
            self.pool = nn.AdaptiveAvgPool1d(1)
            self.maxp = nn.AdaptiveMaxPool1d(1)
            self.lin = nn.Linear(32, K)
            self.multi = nn.Linear(32, 4)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            y = x
            for blk in self.blocks:
                x, y = blk(x, y)
            feats = torch.cat([self.pool(x), self.maxp(x)], dim=1).view(x.size(0), -1)
            return self.lin(feats), self.multi(feats)

    model = ResNet1d()
    fill_(torch, model, rng, 0.3)
    x = normal(torch, rng, B, leads, T)
    y = torch.tensor([0, 0, 0, 1, 2, 0])
    multi = torch.from_numpy((rng.random((B, 4)) < 0.3).astype(np.float32))
    counts = torch.bincount(y, minlength=K)
    weight = counts.sum() / (K * counts.float())
    pos = multi.sum(0)
    pos_weight = (B - pos) / pos.clamp(min=1)
    ce = nn.CrossEntropyLoss(weight=weight, label_smoothing=0.05)
    bce = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0)
    res = {"weight": weight, "pos_weight": pos_weight, "counts": counts.tolist()}
    losses, lrs, norms = [], [], []
    for step in range(4):
        model.train()
        opt.zero_grad()
        logits, multi_logits = model(x)
        loss = ce(logits, y) + bce(multi_logits, multi)
        loss.backward()
        norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
        opt.step()
        losses.append(loss.item())
        sched.step(1.0 if step < 2 else 2.0)
        lrs.append(opt.param_groups[0]["lr"])
    res["losses"], res["lrs"], res["norms"] = losses, lrs, norms
    res["params"] = list(model.parameters())
    model.eval()
    with torch.no_grad():
        logits, multi_logits = model(x)
        probs = torch.sigmoid(multi_logits)
        res["pred"] = logits.argmax(-1).tolist()
        res["multi_pred"] = (probs > 0.5).int().tolist()
        tp = ((probs > 0.5) & (multi > 0)).sum(0).float()
        res["recall"] = tp / multi.sum(0).clamp(min=1)
        res["ce_none"] = F.cross_entropy(logits, y, weight=weight, reduction="none")
        res["ce_ignore"] = F.cross_entropy(logits, y.masked_fill(y == 2, -100), weight=weight)
    return res


PROGRAMS = [eegnet_program, ecg_resnet_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 conv / batch-norm accumulation order over a few Adam steps
        "eegnet_program": (1e-4, 1e-5),
        "ecg_resnet_program": (1e-4, 1e-5),
    })
