"""Piecewise-linear activations: relu, hardtanh, threshold, leaky_relu, prelu, the shrinks,
hardsigmoid and hardswish. Smooth activations live in activations_smooth.py, the Python
functions of ``nn.functional`` built on them in activations_functional.py.

Derivatives of piecewise ops multiply the gradient by a mask computed from the saved input
(or output): masks carry no gradient, so the derivatives are differentiable in ``grad``.
"""

import functools

import numpy as np

from ember import _dtype as D
from ember._tensor import _make
from ember.autograd._forward_traces import PULLING
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import no_grad
from ember.backend import device_scalar
from ember.backend.cpu_kernels import map_elementwise
from ember.ops._barebones import WIDE_UNSIGNED_NP, refusal
from ember.ops._promotion import Policy
from ember.ops._scalars import checked_scalar, fitted_number, number_arg, real_number
from ember.ops._elementwise import zeros_for
from ember.ops._not_implemented import hang_not_implemented
from ember.ops._registry import op, rename_node
from ember.ops.underivable import refuse_forward_ad

__all__ = ["act_op", "const", "float_kernel", "masked", "on_1d", "relu", "hardtanh", "threshold",
           "leaky_relu", "prelu", "hardshrink", "softshrink", "hardsigmoid", "hardswish"]


def float_kernel(kernel, complex_ok=False):
    """A policy for floating-point-only ops that names PyTorch's CPU kernel when it refuses
    a dtype (``"elu_cpu" not implemented for 'Long'``)."""
    def rule(d, name, operands):
        if d.category != D.FLOATING and not (complex_ok and d.category == D.COMPLEX):
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{d._torch_name}'")
        return d
    return Policy(kernel, rule)


def _clamp_like(message):
    """Integers and floats keep their dtype; bool raises ``message``, complex as clamp does."""
    def rule(d, name, operands):
        if d is D.bool_:
            raise RuntimeError(message)
        if d.category == D.COMPLEX:
            raise NotImplementedError("clamp is not supported for complex types")
        return d
    return Policy(f"clamp_like[{message}]", rule)


def act_op(signature, **options):
    """``op`` with the defaults of activations: a tensor input, no ``out=``."""
    options.setdefault("out", False)
    options.setdefault("scalars", False)
    options.setdefault("pointwise", True)       # (all but glu and prelu)
    if options.get("namespace"):            # PyTorch's name: GeluBackward0
        name = signature.partition("(")[0]
        options.setdefault("grad_fn_name",
                           "".join(p.capitalize() for p in name.split("_")) + "Backward0")
    return op(signature, **options)



def on_1d(forward):
    """A fused backward's ``forward(xp, grad, input, *params)`` run on arrays of at least one
    dim (NumPy's ufuncs make 0-d arrays scalars, which ``out=`` cannot take), its result
    reshaped to the operands' broadcast shape."""
    @functools.wraps(forward)
    def wrapped(xp, grad, x, *params):
        if grad.ndim and x.ndim:
            return forward(xp, grad, x, *params)
        shape = xp.broadcast_shapes(grad.shape, x.shape)
        return forward(xp, grad.reshape(-1), x.reshape(-1), *params).reshape(shape)
    return wrapped


def const(array):
    """A backend array (or a NumPy scalar, from an op on 0-dim arrays) as a constant tensor."""
    return _make(np.asarray(array) if isinstance(array, np.generic) else array)


@op("_masked_grad(grad, input, mask)", inputs=3, method=False)
def _masked_grad(xp, grad, x, mask):
    """``grad * mask``: the gradient of a piecewise-linear op, which takes the op's ``input``
    (or output) as an operand of derivative 0. Under ``create_graph`` it then requires grad
    wherever ``input`` does, as PyTorch's ThresholdBackward-style kernels do, so a second
    ``grad`` gives zeros rather than "does not require grad"."""
    return grad * mask


@_masked_grad.derivative
def _(grad, g, x, mask):
    return _masked_grad(grad, x, mask), zeros_for(grad), None


