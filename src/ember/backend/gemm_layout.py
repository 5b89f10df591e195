"""Layouts for matrix-product operands reused many times (an RNN's weights, once per step).

OpenBLAS's sgemm reads a row-major right operand with a stride of one row. Rows whose length
is a power of two of at least 2 KiB map onto the same cache sets, and the products slow down:
an LSTM's 20x256 by 256x1024 product (4 KiB rows) took 1.3x the time it takes with the rows a
cache line further apart (measured 175 vs 132 us; 20x512 by 512x2048: 740 vs 525 us; 2 KiB
rows: 3-10% faster; rows of 3, 4.7 and 6 KiB, and float64 rows, neither gained nor lost).
"""

import numpy as np

__all__ = ["reused_operand"]

_ALIASING_ROW = 2048        # bytes: rows this long or longer, a power of two, alias
_CACHE_LINE = 64


def reused_operand(xp, a):
    """A row-major copy of the 2-D ``a`` for use as the right operand of many products; on the
    CPU its rows sit a cache line further apart when their length would alias."""
    row = a.shape[1] * a.itemsize
    if xp is not np or row < _ALIASING_ROW or row & (row - 1):
        return xp.ascontiguousarray(a)
    buffer = np.empty((a.shape[0], a.shape[1] + _CACHE_LINE // a.itemsize), a.dtype)
    copy = buffer[:, :a.shape[1]]
    copy[...] = a
    return copy
