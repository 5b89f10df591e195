"""OpInfo entries for ember/ops/contractions.py: tensordot, inner, vdot, kron, linalg.vecdot,
linalg.multi_dot, chain_matmul."""

import functools
import warnings

import numpy as np

import ember
from ember.ops.contractions import _CHAIN_WARNING
from tests.ops.opdb.core import (ALL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, make)

PRODUCT_DTYPES = FLOATS + LOW + INTS + COMPLEX        # no bool: PyTorch has no bool GEMM


def _t(shape, dtype, rg, **kw):
    return make(shape, dtype, rg, low=-3, high=3, **kw)


def _transposed(shape, dtype, rg):
    t = make(shape[::-1], dtype, low=-3, high=3).t().detach()
    return t.requires_grad_(rg and (dtype.is_floating_point or dtype.is_complex))


def _pairs(cases, dtype, rg):
    """Samples of a two-operand product from (shape a, shape b, kwargs) triples."""
    for sa, sb, kwargs in cases:
        yield SampleInput(_t(sa, dtype, rg), (_t(sb, dtype, rg),), dict(kwargs),
                          name=f"{list(sa)}x{list(sb)}{''.join(f'_{v}' for v in kwargs.values())}")


def _err(a, b, error, match, **kwargs):
    return ErrorInput(SampleInput(a, (b,), kwargs), error, match)


# --- tensordot --------------------------------------------------------------------------------

def _tensordot_samples(dtype, rg):
    yield from _pairs((((2, 3, 4), (3, 4, 2), {}), ((2, 3), (3, 4), {"dims": 1}),
                       ((2,), (3,), {"dims": 0}), ((), (3,), {"dims": 0}),
                       ((2, 3, 4), (3, 2, 2), {"dims": ([1, 0], [0, 1])}),
                       ((2, 3, 4), (4, 2), {"dims": [[-1], [0]]}),
                       ((2, 3), (2, 3), {"dims": 2}), ((2, 0), (0, 3), {"dims": 1}),
                       ((0, 3), (3, 2), {"dims": 1}),
                       # a contracted size-1 dim broadcasts against its partner
                       ((2, 1, 4), (3, 5), {"dims": ([1], [0])}), ((2, 3), (1, 5), {"dims": 1}),
                       ((2, 1, 3), (4, 3, 2), {"dims": ([1, 2], [0, 1])}),
                       ((2, 1), (0, 3), {"dims": 1})), dtype, rg)
    yield SampleInput(_t((2, 3), dtype, rg), (_t((3, 2), dtype, rg),),
                      {"dims": ember.tensor([[1], [0]])}, name="dims_tensor")
    yield SampleInput(_t((2, 3), dtype, rg), (_t((3, 2), dtype, rg),),
                      {"dims": ember.tensor(1)}, name="dims_0dim_tensor")
    yield SampleInput(_t((3, 4), dtype, rg, noncontiguous=True), (_transposed((4, 2), dtype, rg),),
                      {"dims": 1}, name="noncontiguous")


def _tensordot_ref(a, b, dims=2):
    if np.ndim(dims) == 0:
        dims = (list(range(a.ndim - int(dims), a.ndim)), list(range(int(dims))))
    full_a, full_b = list(a.shape), list(b.shape)
    for da, db in zip(*dims):                   # size 1 against n: broadcast to n
        full_a[da] = full_b[db] = a.shape[da] if b.shape[db] == 1 else b.shape[db]
    return np.tensordot(np.broadcast_to(a, full_a), np.broadcast_to(b, full_b), axes=dims)


