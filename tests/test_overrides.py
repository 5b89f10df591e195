"""The __torch_function__ protocol for Tensor subclasses and tensor-like objects."""

import warnings

import pytest

import ember
import ember.nn.functional as F
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


def offered_to(expression):
    """The functions a subclass's ``__torch_function__`` is offered while ``expression`` runs
    on ``s`` (a subclass tensor) and ``p`` (a plain one), and the result."""
    seen = []

    class Seen(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs)

    s = ember.arange(6.0).reshape(2, 3).as_subclass(Seen)
    p = ember.ones(2, 3)
    result = eval(expression, {"ember": ember, "s": s, "p": p})
    return seen, result, Seen


@pytest.mark.parametrize("expression, public", [
    ("s.add(p)", ember.Tensor.add), ("p.add(s)", ember.Tensor.add),
    ("ember.add(s, p)", ember.add), ("s + p", ember.Tensor.add), ("p + s", ember.Tensor.add),
    ("2 - s", ember.Tensor.__rsub__), ("s // 2", ember.Tensor.__floordiv__),
    ("s[0]", ember.Tensor.__getitem__), ("s.size()", ember.Tensor.size),
    ("s.view(3, 2)", ember.Tensor.view), ("s.to(ember.float64)", ember.Tensor.to),
    ("s.add_(1)", ember.Tensor.add_), ("s.tolist()", ember.Tensor.tolist),
    ("len(s)", ember.Tensor.__len__), ("repr(s)", ember.Tensor.__repr__),
])
def test_subclass_is_offered_the_public_entry_point(expression, public):
    seen, _, _ = offered_to(expression)
    assert seen == [public]


def test_subclass_is_offered_property_access_as_the_property_getter():
    seen, shape, _ = offered_to("s.shape")
    assert seen == [ember.Tensor.shape.__get__] and seen[0].__name__ == "__get__"
    assert type(shape) is ember.Size and shape == (2, 3)


def test_subclass_dispatch_keeps_result_types_as_pytorch_does():
    _, size, _ = offered_to("s.size()")
    assert type(size) is ember.Size
    _, result, cls = offered_to("s.max(0)")
    assert type(result).__name__ == "max" and type(result.values) is cls
    assert result.values.tolist() == [3.0, 4.0, 5.0]
    _, data, cls = offered_to("s.data")
    assert type(data) is cls and data.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    _, detached, cls = offered_to("s.detach()")
    assert type(detached) is cls


def test_subclass_grad_is_handed_back_as_stored():
    class Sub(ember.Tensor):
        pass
    s = ember.ones(2).as_subclass(Sub).requires_grad_()
    (s * 3).sum().backward()
    assert type(s.grad) is ember.Tensor and s.grad.tolist() == [3.0, 3.0]


def test_in_place_op_with_a_subclass_operand_leaves_the_plain_tensor_plain():
    class Sub(ember.Tensor):
        pass
    p = ember.ones(2)
    out = p.add_(ember.ones(2).as_subclass(Sub))
    assert type(p) is ember.Tensor and type(out) is Sub
    assert p.tolist() == [2.0, 2.0] and out.tolist() == [2.0, 2.0]