def masked(grad, mask, source, name=None):
    """``grad`` times the boolean (or factor) array ``mask``, through ``source``, the op's
    input or output of ``grad``'s shape; ``name`` is PyTorch's node name under create_graph
    (ThresholdBackwardBackward0)."""
    out = _masked_grad(grad, source, const(mask))
    if name is not None and out._grad_fn is not None:
        rename_node(out, name)
    return out


def _number(value):
    """A Number parameter the forward accepted (a 0-dim tensor, a NumPy scalar) as the Python
    number it computed with."""
    value = number_arg(value, "", "")
    return value.real if type(value) is complex else value


def _fit(x, value):
    """A Python number as the kernel uses it: for integer ``x`` truncated and range-checked
    (a Python int, which NumPy's and CuPy's ufuncs alike take in ``x``'s dtype), for a float
    ``x`` checked to fit its dtype."""
    if x.dtype.kind in "iu":
        return int(checked_scalar(np, value, x.dtype))
    return fitted_number(value, x.dtype)


# --- relu, hardtanh, threshold ----------------------------------------------------------------

@act_op("relu(input)", promote=_clamp_like("Boolean inputs not supported for relu"),
        inplace=True, saves_inputs=False)
def relu(xp, x):
    """``max(input, 0)`` elementwise."""
    if type(x) is np.ndarray:           # a zero of x's dtype: NumPy converts a Python 0 slowly
        zero = _ZEROS.get(x.dtype)
        if zero is None:
            zero = _ZEROS[x.dtype] = np.zeros((), x.dtype)
        return np.maximum(zero, x)      # (this order keeps -0.0, as PyTorch's relu does)
    return xp.maximum(0, x)


_ZEROS = {}         # NumPy dtype -> a 0-dim zero of it


relu.inplace_variant(lambda xp, dst, x: xp.maximum(0, x, out=dst))


@relu.derivative
def _(grad, x, *, out):
    return _threshold_backward(grad, out, 0)


_SAME_WIDTH_INT = {2: np.int16, 4: np.int32, 8: np.int64}


@op("_threshold_backward(grad_output, input, threshold)", inputs=2, method=False,
    pointwise=True)
@on_1d
def _threshold_backward(xp, grad, x, threshold):
    """The gradient of ``threshold`` (and of relu, from its output), fused: ``grad_output``
    where ``input > threshold``, else 0. Not ``>``: a NaN input passes the gradient, as in
    PyTorch's ``input <= threshold ? 0 : grad`` test. 16-bit floats compare in float32."""
    if threshold and x.dtype.itemsize == 2:
        x = x.astype(xp.float32)
    return _zero_where(xp, x <= threshold, grad)


@_threshold_backward.derivative
def _(gg, grad, x, threshold):
    # under create_graph x's zero gradient makes the result require grad wherever x does,
    # as PyTorch's (a second grad gives zeros, not "does not require grad")
    return _threshold_backward(gg, x, threshold), zeros_for(gg)


@act_op("hardtanh(input, min_val=-1.0, max_val=1.0)", namespace="nn.functional",
        promote=_clamp_like("Bool inputs not supported for hardtanh"))
