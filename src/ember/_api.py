"""Small top-level functions of the ember namespace that are not ops."""

from ember import _dtype as D
from ember._tensor import Tensor

__all__ = ["is_tensor", "is_floating_point", "is_complex", "is_nonzero", "numel",
           "result_type", "set_printoptions", "get_printoptions", "strided"]


class _Layout:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"


strided = _Layout("strided")


def is_tensor(obj):
    """Whether ``obj`` is an ember Tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input):
    """Whether the tensor's dtype is a floating-point type."""
    return input.is_floating_point()


def is_complex(input):
    """Whether the tensor's dtype is complex."""
    return input.is_complex()


def is_nonzero(input):
    """Whether a one-element tensor is nonzero."""
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous"
                           if input.numel() else
                           "Boolean value of Tensor with no values is ambiguous")
    return bool(input.item())


def numel(input):
    """The number of elements of a tensor."""
    return input.numel()


def _operand(x):
    if isinstance(x, Tensor):
        return x.dtype, D.ZERO_DIM if x.ndim == 0 else D.DIM
    return D.scalar_dtype(x), D.SCALAR


def result_type(tensor1, tensor2):
    """The dtype an arithmetic op on the two operands produces (PyTorch's weak promotion)."""
    return D.result_type_of([_operand(tensor1), _operand(tensor2)])


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print (as ``torch.set_printoptions``)."""
    from ember._tensor_str import set_printoptions as _set
    _set(precision, threshold, edgeitems, linewidth, profile, sci_mode)


def get_printoptions():
    """The current print options as a dict."""
    from ember._tensor_str import get_printoptions as _get
    return _get()
