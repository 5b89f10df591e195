"""Tensor methods outside the op samples, against PyTorch: apply_/map_/map2_ (how a
callback's result becomes an element, argument checks), dim_order, is_set_to across dtype
views, to()/cpu() with a memory format, and complex-to-real casts' layout."""

import random

import pytest

import ember
from tests.parity._compare import dtype_name, is_tensor, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn, lib):
    """(dtype name, strides, values) of a tensor, another value as is, or (error type,
    message without library prefixes)."""
    return outcome(fn, lib, quiet=True, message=_neutral, describe=lambda out: (
        (dtype_name(out.dtype), out.stride(), out.tolist()) if is_tensor(out) else out))


def _neutral(text):
    """The message with both libraries' prefixes dropped."""
    return text.replace("torch.", "").replace("ember.", "")


CALLBACKS = {
    "float str": lambda m: m.ones(3).apply_(lambda x: "3"),
    "float None": lambda m: m.ones(3).apply_(lambda x: None),
    "float complex": lambda m: m.ones(3).apply_(lambda x: 1 + 2j),
    "float huge": lambda m: m.ones(3).apply_(lambda x: 1e300),
    "float 0-dim tensor": lambda m: m.ones(3).apply_(lambda x: m.tensor(2.)),
    "long float": lambda m: m.ones(3, dtype=m.int64).apply_(lambda x: -2.7),
    "long str": lambda m: m.ones(3, dtype=m.int64).apply_(lambda x: "a"),
    "long nan": lambda m: m.ones(3, dtype=m.int64).apply_(lambda x: float("nan")),
    "long 2**70": lambda m: m.ones(3, dtype=m.int64).apply_(lambda x: 2 ** 70),
    "int32 2**40": lambda m: m.ones(3, dtype=m.int32).apply_(lambda x: 2 ** 40),
    "int8 200.5": lambda m: m.ones(3, dtype=m.int8).apply_(lambda x: 200.5),
    "uint8 -1": lambda m: m.ones(3, dtype=m.uint8).apply_(lambda x: -1),
    "uint8 -256": lambda m: m.ones(3, dtype=m.uint8).apply_(lambda x: -256),
    "uint8 -1.0": lambda m: m.ones(3, dtype=m.uint8).apply_(lambda x: -1.0),
    "uint64 -1": lambda m: m.ones(3, dtype=m.uint64).apply_(lambda x: -1),
    "uint64 float": lambda m: m.ones(3, dtype=m.uint64).apply_(lambda x: 1.5),
    "bool float": lambda m: m.ones(3, dtype=m.bool).apply_(lambda x: 0.0),
    "bool None": lambda m: m.ones(3, dtype=m.bool).apply_(lambda x: None),
    "complex str": lambda m: m.ones(3, dtype=m.complex64).apply_(lambda x: "a"),
    "transposed": lambda m: m.arange(6).view(2, 3).t().apply_(lambda x: x * 10),
    "map_ other dtype": lambda m: m.ones(3, dtype=m.int64).map_(m.ones(3), lambda x, y: x),
    "map_ broadcast": lambda m: m.ones(2, 3).map_(m.arange(3.), lambda x, y: x + y),
    "map_ bad shape": lambda m: m.ones(3).map_(m.ones(4), lambda x, y: x),
    "map_ wider other": lambda m: m.ones(1, 3).map_(m.ones(2, 1), lambda x, y: x),
    "map2_ x dtype": lambda m: m.ones(3).map2_(m.ones(3, dtype=m.int64), m.ones(3),
                                               lambda x, y, z: 1),
    "map2_ y dtype": lambda m: m.ones(3).map2_(m.ones(3), m.ones(3, dtype=m.int64),
                                               lambda x, y, z: 1),
}


@pytest.mark.parametrize("name", sorted(CALLBACKS))
def test_python_callbacks_convert_and_check_as_torch(name):
    fn = CALLBACKS[name]
    assert _outcome(fn, ember) == _outcome(fn, torch)


def test_dim_order_matches_torch_for_random_strides():
    rng = random.Random(0)
    for _ in range(400):
        ndim = rng.randint(0, 5)
        shape = tuple(rng.choice([1, 1, 2, 3]) for _ in range(ndim))
        strides = tuple(rng.choice([0, 1, 2, 3, 4, 6, 12]) for _ in range(ndim))
        expected = torch.empty(10000).as_strided(shape, strides).dim_order()
        assert ember.empty(10000).as_strided(shape, strides).dim_order() == expected, \
            (shape, strides)


