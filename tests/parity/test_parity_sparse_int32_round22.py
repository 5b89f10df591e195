"""Compressed sparse tensors (CSR, CSC, BSR, BSC) built from int32 indices, as scipy's
indptr/indices give through from_numpy, keep them as PyTorch's do: through constructors,
conversions between layouts, transposes, elementwise ops, sums, in-place ops and copies;
products, sparse_mask, sampled_addmm and gradients give int64 ones, and COO indices are
always int64. Mixed or other index dtypes, and int32 overflow, raise PyTorch's errors when
invariants are checked."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same_error

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore::UserWarning")]

_CROW, _COL, _VALUES = [0, 1, 3], [1, 0, 1], [1.0, 2.0, 3.0]


def _csr(lib, dtype="int32", requires_grad=False):
    """The 2x2 CSR matrix [[0, 1], [2, 3]] with indices of ``dtype``."""
    index = getattr(lib, dtype)
    return lib.sparse_csr_tensor(lib.tensor(_CROW, dtype=index), lib.tensor(_COL, dtype=index),
                                 lib.tensor(_VALUES), requires_grad=requires_grad)


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _described(lib, t):
    """A tensor's layout, index dtypes and dense values."""
    if t.layout is lib.strided:
        return ("strided", _name(t.dtype), t.tolist())
    layout = str(t.layout).rsplit(".", 1)[-1]
    if t.layout is lib.sparse_coo:
        indices = [_name(t._indices().dtype)]
    elif t.layout in (lib.sparse_csr, lib.sparse_bsr):
        indices = [_name(t.crow_indices().dtype), _name(t.col_indices().dtype)]
    else:
        indices = [_name(t.ccol_indices().dtype), _name(t.row_indices().dtype)]
    return (layout, indices, t.to_dense().tolist())


def _same(make):
    """Assert ``make(lib)`` gives the same layout, index dtypes and values in both."""
    assert _described(ember, make(ember)) == _described(torch, make(torch))


_KEEPING = {
    "crow_indices": lambda lib: _csr(lib).crow_indices(),
    "col_indices": lambda lib: _csr(lib).col_indices(),
    "t": lambda lib: _csr(lib).t(),
    "transpose": lambda lib: _csr(lib).transpose(0, 1),
    "to_sparse_csc": lambda lib: _csr(lib).to_sparse_csc(),
    "csc_to_csr": lambda lib: _csr(lib).to_sparse_csc().to_sparse_csr(),
    "to_sparse_bsr": lambda lib: _csr(lib).to_sparse_bsr(1),
    "to_sparse_bsc": lambda lib: _csr(lib).to_sparse_bsc(1),
    "bsr_to_bsc": lambda lib: _csr(lib).to_sparse_bsr(1).to_sparse_bsc(1),
    "csc_to_bsr": lambda lib: _csr(lib).to_sparse_csc().to_sparse_bsr(1),
    "to_sparse_layout": lambda lib: _csr(lib).to_sparse(layout=lib.sparse_csc),
    "mul_scalar": lambda lib: _csr(lib) * 2,
    "mul_0d": lambda lib: _csr(lib) * lib.tensor(2.0),
    "neg": lambda lib: -_csr(lib),
    "abs": lambda lib: _csr(lib).abs(),
    "relu": lambda lib: lib.relu(_csr(lib)),
    "to_int": lambda lib: _csr(lib).int(),
    "double": lambda lib: _csr(lib).double(),
    "clone": lambda lib: _csr(lib).clone(),
    "detach": lambda lib: _csr(lib).detach(),
    "add": lambda lib: _csr(lib) + _csr(lib),
    "add_alpha": lambda lib: lib.add(_csr(lib), _csr(lib), alpha=2),
    "add_int64_other": lambda lib: _csr(lib) + _csr(lib, "int64"),     # the first's dtype
    "int64_add_int32": lambda lib: _csr(lib, "int64") + _csr(lib),
    "sum_keepdim": lambda lib: _csr(lib).sum(1, keepdim=True),
    "sum_both_keepdim": lambda lib: _csr(lib).sum((0, 1), keepdim=True),
    "zeros_like": lambda lib: lib.zeros_like(_csr(lib)),
    "crow_indices_copy": lambda lib: lib.crow_indices_copy(_csr(lib)),
    "resize_": lambda lib: _csr(lib).resize_(3, 3),
    "values_rebuilt": lambda lib: lib.sparse_csr_tensor(_csr(lib).crow_indices(),
                                                        _csr(lib).col_indices(),
                                                        _csr(lib).values() * 2),
}


