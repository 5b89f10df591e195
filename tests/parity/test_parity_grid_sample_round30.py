"""Round 30 against PyTorch: grid_sample on the arrays (bicubic now too, and the padded-plane
layout of bilinear and nearest): values and both gradients for every padding mode and
align_corners, with NaN, infinite and far points, and 1-pixel inputs."""

import itertools

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

PADDINGS = ("zeros", "border", "reflection")
ODD = [[-1, -1], [1, 1], [0, 0], [np.nan, 0.2], [5.0, -7.0], [0.3, np.inf], [-np.inf, 0.5],
       [2.7, 1.3]]


def _data(shape, points, dtype, seed=0, finite=False):
    rng = np.random.default_rng(seed)
    nd = len(shape) - 2
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.uniform(-1.4, 1.4, (shape[0],) + points + (nd,)).astype(dtype)
    flat = g.reshape(-1, nd)
    odd = np.array([p + [p[0]] * (nd - 2) for p in ODD])
    if finite:
        odd = odd[np.isfinite(odd).all(-1)]
    flat[:len(odd)] = odd[:len(flat)]
    go = rng.standard_normal(shape[:2] + points).astype(dtype)
    return x, g, go


def _run(lib, x0, g0, go, mode, padding, ac):
    x = lib.tensor(x0, requires_grad=True)
    g = lib.tensor(g0, requires_grad=True)
    y = lib.nn.functional.grid_sample(x, g, mode, padding, align_corners=ac)
    y.backward(lib.tensor(go))
    return [np.asarray(t.detach().numpy(), dtype=np.float64) for t in (y, x.grad, g.grad)]


def _check(x0, g0, go, mode, padding, ac):
    got = _run(ember, x0, g0, go, mode, padding, ac)
    want = _run(torch, x0, g0, go, mode, padding, ac)
    single = x0.dtype == np.float32
    for name, a, b in zip(("output", "input grad", "grid grad"), got, want):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=name)
        # float32 grid gradients: the weights' slopes cancel, in torch as in ember
        tol = (1e-5, 3e-5 if name == "grid grad" else 1e-5) if single else (1e-10, 1e-10)
        np.testing.assert_allclose(a, b, rtol=tol[0], atol=tol[1], err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 5, 6), (1, 2, 1, 1), (1, 2, 1, 4), (1, 20, 3, 2)])
@pytest.mark.parametrize("padding,ac", list(itertools.product(PADDINGS, (False, True))))
def test_bicubic(shape, padding, ac, dtype):
    x0, g0, go = _data(shape, (4, 3), dtype)
    _check(x0, g0, go, "bicubic", padding, ac)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 6), (1, 2, 1, 1), (2, 2, 3, 4, 5), (1, 18, 1, 3, 2)])
@pytest.mark.parametrize("padding,ac", list(itertools.product(PADDINGS, (False, True))))
def test_bilinear_and_nearest(shape, mode, padding, ac, dtype):
    points = (4, 3) if len(shape) == 4 else (2, 3, 2)
    # torch's 3-D kernel treats NaN and infinite points otherwise than its 2-D one, and its 2-D
    # bilinear backward crashes on them with border or reflection padding (torch 2.13)
    finite = len(shape) == 5 or (mode == "bilinear" and padding != "zeros")
    x0, g0, go = _data(shape, points, dtype, seed=1, finite=finite)
    _check(x0, g0, go, mode, padding, ac)


def test_bicubic_on_an_affine_grid():
    """A rotation of a 16 x 16 image, grid from affine_grid: the usual call."""
    angle = 0.3
    theta = np.array([[[np.cos(angle), -np.sin(angle), 0.1], [np.sin(angle), np.cos(angle),
                                                              -0.2]]], dtype=np.float32)
    x0 = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
    out = []
    for lib in (ember, torch):
        x = lib.tensor(x0, requires_grad=True)
        t = lib.tensor(theta, requires_grad=True)
        g = lib.nn.functional.affine_grid(t, (1, 3, 16, 16), align_corners=False)
        y = lib.nn.functional.grid_sample(x, g, "bicubic", "reflection", align_corners=False)
        (y * y).sum().backward()
        out.append([y.detach().numpy(), x.grad.numpy(), t.grad.numpy()])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding,ac", list(itertools.product(PADDINGS, (False, True))))
