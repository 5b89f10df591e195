"""Checking and normalizing convolution arguments, with PyTorch's messages."""

import operator

from ember import _dtype as D
from ember._warn import warn_once
from ember.autograd.graph import _type_string
from ember.backend import device_of
from ember.backend.cpu_kernels import get_num_threads
from ember.ops._conv_kernels import output_size
from ember.ops._out_dtypes import _C_NAMES

__all__ = ["ConvArgs", "check_weight_dims", "conv_args"]


class ConvArgs:
    """Normalized convolution parameters: one int per spatial dim, pads as (low, high)."""

    __slots__ = ("stride", "pads", "dilation", "groups", "output_padding", "transposed")

    def __init__(self, stride, pads, dilation, groups, output_padding, transposed):
        self.stride = stride
        self.pads = pads
        self.dilation = dilation
        self.groups = groups
        self.output_padding = output_padding
        self.transposed = transposed

    @property
    def symmetric(self):
        return all(lo == hi for lo, hi in self.pads)


def _int(value, name, position=None):
    """``value`` (the item at 1-based ``position`` of a sequence, if given) as an int; a float,
    which int() would truncate, raises PyTorch's parser's TypeError: its check of a sequence
    reads the first item, and a later bad one fails the unpacking."""
    try:
        return operator.index(value)
    except TypeError:
        if position is None or position == 1:
            kind = type(value).__name__ if position is None else "tuple"
            raise TypeError(f"argument '{name}' must be tuple of ints, not {kind}") from None
        raise TypeError(f"argument '{name}' failed to unpack the object at pos {position} with "
                        f"error \"type must be tuple of ints,but got {type(value).__name__}\""
                        ) from None


def _expand(value, n, name):
    if isinstance(value, (list, tuple)):
        value = [_int(v, name, i) for i, v in enumerate(value, 1)]
        if len(value) == 1:
            value = value * n
        elif len(value) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                               f"values to match the convolution dimensions, but got "
                               f"{name}={value}")
        return tuple(value)
    return (_int(value, name),) * n


def _size(shape):
    return f"[{', '.join(str(s) for s in shape)}]"


def check_weight_dims(nd, x, w, stride, padding, dilation, output_padding):
    """PyTorch's first complaint when conv{nd}d's weight is not (nd + 2)-d: its parser made each
    int argument a list of nd values, which must hold 1 or ``w.ndim - 2`` values (checked in
    this order); padding='same' checks the input's dims instead, in its own wording."""
    if w.ndim == nd + 2:
        return
    if padding == "same":
        raise RuntimeError(f"Expected {w.ndim}-dimensional input for {w.ndim}-dimensional weight"
                           f"{_size(w.shape)}, but got {x.ndim}-dimensional input of size "
                           f"{_size(x.shape)} instead")
    padding = 0 if padding == "valid" else padding
    for name, value in (("stride", stride), ("padding", padding), ("dilation", dilation),
                        ("output_padding", output_padding)):
        if type(value) is int:
            value = [value] * nd
        elif not isinstance(value, (list, tuple)):
            return                      # conv_args raises the parser's TypeError
        if len(value) not in (1, w.ndim - 2):
            raise RuntimeError(f"expected {name} to be a single integer value or a list of "
                               f"{w.ndim - 2} values to match the convolution dimensions, but "
                               f"got {name}={list(value)}")


