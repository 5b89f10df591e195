"""linalg.cross computed by components: NumPy's values bit for bit, a row-major result (as
PyTorch's) for every dim, broadcasting, and its errors."""

import numpy as np
import pytest

import ember


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex64])
@pytest.mark.parametrize("sa,sb,dim", [((3, 2, 4), (3, 1, 4), 0), ((2, 5, 3), (2, 5, 3), -1),
                                       ((4, 3), (1, 3), 1), ((2, 3, 2), (1, 3, 1), 1),
                                       ((0, 3), (0, 3), -1), ((3,), (3,), 0)])
def test_cross_matches_numpy_and_is_row_major(dtype, sa, sb, dim):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(sa) * 5).astype(dtype)
    b = (rng.standard_normal(sb) * 5).astype(dtype)
    got = ember.linalg.cross(ember.from_numpy(a), ember.from_numpy(b), dim=dim)
    want = np.cross(a, b, axis=dim)
    assert got.shape == want.shape
    assert got.numpy().tobytes() == np.ascontiguousarray(want).tobytes()
    assert got.is_contiguous()


def test_cross_of_strided_input_and_gradient():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    b = ember.tensor([[0.5, -1.0], [2.0, 0.0], [1.0, 3.0]])
    c = ember.linalg.cross(a.mT, b.mT)
    np.testing.assert_array_equal(c.detach().numpy(),
                                  np.cross(a.detach().numpy().T, b.numpy().T))
    c.sum().backward()
    # d/da sum(a x b) = b x 1
    np.testing.assert_allclose(a.grad.numpy(),
                               np.cross(b.numpy().T, np.ones((2, 3), np.float32)).T)


def test_cross_errors():
    with pytest.raises(RuntimeError, match="must have length 3"):
        ember.linalg.cross(ember.ones(2, 4), ember.ones(2, 4))
    with pytest.raises(RuntimeError, match="must match the size"):
        ember.linalg.cross(ember.ones(2, 3), ember.ones(4, 3))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        ember.linalg.cross(ember.ones(2, 3), ember.ones(3))
