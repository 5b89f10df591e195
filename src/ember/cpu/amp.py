"""``ember.cpu.amp``: PyTorch's deprecated CPU mixed-precision aliases
(``torch.cpu.amp``), thin subclasses of ``ember.amp``'s that warn when made."""

import warnings

from ember import _dtype as D
from ember import amp as _amp

__all__ = ["autocast", "GradScaler"]


class autocast(_amp.autocast):
    """Deprecated: ``ember.amp.autocast("cpu", ...)``."""

    def __init__(self, enabled=True, dtype=D.bfloat16, cache_enabled=True):
        warnings.warn("`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """Deprecated: ``ember.amp.GradScaler("cpu", ...)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        warnings.warn("`torch.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)
