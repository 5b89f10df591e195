"""``ember.cuda.amp``: PyTorch's deprecated CUDA mixed-precision aliases (``torch.cuda.amp``),
thin subclasses of ``ember.amp``'s that warn when made. Without CUDA they then disable
themselves with ``ember.amp``'s warning, as PyTorch's do."""

import warnings

from ember import _dtype as D
from ember.amp import custom_function
from ember.amp._deprecated import device_aliases

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]

autocast, GradScaler = device_aliases("cuda", D.float16, __name__)


def _deprecated(name):
    warnings.warn(f"`torch.cuda.amp.{name}(args...)` is deprecated. Please use "
                  f"`torch.amp.{name}(args..., device_type='cuda')` instead.", FutureWarning,
                  stacklevel=3)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Deprecated: ``ember.amp.custom_fwd(..., device_type="cuda")``."""
    _deprecated("custom_fwd")
    return custom_function.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """Deprecated: ``ember.amp.custom_bwd(..., device_type="cuda")``."""
    _deprecated("custom_bwd")
    return custom_function.custom_bwd(bwd, device_type="cuda")
