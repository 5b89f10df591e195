"""Upsampling and shuffle layers, grid_sample and affine_grid (functions built from ops), the
deprecated F.upsample* wrappers; interpolate and the shuffle ops have OpInfo entries."""

import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.testing import assert_close as _assert_close


def assert_close(actual, expected, **kwargs):
    """Values only: NumPy references compute in their own dtypes."""
    _assert_close(actual, expected, check_dtype=False, **kwargs)


@pytest.mark.parametrize("module,text", [
    (nn.Upsample(scale_factor=2), "Upsample(scale_factor=2.0, mode='nearest')"),
    (nn.Upsample(size=3, mode="bilinear", align_corners=True), "Upsample(size=3, mode='bilinear')"),
    (nn.Upsample(scale_factor=(2, 3)), "Upsample(scale_factor=(2.0, 3.0), mode='nearest')"),
    (nn.UpsamplingNearest2d(scale_factor=2), "UpsamplingNearest2d(scale_factor=2.0, "
                                             "mode='nearest')"),
    (nn.UpsamplingBilinear2d(size=4), "UpsamplingBilinear2d(size=4, mode='bilinear')"),
    (nn.PixelShuffle(2), "PixelShuffle(upscale_factor=2)"),
    (nn.PixelUnshuffle(3), "PixelUnshuffle(downscale_factor=3)"),
    (nn.ChannelShuffle(2), "ChannelShuffle(groups=2)"),
])
def test_repr(module, text):
    assert repr(module) == text
    assert list(module.parameters()) == []


def test_upsample_modules_call_interpolate():
    x = ember.randn(2, 3, 4, 5)
    assert_close(nn.Upsample(scale_factor=2)(x),
                 np.asarray(x).repeat(2, axis=2).repeat(2, axis=3))
    assert_close(nn.UpsamplingBilinear2d(size=(7, 9))(x),
                 F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True))
    assert_close(nn.Upsample(scale_factor=1.5, mode="bicubic", recompute_scale_factor=True)(x),
                 F.interpolate(x, size=(6, 7), mode="bicubic"))
    m = nn.Upsample(size=3, mode="bilinear")
    assert (m.align_corners, m.recompute_scale_factor, m.name) == (None, None, "Upsample")


def test_bilinear_align_corners_keeps_corners_and_is_linear_between():
    x = ember.tensor([[[[0.0, 3.0], [6.0, 9.0]]]])
    out = F.interpolate(x, size=(3, 4), mode="bilinear", align_corners=True)
    assert_close(out, [[[[0.0, 1.0, 2.0, 3.0], [3.0, 4.0, 5.0, 6.0], [6.0, 7.0, 8.0, 9.0]]]])


def test_non_finite_values_stay_in_their_taps():
    # PyTorch reads both taps of a linear interpolation even at weight 0, so 0 * inf makes
    # NaN (here also from the height taps, both on the one row with weights 1 and 0), but a
    # NaN or infinity never leaks into windows that do not contain it
    x = ember.tensor([[[[0.0, math.inf, 2.0]]]])
    out = F.interpolate(x, size=(1, 5), mode="bilinear", align_corners=True)
    assert_close(out, [[[[math.nan, math.nan, math.nan, math.nan, 2.0]]]], equal_nan=True)
    pooled = F.avg_pool2d(ember.tensor([[[[0.0, math.inf, 2.0, 3.0]]]]), (1, 2))
    assert_close(pooled, [[[[math.inf, 2.5]]]])
    adaptive = F.adaptive_avg_pool2d(ember.tensor([[[[0.0, math.nan, 2.0, 3.0]]]]), (1, 2))
    assert_close(adaptive, [[[[math.nan, 2.5]]]], equal_nan=True)


def test_area_mode_is_adaptive_average():
    x = ember.randn(2, 3, 6, 9)
    assert_close(F.interpolate(x, size=(3, 4), mode="area"), F.adaptive_avg_pool2d(x, (3, 4)))


