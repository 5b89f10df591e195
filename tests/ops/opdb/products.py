"""OpInfo entries for ember/ops/products.py: addmm, addmv, addr, baddbmm, addbmm."""

import numpy as np

import ember
from tests.ops.opdb.core import (ALL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, make)

PRODUCT_DTYPES = FLOATS + LOW + INTS + COMPLEX        # no bool: PyTorch has no bool GEMM
NAN = float("nan")


def _t(shape, dtype, rg, **kw):
    return make(shape, dtype, rg, low=-3, high=3, **kw)


def _transposed(shape, dtype, rg):
    """A noncontiguous operand: the transpose (of the last two dims) of a contiguous one."""
    t = make(shape[:-2] + shape[:-3:-1], dtype, low=-3, high=3).mT.detach()
    return t.requires_grad_(rg and (dtype.is_floating_point or dtype.is_complex))


def _nan(shape, dtype):
    return ember.full(shape, NAN, dtype=dtype)


def _scales(dtype):
    """(beta, alpha) pairs of the dtype's kind: integers, floats, complex numbers."""
    if dtype.is_complex:
        return ((0.5, 2.0), (1 - 1j, 0.5 + 2j))
    if dtype.is_floating_point:
        return ((0.5, 2.0), (-1.5, 0.25))
    return ((2, 3),) if dtype is not ember.bool else ((True, True),)


def _ref(product, blas):
    """beta * input + alpha * product(*operands), with PyTorch's rules for beta=0, alpha=0
    (no product where ``blas(a, b)`` says PyTorch's kernel skips it) and float scales on
    integer tensors (truncated)."""
    def ref(m, a, b, beta=1, alpha=1):
        if m.dtype.kind in "iu":
            beta, alpha = int(beta), int(alpha)
        if m.dtype == np.bool_:
            return (bool(beta) & m) | (bool(alpha) & product(a, b))
        out = np.zeros(np.broadcast_shapes(m.shape, product(a, b).shape), m.dtype) \
            if alpha == 0 and blas(a, b) else alpha * product(a, b)
        return out if beta == 0 else out + beta * m
    return ref


def _common_samples(shapes, dtype, rg, blas, truncates=True):
    """Samples shared by the add* products: ``shapes`` is (input, first, second) for the plain
    case, then broadcast inputs, scales, empty operands and the beta=0 / alpha=0 cases."""
    (sm, sa, sb), broadcast, empty = shapes
    yield SampleInput(_t(sm, dtype, rg), (_t(sa, dtype, rg), _t(sb, dtype, rg)), name="plain")
    for s in broadcast:
        yield SampleInput(_t(s, dtype, rg), (_t(sa, dtype, rg), _t(sb, dtype, rg)),
                          name=f"broadcast_{list(s)}")
    for beta, alpha in _scales(dtype):
        yield SampleInput(_t(sm, dtype, rg), (_t(sa, dtype, rg), _t(sb, dtype, rg)),
                          {"beta": beta, "alpha": alpha}, name=f"scaled_{beta}_{alpha}")
    for s in empty:
        yield SampleInput(_t(s[0], dtype, rg), (_t(s[1], dtype, rg), _t(s[2], dtype, rg)),
                          name=f"empty_{list(s[1])}x{list(s[2])}")
    if dtype in INTS and truncates:
        yield SampleInput(_t(sm, dtype, rg), (_t(sa, dtype, rg), _t(sb, dtype, rg)),
                          {"beta": 2.7, "alpha": 1.5}, name="float_scales_truncate")
    if rg or not (dtype.is_floating_point or dtype.is_complex):
        return
    # NaN in input with beta=0 never shows; NaN in an operand with alpha=0 does unless a
    # BLAS kernel skips the product (never for 16-bit floats, which the reference cannot see)
    yield SampleInput(_nan(sm, dtype), (_t(sa, dtype, rg), _t(sb, dtype, rg)),
                      {"beta": 0}, name="beta0_nan_input")
    if not blas or dtype not in LOW:
        yield SampleInput(_t(sm, dtype, rg), (_nan(sa, dtype), _t(sb, dtype, rg)),
                          {"alpha": 0}, name="alpha0_nan_operand")


