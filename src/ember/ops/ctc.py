"""ctc_loss: the connectionist temporal classification loss.

The forward runs the alpha recursion over the extended label sequence (blank, l1, blank,
l2, ..., blank) in log space, vectorized over batch and label positions, looping only over
time. Its gradient is the op ``_ctc_loss_backward``, which runs the beta recursion and
returns ``exp(log_probs) - gamma`` as PyTorch does (the gradient for log_probs that come out
of a log_softmax); that op is not differentiable again (PyTorch's is not either).
"""

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember.ops._dims import is_index
from ember.ops._loss_common import REDUCTION_ENUM, reduction_name
from ember.ops._registry import op

_CHECKING = "(while checking arguments for ctc_loss_allocate_outputs)"


def _lengths(value, name, batch):
    """Input or target lengths (a tensor or a sequence) as a list of ints."""
    if isinstance(value, Tensor):
        if value.dtype.is_floating_point or value.dtype.is_complex:
            raise RuntimeError(f"{name} must be integral")
        value = value.reshape(-1).tolist()      # (a 0-dim tensor: one length)
    value = [int(v) for v in value]
    if len(value) != batch:
        raise RuntimeError(f"{name} must be of size batch_size")
    return value


def check_lengths(input_lengths, target_lengths):
    """PyTorch's overloads take both lengths as tuples of ints or both as tensors: no bare
    number, float or bool (the TypeError, raised before any other check, its entry points
    reword as the parser's)."""
    if isinstance(input_lengths, Tensor) != isinstance(target_lengths, Tensor):
        raise TypeError("ctc_loss(): the lengths must be both tuples of ints or both tensors")
    for value in (input_lengths, target_lengths):
        if not isinstance(value, (Tensor, list, tuple)) or \
                not isinstance(value, Tensor) and not all(map(is_index, value)):
            raise TypeError("ctc_loss(): a length must be a tuple of ints or a Tensor")


def _setup(xp, lp, targets, input_lengths, target_lengths, blank):
    """Checked, batched arrays: (log_probs (T, N, C), extended labels (N, L), their lengths,
    input lengths, target lengths, where a label may skip the blank before it)."""
    check_lengths(input_lengths, target_lengths)
    if lp.dtype not in (np.float32, np.float64):
        raise NotImplementedError(f"\"ctc_loss_cpu\" not implemented for "
                                  f"'{D.FROM_NUMPY[lp.dtype]._torch_name}'")
    if targets.dtype.kind not in "iu":      # PyTorch truncates float targets to int64
        targets = targets.astype(np.int64)
    unbatched = lp.ndim == 2
    if unbatched:       # (a 1-d target is one of concatenated targets, as in PyTorch)
        lp = lp[:, None]
    if lp.ndim != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {lp.ndim}-dimensional tensor "
                           f"for argument #1 'log_probs' {_CHECKING}")
    if not lp.size:
        raise RuntimeError("log_probs tensor must not be empty")
    t_max, n, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    in_len = _lengths(input_lengths, "input_lengths", n)
    tg_len = _lengths(target_lengths, "target_lengths", n)
    # PyTorch's order: the target lengths and the targets' size, then the input lengths
    if min(tg_len, default=0) < 0:
        raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value "
                           f"{min(tg_len)} {_CHECKING}")
    s_max = max(tg_len, default=0)
    if targets.ndim == 1:      # concatenated targets
        total = sum(tg_len)
        _check_size(targets, 0, total)
        offsets = np.cumsum([0] + tg_len[:-1])
        index = np.minimum(offsets[:, None] + np.arange(s_max), max(total - 1, 0))
        padded = targets[xp.asarray(index)] if total else xp.zeros((n, s_max), np.int64)
    else:
        _check_size(targets, 0, n)
        if targets.shape[1] < s_max:
            raise RuntimeError(f"Expected tensor to have size at least {s_max} at dimension 1, "
                               f"but got size {targets.shape[1]} for argument #2 'targets' "
                               f"{_CHECKING}")
        padded = targets[:, :s_max]
    if min(in_len, default=0) < 0:
        raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value "
                           f"{min(in_len)} {_CHECKING}")
    if max(in_len, default=0) > t_max:
        raise RuntimeError(f"Expected input_lengths to have value at most {t_max}, but got "
                           f"value {max(in_len)} {_CHECKING}")
    valid = xp.arange(s_max)[None, :] < xp.asarray(tg_len)[:, None]
    labels = xp.where(valid, padded, blank).astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= c):
        raise RuntimeError("ctc_loss(): target index out of range")
    ext = xp.full((n, 2 * s_max + 1), blank, np.int64)
    ext[:, 1::2] = labels
    # a label may follow the label two places back (skipping a blank) if it differs from it
    skip = xp.zeros(ext.shape, bool)
    skip[:, 3::2] = labels[:, 1:] != labels[:, :-1]
    return lp, ext, skip, np.asarray(in_len), np.asarray(tg_len), unbatched