@pytest.mark.parametrize("case", sorted(_KEEPING))
def test_int32_indices_are_kept(case):
    _same(_KEEPING[case])


_INT64 = {
    "to_sparse_coo": lambda lib: _csr(lib).to_sparse_coo(),
    "bsr_to_dense": lambda lib: _csr(lib).to_sparse_bsr(1).to_dense(),
    "dense_to_csr": lambda lib: _csr(lib).to_dense().to_sparse_csr(),
    "mm": lambda lib: lib.mm(_csr(lib), _csr(lib)),
    "matmul_csc": lambda lib: _csr(lib) @ _csr(lib).t(),
    "sparse_mm": lambda lib: lib.sparse.mm(_csr(lib), _csr(lib)),
    "mm_dense": lambda lib: _csr(lib) @ lib.ones(2, 3),
    "csc_mm_dense": lambda lib: _csr(lib).t() @ lib.ones(2, 3),
    "mul_sparse": lambda lib: _csr(lib) * _csr(lib),
    "mul_dense": lambda lib: _csr(lib) * lib.ones(2, 2),
    "sparse_mask": lambda lib: lib.ones(2, 2).sparse_mask(_csr(lib)),
    "sampled_addmm": lambda lib: lib.sparse.sampled_addmm(_csr(lib), lib.ones(2, 2),
                                                          lib.ones(2, 2)),
    "add_dense": lambda lib: lib.ones(2, 2) + _csr(lib),
}


@pytest.mark.parametrize("case", sorted(_INT64))
def test_int32_operands_give_what_torch_gives(case):
    _same(_INT64[case])


def _in_place(lib, own, other, op):
    target = _csr(lib, own)
    source = _csr(lib, other)
    return {"copy_": lambda: target.copy_(source), "add_": lambda: target.add_(source),
            "mul_": lambda: target.mul_(source), "resize_as_": lambda: target.resize_as_(source),
            "sampled_out": lambda: lib.sparse.sampled_addmm(source, lib.ones(2, 2),
                                                            lib.ones(2, 2), out=target),
            "zero_": target.zero_, "fill_": lambda: target.fill_(1.0)}[op]()


@pytest.mark.parametrize("op", ["copy_", "add_", "mul_", "resize_as_", "sampled_out", "zero_",
                                "fill_"])
@pytest.mark.parametrize("own, other", [("int32", "int64"), ("int64", "int32")])
def test_in_place_ops_keep_their_own_index_dtype(op, own, other):
    _same(lambda lib: _in_place(lib, own, other, op))


@pytest.mark.parametrize("layout, block", [("csc", None), ("bsr", (1, 1)), ("bsc", (1, 1))])
def test_every_compressed_constructor_keeps_int32(layout, block):
    def make(lib):
        values = lib.tensor(_VALUES)
        if block:
            values = values.reshape(3, *block)
        make_tensor = getattr(lib, f"sparse_{layout}_tensor")
        return make_tensor(lib.tensor(_CROW, dtype=lib.int32), lib.tensor(_COL, dtype=lib.int32),
                           values)
    _same(make)
    _same(lambda lib: make(lib).t())
    _same(lambda lib: make(lib).to_sparse_coo().coalesce())


def test_compressed_tensor_constructor_and_numpy_int32_indices():
    def make(lib):
        crow = lib.from_numpy(np.array(_CROW, dtype=np.int32))
        col = lib.from_numpy(np.array(_COL, dtype=np.int32))
        return lib.sparse_compressed_tensor(crow, col, lib.tensor(_VALUES), (2, 2),
                                            layout=lib.sparse_csc, dtype=lib.float64)
    _same(make)


