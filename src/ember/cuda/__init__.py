"""ember.cuda: device queries. The CuPy backend itself arrives with the CUDA issue."""

from ember import backend as _backend

__all__ = ["is_available", "device_count"]


def is_available():
    """True when a CUDA device can be used."""
    return _backend.cuda_available()


def device_count():
    """The number of usable CUDA devices (0 without CuPy)."""
    if not is_available():
        return 0
    import cupy
    return cupy.cuda.runtime.getDeviceCount()