def test_16_bit(mode, padding, ac, dtype):
    """PyTorch's CPU kernel computes 16-bit sampling in the 16-bit dtype, step by step (most of
    its values differ from float32 math rounded once): bilinear and nearest values agree
    exactly, bicubic (another order of the same roundings) and the gradients within 16 bits."""
    rng = np.random.default_rng(8)
    x0 = rng.standard_normal((2, 3, 8, 9)).astype(np.float32)
    g0 = rng.uniform(-1.2, 1.2, (2, 5, 4, 2)).astype(np.float32)
    go = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    out = []
    for lib in (ember, torch):
        dt = getattr(lib, dtype)
        x = lib.tensor(x0).to(dt).requires_grad_()
        g = lib.tensor(g0).to(dt).requires_grad_()
        y = lib.nn.functional.grid_sample(x, g, mode, padding, align_corners=ac)
        y.backward(lib.tensor(go).to(dt))
        assert y.dtype == dt and x.grad.dtype == dt and g.grad.dtype == dt
        out.append([t.detach().float().numpy() for t in (y, x.grad, g.grad)])
    (y, gx, gg), (ty, tgx, tgg) = out
    if mode != "bicubic":
        np.testing.assert_array_equal(y, ty)
    tol = 2e-2 if dtype == "bfloat16" else 2e-3
    for a, b in ((y, ty), (gx, tgx), (gg, tgg)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=2 * tol * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("ac", [False, True])
def test_16_bit_wide_inputs(mode, ac, dtype):
    """Rows wider than the dtype holds pixel indices (bfloat16: 256, float16: 2048), zero
    padding (PyTorch's other paddings read past the row there): values and both gradients of
    the first-order path, and the first gradients under create_graph (the composite's)."""
    width = 300 if dtype == "bfloat16" else 2100
    rng = np.random.default_rng(12)
    x0 = rng.standard_normal((1, 2, 3, width)).astype(np.float32)
    g0 = rng.uniform(-1.02, 1.02, (1, 4, 50, 2)).astype(np.float32)
    out = []
    for lib in (ember, torch):
        dt = getattr(lib, dtype)
        x = lib.tensor(x0).to(dt).requires_grad_()
        g = lib.tensor(g0).to(dt).requires_grad_()
        y = lib.nn.functional.grid_sample(x, g, mode, "zeros", align_corners=ac)
        first = lib.autograd.grad((y * y).sum(), (x, g), retain_graph=True)
        second = lib.autograd.grad((y * y).sum(), (x, g), create_graph=True)
        out.append([t.detach().float().numpy() for t in (y,) + first + second])
    tol = 2e-2 if dtype == "bfloat16" else 2e-3
    for name, a, b in zip(("output", "input grad", "grid grad", "input grad (create_graph)",
                           "grid grad (create_graph)"), *out):
        np.testing.assert_allclose(a, b, rtol=tol, atol=2 * tol * max(1.0, np.abs(b).max()),
                                   err_msg=name)


@pytest.mark.parametrize("dtype", ["int32", "float8_e5m2", "float8_e4m3fn"])
@pytest.mark.parametrize("nd", [2, 3])
def test_dtypes_without_a_kernel(dtype, nd):
    """Integers and float8: PyTorch's NotImplementedError naming its 2-D or 3-D CPU kernel."""
    messages = []
    for lib in (ember, torch):
        x = lib.zeros((1, 1) + (2,) * nd).to(getattr(lib, dtype))
        g = lib.zeros((1,) + (1,) * nd + (nd,)).to(getattr(lib, dtype))
        with pytest.raises(NotImplementedError) as info:
            lib.nn.functional.grid_sample(x, g, align_corners=False)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("nd", [2, 3])
def test_create_graph_gradients_are_the_backward_op(mode, nd):
    """Under create_graph the first gradients come from PyTorch's GridSampler{2,3}D backward
    op (node GridSampler2DBackwardBackward0), and so do their values."""
    if mode == "bicubic" and nd == 3:
        pytest.skip("bicubic is 2-D only")
    x0, g0, go = _data((1, 2, 3, 4) + (3,) * (nd - 2), (2, 3) + (2,) * (nd - 2), np.float64,
                       seed=13, finite=True)
    out = []
    for lib in (ember, torch):
        x = lib.tensor(x0, requires_grad=True)
        g = lib.tensor(g0, requires_grad=True)
        y = lib.nn.functional.grid_sample(x, g, mode, "border", align_corners=False)
        first = lib.autograd.grad(y, (x, g), lib.tensor(go), create_graph=True)
        out.append([(f.grad_fn.name(), f.detach().numpy()) for f in first])
    for (name, a), (want_name, b) in zip(*out):
        assert name == want_name
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
