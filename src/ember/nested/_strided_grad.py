"""``autograd.grad`` and ``autograd.backward`` with strided nested tensors among the outputs,
inputs or gradients: each nested tensor stands for its components, which the engine
differentiates as ordinary tensors; the inputs' gradients come back as nested tensors."""

import weakref

import ember
from ember.nested import NO_SIZES, by_components as _is_nested

__all__ = ["grad", "backward", "freed_together", "refusing"]


def _group(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _check_pair(out, g):
    """PyTorch's errors for a nested output's gradient ``g``."""
    if g is None:
        raise RuntimeError("grad can be implicitly created only for scalar outputs")
    if not _is_nested(g):
        raise RuntimeError("Expected both self and other to be nested tensors. Self is nested. "
                           "While Other is not nested.")
    given = [tuple(t.shape) for t in g._components]
    wanted = [tuple(t.shape) for t in out._components]
    if given != wanted:
        from ember.nested import _sizes
        raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {_sizes(g)} and "
                           f"output[0] has a shape of {_sizes(out)}.")


def _flat_outputs(outputs, grads):
    """The outputs and their gradients, nested ones replaced by their components that
    require grad."""
    outputs = _group(outputs)
    grads = _group(grads) if grads is not None else []
    grads = grads + [None] * (len(outputs) - len(grads))
    flat_out, flat_grads = [], []
    for out, g in zip(outputs, grads):
        if not _is_nested(out):
            if _is_nested(g):
                raise RuntimeError(NO_SIZES)
            flat_out.append(out)
            flat_grads.append(g)
            continue
        _check_pair(out, g)
        for t, tg in zip(out._components, g._components):
            if t.requires_grad:
                flat_out.append(t)
                flat_grads.append(tg)
    if not flat_out:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                           "grad_fn")
    return flat_out, flat_grads


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """``autograd.grad`` where some outputs, inputs or gradients are nested tensors."""
    flat_out, flat_grads = _flat_outputs(outputs, grad_outputs)
    inputs = _group(inputs)
    flat_in = [c for x in inputs for c in (x._components if _is_nested(x) else (x,))]
    found = iter(ember.autograd.grad(flat_out, flat_in, flat_grads, retain_graph=retain_graph,
                                     create_graph=create_graph, allow_unused=True))
    result = []
    for index, x in enumerate(inputs):
        if not _is_nested(x):
            g = next(found)
        else:
            parts = [next(found) for _ in x._components]
            g = None if all(p is None for p in parts) else _wrap(
                [p if p is not None else ember.zeros_like(t)
                 for p, t in zip(parts, x._components)])
        if g is None:
            if materialize_grads:
                g = ember.zeros_like(x) if not _is_nested(x) else _wrap(
                    [ember.zeros_like(t) for t in x._components])
            elif not (materialize_grads if allow_unused is None else allow_unused):
                raise RuntimeError(f"The differentiated Tensor at index {index} appears to not "
                                   f"have been used in the graph. Set allow_unused=True if this "
                                   f"is the desired behavior.")
        result.append(g)
    return tuple(result)


def _wrap(parts):
    from ember.nested import NestedTensor
    return NestedTensor(parts, is_leaf=not any(p.requires_grad for p in parts), quiet=True)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """``autograd.backward`` where some tensors or gradients are nested tensors."""
    flat_out, flat_grads = _flat_outputs(tensors, grad_tensors)
    if inputs is not None:
        inputs = [c for x in _group(inputs)
                  for c in (x._components if _is_nested(x) else (x,))]
    ember.autograd.backward(flat_out, flat_grads, retain_graph=retain_graph,
                            create_graph=create_graph, inputs=inputs)


def freed_together(tensors, name):
    """``tensors``, their nodes named ``name`` and freed together, as PyTorch's one node of
    that name for them all is (``as_nested_tensor``'s): a backward without ``retain_graph``
    through any of them makes a later one through any raise PyTorch's error."""
    from ember.ops._recording import rename_node
    nodes = [rename_node(t, name)._grad_fn for t in tensors]
    group = [weakref.ref(n) for n in nodes if n is not None]
    for n in nodes:
        if n is not None:
            cls = type(n)
            freeing = _FREEING.get(cls)
            if freeing is None:
                freeing = _FREEING[cls] = _freeing_class(cls, name)
            n.__class__ = freeing
            n._nested_group = group
    return tensors


def _freeing_class(cls, name):
    """Node class ``cls``'s subclass ``name``, whose nodes are freed with their group (its
    methods call ``cls``'s by name: a subclass renaming it later keeps working)."""
    def apply(node, grads):
        if node._released is True:
            from ember.autograd.graph import _FREED
            raise RuntimeError(_FREED)
        return cls.apply(node, grads)

    def _release(node):
        # (the others this backward will still run free themselves after running)
        from ember.autograd.engine import engine_will_run
        cls._release(node)                      # what the node itself saved
        node._released = True
        for ref in node._nested_group:
            n = ref()
            if n is not None and not engine_will_run(n):
                n._released = True
    return type(name, (cls,), {"__slots__": (), "apply": apply, "_release": _release})


_FREEING = {}                   # renamed node class -> its subclass freed with its group


def refusing(tensors, error):
    """``tensors``, their nodes raising ``error()`` when a backward reaches them: where
    PyTorch's strided nested kernel records a node whose derivative it lacks (``tanh``'s
    needs ``tanh_backward``), it fails only then."""
    for t in tensors:
        node = t._grad_fn
        if node is not None:
            cls = type(node)
            sub = cls if cls.apply is _apply_refused else _REFUSING.get(cls)
            if sub is None:
                sub = _REFUSING[cls] = type(cls.__name__, (cls,), {
                    "__slots__": (), "apply": _apply_refused})
            node.__class__ = sub
            node._refusal = error
    return tensors


def _apply_refused(node, grads):
    raise node._refusal()


_REFUSING = {}                  # node class -> its subclass that refuses to run
