"""Round 32: the pooling family lays out its input gradients as PyTorch's backward kernels do:
channels_last for max_pool2d/3d, avg_pool2d, adaptive_avg_pool2d and adaptive_max_pool2d of
a channels_last input (before: row-major), row-major for the 3-D average and adaptive kernels;
adaptive_max_pool3d's output is row-major too. A 1-D pooling of a (N, C, L) input whose
channels are innermost (a transposed (N, L, C)) keeps that layout, as PyTorch's pooling of
it as (N, C, 1, L) does, except max_pool1d's own kernel (no indices, no grad)."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F

CL = {2: ember.channels_last, 3: ember.channels_last_3d}
ROW_MAJOR = {2: (108, 36, 6, 1), 3: (648, 216, 36, 6, 1)}
CHANNELS_LAST = {2: (108, 1, 18, 3), 3: (648, 1, 108, 18, 3)}
# (pool, dims): whether the input gradient of a channels-last input is channels-last
LAID = {("avg", 2): True, ("avg", 3): False, ("max", 2): True, ("max", 3): True,
        ("adaptive_avg", 2): True, ("adaptive_avg", 3): False, ("adaptive_max", 2): True,
        ("adaptive_max", 3): False}


def _pool(name, k):
    return {"avg": lambda t: getattr(F, f"avg_pool{k}d")(t, 2),
            "max": lambda t: getattr(F, f"max_pool{k}d")(t, 2),
            "adaptive_avg": lambda t: getattr(F, f"adaptive_avg_pool{k}d")(t, 4),
            "adaptive_max": lambda t: getattr(F, f"adaptive_max_pool{k}d")(t, 4)}[name]


def _reference_grad(x, name, k):
    """The same gradient from a row-major input (its values do not depend on the layout)."""
    xc = x.detach().contiguous().requires_grad_()
    (g,) = ember.autograd.grad(_pool(name, k)(xc).pow(2).sum(), xc)
    return g.numpy()


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name,k", sorted(LAID))
def test_channels_last_input_gradient_strides(name, k, create_graph):
    data = np.random.default_rng(k).standard_normal((2, 3) + (6,) * k)
    x = ember.tensor(data).contiguous(memory_format=CL[k]).requires_grad_()
    (g,) = ember.autograd.grad(_pool(name, k)(x).pow(2).sum(), x, create_graph=create_graph)
    assert g.stride() == (CHANNELS_LAST if LAID[(name, k)] else ROW_MAJOR)[k]
    np.testing.assert_allclose(g.detach().numpy(), _reference_grad(x, name, k), rtol=1e-12)


def test_adaptive_max_pool3d_output_is_row_major():
    x = ember.randn(2, 3, 6, 6, 6).contiguous(memory_format=ember.channels_last_3d)
    assert F.adaptive_max_pool3d(x, 4).stride() == (192, 64, 16, 4, 1)
    assert F.adaptive_max_pool2d(x[:, :, 0], 4).stride() == (48, 1, 12, 3)


@pytest.mark.parametrize("name", ["avg", "max", "adaptive_avg", "adaptive_max"])
def test_channels_innermost_1d_pooling_keeps_its_layout(name):
    data = np.random.default_rng(0).standard_normal((2, 6, 3))
    x = ember.tensor(data).transpose(1, 2).requires_grad_()      # (2, 3, 6), strides (18, 1, 3)
    y = _pool(name, 1)(x)
    assert y.stride() == (3 * y.shape[2], 1, 3)
    (g,) = ember.autograd.grad(y.pow(2).sum(), x)
    assert g.stride() == (18, 1, 3)
    np.testing.assert_allclose(g.numpy(), _reference_grad(x, name, 1), rtol=1e-12)


def test_max_pool1d_own_kernel_is_row_major():
    x = ember.randn(2, 6, 3).transpose(1, 2)
    assert F.max_pool1d(x, 2).stride() == (9, 3, 1)
    assert F.max_pool1d(x, 2, return_indices=True)[1].stride() == (9, 1, 3)
    x.requires_grad_()
    assert F.max_pool1d(x, 2).stride() == (9, 1, 3)
    with ember.no_grad():
        assert F.max_pool1d(x, 2).stride() == (9, 3, 1)
