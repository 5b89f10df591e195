"""nn.MultiheadAttention, F.multi_head_attention_forward and SDPA dropout, against NumPy."""

import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.nn.attention import SDPBackend, sdpa_kernel
from ember.testing import assert_close


def _np(t):
    return None if t is None else t.detach().numpy()


def _softmax(x):
    top = x.max(-1, keepdims=True)
    e = np.exp(x - top)
    return e / e.sum(-1, keepdims=True)


def _mha_ref(m, query, key, value, key_padding_mask=None, attn_mask=None, average=True):
    """NumPy transcription of multi-head attention with ``m``'s weights; (L, N, E) inputs."""
    e, h = m.embed_dim, m.num_heads
    hd = e // h
    if m._qkv_same_embed_dim:
        wq, wk, wv = np.split(_np(m.in_proj_weight), 3)
    else:
        wq, wk, wv = _np(m.q_proj_weight), _np(m.k_proj_weight), _np(m.v_proj_weight)
    bq, bk, bv = (np.split(_np(m.in_proj_bias), 3) if m.in_proj_bias is not None
                  else (0, 0, 0))
    q, k, v = query @ wq.T + bq, key @ wk.T + bk, value @ wv.T + bv
    L, N, S = q.shape[0], q.shape[1], k.shape[0]
    bias = np.zeros((N, 1, L, S))
    if attn_mask is not None:
        am = np.where(attn_mask, -np.inf, 0) if attn_mask.dtype == bool else attn_mask
        bias = bias + (am.reshape(N, h, L, S) if am.ndim == 3 else am)
    if key_padding_mask is not None:
        kp = np.where(key_padding_mask, -np.inf, 0) if key_padding_mask.dtype == bool \
            else key_padding_mask
        bias = bias + kp[:, None, None, :]
    if m.bias_k is not None:
        k = np.concatenate([k, np.broadcast_to(_np(m.bias_k), (1, N, e))])
        v = np.concatenate([v, np.broadcast_to(_np(m.bias_v), (1, N, e))])
        bias = np.concatenate([bias, np.zeros(bias.shape[:-1] + (1,))], -1)
    if m.add_zero_attn:
        k = np.concatenate([k, np.zeros((1, N, e))])
        v = np.concatenate([v, np.zeros((1, N, e))])
        bias = np.concatenate([bias, np.zeros(bias.shape[:-1] + (1,))], -1)
    heads = [x.reshape(x.shape[0], N, h, hd).transpose(1, 2, 0, 3) for x in (q, k, v)]
    w = _softmax(heads[0] @ heads[1].swapaxes(-1, -2) / math.sqrt(hd) + bias)
    out = (w @ heads[2]).transpose(2, 0, 1, 3).reshape(L, N, e)
    out = out @ _np(m.out_proj.weight).T
    if m.out_proj.bias is not None:
        out = out + _np(m.out_proj.bias)
    return out, (w.mean(1) if average else w)


def _t(a, grad=False):
    return ember.tensor(a, requires_grad=grad)


RNG = np.random.default_rng(0)


def _randn(*shape):
    return RNG.standard_normal(shape)


def _module(*args, **kwargs):
    ember.manual_seed(0)
    return nn.MultiheadAttention(*args, dtype=ember.float64, **kwargs)


# ----- construction ------------------------------------------------------------------------

def test_defaults_and_parameters():
    m = nn.MultiheadAttention(8, 2)
    assert (m.embed_dim, m.num_heads, m.head_dim, m.kdim, m.vdim) == (8, 2, 4, 8, 8)
    assert m.dropout == 0.0 and m.batch_first is False and m._qkv_same_embed_dim
    assert m.bias_k is None and m.bias_v is None and m.add_zero_attn is False
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [
        ("in_proj_weight", (24, 8)), ("in_proj_bias", (24,)), ("out_proj.weight", (8, 8)),
        ("out_proj.bias", (8,))]
    assert m.q_proj_weight is None and m.in_proj_weight.dtype is ember.float32
    assert repr(m) == ("MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear("
                       "in_features=8, out_features=8, bias=True)\n)")


