"""Property tests: elementwise ops broadcast exactly as NumPy/PyTorch specify, forward and back."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember

shapes = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4)


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_broadcast_shape_values_and_gradient_shapes(bs):
    (sa, sb), result = bs.input_shapes, bs.result_shape
    rng = np.random.default_rng(0)
    a_np, b_np = rng.standard_normal(sa), rng.standard_normal(sb)
    a = ember.tensor(a_np, requires_grad=True)
    b = ember.tensor(b_np, requires_grad=True)
    out = a * b + a
    assert out.shape == result
    np.testing.assert_allclose(np.asarray(out.detach()), a_np * b_np + a_np)
    out.sum().backward()
    assert a.grad.shape == sa and b.grad.shape == sb
    np.testing.assert_allclose(np.asarray(b.grad), _reduce_to(np.broadcast_to(a_np, result), sb))
    np.testing.assert_allclose(np.asarray(a.grad),
                               _reduce_to(np.broadcast_to(b_np + 1, result), sa))


def _reduce_to(arr, shape):
    """Sum a broadcast array back down to ``shape``."""
    lead = arr.ndim - len(shape)
    arr = arr.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and arr.shape[i] != 1)
    return arr.sum(axis=axes, keepdims=True) if axes else arr


@st.composite
def incompatible(draw):
    n = draw(st.integers(1, 3))
    a = draw(st.lists(st.integers(2, 4), min_size=n, max_size=n))
    b = list(a)
    i = draw(st.integers(0, n - 1))
    b[i] = a[i] + draw(st.integers(1, 3))
    return tuple(a), tuple(b), i


@settings(max_examples=30, deadline=None)
@given(incompatible())
def test_incompatible_shapes_raise_pytorch_error(case):
    sa, sb, dim = case
    with pytest.raises(RuntimeError, match=rf"The size of tensor a \({sa[dim]}\) must match the "
                                           rf"size of tensor b \({sb[dim]}\) at non-singleton "
                                           rf"dimension {dim}"):
        ember.zeros(sa) + ember.zeros(sb)


@settings(max_examples=40, deadline=None)
@given(shapes, st.sampled_from([ember.float32, ember.int64, ember.float64]))
def test_in_place_requires_the_output_shape(bs, dtype):
    (sa, sb), result = bs.input_shapes, bs.result_shape
    a = ember.zeros(sa, dtype=dtype)
    b = ember.ones(sb, dtype=dtype)
    if tuple(result) == tuple(sa):
        a.add_(b)
        assert a.shape == sa and bool((np.asarray(a) == 1).all())
    else:
        with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
            a.add_(b)
