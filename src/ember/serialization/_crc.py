"""CRC-32 of big records on several threads.

A record is cut into slices whose CRCs are computed at once on worker threads (``zlib.crc32``
releases the GIL) and then joined: the CRC of ``a + b`` is ``crc(a)`` multiplied by
``x^(8 len(b))`` modulo the CRC polynomial, plus ``crc(b)``. Python's zlib module has no
``crc32_combine``, so the polynomial arithmetic is done here, in CRC-32's reflected bit order
(bit 31 holds the coefficient of ``x^0``).
"""

import functools
import os
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor

SLICE = 1 << 20                 # big enough that the per-slice cost is noise
# a record of one slice is checksummed inline: on a loaded 2-core machine, 64-512 KB records
# handed to a worker saved slower than inline (rv3's A/B: 300 x 64 KB, 80 vs 50 ms)
THREADED_MIN = SLICE + 1
_POLYNOMIAL = 0xEDB88320        # CRC-32's generator, reflected
_ONE = 1 << 31                  # the polynomial 1
_X = 1 << 30                    # the polynomial x


def _multiply(a, b):
    """The product of polynomials ``a`` and ``b`` modulo CRC-32's generator."""
    product = 0
    while a:
        if a & _ONE:
            product ^= b
        a = (a << 1) & 0xFFFFFFFF
        b = (b >> 1) ^ _POLYNOMIAL if b & 1 else b >> 1
    return product


def _squarings():
    """``x^(2^k)`` modulo the generator for k = 0..63."""
    powers = [_X]
    for _ in range(63):
        powers.append(_multiply(powers[-1], powers[-1]))
    return powers


_X_TO_2_TO = _squarings()


@functools.lru_cache(maxsize=64)
def _shift_by(nbytes):
    """``x^(8 nbytes)`` modulo the generator: appending ``nbytes`` bytes multiplies a CRC by
    it."""
    power, bits, k = _ONE, nbytes, 3            # 8 nbytes = nbytes * 2^3
    while bits:
        if bits & 1:
            power = _multiply(_X_TO_2_TO[k], power)
        bits >>= 1
        k += 1
    return power


def combine(crc_a, crc_b, length_b):
    """The CRC-32 of ``a + b`` from the CRC-32s of ``a`` and ``b`` and the length of ``b``."""
    return _multiply(_shift_by(length_b), crc_a) ^ crc_b


class SlicedCrc:
    """The CRC-32 of a record handed over slice by slice (in order) while it is read or
    written: each slice is checksummed on a worker thread as soon as it is added."""

    def __init__(self):
        self._pool = _pool()
        self._parts = []

    def add(self, piece):
        """Start checksumming ``piece`` (a bytes-like object that must not change until
        ``value()`` returns)."""
        self._parts.append((self._pool.submit(zlib.crc32, piece), len(piece)))

    def add_slices(self, data):
        """``add`` each slice of the 1-D byte memoryview ``data``."""
        for piece in slices(data):
            self.add(piece)

    def value(self):
        """The CRC-32 of all the slices added, in order."""
        crc = 0
        for future, length in self._parts:
            crc = combine(crc, future.result(), length)
        return crc


class _Known:
    """A CRC-32 computed at once, with ``SlicedCrc``'s ``value()``."""

    __slots__ = ("_crc",)

    def __init__(self, crc):
        self._crc = crc

    def value(self):
        return self._crc


def start(data):
    """Start the CRC-32 of the 1-D byte memoryview ``data`` (which must not change until
    ``value()`` returns): big data is checksummed on the worker threads meanwhile."""
    if len(data) < THREADED_MIN:
        return _Known(zlib.crc32(data))
    checksum = SlicedCrc()
    checksum.add_slices(data)
    return checksum


def slices(data):
    """The consecutive ``SLICE``-byte pieces of the 1-D byte memoryview ``data``."""
    return (data[start:start + SLICE] for start in range(0, len(data), SLICE))


_pools = {}                     # (pid, threads) -> executor: a forked child makes its own
_pools_lock = threading.Lock()


def _pool():
    """The checksum threads: as many as ember's CPU kernels use (``set_num_threads``)."""
    from ember.backend.cpu_kernels import get_num_threads
    key = (os.getpid(), get_num_threads())
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            # a pool of another size is dropped, not shut down: a load on another thread
            # may still be submitting to it (its threads end once it is collected)
            for stale in [k for k in _pools if k[0] == key[0]]:
                del _pools[stale]
            pool = _pools[key] = ThreadPoolExecutor(key[1], thread_name_prefix="ember-crc")
    return pool
