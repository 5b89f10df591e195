"""Gamma and Dirichlet sampling's differentiable parts (Dirichlet's: below ``_dirichlet_grad``).

``ember._standard_gamma`` draws Gamma(alpha, 1) samples on the host (ember/_random.py) and
passes them through ``_standard_gamma_sample`` here, whose derivative is the implicit
reparameterization gradient (Figurnov et al., 2018, "Implicit Reparameterization
Gradients") computed by ``_standard_gamma_grad``: the change of a sample x with alpha at a
fixed quantile u = F(x; alpha), F the regularized lower incomplete gamma function P(alpha, x)
and f its density::

    dx/dalpha = -(dF/dalpha) / f(x) = -int_0^x f(t) (log t - digamma(alpha)) dt / f(x)

computed in float64:

* x < 1, from the series P(alpha, x) = sum_n e^-x x^(alpha+n) / Gamma(alpha+n+1):
  dx/dalpha = -sum_n r_n (log x - digamma(alpha+n+1)), r_n = prod_{k<=n} x / (alpha+k);
* x >= 1, in t = x e^v: dx/dalpha = -x int_{-inf}^0 g = x int_0^inf g, where
  g(v) = exp(alpha v - x (e^v - 1)) (v + log x - digamma(alpha)) (the integral over the whole
  line is the derivative of F(inf) = 1, zero). On the half where the exponent falls away
  from 0 (v < 0 when x <= alpha, else v > 0) a double-exponential rule integrates it:
  v = s exp(tau - e^-tau) on an even grid of tau, s = 1 / (sqrt(x) + |alpha - x|) the
  width of the peak.
"""

import numpy as np

from ember import _dtype as D
from ember.autograd.grad_mode import no_grad
from ember.backend import special_of
from ember.ops._registry import op

__all__ = []

_SERIES_TERMS = 24              # x < 1: r_n < 1 / n!, below float64's epsilon from n = 20
# the quadrature's nodes v / s = exp(tau - e^-tau), tau = -3.5, -3.4, ..., 4.7 (from 1e-16,
# near 0, to 110, past the decay) and weights; relative error below 1e-9
_TAU = np.linspace(-3.5, 4.7, 83)
_NODE = np.exp(_TAU - np.exp(-_TAU))
_WEIGHT = _NODE * (1 + np.exp(-_TAU)) * (_TAU[1] - _TAU[0])
_CHUNK = {np: 512}              # elements per quadrature block (a GPU takes 2**18): the
                                # (block, nodes) arrays stay in the CPU's cache


def _check_dtypes(xp, alpha, x):
    """PyTorch's errors for operands its gamma kernels do not take (16-bit floats only on a
    GPU)."""
    dtype = D.FROM_NUMPY[alpha.dtype]
    on_cpu = xp is np
    if dtype not in ((D.float32, D.float64) if on_cpu else
                     (D.float16, D.bfloat16, D.float32, D.float64)):
        kernel = "_standard_gamma_grad_" + ("cpu" if on_cpu else "cuda")
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype._torch_name}'")
    if x.dtype != alpha.dtype:
        raise RuntimeError(f"Found dtype {D.FROM_NUMPY[x.dtype]._torch_name} but expected "
                           f"{dtype._torch_name}")


def _series(xp, alpha, x):
    """dx/dalpha by the series (for 0 < x < 1)."""
    log_x = xp.log(x)
    term = xp.ones_like(x)
    psi = special_of(xp).digamma(alpha + 1)
    total = xp.zeros_like(x)
    for n in range(_SERIES_TERMS):
        term = term * x / (alpha + n)
        if n:
            psi = psi + 1 / (alpha + n)
        total = total + term * (log_x - psi)
    return -total


def _quadrature(xp, alpha, x):
    """dx/dalpha by the quadrature on the decaying half line (for x >= 1)."""
    node, weight = xp.asarray(_NODE), xp.asarray(_WEIGHT)
    out = xp.empty_like(x)
    chunk = _CHUNK.get(xp, 1 << 18)
    for start in range(0, x.size, chunk):
        part = slice(start, start + chunk)
        a, t = alpha[part, None], x[part, None]
        upper = t >= a
        width = 1 / (xp.sqrt(t) + xp.abs(a - t))
        v = xp.where(upper, node, -node) * width
        g = xp.exp(a * v - t * xp.expm1(v)) * (v + (xp.log(t) - special_of(xp).digamma(a)))
        total = (g @ weight) * (width * t)[:, 0]
        out[part] = xp.where(upper[:, 0], total, -total)
    return out


