"""Diffusion customisation written as diffusers-style reference repositories write it in torch,
run once with `torch` bound to ember and once to PyTorch from the same NumPy weights: ControlNet
(zero-initialised 1x1 convs, a trainable copy of the encoder made with copy.deepcopy and
load_state_dict, a hint encoder, residuals added to the frozen U-Net's skips), textual inversion
(a new token row trained while the other rows are held by a gradient hook or restored after the
step), DreamBooth's prior-preservation loss with min-SNR weighting and an EMA copy, score
distillation sampling (a custom autograd.Function and ``backward(gradient=...)``), and LoRA
injected through forward hooks and through parametrize. Sibling _sampling runs the samplers and
attention processors; _fixes pins what they found."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _timestep_embedding(torch, timesteps, dim, flip_sin_to_cos=True, shift=1.0, max_period=10000):
    # diffusers' get_timestep_embedding
    half = dim // 2
    exponent = -math.log(max_period) * torch.arange(0, half, dtype=torch.float32,
                                                    device=timesteps.device)
    exponent = exponent / (half - shift)
    emb = torch.exp(exponent)
    emb = timesteps[:, None].float() * emb[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, half:], emb[:, :half]], dim=-1)
    return emb


def _scaled_linear_alphas(torch, n=50):
    betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, n, dtype=torch.float32) ** 2
    alphas = 1.0 - betas
    return torch.cumprod(alphas, dim=0)


def _unet_classes(torch):
    nn = torch.nn
    F = torch.nn.functional

    class ResBlock(nn.Module):
        def __init__(self, cin, cout, temb):
            super().__init__()
            self.norm1 = nn.GroupNorm(2, cin, eps=1e-6)
            self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
            self.time_emb_proj = nn.Linear(temb, cout)
            self.norm2 = nn.GroupNorm(2, cout, eps=1e-6)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
            self.conv_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

        def forward(self, x, temb):
            h = self.conv1(F.silu(self.norm1(x)))
            h = h + self.time_emb_proj(F.silu(temb))[:, :, None, None]
            h = self.conv2(F.silu(self.norm2(h)))
            if self.conv_shortcut is not None:
                x = self.conv_shortcut(x)
            return (x + h) / 1.0

    class Encoder(nn.Module):
        def __init__(self, cin=4, ch=(8, 8), temb=16):
            super().__init__()
            self.conv_in = nn.Conv2d(cin, ch[0], 3, padding=1)
            self.time_embedding = nn.Sequential(nn.Linear(8, temb), nn.SiLU(),
                                                nn.Linear(temb, temb))
            self.down_blocks = nn.ModuleList()
            self.downsamplers = nn.ModuleList()
            prev = ch[0]
            for c in ch:
                self.down_blocks.append(ResBlock(prev, c, temb))
                self.downsamplers.append(nn.Conv2d(c, c, 3, stride=2, padding=1))
                prev = c
            self.mid_block = ResBlock(prev, prev, temb)

        def embed(self, t):
            return self.time_embedding(_timestep_embedding(torch, t, 8))

    class UNet(Encoder):
        def __init__(self):
            super().__init__()
            self.up_blocks = nn.ModuleList([ResBlock(16, 8, 16), ResBlock(16, 8, 16)])
            self.conv_norm_out = nn.GroupNorm(2, 8)
            self.conv_out = nn.Conv2d(8, 4, 3, padding=1)

        def forward(self, x, t, down_block_additional_residuals=None,
                    mid_block_additional_residual=None):
            temb = self.embed(t)
            h = self.conv_in(x)
            skips = []
            for block, down in zip(self.down_blocks, self.downsamplers):
                h = block(h, temb)
                skips.append(h)
                h = down(h)
            if down_block_additional_residuals is not None:
                new = ()
                for s, r in zip(skips, down_block_additional_residuals):
                    new = new + (s + r,)
                skips = list(new)
            h = self.mid_block(h, temb)
            if mid_block_additional_residual is not None:
                h = h + mid_block_additional_residual
            for block in self.up_blocks:
                s = skips.pop()
                h = F.interpolate(h, scale_factor=2.0, mode="nearest")
                h = block(torch.cat([h, s], dim=1), temb)
            return self.conv_out(F.silu(self.conv_norm_out(h)))

    def zero_module(module):
        for p in module.parameters():
            nn.init.zeros_(p)
        return module

    class ControlNet(Encoder):
        def __init__(self):
            super().__init__()
            self.controlnet_cond_embedding = nn.Sequential(
                nn.Conv2d(3, 4, 3, padding=1), nn.SiLU(), nn.Conv2d(4, 8, 3, padding=1),
                nn.SiLU(), zero_module(nn.Conv2d(8, 8, 3, padding=1)))
            self.controlnet_down_blocks = nn.ModuleList(
                [zero_module(nn.Conv2d(8, 8, kernel_size=1)) for _ in range(2)])
            self.controlnet_mid_block = zero_module(nn.Conv2d(8, 8, kernel_size=1))

        @classmethod
        def from_unet(cls, unet):
            net = cls()
            net.conv_in.load_state_dict(unet.conv_in.state_dict())
            net.time_embedding.load_state_dict(unet.time_embedding.state_dict())
            net.down_blocks.load_state_dict(unet.down_blocks.state_dict())
            net.downsamplers.load_state_dict(unet.downsamplers.state_dict())
            net.mid_block.load_state_dict(unet.mid_block.state_dict())
            return net

        def forward(self, x, t, cond, conditioning_scale=1.0):
            temb = self.embed(t)
            h = self.conv_in(x) + self.controlnet_cond_embedding(cond)
            res = ()
            for block, down in zip(self.down_blocks, self.downsamplers):
                h = block(h, temb)
                res += (h,)
                h = down(h)
            h = self.mid_block(h, temb)
            down_res = [zc(r) * conditioning_scale
                        for zc, r in zip(self.controlnet_down_blocks, res)]
            return down_res, self.controlnet_mid_block(h) * conditioning_scale

    return UNet, ControlNet, zero_module


def controlnet_program(torch):
    """Train a ControlNet copied from a frozen U-Net: zero convs start it as a no-op."""
    rng = np.random.default_rng(320)
    F = torch.nn.functional
    UNet, ControlNet, _ = _unet_classes(torch)
    unet = UNet()
    fill_(torch, unet, rng, 0.2)
    unet.requires_grad_(False)
    unet.eval()
    controlnet = ControlNet.from_unet(unet)
    fill_(torch, controlnet.controlnet_cond_embedding[:4], rng, 0.2)
    controlnet.train()
    res = {"copied": [bool(torch.equal(controlnet.mid_block.conv1.weight,
                                       unet.mid_block.conv1.weight))],
           "zero": [bool((controlnet.controlnet_mid_block.weight == 0).all())]}
    # the deepcopy path (ControlNet-XS and T2I-Adapter repos)
    enc = copy.deepcopy(unet.down_blocks)
    enc.requires_grad_(True)
    res["deepcopy_shared"] = [enc[0].conv1.weight.data_ptr() == unet.down_blocks[0].conv1.weight
                              .data_ptr(), enc[0].conv1.weight.requires_grad,
                              unet.down_blocks[0].conv1.weight.requires_grad]
    acp = _scaled_linear_alphas(torch)
    opt = torch.optim.AdamW(controlnet.parameters(), lr=1e-2, betas=(0.9, 0.999),
                            weight_decay=1e-2, eps=1e-8)
    x0, cond = normal(torch, rng, 2, 4, 8, 8), torch.sigmoid(normal(torch, rng, 2, 3, 8, 8))
    noise = normal(torch, rng, 3, 2, 4, 8, 8)
    ts = torch.tensor([[3, 40], [17, 25], [49, 0]])
    res["loss"] = []
    for step in range(3):
        t = ts[step]
        a = acp[t].flatten()
        while len(a.shape) < len(x0.shape):
            a = a.unsqueeze(-1)
        noisy = a.sqrt() * x0 + (1 - a).sqrt() * noise[step]
        down, mid = controlnet(noisy, t, cond)
        pred = unet(noisy, t, down_block_additional_residuals=[r.to(dtype=torch.float32)
                                                                for r in down],
                    mid_block_additional_residual=mid.to(dtype=torch.float32))
        loss = F.mse_loss(pred.float(), noise[step].float(), reduction="mean")
        loss.backward()
        if step == 0:
            res["first_grads"] = [controlnet.controlnet_mid_block.weight.grad.clone(),
                                  controlnet.controlnet_down_blocks[0].bias.grad.clone()]
            res["cond_first_grad_none"] = [
                controlnet.controlnet_cond_embedding[0].weight.grad is None,
                controlnet.down_blocks[0].conv1.weight.grad is None]
        torch.nn.utils.clip_grad_norm_(controlnet.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        res["loss"].append(loss.item())
    res["unet_grad_none"] = [all(p.grad is None for p in unet.parameters())]
    res["zc"] = controlnet.controlnet_down_blocks[1].weight
    res["hint"] = controlnet.controlnet_cond_embedding[0].weight
    with torch.no_grad():
        down, mid = controlnet(noisy, ts[0], cond, conditioning_scale=0.5)
        res["infer"] = unet(noisy, ts[0], down, mid)
    return res


def textual_inversion_program(torch):
    """Two textual-inversion idioms: a hook zeroing other rows' gradients, and restoring them."""
    rng = np.random.default_rng(321)
    nn = torch.nn
    F = torch.nn.functional
    vocab, dim = 10, 6

    class TextEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding = nn.Embedding(vocab, dim)
            self.position_embedding = nn.Embedding(5, dim)
            self.layer = nn.TransformerEncoderLayer(dim, 2, 12, dropout=0.0, batch_first=True,
                                                    norm_first=True, activation="gelu")
            self.final_layer_norm = nn.LayerNorm(dim)

        def resize_token_embeddings(self, n):
            old = self.token_embedding
            new = nn.Embedding(n, dim)
            new.weight.data[:old.num_embeddings, :] = old.weight.data[:old.num_embeddings, :]
            self.token_embedding = new
            return new

        def forward(self, ids):
            pos = torch.arange(ids.shape[1]).unsqueeze(0)
            h = self.token_embedding(ids) + self.position_embedding(pos)
            return self.final_layer_norm(self.layer(h))

    res = {"loss": []}
    for mode in ("hook", "restore"):
        enc = TextEncoder()
        fill_(torch, enc, rng, 0.4)
        emb = enc.resize_token_embeddings(vocab + 1)
        placeholder = vocab
        initializer = 3
        token_embeds = emb.weight.data
        with torch.no_grad():
            token_embeds[placeholder] = token_embeds[initializer].clone()
        enc.requires_grad_(False)
        enc.token_embedding.weight.requires_grad_(True)
        orig = enc.token_embedding.weight.data.clone()
        if mode == "hook":
            mask = torch.zeros(vocab + 1, 1)
            mask[placeholder] = 1.0
            handle = emb.weight.register_hook(lambda g: g * mask)
        opt = torch.optim.AdamW(enc.token_embedding.parameters(), lr=5e-2, weight_decay=1e-2)
        ids = torch.tensor([[1, placeholder, 4, 2, 0], [placeholder, 5, 5, 7, 9]])
        target = normal(torch, rng, 2, 5, dim)
        for _ in range(3):
            out = enc(ids)
            loss = F.mse_loss(out, target)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if mode == "restore":
                index_no_updates = torch.ones((len(orig),), dtype=torch.bool)
                index_no_updates[min([placeholder]):max([placeholder]) + 1] = False
                with torch.no_grad():
                    enc.token_embedding.weight[index_no_updates] = orig[index_no_updates]
            res["loss"].append(loss.item())
        if mode == "hook":
            handle.remove()
        w = enc.token_embedding.weight
        res[mode + "_learned"] = w[placeholder]
        # AdamW decays every row in the hook idiom; restored rows come back exactly
        res[mode + "_others_changed"] = (w[:vocab] - orig[:vocab]).abs().max().reshape(1)
        res[mode + "_saved"] = w.detach()[placeholder:placeholder + 1].clone()
    return res