def test_separate_projections_and_bias_kv():
    m = nn.MultiheadAttention(8, 2, bias=False, add_bias_kv=True, kdim=3, vdim=5,
                              dtype=ember.float64)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [
        ("q_proj_weight", (8, 8)), ("k_proj_weight", (8, 3)), ("v_proj_weight", (8, 5)),
        ("bias_k", (1, 1, 8)), ("bias_v", (1, 1, 8)), ("out_proj.weight", (8, 8))]
    assert m.in_proj_weight is None and m.in_proj_bias is None and m.out_proj.bias is None
    assert not m._qkv_same_embed_dim and m.q_proj_weight.dtype is ember.float64


def test_initialization_statistics():
    ember.manual_seed(0)
    m = nn.MultiheadAttention(256, 4, add_bias_kv=True)
    w = _np(m.in_proj_weight)
    bound = math.sqrt(6 / (256 + 768))                 # xavier_uniform_ on (3E, E)
    assert w.min() >= -bound and w.max() <= bound and w.max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound
    assert not _np(m.in_proj_bias).any() and not _np(m.out_proj.bias).any()
    out_w = _np(m.out_proj.weight)                       # Linear's U(+-1/sqrt(in_features))
    assert np.abs(out_w).max() <= 1 / 16 and np.abs(out_w).max() > 0.95 / 16
    both = np.concatenate([_np(m.bias_k).ravel(), _np(m.bias_v).ravel()])
    assert abs(both.std() - math.sqrt(1 / 256)) < 0.15 * math.sqrt(1 / 256)   # xavier_normal_


@pytest.mark.parametrize("args,error,match", [
    ((0, 2), ValueError, "embed_dim and num_heads must be greater than 0, got embed_dim=0"),
    ((8, 0), ValueError, "got embed_dim=8 and num_heads=0 instead"),
    ((8, 3), AssertionError, "embed_dim must be divisible by num_heads"),
])
def test_constructor_errors(args, error, match):
    with pytest.raises(error, match=match):
        nn.MultiheadAttention(*args)


# ----- forward against NumPy --------------------------------------------------------------

CONFIGS = [
    ({}, {}),
    ({"bias": False}, {}),
    ({"kdim": 3, "vdim": 5}, {}),
    ({"add_bias_kv": True}, {}),
    ({"add_zero_attn": True}, {}),
    ({}, {"attn_mask": "bool2d"}),
    ({}, {"attn_mask": "float3d"}),
    ({}, {"key_padding_mask": "bool"}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"attn_mask": "bool2d",
                                                    "key_padding_mask": "bool"}),
]


def _masks(spec, L, S, N, h):
    out = {}
    if spec.get("attn_mask") == "bool2d":
        mask = RNG.random((L, S)) > 0.7
        mask[:, 0] = False                              # no fully masked rows
        out["attn_mask"] = mask
    elif spec.get("attn_mask") == "float3d":
        out["attn_mask"] = _randn(N * h, L, S)
    if spec.get("key_padding_mask") == "bool":
        kpm = np.zeros((N, S), bool)
        kpm[1, -2:] = True
        out["key_padding_mask"] = kpm
    return out


@pytest.mark.parametrize("ctor,spec", CONFIGS, ids=[f"{c}-{s}" for c, s in CONFIGS])
@pytest.mark.parametrize("need_weights", [True, False])
def test_forward_matches_numpy(ctor, spec, need_weights):
    m = _module(8, 2, **ctor)
    L, S, N = 3, 4, 2
    q, k, v = _randn(L, N, 8), _randn(S, N, m.kdim), _randn(S, N, m.vdim)
    masks = _masks(spec, L, S, N, 2)
    want, want_w = _mha_ref(m, q, k, v, **masks)
    out, w = m(_t(q), _t(k), _t(v), need_weights=need_weights,
               **{n: _t(a) for n, a in masks.items()})
    np.testing.assert_allclose(_np(out), want, rtol=1e-10, atol=1e-12)
    if need_weights:
        np.testing.assert_allclose(_np(w), want_w, rtol=1e-10, atol=1e-12)
    else:
        assert w is None


