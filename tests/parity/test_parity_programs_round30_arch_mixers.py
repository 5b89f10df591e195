"""Architecture-zoo programs written as timm, lucidrains and the papers' reference repositories
write them in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy
data: Perceiver IO (Fourier position features, latent cross-attention with kdim/vdim, a query
decoder), MLP-Mixer, gMLP's spatial gating unit, ResMLP's Affine layers, ConvMixer, PoolFormer
(pooling minus identity), CoAtNet's relative bias table gathered by meshgrid-built indices,
ViT with CLS and GAP heads, stochastic depth with NumPy masks and LayerScale, and
parametrizations (orthogonal, weight_norm, spectral_norm) on such layers."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _fourier_features(torch, shape, n_bands, max_res):
    """Perceiver's position encoding: positions in [-1, 1], sin/cos at linearly spaced
    frequencies up to Nyquist, concatenated with the raw positions."""
    axes = [torch.linspace(-1.0, 1.0, steps=s) for s in shape]
    pos = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)          # (*shape, d)
    freqs = torch.stack([torch.linspace(1.0, max_res / 2.0, steps=n_bands) for _ in shape])
    per_pos = pos[..., None] * freqs[None] * math.pi                          # (*shape, d, n)
    per_pos = per_pos.reshape(*pos.shape[:-1], -1)
    return torch.cat([pos, torch.sin(per_pos), torch.cos(per_pos)], dim=-1)


def perceiver_io_program(torch):
    """Perceiver IO: inputs + Fourier features cross-attended by a learned latent array
    (nn.MultiheadAttention with kdim/vdim != embed_dim), latent self-attention blocks
    (pre-norm TransformerEncoderLayer), a decoder whose queries are the output positions'
    features; AdamW steps with grad clipping and a cosine schedule."""
    rng = np.random.default_rng(3011)
    nn, F = torch.nn, torch.nn.functional

    class PerceiverIO(nn.Module):
        def __init__(self, in_ch=3, n_latents=6, d=16, heads=2):
            super().__init__()
            pe_dim = 2 + 2 * 2 * 4
            self.latents = nn.Parameter(torch.randn(n_latents, d) * 0.02)
            self.in_norm = nn.LayerNorm(in_ch + pe_dim)
            self.enc = nn.MultiheadAttention(d, heads, kdim=in_ch + pe_dim,
                                             vdim=in_ch + pe_dim, batch_first=True)
            self.process = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(d, heads, 32, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True),
                num_layers=2)            # warns: norm_first turns the nested-tensor path off
            self.q_proj = nn.Linear(pe_dim, d)
            self.dec = nn.MultiheadAttention(d, 1, batch_first=True)
            self.out = nn.Linear(d, 1)

        def forward(self, img, query_pe):
            b = img.shape[0]
            pe = _fourier_features(torch, img.shape[2:], 4, 8).to(img.dtype)
            x = torch.cat([img.permute(0, 2, 3, 1), pe.expand(b, -1, -1, -1)], -1).flatten(1, 2)
            kv = self.in_norm(x)
            lat = self.latents.unsqueeze(0).expand(b, -1, -1)
            z, enc_w = self.enc(lat, kv, kv)
            z = self.process(z + lat)
            q = self.q_proj(query_pe).unsqueeze(0).repeat(b, 1, 1)
            o, dec_w = self.dec(q, z, z, need_weights=True, average_attn_weights=False)
            return self.out(o).squeeze(-1), enc_w, dec_w

    model = PerceiverIO()
    fill_(torch, model, rng, 0.3)
    img = normal(torch, rng, 2, 3, 4, 5)
    query_pe = _fourier_features(torch, (4, 5), 4, 8).flatten(0, 1)[::3]          # 7 queries
    target = normal(torch, rng, 2, query_pe.shape[0])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-4)
    res, losses, norms = {"pe": _fourier_features(torch, (3, 2), 3, 6)}, [], []
    for _ in range(3):
        pred, enc_w, dec_w = model(img, query_pe)
        loss = F.smooth_l1_loss(pred, target, beta=0.5)
        opt.zero_grad()
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True))
        opt.step()
        sched.step()
        losses.append(loss.item())
    res.update(losses=losses, norms=torch.stack(norms), enc_w=enc_w, dec_w=dec_w,
               lr=[round(g["lr"], 10) for g in opt.param_groups],
               latents=model.latents, shapes=[*enc_w.shape, *dec_w.shape])
    return res


def mixer_family_program(torch):
    """MLP-Mixer (token mixing on the transposed patch axis), gMLP (spatial gating unit: split
    channels, norm, a seq-length Linear initialised to weight ~0 / bias 1, gate), ResMLP
    (Affine in place of norms, LayerScale), trained jointly for a few SGD steps."""
    rng = np.random.default_rng(3012)
    nn, F = torch.nn, torch.nn.functional
    n_tok, d = 9, 8

    class MixerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.tok = nn.Sequential(nn.Linear(n_tok, 12), nn.GELU(), nn.Linear(12, n_tok))
            self.ch = nn.Sequential(nn.Linear(d, 16), nn.GELU(approximate="tanh"),
                                    nn.Linear(16, d))

        def forward(self, x):
            x = x + self.tok(self.norm1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.ch(self.norm2(x))

    class SpatialGatingUnit(nn.Module):
        def __init__(self, dim_ffn):
            super().__init__()
            self.norm = nn.LayerNorm(dim_ffn // 2)
            self.proj = nn.Linear(n_tok, n_tok)

        def init_weights(self):
            nn.init.normal_(self.proj.weight, std=1e-6)
            nn.init.ones_(self.proj.bias)

        def forward(self, x):
            u, v = x.chunk(2, dim=-1)
            v = self.proj(self.norm(v).transpose(-1, -2))
            return u * v.transpose(-1, -2)

    class GMLPBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.fc1, self.sgu, self.fc2 = nn.Linear(d, 16), SpatialGatingUnit(16), nn.Linear(8, d)

        def forward(self, x):
            return x + self.fc2(self.sgu(F.gelu(self.fc1(self.norm(x)))))

    class Affine(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.alpha = nn.Parameter(torch.ones(dim))
            self.beta = nn.Parameter(torch.zeros(dim))

        def forward(self, x):
            return torch.addcmul(self.beta, self.alpha, x)

    class ResMLPBlock(nn.Module):
        def __init__(self, init_values=1e-1):
            super().__init__()
            self.norm1, self.norm2 = Affine(d), Affine(d)
            self.linear_tokens = nn.Linear(n_tok, n_tok)
            self.mlp = nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d))
            self.ls1 = nn.Parameter(init_values * torch.ones(d))
            self.ls2 = nn.Parameter(init_values * torch.ones(d))

        def forward(self, x):
            x = x + self.ls1 * self.linear_tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.ls2 * self.mlp(self.norm2(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, d, kernel_size=2, stride=2)
            self.blocks = nn.Sequential(MixerBlock(), GMLPBlock(), ResMLPBlock())
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 4)

        def forward(self, x):
            x = self.stem(x).flatten(2).transpose(1, 2)                 # (b, 9, d)
            return self.head(self.norm(self.blocks(x)).mean(dim=1))

    net = Net()
    fill_(torch, net, rng, 0.3)
    net.blocks[1].sgu.init_weights()
    gate_w = torch.from_numpy(rng.standard_normal((n_tok, n_tok)).astype(np.float32) * 1e-6)
    with torch.no_grad():
        net.blocks[1].sgu.proj.weight.copy_(gate_w)
    x = normal(torch, rng, 2, 3, 6, 6)
    y = torch.tensor([1, 3])
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, dampening=0.1)
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    named = dict(net.named_parameters())
    return {"losses": losses, "names": sorted(named), "alpha": named["blocks.2.norm1.alpha"],
            "gate_bias": named["blocks.1.sgu.proj.bias"], "stem_grad": net.stem.weight.grad,
            "n_params": [sum(p.numel() for p in net.parameters())]}


def _drop_path(torch, x, keep_mask, drop_prob, training, scale_by_keep=True):
    """timm's drop_path, with the per-sample Bernoulli draw handed in from NumPy."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = keep_mask.to(x.dtype).reshape(shape)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


