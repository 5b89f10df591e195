"""``fill_``, ``zero_`` and the resizes on sparse tensors against torch's: fill_ keeps a
compressed tensor's indices (refusing COO tensors and tensor values), zero_ drops them in every
layout, batched compressed tensors included; sparse_resize_ (and resize_as_) grows a COO
tensor, resize_ a CSR one."""

import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DENSE = [[0.0, 1.0, 0.0, 2.0], [3.0, 0.0, 0.0, 4.0], [0.0, 0.0, 0.0, 0.0], [5.0, 6.0, 0.0, 0.0]]
LAYOUTS = {
    "coo": lambda x: x.to_sparse(),
    "csr": lambda x: x.to_sparse_csr(),
    "csc": lambda x: x.to_sparse_csc(),
    "bsr": lambda x: x.to_sparse_bsr((2, 2)),
    "bsc": lambda x: x.to_sparse_bsc((2, 2)),
}
CASES = {
    "fill_ 0": lambda lib, s: s.fill_(0),
    "fill_ 2.5": lambda lib, s: s.fill_(2.5),
    "fill_ tensor": lambda lib, s: s.fill_(lib.tensor(0.0)),
    "zero_": lambda lib, s: s.zero_(),
    "top-level zero_": lambda lib, s: lib.zero_(s),
}


@pytest.fixture(autouse=True)
def quiet_torch():
    with warnings.catch_warnings():             # torch warns that these layouts are beta
        warnings.simplefilter("ignore", UserWarning)
        yield


def parts(s):
    """The stored parts of a sparse tensor, as lists."""
    if s.layout in (torch.sparse_coo, ember.sparse_coo):
        return s._nnz(), s._indices().tolist(), s._values().tolist()
    if s.layout in (torch.sparse_csr, torch.sparse_bsr, ember.sparse_csr, ember.sparse_bsr):
        return s._nnz(), s.crow_indices().tolist(), s.col_indices().tolist(), s.values().tolist()
    return s._nnz(), s.ccol_indices().tolist(), s.row_indices().tolist(), s.values().tolist()


def outcome(lib, layout, case, batched=False):
    """The parts ``case`` leaves in the ``layout`` form of DENSE, or its error's type and
    first sentence."""
    x = lib.tensor(DENSE)
    s = LAYOUTS[layout](lib.stack([x, 2 * x]) if batched else x)
    try:
        out = case(lib, s)
    except (RuntimeError, NotImplementedError) as e:
        return type(e).__name__, str(e).split(". This could")[0].rstrip(".")
    assert out is s
    return parts(s)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", CASES)
def test_fill_and_zero_leave_the_parts_torch_leaves(name, layout):
    assert outcome(ember, layout, CASES[name]) == outcome(torch, layout, CASES[name])


@pytest.mark.parametrize("layout", ["csr", "bsc"])
@pytest.mark.parametrize("name", ["fill_ 0", "fill_ 2.5", "zero_"])
def test_fill_and_zero_of_batched_compressed_tensors_match_torch(name, layout):
    mine = outcome(ember, layout, CASES[name], batched=True)
    assert mine == outcome(torch, layout, CASES[name], batched=True)


HYBRID = [[0.0, 1.0], [3.0, 0.0]]
RESIZES = {
    "grow": lambda lib, s: s.sparse_resize_((4, 5), 2, 0),
    "shrink": lambda lib, s: s.sparse_resize_((1, 1), 2, 0),
    "fewer sparse dims": lambda lib, s: s.sparse_resize_((2, 2), 1, 1),
    "wrong dim count": lambda lib, s: s.sparse_resize_((2, 2, 1), 1, 1),
    "clear": lambda lib, s: s.sparse_resize_and_clear_((3, 2, 2), 1, 2),
    "empty, any dims": lambda lib, s: s.sparse_resize_and_clear_((2, 2), 2, 0)
                                       .sparse_resize_((2, 3, 4), 1, 2),
    "resize_as_ coo": lambda lib, s: s.resize_as_(lib.zeros(3, 4).to_sparse()),
    "top-level resize_as_": lambda lib, s: lib.resize_as_(s, lib.zeros(3, 4).to_sparse()),
    "resize_as_ dense": lambda lib, s: s.resize_as_(lib.zeros(3, 4)),
    "resize_": lambda lib, s: s.resize_(3, 4),
}


@pytest.mark.parametrize("name", RESIZES)
def test_coo_resizes_match_torch(name):
    def run(lib):
        s = lib.tensor(DENSE[:2]).to_sparse()
        try:
            out = RESIZES[name](lib, s)
        except (RuntimeError, NotImplementedError) as e:
            return type(e).__name__, str(e).split(". This could")[0].rstrip(".").replace(
                "torch.", "ember.")
        assert out is s
        return tuple(s.shape), s.sparse_dim(), s.dense_dim(), parts(s)
    assert run(ember) == run(torch)


def test_non_empty_hybrid_coo_grows_its_dense_dims_but_keeps_their_number():
    def run(lib):
        s = lib.tensor(HYBRID).to_sparse(1).sparse_resize_((3, 2), 1, 1)
        with pytest.raises(RuntimeError) as shrinking:
            s.sparse_resize_((3, 1), 1, 1)
        with pytest.raises(RuntimeError) as more_dims:
            s.sparse_resize_((3, 2, 1), 1, 2)
        messages = [str(e.value).replace("torch.", "ember.") for e in (shrinking, more_dims)]
        return tuple(s.shape), parts(s), messages
    assert run(ember) == run(torch)


@pytest.mark.parametrize("size", [(4, 5), (6, 4), (2, 4), (1, 4), (0, 4), (2, 3)])
def test_csr_resize_matches_torch(size):
    def run(lib):
        s = lib.tensor(DENSE).to_sparse_csr()
        try:
            s.resize_(*size)
        except RuntimeError as e:
            return str(e)
        return tuple(s.shape), parts(s)
    assert run(ember) == run(torch)
