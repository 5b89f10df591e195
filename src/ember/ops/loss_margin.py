"""Margin and embedding losses: margin_ranking, hinge_embedding, cosine_embedding,
multi_margin, multilabel_margin, multilabel_soft_margin and the triplet losses, composed
from ember ops (multi_margin and multilabel_margin run kernels: loss_kernels.py)."""

import numpy as np

from ember import _dtype as D
from ember._tensor import _make
from ember.autograd._forward_traces import TRACES as FORWARD_TRACES
from ember.backend import xp_of
from ember.ops._linalg_utils import check_kernel
from ember.ops._loss_common import legacy_reduction, reduce_loss, reduction_of, refuse_grad
from ember.ops._scalars import checked_scalar, float_arg, number_arg, real_number
from ember.ops.activations_smooth import logsigmoid
from ember.ops.binary_math import where
from ember.ops.loss_kernels import _multi_margin_loss, _multilabel_margin_loss

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "pairwise_distance_of"]

_EPSILON = 1e-12        # keeps cosine_embedding_loss's magnitudes from zero


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``: ranks input1 above input2 where
    ``target`` is 1, below where it is -1."""
    reduction = reduction_of(size_average, reduce, reduction)
    margin = float_arg(margin, "margin_ranking_loss", "margin", 4)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: ember.Size({list(input1.shape)}), input2: "
                           f"ember.Size({list(input2.shape)}), target: "
                           f"ember.Size({list(target.shape)}) ")
    # the margin is a float (a double in PyTorch's signature): integer inputs give floats
    return reduce_loss((-target * (input1 - input2) + float(margin)).clamp_min(0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1; the loss
    has input's dtype (an integer input takes the margin truncated to its dtype)."""
    reduction = reduction_of(size_average, reduce, reduction)
    margin = float(float_arg(margin, "hinge_embedding_loss", "margin", 3))
    if input.dtype is D.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if input.dtype.category != D.FLOATING:
        margin = _make(checked_scalar(xp_of(input._data), margin, input._data.dtype))
    below = where(target != 1, (margin - input).clamp_min(0), 0)
    return reduce_loss(below + where(target != -1, input, 0), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(input1, input2)`` where ``target`` is 1, ``max(0, cos - margin)`` where -1."""
    reduction = reduction_of(size_average, reduce, reduction)
    margin = float(float_arg(margin, "cosine_embedding_loss", "margin", 4))
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if target.ndim == 1 and (input1.ndim != 2 or input2.ndim != 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    if target.ndim == 0 and (input1.ndim != 1 or input2.ndim != 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    dot = (input1 * input2).sum(-1)
    norms = ((input1 * input1).sum(-1) + _EPSILON) * ((input2 * input2).sum(-1) + _EPSILON)
    cos = dot / norms.sqrt()
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, (cos - margin).clamp_min(0),
                                                     0.0)
    return reduce_loss(loss, reduction)


def _refuse_early(tensor, kernel, argument):
    """Autograd's refusal of ``tensor`` requiring grad, before the kernel's checks; inside a
    forward-mode transform the op refuses forward AD first, as PyTorch's kernel does."""
    if not FORWARD_TRACES.starts:
        refuse_grad(tensor, kernel, argument)


def _long_target(target):
    if target.dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype._torch_name}")


def _target_values(target):
    """The array of a class-index target; under vmap, the whole batch's (its range check holds
    for every sample, and a batched tensor's own values cannot be read)."""
    from ember.func._batched import BatchedTensor
    while type(target) is BatchedTensor:
        target = target._value
    return target._data


def _class_target(input, target, name):
    """Checks of multi_margin_loss's input (C,) or (N, C) and class-index target's shape (its
    range is checked by the kernel, after the weight's dtype, as PyTorch does)."""
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(input.shape)}")
    n = input.shape[0] if input.ndim == 2 else 1
    if target.numel() != n or target.ndim > 1:
        raise RuntimeError(f"{name}: target tensor should be 1-D with size equal to the number "
                           f"of input samples (batch size). Expected target size [{n}], but "
                           f"got {list(target.shape)}. Input has shape {list(input.shape)}.")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """The multi-class hinge loss ``sum_i max(0, margin - x[y] + x[i])**p / C``, i != y."""
    reduction = reduction_of(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    margin = real_number(number_arg(margin, "multi_margin_loss", "margin", 4), np.float32)
    # PyTorch's kernel checks after autograd refuses a weight that requires grad: the shapes,
    # then the input's dtype, then the target's
    _refuse_early(weight, "multi_margin_loss", "weight")
    _class_target(input, target, "multi_margin_loss")
    c = input.shape[-1] if input.ndim else 1
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"inconsistent weight size, expected {c} but got "
                           f"{list(weight.shape)}")
    if input.numel():       # (an empty input's kernel returns before checking dtypes)
        check_kernel(input._data, "multi_margin_loss_cpu_kernel", "f")
        _long_target(target)
    return _multi_margin_loss(input, target, weight, p, margin, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The multi-label hinge loss: each target class (listed before the first -1) against
    each non-target class, ``sum max(0, 1 - (x[y_j] - x[i])) / C``."""
    reduction = reduction_of(size_average, reduce, reduction)
    # PyTorch's kernel checks after autograd refuses a target that requires grad: the shapes,
    # the target's values, then the input's dtype and the target's
    _refuse_early(target, "multilabel_margin_loss", "target")
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0 and input.shape[0]):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(input.shape)}")
    if target.shape != input.shape:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    c = input.shape[-1] if input.ndim else 1
    t = _target_values(target)
    if t.size and ((t < -1) | (t >= c)).any():
        raise RuntimeError("argument #2 'target' is out of range")
    if input.numel():       # (an empty input's kernel returns before checking dtypes)
        check_kernel(input._data, "multilabel_margin_loss_forward_out_frame", "f")
        _long_target(target)
    return _multilabel_margin_loss(input, target, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """The multi-label one-versus-all logistic loss, averaged over classes."""
    if size_average is not None or reduce is not None:     # (a string is checked last)
        reduction = legacy_reduction(size_average, reduce)
    # PyTorch's composition (its nodes, and so its rounding and gradient order)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.ndim - 1) / input.shape[-1]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    return reduce_loss(loss, reduction)


def pairwise_distance_of(x1, x2, p=2.0, eps=1e-6):
    """The ``p``-norm distance between rows of ``x1`` and ``x2`` (``eps`` added to the
    difference, as PyTorch's pairwise_distance)."""
    from ember.ops.norms import vector_norm
    return vector_norm(x1 - x2 + eps, p, -1)


def _same_ndim(anchor, positive, negative):
    a, p, n = anchor.ndim, positive.ndim, negative.ndim
    if not a == p == n:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {a}D, positive {p}D, and "
                           f"negative {n}D inputs")


def _triplet(distance, anchor, positive, negative, margin, swap, reduction):
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(distance(positive, negative))
    return reduce_loss((margin + d_pos - d_neg).clamp_min(0), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` for p-norm distance."""
    reduction = reduction_of(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    margin = float(float_arg(margin, "triplet_margin_loss", "margin", 4))
    _same_ndim(anchor, positive, negative)
    return _triplet(lambda a, b: pairwise_distance_of(a, b, p, eps), anchor, positive, negative,
                    margin, swap, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """The triplet margin loss for any ``distance_function`` (default: pairwise distance)."""
    reduction = reduction_of(None, None, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _same_ndim(anchor, positive, negative)
    return _triplet(distance_function or pairwise_distance_of, anchor, positive, negative,
                    margin, swap, reduction)
