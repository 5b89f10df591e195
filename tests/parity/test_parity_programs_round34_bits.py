"""Integer programs as hashing/sketching repositories write them in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy data: MurmurHash3 (fmix64, 32-bit body in
int64 with 0xFFFFFFFF masks), FNV-1a and xxHash32 over bytes, SimHash LSH (sign bits packed into
int64 codes, Hamming distance by a SWAR popcount), a Bloom filter (double hashing), a count-min
sketch (index_put_ accumulate, scatter_add_), CRC32 (table built with where/shift) and Vowpal-style
feature hashing into an EmbeddingBag trained for a few steps."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

M32 = 0xFFFFFFFF


def ints(t):
    """A tensor's dtype name, shape and values exactly (int64 is beyond float64's 2**53)."""
    return [str(t.dtype).split(".")[-1], str(tuple(t.shape)), *t.flatten().tolist()]


def _fmix64(torch, k):
    """MurmurHash3's 64-bit finaliser in int64 arithmetic (multiplication wraps; the logical
    shift is emulated by masking the sign-extended arithmetic shift)."""
    c1 = -49064778989728563     # 0xff51afd7ed558ccd as int64
    c2 = -4265267296055464877   # 0xc4ceb9fe1a85ec53 as int64
    k = k ^ ((k >> 33) & ((1 << 31) - 1))
    k = k * c1
    k = k ^ ((k >> 33) & ((1 << 31) - 1))
    k = k * c2
    k = k ^ ((k >> 33) & ((1 << 31) - 1))
    return k


def _rotl32(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def _murmur3_32(torch, keys, seed):
    """MurmurHash3_x86_32 of one 32-bit block per key, values kept in [0, 2**32) as int64."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    k = keys & M32
    k = (k * c1) & M32
    k = _rotl32(k, 15)
    k = (k * c2) & M32
    h = torch.full_like(keys, seed) ^ k
    h = _rotl32(h, 13)
    h = (h * 5 + 0xE6546B64) & M32
    h = h ^ 4
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & M32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def murmur_program(torch):
    rng = np.random.default_rng(0)
    keys = torch.from_numpy(rng.integers(-2**62, 2**62, size=12, dtype=np.int64))
    res = {"fmix": ints(_fmix64(torch, keys))}
    small = torch.arange(-6, 6)
    res["m32"] = ints(_murmur3_32(torch, small, 42))
    h = _murmur3_32(torch, small, 7)
    # signed view of the 32-bit hash as the repos do with .to(torch.int32)
    res["as_i32"] = ints(h.to(torch.int32))
    res["bucket"] = ints(torch.remainder(h.to(torch.int32), 10))
    res["bucket_fmod"] = ints(torch.fmod(h.to(torch.int32), 10))
    res["rshift_neg"] = ints(keys >> 61)
    res["rshift_t"] = ints(torch.bitwise_right_shift(keys, torch.arange(12)))
    res["lshift_t"] = ints(keys.__lshift__(torch.arange(60, 72)))
    res["xor_scalar"] = ints(torch.bitwise_xor(keys, -1))
    res["not"] = ints(~keys)
    res["inplace"] = ints(keys.clone().bitwise_xor_(small).bitwise_and_(0xFFFF).bitwise_or_(1))
    return res


def fnv_xxhash_program(torch):
    data = b"The quick brown fox jumps over the lazy dog" * 2
    buf = bytearray(data)
    byts = torch.frombuffer(buf, dtype=torch.uint8)
    words = byts.view(-1, 2).to(torch.int64)
    # FNV-1a 64 per row of 2 bytes and over the whole string (int64 wraparound multiply)
    prime, basis = 0x100000001B3, -3750763034362895579
    h = torch.full((words.shape[0],), basis, dtype=torch.int64)
    for i in range(words.shape[1]):
        h = (h ^ words[:, i]) * prime
    whole = torch.tensor(basis)
    for b in byts.tolist():
        whole = (whole ^ b) * prime
    res = {"fnv_rows": ints(h), "fnv_whole": ints(whole)}
    # xxHash32-style round over int32 lanes from frombuffer (little-endian)
    lanes = torch.frombuffer(buf, dtype=torch.int32, count=20, offset=4).to(torch.int64) & M32
    p1, p2 = 2654435761, 2246822519
    acc = torch.tensor([p1 + p2, p2, 0, -p1 & M32], dtype=torch.int64)
    for blk in lanes.view(-1, 4):
        acc = (acc + blk * p2) & M32
        acc = _rotl32(acc, 13)
        acc = (acc * p1) & M32
    res["xx_acc"] = ints(acc)
    shifts = torch.tensor([1, 7, 12, 18])
    res["xx_merge"] = ints((((acc << shifts) | (acc >> (32 - shifts))) & M32).sum())
    res["buf_u8"] = ints(byts[:8])
    res["buf_i16"] = ints(torch.frombuffer(buf, dtype=torch.int16, count=6))
    return res


