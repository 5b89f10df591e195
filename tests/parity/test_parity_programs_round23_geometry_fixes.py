"""What the geometry, molecule and physics programs of round 23
(test_parity_programs_round23_geometry.py) found, each pinned against PyTorch: rad2deg's
rounding (PyTorch multiplies by 180/pi rounded to float32), and torch.gradient with coordinate
spacing (each point's weight rounded first, the steps kept in the coordinates' dtype, integer
input promoted with them) or with a 0-dim tensor as the spacing."""

import numpy as np
import pytest

import ember
from tests.parity._compare import dtype_name, error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _bits(t):
    """A tensor's dtype name and its values, exactly (float64 holds every narrower float)."""
    return dtype_name(t.dtype), t.detach().double().numpy().tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_rad2deg_rounds_like_torch(dtype):
    values = np.random.default_rng(0).uniform(-7, 7, 2000).astype(np.float32)

    def run(lib):
        x = lib.from_numpy(values).to(getattr(lib, dtype))
        inplace = x.clone()
        inplace.rad2deg_()
        out = lib.empty_like(x)
        lib.rad2deg(x, out=out)
        return [_bits(lib.rad2deg(x)), _bits(x.rad2deg()), _bits(inplace), _bits(out)]
    assert run(ember) == run(torch)


def test_rad2deg_of_integers_like_torch():
    def run(lib):
        return _bits(lib.rad2deg(lib.arange(-400, 400, 7)))
    assert run(ember) == run(torch)


_VALUE_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64"]
_STEP_DTYPES = ["float32", "float64", "float16", "int64"]


@pytest.mark.parametrize("edge_order", [1, 2])
@pytest.mark.parametrize("steps", _STEP_DTYPES)
@pytest.mark.parametrize("values", _VALUE_DTYPES)
def test_gradient_with_coordinates_like_torch(values, steps, edge_order):
    # uneven, strictly increasing coordinates (the integer ones distinct too)
    rng = np.random.default_rng(1)
    coords = np.cumsum(rng.uniform(0.5, 3.0, 15)).astype(np.float32)
    f = (np.sin(coords) * 10).astype(np.float32)

    def run(lib):
        x = lib.from_numpy(coords).to(getattr(lib, steps))
        y = lib.from_numpy(f).to(getattr(lib, values))
        return [_bits(g) for g in lib.gradient(y, spacing=(x,), edge_order=edge_order)]
    assert run(ember) == run(torch)


def test_gradient_with_coordinates_along_two_dims_like_torch():
    rng = np.random.default_rng(2)
    grid = rng.standard_normal((6, 7)).astype(np.float32)
    rows = np.cumsum(rng.uniform(0.1, 1.0, 6)).astype(np.float32)
    cols = np.cumsum(rng.uniform(0.1, 1.0, 7))

    def run(lib):
        y = lib.from_numpy(grid)
        both = lib.gradient(y, spacing=(lib.from_numpy(rows), lib.from_numpy(cols)),
                            edge_order=2)
        one = lib.gradient(y, spacing=[lib.from_numpy(cols)], dim=1)
        cplx = lib.gradient(y * (1 - 2j), spacing=(lib.from_numpy(rows),), dim=0)
        return [_bits(g) for g in both + one] + [
            (dtype_name(cplx[0].dtype), cplx[0].numpy().tobytes())]
    assert run(ember) == run(torch)


@pytest.mark.parametrize("spacing", ["float64", "float32", "int64"])
@pytest.mark.parametrize("values", ["float32", "float16", "float64", "int64"])
def test_gradient_with_a_0dim_tensor_spacing_like_torch(values, spacing):
    # a 0-dim tensor is a Number to PyTorch's argument parser: one uniform step for every dim
    grid = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32) * 10

    def run(lib):
        y = lib.from_numpy(grid).to(getattr(lib, values))
        h = lib.tensor(0.3 if spacing != "int64" else 2).to(getattr(lib, spacing))
        return [_bits(g) for g in lib.gradient(y, spacing=h, edge_order=2)]
    assert run(ember) == run(torch)


