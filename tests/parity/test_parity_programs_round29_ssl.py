"""Self-supervised vision, second wave, written as facebookresearch/dinov2, mlfoundations/
open_clip, facebookresearch/vicreg and lightly write it in torch, run once with `torch` bound to
ember and once to PyTorch from the same NumPy weights and data: DINOv2 with iBOT (masked patch
tokens through torch.where with a mask token, index_select with out= into a preallocated
buffer's slice, Sinkhorn-Knopp teacher centring next to the EMA centre, a DINO head whose last
layer is weight-normed by nn.utils.parametrizations.weight_norm with a frozen magnitude,
cancelled last-layer gradients, a teacher temperature warm-up, layer-wise lr decay groups with
extra keys, a momentum teacher updated by torch._foreach_mul_/_foreach_add_ under no_grad);
CLIP (open_clip's ClipLoss with label caching and an emulated two-rank all-gather, a causal
text transformer pooled at the argmax token, logit_scale clamped to ln 100 after each step,
SigLIP's sigmoid loss with a learnable bias, zero-shot top-k accuracy); VICReg with a
FullGatherLayer autograd.Function returning a tuple, and lightly's Barlow Twins loss with an
in-place masked off-diagonal scaling. The generative programs are in _gen."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _vit(torch, dim=8, heads=2, patch=4, depth=2):
    """A DINOv2-style ViT: conv patch embed, cls and mask tokens, interpolated pos-embed,
    pre-norm blocks with BEiT's q/v biases and LayerScale, a final norm giving cls and patch
    tokens."""
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_heads = heads
            self.scale = (dim // heads) ** -0.5
            # BEiT-style biases: a key bias only shifts each softmax row, so it has none
            self.qkv = nn.Linear(dim, dim * 3, bias=False)
            self.q_bias = nn.Parameter(torch.zeros(dim))
            self.v_bias = nn.Parameter(torch.zeros(dim))
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias, requires_grad=False),
                                  self.v_bias))
            qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
            qkv = qkv.reshape(B, N, 3, self.num_heads, C // self.num_heads)
            qkv = qkv.permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]
            attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
            x = (attn @ v).transpose(1, 2).reshape(B, N, C)
            return self.proj(x)

    class LayerScale(nn.Module):
        def __init__(self, init_values=1e-1, inplace=False):
            super().__init__()
            self.inplace = inplace
            self.gamma = nn.Parameter(init_values * torch.ones(dim))

        def forward(self, x):
            return x.mul_(self.gamma) if self.inplace else x * self.gamma

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=1e-6)
            self.attn = Attention()
            self.ls1 = LayerScale()
            self.norm2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
            self.ls2 = LayerScale(inplace=True)

        def forward(self, x):
            x = x + self.ls1(self.attn(self.norm1(x)))
            return x + self.ls2(self.mlp(self.norm2(x)))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, patch, patch)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, 1 + 4, dim))
            self.mask_token = nn.Parameter(torch.zeros(1, dim))
            self.blocks = nn.ModuleList([Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(dim, eps=1e-6)

        def interpolate_pos_encoding(self, x, w, h):
            npatch, N = x.shape[1] - 1, self.pos_embed.shape[1] - 1
            if npatch == N and w == h:
                return self.pos_embed
            pos_embed = self.pos_embed.float()
            class_pos_embed, patch_pos_embed = pos_embed[:, 0], pos_embed[:, 1:]
            M = int(math.sqrt(N))
            patch_pos_embed = F.interpolate(
                patch_pos_embed.reshape(1, M, M, dim).permute(0, 3, 1, 2),
                size=(w // patch, h // patch), mode="bicubic", antialias=False)
            patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, dim)
            return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1).to(x.dtype)

        def prepare_tokens_with_masks(self, x, masks=None):
            B, nc, w, h = x.shape
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            if masks is not None:
                x = torch.where(masks.unsqueeze(-1), self.mask_token.to(x.dtype).unsqueeze(0), x)
            x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
            return x + self.interpolate_pos_encoding(x, w, h)

        def forward(self, x, masks=None):
            x = self.prepare_tokens_with_masks(x, masks)
            for blk in self.blocks:
                x = blk(x)
            x_norm = self.norm(x)
            return {"x_norm_clstoken": x_norm[:, 0], "x_norm_patchtokens": x_norm[:, 1:],
                    "masks": masks}
    return ViT


def _dino_head(torch):
    """dinov2's DINOHead with the weight-norm parametrization on its last layer."""
    nn, F = torch.nn, torch.nn.functional

    class DINOHead(nn.Module):
        def __init__(self, in_dim, out_dim, hidden_dim=12, bottleneck_dim=6):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(),
                                     nn.Linear(hidden_dim, bottleneck_dim))
            self.last_layer = nn.utils.parametrizations.weight_norm(
                nn.Linear(bottleneck_dim, out_dim, bias=False))
            self.last_layer.parametrizations.weight.original0.data.fill_(1)
            self.last_layer.parametrizations.weight.original0.requires_grad = False

        def forward(self, x):
            x = self.mlp(x)
            eps = 1e-6 if x.dtype == torch.float16 else 1e-12
            x = F.normalize(x, dim=-1, p=2, eps=eps)
            return self.last_layer(x)
    return DINOHead


