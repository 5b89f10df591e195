"""Riemannian and hyperbolic learning written as geoopt and the hyperbolic-embedding repositories
write it in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights and data: a Stiefel manifold (QR retraction with the sign fix, Cayley retraction) and a
sphere trained by Riemannian SGD/Adam written as Optimizer subclasses (egrad2rgrad, projection,
parallel transport of the momentum), Poincare-ball embeddings (mobius addition, expmap0/logmap0
with clamps and artanh, acosh distance) with a hyperbolic linear layer and the Lorentz model,
and SPD matrices (log-Euclidean metric and matrix square root through eigh with gradients,
Bures distance). Sibling file _manifold_recsys: SASRec, BERT4Rec and GRU4Rec."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _sym(x):
    return 0.5 * (x + x.transpose(-1, -2))


def _stiefel(torch):
    """geoopt-style Stiefel helpers: projection, QR retraction with sign fix, Cayley."""

    def proju(x, u):
        return u - x @ _sym(x.transpose(-1, -2) @ u)

    def retr_qr(x, u):
        q, r = torch.linalg.qr(x + u)
        unflip = torch.diagonal(r, dim1=-2, dim2=-1).sign().add(0.5).sign()
        return q * unflip.unsqueeze(-2)

    def retr_cayley(x, u, t=1.0):
        p = x.shape[-2]
        xu = x.transpose(-1, -2) @ u
        xt = x.transpose(-1, -2)
        w = u @ xt - x @ u.transpose(-1, -2) + 0.5 * x @ (xu - xu.transpose(-1, -2)) @ xt
        eye = torch.eye(p, dtype=x.dtype, device=x.device)
        return torch.linalg.solve(eye - t / 2 * w, (eye + t / 2 * w) @ x)

    return proju, retr_qr, retr_cayley


def stiefel_rsgd_program(torch):
    """An orthogonal weight on St(6, 3) trained with a hand-written RiemannianSGD (momentum
    transported by projection, QR retraction with the sign fix) and the same problem with the
    Cayley retraction; reports the losses, the orthogonality error and the points."""
    rng = np.random.default_rng(2901)
    proju, retr_qr, retr_cayley = _stiefel(torch)
    x0 = np.linalg.qr(rng.standard_normal((6, 3)))[0].astype(np.float32)
    a = normal(torch, rng, 6, 6)
    a = a @ a.t()
    res = {}

    class RiemannianSGD(torch.optim.Optimizer):
        def __init__(self, params, lr, momentum=0.0, retr=retr_qr):
            super().__init__(params, dict(lr=lr, momentum=momentum))
            self.retr = retr

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    rgrad = proju(p, p.grad)
                    if group["momentum"] > 0:
                        if "momentum_buffer" not in state:
                            state["momentum_buffer"] = rgrad.clone()
                        buf = state["momentum_buffer"]
                        buf.mul_(group["momentum"]).add_(rgrad)
                        rgrad = buf
                    new = self.retr(p, -group["lr"] * rgrad)
                    if group["momentum"] > 0:
                        state["momentum_buffer"].copy_(proju(new, state["momentum_buffer"]))
                    p.copy_(new)
            return loss

    for name, retr in (("qr", retr_qr), ("cayley", retr_cayley)):
        x = torch.nn.Parameter(torch.from_numpy(x0.copy()))
        opt = RiemannianSGD([x], lr=0.05, momentum=0.9, retr=retr)
        losses = []
        for _ in range(5):
            def closure():
                opt.zero_grad()
                loss = -torch.trace(x.t() @ a @ x)
                loss.backward()
                return loss
            losses.append(opt.step(closure).item())
        res[name + "_losses"] = losses
        res[name + "_x"] = x.detach()
        eye = torch.eye(3)
        res[name + "_orth"] = (x.t() @ x - eye).abs().max().item() < 1e-5
        res[name + "_buf"] = opt.state[x]["momentum_buffer"]
    # gradient through the retraction itself
    u = normal(torch, rng, 6, 3).mul_(0.1).requires_grad_()
    y = retr_qr(torch.from_numpy(x0), u)
    (y * normal(torch, rng, 6, 3)).sum().backward()
    res["retr_grad"] = u.grad
    return res


def sphere_radam_program(torch):
    """A geoopt-style RiemannianAdam on the unit sphere: egrad2rgrad by projection, exp_avg
    transported by projection after the retraction, exp_avg_sq a scalar norm per point (the
    manifold inner product), bias corrections; a Rayleigh-quotient loss on 4 points."""
    rng = np.random.default_rng(2902)
    m = normal(torch, rng, 5, 5)
    m = m + m.t()

    def proj(x):
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-15)

    def proju(x, u):
        return u - (x * u).sum(-1, keepdim=True) * x

    class RiemannianAdam(torch.optim.Adam):
        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_sq"] = torch.zeros_like(p[..., :1])
                    grad = proju(p, p.grad.add(p, alpha=group["weight_decay"]))
                    state["step"] += 1
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                    exp_avg_sq.mul_(beta2).add_((grad * grad).sum(-1, keepdim=True),
                                                alpha=1 - beta2)
                    bc1 = 1 - beta1 ** state["step"]
                    bc2 = 1 - beta2 ** state["step"]
                    denom = exp_avg_sq.div(bc2).sqrt_().add_(group["eps"])
                    direction = exp_avg.div(bc1) / denom
                    new = proj(p - group["lr"] * direction)
                    exp_avg.copy_(proju(new, exp_avg))
                    p.copy_(new)
            return None

    x = torch.nn.Parameter(proj(normal(torch, rng, 4, 5)))
    opt = RiemannianAdam([x], lr=0.1, weight_decay=0.0)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = torch.einsum("bi,ij,bj->b", x, m, x).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    st = opt.state[x]
    return {"losses": losses, "x": x.detach(), "norms": x.norm(dim=-1),
            "exp_avg": st["exp_avg"], "exp_avg_sq": st["exp_avg_sq"], "step": [st["step"]],
            "group_keys": sorted(k for k in opt.param_groups[0] if k != "params"
                                 and k in ("lr", "betas", "eps", "weight_decay", "amsgrad"))}


def _poincare(torch, c=1.0):
    """geoopt/HGCN Poincare-ball maps with their clamps."""
    min_norm = 1e-15
    eps = 4e-3

    def artanh(x):
        x = x.clamp(-1 + 1e-7, 1 - 1e-7)
        return 0.5 * (torch.log_(1 + x).sub_(torch.log_(1 - x)))

    def mobius_add(x, y):
        x2 = x.pow(2).sum(dim=-1, keepdim=True)
        y2 = y.pow(2).sum(dim=-1, keepdim=True)
        xy = (x * y).sum(dim=-1, keepdim=True)
        num = (1 + 2 * c * xy + c * y2) * x + (1 - c * x2) * y
        denom = 1 + 2 * c * xy + c ** 2 * x2 * y2
        return num / denom.clamp_min(min_norm)

    def proj(x):
        norm = torch.clamp_min(x.norm(dim=-1, keepdim=True, p=2), min_norm)
        maxnorm = (1 - eps) / (c ** 0.5)
        cond = norm > maxnorm
        projected = x / norm * maxnorm
        return torch.where(cond, projected, x)

    def expmap0(u):
        sqrt_c = c ** 0.5
        u_norm = torch.clamp_min(u.norm(dim=-1, p=2, keepdim=True), min_norm)
        return torch.tanh(sqrt_c * u_norm) * u / (sqrt_c * u_norm)

    def logmap0(y):
        sqrt_c = c ** 0.5
        y_norm = y.norm(dim=-1, p=2, keepdim=True).clamp_min(min_norm)
        return y / y_norm / sqrt_c * artanh(sqrt_c * y_norm)

    def dist(x, y):
        sqdist = (x - y).pow(2).sum(-1)
        denom = (1 - c * x.pow(2).sum(-1)) * (1 - c * y.pow(2).sum(-1))
        return torch.acosh(1 + 2 * sqdist / denom.clamp_min(min_norm) + 1e-7)

    def dist_mobius(x, y):
        sqrt_c = c ** 0.5
        return 2 / sqrt_c * artanh(sqrt_c * mobius_add(-x, y).norm(dim=-1, p=2))

    return dict(artanh=artanh, mobius_add=mobius_add, proj=proj, expmap0=expmap0,
                logmap0=logmap0, dist=dist, dist_mobius=dist_mobius)


def poincare_embeddings_program(torch):
    """Nickel & Kiela's Poincare embeddings: an nn.Embedding trained with the repository's
    RSGD (gradient scaled by ((1 - |x|^2)^2) / 4, then projected back into the ball with a
    renorm-like clamp), softmax over one positive and sampled negatives of the acosh distance,
    plus the mobius-form distance and the HNN mobius linear layer (logmap0 -> Linear ->
    expmap0 -> mobius bias add) with its gradients."""
    rng = np.random.default_rng(2903)
    P = _poincare(torch)
    nn, F = torch.nn, torch.nn.functional
    emb = nn.Embedding(10, 3, sparse=False)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(rng.uniform(-1e-1, 1e-1, (10, 3)).astype(np.float32)))
    pairs = torch.from_numpy(rng.integers(0, 10, (6, 5)).astype(np.int64))

    class RSGD(torch.optim.Optimizer):
        def __init__(self, params, lr):
            super().__init__(params, dict(lr=lr))

        def step(self, lr=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad.data
                    p_sqnorm = torch.sum(p.data ** 2, dim=-1, keepdim=True)
                    d_p = d_p * ((1 - p_sqnorm) ** 2 / 4).expand_as(d_p)
                    p.data.add_(d_p, alpha=-(lr or group["lr"]))
                    p.data.copy_(P["proj"](p.data))

    opt = RSGD(emb.parameters(), lr=0.5)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        e = emb(pairs)
        o, s = e.narrow(1, 0, 1), e.narrow(1, 1, e.size(1) - 1)
        dists = P["dist"](s, o.expand_as(s))
        loss = F.cross_entropy(-dists, torch.zeros(pairs.size(0), dtype=torch.long))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res = {"losses": losses, "weight": emb.weight.detach(),
           "in_ball": bool((emb.weight.norm(dim=-1) < 1).all())}
    x = P["proj"](normal(torch, rng, 4, 3) * 0.3)
    y = P["proj"](normal(torch, rng, 4, 3) * 0.3)
    res["dist_two_ways"] = torch.stack([P["dist"](x, y), P["dist_mobius"](x, y)])
    res["exp_log"] = P["expmap0"](P["logmap0"](x))

    class MobiusLinear(nn.Module):
        def __init__(self, din, dout):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(dout, din))
            self.bias = nn.Parameter(torch.empty(dout))

        def forward(self, x):
            mv = P["expmap0"](F.linear(P["logmap0"](x), self.weight))
            mv = P["proj"](mv)
            hyp_bias = P["proj"](P["expmap0"](self.bias.view(1, -1)))
            return P["proj"](P["mobius_add"](mv, hyp_bias))

    lin = MobiusLinear(3, 2)
    fill_(torch, lin, rng)
    xin = x.clone().requires_grad_()
    out = lin(xin)
    act = P["expmap0"](F.relu(P["logmap0"](out)))
    act.pow(2).sum().backward()
    res["hnn_out"] = out.detach()
    res["hnn_grads"] = [lin.weight.grad, lin.bias.grad, xin.grad]
    # boundary: a point pushed past the ball is clamped and artanh stays finite
    far = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    res["far_log"] = P["logmap0"](P["proj"](far))
    res["zero_exp"] = P["expmap0"](torch.zeros(2, 3))
    return res


def lorentz_hgcn_program(torch):
    """HGCN's hyperboloid manifold: expmap0/logmap0 with the time coordinate, Minkowski dot
    with clamps, arcosh distance, a hyperbolic graph convolution (logmap0 -> adjacency
    aggregation with a sparse matmul -> expmap0) and a Fermi-Dirac decoder trained by Adam."""
    rng = np.random.default_rng(2904)
    nn, F = torch.nn, torch.nn.functional
    K = 1.0
    eps = 1e-7

    def minkowski_dot(x, y, keepdim=True):
        res = torch.sum(x * y, dim=-1) - 2 * x[..., 0] * y[..., 0]
        if keepdim:
            res = res.view(res.shape + (1,))
        return res

    def sqdist(x, y):
        prod = minkowski_dot(x, y)
        theta = torch.clamp(-prod / K, min=1.0 + eps)
        return torch.clamp(K * torch.acosh(theta) ** 2, max=50.0)

    def expmap0(u):
        sqrtK = K ** 0.5
        d = u.size(-1) - 1
        x = u.narrow(-1, 1, d).view(-1, d)
        x_norm = torch.clamp(torch.norm(x, p=2, dim=1, keepdim=True), min=1e-15)
        theta = x_norm / sqrtK
        res = torch.ones_like(u)
        res[:, 0:1] = sqrtK * torch.cosh(theta)
        res[:, 1:] = sqrtK * torch.sinh(theta) * x / x_norm
        return res

    def logmap0(x):
        sqrtK = K ** 0.5
        d = x.size(-1) - 1
        y = x.narrow(-1, 1, d).view(-1, d)
        y_norm = torch.clamp(torch.norm(y, p=2, dim=1, keepdim=True), min=1e-15)
        res = torch.zeros_like(x)
        theta = torch.clamp(x[:, 0:1] / sqrtK, min=1.0 + eps)
        res[:, 1:] = sqrtK * torch.acosh(theta) * y / y_norm
        return res

    def proj_tan0(u):
        vals = torch.zeros_like(u)
        vals[:, 0:1] = u.narrow(-1, 0, 1)
        return u - vals

    n, d = 6, 4
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [0, 5], [1, 4]])
    adj = np.zeros((n, n), np.float32)
    adj[edges[:, 0], edges[:, 1]] = 1
    adj[edges[:, 1], edges[:, 0]] = 1
    adj += np.eye(n, dtype=np.float32)
    adj /= adj.sum(1, keepdims=True)
    idx = np.stack(np.nonzero(adj))
    adj_t = torch.sparse_coo_tensor(torch.from_numpy(idx), torch.from_numpy(adj[adj != 0]),
                                    (n, n))

    class HGCLayer(nn.Module):
        def __init__(self, din, dout):
            super().__init__()
            self.linear = nn.Linear(din, dout, bias=True)

        def forward(self, h):
            u = proj_tan0(logmap0(h))
            u = proj_tan0(self.linear(u))
            u = torch.spmm(adj_t, u)
            u = proj_tan0(F.relu(u))
            return expmap0(u)

    layers = nn.Sequential(HGCLayer(d, d), HGCLayer(d, d))
    fill_(torch, layers, rng)
    feats = normal(torch, rng, n, d) * 0.5
    feats[:, 0] = 0
    pos = torch.from_numpy(edges[:, 0]), torch.from_numpy(edges[:, 1])
    neg = torch.from_numpy(rng.integers(0, n, (2, 7)).astype(np.int64))
    opt = torch.optim.Adam(layers.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        h = layers(expmap0(feats))
        sq_pos = sqdist(h[pos[0]], h[pos[1]]).squeeze(-1)
        sq_neg = sqdist(h[neg[0]], h[neg[1]]).squeeze(-1)
        probs_pos = 1.0 / (torch.exp((sq_pos - 2.0) / 1.0) + 1.0)
        probs_neg = 1.0 / (torch.exp((sq_neg - 2.0) / 1.0) + 1.0)
        loss = F.binary_cross_entropy(probs_pos, torch.ones_like(probs_pos))
        loss = loss + F.binary_cross_entropy(probs_neg, torch.zeros_like(probs_neg))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    h = layers(expmap0(feats)).detach()
    return {"losses": losses, "h": h, "on_hyperboloid": minkowski_dot(h, h).squeeze(-1),
            "grads": [p.grad for p in layers.parameters()]}


def spd_program(torch):
    """SPD-matrix learning (SPDNet-style): a BiMap layer W^T X W with W on the Stiefel
    manifold, ReEig (eigh + clamp of the eigenvalues), LogEig through eigh for the
    log-Euclidean metric, the matrix square root through eigh with gradients, the Bures
    distance, and a Frechet-mean step; gradients flow through eigh."""
    rng = np.random.default_rng(2905)
    res = {}

    def sym_fn(x, fn):
        w, v = torch.linalg.eigh(x)
        return v @ torch.diag_embed(fn(w)) @ v.transpose(-1, -2)

    a = normal(torch, rng, 3, 5, 5)
    x = a @ a.transpose(-1, -2) + 0.5 * torch.eye(5)
    b = normal(torch, rng, 3, 5, 5)
    y = b @ b.transpose(-1, -2) + 0.5 * torch.eye(5)
    w0 = torch.from_numpy(np.linalg.qr(rng.standard_normal((5, 3)))[0].astype(np.float32))
    W = torch.nn.Parameter(w0.clone())
    xr = x.clone().requires_grad_()
    bimap = W.t() @ xr @ W
    reeig = sym_fn(bimap, lambda w: torch.clamp(w, min=1e-1))
    logeig = sym_fn(reeig, torch.log)
    feat = logeig[:, torch.triu_indices(3, 3)[0], torch.triu_indices(3, 3)[1]]
    target = normal(torch, rng, 3, 6)
    loss = ((feat - target) ** 2).mean()
    loss.backward()
    res["loss"] = loss
    res["grads"] = [W.grad, xr.grad]
    res["riem_grad_W"] = W.grad - W @ _sym(W.t() @ W.grad)
    # log-Euclidean distance and Bures-Wasserstein distance with the matrix sqrt through eigh
    xs = x.clone().requires_grad_()
    d_le = (sym_fn(xs, torch.log) - sym_fn(y, torch.log)).flatten(1).norm(dim=-1)
    sx = sym_fn(xs, torch.sqrt)
    cross = sym_fn(sx @ y @ sx, lambda w: w.clamp_min(0).sqrt())
    bures2 = (torch.diagonal(xs, dim1=-2, dim2=-1).sum(-1)
              + torch.diagonal(y, dim1=-2, dim2=-1).sum(-1)
              - 2 * torch.diagonal(cross, dim1=-2, dim2=-1).sum(-1))
    (d_le.sum() + bures2.clamp_min(0).sqrt().sum()).backward()
    res["d_le"] = d_le
    res["bures"] = bures2.detach()
    res["sqrt_sq"] = sx.detach() @ sx.detach()
    res["xs_grad"] = xs.grad
    # log-Euclidean Frechet mean and one matrix_exp round trip
    mean_log = sym_fn(x, torch.log).mean(0)
    res["frechet"] = torch.linalg.matrix_exp(mean_log)
    res["frechet_eigh"] = sym_fn(mean_log, torch.exp)
    res["cholesky_logdet"] = 2 * torch.log(torch.diagonal(torch.linalg.cholesky(x),
                                                          dim1=-2, dim2=-1)).sum(-1)
    res["logdet"] = torch.logdet(x)
    return res


def geoopt_parameters_program(torch):
    """geoopt's own plumbing: ManifoldTensor (a Tensor subclass made by _make_subclass with
    the disabled __torch_function__) and ManifoldParameter(ManifoldTensor, nn.Parameter),
    their reprs, module registration, deepcopy through Parameter.__deepcopy__, an
    optimizer that picks each parameter's manifold by isinstance, torch.jit.script'ed math
    helpers, and HGCN's Artanh/Arcosh autograd.Functions computing in float64; the optimizer's
    state_dict round trip."""
    import copy

    rng = np.random.default_rng(2906)

    class ManifoldTensor(torch.Tensor):
        def __new__(cls, *args, manifold="sphere", requires_grad=False, **kwargs):
            data = args[0].data if len(args) == 1 and isinstance(args[0], torch.Tensor) \
                else torch.Tensor(*args, **kwargs)
            instance = torch.Tensor._make_subclass(cls, data, requires_grad)
            instance.manifold = manifold
            return instance

        __torch_function__ = torch._C._disabled_torch_function_impl

        def proj_(self):
            return self.copy_(self / self.norm(dim=-1, keepdim=True))

        def __repr__(self):
            return "Tensor on {} containing:\n".format(self.manifold) + torch.Tensor.__repr__(self)

    class ManifoldParameter(ManifoldTensor, torch.nn.Parameter):
        def __new__(cls, data=None, manifold="sphere", requires_grad=True):
            if not isinstance(data, ManifoldTensor):
                data = ManifoldTensor(data, manifold=manifold)
            instance = ManifoldTensor._make_subclass(cls, data, requires_grad)
            instance.manifold = data.manifold
            return instance

        def __repr__(self):
            return "Parameter on {} containing:\n".format(self.manifold) \
                + torch.Tensor.__repr__(self)

    @torch.jit.script
    def _project_tan(x, u, dim: int = -1):
        return u - (x * u).sum(dim=dim, keepdim=True) * x

    class Artanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x = x.clamp(-1 + 1e-15, 1 - 1e-15)
            ctx.save_for_backward(x)
            z = x.double()
            return (torch.log_(1 + z).sub_(torch.log_(1 - z))).mul_(0.5).to(x.dtype)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output / (1 - input ** 2)

    class Arcosh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x = x.clamp(min=1.0 + 1e-15)
            ctx.save_for_backward(x)
            z = x.double()
            return torch.log_(z + torch.sqrt_(z.pow(2) - 1)).clamp_min_(1e-15).to(x.dtype)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output / (input ** 2 - 1) ** 0.5

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.points = ManifoldParameter(normal(torch, rng, 4, 3))
            self.scale = torch.nn.Parameter(torch.ones(()))

    model = Model()
    res = {"reprs": [repr(ManifoldTensor(torch.tensor([[3.0, 4.0]]))),
                     repr(ManifoldParameter(torch.tensor([1.0, 0.0])))],
           "kinds": [type(model.points).__name__,
                     isinstance(model.points, torch.nn.Parameter),
                     isinstance(model.scale, ManifoldTensor),
                     type(model.points * 2).__name__, type(model.points.data).__name__],
           "names": [n for n, _ in model.named_parameters()]}
    with torch.no_grad():
        model.points.proj_()
    twin = copy.deepcopy(model)
    res["deepcopy"] = [type(twin.points).__name__, str(twin.points.manifold),
                       twin.points is not model.points]

    class RiemannianSGD(torch.optim.Optimizer):
        def __init__(self, params, lr, stabilize=None):
            super().__init__(params, dict(lr=lr, stabilize=stabilize))

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    state["step"] = state.get("step", 0) + 1
                    if isinstance(p, ManifoldParameter):
                        rgrad = _project_tan(p, p.grad)
                        p.add_(rgrad, alpha=-group["lr"]).proj_()
                    else:
                        p.add_(p.grad, alpha=-group["lr"])

    opt = RiemannianSGD(model.parameters(), lr=0.2)
    anchors = normal(torch, rng, 4, 3)
    anchors = anchors / anchors.norm(dim=-1, keepdim=True)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        cos = (model.points * anchors).sum(-1) * model.scale
        d = Arcosh.apply(1 + (1 - cos.clamp(-0.999, 0.999)) * 2)
        a = Artanh.apply(0.5 * torch.tanh(cos))
        loss = d.pow(2).mean() - a.mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["points"] = model.points.detach()
    res["norms"] = model.points.detach().norm(dim=-1)
    res["grad_fns"] = [d.grad_fn.name(), a.grad_fn.name()]
    sd = opt.state_dict()
    opt2 = RiemannianSGD(twin.parameters(), lr=0.1)
    opt2.load_state_dict(sd)
    res["state"] = [opt2.state[twin.points]["step"], opt2.param_groups[0]["lr"],
                    str(opt2.param_groups[0]["stabilize"])]
    return res


PROGRAMS = [stiefel_rsgd_program, sphere_radam_program, poincare_embeddings_program,
            lorentz_hgcn_program, spd_program, geoopt_parameters_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 QR / solve / eigh through several retraction steps
        "stiefel_rsgd_program": (1e-4, 1e-5),
        # eigh-based matrix functions: float32 eigenvector round-off (LAPACK vs LAPACK order)
        "spd_program": (1e-4, 1e-4),
        # acosh near 1 amplifies float32 round-off over the training steps
        "poincare_embeddings_program": (1e-4, 1e-5),
        "lorentz_hgcn_program": (1e-4, 1e-5),
    })
