"""Start and stop the collection of an attached CUDA profiler (``torch.cuda.profiler``), such as
Nsight Systems run with ``--capture-range=cudaProfilerApi``, through CuPy's
``cudaProfilerStart``/``cudaProfilerStop``."""

import contextlib

from ember.cuda._common import cupy

__all__ = ["start", "stop", "profile"]


def _call(name):
    cp = cupy()
    try:
        getattr(cp.cuda.profiler, name)()
    except cp.cuda.runtime.CUDARuntimeError as e:
        from ember.cuda import CudaError
        raise CudaError(e.status) from None


def start():
    """Start the profiler's data collection; raises CudaError if CUDA refuses."""
    _call("start")


def stop():
    """Stop the profiler's data collection; raises CudaError if CUDA refuses."""
    _call("stop")


@contextlib.contextmanager
def profile():
    """A ``with`` block whose CUDA work the attached profiler collects."""
    try:
        start()
        yield
    finally:
        stop()
