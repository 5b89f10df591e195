"""Embeddings: embedding (row lookup) with its scatter-add backward, the functional forms
F.embedding (padding_idx, max_norm) and F.embedding_bag (sum/mean/max over bags), and one_hot.

The backward sums gradient rows into the weight rows their indices name. NumPy's ``add.at``
is fast for a few rows; for many, one sparse (weight rows x positions) matrix product is
several times faster (measured: 1024 positions x 128 features, 80 us against 1.4 ms).
"""

import warnings

import numpy as np

import ember
from ember import _dtype as D
from ember._warn import user_level
from ember.autograd._forward_traces import PULLING
from ember.autograd.forward_ad import unpack_dual
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import no_grad
from ember.backend import combine_at
from ember.ops._along import check_range
from ember.ops._registry import op, rename_node
from ember.ops._scalars import int_arg
from ember.ops.underivable import forward_ad_active, kernel_input, refuse_forward_ad

__all__ = ["embedding", "one_hot"]

_SPARSE_FROM = 256                      # positions from which the sparse product wins


def _check_indices(indices, name, position=1):
    if indices.dtype not in (np.int64, np.int32):
        t = D.FROM_NUMPY[indices.dtype]._legacy
        raise RuntimeError(f"Expected tensor for argument #{position} 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got ember.{t} instead "
                           f"(while checking arguments for {name})")


@op("embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False)",
    inputs=2, method=False)
def embedding(xp, w, indices, padding_idx, scale_grad_by_freq, sparse):
    """The rows of ``weight`` named by ``indices`` (``torch.embedding``'s argument order)."""
    _check_indices(indices, "embedding")
    if w.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if not w.shape[0] and indices.size:     # PyTorch selects the rows with index_select
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    check_range(indices, 0, w.shape[0], lambda bad: IndexError("index out of range in self"))
    return w.take(indices, axis=0)


embedding.nondifferentiable("indices")
embedding.refuse_complex_grad()
# the gradient reads the indices and the weight's shape only: max_norm's in-place renorm of the
# weight between two lookups leaves the first one differentiable, as in PyTorch
embedding.reads_inputs((), (0,))


@embedding.derivative
def _(grad, w, indices, padding_idx, scale_grad_by_freq, sparse):
    if PULLING.depth:
        # forward-mode AD transposes this backward (its first pass, PULLING): PyTorch's
        # tangent is the lookup of the weight's tangent, dense, whatever padding_idx,
        # scale_grad_by_freq and sparse say (ember's autograd runs no backward from a sparse
        # tensor besides)
        return _embedding_backward(grad, indices, w.shape[0], -1, False), None
    if sparse:
        return _sparse_grad(grad, indices, w.shape, padding_idx, scale_grad_by_freq), None
    return _embedding_backward(grad, indices, w.shape[0], padding_idx, scale_grad_by_freq), None


def _sparse_grad(grad, indices, shape, padding_idx, scale_grad_by_freq):
    """The weight's gradient as PyTorch gives it for ``sparse=True``: a COO tensor holding one
    row of ``grad`` per index (uncoalesced), the padding index's left out."""
    if scale_grad_by_freq:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse "
                           "gradients")
    flat, rows = indices.reshape(-1), grad.reshape(-1, shape[1])
    if padding_idx >= 0:
        keep = flat != padding_idx
        flat, rows = flat[keep], rows[keep]
    return ember.sparse_coo_tensor(flat.unsqueeze(0), rows, shape, check_invariants=False)


def _row_scale(xp, flat, n, padding_idx, scale_grad_by_freq, dtype):
    """Per-row factors of the backward: 1/count (scale_grad_by_freq), 0 at padding_idx."""
    if not scale_grad_by_freq and padding_idx < 0:
        return None
    scale = xp.ones(n, dtype)
    if scale_grad_by_freq:
        scale /= xp.maximum(xp.bincount(flat, minlength=n), 1)
    if padding_idx >= 0:
        scale[padding_idx] = 0
    return scale