def _tensordot_errors():
    one = ember.ones
    a, b = one(2, 3, 4), one(3, 2, 5)
    yield _err(one(2, 3, 4), one(4, 5), RuntimeError,
               "tensordot expects dims < ndim_a or ndim_b, but got dims=3", dims=3)
    yield _err(one(2, 3, 4), one(4, 5), RuntimeError,
               "tensordot expects dims >= 0, but got dims=-1", dims=-1)
    yield _err(a, b, RuntimeError, "both dimension lists should have same length",
               dims=([0, 1], [1]))
    yield _err(a, b, RuntimeError, "dim 0 appears multiple times in the list of dims",
               dims=([0, 0], [1, 1]))
    yield _err(a, b, RuntimeError, "contracted dimensions need to match, but first has size 2 "
               "in dim 0 and second has size 3 in dim 0", dims=([0], [0]))
    yield _err(one(2, 3), one(3, 2), RuntimeError, "contracted dimensions need to match, but "
               "first has size 2 in dim -2 and second has size 3 in dim 0")
    yield _err(a, b, IndexError, r"Dimension out of range \(expected to be in range of "
               r"\[-3, 2\], but got 5\)", dims=([5], [0]))
    yield _err(a, b, TypeError, r"argument 'dims_self' \(position 3\) must be tuple of ints, "
               r"not int", dims=(0, 1))
    yield _err(a, b, RuntimeError, "tensordot expects dims to be int or "
               r"tuple\[list\[int\], list\[int\]\] or list\[list\[int\]\] containing two lists, "
               "but got dims=1.5", dims=1.5)
    yield _err(a, b, AssertionError, "dims tensor must have size 2 in first dimension, got 3",
               dims=ember.tensor([[1, 0], [0, 1], [1, 1]]))
    yield _err(one(2, 3), one(3, 2, dtype=ember.float64), RuntimeError,
               "both inputs should have same dtype", dims=1)
    b1 = one(3, dtype=ember.bool)
    yield _err(b1, b1, NotImplementedError, "\"dot\" not implemented for 'Bool'", dims=1)
    yield _err(one(2, 3, dtype=ember.bool), b1, NotImplementedError,
               "\"addmm_impl_cpu_\" not implemented for 'Bool'", dims=1)


# --- inner, vdot, vecdot ----------------------------------------------------------------------

def _inner_samples(dtype, rg):
    yield from _pairs((((3,), (3,), {}), ((2, 3), (4, 3), {}), ((2, 3), (3,), {}),
                       ((3,), (2, 2, 3), {}), ((), (2, 3), {}), ((2, 3), (), {}),
                       ((0, 3), (2, 3), {}), ((2, 0), (3, 0), {})), dtype, rg)
    yield SampleInput(_t((3, 2), dtype, rg, noncontiguous=True), (_transposed((4, 2), dtype, rg),),
                      name="noncontiguous")


def _inner_ref(a, b):
    return a * b if a.ndim == 0 or b.ndim == 0 else np.inner(a, b)


def _inner_errors():
    one = ember.ones
    yield _err(one(2, 3), one(4), RuntimeError, r"inner\(\) the last dimension must match on "
               r"both input tensors but got shapes \[2, 3\] and \[4\]")
    yield _err(one(2, 3), one(4, dtype=ember.float64), RuntimeError,
               "the last dimension must match")
    yield _err(one(2, 3, dtype=ember.int64), one(2, 3), RuntimeError,
               "both inputs should have same dtype")
    b = one(3, dtype=ember.bool)
    yield _err(b, b, NotImplementedError, "\"dot\" not implemented for 'Bool'")
    yield _err(b[None], b, NotImplementedError, "\"dot\" not implemented for 'Bool'")
    yield _err(ember.ones(2, 3, dtype=ember.bool), b, NotImplementedError,
               "\"addmm_impl_cpu_\" not implemented for 'Bool'")
    yield _err(one(2, 3), 2.0, TypeError, r"argument 'other' \(position 2\) must be Tensor, not "
               "float")


def _vdot_samples(dtype, rg):
    yield from _pairs((((4,), (4,), {}), ((0,), (0,), {}), ((1,), (1,), {})), dtype, rg)
    yield SampleInput(_t((3,), dtype, rg, noncontiguous=True),
                      (_t((3,), dtype, rg, noncontiguous=True),), name="noncontiguous")


def _vdot_errors():
    one = ember.ones
    yield _err(one(3, 3), one(3), RuntimeError, "1D tensors expected, but got 2D and 1D tensors")
    yield _err(one(()), one(3), RuntimeError, "1D tensors expected, but got 0D and 1D tensors")
    yield _err(one(3), one(4), RuntimeError, r"inconsistent tensor size, expected tensor \[3\] "
               r"and src \[4\] to have the same number of elements, but got 3 and 4 elements "
               r"respectively")
    yield _err(one(3), one(3, dtype=ember.float64), RuntimeError, "dot : expected both vectors "
               "to have same dtype, but found Float and Double")
    b = one(3, dtype=ember.bool)
    yield _err(b, b, NotImplementedError, "\"dot\" not implemented for 'Bool'")


