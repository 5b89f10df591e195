"""Continual learning as its reference repositories write it in torch, run under ember and
PyTorch from the same NumPy weights: GEM (store_grad / overwrite_grad over grad_dims, the
dual QP by projected gradient) and A-GEM over flattened grads with parameters_to_vector /
vector_to_parameters, Learning without Forgetting (deepcopy, head expansion under .data,
warm-up freezing, temperature KD), iCaRL (herding, nearest-mean-of-exemplars, sigmoid
distillation) and Avalanche-style SI / MAS / log-target LwF with dataset plumbing."""


import copy

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def gem_program(torch):
    """GEM / A-GEM (Lopez-Paz & Ranzato
    Chaudhry et al.): grads stored into a (numel, tasks)
    buffer via store_grad by grad_dims, projection when a dot product is negative (A-GEM's
    closed form, and GEM's dual solved by a few projected-gradient steps in torch), written
    back with overwrite_grad
    parameters_to_vector / vector_to_parameters round trips."""
    rng = np.random.default_rng(3)
    nn, F = torch.nn, torch.nn.functional
    parameters_to_vector = torch.nn.utils.parameters_to_vector
    vector_to_parameters = torch.nn.utils.vector_to_parameters

    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 6))
    fill_(torch, net, rng)
    grad_dims = [p.data.numel() for p in net.parameters()]
    n_tasks = 3
    grads = torch.Tensor(sum(grad_dims), n_tasks)
    grads.zero_()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def store_grad(pp, grads, grad_dims, tid):
        grads[:, tid].fill_(0.0)
        cnt = 0
        for param in pp():
            if param.grad is not None:
                beg = 0 if cnt == 0 else sum(grad_dims[:cnt])
                en = sum(grad_dims[:cnt + 1])
                grads[beg: en, tid].copy_(param.grad.data.view(-1))
            cnt += 1

    def overwrite_grad(pp, newgrad, grad_dims):
        cnt = 0
        for param in pp():
            if param.grad is not None:
                beg = 0 if cnt == 0 else sum(grad_dims[:cnt])
                en = sum(grad_dims[:cnt + 1])
                this_grad = newgrad[beg: en].contiguous().view(param.grad.data.size())
                param.grad.data.copy_(this_grad)
            cnt += 1

    def project2cone2(gradient, memories, iters=30):
        """min_v 0.5 v'GG'v + g'G'v s.t. v >= 0 by projected gradient on the dual."""
        G = memories.t().double()
        g = gradient.contiguous().view(-1).double()
        P = G @ G.t()
        q = G @ g
        v = torch.zeros(G.shape[0], dtype=torch.float64)
        step = 1.0 / torch.linalg.matrix_norm(P, ord=2)
        for _ in range(iters):
            v = torch.clamp(v - step * (P @ v + q), min=0)
        x = G.t() @ v + g
        gradient.copy_(x.float().view(-1, 1))

    memories = [(normal(torch, rng, 5, 4), torch.from_numpy(rng.integers(0, 2, 5) + 2 * t))
                for t in range(n_tasks)]
    res = {}
    for t in range(n_tasks):
        for _ in range(2):
            for past in range(t):
                net.zero_grad()
                xm, ym = memories[past]
                out = net(xm)
                offset1, offset2 = 2 * past, 2 * past + 2
                F.cross_entropy(out[:, offset1:offset2], ym - offset1).backward()
                store_grad(net.parameters, grads, grad_dims, past)
            net.zero_grad()
            x, y = normal(torch, rng, 5, 4), torch.from_numpy(rng.integers(0, 2, 5) + 2 * t)
            out = net(x)
            out[:, 2 * t + 2:].data.fill_(-1e10)
            loss = F.cross_entropy(out[:, :2 * t + 2], y)
            loss.backward()
            if t > 0:
                store_grad(net.parameters, grads, grad_dims, t)
                indx = torch.LongTensor(list(range(t)))
                dotp = torch.mm(grads[:, t].unsqueeze(0), grads.index_select(1, indx))
                res.setdefault("dotp", []).append(dotp.squeeze(0))
                if (dotp < 0).sum() != 0:
                    project2cone2(grads[:, t].unsqueeze(1), grads.index_select(1, indx))
                    overwrite_grad(net.parameters, grads[:, t], grad_dims)
            opt.step()
            res.setdefault("loss", []).append(loss.item())
    res["grads"] = grads

    # A-GEM with flattened gradient vectors
    ref_x, ref_y = normal(torch, rng, 6, 4), torch.from_numpy(rng.integers(0, 6, 6))
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(net(ref_x), ref_y).backward()
        g_ref = torch.cat([p.grad.view(-1) for p in net.parameters()])
        opt.zero_grad()
        x, y = normal(torch, rng, 5, 4), torch.from_numpy(rng.integers(0, 6, 5))
        F.cross_entropy(net(x), y).backward()
        g = torch.cat([p.grad.flatten() for p in net.parameters()])
        dot = torch.dot(g, g_ref)
        if dot < 0:
            g = g - dot / torch.dot(g_ref, g_ref) * g_ref
        idx = 0
        for p in net.parameters():
            n = p.numel()
            p.grad.copy_(g[idx:idx + n].view_as(p))
            idx += n
        opt.step()
        res.setdefault("agem_dot", []).append(dot.item())
    vec = parameters_to_vector(net.parameters())
    res["vec"] = vec
    vector_to_parameters(vec * 0.5, net.parameters())
    res["half"] = net[2].bias
    res["vec_grad"] = [vec.requires_grad, type(vec.grad_fn).__name__]
    gvec = parameters_to_vector(p.grad for p in net.parameters())
    res["gvec"] = gvec
    return res


