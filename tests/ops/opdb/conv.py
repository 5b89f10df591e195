"""OpInfo entries for ember/ops/conv.py and fold.py: convolutions, transposed ones, fold/unfold.

The references loop over kernel offsets with explicit padding, one einsum per group: a
different algorithm from the im2col + GEMM under test.
"""

import itertools
import re

import numpy as np

import ember
from tests.ops.opdb.core import (COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput,
                                 make)

CONV_DTYPES = FLOATS + LOW + COMPLEX + INTS
# PyTorch's CPU kernels for dilated and transposed convolutions take no integers but int64
CONV_T_DTYPES = FLOATS + LOW + COMPLEX + (ember.int64,)
FOLD_DTYPES = FLOATS + LOW + COMPLEX


def _tuple(v, n):
    if isinstance(v, (list, tuple)):
        return tuple(v) * n if len(v) == 1 else tuple(v)
    return (v,) * n


def _ref_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    nd = w.ndim - 2
    unbatched = x.ndim == nd + 1
    x = x[None] if unbatched else x
    stride, dilation = _tuple(stride, nd), _tuple(dilation, nd)
    kernel = w.shape[2:]
    if padding == "valid":
        pads = [(0, 0)] * nd
    elif padding == "same":
        pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                for d, k in zip(dilation, kernel)]
    else:
        pads = [(p, p) for p in _tuple(padding, nd)]
    xp = np.pad(x, [(0, 0), (0, 0)] + pads)
    out = [(s - d * (k - 1) - 1) // st + 1
           for s, d, k, st in zip(xp.shape[2:], dilation, kernel, stride)]
    res = np.zeros((x.shape[0], w.shape[0], *out), np.result_type(x, w))
    cg, og = w.shape[1], w.shape[0] // groups
    for off in itertools.product(*[range(k) for k in kernel]):
        sl = tuple(slice(o * d, o * d + (n - 1) * st + 1, st)
                   for o, d, n, st in zip(off, dilation, out, stride))
        for g in range(groups):
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            wk = w[(slice(g * og, (g + 1) * og), slice(None)) + off]
            res[:, g * og:(g + 1) * og] += np.einsum("bc...,oc->bo...", patch, wk)
    if b is not None:
        res += b.reshape((-1,) + (1,) * nd)
    return res[0] if unbatched else res


