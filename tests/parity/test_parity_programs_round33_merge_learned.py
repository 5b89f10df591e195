"""Merges that learn or match, written as their reference repositories write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights: AdaMerging
(layer-wise merge coefficients trained by entropy minimisation through functional_call),
ZipIt!-style feature matching (correlations accumulated in place, fill_diagonal_, greedy pair
merging by unravel_index), REPAIR (BatchNorm statistics reset with momentum=None and
update_bn), Model Stock (angles between fine-tuned deltas), breadcrumbs/DELLA sparsification
(sorting, ranks by double argsort), a TransformerEncoderLayer merge with attention heads
permuted through in_proj_weight, and EMA/SWA weight averaging with AveragedModel and
_foreach_lerp_. _fixes pins what they found."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def adamerging_program(torch):
    """EnnengYang/AdaMerging: merged = pretrained + sum_k lambda_{k,l} tau_{k,l} per layer,
    lambdas clamped to [0, 1], trained on unlabeled data by prediction entropy."""
    rng = np.random.default_rng(20)
    nn = torch.nn
    base = nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 3))
    fill_(torch, base, rng)
    names = [n for n, _ in base.named_parameters()]
    pretrained = tuple(p.detach().clone() for p in base.parameters())
    task_vectors = []
    for _ in range(3):
        tv = tuple(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32))
                   * 0.1 for p in pretrained)
        task_vectors.append(tv)
    prior = 0.3
    rlambdas = torch.ones(len(pretrained), len(task_vectors)) * prior

    class AdaMerging(nn.Module):
        def __init__(self):
            super().__init__()
            self.lambdas_raw = nn.Parameter(rlambdas.clone())

        def lambdas(self):
            return torch.clamp(self.lambdas_raw, min=0.0, max=1.0)

        def merged(self):
            alph = self.lambdas()
            params = tuple(sum(tuple(pi * lambdasi for pi, lambdasi in zip(p, alph[j].cpu())))
                           for j, p in enumerate(zip(*task_vectors)))
            params = tuple(pre + p for pre, p in zip(pretrained, params))
            return dict(zip(names, params))

        def forward(self, x):
            return torch.func.functional_call(base, self.merged(), (x,))

    def softmax_entropy(x):
        return -(x.softmax(1) * x.log_softmax(1)).sum(1)

    ada = AdaMerging()
    opt = torch.optim.Adam(ada.parameters(), lr=0.2, betas=(0.9, 0.999), weight_decay=0.0)
    xs = [normal(torch, rng, 6, 5) for _ in range(3)]
    res = {"losses": []}
    for step in range(4):
        losses = 0.0
        for x in xs:
            outputs = ada(x)
            loss = softmax_entropy(outputs).mean(0)
            losses += loss
        opt.zero_grad()
        losses.backward()
        opt.step()
        res["losses"].append(losses.item())
    res["lambdas"] = ada.lambdas()
    res["raw_grad"] = ada.lambdas_raw.grad
    res["base_untouched"] = [torch.equal(p, q) for p, q in zip(base.parameters(), pretrained)]
    with torch.no_grad():
        merged = ada.merged()
    res["merged_rg"] = [merged[names[0]].requires_grad, merged[names[0]].grad_fn is None]
    res["merged"] = merged["2.weight"]
    # task-wise variant: one lambda per task, through torch.func.grad on a pure function
    def loss_of(lams, x):
        params = {n: pre + sum(lam * tv[i] for lam, tv in zip(lams, task_vectors))
                  for i, (n, pre) in enumerate(zip(names, pretrained))}
        out = torch.func.functional_call(base, params, (x,))
        return softmax_entropy(out).mean()
    lams = torch.full((3,), 0.3)
    res["func_grad"] = torch.func.grad(loss_of)(lams, xs[0])
    g, v = torch.func.grad_and_value(loss_of)(lams, xs[1])
    res["grad_and_value"] = [g, v]
    return res


def zipit_program(torch):
    """gstoica27/ZipIt: correlations of two models' features from hooks, greedy matching of
    the most correlated feature pairs (including within one model), merge/unmerge matrices."""
    rng = np.random.default_rng(21)
    nn = torch.nn

    def make():
        m = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
        fill_(torch, m, rng)
        return m

    a, b = make(), make()
    x = normal(torch, rng, 20, 4)
    feats = {}
    hooks = [m[1].register_forward_hook(lambda mod, i, o, k=k: feats.__setitem__(k, o))
             for k, m in (("a", a), ("b", b))]
    with torch.no_grad():
        a(x)
        b(x)
    for h in hooks:
        h.remove()
    f = torch.cat([feats["a"], feats["b"]], dim=1)
    n = f.shape[1]
    outer = torch.zeros(n, n)
    mean = torch.zeros(n)
    for row in f.split(5):
        outer += row.T @ row
        mean += row.sum(0)
    count = f.shape[0]
    mean /= count
    cov = outer / count - torch.outer(mean, mean)
    std = torch.diagonal(cov).sqrt()
    corr = cov / (torch.clamp(std, min=1e-4)[:, None] * torch.clamp(std, min=1e-4)[None, :])
    res = {"corr": corr}
    width = 6
    sims = corr.clone()
    sims.fill_diagonal_(-torch.inf)
    sims[:width, :width] = -torch.inf  # match only across models in this variant
    sims[width:, width:] = -torch.inf
    merge = torch.eye(n)
    remaining = n
    pairs = []
    while remaining > width:
        best = torch.argmax(sims)
        r, c = torch.unravel_index(best, sims.shape)
        r, c = int(r), int(c)
        pairs.append([r, c])
        merge[:, r] = (merge[:, r] + merge[:, c]) / 2
        merge[:, c] = 0
        sims[[r, c], :] = -torch.inf
        sims[:, [r, c]] = -torch.inf
        remaining -= 1
    res["pairs"] = sum(pairs, [])
    keep = merge.abs().sum(0) > 0
    merge = merge[:, keep]
    unmerge = (merge > 0).float()
    res["merge"] = merge
    merged_hidden = (f @ merge)
    res["recon"] = torch.linalg.norm(merged_hidden @ unmerge.T - f) / torch.linalg.norm(f)
    # merged first layer weights: W_m = M^T [W_a; W_b]
    w = torch.cat([a[0].weight, b[0].weight], 0)
    res["w_merged"] = merge.T @ w
    res["isinf"] = torch.isinf(sims).all()
    res["posinf"] = [float(torch.tensor(float("inf"))), float(-torch.inf), torch.inf]
    return res


def repair_program(torch):
    """REPAIR (Jordan et al.): interpolate two conv nets, reset BatchNorm statistics with
    momentum=None (cumulative average) over a few batches, and rescale channels to the
    endpoints' statistics."""
    rng = np.random.default_rng(22)
    nn = torch.nn

    def make():
        m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))
        fill_(torch, m, rng)
        return m

    a, b = make(), make()
    batches = [normal(torch, rng, 3, 2, 5, 5) for _ in range(3)]
    for m in (a, b):
        m.train()
        with torch.no_grad():
            for xb in batches:
                m(xb)
    sa, sb = a.state_dict(), b.state_dict()
    mid = copy.deepcopy(a)
    mid.load_state_dict({k: (sa[k] + sb[k]) / 2 if sa[k].is_floating_point() else sa[k]
                         for k in sa})
    res = {"nbt": [int(mid[1].num_batches_tracked)], "nbt_dtype": [str(sa["1.num_batches_tracked"]
                                                                      .dtype).split(".")[-1]]}

    def reset_bn_stats(model, loader):
        for m in model.modules():
            if type(m) is nn.BatchNorm2d:
                m.momentum = None
                m.reset_running_stats()
        model.train()
        with torch.no_grad():
            for xb in loader:
                model(xb)
        model.eval()

    reset_bn_stats(mid, batches)
    res["mean"] = mid[1].running_mean
    res["var"] = mid[1].running_var
    res["nbt2"] = mid[1].num_batches_tracked
    # channel statistics of the endpoints (REPAIR's goal) from a hook on the conv output
    stats = {}

    def track(name):
        def hook(mod, inp, out):
            x = out.transpose(0, 1).flatten(1)
            stats[name] = (x.mean(1), x.var(1, unbiased=False))
        return hook

    for name, m in (("a", a), ("b", b)):
        m.eval()
        h = m[0].register_forward_hook(track(name))
        with torch.no_grad():
            m(torch.cat(batches))
        h.remove()
    goal_mean = (stats["a"][0] + stats["b"][0]) / 2
    goal_std = ((stats["a"][1].sqrt() + stats["b"][1].sqrt()) / 2)
    with torch.no_grad():
        bn = mid[1]
        bn.weight.copy_(goal_std)
        bn.bias.copy_(goal_mean)
    x = torch.cat(batches)
    res["out"] = mid(x)
    # swa_utils.update_bn does the same reset for every BN in a loader's pass
    b2 = copy.deepcopy(b)
    torch.optim.swa_utils.update_bn([(xb, 0) for xb in batches], b2)
    res["update_bn"] = [b2[1].running_mean, b2[1].running_var]
    res["update_bn_state"] = [b2[1].momentum, b2.training, int(b2[1].num_batches_tracked)]
    # fold BN into the conv (merged checkpoints are often exported fused)
    b2.eval()
    fused = torch.nn.utils.fusion.fuse_conv_bn_eval(b2[0], b2[1])
    res["fused"] = fused(batches[0])
    res["unfused"] = b2[1](b2[0](batches[0]))
    return res