def lwf_program(torch):
    """Learning without Forgetting: copy.deepcopy of the old model, eval + no_grad old logits,
    a new head added by expanding the Linear (weights copied under no_grad), KD loss with
    temperature (log_softmax / softmax, kl_div batchmean * T^2), and warm-up freezing."""
    rng = np.random.default_rng(4)
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self, n_out):
            super().__init__()
            self.features = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU())
            self.fc = nn.Linear(8, n_out)

        def forward(self, x):
            return self.fc(self.features(x))

        def add_classes(self, n):
            in_f, out_f = self.fc.in_features, self.fc.out_features
            weight, bias = self.fc.weight.data, self.fc.bias.data
            self.fc = nn.Linear(in_f, out_f + n, bias=True)
            nn.init.zeros_(self.fc.weight)
            nn.init.constant_(self.fc.bias, 0.1)
            self.fc.weight.data[:out_f] = weight
            self.fc.bias.data[:out_f] = bias

    net = Net(3)
    fill_(torch, net, rng)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    res = {}
    for _ in range(2):
        x, y = normal(torch, rng, 6, 5), torch.from_numpy(rng.integers(0, 3, 6))
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    old = copy.deepcopy(net)
    old.eval()
    for p in old.parameters():
        p.requires_grad = False
    net.add_classes(2)
    res["fc_shape"] = list(net.fc.weight.shape)
    # warm-up: only the head
    for p in net.features.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(filter(lambda p: p.requires_grad, net.parameters()), lr=0.05)
    T = 2.0

    def kd(new_logits, old_logits):
        return F.kl_div(F.log_softmax(new_logits / T, dim=1), F.softmax(old_logits / T, dim=1),
                        reduction="batchmean") * T * T

    def mkd(outputs, targets, exp=1.0 / T, size_average=True, eps=1e-5):
        out = torch.nn.functional.softmax(outputs, dim=1)
        tar = torch.nn.functional.softmax(targets, dim=1)
        if exp != 1:
            out = out.pow(exp)
            out = out / out.sum(1).view(-1, 1).expand_as(out)
            tar = tar.pow(exp)
            tar = tar / tar.sum(1).view(-1, 1).expand_as(tar)
        out = out + eps / out.size(1)
        out = out / out.sum(1).view(-1, 1).expand_as(out)
        ce = -(tar * out.log()).sum(1)
        if size_average:
            ce = ce.mean()
        return ce

    for step in range(4):
        if step == 2:
            for p in net.features.parameters():
                p.requires_grad_(True)
            opt.add_param_group({"params": list(net.features.parameters()), "lr": 0.01})
        x, y = normal(torch, rng, 6, 5), torch.from_numpy(rng.integers(3, 5, 6))
        with torch.no_grad():
            old_out = old(x)
        out = net(x)
        loss = F.cross_entropy(out, y) + kd(out[:, :3], old_out) + mkd(out[:, :3], old_out)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("loss", []).append(loss.item())
        res.setdefault("feat_grad", []).append(
            [p.grad is None for p in net.features.parameters()])
    res["fc"] = net.fc.weight
    res["bn"] = net.features[1].running_var
    res["old_bn"] = old.features[1].running_var
    res["n_groups"] = [len(opt.param_groups)]
    return res


