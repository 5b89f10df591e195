"""Convolution and transposed convolution in 1, 2 and 3 dims, sharing one N-d implementation.

``convolution`` is PyTorch's generic op; conv1d/2d/3d and conv_transpose1d/2d/3d check the
input rank (accepting unbatched inputs) and call the same kernels. Every derivative is
written with ``convolution`` and ``_convolution_weight``, whose own derivatives are
convolutions again, so gradients of any order exist.
"""


import numpy as np

from ember import _dtype as D

from ember._memory_format import channels_last, channels_last_3d, in_order, suggested_order
from ember.amp._state import suspended
from ember.backend import cudnn_tf32
from ember.backend.blas_threads import one_blas_thread
from ember.ops import fold  # noqa: E402,F401
from ember.ops._conv_args import check_weight_dims, conv_args, transposed_size
from ember.ops._conv_kernels import conv_forward, conv_input_grad, conv_weight_grad
from ember.ops._dims import int_param, int_sequence
from ember.ops._elementwise import conj_grad
from ember.ops._kernel_reads import tied_to
from ember.ops._linalg_utils import torch_name
from ember.ops._scalars import int_arg
from ember.ops._registry import op, rename_node
from ember.ops.padding import constant_pad_nd

FUNCTIONAL = {name: name for name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                      "conv_transpose2d", "conv_transpose3d", "conv_tbc")}
FUNCTIONAL.update(fold.FUNCTIONAL)



def _run(xp, x, w, b, args):
    """The (transposed) convolution of a batched input, plus bias; channels-last when the
    input or the weight is (as PyTorch's)."""
    with one_blas_thread(xp), cudnn_tf32(xp):
        if args.transposed:
            size = transposed_size(x.shape[2:], w.shape[2:], args)
            out = conv_input_grad(xp, x, w, size, args.stride, args.pads, args.dilation,
                                  args.groups, b)
        else:
            out = conv_forward(xp, x, w, args.stride, args.pads, args.dilation, args.groups,
                               b)
    return in_order(xp, out, _conv_order(x, w, args.groups))


def _conv_order(x, w, groups):
    """The memory order of a convolution's output and gradients: channels-last's when its
    input or weight is channels-last, except for 3-d convolutions on the CPU that PyTorch
    runs in its row-major kernels (float64 and integers always; float32 with one image, one
    group, a small input and a kernel at most 3 wide in H or W), else None (row-major)."""
    order = suggested_order(x) or suggested_order(w)
    if order is None or len(order) != 5 or not isinstance(x, np.ndarray):
        return order
    if x.dtype == np.float64 or x.dtype.kind in "iu":
        return None
    n, c, d, h = x.shape[:4]
    if x.dtype == np.float32 and groups == 1 and n == 1 and n * c * d * h <= 20480 \
            and min(w.shape[-1], w.shape[-2]) <= 3:
        return None
    return order


def _laid_out_like(grads, x, w, groups):
    """The input and weight gradients in the convolution's memory format: channels-last when
    its input or weight is (see ``_conv_order``), else row-major."""
    order = _conv_order(x._data, w._data, groups)
    if order is None:
        return [g if g is None or g._data.flags.c_contiguous else g.contiguous()
                for g in grads]
    fmt = channels_last if len(order) == 4 else channels_last_3d
    return [g if g is None or g.ndim != x.ndim else g.contiguous(memory_format=fmt)
            for g in grads]


