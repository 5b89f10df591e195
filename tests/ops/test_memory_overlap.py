"""Writes into memory the inputs share (in place, out=, samplers) and resize_ over shared
memory, checked against PyTorch's behaviour (found by the round-7 audit of views and out=)."""

import warnings

import pytest

import ember

PARTIAL = "^unsupported operation: some elements of the input tensor and the written-to tensor"
INTERNAL = "^unsupported operation: more than one element of the written-to tensor"


@pytest.mark.parametrize("write", [
    lambda x: x[1:4].add_(x[:3]),
    lambda x: x.view(2, 3).sub_(x.view(2, 3)[1]),
    lambda x: x[:4].view(2, 2).add_(x[:4].view(2, 2).t()),
    lambda x: x[1:4].mul_(x.detach()[:3]),
    lambda x: x[1:4].copy_(x[:3]),
    lambda x: x.__setitem__(slice(1, 4), x[:3]),
    lambda x: x[1:].lerp_(x[:5], 0.5),
])
def test_in_place_refuses_an_input_partly_overlapping_it(write):
    x = ember.arange(6.)
    with pytest.raises(RuntimeError, match=PARTIAL):
        write(x)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_in_place_allows_the_same_elements_disjoint_and_strided_inputs():
    x = ember.arange(4.)
    assert x.mul_(x.view(2, 2).view(4)).tolist() == [0.0, 1.0, 4.0, 9.0]
    x = ember.arange(4.)
    assert x[:2].add_(x[2:]).tolist() == [2.0, 4.0]
    x = ember.arange(8.)            # stepped slices: too hard to decide, allowed as in PyTorch
    assert x[::2].add_(x[1::2]).tolist() == [1.0, 5.0, 9.0, 13.0]


def test_out_refuses_partial_overlap_and_expanded_outputs():
    x = ember.arange(6.)
    with pytest.raises(RuntimeError, match=PARTIAL):
        ember.mul(x[:3], 2, out=x[1:4])
    with pytest.raises(RuntimeError, match=PARTIAL):
        ember.cat([x[:2], x[2:4]], out=x[1:5])
    with pytest.raises(RuntimeError, match=INTERNAL):
        ember.neg(ember.ones(3), out=ember.zeros(1).expand(3))
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert ember.mul(x[:3], 2, out=x[:3]).tolist() == [0.0, 2.0, 4.0]
    assert ember.mul(x[:3], 2, out=x[3:]).tolist() == [0.0, 4.0, 8.0]


@pytest.mark.parametrize("sample", ["uniform_", "normal_", "bernoulli_", "exponential_",
                                    "geometric_", "cauchy_", "log_normal_", "random_"])
def test_samplers_refuse_expanded_tensors(sample):
    x = ember.zeros(3)
    args = (0.5,) if sample in ("bernoulli_", "geometric_") else ()
    with pytest.raises(RuntimeError, match=INTERNAL):
        getattr(x[:1].expand(3), sample)(*args)
    assert x.tolist() == [0.0, 0.0, 0.0]


def test_index_fill_on_expanded_tensor_warns_as_deprecated():
    x = ember.zeros(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x.expand(2, 3).index_fill_(1, ember.tensor([0]), 1.0)
    assert [str(w.message) for w in caught] == [
        "Use of index_fill_ on expanded tensors is deprecated. Please clone() the tensor "
        "before performing this operation. This also applies to advanced indexing e.g. "
        "tensor[mask] = scalar"]
    assert x.tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("write, names", [
    (lambda m: m.__setitem__(ember.tensor([[True, False, False], [False] * 3]), 1.0),
     ["index_put", "masked_fill"]),     # one value through a sole bool mask: masked_fill_
    (lambda m: m.__setitem__((slice(None), ember.tensor([True, False, True])), 1.0),
     ["index_put", "masked_fill"]),
    (lambda m: m.__setitem__(ember.tensor([[True, False, True], [False] * 3]),
                             ember.tensor([1.0, 2.0])), ["index_put"]),
    (lambda m: m.index_put_((ember.tensor([[True, False, False], [False] * 3]),),
                            ember.tensor(1.0), accumulate=True), ["index_put"]),
    (lambda m: m.__setitem__((ember.tensor([True, False]), ember.tensor([0])), 1.0),
     ["index_put"]),
])
def test_mask_write_on_expanded_tensor_warns_for_each_op_it_runs(write, names):
    m = ember.zeros(1, 3).expand(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write(m)
    examples = {"index_put": "tensor[indices] = tensor", "masked_fill": "tensor[mask] = scalar"}
    assert [str(w.message) for w in caught] == [
        f"Use of {n}_ on expanded tensors is deprecated. Please clone() the tensor before "
        f"performing this operation. This also applies to advanced indexing e.g. {examples[n]}"
        for n in names]


def test_resize_to_the_same_shape_leaves_the_tensor_alone():
    base = ember.arange(6.)
    t = base.view(2, 3).t()
    version = t._version
    assert t.resize_(3, 2) is t
    assert t.stride() == (1, 3) and t._version == version
    t[0, 1] = 10.0
    assert base.tolist() == [0.0, 1.0, 2.0, 10.0, 4.0, 5.0]


def test_resize_lays_memory_out_from_the_storage_offset():
    t = ember.arange(6.).view(2, 3).t()
    assert t.resize_(6).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]   # memory order, not t's
    base = ember.arange(6.)
    row = base.view(2, 3)[1]
    row.resize_(2)
    assert row.tolist() == [3.0, 4.0] and row.storage_offset() == 3 and row._base is base
    row.resize_(1, 3)
    assert row.stride() == (3, 1) and row.storage_offset() == 3
    row.fill_(9.0)
    assert base.tolist() == [0.0, 1.0, 2.0, 9.0, 9.0, 9.0]
    tail = ember.arange(6.).view(2, 3)[:, 1:]
    assert tail.resize_(5).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert tail.storage_offset() == 1


def test_resize_beyond_the_memory_keeps_the_elements():
    t = ember.arange(6.).view(2, 3)[1]
    t.resize_(4)
    assert t.tolist()[:3] == [3.0, 4.0, 5.0] and t.shape == (4,)


def test_augmented_assignment_through_an_index_writes_its_own_elements_back():
    x = ember.zeros(2, 1, dtype=ember.int64) + 5
    x[0] -= 1                           # the value is x[0] itself, seen as 0-dim
    y = ember.zeros(2, 3) + 5
    y[0] -= 1
    y[:, 1] += 2
    y[1, 2] *= 3
    assert x.tolist() == [[4], [5]] and y.tolist() == [[4.0, 6.0, 4.0], [5.0, 7.0, 15.0]]