def dinov2_ibot_program(torch):
    """DINOv2 meta-architecture: DINO loss on the cls token (centred teacher for the first
    iteration, Sinkhorn-Knopp afterwards), the iBOT loss on masked patch tokens gathered by
    index_select(out=buffer[:n]), layer-wise lr decay groups, cancelled last-layer gradients,
    and a _foreach_ momentum teacher."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2901)
    ViT, DINOHead = _vit(torch), _dino_head(torch)
    out_dim, patch_out = 10, 7
    res = {}

    def build():
        return nn.ModuleDict({"backbone": ViT(), "dino_head": DINOHead(8, out_dim),
                              "ibot_head": DINOHead(8, patch_out)})

    student, teacher = build(), build()
    for name, p in student.named_parameters():
        if "original0" not in name:
            fill_(torch, [p], rng, 0.3)
    teacher.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad = False
    res["param_names"] = [n for n, _ in student.named_parameters()]

    class DINOLoss(nn.Module):
        def __init__(self, out_dim, student_temp=0.1, center_momentum=0.9):
            super().__init__()
            self.student_temp, self.center_momentum = student_temp, center_momentum
            self.register_buffer("center", torch.zeros(1, out_dim))
            self.updated = True

        @torch.no_grad()
        def softmax_center_teacher(self, teacher_output, teacher_temp):
            self.apply_center_update()
            return F.softmax((teacher_output - self.center) / teacher_temp, dim=-1)

        @torch.no_grad()
        def sinkhorn_knopp_teacher(self, teacher_output, teacher_temp, n_iterations=3):
            teacher_output = teacher_output.float()
            Q = torch.exp(teacher_output / teacher_temp).t()
            B, K = Q.shape[1], Q.shape[0]
            sum_Q = torch.sum(Q)
            Q /= sum_Q
            for _ in range(n_iterations):
                sum_of_rows = torch.sum(Q, dim=1, keepdim=True)
                Q /= sum_of_rows
                Q /= K
                Q /= torch.sum(Q, dim=0, keepdim=True)
                Q /= B
            Q *= B
            return Q.t()

        def forward(self, student_output_list, teacher_out_softmaxed_centered_list):
            total_loss = 0
            for s in student_output_list:
                lsm = F.log_softmax(s / self.student_temp, dim=-1)
                for t in teacher_out_softmaxed_centered_list:
                    loss = torch.sum(t * lsm, dim=-1)
                    total_loss -= loss.mean()
            return total_loss

        @torch.no_grad()
        def update_center(self, teacher_output):
            self.updated = False
            self.len_teacher_output = len(teacher_output)
            self.async_batch_center = torch.sum(teacher_output, dim=0, keepdim=True)

        @torch.no_grad()
        def apply_center_update(self):
            if self.updated is False:
                _t = self.async_batch_center / self.len_teacher_output
                self.center = self.center * self.center_momentum + _t * (
                    1 - self.center_momentum)
                self.updated = True

    class iBOTPatchLoss(DINOLoss):
        def forward_masked(self, student_patch_tokens_masked, teacher_patch_tokens_masked,
                           student_masks_flat, n_masked_patches=None, masks_weight=None):
            t, s = teacher_patch_tokens_masked, student_patch_tokens_masked
            loss = torch.sum(t * F.log_softmax(s / self.student_temp, dim=-1), dim=-1)
            if masks_weight is None:
                masks_weight = (1 / student_masks_flat.sum(-1).clamp(min=1.0)).unsqueeze(
                    -1).expand_as(student_masks_flat)[student_masks_flat]
            if n_masked_patches is not None:
                loss = loss[:n_masked_patches]
            loss = loss * masks_weight
            return -loss.sum() / student_masks_flat.shape[0]

    def get_params_groups(model, lr_decay_rate=0.8, num_layers=2):
        groups = []
        for name, param in model.named_parameters():
            layer_id = num_layers + 1
            if name.startswith("backbone."):
                if any(k in name for k in ("pos_embed", "patch_embed", "mask_token",
                                           "cls_token")):
                    layer_id = 0
                elif ".blocks." in name:
                    layer_id = int(name[name.find(".blocks."):].split(".")[2]) + 1
            d = {"params": param, "is_last_layer": False,
                 "lr_multiplier": lr_decay_rate ** (num_layers + 1 - layer_id),
                 "wd_multiplier": 1.0, "name": name}
            if "last_layer" in name:
                d["is_last_layer"] = True
            if name.endswith(".bias") or "norm" in name or "gamma" in name:
                d["wd_multiplier"] = 0.0
            if "patch_embed" in name:
                d["lr_multiplier"] *= 0.2
            groups.append(d)
        return groups

    def apply_optim_scheduler(optimizer, lr, wd, last_layer_lr):
        for param_group in optimizer.param_groups:
            param_group["weight_decay"] = wd * param_group["wd_multiplier"]
            param_group["lr"] = (last_layer_lr if param_group["is_last_layer"] else lr
                                 ) * param_group["lr_multiplier"]

    groups = [g for g in get_params_groups(student) if g["params"].requires_grad]
    opt = torch.optim.AdamW(groups, betas=(0.9, 0.999))
    res["group_lr_mult"] = [g["lr_multiplier"] for g in opt.param_groups]
    res["group_keys"] = sorted(opt.param_groups[0].keys())
    dino_loss, ibot_loss = DINOLoss(out_dim), iBOTPatchLoss(patch_out)
    iters = 4
    teacher_temp = np.concatenate((np.linspace(0.04, 0.07, 2), np.ones(iters - 2) * 0.07))
    momentum = 0.996 + 0.5 * (1 - 0.996) * (1 - np.cos(np.pi * np.arange(iters) / iters))
    images = normal(torch, rng, iters, 4, 3, 8, 8)
    mask_np = rng.uniform(size=(iters, 4, 4)) < 0.4
    mask_np[:, 0, 0] = True
    mask_np[:, 1] = False                       # a global crop without any masked patch
    res.update(dino=[], ibot=[], centers=[], n_masked=[], sinkhorn=[])
    for it in range(iters):
        apply_optim_scheduler(opt, lr=2e-3, wd=0.04, last_layer_lr=0.0 if it < 1 else 2e-3)
        global_crops = images[it]                       # 2 crops x batch 2
        local_crops = F.interpolate(images[it, :, :, 1:7, 1:7], size=(4, 4), mode="bilinear",
                                    align_corners=False, antialias=True)
        masks = torch.from_numpy(mask_np[it])
        n_global_crops, n_local_crops = 2, 2
        mask_indices_list = masks.flatten().nonzero().flatten()
        n_masked_patches = mask_indices_list.shape[0]
        masks_weight = (1 / masks.sum(-1).clamp(min=1.0)).unsqueeze(-1).expand_as(
            masks)[masks]
        with torch.no_grad():
            t_out = teacher["backbone"](global_crops)
            t_cls = t_out["x_norm_clstoken"].chunk(n_global_crops)
            t_cls = torch.cat((t_cls[1], t_cls[0]))
            t_patch = t_out["x_norm_patchtokens"]
            _dim = t_patch.shape[-1]
            buffer_tensor_teacher = t_patch.new_zeros(n_masked_patches + 3, _dim)
            torch.index_select(t_patch.flatten(0, 1), dim=0, index=mask_indices_list,
                               out=buffer_tensor_teacher[:n_masked_patches])
            t_cls_after = teacher["dino_head"](t_cls)
            t_patch_after = teacher["ibot_head"](buffer_tensor_teacher)[:n_masked_patches]
            temp = float(teacher_temp[it])
            if it == 0:
                t_dino = dino_loss.softmax_center_teacher(t_cls_after, temp).view(
                    n_global_crops, -1, out_dim)
                dino_loss.update_center(t_cls_after)
                t_ibot = ibot_loss.softmax_center_teacher(t_patch_after, temp)
                ibot_loss.update_center(t_patch_after)
            else:
                t_dino = dino_loss.sinkhorn_knopp_teacher(t_cls_after, temp).view(
                    n_global_crops, -1, out_dim)
                t_ibot = ibot_loss.sinkhorn_knopp_teacher(t_patch_after, temp)
                res["sinkhorn"].append(t_ibot.sum(0))
        s_glob = student["backbone"](global_crops, masks=masks)
        s_loc = student["backbone"](local_crops)
        s_patch = s_glob["x_norm_patchtokens"]
        buffer_tensor_patch_tokens = s_patch.new_zeros(n_masked_patches, _dim)
        buffer_tensor_patch_tokens[:n_masked_patches].copy_(
            torch.index_select(s_patch.flatten(0, 1), dim=0, index=mask_indices_list))
        s_patch_after = student["ibot_head"](buffer_tensor_patch_tokens)[:n_masked_patches]
        s_glob_cls = student["dino_head"](s_glob["x_norm_clstoken"])
        s_loc_cls = student["dino_head"](s_loc["x_norm_clstoken"])
        local_loss = dino_loss(list(s_loc_cls.chunk(n_local_crops)), list(t_dino))
        global_loss = dino_loss([s_glob_cls.flatten(0, 1)[None].view(-1, out_dim)],
                                [t_dino.flatten(0, 1)]) * 2
        ib = ibot_loss.forward_masked(s_patch_after, t_ibot, student_masks_flat=masks,
                                      n_masked_patches=n_masked_patches,
                                      masks_weight=masks_weight)
        loss = (local_loss + global_loss) / (n_global_crops * n_local_crops + n_global_crops) + ib
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if it < 1:
            for k, v in student.named_parameters():
                if "last_layer" in k:
                    v.grad = None
        for v in student.values():
            nn.utils.clip_grad_norm_(v.parameters(), 3.0)
        opt.step()
        with torch.no_grad():
            s_params, t_params = [], []
            for k in student.keys():
                s_params += [p for p in student[k].parameters()]
                t_params += [p for p in teacher[k].parameters()]
            m = float(momentum[it])
            torch._foreach_mul_(t_params, m)
            torch._foreach_add_(t_params, s_params, alpha=1 - m)
        res["dino"].append([local_loss.item(), global_loss.item()])
        res["ibot"].append(ib.item())
        res["centers"].append(dino_loss.center.clone())
        res["n_masked"].append(n_masked_patches)
    # a bfloat16 teacher updated the same way (as FSDP mixed precision keeps it): the in-place
    # _foreach_mul_ rounds its momentum to bfloat16
    # (values from NumPy: the trained ones differ by float32 rounding, a bfloat16 ulp apart;
    # whole SIMD widths: PyTorch's scalar tail loop rounds add(alpha=) differently)
    with torch.no_grad():
        t16 = [normal(torch, rng, 4, 16).to(torch.bfloat16) for _ in range(3)]
        s16 = [normal(torch, rng, 4, 16).to(torch.bfloat16) for _ in range(3)]
        torch._foreach_mul_(t16, 0.99)
        torch._foreach_add_(t16, s16, alpha=0.01)
        torch._foreach_mul_(t16[:2], [0.993, 0.9971])
    res["bf16_teacher"] = t16
    res["buffer_tail"] = buffer_tensor_teacher[n_masked_patches:]
    res["student"] = [p.detach().clone() for p in student.parameters()]
    res["teacher"] = [p.clone() for p in teacher.parameters()]
    ll = student["dino_head"].last_layer
    res["g_frozen"] = [ll.parametrizations.weight.original0.grad is None,
                       ll.parametrizations.weight.original1.grad is not None,
                       ll.parametrizations.weight.original0.requires_grad]
    res["last_layer_norms"] = ll.weight.norm(dim=1)
    res["state_keys"] = sorted(student.state_dict())[:6]
    res["adam_steps"] = [float(opt.state[p]["step"]) for g in opt.param_groups
                         for p in g["params"] if p in opt.state]
    return res



def _clip_model(torch, vocab=12, ctx=5, width=8, embed_dim=6):
    """open_clip's CLIP, shrunk: a conv image tower with ModifiedResNet's attention pooling
    (F.multi_head_attention_forward on separate projections) and a causal text
    transformer (nn.MultiheadAttention blocks with a float -inf mask) pooled at the EOT token."""
    nn, F = torch.nn, torch.nn.functional

    class ResidualAttentionBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(width)
            self.attn = nn.MultiheadAttention(width, 2, batch_first=True)
            self.ln_2 = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(approximate="tanh"),
                                     nn.Linear(2 * width, width))

        def forward(self, x, attn_mask=None):
            y = self.ln_1(x)
            x = x + self.attn(y, y, y, need_weights=False, attn_mask=attn_mask)[0]
            return x + self.mlp(self.ln_2(x))

    class AttentionPool2d(nn.Module):
        def __init__(self, spacial_dim, embed_dim, num_heads, output_dim=None):
            super().__init__()
            self.positional_embedding = nn.Parameter(
                torch.randn(spacial_dim ** 2 + 1, embed_dim) / embed_dim ** 0.5)
            self.k_proj = nn.Linear(embed_dim, embed_dim)
            self.q_proj = nn.Linear(embed_dim, embed_dim)
            self.v_proj = nn.Linear(embed_dim, embed_dim)
            self.c_proj = nn.Linear(embed_dim, output_dim or embed_dim)
            self.num_heads = num_heads

        def forward(self, x):
            x = x.flatten(start_dim=2).permute(2, 0, 1)                   # NCHW -> (HW)NC
            x = torch.cat([x.mean(dim=0, keepdim=True), x], dim=0)
            x = x + self.positional_embedding[:, None, :].to(x.dtype)
            x, weights = F.multi_head_attention_forward(
                query=x[:1], key=x, value=x, embed_dim_to_check=x.shape[-1],
                num_heads=self.num_heads, q_proj_weight=self.q_proj.weight,
                k_proj_weight=self.k_proj.weight, v_proj_weight=self.v_proj.weight,
                in_proj_weight=None,
                in_proj_bias=torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
                bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0.0,
                out_proj_weight=self.c_proj.weight, out_proj_bias=self.c_proj.bias,
                use_separate_proj_weight=True, training=self.training, need_weights=True)
            return x.squeeze(0), weights

    class CLIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual_conv = nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False)
            self.visual_pool = AttentionPool2d(3, width, 2)
            self.visual_proj = nn.Parameter(torch.empty(width, embed_dim))
            self.token_embedding = nn.Embedding(vocab, width)
            self.positional_embedding = nn.Parameter(torch.empty(ctx, width))
            self.blocks = nn.ModuleList([ResidualAttentionBlock() for _ in range(2)])
            self.ln_final = nn.LayerNorm(width)
            self.text_projection = nn.Parameter(torch.empty(width, embed_dim))
            self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))
            self.register_buffer("attn_mask", self.build_attention_mask(), persistent=False)

        def build_attention_mask(self):
            mask = torch.empty(ctx, ctx)
            mask.fill_(float("-inf"))
            mask.triu_(1)
            return mask

        def encode_image(self, image, normalize=False):
            x, self.last_pool_weights = self.visual_pool(F.relu(self.visual_conv(image)))
            x = x @ self.visual_proj
            return F.normalize(x, dim=-1) if normalize else x

        def encode_text(self, text, normalize=False):
            cast_dtype = self.positional_embedding.dtype
            x = self.token_embedding(text).to(cast_dtype)
            x = x + self.positional_embedding.to(cast_dtype)
            for blk in self.blocks:
                x = blk(x, attn_mask=self.attn_mask)
            x = self.ln_final(x)
            x = x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection
            return F.normalize(x, dim=-1) if normalize else x

        def forward(self, image, text):
            return (self.encode_image(image, normalize=True),
                    self.encode_text(text, normalize=True), self.logit_scale.exp())
    return CLIP


def _tokens(torch, rng, n, vocab=12, ctx=5):
    """Token ids with an EOT token (the largest id) at a NumPy-chosen position, zero padding."""
    ids = rng.integers(1, vocab - 1, (n, ctx))
    ends = rng.integers(2, ctx, n)
    for i, e in enumerate(ends):
        ids[i, e] = vocab - 1
        ids[i, e + 1:] = 0
    return torch.from_numpy(ids.astype(np.int64))


def clip_program(torch):
    """open_clip training: ClipLoss over an emulated two-rank all-gather (gathered features
    detached except the local shard, grads averaged like DDP), label caching, logit_scale
    clamped to [0, ln 100] under no_grad after each step, then SigLIP's sigmoid loss with a
    learnable bias and a zero-shot classifier with top-k accuracy."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2902)
    CLIP = _clip_model(torch)
    res = {}

    class ClipLoss(nn.Module):
        def __init__(self, local_loss=False, cache_labels=True, rank=0, world_size=1):
            super().__init__()
            self.local_loss, self.cache_labels = local_loss, cache_labels
            self.rank, self.world_size = rank, world_size
            self.prev_num_logits = 0
            self.labels = {}

        def get_ground_truth(self, device, num_logits):
            if self.prev_num_logits != num_logits or device not in self.labels:
                labels = torch.arange(num_logits, device=device, dtype=torch.long)
                if self.world_size > 1 and self.local_loss:
                    labels = labels + num_logits * self.rank
                if self.cache_labels:
                    self.labels[device] = labels
                    self.prev_num_logits = num_logits
            else:
                labels = self.labels[device]
            return labels

        def forward(self, image_features, text_features, logit_scale, gathered):
            all_image, all_text = gathered
            if self.local_loss:
                logits_per_image = logit_scale * image_features @ all_text.T
                logits_per_text = logit_scale * text_features @ all_image.T
            else:
                logits_per_image = logit_scale * all_image @ all_text.T
                logits_per_text = logits_per_image.T
            labels = self.get_ground_truth(image_features.device, logits_per_image.shape[0])
            return (F.cross_entropy(logits_per_image, labels)
                    + F.cross_entropy(logits_per_text, labels)) / 2

    def gather_features(feats_by_rank, rank):
        # dist.all_gather returns copies without grad; open_clip puts the local shard back
        gathered = [torch.zeros_like(f) for f in feats_by_rank]
        for r, f in enumerate(feats_by_rank):
            gathered[r].copy_(f.detach())
        gathered[rank] = feats_by_rank[rank]
        return torch.cat(gathered, dim=0)

    model = CLIP()
    fill_(torch, model, rng, 0.3)
    with torch.no_grad():
        model.logit_scale.fill_(math.log(130.0))        # resumed above the bound
    res["buffers"] = [n for n, _ in model.named_buffers()]
    res["state_keys"] = sorted(model.state_dict())[:5]
    decay = [p for n, p in model.named_parameters()
             if p.ndim >= 2 and "embedding" not in n and "logit_scale" not in n]
    no_decay = [p for n, p in model.named_parameters()
                if not (p.ndim >= 2 and "embedding" not in n and "logit_scale" not in n)]
    opt = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0},
                             {"params": decay, "weight_decay": 0.2}],
                            lr=0.05, betas=(0.9, 0.98), eps=1e-6)
    world = 2
    losses = [ClipLoss(local_loss=local, rank=r, world_size=world)
              for local in (False, True) for r in range(world)]
    res.update(loss=[], scale=[], nonlocal_grads=[])
    for step in range(4):
        images = normal(torch, rng, world, 3, 3, 6, 6)
        texts = _tokens(torch, rng, world * 3).view(world, 3, -1)
        local = step % 2 == 1
        opt.zero_grad()
        feats = [model(images[r], texts[r]) for r in range(world)]
        step_losses = []
        for r in range(world):
            img, txt, scale = feats[r]
            crit = losses[2 * int(local) + r]
            loss = crit(img, txt, scale,
                        (gather_features([f[0] for f in feats], r),
                         gather_features([f[1] for f in feats], r)))
            loss.backward(retain_graph=r < world - 1)
            step_losses.append(loss.item())
        for p in model.parameters():
            if p.grad is not None:
                p.grad.div_(world)
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        res["loss"].append(step_losses)
        res["scale"].append(model.logit_scale.item())
    res["labels_cached"] = [len(c.labels) for c in losses]
    res["labels"] = [c.labels["cpu"] if "cpu" in c.labels else
                     c.labels[torch.device("cpu")] for c in losses]
    res["pool_weights"] = model.last_pool_weights
    # a key bias only shifts each softmax row: its gradient is rounding noise, which AdamW
    # turns into steps of either sign, so only the query and value parts are compared
    res["params"] = [p.detach().clone() for n, p in model.named_parameters()
                     if n != "visual_pool.k_proj.bias" and "in_proj_bias" not in n]
    res["qv_biases"] = [torch.cat((p[:8], p[16:])).detach() for n, p in model.named_parameters()
                        if "in_proj_bias" in n]

    # SigLIP: sigmoid loss on every pair with learnable temperature and bias
    logit_bias = nn.Parameter(torch.ones([]) * -10)
    with torch.no_grad():
        model.logit_scale.fill_(math.log(10))
    sig_opt = torch.optim.SGD(list(model.parameters()) + [logit_bias], lr=0.05)
    res["sig"] = []
    for step in range(2):
        images = normal(torch, rng, 4, 3, 6, 6)
        texts = _tokens(torch, rng, 4)
        img, txt, scale = model(images, texts)
        logits = scale * img @ txt.T + logit_bias
        n = logits.shape[0]
        labels = 2 * torch.eye(n, device=img.device, dtype=img.dtype) - torch.ones(
            (n, n), device=img.device, dtype=img.dtype)
        loss = -F.logsigmoid(labels * logits).sum() / img.shape[0]
        sig_opt.zero_grad()
        loss.backward()
        sig_opt.step()
        res["sig"].append([loss.item(), logit_bias.item(), model.logit_scale.item()])

    # zero-shot: class embeddings averaged over templates, top-k accuracy
    with torch.no_grad():
        weights = []
        for c in range(4):
            texts = _tokens(torch, rng, 3)
            class_embeddings = model.encode_text(texts, normalize=True)
            class_embedding = class_embeddings.mean(dim=0)
            class_embedding /= class_embedding.norm()
            weights.append(class_embedding)
        classifier = torch.stack(weights, dim=1)
        images = normal(torch, rng, 6, 3, 6, 6)
        target = torch.from_numpy(rng.integers(0, 4, 6))
        logits = 100.0 * model.encode_image(images, normalize=True) @ classifier
        pred = logits.topk(3, 1, True, True)[1].t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res["topk"] = [float(correct[:k].reshape(-1).float().sum(0, keepdim=True).cpu().numpy()[0])
                       for k in (1, 3)]
        res["zero_shot_logits"] = logits
    return res


