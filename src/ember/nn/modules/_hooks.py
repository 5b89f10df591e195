"""Module hooks: removable handles, the global (all-module) hook tables, the slow call path
that runs forward hooks, and full backward hooks built on an identity autograd Function."""

import warnings
from collections import OrderedDict

from ember._creation import zeros, zeros_like
from ember._hook_handles import RemovableHandle
from ember._tensor import Tensor
from ember._warn import outside_level
from ember.autograd._forward_traces import TRACES, requires_grad_here, vmap_is_innermost
from ember.autograd.function import Function
from ember.autograd.grad_mode import is_grad_enabled

__all__ = ["RemovableHandle", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_full_backward_hook",
           "register_module_backward_hook", "register_module_buffer_registration_hook",
           "register_module_module_registration_hook",
           "register_module_parameter_registration_hook"]


def add_hook(table, hook, prepend=False, flags=()):
    """Put ``hook`` in ``table`` (first when ``prepend``), and its id in each flag table."""
    handle = RemovableHandle(table, extra_dict=list(flags))
    table[handle.id] = hook
    for flag in flags:
        flag[handle.id] = True
    if prepend:
        table.move_to_end(handle.id, last=False)
    return handle


# Hooks that apply to every module. ACTIVE[0] is True while any call-time hook is registered,
# so Module.__call__ checks one list item instead of four tables.
forward_pre_hooks = OrderedDict()
forward_hooks = OrderedDict()
forward_hooks_always_called = OrderedDict()
forward_hooks_with_kwargs = OrderedDict()
backward_pre_hooks = OrderedDict()
backward_hooks = OrderedDict()
buffer_registration_hooks = OrderedDict()
module_registration_hooks = OrderedDict()
parameter_registration_hooks = OrderedDict()
ACTIVE = [False]


class _GlobalHandle(RemovableHandle):
    def remove(self):
        super().remove()
        _refresh()


def _refresh():
    ACTIVE[0] = bool(forward_pre_hooks or forward_hooks or backward_pre_hooks or backward_hooks)


def _add_global(table, hook, flags=()):
    handle = _GlobalHandle(table, extra_dict=list(flags))
    table[handle.id] = hook
    for flag in flags:
        flag[handle.id] = True
    _refresh()
    return handle


def register_module_forward_pre_hook(hook):
    """Call ``hook(module, args)`` before every module's forward."""
    return _add_global(forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """Call ``hook(module, args, output)`` (or ``(module, args, kwargs, output)``) after every
    module's forward."""
    flags = ((forward_hooks_always_called,) if always_call else ()) + (
        (forward_hooks_with_kwargs,) if with_kwargs else ())
    return _add_global(forward_hooks, hook, flags)


def register_module_full_backward_pre_hook(hook):
    """Call ``hook(module, grad_output)`` before every module's input gradients are computed."""
    return _add_global(backward_pre_hooks, hook)


# Whether the global backward hooks are full (True) or regular (False) ones: None until the
# first is registered, then fixed, as in PyTorch
GLOBAL_FULL = [None]


def _global_backward_kind(full):
    if GLOBAL_FULL[0] is not None and GLOBAL_FULL[0] != full:
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a "
                           "global Module hook. Please use only one of them.")
    GLOBAL_FULL[0] = full


def register_module_full_backward_hook(hook):
    """Call ``hook(module, grad_input, grad_output)`` once every module's input grads exist."""
    _global_backward_kind(True)
    return _add_global(backward_hooks, hook)


def register_module_backward_hook(hook):
    """Deprecated: call ``hook(module, grad_input, grad_output)`` with the gradients of the
    Node that makes each module's output (as ``Module.register_backward_hook``)."""
    _global_backward_kind(False)
    return _add_global(backward_hooks, hook)


def register_module_buffer_registration_hook(hook):
    """Call ``hook(module, name, buffer)`` on every ``register_buffer``; it may return a new one."""
    return _add_global(buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook):
    """Call ``hook(module, name, submodule)`` on every submodule registration."""
    return _add_global(module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook):
    """Call ``hook(module, name, param)`` on every ``register_parameter``."""
    return _add_global(parameter_registration_hooks, hook)


