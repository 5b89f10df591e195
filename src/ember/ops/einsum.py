"""einsum: PyTorch's equation grammar and checks, contractions in pairs on BLAS, and a
gradient that is itself one einsum per operand.

An equation is parsed once per (equation, operand ndims) into a ``Spec``: a tuple of integer
labels per operand and one for the output (letters are 0-51 in PyTorch's order, A-Z then
a-z; the dims an ellipsis covers get 52, 53, ... aligned from the right). A ``Plan`` per
(equation, shapes, dtypes) then says how to compute: each operand is reduced on its own
(diagonals of repeated labels, size-1 dims that broadcast, labels no other operand or the
output has), then pairs are contracted with one matmul each, in a greedy order that keeps
intermediates small, and the result is permuted to the output's labels.

The result dtype is PyTorch's, which follows from how its einsum runs (left to right):
summing a label out of one operand turns integers and bools into int64, multiplying two
operands without a shared summed label promotes, and contracting one (a bmm) requires equal
dtypes and refuses bool. ``_torch_dtype`` replays those steps on dtypes and sizes only.
"""

import functools
import math
from typing import NamedTuple

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember.amp._state import STATE as _AMP
from ember.amp.autocast_mode import cast_operands
from ember.ops._elementwise import conj_grad
from ember.ops._registry import op

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_LABEL = {c: i for i, c in enumerate(_LETTERS)}
_ELLIPSIS = len(_LETTERS)           # the first label of the dims an ellipsis covers
_LOW = D.LOW_PRECISION_NP


class Spec(NamedTuple):
    """A parsed equation: the labels of each operand's dims, and of the output's."""

    inputs: tuple
    output: tuple


def _error(message):
    return RuntimeError(f"einsum(): {message}")


# --- parsing ----------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1024)
def parse(equation, ndims):
    """The Spec of ``equation`` for operands with ``ndims`` dims, raising PyTorch's errors in
    its order: the operands' subscripts, their number, their ranks, then the output."""
    arrow = equation.find("->")
    lhs = equation if arrow < 0 else equation[:arrow]
    terms, ellipses = _parse_inputs(lhs, len(ndims))
    covered = []
    for k, (term, ellipsis, ndim) in enumerate(zip(terms, ellipses, ndims)):
        if ellipsis is None and len(term) != ndim:
            raise _error(f"the number of subscripts in the equation ({len(term)}) does not "
                         f"match the number of dimensions ({ndim}) for operand {k} and no "
                         f"ellipsis was given")
        if len(term) > ndim:
            raise _error(f"the number of subscripts in the equation ({len(term)}) is more than "
                         f"the number of dimensions ({ndim}) for operand {k}")
        covered.append(0 if ellipsis is None else ndim - len(term))
    width = max(covered)
    ellipsis_labels = tuple(range(_ELLIPSIS, _ELLIPSIS + width))
    inputs = []
    for term, ellipsis, n in zip(terms, ellipses, covered):
        if ellipsis is None:
            inputs.append(tuple(term))
        else:
            inputs.append(tuple(term[:ellipsis]) + ellipsis_labels[width - n:] +
                          tuple(term[ellipsis:]))
    if arrow < 0:
        counts = {}
        for term in terms:
            for label in term:
                counts[label] = counts.get(label, 0) + 1
        once = sorted(label for label, n in counts.items() if n == 1)
        has_ellipsis = any(e is not None for e in ellipses)
        output = (ellipsis_labels if has_ellipsis else ()) + tuple(once)
    else:
        seen = {label for term in terms for label in term}
        output = _parse_output(equation, arrow + 2, seen, ellipsis_labels)
    return Spec(tuple(inputs), output)


def _parse_inputs(lhs, count):
    terms, ellipses = [[]], [None]
    i = 0
    while i < len(lhs):
        c = lhs[i]
        if c == ".":
            k = len(terms) - 1
            if ellipses[k] is not None:
                raise _error(f"found '.' for operand {k} for which an ellipsis was already "
                             f"found")
            if lhs[i:i + 3] != "...":
                raise _error(f"found '.' for operand {k} that is not part of any ellipsis")
            ellipses[k] = len(terms[k])
            i += 3
            continue
        if c == ",":
            if len(terms) == count:
                raise _error("fewer operands were provided than specified in the equation")
            terms.append([])
            ellipses.append(None)
        elif c in _LABEL:
            terms[-1].append(_LABEL[c])
        elif c != " ":
            raise _invalid(i)
        i += 1
    if len(terms) < count:
        raise _error("more operands were provided than specified in the equation")
    return terms, ellipses


