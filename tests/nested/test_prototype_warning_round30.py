"""Strided nested tensors warn, as PyTorch's do, that their API is a prototype (once, or every
time under set_warn_always); a view of a dense tensor and the jagged layout do not."""

import warnings

import pytest

import ember


def _messages(fn):
    was = ember.is_warn_always_enabled()
    ember.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
    finally:
        ember.set_warn_always(was)
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("fn, warns", [
    (lambda: ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(1, 3)]), True),
    (lambda: ember.nested.as_nested_tensor([ember.ones(2, 3), ember.ones(1, 3)]), True),
    (lambda: ember.nested.as_nested_tensor(ember.ones(2, 3)), False),
    (lambda: ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(1, 3)],
                                        layout=ember.jagged), False),
])
def test_strided_nested_tensors_warn(fn, warns):
    got = _messages(fn)
    assert len(got) == int(warns)
    if warns:
        assert got[0].startswith("The PyTorch API of nested tensors is in prototype stage")
        assert "layout=torch.jagged" in got[0]
