"""Transformer, TransformerEncoder(Layer), TransformerDecoder(Layer), against NumPy."""

import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.nn.modules.transformer import (_detect_is_causal_mask,
                                          _generate_square_subsequent_mask)
from tests.nn.test_attention import _mha_ref, _np

# the layers come from other parts of ember.nn; these tests need them all
needs_layers = pytest.mark.skipif(
    not all(hasattr(nn, n) for n in ("Linear", "LayerNorm", "Dropout", "ModuleList"))
    or not all(hasattr(F, n) for n in ("relu", "gelu")),
    reason="needs nn.Linear, nn.LayerNorm, nn.Dropout, nn.ModuleList, F.relu and F.gelu")

RNG = np.random.default_rng(0)
F64 = {"dtype": ember.float64}


def _randn(*shape):
    return RNG.standard_normal(shape)


def _layer_norm(x, norm):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + norm.eps) * _np(norm.weight)
    return y if norm.bias is None else y + _np(norm.bias)


def _linear(x, lin):
    y = x @ _np(lin.weight).T
    return y if lin.bias is None else y + _np(lin.bias)


def _act(x, name):
    if name == "relu":
        return np.maximum(x, 0)
    from scipy.special import erf
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def _ff(layer, x, act):
    return _linear(_act(_linear(x, layer.linear1), act), layer.linear2)


def _encoder_layer_ref(layer, x, act="relu", mask=None):
    def sa(y):
        return _mha_ref(layer.self_attn, y, y, y, attn_mask=mask)[0]
    if layer.norm_first:
        x = x + sa(_layer_norm(x, layer.norm1))
        return x + _ff(layer, _layer_norm(x, layer.norm2), act)
    x = _layer_norm(x + sa(x), layer.norm1)
    return _layer_norm(x + _ff(layer, x, act), layer.norm2)


def _decoder_layer_ref(layer, x, mem, tgt_mask=None):
    def sa(y):
        return _mha_ref(layer.self_attn, y, y, y, attn_mask=tgt_mask)[0]

    def ca(y):
        return _mha_ref(layer.multihead_attn, y, mem, mem)[0]
    if layer.norm_first:
        x = x + sa(_layer_norm(x, layer.norm1))
        x = x + ca(_layer_norm(x, layer.norm2))
        return x + _ff(layer, _layer_norm(x, layer.norm3), "relu")
    x = _layer_norm(x + sa(x), layer.norm1)
    x = _layer_norm(x + ca(x), layer.norm2)
    return _layer_norm(x + _ff(layer, x, "relu"), layer.norm3)


# ----- masks (no other layers needed) --------------------------------------------------------

def test_generate_square_subsequent_mask():
    m = nn.Transformer.generate_square_subsequent_mask(4)
    want = np.triu(np.full((4, 4), -np.inf, dtype=np.float32), 1)
    assert m.dtype is ember.float32
    np.testing.assert_array_equal(_np(m), want)
    m64 = _generate_square_subsequent_mask(3, dtype=ember.float64)
    assert m64.dtype is ember.float64 and m64.shape == (3, 3)
    np.testing.assert_array_equal(_np(m64), np.triu(np.full((3, 3), -np.inf), 1))


def test_detect_is_causal_mask():
    causal = _generate_square_subsequent_mask(4)
    assert _detect_is_causal_mask(causal) is True
    assert _detect_is_causal_mask(causal, size=4) is True
    assert _detect_is_causal_mask(causal, size=3) is False
    assert _detect_is_causal_mask(ember.zeros(4, 4)) is False
    assert _detect_is_causal_mask(ember.zeros(4, 4), is_causal=True) is True
    assert _detect_is_causal_mask(causal, is_causal=False) is False
    assert _detect_is_causal_mask(None) is False


# ----- layers ---------------------------------------------------------------------------

@needs_layers
def test_encoder_layer_defaults_and_parameter_names():
    layer = nn.TransformerEncoderLayer(8, 2)
    assert layer.linear1.out_features == 2048 and layer.dropout.p == 0.1
    assert layer.norm1.eps == 1e-5 and layer.norm_first is False
    assert layer.self_attn.batch_first is False and layer.activation_relu_or_gelu == 1
    assert [n for n, _ in layer.named_parameters()] == [
        "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
        "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
        "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
    assert [n for n, _ in layer.named_children()] == [
        "self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1", "dropout2"]
    assert nn.TransformerEncoderLayer(8, 2, activation="gelu").activation_relu_or_gelu == 2
    custom = nn.TransformerEncoderLayer(8, 2, activation=ember.tanh)
    assert custom.activation is ember.tanh and custom.activation_relu_or_gelu == 0
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


@needs_layers
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_encoder_layer_matches_numpy(norm_first, act):
    ember.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, activation=act, norm_first=norm_first, **F64)
    layer.eval()
    x = _randn(5, 3, 8)
    mask = _generate_square_subsequent_mask(5, dtype=ember.float64)
    out = layer(ember.tensor(x), src_mask=mask)
    np.testing.assert_allclose(_np(out), _encoder_layer_ref(layer, x, act, _np(mask)),
                               rtol=1e-9, atol=1e-10)
    causal = layer(ember.tensor(x), src_mask=mask, is_causal=True)
    np.testing.assert_allclose(_np(causal), _np(out), rtol=1e-12, atol=1e-12)


