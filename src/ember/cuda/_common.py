"""What every part of ember.cuda shares: the lazily loaded backend and device indices."""

from ember import backend
from ember._device import device as _device

__all__ = ["cupy", "index_of", "is_initialized"]


def is_initialized():
    """Whether ember has started using CUDA in this process."""
    return backend.cuda_initialized()


def cupy():
    """The cupy module, once the CUDA backend is loaded; raises without CUDA."""
    return backend.cuda_backend().cupy


def index_of(device, optional=True):
    """The GPU index ``device`` names (an int, "cuda:N", or a device); None means the
    current GPU (returned as None when ``optional``, else looked up)."""
    if device is None:
        index = None
    elif isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        device = _device(device)
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        index = device.index
    if index is None and not optional:
        index = cupy().cuda.runtime.getDevice()
    return index