# --- addmm ------------------------------------------------------------------------------------

def _addmm_samples(dtype, rg):
    yield from _common_samples((((2, 4), (2, 3), (3, 4)), ((4,), (1, 4), (2, 1), ()),
                                (((0, 4), (0, 3), (3, 4)), ((2, 4), (2, 0), (0, 4)),
                                 ((4,), (0, 3), (3, 4)))), dtype, rg, blas=True)
    yield SampleInput(_t((3, 2), dtype, rg, noncontiguous=True),
                      (_transposed((3, 4), dtype, rg), _transposed((4, 2), dtype, rg)),
                      name="noncontiguous")


def _addmm_errors():
    one, f64 = ember.ones, ember.float64
    yield ErrorInput(SampleInput(one(2, 2), (one(2, 3), one(4, 2))), RuntimeError,
                     r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x2\)")
    yield ErrorInput(SampleInput(one(2, 2), (one(3), one(3, 2))), RuntimeError,
                     "mat1 must be a matrix, got 1-D tensor")
    yield ErrorInput(SampleInput(one(2, 2), (one(2, 3), one(2, 3, 2))), RuntimeError,
                     "mat2 must be a matrix, got 3-D tensor")
    yield ErrorInput(SampleInput(one(2, 2, dtype=f64), (one(2, 3), one(3, 2))), RuntimeError,
                     "self and mat2 must have the same dtype, but got Double and Float")
    yield ErrorInput(SampleInput(one(2, 2), (one(2, 3, dtype=f64), one(3, 2))), RuntimeError,
                     "mat1 and mat2 must have the same dtype, but got Double and Float")
    yield ErrorInput(SampleInput(one(3, 3), (one(2, 3), one(3, 2, dtype=f64))), RuntimeError,
                     "self and mat2 must have the same dtype, but got Float and Double")
    yield ErrorInput(SampleInput(one(3), (one(2, 3), one(3, 2))), RuntimeError,
                     r"The expanded size of the tensor \(2\) must match the existing size \(3\) "
                     r"at non-singleton dimension 1\.  Target sizes: \[2, 2\]\.  Tensor sizes: "
                     r"\[3\]")
    yield ErrorInput(SampleInput(one(1, 2, 2), (one(2, 3), one(3, 2))), RuntimeError,
                     r"expand\(ember.FloatTensor\{\[1, 2, 2\]\}, size=\[2, 2\]\): the number of "
                     r"sizes provided \(2\) must be greater or equal to the number of dimensions "
                     r"in the tensor \(3\)")
    b = ember.ones(2, 2, dtype=ember.bool)
    yield ErrorInput(SampleInput(b, (b, b)), NotImplementedError,
                     "\"addmm_impl_cpu_\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(one(2, 2), (one(2, 3), one(3, 2)), {"alpha": 1j}),
                     RuntimeError, "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(one(2, 2), (one(2, 3), one(3, 2)), {"beta": 1e300}),
                     RuntimeError, "value cannot be converted to type float without overflow")
    i8 = ember.int8
    yield ErrorInput(SampleInput(one(2, 2, dtype=i8), (one(2, 3, dtype=i8), one(3, 2, dtype=i8)),
                                 {"alpha": 300}),
                     RuntimeError, "value cannot be converted to type int8_t without overflow")
    yield ErrorInput(SampleInput(2.0, (one(2, 3), one(3, 2))), TypeError,
                     r"argument 'input' \(position 1\) must be Tensor, not float")


# --- addbmm, baddbmm --------------------------------------------------------------------------

def _addbmm_samples(dtype, rg):
    yield from _common_samples((((2, 4), (3, 2, 3), (3, 3, 4)), ((4,), (2, 1), ()),
                                (((2, 4), (0, 2, 3), (0, 3, 4)), ((2, 4), (3, 2, 0), (3, 0, 4)))),
                               dtype, rg, blas=True)
    yield SampleInput(_t((3, 2), dtype, rg, noncontiguous=True),
                      (_transposed((2, 3, 4), dtype, rg), _transposed((2, 4, 2), dtype, rg)),
                      name="noncontiguous")


