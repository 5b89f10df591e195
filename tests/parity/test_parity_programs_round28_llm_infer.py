"""LLM inference by hand, written as gpt-fast, bitsandbytes/AWQ/GPTQ reference code, vLLM's
reference kernels and HF's generation utilities write it in plain torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights: weight-only int8 and int4
quantisation (per-channel and per-group scales, two int4 per uint8 and eight per int32, bit
patterns viewed as other dtypes), GPTQ's column-by-column update through a Cholesky inverse,
AWQ's scale search and SmoothQuant, float8 casts with amax scaling, a paged float8 KV cache
with flash-decoding merged by logsumexp, RoPE scaling and batched sampling with logits
processors. _fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _np(torch, rng, *shape, scale=1.0):
    return torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32))


def weight_only_quant_program(torch):
    """gpt-fast's int8 per-channel and int4 group-wise weight-only quantisation: absmax
    scales, asymmetric zero points, two nibbles packed per uint8 with << and |, eight per
    int32 as GPTQ stores them (the top nibble wraps the sign), unpacked with >> and &, and
    the dequantised linear in bfloat16 and float16."""
    F = torch.nn.functional
    rng = np.random.default_rng(2801)
    W = _np(torch, rng, 8, 32)
    x = _np(torch, rng, 3, 32)
    res = {}
    # int8, symmetric per output channel
    scales = W.abs().amax(dim=1, keepdim=True).clamp(min=1e-5) / 127.0
    q8 = torch.clamp(torch.round(W / scales), -128, 127).to(torch.int8)
    res["q8"] = q8
    res["q8_dtype"] = [str(q8.dtype).split(".")[-1]]
    res["q8_bits"] = q8.view(torch.uint8)
    deq8 = q8.to(torch.bfloat16) * scales.to(torch.bfloat16)
    res["deq8_dtype"] = [str(deq8.dtype).split(".")[-1]]
    res["deq8_bits"] = deq8.view(torch.int16)
    res["lin8_bf16"] = F.linear(x.to(torch.bfloat16), q8.to(torch.bfloat16)) * \
        scales.squeeze(1).to(torch.bfloat16)
    res["lin8_f16"] = F.linear(x.half(), q8.half() * scales.half())
    res["int_mm"] = torch._int_mm(torch.round(x[:, :32].repeat(6, 1) * 20).clamp(-128, 127)
                                  .to(torch.int8)[:17], q8.t().contiguous().repeat(1, 1))
    # int4, asymmetric per group of 8
    group = 8
    Wg = W.reshape(-1, group)
    max_val, min_val = Wg.amax(dim=1, keepdim=True), Wg.amin(dim=1, keepdim=True)
    s4 = (max_val - min_val).clamp(min=1e-6) / 15
    zeros = (-torch.round(min_val / s4)).clamp_(0, 15)
    q4 = (torch.clamp(torch.round(Wg / s4) + zeros, 0, 15)).to(torch.uint8).reshape(8, 32)
    packed = (q4[:, 1::2] << 4) | q4[:, ::2]
    res["packed"] = packed
    res["packed_dtype"] = [str(packed.dtype).split(".")[-1]]
    res["packed_as_int8"] = packed.view(torch.int8)
    low, high = packed & 0x0F, (packed >> 4) & 0x0F
    unpacked = torch.stack([low, high], dim=-1).reshape(8, 32)
    res["roundtrip"] = [bool(torch.equal(unpacked, q4))]
    deq4 = ((unpacked.reshape(-1, group).float() - zeros) * s4).reshape(8, 32)
    res["deq4_err"] = (deq4 - W).abs().max()
    res["lin4_bf16"] = F.linear(x.to(torch.bfloat16), deq4.to(torch.bfloat16))
    # GPTQ's int32 packing: eight nibbles per word, shifts 0, 4, ..., 28
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    words = torch.zeros(8, 4, dtype=torch.int32)
    nib = q4.to(torch.int32).reshape(8, 4, 8)
    for j in range(8):
        words |= nib[:, :, j] << shifts[j]
    res["words"] = words
    res["words_sign"] = [bool((words < 0).any())]
    back = (words.unsqueeze(-1) >> shifts) & 0xF
    res["words_roundtrip"] = [bool(torch.equal(back.reshape(8, 32).to(torch.uint8), q4))]
    res["bitwise_fn"] = torch.bitwise_right_shift(packed, 4) ^ torch.bitwise_and(packed, 15)
    res["uint8_wrap"] = (packed[:1] - 200) & 0xFF
    return res


def gptq_awq_smoothquant_program(torch):
    """GPTQ's quantiser on a calibration Hessian (2 X^T X, dampened, Cholesky inverse as the
    reference's cholesky / cholesky_inverse / cholesky(upper=True)), columns quantised in order
    with the error pushed onto the rest; AWQ's grid search of activation-aware scales; and
    SmoothQuant's migration of activation outliers into the weights."""
    rng = np.random.default_rng(2802)
    cols, rows, n = 16, 6, 40
    W = _np(torch, rng, rows, cols)
    X = _np(torch, rng, n, cols)
    X[:, 3] *= 8.0                                       # an outlier channel
    res = {}

    def quantize(w, scale, zero, maxq):
        q = torch.clamp(torch.round(w / scale) + zero, 0, maxq)
        return scale * (q - zero)

    H = 2 * X.t() @ X / n
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    damp = 0.01 * torch.mean(torch.diag(H))
    diag = torch.arange(cols)
    H[diag, diag] += damp
    L = torch.linalg.cholesky(H)
    Hinv = torch.cholesky_inverse(L)
    Hinv = torch.linalg.cholesky(Hinv, upper=True)
    res["Hinv"] = Hinv
    maxq = 15
    xmin = torch.minimum(W.min(1)[0], torch.zeros(rows))
    xmax = torch.maximum(W.max(1)[0], torch.zeros(rows))
    scale = ((xmax - xmin) / maxq).unsqueeze(1)
    zero = torch.round(-xmin / scale.squeeze(1)).unsqueeze(1)
    Wq = W.clone()
    Q = torch.zeros_like(Wq)
    Losses = torch.zeros_like(Wq)
    for i in range(cols):
        w = Wq[:, i]
        d = Hinv[i, i]
        q = quantize(w.unsqueeze(1), scale, zero, maxq).flatten()
        Q[:, i] = q
        Losses[:, i] = (w - q) ** 2 / d ** 2 / 2
        err1 = (w - q) / d
        Wq[:, i:] -= err1.unsqueeze(1).matmul(Hinv[i, i:].unsqueeze(0))
    res["gptq_Q"] = Q
    res["gptq_loss"] = torch.sum(Losses).item()
    res["gptq_out_err"] = ((X @ Q.t() - X @ W.t()) ** 2).mean()
    rtn = quantize(W, scale, zero, maxq)
    res["rtn_out_err"] = ((X @ rtn.t() - X @ W.t()) ** 2).mean()
    # AWQ: s = x_mean^ratio, normalised, searched on a grid of ratios
    x_max = X.abs().view(-1, cols).mean(0)
    best_error, best_ratio, history = float("inf"), -1, []
    org_out = X @ W.t()
    for r in range(5):
        ratio = r / 5
        s = x_max.pow(ratio).clamp(min=1e-4).view(-1)
        s = s / (s.max() * s.min()).sqrt()
        Ws = W * s.view(1, -1)
        wmax = Ws.abs().amax(dim=1, keepdim=True) / 7
        Wdq = torch.clamp(torch.round(Ws / wmax), -8, 7) * wmax / s.view(1, -1)
        loss = (org_out - X @ Wdq.t()).float().pow(2).mean().item()
        history.append(loss)
        if loss < best_error:
            best_error, best_ratio = loss, ratio
    res["awq_history"] = history
    res["awq_ratio"] = best_ratio
    # SmoothQuant: s_j = max|X_j|^a / max|W_j|^(1-a)
    alpha = 0.5
    act_scales = X.abs().max(dim=0)[0]
    weight_scales = W.abs().max(dim=0)[0].clamp(min=1e-5)
    sq = (act_scales.pow(alpha) / weight_scales.pow(1 - alpha)).clamp(min=1e-5)
    Xs, Ws = X.div(sq), W.mul(sq.view(1, -1))
    res["sq_same_out"] = (Xs @ Ws.t() - org_out).abs().max()
    x_scale = Xs.abs().max() / 127
    Xq = (Xs / x_scale).round().clamp(-128, 127).to(torch.int8)
    w_scale = Ws.abs().amax(dim=1, keepdim=True) / 127
    Wq8 = (Ws / w_scale).round().clamp(-128, 127).to(torch.int8)
    acc = Xq.to(torch.int32) @ Wq8.to(torch.int32).t()
    res["sq_acc_dtype"] = [str(acc.dtype).split(".")[-1]]
    res["sq_out"] = acc.float() * x_scale * w_scale.view(1, -1)
    return res