@needs_layers
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_numpy(norm_first):
    ember.manual_seed(0)
    layer = nn.TransformerDecoderLayer(8, 2, 16, norm_first=norm_first, batch_first=True, **F64)
    layer.eval()
    assert [n for n, _ in layer.named_children()] == [
        "self_attn", "multihead_attn", "linear1", "dropout", "linear2", "norm1", "norm2",
        "norm3", "dropout1", "dropout2", "dropout3"]
    x, mem = _randn(3, 4, 8), _randn(3, 5, 8)
    mask = _generate_square_subsequent_mask(4, dtype=ember.float64)
    out = layer(ember.tensor(x), ember.tensor(mem), tgt_mask=mask)
    want = _decoder_layer_ref(layer, x.transpose(1, 0, 2), mem.transpose(1, 0, 2), _np(mask))
    np.testing.assert_allclose(_np(out), want.transpose(1, 0, 2), rtol=1e-9, atol=1e-10)


@needs_layers
def test_dropout_in_training_only():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = ember.randn(4, 2, 8)
    layer.eval()
    np.testing.assert_array_equal(_np(layer(x)), _np(layer(x)))
    layer.train()
    assert not np.allclose(_np(layer(x)), _np(layer(x)))


# ----- stacks ---------------------------------------------------------------------------

@needs_layers
def test_encoder_clones_layers_and_applies_norm():
    ember.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **F64)
    enc = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(8, **F64))
    assert enc.num_layers == 3 and len(enc.layers) == 3 and enc.enable_nested_tensor
    assert enc.layers[0] is not layer and enc.layers[0].linear1.weight is not layer.linear1.weight
    np.testing.assert_array_equal(_np(enc.layers[2].linear1.weight), _np(layer.linear1.weight))
    assert len(list(enc.parameters())) == 3 * 12 + 2
    with ember.no_grad():
        enc.layers[1].linear1.weight.mul_(2)
    assert not np.allclose(_np(enc.layers[0].linear1.weight), _np(enc.layers[1].linear1.weight))
    x = ember.tensor(_randn(5, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=ember.float64)
    out = enc(x, mask=mask)
    want = x
    for sub in enc.layers:
        want = sub(want, src_mask=mask)
    np.testing.assert_allclose(_np(out), _np(enc.norm(want)), rtol=1e-12, atol=1e-12)


@needs_layers
def test_encoder_nested_tensor_rules():
    # PyTorch's warning when the layer rules nested tensors out; where it would pack a padded
    # batch (eval, no grad, right padding, no mask) the padded positions come back as 0
    with pytest.warns(UserWarning, match="^enable_nested_tensor is True, but "
                                         "self.use_nested_tensor is False because "
                                         "encoder_layer.self_attn.num_heads is odd$"):
        layer = nn.TransformerEncoderLayer(6, 3, 8, batch_first=True)
        assert not nn.TransformerEncoder(layer, 1).use_nested_tensor
    ember.manual_seed(0)
    norm = nn.LayerNorm(8, **F64)
    with ember.no_grad():
        norm.bias.copy_(ember.arange(8.))
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                          batch_first=True, **F64), 1, norm=norm)
    assert enc.use_nested_tensor
    x = ember.tensor(_randn(2, 4, 8))
    pad = ember.tensor([[False, False, True, True], [True, True, True, True]])
    trained = enc(x, src_key_padding_mask=pad)          # training: every position computed
    enc.eval()
    with ember.no_grad():
        out = enc(x, src_key_padding_mask=pad)
        inner = enc(x, src_key_padding_mask=ember.tensor([[False, True, False, False]] * 2))
    np.testing.assert_allclose(_np(out[0, :2]), _np(trained[0, :2]), rtol=1e-12)
    assert _np(out[0, 2:]).tolist() == [list(range(8))] * 2     # the norm of 0 is its bias
    assert _np(out[1]).tolist() == [list(range(8))] * 4          # a row all padding
    assert _np(inner[0, 1]).tolist() != list(range(8))          # not left-aligned: computed