def _popcount64(x):
    """SWAR popcount on int64 (the arithmetic shift's sign bits are masked away)."""
    x = x - ((x >> 1) & 0x5555555555555555)
    x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
    return (x * 0x0101010101010101) >> 56 & 0xFF


def simhash_lsh_program(torch):
    rng = np.random.default_rng(1)
    nbits = 62
    x = torch.from_numpy(rng.standard_normal((10, 8)).astype(np.float32))
    planes = torch.from_numpy(rng.standard_normal((8, nbits)).astype(np.float32))
    bits = (x @ planes > 0)
    weights = 2 ** torch.arange(nbits, dtype=torch.int64)
    codes = (bits.long() * weights).sum(-1)
    codes_shift = (bits.to(torch.int64) << torch.arange(nbits)).sum(dim=1)
    res = {"codes": ints(codes), "same": torch.equal(codes, codes_shift)}
    xor = codes[:, None] ^ codes[None, :]
    ham = _popcount64(xor)
    res["ham"] = ints(ham)
    ref = (bits[:, None, :] != bits[None, :, :]).sum(-1)
    res["ham_ok"] = bool((ham == ref).all())
    # nearest neighbours by Hamming distance: topk on ints (smallest), excluding self
    ham = ham + torch.eye(10, dtype=torch.int64) * 1000
    vals, idx = torch.topk(ham, 3, dim=1, largest=False, sorted=True)
    res["nn_vals"] = ints(vals)
    # ties in ints: only the values are specified; check distances of the picked indices
    res["nn_check"] = ints(ham.gather(1, idx))
    # banding: split codes into 4 bands of 8 bits, bucket by band hash
    bands = torch.stack([(codes >> (8 * b)) & 0xFF for b in range(4)], 1)
    uniq, inv, cnt = torch.unique(bands[:, 0], return_inverse=True, return_counts=True)
    res["bands"] = ints(bands)
    res["band_uniq"], res["band_inv"], res["band_cnt"] = ints(uniq), ints(inv), ints(cnt)
    packed = torch.zeros(10, 8, dtype=torch.uint8)
    bits8 = bits[:, :56].reshape(10, 7, 8).to(torch.uint8)
    packed[:, :7] = (bits8 << torch.arange(8, dtype=torch.uint8)).sum(-1, dtype=torch.uint8)
    res["packed_u8"] = ints(packed)
    res["popcnt_u8"] = ints(sum(((packed >> i) & 1) for i in range(8)))
    return res


def bloom_filter_program(torch):
    m, k = 97, 4
    inserted = torch.tensor([3, 17, 101, -5, 2**40 + 7, 65536, -2**33])
    queries = torch.cat([inserted, torch.tensor([4, 18, 102, -6, 12345, 77])])
    h1 = _fmix64(torch, queries)
    h2 = _fmix64(torch, queries ^ 0x5BD1E995) | 1
    i = torch.arange(k)
    idx = torch.remainder(h1[:, None] + i * h2[:, None], m)
    bits = torch.zeros(m, dtype=torch.bool)
    n = inserted.numel()
    bits[idx[:n].flatten()] = True
    bits2 = torch.zeros(m, dtype=torch.bool).index_fill_(0, idx[:n].flatten(), True)
    res = {"idx": ints(idx), "bits": ints(bits), "same": torch.equal(bits, bits2)}
    present = bits[idx].all(dim=1)
    res["present"] = ints(present)
    res["fill"] = ints(bits.sum())
    res["fill_dtype"] = [str(bits.sum().dtype)[-5:]]
    # counting Bloom filter with uint8 counters (scatter_add_ then deletion)
    counters = torch.zeros(m, dtype=torch.uint8)
    counters.scatter_add_(0, idx[:n].flatten(), torch.ones(n * k, dtype=torch.uint8))
    counters.index_put_((idx[1],), torch.tensor(1, dtype=torch.uint8), accumulate=False)
    counters[idx[0]] -= 1
    res["counters"] = ints(counters)
    res["bool_arith"] = ints(present.sum() + present.int() * 2)
    res["bool_add"] = ints(present + present)
    res["bool_mul"] = ints(present * True)
    res["bool_neg_xor"] = ints(present ^ True)
    return res


