"""Dropout: one random keep-mask per call and one multiply by it; the backward multiplies the
gradient by the same mask (``_masked_scale``). Alpha dropout adds a constant where it drops,
feature dropout draws one mask entry per (batch, channel)."""

import math
import warnings

import numpy as np

from ember._random import _uniform_like
from ember._tensor import Tensor, _make
from ember.backend import device_guard, gpu_elsewhere, xp_of
from ember.ops._inplace import call_inplace
from ember.ops._registry import op, rename_node
from ember.ops._scalars import float_arg
from ember._warn import user_level

__all__ = ["masked_scale", "dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d",
           "dropout2d", "dropout3d"]

_SELU_NEGATIVE = 1.7580993408473766         # -scale * alpha of selu: where it saturates


@op("_masked_scale(input, mask, scale)", inputs=2, method=False, grad_fn_name="MulBackward0",
    pointwise=True)     # (laid out as the input, as PyTorch's input * mask)
def _masked_scale(xp, x, mask, scale):
    """``input * mask * scale`` (``mask`` is a boolean or floating tensor)."""
    out = x * mask
    if scale != 1:
        out *= scale
    return out


@_masked_scale.derivative
def _(grad, x, mask, scale):
    return _masked_scale(grad, mask, scale), None


def masked_scale(input, mask, scale, inplace=False):
    """``input * mask * scale``, written into ``input`` when ``inplace``."""
    if inplace:
        return call_inplace(_masked_scale, (input, mask), (scale,))
    return _masked_scale(input, mask, scale)


def _check_dtype(input):
    d = input.dtype
    if d.is_complex:
        raise NotImplementedError(f"\"bernoulli_scalar_cpu_\" not implemented for "
                                  f"'{d._torch_name}'")
    if not d.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{d._torch_name}")


def _dropout(input, p, train, inplace=False, feature=False, alpha=False, generator=None):
    """The kernel behind every dropout variant (``torch.dropout``'s ``p`` rules)."""
    _check_args(input, train, feature, alpha, inplace)
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not train or input.numel() == 0:
        return input
    with device_guard(gpu_elsewhere(input._data)):     # array code on the input's GPU
        if p == 1:      # PyTorch multiplies by zero: no draw, so no dtype or rank checks
            keep = xp_of(input._data).zeros(input.shape, dtype=bool)
            return masked_scale(input, _make(keep), 1.0, inplace)
        if feature and input.dim() < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        _check_dtype(input)
        return _masked(input, p, inplace, feature, alpha, generator)


def _check_args(input, train, feature, alpha, inplace):
    """The argument parser's checks of ``torch.<variant>(input, p, train)``: a tensor input
    (even where p == 0 returns it as is) and a bool ``train``."""
    if isinstance(input, Tensor) and type(train) is bool:   # (a NumPy bool is refused too)
        return
    from ember.ops._dims import type_name
    name = f"{'feature_' if feature else ''}{'alpha_' if alpha else ''}dropout" \
        f"{'_' if inplace else ''}"
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type_name(input)}")
    raise TypeError(f"{name}(): argument 'train' (position 3) must be bool, not "
                    f"{type_name(train)}")


def _masked(input, p, inplace, feature, alpha, generator):
    """Dropout's draw and scaling (``_dropout`` has checked the arguments)."""
    shape = input.shape if not feature else input.shape[:2] + (1,) * (input.dim() - 2)
    keep = _array(_uniform_like(generator, shape, input._data) >= p)
    if not alpha:
        return masked_scale(input, _make(keep), 1 / (1 - p), inplace)
    a = 1 / math.sqrt((_SELU_NEGATIVE ** 2 * p + 1) * (1 - p))
    shift = _make(_array(keep * (_SELU_NEGATIVE * a) + _SELU_NEGATIVE * a * (p - 1)).astype(
        input._data.dtype))
    out = masked_scale(input, _make(keep), a, inplace)
    return out.add_(shift) if inplace else out + shift


def _array(x):
    """``x``, or the 0-d array of a NumPy scalar (what NumPy's 0-d arithmetic gives)."""
    return np.asarray(x) if isinstance(x, np.generic) else x


# --- torch.* ----------------------------------------------------------------------------------

def dropout(input, p, train):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``."""
    return _dropout(input, float_arg(p, "dropout", "p", 2), train)


def dropout_(input, p, train):
    """``dropout`` in place."""
    return _dropout(input, p, train, inplace=True)


def alpha_dropout(input, p, train):
    """Dropout that keeps selu's zero mean and unit variance."""
    return _dropout(input, p, train, alpha=True)