@pytest.mark.parametrize("name,call", [
    ("upsample", lambda x: F.upsample(x, scale_factor=2)),
    ("upsample_nearest", lambda x: F.upsample_nearest(x, scale_factor=2)),
    ("upsample_bilinear", lambda x: F.upsample_bilinear(x, size=(4, 6))),
])
def test_deprecated_upsample_warns_and_matches(name, call):
    x = ember.randn(1, 2, 2, 3)
    with pytest.warns(UserWarning, match=f"`nn.functional.{name}` is deprecated"):
        out = call(x)
    mode = "bilinear" if name == "upsample_bilinear" else "nearest"
    expected = F.interpolate(x, size=(4, 6), mode=mode,
                             align_corners=True if mode == "bilinear" else None)
    assert_close(out, expected)


def test_interpolate_gradient_of_nearest_upsampling_sums_copies():
    x = ember.randn(1, 1, 2, 3, requires_grad=True)
    F.interpolate(x, scale_factor=2).sum().backward()
    assert_close(x.grad, np.full((1, 1, 2, 3), 4.0))


# --- shuffles ---------------------------------------------------------------------------------

def test_pixel_shuffle_modules_invert_each_other():
    x = ember.randn(2, 8, 3, 5)
    y = nn.PixelShuffle(2)(x)
    assert tuple(y.shape) == (2, 2, 6, 10)
    assert_close(y[:, 0, 0, :2], np.asarray(x)[:, :2, 0, 0])
    assert_close(nn.PixelUnshuffle(2)(y), x)


def test_pixel_shuffle_empty_keeps_documented_shapes():
    # PyTorch's pixel_unshuffle returns any empty input unchanged; ember follows the docs
    assert tuple(F.pixel_shuffle(ember.randn(0, 4, 2, 2), 2).shape) == (0, 1, 4, 4)
    assert tuple(F.pixel_unshuffle(ember.randn(0, 1, 4, 4), 2).shape) == (0, 4, 2, 2)


def test_channel_shuffle_module_interleaves_groups():
    x = ember.arange(6.0).reshape(1, 6, 1)
    assert nn.ChannelShuffle(2)(x).flatten().tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    assert ember.native_channel_shuffle(x, 3).flatten().tolist() == \
        [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]


# --- grid_sample / affine_grid ----------------------------------------------------------------

def _reflect(c, low2, high2):
    if low2 == high2:
        return 0.0
    low, span = low2 / 2, (high2 - low2) / 2
    c = abs(c - low)
    extra, flips = math.fmod(c, span), math.floor(c / span)
    return extra + low if flips % 2 == 0 else span - extra + low


def _source(c, size, padding_mode, align_corners):
    c = (c + 1) / 2 * (size - 1) if align_corners else ((c + 1) * size - 1) / 2
    if padding_mode == "border":
        c = min(max(c, 0), size - 1)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        c = min(max(c, 0), size - 1)
    return c


def _grid_sample_ref(x, grid, mode, padding_mode, align_corners):
    n, c, h, w = x.shape
    out = np.zeros((n, c) + grid.shape[1:3])

    def at(b, yy, xx):
        return x[b, :, yy, xx] if 0 <= yy < h and 0 <= xx < w else np.zeros(c)
    for b in range(n):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                sx = _source(grid[b, i, j, 0], w, padding_mode, align_corners)
                sy = _source(grid[b, i, j, 1], h, padding_mode, align_corners)
                if mode == "nearest":
                    out[b, :, i, j] = at(b, int(np.rint(sy)), int(np.rint(sx)))
                    continue
                x0, y0 = math.floor(sx), math.floor(sy)
                tx, ty = sx - x0, sy - y0
                out[b, :, i, j] = (at(b, y0, x0) * (1 - tx) * (1 - ty)
                                   + at(b, y0, x0 + 1) * tx * (1 - ty)
                                   + at(b, y0 + 1, x0) * (1 - tx) * ty
                                   + at(b, y0 + 1, x0 + 1) * tx * ty)
    return out


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sample_matches_reference(mode, padding_mode, align_corners):
    ember.manual_seed(0)
    x = ember.randn(2, 3, 4, 5, dtype=ember.float64)
    grid = ember.rand(2, 3, 2, 2, dtype=ember.float64) * 2.6 - 1.3
    out = F.grid_sample(x, grid, mode, padding_mode, align_corners)
    assert_close(out, _grid_sample_ref(np.asarray(x), np.asarray(grid), mode, padding_mode,
                                       align_corners))


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_gradcheck(padding_mode):
    ember.manual_seed(1)
    x = ember.randn(1, 2, 3, 3, dtype=ember.float64, requires_grad=True)
    grid = (ember.rand(1, 2, 2, 2, dtype=ember.float64) * 2.4 - 1.2).requires_grad_(True)
    assert ember.autograd.gradcheck(
        lambda a, g: F.grid_sample(a, g, "bilinear", padding_mode, False), [x, grid])


