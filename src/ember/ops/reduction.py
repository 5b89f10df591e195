"""Reductions over one, several or all dims: sum, mean, prod, nansum, nanmean, trace,
logsumexp, all, any, count_nonzero, hash_tensor and norm. Extrema, statistics and cumulative
ops live in extrema.py, statistics.py and scan.py; reduction-wide helpers in _reduce.py."""

import math

import numpy as np

from ember import _dtype as D
from ember.ops._dims import _sequence_error, check_overloaded_dims, reduction_dims
from ember.ops._linalg_utils import on_host
from ember.ops._elementwise import conj_grad
from ember.ops._promotion import FLOAT, SAME, Policy, refuse_kernel
from ember.ops._reduce import (_WIDEN, SUM, any_zero, as_written, cast_input, constant,
                               expand_reduced, extreme, grad_enabled, is_all, narrow_to,
                               reduced_numel, row_major, unsqueeze_reduced, wide)
from ember.ops._registry import op
from ember.ops._scalars import number_arg

__all__ = ["expand_reduced"]


def _nansum_rule(d, name, operands):
    if d.category == D.COMPLEX:
        raise RuntimeError("nansum on CPU does not support complex inputs")
    return SUM.rule(d, name, operands)


def _nanmean_rule(d, name, operands):
    if d.category < D.FLOATING:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype "
                           f"but got {d._torch_name}")
    return _nansum_rule(d, name, operands)


def _norm_rule(d, name, operands):
    if d.category < D.FLOATING:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {d._torch_name}")
    return d


NANSUM = Policy("nansum", _nansum_rule)
NANMEAN = Policy("nanmean", _nanmean_rule)
NORM = Policy("norm", _norm_rule)


# --- sum, mean --------------------------------------------------------------------------------

def _refuse_dims(name, dim, keepdim):
    """Raise PyTorch's TypeError for a ``dim`` of ``name`` that ``reduction_dims`` refused
    (from within its ``except``, whose error stands when the parser's words don't apply)."""
    check_overloaded_dims(dim, name, (dim, True) if keepdim else (dim,), alone=True)
    raise


@op("sum(input, dim=None, keepdim=False, *, dtype=None)", promote=SUM, upcast=False,
    saves_inputs=False)
def sum(xp, x, dim, keepdim, dtype):
    """The sum over ``dim`` (all dims by default)."""
    if dim is None and dtype is None and x.dtype not in _WIDEN:
        return x.sum(None, None, None, keepdim)     # axis=None: NumPy's fastest path
    try:
        dims = reduction_dims(dim, x.ndim)
    except TypeError:
        _refuse_dims("sum", dim, keepdim)
    x = cast_input(x, dtype, "sum")
    return row_major(x, narrow_to(wide(x).sum(axis=dims, keepdims=keepdim), x.dtype))


sum.refuse_integral_results()


@sum.derivative
def _(grad, x, dim, keepdim, dtype):
    return expand_reduced(grad, x.shape, reduction_dims(dim, x.ndim), keepdim)


def _check_mean_dtype(name, x, dtype):
    if dtype is None and x.dtype.kind not in "fcV":
        kind, got = "Input", D.FROM_NUMPY[x.dtype]
    elif dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        kind, got = "Optional", dtype
    else:
        return
    raise RuntimeError(f"{name}(): could not infer output dtype. {kind} dtype must be either a "
                       f"floating point or complex dtype. Got: {got._torch_name}")


@op("mean(input, dim=None, keepdim=False, *, dtype=None)", promote=SAME, upcast=False,
    saves_inputs=False)
def mean(xp, x, dim, keepdim, dtype):
    """The arithmetic mean over ``dim`` (all dims by default); floating and complex only."""
    _check_mean_dtype("mean", x, dtype)
    try:
        dims = reduction_dims(dim, x.ndim)
    except TypeError:
        _refuse_dims("mean", dim, keepdim)
    x = cast_input(x, dtype, "mean")
    total = wide(x).sum(axis=dims, keepdims=keepdim)
    return row_major(x, narrow_to(total / reduced_numel(x.shape, dims), x.dtype))


def _over_dims(base):
    """PyTorch's name for a reduction's node: its overload over dims is ``...Backward1``."""
    return lambda flat, params, out: base + ("0" if params[0] is None else "1")


