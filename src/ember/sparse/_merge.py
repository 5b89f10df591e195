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
    return _merge_unsorted(ka, kb)


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


_LIMIT = 1 << 62


def _members(starts, lengths):
    """The positions ``starts[g] .. starts[g] + lengths[g] - 1`` of every group ``g``, in order,
    and the group of each."""
    if len(starts) == 1:
        return np.arange(starts[0], starts[0] + lengths[0]), np.zeros(lengths[0], np.int64)
    group = np.repeat(np.arange(len(starts)), lengths)
    ends = np.cumsum(lengths)
    return np.arange(ends[-1] if len(ends) else 0) + np.repeat(starts - ends + lengths,
                                                              lengths), group


def _common_prefix(xa, xb):
    """The length of the common prefix of two lists."""
    m = min(len(xa), len(xb))
    differ = np.flatnonzero(xa[:m] != xb[:m])
    return int(differ[0]) if len(differ) else m


def _merge_unsorted(ka, kb, max_levels=64):
    """The merge of two lists of any order, a few array passes per level of nested ties.

    A group is a segment of each list merged on its own (at first, the whole lists, of which a
    common prefix pairs up head by head). Each segment splits into runs of equal prefix maximum
    ("peak"); the merge takes every entry under a peak before any entry of either segment with a
    larger one, so runs come out in order of peak, one met by no run of the other segment's
    peak as it is stored. In two runs of one peak the entries equal to it meet in order (each
    blocks its list until the other list's head is one too) and split the runs into smaller
    groups, merged the same way; the rare groups still left after ``max_levels`` levels are
    merged one entry at a time."""
    na, nb = len(ka), len(kb)
    low = int(min(ka.min(initial=0), kb.min(initial=0)))
    high = int(max(ka.max(initial=0), kb.max(initial=0)))
    width = high - low + 1
    pos = np.empty(na + nb, dtype=np.int64)   # place in the merged list of all entries
    paired = np.zeros(nb, dtype=bool)          # kb entries added into a ka entry
    # the groups: their segments of ka and kb (start, length) and first place
    sa, la = np.zeros(1, np.int64), np.array([na], np.int64)
    sb, lb = np.zeros(1, np.int64), np.array([nb], np.int64)
    base = np.zeros(1, np.int64)
    for _ in range(max_levels):
        if len(sa) == 1:           # (x + x: a common prefix pairs up head by head)
            c = _common_prefix(ka[sa[0]:sa[0] + la[0]], kb[sb[0]:sb[0] + lb[0]])
            pos[sa[0]:sa[0] + c] = base[0] + 2 * np.arange(c)
            pos[na + sb[0]:na + sb[0] + c] = base[0] + 2 * np.arange(c) + 1
            paired[sb[0]:sb[0] + c] = True
            sa, sb, la, lb, base = sa + c, sb + c, la - c, lb - c, base + 2 * c
        ia, ga = _members(sa, la)
        ib, gb = _members(sb, lb)
        xa, xb = ka[ia], kb[ib]
        if len(sa) > 1 and len(sa) * width + abs(low) < _LIMIT:   # comparable across groups
            xa, xb = xa + ga * width, xb + gb * width
        elif len(sa) > 1:
            _, rank = np.unique(np.concatenate([xa, xb]), return_inverse=True)
            rank = rank.reshape(-1)
            xa, xb = rank[:len(xa)] + ga * len(rank), rank[len(xa):] + gb * len(rank)
        peaks_a, peaks_b = np.maximum.accumulate(xa), np.maximum.accumulate(xb)
        run_a, run_b = _run_starts(peaks_a, ga), _run_starts(peaks_b, gb)
        peak_a, peak_b = peaks_a[run_a], peaks_b[run_b]
        # places before a run in its group: the earlier runs of its list, those of the other
        # list with a smaller peak (for a pair of runs of one peak, ka's first)
        first_a = np.cumsum(la) - la
        first_b = np.cumsum(lb) - lb
        other = np.searchsorted(peak_b, peak_a)
        g_a, g_b = ga[run_a], gb[run_b]
        ends_a, ends_b = np.append(run_a[1:], len(ia)), np.append(run_b[1:], len(ib))
        shift_a = base[g_a] - first_a[g_a] + np.append(run_b, len(ib))[other] - first_b[g_a]
        shift_b = (base[g_b] - first_b[g_b]
                   + np.append(run_a, len(ia))[np.searchsorted(peak_a, peak_b)] - first_a[g_b])
        pos[ia] = np.arange(len(ia)) + np.repeat(shift_a, ends_a - run_a)
        pos[na + ib] = np.arange(len(ib)) + np.repeat(shift_b, ends_b - run_b)
        # two runs of one peak: the entries equal to the peak meet one by one (the k-th of
        # ka's with the k-th of kb's) and split the runs into the next groups
        met = other < len(peak_b)
        met[met] = peak_b[other[met]] == peak_a[met]
        if not met.any():
            break
        pair_a, pair_b = np.flatnonzero(met), other[met]
        ba, ra = _tops(xa, peaks_a, run_a, ends_a, pair_a)
        bb, rb = _tops(xb, peaks_b, run_b, ends_b, pair_b)
        ca, cb = np.bincount(ra, minlength=len(pair_a)), np.bincount(rb, minlength=len(pair_a))
        both = np.minimum(ca, cb)
        ba, ra = ba[_nth(ra, ca) < both[ra]], ra[_nth(ra, ca) < both[ra]]
        bb = bb[_nth(rb, cb) < both[rb]]
        place = (shift_a[pair_a] + run_a[pair_a])[ra] + ba - run_a[pair_a][ra] + bb \
            - run_b[pair_b][ra]
        pos[ia[ba]] = place
        pos[na + ib[bb]] = place + 1
        paired[ib[bb]] = True
        last = np.ones(len(ra), dtype=bool)
        last[:-1] = ra[1:] != ra[:-1]
        next_a = np.where(last, ends_a[pair_a][ra], np.append(ba[1:], 0))
        next_b = np.where(last, ends_b[pair_b][ra], np.append(bb[1:], 0))
        sa, la = ia[ba] + 1, next_a - ba - 1
        sb, lb = ib[bb] + 1, next_b - bb - 1
        base = place + 2
        keep = (la > 0) | (lb > 0)
        if not keep.any():
            break
        sa, la, sb, lb, base = sa[keep], la[keep], sb[keep], lb[keep], base[keep]
    else:
        for group in zip(sa.tolist(), la.tolist(), sb.tolist(), lb.tolist(), base.tolist()):
            _place_step_by_step(ka, kb, *group, pos, paired)   # (deeply nested ties)
    return _slots(pos, paired, na)


