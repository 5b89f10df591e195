"""LLM compression written as the reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: GPTQ (calibration
Hessian, damping, Cholesky inverse, blocked error propagation, act-order, groups), SparseGPT
(OBS masks by topk per block, 2:4 masks), AWQ scale search folded into the previous layer,
SmoothQuant migration, LLM.int8() outlier decomposition with int8 matmuls, QLoRA NF4 (codebook,
blockwise absmax, double quantisation, 4-bit packing) with LoRA trained on top, HQQ's
alternating optimisation, and fake-quant with straight-through estimators. Sibling _kernels
runs LSQ+, gpt-fast's int8/int4 and float8 training on PyTorch's quantized-matmul kernels;
_fixes pins what they found."""

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


def _quantize(torch, x, scale, zero, maxq):
    # GPTQ's quant.py
    if maxq < 0:
        return (x > scale / 2).float() * scale + (x < zero / 2).float() * zero
    q = torch.clamp(torch.round(x / scale) + zero, 0, maxq)
    return scale * (q - zero)


def _quantizer_class(torch):
    class Quantizer(torch.nn.Module):
        def __init__(self, shape=1):
            super().__init__()
            self.register_buffer("maxq", torch.tensor(0))
            self.register_buffer("scale", torch.zeros(shape))
            self.register_buffer("zero", torch.zeros(shape))

        def configure(self, bits, perchannel=False, sym=True, mse=False, norm=2.4, grid=20,
                      maxshrink=.8):
            self.maxq = torch.tensor(2 ** bits - 1)
            self.perchannel, self.sym, self.mse = perchannel, sym, mse
            self.norm, self.grid, self.maxshrink = norm, grid, maxshrink

        def find_params(self, x, weight=False):
            self.maxq = self.maxq.to(x.device)
            shape = x.shape
            x = x.flatten(1) if self.perchannel else x.flatten().unsqueeze(0)
            tmp = torch.zeros(x.shape[0], device=x.device)
            xmin = torch.minimum(x.min(1)[0], tmp)
            xmax = torch.maximum(x.max(1)[0], tmp)
            if self.sym:
                xmax = torch.maximum(torch.abs(xmin), xmax)
                tmp = xmin < 0
                if torch.any(tmp):
                    xmin[tmp] = -xmax[tmp]
            tmp = (xmin == 0) & (xmax == 0)
            xmin[tmp] = -1
            xmax[tmp] = +1
            self.scale = (xmax - xmin) / self.maxq
            if self.sym:
                self.zero = torch.full_like(self.scale, (self.maxq + 1) / 2)
            else:
                self.zero = torch.round(-xmin / self.scale)
            if self.mse:
                best = torch.full([x.shape[0]], float("inf"), device=x.device)
                for i in range(int(self.maxshrink * self.grid)):
                    p = 1 - i / self.grid
                    xmin1, xmax1 = p * xmin, p * xmax
                    scale1 = (xmax1 - xmin1) / self.maxq
                    zero1 = torch.round(-xmin1 / scale1) if not self.sym else self.zero
                    q = _quantize(torch, x, scale1.unsqueeze(1), zero1.unsqueeze(1), self.maxq)
                    q -= x
                    q.abs_()
                    q.pow_(self.norm)
                    err = torch.sum(q, 1)
                    tmp = err < best
                    if torch.any(tmp):
                        best[tmp] = err[tmp]
                        self.scale[tmp] = scale1[tmp]
                        self.zero[tmp] = zero1[tmp]
            if not self.perchannel:
                tmp = shape[0]
                self.scale = self.scale.repeat(tmp)
                self.zero = self.zero.repeat(tmp)
            if weight:
                shape = [-1] + [1] * (len(shape) - 1)
                self.scale = self.scale.reshape(shape)
                self.zero = self.zero.reshape(shape)
    return Quantizer