@op("_embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)",
    inputs=2, method=False, grad_fn_name="EmbeddingDenseBackwardBackward0")
def _embedding_backward(xp, grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """The gradient of the weight of ``embedding``: rows of ``grad`` summed per index."""
    d = grad.shape[-1]
    g2 = grad.reshape(-1, d)
    flat = indices.reshape(-1).astype(np.intp, copy=False)
    if xp is np and flat.size >= _SPARSE_FROM:
        import scipy.sparse
        pick = scipy.sparse.csc_matrix(
            (np.ones(flat.size, g2.dtype), flat, np.arange(flat.size + 1)),
            shape=(num_weights, flat.size))
        out = np.asarray(pick @ g2)
    else:
        out = xp.zeros((num_weights, d), grad.dtype)
        combine_at(xp, np.add, out, flat, g2)
    scale = _row_scale(xp, flat, num_weights, padding_idx, scale_grad_by_freq, grad.dtype)
    if scale is not None:
        out *= scale[:, None]
    if padding_idx >= 0:
        out[padding_idx] = 0        # +0.0, as PyTorch: a negative gradient times 0 gives -0.0
    return out


_embedding_backward.nondifferentiable("indices")       # PyTorch's embedding_dense_backward


@_embedding_backward.derivative
def _(gg, grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    if padding_idx >= 0 or scale_grad_by_freq:
        flat = indices.reshape(-1)
        scale = ember.ones(num_weights, dtype=gg.dtype, device=gg.device)
        if scale_grad_by_freq:
            scale = scale / flat.bincount(minlength=num_weights).clamp_min(1)
        if padding_idx >= 0:
            scale[padding_idx] = 0
        gg = gg * scale.unsqueeze(-1)
    return embedding(gg, indices), None


def _renorm_(weight, indices, max_norm, norm_type):
    """Scale the rows ``indices`` name down to norm ``max_norm``, in place (as PyTorch)."""
    with no_grad():
        rows = indices.reshape(-1).unique()
        _check_renorm_rows(rows, weight.shape)
        norms = ember.linalg.vector_norm(weight[rows], norm_type, 1)
        scale = ember.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[rows] = weight[rows] * scale.unsqueeze(1).to(weight.dtype)


def _check_renorm_rows(rows, shape):
    """PyTorch's error for the first of the sorted ``rows`` outside ``weight`` (it selects
    each row in turn)."""
    n = shape[0]
    bad = rows[(rows >= n) | (rows < -n)]
    if bad.numel():
        raise IndexError(f"select(): index {int(bad[0])} out of range for tensor of size "
                         f"[{', '.join(map(str, shape))}] at dimension 0")


def _padding_index(padding_idx, n):
    if padding_idx is None:
        return -1
    if not -n <= padding_idx < n:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx + n if padding_idx < 0 else padding_idx


def _bag_padding_index(padding_idx, n):
    """embedding_bag's padding index in [0, n), or -1; PyTorch's error when out of range."""
    if padding_idx is not None and not -n <= padding_idx < n:
        raise RuntimeError(f"padding_idx must be within the number of embeddings, -{n} "
                           f"through {n - 1}, but got {padding_idx}")
    return _padding_index(padding_idx, n)


def functional_embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
                         scale_grad_by_freq=False, sparse=False):
    """Look up the rows of ``weight`` named by the indices in ``input``."""
    # (the op checks the weight's rank: a 0-dim weight has no shape[0] to read here)
    padding_idx = -1 if padding_idx is None else _padding_index(padding_idx, weight.shape[0])
    if max_norm is not None:    # (PyTorch's embedding_renorm_ checks them first)
        _check_indices(input._data, "embedding_renorm_", 2)
        # on a detached alias, as PyTorch: the write bumps the weight's version yet carries
        # no tangent (forward AD and ember's forward-mode transforms see the plain lookup)
        _renorm_(weight.detach(), input, max_norm, norm_type)
    return embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)