@pytest.mark.parametrize("values", ["float32", "float16", "int64"])
def test_gradient_uniform_second_order_edges_like_torch(values):
    grid = np.random.default_rng(4).standard_normal((5, 6)).astype(np.float32) * 10

    def run(lib):
        y = lib.from_numpy(grid).to(getattr(lib, values))
        return [_bits(g) for g in lib.gradient(y, spacing=0.3, edge_order=2)] + \
            [_bits(g) for g in lib.gradient(y, spacing=[0.5, 2], edge_order=2)]
    assert run(ember) == run(torch)


@pytest.mark.parametrize("bad", ["0-dim", "2-dim"])
def test_gradient_spacing_element_of_wrong_rank_errors_like_torch(bad):
    # the message is PyTorch's C++ text, which names torch.gradient in both libraries
    def run(lib):
        odd = lib.tensor(0.1) if bad == "0-dim" else lib.ones(3, 1)
        return error(lambda: lib.gradient(lib.ones(9, 3), spacing=(lib.arange(9.0), odd)))
    assert run(torch) is not None
    assert run(ember) == run(torch)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf"), 0.0])
@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary",
                                  "donot_use_mm_for_euclid_dist"])
def test_cdist_double_backward_refused_like_torch(p, mode):
    # force matching through cdist: PyTorch's _cdist_backward has no derivative, so the
    # forces (computed with create_graph) hang from nodes that refuse a second backward
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))

    def run(lib):
        x = lib.from_numpy(a).requires_grad_(True)
        y = lib.from_numpy(b).requires_grad_(True)
        gx, gy = lib.autograd.grad(lib.cdist(x, y, p=p, compute_mode=mode).pow(2).sum(),
                                   (x, y), create_graph=True)
        first = [gx.grad_fn.name(), gy.grad_fn.name(), gx.requires_grad,
                 gx.detach().numpy().round(12).tolist(), gy.detach().numpy().round(12).tolist()]
        return first, error(lambda: lib.autograd.grad((gx.sum() + gy.sum()), (x, y))), \
            error(lambda: gx.sum().backward())
    ours, theirs = run(ember), run(torch)
    assert theirs[1] == ("NotImplementedError",
                         "the derivative for '_cdist_backward' is not implemented.")
    assert ours == theirs


def test_cdist_matrix_product_form_is_twice_differentiable_like_torch():
    # the matrix-product form is made of differentiable ops in PyTorch: its Hessian exists
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 2)), rng.standard_normal((30, 2))

    def run(lib):
        def energy(x):
            return lib.cdist(x, lib.from_numpy(b), compute_mode="use_mm_for_euclid_dist").sum()
        return lib.autograd.functional.hessian(energy, lib.from_numpy(a)).numpy()
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-10, atol=1e-12)


def test_cdist_backward_without_create_graph_is_plain_like_torch():
    def run(lib):
        x = lib.ones(3, 2, requires_grad=True)
        g, = lib.autograd.grad(lib.cdist(x, lib.zeros(2, 2)).sum(), x)
        return g.requires_grad, g.grad_fn, g.numpy().tolist()
    assert run(ember) == run(torch)


def test_pdist_double_backward_refused_like_torch():
    x0 = np.random.default_rng(7).standard_normal((5, 3))

    def run(lib):
        x = lib.from_numpy(x0).requires_grad_(True)
        g, = lib.autograd.grad(lib.pdist(x).sum(), x, create_graph=True)
        return g.detach().numpy().round(12).tolist(), \
            error(lambda: lib.autograd.grad(g.pow(2).sum(), x))
    ours, theirs = run(ember), run(torch)
    assert theirs[1] == ("NotImplementedError",
                         "the derivative for '_pdist_backward' is not implemented.")
    assert ours == theirs


def test_segment_reduce_double_backward_refused_like_torch():
    def run(lib):
        x = lib.arange(5.0, requires_grad=True)
        out = lib.segment_reduce(x ** 2, "sum", lengths=lib.tensor([2, 3]))
        g, = lib.autograd.grad(out.sum(), x, create_graph=True)
        return g.detach().tolist(), error(lambda: lib.autograd.grad(g.sum(), x))
    assert run(ember) == run(torch)
