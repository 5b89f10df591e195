"""Activation checkpointing: keep a segment's inputs, not its activations; recompute in backward.

``checkpoint(fn, *args, use_reentrant=False)`` (the variant PyTorch recommends) runs ``fn``
normally under saved-tensor hooks that keep only each saved tensor's position. The first
time backward unpacks one, ``fn`` is rerun (same RNG and autocast state, grad on) under
hooks that collect what it saves, and each unpack takes its position's recomputed value,
with the original tensor's history. Every autograd feature works through it: ``.grad`` of
closed-over parameters, ``autograd.grad``, hooks, and backward of backward.

``use_reentrant=True`` records one node whose backward reruns ``fn`` and backpropagates
through the rerun with a nested ``backward``; gradients reach the tensor arguments and the
tensors ``fn`` closes over, and ``autograd.grad`` with respect to the latter is unsupported
(as in PyTorch). As in PyTorch too, when no tensor argument requires grad it warns and records
nothing, so the closed-over parameters get no gradient.
"""

import contextlib
import warnings

import ember
from ember._tensor import Tensor
from ember.amp._cache import clear as clear_autocast_cache
from ember.amp._state import STATE as _AMP
from ember.autograd.function import Function
from ember.autograd.grad_mode import enable_grad, is_grad_enabled
from ember.autograd.saved_hooks import saved_tensors_hooks
from ember.utils._selective_checkpoint import (SAC_IGNORED_OPS,  # noqa: F401
                                               CheckpointPolicy, SelectiveCheckpointContext,
                                               create_selective_checkpoint_contexts)

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn",
           "check_backward_validity", "detach_variable", "get_device_states", "set_device_states",
           "set_checkpoint_early_stop", "set_checkpoint_debug_enabled", "DefaultDeviceType",
           "CheckpointPolicy", "SelectiveCheckpointContext",
           "create_selective_checkpoint_contexts", "SAC_IGNORED_OPS"]


class CheckpointError(RuntimeError):
    """A recomputation saved other tensors than the forward it replays."""


_SETTINGS = {"early_stop": True, "debug": None}

_TIP = ("\n\nTip: To see a more detailed error message, either pass `debug=True` to\n"
        "`torch.utils.checkpoint.checkpoint(...)` or wrap the code block\n"
        "with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to\n"
        "enable checkpoint‑debug mode globally.\n")


@contextlib.contextmanager
def set_checkpoint_early_stop(enable):
    """Whether non-reentrant checkpoints stop recomputing once every saved tensor is back
    (on by default)."""
    prev = _SETTINGS["early_stop"]
    _SETTINGS["early_stop"] = enable
    try:
        yield
    finally:
        _SETTINGS["early_stop"] = prev


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """Override every checkpoint's ``debug`` flag inside the block (None: leave them)."""
    prev = _SETTINGS["debug"]
    _SETTINGS["debug"] = enabled
    try:
        yield
    finally:
        _SETTINGS["debug"] = prev


class DefaultDeviceType:
    """The device type whose RNG state checkpoints save besides the CPU's."""

    _default_device_type = "cuda"

    @staticmethod
    def set_device_type(device="cuda"):
        """Set the device type checkpoints preserve RNG state for."""
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type():
        """The device type checkpoints preserve RNG state for."""
        return DefaultDeviceType._default_device_type


def noop_context_fn():
    """The default ``context_fn``: no context around the forward nor the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def check_backward_validity(inputs):
    """Warn when no tensor among ``inputs`` requires grad (a reentrant checkpoint of them
    gives no gradients)."""
    _warn_without_grad(inputs, stacklevel=3)


def _warn_without_grad(inputs, stacklevel):
    if not any(x.requires_grad for x in inputs if isinstance(x, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=stacklevel)


def detach_variable(inputs):
    """Detached copies of a tuple's tensors, each requiring grad as its original did."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    return tuple(x.detach().requires_grad_(x.requires_grad) if isinstance(x, Tensor) else x
                 for x in inputs)


