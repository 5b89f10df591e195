"""grid_sample's backward under vmap (``jacrev`` through a warp) folds the batch into N, as
PyTorch's batching rule for grid_sampler_2d_backward does: no fallback warning, and each row of
the Jacobian equals an unbatched backward's; per-example gradients agree too."""

import warnings

import numpy as np
import pytest

import ember

F = ember.nn.functional
_IMG = np.random.default_rng(3).random((3, 2, 5, 6)).astype(np.float32)
_GRID = np.random.default_rng(4).uniform(-1.1, 1.1, (3, 4, 3, 2)).astype(np.float32)
_MODES = pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
_PADDINGS = pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])


def _loss(mode, padding_mode):
    def loss(i, g):
        out = F.grid_sample(i[None], g[None], mode=mode, padding_mode=padding_mode,
                            align_corners=True)
        return (out * out).sum()
    return loss


@_PADDINGS
@_MODES
def test_per_example_grid_sample_gradients_match_unbatched(mode, padding_mode):
    loss = _loss(mode, padding_mode)
    img, grid = ember.from_numpy(_IMG), ember.from_numpy(_GRID)
    gi, gg = ember.func.vmap(ember.func.grad(loss, argnums=(0, 1)))(img, grid)
    for b in range(3):
        i = ember.from_numpy(_IMG[b].copy()).requires_grad_()
        g = ember.from_numpy(_GRID[b].copy()).requires_grad_()
        want_i, want_g = ember.autograd.grad(loss(i, g), [i, g])
        np.testing.assert_allclose(gi[b].numpy(), want_i.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(gg[b].numpy(), want_g.numpy(), rtol=1e-6, atol=1e-6)


@_PADDINGS
@_MODES
def test_jacrev_through_grid_sample_matches_rows_of_backward(mode, padding_mode):
    img, grid = ember.from_numpy(_IMG[:2]), ember.from_numpy(_GRID[:2])

    def sample(i, g):
        return F.grid_sample(i, g, mode=mode, padding_mode=padding_mode, align_corners=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no "performance drop" fallback warning
        jac_i, jac_g = ember.func.jacrev(sample, argnums=(0, 1))(img, grid)
    assert tuple(jac_i.shape) == (2, 2, 4, 3) + tuple(img.shape)
    assert tuple(jac_g.shape) == (2, 2, 4, 3) + tuple(grid.shape)
    i, g = img.clone().requires_grad_(), grid.clone().requires_grad_()
    out = sample(i, g)
    for row in [(0, 1, 2, 0), (1, 0, 3, 2)]:
        cot = ember.zeros_like(out)
        cot[row] = 1.0
        want_i, want_g = ember.autograd.grad(out, [i, g], cot, retain_graph=True)
        np.testing.assert_allclose(jac_i[row].numpy(), want_i.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(jac_g[row].numpy(), want_g.numpy(), rtol=1e-6, atol=1e-6)