def test_grid_sample_bicubic_and_volumetric_shapes():
    x = ember.randn(1, 2, 4, 4)
    out = F.grid_sample(x, ember.zeros(1, 3, 5, 2), mode="bicubic", align_corners=True)
    assert tuple(out.shape) == (1, 2, 3, 5)
    v = ember.randn(1, 2, 3, 4, 5)
    identity = F.affine_grid(ember.eye(3, 4).unsqueeze(0), (1, 2, 3, 4, 5), align_corners=True)
    assert_close(F.grid_sample(v, identity, align_corners=True), v, atol=1e-5, rtol=1e-5)


def test_identity_affine_grid_samples_the_input_back():
    x = ember.randn(2, 3, 5, 4)
    theta = ember.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).expand(2, 2, 3)
    for ac in (True, False):
        grid = F.affine_grid(theta, (2, 3, 5, 4), align_corners=ac)
        assert_close(F.grid_sample(x, grid, align_corners=ac), x, atol=1e-6, rtol=1e-5)


def test_affine_grid_matches_reference_and_gradcheck():
    theta = ember.randn(2, 2, 3, dtype=ember.float64)
    grid = F.affine_grid(theta, (2, 1, 3, 4), align_corners=False)
    xs = (np.arange(4) * 2 + 1) / 4 - 1
    ys = (np.arange(3) * 2 + 1) / 3 - 1
    base = np.stack(list(np.meshgrid(xs, ys)) + [np.ones((3, 4))], -1)
    assert_close(grid, np.einsum("hwk,njk->nhwj", base, np.asarray(theta)))
    theta.requires_grad_(True)
    assert ember.autograd.gradcheck(lambda t: F.affine_grid(t, (2, 1, 3, 2), True), [theta])


def test_affine_grid_graph_saves_nothing_and_names_its_node():
    theta = ember.tensor([[[0.8, -0.2, 0.1], [0.3, 0.9, -0.1]]], requires_grad=True)
    grid = F.affine_grid(theta, (1, 1, 2, 2), align_corners=False)
    assert type(grid.grad_fn).__name__ == "AffineGridGeneratorBackward0"
    assert grid.grad_fn.next_functions[0][0].variable is theta
    first, = ember.autograd.grad(grid.sum(), theta)
    second, = ember.autograd.grad(grid.sum(), theta)     # nothing saved, nothing freed
    assert first.tolist() == second.tolist() == [[[0.0, 0.0, 4.0], [0.0, 0.0, 4.0]]]


def test_identity_affine_grid_rounds_like_pytorch():
    # float32 coordinates as PyTorch computes them (linspace, then * (n - 1) / n): the
    # bilinear subgradient at pixel centres depends on which side of them they land
    theta = ember.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    grid = F.affine_grid(theta, (1, 1, 1, 7), align_corners=False)
    assert grid[0, 0, :, 0].tolist() == [-0.8571428656578064, -0.5714285373687744,
                                         -0.2857142686843872, -2.554484801464696e-08,
                                         0.2857142686843872, 0.5714285373687744,
                                         0.8571428656578064]
    grid = F.affine_grid(theta, (1, 1, 4, 2), align_corners=True)
    assert grid[0, :, 0, 1].tolist() == [-1.0, -0.3333333134651184, 0.3333333134651184, 1.0]


