"""One-input elementwise math: exponentials and logarithms, trigonometric and hyperbolic
functions, sigmoid and logit, special functions, rounding, and float classification."""

import math

import numpy as np

from ember import _dtype as D
from ember._memory_format import laid_like
from ember._tensor import Tensor, _make
from ember.backend import device_scalar, special_of, xp_of
from ember.ops._elementwise import conj_grad, unary, zeros_for
from ember.ops._inplace import call_inplace
from ember.ops._op_errors import RefusedFirst
from ember.ops._pointwise_layout import laid_as_operands
from ember.ops._promotion import FLOAT, REAL_FLOAT, SAME, Policy
from ember.ops._registry import op
from ember.ops._scalars import fitted_number, float_arg, int64_arg

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0


# --- dtype policies ---------------------------------------------------------------------------

def _real_float(kernel):
    """REAL_FLOAT, naming the kernel in the complex error as PyTorch does (``kernel`` formats
    the op name)."""
    def rule(d, name, operands):
        if d.category == D.COMPLEX:
            raise NotImplementedError(f"\"{kernel.format(name)}\" not implemented for "
                                      f"'{d._torch_name}'")
        return D.get_default_dtype() if d.category < D.FLOATING else d
    return Policy(f"real_float[{kernel}]", rule)


def _rounding_rule(d, name, operands):
    if name == "round" and (d is D.bool_ or d.category == D.COMPLEX):
        return d        # refused by round's forward: its kernel's name depends on decimals
    if d is D.bool_:
        raise NotImplementedError(f"\"{name}_vml_cpu\" not implemented for 'Bool'")
    if d.category == D.COMPLEX:
        if name == "round":
            raise NotImplementedError(f"\"round_vml_cpu\" not implemented for '{d._torch_name}'")
        raise RefusedFirst(f"{name} is not supported for complex inputs")  # (before out=)
    return d


REAL_VML = _real_float("{}_vml_cpu")    # erf, erfc, erfinv, lgamma
REAL_NAMED = _real_float("{}")          # digamma, polygamma
ROUNDING = Policy("rounding", _rounding_rule)   # integers pass through; no bool, no complex


def _math(signature, ufunc, derivative, doc, **options):
    """A FLOAT op computed by the backend ufunc ``ufunc``, in place without a copy."""
    cpu = getattr(np, ufunc)            # (NumPy's bound here: a getattr a call saved)
    return unary(signature, lambda xp, x: cpu(x) if xp is np else getattr(xp, ufunc)(x),
                 derivative, doc=doc, ufunc=ufunc, scalars=False, **options)


# --- exponentials and logarithms --------------------------------------------------------------

def _log1p(xp, x):
    if x.dtype.kind != "c":
        return xp.log1p(x)
    # NumPy's complex log1p loses the real part for small |z|; log|1 + z| is computed as
    # log1p(2 re + re^2 + im^2) / 2 there.
    re, im = x.real, x.imag
    r = re * (re + 2) + im * im
    small = xp.where(r == 0, re, 0.5 * xp.log1p(r))          # r == 0: re is -0.0 or tiny
    mag = xp.where(xp.abs(x) < 0.5, small, xp.log(xp.hypot(re + 1, im)))
    out = xp.empty_like(x)
    out.real = mag                  # not mag + 1j * arg: that turns a -0.0 real part to +0.0
    out.imag = xp.arctan2(im, re + 1)
    return out


exp = _math("exp(input)", "exp", lambda grad, x, *, out: grad * conj_grad(out),
            "The exponential of each element.", saves_inputs=False)
exp2 = _math("exp2(input)", "exp2", lambda grad, x, *, out: grad * conj_grad(out * _LN2),
             "2 raised to the power of each element.", saves_inputs=False)
expm1 = _math("expm1(input)", "expm1", lambda grad, x, *, out: grad * conj_grad(out + 1),
              "``exp(input) - 1``, accurate near zero.", saves_inputs=False)
log = _math("log(input)", "log", lambda grad, x: grad / conj_grad(x),
            "The natural logarithm of each element.")
log2 = _math("log2(input)", "log2", lambda grad, x: grad / conj_grad(x * _LN2),
             "The base-2 logarithm of each element.")
log10 = _math("log10(input)", "log10", lambda grad, x: grad / conj_grad(x * _LN10),
              "The base-10 logarithm of each element.")
log1p = unary("log1p(input)", _log1p, lambda grad, x: grad / conj_grad(x + 1),
              doc="``log(1 + input)``, accurate near zero.", scalars=False)
