"""Self-supervised and metric learning written as in their reference repositories, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: BYOL
(EMA target through torch._foreach_mul_/_foreach_add_ and lerp_, stop-gradient, symmetric
normalised regression loss) and SimSiam; DINO (multi-crop wrapper over two resolutions,
centring buffer, sharpened teacher softmax, old-style weight-normed last layer frozen for the
first epoch, per-parameter clipping and clip_grad_norm_ with error_if_nonfinite/foreach,
hand-built cosine schedules, KoLeo, position-embedding interpolation); Barlow Twins and
VICReg (off-diagonal views, BatchNorm1d(affine=False), a LARS Optimizer subclass, a VICReg
run in bfloat16); MAE (argsort-of-argsort masking, gather with ids_restore, mask tokens,
sin-cos position tables, patchify/unpatchify by einsum, normalised-pixel loss); metric
learning (ArcFace/CosFace heads, insightface's in-place arccos margin, batch-hard and
batch-all triplet mining, the built-in triplet, cosine-embedding and ranking losses,
pytorch-metric-learning's uint8 pair masks, SupCon, recall@k and mAP). MAE and metric
learning are in test_parity_programs_round23_self_supervised_metric.py; what the programs
found is pinned in test_parity_programs_round23_self_supervised_fixes.py."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, warnings_of
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def byol_program(torch):
    """BYOL with an EMA target and SimSiam with a shared encoder; BatchNorm1d MLP heads."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2301)
    res = {}

    def mlp(i, h, o, last_bn=False):
        layers = [nn.Linear(i, h, bias=False), nn.BatchNorm1d(h), nn.ReLU(inplace=True),
                  nn.Linear(h, o)]
        if last_bn:
            layers.append(nn.BatchNorm1d(o, affine=False))
        return nn.Sequential(*layers)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.pool = nn.AdaptiveAvgPool2d(1)

        def forward(self, x):
            return torch.flatten(self.pool(F.relu(self.bn(self.conv(x)))), 1)

    online = nn.ModuleDict({"encoder": Encoder(), "projector": mlp(8, 16, 6)})
    predictor = mlp(6, 16, 6)
    fill_(torch, online, rng)
    fill_(torch, predictor, rng)
    target = copy.deepcopy(online)
    for p in target.parameters():
        p.requires_grad_(False)
    res["target_requires_grad"] = [any(p.requires_grad for p in target.parameters())]

    def regression_loss(p, z):
        p = F.normalize(p, dim=-1, p=2)
        z = F.normalize(z, dim=-1, p=2)
        return 2 - 2 * (p * z).sum(dim=-1)

    params = list(online.parameters()) + list(predictor.parameters())
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)
    images = normal(torch, rng, 6, 3, 8, 8)
    flips = normal(torch, rng, 4, 6, 1, 1, 1)
    noise = normal(torch, rng, 4, 6, 3, 8, 8)
    res["loss"], res["tau"] = [], []
    base_tau, steps = 0.99, 4
    for step in range(steps):
        v1 = images + 0.1 * noise[step]
        v2 = torch.where(flips[step] > 0, images.flip(-1), images) * 0.9
        o1 = predictor(online["projector"](online["encoder"](v1)))
        o2 = predictor(online["projector"](online["encoder"](v2)))
        with torch.no_grad():
            t1 = target["projector"](target["encoder"](v1))
            t2 = target["projector"](target["encoder"](v2))
        loss = (regression_loss(o1, t2.detach()) + regression_loss(o2, t1.detach())).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tau = 1 - (1 - base_tau) * (np.cos(np.pi * step / steps) + 1) / 2
        res["tau"].append(float(tau))
        with torch.no_grad():
            o_params = list(online.parameters())
            t_params = list(target.parameters())
            torch._foreach_mul_(t_params, tau)
            torch._foreach_add_(t_params, o_params, alpha=1 - tau)
            for tb, ob in zip(target.buffers(), online.buffers()):
                tb.copy_(ob)
        res["loss"].append(loss.item())
    res["target"] = [p.clone() for p in target.parameters()]
    res["online"] = [p.detach().clone() for p in online.parameters()]
    res["running"] = [b.float() for b in target.buffers()]
    res["momentum_buf"] = [opt.state[p]["momentum_buffer"] for p in params[:3]]

    # lerp_ and _foreach_lerp_ forms of the same EMA
    a = [p.detach().clone() for p in target.parameters()]
    b = [p.detach().clone() for p in target.parameters()]
    with torch.no_grad():
        for t, o in zip(a, online.parameters()):
            t.lerp_(o, 0.1)
        torch._foreach_lerp_(b, list(online.parameters()), 0.1)
    res["lerp"] = a[:3]
    res["foreach_lerp"] = b[:3]
    with torch.no_grad():
        c = [p.detach().clone() for p in target.parameters()]
        torch._foreach_mul_(c, 0.9)
        torch._foreach_add_(c, torch._foreach_mul(list(online.parameters()), 0.1))
    res["foreach_mul_add"] = c[:3]

    # SimSiam: one encoder, stop-gradient on z, negative cosine similarity
    encoder = nn.Sequential(Encoder(), mlp(8, 16, 6, last_bn=True))
    pred = nn.Sequential(nn.Linear(6, 4, bias=False), nn.BatchNorm1d(4), nn.ReLU(),
                         nn.Linear(4, 6))
    fill_(torch, encoder, rng)
    fill_(torch, pred, rng)
    opt = torch.optim.SGD([{"params": encoder.parameters()},
                           {"params": pred.parameters(), "fix_lr": True}], lr=0.05)
    crit = nn.CosineSimilarity(dim=1)
    res["simsiam_loss"], res["std"] = [], []
    for step in range(3):
        x1 = images + 0.1 * noise[step]
        x2 = images - 0.1 * noise[step + 1]
        z1, z2 = encoder(x1), encoder(x2)
        p1, p2 = pred(z1), pred(z2)
        loss = -(crit(p1, z2.detach()).mean() + crit(p2, z1.detach()).mean()) * 0.5
        opt.zero_grad()
        loss.backward()
        opt.step()
        for g in opt.param_groups:
            g["lr"] = 0.05 if g.get("fix_lr") else 0.05 * 0.5 * (1 + np.cos(np.pi * (step + 1) / 3))
        res["simsiam_loss"].append(loss.item())
        # collapse monitor: std of l2-normalised outputs
        res["std"].append(F.normalize(z1.detach(), dim=1).std(dim=0).mean().item())
    res["simsiam_grad"] = [p.grad for p in pred.parameters()]
    res["simsiam_lr"] = [g["lr"] for g in opt.param_groups]
    res["cos_eps"] = F.cosine_similarity(torch.zeros(2, 3), torch.ones(2, 3), dim=1, eps=1e-8)
    return res