def model_stock_program(torch):
    """Model Stock (Jang et al.): the interpolation ratio t = k cos / (1 + (k - 1) cos) from
    the angle between fine-tuned deltas, per layer, then merged = t * avg + (1 - t) * base;
    breadcrumbs and DELLA masks as mergekit computes them."""
    rng = np.random.default_rng(23)
    nn = torch.nn
    base = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 4))
    fill_(torch, base, rng)
    fts = []
    for _ in range(3):
        m = copy.deepcopy(base)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32))
                       * 0.2)
        fts.append(m)
    res = {}
    merged = {}
    base_sd = base.state_dict()
    for key, w0 in base_sd.items():
        ws = [ft.state_dict()[key] for ft in fts]
        offsets = [w - w0 for w in ws]
        if w0.dim() == 1:
            offsets = [o.unsqueeze(0) for o in offsets]
        cos = []
        for i in range(len(offsets)):
            for j in range(i + 1, len(offsets)):
                cos.append(torch.nn.functional.cosine_similarity(offsets[i], offsets[j],
                                                                 dim=-1).clamp(-1, 1))
        cos_theta = torch.stack(cos).mean(dim=0).unsqueeze(-1)
        k = len(ws)
        t = (k * cos_theta) / (1 + (k - 1) * cos_theta)
        w_avg = sum(ws) / len(ws)
        if w0.dim() == 1:
            t = t.squeeze(0)
        merged[key] = t * w_avg + (1 - t) * w0
        res["t_" + key] = t
    model = copy.deepcopy(base)
    model.load_state_dict(merged)
    x = normal(torch, rng, 4, 6)
    res["out"] = model(x)
    # breadcrumbs: drop the largest beta and smallest gamma fraction of |delta| per tensor
    delta = fts[0][0].weight - base[0].weight
    with torch.no_grad():
        flat = delta.abs().view(-1)
        sorted_vals, sorted_idx = torch.sort(flat, descending=False)
        n = flat.numel()
        lo, hi = int(0.2 * n), int((1 - 0.1) * n)
        mask = torch.zeros_like(flat, dtype=torch.bool)
        mask[sorted_idx[lo:hi]] = True
        res["crumbs"] = (delta.view(-1) * mask).view_as(delta)
        res["kept"] = int(mask.sum())
        # DELLA: keep probability rises with magnitude rank; rescale by 1 / p
        ranks = torch.argsort(torch.argsort(flat)).to(torch.float32)
        p_keep = 0.4 + 0.2 * (ranks / (n - 1) - 0.5)
        keep = torch.from_numpy(rng.random(n) < p_keep.numpy())
        res["della"] = torch.where(keep, flat / p_keep, torch.zeros(()))
        res["ranks"] = ranks[:8]
        # sign-consensus mask over the three deltas, as a uint8 vote
        signs = torch.stack([torch.sign(ft[0].weight - base[0].weight) for ft in fts])
        votes = (signs > 0).to(torch.uint8).sum(0)
        res["votes"] = votes
        res["votes_dtype"] = [str(votes.dtype).split(".")[-1], str((votes > 1).sum().dtype)
                              .split(".")[-1]]
    return res


