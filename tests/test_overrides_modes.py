"""Torch function modes (ember.overrides.TorchFunctionMode) and torch.overrides' helpers."""

import inspect
import threading

import pytest

import ember
import ember.overrides as O
from ember.ops import _registry, operators
from ember.overrides import BaseTorchFunctionMode, TorchFunctionMode


class Log(TorchFunctionMode):
    """Records each call (func, args, kwargs), then runs it."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append((func, args, kwargs))
        return func(*args, **(kwargs or {}))

    @property
    def names(self):
        return [func.__name__ for func, _, _ in self.calls]


def test_training_step_shows_functions_and_backward_only():
    ember.manual_seed(0)
    lin = ember.nn.Linear(3, 2)
    x, target = ember.randn(4, 3), ember.randn(4, 2)
    ember.nn.functional.mse_loss(lin(x), target).backward()
    expected = lin.weight.grad.clone()
    lin.zero_grad()
    with Log() as log:
        loss = ember.nn.functional.mse_loss(lin(x), target)
        loss.backward()
    # as in PyTorch, the ops the gradient computation runs are not seen
    assert log.names == ["linear", "mse_loss", "backward"]
    assert log.calls[2][1] == (loss,)
    assert ember.allclose(lin.weight.grad, expected)


def test_autograd_grad_is_seen_once():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with Log() as log:
        (g,) = ember.autograd.grad((x * x).sum(), [x])
    assert log.names == ["mul", "sum", "grad"] and g.tolist() == [2.0, 4.0]


def test_what_func_a_mode_receives():
    x, y = ember.ones(2, 2), ember.full((2, 2), 2.0)
    with Log() as log:
        x.add(y)
        x + y
        ember.add(x, y, alpha=2)
        2 - x
        x == y
        x[0]
        ember.zeros(3)
        x.size()
    funcs = [func for func, _, _ in log.calls]
    assert funcs[:3] == [ember.Tensor.add, ember.Tensor.add, ember.add]   # the same objects
    assert log.names[3:] == ["__rsub__", "__eq__", "__getitem__", "zeros", "size"]
    assert funcs[3] is ember.Tensor.__rsub__ and funcs[4] is ember.Tensor.__eq__
    assert log.calls[2][1:] == ((x, y), {"alpha": 2})
    assert log.calls[3][1] == (x, 2)                  # the tensor first, as PyTorch passes it
    assert log.calls[6][1] == (3,)


def test_arguments_match_the_call():
    x = ember.ones(2, 3)
    with Log() as log:
        ember.sum(x, 1)
        x.view(3, 2)
        x.permute(1, 0)
        ember.clamp(x, min=0.5)
        x.add_(1)
        assert x[:1, :1].reshape(()).tolist() == 2.0
    assert [c[1][1:] for c in log.calls[:5]] == [(1,), (3, 2), (1, 0), (0.5,), (1,)]
    assert log.names == ["sum", "view", "permute", "clamp", "add_", "__getitem__", "reshape",
                         "tolist"]
    assert log.calls[4][0] is ember.Tensor.add_
    assert log.calls[6][1][1:] == ((),)


def test_identity_inside_the_mode():
    seen = []

    class Check(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            expected = {"ones": ember.ones, "add": ember.add, "sum": ember.Tensor.sum,
                        "backward": ember.Tensor.backward}[func.__name__]
            seen.append((func.__name__, func is expected))
            return func(*args, **(kwargs or {}))

    with Check():
        x = ember.ones(2, requires_grad=True)
        ember.add(x, 1).sum().backward()
    assert seen == [("ones", True), ("add", True), ("sum", True), ("backward", True)]
    assert x.grad.tolist() == [1.0, 1.0]


def test_properties_are_seen_as_get_and_set():
    x = ember.ones(2, 3, requires_grad=True)
    with Log() as log:
        assert x.T.shape == (3, 2)
        y = x.detach()
        y.requires_grad = True
        get_t = vars(ember.Tensor)["T"].__get__
    assert log.names == ["__get__", "__get__", "detach", "__set__"]
    (func, args, _), (get_shape, _, _) = log.calls[:2]
    assert args[0] is x and func == get_t
    assert log.calls[3][1] == (y, True) and y.requires_grad
    assert O.resolve_name(get_shape) == "ember.Tensor.shape.__get__"


def test_in_place_and_operators():
    i = ember.tensor([6, 3])
    with Log() as log:
        i += 1
        i &= 3
        i // 2
        ~i
    assert log.names == ["add_", "__iand__", "__floordiv__", "__invert__"]
    assert i.tolist() == [3, 0]


def test_mode_that_changes_results():
    class AddIsSub(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is ember.add or func is ember.Tensor.add:
                return ember.sub(*args, **(kwargs or {}))
            return func(*args, **(kwargs or {}))

    x = ember.tensor([5.0, 7.0])
    with AddIsSub():
        assert (x + 1).tolist() == [4.0, 6.0]
        assert ember.add(x, x).tolist() == [0.0, 0.0]
        assert ember.mul(x, 2).tolist() == [10.0, 14.0]
    assert (x + 1).tolist() == [6.0, 8.0]


def test_factories_can_be_redirected():
    class Float64(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func.__name__ in ("ones", "zeros"):
                kwargs.setdefault("dtype", ember.float64)
            return func(*args, **kwargs)

    with Float64():
        assert ember.ones(2).dtype is ember.float64
        assert ember.zeros(1).dtype is ember.float64
    assert ember.ones(2).dtype is ember.float32


def test_nesting_innermost_first_then_outward():
    outer, inner = Log(), Log()
    x = ember.ones(2)
    with outer:
        with inner:
            assert O._get_current_function_mode() is inner
            assert O._get_current_function_mode_stack() == [outer, inner]
            ember.mul(x, 3)
            ember.ones(1)
        ember.neg(x)
    assert inner.names == ["mul", "ones"]
    assert outer.names == ["mul", "ones", "neg"]       # inner's func(...) reached outer
    assert O._get_current_function_mode() is None


def test_the_mode_is_popped_while_it_runs():
    states = []

    class Inspect(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            states.append((O._is_torch_function_mode_enabled(),
                           len(O._get_current_function_mode_stack())))
            return func(*args, **(kwargs or {}))

    with Inspect():
        assert O._is_torch_function_mode_enabled()
        ember.ones(1)
    with Log():
        with Inspect():
            ember.ones(1)
    assert states == [(False, 0), (True, 1)]
    assert not O._is_torch_function_mode_enabled()


def test_same_mode_entered_twice():
    log = Log()
    with log:
        with log:
            ember.abs(ember.ones(1))
    assert log.names == ["ones", "ones", "abs", "abs"]


def _dispatch_is_plain():
    return (_registry.GENERATED["function"]["_call"] is _registry.call
            and _registry.GENERATED["method"]["_call"] is _registry.call
            and operators.call is _registry.call
            and ember.ones is ember._creation.ones
            and not hasattr(vars(ember.Tensor)["backward"], "_ember_mode_original"))


def test_no_mode_means_the_plain_dispatch():
    assert _dispatch_is_plain()
    with Log():
        assert not _dispatch_is_plain()
        assert ember.bilinear is ember.nn.functional.bilinear     # aliases stay aliases
        assert ember.ones.__name__ == "ones"
        assert inspect.signature(ember.ones) == inspect.signature(ember._creation.ones)
    assert _dispatch_is_plain()


def test_an_exception_in_the_mode_restores_everything():
    class Boom(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            raise ValueError("boom")

    outer = Log()
    with pytest.raises(ValueError, match="boom"):
        with outer:
            with Boom():
                ember.ones(2)
    assert O._get_current_function_mode_stack() == [] and outer.names == []
    assert _dispatch_is_plain()
    assert (ember.ones(2) + 1).tolist() == [2.0, 2.0]


def test_not_implemented_raises():
    class Refuse(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return NotImplemented

    with pytest.raises(TypeError, match=r"Multiple dispatch failed for 'ember.add'; all "
                                        r"__torch_function__ handlers returned NotImplemented"):
        x = ember.ones(1)
        with Refuse():
            ember.add(x, x)
    assert O._get_current_function_mode() is None


def test_base_and_abstract_modes():
    with BaseTorchFunctionMode():
        assert ember.add(ember.ones(1), 1).tolist() == [2.0]
    with pytest.raises(NotImplementedError):
        with TorchFunctionMode():
            ember.ones(1)
    with pytest.raises(RuntimeError, match="trying to pop from empty mode stack"):
        O._pop_mode()
    with pytest.warns(UserWarning, match="no longer necessary"):
        assert isinstance(Log.push(), Log)


def test_push_and_pop_mode():
    log = Log()
    O._push_mode(log)
    try:
        ember.exp(ember.zeros(1))
    finally:
        assert O._pop_mode() is log
    assert log.names == ["zeros", "exp"] and _dispatch_is_plain()


def test_modes_are_thread_local():
    log = Log()
    entered, done = threading.Event(), threading.Event()
    results, other_logs = [], []

    def worker():
        entered.wait()
        with Log() as own:
            results.append(ember.mul(ember.full((2,), 3.0), 2).tolist())
        other_logs.append(own.names)
        results.append((ember.ones(1) + 1).tolist())      # no mode on this thread
        done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    with log:
        entered.set()
        done.wait(30)
        ember.neg(ember.ones(1))
    thread.join()
    assert results == [[6.0, 6.0], [2.0]]
    assert other_logs == [["full", "mul", "tolist"]]
    assert log.names == ["ones", "neg"]
    assert _dispatch_is_plain()


class Tagged(ember.Tensor):
    """A subclass with Tensor's default __torch_function__."""


