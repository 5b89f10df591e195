"""What the classical machine-learning programs of round 22
(test_parity_programs_round22_classical_ml.py) found, each pinned against PyTorch: cdist's node
names and the rounding of its matrix-product form, logdet's and fill_diagonal_'s node names,
multi_margin_loss's weight dtype check, non-finite right-hand sides of triangular solves,
svd_lowrank of integer matrices and LowRankMultivariateNormal's order of checks."""

import numpy as np
import pytest

import ember
from tests.parity._compare import ember_names, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
@pytest.mark.parametrize("rows, cols, p", [(30, 2, 2.0), (3, 2, 2.0), (30, 2, 1.0), (0, 2, 2.0),
                                           (4, 0, 2.0)])
def test_cdist_node_names_like_torch(mode, rows, cols, p):
    # the matrix-product form is a kernel of its own in PyTorch, whose result it views
    def run(lib):
        x = lib.ones(rows, cols, requires_grad=True)
        return lib.cdist(x, lib.zeros(4, cols), p=p, compute_mode=mode).grad_fn.name()
    assert run(ember) == run(torch)


def test_cdist_matrix_product_rounds_like_torch():
    # 1-D points far from the origin: |a|^2 + |b|^2 - 2ab cancels, and PyTorch's rounding comes
    # from one product of the rows padded with the squared norms
    points = np.linspace(0, 2 * np.pi, 40, dtype=np.float32)[:, None] + 3.0

    def run(lib):
        x = lib.from_numpy(points)
        return lib.cdist(x, x, compute_mode="use_mm_for_euclid_dist").numpy()
    np.testing.assert_allclose(run(ember), run(torch), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_logdet_node_name_like_torch(dtype, batch):
    def run(lib):
        a = lib.eye(2, dtype=getattr(lib, dtype)).expand(*batch, 2, 2).clone().requires_grad_()
        return lib.logdet(a).grad_fn.name()
    assert run(ember) == run(torch)


@pytest.mark.parametrize("shape, wrap", [((3, 3), False), ((4, 2), True), ((3, 3, 3), False)])
def test_fill_diagonal_node_name_like_torch(shape, wrap):
    # PyTorch fills a strided view: the filled tensor's history is a CopySlices (a wrapped
    # tall matrix gets one per filled block there, one in all here)
    def run(lib):
        base = lib.ones(*shape, requires_grad=True)
        x = base.clone()
        x.fill_diagonal_(0.0, wrap=wrap)
        (x * lib.arange(float(x.numel())).reshape(shape)).sum().backward()
        return x.grad_fn.name(), base.grad.tolist()
    assert run(ember) == run(torch)


@pytest.mark.parametrize("x_dtype, w_dtype, target, weight_size", [
    ("float32", "float64", [0, 1], 3), ("float64", "float32", [0, 1], 3),
    ("float32", "int64", [0, 1], 3), ("float32", "float64", [0, 5], 3),
    ("float32", "float32", [0, 5], 4), ("float16", "float64", [0, 5], 3),
    ("float64", "float64", [0, 2], 3)])
def test_multi_margin_loss_weight_dtype_like_torch(x_dtype, w_dtype, target, weight_size):
    # the weight must have the input's dtype; PyTorch checks the weight's size, then the
    # kernel's dtype, then the weight's dtype, then the target's range
    def run(lib):
        x = lib.arange(6.0).reshape(2, 3).to(getattr(lib, x_dtype))
        w = lib.ones(weight_size, dtype=getattr(lib, w_dtype))
        return outcome(lambda: lib.nn.functional.multi_margin_loss(
            x, lib.tensor(target), weight=w).item())
    assert run(ember) == run(torch)


_INF, _NAN = float("inf"), float("nan")


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("bad", [_INF, -_INF, _NAN])
@pytest.mark.parametrize("row", [0, 1, 2])
def test_solve_triangular_spreads_non_finite_like_trsm(upper, left, bad, row):
    # an inf or NaN in B reaches only the entries substituted after it, as in BLAS's trsm
    def run(lib):
        a = lib.tensor([[2.0, 0.5, -1.0], [0.0, 3.0, 0.25], [0.0, 0.0, 2.0]])
        a = a if upper else a.T
        b = lib.tensor([[1.0, 2.0], [-1.0, 0.5], [0.5, 1.0]])
        b[row, 0] = bad
        b = b if left else b.T
        x = lib.linalg.solve_triangular(a, b, upper=upper, left=left)
        return np.nan_to_num(x.numpy(), nan=7.0, posinf=8.0, neginf=9.0)
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-6)


def test_mvn_log_prob_of_an_infinite_value_like_torch():
    # the Mahalanobis term is a triangular solve: an inf in the last coordinate gives -inf
    def run(lib):
        mvn = lib.distributions.MultivariateNormal(lib.zeros(3, 2), scale_tril=lib.eye(2))
        return mvn.log_prob(lib.tensor([[1.0, _INF], [0.5, 1.0]])[:, None]).numpy()
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_svd_lowrank_of_integers_fails_in_the_sketch_product_like_torch(dtype, shape):
    # the Gaussian sketch is float32: the product with an integer matrix refuses the mix
    def run(lib):
        return outcome(lib.svd_lowrank, lib.ones(*shape, dtype=getattr(lib, dtype)), 2)
    assert run(ember) == run(torch)


@pytest.mark.parametrize("scale, diag", [(1.0, -1.0), (0.01, -1.0), (1.0, 0.0), (1.0, 1.0)])
def test_low_rank_mvn_factors_before_validating_like_torch(scale, diag):
    # the capacitance matrix is factored first: when a bad cov_diag leaves it indefinite the
    # Cholesky error comes before the constraint's (validate_args given: torch.compile turns
    # PyTorch's default off for the rest of the process)
    def run(lib):
        def make():
            d = lib.distributions.LowRankMultivariateNormal(
                lib.zeros(3), lib.full((3, 1), scale), lib.full((3,), diag), validate_args=True)
            return d.log_prob(lib.zeros(3)).item()
        return outcome(make, message=lambda m: ember_names(m).split("\n")[0])
    assert run(ember) == run(torch)