def _grads(grad, x, w, b, args, need_x=None, need_b=None):
    """(input, weight, bias) gradients of a batched call with symmetric padding."""
    need_x = x.requires_grad if need_x is None else need_x
    need_b = b is not None and b.requires_grad if need_b is None else need_b
    stride, dilation, groups = list(args.stride), list(args.dilation), args.groups
    pad = [lo for lo, _ in args.pads]
    gi = gw = gb = None
    if args.transposed:
        if need_x:
            gi = convolution(grad, conj_grad(w), None, stride, pad, dilation, False, 0, groups)
            if tuple(gi.shape[2:]) != tuple(x.shape[2:]):  # output padding past the stride
                gi = gi[(slice(None), slice(None)) + tuple(slice(0, n) for n in x.shape[2:])]
        if w.requires_grad:
            gw = _convolution_weight(grad, conj_grad(x), list(w.shape[2:]), stride, pad,
                                     dilation, groups)
    else:
        if need_x:
            natural = transposed_size(grad.shape[2:], w.shape[2:], args)
            opad = [s - n for s, n in zip(x.shape[2:], natural)]
            gi = convolution(grad, conj_grad(w), None, stride, pad, dilation, True, opad,
                             groups)
        if w.requires_grad:
            gw = _convolution_weight(conj_grad(x), grad, list(w.shape[2:]), stride, pad,
                                     dilation, groups)
    if need_b:
        gb = grad.sum([0] + list(range(2, grad.ndim)))
    gi, gw = _laid_out_like((gi, gw), x, w, groups)
    # under create_graph: PyTorch's one convolution_backward node, which takes x and w
    gi, gw, gb = (tied_to(g, (x, w), _DOUBLE) for g in (gi, gw, gb))
    for g in (gi, gw, gb):
        if g is not None:
            rename_node(g, _DOUBLE)
    return gi, gw, gb


_DOUBLE = "ConvolutionBackwardBackward0"


@op("convolution(input, weight, bias=None, stride=1, padding=0, dilation=1, transposed=False, "
    "output_padding=0, groups=1)", inputs=3, method=False, grad_fn_name="ConvolutionBackward0")
