"""``ufunc.at`` in an order fixed by the data, for GPUs under ``use_deterministic_algorithms``.

A GPU's ``add.at`` combines values that land on the same element with atomics, in whatever
order its threads arrive, so a float sum can change in its last bits from run to run. Here
the values are sorted by where they land (a stable sort: repeats keep their order), each
element's run is combined pairwise in log2(longest run) passes over the whole array, and
each element is updated once. Pairwise sums are also the more accurate ones.
"""

import numpy as np

__all__ = ["ordered_at"]



def ordered_at(xp, ufunc, target, index, values):
    """``ufunc.at(target, index, values)`` with a run-to-run identical result."""
    if isinstance(index, tuple) or index.dtype == np.bool_:
        # any key: number the target's elements and combine element by element
        where = xp.arange(target.size).reshape(target.shape)[index]
        place, tail = (lambda rows: xp.unravel_index(rows, target.shape)), ()
    else:
        # an integer array picks rows along the first dim, combined row by row
        where = index % target.shape[0]             # negative indices count from the end
        place, tail = (lambda rows: rows), target.shape[1:]
    if where.size == 0:
        return
    # 16-bit floats combine in float32, as PyTorch's kernels do
    low = target.dtype.kind in "fV" and target.dtype.itemsize == 2
    wide = np.dtype(np.float32) if low else target.dtype
    rows = where.reshape(-1)
    order = xp.argsort(rows, kind="stable")
    rows = rows[order]
    runs = xp.broadcast_to(xp.asarray(values), where.shape + tail).reshape(rows.size, -1)[order]
    runs = runs.astype(wide)
    starts, rank, length = _runs(xp, rows)
    step = 1
    longest = int(length.max())                     # the one wait for the device
    while step < longest:
        # each run's element r takes in element r + step when r is a multiple of 2 * step
        take = ((rank[:-step] % (2 * step) == 0) & (rank[:-step] + step < length[:-step]))
        runs[:-step] = xp.where(take[:, None], ufunc(runs[:-step], runs[step:]), runs[:-step])
        step *= 2
    key = place(rows[starts])
    combined = runs[starts].reshape((starts.size,) + tail)
    target[key] = ufunc(target[key].astype(wide), combined).astype(target.dtype)


def _runs(xp, rows):
    """For sorted ``rows``: where each run of equal rows starts, and for every element its
    rank within its run and its run's length."""
    first = xp.ones(rows.size, dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    starts = xp.flatnonzero(first)
    run = xp.cumsum(first) - 1
    bounds = xp.concatenate((starts, xp.full(1, rows.size, dtype=starts.dtype)))
    return starts, xp.arange(rows.size) - starts[run], (bounds[1:] - bounds[:-1])[run]
