"""ember.nn.attention.flex_attention against plain attention built from ember ops and NumPy:
score_mods, mask_mods, GQA, log-sum-exp, fully masked rows, gradients, BlockMask structure
and printing, and the errors."""

import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck
from ember.nn.attention import flex_attention as fa
from ember.nn.attention.flex_attention import (AuxOutput, AuxRequest, BlockMask, and_masks,
                                               create_block_mask, create_mask, flex_attention,
                                               noop_mask, or_masks)
from ember.testing import assert_close


def _qkv(B=2, H=2, L=6, S=6, E=4, Hkv=None, Ev=None, dtype=np.float32, seed=0, grad=False):
    rng = np.random.default_rng(seed)
    Hkv, Ev = Hkv or H, Ev or E
    return [ember.tensor(rng.standard_normal(s).astype(dtype), requires_grad=grad)
            for s in ((B, H, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev))]


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _blocks(B, H, L, S, block, mask_mod=causal):
    return create_block_mask(mask_mod, B, H, L, S, device="cpu", BLOCK_SIZE=block)


def _reference(q, k, v, bias=None, keep=None, scale=None):
    """Attention in NumPy float64 with an additive bias and a boolean keep mask."""
    q, k, v = (np.asarray(t.detach(), dtype=np.float64) for t in (q, k, v))
    scores = q @ k.swapaxes(-1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if bias is not None:
        scores = scores + bias
    if keep is not None:
        scores = np.where(keep, scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    top = np.where(np.isinf(top), 0, top)
    exp = np.exp(scores - top)
    total = exp.sum(-1, keepdims=True)
    lse = np.where(total == 0, -np.inf, np.log(np.where(total == 0, 1, total)) + top)
    return (exp / np.where(total == 0, 1, total)) @ v, lse[..., 0]


def test_no_mods_is_plain_attention():
    q, k, v = _qkv(L=5, S=7)
    assert_close(flex_attention(q, k, v), F.scaled_dot_product_attention(q, k, v))
    out = flex_attention(q, k, v, scale=0.3)
    np.testing.assert_allclose(np.asarray(out), _reference(q, k, v, scale=0.3)[0], rtol=1e-5,
                               atol=1e-6)


def test_causal_block_mask_matches_is_causal():
    q, k, v = _qkv(L=10, S=10)
    out = flex_attention(q, k, v, block_mask=_blocks(None, None, 10, 10, 4))
    assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_relative_position_score_mod():
    q, k, v = _qkv(L=5, S=7)
    out = flex_attention(q, k, v, lambda s, b, h, qi, kv: s + (qi - kv) * 0.5)
    rel = (np.arange(5)[:, None] - np.arange(7)[None, :]) * 0.5
    np.testing.assert_allclose(np.asarray(out), _reference(q, k, v, rel)[0], rtol=1e-5,
                               atol=1e-6)


def test_alibi_per_head_bias_with_mask():
    q, k, v = _qkv(H=4, L=6, S=6)
    slopes = ember.tensor([0.5, 0.25, 0.125, 0.0625])

    def alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx).abs()
    out = flex_attention(q, k, v, alibi, _blocks(1, 4, 6, 6, 2))
    dist = np.abs(np.arange(6)[:, None] - np.arange(6)[None, :])
    bias = -np.array([0.5, 0.25, 0.125, 0.0625])[:, None, None] * dist
    expected = _reference(q, k, v, bias, np.tril(np.ones((6, 6), bool)))[0]
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-6)


def test_batch_dependent_mask_mod():
    q, k, v = _qkv(B=2, L=4, S=4)
    lengths = ember.tensor([2, 4])
    out = flex_attention(q, k, v, block_mask=create_block_mask(
        lambda b, h, qi, kv: kv < lengths[b], 2, None, 4, 4, device="cpu", BLOCK_SIZE=2))
    keep = np.arange(4)[None, None, None, :] < np.array([2, 4])[:, None, None, None]
    np.testing.assert_allclose(np.asarray(out), _reference(q, k, v, keep=keep)[0], rtol=1e-5,
                               atol=1e-6)


@pytest.fixture
def cpu_backward(monkeypatch):
    """Lift PyTorch's refusal of CPU inputs that require grad, to test the derivative (which
    the CUDA path uses) on the CPU."""
    monkeypatch.setattr(fa, "_CPU_BACKWARD", True)


