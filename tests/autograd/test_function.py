"""Custom autograd.Function: ctx, saved tensors, multiple outputs, dirty and non-differentiable."""

import pytest

import ember
from ember.autograd import Function, once_differentiable


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x


def leaf(*values):
    return ember.tensor(list(values), dtype=ember.float64, requires_grad=True)


def test_forward_backward_and_node_name():
    x = leaf(1.0, 2.0)
    y = Cube.apply(x)
    assert y.grad_fn.name() == "CubeBackward"
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]


def test_gradcheck_and_double_backward():
    x = leaf(0.5, -1.5)
    assert ember.autograd.gradcheck(Cube.apply, (x,))
    assert ember.autograd.gradgradcheck(Cube.apply, (x,))


def test_needs_input_grad_and_non_tensor_arguments():
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, factor, w):
            ctx.factor = factor
            ctx.seen = ctx.needs_input_grad
            return x * factor * w

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.factor, None, None

    x = leaf(1.0)
    y = Scale.apply(x, 4.0, ember.ones(1, dtype=ember.float64))
    y.backward()
    assert y.grad_fn.seen == (True, False, False) and x.grad.item() == 4.0


def test_multiple_outputs_and_materialized_grads():
    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    x = leaf(1.0)
    a, b = Split.apply(x)
    a.backward()                        # b's gradient arrives as zeros
    assert x.grad.item() == 2.0


def test_mark_non_differentiable():
    class WithMask(Function):
        @staticmethod
        def forward(ctx, x):
            mask = x > 0
            out = x * 1
            ctx.mark_non_differentiable(mask)
            return out, mask

        @staticmethod
        def backward(ctx, g, g_mask):
            return g

    x = leaf(1.0, -1.0)
    out, mask = WithMask.apply(x)
    assert out.requires_grad and not mask.requires_grad


def test_mark_dirty_in_place_forward():
    class AddOneInPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = leaf(1.0)
    y = x * 1
    z = AddOneInPlace.apply(y)
    assert z is y and y.tolist() == [2.0]
    assert y._version == 2          # add_ and the marking each count, as in PyTorch
    z.backward()
    assert x.grad.item() == 1.0


def test_mark_dirty_bumps_the_version_without_a_write():
    class MarkOnly(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    plain = ember.ones(2)
    MarkOnly.apply(plain)
    assert plain._version == 1


def test_node_repr_names_its_module():
    node = Cube.apply(leaf(1.0)).grad_fn
    assert repr(node).startswith("<ember.autograd.function.CubeBackward object at 0x")


def test_setup_context_style():
    class Square(Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = leaf(3.0)
    Square.apply(x).backward()
    assert x.grad.item() == 6.0


def test_saved_tensor_modified_in_place_is_detected():
    x = leaf(1.0)
    h = x * 1
    y = Cube.apply(h)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_saved_tensors_freed_after_backward():
    x = leaf(1.0)
    y = Cube.apply(x)
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_wrong_number_of_gradients():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, w):
            return x * w

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(leaf(1.0), leaf(2.0)).backward()


def test_once_differentiable_backward_runs_without_grad():
    class F(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            assert not ember.is_grad_enabled()
            return g * 2

    x = leaf(1.0)
    F.apply(x).backward(create_graph=True)
    assert x.grad.item() == 2.0


def test_no_graph_without_grad_inputs():
    y = Cube.apply(ember.tensor([2.0]))
    assert y.grad_fn is None and y.tolist() == [8.0]


def _returning(make_grad):
    class Returns(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return make_grad(grad)
    return Returns


def test_gradients_are_made_to_fit_their_input_as_pytorch_does():
    x = ember.randn(3, requires_grad=True)
    _returning(lambda g: g.double().expand(4, 3)).apply(x).sum().backward()
    assert x.grad.dtype == ember.float32                     # cast to the input's dtype
    assert ember.equal(x.grad, ember.full((3,), 4.0))        # summed down to its shape
    with pytest.raises(RuntimeError, match=r"Function ReturnsBackward returned an invalid "
                                           r"gradient at index 0 - got \[5\] but expected "
                                           r"shape compatible with \[3\]"):
        _returning(lambda g: ember.ones(5)).apply(x).sum().backward()


def test_once_differentiable_results_refuse_a_second_differentiation():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x ** 2

    x = ember.tensor([1.0, 2.0], requires_grad=True)
    w = ember.tensor([1.0, 1.0], requires_grad=True)
    (g,) = ember.autograd.grad(Cube.apply(x), x, grad_outputs=w * 2, create_graph=True)
    assert g.tolist() == [6.0, 24.0] and g.requires_grad
    with pytest.raises(RuntimeError, match="^trying to differentiate twice a function that was "
                                           "marked with @once_differentiable$"):
        g.sum().backward()


class _Identity(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 5


def test_an_input_returned_as_is_comes_back_as_a_new_tensor_viewing_it():
    x = ember.ones(3, requires_grad=True)
    y = _Identity.apply(x)
    assert y is not x and y._base is x and y._is_view() and y.grad_fn.name() == "_IdentityBackward"
    h = x * 1
    z = _Identity.apply(h)
    assert z._base is h
    with pytest.raises(RuntimeError, match="^Output 0 of _Identity is a view and is being "
                                           "modified inplace"):
        z.mul_(2)
    y.sum().backward()
    assert x.grad.tolist() == [5.0, 5.0, 5.0]
    plain = ember.zeros(2)
    alias = _Identity.apply(plain)
    plain.add_(1)                       # a view shares memory and version with its input
    assert alias.tolist() == [1.0, 1.0] and alias._version == plain._version == 1
