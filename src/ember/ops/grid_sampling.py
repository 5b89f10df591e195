"""``F.grid_sample`` and ``F.affine_grid``; the sampling runs on arrays (_grid_kernels.py,
_grid_cubic.py) as one op, ``_grid_sampler``, whose node is PyTorch's (NOTE [grid_sample as one
node]), and its reference form here, composed of differentiable ember ops, gives double
backward.

Sampling is a weighted sum of the input at the corners around each grid point: the corner
values come from a gather over the spatial plane (whose derivative scatters back to the
input) and the weights are smooth in the grid, so both gradients come from the ops used.
"""

import warnings

import numpy as np

from ember._host_values import host_values
from ember._warn import user_level
from ember.autograd._forward_traces import PULLING
from ember import _dtype as D
from ember.ops._grid_cubic import cubic_arrays, cubic_backward_arrays
from ember.ops._grid_kernels import sample_arrays, sample_backward_arrays
from ember.ops._registry import op
from ember.ops.underivable import refuse_forward_ad

__all__ = ["grid_sample", "affine_grid"]

_DEFAULT_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                    "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                    "old behavior is desired. See the documentation of grid_sample for details.")
_CUBIC_A = -0.75
_INTERPOLATION = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}
_MODE_CODES = {v: k for k, v in _INTERPOLATION.items()}
_PADDING_CODES = {v: k for k, v in _PADDING.items()}


def _held(c, value):
    """``value`` as ``c``'s dtype holds it: PyTorch's kernel (and _grid_kernels) round sizes to
    the dtype first, which a 16-bit float changes for most sizes past 256."""
    return float(np.asarray(value, dtype=c.dtype.np))


def _unnormalize(c, size, align_corners):
    if align_corners:
        return (c + 1) * _held(c, (size - 1) / 2)
    return ((c + 1) * _held(c, size) - 1) / 2


