"""Layouts against PyTorch (round 31): the input gradient of a reflect/replicate pad of a
channels-last input, the output and gradients of 3-d convolutions of channels-last inputs on
the CPU (row-major where PyTorch's kernels are), and NumPy aliases keeping their own shape."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _fmt(lib, t, fmt):
    if fmt == "cl" and t.ndim == 3:             # (N, L, C) strides
        return t.transpose(1, 2).contiguous().transpose(1, 2)
    if fmt == "cl":
        return t.contiguous(memory_format=lib.channels_last if t.ndim == 4
                            else lib.channels_last_3d)
    if fmt == "t":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    return t


def _pad_grad(lib, shape, pad, mode, fi, fg):
    x = _fmt(lib, lib.tensor(np.arange(np.prod(shape), dtype=np.float64).reshape(shape)), fi)
    x.requires_grad_()
    y = lib.nn.functional.pad(x, pad, mode=mode)
    g = _fmt(lib, lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape))), fg)
    gx, = lib.autograd.grad(y, x, g)
    return gx.stride(), gx.detach().numpy()


@pytest.mark.parametrize("shape,pad", [((2, 3, 6, 7), (1, 2, 2, 1)),
                                       ((2, 3, 4, 5, 6), (1, 1, 2, 1, 1, 2)),
                                       ((3, 4, 5, 6), (1, 1, 1, 1, 1, 1)),
                                       ((2, 3, 7), (2, 1)),
                                       ((2, 3, 6, 7), (1, 2))])
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
@pytest.mark.parametrize("fi,fg", [("cl", None), ("cl", "cl"), ("t", None), (None, "cl")])
def test_pad_input_grad_layout(shape, pad, mode, fi, fg):
    if mode != "constant" and len(pad) // 2 not in (len(shape) - 2, len(shape) - 1):
        pytest.skip("not a padding PyTorch's non-constant modes take")
    if mode == "circular" and len(pad) // 2 == len(shape) - 1:
        pytest.skip("unbatched circular pads are checked elsewhere")
    es, ev = _pad_grad(ember, shape, pad, mode, fi, fg)
    ts, tv = _pad_grad(torch, shape, pad, mode, fi, fg)
    assert es == ts
    np.testing.assert_allclose(ev, tv, rtol=1e-12)


def test_reflect_padded_conv2d_input_grad_is_channels_last():
    strides = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        conv = lib.nn.Conv2d(3, 4, 3, padding=1, padding_mode="replicate")
        x = _fmt(lib, lib.randn(2, 3, 8, 8), "cl").requires_grad_()
        h = x * 1
        gx, = lib.autograd.grad(conv(h).sum(), h)
        strides.append(gx.stride())
    assert strides[0] == strides[1] == (192, 1, 24, 3)


def _conv3d_layouts(lib, dtype, n, cin, spatial, kernel, groups, transposed, weight_cl):
    rng = np.random.default_rng(0)
    wshape = (cin, 4 // groups) if transposed else (4, cin // groups)
    x = lib.tensor(rng.standard_normal((n, cin) + spatial), dtype=dtype)
    w = lib.tensor(rng.standard_normal(wshape + kernel), dtype=dtype)
    if weight_cl:
        w = _fmt(lib, w, "cl")
    else:
        x = _fmt(lib, x, "cl")
    x.requires_grad_()
    w.requires_grad_()
    fn = lib.nn.functional.conv_transpose3d if transposed else lib.nn.functional.conv3d
    y = fn(x, w, None, groups=groups)
    g = lib.tensor(rng.standard_normal(tuple(y.shape)), dtype=dtype)
    gx, gw = lib.autograd.grad(y, (x, w), g)
    return [t.stride() for t in (y, gx, gw)], [t.detach().double().numpy() for t in (y, gx, gw)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n,cin,spatial,kernel,groups", [
    (1, 3, (5, 5, 5), (3, 3, 3), 1),          # PyTorch's row-major kernel for float32 too
    (2, 3, (5, 5, 5), (3, 3, 3), 1),
    (1, 4, (5, 5, 5), (3, 3, 3), 2),
    (1, 3, (5, 6, 7), (3, 5, 5), 1),
    (1, 3, (5, 6, 7), (5, 5, 3), 1),
    (1, 3, (90, 90, 3), (1, 2, 2), 1),        # N*C*D*H past 20480
    (1, 3, (80, 80, 3), (1, 2, 2), 1),
])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("weight_cl", [False, True])
def test_conv3d_channels_last_layouts(dtype, n, cin, spatial, kernel, groups, transposed,
                                      weight_cl):
    args = (n, cin, spatial, kernel, groups, transposed, weight_cl)
    es, ev = _conv3d_layouts(ember, getattr(ember, dtype), *args)
    ts, tv = _conv3d_layouts(torch, getattr(torch, dtype), *args)
    assert es == ts
    tol = 1e-3 if dtype == "float32" else 1e-10
    for e, t in zip(ev, tv):
        np.testing.assert_allclose(e, t, rtol=tol, atol=tol)


@pytest.mark.parametrize("fn", ["from_numpy", "as_tensor", "asarray"])
def test_numpy_alias_keeps_shape(fn):
    shapes = []
    for lib in (ember, torch):
        a = np.arange(16, dtype=np.float32).reshape(4, 4)
        t = getattr(lib, fn)(a)
        a.shape = (16,)
        a[5] = -1.0
        shapes.append((tuple(t.shape), t.stride(), t[1, 1].item()))
    assert shapes[0] == shapes[1] == ((4, 4), (4, 1), -1.0)
