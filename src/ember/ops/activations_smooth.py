"""Smooth activations: the elu family (elu, selu, celu), gelu, silu, mish, softplus,
logsigmoid and glu. Derivatives are written in ember ops, so they differentiate again."""

import math

import numpy as np

from ember.autograd.grad_mode import STATE as _GRAD
from ember.backend import special_of
from ember.backend.cpu_kernels import map_elementwise
from ember.ops._dims import type_name, wrap_dim
from ember.ops._elementwise import conj_grad, fused_for_half
from ember.ops._scalars import fitted_number, number_arg
from ember.ops._registry import op, rename_node
from ember.ops.activations import _number, _select, act_op, const, float_kernel, on_1d

__all__ = ["elu", "_elu_backward", "selu", "celu", "gelu", "_gelu_backward", "silu",
           "_silu_backward", "mish", "_mish_backward", "softplus", "_softplus_backward",
           "logsigmoid", "_log_sigmoid_backward", "glu", "_glu_backward"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_K = math.sqrt(2 / math.pi)
_TANH_C = 0.044715
_ELU = float_kernel("elu_cpu")


# --- the elu family ---------------------------------------------------------------------------

def _elu(xp, x, alpha, scale, input_scale):
    # where, not minimum(x, 0): expm1(-0.0) keeps the sign of zero, as PyTorch's does
    neg = xp.expm1(xp.where(x > 0, 0, x) * input_scale) * alpha
    out = xp.where(x >= 0, x, neg)         # a zero keeps its sign whatever alpha's, as in PyTorch
    return out * scale if scale != 1 else out


@act_op("elu(input, alpha=1.0)", namespace="nn.functional", promote=_ELU)
def elu(xp, x, alpha):
    """``input`` where positive, else ``alpha * (exp(input) - 1)``."""
    return _elu(xp, x, fitted_number(number_arg(alpha, "elu", "alpha", 2), x.dtype), 1, 1)


@elu.derivative
def _(grad, x, alpha):
    return _elu_backward(grad, _number(alpha), 1, 1, False, x)


@op("_elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)",
    inputs=("grad_output", "self_or_result"), method=False,
    promote=float_kernel("elu_backward_cpu"), out=False, pointwise=True)
@on_1d
def _elu_backward(xp, grad, x, alpha, scale, input_scale, is_result):
    """The gradient of the elu family, fused, from the input (or, ``is_result``, from the
    output): ``grad_output * input_scale * alpha * scale * exp(input * input_scale)`` (or
    ``... * (result + alpha * scale)``) where ``x <= 0``, else ``grad_output * scale``; a NaN
    takes the latter. 16-bit floats in float32, rounded once."""
    if is_result and alpha < 0:
        raise RuntimeError("In-place elu backward calculation is triggered with a negative slope "
                           "which is not supported. This is caused by calling in-place forward "
                           "function with a negative slope, please call out-of-place version "
                           "instead.")
    t = x.dtype.type
    negcoef, input_scale, scale = t(alpha) * t(scale), t(input_scale), t(scale)
    coefs = (input_scale,) if is_result else (input_scale, negcoef)
    e = xp.fmin(x, 0)                   # finite where unused (x > 0 or NaN)
    if is_result:
        e += negcoef
    else:
        if input_scale != 1:
            e *= input_scale
        xp.exp(e, out=e)
    d = None                            # grad * coefs..., left to right as PyTorch's
    for c in coefs:
        if c != 1:
            d = grad * c if d is None else xp.multiply(d, c, out=d)
    d = grad if d is None else d
    d = xp.multiply(d, e, out=e) if d.shape == e.shape else d * e
    return _select(xp, x <= 0, d, grad * scale if scale != 1 else grad)


@_elu_backward.derivative
def _(gg, grad, x, alpha, scale, input_scale, is_result):
    # PyTorch's elu_double_backward: 0 at x = 0 (its x < 0 mask), MulBackward0 nodes
    below = const((x._data < 0).astype(x._data.dtype))
    if is_result:
        dx = gg * grad * input_scale * below
    else:
        dx = _elu_backward(gg * grad * input_scale, alpha, scale, input_scale, is_result,
                           x) * below
    return _elu_backward(gg, alpha, scale, input_scale, is_result, x), dx


@act_op("selu(input)", method=False, promote=_ELU)
def selu(xp, x):
    """``scale * elu(input, alpha)`` with the self-normalizing constants."""
    return _elu(xp, x, _SELU_ALPHA, _SELU_SCALE, 1)


selu.derivative(lambda grad, x: _elu_backward(grad, _SELU_ALPHA, _SELU_SCALE, 1, False, x))
selu.name_nodes("EluBackward0")          # PyTorch computes selu by elu


@act_op("celu(input, alpha=1.0)", method=False, promote=_ELU)
def celu(xp, x, alpha):
    """``max(0, input) + min(0, alpha * (exp(input / alpha) - 1))``."""
    alpha = fitted_number(number_arg(alpha, "celu", "alpha", 2), x.dtype)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _elu(xp, x, alpha, 1, 1 / alpha)


def _celu_input_scale(alpha):
    """1 / alpha as PyTorch's celu derivatives compute it, from alpha rounded to float32."""
    return 1 / float(np.float32(alpha))


@celu.derivative
def _(grad, x, alpha):
    alpha = _number(alpha)
    return _elu_backward(grad, alpha, 1, _celu_input_scale(alpha), False, x)


@act_op("_elu_inplace(input, alpha, kind)", method=False, promote=_ELU, saves_inputs=False)
def _elu_inplace(xp, x, alpha, kind):
    """elu, selu or celu (``kind``) for their in-place variants, whose gradient PyTorch
    computes from the result (so that no copy of the input is saved)."""
    if kind == "selu":
        return selu.forward(xp, x)
    return (celu if kind == "celu" else elu).forward(xp, x, alpha)


_elu_inplace.named_by(lambda flat, params, out: "CeluBackward1" if params[1] == "celu"
                      else "EluBackward1")


@_elu_inplace.derivative
def _(grad, x, alpha, kind, *, out):
    if kind == "selu":
        return _elu_backward(grad, _SELU_ALPHA, _SELU_SCALE, 1, True, out)
    alpha = _number(alpha)
    return _elu_backward(grad, alpha, 1, _celu_input_scale(alpha) if kind == "celu" else 1,
                         True, out)


# --- gelu, silu, mish -------------------------------------------------------------------------

# erfc(z) = exp(-z^2) * t * Q(t) for z >= 0, t = 1 / (1 + 0.39 z): Q is a degree-5 polynomial
# fitted here (Lawson-weighted Chebyshev least squares over t in [0, 1]) to an absolute error
# under 1e-8 for every z, below float32's resolution; the relative error stays under 1e-6 up
# to z = 2 and under 1% in the far tail, where PyTorch's float32 (1 + erf) keeps none. It
# leaves exp(-z^2) on its own, which the derivative reuses as the Gaussian density.
_ERFCX_T = 0.39
_ERFCX_Q = (0.2353251516169317, 0.09138883788405333, 0.6495583432527825,
            -0.6353989717357844, 0.886663565720328, -0.2275369284339959)
_T_SCALE = _ERFCX_T * _SQRT_HALF                    # t = 1 / (1 + _T_SCALE |x|)
_PHI_Q = tuple(c * 0.5 for c in _ERFCX_Q)           # Phi(-|x|) = erfc(|x| / sqrt(2)) / 2
_TINY = 2.0 ** -30           # _TINY / |x| neither overflows nor loses digits that count
# Q(t) as a polynomial in s = |x| t = (1 - t) / _T_SCALE, which gelu computes anyway (and
# then needs no t): Q(1 - _T_SCALE s) expanded, its coefficients lowest first
_ERFCX_S = tuple((-_T_SCALE) ** j * sum(c * math.comb(i, j) for i, c in enumerate(_ERFCX_Q)
                                        if i >= j) for j in range(len(_ERFCX_Q)))


def _gauss(xp, a):
    """exp(-a^2 / 2) of a float array (not 0-d), in its precision, as a new array."""
    gauss = xp.square(a)
    gauss *= -0.5
    return xp.exp(gauss, out=gauss)


def _poly(t, coefficients):
    """The polynomial with ``coefficients`` (lowest first) at the float array ``t`` (not
    0-d), by Horner's rule, as a new array."""
    q = t * coefficients[-1]
    q += coefficients[-2]
    for c in coefficients[-3::-1]:
        q *= t
        q += c
    return q


def _gelu_erf_form(xp, x, out=None):
    """gelu(x) = x Phi(x) of a float32 array (into ``out``, a flat array of x's size, if
    given), from the tail form of Phi: with t = 1 / (1 + _T_SCALE |x|), Phi(-|x|) is
    t exp(-x^2 / 2) Q(t) / 2, without the cancellation of ``(1 + erf(x / sqrt(2))) / 2`` in
    the lower tail. Over three times faster than SciPy's float32 erf."""
    x1 = xp.atleast_1d(x)               # the in-place steps need arrays, not 0-d scalars
    # x Phi(x) = (x + |x|) / 2 - |x| Phi(-|x|); x + |x| is nan at -inf, as PyTorch's gelu.
    # Taken as x - (0 - |x|), -0 at x = -0 as PyTorch's x * Phi(x) (x + |x| is +0 there),
    # in two in-place passes that cost what one into a third array does
    a = xp.abs(x1)
    out = xp.subtract(0, a, out=out)
    xp.subtract(x1, out, out=out)
    gauss = _gauss(xp, a)
    # |x| t = 1 / (1 / |x| + _T_SCALE), finite at inf; scaled by _TINY (exactly, a power of
    # two), else 1 / |x| overflows for subnormal x and gelu(x) came out as x, not x / 2
    at = xp.divide(_TINY, a, out=a)
    at += _TINY * _T_SCALE
    xp.divide(_TINY, at, out=at)
    q = _poly(at, _ERFCX_S)             # Q(t)
    q *= at
    q *= gauss                          # 2 |x| Phi(-|x|)
    out -= q
    out *= 0.5
    return out if out.shape == x.shape else out.reshape(x.shape)


def _gelu_erf_grad(xp, grad, x, out=None):
    """``grad * (Phi(x) + x pdf(x))`` for float32 arrays, from the tail form of Phi (into
    ``out``, a flat array of x's size, if given)."""
    x1 = xp.atleast_1d(x)
    a = xp.abs(x1)
    gauss = _gauss(xp, a)
    t = a * _T_SCALE
    t += 1
    xp.divide(1, t, out=t)              # twice as fast as reciprocal
    # r = Phi(-|x|) - |x| pdf(x): the derivative where x <= 0, and 1 - r where x > 0
    r = _poly(t, _PHI_Q)
    r *= t
    a *= _INV_SQRT_2PI
    r -= a
    r *= gauss
    d = xp.multiply(r, -2, out=out)
    d += 1
    d *= x1 > 0                         # (products with masks: faster than where)
    d += r
    if d.shape != x.shape:
        d = d.reshape(x.shape)
    d *= grad
    return d


def _gelu_tanh_form(xp, x, out=None):
    """gelu's tanh approximation ``x (1 + tanh(K (x + C x^3))) / 2`` of a float array (into
    ``out``, a flat array of x's size, if given), in place on one buffer: the inner argument
    as ``x (K + C K x^2)``."""
    x1 = xp.atleast_1d(x)
    u = xp.square(x1, out=out)
    u *= _TANH_C * _TANH_K
    u += _TANH_K
    u *= x1
    xp.tanh(u, out=u)
    u *= 0.5                            # halved before the product with x: x * 2 can overflow
    u += 0.5
    u *= x1
    return u if u.shape == x.shape else u.reshape(x.shape)


def _gelu_tanh_grad(xp, grad, x, out=None):
    """``grad`` times the derivative of gelu's tanh approximation, for float arrays (into
    ``out``, a flat array of x's size, if given): with t the forward's tanh and
    q = K x (1 + 3 C x^2) / 2, it is (1 - t^2) q + t / 2 + 1 / 2, in three buffers."""
    x1 = xp.atleast_1d(x)
    q = xp.square(x1)
    t = q * (_TANH_C * _TANH_K)
    t += _TANH_K
    t *= x1
    xp.tanh(t, out=t)
    q *= 1.5 * _TANH_C * _TANH_K        # q, in the buffer of x^2
    q += 0.5 * _TANH_K
    q *= x1
    d = xp.multiply(t, t, out=out)
    xp.subtract(1, d, out=d)
    d *= q
    t *= 0.5
    d += t
    d += 0.5
    if d.shape != x.shape:
        d = d.reshape(x.shape)
    if d.shape != grad.shape:
        return d * grad
    d *= grad
    return d


@act_op("gelu(input, *, approximate='none')", namespace="nn.functional",
        promote=float_kernel("GeluKernelImpl"), out=True)
def gelu(xp, x, approximate):
    """``input * Phi(input)`` (Phi: the standard normal CDF), or its tanh approximation."""
    if approximate == "none":
        if x.dtype == xp.float64:
            return x * special_of(xp).ndtr(x)
        return map_elementwise(xp, _gelu_erf_form, x)
    if approximate == "tanh":
        return map_elementwise(xp, _gelu_tanh_form, x)
    if not isinstance(approximate, str):       # the parser's refusal, as PyTorch words it
        raise TypeError(f"gelu(): argument 'approximate' must be str, not "
                        f"{type_name(approximate)}")
    raise RuntimeError("approximate argument must be either none or tanh.")


@gelu.derivative
def _(grad, x, approximate):
    return _gelu_backward(grad, x, approximate)


@act_op("_gelu_backward(grad_output, input, approximate)", inputs=2, method=False,
        promote=float_kernel("GeluBackwardKernelImpl"))
def _gelu_backward(xp, grad, x, approximate):
    """The gradient of gelu, fused (the derivative of gelu calls it)."""
    if approximate == "none":
        # Phi(x) + x * pdf(x)
        if x.dtype == xp.float64:
            d = special_of(xp).ndtr(x) + x * xp.exp(x * x * -0.5) * _INV_SQRT_2PI
        else:
            return map_elementwise(xp, _gelu_erf_grad, grad, x)
    else:
        return map_elementwise(xp, _gelu_tanh_grad, grad, x)
    d *= grad
    return d


@_gelu_backward.derivative
def _(gg, grad, x, approximate):
    # d/dx of gelu'(x) * grad: gelu''(x) = pdf(x) * (2 - x^2) for the exact form
    if approximate == "none":
        pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
        return _gelu_backward(gg, x, approximate), gg * grad * pdf * (2 - x * x)
    x2 = x * x
    t = ((x + _TANH_C * x2 * x) * _TANH_K).tanh()
    inner = _TANH_K * (1 + 3 * _TANH_C * x2)
    second = (1 - t * t) * (inner - x * t * inner * inner + x2 * (3 * _TANH_C * _TANH_K))
    return _gelu_backward(gg, x, approximate), gg * grad * second


def _sigmoid(xp, x):
    if x.dtype.kind == "c":
        return 1 / (1 + xp.exp(-x))
    return special_of(xp).expit(x)


@act_op("silu(input)", namespace="nn.functional",
        promote=float_kernel("silu_cpu", complex_ok=True))
def silu(xp, x):
    """``input * sigmoid(input)``."""
    return x * _sigmoid(xp, x)


silu.refuse_complex_grad()


@silu.derivative
def _(grad, x):
    if _GRAD.grad_enabled or x._data.dtype.kind == "c":
        return _silu_composite_grad(grad, x)
    return _silu_backward(grad, x)


@fused_for_half(composite_with_grad=True)
def _silu_composite_grad(grad, x):
    # with grad mode on PyTorch composes silu's backward of ops (MulBackward0 nodes)
    s = x.sigmoid()
    return grad * conj_grad(s * (1 + x * (1 - s)))


@act_op("_silu_backward(grad_output, input)", inputs=2, method=False,
        promote=float_kernel("silu_backward_cpu"))
def _silu_backward(xp, grad, x):
    """The gradient of silu, fused: ``grad_output * s * (1 + input * (1 - s))`` with
    ``s = sigmoid(input)`` (16-bit floats in float32, rounded once)."""
    s = _sigmoid(xp, x)
    d = xp.subtract(1, s, out=xp.empty_like(x))
    d *= x
    d += 1
    s = s * grad                    # (grad * s) * (...), PyTorch's order
    return xp.multiply(s, d, out=d) if s.shape == d.shape else s * d


@_silu_backward.derivative
def _(gg, grad, x):
    return _silu_backward(gg, x), gg * grad * _silu_second(x)


def _silu_second(x):
    """silu''(x) = s (1 - s) (2 + x (1 - 2 s)), with s = sigmoid(x)."""
    s = x.sigmoid()
    return s * (1 - s) * (2 + x * (1 - 2 * s))


@act_op("mish(input)", namespace="nn.functional", promote=float_kernel("mish_cpu"))
def mish(xp, x):
    """``input * tanh(softplus(input))``."""
    return x * xp.tanh(xp.logaddexp(x, 0))


@mish.derivative
def _(grad, x):
    if _GRAD.grad_enabled:
        return _mish_composite_grad(grad, x)
    return _mish_backward(grad, x)


@fused_for_half(composite_with_grad=True)
def _mish_composite_grad(grad, x):
    # with grad mode on PyTorch composes mish's backward of ops (MulBackward0 nodes)
    t = softplus(x).tanh()
    return grad * (t + x * x.sigmoid() * (1 - t * t))


@act_op("_mish_backward(grad_output, input)", inputs=2, method=False,
        promote=float_kernel("mish_backward_cpu"))
@on_1d
def _mish_backward(xp, grad, x):
    """The gradient of mish, fused: ``grad_output * (t + input * sigmoid(input) * (1 - t*t))``
    with ``t = tanh(softplus(input))`` (16-bit floats in float32, rounded once)."""
    t = xp.exp(x)
    xp.log1p(t, out=t)
    xp.tanh(t, out=t)
    d = x * _sigmoid(xp, x)            # (x * s) * (1 - t * t) + t, PyTorch's order
    sech2 = xp.multiply(t, t)
    xp.subtract(1, sech2, out=sech2)
    d *= sech2
    d += t
    return xp.multiply(d, grad, out=d) if d.shape == grad.shape else d * grad


@_mish_backward.derivative
def _(gg, grad, x):
    return _mish_backward(gg, x), gg * grad * _mish_second(x)


def _mish_second(x):
    """mish''(x) = 2 s (1 - t^2) + x s (1 - s) (1 - t^2) - 2 x s^2 t (1 - t^2), with
    s = sigmoid(x), t = tanh(softplus(x))."""
    s = x.sigmoid()
    t = softplus(x).tanh()
    sech2 = 1 - t * t
    return sech2 * s * (2 + x * (1 - s) - 2 * x * s * t)


# --- softplus, logsigmoid ---------------------------------------------------------------------

@act_op("softplus(input, beta=1.0, threshold=20.0)", namespace="nn.functional",
        promote=float_kernel("softplus_cpu"), out=True)
def softplus(xp, x, beta, threshold):
    """``log(1 + exp(beta * input)) / beta``, linear where ``beta * input > threshold``."""
    beta = fitted_number(number_arg(beta, "softplus", "beta"), x.dtype)
    threshold = fitted_number(number_arg(threshold, "softplus", "threshold"), x.dtype)
    bx = x * beta
    return xp.where(bx > threshold, x, xp.log1p(xp.exp(bx)) / beta)


@softplus.derivative
def _(grad, x, beta, threshold):
    return _softplus_backward(grad, x, _number(beta), _number(threshold))


@act_op("_softplus_backward(grad_output, input, beta, threshold)", inputs=2, method=False,
        promote=float_kernel("softplus_backward_cpu"))
@on_1d
def _softplus_backward(xp, grad, x, beta, threshold):
    """The gradient of softplus, fused: ``grad_output * z / (z + 1)`` with ``z = exp(beta *
    input)``, or ``grad_output`` where ``beta * input > threshold`` (16-bit floats in float32,
    rounded once). As PyTorch's, NaN where exp overflows below the threshold."""
    t = x.dtype.type
    bx = x * t(beta) if beta != 1 else x
    above = bx > t(threshold)
    z = xp.exp(xp.minimum(bx, t(threshold)))    # finite where unused (NaN stays NaN)
    d = grad * z
    z += 1
    d = xp.divide(d, z, out=d) if d.shape == z.shape else d / z
    return _select(xp, above, grad, d)


@_softplus_backward.derivative
def _(gg, grad, x, beta, threshold):
    # PyTorch's softplus_double_backward: sigmoid'(beta x) * beta below the threshold
    bx = x * beta
    s = bx.sigmoid()
    below = const((bx._data < threshold).astype(bx._data.dtype))
    dx = gg * grad * s * (1 - s) * below * beta
    return _softplus_backward(gg, x, beta, threshold), rename_node(dx, "MulBackward1")


@act_op("logsigmoid(input)", namespace="nn.functional", promote=float_kernel("log_sigmoid_cpu"),
        grad_fn_name="LogSigmoidBackward0", out=True, pointwise=False)
def logsigmoid(xp, x):
    """``log(sigmoid(input))``, computed without overflow (row-major whatever the input's
    layout, as PyTorch's kernel writes it)."""
    out = xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))
    return out if out.flags.c_contiguous else xp.ascontiguousarray(out)     # (0-d stays 0-d)


