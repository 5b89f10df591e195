"""ember.nn.attention.bias: CausalBias masks against the dense boolean masks they stand for,
in F.scaled_dot_product_attention (values, gradients, options), and their errors."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn.attention import bias
from ember.nn.attention.bias import (CausalBias, CausalVariant, causal_lower_right,
                                     causal_upper_left)
from ember.testing import assert_close

SIZES = [(4, 4), (3, 6), (6, 3), (1, 5), (5, 1)]
FACTORIES = [causal_upper_left, causal_lower_right]


def _make(factory, L, S):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # lower right with L > S warns (tested below)
        return factory(L, S)


def _qkv(L, S, heads=(2, 3), seed=0, kv_heads=None):
    rng = np.random.default_rng(seed)
    kv = heads if kv_heads is None else heads[:-1] + (kv_heads,)
    return [ember.tensor(rng.standard_normal(shape + (n, 4)).astype(np.float32),
                         requires_grad=True) for shape, n in ((heads, L), (kv, S), (kv, S))]


def _attend(mask, L, S, device="cpu", **kwargs):
    """SDPA's output and the gradients of (q, k, v) for ``mask``, from fixed inputs."""
    q, k, v = (t.detach().to(device).requires_grad_()
               for t in _qkv(L, S, kv_heads=kwargs.pop("kv_heads", None)))
    out = F.scaled_dot_product_attention(q, k, v, mask, **kwargs)
    weight = ember.arange(out.numel(), device=device).reshape(out.shape).cos()
    (out * weight).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


def test_module_names():
    assert bias.__all__ == ["causal_upper_left", "causal_lower_right", "CausalVariant",
                            "CausalBias"]
    assert issubclass(CausalVariant, int)
    assert (CausalVariant.UPPER_LEFT, CausalVariant.LOWER_RIGHT) == (1, 2)


@pytest.mark.parametrize("L, S", SIZES)
def test_materialize_is_the_triangle(L, S):
    upper = _make(causal_upper_left, L, S)._materialize()
    lower = _make(causal_lower_right, L, S)._materialize()
    assert upper.dtype is ember.bool and upper.shape == (L, S) and upper.device.type == "cpu"
    np.testing.assert_array_equal(upper.numpy(), np.tril(np.ones((L, S), bool)))
    np.testing.assert_array_equal(lower.numpy(), np.tril(np.ones((L, S), bool), S - L))


def test_materialize_examples_and_repr():
    lower = causal_lower_right(3, 4)
    np.testing.assert_array_equal(lower._materialize().numpy(),
                                  [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]])
    assert repr(lower) == repr(lower._materialize()) == str(lower)
    assert repr(causal_upper_left(2, 3)) == ("tensor([[ True, False, False],\n"
                                             "        [ True,  True, False]])")
    assert (lower.variant, lower.seq_len_q, lower.seq_len_kv) == (CausalVariant.LOWER_RIGHT,
                                                                  3, 4)


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("L, S", SIZES)
def test_sdpa_equals_the_dense_mask(factory, L, S):
    lazy = _attend(_make(factory, L, S), L, S)
    dense = _attend(_make(factory, L, S)._materialize(), L, S)
    for got, want in zip(lazy, dense):
        assert_close(got, want)


def test_lower_right_differs_from_upper_left_when_lengths_differ():
    q, k, v = _qkv(3, 6)
    lower = F.scaled_dot_product_attention(q, k, v, causal_lower_right(3, 6))
    upper = F.scaled_dot_product_attention(q, k, v, causal_upper_left(3, 6))
    unmasked = F.scaled_dot_product_attention(q, k, v)
    assert_close(upper[..., 0, :], v[..., 0, :])            # the first query sees key 0 only
    assert_close(lower[..., -1, :], unmasked[..., -1, :])   # the last query sees every key
    first = F.scaled_dot_product_attention(q[..., :1, :], k[..., :4, :], v[..., :4, :])
    assert_close(lower[..., :1, :], first)                  # the first sees keys 0..3


@pytest.mark.parametrize("factory", FACTORIES)
def test_upper_left_and_square_biases_are_is_causal(factory):
    for got, want in zip(_attend(factory(5, 5), 5, 5), _attend(None, 5, 5, is_causal=True)):
        assert_close(got, want)
    # as PyTorch: the causal flag is used, the bias's own lengths are not checked
    for got, want in zip(_attend(factory(9, 9), 5, 5), _attend(None, 5, 5, is_causal=True)):
        assert_close(got, want)


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("kwargs", [{"scale": 0.3}, {"enable_gqa": True, "kv_heads": 1}])
def test_options_pass_through(factory, kwargs):
    lazy = _attend(factory(3, 5), 3, 5, **kwargs)
    dense = _attend(factory(3, 5)._materialize(), 3, 5, **kwargs)
    unscaled = _attend(factory(3, 5), 3, 5, kv_heads=kwargs.get("kv_heads"),
                       enable_gqa=kwargs.get("enable_gqa", False))
    for got, want in zip(lazy, dense):
        assert_close(got, want)
    if "scale" in kwargs:
        assert not np.allclose(lazy[0].numpy(), unscaled[0].numpy())


