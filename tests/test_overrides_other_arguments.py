"""A subclass among the arguments after a plain ``self`` is offered the call as PyTorch offers
it: hand-written methods (``x.view_as(sub)``) and in-place ops reached from them (``copy_``)."""

import pytest

import ember


class Logged(ember.Tensor):
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


def test_copy_from_a_subclass_into_a_plain_tensor():
    # the entry looked up Tensor.copy__ (the op's name already ends with "_")
    Logged.seen = []
    dst = ember.zeros(2, 3)
    out = dst.copy_(ember.arange(3.0).as_subclass(Logged))
    assert Logged.seen == [ember.Tensor.copy_]
    assert type(out) is Logged and dst.tolist() == [[0.0, 1.0, 2.0]] * 2


@pytest.mark.parametrize("call,name,expected", [
    (lambda x, s: x.view_as(s), "view_as", [[0.0, 1.0, 2.0]]),
    (lambda x, s: x.reshape_as(s), "reshape_as", [[0.0, 1.0, 2.0]]),
    (lambda x, s: x.expand_as(s), "expand_as", [[0.0, 1.0, 2.0]]),
    (lambda x, s: x.type_as(s), "type_as", [0.0, 1.0, 2.0]),
    (lambda x, s: x.to(s), "to", [0.0, 1.0, 2.0]),
])
def test_hand_written_methods_are_offered_for_a_later_argument(call, name, expected):
    Logged.seen = []
    out = call(ember.arange(3.0), ember.ones(1, 3).as_subclass(Logged))
    assert Logged.seen == [getattr(ember.Tensor, name)]
    assert type(out) is Logged and out.tolist() == expected


def test_predicates_and_setitem_are_offered_for_a_later_argument():
    Logged.seen = []
    x, s = ember.arange(3.0), ember.arange(3.0).as_subclass(Logged)
    assert x.equal(s) and x.allclose(s) and x.is_same_size(s)
    x[0] = s[2]
    assert x.tolist() == [2.0, 1.0, 2.0]
    assert [f.__name__ for f in Logged.seen] == ["equal", "allclose", "is_same_size",
                                                 "__getitem__", "__setitem__"]


def test_as_subclass_is_not_offered_to_the_handler():
    # it was offered as the registry's private _alias
    Logged.seen = []
    s = ember.arange(3.0).as_subclass(Logged)
    plain = s.as_subclass(ember.Tensor)
    again = s.as_subclass(Logged)
    assert Logged.seen == [] and type(plain) is ember.Tensor and type(again) is Logged
    assert plain.tolist() == again.tolist() == [0.0, 1.0, 2.0]