def _ref_conv_t(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    nd = w.ndim - 2
    unbatched = x.ndim == nd + 1
    x = x[None] if unbatched else x
    stride, dilation = _tuple(stride, nd), _tuple(dilation, nd)
    padding, opad = _tuple(padding, nd), _tuple(output_padding, nd)
    kernel = w.shape[2:]
    full = [(s - 1) * st + d * (k - 1) + 1 + op
            for s, st, d, k, op in zip(x.shape[2:], stride, dilation, kernel, opad)]
    cg, og = w.shape[0] // groups, w.shape[1]
    res = np.zeros((x.shape[0], og * groups, *full), np.result_type(x, w))
    for off in itertools.product(*[range(k) for k in kernel]):
        sl = tuple(slice(o * d, o * d + (n - 1) * st + 1, st)
                   for o, d, n, st in zip(off, dilation, x.shape[2:], stride))
        for g in range(groups):
            xg = x[:, g * cg:(g + 1) * cg]
            wk = w[(slice(g * cg, (g + 1) * cg), slice(None)) + off]
            res[(slice(None), slice(g * og, (g + 1) * og)) + sl] += \
                np.einsum("bc...,co->bo...", xg, wk)
    res = res[(Ellipsis,) + tuple(slice(p, f - p) for p, f in zip(padding, full))]
    if b is not None:
        res = res + b.reshape((-1,) + (1,) * nd)
    return res[0] if unbatched else res


def _ref_convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    if transposed:
        return _ref_conv_t(x, w, b, stride, padding, output_padding, groups, dilation)
    return _ref_conv(x, w, b, stride, padding, dilation, groups)


def _t(shape, dtype, rg, **kw):
    low, high = (0, 4) if dtype is ember.uint8 else (-3, 3)
    return make(shape, dtype, rg, low=low, high=high, **kw)


def _conv_samples(nd):
    """Batched/unbatched, groups, stride, padding (incl. strings), dilation, empty batch."""
    def samples(dtype, rg):
        s = (5, 4, 3)[:nd]
        k = (3, 2, 2)[:nd]
        yield SampleInput(_t((2, 4) + s, dtype, rg), (_t((6, 2) + k, dtype, rg),
                                                      _t((6,), dtype, rg)),
                          {"stride": 2, "padding": 1, "groups": 2}, name="groups_stride")
        narrow = dtype in INTS and dtype is not ember.int64
        yield SampleInput(_t((3,) + s, dtype, rg), (_t((2, 3) + k, dtype, rg),),
                          {"dilation": (1 if narrow else 2,) + (1,) * (nd - 1)},
                          name="unbatched_dilated")
        yield SampleInput(_t((1, 2) + s, dtype, rg), (_t((2, 2) + k, dtype, rg),),
                          {"padding": "same"}, name="same")
        yield SampleInput(_t((1, 2) + s, dtype, rg, noncontiguous=True),
                          (_t((3, 2) + k, dtype, rg),), {"padding": "valid"},
                          name="valid_noncontiguous")
        yield SampleInput(_t((0, 2) + s, dtype, rg), (_t((4, 1) + k, dtype, rg),),
                          {"groups": 2}, name="empty_batch")
    return samples


def _conv_grad_samples(nd):
    def samples(dtype, rg):
        s = (4, 3, 2)[:nd]
        k = (2, 2, 1)[:nd]
        yield SampleInput(_t((1, 1) + s, dtype, rg), (_t((1, 1) + k, dtype, rg),
                                                      _t((1,), dtype, rg)),
                          {"padding": 1, "stride": 2}, name="tiny")
        yield SampleInput(_t((2, 2) + s, dtype, rg), (_t((4, 1) + k, dtype, rg),
                                                      _t((4,), dtype, rg)),
                          {"groups": 2, "dilation": 2 if nd == 1 else 1}, name="groups")
        yield SampleInput(_t((1,) + s, dtype, rg), (_t((2, 1) + (3,) * nd, dtype, rg),),
                          {"padding": "same"}, name="same_unbatched")
    return samples


def _conv_t_samples(nd):
    def samples(dtype, rg):
        s = (4, 3, 2)[:nd]
        k = (3, 2, 2)[:nd]
        yield SampleInput(_t((2, 4) + s, dtype, rg), (_t((4, 3) + k, dtype, rg),
                                                      _t((6,), dtype, rg)),
                          {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
                          name="groups_stride_opad")
        yield SampleInput(_t((2,) + s, dtype, rg), (_t((2, 3) + k, dtype, rg),),
                          {"dilation": 2, "output_padding": 1, "stride": 1},
                          name="unbatched_dilated_opad")
        yield SampleInput(_t((1, 2) + s, dtype, rg, noncontiguous=True),
                          (_t((2, 1) + k, dtype, rg),), name="noncontiguous")
        yield SampleInput(_t((0, 2) + s, dtype, rg), (_t((2, 1) + k, dtype, rg),),
                          name="empty_batch")
    return samples


def _conv_t_grad_samples(nd):
    def samples(dtype, rg):
        s = (3, 2, 2)[:nd]
        k = (2, 2, 1)[:nd]
        yield SampleInput(_t((1, 1) + s, dtype, rg), (_t((1, 1) + k, dtype, rg),
                                                      _t((1,), dtype, rg)),
                          {"stride": 2, "padding": 1, "output_padding": 1}, name="tiny")
        yield SampleInput(_t((1, 2) + s, dtype, rg), (_t((2, 2) + k, dtype, rg),
                                                      _t((4,), dtype, rg)),
                          {"groups": 2, "dilation": 2}, name="groups")
    return samples


def _convolution_samples(dtype, rg):
    yield SampleInput(_t((2, 2, 5, 4), dtype, rg), (_t((4, 1, 2, 3), dtype, rg),
                                                    _t((4,), dtype, rg), [2, 1], [1, 1], [1, 2],
                                                    False, [0, 0], 2), name="conv2d")
    yield SampleInput(_t((1, 2, 3), dtype, rg), (_t((2, 1, 2), dtype, rg), None, [2], [0], [1],
                                                 True, [1], 1), name="transposed1d")


def _convolution_grad_samples(dtype, rg):
    yield SampleInput(_t((1, 1, 3, 3), dtype, rg), (_t((2, 1, 2, 2), dtype, rg),
                                                    _t((2,), dtype, rg), [2, 1], [1, 1], [1, 1],
                                                    False, [0, 0], 1), name="conv2d")
    yield SampleInput(_t((1, 2, 3), dtype, rg), (_t((2, 2, 2), dtype, rg), None, [2], [1], [1],
                                                 True, [1], 2), name="transposed1d")


def _ref_weight(x, g, kernel_size, stride, padding, dilation, groups):
    """The weight gradient of a convolution, by finite sums over the reference conv."""
    nd = len(kernel_size)
    c = x.shape[1] // groups
    out = np.zeros((g.shape[1], c, *kernel_size), np.result_type(x, g))
    for idx in itertools.product(*[range(n) for n in out.shape]):
        e = np.zeros_like(out)
        e[idx] = 1
        y = _ref_conv(x, e, None, stride, padding, dilation, groups)
        y = y[(Ellipsis,) + tuple(slice(0, n) for n in g.shape[2:])]
        out[idx] = (y * g).sum()
    return out if nd else out


def _weight_samples(dtype, rg):
    yield SampleInput(_t((1, 2, 4, 3), dtype, rg), (_t((1, 4, 3, 2), dtype, rg), [2, 2], [2, 1],
                                                    [1, 0], [1, 1], 2), name="groups")
    yield SampleInput(_t((1, 1, 5), dtype, rg), (_t((1, 2, 2), dtype, rg), [2], [2], [0], [2],
                                                 1), name="1d")


def _torch_weight(x, g, kernel_size, stride, padding, dilation, groups):
    import torch
    w = torch.zeros((g.shape[1], x.shape[1] // groups, *kernel_size), dtype=x.dtype,
                    requires_grad=True)
    conv = getattr(torch.nn.functional, f"conv{len(stride)}d")   # complex too
    # torch's weight gradient conjugates x; _convolution_weight leaves that to its caller
    y = conv(x.conj(), w, None, stride, padding, dilation, groups)
    return torch.autograd.grad(y, w, g, create_graph=True)[0]


def _conv_errors(nd):
    name = f"conv{nd}d"

    def errors():
        def f(*shape):
            return make(shape, ember.float32)
        s = (6,) * nd
        k = (3,) * nd
        yield ErrorInput(SampleInput(f(*(6,) * nd), (f(2, 1, *k),)), RuntimeError,
                         rf"Expected {nd + 1}D \(unbatched\) or {nd + 2}D \(batched\) input to "
                         rf"{name}, but got input of size: \[{', '.join(['6'] * nd)}\]")
        yield ErrorInput(SampleInput(f(1, 1, *s), (f(6, 3, *k),)), RuntimeError,
                         r"Given groups=1, weight of size \[6, 3, " + ", ".join(["3"] * nd) +
                         r"\], expected input\[1, 1, " + ", ".join(["6"] * nd) +
                         r"\] to have 3 channels, but got 1 channels instead")
        yield ErrorInput(SampleInput(f(1, 1, *(2,) * nd), (f(2, 1, *k),)), RuntimeError,
                         r"Kernel size: \(" + " x ".join(["3"] * nd) + r"\). Kernel size can't "
                         r"be greater than actual input size")
        yield ErrorInput(SampleInput(f(1, 4, *s), (f(5, 2, *k),), {"groups": 2}), RuntimeError,
                         "expected weight to be divisible by 2 at dimension 0")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(4, 2, *k), f(5))), RuntimeError,
                         r"expected bias to be 1-dimensional with 4 elements, but got bias of "
                         r"size \[5\] instead")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(4, 2, *k),), {"stride": 0}), RuntimeError,
                         "non-positive stride is not supported")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(4, 2, *k),), {"padding": -1}),
                         RuntimeError, "negative padding is not supported")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(4, 2, *k),), {"groups": 0}), RuntimeError,
                         "non-positive groups is not supported")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(4, 2, *k),), {"stride": [1] * (nd + 1)}),
                         RuntimeError, f"expected stride to be a single integer value or a "
                         f"list of {nd} values to match the convolution dimensions")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(4, 2, *k),),
                                     {"padding": "same", "stride": 2}), RuntimeError,
                         "padding='same' is not supported for strided convolutions")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(4, 2, *k),), {"padding": "full"}),
                         RuntimeError, "Invalid padding string: 'full'")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(4, 2, *k).double(),)), RuntimeError,
                         "expected scalar type Float but found Double")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(4, 2, *k),), {"dilation": 0}),
                         RuntimeError, "dilation should be greater than zero")
        # a weight of another dimensionality: the parser's nd-long stride (etc.) complains
        # (for nd = 1 its one-long lists pass, and the input's dims are named instead)
        w = (4, 2, *(3,) * (nd + 1))
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(*w),)), RuntimeError,
                         rf"expected stride to be a single integer value or a list of {nd + 1} "
                         rf"values to match the convolution dimensions, but got stride=\[" +
                         ", ".join(["1"] * nd) + r"\]" if nd > 1 else
                         r"Expected 4-dimensional input for 4-dimensional weight \[4, 2, 3, 3\]")
        if nd > 1:
            yield ErrorInput(SampleInput(f(1, 2, *s), (f(*w),), {"stride": [1], "padding": [0],
                                                                  "dilation": [1]}), RuntimeError,
                             rf"expected output_padding to be a single integer value or a list "
                             rf"of {nd + 1} values")
        yield ErrorInput(SampleInput(f(1, 2, *s), (f(*w),), {"padding": "same"}), RuntimeError,
                         rf"Expected {nd + 3}-dimensional input for {nd + 3}-dimensional "
                         rf"weight\[4, 2, ")
    return errors


