"""Recorded nodes' metadata that the cyclic garbage collector need not track (NOTE [Interned
metadata] in ops/_recording.py): version tuples and sequence lengths it untracks, and the
metadata shared between nodes only where shape and dtype are equal."""

import gc

import numpy as np

import ember
import ember.ops._recording as recording


def test_versions_and_cat_lengths_are_tuples_the_collector_untracks():
    a = ember.randn(2, 3, requires_grad=True)
    b = ember.randn(1, 3, requires_grad=True)
    prod, joined = a * a, ember.cat([a, b, a])
    gc.collect()
    assert prod.grad_fn._versions == (0, 0)
    assert joined.grad_fn._inputs[1] == (3,)
    assert not gc.is_tracked(prod.grad_fn._versions)
    assert not gc.is_tracked(joined.grad_fn._inputs[1])
    joined.backward(ember.arange(15.0).reshape(5, 3))
    g = np.arange(15.0).reshape(5, 3)
    np.testing.assert_array_equal(a.grad.numpy(), g[0:2] + g[3:5])
    np.testing.assert_array_equal(b.grad.numpy(), g[2:3])


def test_metadata_is_shared_only_between_equal_shapes_and_dtypes():
    x32 = ember.ones(2, 2, requires_grad=True)
    x64 = ember.ones(2, 2, dtype=ember.float64, requires_grad=True)
    xbf = ember.ones(2, 2, dtype=ember.bfloat16, requires_grad=True)
    n1, n2 = (x32 * x32).grad_fn, (x32 * 2.0 * x32).grad_fn
    assert n1._in_meta is n2._in_meta                           # (saved inputs: shared tuple)
    assert (x32 + x32).grad_fn._inputs[0][0] is (x32 - x32).grad_fn._inputs[0][0]
    assert (x64 + x64).grad_fn._inputs[0][0][1] == np.float64   # (unsaved: a shared InputMeta)
    for x in (x32, x64, xbf):
        y = x * x32 + x64 * x.t()
        gx, g32, g64 = ember.autograd.grad(y.sum(), (x, x32, x64), allow_unused=True)
        assert gx.dtype == x.dtype and g32.dtype == ember.float32 and g64.dtype == ember.float64
        assert gx.shape == (2, 2)


def test_emptied_caches_keep_every_node_correct(monkeypatch):
    monkeypatch.setattr(recording, "_INTERNED_MAX", 3)
    for n in range(1, 12):
        x = ember.ones(n, requires_grad=True)
        w = ember.full((n, 1), 2.0, dtype=ember.float64, requires_grad=True)
        (x * w + x).sum().backward()
        assert x.grad.dtype == ember.float32 and w.grad.dtype == ember.float64
        np.testing.assert_array_equal(x.grad.numpy(), np.full(n, 3.0 * n))
        np.testing.assert_array_equal(w.grad.numpy(), np.full((n, 1), float(n)))
    assert len(recording._METAS) <= 3 and len(recording._IN_METAS) <= 3
