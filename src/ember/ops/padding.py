"""Padding: constant (negative pads crop), reflect, replicate and circular (F.pad).

The non-constant modes are index maps, one per padded dim: the forward gathers along each
dim (``take``), the backward sums each output position back onto its source with a one-hot
matrix product. ``_pad_backward`` is that adjoint; its own derivative is the pad again.
"""

import operator

from ember import _dtype as D
from ember._memory_format import in_order, like_input, preserved, suggested_order
from ember.ops._barebones import WIDE_UNSIGNED_NP, refusal
from ember.ops._kernel_reads import through_input
from ember.ops._registry import op
from ember.ops._scalars import checked_scalar, float_arg

FUNCTIONAL = {}
_MODES = ("constant", "reflect", "replicate", "circular")
_KERNEL = {"reflect": "reflection_pad", "replicate": "replication_pad"}


def _pairs(pad, ndim, constant_nd=False):
    """((dim, low, high), ...) from PyTorch's last-dim-first flat pad list."""
    pad = [_pad_int(p, i, "constant_pad_nd" if constant_nd else "pad") for i, p in enumerate(pad)]
    if len(pad) % 2 and constant_nd:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > ndim and constant_nd:       # sic: PyTorch's message lacks two spaces
        raise RuntimeError(f"Length of pad should be no more than twice the number of "
                           f"dimensions of the input. Pad length is {len(pad)}while the input "
                           f"has {ndim}dimensions.")
    if len(pad) // 2 > ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{ndim}")
    return tuple((ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2))


def _pad_int(value, pos, name):
    """One entry of ``pad`` as an int; PyTorch's TypeError for a float or other non-integer."""
    try:
        return operator.index(value)
    except TypeError:
        kind = type(value).__name__
        if pos:         # PyTorch's argument parser words a later bad element differently
            raise TypeError(f"{name}(): argument 'pad' failed to unpack the object at pos 2 with "
                            f"error \"type must be tuple of ints,but got {kind}\"") from None
        raise TypeError(f"{name}(): argument 'pad' (position 2) must be tuple of ints, but found "
                        f"element of type {kind} at pos 0") from None