log1p.name_nodes("Log1PBackward0")         # (PyTorch's spelling)
sqrt = _math("sqrt(input)", "sqrt", lambda grad, x, *, out: grad / conj_grad(2 * out),
             "The square root of each element.", saves_inputs=False)
# a division, not NumPy's complex reciprocal, which gives NaN at 0 and flips signed zeros
rsqrt = unary("rsqrt(input)", lambda xp, x: 1 / xp.sqrt(x),
              lambda grad, x, *, out: grad * conj_grad(-0.5 * out * out * out),
              doc="The reciprocal of the square root of each element.", saves_inputs=False,
              scalars=False)


# --- trigonometric and hyperbolic functions ---------------------------------------------------

sin = _math("sin(input)", "sin", lambda grad, x: grad * conj_grad(x.cos()),
            "The sine of each element.")
cos = _math("cos(input)", "cos", lambda grad, x: -grad * conj_grad(x.sin()),
            "The cosine of each element.")
tan = _math("tan(input)", "tan", lambda grad, x, *, out: grad * conj_grad(1 + out * out),
            "The tangent of each element.", saves_inputs=False)
asin = _math("asin(input)", "arcsin", lambda grad, x: grad / conj_grad((1 - x * x).sqrt()),
             "The arcsine of each element.")
acos = _math("acos(input)", "arccos", lambda grad, x: -grad / conj_grad((1 - x * x).sqrt()),
             "The arccosine of each element.")
atan = _math("atan(input)", "arctan", lambda grad, x: grad / conj_grad(1 + x * x),
             "The arctangent of each element.")
sinh = _math("sinh(input)", "sinh", lambda grad, x: grad * conj_grad(x.cosh()),
             "The hyperbolic sine of each element.")
cosh = _math("cosh(input)", "cosh", lambda grad, x: grad * conj_grad(x.sinh()),
             "The hyperbolic cosine of each element.")
tanh = _math("tanh(input)", "tanh", lambda grad, x, *, out: _tanh_backward(grad, out),
             "The hyperbolic tangent of each element.", saves_inputs=False)


def _conj_times(xp, d, grad):
    """``conj(d) * grad``, written into ``d`` (a fresh array) when the shapes allow."""
    if d.dtype.kind == "c":
        xp.conjugate(d, out=d)
    return xp.multiply(d, grad, out=d) if d.shape == grad.shape else d * grad


@op("_tanh_backward(grad_output, output)", inputs=2, method=False, promote=FLOAT, out=False,
    scalars=False)
def _tanh_backward(xp, grad, out):
    """tanh's gradient from its output, fused: ``grad_output * conj(1 - output**2)``
    (16-bit floats in float32, rounded once, as PyTorch's kernel)."""
    if out.dtype == xp.float32:
        # PyTorch's kernel computes 1 - output**2 as one fused multiply-add: the square,
        # exact in float64, rounded once
        d = out.astype(xp.float64)
        xp.multiply(d, d, out=d)
        xp.subtract(1, d, out=d)
        d = d.astype(xp.float32)
    else:
        d = xp.multiply(out, out, out=xp.empty_like(out))
        xp.subtract(1, d, out=d)
    return _conj_times(xp, d, grad)


@_tanh_backward.derivative
def _(gg, grad, out):
    return (_tanh_backward(gg, conj_grad(out)),
            conj_grad(gg) * grad * (-2 * conj_grad(out)))


asinh = _math("asinh(input)", "arcsinh", lambda grad, x: grad / conj_grad((x * x + 1).sqrt()),
              "The inverse hyperbolic sine of each element.")


def _acosh_derivative(grad, x):
    # complex: sqrt(z - 1) sqrt(z + 1), not sqrt(z^2 - 1): they differ in sign for Re z < 0;
    # real: sqrt(x^2 - 1), finite for x < -1 where acosh itself is nan (as PyTorch)
    if x.is_complex():
        return grad / conj_grad((x - 1).sqrt() * (x + 1).sqrt())
    return grad / (x * x - 1).sqrt()


acosh = _math("acosh(input)", "arccosh", _acosh_derivative,
              "The inverse hyperbolic cosine of each element.")
atanh = _math("atanh(input)", "arctanh", lambda grad, x: grad / conj_grad(1 - x * x),
              "The inverse hyperbolic tangent of each element.")


# --- sigmoid and logit ------------------------------------------------------------------------

