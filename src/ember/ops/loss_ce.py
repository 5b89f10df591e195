"""cross_entropy and nll_loss: class-index and class-probability targets over (C,), (N, C)
or (N, C, d1, ...) inputs, with class weights, ignore_index and label smoothing.

Both losses are ``-sum_c q[n, c] * logp[n, c]`` for a target distribution ``q`` built from
the target (one-hot times the class weight, smoothed, zero where ignored): the derivative
of cross_entropy is then ``softmax * sum_c q - q`` per position, and nll_loss's is ``-q``.
"""

import numpy as np

from ember import _dtype as D
from ember._tensor import _make
from ember.backend import reads_stall, xp_of
from ember.ops._along import check_range
from ember.ops._loss_common import reduction_of
from ember.ops._op_errors import before_grad_checks
from ember.ops._reduce import torch_grad_mode
from ember.ops._registry import OpValueError, op, rename_node
from ember.ops.log_space import LOG_SOFTMAX_DOUBLE, log_softmax, row_max, row_sums, softmax
from ember.ops.loss_ce_low import (cascaded_nll, is_low_probability_case, low_precision_grad,
                                   low_precision_loss, low_precision_probability_grads,
                                   low_precision_probability_loss)
from ember.ops.activations import masked

_LOW = D.HALF_NP
_F32 = np.dtype(np.float32)
_CLASS_TARGETS = {np.dtype(np.int64), np.dtype(np.uint8)}


def _float_input(x, kernel):
    if x.dtype.kind != "f" and x.dtype not in _LOW:
        name = D.FROM_NUMPY[x.dtype]._torch_name
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{name}'")


def _check_weight(w, c, dtype, prefix="", spatial=False):
    """PyTorch's errors for class weights of the wrong size (or, given ``dtype``, dtype);
    ``spatial`` (an input of 3 or more dims) checks only the count, as nll_loss2d does."""
    if w is None:
        return
    if spatial and w.size != c:
        raise RuntimeError("weight tensor should be defined either for all or no classes")
    if not spatial and (w.size != c or w.ndim != 1 and w.size != 0):
        raise RuntimeError(f"{prefix}weight tensor should be defined either for all {c} classes "
                           f"or no classes but got weight tensor of shape: {list(w.shape)}")
    if dtype is not None and w.dtype != dtype:
        raise RuntimeError(f"expected scalar type {D.FROM_NUMPY[dtype]._torch_name} but found "
                           f"{D.FROM_NUMPY[w.dtype]._torch_name}")


def _check_class_target(x, t):
    """PyTorch's errors for a class-index target that does not fit the input."""
    # (PyTorch's composite nll_loss_nd raises these before autograd refuses a weight that
    # requires grad; its kernels raise the others)
    if x.ndim == 0:
        raise before_grad_checks(OpValueError("Expected 1 or more dimensions (got 0)"))
    if x.ndim > 1 and t.ndim == 0 and x.shape[0] == 0:
        # (PyTorch's composite reads the missing batch size of a 0-dim target as 0)
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    if x.ndim > 1 and (t.ndim == 0 or t.shape[0] != x.shape[0]):
        raise before_grad_checks(OpValueError(
            f"Expected input batch_size ({x.shape[0]}) to match target batch_size "
            f"({t.shape[0] if t.ndim else 0})."))
    if x.ndim <= 2 and t.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    # a 4-d input goes straight to nll_loss2d; 3-d and 5-d+ ones are first checked, then
    # reshaped to 4-d for it
    if x.ndim > 2 and x.ndim != 4 and t.shape[1:] != x.shape[2:]:
        raise before_grad_checks(RuntimeError(
            f"Expected target size {list(x.shape[:1] + x.shape[2:])}, got {list(t.shape)}"))
    if x.ndim == 4 and t.ndim != 3:
        raise RuntimeError(f"only batches of spatial targets supported (3D tensors) but got "
                           f"targets of dimension: {t.ndim}")
    if t.dtype not in _CLASS_TARGETS:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                           f"{D.FROM_NUMPY[t.dtype]._torch_name}")
    if x.ndim == 1 and t.ndim == 1 and t.shape[0] != 1:
        raise OpValueError(f"For 1D input, 1D target must have size 1, but got target size: "
                           f"{t.shape[0]}")