def _gptq(torch, layer, inputs, bits, blocksize, groupsize, actorder, sym, mse):
    """GPTQ.add_batch + fasterquant, as IST-DASLab/gptq writes them."""
    W = layer.weight.data.clone()
    rows, columns = W.shape
    H = torch.zeros((columns, columns))
    nsamples = 0
    for inp in inputs:
        inp = inp.unsqueeze(0) if len(inp.shape) == 2 else inp
        tmp = inp.shape[0]
        inp = inp.reshape((-1, inp.shape[-1])).t()
        H *= nsamples / (nsamples + tmp)
        nsamples += tmp
        inp = math.sqrt(2 / nsamples) * inp.float()
        H += inp.matmul(inp.t())
    quantizer = _quantizer_class(torch)()
    quantizer.configure(bits, perchannel=True, sym=sym, mse=mse)
    W = W.float()
    quantizer.find_params(W, weight=True)
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    if actorder:
        perm = torch.argsort(torch.diag(H), descending=True)
        W = W[:, perm]
        H = H[perm][:, perm]
    Losses = torch.zeros_like(W)
    Q = torch.zeros_like(W)
    damp = .01 * torch.mean(torch.diag(H))
    diag = torch.arange(columns)
    H[diag, diag] += damp
    H = torch.linalg.cholesky(H)
    H = torch.cholesky_inverse(H)
    H = torch.linalg.cholesky(H, upper=True)
    Hinv = H
    for i1 in range(0, columns, blocksize):
        i2 = min(i1 + blocksize, columns)
        count = i2 - i1
        W1 = W[:, i1:i2].clone()
        Q1 = torch.zeros_like(W1)
        Err1 = torch.zeros_like(W1)
        Losses1 = torch.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        for i in range(count):
            w = W1[:, i]
            d = Hinv1[i, i]
            if groupsize != -1 and (i1 + i) % groupsize == 0:
                quantizer.find_params(W[:, (i1 + i):(i1 + i + groupsize)], weight=True)
            q = _quantize(torch, w.unsqueeze(1), quantizer.scale, quantizer.zero,
                          quantizer.maxq).flatten()
            Q1[:, i] = q
            Losses1[:, i] = (w - q) ** 2 / d ** 2
            err1 = (w - q) / d
            W1[:, i:] -= err1.unsqueeze(1).matmul(Hinv1[i, i:].unsqueeze(0))
            Err1[:, i] = err1
        Q[:, i1:i2] = Q1
        Losses[:, i1:i2] = Losses1 / 2
        W[:, i2:] -= Err1.matmul(Hinv[i1:i2, i2:])
    if actorder:
        invperm = torch.argsort(perm)
        Q = Q[:, invperm]
    layer.weight.data = Q.reshape(layer.weight.shape).to(layer.weight.data.dtype)
    return torch.sum(Losses).item(), quantizer


def gptq_program(torch):
    """Two linears quantised in turn (the second calibrated on the first's quantised output),
    with and without act-order, groups and the MSE grid; hooks collect the inputs."""
    rng = np.random.default_rng(0)
    res = {}
    for name, kw in [("plain", dict(bits=4, blocksize=4, groupsize=-1, actorder=False,
                                     sym=False, mse=False)),
                     ("act_group", dict(bits=3, blocksize=8, groupsize=4, actorder=True,
                                        sym=True, mse=False)),
                     ("mse", dict(bits=2, blocksize=16, groupsize=-1, actorder=True,
                                  sym=False, mse=True))]:
        model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 6))
        fill_(torch, model, rng)
        calib = [normal(torch, rng, 2, 5, 12) for _ in range(3)]
        with torch.no_grad():
            ref = torch.cat([model(c) for c in calib])
        losses = []
        for layer in (model[0], model[2]):
            cache = []
            handle = layer.register_forward_hook(
                lambda m, inp, out: cache.append(inp[0].data))
            with torch.no_grad():
                for c in calib:
                    model(c)
            handle.remove()
            loss, quantizer = _gptq(torch, layer, cache, **kw)
            losses.append(loss)
        with torch.no_grad():
            out = torch.cat([model(c) for c in calib])
        res[name + "_losses"] = losses
        res[name + "_w0"], res[name + "_w2"] = model[0].weight, model[2].weight
        res[name + "_mse"] = [torch.nn.functional.mse_loss(out, ref).item()]
        res[name + "_scale"], res[name + "_zero"] = quantizer.scale, quantizer.zero
        res[name + "_meta"] = [_dt(quantizer.maxq), _dt(quantizer.zero),
                               _dt(model[0].weight), len(list(quantizer.buffers()))]
    return res


