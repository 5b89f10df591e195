"""CPU threading for the NumPy kernels: intra-op worker threads (BLAS's own threads are
blas_threads.py's).

NumPy runs each call on one core. The heavy kernels (convolution) split their batch into
chunks and run the chunks on a pool of worker threads, one per core ``set_num_threads``
allows: NumPy releases the GIL inside copies and BLAS calls, so the chunks run in parallel,
and chunks small enough to stay in cache copy faster than one large array does.

Inside those chunks BLAS runs on one thread. OpenBLAS's threaded GEMM wakes its worker
threads for every call; on a 2-core machine shared with other processes that wake-up costs
milliseconds (measured: a 6x25x36864 product takes 8 ms on two threads and 0.44 ms on one),
and two chunks on two cores already use both.

Large element-wise kernels (gelu and its gradient: some twenty NumPy passes each) run over
cache-sized spans of the flattened arrays, which the calling thread and the workers take one at
a time (``map_elementwise``).
"""

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

from ember.backend.blas_threads import set_blas_threads

__all__ = ["map_chunks", "map_elementwise", "get_num_threads",
           "set_num_threads"]

# below this many elements an element-wise kernel runs on the calling thread in one call:
# handing spans to the workers costs some tens of microseconds. Spans of at most 64K values
# keep a kernel's temporaries in L2 (gelu: 12% faster at 512K values on one thread, 1.7x at 4M;
# 16K-value spans lose it again to the per-call cost of twenty NumPy calls)
_ELEMENTWISE_MIN = 1 << 16
_ELEMENTWISE_SPAN = 1 << 16
# below this many elements, handing element-wise spans to the worker threads cost more than it
# saved whenever other processes kept the cores busy (64K-512K GELU: 1.3-2.7x slower)
_THREADED_MIN = 1 << 20


def _torch_16_bit_lanes():
    """How many 16-bit floats PyTorch's vectorized CPU loops take at a time on this machine:
    32 where it picks its AVX-512 kernels, else 16 (AVX2). The values after the last whole
    vector go through a scalar loop that rounds differently, and ember rounds as they do."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:                 # NumPy's private table moved: assume AVX-512
        return 32
    return 32 if features.get("AVX512_SKX") else 16


TORCH_16_BIT_LANES = _torch_16_bit_lanes()


# --- the intra-op worker pool -----------------------------------------------------------------

def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:      # not on Linux
        return os.cpu_count() or 1


def _default_threads():
    """The cores, fewer where MKL_NUM_THREADS (else OMP_NUM_THREADS) asks, as torch counts."""
    for name in ("MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").split(",")[0].strip()     # OpenMP's "4,2": nested
        if value.isdigit() and int(value) > 0:
            return min(int(value), _cores())
    return _cores()


class _Pool:
    threads = _default_threads()
    executor = None
    lock = threading.Lock()


def _reset_after_fork():
    # a forked child (a DataLoader worker) inherits the executor but none of its threads
    _Pool.executor = None
    _Pool.lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def get_num_threads():
    """The number of threads ember's CPU kernels use (``torch.get_num_threads``)."""
    return _Pool.threads


def check_thread_count(setter, n):
    """PyTorch's RuntimeError unless ``n`` is a positive int (a bool is not one)."""
    if type(n) is not int:
        raise RuntimeError(f"{setter} expects an int, but got {type(n).__name__}")
    if n < 1:
        raise RuntimeError(f"{setter} expects a positive integer")


def set_num_threads(n):
    """Set the number of threads ember's CPU kernels and BLAS products use
    (``torch.set_num_threads``); BLAS then keeps it instead of following the load."""
    check_thread_count("set_num_threads", n)
    set_blas_threads(n)
    with _Pool.lock:
        _Pool.threads = n
        if _Pool.executor is not None:
            _Pool.executor.shutdown(wait=False)
            _Pool.executor = None