sum.named_by(_over_dims("SumBackward"))
mean.named_by(_over_dims("MeanBackward"))


@mean.derivative
def _(grad, x, dim, keepdim, dtype):
    from ember.ops.arithmetic import _div_scalar
    dims = reduction_dims(dim, x.ndim)
    # PyTorch divides by the count as a Scalar: DivBackward1 under create_graph
    return _div_scalar(expand_reduced(grad, x.shape, dims, keepdim), reduced_numel(x.shape, dims))


def _not_nan(xp, a):
    return ~xp.isnan(a) if a.dtype.kind in "fcV" else xp.ones(a.shape, dtype=bool)


def _check_nansum_dtype(x, dtype):
    # a floating input's NaN-skipping kernel has no complex version (an integral one sums)
    if dtype is not None and dtype.is_complex and x.dtype.kind not in "biu":
        raise NotImplementedError(f"\"nansum_cpu\" not implemented for '{dtype._torch_name}'")


@op("nansum(input, dim=None, keepdim=False, *, dtype=None)", promote=NANSUM, upcast=False)
def nansum(xp, x, dim, keepdim, dtype):
    """The sum over ``dim`` treating NaN as zero."""
    _check_nansum_dtype(x, dtype)
    dims = reduction_dims(dim, x.ndim)
    w = wide(x)
    if w.dtype.kind == "f":
        w = xp.where(xp.isnan(w), 0, w)        # skipped before a dtype= cast could change them
    w = wide(cast_input(w, dtype, "nansum"))
    out = xp.sum(w, axis=dims, keepdims=keepdim)
    return row_major(x, out.astype(x.dtype if dtype is None else dtype.np, copy=False))


nansum.refuse_integral_results()


@nansum.derivative
def _(grad, x, dim, keepdim, dtype):
    grad = expand_reduced(grad, x.shape, reduction_dims(dim, x.ndim), keepdim)
    return grad * constant(_not_nan, x)


@op("nanmean(input, dim=None, keepdim=False, *, dtype=None)", promote=NANMEAN, upcast=False)
def nanmean(xp, x, dim, keepdim, dtype):
    """The mean over ``dim`` of the elements that are not NaN."""
    _check_mean_dtype("nanmean", x, dtype)
    _check_nansum_dtype(x, dtype)
    dims = reduction_dims(dim, x.ndim)
    x = cast_input(x, dtype, "nanmean")
    w = wide(x)
    valid = ~xp.isnan(w)
    # the sum is rounded to x's dtype before dividing (a float16 one may overflow)
    total = xp.sum(xp.where(valid, w, 0), axis=dims, keepdims=keepdim).astype(x.dtype)
    count = xp.sum(valid, axis=dims, keepdims=keepdim)
    return row_major(x, xp.true_divide(total, count).astype(x.dtype, copy=False))


# PyTorch computes nanmean as nansum(x) / count: its node is the division's
nanmean.named_by(lambda flat, params, out: "DivBackward0")


@nanmean.derivative
def _(grad, x, dim, keepdim, dtype):
    dims = reduction_dims(dim, x.ndim)
    valid = constant(_not_nan, x)
    count = expand_reduced(valid.sum(dims, keepdim=True), x.shape, dims, True)
    return expand_reduced(grad, x.shape, dims, keepdim) * valid / count


# --- prod -------------------------------------------------------------------------------------

def _prod_dims(dim, ndim, keepdim=False):
    # PyTorch's prod has two forms, prod(input) and prod(input, dim, keepdim): a dim of None
    # is the first one, which takes no keepdim
    if (dim is not None and not hasattr(dim, "__index__")) or (dim is None and keepdim):
        raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
    return reduction_dims(dim, ndim)


@op("prod(input, dim=None, keepdim=False, *, dtype=None)", promote=SUM, upcast=False)
def prod(xp, x, dim, keepdim, dtype):
    """The product over ``dim`` (all elements by default)."""
    dims = _prod_dims(dim, x.ndim, keepdim)
    x = cast_input(x, dtype, "prod")
    return row_major(x, xp.prod(wide(x), axis=dims, keepdims=keepdim).astype(x.dtype,
                                                                             copy=False))


prod.named_by(_over_dims("ProdBackward"))


