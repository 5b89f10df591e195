"""Adaptive average and max pooling: windows sized so the output has a given size."""

import numpy as np

from ember import _dtype as D
from ember._memory_format import (averaged_grad_order, in_order, like_input, like_input_1d,
                                  suggested_order)

from ember._tensor import _make
from ember.backend import XP_BY_ARRAY_TYPE, device_copy, loud_fp, quiet_fp, xp_of
from ember.ops._max_sweep import max_sweep
from ember.ops._op_errors import OpValueError
from ember.ops._pool_args import adaptive_bounds, adaptive_mats, output_size_arg, reject_dtype
from ember.ops._half_adaptive_avg import is_half_cpu, pool2d, pool3d, pool_backward
from ember.ops._inplace import _rename_inplace_node
from ember.ops._kernel_reads import through_input
from ember.ops._pool_index import max_pool_grad, window_max
from ember.ops._recording import _mark_view, _record
from ember.ops._registry import REGISTRY, op, rename_node
from ember.ops.arithmetic import _div_scalar
from ember.ops.as_strided import _KEPT, _Place, _extent
from ember.ops._separable import _along_dims, apply_mats, built_once, transposed

__all__ = ["adaptive_avg_pool1d", "adaptive_max_pool1d"]

_RANKS = {1: "2D or 3D", 2: "3D or 4D", 3: "4D or 5D"}


def _check(kind, nd, x, output_size):
    """The checked output size of an adaptive pool of ``x`` (NumPy array)."""
    name = f"adaptive_{kind}_pool{nd}d"
    kernel = f"adaptive_{kind}_pool2d" if nd < 3 else f"adaptive_{kind}_pool3d_cpu"
    if nd == 1:
        if x.ndim not in (2, 3):
            raise RuntimeError(f"Expected 2 to 3 dimensions, but got {x.ndim}-dimensional "
                               f"tensor for argument #1 'self' (while checking arguments for "
                               f"{name})")
        out = output_size_arg(name, output_size, x.shape, 1)
        if kind == "avg":       # PyTorch's avg pools a (.., 1, L) view with its 2-d kernel
            shown, name2 = x.shape[:-1] + (1,) + x.shape[-1:], "adaptive_avg_pool2d"
        else:
            shown, name2 = x.shape, name
    else:
        colon = ":" if kind == "max" else ""
        if x.ndim not in (nd + 1, nd + 2):
            raise RuntimeError(f"{name}(): Expected {_RANKS[nd]} tensor, but got{colon} "
                               f"{list(x.shape)}")
        if isinstance(output_size, (tuple, list)) and len(output_size) >= x.ndim:
            raise OpValueError(f"Input dimension should be at least {len(output_size) + 1}")
        if kind == "max" and isinstance(output_size, (tuple, list)) and len(output_size) != nd:
            raise RuntimeError(f"{name}(): internal error: output_size.size() must be {nd}")
        out = output_size_arg(name, output_size, x.shape, nd)
        shown, name2 = x.shape, name
    # PyTorch takes the mean before its kernel's checks: complex works, empty planes give NaN
    if kind == "avg" and all(o == 1 for o in out):
        if x.dtype.kind not in "fcV":
            raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be "
                               f"either a floating point or complex dtype. Got: "
                               f"{D.FROM_NUMPY[x.dtype]._torch_name}")
        return out
    for d in range(len(shown) - nd, len(shown)):      # channels may be empty
        if shown[d] == 0:
            raise RuntimeError(f"{name2}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(shown)} with dimension "
                               f"{d} being empty")
    if nd == 2 and x.ndim == 4 and suggested_order(x) is not None:
        kernel += "_channels_last"
    # (the 2-d average kernel skips an empty output)
    if nd == 3 or kind == "max" or int(np.prod(x.shape[:x.ndim - nd])) * int(np.prod(out)):
        reject_dtype(kernel, x.dtype, "fV")
    return out


