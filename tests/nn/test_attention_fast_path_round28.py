"""PyTorch's fused inference fast path as ember shows it (NOTE [Attention fast path]): in eval
mode without gradients, TransformerEncoderLayer reads float masks as boolean ones and a query
masked from every key comes out NaN; MultiheadAttention does the latter for boolean masks."""

import math

import numpy as np

import ember


def _layer(heads=2):
    ember.manual_seed(0)
    return ember.nn.TransformerEncoderLayer(8, heads, 16, dropout=0.0, batch_first=True)


def _x():
    rng = np.random.default_rng(0)
    return ember.from_numpy(rng.standard_normal((2, 4, 8)).astype(np.float32))


def test_float_padding_mask_reads_as_boolean_in_eval_no_grad():
    layer, x = _layer(), _x()
    soft = ember.tensor([[0., -0.5, 0., 0.], [0., 0., 0., 2.]])
    hard = soft != 0
    with ember.no_grad():
        fast = layer.eval()(x, src_key_padding_mask=soft)
        composite_soft = layer.train()(x, src_key_padding_mask=soft)
        composite_hard = layer.train()(x, src_key_padding_mask=hard)
    np.testing.assert_allclose(fast.numpy(), composite_hard.numpy(), rtol=1e-6, atol=1e-6)
    assert np.abs(fast.numpy() - composite_soft.numpy()).max() > 1e-3


def test_fully_masked_query_is_nan_only_on_the_fast_path():
    layer, x = _layer(), _x()
    causal = ember.nn.Transformer.generate_square_subsequent_mask(4)
    pad = ember.tensor([[True, False, False, False], [False] * 4])
    layer.eval()
    with ember.no_grad():
        fast = layer(x, src_mask=causal, src_key_padding_mask=pad).numpy()
    nan_rows = np.isnan(fast).all(-1)
    assert nan_rows.tolist() == [[True, False, False, False], [False] * 4]
    assert not np.isnan(fast).any(-1)[~nan_rows].any()
    slow = layer(x, src_mask=causal, src_key_padding_mask=pad).detach().numpy()
    assert not np.isnan(slow).any()       # gradients wanted: the composite path
    np.testing.assert_allclose(fast[~nan_rows], slow[~nan_rows], rtol=1e-6, atol=1e-6)
    ember.backends.mha.set_fastpath_enabled(False)
    try:
        with ember.no_grad():
            off = layer(x, src_mask=causal, src_key_padding_mask=pad).numpy()
    finally:
        ember.backends.mha.set_fastpath_enabled(True)
    assert not np.isnan(off).any()


def test_odd_head_count_and_hooks_leave_the_fast_path():
    x = _x()
    pad = ember.tensor([[True, True, True, True], [False] * 4])
    odd = _layer(heads=1).eval()
    hooked = _layer().eval()
    hooked.norm2.register_forward_hook(lambda *args: None)
    with ember.no_grad():
        for layer in (odd, hooked):
            assert not math.isnan(float(layer(x, src_key_padding_mask=pad).sum()))
        assert ember.isnan(_layer().eval()(x, src_key_padding_mask=pad)[0]).all()


def test_mha_fast_path_nan_rows_boolean_masks_only():
    ember.manual_seed(0)
    mha = ember.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = _x()
    pad = ember.tensor([[False, False, False, False], [False, False, True, True]])
    causal = ember.ones(4, 4, dtype=ember.bool).triu(1)
    with ember.no_grad():
        out, _ = mha(x, x, x, key_padding_mask=pad, attn_mask=causal, need_weights=False)
        soft, _ = mha(x, x, x, key_padding_mask=pad.float() * -1e9,
                      attn_mask=causal.float() * -1e9, need_weights=False)
        cross, _ = mha(x, x.clone(), x.clone(), key_padding_mask=pad, attn_mask=causal,
                       need_weights=False)
    # batch 1: queries 2 and 3 still see keys 0 and 1; batch 0 query 0 sees key 0
    assert not np.isnan(out.numpy()).any()
    pad[1, 0] = True
    with ember.no_grad():
        out, _ = mha(x, x, x, key_padding_mask=pad, attn_mask=causal, need_weights=False)
    assert np.isnan(out.numpy()).all(-1).tolist() == [[False] * 4, [True, False, False, False]]
    assert not np.isnan(soft.numpy()).any() and not np.isnan(cross.numpy()).any()