def vicreg_barlow_program(torch):
    """VICReg over an emulated two-rank FullGatherLayer (an autograd.Function returning a tuple,
    whose backward all-reduces by scaling its stacked grads), and lightly's BarlowTwinsLoss
    (normalised by hand, the off-diagonal scaled in place through a bool mask)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2903)
    res = {}
    world = 2
    shards = {}

    class FullGatherLayer(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, rank):
            ctx.rank = rank
            output = [torch.zeros_like(x) for _ in range(world)]
            for r in range(world):
                output[r].copy_(x if r == rank else shards[r])
            return tuple(output)

        @staticmethod
        def backward(ctx, *grads):
            all_gradients = torch.stack(grads)
            all_gradients.mul_(world)          # all_reduce of identical per-rank losses
            return all_gradients[ctx.rank], None

    def off_diagonal(x):
        n, m = x.shape
        assert n == m
        return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()

    class VICReg(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(6, 10), nn.ReLU())
            self.projector = nn.Sequential(nn.Linear(10, 8), nn.BatchNorm1d(8), nn.ReLU(True),
                                           nn.Linear(8, 8, bias=False))

        def forward(self, x, y, rank, batch_size):
            x = self.projector(self.backbone(x))
            y = self.projector(self.backbone(y))
            repr_loss = F.mse_loss(x, y)
            x = torch.cat(FullGatherLayer.apply(x, rank), dim=0)
            y = torch.cat(FullGatherLayer.apply(y, rank), dim=0)
            x = x - x.mean(dim=0)
            y = y - y.mean(dim=0)
            std_x = torch.sqrt(x.var(dim=0) + 0.0001)
            std_y = torch.sqrt(y.var(dim=0) + 0.0001)
            std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2
            cov_x = (x.T @ x) / (batch_size - 1)
            cov_y = (y.T @ y) / (batch_size - 1)
            cov_loss = off_diagonal(cov_x).pow_(2).sum().div(8) + off_diagonal(
                cov_y).pow_(2).sum().div(8)
            return 25.0 * repr_loss + 25.0 * std_loss + cov_loss, [
                repr_loss.item(), std_loss.item(), cov_loss.item()]

    model = VICReg()
    fill_(torch, model, rng, 0.4)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True)
    res.update(vic=[], grad_fns=[])
    for step in range(3):
        xs, ys = normal(torch, rng, world, 4, 6), normal(torch, rng, world, 4, 6)
        opt.zero_grad()
        # every rank runs its forward once to fill the exchange, then the real step
        with torch.no_grad():
            model.eval()
            for r in range(world):
                shards[r] = model.projector(model.backbone(xs[r]))
            model.train()
        terms = []
        for r in range(world):
            loss, parts = model(xs[r], ys[r] * 0.5 + xs[r], r, 4 * world)
            loss.backward()
            terms.append([loss.item()] + parts)
        for p in model.parameters():
            p.grad.div_(world)
        opt.step()
        res["vic"].append(terms)
    outs = FullGatherLayer.apply(normal(torch, rng, 4, 8).requires_grad_(), 0)
    res["gather_out"] = [type(outs).__name__, len(outs),
                         type(outs[0].grad_fn).__name__ == type(outs[1].grad_fn).__name__]
    res["vic_params"] = [p.detach().clone() for p in model.parameters()]
    res["bn_stats"] = [model.projector[1].running_mean, model.projector[1].running_var]

    class BarlowTwinsLoss(nn.Module):
        def __init__(self, lambda_param=5e-3):
            super().__init__()
            self.lambda_param = lambda_param

        def forward(self, z_a, z_b):
            N, D = z_a.size(0), z_a.size(1)
            z_a_norm = (z_a - z_a.mean(0)) / z_a.std(0)
            z_b_norm = (z_b - z_b.mean(0)) / z_b.std(0)
            c = torch.mm(z_a_norm.T, z_b_norm) / N
            c_diff = (c - torch.eye(D, device=z_a.device)).pow(2)
            c_diff[~torch.eye(D, dtype=bool)] *= self.lambda_param
            return c_diff.sum()

    # no biases where a normalisation cancels them (their gradients are rounding noise,
    # which Adam would blow up into full-size steps)
    head = nn.Sequential(nn.Linear(6, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(),
                         nn.Linear(8, 8, bias=False))
    fill_(torch, head, rng, 0.4)
    crit = BarlowTwinsLoss()
    # SGD: the BatchNorm shift of a channel ReLU never cuts has a zero gradient up to rounding
    opt = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9)
    res["bt"] = []
    for step in range(3):
        x = normal(torch, rng, 6, 6)
        loss = crit(head(x), head(x.flip(0).roll(1, 1) * 0.8 + 0.2 * x))
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["bt"].append(loss.item())
    res["bt_grad_fn"] = [type(loss.grad_fn).__name__]
    res["bt_params"] = [p.detach().clone() for p in head.parameters()]
    return res

PROGRAMS = [dinov2_ibot_program, clip_program, vicreg_barlow_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # AdamW (eps 1e-6) on the pooling's key projection, whose gradient is a softmax-weighted
        # sum that cancels to ~1e-5 of its terms: float32 rounding of 1e-3 relative there
        "clip_program": (1e-4, 1e-5),
    })
