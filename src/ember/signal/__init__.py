"""Signal processing (``torch.signal``): the window functions of ``ember.signal.windows``."""

from ember.signal import windows

__all__ = ["windows"]
