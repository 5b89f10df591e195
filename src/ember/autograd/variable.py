"""``Variable``: the wrapper tensors needed before PyTorch 0.4, kept for old code
(``torch.autograd.Variable``). Every tensor is a Variable now; calling it makes a new leaf
that shares the data."""

import warnings

from ember._tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False)``: ``data`` cut from its graph, as a leaf that
    requires grad when asked."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got "
                            f"{type(data).__name__}")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with "
                          "torch.no_grad():` instead.", UserWarning, stacklevel=2)
        return data.detach()._set_requires_grad(requires_grad)


class _ExecutionEngine:
    """The backward engine as ``Variable._execution_engine`` shows it to hooks."""

    @staticmethod
    def queue_callback(callback):
        """Run ``callback()`` when the backward pass now running finishes."""
        from ember.autograd.engine import queue_callback
        queue_callback(callback)


Variable._execution_engine = _ExecutionEngine()
