"""Reductions and scans against PyTorch: float32 accumulation of scans and moments on the CPU,
the backward node names of composite reductions, and norm dtype= errors."""

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

LONG = {
    "cumsum": lambda lib: lib.full((10**6,), 0.1).cumsum(0)[-1],
    "cumulative_trapezoid": lambda lib: lib.cumulative_trapezoid(lib.full((10**6,), 0.1))[-1],
    "logcumsumexp": lambda lib: lib.logcumsumexp(lib.full((10**5,), -10.), 0)[-1],
    "std": lambda lib: lib.tensor([3e19, -3e19]).std(),
    "std_mean": lambda lib: lib.std_mean(lib.tensor([3e19, -3e19]))[0],
}


@pytest.mark.parametrize("name", sorted(LONG))
def test_float32_accumulation(name):
    expected, got = LONG[name](torch), LONG[name](ember)
    assert got.item() == pytest.approx(expected.item(), rel=1e-6)


COMPOSITES = {
    "prod_dim": lambda lib, x: x.prod(1),
    "nanmean": lambda lib, x: x.nanmean(),
    "quantile": lambda lib, x: lib.quantile(x, lib.tensor([0.2, 0.5]), dim=1, keepdim=True),
    "nanquantile": lambda lib, x: lib.nanquantile(x, 0.5),
    "matrix_norm_nuc": lambda lib, x: lib.linalg.matrix_norm(x, "nuc"),
    "matrix_norm_2_keepdim": lambda lib, x: lib.linalg.matrix_norm(x, 2, keepdim=True),
    "matrix_norm_-inf": lambda lib, x: lib.linalg.matrix_norm(x, -float("inf")),
    "linalg_norm_1": lambda lib, x: lib.linalg.norm(x, 1),
    "linalg_norm_vector": lambda lib, x: lib.linalg.norm(x[0]),
    "norm_nuc": lambda lib, x: lib.norm(x, "nuc"),
    "bincount": lambda lib, x: lib.bincount(lib.tensor([0, 1]), x[0, :2]),
    "diff_n0": lambda lib, x: lib.diff(x, n=0),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_backward_node_names(name):
    names = []
    for lib in (torch, ember):
        x = lib.tensor([[1., 5., 2.], [4., 0.5, 3.]], requires_grad=True)
        names.append(type(COMPOSITES[name](lib, x).grad_fn).__name__)
    assert names[1] == names[0]


@pytest.mark.parametrize("call", [
    lambda lib: lib.linalg.vector_norm(lib.ones(2), dtype=lib.complex64),
    lambda lib: lib.linalg.matrix_norm(lib.ones(2, 2), 1, dtype=lib.complex128),
])
def test_complex_dtype_for_a_real_norm_raises(call):
    with pytest.raises(RuntimeError) as expected:
        call(torch)
    with pytest.raises(RuntimeError) as got:
        call(ember)
    assert str(got.value) == str(expected.value).split(" (Triggered")[0]
