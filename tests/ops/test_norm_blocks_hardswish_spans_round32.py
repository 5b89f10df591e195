"""Round 32 kernel paths: layer_norm over row blocks that stay in cache (inputs of more than
2**17 values with rows of at most 1024) and hardswish's forward and fused backward over the
element-wise spans, each against float64 NumPy references and against the same op on pieces
small enough to take the one-block path (each row, or value, computed alone)."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _layer_norm_grads(x, w, b, g, needs):
    """(out, input grad, weight grad, bias grad) of float32 layer norm; None where not needed."""
    k = x.shape[-1]
    xt = ember.tensor(x, requires_grad=needs[0])
    wt = None if w is None else ember.tensor(w, requires_grad=needs[1])
    bt = None if b is None else ember.tensor(b, requires_grad=needs[2])
    y = F.layer_norm(xt, (k,), wt, bt)
    y.backward(ember.tensor(g))
    return [y.detach().numpy()] + [None if t is None or t.grad is None else t.grad.numpy()
                                   for t in (xt, wt, bt)]


@pytest.mark.parametrize("shape", [(5001, 33), (40000, 4), (300, 1000), (16, 96, 32, 32)])
@pytest.mark.parametrize("needs", [(True, True, True), (False, True, False),
                                   (True, False, False), (False, False, True)])
def test_layer_norm_blocks_match_float64_and_the_rows_alone(shape, needs):
    rng = np.random.default_rng(sum(shape))
    k = shape[-1]
    x = (rng.standard_normal(shape) * 3 + 20).astype(np.float32)          # an offset mean
    g = rng.standard_normal(shape).astype(np.float32)
    w, b = (rng.standard_normal(k).astype(np.float32) for _ in range(2))
    got = _layer_norm_grads(x, w, b, g, needs)
    # float64 reference
    xd, wd, gd = x.astype(np.float64), w.astype(np.float64), g.astype(np.float64)
    xc = xd - xd.mean(-1, keepdims=True)
    xhat = xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)
    gw = gd * wd
    gx = (gw - gw.mean(-1, keepdims=True) - xhat * (gw * xhat).mean(-1, keepdims=True)) \
        / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)
    lead = tuple(range(x.ndim - 1))
    want = [xhat * wd + b, gx, (gd * xhat).sum(lead), gd.sum(lead)]
    for i, (have, ref) in enumerate(zip(got, want)):
        if i and not needs[i - 1]:
            assert have is None
            continue
        assert have.dtype == np.float32 and have.shape == ref.shape
        np.testing.assert_allclose(have, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # each row's output and input gradient come from its own block: the first and last 100
    # rows alone (one block) give the same values (BLAS may sum a row's products in another
    # order for fewer rows)
    rows, grows = x.reshape(-1, k), g.reshape(-1, k)
    for part in (slice(0, 100), slice(-100, None)):
        alone = _layer_norm_grads(rows[part], w, b, grows[part], needs)
        for i in (0, 1) if needs[0] else (0,):
            np.testing.assert_allclose(got[i].reshape(-1, k)[part], alone[i], rtol=1e-5,
                                       atol=1e-6 * np.abs(alone[i]).max())


_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, -3.0, 2.9999998, -2.9999998,
                      3.0000002, -3.0000002, 1e-45, -1e-45, 1e30, -1e30], np.float32)


def _hardswish_reference(x, g):
    """hardswish and its gradient in float64, as PyTorch's kernel: 0 at input <= -3, the
    gradient itself at input >= 3 (and NaN)."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    with np.errstate(invalid="ignore"):
        y = x * np.clip(x + 3, 0, 6) / 6
        d = np.where(x <= -3, 0.0, np.where(x < 3, g * (x / 3 + 0.5), g))
    return y, d


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [70000, 1 << 20 | 3])
def test_hardswish_over_the_spans(dtype, n):
    rng = np.random.default_rng(n)
    # inputs on both sides of +-3 at random (masks that change at every value)
    x = rng.uniform(-6, 6, n).astype(dtype)
    x[:len(_SPECIALS)] = _SPECIALS
    g = rng.standard_normal(n).astype(x.dtype)
    g[len(_SPECIALS):len(_SPECIALS) + 4] = [np.nan, np.inf, -np.inf, -0.0]
    x[len(_SPECIALS):len(_SPECIALS) + 4] = [-4.0, -5.0, 4.0, 1.0]
    xt = ember.tensor(x, requires_grad=True)
    y = F.hardswish(xt)
    y.backward(ember.tensor(g))
    ref_y, ref_d = _hardswish_reference(x, g)
    # (x + 3 and x / 3 + 0.5 round once in x's dtype, absolutely: near -3 and -1.5 the
    # results are small)
    tol = dict(rtol=4e-7, atol=3e-7) if x.dtype == np.float32 else dict(rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(y.detach().numpy(), ref_y.astype(x.dtype), **tol)
    np.testing.assert_allclose(xt.grad.numpy(), ref_d.astype(x.dtype), **tol)
    # a NaN gradient where the input is <= -3 gives 0, not NaN
    assert xt.grad.numpy()[len(_SPECIALS)] == 0
    # the same bits as small pieces (one call on the calling thread, no spans)
    for part in (slice(0, 1000), slice(-1000, None)):
        small = ember.tensor(x[part], requires_grad=True)
        F.hardswish(small).backward(ember.tensor(g[part]))
        np.testing.assert_array_equal(y.detach().numpy()[part], F.hardswish(
            ember.tensor(x[part])).numpy())
        np.testing.assert_array_equal(xt.grad.numpy()[part], small.grad.numpy())


@pytest.mark.parametrize("shape, ns", [((2049, 64), (64,)), ((193, 1000), (1000,)),
                                       ((2113, 64), (64,)), ((3001, 100), (100,)),
                                       ((41, 50, 8, 8), (8, 8)), ((2049, 4, 16), (4, 16))])
@pytest.mark.parametrize("needs", [(True, True, True), (False, True, False)])
def test_layer_norm_blocks_give_the_one_block_bits(monkeypatch, shape, ns, needs):
    # every row keeps the bits of the one-block path (on one BLAS thread up to 2**20 values,
    # as the blocks run), a last block of one row too: NumPy takes a dot product for a
    # single row, which sums in another order than the matrix-vector product
    from ember.ops import norm_rows
    rng = np.random.default_rng(len(shape) + shape[0])
    x = (rng.standard_normal(shape) * 3 + 20).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    w, b = (rng.standard_normal(ns).astype(np.float32) for _ in range(2))

    def run():
        xt = ember.tensor(x, requires_grad=needs[0])
        wt, bt = ember.tensor(w, requires_grad=needs[1]), ember.tensor(b, requires_grad=True)
        y, mean, invstd = ember.native_layer_norm(xt, ns, wt, bt, 1e-5)
        y.backward(ember.tensor(g))
        return [t.detach().numpy() for t in (y, mean, invstd)] + [
            t.grad.numpy() for t, need in zip((xt, wt, bt), needs) if need]

    blocked = run()
    monkeypatch.setattr(norm_rows, "_row_blocks", lambda xp, shape: None)
    for have, want in zip(blocked, run()):
        np.testing.assert_array_equal(have, want)


def test_layer_norm_row_blocks_start_at_multiples_of_64_rows():
    from ember.ops.norm_rows import _row_blocks
    assert _row_blocks(np, (2048, 64)) is None                          # 2**17 values
    assert _row_blocks(np, (200, 1025)) is None                         # rows over 1024
    assert _row_blocks(np, (2049, 64)) == [slice(0, 1024), slice(1024, 2049)]
    assert _row_blocks(np, (2050, 64)) == [slice(0, 1024), slice(1024, 2048), slice(2048, 2050)]
    assert _row_blocks(np, (193, 1000)) == [slice(0, 64), slice(64, 128), slice(128, 193)]
