"""uint16, uint32 and uint64: PyTorch's storage-first unsigned types (creation, conversion,
arithmetic among themselves, checkpoints), which refuse to promote with other integers."""

import io

import numpy as np
import pytest

import ember
from ember.utils.safetensors import load, save

WIDE = [ember.uint16, ember.uint32, ember.uint64]


@pytest.mark.parametrize("dtype", WIDE, ids=str)
def test_dtype_properties_and_limits(dtype):
    bits = dtype.itemsize * 8
    assert not dtype.is_signed and not dtype.is_floating_point
    assert ember.iinfo(dtype).max == 2 ** bits - 1 and ember.iinfo(dtype).min == 0
    assert ember.tensor([1, 2], dtype=dtype).numpy().dtype == np.dtype(f"uint{bits}")
    assert ember.from_numpy(np.array([7], dtype=f"uint{bits}")).dtype is dtype
    assert ember.tensor(np.array(3, dtype=f"uint{bits}")).dtype is dtype


def test_promotion_with_other_integers_is_refused():
    u = ember.tensor([1, 2, 3], dtype=ember.uint16)
    for other in (ember.ones(3, dtype=ember.bool), ember.ones(3, dtype=ember.uint8),
                  ember.ones(3, dtype=ember.int64), ember.ones(3, dtype=ember.uint32)):
        with pytest.raises(RuntimeError, match=r"^Promotion for uint16, uint32, uint64 types "
                                               r"is not supported, attempted to promote UInt16"):
            u * other
    with pytest.raises(RuntimeError, match="attempted to promote UInt32 and Int"):
        ember.promote_types(ember.uint32, ember.int32)
    assert ember.promote_types(ember.uint32, ember.float32) is ember.float32
    assert (u * u).dtype is ember.uint16 and (u * 2).dtype is ember.uint16
    assert (u * ember.tensor(2)).dtype is ember.uint16          # a 0-dim tensor is weak
    assert (u * 2.5).tolist() == [2.5, 5.0, 7.5] and (u / 2).dtype is ember.float32
    assert ember.where(u == 2, u, u).dtype is ember.uint16      # the condition does not count


def test_python_ints_wrap_as_in_a_c_cast():
    u = ember.tensor([1, 2, 3], dtype=ember.uint16)
    assert (u * -1).tolist() == [65535, 65534, 65533]
    assert (u * 70000).tolist() == [4464, 8928, 13392]
    assert ember.tensor([-1], dtype=ember.uint32).item() == 2 ** 32 - 1
    assert ember.zeros(2, dtype=ember.uint16).fill_(-1).tolist() == [65535, 65535]


def test_uint64_holds_its_whole_range():
    big = ember.tensor([2 ** 64 - 1, 5], dtype=ember.uint64)
    assert big.tolist() == [2 ** 64 - 1, 5] and big[0].item() == 2 ** 64 - 1
    assert repr(big) == "tensor([18446744073709551615,                    5], dtype=ember.uint64)"
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        big[1] = 2 ** 63                # PyTorch reads assigned ints as int64
    with pytest.raises(OverflowError, match="can't convert negative int to unsigned"):
        ember.tensor([-1], dtype=ember.uint64)
    with pytest.raises(OverflowError, match="int too big to convert"):
        ember.tensor([2 ** 64], dtype=ember.uint64)


@pytest.mark.parametrize("dtype, fits, overflows", [
    (ember.uint8, [-255, 255], [256, -256]),
    (ember.int8, [-128, 127], [128, -129]),
    (ember.uint16, [-65535, 65535], [65536]),
    (ember.int32, [-2 ** 31, 2 ** 31 - 1], [2 ** 31]),
], ids=str)
def test_tensor_checks_that_ints_fit_the_dtype(dtype, fits, overflows):
    bits = dtype.itemsize * 8
    assert ember.tensor(fits, dtype=dtype).tolist() == [
        v % 2 ** bits if not dtype.is_signed else v for v in fits]
    for value in overflows:
        with pytest.raises(RuntimeError, match=f"value cannot be converted to type "
                                               f"{dtype.name} without overflow"):
            ember.tensor([value], dtype=dtype)


@pytest.mark.parametrize("dtype", WIDE, ids=str)
def test_checkpoints_and_safetensors_keep_them(dtype):
    t = ember.tensor([[0, 1], [2, ember.iinfo(dtype).max]], dtype=dtype)
    buffer = io.BytesIO()
    ember.save({"t": t, "view": t.t()}, buffer)
    buffer.seek(0)
    loaded = ember.load(buffer)
    assert loaded["t"].dtype is dtype and loaded["t"].tolist() == t.tolist()
    assert loaded["view"].tolist() == t.t().tolist()
    back = load(save({"t": t}))["t"]
    assert back.dtype is dtype and back.tolist() == t.tolist()
