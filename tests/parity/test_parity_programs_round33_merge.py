"""Model merging written as its reference repositories write it in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights: task vectors (Ilharco et al.,
state_dict arithmetic, negation, scaling coefficients), TIES-merging (flattened task vectors,
kthvalue/topk trims, sign election, disjoint mean, vector_to_parameters), DARE (drop and
rescale, masks from NumPy plus a bernoulli shape check), SLERP over flattened weights with a
colinearity fallback, uniform and greedy soups (deepcopy, load_state_dict strict/non-strict)
and Fisher merging (diagonal Fisher from functional_call + vmap(grad)). _fixes pins what they
found."""

import copy
from collections import OrderedDict

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _mlp(torch, rng, d_in=6, hidden=8, classes=3):
    nn = torch.nn
    model = nn.Sequential(OrderedDict([
        ("fc1", nn.Linear(d_in, hidden)), ("act", nn.ReLU()),
        ("norm", nn.LayerNorm(hidden)), ("fc2", nn.Linear(hidden, classes))]))
    fill_(torch, model, rng)
    return model


def _finetune(torch, model, x, y, steps=3, lr=0.1):
    """A few SGD steps, as the fine-tuned checkpoints the merges start from."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model


def _accuracy(torch, model, x, y):
    with torch.no_grad():
        logits = model(x)
        return (logits.argmax(dim=-1) == y).float().mean().item(), \
            torch.nn.functional.cross_entropy(logits, y).item()


def task_vectors_program(torch):
    """mlfoundations/task_vectors: TaskVector(pretrained, finetuned), +, -, apply_to(coef)."""
    rng = np.random.default_rng(0)
    base = _mlp(torch, rng)
    x, ys = normal(torch, rng, 12, 6), [torch.from_numpy(rng.integers(0, 3, 12)) for _ in range(3)]
    fts = [_finetune(torch, copy.deepcopy(base), x, y) for y in ys]

    class TaskVector:
        def __init__(self, pretrained_state=None, finetuned_state=None, vector=None):
            if vector is not None:
                self.vector = vector
                return
            with torch.no_grad():
                self.vector = {}
                for key in pretrained_state:
                    if pretrained_state[key].dtype in [torch.int64, torch.uint8]:
                        continue
                    self.vector[key] = finetuned_state[key] - pretrained_state[key]

        def __add__(self, other):
            with torch.no_grad():
                return TaskVector(vector={k: self.vector[k] + other.vector[k]
                                          for k in self.vector})

        def __radd__(self, other):
            return self if other in (None, 0) else self.__add__(other)

        def __neg__(self):
            with torch.no_grad():
                return TaskVector(vector={k: -v for k, v in self.vector.items()})

        def apply_to(self, pretrained, scaling_coef=1.0):
            with torch.no_grad():
                model = copy.deepcopy(pretrained)
                new_state = {}
                state = model.state_dict()
                for key in state:
                    if key not in self.vector:
                        continue
                    new_state[key] = state[key] + scaling_coef * self.vector[key]
                model.load_state_dict(new_state, strict=False)
            return model

    tvs = [TaskVector(base.state_dict(), ft.state_dict()) for ft in fts]
    res = {"keys": sorted(tvs[0].vector)}
    summed = sum(tvs)
    for coef in (0.3, 0.5, 1.0):
        merged = summed.apply_to(base, scaling_coef=coef)
        res[f"acc{coef}"] = [_accuracy(torch, merged, x, y)[1] for y in ys]
    neg = (-tvs[0]).apply_to(base, 0.5)
    res["neg"] = neg.fc2.weight
    res["neg_grad_flag"] = [neg.fc2.weight.requires_grad, neg.fc2.weight.is_leaf]
    # cosine similarity between flattened task vectors, the paper's Figure
    flat = torch.stack([torch.cat([v.flatten() for v in tv.vector.values()]) for tv in tvs])
    res["cos"] = torch.nn.functional.cosine_similarity(flat[:, None], flat[None], dim=-1)
    res["norms"] = torch.linalg.vector_norm(flat, dim=1)
    # state_dict arithmetic keeps the dict's order and returns detached tensors
    sd = base.state_dict(keep_vars=True)
    res["keep_vars"] = [type(sd["fc1.weight"]).__name__, sd["fc1.weight"].requires_grad]
    res["sd_types"] = [type(base.state_dict()).__name__, list(base.state_dict())[0]]
    return res


def ties_program(torch):
    """prateeksr/TIES-Merging: state_dict_to_vector, topk_values_mask, resolve_sign,
    disjoint_merge, vector_to_state_dict."""
    rng = np.random.default_rng(1)
    base = _mlp(torch, rng)
    x, ys = normal(torch, rng, 10, 6), [torch.from_numpy(rng.integers(0, 3, 10)) for _ in range(3)]
    fts = [_finetune(torch, copy.deepcopy(base), x, y, lr=0.2) for y in ys]
    remove_keys = []

    def state_dict_to_vector(state_dict, remove_keys=()):
        shared = copy.deepcopy(state_dict)
        for key in remove_keys:
            if key in shared:
                del shared[key]
        sorted_shared = OrderedDict(sorted(shared.items()))
        return torch.nn.utils.parameters_to_vector([v.reshape(-1) for k, v in
                                                    sorted_shared.items()])

    def vector_to_state_dict(vector, state_dict, remove_keys=()):
        reference = copy.deepcopy(state_dict)
        for key in remove_keys:
            if key in reference:
                del reference[key]
        sorted_reference = OrderedDict(sorted(reference.items()))
        torch.nn.utils.vector_to_parameters(vector, sorted_reference.values())
        return sorted_reference

    def topk_values_mask(M, K=0.7, return_mask=False):
        if K > 1:
            K /= 100
        original_shape = M.shape
        if M.dim() == 1:
            M = M.unsqueeze(0)
        n, d = M.shape
        k = int(d * K)
        k = d - k
        kth_values, _ = M.abs().kthvalue(k, dim=1, keepdim=True)
        mask = M.abs() >= kth_values
        final_mask = mask.squeeze() if original_shape == M.squeeze().shape else mask
        if return_mask:
            return M * final_mask, final_mask.float().mean(dim=1), final_mask
        return M * final_mask, final_mask.float().mean(dim=1)

    def resolve_zero_signs(sign_to_mult, method="majority"):
        majority_sign = torch.sign(sign_to_mult.sum())
        if method == "majority":
            sign_to_mult[sign_to_mult == 0] = majority_sign
        elif method == "minority":
            sign_to_mult[sign_to_mult == 0] = -1 * majority_sign
        return sign_to_mult

    def resolve_sign(Tensor):
        sign_to_mult = torch.sign(Tensor.sum(dim=0))
        return resolve_zero_signs(sign_to_mult, "majority")

    def disjoint_merge(Tensor, merge_func, sign_to_mult):
        merge_func = merge_func.split("-")[-1]
        if sign_to_mult is not None:
            rows_to_keep = torch.where(sign_to_mult.unsqueeze(0) > 0, Tensor > 0, Tensor < 0)
            selected_entries = Tensor * rows_to_keep
        else:
            rows_to_keep = Tensor != 0
            selected_entries = Tensor * rows_to_keep
        if merge_func == "mean":
            non_zero_counts = (selected_entries != 0).sum(dim=0).float()
            disjoint_aggs = torch.sum(selected_entries, dim=0) / torch.clamp(non_zero_counts,
                                                                             min=1)
        elif merge_func == "sum":
            disjoint_aggs = torch.sum(selected_entries, dim=0)
        elif merge_func == "max":
            disjoint_aggs = selected_entries.abs().max(dim=0)[0]
            disjoint_aggs *= sign_to_mult
        return disjoint_aggs

    def ties_merging(flat_task_checks, reset_thresh=None, merge_func=""):
        all_checks = flat_task_checks.clone()
        updated_checks, *_ = topk_values_mask(all_checks, K=reset_thresh, return_mask=False)
        final_signs = resolve_sign(updated_checks)
        assert final_signs is not None
        return disjoint_merge(updated_checks, merge_func, final_signs)

    with torch.no_grad():
        ptm_check = base.state_dict()
        flat_ft = torch.vstack([state_dict_to_vector(ft.state_dict(), remove_keys)
                                for ft in fts])
        flat_ptm = state_dict_to_vector(ptm_check, remove_keys)
        tv_flat_checks = flat_ft - flat_ptm
        res = {"flat_shape": list(tv_flat_checks.shape)}
        for merge_func, k in (("dis-mean", 20), ("dis-sum", 0.5), ("dis-max", 0.3)):
            merged_tv = ties_merging(tv_flat_checks, reset_thresh=k, merge_func=merge_func)
            merged_check = flat_ptm + 0.4 * merged_tv
            res[merge_func] = merged_check
            merged_state = vector_to_state_dict(merged_check, ptm_check, remove_keys)
            model = copy.deepcopy(base)
            model.load_state_dict(merged_state)
            res[merge_func + "_eval"] = [_accuracy(torch, model, x, y)[1] for y in ys]
        _, density, mask = topk_values_mask(tv_flat_checks, K=0.2, return_mask=True)
        res["density"] = density
        res["mask_dtype"] = [str(mask.dtype).split(".")[-1]]
        # the topk flavour used by mergekit's sparsify (magnitude)
        k = int(0.3 * tv_flat_checks.shape[1])
        idx = tv_flat_checks.abs().topk(k, dim=1).indices
        topk_mask = torch.zeros_like(tv_flat_checks).scatter_(1, idx, 1.0)
        res["topk_kept"] = (tv_flat_checks * topk_mask).abs().sum(1)
        # in-place sign election with masked_fill_ and a bool mask in float arithmetic
        signs = torch.sign(tv_flat_checks.sum(0))
        signs.masked_fill_(signs == 0, 1.0)
        agree = (torch.sign(tv_flat_checks) == signs).to(tv_flat_checks.dtype)
        res["agree"] = agree.sum(0)[:10]
        res["vec_grad"] = [flat_ptm.requires_grad, merged_check.is_leaf]
    return res


def dare_program(torch):
    """DARE (Yu et al.): drop delta params with rate p and rescale by 1/(1-p), then task
    arithmetic or TIES on top; masks come from NumPy, torch.bernoulli checked for shapes."""
    rng = np.random.default_rng(2)
    base = _mlp(torch, rng)
    x, y = normal(torch, rng, 10, 6), torch.from_numpy(rng.integers(0, 3, 10))
    ft = _finetune(torch, copy.deepcopy(base), x, y, lr=0.2)
    res = {}

    def dare(delta, p, mask_np):
        mask = torch.from_numpy(mask_np).to(delta.dtype)
        return delta * mask / (1 - p)

    with torch.no_grad():
        merged_sd = {}
        for name, p_base in base.named_parameters():
            p_ft = dict(ft.named_parameters())[name]
            delta = p_ft.detach() - p_base.detach()
            mask_np = (rng.random(tuple(delta.shape)) >= 0.5)
            rescaled = dare(delta, 0.5, mask_np)
            merged_sd[name] = p_base + rescaled
            res[f"{name}_kept"] = torch.count_nonzero(rescaled).item()
        model = copy.deepcopy(base)
        missing, unexpected = model.load_state_dict(merged_sd, strict=True)
        res["missing"] = list(missing) + ["-"]
        res["merged"] = model.fc1.weight
        res["eval"] = list(_accuracy(torch, model, x, y))
        # mergekit-style: random drop with the library's RNG; only shapes/ranges/reproducibility
        delta = ft.fc1.weight - base.fc1.weight
        torch.manual_seed(0)
        m1 = torch.bernoulli(torch.full_like(delta, 0.7))
        torch.manual_seed(0)
        m2 = torch.bernoulli(torch.full_like(delta, 0.7))
        res["bern"] = [*m1.shape, bool(torch.equal(m1, m2)),
                       bool(((m1 == 0) | (m1 == 1)).all()), str(m1.dtype).split(".")[-1]]
        g = torch.Generator().manual_seed(3)
        m3 = torch.empty_like(delta).bernoulli_(0.3, generator=g)
        res["bern_"] = [*m3.shape, bool(((m3 == 0) | (m3 == 1)).all())]
        # dropout with training=True is the other common way to drop-and-rescale
        torch.manual_seed(1)
        d = torch.nn.functional.dropout(delta, p=0.5, training=True)
        kept = d != 0
        res["dropout_rescale"] = torch.allclose(d[kept], delta[kept] * 2)
        # magnitude-based variant: keep the largest-|delta| entries by quantile
        thresh = torch.quantile(delta.abs().flatten(), 0.6)
        res["quantile"] = thresh
        res["mag"] = torch.where(delta.abs() >= thresh, delta, torch.zeros_like(delta))
    missing, unexpected = base.load_state_dict({"fc1.weight": merged_sd["fc1.weight"]},
                                               strict=False)
    res["nonstrict"] = [len(missing), len(unexpected), sorted(missing)[0]]
    try:
        base.load_state_dict({"fc1.weight": merged_sd["fc1.weight"], "extra": delta})
    except RuntimeError as e:
        res["strict_err"] = [str(e).splitlines()[0]]
    return res


def slerp_program(torch):
    """mergekit's slerp: normalise, dot, acos/sin weights, lerp fallback when colinear."""
    rng = np.random.default_rng(3)
    a, b = _mlp(torch, rng), _mlp(torch, rng)

    def lerp(t, v0, v1):
        return (1 - t) * v0 + t * v1

    def normalize(v, eps):
        norm_v = torch.linalg.norm(v)
        if norm_v > eps:
            v = v / norm_v
        return v

    def slerp(t, v0, v1, DOT_THRESHOLD=0.9995, eps=1e-8):
        v0_copy, v1_copy = v0.clone(), v1.clone()
        v0 = normalize(v0, eps)
        v1 = normalize(v1, eps)
        dot = torch.sum(v0 * v1)
        if torch.abs(dot) > DOT_THRESHOLD:
            return lerp(t, v0_copy, v1_copy)
        theta_0 = torch.arccos(dot)
        sin_theta_0 = torch.sin(theta_0)
        theta_t = theta_0 * t
        sin_theta_t = torch.sin(theta_t)
        s0 = torch.sin(theta_0 - theta_t) / sin_theta_0
        s1 = sin_theta_t / sin_theta_0
        return s0 * v0_copy + s1 * v1_copy

    res = {}
    with torch.no_grad():
        sa, sb = a.state_dict(), b.state_dict()
        for t in (0.0, 0.3, 0.5, 1.0):
            merged = {k: slerp(t, sa[k], sb[k]) for k in sa}
            res[f"fc1_{t}"] = merged["fc1.weight"]
        res["colinear"] = slerp(0.4, sa["fc2.bias"], 2 * sa["fc2.bias"])
        # per-layer t from a gradient of values, as mergekit's t: [0, 0.5, 1]
        ts = torch.linspace(0, 1, steps=len(sa))
        merged = OrderedDict((k, slerp(t.item(), sa[k], sb[k])) for t, k in zip(ts, sa))
        model = copy.deepcopy(a)
        model.load_state_dict(merged)
        x = normal(torch, rng, 5, 6)
        res["out"] = model(x)
        # flattened version with torch.nn.functional.normalize and clamp before acos
        va = torch.nn.utils.parameters_to_vector(a.parameters())
        vb = torch.nn.utils.parameters_to_vector(b.parameters())
        na, nb = torch.nn.functional.normalize(va, dim=0), torch.nn.functional.normalize(vb, dim=0)
        omega = torch.acos(torch.clamp((na * nb).sum(), -1, 1))
        so = torch.sin(omega)
        t = 0.25
        res["flat"] = (torch.sin((1.0 - t) * omega) / so) * va + (torch.sin(t * omega) / so) * vb
        torch.nn.utils.vector_to_parameters(res["flat"], model.parameters())
        res["vtp"] = model.fc2.weight
        res["lerp"] = torch.lerp(sa["fc1.weight"], sb["fc1.weight"], 0.3)
        res["lerp_t"] = torch.lerp(sa["fc1.bias"], sb["fc1.bias"], torch.full_like(sa["fc1.bias"],
                                                                                   0.7))
    return res


