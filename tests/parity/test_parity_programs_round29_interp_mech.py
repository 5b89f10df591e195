"""Mechanistic-interpretability programs written as TransformerLens, SAELens and the influence-
function repositories write them in torch, run once with `torch` bound to ember and once to
PyTorch from the same NumPy weights and data: a HookedTransformer with HookPoint modules
(run_with_cache by forward hooks, run_with_hooks returning modified activations, a hooks()
context manager removing handles, backward hooks caching gradients, prepended and
with_kwargs hooks), activation patching and attribution patching over layers and positions,
the logit lens over the accumulated residual stream, attention rollout and gradient rollout on a
ViT whose attention is captured from hooked dropout modules, Captum's LayerIntegratedGradients
(a forward hook replacing a layer's output by scaled activations), and linear probes on cached
activations trained with LBFGS."""

import contextlib
from functools import partial

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _hooked_transformer(torch, d_vocab=11, d_model=8, n_heads=2, n_layers=2, n_ctx=6):
    """A TransformerLens-style attention-only-plus-MLP transformer: every activation passes
    through a HookPoint (an identity module named by its path) so that hooks can read or
    replace it."""
    nn, F = torch.nn, torch.nn.functional
    d_head = d_model // n_heads

    class HookPoint(nn.Module):
        def __init__(self):
            super().__init__()
            self.fwd_hooks, self.bwd_hooks, self.ctx = [], [], {}
            self.name = None

        def add_hook(self, hook, dir="fwd", prepend=False):
            def full_hook(module, module_input, module_output):
                if dir == "bwd":
                    module_output = module_output[0]
                return hook(module_output, hook=self)
            if dir == "fwd":
                handle = self.register_forward_hook(full_hook, prepend=prepend)
                self.fwd_hooks.append(handle)
            else:
                handle = self.register_full_backward_hook(full_hook)
                self.bwd_hooks.append(handle)

        def remove_hooks(self, dir="fwd", including_permanent=False):
            for h in (self.fwd_hooks if dir in ("fwd", "both") else []):
                h.remove()
            for h in (self.bwd_hooks if dir in ("bwd", "both") else []):
                h.remove()
            self.fwd_hooks, self.bwd_hooks = [], []

        def forward(self, x):
            return x

    class LayerNormPre(nn.Module):
        def __init__(self):
            super().__init__()
            self.hook_scale = HookPoint()
            self.hook_normalized = HookPoint()

        def forward(self, x):
            x = x - x.mean(-1, keepdim=True)
            scale = self.hook_scale((x.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt())
            return self.hook_normalized(x / scale)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_Q = nn.Parameter(torch.empty(n_heads, d_model, d_head))
            self.W_K = nn.Parameter(torch.empty(n_heads, d_model, d_head))
            self.W_V = nn.Parameter(torch.empty(n_heads, d_model, d_head))
            self.W_O = nn.Parameter(torch.empty(n_heads, d_head, d_model))
            self.b_O = nn.Parameter(torch.zeros(d_model))
            self.register_buffer("mask", torch.tril(torch.ones((n_ctx, n_ctx)).bool()))
            self.register_buffer("IGNORE", torch.tensor(-1e5))
            for name in ("q", "k", "v", "z", "attn_scores", "pattern", "result"):
                setattr(self, "hook_" + name, HookPoint())

        def forward(self, x):
            q = self.hook_q(torch.einsum("bpm,hmd->bphd", x, self.W_Q))
            k = self.hook_k(torch.einsum("bpm,hmd->bphd", x, self.W_K))
            v = self.hook_v(torch.einsum("bpm,hmd->bphd", x, self.W_V))
            scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / d_head ** 0.5
            n = x.shape[1]
            scores = torch.where(self.mask[:n, :n], scores, self.IGNORE)
            pattern = self.hook_pattern(F.softmax(self.hook_attn_scores(scores), dim=-1))
            z = self.hook_z(torch.einsum("bhqk,bkhd->bqhd", pattern, v))
            result = self.hook_result(torch.einsum("bqhd,hdm->bqhm", z, self.W_O))
            return result.sum(-2) + self.b_O

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = LayerNormPre(), LayerNormPre()
            self.attn = Attention()
            self.W_in = nn.Parameter(torch.empty(d_model, 2 * d_model))
            self.W_out = nn.Parameter(torch.empty(2 * d_model, d_model))
            for name in ("resid_pre", "attn_out", "resid_mid", "mlp_post", "mlp_out",
                         "resid_post"):
                setattr(self, "hook_" + name, HookPoint())

        def forward(self, resid_pre):
            resid_pre = self.hook_resid_pre(resid_pre)
            attn_out = self.hook_attn_out(self.attn(self.ln1(resid_pre)))
            resid_mid = self.hook_resid_mid(resid_pre + attn_out)
            post = self.hook_mlp_post(F.gelu(self.ln2(resid_mid) @ self.W_in))
            mlp_out = self.hook_mlp_out(post @ self.W_out)
            return self.hook_resid_post(resid_mid + mlp_out)

    class HookedTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_E = nn.Parameter(torch.empty(d_vocab, d_model))
            self.W_pos = nn.Parameter(torch.empty(n_ctx, d_model))
            self.blocks = nn.ModuleList([Block() for _ in range(n_layers)])
            self.ln_final = LayerNormPre()
            self.W_U = nn.Parameter(torch.empty(d_model, d_vocab))
            self.hook_embed, self.hook_pos_embed = HookPoint(), HookPoint()
            self.hook_dict = {}
            for name, mod in self.named_modules():
                if isinstance(mod, HookPoint):
                    mod.name = name
                    self.hook_dict[name] = mod

        def forward(self, tokens, stop_at_layer=None):
            resid = self.hook_embed(self.W_E[tokens])
            resid = resid + self.hook_pos_embed(self.W_pos[:tokens.shape[1]])
            for block in self.blocks[:stop_at_layer]:
                resid = block(resid)
            if stop_at_layer is not None:
                return resid
            return self.ln_final(resid) @ self.W_U

        def reset_hooks(self):
            for hp in self.hook_dict.values():
                hp.remove_hooks("both")

        @contextlib.contextmanager
        def hooks(self, fwd_hooks=(), bwd_hooks=(), reset_hooks_end=True):
            try:
                for name, hook in fwd_hooks:
                    self.hook_dict[name].add_hook(hook, dir="fwd")
                for name, hook in bwd_hooks:
                    self.hook_dict[name].add_hook(hook, dir="bwd")
                yield self
            finally:
                if reset_hooks_end:
                    self.reset_hooks()

        def run_with_hooks(self, *args, fwd_hooks=(), bwd_hooks=(), **kwargs):
            with self.hooks(fwd_hooks, bwd_hooks) as hooked:
                return hooked(*args, **kwargs)

        def run_with_cache(self, *args, names_filter=None, incl_bwd=False, **kwargs):
            cache = {}

            def save_hook(tensor, hook, is_backward=False):
                cache[hook.name + ("_grad" if is_backward else "")] = tensor.detach()
            names = [n for n in self.hook_dict if names_filter is None or names_filter(n)]
            fwd = [(n, save_hook) for n in names]
            bwd = [(n, partial(save_hook, is_backward=True)) for n in names] if incl_bwd else []
            with self.hooks(fwd, bwd, reset_hooks_end=not incl_bwd):
                out = self(*args, **kwargs)
                if incl_bwd:
                    out[:, -1].logsumexp(-1).sum().backward()
            self.reset_hooks()
            return out, cache

    model = HookedTransformer()
    return model


def activation_patching_program(torch):
    """TransformerLens activation patching: clean and corrupted prompts, run_with_cache on the
    clean one under no_grad, then for every layer and position a run_with_hooks that writes the
    clean resid_pre into the corrupted run in place (``resid[:, pos, :] = clean[:, pos, :]``)
    and returns it; per-head patching of hook_z; the normalised logit-difference metric; the
    hook tables empty afterwards."""
    rng = np.random.default_rng(2911)
    model = _hooked_transformer(torch)
    fill_(torch, model, rng, scale=0.5)
    clean = torch.tensor([[1, 4, 2, 7, 3, 5], [0, 9, 2, 8, 6, 5]])
    corrupt = clean.clone()
    corrupt[:, 1] = torch.tensor([3, 3])
    answer = torch.tensor([[2, 7], [8, 1]])

    def logit_diff(logits):
        last = logits[:, -1, :]
        return (last.gather(-1, answer[:, :1]) - last.gather(-1, answer[:, 1:])).mean()

    with torch.no_grad():
        clean_logits, cache = model.run_with_cache(clean)
        corrupt_logits = model(corrupt)
    clean_ld, corrupt_ld = logit_diff(clean_logits), logit_diff(corrupt_logits)

    def patch_resid(resid, hook, pos):
        resid[:, pos, :] = cache[hook.name][:, pos, :]
        return resid

    def patch_head(z, hook, head):
        z[:, :, head] = cache[hook.name][:, :, head]
        return z

    res = {"cache_keys": sorted(cache)[:6], "n_cache": [len(cache)],
           "clean_ld": clean_ld, "corrupt_ld": corrupt_ld}
    scores = torch.zeros(2, 6)
    with torch.no_grad():
        for layer in range(2):
            for pos in range(6):
                logits = model.run_with_hooks(corrupt, fwd_hooks=[(
                    "blocks.%d.hook_resid_pre" % layer, partial(patch_resid, pos=pos))])
                scores[layer, pos] = (logit_diff(logits) - corrupt_ld) / (clean_ld - corrupt_ld)
        head_scores = torch.stack([torch.stack([
            logit_diff(model.run_with_hooks(corrupt, fwd_hooks=[(
                "blocks.%d.attn.hook_z" % layer, partial(patch_head, head=h))]))
            for h in range(2)]) for layer in range(2)])
    res["resid_scores"] = scores
    res["head_scores"] = head_scores
    res["hooks_left"] = [sum(len(hp._forward_hooks) + len(hp._backward_hooks)
                             for hp in model.hook_dict.values())]
    res["pattern"] = cache["blocks.1.attn.hook_pattern"]
    return res


def attribution_patching_program(torch):
    """Attribution patching (Nanda): clean activations and gradients cached by forward hooks and
    full backward hooks on the HookPoints (``incl_bwd``), corrupted activations, and the linear
    estimate ``(clean - corrupt) * corrupt_grad`` summed over d_model per layer and position;
    a prepended hook runs before the earlier one; a ``with_kwargs`` forward pre-hook rewrites the
    call's keyword argument."""
    rng = np.random.default_rng(2912)
    model = _hooked_transformer(torch)
    fill_(torch, model, rng, scale=0.5)
    clean = torch.tensor([[1, 4, 2, 7, 3, 5]])
    corrupt = torch.tensor([[1, 6, 2, 7, 3, 5]])

    def is_resid(name):
        return name.endswith("hook_resid_pre") or name.endswith("hook_attn_out")
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean, names_filter=is_resid)
    model.zero_grad()
    _, corrupt_cache = model.run_with_cache(corrupt, names_filter=is_resid, incl_bwd=True)
    res = {"grad_keys": sorted(k for k in corrupt_cache if k.endswith("_grad"))}
    for name in ("blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre", "blocks.1.hook_attn_out"):
        res[name] = ((clean_cache[name] - corrupt_cache[name])
                     * corrupt_cache[name + "_grad"]).sum(-1)
    res["W_E_grad"] = model.W_E.grad

    order = []
    hp = model.hook_dict["blocks.0.hook_mlp_out"]
    hp.add_hook(lambda t, hook: order.append("first") or t * 2)
    hp.add_hook(lambda t, hook: order.append("prepended") or t + 1, prepend=True)

    def pre(module, args, kwargs):
        return args, {"stop_at_layer": 1}
    handle = model.register_forward_pre_hook(pre, with_kwargs=True)
    with torch.no_grad():
        res["stopped"] = model(clean)
    handle.remove()
    model.reset_hooks()
    res["order"] = order
    return res


