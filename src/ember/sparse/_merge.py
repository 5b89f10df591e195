"""Where each entry goes in PyTorch's CPU sum of two COO tensors: one merge pass over both
entry lists in their stored order, the smaller row-major position first, the two entries whose
positions meet at the heads added into one. Planned on the host from the positions alone."""

import numpy as np

__all__ = ["merge_slots"]


def merge_slots(ka, kb):
    """The output entry of each position of ``ka`` and of ``kb`` (int64 NumPy arrays) in the
    merge, and the number of entries: ``(slots_a, slots_b, n)``."""
    if _increasing(kb):
        return _merge_with_increasing(ka, kb)
    if _increasing(ka):                       # the merge treats both lists alike
        slots_b, slots_a, n = _merge_with_increasing(kb, ka)
        return slots_a, slots_b, n
    return _merge_loop(ka.tolist(), kb.tolist())


def _increasing(k):
    return bool((k[1:] > k[:-1]).all())


def _merge_with_increasing(ka, kb):
    """The merge where ``kb`` is strictly increasing (a coalesced operand), without a loop.

    An entry of ``ka`` is taken before every later-met larger head, so ``ka`` splits into runs
    of equal prefix maximum, each led by the entry that set it; runs and ``kb``'s entries come
    out in order of that value, and a ``kb`` entry equal to a run's leader is added to it."""
    peaks = np.maximum.accumulate(ka) if len(ka) else ka
    leader = np.searchsorted(peaks, kb)
    meets = leader < len(ka)
    meets[meets] = peaks[leader[meets]] == kb[meets]
    value = np.concatenate([peaks, kb])
    within = np.concatenate([np.arange(len(ka)), np.where(meets, leader, -1)])
    order = np.lexsort((within, value))
    value, within = value[order], within[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (value[1:] != value[:-1]) | (within[1:] != within[:-1])
    slots = np.empty(len(order), dtype=np.int64)
    slots[order] = np.cumsum(new) - 1
    return slots[:len(ka)], slots[len(ka):], int(new.sum())


def _merge_loop(ka, kb):
    """The merge step by step (both lists unsorted: no closed form)."""
    na, nb = len(ka), len(kb)
    slots_a, slots_b = [0] * na, [0] * nb
    i = j = n = 0
    while i < na and j < nb:
        x, y = ka[i], kb[j]
        if x < y:
            slots_a[i] = n
            i += 1
        elif y < x:
            slots_b[j] = n
            j += 1
        else:
            slots_a[i] = slots_b[j] = n
            i += 1
            j += 1
        n += 1
    slots_a[i:] = range(n, n + na - i)
    n += na - i
    slots_b[j:] = range(n, n + nb - j)
    n += nb - j
    return np.array(slots_a, dtype=np.int64), np.array(slots_b, dtype=np.int64), n
