"""Against torch: which sparse graphs a backward frees (a second backward raises, or runs),
and the errors of forward AD (``func.jvp``, ``jacfwd``) through sparse constructors,
conversions and products."""

import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

IDX = [[0, 1, 1], [2, 0, 2]]
DENSE = [[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]]
X = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():             # torch warns that CSR support is beta
        warnings.simplefilter("ignore", UserWarning)
        yield


def coo(lib, v, coalesced=None):
    return lib.sparse_coo_tensor(lib.tensor(IDX), v, (2, 3), is_coalesced=coalesced)


def csr(lib, v):
    return lib.sparse_csr_tensor(lib.tensor([0, 1, 3]), lib.tensor([2, 0, 2]), v, (2, 3))


def leaf(lib):
    return lib.tensor(DENSE).to_sparse().requires_grad_()


GRAPHS = {
    "sparse.mm": lambda lib, v: lib.sparse.mm(coo(lib, v), lib.tensor(X)).sum(),
    "mm": lambda lib, v: lib.mm(coo(lib, v), lib.tensor(X)).sum(),
    "matmul": lambda lib, v: (coo(lib, v) @ lib.tensor(X)).sum(),
    "addmm": lambda lib, v: lib.addmm(lib.zeros(2, 2), coo(lib, v), lib.tensor(X)).sum(),
    "sparse.addmm": lambda lib, v: lib.sparse.addmm(lib.zeros(2, 2), coo(lib, v),
                                                    lib.tensor(X)).sum(),
    "mv": lambda lib, v: lib.mv(coo(lib, v), lib.tensor([1.0, 2.0, 3.0])).sum(),
    "to_dense": lambda lib, v: coo(lib, v).to_dense().sum(),
    "sparse.sum": lambda lib, v: lib.sparse.sum(coo(lib, v)),
    "sparse.sum coalesced": lambda lib, v: lib.sparse.sum(coo(lib, v, True)),
    "Tensor.sum": lambda lib, v: coo(lib, v).sum(),
    "values": lambda lib, v: coo(lib, v, True).values().sum(),
    "csr.values": lambda lib, v: csr(lib, v).values().sum(),
    "csr.sum": lambda lib, v: csr(lib, v).sum(),
    "csr.mm": lambda lib, v: lib.mm(csr(lib, v), lib.tensor(X)).sum(),
    "to_sparse.mm": lambda lib, v: lib.sparse.mm(v.reshape(1, 3).to_sparse(),
                                                 lib.tensor(X)).sum(),
    "leaf sparse.sum": lambda lib, v: lib.sparse.sum(leaf(lib)),
    "leaf Tensor.sum": lambda lib, v: leaf(lib).sum(),
    "leaf values": lambda lib, v: leaf(lib).values().sum(),
    "leaf sparse.sum dim": lambda lib, v: lib.sparse.sum(leaf(lib), 1).to_dense().sum(),
    "leaf mm": lambda lib, v: lib.mm(leaf(lib), lib.tensor(X)).sum(),
}


def _second_backward(lib, name):
    v = lib.tensor([3.0, 4.0, 5.0], requires_grad=True)
    out = GRAPHS[name](lib, v)
    out.backward()
    try:
        out.backward()
    except RuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_second_backward_raises_where_torchs_does(name):
    expected = _second_backward(torch, name)
    got = _second_backward(ember, name)
    assert (got is None) == (expected is None), (got, expected)
    if expected is not None:
        assert got.startswith("Trying to backward through the graph a second time")
        assert got.split(".")[0] == expected.split(".")[0]


def _first_line(lib, f, x):
    try:
        lib.func.jvp(lambda y: f(lib, y), (x,), (lib.ones_like(x),))
    except Exception as e:
        # torch's dispatcher errors go on to list its backends: their first sentence
        return type(e).__name__, str(e).split("\n")[0].split(" This could be")[0]
    return None


