"""Checks of the Triton kernels under Triton's interpreter (``TRITON_INTERPRET=1``), on NumPy
arrays against NumPy references. tests/gpu/test_triton_kernels.py runs this file in a
process of its own, as the interpreter must be on before the kernels are defined."""

import os

import ml_dtypes
import numpy as np
import pytest
import scipy.special

assert os.environ.get("TRITON_INTERPRET") == "1", "run through tests/gpu/test_triton_kernels.py"

from ember.backend.cuda_kernels import triton_batch_norm as batch_norm  # noqa: E402
from ember.backend.cuda_kernels import triton_losses as losses  # noqa: E402
from ember.backend.cuda_kernels import triton_optimizers as optimizers  # noqa: E402
from ember.backend.cuda_kernels import triton_pointwise as pointwise  # noqa: E402
from ember.backend.cuda_kernels import triton_pooling as pooling  # noqa: E402
from ember.backend.cuda_kernels import triton_rows as rows  # noqa: E402
from tests.gpu.host_buffers import Host  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
SHAPES = [(5, 7), (70, 33), (2, 5000), (1, 1)]


def _data(shape, seed=0, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _softmax_ref(x, log):
    s = x - x.max(1, keepdims=True)
    return s - np.log(np.exp(s).sum(1, keepdims=True)) if log else \
        np.exp(s) / np.exp(s).sum(1, keepdims=True)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_rows(shape, log):
    x = _data(shape)
    y = np.empty_like(x)
    rows.softmax_rows(Host(x), Host(y), *shape, log)
    np.testing.assert_allclose(y, _softmax_ref(x.astype(np.float64), log), rtol=1e-5, atol=1e-6)


def test_softmax_rows_bfloat16_in_and_out():
    x = _data((4, 50)).astype(BF16)
    y = np.empty_like(x)
    rows.softmax_rows(Host(x), Host(y), 4, 50)
    assert y.dtype == BF16
    ref = _softmax_ref(x.astype(np.float64), False)
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_rows(shape, affine):
    x = _data(shape) + 2
    n, k = shape
    w, b = (_data(k, seed) if affine else None for seed in (1, 2))
    y, mean, invstd = np.empty_like(x), np.empty(n, np.float32), np.empty(n, np.float32)
    rows.layer_norm_rows(Host(x), w if w is None else Host(w), b if b is None else Host(b),
                         Host(y), Host(mean), Host(invstd), n, k, 1e-5)
    x64 = x.astype(np.float64)
    ref_mean = x64.mean(1)
    ref_invstd = 1 / np.sqrt(x64.var(1) + 1e-5)
    ref = (x64 - ref_mean[:, None]) * ref_invstd[:, None]
    if affine:
        ref = ref * w + b
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(invstd, ref_invstd, rtol=1e-4)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


BATCH_NORM_SHAPES = [(4, 3, 7), (2, 2, 3000), (600, 1, 5), (5, 40, 1)]


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", BATCH_NORM_SHAPES)
def test_batch_norm_statistics_and_normalize(shape, affine):
    # a mean far from zero: a sum of squares would lose the variance to cancellation
    x = _data(shape) + 1000
    c = shape[1]
    w, b = (_data(c, seed) if affine else None for seed in (1, 2))
    rm, rv = _data(c, 3), _data(c, 4) ** 2
    x64, rm64, rv64 = x.astype(np.float64), rm.astype(np.float64), rv.astype(np.float64)
    mean, invstd = np.empty(c, np.float32), np.empty(c, np.float32)
    partial = np.empty(batch_norm.scratch_size(shape), np.float32)
    batch_norm.statistics(Host(x), Host(partial), Host(mean), Host(invstd), Host(rm), Host(rv),
                          shape, 1e-5, 0.25)
    n = shape[0] * shape[2]
    ref_mean, ref_var = x64.mean((0, 2)), x64.var((0, 2))
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-6)
    np.testing.assert_allclose(invstd, 1 / np.sqrt(ref_var + 1e-5), rtol=2e-3)
    np.testing.assert_allclose(rm, 0.75 * rm64 + 0.25 * ref_mean, rtol=1e-6)
    np.testing.assert_allclose(rv, 0.75 * rv64 + 0.25 * ref_var * n / (n - 1), rtol=2e-3)
    y = np.empty_like(x)
    batch_norm.normalize(Host(x), Host(y), Host(mean), Host(invstd), *(
        None if v is None else Host(v) for v in (w, b)), shape)
    ref = (x64 - mean[:, None]) * invstd[:, None]
    if affine:
        ref = ref * w[:, None] + b[:, None]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
    batch_norm.normalize(Host(x), Host(y), Host(rm), Host(rv), None, None, shape, eps=0.5)
    np.testing.assert_allclose(y, (x64 - rm[:, None]) / np.sqrt(rv[:, None] + 0.5), rtol=1e-5)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", BATCH_NORM_SHAPES)