def test_self_attention_batch_first_unbatched_and_per_head_weights():
    m = _module(8, 2)
    x = _randn(5, 3, 8)
    want, want_w = _mha_ref(m, x, x, x, average=False)
    t = _t(x)
    out, w = m(t, t, t, average_attn_weights=False)
    np.testing.assert_allclose(_np(out), want, rtol=1e-10, atol=1e-12)
    assert w.shape == (3, 2, 5, 5)
    np.testing.assert_allclose(_np(w), want_w, rtol=1e-10, atol=1e-12)

    mb = _module(8, 2, batch_first=True)
    tb = _t(x.transpose(1, 0, 2))
    out_b, w_b = mb(tb, tb, tb)
    np.testing.assert_allclose(_np(out_b), want.transpose(1, 0, 2), rtol=1e-10, atol=1e-12)
    assert w_b.shape == (3, 5, 5)

    u = _t(x[:, 1])
    out_u, w_u = m(u, u, u)
    np.testing.assert_allclose(_np(out_u), want[:, 1], rtol=1e-10, atol=1e-12)
    assert w_u.shape == (5, 5)


def test_float_and_bool_masks_agree_and_masked_keys_get_no_weight():
    m = _module(8, 2)
    x = _t(_randn(4, 2, 8))
    mask = ember.tensor([[False, True, False, True]] * 4)
    out_b, w_b = m(x, x, x, attn_mask=mask)
    out_f, w_f = m(x, x, x, attn_mask=ember.zeros(4, 4, dtype=ember.float64).masked_fill(
        mask, float("-inf")))
    np.testing.assert_allclose(_np(out_b), _np(out_f))
    assert not _np(w_b)[..., [1, 3]].any()
    np.testing.assert_allclose(_np(w_b).sum(-1), 1.0)


def test_fully_masked_rows():
    """A query that may attend nowhere: NaN with need_weights (a plain softmax), zeros through
    scaled_dot_product_attention, as in PyTorch."""
    m = _module(4, 2)
    x = _t(_randn(3, 2, 4))
    kpm = ember.tensor([[True, True, True], [False, False, True]])
    out, w = m(x, x, x, key_padding_mask=kpm)
    assert np.isnan(_np(out)[:, 0]).all() and np.isnan(_np(w)[0]).all()
    assert np.isfinite(_np(out)[:, 1]).all()
    out, _ = m(x, x, x, key_padding_mask=kpm, need_weights=False)
    bias = _np(m.out_proj.bias)
    np.testing.assert_allclose(_np(out)[:, 0], np.broadcast_to(bias, (3, 4)))


def test_causal_mask_hides_the_future():
    m = _module(8, 2)
    x = _randn(5, 2, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=ember.float64)
    out, _ = m(_t(x), _t(x), _t(x), attn_mask=mask, is_causal=True, need_weights=False)
    y = x.copy()
    y[3:] += 10.0                                        # change only the last positions
    out2, _ = m(_t(y), _t(y), _t(y), attn_mask=mask, is_causal=True, need_weights=False)
    np.testing.assert_allclose(_np(out)[:3], _np(out2)[:3], rtol=1e-12)
    assert not np.allclose(_np(out)[3:], _np(out2)[3:])
    want, _ = _mha_ref(m, x, x, x, attn_mask=_np(mask))
    np.testing.assert_allclose(_np(out), want, rtol=1e-10, atol=1e-12)


def test_functional_form_matches_module():
    m = _module(8, 2, kdim=3, vdim=5)
    q, k, v = _t(_randn(3, 2, 8)), _t(_randn(4, 2, 3)), _t(_randn(4, 2, 5))
    out, w = F.multi_head_attention_forward(
        q, k, v, 8, 2, None, m.in_proj_bias, None, None, False, 0.0, m.out_proj.weight,
        m.out_proj.bias, use_separate_proj_weight=True, q_proj_weight=m.q_proj_weight,
        k_proj_weight=m.k_proj_weight, v_proj_weight=m.v_proj_weight)
    want, want_w = m(q, k, v)
    np.testing.assert_allclose(_np(out), _np(want))
    np.testing.assert_allclose(_np(w), _np(want_w))


def test_gradients():
    m = _module(4, 2, add_bias_kv=True)
    q, k = _t(_randn(3, 2, 4), grad=True), _t(_randn(2, 2, 4), grad=True)
    kpm = ember.tensor([[False, False], [False, True]])

    def f(q, k, *params):
        return m(q, k, k, key_padding_mask=kpm, need_weights=False)[0]
    assert ember.autograd.gradcheck(f, [q, k])
    out = m(q, k, k)[0]
    out.sum().backward()
    assert all(p.grad is not None for p in m.parameters())