def hardtanh(xp, x, min_val, max_val):
    """``input`` clamped to ``[min_val, max_val]``."""
    min_val = number_arg(min_val, "hardtanh", "min_val", 2)
    max_val = number_arg(max_val, "hardtanh", "max_val", 3)
    if x.dtype in WIDE_UNSIGNED_NP:     # (ops/_barebones.py: the kernel's refusal first)
        raise refusal("clamp_scalar_cpu", D.FROM_NUMPY[x.dtype])
    if x.dtype.kind == "u" and (min_val < 0 or max_val < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    lo, hi = _fit(x, min_val), _fit(x, max_val)
    if x.dtype.kind in "fiu":           # one pass; -0.0 stays -0.0 at min_val 0, as in PyTorch
        return xp.clip(x, lo, hi)
    return xp.minimum(xp.maximum(x, lo), hi)        # (NumPy's clip upcasts bfloat16)


@hardtanh.derivative
def _(grad, x, min_val, max_val):
    return _hardtanh_backward(grad, x, _number(min_val), _number(max_val))


@op("_hardtanh_backward(grad_output, input, min_val, max_val)", inputs=2, method=False,
    promote=float_kernel("hardshrink_backward_cpu"), out=False, pointwise=True)
@on_1d
def _hardtanh_backward(xp, grad, x, min_val, max_val):
    """The gradient of hardtanh, fused: 0 where ``input <= min_val`` or ``input >= max_val``,
    else ``grad_output`` (so a NaN input passes it, as in PyTorch); 16-bit floats compare in
    float32."""
    outside = x <= x.dtype.type(min_val)
    outside |= x >= x.dtype.type(max_val)
    return _zero_where(xp, outside, grad)


# The backward kernels choose by bits: ANDing with all ones or all zeros is several times
# faster than where on unpredictable masks, and unlike a product with the mask it gives +0 for
# a dropped negative gradient and never lets an infinite or NaN operand it does not take leak
# in (inf * 0 is NaN), as PyTorch's ternaries.

def _zero_where(xp, mask, grad):
    """``grad`` with +0 where ``mask`` (both broadcast; a temporary the call overwrites), as
    a new array that owns its memory (so that a leaf's ``.grad`` can take it over)."""
    if mask.shape != grad.shape:
        mask, grad = xp.broadcast_arrays(mask, grad)
        mask = mask.copy()
    bits = _SAME_WIDTH_INT.get(grad.dtype.itemsize)
    if bits is None or grad.dtype.kind != "f":
        return xp.where(mask, xp.zeros((), grad.dtype), grad)
    keep = mask.view(xp.int8)
    keep -= 1                           # -1 where kept: all ones once widened
    out = xp.empty_like(mask, dtype=grad.dtype)
    widened = out.view(bits)
    xp.copyto(widened, keep)
    xp.bitwise_and(grad.view(bits), widened, out=widened)
    return out


def _ones_where(xp, mask, out):
    """Fill the integer array ``out`` with all ones where the boolean ``mask`` (a temporary
    it overwrites) holds, else 0."""
    flags = mask.view(xp.int8)
    xp.negative(flags, out=flags)
    xp.copyto(out, flags)


def _select(xp, mask, a, b):
    """``a`` where ``mask`` else ``b`` (floats of one dtype; all broadcast), as a new array."""
    if not mask.shape == a.shape == b.shape:
        mask, a, b = xp.broadcast_arrays(mask, a, b)
    bits = _SAME_WIDTH_INT[a.dtype.itemsize]
    take_a = mask.astype(bits)
    xp.negative(take_a, out=take_a)     # all ones where a is taken
    out = xp.empty_like(take_a, dtype=a.dtype)      # (owned: a leaf's .grad may take it)
    chosen = out.view(bits)
    xp.bitwise_and(a.view(bits), take_a, out=chosen)
    xp.invert(take_a, out=take_a)
    xp.bitwise_and(b.view(bits), take_a, out=take_a)
    chosen |= take_a
    return out


@_hardtanh_backward.derivative
def _(gg, grad, x, min_val, max_val):
    return _hardtanh_backward(gg, x, min_val, max_val), zeros_for(gg)


hardtanh.params_in_dtype("min_val", "max_val")


def _threshold_rule(d, name, operands):
    if d is D.bool_ or d.category == D.COMPLEX:
        raise NotImplementedError(f"\"threshold_cpu\" not implemented for '{d._torch_name}'")
    return d


@act_op("threshold(input, threshold, value)", method=False, out=True,
        promote=Policy("threshold", _threshold_rule))
def threshold(xp, x, threshold, value):
    """``value`` where ``input <= threshold``, else ``input``."""
    threshold = fitted_number(number_arg(threshold, "threshold", "threshold", 2), x.dtype)
    value = fitted_number(number_arg(value, "threshold", "value", 3), x.dtype)
    return xp.where(x <= _fit(x, threshold),
                    device_scalar(xp, np.asarray(_fit(x, value)).astype(x.dtype)), x)


@threshold.derivative
def _(grad, x, threshold, value):
    return _threshold_backward(grad, x, _number(threshold))


threshold.params_in_dtype("value")       # (its threshold is read in float32)


# --- leaky_relu, prelu ------------------------------------------------------------------------

@act_op("leaky_relu(input, negative_slope=0.01)", namespace="nn.functional",
        promote=float_kernel("leaky_relu_cpu"))
def leaky_relu(xp, x, negative_slope):
    """``input`` where positive, else ``negative_slope * input``."""
    negative_slope = fitted_number(number_arg(negative_slope, "leaky_relu", "negative_slope", 2),
                                 x.dtype)
    scaled = x * negative_slope
    out = scaled if x.ndim else None    # (NumPy's ops on 0-dim arrays give scalars)
    if 0 < negative_slope <= 1:         # the larger of the two, as the select (and one pass)
        return xp.maximum(x, scaled, out=out)
    if negative_slope > 1:
        return xp.minimum(x, scaled, out=out)
    return xp.where(x > 0, x, scaled)   # (0 * inf is NaN: the select must not see it)


@leaky_relu.derivative
def _(grad, x, negative_slope):
    return _leaky_relu_backward(grad, x, _number(negative_slope), False)


@op("_leaky_relu_backward(grad_output, input, negative_slope, self_is_result)", inputs=2,
    method=False, promote=float_kernel("leaky_relu_backward_cpu"), out=False, pointwise=True)
@on_1d
def _leaky_relu_backward(xp, grad, x, negative_slope, self_is_result):
    """The gradient of leaky_relu, fused: ``grad_output`` where ``input > 0``, else
    ``grad_output * negative_slope`` (16-bit floats in float32, rounded once). With
    ``self_is_result`` ``input`` is the output of the in-place op."""
    if self_is_result and negative_slope < 0:
        raise RuntimeError(
            "In-place leakyReLu backward calculation is triggered with a negative slope which "
            "is not supported. This is caused by calling in-place forward function with a "
            "negative slope, please call out-of-place version instead. File an issue at "
            "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
            "backward calculation with negative slope")
    slope = grad.dtype.type(negative_slope)
    if x.shape != grad.shape or grad.dtype.kind != "f":
        return _select(xp, x > 0, grad, grad * slope)
    # a factor of exactly 1 or the slope per element (chosen by bits): the product is the
    # select's operand, bit for bit
    bits = _SAME_WIDTH_INT[grad.dtype.itemsize]
    factors = xp.empty_like(grad)
    fb = factors.view(bits)
    _ones_where(xp, x > 0, fb)
    one, slope = grad.dtype.type(1).view(bits), slope.view(bits)
    fb &= one ^ slope
    fb ^= slope
    return xp.multiply(factors, grad, out=factors)


@_leaky_relu_backward.derivative
def _(gg, grad, x, negative_slope, self_is_result):
    return _leaky_relu_backward(gg, x, negative_slope, self_is_result), zeros_for(gg)


@act_op("_leaky_relu_inplace(input, negative_slope)", method=False,
        promote=float_kernel("leaky_relu_cpu"), saves_inputs=False,
        grad_fn_name="LeakyReluBackward1")
def _leaky_relu_inplace(xp, x, negative_slope):
    """leaky_relu for ``leaky_relu_``, whose gradient PyTorch computes from the result (so
    that no copy of the input is saved)."""
    return leaky_relu.forward(xp, x, negative_slope)


@_leaky_relu_inplace.derivative
def _(grad, x, negative_slope, *, out):
    return _leaky_relu_backward(grad, out, _number(negative_slope), True)


def _prelu_rule(d, name, operands):
    (a, _), (b, _) = operands
    if a is not b:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {a._torch_name} and "
                           f"{b._torch_name}")
    if d.category != D.FLOATING:
        raise NotImplementedError(f"\"prelu_cpu\" not implemented for '{d._torch_name}'")
    return d


