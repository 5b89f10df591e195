"""Special functions (``torch.special``): Bessel functions, the normal distribution, entropy,
sinc, the Hurwitz zeta function, incomplete and multivariate gamma functions.

Ops that PyTorch has only as ``torch.special.<name>`` register with namespace="special";
those it also has at the top level (``i0``, ``sinc``, ``igamma``, ``mvlgamma``) register
there once and ember/special re-exports them under the special names. The orthogonal
polynomials live in special_poly.py, softmax and the other log-space ops in log_space.py,
the remaining pointwise odds (logaddexp, ldexp, gcd, ...) in math_odds.py.
"""

import math

import scipy.special

from ember import _dtype as D
from ember._tensor import Tensor
from ember.backend import special_of
from ember.ops._elementwise import binary, conj_grad, unary
from ember.ops._linalg_utils import on_host
from ember.ops._op_errors import RefusedFirst
from ember.ops._promotion import Policy
from ember.ops._scalars import int64_arg, number_arrays
from ember.ops.binary_math import scalar_overload_nodes, where
from ember.ops.unary_math import _lgamma, erf

_SQRT_2PI = math.sqrt(2 * math.pi)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_LOG_PI = math.log(math.pi)


# --- dtype policies ---------------------------------------------------------------------------

def real_policy(kernel, *, half=True, integers=True, float8_kernel=None, composite=False):
    """Real-only math: integers compute in the default float dtype (or raise, when
    ``integers`` is False), complex and float8 raise naming ``kernel`` (``float8_kernel``)
    as PyTorch does, and so do float16/bfloat16 unless ``half``; a ``composite`` (PyTorch
    computes it of other ops) refuses before any check of ``out=``."""
    refusal = RefusedFirst if composite else NotImplementedError

    def rule(d, name, operands):
        if d in D.FLOAT8:
            raise NotImplementedError(f"\"{float8_kernel or kernel}\" not implemented for "
                                      f"'{d._torch_name}'")
        if d.category == D.COMPLEX or (not half and d in (D.float16, D.bfloat16)) or \
                (not integers and d.category < D.FLOATING):
            raise refusal(f"\"{kernel}\" not implemented for '{d._torch_name}'")
        return D.get_default_dtype() if d.category < D.FLOATING else d
    return Policy(f"real[{kernel}]", rule)


def _scipy(name):
    """The forward ``scipy.special.<name>(x)``, in the input's dtype."""
    def forward(xp, *arrays):
        out = getattr(special_of(xp), name)(*arrays)
        dtype = next(a.dtype for a in arrays if hasattr(a, "dtype"))
        return out.astype(dtype, copy=False)
    return forward


def _special(name, forward, derivative=None, *, doc, half=True, kernel=None, arg="input",
             float8_kernel=None, composite=False, **options):
    """A real elementwise op of ``ember.special`` (no method, no in-place variant); ``arg``
    names its parameter (a few are ``x`` in PyTorch)."""
    policy = real_policy(kernel or f"{name}_cpu", half=half, float8_kernel=float8_kernel,
                         composite=composite)
    return unary(f"{name}({arg})", forward, derivative, doc=doc, namespace="special",
                 promote=policy, inplace=False, scalars=False, **options)


def _safe(x):
    """``x`` with its zeros replaced by ones: a divisor whose masked-out entries keep the
    gradients of ``where`` finite."""
    return where(x == 0, 1.0, x)


# --- Bessel functions -------------------------------------------------------------------------

def _tiny(x):
    """Where ``|x|`` is at most the dtype's epsilon (and where it is NaN): there PyTorch gives
    the limit of the Bessel slopes at 0, as ``1 / x`` is inaccurate or overflows."""
    return (x.abs() > D.finfo(x.dtype).eps).logical_not()


def _i1_grad(grad, x, *, out):
    # d/dx I1 = I0 - I1 / x, which tends to 1/2 at 0
    return grad * where(_tiny(x), 0.5, i0(x) - out / _safe(x))


def _i1e_grad(grad, x, *, out):
    return grad * where(_tiny(x), 0.5, i0e(x) - out * (x.sgn() + 1 / _safe(x)))


i0 = unary("i0(input)", _scipy("i0"), lambda grad, x: grad * i1(x),
           doc="The modified Bessel function of the first kind of order zero.",
           promote=real_policy("i0_vml_cpu"), scalars=False)
