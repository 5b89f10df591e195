"""Argument TypeErrors worded as PyTorch's parser words them (the messages were taken from
PyTorch 2.13): the op, the argument's name and position (one further on in the function
form), ``tuple of ints`` arguments, and "invalid combination" for overloaded ops."""

import re

import numpy as np
import pytest

import ember

_UNPACK = ("failed to unpack the object at pos 2 with error \"type must be tuple of ints,but "
           "got str\"")


@pytest.mark.parametrize("call, message", [
    (lambda x: x.cumsum("a"), "cumsum(): argument 'dim' (position 1) must be int, not str"),
    (lambda x: ember.cumsum(x, 1.5),
     "cumsum(): argument 'dim' (position 2) must be int, not float"),
    (lambda x: x.argmax(ember.tensor(1.5)),
     "argmax(): argument 'dim' (position 1) must be int, not Tensor"),
    (lambda x: x.chunk(2, None), "chunk(): argument 'dim' (position 2) must be int, not NoneType"),
    (lambda x: ember.topk(x, [1]), "topk(): argument 'k' (position 2) must be int, not list"),
    (lambda x: x.gather("a", x.long()),
     "gather(): argument 'dim' (position 1) must be int, not str"),
    (lambda x: x.diagonal(0, 1.5),
     "diagonal(): argument 'dim1' (position 2) must be int, not float"),
    (lambda x: x.tril_(1.5), "tril_(): argument 'diagonal' (position 1) must be int, not float"),
    (lambda x: x.size("a"), "size(): argument 'dim' (position 1) must be int, not str"),
    (lambda x: x.stride(1.5), "stride(): argument 'dim' (position 1) must be int, not float"),
    (lambda x: ember.nn.functional.softmax(x, "a"),
     "softmax(): argument 'dim' (position 1) must be int, not str"),
    (lambda x: x.permute("a"),
     "permute(): argument 'dims' (position 1) must be tuple of ints, not str"),
    (lambda x: ember.roll(x, 1, 1.5),
     "roll(): argument 'dims' (position 3) must be tuple of ints, not float"),
    (lambda x: ember.permute(x, ("a", 0)),
     "permute(): argument 'dims' (position 2) must be tuple of ints, but found element of type "
     "str at pos 0"),
    (lambda x: x.reshape(4, "a"), "reshape(): argument 'shape' " + _UNPACK),
    (lambda x: x.flip(0, "a"), "flip(): argument 'dims' " + _UNPACK),
    (lambda x: x.permute("a", 0), "permute() takes 1 positional argument but 2 were given"),
    (lambda x: x.split(1.5), "split_with_sizes(): argument 'split_sizes' (position 2) must be "
                             "tuple of ints, not float"),
])
def test_argument_is_named(call, message):
    with pytest.raises(TypeError, match="^" + re.escape(message) + "$"):
        call(ember.ones(4, 4))


@pytest.mark.parametrize("call, got", [
    (lambda x: x.sum("a"), "sum() received an invalid combination of arguments - got (str)"),
    (lambda x: ember.mean(x, 1.5), "mean() received an invalid combination of arguments - got "
                                   "(Tensor, float)"),
    (lambda x: x.sum(("a", 0)), "sum() received an invalid combination of arguments - got (tuple)"),
    (lambda x: x.sort("a", True), "sort() received an invalid combination of arguments - got "
                                  "(str, bool)"),
    (lambda x: x.squeeze_(1.5), "squeeze_() received an invalid combination of arguments - got "
                                "(float)"),
    (lambda x: x.movedim([0], 1), "movedim() received an invalid combination of arguments - got "
                                  "(list, int)"),
    (lambda x: x.narrow(0, "a", 1), "narrow() received an invalid combination of arguments - got "
                                    "(int, str, int)"),
    (lambda x: x.split(2, "a"), "split() received an invalid combination of arguments - got "
                                "(Tensor, int, str)"),
    (lambda x: x.view("a"), "view() received an invalid combination of arguments - got (str)"),
    (lambda x: x.view(dtype="a"), "view() received an invalid combination of arguments - got "
                                  "(dtype=str, )"),
])
def test_no_overload_takes_the_arguments(call, got):
    with pytest.raises(TypeError) as info:
        call(ember.ones(4, 4))
    assert str(info.value).splitlines()[0] == got + ", but expected one of:"


def test_a_later_bad_element_is_named_by_its_place():
    with pytest.raises(TypeError, match=re.escape("sum(): argument 'dim' " + _UNPACK)):
        ember.ones(2, 2).sum((0, "a"))


def test_narrow_start_tensor_must_be_0_dim_integral():
    x = ember.arange(4.0)
    with pytest.raises(RuntimeError, match="^start must be an 0-dim integral Tensor.$"):
        x.narrow(0, ember.tensor(1.0), 1)
    assert x.narrow(0, ember.tensor(1), 2).tolist() == [1.0, 2.0]


def test_valid_arguments_still_work():
    x = ember.arange(6.0).reshape(2, 3)
    assert x.sum((0, 1)).item() == 15.0
    assert x.permute(1, 0).shape == (3, 2) and x.permute((1, 0)).shape == (3, 2)
    assert x.reshape([3, 2]).shape == (3, 2) and x.view(ember.tensor(6)).shape == (6,)
    assert x.movedim([0, 1], [1, 0]).shape == (3, 2)
    assert x.sort(ember.tensor(1), True).values[0].tolist() == [2.0, 1.0, 0.0]
    assert [t.shape for t in x.split([1, 2], 1)] == [(2, 1), (2, 2)]
    assert x.size(ember.tensor(1)) == 3 and x.cumsum(ember.tensor(0))[1, 0].item() == 3.0


class _Index:
    def __index__(self):
        return 1


@pytest.mark.parametrize("call, message", [
    (lambda x: x.cumsum(np.bool_(1)),
     "cumsum(): argument 'dim' (position 1) must be int, not numpy.bool"),
    (lambda x: x.chunk(np.float64(1)),
     "chunk(): argument 'chunks' (position 1) must be int, not numpy.float64"),
    (lambda x: x.size(_Index()), "size(): argument 'dim' (position 1) must be int, not _Index"),
    (lambda x: x.split(np.int64(1)), "split_with_sizes(): argument 'split_sizes' (position 2) "
                                     "must be tuple of ints, not numpy.int64"),
    (lambda x: x.split(True), "split() received an invalid combination of arguments - got "
                              "(Tensor, bool, int)"),
    (lambda x: ember.reshape(x, ember.tensor(16)),
     "reshape(): argument 'shape' (position 2) must be tuple of ints, not Tensor"),
    (lambda x: x.reshape(4, np.float32(4)), "reshape(): argument 'shape' failed to unpack the "
     "object at pos 2 with error \"type must be tuple of ints,but got numpy.float32\""),
    (lambda x: ember.tensor_split(x, 1.5), "tensor_split() received an invalid combination"),
    (lambda x: ember.fft.fftn(x, s=(2, 1.5)), "fft_fftn(): argument 's' failed to unpack"),
])
def test_numpy_names_and_parser_refusals(call, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        call(ember.ones(4, 4))


def test_later_bools_and_index_objects_read_as_ints():
    x = ember.arange(16.).reshape(4, 4)
    assert ember.sum(x, (0, True)).item() == 120.0
    assert x.view((16, True)).shape == (16, 1)
    assert x.reshape(_Index(), -1).shape == (1, 16)
    assert x.topk(_Index()).values.tolist() == [[3.0], [7.0], [11.0], [15.0]]
    assert ember.rot90(x, ember.tensor(1)).tolist() == ember.rot90(x, 1).tolist()
