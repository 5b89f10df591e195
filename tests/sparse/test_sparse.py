"""Sparse COO and CSR tensors: values against SciPy/NumPy, gradients by gradcheck in float64,
errors with PyTorch's messages, and printing in PyTorch's format."""

import copy
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import ember
from ember.autograd import gradcheck, gradgradcheck
from ember.testing import assert_close

ROWS = [0, 1, 1, 3, 0]
COLS = [2, 0, 2, 1, 2]              # (0, 2) twice: uncoalesced
VALS = [3.0, 4.0, 5.0, -1.0, 0.5]
SHAPE = (4, 3)


def coo(dtype=ember.float64, **kwargs):
    return ember.sparse_coo_tensor([ROWS, COLS], ember.tensor(VALS, dtype=dtype), SHAPE,
                                   **kwargs)


def scipy_matrix():
    return sp.coo_matrix((VALS, (ROWS, COLS)), shape=SHAPE).toarray()


def random_sparse(n, m, nnz, seed=0, dtype=ember.float64):
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, n, nnz), rng.integers(0, m, nnz)
    vals = rng.standard_normal(nnz)
    dense = sp.coo_matrix((vals, (rows, cols)), shape=(n, m)).toarray()
    s = ember.sparse_coo_tensor(ember.tensor(np.stack([rows, cols])),
                                ember.tensor(vals, dtype=dtype), (n, m))
    return s, dense


# ----- construction and metadata -----------------------------------------------------------

def test_coo_metadata():
    s = coo(ember.float32)
    assert isinstance(s, ember.Tensor)
    assert s.layout is ember.sparse_coo and s.is_sparse and not s.is_sparse_csr
    assert s.shape == ember.Size(SHAPE) and s.size() == SHAPE and s.size(-1) == 3
    assert s.dim() == s.ndim == 2 and s.numel() == 12 and len(s) == 4
    assert s.dtype is ember.float32 and s.device == ember.device("cpu")
    assert s.sparse_dim() == 2 and s.dense_dim() == 0 and s._nnz() == 5
    assert not s.is_coalesced()
    assert s._indices().tolist() == [ROWS, COLS] and s._values().tolist() == VALS
    assert not ember.ones(2).is_sparse and ember.ones(2).layout is ember.strided


def test_size_inferred_and_dtype_device_keywords():
    s = ember.sparse_coo_tensor([[0, 2], [1, 0]], [1, 2])
    assert s.shape == (3, 2) and s.dtype is ember.int64
    s = ember.sparse_coo_tensor([[0, 2], [1, 0]], [1, 2], (3, 3), dtype=ember.float64,
                                device="cpu")
    assert s.dtype is ember.float64 and s.shape == (3, 3)
    assert ember.sparse_coo_tensor(ember.zeros(2, 0, dtype=ember.int64), ember.zeros(0)) \
        .shape == (0, 0)


def test_to_dense_sums_duplicates():
    s = coo()
    np.testing.assert_allclose(s.to_dense().numpy(), scipy_matrix())
    with pytest.raises(RuntimeError, match="dtype argument is not supported by sparse_to_dense"):
        s.to_dense(ember.float32)                   # as PyTorch: no conversion on the way
    b = ember.sparse_coo_tensor([[0, 0, 1]], ember.tensor([True, True, False]), (2,))
    assert b.to_dense().tolist() == [True, False]


def test_coalesce():
    s = coo()
    c = s.coalesce()
    assert c.is_coalesced() and c.coalesce() is c
    ref = sp.coo_matrix((VALS, (ROWS, COLS)), shape=SHAPE).tocsr()
    ref.sum_duplicates()
    ref = ref.tocoo()
    assert c.indices().tolist() == [ref.row.tolist(), ref.col.tolist()]
    np.testing.assert_allclose(c.values().numpy(), ref.data)
    assert ember.sparse_coo_tensor([[1], [0]], [1.0], (2, 2)).is_coalesced()   # nnz <= 1


def test_to_sparse_from_dense():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    s = ember.tensor(x).to_sparse()
    assert s.is_coalesced() and s.indices().tolist() == [[0, 1, 1], [1, 0, 2]]
    assert s.values().tolist() == [1.5, 2.0, -3.0]
    assert ember.tensor(x).to_sparse_coo().to_dense().tolist() == x.tolist()
    hybrid = ember.tensor(x).to_sparse(1)
    assert hybrid.sparse_dim() == 1 and hybrid.dense_dim() == 1
    assert hybrid.values().shape == (2, 3) and hybrid.to_dense().tolist() == x.tolist()
    assert ember.tensor(x).to_sparse(layout=ember.sparse_csr).layout is ember.sparse_csr
    z = ember.tensor(3.0).to_sparse()
    assert z.shape == () and z._nnz() == 1 and z.to_dense().item() == 3.0


