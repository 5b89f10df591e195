"""The pre-0.4 styles of custom autograd function that PyTorch keeps for old code
(``torch.autograd.function.InplaceFunction`` and ``NestedIOFunction``): their classes and
methods exist; calling an instance raises PyTorch's error for non-static functions."""

from ember._tensor import Tensor
from ember.autograd.function import Function

__all__ = ["InplaceFunction", "NestedIOFunction"]


class InplaceFunction(Function):
    """A Function that may work in place (``inplace``): kept for backward compatibility."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class NestedIOFunction(Function):
    """A Function whose instance methods ``forward_extended``/``backward_extended`` take
    nested inputs: kept for backward compatibility (use ``Function``)."""

    def forward(self, *args):
        """The outputs of ``forward_extended`` on ``args``."""
        return self.forward_extended(*args)

    def backward(self, *gradients):
        """The gradients ``backward_extended`` gives for ``gradients``."""
        return self.backward_extended(*gradients)

    def save_for_backward(self, *args):
        """Keep the tensors in ``args`` (nested in lists and tuples) for
        ``backward_extended``."""
        self.to_save = tuple(_flat_tensors(args))

    @property
    def saved_tensors(self):
        """What ``save_for_backward`` kept."""
        return self.to_save

    def mark_dirty(self, *args, **kwargs):
        """Declare inputs that ``forward_extended`` modified in place."""
        self.dirty_tensors = tuple(_flat_tensors((args, kwargs)))

    def mark_non_differentiable(self, *args, **kwargs):
        """Declare outputs that get no gradient."""
        self.non_differentiable = tuple(_flat_tensors((args, kwargs)))

    def forward_extended(self, *input):
        """The computation: subclasses define it."""
        raise NotImplementedError

    def backward_extended(self, *grad_output):
        """The gradient computation: subclasses define it."""
        raise NotImplementedError


def _flat_tensors(nested):
    """The tensors in ``nested`` (tensors, None, and lists, tuples and dicts of them), in
    order; anything else is PyTorch's ValueError."""
    if isinstance(nested, Tensor):
        yield nested
    elif isinstance(nested, (list, tuple)):
        for item in nested:
            yield from _flat_tensors(item)
    elif isinstance(nested, dict):
        for item in nested.values():
            yield from _flat_tensors(item)
    elif nested is not None:
        raise ValueError(f"Auto nesting doesn't know how to process an input object of type "
                         f"{type(nested).__name__}. Accepted types: Tensors, or lists/tuples "
                         f"of them")