def mha_merge_program(torch):
    """Merging TransformerEncoderLayers: task arithmetic on in_proj_weight/out_proj, a head
    permutation applied through the packed q/k/v rows, and the fast path in eval mode."""
    rng = np.random.default_rng(24)
    nn = torch.nn
    d, heads = 8, 2

    def make():
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=12, dropout=0.0,
                                           batch_first=True, norm_first=True)
        fill_(torch, layer, rng)
        return layer

    a, b = make(), make()
    x = normal(torch, rng, 2, 5, d)
    res = {"keys": list(a.state_dict())}
    merged = copy.deepcopy(a)
    merged.load_state_dict({k: 0.5 * a.state_dict()[k] + 0.5 * b.state_dict()[k]
                            for k in a.state_dict()})
    res["merged"] = merged(x)
    # permute the heads of b: rows of each of q, k, v blocks and columns of out_proj
    hd = d // heads
    perm_heads = torch.tensor([1, 0])
    idx = (perm_heads[:, None] * hd + torch.arange(hd)[None]).reshape(-1)
    p = copy.deepcopy(b)
    with torch.no_grad():
        w = p.self_attn.in_proj_weight.view(3, d, d)
        bias = p.self_attn.in_proj_bias.view(3, d)
        p.self_attn.in_proj_weight.copy_(w[:, idx].reshape(3 * d, d))
        p.self_attn.in_proj_bias.copy_(bias[:, idx].reshape(3 * d))
        p.self_attn.out_proj.weight.copy_(p.self_attn.out_proj.weight[:, idx])
    res["perm_same"] = torch.allclose(p(x), b(x), atol=1e-5)
    res["idx"] = idx
    q, k, v = p.self_attn.in_proj_weight.chunk(3)
    res["qkv"] = [q.shape[0], k.is_contiguous(), v.data_ptr() - q.data_ptr()]
    mask = torch.tensor([[False] * 4 + [True], [False] * 5])
    for mode in ("train", "eval"):
        getattr(merged, mode)()
        with torch.no_grad():
            out = merged(x, src_key_padding_mask=mask)
        res["masked_" + mode] = out[0, :4]
    # attention weights of the merged layer: need_weights and average_attn_weights=False
    attn = merged.self_attn
    _, w_avg = attn(x, x, x, need_weights=True)
    _, w_heads = attn(x, x, x, need_weights=True, average_attn_weights=False)
    res["w_avg"] = w_avg
    res["w_heads"] = w_heads.mean(1)
    return res


