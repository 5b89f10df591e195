"""OpInfo entries for ember/ops/activations.py and activations_smooth.py."""

import math

import numpy as np
import scipy.special as sp

import ember
from tests.ops.opdb.core import (COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput,
                                 make, unary_samples)

FLOATING = FLOATS + LOW
SIGNED_INTS = (ember.int8, ember.int16, ember.int32, ember.int64)
# values at and around the kinks of the piecewise ops (not used for gradients)
EDGES = (-3.0, -1.0, -0.5, 0.0, -0.0, 0.5, 1.0, 3.0, 6.0, 25.0, -25.0, math.inf, -math.inf,
         math.nan)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _split(p):
    """A parameter set as (args, kwargs): a tuple is positional, a dict keywords."""
    return (p, {}) if isinstance(p, tuple) else ((), p)


def _with_params(*params):
    """Unary samples, once per parameter set, plus the edge values for floating dtypes."""
    def samples(dtype, requires_grad):
        for p in params or ((),):
            for s in unary_samples()(dtype, requires_grad):
                yield SampleInput(s.input, *_split(p), name=f"{s.name}{p}")
        if dtype.is_floating_point:
            yield SampleInput(ember.tensor(EDGES, dtype=dtype), *_split(params[0] if params
                                                                         else ()), name="edges")
    return samples


def _grad_samples(*params):
    def samples(dtype, requires_grad):
        for p in params or ((),):
            for s in unary_samples()(dtype, requires_grad):
                yield SampleInput(s.input, *_split(p), name=f"{s.name}{p}")
    return samples


def _dtype_errors(kernel, dtypes=(ember.int64, ember.bool, ember.complex64), args=()):
    def errors():
        for d in dtypes:
            yield ErrorInput(SampleInput(ember.ones(3, dtype=d), args), NotImplementedError,
                             f"\"{kernel}\" not implemented for '{d._torch_name}'")
    return errors


def _floating(name, ref, kernel, *params, dtypes=FLOATING, more_errors=None, **kw):
    """An entry for a floating-point-only op with NumPy reference ``ref``."""
    refused = tuple(d for d in (ember.int64, ember.bool, ember.complex64) if d not in dtypes)

    def errors():
        args, kwargs = _split(params[0] if params else ())
        for e in _dtype_errors(kernel, refused, args)():
            e.sample.kwargs = kwargs
            yield e
        if more_errors:
            yield from more_errors()
    return OpInfo(name, ref, _with_params(*params), dtypes=dtypes,
                  grad_samples=_grad_samples(*params), error_inputs=errors,
                  **{"gradgrad": True, **kw})


# --- references -------------------------------------------------------------------------------

def _int_bound(x, v):
    return int(v) if np.asarray(x).dtype.kind in "iu" else v


def _hardtanh_ref(x, min_val=-1.0, max_val=1.0):
    return np.minimum(np.maximum(x, _int_bound(x, min_val)), _int_bound(x, max_val))


def _threshold_ref(x, threshold, value):
    x = np.asarray(x)
    return np.where(x <= _int_bound(x, threshold), np.asarray(value).astype(x.dtype), x)


def _elu_ref(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return scale * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0) * input_scale))


_ELU_KINDS = {"elu": lambda a: (a, 1.0, 1.0), "selu": lambda a: (SELU_ALPHA, SELU_SCALE, 1.0),
              "celu": lambda a: (a, 1.0, 1 / a)}


def _gelu_ref(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + sp.erf(x / math.sqrt(2)))


def _softplus_ref(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x, np.logaddexp(0, x * beta) / beta)


def _glu_ref(x, dim=-1):
    a, b = np.split(x, 2, axis=dim)
    return a * sp.expit(b)


def _prelu_ref(x, w):
    x, w = np.asarray(x), np.asarray(w)
    w = w.reshape((1, -1) + (1,) * (x.ndim - 2) if x.ndim >= 2 else ())
    return np.where(x > 0, x, w * x)


def _silu_ref(x):
    x = np.asarray(x)
    return x / (1 + np.exp(-x)) if x.dtype.kind == "c" else x * sp.expit(x)


# --- samples and errors -----------------------------------------------------------------------

def _hardtanh_samples(dtype, requires_grad):
    params = ((-1.0, 1.0), (-2.5, 3.5)) if dtype is not ember.uint8 else ((0, 6), (1.5, 4.0))
    yield from _with_params(*params)(dtype, requires_grad)


def _hardtanh_errors():
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.uint8)), RuntimeError,
                     "cannot do hardtanh on an unsigned type with negative limits")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.bool)), RuntimeError,
                     "Bool inputs not supported for hardtanh")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), NotImplementedError,
                     "clamp is not supported for complex types")