def _prelu_weight_shape(x, w):
    """The shape that broadcasts ``weight`` along dim 1 of ``input``, after PyTorch's checks."""
    if w.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {w.ndim}")
    if x.ndim == 0:
        if w.size != 1:
            raise RuntimeError("Not allow zero-dim input tensor.")
        return ()
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.size != 1 and w.size != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {w.size} and channel size = {channels}.")
    return (1, -1) + (1,) * (x.ndim - 2) if x.ndim >= 2 else (-1,)


@act_op("prelu(input, weight)", inputs=2, promote=Policy("prelu", _prelu_rule),
        pointwise=False)
def prelu(xp, x, w):
    """``input`` where positive, else ``weight * input`` (one weight per channel, dim 1)."""
    w = w.reshape(_prelu_weight_shape(x, w))
    return xp.where(x > 0, x, w * x)


prelu.name_nodes("PreluKernelBackward0")


@prelu.derivative
def _(grad, x, weight):
    w = weight.reshape(_prelu_weight_shape(x._data, weight._data))
    gx, gw = _prelu_kernel_backward(grad, x, w)
    if gw.ndim:
        gw = gw.sum([d for d in range(gw.ndim) if d != 1 or weight.numel() == 1])
    return gx, gw.reshape(weight.shape)


@op("_prelu_kernel_backward(grad_output, input, weight)", inputs=3, method=False, out=False,
    scalars=False)