@logsigmoid.derivative
def _(grad, x):
    return _log_sigmoid_backward(grad, x)


@act_op("_log_sigmoid_backward(grad_output, input)", inputs=2, method=False,
        promote=float_kernel("log_sigmoid_backward_cpu"), upcast=False)
@on_1d
def _log_sigmoid_backward(xp, grad, x):
    """The gradient of logsigmoid, fused: ``grad_output * (1 - z / (1 + z))`` below 0, else
    ``grad_output * z / (1 + z)``, with ``z = exp(-|input|)``. 16-bit floats compute in
    float32, ``z`` rounded to their dtype as PyTorch's forward buffer holds it."""
    dtype = x.dtype
    half = dtype.itemsize == 2
    z = xp.abs(x.astype(xp.float32) if half else x)
    xp.negative(z, out=z)
    xp.exp(z, out=z)
    if half:
        z = z.astype(dtype).astype(xp.float32)
        grad = grad.astype(xp.float32)
    d = z + 1
    xp.divide(z, d, out=z)
    negative = x < 0
    d = xp.subtract(1, z, out=d)
    d *= negative                       # products with masks: faster than where
    xp.logical_not(negative, out=negative)
    z *= negative
    z += d
    z = xp.multiply(z, grad, out=z) if z.shape == grad.shape else z * grad
    return z.astype(dtype) if half else z


