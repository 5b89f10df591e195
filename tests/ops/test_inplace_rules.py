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


def _expanded():
    base = ember.zeros(3)
    return base, base.expand(2, 3)


@pytest.mark.parametrize("write", [lambda x: x.add_(1), lambda x: x.mul_(2),
                                   lambda x: x.clamp_(0, 1), lambda x: x.copy_(ember.ones(2, 3)),
                                   lambda x: x.__setitem__((slice(None), 0), 5.0)],
                         ids=["add_", "mul_", "clamp_", "copy_", "basic setitem"])
def test_writing_into_an_expanded_tensor_raises(write):
    base, x = _expanded()
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor "
                                           r"refers to a single memory location\. Please "
                                           r"clone\(\) the tensor"):
        write(x)
    assert base.tolist() == [0.0, 0.0, 0.0]


def test_an_expanded_tensor_can_be_filled_and_written_where_it_does_not_repeat():
    base, x = _expanded()
    x.fill_(2.0)
    assert base.tolist() == [2.0, 2.0, 2.0]
    x.zero_()
    x[0].add_(1.0)                      # one row repeats nothing: it writes through
    assert base.tolist() == [1.0, 1.0, 1.0] and x.tolist() == [[1.0] * 3] * 2
    x[1] = ember.tensor([4.0, 5.0, 6.0])
    assert base.tolist() == [4.0, 5.0, 6.0]


@pytest.mark.parametrize("write, example", [
    (lambda x: x.index_put_((ember.tensor([0]),), ember.tensor(1.0)), "tensor\\[indices\\]"),
    (lambda x: x.__setitem__(ember.tensor([1]), 1.0), "tensor\\[indices\\]"),
    (lambda x: x.masked_fill_(ember.ones(2, 3, dtype=ember.bool), 1.0), "tensor\\[mask\\]")])
def test_masked_and_advanced_index_writes_into_an_expanded_tensor_are_deprecated(write,
                                                                                   example):
    base, x = _expanded()
    with pytest.warns(UserWarning, match=f"on expanded tensors is deprecated.*e.g. {example}"):
        write(x)
    assert base.tolist() == [1.0, 1.0, 1.0]