i0e = _special("i0e", _scipy("i0e"), lambda grad, x, *, out: grad * (i1e(x) - x.sgn() * out),
               doc="The exponentially scaled modified Bessel function of order zero.")
i1 = _special("i1", _scipy("i1"), _i1_grad,
              doc="The modified Bessel function of the first kind of order one.")
i1e = _special("i1e", _scipy("i1e"), _i1e_grad,
               doc="The exponentially scaled modified Bessel function of order one.")

# PyTorch gives these no derivative (their outputs do not require grad)
bessel_j0 = _special("bessel_j0", _scipy("j0"), half=False,
                     doc="The Bessel function of the first kind of order zero.")
bessel_j1 = _special("bessel_j1", _scipy("j1"), half=False,
                     doc="The Bessel function of the first kind of order one.")
bessel_y0 = _special("bessel_y0", _scipy("y0"), half=False,
                     doc="The Bessel function of the second kind of order zero.")
bessel_y1 = _special("bessel_y1", _scipy("y1"), half=False,
                     doc="The Bessel function of the second kind of order one.")
modified_bessel_i0 = _special("modified_bessel_i0", _scipy("i0"), half=False,
                              doc="The modified Bessel function of the first kind of order 0.")
modified_bessel_i1 = _special("modified_bessel_i1", _scipy("i1"), half=False,
                              doc="The modified Bessel function of the first kind of order 1.")
modified_bessel_k0 = _special("modified_bessel_k0", _scipy("k0"), half=False,
                              doc="The modified Bessel function of the second kind of order 0.")
modified_bessel_k1 = _special("modified_bessel_k1", _scipy("k1"), half=False,
                              doc="The modified Bessel function of the second kind of order 1.")
scaled_modified_bessel_k0 = _special(
    "scaled_modified_bessel_k0", _scipy("k0e"), half=False, arg="x",
    doc="The exponentially scaled modified Bessel function of the second kind of order 0.")
scaled_modified_bessel_k1 = _special(
    "scaled_modified_bessel_k1", _scipy("k1e"), half=False, arg="x",
    doc="The exponentially scaled modified Bessel function of the second kind of order 1.")


# cupyx.scipy.special has neither spherical_jn nor airy: on a GPU these two run on the host
def _spherical_j0(xp, x):
    return on_host(xp, lambda np_, a: scipy.special.spherical_jn(0, a).astype(a.dtype,
                                                                              copy=False), x)


def _airy_ai_host(np_, a):
    out = scipy.special.airy(a)[0]
    far = np_.isnan(out) & np_.isfinite(a)      # SciPy gives NaN beyond |x| ~ 1e6
    if far.any():
        # Ai decays to 0 for x -> +inf; for x -> -inf its leading asymptotic term is
        # sin(2/3 |x|^1.5 + pi/4) / (sqrt(pi) |x|^0.25)
        b = np_.abs(a[far]).astype(np_.float64)
        with np_.errstate(invalid="ignore", over="ignore"):
            wave = np_.sin(2 / 3 * b ** 1.5 + math.pi / 4) / (math.sqrt(math.pi) * b ** 0.25)
        out[far] = np_.where(a[far] > 0, 0.0, wave)
    return out.astype(a.dtype, copy=False)


def _airy_ai(xp, x):
    return on_host(xp, _airy_ai_host, x)


spherical_bessel_j0 = _special("spherical_bessel_j0", _spherical_j0, half=False, arg="x",
                               doc="The spherical Bessel function of the first kind of order 0.")
airy_ai = _special("airy_ai", _airy_ai, half=False, arg="x", doc="The Airy function Ai.")


# --- the normal distribution and erfcx --------------------------------------------------------

def _ndtr(xp, x):
    # PyTorch's ndtr is the composite (1 + erf(x * sqrt(1/2))) * 0.5, not the accurate tail
    # (it is 0 below x = -5.5 in float32); a 16-bit float computes each step in float32 and
    # rounds it to its dtype
    dtype = x.dtype
    if dtype.itemsize != 2:
        return (1 + erf.forward(xp, x * dtype.type(math.sqrt(0.5)))) * dtype.type(0.5)
    f32 = xp.float32

    def rounded(a):
        return a.astype(dtype).astype(f32)
    scaled = rounded(x.astype(f32) * f32(math.sqrt(0.5)))
    return (rounded(1 + rounded(erf.forward(xp, scaled))) * f32(0.5)).astype(dtype)


