"""Statistics: std, var (and with the mean: std_mean, var_mean), median and nanmedian."""

import warnings

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember.ops import return_types
from ember.ops._call_site import call_shape, call_site
from ember.ops._dims import reduction_dims
from ember.ops._overloads import in_parser_words
from ember.ops._reduce import (constant, cpu_wide, expand_reduced, int_dim, reduced_numel,
                               rejecting, row_major, unsqueeze_reduced,
                               require_nonempty, route_to_indices, spread,
                               with_optional_dim)
from ember.ops._promotion import SAME
from ember.ops._registry import op
from ember.ops._scalars import number_arg


def _moments_policy(name):
    return rejecting(name, (D.BOOL, D.INTEGRAL), RuntimeError,
                     lambda d: f"{name} only support floating point and complex dtypes")


MOMENTS = _moments_policy("std and var")


def _not_implemented(kernel):
    return lambda d: f"\"{kernel}\" not implemented for '{d._torch_name}'"


MEDIAN_ALL = rejecting("median_all", (D.BOOL, D.COMPLEX), NotImplementedError,
                       _not_implemented("median_cpu"))
MEDIAN_DIM = rejecting("median_dim", (D.BOOL, D.COMPLEX), NotImplementedError,
                       _not_implemented("median_out"))


# --- std, var ---------------------------------------------------------------------------------