def _sigmoid(xp, x):
    if x.dtype.kind == "c":
        return 1 / (1 + xp.exp(-x))
    expit = _EXPIT.get(xp)
    if expit is None:
        expit = _EXPIT[xp] = special_of(xp).expit
    return expit(x)                         # stable: never evaluates exp of a large number


_EXPIT = {}         # backend module -> its expit


sigmoid = unary("sigmoid(input)", _sigmoid, lambda grad, x, *, out: _sigmoid_backward(grad, out),
                doc="The logistic sigmoid ``1 / (1 + exp(-input))`` of each element.",
                saves_inputs=False, scalars=False)


@op("_sigmoid_backward(grad_output, output)", inputs=2, method=False, promote=FLOAT, out=False,
    scalars=False, upcast=False)
def _sigmoid_backward(xp, grad, out):
    """sigmoid's gradient from its output, fused: ``grad_output * conj(output * (1 - output))``;
    bfloat16 in float32 rounded once, float16 rounding each product as PyTorch's kernels."""
    if out.dtype == D.float16.np:
        return grad * (1 - out) * out
    wide = out.dtype == D.bfloat16.np
    if wide:
        grad, out = grad.astype(xp.float32), out.astype(xp.float32)
    d = xp.subtract(1, out, out=xp.empty_like(out))
    if d.dtype.kind == "c":
        d *= out
        d = _conj_times(xp, d, grad)
    else:                           # (grad * (1 - out)) * out, PyTorch's order
        d = _conj_times(xp, d, grad)
        d *= out
    return d.astype(D.bfloat16.np) if wide else d


@_sigmoid_backward.derivative
def _(gg, grad, out):
    return (_sigmoid_backward(gg, conj_grad(out)),
            conj_grad(gg) * grad * (-2 * conj_grad(out) + 1))


def _logit(xp, x, eps):
    eps = None if eps is None else float_arg(eps, "logit", "eps")
    dtype = x.dtype
    if eps is not None:
        fitted_number(eps, dtype)               # PyTorch converts eps to the input's dtype
    low = dtype.itemsize == 2                   # float16 or bfloat16 (float8 is rejected)
    f = x.astype(xp.float32) if low else x
    if eps is not None and eps >= 0:
        # eps in the input's dtype, and not clip: PyTorch tests the lower bound first, which
        # matters when eps > 0.5
        lo = device_scalar(xp, dtype.type(eps))
        lo, hi = lo.astype(f.dtype), (1 - lo).astype(f.dtype)
        f = xp.where(f < lo, lo, xp.where(f > hi, hi, f))
    if not low:
        return xp.log(f / (1 - f))
    # PyTorch rounds 1 - x and x / (1 - x) to the 16-bit dtype before the logarithm; doing
    # the same keeps results identical near 0.5, where the logarithm cancels
    one_minus = (1 - f).astype(dtype).astype(xp.float32)
    ratio = (f / one_minus).astype(dtype).astype(xp.float32)
    return xp.log(ratio).astype(dtype)


def _logit_grad(grad, x, eps):
    eps = None if eps is None else float_arg(eps, "logit", "eps")
    clamped = eps is not None and eps >= 0
    lo, hi = (eps, 1 - eps) if clamped else (0.0, 1.0)
    data = x._data
    xp = xp_of(data)
    outside = (data < lo) | (data > hi)
    if not outside.any():
        return grad / (x * (1 - x) + 0.0)     # + 0.0: +inf at -0.0 too, as PyTorch
    # Outside [lo, hi] the gradient is 0 when eps clamped the input and NaN otherwise. The
    # input is replaced there by 0.5 through nan_to_num, whose gradient is 0 at the replaced
    # entries, so that second derivatives stay finite (0.5 stands in for a NaN input too).
    hole = _make(xp.where(outside, xp.nan, 0).astype(data.dtype))
    safe = (x + hole).nan_to_num(0.5)
    factor = xp.where(outside, 0.0 if clamped else xp.nan, xp.where(xp.isnan(data), xp.nan, 1))
    return grad * _make(factor.astype(data.dtype)) / (safe * (1 - safe) + 0.0)


logit = unary("logit(input, eps=None)", _logit, _logit_grad,
              doc="``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` if eps is "
                  "given.", promote=REAL_FLOAT, upcast=False, scalars=False)


# --- special functions ------------------------------------------------------------------------

def _erfinv(xp, x):
    return xp.where(x == 0, x, special_of(xp).erfinv(x))     # keeps the sign of -0.0


_TINY64 = 2.2250738585072014e-308     # the smallest normal float64


