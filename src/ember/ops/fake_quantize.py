"""Fake quantization: ``fake_quantize_per_tensor_affine`` and
``fake_quantize_per_channel_affine``, the float-in, float-out rounding that quantization-aware
training inserts (quantized tensors themselves are not implemented).

Each value is scaled by ``inv_scale = 1 / scale`` (in float32), rounded half to even, shifted
by the zero point, clamped to ``[quant_min, quant_max]``, shifted back and scaled. The
gradient is straight through where the rounded value fell inside the range and zero outside,
as PyTorch's "cachemask" kernels give it. The roundings follow PyTorch's CPU kernels: the
product ``input * inv_scale`` is float32 for 32-bit and narrower floats (float64 for float64
input); a per-tensor result is rounded to float32 before the input's dtype, a per-channel one
goes through float64.
"""

import numpy as np

from ember import _dtype as D
from ember.ops._registry import op
from ember.ops._scalars import int_arg, number_arg

__all__ = ["fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine"]

_RANGE = "`quant_min` should be less than or         equal to `quant_max`."   # (sic)
_ZERO_POINT = "`zero_point` must be between `quant_min` and `quant_max`."
_KERNEL_DTYPES = (D.float32, D.float64, D.float16, D.bfloat16)


def _check_range(quant_min, quant_max):
    if quant_min > quant_max:
        raise RuntimeError(_RANGE)


def _check_float(x, kernel):
    dtype = D.FROM_NUMPY[x.dtype]
    if dtype not in _KERNEL_DTYPES:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype._torch_name}'")


def _compute_dtype(xp, x):
    """The dtype of ``input * inv_scale``: float64 for float64 input, else float32."""
    return xp.float64 if x.dtype == xp.float64 else xp.float32


def _to_int(value):
    """A per-tensor zero point as the kernel takes it (its only element, truncated, or the
    number)."""
    if hasattr(value, "ndim"):
        if value.size != 1:
            raise RuntimeError(f"a Tensor with {value.size} elements cannot be converted to "
                               f"Scalar")
        value = value.reshape(())
        return int(value.astype(np.int64)) if value.dtype.kind != "b" else int(value)
    return value


def _to_float(value):
    """A per-tensor scale as the kernel takes it (its only element, or the number)."""
    if hasattr(value, "ndim"):
        if value.size != 1:
            raise RuntimeError(f"a Tensor with {value.size} elements cannot be converted to "
                               f"Scalar")
        return float(value.reshape(()))
    return value


def _tensor_qparams(scale, zero_point):
    """Whether a call takes PyTorch's overload with tensor scale and zero point (both are
    tensors); otherwise a 0-dim tensor stands for the number of the other overload."""
    return hasattr(scale, "ndim") and hasattr(zero_point, "ndim")


def _per_tensor_parts(xp, x, scale, zero_point, quant_min, quant_max):
    """(result, in-range mask) of fake_quantize_per_tensor_affine on arrays."""
    fname = "fake_quantize_per_tensor_affine"
    tensors = _tensor_qparams(scale, zero_point)
    if not tensors:     # (float scale, int zero_point); a 0-dim tensor is a float
        if hasattr(scale, "ndim"):
            if scale.ndim:
                raise TypeError(f"{fname}(): argument 'scale' (position 2) must be float, "
                                f"not Tensor")
            scale = float(scale)
        scale = number_arg(scale, fname, "scale", 2, kind="float")
        if hasattr(zero_point, "ndim"):     # only a 0-dim integer tensor is an int
            if zero_point.ndim or zero_point.dtype.kind not in "iu":
                raise TypeError(f"{fname}(): argument 'zero_point' (position 3) must be int, "
                                f"not Tensor")
            zero_point = int(zero_point)
        zero_point = int_arg(zero_point, fname, "zero_point", 3)
    quant_min = int_arg(quant_min, fname, "quant_min", 4)
    quant_max = int_arg(quant_max, fname, "quant_max", 5)
    _check_range(quant_min, quant_max)
    if tensors:         # no range check of the zero point in this overload
        scale, zero_point = _to_float(scale), _to_int(zero_point)
    elif not quant_min <= zero_point <= quant_max:
        raise RuntimeError(_ZERO_POINT)
    _check_float(x, "fake_quantize_tensor_cachemask_kernel_type_handling")
    compute = _compute_dtype(xp, x)
    inv_scale = np.float32(1) / np.float32(scale)
    with np.errstate(all="ignore"):
        shifted = xp.rint(x.astype(compute) * compute(inv_scale)).astype(xp.float64)
        shifted += zero_point
        mask = (shifted >= quant_min) & (shifted <= quant_max)
        # fmin/fmax: NaN goes to quant_min, infinities to the nearer bound
        clamped = xp.fmin(xp.fmax(shifted, quant_min), quant_max)
        out = ((clamped - zero_point) * np.float64(np.float32(scale))).astype(xp.float32)
    return out.astype(x.dtype, copy=False), mask


def _result(out, mask):
    """What the ops return of the (result, mask) pair their kernels compute: the mask is only
    kept for backward (NOTE [Fake quantization masks])."""
    return out


# NOTE [Fake quantization masks]
# As PyTorch's "cachemask" kernels, each op computes its result and the in-range mask at
# once and keeps only the mask for backward (not the input: changing the input in place
# before backward is allowed). ``namedtuple=_result`` returns the result alone.
@op("fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max)",
    inputs=3, method=False, out=False, scalars=True, saves_inputs=False, namedtuple=_result)
def fake_quantize_per_tensor_affine(xp, x, scale, zero_point, quant_min, quant_max):
    """``input`` rounded to the ``scale``/``zero_point`` grid of integers in
    ``[quant_min, quant_max]``, in floating point."""
    return _per_tensor_parts(xp, x, scale, zero_point, quant_min, quant_max)


