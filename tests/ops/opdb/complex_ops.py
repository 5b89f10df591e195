"""OpInfo entries for ember/ops/complex_ops.py (angle, isreal, complex, polar, view_as_real,
view_as_complex)."""

import math

import numpy as np

import ember
from tests.ops.opdb.core import (ALL, BINARY_SHAPES, COMPLEX, FLOATS, UNARY_SHAPES, ErrorInput,
                                 OpInfo, SampleInput, make, unary_samples)

_SPECIAL = (-1.0, 0.0, -0.0, 2.5, math.nan, math.inf, -math.inf)


def _err(args, error, match, unsupported=False):
    return ErrorInput(SampleInput(args[0], tuple(args[1:])), error, match, unsupported)


def _assemble(re, im):
    """``re + i im`` without NumPy turning ``inf * 0`` into NaN."""
    re, im = np.broadcast_arrays(np.asarray(re), np.asarray(im))
    out = np.empty(re.shape, dtype=np.complex128)
    out.real, out.imag = re, im
    return out


# --- angle, isreal ----------------------------------------------------------------------------

def _angle_ref(a):
    if a.dtype.kind == "c":
        return np.angle(a)
    a = a.astype(np.float64)
    return np.where(a < 0, np.pi, np.where(np.isnan(a), a, 0.0))


def _angle_samples(dtype, rg):
    yield from unary_samples()(dtype, rg)
    if dtype.is_floating_point:
        yield SampleInput(ember.tensor(_SPECIAL, dtype=dtype), name="special")
    if dtype.is_complex:
        values = [complex(x, y) for x in (-1.0, 0.0, -0.0, 2.0) for y in (0.0, -0.0, 1.5)]
        yield SampleInput(ember.tensor(values + [complex(math.inf, -math.inf)], dtype=dtype),
                          name="signed_zeros")


def _angle_grad_samples(dtype, rg):
    for d in (ember.float64, ember.complex128):
        yield from unary_samples(exclude_zero=True)(d, rg)


def _real_result(dtype, sample):
    if dtype.is_complex:
        return dtype.to_real()
    return dtype if dtype.is_floating_point else ember.float32


def _isreal_samples(dtype, rg):
    yield from unary_samples()(dtype, rg)
    if dtype.is_complex:
        yield SampleInput(ember.tensor([1 + 0j, 2j, 0j, -1 + 1e-30j, complex(math.nan, 0)],
                                       dtype=dtype), name="zero_imag")


# --- complex, polar ---------------------------------------------------------------------------

def _pair_samples(low=None):
    def samples(dtype, rg):
        for sa, sb in BINARY_SHAPES:
            yield SampleInput(make(sa, dtype, rg, low=low), (make(sb, dtype, rg),),
                              name=f"{list(sa)}x{list(sb)}")
        yield SampleInput(make((3, 4), dtype, rg, low=low, noncontiguous=True),
                          (make((3, 4), dtype, rg, noncontiguous=True),), name="noncontiguous")
        if not rg:
            special = ember.tensor(_SPECIAL, dtype=dtype)
            yield SampleInput(special.abs() if low == 0 else special,
                              (special.flip(0),), name="special")
    return samples


def _pair_errors(name):
    def errors():
        f, d = ember.ones(2), ember.ones(2, dtype=ember.float64)
        i, b = ember.ones(2, dtype=ember.int64), ember.ones(2, dtype=ember.bfloat16)
        both = "Expected both inputs to be Half, Float or Double tensors but got"
        yield _err((i, f), RuntimeError, f"{both} Long and Float")
        yield _err((f, i), RuntimeError, f"{both} Float and Long")
        yield _err((b, b), RuntimeError, f"{both} BFloat16 and BFloat16")
        c = ember.ones(2, dtype=ember.complex64)
        yield _err((c, c), RuntimeError, f"{both} ComplexFloat and ComplexFloat")
        yield _err((f, d), RuntimeError, "Expected object of scalar type Float but got scalar "
                   "type Double for second argument")
        yield _err((d, f), RuntimeError, "Expected object of scalar type Double but got scalar "
                   "type Float for second argument")
        yield _err((f, ember.ones(3)), RuntimeError, r"The size of tensor a \(2\) must match "
                   r"the size of tensor b \(3\) at non-singleton dimension 0")
        second = "imag" if name == "complex" else "angle"
        yield _err((f, 1.0), TypeError, f"argument '{second}' \\(position 2\\) must be Tensor, "
                   f"not float")
        h = ember.ones(2, dtype=ember.float16)
        if name == "polar":
            yield _err((h, h), NotImplementedError, "\"polar_cpu\" not implemented for 'Half'")
        else:                           # PyTorch gives complex32, which ember lacks
            yield _err((h, h), RuntimeError, "complex32", unsupported=True)
    return errors


