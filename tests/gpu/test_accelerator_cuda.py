"""The device-agnostic API on a GPU: ``ember.accelerator`` acts on ``ember.cuda``, and
``ember.Stream``/``ember.Event`` hand out CUDA streams and events."""

import pytest

import ember
from ember import accelerator

pytestmark = pytest.mark.cuda


def test_the_accelerator_is_cuda():
    assert accelerator.is_available() is True
    assert accelerator.device_count() == ember.cuda.device_count() >= 1
    for checked in (False, True):
        current = accelerator.current_accelerator(check_available=checked)
        assert current == ember.device("cuda") and current.index is None
    assert accelerator.current_device_index() == ember.cuda.current_device()
    device = accelerator.current_accelerator(check_available=True) or "cpu"
    assert ember.nn.Linear(3, 2).to(device).weight.is_cuda


def test_device_index_switches_and_restores():
    last = accelerator.device_count() - 1
    with accelerator.device_index(last):
        assert accelerator.current_device_index() == last
        assert ember.ones(1, device="cuda").device == ember.device("cuda", last)
    assert accelerator.current_device_index() == 0
    with accelerator.device_index(None):
        assert accelerator.current_device_index() == 0
    accelerator.set_device_index(f"cuda:{last}")
    assert accelerator.current_device_index() == last
    accelerator.set_device_index(-1)             # negative: nothing changes
    assert accelerator.current_device_index() == last
    accelerator.set_device_index(ember.device("cuda", 0))
    with pytest.warns(FutureWarning):
        assert accelerator.current_device_idx() == 0
    with pytest.raises(ValueError, match="cpu doesn't match the current accelerator cuda"):
        accelerator.set_device_index("cpu")


def test_streams_and_synchronize_through_the_accelerator():
    stream = ember.Stream()
    assert isinstance(stream, ember.cuda.Stream) and isinstance(stream, ember.Stream)
    assert (stream.device_type, stream.device_index) == ("cuda", 0)
    assert stream.native_handle == stream.stream_id == stream.cuda_stream
    assert stream != accelerator.current_stream() and not stream.is_capturing()
    with stream as entered:
        assert entered is stream and accelerator.current_stream() == stream
        y = ember.ones(4, device="cuda") * 3
    assert accelerator.current_stream() == ember.cuda.default_stream()
    accelerator.set_stream(stream)
    assert ember.cuda.current_stream() == stream
    accelerator.set_stream(ember.cuda.default_stream())
    accelerator.synchronize()
    accelerator.synchronize("cuda:0")
    assert y.sum().item() == 12.0
    with pytest.raises(ValueError, match="doesn't match the current accelerator"):
        accelerator.synchronize("cpu")


def test_generic_events_time_gpu_work():
    start = ember.Event(enable_timing=True)
    end = ember.Event("cuda", enable_timing=True)
    assert isinstance(start, ember.cuda.Event) and isinstance(end, ember.Event)
    assert start.device == ember.device("cuda", 0) and start.event_id == start.cuda_event
    a = ember.randn(256, 256, device="cuda")
    start.record()
    b = a @ a
    end.record(accelerator.current_stream())
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0 and b.shape == (256, 256)
    last = accelerator.device_count() - 1
    assert ember.Event(f"cuda:{last}").device == ember.device("cuda", last)
    assert ember.Stream(last).device == ember.device("cuda", last)


def test_memory_through_the_accelerator():
    accelerator.empty_cache()
    accelerator.reset_peak_memory_stats()
    before = accelerator.memory_allocated()
    x = ember.empty(1 << 20, device="cuda")
    assert accelerator.memory_allocated(0) - before == x.nbytes
    assert accelerator.max_memory_allocated("cuda:0") >= before + x.nbytes
    assert accelerator.memory_reserved() >= accelerator.memory_allocated()
    assert accelerator.max_memory_reserved() >= accelerator.memory_reserved()
    assert accelerator.memory_stats()["allocated_bytes.all.current"] == before + x.nbytes
    free, total = accelerator.get_memory_info()
    assert 0 <= free <= total
    del x
    accelerator.reset_accumulated_memory_stats()
    accelerator.empty_host_cache()
    with pytest.raises(ValueError, match="doesn't match the current accelerator"):
        accelerator.memory_allocated(ember.device("cpu"))


def test_capability_lists_the_dtypes_a_gpu_holds():
    dtypes = accelerator.get_device_capability()["supported_dtypes"]
    assert {ember.float32, ember.float16, ember.bfloat16, ember.int64, ember.bool} <= dtypes
    assert accelerator.get_device_capability("cuda:0")["supported_dtypes"] == dtypes
