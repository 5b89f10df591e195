"""``ember.gradient``: numerical derivatives, against NumPy's ``gradient`` (which PyTorch's
follows), with gradients of their own."""

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck


@pytest.mark.parametrize("edge_order", [1, 2])
def test_uniform_and_coordinate_spacing_match_numpy(edge_order):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5, 3))
    x = ember.tensor(a)
    for got, expected in zip(ember.gradient(x, edge_order=edge_order),
                             np.gradient(a, edge_order=edge_order)):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
    coords = np.cumsum(rng.uniform(0.2, 1.0, 5))
    (got,) = ember.gradient(x, spacing=[ember.tensor(coords)], dim=1, edge_order=edge_order)
    np.testing.assert_allclose(got.numpy(), np.gradient(a, coords, axis=1,
                                                        edge_order=edge_order), rtol=1e-12)
    got = ember.gradient(x, spacing=[2.0, 0.5], dim=(0, -1), edge_order=edge_order)
    expected = np.gradient(a, 2.0, 0.5, axis=(0, 2), edge_order=edge_order)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-12)


def test_integers_become_the_default_dtype():
    (g,) = ember.gradient(ember.tensor([1, 4, 9, 16, 25]))
    assert g.dtype == ember.float32 and g.tolist() == [3.0, 4.0, 6.0, 8.0, 9.0]
    (g,) = ember.gradient(ember.tensor([1.0, 4.0]), spacing=2.0)
    assert g.tolist() == [1.5, 1.5]


def test_gradients_flow_through():
    x = ember.randn(4, 5, dtype=ember.float64, requires_grad=True)
    coords = ember.tensor([0.0, 0.5, 1.5, 1.75, 3.0], dtype=ember.float64)
    assert gradcheck(lambda t: ember.gradient(t, edge_order=2), (x,))
    assert gradcheck(lambda t: ember.gradient(t, spacing=[coords], dim=1), (x,))


def test_bad_arguments():
    x = ember.ones(3, 4)
    with pytest.raises(RuntimeError, match="only supports edge_order=1 and edge_order=2"):
        ember.gradient(x, edge_order=3)
    with pytest.raises(RuntimeError, match="a list of length equal to 'self.dim\\(\\) = 2'"):
        ember.gradient(x, spacing=[1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="1-D with input.size\\(1\\) = 4 coordinates"):
        ember.gradient(x, spacing=[ember.tensor([0.0, 1.0, 2.0])], dim=1)
    with pytest.raises(RuntimeError, match="each dimension size to be at least edge_order\\+1"):
        ember.gradient(ember.ones(2), edge_order=2)


def test_uint8_and_bool_inputs_are_rejected():
    # uint8 is refused before any other check; bools fail on differencing (after the checks)
    with pytest.raises(RuntimeError, match="^torch.gradient does not support uint8 input.$"):
        ember.gradient(ember.ones(1, dtype=ember.uint8), edge_order=3)
    with pytest.raises(RuntimeError, match="only supports edge_order=1 and edge_order=2"):
        ember.gradient(ember.ones(1, dtype=ember.bool), edge_order=3)
    with pytest.raises(RuntimeError, match="with two bool tensors is not supported. Use the `\\^`"):
        ember.gradient(ember.tensor([True, False, True]))
    assert ember.gradient(ember.tensor([1, 4, 9], dtype=ember.int8))[0].tolist() == [3., 4., 5.]


def test_repeated_dims_and_spacing_length_errors():
    x = ember.ones(2, 4)
    with pytest.raises(RuntimeError, match="^dim 0 appears multiple times in the list of dims$"):
        ember.gradient(x, dim=(0, -2), edge_order=2)
    with pytest.raises(RuntimeError, match="a scalar or it's spacing and dim arguments to have "
                       "the same length, but got a spacing argument of length 2 and a dim "
                       "argument of length 1.$"):
        ember.gradient(x, dim=1, spacing=[1.0, 2.0])