def _prelu_kernel_backward(xp, grad, x, w):
    """The gradients of prelu's kernel, fused, ``weight`` broadcast along ``input``'s dims:
    ``(grad_output, weight * grad_output)`` and ``(0, input * grad_output)`` where
    ``input > 0`` and elsewhere, the weight's gradient of ``input``'s shape."""
    positive = x > 0
    return (xp.where(positive, grad, w * grad),
            xp.where(positive, 0, x * grad).astype(x.dtype, copy=False))


@_prelu_kernel_backward.derivative
def _(grads, grad, x, w):
    gg_x, gg_w = grads
    from ember.ops.binary_math import where
    positive = const(x._data > 0)
    d_grad = d_x = d_w = None
    if gg_x is not None:
        d_grad = where(positive, gg_x, gg_x * w)
        d_w = where(positive, 0.0, gg_x * grad)
    if gg_w is not None:
        through_w = where(positive, 0.0, gg_w * x)
        d_grad = through_w if d_grad is None else d_grad + through_w
        d_x = where(positive, 0.0, gg_w * grad)
    return d_grad, d_x, d_w


# --- shrinks ----------------------------------------------------------------------------------

@act_op("hardshrink(input, lambd=0.5)", promote=float_kernel("hardshrink_cpu"), out=True)
def hardshrink(xp, x, lambd):
    """0 where ``|input| <= lambd``, else ``input``."""
    lambd = fitted_number(number_arg(lambd, "hardshrink", "lambd", 2), x.dtype)
    return xp.where((x >= -lambd) & (x <= lambd), 0, x)


@hardshrink.derivative
def _(grad, x, lambd):
    return _hardshrink_backward(grad, x, _number(lambd))


@on_1d
def _shrink_backward(xp, grad, x, lambd):
    """0 where ``-lambd <= input <= lambd``, else ``grad_output`` (NaN passes, as in
    PyTorch's scalar kernel): the gradient of both shrinks. 16-bit floats compare in their
    own dtype, ``lambd`` rounded to it, as PyTorch's."""
    inside = x >= -x.dtype.type(lambd)
    inside &= x <= x.dtype.type(lambd)
    return _zero_where(xp, inside, grad)


_hardshrink_backward = op("_hardshrink_backward(grad_out, input, lambd)", inputs=2,
                          method=False, promote=float_kernel("shrink_backward_cpu"),
                          upcast=False, out=False)(_shrink_backward)
