"""Tabular deep-learning models written as their reference repositories (rtdl, SAINT, NODE,
lucidrains' tab-transformer) write them in torch, run once with `torch` bound to ember and once
to PyTorch from the same NumPy weights and data: FT-Transformer (numerical feature tokenizer,
categorical offsets, CLS token appended, PreNorm blocks with ReGLU, AdamW with no weight decay
on norms/biases/tokenizers), SAINT (column then intersample attention over the batch), NODE
(oblivious decision trees, entmax15 and sparsemax written by hand with sort/cumsum, a custom
autograd.Function for entmax15's backward), TabTransformer with periodic and piecewise-linear
(PLE) numerical embeddings. Sibling _fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests
from tests.parity.test_parity_programs_round20_recipes_zoo import entmax_functions

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _data(torch, rng, B, n_num, cards):
    """Numerical features, categorical codes (one column per cardinality) and targets."""
    x_num = normal(torch, rng, B, n_num)
    x_cat = torch.from_numpy(np.stack([rng.integers(0, c, B) for c in cards], 1).astype(np.int64))
    y = torch.from_numpy(rng.integers(0, 3, B).astype(np.int64))
    return x_num, x_cat, y


def ft_transformer_program(torch):
    """rtdl's FT-Transformer: Tokenizer (weights * x_num[..., None] + bias, categorical
    embedding with an offsets buffer from cumsum), CLS appended at the end, PreNorm blocks
    (first block without its attention norm), ReGLU FFN, last block attends only from CLS,
    head on the CLS token; AdamW with two parameter groups, a few steps of cross-entropy."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2801)
    B, n_num, cards, d, heads, n_blocks = 6, 3, [3, 4], 8, 2, 2

    class Tokenizer(nn.Module):
        def __init__(self):
            super().__init__()
            category_offsets = torch.tensor([0] + cards[:-1]).cumsum(0)
            self.register_buffer("category_offsets", category_offsets, persistent=False)
            self.category_embeddings = nn.Embedding(sum(cards), d)
            self.weight = nn.Parameter(torch.Tensor(n_num + 1, d))
            self.bias = nn.Parameter(torch.Tensor(n_num + len(cards), d))
            nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

        @property
        def n_tokens(self):
            return len(self.weight) + len(self.category_offsets)

        def forward(self, x_num, x_cat):
            x_num = torch.cat([torch.ones(len(x_num), 1, device=x_num.device), x_num], dim=1)
            x = self.weight[None] * x_num[:, :, None]
            x = torch.cat([x, self.category_embeddings(x_cat + self.category_offsets[None])],
                          dim=1)
            bias = torch.cat([torch.zeros(1, self.bias.shape[1], device=x.device), self.bias])
            return x + bias[None]

    def reglu(x):
        a, b = x.chunk(2, dim=-1)
        return a * F.relu(b)

    class MultiheadAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_q, self.W_k, self.W_v, self.W_out = (nn.Linear(d, d) for _ in range(4))
            self.n_heads = heads

        def _reshape(self, x):
            batch_size, n_tokens, dd = x.shape
            d_head = dd // self.n_heads
            return (x.reshape(batch_size, n_tokens, self.n_heads, d_head).transpose(1, 2)
                    .reshape(batch_size * self.n_heads, n_tokens, d_head))

        def forward(self, x_q, x_kv):
            q, k, v = self.W_q(x_q), self.W_k(x_kv), self.W_v(x_kv)
            batch_size, n_q_tokens = len(q), q.shape[1]
            d_head_key = k.shape[-1] // self.n_heads
            q, k, v = self._reshape(q), self._reshape(k), self._reshape(v)
            attention = F.softmax(q @ k.transpose(1, 2) / math.sqrt(d_head_key), dim=-1)
            x = attention @ v
            x = (x.reshape(batch_size, self.n_heads, n_q_tokens, -1).transpose(1, 2)
                 .reshape(batch_size, n_q_tokens, -1))
            return self.W_out(x), attention

    class FTTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = Tokenizer()
            self.cls = nn.Parameter(torch.empty(d))
            self.layers = nn.ModuleList([])
            for layer_idx in range(n_blocks):
                layer = nn.ModuleDict({
                    "attention": MultiheadAttention(),
                    "linear0": nn.Linear(d, 2 * 6),
                    "linear1": nn.Linear(6, d),
                    "norm1": nn.LayerNorm(d),
                })
                if layer_idx:
                    layer["norm0"] = nn.LayerNorm(d)
                self.layers.append(layer)
            self.last_normalization = nn.LayerNorm(d)
            self.head = nn.Linear(d, 3)

        def forward(self, x_num, x_cat):
            x = self.tokenizer(x_num, x_cat)
            x = torch.cat([x, self.cls.view(1, 1, -1).expand(len(x), 1, -1)], dim=1)
            attentions = []
            for layer_idx, layer in enumerate(self.layers):
                is_last = layer_idx + 1 == len(self.layers)
                x_residual = layer["norm0"](x) if "norm0" in layer else x
                x_residual, att = layer["attention"](
                    x_residual[:, -1:] if is_last else x_residual, x_residual)
                attentions.append(att)
                if is_last:
                    x = x[:, -x_residual.shape[1]:]
                x = x + x_residual
                x_residual = layer["norm1"](x)
                x_residual = layer["linear1"](reglu(layer["linear0"](x_residual)))
                x = x + x_residual
            x = x[:, -1]
            x = self.head(F.relu(self.last_normalization(x)))
            return x, attentions

    model = FTTransformer()
    fill_(torch, model, rng)
    x_num, x_cat, y = _data(torch, rng, B, n_num, cards)

    def needs_wd(name):
        return all(x not in name for x in ["tokenizer", ".norm", ".bias", "cls"])

    groups = [
        {"params": [v for k, v in model.named_parameters() if needs_wd(k)]},
        {"params": [v for k, v in model.named_parameters() if not needs_wd(k)],
         "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=1e-2, weight_decay=1e-2)
    res = {"n_tokens": [model.tokenizer.n_tokens],
           "group_sizes": [len(g["params"]) for g in opt.param_groups],
           "buffers": [k for k, _ in model.named_buffers()],
           "state_keys": sorted(model.state_dict().keys())}
    losses = []
    for _ in range(3):
        opt.zero_grad()
        logits, atts = model(x_num, x_cat)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["logits"] = logits
    res["att_shapes"] = [list(a.shape) for a in atts][0] + list(atts[1].shape)
    res["att_last"] = atts[-1]
    res["cls_grad"] = model.cls.grad
    res["tok_grad"] = [model.tokenizer.weight.grad, model.tokenizer.category_embeddings.weight.grad]
    # a key bias shifts every score of a query alike: its gradient is 0 up to float noise
    # (1e-11), which Adam's m / sqrt(v) turns into steps of either sign
    res["params"] = [p for n, p in model.named_parameters() if "W_k.bias" not in n]
    res["grads"] = [p.grad for p in model.parameters()]
    model.eval()
    with torch.inference_mode():
        probs = model(x_num, x_cat)[0].softmax(-1)
    res["probs"] = probs
    res["pred"] = probs.argmax(1).tolist()
    res["inference"] = [probs.is_inference(), probs.requires_grad]
    return res


def saint_program(torch):
    """SAINT: per-feature embeddings (numerical by a tiny MLP per column, categorical by one
    Embedding with offsets), column self-attention, then intersample attention over the batch
    (rearrange b n d -> 1 b (n d) by reshape), GEGLU feed-forward, a contrastive pretraining
    loss between two views (CutMix by a NumPy mask + mixup in embedding space) and a supervised
    fine-tuning step."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2802)
    B, n_num, cards, d, heads = 5, 2, [3, 2], 4, 2
    n_feat = n_num + len(cards)

    class GEGLU(nn.Module):
        def forward(self, x):
            x, gates = x.chunk(2, dim=-1)
            return x * F.gelu(gates)

    class Attention(nn.Module):
        def __init__(self, dim, heads, dim_head):
            super().__init__()
            inner = dim_head * heads
            self.heads, self.scale = heads, dim_head ** -0.5
            self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
            self.to_out = nn.Linear(inner, dim)

        def forward(self, x):
            h = self.heads
            b, n, _ = x.shape
            q, k, v = self.to_qkv(x).chunk(3, dim=-1)
            q, k, v = (t.reshape(b, n, h, -1).permute(0, 2, 1, 3) for t in (q, k, v))
            sim = torch.einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
            attn = sim.softmax(dim=-1)
            out = torch.einsum("b h i j, b h j d -> b h i d", attn, v)
            out = out.permute(0, 2, 1, 3).reshape(b, n, -1)
            return self.to_out(out)

    class PreNorm(nn.Module):
        def __init__(self, dim, fn):
            super().__init__()
            self.norm, self.fn = nn.LayerNorm(dim), fn

        def forward(self, x, **kwargs):
            return self.fn(self.norm(x), **kwargs)

    class Residual(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x, **kwargs):
            return self.fn(x, **kwargs) + x

    def ff(dim, mult=2):
        return nn.Sequential(nn.Linear(dim, dim * mult * 2), GEGLU(), nn.Dropout(0.0),
                             nn.Linear(dim * mult, dim))

    class RowColTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.ModuleList([
                PreNorm(d, Residual(Attention(d, heads, 4))),
                PreNorm(d, Residual(ff(d))),
                PreNorm(d * n_feat, Residual(Attention(d * n_feat, heads, 8))),
                PreNorm(d * n_feat, Residual(ff(d * n_feat))),
            ])])

        def forward(self, x):
            _, n, _ = x.shape
            for attn1, ff1, attn2, ff2 in self.layers:
                x = attn1(x)
                x = ff1(x)
                x = x.reshape(1, x.shape[0], -1)  # rearrange('b n d -> 1 b (n d)')
                x = attn2(x)
                x = ff2(x)
                x = x.reshape(-1, n, d)
            return x

    class SAINT(nn.Module):
        def __init__(self):
            super().__init__()
            self.simple_MLP = nn.ModuleList([nn.Sequential(nn.Linear(1, 6), nn.ReLU(),
                                                           nn.Linear(6, d))
                                             for _ in range(n_num)])
            offsets = F.pad(torch.tensor(cards), (1, 0), value=0).cumsum(dim=-1)[:-1]
            self.register_buffer("categories_offset", offsets)
            self.embeds = nn.Embedding(sum(cards), d)
            self.transformer = RowColTransformer()
            self.mlpfory = nn.Sequential(nn.Linear(d, 8), nn.ReLU(), nn.Linear(8, 3))
            self.pt_mlp = nn.Sequential(nn.Linear(d * n_feat, 8), nn.ReLU(), nn.Linear(8, 4))

        def embed(self, x_num, x_cat):
            x_categ_enc = self.embeds(x_cat + self.categories_offset.type_as(x_cat))
            n1, n2 = x_num.shape
            x_cont_enc = torch.empty(n1, n2, d)
            for i in range(n_num):
                x_cont_enc[:, i, :] = self.simple_MLP[i](x_num[:, i:i + 1])
            return torch.cat((x_categ_enc, x_cont_enc), dim=1)

    model = SAINT()
    fill_(torch, model, rng)
    fill_(torch, model.pt_mlp, rng, scale=1.0)
    # small attention weights: a saturated intersample softmax leaves 1e-7 gradients that
    # Adam turns into noise-sized steps
    fill_(torch, model.transformer, rng, scale=0.1)
    x_num, x_cat, y = _data(torch, rng, B, n_num, cards)
    perm = torch.from_numpy(rng.permutation(B))
    cut = torch.from_numpy(rng.random((B, n_feat)) < 0.3)
    lam = 0.8
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    res = {"offsets": model.categories_offset.tolist()}
    losses = []
    for _ in range(2):
        opt.zero_grad()
        emb = model.embed(x_num, x_cat)
        emb_mix = torch.where(cut.unsqueeze(-1), emb[perm], emb)
        emb_mix = lam * emb_mix + (1 - lam) * emb_mix[perm, :]
        z1, z2 = model.transformer(emb), model.transformer(emb_mix)
        z1 = model.pt_mlp((z1 / z1.norm(dim=-1, keepdim=True)).flatten(1, 2))
        z2 = model.pt_mlp((z2 / z2.norm(dim=-1, keepdim=True)).flatten(1, 2))
        logits = z1 @ z2.t() / 0.7
        targets = torch.arange(logits.size(0))
        loss = (F.cross_entropy(logits, targets) + F.cross_entropy(logits.t(), targets)) / 2
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["pretrain_losses"] = losses
    res["pt_grad"] = [p.grad for p in model.pt_mlp.parameters()]
    for p in model.pt_mlp.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-2)
    for _ in range(2):
        opt.zero_grad()
        reps = model.transformer(model.embed(x_num, x_cat))
        y_outs = model.mlpfory(reps[:, 0, :])
        loss = F.cross_entropy(y_outs, y)
        loss.backward()
        opt.step()
    res["ft_loss"] = loss
    res["y_outs"] = y_outs
    res["mlp_grad"] = [p.grad for p in model.simple_MLP[1].parameters()]
    # the intersample query/key weights get 1e-6 gradients whose noise Adam turns into steps:
    # their gradients are compared instead
    qkv = model.transformer.layers[0][2].fn.fn.to_qkv.weight
    res["intersample_qkv_grad"] = qkv.grad
    res["params"] = [p for p in model.parameters() if p is not qkv]
    return res


def node_program(torch):
    """NODE's ODST layer: feature selection logits through entmax15 over the input features
    (choice_function), thresholds and log-temperatures, sparsemoid bins, the response of
    2**depth leaves gathered by a bin-codes buffer through einsum; data-aware initialisation
    by quantiles of the first batch under no_grad; sparsemax / entmax15 values and gradients
    pinned on their own too."""
    nn = torch.nn
    rng = np.random.default_rng(2803)
    entmax15, sparsemax, sparsemoid, entmoid15 = entmax_functions(torch)
    B, in_features, num_trees, depth, tree_dim = 8, 4, 3, 2, 2

    class ODST(nn.Module):
        def __init__(self):
            super().__init__()
            self.depth, self.num_trees, self.tree_dim = depth, num_trees, tree_dim
            self.response = nn.Parameter(torch.zeros([num_trees, tree_dim, 2 ** depth]))
            self.feature_selection_logits = nn.Parameter(
                torch.zeros([in_features, num_trees, depth]))
            self.feature_thresholds = nn.Parameter(
                torch.full([num_trees, depth], float("nan"), dtype=torch.float32))
            self.log_temperatures = nn.Parameter(
                torch.full([num_trees, depth], float("nan"), dtype=torch.float32))
            with torch.no_grad():
                indices = torch.arange(2 ** self.depth)
                offsets = 2 ** torch.arange(self.depth)
                bin_codes = (indices.view(1, -1) // offsets.view(-1, 1) % 2).to(torch.float32)
                bin_codes_1hot = torch.stack([bin_codes, 1.0 - bin_codes], dim=-1)
                self.bin_codes_1hot = nn.Parameter(bin_codes_1hot, requires_grad=False)

        def initialize(self, input, eps=1e-6):
            with torch.no_grad():
                feature_selectors = entmax15(self.feature_selection_logits, dim=0)
                feature_values = torch.einsum("bi,ind->bnd", input, feature_selectors)
                percentiles_q = torch.from_numpy(
                    (100 * rng.beta(1.0, 1.0, size=[num_trees * depth])).astype(np.float32))
                self.feature_thresholds.data[...] = torch.as_tensor(
                    list(map(np.percentile, feature_values.flatten(1, 2).t().cpu().numpy(),
                             percentiles_q.numpy().flatten())),
                    dtype=feature_values.dtype, device=feature_values.device,
                ).view(self.num_trees, self.depth)
                temperatures = np.percentile(
                    abs(feature_values - self.feature_thresholds).detach().cpu().numpy(),
                    q=100 * min(1.0, 1.0), axis=0)
                self.log_temperatures.data[...] = torch.tensor(
                    temperatures, dtype=torch.float32).add(eps).log()

        def forward(self, input):
            feature_logits = self.feature_selection_logits
            feature_selectors = entmax15(feature_logits, dim=0)
            feature_values = torch.einsum("bi,ind->bnd", input, feature_selectors)
            threshold_logits = (feature_values - self.feature_thresholds) \
                * torch.exp(-self.log_temperatures)
            threshold_logits = torch.stack([-threshold_logits, threshold_logits], dim=-1)
            bins = sparsemoid(threshold_logits)
            bin_matches = torch.einsum("btds,dcs->btdc", bins, self.bin_codes_1hot)
            response_weights = torch.prod(bin_matches, dim=-2)
            response = torch.einsum("bnd,ncd->bnc", response_weights, self.response)
            return response.flatten(1, 2)

    layer = ODST()
    with torch.no_grad():
        layer.response.copy_(normal(torch, rng, num_trees, tree_dim, 2 ** depth))
        layer.feature_selection_logits.copy_(normal(torch, rng, in_features, num_trees, depth))
    x = normal(torch, rng, B, in_features)
    target = normal(torch, rng, B, num_trees * tree_dim)
    layer.initialize(x)
    res = {"thresholds": layer.feature_thresholds.clone(),
           "log_t": layer.log_temperatures.clone(),
           "codes": layer.bin_codes_1hot,
           "trainable": [n for n, p in layer.named_parameters() if p.requires_grad]}
    opt = torch.optim.Adam([p for p in layer.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        out = layer(x)
        loss = torch.nn.functional.mse_loss(out, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["out"] = out
    res["grads"] = [p.grad for p in layer.parameters() if p.requires_grad]
    z = normal(torch, rng, 3, 5).requires_grad_()
    w = normal(torch, rng, 3, 5)
    for name, fn in (("entmax", entmax15), ("sparsemax", sparsemax)):
        p = fn(z * 2, dim=-1)
        (p * w).sum().backward()
        res[name] = [p, z.grad.clone()]
        res[name + "_support"] = (p > 0).sum(-1).tolist()
        z.grad = None
    p0 = entmax15(z, dim=0)
    res["entmax_dim0_sums"] = p0.sum(0)
    res["entmoid"] = entmoid15(z)
    res["sparsemoid"] = sparsemoid(z * 3)
    return res


def tab_transformer_program(torch):
    """lucidrains' TabTransformer with the numerical features embedded by periodic embeddings
    (2*pi*c*x through sin/cos, then Linear+ReLU) and by piecewise-linear encoding (bins from
    NumPy quantiles, clamp of (x - left)/width with the first and last bins left open);
    categorical column embeddings with shared embedding concatenated; the transformer output
    flattened and concatenated with LayerNorm'd continuous features into an MLP; BCE with
    logits, grad clipping, StepLR."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2804)
    B, n_num, cards, d, n_bins, k_per = 6, 2, [3, 4, 2], 6, 4, 3
    n_cat = len(cards)

    class Periodic(nn.Module):
        def __init__(self):
            super().__init__()
            self.coefficients = nn.Parameter(torch.normal(0.0, 0.1, (n_num, k_per)))
            self.linear = nn.Linear(2 * k_per, 4)

        def forward(self, x):
            x = 2 * torch.pi * self.coefficients[None] * x[..., None]
            x = torch.cat([torch.cos(x), torch.sin(x)], -1)
            return F.relu(self.linear(x))

    class PLE(nn.Module):
        def __init__(self, edges):
            super().__init__()
            self.register_buffer("left", edges[:, :-1].contiguous())
            self.register_buffer("width", edges.diff(dim=1))

        def forward(self, x):
            x = (x[..., None] - self.left) / self.width
            x = torch.cat([x[..., :1].clamp_max(1.0), x[..., 1:-1].clamp(0.0, 1.0),
                           x[..., -1:].clamp_min(0.0)], dim=-1)
            return x

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.to_qkv = nn.Linear(d, 3 * d, bias=False)
            self.to_out = nn.Linear(d, d)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.to_qkv(x).chunk(3, dim=-1)
            q, k, v = (t.view(b, n, 2, d // 2).transpose(1, 2) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v)
            return self.to_out(out.transpose(1, 2).reshape(b, n, d))

    class TabTransformer(nn.Module):
        def __init__(self, edges):
            super().__init__()
            categories_offset = F.pad(torch.tensor(list(cards)), (1, 0), value=2)
            categories_offset = categories_offset.cumsum(dim=-1)[:-1]
            self.register_buffer("categories_offset", categories_offset)
            self.category_embed = nn.Embedding(sum(cards) + 2, d - 2)
            self.shared = nn.Parameter(torch.zeros(n_cat, 2))
            self.attn = Attention()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"),
                                    nn.Linear(2 * d, d))
            self.periodic, self.ple = Periodic(), PLE(edges)
            self.norm = nn.LayerNorm(n_num * (4 + n_bins))
            self.mlp = nn.Sequential(nn.Linear(n_cat * d + n_num * (4 + n_bins), 8), nn.SELU(),
                                     nn.Linear(8, 1))

        def forward(self, x_categ, x_cont):
            x_categ = x_categ + self.categories_offset
            x = self.category_embed(x_categ)
            x = torch.cat([x, self.shared.expand(x.size(0), -1, -1)], dim=-1)
            x = x + self.attn(self.norm1(x))
            x = x + self.ff(self.norm2(x))
            flat_categ = x.flatten(1)
            cont = torch.cat([self.periodic(x_cont), self.ple(x_cont)], -1).flatten(1)
            normed_cont = self.norm(cont)
            return self.mlp(torch.cat((flat_categ, normed_cont), dim=-1))

    x_num, x_cat, _ = _data(torch, rng, B, n_num, cards)
    q = np.quantile(rng.standard_normal((64, n_num)), np.linspace(0, 1, n_bins + 1), axis=0)
    edges = torch.from_numpy(q.T.astype(np.float32))
    model = TabTransformer(edges)
    fill_(torch, model, rng)
    y = torch.from_numpy((rng.random((B, 1)) > 0.5).astype(np.float32))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    res = {"offsets": model.categories_offset.tolist(), "ple": model.ple(x_num)}
    losses, norms, lrs = [], [], []
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        logits = model(x_cat, x_num)
        loss = F.binary_cross_entropy_with_logits(logits, y, pos_weight=torch.tensor([2.0]))
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 0.5).item())
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(sched.get_last_lr()[0])
    res.update(losses=losses, norms=norms, lrs=lrs, logits=logits,
               params=list(model.parameters()))
    res["coef_grad"] = model.periodic.coefficients.grad
    return res


PROGRAMS = [ft_transformer_program, saint_program, node_program, tab_transformer_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 attention / Adam accumulation order over a few steps
        "ft_transformer_program": (1e-4, 1e-5),
        "saint_program": (1e-4, 1e-5),
        "tab_transformer_program": (1e-4, 1e-5),
        "node_program": (1e-4, 1e-5),
    })
