"""Which in-place ops PyTorch's vmap runs through its slow fallback (and so warns about), with the
overload its warning names: ``aten::scatter_.value``, ``aten::fmod_.Scalar``, ``aten::put_``.

ember batches many of these itself (elementwise ops) or loops over others quietly; what decides
the warning is PyTorch's coverage, read off torch 2.13: it batches index_add_, index_fill_,
masked_fill_ with a number, scatter_add_ and scatter_reduce_ in place, and none of the
elementwise ops named below."""

from ember._tensor import Tensor

__all__ = ["elementwise_fallback_name", "fallback_name"]

# non-elementwise in-place ops PyTorch batches in place: no warning
_BATCHED = frozenset({"index_add", "index_fill", "scatter_add", "scatter_reduce"})

# elementwise in-place ops PyTorch never batches: the overload by the second operand's kind
_SCALAR_OR_TENSOR = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "fmod", "remainder",
                               "float_power"})
_PLAIN = frozenset({"addcdiv", "addcmul", "square", "polygamma"})
# ... and those it batches only with a Python number for ``other`` (a tensor takes its fallback)
_TENSOR_ONLY = frozenset({"hypot", "nextafter", "ldexp", "igamma", "igammac", "heaviside"})


def fallback_name(op, args, params):
    """PyTorch's ATen name for the non-elementwise in-place ``op`` its fallback runs, or None
    where PyTorch batches it."""
    name = op.name
    tensor = len(args) > 2 and isinstance(args[2], Tensor)
    if name in _BATCHED or (name == "masked_fill" and not tensor):
        return None
    if name == "scatter":
        reduce = params[-1] is not None
        overload = ("reduce" if tensor else "value_reduce") if reduce else \
            ("src" if tensor else "value")
        return f"aten::scatter_.{overload}"
    if name == "masked_fill":
        return "aten::masked_fill_.Tensor"
    return f"aten::{name}" if name.endswith("_") else f"aten::{name}_"     # fill_diagonal_


def elementwise_fallback_name(op, args):
    """PyTorch's ATen name for the elementwise in-place ``op`` its fallback runs, or None where
    PyTorch batches it."""
    name = op.name
    other = len(args) > 1 and isinstance(args[1], Tensor)
    if name in _SCALAR_OR_TENSOR:
        return f"aten::{name}_.{'Tensor' if other else 'Scalar'}"
    if name == "xlogy":
        return f"aten::xlogy_.{'Tensor' if other else 'Scalar_Other'}"
    if name == "floor_divide":
        return "aten::floor_divide_.Tensor"
    if name == "lerp":
        weight = len(args) > 2 and isinstance(args[2], Tensor)
        return f"aten::lerp_.{'Tensor' if weight else 'Scalar'}"
    if name == "clamp":
        bounds = any(isinstance(a, Tensor) for a in args[1:])
        return "aten::clamp_.Tensor" if bounds else "aten::clamp_"
    if name in _PLAIN:
        return f"aten::{name}_"
    if other and (name in _TENSOR_ONLY or name == "pow"):
        return "aten::pow_.Tensor" if name == "pow" else f"aten::{name}_"
    return None
