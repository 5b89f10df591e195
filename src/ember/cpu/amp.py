"""``ember.cpu.amp``: PyTorch's deprecated CPU mixed-precision aliases (``torch.cpu.amp``),
thin subclasses of ``ember.amp``'s that warn when made."""

from ember import _dtype as D
from ember.amp._deprecated import device_aliases

__all__ = ["autocast", "GradScaler"]

autocast, GradScaler = device_aliases("cpu", D.bfloat16, __name__)
