"""Model merging by activations and model editing, written as their reference repositories write
them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
weights: RegMean (Gram matrices from forward hooks, linalg.solve with a diagonal shrink), git
re-basin weight matching (permutations from a greedy assignment written in torch, index_select
of rows and columns through Linear/Conv/BatchNorm layers, running stats permuted), ROME (key
covariance inverse, key/value vectors from hooks, the rank-one weight.add_ under no_grad and
the restore by weight.copy_), MEMIT's batched least-squares update, and LoRA merge/unmerge via
nn.utils.parametrize (register, cached, remove_parametrizations(leave_parametrized=...)) and
merge_and_unload-style module surgery. _fixes pins what they found."""

import copy
from collections import OrderedDict

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def regmean_program(torch):
    """bloomberg/dataless-model-merging: Grams X^T X per Linear from forward hooks, merged
    W = (sum G_i)^-1 sum G_i W_i, with the non-diagonal entries scaled by alpha."""
    rng = np.random.default_rng(10)
    nn = torch.nn

    def make():
        m = nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Linear(7, 4), nn.Tanh(),
                          nn.Linear(4, 3))
        fill_(torch, m, rng)
        return m

    models = [make() for _ in range(3)]
    data = [normal(torch, rng, 9, 5) for _ in range(3)]
    res = {}

    def compute_grams(model, x):
        grams, num = {}, {}
        handles = []

        def hook(name):
            def fn(module, inp, out):
                x = inp[0].detach()
                x = x.view(-1, x.size(-1))
                gram = torch.matmul(x.transpose(0, 1), x)
                if name not in grams:
                    grams[name] = gram / x.size(0)
                    num[name] = x.size(0)
                else:
                    grams[name] = (grams[name] * num[name] + gram) / (num[name] + x.size(0))
                    num[name] += x.size(0)
            return fn

        for name, module in model.named_modules():
            if isinstance(module, nn.Linear):
                handles.append(module.register_forward_hook(hook(name)))
        with torch.no_grad():
            for chunk in x.split(4):
                model(chunk)
        for h in handles:
            h.remove()
        return grams

    grams = [compute_grams(m, x) for m, x in zip(models, data)]
    res["gram_keys"] = sorted(grams[0])
    res["gram0"] = grams[0]["0"]
    alpha = 0.9
    merged = copy.deepcopy(models[0])
    with torch.no_grad():
        for name, module in merged.named_modules():
            if not isinstance(module, nn.Linear):
                continue
            sum_gram = 0
            sum_gram_w = 0
            for g, m in zip(grams, models):
                g = g[name].clone()
                diag = torch.diag_embed(torch.diagonal(g))
                g = alpha * g + (1 - alpha) * diag
                w = m.get_submodule(name).weight
                sum_gram = sum_gram + g
                sum_gram_w = sum_gram_w + torch.matmul(g, w.transpose(0, 1))
            sol = torch.linalg.solve(sum_gram, sum_gram_w)
            res[f"sol{name}"] = sol
            module.weight.copy_(sol.transpose(0, 1))
            module.bias.copy_(torch.stack([m.get_submodule(name).bias for m in models]).mean(0))
            # the inverse-based form used by some forks, and solve with left=False
            inv = torch.linalg.inv(sum_gram)
            res[f"inv{name}"] = torch.matmul(inv, sum_gram_w)
            res[f"right{name}"] = torch.linalg.solve(sum_gram, sum_gram_w.T.contiguous().T,
                                                     left=True)
            res[f"rightT{name}"] = torch.linalg.solve(sum_gram.T, sum_gram_w.T, left=False)
    res["outs"] = [merged(x) for x in data]
    res["hooks_left"] = [len(m[0]._forward_hooks) for m in models]
    # the Gram by einsum and the pinv fallback used when a Gram is singular
    x = data[0]
    g = torch.einsum("ni,nj->ij", x, x)
    sing = torch.cat([g[:, :1], g[:, :1], g[:, 2:]], dim=1)
    res["pinv"] = torch.linalg.pinv(sing, hermitian=False)
    res["lstsq"] = torch.linalg.lstsq(g, x.T[:, :3]).solution
    res["cond"] = torch.linalg.cond(g)
    return res