def test_batch_norm_backward(shape, affine, training):
    x, g = _data(shape) + 2, _data(shape, 5)
    c = shape[1]
    w = _data(c, 6) if affine else None
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    n = shape[0] * shape[2]
    if training:
        mean, var = x64.mean((0, 2)), x64.var((0, 2))
        scale = 1 / np.sqrt(var + 1e-5)
        invstd, eps = scale, None
    else:
        mean, var = _data(c, 7).astype(np.float64), _data(c, 8).astype(np.float64) ** 2 + 0.1
        scale, invstd, eps = var, 1 / np.sqrt(var + 0.5), 0.5
    a = invstd * (w if affine else 1)
    xc = x64 - mean[:, None]
    s0, s1 = g64.sum((0, 2)), (g64 * xc).sum((0, 2))
    ref_gx = g64 * a[:, None]
    if training:
        ref_gx -= (a * invstd ** 2 * s1 / n)[:, None] * xc + (a * s0 / n)[:, None]
    gx, gw, gb = np.empty_like(x), np.empty(c, np.float32), np.empty(c, np.float32)
    partial, coef = np.empty(batch_norm.scratch_size(shape), np.float32), np.empty(3 * c,
                                                                                   np.float32)
    batch_norm.backward(Host(g), Host(x), Host(mean.astype(np.float32)),
                        Host(scale.astype(np.float32)), None if w is None else Host(w),
                        Host(partial), Host(coef), Host(gw), Host(gb), Host(gx), shape,
                        training, eps)
    np.testing.assert_allclose(gx, ref_gx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, s1 * invstd, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(gb, s0, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_rows_and_gradient(shape, affine):
    x, gy = _data(shape) + 1, _data(shape, 4)
    n, k = shape
    w = _data(k, 5) if affine else None
    x64, gy64 = x.astype(np.float64), gy.astype(np.float64)
    rstd = 1 / np.sqrt((x64 * x64).mean(1) + 1e-6)
    xhat = x64 * rstd[:, None]
    y, got_rstd = np.empty_like(x), np.empty(n, np.float32)
    rows.rms_norm_rows(Host(x), w if w is None else Host(w), Host(y), Host(got_rstd), n, k,
                       1e-6)
    np.testing.assert_allclose(got_rstd, rstd, rtol=1e-5)
    np.testing.assert_allclose(y, xhat * (w if affine else 1), rtol=1e-4, atol=1e-5)
    programs = min(n, 3)
    gx, partial_w = np.empty_like(x), np.empty((programs, k), np.float32)
    rows.rms_norm_backward_rows(Host(gy), Host(x), w if w is None else Host(w),
                                Host(rstd.astype(np.float32)), Host(gx), Host(partial_w), n,
                                k, programs)
    g = gy64 * (w if affine else 1)
    want = rstd[:, None] * (g - xhat * (g * xhat).mean(1, keepdims=True))
    np.testing.assert_allclose(gx, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(partial_w.sum(0), (gy64 * xhat).sum(0), rtol=1e-4, atol=1e-4)


def _class_weights(weighted, c):
    """(float32 class weights or None, their 1-element sum or None, as float64 for refs)."""
    if not weighted:
        return None, None, np.ones(c)
    w = np.random.default_rng(8).uniform(0.2, 2.0, c).astype(np.float32)
    return w, w.sum(keepdims=True), w.astype(np.float64)


@pytest.mark.parametrize("smoothing, weighted", [(0.0, False), (0.1, False), (0.0, True),
                                                 (0.2, True)])
@pytest.mark.parametrize("shape", SHAPES + [(3, 10000)])
def test_cross_entropy_rows(shape, smoothing, weighted):
    x = _data(shape)
    n, c = shape
    t = np.random.default_rng(3).integers(0, c, n)
    t[0] = -100                                 # ignored: loss 0
    t[-1] = c - 1
    loss = np.empty(n, np.float32)
    w, w_sum, w64 = _class_weights(weighted, c)
    losses.cross_entropy_rows(Host(x), Host(t), Host(loss), n, c, -100, smoothing,
                              None if w is None else Host(w), None if w is None else Host(w_sum))
    logp = scipy.special.log_softmax(x.astype(np.float64), axis=1)
    safe = np.where(t == -100, 0, t)
    picked = logp[np.arange(n), safe] * w64[safe]
    ref = -(1 - smoothing) * picked - smoothing * (logp * w64).mean(1)
    np.testing.assert_allclose(loss, np.where(t == -100, 0.0, ref), rtol=1e-5, atol=1e-5)


def _gelu_ref(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return x * scipy.special.ndtr(x)


def _gelu_grad_ref(x, approximate):
    if approximate == "tanh":
        k, c = np.sqrt(2 / np.pi), 0.044715
        t = np.tanh(k * (x + c * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x)
    return scipy.special.ndtr(x) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_its_gradient(approximate):
    x = _data(3001, scale=4.0)
    x[:3] = [0.0, -30.0, 30.0]
    g = _data(3001, seed=5)
    y, dx = np.empty_like(x), np.empty_like(x)
    pointwise.gelu(Host(x), Host(y), x.size, approximate)
    pointwise.gelu_backward(Host(g), Host(x), Host(dx), x.size, approximate)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, _gelu_ref(x64, approximate), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, g * _gelu_grad_ref(x64, approximate), rtol=1e-5, atol=1e-5)


def test_silu():
    x = _data(2500)
    y = np.empty_like(x)
    pointwise.silu(Host(x), Host(y), x.size)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, x64 * scipy.special.expit(x64), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("weight_decay, decoupled, amsgrad",
                         [(0.0, False, False), (0.1, False, False), (0.1, True, False),
                          (0.0, False, True)])
def test_adam_update_of_many_tensors(weight_decay, decoupled, amsgrad):
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-8
    sizes = (2500, 7, optimizers.BLOCK)         # several blocks, part of one, exactly one
    first_steps = (1, 4, 2)                     # each tensor counts its own steps
    x = [_data(n, seed=i) for i, n in enumerate(sizes)]
    m, v, vmax = ([np.zeros(n, np.float32) for n in sizes] for _ in range(3))
    ref = [[a.astype(np.float64) for a in (xi, mi, vi, vi)] for xi, mi, vi in zip(x, m, v)]
    blocks = optimizers.tensor_blocks(sizes)
    for k in range(3):
        g = [_data(n, seed=10 + 3 * k + i) for i, n in enumerate(sizes)]
        steps = [s + k for s in first_steps]
        addresses = [[a.ctypes.data for a in (xi, gi, mi, vi, wi)]
                     for xi, gi, mi, vi, wi in zip(x, g, m, v, vmax)]
        table = optimizers.adam_table(addresses, sizes, steps, lr, b1, b2)
        optimizers.adam_update(Host(table), Host(blocks), blocks.shape[0], lr=lr, beta1=b1,
                              beta2=b2, eps=eps, weight_decay=weight_decay,
                              decoupled=decoupled, amsgrad=amsgrad)
        for r, gi, t in zip(ref, g, steps):
            rx, rm, rv, rvmax = r
            gi = gi.astype(np.float64)
            if decoupled:
                rx = rx * (1 - lr * weight_decay)
            elif weight_decay:
                gi = gi + weight_decay * rx
            rm = b1 * rm + (1 - b1) * gi
            rv = b2 * rv + (1 - b2) * gi * gi
            rvmax = np.maximum(rvmax, rv)
            denom = np.sqrt(rvmax if amsgrad else rv) / np.sqrt(1 - b2 ** t) + eps
            r[:] = [rx - lr / (1 - b1 ** t) * rm / denom, rm, rv, rvmax]
    for xi, mi, r in zip(x, m, ref):
        np.testing.assert_allclose(mi, r[1], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(xi, r[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("weight_decay, decoupled, inf_norm",
                         [(0.0, False, False), (0.1, False, False), (0.1, True, False),
                          (0.0, False, True), (0.1, False, True)])
def test_adam_variant_update_of_many_tensors(weight_decay, decoupled, inf_norm):
    lr, b1, b2, eps = 1e-2, 0.9, 0.99, 1e-3
    sizes = (2500, 7, optimizers.BLOCK)
    # per tensor (s, e, cg, cm): NAdam-like, RAdam before rectification (s = 0), RAdam after
    coefficients = [(1.2, eps, 0.03, 0.05), (0.0, 1.0, 0.0, 0.02), (1.0, eps, 0.0, 0.04)]
    x = [_data(n, seed=i) for i, n in enumerate(sizes)]
    m, v = ([np.full(n, 0.5, np.float32) for n in sizes] for _ in range(2))
    ref = [[a.astype(np.float64) for a in (xi, mi, vi)] for xi, mi, vi in zip(x, m, v)]
    blocks = optimizers.tensor_blocks(sizes)
    for k in range(2):
        g = [_data(n, seed=10 + 3 * k + i) for i, n in enumerate(sizes)]
        table = optimizers.adam_variant_table(
            [[a.ctypes.data for a in arrays] for arrays in zip(x, g, m, v)], sizes,
            coefficients)
        optimizers.adam_variant_update(Host(table), Host(blocks), blocks.shape[0], lr=lr,
                                       beta1=b1, beta2=b2, eps=eps, weight_decay=weight_decay,
                                       decoupled=decoupled, inf_norm=inf_norm)
        for r, gi, (s, e, cg, cm) in zip(ref, g, coefficients):
            rx, rm, rv = r
            gi = gi.astype(np.float64)
            if decoupled:
                rx = rx * (1 - lr * weight_decay)
            elif weight_decay:
                gi = gi + weight_decay * rx
            rm = b1 * rm + (1 - b1) * gi
            if inf_norm:
                rv = np.maximum(b2 * rv, np.abs(gi) + eps)
                r[:] = [rx - cm * rm / rv, rm, rv]
            else:
                rv = b2 * rv + (1 - b2) * gi * gi
                r[:] = [rx - (cg * gi + cm * rm) / (np.sqrt(rv) * s + e), rm, rv]
    for xi, mi, vi, r in zip(x, m, v, ref):
        np.testing.assert_allclose(vi, r[2], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(mi, r[1], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(xi, r[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("momentum, dampening, weight_decay, nesterov",
                         [(0.0, 0.0, 0.0, False), (0.9, 0.0, 0.1, False), (0.9, 0.3, 0.0, False),
                          (0.9, 0.0, 0.0, True)])
def test_sgd_update_of_many_tensors(momentum, dampening, weight_decay, nesterov):
    lr = 0.1
    sizes = (2500, 7)
    x = [_data(n, seed=i) for i, n in enumerate(sizes)]
    b = [np.zeros(n, np.float32) for n in sizes]
    ref = [[xi.astype(np.float64), None] for xi in x]
    blocks = optimizers.tensor_blocks(sizes)
    for k in range(3):
        g = [_data(n, seed=20 + 2 * k + i) for i, n in enumerate(sizes)]
        first = [k == 0, k == 0]
        addresses = [[a.ctypes.data for a in (xi, gi, bi)] for xi, gi, bi in zip(x, g, b)]
        table = optimizers.sgd_table(addresses, sizes, first)
        optimizers.sgd_update(Host(table), Host(blocks), blocks.shape[0], lr=lr,
                             momentum=momentum, dampening=dampening,
                             weight_decay=weight_decay, nesterov=nesterov)
        for r, gi in zip(ref, g):
            gi = gi.astype(np.float64) + weight_decay * r[0]
            if momentum:
                r[1] = gi if r[1] is None else momentum * r[1] + (1 - dampening) * gi
                gi = gi + momentum * r[1] if nesterov else r[1]
            r[0] = r[0] - lr * gi
    for xi, r in zip(x, ref):
        np.testing.assert_allclose(xi, r[0], rtol=1e-5, atol=1e-6)


def _attention_ref(q, k, v, scale, causal):
    s = q @ k.swapaxes(-1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    lse = scipy.special.logsumexp(s, axis=-1)
    return np.exp(s - lse[..., None]) @ v, lse


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B, H, L, S, E, Ev", [(1, 2, 70, 70, 16, 16), (2, 1, 5, 130, 20, 8),
                                               (1, 1, 129, 33, 64, 64)])
def test_attention_forward(B, H, L, S, E, Ev, causal):
    from ember.backend.cuda_kernels import triton_attention as attention
    q = _data((B, L, H, E), 1, 1.0).transpose(0, 2, 1, 3)      # a strided view, as after
    k, v = _data((B, H, S, E), 2, 1.0), _data((B, H, S, Ev), 3, 1.0)   # a head split
    out, lse = np.empty((B, H, L, Ev), np.float32), np.empty((B, H, L), np.float32)
    strides = tuple(tuple(s // 4 for s in a.strides) for a in (q, k, v))
    attention.attention_forward(Host(q), Host(k), Host(v), Host(out), Host(lse),
                                (B, H, L, S, E, Ev), strides, 0.3, causal)
    ref, ref_lse = _attention_ref(*(a.astype(np.float64) for a in (q, k, v)), 0.3, causal)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", [(5, 7), (70, 33), (3, 5000)])
def test_layer_norm_backward_rows(shape, affine):
    n, k = shape
    x, gy = _data(shape) + 1, _data(shape, 4)
    w = _data(k, 5) if affine else None
    x64, gy64 = x.astype(np.float64), gy.astype(np.float64)
    mean = x64.mean(1)
    invstd = 1 / np.sqrt(x64.var(1) + 1e-5)
    xhat = (x64 - mean[:, None]) * invstd[:, None]
    g = gy64 * (w if affine else 1)
    ref_gx = (g - g.mean(1, keepdims=True) - xhat * (g * xhat).mean(1, keepdims=True)) \
        * invstd[:, None]
    programs = min(n, 4)
    gx = np.empty_like(x)
    partial_w, partial_b = np.empty((programs, k), np.float32), np.empty((programs, k),
                                                                         np.float32)
    rows.layer_norm_backward_rows(Host(gy), Host(x), w if w is None else Host(w),
                                  Host(mean.astype(np.float32)),
                                  Host(invstd.astype(np.float32)), Host(gx), Host(partial_w),
                                  Host(partial_b), n, k, programs)
    np.testing.assert_allclose(gx, ref_gx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(partial_w.sum(0), (gy64 * xhat).sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(partial_b.sum(0), gy64.sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("smoothing, weighted", [(0.0, False), (0.2, False), (0.0, True),
                                                 (0.2, True)])
@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("shape", [(5, 7), (3, 10000)])
def test_cross_entropy_backward_rows(shape, per_row, smoothing, weighted):
    n, c = shape
    x = _data(shape)
    t = np.random.default_rng(3).integers(0, c, n)
    t[0] = -100
    scale = _data(n, 6) if per_row else np.array([0.25], np.float32)
    dx = np.empty_like(x)
    w, w_sum, w64 = _class_weights(weighted, c)
    losses.cross_entropy_backward_rows(Host(x), Host(t), Host(scale), Host(dx), n, c, -100,
                                       per_row, smoothing, None if w is None else Host(w),
                                       None if w is None else Host(w_sum))
    x64 = x.astype(np.float64)
    p = np.exp(x64 - scipy.special.logsumexp(x64, axis=1, keepdims=True))
    onehot = np.zeros_like(p)
    safe = np.where(t == -100, 0, t)
    onehot[np.arange(n), safe] = 1
    # the gradient of (1 - s) w_t (lse - x_t) + s / C sum_c w_c (lse - x_c)
    w_t = w64[safe][:, None]
    want = (1 - smoothing) * w_t * (p - onehot) + smoothing / c * (w64.sum() * p - w64)
    s = np.where(t == -100, 0.0, scale if per_row else scale[0])[:, None]
    np.testing.assert_allclose(dx, want * s, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B, H, L, S, E, Ev", [(1, 2, 70, 70, 16, 16), (2, 1, 5, 130, 20, 8),
                                               (1, 1, 129, 33, 64, 64)])
def test_attention_backward(B, H, L, S, E, Ev, causal):
    from ember.backend.cuda_kernels import triton_attention as attention
    q = _data((B, L, H, E), 1, 1.0).transpose(0, 2, 1, 3)
    k, v = _data((B, H, S, E), 2, 1.0), _data((B, H, S, Ev), 3, 1.0)
    grad = _data((B, H, L, Ev), 4, 1.0)
    q64, k64, v64, g64 = (a.astype(np.float64) for a in (q, k, v, grad))
    out, lse = _attention_ref(q64, k64, v64, 0.3, causal)
    p = np.exp(q64 @ k64.swapaxes(-1, -2) * 0.3 - lse[..., None])
    if causal:
        p = np.where(np.tril(np.ones(p.shape[-2:], bool)), p, 0.0)
    dp = g64 @ v64.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * 0.3
    ref = ds @ k64, ds.swapaxes(-1, -2) @ q64, p.swapaxes(-1, -2) @ g64
    delta = (g64 * out).sum(-1).astype(np.float32)
    dq, dk, dv = (np.empty(a.shape, np.float32) for a in ((q64, k64, v64)))
    strides = tuple(tuple(s // 4 for s in a.strides) for a in (q, k, v))
    attention.attention_backward(Host(q), Host(k), Host(v), Host(grad),
                                 Host(lse.astype(np.float32)), Host(delta), Host(dq), Host(dk),
                                 Host(dv), (B, H, L, S, E, Ev), strides, 0.3, causal)
    for got, want in zip((dq, dk, dv), ref):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k, s, p, d, ceil", [((2, 2), (2, 2), (0, 0), (1, 1), False),
                                              ((3, 3), (2, 2), (1, 1), (1, 1), True),
                                              ((3, 2), (1, 2), (1, 0), (2, 1), False),
                                              ((1, 4), (1, 3), (0, 2), (1, 1), True)])
def test_max_pool2d_matches_the_sweep(k, s, p, d, ceil):
    import ember
    import ember.nn.functional as F
    x = np.round(_data((2, 3, 9, 11)))        # rounded: ties between taps
    x[0, 0, :2, :2] = np.nan
    x[0, 1, 3, 4] = np.nan
    x[1, 2] = -np.inf
    want, want_index = F.max_pool2d(ember.tensor(x), k, s, p, d, ceil, return_indices=True)
    y = np.empty(want.shape, np.float32)
    index = np.empty(want.shape, np.int64)
    pooling.max_pool3d(Host(x), Host(y), Host(index), 6, (1, *x.shape[2:]), (1, *y.shape[2:]),
                       (1, *k), (1, *s), (0, *p), (1, *d))
    np.testing.assert_array_equal(y, want.numpy())
    np.testing.assert_array_equal(index, want_index.numpy())


def test_max_pool2d_bfloat16():
    x = _data((4, 6, 6)).astype(BF16)
    y = np.empty((4, 3, 3), BF16)
    index = np.empty((4, 3, 3), np.int64)
    pooling.max_pool3d(Host(x), Host(y), Host(index), 4, (1, 6, 6), (1, 3, 3), (1, 2, 2),
                       (1, 2, 2), (0, 0, 0), (1, 1, 1))
    want = x.astype(np.float32).reshape(4, 3, 2, 3, 2).max(axis=(2, 4))
    np.testing.assert_array_equal(y.astype(np.float32), want)


@pytest.mark.parametrize("k, s, p, ceil, include_pad, divisor",
                         [((2, 2), (2, 2), (0, 0), False, True, None),
                          ((3, 3), (2, 2), (1, 1), True, True, None),
                          ((3, 3), (2, 2), (1, 1), True, False, None),
                          ((3, 2), (1, 2), (1, 0), False, False, 5),
                          ((1, 4), (1, 3), (0, 2), True, True, None)])
def test_avg_pool2d_and_its_gradient_match_the_cpu(k, s, p, ceil, include_pad, divisor):
    import ember
    import ember.nn.functional as F
    x = _data((2, 3, 9, 11))
    x[0, 0, 1, 1], x[1, 2, 4, 4] = np.nan, np.inf     # only the windows holding them change
    host = ember.tensor(x, requires_grad=True)
    want = F.avg_pool2d(host, k, s, p, ceil, include_pad, divisor)
    g = _data(want.shape, seed=3)
    want.backward(ember.tensor(g))
    y = np.empty(want.shape, np.float32)
    dx = np.empty_like(x)
    geometry = (6, (1, *x.shape[2:]), (1, *y.shape[2:]), (1, *k), (1, *s), (0, *p),
                include_pad, divisor)
    pooling.avg_pool3d(Host(x), Host(y), *geometry)
    pooling.avg_pool3d_backward(Host(g), Host(dx), *geometry)
    np.testing.assert_allclose(y, want.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, host.grad.numpy(), rtol=1e-5, atol=1e-6)
