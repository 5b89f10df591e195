"""An ``out=`` tensor of the wrong shape is resized as ``Tensor.resize_`` resizes it: inside
its memory while that is large enough (a view keeps writing into its base), else new memory."""

import warnings

import numpy as np

import ember

X = np.arange(24, dtype=np.float32).reshape(6, 4)


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def test_out_view_grown_within_its_base_writes_through():
    base = ember.full((5, 4), -1.0)
    out = _quiet(lambda: ember.index_select(ember.from_numpy(X), 0, ember.tensor([4, 0, 2]),
                                            out=base[1:3]))
    expected = np.full((5, 4), -1.0, np.float32)
    expected[1:4] = X[[4, 0, 2]]
    np.testing.assert_array_equal(base.numpy(), expected)
    assert (list(out.shape), out.stride(), out.storage_offset()) == ([3, 4], (4, 1), 4)
    assert out._version == base._version


def test_out_view_shrunk_stays_at_its_offset():
    base = ember.full((5, 4), -1.0)
    out = _quiet(lambda: ember.add(ember.from_numpy(X[:1]), 1, out=base[2:5]))
    expected = np.full((5, 4), -1.0, np.float32)
    expected[2] = X[0] + 1
    np.testing.assert_array_equal(base.numpy(), expected)
    assert out.storage_offset() == 8


def test_transposed_out_becomes_contiguous_over_its_memory():
    base = ember.full((5, 4), -1.0)
    out = _quiet(lambda: ember.mul(ember.from_numpy(X[:2, :3]), 2, out=base.t()[1:]))
    assert out.is_contiguous() and out.storage_offset() == 1
    flat = np.full(20, -1.0, np.float32)
    flat[1:7] = (X[:2, :3] * 2).ravel()
    np.testing.assert_array_equal(base.numpy().ravel(), flat)


def test_empty_out_gets_fresh_memory():
    out = ember.empty(0)
    assert ember.sum(ember.from_numpy(X), 1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), X.sum(1))
