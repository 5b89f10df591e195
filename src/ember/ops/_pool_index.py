"""Gather and scatter-add over the flattened spatial plane of each (batch, channel) slice,
and the max of gathered windows.

Max pooling and unpooling address an element by its flat index within the trailing ``nd``
spatial dims (PyTorch's ``indices``). The gather and scatter-add ops are each other's
derivative, so every pooling gradient built on them can be differentiated again.
"""

import numpy as np

from ember._memory_format import like_input, like_input_1d
from ember.autograd.grad_mode import STATE as _GRAD
from ember.backend import bincount, combine_at, reads_stall
from ember.ops._registry import op

__all__ = ["_max_pool_backward", "_plane_gather", "_plane_scatter_add", "max_pool_grad",
           "plane_offsets", "window_max"]


def window_max(xp, windows, taps):
    """(max, flat index) of each window (the last axis of ``windows``; ``taps``, broadcast to
    it, holds each tap's flat plane index): the first maximum, or, as PyTorch's kernels
    choose, the last NaN."""
    pick = windows.argmax(axis=-1)[..., None]        # the first maximum, or the first NaN
    if windows.dtype.kind in "fV":
        nan = xp.isnan(windows)
        # (on a GPU without asking: reading whether there is one would wait for the device)
        if reads_stall(xp) or nan.any():
            last = windows.shape[-1] - 1 - nan[..., ::-1].argmax(axis=-1)[..., None]
            pick = xp.where(nan.any(axis=-1, keepdims=True), last, pick)
    values = xp.take_along_axis(windows, pick, axis=-1)[..., 0]
    index = xp.take_along_axis(xp.broadcast_to(taps, windows.shape), pick, axis=-1)[..., 0]
    return values, index


def plane_offsets(xp, lead, plane):
    """Per-slice offsets (shape ``lead`` + (1,)) that turn plane indices into global ones."""
    count = int(np.prod(lead, dtype=np.int64))
    return (xp.arange(count, dtype=np.int64) * plane).reshape(tuple(lead) + (1,))


def _per_slice(indices, lead):
    """How many indices each leading slice holds (reshape cannot infer it when empty)."""
    return int(np.prod(indices.shape[len(lead):], dtype=np.int64))


@op("_plane_gather(input, indices, nd)", inputs=2, method=False)
def _plane_gather(xp, x, indices, nd):
    """``input`` at the flat plane ``indices`` of its trailing ``nd`` dims (indices' shape)."""
    lead = x.shape[:x.ndim - nd]
    plane = int(np.prod(x.shape[x.ndim - nd:], dtype=np.int64))
    flat = indices.reshape(lead + (_per_slice(indices, lead),)) + plane_offsets(xp, lead, plane)
    return x.reshape(-1)[flat].reshape(indices.shape)


@_plane_gather.derivative
def _(grad, x, indices, nd):
    return _plane_scatter_add(grad, indices, tuple(x.shape[x.ndim - nd:])), None


@op("_plane_scatter_add(src, indices, size, unique=False)", inputs=2, method=False)
def _plane_scatter_add(xp, src, indices, size, unique):
    """Zeros of spatial ``size`` per slice with ``src`` added at its flat plane ``indices``
    (``unique``: no index repeats within a slice, so plain assignment does)."""
    nd = len(size)
    lead = src.shape[:src.ndim - nd]
    plane = int(np.prod(size, dtype=np.int64))
    total = int(np.prod(lead, dtype=np.int64)) * plane
    flat = (indices.reshape(lead + (_per_slice(indices, lead),))
            + plane_offsets(xp, lead, plane)).reshape(-1)
    if unique:
        out = xp.zeros(total, dtype=src.dtype)
        out[flat] = src.reshape(-1)
    elif src.dtype.kind == "c":
        out = xp.zeros(total, dtype=src.dtype)
        combine_at(xp, np.add, out, flat, src.reshape(-1))
    else:       # bincount sums repeats far faster than add.at (it works in float64)
        out = bincount(xp, flat, src.reshape(-1), minlength=total).astype(src.dtype,
                                                                          copy=False)
    return out.reshape(tuple(lead) + tuple(size))


@_plane_scatter_add.derivative
def _(grad, src, indices, size, unique):
    return _plane_gather(grad, indices, len(size)), None


# PyTorch's backward kernels of the max poolings, by kind ({} is the pooled dims' count)
_BACKWARD_NODES = {"max_pool": "MaxPool{}DWithIndicesBackwardBackward0",
                   "adaptive_max_pool": "AdaptiveMaxPool{}DBackwardBackward0",
                   "fractional_max_pool": "FractionalMaxPool{}DBackwardBackward0"}


# the kernels that give a channels-last input a channels-last gradient
_LAID_OUT = {("max_pool", 1), ("max_pool", 2), ("max_pool", 3), ("adaptive_max_pool", 1),
             ("adaptive_max_pool", 2)}


@op("_max_pool_backward(grad_output, input, indices, nd, kind, unique=False)", inputs=3,
    method=False)
def _max_pool_backward(xp, grad, x, indices, nd, kind, unique):
    """The input gradient of a max pooling of ``kind`` over ``input``'s trailing ``nd`` dims
    (PyTorch's ``max_pool2d_with_indices_backward`` and kin): ``grad_output`` added at the
    maxima's flat plane ``indices`` (``unique``: the windows do not overlap), laid out as
    PyTorch's kernels lay it: channels-last for a channels-last input where they take one."""
    g = _plane_scatter_add.forward(xp, grad, indices, x.shape[x.ndim - nd:], unique)
    if (kind, nd) not in _LAID_OUT:
        return g
    return like_input_1d(xp, x, g) if nd == 1 else like_input(xp, x, g)


_max_pool_backward.nondifferentiable("indices")


@_max_pool_backward.named_by
def _(flat, params, outputs):
    return _BACKWARD_NODES[params[1]].format(params[0])


@_max_pool_backward.derivative
def _(gg, grad, x, indices, nd, kind, unique):
    # the input only places the gradient: its own derivative is zero (as PyTorch's, not None)
    return _plane_gather(gg, indices, nd), x.new_zeros(x.shape), None


def max_pool_grad(grad, x, indices, nd, kind, unique=False):
    """The input gradient of a max pooling (see ``_max_pool_backward``). 1-D poolings go
    through the 2-D kernel as PyTorch's do, so that a graph of it (under ``create_graph``)
    has PyTorch's unsqueeze, 2-D node and squeeze."""
    if nd != 1 or not _GRAD.grad_enabled:
        return _max_pool_backward(grad, x, indices, nd, kind, unique)
    return _max_pool_backward(grad.unsqueeze(-2), x.unsqueeze(-2), indices.unsqueeze(-2), 2,
                              kind, unique).squeeze(-2)