def test_cpu_refuses_inputs_requiring_grad_and_warns_once_eagerly():
    q, k, v = _qkv()
    for grad in ((True, False, False), (False, False, True)):
        args = [t.detach().requires_grad_(g) for t, g in zip((q, k, v), grad)]
        with pytest.raises(NotImplementedError, match="FlexAttention does not support backward "
                                                      "on CPU. Please set the input requires_grad"):
            flex_attention(*args)
    with ember.no_grad(), pytest.raises(NotImplementedError):
        flex_attention(q.detach().requires_grad_(), k, v)     # (it looks at the inputs)
    fa._WARNED.discard("eager")
    with pytest.warns(UserWarning, match=r"flex_attention called without torch.compile\(\)"):
        flex_attention(q, k, v)
    fa._WARNED.discard("eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.compile(flex_attention)(q, k, v)          # compiled: no such warning
        fa._WARNED.add("eager")
        flex_attention(q, k, v)                         # once per process


def test_captured_bias_gradients(cpu_backward):
    q, k, v = _qkv(B=1, H=2, L=4, S=3, E=3, Hkv=1, dtype=np.float64, grad=True)
    bias = ember.tensor(np.random.default_rng(1).standard_normal((2, 4, 3)),
                        requires_grad=True)
    mask = _blocks(1, 2, 4, 3, 2, lambda b, h, qi, kv: (qi >= kv) & (qi != 1))

    def attend(q, k, v, bias):
        out, aux = flex_attention(q, k, v, lambda s, b, h, qi, kv: s + bias[h, qi, kv], mask,
                                  enable_gqa=True, return_aux=AuxRequest(lse=True))
        return out, aux.lse.masked_fill(aux.lse == -math.inf, 0.0)
    assert gradcheck(attend, (q, k, v, bias))
    attend(q, k, v, bias)[0].sum().backward()
    assert float(bias.grad[:, 1].abs().max()) == 0.0          # the masked-out row
    assert float(bias.grad[:, 2].abs().max()) > 0


def test_gqa_shares_key_heads():
    q, k, v = _qkv(H=4, Hkv=2, L=5, S=6, Ev=3)
    out = flex_attention(q, k, v, block_mask=_blocks(None, 4, 5, 6, 2), enable_gqa=True)
    k2, v2 = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    assert out.shape == (2, 4, 5, 3)
    assert_close(out, flex_attention(q, k2, v2, block_mask=_blocks(None, 4, 5, 6, 2)))
    # score_mod sees the query head: head h adds h to its scores, a no-op for the softmax
    out = flex_attention(q, k, v, lambda s, b, h, qi, kv: s + h, enable_gqa=True)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    seen = flex_attention(q, k, v, lambda s, b, h, qi, kv: s + (h == 3) * (kv == 0) * 50.0,
                          enable_gqa=True)
    assert_close(seen[:, 3], v[:, 1, :1].expand(2, 5, 3))


def test_lse_and_max_scores():
    q, k, v = _qkv(L=5, S=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        out, lse = flex_attention(q, k, v, return_lse=True)
    expected = _reference(q, k, v)[1]
    assert lse.shape == (2, 2, 5) and lse.dtype is ember.float32
    np.testing.assert_allclose(np.asarray(lse), expected, rtol=1e-5)
    out2, aux = flex_attention(q, k, v, return_aux=AuxRequest(lse=True, max_scores=True))
    assert isinstance(aux, AuxOutput)
    assert_close(out2, out)
    assert_close(aux.lse, lse)
    scores = np.asarray(q.detach()) @ np.asarray(k.detach()).swapaxes(-1, -2) / 2
    np.testing.assert_allclose(np.asarray(aux.max_scores), scores.max(-1), rtol=1e-5)
    assert flex_attention(q, k, v, return_aux=AuxRequest())[1] == AuxOutput(None, None)


def test_return_lse_warns_once_and_conflicts_with_return_aux():
    q, k, v = _qkv()
    fa._WARNED.discard("return_lse")
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        flex_attention(q, k, v, return_lse=True)
    fa._WARNED.add("eager")             # (the eager-path warning: see the test above)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flex_attention(q, k, v, return_lse=True)       # only once
        flex_attention(q, k, v, kernel_options={"BLOCK_M": 16})   # no compile warning
    with pytest.raises(ValueError, match="Cannot specify both return_lse and return_aux"):
        flex_attention(q, k, v, return_lse=True, return_aux=AuxRequest(lse=True))


def test_fully_masked_rows_give_zero_and_minus_inf(cpu_backward):
    q, k, v = _qkv(L=4, S=4, grad=True)
    mask = _blocks(None, None, 4, 4, 2, lambda b, h, qi, kv: (qi >= kv) & (qi != 2))
    out, aux = flex_attention(q, k, v, block_mask=mask, return_aux=AuxRequest(lse=True))
    assert np.all(np.asarray(out.detach())[:, :, 2] == 0)
    assert np.all(np.asarray(aux.lse.detach())[:, :, 2] == -np.inf)
    assert np.all(np.isfinite(np.asarray(aux.lse.detach())[:, :, [0, 1, 3]]))
    out.sum().backward()
    assert np.all(np.isfinite(np.asarray(q.grad))) and np.all(np.asarray(q.grad)[:, :, 2] == 0)


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16, ember.float64])
def test_dtypes(dtype):
    q, k, v = (t.to(dtype) for t in _qkv())
    out, aux = flex_attention(q, k, v, block_mask=_blocks(1, 1, 6, 6, 2),
                              return_aux=AuxRequest(lse=True))
    assert out.dtype is dtype
    assert aux.lse.dtype is (ember.float64 if dtype is ember.float64 else ember.float32)
    expected, lse = _reference(q.float(), k.float(), v.float(), keep=np.tril(np.ones((6, 6))))
    tol = 1e-6 if dtype is ember.float64 else 2e-2
    np.testing.assert_allclose(np.asarray(out.float()), expected, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.asarray(aux.lse.float()), lse, rtol=tol, atol=tol)


