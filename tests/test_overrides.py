"""The __torch_function__ protocol for Tensor subclasses and tensor-like objects."""

import pytest

import ember
from ember.overrides import _disabled_torch_function_impl


class Tagged(ember.Tensor):
    """A subclass relying on Tensor's default __torch_function__."""


def test_subclass_results_keep_the_subclass():
    t = ember.ones(2).as_subclass(Tagged)
    assert type(t) is Tagged
    assert type(t + 1) is Tagged and type(ember.mul(t, 2)) is Tagged
    assert type(t.sum()) is Tagged and (t * 3).tolist() == [3.0, 3.0]


def test_disabled_torch_function_gives_plain_tensors():
    class Plain(ember.Tensor):
        __torch_function__ = _disabled_torch_function_impl

    p = ember.ones(2).as_subclass(Plain)
    assert type(p + 1) is ember.Tensor


def logged_subclass(calls):
    """A Tensor subclass whose ``__torch_function__`` appends each function's name to
    ``calls``, then runs it."""
    class Logged(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs)
    return Logged


def test_override_intercepts_calls():
    calls = []
    Logged = logged_subclass(calls)
    x = ember.ones(2).as_subclass(Logged)
    y = x * 2
    ember.add(x, 1)
    x.add_(1)
    assert calls == ["mul", "add", "add_"] and type(y) is Logged


def test_tensor_like_object():
    class Fake:
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return f"handled {func.__name__}"

    assert ember.add(ember.ones(1), Fake()) == "handled add"
    assert ember.ones(1).mul(Fake()) == "handled mul"


def test_subclass_keeps_autograd():
    x = ember.ones(2, requires_grad=True)
    t = x.as_subclass(Tagged)
    (t * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]



def test_subclass_calls_of_ops_with_parameters_between_their_tensors():
    """gather(input, dim, index), layer_norm's weight after its shape and index_put_'s values
    after its indices reach ``__torch_function__`` in a form ``func(*args, **kwargs)`` runs."""
    class Passing(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    x = ember.arange(6.0).reshape(2, 3).as_subclass(Passing)
    picked = x.gather(1, ember.tensor([[0], [2]]))
    assert type(picked) is Passing and picked.tolist() == [[0.0], [5.0]]
    normed = ember.nn.functional.layer_norm(x, (3,), ember.ones(3) * 2)
    assert normed[0].tolist() == pytest.approx([-2.44947, 0.0, 2.44947], abs=1e-4)
    x[0] = 7.0
    x.index_put_((ember.tensor([1]),), ember.tensor(9.0))
    assert x.tolist() == [[7.0, 7.0, 7.0], [9.0, 9.0, 9.0]]