def _conv_t_errors(nd):
    name = f"conv_transpose{nd}d"

    def errors():
        def f(*shape):
            return make(shape, ember.float32)
        s = (4,) * nd
        k = (3,) * nd
        yield ErrorInput(SampleInput(f(*(4,) * nd), (f(4, 1, *k),)), RuntimeError,
                         rf"Expected {nd + 1}D \(unbatched\) or {nd + 2}D \(batched\) input to "
                         rf"{name}, but got input of size")
        yield ErrorInput(SampleInput(f(2, 5, *s), (f(4, 3, *k),)), RuntimeError,
                         r"Given transposed=1, weight of size \[4, 3, " + ", ".join(["3"] * nd) +
                         r"\], expected input\[2, 5, " + ", ".join(["4"] * nd) +
                         r"\] to have 4 channels, but got 5 channels instead")
        yield ErrorInput(SampleInput(f(1, 4, *s), (f(4, 3, *k),), {"output_padding": 1}),
                         RuntimeError, "output padding must be smaller than either stride or "
                         "dilation")
        yield ErrorInput(SampleInput(f(1, 4, *s), (f(4, 3, *k), f(4))), RuntimeError,
                         "expected bias to be 1-dimensional with 3 elements")
        yield ErrorInput(SampleInput(f(1, 4, *s), (f(4, 3, *k),), {"padding": "same"}),
                         TypeError, r"argument 'padding' (\(position 5\) )?must be tuple of "
                         "ints, not str")
        yield ErrorInput(SampleInput(f(1, 4, *s), (f(4, 3, *k),), {"output_padding": -1}),
                         RuntimeError, "negative output_padding is not supported")
    return errors


