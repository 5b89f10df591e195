"""Classical orthogonal polynomials of ``torch.special``: Chebyshev (four kinds, plain and
shifted), Hermite (physicists' and probabilists'), Laguerre and Legendre.

Each evaluates ``P_n(x)`` elementwise, ``n`` truncated to an integer as PyTorch does (a
negative, infinite or NaN ``n`` gives 0), by the three-term recurrence, with closed forms at
the points where one is exact (``x = +-1`` for Chebyshev and Legendre) and, for Chebyshev
polynomials of high degree inside (-1, 1), the trigonometric form. PyTorch gives them no
derivative.
"""

from ember.ops._elementwise import binary
from ember.ops.special_math import real_policy

__all__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p"]

_TRIG_DEGREE = 6        # above this degree, Chebyshev polynomials in (-1, 1) use cos/sin forms


def _degree(xp, n):
    """``n`` as int64 degrees: truncated, with -1 (degree "below zero") where PyTorch's C cast
    of an infinite, NaN or out-of-range value gives a negative number."""
    ok = xp.isfinite(n) & (xp.abs(n) < 2.0 ** 62)
    return xp.where(ok, xp.trunc(xp.where(ok, n, 0)), -1).astype(xp.int64)


def _recurrence(xp, x, n, first, step):
    """``P_n(x)`` for flat arrays with every ``n >= 2``, from ``P_0 = 1`` and ``P_1 = first``;
    ``step(k, x, p, q)`` gives ``P_k`` from ``p = P_(k-2)`` and ``q = P_(k-1)``."""
    out = xp.empty_like(x)
    idx = xp.arange(x.size)
    p, q = xp.ones_like(x), first
    k = 1
    while idx.size:
        k += 1
        live = n >= k
        if not live.all():              # drop the elements whose degree is reached
            idx, x, n, p, q = idx[live], x[live], n[live], p[live], q[live]
        r = step(k, x, p, q)
        out[idx] = r
        p, q = q, r
    return out


def _evaluate(xp, x, n, cases, first, step):
    """``cases``: (mask, value) pairs in priority order; elements that none of them covers
    (degree 2 or more) take the recurrence."""
    out = xp.zeros(x.shape, dtype=x.dtype)
    done = xp.zeros(x.shape, dtype=bool)
    for mask, value in cases:
        mask = mask & ~done
        out = xp.where(mask, value, out)
        done |= mask
    rest = ~done
    if rest.any():
        xs = x[rest]
        out[rest] = _recurrence(xp, xs, n[rest], first(xs), step)
    return out


def _polynomial(name, doc, cases):
    """Register ``ember.special.<name>(x, n)``; ``cases(xp, x, n)`` gives the special cases
    (besides n < 0, n == 0 and n == 1), P_1 and the recurrence step."""
    def forward(xp, x, n):
        dtype = next(a.dtype for a in (x, n) if hasattr(a, "dtype"))
        x, n = xp.broadcast_arrays(xp.asarray(x, dtype=dtype), xp.asarray(n, dtype=dtype))
        k = _degree(xp, n)
        special, first, step = cases(xp, x, k)
        table = [(k < 0, 0)] + special + [(k == 0, 1), (k == 1, first(x))]
        return _evaluate(xp, x, k, table, first, step).astype(dtype, copy=False)
    forward.__doc__ = doc
    return binary(f"{name}(x, n)", forward, doc=doc, promote=real_policy(f"{name}_cpu",
                  half=False), namespace="special", inplace=False)


def _parity(xp, n, even, odd):
    return xp.where(n % 2 == 0, even, odd)


# --- Chebyshev --------------------------------------------------------------------------------

def _chebyshev_step(k, y, p, q):
    return (y + y) * q - p