def _tops(x, peaks, starts, ends, runs):
    """The entries equal to their peak in the given runs, and the index in ``runs`` of each."""
    which = np.full(len(starts), -1, dtype=np.int64)
    which[runs] = np.arange(len(runs))
    which = np.repeat(which, ends - starts)
    at = np.flatnonzero((which >= 0) & (x == peaks))
    return at, which[at]


def _nth(run, counts):
    """The place of each entry among those of its run (``run`` nondecreasing)."""
    return np.arange(len(run)) - (np.cumsum(counts) - counts)[run]


def _run_starts(peaks, group):
    """Where a run of equal peak starts (a new group starts one)."""
    new = np.ones(len(peaks), dtype=bool)
    new[1:] = (peaks[1:] != peaks[:-1]) | (group[1:] != group[:-1])
    return np.flatnonzero(new)


def _place_step_by_step(ka, kb, start_a, len_a, start_b, len_b, first, pos, paired):
    """The merge of one group one entry at a time."""
    xa = ka[start_a:start_a + len_a].tolist()
    xb = kb[start_b:start_b + len_b].tolist()
    i = j = 0
    place, at_b = first, len(ka) + start_b
    while i < len_a and j < len_b:
        x, y = xa[i], xb[j]
        if x <= y:
            pos[start_a + i] = place
            place += 1
            i += 1
        if y <= x:
            pos[at_b + j] = place
            paired[start_b + j] = x == y
            place += 1
            j += 1
    pos[start_a + i:start_a + len_a] = np.arange(place, place + len_a - i)
    place += len_a - i
    pos[at_b + j:at_b + len_b] = np.arange(place, place + len_b - j)


def _slots(pos, paired, na):
    """Each entry's output entry from its place in the merged list of all entries."""
    counted = np.ones(len(pos), dtype=bool)
    counted[pos[na:][paired]] = False
    slot_of_place = np.cumsum(counted) - 1
    slots = slot_of_place[pos]
    return slots[:na], slots[na:], int(counted.sum())