def get_device_states(*args):
    """The GPUs holding the tensor arguments and their generators' states."""
    return _device_states_of(sorted({a.device.index or 0 for a in args
                                     if isinstance(a, Tensor) and a.device.type == "cuda"}))


def set_device_states(devices, states, *, device_type=None):
    """Restore the GPU generator states ``get_device_states`` returned."""
    for device, state in zip(devices, states):
        ember.cuda.set_rng_state(state, device)


class _RandomAndAutocastState:
    """The RNG and autocast state a forward ran in, to rerun it in the same."""

    def __init__(self, args, preserve_rng_state):
        self.autocast = (_AMP.enabled, _AMP.dtype, _AMP.cache_enabled)
        self.rng = None
        if preserve_rng_state:
            self.rng = ember.get_rng_state(), get_device_states(*args)

    @contextlib.contextmanager
    def restored(self):
        """Within the block the forward's state holds; the caller's returns after it."""
        # an autocast region, as PyTorch's recomputation runs in: its exit at the outermost
        # level drops the casts it cached
        prev_autocast = (_AMP.enabled, _AMP.dtype, _AMP.cache_enabled)
        _AMP.enabled, _AMP.dtype, _AMP.cache_enabled = self.autocast
        prev_rng = None
        if self.rng is not None:
            cpu, (devices, states) = self.rng
            prev_rng = ember.get_rng_state(), _device_states_of(devices)
            ember.set_rng_state(cpu)
            set_device_states(devices, states)
        _AMP.nesting += 1
        try:
            yield
        finally:
            _AMP.enabled, _AMP.dtype, _AMP.cache_enabled = prev_autocast
            _AMP.nesting -= 1
            if _AMP.nesting == 0:
                clear_autocast_cache()
            if prev_rng is not None:
                ember.set_rng_state(prev_rng[0])
                set_device_states(*prev_rng[1])


def _device_states_of(devices):
    """``(devices, their generator states)``."""
    return devices, [ember.cuda.get_rng_state(d) for d in devices]


# --- use_reentrant=False: saved-tensor hooks --------------------------------------------------

class _StopRecomputation(Exception):
    pass


class _Recomputation:
    """One checkpointed call: the metadata of what its forward saved, by position, and the
    recomputed tensors until backward takes them."""

    def __init__(self, function, args, kwargs, state, recompute_context, early_stop, check):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.state, self.recompute_context = state, recompute_context
        self.early_stop, self.check = early_stop, check
        self.saved = []                 # (shape, dtype, device) per saved tensor
        self.recomputed = {}

    def pack(self, tensor):
        self.saved.append(_metadata(tensor))
        return len(self.saved) - 1

    def unpack(self, position):
        if position not in self.recomputed:
            self.recompute()
        return self.recomputed.pop(position)

    def recompute(self):
        got = []

        def collect(tensor):
            got.append(tensor.detach())     # unpacking gives it the original's history
            if self.early_stop and len(got) == len(self.saved):
                raise _StopRecomputation
        inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
                  for a in self.args]
        with self.state.restored(), enable_grad(), self.recompute_context, \
                saved_tensors_hooks(collect, _unreachable):
            try:
                self.function(*inputs, **self.kwargs)
            except _StopRecomputation:
                pass
        if len(got) < len(self.saved):
            raise CheckpointError(
                f"torch.utils.checkpoint: A different number of tensors was saved during the "
                f"original forward and recomputation.\nNumber of tensors saved during "
                f"forward: {len(self.saved)}\nNumber of tensors saved during recomputation: "
                f"{len(got)}." + _TIP)
        if self.check:
            _check_metadata(self.saved, [_metadata(t) for t in got])
        self.recomputed = dict(enumerate(got[:len(self.saved)]))


def _unreachable(_):
    raise AssertionError("a recomputation's saved tensors are never unpacked")


def _metadata(t):
    return t.shape, t.dtype, t.device