def _relu_errors():
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.bool)), RuntimeError,
                     "Boolean inputs not supported for relu")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), NotImplementedError,
                     "clamp is not supported for complex types")


def _threshold_samples(dtype, requires_grad):
    low = 3.0 if dtype is ember.uint8 else -1.0
    yield from _with_params((0.5, 2.0), (low, 7.0))(dtype, requires_grad)
    if dtype.is_signed and not dtype.is_floating_point:
        yield SampleInput(ember.tensor([-1, 0, 1, 2], dtype=dtype), (-0.5, 2.7),
                          name="float_params_truncate")


def _threshold_errors():
    yield from _dtype_errors("threshold_cpu", (ember.bool, ember.complex64), (0, 1))()
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.uint8), (-1.0, 2)), RuntimeError,
                     "value cannot be converted to type uint8_t without overflow")


def _prelu_samples(dtype, requires_grad):
    def t(*shape, **kw):
        return make(shape, dtype, requires_grad, **kw)
    yield SampleInput(t(2, 3, 4), (t(3),), name="channels")
    yield SampleInput(t(2, 3, 2, 2), (t(1),), name="shared")
    yield SampleInput(t(5), (t(1),), name="1d")
    yield SampleInput(t(), (t(1),), name="0d")
    yield SampleInput(t(2, 3), (t(),), name="0d_weight")
    yield SampleInput(t(3, 4, noncontiguous=True), (t(4),), name="noncontiguous")
    yield SampleInput(t(0, 3), (t(3),), name="empty")


def _prelu_errors():
    x = ember.randn(2, 3)
    yield ErrorInput(SampleInput(x, (ember.randn(2),)), RuntimeError,
                     "Found parameter numbers = 2 and channel size = 3")
    yield ErrorInput(SampleInput(ember.randn(4), (ember.randn(3),)), RuntimeError,
                     "Found parameter numbers = 3 and channel size = 1")
    yield ErrorInput(SampleInput(x, (ember.randn(1, 3),)), RuntimeError,
                     "Expected `weight` to be a scalar or 1D tensor, but got: ndim = 2")
    yield ErrorInput(SampleInput(ember.tensor(1.0), (ember.randn(2),)), RuntimeError,
                     "Not allow zero-dim input tensor")
    yield ErrorInput(SampleInput(x, (ember.randn(3, dtype=ember.float64),)), RuntimeError,
                     "Type promoting not supported. Got Float and Double")
    i = ember.ones(3, dtype=ember.int64)
    yield ErrorInput(SampleInput(i, (i[:1],)), NotImplementedError,
                     "\"prelu_cpu\" not implemented for 'Long'")


def _softshrink_errors():
    for d, text in ((ember.float32, "3.40282e\\+38] for input dtype Float"),
                    (ember.float64, "1.79769e\\+308] for input dtype Double"),
                    (ember.float16, "65504] for input dtype Half")):
        yield ErrorInput(SampleInput(ember.ones(2, dtype=d), (-0.25,)), RuntimeError,
                         f"lambda must be in range \\[0, {text}, but found -0.25")


def _celu_errors():
    yield ErrorInput(SampleInput(ember.ones(2), (0.0,)), RuntimeError,
                     "ZeroDivisionError: alpha cannot be 0 for CELU")


def _gelu_errors():
    yield ErrorInput(SampleInput(ember.ones(2), (), {"approximate": "fast"}), RuntimeError,
                     "approximate argument must be either none or tanh")


def _glu_samples(dtype, requires_grad):
    def t(*shape, **kw):
        return make(shape, dtype, requires_grad, **kw)
    yield SampleInput(t(4), name="1d")
    yield SampleInput(t(2, 6), name="last")
    yield SampleInput(t(4, 3), (0,), name="dim0")
    yield SampleInput(t(2, 4, 3), (-2,), name="middle")
    yield SampleInput(t(3, 4, noncontiguous=True), name="noncontiguous")
    yield SampleInput(t(0, 4), name="empty")


def _glu_errors():
    yield ErrorInput(SampleInput(ember.ones(3)), RuntimeError,
                     "Halving dimension must be even, but dimension 0 is size 3")
    yield ErrorInput(SampleInput(ember.ones(4), (2,)), IndexError, "Dimension out of range")
    yield ErrorInput(SampleInput(ember.tensor(1.0)), RuntimeError,
                     "glu does not support scalars")


