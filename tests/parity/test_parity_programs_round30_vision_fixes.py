"""What the kornia-style vision programs of round 30 (test_parity_programs_round30_vision.py
and its _warp, _dense and _features siblings) found, each pinned against PyTorch:

- ``x ** 3`` and ``x ** -2`` of float32 / float64 tensors differed from PyTorch by an ulp in
  about a third of the elements (Lab's ``pow(fxyz, 3.0)``): NumPy's pow is not correctly
  rounded, and PyTorch multiplies for these two exponents. Now PyTorch's bits.
- Jacobians of warps (``jacrev`` through grid_sample) ran grid_sample's backward once per
  example, warning of a missing batching rule for ``aten::_grid_sampler_backward`` where
  PyTorch has one and warns of none, and stayed silent where PyTorch's affine_grid backward
  warns (``aten::affine_grid_generator_backward``). Now the backward folds the batch into N,
  and the warnings are PyTorch's.
- uint8 bilinear / bicubic resizing of a one-channel image (a grayscale resize) returned H
  innermost, non-contiguous where PyTorch's result is row-major. Now PyTorch's strides."""

import numpy as np
import pytest

import ember
from tests.parity._programs import warnings_of

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_X = (np.random.default_rng(0).random(4096) * 3 - 1).astype(np.float32)
_EDGES = [-np.inf, -4.0, -0.0, 0.0, 0.3, 4.0, np.inf, np.nan]


def _bits(t):
    return t.detach().numpy().tobytes()


@pytest.mark.parametrize("exponent", [3, 3.0, -2, -2.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_multiplied_exponents_are_torch_bits(exponent, dtype):
    def run(lib):
        x = lib.from_numpy(_X.astype(dtype))
        return [x ** exponent, lib.pow(x, exponent), x.clone().pow_(exponent),
                lib.float_power(x, exponent), lib.tensor(_EDGES, dtype=getattr(lib, dtype))
                ** exponent]
    for ours, theirs in zip(run(ember), run(torch)):
        assert ours.dtype.itemsize == theirs.dtype.itemsize
        assert _bits(ours) == _bits(theirs)


def test_pow_three_gradient_and_lab_cube_like_torch():
    def run(lib):
        x = lib.from_numpy(_X[:64].copy()).requires_grad_(True)
        fxyz = (x + 16.0) / 116.0
        xyz = lib.where(fxyz > 0.2068966, lib.pow(fxyz, 3.0), (fxyz - 4.0 / 29.0) / 7.787)
        (xyz * lib.linspace(0, 1, 64)).sum().backward()
        return xyz, x.grad
    (ours, ours_g), (theirs, theirs_g) = run(ember), run(torch)
    assert _bits(ours) == _bits(theirs)
    np.testing.assert_allclose(ours_g.numpy(), theirs_g.numpy(), rtol=1e-6, atol=0)


_IMG = np.random.default_rng(1).random((2, 2, 5, 6)).astype(np.float32)
_GRID = np.random.default_rng(2).uniform(-1.1, 1.1, (2, 3, 4, 2)).astype(np.float32)


def _jacobians(lib, mode, padding_mode):
    F = lib.nn.functional
    img, grid = lib.from_numpy(_IMG), lib.from_numpy(_GRID)

    def sample(i, g):
        return F.grid_sample(i, g, mode=mode, padding_mode=padding_mode, align_corners=False)

    ji, jg = lib.func.jacrev(sample, argnums=(0, 1))(img, grid)
    pi, pg = lib.func.vmap(lib.func.grad(lambda i, g: sample(i[None], g[None]).square().sum(),
                                         argnums=(0, 1)))(img, grid)
    return [ji, jg, pi, pg]


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_jacobians_batch_without_fallback_like_torch(mode, padding_mode):
    ours, theirs = _jacobians(ember, mode, padding_mode), _jacobians(torch, mode, padding_mode)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        # float32 sums of products that cancel (bicubic's grid gradient): 1e-5 of the scale
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
    assert ours[1].abs().sum() > 0 or mode == "nearest"

    def program(lib):
        _jacobians(lib, mode, padding_mode)
    assert warnings_of(program, ember) == warnings_of(program, torch) == []


def test_affine_grid_jacobian_warns_of_its_backward_like_torch():
    def program(lib):
        F = lib.nn.functional
        noise = lib.from_numpy(_GRID.reshape(-1)[:6].reshape(1, 2, 3).copy())
        theta = lib.eye(2, 3)[None] + 0.1 * noise
        return lib.func.jacrev(lambda t: F.grid_sample(
            lib.from_numpy(_IMG[:1]), F.affine_grid(t, [1, 2, 4, 4], align_corners=False),
            align_corners=False))(theta)
    np.testing.assert_allclose(program(ember).numpy(), program(torch).numpy(), rtol=1e-5,
                               atol=1e-6)
    shown = warnings_of(program, torch)
    assert warnings_of(program, ember) == shown
    assert len(shown) == 1 and "aten::affine_grid_generator_backward" in shown[0][1]


def test_grid_sample_3d_jacobian_like_torch():
    def program(lib):
        F = lib.nn.functional
        vol = lib.from_numpy(np.linspace(0, 1, 60, dtype=np.float32).reshape(1, 1, 3, 4, 5))
        g = lib.from_numpy(_GRID.reshape(-1)[:24].reshape(1, 2, 2, 2, 3).copy())
        return lib.func.jacrev(lambda g: F.grid_sample(vol, g, align_corners=True))(g)
    np.testing.assert_allclose(program(ember).numpy(), program(torch).numpy(), rtol=1e-5,
                               atol=1e-6)
    assert warnings_of(program, ember) == warnings_of(program, torch) == []


_U8 = (np.random.default_rng(6).random((2, 3, 13, 15)) * 255).astype(np.uint8)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("layout", ["contiguous_format", "channels_last"])
@pytest.mark.parametrize("mode,antialias", [("bilinear", True), ("bicubic", True),
                                            ("bilinear", False), ("bicubic", False)])
def test_uint8_resize_strides_and_bytes_like_torch(channels, layout, mode, antialias):
    def run(lib):
        x = lib.from_numpy(_U8[:, :channels].copy()).contiguous(
            memory_format=getattr(lib, layout))
        return [lib.nn.functional.interpolate(x, size=size, mode=mode, antialias=antialias)
                for size in [(5, 7), (20, 9), (13, 6), (7, 15)]]
    for ours, theirs in zip(run(ember), run(torch)):
        assert ours.stride() == theirs.stride()
        assert _bits(ours) == _bits(theirs)
