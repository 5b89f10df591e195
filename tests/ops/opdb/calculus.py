"""OpInfo entries for ember/ops/calculus.py (diff, trapezoid, cumulative_trapezoid) and
ember/ops/vectors.py (cross, renorm). cross's default dim (and its once-per-process
deprecation warning) is checked in tests/ops/test_sorting.py."""

import numpy as np
import scipy.integrate

import ember
from ember._host_values import host_values
from tests.ops.opdb.core import (ALL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput,
                                 make)

NUMERIC = FLOATS + LOW + INTS + COMPLEX

# --- diff -----------------------------------------------------------------------------------------


def _diff_ref(x, n=1, dim=-1, prepend=None, append=None):
    kwargs = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None}
    return np.diff(np.asarray(x), n, axis=dim, **kwargs) if n else np.asarray(x)


def _diff_samples(dtype, requires_grad):
    def mk(*shape, **kw):
        return make(shape, dtype, requires_grad, **kw)
    yield SampleInput(mk(5), name="plain")
    yield SampleInput(mk(2, 3, 4), kwargs={"n": 2, "dim": 1}, name="n2")
    yield SampleInput(mk(2, 3, 4), kwargs={"dim": 0, "prepend": mk(1, 3, 4),
                                           "append": mk(2, 3, 4)}, name="both")
    yield SampleInput(mk(2, 3), kwargs={"n": 3, "prepend": mk(2, 2)}, name="prepend")
    yield SampleInput(mk(2, 3), (1, -2, None, mk(1, 3)), name="positional_append")
    yield SampleInput(mk(2, 3), kwargs={"n": 0}, name="n0")
    yield SampleInput(mk(2, 3), kwargs={"n": 5}, name="n_beyond")
    yield SampleInput(mk(4), kwargs={"n": 4, "append": mk(1)}, name="n_to_one")
    # (an empty differencing dim is checked in tests/ops/test_sorting.py: PyTorch's out=
    # variant raises there)
    yield SampleInput(mk(0, 3), name="empty")
    yield SampleInput(mk(0, 3), kwargs={"dim": 0, "append": mk(2, 3)}, name="empty_attached")
    yield SampleInput(mk(3, 4, noncontiguous=True), kwargs={"dim": 0}, name="noncontig")
    if dtype.is_floating_point and not requires_grad:
        yield SampleInput(mk(2, 3), kwargs={"prepend": ember.ones(2, 1, dtype=ember.int64)},
                          name="int_prepend")


def _diff_errors():
    x = ember.ones(2, 3)
    yield ErrorInput(SampleInput(ember.tensor(1.)), RuntimeError,
                     "diff expects input to be at least one-dimensional")
    yield ErrorInput(SampleInput(x, kwargs={"n": -1}), RuntimeError,
                     "order must be non-negative but got -1")
    yield ErrorInput(SampleInput(x, kwargs={"prepend": ember.ones(3)}), RuntimeError,
                     "diff expects prepend or append to be the same dimension as input")
    yield ErrorInput(SampleInput(x, kwargs={"append": ember.ones(1, 1)}), RuntimeError,
                     r"diff expects the shape of tensor to prepend or append to match that of "
                     r"input except along the differencing dimension; input.size\(0\) = 2, but "
                     r"got tensor.size\(0\) = 1")
    yield ErrorInput(SampleInput(x, kwargs={"prepend": 0}), TypeError,
                     "argument 'prepend'.*must be Tensor, not int")
    yield ErrorInput(SampleInput(x, kwargs={"dim": 2}), IndexError, "Dimension out of range")


# --- trapezoid, cumulative_trapezoid ------------------------------------------------------------

def _points(x, y, dim):
    """Sample points as PyTorch places them: a 1-D ``x`` along ``dim``, others broadcast."""
    if x is None:
        return None
    x = np.asarray(x)
    if x.ndim == 1:
        x = x.reshape([-1 if i == dim % y.ndim else 1 for i in range(y.ndim)])
    return np.broadcast_to(x, y.shape)