def rebasin_program(torch):
    """samuela/git-re-basin weight matching for an MLP and a small conv net with BatchNorm:
    permutation specs, greedy (LAP-lite) assignment in torch, permuted state dicts, and the
    interpolation barrier."""
    rng = np.random.default_rng(11)
    nn = torch.nn

    def mlp():
        m = nn.Sequential(OrderedDict([("l0", nn.Linear(4, 6)), ("r0", nn.ReLU()),
                                       ("l1", nn.Linear(6, 6)), ("r1", nn.ReLU()),
                                       ("l2", nn.Linear(6, 3))]))
        fill_(torch, m, rng)
        return m

    a, b = mlp(), mlp()
    ps = {"l0.weight": ("P0", None), "l0.bias": ("P0",), "l1.weight": ("P1", "P0"),
          "l1.bias": ("P1",), "l2.weight": (None, "P1"), "l2.bias": (None,)}
    perm_sizes = {"P0": 6, "P1": 6}

    def get_permuted_param(ps, perm, k, params, except_axis=None):
        w = params[k]
        for axis, p in enumerate(ps[k]):
            if axis == except_axis:
                continue
            if p is not None:
                w = torch.index_select(w, axis, perm[p].int())
        return w

    def greedy_assignment(cost):
        """A maximising assignment: repeatedly take the largest remaining entry."""
        n = cost.shape[0]
        c = cost.clone()
        ci = torch.full((n,), -1, dtype=torch.long)
        for _ in range(n):
            flat = torch.argmax(c)
            r, col = divmod(flat.item(), n)
            ci[r] = col
            c[r, :] = -float("inf")
            c[:, col] = -float("inf")
        return ci

    def weight_matching(ps, params_a, params_b, max_iter=5):
        perm = {p: torch.arange(n) for p, n in perm_sizes.items()}
        perm_names = list(perm.keys())
        order = [[0, 1], [1, 0], [0, 1]]
        for it in range(max_iter):
            progress = False
            for p_ix in order[it % 3]:
                p = perm_names[p_ix]
                n = perm_sizes[p]
                A = torch.zeros((n, n))
                for wk, axes in ps.items():
                    for axis, name in enumerate(axes):
                        if name != p:
                            continue
                        w_a = params_a[wk]
                        w_b = get_permuted_param(ps, perm, wk, params_b, except_axis=axis)
                        w_a = torch.moveaxis(w_a, axis, 0).reshape((n, -1))
                        w_b = torch.moveaxis(w_b, axis, 0).reshape((n, -1))
                        A += w_a @ w_b.T
                ci = greedy_assignment(A)
                old_l = torch.einsum("ij,ij->i", A, torch.eye(n)[perm[p].long()]).sum()
                new_l = torch.einsum("ij,ij->i", A, torch.eye(n)[ci, :]).sum()
                progress = progress or new_l > old_l + 1e-12
                perm[p] = ci
            if not progress:
                break
        return perm

    pa, pb = a.state_dict(), b.state_dict()
    perm = weight_matching(ps, pa, pb)
    res = {"perm": torch.stack(list(perm.values()))}
    permuted = {k: get_permuted_param(ps, perm, k, pb) for k in pb}
    b2 = copy.deepcopy(b)
    b2.load_state_dict(permuted)
    x = normal(torch, rng, 7, 4)
    res["same_fn"] = torch.allclose(b(x), b2(x), atol=1e-6)
    res["b2"] = b2(x)
    # loss barrier along the linear path a -> permuted b
    y = torch.from_numpy(rng.integers(0, 3, 7))
    barrier = []
    m = copy.deepcopy(a)
    for lam in torch.linspace(0, 1, 5):
        m.load_state_dict({k: (1 - lam) * pa[k] + lam * permuted[k] for k in pa})
        with torch.no_grad():
            barrier.append(torch.nn.functional.cross_entropy(m(x), y).item())
    res["barrier"] = barrier
    # conv + BatchNorm: permute output channels of conv1, BN affine and running stats, and the
    # input channels of conv2; activation matching by correlation of hooked features
    conv_a = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4),
                           nn.ReLU(), nn.Conv2d(4, 3, 3, padding=1))
    fill_(torch, conv_a, rng)
    conv_a.train()
    xi = normal(torch, rng, 3, 2, 6, 6)
    for _ in range(2):
        conv_a(xi)
    conv_b = copy.deepcopy(conv_a)
    p = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        conv_b[0].weight.copy_(conv_b[0].weight[p])
        for name in ("weight", "bias", "running_mean", "running_var"):
            t = getattr(conv_b[1], name)
            t.data = t.data.index_select(0, p)
        conv_b[3].weight.data = conv_b[3].weight.data[:, p]
    conv_a.eval()
    conv_b.eval()
    res["conv_same"] = [torch.allclose(conv_a(xi), conv_b(xi), atol=1e-5),
                        int(conv_b[1].num_batches_tracked)]
    res["bn_buf"] = conv_b[1].running_var
    feats = {}
    hs = [mod.register_forward_hook(lambda mod, i, o, k=k: feats.__setitem__(k, o.detach()))
          for k, mod in (("a", conv_a[2]), ("b", conv_b[2]))]
    conv_a(xi)
    conv_b(xi)
    for h in hs:
        h.remove()
    fa = feats["a"].transpose(0, 1).reshape(4, -1)
    fb = feats["b"].transpose(0, 1).reshape(4, -1)
    corr = torch.corrcoef(torch.cat([fa, fb]))[:4, 4:]
    res["corr"] = corr
    res["act_perm"] = greedy_assignment(torch.nan_to_num(corr, nan=-1.0))
    res["cov"] = torch.cov(fa, correction=0)
    return res


