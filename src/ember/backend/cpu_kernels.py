"""CPU helpers for the NumPy kernels of convolution: BLAS calls on one thread.

OpenBLAS's threaded GEMM wakes its worker threads for every call; on a 2-core machine shared
with other processes that wake-up costs milliseconds (measured: a 6x25x36864 product takes
8 ms on two threads and 0.44 ms on one), which dominates the convolution GEMMs of small
networks. The conv kernels therefore run their GEMMs single-threaded.
"""

import contextlib
import ctypes

__all__ = ["one_blas_thread"]

_CONTROL = []                   # [(set_num_threads, get_num_threads)] or [None], found once


def _find_openblas():
    """The thread setters of the OpenBLAS loaded in this process, or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line and ".so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                setter = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
                getter = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                if setter is not None and getter is not None:
                    return setter, getter
    return None


def _control():
    if not _CONTROL:
        _CONTROL.append(_find_openblas())
    return _CONTROL[0]


@contextlib.contextmanager
def _single(setter, getter):
    before = getter()
    if before == 1:
        yield
        return
    setter(1)
    try:
        yield
    finally:
        setter(before)


def one_blas_thread(xp):
    """A context in which NumPy's BLAS runs on one thread (a no-op for other backends)."""
    if xp.__name__ != "numpy":
        return contextlib.nullcontext()
    control = _control()
    if control is None:
        return contextlib.nullcontext()
    return _single(*control)
