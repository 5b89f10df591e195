"""Autocast's cast cache: one low-precision copy of a weight per outermost region."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.amp._state import STATE


def _cast_node(y):
    """The ToCopyBackward0 node the (mm/linear) output ``y`` takes its weight from."""
    node = y.grad_fn
    while type(node).__name__ != "ToCopyBackward0":
        node = [n for n, _ in node.next_functions if n is not None][-1]
    return node


def _casts(y):
    """How many ToCopyBackward0 nodes the graph of ``y`` holds."""
    seen, stack = set(), [y.grad_fn]
    while stack:
        n = stack.pop()
        if n is not None and n not in seen:
            seen.add(n)
            stack.extend(f for f, _ in n.next_functions)
    return sum(type(n).__name__ == "ToCopyBackward0" for n in seen)


@pytest.fixture
def w():
    ember.manual_seed(0)
    return ember.randn(3, 3, requires_grad=True)


X = ember.eye(3)


def test_a_weight_is_cast_once_per_region_and_the_copy_dropped_at_exit(w):
    with ember.autocast("cpu"):
        a, b = ember.mm(X, w), F.linear(X, w)
        assert a.dtype is ember.bfloat16
        assert _cast_node(a) is _cast_node(b)
        assert len(STATE.casts) == 1
    assert STATE.casts == {}
    with ember.autocast("cpu"):
        assert _cast_node(ember.mm(X, w)) is not _cast_node(a)
    (a.float().sum() + b.float().sum()).backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 3), 2.0, np.float32))


def test_the_cached_copy_is_stale_after_an_in_place_change_until_the_region_ends(w):
    with ember.autocast("cpu"):
        a = ember.mm(X, w)
        with ember.no_grad():
            w.mul_(2)
        assert ember.equal(ember.mm(X, w), a)       # PyTorch's cache does not look again
    with ember.autocast("cpu"):
        assert ember.equal(ember.mm(X, w), (2 * a.float()).bfloat16())


def test_nested_regions_share_the_cache_and_only_the_outermost_exit_clears_it(w):
    with ember.autocast("cpu"):
        a = ember.mm(X, w)
        with ember.autocast("cpu"):
            b = ember.mm(X, w)
        with ember.autocast("cpu", enabled=False):
            assert ember.mm(X, w).dtype is ember.float32
        assert _cast_node(a) is _cast_node(b) is _cast_node(ember.mm(X, w))
        # the copy is kept by weight, not by dtype: an fp16 region gets the bf16 copy
        with ember.autocast("cpu", dtype=ember.float16):
            with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, "
                                                   "but got: c10::Half != c10::BFloat16"):
                ember.mm(X, w)


def test_cache_disabled_casts_each_use_and_leaves_the_cache_as_it_is(w):
    with ember.autocast("cpu", cache_enabled=False):
        assert _cast_node(ember.mm(X, w)) is not _cast_node(ember.mm(X, w))
        assert STATE.casts == {}
    with ember.autocast("cpu"):
        a = ember.mm(X, w)
        with ember.autocast("cpu", cache_enabled=False):
            b = ember.mm(X, w)
        assert _cast_node(a) is not _cast_node(b)
        assert _cast_node(a) is _cast_node(ember.mm(X, w))


def test_only_float32_leaves_that_require_grad_are_cached(w):
    plain = ember.randn(3, 3)
    with ember.autocast("cpu"):
        non_leaf = w * 1
        assert _cast_node(ember.mm(X, non_leaf)) is not _cast_node(ember.mm(X, non_leaf))
        view = w.t()
        assert _cast_node(ember.mm(X, view)) is not _cast_node(ember.mm(X, view))
        ember.mm(X, plain)
        ember.mm(X, w.detach().bfloat16().requires_grad_())
        assert STATE.casts == {}


def test_a_copy_made_under_no_grad_leads_back_to_the_weight(w):
    with ember.autocast("cpu"):
        with ember.no_grad():
            assert not ember.mm(X, w).requires_grad
        y = ember.mm(X, w)
        assert type(_cast_node(y).next_functions[0][0]).__name__ == "AccumulateGrad"
        y.float().sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.ones((3, 3), np.float32))


def test_inference_mode_caches_nothing(w):
    with ember.autocast("cpu"):
        with ember.inference_mode():
            ember.mm(X, w)
        assert STATE.casts == {}


def test_clear_autocast_cache_and_the_nesting_counters(w):
    with ember.autocast("cpu"):
        a = ember.mm(X, w)
        ember.clear_autocast_cache()
        assert _cast_node(a) is not _cast_node(ember.mm(X, w))
    # outside any region the cache fills while autocast is on, and only clearing empties it
    ember.set_autocast_enabled("cpu", True)
    try:
        assert ember.autocast_increment_nesting() == 1
        a = ember.mm(X, w)
        assert ember.autocast_decrement_nesting() == 0
        assert _cast_node(a) is _cast_node(ember.mm(X, w))
    finally:
        ember.set_autocast_enabled("cpu", False)
        ember.clear_autocast_cache()
    assert STATE.casts == {}


def test_the_cache_is_per_thread(w):
    import threading
    seen = []
    with ember.autocast("cpu"):
        ember.mm(X, w)

        def other():
            seen.append(dict(STATE.casts))
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == [{}]


@pytest.mark.parametrize("make, steps", [
    (lambda: nn.GRU(3, 4), None), (lambda: nn.LSTM(3, 4, proj_size=2), None),
    (lambda: nn.GRUCell(3, 4), 5), (lambda: nn.LSTMCell(3, 4), 5)])
def test_recurrent_weights_are_cast_once_for_all_steps(make, steps):
    ember.manual_seed(0)
    m, x = make(), ember.randn(5, 2, 3)
    with ember.autocast("cpu"):
        if steps is None:
            y = m(x)[0]
        else:
            h, outs = None, []
            for t in range(steps):
                h = m(x[t], h)
                outs.append(h[0] if isinstance(h, tuple) else h)
            y = ember.stack(outs)
    # PyTorch's counts: one cast per weight, one per hidden state fed back (and for the
    # projection, whose transposed weight is a view, one per step)
    want = {"GRU": 8, "LSTM": 14, "GRUCell": 8, "LSTMCell": 8}[type(m).__name__]
    assert _casts(y) == want


@pytest.mark.parametrize("make", [lambda: nn.LSTM(3, 4), lambda: nn.RNN(3, 4),
                                  lambda: nn.RNNCell(3, 4)])
def test_recurrent_biases_are_cached_too(make):
    # PyTorch's kernels cast b_ih and b_hh each (ember folds them into one bias after the
    # casts): an in-place update inside the region leaves the output as it was
    ember.manual_seed(0)
    m, x = make(), ember.randn(5, 2, 3)
    with ember.autocast("cpu"):
        y = m(x if isinstance(m, nn.RNNBase) else x[0])
        y = y[0] if isinstance(y, tuple) else y
        assert len(STATE.casts) == 4
        with ember.no_grad():
            for p in m.parameters():
                p.add_(1)
        z = m(x if isinstance(m, nn.RNNBase) else x[0])
        assert ember.equal(y, z[0] if isinstance(z, tuple) else z)


def test_checkpoint_recomputation_drops_the_casts_it_cached(w):
    from ember.utils.checkpoint import checkpoint
    with ember.autocast("cpu"):
        y = checkpoint(lambda x: ember.mm(x, w), X, use_reentrant=False)
    y.float().sum().backward()
    assert STATE.casts == {} and STATE.nesting == 0
    with ember.no_grad():
        w.mul_(2)
    with ember.autocast("cpu"):
        np.testing.assert_array_equal(ember.mm(X, w).float().detach().numpy(),
                                      w.detach().bfloat16().float().numpy())
