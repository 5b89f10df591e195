"""torch.func.rearrange against PyTorch: values for many patterns (splits, merges,
ellipsis, unnamed axes, lists of tensors) and the error types and messages of bad ones."""

import re

import numpy as np
import pytest

import ember
from ember.func import rearrange
from tests.parity._compare import outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

VALID = [
    ((2, 3, 4), "a b c -> a b c", {}),
    ((2, 3, 4), "a b c -> c b a", {}),
    ((2, 3, 4), "a b c -> a (b c)", {}),
    ((2, 3, 4), "a b c -> (a b c)", {}),
    ((2, 3, 4), "a b c -> b (c a)", {}),
    ((2, 3, 4), "a b (c d) -> a b c d", {"c": 2}),
    ((2, 3, 4), "a b (c d) -> a b c d", {"d": 4}),
    ((2, 3, 4), "a b (c d) -> a b c d", {"c": 2, "d": 2}),
    ((2, 3, 4), "a b (c d) -> a b (d c)", {"d": 4}),
    ((2, 3, 4), "a b (c d) -> (a d) c b", {"c": 2}),
    ((2, 3, 4), "a b (c d e) -> a b c d e", {"c": 2, "e": 1}),
    ((2, 6, 4), "b (h w) c -> b c h w", {"h": 2}),
    ((2, 3, 8), "b n (h d) -> b h n d", {"h": 4}),
    ((2, 6, 4), "b (c h) w -> b c (h w)", {"c": 3}),
    ((4, 6, 8, 3), "b (h1 h) (w1 w) c -> (b h1 w1) h w c", {"h1": 2, "w1": 2}),
    ((4, 6, 8, 3), "b (h h1) (w w1) c -> b h w (c h1 w1)", {"h1": 2, "w1": 2}),
    ((6, 4), "(a b) c -> a b c", {"a": 6}),
    ((2, 3, 4), "(a b) c d -> a b c d", {"a": 2}),
    ((2, 3, 4), "... c -> c ...", {}),
    ((2, 3, 4), "a ... -> ... a", {}),
    ((2, 3, 4), "... h w -> ... (h w)", {}),
    ((2, 3, 5, 4), "a ... (c d) -> ... c d a", {"c": 2}),
    ((2, 3, 4), "... -> (...)", {}),
    ((2, 3, 4), "a ... -> a (...)", {}),
    ((2, 3, 4), "a b c ... -> a b c ...", {}),
    ((2, 3, 4), "... -> ... 1", {}),
    ((2, 3, 4), "... -> (1 ...)", {}),
    ((2, 3, 4), "a b c -> a b c 1", {}),
    ((2, 3, 4), "a b c -> () a b c", {}),
    ((2, 3, 4), "a b c -> a () b c ()", {}),
    ((2, 3, 4), "a b c -> a b ( ) c", {}),
    ((2, 3, 4), "a b c -> (a 1 b) c", {}),
    ((2, 3, 4), "a b c -> (a b 1) 1 c ()", {}),
    ((2, 3, 4), "a b c -> a b c (1)", {}),
    ((2, 3, 4), "a b c -> a b c 001", {}),
    ((2, 1, 4), "a 1 c -> a c", {}),
    ((1, 3, 4), "() b c -> c b", {}),
    ((2, 3, 4), "a b (c 1) -> a b c", {}),
    ((2, 3, 4), "(a) (b) (c) -> c b a", {}),
    ((2, 3, 4), "a b c->a b c", {}),
    ((2, 3, 4), "  a b c  ->  c b a ", {}),
    ((2, 3, 4), "a B c -> a c B", {}),
    ((2, 3, 4), "a_1 b c -> b a_1 c", {}),
    ((2, 3, 4), "a b c -> a b c", {"a": 2, "b": 3, "c": 4}),
    ((0, 3), "a b -> b a", {}),
    ((0, 6), "a (b c) -> a b c", {"b": 2}),
    ((6, 0), "a (b c) -> a b c", {"b": 2}),
    ((), "... -> ...", {}),
    ((), " -> ", {}),
]