def test_csr_construction_and_conversions():
    x = np.array([[0.0, 0.0, 3.0], [4.0, 0.0, 5.0], [0.0, 0.0, 0.0]])
    c = ember.tensor(x).to_sparse_csr()
    ref = sp.csr_matrix(x)
    assert c.layout is ember.sparse_csr and c.is_sparse_csr and not c.is_sparse
    assert c.crow_indices().tolist() == ref.indptr.tolist()
    assert c.col_indices().tolist() == ref.indices.tolist()
    assert c.values().tolist() == ref.data.tolist()
    assert c.to_dense().tolist() == x.tolist() and c._nnz() == 3
    assert c.sparse_dim() == 2 and c.dense_dim() == 0
    made = ember.sparse_csr_tensor(ref.indptr, ref.indices, ref.data)
    assert made.shape == (3, 3) and made.to_dense().tolist() == x.tolist()
    made = ember.sparse_csr_tensor(ref.indptr, ref.indices, ref.data, (3, 4))
    assert made.to_dense().tolist() == np.pad(x, ((0, 0), (0, 1))).tolist()
    back = c.to_sparse()
    assert back.layout is ember.sparse_coo and back.to_dense().tolist() == x.tolist()
    assert coo().to_sparse_csr().to_dense().tolist() == scipy_matrix().tolist()
    assert c.to_sparse_csr() is c and c.to_sparse_coo().is_coalesced()


# ----- products --------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["coo", "coalesced", "csr"])
def test_mm_against_scipy(layout):
    s, dense = random_sparse(30, 20, 90)
    s = {"coo": s, "coalesced": s.coalesce(), "csr": s.to_sparse_csr()}[layout]
    d = np.random.default_rng(1).standard_normal((20, 5))
    for out in (ember.sparse.mm(s, ember.tensor(d)), ember.mm(s, ember.tensor(d)),
                ember.spmm(s, ember.tensor(d)), s @ ember.tensor(d), s.mm(ember.tensor(d)),
                ember.matmul(s, ember.tensor(d))):
        np.testing.assert_allclose(out.numpy(), dense @ d, rtol=1e-12)
    v = d[:, 0]
    np.testing.assert_allclose((s @ ember.tensor(v)).numpy(), dense @ v, rtol=1e-12)
    np.testing.assert_allclose(ember.mv(s, ember.tensor(v)).numpy(), dense @ v, rtol=1e-12)
    e = np.random.default_rng(2).standard_normal((4, 30))
    np.testing.assert_allclose((ember.tensor(e) @ s).numpy(), e @ dense, rtol=1e-12)


def test_mm_float32_int_and_empty():
    s, dense = random_sparse(10, 8, 20, dtype=ember.float32)
    d = np.random.default_rng(3).standard_normal((8, 3)).astype(np.float32)
    out = ember.sparse.mm(s, ember.tensor(d))
    assert out.dtype is ember.float32
    np.testing.assert_allclose(out.numpy(), dense.astype(np.float32) @ d, rtol=1e-5,
                               atol=1e-5)
    si = ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [1, 2, 3], (2, 3))
    assert ember.sparse.mm(si, ember.ones(3, 2, dtype=ember.int64)).tolist() == [[1, 1],
                                                                                [5, 5]]
    empty = ember.sparse_coo_tensor(ember.zeros(2, 0, dtype=ember.int64), ember.zeros(0),
                                    (3, 4))
    assert ember.sparse.mm(empty, ember.ones(4, 2)).tolist() == [[0.0, 0.0]] * 3
    h = s.to(ember.float16)
    assert_close(ember.sparse.mm(h, ember.tensor(d).half()).float(),
                 ember.tensor(dense.astype(np.float32) @ d), rtol=2e-2, atol=2e-2)


def test_sparse_times_sparse():
    a, da = random_sparse(6, 5, 10, seed=4)
    b, db = random_sparse(5, 4, 8, seed=5)
    out = ember.sparse.mm(a, b)
    assert out.layout is ember.sparse_coo
    np.testing.assert_allclose(out.to_dense().numpy(), da @ db, rtol=1e-12, atol=1e-15)


