"""Keyword names PyTorch binds (its argument parser's names, not always its docs' ones):
``swapaxes(axis0=, axis1=)``, ``hsplit(sections=)``, ``x.resize_(size=)``, ``F.one_hot(input=)``
and the common ``dim=``/``index=``/``other=`` calls, each checked against written-out values."""

import pytest

import ember
import ember.nn.functional as F


def _x():
    return ember.arange(12.0).reshape(2, 6)


def _shapes(pieces):
    return [tuple(p.shape) for p in pieces]


# --- hsplit / vsplit / dsplit: the two overloads' names ------------------------------------------

@pytest.mark.parametrize("call, shapes", [
    (lambda x: ember.hsplit(x, sections=3), [(2, 2)] * 3),
    (lambda x: ember.hsplit(x, indices=[1, 4]), [(2, 1), (2, 3), (2, 2)]),
    (lambda x: ember.hsplit(input=x, sections=2), [(2, 3)] * 2),
    (lambda x: x.hsplit(sections=3), [(2, 2)] * 3),
    (lambda x: x.hsplit(indices=(2,)), [(2, 2), (2, 4)]),
    (lambda x: x.hsplit(1, 4), [(2, 1), (2, 3), (2, 2)]),
    (lambda x: ember.vsplit(x, sections=2), [(1, 6)] * 2),
    (lambda x: x.vsplit(indices=[1]), [(1, 6)] * 2),
    (lambda x: ember.dsplit(x.reshape(1, 2, 6), sections=2), [(1, 2, 3)] * 2),
    (lambda x: x.reshape(1, 2, 6).dsplit(indices=[1]), [(1, 2, 1), (1, 2, 5)]),
    (lambda x: ember.tensor_split(x, sections=3, dim=1), [(2, 2)] * 3),
    (lambda x: x.tensor_split(indices=[1], dim=1), [(2, 1), (2, 5)]),
])
def test_directional_splits_take_sections_and_indices(call, shapes):
    assert _shapes(call(_x())) == shapes


def test_hsplit_values_by_keyword():
    left, right = ember.hsplit(_x(), indices=[2])
    assert left.tolist() == [[0.0, 1.0], [6.0, 7.0]]
    assert right.tolist() == [[2.0, 3.0, 4.0, 5.0], [8.0, 9.0, 10.0, 11.0]]


@pytest.mark.parametrize("call, got", [
    (lambda x: ember.hsplit(x), "got (Tensor)"),
    (lambda x: ember.hsplit(x, sections=[1]), "got (Tensor, sections=list)"),
    (lambda x: ember.hsplit(x, indices=2), "got (Tensor, indices=int)"),
    (lambda x: ember.hsplit(x, 2, sections=2), "got (Tensor, int, sections=int)"),
    (lambda x: x.hsplit(), "got ()"),
])
def test_hsplit_bad_overload_raises_as_pytorch(call, got):
    with pytest.raises(TypeError, match=r"^hsplit\(\) received an invalid combination of "
                                        r"arguments - " + got.replace("(", r"\(")
                                        .replace(")", r"\)")):
        call(_x())


# --- swapaxes: NumPy's names, unlike transpose/swapdims -----------------------------------------

def test_swapaxes_takes_axis_names():
    x = _x()
    assert ember.swapaxes(x, axis0=0, axis1=1).tolist() == x.t().tolist()
    assert ember.swapaxes(input=x, axis0=1, axis1=0).shape == (6, 2)
    assert x.swapaxes(axis0=0, axis1=1).shape == (6, 2)
    y = x.clone()
    assert y.swapaxes_(axis0=0, axis1=1) is y and y.shape == (6, 2)
    assert ember.swapdims(x, dim0=0, dim1=1).shape == (6, 2)


def test_swapaxes_is_a_view_with_transposes_grad_fn():
    x = ember.ones(2, 3, requires_grad=True)
    y = ember.swapaxes(x, 0, 1)
    assert y._base is x and type(y.grad_fn).__name__ == "TransposeBackward0"


@pytest.mark.parametrize("call, message", [
    (lambda x: ember.swapaxes(x, dim0=0, dim1=1), "unexpected keyword argument 'dim0'"),
    (lambda x: ember.swapaxes(x, 0), "missing 1 required positional argument: 'axis1'"),
    (lambda x: ember.swapaxes(1, 0, 1), "argument 'input' (position 1) must be Tensor, not int"),
])
def test_swapaxes_errors(call, message):
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(_x())


# --- split_with_sizes: its own names (split's are tensor/split_size_or_sections) ----------------

