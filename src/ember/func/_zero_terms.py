"""The zero-tangent terms of PyTorch's forward formulas, for ``func.jvp``'s tangents.

NOTE [Zero-tangent terms in func.jvp]
PyTorch's ``func.jvp`` tangents are those of ``forward_ad`` (NOTE [Zero-tangent terms] in
ember/autograd/_forward_zero_terms.py): an op's tangent requires grad where a term of its
formula reads a primal that requires grad outside the transform, the term of an operand
without a tangent included (``jvp(lambda x: x * 2.0, (x,), (t,))`` with ``x`` requiring grad:
the tangent requires grad, and its gradient for ``x`` is zeros, not None). ember's tangents
come from one double vjp of the whole function, which reads only what the Jacobian needs. So
while ``jvp``, ``jacfwd`` or ``linearize`` (outermost) traces its function, each recorded call
(those of a reverse-mode transform or ember's own pass nested in it too: hessian's) is noted
here (``Terms.record``): which tensors carry a tangent (computed from the transform's
inputs), on which tensors requiring grad outside it each depends (its ``roots``), to which
roots its tangent is linked by zero terms (its dual operands' links, and the roots of the
operands its op's zero-tangent terms read: round 32's ``_terms_read``), and which roots its
tangent's own graph reaches (those of the dual operands whose tangent it takes, and of the
operands their terms read: ``_dual_reads``). Both come from runs of the op on stand-ins, kept
per op signature, so a model's layers pay a dictionary look-up per call (those runs are not
noted). Once the function returns, the notes give way to the roots each output's tangent is
linked to but does not reach (``Terms.close``: nothing of the function is kept), and the
transform's tangent outputs get a node ``AddBackward0`` to them (zero gradient to them).
``linearize`` gives a number no term: PyTorch's traced graph folds ``x * 2.0``'s tangent to
read no primal.
"""

from ember._tensor import Tensor, _make
from ember._transform_state import STATE as _TRANSFORMS
from ember.autograd._forward_traces import PULLING
from ember.autograd.graph import _sequence, history
from ember.func._batched import BatchedTensor
from ember.autograd._forward_zero_terms import (_READS, _READS_LIMIT, _extra_positions,
                                                _linked, _plain, _reached,
                                                _terms_read)

__all__ = ["Terms", "link_outputs"]

_EMPTY = frozenset()
_SCALARS = frozenset((int, float, complex, bool))