def test_addmm():
    s, dense = random_sparse(6, 5, 12)
    d = np.random.default_rng(6).standard_normal((5, 3))
    m = np.random.default_rng(7).standard_normal((6, 3))
    want = 2 * m + 3 * (dense @ d)
    for out in (ember.sparse.addmm(ember.tensor(m), s, ember.tensor(d), beta=2, alpha=3),
                ember.addmm(ember.tensor(m), s, ember.tensor(d), beta=2, alpha=3)):
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)
    nan = ember.full((6, 3), float("nan"), dtype=ember.float64)
    out = ember.sparse.addmm(nan, s, ember.tensor(d), beta=0)
    np.testing.assert_allclose(out.numpy(), dense @ d, rtol=1e-12)


@pytest.mark.parametrize("layout", ["coo", "coalesced", "csr"])
def test_mm_gradcheck_values_and_dense(layout):
    s, _ = random_sparse(7, 5, 14, seed=8)
    indices = s._indices()
    values = s._values().clone().requires_grad_()
    d = ember.randn(5, 3, dtype=ember.float64, requires_grad=True)

    def product(values, d):
        m = ember.sparse_coo_tensor(indices, values, (7, 5))
        if layout == "coalesced":
            m = m.coalesce()
        elif layout == "csr":
            m = m.to_sparse_csr()
        return ember.sparse.mm(m, d)

    assert gradcheck(product, (values, d))
    assert gradgradcheck(product, (values, d))
    assert gradcheck(lambda v, x: ember.sparse_coo_tensor(indices, v, (7, 5)) @ x[:, 0],
                     (values, d))
    assert gradcheck(lambda v, x: x.t() @ ember.sparse_coo_tensor(indices, v, (7, 5)),
                     (values, ember.randn(7, 2, dtype=ember.float64, requires_grad=True)))


def test_sparse_leaf_grad_is_sparse():
    s = coo(requires_grad=True)
    assert s.is_leaf and s.requires_grad and s.grad is None and s.grad_fn is None
    d = ember.randn(3, 2, dtype=ember.float64)
    ember.sparse.mm(s, d).sum().backward()
    g = s.grad
    c = s.coalesce()          # the gradient holds each stored element once, as in PyTorch
    # (PyTorch's sparse.mm marks it uncoalesced)
    assert g.layout is ember.sparse_coo and not g.is_coalesced()
    assert g._indices().tolist() == c.indices().tolist()
    want = np.ones((4, 2)) @ d.numpy().T
    rows, cols = c.indices().numpy()
    np.testing.assert_allclose(g._values().numpy(), want[rows, cols])
    ember.sparse.mm(s, d).sum().backward()            # accumulates
    np.testing.assert_allclose(s.grad._values().numpy(), 2 * want[rows, cols])
    n = ember.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2), requires_grad=True)
    ember.sparse.mm(n, ember.ones(2, 1)).sum().backward()
    assert n.grad._indices().tolist() == [[0, 1], [1, 0]]
    assert n.grad._values().tolist() == [1.0, 1.0]
    s.grad = None
    assert s.grad is None
    t = coo()
    assert not t.requires_grad and t.requires_grad_() is t and t.is_leaf and t.requires_grad


def test_mm_gives_a_sparse_leaf_a_dense_gradient():
    s = coo(requires_grad=True)
    d = ember.randn(3, 2, dtype=ember.float64)
    (s @ d).sum().backward()
    want = np.ones((4, 2)) @ d.numpy().T
    assert s.grad.layout is ember.strided
    np.testing.assert_allclose(s.grad.numpy(), want)
    ember.sparse.mm(s, d).sum().backward()             # dense + sparse: dense
    mask = scipy_matrix() != 0
    np.testing.assert_allclose(s.grad.numpy(), want + want * mask)
    s.grad = None
    assert s.grad is None
    x = ember.randn(3, 2, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda x: ember.mm(coo(requires_grad=True), x), (x,))


def test_values_that_require_grad_give_a_non_leaf():
    v = ember.tensor(VALS, dtype=ember.float64, requires_grad=True)
    s = ember.sparse_coo_tensor([ROWS, COLS], v, SHAPE)
    assert not s.is_leaf and s.grad_fn is not None and s.requires_grad
    (s @ ember.ones(3, 1, dtype=ember.float64)).sum().backward()
    assert v.grad.tolist() == [1.0] * 5
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        s.requires_grad_(False)
    assert not s.detach().requires_grad


