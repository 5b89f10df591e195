"""F.embedding_bag(mode="max") against PyTorch where rows tie: which row gives each value and
takes its gradient."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _run(lib, weight, idx, offsets, grad, **kwargs):
    w = lib.tensor(weight, requires_grad=True)
    y = lib.nn.functional.embedding_bag(lib.tensor(idx), w, None if offsets is None
                                        else lib.tensor(offsets), mode="max", **kwargs)
    y.backward(lib.tensor(grad))
    return np.asarray(y.detach()), np.asarray(w.grad)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 1}, {"include_last_offset": True}])
def test_embedding_bag_max_ties_match_torch(seed, kwargs):
    rng = np.random.default_rng(seed)
    weight = rng.integers(0, 3, (6, 4)).astype(np.float64)      # small integers: many ties
    weight[rng.random(weight.shape) < 0.1] = np.nan
    idx = rng.integers(0, 6, 12)
    offsets = np.sort(rng.integers(0, 12, 5))
    offsets[0] = 0
    bags = len(offsets)
    if kwargs.get("include_last_offset"):   # torch reads past a last offset short of the end
        offsets = np.append(offsets, len(idx))
    grad = rng.standard_normal((bags, 4))
    (e_out, e_grad), (t_out, t_grad) = (_run(lib, weight, idx, offsets, grad, **kwargs)
                                        for lib in (ember, torch))
    np.testing.assert_array_equal(e_out, t_out)
    np.testing.assert_array_equal(e_grad, t_grad)


def test_embedding_bag_max_2d_input_matches_torch():
    weight = np.array([[0., -0., 1.], [-0., 0., 1.], [1., 1., 1.]])
    idx = np.array([[0, 1, 2], [1, 0, 0], [2, 2, 1]])
    grad = np.arange(9.).reshape(3, 3)
    (e_out, e_grad), (t_out, t_grad) = (_run(lib, weight, idx, None, grad)
                                        for lib in (ember, torch))
    np.testing.assert_array_equal(e_out, t_out)
    np.testing.assert_array_equal(np.signbit(e_out), np.signbit(t_out))
    np.testing.assert_array_equal(e_grad, t_grad)
