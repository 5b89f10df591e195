"""A user Tensor subclass mixed into an nn.Parameter subclass (geoopt's ManifoldParameter):
Parameter's own methods still win over the Tensor entries the user base class gets, and the
subclass's ``__new__`` keywords are not refused by an ``__init__``; a tensor with attributes
reduces to a (rebuild, args) pair, as subclasses' own ``__reduce_ex__`` expect."""

import copy

import ember


class _Tagged(ember.Tensor):
    def __new__(cls, data, tag=None, requires_grad=False):
        out = ember.Tensor._make_subclass(cls, data, requires_grad)
        out.tag = tag
        return out


class _TaggedParameter(_Tagged, ember.nn.Parameter):
    def __new__(cls, data=None, tag=None, requires_grad=True):
        out = _Tagged._make_subclass(cls, data, requires_grad)
        out.tag = tag
        return out


def test_keywords_reach_new():
    p = _TaggedParameter(ember.ones(2), tag="ball")
    assert p.tag == "ball" and p.requires_grad and isinstance(p, ember.nn.Parameter)


def test_parameter_deepcopy_and_repr_win_over_base_entries():
    p = _TaggedParameter(ember.ones(2), tag="ball")
    assert type(p).__deepcopy__ is ember.nn.Parameter.__deepcopy__
    # Parameter.__deepcopy__ rebuilds with (data, requires_grad): the flag lands in ``tag``
    twin = copy.deepcopy(p)
    assert type(twin) is _TaggedParameter and twin.tag is True
    assert repr(p).startswith("Parameter containing:\n")
    m = ember.nn.Module()
    m.w = p
    assert [n for n, _ in m.named_parameters()] == ["w"]


def test_tensor_with_attributes_reduces_to_a_pair():
    import pickle
    t = _Tagged(ember.tensor([1.0, 2.0]), tag="ball")
    reduced = t.__reduce_ex__(2)
    assert len(reduced) == 2        # geoopt unpacks ``build, proto = super().__reduce_ex__(p)``
    back = pickle.loads(pickle.dumps(t))
    assert type(back) is _Tagged and back.tag == "ball" and back.tolist() == [1.0, 2.0]
