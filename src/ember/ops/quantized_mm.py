"""Low-precision matrix products of PyTorch's quantization paths: ``_weight_int8pack_mm`` (int8
weight-only quantization's linear) and ``_scaled_mm`` (float8 training and inference).
ops/contractions.py holds ``_int_mm``, the int8 x int8 product of dynamic quantization.
Neither op is differentiable (PyTorch has no derivative for them on CPU either).
"""

import numpy as np

from ember import _dtype as D
from ember.ops._op_errors import OpValueError
from ember.ops._registry import op
from ember.ops.conversion import cast
from ember.ops.linalg import check_mm_shapes

__all__ = ["_weight_int8pack_mm", "_scaled_mm"]

_F16, _F32, _I8 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int8)


def _name(dtype):
    """PyTorch's C++ name of a NumPy dtype: 'Float', 'Float8_e4m3fn'."""
    return D.FROM_NUMPY[np.dtype(dtype)]._torch_name


# --- _weight_int8pack_mm ----------------------------------------------------------------------

_LOW_FLOATS = (D.float32.np, D.float16.np, D.bfloat16.np)


def _check_weight_int8pack_mm(a, b, scales):
    where = "_weight_int8pack_mm_cpu :"
    if a.dtype not in _LOW_FLOATS:
        raise RuntimeError(f"{where} expect A to be either 32-bit or 16-bit float tensor.")
    if a.ndim != 2:
        raise RuntimeError(f"{where} expect A to be 2D tensor.")
    if a.size and a.shape[1] > 1 and a.strides[1] != a.itemsize:
        raise RuntimeError(f"{where} A must be contiguous on the last dimension.")
    if b.dtype != np.int8:
        raise RuntimeError(f"{where} expect B to be int8 tensor.")
    # (a meta call's stand-in repeats one row at stride 0: see backend/meta.py)
    stand_in = b.strides[0] == 0 and b.strides[1] == 1
    if not (b.flags.c_contiguous or stand_in):
        raise RuntimeError(f"{where} expect B to be contiguous.")
    if b.shape[1] != a.shape[1]:
        raise RuntimeError(f"{where} expect B.size(1) == {a.shape[1]}")
    if scales.ndim != 1 or scales.shape[0] != b.shape[0]:
        raise RuntimeError(f"{where} expect scales to be 1d tensor with size {b.shape[0]}")
    if scales.dtype != a.dtype:
        raise RuntimeError(f"expected scalar type {_name(a.dtype)} but found "
                           f"{_name(scales.dtype)}")


@op("_weight_int8pack_mm(input, mat2, scales)", inputs=3, method=False, out=False, scalars=False)
def _weight_int8pack_mm(xp, a, b, scales):
    """``A @ B.T * scales`` for int8 weights ``B`` (N, K) with per-row ``scales``: int8
    weight-only quantization's linear, summed in float32 and rounded once to A's dtype."""
    _check_weight_int8pack_mm(a, b, scales)
    out = xp.matmul(a.astype(np.float32), b.astype(np.float32).T) * scales.astype(np.float32)
    return out.astype(a.dtype, copy=False)


_weight_int8pack_mm.not_implemented("_weight_int8pack_mm")


# --- _scaled_mm -------------------------------------------------------------------------------

_FLOAT8 = tuple(np.dtype(d.np) for d in D.FLOAT8)
# the dtypes PyTorch's per-tensor (oneDNN) kernel takes for its result and bias
_ONEDNN = _FLOAT8 + (_F32, _F16, np.dtype(D.bfloat16.np), _I8)


def _contiguous_scale(s, dim):
    """Whether a row-wise scale, (m, 1) or (1, n), is contiguous along its long ``dim`` (a
    meta call's stand-in repeats its one element at stride 0: see backend/meta.py)."""
    return s.shape[dim] == 1 or s.strides[dim] in (s.itemsize, 0)


