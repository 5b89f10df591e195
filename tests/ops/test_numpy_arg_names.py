"""NumPy's argument names PyTorch accepts: ``axis`` for ``dim``, ``keepdims`` for ``keepdim``."""

import inspect

import pytest

import ember


def _t():
    return ember.arange(6.).reshape(2, 3)


def test_reductions_take_axis_and_keepdims():
    t = _t()
    assert t.sum(axis=1).tolist() == [3.0, 12.0]
    assert ember.sum(t, axis=0).tolist() == [3.0, 5.0, 7.0]
    assert t.mean(axis=1, keepdims=True).tolist() == [[1.0], [4.0]]
    assert ember.var(t, axis=1, keepdims=True).tolist() == [[1.0], [1.0]]
    assert t.argmax(axis=1).tolist() == [2, 2]
    assert (t > 2).any(axis=1).tolist() == [False, True]
    assert t.cumsum(axis=1).tolist() == [[0.0, 1.0, 3.0], [3.0, 7.0, 12.0]]


def test_required_dim_given_as_axis():
    t = _t()
    out = ember.softmax(t, axis=1)
    assert [round(v, 4) for v in out[0].tolist()] == [0.09, 0.2447, 0.6652]
    index = ember.tensor([[0], [1]])
    assert t.gather(axis=1, index=index).tolist() == [[0.0], [4.0]]
    assert t.unsqueeze(axis=0).shape == (1, 2, 3)


def test_hand_written_functions_take_axis():
    t = _t()
    values, indices = ember.max(t, axis=1, keepdims=True)
    assert values.tolist() == [[2.0], [5.0]] and indices.tolist() == [[2], [2]]
    assert t.min(axis=0).values.tolist() == [0.0, 1.0, 2.0]
    assert ember.median(t, axis=1).values.tolist() == [1.0, 4.0]
    assert ember.cat([t, t], axis=1).shape == (2, 6)
    assert ember.stack([t, t], axis=2).shape == (2, 3, 2)


def test_both_names_or_a_missing_dim_raise():
    t = _t()
    with pytest.raises(TypeError, match="sum\\(\\) got an unexpected keyword argument 'axis'"):
        t.sum(0, axis=1)
    with pytest.raises(TypeError, match='^softmax\\(\\) missing 1 required positional arguments: '
                                        '"dim"$'):      # (PyTorch's words)
        ember.softmax(t)
    with pytest.raises(TypeError, match='missing 1 required positional arguments: "index"'):
        ember.gather(t, axis=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'axis'"):
        ember.nn.functional.softmax(t, axis=1)      # plain Python in PyTorch: no aliases


def test_aliases_stay_out_of_signatures():
    assert str(inspect.signature(ember.softmax)) == "(input, dim, dtype=None, *, out=None)"
    assert str(inspect.signature(ember.Tensor.sum)) == \
        "(self, dim=None, keepdim=False, *, dtype=None)"
    assert str(inspect.signature(ember.max)) == \
        "(input, dim=None, keepdim=False, *, other=None, out=None)"
    assert str(inspect.signature(ember.cat)) == "(tensors, dim=0, *, out=None)"
