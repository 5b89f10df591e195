"""Finite differences and integrals along a dim: diff, trapezoid (trapz), cumulative_trapezoid.

Forwards follow PyTorch's operation order and dtypes step by step (integers stay integers until
the final halving, 16-bit floats round after every step), so results match to the last bit."""

import numpy as np

from ember import _dtype as D
from ember._memory_format import preserved
from ember.ops._dims import wrap_dim
from ember.ops._promotion import BINARY
from ember.backend import xp_of
from ember.ops._reduce import constant, cpu_wide, wide
from ember.ops._registry import op
from ember.ops.join import _joined_layout, pad_along
from ember.ops.scan import reverse_cumsum


def _adjoint_diff(g, d):
    """The transpose of one forward difference along ``d``: out[j] = g[j-1] - g[j]."""
    return pad_along(g, d, 1, 0) - pad_along(g, d, 0, 1)


def _ends_sum(g, d):
    """The transpose of ``y[:-1] + y[1:]`` along ``d``: out[j] = g[j-1] + g[j]."""
    return pad_along(g, d, 1, 0) + pad_along(g, d, 0, 1)


def _pieces(a, d):
    """(a[:-1], a[1:]) along ``d``."""
    first = tuple(slice(None, -1) if i == d else slice(None) for i in range(a.ndim))
    rest = tuple(slice(1, None) if i == d else slice(None) for i in range(a.ndim))
    return a[first], a[rest]


# --- diff -------------------------------------------------------------------------------------

def _check_attached(x, other, d):
    if other is None:
        return
    if other.ndim != x.ndim:
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    for i, (a, b) in enumerate(zip(x.shape, other.shape)):
        if i != d and a != b:
            raise RuntimeError(f"diff expects the shape of tensor to prepend or append to match "
                               f"that of input except along the differencing dimension; "
                               f"input.size({i}) = {a}, but got tensor.size({i}) = {b}")


@op("diff(input, n=1, dim=-1, prepend=None, append=None)", inputs=("input", "prepend", "append"),
    promote=BINARY, upcast=False, scalars=False, saves_inputs=False)
def diff(xp, x, prepend, append, n, dim):
    """The ``n``-th forward difference along ``dim`` (of ``input`` with ``prepend`` and
    ``append`` attached along it); bool tensors give ``!=`` of neighbours."""
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(dim, x.ndim)
    _check_attached(x, prepend, d)
    _check_attached(x, append, d)
    if n == 0:
        return preserved(xp, x)             # PyTorch's clone keeps a transposed layout
    y = x
    if prepend is not None or append is not None:       # laid out as PyTorch's cat lays it
        kept = [p for p in (prepend, x, append) if p is not None]
        y = _joined_layout(xp, xp.concatenate(kept, axis=d), kept)
    for _ in range(min(n, y.shape[d])):
        earlier, later = _pieces(y, d)
        y = later != earlier if y.dtype == np.bool_ else later - earlier
    return preserved(xp, x) if y is x else y        # (none to take: empty along dim)


@diff.named_by
def _(flat, params, out):
    # PyTorch differences by subtracting slices; with n=0 it copies the input
    return "CopyBackwards" if params[0] == 0 else "SubBackward0"


@diff.derivative
def _(grad, x, prepend, append, n, dim):
    if n == 0:
        return grad, None, None
    d = wrap_dim(dim, x.ndim)
    sizes = [p.shape[d] if p is not None else 0 for p in (prepend, x, append)]
    for _ in range(min(n, sum(sizes))):
        grad = _adjoint_diff(grad, d)
    pieces, start = [], 0
    for p, size in zip((prepend, x, append), sizes):
        pieces.append(None if p is None else grad.narrow(d, start, size))
        start += size
    return pieces[1], pieces[0], pieces[2]


# --- trapezoid, cumulative_trapezoid ----------------------------------------------------------

def _promoted(a, b):
    """The NumPy dtype PyTorch's binary ops give two tensors of dtypes ``a`` and ``b``."""
    return D.promote_types(D.FROM_NUMPY[a], D.FROM_NUMPY[b]).np


def _default_float(dtype):
    """The dtype of an integer result halved by a Python float: the default float."""
    return D.get_default_dtype().np if dtype.kind in "iub" else dtype


def _sum(a, d):
    """A sum along ``d`` as PyTorch computes it: integers in int64, 16-bit floats widened."""
    if a.dtype.kind in "iub":
        return a.sum(axis=d, dtype=np.int64)
    return wide(a).sum(axis=d).astype(a.dtype, copy=False)


