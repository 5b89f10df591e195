"""Arithmetic in log space, computed without overflow: logaddexp, logaddexp2, logcumsumexp,
softmax and log_softmax."""

import math

import numpy as np

from ember import _dtype as D
from ember._creation import zeros_like
from ember._tensor import _make
from ember.backend import accumulate, xp_of
from ember.backend.cpu_kernels import TORCH_16_BIT_LANES, get_num_threads
from ember.ops._dims import wrap_dim
from ember.ops._elementwise import binary, conj_grad
from ember.ops._promotion import Policy
from ember.ops._reduce import cast_input, cpu_wide, flip, grad_enabled
from ember.ops._registry import op, rename_node
from ember.ops.binary_math import where
from ember.ops.unary_math import exp2, log1p

_LN2 = math.log(2.0)
_UPCAST = D.HALF_NP
_FAST = {np.dtype(np.float32), np.dtype(np.float64)}


def _inexact_policy(kernel, *, complex_ok):
    """Floating (and, if ``complex_ok``, complex) dtypes only, as PyTorch's kernels."""
    def rule(d, name, operands):
        if d.category < D.FLOATING or (d.category == D.COMPLEX and not complex_ok) or \
                d in D.FLOAT8:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{d._torch_name}'")
        return d
    return Policy(f"inexact[{kernel}]", rule)


# --- logaddexp, logaddexp2 --------------------------------------------------------------------

def _complex_logaddexp(xp, a, b):
    """``log(exp(a) + exp(b))`` for complex operands, ordered by real part as PyTorch does,
    with its values where both real parts are the same infinity."""
    a_smaller = a.real < b.real
    lo, hi = xp.where(a_smaller, a, b), xp.where(a_smaller, b, a)
    out = log1p.forward(xp, xp.exp(lo - hi)) + hi
    same_inf = xp.isinf(lo.real) & (lo.real == hi.real)
    # exp(-inf + iy) is 0 whatever y, so the imaginary part of either operand will do
    out = xp.where(same_inf & (lo.real < 0), lo, out)
    return xp.where(same_inf & (lo.real > 0), xp.log(xp.exp(lo) + xp.exp(hi)), out)


def _logaddexp(xp, a, b):
    if a.dtype.kind == "c":
        return _complex_logaddexp(xp, a, b)
    return xp.logaddexp(a, b)


def _logaddexp_grad(grad, a, b):
    return (grad / conj_grad(1 + (b - a).exp()), grad / conj_grad(1 + (a - b).exp()))


def _logaddexp2_grad(grad, a, b):
    return grad / (1 + exp2(b - a)), grad / (1 + exp2(a - b))


logaddexp = binary("logaddexp(input, other)", _logaddexp, _logaddexp_grad,
                   doc="``log(exp(input) + exp(other))``, elementwise, without overflow.",
                   promote=_inexact_policy("logaddexp_cpu", complex_ok=True), scalars=False,
                   inplace=False)
logaddexp2 = binary("logaddexp2(input, other)", lambda xp, a, b: xp.logaddexp2(a, b),
                    _logaddexp2_grad,
                    doc="``log2(2**input + 2**other)``, elementwise, without overflow.",
                    promote=_inexact_policy("logaddexp2_cpu", complex_ok=False), scalars=False,
                    inplace=False)


# --- logcumsumexp -----------------------------------------------------------------------------

@op("logcumsumexp(input, dim)",
    promote=_inexact_policy("logcumsumexp_out_cpu", complex_ok=True))
def logcumsumexp(xp, x, dim):
    """``log(cumsum(exp(input), dim))``, computed without overflow."""
    d = wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return x.copy()
    x = xp.ascontiguousarray(x)          # PyTorch's scans return row-major results
    if x.dtype.kind != "c":
        out = accumulate(xp, "logaddexp", cpu_wide(xp, x), d).astype(x.dtype, copy=False)
        out += 0.0          # PyTorch's sums give 0.0 for a leading -0.0
        return out
    out = xp.empty_like(x)
    src, dst = xp.moveaxis(x, d, 0), xp.moveaxis(out, d, 0)
    # from log(0) = -inf + 0j, as PyTorch: a first element of real part -inf gives -inf + 0j
    acc = xp.full(src.shape[1:], complex(-math.inf, 0), dtype=x.dtype)
    for k in range(len(src)):
        acc = dst[k] = _complex_logaddexp(xp, src[k], acc)
    return out


def _reverse_logcumsumexp(t, dim):
    return flip(logcumsumexp(flip(t, dim), dim), dim)