def sparsegpt_program(torch):
    """SparseGPT's fasterprune: OBS saliency w^2 / diag(Hinv)^2, masks by topk per block
    (unstructured) or over groups of four (2:4), with error propagation."""
    rng = np.random.default_rng(1)
    res = {}
    for name, sparsity, prunen, prunem in [("unstructured", .5, 0, 0), ("nm", 0, 2, 4)]:
        layer = torch.nn.Linear(16, 8)
        fill_(torch, layer, rng)
        X = normal(torch, rng, 40, 16)
        H = 2 / X.shape[0] * X.t().matmul(X)
        W = layer.weight.data.clone().float()
        rows, columns = W.shape
        blocksize = 8
        dead = torch.diag(H) == 0
        H[dead, dead] = 1
        W[:, dead] = 0
        Losses = torch.zeros(rows)
        damp = .01 * torch.mean(torch.diag(H))
        diag = torch.arange(columns)
        H[diag, diag] += damp
        H = torch.linalg.cholesky(H)
        H = torch.cholesky_inverse(H)
        Hinv = torch.linalg.cholesky(H, upper=True)
        mask = None
        for i1 in range(0, columns, blocksize):
            i2 = min(i1 + blocksize, columns)
            count = i2 - i1
            W1 = W[:, i1:i2].clone()
            Q1 = torch.zeros_like(W1)
            Err1 = torch.zeros_like(W1)
            Losses1 = torch.zeros_like(W1)
            Hinv1 = Hinv[i1:i2, i1:i2]
            if prunen == 0:
                tmp = W1 ** 2 / (torch.diag(Hinv1).reshape((1, -1))) ** 2
                thresh = torch.sort(tmp.flatten())[0][int(tmp.numel() * sparsity)]
                mask1 = tmp <= thresh
            else:
                mask1 = torch.zeros_like(W1) == 1
            for i in range(count):
                w = W1[:, i]
                d = Hinv1[i, i]
                if prunen != 0 and i % prunem == 0:
                    tmp = (W1[:, i:(i + prunem)] ** 2
                           / (torch.diag(Hinv1)[i:(i + prunem)].reshape((1, -1))) ** 2)
                    mask1.scatter_(1, i + torch.topk(tmp, prunen, dim=1, largest=False)[1],
                                   True)
                q = w.clone()
                q[mask1[:, i]] = 0
                Q1[:, i] = q
                Losses1[:, i] = (w - q) ** 2 / d ** 2
                err1 = (w - q) / d
                W1[:, i:] -= err1.unsqueeze(1).matmul(Hinv1[i, i:].unsqueeze(0))
                Err1[:, i] = err1
            W[:, i1:i2] = Q1
            Losses += torch.sum(Losses1, 1) / 2
            W[:, i2:] -= Err1.matmul(Hinv[i1:i2, i2:])
            mask = mask1 if mask is None else torch.cat([mask, mask1], 1)
        layer.weight.data = W.reshape(layer.weight.shape).to(layer.weight.data.dtype)
        res[name + "_w"], res[name + "_losses"] = layer.weight, Losses
        res[name + "_mask"] = mask.int()
        res[name + "_density"] = [(layer.weight == 0).float().mean().item()]
        # the 2:4 pattern by a plain topk over groups of four, as semi-structured kernels want
        w = layer.weight.detach().reshape(-1, 4)
        keep = torch.zeros_like(w, dtype=torch.bool).scatter_(
            1, torch.topk(w.abs(), 2, dim=1).indices, True)
        res[name + "_24"] = keep.reshape(layer.weight.shape).sum(1)
        res[name + "_meta"] = [_dt(mask), _dt(keep)]
    return res