def _addbmm_errors():
    one, f64 = ember.ones, ember.float64
    yield ErrorInput(SampleInput(one(3, 2), (one(2, 3), one(2, 3, 2))), RuntimeError,
                     "batch1 must be a 3D tensor")
    yield ErrorInput(SampleInput(one(3, 2), (one(2, 3, 4), one(2, 4, 2, 5))), RuntimeError,
                     "batch2 must be a 3D tensor")
    yield ErrorInput(SampleInput(one(3, 2), (one(2, 3, 4), one(2, 4))), IndexError,
                     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)")
    yield ErrorInput(SampleInput(one(3, 2), (one(2, 3, 4), one(3, 4, 2))), RuntimeError,
                     "batch1 and batch2 must have same number of batches, got 2 and 3")
    yield ErrorInput(SampleInput(one(3, 2), (one(2, 3, 4), one(2, 5, 2))), RuntimeError,
                     r"Incompatible matrix sizes for bmm \(3x4 and 5x2\)")
    yield ErrorInput(SampleInput(one(4, 2), (one(2, 3, 4), one(3, 4, 2))), RuntimeError,
                     r"The expanded size of the tensor \(3\) must match the existing size \(4\) "
                     r"at non-singleton dimension 0")
    yield ErrorInput(SampleInput(one(3, 2, dtype=f64), (one(2, 3, 4), one(2, 4, 2))),
                     RuntimeError, "self and mat2 must have the same dtype, but got Double and "
                     "Float")
    yield ErrorInput(SampleInput(one(3, 2), (one(2, 3, 4, dtype=f64), one(2, 4, 2))),
                     RuntimeError, "mat1 and mat2 must have the same dtype, but got Double and "
                     "Float")
    b = ember.ones(2, 2, 2, dtype=ember.bool)
    yield ErrorInput(SampleInput(b[0], (b, b)), NotImplementedError,
                     "\"addmm_impl_cpu_\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(one(3, 2), (one(2, 3, 4), one(2, 4, 2)), {"alpha": 1j}),
                     RuntimeError, "value cannot be converted to type float without overflow")


def _baddbmm_samples(dtype, rg):
    yield from _common_samples((((2, 2, 4), (2, 2, 3), (2, 3, 4)), ((4,), (1, 2, 4), (2, 1, 1),
                                                                     ()),
                                (((0, 2, 4), (0, 2, 3), (0, 3, 4)), ((2, 2, 4), (2, 2, 0),
                                                                     (2, 0, 4)))),
                               dtype, rg, blas=False)
    yield SampleInput(_t((2, 3, 2), dtype, rg, noncontiguous=True),
                      (_transposed((2, 3, 4), dtype, rg), _transposed((2, 4, 2), dtype, rg)),
                      name="noncontiguous")
    if not rg and dtype not in LOW and (dtype.is_floating_point or dtype.is_complex):
        # 400 multiplications per batch: PyTorch's baddbmm calls BLAS
        yield SampleInput(_t((1, 20, 20), dtype, rg), (_nan((1, 20, 1), dtype),
                                                       _t((1, 1, 20), dtype, rg)),
                          {"alpha": 0}, name="alpha0_nan_operand_blas")


