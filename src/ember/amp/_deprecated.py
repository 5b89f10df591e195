"""PyTorch's deprecated per-device mixed-precision aliases (``torch.cuda.amp``,
``torch.cpu.amp``): subclasses of ``ember.amp``'s that warn when made."""

import warnings

from ember.amp.autocast_mode import autocast as _autocast
from ember.amp.grad_scaler import GradScaler as _GradScaler

__all__ = ["device_aliases"]


def _deprecated(device, name):
    warnings.warn(f"`torch.{device}.amp.{name}(args...)` is deprecated. Please use "
                  f"`torch.amp.{name}('{device}', args...)` instead.", FutureWarning,
                  stacklevel=3)


def device_aliases(device, default_dtype, module):
    """(autocast, GradScaler) classes fixed to ``device``, as ``module`` exports them."""

    class autocast(_autocast):
        __doc__ = f'Deprecated: ``ember.amp.autocast("{device}", ...)``.'

        def __init__(self, enabled=True, dtype=default_dtype, cache_enabled=True):
            _deprecated(device, "autocast")
            super().__init__(device, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class GradScaler(_GradScaler):
        __doc__ = f'Deprecated: ``ember.amp.GradScaler("{device}", ...)``.'

        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True):
            _deprecated(device, "GradScaler")
            super().__init__(device, init_scale, growth_factor, backoff_factor,
                             growth_interval, enabled)

    for cls in (autocast, GradScaler):
        cls.__module__, cls.__qualname__ = module, cls.__name__
    return autocast, GradScaler
