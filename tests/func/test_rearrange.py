"""ember.func.rearrange: values against NumPy reshapes and transposes, lists of tensors,
autograd, vmap, CUDA, the pattern cache and the errors of bad patterns."""

import warnings

import numpy as np
import pytest

import ember
from ember.func import rearrange, vmap
from ember.func._rearrange import DimensionBindError, _cached_plan


def _arange(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _check(x, pattern, want, **lengths):
    got = rearrange(ember.tensor(x), pattern, **lengths)
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)


def test_transpose_merge_and_split():
    x = _arange(2, 3, 4)
    _check(x, "a b c -> c b a", x.transpose(2, 1, 0))
    _check(x, "a b c -> a (b c)", x.reshape(2, 12))
    _check(x, "a b c -> b (c a)", x.transpose(1, 2, 0).reshape(3, 8))
    _check(x, "a b (c d) -> a b d c", x.reshape(2, 3, 2, 2).transpose(0, 1, 3, 2), c=2)


def test_documented_patterns():
    x = _arange(2, 6, 4)
    _check(x, "b c (h w) -> b (c h) w", x.reshape(2, 6, 2, 2).reshape(2, 12, 2), h=2)
    y = _arange(2, 3, 8)
    _check(y, "b n (h d) -> b h n d", y.reshape(2, 3, 4, 2).transpose(0, 2, 1, 3), h=4)
    img = _arange(4, 6, 8, 3)
    want = img.reshape(4, 2, 3, 2, 4, 3).transpose(0, 1, 3, 2, 4, 5).reshape(16, 3, 4, 3)
    _check(img, "b (h1 h) (w1 w) c -> (b h1 w1) h w c", want, h1=2, w1=2)
    want = img.reshape(4, 3, 2, 4, 2, 3).transpose(0, 1, 3, 5, 2, 4).reshape(4, 3, 4, 12)
    _check(img, "b (h h1) (w w1) c -> b h w (c h1 w1)", want, h1=2, w1=2)


def test_ellipsis():
    x = _arange(2, 3, 4, 5)
    _check(x, "... h w -> ... (h w)", x.reshape(2, 3, 20))
    _check(x, "a ... -> ... a", x.transpose(1, 2, 3, 0))
    _check(x, "a ... -> a (...)", x.reshape(2, 60))
    _check(x, "a b c d ... -> d ... c b a", x.transpose(3, 2, 1, 0))
    _check(x, "... (c d) -> ... d c", x.reshape(2, 3, 4, 5, 1).transpose(0, 1, 2, 4, 3), c=5)


def test_unnamed_axes():
    x = _arange(2, 1, 3)
    _check(x, "a 1 b -> a b", x.reshape(2, 3))
    _check(x, "a () b -> b a", x.reshape(2, 3).T)
    _check(x, "a 1 b -> () a b 1", x.reshape(1, 2, 3, 1))
    _check(x, "a 1 b -> (a 1 b)", x.reshape(6))
    _check(x, "a (1 c) b -> a b c", x.transpose(0, 2, 1))
    _check(np.float32(3.0), "-> 1 ()", np.full((1, 1), 3.0, np.float32))


def test_lengths_infer_and_check():
    x = _arange(6, 4)
    _check(x, "(a b) c -> a b c", x.reshape(6, 1, 4), a=6)
    _check(x, "(a b) c -> a b c", x.reshape(2, 3, 4), a=2, b=3, c=4)
    _check(_arange(0, 6), "a (b c) -> a c b", np.zeros((0, 3, 2), np.float32), b=2)


@pytest.mark.parametrize("container", [list, tuple])
def test_sequence_is_stacked_on_a_new_first_axis(container):
    parts = [_arange(2, 3) + 10 * i for i in range(4)]
    got = rearrange(container(ember.tensor(p) for p in parts), "s a b -> a (s b)")
    np.testing.assert_array_equal(np.asarray(got), np.stack(parts).transpose(1, 0, 2)
                                  .reshape(2, 12))


def test_gradient_flows_back_through_the_rearrangement():
    x = ember.tensor(_arange(2, 6), requires_grad=True)
    w = ember.tensor(_arange(3, 2, 2))
    (rearrange(x, "a (b c) -> b c a", b=3) * w).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad),
                                  _arange(3, 2, 2).transpose(2, 0, 1).reshape(2, 6))


