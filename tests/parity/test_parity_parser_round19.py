"""Parser messages compared with PyTorch: the functions PyTorch writes in Python name the
native function they call (``_unique2``, ``unique_dim``, ``linalg_vector_norm``) with its
positions; ``linalg``/``special``/``fft`` functions name themselves with their namespace;
``sort``'s ``stable`` and ``unique``'s flags refuse what is not a bool."""

import pytest

import ember
from tests.parity._compare import assert_same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_CALLS = {
    "x.unique(sorted=1)": lambda L, x: x.unique(sorted=1),
    "unique(x, 1)": lambda L, x: L.unique(x, 1),
    "x.unique(True, 1)": lambda L, x: x.unique(True, 1),
    "x.unique(return_counts=1)": lambda L, x: x.unique(return_counts=1),
    "x.unique(1, dim=0)": lambda L, x: x.unique(1, dim=0),
    "unique(x, return_counts=1, dim=0)": lambda L, x: L.unique(x, return_counts=1, dim=0),
    "x.unique(dim='a')": lambda L, x: x.unique(dim="a"),
    "unique(x, dim=1.5)": lambda L, x: L.unique(x, dim=1.5),
    "x.unique_consecutive(1)": lambda L, x: x.unique_consecutive(1),
    "unique_consecutive(x, return_counts=1)":
        lambda L, x: L.unique_consecutive(x, return_counts=1),
    "x.unique_consecutive(dim='a')": lambda L, x: x.unique_consecutive(dim="a"),
    "x.sort(stable=1)": lambda L, x: x.sort(stable=1),
    "x.sort(stable='a')": lambda L, x: x.sort(stable="a"),
    "sort(x, stable=1)": lambda L, x: L.sort(x, stable=1),
    "x.argsort(stable=1)": lambda L, x: x.argsort(stable=1),
    "x.norm(2, 0, 1)": lambda L, x: x.norm(2, 0, 1),
    "x.norm(2, 'a')": lambda L, x: x.norm(2, "a"),
    "x.norm(2, keepdim=1)": lambda L, x: x.norm(2, keepdim=1),
    "x.norm('fro', 0, 1)": lambda L, x: x.norm("fro", 0, 1),
    "norm(x, 2, 0, 1)": lambda L, x: L.norm(x, 2, 0, 1),
    "norm(x, dim='a')": lambda L, x: L.norm(x, dim="a"),
    "linalg.vector_norm(x, dim='a')": lambda L, x: L.linalg.vector_norm(x, dim="a"),
    "linalg.vector_norm(x, 2, 'a')": lambda L, x: L.linalg.vector_norm(x, 2, "a"),
    "linalg.norm(x, 0, keepdim=1)": lambda L, x: L.linalg.norm(x, 0, keepdim=1),
    "linalg.norm(x, 2, 'a')": lambda L, x: L.linalg.norm(x, 2, "a"),
    "linalg.norm(x, dim='a')": lambda L, x: L.linalg.norm(x, dim="a"),
    "linalg.norm(x, 'fro', (0, 1), 1)": lambda L, x: L.linalg.norm(x, "fro", (0, 1), 1),
    "linalg.matrix_norm(x, keepdim=1)": lambda L, x: L.linalg.matrix_norm(x, keepdim=1),
    "linalg.cholesky(x, upper=1)": lambda L, x: L.linalg.cholesky(x, upper=1),
    "special.zeta(x, 'a')": lambda L, x: L.special.zeta(x, "a"),
    "fft.fft(x, n='a')": lambda L, x: L.fft.fft(x, n="a"),
    "linalg.svd(x, 1)": lambda L, x: L.linalg.svd(x, 1),
    "linalg.solve(x, x, left=1)": lambda L, x: L.linalg.solve(x, x, left=1),
    "linalg.lu_factor(x, pivot=1)": lambda L, x: L.linalg.lu_factor(x, pivot=1),
    "linalg.inv_ex(x, check_errors=1)": lambda L, x: L.linalg.inv_ex(x, check_errors=1),
    "linalg.pinv(x, hermitian=1)": lambda L, x: L.linalg.pinv(x, hermitian=1),
    "linalg.pinv(x, 0.1, 1)": lambda L, x: L.linalg.pinv(x, 0.1, 1),
    "linalg.matrix_rank(x, hermitian=1)": lambda L, x: L.linalg.matrix_rank(x, hermitian=1),
    "x.split(1, 'a')": lambda L, x: x.split(1, "a"),
    "x.split(1, dim='a')": lambda L, x: x.split(1, dim="a"),
    "x.split([1, 1], 'a')": lambda L, x: x.split([1, 1], "a"),
    "split(x, [1, 1], True)": lambda L, x: L.split(x, [1, 1], True),
    "x.add('a')": lambda L, x: x.add("a"),
    "x.add_('a')": lambda L, x: x.add_("a"),
    "x.add(other='a')": lambda L, x: x.add(other="a"),
    "add(x, 'a')": lambda L, x: L.add(x, "a"),
    "x.mm(mat2=[0.5])": lambda L, x: x.mm(mat2=[0.5]),
    "x.dot(1.5)": lambda L, x: x.dot(1.5),
    "x.sum(dtype=1)": lambda L, x: x.sum(dtype=1),
    "sum(x, dtype='a')": lambda L, x: L.sum(x, dtype="a"),
    "x.softmax(0, 1)": lambda L, x: x.softmax(0, 1),
    "softmax(x, 0, 1)": lambda L, x: L.softmax(x, 0, 1),
    "x.norm(dtype=1)": lambda L, x: x.norm(dtype=1),
    "x.nansum(dtype=1)": lambda L, x: x.nansum(dtype=1),
    "cumsum(x, 0, dtype=1)": lambda L, x: L.cumsum(x, 0, dtype=1),
    "linalg.vector_norm(x, dtype=1)": lambda L, x: L.linalg.vector_norm(x, dtype=1),
}


def _matrix(lib):
    return lib.arange(6.).reshape(2, 3)


@pytest.mark.parametrize("name", list(_CALLS))
def test_parser_messages_are_torch_s(name):
    assert_same_error(_CALLS[name], _matrix)


def test_valid_calls_still_work():
    x = ember.tensor([[3.0, 1.0, 3.0], [0.0, 4.0, 0.0]])
    assert x.sort(stable=True).values.tolist() == [[1.0, 3.0, 3.0], [0.0, 0.0, 4.0]]
    assert ember.sort(x, 0, True, stable=None).values.tolist() == [[3.0, 4.0, 3.0],
                                                                     [0.0, 1.0, 0.0]]
    values, inverse, counts = x.unique(True, True, True)
    assert values.tolist() == [0.0, 1.0, 3.0, 4.0] and counts.tolist() == [2, 1, 2, 1]
    assert inverse.tolist() == [[2, 1, 2], [0, 3, 0]]
    assert ember.unique_consecutive(x[0], return_counts=True)[1].tolist() == [1, 1, 1]
    assert x.norm(2, 0, True)[0].tolist() == pytest.approx([3.0, 4.1231055, 3.0])
    assert x.sum(dtype=ember.float64).dtype == ember.float64
    assert [p.tolist() for p in x.split([1, 1], 0)] == [[[3.0, 1.0, 3.0]], [[0.0, 4.0, 0.0]]]