def _vecdot_samples(dtype, rg):
    yield from _pairs((((2, 3), (3,), {}), ((2, 3), (2, 3), {"dim": 0}),
                       ((2, 1, 3), (4, 3), {}), ((3,), (2, 3), {"dim": -2}),
                       ((), (), {}), ((0, 3), (3,), {}), ((3, 0), (0,), {})), dtype, rg)
    yield SampleInput(_t((3, 2), dtype, rg, noncontiguous=True), (_transposed((3, 2), dtype, rg),),
                      {"dim": 0}, name="noncontiguous")


def _vecdot_ref(x, y, dim=-1):
    return (np.conj(x) * y).sum(axis=dim) if np.ndim(x) or np.ndim(y) else np.conj(x) * y


def _vecdot_errors():
    one = ember.ones
    yield _err(one(3), one(3, dtype=ember.float64), RuntimeError, "linalg.vecdot: Expected x "
               "and y to have the same dtype, but found x of type Float and y of type Double "
               "instead")
    yield _err(one(3, dtype=ember.int64), one(3, dtype=ember.int64), RuntimeError,
               "linalg.vecdot: Expected a floating point or complex tensor as input. Got Long")
    # x's own dtype is checked before the pair's
    yield _err(one(3, dtype=ember.int64), one(3), RuntimeError,
               "linalg.vecdot: Expected a floating point or complex tensor as input. Got Long")
    yield _err(one(3), one(3, dtype=ember.int64), RuntimeError, "linalg.vecdot: Expected x "
               "and y to have the same dtype, but found x of type Float and y of type Long")
    yield _err(one(3), one(4), RuntimeError, r"inconsistent tensor size, expected tensor \[3\] "
               r"and src \[4\]")
    yield _err(one(2, 3), one(2, 4), RuntimeError, r"The size of tensor a \(3\) must match the "
               r"size of tensor b \(4\) at non-singleton dimension 1", dim=0)
    yield _err(one(2, 3), one(3), IndexError, r"Dimension out of range \(expected to be in range "
               r"of \[-2, 1\], but got -3\)", dim=-3)
    yield _err(one(3), 2.0, TypeError, r"argument 'y' \(position 2\) must be Tensor, not float")


# --- kron -------------------------------------------------------------------------------------

def _kron_samples(dtype, rg):
    yield from _pairs((((2, 3), (2, 2), {}), ((2, 3), (2,), {}), ((3,), (2, 2), {}),
                       ((), (2, 2), {}), ((2, 1, 2), (1, 2, 2), {}), ((0, 2), (2, 2), {}),
                       ((), (), {})), dtype, rg)
    # (torch's kron fails on a transposed ``other``: a column-sliced one here)
    yield SampleInput(_t((3, 2), dtype, rg, noncontiguous=True),
                      (_t((2, 2), dtype, rg, noncontiguous=True),), name="noncontiguous")
    if dtype is not ember.float64 and not rg:       # a 0-dim operand is not weak: it promotes
        yield SampleInput(_t((2, 2), dtype, rg), (make((), ember.float64),), name="promotes")


def _promoted(dtype, sample):
    return ember.promote_types(sample.input.dtype, sample.args[0].dtype)


def _kron_errors():
    yield _err(ember.ones(2, 3), 2, TypeError, r"argument 'other' \(position 2\) must be Tensor, "
               "not int")


# --- multi_dot, chain_matmul ------------------------------------------------------------------

def _chain_samples(shapes, dtype, rg):
    return [_t(s, dtype, rg) for s in shapes]


MULTI_DOT_SHAPES = ([(2, 3), (3, 4)], [(2, 3), (3, 4), (4, 2)], [(3,), (3, 4), (4,)],
                    [(3,), (3, 4), (4, 2)], [(2, 3), (3,)], [(3,), (3,)],
                    [(4, 1), (1, 3), (3, 2), (2, 3)], [(2, 0), (0, 3)], [(3,), (3, 0), (0,)])


def _multi_dot_samples(dtype, rg):
    for shapes in MULTI_DOT_SHAPES:
        yield SampleInput(_chain_samples(shapes, dtype, rg), name=str(shapes))
    yield SampleInput([_t((2, 3), dtype, rg, noncontiguous=True), _transposed((3, 2), dtype, rg),
                       _t((2, 2), dtype, rg)], name="noncontiguous")