_softshrink_backward = op("_softshrink_backward(grad_output, input, lambd)", inputs=2,
                          method=False, promote=float_kernel("shrink_backward_cpu"),
                          upcast=False, out=False)(_shrink_backward)


@_hardshrink_backward.derivative
def _(gg, grad, x, lambd):
    return _hardshrink_backward(gg, x, lambd), zeros_for(gg)


@_softshrink_backward.derivative
def _(gg, grad, x, lambd):
    return _softshrink_backward(gg, x, lambd), zeros_for(gg)


for _backward in (_threshold_backward, _hardtanh_backward, _leaky_relu_backward,
                  _hardshrink_backward, _softshrink_backward):
    _backward.reads_inputs((), (0, 1))  # PyTorch's nodes save the input, not grad_output


hardshrink.params_in_dtype("lambd")


_FINFO_TEXT = {"float32": "3.40282e+38", "float64": "1.79769e+308", "float16": "65504",
               "bfloat16": "3.38953e+38"}


def _check_lambd(x, lambd):
    if not 0 <= lambd <= D.finfo(D.FROM_NUMPY[x.dtype]).max:
        d = D.FROM_NUMPY[x.dtype]
        raise RuntimeError(f"lambda must be in range [0, {_FINFO_TEXT[d.name]}] for input "
                           f"dtype {d._torch_name}, but found {lambd:g}")


# not upcast by the dispatcher: the range check names the input's own dtype
@act_op("softshrink(input, lambd=0.5)", namespace="nn.functional",
        promote=float_kernel("softshrink_check"), upcast=False, out=True)
def softshrink(xp, x, lambd):
    """``input`` moved ``lambd`` towards 0, and 0 where ``|input| <= lambd``."""
    lambd = real_number(number_arg(lambd, "softshrink", "lambd", 2), np.float64)
    _check_lambd(x, lambd)
    dtype = x.dtype
    if dtype.itemsize == 2:
        x = x.astype(xp.float32)
    # x * 0 keeps NaN; its -0.0 for negative x is what PyTorch's scalar kernel gives (its
    # vectorized one, used on the bulk of longer tensors, gives +0.0)
    out = xp.where(x > lambd, x - lambd, xp.where(x < -lambd, x + lambd, x * 0))
    return out.astype(dtype, copy=False)


@softshrink.derivative
def _(grad, x, lambd):
    return _softshrink_backward(grad, x, _number(lambd))


# --- hardsigmoid, hardswish -------------------------------------------------------------------

@act_op("hardsigmoid(input)", namespace="nn.functional",
        promote=float_kernel("hardsigmoid_cpu"))
def hardsigmoid(xp, x):
    """``relu6(input + 3) / 6``: a piecewise-linear sigmoid."""
    out = x + 3
    if x.dtype.kind == "f" and x.ndim:  # in place: bitwise the same as min(max(.)), no NaN
        xp.clip(out, 0, 6, out=out)     # or -0.0 lost (x + 3 is never -0.0)
        out /= 6
        return out
    return xp.minimum(xp.maximum(out, 0), 6) / 6


@hardsigmoid.derivative
def _(grad, x):
    if PULLING.depth:       # forward AD transposes this: it needs the backward's derivative
        return _hardsigmoid_backward(grad, x)
    # PyTorch's hardsigmoid_backward has no derivative: its node NotImplemented refuses the next
    refuse_forward_ad("aten::hardsigmoid_backward", grad, x)
    if not _GRAD.grad_enabled:          # a backward without create_graph: no node to hang
        return _hardsigmoid_backward(grad, x)
    with no_grad():
        out = _hardsigmoid_backward(grad, x)
    hang_not_implemented(out, "hardsigmoid_backward", (grad, x))
    return out


_ONE_SIXTH = np.float32(1 / 6)         # PyTorch's kernel multiplies by it, in float64 too


@op("_hardsigmoid_backward(grad_output, input)", inputs=2, method=False,
    promote=float_kernel("hardsigmoid_backward"), out=False, pointwise=True)