def _check_size(targets, dim, size):
    if targets.shape[dim] != size:
        raise RuntimeError(f"Expected tensor to have size {size} at dimension {dim}, but got "
                           f"size {targets.shape[dim]} for argument #2 'targets' {_CHECKING}")


def _logsumexp3(xp, a, b, c):
    m = xp.maximum(xp.maximum(a, b), c)
    m = xp.where(xp.isfinite(m), m, 0)
    return xp.log(xp.exp(a - m) + xp.exp(b - m) + xp.exp(c - m)) + m


def _shift(xp, a, k, skip=None):
    """``a`` moved ``k`` label positions right (left for negative k), -inf coming in."""
    out = xp.full(a.shape, -np.inf, a.dtype)
    if k > 0:
        out[:, k:] = a[:, :-k]
    else:
        out[:, :k] = a[:, -k:]
    return out if skip is None else xp.where(skip, out, -np.inf)


def _alpha(xp, lpe, skip):
    """log alpha (T, N, L) of the extended labels' log-probabilities ``lpe``."""
    alpha = xp.full(lpe.shape, -np.inf, lpe.dtype)
    if lpe.shape[0] == 0:
        return alpha
    alpha[0, :, :2] = lpe[0, :, :2]
    for t in range(1, lpe.shape[0]):
        prev = alpha[t - 1]
        alpha[t] = lpe[t] + _logsumexp3(xp, prev, _shift(xp, prev, 1), _shift(xp, prev, 2, skip))
    return alpha


def _nll(xp, alpha, ext_len, in_len):
    """Each sample's -log p(target): the paths ending on the last label or the last blank."""
    n = alpha.shape[1]
    rows = xp.arange(n)
    last_t = xp.asarray(np.maximum(in_len - 1, 0))
    final = alpha[last_t, rows] if alpha.shape[0] else xp.full((n, alpha.shape[2]), -np.inf)
    end = xp.asarray(ext_len - 1)
    on_blank = final[rows, end]
    on_label = xp.where(end > 0, final[rows, xp.maximum(end - 1, 0)], -np.inf)
    nll = -xp.logaddexp(on_blank, on_label)
    # no frames: only the empty target is possible, with probability 1
    empty = xp.asarray(in_len == 0)
    nll = xp.where(empty, xp.where(xp.asarray(ext_len == 1), -0.0, np.inf), nll)
    return nll.astype(alpha.dtype, copy=False)


def _reduce(xp, nll, tg_len, reduction, zero_infinity, unbatched):
    if zero_infinity:
        nll = xp.where(xp.isinf(nll), 0.0, nll).astype(nll.dtype)
    if reduction == 1:
        return (nll / xp.asarray(np.maximum(tg_len, 1), nll.dtype)).mean()
    if reduction == 2:
        return nll.sum()
    return nll.reshape(()) if unbatched else nll


@op("ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0, "
    "zero_infinity=False)", inputs=2, method=False)