def _adaptive_avg(xp, x, nd, output_size):
    out = _check("avg", nd, x, output_size)
    if all(o == 1 for o in out):        # global pooling: a GEMV beats a short-row mean
        lead, plane = x.shape[:x.ndim - nd], int(np.prod(x.shape[x.ndim - nd:]))
        if not plane:                   # the mean of nothing
            return xp.full(lead + (1,) * nd, complex(np.nan, np.nan) if x.dtype.kind == "c"
                           else np.nan, x.dtype)
        work = x if x.dtype.itemsize > 2 else x.astype(np.float32)
        mean = work.reshape(lead + (plane,)) @ xp.full(plane, 1.0 / plane, work.dtype)
        return mean.astype(x.dtype, copy=False).reshape(lead + (1,) * nd)
    shape = x.shape[:x.ndim - nd] + tuple(out)
    if not int(np.prod(shape)):
        return xp.empty(shape, x.dtype)
    if is_half_cpu(xp, x.dtype):        # (rounded as PyTorch's CPU kernels round)
        return pool3d(x, out) if nd == 3 else pool2d(x, out)
    return apply_mats(xp, x, adaptive_mats(x.shape[-nd:], out))


def _mean_of_row(x):
    """A 1-D pool to one as PyTorch composes it: the mean over the last two dims of
    ``x.unsqueeze(-2)``, squeezed (-2). Its three nodes are recorded here on one mean,
    without further dispatch (each would cost what the whole call did)."""
    mean, unsqueeze, squeeze = REGISTRY["mean"], REGISTRY["unsqueeze"], REGISTRY["squeeze"]
    xp = XP_BY_ARRAY_TYPE[type(x._data)]
    row = _make(unsqueeze.forward(xp, x._data, -2))
    _mark_view(unsqueeze, x, (-2,), row)
    _record(unsqueeze, (x,), None, (-2,), row)
    # (PyTorch's mean keeps a channels-last row's layout)
    total = _make(like_input(xp, row._data, _undispatched_mean(mean, xp, row._data, _ROW_DIMS)))
    _record(mean, (row,), None, (_ROW_DIMS, True, None), total)
    out = _make(squeeze.forward(xp, total._data, -2))
    _mark_view(squeeze, total, (-2,), out)
    _record(squeeze, (total,), None, (-2,), out)
    return out


_ROW_DIMS = (-1, -2)


def _undispatched_mean(mean, xp, a, dims):
    """The mean op's forward over ``dims`` (kept), as quiet as a dispatched call (NaN for an
    empty plane, unwarned)."""
    token = quiet_fp()
    try:
        return mean.forward(xp, a, dims, True, None)
    finally:
        loud_fp(token)


def _global_mean(nd):
    dims = tuple(range(-1, -nd - 1, -1))
    # for a channels_last input: the mean's size-1 dims, and the axes that view an
    # (n, 1.., 1, c) array as a channels_last (n, c, 1.., 1) one
    ones, axes = (1,) * nd, (0, nd + 1) + tuple(range(1, nd + 1))

    def composed(inputs, params):
        """PyTorch's graph of pooling to ones: a mean (of a (.., 1, L) view, for 1-D), which
        saves the input's size only, where its pooling kernel saves the input."""
        x, output_size = inputs[0], params[0]
        if _pooled_to(output_size, x.shape) != 1:
            return NotImplemented
        _check("avg", nd, x._data, output_size)
        if nd == 1:
            return _mean_of_row(x)
        if x.ndim == nd + 2 and suggested_order(x._data) is not None:
            return _restrided_mean(x, dims, ones, axes)
        return x.mean(dims, keepdim=True)
    return composed


