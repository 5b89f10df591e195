"""Training regimes written by hand in torch, run once with `torch` bound to ember and once to
PyTorch from the same NumPy data: FixMatch (weak/strong augmentation from tensor ops,
interleaving, a confidence mask on a reduction='none' loss, an EMA model), Mean Teacher
(foreach/.data EMA updates, softmax-MSE consistency with a sigmoid ramp-up, a legacy
size_average criterion), multi-task gradient surgery (PCGrad, GradNorm, uncertainty
weighting), federated averaging (deep-copied BatchNorm clients, state_dict averaging with an
integer buffer, strict and non-strict loading) and uncertainty estimation (MC dropout, a deep
ensemble, expected calibration error three ways, temperature scaling with LBFGS)."""

import copy
import math
import random

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _conv_net(torch, n_classes=3, bn=True):
    """A small CNN of the kind semi-supervised recipes train on 8x8 images."""
    nn = torch.nn
    layers = [nn.Conv2d(3, 6, 3, padding=1, bias=not bn)]
    if bn:
        layers.append(nn.BatchNorm2d(6, momentum=0.001))
    layers += [nn.LeakyReLU(0.1, inplace=True), nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1),
               nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, n_classes)]
    return nn.Sequential(*layers)


def fixmatch_program(torch):
    """FixMatch: a flip / pad-and-crop weak view, a roll / cutout / colour-jitter strong view,
    interleaved batches, pseudo-labels thresholded on softmax confidence, the unlabeled loss
    as cross_entropy(reduction='none') * mask, SGD with nesterov and a cosine LambdaLR, and an
    EMA copy of the model updated over its state_dict."""
    F = torch.nn.functional
    rng = np.random.default_rng(250)
    res = {}
    model = _conv_net(torch)
    fill_(torch, model, rng, 0.4)
    mu, B, n_steps, threshold, lambda_u = 2, 4, 4, 0.5, 1.0
    xs = [normal(torch, rng, B, 3, 8, 8) for _ in range(n_steps)]
    ys = [torch.from_numpy(rng.integers(0, 3, B)) for _ in range(n_steps)]
    us = [normal(torch, rng, mu * B, 3, 8, 8) for _ in range(n_steps)]
    flips = [rng.random(mu * B) < 0.5 for _ in range(n_steps)]
    crops = [rng.integers(0, 5, (mu * B, 2)) for _ in range(n_steps)]
    cut = [rng.integers(0, 6, (mu * B, 2)) for _ in range(n_steps)]
    shifts = [rng.integers(-2, 3, 2) for _ in range(n_steps)]
    jitter = [rng.uniform(0.6, 1.4, (mu * B, 1, 1, 1)).astype(np.float32)
              for _ in range(n_steps)]

    def weak(x, flip, crop):
        flip = torch.from_numpy(flip).view(-1, 1, 1, 1)
        x = torch.where(flip, torch.flip(x, dims=[3]), x)
        padded = F.pad(x, (2, 2, 2, 2), mode="reflect")
        return torch.stack([padded[i, :, r:r + 8, c:c + 8] for i, (r, c) in enumerate(crop)])

    def strong(x, flip, crop, corner, shift, scale):
        x = weak(x, flip, crop)
        x = torch.roll(x, shifts=(int(shift[0]), int(shift[1])), dims=(2, 3))
        x = x * torch.from_numpy(scale) + (1 - torch.from_numpy(scale)) * x.mean(
            dim=(1, 2, 3), keepdim=True)
        rows = torch.arange(8).view(1, 8, 1)
        cols = torch.arange(8).view(1, 1, 8)
        r0 = torch.as_tensor(corner[:, 0]).view(-1, 1, 1)
        c0 = torch.as_tensor(corner[:, 1]).view(-1, 1, 1)
        hole = (rows >= r0) & (rows < r0 + 3) & (cols >= c0) & (cols < c0 + 3)
        x = x.masked_fill(hole.unsqueeze(1), 0.5)
        return torch.clamp(x, -2.5, 2.5)

    def interleave(x, size):
        s = list(x.shape)
        return x.reshape([-1, size] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])

    def de_interleave(x, size):
        s = list(x.shape)
        return x.reshape([size, -1] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])

    no_decay = ["bias", "bn"]
    grouped = [
        {"params": [p for n, p in model.named_parameters()
                    if not any(nd in n for nd in no_decay) and p.ndim > 1],
         "weight_decay": 5e-4},
        {"params": [p for n, p in model.named_parameters() if p.ndim <= 1],
         "weight_decay": 0.0}]
    opt = torch.optim.SGD(grouped, lr=0.03, momentum=0.9, nesterov=True)

    def cosine(step, total=n_steps, cycles=7. / 16.):
        return max(0., math.cos(math.pi * cycles * float(step) / float(max(1, total))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine)
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    decay = 0.9
    losses, masks, lrs, pseudo = [], [], [], []
    model.train()
    for step in range(n_steps):
        u_w = weak(us[step], flips[step], crops[step])
        u_s = strong(us[step], flips[step], crops[step], cut[step], shifts[step], jitter[step])
        inputs = interleave(torch.cat((xs[step], u_w, u_s)), 2 * mu + 1)
        logits = de_interleave(model(inputs), 2 * mu + 1)
        logits_x = logits[:B]
        logits_u_w, logits_u_s = logits[B:].chunk(2)
        del logits
        Lx = F.cross_entropy(logits_x, ys[step], reduction="mean")
        pseudo_label = torch.softmax(logits_u_w.detach() / 1.0, dim=-1)
        max_probs, targets_u = torch.max(pseudo_label, dim=-1)
        mask = max_probs.ge(threshold).float()
        Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
        loss = Lx + lambda_u * Lu
        loss.backward()
        opt.step()
        sched.step()
        model.zero_grad()
        with torch.no_grad():
            msd, esd = model.state_dict(), ema.state_dict()
            for k in esd.keys():
                if esd[k].dtype.is_floating_point and k in dict(model.named_parameters()):
                    esd[k].copy_(esd[k] * decay + (1. - decay) * msd[k].detach())
                else:
                    esd[k].copy_(msd[k])
        losses.append([loss.item(), Lx.item(), Lu.item()])
        masks.append(mask)
        lrs.append(opt.param_groups[0]["lr"])
        pseudo.append(targets_u)
    res["losses"] = losses
    res["masks"] = masks
    res["lrs"] = lrs
    res["pseudo"] = pseudo
    res["weak_view"] = weak(us[0], flips[0], crops[0])
    res["strong_view"] = strong(us[0], flips[0], crops[0], cut[0], shifts[0], jitter[0])
    res["params"] = list(model.parameters())
    res["ema"] = list(ema.state_dict().values())
    res["ema_keys"] = list(ema.state_dict().keys())
    ema.eval()
    with torch.no_grad():
        res["ema_eval"] = ema(xs[0])
        res["mask_rate"] = [torch.stack(masks).mean().item()]
    return res


def mean_teacher_program(torch):
    """Mean Teacher: a student and an EMA teacher (updated with torch._foreach_mul_/_add_ and
    with p.data.mul_().add_()), a softmax-MSE consistency loss ramped up by exp(-5(1-t)^2),
    a summed class loss over partly unlabeled batches (ignore_index=-1, the legacy
    size_average=False criterion), and a KL variant of the consistency loss."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(251)
    res = {}

    def make():
        # no bias before BatchNorm: its gradient is rounding noise, which Adam scales to lr
        return nn.Sequential(nn.Linear(6, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(),
                             nn.Dropout(0.0), nn.Linear(16, 4))

    student = make()
    fill_(torch, student, rng, 0.4)
    teacher = make()
    for t, s in zip(teacher.parameters(), student.parameters()):
        t.data.copy_(s.data)
        t.detach_()
    NO_LABEL = -1
    class_criterion = nn.CrossEntropyLoss(size_average=False, ignore_index=NO_LABEL)

    def sigmoid_rampup(current, rampup_length):
        if rampup_length == 0:
            return 1.0
        current = np.clip(current, 0.0, rampup_length)
        phase = 1.0 - current / rampup_length
        return math.exp(-5.0 * phase * phase)

    def softmax_mse_loss(input_logits, target_logits):
        assert input_logits.size() == target_logits.size()
        input_softmax = F.softmax(input_logits, dim=1)
        target_softmax = F.softmax(target_logits, dim=1)
        num_classes = input_logits.size()[1]
        return F.mse_loss(input_softmax, target_softmax, reduction="sum") / num_classes

    def softmax_kl_loss(input_logits, target_logits):
        input_log_softmax = F.log_softmax(input_logits, dim=1)
        target_softmax = F.softmax(target_logits, dim=1)
        return F.kl_div(input_log_softmax, target_softmax, reduction="sum")

    def update_ema_variables(model, ema_model, alpha, global_step):
        alpha = min(1 - 1 / (global_step + 1), alpha)
        if global_step % 2 == 0:
            ema_params = list(ema_model.parameters())
            torch._foreach_mul_(ema_params, alpha)
            torch._foreach_add_(ema_params, list(model.parameters()), alpha=1 - alpha)
        else:
            for ema_param, param in zip(ema_model.parameters(), model.parameters()):
                ema_param.data.mul_(alpha).add_(param.data, alpha=1 - alpha)

    opt = torch.optim.Adam(student.parameters(), lr=0.01, betas=(0.9, 0.999),
                           weight_decay=1e-4, amsgrad=True)
    losses, weights, teacher_norms = [], [], []
    for step in range(5):
        x = normal(torch, rng, 8, 6)
        noise_s = 0.1 * normal(torch, rng, 8, 6)
        noise_t = 0.1 * normal(torch, rng, 8, 6)
        target = torch.from_numpy(rng.integers(0, 4, 8))
        target[torch.from_numpy(rng.random(8) < 0.5)] = NO_LABEL
        student.train()
        teacher.train()
        with torch.no_grad():
            ema_logit = teacher(x + noise_t)
        model_out = student(x + noise_s)
        minibatch_size = len(target)
        labeled_minibatch_size = target.data.ne(NO_LABEL).sum()
        class_loss = class_criterion(model_out, target) / minibatch_size
        consistency_weight = 5.0 * sigmoid_rampup(step, 4)
        consistency_loss = consistency_weight * softmax_mse_loss(
            model_out, ema_logit) / minibatch_size
        kl = softmax_kl_loss(model_out, ema_logit) / minibatch_size
        loss = class_loss + consistency_loss + 0.1 * kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        update_ema_variables(student, teacher, 0.9, step)
        losses.append([class_loss.item(), consistency_loss.item(), kl.item()])
        weights.append(consistency_weight)
        teacher_norms.append(torch.stack([p.norm() for p in teacher.parameters()]))
        res.setdefault("labeled", []).append(int(labeled_minibatch_size))
    res["losses"] = losses
    res["rampup"] = weights
    res["teacher_norms"] = teacher_norms
    res["teacher_requires_grad"] = [p.requires_grad for p in teacher.parameters()]
    res["teacher"] = list(teacher.parameters())
    res["teacher_bn"] = [teacher[1].running_mean, teacher[1].running_var]
    res["student_bn"] = [student[1].running_mean, student[1].running_var,
                         student[1].num_batches_tracked]
    teacher.eval()
    student.eval()
    with torch.no_grad():
        x = normal(torch, rng, 5, 6)
        res["prec"] = [(teacher(x).argmax(1) == student(x).argmax(1)).float().mean()]
        res["teacher_eval"] = teacher(x)
    return res


def multitask_program(torch):
    """Multi-task gradient surgery on a shared trunk with three heads: PCGrad (per-task
    autograd.grad and .backward(retain_graph=True), flattened with torch.cat, conflicting
    gradients projected in a shuffled task order, shared/unshared merging), GradNorm
    (learnable task weights, create_graph gradient norms of the shared layer's weight,
    renormalised into a fresh Parameter) and homoscedastic uncertainty weighting."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(252)
    res = {}

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn.Sequential(nn.Linear(5, 12), nn.Tanh(), nn.Linear(12, 8), nn.GELU())
            self.heads = nn.ModuleList([nn.Linear(8, 1), nn.Linear(8, 3), nn.Linear(8, 2)])

        def forward(self, x):
            h = self.shared(x)
            return [head(h) for head in self.heads]

    def task_losses(outs, y_reg, y_cls, y_bin):
        return [F.smooth_l1_loss(outs[0].squeeze(-1), y_reg, beta=0.5),
                F.cross_entropy(outs[1], y_cls, label_smoothing=0.1),
                F.binary_cross_entropy_with_logits(outs[2], y_bin, pos_weight=torch.tensor(
                    [1.0, 2.0]))]

    def batch():
        x = normal(torch, rng, 10, 5)
        return (x, x[:, 0] * 2 - x[:, 1], torch.from_numpy(rng.integers(0, 3, 10)),
                torch.from_numpy((rng.random((10, 2)) < 0.4).astype(np.float32)))

    # PCGrad
    net = Net()
    fill_(torch, net, rng, 0.5)
    net.heads[2].bias.requires_grad_(False)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    py_rng = random.Random(7)

    def retrieve_grad():
        grad, shape, has_grad = [], [], []
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    shape.append(p.shape)
                    grad.append(torch.zeros_like(p).to(p.device))
                    has_grad.append(torch.zeros_like(p).to(p.device))
                    continue
                shape.append(p.grad.shape)
                grad.append(p.grad.clone())
                has_grad.append(torch.ones_like(p).to(p.device))
        return grad, shape, has_grad

    def flatten_grad(grads):
        return torch.cat([g.flatten() for g in grads])

    def unflatten_grad(grads, shapes):
        unflatten, idx = [], 0
        for shape in shapes:
            length = int(np.prod(shape))
            unflatten.append(grads[idx:idx + length].view(shape).clone())
            idx += length
        return unflatten

    def project_conflicting(grads, has_grads):
        shared = torch.stack(has_grads).prod(0).bool()
        pc_grad = copy.deepcopy(grads)
        for g_i in pc_grad:
            py_rng.shuffle(grads)
            for g_j in grads:
                g_i_g_j = torch.dot(g_i, g_j)
                if g_i_g_j < 0:
                    g_i -= (g_i_g_j) * g_j / (g_j.norm() ** 2)
        merged_grad = torch.zeros_like(grads[0]).to(grads[0].device)
        merged_grad[shared] = torch.stack([g[shared] for g in pc_grad]).mean(dim=0)
        merged_grad[~shared] = torch.stack([g[~shared] for g in pc_grad]).sum(dim=0)
        return merged_grad

    pc_losses, conflicts = [], []
    for step in range(3):
        x, *targets = batch()
        objectives = task_losses(net(x), *targets)
        grads, shapes, has_grads = [], [], []
        for obj in objectives:
            opt.zero_grad(set_to_none=True)
            obj.backward(retain_graph=True)
            grad, shape, has_grad = retrieve_grad()
            grads.append(flatten_grad(grad))
            has_grads.append(flatten_grad(has_grad))
            shapes = shape
        dots = torch.stack([torch.dot(grads[i], grads[j]) for i in range(3)
                            for j in range(i + 1, 3)])
        conflicts.append(dots)
        pc_grad = unflatten_grad(project_conflicting(grads, has_grads), shapes)
        idx = 0
        for group in opt.param_groups:
            for p in group["params"]:
                p.grad = pc_grad[idx]
                idx += 1
        opt.step()
        pc_losses.append([o.item() for o in objectives])
    # the autograd.grad route of the same surgery, for the last batch
    objectives = task_losses(net(x), *targets)
    per_task = [torch.autograd.grad(o, [p for p in net.parameters() if p.requires_grad],
                                    retain_graph=True, allow_unused=True) for o in objectives]
    res["unused"] = [[g is None for g in gs] for gs in per_task]
    res["pcgrad_losses"] = pc_losses
    res["pcgrad_conflicts"] = conflicts
    res["pcgrad_params"] = list(net.parameters())

    # GradNorm
    net = Net()
    fill_(torch, net, rng, 0.5)
    T, alpha = 3, 1.5
    weights = torch.nn.Parameter(torch.ones(T).float())
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.5)
    optimizer2 = torch.optim.Adam([weights], lr=0.02)
    layer = net.shared[2]
    gn_log = []
    for t in range(4):
        x, *targets = batch()
        loss_t = torch.stack(task_losses(net(x), *targets))
        weighted = weights @ loss_t
        if t == 0:
            l0 = loss_t.detach()
        optimizer.zero_grad()
        weighted.backward(retain_graph=True)
        gw = []
        for i in range(T):
            dl = torch.autograd.grad(weights[i] * loss_t[i], layer.parameters(),
                                     retain_graph=True, create_graph=True)[0]
            gw.append(torch.norm(dl))
        gw = torch.stack(gw)
        loss_ratio = loss_t.detach() / l0
        rt = loss_ratio / loss_ratio.mean()
        gw_avg = gw.mean().detach()
        constant = (gw_avg * rt ** alpha).detach()
        gradnorm_loss = torch.abs(gw - constant).sum()
        optimizer2.zero_grad()
        gradnorm_loss.backward()
        optimizer.step()
        optimizer2.step()
        weights = (weights / weights.sum() * T).detach()
        weights = torch.nn.Parameter(weights)
        optimizer2 = torch.optim.Adam([weights], lr=0.02)
        gn_log.append(torch.cat([loss_t.detach(), gw.detach(), gradnorm_loss.detach()[None],
                                 weights.detach()]))
    res["gradnorm"] = gn_log
    res["gradnorm_params"] = list(net.parameters())

    # uncertainty weighting (Kendall et al.)
    net = Net()
    fill_(torch, net, rng, 0.5)
    log_vars = nn.Parameter(torch.zeros(T))
    opt = torch.optim.AdamW([{"params": net.parameters()},
                             {"params": [log_vars], "weight_decay": 0.0}], lr=0.02)
    uw = []
    for _ in range(3):
        x, *targets = batch()
        losses = task_losses(net(x), *targets)
        total = 0
        for i, task_loss in enumerate(losses):
            precision = torch.exp(-log_vars[i])
            total = total + precision * task_loss + log_vars[i]
        opt.zero_grad()
        total.backward()
        nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0, error_if_nonfinite=True)
        opt.step()
        uw.append(total.item())
    res["uw_losses"] = uw
    res["log_vars"] = log_vars
    res["uw_params"] = list(net.parameters())
    return res