def _check_smoothed(x, t, w, label_smoothing, reduction):
    """The errors PyTorch's label-smoothing composite raises after the nll part: its smooth
    term of a (C,) input is a scalar that a (1,) target's loss cannot be written into, and its
    mean gathers the class weights with the target, which refuses a Byte index."""
    if not label_smoothing > 0:
        return
    if x.ndim == 1 and t.ndim == 1:
        raise RuntimeError("output with shape [] doesn't match the broadcast shape [1]")
    if w is not None and reduction == "mean" and t.dtype == np.uint8:
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")


def _class_weight(x, t, w, c, label_smoothing=0.0, reduction="none"):
    """The class weight of a class-index call (after ``_check_class_target``), checked in
    PyTorch's order with what nll_loss2d checks after it, and flattened: for an input of 3 or
    more dims a (C, 1) weight counts as (C,)."""
    _check_weight(w, c, x.dtype, spatial=x.ndim > 2)
    if x.ndim == 4 and t.shape != x.shape[:1] + x.shape[2:]:
        raise RuntimeError(f"size mismatch (got input: {list(x.shape)} , target: "
                           f"{list(t.shape)}")
    # nll_loss2d takes no Byte target (but for an empty input reduced: it returns first)
    if x.ndim > 2 and t.dtype != np.int64 and (x.size or reduction == "none"):
        raise RuntimeError(f"expected scalar type Long but found "
                           f"{D.FROM_NUMPY[t.dtype]._torch_name}")
    if w is None:
        return None
    if label_smoothing > 0 and w.ndim != 1:     # PyTorch's composite fails (the mean's gather)
        if w.shape[0] == 1:
            raise RuntimeError(f"shape '{[1] * x.ndim}' is invalid for input of size {w.size}")
        if reduction == "mean":
            raise RuntimeError("Index tensor must have the same number of dimensions as input "
                               "tensor")
    return w.reshape(-1)


def _batched(x, t):
    """Input as (N, C, *d) and target as (N, *d) (a (C,) input is one sample)."""
    if x.ndim == 1:
        return x.reshape(1, -1), t.reshape(1)
    return x, t


def check_class_range(safe, c):
    """PyTorch's error for a class target outside [0, C) (``safe``: ignored ones zeroed),
    checked as ``check_range`` checks (on a GPU, without waiting for it)."""
    check_range(safe, 0, c, lambda bad: IndexError(f"Target {bad} is out of bounds."))


def _targets(xp, t, w, ignore_index, c, dtype):
    """(safe class index, kept mask, each position's class weight, their total) of a class
    target, whose range is checked (``check_class_range``)."""
    mask = t != ignore_index
    safe = xp.where(mask, t, 0)
    check_class_range(safe, c)
    wt = mask.astype(dtype) if w is None else xp.where(mask, w.astype(dtype, copy=False)[safe], 0)
    return safe, mask, wt, wt.sum()


def _pick(xp, a, safe):
    """``a[n, safe[n], ...]`` for (N, C, *d) ``a`` and (N, *d) ``safe``."""
    if a.ndim == 2:
        return a[xp.arange(a.shape[0]), safe]
    return xp.take_along_axis(a, safe[:, None], axis=1)[:, 0]


def _class_dim_shape(w, ndim):
    return w.reshape((1, -1) + (1,) * (ndim - 2))


def _reduce(loss, denominator, reduction, squeeze):
    # (PyTorch's kernels add a 1-d input's loss, and the sums, to 0: a -0.0 loss gives 0.0)
    if reduction == "none":
        return loss.reshape(()) + 0.0 if squeeze else loss
    total = loss.sum() + 0.0
    if reduction == "sum":
        return total
    # a zero total weight makes the mean NaN (0/0), also where smoothing terms are not 0
    xp = xp_of(loss)
    if reads_stall(xp):             # branch-free: reading the total would wait for the GPU
        return xp.where(denominator == 0, np.nan, total / denominator).astype(total.dtype)
    return total.dtype.type(np.nan) if denominator == 0 else total / denominator


def _is_probability_target(x, t):
    return x.shape == t.shape


# --- cross_entropy ----------------------------------------------------------------------------

@op("cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, "
    "reduce=None, reduction='mean', label_smoothing=0.0)", inputs=3, method=False,
    namespace="nn.functional")
