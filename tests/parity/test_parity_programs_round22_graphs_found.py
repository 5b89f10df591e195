"""What the round-22 graph programs (test_parity_programs_round22_graphs.py) found: max_norm
embeddings renormalised between two lookups of one graph, the node names of sparse products
and of the other sparse ops, addmm's refusal of a COO mat2, torch.hspmm and torch.smm, the
untracked ``_values()``, to_dense's refusal of a dtype, segment_reduce's axis, and int32
compressed indices kept (more in test_parity_sparse_int32_round22.py)."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same_error, recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _twice_renormed_lookup(lib, functional):
    """TransE's score: the same max_norm embedding looked up twice (each lookup renormalises
    rows in place) before one backward."""
    emb = lib.nn.Embedding(5, 3, max_norm=1.0)
    with lib.no_grad():
        emb.weight.copy_(lib.arange(15.0).view(5, 3) / 4 - 1)
    heads, tails = lib.tensor([0, 1, 3]), lib.tensor([3, 4, 4])
    if functional:
        def look(i):
            return lib.nn.functional.embedding(i, emb.weight, max_norm=1.0)
    else:
        look = emb
    dist = (look(heads) - look(tails)).norm(dim=-1).sum()
    dist.backward()
    return emb.weight.detach().clone(), emb.weight.grad, emb.weight._version


@pytest.mark.parametrize("functional", [False, True], ids=["module", "functional"])
def test_max_norm_lookup_leaves_the_earlier_lookups_differentiable(functional):
    """The embedding's backward reads only the indices (and the weight's shape), so the next
    lookup's in-place renorm of the weight does not break it (ember saved the weight and
    refused: "modified by an inplace operation")."""
    ours, theirs = _twice_renormed_lookup(ember, functional), _twice_renormed_lookup(torch,
                                                                                  functional)
    for got, expected in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)
    assert ours[2] == theirs[2]


def test_embedding_still_checks_its_indices_for_inplace_changes():
    """The indices the backward reads are still checked: changing them in place refuses."""
    def run(lib):
        w = lib.ones(4, 2, requires_grad=True)
        idx = lib.tensor([0, 2])
        out = lib.nn.functional.embedding(idx, w)
        idx.add_(1)
        out.sum().backward()
        return w.grad

    def head(text):
        return text.split(" is at version")[0].replace("torch.", "ember.")

    ours, theirs = recorded(run, ember, message=head)[0], recorded(run, torch, message=head)[0]
    assert ours == theirs and ours[0] == "RuntimeError"


_PRODUCTS = {
    "mm": lambda lib, s, x: lib.mm(s, x),
    "spmm": lambda lib, s, x: lib.spmm(s, x),
    "@": lambda lib, s, x: s @ x,
    "matmul vector": lambda lib, s, x: lib.matmul(s, x[:, 0]),
    "vector @": lambda lib, s, x: x[:, 0] @ s,
    "mv": lambda lib, s, x: lib.mv(s, x[:, 0]),
    "dense @": lambda lib, s, x: x.t() @ s,
    "sparse.mm": lambda lib, s, x: lib.sparse.mm(s, x),
    "sparse @ sparse": lambda lib, s, x: lib.mm(s, s.detach()),
    "sparse.mm sparse": lambda lib, s, x: lib.sparse.mm(s, s.detach()),
    "addmm": lambda lib, s, x: lib.addmm(lib.ones(3, 3), s, x, beta=0.5),
    "sparse.addmm": lambda lib, s, x: lib.sparse.addmm(lib.ones(3, 3), s, x, alpha=2.0),
    "sparse.addmm beta 0": lambda lib, s, x: lib.sparse.addmm(lib.ones(3, 3), s, x, beta=0),
}


def _product_node(lib, name, layout, grad_of):
    dense = lib.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [1.0, 1.0, 0.0]])
    s = dense.to_sparse() if layout == "coo" else dense.to_sparse_csr()
    x = lib.arange(9.0).view(3, 3)
    if grad_of in ("sparse", "both"):
        s.requires_grad_()
    if grad_of in ("dense", "both"):
        x.requires_grad_()
    out = _PRODUCTS[name](lib, s, x)
    node = out.grad_fn
    values = out.to_dense() if out.layout is not lib.strided else out
    return (None if node is None else type(node).__name__, values.detach().numpy().tolist())


@pytest.mark.filterwarnings("ignore::UserWarning")     # sparse CSR is in beta
@pytest.mark.parametrize("grad_of", ["sparse", "dense", "both"])
@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("name", list(_PRODUCTS))
def test_sparse_products_name_their_nodes_as_torch(name, layout, grad_of):
    """mm, @, matmul, spmm and dense @ sparse record MmBackward0 (mv: MvBackward0, a vector on
    the left SqueezeBackward4), sparse.mm SparseAddmmBackward0 (two COO matrices:
    SparseSparseMatmulBackward0), addmm AddmmBackward0 and sparse.addmm SparseAddmmBackward0
    (ember's composites showed their last step: SparseAddmmBackward0, TBackward0,
    AddBackward0, IndexBackward0)."""
    assert _product_node(ember, name, layout, grad_of) == _product_node(torch, name, layout,
                                                                        grad_of)


@pytest.mark.parametrize("case", ["coo @ coo", "dense @ coo", "sparse.addmm coo @ coo",
                                  "sparse.addmm dense @ coo"])
def test_addmm_refuses_a_sparse_coo_mat2_as_torch(case):
    """addmm (and sparse.addmm) into a dense matrix take a strided mat2 after a COO mat1
    (ember computed them)."""
    def call(lib, dense):
        fn = lib.sparse.addmm if case.startswith("sparse.addmm") else lib.addmm
        mat1 = dense.to_sparse() if "coo @" in case else dense
        return fn(lib.zeros(2, 2), mat1, dense.to_sparse())

    assert_same_error(call, lambda lib: lib.tensor([[1.0, 0.0], [2.0, 3.0]]))


def _hybrid_products(lib, fn):
    indices = lib.tensor([[2, 0, 0, 2], [0, 2, 0, 1]])     # uncoalesced, row 1 empty
    s = lib.sparse_coo_tensor(indices, lib.tensor([1.0, 2.0, 3.0, 4.0]), (3, 3))
    x = lib.arange(6.0).view(3, 2)
    out = getattr(lib, fn)(s, x) if fn != "Tensor.smm" else s.smm(x)
    return (out._indices(), out._values(), tuple(out.shape),
            out.sparse_dim(), out.dense_dim(), out.is_coalesced(), out.to_dense())


@pytest.mark.parametrize("fn", ["hspmm", "smm", "Tensor.smm"])
def test_hspmm_and_smm_keep_the_stored_rows_sparse(fn):
    """torch.hspmm (a hybrid COO result: one dense row per stored row) and torch.smm (every
    element of the stored rows), which ember lacked."""
    ours, theirs = _hybrid_products(ember, fn), _hybrid_products(torch, fn)
    assert ours[2:6] == theirs[2:6]
    for i in (0, 1, 6):
        np.testing.assert_array_equal(ours[i].numpy(), theirs[i].numpy())


@pytest.mark.parametrize("fn", ["hspmm", "smm"])
@pytest.mark.parametrize("case", ["dense", "csr", "rows", "dtype", "vector", "backward"])
def test_hspmm_and_smm_errors_as_torch(fn, case):
    def call(lib, dense):
        sparse, other = dense.to_sparse(), lib.ones(3, 2)
        if case == "dense":
            sparse = dense
        elif case == "csr":
            if fn == "smm":
                pytest.skip("torch.smm of a CSR matrix crashes inside PyTorch's sspaddmm")
            sparse = dense.to_sparse_csr()
        elif case == "rows":
            other = lib.ones(2, 2)
        elif case == "dtype":
            other = other.double()
        elif case == "vector":
            other = lib.ones(3)
        elif case == "backward":
            other.requires_grad_()
            out = getattr(lib, fn)(sparse, other)
            assert type(out.grad_fn).__name__ == "NotImplemented"
            return out.to_dense().sum().backward()
        return getattr(lib, fn)(sparse, other)

    if case in ("dense", "csr") and fn == "hspmm":      # PyTorch's goes on about builds
        def cut(text):
            return text.split(" This could be")[0]
        ours = recorded(call, ember, ember.eye(3), message=cut)[0]
        assert ours == recorded(call, torch, torch.eye(3), message=cut)[0]
        assert ours[0] == "NotImplementedError"
    else:
        assert_same_error(call, lambda lib: lib.eye(3))


def _sparse_nodes(lib):
    """The node names of the sparse ops a GCN's preprocessing and forward go through."""
    indices = lib.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    v = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    raw = lib.sparse_coo_tensor(indices, v, (3, 3))
    c = raw.coalesce()
    leaf = c.detach().requires_grad_()
    x = lib.ones(3, 3, requires_grad=True)
    made = {
        "sparse_coo_tensor": raw, "coalesce": c, "values": c.values(),
        "leaf values": leaf.values(), "csr values": c.to_sparse_csr().values(),
        "sparse_csr_tensor": lib.sparse_csr_tensor(lib.tensor([0, 1, 3, 4]),
                                                   lib.tensor([1, 0, 2, 1]), v, (3, 3)),
        "to_dense": c.to_dense(), "csr to_dense": c.to_sparse_csr().to_dense(),
        "sparse.sum": lib.sparse.sum(c), "sparse.sum dim": lib.sparse.sum(c, 0),
        "sparse.sum dims": lib.sparse.sum(c, (0, 1)), "sum dim": c.sum(1),
        "softmax": lib.sparse.softmax(c, 1), "log_softmax": lib.sparse.log_softmax(c, 1),
        "add": c + c, "sub": c - c, "dense + sparse": lib.ones(3, 3) + c,
        "t": c.t(), "leaf t": leaf.t(), "transpose": c.transpose(0, 1),
        "csr to coo": c.to_sparse_csr().to_sparse_coo(),
        "to_sparse": x.to_sparse(), "to_sparse(1)": x.to_sparse(1),
        "to_sparse_coo": x.to_sparse_coo(), "to_sparse csr": x.to_sparse(layout=lib.sparse_csr),
        "to_sparse_csr": x.to_sparse_csr(), "to_sparse_csc": x.to_sparse_csc(),
        "sparse_mask": x.sparse_mask(c.detach()),
        "sampled_addmm": lib.sparse.sampled_addmm(c.detach().to_sparse_csr(), x, lib.ones(3, 3)),
    }
    return {k: type(t.grad_fn).__name__ if t.grad_fn is not None else None
            for k, t in made.items()}