def _dims_and_correction(dim, unbiased, correction, ndim, name="std"):
    """Resolve PyTorch's overloads: ``std(x, True)`` means unbiased, not dim 1."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}(): pass either 'unbiased' or 'correction', not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    elif type(correction) not in (int, float):
        correction = number_arg(correction, name, "correction")   # a 0-dim tensor, say
    return reduction_dims(dim, ndim), correction


def _check_flags(dim, unbiased, keepdim, correction, name):
    """Refuse what PyTorch's parser matches to none of the signatures: ``unbiased`` or
    ``keepdim`` that is not a bool, or ``dim`` a bool (the ``unbiased`` of the one-argument
    form) beside other arguments; the entry point words the TypeError as the parser does."""
    if unbiased is not None and unbiased.__class__ is not bool:
        raise TypeError(f"{name}(): argument 'unbiased' must be bool, not "
                        f"{type(unbiased).__name__}")
    if keepdim is not False and keepdim is not True:
        raise TypeError(f"{name}(): argument 'keepdim' must be bool, not "
                        f"{type(keepdim).__name__}")
    if dim.__class__ is bool and (unbiased is not None or keepdim or correction is not None):
        raise TypeError(f"{name}(): argument 'dim' must be tuple of ints, not bool")
    if dim is None and unbiased is not None:
        _refuse_unbiased_without_dim(name)


def _refuse_unbiased_without_dim(name):
    """Raise PyTorch's TypeError when the call gave ``unbiased`` beside other arguments but
    no ``dim``, which none of its signatures takes (``dim=None`` given is the first one's)."""
    shape = call_shape(name)
    if shape is None or shape[0] > 1 or shape[0] + len(shape[1]) < 3 or \
            "dim" in shape[1] or "axis" in shape[1]:
        return
    site = call_site()
    raise TypeError(in_parser_words(f"{name}() received an invalid combination of arguments"
                                    f" - got ({site.got()}), but expected one of:"))


def _moments(xp, x, dim, unbiased, keepdim, correction, name):
    """(variance, mean) over the reduced dims, possibly in a wider dtype (round them with
    ``_narrowed``); the variance is real for complex input."""
    _check_flags(dim, unbiased, keepdim, correction, name)
    dims, correction = _dims_and_correction(dim, unbiased, correction, x.ndim, name)
    n = reduced_numel(x.shape, dims)
    # PyTorch counts the reduction factor as 0 when the output is empty, and warns then too
    if (n if x.size else 0) - correction <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less "
                      f"than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=5)
    var, mean = _two_pass(xp, x, dims, n, n - correction, keepdim)
    # PyTorch's CPU kernels accumulate float32 in double, where a variance beyond float32's
    # range (whose std may be within it) stays finite: only such results are redone, for speed
    if not bool(xp.isfinite(var).all()):
        w = cpu_wide(xp, x)
        if w is not x:
            var, mean = _two_pass(xp, w, dims, n, n - correction, keepdim)
    return var, mean


def _two_pass(xp, x, dims, n, dof, keepdim):
    """(the sum of squared deviations over ``dims`` / ``dof``, the mean) in ``x``'s dtype."""
    mean = xp.true_divide(xp.sum(x, axis=dims, keepdims=True), n).astype(x.dtype, copy=False)
    dev = x - mean
    if x.dtype.kind == "c":             # the real part's variance plus the imaginary part's, as
        var = _sum_of_squares(xp, dev.real, dims, keepdim, dof)    # PyTorch's (without degrees
        var += _sum_of_squares(xp, dev.imag, dims, keepdim, dof)   # of freedom, 0/0 is nan)
    else:
        var = _sum_of_squares(xp, dev, dims, keepdim, dof)
    return var, mean if keepdim else xp.squeeze(mean, axis=dims)


def _sum_of_squares(xp, dev, dims, keepdim, dof):
    return xp.true_divide(xp.sum(dev * dev, axis=dims, keepdims=keepdim),
                          max(dof, 0)).astype(dev.dtype, copy=False)


def _narrowed(a, x):
    """A moment of ``x`` computed by ``_moments``, rounded to ``x``'s dtype (its real one for a
    variance), laid out row-major."""
    to = x.real.dtype if x.dtype.kind == "c" and a.dtype.kind != "c" else x.dtype
    return row_major(x, a.astype(to, copy=False))


def _var_grad(grad, x, dim, unbiased, keepdim, correction):
    dims, correction = _dims_and_correction(dim, unbiased, correction, x.ndim)
    dof = reduced_numel(x.shape, dims) - correction
    if dof <= 0 and (dim is None or x.ndim == 0):
        # PyTorch's full reduction gives grad * inf, or nan where x is the mean (inf * 0);
        # over dims, 2 / dof unclamped
        return grad * constant(lambda xp, a: xp.where(a == a.mean(), np.nan, np.inf).astype(
            a.real.dtype, copy=False), x)
    from ember.ops.arithmetic import _mul_scalar
    scale = 2 / dof if dof != 0 else float("inf")
    # as PyTorch's: the gradient broadcasts against x (a full reduction's 0-d one as it is)
    if dim is None or isinstance(dim, bool):
        return _mul_scalar(grad, scale) * (x - x.mean())
    grad = unsqueeze_reduced(grad, dims, keepdim)
    return _mul_scalar(grad, scale) * (x - x.mean(dims, keepdim=True))


def _std_grad(grad, x, dim, unbiased, keepdim, correction, std):
    from ember.ops.arithmetic import _mul_scalar
    # d std = d var / (2 std); PyTorch takes 0 where std is 0, even for an infinite grad.
    # Unlike PyTorch's, the division is kept finite there (its gradient would be NaN)
    zero = constant(lambda xp, s: (s == 0).astype(s.dtype), std)
    return _var_grad((grad / _mul_scalar(std + zero, 2)).masked_fill(zero.bool(), 0), x, dim,
                     unbiased, keepdim, correction)


def _mean_grad(grad, x, dim, unbiased, keepdim):
    dims = _dims_and_correction(dim, unbiased, None, x.ndim)[0]
    return expand_reduced(grad, x.shape, dims, keepdim) / reduced_numel(x.shape, dims)


_SIGNATURE = "(input, dim=None, unbiased=None, keepdim=False, *, correction=None)"


@op("var" + _SIGNATURE, promote=MOMENTS)
def var(xp, x, dim, unbiased, keepdim, correction):
    """The variance over ``dim`` with Bessel's ``correction`` (default 1; ``unbiased=False``
    means 0)."""
    return _narrowed(_moments(xp, x, dim, unbiased, keepdim, correction, "var")[0], x)


@var.derivative
def _(grad, x, dim, unbiased, keepdim, correction):
    return _var_grad(grad, x, dim, unbiased, keepdim, correction)


@op("std" + _SIGNATURE, promote=MOMENTS)
def std(xp, x, dim, unbiased, keepdim, correction):
    """The standard deviation over ``dim`` (see ``var`` for ``correction``)."""
    return _narrowed(xp.sqrt(_moments(xp, x, dim, unbiased, keepdim, correction, "std")[0]), x)


@std.derivative
def _(grad, x, dim, unbiased, keepdim, correction, *, out):
    return _std_grad(grad, x, dim, unbiased, keepdim, correction, out)


@op("var_mean" + _SIGNATURE, promote=_moments_policy("var_mean"), method=False)
def var_mean(xp, x, dim, unbiased, keepdim, correction):
    """The tuple (variance, mean) over ``dim``."""
    var_, mean = _moments(xp, x, dim, unbiased, keepdim, correction, "var_mean")
    return _narrowed(var_, x), _narrowed(mean, x)


@var_mean.derivative
def _(grads, x, dim, unbiased, keepdim, correction):
    return (_var_grad(grads[0], x, dim, unbiased, keepdim, correction)
            + _mean_grad(grads[1], x, dim, unbiased, keepdim))


@op("std_mean" + _SIGNATURE, promote=_moments_policy("std_mean"), method=False)
def std_mean(xp, x, dim, unbiased, keepdim, correction):
    """The tuple (standard deviation, mean) over ``dim``."""
    var_, mean = _moments(xp, x, dim, unbiased, keepdim, correction, "std_mean")
    return _narrowed(xp.sqrt(var_), x), _narrowed(mean, x)


@std_mean.derivative(outputs=(0,))
def _(grads, x, dim, unbiased, keepdim, correction, *, out):
    return (_std_grad(grads[0], x, dim, unbiased, keepdim, correction, out[0])
            + _mean_grad(grads[1], x, dim, unbiased, keepdim))


# --- median, nanmedian ------------------------------------------------------------------------

def _lower_median(xp, values, skip_nan):
    """The lower median of a 1-D array; NaN if it holds a NaN (unless ``skip_nan``) or is
    empty."""
    nan = xp.isnan(values) if values.dtype.kind == "f" else xp.zeros(values.shape, dtype=bool)
    if skip_nan:
        values = values[~nan]
    elif bool(nan.any()):
        return xp.asarray(np.nan, dtype=values.dtype)
    if values.size == 0:
        return xp.asarray(np.nan).astype(values.dtype)
    k = (values.size - 1) // 2
    return xp.partition(values, k)[k]


def _median_index(xp, x, d, skip_nan):
    """Per slice along ``d``, the index PyTorch returns: the lower median in a stable sort (NaNs
    last); with a NaN and not ``skip_nan``, the first NaN."""
    order = xp.argsort(x, axis=d, kind="stable")
    n = x.shape[d]
    nans = xp.sum(xp.isnan(x), axis=d, keepdims=True) if x.dtype.kind == "f" else \
        xp.zeros([1 if i == d else s for i, s in enumerate(x.shape)], dtype=np.int64)
    if skip_nan:
        position = xp.maximum((n - nans - 1) // 2, 0)
    else:
        position = xp.where(nans > 0, n - nans, (n - 1) // 2)
    return xp.take_along_axis(order, position, axis=d)


def _median_all(name, skip_nan):
    def forward(xp, x):
        return _lower_median(xp, x.reshape(-1), skip_nan)
    forward.__doc__ = ("The lower of the two middle values of all elements" +
                       (", ignoring NaN." if skip_nan else " (NaN if any is NaN)."))
    return forward


def _median_dim(name, skip_nan):
    def forward(xp, x, dim, keepdim):
        d = int_dim(name, dim, x.ndim)
        if x.ndim:
            require_nonempty("median", x.shape, (d,), full=False)
        if x.dtype.kind in "bc":    # (PyTorch checks the dim first)
            MEDIAN_DIM.rule(D.FROM_NUMPY[x.dtype], MEDIAN_DIM.name, ())
        if x.ndim == 0:
            return x.copy(), xp.zeros((), dtype=np.int64)
        index = _median_index(xp, x, d, skip_nan)
        values = xp.take_along_axis(x, index, axis=d)
        if not keepdim:
            index, values = xp.squeeze(index, axis=d), xp.squeeze(values, axis=d)
        return row_major(x, values), row_major(x, index.astype(np.int64, copy=False))
    forward.__doc__ = f"The {name} along ``dim`` and its index."
    return forward


_median = op("median(input)", promote=MEDIAN_ALL)(_median_all("median", False))
_nanmedian = op("nanmedian(input)", promote=MEDIAN_ALL)(_median_all("nanmedian", True))
_median_by_dim = op("_median_dim(input, dim, keepdim=False)", promote=SAME, method=False,
                    namedtuple=return_types.median, grad_fn_name="MedianBackward1")(
    _median_dim("median", False))
_nanmedian_by_dim = op("_nanmedian_dim(input, dim, keepdim=False)", promote=SAME,
                       method=False, namedtuple=return_types.nanmedian,
                       grad_fn_name="NanmedianBackward1")(_median_dim("nanmedian", True))
for _op in (_median, _nanmedian):
    _op.derivative(lambda grad, x, *, out: spread(grad, x, out))
for _op in (_median_by_dim, _nanmedian_by_dim):
    _op.derivative(route_to_indices, outputs=(1,))
    _op.reads_inputs(())        # the indices and the input's size: PyTorch saves no input


median = with_optional_dim("median", _median, _median_by_dim)
nanmedian = with_optional_dim("nanmedian", _nanmedian, _nanmedian_by_dim)
Tensor.median = median
Tensor.nanmedian = nanmedian

ALIASES = {}
PUBLIC = {"median": median, "nanmedian": nanmedian}