@pytest.mark.parametrize("factory", FACTORIES)
def test_dropout_draws_as_with_the_dense_mask(factory):
    ember.manual_seed(3)
    lazy = _attend(factory(4, 6), 4, 6, dropout_p=0.5)
    ember.manual_seed(3)
    dense = _attend(factory(4, 6)._materialize(), 4, 6, dropout_p=0.5)
    for got, want in zip(lazy, dense):
        assert_close(got, want)
    assert not np.allclose(lazy[0].numpy(), _attend(factory(4, 6), 4, 6)[0].numpy())


def test_keyword_call_and_plain_output():
    q, k, v = _qkv(2, 3)
    out = F.scaled_dot_product_attention(query=q, key=k, value=v,
                                         attn_mask=causal_lower_right(2, 3))
    assert type(out) is ember.Tensor
    assert_close(out, F.scaled_dot_product_attention(q, k, v, causal_lower_right(2, 3)
                                                     ._materialize()))


def test_placeholder_as_pytorch():
    m = causal_lower_right(3, 5)
    assert (m.shape, m.dtype, m.device.type, m.requires_grad) == ((2, 3, 5), ember.float32,
                                                                   "cpu", False)
    assert len(causal_upper_left(3, 5)) == 1
    out = m + 1
    assert type(out) is CausalBias and out.shape == (2, 3, 5) and not out.__dict__
    assert m.float() is m
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor"):
        ember.where(m, 1, 0)
    huge = causal_lower_right(200_000, 200_000)      # PyTorch's would allocate 320 GB
    assert huge.shape == (2, 200_000, 200_000)


def test_construction_errors():
    for factory in FACTORIES:
        for size in [(3,), (3, 4, 5), ((3, 4),)]:
            with pytest.raises(AssertionError, match=f"{factory.__name__} only supports 2D"):
                factory(*size)
    with pytest.raises(AssertionError, match="variant must be a CausalVariant, got int"):
        CausalBias(1, 3, 4)
    with pytest.raises(TypeError, match="at pos 2 with error \"type must be tuple of ints,but "
                                        "got float\""):
        causal_upper_left(3.0, 4)
    with pytest.raises(RuntimeError, match=r"negative dimension -1: \[1, -1, 4\]"):
        causal_upper_left(-1, 4)


def test_lower_right_warns_when_queries_outnumber_keys():
    with pytest.warns(UserWarning, match="Lower right causal bias will produce NaNs in the "
                                         "output when seq_len_q > seq_len_kv!"):
        causal_lower_right(5, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        causal_lower_right(3, 3), causal_upper_left(5, 3), causal_lower_right(3, 5)


def test_sdpa_errors():
    q, k, v = _qkv(2, 3)
    with pytest.raises(ValueError, match="CausalBias should not be used with causal=True"):
        F.scaled_dot_product_attention(q, k, v, causal_upper_left(2, 3), is_causal=True)
    with pytest.raises(ValueError, match="have the same dtype, but got query.dtype: "
                                         "ember.float32, key.dtype: ember.float64, and"):
        F.scaled_dot_product_attention(q, k.double(), v, causal_lower_right(2, 3))
    one = ember.ones(3)
    with pytest.raises(ValueError, match="at least 2 dimensional, but got query.dim: 1, "):
        F.scaled_dot_product_attention(one, one, one, causal_lower_right(2, 3))
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(2\) must match the size "
                                           r"of tensor b \(4\) at non-singleton dimension 2"):
        F.scaled_dot_product_attention(q, k, v, _make(causal_lower_right, 4, 3))


def test_multihead_attention_as_pytorch():
    """PyTorch's MultiheadAttention sees the placeholder and rejects its shape; with the
    is_causal hint and no weights it drops the mask and attends causally."""
    ember.manual_seed(0)
    mha = ember.nn.MultiheadAttention(8, 2, batch_first=True)
    x = ember.randn(2, 4, 8)
    with pytest.raises(RuntimeError, match=r"The shape of the 3D attn_mask is "
                                           r"ember.Size\(\[1, 4, 4\]\), but should be"):
        mha(x, x, x, attn_mask=causal_upper_left(4, 4))
    out = mha(x, x, x, attn_mask=causal_upper_left(4, 4), is_causal=True, need_weights=False)
    want = mha(x, x, x, attn_mask=~ember.ones(4, 4, dtype=ember.bool).tril())
    assert_close(out[0], want[0])