def ctc_loss(xp, lp, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    """The connectionist temporal classification loss of ``log_probs`` (T, N, C)."""
    reduction = REDUCTION_ENUM[reduction_name(reduction)]
    lpb, ext, skip, in_len, tg_len, unbatched = _setup(xp, lp, targets, input_lengths,
                                                       target_lengths, blank)
    lpe = xp.take_along_axis(lpb, xp.broadcast_to(ext[None], lpb.shape[:2] + ext.shape[1:]), 2)
    alpha = _alpha(xp, lpe, skip)
    nll = _nll(xp, alpha, 2 * tg_len + 1, in_len)
    return _reduce(xp, nll, tg_len, reduction, zero_infinity, unbatched)


ctc_loss.nondifferentiable("targets")
ctc_loss.refuse_forward_ad("_ctc_loss")


@ctc_loss.derivative
def _(grad, lp, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    return _ctc_loss_backward(grad, lp, targets, input_lengths, target_lengths, blank,
                              reduction_name(reduction), zero_infinity), None


@ctc_loss.named_by
def _(flat, params, out):                    # PyTorch reduces the per-sample losses afterwards
    # (params: input_lengths, target_lengths, blank, reduction, zero_infinity); unreduced,
    # an unbatched loss is squeezed last, zero_infinity's a where of the kernel's
    reduction = reduction_name(params[3])
    if reduction == "none":
        return "SqueezeBackward1" if flat[0].ndim == 2 else \
            "WhereBackward0" if params[4] else "CtcLossBackward0"
    return {"mean": "MeanBackward0", "sum": "SumBackward0"}[reduction]


def _beta(xp, lpe, skip, ext_len, in_len):
    """log beta (T, N, L), each sample starting from its own last frame."""
    t_max, n, length = lpe.shape
    beta = xp.full(lpe.shape, -np.inf, lpe.dtype)
    positions = xp.arange(length)[None, :]
    end = xp.asarray(ext_len - 1)[:, None]
    last = (positions == end) | (positions == end - 1)
    skip_from_next = _shift(xp, skip, -2) if length > 2 else xp.zeros(skip.shape, bool)
    starts = xp.asarray(in_len - 1)[:, None]
    nxt = xp.full((n, length), -np.inf, lpe.dtype)
    for t in range(t_max - 1, -1, -1):
        rec = lpe[t] + _logsumexp3(xp, nxt, _shift(xp, nxt, -1),
                                   xp.where(skip_from_next, _shift(xp, nxt, -2), -np.inf))
        first = xp.where(last, lpe[t], -np.inf)
        nxt = xp.where(t == starts, first, xp.where(t < starts, rec, -np.inf))
        beta[t] = nxt
    return beta


@op("_ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, blank, "
    "reduction, zero_infinity)", inputs=3, method=False)
def _ctc_loss_backward(xp, g, lp, targets, input_lengths, target_lengths, blank, reduction,
                       zero_infinity):
    """The gradient of ctc_loss for its log_probs, from the alpha and beta recursions."""
    lpb, ext, skip, in_len, tg_len, unbatched = _setup(xp, lp, targets, input_lengths,
                                                       target_lengths, blank)
    t_max, n, c = lpb.shape
    lpe = xp.take_along_axis(lpb, xp.broadcast_to(ext[None], (t_max, n, ext.shape[1])), 2)
    alpha = _alpha(xp, lpe, skip)
    ext_len = 2 * tg_len + 1
    nll = _nll(xp, alpha, ext_len, in_len)
    beta = _beta(xp, lpe, skip, ext_len, in_len)
    # the probability of the paths through label position s at time t, summed per class
    through = xp.exp(alpha + beta - lpe + nll[None, :, None])
    onehot = (ext[:, :, None] == xp.arange(c)).astype(lpb.dtype)
    gamma = xp.einsum("tns,nsc->tnc", through, onehot)
    out = xp.exp(lpb) - gamma
    if reduction == "mean":
        scale = g / xp.asarray(n * np.maximum(tg_len, 1))
    elif reduction == "sum":
        scale = xp.broadcast_to(g, (n,))
    else:
        scale = g.reshape(n)
    if zero_infinity:
        scale = xp.where(xp.isinf(nll), 0, scale)
    out = out * scale[None, :, None]
    if zero_infinity:
        out = xp.where(xp.isinf(nll)[None, :, None], 0, out)
    out = xp.where(xp.arange(t_max)[:, None, None] < xp.asarray(in_len)[None, :, None], out, 0)
    return out.reshape(lp.shape).astype(lp.dtype, copy=False)


# PyTorch has no double backward for CTC: a create_graph gradient carries NotImplemented
_ctc_loss_backward.not_implemented("_ctc_loss_backward")


def functional_ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
                        reduction="mean", zero_infinity=False):
    """The connectionist temporal classification loss of ``log_probs`` (T, N, C). Targets
    on the CPU follow GPU log_probs there, as PyTorch moves them (cuDNN's CTC wants them on
    the CPU)."""
    if isinstance(targets, Tensor) and targets.device.type == "cpu" and isinstance(
            log_probs, Tensor) and log_probs.device.type not in ("cpu", "meta"):
        targets = targets.to(log_probs.device)
    return ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                    REDUCTION_ENUM[reduction_name(reduction)], zero_infinity)


functional_ctc_loss.__name__ = functional_ctc_loss.__qualname__ = "ctc_loss"
