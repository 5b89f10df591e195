"""``autograd.grad`` and ``autograd.backward`` with strided nested tensors among the outputs,
inputs or gradients: each nested tensor stands for its components, which the engine
differentiates as ordinary tensors; the inputs' gradients come back as nested tensors."""

import ember
from ember.nested import NO_SIZES, by_components as _is_nested

__all__ = ["grad", "backward"]


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
