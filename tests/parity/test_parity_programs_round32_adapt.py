"""Domain adaptation written as its reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: DANN (a
GradientReversal autograd.Function with Ganin's lambda and lr schedules), DAN's multi-kernel
MMD (by broadcasting and by cdist) with Deep CORAL, ADDA (frozen source encoder, adversarial
target encoder), Transfer-Learning-Library's warm-start GRL / CDAN / MCD, and gradient
reversal by tensor hook, full backward hook and detach arithmetic with MCC and BSP losses.
Siblings _continual, _distill and _events cover the rest of round 32's domain
_fixes pins
what they found."""


import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def dann_program(torch):
    """DANN: GradientReversal Function with lambda schedule, domain classifier, SGD with
    lr annealing by hand (Ganin et al.), BCEWithLogits domain loss."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional

    class GradientReversalFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, lambda_):
            ctx.lambda_ = lambda_
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grads):
            lambda_ = grads.new_tensor(ctx.lambda_)
            dx = -lambda_ * grads
            return dx, None

    class GradientReversal(nn.Module):
        def __init__(self, lambda_=1.0):
            super().__init__()
            self.lambda_ = lambda_

        def forward(self, x):
            return GradientReversalFunction.apply(x, self.lambda_)

    feat = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(True),
                         nn.MaxPool2d(2), nn.Dropout2d(0.0), nn.Flatten())
    clf = nn.Sequential(nn.Linear(4 * 4 * 4, 10), nn.ReLU(), nn.Linear(10, 3))
    grl = GradientReversal()
    disc = nn.Sequential(grl, nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 1))
    for m in (feat, clf, disc):
        fill_(torch, m, rng)
    params = list(feat.parameters()) + list(clf.parameters()) + list(disc.parameters())
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
    res = {}
    steps = 3
    for step in range(steps):
        p = step / steps
        grl.lambda_ = 2. / (1. + np.exp(-10 * p)) - 1
        for g in opt.param_groups:
            g["lr"] = 0.01 / (1. + 10 * p) ** 0.75
        xs, xt = normal(torch, rng, 4, 1, 8, 8), normal(torch, rng, 4, 1, 8, 8) + 0.5
        ys = torch.from_numpy(rng.integers(0, 3, 4))
        x = torch.cat([xs, xt])
        domain_y = torch.cat([torch.ones(xs.shape[0]), torch.zeros(xt.shape[0])])
        f = feat(x)
        label_preds = clf(f[:xs.shape[0]])
        domain_preds = disc(f).squeeze()
        label_loss = F.cross_entropy(label_preds, ys)
        domain_loss = F.binary_cross_entropy_with_logits(domain_preds, domain_y)
        loss = label_loss + domain_loss
        opt.zero_grad()
        loss.backward()
        res.setdefault("feat_grad", []).append(feat[0].weight.grad.clone())
        opt.step()
        acc = (label_preds.max(1)[1] == ys).float().mean().item()
        res.setdefault("loss", []).append([label_loss.item(), domain_loss.item(), acc])
    res["bn_mean"] = feat[1].running_mean
    res["w"] = disc[1].weight
    x = normal(torch, rng, 2, 1, 8, 8).requires_grad_()
    y = GradientReversalFunction.apply(x, 0.5)
    (y * 2).sum().backward()
    res["grl_grad"] = x.grad
    res["grl_fn"] = [type(y.grad_fn).__name__]
    return res


def mmd_program(torch):
    """Multi-kernel MMD (Long et al. DAN): Gaussian kernels with bandwidth from the pairwise
    distance mean, via cdist and by broadcasting, plus Deep CORAL loss."""
    rng = np.random.default_rng(1)
    nn = torch.nn

    def guassian_kernel(source, target, kernel_mul=2.0, kernel_num=5, fix_sigma=None):
        n_samples = int(source.size()[0]) + int(target.size()[0])
        total = torch.cat([source, target], dim=0)
        n, d = int(total.size(0)), int(total.size(1))
        total0 = total.unsqueeze(0).expand(n, n, d)
        total1 = total.unsqueeze(1).expand(n, n, d)
        L2_distance = ((total0 - total1) ** 2).sum(2)
        if fix_sigma:
            bandwidth = fix_sigma
        else:
            bandwidth = torch.sum(L2_distance.data) / (n_samples ** 2 - n_samples)
        bandwidth /= kernel_mul ** (kernel_num // 2)
        bandwidth_list = [bandwidth * (kernel_mul ** i) for i in range(kernel_num)]
        kernel_val = [torch.exp(-L2_distance / bandwidth_temp) for bandwidth_temp in bandwidth_list]
        return sum(kernel_val)

    def mmd(source, target):
        b = int(source.size()[0])
        kernels = guassian_kernel(source, target)
        XX = kernels[:b, :b]
        YY = kernels[b:, b:]
        XY = kernels[:b, b:]
        YX = kernels[b:, :b]
        return torch.mean(XX + YY - XY - YX)

    def mk_mmd_cdist(x, y, sigmas=(0.5, 1., 2.)):
        z = torch.cat([x, y])
        d2 = torch.cdist(z, z, p=2.0).pow(2)
        k = sum(torch.exp(-d2 / (2 * s ** 2)) for s in sigmas)
        n = x.shape[0]
        return k[:n, :n].mean() + k[n:, n:].mean() - 2 * k[:n, n:].mean()

    def coral(source, target):
        d = source.size(1)
        ns, nt = source.size(0), target.size(0)
        tmp_s = torch.ones((1, ns)) @ source
        cs = (source.t() @ source - (tmp_s.t() @ tmp_s) / ns) / (ns - 1)
        tmp_t = torch.ones((1, nt)) @ target
        ct = (target.t() @ target - (tmp_t.t() @ tmp_t) / nt) / (nt - 1)
        loss = (cs - ct).pow(2).sum().sqrt()
        return loss / (4 * d * d)

    def coral2(s, t):
        cs, ct = torch.cov(s.T), torch.cov(t.T)
        return torch.norm(cs - ct, p="fro") ** 2 / (4 * s.shape[1] ** 2)

    net = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 4))
    fill_(torch, net, rng)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    res = {}
    for _ in range(3):
        xs, xt = normal(torch, rng, 6, 5), 1.5 * normal(torch, rng, 7, 5) + 0.3
        fs, ft = net(xs), net(xt)
        l1 = mmd(fs, ft[:6])
        l2 = mk_mmd_cdist(fs, ft)
        l3 = coral(fs, ft)
        l4 = coral2(fs, ft)
        loss = l1 + l2 + 10 * l3 + l4
        opt.zero_grad()
        loss.backward()
        res.setdefault("g", []).append(net[0].weight.grad.clone())
        opt.step()
        res.setdefault("l", []).append(torch.stack([l1, l2, l3, l4]).detach())
    res["w"] = net[2].weight
    return res


def adda_program(torch):
    """ADDA: pretrain source encoder + classifier, copy to target encoder via load_state_dict,
    freeze source (requires_grad_(False), eval), train discriminator and target encoder with
    flipped labels
    Adam betas (0.5, 0.999)."""
    rng = np.random.default_rng(2)
    nn = torch.nn

    def encoder():
        return nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 4))

    src, clf = encoder(), nn.Linear(4, 3)
    fill_(torch, src, rng)
    fill_(torch, clf, rng)
    opt = torch.optim.Adam(list(src.parameters()) + list(clf.parameters()), lr=1e-3)
    res = {}
    for _ in range(2):
        x = normal(torch, rng, 5, 6)
        y = torch.from_numpy(rng.integers(0, 3, 5))
        loss = nn.CrossEntropyLoss(label_smoothing=0.1)(clf(src(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("pre", []).append(loss.item())
    tgt = encoder()
    tgt.load_state_dict(src.state_dict())
    src.eval()
    for p in src.parameters():
        p.requires_grad_(False)
    critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2), nn.LogSoftmax(dim=1))
    fill_(torch, critic, rng)
    opt_t = torch.optim.Adam(tgt.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.999))
    crit = nn.NLLLoss()
    for _ in range(3):
        xs, xt = normal(torch, rng, 5, 6), normal(torch, rng, 5, 6) * 0.7 + 0.2
        opt_c.zero_grad()
        feat_concat = torch.cat((src(xs), tgt(xt)), 0)
        pred_concat = critic(feat_concat.detach())
        label_concat = torch.cat((torch.ones(5).long(), torch.zeros(5).long()), 0)
        loss_critic = crit(pred_concat, label_concat)
        loss_critic.backward()
        opt_c.step()
        pred_cls = torch.squeeze(pred_concat.max(1)[1])
        acc = (pred_cls == label_concat).float().mean()
        opt_c.zero_grad()
        opt_t.zero_grad()
        feat_tgt = tgt(xt)
        pred_tgt = critic(feat_tgt)
        loss_tgt = crit(pred_tgt, torch.ones(5).long())
        loss_tgt.backward()
        opt_t.step()
        res.setdefault("adv", []).append([loss_critic.item(), loss_tgt.item(), acc.item()])
    res["src_grad_none"] = [p.grad is None for p in src.parameters()]
    res["tgt"] = tgt[2].weight
    with torch.no_grad():
        res["eval"] = clf(tgt(normal(torch, rng, 3, 6))).argmax(1)
    return res


def tllib_program(torch):
    """Transfer-Learning-Library: WarmStartGradientReverseLayer (auto_step), CDAN's
    multilinear map via bmm + entropy conditioning, MCD discrepancy, LambdaLR decay."""
    rng = np.random.default_rng(12)
    nn, F = torch.nn, torch.nn.functional

    class GradientReverseFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, coeff=1.):
            ctx.coeff = coeff
            output = input * 1.0
            return output

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output.neg() * ctx.coeff, None

    class WarmStartGradientReverseLayer(nn.Module):
        def __init__(self, alpha=1.0, lo=0.0, hi=1., max_iters=1000., auto_step=False):
            super().__init__()
            self.alpha, self.lo, self.hi = alpha, lo, hi
            self.iter_num = 0
            self.max_iters = max_iters
            self.auto_step = auto_step

        def forward(self, input):
            decay = np.exp(-self.alpha * self.iter_num / self.max_iters)
            coeff = float(2.0 * (self.hi - self.lo) / (1.0 + decay)
                          - (self.hi - self.lo) + self.lo)
            if self.auto_step:
                self.step()
            return GradientReverseFunction.apply(input, coeff)

        def step(self):
            self.iter_num += 1

    def entropy(predictions, reduction='none'):
        epsilon = 1e-5
        H = -predictions * torch.log(predictions + epsilon)
        H = H.sum(dim=1)
        if reduction == 'mean':
            return H.mean()
        return H

    def binary_accuracy(output, target):
        with torch.no_grad():
            batch_size = target.size(0)
            pred = (output >= 0.5).float().t().view(-1)
            correct = pred.eq(target.view(-1)).float().sum()
            correct.mul_(100. / batch_size)
            return correct

    grl = WarmStartGradientReverseLayer(alpha=1., lo=0., hi=1., max_iters=4, auto_step=True)
    backbone = nn.Sequential(nn.Linear(5, 6), nn.ReLU())
    head = nn.Linear(6, 3)
    head2 = nn.Linear(6, 3)
    disc = nn.Sequential(nn.Linear(18, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1),
                         nn.Sigmoid())
    for m in (backbone, head, head2, disc):
        fill_(torch, m, rng)
    params = [{"params": backbone.parameters(), "lr": 0.1 * 0.01},
              {"params": head.parameters(), "lr": 0.01},
              {"params": head2.parameters()},
              {"params": disc.parameters(), "lr": 0.01}]
    opt = torch.optim.SGD(params, 0.01, momentum=0.9, weight_decay=1e-3, nesterov=True)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda x: 0.01 * (1. + 0.001 * float(x)) ** (-0.75))
    res = {}
    for _ in range(3):
        xs, xt = normal(torch, rng, 4, 5), normal(torch, rng, 4, 5) + 0.4
        ys = torch.from_numpy(rng.integers(0, 3, 4))
        f = backbone(torch.cat((xs, xt), dim=0))
        y = head(f)
        y_s, y_t = y.chunk(2, dim=0)
        f_s, f_t = f.chunk(2, dim=0)
        g = torch.cat((F.softmax(y_s, dim=1), F.softmax(y_t, dim=1)), dim=0).detach()
        ff = torch.cat((f_s, f_t), dim=0)
        h = torch.bmm(g.unsqueeze(2), ff.unsqueeze(1)).view(-1, g.size(1) * ff.size(1))
        d = disc(grl(h))
        d_s, d_t = d.chunk(2, dim=0)
        d_label_s = torch.ones((xs.size(0), 1))
        d_label_t = torch.zeros((xt.size(0), 1))
        weight = 1.0 + torch.exp(-entropy(g))
        batch_size = f.size(0)
        weight = weight / torch.sum(weight) * batch_size
        transfer = F.binary_cross_entropy(d, torch.cat((d_label_s, d_label_t)),
                                          weight.view_as(d))
        acc = 0.5 * (binary_accuracy(d_s, d_label_s) + binary_accuracy(d_t, d_label_t))
        y2_t = head2(f_t)
        disc_loss = torch.mean(torch.abs(F.softmax(y_t, dim=1) - F.softmax(y2_t, dim=1)))
        cls = F.cross_entropy(y_s, ys)
        loss = cls + transfer - 0.1 * disc_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res.setdefault("l", []).append([cls.item(), transfer.item(), disc_loss.item(), acc.item()])
        res.setdefault("lr", []).append([g["lr"] for g in opt.param_groups])
    res["iter"] = [grl.iter_num]
    res["w"] = disc[0].weight
    res["bn"] = disc[1].running_mean
    return res


def hook_grl_program(torch):
    """GRL by tensor hook, by register_full_backward_hook, and by detach trick
    MCC loss
    (minimum class confusion) with temperature and entropy weights via diag / mm."""
    rng = np.random.default_rng(13)
    nn, F = torch.nn, torch.nn.functional
    net = nn.Sequential(nn.Linear(4, 5), nn.Tanh())
    fill_(torch, net, rng)
    res = {}
    x = normal(torch, rng, 3, 4)
    f = net(x)
    h = f.register_hook(lambda g: -0.3 * g)
    (f ** 2).sum().backward()
    res["hook"] = net[0].weight.grad.clone()
    h.remove()
    net.zero_grad(set_to_none=True)
    f = net(x)
    z = f.detach() + 0.3 * (f.detach() - f)   # forward value f, gradient -0.3
    (z ** 2).sum().backward()
    res["trick"] = net[0].weight.grad.clone()

    class Rev(nn.Module):
        def forward(self, x):
            return x.clone()
    rev = Rev()
    rev.register_full_backward_hook(lambda m, gi, go: (-0.3 * gi[0],))
    net.zero_grad()
    out = rev(net(x))
    (out ** 2).sum().backward()
    res["full_hook"] = net[0].weight.grad.clone()

    def mcc(logits, T=2.5):
        batch_size, num_classes = logits.shape
        predictions = F.softmax(logits / T, dim=1)
        entropy_weight = -(predictions * torch.log(predictions + 1e-5)).sum(dim=1).detach()
        entropy_weight = 1 + torch.exp(-entropy_weight)
        entropy_weight = (batch_size * entropy_weight / torch.sum(entropy_weight)).unsqueeze(dim=1)
        ccm = torch.mm((predictions * entropy_weight).transpose(1, 0), predictions)
        ccm = ccm / torch.sum(ccm, dim=1)
        return (torch.sum(ccm) - torch.trace(ccm)) / num_classes

    lg = normal(torch, rng, 6, 4).requires_grad_()
    m = mcc(lg)
    m.backward()
    res["mcc"], res["mcc_g"] = m, lg.grad
    # BSP: batch spectral penalization
    fs = normal(torch, rng, 6, 4).requires_grad_()
    _, s_s, _ = torch.svd(fs.t())
    sigma = torch.pow(s_s[0], 2)
    sigma.backward()
    res["bsp"], res["bsp_g"] = sigma, fs.grad
    return res


PROGRAMS = [dann_program, mmd_program, adda_program, tllib_program, hook_grl_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
