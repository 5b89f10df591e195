"""Views made in no_grad mode of tensors that require grad may not be written in place with
grad mode on (PyTorch forbids it: the write could not be recorded on the base's history)."""

import pytest

import ember

NO_GRAD_VIEW = "^A view was created in no_grad mode and is being modified inplace with grad mode"


def _nonleaf():
    leaf = ember.ones(2, requires_grad=True)
    return leaf, leaf * 2


@pytest.mark.parametrize("write", [
    lambda v: v.mul_(2),
    lambda v: v.add_(ember.ones(1, requires_grad=True)),
    lambda v: v.zero_(),
    lambda v: v.unsqueeze_(0),
])
def test_writing_a_no_grad_view_of_a_non_leaf_raises_and_keeps_the_history(write):
    leaf, nonleaf = _nonleaf()
    with ember.no_grad():
        view = nonleaf[:1]
    with pytest.raises(RuntimeError, match=NO_GRAD_VIEW):
        write(view)
    assert nonleaf.tolist() == [2.0, 2.0] and nonleaf.grad_fn.name() == "MulBackward0"
    nonleaf.sum().backward()
    assert leaf.grad.tolist() == [2.0, 2.0]


def test_writing_a_no_grad_view_of_a_leaf_names_the_no_grad_view():
    leaf = ember.ones(2, requires_grad=True)
    with ember.no_grad():
        view = leaf[:1]
    with pytest.raises(RuntimeError, match=NO_GRAD_VIEW):
        view.mul_(2)


def test_a_view_of_a_no_grad_view_names_its_own_op():
    _, nonleaf = _nonleaf()
    with ember.no_grad():
        view = nonleaf.view(2)
    with pytest.raises(RuntimeError, match="^Output 0 of Unsqueeze is a view of a view which was "
                                           "created in no_grad mode"):
        view.unsqueeze(0).mul_(2)


def test_writing_it_under_no_grad_is_allowed_and_untracked():
    leaf, nonleaf = _nonleaf()
    with ember.no_grad():
        view = nonleaf[:1]
        view.mul_(5)
    assert nonleaf.tolist() == [10.0, 2.0] and nonleaf.grad_fn.name() == "MulBackward0"
    nonleaf.sum().backward()
    assert leaf.grad.tolist() == [2.0, 2.0]


def test_views_of_tensors_without_grad_are_unaffected():
    plain = ember.ones(2)
    with ember.no_grad():
        view = plain[:1]
    view.mul_(3)
    assert plain.tolist() == [3.0, 1.0]
    with ember.no_grad():
        detached = _nonleaf()[1].detach()[:1]
    detached.mul_(3)
    assert detached.tolist() == [6.0]


def test_a_view_made_in_inference_mode_names_inference_mode():
    _, nonleaf = _nonleaf()
    with ember.inference_mode():
        view = nonleaf[:1]
    with pytest.raises(RuntimeError, match="^A view was created in inference mode and is being "
                                           "modified inplace in normal mode.*inference_mode block"):
        view.mul_(2)


def test_a_no_grad_view_requires_grad_as_a_leaf_whose_gradient_is_dropped():
    leaf = ember.ones(3, requires_grad=True)
    with ember.no_grad():
        view, piece = leaf.view(3), leaf[1:]
        ints = leaf.detach().view(ember.int32)
    assert view.requires_grad and view.is_leaf and view.grad_fn is None and view._base is leaf
    assert piece.requires_grad and not ints.requires_grad
    y = (view * 2).sum() + (piece * leaf[1:]).sum()
    assert y.requires_grad and y.grad_fn.name() == "AddBackward0"
    y.backward()                        # the views' shares are dropped, as in PyTorch
    assert leaf.grad.tolist() == [0.0, 1.0, 1.0] and view.grad is None
