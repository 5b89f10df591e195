"""Integer programs reading binary formats and streams, run once with `torch` bound to ember and
once to PyTorch from the same bytes: torchvision's IDX (MNIST) reader (frombuffer at an offset,
byte-order flip through view(uint8)) beside big-endian storages (IntStorage.from_buffer) and a
torch.save/torch.load round trip of small integer dtypes, HyperLogLog (frexp for the leading
zero count, scatter_reduce amax registers), MinHash over character shingles (unfold on ints,
(a*x+b) mod p in int64), vectorised xorshift64*/PCG32 generators, and gemmlowp-style int8
inference with fixed-point requantisation."""

import io
import struct
import sys

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def ints(t):
    """A tensor's dtype name, shape and values exactly (int64 is beyond float64's 2**53)."""
    return [str(t.dtype).split(".")[-1], str(tuple(t.shape)), *t.flatten().tolist()]


_TYPEMAP = {8: "uint8", 9: "int8", 11: "int16", 12: "int32", 13: "float32", 14: "float64"}


def _idx_bytes(code, shape, values):
    """An IDX file: magic (0, 0, type code, ndim), big-endian dims, big-endian payload."""
    fmt = {8: "B", 9: "b", 11: "h", 12: "i", 13: "f", 14: "d"}[code]
    head = struct.pack(">BBBB", 0, 0, code, len(shape)) + struct.pack(f">{len(shape)}I", *shape)
    return head + struct.pack(f">{len(values)}{fmt}", *values)


def idx_format_program(torch):
    """torchvision.datasets.mnist.read_sn3_pascalvincent_tensor and _flip_byte_order."""
    def get_int(b):
        return int(b.hex(), 16)

    def flip_byte_order(t):
        return (t.contiguous().view(torch.uint8).view(*t.shape, t.element_size()).flip(-1)
                .view(*t.shape[:-1], -1).view(t.dtype))

    def read(data):
        magic = get_int(data[0:4])
        nd, ty = magic % 256, magic // 256
        dtype = getattr(torch, _TYPEMAP[ty])
        s = [get_int(data[4 * (i + 1): 4 * (i + 2)]) for i in range(nd)]
        parsed = torch.frombuffer(bytearray(data), dtype=dtype, offset=4 * (nd + 1))
        if sys.byteorder == "little" and parsed.element_size() > 1:
            parsed = flip_byte_order(parsed)
        assert parsed.shape[0] == int(np.prod(s))
        return parsed.view(*s)

    rng = np.random.default_rng(0)
    res = {}
    files = {8: rng.integers(0, 256, 24).tolist(), 9: rng.integers(-128, 128, 24).tolist(),
             11: rng.integers(-2**15, 2**15, 24).tolist(),
             12: rng.integers(-2**31, 2**31, 24).tolist(),
             13: rng.standard_normal(24).astype(np.float32).tolist(),
             14: rng.standard_normal(24).tolist()}
    for code, vals in files.items():
        data = _idx_bytes(code, (2, 3, 4), vals)
        t = read(data)
        res[f"idx{code}"] = ints(t) if code < 13 else t
        if code in (11, 12, 14):
            legacy = {11: torch.ShortStorage, 12: torch.IntStorage, 14: torch.DoubleStorage}[code]
            st = legacy.from_buffer(data, "big", offset=16)
            back = torch.empty(0, dtype=t.dtype).set_(st).view(2, 3, 4)
            res[f"storage{code}"] = bool(torch.equal(back, t))
            un = torch.UntypedStorage.from_buffer(data, "big", count=4, offset=16, dtype=t.dtype)
            res[f"untyped{code}"] = ints(torch.empty(0, dtype=torch.uint8).set_(un))
    # labels as a one-hot target and a save/load round trip of small integer dtypes
    labels = read(_idx_bytes(8, (10,), [3, 1, 4, 1, 5, 9, 2, 6, 5, 3])).long()
    res["onehot"] = ints(torch.nn.functional.one_hot(labels, 10).sum(0))
    buf = io.BytesIO()
    state = {"u8": read(_idx_bytes(8, (4,), [0, 1, 255, 7])), "flags": labels > 4,
             "i16": read(_idx_bytes(11, (3,), [-1, 2, -300])), "lab": labels}
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    res["loaded"] = [k + ":" + str(ints(v)) for k, v in loaded.items()]
    res["shared_view"] = bool(loaded["lab"].untyped_storage().nbytes() == 80)
    return res


