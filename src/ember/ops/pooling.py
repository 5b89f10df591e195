"""Max and average pooling over 1, 2 or 3 spatial dims (``F.max_pool2d``, ``F.avg_pool2d``).

Max pooling is a sweep over the kernel offsets' strided views (ops/_max_sweep.py) giving the
values and their flat plane indices; its gradient is a scatter-add through the indices
(ops/_pool_index.py). Average pooling is a separable linear map (ops/_separable.py).
"""

import numpy as np

from ember._memory_format import averaged_grad_order, like_input, like_input_1d
from ember.autograd.grad_mode import STATE as _GRAD

from ember.ops import adaptive_pooling, fractional_pooling, unpooling  # noqa: E402,F401
from ember.ops._pool_args import (check_rank, check_window_padding, output_sizes,
                                  pool_geometry, reject_dtype, tuple_arg, window_mats)
from ember.ops._max_sweep import max_sweep
from ember.ops._pool_index import max_pool_grad
from ember.ops._kernel_reads import through_input
from ember.ops._registry import REGISTRY, op, rename_node
from ember.ops._separable import _along_dims, apply_mats, transposed

__all__ = ["max_pool1d_with_indices", "avg_pool1d"]

_MAX_RANK = {1: "Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                "input, but got:{}",
             2: "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
                "input, but got:{}",
             3: "Expected 4D or 5D (batch mode) tensor with optional 0 dim batch size for "
                "input, but got:{}"}
_NONEMPTY = {2: "non-empty 3D or 4D (batch mode) tensor expected for input",
             3: "non-empty 4D or 5D (batch mode) tensor expected for input"}


def _check_rank(name, nd, x):
    if nd == 1 and x.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {x.ndim}-dimensional tensor "
                           f"for argument #1 'self' (while checking arguments for {name})")
    if nd > 1 and x.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(_NONEMPTY[nd])
    check_rank(x.shape, nd, _MAX_RANK[nd])


def _max_args(nd, x, kernel_size, stride, padding, dilation, ceil_mode):
    name = f"max_pool{nd}d"
    style = "arg" if nd == 1 else None
    k = tuple_arg(name, "kernel_size", kernel_size, nd, style=style)
    s = tuple_arg(name, "stride", stride, nd, optional=True, style=style) or k
    p = tuple_arg(name, "padding", padding, nd, style=style)
    d = tuple_arg(name, "dilation", dilation, nd, style=style)
    _check_rank(name, nd, x)
    reject_dtype(f"max_pool{max(nd, 2)}d", x.dtype, "fiuV")     # (1-D pools as 2-D)
    return k, s, p, d, pool_geometry(x.shape, nd, k, s, p, d, ceil_mode)


def _max_pool(xp, x, nd, kernel_size, stride, padding, dilation, ceil_mode):
    """(values, flat plane indices) of max pooling ``x`` over its trailing ``nd`` dims."""
    k, s, p, d, out = _max_args(nd, x, kernel_size, stride, padding, dilation, ceil_mode)
    return max_sweep(xp, x, nd, k, s, p, d, out)


def _max_pool_op(nd, namespace):
    name = f"max_pool{nd}d_with_indices"
    extra = ", return_indices=False" if namespace else ""

    def forward(xp, x, kernel_size, stride, padding, dilation, ceil_mode, *unused):
        laid = like_input_1d if nd == 1 else like_input
        return laid(xp, x, _max_pool(xp, x, nd, kernel_size, stride, padding, dilation, ceil_mode))
    forward.__doc__ = f"{nd}-D max pooling: (values, flat spatial indices of the maxima)."
    registered = op(f"{name}(input, kernel_size, stride=None, padding=0, dilation=1, "
                    f"ceil_mode=False{extra})", method=False,
                    namespace=namespace, grad_fn_name=f"MaxPool{nd}DWithIndicesBackward0")(forward)

    @registered.derivative(outputs=(1,))        # the indices: the values may change in place
    def _(grads, x, kernel_size, stride, padding, dilation, *rest, out):
        k = tuple_arg("", "", kernel_size, nd)
        s = tuple_arg("", "", stride, nd, optional=True) or k
        d = tuple_arg("", "", dilation, nd)
        disjoint = all(si >= di * (ki - 1) + 1 for ki, si, di in zip(k, s, d))
        return max_pool_grad(grads[0], x, out[1], nd, "max_pool", disjoint)
    return registered


