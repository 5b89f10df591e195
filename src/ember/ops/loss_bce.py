"""binary_cross_entropy: an op, because PyTorch clamps its logs at -100 in the forward but
not in its gradients (whose denominator is kept from zero by 1e-12 instead)."""

import numpy as np

from ember import _dtype as D
from ember._tensor import Size
from ember.backend import device_assert
from ember.ops._loss_common import reduction_of
from ember.ops._registry import OpValueError, op
from ember.ops.shape import broadcast_shapes

_LOW = D.HALF_NP


def _check(xp, x, t):
    # PyTorch's order: the size check, then the dtype check, then the kernel's dtype support
    if t.shape != x.shape:
        raise OpValueError(f"Using a target size (ember.Size({list(t.shape)})) that is "
                                f"different to the input size (ember.Size({list(x.shape)})) is "
                                f"deprecated. Please ensure they have the same size.")
    if t.dtype != x.dtype:
        raise RuntimeError(f"Found dtype {D.FROM_NUMPY[t.dtype]._torch_name} but expected "
                           f"{D.FROM_NUMPY[x.dtype]._torch_name}")
    if x.dtype.kind != "f" and x.dtype not in _LOW:
        raise NotImplementedError(f"\"binary_cross_entropy\" not implemented for "
                                  f"'{D.FROM_NUMPY[x.dtype]._torch_name}'")
    for values, name in ((x, "input"), (t, "target")):
        if values.size:                 # NaN fails too
            device_assert(~((values >= 0) & (values <= 1)).all(), lambda name=name: RuntimeError(
                f"all elements of {name} should be between 0 and 1"))


@op("binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, "
    "reduction='mean')", inputs=3, method=False, namespace="nn.functional")
def binary_cross_entropy(xp, x, t, w, size_average, reduce, reduction):
    """The binary cross entropy between probabilities ``input`` and ``target``."""
    reduction = reduction_of(size_average, reduce, reduction, error=OpValueError)
    _check(xp, x, t)
    dtype = x.dtype
    if dtype in _LOW:
        x, t = x.astype(np.float32), t.astype(np.float32)
    if w is not None:
        _check_weight(x, t, w)
    log_x = xp.maximum(xp.log(x), -100)
    log_1mx = xp.maximum(xp.log1p(-x), -100)
    loss = (t - 1) * log_1mx - t * log_x
    if w is not None:
        loss = loss * w.astype(loss.dtype, copy=False)
    if reduction == "mean":
        loss = loss.sum() / loss.size if loss.size else xp.asarray(np.nan, loss.dtype)
    elif reduction == "sum":
        loss = loss.sum()
    return loss.astype(dtype, copy=False)         # the input's dtype, whatever the weight's


def _check_weight(x, t, w):
    """PyTorch's errors for a weight that does not broadcast to the input's shape."""
    shape = broadcast_shapes(Size(t.shape), Size(w.shape))
    if shape != x.shape:
        raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")


binary_cross_entropy.refuse_grad("weight", "binary_cross_entropy")


binary_cross_entropy.nondifferentiable("weight")


@binary_cross_entropy.derivative
def _(grad, x, t, w, size_average, reduce, reduction):
    reduction = reduction_of(size_average, reduce, reduction, emit_warning=False)
    if reduction == "mean":
        grad = grad / max(x.numel(), 1) if x.numel() else grad
    if w is not None:
        grad = grad * w
    grad_x = grad * (x - t) / ((1 - x) * x).clamp_min(1e-12)
    grad_t = grad * ((-x).log1p() - x.log()) if t.requires_grad else None
    return grad_x, grad_t, None