def hyperloglog_program(torch):
    """HyperLogLog with 2**6 registers over a 64-bit mixer: bucket from the low bits, rank as
    the leading-zero count of the rest (frexp of the value as float64), registers by
    scatter_reduce(amax), the bias-corrected harmonic-mean estimate and linear counting."""
    p, m = 6, 64
    items = torch.arange(1000, dtype=torch.int64) * 7919 + 13
    x = items
    x = (x ^ ((x >> 30) & ((1 << 34) - 1))) * -4658895280553007687
    x = (x ^ ((x >> 27) & ((1 << 37) - 1))) * -7723592293110705685
    x = x ^ ((x >> 31) & ((1 << 33) - 1))
    bucket = x & (m - 1)
    rest = (x >> p) & ((1 << (64 - p - 1)) - 1)          # 57 non-negative bits
    _, e = torch.frexp(rest.double())
    rank = (64 - p) - e.long()
    regs = torch.zeros(m, dtype=torch.int64).scatter_reduce(0, bucket, rank, reduce="amax")
    regs_i8 = torch.zeros(m, dtype=torch.int8).scatter_reduce(
        0, bucket, rank.to(torch.int8), reduce="amax", include_self=False)
    res = {"regs": ints(regs), "regs_i8": ints(regs_i8), "exp": ints(e[:16])}
    alpha = 0.7213 / (1 + 1.079 / m)
    est = alpha * m * m / torch.sum(2.0 ** -regs.double())
    zeros = (regs == 0).sum()
    res["est"] = est
    res["zeros"] = ints(zeros)
    res["lc"] = m * torch.log(torch.tensor(m / max(int(zeros), 1), dtype=torch.float64))
    res["pow_int"] = ints(2 ** regs[:8])
    res["pow_neg_float"] = 2.0 ** -regs[:8]
    res["bitlen"] = ints(torch.ceil(torch.log2(rest[:8].double() + 1)).long())
    return res


def minhash_program(torch):
    """MinHash signatures of character 3-shingles (unfold over byte codes, base-256 packing,
    unique), universal hashing (a*x + b) mod (2**31 - 1) in int64, Jaccard estimates."""
    docs = ["the cat sat on the mat", "the cat sat on a mat", "a dog ran in the park"]
    prime = (1 << 31) - 1
    rng = np.random.default_rng(2)
    a = torch.from_numpy(rng.integers(1, prime, size=16))
    b = torch.from_numpy(rng.integers(0, prime, size=16))
    sigs, sets = [], []
    for d in docs:
        codes = torch.frombuffer(bytearray(d.encode()), dtype=torch.uint8).long()
        sh = codes.unfold(0, 3, 1)
        packed = (sh * torch.tensor([65536, 256, 1])).sum(1)
        packed = torch.unique(packed)
        sets.append(packed)
        hv = torch.remainder(a[:, None] * packed[None, :] + b[:, None], prime)
        sigs.append(hv.min(dim=1).values)
    sig = torch.stack(sigs)
    res = {"sig": ints(sig), "n_shingles": [int(s.numel()) for s in sets]}
    est = (sig[:, None, :] == sig[None, :, :]).float().mean(-1)
    res["est"] = est
    inter = torch.isin(sets[0], sets[1]).sum()
    union = torch.unique(torch.cat([sets[0], sets[1]])).numel()
    res["jaccard01"] = [int(inter), int(union)]
    # segment minimum over a flattened batch, as the batched implementations do
    flat = torch.cat(sets)
    seg = torch.repeat_interleave(torch.arange(3), torch.tensor([s.numel() for s in sets]))
    hv = torch.remainder(a[0] * flat + b[0], prime)
    mins = torch.full((3,), torch.iinfo(torch.int64).max).scatter_reduce(0, seg, hv, "amin")
    res["seg_min"] = ints(mins)
    res["seg_ok"] = bool(torch.equal(mins, sig[:, 0]))
    # b-bit minhash: keep the lowest 2 bits, pack 16 of them into one int32
    low = (sig & 3).to(torch.int32)
    res["bbit"] = ints((low << (2 * torch.arange(16, dtype=torch.int32))).sum(1,
                                                                          dtype=torch.int32))
    return res


