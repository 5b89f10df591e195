"""ember.nn.attention.flex_attention against PyTorch's (eager, on the CPU): outputs and
log-sum-exp for score_mods, block masks, GQA and dtypes; gradients (PyTorch's CPU flex_attention
has no backward, so against its autograd through the same dense computation); BlockMask fields,
slicing, printing and sparsity; create_mask; and the error messages."""

import math
import re
import warnings

import numpy as np
import pytest

import ember
import ember.nn.attention.flex_attention as ours
from tests.parity._compare import error

torch = pytest.importorskip("torch")
theirs = pytest.importorskip("torch.nn.attention.flex_attention")
pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings(
    "ignore:flex_attention called without torch.compile")]

B, HQ, HKV, L, S, E = 2, 4, 2, 10, 12, 8
RNG = np.random.default_rng(0)
QKV = [RNG.standard_normal(s).astype(np.float32)
       for s in ((B, HQ, L, E), (B, HKV, S, E), (B, HKV, S, 6))]
BIAS = RNG.standard_normal((HQ, L, S)).astype(np.float32)


def _mods(lib, bias):
    """score_mods and mask_mods written once for either library."""
    def relative(score, b, h, q, kv):
        return score + (q - kv) * 0.1

    def alibi(score, b, h, q, kv):
        return score - (h + 1) * (q - kv).abs() * 0.25

    def captured(score, b, h, q, kv):
        return score + bias[h, q, kv]

    def softcap(score, b, h, q, kv):
        return 2.0 * (score / 2.0).tanh()

    def window_and_hole(b, h, q, kv):
        return (q >= kv - 2) & (q != 3)                     # row 3 fully masked

    def document(b, h, q, kv):
        return (q // 4 == kv // 4) | (b == 1)
    return {"relative": relative, "alibi": alibi, "captured": captured, "softcap": softcap,
            "none": None}, {"window": window_and_hole, "document": document, "none": None}


def _libs():
    return ((torch, theirs, _mods(torch, torch.tensor(BIAS))),
            (ember, ours, _mods(ember, ember.tensor(BIAS))))


def _run(score, mask, dtype, **kwargs):
    results = []
    for lib, flex, (scores, masks) in _libs():
        q, k, v = (lib.tensor(x).to(getattr(lib, dtype)) for x in QKV)
        bm = None if masks[mask] is None else flex.create_block_mask(
            masks[mask], B, None, L, S, device="cpu", BLOCK_SIZE=4)
        results.append(flex.flex_attention(q, k, v, scores[score], bm, enable_gqa=True,
                                           return_aux=flex.AuxRequest(lse=True), **kwargs))
    return results


@pytest.mark.parametrize("score", ["relative", "alibi", "captured", "softcap", "none"])
@pytest.mark.parametrize("mask", ["window", "document", "none"])
def test_outputs_and_lse(score, mask):
    (t_out, t_aux), (e_out, e_aux) = _run(score, mask, "float32")
    np.testing.assert_allclose(np.asarray(e_out), t_out.numpy(), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(np.asarray(e_aux.lse), t_aux.lse.numpy(), rtol=1e-5, atol=2e-6)
    assert e_aux.max_scores is None and t_aux.max_scores is None


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_dtypes(dtype):
    (t_out, t_aux), (e_out, e_aux) = _run("alibi", "window", dtype, scale=0.2)
    assert str(e_out.dtype) == str(t_out.dtype).replace("torch", "ember")
    assert str(e_aux.lse.dtype) == str(t_aux.lse.dtype).replace("torch", "ember")
    tol = 1e-9 if dtype == "float64" else 1e-2
    np.testing.assert_allclose(np.asarray(e_out.float()), t_out.float().numpy(), rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(np.asarray(e_aux.lse), t_aux.lse.numpy(), rtol=1e-5, atol=1e-6)


def test_return_lse_and_scale():
    outs = []
    for lib, flex, _ in _libs():
        q, k, v = (lib.tensor(x) for x in QKV)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            outs.append(flex.flex_attention(q, k[:, :1].expand(B, HQ, S, E),
                                            v[:, :1].expand(B, HQ, S, 6), scale=0.5,
                                            return_lse=True))
    (t_out, t_lse), (e_out, e_lse) = outs
    np.testing.assert_allclose(np.asarray(e_out), t_out.numpy(), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(np.asarray(e_lse), t_lse.numpy(), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("score", ["captured", "softcap", "alibi"])
def test_gradients(score, monkeypatch):
    """ember's gradients through flex_attention against torch autograd through the same
    computation written densely (PyTorch's flex_attention has no CPU backward, and ember's
    refuses CPU inputs that require grad as PyTorch's does: the derivative, which CUDA uses,
    is reached here by lifting that refusal)."""
    monkeypatch.setattr(ours, "_CPU_BACKWARD", True)
    t_q, t_k, t_v = (torch.tensor(x, requires_grad=True) for x in QKV)
    t_bias = torch.tensor(BIAS, requires_grad=True)
    t_scores, t_masks = _mods(torch, t_bias)
    idx = [torch.arange(n).view([-1 if d == i else 1 for d in range(4)])
           for i, n in enumerate((B, HQ, L, S))]
    k2, v2 = t_k.repeat_interleave(2, 1), t_v.repeat_interleave(2, 1)
    s = t_scores[score](t_q @ k2.transpose(-1, -2) / math.sqrt(E), *idx)
    keep = t_masks["window"](*idx).expand(B, HQ, L, S)
    w = s.masked_fill(~keep, -math.inf).softmax(-1).nan_to_num(0.0)
    t_out = w @ v2

    e_q, e_k, e_v = (ember.tensor(x, requires_grad=True) for x in QKV)
    e_bias = ember.tensor(BIAS, requires_grad=True)
    e_scores, e_masks = _mods(ember, e_bias)
    bm = ours.create_block_mask(e_masks["window"], None, None, L, S, device="cpu",
                                BLOCK_SIZE=4)
    e_out = ours.flex_attention(e_q, e_k, e_v, e_scores[score], bm, enable_gqa=True)
    np.testing.assert_allclose(np.asarray(e_out.detach()), t_out.detach().numpy(), rtol=1e-5,
                               atol=2e-6)
    weight = np.cos(np.arange(t_out.numel())).reshape(t_out.shape).astype(np.float32)
    (t_out * torch.tensor(weight)).sum().backward()
    (e_out * ember.tensor(weight)).sum().backward()
    pairs = [(e_q, t_q), (e_k, t_k), (e_v, t_v)] + [(e_bias, t_bias)] * (score == "captured")
    for e, t in pairs:
        np.testing.assert_allclose(np.asarray(e.grad), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert (e_bias.grad is None) == (score != "captured")


FIELDS = ["kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
          "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"]


def _both_block_masks(mask_mod, *args, **kwargs):
    return [flex.create_block_mask(mask_mod, *args, device="cpu", **kwargs)
            for _, flex, _ in _libs()]


def _same(t_bm, e_bm):
    for name in FIELDS:
        t, e = getattr(t_bm, name), getattr(e_bm, name)
        assert (t is None) == (e is None), name
        if t is not None:
            assert e.dtype is ember.int32 and t.dtype == torch.int32
            np.testing.assert_array_equal(np.asarray(e), t.numpy(), err_msg=name)
    assert e_bm.shape == t_bm.shape and e_bm.BLOCK_SIZE == t_bm.BLOCK_SIZE
    assert e_bm.seq_lengths == t_bm.seq_lengths and e_bm.numel() == t_bm.numel()
    assert e_bm.sparsity() == pytest.approx(t_bm.sparsity())
    np.testing.assert_array_equal(np.asarray(e_bm.to_dense()), t_bm.to_dense().numpy())
    assert str(e_bm) == str(t_bm)
    assert repr(e_bm) == repr(t_bm).replace("torch", "ember")


def causal(b, h, q, kv):
    return q >= kv


def sliding(b, h, q, kv):
    return (q - kv).abs() < 300


@pytest.mark.parametrize("mask_mod, args, kwargs", [
    (causal, (1, 1, 256, 256), {}),
    (causal, (2, 3, 100, 70), {"BLOCK_SIZE": 16}),
    (causal, (None, 2, 40, 56), {"BLOCK_SIZE": (8, 16), "separate_full_blocks": False}),
    (sliding, (1, None, 2048, 2048), {"BLOCK_SIZE": 64}),
    (lambda b, h, q, kv: (q % 3 == kv % 2) | (h == b), (2, 2, 30, 20), {"BLOCK_SIZE": 8}),
])
def test_block_mask_fields_and_printing(mask_mod, args, kwargs):
    t_bm, e_bm = _both_block_masks(mask_mod, *args, **kwargs)
    _same(t_bm, e_bm)
    for grid, limit in (((5, 10), 4), (-1, 1), (3, 2)):
        assert e_bm.to_string(grid, limit) == t_bm.to_string(grid, limit)


def test_slicing_and_from_kv_blocks():
    t_bm, e_bm = _both_block_masks(causal, 2, 3, 100, 70, BLOCK_SIZE=16)
    for t_index, e_index in ((1, 1), ((-1, 2), (-1, 2)), ((slice(None), slice(1, 3)),) * 2,
                             ((0, 1, torch.tensor([1, 3])), (0, 1, ember.tensor([1, 3])))):
        _same(t_bm[t_index], e_bm[e_index])
    t_new = theirs.BlockMask.from_kv_blocks(t_bm.kv_num_blocks, t_bm.kv_indices,
                                            BLOCK_SIZE=(16, 8))
    e_new = ours.BlockMask.from_kv_blocks(e_bm.kv_num_blocks, e_bm.kv_indices,
                                          BLOCK_SIZE=(16, 8))
    _same(t_new, e_new)
    assert len(e_new.as_tuple()) == len(t_new.as_tuple())
    assert len(e_new.as_tuple(False)) == len(t_new.as_tuple(False))


def test_create_mask():
    def even(b, h, q, kv):
        return kv % 2 == 0

    def score_mod(score, b, h, q, kv):
        return torch.where(q >= kv, score, -math.inf) if isinstance(q, torch.Tensor) else \
            ember.where(q >= kv, score, -math.inf)
    cases = [(causal, (2, None, 5, 7)), (score_mod, (1, 2, 4, 3)),
             (ours.noop_mask, (1, 1, 2, 2)), ("and", (None, None, 6, 6)),
             ("or", (1, 1, 6, 6))]
    for mod_fn, args in cases:
        masks = []
        for _, flex, _ in _libs():
            fn = mod_fn
            if mod_fn == "and":
                fn = flex.and_masks(causal, even)
            elif mod_fn == "or":
                fn = flex.or_masks(causal, even)
            elif mod_fn is ours.noop_mask:
                fn = flex.noop_mask
            masks.append(flex.create_mask(fn, *args, device="cpu"))
        t, e = masks
        assert e.dtype is ember.bool and t.dtype == torch.bool
        np.testing.assert_array_equal(np.asarray(e), t.numpy())


def _error(call):
    """(error type, message) of ``call()``, None when it returns; warnings hidden."""
    return error(call, quiet=True)


def test_errors_match():
    def cases(lib, flex):
        r = lib.zeros
        bm = flex.create_block_mask(causal, 2, None, 8, 8, device="cpu", BLOCK_SIZE=4)
        return [
            lambda: flex.flex_attention(r(2, 8, 4), r(2, 8, 4), r(2, 8, 4)),
            lambda: flex.flex_attention(r(1, 2, 8, 4), r(1, 2, 8, 5), r(1, 2, 8, 4)),
            lambda: flex.flex_attention(r(1, 4, 8, 4), r(1, 2, 8, 4), r(1, 2, 8, 4)),
            lambda: flex.flex_attention(r(1, 4, 8, 4), r(1, 3, 8, 4), r(1, 3, 8, 4),
                                        enable_gqa=True),
            lambda: flex.flex_attention(r(1, 2, 8, 4), r(1, 2, 8, 4), r(1, 4, 8, 4)),
            lambda: flex.flex_attention(r(2, 2, 8, 4), r(1, 2, 8, 4), r(1, 2, 8, 4)),
            lambda: flex.flex_attention(r(1, 2, 8, 4), r(2, 2, 8, 4), r(2, 2, 8, 4),
                                        block_mask=bm[:1]),
            lambda: flex.flex_attention(r(2, 2, 8, 4), r(2, 2, 6, 4), r(2, 2, 6, 4),
                                        block_mask=bm),
            lambda: flex.flex_attention(r(2, 2, 16, 4), r(2, 2, 8, 4), r(2, 2, 8, 4),
                                        block_mask=bm),
            lambda: flex.flex_attention(r(2, 2, 8, 4), r(1, 2, 8, 4), r(1, 2, 8, 4),
                                        block_mask=bm[1]),
            lambda: flex.flex_attention(r(2, 2, 8, 4), r(2, 2, 8, 4), r(2, 2, 8, 4),
                                        return_lse=True, return_aux=flex.AuxRequest()),
            lambda: flex.flex_attention(r(2, 2, 8, 4), r(2, 2, 8, 4), r(2, 2, 8, 4),
                                        kernel_options={"BACKEND": "X"}),
            lambda: flex.flex_attention(r(2, 2, 8, 4), r(2, 2, 0, 4), r(2, 2, 0, 4)),
            lambda: flex.create_block_mask(lambda s, b, h, q, kv: s, 1, 1, 8, 8, device="cpu"),
            lambda: flex.create_block_mask(lambda b, h, q: q, 1, 1, 8, 8, device="cpu"),
            lambda: flex.or_masks(causal, 3),
            lambda: flex.BlockMask.from_kv_blocks(r(3, dtype=lib.int32), r(3, dtype=lib.int32)),
        ]
    theirs_errors = [_error(c) for c in cases(torch, theirs)]
    ours_errors = [_error(c) for c in cases(ember, ours)]
    for t, e in zip(theirs_errors, ours_errors, strict=True):
        assert t is not None and e is not None
        assert e[0] == t[0], (e, t)
        assert re.sub(" at 0x[0-9a-f]+", "", e[1]) == re.sub(
            " at 0x[0-9a-f]+", "", t[1].replace("torch", "ember")), (e, t)