def test_to_dense_and_conversions_gradcheck():
    indices = ember.tensor([ROWS, COLS])
    v = ember.tensor(VALS, dtype=ember.float64, requires_grad=True)
    w = ember.randn(4, 3, dtype=ember.float64)
    assert gradcheck(lambda v: ember.sparse_coo_tensor(indices, v, SHAPE).to_dense() * w, (v,))
    assert gradcheck(lambda v: ember.sparse_coo_tensor(indices, v, SHAPE).coalesce()
                     .values(), (v,))
    assert gradcheck(lambda v: ember.sparse_coo_tensor(indices, v, SHAPE).to_sparse_csr()
                     .values(), (v,))
    x = ember.randn(3, 4, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda x: x.to_sparse().values(), (x,))


# ----- reductions, softmax, elementwise ------------------------------------------------------

def test_sum():
    s = coo()
    ref = scipy_matrix()
    assert ember.sparse.sum(s).item() == pytest.approx(ref.sum())
    for dim in (0, 1, -1):
        out = ember.sparse.sum(s, dim)
        assert out.layout is ember.sparse_coo and out.is_coalesced()
        np.testing.assert_allclose(out.to_dense().numpy(), ref.sum(dim))
    np.testing.assert_allclose(s.sum(1).to_dense().numpy(), ref.sum(1))
    assert ember.sparse.sum(s, (0, 1)).item() == pytest.approx(ref.sum())
    assert ember.sparse.sum(s.float(), dtype=ember.float64).dtype is ember.float64
    assert s.sum().item() == pytest.approx(ref.sum())
    i = ember.sparse_coo_tensor([[0, 1]], [2, 3], (3,))
    assert ember.sparse.sum(i).dtype is ember.int64
    v = ember.tensor(VALS, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda v: ember.sparse.sum(ember.sparse_coo_tensor([ROWS, COLS], v,
                                                                       SHAPE), 0).to_dense(),
                     (v,))


def _softmax_reference(dense, stored, dim, log):
    x = np.where(stored, dense, -np.inf)
    top = x.max(axis=dim, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):     # slices with nothing stored
        e = np.exp(x - np.where(np.isfinite(top), top, 0))
        out = e / e.sum(axis=dim, keepdims=True)
        out = np.log(out) if log else out
    return np.where(stored, out, 0.0)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dim, log):
    c = coo().coalesce()
    dense = c.to_dense().numpy()
    stored = np.zeros(SHAPE, bool)
    stored[tuple(c.indices().numpy())] = True
    fn = ember.sparse.log_softmax if log else ember.sparse.softmax
    out = fn(c, dim)
    assert out.layout is ember.sparse_coo
    np.testing.assert_allclose(out.to_dense().numpy(), _softmax_reference(dense, stored, dim,
                                                                           log), rtol=1e-12)
    v = c.values().clone().requires_grad_()
    assert gradcheck(lambda v: fn(ember.sparse_coo_tensor(c.indices(), v, SHAPE), dim)
                     .values(), (v,))
    assert fn(c.float(), dim, dtype=ember.float64).dtype is ember.float64


def test_elementwise():
    s = coo()
    ref = scipy_matrix()
    other = ember.sparse_coo_tensor([[1, 2, 3], [0, 2, 1]], [2.0, 7.0, -2.0], SHAPE,
                                    dtype=ember.float64)
    ref2 = other.to_dense().numpy()
    cases = {"s * 2": (s * 2, ref * 2), "2 * s": (2 * s, 2 * ref), "s / 4": (s / 4, ref / 4),
             "-s": (-s, -ref), "s + s2": (s + other, ref + ref2),
             "s - s2": (s - other, ref - ref2), "s * s2": (s * other, ref * ref2),
             "add alpha": (ember.add(s, other, alpha=3), ref + 3 * ref2),
             "s * 0-dim": (s * ember.tensor(3.0, dtype=ember.float64), 3 * ref),
             "s * dense": (s * ember.arange(12.0, dtype=ember.float64).reshape(4, 3),
                           ref * np.arange(12.0).reshape(4, 3)),
             "abs": (s.abs(), np.abs(ref)), "sin": (ember.sin(s), np.sin(ref)),
             "pow": (s.pow(2), ref ** 2), "sqrt": (s.abs().sqrt(), np.sqrt(np.abs(ref)))}
    for name, (out, want) in cases.items():
        assert out.layout is ember.sparse_coo, name
        np.testing.assert_allclose(out.to_dense().numpy(), want, err_msg=name)
    dense_plus = ember.ones(4, 3, dtype=ember.float64) + s
    assert dense_plus.layout is ember.strided
    np.testing.assert_allclose(dense_plus.numpy(), 1 + ref)
    c = s.to_sparse_csr()
    assert (c * 2).layout is ember.sparse_csr
    np.testing.assert_allclose((c * 2).to_dense().numpy(), 2 * ref)
    np.testing.assert_allclose((c + c).to_dense().numpy(), 2 * ref)


