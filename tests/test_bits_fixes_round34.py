"""Round 34 integer/bit-manipulation fixes: storages copied out of a buffer in a given byte
order (``IntStorage.from_buffer(b, "big")``, ``UntypedStorage.from_buffer(..., dtype=)``,
``TypedStorage.from_buffer``), and embedding_bag's out-of-range wording off the fast kernel."""

import struct

import numpy as np
import pytest

import ember
import ember.nn.functional as F

BE = struct.pack(">3i", 1, -2, 70000)


def test_legacy_storage_from_buffer_decodes_each_byte_order():
    assert ember.IntStorage.from_buffer(BE, "big").tolist() == [1, -2, 70000]
    assert ember.IntStorage.from_buffer(struct.pack("<3i", 1, -2, 70000), "little").tolist() \
        == [1, -2, 70000]
    native = np.array([5, -6], dtype=np.int16)
    assert ember.ShortStorage.from_buffer(native, "native").tolist() == [5, -6]
    assert ember.ShortStorage.from_buffer(native, "big").tolist() == [1280, -1281]
    assert ember.FloatStorage.from_buffer(struct.pack(">f", 1.5), "big").tolist() == [1.5]
    assert ember.BFloat16Storage.from_buffer(b"\x3f\x80", "big").tolist() == [1.0]
    # complex: each component swapped on its own
    assert ember.ComplexFloatStorage.from_buffer(struct.pack(">2f", 1.0, 2.0), "big") \
        .tolist() == [1 + 2j]
    assert ember.BoolStorage.from_buffer(b"\x00\x02\x01", "little").tolist() == [False, True,
                                                                                 True]
    s = ember.LongStorage.from_buffer(b"\x00" * 7 + b"\x01", "big")
    assert isinstance(s, ember.LongStorage) and s.dtype is ember.int64 and s.size() == 1


def test_from_buffer_count_offset_and_copy():
    s = ember.IntStorage.from_buffer(BE, "big", count=1, offset=4)
    assert s.tolist() == [-2] and s.nbytes() == 4
    assert ember.IntStorage.from_buffer(BE, "big", offset=12).tolist() == []
    buf = bytearray(b"\x01\x02\x03")
    bs = ember.ByteStorage.from_buffer(buf, "ignored for bytes", count=2, offset=1)
    buf[1] = 99                                           # a copy, not a view
    assert bs.tolist() == [2, 3]
    assert ember.CharStorage.from_buffer(b"\xff\x01").tolist() == [-1, 1]
    t = ember.empty(0, dtype=ember.int32).set_(ember.IntStorage.from_buffer(BE, "big"))
    assert t.tolist() == [1, -2, 70000]


def test_untyped_and_typed_from_buffer():
    u = ember.UntypedStorage.from_buffer(struct.pack(">2i", 1, 2), "big", dtype=ember.int32)
    assert isinstance(u, ember.UntypedStorage)
    assert u.tolist() == list(struct.pack("=2i", 1, 2))   # stored natively
    assert ember.UntypedStorage.from_buffer(b"\x05\x06", dtype=ember.uint8).tolist() == [5, 6]
    t = ember.TypedStorage.from_buffer(struct.pack("<2h", 7, -8), "little", dtype=ember.int16)
    assert t.dtype is ember.int16 and t.tolist() == [7, -8]
    assert ember.TypedStorage.from_buffer(struct.pack("<f", 2.5), "little").dtype \
        is ember.get_default_dtype()


@pytest.mark.parametrize("call, error, match", [
    (lambda: ember.IntStorage.from_buffer(BE), RuntimeError,
     r"missing required argument 'byte_order' \(pos 2\)"),
    (lambda: ember.IntStorage.from_buffer(BE, "middle"), ValueError,
     r"invalid byte_order 'middle' \(expected 'big', 'little', or 'native'\)"),
    (lambda: ember.IntStorage.from_buffer(BE[:10], "big"), ValueError,
     r"buffer size \(10\) must be a multiple of element size \(4\)"),
    (lambda: ember.IntStorage.from_buffer(BE, "big", count=4), ValueError,
     r"buffer has only 12 elements after offset 0, but specified a size of 4"),
    (lambda: ember.IntStorage.from_buffer(BE, "big", offset=13), ValueError,
     r"no greater than buffer length \(12\) , but got 13"),
    (lambda: ember.IntStorage.from_buffer(BE, "big", dtype=ember.int16), RuntimeError,
     r"'dtype' can only be specified in UntypedStorage.from_buffer"),
    (lambda: ember.UntypedStorage.from_buffer(BE, "big"), RuntimeError,
     "argument 'dtype' cannot be None"),
    (lambda: ember.UntypedStorage.from_buffer("abc", "big", dtype=ember.int32), TypeError,
     "a bytes-like object is required, not 'str'"),
    (lambda: ember.TypedStorage.from_buffer(BE, "big", dtype=ember.int32, device="meta"),
     RuntimeError, "TypedStorage.from_buffer: Not available for device meta"),
])
def test_from_buffer_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_embedding_bag_range_error_off_the_fast_kernel():
    idx, off = ember.tensor([1, 2, 4, 12]), ember.tensor([0, 2])
    msg = "^embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be 12$"
    with pytest.raises(RuntimeError, match=msg):          # float64 rows
        F.embedding_bag(idx, ember.zeros(10, 3, dtype=ember.float64), off, mode="sum")
    with pytest.raises(RuntimeError, match=msg):          # a padding index
        F.embedding_bag(idx, ember.zeros(10, 3), off, mode="mean", padding_idx=1)
    with pytest.raises(RuntimeError, match="^Index 2 of input takes value 12 which is not"):
        F.embedding_bag(ember.tensor([1, 2, 12]), ember.zeros(10, 3), ember.tensor([0]))


def test_uint64_numbers_wrap_beside_int64():
    # PyTorch's Scalar holds 2**63 .. 2**64-1 as uint64: hashing constants wrap into int64
    x = ember.tensor([1, 2, -3])
    golden = 0x9E3779B97F4A7C15
    assert (x * golden).tolist() == [(v * golden + 2**63) % 2**64 - 2**63 for v in (1, 2, -3)]
    assert (golden * x).tolist() == (x * golden).tolist()
    assert (x ^ 0xFFFFFFFFFFFFFFFF).tolist() == [-2, -3, 2]
    assert (x + 2**63).tolist() == [-2**63 + 1, -2**63 + 2, 2**63 - 3]
    assert ember.add(x, 2**63).tolist() == (x + 2**63).tolist()
    assert (2**63 - x).tolist() == [2**63 - 1, 2**63 - 2, -2**63 + 3]
    y = x.clone()
    y *= golden                                            # in place too
    assert y.tolist() == (x * golden).tolist()
    assert x.clone().bitwise_and_(0xFFFFFFFFFFFFFFFF).tolist() == [1, 2, -3]
    # bounds, fill values and exponents must fit, as PyTorch checks them
    for call in (lambda: x.clamp(max=2**63), lambda: x ** (2**63),
                 lambda: ember.where(x > 0, x, 2**63)):
        with pytest.raises(RuntimeError, match="to type int64_t without overflow"):
            call()
    with pytest.raises(OverflowError):                     # beyond uint64: no Scalar holds it
        x + 2**64
    assert (ember.tensor([1.0]) * 2**63).tolist() == [2.0**63]     # floats are not wrapped