def _reflect(c, twice_low, twice_high):
    import ember
    if twice_low == twice_high:     # a single pixel: every coordinate maps to it, with a zero
        return ember.where(ember.zeros_like(c, dtype=ember.bool), c, 0.0)  # (not None) gradient
    low, span = twice_low / 2, _held(c, (twice_high - twice_low) / 2)
    c = (c - low).abs()
    extra = ember.fmod(c, span)
    flips = (c / span).floor()
    return ember.where(ember.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _clip(c, size):
    """``c`` clamped to [0, size - 1]; like PyTorch, no gradient at or beyond the ends, and NaN
    taken as 0."""
    import ember
    return ember.where((c > 0) & (c < size - 1), c,
                       c.detach().nan_to_num(0.0).clamp(0, size - 1))


def _pad_coords(c, size, padding_mode, align_corners):
    """Source coordinates after the padding rule (border clamps; reflection mirrors)."""
    if padding_mode == "border":
        return _clip(c, size)
    if padding_mode == "reflection":
        if align_corners:
            c = _reflect(c, 0, 2 * (size - 1))
        else:
            c = _reflect(c, -1, 2 * size - 1)
        return _clip(c, size)
    return c


def _gather(input, coords, sizes):
    """The input at integer ``coords`` (one (N, *out) tensor per spatial dim), zero (not -0.0)
    outside, as (N, C, *out)."""
    import ember
    from ember.ops._pool_index import _plane_gather
    valid, flat, stride = None, 0, 1
    for c, size in zip(reversed(coords), reversed(sizes)):
        c = _exact(c)               # (exact bounds: 16-bit floats round the last pixels up)
        ok = (c >= 0) & (c <= size - 1)
        valid = ok if valid is None else valid & ok
        flat = flat + c.clamp(0, size - 1).nan_to_num(0.0).long() * stride   # NaN: invalid
        stride *= size
    n, ch = input.shape[:2]
    index = flat.unsqueeze(1).expand((n, ch) + tuple(flat.shape[1:]))
    values = _plane_gather(input, index, len(sizes))
    return ember.where(valid.unsqueeze(1), values, 0.0)


def _exact(c):
    """Integer-valued coordinates ``c`` in a dtype that holds every pixel index (16-bit floats
    do not past 256 or 2048: float32), without gradient."""
    return c.detach().float() if c.dtype.itemsize == 2 else c


def _cubic_weights(t):
    a = _CUBIC_A
    return [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]


def _check_modes(mode, padding_mode):
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")


def _check_sample(input, grid, mode):
    nd = input.ndim - 2
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    if grid.shape[-1] != nd:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {nd} in last "
                           f"dimension, but got grid with sizes {list(grid.shape)}")
    for d in range(2, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial "
                               f"dimensions, but input has sizes {list(input.shape)} with "
                               f"dimension {d} being empty")
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise RuntimeError(f"grid_sampler(): expected {4 if input.ndim == 4 else 5}D input and "
                           f"grid with same number of dimensions, but got input with sizes "
                           f"{list(input.shape)} and grid with sizes {list(grid.shape)}")
    if mode == "bicubic" and nd != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.dtype.is_floating_point or input.dtype.itemsize == 1:     # (float8: none)
        kernel = "grid_sampler_2d_cpu_kernel_impl" if nd == 2 else "grid_sampler3d_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{input.dtype._torch_name}'")
    if input.dtype is not grid.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype._torch_name} but found "
                           f"{grid.dtype._torch_name}")


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` at the normalized ``grid`` locations (x, y[, z] in [-1, 1])."""
    _check_modes(mode, padding_mode)
    if align_corners is None:       # PyTorch warns before it looks at the shapes
        warnings.warn(_DEFAULT_WARNING, stacklevel=user_level(2))
        align_corners = False
    _check_sample(input, grid, mode)
    refuse_forward_ad(f"grid_sampler_{input.ndim - 2}d", input, grid)
    return _grid_sampler(input, grid, _MODE_CODES[mode], _PADDING_CODES[padding_mode],
                         bool(align_corners))


# NOTE [grid_sample as one node]: ``_grid_sampler``'s node is PyTorch's GridSampler2DBackward0
# (or 3D) with its saved input, grid and mode codes. The sampling runs on the arrays
# (_grid_kernels.py, _grid_cubic.py: same roundings as the composite below), and a first-order
# backward is the op ``_grid_sampler_backward`` on the arrays, at any order: under
# ``create_graph`` its node is PyTorch's GridSampler2DBackwardBackward0, whose derivative
# differentiates the composite of ember ops below twice, for double backward.
@op("_grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)", inputs=2,
    method=False, out=False, scalars=False)
def _grid_sampler(xp, input, grid, interpolation_mode, padding_mode, align_corners):
    """``grid_sample`` with its modes' integer codes, on checked arguments."""
    if interpolation_mode == 2:
        return cubic_arrays(xp, input, grid, padding_mode, align_corners)
    return sample_arrays(xp, input, grid, interpolation_mode, padding_mode, align_corners)


_grid_sampler.packs_reversed = True     # PyTorch packs grid, then input


@_grid_sampler.named_by
def _(flat, params, outputs):
    return f"GridSampler{flat[0].ndim - 2}DBackward0"


@_grid_sampler.derivative
def _(grad, input, grid, interpolation_mode, padding_mode, align_corners, *,
      needs=(True, True)):
    if not any(needs):
        return None, None
    found = _grid_sampler_backward(grad, input, grid, interpolation_mode, padding_mode,
                                   align_corners)
    return tuple(t if n else None for t, n in zip(found, needs))


@op("_grid_sampler_backward(grad_output, input, grid, interpolation_mode, padding_mode, "
    "align_corners)", inputs=3, method=False, out=False, scalars=False)
def _grid_sampler_backward(xp, grad, input, grid, interpolation_mode, padding_mode,
                           align_corners):
    """(input gradient, grid gradient) of a ``_grid_sampler`` of floating arrays for
    ``grad_output`` (PyTorch's ``grid_sampler_2d_backward`` and 3d)."""
    if interpolation_mode not in (0, 1, 2) or (interpolation_mode == 2 and input.ndim != 4):
        raise RuntimeError(f"_grid_sampler_backward: interpolation mode {interpolation_mode} "
                           f"is not bilinear (0), nearest (1) or 2-D bicubic (2)")
    if interpolation_mode == 2:
        return cubic_backward_arrays(xp, grad, input, grid, padding_mode, align_corners)
    return sample_backward_arrays(xp, grad, input, grid, interpolation_mode, padding_mode,
                                  align_corners)


@_grid_sampler_backward.named_by
def _(flat, params, outputs):
    return f"GridSampler{flat[1].ndim - 2}DBackwardBackward0"


@_grid_sampler_backward.derivative
def _(grads, grad, input, grid, interpolation_mode, padding_mode, align_corners):
    # the composite, differentiated twice: its first gradients against the cotangents
    import ember
    modes = (_INTERPOLATION[interpolation_mode], _PADDING[padding_mode], align_corners)
    create = ember.is_grad_enabled()
    with ember.enable_grad():
        # partial derivatives: a tracked one is seen through a fresh alias, as the gradient
        # at the tensor itself would also count the paths through the others (the grid, say,
        # reaches the incoming gradient through the sampled output); an untracked one is,
        # when the results record, a copy, which a transform knows as made by its function
        # (a detached alias of a captured tensor would keep its results in the graph)
        leaves = [t.view_as(t) if create and (t.requires_grad or t._grad_fn is not None)
                  else (t.detach().clone() if create else t.detach())._set_requires_grad()
                  for t in (grad, input, grid)]
        out = _sampled(leaves[1], leaves[2], *modes)
        first = ember.autograd.grad(out, leaves[1:], leaves[0], create_graph=True,
                                    allow_unused=True)
        # the vjp of the first gradients for the cotangents (not the gradient of a summed
        # product: under vmap the cotangents are batched, and so would that sum be)
        pairs = [(f, u) for f, u in zip(first, grads)
                 if f is not None and u is not None and f.requires_grad]
        found = ember.autograd.grad([f for f, _ in pairs], leaves, [u for _, u in pairs],
                                    create_graph=create, allow_unused=True) \
            if pairs else (None,) * 3
    # PyTorch's: none for the input unless the grid's gradient is differentiated (the input's
    # does not read the input), none at all from nearest's grid gradient (a constant zero),
    # else zeros (not none) where they do not reach (nearest's grid)
    if interpolation_mode == 1 and _unreached(grads[0]):
        return None, None, None
    found = [ember.zeros_like(t) if f is None else f for f, t in zip(found, leaves)]
    if interpolation_mode == 1 or _unreached(grads[1]):
        found[1] = None
    return tuple(found)


def _unreached(grad):
    """Whether an output's incoming gradient is one no gradient reached (PyTorch's undefined
    one): None, or the zeros the engine fills in."""
    return grad is None or grad.__dict__.get("_filled_zeros", False)


def _sampled(input, grid, mode, padding_mode, align_corners):
    sizes = tuple(input.shape[2:])
    nd = len(sizes)
    raw = [_unnormalize(grid[..., nd - 1 - d], sizes[d], align_corners) for d in range(nd)]
    if mode == "bicubic":
        return _bicubic(input, raw, sizes, padding_mode, align_corners)
    coords = [_pad_coords(c, s, padding_mode, align_corners) for c, s in zip(raw, sizes)]
    if mode == "nearest":
        import ember
        out = _gather(input, [c.round() for c in coords], sizes)
        if grid.requires_grad:      # PyTorch gives the grid a zero gradient, not none
            out = ember.where(ember.ones((), dtype=ember.bool), out, grid[..., 0].unsqueeze(1))
        return out
    low = [c.floor() for c in coords]
    frac = [c - f for c, f in zip(coords, low)]
    out = None
    for corner in np.ndindex(*(2,) * nd):
        where = [_exact(f) + b for f, b in zip(low, corner)]    # (exact, as PyTorch's kernel)
        weight = None
        for t, b in zip(frac, corner):
            w = t if b else 1 - t
            weight = w if weight is None else weight * w
        term = _gather(input, where, sizes) * weight.unsqueeze(1)
        out = term if out is None else out + term
    return out


def _bicubic(input, raw, sizes, padding_mode, align_corners):
    low = [c.floor() for c in raw]
    weights = [_cubic_weights(c - f) for c, f in zip(raw, low)]
    out = None
    for i in range(4):
        for j in range(4):
            taps = [low[0] + (i - 1), low[1] + (j - 1)]
            if padding_mode != "zeros":     # (a 16-bit tap rounded past the edge reads it)
                taps = [_exact(_pad_coords(t, s, padding_mode, align_corners)).clamp(0, s - 1)
                        for t, s in zip(taps, sizes)]
            term = _gather(input, taps, sizes) * (weights[0][i] * weights[1][j]).unsqueeze(1)
            out = term if out is None else out + term
    return out


def _base_coords(n, align_corners, dtype):
    """The n normalized pixel coordinates along one axis, rounded in ``dtype`` step by step as
    PyTorch's are: grid points on pixel centres must land on the same side of them."""
    import ember
    if n <= 1:
        if dtype.itemsize == 2:     # PyTorch builds this one coordinate with torch.tensor
            raise NotImplementedError(f"\"tensor_cpu\" not implemented for "
                                      f"'{dtype._torch_name}'")
        return np.zeros(max(n, 0), dtype=dtype.np)
    c = ember.linspace(-1, 1, n, dtype=dtype)
    return host_values(c if align_corners else c * (n - 1) / n)    # (numpy() refuses bf16)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of the affine maps ``theta`` (N, 2, 3) or (N, 3, 4) for ``size``."""
    import ember
    if align_corners is None:
        warnings.warn(_DEFAULT_WARNING, stacklevel=user_level(2))
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got "
                         f"{str(theta.dtype).replace('ember', 'torch')}")
    given, size = size, tuple(size)     # messages show ``size`` as passed (list, Size, tuple)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {given}.")
    nd = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (nd, nd + 1):
        raise ValueError(f"Expected a batch of {nd}D affine matrices of shape Nx{nd}x{nd + 1} "
                         f"for size {given}. Got {theta.shape}.")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{size[0]}, {nd + 1}] but got: [{theta.shape[0]}, {nd + 1}].")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=user_level(2))
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {given}")
    return ember.affine_grid_generator(theta, size, align_corners)


def _base_grid(size, align_corners, dtype):
    """The (1, prod(spatial), nd + 1) homogeneous coordinates (x first) of ``size``'s pixels."""
    spatial = tuple(size[2:])
    axes = np.meshgrid(*[_base_coords(n, align_corners, dtype) for n in spatial], indexing="ij")
    base = np.stack(list(axes[::-1]) + [np.ones(spatial, axes[0].dtype)], axis=-1)
    return base.reshape(1, -1, len(spatial) + 1)


@op("affine_grid_generator(theta, size, align_corners)", method=False, saves_inputs=False)
def affine_grid_generator(xp, theta, size, align_corners):
    """The sampling grid of the affine maps ``theta`` for ``size`` (no argument checks)."""
    size = tuple(size)
    base = xp.asarray(_base_grid(size, align_corners, D.FROM_NUMPY[theta.dtype]))
    # PyTorch's CPU kernel sums base_k * theta_k one k after another (16-bit floats in float32),
    # without fused multiply-adds: a BLAS product rounds differently, and grid points that land
    # on pixel centres then fall on the other side of them under nearest sampling
    acc = np.float32 if theta.dtype in D.LOW_PRECISION_NP else theta.dtype
    base, theta_t = base.astype(acc, copy=False), theta.astype(acc, copy=False)
    grid = base[..., 0, None] * theta_t[:, None, :, 0]
    for k in range(1, base.shape[-1]):
        grid = grid + base[..., k, None] * theta_t[:, None, :, k]
    grid = grid.astype(theta.dtype, copy=False)
    return grid.reshape((size[0],) + size[2:] + (len(size) - 2,))


@affine_grid_generator.derivative
def _(grad, theta, size, align_corners):
    # the base grid is rebuilt, not saved: a second backward works, as in PyTorch
    import ember
    from ember.func._batched import BatchedTensor
    if type(grad) is BatchedTensor:     # PyTorch has no batching rule for this backward
        from ember.func._batching import warn_fallback
        warn_fallback("aten::affine_grid_generator_backward")
    base = ember.tensor(_base_grid(tuple(size), align_corners, theta.dtype), dtype=theta.dtype,
                        device=theta.device)
    out = grad.reshape(grad.shape[0], -1, grad.shape[-1]).transpose(1, 2) @ base
    if PULLING.depth and out.requires_grad:
        out.register_hook(_warn_batched_tangent)
    return out


def _warn_batched_tangent(tangent):
    """Forward mode's tangent of theta reaching affine_grid_generator's transposed backward:
    PyTorch's jvp calls affine_grid_generator on it, which vmap (jacfwd's) loops."""
    from ember.func._batched import BatchedTensor
    if type(tangent) is BatchedTensor:
        from ember.func._batching import warn_fallback
        warn_fallback("aten::affine_grid_generator")


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """``grid_sample`` with the modes given by their integer codes (``torch.grid_sampler``;
    see ``F.GRID_SAMPLE_INTERPOLATION_MODES`` and ``F.GRID_SAMPLE_PADDING_MODES``)."""
    if interpolation_mode not in _INTERPOLATION or padding_mode not in _PADDING:
        raise RuntimeError(f"grid_sampler(): unknown interpolation mode {interpolation_mode} "
                           f"or padding mode {padding_mode}")
    return grid_sample(input, grid, _INTERPOLATION[interpolation_mode], _PADDING[padding_mode],
                       bool(align_corners))


def _grid_sampler_nd(nd):
    def run(input, grid, interpolation_mode, padding_mode, align_corners):
        if input.ndim != nd + 2 or grid.ndim != nd + 2:
            raise RuntimeError(f"grid_sampler(): expected {nd + 2}D input and grid with same "
                               f"number of dimensions, but got input with sizes "
                               f"{list(input.shape)} and grid with sizes {list(grid.shape)}")
        return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)
    run.__name__ = run.__qualname__ = f"grid_sampler_{nd}d"
    run.__doc__ = f"``grid_sampler`` of {nd + 2}-D inputs only."
    return run


FUNCTIONAL = {"grid_sample": grid_sample, "affine_grid": affine_grid}
PUBLIC = {"grid_sampler": grid_sampler, "grid_sampler_2d": _grid_sampler_nd(2),
          "grid_sampler_3d": _grid_sampler_nd(3)}