def test_elementwise_gradcheck():
    indices = ember.tensor([ROWS, COLS])
    a = ember.tensor(VALS, dtype=ember.float64, requires_grad=True)
    b = ember.randn(5, dtype=ember.float64, requires_grad=True)
    make = ember.sparse_coo_tensor

    def combine(a, b):
        x, y = make(indices, a, SHAPE), make(indices.flip(1), b, SHAPE)
        return ((x * y) + x * 3 - y).to_dense()

    assert gradcheck(combine, (a, b))
    d = ember.randn(4, 3, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda d, a: d - 2 * make(indices, a, SHAPE), (d, a))


def test_transpose_and_t():
    s = coo()
    for out in (s.t(), s.transpose(0, 1), ember.transpose(s, -1, 0)):
        assert out.shape == (3, 4)
        np.testing.assert_allclose(out.to_dense().numpy(), scipy_matrix().T)
    assert not s.coalesce().t().is_coalesced()
    h = ember.randn(3, 2, 4).to_sparse(2)
    assert_close(h.transpose(0, 1).to_dense(), h.to_dense().transpose(0, 1))


def test_sparse_mask_and_legacy_constructors():
    s = coo()
    x = ember.arange(12.0, dtype=ember.float64).reshape(4, 3)
    m = x.sparse_mask(s)
    assert m.layout is ember.sparse_coo and m._indices().tolist() == [ROWS, COLS]
    assert m._values().tolist() == x.numpy()[ROWS, COLS].tolist()
    c = x.sparse_mask(s.to_sparse_csr())
    assert c.layout is ember.sparse_csr
    np.testing.assert_allclose(c.to_dense().numpy(), x.numpy() * (scipy_matrix() != 0))
    x.requires_grad_()
    assert gradcheck(lambda x: x.sparse_mask(s).coalesce().values(), (x,))
    f = ember.sparse.FloatTensor(ember.tensor([ROWS, COLS]), ember.tensor(VALS),
                                 ember.Size(SHAPE))
    assert f.shape == SHAPE and f.dtype is ember.float32 and f.layout is ember.sparse_coo
    e = ember.sparse.LongTensor(2, 3)
    assert e.shape == (2, 3) and e._nnz() == 0 and e.dtype is ember.int64


def test_select_and_indexing():
    s = coo()
    np.testing.assert_allclose(s[1].to_dense().numpy(), scipy_matrix()[1])
    np.testing.assert_allclose(s.select(1, 2).to_dense().numpy(), scipy_matrix()[:, 2])


def test_to_device_dtype_clone_detach_zero():
    s = coo(ember.float32)
    assert s.to(ember.float32) is s and s.cpu() is s
    d = s.to(ember.float64)
    assert d.dtype is ember.float64 and d.layout is ember.sparse_coo
    assert s.double().dtype is ember.float64 and s.to("cpu", ember.float16).dtype is \
        ember.float16
    c = s.clone()
    c._values().mul_(0)
    assert s._values().tolist() == VALS
    z = s.clone().zero_()
    assert z._nnz() == 0 and z.to_dense().tolist() == [[0.0] * 3] * 4
    m = s.clone().mul_(2)
    assert m._values().tolist() == [2 * v for v in VALS]