class Terms:
    """What a forward-mode transform's traced function computed: per tensor id, ``(tensor,
    roots, links, reached)`` (``links``: None where it carries no tangent; ``reached``: the
    roots its tangent's own graph reaches, which need no link)."""

    __slots__ = ("seen", "nodes", "numbers", "start", "roots", "paused")

    def __init__(self, shown, leaves, outside, numbers=True):
        """``shown``: the function's inputs; ``leaves``: the transform's leaves for them;
        ``outside``: per input, whether it requires grad outside the transform; ``numbers``:
        whether a Python number's term counts (not in ``linearize``'s traced graph, whose
        tangent of ``x * 2.0`` PyTorch folds to read no primal)."""
        self.seen = {}
        self.nodes = {}         # (id(node), output nr) -> (node, roots, links, reached): a
        # tensor standing for a result (a saved output unpacked) is another object of it
        self.numbers = numbers
        self.start = next(_sequence)    # (nodes numbered below: made before the function)
        self.roots = {}         # id -> tensor requiring grad outside (what roots hold)
        self.paused = False     # (while its own runs on stand-ins record: not the function's)
        for s, leaf, out in zip(shown, leaves, outside):
            roots = self._root(s) if out else _EMPTY
            self.seen[id(s)] = (s, roots, _EMPTY, _EMPTY)
            self.seen[id(leaf)] = (leaf, roots, _EMPTY, _EMPTY)

    def _of(self, x):
        """``(x, roots, links, reached)`` (links None: it carries no tangent)."""
        got = self.seen.get(id(x))
        if got is not None and got[0] is x:
            return got
        node = x._grad_fn
        if node is None:    # (a leaf: a closure's, or one the function made)
            made = _TRANSFORMS.made
            got = self.seen[id(x)] = (x, self._root(x) if x._requires_grad and not (
                made is not None and id(x) in made) else _EMPTY, None, _EMPTY)
            return got
        got = self.nodes.get((id(node), x._output_nr))
        if got is not None and got[0] is node:
            return (x,) + got[1:]
        # (a closure's result, made before the function; else one of ember's own)
        return x, self._root(x) if node._seq < self.start else _EMPTY, None, _EMPTY

    def _root(self, x):
        """``{id(x)}``, holding ``x``."""
        self.roots[id(x)] = x
        return frozenset((id(x),))

    def record(self, op, flat, lengths, params, outputs):
        """Note a recorded call of ``op`` (NOTE above)."""
        if self.paused:
            return
        dual, req, got = [], [], {}
        roots = links = reached = _EMPTY
        for i, x in enumerate(flat):
            if isinstance(x, Tensor):
                e = got[i] = self._of(x)
                if e[1]:
                    roots = roots | e[1] if roots else e[1]
                    req.append(i)
                if e[2] is not None:
                    dual.append(i)
                    if e[2]:
                        links = links | e[2] if links else e[2]
                    if e[3]:
                        reached = reached | e[3] if reached else e[3]
        if dual and req:
            zero, real = self._read(op, flat, lengths, params, dual, req)
            for i in zero:
                links = links | got[i][1]
            reached = _EMPTY
            for i, (used, reads) in zip(dual, real):
                if used:        # (the tangent reads that operand's: what its graph reaches)
                    reached = reached | got[i][3]
                for j in reads:
                    reached = reached | got[j][1]
        if not dual:
            links = None
        seen = self.seen
        for o in outputs if type(outputs) is tuple else (outputs,):
            if isinstance(o, Tensor):
                seen[id(o)] = (o, roots, links, reached)
                node = o._grad_fn
                if node is not None:
                    self.nodes[id(node), o._output_nr] = (node, roots, links, reached)

    def close(self, outputs):
        """Per tensor of ``outputs`` (the function's, flat), the roots its tangent is linked to
        by zero terms but does not reach, or None where no tangent is linked; the notes are
        dropped (they hold the function's tensors)."""
        found = None
        if self.roots:
            seen = self.seen
            found = []
            for y in outputs:
                got = seen.get(id(y))
                roots = got[2] - got[3] if got is not None and got[0] is y and got[2] else ()
                found.append(tuple([self.roots[r] for r in roots]))
            if not any(found):
                found = None
        self.seen = self.nodes = self.roots = None
        self.paused = True      # (a late call, a leaked tensor's: nothing to note it in)
        return found

    def _read(self, op, flat, lengths, params, dual, req):
        """The positions of the operands requiring grad outside that the zero-tangent terms of
        the operands without a tangent read, and those the terms of the others read."""
        key = _key(op, flat, lengths, params, dual, req, self.numbers)
        if key is _BATCHED:
            return (), tuple((True, tuple(req)) for _ in dual)  # (vmap's: as reaching all)
        reads = _READS.get(key) if key is not None else None
        if reads is None:
            self.paused = True
            try:
                reads = _both_reads(op, flat, lengths, params, dual,
                                    _extras(op, flat, dual, self.numbers), set(req))
            finally:
                self.paused = False
            if key is not None:
                if len(_READS) >= _READS_LIMIT:
                    _READS.clear()
                _READS[key] = reads
        return reads


def _extras(op, flat, dual, numbers):
    """The operands, other than the dual ones, that have a term (``numbers``: a Python
    number's included)."""
    extra = _extra_positions(op, flat, dual)
    return extra if numbers else [i for i in extra if isinstance(flat[i], Tensor)]


