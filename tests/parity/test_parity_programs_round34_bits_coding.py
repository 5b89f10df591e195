"""Integer programs as quantization and coding repositories write them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy data: GPTQ/AWQ int4 packing into
int32 (and int2 into uint8) with dequantisation and a matmul through it, Huffman/arithmetic-coding
frequency tables (bincount, integer cumsum, searchsorted), LSD radix and counting sort with
scatter_add_, Gray codes, modular arithmetic and overflow of small integer dtypes, float bit casts
(view as uint8/int32/int16, bfloat16 rounding by integer tricks) and run-length coding with
unique_consecutive."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def ints(t):
    """A tensor's dtype name, shape and values exactly (int64 is beyond float64's 2**53)."""
    return [str(t.dtype).split(".")[-1], str(tuple(t.shape)), *t.flatten().tolist()]


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def gptq_pack_program(torch):
    """GPTQ's QuantLinear.pack (int4 into int32 rows, zeros packed along columns), its
    dequantisation by shifts and masks, AutoAWQ's interleaved order, and int2 into uint8."""
    rng = np.random.default_rng(0)
    nn = torch.nn
    infeat, outfeat, group, bits = 16, 16, 8, 4
    lin = nn.Linear(infeat, outfeat, bias=False)
    fill_(torch, lin, rng)
    maxq = 2 ** bits - 1
    w = lin.weight.detach().view(outfeat, -1, group)
    wmin, wmax = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
    scales = (wmax - wmin).clamp(min=1e-5) / maxq
    zeros = torch.round(-wmin / scales)
    q = torch.clamp(torch.round(w / scales) + zeros, 0, maxq).to(torch.int32).view(outfeat, -1)
    intweight = q.t().contiguous()
    qweight = torch.zeros(infeat * bits // 32, outfeat, dtype=torch.int32)
    for j in range(32 // bits):
        qweight |= intweight[j::32 // bits] << (bits * j)
    res = {"q": ints(q), "qweight": ints(qweight)}
    izeros = zeros.squeeze(-1).t().to(torch.int32)
    qzeros = torch.zeros(izeros.shape[0], outfeat * bits // 32, dtype=torch.int32)
    for j in range(32 // bits):
        qzeros[:, 0] |= izeros[:, j] << (bits * j)
        qzeros[:, 1].bitwise_or_(izeros[:, 8 + j] << (bits * j))
    res["qzeros"] = ints(qzeros)
    # dequantise: the repos' torch.bitwise_right_shift with broadcast shift vectors
    wf = torch.arange(0, 32, bits, dtype=torch.int32).unsqueeze(0)
    unz = torch.bitwise_right_shift(qzeros.unsqueeze(2).expand(-1, -1, 32 // bits),
                                    wf.unsqueeze(0)).to(torch.int8)
    unz = torch.bitwise_and(unz, maxq).reshape(izeros.shape)
    unw = torch.bitwise_right_shift(qweight.unsqueeze(1).expand(-1, 32 // bits, -1),
                                    wf.unsqueeze(-1)).to(torch.int16 if bits == 8 else torch.int8)
    unw = torch.bitwise_and(unw, maxq).reshape(infeat, outfeat)
    res["unz"], res["unw"] = ints(unz), ints(unw)
    g_idx = torch.arange(infeat, dtype=torch.int32) // group
    deq = scales.squeeze(-1).t()[g_idx.long()] * (unw - unz[g_idx.long()]).half().float()
    x = torch.from_numpy(rng.standard_normal((3, infeat)).astype(np.float32))
    res["deq_err"] = (deq.t() - lin.weight.detach()).abs().max()
    res["out"] = x @ deq
    # AutoAWQ: pack 8 nibbles per int32 in the interleaved order, unpack with reverse order
    iw = q[:, :8].to(torch.int32)
    packed = torch.zeros(q.shape[0], dtype=torch.int32)
    for i in range(8):
        packed |= iw[:, AWQ_ORDER[i]] << (i * 4)
    shifts = torch.arange(0, 32, 4)
    iw2 = torch.bitwise_right_shift(packed[:, None], shifts[None, :]).to(torch.int8)
    reverse = torch.arange(8).view(-1, 8)[:, AWQ_ORDER].flatten().argsort()
    iw2 = torch.bitwise_and(iw2[:, reverse], 0xF)
    res["awq_packed"], res["awq_ok"] = ints(packed), bool(torch.equal(iw2.int(), iw))
    # int2 into uint8 (BitNet-style ternary weights offset by 1)
    tern = torch.from_numpy(rng.integers(-1, 2, size=(4, 8)).astype(np.int8))
    u = (tern + 1).to(torch.uint8).view(4, 2, 4)
    p2 = u[..., 0] | (u[..., 1] << 2) | (u[..., 2] << 4) | (u[..., 3] << 6)
    back = ((p2.unsqueeze(-1) >> torch.tensor([0, 2, 4, 6], dtype=torch.uint8)) & 3)
    res["p2"], res["tern_back"] = ints(p2), ints(back.view(4, 8).to(torch.int8) - 1)
    res["nibble_i8"] = ints((q[:, :2] - 8).to(torch.int8))
    return res


def huffman_program(torch):
    """Symbol statistics of an entropy coder: bincount frequencies, Huffman code lengths by
    repeated merges of argsort(stable=True), canonical codes via integer cumsum and shifts, and
    an arithmetic coder's integer CDF with searchsorted decoding."""
    rng = np.random.default_rng(1)
    sym = torch.from_numpy(rng.geometric(0.3, size=200).astype(np.int64) - 1).clamp(max=9)
    freq = torch.bincount(sym, minlength=10)
    res = {"freq": ints(freq), "freq_w": torch.bincount(sym, weights=torch.ones(200) * 0.5)}
    order = torch.argsort(freq, stable=True)
    res["order"] = ints(order)
    res["order_desc"] = ints(torch.argsort(freq, descending=True, stable=True))
    sv, si = torch.sort(freq, stable=True, descending=True)
    res["sort_v"], res["sort_i"] = ints(sv), ints(si)
    # code lengths by merging the two smallest (group membership as a bool mask)
    weights = freq.clone() + 1
    groups = torch.eye(10, dtype=torch.bool)
    lengths = torch.zeros(10, dtype=torch.int64)
    alive = torch.ones(10, dtype=torch.bool)
    for _ in range(9):
        w = torch.where(alive, weights, torch.iinfo(torch.int64).max)
        a, b = torch.argsort(w, stable=True)[:2].tolist()
        lengths += (groups[a] | groups[b]).long()
        groups[a] |= groups[b]
        weights[a] += weights[b]
        alive[b] = False
    res["lengths"] = ints(lengths)
    # canonical Huffman codes: sort by (length, symbol), code = (prev + 1) << (len diff)
    key = lengths * 16 + torch.arange(10)
    idx = torch.argsort(key)
    ls = lengths[idx]
    codes = torch.zeros(10, dtype=torch.int64)
    code = 0
    for i in range(1, 10):
        code = (code + 1) << int(ls[i] - ls[i - 1])
        codes[i] = code
    res["codes"] = ints(torch.empty_like(codes).scatter_(0, idx, codes))
    res["kraft"] = ints((1 << (ls.max() - ls)).sum())
    # arithmetic coding: integer CDF with precision 16, searchsorted to decode
    prec = 1 << 16
    cdf = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(freq, 0)])
    cdf = torch.div(cdf * prec, cdf[-1], rounding_mode="floor")
    res["cdf"], res["cdf_dtype"] = ints(cdf), [str(torch.cumsum(freq, 0).dtype)[-5:]]
    targets = torch.from_numpy(rng.integers(0, prec, size=20))
    dec = torch.searchsorted(cdf, targets, right=True) - 1
    res["dec"] = ints(dec)
    res["dec_left"] = ints(torch.searchsorted(cdf, targets, side="left"))
    res["dec_sorter"] = ints(torch.searchsorted(cdf.flip(0), targets,
                                                sorter=torch.arange(10, -1, -1)))
    res["dec_i32"] = ints(torch.searchsorted(cdf, targets, out_int32=True))
    res["cumsum_i8"] = ints(torch.cumsum(freq.to(torch.int8), 0))
    res["cumsum_u8"] = ints(torch.cumsum(freq.to(torch.uint8), 0, dtype=torch.uint8))
    res["cumprod_b"] = ints(torch.cumprod(freq > 5, 0))
    res["entropy"] = -(freq / 200 * torch.log2(freq.clamp(min=1) / 200)).sum()
    return res


def radix_sort_program(torch):
    """LSD radix sort over base-16 digits (counting sort per pass with scatter_add_ and an
    exclusive integer cumsum), compared with argsort(stable=True); bucketize histograms."""
    rng = np.random.default_rng(2)
    keys = torch.from_numpy(rng.integers(-500, 500, size=40))
    vals = torch.arange(40)
    ukeys = keys + 500                                      # non-negative
    perm = torch.arange(40)
    for p in range(3):
        digit = (ukeys[perm] >> (4 * p)) & 0xF
        count = torch.zeros(16, dtype=torch.int64).scatter_add_(0, digit, torch.ones_like(digit))
        start = torch.cumsum(count, 0) - count
        # stable rank within a digit: running count of equal digits before each position
        onehot = torch.nn.functional.one_hot(digit, 16)
        within = (torch.cumsum(onehot, 0) - onehot).gather(1, digit[:, None]).squeeze(1)
        pos = start[digit] + within
        perm = torch.empty_like(perm).index_copy_(0, pos, perm)
    res = {"radix": ints(keys[perm]), "perm": ints(vals[perm])}
    res["argsort_stable"] = ints(torch.argsort(keys, stable=True))
    res["same"] = bool(torch.equal(perm, torch.argsort(keys, stable=True)))
    res["sort_desc"] = ints(torch.sort(keys, descending=True, stable=True).indices)
    res["msort"] = ints(torch.msort(keys.view(8, 5)))
    bounds = torch.tensor([-400, -100, 0, 0, 250])
    res["bucket"] = ints(torch.bucketize(keys, bounds))
    res["bucket_r"] = ints(torch.bucketize(keys, bounds, right=True))
    res["bucket_i32"] = ints(torch.bucketize(keys, bounds, out_int32=True))
    res["bucket_scalar"] = ints(torch.bucketize(3, bounds))
    hist = torch.bincount(torch.bucketize(keys, bounds), minlength=6)
    res["hist"] = ints(hist)
    res["histc"] = torch.histc(keys.float(), bins=6, min=-500, max=500)
    hv, he = torch.histogram(keys.double(), bins=5)
    res["histogram"], res["edges"] = hv, he
    res["kth"] = ints(torch.kthvalue(keys, 7).values)
    res["topk"] = ints(torch.topk(keys.view(4, 10), 3, dim=1).values)
    res["topk_i8"] = ints(torch.topk(keys.to(torch.int16), 4, largest=False).values)
    res["median"] = ints(keys.median())
    res["mode"] = ints(torch.tensor([3, 1, 3, 2, 1, 3]).mode().values)
    return res


def gray_modular_program(torch):
    """Gray codes and their inverse by prefix-xor, modular arithmetic on negatives in every
    rounding mode, small-dtype wraparound and Python-int promotion, iinfo, shifts beyond width."""
    n = torch.arange(-8, 24)
    g = n ^ (n >> 1)
    inv = g.clone()
    shift = 1
    while shift < 64:
        inv ^= inv >> shift
        shift *= 2
    res = {"gray": ints(g), "gray_inv_ok": bool(torch.equal(inv, n))}
    a = torch.tensor([-7, -6, -1, 0, 5, 7])
    b = torch.tensor([3, -4, 2, -3, -2, 7])
    res["rem"] = ints(torch.remainder(a, b))
    res["fmod"] = ints(torch.fmod(a, b))
    res["floordiv"] = ints(torch.floor_divide(a, b))
    res["op_floordiv"] = ints(a // b)
    res["op_mod"] = ints(a % b)
    res["op_mod_scalar"] = ints(a % -3)
    res["rmod"] = ints(-7 % b)
    res["rfloordiv"] = ints(7 // b)
    res["div_trunc"] = ints(torch.div(a, b, rounding_mode="trunc"))
    res["div_floor"] = ints(torch.div(a, b, rounding_mode="floor"))
    res["div_true"] = torch.div(a, b)
    res["truediv_dtype"] = [str((a / 2).dtype)[-7:]]
    i8 = torch.tensor([100, -100, 127, -128], dtype=torch.int8)
    res["i8_mul200"] = ints(i8 * 200)
    res["i8_add"] = ints(i8 + i8)
    res["i8_neg"] = ints(-i8)
    res["i8_abs"] = ints(i8.abs())
    res["i8_rem"] = ints(i8 % 7)
    res["i8_fd"] = ints(i8 // -3)
    res["i8_sum"] = ints(i8.sum())
    res["i8_sum_dtype"] = ints(i8.sum(dtype=torch.int8))
    res["i8_prod"] = ints(i8.prod())
    res["i8_mul_float"] = ints(i8 * 1.5)
    res["i8_u8"] = ints(i8 + torch.tensor([200], dtype=torch.uint8))
    u8 = torch.tensor([0, 1, 200, 255], dtype=torch.uint8)
    res["u8_sub"] = ints(u8 - 2)
    res["u8_neg"] = ints(-u8)
    res["u8_mul"] = ints(u8 * 3)
    res["u8_to_i8"] = ints(u8.to(torch.int8))
    res["u8_shift"] = ints(u8 << 1)
    res["u8_rshift"] = ints(u8 >> 3)
    res["i16"] = ints(torch.tensor([30000, -30000], dtype=torch.int16) * 2)
    res["i32"] = ints(torch.tensor([2**31 - 1], dtype=torch.int32) + 1)
    res["i64"] = ints(torch.tensor([2**63 - 1]) + 1)
    res["iinfo"] = [torch.iinfo(torch.int8).min, torch.iinfo(torch.uint8).max,
                    torch.iinfo(torch.int16).bits, torch.iinfo(torch.int32).max,
                    torch.iinfo(torch.int64).min, str(torch.iinfo(torch.int32).dtype)]
    res["finfo"] = [float(torch.finfo(torch.float16).eps), float(torch.finfo(torch.bfloat16).max)]
    x = torch.tensor([1, -1, 5], dtype=torch.int32)
    wide = torch.tensor([31, 32, 40], dtype=torch.int32)
    res["lshift_wide"] = ints(torch.bitwise_left_shift(x, wide))
    res["rshift_wide"] = ints(torch.bitwise_right_shift(x, wide))
    res["i8_lshift"] = ints(torch.tensor([1, -3], dtype=torch.int8) << 7)
    res["i8_rshift_wide"] = ints(torch.tensor([-128, 100], dtype=torch.int8) >> 9)
    res["rlshift"] = ints(1 << torch.arange(5))
    res["rrshift"] = ints(-1024 >> torch.arange(5))
    flags = torch.tensor([True, False, True])
    res["bool_sum"] = ints(flags.sum())
    res["bool_cumsum"] = ints(flags.cumsum(0))
    res["bool_plus1"] = ints(flags + 1)
    res["bool_xor"] = ints(flags ^ torch.tensor([True, True, False]))
    res["bool_mul_i8"] = ints(flags * torch.tensor([3, 4, 5], dtype=torch.int8))
    res["bool_and_int"] = ints(flags & 1)
    res["gcd"] = ints(torch.gcd(a, b))
    res["lcm"] = ints(torch.lcm(a, b))
    res["pow"] = ints(torch.tensor([3, -2, 7]) ** 3)
    res["pow_mod"] = ints(torch.tensor([3, 5, 7], dtype=torch.int64).pow(40))
    res["clamp"] = ints(i8.clamp(-50, 50))
    res["sign"] = ints(torch.sign(a))
    res["copysign"] = torch.copysign(a, b)
    return res


def float_bits_program(torch):
    """Float bit casts as numerics code does: IEEE fields through view(int32), a bfloat16
    round-to-nearest-even by integer arithmetic, fp16 bits through view(int16) and view(uint8)
    byte order, frombuffer of packed floats, and next-after by integer increment."""
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.standard_normal(12).astype(np.float32) * 100)
    x[0], x[1], x[2] = 0.0, -0.0, float("inf")
    b = x.view(torch.int32)
    res = {"bits": ints(b)}
    res["sign"] = ints((b >> 31) & 1)
    res["exp"] = ints(((b >> 23) & 0xFF) - 127)
    res["mant"] = ints(b & 0x7FFFFF)
    rounding = ((b >> 16) & 1) + 0x7FFF
    bf = ((b + rounding) >> 16).to(torch.int16)
    res["bf16_bits"] = ints(bf)
    res["bf16_ref"] = ints(x.to(torch.bfloat16).view(torch.int16))
    back = (bf.to(torch.int32) << 16).view(torch.float32)
    res["bf16_back"] = back
    res["u8"] = ints(x[:4].view(torch.uint8))
    res["u8_2d"] = ints(x.view(3, 4).view(torch.uint8).shape and x.view(3, 4).view(torch.uint8))
    h = x.half()
    res["h_bits"] = ints(h.view(torch.int16))
    res["h_u8"] = ints(h.view(torch.uint8))
    res["i16_from_u8"] = ints(h.view(torch.uint8).view(torch.int16))
    res["i64_of_f64"] = ints(x.double().view(torch.int64))
    res["f32_of_i64"] = x.view(2, 6).view(torch.int64).view(torch.float32)
    up = (b[3:] + 1).view(torch.float32)
    res["nextafter"] = bool(torch.equal(up, torch.nextafter(x[3:], torch.tensor(float("inf")))))
    buf = bytearray(np.arange(6, dtype=np.float32).tobytes())
    res["frombuffer"] = torch.frombuffer(buf, dtype=torch.float32, count=4, offset=4)
    res["fb_i32"] = ints(torch.frombuffer(buf, dtype=torch.int32))
    fb = torch.frombuffer(buf, dtype=torch.float32)
    fb[0] = 9.5
    res["shared"] = [bytes(buf[:4]).hex()]
    res["isnan_trick"] = ints(((b & 0x7FFFFFFF) > 0x7F800000))
    res["isinf"] = ints(((b & 0x7FFFFFFF) == 0x7F800000))
    return res


def rle_program(torch):
    """Run-length coding of a token stream (unique_consecutive with counts and inverse, decode
    by repeat_interleave), delta coding with diff/cumsum on ints, unique with sorted, dim."""
    rng = np.random.default_rng(5)
    s = torch.from_numpy(np.repeat(rng.integers(0, 4, size=12), rng.integers(1, 4, size=12)))
    vals, inv, cnt = torch.unique_consecutive(s, return_inverse=True, return_counts=True)
    res = {"vals": ints(vals), "inv": ints(inv), "cnt": ints(cnt)}
    res["decode_ok"] = bool(torch.equal(torch.repeat_interleave(vals, cnt), s))
    res["ends"] = ints(torch.cumsum(cnt, 0))
    u, ui, uc = torch.unique(s, sorted=True, return_inverse=True, return_counts=True)
    res["u"], res["ui"], res["uc"] = ints(u), ints(ui), ints(uc)
    m = s[: (s.numel() // 3) * 3].view(-1, 3)
    ur, ri, rc = torch.unique(m, dim=0, return_inverse=True, return_counts=True)
    res["urows"], res["ri"], res["rc"] = ints(ur), ints(ri), ints(rc)
    ucd = torch.unique_consecutive(m, dim=0, return_counts=True)
    res["ucd"], res["ucd_c"] = ints(ucd[0]), ints(ucd[1])
    d = torch.diff(s, prepend=s[:1])
    res["delta"] = ints(d)
    res["undelta"] = bool(torch.equal(s[0] + torch.cumsum(d, 0), s))
    zig = (d << 1) ^ (d >> 63)                               # protobuf zigzag
    res["zigzag"] = ints(zig)
    res["unzig"] = ints((zig >> 1) ^ -(zig & 1))
    # varint byte lengths
    powers = 2 ** torch.arange(64, dtype=torch.float64)
    nbits = 64 - torch.searchsorted(powers, zig.double() + 1, right=False)
    res["varint_len"] = ints(torch.clamp((nbits + 6) // 7, min=1))
    res["nonzero"] = ints(torch.nonzero(d))
    res["count_nonzero"] = ints(torch.count_nonzero(d))
    res["argmax_int"] = ints(cnt.argmax())
    res["max_dim"] = ints(m.max(dim=1).indices)
    return res


PROGRAMS = [gptq_pack_program, huffman_program, radix_sort_program, gray_modular_program,
            float_bits_program, rle_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
