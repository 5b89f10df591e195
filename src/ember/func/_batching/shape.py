"""Rules for shape ops, subscripts, and ops that already treat leading dims as batch dims."""

import math

import ember
from ember.func._batching import FALLBACK_NAMES, handled_level, rule
from ember.func._batching.elementwise import _elementwise, align
from ember.func._batching.reductions import expand_unbatched
from ember.ops._registry import call

_FULL = slice(None)


@rule("view", "reshape")
def _reshape(op, args, flags, params, size):
    (shape,) = params
    return call(op, args, ((size,) + tuple(shape),))


@rule("expand")
def _expand(op, args, flags, params, size):
    x, (sizes, *rest) = args[0], params
    sizes = tuple(sizes)
    lead = len(sizes) - (x.ndim - 1)
    if lead > 0:
        x = x.reshape((size,) + (1,) * lead + tuple(x.shape[1:]))
    return call(op, [x], ((size,) + sizes, *rest))


@rule("permute")
def _permute(op, args, flags, params, size):
    from ember.func._batching.reductions import shift_dim
    ndim = args[0].ndim - 1
    return call(op, args, ((0,) + tuple(shift_dim(d, ndim) for d in params[0]),))


@rule("t")
def _t(op, args, flags, params, size):
    x = args[0]
    return x.transpose(1, 2) if x.ndim == 3 else x.reshape(x.shape)


@rule("_repeat")
def _repeat(op, args, flags, params, size):
    x, repeats = args[0], tuple(params[0])
    lead = len(repeats) - (x.ndim - 1)
    if lead < 0:
        return NotImplemented
    x = x.reshape((size,) + (1,) * lead + tuple(x.shape[1:]))
    return call(op, [x], ((1,) + repeats,))


@rule("_unfold")
def _unfold(op, args, flags, params, size):
    from ember.func._batching.reductions import shift_dim
    x, (dimension, *rest) = args[0], params
    if x.ndim == 1 or not isinstance(dimension, int):
        return NotImplemented           # logically 0-dim, or a dim the op itself must check
    return call(op, args, (shift_dim(dimension, x.ndim - 1), *rest))


# unfold's gradient has no rule (PyTorch's neither): its loop warns with PyTorch's name
FALLBACK_NAMES["_unfold_backward"] = lambda values, params, level: "aten::unfold_backward"


@rule("repeat_interleave")
def _repeat_interleave(op, args, flags, params, size):
    from ember.func._batching.reductions import shift_dim
    (x, repeats), (dim, output_size) = args, params
    if not flags[0] or flags[1] or repeats is None or (dim is not None and x.ndim == 1):
        return NotImplemented
    if dim is None:                     # each example flattened on its own
        flat = x.reshape(size, math.prod(x.shape[1:]))
        return call(op, [flat, repeats], (1, output_size))
    return call(op, args, (shift_dim(dim, x.ndim - 1), output_size))


@rule("_getitem_select", "_getitem_slice", "_getitem_unsqueeze", "_getitem_alias")
def _basic_view(op, args, flags, params, size):
    return call(op, args, ((_FULL,) + tuple(params[0]),))


def batched_indices(indices, level):
    """Advanced indices for a value (a full slice over the batch dim first), or None when
    that would move dims: indices batched at ``level``, or not next to each other."""
    from ember._tensor import Tensor
    from ember.func._batched import is_batched_at
    from ember.ops.indexing import BatchIndices
    used = [i for i, k in enumerate(indices) if k is not None]
    if any(is_batched_at(k, level) for k in indices) or \
            used and used[-1] - used[0] + 1 != len(used):
        return None
    if any(isinstance(k, Tensor) and k.dtype.is_floating_point for k in indices):
        return None                     # let the op raise its own error, unbatched
    return BatchIndices((None,) + tuple(indices))


@rule("_slice_backward")
def _slice_backward(op, args, flags, params, size):
    shape, key = params
    return call(op, args, ((size,) + tuple(shape), (_FULL,) + tuple(key)))


@rule("_pad_backward")
def _pad_backward(op, args, flags, params, size):
    # every mode pads the trailing dims only: the batch dim is one more leading dim (PyTorch
    # batches the reflect/replicate backwards too, without its fallback's warning)
    shape, pad, mode = params[:3]
    return call(op, [args[0]], ((size,) + tuple(shape), pad, mode) + tuple(params[3:]))


