"""F.unfold (im2col) and F.fold (col2im): each is the other's adjoint, hence its derivative."""

import math

from ember.ops._conv_kernels import col2im, im2col
from ember.ops._conv_kernels import output_size as _block_counts   # fold has an output_size
from ember.ops._registry import op

FUNCTIONAL = {}
_AXES = ("height", "width")


def _pair(value, name):
    value = tuple(int(v) for v in value) if isinstance(value, (list, tuple)) else \
        (int(value),) * 2
    if len(value) != 2:
        raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(value)}")
    return value


def _params(kernel_size, dilation, padding, stride):
    kernel = _pair(kernel_size, "kernel_size")
    dilation = _pair(dilation, "dilation")
    padding = _pair(padding, "padding")
    stride = _pair(stride, "stride")
    for what, values, bad, rule in (("kernel size", kernel, lambda v: v <= 0, "greater than zero"),
                                    ("stride", stride, lambda v: v <= 0, "greater than zero"),
                                    ("dilation", dilation, lambda v: v <= 0, "greater than zero"),
                                    ("padding", padding, lambda v: v < 0, "non-negative")):
        if any(bad(v) for v in values):
            short = {"kernel size": "kernel", "padding": "pad"}.get(what, what)
            got = " ".join(f"{short}_{a}: {v}" for a, v in zip(_AXES, values))
            raise RuntimeError(f"{what} should be {rule}, but got {got}")
    return kernel, dilation, tuple((p, p) for p in padding), stride


def _blocks(size, kernel, dilation, pads, stride, what):
    blocks = _block_counts(size, kernel, stride, pads, dilation)
    if any(b < 1 for b in blocks):
        raise RuntimeError(f"Given {what} spatial size {tuple(size)}, kernel_size={kernel}, "
                           f"dilation={dilation}, padding={tuple(p for p, _ in pads)}, "
                           f"calculated shape of the array of sliding blocks as {blocks}, but "
                           f"its components must be at least one.")
    return blocks


def _no_int(x, kernel):
    if x.dtype.kind in "iu":
        name = "im2col_out_cpu" if kernel == "im2col" else "col2im_out_cpu"
        from ember import _dtype as D
        raise NotImplementedError(f"\"{name}\" not implemented for "
                                  f"'{D.FROM_NUMPY[x.dtype]._torch_name}'")


@op("unfold(input, kernel_size, dilation=1, padding=0, stride=1)", namespace="nn.functional",
    saves_inputs=False)
def unfold(xp, x, kernel_size, dilation, padding, stride):
    """Extracts sliding local blocks: (N, C, H, W) -> (N, C*kh*kw, L)."""
    if x.ndim == 2:
        raise IndexError("Dimension out of range (expected to be in range of [-2, 1], but got 2)")
    kernel, dilation, pads, stride = _params(kernel_size, dilation, padding, stride)
    if x.ndim not in (3, 4) or any(s == 0 for s in x.shape[-3:]):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           f"and other non-zero dimensions for input, but got: "
                           f"[{', '.join(map(str, x.shape))}]")
    _no_int(x, "im2col")
    batched = x if x.ndim == 4 else x[None]
    _blocks(batched.shape[2:], kernel, dilation, pads, stride, "input with")
    cols, out = im2col(xp, batched, kernel, stride, pads, dilation)
    b, c = batched.shape[:2]
    res = cols.reshape(b, c * math.prod(kernel), math.prod(out))
    return res if x.ndim == 4 else res[0]


@unfold.derivative
def _(grad, x, kernel_size, dilation, padding, stride):
    return fold(grad, list(x.shape[-2:]), kernel_size, dilation, padding, stride)


unfold.name_nodes("Im2ColBackward0")         # PyTorch's kernel names


@op("fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1)",
    namespace="nn.functional", saves_inputs=False)
def fold(xp, x, output_size, kernel_size, dilation, padding, stride):
    """Combines sliding local blocks into a tensor: (N, C*kh*kw, L) -> (N, C, H, W)."""
    size = _pair(output_size, "output_size")
    kernel, dilation, pads, stride = _params(kernel_size, dilation, padding, stride)
    if x.ndim not in (2, 3) or any(s == 0 for s in x.shape[-2:]):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"[{', '.join(map(str, x.shape))}]")
    _no_int(x, "col2im")
    k = math.prod(kernel)
    if x.shape[-2] % k:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={x.shape[-2]} and "
                           f"kernel_size={kernel}.")
    blocks = _block_counts(size, kernel, stride, pads, dilation)
    given = (f"Given output_size={size}, kernel_size={kernel}, dilation={dilation}, "
             f"padding={tuple(p for p, _ in pads)}, stride={stride}")
    if x.shape[-1] != math.prod(blocks):
        raise RuntimeError(f"{given}, expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
                           f"{math.prod(blocks)}, but got input.size(2)={x.shape[-1]}.")
    if any(b < 1 for b in blocks):
        raise RuntimeError(f"{given}, calculated shape of the array of sliding blocks as "
                           f"{tuple(blocks)}, which is too small (non-positive)")
    batched = x if x.ndim == 3 else x[None]
    dtype = batched.dtype
    if dtype.kind == "b" or dtype.itemsize < 4:    # bool as counts, 16-bit floats in float32
        batched = batched.astype("uint8" if dtype.kind == "b" else "float32")
    cols = batched.reshape((batched.shape[0], batched.shape[1] // k) + kernel + blocks)
    res = col2im(xp, cols, size, stride, pads, dilation)
    if res.dtype != dtype:
        res = res.astype(dtype)
    res = xp.ascontiguousarray(res)
    return res if x.ndim == 3 else res[0]


@fold.derivative
def _(grad, x, output_size, kernel_size, dilation, padding, stride):
    return unfold(grad, kernel_size, dilation, padding, stride)


fold.name_nodes("Col2ImBackward0")
