"""Only ember's own errors get the failing module's line (NOTE [Module error context]); an
exception the user's code raises inside a forward passes through as it was, as in PyTorch."""

import statistics

import numpy as np
import pytest

import ember
import ember.nn as nn

CONTEXT = "\n  in model"


class Calls(nn.Module):
    """A user module whose forward runs ``fn(x)``."""

    def __init__(self, fn, child=None):
        super().__init__()
        self.fn = fn
        if child is not None:
            self.child = child

    def forward(self, x):
        return self.fn(self, x)


def _stop(module, x):
    raise ValueError("stop")


def _raised(call):
    with pytest.raises(Exception) as info:
        call()
    return info.value


def _untouched(error, kind, message):
    assert type(error) is kind
    assert str(error) == message and error.args == (message,)
    assert not hasattr(error, "_ember_where")


def test_users_raise_in_forward_passes_through():
    err = _raised(lambda: Calls(_stop)(ember.ones(2)))
    _untouched(err, ValueError, "stop")


def test_users_raise_passes_through_nested_modules_the_same_object():
    seen = []

    def stop(module, x):
        seen.append(RuntimeError("boom"))
        raise seen[0]

    model = nn.Sequential(nn.Linear(2, 2), Calls(lambda m, x: m.child(x), Calls(stop)))
    err = _raised(lambda: model(ember.ones(1, 2)))
    assert err is seen[0]
    _untouched(err, RuntimeError, "boom")


@pytest.mark.parametrize("kind", [TypeError, IndexError, RuntimeError])
def test_each_annotated_type_from_the_user_passes_through(kind):
    def raise_it(module, x):
        raise kind(f"mine {x.shape[0]}")
    _untouched(_raised(lambda: Calls(raise_it)(ember.ones(3))), kind, "mine 3")


def test_hooks_raise_passes_through():
    def pre(module, args):
        raise ValueError("pre-hook says no")

    def post(module, args, out):
        raise RuntimeError("post-hook says no")

    lin = nn.Linear(2, 2)
    handle = lin.register_forward_pre_hook(pre)
    _untouched(_raised(lambda: lin(ember.ones(1, 2))), ValueError, "pre-hook says no")
    handle.remove()
    lin.register_forward_hook(post)
    outer = nn.Sequential(lin)
    _untouched(_raised(lambda: outer(ember.ones(1, 2))), RuntimeError, "post-hook says no")


def test_ember_error_in_a_hook_is_annotated():
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda m, args, out: out + ember.ones(5))
    err = _raised(lambda: nn.Sequential(lin)(ember.ones(1, 2)))
    assert type(err) is RuntimeError
    assert str(err) == ("The size of tensor a (2) must match the size of tensor b (5) at "
                        "non-singleton dimension 1\n  in model.0 (Linear(in_features=2, "
                        "out_features=2, bias=True)) with input of shape [1, 2] and dtype "
                        "ember.float32")


def test_user_autograd_function():
    # The user's raise passes through; ember's shape error from an op the Function's
    # forward calls is ember's check failing, so it names the module that applied it.
    class Mine(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, other):
            if other is None:
                raise ValueError("Mine needs other")
            return x @ other

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    model = nn.Sequential(Calls(lambda m, x: Mine.apply(x, None)))
    _untouched(_raised(lambda: model(ember.ones(2, 3))), ValueError, "Mine needs other")
    model = nn.Sequential(Calls(lambda m, x: Mine.apply(x, ember.ones(4, 2))))
    err = _raised(lambda: model(ember.ones(2, 3)))
    assert type(err) is RuntimeError
    assert str(err) == ("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x2)\n  in model.0 "
                        "(Calls()) with input of shape [2, 3] and dtype ember.float32")


def test_users_loss_and_ember_loss():
    def my_loss(module, x):
        if x.shape[0] != 4:
            raise ValueError(f"batch of {x.shape[0]}, want 4")
        return x.sum()

    _untouched(_raised(lambda: Calls(my_loss)(ember.ones(3))), ValueError, "batch of 3, want 4")
    target = ember.zeros(2, dtype=ember.int64)
    model = Calls(lambda m, x: m.child(x, target), nn.CrossEntropyLoss())
    err = _raised(lambda: model(ember.ones(3, 5)))
    assert isinstance(err, ValueError)
    assert str(err) == ("Expected input batch_size (3) to match target batch_size (2).\n  in "
                        "model.child (CrossEntropyLoss()) with inputs of shape [3, 5], [2] and "
                        "dtype ember.float32, ember.int64")


