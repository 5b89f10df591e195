"""ember.amp: automatic mixed precision (``torch.amp``): ``autocast`` and ``GradScaler``."""

from ember.amp.autocast_mode import autocast, is_autocast_available
from ember.amp.grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_available"]