def count_min_program(torch):
    rng = np.random.default_rng(2)
    stream = torch.from_numpy(rng.zipf(1.5, size=300).astype(np.int64) % 50)
    depth, width = 4, 16
    seeds = torch.tensor([0x9E3779B9, 0x85EBCA6B, 0xC2B2AE35, 0x27D4EB2F])
    hashes = torch.stack([_murmur3_32(torch, stream, int(s)) for s in seeds])
    cols = hashes % width
    table = torch.zeros(depth, width, dtype=torch.int32)
    rows = torch.arange(depth)[:, None].expand_as(cols)
    table.index_put_((rows, cols), torch.ones_like(cols, dtype=torch.int32), accumulate=True)
    table2 = torch.zeros(depth, width, dtype=torch.int64).scatter_add_(1, cols,
                                                                         torch.ones_like(cols))
    res = {"table": ints(table), "table_same": bool((table2 == table).all())}
    items = torch.arange(50)
    qh = torch.stack([_murmur3_32(torch, items, int(s)) for s in seeds]) % width
    est = table.gather(1, qh).min(dim=0).values
    true = torch.bincount(stream, minlength=50)
    res["est"], res["true"] = ints(est), ints(true)
    res["over"] = bool((est >= true).all())
    top_v, top_i = torch.topk(true, 5)
    res["top_v"] = ints(top_v)
    res["top_i_counts"] = ints(true[top_i])
    # conservative update and sketch merge, flattened-index scatter
    flat = torch.zeros(depth * width, dtype=torch.int64)
    ones = torch.ones(cols.numel(), dtype=torch.int64)
    flat.scatter_add_(0, (cols + rows * width).flatten(), ones)
    res["flat"] = ints(flat.view(depth, width))
    res["merge"] = ints(torch.maximum(table, table.flip(1)))
    res["mean_err"] = (est - true).float().mean()
    return res


def crc32_program(torch):
    c = torch.arange(256, dtype=torch.int64)
    for _ in range(8):
        c = torch.where(c & 1 == 1, 0xEDB88320 ^ (c >> 1), c >> 1)
    table = c
    msg = bytearray(b"123456789hello, world")
    data = torch.frombuffer(msg, dtype=torch.uint8)
    crc = torch.tensor(M32)
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc = crc ^ M32
    res = {"table": ints(table[:32]), "crc": ints(crc)}
    # batched CRC over several messages of equal length at once
    msgs = data[:18].view(3, 6).long()
    crcs = torch.full((3,), M32, dtype=torch.int64)
    for j in range(6):
        crcs = table[(crcs ^ msgs[:, j]) & 0xFF] ^ (crcs >> 8)
    res["batch"] = ints(crcs ^ M32)
    res["as_u8"] = ints((crcs ^ M32).to(torch.int32).view(torch.uint8))
    res["as_i16"] = ints((crcs ^ M32).to(torch.int32).view(torch.int16))
    return res