def soups_program(torch):
    """mlfoundations/model-soups: uniform soup and greedy soup by held-out loss."""
    rng = np.random.default_rng(4)
    base = _mlp(torch, rng)
    x, y = normal(torch, rng, 16, 6), torch.from_numpy(rng.integers(0, 3, 16))
    xv, yv = normal(torch, rng, 8, 6), torch.from_numpy(rng.integers(0, 3, 8))
    ingredients = []
    for i, lr in enumerate((0.05, 0.1, 0.2, 0.3)):
        model = copy.deepcopy(base)
        fill_(torch, [model.fc2.weight], np.random.default_rng(10 + i), scale=0.3)
        ingredients.append(_finetune(torch, model, x, y, lr=lr).state_dict())
    res = {}
    num = len(ingredients)
    uniform = {k: sum(sd[k] for sd in ingredients) / num for k in ingredients[0]}
    model = copy.deepcopy(base)
    model.load_state_dict(uniform)
    res["uniform"] = list(_accuracy(torch, model, xv, yv))
    # greedy soup, ingredients sorted by held-out loss
    scores = []
    for sd in ingredients:
        model.load_state_dict(sd)
        scores.append(_accuracy(torch, model, xv, yv)[1])
    order = np.argsort(scores)
    res["order"] = [int(i) for i in order]
    greedy = {k: v.clone() for k, v in ingredients[order[0]].items()}
    n_in = 1
    best = scores[order[0]]
    chosen = [int(order[0])]
    for i in order[1:]:
        candidate = {k: greedy[k].clone() * (n_in / (n_in + 1.)) + ingredients[i][k].clone() *
                     (1. / (n_in + 1)) for k in ingredients[0]}
        model.load_state_dict(candidate)
        held = _accuracy(torch, model, xv, yv)[1]
        if held < best:
            greedy, n_in, best = candidate, n_in + 1, held
            chosen.append(int(i))
    res["chosen"] = chosen
    res["best"] = best
    model.load_state_dict(greedy)
    res["greedy_w"] = model.fc2.weight
    # weight-space ensembling (WiSE-FT) with alphas, and load_state_dict's copy semantics
    theta_0, theta_1 = base.state_dict(), ingredients[0]
    for alpha in (0.0, 0.5, 1.0):
        theta = {key: (1 - alpha) * theta_0[key] + alpha * theta_1[key] for key in theta_0}
        model.load_state_dict(theta)
        res[f"wise{alpha}"] = model(xv)
    theta["fc2.bias"].zero_()
    res["copied"] = model.fc2.bias
    # torch.stack of a key across ingredients, mean(0), the vectorised uniform soup
    stacked = {k: torch.stack([sd[k] for sd in ingredients]).mean(0) for k in ingredients[0]}
    res["stack_soup"] = [torch.allclose(stacked[k], uniform[k], atol=1e-6) for k in stacked]
    # mismatched shape in load_state_dict
    bad = dict(uniform)
    bad["fc2.bias"] = torch.zeros(4)
    try:
        model.load_state_dict(bad)
    except RuntimeError as e:
        res["shape_err"] = [str(e).replace("\t", "  ").replace("ember", "torch")]
    return res


