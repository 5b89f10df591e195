"""The device-agnostic API without an accelerator: ``ember.accelerator``, ``ember.Stream``,
``ember.Event`` and ``ember.cpu``'s streams (tests/gpu/test_accelerator_cuda.py has the GPU's
side)."""

import pytest

import ember
from ember import accelerator

no_gpu = pytest.mark.skipif(ember.cuda.is_available(), reason="checks the machine without one")
NONE_AVAILABLE = "Cannot access accelerator device when none is available."


@no_gpu
def test_without_an_accelerator_it_says_none_and_refuses_the_rest():
    assert accelerator.is_available() is False and accelerator.device_count() == 0
    assert accelerator.current_accelerator() is None
    assert accelerator.current_accelerator(check_available=True) is None
    calls = [accelerator.current_device_index, accelerator.synchronize,
             accelerator.current_stream, accelerator.empty_cache,
             accelerator.empty_host_cache, accelerator.memory_allocated,
             accelerator.max_memory_reserved, accelerator.get_memory_info,
             accelerator.memory_stats, accelerator.reset_peak_memory_stats,
             accelerator.get_device_capability, lambda: accelerator.set_device_index(0),
             lambda: accelerator.set_stream(ember.Stream()),
             lambda: accelerator.device_index(0).__enter__(), lambda: ember.Stream(0)]
    for call in calls:
        with pytest.raises(RuntimeError, match=NONE_AVAILABLE):
            call()
    with accelerator.device_index(None):       # None switches nothing, so needs nothing
        pass


@no_gpu
def test_no_gpu_generators_without_a_gpu():
    assert ember.cuda.default_generators == ()


@no_gpu
def test_the_usual_device_choice_falls_back_to_the_cpu():
    device = accelerator.current_accelerator(check_available=True) or ember.device("cpu")
    model = ember.nn.Linear(3, 2).to(device)
    assert model.weight.device == ember.device("cpu")


@no_gpu
def test_deprecated_index_names_warn_then_act_as_the_new_ones():
    with pytest.warns(FutureWarning, match=r"current_device_idx\(\) is deprecated"):
        with pytest.raises(RuntimeError, match=NONE_AVAILABLE):
            accelerator.current_device_idx()
    with pytest.warns(FutureWarning, match=r"set_device_idx\(\) is deprecated"):
        with pytest.raises(RuntimeError, match=NONE_AVAILABLE):
            accelerator.set_device_idx(0)


def test_cpu_streams_are_always_done_and_record_no_events():
    stream = ember.Stream("cpu")
    assert type(stream) is ember.Stream and stream.device == ember.device("cpu")
    assert (stream.device_type, stream.device_index, stream.stream_id) == ("cpu", -1, 0)
    assert stream.query() is True and stream.synchronize() is None
    assert stream.is_capturing() is False and stream == ember.Stream("cpu", priority=-1)
    assert hash(stream) == hash(ember.Stream("cpu")) and stream != object()
    assert repr(stream) == "ember.Stream device_type=cpu, device_index=-1, stream_id=0"
    with stream as entered:
        assert entered is stream and ember.ones(2).sum().item() == 2.0
    for call in (stream.record_event, lambda: stream.wait_stream(ember.Stream("cpu"))):
        with pytest.raises(RuntimeError, match="cpu backend doesn't support events."):
            call()
    with pytest.raises(RuntimeError, match="doesn't support getting stream native handle"):
        stream.native_handle


def test_cpu_events_wait_for_nothing_and_time_nothing():
    event = ember.Event("cpu", enable_timing=True)
    assert isinstance(event, ember.Event) and event.device == ember.device("cpu")
    assert event.query() is True and event.synchronize() is None and event.wait() is None
    assert ember.Stream("cpu").wait_event(event) is None and event.event_id == 0
    with pytest.raises(RuntimeError, match="cpu backend doesn't support events."):
        event.record()
    with pytest.raises(RuntimeError, match="cpu backend doesn't support events."):
        event.elapsed_time(ember.Event("cpu", enable_timing=True))
    with pytest.raises(ValueError, match="Both events must be created with argument "
                                         "'enable_timing=True'."):
        event.elapsed_time(ember.Event("cpu"))


@no_gpu
def test_streams_and_events_default_to_the_cpu_without_an_accelerator():
    assert ember.Stream().device == ember.device("cpu")
    assert ember.Event().device == ember.device("cpu")


def test_streams_of_devices_ember_lacks_are_refused():
    with pytest.raises(RuntimeError):
        ember.Stream("mps")
    with pytest.raises(RuntimeError):
        ember.Event("tpu")


def test_cpu_module_streams():
    first = ember.cpu.current_stream()
    assert isinstance(first, ember.cpu.Stream)
    other = ember.cpu.Stream()
    with ember.cpu.stream(other) as entered:
        assert entered is other and ember.cpu.current_stream() is other
        with ember.cpu.stream(None):
            assert ember.cpu.current_stream() is other
    assert ember.cpu.current_stream() is first
    assert other.wait_stream(first) is None and other.record_event() is None
    assert ember.cpu.set_device("cpu") is None and ember.cpu.is_initialized() is True
