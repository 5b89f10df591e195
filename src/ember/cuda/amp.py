"""``ember.cuda.amp``: PyTorch's deprecated CUDA mixed-precision aliases (``torch.cuda.amp``),
thin subclasses of ``ember.amp``'s that warn when made. Without CUDA they then disable
themselves with ``ember.amp``'s warning, as PyTorch's do."""

from ember import _dtype as D
from ember.amp._deprecated import device_aliases

__all__ = ["autocast", "GradScaler"]

autocast, GradScaler = device_aliases("cuda", D.float16, __name__)