def test_mode_before_subclass():
    t = ember.ones(2).as_subclass(Tagged)
    with Log() as log:
        r = ember.mul(t, 2)
    assert type(r) is Tagged and r.tolist() == [2.0, 2.0]
    assert log.names == ["mul"] and log.calls[0][1][0] is t


def test_types_name_the_overriding_classes():
    seen = []

    class Types(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(types)
            return func(*args, **(kwargs or {}))

    with Types():
        ember.add(ember.ones(1), ember.ones(1).as_subclass(Tagged))
    assert seen == [(), (), (Tagged,)]


# --- the helper functions ---------------------------------------------------------------------

def test_ignored_and_overridable_functions():
    ignored = O.get_ignored_functions()
    assert {ember.ones, ember.manual_seed, ember.is_tensor, ember.Tensor.stride} <= ignored
    assert ember.add not in ignored and ember.cat not in ignored
    table = O.get_overridable_functions()
    assert ember.add in table[ember] and ember.cat in table[ember]
    assert ember.ones not in table[ember]
    assert ember.nn.functional.mse_loss in table[ember.nn.functional]
    assert ember.linalg.norm in table[ember.linalg]
    assert {ember.Tensor.add, ember.Tensor.__add__, ember.Tensor.backward} <= set(
        table[ember.Tensor])
    grad = vars(ember.Tensor)["grad"]
    assert table[grad] == [grad.__get__]


def test_testing_overrides_have_the_signatures():
    overrides = O.get_testing_overrides()
    dummy = overrides[ember.add]
    assert dummy(ember.ones(1), 2) == -1
    assert inspect.signature(dummy) == inspect.signature(ember.add)
    assert str(inspect.signature(overrides[ember.Tensor.sum])) == str(
        inspect.signature(ember.Tensor.sum))
    with pytest.raises(TypeError):
        dummy()


def test_resolve_name_and_method_checks():
    assert O.resolve_name(ember.add) == "ember.add"
    assert O.resolve_name(ember.Tensor.add) == "ember.Tensor.add"
    assert O.resolve_name(ember.nn.functional.relu) == "ember.nn.functional.relu"
    assert O.resolve_name(ember.Tensor.grad.__get__) == "ember.Tensor.grad.__get__"
    assert O.resolve_name(lambda: 0) is None
    assert O.is_tensor_method_or_property(ember.Tensor.add)
    assert O.is_tensor_method_or_property(ember.Tensor.shape.__get__)
    assert not O.is_tensor_method_or_property(ember.add)
    with Log():     # a stand-in resolves like its function
        assert O.resolve_name(ember.ones) is None and O.resolve_name(ember.cat) == "ember.cat"
        assert O.is_tensor_method_or_property(ember.Tensor.size)


def test_is_tensor_like_and_has_torch_function():
    class Like:
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return "like"

    x = ember.ones(1)
    assert O.is_tensor_like(x) and O.is_tensor_like(Like()) and O.is_tensor_like(Like)
    assert not O.is_tensor_like(1) and not O.is_tensor_like([x])
    assert not O.has_torch_function_unary(x) and O.has_torch_function_unary(Like())
    assert O.has_torch_function_variadic(x, Like()) and not O.has_torch_function_variadic(x, 1)
    with BaseTorchFunctionMode():
        assert O.has_torch_function_unary(x) and O.has_torch_function((1,))


def test_wrap_torch_function_and_handle_torch_function():
    @O.wrap_torch_function(lambda a, b=None: (a,))
    def double(a, b=None):
        """Twice a."""
        return a * 2

    class Like:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return (func.__name__, types, args)

    like = Like()
    assert double(3) == 6 and double.__doc__ == "Twice a."
    assert double(like, 1) == ("double", (Like,), (like, 1))
    with Log() as log:
        assert double(4) == 8
    assert log.names == ["double"]
    assert O.handle_torch_function(double, (1,), 5) == 10
    with pytest.raises(TypeError, match="no implementation found for"):
        class No:
            def __torch_function__(self, *a, **k):
                return NotImplemented
        O.handle_torch_function(double, (No(),), 1)
    with O.enable_reentrant_dispatch():
        assert double(1) == 2
