"""What the pretraining programs of round 29 (test_parity_programs_round29_pretrain.py and its
_ckpt sibling) found, each pinned against PyTorch: a 16-bit input normalized with float32
weight or bias (autocast's mixed LayerNorm/GroupNorm) keeps float32 statistics, as PyTorch's
mixed kernels return them, and the input gradient is computed from them (it came out of
bfloat16 statistics before); a 16-bit group norm's backward runs in float32 and rounds each
gradient once, as PyTorch's kernel (it ran step by step in bfloat16, ~1e-2 off)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _norm(lib, kind, xn, wn, gn, x_dtype, w_dtype, bias):
    x = lib.from_numpy(xn).to(getattr(lib, x_dtype)).requires_grad_()
    wd = getattr(lib, w_dtype)
    w = lib.from_numpy(wn).to(wd).requires_grad_()
    b = lib.from_numpy(wn[::-1].copy()).to(wd).requires_grad_() if bias else None
    if kind == "layer":
        stats = lib.native_layer_norm(x, (xn.shape[-1],), w, b, 1e-5)
        y = lib.nn.functional.layer_norm(x, (xn.shape[-1],), w, b)
    else:
        n, c = xn.shape[:2]
        stats = lib.native_group_norm(x, w, b, n, c, int(np.prod(xn.shape[2:])), 2, 1e-5)
        y = lib.nn.functional.group_norm(x, 2, w, b)
    y.backward(lib.from_numpy(gn).to(y.dtype))
    grads = [x.grad, w.grad] + ([b.grad] if bias else [])
    return ([str(t.dtype).split(".")[-1] for t in stats + tuple(grads)],
            [t.detach().float().numpy() for t in stats + (y,) + tuple(grads)])


@pytest.mark.parametrize("kind, shape", [("layer", (6, 16)), ("layer", (2, 3, 8)),
                                         ("group", (3, 4, 5)), ("group", (2, 6, 2, 3))])
@pytest.mark.parametrize("x_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("w_dtype", ["float32", "same"])
@pytest.mark.parametrize("bias", [True, False])
def test_16bit_norm_statistics_and_gradients(kind, shape, x_dtype, w_dtype, bias):
    rng = np.random.default_rng(sum(shape))
    xn = rng.standard_normal(shape).astype(np.float32)
    gn = rng.standard_normal(shape).astype(np.float32)
    wn = rng.standard_normal(shape[-1] if kind == "layer" else shape[1]).astype(np.float32)
    wd = x_dtype if w_dtype == "same" else w_dtype
    ours = _norm(ember, kind, xn, wn, gn, x_dtype, wd, bias)
    theirs = _norm(torch, kind, xn, wn, gn, x_dtype, wd, bias)
    assert ours[0] == theirs[0]
    n_stats = len(theirs[1]) - 2 - bias
    kinds = theirs[0][:n_stats] + [x_dtype] + theirs[0][n_stats:]    # y has x's dtype
    names = ["out", "mean", "invstd"][:n_stats] + ["y", "gx", "gw", "gb"]
    for name, kind_, a, b in zip(names, kinds, ours[1], theirs[1]):
        if kind == "layer" and name in ("gw", "gb"):
            # PyTorch's CPU layer norm sums the 16-bit output gradient over rows in blocks
            # of its own (not one float32 sum): within a 16-bit rounding of the sum
            np.testing.assert_allclose(a, b, rtol=2e-2, atol=np.abs(b).max() * 2e-2)
        elif kind_ == "float32":    # float32 accumulation order
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)
