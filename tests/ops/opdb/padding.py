"""OpInfo entries for ember/ops/padding.py: constant_pad_nd, F.pad, and pad's adjoint."""

import numpy as np

import ember
from tests.ops.opdb.core import (ALL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, make)

_NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _ref_pad(x, pad, mode="constant", value=None):
    """np.pad on the positive parts, then slicing for the negative (cropping) parts."""
    pairs = [(x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    if not pairs:
        return x.copy()
    if mode == "circular":              # PyTorch crops first, then wraps the cropped tensor
        x = _crop(x, pairs, x.shape)
    widths = [(0, 0)] * x.ndim
    for d, lo, hi in pairs:
        widths[d] = (max(lo, 0), max(hi, 0))
    if mode == "constant":
        out = np.pad(x, widths, constant_values=0 if value is None else value)
    else:
        out = np.pad(x, widths, mode=_NP_MODE[mode])
    if mode == "circular":
        return out
    return _crop(out, pairs, out.shape)


def _crop(x, pairs, shape):
    crop = [slice(None)] * x.ndim
    for d, lo, hi in pairs:
        crop[d] = slice(max(-lo, 0), shape[d] - max(-hi, 0))
    return x[tuple(crop)]


def _t(shape, dtype, rg, **kw):
    return make(shape, dtype, rg, **kw)


def _constant_samples(dtype, rg):
    yield SampleInput(_t((2, 3, 4), dtype, rg), ([1, 2],), name="last_dim")
    yield SampleInput(_t((2, 3, 4), dtype, rg), ([1, -2, -1, 2, 0, 1], 1), name="crop_value")
    yield SampleInput(_t((), dtype, rg), ([],), name="0d")
    yield SampleInput(_t((0, 3), dtype, rg), ([1, 1],), name="empty")
    yield SampleInput(_t((3, 4), dtype, rg, noncontiguous=True), ([2, 0, 1, 1],),
                      name="noncontiguous")


def _pad_samples(dtype, rg):
    yield SampleInput(_t((2, 3, 4), dtype, rg), ([1, -2, 2, 0],), {"value": 1},
                      name="constant")
    modes = ("reflect", "replicate", "circular") if dtype is not ember.bool else ("circular",)
    for mode in modes:
        yield SampleInput(_t((2, 3, 5), dtype, rg), ([2, 1],), {"mode": mode}, name=mode + "1d")
        yield SampleInput(_t((3, 4, 5), dtype, rg), ([1, -1, 2, 3],), {"mode": mode},
                          name=mode + "2d_unbatched")
        yield SampleInput(_t((1, 2, 3, 3, 4), dtype, rg, noncontiguous=True),
                          ([1, 2, 0, 1, 2, 1],), {"mode": mode}, name=mode + "3d")


def _pad_grad_samples(dtype, rg):
    yield SampleInput(_t((1, 2, 3), dtype, rg), ([1, -1],), name="constant")
    for mode in ("reflect", "replicate", "circular"):
        yield SampleInput(_t((1, 2, 3), dtype, rg), ([2, 1],), {"mode": mode}, name=mode)
        yield SampleInput(_t((1, 2, 3), dtype, rg), ([1, 1, 0, 1],), {"mode": mode},
                          name=mode + "2d")


def _backward_samples(dtype, rg):
    for mode in ("reflect", "replicate", "circular"):
        yield SampleInput(_t((1, 2, 6), dtype, rg), ([1, 2, 3], [2, 1], mode), name=mode)
        yield SampleInput(_t((2, 5, 4), dtype, rg), ([2, 3, 3], [1, 0, 1, 1], mode),
                          name=mode + "2d")


def _ref_backward(g, input_size, pad, mode):
    """The adjoint of the reference pad, one input element at a time."""
    out = np.zeros(input_size, g.dtype)
    for idx in np.ndindex(*input_size):
        e = np.zeros(input_size, g.dtype)
        e[idx] = 1
        out[idx] = (_ref_pad(e, pad, mode) * g).sum()
    return out


def _torch_backward(g, input_size, pad, mode):
    import torch
    x = torch.zeros(input_size, dtype=g.dtype, requires_grad=True)
    y = torch.nn.functional.pad(x, pad, mode)
    return torch.autograd.grad(y, x, g, create_graph=True)[0]


def _constant_errors(odd="Length of pad must be even but instead it equals 3",
                     long="Length of pad should be no more than twice the number of dimensions "
                     "of the input. Pad length is 10while the input has 4dimensions."):
    x = make((2, 3, 4, 5), ember.float32)
    yield ErrorInput(SampleInput(x, ([1, 2, 3],)), RuntimeError, odd)
    yield ErrorInput(SampleInput(x, ([1, 2] * 5,)), RuntimeError, long)
    yield ErrorInput(SampleInput(x, ([-3, -3],)), RuntimeError,
                     "narrow\\(\\): length must be non-negative.")


def _pad_errors():
    yield from _constant_errors("Padding length must be divisible by 2",
                                "Padding length should be less than or equal to two times the "
                                "input dimension but got padding length 10 and input of "
                                "dimension 4")
    x = make((2, 3, 5), ember.float32)
    yield ErrorInput(SampleInput(x, ([5, 1],), {"mode": "reflect"}), RuntimeError,
                     r"Argument #4: Padding size should be less than the corresponding input "
                     r"dimension, but got: padding \(5, 1\) at dimension 2 of input \[2, 3, 5\]")
    yield ErrorInput(SampleInput(make((2, 5), ember.float32), ([1, 1, 1, 1],),
                                 {"mode": "reflect"}),
                     NotImplementedError, "Padding size 4 is not supported for 2D input tensor.")
    yield ErrorInput(SampleInput(x, ([-3, -3],), {"mode": "replicate"}), RuntimeError,
                     r"input \(W: 5\) is too small. Calculated output W: -1")
    yield ErrorInput(SampleInput(x, ([6, 1],), {"mode": "circular"}), RuntimeError,
                     "Padding value causes wrapping around more than once.")
    yield ErrorInput(SampleInput(x, ([-3, -3],), {"mode": "circular"}), RuntimeError,
                     "Negative padding value is resulting in an empty dimension")
    yield ErrorInput(SampleInput(x, ([1, 1],), {"mode": "foo"}), NotImplementedError,
                     "Unrecognised padding mode foo")
    yield ErrorInput(SampleInput(x, ([1, 1],), {"mode": "reflect", "value": 2}), RuntimeError,
                     "Padding mode \"reflect\" doesn't take in value argument")
    yield ErrorInput(SampleInput(make((2, 0, 4), ember.float32), ([1, 1],),
                                 {"mode": "replicate"}), RuntimeError,
                     r"Expected 2D or 3D \(batch mode\) tensor with possibly 0 batch size and "
                     r"other non-zero dimensions for input, but got: \[2, 0, 4\]")
    yield ErrorInput(SampleInput(make((2, 3, 5), ember.bool), ([1, 1],), {"mode": "reflect"}),
                     NotImplementedError, "\"reflection_pad1d\" not implemented for 'Bool'")


PAD_DTYPES = FLOATS + LOW + COMPLEX + INTS

OPS = [
    OpInfo("constant_pad_nd", lambda x, pad, value=0: _ref_pad(x, pad, "constant", value),
           _constant_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_constant_errors),
    OpInfo("nn.functional.pad", _ref_pad, _pad_samples, dtypes=PAD_DTYPES + (ember.bool,),
           grad_samples=_pad_grad_samples, gradgrad=True, error_inputs=_pad_errors),
    OpInfo("_pad_backward", _ref_backward, _backward_samples, dtypes=FLOATS + COMPLEX,
           gradgrad=True, torch_op=_torch_backward),
]
