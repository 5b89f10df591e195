"""What full backward (pre-)hooks may return: count, shape and dtype checks, node name."""

import pytest

import ember
from ember import nn


def _backward_through(register, returned):
    m = nn.Linear(2, 2)
    register(m, returned)
    m(ember.ones(2, requires_grad=True)).sum().backward()


def _pre(m, returned):
    m.register_full_backward_pre_hook(lambda mod, go: returned(go))


def _full(m, returned):
    m.register_full_backward_hook(lambda mod, gi, go: returned(gi))


@pytest.mark.parametrize("register", [_pre, _full])
def test_backward_hook_returning_a_wrong_shape_is_refused(register):
    with pytest.raises(RuntimeError, match=r"^hook 'hook' has changed the size of value$"):
        _backward_through(register, lambda g: (ember.zeros(3),))
    with pytest.raises(RuntimeError, match=r"^hook 'hook' has changed the size of value$"):
        _backward_through(register, lambda g: ember.zeros(1))


@pytest.mark.parametrize("register", [_pre, _full])
def test_backward_hook_returning_a_wrong_dtype_is_refused(register):
    with pytest.raises(RuntimeError, match=r"changed the type of value \(was ember.FloatTensor "
                                           r"got ember.DoubleTensor\)$"):
        _backward_through(register, lambda g: (ember.zeros(2, dtype=ember.float64),))


@pytest.mark.parametrize("register", [_pre, _full])
def test_backward_hook_returning_a_non_sequence_is_refused(register):
    with pytest.raises(TypeError, match=r"^object of type 'int' has no len\(\)$"):
        _backward_through(register, lambda g: 5)


def test_backward_hook_may_return_a_list():
    m = nn.Linear(2, 2)
    m.register_full_backward_pre_hook(lambda mod, go: [go[0] * 0])
    x = ember.ones(2, requires_grad=True)
    m(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_backward_hook_node_is_named_as_in_pytorch():
    m = nn.Linear(2, 2)
    m.register_full_backward_hook(lambda mod, gi, go: None)
    out = m(ember.ones(2, requires_grad=True))
    assert type(out.grad_fn).__name__ == "BackwardHookFunctionBackward"


def test_backward_hook_returning_a_generator_is_refused():
    layer = ember.nn.Linear(2, 2)
    layer.register_full_backward_hook(lambda m, gi, go: (g for g in gi))
    with pytest.raises(TypeError, match="object of type 'generator' has no len"):
        layer(ember.ones(1, 2, requires_grad=True)).sum().backward()