@needs_layers
def test_encoder_mask_check_rejects_wrong_padding_mask_size_in_eval():
    # PyTorch's left-alignment check comes before its gradient check: in eval it raises for a
    # padding mask of the wrong size, with gradients on too; in training MHA's assertion does
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0,
                                                          batch_first=True), 1)
    x, bad = ember.ones(2, 5, 4), ember.zeros(2, 4, dtype=ember.bool)
    with pytest.raises(AssertionError, match="key_padded_mask.shape"):
        enc(x, src_key_padding_mask=bad)
    enc.eval()
    with pytest.raises(RuntimeError, match="^Mask size should match input size"):
        enc(x, src_key_padding_mask=bad)


@needs_layers
def test_causal_encoder_does_not_look_ahead():
    ember.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **F64), 2)
    x = _randn(6, 2, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(6, dtype=ember.float64)
    y = x.copy()
    y[4:] = _randn(2, 2, 8)
    a, b = enc(ember.tensor(x), mask=mask), enc(ember.tensor(y), mask=mask)
    np.testing.assert_allclose(_np(a)[:4], _np(b)[:4], rtol=1e-12, atol=1e-12)
    assert not np.allclose(_np(a)[4:], _np(b)[4:])
    c = enc(ember.tensor(x), mask=mask, is_causal=True)
    np.testing.assert_allclose(_np(c), _np(a), rtol=1e-12, atol=1e-12)


@needs_layers
def test_decoder_stack_and_key_padding():
    ember.manual_seed(0)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, **F64), 2)
    tgt, mem = ember.tensor(_randn(4, 2, 8)), ember.tensor(_randn(5, 2, 8))
    kpm = ember.tensor([[False] * 5, [False, False, False, True, True]])
    out = dec(tgt, mem, memory_key_padding_mask=kpm)
    # padded memory positions do not matter
    mem2 = mem.clone()
    with ember.no_grad():
        mem2[3:, 1] = 100.0
    np.testing.assert_allclose(_np(dec(tgt, mem2, memory_key_padding_mask=kpm)), _np(out),
                               rtol=1e-12, atol=1e-12)


@needs_layers
def test_transformer_construction_and_init():
    ember.manual_seed(0)
    t = nn.Transformer(16, 4, 2, 1, 32)
    assert (t.d_model, t.nhead, t.batch_first) == (16, 4, False)
    assert len(t.encoder.layers) == 2 and len(t.decoder.layers) == 1
    assert t.encoder.norm is not None and t.decoder.norm is not None
    w = _np(t.encoder.layers[0].linear1.weight)          # xavier_uniform_ on every matrix
    bound = math.sqrt(6 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    out_w = _np(t.decoder.layers[0].self_attn.out_proj.weight)
    assert np.abs(out_w).max() <= math.sqrt(6 / 32)
    names = [n for n, _ in t.named_parameters()]
    assert names[0] == "encoder.layers.0.self_attn.in_proj_weight"
    assert names[-1] == "decoder.norm.bias" and len(names) == 2 * 12 + 2 + 18 + 2


@needs_layers
def test_transformer_forward_and_errors():
    ember.manual_seed(0)
    t = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True, **F64)
    src, tgt = ember.tensor(_randn(2, 5, 8)), ember.tensor(_randn(2, 3, 8))
    mask = t.generate_square_subsequent_mask(3, dtype=ember.float64)
    out = t(src, tgt, tgt_mask=mask)
    memory = t.encoder(src)
    np.testing.assert_allclose(_np(out), _np(t.decoder(tgt, memory, tgt_mask=mask)),
                               rtol=1e-12, atol=1e-12)
    assert out.shape == (2, 3, 8)
    out.sum().backward()
    assert all(p.grad is not None for p in t.parameters())
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        t(src, ember.ones(3, 3, 8, **F64))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal "
                                           "to d_model"):
        t(ember.ones(2, 5, 4, **F64), ember.ones(2, 3, 4, **F64))
    unbatched = t(src[0], tgt[0], tgt_mask=mask)
    np.testing.assert_allclose(_np(unbatched), _np(out[0]), rtol=1e-10, atol=1e-12)


@needs_layers
def test_transformer_custom_encoder_decoder():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 1)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16), 1)
    t = nn.Transformer(8, 2, custom_encoder=enc, custom_decoder=dec)
    assert t.encoder is enc and t.decoder is dec