def icarl_program(torch):
    """iCaRL: herding exemplar selection on L2-normalised features, nearest-mean-of-exemplars
    classification, sigmoid BCE distillation on old logits with one-hot targets."""
    rng = np.random.default_rng(5)
    nn, F = torch.nn, torch.nn.functional
    feat = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6))
    fc = nn.Linear(6, 4, bias=False)
    fill_(torch, feat, rng)
    fill_(torch, fc, rng)
    data = {c: normal(torch, rng, 7, 4) + c for c in range(4)}
    res = {}

    def herding(features, m):
        features = features / features.norm(dim=1, keepdim=True)
        class_mean = features.mean(0)
        exemplars, chosen = [], []
        mu_p = torch.zeros_like(class_mean)
        for k in range(1, m + 1):
            S = torch.stack(exemplars).sum(0) if exemplars else torch.zeros_like(class_mean)
            phi = features
            mu_p = 1.0 / k * (phi + S)
            mu_p = mu_p / mu_p.norm(dim=1, keepdim=True)
            dist = torch.sqrt(torch.sum((class_mean - mu_p) ** 2, dim=1))
            if chosen:
                dist[torch.tensor(chosen)] = float("inf")
            i = int(torch.argmin(dist))
            chosen.append(i)
            exemplars.append(features[i])
        return chosen

    params = list(feat.parameters()) + list(fc.parameters())
    opt = torch.optim.SGD(params, lr=0.1, weight_decay=1e-5)
    exemplar_sets = []
    old_feat = old_fc = None
    for task, classes in enumerate([(0, 1), (2, 3)]):
        n_known = 2 * task
        x = torch.cat([data[c] for c in classes] + [e for e, _ in exemplar_sets])
        y = torch.cat([torch.full((7,), c) for c in classes] +
                      [torch.full((e.shape[0],), c) for e, c in exemplar_sets])
        if old_feat is not None:
            with torch.no_grad():
                q = torch.sigmoid(old_fc(old_feat(x)))
        for _ in range(3):
            logits = fc(feat(x))[:, :n_known + 2]
            target = F.one_hot(y, 4).float()[:, :n_known + 2]
            if old_feat is not None:
                target[:, :n_known] = q[:, :n_known]
            loss = F.binary_cross_entropy_with_logits(logits, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            res.setdefault("loss", []).append(loss.item())
        old_feat = copy.deepcopy(feat).requires_grad_(False)
        old_fc = copy.deepcopy(fc).requires_grad_(False)
        for c in classes:
            with torch.no_grad():
                idx = herding(feat(data[c]), 3)
            res.setdefault("herd", []).extend(idx)
            exemplar_sets.append((data[c][idx], c))
    # nearest-mean-of-exemplars
    with torch.no_grad():
        means = []
        for e, _ in exemplar_sets:
            f = F.normalize(feat(e), p=2, dim=1)
            m = f.mean(0)
            means.append(m / m.norm())
        means = torch.stack(means)
        xq = torch.cat([data[c][:2] for c in range(4)])
        fq = F.normalize(feat(xq), dim=1)
        dists = (fq.unsqueeze(2) - means.t().unsqueeze(0)).pow(2).sum(1).squeeze()
        _, preds = dists.min(1)
        res["means"] = means
        res["preds"] = preds.tolist()
        res["cdist"] = torch.cdist(fq, means).argmin(1).tolist()
    return res


def avalanche_program(torch):
    """Avalanche-style strategies: LwF with kl_div(log_target=True), MAS importance from
    |grad| of the output norm, SI path integral with p.grad * delta, reservoir buffer with
    random_split / Subset / ConcatDataset plumbing, zero_grad(set_to_none=False)."""
    rng = np.random.default_rng(14)
    nn, F = torch.nn, torch.nn.functional
    data = torch.utils.data
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    fill_(torch, net, rng)
    X, Y = normal(torch, rng, 12, 4), torch.from_numpy(rng.integers(0, 3, 12))
    ds = data.TensorDataset(X, Y)
    a, b = data.random_split(ds, [8, 4], generator=torch.Generator().manual_seed(0))
    res = {"split": [len(a), len(b)]}
    sub = data.Subset(ds, [0, 3, 5, 7])
    cat = data.ConcatDataset([sub, data.Subset(ds, [1, 2])])
    loader = data.DataLoader(cat, batch_size=3, shuffle=False)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    prev = {n: p.detach().clone() for n, p in net.named_parameters()}
    w = {n: torch.zeros_like(p) for n, p in net.named_parameters()}
    for xb, yb in loader:
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(net(xb), yb).backward()
        unreg = {n: p.grad.clone() for n, p in net.named_parameters()}
        opt.step()
        for n, p in net.named_parameters():
            w[n] -= unreg[n] * (p.detach() - prev[n])
            prev[n] = p.detach().clone()
    res["si_w"] = [w[n] for n in w]
    # MAS
    imp = {n: torch.zeros_like(p) for n, p in net.named_parameters()}
    for xb, _ in loader:
        net.zero_grad()
        out = net(xb)
        loss = torch.norm(out, p="fro", dim=1).pow(2).mean()
        loss.backward()
        for n, p in net.named_parameters():
            imp[n] += p.grad.abs()
    maxi = max(i.max() for i in imp.values())
    res["mas"] = [i / maxi for i in imp.values()]
    # LwF with log_target
    old = __import__("copy").deepcopy(net)
    for _ in range(2):
        xb = normal(torch, rng, 5, 4)
        with torch.no_grad():
            t = F.log_softmax(old(xb) / 2.0, dim=1)
        o = F.log_softmax(net(xb) / 2.0, dim=1)
        loss = (F.kl_div(o, t, reduction="batchmean", log_target=True)
                + nn.KLDivLoss(reduction="sum", log_target=True)(o, t))
        net.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("lwf", []).append(loss.item())
    res["w"] = net[2].weight
    return res


PROGRAMS = [gem_program, lwf_program, icarl_program, avalanche_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