def _compute_snr(torch, acp, timesteps):
    # diffusers' training_utils.compute_snr
    sqrt_alphas_cumprod = acp ** 0.5
    sqrt_one_minus = (1.0 - acp) ** 0.5
    a = sqrt_alphas_cumprod.to(device=timesteps.device)[timesteps].float()
    while len(a.shape) < len(timesteps.shape):
        a = a[..., None]
    s = sqrt_one_minus.to(device=timesteps.device)[timesteps].float()
    while len(s.shape) < len(timesteps.shape):
        s = s[..., None]
    return (a / s) ** 2


def dreambooth_program(torch):
    """DreamBooth: instance and class halves of one batch, prior loss, min-SNR, EMA, warmup."""
    rng = np.random.default_rng(322)
    F = torch.nn.functional
    UNet, _, _ = _unet_classes(torch)
    unet = UNet()
    fill_(torch, unet, rng, 0.2)
    ema = copy.deepcopy(unet)
    ema.requires_grad_(False)
    shadow = [p.clone().detach() for p in unet.parameters()]
    acp = _scaled_linear_alphas(torch)
    opt = torch.optim.AdamW(unet.parameters(), lr=2e-3, weight_decay=1e-2)
    warm = 2
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: float(s) / float(max(1, warm)) if s < warm else 1.0)
    inst, cls = normal(torch, rng, 2, 4, 8, 8), normal(torch, rng, 2, 4, 8, 8)
    noises = normal(torch, rng, 3, 4, 4, 8, 8)
    tss = [torch.tensor(v) for v in ([3, 12, 30, 45], [0, 49, 7, 20], [25, 25, 1, 33])]
    res = {"loss": [], "prior": [], "lr": [], "w": []}
    decay, gamma = 0.9, 5.0
    for step in range(3):
        latents = torch.cat([inst, cls], dim=0)
        t = tss[step].long()
        s1 = acp[t] ** 0.5
        s2 = (1 - acp[t]) ** 0.5
        noisy = s1.view(-1, 1, 1, 1) * latents + s2.view(-1, 1, 1, 1) * noises[step]
        # v-prediction target (scheduler.get_velocity)
        target = s1.flatten()[:, None, None, None] * noises[step] \
            - s2.flatten()[:, None, None, None] * latents
        pred = unet(noisy, t)
        pred, pred_prior = torch.chunk(pred, 2, dim=0)
        target, target_prior = torch.chunk(target, 2, dim=0)
        snr = _compute_snr(torch, acp, t[:2])
        mse_w = torch.stack([snr, gamma * torch.ones_like(t[:2])], dim=1).min(dim=1)[0]
        mse_w = mse_w / (snr + 1)
        loss = F.mse_loss(pred.float(), target.float(), reduction="none")
        loss = loss.mean(dim=list(range(1, len(loss.shape)))) * mse_w
        loss = loss.mean()
        prior_loss = F.mse_loss(pred_prior.float(), target_prior.float(), reduction="mean")
        loss = loss + 0.7 * prior_loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(unet.parameters(), 0.5, norm_type=2.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        # diffusers EMAModel.step, both spellings
        one_minus = 1 - min(decay, (1 + step) / (10 + step))
        params = [p for p in unet.parameters()]
        torch._foreach_sub_(shadow, torch._foreach_sub(shadow, params), alpha=one_minus)
        with torch.no_grad():
            for s_param, param in zip(ema.parameters(), unet.parameters()):
                if param.requires_grad:
                    s_param.sub_(one_minus * (s_param - param))
        res["loss"].append(loss.item())
        res["prior"].append(prior_loss.item())
        res["lr"].append(sched.get_last_lr()[0])
        res["w"].append(mse_w)
    res["ema"] = ema.conv_out.weight
    res["shadow"] = shadow[-2]
    res["ema_state"] = [sorted(ema.state_dict().keys())[:3]]
    res["ema_state"] = res["ema_state"][0]
    return res


def sds_program(torch):
    """Score distillation: SpecifyGradient Function, backward(gradient=), and the reparametrised
    MSE form, all on latents that a small decoder renders."""
    rng = np.random.default_rng(323)
    nn = torch.nn
    F = torch.nn.functional
    custom_fwd, custom_bwd = torch.cuda.amp.custom_fwd, torch.cuda.amp.custom_bwd

    class SpecifyGradient(torch.autograd.Function):
        @staticmethod
        @custom_fwd
        def forward(ctx, input_tensor, gt_grad):
            ctx.save_for_backward(gt_grad)
            return torch.ones([1], device=input_tensor.device, dtype=input_tensor.dtype)

        @staticmethod
        @custom_bwd
        def backward(ctx, grad_scale):
            (gt_grad,) = ctx.saved_tensors
            gt_grad = gt_grad * grad_scale
            return gt_grad, None

    UNet, _, _ = _unet_classes(torch)
    unet = UNet()
    fill_(torch, unet, rng, 0.2)
    unet.requires_grad_(False)
    acp = _scaled_linear_alphas(torch)
    render = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Tanh())
    fill_(torch, render, rng, 0.3)
    image = nn.Parameter(normal(torch, rng, 1, 3, 16, 16) * 0.5)
    opt = torch.optim.Adam([image] + list(render.parameters()), lr=1e-2)
    noises = normal(torch, rng, 3, 1, 4, 8, 8)
    res = {"grad_norm": [], "loss": [], "names": []}
    for step, mode in enumerate(("function", "backward", "mse")):
        latents = render(F.interpolate(image, (8, 8), mode="bilinear", align_corners=False))
        t = torch.tensor([10 + 15 * step])
        with torch.no_grad():
            noise = noises[step]
            latents_noisy = acp[t].sqrt() * latents + (1 - acp[t]).sqrt() * noise
            latent_model_input = torch.cat([latents_noisy] * 2)
            noise_pred = unet(latent_model_input, torch.cat([t] * 2))
            noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
            noise_pred = noise_pred_uncond + 7.5 * (noise_pred_text - noise_pred_uncond)
        w = (1 - acp[t])
        grad = w * (noise_pred - noise)
        grad = torch.nan_to_num(grad)
        res["grad_norm"].append(grad.norm().item())
        if mode == "function":
            loss = SpecifyGradient.apply(latents, grad)
            res["names"].append(type(loss.grad_fn).__name__.endswith("Backward"))
            loss.backward()
            res["loss"].append(loss.item())
        elif mode == "backward":
            latents.backward(gradient=grad, retain_graph=True)
            res["loss"].append(0.0)
        else:
            targets = (latents - grad).detach()
            loss = 0.5 * F.mse_loss(latents.float(), targets, reduction="sum") / latents.shape[0]
            loss.backward()
            res["loss"].append(loss.item())
        res["img_grad_" + mode] = image.grad.clone()
        opt.step()
        opt.zero_grad()
    res["image"], res["render"] = image, render[0].weight
    return res


