"""ember.autograd: backward, grad, grad modes, custom Functions, anomaly mode, gradcheck."""

import threading

import numpy as _np

from ember._tensor import Tensor as _Tensor
from ember._tensor import _make
from ember.autograd.anomaly import detect_anomaly, set_detect_anomaly
from ember.autograd.engine import run_backward as _engine_run_backward
from ember.autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                      is_inference_mode_enabled, no_grad, set_grad_enabled)
from ember.autograd.grad_mode import (enforce_grad_layout_policy,  # noqa: F401
                                      is_multithreading_enabled, is_view_replay_enabled,
                                      set_multithreading_enabled)
from ember.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck
from ember.autograd.graph import GradientEdge, history
from ember.autograd import profiler, profiler_util  # noqa: F401
from ember.autograd.variable import Variable  # noqa: F401  (then ``variable`` below replaces
#                                               the submodule as this package's attribute)
from ember.autograd import _backward_hooks_attr  # noqa: F401  (Tensor._backward_hooks)

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled", "is_inference_mode_enabled", "detect_anomaly",
           "set_detect_anomaly", "Function", "gradcheck", "gradgradcheck"]


class _Tasks(threading.local):
    def __init__(self):
        self.partial = []               # per backward running in this thread: has targets


_TASKS = _Tasks()


def run_backward(roots, root_grads, retain_graph, create_graph, targets=None,
                 accumulate_into_grad=True):
    """The engine's ``run_backward``, noting meanwhile whether only ``targets`` get
    gradients (see ``_is_checkpoint_valid``)."""
    _TASKS.partial.append(targets is not None)
    try:
        return _engine_run_backward(roots, root_grads, retain_graph, create_graph, targets,
                                    accumulate_into_grad)
    finally:
        _TASKS.partial.pop()


def _is_checkpoint_valid():
    """False inside ``autograd.grad`` or ``backward(inputs=...)``, whose partial graph walk
    a reentrant checkpoint's nested ``backward`` cannot join."""
    partial = _TASKS.partial
    return not partial or not partial[-1]


def _as_tuple(x):
    if x is None:
        return ()
    return (x,) if isinstance(x, (_Tensor, GradientEdge)) else tuple(x)


def _nested_involved(*groups):
    """Whether a strided nested tensor (differentiated by its components) is among
    ``groups`` (tensors, or sequences of them): only a non-Tensor is asked."""
    for g in groups:
        for x in (g if isinstance(g, (list, tuple)) else (g,)):
            if x is not None and not isinstance(x, (_Tensor, GradientEdge)):
                from ember.nested import by_components
                if by_components(x):
                    return True
    return False


def _target(t):
    """The (node, output_nr) edge of a tensor or GradientEdge to differentiate against."""
    if isinstance(t, GradientEdge):
        return t.node, t.output_nr
    return history(t)


def _edges(t):
    """What to differentiate against for input ``t``: itself, or for a sparse leaf its values
    and its dense stand-in (the products' gradient goes there, see sparse/_tensor.py)."""
    gradient_edges = getattr(type(t), "_gradient_edges", None)
    if gradient_edges is None:
        return [t]
    return gradient_edges(t)


def _sparse_leaf_gradient(t, parts):
    """A sparse leaf's gradient from those of the tensors ``_edges`` gave (None if none)."""
    values_grad, dense_grad = (parts + [None])[:2]
    if values_grad is None and dense_grad is None:
        return None
    return t._gradient_from(values_grad, dense_grad)