def fedavg_program(torch):
    """Federated averaging: clients deep-copied from a global BatchNorm model, local SGD epochs
    over their own DataLoader shards, FedProx's proximal term, three aggregations
    (stack(...).mean(0) per key with the integer num_batches_tracked kept integral, the
    in-place sum and torch.div over deep-copied state_dicts, data-size weights), loading
    with strict=True, a strict=False load's result, and a missing key's error."""
    nn, F = torch.nn, torch.nn.functional
    data = torch.utils.data
    rng = np.random.default_rng(253)
    res = {}

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 10)
            self.bn = nn.BatchNorm1d(10)
            self.fc2 = nn.Linear(10, 3)

        def forward(self, x):
            return self.fc2(F.relu(self.bn(self.fc1(x))))

    global_model = Net()
    fill_(torch, global_model, rng, 0.5)
    X = normal(torch, rng, 36, 4)
    Y = torch.from_numpy(rng.integers(0, 3, 36))
    shards = np.split(rng.permutation(36), [8, 20])   # unequal client sizes
    dataset = data.TensorDataset(X, Y)
    loaders = [data.DataLoader(data.Subset(dataset, idx.tolist()), batch_size=4, shuffle=False,
                               drop_last=True) for idx in shards]
    sizes = [len(loader.dataset) for loader in loaders]

    def local_update(model, loader, mu=0.0):
        global_params = [p.detach().clone() for p in model.parameters()]
        model.train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
        epoch_loss = []
        for _ in range(2):
            batch_loss = []
            for images, labels in loader:
                model.zero_grad()
                log_probs = F.log_softmax(model(images), dim=1)
                loss = F.nll_loss(log_probs, labels)
                if mu > 0:
                    prox = 0.0
                    for w, w_t in zip(model.parameters(), global_params):
                        prox += (w - w_t).norm(2) ** 2
                    loss = loss + mu / 2 * prox
                loss.backward()
                optimizer.step()
                batch_loss.append(loss.item())
            epoch_loss.append(sum(batch_loss) / len(batch_loss))
        return model.state_dict(), sum(epoch_loss) / len(epoch_loss)

    def average_stack(states, weights=None):
        avg = {}
        for key in states[0]:
            stacked = torch.stack([s[key].float() for s in states])
            if weights is None:
                value = stacked.mean(0)
            else:
                w = torch.tensor(weights, dtype=torch.float32)
                w = (w / w.sum()).view(-1, *([1] * (stacked.dim() - 1)))
                value = (stacked * w).sum(0)
            avg[key] = value.to(states[0][key].dtype)
        return avg

    def fedavg(w):
        w_avg = copy.deepcopy(w[0])
        for k in w_avg.keys():
            for i in range(1, len(w)):
                w_avg[k] += w[i][k]
            w_avg[k] = torch.div(w_avg[k], len(w))
        return w_avg

    round_losses, dtypes = [], []
    for rnd in range(3):
        states, losses = [], []
        for c, loader in enumerate(loaders):
            client = copy.deepcopy(global_model)
            state, loss = local_update(client, loader, mu=0.1 if rnd == 2 else 0.0)
            states.append(copy.deepcopy(state))
            losses.append(loss)
        if rnd == 0:
            new_state = average_stack(states)
        elif rnd == 1:
            new_state = fedavg(states)
            dtypes.append(str(new_state["bn.num_batches_tracked"].dtype).split(".")[-1])
            res["fedavg_nbt"] = [new_state["bn.num_batches_tracked"]]
        else:
            new_state = average_stack(states, sizes)
        global_model.load_state_dict(new_state, strict=True)
        round_losses.append(losses)
        dtypes.append(str(global_model.bn.num_batches_tracked.dtype).split(".")[-1])
    res["round_losses"] = round_losses
    res["dtypes"] = dtypes
    res["global"] = list(global_model.state_dict().values())
    res["keys"] = list(global_model.state_dict().keys())
    vec = nn.utils.parameters_to_vector(global_model.parameters())
    res["vec"] = vec
    delta = copy.deepcopy(global_model)
    nn.utils.vector_to_parameters(vec * 0.5, delta.parameters())
    res["halved"] = list(delta.parameters())

    partial = {k: v for k, v in global_model.state_dict().items() if not k.startswith("bn.")}
    partial["extra.weight"] = torch.zeros(2)
    result = Net().load_state_dict(partial, strict=False)
    res["missing"] = list(result.missing_keys)
    res["unexpected"] = list(result.unexpected_keys)
    try:
        Net().load_state_dict(partial)
    except RuntimeError as e:
        res["strict_error"] = [str(e)]
    try:
        torch.stack([s["bn.num_batches_tracked"] for s in states]).mean(0)
    except RuntimeError as e:
        res["int_mean_error"] = [str(e)]
    global_model.eval()
    with torch.no_grad():
        out = global_model(X)
        res["accuracy"] = [(out.argmax(1) == Y).float().mean().item()]
        res["eval_out"] = out
    return res