def test_dropout_only_in_training():
    m = _module(8, 2, dropout=0.5)
    x = _t(_randn(4, 2, 8))
    m.eval()
    a = m(x, x, x, need_weights=False)[0]
    np.testing.assert_allclose(_np(a), _np(m(x, x, x, need_weights=False)[0]))
    m.train()
    ember.manual_seed(1)
    b = m(x, x, x, need_weights=False)[0]
    ember.manual_seed(1)
    np.testing.assert_allclose(_np(b), _np(m(x, x, x, need_weights=False)[0]))
    assert not np.allclose(_np(a), _np(b))


def test_merge_masks():
    m = nn.MultiheadAttention(4, 2)
    x = ember.ones(2, 3, 4)
    attn = ember.zeros(3, 3, dtype=ember.bool)
    attn[0, 1] = True
    pad = ember.tensor([[False, False, False], [False, False, True]])
    assert m.merge_masks(None, None, x) == (None, None)
    merged, kind = m.merge_masks(None, pad, x)
    assert merged is pad and kind == 1
    merged, kind = m.merge_masks(attn, None, x)
    assert kind == 2 and merged.shape == (2, 2, 3, 3)
    merged, kind = m.merge_masks(attn, pad, x)
    want = np.asarray(attn)[None, None] | np.asarray(pad)[:, None, None, :]
    assert kind == 2 and merged.dtype is ember.bool
    np.testing.assert_array_equal(np.asarray(merged), np.broadcast_to(want, (2, 2, 3, 3)))


# ----- errors -------------------------------------------------------------------------------

def _errors():
    x = ember.ones(3, 2, 4)
    b = ember.bool
    return [
        ((ember.ones(1, 3, 2, 4), x, x), {}, AssertionError,
         "query should be unbatched 2D or batched 3D tensor but received 4-D query tensor"),
        ((x, ember.ones(3, 4), x), {}, AssertionError,
         "expected `key` and `value` to be 3-D but found 2-D and 3-D tensors respectively"),
        ((x, x, x), {"key_padding_mask": ember.ones(3, dtype=b)}, AssertionError,
         "expected `key_padding_mask` to be `None` or 2-D but found 1-D"),
        ((x, x, x), {"attn_mask": ember.ones(3, 4, dtype=b)}, RuntimeError,
         r"The shape of the 2D attn_mask is .*\[3, 4\]\), but should be \(3, 3\)."),
        ((x, x, x), {"attn_mask": ember.ones(3, 3, 3, dtype=b)}, RuntimeError,
         r"The shape of the 3D attn_mask is .*, but should be \(4, 3, 3\)."),
        ((x, x, x), {"attn_mask": ember.ones(3, 3, dtype=ember.int64)}, AssertionError,
         "only bool and floating types of attn_mask are supported"),
        ((x, x, x), {"key_padding_mask": ember.ones(2, 4, dtype=b)}, AssertionError,
         r"Expected key_padded_mask.shape\[1\] to be 3, but got 4"),
        ((ember.ones(3, 2, 5),) * 3, {}, AssertionError,
         "was expecting embedding dimension of 4, but got 5"),
        ((x, ember.ones(4, 2, 4), x), {}, AssertionError, "key shape .* does not match value"),
        ((x, x, x), {"is_causal": True}, RuntimeError, "Need attn_mask if specifying the "
         "is_causal hint"),
        ((x[:, 0],) * 3, {"attn_mask": ember.ones(3, 3, 3, dtype=b)}, AssertionError,
         r"Expected `attn_mask` shape to be \(2, 3, 3\)"),
    ]


@pytest.mark.parametrize("args,kwargs,error,match", _errors())
def test_forward_errors(args, kwargs, error, match):
    m = nn.MultiheadAttention(4, 2)
    with pytest.raises(error, match=match):
        m(*args, **kwargs)


def test_mismatched_mask_types_warn_at_the_module_forward():
    """Like PyTorch, the warning names the line of MultiheadAttention.forward, not __call__."""
    m = nn.MultiheadAttention(4, 2)
    x = ember.ones(3, 2, 4)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        m(x, x, x, attn_mask=ember.zeros(3, 3),
          key_padding_mask=ember.zeros(2, 3, dtype=ember.bool))
    files = [w.filename.replace("\\", "/") for w in seen if "mismatched" in str(w.message)]
    assert files and files[0].endswith("nn/modules/attention.py")