def _trapezoid_ref(y, x=None, *, dx=None, dim=-1):
    y = np.asarray(y)
    return np.trapezoid(y, _points(x, y, dim), 1.0 if dx is None else dx, axis=dim)


def _cumulative_ref(y, x=None, *, dx=None, dim=-1):
    y = np.asarray(y)
    if y.shape[dim] == 0:
        return y.astype(np.float64)
    return scipy.integrate.cumulative_trapezoid(y, _points(x, y, dim), 1.0 if dx is None else dx,
                                                axis=dim)


def trapezoid_samples():
    def samples(dtype, requires_grad):
        def mk(*shape, **kw):
            return make(shape, dtype, requires_grad, **kw)
        yield SampleInput(mk(2, 3, 4), name="plain")
        yield SampleInput(mk(2, 3, 4), kwargs={"dx": 2.5, "dim": 1}, name="dx")
        yield SampleInput(mk(2, 3, 4), kwargs={"dx": 3, "dim": -3}, name="int_dx")
        yield SampleInput(mk(2, 3, 4), (mk(3),), {"dim": 1}, name="x_1d")
        yield SampleInput(mk(2, 3, 4), (mk(2, 3, 4),), {"dim": 0}, name="x_full")
        yield SampleInput(mk(2, 3, 4), (mk(3, 4),), name="x_fewer_dims")
        yield SampleInput(mk(2, 3, 4), (mk(1, 3, 1),), {"dim": 1}, name="x_broadcast")
        yield SampleInput(mk(5), (mk(5),), name="1d")
        yield SampleInput(mk(3, 1), name="one_sample")
        yield SampleInput(mk(0, 3), name="empty_other")
        yield SampleInput(mk(3, 4, noncontiguous=True), (mk(4, 3).t(),), {"dim": 0},
                          name="noncontig")
        if not requires_grad:
            # (PyTorch's trapezoid over no samples is not connected to the graph)
            yield SampleInput(mk(3, 0), name="empty_dim")
            yield SampleInput(mk(3, 0), (mk(0),), name="empty_dim_x")
    return samples


def _integral_rule(keeps_dtype_when_empty):
    """Integers integrate to the default float, except that trapezoid over no samples at all
    returns zeros of the input's dtype."""
    def rule(dtype, sample):
        if keeps_dtype_when_empty and sample is not None and sample.name.startswith("empty_dim"):
            return dtype
        return dtype if dtype.is_floating_point or dtype.is_complex else \
            ember.get_default_dtype()
    return rule


def _integral_errors(name):
    def errors():
        y = ember.ones(2, 3)
        yield ErrorInput(SampleInput(y, (ember.ones(2),)), RuntimeError,
                         f"{name}: There must be one `x` value for each sample point")
        yield ErrorInput(SampleInput(ember.tensor([True, False])), RuntimeError,
                         f"{name}: received a bool input for `y`, but bool is not supported")
        yield ErrorInput(SampleInput(y, (ember.tensor([True, False, True]),)), RuntimeError,
                         f"{name}: received a bool input for `x` or `y`, but bool is not "
                         f"supported")
        yield ErrorInput(SampleInput(y, (ember.ones(3),), {"dx": 2.}), TypeError, "dx")
        yield ErrorInput(SampleInput(y, (2.,)), TypeError, "argument 'x'")
        yield ErrorInput(SampleInput(y, kwargs={"dim": 2}), IndexError, "Dimension out of range")
        if name == "trapezoid":
            yield ErrorInput(SampleInput(ember.tensor(1.)), IndexError,
                             "Dimension specified as -1 but tensor has no dimensions")
            yield ErrorInput(SampleInput(y, kwargs={"dx": 1j}), RuntimeError,
                             "trapezoid: Currently, we only support dx as a real number.")
        else:
            yield ErrorInput(SampleInput(ember.tensor(1.)), IndexError,
                             r"slice\(\) cannot be applied to a 0-dim tensor.")
    return errors


# --- cross ----------------------------------------------------------------------------------------

def _cross_ref(a, b, dim=None):
    return np.cross(np.asarray(a), np.asarray(b), axis=dim)


