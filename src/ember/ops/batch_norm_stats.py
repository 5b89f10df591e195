"""The building blocks of synchronized batch norm (``torch.batch_norm_*``): per-process
statistics, their combination across processes, the normalization with given statistics,
and the two halves of its backward.

``batch_norm_update_stats`` runs on every device. PyTorch has the others for CUDA only (its
CPU build raises "Could not run 'aten::<name>' ... 'CPU' backend"), and so does ember: they
are compositions of ember ops, refused for tensors off CUDA.
"""

import numbers

import numpy as np

import ember
from ember.ops._registry import op
from ember.ops.normalization import (
    _channel_rows,
    _check_mixed,
    _float_input,
    channel_stats,
    update_running_stats,
)


def _check_momentum(momentum):
    # (a default of None only so that the running statistics may be None: PyTorch's takes none)
    if momentum is None:
        raise TypeError('batch_norm_update_stats() missing 1 required positional arguments: '
                        '"momentum"')
    if not isinstance(momentum, (numbers.Real, np.number)):
        raise TypeError(f"batch_norm_update_stats(): argument 'momentum' (position 4) must be "
                        f"float, not {type(momentum).__name__}")


@op("batch_norm_update_stats(input, running_mean=None, running_var=None, momentum=None)",
    inputs=3, method=False, grad_fn_name="NotImplemented")
def batch_norm_update_stats(xp, x, rm, rv, momentum):
    """The mean and the biased variance of ``input`` over all dims but dim 1; updates
    ``running_mean`` and ``running_var`` (unbiased) in place with ``momentum``."""
    _check_momentum(momentum)
    if x.ndim < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [-{x.ndim}, "
                         f"{x.ndim - 1}], but got 1)")
    if not x.size:
        raise RuntimeError(f"input tensor must have at least one element, but got "
                           f"input_sizes = {list(x.shape)}")
    dtype = x.dtype
    x = _float_input(x, "batch_norm_update_stats_cpu")
    _check_mixed(xp, dtype, rm, rv)
    x3 = x.reshape(_channel_rows(x.shape))
    mean, var, _ = channel_stats(xp, x3)
    update_running_stats(xp, rm, rv, mean, var, x3.shape[0] * x3.shape[2], momentum)
    stats = next((p.dtype for p in (rm, rv) if p is not None), dtype)
    return mean.astype(stats), var.astype(stats)


batch_norm_update_stats.writes_inputs(1, 2)


@batch_norm_update_stats.derivative
def _(grads, *args):
    # PyTorch records a node that refuses backward
    raise RuntimeError("derivative for aten::batch_norm_update_stats is not implemented")


# --- the CUDA-only blocks ----------------------------------------------------------------------

def _require_cuda(name, *tensors):
    for t in tensors:
        if isinstance(t, ember.Tensor) and t.device.type != "cuda":
            backend = "CPU" if t.device.type == "cpu" else t.device.type.capitalize()
            raise NotImplementedError(
                f"Could not run 'aten::{name}' with arguments from the '{backend}' backend. "
                f"This could be because the operator doesn't exist for this backend, or was "
                f"omitted during the selective/custom build process (if using custom build).")


def _channel_view(v, ndim):
    """A per-channel vector (C,) shaped to broadcast against an input of ``ndim`` dims."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _reduce_dims(x):
    return (0,) + tuple(range(2, x.ndim))


def stats(input, eps):
    """Per-channel mean and ``1 / sqrt(biased var + eps)`` (``batch_norm_stats``)."""
    mean = input.mean(_reduce_dims(input))
    var = input.var(_reduce_dims(input), correction=0)
    return mean, (var + eps).rsqrt()


def elemt(input, weight, bias, mean, invstd, eps):
    """``(input - mean) * invstd * weight + bias`` per channel (``batch_norm_elemt``)."""
    out = (input - _channel_view(mean, input.ndim)) * _channel_view(invstd, input.ndim)
    if weight is not None:
        out = out * _channel_view(weight, input.ndim)
    if bias is not None:
        out = out + _channel_view(bias, input.ndim)
    return out


def gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps,
                             counts):
    """The global mean and invstd from each process's (mean, invstd, count) rows, updating
    the running statistics in place (``batch_norm_gather_stats_with_counts``)."""
    counts = counts.to(mean.dtype).reshape(-1, 1)
    total = counts.sum(0)
    global_mean = (mean * counts).sum(0) / total
    local_var = (1 / invstd.square() - eps)
    var = (counts * (local_var + (mean - global_mean).square())).sum(0) / total
    with ember.no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(momentum * global_mean.to(running_mean.dtype))
        if running_var is not None:
            unbiased = var * total / (total - 1)
            running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
    return global_mean, (var + eps).rsqrt()


def backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
    """Per-channel ``sum(grad_out)``, ``sum(grad_out * (input - mean))`` and the weight and
    bias gradients, each only when asked for (``batch_norm_backward_reduce``)."""
    dims = _reduce_dims(input)
    sum_dy = grad_out.sum(dims)
    sum_dy_xmu = (grad_out * (input - _channel_view(mean, input.ndim))).sum(dims)
    grad_weight = sum_dy_xmu * invstd if weight_g else None
    grad_bias = sum_dy if bias_g else None
    if not input_g:
        sum_dy = sum_dy_xmu = None
    return sum_dy, sum_dy_xmu, grad_weight, grad_bias


def backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    """The input gradient from the globally reduced sums (``batch_norm_backward_elemt``);
    ``count`` holds each process's element count per channel."""
    n = count.sum().to(input.dtype)
    view = lambda v: _channel_view(v, input.ndim)  # noqa: E731
    mean_dy, mean_dy_xmu = view(sum_dy) / n, view(sum_dy_xmu) / n
    scale = view(invstd) if weight is None else view(invstd * weight)
    xmu = input - view(mean)
    return (grad_out - mean_dy - xmu * view(invstd).square() * mean_dy_xmu) * scale


def _cuda_only(name, compute):
    def function(*args, **kwargs):
        _require_cuda(name, *args, *kwargs.values())
        return compute(*args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = compute.__doc__
    return function


def _gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps, count):
    """``batch_norm_gather_stats_with_counts`` with the same ``count`` for every process."""
    counts = ember.full((mean.shape[0],), float(count), dtype=mean.dtype, device=mean.device)
    return gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum,
                                    eps, counts)


PUBLIC = {name: _cuda_only(name, compute) for name, compute in (
    ("batch_norm_stats", stats), ("batch_norm_elemt", elemt),
    ("batch_norm_gather_stats", _gather_stats),
    ("batch_norm_gather_stats_with_counts", gather_stats_with_counts),
    ("batch_norm_backward_reduce", backward_reduce),
    ("batch_norm_backward_elemt", backward_elemt))}
