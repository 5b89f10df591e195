"""A view made before its base had history sees the history the base gains later.

Writing in place through one view of a base (``base[0].add_(x)``) gives the base a
CopySlices node; every other view of that base, made earlier, must regenerate its grad_fn
from it on its next read (as an op input, ``.grad_fn``, ``.requires_grad``, ``is_leaf``,
backward from it), as PyTorch's views do; before, such a view was taken for a constant.
Expected values are worked by hand.
"""

import numpy as np
import pytest

import ember
from ember.func import grad, vmap


def _x():
    return ember.tensor([1.0, 2.0, 3.0], requires_grad=True)


def _written(x, rows=2, cols=3, row=0):
    """A zero base, a view of its row ``row`` taken first, then ``x`` added through a fresh
    view of that row."""
    base = ember.zeros(rows, cols)
    view = base[row]
    base[row].add_(x)
    return base, view


def test_view_as_op_input_carries_gradient_through_the_base():
    x = _x()
    _, b = _written(x)
    (x * b).sum().backward()            # d/dx sum(x * x) = 2x
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_view_metadata_regenerated():
    x = _x()
    _, b = _written(x)
    assert b.requires_grad
    assert not b.is_leaf
    assert b.grad_fn is not None and b.grad_fn.name() == "AsStridedBackward0"


def test_is_leaf_read_first():
    x = _x()
    _, b = _written(x)
    assert b.is_leaf is False
    (b * b).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_backward_from_the_view():
    x = _x()
    _, b = _written(x, row=1)
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0, 1.0])


def test_autograd_grad_through_the_view():
    x = _x()
    _, b = _written(x)
    (g,) = ember.autograd.grad((x * b * b).sum(), x)      # 3x^2
    np.testing.assert_array_equal(g.numpy(), [3.0, 12.0, 27.0])


def test_view_of_a_view():
    x = _x()
    base = ember.zeros(2, 3)
    b = base[0]
    c = b[1:]
    base[0].add_(x)
    assert c.requires_grad and not c.is_leaf
    (c * 10).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 10.0, 10.0])


def test_other_row_written_gives_zero_gradient_but_history():
    x = _x()
    _, b = _written(x, row=1)
    base = b._base
    view0 = base[0]
    assert view0.requires_grad
    (view0 + 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])


def test_detached_view_stays_cut():
    x = _x()
    base = ember.zeros(2, 3)
    d = base.detach()[0]
    base[0].add_(x)
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    (x * d).sum().backward()            # d is a constant holding x's values
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0, 3.0])


def test_write_under_no_grad_gives_no_history():
    x = _x()
    base = ember.zeros(2, 3)
    b = base[0]
    with ember.no_grad():
        base[0].add_(x)
    assert not b.requires_grad and b.is_leaf and b.grad_fn is None


def test_base_made_to_require_grad_later():
    base = ember.zeros(2, 3)
    b = base[0]
    base.requires_grad_()
    assert b.requires_grad and b.is_leaf and b.grad_fn is None      # as PyTorch
    x = _x()
    (x * b).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])
    assert base.grad is None
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        b.mul_(2)


def test_inplace_on_the_stale_view_is_refused_until_read():
    x = _x()
    _, b = _written(x)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        b.mul_(2)


def test_inplace_on_the_view_after_a_read():
    x = _x()
    _, b = _written(x)
    assert b.grad_fn is not None
    b.mul_(2)
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_custom_function_input():
    class Triple(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = _x()
    _, b = _written(x)
    Triple.apply(b).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])


def test_two_writes_accumulate():
    x = _x()
    base = ember.zeros(2, 3)
    b = base[0]
    base[0].add_(x)
    base[0].mul_(x)                     # b = x * x
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


def _writes_arg(x, arg):
    arg[:2].add_(x[:2])
    return (x * arg).sum()


def test_func_grad_through_an_argument_view():
    g = grad(_writes_arg)(ember.tensor([1.0, 2.0, 3.0]), ember.zeros(2, 3)[0])
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0, 0.0])