# ----- the call path with hooks ---------------------------------------------------------------

def hooked_call(module, args, kwargs):
    """``module(*args, **kwargs)`` with its (and the global) hooks run around forward."""
    d = module.__dict__
    called_always = set()
    result = None
    try:
        for hook_id, hook in (*forward_pre_hooks.items(), *d["_forward_pre_hooks"].items()):
            if hook_id in d["_forward_pre_hooks_with_kwargs"]:
                new = hook(module, args, kwargs)
                if new is not None:
                    if not (isinstance(new, tuple) and len(new) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {new}.")
                    args, kwargs = new
            else:
                new = hook(module, args)
                if new is not None:
                    args = new if isinstance(new, tuple) else (new,)
        own_regular = d.get("_is_full_backward_hook") is False
        regular = {**(backward_hooks if GLOBAL_FULL[0] is False else {}),
                   **(d["_backward_hooks"] if own_regular else {})}
        full = [*(() if GLOBAL_FULL[0] is False else backward_hooks.values()),
                *(() if own_regular else d["_backward_hooks"].values())]
        pre = [*backward_pre_hooks.values(), *d["_backward_pre_hooks"].values()]
        bw = BackwardHook(module, full, pre) if full or pre else None
        if bw is not None:
            args = bw.setup_input_hook(args)
        result = module.forward(*args, **kwargs)
        for hook_id, hook in (*forward_hooks.items(), *d["_forward_hooks"].items()):
            if hook_id in forward_hooks_always_called or \
                    hook_id in d["_forward_hooks_always_called"]:
                called_always.add(hook_id)
            if hook_id in d["_forward_hooks_with_kwargs"] or hook_id in forward_hooks_with_kwargs:
                out = hook(module, args, kwargs, result)
            else:
                out = hook(module, args, result)
            if out is not None:
                result = out
        if bw is not None:
            result = bw.setup_output_hook(result)
        if regular:
            hook_output_node(module, regular, args, result)
        return result
    except BaseException:
        _run_always_called(module, forward_hooks, "global module", called_always, args, kwargs,
                           result)
        _run_always_called(module, d["_forward_hooks"], "module", called_always, args, kwargs,
                           result)
        raise


def _run_always_called(module, table, kind, called, args, kwargs, result):
    """After an error in the call, run the ``always_call`` hooks of ``table`` not yet run."""
    d = module.__dict__
    for hook_id, hook in table.items():
        if hook_id in called or not (hook_id in forward_hooks_always_called
                                     or hook_id in d["_forward_hooks_always_called"]):
            continue
        try:
            if hook_id in d["_forward_hooks_with_kwargs"] or hook_id in forward_hooks_with_kwargs:
                hook(module, args, kwargs, result)
            else:
                hook(module, args, result)
        except Exception as e:
            warnings.warn(f"{kind} forward hook with ``always_call=True`` raised an exception "
                          f"that was silenced as another error was raised in forward: {e}",
                          stacklevel=4)


# ----- regular (deprecated, non-full) backward hooks ------------------------------------------

def _missing(what, some):
    return (f"{what} is deprecated and will be removed in future versions. This hook will be "
            f"missing some {some}. Please use register_full_backward_hook to get the documented "
            f"behavior.")


def _first_tensor(value):
    while not isinstance(value, Tensor):
        value = next(v for v in value.values() if isinstance(v, Tensor)) \
            if isinstance(value, dict) else value[0]
    return value


def hook_output_node(module, hooks, args, result):
    """Attach ``register_backward_hook`` hooks to the autograd Node that made the module's
    (first) output, as PyTorch does: each sees that Node's grad_input and grad_output, and
    may return a new grad_input. Warn (FutureWarning) where that misses module gradients."""
    grad_fn = _first_tensor(result).grad_fn
    if grad_fn is None:
        return
    for hook in hooks.values():
        grad_fn.register_hook(_node_hook(module, hook))
    message = _regular_hook_warning(args, result, grad_fn)
    if message:
        warnings.warn(message, FutureWarning, stacklevel=1)


def _node_hook(module, hook):
    """``hook(module, grad_input, grad_output)`` as a Node hook, under ``hook``'s name (which
    the engine's errors about what it returned quote, as PyTorch's do)."""
    def node_hook(grad_input, grad_output):
        return hook(module, grad_input, grad_output)
    node_hook.__name__ = getattr(hook, "__name__", "<unknown>")
    return node_hook


def _regular_hook_warning(args, result, grad_fn):
    """What a regular backward hook on the Node ``grad_fn`` misses of the module's
    gradients, in PyTorch's words (None when it misses nothing)."""
    outputs = (result,) if isinstance(result, Tensor) else result
    if not isinstance(outputs, tuple) or not all(isinstance(o, Tensor) for o in outputs):
        return _missing("Using non-full backward hooks on a Module that does not return a "
                        "single Tensor or a tuple of Tensors", "of the grad_output")
    if not all(isinstance(a, Tensor) for a in args):
        return _missing("Using non-full backward hooks on a Module that does not take as input "
                        "a single Tensor or a tuple of Tensors", "of the grad_input")
    if any(o.grad_fn is not grad_fn for o in outputs):
        return _missing("Using a non-full backward hook when outputs are generated by different "
                        "autograd Nodes", "grad_output")
    # the Node's inputs must be the module's inputs' Nodes (a leaf input shows as its
    # AccumulateGrad, so it never matches)
    if {a.grad_fn for a in args if a.grad_fn is not None} != \
            {node for node, _ in grad_fn.next_functions}:
        return _missing("Using a non-full backward hook when the forward contains multiple "
                        "autograd Nodes", "grad_input")
    return None


# ----- full backward hooks --------------------------------------------------------------------

class BackwardHookFunction(Function):
    """Identity on a group of tensors whose backward hands their gradients to a callback."""

    _python_in_torch = True     # refused under functorch transforms, as PyTorch's is

    @staticmethod
    def forward(ctx, callback, *tensors):
        ctx.callback = callback
        ctx.set_materialize_grads(False)
        return tensors if len(tensors) != 1 else tensors[0]

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.callback(grads))