PRODUCTS = {
    "sparse.mm": lambda lib, y: lib.sparse.mm(lib.tensor(DENSE).to_sparse(), y),
    "sparse.addmm": lambda lib, y: lib.sparse.addmm(lib.zeros(2, 2),
                                                    lib.tensor(DENSE).to_sparse(), y),
    "mm": lambda lib, y: lib.mm(lib.tensor(DENSE).to_sparse(), y),
    "matmul": lambda lib, y: lib.matmul(lib.tensor(DENSE).to_sparse(), y),
    "addmm": lambda lib, y: lib.addmm(lib.zeros(2, 2), lib.tensor(DENSE).to_sparse(), y),
    "mv": lambda lib, y: lib.mv(lib.tensor(DENSE).to_sparse(), y[:, 0]),
    "dense @ coo": lambda lib, y: lib.mm(y.t(), lib.tensor(DENSE).to_sparse().t()),
    "linear": lambda lib, y: lib.nn.functional.linear(y.t(), lib.tensor(DENSE).to_sparse()),
    "mm csr": lambda lib, y: lib.mm(lib.tensor(DENSE).to_sparse_csr(), y),
    "matmul csr": lambda lib, y: lib.matmul(lib.tensor(DENSE).to_sparse_csr(), y),
    "sparse.mm csr": lambda lib, y: lib.sparse.mm(lib.tensor(DENSE).to_sparse_csr(), y),
    "sparse.addmm csr": lambda lib, y: lib.sparse.addmm(lib.zeros(2, 2),
                                                        lib.tensor(DENSE).to_sparse_csr(), y),
    "mv csr": lambda lib, y: lib.mv(lib.tensor(DENSE).to_sparse_csr(), y[:, 0]),
    "mm csc": lambda lib, y: lib.mm(lib.tensor(DENSE).to_sparse_csc(), y),
    "mm bsr": lambda lib, y: lib.mm(lib.tensor(DENSE).to_sparse_bsr((1, 1)), y),
    "sparse.mm coo by to_sparse": lambda lib, y: lib.sparse.mm(lib.tensor(DENSE).to_sparse(),
                                                              y.to_sparse()),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_forward_ad_through_sparse_products_refuses_as_torch(name):
    expected = _first_line(torch, PRODUCTS[name], torch.tensor(X))
    assert expected is not None
    assert _first_line(ember, PRODUCTS[name], ember.tensor(X)) == expected


CONSTRUCTORS = {
    "sparse_coo_tensor": lambda lib, v: coo(lib, v).to_dense(),
    "sparse_coo_tensor mm": lambda lib, v: lib.mm(coo(lib, v), lib.tensor(X)),
    "sparse_csr_tensor": lambda lib, v: csr(lib, v).to_dense(),
    "to_sparse": lambda lib, v: v.reshape(1, 3).to_sparse().to_dense(),
    "to_sparse(layout=csr)": lambda lib, v: v.reshape(1, 3).to_sparse(
        layout=lib.sparse_csr).to_dense(),
    "to_sparse_csr": lambda lib, v: v.reshape(1, 3).to_sparse_csr().to_dense(),
    "to_sparse_csc": lambda lib, v: v.reshape(1, 3).to_sparse_csc().to_dense(),
    "to_sparse_bsr": lambda lib, v: v.reshape(1, 3).to_sparse_bsr((1, 1)).to_dense(),
}


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_forward_ad_through_sparse_constructors_refuses_as_torch(name):
    f = CONSTRUCTORS[name]
    expected = _first_line(torch, f, torch.tensor([3.0, 4.0, 5.0]))
    assert expected is not None
    assert _first_line(ember, f, ember.tensor([3.0, 4.0, 5.0])) == expected


def test_jacfwd_through_sparse_products_refuses_as_torch():
    for layout in ("to_sparse", "to_sparse_csr"):
        got = []
        for lib in (torch, ember):
            s = getattr(lib.tensor(DENSE), layout)()
            try:
                lib.func.jacfwd(lambda y: lib.sparse.mm(s, y))(lib.tensor(X))
            except Exception as e:
                got.append((type(e).__name__, str(e).split("\n")[0]))
        assert len(got) == 2 and got[0] == got[1], got