def test_vmap_of_grad_through_an_argument_view():
    xs = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    g = vmap(grad(_writes_arg))(xs, ember.zeros(2, 3))
    np.testing.assert_array_equal(g.numpy(), [[2.0, 4.0, 0.0], [8.0, 10.0, 0.0]])


def _inner(x):
    base = ember.zeros_like(x).unsqueeze(0).repeat(2, 1)
    b = base[0]
    base[0].add_(x)
    return (x * b).sum()


def test_func_grad_with_the_base_made_inside():
    np.testing.assert_array_equal(grad(_inner)(ember.arange(3.0)).numpy(), [0.0, 2.0, 4.0])
    got = vmap(grad(_inner))(ember.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(got.numpy(), [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]])


def test_plain_tensors_and_views_without_history_stay_untracked():
    a = ember.ones(2, 3)
    v = a[0]
    assert not v.requires_grad and v.is_leaf
    assert not (v + a[1]).requires_grad


def test_dtype_views_stay_undifferentiable():
    base = ember.zeros(2, 3)
    half = base.view(ember.float16)
    part = half[0]
    ints = base.view(ember.int32)
    row = base[1]
    base[1].add_(_x())
    for v in (half, part, ints):
        assert not v.requires_grad and v.grad_fn is None
        assert not (v * 1).requires_grad
    assert row.requires_grad and (row * 1).requires_grad


@pytest.mark.parametrize("split", [False, True], ids=["unbind", "split"])
def test_multi_output_view_of_a_base_written_later_is_refused(split):
    base = ember.zeros(2, 3)
    pieces = base.split(1) if split else base.unbind(0)
    base.mul_(_x())
    with pytest.raises(RuntimeError, match=r"^A view was created in no_grad mode and its base "
                       r"or another view of its base has been modified inplace with grad mode "
                       r"enabled. This view is the output of a function that returns multiple "
                       r"views."):
        pieces[0] * 1


def test_ops_recording_their_own_nodes():
    # vector @ matrix records its unsqueeze/mm/squeeze nodes itself, on a view of the view
    x = _x()
    _, b = _written(x)
    (b @ ember.ones(3, 2)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    x.grad = None
    _, b = _written(x)
    weight = ember.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    ember.nn.functional.linear(b, weight).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0, 2.0])


def test_a_view_taken_from_a_stale_view_gets_history():
    x = _x()
    base = ember.zeros(2, 3)
    b = base[0]
    base[0].add_(x)
    with ember.no_grad():
        inner = b[1:]               # (made in no_grad from a view that requires grad)
    later = b[:2]
    assert later.requires_grad and later.grad_fn.name() == "SliceBackward0"
    assert inner.requires_grad and inner.is_leaf
    (later * 5).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0, 0.0])


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_a_view_made_without_grad_mode_of_a_base_written_later_is_refused(mode):
    # as PyTorch: such a view's history is ambiguous once its base gains history in place
    x = _x()
    base = ember.zeros(2, 3)
    with getattr(ember, mode)():
        b = base[0]
    base[1].add_(x)
    assert b.requires_grad
    words = ("no_grad mode", "with grad mode enabled") if mode == "no_grad" else (
        "inference mode", "in normal mode")
    with pytest.raises(RuntimeError, match=rf"^A view was created in {words[0]} and its base or "
                       rf"another view of its base has been modified inplace {words[1]}\."):
        b * 1


def test_a_view_made_in_no_grad_mode_written_with_an_operand_needing_grad_is_refused():
    base = ember.zeros(2, 3)
    with ember.no_grad():
        b = base[0]
    b.add_(1.0)                     # nothing requires grad: an ordinary write
    np.testing.assert_array_equal(base.numpy(), [[1.0] * 3, [0.0] * 3])
    with pytest.raises(RuntimeError, match=r"^A view was created in no_grad mode and is being "
                       r"modified inplace with grad mode enabled\."):
        b.add_(_x())
    assert not base.requires_grad
