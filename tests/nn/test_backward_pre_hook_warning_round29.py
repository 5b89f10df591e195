"""A full backward pre-hook alone on a module whose inputs need no grad warns, as PyTorch's
does, that it fires for the module's outputs (round 29: opacus's first layer)."""

import warnings

import pytest

import ember


@pytest.mark.parametrize("x_requires_grad", [False, True])
def test_backward_pre_hook_alone_warns_when_no_input_requires_grad(x_requires_grad):
    m = ember.nn.Linear(2, 3)
    seen = []
    m.register_full_backward_pre_hook(lambda mod, go: seen.append(tuple(go[0].shape)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m(ember.ones(4, 2, requires_grad=x_requires_grad)).sum().backward()
    assert seen == [(4, 3)]
    messages = [str(w.message) for w in caught]
    assert bool(messages) == (not x_requires_grad)
    assert all(m.startswith("Full backward hook is firing when gradients are computed with "
                            "respect to module outputs") for m in messages)
