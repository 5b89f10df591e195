"""Learnable fake quantization (LSQ+): ``_fake_quantize_learnable_per_tensor_affine`` and
``_fake_quantize_learnable_per_channel_affine``, whose float ``scale`` and ``zero_point`` get
gradients, as ``torch.ao.quantization._LearnableFakeQuantize`` uses them.

The forward is the plain fake quantization (ops/fake_quantize.py) at a rounded zero point:
per tensor, the first element of ``zero_point`` rounded half to even and clamped to
``[quant_min, quant_max]``; per channel, each element so. The backward, as PyTorch's CPU
kernels compute it in float32 per element and then sum: with ``xq = zp + round(x / scale)``,
inside the range ``dx = dy``, ``dscale = dy * (fq(x) - x) / scale`` and ``dzp = 0``; outside
it ``dx = 0``, ``dscale = dy * (quant_min or quant_max - zp)`` and ``dzp = -dy * scale``; both
scaled by ``grad_factor``. Per tensor the backward's zero point is ``zero_point + 0.5``
truncated (not the forward's rounding: 2.5 is 2 forward and 3 backward), as in PyTorch.
The backward kernels take float32, or a bfloat16 input (cast to float32 with the rest).
"""

import numpy as np

from ember import _dtype as D
from ember.ops._registry import op
from ember.ops._scalars import int_arg
from ember.ops.fake_quantize import _ZERO_POINT, _per_channel_parts, _per_tensor_parts

__all__ = ["_fake_quantize_learnable_per_tensor_affine",
           "_fake_quantize_learnable_per_channel_affine"]

_F32 = np.float32


def _first(value):
    """``value[0]`` of a per-tensor scale or zero point, as a float32 (PyTorch indexes it)."""
    if value.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    if value.shape[0] == 0:
        raise IndexError("index 0 is out of bounds for dimension 0 with size 0")
    return _F32(value.reshape(-1)[0])


def _float32_operands(dy, x, scale, zero_point):
    """The backward kernels' operands, all float32: PyTorch's take float32 only, and say so
    naming the first offender, except that a bfloat16 input casts all four to float32."""
    arrays = {"dY": dy, "X": x, "scale": scale, "zero_point": zero_point}
    if x.dtype == D.bfloat16.np:
        return tuple(a.astype(_F32) for a in arrays.values())
    for name, a in arrays.items():
        if a.dtype != np.float32:
            raise RuntimeError(f"Expected {name}_.scalar_type() == ScalarType::Float to be true, "
                               f"but got false.  (Could this error message be improved?  If so, "
                               f"please report an enhancement request to PyTorch.)")
    return dy, x, scale, zero_point


def _grads(xp, dy, x, scale, zp, quant_min, quant_max, grad_factor):
    """Per element (dx, dscale, dzp), each in float32; ``scale`` and ``zp`` broadcast to x."""
    factor = _F32(grad_factor)      # PyTorch's kernels multiply by it in float32
    with np.errstate(all="ignore"):
        inv_scale = _F32(1) / scale
        xq = (zp + xp.rint(x * inv_scale)).astype(xp.float64)
        # C's float-to-int64 cast: NaN, infinities and values beyond int64 give INT64_MIN
        xq = xp.where(xp.abs(xq) < 2.0 ** 63, xq, -2.0 ** 63).astype(xp.int64)
        low, high = xq < quant_min, xq > quant_max
        inside = ~(low | high)
        dx = dy * inside.astype(dy.dtype)
        # fq(x) - x as the compiled kernel contracts it: (q - zp) * scale - x in one rounding
        steps = (xp.clip(xq, quant_min, quant_max).astype(_F32) - zp).astype(xp.float64)
        error = (steps * xp.asarray(scale, dtype=xp.float64) - x).astype(_F32)
        dscale_in = dy * error * inv_scale * factor
        bound = xp.where(low, _F32(quant_min) - zp, _F32(quant_max) - zp).astype(_F32)
        dscale = xp.where(inside, dscale_in, dy * bound * factor).astype(_F32)
        dzp = xp.where(inside, _F32(0), dy * _F32(-1) * scale * factor).astype(_F32)
    return dx, dscale, dzp


@op("_fake_quantize_learnable_per_tensor_affine(input, scale, zero_point, quant_min, quant_max, "
    "grad_factor=1.0)", inputs=3, method=False, out=False, scalars=False,
    grad_fn_name="FakeQuantizeLearnablePerTensorAffineBackward0")
def _fake_quantize_learnable_per_tensor_affine(xp, x, scale, zero_point, quant_min, quant_max,
                                               grad_factor):
    """``input`` fake-quantized at ``scale[0]`` and ``zero_point[0]`` (rounded, clamped);
    differentiable in all three tensors."""
    fname = "_fake_quantize_learnable_per_tensor_affine"
    quant_min = int_arg(quant_min, fname, "quant_min", 4)
    quant_max = int_arg(quant_max, fname, "quant_max", 5)
    scale_value = float(_first(scale))
    zp = float(np.rint(_first(zero_point)))
    zp = int(min(max(zp, float(quant_min)), float(quant_max)))
    return _per_tensor_parts(xp, x, scale_value, zp, quant_min, quant_max)[0]


@_fake_quantize_learnable_per_tensor_affine.derivative
def _(grad, x, scale, zero_point, quant_min, quant_max, grad_factor, *, needs):
    grads = _fake_quantize_learnable_per_tensor_affine_backward(
        grad, x, scale, zero_point, quant_min, quant_max, grad_factor)
    for index in (1, 2):    # PyTorch's engine refuses the (1,) gradient of a longer qparam
        shape = list((x, scale, zero_point)[index].shape)
        if needs[index] and shape != [1] and x.numel():     # (empty: qparams handed back)
            raise RuntimeError(f"Function FakeQuantizeLearnablePerTensorAffineBackward0 returned "
                               f"an invalid gradient at index {index} - got [1] but expected "
                               f"shape compatible with {shape}")
    return grads


