"""``autograd.Variable``, kept for code written before PyTorch 0.4."""

import pytest

import ember


def test_variable_makes_a_leaf_sharing_the_data():
    from ember.autograd import Variable
    t = ember.ones(2)
    v = Variable(t, requires_grad=True)
    assert v is not t and v.requires_grad and v.is_leaf and v.data_ptr() == t.data_ptr()
    assert isinstance(t, Variable) and not Variable(v * 2).requires_grad
    with pytest.warns(UserWarning, match="volatile was removed"):
        Variable(t, volatile=True)
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1, 2])
