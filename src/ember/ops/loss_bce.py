"""binary_cross_entropy: an op, because PyTorch clamps its logs at -100 in the forward but
not in its gradients (whose denominator is kept from zero by 1e-12 instead)."""

import numpy as np

from ember import _dtype as D
from ember._tensor import Size
from ember.backend import device_assert
from ember.ops._loss_common import reduce_array, reduction_of
from ember.ops._op_errors import before_grad_checks
from ember.ops._registry import OpValueError, op, rename_node
from ember.ops.shape import broadcast_shapes

_LOW = D.HALF_NP


def _check(xp, x, t, w=None):
    # PyTorch's order: the size check and the weight's broadcast (its Python layer), then the
    # dtype check, then the kernel's dtype support
    if t.shape != x.shape:
        raise before_grad_checks(OpValueError(
            f"Using a target size (ember.Size({list(t.shape)})) that is different to the input "
            f"size (ember.Size({list(x.shape)})) is deprecated. Please ensure they have the same "
            f"size."))
    if w is not None:
        _weight_shape(t, w)
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
    _check(xp, x, t, w)
    if w is not None:
        _check_weight(x, t, w)
    # each step rounds, in 16-bit floats too (whose sum and mean accumulate in float32)
    if x.dtype in _LOW:
        return reduce_array(xp, _loss_16bit(xp, x, t, w), reduction, like=x)
    log_x = xp.maximum(xp.log(x), -100)
    log_1mx = xp.maximum(xp.log1p(-x), -100)
    loss = (t - 1) * log_1mx - t * log_x
    if w is not None:           # the input's dtype, whatever the weight's
        loss = (loss * w).astype(x.dtype, copy=False)
    return reduce_array(xp, loss, reduction, like=x)


def _loss_16bit(xp, x, t, w):
    """The elementwise loss of 16-bit floats, each step rounded to their dtype as PyTorch's,
    computed in float32 (NumPy's float16 arithmetic is several times slower)."""
    dtype, f32 = x.dtype, np.float32

    def r(a):
        return a.astype(dtype).astype(f32)
    x32, t32 = x.astype(f32), t.astype(f32)
    # NumPy's float16 log rounds as PyTorch's (float32's, rounded again, misses a value)
    log_x = xp.log(x).astype(f32) if dtype == np.float16 else r(xp.log(x32))
    log_1mx = r(xp.log1p(-x32))
    loss = r(r(r(t32 - 1) * xp.maximum(log_1mx, -100)) - r(t32 * xp.maximum(log_x, -100)))
    if w is not None:
        loss = loss * w.astype(f32)
    return loss.astype(dtype)


def _weight_shape(t, w):
    """The shape the target and the weight broadcast to (PyTorch's Python layer's error)."""
    try:
        return broadcast_shapes(Size(t.shape), Size(w.shape))
    except RuntimeError as e:
        raise before_grad_checks(e) from None


def _check_weight(x, t, w):
    """PyTorch's errors for a weight that does not broadcast to the input's shape."""
    shape = _weight_shape(t, w)
    if shape != x.shape:
        raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")


binary_cross_entropy.refuse_grad("weight", "binary_cross_entropy", forward=True)


binary_cross_entropy.nondifferentiable("weight")


@binary_cross_entropy.derivative
def _(grad, x, t, w, size_average, reduce, reduction):
    reduction = reduction_of(size_average, reduce, reduction, emit_warning=False)
    # PyTorch's order, each step rounding (1e-12 is 0 in float16): the weight, then the
    # mean's division last
    grad_x = (x - t) * grad / ((1 - x) * x).clamp_min(1e-12)
    grad_t = -x.logit() * grad if t.requires_grad else None
    if w is not None:
        grad_x = grad_x * w
        grad_t = None if grad_t is None else grad_t * w
    if reduction == "mean" and x.numel():
        grad_x = grad_x / x.numel()
        # (under create_graph PyTorch's target node divides by a Scalar)
        grad_t = None if grad_t is None else rename_node(grad_t / x.numel(), "DivBackward1")
    return rename_node(grad_x, "BinaryCrossEntropyBackwardBackward0"), grad_t, None