@logcumsumexp.derivative
def _(grad, x, dim, *, out):
    # d out_k / d x_j = exp(x_j - out_k) for j <= k: the input's gradient is
    # exp(x_j) * sum_{k >= j} grad_k exp(-out_k), summed in log space to stay finite
    if x.ndim == 0 or x.numel() == 0:
        return grad
    d = wrap_dim(dim, x.ndim)
    zero = grad == 0 if grad.requires_grad else None
    if x.is_complex():
        def weighted(log_grad):
            return (x + _reverse_logcumsumexp(log_grad - out, d)).exp().conj()
        if zero is None:
            result = weighted(grad.conj().log())
        else:                           # log(0) as a constant: its derivative there is inf
            result = weighted(where(zero, complex(-math.inf, 0),
                                    where(zero, 1, grad).conj().log()))
    else:
        lowest = D.finfo(x.dtype).min       # log(0), finite so that no inf - inf appears

        def weighted(log_grad):
            return (x + _reverse_logcumsumexp(log_grad - out, d)).exp()

        def part(mask):
            return weighted(where(mask, where(mask, grad.abs(), 1.0).log(), lowest))
        result = part(grad > 0) - part(grad < 0)
    if grad.requires_grad:
        # The masks cut the dependence on the elements of grad that are 0 (forward AD
        # differentiates this at grad = 0): a term that is exactly 0 but depends on them.
        one = where(zero, grad + 1, 1.0)
        result = result + (weighted((one.conj() if one.is_complex() else one).log())
                           - weighted(zeros_like(grad)))
    return result


# --- softmax, log_softmax ---------------------------------------------------------------------

def _softmax_input(xp, name, x, dim, dtype):
    """(values to compute on, axis, result dtype) after PyTorch's checks and ``dtype=``; a
    0-dim input comes back with one dim."""
    d = wrap_dim(dim, x.ndim, (name, "dim", 1))
    x = cast_input(x, dtype, name)
    if (x.dtype.kind not in "fV" or x.dtype.itemsize == 1) and x.size:    # (empty: returned)
        kernel = f"{name}_lastdim_kernel_impl" if d == x.ndim - 1 or x.ndim == 0 else \
            f"{name}_kernel_impl"
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{D.FROM_NUMPY[x.dtype]._torch_name}'")
    result = x.dtype
    if result in _UPCAST:
        x = x.astype(xp.float32)
    if x.ndim == 0:
        x = x.reshape(1)
    return xp.ascontiguousarray(x), d, result      # PyTorch computes on (and returns) row-major


def _finish(out, result, zero_dim):
    if zero_dim:
        out = out.reshape(())
    return out if out.dtype == result else out.astype(result)


def _rounded(a, dtype):
    """float32 ``a`` rounded to float16/bfloat16 ``dtype`` and back to float32."""
    return a.astype(dtype).astype(np.float32)


def row_sums(xp, a):
    """Sums of 2-d ``a`` over its last axis. einsum is several times faster than NumPy's sum
    along a short axis; a BLAS matrix-vector product is only as fast, and from some 2^19
    elements OpenBLAS spreads it over threads, which stall for milliseconds on a busy
    machine."""
    return xp.einsum("ij->i", a)


def row_max(xp, a, d):
    """Maxima of float ``a`` along axis ``d``, kept as a size-1 axis (NaN where a NaN is).
    On NumPy with ``initial=-inf``: the same values, but along a short last axis (4096 rows
    of 64) NumPy's max without one takes a loop five times as slow."""
    if xp is np:
        return a.max(axis=d, keepdims=True, initial=-np.inf)
    return a.max(axis=d, keepdims=True)


def _sums(xp, a, d):
    """Sums of ``a`` along axis ``d``, kept as a size-1 axis."""
    if d != a.ndim - 1 or a.dtype.kind != "f" or a.size == 0:
        return a.sum(axis=d, keepdims=True)
    return row_sums(xp, a.reshape(-1, a.shape[-1])).reshape(a.shape[:-1] + (1,))


def _exp_shifted(xp, x, d):
    """(``exp(x - max)`` along ``d`` as a new array, its sums along ``d``): exp cannot
    overflow. Each slice's own max, as PyTorch: a shared one (cheaper to find) lost up to
    twice the ulps in slices far below it and cost a second pass when one underflowed."""
    e = x - row_max(xp, x, d)
    xp.exp(e, out=e)
    return e, _sums(xp, e, d)


def _outside_vmap():
    """Whether no vmap is active (under vmap, ``_data`` is a placeholder, not the values)."""
    from ember.func._batched import STATE
    return not STATE.levels


def _array_backward(grad, out):
    """Whether a derivative may run on arrays: first order, outside vmap, in one floating
    dtype (the composition of ember ops handles everything else)."""
    dtype = grad._data.dtype
    return (not grad_enabled() and out.ndim and (dtype in _FAST or dtype in _UPCAST)
            and dtype == out._data.dtype and _outside_vmap())