# ----- scaled_dot_product_attention's dropout ----------------------------------------------

def test_sdpa_dropout_statistics_and_scaling():
    """With value = identity the output is the dropped, rescaled weight matrix itself."""
    p, s = 0.3, 64
    q, k = ember.zeros(8, s, 4), ember.zeros(8, s, 4)        # uniform weights 1/s
    ember.manual_seed(0)
    w = _np(F.scaled_dot_product_attention(q, k, ember.eye(s).expand(8, s, s), dropout_p=p))
    dropped = w == 0
    assert abs(dropped.mean() - p) < 0.01
    np.testing.assert_allclose(w[~dropped], 1 / s / (1 - p), rtol=1e-6)
    ember.manual_seed(0)
    again = F.scaled_dot_product_attention(q, k, ember.eye(s).expand(8, s, s), dropout_p=p)
    np.testing.assert_array_equal(_np(again), w)
    assert not _np(F.scaled_dot_product_attention(q, k, ember.eye(s), dropout_p=1.0)).any()


def test_sdpa_dropout_gradient_matches_composition():
    p = 0.4
    q0, k0, v0 = _randn(2, 5, 3), _randn(2, 6, 3), _randn(2, 6, 4)
    ember.manual_seed(3)
    kept = _np(F.scaled_dot_product_attention(_t(q0), _t(k0), ember.eye(6, dtype=ember.float64)
                                              .expand(2, 6, 6), dropout_p=p)) != 0
    q, k, v = _t(q0, True), _t(k0, True), _t(v0, True)
    ember.manual_seed(3)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
    g = _t(_randn(2, 5, 4))
    grads = ember.autograd.grad(out, [q, k, v], g)
    q2, k2, v2 = _t(q0, True), _t(k0, True), _t(v0, True)
    weights = ember.softmax(q2 @ k2.mT / math.sqrt(3), -1) * _t(kept / (1 - p))
    want_out = weights @ v2
    np.testing.assert_allclose(_np(out), _np(want_out), rtol=1e-10, atol=1e-12)
    for got, want in zip(grads, ember.autograd.grad(want_out, [q2, k2, v2], g)):
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16])
def test_sdpa_half_inputs_backward_in_float32_and_return_half_gradients(dtype):
    ember.manual_seed(0)
    full = [ember.randn(2, 3, 5, 4, requires_grad=True) for _ in range(3)]
    half = [t.detach().to(dtype).requires_grad_() for t in full]
    weights = ember.randn(2, 3, 5, 4)
    for q, k, v in (full, half):
        (F.scaled_dot_product_attention(q, k, v, is_causal=True) * weights.to(q.dtype)) \
            .sum().backward()
    for h, f in zip(half, full):
        assert h.grad.dtype is dtype
        assert_close(h.grad.float(), f.grad, atol=3e-2, rtol=3e-2)