def _parse_output(equation, start, seen, ellipsis_labels):
    output = []
    found_ellipsis = False
    i = start
    while i < len(equation):
        c = equation[i]
        if c == ".":
            if found_ellipsis:
                raise _error("found '.' for output but an ellipsis (...) was already found")
            if equation[i:i + 3] != "...":
                raise _error("found '.' for output that is not part of any ellipsis (...)")
            found_ellipsis = True
            output.extend(ellipsis_labels)
            i += 3
            continue
        if c in _LABEL:
            label = _LABEL[c]
            if label not in seen:
                raise _error(f"output subscript {c} does not appear in the equation for any "
                             f"input operand")
            if label in output:
                raise _error(f"output subscript {c} appears more than once in the output")
            output.append(label)
        elif c != " ":
            raise _invalid(i)
        i += 1
    return tuple(output)


def _invalid(index):
    return _error(f"invalid subscript given at index {index} in the equation string, "
                  f"subscripts must be in [a-zA-Z]")


def label_sizes(spec, shapes):
    """{label: size} with size-1 dims broadcasting, raising PyTorch's mismatch errors."""
    sizes = {}
    for k, (labels, shape) in enumerate(zip(spec.inputs, shapes)):
        own = {}
        for dim, (label, size) in enumerate(zip(labels, shape)):
            if label in own:
                if own[label] != size:
                    raise _error(f"subscript {_LETTERS[label]} is repeated for operand {k} but "
                                 f"the sizes don't match, {size} != {own[label]}")
                continue
            own[label] = size
            seen = sizes.get(label)
            if seen is None or seen == 1:
                sizes[label] = size
            elif size != 1 and size != seen:
                if label >= _ELLIPSIS:
                    raise _error(f"dimension {dim} covered by ellipsis in operand {k}has size "
                                 f"{size} which does not broadcast with previously seen "
                                 f"ellipsis with size {seen} for the respective dimension")
                raise _error(f"subscript {_LETTERS[label]} has size {size} for operand {k} "
                             f"which does not broadcast with previously seen size {seen}")
    return sizes


# --- the result dtype -------------------------------------------------------------------------

def _summed(dtype):
    return D.int64 if dtype.category in (D.BOOL, D.INTEGRAL) else dtype


def _torch_dtype(spec, shapes, dtypes):
    """The dtype PyTorch's einsum gives (or the error it raises), from its left-to-right
    steps; see the module docstring."""
    out = set(spec.output)
    own = [dict(zip(labels, shape)) for labels, shape in zip(spec.inputs, shapes)]
    if len(own) == 1:
        return _summed(dtypes[0]) if any(label not in out for label in own[0]) else dtypes[0]
    summed = {label for sizes in own for label in sizes if label not in out}
    left = {label: sum(1 for sizes in own if sizes.get(label, 1) != 1) for label in summed}
    a, a_dtype = own[0], dtypes[0]
    for b, b_dtype in zip(own[1:], dtypes[1:]):
        b = dict(b)
        contracted = []
        for label in summed:
            sa, sb = a.get(label, 1), b.get(label, 1)
            if sa != 1 and sb != 1:
                left[label] -= 1
                if left[label] == 1:
                    contracted.append(label)
                    left[label] = 0
            elif left[label] == 1 and sa != 1:
                a, a_dtype, left[label] = {**a, label: 1}, _summed(a_dtype), 0
            elif left[label] == 1 and sb != 1:
                b[label], b_dtype, left[label] = 1, _summed(b_dtype), 0
        if contracted:
            if 0 not in a.values() and 0 not in b.values():
                if a_dtype is D.bool_ or a_dtype in D.WIDE_UNSIGNED:   # (ops/_barebones.py)
                    raise NotImplementedError(f"\"bmm\" not implemented for "
                                              f"'{a_dtype._torch_name}'")
                if a_dtype is not b_dtype:
                    raise RuntimeError(f"expected scalar type {a_dtype._torch_name} but found "
                                       f"{b_dtype._torch_name}")
            a_dtype = b_dtype           # an empty bmm gives zeros of its second operand's dtype
        else:
            a_dtype = D.result_type_of([(a_dtype, D.DIM), (b_dtype, D.DIM)])
        merged = dict(a)
        for label, size in b.items():
            if merged.get(label, 1) == 1 or size != 1:
                merged[label] = size
        for label in contracted:
            merged[label] = 1
        a = merged
    return a_dtype