prod.refuse_integral_results()


@prod.derivative
def _(grad, x, dim, keepdim, dtype, *, out):
    dims = _prod_dims(dim, x.ndim)
    if not dims:
        return grad
    # prod(input) is a 0-d result that broadcasts as it is; prod(input, dim) unsqueezes
    restored = () if dim is None else dims
    grad = unsqueeze_reduced(grad, restored, keepdim)
    if x.dtype is not grad.dtype:       # prod(dtype=): PyTorch differentiates the cast input
        x = x.to(grad.dtype)
    if not any_zero(x):
        return grad * conj_grad(unsqueeze_reduced(out, restored, keepdim) / x)
    if dim is not None:
        return _prod_of_others(grad, x, dims[0])
    if not grad_enabled() and _count_zeros(x) > 1:
        return x.new_zeros(x.shape)     # every product of the others holds a zero (PyTorch)
    return _prod_of_others(grad, x.contiguous().view(-1), 0).view_as(x)


def _count_zeros(x):
    return int(constant(lambda xp, a: xp.count_nonzero(a == 0), x))


def _prod_of_others(grad, x, dim):
    """``grad`` times, for each element, the product of the others along ``dim``: exact where
    x has zeros, and differentiable again (the exclusive running products from either end, as
    PyTorch builds them); a dim of size 1 has no others."""
    n = x.shape[dim]
    if n == 1:
        return grad
    from ember.ops.join import cat
    ones = x.new_ones([1 if d == dim else s for d, s in enumerate(x.shape)], dtype=grad.dtype)
    before = cat([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    after = cat([ones, x.narrow(dim, 1, n - 1).flip(dim)], dim).cumprod(dim).flip(dim)
    return grad * conj_grad(before * after)


# --- trace ------------------------------------------------------------------------------------

def _trace_rule(d, name, operands):
    if d is D.bool_ or d in D.FLOAT8 or d in D.WIDE_UNSIGNED:
        raise NotImplementedError(f"\"trace\" not implemented for '{d._torch_name}'")
    return SUM.rule(d, name, operands)


@op("trace(input)", promote=Policy("trace", _trace_rule), upcast=False, out=False,
    saves_inputs=False)
def trace(xp, x):
    """The sum of the main diagonal of a matrix (integers sum in int64, as ``sum``)."""
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    return narrow_to(wide(xp.diagonal(x)).sum(), x.dtype)


@trace.derivative
def _(grad, x):
    from ember._creation import eye
    return grad * eye(*x.shape, dtype=grad.dtype, device=grad.device)


# --- logsumexp --------------------------------------------------------------------------------

@op("logsumexp(input, dim, keepdim=False)", promote=FLOAT, upcast=False)
def logsumexp(xp, x, dim, keepdim):
    """``log(sum(exp(input)))`` over ``dim``, computed without overflow."""
    if dim is None:     # (an int[], required: None is no "all dims" here)
        raise TypeError(_sequence_error(dim, ("logsumexp", "dim", 1)))
    dims = reduction_dims(dim, x.ndim)
    if isinstance(dim, (tuple, list)) and not dim and not keepdim and x.ndim and x.size:
        # PyTorch reduces all for dim=() but then writes into a 0-dim result and fails
        raise RuntimeError(f"output with shape [] doesn't match the broadcast shape "
                           f"[{', '.join(['1'] * x.ndim)}]")
    if x.size == 0:
        shift = xp.zeros([1 if d in dims else s for d, s in enumerate(x.shape)], x.real.dtype)
    else:
        shift = extreme(xp, x.real, "max", dims, True)
        shift = xp.where(xp.isfinite(shift), shift, 0)
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":
        out = _half_logsumexp(xp, x, shift, dims)
    else:
        total = xp.sum(xp.exp(x - shift), axis=dims, keepdims=True)
        out = xp.log(total) + shift
    return row_major(x, out if keepdim else xp.squeeze(out, axis=dims))


def _half_logsumexp(xp, x, shift, dims):
    """PyTorch's steps on a 16-bit input, each rounded to its dtype: x - max, exp, a float32
    sum, log, + max (rounding once at the end misses an ulp in about one element in 13)."""
    f32, half = np.float32, x.dtype

    def rounded(a):
        return a.astype(half).astype(f32)
    shift = shift.astype(f32)
    e = rounded(xp.exp(rounded(x.astype(f32) - shift)))
    total = rounded(xp.sum(e, axis=dims, keepdims=True))
    return (rounded(xp.log(total)) + shift).astype(half)


@logsumexp.derivative
def _(grad, x, dim, keepdim, *, out):
    dims = reduction_dims(dim, x.ndim)
    grad = unsqueeze_reduced(grad, dims, keepdim)
    return grad * conj_grad((x - unsqueeze_reduced(out, dims, keepdim)).exp())


# --- all, any, count_nonzero ------------------------------------------------------------------

def _logical(xp, x, dim, keepdim, reduce):
    # unlike the other reductions, all/any reduce nothing for dim=()
    dims = () if isinstance(dim, (tuple, list)) and not dim else reduction_dims(dim, x.ndim)
    out = reduce(x != 0, axis=dims, keepdims=keepdim)
    return row_major(x, out.astype(np.uint8) if x.dtype == np.uint8 else out)


@op("all(input, dim=None, keepdim=False)", out=True)
def all(xp, x, dim, keepdim):
    """Whether every element over ``dim`` is nonzero (uint8 for uint8 input, else bool)."""
    return _logical(xp, x, dim, keepdim, xp.all)


@op("any(input, dim=None, keepdim=False)", out=True)
def any(xp, x, dim, keepdim):
    """Whether any element over ``dim`` is nonzero (uint8 for uint8 input, else bool)."""
    return _logical(xp, x, dim, keepdim, xp.any)


# PyTorch's verdicts for a bool tensor's checks (distributions validate with them); under
# vmap each reduces over the batch too, giving one unbatched answer (func/_batching)
_NOT_BOOL = ("self.scalar_type() == at::kBool INTERNAL ASSERT FAILED at \"/__w/pytorch/pytorch/"
             "aten/src/ATen/native/ReduceOps.cpp\":{line}, please report a bug to PyTorch. ")


def _verdict(xp, x, reduce, line):
    if x.dtype != np.bool_:
        raise RuntimeError(_NOT_BOOL.format(line=line))
    return xp.asarray(reduce(x))


@op("_is_all_true(self)", differentiable=False)
def _is_all_true(xp, x):
    """Whether every element of a bool tensor is True (0-dim bool)."""
    return _verdict(xp, x, xp.all, 2144)


@op("_is_any_true(self)", differentiable=False)
def _is_any_true(xp, x):
    """Whether any element of a bool tensor is True (0-dim bool)."""
    return _verdict(xp, x, xp.any, 2148)


@op("count_nonzero(input, dim=None)")
def count_nonzero(xp, x, dim):
    """The number of nonzero elements over ``dim`` (all dims by default)."""
    try:
        dims = reduction_dims(dim, x.ndim)
    except TypeError:
        _refuse_dims("count_nonzero", dim, False)
    if dim is None or isinstance(dim, (tuple, list)) and not dim:
        refuse_kernel(x, "nonzero_count_cpu", True)   # (over given dims PyTorch sums x != 0)
    return row_major(x, xp.asarray(xp.count_nonzero(x, axis=dims)).astype(np.int64,
                                                                          copy=False))


@op("hash_tensor(input, dim=None, *, keepdim=False, mode=0)")
def hash_tensor(xp, x, dim, keepdim, mode):
    """The xor of the elements' bits over ``dim`` (all dims by default), as uint64: floats
    are widened to float64 and integers to int64 first."""
    if mode != 0:
        raise RuntimeError(f"Unknown hash_tensor mode: {mode}")
    if x.dtype.kind == "c":
        raise NotImplementedError(f'"xor_sum_cpu" not implemented for '
                                  f"'{D.FROM_NUMPY[x.dtype]._torch_name}'")
    if dim is None and x.size == 0:
        raise RuntimeError("hash_tensor: Expected reduction dim to be specified for "
                           "input.numel() == 0. Specify the reduction dim with the 'dim' "
                           "argument.")
    dims = reduction_dims(dim, x.ndim)
    for d in dims:
        if x.shape[d] == 0:
            raise IndexError(f"hash_tensor: Expected reduction dim {d} to have non-zero size.")
    wide = x.astype(np.float64 if x.dtype.kind in "fV" else np.int64)
    # on the host: CuPy has no ufunc reduce for bitwise_xor
    return on_host(xp, _xor_reduce, wide.view(np.uint64), axis=dims, keepdims=keepdim)


def _xor_reduce(xp, bits, axis, keepdims):
    return xp.asarray(xp.bitwise_xor.reduce(bits, axis=axis, keepdims=keepdims))


# --- norm -------------------------------------------------------------------------------------

_INF = float("inf")


def _norm_order(p):
    """The vector-norm order for ``p`` ('fro' and None are the 2-norm), parsed as PyTorch
    parses linalg_vector_norm's Number argument ``ord``."""
    if p is None or isinstance(p, str) and p == "fro":
        return 2.0
    p = number_arg(p, "linalg_vector_norm", "ord", 2)
    if type(p) is complex:
        raise RuntimeError("linalg.vector_norm: Expected a non-complex scalar as the order of "
                           "norm.")
    return float(p)


def _matrix_dims(p, dim, ndim):
    """The dims of the matrix norm ``norm`` computes, or None for a vector norm: a string
    ``p`` other than 'fro' over at most two dims means a matrix norm (over all dims when
    ``dim`` is None, which must then be two)."""
    if not isinstance(p, str):
        return None
    if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
        return None
    return tuple(range(ndim)) if dim is None else dim


def _norm_dtype(x, dtype):
    if dtype is None:
        return x
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"linalg.vector_norm: dtype should be floating point or complex, but "
                           f"got {dtype._torch_name}")
    if x.dtype.kind == "c" and not dtype.is_complex:
        raise RuntimeError(f"linalg.vector_norm: dtype should be complex for complex inputs, but "
                           f"got {dtype._torch_name}")
    if x.dtype.kind != "c" and dtype.is_complex:
        raise RuntimeError(f"linalg.vector_norm: dtype should be real for real inputs, but got "
                           f"{dtype._torch_name}")
    have = D.FROM_NUMPY[x.dtype]
    if D.promote_types(have, dtype) is not dtype:
        raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({have._torch_name}) "
                           f"should be convertible without narrowing to the specified dtype "
                           f"({dtype._torch_name})")
    return x.astype(dtype.np)


