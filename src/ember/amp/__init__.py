"""ember.amp: automatic mixed precision (``torch.amp``): ``autocast``, ``GradScaler``, and
``custom_fwd``/``custom_bwd`` for custom autograd Functions."""

from ember.amp.autocast_mode import autocast, is_autocast_available
from ember.amp.custom_function import custom_bwd, custom_fwd
from ember.amp.grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_available", "custom_fwd", "custom_bwd"]