class BackwardHook:
    """Runs a module's full backward (pre-)hooks from gradients captured around its forward
    (``torch.utils.hooks.BackwardHook``): wrap the forward's arguments with
    ``setup_input_hook`` and its result with ``setup_output_hook``."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.n_inputs = 0
        self.input_hooked = False
        self.no_input_grads = True
        self.grad_outputs = None

    def setup_input_hook(self, args):
        """Return ``args`` with the tensors that require grad passed through the hook node."""
        self.n_inputs = len(args)
        where = _requiring_grad(args)
        self.no_input_grads = not where or not is_grad_enabled()    # (PyTorch warns, below)
        if self.no_input_grads:
            return args     # (under no_grad the inputs pass through as they are)
        # wrapped for backward pre-hooks alone too: forward sees the hook node's outputs (an
        # in-place op on them fails), and the node gives zeros to inputs no gradient reached
        self.input_hooked = True
        self.input_positions = where
        self.input_meta = [(args[i].shape, args[i].dtype, args[i].device) for i in where]
        # PyTorch hands zeros for the tensor inputs that do not require grad
        self.constant_inputs = [(i, a) for i, a in enumerate(args)
                                if isinstance(a, Tensor) and not a.requires_grad]
        return _rewrap(args, where, self._on_input_grads)

    def setup_output_hook(self, result):
        """Return the forward's result with its tensors passed through the hook node."""
        single = isinstance(result, Tensor)
        if not single and not isinstance(result, tuple):
            warnings.warn("For backward hooks to be called, module output should be a Tensor "
                          f"or a tuple of Tensors but received {type(result)}", stacklevel=3)
            return result
        outs = (result,) if single else result
        where = _requiring_grad(outs)
        if not where or not is_grad_enabled():
            return result
        # grad_output has one entry per output: None for those that need no grad
        self.output_slots, self.n_outputs = where, len(outs)
        new = _rewrap(outs, where, self._on_output_grads)
        return new[0] if single else new

    def _on_output_grads(self, grads):
        full = [None] * self.n_outputs
        for slot, g in zip(self.output_slots, grads):
            full[slot] = g
        grads = tuple(full)
        for hook in self.user_pre_hooks:
            out = hook(self.module, grads)
            if out is not None:
                grads = _check_grads(out, grads, "Backward pre hook", "grad_output")
        self.grad_outputs = grads
        if not self.input_hooked and (self.user_hooks or self.no_input_grads):
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients. See "
                          "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.register_full_backward_hook for more details.",
                          stacklevel=outside_level())
            for hook in self.user_hooks:
                res = hook(self.module, (None,) * self.n_inputs, grads)
                # a tuple of Nones (of any length) is accepted too, as in PyTorch
                if res is not None and not (isinstance(res, tuple)
                                            and all(r is None for r in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
        # the hooks, and what made that output, get None for an output no gradient reached
        return tuple(grads[slot] for slot in self.output_slots)

    def _on_input_grads(self, grads):
        # the inputs no gradient reached get zeros (the hooks see them too), as in PyTorch
        grads = tuple(g if g is not None else zeros(shape, dtype=dtype, device=device)
                      for g, (shape, dtype, device) in zip(grads, self.input_meta))
        if self.grad_outputs is None or not self.user_hooks:
            self.grad_outputs = None
            return grads
        full = [None] * self.n_inputs
        for pos, g in zip(self.input_positions, grads):
            full[pos] = g
        for pos, a in self.constant_inputs:
            full[pos] = zeros_like(a)
        full = tuple(full)
        for hook in self.user_hooks:
            out = hook(self.module, full, self.grad_outputs)
            if out is not None:
                full = _check_grads(out, full, "Backward hook", "grad_input")
        self.grad_outputs = None    # a double backward reaching the inputs runs no hook again
        return tuple(full[pos] for pos in self.input_positions)


def _requiring_grad(values):
    """The positions of the tensors among ``values`` that require grad as PyTorch's
    BackwardHook reads the flag: under a vmap innermost among the transforms, a batched
    tensor reports none; under another transform, only what the innermost one's inputs
    reach (``requires_grad_here``), so that no hook node is recorded and no Function refuses
    where PyTorch's does not."""
    where = [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]
    if not where:
        return where
    vmap_inside = vmap_is_innermost()
    if vmap_inside or TRACES.forward:
        from ember.func._batched import BatchedTensor      # (ember.func imports nn)
        if vmap_inside:
            return [i for i in where if type(values[i]) is not BatchedTensor]
        where = [i for i in where if requires_grad_here(_unbatched(values[i], BatchedTensor))]
    return where


def _unbatched(t, batched):
    """The tensor the vmaps (outside the innermost transform) batch ``t`` over."""
    while type(t) is batched:
        t = t._value
    return t


def _rewrap(values, where, callback):
    wrapped = BackwardHookFunction.apply(callback, *(values[i] for i in where))
    if len(where) == 1:
        wrapped = (wrapped,)
    out = list(values)
    for i, w in zip(where, wrapped):
        out[i] = w
    return tuple(out)


def _check_grads(out, old, what, grads):
    """Validate what a backward (pre-)hook returned against the gradients it was given."""
    if not hasattr(out, "__len__"):     # (a generator, say: PyTorch takes its len() first)
        raise TypeError(f"object of type '{type(out).__name__}' has no len()")
    out = tuple(out)
    if len(out) != len(old):
        raise RuntimeError(f"{what} returned an invalid number of {grads}, got {len(out)}, "
                           f"but expected {len(old)}")
    for new_grad, old_grad in zip(out, old):
        if isinstance(new_grad, Tensor) and isinstance(old_grad, Tensor):
            if new_grad.shape != old_grad.shape:
                raise RuntimeError("hook 'hook' has changed the size of value")
            if new_grad.dtype != old_grad.dtype:
                raise RuntimeError(f"hook 'hook' has changed the type of value (was "
                                   f"{old_grad.type()} got {new_grad.type()})")
    return out