def test_empty_query():
    q, k, v = _qkv(L=0)
    out, aux = flex_attention(q, k, v, return_aux=AuxRequest(lse=True))
    assert out.shape == (2, 2, 0, 4) and aux.lse is None


def test_causal_block_structure():
    bm = _blocks(None, None, 8, 8, 4)
    assert bm.kv_num_blocks.tolist() == [[[1, 1]]] and bm.kv_num_blocks.dtype is ember.int32
    assert bm.kv_indices.tolist() == [[[[0, 1], [1, 0]]]] and bm.kv_indices.dtype is ember.int32
    assert bm.full_kv_num_blocks.tolist() == [[[0, 1]]]
    assert bm.full_kv_indices.tolist() == [[[[0, 1], [0, 1]]]]
    assert bm.q_num_blocks.tolist() == [[[1, 1]]]
    assert bm.q_indices.tolist() == [[[[0, 1], [1, 0]]]]
    assert bm.full_q_num_blocks.tolist() == [[[1, 0]]]
    assert bm.full_q_indices.tolist() == [[[[1, 0], [0, 1]]]]
    assert bm.BLOCK_SIZE == (4, 4) and bm.seq_lengths == (8, 8) and bm.shape == (1, 1, 8, 8)
    assert bm.mask_mod is causal and bm.numel() == 64
    assert bm.sparsity() == pytest.approx(25.0)
    assert bm.to_dense().tolist() == [[[[1, 0], [1, 1]]]]


def test_ragged_lengths_pad_partial_tiles():
    bm = _blocks(2, 3, 10, 6, (4, 2))          # 3 query tiles of 4, 3 kv tiles of 2
    assert bm.kv_num_blocks.shape == (2, 3, 3) and bm.kv_indices.shape == (2, 3, 3, 3)
    # rows 0-3: tile 0 partial, 1 partial; rows 4-7: 0, 1 full, 2 partial; rows 8-9 padded
    assert bm.kv_num_blocks[0, 0].tolist() == [2, 1, 3]
    assert bm.full_kv_num_blocks[0, 0].tolist() == [0, 2, 0]
    assert bm.kv_indices[1, 2].tolist() == [[0, 1, 2], [2, 0, 1], [0, 1, 2]]
    assert bm.full_kv_indices[1, 2, 1].tolist() == [0, 1, 2]
    assert bm.sparsity() == pytest.approx(100 * (1 - 8 * 8 / 60))
    assert bm.to_dense()[0, 0].tolist() == [[1, 1, 0], [1, 1, 1], [1, 1, 1]]


def test_separate_full_blocks_false():
    bm = create_block_mask(causal, 1, 1, 8, 8, device="cpu", BLOCK_SIZE=4,
                           separate_full_blocks=False)
    assert bm.full_kv_num_blocks is None and bm.full_q_indices is None
    assert bm.kv_num_blocks.tolist() == [[[1, 2]]]
    assert bm.to_dense().tolist() == [[[[1, 0], [1, 1]]]]


