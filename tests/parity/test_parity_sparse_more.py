"""Sparse tensors against torch's: zeros_like/empty_like, CSR + dense, sparse.sampled_addmm
(values, gradients, errors) and indexing with ints, ':', '...' and None."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DENSE = [[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]]
HYBRID = [[[0.0, 1.0], [0.0, 2.0]], [[0.0, 0.0], [3.0, 0.0]]]


@pytest.fixture(autouse=True)
def quiet_torch():
    with warnings.catch_warnings():             # torch warns that CSR support is beta
        warnings.simplefilter("ignore", UserWarning)
        yield


def parts(x):
    """What a tensor holds: its layout's name, shape, dtype name and index/value arrays."""
    name = str(x.layout).rpartition(".")[2]
    if name == "sparse_coo":
        arrays = (x._indices(), x._values())
    elif name == "sparse_csr":
        arrays = (x.crow_indices(), x.col_indices(), x.values())
    else:
        arrays = (x,)
    return (name, tuple(x.shape), str(x.dtype).rpartition(".")[2],
            [a.detach().numpy().tolist() for a in arrays])


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr", "strided"])
@pytest.mark.parametrize("source", ["to_sparse", "to_sparse_csr"])
def test_zeros_like_of_sparse_matches_torch(source, layout):
    e = getattr(ember.tensor(DENSE), source)()
    t = getattr(torch.tensor(DENSE), source)()
    if source == "to_sparse_csr" and layout == "strided":
        with pytest.raises(RuntimeError) as want:
            torch.zeros_like(t, layout=torch.strided)
        with pytest.raises(RuntimeError) as got:
            ember.zeros_like(e, layout=ember.strided)
        assert str(got.value) == str(want.value)
        return
    got = ember.zeros_like(e, layout=getattr(ember, layout), dtype=ember.float64)
    want = torch.zeros_like(t, layout=getattr(torch, layout), dtype=torch.float64)
    assert parts(got) == parts(want)


def test_zeros_and_empty_like_keep_hybrid_dense_dims():
    e, t = ember.tensor(HYBRID).to_sparse(2), torch.tensor(HYBRID).to_sparse(2)
    assert parts(ember.zeros_like(e)) == parts(torch.zeros_like(t))
    empty = ember.empty_like(e, requires_grad=True)
    assert (empty.layout, empty._nnz(), empty.requires_grad, empty.is_leaf) == \
        (ember.sparse_coo, 0, True, True)


def test_csr_plus_dense_is_dense_as_in_torch():
    e, t = ember.tensor(DENSE).to_sparse_csr(), torch.tensor(DENSE).to_sparse_csr()
    ones_e, ones_t = ember.ones(2, 3, dtype=ember.float64), torch.ones(2, 3, dtype=torch.float64)
    assert parts(ember.add(e, ones_e)) == parts(torch.add(t, ones_t))
    assert parts(e + ember.ones(2, 3)) == parts(t + torch.ones(2, 3))


def test_csr_plus_dense_gradients_match_torch():
    grads = []
    for lib in (ember, torch):
        v = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        c = lib.sparse_csr_tensor(lib.tensor([0, 1, 3]), lib.tensor([1, 0, 2]), v, (2, 3))
        d = lib.ones(2, 3, requires_grad=True)
        (lib.add(c, d, alpha=2) * lib.arange(6.0).reshape(2, 3)).sum().backward()
        grads.append((v.grad.numpy().tolist(), d.grad.numpy().tolist()))
    assert grads[0] == grads[1]


@pytest.mark.parametrize("other", [1, "row"])
def test_csr_plus_mismatched_dense_raises_torch_error(other):
    e, t = ember.tensor(DENSE).to_sparse_csr(), torch.tensor(DENSE).to_sparse_csr()
    oe, ot = (other, other) if other == 1 else (ember.ones(3), torch.ones(3))
    with pytest.raises(RuntimeError) as want:
        torch.add(t, ot)
    with pytest.raises(RuntimeError) as got:
        ember.add(e, oe)
    assert str(got.value) == str(want.value)