def _wide_arrays(*tensors):
    """The tensors' arrays, float16/bfloat16 ones as float32: PyTorch's softmax backward
    kernels compute those in float32 and round once, not after every step."""
    return [t._data.astype(np.float32) if t._data.dtype in _UPCAST else t._data
            for t in tensors]


def _wide_tensors(grad, out):
    """(grad, out) as float32 when they are float16/bfloat16, so that the composed
    derivative rounds once, as PyTorch's kernel."""
    if grad.dtype.is_floating_point and grad.dtype.itemsize == 2:
        return grad.float(), out.float()
    return grad, out


def _round_scalar_tail(e, d, dtype):
    """Round, in place, the exps that PyTorch's other-dim softmax takes through its scalar
    path: it stores those in the 16-bit output before dividing, while its vector body divides
    in float32 and rounds once."""
    rows = e.reshape(-1, e.shape[d], e[(0,) * (d + 1)].size)
    scalar = _scalar_positions(rows.shape[0], rows.shape[2], get_num_threads())
    if scalar.any():
        tail = rows.transpose(0, 2, 1)[scalar]          # (positions, e.shape[d])
        rows.transpose(0, 2, 1)[scalar] = _rounded(tail, dtype)


def _scalar_positions(outer, inner, threads):
    """Which (outer, inner) positions PyTorch's other-dim softmax computes in its scalar loop:
    its threads take equal ranges of the flattened positions, and in each run of positions
    within one range and one row it takes whole vectors, then the rest one by one."""
    n = outer * inner
    cuts = np.union1d(np.arange(0, n + 1, inner), np.arange(0, n, -(-n // threads)))
    starts, lengths = cuts[:-1], np.diff(cuts)
    tails = starts + lengths - lengths % TORCH_16_BIT_LANES
    return (np.arange(n) >= np.repeat(tails, lengths)).reshape(outer, inner)


@op("softmax(input, dim, dtype=None)", out=True, saves_inputs=False)
def softmax(xp, x, dim, dtype):
    """``exp(input)`` normalized to sum to 1 along ``dim`` (computed in ``dtype`` if given)."""
    zero_dim = x.ndim == 0
    x, d, result = _softmax_input(xp, "softmax", x, dim, dtype)
    if x.size == 0:
        return x.astype(result)
    e, sums = _exp_shifted(xp, x, d)
    if result in _UPCAST and d != x.ndim - 1 and xp is np:
        _round_scalar_tail(e, d, result)    # a GPU kernel (as PyTorch's) rounds once
    if d == x.ndim - 1:
        e *= 1 / sums       # as PyTorch's last-dim kernel (and faster than a divide by rows)
    else:
        e /= sums
    return _finish(e, result, zero_dim)


@softmax.derivative
def _(grad, x, dim, dtype, *, out):
    d = wrap_dim(dim, x.ndim)
    if _array_backward(grad, out):
        xp, (g, y) = xp_of(out._data), _wide_arrays(grad, out)
        gx = g - _sums(xp, g * y, d)
        gx *= y
        # row-major, as PyTorch's kernel writes it whatever the operands' layout
        return _make(xp.ascontiguousarray(gx.astype(out._data.dtype, copy=False)))
    g, y = _wide_tensors(grad, out)
    return rename_node((y * (g - (g * y).sum(d, keepdim=True))).to(grad.dtype).contiguous(),
                       "SoftmaxBackwardDataBackward0")


@op("log_softmax(input, dim, dtype=None)", out=True, saves_inputs=False)
def log_softmax(xp, x, dim, dtype):
    """The logarithm of ``softmax`` along ``dim``, computed without overflow."""
    zero_dim = x.ndim == 0
    x, d, result = _softmax_input(xp, "log_softmax", x, dim, dtype)
    if x.size == 0:
        return x.astype(result)
    # each slice's own max (not softmax's global one): near 0, at the likely classes,
    # x - max - log(sums) then loses no digits to cancellation
    s = x - row_max(xp, x, d)
    sums = _sums(xp, xp.exp(s), d)
    if result in _UPCAST and d == x.ndim - 1:
        # PyTorch's last-dim kernel keeps the sums and their logs in the input's dtype
        s -= _rounded(xp.log(_rounded(sums, result)), result)
    else:
        s -= xp.log(sums)
    return _finish(s, result, zero_dim)


@log_softmax.derivative
def _(grad, x, dim, dtype, *, out):
    return log_softmax_grad(grad, out, wrap_dim(dim, x.ndim))


def log_softmax_grad(grad, out, d):
    """The gradient through ``out = log_softmax(x, d)`` of ``grad`` at ``out``."""
    if _array_backward(grad, out):
        xp, (g, y) = xp_of(out._data), _wide_arrays(grad, out)
        gx = xp.exp(y)
        gx *= _sums(xp, g, d)
        # row-major, as PyTorch's kernel writes it whatever the operands' layout
        return _make(xp.ascontiguousarray(xp.subtract(g, gx, out=gx).astype(out._data.dtype,
                                                                            copy=False)))
    if out.ndim and grad.dtype is out.dtype and _outside_vmap():
        return _log_softmax_backward_data(grad, out, d, grad.dtype)
    g, y = _wide_tensors(grad, out)
    return rename_node((g - y.exp() * g.sum(d, keepdim=True)).to(grad.dtype).contiguous(),
                       LOG_SOFTMAX_DOUBLE)     # (row-major, as PyTorch's kernel writes it)


@op("_log_softmax_backward_data(grad_output, output, dim, input_dtype)", inputs=2,
    method=False)
def _log_softmax_backward_data(xp, g, y, dim, input_dtype):
    """log_softmax's gradient ``grad_output - exp(output) * grad_output.sum(dim)`` (16-bit
    floats computed in float32 and rounded once, as PyTorch's kernel), in ``input_dtype``."""
    g32, y32 = _backward_data_inputs(g, y, input_dtype)
    sums = _sums(xp, g32, wrap_dim(dim, y.ndim)) if y.ndim else g32
    return _row_major(xp, (g32 - xp.exp(y32) * sums).astype(g.dtype, copy=False))


@_log_softmax_backward_data.derivative
def _(grad, g, y, dim, input_dtype):
    # PyTorch's double backward, each step an op: grad - sum(grad * e) for grad_output, and
    # -(grad * (e * sum(grad_output))) for output (e = exp(output))
    d = wrap_dim(dim, y.ndim) if y.ndim else 0
    e = y.exp()
    return grad - (grad * e).sum(d, keepdim=True), -(grad * (e * g.sum(d, keepdim=True)))


def _backward_data_inputs(g, y, input_dtype):
    """The arrays of a ``_*softmax_backward_data`` call, 16-bit ones widened to float32, after
    PyTorch's checks: ``output`` of ``grad_output``'s dtype, and no Half ``input_dtype`` for
    float32 gradients (the result always has ``grad_output``'s dtype)."""
    got = D.FROM_NUMPY[y.dtype]
    if y.dtype != g.dtype or (g.dtype == np.float32 and input_dtype is D.float16):
        want = D.FROM_NUMPY[g.dtype]
        got = D.float16 if y.dtype == g.dtype else got
        raise RuntimeError(f"expected scalar type {want._torch_name} but found "
                           f"{got._torch_name}")
    return (a.astype(np.float32) if a.dtype in _UPCAST else a for a in (g, y))


@op("_softmax_backward_data(grad_output, output, dim, input_dtype)", inputs=2, method=False)
def _softmax_backward_data(xp, g, y, dim, input_dtype):
    """softmax's gradient ``output * (grad_output - (grad_output * output).sum(dim))`` (16-bit
    floats computed in float32 and rounded once), in ``grad_output``'s dtype."""
    g32, y32 = _backward_data_inputs(g, y, input_dtype)
    gy = g32 * y32
    sums = _sums(xp, gy, wrap_dim(dim, y.ndim)) if y.ndim else gy
    return _row_major(xp, (gy - y32 * sums).astype(g.dtype, copy=False))


def _row_major(xp, a):
    """``a`` row-major, as PyTorch's kernels write it (0-dim results stay 0-dim)."""
    return xp.ascontiguousarray(a) if a.ndim else xp.asarray(a)


@_softmax_backward_data.derivative
def _(grad, g, y, dim, input_dtype):
    # d/d grad_output: y * (grad - sum(grad * y)); d/d output: grad * (g - sum(g * y))
    # - g * sum(grad * y)
    d = wrap_dim(dim, y.ndim) if y.ndim else 0
    grad_y = (grad * y).sum(d, keepdim=True)
    return (y * (grad - grad_y),
            grad * (g - (g * y).sum(d, keepdim=True)) - g * grad_y)


LOG_SOFTMAX_DOUBLE = "LogSoftmaxBackwardDataBackward0"     # PyTorch's log_softmax backward

# PyTorch exposes both kernels as torch._softmax_backward_data / _log_softmax_backward_data
PUBLIC = {"_softmax_backward_data": _softmax_backward_data.function,
          "_log_softmax_backward_data": _log_softmax_backward_data.function}