def map_chunks(xp, n, chunk, fn, *, threaded_from=0):
    """``[fn(lo, hi) ...]`` over ``range(n)`` cut into spans of at most ``chunk``, run on the
    worker threads when ``n`` is at least ``threaded_from`` (else in turn on the caller's); on
    other backends (their kernels are parallel already) one call covers all."""
    if xp.__name__ != "numpy" or n <= chunk:
        return [fn(0, n)]
    threads = _Pool.threads
    if threads == 1 or n < threaded_from or threading.current_thread().name.startswith(
            "ember-cpu"):
        return [fn(lo, min(lo + chunk, n)) for lo in range(0, n, chunk)]
    spans = _even_spans(n, chunk, threads)
    # each span runs in a copy of the caller's context: NumPy's error state (silenced by the
    # dispatcher) lives in a context variable, which threads do not inherit
    # (submitted under the lock: set_num_threads may shut the executor down meanwhile)
    with _Pool.lock:
        if _Pool.executor is None:
            _Pool.executor = ThreadPoolExecutor(_Pool.threads, thread_name_prefix="ember-cpu")
        futures = [_Pool.executor.submit(contextvars.copy_context().run, fn, lo, hi)
                   for lo, hi in spans]
    return [f.result() for f in futures]


def map_elementwise(xp, kernel, *arrays):
    """``kernel(xp, *arrays)`` for an element-wise ``kernel`` that also takes ``out=``: on
    NumPy, large C-contiguous arrays of one shape and dtype are cut into cache-sized spans that
    the calling thread and the workers share (``_share_spans``), written into one output (the
    same values: each element sees the same steps)."""
    first = arrays[0]
    if (xp.__name__ != "numpy" or first.size < _ELEMENTWISE_MIN
            or not _same_contiguous(first, arrays)):
        return kernel(xp, *arrays)
    flat = [a.reshape(-1) for a in arrays]
    # the result owns its memory in the input's shape (a gradient can then become .grad as
    # it is, not copied); the spans write through a flat view of it
    result = xp.empty(first.shape, first.dtype)
    out = result.reshape(-1)

    def span(lo, hi):
        kernel(xp, *(a[lo:hi] for a in flat), out=out[lo:hi])

    n = first.size
    if n >= _THREADED_MIN and _Pool.threads > 1 \
            and not threading.current_thread().name.startswith("ember-cpu"):
        _share_spans(_even_spans(n, _ELEMENTWISE_SPAN, _Pool.threads), span)
    else:
        for lo in range(0, n, _ELEMENTWISE_SPAN):
            span(lo, min(lo + _ELEMENTWISE_SPAN, n))
    return result


def _even_spans(n, chunk, threads):
    """``range(n)`` cut into spans of at most ``chunk``, as many as ``threads`` share evenly
    (32 samples in spans of 3 would leave one thread 6 spans and the other 5; 12 spans of 2-3
    give each 16)."""
    count = -(-n // chunk)
    count += -count % threads
    bounds = [n * i // count for i in range(count + 1)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def _share_spans(spans, fn):
    """``fn(lo, hi)`` for each of ``spans``, taken one at a time by the calling thread and by
    the workers, each the next one left: a worker that other processes keep off its core
    takes fewer (where spans handed out in advance kept the caller waiting), and the caller
    computes rather than waits."""
    # (next() on a list iterator is atomic under the GIL: each span is taken once)
    pending = iter(spans)

    def drain():
        try:
            for lo, hi in pending:
                fn(lo, hi)
        except BaseException:
            for _ in pending:       # (a span failed: the others stop after the one they run)
                pass
            raise
    with _Pool.lock:        # (set_num_threads may shut the executor down meanwhile)
        if _Pool.executor is None:
            _Pool.executor = ThreadPoolExecutor(_Pool.threads, thread_name_prefix="ember-cpu")
        helpers = [_Pool.executor.submit(contextvars.copy_context().run, drain)
                   for _ in range(_Pool.threads - 1)]
    try:
        drain()
    finally:
        # a helper still queued (the workers busy with other calls' spans) is cancelled, not
        # waited for: nothing is left for it. One that runs writes into the caller's output:
        # wait for every one before any raises
        running = [h for h in helpers if not h.cancel()]
        wait(running)
        for h in running:
            h.result()


def _same_contiguous(first, arrays):
    return all(a.shape == first.shape and a.dtype == first.dtype and a.flags.c_contiguous
               for a in arrays)