def prng_program(torch):
    """Vectorised xorshift64* and PCG32 streams in int64 tensors: logical shifts emulated by
    masks, multiplication wrapping, 32-bit rotations, floats from the top 24 bits, Bernoulli
    dropout masks and a Fisher-Yates shuffle driven by them."""
    state = torch.tensor([1, 2, 3, 0x9E3779B97F4A7C15 - 2**64], dtype=torch.int64)

    def lsr(x, k):
        return (x >> k) & ((1 << (64 - k)) - 1)

    outs = []
    for _ in range(6):
        state = state ^ lsr(state, 12)
        state = state ^ (state << 25)
        state = state ^ lsr(state, 27)
        outs.append(state * 0x2545F4914F6CDD1D)
    out = torch.stack(outs)
    res = {"xorshift": ints(out)}
    u = lsr(out, 40).float() * 2.0 ** -24
    res["uniform"] = u
    res["dropout"] = ints((u < 0.5).to(torch.uint8))
    # PCG32 (XSH RR) in int64 arithmetic with a 64-bit LCG state
    mult, inc = 6364136223846793005, 1442695040888963407
    st = torch.tensor([42, 54, 7], dtype=torch.int64)
    words = []
    for _ in range(5):
        old = st
        st = old * mult + inc
        xorshifted = (lsr(old, 18) ^ old)
        xorshifted = lsr(xorshifted, 27) & 0xFFFFFFFF
        rot = lsr(old, 59)
        word = ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & 0xFFFFFFFF
        words.append(word)
    w = torch.stack(words)
    res["pcg"] = ints(w)
    res["pcg_i32"] = ints(w.to(torch.int32))
    res["pcg_mod"] = ints(w % 10)
    # Fisher-Yates with bounded ints from the stream (Lemire's multiply-shift)
    perm = torch.arange(8)
    bounds = torch.arange(8, 1, -1)
    picks = (w.flatten()[:7] * bounds) >> 32
    for i, j in enumerate(picks.tolist()):
        k = 7 - i
        perm[[k, j]] = perm[[j, k]]
    res["perm"] = ints(perm)
    return res


def gemmlowp_program(torch):
    """int8 inference as gemmlowp/TFLite do: uint8 activations with zero points, int32
    accumulation, requantisation by a Q31 multiplier (saturating rounding doubling high mul)
    and a rounding right shift, saturation to int8, then argmax."""
    rng = np.random.default_rng(3)
    x_f = rng.standard_normal((4, 16)).astype(np.float32)
    w_f = rng.standard_normal((16, 8)).astype(np.float32) * 0.2
    x_scale, x_zp = float(np.abs(x_f).max() / 127), 128
    w_scale = float(np.abs(w_f).max() / 127)
    x_q = torch.from_numpy(np.clip(np.round(x_f / x_scale) + x_zp, 0, 255).astype(np.uint8))
    w_q = torch.from_numpy(np.clip(np.round(w_f / w_scale), -127, 127).astype(np.int8))
    acc = (x_q.to(torch.int32) - x_zp) @ w_q.to(torch.int32)
    res = {"acc": ints(acc), "acc_dtype": [str(acc.dtype)[-5:]]}
    out_scale = 0.05
    real_mult = x_scale * w_scale / out_scale
    shift = 0
    while real_mult < 0.5:
        real_mult *= 2
        shift += 1
    q31 = int(round(real_mult * (1 << 31)))
    ab = acc.to(torch.int64) * q31
    nudge = torch.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = torch.div(ab + nudge, 1 << 31, rounding_mode="trunc")
    mask = (1 << shift) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (high < 0).long()
    scaled = (high >> shift) + (remainder > threshold).long()
    out = scaled.clamp(-128, 127).to(torch.int8)
    res["high"], res["out"] = ints(high), ints(out)
    res["argmax"] = ints(out.argmax(1))
    res["deq"] = out.float() * out_scale
    res["ref"] = torch.from_numpy(x_f) @ torch.from_numpy(w_f)
    res["rowsum"] = ints(x_q.sum(1, dtype=torch.int32))
    res["colsum"] = ints(w_q.to(torch.int16).sum(0))
    res["u8_minus_zp_wrap"] = ints(x_q[0, :6] - torch.tensor(128, dtype=torch.uint8))
    return res


PROGRAMS = [idx_format_program, hyperloglog_program, minhash_program, prng_program,
            gemmlowp_program]

# the float reference matmul and the dequantised output are plain float32 sums
TOLERANCES = {"gemmlowp_program": (1e-5, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