def logit_lens_program(torch):
    """The logit lens: the accumulated residual stream (embeddings, then each resid_mid and
    resid_post) stacked from the cache, layer-normed with the cached final scale
    (``apply_ln_to_stack``) or recomputed per entry, unembedded, and read as top-1 tokens,
    log-probabilities of the answer and KL to the final distribution; direct logit attribution
    of each head's result onto the answer's residual direction."""
    F = torch.nn.functional
    rng = np.random.default_rng(2913)
    model = _hooked_transformer(torch)
    fill_(torch, model, rng, scale=0.5)
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]])
    with torch.inference_mode():
        logits, cache = model.run_with_cache(tokens)
    names = ["hook_embed"] + ["blocks.%d.hook_%s" % (i, s) for i in range(2)
                              for s in ("resid_mid", "resid_post")]
    stack = torch.stack([cache["blocks.0.hook_resid_pre"]] + [cache[n] for n in names[1:]])
    centred = stack - stack.mean(-1, keepdim=True)
    scaled = centred / cache["ln_final.hook_scale"]
    lens_cached = scaled @ model.W_U.detach()
    lens_fresh = torch.stack([model.ln_final(s) @ model.W_U for s in stack.unbind(0)]).detach()
    final = F.log_softmax(logits, -1)
    logp = F.log_softmax(lens_fresh, -1)
    res = {"lens_cached": lens_cached, "lens_fresh": lens_fresh,
           "top1": lens_fresh.argmax(-1).flatten().tolist(),
           "kl": F.kl_div(logp, final.expand_as(logp), log_target=True,
                          reduction="none").sum(-1),
           "answer_logp": logp[..., -1, :].gather(-1, torch.tensor([[7], [4]]).expand(
               5, 2, 1)).squeeze(-1),
           "inference": [cache["ln_final.hook_scale"].is_inference(), logits.requires_grad]}
    answer_dir = model.W_U[:, 7].detach() - model.W_U[:, 4].detach()
    per_head = torch.stack([cache["blocks.%d.attn.hook_result" % i][:, -1] for i in range(2)])
    res["dla"] = (per_head / cache["ln_final.hook_scale"][None, :, -1, None]) @ answer_dir
    return res


