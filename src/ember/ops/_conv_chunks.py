"""Convolution work split over the batch: chunks of a few MiB of columns, each of which stays
in cache, run on the CPU worker threads (backend/cpu_kernels.py) when the whole is large."""

from ember.backend.cpu_kernels import get_num_threads, map_chunks

__all__ = ["map_samples"]

CHUNK_BYTES = 2 << 20
PARALLEL_BYTES = 3 << 20       # less: about a millisecond of work, which threads barely shorten


def map_samples(xp, b, per_sample_bytes, fn):
    """``[fn(lo, hi) ...]`` over the batch in chunks of a few MiB of columns, each of which
    stays in cache; on the worker threads unless the whole is too small to be worth it. Each
    worker thread takes one run of chunks (map_chunks called on a worker runs them in turn):
    one hand-over per thread rather than one per chunk."""
    step = max(1, CHUNK_BYTES // max(per_sample_bytes, 1))
    if b * per_sample_bytes < PARALLEL_BYTES:
        if xp.__name__ != "numpy":
            return [fn(0, b)]
        # in this thread, but still in chunks that stay in cache: a product of 2.4 MiB of
        # columns takes 2.8x the time of one of half of them
        return [fn(lo, min(lo + step, b)) for lo in range(0, b, step)]

    def run(lo, hi):
        return map_chunks(xp, hi - lo, step, lambda a, z: fn(lo + a, lo + z))
    return [part for parts in map_chunks(xp, b, -(-b // get_num_threads()), run)
            for part in parts]
