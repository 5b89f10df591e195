"""Tensor.grad_dtype: the dtype a leaf's gradients are cast to (PyTorch 2.13)."""

import pytest

import ember


def test_defaults_to_the_tensors_dtype_and_is_for_leaves_only():
    x = ember.ones(3, dtype=ember.float16, requires_grad=True)
    assert x.grad_dtype is ember.float16 and ember.ones(2).grad_dtype is ember.float32
    with pytest.raises(RuntimeError, match="grad_dtype can only be accessed on leaf tensors."):
        (x * 2).grad_dtype
    with pytest.raises(RuntimeError, match="grad_dtype can only be set on leaf tensors."):
        (x * 2).grad_dtype = ember.float32
    with pytest.raises(RuntimeError, match="grad_dtype must be a torch.dtype or None, but got "
                                           "int"):
        x.grad_dtype = 3
    x.grad_dtype = ember.float32
    assert x.grad_dtype is ember.float32 and x.detach().grad_dtype is ember.float16


def test_backward_accumulates_in_the_grad_dtype_and_hooks_see_it():
    x = ember.ones(3, dtype=ember.float16, requires_grad=True)
    x.grad_dtype = ember.float32
    seen = []
    x.register_hook(lambda g: seen.append(g.dtype))
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.dtype))
    for _ in range(2):
        (x * 2).sum().backward()
    assert x.grad.dtype is ember.float32 and x.grad.tolist() == [4.0, 4.0, 4.0]
    assert seen == [ember.float32] * 4
    g, = ember.autograd.grad((x * 3).sum(), x)
    assert g.dtype is ember.float32 and g.tolist() == [3.0, 3.0, 3.0]


def test_assigned_gradients_must_match_unless_it_is_none():
    x = ember.ones(3, requires_grad=True)
    x.grad_dtype = ember.float64
    with pytest.raises(RuntimeError, match="with dtype 'float' to a tensor with grad_dtype "
                                           "'Double'"):
        x.grad = ember.ones(3)
    x.grad = ember.ones(3, dtype=ember.float64)
    x.grad_dtype = None
    x.grad = ember.ones(3, dtype=ember.float16)
    assert x.grad_dtype is None and x.grad.dtype is ember.float16