@op("norm(input, p='fro', dim=None, keepdim=False, dtype=None)", promote=NORM,
    upcast=False, grad_fn_name="LinalgVectorNormBackward0")
def norm(xp, x, p, dim, keepdim, dtype):
    """The vector p-norm over ``dim`` (all elements by default); ``p`` may be inf, -inf or 0,
    or 'nuc' for the nuclear norm of a matrix (see ``linalg.matrix_norm``)."""
    matrix = _matrix_dims(p, dim, x.ndim)
    if matrix is not None:
        from ember.ops.norms import matrix_norm_forward
        return matrix_norm_forward(xp, x, p, matrix, keepdim, dtype)
    order = _norm_order(p)
    dims = reduction_dims(dim, x.ndim)
    if order < 0 or order == _INF:      # (before dtype='s checks, as PyTorch)
        _require_identity(order, x.shape, as_written(dim, dims), is_all(dim))
    x = _norm_dtype(x, dtype)
    real = x.real.dtype if x.dtype.kind == "c" else x.dtype
    a = xp.abs(wide(x))
    # (the arrays' reduction methods: NumPy's functions add a layer of argument handling)
    if order == _INF:
        out = a.max(axis=dims, keepdims=keepdim)
    elif order == -_INF:
        out = a.min(axis=dims, keepdims=keepdim)
    elif order == 0:
        out = (a != 0).sum(axis=dims, keepdims=keepdim).astype(a.dtype)
    elif order == 1:
        out = a.sum(axis=dims, keepdims=keepdim)
    elif order == 2:
        out = xp.sqrt((a * a).sum(axis=dims, keepdims=keepdim))
    else:
        out = (a ** order).sum(axis=dims, keepdims=keepdim) ** (1 / order)
    return row_major(x, xp.asarray(out).astype(real, copy=False))