# --- embedding_bag ----------------------------------------------------------------------------

def _bag_ids(counts, device):
    """The bag of each position: bag i repeated counts[i] times."""
    ids = np.repeat(np.arange(len(counts), dtype=np.int64), np.asarray(counts, dtype=np.int64))
    return ember.tensor(ids, dtype=ember.int64, device=device)


def _check_bag_input(input, offsets):
    """PyTorch's checks of the input's and offsets' ranks (before the mode's)."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated "
                             f"is a mini-batch of fixed length sequences. However, found "
                             f"offsets of type {type(offsets)}")
        return
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")


def _bags(input, offsets, per_sample_weights, include_last_offset):
    """Flat indices, flat weights, the bag of each position and the number of bags (the ranks
    checked by ``_check_bag_input``)."""
    if input.ndim == 2:
        b, length = input.shape
        bag = _bag_ids(np.full(b, length), input.device)
        psw = None if per_sample_weights is None else per_sample_weights.reshape(-1)
        return input.reshape(-1), psw, bag, b
    _check_indices(offsets._data, "embedding_bag")
    n = input.shape[0]
    starts = offsets.tolist()
    if starts and starts[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the "
                           f"mini-batch has to start from position 0. However, got "
                           f"{starts[0]}")
    if starts and starts[-1] > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got "
                           f"offsets[-1] of {starts[-1]}")
    bounds = starts if include_last_offset else starts + [n]
    b = max(len(bounds) - 1, 0)
    counts = [max(min(hi, n) - lo, 0) for lo, hi in zip(bounds, bounds[1:])]
    bag = _bag_ids(counts, input.device)
    return input[:bag.shape[0]], per_sample_weights, bag, b


def _check_weight(weight):
    dtype = weight.dtype
    if dtype not in (ember.float16, ember.bfloat16, ember.float32, ember.float64):
        name = f"CPU{dtype._torch_name}Type" if dtype is ember.bool or dtype.is_complex \
            else f"ember.{dtype._legacy}"
        raise RuntimeError(f"Expected tensor for argument #1 'weight' to have one of the "
                           f"following scalar types: Half, BFloat16, Float, Double; but got "
                           f"{name} instead (while checking arguments for embedding_bag)")


def _check_same_type(weight, per_sample_weights):
    if per_sample_weights.dtype is not weight.dtype:
        raise RuntimeError(f"Expected tensor for argument #1 'weight' to have the same type as "
                           f"tensor for argument #1 'per_sample_weights'; but type "
                           f"ember.{weight.dtype._legacy} does not equal "
                           f"ember.{per_sample_weights.dtype._legacy} (while checking arguments "
                           f"for embedding_bag)")


def _bag_argmax(rows, bag, b):
    """For each bag and feature, the position of the row PyTorch's max mode takes (and sends
    the gradient to): it scans the bag in order and keeps a later value only when it is
    strictly greater, so ties keep the first, NaNs are passed over unless the first value is
    one, and an empty bag gets ``len(rows)``."""
    n, d = rows.shape
    with no_grad():
        each = bag.unsqueeze(1).expand(-1, d)
        nan = rows.isnan()
        top = rows.new_zeros((b, d)).scatter_reduce(
            0, each, rows.masked_fill(nan, float("-inf")), "amax", include_self=False)
        position = ember.arange(n, device=rows.device)
        none = ember.full((b, d), n, dtype=ember.int64, device=rows.device)
        hit = ember.where(rows == top[bag], position.unsqueeze(1), n)
        first = none.scatter_reduce(0, each, hit, "amin")
        start = none[:, 0].scatter_reduce(0, bag, position, "amin")
        lead_nan = ember.cat([nan, nan.new_zeros((1, d))])[start]
        return ember.where(lead_nan, start.unsqueeze(1), first)


def _check_mode(mode, scale_grad_by_freq, sparse):
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")


def _check_bag_range(flat, n, mode, fast):
    """PyTorch's error for a bag index outside ``[0, n)``: its fast sum/mean kernel (float32,
    float16, bfloat16 rows, no padding index) names the position, the others word it otherwise."""
    if flat.device.type == "meta":
        return
    flat = flat._data

    def error(bad):
        if mode == "max" or not fast:
            return RuntimeError(f"embedding_bag: Expected idx >= 0 && idx < num_embeddings but "
                                f"found idx to be {bad}")
        at = int((flat == bad).argmax())      # the first entry out of range holds ``bad``
        return RuntimeError(f"Index {at} of input takes value {bad} which is not in the valid "
                            f"range [0, {n})")
    check_range(flat, 0, n, error)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows."""
    if weight.dtype is ember.int64 and input.is_floating_point():
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage "
                      "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
                      "`embedding_bag(input, weight, ...)`.", stacklevel=user_level(2))
        weight, input = input, weight
    if per_sample_weights is not None and per_sample_weights.shape != input.shape:
        raise ValueError(f"embedding_bag: If per_sample_weights "
                         f"(ember.Size({list(per_sample_weights.shape)})) is not None, then "
                         f"it must have the same shape as the input "
                         f"(ember.Size({list(input.shape)}))")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.ndim}")
    _check_indices(input._data, *(("embedding_bag",) if max_norm is None else
                                  ("embedding_renorm_", 2)))
    _check_bag_input(input, offsets)
    _check_mode(mode, scale_grad_by_freq, sparse)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
            f"on GitHub.")
    flat, psw, bag, b = _bags(input, offsets, per_sample_weights, include_last_offset)
    _check_weight(weight)
    if per_sample_weights is not None:
        _check_same_type(weight, per_sample_weights)
    pad = _bag_padding_index(padding_idx, weight.shape[0])
    if max_norm is not None:  # PyTorch renorms the rows before its range check
        _check_renorm_rows(flat.unique(), weight.shape)
    _check_bag_range(flat, weight.shape[0], mode, padding_idx is None and weight.dtype in (
        ember.float32, ember.float16, ember.bfloat16))
    if forward_ad_active():     # (PyTorch's forward-only kernel: a weight without gradient)
        dual = unpack_dual(weight).tangent is not None
        # (the graph's fields: a forward-mode transform's weight reports no requires_grad)
        refuse_forward_ad("_embedding_bag" if weight._requires_grad or
                          weight._grad_fn is not None or dual
                          else "_embedding_bag_forward_only", weight, per_sample_weights)
    if max_norm is not None:    # (in place: before the weight is aliased below)
        _renorm_(weight, flat, max_norm, norm_type)
    if _GRAD.grad_enabled:      # PyTorch's backward kernels have no derivative
        # (per_sample_weights' alias first: its gradient is then computed after the weight's,
        # and a second backward reaches its refusal first, as PyTorch's; neither backward
        # kernel takes the tensor it differentiates for: the other one, which it does take,
        # reaches it through the incoming gradient)
        if psw is not None and psw.requires_grad:
            psw = kernel_input(psw, "_embedding_bag",
                               "_embedding_bag_per_sample_weights_backward", read=False)
        if weight.requires_grad:    # (PyTorch keeps it for per_sample_weights' gradient)
            weight = kernel_input(weight, "_embedding_bag", "_embedding_bag_backward",
                                  psw is not None and psw.requires_grad, read=False)
    # (the padding index goes to the lookup too, so that a sparse gradient leaves it out)
    rows = functional_embedding(flat, weight, padding_idx, None, norm_type, scale_grad_by_freq,
                                sparse)
    d = weight.shape[1]
    if pad >= 0:
        keep = flat != pad
        rows, bag = rows[keep], bag[keep]
        if psw is not None:
            psw = psw[keep]
    if mode == "max":
        picked = _bag_argmax(rows.detach(), bag, b)
        out = ember.cat([rows, rows.new_zeros((1, d))]).gather(0, picked)
        return rename_node(out, "EmbeddingBagBackward0")
    out = weight.new_zeros((b, d))
    if psw is not None:
        rows = rows * psw.unsqueeze(1)
    out = out.index_add(0, bag, rows)
    if mode == "mean":
        # (index_add, not bincount: a result shape known without reading ``bag``, so that
        # the meta device can run it; counted as integers: bfloat16 stops counting at 256)
        counts = bag.new_zeros(b).index_add(0, bag, bag.new_ones(bag.shape)).clamp_min(1)
        out = out / counts.unsqueeze(1)
    return rename_node(out, "EmbeddingBagBackward0")


