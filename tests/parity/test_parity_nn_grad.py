"""nn.grad against PyTorch: the six convolution gradient functions on the same operands."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_conv_gradients_match(dims):
    rng = np.random.default_rng(dims)
    x = rng.standard_normal((2, 4) + (7,) * dims)
    w = rng.standard_normal((6, 2) + (3,) * dims)
    options = dict(stride=2, padding=1, dilation=1, groups=2)
    out_size = (2, 6) + (4,) * dims
    g = rng.standard_normal(out_size)
    results = []
    for lib in (ember, torch):
        grads = lib.nn.grad
        xi, wi, gi = (lib.tensor(a) for a in (x, w, g))
        results.append([getattr(grads, f"conv{dims}d_input")(xi.shape, wi, gi, **options),
                        getattr(grads, f"conv{dims}d_weight")(xi, wi.shape, gi, **options)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)