def _avg_args(nd, x, kernel_size, stride, padding, ceil_mode, divisor_override, gpu=False):
    """Checked (kernel, stride, padding, output size); ``x`` has .shape, .ndim and a NumPy
    .dtype, or a None dtype when the call was checked already (derivatives). ``gpu``: the
    input is on a GPU, where PyTorch's 3-D average pooling takes 16-bit floats too."""
    name = f"avg_pool{nd}d"
    if nd == 1:
        k = tuple_arg(name, "kernel_size", kernel_size, 1, style="arg")
        s = tuple_arg(name, "stride", stride, 1, optional=True, style="arg") or k
        p = tuple_arg(name, "padding", padding, 1, style="arg")
    else:
        k = tuple_arg(name, "kernel_size", kernel_size, nd, style="be" if nd == 3 else None)
        s = tuple_arg(name, "stride", stride, nd, optional=True) or k
        p = tuple_arg(name, "padding", padding, nd)
        if nd == 2 and x.ndim < 3:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(x.ndim, 1)}, {max(x.ndim, 1) - 1}], but got -3)")
    _check_rank(name, nd, x)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if nd == 3:                 # (PyTorch's kernel refuses a dtype after the shape checks)
        check_window_padding(k, s, p, (1,) * nd)
        if any(n < kk for n, kk in zip(x.shape[-3:], k)):
            raise RuntimeError("input image (T: {} H: {} W: {}) smaller than kernel size "
                               "(kT: {} kH: {} kW: {})".format(*x.shape[-3:], *k))
        out = pool_geometry(x.shape, nd, k, s, p, (1,) * nd, ceil_mode)
    if x.dtype is not None:
        wide = nd < 3 or gpu                        # PyTorch has no 16-bit avg_pool3d on CPU
        extra = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64))
        reject_dtype("avg_pool3d_out_frame" if nd == 3 else "avg_pool2d", x.dtype,
                     "fV" if wide else "", extra)
    if nd < 3:
        out = pool_geometry(x.shape, nd, k, s, p, (1,) * nd, ceil_mode)
    return k, s, p, out


def _avg_mats(nd, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override, gpu=False):
    k, s, p, out = _avg_args(nd, x, kernel_size, stride, padding, ceil_mode, divisor_override,
                             gpu)
    return window_mats(x.shape[-nd:], k, s, p, out, count_include_pad, divisor_override)


class Shape:
    """A checked input's geometry, for derivatives that rebuild the pooling matrices."""

    def __init__(self, shape):
        self.shape, self.ndim, self.dtype = shape, len(shape), None