def _sampled(lib, beta=0.5, alpha=2.0):
    v = lib.tensor([1.0, 2.0, 4.0], requires_grad=True)
    c = lib.sparse_csr_tensor(lib.tensor([0, 1, 3]), lib.tensor([1, 0, 2]), v, (2, 3))
    m1 = lib.arange(8.0).reshape(2, 4).requires_grad_()
    m2 = (lib.arange(12.0).reshape(4, 3) - 5).requires_grad_()
    out = lib.sparse.sampled_addmm(c, m1, m2, beta=beta, alpha=alpha)
    (out.values() * lib.tensor([1.0, -2.0, 3.0])).sum().backward()
    return parts(out.detach()), [g.numpy().tolist() for g in (v.grad, m1.grad, m2.grad)]


@pytest.mark.parametrize("beta,alpha", [(1.0, 1.0), (0.5, 2.0), (0.0, -1.0)])
def test_sampled_addmm_values_and_gradients_match_torch(beta, alpha):
    assert _sampled(ember, beta, alpha) == _sampled(torch, beta, alpha)


def test_sampled_addmm_gives_a_sparse_leaf_a_csr_gradient():
    grads = []
    for lib in (ember, torch):
        c = lib.tensor([[0.0, 1.0], [1.0, 0.0]]).to_sparse_csr().requires_grad_()
        out = lib.sparse.sampled_addmm(c, lib.ones(2, 3), lib.ones(3, 2), beta=3.0)
        out.to_dense().sum().backward()
        grads.append(parts(c.grad))
    assert grads[0] == grads[1]


@pytest.mark.parametrize("case", ["rows", "inner", "cols", "dtypes", "ints", "vector",
                                  "sparse_mat1"])
def test_sampled_addmm_errors_match_torch(case):
    def args(lib):
        c = lib.tensor([[0.0, 1.0], [1.0, 0.0]]).to_sparse_csr()
        m1, m2 = lib.ones(2, 3), lib.ones(3, 2)
        return {"rows": (c, lib.ones(3, 3), m2), "inner": (c, m1, lib.ones(2, 2)),
                "cols": (c, m1, lib.ones(3, 3)), "dtypes": (c, m1.double(), m2),
                "ints": (c.long(), m1.long(), m2.long()), "vector": (c, lib.ones(3), m2),
                "sparse_mat1": (c, m1.to_sparse_csr(), m2)}[case]
    with pytest.raises(RuntimeError) as want:
        torch.sparse.sampled_addmm(*args(torch))
    with pytest.raises(RuntimeError) as got:
        ember.sparse.sampled_addmm(*args(ember))
    assert str(got.value) == str(want.value)


def test_sampled_addmm_of_coo_input_is_not_implemented():
    c = ember.tensor([[0.0, 1.0], [1.0, 0.0]]).to_sparse()
    with pytest.raises(NotImplementedError, match="'aten::sparse_sampled_addmm' with "
                                                  "arguments from the 'SparseCPU' backend"):
        ember.sparse.sampled_addmm(c, ember.ones(2, 3), ember.ones(3, 2))


@pytest.mark.parametrize("index", [(slice(None), 1), (1, 2), (Ellipsis, 2), (None,),
                                   (None, slice(None), 1, None), (1, Ellipsis), (-1, None)])
def test_indexing_a_coo_tensor_matches_torch(index):
    e, t = ember.tensor(DENSE).to_sparse(), torch.tensor(DENSE).to_sparse()
    assert parts(e[index]) == parts(t[index])


@pytest.mark.parametrize("index", [(slice(None), slice(None), 1), (1, 1, 0), (1, slice(None), 0)])
def test_indexing_a_hybrid_tensor_matches_torch(index):
    e, t = ember.tensor(HYBRID).to_sparse(2), torch.tensor(HYBRID).to_sparse(2)
    assert parts(e[index]) == parts(t[index])


@pytest.mark.parametrize("index,error", [((1, 2, 3), IndexError), ((slice(None), 5), IndexError),
                                         ((0, 3), IndexError), ((None, 0, 3), IndexError),
                                         (1.5, IndexError)])
