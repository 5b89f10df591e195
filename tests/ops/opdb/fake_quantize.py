"""OpInfo entries for ember/ops/fake_quantize.py: fake_quantize_per_tensor_affine and
fake_quantize_per_channel_affine.

The scales are powers of two, so that ``input / scale`` is exact and the float64 reference
rounds every tie as the kernels do. The gradient is straight through inside the range, not
the derivative of a step function, so gradcheck does not apply (the parity tests compare
the gradients with PyTorch's)."""

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make


def _s(x, *args, name=""):
    return SampleInput(x, args, name=name)


def _per_tensor_ref(x, scale, zero_point, quant_min, quant_max):
    scale = float(np.asarray(scale).reshape(()))
    zero_point = int(np.asarray(zero_point).reshape(()))      # a float one is truncated
    q = np.clip(np.rint(x.astype(np.float64) / scale) + zero_point, quant_min, quant_max)
    return ((q - zero_point) * scale).astype(x.dtype)


def _per_tensor_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, low=-3, high=3, **kw)
    yield _s(mk(6), 0.25, 1, -8, 7, name="1d")
    yield _s(mk(), 0.5, 0, 0, 255, name="0-dim")
    yield _s(mk(0, 3), 0.25, 0, -128, 127, name="empty")
    yield _s(mk(2, 3, 4), 0.125, -3, -16, 15, name="3d")
    yield _s(mk(3, 4, noncontiguous=True), 0.25, 2, -4, 4, name="noncontiguous")
    yield _s(mk(5), ember.tensor(0.25), ember.tensor(1), -8, 7, name="tensor_qparams")
    yield _s(mk(5), ember.tensor([0.5]), ember.tensor([2.7]), -8, 7, name="float_zero_point")
    yield _s(mk(5), ember.tensor(0.25), 3, -8, 7, name="0-dim_scale")


def _per_tensor_errors():
    x = ember.ones(3)
    yield ErrorInput(_s(x, 0.1, 0, 5, 3), RuntimeError,
                     "`quant_min` should be less than or         equal to `quant_max`.")
    yield ErrorInput(_s(x, 0.1, 9, 0, 5), RuntimeError,
                     "`zero_point` must be between `quant_min` and `quant_max`.")
    yield ErrorInput(_s(x.long(), 0.1, 0, 0, 5), NotImplementedError,
                     "\"fake_quantize_tensor_cachemask_kernel_type_handling\" not implemented "
                     "for 'Long'")
    yield ErrorInput(_s(x, ember.ones(2), ember.tensor(0), 0, 5), RuntimeError,
                     "a Tensor with 2 elements cannot be converted to Scalar")


def _per_channel_ref(x, scale, zero_point, axis, quant_min, quant_max):
    shape = [1] * x.ndim
    shape[axis] = -1
    scale = scale.astype(np.float64).reshape(shape)
    zero_point = zero_point.astype(np.float64).reshape(shape)
    if np.all(zero_point == np.rint(zero_point)):
        q = np.rint(x.astype(np.float64) / scale) + zero_point
    else:
        q = np.rint(x.astype(np.float64) / scale + zero_point)
    return ((np.clip(q, quant_min, quant_max) - zero_point) * scale).astype(x.dtype)


def _per_channel_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, low=-3, high=3, **kw)
    scales = ember.tensor([0.25, 0.125, 0.5])
    ints = ember.tensor([0, 2, -1], dtype=ember.int32)
    yield _s(mk(3, 4), scales, ints, 0, -8, 7, name="rows")
    yield _s(mk(2, 3, 4), scales, ints, 1, -16, 15, name="middle_axis")
    yield _s(mk(4, 3, noncontiguous=True), scales, ints, 1, -2, 15, name="noncontiguous")
    yield _s(mk(0, 3), scales, ints, 1, -8, 7, name="empty")
    yield _s(mk(3, 5), scales, ember.tensor([0.5, -1.25, 2.0]), 0, -8, 7, name="float_zp")
    yield _s(mk(3, 2), scales, ember.tensor([0.5, 1.0, -2.0], dtype=ember.float16), 0, 0, 7,
             name="half_zp")


def _per_channel_errors():
    x = ember.ones(2, 3)
    i32 = ember.int32
    yield ErrorInput(_s(x, ember.ones(2).double(), ember.zeros(2, dtype=i32), 0, -8, 7),
                     RuntimeError, "Scale must be Float or BFloat16, found Double")
    yield ErrorInput(_s(x, ember.ones(2), ember.zeros(2, dtype=ember.int64), 0, -8, 7),
                     RuntimeError, "Zero-point must be Int32, Float or Half, found Long")
    yield ErrorInput(_s(x, ember.ones(2, 1), ember.zeros(2, dtype=i32), 0, -8, 7),
                     RuntimeError, "scale should be a 1-D tensor")
    yield ErrorInput(_s(x, ember.ones(3), ember.zeros(2, dtype=i32), 0, -8, 7),
                     RuntimeError, "scale and zero-point need to have the same dimensions")
    yield ErrorInput(_s(x, ember.ones(3), ember.zeros(3, dtype=i32), 0, -8, 7), RuntimeError,
                     "dimensions of scale and zero-point are not consistent with input tensor")
    yield ErrorInput(_s(x, ember.ones(2), ember.zeros(2, dtype=i32), 2, -8, 7), IndexError,
                     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)")
    yield ErrorInput(_s(x, ember.ones(2), ember.zeros(2, dtype=i32), -2, -8, 7), RuntimeError,
                     "`axis` must be between 0 and number of dimensions of input")
    yield ErrorInput(_s(x, ember.ones(2), ember.full((2,), 9, dtype=i32), 0, -8, 7),
                     RuntimeError, "`zero_point` must be between `quant_min` and `quant_max`.")
    yield ErrorInput(_s(x.long(), ember.ones(2), ember.zeros(2, dtype=i32), 0, -8, 7),
                     NotImplementedError, "\"fake_quantize_channel_cachemask_cpu_type_handling\" "
                     "not implemented for 'Long'")


OPS = [
    OpInfo("fake_quantize_per_tensor_affine", _per_tensor_ref, _per_tensor_samples,
           dtypes=FLOATS + LOW, grad=False, error_inputs=_per_tensor_errors),
    OpInfo("fake_quantize_per_channel_affine", _per_channel_ref, _per_channel_samples,
           dtypes=FLOATS + LOW, grad=False, error_inputs=_per_channel_errors),
]
