"""ember's CPU worker threads (set_num_threads) and allocator policy."""

import platform
import threading

import numpy as np
import pytest

import ember
from ember.backend.cpu_kernels import map_chunks
from ember.backend.cpu_memory import keep_freed_memory


@pytest.fixture
def threads():
    before = ember.get_num_threads()
    yield
    ember.set_num_threads(before)


def test_set_and_get_num_threads(threads):
    ember.set_num_threads(3)
    assert ember.get_num_threads() == 3
    for bad in (0, -1):
        with pytest.raises(RuntimeError, match="set_num_threads expects a positive integer"):
            ember.set_num_threads(bad)
    for bad, kind in ((1.5, "float"), (True, "bool"), ("2", "str")):
        with pytest.raises(RuntimeError, match=f"set_num_threads expects an int, but got {kind}"):
            ember.set_num_threads(bad)


def test_map_chunks_covers_the_range_in_order_on_worker_threads(threads):
    ember.set_num_threads(2)
    names = set()

    def work(lo, hi):
        names.add(threading.current_thread().name)
        return list(range(lo, hi))
    parts = map_chunks(np, 10, 3, work)
    # four spans of at most 3, as many per thread: 2 + 3 + 2 + 3
    assert parts == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]]
    assert all(n.startswith("ember-cpu") for n in names)
    spans = map_chunks(np, 32, 3, lambda lo, hi: hi - lo)
    assert sum(spans) == 32 and max(spans) <= 3 and len(spans) % 2 == 0
    assert map_chunks(np, 2, 3, work) == [[0, 1]]          # one chunk: the calling thread
    ember.set_num_threads(1)
    names.clear()
    assert map_chunks(np, 10, 5, work) == [list(range(5)), list(range(5, 10))]
    assert names == {threading.current_thread().name}


def test_map_chunks_raises_a_chunks_error(threads):
    ember.set_num_threads(2)

    def work(lo, hi):
        if lo:
            raise ValueError(f"chunk {lo}")
        return lo
    with pytest.raises(ValueError, match="chunk 5"):
        map_chunks(np, 10, 5, work)


def test_convolution_is_the_same_on_one_thread_and_several(threads):
    # big enough (18 MiB of columns) to be cut into chunks
    x = ember.randn(64, 16, 16, 16, dtype=ember.float64)
    w = ember.randn(8, 16, 3, 3, dtype=ember.float64)
    ember.set_num_threads(1)
    one = ember.conv2d(x, w, padding=1)
    ember.set_num_threads(2)
    two = ember.conv2d(x, w, padding=1)
    assert ember.equal(one, two)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the policy is glibc's mallopt")
def test_freed_memory_policy_applies_on_glibc():
    assert keep_freed_memory() is True