_BOOL_MASK = ("vmap: We do not support batching operators that can support dynamic shape. "
              "Attempting to batch over indexing with a boolean mask.")


@rule("_index")
def _advanced_index(op, args, flags, params, size):
    from ember._dtype import bool_, uint8
    from ember.func._batched import BatchedTensor
    if any(type(k) is BatchedTensor and k.dtype in (bool_, uint8) for k in params[0]):
        raise RuntimeError(_BOOL_MASK)
    indices = batched_indices(params[0], handled_level())
    if indices is None:
        return NotImplemented
    return call(op, args, (indices,))


_ATEN = {"unique": "_unique2"}         # PyTorch's kernel names, where they differ


@rule("nonzero", "unique", "unique_consecutive")
def _dynamic_shape(op, args, flags, params, size):
    """Ops whose output shape depends on the values: each element's may differ (argwhere
    takes the loop, which stacks equal shapes, as PyTorch's fallback does)."""
    raise RuntimeError(f"vmap: We do not support batching operators that can output dynamic "
                       f"shape. Attempted to vmap over aten::{_ATEN.get(op.name, op.name)}. "
                       f"Please file an issue at "
                       f"https://github.com/pytorch/pytorch/issues if you need this feature.")


def _no_fallback(aten_name):
    return RuntimeError(f"Batching rule not implemented for aten::{aten_name}. We could not "
                        f"generate a fallback.")


@rule("histogramdd")
def _histogramdd(op, args, flags, params, size):
    """Refused as PyTorch's fallback refuses it (its bin edges are a list of outputs),
    naming the overload the bins select."""
    bins = params[0]
    if getattr(bins, "ndim", 1) == 0:
        bins.item()                     # batched bins raise as PyTorch's .item() does
    overload = ".int_bins" if isinstance(bins, int) or getattr(bins, "ndim", 1) == 0 else \
        ".TensorList_bins" if any(isinstance(b, ember.Tensor) for b in bins) else ""
    raise _no_fallback(f"histogramdd{overload}")


@rule("where")
def _where(op, args, flags, params, size):
    if args[1] is None and args[2] is None:        # where(condition) is nonzero(as_tuple=True)
        return _dynamic_shape(op, args, flags, params, size)
    return _elementwise(op, args, flags, params, size)


_MASK = ("vmap: Attempted to vmap over `mask` in torch.masked_select(self, mask) We cannot "
         "support this because for each batch this would return a differently shaped Tensor. "
         "Please file an issue at https://github.com/pytorch/pytorch/issues if you need this "
         "feature.")


@rule("masked_select")
def _masked_select(op, args, flags, params, size):
    """One mask for the whole batch: every element selects the same number of values."""
    x, mask = args
    if flags[1]:
        raise RuntimeError(_MASK)
    shape = ember.broadcast_shapes(tuple(x.shape[1:]), tuple(mask.shape))
    x = x.reshape((size,) + (1,) * (len(shape) - x.ndim + 1) + tuple(x.shape[1:]))
    return x.expand((size,) + shape)[:, mask.expand(shape)]


@rule("nn.functional.one_hot")
def _one_hot(op, args, flags, params, size):
    if params[0] <= 0:                  # the number of classes would depend on the values
        raise RuntimeError("When vmap-ing torch.nn.functional.one_hot, please provide an "
                           "explicit positive num_classes argument.")
    return call(op, args, params)


# a per-example value takes PyTorch's loop, by the overload for a tensor value
FALLBACK_NAMES["masked_fill"] = lambda values, params, level: "aten::masked_fill.Tensor"


@rule("masked_fill")
def _masked_fill(op, args, flags, params, size):
    x, mask, value = args
    if flags[2]:
        return NotImplemented
    if not flags[0]:
        x = expand_unbatched(x, size)
    x, mask = align([x, mask], [True, flags[1]], size)
    return call(op, [x, mask, value], params)


@rule("embedding")
def _embedding(op, args, flags, params, size):
    w, indices = args
    if not flags[0]:                        # batched indices only: more leading dims
        return call(op, [w, indices], params)
    padding_idx, rest = params[0], tuple(params[1:])
    rows = w.shape[1]
    if not flags[1]:
        indices = expand_unbatched(indices, size)
    offsets = (ember.arange(size, device=indices.device) * rows).reshape(
        (size,) + (1,) * (indices.ndim - 1))
    out = call(op, [w.reshape((size * rows,) + tuple(w.shape[2:])), indices + offsets],
               (-1,) + rest)
    if padding_idx >= 0:        # each element's padding row: its value, but no gradient
        out = ember.where((indices == padding_idx).unsqueeze(-1), out.detach(), out)
    return out


