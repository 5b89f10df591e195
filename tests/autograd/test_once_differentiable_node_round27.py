"""The node a @once_differentiable backward leaves on its create_graph gradient is named as
PyTorch's C++ Error node is (class ``Error``, ``name()`` ``torch::autograd::Error``)."""

import re

import ember


class _Once(ember.autograd.Function):
    @staticmethod
    def forward(ctx, r):
        ctx.save_for_backward(r)
        return ember.cos(r)

    @staticmethod
    @ember.autograd.function.once_differentiable
    def backward(ctx, g):
        (r,) = ctx.saved_tensors
        return -g * ember.sin(r)


def test_error_node_names():
    r = ember.tensor([0.3, 1.2], requires_grad=True)
    g = ember.autograd.grad((_Once.apply(r) ** 2).sum(), r, create_graph=True)[0]
    node = g.grad_fn
    assert type(node).__name__ == "Error"
    assert node.name() == "torch::autograd::Error"
    assert re.fullmatch(r"<Error object at 0x[0-9a-f]+>", repr(node))
    assert [type(f).__name__ for f, _ in node.next_functions] == ["AccumulateGrad"]
