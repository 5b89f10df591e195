"""OpInfo entries for ember/ops/special_poly.py (orthogonal polynomials).

The reference evaluates each polynomial by its three-term recurrence in Python floats,
element by element, with PyTorch's conventions for the degree: truncated toward zero, and
a negative, infinite or NaN degree giving 0.
"""

import math

import numpy as np

import ember
from tests.ops.opdb.core import ErrorInput, OpInfo, SampleInput, make
from tests.ops.opdb.special_math import (NO_HALF, as_float, complex_error, float8_error,
                                         half_error)

INF, NAN = math.inf, math.nan


def _chebyshev_first(kind):
    return {"t": lambda y: y, "u": lambda y: 2 * y, "v": lambda y: 2 * y - 1,
            "w": lambda y: 2 * y + 1}[kind]


def _recurrence(first, step):
    """P_n(x) from P_0 = 1, P_1 = first(x), P_k = step(k, x, P_(k-2), P_(k-1))."""
    def value(x, n):
        if n == 0:
            return 1.0
        p, q = 1.0, first(x)
        for k in range(2, n + 1):
            p, q = q, step(k, x, p, q)
        return q
    return value


_RULES = {
    **{f"chebyshev_polynomial_{k}": _recurrence(_chebyshev_first(k),
                                                 lambda k_, y, p, q: 2 * y * q - p)
       for k in "tuvw"},
    "hermite_polynomial_h": _recurrence(lambda x: 2 * x,
                                        lambda k, x, p, q: 2 * x * q - 2 * (k - 1) * p),
    "hermite_polynomial_he": _recurrence(lambda x: x, lambda k, x, p, q: x * q - (k - 1) * p),
    "laguerre_polynomial_l": _recurrence(
        lambda x: 1 - x, lambda k, x, p, q: ((2 * k - 1 - x) * q - (k - 1) * p) / k),
    "legendre_polynomial_p": _recurrence(
        lambda x: x, lambda k, x, p, q: ((2 * k - 1) * x * q - (k - 1) * p) / k),
}


def _reference(name):
    shifted = name.startswith("shifted_")
    rule = _RULES[name.removeprefix("shifted_")]

    def value(x, n):
        if not math.isfinite(n) or n < 0 and math.trunc(n) < 0:
            return 0.0
        y = 2 * x - 1 if shifted else x
        if name.endswith("laguerre_polynomial_l") and x == 0:
            return 1.0
        try:
            return rule(y, math.trunc(n))
        except OverflowError:
            return NAN

    def ref(x, n):
        x, n = as_float(x), as_float(n)
        dtype = next(a.dtype for a in (x, n) if isinstance(a, np.ndarray))
        xs, ns = np.broadcast_arrays(np.asarray(x, dtype=np.float64),
                                     np.asarray(n, dtype=np.float64))
        out = np.array([value(float(a), float(b)) for a, b in zip(xs.ravel(), ns.ravel())],
                       dtype=np.float64)
        return out.reshape(xs.shape).astype(dtype)
    return ref


def _samples(low, high, max_degree):
    def samples(dtype, requires_grad):
        def x(shape, **kw):
            return make(shape, dtype, low=low, high=high, **kw)

        def n(shape, top=max_degree, **kw):
            t = make(shape, ember.int64, low=0, high=top + 1, **kw)
            return t.to(dtype)
        for sx, sn in (((6,), (6,)), ((), ()), ((2, 3), (3,)), ((4, 1), (1, 5)),
                       ((0, 3), (3,))):
            yield SampleInput(x(sx), (n(sn),), name=f"{list(sx)}x{list(sn)}")
        yield SampleInput(x((3, 4), noncontiguous=True), (n((3, 4), noncontiguous=True),),
                          name="noncontiguous")
        yield SampleInput(x((2, 3)), (3,), name="int_degree")
        if not dtype.is_floating_point:
            return
        yield SampleInput(x((2, 3)), (2.7,), name="float_degree")
        yield SampleInput(0.5, (n((4,)),), name="number_x")
        # truncated, negative, infinite and NaN degrees
        degrees = [2.5, 3.9, -0.5, -1.0, -3.0, INF, -INF, NAN, 0.0, 1.0]
        yield SampleInput(x((10,)), (ember.tensor(degrees, dtype=dtype),), name="degrees")
        # high degrees (the trigonometric forms of Chebyshev polynomials inside (-1, 1))
        yield SampleInput(x((6,)), (ember.tensor([7, 9, 12, 20, 25, 30], dtype=dtype),),
                          name="high_degree")
        ends = [-INF, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, INF, NAN]
        xs = ember.tensor(ends, dtype=dtype).reshape(-1, 1)
        yield SampleInput(xs, (ember.tensor([0, 1, 2, 3, 4, 7, 10], dtype=dtype),),
                          name="special")
    return samples


def _errors(name):
    def errors():
        c = complex_error(f"{name}_cpu", inputs=2)
        yield c
        h = half_error(f"{name}_cpu")
        yield ErrorInput(SampleInput(h.sample.input, (h.sample.input,)), h.error_type, h.match)
        yield float8_error(f"{name}_cpu", inputs=2)
    return errors


def _entry(name, low, high, max_degree=10, **kw):
    return OpInfo(f"special.{name}", _reference(name), _samples(low, high, max_degree),
                  dtypes=NO_HALF, result_dtype="float", grad=False, error_inputs=_errors(name),
                  tol={d: (1.3e-5, 1e-5) for d in NO_HALF if not d.is_floating_point}, **kw)


OPS = [
    *[_entry(f"chebyshev_polynomial_{k}", -1.5, 1.5) for k in "tuvw"],
    *[_entry(f"shifted_chebyshev_polynomial_{k}", -0.25, 1.25) for k in "tuvw"],
    _entry("hermite_polynomial_h", -3, 3),
    _entry("hermite_polynomial_he", -3, 3),
    _entry("laguerre_polynomial_l", 0, 8),
    _entry("legendre_polynomial_p", -1, 1),
]
