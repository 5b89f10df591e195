"""matrix_power multiplies in torch's order, so 16-bit powers round as torch's do: (A A) A
for the cube, binary powers otherwise."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 11])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])     # (float32: BLAS sums differ)
@pytest.mark.parametrize("shape", [(6, 6), (2, 5, 5)])
def test_powers_equal_torchs_bit_for_bit(n, dtype, shape):
    a = np.random.default_rng(n).standard_normal(shape).astype(np.float32) * 0.7
    ours = ember.linalg.matrix_power(ember.tensor(a).to(getattr(ember, dtype)), n)
    theirs = torch.linalg.matrix_power(torch.tensor(a).to(getattr(torch, dtype)), n)
    assert ours.float().tolist() == theirs.float().tolist()
