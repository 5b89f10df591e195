"""Gamma sampling's differentiable part.

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


PUBLIC = {"_standard_gamma_grad": _standard_gamma_grad.function}     # torch._standard_gamma_grad