def _cross_samples(dtype, requires_grad):
    def mk(*shape, **kw):
        return make(shape, dtype, requires_grad, low=-4, high=4, **kw)
    yield SampleInput(mk(3), (mk(3),), {"dim": 0}, name="vectors")
    yield SampleInput(mk(4, 3), (mk(4, 3),), {"dim": 1}, name="rows")
    yield SampleInput(mk(3, 4), (mk(3, 4),), {"dim": -2}, name="columns")
    yield SampleInput(mk(2, 1, 3), (mk(1, 4, 3),), {"dim": -1}, name="broadcast")
    yield SampleInput(mk(3, 3), (mk(3, 3), 0), name="positional")
    yield SampleInput(mk(0, 3), (mk(0, 3),), {"dim": 1}, name="empty")
    yield SampleInput(mk(4, 3, noncontiguous=True), (mk(3, 4).t(),), {"dim": 1},
                      name="noncontig")


def _cross_errors():
    yield ErrorInput(SampleInput(ember.ones(2, 3), (ember.ones(3),), {"dim": 1}), RuntimeError,
                     "linalg.cross: inputs must have the same number of dimensions.")
    yield ErrorInput(SampleInput(ember.ones(2, 2), (ember.ones(2, 2),), {"dim": -1}),
                     RuntimeError, "linalg.cross: inputs dimension -1 must have length 3. Got 2 "
                                   "and 2")
    yield ErrorInput(SampleInput(ember.ones(4, 3), (ember.ones(4, 1),), {"dim": 1}),
                     RuntimeError, "linalg.cross: inputs dimension 1 must have length 3. Got 3 "
                                   "and 1")
    yield ErrorInput(SampleInput(ember.ones(4, 3), (ember.ones(5, 3),), {"dim": 1}),
                     RuntimeError, r"The size of tensor a \(4\) must match the size of tensor b "
                                   r"\(5\) at non-singleton dimension 0")
    yield ErrorInput(SampleInput(ember.ones(2, 3), (ember.ones(2, 3, dtype=ember.float64),),
                                 {"dim": 1}), RuntimeError,
                     "expected scalar type Float but found Double")
    flags = ember.ones(3, dtype=ember.bool)
    yield ErrorInput(SampleInput(flags, (flags,), {"dim": 0}), NotImplementedError,
                     "\"cross\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(ember.ones(2, 3), (ember.ones(2, 3),), {"dim": 2}), IndexError,
                     "Dimension out of range")
    yield ErrorInput(SampleInput(ember.tensor(1.), (ember.tensor(2.),), {"dim": 0}), IndexError,
                     "Dimension specified as 0 but tensor has no dimensions")
    yield ErrorInput(SampleInput(ember.ones(2, 4), (ember.ones(2, 4),)), RuntimeError,
                     "no dimension of size 3 in input")
    yield ErrorInput(SampleInput(ember.ones(3), (2.,), {"dim": 0}), TypeError,
                     "argument 'other'.*must be Tensor, not float")


# --- renorm -------------------------------------------------------------------------------------

def _renorm_ref(x, p, dim, maxnorm):
    x = np.asarray(x)
    dims = tuple(i for i in range(x.ndim) if i != dim % x.ndim)
    a = np.abs(x).astype(np.float64)
    norms = np.max(a, axis=dims, keepdims=True) if p == float("inf") else \
        np.sum(a ** p, axis=dims, keepdims=True) ** (1 / p)
    return x * np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


def _rows(dtype, requires_grad, shape=(4, 3), scales=(1, 0.05, 1, 0.3), dim=0):
    """Slices along ``dim`` of clearly different norms, none near the bounds used below."""
    x = host_values(make(shape, dtype, low=1, high=3).detach()).astype(np.float64)
    x = x * np.sign(np.random.default_rng(1).standard_normal(shape))
    x = x * np.asarray(scales).reshape([-1 if i == dim % len(shape) else 1
                                       for i in range(len(shape))])
    t = ember.from_numpy(x).to(dtype)
    return t.requires_grad_() if requires_grad else t