@_log_sigmoid_backward.derivative
def _(gg, grad, x):
    # PyTorch's log_sigmoid_double_backward: (gg * grad) * (s - 1) * s, s = sigmoid(x)
    s = x.sigmoid()
    return _log_sigmoid_backward(gg, x), gg * grad * (s - 1) * s


# --- glu --------------------------------------------------------------------------------------

def _glu_halves(xp, x, dim):
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = wrap_dim(dim, x.ndim)
    n = x.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    return d, n // 2


@act_op("glu(input, dim=-1)", namespace="nn.functional", promote=float_kernel("glu_cpu"),
        pointwise=False)
def glu(xp, x, dim):
    """The first half of ``input`` along ``dim`` times the sigmoid of the second half."""
    d, h = _glu_halves(xp, x, dim)
    index = (slice(None),) * d
    return x[index + (slice(None, h),)] * special_of(xp).expit(x[index + (slice(h, None),)])


@glu.derivative
def _(grad, x, dim):
    return _glu_backward(grad, x, dim)


@act_op("_glu_backward(grad_output, input, dim)", inputs=2, method=False, upcast=False,
        promote=float_kernel("glu_backward_cpu"), pointwise=False)
def _glu_backward(xp, grad, x, dim):
    """The gradient of glu, fused: ``sigmoid(b) * grad`` for the first half ``a`` and
    ``(1 - sigmoid(b)) * sigmoid(b) * a * grad`` for the second half ``b`` (PyTorch's order);
    16-bit floats in float32 rounded once, the sigmoid rounded to their dtype first."""
    d, h = _glu_halves(xp, x, dim)
    dtype = x.dtype
    first, second = (slice(None),) * d + (slice(None, h),), (slice(None),) * d + (slice(h, None),)
    if dtype.itemsize == 2:
        x, grad = x.astype(xp.float32), grad.astype(xp.float32)
    s = special_of(xp).expit(x[second])
    if dtype.itemsize == 2:
        s = s.astype(dtype).astype(xp.float32)
    out = xp.empty(x.shape, x.dtype)
    xp.multiply(s, grad, out=out[first])
    d_second = (1 - s) * s
    d_second *= x[first]
    xp.multiply(d_second, grad, out=out[second])
    return out.astype(dtype, copy=False)


@_glu_backward.derivative
def _(gg, grad, x, dim):
    # the derivatives of both halves of glu's gradient, a and b the halves of input
    from ember.ops.join import cat
    d, h = _glu_halves(None, x._data, dim)
    a, b = x.narrow(d, 0, h), x.narrow(d, h, h)
    gg_a, gg_b = gg.narrow(d, 0, h), gg.narrow(d, h, h)
    s = b.sigmoid()
    ds = s * (1 - s)
    d_grad = gg_a * s + gg_b * ds * a
    d_a = gg_b * grad * ds
    d_b = grad * ds * (gg_a + gg_b * a * (1 - 2 * s))
    return d_grad, cat([d_a, d_b], d)


FUNCTIONAL = {}