def test_dim_order_of_expanded_and_channels_last_tensors():
    for m in (torch, ember):
        assert m.ones(2, 3).expand(4, 2, 3).dim_order() == (0, 1, 2)
        assert m.ones(2, 3, 4, 5).permute(0, 2, 3, 1).dim_order() == (0, 3, 1, 2)
        assert m.ones(12).as_strided((3, 1, 2), (4, 3, 3)).dim_order() == (0, 2, 1)


def test_dim_order_ambiguity_check_a_lone_broadcast_dim_is_unique():
    for m in (torch, ember):
        assert m.zeros(1).expand(3).dim_order(ambiguity_check=True) == (0,)
        t = m.ones(1, 3, 1, 1).as_strided((1, 3, 1, 1), (6, 1, 2, 12))
        assert t.dim_order(ambiguity_check=[m.channels_last]) == (3, 0, 2, 1)


SET_TO = {
    "int32 view": lambda m: (lambda a: a.is_set_to(a.view(m.int32)))(m.ones(3)),
    "int16 views": lambda m: (lambda a: a[1:2].is_set_to(
        a.view(m.int16)[2:3].view(m.float16)))(m.ones(3)),
    "offset views": lambda m: (lambda a: a[1:].is_set_to(a.view(m.int32)[1:]))(m.ones(3)),
}


@pytest.mark.parametrize("name", sorted(SET_TO))
def test_is_set_to_ignores_the_dtype_but_not_the_offset(name):
    assert SET_TO[name](ember) == SET_TO[name](torch)


LAYOUTS = {
    "t to contiguous": lambda m: m.ones(2, 3).t().to(memory_format=m.contiguous_format),
    "t float contiguous": lambda m: m.ones(2, 3).t().float(memory_format=m.contiguous_format),
    "t copy contiguous": lambda m: m.ones(2, 3).t().to(memory_format=m.contiguous_format,
                                                       copy=True),
    "t double contiguous": lambda m: m.ones(2, 3).t().to(m.float64,
                                                         memory_format=m.contiguous_format),
    "channels-last to contiguous": lambda m: m.ones(1, 2, 2, 3).to(
        memory_format=m.channels_last).to(memory_format=m.contiguous_format),
    "cpu contiguous": lambda m: m.ones(1, 2, 2, 3).to(
        memory_format=m.channels_last).cpu(memory_format=m.contiguous_format),
    "complex to float": lambda m: m.tensor([1 + 2j, 3j]).float(),
    "one complex to float": lambda m: m.tensor([1 + 2j]).float(),
    "complex column to double": lambda m: m.full((2, 1), 1 + 2j).double(),
    "complex t to float": lambda m: m.tensor([[1 + 2j, 3j], [5., 7j]]).t().float(),
    "complex to int": lambda m: m.tensor([[1 + 2j, 3j], [5., 7j]]).t().to(m.int32),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_conversion_layouts_match_torch(name):
    assert _outcome(LAYOUTS[name], ember) == _outcome(LAYOUTS[name], torch)


def test_to_contiguous_format_keeps_a_tensor_that_suggests_it():
    for m in (torch, ember):
        t = m.ones(2, 3).t()
        assert t.to(memory_format=m.contiguous_format) is t
        cl = m.ones(1, 2, 2, 3).to(memory_format=m.channels_last)
        assert cl.cpu(memory_format=m.contiguous_format) is not cl


AMBIGUITY_CHECKS = {
    "size-1 last dim, contiguous": lambda m: m.randn(2, 3, 4, 1).dim_order(
        ambiguity_check=[m.contiguous_format]),
    "size-1 middle dim, contiguous": lambda m: m.randn(2, 1, 3).dim_order(
        ambiguity_check=[m.contiguous_format]),
    "two formats fit": lambda m: m.randn(1, 3, 1, 1).dim_order(
        ambiguity_check=[m.contiguous_format]),
    "channels_last of (2, 3, 1, 1)": lambda m: m.randn(2, 3, 1, 1).dim_order(
        ambiguity_check=[m.channels_last]),
    "broadcast beside a dim": lambda m: m.randn(3).expand(2, 3).dim_order(ambiguity_check=True),
}


@pytest.mark.parametrize("name", sorted(AMBIGUITY_CHECKS))
def test_dim_order_ambiguity_outcomes_match_torch(name):
    def outcome(m):
        try:
            return AMBIGUITY_CHECKS[name](m)
        except RuntimeError:
            return "ambiguous"
    assert outcome(ember) == outcome(torch)
