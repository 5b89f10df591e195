"""utils.swap_tensors and ember.__future__'s conversion flags: Module.to() keeps, replaces or
swaps parameter objects as asked."""

import pytest

import ember
import ember.__future__ as future


def test_swap_tensors_exchanges_everything_but_identity():
    a, b = ember.ones(2), ember.zeros(3, requires_grad=True)
    a.note = "a"
    ember.utils.swap_tensors(a, b)
    assert a.tolist() == [0.0, 0.0, 0.0] and a.requires_grad
    assert b.tolist() == [1.0, 1.0] and not b.requires_grad and b.note == "a"
    p, q = ember.nn.Parameter(ember.ones(2)), ember.zeros(2)
    ember.utils.swap_tensors(p, q)
    assert type(p) is ember.Tensor and type(q) is ember.nn.Parameter
    with pytest.raises(TypeError, match="Expected t1 and t2 to be tensors"):
        ember.utils.swap_tensors(p, 3)


@pytest.fixture
def flags():
    yield
    future.set_swap_module_params_on_conversion(False)
    future.set_overwrite_module_params_on_conversion(False)


def test_conversions_keep_replace_or_swap_parameters(flags):
    m = ember.nn.Linear(2, 2)
    m.weight.grad = ember.ones(2, 2)
    w = m.weight
    m.double()
    assert m.weight is w and w.dtype == ember.float64 and w.grad.dtype == ember.float64
    future.set_overwrite_module_params_on_conversion(True)
    m.float()
    assert m.weight is not w and w.dtype == ember.float64
    assert m.weight.dtype == m.weight.grad.dtype == ember.float32
    assert isinstance(m.weight, ember.nn.Parameter) and m.weight.requires_grad
    future.set_overwrite_module_params_on_conversion(False)
    future.set_swap_module_params_on_conversion(True)
    w = m.weight
    m.double()
    assert m.weight is w and w.dtype == w.grad.dtype == ember.float64
    assert future.get_swap_module_params_on_conversion()