@op("_standard_gamma_grad(self, output)", inputs=2, method=False)
def _standard_gamma_grad(xp, alpha, x):
    """d output / d self of Gamma(self, 1) samples ``output`` at a fixed quantile."""
    _check_dtypes(xp, alpha, x)
    alpha, x = xp.broadcast_arrays(alpha, x)
    shape, dtype = alpha.shape, alpha.dtype
    a = alpha.astype(np.float64).ravel()
    t = x.astype(np.float64).ravel()
    ok = (a > 0) & (t > 0) & xp.isfinite(a) & xp.isfinite(t)
    a_ok, t_ok = xp.where(ok, a, 1.0), xp.where(ok, t, 1.0)
    small = t_ok < 1
    grad = xp.zeros_like(t)
    if bool(small.any()):
        grad[small] = _series(xp, a_ok[small], t_ok[small])
    if not bool(small.all()):
        grad[~small] = _quadrature(xp, a_ok[~small], t_ok[~small])
    # PyTorch's values elsewhere: 0 where x <= 0, else NaN (alpha <= 0, NaN or infinity)
    grad = xp.where(ok, grad, xp.where(t <= 0, 0.0, xp.nan))
    return grad.reshape(shape).astype(dtype, copy=False)


@_standard_gamma_grad.derivative
def _(grad, alpha, x, *, needs=(True, True)):
    if needs[0]:
        raise NotImplementedError("the derivative for '_standard_gamma_grad' is not "
                                  "implemented.")
    return None, None


@op("_standard_gamma_sample(self, sample)", inputs=2, method=False,
    grad_fn_name="StandardGammaBackward0")
def _standard_gamma_sample(xp, alpha, sample):
    """``sample`` (Gamma(self, 1) samples drawn elsewhere), with the reparameterization
    gradient ``_standard_gamma_grad(self, sample)`` with respect to ``self``."""
    return sample.copy()


@_standard_gamma_sample.derivative
def _(grad, alpha, sample):
    return grad * _standard_gamma_grad(alpha, sample), None


# --- Dirichlet: x_i's marginal is Beta(a, b), a = alpha_i, b = total - a the other alphas' sum.
# ``_dirichlet_grad`` is (dx/da at fixed b and quantile I_x(a, b)) / (1 - x), the factor by
# which Dirichlet's rsample scales its gradient (Jankowiak & Obermeyer, 2018), with
#   dx/da = -int_0^x f(t) (log t - digamma(a) + digamma(a + b)) dt / f(x),
# f the Beta density, or + the same integral over [x, 1] (both together are zero). The tail
# below x (x at most the mean) is integrated in u, t = x u^(1/a), the one above in v,
# 1 - t = (1 - x) v^(1/b), which take out the power at the far end: the integrands are
# ((1 - t) / (1 - x))^(b - 1) x / a and (t / x)^(a - 1) (1 - x) / b, summed on a tanh-sinh
# rule u = expit(pi sinh tau) in logs (the power alone can overflow where u underflows).
_TS_TAU = np.arange(-5.0, 3.5, 0.05)
_TS_LOG_U = -np.logaddexp(0.0, -np.pi * np.sinh(_TS_TAU))
_TS_LOG_W = (np.log(np.pi * np.cosh(_TS_TAU) * 0.05) + _TS_LOG_U
             - np.logaddexp(0.0, np.pi * np.sinh(_TS_TAU)))


def _dirichlet_tail(xp, a, b, x, psi_gap):
    """(dx/da) * a (x at most the mean) by the tanh-sinh rule over the tail below x."""
    log_u, log_w = xp.asarray(_TS_LOG_U), xp.asarray(_TS_LOG_W)
    out = xp.empty_like(x)
    chunk = _CHUNK.get(xp, 1 << 18)
    for start in range(0, x.size, chunk):
        part = slice(start, start + chunk)
        pa, pb, px = a[part, None], b[part, None], x[part, None]
        log_ratio = log_u / pa                          # log(t / x)
        t = px * xp.exp(log_ratio)
        log_f = (pb - 1) * (xp.log1p(-t) - xp.log1p(-px)) + log_w
        h = xp.log(px) + log_ratio - psi_gap[part, None]
        out[part] = -(xp.exp(log_f) * h).sum(-1) * x[part]
    return out