def _check_metadata(saved, recomputed):
    differing = [i for i, (a, b) in enumerate(zip(saved, recomputed)) if a != b]
    if not differing:
        return
    lines = []
    for i in differing:
        for label, (shape, dtype, device) in (("saved", saved[i]), ("recomputed",
                                                                     recomputed[i])):
            lines.append(f"{label} metadata: {{'shape': {shape!r}, 'dtype': {dtype!r}, "
                         f"'device': {device!r}}}")
        lines.insert(-2, f"tensor at position {i}:")
    raise CheckpointError("torch.utils.checkpoint: Recomputed values for the following "
                          "tensors have different metadata than during the forward pass.\n"
                          + "\n".join(lines) + "\n." + _TIP)


def _checkpoint_with_hooks(function, args, kwargs, context_fn, preserve_rng_state,
                           determinism_check):
    forward_context, recompute_context = context_fn()
    state = _RandomAndAutocastState(args, preserve_rng_state)
    frame = _Recomputation(function, args, kwargs, state, recompute_context,
                           _SETTINGS["early_stop"], determinism_check == "default")
    with forward_context, saved_tensors_hooks(frame.pack, frame.unpack):
        return function(*args, **kwargs)


# --- use_reentrant=True: one node that reruns the segment -------------------------------------

def _under_vmap():
    """Inside ember.func.vmap the reentrant segment just runs, recording its graph as usual:
    its rerun in backward would happen outside the vmap that batched its inputs."""
    from ember.func._batched import STATE
    return bool(STATE.levels)


class CheckpointFunction(Function):
    """The reentrant checkpoint's node: forward without a graph, rerun in backward."""

    @staticmethod
    def forward(ctx, run, preserve_rng_state, kwargs, *args):
        ctx.run, ctx.kwargs = run, kwargs
        ctx.state = _RandomAndAutocastState(args, preserve_rng_state)
        ctx.args = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[a if isinstance(a, Tensor) else None for a in args])
        return run(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grads):
        if not ember.autograd._is_checkpoint_valid():
            raise RuntimeError("When use_reentrant=True, torch.utils.checkpoint is incompatible "
                               "with .grad() or passing an `inputs` parameter to .backward(). To "
                               "resolve this error, you can either set use_reentrant=False, or "
                               "call .backward() without passing the `inputs` argument.")
        inputs = [a if t is None else t.detach().requires_grad_(t.requires_grad)
                  for a, t in zip(ctx.args, ctx.saved_tensors)]
        with ctx.state.restored(), enable_grad():
            outputs = ctx.run(*inputs, **ctx.kwargs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            ember.autograd.backward([o for o, _ in pairs], [g for _, g in pairs],
                                    inputs=None)
        result = [t.grad if isinstance(t, Tensor) and t.requires_grad else None
                  for t in inputs]
        return (None, None, None, *result)


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)`` without keeping its intermediate activations: they are
    recomputed during backward (``torch.utils.checkpoint.checkpoint``)."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly. Starting in PyTorch 2.9, calling checkpoint without "
                      "use_reentrant will raise an exception. use_reentrant=False is "
                      "recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the "
                      "differences between the two variants.", stacklevel=2)
        use_reentrant = True            # PyTorch's default while the parameter is optional
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got "
                         f"{determinism_check}")
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        # as in PyTorch, a segment without such inputs records no node: its parameters get no
        # gradient
        _warn_without_grad(args, stacklevel=3)
        if not is_grad_enabled() or _under_vmap():
            return function(*args)
        return CheckpointFunction.apply(function, preserve_rng_state, kwargs, *args)
    if not is_grad_enabled():
        return function(*args, **kwargs)
    return _checkpoint_with_hooks(function, args, kwargs, context_fn or noop_context_fn,
                                  preserve_rng_state, determinism_check)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a Sequential or list of modules) in ``segments`` checkpointed
    chunks; the last chunk runs normally."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter "
                      "should be passed explicitly. In version 2.9 we will raise an exception if "
                      "use_reentrant is not passed. use_reentrant=False is recommended, but if "
                      "you need to preserve the current default behavior, you can pass "
                      "use_reentrant=True. Refer to docs for more details on the differences "
                      "between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if isinstance(functions, ember.nn.Sequential):
        functions = list(functions.children())
    functions = list(functions)
    size = len(functions) // segments

    def run(start, end):
        def forward(x):
            for f in functions[start:end + 1]:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