def dino_program(torch):
    """DINO: multi-crop student/teacher, centering, temperature sharpening, weight-normed last
    layer frozen for the first step, per-parameter clipping, hand-built cosine schedules."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2302)
    res = {}

    class DINOHead(nn.Module):
        def __init__(self, in_dim, out_dim, hidden=16, bottleneck=8):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(),
                                     nn.Linear(hidden, bottleneck))
            self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck, out_dim, bias=False))
            self.last_layer.weight_g.data.fill_(1)
            self.last_layer.weight_g.requires_grad = False

        def forward(self, x):
            x = self.mlp(x)
            x = F.normalize(x, dim=-1, p=2)
            return self.last_layer(x)

    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3, stride=2, padding=1)
            self.norm = nn.LayerNorm(6)

        def forward(self, x):
            x = self.conv(x).flatten(2).transpose(1, 2)        # (B, tokens, 6)
            return self.norm(x).mean(1)

    class MultiCropWrapper(nn.Module):
        def __init__(self, backbone, head):
            super().__init__()
            self.backbone, self.head = backbone, head

        def forward(self, x):
            if not isinstance(x, list):
                x = [x]
            idx_crops = torch.cumsum(torch.unique_consecutive(
                torch.tensor([inp.shape[-1] for inp in x]), return_counts=True)[1], 0)
            start_idx, output = 0, torch.empty(0).to(x[0].device)
            for end_idx in idx_crops:
                _out = self.backbone(torch.cat(x[start_idx:end_idx]))
                output = torch.cat((output, _out))
                start_idx = end_idx
            return self.head(output)

    out_dim = 10
    student = MultiCropWrapper(Backbone(), DINOHead(6, out_dim))
    fill_(torch, [p for p in student.parameters() if p.requires_grad], rng)
    teacher = MultiCropWrapper(Backbone(), DINOHead(6, out_dim))
    res["load"] = [str(teacher.load_state_dict(student.state_dict()))]
    for p in teacher.parameters():
        p.requires_grad = False
    res["state_keys"] = sorted(student.state_dict().keys())

    class DINOLoss(nn.Module):
        def __init__(self, out_dim, ncrops, warmup_teacher_temp, teacher_temp,
                     warmup_epochs, nepochs, student_temp=0.1, center_momentum=0.9):
            super().__init__()
            self.student_temp = student_temp
            self.center_momentum = center_momentum
            self.ncrops = ncrops
            self.register_buffer("center", torch.zeros(1, out_dim))
            self.teacher_temp_schedule = np.concatenate((
                np.linspace(warmup_teacher_temp, teacher_temp, warmup_epochs),
                np.ones(nepochs - warmup_epochs) * teacher_temp))

        def forward(self, student_output, teacher_output, epoch):
            student_out = student_output / self.student_temp
            student_out = student_out.chunk(self.ncrops)
            temp = self.teacher_temp_schedule[epoch]
            teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1)
            teacher_out = teacher_out.detach().chunk(2)
            total_loss, n_loss_terms = 0, 0
            for iq, q in enumerate(teacher_out):
                for v in range(len(student_out)):
                    if v == iq:
                        continue
                    loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                    total_loss += loss.mean()
                    n_loss_terms += 1
            total_loss /= n_loss_terms
            self.update_center(teacher_output)
            return total_loss

        @torch.no_grad()
        def update_center(self, teacher_output):
            batch_center = torch.sum(teacher_output, dim=0, keepdim=True)
            batch_center = batch_center / len(teacher_output)
            self.center = self.center * self.center_momentum + batch_center * (
                1 - self.center_momentum)

    def cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs=0,
                         start_warmup_value=0):
        warmup_schedule = np.array([])
        warmup_iters = warmup_epochs * niter_per_ep
        if warmup_epochs > 0:
            warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters)
        iters = np.arange(epochs * niter_per_ep - warmup_iters)
        schedule = final_value + 0.5 * (base_value - final_value) * (
            1 + np.cos(np.pi * iters / len(iters)))
        return np.concatenate((warmup_schedule, schedule))

    def get_params_groups(model):
        regularized, not_regularized = [], []
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            if name.endswith(".bias") or len(param.shape) == 1:
                not_regularized.append(param)
            else:
                regularized.append(param)
        return [{"params": regularized}, {"params": not_regularized, "weight_decay": 0.0}]

    def clip_gradients(model, clip):
        norms = []
        for name, p in model.named_parameters():
            if p.grad is not None:
                param_norm = p.grad.data.norm(2)
                norms.append(param_norm.item())
                clip_coef = clip / (param_norm + 1e-6)
                if clip_coef < 1:
                    p.grad.data.mul_(clip_coef)
        return norms

    def cancel_gradients_last_layer(epoch, model, freeze_last_layer):
        if epoch >= freeze_last_layer:
            return
        for n, p in model.named_parameters():
            if "last_layer" in n:
                p.grad = None

    epochs, niter = 3, 2
    ncrops = 4
    dino_loss = DINOLoss(out_dim, ncrops, 0.04, 0.07, 2, epochs)
    opt = torch.optim.AdamW(get_params_groups(student))
    lr_schedule = cosine_scheduler(0.01, 1e-4, epochs, niter, warmup_epochs=1)
    wd_schedule = cosine_scheduler(0.04, 0.4, epochs, niter)
    momentum_schedule = cosine_scheduler(0.996, 1, epochs, niter)
    res["schedules"] = [lr_schedule, wd_schedule, momentum_schedule]
    data = normal(torch, rng, epochs * niter, 4, 3, 12, 12)
    res["loss"], res["norms"], res["center"] = [], [], []
    for epoch in range(epochs):
        for it_in_ep in range(niter):
            it = epoch * niter + it_in_ep
            for i, pg in enumerate(opt.param_groups):
                pg["lr"] = lr_schedule[it]
                if i == 0:
                    pg["weight_decay"] = wd_schedule[it]
            img = data[it]
            globals_ = [img, img.flip(-1)]
            crops = [F.interpolate(img[:, :, 2:10, 2:10], size=(6, 6), mode="bilinear",
                                   align_corners=False),
                     F.interpolate(img[:, :, :9, 3:], scale_factor=2 / 3, mode="bicubic",
                                   antialias=True)]
            teacher_output = teacher(globals_)
            student_output = student(globals_ + crops)
            loss = dino_loss(student_output, teacher_output, epoch)
            if not math.isfinite(loss.item()):
                raise RuntimeError("loss is not finite")
            opt.zero_grad()
            loss.backward()
            res["norms"].append(clip_gradients(student, 0.5))
            cancel_gradients_last_layer(epoch, student, 1)
            opt.step()
            with torch.no_grad():
                m = momentum_schedule[it]
                for param_q, param_k in zip(student.parameters(), teacher.parameters()):
                    param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)
            res["loss"].append(loss.item())
            res["center"].append(dino_loss.center.clone())
    res["last_layer_v"] = student.head.last_layer.weight_v
    res["teacher_last"] = teacher.head.last_layer.weight
    res["teacher"] = [p.clone() for p in teacher.parameters()]
    res["student"] = [p.detach().clone() for p in student.parameters()]
    res["g_frozen"] = [student.head.last_layer.weight_g.grad is None]

    # the parametrization form of the weight-normed last layer survives deepcopy
    head = nn.utils.parametrizations.weight_norm(nn.Linear(8, out_dim, bias=False))
    with torch.no_grad():
        head.parametrizations.weight.original0.fill_(1)
        head.parametrizations.weight.original1.copy_(student.head.last_layer.weight_v)
    head.parametrizations.weight.original0.requires_grad = False
    twin = copy.deepcopy(head)
    z = F.normalize(normal(torch, rng, 3, 8), dim=-1)
    res["parametrized_head"] = [twin(z), head.weight, student.head.last_layer(z)]
    res["parametrized_keys"] = sorted(twin.state_dict())

    # KoLeo regulariser (DINOv2): nearest neighbours from a strided diagonal fill
    feats = normal(torch, rng, 8, 8).requires_grad_()
    xn = F.normalize(feats, eps=1e-8, p=2, dim=-1)
    with torch.no_grad():
        dots = torch.mm(xn, xn.t())
        n = xn.shape[0]
        dots.view(-1)[:: (n + 1)].fill_(-1)
        _, nn_idx = torch.max(dots, dim=1)
    koleo = -torch.log(nn.PairwiseDistance(2, eps=1e-8)(xn, xn[nn_idx]) + 1e-8).mean()
    koleo.backward()
    res["koleo"] = [koleo, feats.grad]
    res["koleo_idx"] = nn_idx

    # position embeddings interpolated to a new grid, as DINO's interpolate_pos_encoding
    pos = normal(torch, rng, 1, 1 + 16, 6)
    class_pos, patch_pos = pos[:, 0], pos[:, 1:]
    w0, h0 = 5 + 0.1, 3 + 0.1
    patch_pos = F.interpolate(patch_pos.reshape(1, 4, 4, 6).permute(0, 3, 1, 2),
                              scale_factor=(w0 / math.sqrt(16), h0 / math.sqrt(16)),
                              mode="bicubic")
    res["pos_shape"] = list(patch_pos.shape)
    patch_pos = patch_pos.permute(0, 2, 3, 1).view(1, -1, 6)
    res["pos_interp"] = torch.cat((class_pos.unsqueeze(0), patch_pos), dim=1)
    res["adam_steps"] = [float(opt.state[p]["step"]) for p in student.parameters()
                         if p in opt.state]

    # torch.nn.utils.clip_grad_norm_ with error_if_nonfinite and foreach
    tn = torch.nn.utils.clip_grad_norm_(student.parameters(), max_norm=0.1, norm_type=2.0,
                                        error_if_nonfinite=True, foreach=True)
    res["total_norm"] = tn
    res["clipped"] = [p.grad.clone() for p in student.parameters() if p.grad is not None]
    tn_inf = torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0, norm_type="inf")
    res["total_norm_inf"] = tn_inf
    nrm = torch.nn.utils.get_total_norm([p.grad for p in student.parameters()
                                          if p.grad is not None], 2.0)
    res["get_total_norm"] = nrm
    first = next(p for p in student.parameters() if p.grad is not None)
    first.grad[0].fill_(float("nan"))
    try:
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0, error_if_nonfinite=True)
        res["nonfinite"] = ["no error"]
    except RuntimeError as e:
        res["nonfinite"] = [str(e).split(".")[0]]
    return res


def lars_class(torch):
    """Barlow Twins' LARS (facebookresearch/barlowtwins): the trust ratio and weight decay
    skipped by filters (biases and norms), heavy-ball momentum (shared by round 29's LARS)."""
    class LARS(torch.optim.Optimizer):
        def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001,
                     weight_decay_filter=None, lars_adaptation_filter=None):
            defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta,
                            weight_decay_filter=weight_decay_filter,
                            lars_adaptation_filter=lars_adaptation_filter)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for g in self.param_groups:
                for p in g["params"]:
                    dp = p.grad
                    if dp is None:
                        continue
                    if g["weight_decay_filter"] is None or not g["weight_decay_filter"](p):
                        dp = dp.add(p, alpha=g["weight_decay"])
                    if g["lars_adaptation_filter"] is None or not g["lars_adaptation_filter"](p):
                        param_norm = torch.norm(p)
                        update_norm = torch.norm(dp)
                        one = torch.ones_like(param_norm)
                        q = torch.where(param_norm > 0.,
                                        torch.where(update_norm > 0,
                                                    (g["eta"] * param_norm / update_norm), one),
                                        one)
                        dp = dp.mul(q)
                    param_state = self.state[p]
                    if "mu" not in param_state:
                        param_state["mu"] = torch.zeros_like(p)
                    mu = param_state["mu"]
                    mu.mul_(g["momentum"]).add_(dp)
                    p.add_(mu, alpha=-g["lr"])
            return loss
    return LARS