# --- the plan ---------------------------------------------------------------------------------

class _Pair(NamedTuple):
    """Contract working operands i and j: both viewed as 3-D batches of matrices."""

    i: int
    j: int
    perm_a: tuple
    shape_a: tuple
    perm_b: tuple
    shape_b: tuple
    matmul: bool            # False: nothing is summed, a broadcast product does it
    shape: tuple
    labels: tuple
    dot: str                # or None: NumPy einsum subscripts when the pair is a batched
                            # dot product, which NumPy sums in place (no transposed copies)


class Plan(NamedTuple):
    """How to compute one einsum call (see the module docstring)."""

    dtype: np.dtype         # the result's
    compute: np.dtype       # the operands' while computing (float32 for 16-bit floats)
    prepare: tuple          # per operand: (index or None, einsum subscripts or None)
    pairs: tuple
    permute: tuple          # the last operand's dims in output order

    def run(self, xp, arrays):
        work = []
        for a, (index, subscripts) in zip(arrays, self.prepare):
            if a.dtype != self.compute:
                a = a.astype(self.compute)
            if index is not None:
                a = a[index]
            if subscripts is not None:
                a = xp.einsum(subscripts, a)
            work.append(a)
        for p in self.pairs:
            a, b = work[p.i], work[p.j]
            if p.dot is not None:
                res = xp.einsum(p.dot, a, b)
            else:
                a = a.transpose(p.perm_a).reshape(p.shape_a)
                b = b.transpose(p.perm_b).reshape(p.shape_b)
                res = xp.matmul(a, b) if p.matmul else a * b
            del work[p.j], work[p.i]
            work.append(res.reshape(p.shape))
        res = work[0].transpose(self.permute)
        if self.dtype != self.compute:
            return res.astype(self.dtype)
        # one operand may come back as a view of it (PyTorch's does too, but ember would not
        # know it aliases the operand): a copy
        return res.copy() if not self.pairs and xp.may_share_memory(res, arrays[0]) else res


@functools.lru_cache(maxsize=512)
def plan(equation, shapes, dtypes):
    """The Plan for ``equation`` (a string or a Spec) on operands of these NumPy shapes and
    dtypes; raises PyTorch's errors."""
    spec = equation if isinstance(equation, Spec) else parse(equation,
                                                            tuple(len(s) for s in shapes))
    sizes = label_sizes(spec, shapes)
    result = _torch_dtype(spec, shapes, [D.FROM_NUMPY[d] for d in dtypes])
    dtype = np.dtype(result.np)
    compute = np.dtype(np.float32) if dtype in _LOW else dtype
    prepare, work = _prepare(spec, shapes, sizes)
    pairs = _pairs(work, sizes, set(spec.output))
    labels = pairs[-1].labels if pairs else work[0]
    permute = tuple(labels.index(label) for label in spec.output)
    return Plan(dtype, compute, tuple(prepare), tuple(pairs), permute)


def _prepare(spec, shapes, sizes):
    """Per operand: the index that drops its broadcast size-1 dims, the einsum subscripts
    that take its diagonals and sum its private labels (None when not needed), and the
    labels it is left with."""
    out = set(spec.output)
    kept = []
    for labels, shape in zip(spec.inputs, shapes):
        drop = [s == 1 and (sizes[label] != 1 or label not in out)
                for label, s in zip(labels, shape)]
        index = tuple(0 if d else slice(None) for d in drop) if any(drop) else None
        kept.append((index, tuple(label for label, d in zip(labels, drop) if not d)))
    counts = {}
    for _, labels in kept:
        for label in set(labels):
            counts[label] = counts.get(label, 0) + 1
    prepare, work = [], []
    for index, labels in kept:
        unique = tuple(dict.fromkeys(label for label in labels
                                     if label in out or counts[label] > 1))
        subscripts = None
        if len(unique) != len(labels):          # a diagonal or a private label to sum
            local = {label: _LETTERS[n] for n, label in enumerate(dict.fromkeys(labels))}
            subscripts = "".join(local[label] for label in labels) + "->" + \
                "".join(local[label] for label in unique)
        prepare.append((index, subscripts))
        work.append(unique)
    return prepare, work