# zeta(k) - 1 for k = 2..41: the Taylor coefficients of lgamma about 1 and 2
_ZETA_MINUS_ONE = (
    0.6449340668482264, 0.2020569031595943, 0.08232323371113819, 0.03692775514336993,
    0.01734306198444914, 0.008349277381922827, 0.00407735619794434, 0.0020083928260822143,
    0.0009945751278180853, 0.0004941886041194645, 0.0002460865533080483, 0.00012271334757848915,
    6.124813505870483e-05, 3.058823630702049e-05, 1.528225940865187e-05, 7.637197637899763e-06,
    3.81729326499984e-06, 1.908212716553939e-06, 9.539620338727962e-07, 4.769329867878064e-07,
    2.38450502727733e-07, 1.1921992596531106e-07, 5.960818905125948e-08, 2.980350351465228e-08,
    1.4901554828365043e-08, 7.45071178983543e-09, 3.725334024788457e-09, 1.862659723513049e-09,
    9.313274324196682e-10, 4.656629065033784e-10, 2.3283118336765053e-10, 1.164155017270052e-10,
    5.820772087902701e-11, 2.9103850444971e-11, 1.4551921891041985e-11, 7.275959835057482e-12,
    3.637979547378651e-12, 1.818989650307066e-12, 9.094947840263888e-13, 4.547473783042154e-13)
_EULER_GAMMA = 0.5772156649015329


# the series' coefficients per centre: (zeta(k) - [c == 2]) / k, k = 2..41
_TAYLOR_ABOUT_ONE = tuple((z + 1) / k for k, z in enumerate(_ZETA_MINUS_ONE, 2))
_TAYLOR_ABOUT_TWO = tuple(z / k for k, z in enumerate(_ZETA_MINUS_ONE, 2))


def _lgamma_near_zeros(xp, x):
    """lgamma on [0.6, 2.5] to within 2.5 ulp, by its Taylor series about 1 (below 1.375) or
    2: ``lgamma(c + e) = lead * e + sum_k (-1)^k (zeta(k) - [c == 2]) e^k / k``."""
    out = xp.empty_like(x)
    near_one = x < 1.375
    for part, centre, lead, coefficients in (
            (near_one, 1.0, -_EULER_GAMMA, _TAYLOR_ABOUT_ONE),
            (~near_one, 2.0, 1 - _EULER_GAMMA, _TAYLOR_ABOUT_TWO)):
        if not part.any():
            continue
        e = x[part] - centre                    # exact there
        minus_e = -e
        acc = xp.full_like(e, coefficients[-1])
        for c in coefficients[-2::-1]:          # Horner's rule, in place
            acc *= minus_e
            acc += c
        out[part] = e * (lead + e * acc) + 0.0  # not -0
    return out


def _lgamma(xp, x):
    out = xp.where(xp.isneginf(x), xp.inf, special_of(xp).gammaln(x))   # |Gamma(-inf)| = inf
    if x.dtype == xp.float64:
        # SciPy's gammaln overflows at subnormal x, where lgamma(x) is -log|x| to the last bit
        tiny = (xp.abs(x) < _TINY64) & (x != 0)
        if tiny.any():
            out = xp.where(tiny, -xp.log(xp.abs(xp.where(tiny, x, 1))), out)
        # and loses the relative precision near its zeros at 1 and 2 (up to 1e-4 of it)
        central = (x >= 0.6) & (x <= 2.5)
        if central.any():
            out[central] = _lgamma_near_zeros(xp, x[central])
    return out


def _polygamma(xp, x, n):
    n = int64_arg(n, "polygamma", "n", 1)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if x.dtype.kind == "c":     # (after n's check; PyTorch's kernel for n = 0, 1 is named so)
        kernel = ("digamma", "trigamma")[n] if n < 2 else "polygamma"
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{D.FROM_NUMPY[x.dtype]._torch_name}'")
    out = special_of(xp).polygamma(n, x).astype(x.dtype, copy=False)
    if n >= 1:
        # PyTorch's series gives NaN (not the limit) at -inf for n = 1, at +inf for n >= 2
        out = xp.where(x == (-xp.inf if n == 1 else xp.inf), xp.nan, out).astype(x.dtype)
    return out


erf = unary("erf(input)", lambda xp, x: special_of(xp).erf(x),
            lambda grad, x: grad * _TWO_OVER_SQRT_PI * (-x * x).exp(),
            doc="The error function of each element.", promote=REAL_VML, scalars=False)
