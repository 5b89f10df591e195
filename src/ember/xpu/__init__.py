"""ember.xpu: Intel's GPUs (``torch.xpu``), which ember does not run on."""

from ember._no_device import device_count, is_available

__all__ = ["is_available", "device_count"]
