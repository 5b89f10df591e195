"""LLM compression on PyTorch's quantization kernels, written as the reference repositories
write it, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights:
LSQ+ through torch._fake_quantize_learnable_* (as torch.ao's _LearnableFakeQuantize), gpt-fast's
int8 weight-only linears (dequantising and through torch._weight_int8pack_mm) and int4 group
quantisation, and torchao-style float8 training and inference through torch._scaled_mm.
Sibling of test_parity_programs_round31_quant.py; _fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _dt(t):
    """A tensor's dtype as PyTorch names it without the module: 'int8'."""
    return str(t.dtype).split(".")[-1]


def lsq_program(torch):
    """LSQ+ as torch.ao's _LearnableFakeQuantize runs it: learnable per-channel weight scales and
    zero points, a learnable per-tensor activation scale, grad_factor 1 / sqrt(numel * qmax),
    scales initialised from the absmax and trained a few Adam steps with the weights."""
    rng = np.random.default_rng(7)
    model = torch.nn.Sequential(torch.nn.Linear(10, 12), torch.nn.GELU(), torch.nn.Linear(12, 4))
    fill_(torch, model, rng)
    x, y = normal(torch, rng, 16, 10) * 1.5, normal(torch, rng, 16, 4)

    class LearnableFQ(torch.nn.Module):
        def __init__(self, channels, qmin, qmax, axis):
            super().__init__()
            self.qmin, self.qmax, self.axis = qmin, qmax, axis
            self.scale = torch.nn.Parameter(torch.full((channels,), 0.1))
            self.zero_point = torch.nn.Parameter(torch.zeros(channels))
            self.register_buffer("initialised", torch.tensor([0], dtype=torch.uint8))

        def forward(self, t):
            if self.initialised[0] == 0:
                with torch.no_grad():
                    dims = [d for d in range(t.dim()) if d != self.axis]
                    amax = t.abs().amax(dim=dims) if self.axis is not None else t.abs().max()
                    self.scale.copy_(2 * amax / (self.qmax - self.qmin) + 1e-6)
                    self.zero_point.fill_(0.3)
                    self.initialised.fill_(1)
            # keep the scale positive, as the observer's eps clamp does
            self.scale.data.clamp_(min=1e-6)
            grad_factor = 1.0 / math.sqrt(t.numel() * self.qmax)
            if self.axis is None:
                return torch._fake_quantize_learnable_per_tensor_affine(
                    t, self.scale, self.zero_point, self.qmin, self.qmax, grad_factor)
            return torch._fake_quantize_learnable_per_channel_affine(
                t, self.scale, self.zero_point, self.axis, self.qmin, self.qmax, grad_factor)

    wq = [LearnableFQ(12, -8, 7, 0), LearnableFQ(4, -8, 7, 0)]
    aq = LearnableFQ(1, 0, 15, None)
    params = list(model.parameters()) + [p for q in wq + [aq] for p in q.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    res = {"losses": [], "nodes": []}
    for _ in range(3):
        h = torch.nn.functional.linear(x, wq[0](model[0].weight), model[0].bias)
        h = aq(torch.nn.functional.gelu(h))
        out = torch.nn.functional.linear(h, wq[1](model[2].weight), model[2].bias)
        loss = torch.nn.functional.mse_loss(out, y)
        res["nodes"].append(h.grad_fn.name())
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["scale0"], res["zp0"] = wq[0].scale, wq[0].zero_point
    res["scale1_grad"], res["zp1_grad"] = wq[1].scale.grad, wq[1].zero_point.grad
    res["ascale"], res["azp"], res["w0"] = aq.scale, aq.zero_point, model[0].weight
    res["w0_grad"] = model[0].weight.grad
    return res


def gpt_fast_program(torch):
    """gpt-fast's quantize.py: int8 weight-only linears (per-channel symmetric via aminmax,
    the dequantising F.linear and the fused _weight_int8pack_mm on bfloat16 activations),
    and int4 group-wise asymmetric quantisation with bfloat16 scales and zeros."""
    rng = np.random.default_rng(8)
    res = {}

    def dynamically_quantize_per_channel(x, quant_min, quant_max, target_dtype):
        eps = torch.finfo(torch.float32).eps
        min_val, max_val = torch.aminmax(x, dim=1)
        min_val_neg = torch.min(min_val, torch.zeros_like(min_val))
        max_val_pos = torch.max(max_val, torch.zeros_like(max_val))
        max_val_pos = torch.max(-min_val_neg, max_val_pos)
        scales = max_val_pos / (float(quant_max - quant_min) / 2)
        scales = torch.clamp(scales, min=eps).to(x.dtype)
        zero_points = torch.zeros(min_val_neg.size(), dtype=torch.int64, device=x.device)
        x_round = torch.round(x / scales.unsqueeze(-1))
        quant = torch.clamp(x_round + zero_points.unsqueeze(-1), quant_min, quant_max)
        return quant.to(target_dtype), scales, zero_points

    class WeightOnlyInt8Linear(torch.nn.Module):
        def __init__(self, weight, fused):
            super().__init__()
            q, scales, _ = dynamically_quantize_per_channel(weight.float(), -128, 127, torch.int8)
            self.register_buffer("weight", q)
            self.register_buffer("scales", scales.to(torch.bfloat16))
            self.fused = fused

        def forward(self, input):
            if self.fused:
                return torch._weight_int8pack_mm(input, self.weight,
                                                 self.scales.to(input.dtype))
            return torch.nn.functional.linear(input, self.weight.to(dtype=input.dtype)) \
                * self.scales

    w1, w2 = normal(torch, rng, 32, 16) * 0.2, normal(torch, rng, 16, 32) * 0.2
    x = normal(torch, rng, 4, 16)
    for fused in (False, True):
        for dtype in ("float32", "bfloat16"):
            dt = getattr(torch, dtype)
            l1, l2 = WeightOnlyInt8Linear(w1, fused), WeightOnlyInt8Linear(w2, fused)
            with torch.no_grad():
                out = l2(torch.nn.functional.silu(l1(x.to(dt))).to(dt))
            key = f"int8_{'fused' if fused else 'linear'}_{dtype}"
            res[key] = out
            res[key + "_meta"] = [_dt(out), _dt(l1.weight), _dt(l1.scales)]
    res["int8_w"], res["int8_scales"] = l1.weight, l1.scales

    def get_group_qparams(w, n_bit=4, groupsize=16):
        to_quant = w.reshape(-1, groupsize)
        max_val = to_quant.amax(dim=1, keepdim=True)
        min_val = to_quant.amin(dim=1, keepdim=True)
        max_int = 2 ** n_bit - 1
        scales = (max_val - min_val).clamp(min=1e-6) / max_int
        zeros = min_val + scales * (2 ** (n_bit - 1))
        return (scales.to(torch.bfloat16).reshape(w.shape[0], -1),
                zeros.to(torch.bfloat16).reshape(w.shape[0], -1))

    def group_quantize(w, scales, zeros, n_bit=4, groupsize=16):
        to_quant = w.reshape(-1, groupsize)
        scales, zeros = scales.reshape(-1, 1), zeros.reshape(-1, 1)
        min_val = zeros - scales * (2 ** (n_bit - 1))
        return (to_quant.sub(min_val).div(scales).round().clamp_(0, 2 ** n_bit - 1)
                .to(torch.int32).reshape_as(w))

    def group_dequantize(w_int32, scales, zeros, n_bit=4, groupsize=16):
        grouped = w_int32.reshape(-1, groupsize)
        scales, zeros = scales.reshape(-1, 1), zeros.reshape(-1, 1)
        return grouped.sub(2 ** (n_bit - 1)).mul(scales).add(zeros).reshape_as(w_int32)

    scales, zeros = get_group_qparams(w1)
    w_int32 = group_quantize(w1, scales, zeros)
    w_dq = group_dequantize(w_int32, scales, zeros)
    # pack pairs of int4 values into uint8 as the int4 kernels' reference packer does
    packed = (w_int32[:, ::2] << 4 | w_int32[:, 1::2]).to(torch.uint8)
    res.update(int4_q=w_int32, int4_dq=w_dq, int4_scales=scales, int4_zeros=zeros,
               int4_packed=packed,
               int4_meta=[_dt(w_int32), _dt(w_dq), _dt(scales), _dt(packed)],
               int4_err=[(w_dq.float() - w1).abs().max().item()])
    return res


def float8_program(torch):
    """torchao-style float8 training by hand: amax-to-scale in float64, saturated casts to
    e4m3 (activations, weights) and e5m2 (gradients), torch._scaled_mm forward and backward
    in a custom autograd.Function with reciprocal scales, delayed scaling from a rolled amax
    history, and row-wise scales for inference."""
    rng = np.random.default_rng(9)
    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2

    def amax_to_scale(amax, float8_dtype):
        amax = amax.to(torch.float64)
        scale = torch.finfo(float8_dtype).max / torch.clamp(amax, min=1e-12)
        return scale.to(torch.float32)

    def to_fp8_saturated(x, float8_dtype):
        max_value = torch.finfo(float8_dtype).max
        return x.clamp(min=-max_value, max=max_value).to(float8_dtype)

    class Float8MM(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, x_scale, w_scale):
            x8 = to_fp8_saturated(x * x_scale, e4m3)
            w8 = to_fp8_saturated(w * w_scale, e4m3)
            ctx.save_for_backward(x8, w8, x_scale, w_scale)
            return torch._scaled_mm(x8, w8.t(), scale_a=x_scale.reciprocal(),
                                    scale_b=w_scale.reciprocal(), out_dtype=torch.float32)

        @staticmethod
        def backward(ctx, go):
            x8, w8, x_scale, w_scale = ctx.saved_tensors
            g_scale = amax_to_scale(go.abs().max(), e5m2)
            g8 = to_fp8_saturated(go * g_scale, e5m2)
            grad_x = torch._scaled_mm(g8, w8.t().contiguous().t(), scale_a=g_scale.reciprocal(),
                                      scale_b=w_scale.reciprocal(), out_dtype=torch.float32)
            grad_w = torch._scaled_mm(g8.t().contiguous(), x8.t().contiguous().t(),
                                      scale_a=g_scale.reciprocal(),
                                      scale_b=x_scale.reciprocal(), out_dtype=torch.float32)
            return grad_x, grad_w, None, None

    w = torch.nn.Parameter(normal(torch, rng, 32, 16) * 0.3)
    x, y = normal(torch, rng, 16, 16) * 2, normal(torch, rng, 16, 32)
    history = torch.zeros(4)
    opt = torch.optim.SGD([w], lr=0.05)
    res = {"losses": [], "scales": []}
    for step in range(3):
        amax = x.abs().max()
        history = torch.roll(history, 1)
        history[0] = amax
        x_scale = amax_to_scale(torch.max(history), e4m3)
        w_scale = amax_to_scale(w.detach().abs().max(), e4m3)
        out = Float8MM.apply(x, w, x_scale, w_scale)
        loss = torch.nn.functional.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        res["scales"].append(x_scale.item())
    res["w"], res["w_grad"], res["history"] = w, w.grad, history
    # inference with row-wise scales and a bfloat16 bias, float8 and bfloat16 results
    with torch.no_grad():
        xs = amax_to_scale(x.abs().amax(dim=1, keepdim=True), e4m3)
        ws = amax_to_scale(w.abs().amax(dim=1, keepdim=True), e4m3)
        x8, w8 = to_fp8_saturated(x * xs, e4m3), to_fp8_saturated(w * ws, e4m3)
        bias = normal(torch, rng, 32).to(torch.bfloat16)
        res["rowwise_bf16"] = torch._scaled_mm(x8, w8.t(), xs.reciprocal(), ws.reciprocal().t(),
                                               bias=bias, out_dtype=torch.bfloat16)
        res["rowwise_f8"] = torch._scaled_mm(x8, w8.t(), xs.reciprocal(), ws.reciprocal().t(),
                                             out_dtype=e4m3)
        res["x8_bits"] = x8.view(torch.uint8)
        res["meta"] = [_dt(res["rowwise_bf16"]), _dt(res["rowwise_f8"]), _dt(xs),
                       str(torch.finfo(e4m3).max), str(torch.finfo(e5m2).max)]
    return res



PROGRAMS = [lsq_program, gpt_fast_program, float8_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