erfc = unary("erfc(input)", lambda xp, x: special_of(xp).erfc(x),
             lambda grad, x: grad * -_TWO_OVER_SQRT_PI * (-x * x).exp(),
             doc="The complementary error function ``1 - erf(input)``.", promote=REAL_VML,
             scalars=False)
erfinv = unary("erfinv(input)", _erfinv,      # recomputed: the result may change in place
               lambda grad, x: grad * _SQRT_PI_OVER_TWO * x.erfinv().square().exp(),
               doc="The inverse error function of each element.", promote=REAL_VML,
               scalars=False)
lgamma = unary("lgamma(input)", _lgamma, lambda grad, x: grad * x.digamma(),
               doc="The log of the absolute value of the gamma function.", promote=REAL_VML,
               scalars=False)
digamma = unary("digamma(input)", lambda xp, x: special_of(xp).digamma(x),
                lambda grad, x: grad * polygamma(1, x),
                doc="The logarithmic derivative of the gamma function.", promote=REAL_NAMED,
                scalars=False)
polygamma = unary("polygamma(n, input)", _polygamma,
                  lambda grad, x, n: grad * polygamma(n + 1, x),
                  doc="The ``n``-th derivative of the digamma function.",
                  promote=Policy("polygamma", lambda d, name, operands: d if d.category ==
                                 D.COMPLEX else REAL_NAMED.rule(d, name, operands)),
                  inputs=("input",), method=False, inplace=False, scalars=False)


def _polygamma_method(self, n):
    """The ``n``-th derivative of the digamma function of this tensor."""
    return polygamma(n, self)


def _polygamma_inplace(self, n):
    """In-place ``polygamma``."""
    return call_inplace(polygamma, (self,), (n,))


_polygamma_inplace._ember_op = polygamma    # (what vmap's and forward AD's dispatch read)


# the method's signature, ``x.polygamma(n)``, puts the tensor first
Tensor.polygamma = _polygamma_method
Tensor.polygamma_ = _polygamma_inplace


# --- rounding ---------------------------------------------------------------------------------

def _rounding(name, doc):
    """floor, ceil or trunc: the ufunc of that name on floats, a copy of integers."""
    def forward(xp, x):
        # (an integer copy keeps the input's layout, as PyTorch's kernels' outputs do)
        return x.copy(order="K") if x.dtype.kind in "iu" else getattr(xp, name)(x)
    new = unary(f"{name}(input)", forward, lambda grad, x: zeros_for(grad), doc=doc,
                promote=ROUNDING, saves_inputs=False, scalars=False)

    @new.inplace_variant
    def _(xp, dst, a):
        if a.dtype.kind not in "iu":
            getattr(xp, name)(a, out=dst, casting="unsafe")
    return new


floor = _rounding("floor", "The largest integer not greater than each element.")
ceil = _rounding("ceil", "The smallest integer not less than each element.")
trunc = _rounding("trunc", "Each element rounded toward zero.")


def _round(xp, x, decimals):
    given = decimals is not None            # PyTorch's round.decimals overload, even for 0
    decimals = int64_arg(decimals, "round", "decimals") if given else 0
    if x.dtype.kind in "iubc":
        # integers are copied, unless decimals is given (even 0): bool and complex never
        if given or x.dtype.kind in "bc":
            kernel = "round_vml_cpu" if decimals == 0 else "round_cpu"
            raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                      f"'{D.FROM_NUMPY[x.dtype]._torch_name}'")
        return x.copy(order="K")
    if decimals == 0:
        return xp.rint(x)                           # half to even
    scale = device_scalar(xp, x.dtype.type(10)) ** abs(decimals)
    if decimals > 0:
        return xp.rint(x * scale) / scale
    return xp.rint(x / scale) * scale


round = unary("round(input, *, decimals=None)", _round, lambda grad, x, decimals: zeros_for(grad),
              doc="Each element rounded half to even to ``decimals`` decimal places.",
              promote=ROUNDING, saves_inputs=False, scalars=False)


round.named_by(lambda flat, params, out: "RoundBackward0" if params[0] is None else
               "RoundBackward1")


# --- float classification and nan_to_num ------------------------------------------------------

def _classifier(name, test, doc, *, no_float8=(), kernel=None, complex_ok=True, out=False):
    """A bool-valued test of each element (no gradient); the float8 dtypes in ``no_float8``
    raise, naming ``kernel`` as PyTorch does."""
    def forward(xp, x):
        dtype = D.FROM_NUMPY[x.dtype]
        if dtype in no_float8:
            raise NotImplementedError(f"\"{kernel or name}\" not implemented for "
                                      f"'{dtype._torch_name}'")
        if dtype.is_complex and not complex_ok:
            raise RuntimeError(f"{name} does not support complex inputs.")
        return test(xp, x)
    forward.__doc__ = doc
    return op(f"{name}(input)", out=out)(forward)