def fp8_paged_kv_program(torch):
    """Per-tensor float8 scaling as the fp8 recipes write it (amax over finfo.max, clamp, cast
    to e4m3fn for activations and weights and e5m2 for gradients, dequantised matmul), then a
    vLLM-style paged KV cache stored in float8: blocks written with index_copy_ through a slot
    mapping, read back through a block table with index_select, and attention by flash-decoding
    chunks merged with logsumexp, checked against full attention with sliding-window and
    prefix-LM masks."""
    rng = np.random.default_rng(2803)
    res = {}
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    for dt in (e4, e5):
        fi = torch.finfo(dt)
        res[f"finfo_{fi.bits}_{fi.max}"] = [fi.max, fi.min, fi.eps, fi.tiny, fi.smallest_normal]
    x = _np(torch, rng, 4, 16, scale=3.0)
    w = _np(torch, rng, 8, 16, scale=0.2)

    def to_fp8(t, dtype):
        finfo = torch.finfo(dtype)
        amax = t.abs().max().clamp(min=1e-12)
        scale = finfo.max / amax
        return (t * scale).clamp(min=finfo.min, max=finfo.max).to(dtype), scale.float().reciprocal()

    xq, xs = to_fp8(x, e4)
    wq, ws = to_fp8(w, e4)
    res["xq_bits"] = xq.view(torch.uint8)
    res["wq_bits"] = wq.view(torch.uint8)
    res["fp8_dtype"] = [str(xq.dtype).split(".")[-1], str(xq.element_size())]
    out = (xq.to(torch.bfloat16) @ wq.to(torch.bfloat16).t()).float() * (xs * ws)
    res["fp8_out"] = out
    res["fp8_err"] = (out - x @ w.t()).abs().max()
    g = _np(torch, rng, 4, 8, scale=1e-3)
    gq, gs = to_fp8(g, e5)
    res["gq_bits"] = gq.view(torch.uint8)
    res["grad_w"] = (gq.float().t() @ xq.float()) * (gs * xs)
    res["fp8_abs"] = gq.abs().float()
    # e5m2 views: GQA's repeat_kv (expand + reshape), unfold and as_strided keep the dtype
    rep = gq[:, None].expand(4, 2, 8).reshape(8, 8)
    res["e5m2_views"] = [str(t.dtype).split(".")[-1] for t in (rep, gq.unfold(1, 4, 2))]
    res["e5m2_repeat_kv"] = rep.view(torch.uint8)
    res["e5m2_windows"] = gq.unfold(1, 4, 2).float()
    res["e5m2_strided"] = gq.as_strided((3, 4), (1, 2), 1).float()
    res["fp8_mul"] = (xq * xq).float()
    res["fp8_sat"] = torch.tensor([1e4, -1e4, 300.0]).to(e4).float()
    res["fp8_from_bits"] = torch.arange(0, 256, 37, dtype=torch.uint8).view(e4).float()
    # paged KV cache in float8_e4m3fn with per-tensor k/v scales
    H, D, block, num_blocks = 2, 4, 4, 6
    k_cache = torch.zeros(num_blocks, block, H, D, dtype=e4)
    v_cache = torch.zeros(num_blocks, block, H, D, dtype=e4)
    k_scale, v_scale = 0.05, 0.04
    seq_len = 11
    block_table = torch.tensor([4, 1, 3])
    positions = torch.arange(seq_len)
    slot_mapping = block_table[positions // block] * block + positions % block
    k = _np(torch, rng, seq_len, H, D)
    v = _np(torch, rng, seq_len, H, D)
    q = _np(torch, rng, H, D)
    # (PyTorch's CPU index_copy_ has no float8 kernel: vLLM writes the bytes through uint8)
    flat_k = k_cache.view(torch.uint8).view(-1, H, D)
    flat_v = v_cache.view(torch.uint8).view(-1, H, D)
    flat_k.index_copy_(0, slot_mapping, (k / k_scale).clamp(-448, 448).to(e4).view(torch.uint8))
    flat_v.index_copy_(0, slot_mapping, (v / v_scale).clamp(-448, 448).to(e4).view(torch.uint8))
    try:
        k_cache.view(-1, H, D).index_copy_(0, slot_mapping, k.to(e4))
    except NotImplementedError as e:
        res["index_copy_fp8"] = [str(e)]
    res["cache_bits"] = k_cache.view(torch.uint8).sum(dtype=torch.int64)
    res["slots"] = slot_mapping.tolist()
    ks = k_cache.index_select(0, block_table).reshape(-1, H, D)[:seq_len].float() * k_scale
    vs = v_cache.index_select(0, block_table).reshape(-1, H, D)[:seq_len].float() * v_scale
    res["dequant_k_err"] = (ks - k).abs().max()
    scores = torch.einsum("hd,thd->ht", q, ks) / math.sqrt(D)
    full = torch.einsum("ht,thd->hd", torch.softmax(scores, dim=-1), vs)
    res["full"] = full
    # flash-decoding: per-chunk softmax partials merged with logsumexp
    outs, lses = [], []
    for start in range(0, seq_len, block):
        s = scores[:, start:start + block]
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse.unsqueeze(-1))
        outs.append(torch.einsum("ht,thd->hd", p, vs[start:start + block]))
        lses.append(lse)
    lse_all = torch.stack(lses, dim=0)
    total = torch.logsumexp(lse_all, dim=0)
    w_chunks = torch.exp(lse_all - total.unsqueeze(0))
    merged = (torch.stack(outs, dim=0) * w_chunks.unsqueeze(-1)).sum(0)
    res["merged"] = merged
    res["merge_err"] = (merged - full).abs().max()
    # float8 cache blocks concatenated and compared by bit pattern
    both = torch.cat([k_cache[4], k_cache[1]], dim=0)
    res["cat_fp8_bits"] = both.view(torch.uint8)
    res["stack_fp8"] = torch.stack([k_cache[3], k_cache[1]]).float()
    res["where_fp8"] = torch.where(both.float() > 0, both, torch.zeros_like(both)).float()
    res["eq_fp8"] = (both == both).all().item()
    # masks: sliding window 3 and prefix-LM with a 4-token prefix
    T = 7
    i = torch.arange(T).unsqueeze(1)
    j = torch.arange(T).unsqueeze(0)
    causal = j <= i
    sliding = causal & (i - j < 3)
    prefix = causal | (j < 4)
    qs, kk = _np(torch, rng, T, D), _np(torch, rng, T, D)
    logits = qs @ kk.t()
    for name, mask in (("sliding", sliding), ("prefix", prefix)):
        att = logits.masked_fill(~mask, float("-inf")).softmax(-1)
        res[f"{name}_att"] = att
        bias = torch.zeros(T, T).masked_fill_(mask.logical_not(), torch.finfo(torch.float32).min)
        res[f"{name}_sdpa"] = torch.nn.functional.scaled_dot_product_attention(
            qs[None], kk[None], kk[None], attn_mask=bias[None])
    return res


