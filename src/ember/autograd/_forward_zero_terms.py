"""The zero-tangent terms of PyTorch's forward formulas, for ``forward_ad``'s tangents.

NOTE [Zero-tangent terms]
PyTorch's forward formula of an op sums one term per differentiable operand, an operand
without a tangent (a plain tensor, a Python number it wraps as a tensor) taking a zero one:
``x * y`` has ``y_t * x_p + x_t * y_p``. Under grad mode such a term still reads its primals,
so the tangent requires grad when one of them does (``AddBackward0``), though the term adds
nothing to its value or to a gradient. ember's tangent is the op's Jacobian applied to the
dual operands' tangents alone (NOTE [Dual tensors]), which reads only what that product
needs: ``(x * 2.0)``'s is ``t * 2.0``. So where its graph misses an operand that requires
grad (a bounded walk: it stops at nodes older than the op's run), the op runs once more to
find which of those the other operands' terms read (their vjps' graphs), and the tangent gets
a node ``AddBackward0`` that links it to them with a zero gradient (``autograd.grad`` of the
tangent by ``x`` gives zeros, as PyTorch's, not an "unused" error). What that run finds is
kept per op and operands' signature (types, dtypes, shapes, which require grad, the constant
parameters: ``_signature``), as the graph of a derivative does not depend on the tensors'
values: a model's layers run the op again once, not at each call (``linear``'s bias, which
its tangent does not read, is missed at each). A number where PyTorch takes a Scalar
(``Op.number_overload``: lerp's weight, clamp's bounds) has no term, nor has an input that is
not differentiable by definition. An integer or bool operand (``x * mask``, ``x / counts``,
``x * True``) has a term too, as in PyTorch (``x * int_tensor``'s tangent requires grad, with
zeros for ``x``; ``x + int_tensor``'s reads no primal): its run takes it as float64.
"""

from ember._dtype import dtype as _DType
from ember._shape import Size
from ember._tensor import Tensor, _make
from ember.autograd.graph import AccumulateGrad, Node, history

__all__ = ["AddBackward0", "link_zero_terms"]

_NUMBERS = (int, float, complex)
_CONSTANTS = frozenset([int, float, complex, bool, str, _DType])


class AddBackward0(Node):
    """A tangent linked to the primals its zero-tangent terms read: the gradient passes to
    the tangent, zeros to the primals (NOTE [Zero-tangent terms])."""

    __slots__ = ("_metas",)

    def apply(self, grads):
        """The gradient for the tangent; zeros for the primals."""
        from ember._creation import zeros
        return [grads[0]] + [zeros(shape, dtype=dtype, device=device)
                             for shape, dtype, device in self._metas]


def _extra_positions(op, flat, dual):
    """The operands, other than the dual ones, that have a term in PyTorch's formula."""
    skip = set(op.dropped_inputs or ())
    for entry in op.refused_grads or ():
        skip.add(entry[0])
    for group in op.number_groups:
        skip.update(i for i in group if isinstance(flat[i], _NUMBERS))
    found = []
    for i, x in enumerate(flat):
        if i in dual or i in skip:
            continue
        if isinstance(x, Tensor) or type(x) in _NUMBERS or type(x) is bool:
            found.append(i)     # (an integer or bool tensor too: NOTE above)
    return found


def link_zero_terms(op, flat, lengths, params, dual, leaves, start, tangents, call):
    """``tangents`` (one per output, None where it has none; ``leaves``: the dual operands'
    in the run that made them, whose nodes numbered from ``start`` are its own), each linked
    to the operands requiring grad that its graph misses but its op's zero-tangent terms
    read."""
    req = [i for i, x in enumerate(flat) if isinstance(x, Tensor) and x.requires_grad]
    if not req:
        return tangents
    extra = _extra_positions(op, flat, dual)
    if not extra:
        return tangents
    own = dict(zip(dual, leaves))
    targets = {}
    for i in req:
        node = own[i]._grad_fn if i in own else history(flat[i])[0]
        if node is not None:
            targets[id(node)] = i
    missing = {}
    for k, t in enumerate(tangents):
        if t is not None:
            miss = set(targets.values()) - set(_reached([t], targets, start).values()) \
                if t.requires_grad else set(targets.values())
            if miss:
                missing[k] = miss
    if not missing:
        return tangents
    key = _signature(op, flat, lengths, params, dual, extra, missing)
    reads = _READS.get(key) if key is not None else None
    if reads is None:
        try:
            reads = _terms_read(op, flat, lengths, params, dual, extra, list(missing), call)
        except (RuntimeError, NotImplementedError, TypeError, ValueError):
            reads = {}          # (the op refuses a tensor there: no term PyTorch would record)
        if key is not None:
            if len(_READS) >= _READS_LIMIT:
                _READS.clear()
            _READS[key] = reads
    out = list(tangents)
    for k, positions in reads.items():
        linked = [own[i] if i in own else flat[i] for i in positions if i in missing[k]]
        if linked:
            out[k] = _linked(tangents[k], linked)
    return out