isnan = _classifier("isnan", lambda xp, x: xp.isnan(x), "True where the element is NaN.")
# PyTorch tests float8_e5m2 for infinities, but not float8_e4m3fn (which has none)
isinf = _classifier("isinf", lambda xp, x: xp.isinf(x),
                    "True where the element is positive or negative infinity.",
                    no_float8=(D.float8_e4m3fn,))
isfinite = _classifier("isfinite", lambda xp, x: xp.isfinite(x),
                       "True where the element is neither infinite nor NaN.",
                       no_float8=(D.float8_e4m3fn,))
isposinf = _classifier("isposinf", lambda xp, x: xp.isposinf(x),
                       "True where the element is positive infinity.", no_float8=D.FLOAT8,
                       kernel="isposinf_cpu", complex_ok=False, out=True)
isneginf = _classifier("isneginf", lambda xp, x: xp.isneginf(x),
                       "True where the element is negative infinity.", no_float8=D.FLOAT8,
                       kernel="isneginf_cpu", complex_ok=False, out=True)


def _fill_value(name, v):
    """A replacement value of nan_to_num as PyTorch parses it: a number, 0-d tensor or None."""
    return None if v is None else float_arg(v, "nan_to_num", name)


def _nan_to_num(xp, x, nan, posinf, neginf):
    out = _replaced(xp, x, nan, posinf, neginf)
    # PyTorch writes into ``empty_like(input)``: a dense input's own strides, those of its
    # dims of size 1 included (not the strides an elementwise op's sort gives)
    return out if out.strides == x.strides else laid_like(xp, out, x)


def _replaced(xp, x, nan, posinf, neginf):
    nan, posinf, neginf = (_fill_value(k, v) for k, v in
                           (("nan", nan), ("posinf", posinf), ("neginf", neginf)))
    nan = 0.0 if nan is None else nan
    dtype = D.FROM_NUMPY[x.dtype]
    if dtype.is_complex:
        out = xp.empty_like(x)
        out.real = _replaced(xp, x.real, nan, posinf, neginf)
        out.imag = _replaced(xp, x.imag, nan, posinf, neginf)
        return out
    if not dtype.is_floating_point:
        return x.copy()
    info = D.finfo(dtype)
    # the replacements are cast to the input dtype, so a too-large posinf becomes inf again
    fills = [device_scalar(xp, x.dtype.type(v)) for v in
             (nan, info.max if posinf is None else posinf, info.min if neginf is None else neginf)]
    out = xp.where(xp.isnan(x), fills[0], x)
    out = xp.where(xp.isposinf(x), fills[1], out)
    return xp.where(xp.isneginf(x), fills[2], out)


# computed in the input's own dtype: the default posinf is that dtype's max, not float32's
nan_to_num = unary("nan_to_num(input, nan=0.0, posinf=None, neginf=None)", _nan_to_num,
                   lambda grad, x, nan, posinf, neginf: grad * isfinite(x),
                   doc="Replaces NaN, positive and negative infinity by finite numbers.",
                   promote=SAME, upcast=False, scalars=False, pointwise=False)
nan_to_num.refuse_complex_grad()


def _nan_to_num_out_layout(res, inputs, out):
    """PyTorch resizes nan_to_num's out= as an elementwise op's (for floating inputs; an
    integer input is copied into a row-major out, as an empty result is)."""
    xp = xp_of(res)
    if res.dtype.kind not in "fcV" or not res.size:
        return res.copy()           # (fresh: row-major, size-1 dims included)
    return laid_as_operands(xp, res, [inputs[0]._data])


nan_to_num.out_layout = _nan_to_num_out_layout


def _positive(xp, x):
    if x.dtype.kind == "b":
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return x


positive = unary("positive(input)", _positive, lambda grad, x: grad,
                 doc="``input`` itself, as the unary ``+`` operator.", promote=None,
                 view=True, inplace=False, saves_inputs=False)
positive.returns_input_when(lambda x, params: x._data.dtype.kind != "b")   # (bool raises)

ALIASES = {"arccos": "acos", "arcsin": "asin", "arctan": "atan", "arccosh": "acosh",
           "arcsinh": "asinh", "arctanh": "atanh", "fix": "trunc"}
