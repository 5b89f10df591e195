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
zeros for ``x``; ``x + int_tensor``'s reads no primal): its run takes it as float64. The same
run answers ``func.jvp``'s other question, which primals each dual operand's term reads (NOTE
[Zero-tangent terms in func.jvp]): both keep its answers in ``_READS``.
"""

from ember._dtype import dtype as _DType
from ember._shape import Size
from ember._tensor import Tensor, _make
from ember.autograd.graph import AccumulateGrad, Node, history

__all__ = ["AddBackward0", "link_zero_terms"]

_NUMBERS = (int, float, complex)
_CONSTANTS = frozenset([int, float, complex, bool, str, _DType])
_SCALARS = frozenset((int, float, complex, bool))


class AddBackward0(Node):
    """A tangent linked to the primals its zero-tangent terms read: the gradient passes to
    the tangent, zeros to the primals (NOTE [Zero-tangent terms])."""

    __slots__ = ("_metas",)

    def apply(self, grads):
        """The gradient for the tangent; zeros for the primals."""
        from ember._creation import zeros
        return [grads[0]] + [zeros(shape, dtype=dtype, device=device)
                             for shape, dtype, device in self._metas]


def _extra_positions(op, flat, dual, numbers=True):
    """The operands, other than the dual ones, that have a term in PyTorch's formula
    (``numbers``: a Python number's included)."""
    skip = set(op.dropped_inputs or ())
    for entry in op.refused_grads or ():
        skip.add(entry[0])
    for group in op.number_groups:
        skip.update(i for i in group if isinstance(flat[i], _NUMBERS))
    found = []
    for i, x in enumerate(flat):
        if i in dual or i in skip:
            continue
        if isinstance(x, Tensor) or numbers and (type(x) in _NUMBERS or type(x) is bool):
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
        reads = _cached(key, _stand_in_reads(op, flat, lengths, params, dual, extra,
                                             list(missing), call))
    out = list(tangents)
    for k, (zero, _) in reads.items():
        linked = [own[i] if i in own else flat[i] for i in zero if i in missing[k]]
        if linked:
            out[k] = _linked(tangents[k], linked)
    return out


_READS = {}         # _signature -> what _stand_in_reads found: the same graph reads the same
_READS_LIMIT = 4096
_ERRORS = (RuntimeError, NotImplementedError, TypeError, ValueError)


def _cached(key, reads):
    """``reads``, kept in ``_READS`` under ``key`` (unless None)."""
    if key is not None:
        if len(_READS) >= _READS_LIMIT:
            _READS.clear()
        _READS[key] = reads
    return reads


def _signature(op, flat, lengths, params, dual, extra, want, req=None, numbers=True):
    """What decides the graph of the op's derivative, so what its terms read (not the
    tensors' values; a number's where it stays one in ``_terms_read``, as clamp's bounds): a
    key for ``_READS``, or None where it holds what is not a constant. ``req``: the positions
    of func's plain stand-ins that require grad (else each tensor's own flag); ``extra``: the
    operands with a zero-tangent term, None to find them where a number needs it (``numbers``:
    whether a number's term counts)."""
    if params and not _plain(params):
        return None     # (a tensor there, index_put's indices: its values may decide)
    parts = []
    for i, x in enumerate(flat):
        if isinstance(x, Tensor):
            d = x._data
            parts.append((type(x), type(d), d.dtype, d.shape, x.requires_grad)
                         if req is None else (Tensor, type(d), d.dtype, d.shape, i in req))
        elif type(x) in _SCALARS:   # (one with a term: its type decides, not its value)
            if extra is None:
                extra = _extra_positions(op, flat, dual, numbers)
            parts.append((type(x),) if i in extra else (type(x), x))
        elif _plain(x):
            parts.append((type(x), x))
        else:
            return None
    return (op, tuple(parts), tuple(lengths) if lengths else None, params, tuple(dual),
            tuple(want), numbers)


def _plain(value):
    """Whether ``value`` is a constant a key can hold: numbers, strings, dtypes, None and
    tuples of them."""
    if type(value) is tuple or type(value) is Size:     # (view's shape: a Size)
        return all([_plain(v) for v in value])
    return value is None or type(value) in _CONSTANTS


def _stand_in_reads(op, flat, lengths, params, dual, extra, want, call):
    """``_terms_read``'s answer; where the op refuses that run, those of a run for the terms
    of ``extra`` alone (an empty one where it refuses it too: no term PyTorch would record)
    and of one for the dual operands' alone (where it refuses it, each as reading every
    operand that requires grad)."""
    try:
        return _terms_read(op, flat, lengths, params, dual, extra, want, call)
    except _ERRORS:
        pass
    try:
        zero = _terms_read(op, flat, lengths, params, dual, extra, want, call, False)
    except _ERRORS:
        zero = {}
    try:
        real = _terms_read(op, flat, lengths, params, dual, (), want, call)
    except _ERRORS:
        req = tuple(i for i, x in enumerate(flat) if isinstance(x, Tensor) and x.requires_grad)
        real = dict.fromkeys(want, ((), tuple((True, req) for _ in dual)))
    return {k: (zero[k][0] if k in zero else (), real[k][1]) for k in want}


def _terms_read(op, flat, lengths, params, dual, extra, want, call, tangents=True):
    """Per output of ``want``, from one more run of the op: the positions of the operands
    requiring grad that the terms of the ``extra`` operands read, and (``tangents``) per
    position of ``dual``, whether the output's tangent takes that operand's tangent and the
    positions its term reads (the graphs of their vjps, as func's double vjp builds the
    tangent; ``tangents`` False: None, the dual operands that do not require grad constants)."""
    from ember import autograd
    from ember._creation import tensor, zeros_like
    from ember._dtype import complex128, float64
    from ember.autograd.forward_ad import _private_constants, _second_run
    from ember.autograd.grad_mode import enable_grad
    from ember.autograd._forward_traces import PULLING
    from ember.ops.conversion import _alias
    args = _private_constants(op, flat, dual)
    targets = {}
    terms = set(dual) | set(extra)
    with enable_grad():
        for i, x in enumerate(flat):
            if isinstance(x, Tensor) and x.requires_grad:
                args[i] = _alias(x)
                targets[id(args[i]._grad_fn)] = i
        leaves = []
        for i in extra:
            x = flat[i]
            if not isinstance(x, Tensor):
                args[i] = tensor(x, dtype=complex128 if type(x) is complex else float64)
                args[i]._set_requires_grad()
            elif x.requires_grad:
                pass
            elif x._data.dtype.kind not in "fcV":   # (an integer or bool tensor's term)
                args[i] = _make(x._data).to(float64)._set_requires_grad()
            else:
                args[i] = _make(x._data)._set_requires_grad()
            leaves.append(args[i])
        for i in dual:
            if not flat[i].requires_grad:
                args[i] = _make(flat[i]._data)
                if tangents:
                    args[i]._set_requires_grad()
            if tangents:
                leaves.append(args[i])
        outs = _second_run(op, args, lengths, params, call)
        found = {}
        for k in want:
            o = outs[k]
            if not (isinstance(o, Tensor) and o.requires_grad):
                found[k] = ((), tuple((False, ()) for _ in dual) if tangents else None)
                continue
            dummy = zeros_like(o)._set_requires_grad()
            with PULLING:
                gs = autograd.grad([o], leaves, [dummy], create_graph=True, retain_graph=True,
                                   allow_unused=True)
            n = len(extra)
            zero = _reached([g for g in gs[:n] if g is not None], targets).values()
            found[k] = (tuple(sorted(set(i for i in zero if i in terms))),
                        _tangent_reads(gs[n:], targets, dummy) if tangents else None)
    return found


def _tangent_reads(grads, targets, dummy):
    """Per gradient of ``grads`` (the vjps of the dual operands, by ``dummy``): whether it
    reads ``dummy`` (the tangent takes that operand's), and the positions of ``targets`` it
    reads."""
    mark = {**targets, id(history(dummy)[0]): -1}
    out = []
    for g in grads:
        if g is None or not g.requires_grad:
            out.append((False, ()))
            continue
        hit = set(_reached([g], mark).values())
        out.append((-1 in hit, tuple(sorted(hit - {-1}))))
    return tuple(out)


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
    # (its recorded flag, a view's of a base requiring grad included: a forward-mode
    # function's result reports False, NOTE [Forward-mode primals], as a nested transform's
    # tangent there does)
    node = AddBackward0((history(tangent) if Tensor.requires_grad.fget(tangent)
                         else (None, 0),)
                        + tuple([history(a) for a in primals]))
    node._metas = tuple([(a.shape, a.dtype, a.device) for a in primals])
    out = _make(tangent._data)
    out._grad_fn = node
    out._output_nr = 0
    return out