def lora_program(torch):
    """LoRA on attention projections: forward hooks (peft-free repos), parametrize (minLoRA),
    merging, unmerging and removal."""
    rng = np.random.default_rng(324)
    nn = torch.nn
    F = torch.nn.functional
    parametrize = torch.nn.utils.parametrize

    class Attention(nn.Module):
        def __init__(self, dim=8, heads=2):
            super().__init__()
            self.heads = heads
            self.to_q = nn.Linear(dim, dim, bias=False)
            self.to_k = nn.Linear(dim, dim, bias=False)
            self.to_v = nn.Linear(dim, dim, bias=False)
            self.to_out = nn.ModuleList([nn.Linear(dim, dim), nn.Dropout(0.0)])

        def forward(self, x, ctx=None):
            ctx = x if ctx is None else ctx
            b, n, d = x.shape
            q = self.to_q(x).view(b, -1, self.heads, d // self.heads).transpose(1, 2)
            k = self.to_k(ctx).view(b, -1, self.heads, d // self.heads).transpose(1, 2)
            v = self.to_v(ctx).view(b, -1, self.heads, d // self.heads).transpose(1, 2)
            h = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                               is_causal=False)
            h = h.transpose(1, 2).reshape(b, -1, d)
            for layer in self.to_out:
                h = layer(h)
            return h

    class LoRALinearLayer(nn.Module):
        def __init__(self, fin, fout, rank=2, alpha=4.0):
            super().__init__()
            self.down = nn.Linear(fin, rank, bias=False)
            self.up = nn.Linear(rank, fout, bias=False)
            self.scale = alpha / rank
            nn.init.normal_(self.down.weight, std=1 / rank)
            nn.init.zeros_(self.up.weight)

        def forward(self, h):
            dtype = self.down.weight.dtype
            return self.up(self.down(h.to(dtype))) * self.scale

    class LoRAParametrization(nn.Module):
        def __init__(self, fin, fout, rank=2, alpha=4.0):
            super().__init__()
            self.lora_A = nn.Parameter(torch.zeros(rank, fin))
            self.lora_B = nn.Parameter(torch.zeros(fout, rank))
            self.scaling = alpha / rank
            self.enabled = True

        def forward(self, W):
            if not self.enabled:
                return W
            return W + torch.matmul(self.lora_B, self.lora_A).view(W.shape) * self.scaling

    res = {"loss": []}
    x, ctx = normal(torch, rng, 2, 5, 8), normal(torch, rng, 2, 3, 8)
    y = normal(torch, rng, 2, 5, 8)
    # forward hooks
    attn = Attention()
    fill_(torch, attn, rng, 0.3)
    attn.requires_grad_(False)
    loras, handles = nn.ModuleDict(), []
    for name in ("to_q", "to_k", "to_v"):
        mod = getattr(attn, name)
        lora = LoRALinearLayer(mod.in_features, mod.out_features)
        fill_(torch, lora.down, rng, 0.5)
        loras[name] = lora
        handles.append(mod.register_forward_hook(
            lambda m, inp, out, lora=lora: out + lora(inp[0])))
    opt = torch.optim.AdamW(loras.parameters(), lr=1e-2)
    for _ in range(3):
        loss = F.mse_loss(attn(x, ctx), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        res["loss"].append(loss.item())
    res["hook_out"] = attn(x, ctx)
    res["hook_up"] = loras["to_v"].up.weight
    # fuse: W += scale * up @ down, then remove hooks
    with torch.no_grad():
        for name, lora in loras.items():
            mod = getattr(attn, name)
            mod.weight.data += lora.scale * torch.bmm(lora.up.weight[None],
                                                      lora.down.weight[None])[0]
    for h in handles:
        h.remove()
    res["fused_out"] = attn(x, ctx)
    # parametrize
    attn2 = Attention()
    fill_(torch, attn2, rng, 0.3)
    for name in ("to_q", "to_v"):
        mod = getattr(attn2, name)
        p = LoRAParametrization(mod.in_features, mod.out_features)
        fill_(torch, [p.lora_A], rng, 0.5)
        parametrize.register_parametrization(mod, "weight", p)
    lora_params = [p for n, p in attn2.named_parameters() if "lora_" in n]
    for n, p in attn2.named_parameters():
        p.requires_grad = "lora_" in n
    res["param_names"] = sorted(n for n, _ in attn2.named_parameters())
    res["state_keys"] = sorted(attn2.state_dict().keys())
    opt = torch.optim.SGD(lora_params, lr=0.5, momentum=0.9)
    for _ in range(3):
        with parametrize.cached():
            loss = F.mse_loss(attn2(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        res["loss"].append(loss.item())
    res["is_param"] = [parametrize.is_parametrized(attn2.to_q),
                       parametrize.is_parametrized(attn2.to_k),
                       parametrize.is_parametrized(attn2.to_q, "weight")]
    res["orig"] = attn2.to_q.parametrizations.weight.original
    for lin in (attn2.to_q, attn2.to_v):
        lin.parametrizations.weight[0].enabled = False
    res["disabled"] = attn2(x)
    for lin in (attn2.to_q, attn2.to_v):
        lin.parametrizations.weight[0].enabled = True
    merged_q = attn2.to_q.weight.detach().clone()
    parametrize.remove_parametrizations(attn2.to_q, "weight", leave_parametrized=True)
    parametrize.remove_parametrizations(attn2.to_v, "weight", leave_parametrized=False)
    res["merged"] = attn2.to_q.weight
    res["merged_eq"] = [bool(torch.equal(merged_q, attn2.to_q.weight))]
    res["after_remove"] = attn2(x)
    res["types"] = [type(attn2.to_q).__name__, type(attn2.to_q.weight).__name__]
    return res


PROGRAMS = [controlnet_program, textual_inversion_program, dreambooth_program, sds_program,
            lora_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
