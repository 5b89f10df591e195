"""Backward nodes that refuse, as PyTorch's do where its derivative formula meets a sparse
gradient it has no kernel for (``s.sum(dim)``, ``s.index_select``, ``s.select`` of a COO
tensor; ``values()`` of a CSC, BSR or BSC tensor): the forward runs, the node carries
PyTorch's name, and backward through it raises PyTorch's error."""

import ember
from ember.autograd.function import Function
from ember.ops._recording import rename_node
from ember.sparse._tensor import SparseTensor

__all__ = ["refusing", "bare_repr"]


def bare_repr(node):
    """A node's repr as PyTorch's C++ nodes print (``<SumBackward1 object at ...>``), for the
    nodes ember writes as autograd Functions in place of PyTorch's kernels."""
    return f"<{type(node).__name__} object at {hex(id(node))}>"


class _Refused(Function):
    """``values`` passed on; their backward raises ``error``."""

    @staticmethod
    def forward(ctx, values, error):
        ctx.error = error
        return values.clone()

    @staticmethod
    def backward(ctx, grad):
        raise ctx.error


def refusing(result, name, error):
    """``result`` (a sparse tensor: its values) under a node named ``name`` whose backward
    raises ``error``; ``result`` itself when nothing it holds requires grad."""
    values = result._v if isinstance(result, SparseTensor) else result
    if not (values.requires_grad and ember.is_grad_enabled()):
        return result
    refused = rename_node(_Refused.apply(values, error), name)
    type(refused.grad_fn).__repr__ = bare_repr
    if isinstance(result, SparseTensor):
        result._v = refused
        return result
    return refused
