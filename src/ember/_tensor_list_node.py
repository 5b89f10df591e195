"""One graph node for an out-of-place ``torch._foreach_*`` call, named as PyTorch names it.

PyTorch records a single node (``ForeachMulBackward1Scalar`` ...) shared by every output of
the call, with an edge to each input tensor; every output gets it as ``grad_fn``, even one
whose own input did not require grad. ember computes each output with the tensor op, on an
alias (an identity node) of each input that requires grad, and joins the outputs under one
node whose backward runs those per-op graphs back to the aliases: the aliases stop the inner
graphs, so each edge gets its partial derivative (an input whose own graph runs through
another input is not counted twice). In-place foreach calls keep the per-tensor nodes, as
PyTorch's do; under vmap and forward-mode AD (which PyTorch's foreach ops do not support)
the per-op graphs are left as they are. The in-place calls' per-tensor nodes take the names
PyTorch's overloads give them (``AddBackward1`` for a number), and the calls of PyTorch's
kernels without a derivative (``_foreach_addcmul`` with a tensor of values) record its node
NotImplemented.
"""

import functools
import re
import weakref

import ember
from ember._tensor import Tensor
from ember.autograd._forward_traces import TRACES as _TRACES
from ember.autograd.forward_ad import STATE as _FORWARD_AD
from ember.autograd.function import BackwardFunction, Function
from ember.autograd.grad_mode import is_grad_enabled
from ember.autograd.graph import _FREED
from ember.func._batched import STATE as _VMAP

# op -> node-name suffix for each kind of second operand (PyTorch's overload numbering)
_BINARY_SUFFIX = {
    "add": {"List": "0List", "Scalar": "1Scalar", "ScalarList": "1ScalarList",
            "Tensor": "0Tensor"},
    "sub": {"List": "0List", "Scalar": "1Scalar", "ScalarList": "1ScalarList"},
    "mul": {"List": "0List", "Scalar": "1Scalar", "ScalarList": "1ScalarList",
            "Tensor": "0Tensor"},
    "div": {"List": "0", "Scalar": "1Scalar", "ScalarList": "1ScalarList", "Tensor": "0Tensor"},
    "clamp_max": {"List": "1List", "Scalar": "0Scalar", "ScalarList": "0ScalarList"},
    "clamp_min": {"List": "1List", "Scalar": "0Scalar", "ScalarList": "0ScalarList"},
    "maximum": {"List": "0List", "Scalar": "0", "ScalarList": "1"},
    "minimum": {"List": "0List", "Scalar": "0", "ScalarList": "1"},
    "pow": {"List": "0", "Scalar": "0Scalar", "ScalarList": "1", "Number": "2"},
    "addcmul": {"Scalar": "0Scalar", "ScalarList": "0ScalarList"},
    "addcdiv": {"Scalar": "0Scalar", "ScalarList": "0ScalarList"},
    "lerp": {"List": "1List", "Scalar": "0Scalar", "ScalarList": "0ScalarList"},
}
_OTHER = {"norm": "0", "max": "1", "clone": "0"}

# (in-place op, kind of second operand) -> the node PyTorch's call leaves on each tensor,
# where it is not the tensor op's own
_INPLACE_NODES = {
    **{(n, k): f"{_n}Backward1" for n, _n in (("add", "Add"), ("sub", "Sub"))
       for k in ("Scalar", "ScalarList", "Tensor")},
    **{(n, k): f"{_n}Backward1" for n, _n in (("mul", "Mul"), ("div", "Div"))
       for k in ("Scalar", "ScalarList")},
    ("pow", "Tensor"): "PowBackward0", ("clamp_min", "Tensor"): "ClampMinBackward0",
    ("clamp_max", "Tensor"): "ClampMaxBackward0", ("maximum", "List"): "MaximumBackward0",
    ("minimum", "List"): "MinimumBackward0"}


def _camel(name):
    """``clamp_max`` -> ``ClampMax``, ``log1p`` -> ``Log1P`` (PyTorch's node-name casing)."""
    return re.sub(r"(^|_|(?<=\d))([a-z])", lambda m: m.group(2).upper(), name)


def kind_of(other):
    """Which overload PyTorch's parser picks for a foreach op's second operand."""
    if isinstance(other, (list, tuple)):
        return "List" if other and isinstance(other[0], Tensor) else "ScalarList"
    if isinstance(other, Tensor):
        return "Tensor"
    return "Scalar"


@functools.lru_cache(maxsize=None)
def node_name(name, kind=None):
    """PyTorch's node name for ``_foreach_<name>`` with a second operand of ``kind``."""
    if kind is None:
        return f"Foreach{_camel(name)}Backward{_OTHER.get(name, '0')}"
    suffix = _BINARY_SUFFIX.get(name, {})
    if kind == "Tensor" and "Tensor" not in suffix:
        kind = "Scalar"             # a 0-dim tensor read as the Scalar overload
    return None if kind not in suffix else f"Foreach{_camel(name)}Backward{suffix[kind]}"


_FUNCTIONS = {}