@op("_fake_quantize_learnable_per_tensor_affine_backward(grad, input, scale, zero_point, "
    "quant_min, quant_max, grad_factor=1.0)", inputs=4, method=False, out=False, scalars=False)
def _fake_quantize_learnable_per_tensor_affine_backward(xp, dy, x, scale, zero_point, quant_min,
                                                        quant_max, grad_factor):
    """(input, scale, zero_point) gradients of the per-tensor learnable fake quantization."""
    scale_value = _first(scale)
    zp = min(max(float(_first(zero_point)) + 0.5, float(quant_min)), float(quant_max))
    zp = int(zp)        # truncated: PyTorch's backward adds 0.5 where its forward rounds
    dy, x, scale, zero_point = _float32_operands(dy, x, scale, zero_point)
    if not quant_min <= 0 <= quant_max:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`, "
                           "and the quantization range should include 0.")
    if not quant_min <= zp <= quant_max:
        raise RuntimeError(_ZERO_POINT)
    if x.size == 0:
        return x.copy(), scale.copy(), zero_point.copy()
    dx, dscale, dzp = _grads(xp, dy, x, scale_value, _F32(zp), quant_min, quant_max,
                             grad_factor)
    return (dx, dscale.sum(dtype=_F32).reshape(1).astype(scale.dtype),
            dzp.sum(dtype=_F32).reshape(1).astype(zero_point.dtype))


_fake_quantize_learnable_per_tensor_affine.refuse_forward_ad(
    "_fake_quantize_learnable_per_tensor_affine")
_fake_quantize_learnable_per_tensor_affine_backward.not_implemented(
    "_fake_quantize_learnable_per_tensor_affine_backward")


def _rounded_zero_point(xp, zero_point, quant_min, quant_max):
    """Each zero point rounded half to even and clamped, as PyTorch's
    ``zero_point.round().clamp_(quant_min, quant_max)`` (in the zero point's dtype)."""
    if zero_point.dtype.kind == "f":
        zero_point = xp.rint(zero_point)
    return xp.minimum(xp.maximum(zero_point, quant_min), quant_max).astype(zero_point.dtype)


@op("_fake_quantize_learnable_per_channel_affine(input, scale, zero_point, axis, quant_min, "
    "quant_max, grad_factor=1.0)", inputs=3, method=False, out=False, scalars=False,
    grad_fn_name="FakeQuantizeLearnablePerChannelAffineBackward0")
def _fake_quantize_learnable_per_channel_affine(xp, x, scale, zero_point, axis, quant_min,
                                                quant_max, grad_factor):
    """``input`` fake-quantized per slice along ``axis`` at ``scale`` and ``zero_point``
    (rounded, clamped, int32); differentiable in all three tensors."""
    fname = "_fake_quantize_learnable_per_channel_affine"
    axis = int_arg(axis, fname, "axis", 4)
    quant_min = int_arg(quant_min, fname, "quant_min", 5)
    quant_max = int_arg(quant_max, fname, "quant_max", 6)
    zp = _rounded_zero_point(xp, zero_point, quant_min, quant_max).astype(xp.int32)
    return _per_channel_parts(xp, x, scale, zp, axis, quant_min, quant_max)[0]


@_fake_quantize_learnable_per_channel_affine.derivative
def _(grad, x, scale, zero_point, axis, quant_min, quant_max, grad_factor):
    return _fake_quantize_learnable_per_channel_affine_backward(
        grad, x, scale, zero_point, axis, quant_min, quant_max, grad_factor)


@op("_fake_quantize_learnable_per_channel_affine_backward(grad, input, scale, zero_point, axis, "
    "quant_min, quant_max, grad_factor=1.0)", inputs=4, method=False, out=False, scalars=False)
def _fake_quantize_learnable_per_channel_affine_backward(xp, dy, x, scale, zero_point, axis,
                                                         quant_min, quant_max, grad_factor):
    """(input, scale, zero_point) gradients of the per-channel learnable fake quantization."""
    dy, x, scale, zero_point = _float32_operands(dy, x, scale, zero_point)
    if not quant_min <= 0 <= quant_max:
        raise RuntimeError("Expecting `quant_min` <= 0 and `quant_max` >= 0")
    if x.size == 0:
        return x.copy(), scale.copy(), zero_point.copy()
    shape = [1] * x.ndim
    shape[axis] = -1
    zp = _rounded_zero_point(xp, zero_point, quant_min, quant_max).reshape(shape)
    dx, dscale, dzp = _grads(xp, dy, x, scale.reshape(shape), zp, quant_min, quant_max,
                             grad_factor)
    others = tuple(d for d in range(x.ndim) if d != axis)
    return dx, dscale.sum(axis=others, dtype=_F32), dzp.sum(axis=others, dtype=_F32)


_fake_quantize_learnable_per_channel_affine.refuse_forward_ad(
    "_fake_quantize_learnable_per_channel_affine")
_fake_quantize_learnable_per_channel_affine_backward.not_implemented(
    "_fake_quantize_learnable_per_channel_affine_backward")


PUBLIC = {"_fake_quantize_learnable_per_tensor_affine":
          _fake_quantize_learnable_per_tensor_affine.function,
          "_fake_quantize_learnable_per_channel_affine":
          _fake_quantize_learnable_per_channel_affine.function}
