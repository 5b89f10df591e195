"""What the function of a forward-mode transform (``func.jvp``, ``linearize``, ``jacfwd``)
receives for each input.

NOTE [Forward-mode primals]
PyTorch hands such a function dual tensors: they carry a tangent, yet report
``requires_grad=False``, ``is_leaf=True`` and no ``grad_fn``, so in-place ops on them run
(the tangent follows the write) and a custom Function's ``needs_input_grad`` is False for
them. ember differentiates the function in reverse mode (NOTE [Transforms on the tape]) with
respect to a fresh leaf, which must keep the value it had before any write. So the function
gets a ``ForwardPrimal`` instead: the same memory and version counter as that leaf, with a
``PrimalBackward`` identity node to it, so a write into it records on its own history and the
leaf stays the point the Jacobian is taken at. While the function runs it reports PyTorch's
flags; afterwards (``release``) it is a plain Tensor again, whose derivatives, recorded then,
read it as the graph has it. ember's own code asks ``tracks_grad`` (the recorded truth), not
the reported ``requires_grad``.
"""

from ember._tensor import Tensor
from ember.autograd.graph import Node, history
from ember.overrides import _disabled_torch_function_impl

__all__ = ["ForwardPrimal", "PrimalBackward", "primal_for", "release", "tracks_grad"]


class PrimalBackward(Node):
    """The identity from a forward-mode transform's primal to its leaf."""

    __slots__ = ()

    def apply(self, grads):
        """The gradient, unchanged."""
        return [grads[0]]


def _set_requires_grad(self, flag):
    if flag:        # (False it reports already: PyTorch's dual tensors take that as a no-op)
        Tensor.requires_grad.fset(self, flag)


class ForwardPrimal(Tensor):
    """A forward-mode transform's input while its function runs (NOTE above)."""

    __slots__ = ()
    __torch_function__ = _disabled_torch_function_impl
    _forward_primal = True      # (what ember's checks read: ``tracks_grad`` is the truth)
    requires_grad = property(lambda self: False, _set_requires_grad,
                             doc="False, as for PyTorch's dual tensors.")
    is_leaf = property(lambda self: True, doc="True, as for PyTorch's dual tensors.")
    grad_fn = property(lambda self: None, doc="None, as for PyTorch's dual tensors.")

    # what leaves the function as a value (printed, copied, pickled) is a plain tensor's
    def __repr__(self, *, tensor_contents=None):
        return self.detach().__repr__(tensor_contents=tensor_contents)

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = self.detach().__deepcopy__(memo)
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        return self.detach().__reduce_ex__(protocol)


def primal_for(leaf):
    """The ``ForwardPrimal`` standing for ``leaf`` (memory, version and gradient shared)."""
    shown = leaf.detach()
    shown._grad_fn = PrimalBackward((history(leaf),))
    shown._output_nr = 0
    shown.__class__ = ForwardPrimal
    return shown


def release(primals):
    """Make ``primals`` plain tensors again, once the function has run."""
    for t in primals:
        if type(t) is ForwardPrimal:
            t.__class__ = Tensor


def tracks_grad(t):
    """Whether ``t`` records gradient history, whatever it reports (a ``ForwardPrimal``, or
    vmap's wrapper of one, records)."""
    from ember.func._batched import BatchedTensor
    while type(t) is BatchedTensor:
        t = t._value
    return type(t) is ForwardPrimal or t.requires_grad