def awq_smoothquant_program(torch):
    """AWQ's auto_scale (grid over activation-magnitude exponents, scales folded into the
    preceding LayerNorm under no_grad) and SmoothQuant's migration with alpha, then int8-style
    fake quant of weights and activations."""
    rng = np.random.default_rng(2)
    d, hidden, n = 16, 24, 20

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(d)
            self.fc1 = torch.nn.Linear(d, hidden)
            self.fc2 = torch.nn.Linear(d, hidden)

        def forward(self, x):
            h = self.ln(x)
            return torch.nn.functional.silu(self.fc1(h)) * self.fc2(h)

    def pseudo_quantize(w, n_bit=4, q_group_size=8):
        org_shape = w.shape
        w = w.reshape(-1, q_group_size)
        max_val = w.amax(dim=1, keepdim=True)
        min_val = w.amin(dim=1, keepdim=True)
        max_int = 2 ** n_bit - 1
        scales = (max_val - min_val).clamp(min=1e-5) / max_int
        zeros = (-torch.round(min_val / scales)).clamp_(0, max_int)
        w = (torch.clamp(torch.round(w / scales) + zeros, 0, max_int) - zeros) * scales
        assert torch.isnan(w).sum() == 0
        return w.reshape(org_shape)

    res = {}
    block = Block()
    fill_(torch, block, rng)
    with torch.no_grad():
        block.ln.weight.add_(1.0)
    x = normal(torch, rng, n, d) * torch.from_numpy(
        np.linspace(0.2, 4.0, d).astype(np.float32))
    with torch.no_grad():
        ref = block(x)
        inp = block.ln(x)
        x_max = inp.abs().view(-1, inp.shape[-1]).mean(0)
        best_error, best_ratio, best_scales = float("inf"), -1, None
        history = []
        org_sd = {k: v.clone() for k, v in block.state_dict().items()}
        n_grid = 10
        for ratio in range(n_grid):
            ratio = ratio * 1 / n_grid
            scales = x_max.pow(ratio).clamp(min=1e-4).view(-1)
            scales = scales / (scales.max() * scales.min()).sqrt()
            for fc in (block.fc1, block.fc2):
                fc.weight.mul_(scales.view(1, -1))
                fc.weight.data = pseudo_quantize(fc.weight.data) / scales.view(1, -1)
            out = block(x)
            loss = (ref - out).float().pow(2).mean().item()
            history.append(loss)
            if loss < best_error:
                best_error, best_ratio, best_scales = loss, ratio, scales
            block.load_state_dict(org_sd)
        # apply_scale: fold into the LayerNorm, scale the linears up
        best_scales = best_scales.detach()
        block.ln.weight.div_(best_scales)
        block.ln.bias.div_(best_scales)
        for fc in (block.fc1, block.fc2):
            fc.weight.mul_(best_scales.view(1, -1))
            fc.weight.data = pseudo_quantize(fc.weight.data)
        awq_out = block(x)
    res["awq_history"], res["awq_ratio"] = history, [best_ratio]
    res["awq_ln"], res["awq_out"] = block.ln.weight, awq_out

    # SmoothQuant: s_j = max|X_j|^alpha / max|W_j|^(1-alpha), folded into the LayerNorm
    block.load_state_dict(org_sd)
    with torch.no_grad():
        act_scales = block.ln(x).abs().view(-1, d).amax(dim=0).float()
        weight_scales = torch.cat([fc.weight.abs().max(dim=0, keepdim=True)[0]
                                   for fc in (block.fc1, block.fc2)], dim=0)
        weight_scales = weight_scales.max(dim=0)[0].clamp(min=1e-5)
        alpha = 0.5
        scales = (act_scales.pow(alpha) / weight_scales.pow(1 - alpha)).clamp(min=1e-5)
        block.ln.weight.div_(scales)
        block.ln.bias.div_(scales)
        for fc in (block.fc1, block.fc2):
            fc.weight.mul_(scales.view(1, -1))

        def quantize_weight_per_channel_absmax(w, n_bits=8):
            scales = w.abs().max(dim=-1, keepdim=True)[0]
            q_max = 2 ** (n_bits - 1) - 1
            scales.clamp_(min=1e-5).div_(q_max)
            w.div_(scales).round_().mul_(scales)
            return w

        def quantize_activation_per_token_absmax(t, n_bits=8):
            t_shape = t.shape
            t = t.view(-1, t_shape[-1])
            scales = t.abs().max(dim=-1, keepdim=True)[0]
            q_max = 2 ** (n_bits - 1) - 1
            scales.clamp_(min=1e-5).div_(q_max)
            return t.div(scales).round().mul(scales).view(t_shape)

        for fc in (block.fc1, block.fc2):
            fc.weight.data = quantize_weight_per_channel_absmax(fc.weight.data.clone())
        h = quantize_activation_per_token_absmax(block.ln(x))
        sq_out = torch.nn.functional.silu(block.fc1(h)) * block.fc2(h)
    res["sq_scales"], res["sq_out"] = scales, sq_out
    res["sq_err"] = [(sq_out - ref).pow(2).mean().item()]
    return res


