"""Writing in place into a view of a custom Function's view output (a forward hook patching a
full-backward-hooked module's output does this) raises PyTorch's error, as writing into the
output itself does; a view among several differentiable outputs gets the multi-output one."""

import pytest

import ember

_CUSTOM = (r"^Output 0 of {} is a view and is being modified inplace\. This view was created "
           r"inside a custom Function \(or because an input was returned as-is\)")
_MULTI = (r"^Output 0 of {} is a view and is being modified inplace\. This view is the output of "
          r"a function that returns multiple views\.")


class _Id(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class _ViewAndProduct(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x[0], x * 2

    @staticmethod
    def backward(ctx, g0, g1):
        return g1 * 2


@pytest.mark.parametrize("leaf", [False, True])
def test_a_view_of_the_output_refuses_in_place_writes(leaf):
    w = ember.ones(2, 3, requires_grad=True)
    y = _Id.apply(w if leaf else w * 1)
    with pytest.raises(RuntimeError, match=_CUSTOM.format("Select")):
        y[:, 0] = 5.0
    with pytest.raises(RuntimeError, match=_CUSTOM.format("Slice")):
        y[0:1][..., 1:].mul_(2)
    with pytest.raises(RuntimeError, match=_CUSTOM.format("_Id")):
        y.add_(1)


def test_views_among_several_outputs_get_the_multi_output_error():
    a, _ = _ViewAndProduct.apply(ember.ones(2, 3, requires_grad=True) * 1)
    with pytest.raises(RuntimeError, match=_MULTI.format("_ViewAndProduct")):
        a.add_(1)
    with pytest.raises(RuntimeError, match=_MULTI.format("Slice")):
        a[1:].add_(1)


def test_a_clone_may_be_written():
    w = ember.ones(2, 3, requires_grad=True)
    y = _Id.apply(w * 1).clone()
    y[:, 0].mul_(3)
    y.sum().backward()
    assert w.grad.tolist() == [[3.0, 1.0, 1.0], [3.0, 1.0, 1.0]]
