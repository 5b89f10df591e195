"""What every part of ember.accelerator shares: the check that there is one, and device
indices of its type."""

from ember._device import device as _device

__all__ = ["require", "index_of"]


def require():
    """The accelerator's device type (a device without an index); raises without one."""
    from ember import cuda
    if not cuda.is_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")
    return _device("cuda")


def index_of(device):
    """The device index ``device`` names (an int, "cuda:N", a device), or None for the
    current one; raises without an accelerator or for a device of another type."""
    accelerator = require()
    if device is None or (isinstance(device, int) and not isinstance(device, bool)):
        return device
    device = _device(device)
    if device.type != accelerator.type:
        raise ValueError(f"{device.type} doesn't match the current accelerator "
                         f"{accelerator.type}.")
    return device.index
