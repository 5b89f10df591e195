"""The one rule every elementwise op shares: line the batch dim up in front, then broadcast."""

from ember.func._batching import rule
from ember.ops._registry import REGISTRY, call

__all__ = ["ELEMENTWISE", "align"]

# op modules whose ops are elementwise (output shape = broadcast of the inputs' shapes)
_MODULES = {"arithmetic", "unary_math", "binary_math", "comparison", "activations",
            "activations_smooth", "special_math", "special_poly", "math_odds"}
_MORE = {"logaddexp", "logaddexp2", "angle", "complex", "polar", "_to_copy", "_alias", "clone",
         "conj", "real", "imag", "_masked_scale", "nn.functional.logsigmoid",
         "_norm_input_grad", "_kernel_input"}
_NOT = {"prelu", "nn.functional.glu", "_glu_backward", "isin"}    # isin: the elements' shape

ELEMENTWISE = frozenset(
    name for name, o in REGISTRY.items()
    if (o.forward.__module__.rsplit(".", 1)[-1] in _MODULES or name in _MORE)
    and name not in _NOT)


def align(values, flags, size):
    """Give every tensor operand a batch dim and as many dims as the widest operand, so that
    right-aligned broadcasting pairs logical dims with logical dims. Unbatched operands get
    a zero-stride batch dim (kernels may expect their operands' ranks to match), except 0-dim
    ones, which must stay 0-dim for type promotion."""
    ndim = 0
    for v, f in zip(values, flags):
        if hasattr(v, "ndim"):
            ndim = max(ndim, v.ndim - f)
    out = []
    for v, f in zip(values, flags):
        if f:
            if v.ndim - 1 < ndim:
                v = v.reshape((size,) + (1,) * (ndim - v.ndim + 1) + tuple(v.shape[1:]))
        elif getattr(v, "ndim", 0):
            v = v.reshape((1,) * (ndim - v.ndim + 1) + tuple(v.shape))
            v = v.expand((size,) + tuple(v.shape[1:]))
        out.append(v)
    return out


def weak_scalars(op, args, flags):
    """Values of logically 0-dim operands cast as type promotion treats 0-dim tensors (weakly:
    ``float64 0-dim * float32 tensor`` is float32); their batch dim would make them strong."""
    if op.promote is None or not any(f and a.ndim == 1 for a, f in zip(args, flags)):
        return args
    tensors = [(a, a.ndim - f) for a, f in zip(args, flags) if hasattr(a, "ndim")]
    if len({a.dtype for a, _ in tensors}) < 2 or not any(n for _, n in tensors):
        return args
    from ember import result_type
    from ember._creation import empty
    target = None
    for a, n in tensors:
        rep = empty((1,) * n, dtype=a.dtype)
        target = rep if target is None else empty((1,) * max(n, target.ndim),
                                                  dtype=result_type(target, rep))
    dtype = target.dtype
    return [a.to(dtype) if f and a.ndim == 1 and a.dtype is not dtype and
            a.dtype.category == dtype.category else a for a, f in zip(args, flags)]


def _elementwise(op, args, flags, params, size):
    return call(op, align(weak_scalars(op, args, flags), flags, size), params)


rule(*ELEMENTWISE)(_elementwise)
