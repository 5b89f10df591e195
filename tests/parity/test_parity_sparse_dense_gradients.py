"""A dense tensor made sparse gets from mm/matmul/addmm/mv the dense gradient torch gives it
(at every position, through layout conversions), and the masked one from sparse.mm, to_dense
and value rebuilding, as in torch (NOTE [Dense origins])."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DENSE = [[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 3.0, 4.0]]
WEIGHT = [[0.5, 1.0, -2.0], [3.0, 0.0, 1.5], [-1.0, 2.0, 0.25], [4.0, -0.5, 1.0]]


@pytest.fixture(autouse=True)
def quiet_torch():
    with warnings.catch_warnings():             # torch warns that CSR support is beta
        warnings.simplefilter("ignore", UserWarning)
        yield


SOURCES = {
    "coo": lambda d: d.to_sparse(),
    "csr": lambda d: d.to_sparse_csr(),
    "csc": lambda d: d.to_sparse_csc(),
}

PRODUCTS = {
    "matmul": lambda lib, s, w: s @ w,
    "mm": lambda lib, s, w: lib.mm(s, w),
    "addmm": lambda lib, s, w: lib.addmm(lib.ones(2, 3, dtype=lib.float64), s, w, beta=0.5,
                                         alpha=2),
    "mv": lambda lib, s, w: lib.mv(s, w[:, 1]),
    "matrix @ vector": lambda lib, s, w: s @ w[:, 0],
    "dense @ sparse.t()": lambda lib, s, w: w.t() @ s.t(),
    "sparse.mm": lambda lib, s, w: lib.sparse.mm(s, w),
}

# conversions and transposes keep the dense origin: the products' dense gradient reaches it
CONVERSIONS = {
    "transposed twice": lambda lib, d: d.t().to_sparse_csr().t(),
    "coalesced": lambda lib, d: d.to_sparse().coalesce(),
    "coo to csr": lambda lib, d: d.to_sparse().to_sparse_csr(),
    "csr to coo": lambda lib, d: d.to_sparse_csr().to_sparse(),
    "csr to csc": lambda lib, d: d.to_sparse_csr().to_sparse_csc(),
}

# masked in both libraries: the gradient goes through the values
MASKED = {
    "floor-divided": lambda lib, d: lib.div(d.to_sparse(), 2, rounding_mode="floor"),
    "rebuilt from values": lambda lib, d: lib.sparse_coo_tensor(
        d.to_sparse().indices(), d.to_sparse().values() * 3, (2, 4)),
}

# what is not a product of a sparse operand: dense results
OTHERS = {
    "to_dense": lambda lib, d, w: (d.to_sparse() * 2).to_dense(),
    "sparse.sum": lambda lib, d, w: lib.sparse.sum(d.to_sparse() * 2, 1).to_dense(),
}


def gradients(lib, make):
    """The gradients of the dense input and of the weight after backward from ``make``'s
    result weighted elementwise (so that every position counts differently)."""
    d = lib.tensor(DENSE, dtype=lib.float64, requires_grad=True)
    w = lib.tensor(WEIGHT, dtype=lib.float64, requires_grad=True)
    out = make(d, w)
    weights = lib.arange(1.0, out.numel() + 1, dtype=lib.float64).reshape(out.shape)
    (out * weights).sum().backward()
    return [None if x.grad is None else x.grad.numpy() for x in (d, w)]


def check(make_ember, make_torch):
    for e, t in zip(gradients(ember, make_ember), gradients(torch, make_torch)):
        assert (e is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-12)


def csc_sparse_mm(source, product):
    """torch has no backward of sparse.mm for a CSC operand (it raises)."""
    return source == "csc" and product == "sparse.mm"


@pytest.mark.parametrize("source,product", [(s, p) for s in SOURCES for p in PRODUCTS
                                            if not csc_sparse_mm(s, p)])
def test_products_of_a_dense_tensor_made_sparse_match_torch(source, product):
    make = SOURCES[source]
    check(lambda d, w: PRODUCTS[product](ember, make(d), w),
          lambda d, w: PRODUCTS[product](torch, make(d), w))


@pytest.mark.parametrize("chain,product", [
    (c, p) for c in {**CONVERSIONS, **MASKED} for p in ("matmul", "mv", "dense @ sparse.t()",
                                                         "sparse.mm")
    if not csc_sparse_mm("csc" if c in ("csr to csc", "transposed twice") else None, p)])
def test_conversions_keep_the_dense_gradient_and_value_ops_mask_it_as_in_torch(chain,
                                                                               product):
    make = {**CONVERSIONS, **MASKED}[chain]
    check(lambda d, w: PRODUCTS[product](ember, make(ember, d), w),
          lambda d, w: PRODUCTS[product](torch, make(torch, d), w))


@pytest.mark.parametrize("change", ["origin scaled", "values zeroed"])
def test_an_origin_changed_in_place_is_never_read(change):
    """The forward values are the sparse tensor's, whatever happened to its origin."""
    results = []
    for lib in (ember, torch):
        p = lib.tensor(DENSE, dtype=lib.float64, requires_grad=True)
        x = p * 1
        s = x.to_sparse()
        with lib.no_grad():
            x.mul_(10) if change == "origin scaled" else s.values().mul_(0)
        eye = lib.eye(2, dtype=lib.float64).to_sparse()
        results.append(((eye @ s).to_dense().detach().numpy(),
                        (lib.ones(2, 4, dtype=lib.float64) + s).detach().numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name", list(OTHERS))
def test_other_uses_of_a_dense_tensor_made_sparse_match_torch(name):
    check(lambda d, w: OTHERS[name](ember, d, w), lambda d, w: OTHERS[name](torch, d, w))


@pytest.mark.parametrize("source", ["dense", "leaf"])
def test_the_double_backward_of_a_product_reaches_the_sparse_operand_densely(source):
    """The weight's gradient (sparse^T @ grad) is itself differentiated densely in the sparse
    operand, as torch does."""
    grads = []
    for lib in (ember, torch):
        d = lib.tensor(DENSE, dtype=lib.float64, requires_grad=source == "dense")
        s = d.to_sparse() if source == "dense" else d.to_sparse().requires_grad_()
        w = lib.tensor(WEIGHT, dtype=lib.float64, requires_grad=True)
        cotangent = lib.arange(6.0, dtype=lib.float64).reshape(2, 3)
        (gw,) = lib.autograd.grad(s @ w, (w,), cotangent, create_graph=True)
        (gw * gw).sum().backward()
        grads.append((d if source == "dense" else s).grad.to_dense().numpy())
    np.testing.assert_allclose(*grads, rtol=1e-12)


@pytest.mark.parametrize("use", ["sparse.mm", "to_dense", "matmul", "matmul + sparse.mm"])
def test_autograd_grad_of_a_sparse_leaf_matches_torch(use):
    def gradient(lib):
        leaf = lib.tensor(DENSE, dtype=lib.float64).to_sparse().requires_grad_()
        w = lib.tensor(WEIGHT, dtype=lib.float64)
        out = {"sparse.mm": lambda: lib.sparse.mm(leaf, w),
               "to_dense": lambda: (leaf * 2).to_dense(),
               "matmul": lambda: leaf @ w,
               "matmul + sparse.mm": lambda: leaf @ w + lib.sparse.mm(leaf, w)}[use]()
        (g,) = lib.autograd.grad(out.sum(), leaf)
        return str(g.layout).split(".")[-1], g.to_dense().numpy()
    (ours_layout, ours), (theirs_layout, theirs) = gradient(ember), gradient(torch)
    assert ours_layout == theirs_layout
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
