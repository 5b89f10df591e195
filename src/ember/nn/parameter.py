"""Parameter: a Tensor that a Module registers as one of its learnable weights."""

from ember._tensor import Tensor, _make
from ember.overrides import _disabled_torch_function_impl

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A leaf tensor that ``Module.__setattr__`` registers as a parameter (``torch.nn.Parameter``).

    It shares memory and version counter with ``data``; ops on it return plain Tensors.
    """

    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from ember._creation import empty
            data = empty(0)
        out = _make(data._data, cls)
        out._vc = data._shared_version()
        out.requires_grad = requires_grad
        return out

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