def feature_hashing_program(torch):
    """Vowpal-Wabbit-style hashing trick: token ids hashed into 2**6 buckets with a sign hash,
    EmbeddingBag(mode='sum') over offsets with per-sample weights, a few SGD steps."""
    rng = np.random.default_rng(3)
    nn = torch.nn
    nb = 64
    docs = [rng.integers(0, 10**6, size=n) for n in (5, 3, 7, 1, 4)]
    tok = torch.from_numpy(np.concatenate(docs).astype(np.int64))
    offsets = torch.tensor([0, *np.cumsum([len(d) for d in docs])[:-1].tolist()])
    h = _fmix64(torch, tok)
    bucket = torch.remainder(h, nb)
    sign = 1 - 2 * ((h >> 63) & 1)
    counts = torch.bincount(bucket, minlength=nb)
    bag = nn.EmbeddingBag(nb, 4, mode="sum")
    head = nn.Linear(4, 1)
    fill_(torch, list(bag.parameters()) + list(head.parameters()), rng)
    opt = torch.optim.SGD(list(bag.parameters()) + list(head.parameters()), lr=0.1)
    y = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0])
    losses = []
    for _ in range(3):
        opt.zero_grad()
        z = head(bag(bucket, offsets, per_sample_weights=sign.float())).squeeze(1)
        loss = nn.functional.binary_cross_entropy_with_logits(z, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res = {"bucket": ints(bucket), "sign": ints(sign), "counts": ints(counts), "losses": losses,
           "grad": bag.weight.grad.clone(), "w": bag.weight.detach().clone()}
    bag2 = nn.EmbeddingBag.from_pretrained(bag.weight.detach(), mode="max")
    res["max"] = bag2(bucket, offsets)
    res["mean2d"] = nn.functional.embedding_bag(bucket[:12].view(3, 4), bag.weight.detach(),
                                                 mode="mean")
    return res


P64_1, P64_2, P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P64_4, P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _xxh64_ref(key, seed):
    """XXH64 of one 8-byte little-endian key in Python ints (mod 2**64), for the check."""
    m = (1 << 64) - 1

    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & m
    k = key & m
    k1 = rotl((k * P64_2) & m, 31) * P64_1 & m
    h = (seed + P64_5 + 8) & m
    h ^= k1
    h = (rotl(h, 27) * P64_1 + P64_4) & m
    h ^= h >> 33
    h = h * P64_2 & m
    h ^= h >> 29
    h = h * P64_3 & m
    h ^= h >> 32
    return h - (1 << 64) if h >> 63 else h


def xxhash64_program(torch):
    """XXH64 of 8-byte keys and splitmix64 written with the unsigned 64-bit constants as they
    appear in the C sources (PyTorch wraps a number in [2**63, 2**64) into int64) and in-place
    updates (``h *= PRIME64_2``), checked against a Python-int reference."""
    def rotl(x, r):
        return (x << r) | ((x >> (64 - r)) & ((1 << r) - 1))

    def lsr(x, r):
        return (x >> r) & ((1 << (64 - r)) - 1)

    raw = bytearray(np.random.default_rng(7).bytes(64))
    keys = torch.frombuffer(raw, dtype=torch.int64)
    seed = 0
    k1 = rotl(keys * P64_2, 31)
    k1 *= P64_1
    h = torch.full_like(keys, seed + P64_5 + 8)
    h ^= k1
    h = rotl(h, 27) * P64_1 + P64_4
    h ^= lsr(h, 33)
    h *= P64_2
    h ^= lsr(h, 29)
    h = h * P64_3
    h = h ^ lsr(h, 32)
    res = {"xxh64": ints(h), "ok": h.tolist() == [_xxh64_ref(k, seed) for k in keys.tolist()]}
    # splitmix64 stream: state += golden gamma (an unsigned constant), then the mixer
    state = torch.tensor([0, 1, 2**40])
    outs = []
    for _ in range(4):
        state += 0x9E3779B97F4A7C15
        z = state.clone()
        z = (z ^ lsr(z, 30)) * 0xBF58476D1CE4E5B9
        z = (z ^ lsr(z, 27)) * 0x94D049BB133111EB
        outs.append(z ^ lsr(z, 31))
    res["splitmix"] = ints(torch.stack(outs))
    res["mask_u64"] = ints(keys & 0xFFFFFFFFFFFFFFFF)
    res["xor_u64"] = ints(0xFFFFFFFFFFFFFFFF ^ keys[:3])
    res["bucket"] = ints(torch.remainder(lsr(h, 1), 1000))
    return res


PROGRAMS = [murmur_program, fnv_xxhash_program, simhash_lsh_program, bloom_filter_program,
            count_min_program, crc32_program, feature_hashing_program, xxhash64_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