def _both_reads(op, flat, lengths, params, dual, extra, req):
    """``Terms._read``'s answer, from runs of the op on stand-ins of ``flat``: round 32's
    ``_terms_read`` for its operands without a tangent, ``_dual_reads`` for the others."""
    from ember.func._forward_primal import own_pass
    from ember.ops._registry import call
    made, _TRANSFORMS.made = _TRANSFORMS.made, None     # (ember's leaves: not func's)
    try:
        stand = [(_make(x._data)._set_requires_grad() if i in req else _make(x._data))
                 if isinstance(x, Tensor) else x for i, x in enumerate(flat)]
        with own_pass():
            try:
                zero = _terms_read(op, stand, lengths, params, dual, extra, [0], call) \
                    if extra else {}
            except (RuntimeError, NotImplementedError, TypeError, ValueError):
                zero = {}   # (the op refuses a tensor there: no term PyTorch would record)
            try:
                real = _dual_reads(op, stand, lengths, params, dual, call)
            except (RuntimeError, NotImplementedError, TypeError, ValueError):
                real = tuple((True, tuple(req)) for _ in dual)
    finally:
        _TRANSFORMS.made = made
    return (tuple(i for i in zero.get(0, ()) if i in req),
            tuple((used, tuple(i for i in reads if i in req)) for used, reads in real))


def _dual_reads(op, flat, lengths, params, dual, call):
    """Per position of ``dual``: whether the op's first output's tangent takes that operand's
    tangent, and the positions of the operands requiring grad that its term reads (the
    graph of its vjp, as the double vjp builds the tangent)."""
    from ember import autograd
    from ember._creation import zeros_like
    from ember.autograd.forward_ad import _private_constants, _second_run
    from ember.autograd.grad_mode import enable_grad
    from ember.ops.conversion import _alias
    args = _private_constants(op, flat, dual)
    targets = {}
    with enable_grad():
        for i, x in enumerate(flat):
            if isinstance(x, Tensor) and x.requires_grad:
                args[i] = _alias(x)
                targets[id(args[i]._grad_fn)] = i
        leaves = []
        for i in dual:
            if not flat[i].requires_grad:
                args[i] = _make(flat[i]._data)._set_requires_grad()
            leaves.append(args[i])
        o = _second_run(op, args, lengths, params, call)[0]
        if not (isinstance(o, Tensor) and o.requires_grad):
            return tuple((False, ()) for _ in dual)
        dummy = zeros_like(o)._set_requires_grad()
        with PULLING:
            gs = autograd.grad([o], leaves, [dummy], create_graph=True, retain_graph=True,
                               allow_unused=True)
    mark = {id(history(dummy)[0]): -1}
    out = []
    for g in gs:
        if g is None or not g.requires_grad:
            out.append((False, ()))
            continue
        hit = _reached([g], {**targets, **mark})
        out.append((-1 in hit.values(), tuple(sorted(set(hit.values()) - {-1}))))
    return tuple(out)


_BATCHED = object()      # (_key's answer where an operand is vmap's wrapper)


def _key(op, flat, lengths, params, dual, req, numbers):
    """A key for ``_READS`` of the op's run on stand-ins of ``flat`` (``req``: the positions
    of those requiring grad outside): round 32's ``_signature``'s parts; None where it holds
    what is not a constant, ``_BATCHED`` where an operand is batched."""
    if params and not _plain(params):
        return None
    parts = ["func", op, tuple(lengths) if lengths else None, params, tuple(dual), tuple(req),
             numbers]
    extra = None
    for i, x in enumerate(flat):
        if isinstance(x, Tensor):
            if type(x) is BatchedTensor:
                return _BATCHED
            d = x._data
            parts.append((type(d), d.dtype, d.shape))
        elif type(x) in _SCALARS:   # (one with a term: its type decides, not its value)
            if extra is None:
                extra = _extras(op, flat, dual, numbers)
            parts.append((type(x),) if i in extra else (type(x), x))
        elif _plain(x):
            parts.append((type(x), x))
        else:
            return None
    return tuple(parts)


def link_outputs(links, tangents):
    """``tangents`` (flat, one per output), each linked to the roots of ``links``
    (``Terms.close``'s) at its place (NOTE above)."""
    return [_linked(t, roots) if roots and isinstance(t, Tensor) else t
            for t, roots in zip(tangents, links)]
