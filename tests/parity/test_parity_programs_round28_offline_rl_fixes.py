"""What the round-28 offline-RL programs (test_parity_programs_round28_offline_rl.py) found, pinned
against PyTorch: the Decision Transformer's get_action runs nn.TransformerEncoderLayer in eval
mode under no_grad, where PyTorch takes its fused fast path, which reads a float mask as a
boolean one (any nonzero entry masks the key out) and gives NaN to a query that every key is
masked from; nn.MultiheadAttention's fast path (boolean masks only) gives those queries NaN
too. Off the fast path (training, gradients wanted, the switch off, a hook, an odd head count)
the documented math applies."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, warnings_of

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _layer(lib, rng, heads=2, **kw):
    layer = lib.nn.TransformerEncoderLayer(8, heads, 16, dropout=0.0, batch_first=True, **kw)
    fill_(lib, layer, rng, 0.4)
    return layer.eval()


def _masks(lib, kind):
    """(src_mask, src_key_padding_mask) of the kind named."""
    causal = lib.nn.Transformer.generate_square_subsequent_mask(4)
    gpt2_pad = (1.0 - lib.tensor([[0., 1., 1., 1.], [1., 1., 1., 1.]])) * -10000.0
    small_pad = lib.tensor([[0., -0.5, 0., 0.], [0., 0., 0., 2.]])
    bool_pad = lib.tensor([[True, False, False, False], [False] * 4])
    soft = lib.tensor([[0., -1., 0., 0.]] * 4)
    per_head = lib.zeros(4, 4, 4)
    per_head[1, 2] = float("-inf")
    per_head[2, :, 3] = 0.25
    return {"gpt2_causal": (causal, gpt2_pad), "small_pad": (None, small_pad),
            "soft_mask": (soft, None), "soft_both": (soft, small_pad),
            "bool_causal": (causal != 0, bool_pad), "per_head_3d": (per_head, None),
            "none": (None, None)}[kind]


def _run_layer(lib, kind, norm_first, activation, grad=False, train=False, heads=2,
               fastpath=True, hook=False):
    rng = np.random.default_rng(28)
    layer = _layer(lib, rng, heads=heads, norm_first=norm_first, activation=activation)
    layer.train(train)
    x = lib.from_numpy(rng.standard_normal((2, 4, 8)).astype(np.float32))
    mask, pad = _masks(lib, kind)
    if hook:
        layer.linear1.register_forward_hook(lambda *args: None)
    was = lib.backends.mha.get_fastpath_enabled()
    lib.backends.mha.set_fastpath_enabled(fastpath)
    try:
        with lib.set_grad_enabled(grad):
            out = layer(x, src_mask=mask, src_key_padding_mask=pad)
    finally:
        lib.backends.mha.set_fastpath_enabled(was)
    return out.detach().numpy()


@pytest.mark.parametrize("kind", ["gpt2_causal", "small_pad", "soft_mask", "soft_both",
                                  "bool_causal", "per_head_3d", "none"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_fast_path_reads_masks_as_torch(kind, norm_first, activation):
    ours = _run_layer(ember, kind, norm_first, activation)
    theirs = _run_layer(torch, kind, norm_first, activation)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert np.isnan(theirs).any() == (kind in ("gpt2_causal", "bool_causal", "per_head_3d"))


@pytest.mark.parametrize("off", ["train", "grad", "switch", "hook", "odd_heads"])
@pytest.mark.parametrize("kind", ["gpt2_causal", "soft_both"])
def test_encoder_layer_off_the_fast_path_as_torch(off, kind):
    kw = {"train": {"train": True}, "grad": {"grad": True}, "switch": {"fastpath": False},
          "hook": {"hook": True}, "odd_heads": {"heads": 1}}[off]
    ours = _run_layer(ember, kind, False, "relu", **kw)
    theirs = _run_layer(torch, kind, False, "relu", **kw)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert not np.isnan(theirs).any()


def test_encoder_layer_fast_path_ignores_is_causal():
    def run(lib, train):
        rng = np.random.default_rng(7)
        layer = _layer(lib, rng).train(train)
        x = lib.from_numpy(rng.standard_normal((2, 4, 8)).astype(np.float32))
        with lib.no_grad():
            try:
                return layer(x, is_causal=True).numpy()
            except RuntimeError as e:
                return str(e)
    np.testing.assert_allclose(run(ember, False), run(torch, False), rtol=1e-5, atol=1e-6)
    # ember's message adds a line naming the failing module (nn/modules/_errors.py)
    assert run(ember, True).startswith(run(torch, True))


def _run_mha(lib, masks, need_weights, average=True, same_tensor=True):
    rng = np.random.default_rng(3)
    mha = lib.nn.MultiheadAttention(8, 2, batch_first=True)
    fill_(lib, mha, rng, 0.4)
    mha.eval()
    x = lib.from_numpy(rng.standard_normal((2, 4, 8)).astype(np.float32))
    pad = lib.tensor([[True, False, False, False], [False] * 4])
    causal = lib.ones(4, 4, dtype=lib.bool).triu(1)
    kw = {"bool": {"key_padding_mask": pad, "attn_mask": causal},
          "float": {"key_padding_mask": pad.float() * -1e4, "attn_mask": causal}}[masks]
    with lib.no_grad():
        key = x if same_tensor else x.clone()
        out, weights = mha(x, key, key, need_weights=need_weights,
                           average_attn_weights=average, **kw)
    return [out.numpy()] + ([] if weights is None else [weights.numpy()])


@pytest.mark.parametrize("masks", ["bool", "float"])
@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("same_tensor", [True, False])
def test_mha_fast_path_as_torch(masks, need_weights, average, same_tensor):
    ours = _run_mha(ember, masks, need_weights, average, same_tensor)
    theirs = _run_mha(torch, masks, need_weights, average, same_tensor)
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["gpt2_causal", "soft_both", "bool_causal"])
def test_fast_path_warns_like_torch(kind):
    def program(lib):
        _run_layer(lib, kind, False, "relu")
        _run_mha(lib, "float", True)
    assert warnings_of(program, ember) == warnings_of(program, torch)


def test_mha_fast_path_ignores_is_causal():
    def run(lib, train):
        rng = np.random.default_rng(5)
        mha = lib.nn.MultiheadAttention(8, 2, batch_first=True).train(train)
        fill_(lib, mha, rng, 0.4)
        x = lib.from_numpy(rng.standard_normal((2, 4, 8)).astype(np.float32))
        with lib.no_grad():
            try:
                return mha(x, x, x, need_weights=False, is_causal=True)[0].numpy()
            except RuntimeError as e:
                return str(e).splitlines()[0]
    np.testing.assert_allclose(run(ember, False), run(torch, False), rtol=1e-5, atol=1e-6)
    assert run(ember, True) == run(torch, True)