def _flash_like_forward(xp, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa, *,
                        keep=None):
    """An SDPA forward that saves each row's log-sum-exp, as the CUDA flash kernel does (and,
    as a kernel override, keeps nothing for the node)."""
    s = q @ k.swapaxes(-1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if is_causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    top = s.max(-1, keepdims=True)
    lse = (top + np.log(np.exp(s - top).sum(-1, keepdims=True)))[..., 0]
    return np.exp(s - lse[..., None]) @ v, lse


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_backward_from_log_sum_exp_matches_the_weights_path(monkeypatch, causal):
    from ember.ops._registry import REGISTRY
    ember.manual_seed(0)
    inputs = [ember.randn(2, 3, 5, 4, dtype=ember.float64, requires_grad=True)
              for _ in range(3)]
    w, w2 = ember.randn(2, 3, 5, 4, dtype=ember.float64), [ember.randn(2, 3, 5, 4,
                                                                       dtype=ember.float64)
                                                           for _ in range(3)]

    def first_and_second_order():
        # (under the math kernel: PyTorch's CPU flash kernel has no double backward)
        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(*inputs, is_causal=causal)
        grads = ember.autograd.grad((out * w).sum(), inputs, create_graph=True)
        second = ember.autograd.grad(sum((g * v).sum() for g, v in zip(grads, w2)), inputs)
        return out, grads, second
    reference = first_and_second_order()
    monkeypatch.setattr(REGISTRY["nn.functional.scaled_dot_product_attention"], "forward",
                        _flash_like_forward)
    got = first_and_second_order()
    assert_close(got[0], reference[0])
    for g, r in zip(got[1] + got[2], reference[1] + reference[2]):
        assert_close(g, r)


def _sdpa_node(q, k, v, **kw):
    return F.scaled_dot_product_attention(q, k, v, **kw).grad_fn.name()


def _req(*shape):
    return ember.ones(*shape, requires_grad=True)


@pytest.mark.parametrize("shapes,kw,name", [
    (((2, 4, 3, 8), (2, 4, 5, 8), (2, 4, 5, 8)), {},
     "ScaledDotProductFlashAttentionForCpuBackward0"),
    (((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8)), {"enable_gqa": True},
     "ScaledDotProductFlashAttentionForCpuBackward0"),
    (((2, 4, 3, 8), (2, 4, 5, 8), (2, 4, 5, 6)), {}, "UnsafeViewBackward0"),     # value dim
    (((2, 4, 3, 8), (1, 4, 5, 8), (1, 4, 5, 8)), {}, "UnsafeViewBackward0"),     # batch bcast
    (((2, 4, 3, 8), (2, 1, 5, 8), (2, 1, 5, 8)), {}, "UnsafeViewBackward0"),     # head bcast
    (((2, 4, 3, 8), (2, 4, 5, 8), (2, 4, 5, 8)), {"dropout_p": 0.5}, "UnsafeViewBackward0"),
    (((4, 3, 8), (4, 5, 8), (4, 5, 8)), {}, "UnsafeViewBackward0"),
    (((2, 4, 0, 8), (2, 4, 5, 8), (2, 4, 5, 8)), {}, "AddBackward0"),             # L = 0
    (((2, 4, 3, 8), (2, 4, 0, 8), (2, 4, 0, 8)), {}, "AddBackward0"),             # S = 0
    (((0, 3, 8), (0, 5, 8), (0, 5, 8)), {}, "AddBackward0"),
    (((2, 4, 3, 0), (2, 4, 5, 0), (2, 4, 5, 8)), {}, "UnsafeViewBackward0"),     # E = 0
])
def test_sdpa_node_name_follows_pytorch_cpu_kernel_choice(shapes, kw, name):
    # PyTorch names the node after the CPU kernel it picks; flash needs equal batch, heads
    # (unless grouped) and head sizes, no dropout and non-empty sequences
    assert _sdpa_node(*(_req(*s) for s in shapes), **kw) == name


def test_sdpa_node_name_non_unit_last_stride_is_math():
    q = _req(2, 4, 8, 3).transpose(2, 3)
    assert _sdpa_node(q, _req(2, 4, 5, 8), _req(2, 4, 5, 8)) == "UnsafeViewBackward0"


@pytest.mark.parametrize("given,message", [
    ("k", "bias_k is set but bias_v is None"), ("v", "bias_v is set but bias_k is None")])
def test_mha_forward_one_of_bias_k_bias_v_names_the_missing_one(given, message):
    q, w, b = ember.ones(3, 2, 4), ember.ones(12, 4), ember.ones(12)
    bias = ember.ones(1, 1, 4)
    bk, bv = (bias, None) if given == "k" else (None, bias)
    with pytest.raises(AssertionError, match=message):
        F.multi_head_attention_forward(q, q, q, 4, 2, w, b, bk, bv, False, 0.0,
                                       ember.ones(4, 4), None)


@pytest.mark.parametrize("average,name", [(True, "MeanBackward1"), (False, "ViewBackward0")])
def test_mha_weights_node_names(average, name):
    # PyTorch takes the softmax over (batch * heads, L, S) and views it as (batch, heads, L, S)
    m = nn.MultiheadAttention(4, 2)
    x = ember.ones(3, 2, 4)
    _, w = m(x, x, x, average_attn_weights=average)
    assert w.grad_fn.name() == name
    assert tuple(w.shape) == ((2, 3, 3) if average else (2, 2, 3, 3))


def test_mha_key_of_another_batch_size_fails_in_the_head_split():
    m = nn.MultiheadAttention(4, 2)
    q, kv = ember.ones(3, 2, 4), ember.ones(5, 3, 4)
    with pytest.raises(RuntimeError, match=r"shape '\[5, 4, 2\]' is invalid for input of "
                                           r"size 60"):
        m(q, kv, kv)
