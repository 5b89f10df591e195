"""Sparse training written as its reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: N:M (2:4)
semi-structured masks by topk over groups of four with SR-STE's straight-through update
(apex ASP / NVIDIA's recipe), movement pruning's TopKBinarizer and sigmoid-threshold scores
(straight-through autograd.Functions), the pruning-at-init saliencies SNIP (|g * w|), GraSP
(Hessian-gradient product) and SynFlow (abs params, all-ones input, iterative), and RigL/SET
dynamic sparse training (drop by magnitude, grow by gradient or by NumPy-drawn positions, with
cosine-annealed drop fractions and masks updated by scatter/index). The sibling _oneshot file
holds SparseGPT/Wanda, channel pruning with BatchNorm re-indexing, torch.sparse inference and
parametrize-based masks."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def nm_sparsity_program(torch):
    """2:4 masks as apex's ASP computes them (m4n2_1d: view(-1, 4), topk of |w|, scatter_),
    and SR-STE training: the forward uses the masked weight through a straight-through
    Function whose backward adds the decay term lambda * (1 - mask) * w."""
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(3411)
    res = {}

    def mn_1d_best(matrix, m, n):
        mat = matrix.abs().reshape(-1, m)
        idx = torch.topk(mat, n, dim=1, largest=True, sorted=False).indices
        mask = torch.zeros_like(mat, dtype=torch.bool).scatter_(1, idx, True)
        return mask.view(matrix.shape)

    class Sparse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, weight, N, M, decay=0.0002):
            ctx.save_for_backward(weight)
            length = weight.numel()
            group = int(length / M)
            weight_temp = weight.detach().abs().permute(0, 2, 3, 1).reshape(group, M) \
                if weight.dim() == 4 else weight.detach().abs().reshape(group, M)
            index = torch.argsort(weight_temp, dim=1)[:, :int(M - N)]
            w_b = torch.ones(weight_temp.shape, device=weight_temp.device)
            w_b = w_b.scatter_(dim=1, index=index, value=0).reshape(weight.shape)
            ctx.mask = w_b
            ctx.decay = decay
            return weight * w_b

        @staticmethod
        def backward(ctx, grad_output):
            weight, = ctx.saved_tensors
            return grad_output + ctx.decay * (1 - ctx.mask) * weight, None, None, None

    class SparseLinear(nn.Linear):
        def __init__(self, *args, N=2, M=4, **kw):
            super().__init__(*args, **kw)
            self.N, self.M = N, M

        def forward(self, x):
            return F.linear(x, Sparse.apply(self.weight, self.N, self.M, 0.01), self.bias)

    w = normal(torch, rng, 6, 8)
    mask = mn_1d_best(w, 4, 2)
    res["asp_mask"] = mask
    res["asp_density"] = float(mask.sum()) / mask.numel()
    res["asp_groups_ok"] = bool((mask.view(-1, 4).sum(1) == 2).all())
    net = nn.Sequential(SparseLinear(8, 8), nn.GELU(), SparseLinear(8, 4))
    fill_(torch, net, rng)
    X, Y = normal(torch, rng, 16, 8), normal(torch, rng, 16, 4)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.0)
    for _ in range(4):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(net(X), Y)
        loss.backward()
        opt.step()
    res["loss"] = loss.detach()
    res["grad0"] = net[0].weight.grad
    with torch.no_grad():
        final = [mn_1d_best(m.weight, 4, 2) for m in (net[0], net[2])]
        for m, k in zip((net[0], net[2]), final):
            m.weight.mul_(k)
    res["final"] = [net[0].weight, net[2].weight]
    res["pattern_ok"] = [bool(((m.weight != 0).view(-1, 4).sum(1) <= 2).all())
                         for m in (net[0], net[2])]
    return res


def movement_pruning_program(torch):
    """Sanh et al.'s movement pruning (emmental's MaskedLinear): learnable scores, TopK and
    sigmoid-threshold binarizers as straight-through autograd.Functions, a cubic threshold
    schedule, and the L0-free 'soft movement' regulariser on sigmoid(scores)."""
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(3412)
    res = {}

    class TopKBinarizer(torch.autograd.Function):
        @staticmethod
        def forward(ctx, inputs, threshold):
            mask = inputs.clone()
            _, idx = inputs.flatten().sort(descending=True)
            j = int(threshold * inputs.numel())
            flat_out = mask.flatten()
            flat_out[idx[j:]] = 0
            flat_out[idx[:j]] = 1
            return mask

        @staticmethod
        def backward(ctx, gradOutput):
            return gradOutput, None

    class ThresholdBinarizer(torch.autograd.Function):
        @staticmethod
        def forward(ctx, inputs, threshold, sigmoid):
            nb_elems = inputs.numel()
            nb_min = int(0.005 * nb_elems) + 1
            if sigmoid:
                mask = (torch.sigmoid(inputs) > threshold).type(inputs.type())
            else:
                mask = (inputs > threshold).type(inputs.type())
            if mask.sum() < nb_min:
                k_threshold = inputs.flatten().kthvalue(max(nb_elems - nb_min, 1)).values
                mask = (inputs > k_threshold).type(inputs.type())
            return mask

        @staticmethod
        def backward(ctx, gradOutput):
            return gradOutput, None, None

    class MaskedLinear(nn.Linear):
        def __init__(self, in_features, out_features, pruning_method="topK"):
            super().__init__(in_features, out_features)
            self.pruning_method = pruning_method
            self.mask_scores = nn.Parameter(torch.empty(self.weight.size()))
            nn.init.constant_(self.mask_scores, val=0.0)

        def forward(self, input, threshold):
            if self.pruning_method == "topK":
                mask = TopKBinarizer.apply(self.mask_scores, threshold)
            else:
                mask = ThresholdBinarizer.apply(self.mask_scores, threshold, True)
            return F.linear(input, mask * self.weight, self.bias)

    def schedule_threshold(step, total_step, warmup_steps, initial_threshold,
                           final_threshold, initial_warmup, final_warmup):
        if step <= initial_warmup * warmup_steps:
            return initial_threshold
        if step > (total_step - final_warmup * warmup_steps):
            return final_threshold
        spars_warmup_steps = initial_warmup * warmup_steps
        spars_schedu_steps = (final_warmup + initial_warmup) * warmup_steps
        mul_coeff = 1 - (step - spars_warmup_steps) / (total_step - spars_schedu_steps)
        return final_threshold + (initial_threshold - final_threshold) * (mul_coeff ** 3)

    for method in ("topK", "sigmoied_threshold"):
        layer = MaskedLinear(6, 5, method)
        head = nn.Linear(5, 3)
        fill_(torch, [layer.weight, layer.bias, head.weight, head.bias], rng)
        with torch.no_grad():
            layer.mask_scores.copy_(normal(torch, rng, 5, 6) * 0.01)
        X = normal(torch, rng, 12, 6)
        Y = torch.from_numpy(rng.integers(0, 3, 12))
        params = [{"params": [layer.mask_scores], "lr": 0.1},
                  {"params": [layer.weight, layer.bias, *head.parameters()], "lr": 0.05}]
        opt = torch.optim.Adam(params)
        thresholds, losses = [], []
        for step in range(6):
            thr = schedule_threshold(step, 6, 2, 1.0 if method == "topK" else 0.0,
                                     0.5 if method == "topK" else 0.1, 0.5, 0.5)
            thresholds.append(thr)
            logits = head(F.relu(layer(X, thr)))
            loss = F.cross_entropy(logits, Y)
            if method != "topK":
                loss = loss + 0.01 * torch.norm(torch.sigmoid(layer.mask_scores), p=1) / \
                    layer.mask_scores.numel()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        res[method + "_thr"] = thresholds
        res[method + "_losses"] = losses
        res[method + "_scores"] = layer.mask_scores
        res[method + "_score_grad"] = layer.mask_scores.grad
    return res


def saliency_at_init_program(torch):
    """Pruning at initialisation: SNIP's |dL/dw * w| (via a weight_mask parameter as the
    original code does), GraSP's Hessian-gradient product (grad with create_graph, then
    z = sum(g * stop_grad), backward) scored -w * Hg, and SynFlow (abs of parameters under
    no_grad with signs saved by torch.sign, an all-ones input, R = sum(output), score |g*w|,
    exponential keep schedule over iterations) with masks from a global kthvalue/topk."""
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(3413)
    res = {}

    def make():
        return nn.Sequential(nn.Linear(10, 12), nn.ReLU(), nn.Linear(12, 12), nn.ReLU(),
                             nn.Linear(12, 4))

    X = normal(torch, rng, 20, 10)
    Y = torch.from_numpy(rng.integers(0, 4, 20))
    net = make()
    fill_(torch, net, rng)
    weights = [m.weight for m in net if isinstance(m, nn.Linear)]

    # SNIP: multiply a ones mask into the weight, its gradient is the connection sensitivity
    masks = [torch.ones_like(w, requires_grad=True) for w in weights]
    h = X
    lin = [m for m in net if isinstance(m, nn.Linear)]
    for i, (m, k) in enumerate(zip(lin, masks)):
        h = F.linear(h, m.weight * k, m.bias)
        if i < len(lin) - 1:
            h = F.relu(h)
    F.cross_entropy(h, Y).backward()
    grads_abs = [torch.abs(k.grad) for k in masks]
    all_scores = torch.cat([torch.flatten(g) for g in grads_abs])
    norm_factor = torch.sum(all_scores)
    all_scores.div_(norm_factor)
    num_to_keep = int(len(all_scores) * 0.3)
    threshold, _ = torch.topk(all_scores, num_to_keep, sorted=True)
    acceptable = threshold[-1]
    res["snip_masks"] = [((g / norm_factor) >= acceptable).float() for g in grads_abs]
    res["snip_thr"] = acceptable

    # GraSP
    net.zero_grad()
    loss = F.cross_entropy(net(X) / 200.0, Y)
    g = torch.autograd.grad(loss, weights)
    stopped = [gi.detach() for gi in g]
    loss = F.cross_entropy(net(X) / 200.0, Y)
    g2 = torch.autograd.grad(loss, weights, create_graph=True)
    z = sum((gi * si).sum() for gi, si in zip(g2, stopped))
    z.backward()
    grasp = [-w.data * w.grad for w in weights]
    scores = torch.cat([torch.flatten(s) for s in grasp])
    eps = 1e-10
    norm = torch.abs(torch.sum(scores)) + eps
    scores.div_(norm)
    k = int(scores.numel() * 0.5)
    thr, _ = torch.topk(scores, k, sorted=True)
    res["grasp_scores"] = grasp
    res["grasp_thr"] = thr[-1]
    res["grasp_keep"] = [int(((s / norm) <= thr[-1]).sum()) for s in grasp]

    # SynFlow
    net2 = make()
    fill_(torch, net2, np.random.default_rng(3414))
    params = [m.weight for m in net2 if isinstance(m, nn.Linear)]
    smasks = [torch.ones_like(p) for p in params]

    @torch.no_grad()
    def linearize(model):
        signs = {}
        for name, param in model.state_dict().items():
            signs[name] = torch.sign(param)
            param.abs_()
        return signs

    @torch.no_grad()
    def nonlinearize(model, signs):
        for name, param in model.state_dict().items():
            param.mul_(signs[name])

    signs = linearize(net2)
    sparsity, epochs = 0.1, 3
    keeps = []
    for epoch in range(epochs):
        for p, mk in zip(params, smasks):
            p.grad = None
            with torch.no_grad():
                p.mul_(mk)
        input_dim = 10
        ones = torch.ones([1, input_dim], dtype=torch.float64).float()
        output = net2(ones)
        torch.sum(output).backward()
        sc = [torch.clone(p.grad * p).detach().abs_() for p in params]
        global_scores = torch.cat([torch.flatten(v) for v in sc])
        dense = sparsity ** ((epoch + 1) / epochs)
        kk = int((1.0 - dense) * global_scores.numel())
        if kk >= 1:
            threshold, _ = torch.kthvalue(global_scores, kk)
            for mk, s in zip(smasks, sc):
                zero = torch.tensor([0.]).to(mk.device)
                one = torch.tensor([1.]).to(mk.device)
                mk.copy_(torch.where(s <= threshold, zero, one))
        keeps.append(int(sum(mk.sum() for mk in smasks)))
    nonlinearize(net2, signs)
    res["synflow_keeps"] = keeps
    res["synflow_masks"] = smasks
    res["synflow_restored"] = params
    return res


def rigl_set_program(torch):
    """RigL (Evci et al., as the rigl-torch port does it): per-layer masks, cosine-annealed
    drop fraction, drop the smallest |w| among active, grow the largest |grad| among
    inactive (the grown weights start at zero), masks applied after every step and the
    dense gradient kept by a tensor hook; SET grows at positions drawn from NumPy."""
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(3415)
    res = {}
    net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    fill_(torch, net, rng)
    W = [net[0].weight, net[2].weight]
    density = 0.4
    masks = []
    for w in W:
        n = w.numel()
        keep = int(density * n)
        score = torch.from_numpy(rng.random(n).astype(np.float32))
        _, idx = torch.sort(score, descending=True)
        m = torch.zeros(n, dtype=torch.bool)
        m[idx[:keep]] = True
        masks.append(m.reshape(w.shape))
    with torch.no_grad():
        for w, m in zip(W, masks):
            w *= m
    dense_grads = [None, None]

    def make_hook(i):
        def hook(grad):
            dense_grads[i] = grad.clone()
            return grad * masks[i]
        return hook

    handles = [w.register_hook(make_hook(i)) for i, w in enumerate(W)]
    X = normal(torch, rng, 24, 8)
    Y = normal(torch, rng, 24, 4)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    T_end, delta, alpha = 8, 2, 0.3

    def cosine_annealing(step):
        return alpha / 2 * (1 + math.cos((step * math.pi) / T_end))

    drops = []
    for step in range(1, 9):
        opt.zero_grad()
        loss = F.mse_loss(net(X), Y)
        loss.backward()
        if step % delta == 0 and step < T_end:
            frac = cosine_annealing(step)
            drops.append(frac)
            for i, (w, m) in enumerate(zip(W, masks)):
                n_total = m.numel()
                n_ones = int(torch.sum(m).item())
                n_prune = int(n_ones * frac)
                n_keep = n_ones - n_prune
                score_drop = torch.abs(w)
                _, sorted_indices = torch.topk(score_drop.view(-1), k=n_total)
                new_values = torch.where(
                    torch.arange(n_total, device=w.device) < n_keep,
                    torch.ones_like(sorted_indices), torch.zeros_like(sorted_indices))
                mask1 = new_values.scatter(0, sorted_indices, new_values)
                if i == 0:      # RigL: grow by dense gradient magnitude
                    score_grow = torch.abs(dense_grads[i])
                    score_grow = torch.where(mask1.view(m.shape) == 1,
                                             torch.ones_like(score_grow) * -float("inf"),
                                             score_grow)
                else:           # SET: grow at random inactive positions (drawn in NumPy)
                    r = torch.from_numpy(rng.random(m.shape).astype(np.float32))
                    score_grow = r.masked_fill(mask1.view(m.shape).bool(), -1.0)
                _, sorted_indices = torch.topk(score_grow.view(-1), k=n_total)
                new_values = torch.where(
                    torch.arange(n_total, device=w.device) < n_prune,
                    torch.ones_like(sorted_indices), torch.zeros_like(sorted_indices))
                mask2 = new_values.scatter(0, sorted_indices, new_values)
                mask2_reshaped = torch.reshape(mask2, m.shape)
                grow_tensor = torch.zeros_like(w)
                new_connections = ((mask2_reshaped == 1) & (m == 0))
                new_weights = torch.where(new_connections.to(w.device), grow_tensor, w)
                w.data = new_weights
                mask_combined = torch.reshape(mask1 + mask2, m.shape).bool()
                m.data = mask_combined
                mom = opt.state[w]["momentum_buffer"]
                mom.masked_fill_(new_connections, 0)
        opt.step()
        with torch.no_grad():
            for w, m in zip(W, masks):
                w.mul_(m)
    for hd in handles:
        hd.remove()
    res["drops"] = drops
    res["loss"] = loss.detach()
    res["masks"] = [m.float() for m in masks]
    res["nnz"] = [int(m.sum()) for m in masks]
    res["weights"] = W
    res["dense_grads"] = dense_grads
    return res


PROGRAMS = [nm_sparsity_program, movement_pruning_program, saliency_at_init_program,
            rigl_set_program]

# Adam/momentum steps and a double-backward chain reassociate float32 sums (1e-5 relative)
TOLERANCES = {"movement_pruning_program": (1e-4, 1e-5), "nm_sparsity_program": (1e-4, 1e-5),
              "saliency_at_init_program": (1e-4, 1e-6), "rigl_set_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
