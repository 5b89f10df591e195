"""The dispatcher's errors: ValueErrors forwards raise on purpose, and PyTorch's exceptions for
backend errors raised inside a forward (broadcasting, too large Python ints)."""

import numpy as np

__all__ = ["OpValueError", "translate_error", "broadcast_message", "not_differentiable",
           "check_broadcast", "RefusedFirst", "before_grad_checks"]


class OpValueError(ValueError):
    """A ValueError a forward raises on purpose, as PyTorch does (the dispatcher turns other
    ValueErrors, NumPy's, into RuntimeErrors)."""


# tracebacks show it as PyTorch's plain "ValueError: ..." (pickling yields a ValueError)
OpValueError.__name__ = OpValueError.__qualname__ = "ValueError"
OpValueError.__module__ = "builtins"


class RefusedFirst(NotImplementedError):
    """A dtype policy's refusal PyTorch raises in the op's own checks, before its
    TensorIterator checks that the operands broadcast (``clamp`` of complex tensors) and
    ``out=``'s dtype (``floor`` of complex tensors)."""

    def __reduce__(self):               # (pickled as the plain NotImplementedError it shows as)
        return NotImplementedError, self.args


# tracebacks show PyTorch's plain "NotImplementedError: ..."
RefusedFirst.__name__ = RefusedFirst.__qualname__ = "NotImplementedError"
RefusedFirst.__module__ = "builtins"


class BroadcastError(RuntimeError):
    """TensorIterator's error for operands that do not broadcast, which it raises after its
    check of an in-place op's self for overlapping memory (``ops/_inplace.py``)."""

    def __reduce__(self):               # (pickled as the plain RuntimeError it shows as)
        return RuntimeError, self.args


BroadcastError.__name__ = BroadcastError.__qualname__ = "RuntimeError"
BroadcastError.__module__ = "builtins"


def check_broadcast(*operands):
    """Raise PyTorch's error if the shapes of ``operands`` (arrays; numbers are skipped) do not
    broadcast: TensorIterator checks them before it picks a kernel, so before a kernel's
    refusal of a dtype."""
    shapes = [a.shape for a in operands if hasattr(a, "shape")]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise BroadcastError(broadcast_message(shapes)) from None


def translate_error(op, error, arrays):
    """PyTorch's exception for a backend error raised inside a forward."""
    if isinstance(error, (IndexError, TypeError, OpValueError)):
        return error
    if isinstance(error, OverflowError):        # NumPy's words for a too large Python int
        huge = [a for a in arrays if type(a) is int and not -2 ** 63 <= a < 2 ** 64]
        return error if not huge else OverflowError(
            "int too big to convert" if huge[0] > 0 else "can't convert negative int to unsigned")
    text = str(error)
    if "broadcast" in text:
        shapes = [a.shape for a in arrays if hasattr(a, "shape")]
        return RuntimeError(broadcast_message(shapes))
    return RuntimeError(f"{op.name}(): {text}")


def broadcast_message(shapes):
    """PyTorch's message for the first pair of shapes that do not broadcast."""
    a = shapes[0]
    for b in shapes[1:]:
        ndim = max(len(a), len(b))
        pa, pb = (1,) * (ndim - len(a)) + tuple(a), (1,) * (ndim - len(b)) + tuple(b)
        for dim in range(ndim - 1, -1, -1):
            if pa[dim] != pb[dim] and pa[dim] != 1 and pb[dim] != 1:
                return (f"The size of tensor a ({pa[dim]}) must match the size of tensor b "
                        f"({pb[dim]}) at non-singleton dimension {dim}")
        a = tuple(max(x, y) if min(x, y) != 0 else 0 for x, y in zip(pa, pb))
    return f"shapes {shapes} cannot be broadcast together"


def before_grad_checks(error):
    """``error`` marked as one PyTorch raises in its Python or composite layer, before
    autograd refuses an input that requires grad (``Op.refuse_grad``) and before the kernel's
    own checks. Returns it."""
    error.before_grad_checks = True
    return error


def not_differentiable(kernel, argument):
    """PyTorch's error for an input that requires grad where ``kernel`` has no derivative."""
    return RuntimeError(f"The function '{kernel}' is not differentiable with respect to "
                        f"argument '{argument}'. This input cannot have requires_grad True.")


def forward_ad_not_implemented(kernel):
    """PyTorch's error for forward-mode AD reaching ``kernel``, which has no forward
    derivative (see ``Op.refuse_forward_ad``)."""
    if kernel.startswith("aten::"):     # a kernel with no derivative at all (Op.not_implemented)
        return NotImplementedError(f"Trying to use forward AD with {kernel} that does not "
                                   f"support it.")
    return NotImplementedError(
        f"Trying to use forward AD with {kernel} that does not support it because it has not "
        f"been implemented yet.\nPlease file an issue to PyTorch at https://github.com/pytorch/"
        f"pytorch/issues/new?template=feature-request.yml so that we can prioritize its "
        f"implementation or submit a PR adding the implementation to derivatives.yaml")