def llm_int8_program(torch):
    """LLM.int8(): columns with an outlier above the threshold go through a float16-style
    float matmul, the rest through row-wise / column-wise absmax int8 with an int32 product."""
    rng = np.random.default_rng(3)
    n, k, m, threshold = 6, 16, 8, 3.0
    x = normal(torch, rng, n, k)
    x[:, 3] *= 8
    x[1, 11] = -7.5
    w = normal(torch, rng, m, k)
    res = {}

    def absmax_rowwise(t):
        scale = t.abs().amax(dim=1, keepdim=True).clamp(min=1e-8)
        q = torch.round(t * (127.0 / scale)).to(torch.int8)
        return q, scale

    outliers = (x.abs() >= threshold).any(dim=0)
    idx = torch.nonzero(outliers).flatten()
    x_reg = x.clone()
    x_reg[:, idx] = 0
    w_reg = w.clone()
    w_reg[:, idx] = 0
    xq, sx = absmax_rowwise(x_reg)
    wq, sw = absmax_rowwise(w_reg)
    acc = torch.matmul(xq.to(torch.int32), wq.t().to(torch.int32))
    out_int = acc.float() * (sx * sw.t()) / (127 * 127)
    out_outlier = x[:, idx] @ w[:, idx].t()
    out = out_int + out_outlier
    res["idx"], res["outliers"] = idx, outliers.int()
    res["xq"], res["wq"], res["acc"] = xq, wq, acc
    res["out"], res["ref"] = out, x @ w.t()
    # the column-wise (vector-wise) variant and the int8 saturation corner
    sxc = x_reg.abs().amax(dim=0, keepdim=True).clamp(min=1e-8)
    xqc = (x_reg * (127 / sxc)).round().clamp(-128, 127).to(torch.int8)
    res["xqc"] = xqc
    res["int8_wrap"] = torch.tensor([100, 120], dtype=torch.int8) + torch.tensor(
        [100, 10], dtype=torch.int8)
    res["meta"] = [_dt(xq), _dt(acc), _dt(out), _dt(idx),
                   _dt(xq.to(torch.int32) * 2), _dt(xq * 1.5), _dt(xq.float() / sx)]
    # the int8 linear via torch._int_mm where shapes allow (m > 16, k and n multiples of 8)
    a = torch.from_numpy(rng.integers(-128, 128, (32, 16)).astype(np.int8))
    b = torch.from_numpy(rng.integers(-128, 128, (16, 8)).astype(np.int8))
    res["int_mm"] = torch._int_mm(a, b)
    res["int_mm_dtype"] = [_dt(torch._int_mm(a, b))]
    return res


NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
       -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
       0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
       0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]


