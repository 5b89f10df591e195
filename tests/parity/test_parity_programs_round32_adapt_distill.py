"""Dataset distillation as its reference repositories write it in torch, run under ember and
PyTorch from the same NumPy weights: Dataset Condensation's gradient matching (layer-wise
cosine distance over create_graph gradients), MTT (a flat student unrolled with
torch.func.functional_call and a learnable lr, higher-order gradients into the images),
Wang et al.'s ReparamModule with the backward through the unrolled steps written by hand,
Distribution Matching with frozen random nets, and KIP's kernel ridge regression."""


import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def gradient_matching_program(torch):
    """Dataset Condensation (Zhao et al.): synthetic images as a leaf with requires_grad,
    real/synthetic gradients from autograd.grad (create_graph for the synthetic side),
    layer-wise distance 'ours' (1 - cosine per output channel, bias skipped) plus the 'mse'
    and 'cos' variants, SGD on the images, inner network updates on synthetic data."""
    rng = np.random.default_rng(6)
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.GroupNorm(4, 4, affine=True),
                        nn.ReLU(inplace=True), nn.AvgPool2d(kernel_size=2, stride=2),
                        nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    fill_(torch, net, rng)
    net_parameters = list(net.parameters())
    n_cls, ipc = 3, 2
    image_syn = torch.tensor(rng.standard_normal((n_cls * ipc, 1, 8, 8)).astype(np.float32),
                             dtype=torch.float, requires_grad=True)
    label_syn = torch.tensor(np.array([np.ones(ipc) * i for i in range(n_cls)]),
                             dtype=torch.long, requires_grad=False).view(-1)
    optimizer_img = torch.optim.SGD([image_syn, ], lr=0.1, momentum=0.5)
    optimizer_net = torch.optim.SGD(net.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()

    def distance_wb(gwr, gws):
        shape = gwr.shape
        if len(shape) == 4:
            gwr = gwr.reshape(shape[0], shape[1] * shape[2] * shape[3])
            gws = gws.reshape(shape[0], shape[1] * shape[2] * shape[3])
        elif len(shape) == 3:
            gwr = gwr.reshape(shape[0], shape[1] * shape[2])
            gws = gws.reshape(shape[0], shape[1] * shape[2])
        elif len(shape) == 2:
            pass
        elif len(shape) == 1:
            gwr = gwr.reshape(1, shape[0])
            gws = gws.reshape(1, shape[0])
            return torch.tensor(0, dtype=torch.float)
        dis_weight = torch.sum(1 - torch.sum(gwr * gws, dim=-1) / (
            torch.norm(gwr, dim=-1) * torch.norm(gws, dim=-1) + 0.000001))
        return dis_weight

    def match_loss(gw_syn, gw_real, dis_metric):
        dis = torch.tensor(0.0)
        if dis_metric == 'ours':
            for ig in range(len(gw_real)):
                dis += distance_wb(gw_real[ig], gw_syn[ig])
        elif dis_metric == 'mse':
            gw_real_vec, gw_syn_vec = [], []
            for ig in range(len(gw_real)):
                gw_real_vec.append(gw_real[ig].reshape((-1)))
                gw_syn_vec.append(gw_syn[ig].reshape((-1)))
            gw_real_vec = torch.cat(gw_real_vec, dim=0)
            gw_syn_vec = torch.cat(gw_syn_vec, dim=0)
            dis = torch.sum((gw_syn_vec - gw_real_vec) ** 2)
        elif dis_metric == 'cos':
            gw_real_vec = torch.cat([g.reshape(-1) for g in gw_real])
            gw_syn_vec = torch.cat([g.reshape(-1) for g in gw_syn])
            dis = 1 - torch.sum(gw_real_vec * gw_syn_vec, dim=-1) / (
                torch.norm(gw_real_vec, dim=-1) * torch.norm(gw_syn_vec, dim=-1) + 0.000001)
        return dis

    res = {}
    real = [normal(torch, rng, 4, 1, 8, 8) + 0.3 * c for c in range(n_cls)]
    for it, metric in enumerate(["ours", "mse", "cos"]):
        loss = torch.tensor(0.0)
        for c in range(n_cls):
            img_real = real[c]
            lab_real = torch.ones((img_real.shape[0],), dtype=torch.long) * c
            output_real = net(img_real)
            loss_real = criterion(output_real, lab_real)
            gw_real = torch.autograd.grad(loss_real, net_parameters)
            gw_real = list((_.detach().clone() for _ in gw_real))
            img_syn = image_syn[c * ipc:(c + 1) * ipc].reshape((ipc, 1, 8, 8))
            lab_syn = torch.ones((ipc,), device=img_syn.device, dtype=torch.long) * c
            output_syn = net(img_syn)
            loss_syn = criterion(output_syn, lab_syn)
            gw_syn = torch.autograd.grad(loss_syn, net_parameters, create_graph=True)
            loss += match_loss(gw_syn, gw_real, metric)
        optimizer_img.zero_grad()
        loss.backward()
        res.setdefault("img_grad", []).append(image_syn.grad.clone())
        optimizer_img.step()
        res.setdefault("loss", []).append(loss.item())
        image_syn_train, label_syn_train = (image_syn.detach().clone(),
                                            label_syn.detach().clone())
        for _ in range(2):
            loss_net = criterion(net(image_syn_train), label_syn_train)
            optimizer_net.zero_grad()
            loss_net.backward()
            optimizer_net.step()
    res["syn"] = image_syn
    res["net_grad_after"] = [p.grad is not None for p in net.parameters()]
    return res


def mtt_program(torch):
    """Matching Training Trajectories (Cazenavette et al.): a flat parameter vector, the
    student unrolled with torch.func.functional_call over a few SGD steps with a learnable
    syn_lr, grads via autograd.grad(create_graph=True), param-distance loss normalised by the
    expert's displacement, then backward into images and lr
    also DSA-free ZCA-free."""
    rng = np.random.default_rng(7)
    nn, F = torch.nn, torch.nn.functional

    class ConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 3, 3, padding=1)
            self.norm = nn.InstanceNorm2d(3, affine=True)
            self.fc = nn.Linear(3 * 4 * 4, 3)

        def forward(self, x):
            x = F.avg_pool2d(F.relu(self.norm(self.conv(x))), 2)
            return self.fc(x.flatten(1))

    net = ConvNet()
    fill_(torch, net, rng)
    names = [n for n, _ in net.named_parameters()]
    shapes = [p.shape for p in net.parameters()]
    sizes = [p.numel() for p in net.parameters()]
    # expert trajectory from real data, as buffer.py saves it
    expert = [[p.detach().cpu() for p in net.parameters()]]
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0)
    xr, yr = normal(torch, rng, 9, 1, 8, 8), torch.from_numpy(rng.integers(0, 3, 9))
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(net(xr), yr).backward()
        opt.step()
        expert.append([p.detach().cpu() for p in net.parameters()])

    image_syn = normal(torch, rng, 6, 1, 8, 8).detach().requires_grad_(True)
    label_syn = torch.arange(3).repeat_interleave(2)
    syn_lr = torch.tensor(0.01).detach().requires_grad_(True)
    optimizer_img = torch.optim.SGD([image_syn], lr=10.0, momentum=0.5)
    optimizer_lr = torch.optim.SGD([syn_lr], lr=1e-5, momentum=0.5)
    res = {}

    def unflatten(flat):
        chunks = torch.split(flat, sizes)
        return {n: c.view(s) for n, c, s in zip(names, chunks, shapes)}

    for it in range(3):
        start_epoch, expert_epochs, syn_steps = 0, 2, 3
        starting_params = expert[start_epoch]
        target_params = expert[start_epoch + expert_epochs]
        target_params = torch.cat([p.reshape(-1) for p in target_params], 0)
        student_params = [torch.cat([p.reshape(-1) for p in starting_params], 0)
                          .requires_grad_(True)]
        starting_params = torch.cat([p.reshape(-1) for p in starting_params], 0)
        param_loss_list, param_dist_list = [], []
        for step in range(syn_steps):
            idx = [(step * 2 + k) % 6 for k in range(4)]
            x = image_syn[idx]
            this_y = label_syn[idx]
            forward_params = student_params[-1]
            x = torch.func.functional_call(net, unflatten(forward_params), (x,))
            ce_loss = F.cross_entropy(x, this_y)
            grad = torch.autograd.grad(ce_loss, student_params[-1], create_graph=True)[0]
            student_params.append(student_params[-1] - syn_lr * grad)
        param_loss = torch.tensor(0.0)
        param_dist = torch.tensor(0.0)
        param_loss += torch.nn.functional.mse_loss(student_params[-1], target_params,
                                                   reduction="sum")
        param_dist += torch.nn.functional.mse_loss(starting_params, target_params,
                                                   reduction="sum")
        param_loss_list.append(param_loss)
        param_dist_list.append(param_dist)
        param_loss /= param_dist
        grand_loss = param_loss
        optimizer_img.zero_grad()
        optimizer_lr.zero_grad()
        grand_loss.backward()
        res.setdefault("img_grad", []).append(image_syn.grad.clone())
        res.setdefault("lr_grad", []).append(syn_lr.grad.clone())
        optimizer_img.step()
        optimizer_lr.step()
        with torch.no_grad():
            syn_lr.clamp_(min=1e-4)
        res.setdefault("loss", []).append(grand_loss.item())
        for _ in student_params:
            del _
    res["syn"], res["lr"] = image_syn, syn_lr
    # torch.func.grad of the unrolled loss w.r.t. the lr as a second route
    def unrolled(lr, imgs):
        p = {n: t.detach() for n, t in net.named_parameters()}
        for _ in range(2):
            g = torch.func.grad(lambda q: F.cross_entropy(
                torch.func.functional_call(net, q, (imgs,)), label_syn))(p)
            p = {n: p[n] - lr * g[n] for n in p}
        return sum((p[n] - t).pow(2).sum() for n, t in zip(names, expert[2]))
    g_lr, g_img = torch.func.grad(unrolled, argnums=(0, 1))(syn_lr.detach(), image_syn.detach())
    res["func_lr"], res["func_img"] = g_lr, g_img
    return res


