"""Module machinery cases the round-35 nn.Module fuzzer found (PyTorch 2.13's behaviour)."""

import copy
import pickle

import pytest

import ember
from ember import nn


def test_setattr_module_skips_add_module_name_checks():
    # attribute assignment registers a module under any name, shadowing class attributes
    m = nn.Module()
    m.forward = nn.Identity()
    setattr(m, "state_dict", nn.Identity())
    setattr(m, "x.y", nn.Identity())
    assert list(m._modules) == ["forward", "state_dict", "x.y"]
    assert "forward" not in m.__dict__
    with pytest.raises(KeyError, match="attribute 'forward' already exists"):
        nn.Module().add_module("forward", nn.Identity())


def test_setattr_module_runs_registration_hooks():
    seen = []
    handle = nn.modules.module.register_module_module_registration_hook(
        lambda mod, name, sub: seen.append(name))
    try:
        m = nn.Module()
        m.forward = nn.Identity()
        m.forward = None
    finally:
        handle.remove()
    assert seen == ["forward", "forward"]
    assert m._modules == {"forward": None}


def test_setattr_buffer_over_plain_attribute_raises():
    m = nn.Module()
    m.k = 1
    with pytest.raises(KeyError, match="attribute 'k' already exists"):
        m.k = nn.Buffer(ember.ones(2))
    assert m.k == 1 and "k" not in m._buffers
    m.register_buffer("b", ember.ones(1), persistent=False)
    m.b = nn.Buffer(ember.zeros(2))        # a buffer replaces a buffer, persistent again
    assert m._non_persistent_buffers_set == set() and m.b.shape == (2,)


@pytest.mark.parametrize("assign", [False, True])
def test_load_scalar_from_one_element_vector_only(assign):
    m = nn.Module()
    m.register_buffer("count", ember.tensor(3))
    m.load_state_dict({"count": ember.tensor([5])}, assign=assign)
    assert m.count.shape == () and m.count.item() == 5
    for shape in [(7,), (0,), (2,)]:
        with pytest.raises(RuntimeError, match=r"size mismatch for count: copying a param with "
                           rf"shape ember.Size\(\[{shape[0]}\]\) from checkpoint, the shape in "
                           r"current model is ember.Size\(\[\]\)"):
            m.load_state_dict({"count": ember.ones(shape)}, assign=assign)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_load_pre_hook_of_a_copy_gets_the_copy(how):
    m = nn.Linear(2, 2)
    m.register_load_state_dict_pre_hook(_record)
    c = copy.deepcopy(m) if how == "deepcopy" else pickle.loads(pickle.dumps(m))
    _SEEN.clear()
    c.load_state_dict(c.state_dict())
    assert len(_SEEN) == 1 and _SEEN[0] is c
    _SEEN.clear()
    m.load_state_dict(m.state_dict())
    assert len(_SEEN) == 1 and _SEEN[0] is m


_SEEN = []


def _record(module, *args):
    _SEEN.append(module)
