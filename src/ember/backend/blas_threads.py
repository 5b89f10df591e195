"""How many threads NumPy's BLAS (OpenBLAS) runs a matrix product on.

OpenBLAS splits a product over its threads and spins until the slowest has finished. When
other processes keep the cores busy, the scheduler sets one of those threads aside for
milliseconds and the whole product waits: on a 2-core machine beside two busy processes, a
LeNet training step took 70 ms with two BLAS threads and 7 ms with one, and three epochs of
the digits demo 8-10 s against 2 s. On an idle machine the second thread halves a large
product. So BLAS follows the idle cores: every ``_EVERY`` products (and at most every
``_PERIOD`` seconds) ember reads how much CPU time the other processes took on the cores it
may use since its last look (/proc/stat's busy time, less this process's own) and gives BLAS
the cores they left idle: at least one, at most ``get_num_threads()``.

OpenBLAS's products can differ in their last bits between thread counts, so a count that
follows the load makes runs repeat only to rounding. A fixed count makes them repeat bit for
bit, as PyTorch's do: ``set_num_threads(n)`` fixes it at n, and
``use_deterministic_algorithms(True)`` keeps the count it finds. A thread count ember did not
set (threadpoolctl, say) is left alone until it is ember's again. Where /proc/stat is missing
(not Linux), BLAS keeps the count it has.
"""

import contextlib
import ctypes
import itertools
import os
import threading
import time

import numpy as np

__all__ = ["one_blas_thread", "follow_load", "set_blas_threads"]

_EVERY = 16                 # products between looks at the clock
_PERIOD = 0.25              # seconds: shorter windows hold too few clock ticks to measure


# --- the OpenBLAS libraries in this process ----------------------------------------------------

def _find_openblas():
    """The thread setters and getters of every OpenBLAS loaded in this process (NumPy's first,
    then SciPy's, by their paths), as ``[(set_num_threads, get_num_threads), ...]``."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line and ".so" in line}
    except OSError:
        return []
    controls = []
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        control = _thread_functions(lib)
        if control is not None:
            controls.append(control)
    return controls


def _thread_functions(lib):
    for prefix in ("scipy_openblas_", "openblas_"):
        for suffix in ("64_", ""):
            setter = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
            getter = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                return setter, getter
    return None


_CONTROLS = []                  # [[(set_num_threads, get_num_threads), ...]], found once


def controls():
    """``[(set_num_threads, get_num_threads), ...]`` of the OpenBLAS libraries loaded."""
    if not _CONTROLS:
        _CONTROLS.append(_find_openblas())
    return _CONTROLS[0]


def _numpy_control():
    found = controls()
    return found[0] if found else None


# --- one thread for a while ---------------------------------------------------------------------

_SINGLE_LOCK = threading.Lock()
_single_users = [0, None]       # [threads inside, the count to give back when the last leaves]


@contextlib.contextmanager
def _single(setter, getter):
    # counted, because the setting is the whole process's: a thread that left first would
    # otherwise give BLAS its threads back under another's product (results then differ in
    # their last bits from a run without concurrent callers)
    with _SINGLE_LOCK:
        if _single_users[0] == 0:
            _single_users[1] = getter()
            if _single_users[1] != 1:
                setter(1)
        _single_users[0] += 1
    try:
        yield
    finally:
        with _SINGLE_LOCK:
            _single_users[0] -= 1
            if _single_users[0] == 0 and _single_users[1] != 1:
                setter(_single_users[1])


def one_blas_thread(xp):
    """A context in which NumPy's BLAS runs on one thread (a no-op for other backends)."""
    if xp.__name__ != "numpy":
        return contextlib.nullcontext()
    control = _numpy_control()
    if control is None:
        return contextlib.nullcontext()
    return _single(*control)


# --- threads that follow the load ---------------------------------------------------------------

_COUNT = itertools.cycle(range(_EVERY))      # 0 every _EVERY-th product: a cheap counter


class _Load:
    fixed = False           # a count set by set_num_threads, or no way to read the load
    limit = None            # the most threads; None: worked out at the first look
    applied = None          # the count ember last gave BLAS
    last = None             # (wall, busy seconds of the usable cores, own CPU seconds)


def set_blas_threads(n):
    """Give every loaded OpenBLAS ``n`` threads (as many as it can start), and keep them."""
    found = controls()
    for setter, _ in found:
        setter(n)
    _Load.fixed = True
    _Load.limit = _Load.applied = found[0][1]() if found else n


def follow_load(xp):
    """Count one product; every ``_EVERY``-th on NumPy, fit BLAS's threads to the idle cores."""
    if not next(_COUNT) and xp is np:
        _look()


def _look():
    before = _Load.last
    if _Load.fixed or before is not None and time.monotonic() - before[0] < _PERIOD:
        return                          # fixed, or too short a window yet: keep its start
    from ember._deterministic import STATE
    control = _numpy_control()
    if STATE.enabled or control is None:
        return
    now = _reading()
    if now is None:
        _Load.fixed = True
        return
    _Load.last = now
    if before is None:
        return
    current = control[1]()
    if _Load.applied is not None and current != _Load.applied:
        return                          # someone else chose this count: theirs to keep
    if _Load.limit is None:
        from ember.backend.cpu_kernels import get_num_threads
        _Load.limit = min(current, get_num_threads())
    wanted = threads_for(_idle_cores(before, now), _Load.limit)
    if wanted != current:
        for setter, _ in controls():
            setter(wanted)
    _Load.applied = wanted


def threads_for(idle_cores, limit):
    """The BLAS threads for ``idle_cores`` cores left idle by other processes: the nearest
    whole number, at least 1 and at most ``limit``."""
    return max(1, min(limit, int(idle_cores + 0.5)))


def _idle_cores(before, now):
    """The cores of ``_usable_cores`` that other processes left idle between two readings."""
    wall = now[0] - before[0]
    others = (now[1] - before[1]) - (now[2] - before[2])
    return len(_usable_cores()) - max(0.0, others) / wall


def _usable_cores():
    try:
        return os.sched_getaffinity(0)
    except AttributeError:              # not on Linux
        return range(os.cpu_count() or 1)


_TICK = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)       # user, nice, system, irq, softirq, steal


def _reading():
    """(wall clock, busy CPU seconds of the usable cores, this process's CPU seconds), or
    None without /proc/stat."""
    cores = _usable_cores()
    busy = 0
    try:
        with open("/proc/stat") as f:
            for line in f:              # the cpu lines come first; the rest is long
                name, _, counts = line.partition(" ")
                if not name.startswith("cpu"):
                    break
                if name[3:].isdigit() and int(name[3:]) in cores:
                    fields = counts.split()
                    busy += sum(int(fields[i]) for i in _BUSY_FIELDS if i < len(fields))
    except OSError:
        return None
    return time.monotonic(), busy * _TICK, time.process_time()


def _forget_after_fork():
    # a forked child (a DataLoader worker) starts its own CPU clock
    _Load.last = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
