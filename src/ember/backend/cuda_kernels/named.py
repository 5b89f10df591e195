"""The Triton kernels that ops and optimizers find by name through
``ember.backend.device_kernel`` (they are neither an op's forward nor its derivative): the
Adam, SGD, RMSprop, Adadelta, Adagrad, NAdam, RAdam and Adamax updates of all of a group's
parameters, gradient clipping's norm and scaling, 1-D to 3-D convolutions as implicit GEMMs
per group (depthwise ones tap by tap), and random numbers (dropout's masks, rand, randn,
randint ...). The recurrent layers' time loops are in recurrent.py.

For what its kernel does not cover, each says so and the caller runs its generic code:
``scale_all`` returns False, the optimizers' the positions of the parameters they left, the
others None. ``fallible`` makes a kernel that cannot run here return None, after switching
it off.
"""

import math

import numpy as np

from ember.backend import DEVICE_KERNELS, cuda_backend, device_constant, xp_of
from ember.backend.cuda_kernels import fallible
from ember.backend.cuda_kernels import triton_conv as conv
from ember.backend.cuda_kernels import triton_depthwise as depthwise_conv
from ember.backend.cuda_kernels import triton_optimizers as optimizers
from ember.backend.cuda_kernels import triton_pointwise as pointwise
from ember.backend.cuda_kernels._launch import FAST_DTYPES, buffer
from ember.ops._conv_kernels import output_size


def _split(params, arrays_of):
    """(positions a multi-tensor update takes, positions it leaves) of ``params``: it takes
    those whose ``arrays_of`` are non-empty float32 C-contiguous arrays on the first one's GPU
    (the others go to the optimizer's own code). Where some item's arrays differ in shape
    (optimizer state kept from before ``p.data = ...``), it takes none: the optimizer's code
    runs them all in order and fails at that one as PyTorch's, leaving the later ones."""
    taken, left = [], []
    device = params[0][0].device.id
    for i, item in enumerate(params):
        arrays = arrays_of(item)
        shape = arrays[0].shape
        ok = arrays[0].size and all(a.shape == shape and a.device.id == device
                                    and a.dtype == np.float32 and a.flags.c_contiguous
                                    for a in arrays)
        if not ok and any(a.shape != shape for a in arrays):
            return [], list(range(len(params)))
        (taken if ok else left).append(i)
    return taken, left


def _on_table(launch, like, table, sizes, **hyper):
    """Run a multi-tensor update ``launch`` over the host ``table``: staged to the GPU
    without a wait, with the cached map of its tensors' blocks."""
    blocks = device_constant(like, ("tensor blocks", optimizers.BLOCK, sizes),
                             lambda: optimizers.tensor_blocks(sizes))
    launch(buffer(cuda_backend().upload_async(table)), buffer(blocks), blocks.shape[0],
           **hyper)


def _address(a):
    return buffer(a).data_ptr()


def adam(params, *, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad):
    """The Adam/AdamW update of many float32 parameters in one launch. ``params`` holds
    (x, g, m, v, vmax or None, step count) per parameter; returns the positions of those it
    left, which the optimizer updates itself."""
    taken, left = _split(params, lambda p: p[:4] if p[4] is None else p[:5])
    if taken:
        chosen = [params[i] for i in taken]
        sizes = tuple(p[0].size for p in chosen)
        addresses = [[_address(a) for a in (x, g, m, v, v if vmax is None else vmax)]
                     for x, g, m, v, vmax, _ in chosen]
        table = optimizers.adam_table(addresses, sizes, [p[5] for p in chosen], lr, beta1,
                                     beta2)
        _on_table(optimizers.adam_update, chosen[0][0], table, sizes, lr=lr, beta1=beta1,
                  beta2=beta2, eps=eps, weight_decay=weight_decay, decoupled=decoupled,
                  amsgrad=amsgrad)
    return left