def _rope_inv_freq(torch, dim, base, kind, factor=4.0, original=16, max_pos=64):
    """HF's rope init functions: default, linear (positions scaled), dynamic NTK (base
    rescaled) and YaRN (ramp between interpolated and extrapolated frequencies, mscale)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if kind == "ntk":
        base = base * ((factor * max_pos / original) - (factor - 1)) ** (dim / (dim - 2))
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        return inv_freq, 1.0
    if kind == "yarn":
        beta_fast, beta_slow = 32, 1

        def correction_dim(num_rot):
            return (dim * math.log(original / (num_rot * 2 * math.pi))) / (2 * math.log(base))
        low = max(math.floor(correction_dim(beta_fast)), 0)
        high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = (torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)
        ramp = torch.clamp(ramp, 0, 1)
        extrapolation_factor = 1 - ramp
        pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
        inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation_factor) + \
            (1.0 / pos_freqs) * extrapolation_factor
        return inv_freq, 0.1 * math.log(factor) + 1.0
    return inv_freq, 1.0


def rope_sampling_program(torch):
    """Batched generation the HF way on a one-layer decoder: left padding, position ids from
    the attention mask's cumsum, RoPE with linear / NTK / YaRN scaling, a KV cache grown by
    cat, and the logits processors (repetition penalty by gather/scatter_, frequency and
    presence penalties by scatter_add_ counts, temperature, top-k, top-p by sorted cumsum
    scattered back, min-p), greedy picks compared exactly and multinomial under manual_seed
    checked for shape and range."""
    nn = torch.nn
    rng = np.random.default_rng(2804)
    V, Dm, B = 24, 8, 3
    res = {}
    emb = nn.Embedding(V, Dm)
    wq, wk, wv, wo = (nn.Linear(Dm, Dm, bias=False) for _ in range(4))
    head = nn.Linear(Dm, V, bias=False)
    with torch.no_grad():
        for p in [emb.weight, wq.weight, wk.weight, wv.weight, wo.weight, head.weight]:
            p.copy_(_np(torch, rng, *p.shape, scale=0.5))
    prompts = [[3, 5, 7, 9], [4, 2], [8, 8, 1]]
    pad = 0
    L = max(len(p) for p in prompts)
    input_ids = torch.tensor([[pad] * (L - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in prompts])
    for kind in ("default", "linear", "ntk", "yarn"):
        inv_freq, mscale = _rope_inv_freq(torch, Dm, 10000.0, kind)
        res[f"inv_freq_{kind}"] = inv_freq
        res[f"mscale_{kind}"] = mscale

    inv_freq, mscale = _rope_inv_freq(torch, Dm, 10000.0, "yarn")

    def rotate_half(t):
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return torch.cat((-t2, t1), dim=-1)

    def rope(t, position_ids):
        freqs = (inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
                 @ position_ids[:, None, :].float()).transpose(1, 2)
        emb_ = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb_.cos() * mscale, emb_.sin() * mscale
        return t * cos + rotate_half(t) * sin

    def forward(ids, position_ids, mask, cache):
        h = emb(ids)
        qh, kh, vh = rope(wq(h), position_ids), rope(wk(h), position_ids), wv(h)
        if cache is not None:
            kh, vh = torch.cat([cache[0], kh], dim=1), torch.cat([cache[1], vh], dim=1)
        Tq, Tk = qh.shape[1], kh.shape[1]
        causal = torch.ones(Tq, Tk, dtype=torch.bool).tril(diagonal=Tk - Tq)
        allowed = causal[None] & mask[:, None, :].bool()
        scores = (qh @ kh.transpose(1, 2)) / math.sqrt(Dm)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        out = wo(torch.softmax(scores, dim=-1, dtype=torch.float32).to(qh.dtype) @ vh)
        return head(out + h), (kh, vh)

    def processors(input_ids, scores):
        # repetition penalty (CTRL): divide positive, multiply negative logits seen before
        score = torch.gather(scores, 1, input_ids)
        score = torch.where(score < 0, score * 1.3, score / 1.3)
        scores = scores.scatter(1, input_ids, score)
        # frequency / presence penalties from token counts
        ones = torch.ones_like(input_ids, dtype=scores.dtype)
        counts = torch.zeros_like(scores).scatter_add_(1, input_ids, ones)
        scores = scores - 0.2 * counts - 0.1 * (counts > 0).to(scores.dtype)
        scores = scores / 0.7
        # top-k
        kth = torch.topk(scores, 8)[0][..., -1, None]
        scores = scores.masked_fill(scores < kth, -float("Inf"))
        # top-p (HF: ascending sort, remove the low tail whose cumulative mass <= 1 - p)
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        sorted_indices_to_remove = cumulative_probs <= (1 - 0.9)
        sorted_indices_to_remove[..., -1:] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices,
                                                             sorted_indices_to_remove)
        scores = scores.masked_fill(indices_to_remove, -float("Inf"))
        # min-p
        probs = torch.softmax(scores, dim=-1)
        top_probs, _ = probs.max(dim=-1, keepdim=True)
        scores = scores.masked_fill(probs < 0.05 * top_probs, -float("Inf"))
        return scores

    position_ids = attention_mask.long().cumsum(-1) - 1
    position_ids.masked_fill_(attention_mask == 0, 1)
    res["position_ids"] = position_ids
    cache, mask = None, attention_mask
    step_ids, generated = input_ids, input_ids
    all_scores = []
    with torch.inference_mode():
        for _ in range(4):
            logits, cache = forward(step_ids, position_ids, mask, cache)
            scores = processors(generated, logits[:, -1, :])
            all_scores.append(torch.nan_to_num(scores, neginf=-1e9))
            next_tokens = torch.argmax(scores, dim=-1)
            generated = torch.cat([generated, next_tokens[:, None]], dim=-1)
            mask = torch.cat([mask, mask.new_ones((B, 1))], dim=-1)
            position_ids = position_ids[:, -1:] + 1
            step_ids = next_tokens[:, None]
        res["generated"] = generated.flatten().tolist()
        res["scores"] = torch.stack(all_scores)
        res["kept"] = (torch.stack(all_scores) > -1e8).sum(-1).flatten().tolist()
        res["cache_shape"] = list(cache[0].shape)
        res["inference"] = [cache[0].is_inference(), logits.requires_grad]
        torch.manual_seed(0)
        probs = torch.softmax(scores, dim=-1)
        draws = torch.multinomial(probs, num_samples=5, replacement=True)
        res["draw_shape"] = list(draws.shape)
        res["draws_allowed"] = [bool(torch.gather(probs, 1, draws).gt(0).all())]
        torch.manual_seed(0)
        res["draws_repeat"] = [bool(torch.equal(draws, torch.multinomial(probs, 5, True)))]
    # low-precision accumulation: the same sums and softmaxes in bfloat16 / float16
    z = _np(torch, rng, 4, 300)
    res["bf16_sum"] = z.to(torch.bfloat16).sum(-1)
    res["bf16_cumsum"] = z.to(torch.bfloat16).cumsum(-1)[:, -3:]
    res["f16_softmax"] = torch.softmax(z.half() * 4, dim=-1)[:, :5]
    res["bf16_softmax_f32"] = torch.softmax(z.to(torch.bfloat16), -1, dtype=torch.float32)[:, :5]
    res["bf16_matmul"] = z[:, :64].to(torch.bfloat16) @ z[:, 64:128].t().to(torch.bfloat16)
    res["bf16_mean"] = z.to(torch.bfloat16).mean(-1)
    res["f16_overflow"] = (z.half() * 3000).sum(-1)
    res["f16_var"] = z.half().var(-1)
    return res


def static_cache_bf16_program(torch):
    """HF's StaticCache and SlidingWindowCache in bfloat16 as the model code drives them: a
    4-D float mask built from torch.full(finfo.min) and triu, expanded and padded by
    masked_fill, prefill and decode writes by index_copy_ at cache_position, the sliding
    cache shifted by roll and overwritten, sdpa on bfloat16 with that mask, and a
    dequantised int8 KV cache (per-token scales) compared with the bfloat16 one."""
    F = torch.nn.functional
    rng = np.random.default_rng(2805)
    B, H, D, max_len, window = 2, 2, 8, 10, 4
    dtype = torch.bfloat16
    res = {}
    attention_mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    min_dtype = torch.finfo(dtype).min
    res["min_dtype"] = min_dtype
    k_cache = torch.zeros(B, H, max_len, D, dtype=dtype)
    v_cache = torch.zeros(B, H, max_len, D, dtype=dtype)
    s_k = torch.zeros(B, H, window, D, dtype=dtype)
    outs = []

    def causal_4d(seq, target, cache_position):
        mask = torch.full((seq, target), fill_value=min_dtype, dtype=dtype)
        if seq != 1:
            mask = torch.triu(mask, diagonal=1)
        mask *= torch.arange(target) > cache_position.reshape(-1, 1)
        mask = mask[None, None, :, :].expand(B, 1, -1, -1).clone()
        mlen = attention_mask.shape[-1]
        padding = mask[:, :, :, :mlen] + attention_mask[:, None, None, :].to(dtype)
        padding = padding == 0
        mask[:, :, :, :mlen] = mask[:, :, :, :mlen].masked_fill(padding, min_dtype)
        return mask

    def sliding_update(cache, new, cache_position):
        if new.shape[2] > window:
            cache.copy_(new[:, :, -window:])
            return new
        slicing = torch.ones(window, dtype=torch.long).cumsum(0)
        cache_position = cache_position.clamp(0, window - 1)
        to_shift = cache_position > window - 1
        indices = (slicing + to_shift.int()) % window
        shifted = cache[:, :, indices]
        shifted[:, :, cache_position] = new
        cache.zero_()
        cache += shifted
        return shifted

    seq = 5
    for step in range(4):
        cache_position = torch.arange(seq) if step == 0 else torch.tensor([seq + step - 1])
        n = cache_position.shape[0]
        q = _np(torch, rng, B, H, n, D).to(dtype)
        k = _np(torch, rng, B, H, n, D).to(dtype)
        v = _np(torch, rng, B, H, n, D).to(dtype)
        k_cache.index_copy_(2, cache_position, k)
        v_cache.index_copy_(2, cache_position, v)
        win = sliding_update(s_k, k, cache_position)
        res[f"window_{step}"] = win.float()
        if step:
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones((B, 1))], -1)
        mask = causal_4d(n, max_len, cache_position)
        res[f"mask_{step}"] = (mask == min_dtype).flatten().tolist()
        out = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
        outs.append(out.float())
    res["outs"] = torch.cat(outs, dim=2)
    res["cache_bits"] = k_cache.view(torch.int16).sum(dtype=torch.int64)
    # int8 KV cache with per-token absmax scales (KIVI / HQQ-style), dequantised to bfloat16
    kf = k_cache.float()
    scale = kf.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5) / 127
    kq = torch.round(kf / scale).clamp(-128, 127).to(torch.int8)
    deq = (kq.to(dtype) * scale.to(dtype))
    res["kq"] = kq
    res["deq_err"] = (deq.float() - kf).abs().max()
    res["deq_bits"] = deq.view(torch.int16)[0, 0]
    return res


PROGRAMS = [weight_only_quant_program, gptq_awq_smoothquant_program, fp8_paged_kv_program,
            rope_sampling_program, static_cache_bf16_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