class _Joined(Function):
    """The outputs, detached, under one node whose backward runs their own graphs."""

    @staticmethod
    def forward(ctx, outs, aliases, *inputs):
        ctx.outs, ctx.aliases = outs, aliases
        ctx.set_materialize_grads(False)
        return tuple(o.detach() for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        if ctx.outs is None:
            raise RuntimeError(_FREED)
        pairs = [(o, g) for o, g in zip(ctx.outs, grads) if g is not None and o.requires_grad]
        wanted = [i for i, a in enumerate(ctx.aliases)
                  if a is not None and ctx.needs_input_grad[i + 2]]
        result = [None] * (len(ctx.aliases) + 2)
        if pairs and wanted:
            try:
                found = ember.autograd.grad(
                    [o for o, _ in pairs], [ctx.aliases[i] for i in wanted],
                    [g for _, g in pairs], retain_graph=True, create_graph=is_grad_enabled(),
                    allow_unused=True)
            except RuntimeError as e:
                raise _renamed_version_error(ctx, e) from None
            for i, g in zip(wanted, found):
                result[i + 2] = g
        return tuple(result)


class _Alias(Function):
    """The input again, as a new graph node: where an inner graph stops (not a view, which
    an in-place change of its base would re-record)."""

    @staticmethod
    def forward(ctx, t):
        return t.detach()

    @staticmethod
    def backward(ctx, grad):
        return grad


def _renamed_version_error(node, error):
    """``error`` from the per-op graphs; where it is PyTorch's error for a saved tensor
    changed in place, it names the tensor as PyTorch's does: a changed input by its own node
    (``output 0 of Add``), a changed output by this call's node (``output 1 of
    ForeachExp``), not by the aliases and per-op nodes inside."""
    watched = getattr(node, "watched", None)
    if watched is None or not str(error).startswith("one of the variables needed for "
                                                    "gradient computation has been modified"):
        return error
    from ember.autograd.graph import _modified_message
    inputs, versions, results = watched
    found = re.search(r"is at version (\d+); expected version (\d+) ", str(error))
    if found is None:
        return error
    seen = int(found.group(1)), int(found.group(2))     # (the tensor's: among those changed)
    for t, v in zip(inputs, versions):
        if (t._version, v) == seen:
            return RuntimeError(_modified_message(t, v))
    for i, (ref, v) in enumerate(results):     # (saved as outputs: named by this node)
        t = ref()
        if t is not None and (t._version, v) == seen:
            return RuntimeError(_modified_message(None, v, t._version, node, (t._data, i)))
    return error


def _release(node):
    """Free the inner graphs with the node (a second backward then fails, as PyTorch's)."""
    BackwardFunction._release(node)
    node.outs = node.aliases = None


def _transformed():
    """Whether a vmap or forward-mode AD is active (the per-op graphs serve those)."""
    return bool(_VMAP.levels) or _FORWARD_AD.level is not None or bool(_TRACES.starts)


def joined(name, compute, *operands):
    """``compute(*operands)`` (a tuple of tensors), its outputs under one shared node named
    ``name`` (None: no node) with an edge to each tensor among ``operands`` (tensors and
    lists), when autograd records this call."""
    if name is None or not is_grad_enabled():
        return compute(*operands)
    inputs = tensors_of(*operands)
    if not any(t.requires_grad for t in inputs) or _transformed():
        return compute(*operands)
    alias_of = {}                   # a tensor passed twice gets one alias, one gradient
    aliases = []
    for t in inputs:
        first = t.requires_grad and id(t) not in alias_of
        if first:
            alias_of[id(t)] = _Alias.apply(t)
        aliases.append(alias_of[id(t)] if first else None)
    outs = compute(*(_swapped(a, alias_of) for a in operands))
    fn = _FUNCTIONS.get(name)
    if fn is None:
        fn = _FUNCTIONS[name] = type(name, (_Joined,), {
            "_node_name": name, "_node_attrs": {"_release": _release}})
    versions = [t._version for t in inputs]
    results = fn.apply(outs, tuple(aliases), *inputs)
    node = results[0]._grad_fn if results else None
    if node is not None:            # (what a saved-tensor version error names)
        node.watched = (inputs, versions, [(weakref.ref(r), r._version) for r in results])
    return results


def name_inplace(name, kind, t):
    """``t``, just written in place by ``_foreach_<name>_`` with a second operand of ``kind``,
    its node named as PyTorch's call names it."""
    node = _INPLACE_NODES.get((name, kind))
    if node is not None and t._view is None and t._grad_fn is not None:
        from ember.ops._registry import rename_node
        rename_node(t, node)
    return t


def _records(tensors):
    return is_grad_enabled() and any(t.requires_grad for t in tensors) and not _transformed()


def not_implemented(kernel, compute, *operands):
    """``compute(*operands)`` (a tuple of new tensors), computed untracked, each output given
    PyTorch's node NotImplemented for ``kernel`` over the tensors among ``operands``."""
    tensors = tensors_of(*operands)
    if not _records(tensors):
        return compute(*operands)
    from ember.ops._not_implemented import hang_not_implemented
    with ember.no_grad():
        outs = compute(*operands)
    for o in outs:
        hang_not_implemented(o, kernel, tensors)
    return outs


def not_implemented_inplace(kernel, write, t, *operands):
    """``write()``, an in-place write into ``t``, untracked where autograd records it: ``t``
    then gets PyTorch's node NotImplemented for ``kernel`` over itself and the tensors among
    ``operands`` (a view, or an unrecorded call, takes the tensor op's own write)."""
    if t._view is not None or not is_grad_enabled():     # (the common no_grad step: cheap)
        return write()
    tensors = [t] + tensors_of(*operands)
    if not _records(tensors):
        return write()
    from ember.ops._inplace import _check_leaf
    from ember.ops._not_implemented import hang_not_implemented
    _check_leaf(t)
    with ember.no_grad():
        write()
    hang_not_implemented(t, kernel, tensors)
    return t


def _swapped(arg, alias_of):
    """``arg`` (a tensor, a list of them, or anything else) with each tensor's alias."""
    if isinstance(arg, Tensor):
        return alias_of.get(id(arg), arg)
    if isinstance(arg, (list, tuple)):
        return [alias_of.get(id(a), a) if isinstance(a, Tensor) else a for a in arg]
    return arg


def tensors_of(*args):
    """The tensors among ``args`` (tensors and lists of tensors and numbers), in order."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(t for t in a if isinstance(t, Tensor))
    return out