def _pair(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    return torch.tensor(x), ember.tensor(x)


@pytest.mark.parametrize("shape,pattern,lengths", VALID)
def test_rearrange_values_match_torch(shape, pattern, lengths):
    t, e = _pair(shape)
    expected = torch.func.rearrange(t, pattern, **lengths)
    got = rearrange(e, pattern, **lengths)
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(np.asarray(got), expected.numpy())


@pytest.mark.parametrize("pattern", ["s a b -> a s b", "s a b -> (s a) b", "... -> ...",
                                     "s ... -> ... s"])
@pytest.mark.parametrize("container", [list, tuple])
def test_rearrange_sequence_matches_torch(pattern, container):
    pairs = [_pair((2, 3)) for _ in range(3)]
    expected = torch.func.rearrange(container(p[0] + i for i, p in enumerate(pairs)), pattern)
    got = rearrange(container(p[1] + i for i, p in enumerate(pairs)), pattern)
    np.testing.assert_array_equal(np.asarray(got), expected.numpy())


def test_rearrange_gradient_matches_torch():
    x = np.random.default_rng(0).standard_normal((2, 6, 4)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((2, 4, 3, 2)).astype(np.float32)
    t, e = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    pattern = "b (h w) c -> b c h w"
    (torch.func.rearrange(t, pattern, h=3) * torch.tensor(w)).sum().backward()
    (rearrange(e, pattern, h=3) * ember.tensor(w)).sum().backward()
    np.testing.assert_allclose(np.asarray(e.grad), t.grad.numpy(), rtol=1e-6)


BAD = [
    ((2, 3, 4), "a b c", {}),
    ((2, 3, 4), "a b c -> a b c -> a", {}),
    ((2, 3, 4), "a b c - > a b c", {}),
    ((2, 3, 4), "a b c -> a b", {}),
    ((2, 3, 4), "a b c -> a b c e f", {}),
    ((2, 3, 4), "a b c -> ", {}),
    ((2, 3, 4), "a b -> a b", {}),
    ((2, 3, 4), "a b c d -> a b c d", {}),
    ((2, 3, 4), "a b c d ... -> a b c d ...", {}),
    ((2, 3, 4), "() a b c -> a b c", {}),
    ((2, 3, 4), "a a c -> a c", {}),
    ((2, 3, 4), "a b c -> a b (c c)", {}),
    ((2, 3, 4), "a b -> a a (", {}),
    ((2, 3, 4), "a (b c -> a b c", {}),
    ((2, 3, 4), "a b c -> (a b c", {}),
    ((2, 3, 4), "... (a -> a", {}),
    ((2, 3, 4), "a b c) -> a b c", {}),
    ((2, 3, 4), "a b c -> a b c ) (", {}),
    ((2, 3, 4), "a ((b) c) -> a b c", {}),
    ((2, 3, 4), "a b c -> a b (c ())", {}),
    ((2, 3, 4), "... c -> ... c ...", {}),
    ((2, 3, 4), "a b c -> a b c ....", {}),
    ((2, 3, 4), "a b c. -> a b c", {}),
    ((2, 3, 4), "a b c -> a b c ..", {}),
    ((2, 3, 4), "a b c -> a b c...", {}),
    ((2, 3, 4), "a b c -> b a ... c", {}),
    ((2, 3, 4), "(a ...) b -> a b", {}),
    ((2, 3, 4), "a ( ... ) -> a", {}),
    ((2, 3, 4), "... c -> c", {}),
    ((2, 3, 4), "a b c -> a b c 2", {}),
    ((2, 3, 4), "a b 2 -> a b c", {}),
    ((2, 3, 4), "a b c -> a b c 0", {}),
    ((2, 3, 4), "a b _c -> a b _c", {}),
    ((2, 3, 4), "a b c_ -> a b c_", {}),
    ((2, 3, 4), "a b _ -> a b _", {}),
    ((2, 3, 4), "a b 1c -> a b 1c", {}),
    ((2, 3, 4), "a b c -> a b c 1e0", {}),
    ((2, 3, 4), "a b c -> a\tb c", {}),
    ((2, 3, 4), "a,b,c -> a b c", {}),
    ((2, 3, 4), "a b c -> a b c -1", {}),
    ((2, 3, 4), "a b c -> a b c", {"e": 2}),
    ((2, 3, 4), "a b -> a b", {"e": 2}),
    ((2, 3, 4), "a b c -> a b c", {"c": 1.5}),
    ((2, 3, 4), "a b c -> a b c", {"a": True}),
    ((2, 3, 4), "a b c -> a b c", {"a": None}),
    ((2, 3, 4), "a b -> a", {"e": 2.0}),
    ((2, 3, 4), "a b -> a b ...", {"e": 2.0}),
    ((2, 3, 4), "a b -> a b 2", {"e": 2.0}),
    ((2, 3, 4), "a b (c -> a", {"e": 2.0}),
    ((2, 3, 4), "a b -> a 2", {}),
    ((2, 3, 4), "a b c -> a b c", {"a": 3}),
    ((2, 3, 4), "a b c -> a b (c)", {"c": 5}),
    ((2, 3, 4), "a b (c d) -> a b c d", {}),
    ((2, 3, 4), "a b (c d) -> a b c d", {"c": 3}),
    ((2, 3, 4), "a b (c d) -> a b c d", {"d": 3}),
    ((2, 3, 4), "a b (c d) -> a b c d", {"c": 3, "d": 2}),
    ((2, 3, 4), "a b (c d e) -> a b c d e", {"c": 2, "e": 4}),
    ((2, 3, 4), "a b (c d e) -> a b c d e", {"c": 2, "d": 2, "e": 2}),
    ((2, 3, 4), "a b (c d) -> a b c d", {"c": 0}),
    ((2, 1, 4), "a 1 (c d) -> a c d", {"c": 3, "d": 2}),
    ((1, 2, 4), "() a (c d) -> a c d", {"c": 3, "d": 2}),
    ((4, 2), "(c 1 d) a -> a c d", {"c": 3, "d": 1}),
    ((2, 3), "(a b c) d -> a b c d", {"b": 2}),
    ((2, 3, 5, 4), "... (c d) -> ... c d", {}),
    ((2, 3, 5, 4), "a ... (c d) -> ... c d a", {"c": 3, "d": 3}),
    ((2, 3, 5, 4), "(c d) ... -> ... c d", {}),
    ((6, 4), "(a b) c -> a b c", {"a": 2, "c": 5}),
    ((6, 4), "(a b) c -> a b c", {"a": 7}),
]


def _outcome(fn, x, pattern, lengths):
    """None when ``fn`` accepts the arguments, else its error's type and message."""
    return outcome(lambda: fn(x, pattern, **lengths), quiet=True, message=_sorted_sets,
                   describe=lambda _: None)


def _sorted_sets(text):
    """The message with each printed set of names sorted (sets print in hash order)."""
    return re.sub(r"\{[^{}]*\}", lambda m: str(sorted(eval(m.group(0)))), text)


@pytest.mark.parametrize("shape,pattern,lengths", BAD)
def test_rearrange_errors_match_torch(shape, pattern, lengths):
    t, e = _pair(shape)
    expected = _outcome(torch.func.rearrange, t, pattern, lengths)
    assert expected is not None
    assert _outcome(rearrange, e, pattern, lengths) == expected


@pytest.mark.parametrize("tensors", [[], [(2, 3), (1, 3)]])
def test_rearrange_bad_sequences_match_torch(tensors):
    theirs = [_pair(s)[0] for s in tensors]
    ours = [_pair(s)[1] for s in tensors]
    expected = _outcome(torch.func.rearrange, theirs, "s a b -> a s b", {})
    assert _outcome(rearrange, ours, "s a b -> a s b", {})[0] == expected[0]


def test_keyword_axis_warns_like_torch():
    t, e = _pair((2, 3))
    with pytest.warns(RuntimeWarning, match="axes names that are keywords: for") as theirs:
        torch.func.rearrange(t, "for b -> b for")
    with pytest.warns(RuntimeWarning, match="axes names that are keywords: for") as ours:
        rearrange(e, "for b -> b for")
    assert str(ours[0].message) == str(theirs[0].message)