def _dirichlet_head(xp, a, b, x, psi_gap):
    """(dx/da) * b (x above the mean) by the tanh-sinh rule over the tail above x."""
    log_v, log_w = xp.asarray(_TS_LOG_U), xp.asarray(_TS_LOG_W)
    out = xp.empty_like(x)
    chunk = _CHUNK.get(xp, 1 << 18)
    for start in range(0, x.size, chunk):
        part = slice(start, start + chunk)
        pa, pb, px = a[part, None], b[part, None], x[part, None]
        log_t = xp.log1p(-(1 - px) * xp.exp(log_v / pb))
        log_f = (pa - 1) * (log_t - xp.log(px)) + log_w
        out[part] = (xp.exp(log_f) * (log_t - psi_gap[part, None])).sum(-1) * (1 - x[part])
    return out


@op("_dirichlet_grad(x, alpha, total)", inputs=3, method=False,
    grad_fn_name="NotImplemented")
def _dirichlet_grad(xp, x, alpha, total):
    """d x / d alpha / (1 - x) at a fixed quantile of ``x`` ~ Beta(alpha, total - alpha),
    the other concentrations held: the factor in Dirichlet's reparameterized gradient."""
    for other in (alpha, total):
        if other.dtype != x.dtype:
            raise RuntimeError(f"Found dtype {D.FROM_NUMPY[other.dtype]._torch_name} but "
                               f"expected {D.FROM_NUMPY[x.dtype]._torch_name}")
    dtype = D.FROM_NUMPY[x.dtype]
    if dtype not in (D.float32, D.float64):
        kernel = "_dirichlet_grad_" + ("cpu" if xp is np else "cuda")
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype._torch_name}'")
    x, alpha, total = xp.broadcast_arrays(x, alpha, total)
    shape = x.shape
    t = x.astype(np.float64).ravel()
    a = alpha.astype(np.float64).ravel()
    b = total.astype(np.float64).ravel() - a
    ok = (t > 0) & (t < 1) & (a > 0) & (b > 0) & xp.isfinite(a) & xp.isfinite(b)
    t, a, b = xp.where(ok, t, 0.5), xp.where(ok, a, 1.0), xp.where(ok, b, 1.0)
    psi_gap = special_of(xp).digamma(a) - special_of(xp).digamma(a + b)
    low = t * (a + b) <= a
    grad = xp.zeros_like(t)
    if bool(low.any()):
        grad[low] = _dirichlet_tail(xp, a[low], b[low], t[low], psi_gap[low]) / a[low]
    if not bool(low.all()):
        high = ~low
        grad[high] = _dirichlet_head(xp, a[high], b[high], t[high], psi_gap[high]) / b[high]
    grad = grad / (1 - t)
    # PyTorch's value where x <= 0 is 0; ember's elsewhere outside the support is NaN
    grad = xp.where(ok, grad, xp.where(x.ravel() <= 0, 0.0, xp.nan))
    return grad.reshape(shape).astype(x.dtype, copy=False)


@_dirichlet_grad.derivative
def _(grad, x, alpha, total):
    raise RuntimeError("derivative for aten::_dirichlet_grad is not implemented")


@op("_dirichlet_sample(self, sample)", inputs=2, method=False,
    grad_fn_name="_DirichletBackward")
def _dirichlet_sample(xp, alpha, sample):
    """``sample`` (Dirichlet(self) samples over the last dimension, drawn elsewhere), with
    the reparameterization gradient of Jankowiak & Obermeyer (2018) with respect to
    ``self``."""
    return sample.copy()


@_dirichlet_sample.derivative
def _(grad, alpha, sample):
    # x_i moves by d_i (1 - x_i) with alpha_i and the other x_j by -d_i x_j, which keeps the
    # sample on the simplex: d = _dirichlet_grad(x, alpha, sum alpha). Once differentiable,
    # as PyTorch's: under create_graph the gradient has no grad_fn
    with no_grad():
        total = alpha.sum(-1, keepdim=True).expand_as(alpha)
        d = _dirichlet_grad(sample, alpha, total)
        return d * (grad - (sample * grad).sum(-1, keepdim=True)), None


PUBLIC = {"_standard_gamma_grad": _standard_gamma_grad.function,     # torch._standard_gamma_grad
          "_dirichlet_grad": _dirichlet_grad.function}
