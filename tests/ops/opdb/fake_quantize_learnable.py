"""OpInfo entries for ember/ops/fake_quantize_learnable.py: the learnable (LSQ+) fake
quantizations and their backward kernels.

Scales are powers of two, so ``input / scale`` is exact and the float64 references round every
tie as the float32 kernels do. The forward's gradient is straight through for the input and
LSQ's estimate for scale and zero point, not a derivative of a step function: gradcheck does
not apply, the backward ops' entries check the gradients' values instead (and the parity tests
compare them with PyTorch's bit for bit)."""

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make


def _s(*args, name=""):
    return SampleInput(args[0], args[1:], name=name)


def _fq(x, scale, zp, quant_min, quant_max):
    q = np.clip(np.rint(x.astype(np.float64) / scale) + zp, quant_min, quant_max)
    return ((q - zp) * scale).astype(x.dtype)


def _grads(dy, x, scale, zp, quant_min, quant_max, grad_factor):
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    xq = zp + np.rint(x / scale)
    inside = (xq >= quant_min) & (xq <= quant_max)
    xfq = (np.clip(xq, quant_min, quant_max) - zp) * scale
    bound = np.where(xq < quant_min, quant_min - zp, quant_max - zp)
    dscale = np.where(inside, dy * (xfq - x) / scale, dy * bound) * grad_factor
    dzp = np.where(inside, 0, -dy * scale) * grad_factor
    return dy * inside, dscale, dzp


def _tensor_zp(zero_point, quant_min, quant_max, forward):
    zp = float(zero_point.reshape(-1)[0])
    zp = np.rint(zp) if forward else zp + 0.5       # PyTorch's backward truncates zp + 0.5
    return int(min(max(zp, quant_min), quant_max))


def _per_tensor_ref(x, scale, zero_point, quant_min, quant_max, grad_factor=1.0):
    zp = _tensor_zp(zero_point, quant_min, quant_max, True)
    return _fq(x, float(scale.reshape(-1)[0]), zp, quant_min, quant_max)


def _per_tensor_backward_ref(dy, x, scale, zero_point, quant_min, quant_max, grad_factor=1.0):
    if not x.size:          # PyTorch hands back the input, scale and zero point themselves
        return x, scale, zero_point
    zp = _tensor_zp(zero_point, quant_min, quant_max, False)
    dx, dscale, dzp = _grads(dy, x, float(scale.reshape(-1)[0]), zp, quant_min, quant_max,
                             grad_factor)
    f32 = np.float32
    return dx.astype(f32), dscale.sum().reshape(1).astype(f32), dzp.sum().reshape(1).astype(f32)


def _channel_shape(x, axis):
    shape = [1] * x.ndim
    shape[axis] = -1
    return shape


def _per_channel_ref(x, scale, zero_point, axis, quant_min, quant_max, grad_factor=1.0):
    shape = _channel_shape(x, axis)
    zp = np.clip(np.rint(zero_point.astype(np.float64)), quant_min, quant_max)
    return _fq(x, scale.astype(np.float64).reshape(shape), zp.reshape(shape), quant_min,
               quant_max)


def _per_channel_backward_ref(dy, x, scale, zero_point, axis, quant_min, quant_max,
                              grad_factor=1.0):
    if not x.size:
        return x, scale, zero_point
    shape = _channel_shape(x, axis)
    zp = np.clip(np.rint(zero_point.astype(np.float64)), quant_min, quant_max).reshape(shape)
    dx, dscale, dzp = _grads(dy, x, scale.astype(np.float64).reshape(shape), zp, quant_min,
                             quant_max, grad_factor)
    others = tuple(d for d in range(x.ndim) if d != axis)
    f32 = np.float32
    return dx.astype(f32), dscale.sum(others).astype(f32), dzp.sum(others).astype(f32)


def _mk(shape, dtype, rg=False, **kw):
    return make(shape, dtype, rg, low=-3, high=3, **kw)


def _per_tensor_samples(dtype, rg):
    yield _s(_mk((6,), dtype, rg), ember.tensor([0.25]), ember.tensor([1.4]), -8, 7, name="1d")
    yield _s(_mk((2, 3, 4), dtype, rg), ember.tensor([0.125]), ember.tensor([2.5]), -16, 15,
             0.5, name="tie_zero_point")
    yield _s(_mk((3, 4), dtype, rg, noncontiguous=True), ember.tensor([0.5]),
             ember.tensor([30.0]), -4, 4, name="clamped_zero_point")
    yield _s(_mk((0, 3), dtype, rg), ember.tensor([0.25]), ember.tensor([0.0]), -8, 7,
             name="empty")


def _per_tensor_backward_samples(dtype, rg):
    for sample in _per_tensor_samples(dtype, False):
        x = sample.input
        yield SampleInput(_mk(tuple(x.shape), dtype), (x,) + tuple(sample.args),
                          name=sample.name)
    yield _s(_mk((5,), dtype), _mk((5,), dtype), ember.tensor([0.25]), ember.tensor([-0.5]),
             -2, 2, 3.0, name="out_of_range")