def _require_identity(order, shape, dims, full):
    """PyTorch's errors for norms without an identity (inf, and every negative order) over no
    elements."""
    if full and math.prod(shape) == 0:
        raise RuntimeError(f"linalg.vector_norm cannot compute the {order:g} norm on an empty "
                           f"tensor because the operation does not have an identity")
    for d in dims:                          # as written: the message names -1 as -1
        if shape and shape[d % len(shape)] == 0:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {order:g} norm on the "
                               f"dimension {d}because this dimension is empty and the operation "
                               f"does not have an identity")


@norm.named_by
def _(flat, params, out):                   # 'nuc' is linalg.matrix_norm's (see ops/norms.py)
    if params[0] == "nuc":
        return "PermuteBackward0" if params[2] else "SumBackward1"
    return "LinalgVectorNormBackward0"


@norm.composed_when_recording
def _(inputs, params):                      # 'nuc': linalg.matrix_norm's graph
    matrix = _matrix_dims(params[0], params[1], inputs[0].ndim)
    if matrix is None:
        return NotImplemented
    from ember.ops.norms import _composed_sum_norm
    return _composed_sum_norm(inputs[0], params[0], matrix, *params[2:])


@norm.derivative
def _(grad, x, p, dim, keepdim, dtype, *, out):
    matrix = _matrix_dims(p, dim, x.ndim)
    if matrix is not None:
        from ember.ops.norms import matrix_norm_grad
        return matrix_norm_grad(grad, x, p, matrix, keepdim, dtype, out)
    order = _norm_order(p)
    dims = reduction_dims(dim, x.ndim)
    if order == 0:      # no gradient at all, as PyTorch's (an input's .grad stays None)
        return None
    # as PyTorch's, the gradient and the norm broadcast against x: unsqueezed over the dims
    # (a full reduction's 0-d ones as they are)
    restored = () if dim is None else dims
    if order == 1:
        return x.sgn() * unsqueeze_reduced(grad, restored, keepdim)
    return _norm_grad_by_broadcast(unsqueeze_reduced(grad, restored, keepdim), x, order,
                                   unsqueeze_reduced(out, restored, keepdim), dims)