# --- torch.embedding_bag: the native form, with the kernel's bookkeeping outputs ---------------

_BAG_MODES = ("sum", "mean", "max")


def _check_native_bag_args(offsets, mode, per_sample_weights):
    if not isinstance(offsets, ember.Tensor):
        raise TypeError(f"embedding_bag(): argument 'offsets' (position 3) must be Tensor, not "
                        f"{type(offsets).__name__}")
    if offsets.ndim != 1:
        raise RuntimeError(f"offsets has to be a 1D Tensor, but got Tensor of dimension "
                           f"{offsets.ndim}")
    if type(mode) is not int:
        raise TypeError(f"embedding_bag(): argument 'mode' must be int, not "
                        f"{type(mode).__name__}")
    if mode not in (0, 1, 2):
        raise RuntimeError("`mode` must be sum, mean, or max.")
    if per_sample_weights is not None and mode != 0:
        raise RuntimeError("embedding_bag: per_sample_weights only supported with mode='sum'")


def _bag_bookkeeping(weight, out, indices, offsets, mode, include_last_offset, padding_idx,
                     sum_slots):
    """PyTorch's ``offset2bag``, ``bag_size`` and ``max_indices``: each position's bag (empty
    for sum mode without padding), each bag's count of non-padding indices (zeros for sum
    mode), and for max mode the weight row each maximum came from (for mean mode, the
    counts again; for sum mode, ``sum_slots`` zeros)."""
    with no_grad():
        n, b = indices.shape[0], out.shape[0]
        starts = offsets[:-1] if include_last_offset else offsets
        bumps = indices.new_zeros(n + 1).index_add(0, starts[1:], indices.new_ones(
            starts[1:].shape))
        offset2bag = bumps[:n].cumsum(0, dtype=indices.dtype)    # (int32 indices: int32)
        if mode == 0:
            empty = offset2bag.new_zeros(sum_slots)
            return (offset2bag if padding_idx is not None else offset2bag[:0]), empty, empty
        kept = indices.new_ones(n) if padding_idx is None else (indices != padding_idx).to(
            indices.dtype)
        valid = offset2bag < b      # (positions past the last bag belong to none)
        bag_size = indices.new_zeros(b).index_add(0, offset2bag[valid], kept[valid])
        if mode == 1:
            return offset2bag, bag_size, bag_size.clone()
        return offset2bag, bag_size, _max_rows(weight, indices, offset2bag, b, padding_idx)