def conv_args(name, x, w, b, stride, padding, dilation, groups, transposed=False,
              output_padding=0, warn=True):
    """Validate a batched call (x has its batch dim) and return ConvArgs."""
    nd = w.ndim - 2
    if x.ndim != w.ndim:
        raise RuntimeError(f"Expected {w.ndim}-dimensional input for {w.ndim}-dimensional weight "
                           f"{_size(w.shape)}, but got {x.ndim}-dimensional input of size "
                           f"{_size(x.shape)} instead")
    if padding == "same" and not transposed:    # checked first by PyTorch's 'same' function
        if groups <= 0:
            raise RuntimeError("non-positive groups is not supported")
        if any(s != 1 for s in _expand(stride, nd, "stride")):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
    bias_first = not transposed     # PyTorch's convolution checks the bias before the weight
    if bias_first and b is not None and b.dtype != x.dtype:
        raise RuntimeError(_bias_message(x, b))
    # complex inputs compare the weight's type first; the others only in their kernel, after
    # the arguments' and shapes' checks
    if x.dtype != w.dtype and x.dtype.kind == "c":
        raise RuntimeError(_weight_message(x, w))
    if transposed and x.dtype.kind == "c" and b is not None and b.dtype != x.dtype:
        raise RuntimeError(_typed_message(x, b, "bias"))
    stride = _expand(stride, nd, "stride")
    dilation = _expand(dilation, nd, "dilation")
    kernel = w.shape[2:]
    if isinstance(padding, str):
        pads = _string_padding(padding, stride, dilation, kernel, transposed, warn)
    else:
        pads = tuple((p, p) for p in _expand(padding, nd, "padding"))
    opad = _expand(output_padding, nd, "output_padding")
    if any(lo < 0 for lo, _ in pads):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in opad):
        raise RuntimeError("negative output_padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if transposed:
        _check_transposed(x, w, b, groups)
        if any(p >= s and p >= d for p, s, d in zip(opad, stride, dilation)):
            raise RuntimeError(_opad_message(opad, stride, dilation))
        _check_transposed_size(x, w, groups, stride, pads, dilation, opad)
    else:
        _check_forward(x, w, b, groups, kernel, pads, dilation)
    # CPU has no kernel for bool, nor a transposed or dilated one for narrow ints
    kernel_name = _missing_kernel(nd, x.dtype, transposed, dilation)
    if kernel_name is not None:
        raise NotImplementedError(f"\"{kernel_name}\" not implemented for "
                                  f"'{_dtype_name(x.dtype)}'")
    if x.dtype != w.dtype:
        raise RuntimeError(_typed_message(x, w, "weight") if _mkldnn(x, w, stride, dilation, groups)
                           else _weight_message(x, w))
    if transposed and b is not None and b.dtype != x.dtype:
        _check_transposed_bias(x, b, nd, _mkldnn(x, w, stride, dilation, groups))
    return ConvArgs(stride, pads, dilation, groups, opad, transposed)


def _mkldnn(x, w, stride, dilation, groups):
    """Whether PyTorch runs a float32 convolution (transposed or not) on the CPU in its MKLDNN
    kernel (whose checks of the weight's and bias's types name tensor types): one that is not a
    single-threaded unstrided 1x1 one of under 16 images, with several groups or images, a
    kernel over 3 wide in both of its last two dims, or a large input (its first four dims;
    a 1-d convolution is run as a 2-d one of unit height)."""
    if x.dtype != D.float32.np or device_of(x).type == "cuda":
        return False
    n, c = x.shape[:2]
    high, wide = ((1,) + tuple(w.shape[2:]))[-2:]
    rows, cols = ((1,) + tuple(x.shape[2:]))[-2:] if x.ndim == 3 else x.shape[2:4]
    if not (any(s > 1 for s in stride) or any(d > 1 for d in dilation) or n >= 16
            or high != 1 or wide != 1 or get_num_threads() > 1):
        return False
    return groups > 1 or n > 1 or high > 3 and wide > 3 or n * c * rows * cols > 20480


def _check_transposed_bias(x, b, nd, mkldnn):
    """PyTorch's errors for a transposed convolution's bias of another dtype than its input,
    after the arguments' checks. The MKLDNN, reduced-float and complex paths check the type;
    the 3-d kernel the scalar type; the 1-d and 2-d kernels add the bias in place, so it need
    only cast (the forward casts it)."""
    if device_of(x).type == "cuda":
        raise RuntimeError(_bias_message(x, b))
    if mkldnn or _dtype_name(x.dtype) in ("Half", "BFloat16"):
        raise RuntimeError(_typed_message(x, b, "bias"))
    if nd == 3:
        raise RuntimeError(f"expected scalar type {_dtype_name(x.dtype)} but found "
                           f"{_dtype_name(b.dtype)}")
    want, got = D.FROM_NUMPY[x.dtype], D.FROM_NUMPY[b.dtype]
    promoted = D.promote_types(want, got)
    if not D.can_cast(promoted, want):
        raise RuntimeError(f"result type {promoted._torch_name} can't be cast to the desired "
                           f"output type {want._torch_name}")


def _missing_kernel(nd, dtype, transposed, dilation):
    """The CPU kernel PyTorch picks for ``dtype`` and finds no implementation in, or None."""
    boolean = dtype.kind == "b"
    if not boolean and not (dtype.kind in "iu" and dtype.itemsize < 8):
        return None
    if transposed:
        return f"slow_conv_transpose{max(nd, 2)}d_out_cpu"
    if any(d != 1 for d in dilation):
        return "slow_conv_dilated<>"
    if boolean:
        return "compute_columns3d" if nd == 3 else "slow_conv2d_cpu"
    return None


def _dtype_name(dtype):
    return D.FROM_NUMPY[dtype]._torch_name


def _weight_message(x, w):
    """PyTorch's complaint about a weight of another dtype: the float32/float64/integer kernels
    name scalar types; half, bfloat16 and complex inputs fail an earlier check that names the
    tensor types (with a note about MKLDNN for the reduced floats). Checked on CPU only: GPU
    inputs keep the scalar-type wording."""
    checked = x.dtype.kind == "c" or _dtype_name(x.dtype) in ("Half", "BFloat16")
    if not checked or device_of(x).type == "cuda":
        return f"expected scalar type {_dtype_name(x.dtype)} but found {_dtype_name(w.dtype)}"
    return _typed_message(x, w, "weight")


def _typed_message(x, other, what):
    """PyTorch's check of a ``what`` (weight or bias) tensor's type against the input's, by
    tensor types (on the MKLDNN path, with a note about MKLDNN tensors; not for complex)."""
    text = (f"Input type ({_type_string(D.FROM_NUMPY[x.dtype])}) and {what} type "
            f"({_type_string(D.FROM_NUMPY[other.dtype])}) should be the same")
    if x.dtype.kind == "c":
        return text
    return text + f" or input should be a MKLDNN tensor and {what} is a dense tensor"


def _bias_message(x, b):
    x_name, b_name = (_C_NAMES[D.FROM_NUMPY[t.dtype]] for t in (x, b))
    return f"Input type ({x_name}) and bias type ({b_name}) should be the same"


def _string_padding(padding, stride, dilation, kernel, transposed, warn):
    if transposed:
        raise TypeError("conv_transpose(): argument 'padding' must be tuple of ints, not str")
    if padding == "valid":
        return tuple((0, 0) for _ in kernel)
    if padding != "same":
        raise RuntimeError(f"Invalid padding string: '{padding}'")
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    pads = []
    for d, k in zip(dilation, kernel):
        total = d * (k - 1)
        pads.append((total // 2, total - total // 2))
    if warn and any(lo != hi for lo, hi in pads):
        warn_once("Using padding='same' with even kernel lengths and odd dilation may "
                  "require a zero-padded copy of the input be created")
    return tuple(pads)


def _check_weight(w, groups):
    if w.shape[0] < groups or w.shape[0] == 0:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {_size(w.shape)} instead")
    if w.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{_size(w.shape)}] instead")


def _check_forward(x, w, b, groups, kernel, pads, dilation):
    _check_weight(w, groups)
    if x.shape[1] != w.shape[1] * groups:
        # ('same' with an even extent: PyTorch pads the input's high side first)
        shown = list(x.shape[:2]) + [s + hi - lo for s, (lo, hi) in zip(x.shape[2:], pads)]
        raise RuntimeError(f"Given groups={groups}, weight of size {_size(w.shape)}, expected "
                           f"input{_size(shown)} to have {w.shape[1] * groups} channels, but "
                           f"got {x.shape[1]} channels instead")
    if b is not None and (b.ndim != 1 or b.shape[0] != w.shape[0]):
        raise RuntimeError(f"Given weight of size {_size(w.shape)}, expected bias to be "
                           f"1-dimensional with {w.shape[0]} elements, but got bias of size "
                           f"{_size(b.shape)} instead")
    padded = [s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads)]
    extent = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    if any(p < e for p, e in zip(padded, extent)):
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, extent))}). Kernel size can't be greater "
                           f"than actual input size")