def _pairs(work, sizes, out):
    """The pairwise contractions, greedily choosing the pair that shares labels and leaves
    the smallest intermediate."""
    work = list(work)
    pairs = []
    while len(work) > 1:
        i, j = (0, 1) if len(work) == 2 else _greedy(work, sizes, out)
        rest = set(out).union(*(w for k, w in enumerate(work) if k not in (i, j)))
        la, lb = work[i], work[j]
        batch = [label for label in la if label in lb and label in rest]
        summed = [label for label in la if label in lb and label not in rest]
        a_only = [label for label in la if label not in lb]
        b_only = [label for label in lb if label not in la]
        n_batch, m, k, n = (math.prod(sizes[label] for label in group)
                            for group in (batch, a_only, summed, b_only))
        labels = tuple(batch + a_only + b_only)
        pairs.append(_Pair(i, j, tuple(la.index(label) for label in batch + a_only + summed),
                           (n_batch, m, k) if summed else (n_batch, m, 1),
                           tuple(lb.index(label) for label in batch + summed + b_only),
                           (n_batch, k, n) if summed else (n_batch, 1, n),
                           bool(summed), tuple(sizes[label] for label in labels), labels,
                           _dot_subscripts(la, lb, batch) if summed and not a_only
                           and not b_only else None))
        del work[j], work[i]
        work.append(labels)
    return pairs


def _dot_subscripts(la, lb, batch):
    """NumPy einsum subscripts contracting labels ``la`` with ``lb`` down to ``batch``."""
    local = {label: _LETTERS[n] for n, label in enumerate(dict.fromkeys(la + lb))}
    return ("".join(local[label] for label in la) + "," +
            "".join(local[label] for label in lb) + "->" +
            "".join(local[label] for label in batch))


def _greedy(work, sizes, out):
    def size(labels):
        return math.prod(sizes[label] for label in labels)
    best = None
    for i in range(len(work)):
        for j in range(i + 1, len(work)):
            la, lb = set(work[i]), set(work[j])
            rest = set(out).union(*(w for k, w in enumerate(work) if k not in (i, j)))
            result = size((la | lb) & rest)
            key = (not la & lb, result - size(la) - size(lb), result)
            if best is None or key < best[0]:
                best = (key, i, j)
    return best[1], best[2]


# --- the op -----------------------------------------------------------------------------------

@op("einsum(equation, operands)", inputs=("operands*",), method=False)
def _einsum(xp, operands, equation):
    """Sums of products of the operands' elements, as the Einstein summation ``equation``
    says (PyTorch's grammar: letters, ``...`` for broadcast dims, ``->`` for the output)."""
    return plan(equation, tuple(a.shape for a in operands),
                tuple(a.dtype for a in operands)).run(xp, operands)


@_einsum.named_by
def _(operands, params, outputs):
    equation = params[0]
    spec = equation if isinstance(equation, Spec) else parse(
        equation, tuple(t.ndim for t in operands))
    return _node_name(spec)


@functools.lru_cache(maxsize=1024)
def _node_name(spec):
    """The name of PyTorch's backward node for an einsum: that of the op its left-to-right
    evaluation ends with (a sum or permute of one operand; a bmm, whose result is viewed,
    when the last operand shares a summed label with the earlier ones; else a product)."""
    output = set(spec.output)
    if len(spec.inputs) == 1:
        return "SumBackward1" if set(spec.inputs[0]) - output else "PermuteBackward0"
    earlier = set().union(*spec.inputs[:-1])
    return "ViewBackward0" if (earlier & set(spec.inputs[-1])) - output else "MulBackward0"


_einsum.reads_inputs("others")         # an operand is read only by the others' gradients