def _cumsum(a, d):
    if a.dtype.kind in "iub":
        return a.cumsum(axis=d, dtype=np.int64)
    return cpu_wide(xp_of(a), a).cumsum(axis=d).astype(a.dtype, copy=False)


def _x_shape(x_shape, y_shape, d, name):
    """The shape PyTorch views sample points ``x`` as before differencing them: a 1-D ``x``
    along ``d``, fewer dims padded in front."""
    if len(x_shape) == 1:
        if x_shape[0] != y_shape[d]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        return tuple(x_shape[0] if i == d else 1 for i in range(len(y_shape)))
    if len(x_shape) < len(y_shape):
        return (1,) * (len(y_shape) - len(x_shape)) + tuple(x_shape)
    return tuple(x_shape)


def _step(dx, x, name):
    """The constant spacing ``dx`` as a float (1 by default)."""
    if x is not None and dx is not None:
        raise TypeError(f"{name}(): pass either 'x' or 'dx', not both")
    if dx is None:
        return 1.0
    if hasattr(dx, "item"):
        dx = dx.item()
    if isinstance(dx, (bool, complex)):
        raise RuntimeError(f"{name}: Currently, we only support dx as a real number.")
    return float(dx)


def _no_bool(y, x, name):
    if x is not None and (y.dtype == np.bool_ or x.dtype == np.bool_):
        raise RuntimeError(f"{name}: received a bool input for `x` or `y`, but bool is not "
                           f"supported")
    if y.dtype == np.bool_:
        raise RuntimeError(f"{name}: received a bool input for `y`, but bool is not supported")


def _spacing(y, x, d, name):
    """The differences of the sample points, shaped to broadcast against ``y``'s pieces."""
    xv = x.reshape(_x_shape(x.shape, y.shape, d, name))
    left, right = _pieces(xv, d)
    return right - left


def _scaled(a, factor):
    """``a * factor`` for a Python float ``factor``: integers become the default float."""
    out = _default_float(a.dtype)
    return a.astype(out, copy=False) * out.type(factor)


def _no_dims(dim):
    raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")


@op("trapezoid(y, x=None, *, dx=None, dim=-1)", inputs=("y", "x"), method=False)
def trapezoid(xp, y, x, dx, dim):
    """The trapezoidal rule along ``dim``: sample points ``x`` (a tensor), or a constant
    spacing ``dx`` (default 1)."""
    step = _step(dx, x, "trapezoid")
    if y.ndim == 0:
        _no_dims(dim)
    d = wrap_dim(dim, y.ndim)
    if y.shape[d] == 0:
        return xp.zeros(y.shape[:d] + y.shape[d + 1:], dtype=y.dtype)
    _no_bool(y, x, "trapezoid")
    if x is None:
        ends = y.take(0, axis=d) + y.take(-1, axis=d)
        total = _sum(y, d)
        half_ends = _scaled(ends, 0.5)
        return _scaled(total.astype(_promoted(total.dtype, half_ends.dtype)) - half_ends, step)
    left, right = _pieces(y, d)
    return _halved(_sum, _spacing(y, x, d, "trapezoid"), left + right, d)


@trapezoid.named_by
def _(flat, params, out):
    # the last step of PyTorch's composite: halving a sum, or dividing by 2 with samples
    return "MulBackward1" if flat[1] is None else "DivBackward1"


@trapezoid.derivative
def _(grad, y, x, dx, dim, *, needs):
    d = wrap_dim(dim, y.ndim)
    n = y.shape[d]
    if n == 0:
        return None, None
    g = grad.unsqueeze(d)
    if x is None:
        # each sample weighs 1, the two ends 1/2 each (a single sample 0)
        i = np.arange(n)
        weights = 1 - 0.5 * (i == 0) - 0.5 * (i == n - 1)
        ends = constant(lambda xp, a: xp.asarray(weights, dtype=a.dtype).reshape(
            [n if k == d else 1 for k in range(a.ndim)]), g)
        return g * ends * _step(dx, None, "trapezoid"), None
    shape = _x_shape(tuple(x.shape), tuple(y.shape), d, "trapezoid")
    grad_y = grad_x = None
    if needs[0]:
        xv = x.reshape(shape)
        spacing = xv.narrow(d, 1, shape[d] - 1) - xv.narrow(d, 0, shape[d] - 1)
        grad_y = _ends_sum(g * spacing.conj() / 2, d)
    if needs[1]:
        pairs = y.narrow(d, 0, n - 1) + y.narrow(d, 1, n - 1)
        grad_x = _to_shape(_adjoint_diff(g * pairs.conj() / 2, d), shape, tuple(x.shape))
    return grad_y, grad_x