def _chebyshev(kind, shifted):
    """Cases of the Chebyshev polynomial of the first (t), second (u), third (v) or fourth
    (w) kind, of ``y = x`` or, shifted to [0, 1], of ``y = 2x - 1``."""
    def cases(xp, x, n):
        y = x + x - 1 if shifted else x
        top, bottom = (x == 1, x == 0) if shifted else (x == 1, x == -1)
        theta = xp.arccos(y)
        inside = (n > _TRIG_DEGREE) & (xp.abs(y) < 1)
        m = n.astype(x.dtype)
        if kind == "t":
            ends = (1, _parity(xp, n, 1, -1))
            trig = xp.cos(m * theta)
        elif kind == "u":
            ends = (m + 1, _parity(xp, n, m + 1, -(m + 1)))
            trig = xp.sin((m + 1) * theta) / xp.sin(theta)
        elif kind == "v":
            ends = (1, _parity(xp, n, m + m + 1, -(m + m + 1)))
            trig = xp.cos((m + 0.5) * theta) / xp.cos(theta / 2)
        else:
            ends = (m + m + 1, _parity(xp, n, 1, -1))
            trig = xp.sin((m + 0.5) * theta) / xp.sin(theta / 2)
        special = [(top, ends[0]), (bottom, ends[1]), (inside, trig)]
        offset = {"t": 0, "u": 0, "v": -1, "w": 1}[kind]
        scale = 1 if kind == "t" else 2

        def first(x):
            y = scale * (x + x - 1 if shifted else x)
            return y + offset if offset else y      # T_1(-0.0) is -0.0

        def step(k, x, p, q):
            return _chebyshev_step(k, x + x - 1 if shifted else x, p, q)
        return special, first, step
    return cases


chebyshev_polynomial_t = _polynomial(
    "chebyshev_polynomial_t", "The Chebyshev polynomial of the first kind T_n(x).",
    _chebyshev("t", False))
chebyshev_polynomial_u = _polynomial(
    "chebyshev_polynomial_u", "The Chebyshev polynomial of the second kind U_n(x).",
    _chebyshev("u", False))
chebyshev_polynomial_v = _polynomial(
    "chebyshev_polynomial_v", "The Chebyshev polynomial of the third kind V_n(x).",
    _chebyshev("v", False))
chebyshev_polynomial_w = _polynomial(
    "chebyshev_polynomial_w", "The Chebyshev polynomial of the fourth kind W_n(x).",
    _chebyshev("w", False))
shifted_chebyshev_polynomial_t = _polynomial(
    "shifted_chebyshev_polynomial_t", "The shifted Chebyshev polynomial T*_n(x) = T_n(2x - 1).",
    _chebyshev("t", True))
shifted_chebyshev_polynomial_u = _polynomial(
    "shifted_chebyshev_polynomial_u", "The shifted Chebyshev polynomial U*_n(x) = U_n(2x - 1).",
    _chebyshev("u", True))
shifted_chebyshev_polynomial_v = _polynomial(
    "shifted_chebyshev_polynomial_v", "The shifted Chebyshev polynomial V*_n(x) = V_n(2x - 1).",
    _chebyshev("v", True))
shifted_chebyshev_polynomial_w = _polynomial(
    "shifted_chebyshev_polynomial_w", "The shifted Chebyshev polynomial W*_n(x) = W_n(2x - 1).",
    _chebyshev("w", True))


# --- Hermite, Laguerre, Legendre --------------------------------------------------------------

def _hermite(physicists):
    def cases(xp, x, n):
        if physicists:
            return [], lambda x: x + x, lambda k, x, p, q: (x + x) * q - 2 * (k - 1) * p
        return [], lambda x: x, lambda k, x, p, q: x * q - (k - 1) * p
    return cases


def _laguerre(xp, x, n):
    return ([(x == 0, 1)], lambda x: 1 - x,
            lambda k, x, p, q: ((k + k - 1 - x) * q - (k - 1) * p) / k)


def _legendre(xp, x, n):
    ends = [(x == 1, 1), (x == -1, _parity(xp, n, 1, -1))]
    return ends, lambda x: x, lambda k, x, p, q: ((k + k - 1) * x * q - (k - 1) * p) / k


hermite_polynomial_h = _polynomial(
    "hermite_polynomial_h", "The physicists' Hermite polynomial H_n(x).", _hermite(True))
hermite_polynomial_he = _polynomial(
    "hermite_polynomial_he", "The probabilists' Hermite polynomial He_n(x).", _hermite(False))
laguerre_polynomial_l = _polynomial(
    "laguerre_polynomial_l", "The Laguerre polynomial L_n(x).", _laguerre)
legendre_polynomial_p = _polynomial(
    "legendre_polynomial_p", "The Legendre polynomial P_n(x).", _legendre)