def test_in_place():
    s = coo()
    d = ember.ones(4, 3, dtype=ember.float64)
    d.add_(s, alpha=2)
    np.testing.assert_allclose(d.numpy(), 1 + 2 * scipy_matrix())
    d += s
    np.testing.assert_allclose(d.numpy(), 1 + 3 * scipy_matrix())
    t = coo().coalesce()
    t.add_(t)
    np.testing.assert_allclose(t.to_dense().numpy(), 2 * scipy_matrix())
    t.div_(2)
    np.testing.assert_allclose(t.to_dense().numpy(), scipy_matrix())
    leaf = coo(requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used "
                       "in an in-place operation."):
        leaf.mul_(2)
    with ember.no_grad():
        leaf.mul_(2)
        leaf.zero_()
    assert leaf._nnz() == 0 and leaf.requires_grad and leaf.is_leaf
    with pytest.raises(RuntimeError, match="dense-sparse addition does not currently support "
                       "broadcasting"):
        ember.ones(4, 4).add_(s)


def test_pickle_and_deepcopy():
    for s in (coo(), coo().to_sparse_csr(), coo(requires_grad=True)):
        for t in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
            assert t.layout is s.layout and t.shape == s.shape
            assert t.requires_grad == s.requires_grad
            assert t.to_dense().tolist() == s.to_dense().detach().tolist()


# ----- errors --------------------------------------------------------------------------------

