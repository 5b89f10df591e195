"""Regression tests for the spiking-network programs of round 34 (no torch needed): a compiled
module (OptimizedModule) writes, deletes and mirrors its wrapped module's attributes as
PyTorch's wrapper does, so state reset on the compiled net reaches the module that runs."""

import copy
import pickle

import pytest

import ember
from ember import nn


class _Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.mem = None

    def forward(self, x):
        if self.mem is None:
            self.mem = ember.zeros_like(x)
        self.mem = self.mem * 0.5 + x
        return self.mem


def test_state_reset_on_compiled_module_reaches_the_wrapped_module():
    net = ember.compile(_Leaky())
    net(ember.ones(2))
    net(ember.ones(2))
    assert net.mem.tolist() == [1.5, 1.5]
    net.mem = None                       # snnTorch-style reset between batches
    assert net._orig_mod.mem is None
    assert net(ember.ones(2)).tolist() == [1.0, 1.0]
    assert "mem" not in net.__dict__


def test_compiled_module_setattr_delattr_and_training_mirror():
    m = nn.Linear(2, 2)
    cm = ember.compile(m)
    cm.foo = 3
    assert m.foo == 3
    del cm.foo
    assert not hasattr(m, "foo") and not hasattr(cm, "foo")
    cm.weight = nn.Parameter(ember.zeros(2, 2))
    assert m.weight.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert list(cm.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    cm.sub = nn.Linear(1, 1)
    assert [n for n, _ in cm.named_modules()] == ["", "_orig_mod", "_orig_mod.sub"]
    m.eval()
    assert cm.training is False
    cm.train()
    assert m.training is True and cm.training is True
    cm.training = False
    assert m.training is False


def test_compiled_module_len_dir_and_copies():
    m = nn.Linear(2, 2)
    cm = ember.compile(m)
    with pytest.raises(TypeError, match="^Linear does not support len\\(\\)$"):
        len(cm)
    assert len(ember.compile(nn.Sequential(nn.ReLU(), nn.Tanh()))) == 2
    assert "weight" in dir(cm) and "forward" in dir(cm)
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        cm.nope
    for clone in (copy.deepcopy(cm), pickle.loads(pickle.dumps(cm))):
        assert type(clone).__name__ == "OptimizedModule"
        assert clone._orig_mod is not m
        assert clone.weight.tolist() == m.weight.tolist()