@on_1d
def _hardsigmoid_backward(xp, grad, x):
    """The gradient of hardsigmoid, fused: ``grad_output / 6`` where ``-3 < input < 3``,
    else 0 (16-bit floats in float32, rounded once)."""
    inside = x > -3
    inside &= x < 3
    return _zero_where(xp, xp.logical_not(inside, out=inside), grad * x.dtype.type(_ONE_SIXTH))


@_hardsigmoid_backward.derivative
def _(gg, grad, x):
    # only forward AD's transposition reaches this (hardsigmoid's derivative hangs PyTorch's
    # NotImplemented node otherwise): the true derivative, 0 in the input
    return _hardsigmoid_backward(gg, x), zeros_for(gg)


@act_op("hardswish(input)", namespace="nn.functional",
        promote=float_kernel("hardswish_cpu"))
def hardswish(xp, x):
    """``input * relu6(input + 3) / 6``."""
    if x.dtype.kind == "f" and x.ndim:  # in place, as hardsigmoid
        return map_elementwise(xp, _hardswish_form, x)
    return x * xp.minimum(xp.maximum(x + 3, 0), 6) / 6


def _hardswish_form(xp, x, out=None):
    """hardswish of a float array of at least one dim, in place on one buffer (``out``, of
    x's shape, if given)."""
    out = xp.add(x, 3, out=out)
    xp.clip(out, 0, 6, out=out)
    out *= x
    out /= 6
    return out


@hardswish.derivative
def _(grad, x):
    return _hardswish_backward(grad, x)


@op("_hardswish_backward(grad_output, input)", inputs=2, method=False,
    promote=float_kernel("hardswish_backward_cpu"), out=False, pointwise=True)
@on_1d
def _hardswish_backward(xp, grad, x):
    """The gradient of hardswish, fused: 0 where ``input <= -3``, ``grad_output * (input / 3
    + 0.5)`` below 3, else ``grad_output`` (and at NaN, as in PyTorch); 16-bit floats in
    float32, rounded once."""
    if x.shape == grad.shape and x.dtype == grad.dtype:
        return map_elementwise(xp, _hardswish_grad, grad, x)
    d = xp.clip(x, -3, 3)               # finite where unused at |x| >= 3 (NaN stays: unused)
    d /= x.dtype.type(3)
    d += x.dtype.type(0.5)
    d = d * grad
    upper = x < 3
    middle = x > -3
    middle &= upper
    return _select(xp, middle, d, _zero_where(xp, upper, grad))


def _hardswish_grad(xp, grad, x, out=None):
    """_hardswish_backward for operands of one shape and dtype (into ``out``, of their shape,
    if given), in place by bits: the factor 1 where ``input >= 3`` (or NaN), the product,
    then +0 where ``input <= -3`` (masks by bits: a ``where=`` or ``copyto`` under a mask
    that changes at random runs several times slower)."""
    d = xp.clip(x, -3, 3, out=out)      # finite where unused at |x| >= 3 (NaN stays: unused)
    d /= x.dtype.type(3)
    d += x.dtype.type(0.5)
    bits = _SAME_WIDTH_INT[d.dtype.itemsize]
    db, keep = d.view(bits), xp.empty(d.shape, bits)
    one = d.dtype.type(1).view(bits)
    _ones_where(xp, x < 3, keep)
    db ^= one
    db &= keep
    db ^= one
    d *= grad
    above = x <= -3
    _ones_where(xp, xp.logical_not(above, out=above), keep)     # (NaN kept too)
    db &= keep
    return d


@_hardswish_backward.derivative
def _(gg, grad, x):
    from ember.ops.binary_math import where
    a = x._data
    middle = const((a > -3) & (a < 3))
    return _hardswish_backward(gg, x), where(middle, gg * grad / 3.0, zeros_for(gg))


from ember.ops import activations_functional, activations_smooth  # noqa: E402

FUNCTIONAL = {**activations_smooth.FUNCTIONAL, **activations_functional.FUNCTIONAL}
PUBLIC = {**activations_functional.PUBLIC}