def _per_channel_samples(dtype, rg):
    scales = ember.tensor([0.25, 0.125, 0.5])
    yield _s(_mk((3, 4), dtype, rg), scales, ember.tensor([0.5, 2.5, -1.4]), 0, -8, 7,
             name="rows")
    yield _s(_mk((2, 3, 4), dtype, rg), scales, ember.tensor([0.0, 9.0, -1.0]), 1, -4, 3,
             0.25, name="middle_axis")
    yield _s(_mk((4, 3), dtype, rg, noncontiguous=True), scales, ember.tensor([1.0, 2.0, 3.6]),
             1, -2, 15, name="noncontiguous")
    yield _s(_mk((0, 3), dtype, rg), scales, ember.zeros(3), 1, -8, 7, name="empty")


def _per_channel_backward_samples(dtype, rg):
    for sample in _per_channel_samples(dtype, False):
        x = sample.input
        yield SampleInput(_mk(tuple(x.shape), dtype), (x,) + tuple(sample.args),
                          name=sample.name)


def _per_tensor_errors():
    x = ember.ones(3)
    yield ErrorInput(_s(x, ember.tensor(0.5), ember.tensor([0.0]), -8, 7), IndexError,
                     "select\\(\\) cannot be applied to a 0-dim tensor.")
    yield ErrorInput(_s(x, ember.tensor([0.5]), ember.tensor([0.0]), 5, 3), RuntimeError,
                     "`quant_min` should be less than or         equal to `quant_max`.")


def _per_tensor_backward_errors():
    x, s, z = ember.ones(3), ember.tensor([0.5]), ember.tensor([0.0])
    yield ErrorInput(_s(x.double(), x.double(), s, z, -8, 7), RuntimeError,
                     "Expected dY_.scalar_type\\(\\) == ScalarType::Float to be true")
    yield ErrorInput(_s(x, x, s, z.long(), -8, 7), RuntimeError,
                     "Expected zero_point_.scalar_type\\(\\) == ScalarType::Float to be true")
    yield ErrorInput(_s(x, x, s, z, 1, 7), RuntimeError,
                     "and the quantization range should include 0.")


def _per_channel_errors():
    x = ember.ones(2, 3)
    yield ErrorInput(_s(x, ember.ones(3), ember.zeros(3), 1.0, -8, 7), TypeError,
                     "_fake_quantize_learnable_per_channel_affine\\(\\): argument 'axis' "
                     "\\(position 4\\) must be int, not float")
    yield ErrorInput(_s(x, ember.ones(3).double(), ember.zeros(3), 1, -8, 7), RuntimeError,
                     "Scale must be Float or BFloat16, found Double")
    yield ErrorInput(_s(x, ember.ones(2), ember.zeros(2), 1, -8, 7), RuntimeError,
                     "dimensions of scale and zero-point are not consistent with input tensor")


def _per_channel_backward_errors():
    x, s, z = ember.ones(2, 3), ember.ones(3), ember.zeros(3)
    yield ErrorInput(_s(x, x, s, z.int(), 1, -8, 7), RuntimeError,
                     "Expected zero_point_.scalar_type\\(\\) == ScalarType::Float to be true")
    yield ErrorInput(_s(x, x, s, z, 1, 1, 7), RuntimeError,
                     "Expecting `quant_min` <= 0 and `quant_max` >= 0")


def _aten(name):
    """PyTorch's backward kernel ``name`` (only under ``torch.ops.aten``), for the parity tests."""
    return lambda *args: getattr(__import__("torch").ops.aten, name)(*args)


OPS = [
    OpInfo("_fake_quantize_learnable_per_tensor_affine", _per_tensor_ref, _per_tensor_samples,
           dtypes=FLOATS + LOW, grad=False, error_inputs=_per_tensor_errors,
           torch_name="_fake_quantize_learnable_per_tensor_affine"),
    OpInfo("_fake_quantize_learnable_per_tensor_affine_backward", _per_tensor_backward_ref,
           _per_tensor_backward_samples, dtypes=(ember.float32,), grad=False,
           error_inputs=_per_tensor_backward_errors,
           torch_op=_aten("_fake_quantize_learnable_per_tensor_affine_backward")),
    OpInfo("_fake_quantize_learnable_per_channel_affine", _per_channel_ref,
           _per_channel_samples, dtypes=FLOATS + LOW, grad=False,
           error_inputs=_per_channel_errors,
           torch_name="_fake_quantize_learnable_per_channel_affine"),
    OpInfo("_fake_quantize_learnable_per_channel_affine_backward", _per_channel_backward_ref,
           _per_channel_backward_samples, dtypes=(ember.float32,), grad=False,
           error_inputs=_per_channel_backward_errors,
           torch_op=_aten("_fake_quantize_learnable_per_channel_affine_backward")),
]
