"""Round 32: resize_, resize_as_ and detach_ under vmap, as PyTorch's. resize_ (before: an
error) resizes the batched value to (batch, *size) over its memory, so each example is a
row-major run of it; other memory formats raise. resize_as_ runs PyTorch's per-example
fallback, which leaves the tensor as it was. detach_ of a batched tensor (before: allowed)
raises as PyTorch's fallback does: it detaches a per-example slice, a view. And detach_ of
any view raises, requiring grad or not."""

import re

import numpy as np
import pytest

import ember
from ember.func import vmap

_DETACH = re.escape("Can't detach views in-place. Use detach() instead.")
_FALLBACK = "There is a performance drop because we have not yet implemented the batching rule"


def _x():
    return ember.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("size,want", [
    ((2,), [[0, 1], [2, 3]]), ((1, 3), [[[0, 1, 2]], [[3, 4, 5]]]),
    (((3, 1),), [[[0], [1], [2]], [[3], [4], [5]]]), ((3,), [[0, 1, 2], [3, 4, 5]]),
    ((0,), [[], []])])
def test_resize_reinterprets_the_batched_memory(size, want):
    out = vmap(lambda v: v.clone().resize_(*size))(_x())
    np.testing.assert_array_equal(out.numpy(), np.array(want, dtype=np.float32).reshape(
        np.shape(want)))


def test_resize_bigger_keeps_the_memory_in_order_and_resizes_an_input():
    x = _x()
    seen = []
    out = vmap(lambda v: seen.append(tuple(v.resize_(4).shape)) or v)(x)
    assert seen == [(4,)] and tuple(x.shape) == (2, 4)
    np.testing.assert_array_equal(out.numpy(), x.numpy())
    np.testing.assert_array_equal(x.numpy().ravel()[:6], np.arange(6.0))


def test_resize_nested_and_refusals():
    out = vmap(vmap(lambda v: v.clone().resize_(2)))(ember.arange(24.0).reshape(3, 2, 4))
    np.testing.assert_array_equal(out.numpy(), np.arange(12.0).reshape(3, 2, 2))   # memory order
    with pytest.raises(RuntimeError, match="resize_: batching rule only supports None or "
                                           "Contiguous MemoryFormat"):
        vmap(lambda v: v.clone().resize_(1, 1, 1, 3, memory_format=ember.channels_last))(_x())
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        vmap(lambda v: v.resize_(2))(_x().requires_grad_())


def test_resize_as_leaves_the_tensor_as_it_was():
    with pytest.warns(UserWarning, match=_FALLBACK + " for aten::resize_as_"):
        out = vmap(lambda v: v.clone().resize_as_(ember.zeros(2)))(_x())
    np.testing.assert_array_equal(out.numpy(), _x().numpy())


@pytest.mark.parametrize("make", [lambda v: v.clone(), lambda v: v * 2, lambda v: v])
def test_detach_of_a_batched_tensor_raises(make):
    with pytest.warns(UserWarning, match=_FALLBACK + " for aten::detach_"):
        with pytest.raises(RuntimeError, match=_DETACH):
            vmap(lambda v: make(v).detach_())(_x())


def test_detach_of_an_unbatched_tensor_in_vmap_works():
    out = vmap(lambda v: ember.zeros(3).detach_() + v)(_x())
    np.testing.assert_array_equal(out.numpy(), _x().numpy())


def test_detach_of_any_view_raises():
    x = ember.zeros(2, 3)
    for view in (x[:1], x.view(6), x.t(), x.unbind(0)[0]):
        with pytest.raises(RuntimeError, match=_DETACH):
            view.detach_()
    assert x.detach().detach_().requires_grad is False
    y = (ember.zeros(3, requires_grad=True) * 2).detach_()
    assert y.grad_fn is None and not y.requires_grad
