"""Activation checkpointing: keep a segment's inputs, not its activations; recompute in backward.

``checkpoint(fn, *args)`` runs ``fn`` without recording a graph and records one node whose
backward reruns ``fn`` with grad on (restoring the RNG state the forward saw, so dropout
draws the same mask) and backpropagates through the rerun. Gradients reach both the
tensor arguments and the tensors ``fn`` closes over (a module's parameters), as PyTorch's
``use_reentrant=False`` does for ``backward()``; ``autograd.grad`` with respect to such
closed-over tensors is not supported (PyTorch's reentrant variant has the same limit).
"""

import warnings

import ember
from ember._tensor import Tensor
from ember.autograd.function import Function
from ember.autograd.grad_mode import enable_grad, is_grad_enabled

__all__ = ["checkpoint", "checkpoint_sequential"]


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, run, preserve_rng_state, kwargs, anchor, *args):
        ctx.run, ctx.kwargs = run, kwargs
        ctx.rng_state = ember.get_rng_state() if preserve_rng_state else None
        ctx.args = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[a if isinstance(a, Tensor) else None for a in args])
        return run(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        inputs = []
        for a, t in zip(ctx.args, saved):
            if t is None:
                inputs.append(a)
            else:
                inputs.append(t.detach().requires_grad_(t.requires_grad))
        state = ember.get_rng_state() if ctx.rng_state is not None else None
        try:
            if state is not None:
                ember.set_rng_state(ctx.rng_state)
            with enable_grad():
                outputs = ctx.run(*inputs, **ctx.kwargs)
        finally:
            if state is not None:
                ember.set_rng_state(state)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            ember.autograd.backward([o for o, _ in pairs], [g for _, g in pairs],
                                    inputs=None)
        result = [t.grad if isinstance(t, Tensor) and t.requires_grad else None
                  for t in inputs]
        return (None, None, None, None, *result)


_ANCHOR = {}


def _anchor():
    """A tensor that requires grad, so the checkpoint node is recorded even when no argument
    requires grad (the segment's parameters may)."""
    if "t" not in _ANCHOR:
        _ANCHOR["t"] = ember.zeros(0, requires_grad=True)
    return _ANCHOR["t"]


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)`` without keeping its intermediate activations: they are
    recomputed during backward (``torch.utils.checkpoint.checkpoint``)."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly. Starting in PyTorch 2.9, calling checkpoint without "
                      "use_reentrant will raise an exception. use_reentrant=False is "
                      "recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the "
                      "differences between the two variants.", stacklevel=2)
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if not is_grad_enabled():
        return function(*args, **kwargs)
    return _Checkpoint.apply(function, preserve_rng_state, kwargs, _anchor(), *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a Sequential or list of modules) in ``segments`` checkpointed
    chunks; the last chunk runs normally."""
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
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions) - 1)(input)
