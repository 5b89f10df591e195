"""OpInfo entries for the kernels of soft_margin_loss, binary_cross_entropy_with_logits,
multi_margin_loss and multilabel_margin_loss (src/ember/ops/loss_kernels.py)."""

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, LOW, OpInfo, SampleInput, make

_REDUCTIONS = ("none", "mean", "sum")
_LOW_TOL = {ember.float16: (2e-3, 2e-3), ember.bfloat16: (1.6e-2, 2e-2)}


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    return np.asarray(loss.sum() if reduction == "sum" else loss.mean())


def _softplus(z):
    return np.logaddexp(z, 0)


def _torch(name):
    def call(*args, **kwargs):
        import torch
        return getattr(torch.nn.functional, name)(*args, **kwargs)
    return call


def _torch_bce_logits(x, t, weight=None, pos_weight=None, reduction="mean"):
    return _torch("binary_cross_entropy_with_logits")(x, t, weight, reduction=reduction,
                                                      pos_weight=pos_weight)


def _torch_multi_margin(x, y, weight=None, p=1, margin=1.0, reduction="mean"):
    return _torch("multi_margin_loss")(x, y, p, margin, weight, reduction=reduction)


# --- soft_margin ------------------------------------------------------------------------------

def _soft_margin_ref(x, t, reduction="mean"):
    return _reduce(_softplus(-x.astype(np.float64) * t), reduction)


def _soft_margin_samples(dtype, requires_grad):
    def sign(*shape):
        return make(shape, ember.int64, low=0, high=2).to(dtype) * 2 - 1
    for reduction in _REDUCTIONS:
        x = make((3, 4), dtype, requires_grad, low=-3, high=3)
        yield SampleInput(x, (sign(3, 4),), {"reduction": reduction})
        yield SampleInput(make((), dtype, requires_grad), (sign(),), {"reduction": reduction},
                          name="0-dim")
        yield SampleInput(make((0, 2), dtype, requires_grad), (sign(0, 2),),
                          {"reduction": reduction}, name="empty")
    yield SampleInput(make((2, 3), dtype, requires_grad, noncontiguous=True),
                      (make((2, 3), dtype, low=-1, high=1, noncontiguous=True),),
                      name="noncontiguous")


# --- binary_cross_entropy_with_logits ---------------------------------------------------------

def _bce_logits_ref(x, t, weight=None, pos_weight=None, reduction="mean"):
    x, t = x.astype(np.float64), t.astype(np.float64)
    scale = 1 if pos_weight is None else 1 + (pos_weight - 1) * t
    loss = (1 - t) * x + scale * _softplus(-x)
    return _reduce(loss if weight is None else loss * weight, reduction)


def _bce_logits_samples(dtype, requires_grad):
    def x(*shape):
        return make(shape, dtype, requires_grad, low=-4, high=4)

    def t(*shape):
        return make(shape, dtype, requires_grad, low=0, high=1)
    weight = make((4,), dtype, low=0.1, high=2)
    for reduction in _REDUCTIONS:
        yield SampleInput(x(3, 4), (t(3, 4),), {"reduction": reduction})
        yield SampleInput(x(3, 4), (t(3, 4), weight, weight * 2), {"reduction": reduction},
                          name="weights")
        yield SampleInput(x(), (t(),), {"reduction": reduction}, name="0-dim")
        yield SampleInput(x(0, 4), (t(0, 4),), {"reduction": reduction}, name="empty")
    yield SampleInput(x(3, 4), (t(3, 4), None, weight), name="pos_weight")
    yield SampleInput(x(3, 4), (make((3, 4), dtype, low=0, high=1),), name="target_no_grad")


# --- multi_margin -----------------------------------------------------------------------------

def _multi_margin_ref(x, y, weight=None, p=1, margin=1.0, reduction="mean"):
    rows = x.astype(np.float64).reshape(-1, x.shape[-1] if x.ndim else 1)
    c = rows.shape[1]
    yy = y.reshape(-1, 1)
    m = np.maximum(margin - np.take_along_axis(rows, yy, 1) + rows, 0) ** p
    if weight is not None:
        m = m * weight[yy]
    loss = np.where(np.arange(c) != yy, m, 0).sum(1) / c
    return _reduce(loss if x.ndim == 2 else loss.reshape(y.shape), reduction)


def _multi_margin_samples(dtype, requires_grad):
    def x(*shape):     # values well apart from the hinges' corners, for finite differences
        return make(shape, dtype, requires_grad, low=-2, high=2)
    labels = ember.tensor([0, 3, 1])
    weight = make((4,), dtype, low=0.5, high=2)
    for reduction in _REDUCTIONS:
        yield SampleInput(x(3, 4), (labels,), {"reduction": reduction})
        yield SampleInput(x(3, 4), (labels, weight, 2, 0.5), {"reduction": reduction},
                          name="p2_weight_margin")
        yield SampleInput(x(4), (ember.tensor([2]),), {"reduction": reduction},
                          name="unbatched")
    yield SampleInput(x(3, 4), (labels, None, 2), name="p2")
    # (no empty sample: PyTorch's reduced loss of no samples is uninitialized memory)


# --- multilabel_margin ------------------------------------------------------------------------

def _multilabel_margin_ref(x, t, reduction="mean"):
    rows = x.astype(np.float64).reshape(-1, x.shape[-1] if x.ndim else 1)
    targets = t.reshape(rows.shape)
    loss = np.zeros(rows.shape[0])
    for n, (row, listed) in enumerate(zip(rows, targets)):
        listed = list(listed[:list(listed).index(-1)] if -1 in listed else listed)
        for j in listed:
            for i in range(rows.shape[1]):
                if i not in listed:
                    loss[n] += max(0.0, 1 - (row[j] - row[i]))
    loss = loss / rows.shape[1]
    return _reduce(loss if x.ndim == 2 else loss.reshape(()), reduction)


def _multilabel_margin_samples(dtype, requires_grad):
    def x(*shape):
        return make(shape, dtype, requires_grad, low=-2, high=2)
    lists = ember.tensor([[3, 0, -1, 1], [1, 2, 3, -1], [0, 2, 2, 1]])
    for reduction in _REDUCTIONS:
        yield SampleInput(x(3, 4), (lists,), {"reduction": reduction})
        yield SampleInput(x(4), (lists[1],), {"reduction": reduction}, name="unbatched")
    yield SampleInput(x(2, 3), (ember.tensor([[-1, 0, 1], [2, 2, -1]]),), name="repeated")


OPS = [
    OpInfo("_soft_margin_loss", _soft_margin_ref, _soft_margin_samples, dtypes=FLOATS + LOW,
           gradgrad=True, torch_op=_torch("soft_margin_loss"), tol=_LOW_TOL),
    OpInfo("_binary_cross_entropy_with_logits", _bce_logits_ref, _bce_logits_samples,
           dtypes=FLOATS + LOW, gradgrad=True,
           torch_op=_torch_bce_logits, tol=_LOW_TOL),
    # (PyTorch's CPU kernels of the margin losses take no 16-bit floats)
    # (no gradgrad: PyTorch's multi_margin_loss_backward and multilabel_margin_loss_backward
    # have no derivative, and the gradients refuse a second backward as PyTorch's do)
    OpInfo("_multi_margin_loss", _multi_margin_ref, _multi_margin_samples, gradgrad=False,
           torch_op=_torch_multi_margin),
    OpInfo("_multilabel_margin_loss", _multilabel_margin_ref, _multilabel_margin_samples,
           gradgrad=False, torch_op=_torch("multilabel_margin_loss")),
]
