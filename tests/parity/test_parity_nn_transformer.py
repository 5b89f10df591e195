"""MultiheadAttention and the Transformer stack against PyTorch, with the same weights."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

needs_layers = pytest.mark.skipif(
    not all(hasattr(nn, n) for n in ("Linear", "LayerNorm", "Dropout", "ModuleList"))
    or not all(hasattr(F, n) for n in ("relu", "gelu")),
    reason="needs nn.Linear, nn.LayerNorm, nn.Dropout, nn.ModuleList, F.relu and F.gelu")

RNG = np.random.default_rng(0)


def _copy_weights(em, tm):
    theirs = dict(tm.named_parameters())
    ours = dict(em.named_parameters())
    assert list(ours) == list(theirs)
    with torch.no_grad():
        for name, p in ours.items():
            theirs[name].copy_(torch.from_numpy(p.detach().numpy()))


def _convert(x, lib):
    if isinstance(x, np.ndarray):
        return ember.tensor(x) if lib is ember else torch.from_numpy(x)
    return x


def _compare(em, tm, inputs, kwargs, same=False):
    """Outputs, weights and every gradient of ember's and torch's modules agree."""
    em.eval()
    tm.eval()
    _copy_weights(em, tm)
    ours = [ember.tensor(x, requires_grad=True) for x in inputs]
    theirs = [torch.tensor(x, requires_grad=True) for x in inputs]
    if same:                                    # self-attention: one tensor three times
        ours, theirs = ours * 3, theirs * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = em(*ours, **{k: _convert(v, ember) for k, v in kwargs.items()})
        ref = tm(*theirs, **{k: _convert(v, torch) for k, v in kwargs.items()})
    if isinstance(ref, tuple):
        (out, weights), (ref, ref_w) = out, ref
        assert (weights is None) == (ref_w is None)
        if ref_w is not None:
            np.testing.assert_allclose(weights.detach().numpy(), ref_w.detach().numpy(),
                                       rtol=1e-9, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-9,
                               atol=1e-12, equal_nan=True)
    grad = RNG.standard_normal(tuple(ref.shape))
    out.backward(ember.tensor(grad))
    ref.backward(torch.from_numpy(grad))
    theirs_p = dict(tm.named_parameters())
    for name, p in em.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), theirs_p[name].grad.numpy(), rtol=1e-9,
                                   atol=1e-12, err_msg=name)
    for a, b in zip(ours[:len(inputs)], theirs[:len(inputs)]):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


def _randn(*shape):
    return RNG.standard_normal(shape)


def _pad_mask():
    return np.array([[False, False, False, False], [False, False, True, True]])


MHA_CASES = {
    "plain": ({}, {}),
    "no_weights": ({}, {"need_weights": False}),
    "per_head": ({}, {"average_attn_weights": False}),
    "no_bias": ({"bias": False}, {}),
    "kdim_vdim": ({"kdim": 3, "vdim": 5}, {}),
    "bias_kv_zero_attn": ({"add_bias_kv": True, "add_zero_attn": True},
                          {"key_padding_mask": _pad_mask(),
                           "attn_mask": RNG.random((3, 4)) > 0.8}),
    "bool_mask": ({}, {"attn_mask": RNG.random((3, 4)) > 0.6}),
    "float_mask_3d_no_weights": ({}, {"attn_mask": _randn(4, 3, 4), "need_weights": False}),
    "padding_no_weights": ({}, {"key_padding_mask": _pad_mask(), "need_weights": False}),
    "float_masks": ({}, {"key_padding_mask": _randn(2, 4), "attn_mask": _randn(3, 4)}),
    "masked_row": ({}, {"key_padding_mask": np.array([[True] * 4, [False] * 4])}),
}


@pytest.mark.parametrize("case", list(MHA_CASES))
def test_multihead_attention(case):
    ctor, kwargs = MHA_CASES[case]
    em = nn.MultiheadAttention(8, 2, dtype=ember.float64, **ctor)
    tm = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64, **ctor)
    kdim, vdim = ctor.get("kdim", 8), ctor.get("vdim", 8)
    _compare(em, tm, [_randn(3, 2, 8), _randn(4, 2, kdim), _randn(4, 2, vdim)], kwargs)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_self_attention_causal(batch_first, need_weights):
    em = nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=ember.float64)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=torch.float64)
    mask = np.triu(np.full((5, 5), -np.inf), 1)
    x = _randn(3, 5, 8) if batch_first else _randn(5, 3, 8)
    _compare(em, tm, [x], {"attn_mask": mask, "is_causal": True,
                                         "need_weights": need_weights}, same=True)


def test_unbatched_with_3d_mask():
    em = nn.MultiheadAttention(8, 2, dtype=ember.float64)
    tm = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64)
    _compare(em, tm, [_randn(3, 8), _randn(4, 8), _randn(4, 8)],
             {"attn_mask": RNG.random((2, 3, 4)) > 0.7, "average_attn_weights": False})


def test_sdpa_double_backward():
    q, k, v = _randn(2, 3, 4), _randn(2, 5, 4), _randn(2, 5, 3)
    mask = RNG.random((3, 5)) > 0.3
    grads = []
    for lib, fn in ((ember, F.scaled_dot_product_attention),
                    (torch, torch.nn.functional.scaled_dot_product_attention)):
        ts = [lib.tensor(x, requires_grad=True) for x in (q, k, v)]
        out = fn(*ts, attn_mask=lib.tensor(mask))
        first = lib.autograd.grad((out * out).sum(), ts, create_graph=True)
        second = lib.autograd.grad(sum((g * g).sum() for g in first), ts)
        grads.append([g.detach().numpy() for g in first + second])
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


LAYER_CASES = {
    "post_norm_relu": {},
    "pre_norm_gelu": {"norm_first": True, "activation": "gelu"},
    "batch_first_no_bias": {"batch_first": True, "bias": False},
}


def _seq(length, batch, kw):
    return _randn(batch, length, 8) if kw.get("batch_first") else _randn(length, batch, 8)


@needs_layers
@pytest.mark.parametrize("case", list(LAYER_CASES))
def test_encoder_layer(case):
    kw = LAYER_CASES[case]
    em = nn.TransformerEncoderLayer(8, 2, 16, dtype=ember.float64, **kw)
    tm = torch.nn.TransformerEncoderLayer(8, 2, 16, dtype=torch.float64, **kw)
    mask = np.triu(np.full((5, 5), -np.inf), 1)
    padding = np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 5])
    _compare(em, tm, [_seq(5, 3, kw)], {"src_mask": mask, "src_key_padding_mask": padding})


@needs_layers
@pytest.mark.parametrize("case", list(LAYER_CASES))
def test_decoder_layer(case):
    kw = LAYER_CASES[case]
    em = nn.TransformerDecoderLayer(8, 2, 16, dtype=ember.float64, **kw)
    tm = torch.nn.TransformerDecoderLayer(8, 2, 16, dtype=torch.float64, **kw)
    padding = np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 5])
    _compare(em, tm, [_seq(4, 3, kw), _seq(5, 3, kw)],
             {"tgt_mask": np.triu(np.full((4, 4), -np.inf), 1),
              "memory_key_padding_mask": padding, "tgt_is_causal": True})


@needs_layers
def test_transformer():
    em = nn.Transformer(8, 2, 2, 2, 16, dtype=ember.float64)
    tm = torch.nn.Transformer(8, 2, 2, 2, 16, dtype=torch.float64)
    padding = np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 5])
    _compare(em, tm, [_randn(5, 3, 8), _randn(4, 3, 8)],
             {"tgt_mask": np.triu(np.full((4, 4), -np.inf), 1), "src_key_padding_mask": padding,
              "memory_key_padding_mask": padding})
