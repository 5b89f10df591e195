"""Ops PyTorch has no derivative for (``Op.not_implemented``): a recorded call computes its
result untracked, then hangs PyTorch's node NotImplemented on each differentiable output, with
an edge to each input requiring grad (only those, as PyTorch's); its backward raises
"derivative for aten::<kernel> is not implemented". Forward-mode AD refuses such a call with
PyTorch's "Trying to use forward AD with aten::<kernel> that does not support it." (the
untracked call runs the op's ``refuse_forward_ad`` check)."""

from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad

__all__ = ["record_not_implemented", "raise_not_implemented"]


def raise_not_implemented(kernel):
    """A derivative that raises PyTorch's error for ``kernel``, which has none."""
    def derivative(grad, *args, **kwargs):
        raise RuntimeError(f"derivative for aten::{kernel} is not implemented")
    return derivative


def record_not_implemented(op, flat, params):
    """``op``'s result for ``flat`` and ``params``, its differentiable outputs each given
    PyTorch's node NotImplemented over the inputs that require grad."""
    from ember.ops._dispatch import RAW_OUTPUTS, call
    from ember.ops.random_nodes import NOT_IMPLEMENTED, _sampled
    with no_grad():
        res = call(op, flat, params, RAW_OUTPUTS)
    tensors = [t for t in op.flatten_inputs(flat)[0] if isinstance(t, Tensor) and t.requires_grad]
    outputs = res if type(res) is tuple else (res,)
    tracked = tuple(_sampled(tensors, o._data, NOT_IMPLEMENTED, op.not_implemented_kernel)
                    if o._data.dtype.kind in "fcV" else o for o in outputs)
    if type(res) is not tuple:
        return tracked[0]
    return op.namedtuple(*tracked) if op.namedtuple is not None else tracked