def _gelu_backward_ref(grad, x, approximate):
    if approximate == "tanh":
        k, c = math.sqrt(2 / math.pi), 0.044715
        t = np.tanh(k * (x + c * x ** 3))
        return grad * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x))
    return grad * (0.5 * (1 + sp.erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) /
                   math.sqrt(2 * math.pi))


def _gelu_backward_samples(dtype, requires_grad):
    for approximate in ("none", "tanh"):
        for shape in ((5,), (), (0,), (2, 3)):
            yield SampleInput(make(shape, dtype, requires_grad),
                              (make(shape, dtype, requires_grad, low=-4, high=4), approximate),
                              name=f"{approximate}{list(shape)}")


def _masked_grad_samples(dtype, requires_grad):
    def mask(*shape):
        return make(shape, ember.bool)
    yield SampleInput(make((5,), dtype, requires_grad), (make((5,), dtype, requires_grad),
                                                          mask(5)), name="1d")
    yield SampleInput(make((), dtype, requires_grad), (make((), dtype, requires_grad),
                                                        mask()), name="0d")
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True),
                      (make((3, 4), dtype, requires_grad), make((3, 4), dtype)),
                      name="factor")
    yield SampleInput(make((3, 1), dtype, requires_grad),
                      (make((3, 4), dtype, requires_grad), mask(3, 4)), name="broadcast_grad")


def _pair_samples(low, high, *params):
    """(grad_output, input) samples of a fused backward op, inputs in [low, high]."""
    def samples(dtype, requires_grad):
        for shape in ((5,), (), (0,), (2, 3)):
            yield SampleInput(make(shape, dtype, requires_grad),
                              (make(shape, dtype, requires_grad, low=low, high=high), *params),
                              name=str(list(shape)))
        yield SampleInput(make((3, 1), dtype, requires_grad),
                          (make((3, 4), dtype, requires_grad, low=low, high=high), *params),
                          name="broadcast_grad")
    return samples


def _threshold_backward_samples(dtype, requires_grad):
    yield from _pair_samples(-2, 2, 0)(dtype, requires_grad)
    yield SampleInput(make((4,), dtype, requires_grad),
                      (ember.tensor([0.5, 1.0, 1.5, math.nan], dtype=dtype), 1.0), name="edges")


def _silu_backward_ref(grad, x):
    s = sp.expit(x)
    return grad * s * (1 + x * (1 - s))


def _elu_backward_samples(dtype, requires_grad):
    # (alpha, scale, input_scale, is_result): elu, selu, celu, and from the result
    for params in ((1.0, 1.0, 1.0, False), (SELU_ALPHA, SELU_SCALE, 1.0, False),
                   (2.0, 1.0, 0.5, False), (1.5, 1.0, 1.0, True)):
        low = -params[0] if params[3] else -4
        for s in _pair_samples(low, 4)(dtype, requires_grad):
            yield SampleInput(s.input, (*params, s.args[0]), name=f"{s.name}{params}")


def _elu_backward_ref(grad, alpha, scale, input_scale, is_result, x):
    if is_result:
        neg = grad * input_scale * (x + alpha * scale)
    else:
        neg = grad * input_scale * alpha * scale * np.exp(np.minimum(x, 0) * input_scale)
    return np.where(x <= 0, neg, grad * scale)


def _softplus_backward_ref(grad, x, beta, threshold):
    return np.where(x * beta > threshold, grad, grad * sp.expit(x * beta))


def _mish_backward_ref(grad, x):
    t = np.tanh(np.logaddexp(0, x))
    return grad * (t + x * sp.expit(x) * (1 - t * t))


def _hardswish_backward_ref(grad, x):
    return np.where(x <= -3, 0, np.where(x < 3, grad * (x / 3 + 0.5), grad))


def _glu_backward_samples(dtype, requires_grad):
    """(grad_output, input, dim) samples: the gradient has half of input's size along dim."""
    def t(*shape, **kw):
        return make(shape, dtype, requires_grad, **kw)
    yield SampleInput(t(2), (t(4), -1), name="1d")
    yield SampleInput(t(2, 3), (t(2, 6), -1), name="last")
    yield SampleInput(t(2, 3), (t(4, 3), 0), name="dim0")
    yield SampleInput(t(2, 2, 3), (t(2, 4, 3, noncontiguous=True), 1), name="noncontiguous")
    yield SampleInput(t(0, 2), (t(0, 4), -1), name="empty")


def _glu_backward_ref(grad, x, dim):
    a, b = np.split(x, 2, axis=dim)
    s = sp.expit(b)
    return np.concatenate([grad * s, grad * s * (1 - s) * a], axis=dim)