def rome_program(torch):
    """kmeng01/rome, rome_main.execute_rome on a tiny MLP 'transformer': the key k* from a
    forward hook on the down-projection input, v* by optimising a delta added by a hook, and
    the rank-one update W += (v* - W k*) (C^-1 k*)^T / ((C^-1 k*)^T k*)."""
    rng = np.random.default_rng(12)
    nn, F = torch.nn, torch.nn.functional
    vocab, d, hidden = 11, 6, 10

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(d, hidden)
            self.c_proj = nn.Linear(hidden, d)

        def forward(self, h):
            return h + self.c_proj(F.gelu(self.c_fc(h), approximate="tanh"))

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.h = nn.ModuleList([Block() for _ in range(2)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)

        def forward(self, ids):
            h = self.wte(ids)
            for block in self.h:
                h = block(h)
            return self.lm_head(self.ln_f(h))

    model = Tiny()
    fill_(torch, model, rng, scale=0.5)
    for p in model.parameters():
        p.requires_grad_(False)
    layer = model.h[0].c_proj
    prompt = torch.from_numpy(rng.integers(0, vocab, (1, 5)))
    target = 7
    res = {}
    # key covariance C from "Wikipedia" samples, collected by a forward pre-hook
    keys = []
    h = layer.register_forward_pre_hook(lambda mod, args: keys.append(args[0].detach()))
    model(torch.from_numpy(rng.integers(0, vocab, (6, 5))))
    h.remove()
    k_all = torch.cat(keys).reshape(-1, hidden).double()
    cov = (k_all.T @ k_all) / k_all.shape[0] + 1e-2 * torch.eye(hidden, dtype=torch.float64)
    res["cov_dtype"] = [str(cov.dtype).split(".")[-1]]
    # k*: the input to c_proj at the subject's last token
    cur = {}

    def grab(mod, args, kwargs):
        cur["k"] = args[0][0, -1].detach().clone()
    h = layer.register_forward_pre_hook(grab, with_kwargs=True)
    with torch.no_grad():
        before = model(prompt)[0, -1].softmax(-1)
    h.remove()
    k_star = cur["k"]
    res["k_star"] = k_star
    # v*: optimise delta added to c_proj's output at the last position
    delta = torch.zeros(d, requires_grad=True)
    target_init = layer(k_star).detach().clone()

    def edit_output(mod, inp, out):
        out = out.clone()
        out[0, -1] += delta
        return out
    h = layer.register_forward_hook(edit_output)
    opt = torch.optim.Adam([delta], lr=0.5)
    res["v_losses"] = []
    for _ in range(5):
        opt.zero_grad()
        logits = model(prompt)
        log_probs = torch.log_softmax(logits[0, -1], dim=-1)
        nll = -log_probs[target]
        weight_decay = 0.5 * (torch.norm(delta) / torch.norm(target_init) ** 2)
        loss = nll + weight_decay
        loss.backward()
        opt.step()
        max_norm = 4 * target_init.norm()
        if delta.norm() > max_norm:
            with torch.no_grad():
                delta[...] = delta * max_norm / delta.norm()
        res["v_losses"].append(loss.item())
    h.remove()
    v_star = target_init + delta.detach()
    # rank-one update; keep the original to restore
    weights_copy = {"h.0.c_proj.weight": layer.weight.detach().clone()}
    left = torch.linalg.solve(cov, k_star.double()).float()
    right = (v_star - layer(k_star)) / torch.dot(left, k_star)
    upd = torch.outer(right, left)
    res["upd_shape"] = list(upd.shape)
    with torch.no_grad():
        w = model.get_parameter("h.0.c_proj.weight")
        w[...] += upd
        after = model(prompt)[0, -1].softmax(-1)
    res["p_target"] = [before[target].item(), after[target].item()]
    res["edited"] = layer(k_star)
    res["v_star"] = v_star
    res["weight_version_changed"] = layer.weight._version > 0
    with torch.no_grad():
        for k, v in weights_copy.items():
            model.get_parameter(k)[...] = v
        res["restored"] = torch.equal(layer.weight, weights_copy["h.0.c_proj.weight"])
        # the alternate in-place spelling used by EasyEdit
        layer.weight.add_(upd.to(layer.weight.dtype), alpha=0.5)
        res["half"] = layer(k_star)
        layer.weight.copy_(weights_copy["h.0.c_proj.weight"])
    res["final"] = model(prompt)[0, -1]
    return res


def memit_program(torch):
    """kmeng01/memit: many edits at once, spread over two layers; the batched least-squares
    update adj_k = solve(lambda C + K K^T, K), upd = R adj_k^T."""
    rng = np.random.default_rng(13)
    nn = torch.nn
    layers = nn.ModuleList([nn.Linear(8, 5, bias=False) for _ in range(2)])
    fill_(torch, layers, rng)
    n_edits = 4
    ks = normal(torch, rng, n_edits, 8)
    targets = normal(torch, rng, n_edits, 5)
    c = normal(torch, rng, 30, 8)
    mom2 = (c.T @ c) / 30
    res = {}
    with torch.no_grad():
        orig = [lay.weight.clone() for lay in layers]
        for i, layer in enumerate(layers):
            cur_zs = layer(ks)
            targets_i = (targets - cur_zs).T
            layer_ks = ks.T
            repeat_factor = layer_ks.size(1) // targets_i.size(1)
            targets_i = targets_i.repeat_interleave(repeat_factor, dim=1)
            adj_k = torch.linalg.solve(15000 / 1e4 * mom2.double() + layer_ks.double() @
                                       layer_ks.T.double(), layer_ks.double())
            resid = targets_i / (len(layers) - i)
            upd_matrix = resid.double() @ adj_k.T
            res[f"upd{i}"] = upd_matrix.float()
            res[f"norms{i}"] = [torch.linalg.norm(orig[i]).item(),
                                torch.linalg.norm(upd_matrix).item()]
            layer.weight[...] += upd_matrix.float()
        res["after"] = [lay(ks) for lay in layers]
        res["deltas"] = layers[1].weight - orig[1]
        for lay, o in zip(layers, orig):
            lay.weight.copy_(o)
    res["restored"] = [torch.equal(lay.weight, o) for lay, o in zip(layers, orig)]
    # cholesky path of the same system
    A = mom2.double() + ks.T.double() @ ks.double()
    L = torch.linalg.cholesky(A)
    res["chol"] = torch.cholesky_solve(ks.T.double(), L).float()
    res["chol_ex"] = torch.linalg.cholesky_ex(A).info
    return res


def lora_merge_program(torch):
    """LoRA merge/unmerge: a parametrization W + B A * scale (minLoRA style), training through
    it, parametrize.cached(), remove_parametrizations(leave_parametrized=True/False), and a
    peft-style LoraLinear with merge()/unmerge() and merge_and_unload surgery."""
    rng = np.random.default_rng(14)
    nn, F = torch.nn, torch.nn.functional
    P = torch.nn.utils.parametrize

    class LoRAParametrization(nn.Module):
        def __init__(self, fan_in, fan_out, rank=2, alpha=4):
            super().__init__()
            self.lora_A = nn.Parameter(torch.zeros((rank, fan_in)))
            self.lora_B = nn.Parameter(torch.zeros((fan_out, rank)))
            self.scale = alpha / rank
            self.enabled = True

        def forward(self, X):
            if not self.enabled:
                return X
            return X + torch.matmul(self.lora_B, self.lora_A).view(X.shape) * self.scale

    model = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3))
    fill_(torch, model, rng)
    base_sd = copy.deepcopy(model.state_dict())
    for layer in (model[0], model[2]):
        out_f, in_f = layer.weight.shape
        P.register_parametrization(layer, "weight", LoRAParametrization(in_f, out_f))
    fill_(torch, [model[0].parametrizations.weight[0].lora_A,
                  model[2].parametrizations.weight[0].lora_A], rng)
    res = {"names": [n for n, _ in model.named_parameters()],
           "sd_keys": list(model.state_dict()),
           "is_param": [P.is_parametrized(model[0]), P.is_parametrized(model[0], "bias")]}
    for n, p in model.named_parameters():
        p.requires_grad_("lora_" in n)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.05)
    x, y = normal(torch, rng, 8, 5), torch.from_numpy(rng.integers(0, 3, 8))
    res["losses"] = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["frozen_grad"] = [model[0].parametrizations.weight.original.grad is None]
    res["B_grad"] = model[2].parametrizations.weight[0].lora_B.grad
    with P.cached():
        res["cached"] = model(x)
        res["cached_same"] = model[0].weight is model[0].weight
    # disable/enable = unmerge/merge without changing tensors
    for layer in (model[0], model[2]):
        layer.parametrizations.weight[0].enabled = False
    res["disabled"] = torch.allclose(model(x), nn.functional.linear(
        F.relu(F.linear(x, base_sd["0.weight"], base_sd["0.bias"])), base_sd["2.weight"],
        base_sd["2.bias"]))
    for layer in (model[0], model[2]):
        layer.parametrizations.weight[0].enabled = True
    merged_out = model(x)
    # a deepcopy shares the parametrized class with the original (removing from one would
    # strip the property from both), so the unmerge copy is rebuilt instead
    res["shared_class"] = type(copy.deepcopy(model)[0]) is type(model[0])
    m2 = nn.Sequential(nn.Linear(5, 6))
    m2.load_state_dict({k: v for k, v in base_sd.items() if k.startswith("0.")})
    P.register_parametrization(m2[0], "weight", LoRAParametrization(5, 6))
    m2[0].parametrizations.weight[0].load_state_dict(
        model[0].parametrizations.weight[0].state_dict())
    P.remove_parametrizations(model[0], "weight", leave_parametrized=True)
    P.remove_parametrizations(model[2], "weight", leave_parametrized=True)
    res["merged"] = torch.allclose(model(x), merged_out, atol=1e-6)
    res["merged_keys"] = list(model.state_dict())
    res["merged_type"] = [type(model[0].weight).__name__, model[0].weight.requires_grad]
    P.remove_parametrizations(m2[0], "weight", leave_parametrized=False)
    res["unmerged"] = torch.allclose(m2[0].weight, base_sd["0.weight"])
    res["still"] = [P.is_parametrized(m2), type(m2[0]).__name__]
    try:
        P.remove_parametrizations(m2[0], "weight")
    except ValueError as e:
        res["err"] = [str(e)]

    class LoraLinear(nn.Linear):
        def __init__(self, in_f, out_f, r=2, lora_alpha=2):
            super().__init__(in_f, out_f)
            self.lora_A = nn.Linear(in_f, r, bias=False)
            self.lora_B = nn.Linear(r, out_f, bias=False)
            self.scaling = lora_alpha / r
            self.merged = False

        def get_delta_weight(self):
            return (self.lora_B.weight @ self.lora_A.weight) * self.scaling

        def merge(self):
            if not self.merged:
                self.weight.data += self.get_delta_weight()
                self.merged = True

        def unmerge(self):
            if self.merged:
                self.weight.data -= self.get_delta_weight()
                self.merged = False

        def forward(self, x):
            result = F.linear(x, self.weight, bias=self.bias)
            if not self.merged:
                result = result + self.lora_B(self.lora_A(x)) * self.scaling
            return result

    lin = LoraLinear(5, 4)
    fill_(torch, lin, rng)
    out0 = lin(x)
    lin.merge()
    res["peft_merge"] = torch.allclose(lin(x), out0, atol=1e-6)
    w_merged = lin.weight.clone()
    lin.unmerge()
    res["peft_unmerge"] = lin.weight - w_merged
    # merge_and_unload: swap each LoraLinear for a plain Linear with the merged weight
    wrapper = nn.Sequential(OrderedDict(proj=lin, act=nn.SiLU()))
    for name, module in list(wrapper.named_children()):
        if isinstance(module, LoraLinear):
            module.merge()
            new = nn.Linear(module.in_features, module.out_features,
                            bias=module.bias is not None)
            new.weight = module.weight
            new.bias = module.bias
            setattr(wrapper, name, new)
    res["unloaded"] = wrapper(x)
    res["unloaded_keys"] = list(wrapper.state_dict())
    res["unloaded_repr"] = [repr(wrapper)]
    return res


PROGRAMS = [regmean_program, rebasin_program, rome_program, memit_program, lora_merge_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