def _check_transposed(x, w, b, groups):
    _check_weight(w, groups)
    if x.shape[1] != w.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {_size(w.shape)}, expected "
                           f"input{_size(x.shape)} to have {w.shape[0]} channels, but got "
                           f"{x.shape[1]} channels instead")
    out_channels = w.shape[1] * groups
    if b is not None and (b.ndim != 1 or b.shape[0] != out_channels):
        raise RuntimeError(f"Given transposed=1, weight of size {_size(w.shape)}, expected bias "
                           f"to be 1-dimensional with {out_channels} elements, but got bias of "
                           f"size {_size(b.shape)} instead")


def _check_transposed_size(x, w, groups, stride, pads, dilation, opad):
    """PyTorch's complaint about a transposed convolution's output of a non-positive size (1-d
    run as 2-d of unit height). An empty input only sizes its result, and MKLDNN's kernel
    takes an empty one: neither may be negative."""
    size = [(s - 1) * st - lo - hi + d * (k - 1) + op + 1 for s, k, st, (lo, hi), d, op in
            zip(x.shape[2:], w.shape[2:], stride, pads, dilation, opad)]
    given = list(x.shape[2:])
    if len(size) == 1:
        given, size = [1] + given, [1] + size
    if x.shape[0] == 0 or x.shape[1] == 0:    # (PyTorch views an empty result as this)
        shape = [x.shape[0], w.shape[1] * groups] + size
        inferred = [i for i, s in enumerate(shape) if s == -1]
        for i, s in enumerate(shape):
            if s < -1 or s == -1 and i != inferred[0]:
                raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape "
                                   f"{_size(shape)}" if s < -1 else
                                   "only one dimension can be inferred")
        if inferred and x.shape[0] == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {_size(shape)} "
                               f"because the unspecified dimension size -1 can be any value "
                               f"and is ambiguous")
        return
    if all(s > 0 for s in size):
        return
    mkldnn = _mkldnn(x, w, stride, dilation, groups)
    if mkldnn and all(s >= 0 for s in size):
        return
    if mkldnn:
        raise RuntimeError("could not construct a memory descriptor using a format tag")
    raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, given))}). "
                       f"Calculated output size per channel: ({' x '.join(map(str, size))}). "
                       f"Output size is too small")


_AXES = {1: ("width",), 2: ("height", "width"), 3: ("depth", "height", "width")}


def _opad_message(opad, stride, dilation):
    if len(opad) == 1:  # PyTorch runs 1-d as 2-d with a unit height, and says so
        opad, stride, dilation = (0, *opad), (1, *stride), (1, *dilation)
    axes = _AXES[len(opad)]
    parts = [f"output_padding_{a}: {p}" for a, p in zip(axes, opad)]
    parts += [f"stride_{a}: {s}" for a, s in zip(axes, stride)]
    parts += [f"dilation_{a}: {d}" for a, d in zip(axes, dilation)]
    return "output padding must be smaller than either stride or dilation, but got " + \
        " ".join(parts)


def transposed_size(size, kernel, args):
    """Spatial output size of a transposed convolution."""
    return tuple((s - 1) * st - lo - hi + d * (k - 1) + op + 1
                 for s, k, st, (lo, hi), d, op in zip(size, kernel, args.stride, args.pads,
                                                      args.dilation, args.output_padding))


def forward_size(size, kernel, args):
    """Spatial output size of a convolution."""
    return output_size(size, kernel, args.stride, args.pads, args.dilation)