def _prelu_kernel_backward_samples(dtype, requires_grad):
    """(grad_output, input, weight) samples, the weight already shaped to broadcast."""
    def t(*shape, **kw):
        return make(shape, dtype, requires_grad, **kw)
    yield SampleInput(t(2, 3, 4), (t(2, 3, 4), t(1, 3, 1)), name="channels")
    yield SampleInput(t(5), (t(5), t(1)), name="shared")
    yield SampleInput(t(2, 3), (t(2, 3), t()), name="0d_weight")
    yield SampleInput(t(0, 3), (t(0, 3), t(1, 3)), name="empty")


def _prelu_kernel_backward_ref(grad, x, w):
    positive = x > 0
    return np.where(positive, grad, w * grad), np.where(positive, 0, x * grad)


def _log_sigmoid_backward_torch(grad, x):
    import torch
    return torch.ops.aten.log_sigmoid_backward(grad, x, torch.ops.aten.log_sigmoid_forward(x)[1])


def _elu_torch(x, alpha, kind):
    import torch
    F = torch.nn.functional
    return F.selu(x) if kind == "selu" else getattr(F, kind)(x, alpha)


def _aten(name):
    """A torch ATen op by name (for ops torch has only under torch.ops.aten)."""
    def call(*args):
        import torch
        return getattr(torch.ops.aten, name)(*args)
    return call


