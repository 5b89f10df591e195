"""The cuFFT plan caches (``torch.backends.cuda.cufft_plan_cache``) over CuPy's.

ember's FFTs on a GPU are ``cupy.fft``'s, which keep the cuFFT plans they make in CuPy's
least-recently-used plan cache, one per GPU (and per thread: these act on the calling
thread's). ``cufft_plan_cache[i]`` is GPU ``i``'s: ``size`` counts its plans, ``max_size`` is
its capacity (CuPy's default is 16 plans; 0 turns caching off) and ``clear()`` empties it.
Used directly, ``cufft_plan_cache`` is the current GPU's.
"""

__all__ = ["cuFFTPlanCacheAttrContextProp", "cuFFTPlanCache", "cuFFTPlanCacheManager",
           "cufft_plan_cache"]


def _plan_cache(index):
    """CuPy's plan cache of GPU ``index`` (made on first use) for this thread."""
    from ember.cuda._common import cupy
    cp = cupy()
    with cp.cuda.Device(index):
        return cp.fft.config.get_plan_cache()


def _size(index):
    return _plan_cache(index).get_curr_size()


def _max_size(index):
    return _plan_cache(index).get_size()


def _set_max_size(index, value):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"_cufft_set_plan_cache_max_size(): argument 'max_size' (position 2) "
                        f"must be int, not {type(value).__name__}")
    if value < 0:
        raise RuntimeError(f"cuFFT plan cache size must be non-negative, but got {value}")
    _plan_cache(index).set_size(value)


class cuFFTPlanCacheAttrContextProp:  # noqa: N801  (PyTorch's name)
    """An attribute of a ``cuFFTPlanCache`` read (and set) through functions of its device
    index; a message in place of the setter makes the attribute read-only."""

    def __init__(self, getter, setter):
        self.getter, self.setter = getter, setter

    def __get__(self, obj, objtype=None):
        return self if obj is None else self.getter(obj.device_index)

    def __set__(self, obj, value):
        if isinstance(self.setter, str):
            raise RuntimeError(self.setter)
        self.setter(obj.device_index, value)


class cuFFTPlanCache:  # noqa: N801  (PyTorch's name)
    """One GPU's cuFFT plan cache: ``size`` (plans held, read-only), ``max_size`` (capacity)
    and ``clear()``."""

    def __init__(self, device_index):
        self.device_index = device_index

    size = cuFFTPlanCacheAttrContextProp(
        _size, ".size is a read-only property showing the number of plans currently in the "
               "cache. To change the cache capacity, set cufft_plan_cache.max_size.")
    max_size = cuFFTPlanCacheAttrContextProp(_max_size, _set_max_size)

    def clear(self):
        """Drop every plan in the cache."""
        _plan_cache(self.device_index).clear()


class cuFFTPlanCacheManager:  # noqa: N801  (PyTorch's name)
    """The cuFFT plan caches of all GPUs: indexed by device, one GPU's ``cuFFTPlanCache``;
    used directly (``.max_size``, ``.clear()``), the current GPU's."""

    def __init__(self):
        object.__setattr__(self, "caches", [])

    def __getitem__(self, device):
        from ember import cuda
        from ember.cuda._common import index_of
        index = index_of(device, optional=False)
        count = cuda.device_count()
        if not 0 <= index < count:
            raise RuntimeError(f"cufft_plan_cache: expected 0 <= device index < {count}, but "
                               f"got device with index {index}")
        if not self.caches:
            self.caches.extend(cuFFTPlanCache(i) for i in range(count))
        return self.caches[index]

    def __getattr__(self, name):
        if name.startswith("__"):       # copy, pickle and friends probing for hooks
            raise AttributeError(name)
        from ember import cuda
        return getattr(self[cuda.current_device()], name)

    def __setattr__(self, name, value):
        from ember import cuda
        setattr(self[cuda.current_device()], name, value)


cufft_plan_cache = cuFFTPlanCacheManager()
