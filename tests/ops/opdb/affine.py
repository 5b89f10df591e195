"""OpInfo entries for ember/ops/affine.py: nn.functional.linear and its recorded nodes."""

import numpy as np

import ember
from tests.ops.opdb.core import COMPLEX, FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make


def _s(x, *args, name="", **kwargs):
    return SampleInput(x, args, kwargs, name=name)


def _linear_ref(x, w, b=None):
    wide = np.result_type(x.dtype, np.float64)          # complex128 for complex inputs
    out = x.astype(wide) @ w.astype(wide).T
    if b is not None:
        out = out + b
    return out.astype(x.dtype)


def _linear_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, **kw)
    yield _s(mk(4, 3), mk(2, 3), mk(2), name="2d_bias")
    yield _s(mk(4, 3), mk(2, 3), name="2d")
    yield _s(mk(2, 3, 3), mk(4, 3), mk(4), name="3d_bias")
    yield _s(mk(3), mk(2, 3), mk(2), name="1d_input")
    yield _s(mk(2, 3), mk(3), name="1d_weight")
    yield _s(mk(3, 4, noncontiguous=True), mk(2, 4, noncontiguous=True), mk(1), name="noncontig")
    yield _s(mk(0, 3), mk(2, 3), mk(2), name="empty_batch")
    yield _s(mk(2, 0), mk(2, 0), mk(2), name="no_features")
    yield _s(mk(2, 3), mk(2, 3), make((), dtype, rg), name="0d_bias")


def _linear_errors():
    f = ember.ones
    yield ErrorInput(_s(f(4, 3), f(2, 5)), RuntimeError,
                     r"mat1 and mat2 shapes cannot be multiplied \(4x3 and 5x2\)")
    yield ErrorInput(_s(f(()), f(2, 3)), RuntimeError,
                     "both arguments to linear need to be at least 1D, but they are 0D and 2D")
    yield ErrorInput(_s(f(2, 3), f(2, 3, dtype=ember.float64)), RuntimeError,
                     "expected m1 and m2 to have the same dtype, but got: float != double")
    yield ErrorInput(_s(f(4, 3), f(2, 3), f(3)), RuntimeError,
                     r"The expanded size of the tensor \(2\) must match the existing size "
                     r"\(3\) at non-singleton dimension 1.  Target sizes: \[4, 2\].  Tensor "
                     r"sizes: \[3\]")
    yield ErrorInput(_s(f(4, 3), f(2, 3), f(2, dtype=ember.float64)), RuntimeError,
                     "self and mat2 must have the same dtype, but got Double and Float")


def _addmm_ref(b, x, w):
    return _linear_ref(x, w, b)


def _addmm_samples(dtype, rg):
    def mk(*shape):
        return make(shape, dtype, rg)
    yield _s(mk(2), mk(4, 3), mk(2, 3), name="vector_bias")
    yield _s(mk(4, 1), mk(4, 3), mk(2, 3), name="column_bias")


def _mm_samples(dtype, rg):
    yield _s(make((4, 3), dtype, rg), make((2, 3), dtype, rg), name="matrix")


def _addmm_torch(b, x, w):
    import torch
    return torch.addmm(b, x, w.t())


def _mm_torch(x, w):
    return x.mm(w.t())


_LINEAR_NODE_TOL = {ember.float32: (1e-5, 1e-5)}

OPS = [
    OpInfo("_linear_addmm", _addmm_ref, _addmm_samples, dtypes=FLOATS + COMPLEX, gradgrad=True,
           torch_op=_addmm_torch, tol=_LINEAR_NODE_TOL),
    OpInfo("_linear_mm", _linear_ref, _mm_samples, dtypes=FLOATS + COMPLEX, gradgrad=True,
           torch_op=_mm_torch, tol=_LINEAR_NODE_TOL),
    OpInfo("nn.functional.linear", _linear_ref, _linear_samples,
           dtypes=FLOATS + LOW + COMPLEX + (ember.int64, ember.int32), gradgrad=True,
           error_inputs=_linear_errors,
           tol={ember.float32: (1e-5, 1e-5), ember.bfloat16: (2e-2, 2e-2),
                ember.float16: (2e-3, 2e-3)}),
]
