"""Outputs whose shape changed after their node was recorded, and the engine's check of the
gradients that reach them.

``c = a * 2`` then ``with no_grad(): c.t_()`` leaves ``c``'s node (MulBackward0) expecting a
gradient of ``c``'s old shape, while the ops recorded since give one of its new shape.
PyTorch's engine checks every gradient against the shape its receiving node recorded and
refuses it ("Function SumBackward0 returned an invalid gradient at index 0 - got [3, 2] but
expected shape compatible with [2, 3]"), or sums it down when it broadcasts to it.

Only a node whose output changed shape can receive such a gradient, so only such a node pays
for the check: ``mark`` gives it a subclass of its class whose ``apply`` first checks the
gradients of the changed outputs (no other node's path changes).
"""

from ember.autograd.graph import sum_to

__all__ = ["mark", "check_reshaped", "conform_reshaped"]

_CHECKED = {}                           # node class -> its checking subclass


def mark(t, old_shape):
    """Record that tensor ``t``, of shape ``old_shape`` when its node (or a leaf's gradient
    accumulator) was recorded, changed shape (the first shape noted stays: shapes changed
    twice are checked against the recorded)."""
    if t._grad_fn is not None:
        node, nr = t._grad_fn, t._output_nr
    else:                               # a leaf: its accumulator, if a graph uses it yet
        node, nr = (t._meta or {}).get("grad_acc"), 0
        if node is None:
            return
    shapes = node.__dict__.setdefault("_recorded_shapes", {})
    shapes.setdefault(nr, tuple(old_shape))
    cls = type(node)
    if cls in _CHECKED.values() or t._grad_fn is None:
        return          # (an accumulator's gradients are checked where two shapes meet)
    checked = _CHECKED.get(cls)
    if checked is None:
        checked = _CHECKED[cls] = type(cls.__name__, (cls,), {
            "__slots__": (), "apply": _checked_apply, "__module__": cls.__module__,
            "__qualname__": cls.__qualname__})
    node.__class__ = checked


def check_reshaped(node, nr, *grads):
    """Raise PyTorch's error if one of ``grads``, sent to output ``nr`` of ``node``, is not
    of the shape recorded there (the engine asks when gradients of two shapes met)."""
    shape = node.__dict__.get("_recorded_shapes", {}).get(nr)
    for grad in grads:
        if shape is not None and tuple(grad.shape) != shape \
                and not _expandable(shape, tuple(grad.shape)):
            raise RuntimeError(_invalid_message(node, nr, grad, shape))


def conform_reshaped(node, grads):
    """``grads``, sent to ``node``'s outputs, each of the shape recorded for its output (summed
    down to it where it broadcasts to it); PyTorch's error where one does not. The engine
    asks before the node's pre-hooks (which see conformed gradients, as PyTorch's do)."""
    shapes = node.__dict__.get("_recorded_shapes")
    if not shapes:
        return grads
    for nr, shape in shapes.items():
        g = grads[nr]
        if g is None or tuple(g.shape) == shape:
            continue
        if not _expandable(shape, tuple(g.shape)):
            raise RuntimeError(_invalid_message(node, nr, g, shape))
        grads = list(grads)
        grads[nr] = sum_to(g, shape)
    return grads


def _checked_apply(self, grads, *args, **kwargs):
    return super(type(self), self).apply(conform_reshaped(self, grads), *args, **kwargs)


def _expandable(shape, desired):
    """Whether ``shape`` broadcasts to ``desired`` (PyTorch's is_expandable_to)."""
    if len(shape) > len(desired):
        return False
    return all(s == d or s == 1 for s, d in zip(reversed(shape), reversed(desired)))


def _invalid_message(node, nr, grad, shape):
    """PyTorch's message, naming the node that gave the gradient and its edge's index."""
    producer, index = _producer(node, nr, shape)
    name = "a node" if producer is None else producer.name()
    return (f"Function {name} returned an invalid gradient at index {index} - got "
            f"{list(grad.shape)} but expected shape compatible with {list(shape)}")


def _producer(node, nr, shape):
    """(the node of the running backward that sent output ``nr`` of ``node`` a gradient of
    another shape, its edge's index): the latest recorded such node, which ran first."""
    from ember.autograd.engine import _FINAL
    nodes = _FINAL.stacks[-1][1] if _FINAL.stacks else ()
    found = []
    for other in nodes:
        for i, (nxt, at) in enumerate(other._edges):
            if nxt is node and at == nr:
                meta = getattr(other, "_in_meta", None)
                mine = meta[i] if meta is not None and i < len(meta) else None
                changed = mine is None or tuple(mine[0]) != shape
                found.append((changed, other._seq, i, other))
    if not found:
        return None, 0
    _, _, index, producer = max(found, key=lambda f: (f[0], f[1]))
    return producer, index