def _scaling(a, b, scale_a, scale_b):
    """"tensor" or "row" as PyTorch's CPU ``_scaled_mm`` reads its scales, or its error. Per
    tensor, scales of any dtype are read as one float each; per row they must be float32."""
    m, n = a.shape[0], b.shape[1]
    fp8 = a.dtype in _FLOAT8 and b.dtype in _FLOAT8
    if fp8 and scale_a.size == 1 and scale_b.size == 1:
        return "tensor"
    if fp8 and scale_a.dtype == _F32 and scale_b.dtype == _F32 \
            and scale_a.shape == (m, 1) and scale_b.shape == (1, n) \
            and _contiguous_scale(scale_a, 0) and _contiguous_scale(scale_b, 1):
        return "row"
    if a.dtype == b.dtype and scale_a.size == 1 and scale_b.size == 1:    # (not float8)
        raise RuntimeError(f"Expected mat1 to be Float8 matrix got {_name(a.dtype)}")

    def got(t, s):
        strides = [x // s.itemsize for x in s.strides] if s.ndim else []
        return (f"mat_{t}.dtype()={_name((a if t == 'a' else b).dtype)}, "
                f"scale_{t}.dtype()={_name(s.dtype)}, "
                f"scale_{t}.size()={list(s.shape)}".replace("'", "") +
                f"{', ' if t == 'a' else ' and '}scale_{t}.stride()={strides}")
    raise OpValueError(
        "Invalid scaling configuration.\n- For TensorWise scaling, a and b should be float8, "
        "scales should be float and singletons.\n- For RowWise scaling, a and b should be "
        f"float8, scales should be float, scale_a should be ({m}, 1) and scale_b should be "
        f"(1, {n}), and both should be contiguous.\nGot {got('a', scale_a)}, "
        f"{got('b', scale_b)}")


def _scalar_scale(s):
    """A per-tensor scale as the float32 PyTorch's kernel reads from it."""
    value = s.reshape(()).item()
    if isinstance(value, complex):
        if value.imag:
            raise RuntimeError("value cannot be converted to type float without overflow")
        value = value.real
    return np.float32(value)


def _check_onednn_dtypes(dtype, bias):
    """The result and bias dtypes PyTorch's per-tensor kernel refuses, with its messages."""
    for d in (dtype,) + (() if bias is None else (bias.dtype,)):
        if d not in _ONEDNN:
            raise RuntimeError(f"itensor_view_from_dense expects float/bfloat16/half/int8/fp8 "
                               f"tensor input{_name(d)}")
    if bias is not None and bias.dtype == _I8:
        raise RuntimeError("could not create a primitive descriptor for the matmul primitive. "
                           "Run workload with environment variable ONEDNN_VERBOSE=all to get "
                           "additional diagnostic information.")


@op("_scaled_mm(input, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, "
    "use_fast_accum=False)", inputs=6, method=False, out=False, scalars=False)
def _scaled_mm(xp, a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum):
    """The float8 product ``(input * scale_a) @ (mat2 * scale_b) + bias`` in float32, rounded
    once to ``out_dtype`` (default: input's dtype); scales per tensor, or per row of input and
    per column of mat2. As PyTorch's CPU kernels (``scale_result`` is not applied): per tensor
    (oneDNN), a float8 result goes through float16 (NaN where e4m3fn overflows) and an int8
    one rounds and saturates; per row, the float32 result is cast as ``.to`` casts it (e4m3fn
    saturates, int8 wraps) to any ``out_dtype``."""
    for name, t in (("mat1", a), ("mat2", b)):
        if t.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix")
    check_mm_shapes(a, b)
    kind = _scaling(a, b, scale_a, scale_b)
    if bias is not None and bias.size != b.shape[1]:
        raise RuntimeError(f"Bias must be size {b.shape[1]} but got {bias.size}")
    dtype = a.dtype if out_dtype is None else np.dtype(out_dtype.np)
    if kind == "tensor":
        _check_onednn_dtypes(dtype, bias)
        scale_a, scale_b = _scalar_scale(scale_a), _scalar_scale(scale_b)
    with np.errstate(all="ignore"):
        out = xp.matmul(a.astype(_F32) * scale_a.astype(_F32), b.astype(_F32) *
                        scale_b.astype(_F32))
        if kind == "row":       # PyTorch's decomposition: (out + bias) in float32, then .to
            if bias is not None:
                out = (out + (bias if bias.dtype == np.float64 else bias.astype(_F32)))
            return cast(xp, out.astype(_F32, copy=False), dtype)
        if bias is not None:
            out += bias.astype(_F32)
        if dtype == _I8:
            return xp.clip(xp.rint(out), -128, 127).astype(_I8)
        if dtype in _FLOAT8:
            out = out.astype(_F16)
        return out.astype(dtype)


_scaled_mm.not_implemented("_scaled_mm")


PUBLIC = {"_weight_int8pack_mm": _weight_int8pack_mm.function,
          "_scaled_mm": _scaled_mm.function}