ndtr = _special("ndtr", _ndtr,
                lambda grad, x: grad * (x * x * -0.5).exp() / _SQRT_2PI,
                doc="The standard normal cumulative distribution function.",
                kernel="erf_vml_cpu", float8_kernel="mul_cpu_reduced_float", upcast=False,
                composite=True)
ndtri = _special("ndtri", _scipy("ndtri"),
                 lambda grad, x, *, out: grad * _SQRT_2PI * (out * out * 0.5).exp(),
                 doc="The inverse of ``ndtr``: the quantile of the standard normal.",
                 half=False)
ndtri.reads_inputs(())          # PyTorch saves the result alone
ndtr.copies_inputs(0)           # PyTorch's composite saves erf's scaled input, not the input


@ndtr.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: ``(1 + erf(x * sqrt(1/2))) * 0.5`` of its Scalar overloads
    (MulBackward1, AddBackward1), each node saving what PyTorch's does."""
    x = inputs[0]
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.element_size() == 1:
        return NotImplemented
    from ember.ops._registry import rename_node
    scaled = rename_node(x * math.sqrt(0.5), "MulBackward1")
    return rename_node(rename_node(erf(scaled) + 1, "AddBackward1") * 0.5, "MulBackward1")
log_ndtr = _special("log_ndtr", _scipy("log_ndtr"),
                    lambda grad, x, *, out: grad * (-(out + x * x * 0.5)).exp() / _SQRT_2PI,
                    doc="The logarithm of ``ndtr``, accurate far into the left tail.",
                    half=False)
erfcx = _special("erfcx", _scipy("erfcx"),
                 lambda grad, x, *, out: grad * (2 * x * out - _TWO_OVER_SQRT_PI),
                 doc="The scaled complementary error function ``exp(x**2) * erfc(x)``.",
                 half=False)
entr = _special("entr", _scipy("entr"), lambda grad, x: grad * -(1 + x.log()),
                doc="The elementwise entropy ``-x * log(x)`` (0 at 0, -inf below).")


# --- sinc -------------------------------------------------------------------------------------

def _sinc(xp, x):
    px = x * xp.pi
    return xp.where(x == 0, 1, xp.sin(px) / xp.where(x == 0, 1, px)).astype(x.dtype, copy=False)


def _sinc_grad(grad, x):
    # PyTorch's gradient is 0 wherever x * x underflows to 0 (subnormal x too), even where
    # the incoming gradient is NaN
    square_is_zero = x * x == 0
    safe = where(square_is_zero, 1.0, x)
    px = safe * math.pi
    slope = (px.cos() * px - px.sin()) / (px * safe)
    return where(square_is_zero, 0.0, grad * conj_grad(slope))


sinc = unary("sinc(input)", _sinc, _sinc_grad,
             doc="The normalized sinc function ``sin(pi x) / (pi x)`` (1 at 0).", scalars=False)


# --- xlog1py and zeta -------------------------------------------------------------------------

def _xlog1py(xp, x, y):
    return _scipy("xlog1py")(xp, *number_arrays(xp, x, y))


def _xlog1py_grad(grad, x, y):
    grad_x = grad_y = None
    if isinstance(x, Tensor):
        # x = 0 contributes nothing (the product is held at 0) where log1p(y) is -inf or NaN;
        # PyTorch counts a NaN number y there too, but not a NaN element of a tensor y
        low = y <= -1 if isinstance(y, Tensor) else not y > -1
        grad_x = where((x == 0) & low, 0.0, xlog1py(grad, y))
    if isinstance(y, Tensor):
        grad_y = grad * x / (y + 1)
    return grad_x, grad_y


xlog1py = binary("xlog1py(input, other)", _xlog1py, _xlog1py_grad,
                 doc="``input * log1p(other)``, and 0 where ``input`` is 0 (unless ``other`` "
                     "is NaN).", promote=real_policy("xlog1py_cpu"), namespace="special",
                 inplace=False)
xlog1py.named_by(scalar_overload_nodes("SpecialXlog1Py"))