def barlow_vicreg_program(torch):
    """Barlow Twins and VICReg losses on a shared backbone, trained with a LARS optimiser
    written as an Optimizer subclass that excludes biases and norms from adaptation."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2303)
    res = {}

    def off_diagonal(x):
        n, m = x.shape
        assert n == m
        return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

    LARS = lars_class(torch)

    def exclude_bias_and_norm(p):
        return p.ndim == 1

    class BarlowTwins(nn.Module):
        def __init__(self, lambd=0.0051):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(10, 12), nn.ReLU(), nn.Linear(12, 8))
            sizes = [8, 16, 16]
            layers = []
            for i in range(len(sizes) - 2):
                layers.append(nn.Linear(sizes[i], sizes[i + 1], bias=False))
                layers.append(nn.BatchNorm1d(sizes[i + 1]))
                layers.append(nn.ReLU(inplace=True))
            layers.append(nn.Linear(sizes[-2], sizes[-1], bias=False))
            self.projector = nn.Sequential(*layers)
            self.bn = nn.BatchNorm1d(sizes[-1], affine=False)
            self.lambd = lambd

        def forward(self, y1, y2):
            z1 = self.projector(self.backbone(y1))
            z2 = self.projector(self.backbone(y2))
            c = self.bn(z1).T @ self.bn(z2)
            c.div_(y1.shape[0])
            on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
            off_diag = off_diagonal(c).pow_(2).sum()
            return on_diag + self.lambd * off_diag, c

    model = BarlowTwins()
    fill_(torch, model, rng)
    param_weights, param_biases = [], []
    for param in model.parameters():
        if param.ndim == 1:
            param_biases.append(param)
        else:
            param_weights.append(param)
    parameters = [{"params": param_weights}, {"params": param_biases}]
    opt = LARS(parameters, lr=0, weight_decay=1e-6, weight_decay_filter=exclude_bias_and_norm,
               lars_adaptation_filter=exclude_bias_and_norm)
    res["groups"] = [len(g["params"]) for g in opt.param_groups]
    res["defaults"] = sorted(opt.defaults)
    x = normal(torch, rng, 3, 12, 10)
    res["bt_loss"] = []
    for step in range(3):
        lr = 0.2 * (step + 1) / 3
        opt.param_groups[0]["lr"] = lr * 0.2
        opt.param_groups[1]["lr"] = lr * 0.0048
        y1 = x[step] + 0.05 * torch.sin(x[step] * (step + 1))
        y2 = x[step].roll(1, dims=1) * 0.9
        loss, c = model(y1, y2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["bt_loss"].append(loss.item())
    res["c"] = c.detach()
    res["c_diag"] = torch.diagonal(c.detach())
    res["bt_params"] = [p.detach().clone() for p in model.parameters()]
    res["bt_mu"] = [opt.state[p]["mu"] for p in model.parameters()]
    res["bn_running"] = [model.bn.running_mean, model.bn.running_var,
                         model.bn.num_batches_tracked.float()]
    sd = opt.state_dict()
    res["opt_state_keys"] = sorted(sd["state"].keys())
    res["opt_group_keys"] = sorted(sd["param_groups"][0].keys())
    res["off_diag_shape"] = list(off_diagonal(c.detach()).shape)
    n = 5
    m = torch.arange(n * n, dtype=torch.float32).view(n, n)
    res["off_diag_arange"] = off_diagonal(m)
    res["off_diag_mask"] = m[~torch.eye(n, dtype=torch.bool)]
    res["diag_views"] = [torch.diagonal(m, offset=1), torch.diagonal(m, -2),
                         m.diagonal(dim1=1, dim2=0), torch.diag_embed(m.diagonal())]

    # VICReg: invariance, variance (hinge on std), covariance
    def vicreg_loss(x, y, sim_coeff=25.0, std_coeff=25.0, cov_coeff=1.0):
        num_features = x.shape[1]
        batch_size = x.shape[0]
        repr_loss = F.mse_loss(x, y)
        x = x - x.mean(dim=0)
        y = y - y.mean(dim=0)
        std_x = torch.sqrt(x.var(dim=0) + 0.0001)
        std_y = torch.sqrt(y.var(dim=0) + 0.0001)
        std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
        cov_x = (x.T @ x) / (batch_size - 1)
        cov_y = (y.T @ y) / (batch_size - 1)
        cov_loss = off_diagonal(cov_x).pow_(2).sum().div(num_features) + \
            off_diagonal(cov_y).pow_(2).sum().div(num_features)
        loss = sim_coeff * repr_loss + std_coeff * std_loss + cov_coeff * cov_loss
        return loss, [repr_loss.item(), std_loss.item(), cov_loss.item()]

    expander = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(True),
                             nn.Linear(16, 16, bias=False))
    backbone = nn.Sequential(nn.Linear(10, 12), nn.ReLU(), nn.Linear(12, 8))
    fill_(torch, expander, rng)
    fill_(torch, backbone, rng)
    params = list(backbone.parameters()) + list(expander.parameters())
    opt = LARS(params, lr=0.05, weight_decay=1e-4, eta=0.02,
               weight_decay_filter=exclude_bias_and_norm,
               lars_adaptation_filter=exclude_bias_and_norm)
    res["vic_loss"], res["vic_terms"] = [], []
    for step in range(3):
        xa = x[step] * 1.1
        xb = x[step] + 0.1 * x[(step + 1) % 3]
        loss, terms = vicreg_loss(expander(backbone(xa)), expander(backbone(xb)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["vic_loss"].append(loss.item())
        res["vic_terms"].append(terms)
    res["vic_params"] = [p.detach().clone() for p in params]
    # the same VICReg loss trained in bfloat16 throughout (no autocast): every rounding shows
    net16 = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 8))
    fill_(torch, net16, rng)
    net16 = net16.to(torch.bfloat16)
    opt16 = torch.optim.SGD(net16.parameters(), lr=0.01, momentum=0.9)
    x16 = x.to(torch.bfloat16)
    res["bf16_terms"] = []
    for step in range(3):
        loss, terms = vicreg_loss(net16(x16[step] * 1.1), net16(x16[step] + 0.1 * x16[step - 1]))
        opt16.zero_grad()
        loss.backward()
        opt16.step()
        res["bf16_terms"].append(terms + [loss.item()])
    res["bf16_params"] = [p.detach().clone() for p in net16.parameters()]
    res["bf16_dtypes"] = [str(p.grad.dtype).rsplit(".", 1)[-1] for p in net16.parameters()]

    # torch.cov / corrcoef agree with the hand-written covariance
    z = expander(backbone(x[0])).detach()
    zc = z - z.mean(0)
    res["cov"] = [torch.cov(z.T), zc.T @ zc / (z.shape[0] - 1), torch.corrcoef(z.T)[:4, :4]]
    res["std_unbiased"] = [z.std(0), z.std(0, unbiased=False), z.std(0, correction=0),
                           torch.std_mean(z, dim=0)[0], torch.var_mean(z, 0, correction=2)[0]]
    return res


PROGRAMS = [byol_program, dino_program, barlow_vicreg_program]


# Quantities that amplify the last-bit differences of float32 kernels (ember's interpolation
# and reductions round differently from PyTorch's, and more closely to float64):
# - DINO's gradient norms: the teacher's softmax at temperature 0.04-0.07 and the student's
#   at 0.1 scale logit differences of ~1e-7 by up to 25x, step after step (the parameters
#   themselves still agree to 2e-7);
# - LARS momentum of Barlow Twins: the backbone's last bias feeds a BatchNorm, so its
#   gradient is zero up to rounding (~1e-6 in both libraries, of either sign).
LOOSE = {
    "dino_program": ({"norms", "clipped"}, 1e-4, 1e-6),
    "barlow_vicreg_program": ({"bt_mu"}, 1e-5, 1e-5),
}


def assert_program_matches_torch(program, loose=(set(), 0, 0)):
    """The program's results under ember and PyTorch agree: float32 quantities to 1e-5
    relative, 1e-6 absolute; those named in ``loose`` to its (names, rtol, atol)."""
    ours, theirs = program(ember), program(torch)
    names, rtol, atol = loose
    assert names <= theirs.keys()
    assert_same_results({k: v for k, v in ours.items() if k not in names},
                        {k: v for k, v in theirs.items() if k not in names}, 1e-5, 1e-6)
    assert_same_results({k: ours[k] for k in names}, {k: theirs[k] for k in names}, rtol, atol)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_program_matches_torch(program, LOOSE.get(program.__name__, (set(), 0, 0)))


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_warns_like_torch(program):
    assert warnings_of(program, ember) == warnings_of(program, torch)
