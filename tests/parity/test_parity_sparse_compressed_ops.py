"""Ops on the compressed layouts (CSR, CSC, BSR, BSC) against torch's: each op computes the
same values where torch computes, and raises torch's error where torch refuses; BSR/BSC
conversions without a dense intermediate; ``sparse_mask`` with a blocked mask."""

import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DENSE = [[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 0.0], [6.0, 0.0, 0.0, 7.0]]
LAYOUTS = {
    "csr": lambda x: x.to_sparse_csr(),
    "csc": lambda x: x.to_sparse_csc(),
    "bsr": lambda x: x.to_sparse_bsr(2),
    "bsc": lambda x: x.to_sparse_bsc(2),
}


@pytest.fixture(autouse=True)
def quiet_torch():
    with warnings.catch_warnings():             # torch warns that these layouts are beta
        warnings.simplefilter("ignore", UserWarning)
        yield


def dense(lib):
    return lib.arange(16.0).reshape(4, 4)


def other(lib, name):
    return LAYOUTS[name](lib.tensor(DENSE))


CASES = {
    "neg": lambda lib, s: -s,
    "sin": lambda lib, s: s.sin(),
    "square": lambda lib, s: s.square(),
    "pow": lambda lib, s: s.pow(2),
    "nan_to_num": lambda lib, s: s.nan_to_num(),
    "div scalar": lambda lib, s: s / 2,
    "floor_divide": lambda lib, s: s // 2,
    "mul scalar": lambda lib, s: s * 2,
    "sub self": lambda lib, s: s - s,
    "dense sub": lambda lib, s: dense(lib) - s,
    "add self": lambda lib, s: s + s,
    "add dense": lambda lib, s: s + dense(lib),
    "dense add": lambda lib, s: dense(lib) + s,
    "dense add_": lambda lib, s: dense(lib).add_(s),
    "add csr": lambda lib, s: s + other(lib, "csr"),
    "add csc": lambda lib, s: s + other(lib, "csc"),
    "add coo": lambda lib, s: s + s.to_sparse(),
    "coo add": lambda lib, s: s.to_sparse() + s,
    "add_ self": lambda lib, s: s.clone().add_(s),
    "mul self": lambda lib, s: s * s,
    "mul dense": lambda lib, s: s * dense(lib),
    "dense mul": lambda lib, s: dense(lib) * s,
    "mul csc": lambda lib, s: s * other(lib, "csc"),
    "mul row": lambda lib, s: s * lib.ones(4),
    "csr mul_": lambda lib, s: other(lib, "csr").mul_(s),
    "coo mul": lambda lib, s: s.to_sparse() * s,
    "mm dense": lambda lib, s: lib.mm(s, dense(lib)),
    "dense mm": lambda lib, s: lib.mm(dense(lib), s),
    "mm self": lambda lib, s: lib.mm(s, s),
    "mm csc": lambda lib, s: lib.mm(s, other(lib, "csc")),
    "mm coo": lambda lib, s: lib.mm(s, s.to_sparse()),
    "coo mm": lambda lib, s: lib.mm(s.to_sparse(), s),
    "addmm self": lambda lib, s: lib.addmm(dense(lib), s, s),
    "addmm csr": lambda lib, s: lib.addmm(dense(lib), s, other(lib, "csr")),
    "addmm csc": lambda lib, s: lib.addmm(dense(lib), s, other(lib, "csc")),
    "mv": lambda lib, s: lib.mv(s, lib.ones(4)),
    "vector @": lambda lib, s: lib.ones(4) @ s,
    "addmv": lambda lib, s: lib.addmv(lib.ones(4), s, lib.arange(4.0), beta=2, alpha=3),
    "neg_": lambda lib, s: s.clone().neg_(),
    "sqrt_": lambda lib, s: s.clone().sqrt_(),
    "square_": lambda lib, s: s.clone().square_(),
    "fill_": lambda lib, s: s.clone().fill_(3),
    "copy_ self": lambda lib, s: s.clone().copy_(s * 2),
    "copy_ csr": lambda lib, s: s.clone().copy_(other(lib, "csr")),
    "copy_ dense": lambda lib, s: s.clone().copy_(dense(lib)),
    "conj": lambda lib, s: s.conj(),
    "angle": lambda lib, s: s.angle(),
    "select col": lambda lib, s: s.select(1, 1),
    "select row": lambda lib, s: s.select(0, 1),
    "exp": lambda lib, s: s.exp(),
    "sigmoid": lambda lib, s: s.sigmoid(),
    "clamp": lambda lib, s: s.clamp(0, 3),
    "eq": lambda lib, s: s == 0,
    "maximum": lambda lib, s: lib.maximum(s, s),
    "dense sub_": lambda lib, s: dense(lib).sub_(s),
}


