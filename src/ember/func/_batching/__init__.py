"""Batching rules: how each op runs on batched values (see NOTE [Batched tensors]).

A rule ``rule(op, args, flags, params, size)`` gets the op's inputs in registry order with
every operand batched at the level being handled replaced by its value (batch at dim 0) and
``flags`` saying which (lists for sequence inputs); it returns the values of the outputs
(batch at dim 0), or NotImplemented to take the loop fallback. A decomposition
``fn(*inputs, *params)`` instead re-expresses the op with other ops on the logical tensors.
Rules are keyed by registry name (``ember.ops._registry.REGISTRY``); ops without one run
once per batch element (warning on every call, naming the ATen op as PyTorch's fallback does)
and the results are stacked.
"""

import threading
import warnings

from ember._tensor import Tensor
from ember.func._batched import STATE, BatchedTensor, _fake, is_batched_at, level_size, wrap
from ember.ops._dispatch import RAW_OUTPUTS
from ember.ops._registry import call
from ember.overrides._protocol import op_arguments

__all__ = ["RULES", "DECOMPOSE", "rule", "decompose", "dispatch", "dispatch_params",
           "handled_level", "inplace_copy", "warn_fallback", "fallback_aten", "FALLBACK_NAMES",
           "differentiated_within", "repeating", "warn_outer_levels"]

RULES = {}
DECOMPOSE = {}
# the ops whose rules batch their parameters too (advanced indices); a call with a parameter
# batched at the level being handled takes the loop for any other op's rule
PARAM_RULES = frozenset({"_index", "index_put", "histogramdd"})