def convolution(xp, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """The N-d convolution (or transposed convolution) behind every conv op."""
    if isinstance(padding, str):
        raise TypeError("convolution(): argument 'padding' must be tuple of ints, not str")
    args = conv_args("convolution", x, w, b, stride, padding, dilation, groups, transposed,
                     output_padding)
    if b is not None and b.dtype != x.dtype:
        return _add_bias_in_place(xp, _run(xp, x, w, None, args), b)
    return _run(xp, x, w, b, args)


@convolution.derivative
def _(grad, x, w, b, stride, padding, dilation, transposed, output_padding, groups, *, needs):
    # (the bias, checked by the forward, is its metadata here)
    args = conv_args("convolution", x._data, w._data, None, stride, padding, dilation, groups,
                     transposed, output_padding)
    return _grads(grad, x, w, b, args, need_b=needs[2])


convolution.reads_inputs((0, 1, 2), (0, 1, 2), ())  # PyTorch saves the bias's size alone


@op("_convolution_weight(input, grad_output, kernel_size, stride, padding, dilation, groups)",
    inputs=2, method=False, grad_fn_name=_DOUBLE)
def _convolution_weight(xp, x, g, kernel_size, stride, padding, dilation, groups):
    """The gradient of a convolution with respect to its weight."""
    pads = tuple((p, p) for p in padding)
    with one_blas_thread(xp), cudnn_tf32(xp):
        return conv_weight_grad(xp, x, g, tuple(kernel_size), tuple(stride), pads,
                                tuple(dilation), groups)


@_convolution_weight.derivative
def _(ggw, x, g, kernel_size, stride, padding, dilation, groups):
    gx = gg = None
    if x.requires_grad:
        natural = [(p - 1) * s - 2 * q + d * (k - 1) + 1
                   for p, s, q, d, k in zip(g.shape[2:], stride, padding, dilation, kernel_size)]
        # the transposed convolution's output padding (below stride or dilation) reaches the
        # rows a transposed convolution's own output padding added to x; rows of x past the
        # reach of g's windows get no gradient: pad them with zeros
        opad = [min(s - n, max(st, d) - 1)
                for s, n, st, d in zip(x.shape[2:], natural, stride, dilation)]
        gx = convolution(conj_grad(g), ggw, None, stride, padding, dilation, True, opad, groups)
        rest = [s - n - p for s, n, p in zip(x.shape[2:], natural, opad)]
        if any(rest):
            gx = constant_pad_nd(gx, [v for r in reversed(rest) for v in (0, r)])
    if g.requires_grad:
        gg = convolution(conj_grad(x), ggw, None, stride, padding, dilation, False, 0, groups)
        gg = gg[(Ellipsis,) + tuple(slice(0, n) for n in g.shape[2:])]
    return gx, gg


def _add_bias_in_place(xp, out, b):
    """``out`` plus a bias of another dtype, as PyTorch's 1-d and 2-d transposed convolution
    kernels add it (in place: computed in the promoted dtype, cast to ``out``'s)."""
    compute = D.promote_types(D.FROM_NUMPY[out.dtype], D.FROM_NUMPY[b.dtype]).np
    out[...] = out.astype(compute) + b.astype(compute).reshape((1, -1) + (1,) * (out.ndim - 2))
    return out


def _conv_op(nd, transposed):
    """Register conv{nd}d or conv_transpose{nd}d over the shared implementation."""
    name = f"conv_transpose{nd}d" if transposed else f"conv{nd}d"
    if transposed:
        sig = (f"{name}(input, weight, bias=None, stride=1, padding=0, output_padding=0, "
               f"groups=1, dilation=1)")
    else:
        sig = f"{name}(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)"

    def check(x, w, b, stride, padding, dilation, groups, output_padding, warn=True):
        if transposed:      # PyTorch's parser reads these first (positions in its method form)
            stride, padding, output_padding = (
                v if type(v) is int else int_sequence(v, (name, what, pos)) for v, what, pos in
                ((stride, "stride", 3), (padding, "padding", 4),
                 (output_padding, "output_padding", 5)))
            if type(groups) is not int:
                groups = int_param(groups, (name, "groups", 6))
            if type(dilation) is not int:
                dilation = int_sequence(dilation, (name, "dilation", 7))
        if x.ndim not in (nd + 1, nd + 2):
            raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input "
                               f"to {name}, but got input of size: "
                               f"[{', '.join(map(str, x.shape))}]")
        xb = x if x.ndim == nd + 2 else x[None]
        check_weight_dims(nd, xb, w, stride, padding, dilation, output_padding)
        return xb, conv_args(name, xb, w, b, stride, padding, dilation, groups, transposed,
                             output_padding, warn)

    def forward(xp, x, w, b, *params):
        stride, padding, dilation, groups, opad = _params(params)
        xb, args = check(x, w, b, stride, padding, dilation, groups, opad)
        if b is not None and b.dtype != x.dtype:
            out = _add_bias_in_place(xp, _run(xp, xb, w, None, args), b)
        else:
            out = _run(xp, xb, w, b, args)
        return out if xb is x else out[0]

    def derivative(grad, x, w, b, *params, needs):
        stride, padding, dilation, groups, opad = _params(params)
        unbatched = x.ndim == nd + 1
        # (the bias, checked by the forward, is its metadata here)
        xb, args = check(x._data, w._data, None, stride, padding, dilation, groups, opad, False)
        xt = x.unsqueeze(0) if unbatched else x
        grad = grad.unsqueeze(0) if unbatched else grad
        extra = [hi - lo for lo, hi in args.pads]
        if any(extra):                  # 'same' with an even extent: pad the high side
            flat = [v for e in reversed(extra) for v in (0, e)]
            xt = constant_pad_nd(xt, flat)
            args.pads = tuple((lo, lo) for lo, _ in args.pads)
        gi, gw, gb = _grads(grad, xt, w, b, args, x.requires_grad, needs[2])
        if gi is not None:
            if any(extra):              # PyTorch crops the padded input's gradient by a pad
                gi = constant_pad_nd(gi, [-v for v in flat])
            if unbatched:
                gi = gi.squeeze(0)
        return gi, gw, gb

    if transposed:
        def _params(p):
            stride, padding, output_padding, groups, dilation = p
            return stride, padding, dilation, groups, output_padding
    else:
        def _params(p):
            stride, padding, dilation, groups = p
            return stride, padding, dilation, groups, 0

    what = "transposed convolution" if transposed else "convolution"
    forward.__doc__ = f"Applies a {nd}-d {what} over an input signal of several planes."
    forward.__name__ = name
    registered = op(sig, inputs=3, method=False, grad_fn_name="ConvolutionBackward0")(forward)
    registered.derivative(derivative)
    registered.reads_inputs((0, 1, 2), (0, 1, 2), ())  # PyTorch saves the bias's size alone
    # PyTorch adds a batch dim to an unbatched input and squeezes it off the result
    registered.named_by(lambda flat, params, out: "SqueezeBackward1" if flat[0].ndim == nd + 1
                        else "ConvolutionBackward0")
    return registered


