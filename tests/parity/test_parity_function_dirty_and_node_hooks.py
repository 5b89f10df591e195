"""Custom Function rules against PyTorch: mark_dirty on a view (the base's history becomes
CopySlices), dirty inputs that are not returned, dirty views of leaves, non-tensors given to
save_for_backward; node hooks that put a gradient where there was none."""

import pytest

import ember
from tests.parity._compare import error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _double_in_place(lib):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, w=None):
            x.mul_(2 if w is None else w)
            ctx.mark_dirty(x)
            ctx.save_for_backward(w)
            return x

        @staticmethod
        def backward(ctx, g):
            w, = ctx.saved_tensors
            return (g * 2, None) if w is None else (g * w, g * 7)
    return Double


def _dirty_view_of_nonleaf(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    base = x * 1
    view = base[:2]
    out = _double_in_place(lib).apply(view)
    names = out.grad_fn.name(), base.grad_fn.name()
    (base * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
    return names, base.tolist(), x.grad.tolist()


def test_mark_dirty_on_view_rebases_its_base():
    assert _dirty_view_of_nonleaf(ember) == _dirty_view_of_nonleaf(torch)
    assert _dirty_view_of_nonleaf(ember)[2] == [2.0, 20.0, 100.0]


def _dirty_view_with_weight(lib):
    base = lib.ones(3)
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    _double_in_place(lib).apply(base[1:], w)
    grad_fn = base.grad_fn.name()
    base.sum().backward()
    return grad_fn, base.tolist(), w.grad.tolist()


def test_mark_dirty_on_view_of_base_without_grad():
    assert _dirty_view_with_weight(ember) == _dirty_view_with_weight(torch)


def _dirty_view_of_transposed(lib):
    x = lib.arange(6.0).reshape(2, 3).requires_grad_()
    base = (x * 1).t()
    _double_in_place(lib).apply(base[0])
    (base * lib.arange(6.0).reshape(3, 2)).sum().backward()
    return x.grad.tolist()


def test_mark_dirty_on_row_of_transposed_base():
    assert _dirty_view_of_transposed(ember) == _dirty_view_of_transposed(torch)


def test_mark_dirty_on_view_of_leaf_is_an_error():
    def call(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        return error(lambda: _double_in_place(lib).apply(x[:2]))
    assert call(ember) == call(torch)
    assert call(ember)[1].startswith("a view of a leaf Variable")


def test_mark_dirty_input_not_returned_is_an_error():
    def call(lib):
        class Dirty(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(x)
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g
        x = lib.tensor([1.0, 2.0], requires_grad=True) * 1
        return error(lambda: Dirty.apply(x))
    assert call(ember) == call(torch)
    assert call(ember)[1].startswith("Some elements marked as dirty")


def test_save_for_backward_of_non_tensor_names_its_position():
    def call(lib):
        class Save(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, None, 3)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g
        return error(lambda: Save.apply(lib.ones(3, requires_grad=True)))
    assert call(ember) == call(torch)
    assert call(ember) == ("TypeError", "save_for_backward can only save variables, but "
                                        "argument 2 is of type int")


def _post_hook_fills_none(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * lib.ones(3)
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0], grad_inputs[0]))
    return error(lambda: y.sum().backward())


def _pre_hook_fills_none(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    first = x.unbind(0)[0]
    first.grad_fn.register_prehook(lambda grads: tuple(lib.ones(()) for _ in grads))
    return error(lambda: first.backward())


@pytest.mark.parametrize("run", [_post_hook_fills_none, _pre_hook_fills_none])
def test_node_hook_cannot_replace_a_none_gradient(run):
    assert run(ember) == run(torch)
    assert run(ember) == ("RuntimeError", "can't replace a None gradient with a non-None value")


def test_backward_returning_a_non_tensor_is_an_error():
    def call(lib):
        class Three(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return 3
        x = lib.ones(3, requires_grad=True)
        return error(lambda: Three.apply(x).sum().backward())
    assert call(ember) == call(torch) == ("RuntimeError", "expected Variable or None (got int)")


def test_non_differentiable_input_returned_as_is():
    def call(lib):
        class Same(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_non_differentiable(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g
        x = lib.ones(3, requires_grad=True) * 1
        out = Same.apply(x)
        return out.requires_grad, out.grad_fn is None, out is x
    assert call(ember) == call(torch) == (False, True, False)


def test_custom_nodes_are_backward_c_functions():
    def call(lib):
        class Double(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        out = Double.apply(lib.ones(2, requires_grad=True))
        return isinstance(out.grad_fn, lib.autograd.function.BackwardCFunction)
    assert call(ember) is call(torch) is True


def test_batched_grad_of_an_unused_input_is_none():
    def call(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        unused = lib.ones(3, requires_grad=True)
        gx, gu = lib.autograd.grad(x * 2, [x, unused], lib.eye(3), is_grads_batched=True,
                                   allow_unused=True)
        return gx.tolist(), gu
    assert call(ember) == call(torch)
    assert call(ember) == ([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]], None)