def convmixer_poolformer_program(torch):
    """ConvMixer (patch conv, then residual depthwise conv with padding='same', GELU,
    BatchNorm, pointwise conv) feeding a PoolFormer block (AvgPool2d(count_include_pad=False)
    minus identity, GroupNorm(1), LayerScale over channels, drop path with NumPy masks)."""
    rng = np.random.default_rng(3013)
    nn, F = torch.nn, torch.nn.functional
    dim = 6

    class Residual(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x) + x

    class Pooling(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)

        def forward(self, x):
            return self.pool(x) - x

    class PoolFormerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.GroupNorm(1, dim), nn.GroupNorm(1, dim)
            self.token_mixer = Pooling()
            self.mlp = nn.Sequential(nn.Conv2d(dim, 12, 1), nn.GELU(), nn.Conv2d(12, dim, 1))
            self.layer_scale_1 = nn.Parameter(1e-2 * torch.ones(dim))
            self.layer_scale_2 = nn.Parameter(1e-2 * torch.ones(dim))

        def forward(self, x, masks):
            x = x + _drop_path(torch, self.layer_scale_1.unsqueeze(-1).unsqueeze(-1)
                               * self.token_mixer(self.norm1(x)), masks[0], 0.3, self.training)
            return x + _drop_path(torch, self.layer_scale_2[:, None, None]
                                  * self.mlp(self.norm2(x)), masks[1], 0.3, self.training)

    convmixer = nn.Sequential(
        nn.Conv2d(3, dim, kernel_size=2, stride=2), nn.GELU(), nn.BatchNorm2d(dim),
        *[nn.Sequential(Residual(nn.Sequential(nn.Conv2d(dim, dim, 3, groups=dim,
                                                         padding="same"),
                                               nn.GELU(), nn.BatchNorm2d(dim))),
                        nn.Conv2d(dim, dim, kernel_size=1), nn.GELU(), nn.BatchNorm2d(dim))
          for _ in range(2)])
    block, head = PoolFormerBlock(), nn.Linear(dim, 3)
    params = [*convmixer.parameters(), *block.parameters(), *head.parameters()]
    fill_(torch, params, rng, 0.3)
    x = normal(torch, rng, 4, 3, 8, 8)
    y = torch.tensor([0, 1, 2, 0])
    opt = torch.optim.Adam(params, lr=1e-2, betas=(0.8, 0.95))
    res, losses = {}, []
    for _ in range(3):
        masks = torch.from_numpy(rng.random((2, 4)) >= 0.3)
        feats = block(convmixer(x), masks)
        loss = F.cross_entropy(head(F.adaptive_avg_pool2d(feats, 1).flatten(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res.update(losses=losses, ls1=block.layer_scale_1, ls1_grad=block.layer_scale_1.grad,
               running_mean=convmixer[2].running_mean)
    convmixer.eval()
    block.eval()
    with torch.no_grad():
        res["eval_feats"] = block(convmixer(x), masks)
        pooled = Pooling()(x)
    res["pool_minus_id"] = pooled[0, 0]
    res["dw_weight_shape"] = [*convmixer[3][0].fn[0].weight.shape]
    return res


def coatnet_vit_program(torch):
    """CoAtNet/Swin relative attention: a learned (2H-1)(2W-1) x heads table gathered with an
    index built from meshgrid, relative coords, shifts and a non-persistent buffer; the bias
    fed to scaled_dot_product_attention as a float mask; ViT stacks with a CLS head and a GAP
    head, LayerScale, and drop_path (NumPy masks in training, identity in eval)."""
    rng = np.random.default_rng(3014)
    nn, F = torch.nn, torch.nn.functional
    H = W = 3
    d, heads = 8, 2

    class RelAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.relative_bias_table = nn.Parameter(torch.zeros((2 * H - 1) * (2 * W - 1), heads))
            # Swin's original code: meshgrid without indexing= (warns; "ij" is the default)
            coords = torch.stack(torch.meshgrid([torch.arange(H), torch.arange(W)]))
            coords = torch.flatten(coords, 1)
            rel = coords[:, :, None] - coords[:, None, :]
            rel = rel.permute(1, 2, 0).contiguous()
            rel[:, :, 0] += H - 1
            rel[:, :, 1] += W - 1
            rel[:, :, 0] *= 2 * W - 1
            self.register_buffer("relative_index", rel.sum(-1), persistent=False)

        def bias(self):
            n = H * W
            b = self.relative_bias_table[self.relative_index.view(-1)].view(n, n, -1)
            return b.permute(2, 0, 1).contiguous()

        def forward(self, x, with_cls):
            B, N, _ = x.shape
            q, k, v = self.qkv(x).reshape(B, N, 3, heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
            bias = self.bias()
            if with_cls:
                bias = F.pad(bias, (1, 0, 1, 0))                 # the CLS token has no bias
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.unsqueeze(0))
            return self.proj(out.transpose(1, 2).reshape(B, N, d))

    class Block(nn.Module):
        def __init__(self, drop_path):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d, eps=1e-6), nn.LayerNorm(d, eps=1e-6)
            self.attn = RelAttention()
            self.mlp = nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d))
            self.gamma_1 = nn.Parameter(0.1 * torch.ones(d))
            self.gamma_2 = nn.Parameter(0.1 * torch.ones(d))
            self.drop_path = drop_path

        def forward(self, x, with_cls, masks):
            x = x + _drop_path(torch, self.gamma_1 * self.attn(self.norm1(x), with_cls),
                               masks[0], self.drop_path, self.training)
            return x + _drop_path(torch, self.gamma_2 * self.mlp(self.norm2(x)), masks[1],
                                  self.drop_path, self.training)

    class ViT(nn.Module):
        def __init__(self, global_pool):
            super().__init__()
            self.global_pool = global_pool
            self.patch = nn.Conv2d(1, d, 2, 2)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, d)) if global_pool == "token" else None
            self.pos_embed = nn.Parameter(torch.zeros(1, H * W + (global_pool == "token"), d))
            dpr = [v.item() for v in torch.linspace(0, 0.2, 2)]      # stochastic depth decay
            self.blocks = nn.ModuleList([Block(p) for p in dpr])
            self.norm = nn.LayerNorm(d, eps=1e-6)
            self.head = nn.Linear(d, 2)

        def forward(self, x, masks):
            x = self.patch(x).flatten(2).transpose(1, 2)
            if self.cls_token is not None:
                x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
            x = x + self.pos_embed
            for blk, m in zip(self.blocks, masks):
                x = blk(x, self.cls_token is not None, m)
            x = self.norm(x)
            x = x[:, 0] if self.global_pool == "token" else x.mean(dim=1)
            return self.head(x)

    res = {}
    x = normal(torch, rng, 3, 1, 6, 6)
    y = torch.tensor([0, 1, 1])
    for pool in ("token", "avg"):
        vit = ViT(pool)
        fill_(torch, vit, rng, 0.3)
        res[pool + "_index"] = vit.blocks[0].attn.relative_index
        res[pool + "_keys"] = list(vit.state_dict())
        opt = torch.optim.AdamW(vit.parameters(), lr=5e-3)
        losses = []
        for _ in range(2):
            masks = torch.from_numpy(rng.random((2, 2, 3)) >= 0.2)
            loss = F.cross_entropy(vit(x, masks), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        res[pool + "_losses"] = losses
        res[pool + "_table_grad"] = vit.blocks[1].attn.relative_bias_table.grad
        vit.eval()
        with torch.no_grad():
            res[pool + "_eval"] = vit(x, masks)
    return res


def parametrized_layers_program(torch):
    """Parametrizations on zoo layers: orthogonal token mixing (matrix_exp and householder
    maps, right_inverse on assignment), weight_norm on a 1x1 conv (original0/original1),
    spectral_norm on the head with its power-iteration vectors set from NumPy; training steps,
    cached evaluation, and removal keeping the parametrized value."""
    rng = np.random.default_rng(3015)
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrize
    par = nn.utils.parametrizations
    mix = nn.Linear(5, 5, bias=False)
    tall = nn.Linear(3, 5, bias=False)
    conv = nn.Conv2d(4, 4, 1)
    head = nn.Linear(4 * 5, 3)
    for m in (mix, tall, conv, head):
        fill_(torch, m, rng, 0.4)
    par.orthogonal(mix, orthogonal_map="matrix_exp")
    par.orthogonal(tall, orthogonal_map="householder")
    par.weight_norm(conv, dim=0)
    par.spectral_norm(head, n_power_iterations=2)
    sn = head.parametrizations.weight[0]
    with torch.no_grad():
        # a tall matrix's base is completed to n x n with torch.randn: redraw it from NumPy
        extra = torch.from_numpy(rng.standard_normal((5, 2)).astype(np.float32))
        base = torch.linalg.qr(torch.cat([tall.weight, extra], 1)).Q
        tall.parametrizations.weight[0].base.copy_(base)
        u = torch.from_numpy(rng.standard_normal(3).astype(np.float32))
        v = torch.from_numpy(rng.standard_normal(20).astype(np.float32))
        sn._u.copy_(F.normalize(u, dim=0, eps=sn.eps))
        sn._v.copy_(F.normalize(v, dim=0, eps=sn.eps))
    res = {"keys": sorted(n for m in (mix, tall, conv, head) for n in m.state_dict()),
           "mix_ortho": [bool((mix.weight @ mix.weight.T - torch.eye(5)).abs().max() < 1e-5)],
           "tall_ortho": [bool((tall.weight.T @ tall.weight - torch.eye(3)).abs().max() < 1e-5)],
           "g": conv.parametrizations.weight.original0.flatten()}
    x = normal(torch, rng, 2, 4, 5, 3)
    y = torch.tensor([2, 0])
    params = [*mix.parameters(), *tall.parameters(), *conv.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    losses = []
    for _ in range(3):
        h = F.relu(conv(x))                                     # (2, 4, 5, 3)
        h = mix(h.transpose(2, 3)) + tall(h.transpose(2, 3).mean(2, keepdim=True)[..., :3])
        loss = F.cross_entropy(head(h.mean(2).flatten(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["u"] = sn._u
    res["sigma_after"] = torch.linalg.matrix_norm(head.weight, ord=2)
    head.eval()
    with P.cached():
        res["cached_same"] = [head.weight is head.weight]
        res["eval_w"] = head.weight
    with torch.no_grad():
        q = torch.linalg.qr(torch.from_numpy(rng.standard_normal((5, 5)).astype(np.float32)))[0]
        mix.weight = q
    res["assigned"] = mix.weight
    res["orig_grad"] = mix.parametrizations.weight.original.grad
    P.remove_parametrizations(conv, "weight", leave_parametrized=True)
    res["conv_w"] = conv.weight
    res["conv_plain"] = [P.is_parametrized(conv), P.is_parametrized(mix, "weight"),
                         type(conv.weight).__name__]
    return res


def legacy_norms_program(torch):
    """The hook-based norms older zoo code still calls: nn.utils.weight_norm (deprecated,
    weight_g / weight_v) on a depthwise conv, nn.utils.spectral_norm (weight_orig, weight_u,
    weight_v; u and v set from NumPy) on a 1x1 conv, state_dict keys, a deepcopy, training
    steps, eval mode (no power iteration), and remove_* folding the weights back."""
    import copy
    rng = np.random.default_rng(3016)
    nn, F = torch.nn, torch.nn.functional
    dw = nn.utils.weight_norm(nn.Conv2d(4, 4, 3, padding=1, groups=4), name="weight", dim=0)
    pw = nn.utils.spectral_norm(nn.Conv2d(4, 2, 1), n_power_iterations=1, eps=1e-12)
    fill_(torch, [*dw.parameters(), *pw.parameters()], rng, 0.5)
    with torch.no_grad():
        pw.weight_u.copy_(F.normalize(normal(torch, rng, 2), dim=0))
        pw.weight_v.copy_(F.normalize(normal(torch, rng, 4), dim=0))
    res = {"keys": sorted([*dw.state_dict(), *pw.state_dict()]),
           "param_names": [n for m in (dw, pw) for n, _ in m.named_parameters()]}
    twin = copy.deepcopy(pw)
    x = normal(torch, rng, 2, 4, 5, 5)
    opt = torch.optim.RMSprop([*dw.parameters(), *pw.parameters()], lr=1e-2, alpha=0.9,
                              centered=True)
    losses = []
    for _ in range(3):
        out = pw(F.leaky_relu(dw(x), 0.2))
        loss = out.square().mean() - out.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res.update(losses=losses, u=pw.weight_u, g_grad=dw.weight_g.grad, twin_out=twin(x))
    pw.eval()
    u_before = pw.weight_u.clone()
    with torch.no_grad():
        res["eval_out"] = pw(x)
    res["eval_keeps_u"] = [bool(torch.equal(u_before, pw.weight_u))]
    nn.utils.remove_weight_norm(dw)
    nn.utils.remove_spectral_norm(pw)
    res["folded"] = [dw.weight, pw.weight]
    res["after_keys"] = sorted([*dw.state_dict(), *pw.state_dict()])
    return res


def drop_path_rng_program(torch):
    """timm's DropPath drawing its own mask (``x.new_empty(shape).bernoulli_(keep_prob)``):
    values and streams differ between libraries, so only what holds for both is compared:
    reproducibility under manual_seed, per-sample masks (whole rows zero or scaled by
    1/keep_prob), the kept fraction, scale_by_keep=False, identity in eval, and gradients
    that follow the mask."""
    nn = torch.nn

    def drop_path(x, drop_prob=0.0, training=False, scale_by_keep=True):
        if drop_prob == 0.0 or not training:
            return x
        keep_prob = 1 - drop_prob
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
        if keep_prob > 0.0 and scale_by_keep:
            random_tensor.div_(keep_prob)
        return x * random_tensor

    class DropPath(nn.Module):
        def __init__(self, drop_prob):
            super().__init__()
            self.drop_prob = drop_prob

        def forward(self, x):
            return drop_path(x, self.drop_prob, self.training)

        def extra_repr(self):
            return f"drop_prob={round(self.drop_prob, 3):0.3f}"

    layer = DropPath(0.25)
    x = torch.ones(4000, 3, 2, requires_grad=True)
    torch.manual_seed(7)
    a = layer(x)
    torch.manual_seed(7)
    b = layer(x)
    rows = a.detach().flatten(1)
    per_row = [bool(((rows == 0).all(1) | (rows == 1 / 0.75).all(1)).all())]
    kept = (rows[:, 0] > 0).float().mean().item()
    a.sum().backward()
    grad_rows = x.grad.flatten(1)
    layer.eval()
    plain = drop_path(x, 0.5, True, scale_by_keep=False).detach().unique()
    return {"same_under_seed": [bool(torch.equal(a, b))], "whole_rows": per_row,
            "kept_fraction_ok": [abs(kept - 0.75) < 0.03],
            "grad_follows_mask": [bool(torch.equal(grad_rows, rows))],
            "eval_identity": [layer(x) is x], "unscaled_values": plain,
            "repr": [repr(layer)], "dtype": [str(a.dtype).split(".")[1]]}


PROGRAMS = [perceiver_io_program, mixer_family_program, convmixer_poolformer_program,
            coatnet_vit_program, parametrized_layers_program, legacy_norms_program,
            drop_path_rng_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 attention / LayerNorm accumulation order through AdamW steps
        "perceiver_io_program": (1e-4, 1e-5),
        # BatchNorm over 4x4 maps divides by small batch stds (amplifies float32 noise)
        "convmixer_poolformer_program": (1e-4, 1e-5),
        # matrix_exp / householder products and power iteration in float32
        "parametrized_layers_program": (1e-4, 1e-5),
    })