def _make_grads(outputs, grads):
    result = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        if not isinstance(out, _Tensor):
            raise AssertionError("Expected output to be a ember.Tensor")
        if g is not None and not isinstance(g, _Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got "
                            f"{type(g).__name__}")
        if g is None:
            plain = type(out) is _Tensor and type(out._data) is _np.ndarray
            if not (plain and out._grad_fn is not None and out._data.size == 1
                    and out._data.dtype.kind == "f"):   # (else the common call, a loss: passes)
                if not out.requires_grad:       # _roots reports it, as PyTorch does
                    result.append(None)
                    continue
                if out.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if not out.is_floating_point():
                    raise RuntimeError(f"grad can be implicitly created only for real scalar "
                                       f"outputs but got {out.dtype}")
            if plain:
                # what ones_like makes here, without its argument handling (4 us a backward)
                g = _make(_np.ones(out._data.shape, out._data.dtype))
            else:
                from ember._creation import ones_like
                g = ones_like(out)
        elif g.shape != out.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} "
                               f"and output[{i}] has a shape of {out.shape}.")
        elif g.is_complex() != out.is_complex():
            raise RuntimeError(f"For complex Tensors, both grad_output and output are required "
                               f"to have the same dtype. Mismatch in dtype: grad_output[{i}] "
                               f"has a dtype of {g.dtype} and output[{i}] has a dtype of "
                               f"{out.dtype}.")
        elif g.dtype != out.dtype:      # (PyTorch's engine casts a root's gradient)
            g = g.to(out.dtype)
        result.append(g)
    return result


def _too_few_grads(outputs, grads):
    """PyTorch's error for fewer gradients than outputs (after checking those given)."""
    _make_grads(outputs, grads)
    raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")


def _own_pass():
    """Whether ember's own pass runs (a transform's vjp of its function's outputs, which a
    forward-mode function it is nested in has re-classed as its results)."""
    from ember.func._forward_primal import own_running
    return own_running()


def _roots(outputs):
    roots = []
    for i, out in enumerate(outputs):
        node, nr = history(out)
        if node is None or (type(out) is not _Tensor       # (NOTE [Forward-mode primals])
                            and getattr(out, "_forward_primal", False) and not _own_pass()):
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               f"have a grad_fn")
        roots.append((node, nr))
    return roots


_REFUSE_BACKWARD = []           # [func._forward_primal.refuse_backward], imported once


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the graph's leaves."""
    if not _REFUSE_BACKWARD:
        from ember.func._forward_primal import refuse_backward
        _REFUSE_BACKWARD.append(refuse_backward)
    _REFUSE_BACKWARD[0]()   # (a transform runs a function: NOTE [Forward-mode primals])
    if grad_variables is not None:
        import warnings
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.",
                      FutureWarning, stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments "
                               "both passed to `backward()`. Please only use `grad_tensors`.")
        grad_tensors = grad_variables
    if inputs is not None and not isinstance(inputs, (_Tensor, GradientEdge)) \
            and len(inputs) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    if not (type(tensors) is _Tensor and inputs is None and (      # (the common call)
            grad_tensors is None or type(grad_tensors) is _Tensor)) \
            and _nested_involved(tensors, grad_tensors, inputs):     # (by their components)
        from ember.nested import _strided_grad
        return _strided_grad.backward(tensors, grad_tensors, retain_graph, create_graph, inputs)
    outputs = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors)
    if grad_tensors is not None and len(grads) < len(outputs):
        _too_few_grads(outputs, grads)
    grads = list(grads) + [None] * (len(outputs) - len(grads))
    if retain_graph is None:
        retain_graph = create_graph
    grads = _make_grads(outputs, grads)
    roots = _roots(outputs)
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        for t in inputs:
            if not isinstance(t, GradientEdge):
                _check_input(t)
                t.retain_grad()     # PyTorch's errors; a non-leaf keeps its .grad from now on
        inputs = tuple({id(t): t for t in inputs}.values())     # each accumulates once
        # a sparse leaf accumulates through its values and dense stand-in (see ``_edges``)
        inputs = tuple(e for t in inputs for e in _edges(t))
        targets = [_target(t) for t in inputs]
        run_backward(roots, grads, retain_graph, create_graph, targets=targets,
                     accumulate_into_grad=list(inputs))
    else:
        run_backward(roots, grads, retain_graph, create_graph)


def _check_input(t):
    """``t``, refused as PyTorch's engine refuses an input that is no tensor."""
    if not isinstance(t, _Tensor):
        raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got "
                           f"{type(t).__name__}")
    return t