def _baddbmm_errors():
    one, f64 = ember.ones, ember.float64
    yield ErrorInput(SampleInput(one(2, 3, 2), (one(2, 3), one(2, 3, 2))), RuntimeError,
                     "batch1 must be a 3D tensor")
    yield ErrorInput(SampleInput(one(2, 3, 2), (one(2, 3, 4), one(2, 4, 2, 5))), RuntimeError,
                     "batch2 must be a 3D tensor")
    yield ErrorInput(SampleInput(one(2, 2, 2), (one(2, 2, 3), one(3, 2))), IndexError,
                     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)")
    yield ErrorInput(SampleInput(one(3, 2, 2), (one(2, 2, 3), one(2, 3, 2))), RuntimeError,
                     r"The expanded size of the tensor \(2\) must match the existing size \(3\) "
                     r"at non-singleton dimension 0")
    yield ErrorInput(SampleInput(one(2, 3, 2), (one(2, 3, 4), one(3, 4, 2))), RuntimeError,
                     r"Expected size for first two dimensions of batch2 tensor to be: \[2, 4\] but "
                     r"got: \[3, 4\]\.")
    yield ErrorInput(SampleInput(one(2, 3, 2), (one(2, 3, 4), one(2, 5, 2))), RuntimeError,
                     r"to be: \[2, 4\] but got: \[2, 5\]\.")
    yield ErrorInput(SampleInput(one(2, 3, 2, dtype=f64), (one(2, 3, 4), one(2, 5, 2))),
                     RuntimeError, "Input dtypes must be the same, got: input double, batch1: "
                     "float, batch2: float")
    yield ErrorInput(SampleInput(one(2, 3, 2), (one(2, 3, 4), one(2, 4, 2, dtype=f64))),
                     RuntimeError, "expected scalar type Float but found Double")
    i32, i64 = ember.int32, ember.int64
    yield ErrorInput(SampleInput(one(2, 3, 2, dtype=i32), (one(2, 3, 4, dtype=i64),
                                                           one(2, 4, 2, dtype=i64))),
                     RuntimeError, "got: input int, batch1: long int, batch2: long int")
    b = ember.ones(2, 2, 2, dtype=ember.bool)
    yield ErrorInput(SampleInput(b, (b, b)), NotImplementedError,
                     "\"baddbmm\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(one(2, 3, 2, dtype=i64), (one(2, 3, 4, dtype=i64),
                                                           one(2, 4, 2, dtype=i64)),
                                 {"alpha": 1j}),
                     RuntimeError, "value cannot be converted to type int64_t without overflow")


# --- addmv ------------------------------------------------------------------------------------

def _addmv_samples(dtype, rg):
    yield from _common_samples((((3,), (3, 4), (4,)), ((1,), ()),
                                (((0,), (0, 4), (4,)), ((3,), (3, 0), (0,)))), dtype, rg,
                               blas=not dtype.is_complex)
    yield SampleInput(_t((3,), dtype, rg, noncontiguous=True),
                      (_transposed((3, 4), dtype, rg), _t((4,), dtype, rg, noncontiguous=True)),
                      name="noncontiguous")


def _addmv_errors():
    one, f64 = ember.ones, ember.float64
    yield ErrorInput(SampleInput(one(3), (one(2, 3), one(4))), RuntimeError,
                     r"size mismatch, got input \(3\), mat \(2x3\), vec \(4\)")
    yield ErrorInput(SampleInput(one(2), (one(2, 3), one(4))), RuntimeError,
                     r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)")
    yield ErrorInput(SampleInput(one(2), (one(2, 3, 4), one(3))), RuntimeError,
                     r"vector \+ matrix @ vector expected, got 1, 3, 1")
    yield ErrorInput(SampleInput(one(2, 2), (one(2, 3), one(3))), RuntimeError,
                     r"vector \+ matrix @ vector expected, got 2, 2, 1")
    yield ErrorInput(SampleInput(one(2, dtype=f64), (one(2, 3), one(3))), RuntimeError,
                     "addmv input tensors must have the same dtype, but got Double, Float, and "
                     "Float")
    yield ErrorInput(SampleInput(one(2), (one(2, 3), one(3, dtype=f64))), RuntimeError,
                     "but got Float, Float, and Double")
    b = ember.ones(2, dtype=ember.bool)
    yield ErrorInput(SampleInput(b, (ember.ones(2, 2, dtype=ember.bool), b)),
                     NotImplementedError, "\"addmv_impl_cpu\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(one(2), (one(2, 3), one(3)), {"beta": 1j}), RuntimeError,
                     "value cannot be converted to type float without overflow")


# --- addr -------------------------------------------------------------------------------------

def _promoted(dtype, sample):
    out = None
    for t in [sample.input, *sample.args]:
        out = t.dtype if out is None else ember.promote_types(out, t.dtype)
    return out