def test_batched_int32_indices_are_kept_through_conversions():
    def make(lib):
        return lib.sparse_csr_tensor(lib.tensor([[0, 1, 3], [0, 2, 3]], dtype=lib.int32),
                                     lib.tensor([[1, 0, 1], [0, 1, 1]], dtype=lib.int32),
                                     lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    _same(make)
    _same(lambda lib: make(lib).to_sparse_csc())
    _same(lambda lib: make(lib).to_sparse_coo())


def test_mixed_index_dtypes_are_kept_unchecked():
    def make(lib):
        return lib.sparse_csr_tensor(lib.tensor(_CROW, dtype=lib.int32), lib.tensor(_COL),
                                     lib.tensor(_VALUES), check_invariants=False)
    _same(make)
    _same(lambda lib: make(lib).t())
    _same(lambda lib: make(lib).to_sparse_csc())     # both in the compressed indices' dtype


def test_gradient_of_int32_leaf_has_int64_indices():
    def grad(lib):
        x = _csr(lib, requires_grad=True)
        lib.sparse.mm(x, lib.ones(2, 2)).sum().backward()
        return x.grad
    _same(grad)


def test_save_load_keeps_int32():
    def round_trip(lib):
        buffer = io.BytesIO()
        lib.save(_csr(lib).to_sparse_bsr(1), buffer)
        buffer.seek(0)
        return lib.load(buffer)
    _same(round_trip)


def test_repr_of_int32_indices_shows_no_dtype():
    assert repr(_csr(ember)).replace("ember.", "torch.") == repr(_csr(torch))


def _build(lib, crow_dtype, col_dtype, size=None, layout="csr", check=True):
    crow = lib.tensor(_CROW, dtype=getattr(lib, crow_dtype))
    col = lib.tensor(_COL, dtype=getattr(lib, col_dtype))
    values = lib.tensor(_VALUES)
    if layout.startswith("b"):
        values = values.reshape(3, 1, 1)
    make = getattr(lib, f"sparse_{layout}_tensor")
    sizes = () if size is None else (size,)
    return make(crow, col, values, *sizes, check_invariants=check)


@pytest.mark.parametrize("layout", ["csr", "csc", "bsr", "bsc"])
@pytest.mark.parametrize("crow_dtype, col_dtype", [("int32", "int64"), ("int64", "int32"),
                                                   ("int16", "int16"), ("uint8", "uint8"),
                                                   ("float32", "float32"),
                                                   ("int16", "int32")])
def test_checked_index_dtypes_raise_torchs_errors(layout, crow_dtype, col_dtype):
    assert_same_error(lambda lib, _: _build(lib, crow_dtype, col_dtype, layout=layout),
                      lambda lib: None)


@pytest.mark.parametrize("crow_dtype, col_dtype", [("int32", "float32"), ("int32", "bool"),
                                                   ("float64", "float64")])
def test_size_is_not_inferred_from_non_integer_plain_indices(crow_dtype, col_dtype):
    assert_same_error(lambda lib, _: _build(lib, crow_dtype, col_dtype, check=None),
                      lambda lib: None)


def test_dtype_errors_come_after_shape_errors_and_before_value_errors():
    def bad_length(lib, _):
        return lib.sparse_csr_tensor(lib.tensor([0, 1, 3, 3], dtype=lib.int32),
                                     lib.tensor(_COL), lib.tensor(_VALUES), (2, 2),
                                     check_invariants=True)

    def bad_first(lib, _):
        return lib.sparse_csr_tensor(lib.tensor([1, 1, 3], dtype=lib.int32), lib.tensor(_COL),
                                     lib.tensor(_VALUES), (2, 2), check_invariants=True)
    assert_same_error(bad_length, lambda lib: None)
    assert_same_error(bad_first, lambda lib: None)


_GLOBAL_CHECKS = """
import ember, torch
for lib in (ember, torch):
    with lib.sparse.check_sparse_tensor_invariants():
        try:
            lib.sparse_csr_tensor(lib.tensor([0, 1, 3], dtype=lib.int32), lib.tensor([1, 0, 1]),
                                  lib.tensor([1.0, 2.0, 3.0]), (2, 2))
        except Exception as error:
            print(type(error).__name__, error)
"""


def test_global_invariant_checks_check_index_dtypes():
    # in a fresh interpreter: once a program chooses a setting, torch stops giving its
    # "implicitly disabled" warning for the rest of the process (test_parity_warn_always.py)
    run = subprocess.run([sys.executable, "-c", _GLOBAL_CHECKS], capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    ours, theirs = run.stdout.splitlines()
    assert ours == theirs and ours.startswith("RuntimeError")


@pytest.mark.parametrize("layout, size", [("csr", (2, 2 ** 31)), ("csc", (2 ** 31, 2)),
                                          ("bsr", (2, 2 ** 31)), ("bsc", (2 ** 31, 2))])
def test_int32_overflow_of_the_plain_dimension(layout, size):
    assert_same_error(lambda lib, _: _build(lib, "int32", "int32", size, layout),
                      lambda lib: None)


@pytest.mark.parametrize("check", [True, False])
def test_int32_plain_dimension_at_the_limit_is_taken(check):
    _same(lambda lib: _build(lib, "int32", "int32", (2, 2 ** 31 - 1), check=check)
          .crow_indices())
    # int64 indices take a plain dimension past int32's range
    _same(lambda lib: _build(lib, "int64", "int64", (2, 2 ** 31), check=check).col_indices())
