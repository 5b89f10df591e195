"""Regressions from round 36's nn.utils fuzzer: the errors torch gives, in its order."""

import pytest

import ember
from ember import nn
from ember.nn.utils import parametrize, prune
from ember.nn.utils import rnn as U


def test_pack_of_an_empty_tensor_is_refused_first():
    with pytest.raises(RuntimeError, match="^Cannot pack empty tensors.$"):
        U.pack_padded_sequence(ember.zeros(3, 0, 1), [])
    with pytest.raises(RuntimeError, match="^Cannot pack empty tensors.$"):
        U.pack_padded_sequence(ember.zeros(0, 2, 1), [0, 0])
    with pytest.raises(RuntimeError, match="^Cannot pack empty tensors.$"):
        U.pack_sequence([ember.zeros(0, 1)])


def test_pack_checks_the_last_length_before_the_order():
    x = ember.zeros(3, 3, 1)
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        U.pack_padded_sequence(x, [0, 3, 0])
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        U.pack_padded_sequence(x, [1, 3, 1])
    with pytest.raises(RuntimeError, match="Length of all samples"):
        U.pack_sequence([ember.zeros(2, 1), ember.zeros(0, 1)])


@pytest.mark.parametrize("sizes, message", [
    ([1, 3], r"output with shape \[1, 1, 2\] doesn't match the broadcast shape \[1, 3, 2\]"),
    ([1, 2, 1], r"output with shape \[1, 1, 2\] doesn't match the broadcast shape \[1, 2, 2\]"),
    ([2, 2, 2], r"shape '\[3, 2, 2\]' is invalid for input of size 8"),
    ([2, 1, 3], r"shape '\[1, 3, 2\]' is invalid for input of size 2"),
    ([4, 1], r"shape '\[1, 1, 2\]' is invalid for input of size 0"),
])
def test_pad_packed_refuses_batch_sizes_that_do_not_fit(sizes, message):
    pk = U.PackedSequence(ember.arange(8.).reshape(4, 2), ember.tensor(sizes))
    with pytest.raises(RuntimeError, match=message):
        U.pad_packed_sequence(pk)
    with pytest.raises(RuntimeError, match=message):
        U.unpack_sequence(pk)


def test_pad_packed_of_hand_built_batch_sizes_that_fit():
    pk = U.PackedSequence(ember.arange(8.).reshape(4, 2), ember.tensor([3, 1]))
    out, lengths = U.pad_packed_sequence(pk)
    assert out.tolist() == [[[0., 1.], [2., 3.], [4., 5.]], [[6., 7.], [0., 0.], [0., 0.]]]
    assert lengths.tolist() == [2, 1, 1]


def test_structured_pruning_over_a_mask_with_a_dim_past_the_tensor():
    m = nn.Linear(3, 3)
    prune.l1_unstructured(m, "bias", amount=1)
    with pytest.raises(IndexError, match="^list assignment index out of range$"):
        prune.ln_structured(m, "bias", amount=1, n=2, dim=1)
    m2 = nn.Linear(3, 3)          # (a first structured pruning refuses 1-D tensors)
    with pytest.raises(ValueError, match="Structured pruning can only be applied"):
        prune.ln_structured(m2, "bias", amount=1, n=2, dim=1)


class _Sum0(nn.Module):
    def forward(self, x):
        return x.sum(0)


class _BadInverse(nn.Module):
    def __init__(self, out):
        super().__init__()
        self.out = out

    def forward(self, x):
        return x

    def right_inverse(self, x):
        return self.out(x)


def _twice(p):
    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", nn.Identity())
    return parametrize.register_parametrization(m, "weight", p)


def test_second_parametrization_checks_its_shape_and_right_inverse():
    with pytest.raises(ValueError) as info:
        _twice(_Sum0())
    assert str(info.value).split("\n") == [
        "Registering a parametrization may not change the shape of the tensor, unless the "
        "`unsafe` flag is enabled.", "module.weight.shape: ember.Size([2, 2])",
        "parametrization(module.weight).shape: ember.Size([2])"]
    with pytest.raises(ValueError) as info:
        _twice(_BadInverse(lambda x: x.sum(0)))
    assert str(info.value).split("\n") == [
        "The tensor returned by parametrization.right_inverse must have the same shape as "
        "module.weight, unless the `unsafe` flag is enabled.",
        "module.weight.shape: ember.Size([2, 2])", "returned shape: ember.Size([2])"]
    with pytest.raises(ValueError, match="^The tensor returned by .* same dtype as module"):
        _twice(_BadInverse(lambda x: x.double()))
    with pytest.raises(ValueError, match="^parametrization.right_inverse must return a "
                                         "tensor. Got: int$"):
        _twice(_BadInverse(lambda x: 3))
    m = _twice(_BadInverse(lambda x: x))      # a fitting one is appended
    assert len(m.parametrizations.weight) == 2


def test_parameters_to_vector_of_a_non_tensor():
    with pytest.raises(AttributeError, match="'str' object has no attribute 'device'"):
        nn.utils.parameters_to_vector([ember.ones(2), "x"])


def test_get_total_norm_refuses_a_none():
    with pytest.raises(RuntimeError, match="supposed to be defined but the 1-th Tensor is not"):
        nn.utils.get_total_norm([ember.ones(1), None])
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'device'"):
        nn.utils.get_total_norm([None])
    assert nn.utils.get_total_norm([ember.tensor([3., 4.])]).item() == 5.0


def test_pad_sequence_of_0d_tensors():
    with pytest.raises(RuntimeError, match=r"^ArrayRef: invalid slice, N = 1; size = 0$"):
        U.pad_sequence([ember.tensor(1.), ember.tensor(2.)])
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dim"):
        U.pad_sequence([ember.ones(1), ember.tensor(2.)])


def test_unpad_sequence_wants_tensor_lengths():
    with pytest.raises(AttributeError, match="'list' object has no attribute 'device'"):
        U.unpad_sequence(ember.ones(3, 2), [3, 1])
    out = U.unpad_sequence(ember.ones(3, 2), ember.tensor([3, 1]))
    assert [tuple(o.shape) for o in out] == [(3,), (1,)]


def test_pad_packed_total_length_must_be_an_int():
    pk = U.pack_sequence([ember.ones(2, 1), ember.ones(1, 1)])
    with pytest.raises(TypeError, match=r"argument 'total_length' \(position 5\) must be int, "
                                        r"not float"):
        U.pad_packed_sequence(pk, total_length=3.0)
    assert tuple(U.pad_packed_sequence(pk, total_length=ember.tensor(3))[0].shape) == (3, 2, 1)
