"""Sparse COO and CSR tensors against torch's: values, layouts, gradients, printing and the
errors with their messages."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import error, first_line

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

ROWS, COLS = [0, 1, 1, 3, 0], [2, 0, 2, 1, 2]
VALS = [3.0, 4.0, 5.0, -1.0, 0.5]
SHAPE = (4, 3)
DENSE = np.arange(12.0).reshape(3, 4) / 7 - 0.5


@pytest.fixture(autouse=True)
def quiet_torch():
    with warnings.catch_warnings():             # torch warns that it skips invariant checks
        warnings.simplefilter("ignore", UserWarning)
        yield


def both(dtype="float64", **kwargs):
    """The same COO tensor in ember and in torch."""
    e = ember.sparse_coo_tensor([ROWS, COLS], VALS, SHAPE, dtype=getattr(ember, dtype),
                                **kwargs)
    t = torch.sparse_coo_tensor([ROWS, COLS], VALS, SHAPE, dtype=getattr(torch, dtype),
                                **kwargs)
    return e, t


def dense_of(x):
    if isinstance(x, torch.Tensor):
        return (x.to_dense() if x.layout != torch.strided else x).detach().numpy()
    return (x.to_dense() if x.layout is not ember.strided else x).detach().numpy()


def layout_name(x):
    return str(x.layout).split(".")[-1]


def same(e, t, rtol=1e-12, atol=1e-12):
    assert layout_name(e) == layout_name(t)
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(dense_of(e), dense_of(t), rtol=rtol, atol=atol)


def _run(lib, fn):
    s = lib.sparse_coo_tensor([ROWS, COLS], VALS, SHAPE, dtype=lib.float64)
    d = lib.tensor(DENSE, dtype=lib.float64)
    return fn(lib, s, d)


CASES = {
    "to_dense": lambda lib, s, d: s.to_dense(),
    "coalesce": lambda lib, s, d: s.coalesce(),
    "sparse.mm": lambda lib, s, d: lib.sparse.mm(s, d),
    "mm": lambda lib, s, d: lib.mm(s, d),
    "spmm": lambda lib, s, d: lib.spmm(s, d),
    "matmul": lambda lib, s, d: s @ d,
    "matmul vector": lambda lib, s, d: s @ d[:, 0],
    "vector @ sparse": lambda lib, s, d: d[0] @ s,
    "0-dim value": lambda lib, s, d: lib.sparse_coo_tensor([[0], [1]], lib.tensor(2.0), (2, 2)),
    "dense @ sparse": lambda lib, s, d: d.t() @ s.t(),
    "csr mm": lambda lib, s, d: s.to_sparse_csr() @ d,
    "sparse @ sparse": lambda lib, s, d: lib.sparse.mm(s, s.t()),
    "addmm": lambda lib, s, d: lib.sparse.addmm(lib.ones(4, 4, dtype=lib.float64), s, d,
                                                beta=0.5, alpha=2.0),
    "torch addmm": lambda lib, s, d: lib.addmm(lib.ones(4, 4, dtype=lib.float64), s, d),
    "sum": lambda lib, s, d: lib.sparse.sum(s),
    "sum 0": lambda lib, s, d: lib.sparse.sum(s, 0),
    "sum -1": lambda lib, s, d: lib.sparse.sum(s, -1),
    "sum (0, 1)": lambda lib, s, d: lib.sparse.sum(s, (0, 1)),
    "Tensor.sum": lambda lib, s, d: s.sum(),
    "softmax 0": lambda lib, s, d: lib.sparse.softmax(s, 0),
    "softmax 1": lambda lib, s, d: lib.sparse.softmax(s, 1),
    "log_softmax 1": lambda lib, s, d: lib.sparse.log_softmax(s, 1),
    "t": lambda lib, s, d: s.t(),
    "transpose": lambda lib, s, d: s.transpose(1, 0),
    "s * 2": lambda lib, s, d: s * 2,
    "2 * s": lambda lib, s, d: 2 * s,
    "s / 2": lambda lib, s, d: s / 2,
    "-s": lambda lib, s, d: -s,
    "s + s": lambda lib, s, d: s + s,
    "s - 2s": lambda lib, s, d: s - s * 2,
    "s * s": lambda lib, s, d: s * s,
    "s * t(s) pattern": lambda lib, s, d: s * (s.t().t() * 3),
    "add alpha": lambda lib, s, d: lib.add(s, s, alpha=3),
    "dense + s": lambda lib, s, d: d.t() + s,
    "dense - s": lambda lib, s, d: d.t().float() - s,
    "s * dense": lambda lib, s, d: s * d.t(),
    "sin": lambda lib, s, d: s.sin(),
    "abs": lambda lib, s, d: s.abs(),
    "pow": lambda lib, s, d: s.pow(3),
    "to_sparse": lambda lib, s, d: d.to_sparse(),
    "to_sparse(1)": lambda lib, s, d: d.to_sparse(1),
    "to_sparse_csr": lambda lib, s, d: d.to_sparse_csr(),
    "coo to csr": lambda lib, s, d: s.to_sparse_csr(),
    "csr to coo": lambda lib, s, d: s.to_sparse_csr().to_sparse(),
    "csr * 2": lambda lib, s, d: s.to_sparse_csr() * 2,
    "csr + csr": lambda lib, s, d: s.to_sparse_csr() + s.to_sparse_csr(),
    "to float32": lambda lib, s, d: s.to(lib.float32),
    "double": lambda lib, s, d: s.float().double(),
    "select": lambda lib, s, d: s[1],
    "zero_": lambda lib, s, d: s.clone().zero_(),
    "sparse_mask": lambda lib, s, d: d.t().sparse_mask(s),
    "sparse_mask csr": lambda lib, s, d: d.t().sparse_mask(s.to_sparse_csr()),
    "legacy FloatTensor": lambda lib, s, d: lib.sparse.FloatTensor(s._indices(),
                                                                   s._values().float(),
                                                                   lib.Size([4, 3])),
    "legacy empty": lambda lib, s, d: lib.sparse.DoubleTensor(2, 3),
    "dense add_": lambda lib, s, d: lib.ones(4, 3, dtype=lib.float64).add_(s, alpha=2),
    "sparse mul_": lambda lib, s, d: s.clone().mul_(3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name):
    same(_run(ember, CASES[name]), _run(torch, CASES[name]))


def test_metadata_matches_torch():
    e, t = both()
    c_e, c_t = e.coalesce(), t.coalesce()
    assert e.is_coalesced() == t.is_coalesced() and c_e.is_coalesced() == c_t.is_coalesced()
    assert (e.sparse_dim(), e.dense_dim(), e._nnz()) == (t.sparse_dim(), t.dense_dim(),
                                                         t._nnz())
    assert (e.is_sparse, e.is_sparse_csr) == (t.is_sparse, t.is_sparse_csr)
    assert c_e.indices().tolist() == c_t.indices().tolist()
    assert c_e.values().tolist() == c_t.values().tolist()
    r_e, r_t = e.to_sparse_csr(), t.to_sparse_csr()
    assert r_e.crow_indices().tolist() == r_t.crow_indices().tolist()
    assert r_e.col_indices().tolist() == r_t.col_indices().tolist()
    assert (r_e.is_sparse, r_e.is_sparse_csr) == (r_t.is_sparse, r_t.is_sparse_csr)
    assert e.numel() == t.numel() and e.dim() == t.dim() and len(e) == len(t)
    x_e, x_t = ember.ones(2, 3), torch.ones(2, 3)
    assert (x_e.sparse_dim(), x_e.dense_dim()) == (x_t.sparse_dim(), x_t.dense_dim())


@pytest.mark.parametrize("op", ["sparse.mm", "matmul", "addmm"])
def test_gradients_match_torch(op):
    grads = []
    for lib in (ember, torch):
        v = lib.tensor(VALS, dtype=lib.float64, requires_grad=True)
        d = lib.tensor(DENSE, dtype=lib.float64, requires_grad=True)
        s = lib.sparse_coo_tensor([ROWS, COLS], v, SHAPE)
        out = {"sparse.mm": lambda: lib.sparse.mm(s, d), "matmul": lambda: s @ d,
               "addmm": lambda: lib.sparse.addmm(lib.zeros(4, 4, dtype=lib.float64), s, d,
                                                 alpha=2.0)}[op]()
        (out * out).sum().backward()
        grads.append((v.grad.numpy(), d.grad.numpy()))
    for e, t in zip(*grads):
        np.testing.assert_allclose(e, t, rtol=1e-12)


LEAF_PRODUCTS = {
    "sparse.mm": lambda lib, s, d: lib.sparse.mm(s, d),
    "sparse.addmm": lambda lib, s, d: lib.sparse.addmm(lib.ones(4, 4, dtype=lib.float64), s, d),
    "mm": lambda lib, s, d: lib.mm(s, d),
    "spmm": lambda lib, s, d: lib.spmm(s, d),
    "matmul": lambda lib, s, d: s @ d,
    "addmm": lambda lib, s, d: lib.addmm(lib.ones(4, 4, dtype=lib.float64), s, d, alpha=2),
    "mv": lambda lib, s, d: lib.mv(s, d[:, 0]),
    "dense @ sparse": lambda lib, s, d: lib.ones(2, 4, dtype=lib.float64) @ s,
    "vector @ sparse": lambda lib, s, d: lib.ones(4, dtype=lib.float64) @ s,
    "both": lambda lib, s, d: lib.sparse.mm(s, d) + lib.mm(s, d) * 2,
}


@pytest.mark.parametrize("name", list(LEAF_PRODUCTS))
def test_gradient_of_a_sparse_leaf_matches_torch(name):
    """sparse.mm gives a sparse leaf a sparse gradient with its indices, mm a dense one."""
    grads = []
    for lib in (ember, torch):
        s = lib.sparse_coo_tensor([ROWS, COLS], VALS, SHAPE, dtype=lib.float64,
                                  requires_grad=True)
        d = lib.tensor(DENSE, dtype=lib.float64)
        for _ in range(2):                          # accumulates
            LEAF_PRODUCTS[name](lib, s, d).pow(2).sum().backward()
        grads.append(s.grad)
    e, t = grads
    assert layout_name(e) == layout_name(t)
    np.testing.assert_allclose(dense_of(e), dense_of(t), rtol=1e-12)


def test_softmax_gradients_match_torch():
    grads = []
    for lib in (ember, torch):
        v = lib.tensor(VALS, dtype=lib.float64, requires_grad=True)
        s = lib.sparse_coo_tensor([ROWS, COLS], v, SHAPE)
        out = lib.sparse.log_softmax(s, 1).to_dense()
        (out * lib.arange(12.0, dtype=lib.float64).reshape(4, 3)).sum().backward()
        grads.append(v.grad.numpy())
    np.testing.assert_allclose(*grads, rtol=1e-12)


def _text(x):
    return repr(x).replace("torch.", "ember.").replace("torch", "ember")


@pytest.mark.parametrize("make", [
    lambda lib: lib.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3)),
    lambda lib: lib.sparse_coo_tensor([[0, 1], [1, 0]], [1, 2], (2, 2)),
    lambda lib: lib.sparse_coo_tensor([[0, 1], [1, 0]], [1, 2], (2, 2), dtype=lib.float64),
    lambda lib: lib.sparse_coo_tensor([[0, 1], [1, 0]], [1.5, 2], (2, 2), requires_grad=True),
    lambda lib: lib.sparse_coo_tensor(lib.zeros(2, 0, dtype=lib.int64), lib.zeros(0), (2, 2)),
    lambda lib: lib.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse(1),
    lambda lib: lib.tensor([0.0, 3.0]).to_sparse(),
    lambda lib: lib.arange(40.0).reshape(4, 10).to_sparse(),
    lambda lib: lib.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse_csr(),
    lambda lib: lib.tensor([[0.0, 1.0], [2.0, 0.0]], dtype=lib.float64).to_sparse_csr(),
    lambda lib: lib.arange(40.0).reshape(4, 10).to_sparse_csr(),
])
def test_printing_matches_torch(make):
    assert _text(make(ember)) == _text(make(torch))


ERRORS = {
    "values uncoalesced": lambda lib, s: s.values(),
    "indices uncoalesced": lambda lib, s: s.indices(),
    "crow of coo": lambda lib, s: s.crow_indices(),
    "col of coo": lambda lib, s: s.col_indices(),
    "indices of csr": lambda lib, s: s.to_sparse_csr().indices(),
    "coalesce csr": lambda lib, s: s.to_sparse_csr().coalesce(),
    "is_coalesced csr": lambda lib, s: s.to_sparse_csr().is_coalesced(),
    "mm shapes": lambda lib, s: lib.sparse.mm(s, lib.ones(2, 2, dtype=lib.float64)),
    "mm dtypes": lambda lib, s: lib.sparse.mm(s, lib.ones(3, 2)),
    "mm vector": lambda lib, s: lib.sparse.mm(s, lib.ones(3, dtype=lib.float64)),
    "add dense": lambda lib, s: s + lib.ones(4, 3, dtype=lib.float64),
    "add sizes": lambda lib, s: s + lib.sparse_coo_tensor([[0], [0]], [1.0], (4, 4),
                                                          dtype=lib.float64),
    "div dense": lambda lib, s: s / lib.ones(4, 3),
    "pow 0": lambda lib, s: s.pow(0),
    "exp": lambda lib, s: lib.exp(s),
    "reshape": lambda lib, s: s.reshape(12),
    "numpy": lambda lib, s: s.numpy(),
    "data_ptr": lambda lib, s: s.data_ptr(),
    "item": lambda lib, s: s.item(),
    "nnz mismatch": lambda lib, s: lib.sparse_coo_tensor([[0, 1], [0, 0]], [1.0, 2.0, 3.0],
                                                         (2, 3)),
    "indices 1-D": lambda lib, s: lib.sparse_coo_tensor([0, 1], [1.0, 2.0], (2, 3)),
    "size length": lambda lib, s: lib.sparse_coo_tensor([[0, 1], [0, 0]], [1.0, 2.0],
                                                        (2, 3, 4)),
    "int requires grad": lambda lib, s: lib.sparse_coo_tensor([[0], [1]], [1], (2, 2),
                                                              requires_grad=True),
    "t of 3-D": lambda lib, s: lib.sparse_coo_tensor(lib.zeros(3, 1, dtype=lib.int64),
                                                     lib.ones(1), (2, 2, 2)).t(),
    "sum dim": lambda lib, s: lib.sparse.sum(s, 2),
    "sum csr": lambda lib, s: lib.sparse.sum(s.to_sparse_csr()),
    "sum dense": lambda lib, s: lib.sparse.sum(lib.ones(2, 2)),
    "softmax int": lambda lib, s: lib.sparse.softmax(s.long(), 1),
    "to_sparse dim": lambda lib, s: lib.ones(2, 2).to_sparse(3),
    "dense add_ sizes": lambda lib, s: lib.ones(2, 3).add_(s),
    "sparse_mask sizes": lambda lib, s: lib.ones(3, 3).sparse_mask(s),
    "strided coalesce": lambda lib, s: lib.ones(2).coalesce(),
    "strided is_coalesced": lambda lib, s: lib.ones(2).is_coalesced(),
    "strided indices": lambda lib, s: lib.ones(2).indices(),
    "strided values": lambda lib, s: lib.ones(2).values(),
    "strided crow_indices": lambda lib, s: lib.ones(2).crow_indices(),
    "strided col_indices": lambda lib, s: lib.ones(2).col_indices(),
    "strided _nnz": lambda lib, s: lib.ones(2)._nnz(),
    "strided _values": lambda lib, s: lib.ones(2)._values(),
    "dense + sparse sizes": lambda lib, s: lib.ones(3, dtype=lib.float64) + s,
    "s + 1": lambda lib, s: s + 1,
    "1 + s": lambda lib, s: 1 + s,
    "s - 1": lambda lib, s: s - 1,
    "1 - s": lambda lib, s: 1 - s,
    "s + 0-dim": lambda lib, s: s + lib.tensor(1.0),
    "mm 0-dim": lambda lib, s: lib.sparse.mm(s, lib.tensor(1.0, dtype=lib.float64)),
    "mm 3-D": lambda lib, s: lib.sparse.mm(s, lib.ones(3, 2, 2, dtype=lib.float64)),
    "leaf mul_": lambda lib, s: s.requires_grad_().mul_(2),
}


def _error(lib, fn):
    """(error type, first message line) of ``fn`` on the sparse sample, (None, None) when it
    returns."""
    s = lib.sparse_coo_tensor([ROWS, COLS], VALS, SHAPE, dtype=lib.float64)
    return error(fn, lib, s, message=first_line) or (None, None)


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_torch(name):
    e_kind, e_text = _error(ember, ERRORS[name])
    t_kind, t_text = _error(torch, ERRORS[name])
    assert e_kind == t_kind
    if t_kind == "NotImplementedError":         # torch's message goes on about builds
        assert e_text.startswith(t_text.split(" This could be")[0].rstrip("."))
    else:
        assert e_text == t_text


def test_checkpoints_cross_libraries(tmp_path):
    indices, values = [[0, 1, 1], [2, 0, 2]], [1.0, 2.0, 3.0]
    for lib, path in ((ember, tmp_path / "ember.pt"), (torch, tmp_path / "torch.pt")):
        coo = lib.sparse_coo_tensor(lib.tensor(indices), lib.tensor(values), (2, 3))
        lib.save({"coo": coo, "csr": coo.to_sparse_csr()}, path)
    for loaded in (torch.load(tmp_path / "ember.pt"), ember.load(tmp_path / "torch.pt")):
        assert loaded["coo"].is_sparse and loaded["csr"].is_sparse_csr
        assert loaded["coo"].to_dense().tolist() == [[0.0, 0.0, 1.0], [2.0, 0.0, 3.0]]
        assert loaded["csr"].to_dense().tolist() == [[0.0, 0.0, 1.0], [2.0, 0.0, 3.0]]


@pytest.mark.parametrize("name", ["SGD", "Adagrad", "SparseAdam"])
def test_sparse_embedding_training_matches(name):
    def train(lib):
        emb = lib.nn.Embedding(6, 3, sparse=True, padding_idx=4)
        with lib.no_grad():
            emb.weight.copy_(lib.tensor(np.arange(18.0, dtype=np.float32).reshape(6, 3) / 10))
        opt = getattr(lib.optim, name)(emb.parameters(), lr=0.1)
        idx = lib.tensor([[0, 2, 4], [5, 0, 1]])
        for _ in range(3):
            opt.zero_grad()
            emb(idx).pow(2).sum().backward()
            opt.step()
        return emb.weight.detach().numpy(), emb.weight.grad.is_sparse
    (ours, ours_sparse), (theirs, theirs_sparse) = train(ember), train(torch)
    assert ours_sparse and theirs_sparse
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