def test_works_under_vmap():
    x = _arange(5, 2, 6)
    got = vmap(lambda t: rearrange(t, "a (b c) -> c (a b)", c=2))(ember.tensor(x))
    want = x.reshape(5, 2, 3, 2).transpose(0, 3, 1, 2).reshape(5, 2, 6)
    np.testing.assert_array_equal(np.asarray(got), want)
    got = vmap(lambda t: rearrange(t, "... -> (...) 1"), in_dims=1)(ember.tensor(x))
    np.testing.assert_array_equal(np.asarray(got), x.transpose(1, 0, 2).reshape(2, 30, 1))


def test_parsed_pattern_is_cached():
    x = ember.zeros(2, 6)
    pattern = "cached (b c) -> c b cached"
    rearrange(x, pattern, b=2)
    hits = _cached_plan.cache_info().hits
    rearrange(ember.ones(2, 6), pattern, b=2)
    assert _cached_plan.cache_info().hits == hits + 1
    with pytest.raises(TypeError, match="got: <class 'bool'>"):
        rearrange(ember.zeros(2, 1), "a b -> a b", b=True)   # not served from the cache
    rearrange(ember.zeros(2, 1), "a b -> a b", b=1)
    with pytest.raises(TypeError, match="got: <class 'bool'>"):
        rearrange(ember.zeros(2, 1), "a b -> a b", b=True)


@pytest.mark.parametrize("pattern,lengths,error,message", [
    ("a b c", {}, ValueError, "Pattern must contain a single '->' separator"),
    ("a b -> a", {}, ValueError, r"one side .*: \{'b'\}"),
    ("a a -> a", {}, ValueError, "duplicate dimension 'a'"),
    ("a (b -> a b", {}, ValueError, r"Imbalanced parentheses in expression: 'a \(b '"),
    ("a b) -> a b", {}, ValueError, "Brackets are not balanced"),
    ("((a) b) -> a b", {}, ValueError, "Axis composition is one-level"),
    ("a b -> a b ...", {}, ValueError, "Ellipsis found in right side, but not left side"),
    ("(a ...) -> a ...", {}, ValueError, "Ellipsis is parenthesis in the left side"),
    ("... ... -> ...", {}, ValueError, "only one ellipsis for tensor"),
    ("a b. -> a b", {}, ValueError, r"dots only inside ellipsis \(\.\.\.\)$"),
    ("a b -> a b 2", {}, ValueError, "only supports unnamed axes of size 1"),
    ("a b -> a b 0", {}, ValueError, "should have positive length, not 0"),
    ("a _b -> a _b", {}, ValueError, "Invalid axis identifier: _b\naxis name should should"),
    ("a 2b -> a 2b", {}, ValueError, "Invalid axis identifier: 2b\nnot a valid python"),
    ("a b -> a,b", {}, ValueError, "Unknown character ','"),
    ("a b -> a b", {"c": 2}, ValueError, r"not found in rearrange expression: \{'c'\}"),
    ("a b -> a b", {"a": 2.0}, TypeError, "must be integers, got: <class 'float'>"),
    ("a -> a", {}, ValueError, r"pattern \(1\) must be equal to .* tensor \(2\)"),
    ("a b c ... -> a b c ...", {}, ValueError, r"\(3\) must be less than or equal to"),
    ("a b -> a b", {"b": 4}, DimensionBindError, r"\(3 != 4\) .* pack \(d1,\)"),
    ("(b c) a -> a b c", {}, DimensionBindError, "two dimensions at once d0 and d1"),
    ("a (b c) -> a b c", {"c": 2}, DimensionBindError, r"larger dimension: 3 vs \('\?', 2\)"),
    ("a (b c) -> a b c", {"b": 1, "c": 2}, DimensionBindError, r"\(3 != 2\) .* \(d1, d2\)"),
    ("1 b -> b", {}, DimensionBindError, r"\(2 != 1\) .* pack \(d0,\)"),
])
def test_bad_patterns_raise(pattern, lengths, error, message):
    with pytest.raises(error, match=message):
        rearrange(ember.zeros(2, 3), pattern, **lengths)


def test_keyword_axis_name_warns():
    with pytest.warns(RuntimeWarning, match="axes names that are keywords: in"):
        got = rearrange(ember.tensor(_arange(2, 3)), "in out -> out in")
    assert tuple(got.shape) == (3, 2)


def test_bad_sequences_raise():
    with pytest.raises(RuntimeError, match="stack expects a non-empty TensorList"):
        rearrange([], "a -> a")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuple(rearrange([ember.zeros(3)], "s a -> a s").shape) == (3, 1)