def alpha_dropout_(input, p, train):
    """``alpha_dropout`` in place."""
    return _dropout(input, p, train, inplace=True, alpha=True)


def feature_dropout(input, p, train):
    """Dropout of whole channels (dim 1), one draw per (batch, channel)."""
    return _dropout(input, p, train, feature=True)


def feature_dropout_(input, p, train):
    """``feature_dropout`` in place."""
    return _dropout(input, p, train, inplace=True, feature=True)


def feature_alpha_dropout(input, p, train):
    """Alpha dropout of whole channels (dim 1)."""
    return _dropout(input, p, train, feature=True, alpha=True)


def feature_alpha_dropout_(input, p, train):
    """``feature_alpha_dropout`` in place."""
    return _dropout(input, p, train, inplace=True, feature=True, alpha=True)


def native_dropout(input, p, train):
    """``(output, mask)``: dropout's result and its boolean keep-mask (``train=None`` counts
    as training, as in PyTorch)."""
    if train is not None and not train:
        return input.clone(), _make(xp_of(input._data).ones(input.shape, dtype=bool))
    with device_guard(gpu_elsewhere(input._data)):
        _check_dtype(input)
        keep = _make(_array(_uniform_like(None, input.shape, input._data) >= p))
        out = _masked_scale(input, keep, 0.0 if p == 1 else 1 / (1 - p))
    return rename_node(out, "NativeDropoutBackward0"), keep


# --- nn.functional ----------------------------------------------------------------------------

def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def f_dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` during training, scaling the rest by
    ``1 / (1 - p)``."""
    _check_p(p)
    return _dropout(input, float_arg(p, "dropout_" if inplace else "dropout", "p", 2), training,
                    inplace)


def f_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout (keeps selu's self-normalizing statistics) during training."""
    _check_p(p)
    return _dropout(input, p, training, inplace, alpha=True)


def f_feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels during training."""
    _check_p(p)
    return _dropout(input, p, training, inplace, feature=True, alpha=True)


def _batched_feature_dropout(input, p, training, inplace, batched):
    if batched:
        return _dropout(input, p, training, inplace, feature=True)
    if not inplace:
        return _dropout(input.unsqueeze(0), p, training, feature=True).squeeze(0)
    # as PyTorch's: the input itself gains a batch dim and loses it again (in-place on a leaf
    # that requires grad is an error even where nothing is dropped)
    return _dropout(input.unsqueeze_(0), p, training, True, feature=True).squeeze_(0)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, L) or (C, L) inputs."""
    _check_p(p)
    ndim = input.dim()
    if ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {ndim}D input. Note that "
            f"dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            f"dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            f"inputs).")
    return _batched_feature_dropout(input, p, training, inplace, ndim == 3)


def _deprecated_rank(name, ndim, spatial):
    warnings.warn(
        f"{name}: Received a {ndim}-D input to {name}, which is deprecated and will result in "
        f"an error in a future release. To retain the behavior and silence this warning, "
        f"please use dropout instead. Note that {name} exists to provide channel-wise dropout "
        f"on inputs with {spatial} spatial dimensions, a channel dimension, and an optional "
        f"batch dimension (i.e. {spatial + 1}D or {spatial + 2}D inputs).",
        stacklevel=user_level(3))


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, H, W) inputs."""
    _check_p(p)
    ndim = input.dim()
    if ndim not in (3, 4):
        _deprecated_rank("dropout2d", ndim, 2)
    if ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=user_level(2))
    return _dropout(input, p, training, inplace, feature=True)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, D, H, W) or (C, D, H, W) inputs."""
    _check_p(p)
    ndim = input.dim()
    if ndim not in (4, 5):
        _deprecated_rank("dropout3d", ndim, 3)
    return _batched_feature_dropout(input, p, training, inplace, ndim == 5)


for _f, _name in ((f_dropout, "dropout"), (f_alpha_dropout, "alpha_dropout"),
                  (f_feature_alpha_dropout, "feature_alpha_dropout")):
    _f.__name__ = _f.__qualname__ = _name

FUNCTIONAL = {"dropout": f_dropout, "alpha_dropout": f_alpha_dropout,
              "feature_alpha_dropout": f_feature_alpha_dropout, "dropout1d": dropout1d,
              "dropout2d": dropout2d, "dropout3d": dropout3d}
PUBLIC = {"dropout": dropout, "dropout_": dropout_, "alpha_dropout": alpha_dropout,
          "alpha_dropout_": alpha_dropout_, "feature_dropout": feature_dropout,
          "feature_dropout_": feature_dropout_, "feature_alpha_dropout": feature_alpha_dropout,
          "feature_alpha_dropout_": feature_alpha_dropout_, "native_dropout": native_dropout}
