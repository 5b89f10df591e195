"""Tensor hooks registered inside a transformed function.

NOTE [Hooks inside transforms]
In PyTorch a hook registered inside ``grad``'s (``vjp``'s, ``jacrev``'s) function sits on
that transform's wrapper of the tensor: it runs in that transform's backward pass, once, and
not again when an outer transform differentiates the gradient (``jvp(grad(f))``,
``hessian``: the hook's own arithmetic is differentiated, as recorded). Inside a ``vmap``
nested in the transform it sees the per-example gradient; on a tensor batched by a ``vmap``
inside the innermost transform (``grad(vmap(f))``) PyTorch refuses it, that wrapper
requiring no grad. ember's tensors are shared by all levels, so the hook is wrapped
(``scoped_hook``): it runs only while the backward pass of the transform owning the tensor
runs (the innermost whose function made or was given it: ``_Traced.token``, ``pulling``),
and, on a batched tensor, on its physical value, with the gradient rewrapped at its levels.
"""

import threading

from ember._tensor import Tensor
from ember._transform_births import STATE as _BIRTHS, captured_at
from ember.func._batched import BatchedTensor, level_size, remove_level, wrap

__all__ = ["OWNERS", "scoped_hook", "owning", "pulling"]


class _Owners(threading.local):
    tokens = ()         # the token of each transform whose function runs (births' levels')
    pulling = None      # the token of the transform whose backward pass runs


OWNERS = _Owners()


class owning:
    """Context manager: the function of the transform of ``token`` runs (entered with its
    ``tracing_births``)."""

    __slots__ = ("token", "outer")

    def __init__(self, token):
        self.token = token

    def __enter__(self):
        self.outer = OWNERS.tokens
        OWNERS.tokens = self.outer + (self.token,)

    def __exit__(self, *exc):
        OWNERS.tokens = self.outer


class pulling:
    """Context manager: the backward pass of the transform of ``token`` runs."""

    __slots__ = ("token", "outer")

    def __init__(self, token):
        self.token = token

    def __enter__(self):
        self.outer, OWNERS.pulling = OWNERS.pulling, self.token

    def __exit__(self, *exc):
        OWNERS.pulling = self.outer


class _ScopedHook:
    """A tensor hook that runs only in its owner's backward passes (NOTE above)."""

    __slots__ = ("hook", "owner", "chain", "__weakref__")

    def __init__(self, hook, owner, chain):
        self.hook, self.owner, self.chain = hook, owner, chain

    def __call__(self, grad):
        if OWNERS.pulling is not self.owner:
            return None
        if not self.chain:
            return self.hook(grad)
        for level in reversed(self.chain):
            grad = wrap(grad, level)
        out = self.hook(grad)
        if not isinstance(out, Tensor):     # (None: unchanged; else the engine's TypeError)
            return out
        for level in self.chain:
            out = remove_level(out, level, level_size(level))
        return out

    @property
    def __name__(self):         # (what the engine's messages name)
        return getattr(self.hook, "__name__", "<unknown>")

    def __repr__(self):
        return repr(self.hook)


def scoped_hook(t, hook):
    """``(tensor, hook)`` to register for a hook on ``t`` registered while a transformed
    function runs, or on a batched tensor (NOTE above)."""
    chain = []
    if type(t) is BatchedTensor:
        from ember.func._autodiff import batched_within
        if batched_within((t,)):
            raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                               "gradient")
        while type(t) is BatchedTensor:
            chain.append(t._level)
            t = t._value
    owner = None
    for level, token in zip(reversed(_BIRTHS.levels), reversed(OWNERS.tokens)):
        if not captured_at(t, level):
            owner = token
            break
    if owner is None and not chain:
        return t, hook
    return t, _ScopedHook(hook, owner, chain)
