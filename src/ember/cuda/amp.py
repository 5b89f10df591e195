"""``ember.cuda.amp``: PyTorch's deprecated CUDA mixed-precision aliases
(``torch.cuda.amp``), thin subclasses of ``ember.amp``'s that warn when made. Without CUDA
they then disable themselves with ``ember.amp``'s warning, as PyTorch's do."""

import warnings

from ember import _dtype as D
from ember import amp as _amp

__all__ = ["autocast", "GradScaler"]


class autocast(_amp.autocast):
    """Deprecated: ``ember.amp.autocast("cuda", ...)``."""

    def __init__(self, enabled=True, dtype=D.float16, cache_enabled=True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """Deprecated: ``ember.amp.GradScaler("cuda", ...)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)
