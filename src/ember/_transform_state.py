"""What ember's function transforms share with tensor creation and ``requires_grad_``.

NOTE [Leaves made inside a transform]
A function given to ``grad``/``vjp``/``jvp``/``jacrev``/``jacfwd``/``hessian`` may close over
tensors that require grad, and its results then stay in their graph (``_Traced`` in
func/_autodiff.py walks the results' graph for such tensors). A leaf that starts requiring
grad *while* the function runs (``ones(3, requires_grad=True)``, an ``nn.Linear`` built inside,
``t.requires_grad = True``) is no such tensor: in PyTorch it belongs to the transform, whose
results do not require grad through it. So while the outermost such transform traces its
function, ``STATE.made`` collects those leaves (``note_made``, called only where a leaf starts
requiring grad: the cost stays off factories without ``requires_grad``), and the walk treats
them as the transform's own. The record holds them while the transform's results may
still be walked (a vjp's function over a closure keeps it), so that a leaf func made and
dropped is still known as its own, while a leaf gone from outside (a hypernetwork's parameter
whose output func closes over) still keeps results in the graph, as PyTorch's. A tensor
made before the function ran that starts requiring grad inside it (``t.requires_grad =
True``) is not recorded: results stay in the graph through it, as PyTorch's (NOTE [Captured
tensors] in ember/_transform_births.py says how ember knows).

PyTorch refuses ``Tensor.requires_grad_()`` (with any flag, on any tensor) while a transformed
function runs, vmap's included (``linearize``, which traces, is the exception).
``STATE.user`` says whether that function, rather than ember's own transform machinery, is
running: True inside ``_Traced``'s call of it, False while the machinery runs (which flags its
own leaves), None outside ``_Traced``, where vmap's levels decide.
"""

import threading

from ember._transform_births import made_here

__all__ = ["STATE", "note_made", "check_requires_grad_allowed", "check_retain_grad_allowed"]


class _State(threading.local):
    made = None     # {id: leaf} of the leaves made requiring grad in the running trace
    user = None     # see NOTE above


STATE = _State()


def note_made(t):
    """Record that leaf ``t`` started requiring grad inside the running trace, if the trace
    made it (NOTE [Captured tensors])."""
    if made_here(t):
        STATE.made[id(t)] = t


_IN_TRANSFORM = ("You are attempting to call Tensor.requires_grad_() (or perhaps using "
                 "torch.autograd.functional.* APIs) inside of a function being transformed by a "
                 "functorch transform. This is unsupported, please attempt to use the functorch "
                 "transforms (e.g. grad, vjp, jacrev, jacfwd, hessian) or call requires_grad_() "
                 "outside of a function being transformed instead.")

_VMAP = []          # ember.func._batched.STATE, once imported (it imports ember._tensor)


def check_requires_grad_allowed(message=_IN_TRANSFORM):
    """PyTorch's refusal of ``requires_grad_()`` inside a transformed function."""
    user = STATE.user
    if user is None:
        if not _VMAP:
            from ember.func._batched import STATE as vmap_state
            _VMAP.append(vmap_state)
        user = bool(_VMAP[0].levels)
    if user:
        raise RuntimeError(message)


_RETAIN_IN_TRANSFORM = _IN_TRANSFORM.replace("requires_grad_() (or perhaps using "
                                             "torch.autograd.functional.* APIs)", "retain_grad()"
                                             ).replace("requires_grad_()", "retain_grad()")


def check_retain_grad_allowed():
    """PyTorch's refusal of ``retain_grad()`` inside a transformed function (where it refuses
    ``requires_grad_()``: ``linearize``'s function may)."""
    check_requires_grad_allowed(_RETAIN_IN_TRANSFORM)