def sgd(params, *, lr, momentum, dampening, weight_decay, nesterov):
    """The SGD update of many float32 parameters in one launch. ``params`` holds (x, g,
    momentum buffer or None, whether it is the buffer's first step) per parameter; returns
    the positions of those it left, which the optimizer updates itself."""
    taken, left = _split(params, lambda p: p[:2] if p[2] is None else p[:3])
    if taken:
        chosen = [params[i] for i in taken]
        sizes = tuple(p[0].size for p in chosen)
        addresses = [[_address(x), _address(g), _address(x if b is None else b)]
                     for x, g, b, _ in chosen]
        table = optimizers.sgd_table(addresses, sizes, [p[3] for p in chosen])
        _on_table(optimizers.sgd_update, chosen[0][0], table, sizes, lr=lr, momentum=momentum,
                  dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
    return left


def rmsprop(params, *, lr, alpha, eps, weight_decay, momentum, centered):
    """The RMSprop update of many float32 parameters in one launch. ``params`` holds (x, g,
    square average, gradient average or None, momentum buffer or None) per parameter;
    returns the positions of those it left, which the optimizer updates itself."""
    taken, left = _split(params, lambda p: [a for a in p if a is not None])
    if taken:
        chosen = [params[i] for i in taken]
        sizes = tuple(p[0].size for p in chosen)
        table = np.array([[_address(v if a is None else a) for a in (x, g, v, avg, b)] + [x.size]
                          for x, g, v, avg, b in chosen], np.int64)
        _on_table(optimizers.rmsprop_update, chosen[0][0], table, sizes, lr=lr, alpha=alpha,
                  eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered)
    return left


def adadelta(params, *, lr, rho, eps, weight_decay):
    """The Adadelta update of many float32 parameters in one launch. ``params`` holds (x, g,
    square average, accumulated update) per parameter; returns the positions of those it
    left, which the optimizer updates itself."""
    taken, left = _split(params, lambda p: p)
    if taken:
        chosen = [params[i] for i in taken]
        sizes = tuple(p[0].size for p in chosen)
        table = np.array([[_address(a) for a in p] + [p[0].size] for p in chosen], np.int64)
        _on_table(optimizers.adadelta_update, chosen[0][0], table, sizes, lr=lr, rho=rho,
                  eps=eps, weight_decay=weight_decay)
    return left


def adagrad(params, *, eps, weight_decay):
    """The Adagrad update of many float32 parameters in one launch. ``params`` holds (x, g,
    sum of squares, learning rate decayed by its step count) per parameter; returns the
    positions of those it left, which the optimizer updates itself."""
    taken, left = _split(params, lambda p: p[:3])
    if taken:
        chosen = [params[i] for i in taken]
        sizes = tuple(p[0].size for p in chosen)
        table = optimizers.adagrad_table([[_address(a) for a in p[:3]] for p in chosen], sizes,
                                        [p[3] for p in chosen])
        _on_table(optimizers.adagrad_update, chosen[0][0], table, sizes, eps=eps,
                  weight_decay=weight_decay)
    return left


def _adam_variant(params, coefficients, **hyper):
    """NAdam's, RAdam's or Adamax's update of many float32 parameters in one launch: each
    item of ``params`` starts (x, g, m, v), and ``coefficients(item)`` gives its step's
    (s, e, cg, cm); returns the positions of those it left."""
    taken, left = _split(params, lambda p: p[:4])
    if taken:
        chosen = [params[i] for i in taken]
        sizes = tuple(p[0].size for p in chosen)
        table = optimizers.adam_variant_table([[_address(a) for a in p[:4]] for p in chosen],
                                              sizes, [coefficients(p) for p in chosen])
        _on_table(optimizers.adam_variant_update, chosen[0][0], table, sizes, **hyper)
    return left


def nadam(params, *, lr, beta1, beta2, eps, weight_decay, decoupled):
    """The NAdam update of many float32 parameters in one launch. ``params`` holds (x, g, m,
    v, 1 - beta2^t, the gradient's coefficient, the average's) per parameter; returns the
    positions of those it left, which the optimizer updates itself."""
    return _adam_variant(params, lambda p: (1 / math.sqrt(p[4]), eps, p[5], p[6]), lr=lr,
                         beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                         decoupled=decoupled)


def radam(params, *, lr, beta1, beta2, eps, weight_decay, decoupled):
    """The RAdam update of many float32 parameters in one launch. ``params`` holds (x, g, m,
    v, the average's coefficient, whether the step is rectified) per parameter; returns the
    positions of those it left, which the optimizer updates itself."""
    return _adam_variant(params, lambda p: (1.0, eps, 0.0, p[4]) if p[5] else
                         (0.0, 1.0, 0.0, p[4]), lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                         weight_decay=weight_decay, decoupled=decoupled)


def adamax(params, *, lr, beta1, beta2, eps, weight_decay):
    """The Adamax update of many float32 parameters in one launch. ``params`` holds (x, g, m,
    u, the average's coefficient) per parameter; returns the positions of those it left,
    which the optimizer updates itself."""
    return _adam_variant(params, lambda p: (0.0, 0.0, 0.0, p[4]), lr=lr, beta1=beta1,
                         beta2=beta2, eps=eps, weight_decay=weight_decay, inf_norm=True)


def _clippable(arrays):
    """Whether the clipping kernels take ``arrays``: each a non-empty float32 C-contiguous
    array on the first one's GPU."""
    return not _split([(a,) for a in arrays], lambda p: p)[1]


def _clip_table(arrays):
    return np.array([(_address(a), a.size) for a in arrays], np.int64).reshape(
        -1, optimizers.CLIP_ROW), tuple(a.size for a in arrays)


def grad_norm(arrays):
    """The 2-norm of ``arrays`` taken together, a 0-d float32 array on their GPU, from one
    launch over all of them (and a sum of its per-block results); None unless the clipping
    kernels take them."""
    if not arrays or not _clippable(arrays):
        return None
    xp = xp_of(arrays[0])
    table, sizes = _clip_table(arrays)
    partial = xp.empty(sum(-(-n // optimizers.BLOCK) for n in sizes), xp.float32)
    _on_table(optimizers.sum_of_squares, arrays[0], table, sizes, out=buffer(partial))
    return xp.sqrt(partial.sum())


def scale_all(arrays, coef, found=None):
    """Multiply ``arrays`` in place by the float32 0-d array ``coef`` on their GPU, in one
    launch, setting the float32 0-d array ``found`` (if given) to 1 where a product is an inf
    or NaN; False (nothing done) unless the clipping kernels take them."""
    if not arrays or coef.dtype != np.float32 or not _clippable(arrays):
        return False
    table, sizes = _clip_table(arrays)
    _on_table(optimizers.scale, arrays[0], table, sizes, coef=buffer(coef),
              found=None if found is None else buffer(found))
    return True


def random(xp, shape, dtype, seed, offset, kind="uniform", low=0.0, high=1.0):
    """``shape`` numbers of ``dtype`` on the current GPU: elements ``offset`` onward of the
    counter-based stream of ``seed``, of ``kind`` "uniform" (on [low, high)), "normal" (mean
    ``low``, std ``high``) or "integers" (in [low, high)). None for what the kernels do not
    store: float64 and complex, integers in bool or from a span over 2**32."""
    dtype = np.dtype(dtype)
    if kind == "integers":
        if not (dtype in FAST_DTYPES or dtype.kind in "iu") or high - low > 2 ** 32:
            return None
    elif dtype not in FAST_DTYPES:
        return None
    out = xp.empty(shape, dtype)
    if out.size and kind == "integers":
        pointwise.randint(buffer(out), out.size, seed, offset, low, high)
    elif out.size:
        pointwise.random(buffer(out), out.size, seed, offset, kind == "normal", low, high)
    return out


def _lifted(a, dims):
    """A (B, C, *S) array with size-1 spatial dims in front, ``dims`` spatial dims in all (a
    view: the kernels see a 1-D convolution as a 2-D or 3-D one)."""
    return a.reshape(a.shape[:2] + (1,) * (dims - a.ndim + 2) + a.shape[2:])


def _geometry(kernel, stride, pads, dilation, dims):
    """The kernels' geometry over ``dims`` spatial dims: the strides, leading paddings,
    dilations and kernel sizes, of 1, 0, 1 and 1 along the dims a convolution lacks."""
    n = dims - len(kernel)
    return ((1,) * n + tuple(stride) + (0,) * n + tuple(lo for lo, _ in pads)
            + (1,) * n + tuple(dilation) + (1,) * n + tuple(kernel))


def _conv_dtypes(x, *others):
    """Whether the convolution kernels take these operands: one 32- or 16-bit float dtype."""
    return x.size and x.dtype in FAST_DTYPES and all(a is None or a.dtype == x.dtype
                                                      for a in others)


def _depthwise(groups, channels, per_group, ndim):
    """Whether a convolution of ``groups`` groups over ``channels`` input channels, with
    ``per_group`` input channels in a group, on ``ndim``-dim inputs, takes the tap-by-tap
    depthwise kernels (1-D and 2-D ones)."""
    return groups > 1 and groups == channels and per_group == 1 and ndim < 5


def _contiguous(xp, *arrays):
    """Buffers of ``arrays`` made C-contiguous (None stays None)."""
    return tuple(None if a is None else buffer(xp.ascontiguousarray(a)) for a in arrays)


def convolution(x, w, stride, pads, dilation, groups, bias=None):
    """``conv_forward`` of a 1-D, 2-D or 3-D convolution as an implicit GEMM per group (no
    im2col matrix), or of a depthwise one tap by tap; None for what they do not cover."""
    if x.ndim not in (3, 4, 5) or not _conv_dtypes(x, w, bias):
        return None
    xp = xp_of(x)
    depthwise = _depthwise(groups, x.shape[1], w.shape[1], x.ndim)
    dims = 2 if depthwise else 3
    size = output_size(x.shape[2:], w.shape[2:], stride, pads, dilation)
    y = xp.empty((x.shape[0], w.shape[0]) + tuple(size), x.dtype)
    if y.size:
        x_view, y_view = _lifted(x, dims), _lifted(y, dims)
        args = (*_contiguous(xp, x_view, w, bias), buffer(y_view),
                x_view.shape + y_view.shape[1:], _geometry(w.shape[2:], stride, pads,
                                                           dilation, dims))
        if depthwise:
            depthwise_conv.depthwise2d(*args)
        else:
            conv.conv3d(*args, not cuda_backend().tf32_gemms_on(), groups)
    return y


def convolution_input(g, w, size, stride, pads, dilation, groups, bias=None):
    """``conv_input_grad`` (a transposed convolution) of a 1-D, 2-D or 3-D convolution as an
    implicit GEMM per group, or of a depthwise one tap by tap; None for what they do not
    cover."""
    if g.ndim not in (3, 4, 5) or not _conv_dtypes(g, w, bias):
        return None
    xp = xp_of(g)
    c = w.shape[1] * groups
    depthwise = _depthwise(groups, c, w.shape[1], g.ndim)
    dims = 2 if depthwise else 3
    x = xp.empty((g.shape[0], c) + tuple(size), g.dtype)
    if x.size:
        g_view, x_view = _lifted(g, dims), _lifted(x, dims)
        args = (*_contiguous(xp, g_view, w, bias), buffer(x_view),
                x_view.shape + g_view.shape[1:], _geometry(w.shape[2:], stride, pads,
                                                           dilation, dims))
        if depthwise:
            depthwise_conv.depthwise2d_input_grad(*args)
        else:
            conv.conv3d_input_grad(*args, not cuda_backend().tf32_gemms_on(), groups)
    return x


def convolution_weight(x, g, kernel, stride, pads, dilation, groups):
    """``conv_weight_grad`` of a 1-D, 2-D or 3-D convolution as an implicit GEMM per group
    summed in splits over the output pixels, or of a depthwise one tap by tap in splits (no
    atomics either way); None for what they do not cover."""
    if x.ndim not in (3, 4, 5) or not _conv_dtypes(x, g) or not g.size:
        return None
    xp = xp_of(x)
    depthwise = _depthwise(groups, x.shape[1], 1, x.ndim)
    dims = 2 if depthwise else 3
    x_view, g_view = _lifted(x, dims), _lifted(g, dims)
    o = g.shape[1]
    # (g may have fewer windows than x allows: a transposed convolution's)
    shape = x_view.shape + g_view.shape[1:]
    geometry = _geometry(kernel, stride, pads, dilation, dims)
    sources = _contiguous(xp, x_view, g_view)
    if depthwise:
        splits, taps = depthwise_conv.weight_grad_scratch(shape, geometry)
        partial = xp.empty((o, splits, taps), xp.float32)
        depthwise_conv.depthwise2d_weight_grad(*sources, buffer(partial), shape, geometry)
        gw = (partial[:, 0] if splits == 1 else partial.sum(1))[:, :math.prod(kernel)]
        return gw.astype(x.dtype).reshape((o, 1) + tuple(kernel))
    c = x.shape[1]
    k = c // groups * math.prod(kernel)
    splits, rows = conv.weight_grad_splits(g.size // o, o, k, groups=groups)
    partial = xp.empty((splits, o, k), xp.float32)
    conv.conv3d_weight_grad(*sources, buffer(partial), shape, geometry, splits, rows,
                            not cuda_backend().tf32_gemms_on(), groups)
    gw = partial[0] if splits == 1 else partial.sum(0)
    return gw.astype(x.dtype, copy=False).reshape((o, c // groups) + tuple(kernel))


DEVICE_KERNELS.update({name: fallible(name, kernel) for name, kernel in (
    ("adam", adam), ("sgd", sgd), ("rmsprop", rmsprop), ("adadelta", adadelta),
    ("adagrad", adagrad), ("nadam", nadam), ("radam", radam), ("adamax", adamax),
    ("random", random), ("convolution", convolution), ("convolution_input", convolution_input),
    ("convolution_weight", convolution_weight),
    ("grad_norm", grad_norm), ("scale_all", scale_all))})