ERRORS = [
    (lambda: ember.sparse_coo_tensor([0, 1], [1.0, 2.0], (2, 3)), RuntimeError,
     r"indices must be sparse_dim x nnz, but got: \[2\]"),
    (lambda: ember.sparse_coo_tensor([[0, 1], [0, 0]], [1.0, 2.0, 3.0], (2, 3)), RuntimeError,
     "indices and values must have same nnz, but got nnz from indices: 2, nnz from values: 3"),
    (lambda: ember.sparse_coo_tensor([[0, 1], [0, 0]], [1.0, 2.0], (2, 3, 4)), RuntimeError,
     r"'len\(size\) == sparse_dim \+ dense_dim' is not satisfied: len\(size\) = 3, "
     r"sparse_dim = 2, dense_dim = 0"),
    (lambda: ember.sparse_coo_tensor([[0, 5], [0, 0]], [1.0, 2.0], (2, 3)), RuntimeError,
     "size is inconsistent with indices: for dim 0, size is 2 but found index 5"),
    (lambda: ember.sparse_coo_tensor([[-1, 1], [0, 0]], [1.0, 2.0], (2, 3)), RuntimeError,
     "found negative index -1 for dim 0"),
    (lambda: ember.sparse_coo_tensor([[0], [1]], [1], (2, 2), requires_grad=True),
     RuntimeError, "Only Tensors of floating point and complex dtype can require gradients"),
    (lambda: ember.sparse_csr_tensor([0, 1], [2, 0, 2], [1.0, 2, 3], (2, 3)), RuntimeError,
     r"crow_indices.shape\[-1\] must be equal to the number of rows \+ 1 \(=3\), but got 2"),
    (lambda: ember.sparse_csr_tensor([0, 1, 2], [2, 0, 2], [1.0, 2, 3], (2, 3)), RuntimeError,
     r"`crow_indices\[..., -1\] == nnz` is not satisfied."),
    (lambda: ember.sparse_csr_tensor([1, 1, 3], [2, 0, 2], [1.0, 2, 3], (2, 3)), RuntimeError,
     r"`crow_indices\[..., 0\] == 0` is not satisfied."),
    (lambda: ember.sparse_csr_tensor([0, 1, 3], [2, 0, 3], [1.0, 2, 3], (2, 3)), RuntimeError,
     "`0 <= col_indices < ncols` is not satisfied."),
    (lambda: ember.sparse_csr_tensor([0, 1, 3], [2, 2, 0], [1.0, 2, 3], (2, 3)), RuntimeError,
     "are sorted and distinct along the last dimension values` is not satisfied."),
    (lambda: coo().values(), RuntimeError,
     r"Cannot get values on an uncoalesced tensor, please call .coalesce\(\) first"),
    (lambda: coo().indices(), RuntimeError,
     r"Cannot get indices on an uncoalesced tensor, please call .coalesce\(\) first"),
    (lambda: coo().crow_indices(), RuntimeError,
     "crow_indices expected sparse row compressed tensor layout but got Sparse"),
    (lambda: coo().to_sparse_csr().indices(), RuntimeError,
     "indices expected sparse coordinate tensor layout but got SparseCsr"),
    (lambda: coo().to_sparse_csr().coalesce(), RuntimeError,
     "coalesce expected sparse coordinate tensor layout but got SparseCsr"),
    (lambda: ember.sparse.mm(coo(), ember.ones(2, 2, dtype=ember.float64)), RuntimeError,
     r"addmm: Argument #3 \(dense\): Expected dim 0 size 3, got 2"),
    (lambda: ember.sparse.mm(coo(), ember.ones(3, 2)), RuntimeError,
     "expected scalar type Double but found Float"),
    (lambda: ember.sparse.mm(coo(), ember.ones(3, dtype=ember.float64)), IndexError,
     r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)"),
    (lambda: coo() + ember.ones(4, 3), RuntimeError,
     r"add\(sparse, dense\) is not supported. Use add\(dense, sparse\) instead."),
    (lambda: coo() + ember.sparse_coo_tensor([[0], [0]], [1.0], (4, 4), dtype=ember.float64),
     RuntimeError, r"add: expected sizes of 'self' and 'other' to match, but \[4, 3\] != "
     r"\[4, 4\]"),
    (lambda: coo() / ember.ones(4, 3), RuntimeError,
     r"Sparse division requires a scalar or zero-dim dense tensor divisor \(got shape "
     r"\[4, 3\] for divisor\)"),
    (lambda: coo().pow(0), RuntimeError,
     "pow: cannot raise to zeroth power on sparse tensor; it would make the result tensor "
     "dense"),
    (lambda: ember.exp(coo()), NotImplementedError,
     "Could not run 'aten::exp' with arguments from the 'SparseCPU' backend"),
    (lambda: coo().to_sparse_csr().exp(), RuntimeError, "unsupported tensor layout: SparseCsr"),
    (lambda: coo().reshape(12), RuntimeError, "reshape is not implemented for sparse tensors"),
    (lambda: coo().numpy(), TypeError,
     r"can't convert Sparse layout tensor to numpy. Use Tensor.to_dense\(\) first."),
    (lambda: coo().data_ptr(), RuntimeError,
     "Cannot access data pointer of Tensor that doesn't have storage"),
    (lambda: coo().item(), RuntimeError, "a Tensor with 12 elements cannot be converted to "
     "Scalar"),
    (lambda: ember.sparse_coo_tensor(ember.zeros(3, 1, dtype=ember.int64), ember.ones(1),
                                     (2, 2, 2)).t(), RuntimeError,
     "t\\(\\) expects a tensor with <= 2 sparse and 0 dense dimensions, but got 3 sparse and "
     "0 dense dimensions"),
    (lambda: ember.sparse.sum(coo(), 2), IndexError,
     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    (lambda: ember.sparse.sum(coo().to_sparse_csr()), RuntimeError,
     "coalesce expected sparse coordinate tensor layout but got SparseCsr"),
    (lambda: ember.sparse.softmax(coo().long(), 1), NotImplementedError,
     "\"softmax\" not implemented for 'Long'"),
    (lambda: ember.sparse.softmax(coo().to_sparse_csr(), 1), NotImplementedError,
     "Could not run 'aten::_sparse_softmax' with arguments from the 'SparseCsrCPU' backend."),
    (lambda: ember.ones(2, 2).to_sparse(3), RuntimeError,
     r"dense_to_sparse: sparse_dim argument must be in \[0,2\] range, but 3 is given"),
    (lambda: coo() == coo(), NotImplementedError,
     "Could not run 'aten::eq' with arguments from the 'SparseCPU' backend"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors(case):
    fn, kind, message = ERRORS[case]
    with pytest.raises(kind, match=message):
        fn()


# ----- printing --------------------------------------------------------------------------------

def test_repr_coo():
    s = ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    assert repr(s) == (
        "tensor(indices=tensor([[0, 1, 1],\n"
        "                       [2, 0, 2]]),\n"
        "       values=tensor([3., 4., 5.]),\n"
        "       size=(2, 3), nnz=3, layout=ember.sparse_coo)")
    assert repr(s.double().requires_grad_()).endswith(
        "size=(2, 3), nnz=3, dtype=ember.float64, layout=ember.sparse_coo,\n"
        "       requires_grad=True)")
    empty = ember.sparse_coo_tensor(ember.zeros(2, 0, dtype=ember.int64), ember.zeros(0),
                                    (2, 2))
    assert repr(empty) == (
        "tensor(indices=tensor([], size=(2, 0)),\n"
        "       values=tensor([], size=(0,)),\n"
        "       size=(2, 2), nnz=0, layout=ember.sparse_coo)")
    hybrid = ember.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse(1)
    assert repr(hybrid) == (
        "tensor(indices=tensor([[0, 1]]),\n"
        "       values=tensor([[0., 1.],\n"
        "                      [2., 0.]]),\n"
        "       size=(2, 2), nnz=2, layout=ember.sparse_coo)")


def test_repr_csr():
    s = ember.sparse_csr_tensor([0, 1, 3], [2, 0, 2], [3.0, 4.0, 5.0], (2, 3))
    assert repr(s) == (
        "tensor(crow_indices=tensor([0, 1, 3]),\n"
        "       col_indices=tensor([2, 0, 2]),\n"
        "       values=tensor([3., 4., 5.]), size=(2, 3), nnz=3,\n"
        "       layout=ember.sparse_csr)")
    assert str(s) == repr(s)


# ----- a GCN step ---------------------------------------------------------------------------

def test_gcn_layer_trains():
    ember.manual_seed(0)
    n = 50
    s, _ = random_sparse(n, n, 200, seed=9, dtype=ember.float32)
    adj = ember.sparse_coo_tensor(s._indices(), s._values().abs(), (n, n)).coalesce()
    x = ember.randn(n, 8)
    target = ember.randn(n, 4)
    layer = ember.nn.Linear(8, 4)
    opt = ember.optim.SGD(layer.parameters(), lr=0.05)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = ((ember.sparse.mm(adj, layer(x)) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_save_and_load_round_trip(tmp_path):
    coo = ember.sparse_coo_tensor(ember.tensor([[0, 1, 1], [2, 0, 2]]),
                                  ember.tensor([1.0, 2.0, 3.0]), (2, 3))
    csr = coo.to_sparse_csr()
    ember.save({"coo": coo, "csr": csr}, tmp_path / "s.pt")
    loaded = ember.load(tmp_path / "s.pt")
    assert loaded["coo"].layout is ember.sparse_coo and loaded["csr"].layout is ember.sparse_csr
    assert loaded["coo"].to_dense().tolist() == coo.to_dense().tolist()
    assert loaded["csr"].to_dense().tolist() == csr.to_dense().tolist()


def test_assert_close_compares_sparse_tensors_as_pytorch():
    coo = ember.sparse_coo_tensor(ember.tensor([[0, 1], [1, 0]]), ember.tensor([1.0, 2.0]), (2, 2))
    other = ember.sparse_coo_tensor(ember.tensor([[0, 1], [1, 0]]), ember.tensor([1.0, 2.5]),
                                    (2, 2))
    ember.testing.assert_close(coo, coo.clone())
    ember.testing.assert_close(coo, coo.to_dense(), check_layout=False)
    with pytest.raises(AssertionError, match="attribute 'layout' do not match"):
        ember.testing.assert_close(coo, coo.to_dense())
    with pytest.raises(AssertionError, match="^Sparse COO values are not close!"):
        ember.testing.assert_close(coo, other)
    with pytest.raises(AssertionError, match="^Sparse CSR values are not close!"):
        ember.testing.assert_close(coo.to_sparse_csr(), other.to_sparse_csr())
    fewer = ember.sparse_coo_tensor(ember.tensor([[0], [1]]), ember.tensor([1.0]), (2, 2))
    with pytest.raises(AssertionError, match="number of specified values in sparse COO tensors "
                                             "does not match: 2 != 1"):
        ember.testing.assert_close(coo, fewer)


def test_sparse_compressed_tensor_makes_csr_tensors():
    t = ember.sparse_compressed_tensor(ember.tensor([0, 2, 4]), ember.tensor([0, 1, 0, 1]),
                                       ember.tensor([1, 2, 3, 4]), dtype=ember.double,
                                       layout=ember.sparse_csr)
    assert t.layout is ember.sparse_csr and t.dtype is ember.float64
    assert t.to_dense().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    args = (ember.tensor([0, 2, 4]), ember.tensor([0, 1, 0, 1]), ember.tensor([1., 2, 3, 4]))
    with pytest.raises(RuntimeError, match="expected sparse compressed tensor layout but got "
                                           "none"):
        ember.sparse_compressed_tensor(*args)
    csc = ember.sparse_compressed_tensor(*args, layout=ember.sparse_csc)
    assert csc.layout is ember.sparse_csc
    assert csc.to_dense().tolist() == [[1.0, 3.0], [2.0, 4.0]]
