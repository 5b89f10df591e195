"""Rules for shape ops, subscripts, and ops that already treat leading dims as batch dims."""

from ember.func._batching import rule
from ember.func._batching.elementwise import align
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


@rule("_getitem_select", "_getitem_slice", "_getitem_unsqueeze", "_getitem_alias")
def _basic_view(op, args, flags, params, size):
    return call(op, args, ((_FULL,) + tuple(params[0]),))


@rule("_index")
def _advanced_index(op, args, flags, params, size):
    from ember._tensor import Tensor
    from ember.func._batched import BatchedTensor
    from ember.ops.indexing import SubscriptIndices
    indices = params[0]
    used = [i for i, k in enumerate(indices) if k is not None]
    if any(type(k) is BatchedTensor for k in indices) or \
            used and used[-1] - used[0] + 1 != len(used):
        return NotImplemented           # batched or split indices: NumPy moves dims to front
    if any(isinstance(k, Tensor) and k.dtype.is_floating_point for k in indices):
        return NotImplemented
    return call(op, args, (SubscriptIndices((None,) + tuple(indices)),))


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
    if flags[0]:
        return NotImplemented
    return call(op, args, params)


# ops whose leading dims are batch dims already: the value goes in as it is
_LEADING = ("tril", "triu", "linalg.inv", "inverse", "linalg.det", "det", "linalg.slogdet",
            "slogdet", "logdet", "linalg.matrix_exp", "matrix_exp", "linalg.matrix_power",
            "matrix_power", "linalg.cholesky", "linalg.cholesky_ex", "linalg.qr", "linalg.eigh",
            "linalg.eigvalsh", "linalg.svd", "linalg.svdvals", "svd", "linalg.pinv", "pinverse",
            "linalg.inv_ex", "linalg.eig", "linalg.eigvals", "linalg.lu_factor",
            "linalg.lu_factor_ex", "constant_pad_nd", "nn.functional.one_hot", "view_as_real",
            "view_as_complex", "pixel_shuffle", "pixel_unshuffle", "linalg.solve",
            "linalg.solve_ex", "linalg.solve_triangular", "cdist",
            "linalg.matrix_rank")


@rule(*_LEADING)
def _leading(op, args, flags, params, size):
    args = [expand_unbatched(a, size) if not f and hasattr(a, "ndim") else a
            for a, f in zip(args, flags)]
    return call(op, args, params)


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