def test_grid_functions_warn_and_reject_like_pytorch():
    with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior"):
        F.affine_grid(ember.randn(1, 2, 3), (1, 1, 2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.grid_sample(ember.randn(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), align_corners=False)
    with pytest.raises(ValueError, match="Expected a batch of 2D affine matrices of shape "
                                         "Nx2x3 for size"):
        F.affine_grid(ember.randn(1, 3, 3), (1, 1, 4, 4), align_corners=False)
    with pytest.raises(ValueError, match="expected padding_mode to be 'zeros', 'border', or "
                                         "'reflection', but got: 'foo'"):
        F.grid_sample(ember.randn(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), padding_mode="foo")
    with pytest.raises(RuntimeError, match="expected grid and input to have same batch size"):
        F.grid_sample(ember.randn(2, 1, 2, 2), ember.zeros(1, 1, 1, 2), align_corners=False)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        F.grid_sample(ember.randn(1, 1, 2, 2), ember.zeros(1, 1, 1, 2, dtype=ember.float64),
                      align_corners=False)


@pytest.mark.parametrize("shape, mode, antialias, kernel", [
    ((1, 2, 4), "nearest", False, "compute_indices_weights_nearest"),
    ((1, 2, 4), "linear", False, "compute_indices_weights_linear"),
    ((1, 2, 4, 4), "nearest-exact", False, "upsample_nearest2d_channels_last"),
    ((1, 2, 4, 4), "bilinear", False, "upsample_bilinear2d_channels_last"),
    ((1, 2, 4, 4), "bicubic", False, "compute_indices_weights_cubic"),
    ((1, 2, 4, 4), "bilinear", True, "compute_index_ranges_weights"),
    ((1, 2, 4, 4), "area", False, "adaptive_avg_pool2d"),
    ((1, 2, 4, 4, 4), "area", False, "adaptive_avg_pool3d_cpu"),
    ((1, 2, 4, 4, 4), "trilinear", False, "compute_indices_weights_linear"),
])
def test_interpolate_names_pytorchs_kernel_for_integer_input(shape, mode, antialias, kernel):
    x = ember.ones(shape, dtype=ember.int32)
    with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for 'Int'$"):
        F.interpolate(x, size=2, mode=mode, antialias=antialias)


def test_grid_sample_non_finite_grid_points():
    # PyTorch: zeros padding samples nothing (bilinear weights stay NaN, nearest gives +0.0);
    # border/reflection clamp NaN to 0 and +-inf to the ends; out-of-range corners give +0.0
    img = -ember.arange(1., 13.).view(1, 1, 3, 4)
    grid = ember.tensor([[[[float("nan"), 0.], [float("inf"), 0.], [-float("inf"), 0.], [5., 5.]]]])
    out = {(m, p): F.grid_sample(img, grid, mode=m, padding_mode=p, align_corners=False)
           for m in ("bilinear", "nearest", "bicubic") for p in ("zeros", "border", "reflection")}
    assert str(out["bilinear", "zeros"]) == "tensor([[[[nan, nan, nan, 0.]]]])"
    assert str(out["nearest", "zeros"]) == "tensor([[[[0., 0., 0., 0.]]]])"
    assert out["bilinear", "border"].flatten().tolist() == [-5., -8., -5., -12.]
    assert out["nearest", "reflection"].flatten().tolist() == [-5., -5., -5., -12.]
    assert str(out["bicubic", "border"]) == "tensor([[[[ nan,  nan,  nan, -12.]]]])"
    assert out["bicubic", "reflection"][0, 0, 0, 3].item() == -12.9375


def test_interpolate_size_takes_integer_tensors_and_rejects_others_like_pytorch():
    x = ember.ones(1, 1, 3, 3)
    assert F.interpolate(x, size=ember.tensor(5)).shape == (1, 1, 5, 5)
    assert F.interpolate(x, size=[ember.tensor(2), 4], mode="bilinear").shape == (1, 1, 2, 4)
    with pytest.raises(TypeError, match=r"^upsample_bilinear2d\(\) received an invalid "
                       r"combination of arguments - got \(Tensor, list, bool, NoneType\), but "
                       r"expected one of:$"):
        F.interpolate(x, size=2.5, mode="bilinear")
    with pytest.raises(TypeError, match=r"^_upsample_nearest_exact2d\(\) received .* got "
                       r"\(Tensor, list, NoneType\)"):
        F.interpolate(x, size=ember.tensor([2, 2]), mode="nearest-exact")
    with pytest.raises(TypeError, match=r"^adaptive_avg_pool2d\(\): argument 'output_size' "
                       r"\(position 2\) must be tuple of ints, but found element of type bool"):
        F.interpolate(x, size=True, mode="area")
    with pytest.raises(TypeError, match=r"^expected size to be one of int or Tuple\[int\] or "
                       r"Tuple\[int, int\] or Tuple\[int, int, int\], but got size with types "
                       r"\[<class 'float'>, <class 'int'>\]$"):
        F.interpolate(x, size=(2.5, 3))
