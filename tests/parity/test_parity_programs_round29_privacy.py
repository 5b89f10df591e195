"""Differentially private training written as opacus and the functorch tutorials write it in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights,
data, Poisson masks and noise: per-sample gradients from forward hooks that save activations and
full backward hooks that build ``grad_sample`` by einsum (Linear, Conv2d through unfold,
Embedding, LayerNorm), per-sample clipping, Gaussian noise and the DPOptimizer's step; the
functorch way (vmap of grad over functional_call with stacked-free params, in_dims tricks,
chunk_size); ghost clipping norms from the saved activations and backprops; GraNd/EL2N scores
for data pruning. Sibling files: _optim (optimizer corners), _fixes."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _grad_sample_hooks(torch, model):
    """opacus's GradSampleModule in small: each trainable leaf module saves its input in a
    forward hook and computes ``p.grad_sample`` from it and the backprop in a full backward
    hook (the per-sample rules are opacus's einsums)."""
    nn, F = torch.nn, torch.nn.functional

    def linear_gs(layer, a, b):
        gs = {layer.weight: torch.einsum("n...i,n...j->nij", b, a)}
        if layer.bias is not None:
            gs[layer.bias] = torch.einsum("n...k->nk", b)
        return gs

    def conv_gs(layer, a, b):
        n = a.shape[0]
        a = F.unfold(a, layer.kernel_size, dilation=layer.dilation, padding=layer.padding,
                     stride=layer.stride)
        b = b.reshape(n, -1, a.shape[-1])
        gs = {layer.weight: torch.einsum("noq,npq->nop", b, a).view(
            (n,) + layer.weight.shape)}
        if layer.bias is not None:
            gs[layer.bias] = torch.sum(b, dim=2)
        return gs

    def embedding_gs(layer, a, b):
        n = a.shape[0]
        index = a.unsqueeze(-1).expand(*a.shape, layer.embedding_dim).reshape(
            n, -1, layer.embedding_dim)
        gs = torch.zeros(n, *layer.weight.shape, device=layer.weight.device,
                         dtype=b.dtype)
        gs.scatter_add_(1, index, b.reshape(n, -1, layer.embedding_dim))
        return {layer.weight: gs}

    def layernorm_gs(layer, a, b):
        dims = list(range(1, a.dim() - len(layer.normalized_shape)))
        normed = F.layer_norm(a, layer.normalized_shape, eps=layer.eps)
        gs = {layer.weight: (normed * b).sum(dim=dims) if dims else normed * b}
        gs[layer.bias] = b.sum(dim=dims) if dims else b
        return gs

    rules = {nn.Linear: linear_gs, nn.Conv2d: conv_gs, nn.Embedding: embedding_gs,
             nn.LayerNorm: layernorm_gs}
    handles = []

    def capture(module, inputs, output):
        if not hasattr(module, "activations"):
            module.activations = []
        module.activations.append(inputs[0].detach())

    def backward(module, grad_input, grad_output):
        a = module.activations.pop()
        b = grad_output[0] * module.loss_scale
        for p, gs in rules[type(module)](module, a, b).items():
            if p.requires_grad:
                p.grad_sample = gs if getattr(p, "grad_sample", None) is None \
                    else p.grad_sample + gs

    for m in model.modules():
        if type(m) in rules:
            m.loss_scale = 1.0
            handles.append(m.register_forward_hook(capture))
            handles.append(m.register_full_backward_hook(backward))
    return handles


def opacus_program(torch):
    """A text-and-image classifier trained by opacus's recipe: Poisson-sampled batches (masks
    from NumPy, an empty batch included), grad_sample by hooks, per-sample clipping by the
    flat norm, Gaussian noise (drawn by NumPy) added to the summed clipped grads, divided by the
    expected batch size; SGD with momentum steps on ``p.grad``; the per-sample grads are
    checked against autograd one sample at a time."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2901)
    N, L, V, E, C = 12, 5, 11, 6, 3

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E)
            self.conv = nn.Conv2d(1, 2, kernel_size=3, padding=1, stride=2)
            self.norm = nn.LayerNorm(E)
            self.fc1 = nn.Linear(E + 8, 8)
            self.fc2 = nn.Linear(8, C)

        def forward(self, tokens, image):
            t = self.norm(self.emb(tokens)).mean(dim=1)
            v = torch.tanh(self.conv(image)).flatten(1)
            h = F.relu(self.fc1(torch.cat([t, v], dim=1)))
            return self.fc2(h)

    model = Net()
    fill_(torch, model, rng)
    handles = _grad_sample_hooks(torch, model)
    tokens = torch.from_numpy(rng.integers(0, V, (N, L)))
    images = normal(torch, rng, N, 1, 4, 4)
    labels = torch.from_numpy(rng.integers(0, C, N))
    sample_rate, max_norm, sigma = 0.5, 0.8, 0.7
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    res = {"losses": [], "norms": [], "batch": []}
    params = [p for p in model.parameters() if p.requires_grad]
    for step in range(4):
        mask = rng.random(N) < sample_rate
        if step == 2:
            mask[:] = False
        idx = torch.from_numpy(np.flatnonzero(mask))
        res["batch"].append(int(idx.numel()))
        opt.zero_grad(set_to_none=True)
        for p in params:
            p.grad_sample = None
        if idx.numel() == 0:
            # opacus: an empty Poisson batch still takes a noisy step of zeros
            summed = [torch.zeros_like(p) for p in params]
        else:
            out = model(tokens[idx], images[idx])
            loss = F.cross_entropy(out, labels[idx], reduction="sum")
            loss.backward()
            res["losses"].append(loss.item())
            per_norms = torch.stack([p.grad_sample.reshape(len(idx), -1).norm(2, dim=-1)
                                     for p in params], dim=1).norm(2, dim=1)
            res["norms"].append(per_norms)
            factor = (max_norm / (per_norms + 1e-6)).clamp(max=1.0)
            summed = [torch.einsum("i,i...", factor, p.grad_sample) for p in params]
        for p, s in zip(params, summed):
            noise = torch.from_numpy(
                rng.standard_normal(tuple(p.shape)).astype(np.float32)) * sigma * max_norm
            p.grad = (s + noise) / (sample_rate * N)
        opt.step()
    # per-sample gradients against autograd on one sample
    for p in params:
        p.grad_sample = None
    out = model(tokens[:3], images[:3])
    F.cross_entropy(out, labels[:3], reduction="sum").backward()
    for name, p in model.named_parameters():
        single = torch.autograd.grad(
            F.cross_entropy(model(tokens[1:2], images[1:2]), labels[1:2], reduction="sum"), p)
        res["gs_" + name] = [p.grad_sample[1], single[0]]
    for h in handles:
        h.remove()
    res["params"] = list(model.parameters())
    res["momentum"] = [opt.state[p]["momentum_buffer"] for p in params]
    res["hooks_left"] = [len(m._forward_hooks) + len(m._backward_hooks)
                         for m in model.modules()]
    return res


def functorch_dp_program(torch):
    """The functorch per-sample-gradient tutorial and its DP-SGD: ``vmap(grad(loss),
    in_dims=(None, None, 0, 0))`` over ``functional_call`` with detached params and buffers,
    ``chunk_size``, a clipped and noised step done by hand with ``torch._foreach_*``; ``grad``
    with ``has_aux``; the result matched against a per-sample loop; per-example weights by
    ``in_dims`` on a dict; a training-mode grad writing BatchNorm buffers it was handed."""
    nn, F = torch.nn, torch.nn.functional
    functional_call, grad, vmap = torch.func.functional_call, torch.func.grad, torch.func.vmap
    rng = np.random.default_rng(2902)
    N, D, H, C = 8, 5, 7, 3

    model = nn.Sequential(nn.Linear(D, H), nn.GELU(), nn.BatchNorm1d(H), nn.Linear(H, C))
    fill_(torch, model, rng)
    model.eval()
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    x = normal(torch, rng, N, D)
    y = torch.from_numpy(rng.integers(0, C, N))

    def compute_loss(params, buffers, sample, target):
        batch, targets = sample.unsqueeze(0), target.unsqueeze(0)
        pred = functional_call(model, (params, buffers), (batch,))
        loss = F.cross_entropy(pred, targets)
        return loss, pred.squeeze(0).softmax(-1)

    ft_grad = vmap(grad(compute_loss, has_aux=True), in_dims=(None, None, 0, 0))
    grads, probs = ft_grad(params, buffers, x, y)
    chunked, _ = vmap(grad(compute_loss, has_aux=True), in_dims=(None, None, 0, 0),
                      chunk_size=3)(params, buffers, x, y)
    res = {"shapes": [str(tuple(g.shape)) for g in grads.values()],
           "probs": probs, "names": list(grads.keys())}
    for k in grads:
        loop = torch.stack([torch.autograd.grad(
            F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]), dict(model.named_parameters())[k])[0]
            for i in range(N)])
        res["g_" + k] = [grads[k], chunked[k], loop]
    # DP-SGD step by hand with foreach ops
    max_norm, sigma, lr = 1.0, 0.5, 0.1
    flat = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()], 1).norm(dim=1)
    scale = (max_norm / (flat + 1e-6)).clamp(max=1.0)
    clipped = [(g * scale.view(-1, *([1] * (g.dim() - 1)))).sum(0) for g in grads.values()]
    noise = [torch.from_numpy(rng.standard_normal(tuple(c.shape)).astype(np.float32))
             for c in clipped]
    torch._foreach_add_(clipped, noise, alpha=sigma * max_norm)
    torch._foreach_div_(clipped, float(N))
    plist = list(params.values())
    new = torch._foreach_sub(plist, torch._foreach_mul(clipped, lr))
    res["new_params"] = list(new)
    res["flat_norms"] = flat
    # in_dims on a dict: per-sample params (an ensemble of per-example weights)
    stacked = {k: v.unsqueeze(0).expand(N, *v.shape) for k, v in params.items()}
    out = vmap(lambda p, s: functional_call(model, (p, buffers), (s.unsqueeze(0),)),
               in_dims=(0, 0))(stacked, x)
    res["ensemble_out"] = out
    res["ensemble_shape"] = [str(tuple(out.shape))]
    # whole-batch grad in training mode, the buffers handed to functional_call as an argument
    # grad does not differentiate: BatchNorm updates them in place
    model.train()
    bufs = {k: v.detach().clone() for k, v in model.named_buffers()}

    def batch_loss(params, buffers):
        return F.cross_entropy(functional_call(model, (params, buffers), (x,)), y)
    g, value = torch.func.grad_and_value(batch_loss)(params, bufs)
    res["train_grads"] = list(g.values())
    res["train_value"] = value
    res["train_buffers"] = [b.float() for b in bufs.values()]
    res["buffer_flags"] = [b.requires_grad or b.grad_fn is not None for b in bufs.values()]
    return res


def ghost_clipping_program(torch):
    """Ghost clipping (Li et al. / opacus's fast gradient clipping): per-sample gradient norms
    of Linear layers on sequences from ``||a_i a_i^T|| * ||g_i g_i^T||`` without materialising
    grad_sample, compared with the materialised norms; a second backward of the reweighted loss
    gives the clipped summed gradient, compared with the clipped per-sample sum."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2903)
    N, T, D, H = 4, 6, 5, 4
    fc1, fc2 = nn.Linear(D, H), nn.Linear(H, 1)
    fill_(torch, [*fc1.parameters(), *fc2.parameters()], rng)
    x = normal(torch, rng, N, T, D)
    y = normal(torch, rng, N)
    saved = {}

    def fwd(name):
        def hook(m, inp, out):
            saved[name + "_a"] = inp[0].detach()
        return hook

    def bwd(name):
        def hook(m, gin, gout):
            saved[name + "_b"] = gout[0].detach()
        return hook

    hs = []
    for name, m in (("fc1", fc1), ("fc2", fc2)):
        hs += [m.register_forward_hook(fwd(name)), m.register_full_backward_hook(bwd(name))]

    def forward():
        return fc2(torch.relu(fc1(x))).squeeze(-1).mean(-1)

    losses = F.mse_loss(forward(), y, reduction="none")
    losses.sum().backward(retain_graph=True)
    res = {"plain_grad": [fc1.weight.grad.clone(), fc2.bias.grad.clone()]}
    sq = torch.zeros(N)
    materialised = torch.zeros(N)
    for name in ("fc1", "fc2"):
        a, b = saved[name + "_a"], saved[name + "_b"]
        aat = torch.bmm(a, a.transpose(1, 2))
        ggt = torch.bmm(b, b.transpose(1, 2))
        sq = sq + (aat * ggt).sum(dim=(1, 2)) + b.sum(1).pow(2).sum(1)
        gs = torch.einsum("ntk,ntj->nkj", b, a)
        materialised = materialised + gs.pow(2).flatten(1).sum(1) + b.sum(1).pow(2).sum(1)
    norms = sq.sqrt()
    res["ghost_norms"] = [norms, materialised.sqrt()]
    coef = (1.0 / (norms + 1e-6)).clamp(max=1.0).detach()
    for p in (*fc1.parameters(), *fc2.parameters()):
        p.grad = None
    (losses * coef).sum().backward()
    res["clipped_grad"] = [fc1.weight.grad, fc1.bias.grad, fc2.weight.grad]
    for h in hs:
        h.remove()
    return res


def data_pruning_program(torch):
    """GraNd and EL2N scores (Paul et al.) for a small classifier: EL2N is the L2 error of the
    softmax against the one-hot label under no_grad over an ensemble of inits; GraNd is the
    per-sample gradient norm by ``torch.func`` (jacrev of the per-sample losses with respect to
    the params dict); the pruned index set by ``topk`` / ``argsort(descending=True)``, a
    ``Subset`` and a DataLoader over it, and one epoch on the kept examples."""
    nn, F = torch.nn, torch.nn.functional
    functional_call, jacrev = torch.func.functional_call, torch.func.jacrev
    data = torch.utils.data
    DataLoader, Subset, TensorDataset = data.DataLoader, data.Subset, data.TensorDataset
    rng = np.random.default_rng(2904)
    N, D, C = 10, 4, 3
    x = normal(torch, rng, N, D)
    y = torch.from_numpy(rng.integers(0, C, N))
    el2n = torch.zeros(N)
    grand = torch.zeros(N)
    for seed in range(2):
        net = nn.Sequential(nn.Linear(D, 6), nn.Tanh(), nn.Linear(6, C))
        fill_(torch, net, rng)
        with torch.no_grad():
            probs = F.softmax(net(x), dim=-1)
            el2n += (probs - F.one_hot(y, C).float()).norm(dim=-1)
        params = dict(net.named_parameters())

        def losses(p):
            return F.cross_entropy(functional_call(net, p, (x,)), y, reduction="none")
        jac = jacrev(losses)(params)
        grand += torch.cat([j.reshape(N, -1) for j in jac.values()], dim=1).norm(dim=1)
    el2n /= 2
    grand /= 2
    keep = torch.argsort(el2n, descending=True)[:6]
    res = {"el2n": el2n, "grand": grand, "keep": keep.tolist(),
           "top_grand": grand.topk(3).indices.tolist()}
    ds = Subset(TensorDataset(x, y), keep.tolist())
    net = nn.Sequential(nn.Linear(D, 6), nn.Tanh(), nn.Linear(6, C))
    fill_(torch, net, rng)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    for xb, yb in DataLoader(ds, batch_size=4, shuffle=False, drop_last=False):
        opt.zero_grad()
        loss = F.cross_entropy(net(xb), yb, label_smoothing=0.1)
        loss.backward()
        opt.step()
        res.setdefault("losses", []).append(loss.item())
    res["params"] = list(net.parameters())
    return res


def dp_optimizer_program(torch):
    """opacus's plumbing around the model: a ``DPOptimizer`` that subclasses Optimizer without
    calling its ``__init__`` (param_groups, state and defaults forwarded to the wrapped SGD as
    properties; clipping, noise and scaling in ``pre_step``), driven by StepLR and a step hook
    on the wrapped optimizer; a ``UniformWithReplacementSampler``-style batch sampler (masks
    from NumPy, an empty batch among them) and opacus's collate wrapper giving an empty batch
    of the right shapes; grad_sample by ``vmap(grad)`` per batch."""
    nn, F = torch.nn, torch.nn.functional
    data = torch.utils.data
    rng = np.random.default_rng(2905)
    N, D, C = 10, 4, 3

    class DPOptimizer(torch.optim.Optimizer):
        def __init__(self, optimizer, *, noise_multiplier, max_grad_norm, expected_batch_size,
                     noise):
            self.original_optimizer = optimizer
            self.noise_multiplier = noise_multiplier
            self.max_grad_norm = max_grad_norm
            self.expected_batch_size = expected_batch_size
            self.noise = noise
            self.step_hook = None
            for p in self.params:
                p.summed_grad = None

        @property
        def params(self):
            return [p for g in self.param_groups for p in g["params"] if p.requires_grad]

        @property
        def param_groups(self):
            return self.original_optimizer.param_groups

        @param_groups.setter
        def param_groups(self, v):
            self.original_optimizer.param_groups = v

        @property
        def state(self):
            return self.original_optimizer.state

        @property
        def defaults(self):
            return self.original_optimizer.defaults

        def zero_grad(self, set_to_none=False):
            for p in self.params:
                p.grad_sample = None
                p.summed_grad = None
            self.original_optimizer.zero_grad(set_to_none)

        def clip_and_accumulate(self):
            n = self.params[0].grad_sample.shape[0]
            if n == 0:
                norms = torch.zeros(0)
            else:
                norms = torch.stack([p.grad_sample.reshape(n, -1).norm(2, dim=-1)
                                     for p in self.params], dim=1).norm(2, dim=1)
            factor = (self.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
            for p in self.params:
                grad = torch.einsum("i,i...", factor, p.grad_sample)
                p.summed_grad = grad if p.summed_grad is None else p.summed_grad + grad
            return norms

        def add_noise(self):
            for p in self.params:
                noise = self.noise(p.summed_grad.shape) * (self.noise_multiplier
                                                           * self.max_grad_norm)
                p.grad = (p.summed_grad + noise).view_as(p)

        def scale_grad(self):
            for p in self.params:
                p.grad /= self.expected_batch_size

        def pre_step(self):
            self.last_norms = self.clip_and_accumulate()
            self.add_noise()
            self.scale_grad()
            if self.step_hook:
                self.step_hook(self)
            return True

        def step(self, closure=None):
            if closure is not None:
                with torch.enable_grad():
                    closure()
            if self.pre_step():
                return self.original_optimizer.step()
            return None

    class PoissonBatches:
        def __init__(self, masks):
            self.masks = masks

        def __iter__(self):
            for m in self.masks:
                yield np.flatnonzero(m).tolist()

        def __len__(self):
            return len(self.masks)

    def wrap_collate_with_empty(collate_fn, shapes, dtypes):
        def collate(batch):
            if len(batch) > 0:
                return collate_fn(batch)
            return [torch.zeros(shape, dtype=dtype) for shape, dtype in zip(shapes, dtypes)]
        return collate

    x = normal(torch, rng, N, D)
    y = torch.from_numpy(rng.integers(0, C, N))
    masks = rng.random((4, N)) < 0.4
    masks[1] = False
    ds = data.TensorDataset(x, y)
    loader = data.DataLoader(ds, batch_sampler=PoissonBatches(masks),
                             collate_fn=wrap_collate_with_empty(
                                 data.default_collate, [(0, D), (0,)], [x.dtype, y.dtype]))
    model = nn.Sequential(nn.Linear(D, 5), nn.ELU(), nn.Linear(5, C))
    fill_(torch, model, rng)
    sgd = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.5, nesterov=True)
    hooked = []
    sgd.register_step_pre_hook(lambda opt, args, kwargs: hooked.append(len(opt.state)))

    def noise(shape):
        return torch.from_numpy(rng.standard_normal(tuple(shape)).astype(np.float32))
    opt = DPOptimizer(sgd, noise_multiplier=0.6, max_grad_norm=0.5,
                      expected_batch_size=4, noise=noise)
    seen = []
    opt.step_hook = lambda o: seen.append(len(o.last_norms))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    names = [k for k, _ in model.named_parameters()]

    def loss_of(params, xi, yi):
        out = torch.func.functional_call(model, params, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))
    per_sample = torch.func.vmap(torch.func.grad(loss_of), in_dims=(None, 0, 0))
    res = {"shapes": [], "lrs": [], "norms": []}
    for xb, yb in loader:
        res["shapes"].append(str(tuple(xb.shape)) + str(tuple(yb.shape))
                             + str(yb.dtype).rsplit(".", 1)[-1])
        opt.zero_grad(set_to_none=True)
        params = {k: v.detach() for k, v in model.named_parameters()}
        gs = per_sample(params, xb, yb)
        for name, p in zip(names, model.parameters()):
            p.grad_sample = gs[name]
        opt.step()
        sched.step()
        res["lrs"].append(opt.param_groups[0]["lr"])
        res["norms"].extend(opt.last_norms.tolist())
    res["hooked"] = hooked
    res["seen"] = seen
    res["params"] = list(model.parameters())
    res["momentum"] = [sgd.state[p]["momentum_buffer"] for p in model.parameters()]
    res["sched"] = [sched.last_epoch, sched.get_last_lr()[0]]
    return res


PROGRAMS = [opacus_program, functorch_dp_program, ghost_clipping_program, data_pruning_program,
            dp_optimizer_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 einsum/norm accumulation order through a few noisy SGD steps
        "opacus_program": (1e-4, 1e-5),
    })