def _addr_samples(dtype, rg):
    yield from _common_samples((((2, 3), (2,), (3,)), ((3,), (1, 3), ()),
                                (((0, 3), (0,), (3,)), ((2, 0), (2,), (0,)))), dtype, rg,
                               blas=False, truncates=False)
    yield SampleInput(_t((2, 3), dtype, rg, noncontiguous=True),
                      (_t((2,), dtype, rg, noncontiguous=True),
                       _t((3,), dtype, rg, noncontiguous=True)), name="noncontiguous")
    if dtype is ember.bool:
        yield SampleInput(_t((2, 3), dtype, rg), (_t((2,), dtype, rg), _t((3,), dtype, rg)),
                          {"beta": False, "alpha": 2}, name="bool_scales")
    if dtype is not ember.float64 and not rg:   # a 0-dim input is not weak: it promotes
        yield SampleInput(make((), ember.float64, rg), (_t((2,), dtype, rg),
                                                        _t((3,), dtype, rg)), name="promotes")


def _addr_errors():
    one, i64 = ember.ones, ember.int64
    yield ErrorInput(SampleInput(one(2, 3), (one(2, 1), one(3))), RuntimeError,
                     "addr: Expected 1-D argument vec1, but got 2-D")
    yield ErrorInput(SampleInput(one(2, 3), (one(2), one(()))), RuntimeError,
                     "addr: Expected 1-D argument vec2, but got 0-D")
    yield ErrorInput(SampleInput(one(2, 2), (one(2), one(3))), RuntimeError,
                     r"The expanded size of the tensor \(3\) must match the existing size \(2\)")
    ints = (one(2, dtype=i64), one(3, dtype=i64))
    yield ErrorInput(SampleInput(one(2, 3, dtype=i64), ints, {"alpha": 1.5}), RuntimeError,
                     "For integral input tensors, argument alpha must not be a floating point "
                     "number.")
    yield ErrorInput(SampleInput(one(2, 3, dtype=ember.bool), (one(2, dtype=ember.bool),
                                                               one(3, dtype=ember.bool)),
                                 {"beta": 2.5}), RuntimeError,
                     "For integral input tensors, argument beta must not be a floating point "
                     "number.")
    yield ErrorInput(SampleInput(one(2, 3, dtype=i64), ints, {"beta": True, "alpha": 2.5}),
                     RuntimeError, "Boolean beta only supported for Boolean results.")
    yield ErrorInput(SampleInput(one(2, 3), (one(2), one(3)), {"alpha": True}), RuntimeError,
                     "Boolean alpha only supported for Boolean results.")
    yield ErrorInput(SampleInput(one(2, 3), (one(2), one(3)), {"beta": 1j}), RuntimeError,
                     "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(one(2, 3), (one(2), 2)), TypeError,
                     r"argument 'vec2' \(position 3\) must be Tensor, not int")


def _any(a, b):
    return True


OPS = [
    OpInfo("addmm", _ref(np.matmul, _any), _addmm_samples, dtypes=PRODUCT_DTYPES, gradgrad=True,
           error_inputs=_addmm_errors),
    OpInfo("addbmm", _ref(lambda a, b: np.matmul(a, b).sum(0), _any), _addbmm_samples,
           dtypes=PRODUCT_DTYPES, gradgrad=True, error_inputs=_addbmm_errors),
    OpInfo("baddbmm", _ref(np.matmul, lambda a, b: a.shape[1] * a.shape[2] * b.shape[2] >= 400),
           _baddbmm_samples, dtypes=PRODUCT_DTYPES,
           gradgrad=True, error_inputs=_baddbmm_errors),
    OpInfo("addmv", _ref(np.matmul, lambda a, b: a.dtype.kind == "f"), _addmv_samples,
           dtypes=PRODUCT_DTYPES, gradgrad=True, error_inputs=_addmv_errors),
    OpInfo("addr", _ref(np.multiply.outer, lambda a, b: False), _addr_samples, dtypes=ALL,
           gradgrad=True, result_dtype=_promoted, error_inputs=_addr_errors),
]
