"""ember.utils.benchmark with CUDA in use: the default timer waits for queued GPU work."""

import pytest

import ember
from ember.utils.benchmark import Timer, timer

pytestmark = pytest.mark.cuda


def test_default_timer_synchronizes_cuda(monkeypatch):
    x = ember.ones(64, device="cuda")
    assert ember.backend.cuda_initialized()
    syncs, real = [], ember.cuda.synchronize
    monkeypatch.setattr(ember.cuda, "synchronize",
                        lambda device=None: syncs.append(device) or real(device))
    assert timer() > 0 and syncs == [None]
    m = Timer("y = x * 2", globals={"x": x}).timeit(10)
    assert syncs == [None] * 5  # each timing reads the clock twice: warm-up and measurement
    assert m.number_per_run == 10 and m.raw_times[0] > 0


def test_blocked_autorange_on_gpu_work():
    x = ember.ones(256, 256, device="cuda")
    m = Timer("y = x @ x", globals={"x": x}).blocked_autorange(min_run_time=0.05)
    assert m.number_per_run >= 1 and len(m.raw_times) >= 1 and m.median > 0
    assert m.times == [t / m.number_per_run for t in m.raw_times]
