"""Module methods whose arguments follow PyTorch's signatures."""

import pytest

import ember
from ember import nn


def test_modules_can_keep_shared_submodules():
    shared = nn.Linear(1, 1)
    seq = nn.Sequential(shared, shared)
    assert [type(m).__name__ for m in seq.modules()] == ["Sequential", "Linear"]
    kept = list(seq.modules(remove_duplicate=False))
    assert len(kept) == 3 and kept[1] is kept[2] is shared


def test_to_empty_requires_a_device():
    m = nn.Linear(2, 3, device="meta")
    with pytest.raises(TypeError, match="device"):
        m.to_empty()
    assert m.to_empty(device=None).weight.device == ember.device("meta")
    assert m.to_empty(device="cpu").weight.device == ember.device("cpu")