trapezoid.reads_inputs((1,), (0,))      # as PyTorch's composite: each for the other's gradient
trapezoid.copies_inputs(0, 1)   # (which saves the sums of neighbours and the spacings)


def _halved(accumulate, spacing, pairs, d):
    """``accumulate(spacing * pairs) / 2`` along ``d`` in the trapezoid rule's dtype."""
    both = _promoted(spacing.dtype, pairs.dtype)
    total = accumulate(spacing.astype(both) * pairs.astype(both), d)
    return _scaled(total, 0.5) if total.dtype.kind in "iu" else total / total.dtype.type(2)


def _to_shape(grad, viewed, shape):
    """A gradient for the viewed sample points, summed and reshaped back to ``x``'s shape."""
    from ember.autograd.graph import sum_to
    if tuple(grad.shape) != viewed:
        grad = sum_to(grad, viewed)
    return grad.reshape(shape)


@op("cumulative_trapezoid(y, x=None, *, dx=None, dim=-1)", inputs=("y", "x"), method=False)
def cumulative_trapezoid(xp, y, x, dx, dim):
    """The running trapezoidal rule along ``dim`` (one fewer element than ``y`` there)."""
    step = _step(dx, x, "cumulative_trapezoid")
    _no_bool(y, x, "cumulative_trapezoid")
    if y.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, y.ndim)
    left, right = _pieces(y, d)
    if x is None:
        return _cumsum(_scaled(left + right, step / 2), d)
    return _halved(_cumsum, _spacing(y, x, d, "cumulative_trapezoid"), left + right, d)


@cumulative_trapezoid.named_by
def _(flat, params, out):
    return "CumsumBackward0" if flat[1] is None else "DivBackward1"


@cumulative_trapezoid.derivative
def _(grad, y, x, dx, dim, *, needs):
    d = wrap_dim(dim, y.ndim)
    n = y.shape[d]
    if n == 0:                      # an empty result still gives (empty) zero gradients
        return (grad.new_zeros(y.shape) if needs[0] else None,
                grad.new_zeros(x.shape) if needs[1] else None)
    c = reverse_cumsum(grad, d) / 2
    if x is None:
        return _ends_sum(c * _step(dx, None, "cumulative_trapezoid"), d), None
    shape = _x_shape(tuple(x.shape), tuple(y.shape), d, "cumulative_trapezoid")
    grad_y = grad_x = None
    if needs[0]:
        xv = x.reshape(shape)
        spacing = xv.narrow(d, 1, shape[d] - 1) - xv.narrow(d, 0, shape[d] - 1)
        grad_y = _ends_sum(c * spacing.conj(), d)
    if needs[1]:
        pairs = y.narrow(d, 0, n - 1) + y.narrow(d, 1, n - 1)
        grad_x = _to_shape(_adjoint_diff(c * pairs.conj(), d), shape, tuple(x.shape))
    return grad_y, grad_x


cumulative_trapezoid.reads_inputs((1,), (0,))   # each for the other's gradient, as PyTorch's
cumulative_trapezoid.copies_inputs(0, 1)    # (its sums of neighbours and spacings)


ALIASES = {"trapz": "trapezoid"}


# --- gradient: numerical derivatives along dims ---------------------------------------------

def _unique_dims(dims):
    """``dims`` (wrapped), checked to name no dim twice."""
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return dims