def _check_batched_grads(outputs, vectors):
    from ember._tensor import Tensor
    for i, (out, v) in enumerate(zip(outputs, vectors)):
        if isinstance(v, Tensor) and tuple(v.shape[1:]) != tuple(out.shape):
            raise RuntimeError(f"If `is_grads_batched=True`, we interpret the first dimension of "
                               f"each grad_output as the batch dimension. The sizes of the "
                               f"remaining dimensions are expected to match the shape of "
                               f"corresponding output, but a mismatch was detected: "
                               f"grad_output[{i}] has a shape of {v.shape[1:]} and output[{i}] "
                               f"has a shape of {out.shape}. If you only want some tensors in "
                               f"`grad_output` to be considered batched, consider using vmap.")


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False,
         materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs`` (nothing is accumulated)."""
    if not only_inputs:
        import warnings
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). "
                      "To accumulate gradient for other parts of the graph, please use "
                      "torch.autograd.backward.", FutureWarning, stacklevel=2)
    if is_grads_batched:
        # each grad_outputs tensor holds a batch of vectors along dim 0: one vjp per vector
        from ember.func import vmap
        vectors = _as_tuple(grad_outputs)
        _check_batched_grads(_as_tuple(outputs), vectors)
        unused = []         # (vmap takes tensors only: unused inputs' None is put back after)

        def used_grads(*v):
            found = grad(outputs, inputs, v, retain_graph=retain_graph,
                         create_graph=create_graph, allow_unused=allow_unused,
                         materialize_grads=materialize_grads)
            unused[:] = [g is None for g in found]
            return tuple(g for g in found if g is not None)
        batched = iter(vmap(used_grads)(*vectors))
        return tuple(None if none else next(batched) for none in unused)
    if _nested_involved(outputs, inputs, grad_outputs):     # (by their components)
        from ember.nested import _strided_grad
        return _strided_grad.grad(outputs, inputs, grad_outputs, retain_graph, create_graph,
                                 allow_unused, materialize_grads)
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    grads = list(_as_tuple(grad_outputs))
    if grad_outputs is not None and len(grads) < len(outputs):
        _too_few_grads(outputs, grads)
    grads = grads + [None] * (len(outputs) - len(grads))
    if retain_graph is None:
        retain_graph = create_graph
    grads = _make_grads(outputs, grads)     # PyTorch's order of checks: grads, outputs, inputs
    roots = _roots(outputs)
    for t in inputs:
        if not isinstance(t, GradientEdge) and not _check_input(t).requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    edges = [_edges(t) for t in inputs]
    targets = [_target(e) for group in edges for e in group]
    found = iter(run_backward(roots, grads, retain_graph, create_graph, targets=targets))
    found = [next(found) if len(group) == 1 and group[0] is t
             else _sparse_leaf_gradient(t, [next(found) for _ in group])
             for t, group in zip(inputs, edges)]
    result = []
    for index, (t, g) in enumerate(zip(inputs, found)):
        if g is None:
            if materialize_grads:
                if isinstance(t, GradientEdge):
                    raise RuntimeError("materialize_grads cannot be used when the given input "
                                       "is a GradientEdge")
                from ember._creation import zeros_like
                g = zeros_like(t, requires_grad=bool(create_graph))
            elif not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {index} appears to not "
                                   f"have been used in the graph. Set allow_unused=True if this "
                                   f"is the desired behavior.")
        result.append(g)
    return tuple(result)


# names that resolve on first use (PyTorch imports them with torch.autograd)
_LAZY = ("functional", "forward_ad", "anomaly_mode", "Function", "once_differentiable",
         "FunctionCtx", "NestedIOFunction", "handle_torch_function", "has_torch_function",
         "is_tensor_like")


def variable(*args, **kwargs):
    """Removed (Variables are tensors since PyTorch 0.4): raises PyTorch's error."""
    raise RuntimeError("ember.autograd.variable(...) is deprecated, use ember.tensor(...) "
                       "instead")


def __getattr__(name):
    if name in ("functional", "forward_ad", "anomaly_mode"):
        import importlib
        return importlib.import_module(f"ember.autograd.{name}")
    if name in ("Function", "once_differentiable", "FunctionCtx", "NestedIOFunction"):
        from ember.autograd import function
        return getattr(function, name)
    if name in ("handle_torch_function", "has_torch_function", "is_tensor_like"):
        from ember import overrides     # (PyTorch's autograd re-exports these)
        return getattr(overrides, name)
    raise AttributeError(f"module 'ember.autograd' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
