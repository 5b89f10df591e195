"""Rules for solvers and matrix builders whose leading dims are batch dims (cholesky_solve,
lu_solve, ldl_solve, lstsq, vander, cond) and for multi_dot and block_diag, built from
matmul and padding on the values."""

import ember
from ember.func._batching import rule
from ember.func._batching.reductions import expand_unbatched
from ember.ops._registry import call


def _with_batch(x, flag, size):
    return x if flag else expand_unbatched(x, size)


def _lead(x, rank):
    """A value with 1s after its batch dim up to ``rank`` dims (leading dims broadcast)."""
    return x.reshape((x.shape[0],) + (1,) * (rank - x.ndim) + tuple(x.shape[1:]))


@rule("linalg.vander", "linalg.cond")
def _leading_matrix(op, args, flags, params, size):
    x = args[0]
    least = 1 if "vander" in op.name else 2
    if x.ndim - 1 < least or any(isinstance(p, ember.Tensor) for p in params):
        return NotImplemented           # the op's own error
    return call(op, [x], params)


@rule("cholesky_solve", "linalg.lstsq")
def _two_matrices(op, args, flags, params, size):
    """Operands (*, m, n) and (*, m, k) whose leading dims broadcast."""
    (a, b), (fa, fb) = args, flags
    if a.ndim - fa < 2 or b.ndim - fb < 2:
        return NotImplemented           # the op's own error (or lstsq's vector right side)
    a, b = _with_batch(a, fa, size), _with_batch(b, fb, size)
    rank = max(a.ndim, b.ndim)
    out = call(op, [_lead(a, rank), _lead(b, rank)], params)
    if not isinstance(out, tuple):
        return out
    # lstsq: residuals and singular values come back empty, (0,), when not computed
    return tuple(o.reshape(size, 0) if o.ndim == 1 and o.shape[0] == 0 and size else o
                 for o in out)


@rule("linalg.lu_solve", "linalg.ldl_solve")
def _factored_solve(op, args, flags, params, size):
    """(factor (*, n, n), pivots (*, n), B (*, n, k)): the factor's leading dims broadcast
    with B's; the pivots' must equal the factor's."""
    (f, piv, b), (ff, fp, fb) = args, flags
    if f.ndim - ff < 2 or b.ndim - fb < 2 or piv.ndim - fp != f.ndim - ff - 1:
        return NotImplemented
    f, piv, b = _with_batch(f, ff, size), _with_batch(piv, fp, size), _with_batch(b, fb, size)
    rank = max(f.ndim, b.ndim)
    return call(op, [_lead(f, rank), _lead(piv, rank - 1), _lead(b, rank)], params)


@rule("linalg.multi_dot")
def _multi_dot(op, args, flags, params, size):
    """The chain of products left to right (multi_dot's order only changes the rounding)."""
    (tensors,), (tflags,) = args, flags
    ndims = [t.ndim - f for t, f in zip(tensors, tflags)]
    if len(tensors) < 2 or any(n != 2 for n in ndims[1:-1]) or ndims[0] not in (1, 2) or \
            ndims[-1] not in (1, 2) or len({t.dtype for t in tensors}) > 1:
        return NotImplemented           # the op's own error
    values = [_with_batch(t, f, size) for t, f in zip(tensors, tflags)]
    if ndims[0] == 1:
        values[0] = values[0].unsqueeze(1)
    if ndims[-1] == 1:
        values[-1] = values[-1].unsqueeze(-1)
    out = values[0]
    for v in values[1:]:
        out = out.matmul(v)
    if ndims[-1] == 1:
        out = out.squeeze(-1)
    if ndims[0] == 1:
        out = out.squeeze(1)
    return out


@rule("block_diag")
def _block_diag(op, args, flags, params, size):
    """Each example's blocks padded to the full width, then stacked down the rows."""
    (tensors,), (tflags,) = args, flags
    ndims = [t.ndim - f for t, f in zip(tensors, tflags)]
    if not tensors or max(ndims) > 2:
        return NotImplemented
    if 0 in ndims and len({t.dtype for t in tensors}) > 1:
        return NotImplemented           # a 0-dim block promotes weakly
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = ember.promote_types(dtype, t.dtype)
    blocks = [_as_block(_with_batch(t, f, size), n, size).to(dtype)
              for t, f, n in zip(tensors, tflags, ndims)]
    width = sum(b.shape[2] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        right = width - left - b.shape[2]
        rows.append(ember.nn.functional.pad(b, (left, right)))
        left += b.shape[2]
    return ember.cat(rows, 1)


def _as_block(value, ndim, size):
    """A 0-dim example as a 1x1 block, a 1-D one as a row."""
    if ndim == 0:
        return value.reshape(size, 1, 1)
    if ndim == 1:
        return value.reshape(size, 1, value.shape[1])
    return value