@rule("_embedding_backward")
def _embedding_backward(op, args, flags, params, size):
    grad, indices = args
    num_weights, padding_idx, scale_grad_by_freq = params
    if not flags[0]:
        return NotImplemented
    if not flags[1]:
        indices = expand_unbatched(indices, size)
    offsets = (ember.arange(size, device=indices.device) * num_weights).reshape(
        (size,) + (1,) * (indices.ndim - 1))
    out = call(op, [grad, indices + offsets], (size * num_weights, -1, scale_grad_by_freq))
    out = out.reshape(size, num_weights, -1)
    if padding_idx >= 0:
        keep = ember.ones(num_weights, 1, dtype=out.dtype, device=out.device)
        keep[padding_idx] = 0
        out = out * keep
    return out


# ops whose leading dims are batch dims already: the value goes in as it is
_LEADING = ("tril", "triu", "linalg.inv", "inverse", "linalg.det", "det", "linalg.slogdet",
            "slogdet", "logdet", "linalg.matrix_exp", "matrix_exp", "linalg.matrix_power",
            "matrix_power", "linalg.cholesky", "cholesky", "linalg.cholesky_ex", "linalg.qr",
            "linalg.eigh", "linalg.eigvalsh", "linalg.svd", "linalg.svdvals", "svd", "linalg.pinv",
            "pinverse", "linalg.inv_ex", "linalg.eig", "linalg.eigvals", "linalg.lu_factor",
            "linalg.lu_factor_ex", "constant_pad_nd", "view_as_real",
            "view_as_complex", "pixel_shuffle", "pixel_unshuffle", "linalg.matrix_rank",
            "_along_dims", "_plane_gather", "_plane_scatter_add", "_max_pool_backward")
# ops of two operands whose leading dims broadcast: a lower-rank operand gets 1s after the batch
_BROADCAST_LEADING = ("linalg.solve", "linalg.solve_ex", "linalg.solve_triangular", "cdist",
                      "triangular_solve")


@rule(*_LEADING)
def _leading(op, args, flags, params, size):
    if any(isinstance(p, ember.Tensor) and (type(p) is not ember.Tensor or p.ndim)
           for p in params):
        return NotImplemented           # a tensor tolerance (pinv's rtol) broadcasts per element
    args = [expand_unbatched(a, size) if not f and hasattr(a, "ndim") else a
            for a, f in zip(args, flags)]
    return call(op, args, params)


@rule(*_BROADCAST_LEADING)
def _broadcast_leading(op, args, flags, params, size):
    a, b = [x if f else expand_unbatched(x, size) for x, f in zip(args[:2], flags[:2])]
    vector = op.name in ("linalg.solve", "linalg.solve_ex") and (
        b.ndim == 2 or (b.ndim == a.ndim - 1 and b.shape[1:] == a.shape[1:-1]))
    if vector:                          # solve(A, b) with a vector b: b as a one-column matrix
        b = b.unsqueeze(-1)
    rank = max(a.ndim, b.ndim)
    a, b = (x.reshape((size,) + (1,) * (rank - x.ndim) + tuple(x.shape[1:])) for x in (a, b))
    out = call(op, [a, b] + list(args[2:]), params)
    if not vector:
        return out
    if isinstance(out, tuple):          # solve_ex: (result, info)
        return (out[0].squeeze(-1),) + tuple(out[1:])
    return out.squeeze(-1)


@rule("linalg.matrix_norm", "linalg.norm")
def _matrix_norm(op, args, flags, params, size):
    from ember.func._batching.reductions import shift_dim
    ord_, dim, keepdim, dtype = params
    ndim = args[0].ndim - 1
    if dim is None:
        if op.name == "linalg.norm" and ndim not in (1, 2):
            return NotImplemented
        dim = tuple(range(ndim)) if op.name == "linalg.norm" else (-2, -1)
    return call(op, args, (ord_, shift_dim(dim, ndim), keepdim, dtype))


@rule("_index_grad")
def _index_grad(op, args, flags, params, size):
    from ember.func._batching.reductions import shift_dim
    (g, index), (dim, shape) = args, params
    g, index = [a if f else expand_unbatched(a, size) for a, f in zip(args, flags)]
    return call(op, [g, index], (shift_dim(dim, len(shape)), (size,) + tuple(shape)))