def ema_program(torch):
    """timm ModelEmaV3 (_foreach_lerp_ on params, copy of buffers) against AveragedModel with
    get_ema_multi_avg_fn, and a warmup decay."""
    rng = np.random.default_rng(25)
    nn, F = torch.nn, torch.nn.functional
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    fill_(torch, model, rng)
    ema = copy.deepcopy(model).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    averaged = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.8), use_buffers=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    res = {"decays": []}
    for step in range(4):
        x, y = normal(torch, rng, 5, 4), normal(torch, rng, 5, 2)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        decay = min(0.8, (1 + step) / (10 + step))
        res["decays"].append(decay)
        with torch.no_grad():
            ema_p = [p for p in ema.parameters() if p.is_floating_point()]
            model_p = [p for p in model.parameters() if p.is_floating_point()]
            torch._foreach_lerp_(ema_p, model_p, weight=1. - decay)
            for eb, mb in zip(ema.buffers(), model.buffers()):
                eb.copy_(mb)
        averaged.update_parameters(model)
    res["ema"] = ema[0].weight
    res["averaged"] = averaged.module[0].weight
    res["avg_buf"] = averaged.module[1].running_mean
    res["n_averaged"] = averaged.n_averaged
    res["avg_keys"] = list(averaged.state_dict())[:3]
    x = normal(torch, rng, 3, 4)
    averaged.eval()
    res["avg_out"] = averaged(x)
    res["decay_pow"] = [1 - math.exp(-0.1 * s) for s in range(3)]
    return res


PROGRAMS = [adamerging_program, zipit_program, repair_program, model_stock_program,
            mha_merge_program, ema_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