def cross_entropy(xp, x, t, w, size_average, ignore_index, reduce, reduction, label_smoothing,
                  *, keep=None):
    """The cross entropy between the softmax of ``input`` logits and ``target``."""
    reduction = reduction_of(size_average, reduce, reduction, error=OpValueError)
    # (its composite's checks and log_softmax's come before nll_loss refuses a weight that
    # requires grad)
    if not label_smoothing <= 1.0:          # PyTorch accepts a negative smoothing
        raise before_grad_checks(RuntimeError(
            f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"))
    if _is_probability_target(x, t):
        _probability_dtype(t)
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        return _ce_probabilities(xp, x, t, w, reduction, label_smoothing)
    try:
        _float_input(x, "log_softmax_lastdim_kernel_impl" if x.ndim <= 2 else "log_softmax")
    except NotImplementedError as e:
        raise before_grad_checks(e) from None
    _check_class_target(x, t)
    dtype = x.dtype
    xb, tb = _batched(x.astype(_F32) if dtype in _LOW else x, t)
    c = xb.shape[1]
    w = _class_weight(x, t, w, c, label_smoothing, reduction)
    if dtype in _LOW:
        loss = low_precision_loss(xp, x, t, w, ignore_index, reduction, label_smoothing,
                                  nll_loss.forward)
        _check_smoothed(x, t, w, label_smoothing, reduction)
        return loss
    safe, mask, wt, total = _targets(xp, tb, w, ignore_index, c, xb.dtype)
    _check_smoothed(x, t, w, label_smoothing, reduction)
    # the log-probability of the target class, (x - shift) - log_sums: near 0 (a likely
    # class) the terms nearly cancel, and the shift may be the global max, far above the
    # row's own; so per row, float32 logits take it in float64
    shift, log_sums, e = _log_normalizer(xp, xb, wide=True)
    if keep is not None and e is not None and xp is np:     # see _read
        keep.append(e.reshape(x.shape))
        keep.append(_total_weight(xp, total, reduction, dtype))
        if label_smoothing > 0:
            keep.extend(_smoothing_saved(xp, x, t, w, ignore_index, reduction))
    loss = (_pick(xp, xb, safe).astype(log_sums.dtype) - shift) - log_sums
    xp.minimum(loss, 0, out=loss)       # a log-probability: rounding must not lift it above 0
    loss *= wt
    if label_smoothing > 0:                         # sum_c w_c * logp_c, logp never formed
        if w is None:
            smooth = (xb - _keep_class_dim(shift)).sum(axis=1) - log_sums * c
        else:
            wc = w.astype(xb.dtype)
            smooth = ((xb - _keep_class_dim(shift)) * _class_dim_shape(wc, xb.ndim)).sum(axis=1) \
                - log_sums * wc.sum()
        smooth = xp.where(mask, smooth, 0)
        loss = (1 - label_smoothing) * loss + (label_smoothing / c) * smooth
    loss = loss.astype(xb.dtype, copy=False)
    # ignored positions give +0 (as PyTorch), not the -0 of negating a zero
    loss = _reduce(xp.where(mask, -loss, 0), total, reduction, x.ndim == 1)
    return loss.astype(dtype) if dtype in _LOW else loss


def _smoothing_saved(xp, x, t, w, ignore_index, reduction):
    """What PyTorch's label-smoothing composite saves besides nll_loss's, in its order (packed
    for saved-tensor hooks only: the derivative reads none of it): the class weights viewed
    along the class dim, the mask of ignored targets, the mean's divisor (the count of the
    targets kept, or the sum of their weights)."""
    ignored = xp.asarray(t == ignore_index)        # (an array for a 0-d target too)
    saved = []
    if w is not None:
        shape = [1] * x.ndim
        shape[1 if x.ndim > 1 else 0] = w.shape[0]
        saved.append(w.reshape(shape))
    saved.append(ignored)
    if reduction == "mean":
        saved.append(xp.asarray((~ignored).sum(), dtype=np.int64) if w is None else
                     xp.asarray(w[t[~ignored]].sum(), dtype=w.dtype))
    return saved


@cross_entropy.named_by
def _(flat, params, out, *, kept=None):      # PyTorch's log_softmax + nll_loss, or its composite
    x, target, smoothing = flat[0], flat[1], params[-1]
    reduction = reduction_of(params[0], params[2], params[3], emit_warning=False)
    if target.is_floating_point():      # (an empty mean: the NaN filled in, negated)
        return "DivBackward1" if reduction == "mean" and x.numel() else "NegBackward0"
    if smoothing > 0:
        return "AddBackward0"
    return _nll_node(x, reduction)


def _nll_node(x, reduction):
    """The node of PyTorch's nll_loss: inputs of 3 or more dims go through nll_loss2d, the
    3-d and 5-d+ ones reshaped to 4-d and, unreduced, viewed back."""
    if x.ndim < 3:
        return "NllLossBackward0"
    return "ViewBackward0" if x.ndim != 4 and reduction == "none" else "NllLoss2DBackward0"


def _exp_rows(xp, x):
    """(``exp(x - shift)``, its sums over dim 1, the shift) for (N, C, *d) ``x``.

    The shift is the global max when every row's sum stays far from underflow (one cheap
    reduction), else each row's max; on a GPU always each row's (checking would wait)."""
    per_row = reads_stall(xp)
    if not per_row:
        shift = x.max()
        e = x - shift
        xp.exp(e, out=e)
        sums = _row_sums(xp, e)
        per_row = not sums.min() >= 1e-30   # also NaN: a row far below the max, or infinities
    if per_row:
        shift = row_max(xp, x, 1)
        e = x - shift
        xp.exp(e, out=e)
        sums = _row_sums(xp, e)
        shift = shift[:, 0]
    return e, sums, shift


def _row_sums(xp, e):
    if e.ndim == 2:
        return row_sums(xp, e)
    return e.sum(axis=1)


def _log_normalizer(xp, x, wide=False):
    """(shift, log of the sums of ``exp(x - shift)``, that exp or None) over dim 1 of
    (N, C, *d) ``x``: the log-softmax is ``(x - shift) - log_sums``; ``wide``: the log in
    float64 (the sums of float32 logits are exact to float32 rounding, their log in float32
    only to that of its magnitude)."""
    if not x.size:
        return 0.0, xp.log(xp.exp(x).sum(axis=1)), None
    e, sums, shift = _exp_rows(xp, x)
    return shift, xp.log(sums.astype(np.float64) if wide else sums), e


def _keep_class_dim(shift):
    return shift[:, None] if getattr(shift, "ndim", 0) else shift


def _probability_dtype(t):
    if t.dtype.kind != "f" and t.dtype not in _LOW:
        raise RuntimeError(f"Expected floating point type for target with class probabilities, "
                           f"got {D.FROM_NUMPY[t.dtype]._torch_name}")


def _ce_probabilities(xp, x, t, w, reduction, label_smoothing):
    _float_input(x, "log_softmax_lastdim_kernel_impl")
    result = D.promote_types(D.FROM_NUMPY[x.dtype], D.FROM_NUMPY[t.dtype])
    if w is not None:                   # the weight takes part in the promotion here
        result = D.promote_types(result, D.FROM_NUMPY[w.dtype])
    result = result.np
    compute = _F32 if result in _LOW else result
    xb, tb = (x.reshape(1, -1), t.reshape(1, -1)) if x.ndim == 1 else (x, t)
    c = xb.shape[1]
    _check_weight(w, c, None, "cross_entropy: ")
    q = tb.astype(compute, copy=False)
    if label_smoothing > 0:
        q = q * (1 - label_smoothing) + label_smoothing / c
    if w is not None:
        q = q * _class_dim_shape(w.astype(compute), xb.ndim)
    if is_low_probability_case(x, t, w):
        return low_precision_probability_loss(xp, x, t, w, reduction, label_smoothing)
    if xb.dtype == compute:
        shift, log_sums, _ = _log_normalizer(xp, xb)
        lsm = (xb - _keep_class_dim(shift)) - log_sums[:, None]
    else:       # PyTorch's log_softmax in the input's dtype, then promoted
        lsm = log_softmax.forward(xp, xb, 1, None).astype(compute)
    # negated after the sums, as PyTorch's composite: an all-zero loss is -0.0 there
    loss = (lsm * q).sum(axis=1)
    loss = -_reduce(loss, loss.size, reduction, x.ndim == 1)
    return loss.astype(result, copy=False)


class _Parts:
    """A class target's distribution ``q`` in parts (all scaled by the mean's 1/denominator):
    ``hot`` at each position's target class, plus ``share * wc`` over every class."""

    def __init__(self, x, t, w, ignore_index, label_smoothing, reduction):
        xa = x._data
        self.xp = xp = xp_of(xa)
        self.xb, tb = _batched(xa, t._data)
        self.c = c = self.xb.shape[1]
        self.dtype = dtype = _F32 if xa.dtype in _LOW else xa.dtype
        wa = None if w is None else w._data.astype(dtype, copy=False).reshape(-1)
        self.safe, mask, wt, total = _targets(xp, tb, wa, ignore_index, c, dtype)
        self.shape = tb.shape
        # the mean's 1/total; with a zero total weight (0/0) PyTorch's gradient is NaN at the
        # kept positions, but zero at the ignored ones (all of them ignored: all zero)
        scale = 1.0
        if reduction == "mean":
            inverse = xp.where(total == 0, np.nan, 1 / (total + (total == 0)))
            scale = xp.where(mask, inverse, 0)
        self.hot = self.q_sum = wt * ((1 - label_smoothing) * scale)
        self.share = None
        if label_smoothing > 0:
            self.share = mask.astype(dtype) * (label_smoothing / c * scale)
            self.wc = xp.ones((c,), dtype) if wa is None else wa
            self.q_sum = self.hot + self.share * self.wc.sum()

    def subtract_from(self, a, g):
        """``a - q * g`` in place, for (N, C, *d) ``a`` and ``g`` broadcastable to (N, *d)."""
        hot = self.hot * g
        if a.ndim == 2:
            a[self.xp.arange(a.shape[0]), self.safe] -= hot
        else:
            index = self.safe[:, None]
            hot = self.xp.broadcast_to(self.xp.asarray(hot, a.dtype), self.shape)
            picked = self.xp.take_along_axis(a, index, axis=1)
            self.xp.put_along_axis(a, index, picked - hot[:, None], axis=1)
        if self.share is not None:
            a -= (self.share * g)[:, None] * _class_dim_shape(self.wc, a.ndim)
        return a

    def dense(self):
        """(q, sum_c q) as (N, C, *d) and (N, 1, *d) arrays."""
        q = self.subtract_from(self.xp.zeros(self.xb.shape, self.dtype), -1.0)
        q_sum = self.xp.broadcast_to(self.xp.asarray(self.q_sum, self.dtype), self.shape)
        return q, q_sum[:, None]


def _as_input(a, x, keep_class_dim):
    """A batched (N, C, *d) or (N, 1, *d) array back in the layout of input ``x``."""
    if x.ndim > 1:
        return a
    return a.reshape(x.shape) if keep_class_dim else a.reshape(1)


def _per_position(grad, x, reduction):
    """The incoming gradient, broadcastable against the input (class dim kept)."""
    if reduction == "none" and x.ndim > 1:
        return grad.unsqueeze(1)
    return grad


def _nll_kernel(flat):
    """The kernel PyTorch's class-index losses run: 2-d and 4-d forms (others reshaped)."""
    return "nll_loss_forward" if flat[0].ndim <= 2 else "nll_loss2d_forward"


cross_entropy.refuse_grad(     # (PyTorch's forward formula takes the weight, as a constant)
    "weight", lambda flat: None if _is_probability_target(flat[0], flat[1]) else _nll_kernel(flat),
    forward=True)
# class indices: as PyTorch's nll_loss node, no edge for the target and the weight (with
# probability targets both may need gradients, and keep theirs)
cross_entropy.nondifferentiable_when(lambda flat: not _is_probability_target(flat[0], flat[1]),
                                     "target", "weight")


_ALL_READ = ((0, 1, 2),) * 3
_E_READ = ((), (0, 1, 2), (0, 1, 2))


def _read(flat, params, *, kept=None):
    """A recorded call of a class target and float32/64 logits on the CPU, not empty, keeps
    ``e = exp(input - shift)`` (a constant shift; NOTE [Kept values]), recorded as exp's node
    of the input (its derivative is e itself: the shift cancels where e is used), and no
    gradient reads the input: backward's softmax is e over its sums, as PyTorch's is the exp
    of the log_softmax it saves, and a write into the input does not reach it."""
    return _ALL_READ if kept is None else _E_READ


cross_entropy.reads_inputs(_read)
cross_entropy.kept_as(0, "exp")
# PyTorch saves log_softmax's result, not the input (here e, or a copy), and a smoothed
# probability target
cross_entropy.copies_inputs(0)
cross_entropy.copies_inputs(1, when=lambda flat, params, *, kept=None: params[-1] > 0
                            and _is_probability_target(flat[0], flat[1]))


@cross_entropy.derivative
def _(grad, x, t, w, size_average, ignore_index, reduce, reduction, label_smoothing, *,
      kept=None):
    reduction = reduction_of(size_average, reduce, reduction, emit_warning=False)
    if kept is not None:            # e stands for the input (which the node did not save)
        x = kept[0]
    label_smoothing = max(label_smoothing, 0.0)     # the forward ignores a negative smoothing
    dim = 1 if x.ndim > 1 else 0
    g = _per_position(grad, x, reduction)
    if not _is_probability_target(x, t):
        if x._data.dtype in _LOW:
            return low_precision_grad(grad, x, t, w, ignore_index, reduction, label_smoothing,
                                      nll_loss_grad), None, None
        parts = _Parts(x, t, w, ignore_index, label_smoothing, reduction)
        kept = kept is not None     # x is the forward's e (see _read)
        if not torch_grad_mode():   # first order only: fused, in place, q never formed
            ga = grad._data
            ga = ga.reshape(-1) if x.ndim == 1 else ga
            xb = parts.xb.astype(parts.dtype, copy=False)
            if kept:        # softmax * sum_c q * grad, normalized and scaled in one pass
                sm = xb * (parts.q_sum * ga / _row_sums(parts.xp, xb))[:, None]
            elif xb.size:
                sm, sums, _ = _exp_rows(parts.xp, xb)
                sm *= (parts.q_sum * ga / sums)[:, None]
            else:
                sm = xb.copy()
            out = parts.subtract_from(sm, ga).astype(x.dtype.np, copy=False)
            # row-major whatever the logits' layout, as PyTorch's log_softmax backward writes
            out = parts.xp.ascontiguousarray(out)
            return _make(_as_input(out, x, True)), None, None
        q, q_sum = parts.dense()
        dtype = x.dtype.np
        q = _make(_as_input(q.astype(dtype, copy=False), x, True))
        q_sum = _make(_as_input(q_sum.astype(dtype, copy=False), x, False))
        # cross_entropy is log_softmax and nll_loss in PyTorch: log_softmax's backward last
        sm = x / x.sum(dim, keepdim=True) if kept else softmax(x, dim)
        # (row-major, as PyTorch's log_softmax backward kernel writes it)
        return rename_node(((sm * q_sum - q) * g).contiguous(), LOG_SOFTMAX_DOUBLE), None, None
    if is_low_probability_case(x._data, t._data, None if w is None else w._data):
        return low_precision_probability_grads(grad, x, t, w, reduction, label_smoothing)
    if reduction == "mean":
        g = g / max(t.numel() // t.shape[dim], 1) if t.numel() else g * float("nan")
    c = x.shape[dim]
    q = q_plain = t * (1 - label_smoothing) + label_smoothing / c if label_smoothing > 0 else t
    # (smoothed in the target's dtype, then multiplied in the promoted one, as PyTorch's)
    result = D.promote_types(x.dtype, t.dtype if w is None else D.promote_types(t.dtype, w.dtype))
    if q.dtype is not result:
        q = q.to(result)
    wc = None if w is None else w.reshape([c] + [1] * (x.ndim - 1 - dim))
    if wc is not None:
        q = q * wc
    grad_x = rename_node(((softmax(x, dim) * q.sum(dim, keepdim=True) - q) * g).contiguous(),
                         LOG_SOFTMAX_DOUBLE)
    grad_t = grad_w = None
    if t.requires_grad and t.dtype is not result:
        # the smoothed target's gradient rounds to the target's dtype, then the smoothing's
        # (a lower-precision target beside the input)
        grad_t = (-g if wc is None else -g * wc) * log_softmax(x, dim)
        grad_t = grad_t.to(t.dtype) * (1 - label_smoothing) if label_smoothing > 0 else grad_t
    elif t.requires_grad:
        scale = -(1 - label_smoothing) if wc is None else wc * -(1 - label_smoothing)
        grad_t = log_softmax(x, dim) * scale * g
    if w is not None and w.requires_grad:      # the loss is -sum_c w_c q_c log_softmax_c
        per_class = -(q_plain * log_softmax(x, dim)) * g
        grad_w = per_class.sum([d for d in range(x.ndim) if d != dim]) if dim else per_class
    return grad_x, grad_t, grad_w


# --- nll_loss ---------------------------------------------------------------------------------

@op("nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, "
    "reduction='mean')", inputs=3, method=False, namespace="nn.functional")
def nll_loss(xp, x, t, w, size_average, ignore_index, reduce, reduction, *, keep=None):
    """The negative log likelihood of ``target`` classes under log-probabilities ``input``."""
    reduction = reduction_of(size_average, reduce, reduction, error=OpValueError)
    _check_class_target(x, t)
    _float_input(x, "nll_loss_out_frame" if x.ndim <= 2
                 else "nll_loss2d_forward_out_frame")
    dtype = x.dtype
    xb, tb = _batched(x.astype(_F32) if dtype in _LOW else x, t)
    c = xb.shape[1]
    w = _class_weight(x, t, w, c, reduction=reduction)
    safe, mask, wt, total = _targets(xp, tb, w, ignore_index, c, xb.dtype)
    if keep is not None:
        keep.append(_total_weight(xp, total, reduction, dtype))
    loss = xp.where(mask, -(_pick(xp, xb, safe) * wt), 0)      # +0 where ignored
    if dtype in _LOW and reduction != "none" and xp is np:
        return cascaded_nll(xp, loss, mask, wt, w is not None, reduction, dtype)
    loss = _reduce(loss, total, reduction, x.ndim == 1)
    return loss.astype(dtype) if dtype in _LOW else loss


nll_loss.refuse_grad("weight", _nll_kernel, forward=True)
# (its kept total weight: no derivative reads it; saved-tensor hooks get it after the inputs)
nll_loss.kept_last = 1
cross_entropy.kept_last = -1    # all kept but the first (e), as _smoothing_saved says


def _total_weight(xp, total, reduction, dtype):
    """PyTorch's saved ``total_weight``: the weight of the targets counted, in the input's
    dtype; 0 unreduced, where its kernel sums none."""
    return xp.asarray(0 if reduction == "none" else total, dtype=dtype)


nll_loss.nondifferentiable("target", "weight")


@nll_loss.named_by
def _(flat, params, out, *, kept=None):
    return _nll_node(flat[0], reduction_of(params[0], params[2], params[3], emit_warning=False))


@nll_loss.composed_when_recording
def _(inputs, params):
    """PyTorch's graph for an input of 3 or 5+ dims: nll_loss2d of it viewed as (N, C, 1, -1)
    (contiguous first; (N, C, 0, 0) when empty) and, unreduced, its result viewed back; a
    call its checks refuse is left to the op (which raises as PyTorch does)."""
    x, t, w = inputs
    if x.ndim in (1, 2, 4) or t.dtype != D.int64 or t.shape != x.shape[:1] + x.shape[2:]:
        return NotImplemented
    n, c = x.shape[:2]
    rest = (0, 0) if x.numel() == 0 else (1, -1)
    loss = nll_loss.fused(x.contiguous().view(n, c, *rest), t.contiguous().view(n, *rest), w,
                          *params)
    if reduction_of(params[0], params[2], params[3], emit_warning=False) != "none":
        return loss
    return loss.view(t.shape)


@nll_loss.derivative
def nll_loss_grad(grad, x, t, w, size_average, ignore_index, reduce, reduction, *,
                  kept=None):
    """The gradients of nll_loss (of its input; None for the target and weight). (``kept``:
    the total weight, read back as PyTorch's backward reads it, and recomputed here.)"""
    reduction = reduction_of(size_average, reduce, reduction, emit_warning=False)
    parts = _Parts(x, t, w, ignore_index, 0.0, reduction)
    # -q written into zeros: the other classes keep +0 (negating q would give -0)
    neg_q = parts.subtract_from(parts.xp.zeros(parts.xb.shape, parts.dtype), 1.0)
    g = _per_position(grad, x, reduction)
    if x._data.dtype in _LOW:       # PyTorch rounds -w * grad / total once
        return masked(g.float(), _as_input(neg_q, x, True), x).to(x.dtype), None, None
    neg_q = _as_input(neg_q.astype(x.dtype.np, copy=False), x, True)
    return rename_node(masked(g, neg_q, x), "NllLossBackwardBackward0"), None, None