def _gradient_spacings(input, spacing, dims, dim_given):
    """One spacing per dim: a number (uniform steps) or a 1-D tensor of coordinates."""
    if spacing is None:
        return [1.0] * len(_unique_dims(dims))
    if hasattr(spacing, "ndim") and spacing.ndim == 0:     # a Number to PyTorch's parser
        spacing = spacing.item()
    if isinstance(spacing, (int, float)) and not isinstance(spacing, bool):
        return [spacing] * len(_unique_dims(dims))
    spacing = list(spacing)
    if len(spacing) == 1 and not hasattr(spacing[0], "ndim") and len(dims) > 1:
        return spacing * len(_unique_dims(dims))
    if len(spacing) != len(dims) and dim_given:
        raise RuntimeError(
            f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and "
            f"dim arguments to have the same length, but got a spacing argument of length "
            f"{len(spacing)} and a dim argument of length {len(dims)}.")
    if len(spacing) != len(dims):
        raise RuntimeError(
            f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
            f"equal to 'self.dim() = {input.ndim}', since dim argument was not given, but got "
            f"a list of length {len(spacing)}")
    for s, d in zip(spacing, _unique_dims(dims)):
        if hasattr(s, "ndim") and s.ndim != 1:
            raise RuntimeError(f"torch.gradient expected each element of spacing to have one "
                               f"dimension, but got an element with {s.ndim} dimensions!")
        # (PyTorch returns a misshapen result here; ember refuses)
        if hasattr(s, "ndim") and s.shape[0] != input.shape[d]:
            raise RuntimeError(f"torch.gradient expected each tensor to be on the same device "
                               f"and 1-D with input.size({d}) = {input.shape[d]} coordinates, "
                               f"but got shape {list(s.shape)}")
    return [s.item() if hasattr(s, "ndim") and s.ndim == 0 else s for s in spacing]


def _along(values, d, ndim):
    """A 1-D tensor shaped to broadcast along dim ``d`` of an ``ndim``-dim tensor."""
    return values.reshape([-1 if i == d else 1 for i in range(ndim)])


def _derivative_along(f, d, h, edge_order):
    """The derivative of ``f`` along ``d``: central differences inside, one-sided ones of
    ``edge_order`` at the ends; ``h`` a step or the coordinates (NumPy's ``gradient``)."""
    n = f.shape[d]

    def part(start, length=1):
        return f.narrow(d, start % n, length)

    if hasattr(h, "ndim"):                      # coordinates: steps of their own
        # the steps keep the coordinates' dtype: the weights promote with the values, as
        # PyTorch's (and NumPy's) do, which round each point's weight first
        steps = h.diff()
        hs, hd = _along(steps[:-1], d, f.ndim), _along(steps[1:], d, f.ndim)
        inside = (-hd / (hs * (hs + hd)) * part(0, n - 2) + (hd - hs) / (hs * hd) * part(1, n - 2)
                  + hs / (hd * (hs + hd)) * part(2, n - 2))
        first, last = steps[0], steps[-1]
        if edge_order == 1:
            left, right = (part(1) - part(0)) / first, (part(-1) - part(-2)) / last
        else:                                   # second order, from three points
            a, b, e, z = first, steps[1], steps[-2], last
            left = (-(2 * a + b) / (a * (a + b)) * part(0) + (a + b) / (a * b) * part(1)
                    - a / (b * (a + b)) * part(2))
            right = (z / (e * (e + z)) * part(-3) - (e + z) / (e * z) * part(-2)
                     + (2 * z + e) / (z * (e + z)) * part(-1))
    else:
        inside = (part(2, n - 2) - part(0, n - 2)) / (2 * h)
        if edge_order == 1:
            left, right = (part(1) - part(0)) / h, (part(-1) - part(-2)) / h
        else:
            left = (-1.5 * part(0) + 2 * part(1) - 0.5 * part(2)) / h
            right = (0.5 * part(-3) - 2 * part(-2) + 1.5 * part(-1)) / h
    from ember.ops.join import cat
    return cat([left, inside, right], d)


def gradient(input, *, spacing=None, dim=None, edge_order=1):
    """Numerical derivatives of ``input`` along each of ``dim`` (all dims by default), with
    unit, uniform (a number) or coordinate (1-D tensors) ``spacing``: a tuple of tensors."""
    if input.dtype is D.uint8:
        raise RuntimeError("torch.gradient does not support uint8 input.")
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if dim is None:
        dims = list(range(input.ndim))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [wrap_dim(d, input.ndim) for d in dims]
    spacings = _gradient_spacings(input, spacing, dims, dim is not None)
    if any(input.shape[d] < edge_order + 1 for d in dims):
        raise RuntimeError("torch.gradient expected each dimension size to be at least "
                           "edge_order+1")
    if input.dtype is D.bool_:              # PyTorch differences the bools themselves
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    # integer input is not converted first: its differences promote with the steps (an
    # integer tensor over float16 coordinates gives float16, as in PyTorch)
    return tuple(_derivative_along(input, d, h, edge_order) for d, h in zip(dims, spacings))


PUBLIC = {"gradient": gradient}