@_einsum.derivative
def _(grad, operands, equation):
    spec = equation if isinstance(equation, Spec) else parse(
        equation, tuple(t.ndim for t in operands))
    dtype = grad.dtype
    others = [conj_grad(t if t.dtype is dtype else t.to(dtype)) for t in operands]
    return ([_operand_grad(spec, k, grad, others, t.shape) if t.requires_grad else None
             for k, t in enumerate(operands)],)


def _operand_grad(spec, k, grad, others, shape):
    """The gradient for operand k: the einsum of the output gradient with the other
    operands, summed or broadcast where operand k's dims are size 1 or private, and put on
    the diagonal of its repeated labels."""
    labels = spec.inputs[k]
    rest = [labels_j for j, labels_j in enumerate(spec.inputs) if j != k]
    used = set(spec.output).union(*rest)
    unique = tuple(dict.fromkeys(labels))
    size = {label: s for label, s in zip(labels, shape)}
    found = tuple(label for label in unique if label in used)
    g = _einsum(Spec((spec.output,) + tuple(rest), found),
                [grad] + [t for j, t in enumerate(others) if j != k])
    for dim, label in enumerate(found):
        if size[label] == 1 and g.shape[dim] != 1:
            g = g.sum(dim, keepdim=True)
    for dim, label in enumerate(unique):
        if label not in used:
            g = g.unsqueeze(dim)
    target = [size[label] for label in unique]
    if list(g.shape) != target:
        g = g.expand(target)
    if len(unique) == len(labels):
        return g
    from ember._creation import eye
    fresh = max(max(labels_j, default=0) for labels_j in spec.inputs + (spec.output,)) + 1
    seen, out_labels, deltas = set(), [], []
    for label in labels:
        if label in seen:
            deltas.append((label, fresh))
            label, fresh = fresh, fresh + 1
        seen.add(label)
        out_labels.append(label)
    eyes = [eye(size[label], dtype=g.dtype, device=g.device) for label, _ in deltas]
    return _einsum(Spec((unique,) + tuple(deltas), tuple(out_labels)), [g] + eyes)


# --- the public function ----------------------------------------------------------------------

def einsum(*args):
    """Sums of products of the operands' elements, as the Einstein summation ``equation``
    says: ``einsum(equation, *operands)``, ``einsum(equation, [operands])`` or the sublist
    form ``einsum(op1, sublist1, op2, sublist2, ..., [sublist_out])``."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if isinstance(args[0], Tensor):
        equation, operands = _from_sublists(args)
    else:
        equation, operands = args[0], args[1:]
        if not isinstance(equation, str):
            raise TypeError(f"einsum(): argument 'equation' (position 1) must be str, not "
                            f"{type(equation).__name__}")
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = operands[0]
            if not operands:
                return einsum(equation)
    for i, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 1, but got "
                            f"{type(t).__name__}")
    operands = list(operands)
    if any(_AMP.enabled.values()) and len(operands) > 1 and _contracts(
            parse(equation, tuple(t.ndim for t in operands))):
        operands = cast_operands(_LOWER, operands)
    return _einsum(equation, operands)


_LOWER = {"cpu": "lower", "cuda": "lower"}


def _contracts(spec):
    """Whether two operands share a label the output sums away: PyTorch contracts such a
    pair with bmm, which autocast runs in lower precision (other equations it computes with
    mul and sum, in the operands' dtype)."""
    out, seen = set(spec.output), set()
    for labels in spec.inputs:
        summed = set(labels) - out
        if summed & seen:
            return True
        seen |= summed
    return False


def _from_sublists(args):
    """The equation and operands of the sublist form (subscripts 0-51 are A-Z, a-z)."""
    def subscripts(sublist):
        parts = []
        for s in sublist:
            if s is Ellipsis:
                parts.append("...")
                continue
            s = s.__index__()
            if not 0 <= s < len(_LETTERS):
                raise ValueError("einsum(): subscript in subscript list is not within the "
                                 "valid range [0, 52)")
            parts.append(_LETTERS[s])
        return "".join(parts)
    operands = args[0::2][:len(args) // 2]
    equation = ",".join(subscripts(s) for s in args[1::2][:len(args) // 2])
    if len(args) % 2:
        equation += "->" + subscripts(args[-1])
    return equation, operands


ALIASES = {}
PUBLIC = {"einsum": einsum}