def _multi_dot_ref(tensors):
    return np.linalg.multi_dot(tensors)


def _multi_dot_errors():
    one, f64 = ember.ones, ember.float64

    def err(tensors, error, match):
        return ErrorInput(SampleInput(tensors), error, match)
    yield err([one(2, 3)], RuntimeError, "multi_dot\\(\\): expected at least 2 tensors but got 1")
    yield err([one(2, 3, 4), one(4, 4)], RuntimeError, "multi_dot\\(\\): the first tensor must "
              "be 1D or 2D but got 3D")
    yield err([one(2, 3), one(3, 4, 4)], RuntimeError, "the last tensor must be 1D or 2D but "
              "got 3D")
    yield err([one(2, 3), one(3), one(3, 2)], RuntimeError, "multi_dot\\(\\): tensor 1 must be "
              "2D but got 1D")
    yield err([one(2, 3), one(3, 4, dtype=f64)], RuntimeError, "multi_dot\\(\\): all tensors "
              "must have be the same dtype but tensor 0 is float and tensor 1 double")
    yield err([one(2, 3), one(3, 4), one(5, 6)], RuntimeError, r"multi_dot\(\): tensors 1 and 2 "
              r"with shapes \[3, 4\] and \[5, 6\] cannot be multiplied")
    b = one(2, 2, dtype=ember.bool)
    yield err([b, b], NotImplementedError, "\"addmm_impl_cpu_\" not implemented for 'Bool'")
    yield err(one(2, 3), TypeError, "argument 'tensors' (\\(position 1\\) )?must be tuple of "
              "Tensors, not Tensor")


def _chain_matmul_samples(dtype, rg):
    for shapes in ([(2, 3), (3, 4)], [(2, 3), (3, 4), (4, 2)], [(4, 1), (1, 3), (3, 2), (2, 3)],
                   [(2, 3)], [(2, 0), (0, 3)]):
        matrices = _chain_samples(shapes, dtype, rg)
        yield SampleInput(matrices[0], tuple(matrices[1:]), name=str(shapes))


def _chain_matmul_torch(*matrices):
    # torch warns once per process (TORCH_WARN_ONCE); ember warns on every call, as here
    if len(matrices) > 1:
        warnings.warn(_CHAIN_WARNING, UserWarning)
    return functools.reduce(lambda a, b: a.mm(b), matrices[1:], matrices[0].clone())


CHAIN_TOL = {ember.float16: (4e-3, 1e-2), ember.bfloat16: (3e-2, 5e-2)}

OPS = [
    OpInfo("tensordot", _tensordot_ref, _tensordot_samples, dtypes=PRODUCT_DTYPES,
           gradgrad=True, error_inputs=_tensordot_errors),
    OpInfo("inner", _inner_ref, _inner_samples, dtypes=PRODUCT_DTYPES, gradgrad=True,
           error_inputs=_inner_errors),
    OpInfo("vdot", lambda a, b: np.vdot(a, b), _vdot_samples, dtypes=PRODUCT_DTYPES,
           gradgrad=True, error_inputs=_vdot_errors),
    OpInfo("linalg.vecdot", _vecdot_ref, _vecdot_samples, dtypes=FLOATS + LOW + COMPLEX,
           gradgrad=True, error_inputs=_vecdot_errors),
    OpInfo("kron", np.kron, _kron_samples, dtypes=ALL, gradgrad=True, result_dtype=_promoted,
           error_inputs=_kron_errors),
    # 16-bit chains round each intermediate product, as PyTorch's do
    OpInfo("linalg.multi_dot", _multi_dot_ref, _multi_dot_samples, dtypes=PRODUCT_DTYPES,
           gradgrad=True, error_inputs=_multi_dot_errors, tol=CHAIN_TOL),
    # torch is called through mm from left to right (see _chain_matmul_torch), which rounds
    # 16-bit intermediates in another order than the cheapest one
    OpInfo("chain_matmul", lambda *ms: np.linalg.multi_dot(ms) if len(ms) > 1 else ms[0],
           _chain_matmul_samples, dtypes=PRODUCT_DTYPES, gradgrad=True,
           op=ember.chain_matmul, torch_op=_chain_matmul_torch, tol=CHAIN_TOL,
           parity_tol={ember.float16: (4e-3, 1e-2), ember.bfloat16: (3e-2, 5e-2)}),
]