@pytest.mark.filterwarnings("ignore::UserWarning")     # sparse CSR is in beta
def test_sparse_ops_name_their_nodes_as_torch():
    """ember's sparse ops are composites of dense ones; their nodes bore the last dense op's
    name (IndexAddBackward0, AliasBackward0, ...) or none (a leaf's transpose)."""
    ours, theirs = _sparse_nodes(ember), _sparse_nodes(torch)
    assert ours == theirs


def _values_tracking(lib):
    indices = lib.tensor([[0, 1, 1], [1, 0, 1]])
    v = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    raw = lib.sparse_coo_tensor(indices, v, (2, 2))
    c = raw.coalesce()
    leaf = c.detach().requires_grad_()
    picks = [raw._values(), c._values(), leaf._values(), c.values(), leaf.values()]
    out = [(p.requires_grad, p.grad_fn is None) for p in picks]
    (c.values() * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
    leaf._values().add_(1.0)                    # a view: the tensor sees the change
    return out, v.grad.tolist(), leaf.to_dense().tolist()


def test_private_values_are_not_tracked_by_autograd():
    """``_values()`` is an untracked view of the values, ``values()`` the differentiable one
    (ember's ``_values()`` tracked gradients)."""
    assert _values_tracking(ember) == _values_tracking(torch)


@pytest.mark.filterwarnings("ignore::UserWarning")     # sparse CSR is in beta
@pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr"])
def test_sparse_to_dense_refuses_a_dtype_as_torch(layout):
    def call(lib, dense):
        s = {"coo": dense.to_sparse(), "csr": dense.to_sparse_csr(),
             "csc": dense.to_sparse_csc(), "bsr": dense.to_sparse_bsr((1, 1))}[layout]
        return s.to_dense(dtype=lib.float64)

    assert_same_error(call, lambda lib: lib.eye(2))


@pytest.mark.parametrize("case", ["1-D lengths, axis 1", "2-D lengths, axis 0",
                                  "2-D lengths, axis 2", "offsets, axis 1",
                                  "2-D lengths, axis -3"])
def test_segment_reduce_wants_axis_last_of_lengths(case):
    """segment_reduce reduces along the last dim of lengths (or offsets) and nowhere else
    (ember reduced along any axis given 1-D lengths)."""
    def call(lib, x):
        kw = {"1-D lengths, axis 1": dict(lengths=lib.tensor([1, 3]), axis=1),
              "2-D lengths, axis 0": dict(lengths=lib.tensor([[1, 2], [3, 0]]), axis=0),
              "2-D lengths, axis 2": dict(lengths=lib.tensor([[1, 2], [0, 3]]), axis=2),
              "offsets, axis 1": dict(offsets=lib.tensor([0, 1, 3]), axis=1),
              "2-D lengths, axis -3": dict(lengths=lib.tensor([[1, 2], [3, 0]]), axis=-3),
              }[case]
        return lib.segment_reduce(x, "sum", **kw)

    assert_same_error(call, lambda lib: lib.arange(24.0).view(2, 3, 4))


@pytest.mark.filterwarnings("ignore::UserWarning")     # sparse CSR is in beta
def test_csr_from_scipy_style_int32_indices_keeps_their_dtype():
    def run(lib):
        csr = lib.sparse_csr_tensor(lib.tensor([0, 1, 3], dtype=lib.int32),
                                    lib.tensor([1, 0, 1], dtype=lib.int32),
                                    lib.tensor([1.0, 2.0, 3.0]))
        return [str(t.dtype).rsplit(".")[-1] for t in (csr.crow_indices(), csr.col_indices(),
                                                      csr.t().ccol_indices())]
    assert run(ember) == run(torch)


def _zeroed_sparse_grads(lib, opt_name):
    emb = lib.nn.Embedding.from_pretrained(lib.arange(8.0).view(4, 2), freeze=False,
                                           sparse=True)
    opt = getattr(lib.optim, opt_name)(emb.parameters(), lr=0.1)
    seen = []
    for idx in ([0, 1], [1, 3], [2]):
        opt.zero_grad(set_to_none=False)
        emb(lib.tensor(idx)).pow(2).sum().backward()
        g = emb.weight.grad
        seen.append((g._nnz(), g.to_dense().tolist()))
        opt.step()
    opt.zero_grad(set_to_none=False)
    g = emb.weight.grad
    return seen, (g._nnz(), g.is_coalesced(), g.to_dense().tolist()), emb.weight.tolist()


@pytest.mark.parametrize("opt_name", ["SGD", "SparseAdam", "Adagrad"])
def test_optimizer_zero_grad_empties_sparse_gradients(opt_name):
    """zero_grad(set_to_none=False) empties a sparse gradient (nnz 0) as torch's does (ember
    wrote zeros into the dense storage a sparse tensor lacks, leaving the gradient as it was,
    so it kept accumulating)."""
    assert _zeroed_sparse_grads(ember, opt_name) == _zeroed_sparse_grads(torch, opt_name)
