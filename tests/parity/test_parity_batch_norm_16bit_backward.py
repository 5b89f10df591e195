"""Batch norm's backward for a 16-bit input against PyTorch's CPU kernel, which computes it in
float32 (from the upcast input and gradient and the float32, or 16-bit, saved statistics) and
rounds each gradient once: the input's to 16 bits, float32 parameters' not at all."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _gradients(T, x, gy, dtype, param_dtype, training, affine, channels_last):
    """Gradients of batch_norm (input, weight, bias) in library ``T`` as float64 arrays,
    and their dtypes' names."""
    dt, pdt = getattr(T, dtype), getattr(T, param_dtype)
    c = x.shape[1]
    xt, gt = T.tensor(x).to(dt), T.tensor(gy).to(dt)
    if channels_last:
        xt, gt = (t.contiguous(memory_format=T.channels_last) for t in (xt, gt))
    xt.requires_grad_(True)
    params = [T.linspace(0.5, 1.5, c).to(pdt).requires_grad_(True),
              T.linspace(-0.3, 0.2, c).to(pdt).requires_grad_(True)] if affine else [None, None]
    rm, rv = T.linspace(-0.1, 0.1, c).to(pdt), T.linspace(0.8, 1.2, c).to(pdt)
    y = T.nn.functional.batch_norm(xt, rm, rv, *params, training=training)
    y.backward(gt)
    grads = [xt.grad] + [p.grad for p in params if p is not None]
    return ([g.double().numpy() for g in grads],
            [str(g.dtype).split(".")[-1] for g in grads])


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return ((rng.standard_normal(shape) * 2 + 0.7).astype(np.float32),
            rng.standard_normal(shape).astype(np.float32))


def _assert_like_pytorch(got, want):
    (gx, *gp), (tx, *tp) = got, want
    # the input's gradient: bit for bit but where float32 sums round across a 16-bit
    # rounding boundary (a handful of elements, one 16-bit ulp apart)
    assert np.mean(gx != tx) < 0.005
    np.testing.assert_allclose(gx, tx, rtol=1e-2, atol=1e-3)
    for g, t in zip(gp, tp):        # float32 gradients: float32 round-off only
        np.testing.assert_allclose(g, t, rtol=2e-6, atol=2e-6 * np.abs(t).max())


CASES = [("bfloat16", "float32"), ("float16", "float32")]
SHAPES = [(4, 3, 20, 20), (64, 8), (6, 4, 30), (2, 3, 4, 5, 6)]


@pytest.mark.parametrize("dtype,param_dtype", CASES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("training", [True, False])
def test_16_bit_input_float32_parameters_gradients_as_pytorchs(dtype, param_dtype, shape,
                                                                training):
    x, gy = _data(shape)
    got, got_dtypes = _gradients(ember, x, gy, dtype, param_dtype, training, True, False)
    want, want_dtypes = _gradients(torch, x, gy, dtype, param_dtype, training, True, False)
    assert got_dtypes == want_dtypes == [dtype, param_dtype, param_dtype]
    _assert_like_pytorch(got, want)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_16_bit_channels_last_gradients_as_pytorchs(dtype, training, affine):
    x, gy = _data((4, 6, 9, 9), seed=1)
    got = _gradients(ember, x, gy, dtype, "float32", training, affine, True)[0]
    want = _gradients(torch, x, gy, dtype, "float32", training, affine, True)[0]
    _assert_like_pytorch(got, want)


@pytest.mark.parametrize("dtype,training", [("float16", True), ("float16", False),
                                            ("bfloat16", False)])
def test_16_bit_parameters_gradients_as_pytorchs(dtype, training):
    # (in training, a bfloat16 input with bfloat16 parameters saves statistics an ulp off
    # PyTorch's in some channels: the forward's matter, not the backward's)
    x, gy = _data((8, 16, 7, 7), seed=2)
    got, got_dtypes = _gradients(ember, x, gy, dtype, dtype, training, True, False)
    want, want_dtypes = _gradients(torch, x, gy, dtype, dtype, training, True, False)
    assert got_dtypes == want_dtypes == [dtype] * 3
    (gx, *gp), (tx, *tp) = got, want
    assert np.mean(gx != tx) < 0.005
    for g, t in zip(gp, tp):        # rounded once from float32, as PyTorch's
        np.testing.assert_array_equal(g, t)


def test_autocast_conv_then_batch_norm_gradients_as_pytorchs():
    """The AMP CNN: a bfloat16 conv output into BatchNorm2d's float32 parameters; the conv
    bias gradient (nearly zero after batch norm) stays at PyTorch's float32 round-off."""
    x = np.random.default_rng(0).standard_normal((8, 3, 12, 12)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.2
    grads = []
    for T in (ember, torch):
        conv, bn = T.nn.Conv2d(3, 8, 3, padding=1), T.nn.BatchNorm2d(8)
        with T.no_grad():
            conv.weight.copy_(T.tensor(w))
            conv.bias.copy_(T.linspace(-1, 1, 8))
        with T.autocast("cpu", dtype=T.bfloat16):
            h = bn(conv(T.tensor(x)))
        ((h.float() ** 2).mean() + h.float().sum() * 0.01).backward()
        grads.append([p.grad.numpy() for p in (conv.bias, bn.weight, bn.bias)])
    (cb, bw, bb), (tcb, tbw, tbb) = grads
    np.testing.assert_allclose(cb, tcb, rtol=0, atol=5e-5 * np.abs(tbb).max())
    np.testing.assert_allclose(bw, tbw, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(bb, tbb, rtol=2e-6, atol=1e-7)