def test_errors_from_libraries_the_user_calls_stay_the_users():
    # NumPy's and the standard library's frames count as their caller's: here the user's
    def numpy_reshape(module, x):
        return np.reshape(np.arange(6), (4, 2))

    def mean_of_nothing(module, x):
        return statistics.mean([])

    err = _raised(lambda: Calls(numpy_reshape)(ember.ones(2)))
    assert type(err) is ValueError and CONTEXT not in str(err)
    err = _raised(lambda: Calls(mean_of_nothing)(ember.ones(2)))
    assert type(err) is statistics.StatisticsError and CONTEXT not in str(err)


def test_users_function_called_back_by_ember_passes_through():
    def per_row(row):
        raise ValueError("no rows today")

    model = Calls(lambda m, x: ember.func.vmap(per_row)(x))
    _untouched(_raised(lambda: model(ember.ones(3, 2))), ValueError, "no rows today")


def test_nested_modules_name_the_innermost_once():
    inner = nn.Linear(4, 3)
    model = Calls(lambda m, x: m.child(x),
                  Calls(lambda m, x: m.child(x), nn.Sequential(nn.ReLU(), inner)))
    err = _raised(lambda: model(ember.ones(5, 6)))
    assert type(err) is RuntimeError
    assert str(err) == ("mat1 and mat2 shapes cannot be multiplied (5x6 and 4x3)\n  in "
                        "model.child.child.1 (Linear(in_features=4, out_features=3, bias=True)) "
                        "with input of shape [5, 6] and dtype ember.float32")
    # ember's error raised in a user module's own forward names that module
    model = Calls(lambda m, x: m.child(x), Calls(lambda m, x: x.view(7)))
    err = _raised(lambda: model(ember.ones(2, 3)))
    assert str(err) == ("shape '[7]' is invalid for input of size 6\n  in model.child (Calls()) "
                        "with input of shape [2, 3] and dtype ember.float32")


def test_users_wrapping_of_an_ember_error_passes_through():
    def wrap(module, x):
        try:
            return module.child(x)
        except RuntimeError as e:
            raise ValueError("could not run the head") from e

    model = Calls(wrap, nn.Linear(4, 3))
    err = _raised(lambda: model(ember.ones(2, 5)))
    _untouched(err, ValueError, "could not run the head")
    # the cause was annotated as it left the Linear: relative to it, the wrapper never saw it
    assert str(err.__cause__).endswith("\n  in model (Linear(in_features=4, out_features=3, "
                                       "bias=True)) with input of shape [2, 5] and dtype "
                                       "ember.float32")


def test_reraise_across_two_models():
    a = nn.Sequential(nn.Linear(4, 3))
    caught = []

    def call_a(module, x):              # ``a`` is not part of this model
        try:
            return a(x)
        except RuntimeError as e:
            caught.append(e)
            raise

    err = _raised(lambda: Calls(call_a)(ember.ones(2, 5)))
    assert err is caught[0]
    assert str(err) == ("mat1 and mat2 shapes cannot be multiplied (2x5 and 4x3)\n  in model.0 "
                        "(Linear(in_features=4, out_features=3, bias=True)) with input of shape "
                        "[2, 5] and dtype ember.float32")   # relative to ``a``, once

    b = Calls(lambda m, x: (_ for _ in ()).throw(caught[0]))   # raised again later elsewhere
    err = _raised(lambda: nn.Sequential(b)(ember.ones(1)))
    assert err is caught[0] and str(err).count("\n  in ") == 1
    assert "\n  in model.0 (Linear(in_features=4" in str(err)

    owner = Calls(lambda m, x: m.child(x), a)   # ``a`` inside: the path re-roots once
    err = _raised(lambda: owner(ember.ones(2, 5)))
    assert str(err).endswith("\n  in model.child.0 (Linear(in_features=4, out_features=3, "
                             "bias=True)) with input of shape [2, 5] and dtype ember.float32")


def test_code_ember_generates_counts_as_embers():
    # the ops' entry points are compiled as "<ember op NAME>" into globals with no __name__
    def generated(filename):
        namespace = {}
        exec(compile("def entry(x):\n    raise ValueError('bad x')\n", filename, "exec"),
             namespace)
        return namespace["entry"]

    err = _raised(lambda: Calls(lambda m, x: generated("<ember op fake>")(x))(ember.ones(1)))
    assert str(err) == ("bad x\n  in model (Calls()) with input of shape [1] and dtype "
                        "ember.float32")
    err = _raised(lambda: Calls(lambda m, x: generated("<string>")(x))(ember.ones(1)))
    _untouched(err, ValueError, "bad x")
