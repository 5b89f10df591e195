"""The one rule every elementwise op shares: line the batch dim up in front, then broadcast."""

from ember.func._batching import FALLBACK_NAMES, rule
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
    args = weak_scalars(op, args, flags)
    if op.name == "mul":
        shared = _sparse_shared(args, flags, size)
        if shared is not None:
            return call(op, shared, params)
    return call(op, align(args, flags, size), params)


def _sparse_shared(args, flags, size):
    """``[batched dense, shared COO]`` (in order) with the COO tensor (coalesced) repeated
    along a new leading sparse dim, the batch, and the dense one shaped to broadcast against
    it (PyTorch's vmap returns a COO product whose first sparse dim is the batch); None for
    other calls."""
    if len(args) != 2 or flags[0] == flags[1]:
        return None
    s, d = (args[1], args[0]) if flags[0] else args
    if not getattr(s, "is_sparse", False) or d.is_sparse:     # (is_sparse: COO only)
        return None
    from ember import arange, cat
    from ember.sparse._tensor import coo
    s = s.coalesce()                    # (PyTorch's product comes coalesced)
    nnz = s._i.shape[1]
    batch = arange(size, device=s._i.device).repeat_interleave(nnz)[None]
    indices = cat([batch, s._i.repeat(1, size)])
    values = s._v.repeat((size,) + (1,) * (s._v.ndim - 1))
    batched = coo(indices, values, (size,) + tuple(s.shape), True)
    logical = d.ndim - 1
    if logical < s.ndim:
        d = d.reshape((size,) + (1,) * (s.ndim - logical) + tuple(d.shape[1:]))
    return [d, batched] if flags[0] else [batched, d]


rule(*ELEMENTWISE)(_elementwise)
# PyTorch's conj_physical of a real tensor returns it (no op to loop over, no warning); of a
# complex one it calls _conj_physical, which its fallback names
FALLBACK_NAMES["conj_physical"] = (
    lambda values, params, level: "aten::_conj_physical" if values[0].is_complex() else None)