def _constant(xp, x, pairs, value):
    shape = list(x.shape)
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    for dim, lo, hi in pairs:
        n = x.shape[dim]
        kept = n + min(lo, 0) + min(hi, 0)
        if kept < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        shape[dim] = n + lo + hi
        src[dim] = slice(max(-lo, 0), max(-lo, 0) + kept)
        dst[dim] = slice(max(lo, 0), max(lo, 0) + kept)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"The input size {x.shape[pairs[0][0]]}, plus negative padding "
                           f"{pairs[0][1]} and {pairs[0][2]} resulted in a negative output size, "
                           f"which is invalid. Check dimension {pairs[0][0]} of your input.")
    grows = any(lo > 0 or hi > 0 for _, lo, hi in pairs)
    # PyTorch converts the value (raising when it does not fit) only when it fills something
    fill = checked_scalar(xp, value, x.dtype) if grows else 0
    out = xp.full(shape, fill, x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return out


def _constant_like(xp, x, pairs, value):
    """A constant pad laid out as PyTorch's: a crop alone (no positive pad) is a narrowed
    view's ``preserve_format`` clone, any other pad follows the input's memory format."""
    out = _constant(xp, x, pairs, value)
    if any(lo > 0 or hi > 0 for _, lo, hi in pairs):
        return like_input(xp, x, out)
    crop = [slice(None)] * x.ndim
    for dim, lo, hi in pairs:
        crop[dim] = slice(-lo, x.shape[dim] + hi)
    return preserved(xp, x[tuple(crop)])


@op("constant_pad_nd(input, pad, value=0)", method=False, saves_inputs=False)
def constant_pad_nd(xp, x, pad, value):
    """Pads the last dims of ``input`` with ``value`` (negative pads crop)."""
    return _constant_like(xp, x, _pairs(pad, x.ndim, True), value)


@constant_pad_nd.derivative
def _(grad, x, pad, value):
    return constant_pad_nd(grad, [-p for p in pad])


def _index_map(xp, n, lo, hi, mode):
    """Source index of each output position along one dim."""
    if mode == "circular":
        start, stop = max(-lo, 0), n - max(-hi, 0)
        return (xp.arange(n + lo + hi) - max(lo, 0)) % (stop - start) + start
    j = xp.arange(-lo, n + hi)
    if mode == "replicate":
        return xp.clip(j, 0, n - 1)
    j = xp.abs(j)                                   # reflect
    return (n - 1) - xp.abs((n - 1) - j)


def _check_mode(x, pairs, mode, value):
    nd = len(pairs)
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    if not 1 <= nd <= 3 or x.ndim not in (nd + 1, nd + 2):
        raise NotImplementedError(
            f"Padding size {2 * nd} is not supported for {x.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    if mode == "circular":
        for dim, lo, hi in pairs:
            n = x.shape[dim]
            if lo > n or hi > n:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            kept = n + min(lo, 0) + min(hi, 0)
            if kept < 0 or (kept == 0 and max(lo, 0) + max(hi, 0) > 0):   # nothing to wrap
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
        return
    if x.dtype.kind == "b" or x.dtype in WIDE_UNSIGNED_NP:     # (ops/_barebones.py)
        raise refusal(f"{_KERNEL[mode]}{nd}d", D.FROM_NUMPY[x.dtype])
    if any(s == 0 for s in x.shape[x.ndim - nd - 1:]):
        raise RuntimeError(f"Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with possibly 0 "
                           f"batch size and other non-zero dimensions for input, but got: "
                           f"[{', '.join(map(str, x.shape))}]")
    if mode == "reflect":
        for dim, lo, hi in pairs:
            if lo >= x.shape[dim] or hi >= x.shape[dim]:
                arg = 4 + 2 * (x.ndim - 1 - dim)        # PyTorch numbers the pad per dim
                raise RuntimeError(f"Argument #{arg}: Padding size should be less than "
                                   f"the corresponding input dimension, but got: padding "
                                   f"({lo}, {hi}) at dimension {dim} of input "
                                   f"[{', '.join(map(str, x.shape))}]")
    sizes = [(dim, x.shape[dim] + lo + hi) for dim, lo, hi in pairs]
    if any(s < 1 for _, s in sizes):
        names = "DHW"[3 - nd:]
        order = sorted(sizes)
        given = ", ".join(f"{a}: {x.shape[d]}" for a, (d, _) in zip(names, order))
        calc = " ".join(f"{a}: {s}" for a, (_, s) in zip(names, order))
        raise RuntimeError(f"input ({given}) is too small. Calculated output {calc}")


@op("pad(input, pad, mode='constant', value=None)", namespace="nn.functional")
def pad(xp, x, pad, mode, value):
    """Pads ``input``: constant (negative pads crop), reflect, replicate or circular."""
    pairs = _pairs(pad, x.ndim)
    if not isinstance(mode, str):       # (PyTorch's Python pad passes it on by position)
        from ember.ops._dims import type_name
        raise TypeError(f"pad(): argument 'mode' (position 3) must be str, not "
                        f"{type_name(mode)}")
    if mode == "constant":
        value = 0 if value is None else float(float_arg(value, "pad", "value", 4))
        return _constant_like(xp, x, pairs, value)
    _check_mode(x, pairs, mode, value)
    out = x
    for dim, lo, hi in pairs:
        if lo or hi:
            out = xp.take(out, _index_map(xp, out.shape[dim], lo, hi, mode), axis=dim)
    if mode == "circular":      # PyTorch composes it from slice copies into a contiguous tensor
        return xp.ascontiguousarray(out) if out is not x else x.copy()
    return like_input(xp, x, out if out is not x else x.copy(order="K"))


@pad.named_by
def _(flat, params, out):                    # PyTorch's kernel per mode and padded rank
    mode, nd = params[1], len(params[0]) // 2
    if mode == "constant":
        return "ConstantPadNdBackward0"
    name = {"reflect": "ReflectionPad", "replicate": "ReplicationPad"}.get(mode)
    return f"{name}{nd}DBackward0" if name else "PadBackward0"


@pad.composed_when_recording
def _(inputs, params):
    """PyTorch's graph of a constant pad: constant_pad_nd's node, which saves no input (the
    other modes' kernels save it)."""
    pad_, mode, value = params
    if mode != "constant":
        return NotImplemented
    x = inputs[0]
    _pairs(pad_, x.ndim)
    value = 0 if value is None else float(float_arg(value, "pad", "value", 4))
    return constant_pad_nd(x, pad_, value)


@pad.derivative
def _(grad, x, pad, mode, value):
    if mode == "constant":
        return constant_pad_nd(grad, [-p for p in pad])
    # PyTorch's reflect/replicate kernels (which save the input) lay the gradient out like it
    if mode == "circular":
        return _circular_grad(grad, list(x.shape), pad)
    laid = suggested_order(x._data) is not None
    g = _pad_backward(grad, list(x.shape), pad, mode, laid)
    name = f"{'ReflectionPad' if mode == 'reflect' else 'ReplicationPad'}{len(pad) // 2}D"
    return through_input(g, x, name + "BackwardBackward0")


def _circular_grad(grad, input_size, pad_):
    """A circular pad's input gradient, one dim's adjoint at a time: PyTorch's is a slice per
    padded dim (SliceBackwardBackward0 each, zero pads too) of its slice copies' gradient."""
    k = len(pad_) // 2
    size = list(grad.shape)
    for i in range(k):
        dim = len(input_size) - 1 - i
        size[dim] = input_size[dim]
        grad = _pad_backward(grad, list(size), [0] * 2 * i + list(pad_[2 * i:2 * i + 2])
                             + [0] * (2 * (k - i - 1)), "circular")
    return grad


# PyTorch's reflect and replicate kernels save the input; its circular pad, slice copies, not
pad.reads_inputs(lambda flat, params: ((),) if params[1] == "circular" else ((0,),))


@op("_pad_backward(grad_output, input_size, pad, mode, channels_last=False)", method=False,
    saves_inputs=False)
def _pad_backward(xp, g, input_size, pad, mode, channels_last=False):
    """The adjoint of a reflect/replicate/circular pad: sums each output onto its source
    (channels-last laid out when ``channels_last``, else row-major)."""
    dtype = g.dtype             # (NumPy's matmul of bfloat16 arrays gives float32)
    for dim, lo, hi in _pairs(pad, len(input_size)):
        if not (lo or hi):
            continue
        n = input_size[dim]
        index = _index_map(xp, n, lo, hi, mode)
        onehot = (index[:, None] == xp.arange(n)[None, :]).astype(g.dtype)
        moved = xp.moveaxis(g, dim, -1)
        g = xp.moveaxis(moved @ onehot, -1, dim)
    g = g.astype(dtype, copy=False)
    if channels_last:
        return in_order(xp, g, (0, *range(2, g.ndim), 1))
    return xp.ascontiguousarray(g)


@_pad_backward.named_by
def _(flat, params, out):                    # PyTorch's backward kernel per mode and rank
    pad_, mode = params[1], params[2]
    name = {"reflect": "ReflectionPad", "replicate": "ReplicationPad"}.get(mode)
    return f"{name}{len(pad_) // 2}DBackwardBackward0" if name else "SliceBackwardBackward0"


@_pad_backward.derivative
def _(ggrad, g, input_size, pad_, mode, channels_last=False):
    k = len(pad_) // 2
    if ggrad.ndim <= k + 2:
        return pad(ggrad, pad_, mode)
    # a vmapped backward's input_size carries the batch dims: fold them into one leading dim
    lead = tuple(ggrad.shape[:-(k + 1)])
    out = pad(ggrad.reshape((-1,) + tuple(ggrad.shape[-(k + 1):])), pad_, mode)
    return out.reshape(lead + tuple(out.shape[1:]))
