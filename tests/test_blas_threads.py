"""BLAS threads that follow the idle cores (ember.backend.blas_threads)."""

import types

import numpy as np
import pytest

import ember
from ember.backend import blas_threads
from ember.backend.blas_threads import follow_load, threads_for


class FakeBlas:
    """One OpenBLAS stand-in: its thread count and the counts it was given."""

    def __init__(self, count):
        self.count, self.given = count, []

    def set(self, n):
        self.count = n
        self.given.append(n)

    def get(self):
        return self.count


@pytest.fixture
def machine(monkeypatch):
    """Two usable cores, a fake OpenBLAS on both, and readings the test hands in."""
    blas = FakeBlas(2)
    readings = []
    monkeypatch.setattr(blas_threads, "controls", lambda: [(blas.set, blas.get)])
    monkeypatch.setattr(blas_threads, "_usable_cores", lambda: {0, 1})
    monkeypatch.setattr(blas_threads, "_reading", lambda: readings.pop(0))
    monkeypatch.setattr(blas_threads.time, "monotonic", lambda: readings[0][0] if readings
                        else 1e9)
    monkeypatch.setattr(blas_threads, "_Load", type("_Load", (), {
        "fixed": False, "limit": None, "applied": None, "last": None}))
    return types.SimpleNamespace(blas=blas, readings=readings)


def look(machine, wall, busy, own):
    machine.readings.append((wall, busy, own))
    blas_threads._look()


@pytest.mark.parametrize("idle, limit, threads", [
    (2.0, 2, 2), (1.6, 2, 2), (1.4, 2, 1), (0.0, 2, 1), (-0.5, 4, 1), (3.7, 4, 4),
    (7.9, 4, 4), (2.5, 16, 3)])
def test_threads_for_rounds_the_idle_cores_within_one_and_the_limit(idle, limit, threads):
    assert threads_for(idle, limit) == threads


def test_busy_neighbours_take_blas_down_to_one_thread_and_quiet_gives_it_back(machine):
    look(machine, 0.0, 0.0, 0.0)           # the first reading only starts a window
    assert machine.blas.given == []
    # one second in which the machine's two cores were busy 1.9 s, 0.9 s of it ours
    look(machine, 1.0, 1.9, 0.9)
    assert machine.blas.given == [1]
    # then only this process ran: both cores are idle to BLAS again
    look(machine, 2.0, 2.9, 1.9)
    assert machine.blas.given == [1, 2]


def test_a_window_shorter_than_the_period_keeps_its_start(machine):
    look(machine, 0.0, 0.0, 0.0)
    machine.readings.append((0.1, 0.2, 0.0))    # 0.1 s later: no reading is taken yet
    blas_threads._look()
    assert machine.readings == [(0.1, 0.2, 0.0)] and machine.blas.given == []
    machine.readings.clear()
    look(machine, 1.0, 1.5, 0.0)                # the window is the whole second
    assert machine.blas.given == [1]


def test_a_thread_count_set_by_someone_else_is_left_alone(machine):
    look(machine, 0.0, 0.0, 0.0)
    look(machine, 1.0, 1.9, 0.1)
    assert machine.blas.count == 1
    machine.blas.count = 2                      # threadpoolctl, say
    look(machine, 2.0, 3.8, 0.2)
    assert machine.blas.count == 2 and machine.blas.given == [1]


def test_set_num_threads_fixes_the_count(machine):
    blas_threads.set_blas_threads(1)
    look(machine, 0.0, 0.0, 0.0)
    look(machine, 1.0, 0.0, 0.0)                # an idle machine
    assert machine.blas.count == 1 and machine.blas.given == [1]


def test_a_count_above_what_openblas_starts_is_read_back(machine):
    machine.blas.set = lambda n: setattr(machine.blas, "count", min(n, 4))
    blas_threads.set_blas_threads(200)
    assert blas_threads._Load.applied == blas_threads._Load.limit == 4


def test_deterministic_algorithms_keep_the_count(machine):
    ember.use_deterministic_algorithms(True)
    try:
        look(machine, 0.0, 0.0, 0.0)
        look(machine, 1.0, 1.9, 0.0)            # busy neighbours
    finally:
        ember.use_deterministic_algorithms(False)
    assert machine.blas.given == []


def test_the_limit_is_the_thread_count_of_ember(machine, monkeypatch):
    monkeypatch.setattr("ember.backend.cpu_kernels._Pool.threads", 1)     # MKL_NUM_THREADS=1
    look(machine, 0.0, 0.0, 0.0)
    look(machine, 1.0, 0.0, 0.0)                # an idle machine
    assert machine.blas.given == [1]


def test_without_proc_stat_the_count_stays(machine, monkeypatch):
    monkeypatch.setattr(blas_threads, "_reading", lambda: None)
    machine.readings.append((0.0, 0.0, 0.0))    # for the fake clock only
    blas_threads._look()
    assert blas_threads._Load.fixed and machine.blas.given == []


def test_products_look_at_the_load_only_on_numpy(monkeypatch):
    looks = []
    monkeypatch.setattr(blas_threads, "_look", lambda: looks.append(1))
    for _ in range(2 * blas_threads._EVERY):
        follow_load(types.SimpleNamespace())
    assert looks == []
    for _ in range(2 * blas_threads._EVERY):
        follow_load(np)
    assert len(looks) == 2


def test_matrix_products_count_towards_a_look(monkeypatch):
    looks = []
    monkeypatch.setattr(blas_threads, "_look", lambda: looks.append(1))
    a = ember.ones(3, 3, requires_grad=True)
    for _ in range(blas_threads._EVERY):
        ember.nn.functional.linear(a, a).sum().backward()   # a linear and two matmuls
    assert len(looks) == 3


@pytest.mark.skipif(blas_threads._reading() is None, reason="no /proc/stat")
def test_a_reading_counts_busy_time_and_this_process_cpu_time():
    first = blas_threads._reading()
    sum(i * i for i in range(200_000))          # some CPU time of this process's own
    second = blas_threads._reading()
    assert second[0] > first[0] and second[2] > first[2] and second[1] >= first[1]


def test_one_thread_is_held_until_the_last_overlapping_caller_leaves():
    # the count is the process's: a caller leaving while another is inside must not give
    # BLAS its threads back (the other's product would round as with two threads)
    count = [4]
    setter, getter = (lambda n: count.__setitem__(0, n)), (lambda: count[0])
    first, second = blas_threads._single(setter, getter), blas_threads._single(setter, getter)
    first.__enter__()
    assert count == [1]
    second.__enter__()
    first.__exit__(None, None, None)
    assert count == [1]
    second.__exit__(None, None, None)
    assert count == [4]