def _max_rows(weight, indices, offset2bag, b, padding_idx):
    """For each bag and feature, the index of the weight row whose value max mode took (0
    when the bag has no non-padding index)."""
    valid = offset2bag < b
    if padding_idx is not None:
        valid = valid & (indices != padding_idx)
    bag, ids = offset2bag[valid], indices[valid]
    picked = _bag_argmax(weight.detach()[ids], bag, b)     # (an empty bag gets len(ids))
    return ember.cat([ids, ids.new_zeros(1)])[picked]


def native_embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0,
                         sparse=False, per_sample_weights=None, include_last_offset=False,
                         padding_idx=None):
    """``torch.embedding_bag``: ``F.embedding_bag`` with ``mode`` as 0 (sum), 1 (mean) or
    2 (max), returning (output, offset2bag, bag_size, max_indices)."""
    _check_native_bag_args(offsets, mode, per_sample_weights)
    flat = indices.reshape(-1)
    out = embedding_bag(flat, weight, offsets, None, 2, scale_grad_by_freq, _BAG_MODES[mode],
                        sparse, per_sample_weights, include_last_offset, padding_idx)
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    # the bookkeeping's integers take the indices' and offsets' common dtype; sum mode's
    # zeros have one slot per offset when nothing will need them for a gradient
    flat = flat.to(ember.promote_types(flat.dtype, offsets.dtype))
    sum_slots = out.shape[0]
    if include_last_offset and not (weight.requires_grad or (
            per_sample_weights is not None and per_sample_weights.requires_grad)):
        sum_slots = offsets.shape[0]
    return (out,) + _bag_bookkeeping(weight, out, flat, offsets, mode, include_last_offset,
                                     padding_idx, sum_slots)