def _unfold_samples(dtype, rg):
    yield SampleInput(_t((2, 3, 5, 6), dtype, rg), ((2, 3),),
                      {"dilation": (1, 2), "padding": 1, "stride": (2, 1)}, name="all_params")
    yield SampleInput(_t((2, 4, 4), dtype, rg), (2,), name="unbatched")
    yield SampleInput(_t((1, 2, 4, 5), dtype, rg, noncontiguous=True), (3,), {"padding": 1},
                      name="noncontiguous")
    yield SampleInput(_t((0, 2, 4, 4), dtype, rg), (2,), name="empty_batch")


def _fold_samples(dtype, rg):
    yield SampleInput(_t((2, 12, 20), dtype, rg), ((5, 6), 2), name="overlapping")
    yield SampleInput(_t((8, 4), dtype, rg), ((3, 4), (2, 2)), {"stride": 2, "padding": (1, 0)},
                      name="unbatched_stride")
    yield SampleInput(_t((1, 4, 4), dtype, rg, noncontiguous=True), ((4, 5), 2),
                      {"dilation": (2, 1), "stride": (1, 2)}, name="noncontiguous")


def _ref_unfold(x, kernel_size, dilation=1, padding=0, stride=1):
    unbatched = x.ndim == 3
    x = x[None] if unbatched else x
    kh, kw = _tuple(kernel_size, 2)
    dh, dw = _tuple(dilation, 2)
    ph, pw = _tuple(padding, 2)
    sh, sw = _tuple(stride, 2)
    xp = np.pad(x, [(0, 0), (0, 0), (ph, ph), (pw, pw)])
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    cols = np.zeros((x.shape[0], x.shape[1], kh, kw, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                                  j * dw:j * dw + (ow - 1) * sw + 1:sw]
    res = cols.reshape(x.shape[0], x.shape[1] * kh * kw, oh * ow)
    return res[0] if unbatched else res


def _ref_fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Fold as the transpose of the reference unfold, column by column."""
    unbatched = x.ndim == 2
    x = x[None] if unbatched else x
    kh, kw = _tuple(kernel_size, 2)
    h, w = _tuple(output_size, 2)
    c = x.shape[1] // (kh * kw)
    out = np.zeros((x.shape[0], c, h, w), x.dtype)
    for idx in np.ndindex(c, h, w):
        e = np.zeros((1, c, h, w), x.dtype)
        e[(0,) + idx] = 1
        col = _ref_unfold(e, kernel_size, dilation, padding, stride)
        out[(slice(None),) + idx] = (x * col).sum(axis=(1, 2))
    return out[0] if unbatched else out


def _unfold_errors():
    def f(*shape):
        return make(shape, ember.float32)
    yield ErrorInput(SampleInput(f(1, 2, 3, 5, 5), (2,)), RuntimeError,
                     r"Expected 3D or 4D \(batch mode\) tensor with possibly 0 batch size")
    yield ErrorInput(SampleInput(f(2, 3, 5, 5), (6,)), RuntimeError,
                     r"calculated shape of the array of sliding blocks as \(0, 0\), but its "
                     r"components must be at least one")
    yield ErrorInput(SampleInput(f(2, 3, 5, 5), ((2, 2, 2),)), RuntimeError,
                     "It is expected kernel_size equals to 2, but got size 3")
    yield ErrorInput(SampleInput(f(2, 3, 5, 5), (2,), {"stride": 0}), RuntimeError,
                     "stride should be greater than zero, but got stride_height: 0 "
                     "stride_width: 0")
    yield ErrorInput(SampleInput(f(2, 3, 5, 5), (2,), {"padding": -1}), RuntimeError,
                     "padding should be non-negative, but got pad_height: -1 pad_width: -1")


def _fold_errors():
    def f(*shape):
        return make(shape, ember.float32)
    yield ErrorInput(SampleInput(f(2, 12, 15), ((5, 5), 2)), RuntimeError,
                     r"expected size of input's dimension 2 to match the calculated number of "
                     r"sliding blocks 4 \* 4 = 16, but got input.size\(2\)=15")
    yield ErrorInput(SampleInput(f(2, 11, 16), ((5, 5), 2)), RuntimeError,
                     r"Expected size of input's dimension 1 to be divisible by the product of "
                     r"kernel_size, but got input.size\(1\)=11 and kernel_size=\(2, 2\)")
    yield ErrorInput(SampleInput(f(2, 12, 16), ((5, 5, 5), 2)), RuntimeError,
                     "It is expected output_size equals to 2, but got size 3")
    yield ErrorInput(SampleInput(make((2, 12, 16), ember.int64), ((5, 5), 2)),
                     NotImplementedError, "\"col2im_out_cpu\" not implemented for 'Long'")


def _tbc_samples(dtype, rg):
    # (time, batch, in channels, kernel width, out channels, pad): with and without padding,
    # a negative pad (crops the input), an input shorter than the kernel, empty extents
    for t, b, c, k, o, pad in ((6, 2, 3, 3, 4, 0), (6, 2, 3, 3, 4, 2), (5, 1, 2, 2, 3, -1),
                               (2, 2, 3, 4, 2, 1), (4, 3, 2, 1, 2, 0), (0, 2, 3, 1, 4, 1),
                               (5, 0, 3, 2, 4, 0), (5, 2, 3, 0, 4, 0), (3, 2, 0, 2, 4, 1)):
        yield SampleInput(_t((t, b, c), dtype, rg), (_t((k, c, o), dtype, rg), _t((o,), dtype, rg),
                                                     pad), name=f"T{t} B{b} C{c} K{k} O{o}")
    # strided batch and channels (PyTorch's kernel raises for inputs whose time and batch
    # dims cannot be viewed as one, such as a transposed input; ember's does not)
    x = _t((3, 10, 4), dtype, rg).detach()[:, ::2, ::2].requires_grad_(rg)
    w = _t((2, 3, 2), dtype, rg).detach().transpose(1, 2).requires_grad_(rg)
    yield SampleInput(x, (w, _t((3,), dtype, rg)), name="noncontiguous")


def _tbc_grad_samples(dtype, rg):
    for t, pad in ((3, 0), (3, 2), (4, -1)):
        yield SampleInput(_t((t, 1, 2), dtype, rg), (_t((2, 2, 2), dtype, rg),
                                                     _t((2,), dtype, rg), pad), name=f"pad={pad}")


def _ref_tbc(x, w, b, pad=0):
    if pad < 0:
        x, pad = x[-pad:x.shape[0] + pad], 0
    xp = np.pad(x, [(pad, pad), (0, 0), (0, 0)])
    length = xp.shape[0] - w.shape[0] + 1
    out = np.broadcast_to(b, (length,) + x.shape[1:2] + b.shape).astype(np.result_type(x, w))
    for k in range(w.shape[0]):
        out = out + np.einsum("tbc,co->tbo", xp[k:k + length], w[k])
    return out


def _tbc_errors():
    def bad(x, w, b, message, *pad, error=RuntimeError):
        return ErrorInput(SampleInput(ember.ones(*x), (ember.ones(*w), ember.ones(*b)) + pad),
                          error, re.escape(message))
    yield bad((3, 2), (3, 2, 4), (4,), "Input must have 3 dims: time, batch, in_channel")
    yield bad((5, 2, 3), (3, 4), (4,),
              "Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    yield bad((5, 2, 3), (3, 3, 4), (4, 1), "Bias must be 1-D")
    yield bad((5, 2, 3), (3, 2, 4), (4,),
              "Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    yield bad((5, 2, 3), (3, 3, 4), (5,),
              "Bias size must equal dim 2 in the weight tensor (output channels).")
    yield bad((5, 2, 3), (3, 3, 4), (4,),
              "Trying to create tensor with negative dimension -1: [-1, 2, 4]", -2)
    yield bad((5, 2, 3), (3, 3, 4), (4,),
              "conv_tbc(): argument 'pad' (position 4) must be int, not float", 1.0,
              error=TypeError)
    yield ErrorInput(SampleInput(ember.ones(5, 2, 3), (ember.ones(3, 3, 4, dtype=ember.float64),
                                                        ember.ones(4))),
                     RuntimeError, "self and mat2 must have the same dtype, but got Float and "
                     "Double")


_LOW_TOL = {ember.float16: (2e-3, 2e-3), ember.bfloat16: (1.6e-2, 2e-2)}
# PyTorch accumulates some 16-bit convolutions in 16 bits; ember in float32
_LOW_PARITY = {ember.float16: (1e-2, 1e-2), ember.bfloat16: (5e-2, 5e-2)}

OPS = []
for _nd in (1, 2, 3):
    OPS.append(OpInfo(f"conv{_nd}d", _ref_conv, _conv_samples(_nd), dtypes=CONV_DTYPES,
                      grad_samples=_conv_grad_samples(_nd), gradgrad=True,
                      error_inputs=_conv_errors(_nd), tol=_LOW_TOL, parity_tol=_LOW_PARITY))
    OPS.append(OpInfo(f"conv_transpose{_nd}d", _ref_conv_t, _conv_t_samples(_nd),
                      dtypes=CONV_T_DTYPES, grad_samples=_conv_t_grad_samples(_nd), gradgrad=True,
                      error_inputs=_conv_t_errors(_nd), tol=_LOW_TOL, parity_tol=_LOW_PARITY))
OPS += [
    # torch.convolution has no complex kernel (F.conv* split complex inputs into real ones)
    OpInfo("convolution", _ref_convolution, _convolution_samples,
           dtypes=FLOATS + LOW + (ember.int64,),
           grad_samples=_convolution_grad_samples, gradgrad=True, tol=_LOW_TOL,
           parity_tol=_LOW_PARITY),
    OpInfo("_convolution_weight", _ref_weight, _weight_samples, dtypes=FLOATS + COMPLEX,
           gradgrad=True, torch_op=_torch_weight),
    OpInfo("nn.functional.unfold", _ref_unfold, _unfold_samples, dtypes=FOLD_DTYPES,
           gradgrad=True, error_inputs=_unfold_errors),
    OpInfo("nn.functional.fold", _ref_fold, _fold_samples, dtypes=FOLD_DTYPES, gradgrad=True,
           error_inputs=_fold_errors, tol=_LOW_TOL, parity_tol=_LOW_PARITY),
    # PyTorch's conv_tbc has no complex autograd ("does not support automatic
    # differentiation for outputs with complex dtype"); ember's derivative covers it
    OpInfo("conv_tbc", _ref_tbc, _tbc_samples, dtypes=CONV_DTYPES,
           grad_samples=_tbc_grad_samples, gradgrad=True, error_inputs=_tbc_errors,
           tol=_LOW_TOL, parity_tol=_LOW_PARITY),
]