def test_metadata_subclass_can_tell_indexing_apart():
    """A MONAI-style tensor carrying metadata, which treats indexing specially."""
    class MetaTensor(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            out = super().__torch_function__(func, types, args, kwargs)
            if isinstance(out, MetaTensor):
                out.meta = dict(args[0].meta, indexed=func is ember.Tensor.__getitem__)
            return out

    m = ember.zeros(2, 2).as_subclass(MetaTensor)
    m.meta = {"spacing": 1.5}
    assert (m + 1).meta == {"spacing": 1.5, "indexed": False}
    assert m[0].meta == {"spacing": 1.5, "indexed": True}
    assert m.T.meta == {"spacing": 1.5, "indexed": False}


def test_a_subclass_own_methods_are_left_alone():
    class Sized(ember.Tensor):
        def size(self, dim=None):
            return "mine"

    assert ember.ones(2).as_subclass(Sized).size() == "mine"
    assert "size" in vars(Sized) and vars(Sized)["size"].__qualname__.endswith("Sized.size")


@pytest.mark.parametrize("factory, args", [
    (ember.zeros_like, ()), (ember.ones_like, ()), (ember.empty_like, ()),
    (ember.full_like, (3.0,)), (ember.rand_like, ()), (ember.randn_like, ()),
    (ember.randint_like, (5,)),
])
def test_like_factories_are_offered_to_overrides(factory, args):
    seen, _, cls = offered_to("s")
    s = ember.ones(2, 3).as_subclass(cls)
    seen.clear()
    out = factory(s, *args)
    assert seen == [factory] and type(out) is cls and out.shape == (2, 3)

    class Like:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return f"handled {func.__name__}"
    assert factory(Like(), *args) == f"handled {factory.__name__}"
    assert type(factory(ember.ones(2), *args)) is ember.Tensor


def seen_subclass(seen):
    """A Tensor subclass recording each function its ``__torch_function__`` is offered."""
    class Seen(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs)
    return Seen


def test_no_handler_taking_the_call_is_worded_as_pytorch():
    class A(ember.Tensor):
        pass

    class C(ember.Tensor):
        pass

    a, c = ember.ones(1).as_subclass(A), ember.ones(1).as_subclass(C)
    native = (r"Multiple dispatch failed for '{}'; all __torch_function__ handlers returned "
              r"NotImplemented:\n\n  - tensor subclass <class '.*A'>\n  - tensor subclass "
              r"<class '.*C'>\n\nFor more information, try re-running with "
              r"TORCH_LOGS=not_implemented")
    for name, call in [("ember.Tensor.add", lambda: a.add(c)),
                       ("ember.Tensor.__getitem__", lambda: a[c.long()])]:
        with pytest.raises(TypeError, match=native.format(name)):
            call()

    class Refuses(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return NotImplemented
    with pytest.raises(TypeError, match=r"'ember.Tensor.shape.__get__'"):
        ember.ones(1).as_subclass(Refuses).shape


def test_has_torch_function_of_no_arguments_under_a_mode():
    from ember.overrides import BaseTorchFunctionMode, has_torch_function
    with BaseTorchFunctionMode():
        assert has_torch_function((ember.ones(1),)) and not has_torch_function(())


def test_parameter_of_a_subclass_keeps_the_subclass():
    class Meta(ember.Tensor):
        pass

    class MyParam(ember.nn.Parameter):
        pass

    p = ember.nn.Parameter(ember.ones(2, 2).as_subclass(Meta))
    assert type(p) is Meta and isinstance(p, ember.nn.Parameter) and p.requires_grad
    assert not isinstance(p, MyParam) and type(p * 2) is Meta and p.is_leaf
    assert repr(p) == "Parameter(Meta([[1., 1.],\n      [1., 1.]], requires_grad=True))"
    assert repr(MyParam(ember.ones(2))) == ("Parameter containing:\n"
                                            "Parameter(MyParam([1., 1.], requires_grad=True))")
    m = ember.nn.Module()
    m.w = p
    assert [name for name, _ in m.named_parameters()] == ["w"]
    assert not isinstance(ember.ones(1), ember.nn.Parameter)


def test_disable_torch_function_turns_off_subclasses_and_modes():
    from ember.overrides import BaseTorchFunctionMode, has_torch_function

    class Logged(BaseTorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    s = ember.ones(1).as_subclass(Tagged)
    with Logged() as mode:
        with ember.DisableTorchFunction():
            r = s + 1
            assert type(r) is ember.Tensor and not has_torch_function((s,))
        assert type(s + 1) is Tagged
    assert mode.names == ["add"]


def test_torch_c_names_of_the_protocol():
    class Plain(ember.Tensor):
        __torch_function__ = ember._C._disabled_torch_function_impl

    p = ember.ones(2).as_subclass(Plain)
    assert type(p + 1) is ember.Tensor
    with ember._C.DisableTorchFunctionSubclass():
        assert type(ember.ones(1).as_subclass(Tagged) * 2) is ember.Tensor
    assert not ember._C._is_torch_function_mode_enabled()


def _logging_subclass(seen):
    class Logged(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append((func, args, kwargs))
            return super().__torch_function__(func, types, args, kwargs)
    return Logged


def test_hand_written_functions_are_offered_as_themselves_with_the_call_arguments():
    seen = []
    s = ember.ones(2, 3).as_subclass(_logging_subclass(seen))
    p = ember.zeros(2, 3)
    out = ember.cat([p, s], dim=1)
    assert len(seen) == 1 and seen[0][0] is ember.cat and seen[0][0].__name__ == "cat"
    assert seen[0][1][0][1] is s and seen[0][2] == {"dim": 1}
    assert out.shape == (2, 6) and out.sum().item() == 6.0
    seen.clear()
    F.dropout(s, 0.5, training=False)
    assert [(f, len(a), k) for f, a, k in seen] == [(F.dropout, 2, {"training": False})]


def test_hand_written_functions_refused_by_every_handler_raise_pytorchs_errors():
    class Refusing(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return NotImplemented
    r = ember.ones(2).as_subclass(Refusing)
    with pytest.raises(TypeError, match="Multiple dispatch failed for 'ember.cat'"):
        ember.cat([r, r])
    with pytest.raises(TypeError, match="no implementation found for "
                                        "'ember.nn.functional.dropout'"):
        F.dropout(r)


@pytest.mark.parametrize("call", [
    lambda: ember.meshgrid(ember.ones(2), ember.ones(2)),
    lambda: F.dropout2d(ember.ones(2, 3, 4)),
    lambda: F.softmax(ember.ones(2, 3)),
    lambda: ember.chain_matmul(ember.ones(2, 2), ember.ones(2, 2)),
    lambda: F.gumbel_softmax(ember.ones(2, 3), eps=1e-3),
    lambda: F.affine_grid(ember.ones(1, 2, 3), (1, 1, 1, 1), align_corners=True),
    lambda: ember.frobenius_norm(ember.ones(2, 3), (0, 1)),
    lambda: ember.nuclear_norm(ember.ones(2, 2)),
    lambda: ember.cov(ember.ones(2, 1)),
    lambda: ember.corrcoef(ember.ones(2, 1)),
    lambda: ember.t_copy(ember.ones(2, 3), out=ember.ones(1)),
    lambda: ember.view_copy(ember.ones(2, 3), (3, 2), out=ember.ones(1)),
])
def test_warnings_of_offered_hand_written_functions_point_at_the_callers_line(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, call.__code__.co_firstlineno)]


def test_plain_operators_refuse_what_they_cannot_take_as_python_expects():
    a = ember.ones(2, 2)
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for @: 'Tensor' and 'int'"):
        a @ 2
    assert a.__add__(None) is NotImplemented and ember.Tensor.__rdiv__ is ember.Tensor.__rtruediv__


def test_every_guarded_function_is_offered_as_itself():
    from ember.overrides._catalog import namespace_object
    from ember.overrides._guards import GUARDED
    seen = []

    class Intercepting(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return "intercepted"

    s = ember.ones(2, 3).as_subclass(Intercepting)
    missed = []
    for namespace, names in GUARDED.items():
        for name in names.split():
            func = getattr(namespace_object(namespace), name)
            seen.clear()
            if func(s) != "intercepted" or seen != [func]:
                missed.append(f"{namespace}.{name}")
    assert not missed
    assert ember.cov is not ember.Tensor.cov and ember.rrelu is not F.rrelu
    assert ember.bilinear is F.bilinear


def test_a_mode_sees_a_reflected_operator_between_tensors_by_its_dunder():
    from ember.overrides import TorchFunctionMode
    seen = []

    class Logged(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append((func, args))
            return func(*args, **(kwargs or {}))

    t, u = ember.tensor([1.0, 2.0]), ember.tensor([4.0, 6.0])
    with Logged():
        out = t.__rsub__(u)
        quotient = t.__rtruediv__(u)
        total = t.__radd__(u)
    assert out.tolist() == [3.0, 4.0] and quotient.tolist() == [4.0, 3.0]
    assert total.tolist() == [5.0, 8.0]
    assert [f for f, _ in seen] == [ember.Tensor.__rsub__, ember.Tensor.__rtruediv__,
                                    ember.Tensor.add]
    assert all(a[0] is t and a[1] is u for _, a in seen)


def test_parameters_take_the_guards_plain_path(monkeypatch):
    from ember.overrides import _guards
    seen = []

    class Traced(ember.nn.Parameter):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return "traced"

    def refuse(*args):
        raise AssertionError("a plain call was offered to __torch_function__")

    x, w = ember.ones(2, 3), ember.nn.Parameter(ember.full((3,), 2.0))
    with monkeypatch.context() as m:
        m.setattr(_guards, "_offer", refuse)
        out = F.layer_norm(x, (3,), weight=w)
        assert out.tolist() == [[0.0, 0.0, 0.0]] * 2 and ember.cat([w, w]).shape == (6,)
    traced = Traced(ember.ones(3))
    seen.clear()
    assert F.layer_norm(x, (3,), weight=traced) == "traced" and seen == [F.layer_norm]


def test_a_handlers_own_type_error_reaches_the_caller_unchanged():
    # the entry points that reword the parser's TypeErrors (overloaded ops, aliases) must
    # leave an error raised by a __torch_function__ handler or mode alone, as torch does
    class Raising(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            raise TypeError("my own error")

    x = ember.arange(4.).as_subclass(Raising)
    for call in (lambda: ember.div(x, 2), lambda: x.std(0), lambda: x.clamp(0, 1),
                 lambda: ember.clip(x, 0, 1), lambda: ember.divide(x, x)):
        with pytest.raises(TypeError, match="^my own error$"):
            call()

    class Declining(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    n = ember.arange(4.).as_subclass(Declining)
    with pytest.raises(TypeError, match="^Multiple dispatch failed"):
        ember.divide(n, n)
