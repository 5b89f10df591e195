"""What the losses share: the reduction argument (and its deprecated size_average/reduce
form), and applying a reduction to elementwise losses."""

import functools
import warnings

from ember._tensor import _view_tracks
from ember._warn import outside_level
from ember.ops._op_errors import before_grad_checks
from ember.ops._pointwise_layout import laid_as_operands
from ember.ops._reduce import narrow_to, wide

__all__ = ["legacy_reduction", "reduction_of", "reduce_loss", "REDUCTIONS", "REDUCTION_ENUM",
           "reduction_name", "warn_size_mismatch", "refuse_grad", "fused_loss_grads"]

REDUCTIONS = ("none", "mean", "sum")
REDUCTION_ENUM = {"none": 0, "mean": 1, "sum": 2}


def legacy_reduction(size_average, reduce, emit_warning=True):
    """The reduction string the deprecated ``size_average``/``reduce`` pair means."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        reduction = "mean"
    elif reduce:
        reduction = "sum"
    else:
        reduction = "none"
    if emit_warning:
        warnings.warn(f"size_average and reduce args will be deprecated, please use "
                      f"reduction='{reduction}' instead.", UserWarning,
                      stacklevel=outside_level())
    return reduction


def reduction_of(size_average, reduce, reduction, emit_warning=True, error=ValueError):
    """The effective reduction of a loss call, checked."""
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce, emit_warning)
    if reduction not in REDUCTIONS:
        raise before_grad_checks(error(f"{reduction} is not a valid value for reduction"))
    return reduction


def reduction_name(reduction):
    """A reduction given as PyTorch's enum (top-level ops: 0, 1, 2) or as a string."""
    if isinstance(reduction, str):
        if reduction not in REDUCTIONS:
            raise ValueError(f"{reduction} is not a valid value for reduction")
        return reduction
    if reduction not in (0, 1, 2):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return REDUCTIONS[0] if reduction == 0 else REDUCTIONS[1] if reduction == 1 else "sum"


def reduce_loss(loss, reduction):
    """Elementwise ``loss`` reduced as ``reduction`` says."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def warn_size_mismatch(input, target):
    """PyTorch's warning when a pointwise loss's target broadcasts against its input."""
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({_size(target)}) that is different to the input "
                      f"size ({_size(input)}). This will likely lead to incorrect results due "
                      f"to broadcasting. Please ensure they have the same size.", UserWarning,
                      stacklevel=outside_level())


def _size(t):
    return f"ember.Size({list(t.shape)})"


def refuse_grad(tensor, kernel, argument, forward=False):
    """PyTorch's error when ``tensor``, an input ``kernel`` has no derivative for (a class
    weight), requires grad in a call that records the graph (``forward``: see
    ``Op.refuse_grad``)."""
    if tensor is not None and (tensor._requires_grad or tensor._grad_fn is not None
                               or _view_tracks(tensor)):
        from ember.autograd._forward_traces import grad_refused     # (only on this rare path)
        from ember.autograd.grad_mode import STATE
        from ember.ops._op_errors import not_differentiable
        if STATE.grad_enabled and grad_refused(tensor, forward):    # recording
            raise not_differentiable(kernel, argument)


# --- for loss kernels (ops computing a whole loss on backend arrays) --------------------------

def reduce_array(xp, loss, reduction, like=None):
    """An elementwise loss array reduced as ``reduction`` says (the mean of none is NaN);
    unreduced, laid out as the array ``like`` (the one operand PyTorch's kernel follows)."""
    if reduction == "none":
        return loss if like is None else laid_as_operands(xp, loss, (like,))
    # 16-bit floats accumulate in float32, as PyTorch's sum and mean do (NumPy would add
    # bfloat16 in bfloat16, which stops growing at 256 when adding ones)
    total = wide(loss).sum()
    if reduction == "sum":
        return narrow_to(total, loss.dtype)
    if not loss.size:
        return xp.asarray(xp.nan, loss.dtype)
    return (total / loss.size).astype(loss.dtype)


def reduced_grad(grad, x, reduction):
    """The incoming gradient of a reduced elementwise loss, per element of ``x``."""
    return grad / max(x.numel(), 1) if reduction == "mean" else grad


def promoted_dtype(*arrays):
    """The NumPy dtype PyTorch's promotion gives ``arrays`` (0-dim ones weak; None skipped),
    and the dtype to compute in: float32 for 16-bit floats."""
    from ember import _dtype as D
    dtype = D.result_type_of([(D.FROM_NUMPY[a.dtype], D.ZERO_DIM if a.ndim == 0 else D.DIM)
                              for a in arrays if a is not None])
    if dtype.category < D.FLOATING:
        dtype = D.get_default_dtype()
    result = dtype.np
    return result, (result if result.itemsize > 2 else D.float32.np)


def fused_loss_grads(derivative):
    """A loss kernel's ``derivative`` computed in float32 for float16/bfloat16 gradients and
    each result rounded once, as PyTorch's fused loss backward kernels do (each ember op of
    the formula would round its own result)."""
    from ember import _dtype as D
    from ember._tensor import Tensor

    @functools.wraps(derivative)          # (keeps the signature the registry reads)
    def wrapped(grad, *args, **kwargs):
        dtype = grad.dtype
        if dtype is not D.float16 and dtype is not D.bfloat16:
            return derivative(grad, *args, **kwargs)
        args = [a.float() if isinstance(a, Tensor) and a.dtype is dtype else a for a in args]
        grads = derivative(grad.float(), *args, **kwargs)
        return tuple(None if g is None else g.to(dtype) for g in grads)
    return wrapped
