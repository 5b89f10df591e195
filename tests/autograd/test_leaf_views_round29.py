"""In-place writes through a view of a leaf: a tensor made a leaf by requires_grad_() while
being a view of a tensor that needs no grad is still a view, so writing into it (or into a view
of it, e.g. view_as_complex of a real weight) raises PyTorch's "a view of a leaf" error, instead
of silently recording an AsStrided write into the leaf."""

import pytest

import ember

VIEW_OF_LEAF = ("a view of a leaf Variable that requires grad is being used in an in-place "
                "operation.")


@pytest.mark.parametrize("write", [
    lambda w: ember.view_as_complex(w).mul_(2),
    lambda w: w[0].mul_(2),
    lambda w: w.mul_(2),
    lambda w: w.t()[1:].clamp_(min=0),
])
def test_writes_into_a_leaf_made_from_a_view_raise(write):
    weight = ember.zeros(8).view(4, 2).requires_grad_()
    assert weight.is_leaf and weight._is_view()
    with pytest.raises(RuntimeError, match="^" + VIEW_OF_LEAF.replace(".", r"\.") + "$"):
        write(weight)
    assert (weight == 0).all()


def test_views_of_plain_tensors_and_rebased_bases_still_take_writes():
    base = ember.zeros(3)
    view = base[:2]
    w = ember.ones(2, requires_grad=True)
    view.mul_(w).add_(1)                # the base now has a grad_fn: no longer a leaf
    assert type(base.grad_fn).__name__ == "CopySlices"
    base[:1].sum().backward()
    assert w.grad.tolist() == [0.0, 0.0]
    ember.ones(3, requires_grad=True).detach()[:2].mul_(2)
    with ember.no_grad():
        ember.zeros(8).view(4, 2).requires_grad_()[0].mul_(2)