def _restrided_mean(x, dims, ones, axes):
    """The mean over a channels_last input's spatial ``dims``, kept, as PyTorch gives it: a
    mean restrided in place by ``as_strided_`` to channels_last strides. Its two nodes
    (MeanBackward1, AsStridedBackward1) and the in-place change's traces (version 1, the undo
    step, the storage kept) are made here, without further dispatch (a dispatched
    ``as_strided_`` tripled the call's cost)."""
    mean, as_strided = REGISTRY["mean"], REGISTRY["as_strided"]
    xp = XP_BY_ARRAY_TYPE[type(x._data)]
    total = _make(_undispatched_mean(mean, xp, x._data, dims))
    _record(mean, (x,), None, (dims, True, None), total)
    a = total._data
    n, c = a.shape[:2]
    item = a.itemsize
    # where ``a`` lies in its own storage (see as_strided's NOTE [Storage geometry])
    place = _Place(0, 0, tuple([s // item for s in a.strides]),
                   a.nbytes if a.flags.c_contiguous else _extent(a))
    params = ((n, c) + ones, (c, 1) + (c,) * len(ones), place)
    restrided = a.reshape((n,) + ones + (c,)).transpose(axes)
    if restrided.strides != tuple([s * item for s in params[1]]):
        restrided = as_strided.forward(xp, a, *params)      # (an odd layout, or empty)
    out = _make(restrided)
    _rename_inplace_node(_record(as_strided, (total,), None, params, out))
    out._bump_version()
    out._meta = {"view_undo": [(REGISTRY["view"], (a.shape,), None)], _KEPT: a}
    return out


def _avg_op(nd, namespace):
    def forward(xp, x, output_size):
        out = _adaptive_avg(xp, x, nd, output_size)
        if nd == 1:
            return like_input_1d(xp, x, out)
        if nd == 2 or _pooled_to(output_size, x.shape) == 1:  # (PyTorch's 3-D kernel: row-major)
            return like_input(xp, x, out)
        return out
    forward.__doc__ = f"{nd}-D adaptive average pooling to ``output_size``."
    registered = op(f"adaptive_avg_pool{nd}d(input, output_size)", method=False,
                    namespace=namespace,
                    grad_fn_name=f"AdaptiveAvgPool{nd}DBackward0")(forward)
    registered.composed_when_recording(_global_mean(nd))

    @registered.derivative
    def _(grad, x, output_size):
        size = tuple(x.shape[x.ndim - nd:])
        if all(o == 1 for o in grad.shape[grad.ndim - nd:]):     # a mean's, as PyTorch's
            gx = _div_scalar(grad.expand(tuple(x.shape)), float(np.prod(size)))
            return rename_node(gx, "SqueezeBackward1") if nd == 1 else gx
        out = tuple(grad.shape[grad.ndim - nd:])
        if 0 in out:
            _refuse_empty_grad(nd, tuple(grad.shape))
        # PyTorch's backward kernel (a 1-D pool: a squeezed 2-D one, as the forward)
        name = "SqueezeBackward1" if nd == 1 else f"AdaptiveAvgPool{nd}DBackwardBackward0"
        order = averaged_grad_order(nd, x._data)
        gx = _along_dims(grad, transposed(adaptive_mats(size, out)), order)
        if is_half_cpu(xp_of(gx._data), gx._data.dtype):   # its values, as PyTorch rounds
            exact = pool_backward(grad._data, size)
            gx._data = in_order(np, exact, order) if order and len(order) == exact.ndim else exact
        gx = rename_node(gx, name)
        return through_input(gx, x, name)
    return registered


def _refuse_empty_grad(nd, shape):
    """PyTorch's backward kernel refuses an empty output (its forward gave it one)."""
    if nd == 1:                         # (a 1-D pool's: a (.., 1, L) view's 2-D one)
        shape = shape[:-1] + (1,) + shape[-1:]
    spatial = len(shape) - max(nd, 2)
    dim = spatial + shape[spatial:].index(0)
    raise RuntimeError(f"adaptive_avg_pool{max(nd, 2)}d_backward(): Expected grad_output to "
                       f"have non-zero size for non-batch dimensions, but grad_output has sizes "
                       f"{list(shape)} with dimension {dim} being empty")


@built_once
def _window_taps(size, out):
    """The plane index of each (output position, tap) of adaptive windows: shape out + (taps,),
    short windows repeating their last element."""
    nd = len(size)
    flat = np.zeros(out + (1,) * nd, np.int64)
    stride = 1
    for i in range(nd - 1, -1, -1):
        lo, hi = adaptive_bounds(size[i], out[i])
        taps = np.minimum(lo[:, None] + np.arange((hi - lo).max()), hi[:, None] - 1)
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = taps.shape
        flat = flat + taps.reshape(shape) * stride
        stride *= size[i]
    return flat.reshape(out + (-1,))


def _adaptive_max(xp, x, nd, output_size):
    out = _check("max", nd, x, output_size)
    size = x.shape[-nd:]
    lead = x.shape[:-nd]
    if 0 in out:
        return xp.zeros(lead + out, x.dtype), xp.zeros(lead + out, np.int64)
    k = tuple(n // o for n, o in zip(size, out))
    if all(n % o == 0 for n, o in zip(size, out)) and np.prod(k) <= 16:
        # equal small windows: the max-pooling sweep (a few passes over strided views)
        return max_sweep(xp, x, nd, k, k, (0,) * nd, (1,) * nd, out)
    flat = device_copy(x, _window_taps(size, out), np.int64)
    plane = int(np.prod(size, dtype=np.int64))
    return window_max(xp, x.reshape(lead + (plane,))[..., flat], flat)


def _max_op(nd, name, namespace):
    # F.*_with_indices take (and ignore) return_indices, as PyTorch's do
    extra = ", return_indices=False" if namespace else ""

    def forward(xp, x, output_size, *unused):
        out = _adaptive_max(xp, x, nd, output_size)
        if nd == 1:
            return like_input_1d(xp, x, out)
        return like_input(xp, x, out) if nd == 2 else out   # (PyTorch's 3-D one: row-major)
    forward.__doc__ = f"{nd}-D adaptive max pooling: (values, flat spatial indices)."
    registered = op(f"{name}(input, output_size{extra})", method=False,
                    namespace=namespace, grad_fn_name=f"AdaptiveMaxPool{nd}DBackward0")(forward)

    @registered.derivative(outputs=(1,))
    def _(grads, x, output_size, *unused, out):
        size = tuple(x.shape[x.ndim - nd:])
        disjoint = all(n % o == 0 for n, o in zip(size, out[1].shape[out[1].ndim - nd:]))
        return max_pool_grad(grads[0], x, out[1], nd, "adaptive_max_pool", disjoint)
    return registered


adaptive_avg_pool1d = _avg_op(1, None)
for _avg in (adaptive_avg_pool1d, _avg_op(2, "nn.functional"), _avg_op(3, "nn.functional")):
    _avg.named_by(lambda flat, params, out, _base=_avg.node_class.__name__:
                  "SqueezeBackward1" if _base.endswith("1DBackward0") else     # (as 2-D)
                  _base if _pooled_to(params[0], flat[0].shape) != 1 else "MeanBackward1")


def _pooled_to(output_size, shape=()):
    """1 when every output size is 1 (PyTorch then takes a mean), else None; a None size is
    the input's (of ``shape``)."""
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,)
    sizes = [shape[len(shape) - len(sizes) + i] if s is None and len(shape) >= len(sizes) else s
             for i, s in enumerate(sizes)]
    return 1 if all(s == 1 for s in sizes) else None
adaptive_max_pool1d = _max_op(1, "adaptive_max_pool1d", None)
adaptive_max_pool1d.name_nodes("SqueezeBackward1")     # PyTorch pools 1-D inputs as 2-D
_max_op(2, "adaptive_max_pool2d_with_indices", "nn.functional")
_max_op(3, "adaptive_max_pool3d_with_indices", "nn.functional")


def _functional_max(nd):
    target = REGISTRY["adaptive_max_pool1d" if nd == 1 else
                      f"nn.functional.adaptive_max_pool{nd}d_with_indices"].function

    def adaptive_max_pool(input, output_size, return_indices=False):
        out = target(input, output_size)
        return out if return_indices else out[0]
    adaptive_max_pool.__name__ = adaptive_max_pool.__qualname__ = f"adaptive_max_pool{nd}d"
    adaptive_max_pool.__module__ = "ember.nn.functional"
    adaptive_max_pool.__doc__ = f"{nd}-D adaptive max pooling (optionally with indices)."
    return adaptive_max_pool


FUNCTIONAL = {f"adaptive_max_pool{nd}d": _functional_max(nd) for nd in (1, 2, 3)}


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """1-D adaptive max pooling: (values, indices); ``return_indices`` is ignored."""
    return REGISTRY["adaptive_max_pool1d"].function(input, output_size)


adaptive_max_pool1d_with_indices.__module__ = "ember.nn.functional"
FUNCTIONAL.update({"adaptive_avg_pool1d": "adaptive_avg_pool1d",
                   "adaptive_max_pool1d_with_indices": adaptive_max_pool1d_with_indices})