def _tbc_check(x, w, b, pad):
    """PyTorch's checks of conv_tbc's arguments; returns the output length."""
    if x.ndim != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if w.ndim != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, "
                           "out_channels.")
    if b.ndim != 1:
        raise RuntimeError("Bias must be 1-D")
    if x.shape[2] != w.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if w.shape[2] != b.shape[0]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    length = x.shape[0] + 2 * pad - w.shape[0] + 1
    shape = (length, x.shape[1], w.shape[2])
    if length < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {length}: "
                           f"{list(shape)}")
    if w.dtype != x.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{torch_name(x)} and {torch_name(w)}")
    return shape


@op("conv_tbc(input, weight, bias, pad=0)", inputs=3, method=False)
def conv_tbc(xp, x, w, b, pad):
    """A 1-d convolution of a (time, batch, in_channels) input with a (kernel_width,
    in_channels, out_channels) weight, ``pad`` zeros at both ends of the time dimension."""
    pad = int_arg(pad, "conv_tbc", "pad", 4)
    shape = _tbc_check(x, w, b, pad)
    bias = b.astype(x.dtype, copy=False)
    if 0 in shape or 0 in w.shape:                  # no products: the bias alone
        return xp.broadcast_to(bias, shape).copy()
    if pad < 0:                                     # a negative pad crops the input
        x, pad = x[-pad:x.shape[0] + pad], 0
    with one_blas_thread(xp), cudnn_tf32(xp):
        out = conv_forward(xp, x.transpose(1, 2, 0), w.transpose(2, 1, 0), (1,), ((pad, pad),),
                           (1,), 1, bias)
    return xp.ascontiguousarray(out.transpose(2, 0, 1))


@conv_tbc.derivative
def _(grad, x, w, b, pad, *, needs=(True, True, True)):
    # PyTorch's kernel for it (conv_tbc_backward) is no autocast op: a backward run inside an
    # autocast region computes it in the gradients' dtypes
    with suspended():
        return _conv_tbc_grad(grad, x, w, b, pad, needs)


def _conv_tbc_grad(grad, x, w, b, pad, needs):
    # both gradients are conv_tbc's again: the input's correlates the gradient with the
    # flipped weight, the weight's correlates the input (channels as the batch) with it
    gx = gw = gb = None
    if needs[0]:
        flipped = conj_grad(w).flip(0).transpose(1, 2)
        gx = conv_tbc(grad, flipped, grad.new_zeros(x.shape[2]), w.shape[0] - 1 - pad)
    if needs[1]:
        gw = conv_tbc(conj_grad(x).transpose(1, 2), grad, grad.new_zeros(grad.shape[2]), pad)
    if needs[2]:
        gb = grad.sum((0, 1)).to(b.dtype)
    return gx, gw, gb


conv1d = _conv_op(1, False)
conv2d = _conv_op(2, False)
conv3d = _conv_op(3, False)
conv_transpose1d = _conv_op(1, True)
conv_transpose2d = _conv_op(2, True)
conv_transpose3d = _conv_op(3, True)