_READS = {}         # _signature -> what _terms_read found: the same graph reads the same
_READS_LIMIT = 4096


def _signature(op, flat, lengths, params, dual, extra, missing):
    """What decides the graph of the op's derivative, so which primals its zero-tangent terms
    read (not the tensors' values; a number's where it stays one in ``_terms_read``, as
    clamp's bounds): a key for ``_READS``, or None where it holds what is not a constant."""
    if not _plain(params):
        return None     # (a tensor there, index_put's indices: its values may decide)
    parts = []
    for i, x in enumerate(flat):
        if isinstance(x, Tensor):
            parts.append((type(x), type(x._data), x._data.dtype, x.shape, x.requires_grad))
        elif i in extra:            # (a leaf tensor there: its value decides nothing)
            parts.append((type(x),))
        elif _plain(x):
            parts.append((type(x), x))
        else:
            return None
    return (op, tuple(parts), tuple(lengths) if lengths else None, params, tuple(dual),
            tuple(missing))


def _plain(value):
    """Whether ``value`` is a constant a key can hold: numbers, strings, dtypes, None and
    tuples of them."""
    if type(value) is tuple or type(value) is Size:     # (view's shape: a Size)
        return all([_plain(v) for v in value])
    return value is None or type(value) in _CONSTANTS


def _terms_read(op, flat, lengths, params, dual, extra, want, call):
    """For each output of ``want``, the positions of the operands requiring grad that the
    terms of the ``extra`` operands read (one more run of the op)."""
    from ember import autograd
    from ember._creation import tensor, zeros_like
    from ember._dtype import complex128, float64
    from ember.autograd.forward_ad import _private_constants, _second_run
    from ember.autograd.grad_mode import enable_grad
    from ember.autograd._forward_traces import PULLING
    from ember.ops.conversion import _alias
    args = _private_constants(op, flat, dual)
    aliases = {}
    leaves = []
    with enable_grad():
        for i in dual:
            x = flat[i]
            args[i] = aliases[i] = _alias(x) if x.requires_grad else _make(x._data)
        for i in extra:
            x = flat[i]
            if not isinstance(x, Tensor):
                leaf = tensor(x, dtype=complex128 if type(x) is complex else float64)
                leaf._set_requires_grad()
            elif x.requires_grad:
                leaf = aliases[i] = _alias(x)
            elif x._data.dtype.kind not in "fcV":   # (an integer or bool tensor's term)
                leaf = _make(x._data).to(float64)._set_requires_grad()
            else:
                leaf = _make(x._data)._set_requires_grad()
            args[i] = leaf
            leaves.append(leaf)
        outs = _second_run(op, args, lengths, params, call)
        targets = {id(a._grad_fn): i for i, a in aliases.items() if a.requires_grad}
        found = {}
        for k in want:
            o = outs[k]
            if not (isinstance(o, Tensor) and o.requires_grad):
                continue
            with PULLING:
                gs = autograd.grad([o], leaves, [zeros_like(o)._set_requires_grad()],
                                   create_graph=True, retain_graph=True, allow_unused=True)
            found[k] = tuple(sorted(_reached([g for g in gs if g is not None],
                                             targets).values()))
    return found


def _reached(roots, targets, start=-1):
    """``{id(node): value}`` of the nodes of ``targets`` (``{id(node): value}``) that the
    graphs of ``roots`` reach (the walk stops at them, at leaves and at nodes numbered below
    ``start``: older than the run that made ``roots``)."""
    hit = {}
    seen = set()
    stack = [r._grad_fn for r in roots if r._grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if id(node) in targets:
            hit[id(node)] = targets[id(node)]
            continue
        if isinstance(node, AccumulateGrad) or node._seq < start:
            continue
        stack.extend([fn for fn, _ in node.next_functions if fn is not None])
    return hit


def _linked(tangent, primals):
    """``tangent``'s values, with a node linking it (and its own history) to ``primals``."""
    node = AddBackward0((history(tangent) if tangent.requires_grad else (None, 0),)
                        + tuple([history(a) for a in primals]))
    node._metas = tuple([(a.shape, a.dtype, a.device) for a in primals])
    out = _make(tangent._data)
    out._grad_fn = node
    out._output_nr = 0
    return out