def test_printing():
    bm = _blocks(None, None, 256, 256, 128)
    assert str(bm) == ("BlockMask(shape=(1, 1, 256, 256), sparsity=25.00%, \n(0, 0)\n██  \n"
                       "████\n)")
    assert repr(bm).startswith("BlockMask(\n    kv_num_blocks=ember.Size([1, 1, 2]),\n")
    assert repr(bm).endswith("    sparsity=25.00%,\n    mask_mod=causal\n)")
    big = _blocks(1, 1, 64, 64, 2)              # 32 x 32 tiles, shown as 16 x 16 cells
    rows = big.to_string().split("\n")
    assert rows[0] == "(0, 0)" and rows[1] == "░░" + 30 * " " and rows[2] == "██░░" + 28 * " "
    assert len(rows) == 1 + 16 + 1
    assert len(big.to_string(grid_size=-1).split("\n")) == 1 + 32 + 1
    assert big.to_string(grid_size=(4, 8)).split("\n")[1] == "░░░░" + 6 * "  "
    many = _blocks(3, 2, 8, 8, 4).to_string(limit=2)
    assert many.count("(0, ") == 2 and "(1, 0)" not in many
    assert many.endswith("...\nTo print out more, set BlockMask.to_string(limit=N)\nYou can also "
                         "index (BlockMask[batch, head]) to choose a specific batch or head")