def fisher_merge_program(torch):
    """Matena & Raffel: diagonal Fisher from per-sample squared grads (functional_call +
    vmap(grad)), merged = sum_i F_i theta_i / sum_i F_i with a floor."""
    rng = np.random.default_rng(5)
    base = _mlp(torch, rng)
    functional_call, grad, vmap = torch.func.functional_call, torch.func.grad, torch.func.vmap
    datasets = []
    models = []
    for i in range(2):
        x, y = normal(torch, rng, 8, 6), torch.from_numpy(rng.integers(0, 3, 8))
        datasets.append((x, y))
        models.append(_finetune(torch, copy.deepcopy(base), x, y, lr=0.2))

    def fisher(model, x):
        params = {k: v.detach() for k, v in model.named_parameters()}
        buffers = {k: v.detach() for k, v in model.named_buffers()}

        def loss_fn(p, b, xi):
            logits = functional_call(model, (p, b), (xi.unsqueeze(0),))
            log_probs = torch.log_softmax(logits, dim=-1)
            # the "empirical" variant uses labels; the model-label variant samples: use argmax
            target = logits.argmax(-1).detach()
            return torch.nn.functional.nll_loss(log_probs, target)

        per_sample = vmap(grad(loss_fn), in_dims=(None, None, 0))(params, buffers, x)
        return {k: (g ** 2).mean(0) for k, g in per_sample.items()}

    fishers = [fisher(m, x) for m, (x, _) in zip(models, datasets)]
    res = {"fisher_fc2": fishers[0]["fc2.weight"], "fisher_keys": sorted(fishers[0])}
    fisher_floor = 1e-6
    merged = {}
    with torch.no_grad():
        for name, _ in base.named_parameters():
            lhs = [torch.maximum(f[name], torch.tensor(fisher_floor)) for f in fishers]
            rhs = [f_ * dict(m.named_parameters())[name] for f_, m in zip(lhs, models)]
            merged[name] = torch.stack(rhs).sum(0) / torch.stack(lhs).sum(0)
    res["merged"] = merged["fc1.weight"]
    model = copy.deepcopy(base)
    model.load_state_dict(merged)
    res["evals"] = [_accuracy(torch, model, x, y)[1] for x, y in datasets]
    # the same Fisher by a loop of autograd.grad, as older code does it
    x0 = datasets[0][0]
    loop = {n: torch.zeros_like(p) for n, p in models[0].named_parameters()}
    for i in range(x0.shape[0]):
        models[0].zero_grad()
        out = models[0](x0[i:i + 1])
        lp = torch.log_softmax(out, -1)
        lp[0, out.argmax()].neg().backward()
        for n, p in models[0].named_parameters():
            loop[n] += p.grad.detach() ** 2 / x0.shape[0]
    res["loop_fisher"] = loop["fc2.weight"]
    res["same"] = torch.allclose(loop["fc1.weight"], fishers[0]["fc1.weight"], atol=1e-6)
    return res