def _avg_pool(xp, x, nd, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    mats, counts = _avg_mats(nd, x, kernel_size, stride, padding, ceil_mode,
                             count_include_pad, divisor_override, gpu=xp is not np)
    if x.dtype.kind != "i":
        return apply_mats(xp, x, mats)
    sums = apply_mats(xp, x, [(m != 0).astype(np.int64) for m in mats])
    if divisor_override is not None:
        div = divisor_override
    else:
        div = np.ones((), np.int64)
        for c in counts:
            div = np.multiply.outer(div, c)
    q = xp.abs(sums) // xp.asarray(div)      # PyTorch divides integers truncating to zero
    return xp.where(sums < 0, -q, q)


def _avg_pool_op(nd, namespace):
    extra = ", divisor_override=None" if nd > 1 else ""

    def forward(xp, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override=None):
        out = _avg_pool(xp, x, nd, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override)
        if nd == 1:
            return like_input_1d(xp, x, out)
        return like_input(xp, x, out) if nd == 2 else out   # (PyTorch's 3-D one: row-major)
    forward.__doc__ = f"{nd}-D average pooling."
    registered = op(f"avg_pool{nd}d(input, kernel_size, stride=None, padding=0, "
                    f"ceil_mode=False, count_include_pad=True{extra})", method=False,
                    namespace=namespace, out=nd > 1,
                    grad_fn_name=f"AvgPool{nd}DBackward0")(forward)

    @registered.derivative
    def _(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
          divisor_override=None):
        mats, _ = _avg_mats(nd, Shape(tuple(x.shape)), kernel_size, stride, padding,
                            ceil_mode, count_include_pad, divisor_override)
        # PyTorch's backward kernel (a 1-D pool: a squeezed 2-D one, as the forward)
        name = "SqueezeBackward1" if nd == 1 else f"AvgPool{nd}DBackwardBackward0"
        order = averaged_grad_order(nd, x._data)
        return through_input(rename_node(_along_dims(grad, transposed(mats), order), name), x,
                             name)
    return registered


max_pool1d_with_indices = _max_pool_op(1, None)
max_pool1d_with_indices.name_nodes("SqueezeBackward1")     # PyTorch pools 1-D inputs as 2-D
_max_pool_op(2, "nn.functional")
_max_pool_op(3, "nn.functional")
avg_pool1d = _avg_pool_op(1, None)
avg_pool1d.name_nodes("SqueezeBackward1")
_avg_pool_op(2, "nn.functional")
_avg_pool_op(3, "nn.functional")


def _one_int(what, value, allowed):
    """A 1-D pooling argument as an int, or PyTorch's max_pool1d() size error."""
    if isinstance(value, (tuple, list)) and len(value) != 1:
        raise RuntimeError(f"max_pool1d() {what} must be {allowed} of size 1 but got size "
                           f"{len(value)}")
    return tuple_arg("max_pool1d", what, value, 1)[0]


def _differentiated(x):
    """Whether ``x`` records a gradient (grad mode on) or carries a forward-mode tangent: then
    PyTorch's max_pool1d runs the kernel with indices, not its own 1-D one."""
    return ((x.requires_grad and _GRAD.grad_enabled) or getattr(x, "_forward_primal", False)
            or hasattr(x, "_fw_tangent"))


def _check_max_pool1d(x, kernel_size, stride, padding, dilation, ceil_mode):
    """The argument checks of PyTorch's max_pool1d without indices, in its order and words."""
    check_rank(tuple(x.shape), 1, "max_pool1d: " + _MAX_RANK[1])
    k = _one_int("kernel_size", kernel_size, "an int, list of ints or tuple of ints")
    none = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    s = k if none else _one_int("stride", stride,
                                "None, an int, list of ints, or tuple of ints")
    p = _one_int("padding", padding, "an int, list of ints, or tuple of ints")
    d = _one_int("dilation", dilation, "an int, list of ints or tuple of ints")
    for what, v in (("kernel_size", k), ("stride", s)):
        if v <= 0:
            raise RuntimeError(f"max_pool1d() {what} must be greater than zero, but got {v}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but "
                           f"got padding={p} and kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    out = output_sizes((x.shape[-1],), (k,), (s,), (p,), (d,), ceil_mode)[0]
    if out < 1:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")
    if not _differentiated(x):      # else PyTorch takes the 2-D kernel
        reject_dtype("max_pool1d_impl", x._data.dtype, "fV")


def _public_max_pool(nd):
    with_indices = REGISTRY[f"max_pool{nd}d_with_indices" if nd == 1 else
                            f"nn.functional.max_pool{nd}d_with_indices"].function

    def check(input, *args):    # PyTorch's 1-D kernel without indices words its errors so
        if nd == 1:
            _check_max_pool1d(input, *args)

    def max_pool(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        check(input, kernel_size, stride, padding, dilation, ceil_mode)
        out = with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)[0]
        if nd == 1 and not _differentiated(input) and input.device.type == "cpu":
            return out.contiguous()     # (PyTorch's own 1-D kernel, used then: row-major)
        return out

    def functional(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                   return_indices=False):
        if not return_indices:
            # ember.max_pool{nd}d, as autocast left it (it casts max_pool3d, not the kernel
            # with indices)
            from ember.ops import PUBLIC
            return PUBLIC[f"max_pool{nd}d"](input, kernel_size, () if stride is None else stride,
                                            padding, dilation, ceil_mode)
        return with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    for f, module in ((max_pool, "ember"), (functional, "ember.nn.functional")):
        f.__name__ = f.__qualname__ = f"max_pool{nd}d"
        f.__module__ = module
        f.__doc__ = f"{nd}-D max pooling (``return_indices`` also gives the flat indices)."
    return max_pool, functional


def _lp_pool(nd):
    avg = REGISTRY["avg_pool1d" if nd == 1 else f"nn.functional.avg_pool{nd}d"].function

    def lp_pool(input, norm_type, kernel_size, stride=None, ceil_mode=False):
        k = tuple_arg(f"lp_pool{nd}d", "kernel_size", kernel_size, nd)
        if norm_type in (float("inf"), float("-inf")):
            return _infinity_norm_pool(nd, input, norm_type, k, stride, ceil_mode)
        if stride is not None:
            out = avg(input.pow(norm_type), k, stride, 0, ceil_mode)
        else:
            out = avg(input.pow(norm_type), k, padding=0, ceil_mode=ceil_mode)
        # (relu's gradient masks a zero window's infinite one, where abs's would multiply it
        # by 0 to NaN: PyTorch's composition)
        return (out.sign() * out.abs().relu()).mul(int(np.prod(k))).pow(1.0 / norm_type)
    lp_pool.__name__ = lp_pool.__qualname__ = f"lp_pool{nd}d"
    lp_pool.__module__ = "ember.nn.functional"
    lp_pool.__doc__ = f"{nd}-D power-average pooling: the p-norm of each window."
    return lp_pool


def _infinity_norm_pool(nd, input, norm_type, kernel_size, stride, ceil_mode):
    """The p = +inf (largest) or -inf (smallest) absolute value in each window."""
    max_pool = _PUBLIC_MAX[nd][1]
    if norm_type > 0:
        return max_pool(input.abs(), kernel_size, stride, ceil_mode=ceil_mode)
    return max_pool(input.abs().neg(), kernel_size, stride, ceil_mode=ceil_mode).neg()


_PUBLIC_MAX = {nd: _public_max_pool(nd) for nd in (1, 2, 3)}
PUBLIC = {f"max_pool{nd}d": pair[0] for nd, pair in _PUBLIC_MAX.items()}
FUNCTIONAL = {f"max_pool{nd}d": pair[1] for nd, pair in _PUBLIC_MAX.items()}


def _functional_max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                                        ceil_mode=False, return_indices=False):
    """1-D max pooling: (values, indices); ``return_indices`` is ignored, as in PyTorch."""
    return REGISTRY["max_pool1d_with_indices"].function(input, kernel_size, stride, padding,
                                                        dilation, ceil_mode)


_functional_max_pool1d_with_indices.__name__ = "max_pool1d_with_indices"
_functional_max_pool1d_with_indices.__qualname__ = "max_pool1d_with_indices"
_functional_max_pool1d_with_indices.__module__ = "ember.nn.functional"
FUNCTIONAL.update({"max_pool1d_with_indices": _functional_max_pool1d_with_indices,
                   "avg_pool1d": "avg_pool1d"})
FUNCTIONAL.update({f"lp_pool{nd}d": _lp_pool(nd) for nd in (1, 2, 3)})
FUNCTIONAL.update(adaptive_pooling.FUNCTIONAL)
FUNCTIONAL.update(unpooling.FUNCTIONAL)
FUNCTIONAL.update(fractional_pooling.FUNCTIONAL)
