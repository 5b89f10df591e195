"""tensordot's contracted size-1 dims, which PyTorch broadcasts against their partners:
values, float64 gradients and the error for sizes that cannot broadcast, against PyTorch.
Skipped when PyTorch is not installed."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_CASES = {
    "a_size1": ((2, 1, 4), (3, 5), ([1], [0])),
    "b_size1": ((2, 3), (1, 5), 1),
    "both_dims": ((2, 1, 3), (4, 3, 2), ([1, 2], [0, 1])),
    "b_size1_of_two": ((4, 3), (3, 1, 2), ([0, 1], [1, 0])),
    "against_empty": ((2, 1), (0, 3), 1),
    "empty_against": ((2, 0), (1, 3), 1),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_tensordot_broadcasts_size1_dims(case):
    a_shape, b_shape, dims = _CASES[case]
    rng = np.random.default_rng(0)
    a_np, b_np = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    grads = []
    for m in (ember, torch):
        a = m.tensor(a_np, requires_grad=True)
        b = m.tensor(b_np, requires_grad=True)
        out = m.tensordot(a, b, dims=dims)
        weights = m.arange(out.numel(), dtype=m.float64).reshape(out.shape)
        (out * weights).sum().backward()
        grads.append((out.detach().numpy(), a.grad.numpy(), b.grad.numpy()))
    for ours, theirs in zip(*grads):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_tensordot_refuses_sizes_that_do_not_broadcast():
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="contracted dimensions need to match, but first "
                           "has size 2 in dim 1 and second has size 3 in dim 0"):
            m.tensordot(m.ones(4, 2), m.ones(3, 5), dims=([1], [0]))