fake_quantize_per_tensor_affine.nondifferentiable("scale", "zero_point")
fake_quantize_per_tensor_affine.refuse_grad(
    "scale", lambda flat: "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams"
    if _tensor_qparams(flat[1], flat[2]) else None)
fake_quantize_per_tensor_affine.refuse_grad(
    "zero_point", lambda flat: "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams"
    if _tensor_qparams(flat[1], flat[2]) else None)
fake_quantize_per_tensor_affine.refuse_forward_ad(
    lambda flat, params: "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams"
    if _tensor_qparams(flat[1], flat[2]) else "fake_quantize_per_tensor_affine_cachemask")
fake_quantize_per_tensor_affine.named_by(
    lambda flat, params, out: "FakeQuantizePerTensorAffineCachemaskTensorQparamsBackward0"
    if _tensor_qparams(flat[1], flat[2]) else "FakeQuantizePerTensorAffineCachemaskBackward0")


@fake_quantize_per_tensor_affine.derivative(outputs=(1,))
def _(grads, x, scale, zero_point, quant_min, quant_max, *, out):
    return grads[0] * out[1], None, None


def _per_channel_parts(xp, x, scale, zero_point, axis, quant_min, quant_max):
    """(result, in-range mask) of fake_quantize_per_channel_affine on arrays."""
    fname = "fake_quantize_per_channel_affine"
    axis = int_arg(axis, fname, "axis", 4)
    quant_min = int_arg(quant_min, fname, "quant_min", 5)
    quant_max = int_arg(quant_max, fname, "quant_max", 6)
    if scale.dtype != np.float32:
        raise RuntimeError(f"Scale must be Float or BFloat16, found "
                           f"{D.FROM_NUMPY[scale.dtype]._torch_name}")
    if zero_point.dtype not in (np.int32, np.float32, np.float16):
        raise RuntimeError(f"Zero-point must be Int32, Float or Half, found "
                           f"{D.FROM_NUMPY[zero_point.dtype]._torch_name}")
    if scale.ndim != 1:
        raise RuntimeError("scale should be a 1-D tensor")
    if zero_point.ndim != 1:
        raise RuntimeError("zero point should be a 1-D tensor")
    if scale.size != zero_point.size:
        raise RuntimeError("scale and zero-point need to have the same dimensions")
    if not x.ndim:
        raise IndexError(f"Dimension specified as {axis} but tensor has no dimensions")
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-x.ndim}, {x.ndim - 1}], but got {axis})")
    if scale.size != x.shape[axis]:
        raise RuntimeError("dimensions of scale and zero-point are not consistent with input "
                           "tensor")
    _check_range(quant_min, quant_max)
    integral = zero_point.dtype == np.int32
    if integral and zero_point.size and not (quant_min <= int(zero_point.min())
                                            and int(zero_point.max()) <= quant_max):
        raise RuntimeError(_ZERO_POINT)
    if axis < 0:
        raise RuntimeError("`axis` must be between 0 and number of dimensions of input")
    _check_float(x, "fake_quantize_channel_cachemask_cpu_type_handling")
    compute = _compute_dtype(xp, x)
    shape = [1] * x.ndim
    shape[axis] = -1
    scale = scale.reshape(shape)
    zero_point = zero_point.reshape(shape)
    inv_scale = np.float32(1) / scale
    with np.errstate(all="ignore"):
        if integral:
            shifted = xp.rint(x.astype(compute) * inv_scale.astype(compute))
            shifted = shifted.astype(xp.float64) + zero_point
        else:           # a float zero point joins before rounding, the sum in float32
            shifted = x.astype(xp.float64) * inv_scale.astype(xp.float64)
            shifted += zero_point.astype(xp.float64)
            shifted = xp.rint(shifted.astype(xp.float32)).astype(xp.float64)
        mask = (shifted >= quant_min) & (shifted <= quant_max)
        # the kernel converts to int64 first: what does not fit (NaN too) becomes quant_min
        fits = xp.abs(shifted) < 2.0 ** 63
        clamped = xp.where(fits, xp.clip(shifted, quant_min, quant_max), quant_min)
        out = (clamped - zero_point.astype(xp.float64)) * scale.astype(xp.float64)
    if x.dtype != np.float64:
        out = out.astype(xp.float32)
    return out.astype(x.dtype, copy=False), mask


@op("fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max)",
    inputs=3, method=False, out=False, scalars=False, saves_inputs=False, namedtuple=_result,
    grad_fn_name="FakeQuantizePerChannelAffineCachemaskBackward0")
def fake_quantize_per_channel_affine(xp, x, scale, zero_point, axis, quant_min, quant_max):
    """``input`` rounded per slice along ``axis`` to that slice's ``scale``/``zero_point``
    grid of integers in ``[quant_min, quant_max]``, in floating point."""
    return _per_channel_parts(xp, x, scale, zero_point, axis, quant_min, quant_max)


fake_quantize_per_channel_affine.nondifferentiable("scale", "zero_point")
fake_quantize_per_channel_affine.refuse_forward_ad("fake_quantize_per_channel_affine_cachemask")
fake_quantize_per_channel_affine.refuse_grad("scale", "fake_quantize_per_channel_affine_cachemask")
fake_quantize_per_channel_affine.refuse_grad("zero_point",
                                             "fake_quantize_per_channel_affine_cachemask")


@fake_quantize_per_channel_affine.derivative(outputs=(1,))
def _(grads, x, scale, zero_point, axis, quant_min, quant_max, *, out):
    return grads[0] * out[1], None, None