def _complex_result(dtype, sample):
    return ember.complex128 if dtype is ember.float64 else ember.complex64


def _polar_ref(r, theta):
    return _assemble(r * np.cos(theta), r * np.sin(theta))


# --- view_as_real, view_as_complex ------------------------------------------------------------

def _view_as_real_samples(dtype, rg):
    # no empty gradient sample: the parity test's empty cotangent has zero strides, which
    # torch's backward (view_as_complex) rejects
    shapes = tuple(s for s in UNARY_SHAPES if not rg or math.prod(s))
    yield from unary_samples(shapes=shapes)(dtype, rg)
    yield SampleInput(make((6,), dtype, rg)[::2], name="strided")
    yield SampleInput(make((3, 1), dtype, rg).expand(3, 4), name="expanded")


def _view_as_real_errors():
    yield _err((ember.ones(3),), RuntimeError,
               "view_as_real is only supported for complex tensors")


def _view_as_complex_samples(dtype, rg):
    def m(shape):
        return make(shape, dtype, rg)
    yield SampleInput(m((3, 2)), name="[3, 2]")
    yield SampleInput(m((2,)), name="to_0dim")
    yield SampleInput(m((2, 3, 2)), name="[2, 3, 2]")
    yield SampleInput(m((3, 2, 2)).transpose(0, 1), name="transposed")
    yield SampleInput(m((4, 2))[::2], name="strided_rows")
    yield SampleInput(m((3, 2)).unsqueeze(0).expand(2, 3, 2), name="expanded")
    yield SampleInput(m((5, 2))[1:], name="offset_even")


def _view_as_complex_ref(a):
    return _assemble(a[..., 0], a[..., 1])


def _view_as_complex_errors():
    yield _err((ember.zeros(3, 2, dtype=ember.int64),), RuntimeError,
               "view_as_complex is only supported for half, float and double tensors, but got "
               "a tensor of scalar type: Long")
    yield _err((ember.zeros(3, 2, dtype=ember.bfloat16),), RuntimeError,
               "but got a tensor of scalar type: BFloat16")
    yield _err((ember.tensor(1.0),), RuntimeError,
               "Input tensor must have one or more dimensions")
    yield _err((ember.zeros(3, 3),), RuntimeError, "Tensor must have a last dimension of size 2")
    yield _err((ember.zeros(2, 3).t(),), RuntimeError,
               "Tensor must have a last dimension with stride 1")
    yield _err((ember.zeros(3, 3)[:, :2],), RuntimeError,
               "Tensor must have a stride divisible by 2 for all but last dimension")
    yield _err((ember.zeros(3, 2, dtype=ember.float16),), RuntimeError, "complex32",
               unsupported=True)


OPS = [
    OpInfo("angle", _angle_ref, _angle_samples, dtypes=ALL, result_dtype=_real_result,
           grad_samples=_angle_grad_samples, gradgrad=True),
    OpInfo("isreal", np.isreal, _isreal_samples, dtypes=ALL, result_dtype="bool", grad=False),
    OpInfo("complex", _assemble, _pair_samples(), dtypes=FLOATS, result_dtype=_complex_result,
           gradgrad=True, error_inputs=_pair_errors("complex")),
    OpInfo("polar", _polar_ref, _pair_samples(low=0), dtypes=FLOATS,
           result_dtype=_complex_result, gradgrad=True, error_inputs=_pair_errors("polar")),
    # complex-only ops: their gradients are checked in tests/ops/test_complex_ops.py
    OpInfo("view_as_real", lambda a: np.stack([a.real, a.imag], -1), _view_as_real_samples,
           dtypes=COMPLEX, result_dtype=lambda dtype, sample: dtype.to_real(),
           error_inputs=_view_as_real_errors),
    OpInfo("view_as_complex", _view_as_complex_ref, _view_as_complex_samples, dtypes=FLOATS,
           result_dtype=_complex_result, gradgrad=True, error_inputs=_view_as_complex_errors),
]