@rule("_embedding_backward")
def _embedding_backward(op, args, flags, params, size):
    g, indices = args
    if flags[1]:
        return NotImplemented
    d = g.shape[-1]
    folded = g.movedim(0, -2).reshape(tuple(g.shape[1:-1]) + (size * d,))
    out = call(op, [folded, indices], params)
    return out.reshape(out.shape[0], size, d).movedim(1, 0)


def _region_ndim(x_ndim, indices):
    """The rank of ``x[indices]`` for integer index tensors and masks next to each other, else
    None. A mask stands for one index per dim it covers, each of one (value-shaped) dim."""
    import numpy as np
    from ember._dtype import bool_, uint8
    consumed, shapes = 0, []
    for k in (k for k in indices if k is not None):
        dtype = getattr(k, "dtype", None)
        if dtype is bool_ or dtype is uint8:
            consumed += k.ndim
            shapes.append((1,))
        elif dtype is None or not dtype.is_signed or dtype.is_floating_point:
            return None
        else:
            consumed += 1
            shapes.append(tuple(k.shape))
    return x_ndim - consumed + len(np.broadcast_shapes(*shapes))


@rule("index_put")
def _index_put(op, args, flags, params, size):
    (x, values), (fx, fv) = args, flags
    indices, accumulate = params
    batched = batched_indices(indices, handled_level())
    region = _region_ndim(x.ndim - fx, indices)
    if batched is None or region is None:
        return NotImplemented
    if not fx:
        x = expand_unbatched(x, size)
    if fv and values.ndim - 1 < region:
        values = values.reshape((size,) + (1,) * (region - values.ndim + 1) +
                                tuple(values.shape[1:]))
    return call(op, [x, values], (batched, accumulate))


@rule("index_add", "index_copy", "index_fill", "index_reduce")
def _index_along_dim(op, args, flags, params, size):
    """index_add/index_copy/index_fill/index_reduce with one index for the whole batch: shift
    ``dim``."""
    from ember.func._batching.reductions import shift_dim
    (x, index, source), (fx, fi, fs) = args, flags
    ndim = x.ndim - fx
    if fi or ndim == 0 or (fs and op.name == "index_fill") or _reduce_kernel_error(op, x):
        return NotImplemented           # a per-example index or fill value: the loop
    x = x if fx else expand_unbatched(x, size)
    if isinstance(source, ember.Tensor) and op.name != "index_fill":
        if source.ndim - fs != ndim:
            return NotImplemented       # a 0-dim source (1-D input), or the op's own error
        source = source if fs else expand_unbatched(source, size)
    params = (shift_dim(params[0], ndim),) + tuple(params[1:])
    return call(op, [x, index, source], params)


def _reduce_kernel_error(op, x):
    """Whether index_reduce's kernel may refuse x's dtype (for vectors, for the loop to say)."""
    return op.name == "index_reduce" and (x.dtype.is_complex or x.dtype is ember.bool)


@rule("as_strided")
def _as_strided(op, args, flags, params, size):
    # PyTorch's rule: each example's view over its own memory, ``storage_offset`` and strides
    # counted from the physical tensor's (the batch dim keeps its stride), and refused where an
    # example's view would reach memory outside that example
    x = args[0]
    sizes, strides, offset = tuple(params[0]), tuple(params[1]), params[2]
    lo = x.storage_offset()
    offset = lo if offset is None else offset
    hi = lo + sum((n - 1) * s for n, s in zip(x.shape[1:], x.stride()[1:])) + 1
    top = offset + sum((n - 1) * s for n, s in zip(sizes, strides)) + 1
    if math.prod(sizes) and (not math.prod(x.shape[1:]) or offset < lo or top > hi):
        call = f"result = tensor.as_strided({list(sizes)}, {list(strides)}, {offset})"
        reach = ("`tensor` has no storage but the passed-in (size, stride, storage_offset) "
                 "imply a result with some storage" if not math.prod(x.shape[1:]) else
                 f"`result` can access some memory in range [{offset}, {top}], but `tensor` "
                 f"can only access some memory in range [{lo}, {hi}]")
        raise RuntimeError(f"{call} can access memory outside of `tensor`. {reach}. This is "
                           f"not supported inside of vmap, please try to rewrite the "
                           f"`as_strided` call as a sequence of PyTorch view operations")
    return x.as_strided((size,) + sizes, (x.stride(0),) + strides, offset)
