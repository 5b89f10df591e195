"""Class targets of volumetric inputs (round 27): a (C, 1) class weight counts as (C,) for
inputs of 3 or more dims, and such inputs name their target-size errors as PyTorch's nll_nd."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _weighted_ce_reference(x, t, w):
    """The weighted mean cross entropy of (N, C, *d) logits ``x`` in float64."""
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    picked = np.take_along_axis(logp, t[:, None], axis=1)[:, 0]
    wt = w[t]
    return -(picked * wt).sum() / wt.sum()


@pytest.mark.parametrize("shape", [(2, 3, 8), (2, 3, 4, 2), (2, 3, 2, 2, 2)])
def test_column_weight_counts_as_a_vector(shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    t = rng.integers(0, 3, shape[:1] + shape[2:])
    w = np.array([0.5, 1.0, 2.0], np.float32)
    expected = _weighted_ce_reference(x.astype(np.float64), t, w.astype(np.float64))
    xt = ember.from_numpy(x)
    for loss in (F.cross_entropy(xt, ember.from_numpy(t), weight=ember.from_numpy(w[:, None])),
                 F.nll_loss(F.log_softmax(xt, 1), ember.from_numpy(t),
                            weight=ember.from_numpy(w[:, None]))):
        np.testing.assert_allclose(loss.item(), expected, rtol=1e-5)


def test_volumetric_target_errors():
    x = ember.zeros(2, 3, 2, 2, 2)
    with pytest.raises(RuntimeError, match=r"^Expected target size \[2, 2, 2, 2\], got "
                                           r"\[2, 2, 2, 5\]$"):
        F.cross_entropy(x, ember.zeros(2, 2, 2, 5))
    with pytest.raises(RuntimeError, match="^only batches of spatial targets supported "
                                           r"\(3D tensors\) but got targets of dimension: 2$"):
        F.nll_loss(ember.zeros(2, 3, 2, 2), ember.zeros(2, 2, dtype=ember.long))
    with pytest.raises(RuntimeError, match="^weight tensor should be defined either for all "
                                           "or no classes$"):
        F.nll_loss(x, ember.zeros(2, 2, 2, 2, dtype=ember.long), weight=ember.ones(4))


@pytest.mark.parametrize("shape", [(2, 3, 8), (2, 3, 4, 2), (2, 3, 2, 2, 2)])
def test_column_weight_with_smoothing_unless_mean(shape):
    """With label smoothing a (C, 1) weight still counts as (C,) summed or unreduced; PyTorch's
    mean fails on it, and a Byte target is refused before that (nll_loss2d takes Long)."""
    rng = np.random.default_rng(1)
    x = ember.from_numpy(rng.standard_normal(shape).astype(np.float32))
    t = ember.from_numpy(rng.integers(0, 3, shape[:1] + shape[2:]))
    w = ember.tensor([0.5, 1.0, 2.0])
    for reduction in ("sum", "none"):
        column = F.cross_entropy(x, t, weight=w[:, None], reduction=reduction,
                                 label_smoothing=0.1)
        flat = F.cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=0.1)
        np.testing.assert_array_equal(column.numpy(), flat.numpy())
    with pytest.raises(RuntimeError, match="^Index tensor must have the same number of "):
        F.cross_entropy(x, t, weight=w[:, None], label_smoothing=0.1)
    with pytest.raises(RuntimeError, match="^expected scalar type Long but found Byte$"):
        F.cross_entropy(x, t.to(ember.uint8), weight=w[:, None], label_smoothing=0.1)


def test_spatial_check_order_and_node_names():
    x = ember.zeros(2, 3, 2, 2, requires_grad=True)
    bad = ember.zeros(2, 2, 5, dtype=ember.uint8)
    with pytest.raises(RuntimeError, match="^weight tensor should be defined either for all "
                                           "or no classes$"):
        F.nll_loss(x, bad, weight=ember.ones(4))
    with pytest.raises(RuntimeError, match=r"^size mismatch \(got input: \[2, 3, 2, 2\] , "
                                           r"target: \[2, 2, 5\]$"):
        F.nll_loss(x, bad)
    for ndim, reduction, name in [(3, "none", "ViewBackward0"), (3, "sum", "NllLoss2DBackward0"),
                                  (4, "none", "NllLoss2DBackward0"),
                                  (5, "none", "ViewBackward0"), (2, "none", "NllLossBackward0")]:
        xs = ember.zeros((2, 3) + (2,) * (ndim - 2), requires_grad=True)
        ts = ember.zeros((2,) + (2,) * (ndim - 2), dtype=ember.long)
        assert F.nll_loss(xs, ts, reduction=reduction).grad_fn.name() == name
        assert F.cross_entropy(xs, ts, reduction=reduction).grad_fn.name() == name
