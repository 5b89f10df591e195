"""Autocast in custom autograd Functions (``torch.amp.custom_fwd``/``custom_bwd``): a
Function's backward runs with the autocast state its forward saw, and its forward can take
its inputs cast to one dtype with autocast off inside."""

import functools

from ember import _dtype as D
from ember._tensor import Tensor
from ember.amp.autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled

__all__ = ["custom_fwd", "custom_bwd"]


def _device_type(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    return device_type


def _cast(value, device_type, dtype):
    """``value`` with its floating tensors on ``device_type`` (not float64) cast to
    ``dtype``, through lists, tuples and dicts."""
    if isinstance(value, Tensor):
        floating = value.is_floating_point() and value.dtype != D.float64
        return value.to(dtype) if floating and value.device.type == device_type else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, device_type, dtype) for k, v in value.items()}
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorate a custom Function's ``forward(ctx, ...)``: it records autocast's state for
    ``custom_bwd``; with ``cast_inputs`` (a dtype) and autocast on, it runs with its floating
    inputs cast to that dtype and autocast off."""
    device_type = _device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(ctx, *args, **kwargs):
        ctx._dtype = get_autocast_dtype(device_type)
        enabled = is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = enabled and cast_inputs is None
        if cast_inputs is None or not enabled:
            return fwd(ctx, *args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(ctx, *_cast(args, device_type, cast_inputs),
                       **_cast(kwargs, device_type, cast_inputs))
    return forward


def custom_bwd(bwd=None, *, device_type):
    """Decorate a custom Function's ``backward(ctx, ...)``: it runs under the autocast state
    its ``custom_fwd`` forward ran under."""
    device_type = _device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def backward(ctx, *args, **kwargs):
        with autocast(device_type, dtype=ctx._dtype, enabled=ctx._fwd_used_autocast):
            return bwd(ctx, *args, **kwargs)
    return backward