def fisher_lm_program(torch):
    """Fisher merging of two tiny attention LMs: per-token-sequence gradients by
    vmap(grad(functional_call)) through nn.MultiheadAttention (its CPU flash kernel under vmap:
    PyTorch's fallback warnings), padding ignored in the loss, merged by Fisher weights."""
    rng = np.random.default_rng(6)
    nn, F = torch.nn, torch.nn.functional
    vocab, d = 11, 8

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d, padding_idx=0)
            self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)

        def forward(self, ids):
            h = self.emb(ids)
            causal = torch.triu(torch.ones(ids.shape[-1], ids.shape[-1], dtype=torch.bool), 1)
            a, _ = self.attn(h, h, h, attn_mask=causal, need_weights=False)
            h = self.ln(h + F.gelu(a, approximate="tanh"))
            return self.head(h)

    models = []
    for _ in range(2):
        m = LM()
        fill_(torch, m, rng)
        models.append(m)
    ids = torch.from_numpy(rng.integers(0, vocab, (2, 4, 6)))
    ids[:, :, -1] = 0                   # padding the loss ignores

    def fisher(model, batch):
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, x):
            logits = torch.func.functional_call(model, p, (x[None],))
            return F.cross_entropy(logits[0, :-1], x[1:], ignore_index=0)

        grads = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))(params, batch)
        return {k: (g ** 2).mean(0) for k, g in grads.items()}

    fishers = [fisher(m, x) for m, x in zip(models, ids)]
    res = {"f_in_proj": fishers[0]["attn.in_proj_weight"], "f_emb": fishers[1]["emb.weight"]}
    with torch.no_grad():
        merged = {}
        for name, _ in models[0].named_parameters():
            f = torch.stack([fi[name] for fi in fishers]) + 1e-8
            w = torch.stack([dict(m.named_parameters())[name] for m in models])
            merged[name] = (f * w).sum(0) / f.sum(0)
    model = LM()
    model.load_state_dict(merged)
    with torch.no_grad():
        res["merged_logits"] = model(ids[0])
        res["merged_loss"] = F.cross_entropy(model(ids[1])[:, :-1].flatten(0, 1),
                                             ids[1, :, 1:].flatten(), ignore_index=0)
    return res


PROGRAMS = [task_vectors_program, ties_program, dare_program, slerp_program, soups_program,
            fisher_merge_program, fisher_lm_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