def reparam_dd_program(torch):
    """Wang et al.'s Dataset Distillation: ReparamModule (parameters deleted and re-registered
    as None buffers, one flat Parameter, views set back with setattr), distilled images and
    raw learning rates (softplus / exp), forward unrolled through a few steps with
    autograd.grad(create_graph=True), then the backward done by hand step by step with
    autograd.grad(outputs, inputs, grad_outputs) as the repo does to save memory."""
    rng = np.random.default_rng(15)
    nn, F = torch.nn, torch.nn.functional
    from contextlib import contextmanager

    class ReparamModule(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module
            param_infos, params = [], []
            for m in self.modules():
                for n, p in m.named_parameters(recurse=False):
                    if p is not None:
                        param_infos.append((m, n))
                        params.append(p.detach())
            self._param_infos = tuple(param_infos)
            self._param_numels = tuple(p.numel() for p in params)
            self._param_shapes = tuple(p.size() for p in params)
            flat_param = nn.Parameter(torch.cat([p.reshape(-1) for p in params], 0))
            self.register_parameter('flat_param', flat_param)
            self.param_numel = flat_param.numel()
            for m, n in self._param_infos:
                delattr(m, n)
                m.register_buffer(n, None, persistent=False)
            self._unflatten_param(self.flat_param)

        def _unflatten_param(self, flat_param):
            ps = (t.view(s) for (t, s) in zip(flat_param.split(self._param_numels),
                                              self._param_shapes))
            for (m, n), p in zip(self._param_infos, ps):
                setattr(m, n, p)

        @contextmanager
        def unflattened_param(self, flat_param):
            saved_views = [getattr(m, n) for m, n in self._param_infos]
            self._unflatten_param(flat_param)
            yield
            for (m, n), p in zip(self._param_infos, saved_views):
                setattr(m, n, p)

        def forward(self, inp, flat_param=None):
            if flat_param is None:
                flat_param = self.flat_param
            with self.unflattened_param(flat_param):
                return self.module(inp)

    base = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))
    fill_(torch, base, rng)
    model = ReparamModule(base)
    res = {"names": [n for n, _ in model.named_parameters()],
           "buffers": sorted(n for n, b in model.named_buffers()),
           "sd": sorted(model.state_dict().keys())}
    n_steps, n_cls = 3, 3
    data = torch.tensor(rng.standard_normal((n_steps, n_cls, 6)).astype(np.float32),
                        requires_grad=True)
    labels = torch.arange(n_cls)
    raw_distill_lrs = torch.full((n_steps,), 0.02).log().requires_grad_()
    opt = torch.optim.Adam([data, raw_distill_lrs], lr=0.01, betas=(0.5, 0.999))
    xr, yr = normal(torch, rng, 9, 6), torch.from_numpy(rng.integers(0, 3, 9))

    def forward(w):
        ws, gws = [w], []
        lrs = raw_distill_lrs.exp()
        for step in range(n_steps):
            w = ws[-1]
            out = model(data[step], w)
            loss = F.cross_entropy(out, labels)
            gw, = torch.autograd.grad(loss, w, lrs[step], create_graph=True)
            with torch.no_grad():
                new_w = w.sub(gw).requires_grad_()
            ws.append(new_w)
            gws.append(gw)
        return ws, gws

    def backward(ws, gws, final_loss):
        dw, = torch.autograd.grad(final_loss, (ws[-1],))
        d_data, d_lrs = [], []
        for step in reversed(range(n_steps)):
            w, gw = ws[step], gws[step]
            hvp_in = [w, data, raw_distill_lrs]
            dgw = dw.neg()
            hvp_grad = torch.autograd.grad(outputs=(gw,), inputs=hvp_in, grad_outputs=(dgw,),
                                           retain_graph=True)
            with torch.no_grad():
                d_data.append(hvp_grad[1])
                d_lrs.append(hvp_grad[2])
                dw.add_(hvp_grad[0])
        return d_data, d_lrs

    for it in range(2):
        w0 = model.flat_param.detach().clone().requires_grad_()
        ws, gws = forward(w0)
        with torch.no_grad():
            pass
        final = F.cross_entropy(model(xr, ws[-1]), yr)
        d_data, d_lrs = backward(ws, gws, final)
        opt.zero_grad()
        torch.autograd.backward([data, raw_distill_lrs],
                                [sum(d_data), sum(d_lrs)])
        res.setdefault("data_grad", []).append(data.grad.clone())
        res.setdefault("lr_grad", []).append(raw_distill_lrs.grad.clone())
        opt.step()
        res.setdefault("final", []).append(final.item())
    res["lrs"] = raw_distill_lrs.exp()
    res["flat"] = model.flat_param
    res["view_grad_fn"] = [type(base[0].weight.grad_fn).__name__,
                           base[0].weight._base is model.flat_param]
    return res


