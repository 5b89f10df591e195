"""vmap of scaled_dot_product_attention whose per-example (logical) inputs suit PyTorch's CPU
flash kernel (4-D): PyTorch has no batching rule for that kernel, so it loops and warns (and
refuses a batch of 0); 3-D per-example inputs take the math kernel's batched ops silently.
The results are the per-example results stacked, whichever way."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F

_FORWARD = ("There is a performance drop because we have not yet implemented the batching rule "
            "for aten::_scaled_dot_product_flash_attention_for_cpu. Please file us an issue on "
            "GitHub so that we can prioritize its implementation.")
_BACKWARD = _FORWARD.replace("_for_cpu.", "_for_cpu_backward.")


def _q():
    return ember.from_numpy(np.random.default_rng(0).standard_normal((3, 2, 4, 5))
                            .astype(np.float32))


def _attend(q):
    return F.scaled_dot_product_attention(q[None], q[None], q[None])[0]


def _messages(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in caught]


def test_logical_4d_loops_with_the_fallback_warning_and_stacks_the_examples():
    q = _q()
    out, messages = _messages(lambda: ember.vmap(_attend)(q))
    assert messages == [_FORWARD]
    want = ember.stack([_attend(q[i]) for i in range(3)])
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_logical_3d_takes_the_math_kernel_silently():
    q = _q()
    _, messages = _messages(lambda: ember.vmap(lambda q: F.scaled_dot_product_attention(
        q, q, q))(q))
    assert messages == []


def test_vmap_of_grad_loops_the_backward_too():
    q = _q()
    grads, messages = _messages(lambda: ember.vmap(ember.func.grad(
        lambda q: _attend(q).sum()))(q))
    assert messages == [_FORWARD, _BACKWARD]
    want = ember.stack([ember.func.grad(lambda q: _attend(q).sum())(q[i]) for i in range(3)])
    np.testing.assert_allclose(grads.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_nested_vmaps_warn_once_per_example_of_the_inner_level():
    q = _q()
    _, messages = _messages(lambda: ember.vmap(ember.vmap(
        lambda q: F.scaled_dot_product_attention(q[None, None], q[None, None],
                                                 q[None, None])))(q))
    assert messages == [_FORWARD] * 3         # inner level once, outer once per its 2


def test_jacrev_loops_the_backward_under_its_vmap():
    q = _q()
    _, messages = _messages(lambda: ember.func.jacrev(lambda q: _attend(q).sum(0))(q[0]))
    assert messages == [_BACKWARD]


def test_batch_of_zero_is_refused():
    with pytest.raises(RuntimeError, match="The fallback path does not support vmap over dims "
                                           "of size 0"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ember.vmap(_attend)(_q()[:0])


def test_flash_only_backend_judges_the_logical_inputs():
    q = _q()
    with ember.nn.attention.sdpa_kernel(ember.nn.attention.SDPBackend.FLASH_ATTENTION):
        out, messages = _messages(lambda: ember.vmap(_attend)(q))
    assert messages == [_FORWARD]
    assert out.shape == (3, 2, 4, 5)
