"""In-place variants that PyTorch refuses where the out-of-place op is fine (found by
tests/parity)."""

import pytest

import ember


def test_abs_in_place_rejects_complex():
    x = ember.tensor([3 + 4j, -1j])
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex tensors."):
        x.abs_()
    assert x.tolist() == [3 + 4j, -1j]
    assert ember.abs(x).tolist() == [5.0, 1.0]


@pytest.mark.parametrize("name", ["cumsum_", "cumprod_"])
def test_scan_in_place_dtype_must_be_its_own(name):
    x = ember.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="Bad in-place call: input tensor dtype float and "
                                           "output tensor dtype double should match"):
        getattr(x, name)(0, dtype=ember.float64)
    i = ember.tensor([1, 2, 3], dtype=ember.int32)
    with pytest.raises(RuntimeError, match="input tensor dtype int and output tensor dtype "
                                           "long int should match"):
        getattr(i, name)(0, dtype=ember.int64)
    assert getattr(x, name)(0, dtype=ember.float32) is x
    assert x.tolist() == ([1.0, 3.0, 6.0] if name == "cumsum_" else [1.0, 2.0, 6.0])
    assert getattr(i, name)(0).tolist() == ([1, 3, 6] if name == "cumsum_" else [1, 2, 6])
    assert i.dtype is ember.int32