OPS = [
    OpInfo("_masked_grad", lambda g, x, m: (g * m).astype(np.asarray(g).dtype),
           _masked_grad_samples, dtypes=FLOATS + LOW, gradgrad=True),
    OpInfo("_gelu_backward", _gelu_backward_ref, _gelu_backward_samples, dtypes=FLOATING,
           gradgrad=True),
    OpInfo("_threshold_backward", lambda g, x, t: np.where(x <= t, 0, g).astype(g.dtype),
           _threshold_backward_samples, dtypes=FLOATING, gradgrad=True,
           torch_op=_aten("threshold_backward")),
    OpInfo("_silu_backward", _silu_backward_ref, _pair_samples(-4, 4), dtypes=FLOATING,
           gradgrad=True, torch_op=_aten("silu_backward")),
    OpInfo("_leaky_relu_backward", lambda g, x, s, r: np.where(x > 0, g, g * s),
           _pair_samples(-2, 2, 0.2, False), dtypes=FLOATING, gradgrad=True,
           torch_op=_aten("leaky_relu_backward")),
    OpInfo("_hardtanh_backward", lambda g, x, lo, hi: np.where((x <= lo) | (x >= hi), 0, g),
           _pair_samples(-2, 2, -1.0, 1.5), dtypes=FLOATING, gradgrad=True,
           torch_op=_aten("hardtanh_backward")),
    OpInfo("_hardshrink_backward", lambda g, x, lambd: np.where(np.abs(x) <= lambd, 0, g),
           _pair_samples(-2, 2, 0.5), dtypes=FLOATING, gradgrad=True,
           torch_op=_aten("hardshrink_backward")),
    OpInfo("_softshrink_backward", lambda g, x, lambd: np.where(np.abs(x) <= lambd, 0, g),
           _pair_samples(-2, 2, 0.5), dtypes=FLOATING, gradgrad=True,
           torch_op=_aten("softshrink_backward")),
    OpInfo("_hardsigmoid_backward", lambda g, x: np.where(np.abs(x) < 3, g / 6, 0),
           _pair_samples(-4, 4), dtypes=FLOATING, gradgrad=True,
           torch_op=_aten("hardsigmoid_backward")),
    OpInfo("_hardswish_backward", _hardswish_backward_ref, _pair_samples(-4, 4),
           dtypes=FLOATING, gradgrad=True, torch_op=_aten("hardswish_backward")),
    OpInfo("_elu_backward", _elu_backward_ref, _elu_backward_samples, dtypes=FLOATING,
           gradgrad=True, torch_op=_aten("elu_backward")),
    OpInfo("_softplus_backward", _softplus_backward_ref, _pair_samples(-4, 4, 2.0, 3.0),
           dtypes=FLOATING, gradgrad=True, torch_op=_aten("softplus_backward")),
    OpInfo("_mish_backward", _mish_backward_ref, _pair_samples(-4, 4), dtypes=FLOATING,
           gradgrad=True, torch_op=_aten("mish_backward")),
    OpInfo("_log_sigmoid_backward", lambda g, x: g * sp.expit(-x), _pair_samples(-6, 6),
           dtypes=FLOATING, gradgrad=True, torch_op=_log_sigmoid_backward_torch),
    # the 16-bit kernel rounds the sigmoid first, as torch's (1 - s loses its low bits);
    # tests/parity/test_parity_fused_backward.py checks those bits against torch's
    OpInfo("_glu_backward", _glu_backward_ref, _glu_backward_samples, dtypes=FLOATING,
           gradgrad=True, torch_op=_aten("glu_backward"),
           tol={ember.float16: (1e-3, 1e-2), ember.bfloat16: (1.6e-2, 8e-2)}),
    OpInfo("_prelu_kernel_backward", _prelu_kernel_backward_ref,
           _prelu_kernel_backward_samples, dtypes=FLOATING, gradgrad=True,
           torch_op=_aten("_prelu_kernel_backward")),
    _floating("_leaky_relu_inplace", lambda x, s: np.where(x > 0, x, x * s),
              "leaky_relu_cpu", (0.2,), (0.0,), torch_op=_aten("leaky_relu")),
    _floating("_elu_inplace", lambda x, alpha, kind: _elu_ref(x, *_ELU_KINDS[kind](alpha)),
              "elu_cpu", (1.5, "elu"), (None, "selu"), (2.0, "celu"), torch_op=_elu_torch),
    OpInfo("relu", lambda x: np.maximum(x, 0), _with_params(), dtypes=FLOATING + INTS,
           grad_samples=_grad_samples(), gradgrad=True, error_inputs=_relu_errors),
    OpInfo("nn.functional.hardtanh", _hardtanh_ref, _hardtanh_samples,
           dtypes=FLOATING + INTS, grad_samples=_grad_samples((-1.0, 1.0), (-2.5, 3.5)),
           gradgrad=True, error_inputs=_hardtanh_errors),
    OpInfo("threshold", _threshold_ref, _threshold_samples, dtypes=FLOATING + INTS,
           grad_samples=_grad_samples((0.5, 2.0)), gradgrad=True,
           error_inputs=_threshold_errors),
    _floating("nn.functional.leaky_relu", lambda x, s=0.01: np.where(x > 0, x, x * s),
              "leaky_relu_cpu", (), (0.2,), (-1.5,)),
    OpInfo("prelu", _prelu_ref, _prelu_samples, dtypes=FLOATING, gradgrad=True,
           error_inputs=_prelu_errors),
    _floating("hardshrink", lambda x, lambd=0.5: np.where(np.abs(x) <= lambd, 0, x),
              "hardshrink_cpu", (), (2.0,), (-1.0,)),
    _floating("nn.functional.softshrink",
              lambda x, lambd=0.5: np.where(x > lambd, x - lambd,
                                            np.where(x < -lambd, x + lambd, 0 * x)),
              "softshrink_check", (), (2.0,), more_errors=_softshrink_errors),
    # (PyTorch's hardsigmoid_backward has no derivative: its double backward raises)
    _floating("nn.functional.hardsigmoid", lambda x: np.clip(x + 3, 0, 6) / 6,
              "hardsigmoid_cpu", gradgrad=False),
    _floating("nn.functional.hardswish", lambda x: x * np.clip(x + 3, 0, 6) / 6,
              "hardswish_cpu"),
    _floating("nn.functional.elu", _elu_ref, "elu_cpu", (), (0.5,), (-1.5,)),
    _floating("selu", lambda x: _elu_ref(x, SELU_ALPHA, SELU_SCALE), "elu_cpu"),
    _floating("celu", lambda x, alpha=1.0: _elu_ref(x, alpha, 1.0, 1 / alpha), "elu_cpu",
              (), (2.0,), (0.5,), more_errors=_celu_errors),
    _floating("nn.functional.gelu", _gelu_ref, "GeluKernelImpl", {}, {"approximate": "tanh"},
              more_errors=_gelu_errors),
    # PyTorch refuses complex gradients of silu (the in-place form's pass)
    _floating("nn.functional.silu", _silu_ref, "silu_cpu", dtypes=FLOATING + COMPLEX,
              skips=("grad_complex",)),
    _floating("nn.functional.mish", lambda x: x * np.tanh(np.logaddexp(0, x)), "mish_cpu"),
    _floating("nn.functional.softplus", _softplus_ref, "softplus_cpu", (), (2.0, 10.0),
              (0.5, 1.0)),
    _floating("nn.functional.logsigmoid", lambda x: -np.logaddexp(0, -x), "log_sigmoid_cpu"),
    OpInfo("nn.functional.glu", _glu_ref, _glu_samples, dtypes=FLOATING, gradgrad=True,
           error_inputs=_glu_errors),
]
