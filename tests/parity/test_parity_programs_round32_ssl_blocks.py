"""Speech self-supervision blocks as fairseq / torchaudio write them, run with `torch` bound to
ember and to PyTorch from the same NumPy weights: wav2vec 2.0's convolutional relative
positional embedding (weight_norm over dim=2, SamePad), GradMultiply as a custom
autograd.Function, Fp32GroupNorm, fairseq's compute_logits (cosine over stacked negatives,
masked -inf in a view), F.gumbel_softmax under manual_seed, data2vec targets via
layer_norm/instance_norm in float64, CTC losses with reduction 'none' and float64 log-probs,
and torchaudio-style SpecAugment (iid masks along an axis from given values, linear time warp
through grid interpolation)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _grad_multiply(torch):
    class GradMultiply(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.scale = scale
            res = x.new(x)
            return res

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.scale, None
    return GradMultiply


def pos_conv_program(torch):
    """wav2vec 2.0 feature encoder + positional conv: Fp32GroupNorm, GradMultiply(0.1),
    weight_norm(conv, dim=2), SamePad, layer norm, and a masked-frame cosine loss."""
    rng = np.random.default_rng(330)
    nn, F = torch.nn, torch.nn.functional
    GM = _grad_multiply(torch)

    class Fp32GroupNorm(nn.GroupNorm):
        def forward(self, input):
            output = F.group_norm(input.float(), self.num_groups,
                                  self.weight.float() if self.weight is not None else None,
                                  self.bias.float() if self.bias is not None else None,
                                  self.eps)
            return output.type_as(input)

    class SamePad(nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            self.remove = 1 if kernel_size % 2 == 0 else 0

        def forward(self, x):
            if self.remove > 0:
                x = x[:, :, : -self.remove]
            return x

    C, K, G = 8, 4, 2
    fe = nn.Sequential(nn.Conv1d(1, C, 6, stride=3, bias=False), nn.Dropout(0.0),
                       Fp32GroupNorm(C, C, affine=True), nn.GELU())
    conv = nn.Conv1d(C, C, kernel_size=K, padding=K // 2, groups=G)
    std = (4 * (1.0 - 0.0) / (K * C)) ** 0.5
    nn.init.constant_(conv.bias, 0)
    fill_(torch, nn.ModuleList([fe, conv]), rng, std)
    conv = nn.utils.weight_norm(conv, name="weight", dim=2)
    pos = nn.Sequential(conv, SamePad(K), nn.GELU())
    ln = nn.LayerNorm(C)
    wav = normal(torch, rng, 2, 1, 50)
    params = list(fe.parameters()) + list(pos.parameters()) + list(ln.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    res = {"g_shape": tuple(conv.weight_g.shape), "names": sorted(n for n, _ in
                                                                  pos.named_parameters())}
    for step in range(3):
        feats = fe(wav)
        feats = GM.apply(feats, 0.1)
        x = feats.transpose(1, 2)
        x_conv = pos(x.transpose(1, 2)).transpose(1, 2)
        x = ln(x + x_conv)
        mask = torch.zeros(x.shape[:2], dtype=torch.bool)
        mask[:, 3:7] = True
        loss = (1 - F.cosine_similarity(x[mask], feats.transpose(1, 2)[mask].detach(), dim=-1,
                                        eps=1e-8)).sum()
        opt.zero_grad()
        loss.backward()
        res[f"loss{step}"] = loss.detach()
        res[f"g_fe{step}"] = fe[0].weight.grad.clone()
        res[f"g_v{step}"] = conv.weight_v.grad.clone()
        res[f"g_g{step}"] = conv.weight_g.grad.clone()
        opt.step()
    res["weight"] = conv.weight.detach()
    nn.utils.remove_weight_norm(conv)
    res["after_remove"] = sorted(n for n, _ in conv.named_parameters())
    return res


def compute_logits_program(torch):
    """fairseq's Wav2Vec2Model.compute_preds: negatives stacked in front, cosine over the last
    dim in float32, type_as, /logit_temp, logits[1:][neg_is_pos] = -inf, transpose, and
    F.cross_entropy with the positive at 0; HuBERT's padding `x[padding_mask] = 0`."""
    rng = np.random.default_rng(331)
    F = torch.nn.functional
    B, T, D, N = 2, 6, 5, 4
    x = normal(torch, rng, B, T, D).requires_grad_()
    y = normal(torch, rng, B, T, D).requires_grad_()
    neg_idxs = torch.from_numpy(rng.integers(0, B * T, size=(B, T * N)).astype(np.int64))
    neg_idxs[0, 0] = 0  # a negative equal to the positive
    y_flat = y.view(-1, D)
    negs = y_flat[neg_idxs.view(-1)].view(B, T, N, D).permute(2, 0, 1, 3)
    neg_is_pos = (y == negs).all(-1)
    targets = torch.cat([y.unsqueeze(0), negs], dim=0)
    logits = torch.cosine_similarity(x.float(), targets.float(), dim=-1).type_as(x)
    logits = logits / 0.1
    if neg_is_pos.any():
        logits[1:][neg_is_pos] = float("-inf")
    logits = logits.transpose(0, 2)
    logits = logits.reshape(-1, logits.size(-1))
    tgt = logits.new_zeros(logits.size(0), dtype=torch.long)
    loss = F.cross_entropy(logits, tgt, reduction="sum")
    loss.backward()
    res = {"logits": logits.detach(), "loss": loss.detach(), "gx": x.grad, "gy": y.grad,
           "n_neg_pos": int(neg_is_pos.sum())}
    feats = normal(torch, rng, B, T, D)
    padding_mask = torch.arange(T).expand(B, T) >= torch.tensor([[T], [T - 2]])
    feats[padding_mask] = 0
    res["padded"] = feats
    res["keep"] = (~padding_mask).long().sum(-1)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        g1 = F.gumbel_softmax(logits.detach()[:4].clamp(min=-30), tau=0.5, hard=True)
        torch.manual_seed(0)
        g2 = F.gumbel_softmax(logits.detach()[:4].clamp(min=-30), tau=0.5, hard=True)
    res["gumbel_same"] = bool(torch.equal(g1, g2))
    res["gumbel_onehot"] = g1.sum(-1)
    return res


