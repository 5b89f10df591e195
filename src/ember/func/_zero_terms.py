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
operands its op's zero-tangent terms read), and which roots its tangent's own graph reaches
(those of the dual operands whose tangent it takes, and of the operands their terms read).
One run of the op on stand-ins answers both (round 32's ``_terms_read``), kept per op
signature (``_signature``, in the cache ``forward_ad``'s runs fill too), so a model's layers
pay a dictionary look-up per call (those runs are not noted). Once the function returns, the
notes give way to the roots each output's tangent is linked to but does not reach
(``Terms.close``: nothing of the function is kept), and the transform's tangent outputs get a
node ``AddBackward0`` to them (zero gradient to them).
``linearize`` gives a number no term: PyTorch's traced graph folds ``x * 2.0``'s tangent to
read no primal.
"""

from ember._tensor import Tensor, _make
from ember._transform_state import STATE as _TRANSFORMS
from ember.autograd.graph import _sequence
from ember.func._batched import BatchedTensor, wrap
from ember.func._forward_primal import show
from ember.autograd._forward_zero_terms import (_READS, _cached, _extra_positions, _linked,
                                                _signature, _stand_in_reads)

__all__ = ["Terms", "link_outputs"]

_EMPTY = frozenset()


class Terms:
    """What a forward-mode transform's traced function computed: per tensor id, ``(tensor,
    roots, links, reached)`` (``links``: None where it carries no tangent; ``reached``: the
    roots its tangent's own graph reaches, which need no link)."""

    __slots__ = ("seen", "nodes", "numbers", "start", "roots", "paused", "parent", "outside")

    def __init__(self, shown, leaves, outside, numbers=True, parent=None, physical=(),
                 reaches=None):
        """``shown``: the function's inputs; ``leaves``: the transform's leaves for them;
        ``outside``: per input, whether it requires grad outside the transform; ``numbers``:
        whether a Python number's term counts (not in ``linearize``'s traced graph, whose
        tangent of ``x * 2.0`` PyTorch folds to read no primal); ``parent``: the notes of the
        forward-mode transform this one nests in (``physical``: its tensors for the inputs),
        which note this one's calls too, whose roots are this one's (NOTE above);
        ``reaches``: for one nested in reverse-mode transforms only, whether a tensor's graph
        reaches a tensor requiring grad outside them all (only those are roots)."""
        self.parent = parent
        self.outside = reaches
        if reaches is not None:
            outside = [reaches(p) for p in physical]
        if parent is not None:      # (the inputs are the outer one's tensors too)
            outside = []
            for s, leaf, p in zip(shown, leaves, physical):
                got = parent._of(p)
                parent.seen[id(s)] = (s,) + got[1:]
                parent.seen[id(leaf)] = (leaf,) + got[1:]
                outside.append(bool(got[1]))
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
        """``{id(x)}``, holding ``x`` (none where the outer transform's notes give it none: it
        requires grad for that transform only)."""
        if self.parent is not None and not self.parent._of(x)[1] or \
                self.outside is not None and not self.outside(x):
            return _EMPTY
        self.roots[id(x)] = x
        return frozenset((id(x),))

    def record(self, op, flat, lengths, params, outputs):
        """Note a recorded call of ``op`` (NOTE above), in the outer transforms' notes too."""
        if self.paused:
            return
        parent = self.parent
        if parent is not None:
            if parent.paused:
                return      # (the outer one's run on stand-ins)
            parent.record(op, flat, lengths, params, outputs)
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
                while type(y) is BatchedTensor:     # (vmap's calls are noted physical)
                    y = y._value
                got = seen.get(id(y))
                roots = got[2] - got[3] if got is not None and got[0] is y and got[2] else ()
                found.append(tuple([self.roots[r] for r in roots]))
            if not any(found):
                found = None
        self.seen = self.nodes = self.roots = None
        self.paused = True      # (a late call, a leaked tensor's: nothing to note it in)
        return found

    def note_link(self, tangent, linked, roots):
        """``linked``: a nested transform's ``tangent`` linked to its ``roots``; in PyTorch
        its zero terms read those primals, which carry this transform's tangent: so its
        tangent here is linked to their roots too."""
        found = _EMPTY
        for r in roots:
            found = found | self._of(r)[1]
        if not found:
            return
        _, had, links, reached = self._of(tangent)
        entry = (had | found, links | found if links else found, reached)
        self.seen[id(linked)] = (linked,) + entry
        node = linked._grad_fn
        if node is not None:
            self.nodes[id(node), linked._output_nr] = (node,) + entry

    def _read(self, op, flat, lengths, params, dual, req):
        """The positions of the operands requiring grad outside that the zero-tangent terms of
        the operands without a tangent read, and those the terms of the others read."""
        key = _signature(op, flat, lengths, params, dual, None, _FIRST, req, self.numbers)
        reads = _READS.get(key) if key is not None else None
        if reads is None:
            if any([type(x) is BatchedTensor for x in flat]):
                return (), tuple((True, tuple(req)) for _ in dual)  # (vmap's: as reaching all)
            self.paused = True
            try:
                reads = _cached(key, _both_reads(op, flat, lengths, params, dual,
                                                 _extra_positions(op, flat, dual, self.numbers),
                                                 set(req)))
            finally:
                self.paused = False
        return reads[0]


_FIRST = (0,)       # (the outputs whose terms are read: a tensor's id notes its first only)


def _both_reads(op, flat, lengths, params, dual, extra, req):
    """``Terms._read``'s answer (for the op's first output, as ``_READS`` keeps it), from a run
    of the op on stand-ins of ``flat`` (round 32's ``_stand_in_reads``)."""
    from ember.func._forward_primal import own_pass
    from ember.ops._registry import call
    made, _TRANSFORMS.made = _TRANSFORMS.made, None     # (ember's leaves: not func's)
    try:
        stand = [(_make(x._data)._set_requires_grad() if i in req else _make(x._data))
                 if isinstance(x, Tensor) else x for i, x in enumerate(flat)]
        with own_pass():
            return _stand_in_reads(op, stand, lengths, params, dual, extra, _FIRST, call)
    finally:
        _TRANSFORMS.made = made


def link_outputs(links, tangents, parent=None):
    """``tangents`` (flat, one per output), each linked to the roots of ``links``
    (``Terms.close``'s) at its place (NOTE above); ``parent``: the notes of the transform
    this one nests in, which note the links."""
    return [_link(t, roots, parent) if roots and isinstance(t, Tensor) else t
            for t, roots in zip(tangents, links)]


def _link(tangent, roots, parent):
    """``_linked``, at the physical value of a tangent that vmap batches."""
    if type(tangent) is BatchedTensor:
        return wrap(_link(tangent._value, roots, parent), tangent._level)
    out = _linked(tangent, roots)
    if parent is not None and not parent.paused:
        parent.note_link(tangent, out, roots)
    return show(out)    # (in a forward-mode function, its result: NOTE [Forward-mode primals])
