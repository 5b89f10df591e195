"""``Tensor.requires_grad = flag`` on a non-leaf raises, as PyTorch's attribute setter does,
whatever the flag; ``requires_grad_(True)`` on one stays a no-op (round 32, GAIL's gradient
penalty on a computed mixup)."""

import pytest

import ember

_TRUE = r"^you can only change requires_grad flags of leaf variables\.$"
_FALSE = r"^you can only change requires_grad flags of leaf variables\. If you want"


def test_attribute_true_on_a_computed_tensor_raises():
    y = ember.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=_TRUE):
        y.requires_grad = True
    with pytest.raises(RuntimeError, match=_FALSE):
        y.requires_grad = False


def test_attribute_on_a_view_of_a_leaf_raises():
    v = ember.ones(3, requires_grad=True)[1:]
    with pytest.raises(RuntimeError, match=_TRUE):
        v.requires_grad = True
    with pytest.raises(RuntimeError, match=_FALSE):
        v.requires_grad = False
    with pytest.raises(RuntimeError, match=_FALSE):
        v.requires_grad_(False)


def test_method_true_on_a_non_leaf_is_a_no_op():
    y = ember.ones(2, requires_grad=True) * 2
    assert y.requires_grad_() is y and y.requires_grad and not y.is_leaf
    v = ember.ones(3, requires_grad=True)[1:]
    assert v.requires_grad_(True) is v and not v.is_leaf


def test_leaves_still_switch_both_ways():
    x = ember.ones(2)
    x.requires_grad = True
    assert x.requires_grad and x.is_leaf
    x.requires_grad = False
    assert not x.requires_grad
    d = (ember.ones(2, requires_grad=True) * 2).detach()
    d.requires_grad = True
    assert d.is_leaf and d.requires_grad
    with ember.no_grad():
        w = ember.ones(3, requires_grad=True)[1:]
    w.requires_grad = True
    assert w.is_leaf and w.requires_grad