def _norm_grad_by_broadcast(grad, x, order, norm_, dims):
    """The vector norm's gradient as PyTorch's formulas build it, with ``grad`` and ``norm_``
    keeping size-1 reduced dims to broadcast against ``x``. Where the norm is 0 the gradient
    is 0 (a subgradient)."""
    at_zero_norm = constant(_is_zero, norm_).bool()
    if order == 2:
        return grad * (x / norm_).masked_fill(at_zero_norm, 0)
    if abs(order) == _INF:
        # NaN elements count as ties (their sgn is 0), as in PyTorch
        ties = constant(lambda xp, a, n: (xp.abs(a) == n) | xp.isnan(a), x, norm_)
        count = constant(lambda xp, t: t.sum(axis=dims, keepdims=True), ties)
        return x.sgn() * ((grad / count) * ties)
    if order < 1:
        # |x|^(p-1) is infinite at x = 0, where the gradient is 0
        at_zero = constant(_is_zero, x).bool()
        slope = x.sgn() * x.abs().pow(order - 1).masked_fill(at_zero, 0)
        return slope * grad * norm_.pow(1 - order)
    scaled = (grad / norm_.pow(order - 1)).masked_fill(at_zero_norm, 0)
    if order < 2:
        return x.sgn() * x.abs().pow(order - 1) * scaled
    return x * x.abs().pow(order - 2) * scaled


def _is_zero(xp, a):
    return (a == 0).astype(a.dtype)


# --- modules of the reduction family ----------------------------------------------------------

from ember.ops import extrema, scan, statistics  # noqa: E402,F401  (registers ops)



def _norm_function(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):  # noqa: A002
    """``ember.norm``: the method's norm with ``out`` fifth and ``dtype`` sixth, PyTorch's
    positional order for the function (the method has ``dtype`` fourth)."""
    return norm.function(input, p, dim, keepdim, dtype, out=out)


_norm_function.__name__ = _norm_function.__qualname__ = "norm"

ALIASES = {**extrema.ALIASES, **scan.ALIASES, **statistics.ALIASES}
PUBLIC = {**extrema.PUBLIC, **statistics.PUBLIC, "norm": _norm_function,
          "_is_all_true": _is_all_true.function, "_is_any_true": _is_any_true.function}