def test_indexing_errors_match_torch(index, error):
    e, t = ember.tensor(DENSE).to_sparse(), torch.tensor(DENSE).to_sparse()
    with pytest.raises(error) as want:
        t[index]
    with pytest.raises(error) as got:
        e[index]
    assert str(got.value) == str(want.value)


def test_indexing_with_a_slice_is_not_implemented():
    with pytest.raises(NotImplementedError, match="aten::as_strided"):    # as torch's
        ember.tensor(DENSE).to_sparse()[0:1]
    assert np.array_equal(ember.tensor(DENSE).to_sparse()[ember.tensor(1)].to_dense().numpy(),
                          [2.0, 0.0, 3.0])


@pytest.mark.parametrize("dim", [0, 1, -1, (0, 1)])
@pytest.mark.parametrize("source", ["to_sparse", "to_sparse_csr"])
def test_sum_keepdim_matches_torch(source, dim):
    e, t = getattr(ember.tensor(DENSE), source)(), getattr(torch.tensor(DENSE), source)()
    assert parts(e.sum(dim, keepdim=True)) == parts(t.sum(dim, keepdim=True))


@pytest.mark.parametrize("dim", [2, (0, 2), 0])
def test_sum_keepdim_of_a_hybrid_tensor_matches_torch(dim):
    e, t = ember.tensor(HYBRID).to_sparse(2), torch.tensor(HYBRID).to_sparse(2)
    assert parts(e.sum(dim, keepdim=True)) == parts(t.sum(dim, keepdim=True))


@pytest.mark.parametrize("call", ["csr_sum_dim", "repeated_dim"])
def test_sum_errors_match_torch(call):
    def run(lib):
        s = lib.tensor(DENSE).to_sparse()
        return s.to_sparse_csr().sum(0) if call == "csr_sum_dim" else lib.sparse.sum(s, (0, 0))
    with pytest.raises(RuntimeError) as want:
        run(torch)
    with pytest.raises(RuntimeError) as got:
        run(ember)
    assert str(got.value) == str(want.value)


def test_floor_divide_by_a_scalar_matches_torch():
    e = ember.tensor([[0.0, 1.0, 0.0], [-3.0, 0.0, 3.0]]).to_sparse()
    t = torch.tensor([[0.0, 1.0, 0.0], [-3.0, 0.0, 3.0]]).to_sparse()
    assert parts(e // 2) == parts(t // 2)
    assert parts(e.floor_divide_(-2)) == parts(t.floor_divide_(-2))
    with pytest.raises(RuntimeError) as want:
        t // torch.ones(2, 3)
    with pytest.raises(RuntimeError) as got:
        e // ember.ones(2, 3)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_and_stack_of_coo_tensors_match_torch(dim):
    e, t = ember.tensor(DENSE).to_sparse(), torch.tensor(DENSE).to_sparse()
    assert parts(ember.cat([e, e * 2], dim)) == parts(torch.cat([t, t * 2], dim))
    assert parts(ember.stack([e, e], dim)) == parts(torch.stack([t, t], dim))


@pytest.mark.parametrize("dim", [0, 2])
def test_cat_of_hybrid_tensors_pads_the_values_as_torch_does(dim):
    e, t = ember.tensor(HYBRID).to_sparse(2), torch.tensor(HYBRID).to_sparse(2)
    assert parts(ember.cat([e, e, e], dim)) == parts(torch.cat([t, t, t], dim))


@pytest.mark.parametrize("case", ["dense", "shape", "dims"])
def test_cat_errors_match_torch(case):
    def others(lib):
        return {"dense": lib.ones(2, 3), "shape": lib.ones(3, 3).to_sparse(),
                "dims": lib.ones(2, 3).to_sparse(1)}[case]
    with pytest.raises(RuntimeError) as want:
        torch.cat([torch.tensor(DENSE).to_sparse(), others(torch)], 1)
    with pytest.raises(RuntimeError) as got:
        ember.cat([ember.tensor(DENSE).to_sparse(), others(ember)], 1)
    assert str(got.value) == str(want.value)
