"""OpInfo entry for ember/ops/einsum.py."""

import numpy as np

import ember
from tests.ops.opdb.core import ALL, ErrorInput, OpInfo, SampleInput, make

# (name, equation, operand shapes, whether a label is summed over two operands (a bmm in
# PyTorch: no bool), whether a label is summed out of one operand (integers become int64))
CASES = (
    ("diagonal", "ii->i", [(3, 3)], False, False),
    ("trace", "ii", [(3, 3)], False, True),
    ("transpose", "ij->ji", [(2, 3)], False, False),
    ("implicit_identity", "ij", [(2, 3)], False, False),
    ("sum_all", "ij->", [(2, 3)], False, True),
    ("sum_rows", " i j -> i ", [(2, 3)], False, True),
    ("outer", "i,j->ij", [(2,), (3,)], False, False),
    ("hadamard", "ij,ij->ij", [(2, 3), (2, 3)], False, False),
    ("scale_by_diagonal", "ii,i->i", [(3, 3), (3,)], False, False),
    ("0dim_operand", ",i->i", [(), (3,)], False, False),
    ("0dim_operands", ",->", [(), ()], False, False),
    ("size1_label_broadcasts", "ij,jk->ik", [(2, 1), (3, 4)], False, True),
    ("ellipsis_summed", "i...->...", [(2, 3, 2)], False, True),
    ("empty_contraction", "ij,jk->ik", [(2, 0), (0, 3)], False, False),
    ("empty_output", "ij->j", [(0, 3)], False, True),
    ("dot", "i,i->", [(4,), (4,)], True, False),
    ("matmul", "ij,jk->ik", [(2, 3), (3, 4)], True, False),
    ("implicit_matmul", "ij,jk", [(2, 3), (3, 2)], True, False),
    ("batch_matmul", "bij,bjk->bik", [(2, 2, 3), (2, 3, 2)], True, False),
    ("ellipsis_broadcast", "...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)], True, False),
    ("implicit_ellipsis", "...ij,...jk", [(3, 2, 3), (3, 2)], True, False),
    ("repeated_and_contracted", "iij,jk->ik", [(2, 2, 3), (3, 2)], True, False),
    ("chain3", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)], True, False),
    ("bilinear", "bn,anm,bm->ba", [(2, 3), (2, 3, 2), (2, 2)], True, False),
    ("chain4", "ab,bc,cd,de->ae", [(2, 5), (5, 4), (4, 3), (3, 1)], True, False),
    ("ring4", "ab,bc,cd,da->", [(2, 2), (2, 3), (3, 2), (2, 2)], True, False),
)
WIDENS = {name for name, _, _, _, widens in CASES if widens}


def _samples(dtype, rg):
    # integers in [-1, 1]: the longest chains stay within int8 (PyTorch wraps like ember)
    low, high = (-3, 3) if dtype.is_floating_point or dtype.is_complex else (-1, 2)
    for name, equation, shapes, contracts, _ in CASES:
        if contracts and dtype is ember.bool:
            continue
        operands = [make(s, dtype, rg, low=low, high=high) for s in shapes]
        yield SampleInput(equation, (operands,), name=name)
    if dtype is not ember.bool:
        a = make((4, 3), dtype, low=-3, high=3).t().detach()
        b = make((4, 2), dtype, rg, low=-3, high=3, noncontiguous=True)
        yield SampleInput("ij,jk->ik", ([a.requires_grad_(b.requires_grad), b],),
                          name="noncontiguous")


def _result_dtype(dtype, sample):
    widen = sample.name in WIDENS and not (dtype.is_floating_point or dtype.is_complex)
    return ember.int64 if widen else dtype


def _ref(equation, operands):
    return np.einsum(equation, *[a.astype(np.int64) if a.dtype.kind in "biu" else a
                                 for a in operands])


def _errors():
    one, f64 = ember.ones, ember.float64

    def err(equation, operands, match, error=RuntimeError):
        return ErrorInput(SampleInput(equation, (operands,)), error, match)
    yield err("ij,jk", [one(2, 3)], "fewer operands were provided than specified in the equation")
    yield err("ij", [one(2, 3), one(3)], "more operands were provided than specified")
    yield err("ij,j1", [one(2, 3)], "fewer operands were provided")
    yield err("i1,jk", [one(2, 3), one(2, 3), one(2)], r"einsum\(\): invalid subscript given at "
              r"index 1 in the equation string, subscripts must be in \[a-zA-Z\]")
    yield err("ij->i->j", [one(2, 3)], "invalid subscript given at index 5")
    yield err("ij-", [one(2, 3)], "invalid subscript given at index 2")
    yield err("ijk,jk", [one(2, 3), one(3, 4)], r"the number of subscripts in the equation \(3\) "
              r"does not match the number of dimensions \(2\) for operand 0 and no ellipsis was "
              r"given")
    yield err("ijk...", [one(2, 3)], r"the number of subscripts in the equation \(3\) is more "
              r"than the number of dimensions \(2\) for operand 0")
    yield err("ijk->1", [one(2, 3)], "does not match the number of dimensions")
    yield err("ij->ik", [one(2, 3)], "output subscript k does not appear in the equation for any "
              "input operand")
    yield err("ij->ii", [one(2, 3)], "output subscript i appears more than once in the output")
    yield err("i..j", [one(2, 3)], "found '.' for operand 0 that is not part of any ellipsis")
    yield err("i.....j", [one(2, 3)], "found '.' for operand 0 for which an ellipsis was already "
              "found")
    yield err("ij->.", [one(2, 3)], r"found '.' for output that is not part of any ellipsis "
              r"\(...\)")
    yield err("...i->......", [one(2, 3)], r"found '.' for output but an ellipsis \(...\) was "
              r"already found")
    yield err("ii", [one(2, 3)], "subscript i is repeated for operand 0 but the sizes don't "
              "match, 3 != 2")
    yield err("ij,jk", [one(2, 3), one(4, 4)], "subscript j has size 4 for operand 1 which does "
              "not broadcast with previously seen size 3")
    yield err("...ij,...jk", [one(2, 2, 2, 3), one(5, 3, 4)], "dimension 0 covered by ellipsis "
              "in operand 1has size 5 which does not broadcast with previously seen ellipsis "
              "with size 2 for the respective dimension")
    yield err("ij,jk", [one(2, 3), one(3, 4, dtype=f64)], "expected scalar type Float but found "
              "Double")
    i32 = ember.int32
    yield err("ij,jk->k", [one(2, 3, dtype=i32), one(3, 4, dtype=i32)],
              "expected scalar type Long but found Int")
    yield err("i,i->", [one(3, dtype=ember.bool), one(3, dtype=ember.bool)],
              "\"bmm\" not implemented for 'Bool'", NotImplementedError)
    yield err("ij,jk", [one(2, 3), 2], "expected Tensor as element 1 in argument 1, but got int",
              TypeError)


OPS = [
    # with three or more operands PyTorch rounds each intermediate to 16 bits; ember rounds
    # once, and may contract in another order
    OpInfo("einsum", _ref, _samples, dtypes=ALL, result_dtype=_result_dtype, gradgrad=True,
           error_inputs=_errors, op=ember.einsum,
           parity_tol={ember.bfloat16: (1.6e-2, 5e-2), ember.float16: (2e-3, 1e-2)}),
]
