"""Inference tensors: the tensors ``inference_mode`` makes, and the rules PyTorch gives them.

A tensor made while inference mode is on is an inference tensor, and so is every view or
alias of one (a view of a normal tensor stays normal, wherever it is made). Outside inference
mode such a tensor cannot be updated in place, saved for backward, or made to require grad.

NOTE [Inference at no cost]: a program that never enters inference mode pays one list lookup
per tensor made (``_make`` reads ``ACTIVE``) and per recorded op or in-place op (``MADE``):
the checks below run only once some inference tensor exists. The mark is a key of the
tensor's ``_meta`` extras, set on every tensor made in inference mode; a view asks its base,
and aliases (``detach``, ``Parameter``) copy it from their source.
"""

import threading

from ember._transform_births import STATE as _BIRTHS, note_alias

__all__ = ["is_inference", "inherit", "check_inplace", "check_saved", "check_requires_grad"]

ACTIVE = [0]            # inference-mode blocks open now, in any thread (``_make`` reads it),
                        # and transforms tracing (NOTE [Captured tensors])
MADE = [False]          # whether any inference tensor has been made (never reset)
_LOCK = threading.Lock()
STATE = None            # the grad-mode state (set on the first block: importing it here
                        # would make ember._tensor import the autograd package)


def enter():
    """Count an inference-mode block opening."""
    global STATE
    if STATE is None:
        from ember.autograd.grad_mode import STATE
    with _LOCK:
        ACTIVE[0] += 1


def leave():
    """Count an inference-mode block closing."""
    with _LOCK:
        ACTIVE[0] -= 1


def mark(t):
    """Make ``t`` (made just now, in inference mode) an inference tensor; returns it."""
    if STATE.inference:
        MADE[0] = True
        t._meta = {KEY: True}
    if _BIRTHS.levels:      # (a transform's function runs: NOTE [Captured tensors])
        _BIRTHS.levels[-1][0].add(id(t))
    return t


KEY = _KEY = "inference"       # the mark in a tensor's ``_meta``


def is_inference(t):
    """Whether ``t`` is an inference tensor (``torch.is_inference``): a view asks its base."""
    if not MADE[0]:
        return False
    view = t._view
    if view is not None:
        t = view[0]
    meta = t._meta
    return bool(meta) and _KEY in meta


def inherit(alias, source):
    """Make ``alias`` (a new tensor sharing ``source``'s memory, ``detach``'s result, with
    its ``_meta`` extras set) an inference tensor if ``source`` is one; inside a transform,
    a captured tensor if ``source`` is one (NOTE [Captured tensors])."""
    if MADE[0] and is_inference(source):
        alias._meta[_KEY] = True
    if ACTIVE[0] and _BIRTHS.levels:        # (NOTE [Captured tensors])
        note_alias(alias, source)


def check_inplace(t):
    """Refuse an in-place update of inference tensor ``t`` outside inference mode."""
    if not STATE.inference and is_inference(t):
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not allowed.You can "
            "make a clone to get a normal tensor before doing inplace update.See "
            "https://github.com/pytorch/rfcs/pull/17 for more details.")


def check_saved(flat, all_saved=False):
    """Refuse to save, for backward, an inference tensor among an op's operands ``flat``.

    Unless ``all_saved`` (a custom Function saves exactly what it names), only operands that
    do not require grad are refused: an op saves an operand for the gradients of the others,
    and ember's ops do not say which operand each gradient needs, so a weight made in
    inference mode (it requires grad) passes, as it does in PyTorch when the other operands
    need no gradient. Inside a forward-mode transform (``func.jvp``, ``jacfwd``,
    ``linearize``), where PyTorch saves nothing, ember's record of the function and its
    backward passes save them (as constants: made in inference mode, they carry no tangent)."""
    from ember._tensor import Tensor
    if _forward_mode():
        return
    for x in flat:
        if isinstance(x, Tensor) and (all_saved or not x.requires_grad) and is_inference(x):
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. Please do not use Tensors "
                "created in inference mode in computation tracked by autograd. To work around "
                "this, you can make a clone to get a normal tensor and use it in autograd, or "
                "use `torch.no_grad()` instead of `torch.inference_mode()`.")


def _forward_mode():
    """Whether forward-mode transforms alone are tracing (under a reverse-mode one, as
    ``grad(jvp(f))``, PyTorch saves for that one's backward), or one is running the backward
    passes that give its tangents (NOTE [Tangents through no_grad])."""
    from ember.autograd._forward_traces import LINEARIZING, TRACES
    return bool(TRACES.forward) and not TRACES.reverse or LINEARIZING.depth > 0


def check_requires_grad(t):
    """Refuse ``requires_grad=True`` on inference tensor ``t`` outside inference mode."""
    if not STATE.inference and is_inference(t):
        raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                           "InferenceMode is not allowed.")