def dm_kip_program(torch):
    """Distribution Matching (Zhao & Bilen): random embedding nets under no_grad for the real
    side, mean-embedding MSE per class
    and KIP: kernel ridge regression on a linear/RBF kernel
    with torch.linalg.solve, regularised by trace, gradients into support set and labels."""
    rng = np.random.default_rng(16)
    nn, F = torch.nn, torch.nn.functional
    syn = normal(torch, rng, 6, 1, 6, 6).requires_grad_()
    opt = torch.optim.SGD([syn], lr=1.0, momentum=0.5)
    res = {}
    for it in range(2):
        net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.InstanceNorm2d(4, affine=True),
                            nn.ReLU(inplace=True), nn.AvgPool2d(2), nn.Flatten())
        fill_(torch, net, rng)
        for p in net.parameters():
            p.requires_grad = False
        loss = torch.tensor(0.0)
        for c in range(3):
            img_real = normal(torch, rng, 5, 1, 6, 6) + c
            img_syn = syn[c * 2:(c + 1) * 2]
            output_real = net(img_real).detach()
            output_syn = net(img_syn)
            loss += torch.sum((torch.mean(output_real, dim=0) - torch.mean(output_syn, dim=0)) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("dm", []).append(loss.item())
    res["syn"] = syn

    xs = normal(torch, rng, 6, 4).double().requires_grad_()
    ys = F.one_hot(torch.arange(6) % 3, 3).double().requires_grad_()
    opt = torch.optim.Adam([xs, ys], lr=0.01)
    for _ in range(3):
        xt = normal(torch, rng, 8, 4).double()
        yt = F.one_hot(torch.from_numpy(rng.integers(0, 3, 8)), 3).double()
        def rbf(a, b):
            return torch.exp(-torch.cdist(a, b) ** 2 / 4.0)
        k_ss = rbf(xs, xs)
        k_ts = rbf(xt, xs)
        reg = 1e-2 * torch.trace(k_ss) / xs.shape[0]
        pred = k_ts @ torch.linalg.solve(k_ss + reg * torch.eye(6, dtype=torch.float64), ys)
        loss = 0.5 * ((pred - yt) ** 2).mean()
        acc = (pred.argmax(1) == yt.argmax(1)).float().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("kip", []).append([loss.item(), acc.item()])
    res["xs"], res["ys"] = xs, ys
    return res


PROGRAMS = [gradient_matching_program, mtt_program, reparam_dd_program, dm_kip_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