def outcome(lib, layout, case):
    """What ``case`` gives on the ``layout`` form of DENSE: the result's layout and dense
    values, or the error's type and message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = case(lib, LAYOUTS[layout](lib.tensor(DENSE)))
    except (RuntimeError, NotImplementedError, IndexError) as e:
        # torch's internal asserts are its errors too, but their text is not a spec
        message = str(e).split("\n")[0].replace("torch.", "ember.")
        return type(e).__name__, None if "INTERNAL ASSERT" in message or "MKL" in message \
            or "PyTorch has no kernel" in message else message.split(". This could")[0]
    values = out.to_dense() if out.layout != lib.strided else out
    return str(out.layout).rpartition(".")[2], values.tolist()


def same(mine, theirs):
    if mine[1] is None or theirs[1] is None:
        return mine[0] == theirs[0]
    if isinstance(mine[1], str):
        return mine == theirs or mine[0] == theirs[0] == "NotImplementedError"
    return mine[0] == theirs[0] and torch.allclose(torch.tensor(mine[1]),
                                                   torch.tensor(theirs[1]))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", CASES)
def test_op_on_compressed_layout_matches_torch(name, layout):
    mine = outcome(ember, layout, CASES[name])
    theirs = outcome(torch, layout, CASES[name])
    assert same(mine, theirs), (mine, theirs)


# ----- BSR <-> BSC -------------------------------------------------------------------------

def blocked_parts(x):
    if x.layout in (torch.sparse_bsr, ember.sparse_bsr):
        arrays = (x.crow_indices(), x.col_indices(), x.values())
    else:
        arrays = (x.ccol_indices(), x.row_indices(), x.values())
    return str(x.layout).rpartition(".")[2], tuple(x.shape), [a.tolist() for a in arrays]


def with_zero_block(lib, layout):
    """A 4x4 BSR or BSC matrix storing an all-zero block first."""
    values = lib.tensor([[[0.0, 0.0], [0.0, 0.0]], [[1.0, 2.0], [3.0, 4.0]]])
    make = lib.sparse_bsr_tensor if layout == "bsr" else lib.sparse_bsc_tensor
    return make(lib.tensor([0, 2, 2]), lib.tensor([0, 1]), values, (4, 4))


@pytest.mark.parametrize("source", ["bsr", "bsc"])
@pytest.mark.parametrize("target", ["to_sparse_bsr", "to_sparse_bsc"])
def test_blocked_conversion_keeps_blocks_as_torch(source, target):
    mine = getattr(with_zero_block(ember, source), target)(2)
    theirs = getattr(with_zero_block(torch, source), target)(2)
    assert blocked_parts(mine) == blocked_parts(theirs)


def test_blocked_conversion_does_not_make_the_tensor_dense(monkeypatch):
    n = 10000
    columns = ember.arange(100) * 50
    pointers = ember.searchsorted(columns, ember.arange(n // 2 + 1))
    big = ember.sparse_bsr_tensor(pointers, columns, ember.ones(100, 2, 2), (n, n))

    def refuse(*args, **kwargs):
        raise AssertionError("converted through a dense tensor")
    monkeypatch.setattr(type(big), "to_dense", refuse)
    back = big.to_sparse_bsc(2).to_sparse_bsr(2)
    assert back.col_indices().tolist() == columns.tolist()
    assert back.crow_indices().tolist() == pointers.tolist()


# ----- sparse_mask with a blocked mask -----------------------------------------------------

MASK = [[0.0, 0.0, 1.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 2.0]]


@pytest.mark.parametrize("mask_of", [lambda m: m.to_sparse_bsr(2), lambda m: m.to_sparse_bsc(2),
                                     lambda m: m.to_sparse_bsr((1, 3)),
                                     lambda m: m.to_sparse_bsc((2, 3))])
@pytest.mark.parametrize("self_of", [lambda x: x, lambda x: x.to_sparse()])
def test_sparse_mask_with_blocked_mask_matches_torch(mask_of, self_of):
    results = [self_of(lib.arange(24.0).reshape(4, 6)).sparse_mask(mask_of(lib.tensor(MASK)))
               for lib in (ember, torch)]
    assert blocked_parts(results[0]) == blocked_parts(results[1])


def test_sparse_mask_of_blocked_tensor_with_blocked_mask_raises_as_torch():
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="non-block"):
            lib.arange(24.0).reshape(4, 6).to_sparse_bsr(2).sparse_mask(
                lib.tensor(MASK).to_sparse_bsr(2))


# ----- batch dimensions --------------------------------------------------------------------

def batched_csr(lib):
    return lib.sparse_csr_tensor(lib.tensor([[0, 1, 2], [0, 1, 2]]),
                                 lib.tensor([[1, 0], [2, 0]]),
                                 lib.tensor([[1.0, 2.0], [3.0, 9.0]]), (2, 2, 3))


BATCHED_DENSE = [[[0.0, 0.0, 2.0, 3.0], [0.0, 5.0, 6.0, 0.0], [0.0, 0.0, 0.0, 0.0]],
                 [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 7.0, 8.0], [0.0, 0.0, 0.0, 9.0]]]
BATCHED = {
    "constructed": batched_csr,
    "size inferred": lambda lib: lib.sparse_csr_tensor(
        lib.tensor([[0, 1, 2], [0, 1, 2]]), lib.tensor([[1, 0], [2, 0]]),
        lib.tensor([[1.0, 2.0], [3.0, 9.0]])),
    "bsc constructed": lambda lib: lib.sparse_bsc_tensor(
        lib.tensor([[0, 1], [0, 1]]), lib.tensor([[1], [0]]),
        lib.arange(8.0).reshape(2, 1, 2, 2), (2, 4, 2)),
    "csr to csc": lambda lib: batched_csr(lib).to_sparse_csc(),
    "dense to csr": lambda lib: lib.tensor(BATCHED_DENSE).to_sparse_csr(),
    "dense to csc": lambda lib: lib.tensor(BATCHED_DENSE).to_sparse_csc(),
    "dense to bsr": lambda lib: lib.tensor(BATCHED_DENSE).to_sparse_bsr((1, 2)),
    "dense to bsc": lambda lib: lib.tensor(BATCHED_DENSE).to_sparse_bsc((3, 2)),
    "neg": lambda lib: -batched_csr(lib),
}


@pytest.mark.parametrize("name", BATCHED)
def test_batched_compressed_tensor_matches_torch(name):
    mine, theirs = BATCHED[name](ember), BATCHED[name](torch)
    assert repr(mine).replace("ember.", "torch.") == repr(theirs)
    assert (mine.sparse_dim(), mine.dense_dim(), mine._nnz()) == \
        (theirs.sparse_dim(), theirs.dense_dim(), theirs._nnz())
    assert mine.to_dense().tolist() == theirs.to_dense().tolist()
    assert repr(mine.to_sparse()).replace("ember.", "torch.") == repr(theirs.to_sparse())


@pytest.mark.parametrize("convert", [lambda x: x.to_sparse_csr(),
                                     lambda x: x.to_sparse_bsr((1, 2))])
def test_batches_storing_different_counts_raise_as_torch(convert):
    for lib in (ember, torch):
        uneven = lib.tensor(BATCHED_DENSE)
        uneven[1, 2, 0] = 4.0
        with pytest.raises(RuntimeError, match="same number of specified elements per batch"):
            convert(uneven)


def test_batched_csr_to_bsr_raises_as_torch():
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="for batched inputs is not supported"):
            batched_csr(lib).to_sparse_bsr(1)


def test_batched_invariants_are_checked_per_batch():
    with pytest.raises(RuntimeError, match=r"crow_indices\[..., -1\] == nnz"):
        ember.sparse_csr_tensor(ember.tensor([[0, 1, 2], [0, 1, 1]]),
                                ember.tensor([[1, 0], [2, 0]]), ember.ones(2, 2))


def test_ops_without_batch_support_refuse_batched_tensors():
    with pytest.raises(NotImplementedError, match="batched"):
        ember.mm(ember.ones(2, 3), batched_csr(ember))
    for lib in (torch, ember):      # (PyTorch's own error, before ember's refusal)
        with pytest.raises(RuntimeError, match="mat1 must be a matrix, got 3-D tensor"):
            lib.mm(batched_csr(lib), lib.ones(3, 2))
    assert float(batched_csr(ember).sum()) == float(batched_csr(torch).sum())


def _csr_times_coo(lib):
    a, b = lib.tensor([[0., 2], [3, 0]]), lib.tensor([[1., 0], [5, 6]])
    return (a.to_sparse_csr() * b.to_sparse()).to_dense()


def _csr_times_coo_in_place(lib):
    a, b = lib.tensor([[0., 2], [3, 0]]), lib.tensor([[1., 0], [5, 6]])
    return a.to_sparse_csr().mul_(b.to_sparse()).to_dense()


def _integer_sqrt_in_place(lib):
    return lib.tensor([[1, 0], [0, 4]]).to_sparse().sqrt_()


def _three_dim_coo_to_csr(lib):
    return lib.arange(1., 25).reshape(2, 3, 4).to_sparse().to_sparse_csr()


def _copy_between_shapes(lib):
    a, b = lib.zeros(2, 3), lib.zeros(3, 2)
    a[0, 1], b[1, 0] = 1, 2
    return a.to_sparse_csr().copy_(b.to_sparse_csr())


def _coo_copy_resizes(lib):
    s = lib.tensor([[0., 1, 0], [2, 0, 0]]).to_sparse()
    s.copy_(lib.eye(3).to_sparse())
    return s.to_dense()


def _copy_keeps_the_graph(lib):
    x = lib.tensor([[0., 2], [3, 0]], requires_grad=True)
    s = lib.zeros(2, 2).to_sparse()
    s.copy_(x.to_sparse())
    s.to_dense().sum().backward()
    return x.grad


@pytest.mark.parametrize("program", [_csr_times_coo, _csr_times_coo_in_place,
                                     _integer_sqrt_in_place, _three_dim_coo_to_csr,
                                     _copy_between_shapes, _coo_copy_resizes,
                                     _copy_keeps_the_graph])
def test_review_round_18_cases_match_torch(program):
    outcomes = []
    for lib in (ember, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                outcomes.append(program(lib).tolist())
            except RuntimeError as e:
                outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]