def test_split_with_sizes_names():
    x = _x()
    assert _shapes(ember.split_with_sizes(x, split_sizes=[1, 5], dim=1)) == [(2, 1), (2, 5)]
    assert _shapes(ember.split_with_sizes(input=x, split_sizes=[1, 1])) == [(1, 6), (1, 6)]
    assert _shapes(x.split_with_sizes(split_sizes=[2, 4], dim=1)) == [(2, 2), (2, 4)]
    a, b = x.requires_grad_().split_with_sizes([1, 1])
    assert type(b.grad_fn).__name__ == "SplitWithSizesBackward0"
    assert b.tolist() == [[6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]


@pytest.mark.parametrize("call, message", [
    (lambda x: ember.split_with_sizes(x, 2), "argument 'split_sizes' (position 2) must be "
                                             "tuple of ints, not int"),
    (lambda x: x.split_with_sizes(2), "argument 'split_sizes' (position 1) must be tuple of "
                                      "ints, not int"),
    (lambda x: ember.split_with_sizes(3, [2]), "argument 'input' (position 1) must be Tensor, "
                                               "not int"),
])
def test_split_with_sizes_errors(call, message):
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(_x())


# --- varargs methods that also take their parameter by keyword ----------------------------------

def test_tile_and_resize_take_keywords():
    x = ember.tensor([[1.0, 2.0]])
    assert x.tile(dims=(2,)).tolist() == [[1.0, 2.0, 1.0, 2.0]]
    assert x.tile(2, 1).tolist() == [[1.0, 2.0], [1.0, 2.0]]
    y = ember.arange(6.0)
    assert y.resize_(size=(2, 3)) is y and y.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert y.resize_([3, 2]).shape == (3, 2) and y.resize_(6).shape == (6,)


@pytest.mark.parametrize("call, message", [
    (lambda x: x.tile(2, dims=(2,)), "tile() got multiple values for argument 'dims'"),
    (lambda x: x.tile(), 'tile() missing 1 required positional arguments: "dims"'),
    (lambda x: x.resize_(2, size=(2,)), "resize_() got multiple values for argument 'size'"),
    (lambda x: x.resize_(), 'resize_() missing 1 required positional arguments: "size"'),
])
def test_tile_and_resize_argument_errors(call, message):
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(ember.ones(2))


# --- one_hot binds `input` (its docs say `tensor`) ----------------------------------------------

def test_one_hot_takes_input():
    assert F.one_hot(input=ember.tensor([1, 0]), num_classes=3).tolist() == [[0, 1, 0],
                                                                              [1, 0, 0]]
    with pytest.raises(TypeError, match="unexpected keyword argument 'tensor'"):
        F.one_hot(tensor=ember.tensor([1]), num_classes=3)


# --- the *_like factories take pin_memory -------------------------------------------------------

@pytest.mark.parametrize("name, args", [
    ("zeros_like", ()), ("ones_like", ()), ("empty_like", ()), ("full_like", (2.0,)),
    ("rand_like", ()), ("randn_like", ()), ("randint_like", (3,)),
])
def test_like_factories_take_pin_memory(name, args):
    out = getattr(ember, name)(ember.ones(2, 3), *args, pin_memory=False)
    assert out.shape == (2, 3) and out.dtype == ember.float32


# --- the names users pass most, by keyword ------------------------------------------------------

_M = [[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]]
_I = [[0], [2]]


@pytest.mark.parametrize("call, expected", [
    (lambda x: x.index_select(dim=1, index=ember.tensor([2, 0])), [[4.0, 1.0], [9.0, 3.0]]),
    (lambda x: ember.index_select(input=x, dim=0, index=ember.tensor([1])), [[3.0, 5.0, 9.0]]),
    (lambda x: ember.clamp(input=x, min=2.0), [[2.0, 2.0, 4.0], [3.0, 5.0, 9.0]]),
    (lambda x: x.clamp(min=2, max=4), [[2.0, 2.0, 4.0], [3.0, 4.0, 4.0]]),
    (lambda x: x.gather(dim=1, index=ember.tensor(_I)), [[1.0], [9.0]]),
    (lambda x: x.scatter(dim=1, index=ember.tensor(_I), value=0.0),
     [[0.0, 2.0, 4.0], [3.0, 5.0, 0.0]]),
    (lambda x: x.scatter_add(dim=1, index=ember.tensor(_I), src=x),
     [[2.0, 2.0, 4.0], [3.0, 5.0, 12.0]]),
    (lambda x: x.index_add(dim=0, index=ember.tensor([1, 0]), source=x, alpha=2),
     [[7.0, 12.0, 22.0], [5.0, 9.0, 17.0]]),
    (lambda x: x.masked_fill(mask=x > 4, value=-1.0), [[1.0, 2.0, 4.0], [3.0, -1.0, -1.0]]),
    (lambda x: ember.add(input=x, other=1, alpha=2), [[3.0, 4.0, 6.0], [5.0, 7.0, 11.0]]),
    (lambda x: x.sub(other=1, alpha=2), [[-1.0, 0.0, 2.0], [1.0, 3.0, 7.0]]),
    (lambda x: ember.pow(input=x, exponent=2)[0], [1.0, 4.0, 16.0]),
    (lambda x: x.sum(dim=1, keepdim=True, dtype=ember.float64), [[7.0], [17.0]]),
    (lambda x: x.max(dim=1, keepdim=False).indices, [2, 2]),
    (lambda x: x.narrow(dim=1, start=1, length=1), [[2.0], [5.0]]),
    (lambda x: x.unfold(dimension=1, size=2, step=2), [[[1.0, 2.0]], [[3.0, 5.0]]]),
    (lambda x: x.movedim(source=0, destination=1)[0], [1.0, 3.0]),
    (lambda x: x.topk(k=1, dim=1, largest=False).values, [[1.0], [3.0]]),
    (lambda x: ember.where(condition=x > 3, input=x, other=0.0),
     [[0.0, 0.0, 4.0], [0.0, 5.0, 9.0]]),
    (lambda x: ember.true_divide(x, 2)[0], [0.5, 1.0, 2.0]),
    (lambda x: x.diff(n=1, dim=1), [[1.0, 2.0], [2.0, 4.0]]),
    (lambda x: ember.cat(tensors=[x, x], dim=0).shape[0], 4),
    (lambda x: ember.zeros(size=(1, 2)), [[0.0, 0.0]]),
    (lambda x: ember.full(size=(2,), fill_value=3), [3, 3]),
    (lambda x: ember.arange(start=1, end=7, step=3), [1, 4]),
    (lambda x: x.new_zeros(size=(1,)), [0.0]),
])
def test_common_keyword_calls(call, expected):
    out = call(ember.tensor(_M))
    assert (out.tolist() if isinstance(out, ember.Tensor) else out) == expected
