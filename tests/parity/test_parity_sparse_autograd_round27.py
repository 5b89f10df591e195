"""A sparse leaf's gradient (layout, values, ``.grad`` state) as torch gives it: through
``backward(inputs=...)``, products of transposed, converted and scaled sparse tensors,
``retain_grad`` on a sparse non-leaf and ``to_dense(masked_grad=False)``."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

X = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
W = [[1.0, -2.0, 3.0], [0.5, 5.0, -6.0]]


@pytest.fixture(autouse=True)
def quiet_torch():
    with warnings.catch_warnings():             # torch warns that CSR support is beta
        warnings.simplefilter("ignore", UserWarning)
        yield


def leaf(lib):
    i = lib.tensor([[0, 1, 1], [2, 0, 2]])
    v = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
    return lib.sparse_coo_tensor(i, v, (2, 3)).coalesce().detach().requires_grad_()


def mats(lib):
    x = lib.tensor(X, dtype=lib.float64)
    small = lib.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=lib.float64)
    full = lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64).to_sparse()
    weights = lib.tensor(W, dtype=lib.float64)
    tall = lib.tensor([[0.0, 5.0], [7.0, 0.0], [1.0, 0.0]], dtype=lib.float64).to_sparse()
    return x, small, full, weights, tall


CASES = {
    # 1: backward(inputs=[sparse leaf])
    "inputs, w @ x": lambda lib, w, m: (w @ m[0]).sum().backward(inputs=[w]),
    "inputs, sparse.mm": lambda lib, w, m: lib.sparse.mm(w, m[0]).sum().backward(inputs=[w]),
    "inputs, to_dense": lambda lib, w, m: (w.to_dense() * m[3]).sum().backward(inputs=[w]),
    "autograd.backward inputs": lambda lib, w, m: lib.autograd.backward(
        [(w @ m[0]).sum()], inputs=[w]),
    # 2: transposes and conversions of a sparse leaf in products
    "w @ sparse": lambda lib, w, m: ((w @ m[4]).to_dense() * m[1][:, :1].t()).sum()
    .backward(),
    "w.t() @ sparse": lambda lib, w, m: (w.t() @ m[2]).to_dense().sum().backward(),
    "mm(w.t(), sparse)": lambda lib, w, m: lib.mm(w.t(), m[2]).to_dense().sum().backward(),
    "w.t().to_sparse_csr() @ x": lambda lib, w, m: (w.t().to_sparse_csr() @ m[1]).sum()
    .backward(),
    "w.to_sparse_csr() @ x": lambda lib, w, m: (w.to_sparse_csr() @ m[0]).sum().backward(),
    "csr to coo @ x": lambda lib, w, m: (w.to_sparse_csr().to_sparse() @ m[0]).sum()
    .backward(),
    "mv(w.to_sparse_csr())": lambda lib, w, m: lib.mv(w.to_sparse_csr(), m[0][:, 0]).sum()
    .backward(),
    "w.t() @ x": lambda lib, w, m: (w.t() @ m[1]).sum().backward(),
    # 3: linear ops by numbers keep the product's gradient dense
    "(w * 2) @ x": lambda lib, w, m: ((w * 2) @ m[0]).sum().backward(),
    "(w / 4) @ x": lambda lib, w, m: ((w / 4) @ m[0]).sum().backward(),
    "(-w) @ x": lambda lib, w, m: ((-w) @ m[0]).sum().backward(),
    "(w - 3 * w) @ x": lambda lib, w, m: ((w - w * 3) @ m[0]).sum().backward(),
    "w.clone() @ x": lambda lib, w, m: (w.clone() @ m[0]).sum().backward(),
    "addmm(w * 2)": lambda lib, w, m: lib.addmm(lib.zeros(2, 2, dtype=lib.float64), w * 2,
                                                m[0]).sum().backward(),
    "(w * tensor(2)) @ x": lambda lib, w, m: ((w * lib.tensor(2.0, dtype=lib.float64))
                                              @ m[0]).sum().backward(),
    "sparse.mm(w * 2)": lambda lib, w, m: lib.sparse.mm(w * 2, m[0]).sum().backward(),
    "(w * 2).to_dense()": lambda lib, w, m: ((w * 2).to_dense() * m[3]).sum().backward(),
    "masked then dense": lambda lib, w, m: (((w * 2).to_dense() * m[3]).sum()
                                            + ((w * 2) @ m[0]).sum()).backward(),
    # 5: to_dense(masked_grad=False)
    "to_dense(masked_grad=False)": lambda lib, w, m: (w.to_dense(masked_grad=False) * m[3])
    .sum().backward(),
    "to_dense(masked_grad=True)": lambda lib, w, m: (w.to_dense(masked_grad=True) * m[3])
    .sum().backward(),
    "csr to_dense(masked_grad=False)": lambda lib, w, m: (
        w.to_sparse_csr().to_dense(masked_grad=False) * m[3]).sum().backward(),
    "(w * 2).to_dense(masked_grad=False)": lambda lib, w, m: (
        (w * 2).to_dense(masked_grad=False) * m[3]).sum().backward(),
}


def summary(lib, g):
    """(layout name, dense values) of a gradient, or None."""
    if g is None:
        return None
    layout = str(g.layout).split(".")[-1]
    return layout, (g if g.layout == lib.strided else g.to_dense()).detach().numpy()


def compare(ours, theirs):
    assert (ours is None) == (theirs is None)
    if theirs is not None:
        assert ours[0] == theirs[0]
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", list(CASES))
def test_sparse_leaf_gradient_matches_torch(case):
    found = []
    for lib in (ember, torch):
        w = leaf(lib)
        CASES[case](lib, w, mats(lib))
        found.append(summary(lib, w.grad))
    compare(*found)


def test_backward_inputs_leaves_other_leaves_alone():
    found = []
    for lib in (ember, torch):
        w, other = leaf(lib), leaf(lib)
        x = lib.tensor(X, dtype=lib.float64, requires_grad=True)
        (w @ x + other @ x).sum().backward(inputs=[w])
        found.append((summary(lib, w.grad), other.grad, x.grad))
    compare(found[0][0], found[1][0])
    assert found[0][1] is None and found[1][1] is None
    assert found[0][2] is None and found[1][2] is None


def test_dense_origin_converted_and_unmasked_stays_dense():
    found = []
    for lib in (ember, torch):
        d = lib.tensor([[0.0, 0.0, 1.0], [2.0, 0.0, 3.0]], dtype=lib.float64,
                       requires_grad=True)
        (d.to_sparse().to_dense(masked_grad=False) * lib.tensor(W, dtype=lib.float64)).sum() \
            .backward()
        found.append(summary(lib, d.grad))
    compare(*found)


RETAINED = {
    "to_dense": lambda lib, s, m: (s.to_dense() * m[3]).sum().backward(),
    "product": lambda lib, s, m: (s @ m[0]).sum().backward(),
    "transposed back": lambda lib, s, m: (s.t() @ m[0]).sum().backward(),
}


@pytest.mark.parametrize("make,use", [("w * 2", "to_dense"), ("w * 2", "product"),
                                      ("w.t()", "transposed back")])
def test_retain_grad_on_a_sparse_non_leaf_matches_torch(make, use):
    found = []
    for lib in (ember, torch):
        w = leaf(lib)
        s = w * 2 if make == "w * 2" else w.t()
        assert not s.retains_grad
        s.retain_grad()
        assert s.retains_grad and not s.is_leaf
        RETAINED[use](lib, s, mats(lib))
        found.append((summary(lib, s.grad), summary(lib, w.grad)))
    compare(found[0][0], found[1][0])
    compare(found[0][1], found[1][1])


def test_backward_inputs_and_grad_of_a_sparse_non_leaf_match_torch():
    found = []
    for lib in (ember, torch):
        w = leaf(lib)
        s = w * 2
        x = mats(lib)[0]
        (s @ x).sum().backward(inputs=[s])
        (g,) = lib.autograd.grad(((w * 2) @ x).sum(), w)
        t = w * 3
        (gt,) = lib.autograd.grad((t @ x).sum(), t)
        found.append((summary(lib, s.grad), w.grad, summary(lib, g), summary(lib, gt)))
    compare(found[0][0], found[1][0])
    assert found[0][1] is None and found[1][1] is None
    compare(found[0][2], found[1][2])
    compare(found[0][3], found[1][3])