def data2vec_targets_program(torch):
    """data2vec target variants: layer_norm per layer (float64 in, float32 out), instance_norm
    over time then F.layer_norm of the average, batch-norm'd targets without affine
    (F.batch_norm with running stats None), and the regression loss on a masked subset."""
    rng = np.random.default_rng(332)
    F = torch.nn.functional
    B, T, D = 2, 7, 6
    layers = [normal(torch, rng, B, T, D) * (i + 1) for i in range(4)]
    res = {}
    ln_t = [F.layer_norm(t.double(), t.shape[-1:]).float() for t in layers[-3:]]
    res["ln_avg"] = sum(ln_t) / 3
    in_t = [F.instance_norm(t.permute(0, 2, 1)).transpose(1, 2) for t in layers[-3:]]
    avg = sum(in_t) / len(in_t)
    res["in_avg"] = avg
    res["in_final_ln"] = F.layer_norm(avg, avg.shape[-1:])
    bn_t = [F.batch_norm(t.permute(0, 2, 1), running_mean=None, running_var=None,
                         training=True).transpose(1, 2) for t in layers[-2:]]
    res["bn_avg"] = sum(bn_t) / 2
    pred = normal(torch, rng, B, T, D).requires_grad_()
    mask = torch.from_numpy(rng.random((B, T)) < 0.6)
    y = res["in_final_ln"][mask]
    loss = F.mse_loss(pred[mask], y, reduction="none").sum(-1)
    loss = loss.sum() / (loss.numel() ** 0.5)
    loss.backward()
    res["loss"], res["gpred"] = loss.detach(), pred.grad
    res["var"] = torch.sqrt(y.view(-1, y.size(-1)).var(dim=0) + 1e-6).mean()
    return res


def specaug_ctc_program(torch):
    """torchaudio-style SpecAugment from given values (mask_along_axis_iid form: value *
    size, min_value = value * (size - width), masked_fill with a broadcast range mask), linear
    time warp through grid_sample, then F.ctc_loss per utterance (reduction 'none') on float64
    log-probs, its gradient, and a greedy decode with topk."""
    rng = np.random.default_rng(333)
    F = torch.nn.functional
    B, Fq, T, V = 2, 6, 16, 4
    spec = normal(torch, rng, B, Fq, T).exp()
    # mask_along_axis_iid along time
    value = torch.from_numpy(rng.random((B,)).astype(np.float32)) * 5
    min_value = torch.from_numpy(rng.random((B,)).astype(np.float32)) * (T - value)
    mask_start = min_value.long()[..., None, None]
    mask_end = (min_value.long() + value.long())[..., None, None]
    mask = torch.arange(0, T)
    spec_m = spec.masked_fill((mask >= mask_start) & (mask < mask_end), 0.0)
    # linear time warp via grid_sample: source position = warp(destination)
    c, w = 7.0, 2.0
    dst = torch.arange(T, dtype=torch.float32)
    src = torch.where(dst < c + w, dst * c / (c + w),
                      c + (dst - c - w) * (T - 1 - c) / (T - 1 - c - w))
    gx = src / (T - 1) * 2 - 1
    gy = torch.linspace(-1, 1, Fq)
    grid = torch.stack(torch.meshgrid(gx, gy, indexing="xy"), -1).unsqueeze(0).expand(B, -1,
                                                                                    -1, -1)
    warped = F.grid_sample(spec_m.unsqueeze(1), grid, mode="bilinear", align_corners=True)
    warped = warped.squeeze(1)
    logits = (warped.transpose(1, 2) @ normal(torch, rng, Fq, V)).double().requires_grad_()
    lp = logits.log_softmax(-1).transpose(0, 1)
    targets = torch.tensor([1, 2, 3, 3, 1], dtype=torch.int32)
    il = torch.tensor([T, T - 4], dtype=torch.int32)
    tl = torch.tensor([3, 2], dtype=torch.int32)
    loss = F.ctc_loss(lp, targets, il, tl, blank=0, reduction="none")
    loss.sum().backward()
    # masked frames tie: which index topk returns for a tie is unspecified; argmax takes the
    # first maximum
    top = lp.detach().topk(2, dim=-1)
    return {"best": lp.argmax(-1), "spec_m": spec_m, "warped": warped, "loss": loss.detach(),
            "is_f64": loss.dtype == torch.float64, "glogits": logits.grad, "top_v": top.values}


PROGRAMS = [pos_conv_program, compute_logits_program, data2vec_targets_program,
            specaug_ctc_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
