"""Streams, events, pinned memory and the allocator's counters against PyTorch's documented
semantics: pinned DataLoader batches and non-blocking uploads, work queued inside
``ember.cuda.stream(s)``, ``record_stream``/``wait_stream``/``wait_event``, an event's
``elapsed_time`` (PyTorch refuses events without timing, unrecorded or unfinished ones, in
that order), stream priorities, and ``memory_allocated``/``max_memory_allocated`` around
allocations and ``reset_peak_memory_stats``."""

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda


def test_pinned_loader_batches_upload_without_blocking():
    data = ember.arange(24.0).view(12, 2)
    loader = ember.utils.data.DataLoader(ember.utils.data.TensorDataset(data, ember.arange(12)),
                                         batch_size=5, pin_memory=True)
    seen = []
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned() and x.device.type == "cpu"
        gx, gy = x.to("cuda", non_blocking=True), y.cuda(non_blocking=True)
        assert gx.device.type == gy.device.type == "cuda" and not gx.is_pinned()
        seen.append(gx * 1)
    ember.cuda.synchronize()
    np.testing.assert_array_equal(ember.cat(seen).cpu().numpy(), data.numpy())
    assert not ember.ones(2).is_pinned() and ember.ones(2).pin_memory().is_pinned()


def test_work_in_a_stream_context_and_the_waits():
    side = ember.cuda.Stream()
    main = ember.cuda.current_stream()
    assert main == ember.cuda.default_stream() and side != main
    x = ember.ones(4, device="cuda")
    side.wait_stream(main)
    with ember.cuda.stream(side):
        assert ember.cuda.current_stream() == side
        y = x * 3
        x.record_stream(side)           # x is used on side: its memory waits for side
        done = side.record_event(ember.cuda.Event())
    assert ember.cuda.current_stream() == main
    main.wait_event(done)
    main.wait_stream(side)
    assert y.sum().item() == 12.0 and done.query() and side.query()
    with pytest.raises(RuntimeError, match="record_stream\\(\\) expects a CUDA tensor"):
        ember.ones(2).record_stream(side)
    with ember.cuda.stream(None):       # a no-op context
        assert ember.cuda.current_stream() == main


def test_event_elapsed_time_checks_timing_then_recording():
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    plain = ember.cuda.Event()
    assert start.query()                # an unrecorded event has nothing to wait for
    # unrecorded events: CuPy's status error (or the stand-in's TypeError) before
    with pytest.raises(RuntimeError, match="^Both events must be recorded before "
                                           "calculating elapsed time.$"):
        start.elapsed_time(end)
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        plain.elapsed_time(end)         # timing is checked first, as PyTorch does
    start.record()
    ember.ones(1000, device="cuda").sum()
    end.record()
    with pytest.raises(RuntimeError, match="Both events must be recorded"):
        start.elapsed_time(ember.cuda.Event(enable_timing=True))
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0
    plain.record(ember.cuda.current_stream())
    with pytest.raises(RuntimeError, match="^Both events must be created with argument "
                                           "'enable_timing=True'.$"):
        start.elapsed_time(plain)


def test_stream_priorities():
    # ember's Stream had no ``priority``
    assert ember.cuda.Stream(priority=-1).priority == -1
    assert ember.cuda.Stream().priority == 0
    assert ember.cuda.current_stream().priority == 0
    assert ember.cuda.default_stream().priority == 0


def test_allocated_and_peak_arithmetic():
    ember.cuda.synchronize()
    ember.cuda.empty_cache()
    ember.cuda.reset_peak_memory_stats()
    base = ember.cuda.memory_allocated()
    assert ember.cuda.max_memory_allocated() == base
    big = ember.empty(1024, 1024, device="cuda")            # 4 MiB
    assert ember.cuda.memory_allocated() - base == 4 * 2 ** 20
    assert ember.cuda.max_memory_allocated() - base == 4 * 2 ** 20
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    del big
    assert ember.cuda.memory_allocated() == base
    assert ember.cuda.max_memory_allocated() - base == 4 * 2 ** 20     # the peak stays
    assert ember.cuda.memory_reserved() >= 4 * 2 ** 20                 # and the cache
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_allocated() == base
    stats = ember.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == base
    assert stats["allocated_bytes.all.peak"] == base
    ember.cuda.empty_cache()
    assert ember.cuda.memory_reserved() >= base


def test_out_of_memory_error():
    total = ember.cuda.get_device_properties(0).total_memory
    with pytest.raises(ember.cuda.OutOfMemoryError,
                       match=r"^CUDA out of memory. Tried to allocate [0-9.]+ [MG]iB. GPU 0 has "
                             r"a total capacity of") as info:
        ember.empty(total // 4 + 2 ** 18, device="cuda")
    assert isinstance(info.value, RuntimeError)
    assert ember.OutOfMemoryError is ember.cuda.OutOfMemoryError