def test_indexing_keeps_dims():
    bm = _blocks(2, 3, 16, 16, 4)
    assert bm[1].kv_num_blocks.shape == (1, 3, 4) and bm[1].shape == (1, 3, 16, 16)
    sub = bm[-1, 2]
    assert sub.kv_indices.shape == (1, 1, 4, 4) and sub.q_indices.shape == (1, 1, 4, 4)
    assert sub.kv_num_blocks.tolist() == [[[1, 1, 1, 1]]]
    rows = bm[:, 1:2, ember.tensor([1, 3])]
    assert rows.kv_num_blocks.shape == (2, 1, 2) and rows.shape == (2, 1, 16, 16)
    assert rows.full_kv_num_blocks[0, 0].tolist() == [1, 3]
    q, k, v = _qkv(B=1, H=1, L=16, S=16)
    with pytest.raises(RuntimeError, match="Cannot use mask_mod from a sliced BlockMask"):
        flex_attention(q, k, v, block_mask=sub)
    sub.mask_mod = causal
    assert_close(flex_attention(q, k, v, block_mask=sub),
                 F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_from_kv_blocks_and_as_tuple():
    bm = BlockMask.from_kv_blocks(ember.tensor([[[1, 2]]], dtype=ember.int32),
                                  ember.tensor([[[[0, 1], [0, 1]]]], dtype=ember.int32),
                                  BLOCK_SIZE=4)
    assert bm.seq_lengths == (8, 8) and bm.BLOCK_SIZE == (4, 4) and bm.mask_mod is noop_mask
    assert bm.q_num_blocks.tolist() == [[[2, 1]]] and bm.full_q_num_blocks is None
    flat = bm.as_tuple()
    assert len(flat) == 17 and flat[:2] == (8, 8) and flat[-3:] == (4, 4, noop_mask)
    assert bm.as_tuple(flatten=False)[0] == (8, 8)
    moved = bm.to("cpu")
    assert moved is not bm and moved.q_indices.tolist() == bm.q_indices.tolist()
    assert moved.BLOCK_SIZE == (4, 4) and moved.mask_mod is noop_mask
    with pytest.raises(RuntimeError, match="BlockMask must have at least 2 dimensions"):
        BlockMask.from_kv_blocks(ember.ones(2, dtype=ember.int32),
                                 ember.zeros(2, dtype=ember.int32))
    with pytest.raises(AssertionError, match="must be both provided or omitted"):
        BlockMask.from_kv_blocks(bm.kv_num_blocks, bm.kv_indices, bm.kv_num_blocks)


def test_create_mask_and_combinators():
    mask = create_mask(causal, None, 2, 3, 3, device="cpu")
    assert mask.dtype is ember.bool and mask.shape == (1, 2, 3, 3)
    assert mask[0, 1].tolist() == np.tril(np.ones((3, 3), bool)).tolist()
    from_score = create_mask(lambda s, b, h, qi, kv: ember.where(qi >= kv, s, -math.inf),
                             1, 1, 3, 3, device="cpu")
    assert from_score.tolist() == mask[:, :1].tolist()
    assert create_mask(noop_mask, 1, 1, 2, 2, device="cpu").tolist() == [[[[True] * 2] * 2]]

    def even(b, h, q_idx, kv_idx):
        return kv_idx % 2 == 0
    both = create_mask(and_masks(causal, even), 1, 1, 3, 3, device="cpu")[0, 0].tolist()
    either = create_mask(or_masks(causal, even), 1, 1, 3, 3, device="cpu")[0, 0].tolist()
    assert both == [[True, False, False], [True, False, False], [True, False, True]]
    assert either == [[True, False, True], [True, True, True], [True, True, True]]
    assert not create_mask(or_masks(), 1, 1, 2, 2, device="cpu").any()
    assert create_mask(and_masks(), 1, 1, 2, 2, device="cpu").all()
    assert and_masks().__name__ == "and_mask" and or_masks().__name__ == "or_mask"
    with pytest.raises(RuntimeError, match="All inputs should be callable mask_mods"):
        or_masks(causal, 3)


def test_block_mask_errors():
    with pytest.raises(AssertionError, match="create-block_mask requires a mask_mod"):
        create_block_mask(lambda s, b, h, qi, kv: s, 1, 1, 4, 4, device="cpu")
    with pytest.raises(AssertionError, match="Expected 4 or 5 positional args, got 3"):
        create_block_mask(lambda b, h, qi: qi, 1, 1, 4, 4, device="cpu")
    with pytest.raises(AssertionError, match="mask.dtype must be ember.bool, got ember.int64"):
        create_block_mask(lambda b, h, qi, kv: qi - kv, 1, 1, 4, 4, device="cpu")


@pytest.mark.skipif(ember.cuda.is_available(), reason="checks the CPU-only error")
def test_cuda_device_without_cuda():
    with pytest.raises(RuntimeError, match="not compiled with CUDA"):
        create_block_mask(causal, 1, 1, 4, 4, device="cuda")


@pytest.mark.parametrize("shapes, kwargs, error, message", [
    (((2, 6, 4),) * 3, {}, NotImplementedError, "NYI: query, key, and value must be 4D"),
    (((1, 2, 6, 4), (1, 2, 6, 5), (1, 2, 6, 4)), {}, ValueError,
     "same embedding dimension but got E=4 and E=5"),
    (((1, 4, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4)), {}, ValueError,
     "same number of heads but got Hq=4 and Hkv=2. Try setting enable_gqa=True"),
    (((1, 4, 6, 4), (1, 3, 6, 4), (1, 3, 6, 4)), {"enable_gqa": True}, ValueError,
     "multiple of kv heads for GQA but got Hq=4 and Hkv=3"),
    (((2, 2, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4)), {}, ValueError,
     "but got block_mask=None, Bq=2, and Bkv=1"),
    (((1, 2, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4)), {"kernel_options": {"BACKEND": "X"}},
     ValueError, "Invalid BACKEND value 'X'"),
    (((1, 2, 6, 4), (1, 2, 0, 4), (1, 2, 0, 4)), {}, IndexError,
     "Expected reduction dim 3 to have non-zero size"),
])
def test_input_errors(shapes, kwargs, error, message):
    tensors = [ember.zeros(s) for s in shapes]
    with pytest.raises(error, match=message):
        flex_attention(*tensors, **kwargs)


def test_block_mask_shape_errors():
    q, k, v = _qkv(B=2, L=8, S=8)
    bm = _blocks(2, None, 8, 8, 4)
    with pytest.raises(ValueError, match=r"shape=\(2, 1, 8, 8\) but got q_len=8 and kv_len=6\. "
                                         "As the block mask was created for a larger length"):
        flex_attention(q, k[:, :, :6], v[:, :, :6], block_mask=bm)
    with pytest.raises(ValueError, match="created for a smaller length"):
        flex_attention(ember.cat([q, q], 2), k, v, block_mask=bm)
    with pytest.raises(ValueError, match="Bq=2, Bkv=1, B_block_mask=1"):
        flex_attention(q, k[:1], v[:1], block_mask=_blocks(1, None, 8, 8, 4))
    out = flex_attention(q, k[:1], v[:1], block_mask=bm)             # key batch broadcast
    assert_close(out, flex_attention(q, k[:1].expand(2, -1, -1, -1),
                                     v[:1].expand(2, -1, -1, -1), block_mask=bm))