def _zeta(xp, x, q):
    x, q = number_arrays(xp, x, q)
    out = special_of(xp).zeta(x, q)
    # PyTorch's series gives NaN at q = inf (SciPy: the limit, 0)
    return xp.where(xp.isposinf(q) & (x > 1), xp.nan, out).astype(x.dtype, copy=False)


def _zeta_grad(grad, x, q):
    if isinstance(x, Tensor) and x.requires_grad:
        raise NotImplementedError("the derivative for 'zeta' is not implemented.")
    return None, (grad * -x * zeta(x + 1, q) if isinstance(q, Tensor) else None)


zeta = binary("zeta(input, other)", _zeta, _zeta_grad,
              doc="The Hurwitz zeta function ``sum((k + other) ** -input for k >= 0)``.",
              promote=real_policy("zeta_cpu", half=False), namespace="special", inplace=False)
zeta.named_by(scalar_overload_nodes("SpecialZeta"))


# --- incomplete and multivariate gamma functions ----------------------------------------------

def _igamma(upper):
    """The regularized lower (``upper`` False) or upper incomplete gamma function, with
    PyTorch's values where an argument is 0, infinite or NaN (SciPy gives NaN for a NaN
    argument where PyTorch's tests on the other argument decide first)."""
    lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)

    def forward(xp, a, x):
        out = getattr(special_of(xp), "gammaincc" if upper else "gammainc")(a, x)
        out = xp.where(xp.isinf(x), hi, out)
        out = xp.where(xp.isinf(a), xp.where(xp.isinf(x), xp.nan, lo), out)
        out = xp.where(x == 0, lo, out)
        out = xp.where(a == 0, xp.where(x > 0, hi, xp.nan), out)
        return xp.where((x < 0) | (a < 0), xp.nan, out).astype(a.dtype, copy=False)
    return forward


def _igamma_grad(sign, name):
    def derivative(grad, a, x):
        if a.requires_grad:
            raise NotImplementedError(f"the derivative for '{name}: input' is not implemented.")
        density = ((a - 1) * x.log() - x - a.lgamma()).exp()
        return None, grad * density * sign
    return derivative


igamma = binary("igamma(input, other)", _igamma(False), _igamma_grad(1, "igamma"),
                doc="The regularized lower incomplete gamma function P(input, other).",
                promote=real_policy("igamma_cpu", integers=False), scalars=False)
igammac = binary("igammac(input, other)", _igamma(True), _igamma_grad(-1, "igammac"),
                 doc="The regularized upper incomplete gamma function Q(input, other).",
                 promote=real_policy("igammac_cpu", integers=False), scalars=False)


def _mvlgamma_rule(d, name, operands):
    if d is D.bool_:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if d in D.FLOAT8:
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{d._torch_name}'")
    return D.get_default_dtype() if d.category < D.FLOATING else d     # (complex: _mvlgamma)


def _check_p(p):
    p = int64_arg(p, "mvlgamma", "p", 2)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return p


def _mvlgamma(xp, x, p):
    p = _check_p(p)
    if x.dtype.kind == "c":     # (refused after p's check, before out='s)
        raise RefusedFirst(f"\"arange_cpu\" not implemented for "
                           f"'{D.FROM_NUMPY[x.dtype]._torch_name}'")
    # row-major, as PyTorch's sum of lgammas over a new last dim
    out = xp.full(x.shape, p * (p - 1) / 4 * _LOG_PI, dtype=x.dtype)
    for i in range(p):
        out += _lgamma(xp, x - i / 2)       # lgamma's kernel: its edges (-inf, subnormals)
    return out


def _mvlgamma_grad(grad, x, p):
    total = (x + 0.0).digamma()         # + 0.0: PyTorch's digamma sees +0.0 at -0.0
    for i in range(1, _check_p(p)):
        total = total + (x - i / 2).digamma()
    return grad * total


mvlgamma = unary("mvlgamma(input, p)", _mvlgamma, _mvlgamma_grad,
                 doc="The multivariate log-gamma function of dimension ``p``.",
                 promote=Policy("mvlgamma", _mvlgamma_rule), scalars=False)


from ember.ops import log_space, math_odds, special_poly  # noqa: E402,F401

ALIASES = {**math_odds.ALIASES}
PUBLIC = {**math_odds.PUBLIC, **log_space.PUBLIC}
