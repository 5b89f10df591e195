"""Batch norm's training statistics against PyTorch's (which accumulates float32 sums in
double: ember's float32 sums round an ulp off in about half the channels), the running
variance from one value per channel, and the autograd node of batch_norm_update_stats."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _input(shape):
    return (np.random.default_rng(3).standard_normal(shape) * 3 + 5).astype(np.float32)


@pytest.mark.parametrize("shape", [(16, 64, 8, 8), (4, 50, 33, 17), (32, 100, 7)])
def test_saved_and_running_means_match_pytorchs(shape):
    x = _input(shape)
    got, want = [], []
    for T, out in ((ember, got), (torch, want)):
        rm, rv = T.zeros(shape[1]), T.ones(shape[1])
        saved = T.native_batch_norm(T.tensor(x), None, None, rm, rv, True, 0.1, 1e-5)[1]
        rm2 = T.zeros(shape[1])
        upd = T.batch_norm_update_stats(T.tensor(x), rm2, None, 0.1)[0]
        out += [saved.numpy(), rm.numpy(), upd.numpy(), rm2.numpy()]
    for g, w in zip(got, want):               # (an ulp apart in about half the channels)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=0)


def test_one_value_per_channel_running_variance_is_nan_as_pytorchs():
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    got, want = [], []
    for T, out in ((ember, got), (torch, want)):
        rm, rv = T.zeros(3), T.ones(3)
        T.native_batch_norm(T.tensor(x), None, None, rm, rv, True, 0.5, 1e-5)
        out += [rm.tolist(), np.isnan(rv.numpy()).tolist()]
    assert got == want


def test_update_stats_autograd_node_as_pytorchs():
    x = _input((4, 3, 5))

    def run(T):
        leaf = T.tensor(x, requires_grad=True)
        mean, var = T.batch_norm_update_stats(leaf, None, None, 0.1)
        flags = (mean.requires_grad, var.requires_grad, type(mean.grad_fn).__name__,
                 mean.grad_fn.name())
        try:
            T.autograd.grad(var.sum(), leaf)
        except RuntimeError as e:
            return flags, str(e)
        return flags, None
    assert run(ember) == run(torch)
