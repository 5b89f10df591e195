"""Fractional max pooling (``F.fractional_max_pool2d/3d``, Graham 2014): max over windows of
``kernel_size`` whose starts step through the input pseudo-randomly, so that an input of any
size pools to ``output_size``.

Along a dim of size n, with window k and m outputs, output i's window starts at
``floor((i + u) a) - floor(u a)``, ``a = (n - k) / (m - 1)``, and the last window ends at the
edge; u in [0, 1) is one random sample per (batch, channel) plane and dim, computed in the
input's precision as PyTorch does. Samples come as (N, C, nd); PyTorch assigns them to the
dims W, H for 2-D and T, H, W for 3-D, and so does ember.
"""

import numpy as np

from ember.ops._pool_index import max_pool_grad, window_max
from ember.ops._registry import op

__all__ = ["FUNCTIONAL"]

_SAMPLE_OF_DIM = {2: (1, 0), 3: (0, 1, 2)}      # spatial dim -> its sample's position


def _starts(xp, u, size, out, k):
    """The window starts along one dim: (..., out) int64 for samples ``u`` of shape (...)."""
    starts = xp.empty(u.shape + (out,), np.int64)
    if out > 1:
        kind = u.dtype.type
        alpha = kind(size - k) / kind(out - 1)
        steps = xp.arange(out - 1, dtype=u.dtype)
        first = (u * alpha).astype(np.int64)[..., None]
        starts[..., :-1] = ((steps + u[..., None]) * alpha).astype(np.int64) - first
    starts[..., -1] = size - k
    return starts


def _fractional_max(xp, x, samples, kernel_size, output_size):
    """(values, flat plane indices) of (N, C, *size) ``x``, or of unbatched (C, *size) ``x``
    (one sample per channel, ``samples`` of shape (1, C, nd))."""
    nd = len(kernel_size)
    if x.ndim == nd + 1:
        values, indices = _fractional_max(xp, x[None], samples, kernel_size, output_size)
        return values[0], indices[0]
    (n, c), size = x.shape[:2], x.shape[2:]
    wide = samples.astype(np.float32) if samples.dtype.itemsize < 4 else samples
    taps = 0                    # (N, C, *output_size, *kernel_size): each tap's flat index
    for d in range(nd):
        starts = _starts(xp, wide[..., _SAMPLE_OF_DIM[nd][d]], size[d], output_size[d],
                         kernel_size[d])
        where = starts[..., None] + xp.arange(kernel_size[d])          # (N, C, out, k)
        spread = ((n, c) + tuple(output_size[e] if e == d else 1 for e in range(nd))
                  + tuple(kernel_size[e] if e == d else 1 for e in range(nd)))
        taps = taps + where.reshape(spread) * int(np.prod(size[d + 1:], dtype=np.int64))
    taps = taps.reshape((n, c) + tuple(output_size) + (int(np.prod(kernel_size)),))
    plane = int(np.prod(size, dtype=np.int64))
    windows = xp.take_along_axis(x.reshape(n, c, plane), taps.reshape(n, c, -1)
                                 if taps.size else taps.reshape(n, c, 0), axis=-1)
    return window_max(xp, windows.reshape(taps.shape), taps)


_DIM_NAMES = {2: ("height", "width"), 3: ("time", "height", "width")}
_CHECK_ORDER = {2: (0, 1), 3: (0, 2, 1)}


def _op(nd):
    def forward(xp, x, samples, kernel_size, output_size):
        return _fractional_max(xp, x, samples, kernel_size, output_size)
    forward.__doc__ = f"{nd}-D fractional max pooling: (values, flat spatial indices)."
    registered = op(f"_fractional_max_pool{nd}d(input, random_samples, kernel_size, "
                    f"output_size)", inputs=2, method=False,
                    grad_fn_name=f"FractionalMaxPool{nd}DBackward0")(forward)
    registered.nondifferentiable("random_samples")      # no edge, as in PyTorch

    @registered.derivative(outputs=(1,))
    def _(grads, x, samples, kernel_size, output_size, *, out):
        return max_pool_grad(grads[0], x, out[1], nd, "fractional_max_pool"), None
    return registered


def _tuple(value, nd):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * nd


def _checked_samples(x, shape, samples, nd):
    """The (N, C, nd) samples for input ``x`` of (batched) ``shape``: drawn, or checked."""
    import ember
    n, c = shape[:2]
    if samples is None:
        return ember.rand(n, c, nd, dtype=x.dtype, device=x.device)
    if samples.dtype != x.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if samples.ndim != 3 or samples.shape[2] != nd:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got "
                           f"{samples.shape[-1]}.")
    if samples.shape[0] < n:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != c:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    return samples[:n]


def _functional(nd):
    registered = _op(nd)
    name = f"fractional_max_pool{nd}d"
    where = f"{name}()" if nd == 2 else f"{name}_out()"

    def with_indices(input, kernel_size, output_size=None, output_ratio=None,
                     return_indices=False, _random_samples=None):
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output_size or an "
                             f"output_ratio")
        # (checked as a batch of one when unbatched)
        shape = tuple(input.shape) if input.ndim == nd + 2 else (1,) + tuple(input.shape)
        if len(shape) != nd + 2:
            raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: "
                               f"{list(input.shape)}")
        for d in range(1, len(shape)):
            if shape[d] == 0:
                raise RuntimeError(f"{name}(): Expected input to have non-zero size for "
                                   f"non-batch dimensions, but got{list(shape)} with "
                                   f"dimension {d} being empty.")
        size, kernel = shape[2:], _tuple(kernel_size, nd)
        if output_size is None:
            output_size = tuple(int(s * r) for s, r in zip(size, _tuple(output_ratio, nd)))
        output_size = _tuple(output_size, nd)
        # PyTorch's 2-D check allows a last window ending at the edge, its 3-D one not; in
        # its order of dims (3-D: width before height)
        for d in _CHECK_ORDER[nd]:
            dim, k, s, o = _DIM_NAMES[nd][d], kernel[d], size[d], output_size[d]
            if o + k - 1 > s or nd == 3 and o + k - 1 == s:
                raise RuntimeError(f"{where}: pool {dim} {k} too large relative to input "
                                   f"{dim} {s}")
        samples = _checked_samples(input, shape, _random_samples, nd)
        # an unbatched input is pooled as it is: one node, no unsqueeze, as in PyTorch
        return registered.function(input, samples, kernel, output_size)

    def pool(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
             _random_samples=None):
        values, indices = with_indices(input, kernel_size, output_size, output_ratio,
                                       return_indices, _random_samples)
        return (values, indices) if return_indices else values

    for fn, fname, doc in ((pool, name, "(with indices if asked)"),
                           (with_indices, f"{name}_with_indices", "and indices")):
        fn.__name__ = fn.__qualname__ = fname
        fn.__module__ = "ember.nn.functional"
        fn.__doc__ = (f"{nd}-D fractional max pooling {doc}: windows of ``kernel_size`` at "
                      f"pseudo-random steps, pooled to ``output_size`` (or ``output_ratio`` of "
                      f"the input).")
    return {name: pool, f"{name}_with_indices": with_indices}


FUNCTIONAL = {**_functional(2), **_functional(3)}