def _renorm_samples(dtype, requires_grad):
    yield SampleInput(_rows(dtype, requires_grad), (2, 0, 2.), name="p2")
    yield SampleInput(_rows(dtype, requires_grad), (1, 0, 3.), name="p1")
    yield SampleInput(_rows(dtype, requires_grad), (float("inf"), 0, 1.5), name="inf")
    yield SampleInput(_rows(dtype, requires_grad), (3.5, -2, 2.), name="p3.5")
    yield SampleInput(_rows(dtype, requires_grad), (0.5, 0, 20.), name="p0.5")
    yield SampleInput(_rows(dtype, requires_grad, (2, 3, 4), (1, 0.02), 0), (2, 0, 1.),
                      name="3d")
    yield SampleInput(_rows(dtype, requires_grad, (2, 4, 3), (1, 0.02, 0.5), -1), (2, -1, 1.),
                      name="last_dim")
    yield SampleInput(_rows(dtype, requires_grad, (3, 4), (1, 0.1, 1, 0.2), 1).t(),
                      (2, 0, 2.), name="noncontig")
    yield SampleInput(_rows(dtype, requires_grad), (2, 1, 0.), name="maxnorm0")
    yield SampleInput(_rows(dtype, requires_grad), (2, 0, 100), name="no_change")
    yield SampleInput(make((0, 3), dtype, requires_grad), (2, 0, 1.), name="empty")
    yield SampleInput(make((0, 3), dtype, requires_grad), (2, 1, 1.), name="empty_slices")


def _renorm_errors():
    x = ember.ones(2, 3)
    yield ErrorInput(SampleInput(x, (0, 0, 1.)), RuntimeError,
                     "renorm: non-positive-norm not supported")
    yield ErrorInput(SampleInput(x, (-1, 0, 1.)), RuntimeError,
                     "renorm: non-positive-norm not supported")
    yield ErrorInput(SampleInput(x, (2, 0, -5)), RuntimeError,
                     "renorm: expected maxnorm to be >= 0 but got -5")
    yield ErrorInput(SampleInput(ember.ones(3), (2, 0, 1.)), RuntimeError,
                     "renorm: input needs at least 2 dimensions, got 1 dimensions")
    yield ErrorInput(SampleInput(ember.ones(2, 2, dtype=ember.int64), (2, 0, 1.)), RuntimeError,
                     "linalg.vector_norm: Expected a floating point or complex tensor as input. "
                     "Got Long")
    yield ErrorInput(SampleInput(x, (2, 2, 1.)), IndexError, "Dimension out of range")
    yield ErrorInput(SampleInput(x, (2, (0,), 1.)), TypeError,
                     r"renorm\(\): argument 'dim'.*must be int, not tuple")


# PyTorch rounds every step of the rule (sum, halved ends, difference) to 16 bits, where the
# float32 reference rounds once; cancellation in the difference magnifies that
_ROUNDED_STEPS = {ember.float16: (1e-2, 1e-2), ember.bfloat16: (8e-2, 8e-2)}

OPS = [
    OpInfo("diff", _diff_ref, _diff_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_diff_errors),
    OpInfo("trapezoid", _trapezoid_ref, trapezoid_samples(), dtypes=NUMERIC, gradgrad=True,
           result_dtype=_integral_rule(True), error_inputs=_integral_errors("trapezoid"),
           tol=_ROUNDED_STEPS),
    OpInfo("cumulative_trapezoid", _cumulative_ref, trapezoid_samples(), dtypes=NUMERIC,
           gradgrad=True, result_dtype=_integral_rule(False), tol=_ROUNDED_STEPS,
           error_inputs=_integral_errors("cumulative_trapezoid")),
    OpInfo("cross", _cross_ref, _cross_samples, dtypes=NUMERIC, gradgrad=True,
           error_inputs=_cross_errors, tol=_ROUNDED_STEPS),
    OpInfo("renorm", _renorm_ref, _renorm_samples, dtypes=FLOATS + LOW + COMPLEX, gradgrad=True,
           error_inputs=_renorm_errors),
]
