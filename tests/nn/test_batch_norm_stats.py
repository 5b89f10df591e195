"""The synchronized batch-norm blocks (``ember.batch_norm_*``): CUDA-only as in PyTorch, so
their math is checked here through the compositions behind them, on the CPU: two "processes"
holding halves of a batch must reproduce F.batch_norm of the whole batch, forward and
backward."""

import numpy as np
import pytest

import ember
from ember.ops import batch_norm_stats as blocks

CUDA_ONLY = ["batch_norm_stats", "batch_norm_elemt", "batch_norm_gather_stats",
             "batch_norm_gather_stats_with_counts", "batch_norm_backward_reduce",
             "batch_norm_backward_elemt"]


def _args(name):
    x, c = ember.ones(4, 3, 2), ember.ones(3)
    return {"batch_norm_stats": (x, 1e-5), "batch_norm_elemt": (x, c, c, c, c, 1e-5),
            "batch_norm_gather_stats": (x, ember.ones(2, 3), ember.ones(2, 3), c, c, 0.1,
                                        1e-5, 4),
            "batch_norm_gather_stats_with_counts": (x, ember.ones(2, 3), ember.ones(2, 3), c,
                                                    c, 0.1, 1e-5, ember.ones(2)),
            "batch_norm_backward_reduce": (x, x, c, c, c, True, True, True),
            "batch_norm_backward_elemt": (x, x, c, c, c, c, c,
                                          ember.tensor([4, 4], dtype=ember.int32))}[name]


@pytest.mark.parametrize("name", CUDA_ONLY)
def test_cuda_only_blocks_refuse_cpu_tensors(name):
    with pytest.raises(NotImplementedError,
                       match=f"Could not run 'aten::{name}' with arguments from the 'CPU' "
                             f"backend"):
        getattr(ember, name)(*_args(name))


def _two_processes():
    ember.manual_seed(0)
    x = ember.randn(6, 3, 4, dtype=ember.float64)
    return x, (x[:2], x[2:])


def test_gathered_statistics_normalize_as_batch_norm_of_the_whole_batch():
    x, parts = _two_processes()
    w, b = ember.randn(3, dtype=ember.float64), ember.randn(3, dtype=ember.float64)
    eps, momentum = 1e-5, 0.3
    local = [blocks.stats(p, eps) for p in parts]
    mean, invstd = (ember.stack(s) for s in zip(*local))
    rm, rv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    counts = ember.tensor([p.numel() / 3 for p in parts], dtype=ember.float64)
    gmean, ginvstd = blocks.gather_stats_with_counts(x, mean, invstd, rm, rv, momentum, eps,
                                                     counts)
    out = ember.cat([blocks.elemt(p, w, b, gmean, ginvstd, eps) for p in parts])
    want_rm, want_rv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    want = ember.nn.functional.batch_norm(x, want_rm, want_rv, w, b, True, momentum, eps)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rm.numpy(), want_rm.numpy(), rtol=1e-10)
    np.testing.assert_allclose(rv.numpy(), want_rv.numpy(), rtol=1e-10)


def test_reduced_gradients_give_batch_norms_input_weight_and_bias_gradients():
    x, parts = _two_processes()
    w = ember.randn(3, dtype=ember.float64, requires_grad=True)
    b = ember.randn(3, dtype=ember.float64, requires_grad=True)
    g = ember.randn(6, 3, 4, dtype=ember.float64)
    leaf = x.clone().requires_grad_()
    ember.nn.functional.batch_norm(leaf, None, None, w, b, True, 0.1, 1e-5).backward(g)
    mean, invstd = blocks.stats(x, 1e-5)
    sums = [blocks.backward_reduce(gp, p, mean, invstd, w.detach(), True, True, True)
            for gp, p in zip((g[:2], g[2:]), parts)]
    sum_dy, sum_dy_xmu, gw, gb = (sum(column) for column in zip(*sums))
    count = ember.tensor([8, 16], dtype=ember.int32)
    gx = ember.cat([blocks.backward_elemt(gp, p, mean, invstd, w.detach(), sum_dy, sum_dy_xmu,
                                          count) for gp, p in zip((g[:2], g[2:]), parts)])
    np.testing.assert_allclose(gx.numpy(), leaf.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gw.numpy(), w.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(gb.numpy(), b.grad.numpy(), rtol=1e-10)


def test_backward_reduce_leaves_out_what_is_not_asked_for():
    x, _ = _two_processes()
    mean, invstd = blocks.stats(x, 1e-5)
    got = blocks.backward_reduce(x, x, mean, invstd, None, False, False, True)
    assert got[:3] == (None, None, None) and got[3].shape == (3,)


def test_update_stats_updates_the_running_statistics_in_place():
    x = ember.tensor([[1.0, 2.0], [3.0, 6.0]])
    rm, rv = ember.zeros(2), ember.ones(2)
    mean, var = ember.batch_norm_update_stats(x, rm, rv, 0.5)
    assert mean.tolist() == [2.0, 4.0] and var.tolist() == [1.0, 4.0]
    assert rm.tolist() == [1.0, 2.0] and rv.tolist() == [1.5, 4.5]     # unbiased: 2 and 8
    _, _ = ember.batch_norm_update_stats(x[:1], rm, rv, 1.0)
    assert np.isnan(rv.numpy()).all()          # one sample: no unbiased variance


def _batch_statistics(x, how):
    """(mean, biased var) of ``x`` from batch_norm_update_stats or native_batch_norm."""
    if how == "update_stats":
        return ember.batch_norm_update_stats(x, None, None, 0.1)
    _, mean, invstd = ember.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    return mean, 1 / invstd.double() ** 2 - 1e-5


@pytest.mark.parametrize("how", ["update_stats", "native_batch_norm"])
def test_float32_statistics_agree_with_a_double_accumulation(how):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((16, 200, 8, 8)) * 3 + 5).astype(np.float32)
    mean, var = _batch_statistics(ember.tensor(x), how)
    np.testing.assert_allclose(mean.numpy(), x.mean(axis=(0, 2, 3), dtype=np.float64),
                               rtol=1e-6)
    np.testing.assert_allclose(var.numpy(), x.astype(np.float64).var(axis=(0, 2, 3)),
                               rtol=1e-5)


def test_native_batch_norm_of_one_value_per_channel_gives_a_nan_running_variance():
    rm, rv = ember.zeros(3), ember.ones(3)
    x = ember.tensor([[1.0, 2.0, 3.0]])
    ember.native_batch_norm(x, None, None, rm, rv, True, 0.5, 1e-5)
    assert rm.tolist() == [0.5, 1.0, 1.5] and np.isnan(rv.numpy()).all()


def test_update_stats_outputs_require_grad_and_refuse_backward():
    x = ember.randn(4, 3, 5, requires_grad=True)
    mean, var = ember.batch_norm_update_stats(x, ember.zeros(3), ember.ones(3), 0.1)
    assert mean.requires_grad and var.requires_grad
    assert type(mean.grad_fn).__name__ == "NotImplemented" and var.grad_fn is mean.grad_fn
    with pytest.raises(RuntimeError,
                       match="^derivative for aten::batch_norm_update_stats is not "
                             "implemented$"):
        (mean + var).sum().backward()
    with ember.no_grad():
        assert not ember.batch_norm_update_stats(x, None, None, 0.1)[0].requires_grad
