"""Pooling and resampling layers, grid_sample and affine_grid against PyTorch: the same
configuration and input in both, outputs and input gradients compared."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _run(lib, build, arrays, call):
    tensors = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = call(build(lib.nn), lib.nn.functional, *tensors)
    outs = out if isinstance(out, tuple) else (out,)
    weights = [np.random.default_rng(i).standard_normal(tuple(o.shape)) for i, o in
               enumerate(outs)]
    total = sum((o * lib.tensor(w, dtype=o.dtype)).sum() for o, w in zip(outs, weights)
                if o.dtype.is_floating_point)
    total.backward()
    return ([np.asarray(o.detach().numpy() if lib is torch else o.detach()) for o in outs],
            [np.asarray(t.grad.numpy() if lib is torch else t.grad) for t in tensors
             if t.grad is not None])


def _compare(build, arrays, call=lambda m, F, x: m(x)):
    (t_out, t_grad), (e_out, e_grad) = (_run(lib, build, arrays, call) for lib in (torch, ember))
    assert len(t_out) == len(e_out) and len(t_grad) == len(e_grad)
    for a, b in zip(t_out + t_grad, e_out + e_grad):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


RNG = np.random.default_rng(0)
X1, X2, X3 = (RNG.standard_normal(s) for s in ((2, 3, 11), (2, 3, 9, 8), (1, 2, 5, 6, 4)))


@pytest.mark.parametrize("build,x", [
    (lambda nn: nn.MaxPool1d(3, 2, 1, return_indices=True), X1),
    (lambda nn: nn.MaxPool2d((3, 2), (2, 1), (1, 0), (1, 2), ceil_mode=True), X2),
    (lambda nn: nn.MaxPool3d(2, return_indices=True), X3),
    (lambda nn: nn.AvgPool1d(4, 3, 2, True, False), X1),
    (lambda nn: nn.AvgPool2d(3, 2, 1, ceil_mode=True, divisor_override=4), X2),
    (lambda nn: nn.AvgPool3d((2, 3, 2), 1, (1, 1, 0), count_include_pad=False), X3),
    (lambda nn: nn.AdaptiveAvgPool1d(4), X1),
    (lambda nn: nn.AdaptiveAvgPool2d((4, None)), X2),
    (lambda nn: nn.AdaptiveAvgPool3d((2, 4, 3)), X3),
    (lambda nn: nn.AdaptiveMaxPool1d(4, return_indices=True), X1),
    (lambda nn: nn.AdaptiveMaxPool2d((5, 3)), X2),
    (lambda nn: nn.AdaptiveMaxPool3d(2, return_indices=True), X3),
    (lambda nn: nn.LPPool1d(2, 3, 2), np.abs(X1) + 0.1),
    (lambda nn: nn.LPPool2d(3.0, (2, 3), ceil_mode=True), np.abs(X2) + 0.1),
    (lambda nn: nn.Upsample(scale_factor=(1.5, 0.7), mode="bicubic"), X2),
    (lambda nn: nn.Upsample(size=(7, 5, 3), mode="trilinear", align_corners=True), X3),
    (lambda nn: nn.UpsamplingNearest2d(scale_factor=3), X2),
    (lambda nn: nn.UpsamplingBilinear2d(size=(4, 11)), X2),
    (lambda nn: nn.PixelShuffle(2), RNG.standard_normal((2, 8, 3, 2))),
    (lambda nn: nn.PixelUnshuffle(3), RNG.standard_normal((2, 1, 6, 9))),
    (lambda nn: nn.ChannelShuffle(3), RNG.standard_normal((2, 6, 3))),
])
def test_layer_parity(build, x):
    _compare(build, [x])


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sample_parity(mode, padding_mode, align_corners):
    x = RNG.standard_normal((2, 3, 5, 4))
    grid = RNG.uniform(-1.4, 1.4, (2, 3, 6, 2))
    _compare(lambda nn: None, [x, grid],
             lambda m, F, a, g: F.grid_sample(a, g, mode, padding_mode, align_corners))


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_volumetric_grid_sample_parity(mode):
    x = RNG.standard_normal((1, 2, 3, 4, 5))
    grid = RNG.uniform(-1.2, 1.2, (1, 2, 3, 2, 3))
    _compare(lambda nn: None, [x, grid],
             lambda m, F, a, g: F.grid_sample(a, g, mode, "border", False))


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 2, 3, 4, 2), (2, 1, 1, 3)])
@pytest.mark.parametrize("align_corners", [True, False])
def test_affine_grid_parity(size, align_corners):
    theta = RNG.standard_normal((size[0], len(size) - 2, len(size) - 1))
    _compare(lambda nn: None, [theta],
             lambda m, F, t: F.affine_grid(t, size, align_corners))


@pytest.mark.parametrize("mode,kwargs", [("bilinear", {}), ("bilinear", {"align_corners": True}),
                                         ("bicubic", {}), ("area", {}), ("nearest", {}),
                                         ("bilinear", {"antialias": True})])
@pytest.mark.parametrize("size", [(3, 4), (9, 7)])
def test_interpolate_non_finite_parity(mode, kwargs, size):
    x = RNG.standard_normal((2, 2, 6, 5))
    x[0, 0, 1, 1], x[1, 1, 3, 2], x[0, 1, 4, 4] = np.nan, np.inf, -np.inf
    got = ember.nn.functional.interpolate(ember.tensor(x), size=size, mode=mode, **kwargs)
    want = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode, **kwargs)
    np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-6, atol=1e-6)