def qlora_program(torch):
    """QLoRA by hand: NF4 codebook from normal quantiles, blockwise absmax, double
    quantisation of the absmax constants to int8 with a float offset, two 4-bit codes packed per
    uint8, dequantisation by indexing inside a custom autograd.Function, and LoRA adapters
    trained with the base frozen."""
    rng = np.random.default_rng(4)
    d_in, d_out, r, blocksize = 16, 12, 4, 16
    code = torch.tensor(NF4)

    def quantize_nf4(w):
        flat = w.flatten().view(-1, blocksize)
        absmax = flat.abs().max(dim=1).values
        normed = flat / absmax.unsqueeze(1)
        idx = torch.argmin((normed.unsqueeze(-1) - code).abs(), dim=-1).to(torch.uint8)
        idx = idx.flatten()
        packed = (idx[0::2] << 4) | (idx[1::2] & 0xF)
        return packed.to(torch.uint8), absmax

    def double_quant(absmax, block2=4):
        offset = absmax.mean()
        centred = (absmax - offset).view(-1, block2)
        s2 = centred.abs().amax(dim=1, keepdim=True) / 127
        q = torch.round(centred / s2).to(torch.int8)
        return q, s2, offset

    def dequant(packed, q_absmax, s2, offset, shape):
        hi = (packed >> 4).long()
        lo = (packed & 0x0F).long()
        idx = torch.stack([hi, lo], dim=-1).flatten()
        absmax = (q_absmax.float() * s2).flatten() + offset
        vals = code[idx].view(-1, blocksize) * absmax.unsqueeze(1)
        return vals.view(shape)

    class Linear4bitFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, packed, q_absmax, s2, offset, shape):
            w = dequant(packed, q_absmax, s2, offset, shape)
            ctx.save_for_backward(packed, q_absmax, s2, offset)
            ctx.shape = shape
            return x @ w.t()

        @staticmethod
        def backward(ctx, grad):
            packed, q_absmax, s2, offset = ctx.saved_tensors
            w = dequant(packed, q_absmax, s2, offset, ctx.shape)
            return grad @ w, None, None, None, None, None

    class LoraLinear4bit(torch.nn.Module):
        def __init__(self, weight):
            super().__init__()
            packed, absmax = quantize_nf4(weight)
            q, s2, offset = double_quant(absmax)
            self.register_buffer("packed", packed)
            self.register_buffer("q_absmax", q)
            self.register_buffer("s2", s2)
            self.register_buffer("offset", offset)
            self.shape = tuple(weight.shape)
            self.lora_A = torch.nn.Parameter(torch.zeros(r, d_in))
            self.lora_B = torch.nn.Parameter(torch.zeros(d_out, r))
            self.scaling = 16 / r

        def forward(self, x):
            base = Linear4bitFn.apply(x, self.packed, self.q_absmax, self.s2, self.offset,
                                      self.shape)
            return base + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling

    w = normal(torch, rng, d_out, d_in) * 0.3
    layer = LoraLinear4bit(w)
    with torch.no_grad():
        layer.lora_A.copy_(normal(torch, rng, r, d_in) * 0.1)
    x, y = normal(torch, rng, 10, d_in), normal(torch, rng, 10, d_out)
    opt = torch.optim.AdamW([p for p in layer.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(3):
        xin = x.clone().requires_grad_(True)
        loss = torch.nn.functional.mse_loss(layer(xin), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    deq = dequant(layer.packed, layer.q_absmax, layer.s2, layer.offset, layer.shape)
    res = {"losses": losses, "A": layer.lora_A, "B": layer.lora_B, "xgrad": xin.grad,
           "packed": layer.packed, "q_absmax": layer.q_absmax, "deq": deq,
           "deq_err": [(deq - w).abs().max().item()]}
    res["meta"] = [_dt(layer.packed), _dt(layer.q_absmax),
                   _dt(layer.packed >> 4), _dt(layer.packed & 0x0F),
                   sorted(k for k, _ in layer.named_buffers()).__repr__(),
                   str(layer.packed.requires_grad)]
    # packed view tricks: uint8 bytes of an int8 tensor and back
    res["view_u8"] = layer.q_absmax.view(torch.uint8)
    res["view_back"] = layer.q_absmax.view(torch.uint8).view(torch.int8)
    return res


def hqq_program(torch):
    """HQQ's half-quadratic optimisation of the zero point with the generalised soft-thresholding
    (shrinkage) operator for the lp norm, p < 1, per group."""
    rng = np.random.default_rng(5)
    W = normal(torch, rng, 8, 32)
    nbits, group = 3, 16
    max_v, min_v = 2 ** nbits - 1, 0
    Wg = W.reshape(-1, group)
    _min = Wg.min(axis=1, keepdim=True)[0]
    _max = Wg.max(axis=1, keepdim=True)[0]
    scale = (max_v / (_max - _min)).clamp(max=2e4)
    zero = -_min * scale

    def shrink_lp_op(x, beta, lp_norm):
        if lp_norm == 1:
            return torch.sign(x) * torch.nn.functional.relu(torch.abs(x) - 1.0 / beta)
        return torch.sign(x) * torch.nn.functional.relu(
            torch.abs(x) - (1.0 / beta) * torch.pow(torch.abs(x), lp_norm - 1))

    @torch.inference_mode()
    def optimize_weights_proximal(tensor, scale, zero, min_max, lp_norm=0.7, beta=1e1,
                                  kappa=1.01, iters=8):
        scale = scale.float()
        zero = zero.float()
        best_error = 1e4
        errors = []
        for i in range(iters):
            W_q = torch.round(tensor * scale + zero).clamp(min_max[0], min_max[1])
            W_r = (W_q - zero) / scale
            W_e = shrink_lp_op(tensor - W_r, beta, lp_norm)
            zero = torch.mean(W_q - (tensor - W_e) * scale, axis=-1, keepdim=True)
            beta *= kappa
            current_error = float(torch.abs(tensor - W_r).mean())
            errors.append(current_error)
            if current_error < best_error:
                best_error = current_error
            else:
                break
        W_q = torch.round(tensor * scale + zero).clamp(min_max[0], min_max[1])
        return W_q, scale, zero, errors

    W_q, s, z, errors = optimize_weights_proximal(Wg, scale, zero, [min_v, max_v])
    W_r = ((W_q - z) / s).reshape(W.shape)
    return {"errors": errors, "W_q": W_q.to(torch.uint8), "zero": z, "W_r": W_r,
            "flags": [W_q.is_inference(), z.requires_grad, len(errors)],
            "l1": [shrink_lp_op(W, 2.0, 1).abs().sum().item()]}


def fake_quant_program(torch):
    """QAT with torch.fake_quantize_per_tensor_affine / per_channel_affine (their gradient masks
    the clamped range), a straight-through round via detach, and a custom STE Function with a
    learnable LSQ-style step size, trained a few steps."""
    rng = np.random.default_rng(6)
    lin = torch.nn.Linear(8, 6)
    fill_(torch, lin, rng)
    x, y = normal(torch, rng, 12, 8) * 2, normal(torch, rng, 12, 6)
    step = torch.nn.Parameter(torch.tensor(0.1))

    class RoundSTE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return torch.round(t)

        @staticmethod
        def backward(ctx, g):
            return g

    def lsq(t, s, qn, qp):
        g = 1.0 / math.sqrt(t.numel() * qp)
        s_scaled = (s - s * g).detach() + s * g
        return RoundSTE.apply(torch.clamp(t / s_scaled, qn, qp)) * s_scaled

    opt = torch.optim.SGD(list(lin.parameters()) + [step], lr=0.05, momentum=0.9)
    res = {"losses": []}
    for it in range(3):
        scales = lin.weight.detach().abs().amax(dim=1) / 7
        zps = torch.zeros(6, dtype=torch.int32)
        wq = torch.fake_quantize_per_channel_affine(lin.weight, scales, zps, 0, -8, 7)
        xq = torch.fake_quantize_per_tensor_affine(x, 0.05, 3, -128, 127)
        h = torch.nn.functional.linear(xq, wq, lin.bias)
        h_ste = h + (torch.round(h * 4) / 4 - h).detach()
        out = lsq(h_ste, step, -8, 7)
        loss = torch.nn.functional.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["w"], res["b"], res["step"] = lin.weight, lin.bias, step
    res["wgrad"], res["stepgrad"] = lin.weight.grad, step.grad
    # the gradient of fake-quant is 1 inside [qmin, qmax] and 0 outside
    t = torch.linspace(-2, 2, 21, requires_grad=True)
    torch.fake_quantize_per_tensor_affine(t, 0.1, 2, -10, 10).sum().backward()
    res["mask_grad"] = t.grad
    t2 = torch.linspace(-1, 1, 12).reshape(3, 4).requires_grad_()
    fq = torch.fake_quantize_per_channel_affine(
        t2, torch.tensor([0.05, 0.1, 0.2, 0.3]), torch.tensor([0, 1, -2, 3], dtype=torch.int32),
        1, -8, 7)
    fq.backward(torch.ones_like(fq))
    res["pc"], res["pc_grad"] = fq, t2.grad
    res["scale_t"] = torch.fake_quantize_per_tensor_affine(
        x, torch.tensor(0.05), torch.tensor(3, dtype=torch.int32), -128, 127)
    return res


PROGRAMS = [gptq_program, sparsegpt_program, awq_smoothquant_program, llm_int8_program,
            qlora_program, hqq_program, fake_quant_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