def attention_rollout_program(torch):
    """Attention rollout and gradient rollout on a small ViT (jacobgil's vit-explain): the
    attention probabilities captured by a forward hook on each block's ``attn_drop`` module and
    their gradients by a full backward hook; heads fused by mean, max or min, the lowest
    ``discard_ratio`` of the flattened map zeroed through ``topk(largest=False)`` without the CLS
    row, ``I + A`` renormalised and multiplied down the layers; the CLS row as a mask."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2914)
    dim, heads, n_tok = 8, 2, 5

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(dim, dim * 3)
            self.attn_drop = nn.Dropout(0.0)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, heads, C // heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = (q @ k.transpose(-2, -1)) * (C // heads) ** -0.5
            attn = self.attn_drop(attn.softmax(dim=-1))
            return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.patch = nn.Conv2d(1, dim, 2, stride=2)
            self.blocks = nn.ModuleList([Attention() for _ in range(3)])
            self.norms = nn.ModuleList([nn.LayerNorm(dim) for _ in range(3)])
            self.head = nn.Linear(dim, 3)

        def forward(self, img):
            x = self.patch(img).flatten(2).transpose(1, 2)
            x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
            for blk, norm in zip(self.blocks, self.norms):
                x = x + blk(norm(x))
            return self.head(x[:, 0])

    model = ViT()
    fill_(torch, model, rng, scale=0.5)
    model.eval()
    attentions, grads = [], []
    handles = []
    for name, module in model.named_modules():
        if name.endswith("attn_drop"):
            handles.append(module.register_forward_hook(
                lambda m, i, o: attentions.append(o.detach().cpu())))
            handles.append(module.register_full_backward_hook(
                lambda m, gi, go: grads.append(gi[0].detach())))
    img = normal(torch, rng, 1, 1, 4, 4)
    res = {}

    def rollout(fusion, discard_ratio, use_grads=False):
        result = torch.eye(n_tok)
        with torch.no_grad():
            for i, attention in enumerate(attentions):
                if use_grads:
                    attention = attention * grads[len(grads) - 1 - i]
                    fused = attention.clamp(min=0).mean(axis=1)
                elif fusion == "mean":
                    fused = attention.mean(axis=1)
                elif fusion == "max":
                    fused = attention.max(axis=1)[0]
                else:
                    fused = attention.min(axis=1)[0]
                flat = fused.view(fused.size(0), -1)
                _, indices = flat.topk(int(flat.size(-1) * discard_ratio), -1, False)
                indices = indices[indices != 0]
                flat[0, indices] = 0
                a = (fused + torch.eye(n_tok)) / 2
                a = a / a.sum(dim=-1)
                result = torch.matmul(a, result)
        mask = result[0, 0, 1:]
        return mask / mask.max()

    out = model(img)
    for fusion, ratio in (("mean", 0.0), ("max", 0.3), ("min", 0.5)):
        res["rollout_" + fusion] = rollout(fusion, ratio)
    model.zero_grad()
    out[0, 2].backward()
    res["grad_rollout"] = rollout("mean", 0.2, use_grads=True)
    res["n_captured"] = [len(attentions), len(grads)]
    res["attn0"] = attentions[0]
    for h in handles:
        h.remove()
    res["up"] = F.interpolate(res["rollout_mean"].reshape(1, 1, 2, 2), scale_factor=2,
                              mode="bilinear", align_corners=False)
    return res


def layer_ig_and_probe_program(torch):
    """Captum's LayerIntegratedGradients on an embedding: a forward hook on the embedding returns
    the scaled embeddings (the layer output replaced), gradients taken with respect to the
    hooked layer's output captured inside the hook, Riemann trapezoid steps; then linear probes
    on hooked mean-pooled activations of each layer (features cached under no_grad, a
    logistic-regression probe by LBFGS with strong Wolfe line search and a closure, weight
    decay by hand, accuracy by argmax)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2915)

    class TextClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(12, 6, padding_idx=0)
            self.encoder = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6), nn.GELU())
            self.fc = nn.Linear(6, 2)

        def forward(self, tokens):
            return self.fc(self.encoder(self.embedding(tokens)).mean(1))

    model = TextClassifier()
    fill_(torch, model, rng, scale=0.6)
    tokens = torch.tensor([[3, 5, 7, 0], [2, 9, 11, 4]])
    ref = torch.zeros_like(tokens)
    n_steps = 7
    alphas = torch.linspace(0, 1, n_steps)
    with torch.no_grad():
        emb_in, emb_ref = model.embedding(tokens), model.embedding(ref)
    scaled = torch.cat([emb_ref + a * (emb_in - emb_ref) for a in alphas])
    saved = {}

    def layer_forward_hook(module, hook_inputs, hook_outputs):
        scaled.requires_grad_()
        saved["out"] = scaled
        return scaled

    handle = model.embedding.register_forward_hook(layer_forward_hook)
    out = model(tokens.repeat(n_steps, 1))
    handle.remove()
    (g,) = torch.autograd.grad(out[:, 1].sum(), saved["out"])
    w = torch.full((n_steps,), 1.0 / (n_steps - 1))
    w[0] = w[-1] = 0.5 / (n_steps - 1)
    g = (g.view(n_steps, 2, 4, 6) * w.view(-1, 1, 1, 1)).sum(0)
    attr = g * (emb_in - emb_ref)
    res = {"layer_ig": attr.sum(-1), "handle_gone": [len(model.embedding._forward_hooks)]}

    feats = {}
    hooks = [model.encoder[i].register_forward_hook(
        lambda m, i, o, k=k: feats.__setitem__(k, o.mean(1))) for k, i in (("l1", 1), ("l3", 3))]
    data = torch.from_numpy(rng.integers(1, 12, size=(16, 4)))
    labels = (data[:, 0] > 5).long()
    with torch.no_grad():
        model(data)
    for h in hooks:
        h.remove()
    for name in ("l1", "l3"):
        probe = nn.Linear(6, 2)
        fill_(torch, probe, rng, scale=0.1)
        opt = torch.optim.LBFGS(probe.parameters(), lr=0.5, max_iter=10,
                                line_search_fn="strong_wolfe")
        x = feats[name]

        def closure():
            opt.zero_grad()
            loss = F.cross_entropy(probe(x), labels) + 1e-3 * probe.weight.pow(2).sum()
            loss.backward()
            return loss
        losses = [opt.step(closure).item() for _ in range(2)]
        res[name + "_losses"] = losses
        res[name + "_acc"] = (probe(x).argmax(-1) == labels).float().mean()
        res[name + "_w"] = probe.weight
        res[name + "_requires"] = [x.requires_grad, probe.weight.grad is not None]
    return res


PROGRAMS = [activation_patching_program, attribution_patching_program, logit_lens_program,
            attention_rollout_program, layer_ig_and_probe_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 einsum / softmax accumulation order; LBFGS amplifies it over two steps
        "activation_patching_program": (1e-4, 1e-5),
        "attribution_patching_program": (1e-4, 1e-5),
        "logit_lens_program": (1e-4, 1e-5),
        "attention_rollout_program": (1e-4, 1e-5),
        "layer_ig_and_probe_program": (1e-4, 1e-5),
    })