# --- one_hot ----------------------------------------------------------------------------------

@op("one_hot(input, num_classes=-1)", namespace="nn.functional", differentiable=False)
def one_hot(xp, x, num_classes):
    """Encode integer class indices as rows of 0s and 1s (int64), along a new last dim."""
    num_classes = int_arg(num_classes, "one_hot", "num_classes", 2)
    if x.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if not x.size and num_classes <= 0:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    if num_classes == -1:
        num_classes = int(x.max()) + 1
    if x.size:
        if x.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if x.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return (x[..., None] == xp.arange(num_classes)).astype(np.int64)


functional_embedding.__name__ = functional_embedding.__qualname__ = "embedding"

_RENORM_FORWARD_AD = (
    "Trying to use forward AD with embedding_renorm_ that does not support it because it has "
    "not been implemented yet.\nPlease file an issue to PyTorch at https://github.com/pytorch/"
    "pytorch/issues/new?template=feature-request.yml so that we can prioritize its "
    "implementation.")


def embedding_renorm_(input, indices, max_norm, norm_type):
    """Scale the rows ``indices`` of ``input`` down to norm ``max_norm``, in place; returns
    ``input`` (``torch.embedding_renorm_``)."""
    # PyTorch's kernel has no derivative: forward AD refuses it, and a recorded call leaves
    # ``input`` a node EmbeddingRenormBackward0 whose backward raises
    if forward_ad_active():
        from ember.autograd._forward_traces import reaches_forward_inputs
        if unpack_dual(input).tangent is not None or reaches_forward_inputs(input):
            raise NotImplementedError(_RENORM_FORWARD_AD)
    holder = None
    if _GRAD.grad_enabled and (input._requires_grad or input._grad_fn is not None):
        from ember.ops._inplace import _check_leaf
        from ember.ops.underivable import _underivable
        if input._view is not None:     # (through a view: its base's CopySlices, as PyTorch's)
            renormed = input.detach().clone()
            _renorm_(renormed, indices, max_norm, norm_type)
            return input.copy_(_underivable([input], renormed._data,
                                            "EmbeddingRenormBackward0", "embedding_renorm"))
        _check_leaf(input)
        holder = _underivable([input], input._data, "EmbeddingRenormBackward0",
                              "embedding_renorm")
    _renorm_(input, indices, max_norm, norm_type)
    if holder is not None:
        input._grad_fn, input._output_nr = holder._grad_fn, 0
    return input


ALIASES = {}
FUNCTIONAL = {"embedding": functional_embedding, "embedding_bag": embedding_bag}
PUBLIC = {"embedding_renorm_": embedding_renorm_, "embedding_bag": native_embedding_bag}
native_embedding_bag.__name__ = native_embedding_bag.__qualname__ = "embedding_bag"