def rule(*names):
    """Register a batching rule for the ops ``names``."""
    def register(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return register


def decompose(*names):
    """Register a decomposition (a function on the logical tensors) for the ops ``names``."""
    def register(fn):
        for n in names:
            DECOMPOSE[n] = fn
        return fn
    return register


def _flat(op, args):
    if not op.seq_inputs:
        return args
    return op.flatten_inputs(args)[0]


def dispatch(func, args, kwargs):
    """Run one op call that has BatchedTensor operands (``BatchedTensor.__torch_function__``)."""
    op = getattr(func, "_ember_op", None)
    if op is None and getattr(func, "__name__", None) in BatchedTensor._takes_functions:
        return _like_factory(func, args, kwargs)
    if op is None and func is Tensor.copy_:
        return _copy_into(*args, **kwargs)
    if op is None and func is Tensor.fill_:
        return _fill_into(*args, **kwargs)
    if op is None:
        raise TypeError(f"vmap: {getattr(func, '__name__', func)} is not an ember op")
    args, params = op_arguments(op, args, kwargs)
    level = _top_level(op, args, params)
    if func is not op.function:
        return _inplace(op, args, params, level)
    return _finish(op, _run(op, args, params, level), kwargs.get("out"))


def _like_factory(func, args, kwargs):
    """zeros/ones/empty/full_like of a batched tensor: a batched tensor made from its value, as
    PyTorch's (code writes such buffers per example, or fills them with random draws)."""
    x = args[0] if args else kwargs.pop("input")
    if type(x) is not BatchedTensor:        # a batched fill value: the factory's own error
        return func.__wrapped__(x, *args[1:], **kwargs)
    return wrap(func(x._value, *args[1:], **kwargs), x._level)


def dispatch_params(op, inputs, params, out, inplace=False):
    """Run one op call whose only BatchedTensors are among its parameters (``x[i]`` with a
    batched ``i``; see NOTE [Batched parameters] in ember/ops/_dispatch.py)."""
    args = list(inputs)
    level = _top_level(op, args, params)
    if inplace:
        return _inplace(op, args, params, level)
    result = _run(op, args, params, level)
    if out is RAW_OUTPUTS:
        return result if isinstance(result, tuple) else (result,)
    return _finish(op, result, out)


def _top_level(op, args, params):
    """The highest vmap level among a call's inputs and parameters: handled first."""
    return max(_levels_in(_flat(op, args)) + _levels_in(params))


def _levels_in(values):
    levels = []
    for x in values:
        if type(x) is BatchedTensor:
            levels.append(x._level)
        elif type(x) is list or isinstance(x, tuple):
            levels.extend(_levels_in(x))
    return levels


def _finish(op, result, out):
    """The result of a batched call as the op returns it: written to ``out``, or named."""
    if out is not None:
        targets = out if isinstance(out, (tuple, list)) else (out,)
        results = result if isinstance(result, tuple) else (result,)
        for dst, res in zip(targets, results):
            dst.copy_(res)
        return out
    if op.namedtuple is not None and isinstance(result, tuple):
        return op.namedtuple(*result)
    return result


def _unwrap(x, level):
    if isinstance(x, (list, tuple)):
        return ([y._value if is_batched_at(y, level) else y for y in x],
                [is_batched_at(y, level) for y in x])
    if is_batched_at(x, level):
        return x._value, True
    return x, False


def unwrap_args(args, level):
    values, flags = [], []
    for x in args:
        v, f = _unwrap(x, level)
        values.append(v)
        flags.append(f)
    return values, flags


def _run(op, args, params, level):
    fn = DECOMPOSE.get(op.name)
    if fn is not None:
        return fn(*args, *params)
    size = level_size(level)
    values, flags = unwrap_args(args, level)
    res = NotImplemented
    r = RULES.get(op.name)
    if r is not None and (op.name in PARAM_RULES or level not in _levels_in(params)):
        STATE.handled = level
        res = r(op, values, flags, params, size)
    if res is NotImplemented:
        res = _loop(op, values, flags, params, size, level)
    if type(res) is tuple or (isinstance(res, tuple) and hasattr(res, "_fields")):
        return tuple(wrap(r, level) if isinstance(r, Tensor) else r for r in res)
    return wrap(res, level)


def handled_level():
    """The vmap level the running rule handles (for rules that batch their parameters; read
    first thing: rules nest)."""
    return STATE.handled


def _select(x, flag, b):
    if isinstance(x, list):
        return [_select(y, f, b) for y, f in zip(x, flag)]
    return x[b] if flag else x


def _select_params(p, level, b):
    if is_batched_at(p, level):
        return p._value[b]
    if type(p) in (tuple, list) or (isinstance(p, tuple) and not hasattr(p, "_fields")):
        return type(p)(_select_params(q, level, b) for q in p)
    return p


def _aten_name(op):
    """The ATen operator PyTorch names for ``op``: ``aten::linalg_det``, ``aten::gelu``."""
    name = op.short_name if op.name.startswith("nn.functional.") else op.name
    return "aten::" + name.replace(".", "_")


# ops whose fallback warning depends on the call: registry name -> fn(values, params, level)
# giving the ATen name PyTorch's warning gives (an overload: ``aten::quantile.scalar``), or
# None for no warning; ``level`` None asks for the op's own name
FALLBACK_NAMES = {}


def differentiated_within(level):
    """Whether a transform differentiates inside the vmap ``level`` (``vmap(grad(f))``):
    PyTorch's composite ops then decompose, and their backwards run under vmap."""
    from ember.func._autodiff import _DEPTH
    return bool(_DEPTH.value) and level in {lv.level for lv in STATE.levels[:_DEPTH.levels]}


def fallback_aten(op, values, params, level=None):
    """The ATen name PyTorch's fallback warning gives for ``op`` called with ``values`` at the
    vmap ``level`` (None: no warning)."""
    name = FALLBACK_NAMES.get(op.name)
    return name(values, params, level) if name else _aten_name(op)


class _Repeats(threading.local):
    # how many calls PyTorch's fallback makes for the one call a rule makes now
    n = 1


_REPEATS = _Repeats()


class repeating:
    """Context manager: a rule's call stands for ``k`` calls of PyTorch's fallback loop (one
    per example of the level it handles), each warning at the outer levels."""

    def __init__(self, k):
        self.k = k

    def __enter__(self):
        self.outer = _REPEATS.n
        _REPEATS.n = self.outer * self.k

    def __exit__(self, *exc):
        _REPEATS.n = self.outer


def warn_fallback(aten):
    """PyTorch's warning for a call of the ATen op ``aten`` run once per batch element."""
    # every call, blaming the user's line, as PyTorch's fallback warns (once per call it makes)
    from ember._warn import outside_level
    for _ in range(_REPEATS.n):
        warnings.warn(f"There is a performance drop because we have not yet implemented the "
                      f"batching rule for {aten}. Please file us an issue on GitHub so "
                      f"that we can prioritize its implementation.", UserWarning,
                      stacklevel=outside_level())


def warn_outer_levels(aten, values, size):
    """The warnings PyTorch's fallback gives at the outer vmap levels ``values`` (a rule's,
    just unwrapped at a level of ``size`` examples) are still batched at, for a rule that
    batches them all at once: each level's loop calls the op once per example of the levels
    inside it."""
    levels = set()
    for x in values:
        for y in x if isinstance(x, (list, tuple)) else (x,):
            while type(y) is BatchedTensor:
                levels.add(y._level)
                y = y._value
    for lv in sorted(levels, reverse=True):
        with repeating(size):
            warn_fallback(aten)
        size *= level_size(lv)


def _loop(op, values, flags, params, size, level):
    """The fallback: run the op once per batch element and stack the results."""
    aten = fallback_aten(op, values, params, level)
    if aten is not None:
        warn_fallback(aten)
    if size == 0:
        aten = fallback_aten(op, values, params) if op.name in FALLBACK_NAMES else \
            f"aten::{op.short_name}"
        raise RuntimeError(f"Batching rule not implemented for {aten}. The fallback path does "
                           f"not support vmap over dims of size 0.")
    outs = [call(op, [_select(v, f, b) for v, f in zip(values, flags)],
                 _select_params(params, level, b)) for b in range(size)]
    from ember import stack
    first = outs[0]
    try:
        if isinstance(first, tuple):
            return tuple(stack([o[i] for o in outs]) for i in range(len(first)))
        return stack(outs)
    except RuntimeError:
        raise RuntimeError(f"vmap: We do not support batching operators that can output "
                           f"dynamic shape. Attempted to vmap over {op.name}. Please file an "
                           f"issue at https://github.com/pytorch/pytorch/issues if you need "
                           f"this feature.") from None


def _inplace(op, args, params, level):
    from ember.func._batching.elementwise import ELEMENTWISE, align
    from ember.func._batching.inplace_fallback import elementwise_fallback_name, fallback_name
    from ember.ops._inplace import call_inplace
    self = args[0]
    size = level_size(level)
    if not is_batched_at(self, level):
        raise RuntimeError(_unbatched_inplace(op, self, args, params, size, level))
    if op.name == "as_strided":
        # PyTorch's fallback restrides a slice per example, which leaves self as it was
        warn_fallback("aten::as_strided_")
        return self
    if op.view:             # x.t_(): self takes the batched view (NOTE [In-place view ops])
        self._value = _run(op, args, params, level)._value
        self._data = _fake(self._value)     # and its logical shape with it
        return self
    values, flags = unwrap_args(args, level)
    if op.name in ELEMENTWISE and not op.seq_inputs:
        aten = elementwise_fallback_name(op, args)
        if aten is not None:
            warn_fallback(aten)
        call_inplace(op, align(values, flags, size), params)
        return self
    if op.name == "index_put":
        from ember.func._batching.advanced_index import batched_put
        from ember.func._batching.shape import batched_indices
        batched = batched_put(values, flags, params, size, level)
        if batched is not None:         # per-example indices
            call_inplace(op, *batched)
            return self
        indices = batched_indices(params[0], level)
        if indices is not None and flags[1]:    # per-example values: under each region
            values = _region_aligned(values, params[0], size)
            indices = None if values is None else indices
        if indices is not None:
            call_inplace(op, values, (indices, params[1]))
            return self
    aten = fallback_name(op, args, params)
    if aten is not None:
        warn_fallback(aten)
    for b in range(size):
        call_inplace(op, [_select(v, f, b) for v, f in zip(values, flags)],
                     _select_params(params, level, b))
    return self


def _region_aligned(values, indices, size):
    """``[x, v]`` (both batched values) with ``v``'s example dims moved under the trailing
    dims of the region ``indices`` select in an example of ``x``, as index_put broadcasts
    them (``buf[i] = row`` in each example); None when the region's rank is not known."""
    from ember.func._batching.shape import _region_ndim
    x, v = values
    region = _region_ndim(x.ndim - 1, indices)
    if region is None:
        return None
    if v.ndim - 1 < region:
        v = v.reshape((size,) + (1,) * (region - v.ndim + 1) + tuple(v.shape[1:]))
    return [x, v]


# PyTorch's message for an in-place op whose ``self`` is not batched at a level an operand
# is batched at depends on how the op is batched there: a broadcast check (these ops), one
# message for arithmetic (these), one naming the op (these), or its fallback's (the rest)
_SHAPE_MESSAGE = frozenset({"add", "atan2", "copysign", "bitwise_and", "bitwise_or",
                            "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "gcd",
                            "lcm"})
_ARITHMETIC = frozenset({"sub", "mul", "div", "clamp_min", "clamp_max", "logical_and",
                         "logical_or", "logical_xor", "copy_"})
_NAMED = frozenset({"index_add", "index_fill", "index_put", "scatter_add", "scatter_reduce",
                    "fill_"})
_UNBATCHED_SELF = (
    "vmap: {op}(self, *extra_args) is not possible because there exists a Tensor `other` in "
    "extra_args that has more elements than `self`. This happened due to `other` being "
    "vmapped over but `self` not being vmapped over {where}. Please try to use out-of-place "
    "operators instead of {op}. If said operator is being called inside the PyTorch "
    "framework, please file a bug report instead.")


def _unbatched_inplace(op, self, args, params, size, level):
    """The error for an in-place op on a ``self`` not batched at ``level``, which another
    operand is batched at."""
    name = op.name
    if name == "index_put" and all(isinstance(k, (slice, int, type(None), type(...)))
                                   for k in params[0]):
        name = "copy_"                  # x[1:] = y: a copy_ into a basic view
    if name in _SHAPE_MESSAGE:
        return _unbatched_self(self, args, size)
    # masked_fill_ with a number takes PyTorch's arithmetic path, with a tensor value the
    # named one
    if name in _ARITHMETIC or (name == "masked_fill" and not any(
            isinstance(a, Tensor) for a in args[2:])):
        return _UNBATCHED_SELF.format(op="inplace arithmetic", where="in a vmap")
    short = op.short_name if op.short_name.endswith("_") else op.short_name + "_"
    if name in _NAMED:
        return _UNBATCHED_SELF.format(op=short, where="in a vmap")
    depth = next(i for i, lv in enumerate(STATE.levels, 1) if lv.level == level)
    return _UNBATCHED_SELF.format(op=f"aten::{short}", where=f"at level {depth}")


def _unbatched_self(self, args, size):
    """PyTorch's message for an in-place op on an unbatched tensor with batched operands."""
    import numpy as np
    shapes = [tuple(a.shape) for a in _flat_list(args) if isinstance(a, Tensor)]
    return (f"output with shape {list(self.shape)} doesn't match the broadcast shape "
            f"{[size] + list(np.broadcast_shapes(*shapes))}")


def _flat_list(args):
    return [y for x in args for y in (x if isinstance(x, (list, tuple)) else (x,))]


_UNBATCHED_COPY = (
    "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor "
    "`other` in extra_args that has more elements than `self`. This happened due to `other` "
    "being vmapped over but `self` not being vmapped over in a vmap. Please try to use "
    "out-of-place operators instead of inplace arithmetic. If said operator is being called "
    "inside the PyTorch framework, please file a bug report instead.")


def _copy_into(self, src, non_blocking=False):
    """``self.copy_(src)`` reaching vmap: a batched ``src`` cannot fit an unbatched ``self``."""
    if type(self) is BatchedTensor:
        return inplace_copy(self, src)
    raise RuntimeError(_UNBATCHED_COPY)


def _fill_into(self, value):
    """``self.fill_(value)`` reaching vmap: a batched ``value`` cannot fill an unbatched
    ``self``."""
    if type(self) is BatchedTensor:
        return inplace_copy(self, value, "fill_")
    raise RuntimeError(_UNBATCHED_SELF.format(op="fill_", where="in a vmap"))


def inplace_copy(self, src, name="inplace arithmetic"):
    """``self.copy_(src)`` (or ``fill_``, ``name``) for a BatchedTensor ``self``."""
    level = self._level
    if type(src) is BatchedTensor and src._level > level:
        raise RuntimeError(_UNBATCHED_SELF.format(op=name, where="in a vmap"))
    value = self._value
    if is_batched_at(src, level):
        src = src._value
        src = src.reshape((src.shape[0],) + (1,) * (value.ndim - src.ndim) + tuple(src.shape[1:]))
    if isinstance(src, Tensor) and not (name == "fill_" and type(src) is BatchedTensor):
        value.copy_(src)
    else:                               # a number, or a value batched at an outer level
        value.fill_(src)
    return self


from ember.func._batching import (elementwise, linalg, nn, products,  # noqa: E402,F401
                                  reductions, shape)
from ember.func._batching import indexing  # noqa: E402,F401  (after shape: wraps its rules)
from ember.func._batching import advanced_index  # noqa: E402,F401  (after shape, likewise)
from ember.func._batching import recurrent  # noqa: E402,F401