def uncertainty_program(torch):
    """Uncertainty estimation: MC dropout (model.train() at inference, passes stacked,
    predictive entropy and mutual information), a deep ensemble, expected calibration error
    by a bin loop, by torch.bucketize + scatter_add_, and by torch.histc, Brier score, and
    temperature scaling fitted with LBFGS (plain and strong-Wolfe)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(254)
    res = {}
    C, N = 4, 40

    class MLP(nn.Module):
        def __init__(self, p=0.3):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Dropout(p),
                                      nn.Linear(24, 24), nn.ReLU(), nn.Dropout(p))
            self.out = nn.Linear(24, C)

        def forward(self, x):
            return self.out(self.body(x))

    X = normal(torch, rng, N, 6)
    Y = torch.from_numpy(rng.integers(0, C, N))

    def predictive_entropy(probs):        # probs: (T, N, C) passes stacked
        mean = probs.mean(0)
        return -(mean * torch.log(mean + 1e-12)).sum(-1)

    def mutual_information(probs):
        expected = -(probs * torch.log(probs + 1e-12)).sum(-1).mean(0)
        return predictive_entropy(probs) - expected

    # MC dropout: the dropout masks come from each library's own generator, so only what
    # does not depend on them is compared, and the statistics run on fixed NumPy passes
    model = MLP()
    fill_(torch, model, rng, 0.4)
    model.eval()
    with torch.no_grad():
        det = F.softmax(model(X), dim=1)
        model.train()
        torch.manual_seed(0)
        passes = torch.stack([F.softmax(model(X), dim=1) for _ in range(8)])
        h = model.body[:2](X)
        dropped = model.body[2](h)
    res["eval_probs"] = det
    res["mc_shape"] = list(passes.shape)
    res["mc_dtype"] = [str(passes.dtype).split(".")[-1]]
    res["mc_rows_sum_to_one"] = [bool(torch.allclose(passes.sum(-1), torch.ones(8, N)))]
    res["mc_passes_differ"] = [bool((passes.std(0) > 0).any())]
    kept = dropped != 0
    res["dropout_scaling"] = [bool(torch.allclose(dropped[kept], h[kept] / 0.7))]
    res["model_training"] = [model.training, model.body[2].training]
    fixed = torch.from_numpy(rng.dirichlet(np.ones(C), (8, N)).astype(np.float32))
    res["entropy"] = predictive_entropy(fixed)
    res["mutual_info"] = mutual_information(fixed)
    res["entr"] = torch.special.entr(fixed.mean(0)).sum(-1)
    res["categorical_entropy"] = torch.distributions.Categorical(probs=fixed.mean(0)).entropy()

    # deep ensemble: members trained from their own initialisations on bootstraps
    members = []
    for m in range(3):
        member = MLP(p=0.0)
        fill_(torch, member, rng, 0.4)
        opt = torch.optim.Adam(member.parameters(), lr=0.01)
        boot = torch.from_numpy(rng.integers(0, N, N))
        for _ in range(4):
            opt.zero_grad()
            loss = F.cross_entropy(member(X[boot]), Y[boot])
            loss.backward()
            opt.step()
        member.eval()
        members.append(member)
    with torch.no_grad():
        member_logits = torch.stack([mb(X) for mb in members])
    probs = member_logits.softmax(-1).mean(0)
    res["ensemble_probs"] = probs
    res["ensemble_nll"] = [F.nll_loss(torch.log(probs), Y)]
    res["brier"] = [((probs - F.one_hot(Y, C).float()) ** 2).sum(1).mean()]
    res["disagreement"] = [(member_logits.argmax(-1) != member_logits.argmax(-1)[0]).float()
                           .mean()]

    n_bins = 5

    def ece_loop(probs, labels):
        bin_boundaries = torch.linspace(0, 1, n_bins + 1)
        bin_lowers, bin_uppers = bin_boundaries[:-1], bin_boundaries[1:]
        confidences, predictions = torch.max(probs, 1)
        accuracies = predictions.eq(labels)
        ece = torch.zeros(1, device=probs.device)
        per_bin = []
        for bin_lower, bin_upper in zip(bin_lowers, bin_uppers):
            in_bin = confidences.gt(bin_lower.item()) * confidences.le(bin_upper.item())
            prop_in_bin = in_bin.float().mean()
            per_bin.append(in_bin.sum())
            if prop_in_bin.item() > 0:
                accuracy_in_bin = accuracies[in_bin].float().mean()
                avg_confidence_in_bin = confidences[in_bin].mean()
                ece += torch.abs(avg_confidence_in_bin - accuracy_in_bin) * prop_in_bin
        return ece, torch.stack(per_bin)

    def ece_bucketize(probs, labels):
        conf, pred = probs.max(dim=-1)
        acc = (pred == labels).to(probs.dtype)
        edges = torch.linspace(0, 1, n_bins + 1)
        ids = torch.bucketize(conf, edges[1:-1], right=False)
        counts = torch.zeros(n_bins).scatter_add_(0, ids, torch.ones_like(conf))
        conf_sum = torch.zeros(n_bins).scatter_add_(0, ids, conf)
        acc_sum = torch.zeros(n_bins).index_add_(0, ids, acc)
        nonzero = counts > 0
        gap = torch.where(nonzero, (conf_sum - acc_sum).abs() / counts.clamp(min=1),
                          torch.zeros_like(counts))
        return (gap * counts / len(conf)).sum(), ids, torch.bincount(ids, minlength=n_bins)

    def ece_histc(probs, labels):
        conf, pred = probs.max(-1)
        correct = pred.eq(labels).float()
        counts = torch.histc(conf, bins=n_bins, min=0, max=1)
        conf_hist = torch.histc(conf * 1.0, bins=n_bins, min=0, max=1)
        correct_conf = torch.histc(conf[correct.bool()], bins=n_bins, min=0, max=1)
        return counts, conf_hist, correct_conf

    for name, p in (("ensemble", probs), ("eval", det)):
        ece, per_bin = ece_loop(p, Y)
        ece_b, ids, bincount = ece_bucketize(p, Y)
        res[f"ece_{name}"] = [ece, ece_b]
        res[f"bins_{name}"] = [per_bin, bincount, ids]
        res[f"histc_{name}"] = list(ece_histc(p, Y))

    # temperature scaling on held-out logits
    class ModelWithTemperature(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.temperature = nn.Parameter(torch.ones(1) * 1.5)

        def forward(self, x):
            return self.temperature_scale(self.model(x))

        def temperature_scale(self, logits):
            temperature = self.temperature.unsqueeze(1).expand(logits.size(0), logits.size(1))
            return logits / temperature

    logits = member_logits[0] * 3.0      # an over-confident member
    nll_criterion = nn.CrossEntropyLoss()
    fitted = []
    # strong Wolfe stops at |grad| < 1e-4: below that the float32 loss differs by rounding
    # alone, and which line-search branch runs (and how many calls) with it
    for kwargs in ({"lr": 0.01, "max_iter": 50},
                   {"lr": 1.0, "max_iter": 20, "line_search_fn": "strong_wolfe",
                    "tolerance_grad": 1e-4}):
        scaled = ModelWithTemperature(members[0])
        before = nll_criterion(logits, Y).item()
        optimizer = torch.optim.LBFGS([scaled.temperature], **kwargs)
        calls = []

        def closure():
            optimizer.zero_grad()
            loss = nll_criterion(scaled.temperature_scale(logits), Y)
            loss.backward()
            calls.append(loss.item())
            return loss

        first = optimizer.step(closure)
        after = nll_criterion(scaled.temperature_scale(logits), Y).item()
        state = optimizer.state[scaled.temperature]
        fitted.append([before, first.item(), after, scaled.temperature.item()])
        res.setdefault("lbfgs_calls", []).append(len(calls))
        res.setdefault("lbfgs_iters", []).append(int(state["n_iter"]))
        res.setdefault("lbfgs_losses", []).append(calls[:6])
    res["temperature"] = fitted
    return res


PROGRAMS = [fixmatch_program, mean_teacher_program, multitask_program, fedavg_program,
            uncertainty_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
