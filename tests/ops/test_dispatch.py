"""The dispatcher's own rules: operand kinds, numbers, None, and generated signatures."""

import inspect

import pytest

import ember


def test_none_is_rejected_where_a_tensor_is_required():
    with pytest.raises(TypeError, match=r"atan2\(\): argument 'other' \(position 2\) must be "
                                        r"Tensor, not NoneType"):
        ember.atan2(ember.ones(2), None)
    assert ember.clamp(ember.ones(2), None, 0.5).tolist() == [0.5, 0.5]


def test_unary_ops_reject_numbers():
    with pytest.raises(TypeError, match=r"exp\(\): argument 'input' \(position 1\) must be "
                                        r"Tensor, not float"):
        ember.exp(2.0)


def test_generated_functions_have_pytorch_signatures():
    assert str(inspect.signature(ember.add)) == "(input, other, *, alpha=1, out=None)"
    assert str(inspect.signature(ember.Tensor.add)) == "(self, other, *, alpha=1)"
    assert str(inspect.signature(ember.sum)) == \
        "(input, dim=None, keepdim=False, *, dtype=None, out=None)"
    assert ember.add.__doc__ and ember.Tensor.mul_.__doc__


def test_numpy_scalars_act_as_python_numbers():
    import numpy as np
    out = ember.ones(2) * np.float64(2.0)
    assert out.dtype is ember.float32 and out.tolist() == [2.0, 2.0]


def test_unknown_operand_types_fall_back_to_python():
    with pytest.raises(TypeError):
        ember.ones(2) + "a"
    assert (ember.ones(2) == None) is False     # noqa: E711  (Python's identity fallback)


def test_a_forward_may_raise_pytorchs_value_error():
    """OpValueError passes through the dispatcher; NumPy's ValueErrors become RuntimeErrors."""
    import ember.nn.functional as F
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target "
                                         r"batch_size \(2\)"):
        F.cross_entropy(ember.randn(3, 4), ember.tensor([0, 1]))


def test_nn_functional_backward_nodes_are_named_after_the_kernel():
    x = ember.randn(3, requires_grad=True)
    assert ember.nn.functional.gelu(x).grad_fn.name() == "GeluBackward0"
