"""Saved tensors cut from their node by ``detach_()`` after an op saved them.

PyTorch refuses to unpack such a tensor in backward. ``detach_()`` notes the node count at
the time on the tensor; a node made before then that saved it refuses it on unpacking.
"""

DETACHED_IN_PLACE = [False]     # whether detach_() ever cut a tensor from its node
_DETACHED = ("Trying to use a saved tensor that has been detached in-place, i.e. with "
             ".detach_().This is not supported, please use out-of-place `.detach()` instead")


def note_detached(t):
    """Record that ``detach_()`` cut ``t`` from its node: the nodes made so far that saved
    it refuse to unpack it."""
    from ember.autograd.graph import _sequence
    DETACHED_IN_PLACE[0] = True     # (a number of its own: nodes made since, and the nodes
    t._meta = {**(t._meta or {}), "detached_before": next(_sequence)}  # placed just before


def check_detached(node):
    """Raise PyTorch's error if op node ``node`` saved a tensor detached in place since (in
    backward only: PyTorch's ``_saved_*`` attributes still read it)."""
    inputs = node._inputs
    if inputs is None or node._released:
        return
    for t in inputs[0]:
        meta = getattr(t, "_meta", None)
        if meta and meta.get("detached_before", -1) > node._seq:
            raise RuntimeError(_DETACHED)
