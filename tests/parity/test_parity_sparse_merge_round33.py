"""Parity: COO sums whose operands are both uncoalesced (PyTorch's CPU kernel merges the two
entry lists in stored order): indices, values bit for bit, nnz and the coalesced flag."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _operand(rng, sizes, dense, n, spread, dtype):
    idx = np.stack([rng.integers(0, max(1, int(s * spread)), n) for s in sizes])
    val = rng.standard_normal((n,) + dense)
    if dtype == "int64":
        val = rng.integers(-9, 9, (n,) + dense)
    elif dtype == "complex64":
        val = val + 1j * rng.standard_normal((n,) + dense)
    return idx, val.astype(dtype)


def _sum(m, op, first, second, sizes, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = m.sparse_coo_tensor(m.tensor(first[0]), m.tensor(first[1]), sizes)
        b = m.sparse_coo_tensor(m.tensor(second[0]), m.tensor(second[1]), sizes)
    if op == "LLt":
        b = a.transpose(0, 1)
    out = (m.sub if op == "sub" else m.add)(a, b, **kwargs)
    return out._indices().numpy(), out._values().numpy(), out._nnz(), out.is_coalesced()


SHAPES = [((7, 7), ()), ((60,), ()), ((4, 3, 5), ()), ((6, 6), (2,)), ((9, 9), (2, 3))]
ROWS = [("add", {}), ("add", {"alpha": 2}), ("sub", {}), ("sub", {"alpha": 2}), ("LLt", {})]
CASES = [(sizes, dense, op, kwargs) for sizes, dense in SHAPES for op, kwargs in ROWS
         if op != "LLt" or len(sizes) == 2]         # L + L.t() needs two sparse dims


@pytest.mark.parametrize("sizes, dense, op, kwargs", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "complex64"])
@pytest.mark.parametrize("n1, n2, spread", [(0, 6, 1.0), (6, 0, 1.0), (2, 2, 1.0),
                                             (30, 25, 0.3), (300, 200, 1.0), (400, 500, 0.4)])
def test_uncoalesced_sums_as_torch(sizes, dense, dtype, op, kwargs, n1, n2, spread):
    rng = np.random.default_rng(n1 * 7 + n2 + len(sizes))
    first = _operand(rng, sizes, dense, n1, spread, dtype)
    second = _operand(rng, sizes, dense, n2, spread, dtype)
    got = _sum(ember, op, first, second, sizes + dense, **kwargs)
    want = _sum(torch, op, first, second, sizes + dense, **kwargs)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].dtype == want[1].dtype and got[1].tobytes() == want[1].tobytes()
    assert got[2:] == want[2:]


@pytest.mark.parametrize("spread", [0.05, 1.0])
def test_large_sum_with_many_duplicates_as_torch(spread):
    # many levels of equal positions in both lists, and L + L.t() of a large matrix
    rng = np.random.default_rng(3)
    sizes = (200, 150)
    first = _operand(rng, sizes, (), 20000, spread, "float64")
    second = _operand(rng, sizes, (), 15000, spread, "float64")
    for op in ("add", "sub"):
        got = _sum(ember, op, first, second, sizes)
        want = _sum(torch, op, first, second, sizes)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1].tobytes() == want[1].tobytes() and got[2:] == want[2:]
    square = _operand(rng, (150, 150), (), 20000, spread, "float32")
    got = _sum(ember, "LLt", square, square, (150, 150))
    want = _sum(torch, "LLt", square, square, (150, 150))
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].tobytes() == want[1].tobytes() and got[2:] == want[2:]
