"""ember.cuda on a GPU: device queries, streams and events, memory statistics, pinned
memory and the out-of-memory error."""

import re
import sys
import types

import pytest

import ember
from ember.cuda import _nvml

pytestmark = pytest.mark.cuda


def test_device_queries():
    assert ember.cuda.is_available() and ember.cuda.device_count() >= 1
    assert ember.cuda.current_device() == 0
    props = ember.cuda.get_device_properties(0)
    assert props.name == ember.cuda.get_device_name() and props.name.startswith("NVIDIA")
    assert ember.cuda.get_device_capability() == (props.major, props.minor) and props.major >= 7
    assert props.total_memory >= 2 ** 28 and props.multi_processor_count > 0
    with ember.cuda.device(0):
        assert ember.cuda.current_device() == 0
    ember.cuda.set_device("cuda:0")
    ember.cuda.synchronize()
    assert ember.cuda.is_initialized()
    assert "sm_{}{}".format(props.major, props.minor) in ember.cuda.get_arch_list()
    assert ember.cuda.can_device_access_peer(0, 0) in (True, False)
    with pytest.raises(AssertionError, match="Invalid device id"):
        ember.cuda.can_device_access_peer(0, ember.cuda.device_count())
    ember.cuda.ipc_collect()


def test_more_device_queries():
    major = ember.cuda.get_device_capability()[0]
    assert ember.cuda.is_tf32_supported() is (major >= 8)
    flags = ember.cuda.get_gencode_flags()
    assert all(f"code={arch}" in flags for arch in ember.cuda.get_arch_list())
    assert isinstance(ember.cuda.current_blas_handle(), int)
    assert ember.cuda.get_allocator_backend() == "native"
    assert ember.cuda.has_half is True and ember.cuda.is_current_stream_capturing() is False
    ember.cuda.check_error(0)
    with pytest.raises(ember.cuda.CudaError, match="cudaErrorMemoryAllocation"):
        ember.cuda.check_error(2)
    assert issubclass(ember.cuda.CudaError, RuntimeError)


def test_nvidia_smi_readings_through_nvml(monkeypatch):
    calls = []

    def reading(name, value):
        return lambda *args: calls.append((name, args)) or value

    rates = types.SimpleNamespace(gpu=37, memory=12)
    process = types.SimpleNamespace(pid=4242, usedGpuMemory=3 * 2 ** 20)
    nvml = types.SimpleNamespace(
        nvmlInit=reading("init", None), NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1,
        nvmlDeviceGetHandleByPciBusId=reading("bus", "handle"),
        nvmlDeviceGetUtilizationRates=reading("rates", rates),
        nvmlDeviceGetTemperature=reading("temperature", 55),
        nvmlDeviceGetPowerUsage=reading("power", 123000),
        nvmlDeviceGetClockInfo=reading("clock", 1980),
        nvmlDeviceGetMemoryInfo=reading("memory", types.SimpleNamespace(used=2 ** 30)),
        nvmlDeviceGetComputeRunningProcesses=reading("processes", [process]))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(_nvml, "_STARTED", [])
    cuda = ember.cuda
    assert (cuda.utilization(), cuda.memory_usage(), cuda.temperature(0)) == (37, 12, 55)
    assert (cuda.power_draw(), cuda.clock_rate("cuda:0"), cuda.device_memory_used()) == (
        123000, 1980, 2 ** 30)
    assert calls[0] == ("init", ()) and [c for c, _ in calls].count("init") == 1
    assert ("temperature", ("handle", 0)) in calls and ("clock", ("handle", 1)) in calls
    bus_ids = {args[0] for name, args in calls if name == "bus"}
    assert len(bus_ids) == 1 and isinstance(bus_ids.pop(), str)
    assert cuda.list_gpu_processes() == ("GPU:0\nprocess       4242 uses        3.000 MB GPU "
                                         "memory")


def test_external_streams_take_work():
    made = ember.cuda.Stream()
    external = ember.cuda.ExternalStream(made.cuda_stream)
    assert external.cuda_stream == made.cuda_stream and external.device == made.device
    assert made.__cuda_stream__() == (0, made.cuda_stream)
    with ember.cuda.stream(external):
        assert ember.cuda.current_stream() == external
        y = ember.ones(4, device="cuda") * 3
    external.synchronize()
    assert y.sum().item() == 12.0


def test_events_time_gpu_work_on_a_stream():
    s = ember.cuda.Stream()
    assert s != ember.cuda.current_stream() and s.device == ember.device("cuda", 0)
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    a = ember.randn(512, 512, device="cuda")
    s.wait_stream(ember.cuda.current_stream())
    with ember.cuda.stream(s):
        assert ember.cuda.current_stream() == s
        start.record()
        for _ in range(5):
            b = a @ a
        end.record()
    assert ember.cuda.current_stream() == ember.cuda.default_stream()
    end.synchronize()
    assert end.query() and s.query()
    assert start.elapsed_time(end) > 0
    ember.cuda.current_stream().wait_stream(s)
    assert b.shape == (512, 512)
    untimed = ember.cuda.Event()
    untimed.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        start.elapsed_time(untimed)


def test_memory_statistics_follow_allocations():
    ember.cuda.empty_cache()
    ember.cuda.reset_peak_memory_stats()
    before = ember.cuda.memory_allocated()
    t = ember.empty(2 ** 20, device="cuda")                       # 4 MiB
    assert ember.cuda.memory_allocated() - before == 4 * 2 ** 20
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    del t
    assert ember.cuda.memory_allocated() == before
    assert ember.cuda.max_memory_allocated() >= before + 4 * 2 ** 20
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_allocated() == before
    ember.cuda.empty_cache()
    free, total = ember.cuda.mem_get_info()
    assert 0 < free <= total
    nested = ember.cuda.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == ember.cuda.memory_allocated()
    assert nested["reserved_bytes"]["all"]["peak"] == ember.cuda.max_memory_reserved()
    ember.cuda.reset_accumulated_memory_stats()
    with pytest.warns(FutureWarning, match="reset_max_memory_cached now calls"):
        ember.cuda.reset_max_memory_cached()


def test_out_of_memory_names_the_request_and_the_free_memory():
    total = ember.cuda.get_device_properties().total_memory
    with pytest.raises(ember.cuda.OutOfMemoryError) as info:
        ember.empty(2 * total // 4, device="cuda")                 # float32: 2x the card
    assert isinstance(info.value, RuntimeError)
    assert re.match(r"CUDA out of memory\. Tried to allocate [\d.]+ [KMG]iB\. GPU 0 has a total "
                    r"capacity of [\d.]+ [KMG]iB of which [\d.]+ ([KMG]iB|bytes) is free\.",
                    str(info.value)), str(info.value)


def test_memory_fraction_caps_what_ember_may_hold():
    total = ember.cuda.get_device_properties().total_memory
    try:
        ember.cuda.set_per_process_memory_fraction(0.25)
        assert ember.cuda.get_per_process_memory_fraction() == 0.25
        assert ember.ones(2 ** 18, device="cuda").sum().item() == 2 ** 18   # 1 MiB fits
        with pytest.raises(ember.cuda.OutOfMemoryError, match=r"ember may hold [\d.]+ [KMG]iB "
                                                              r"of it"):
            ember.empty(total // 16 + 2 ** 20, device="cuda")        # float32: over the cap
    finally:
        ember.cuda.set_per_process_memory_fraction(1.0)
    assert ember.cuda.get_per_process_memory_fraction() == 1.0
    with pytest.raises(ValueError, match=r"Invalid fraction value: 1\.5\. Allowed range: 0~1"):
        ember.cuda.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError, match="must be `float`"):
        ember.cuda.set_per_process_memory_fraction(1)


def test_nvtx_ranges_reach_cupys_nvtx():
    nvtx = ember.backend.cuda_backend().cupy.cuda.nvtx
    if not hasattr(nvtx, "calls"):
        pytest.skip("the real NVTX records for a profiler, not for a test")
    nvtx.calls.clear()
    assert ember.cuda.nvtx.range_push("outer") == 0
    with ember.cuda.nvtx.range("step {}", 3):
        ember.cuda.nvtx.mark("here")
    assert ember.cuda.nvtx.range_pop() == 0
    assert ember.cuda.nvtx.range_pop() == -1                 # nothing left to end
    ember.cuda.nvtx.range_end(ember.cuda.nvtx.range_start("load"))
    assert [name for name, _ in nvtx.calls] == ["RangePush", "RangePush", "Mark", "RangePop",
                                                "RangePop", "RangeStart", "RangeEnd"]
    assert nvtx.calls[1] == ("RangePush", ("step 3",))


def test_record_stream_keeps_a_freed_tensors_memory_until_the_stream_is_done():
    side = ember.cuda.Stream()
    pending = types.SimpleNamespace(done=False)
    stand_in = hasattr(side._stream, "__dict__")       # the real CuPy's streams are C types
    if stand_in:
        side._stream.record = lambda: pending           # the stream still has work queued
    x = ember.empty(2 ** 20, device="cuda")             # 4 MiB
    held = ember.cuda.memory_allocated()
    x.record_stream(side)
    del x
    assert ember.cuda.memory_allocated() == held        # not back in the pool yet
    if stand_in:
        ember.empty(1, device="cuda")
        assert ember.cuda.memory_allocated() >= held    # still queued work: still held
        pending.done = True
    side.synchronize()
    ember.empty(1, device="cuda")                       # an allocation lets finished ones go
    assert ember.cuda.memory_allocated() <= held - 2 ** 22 + 512
    with pytest.raises(RuntimeError, match="expects a CUDA tensor"):
        ember.ones(2).record_stream(side)


def test_pinned_memory_and_non_blocking_copies():
    x = ember.arange(1000.)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and p.pin_memory() is p
    assert p[10:20].is_pinned() and p.tolist() == x.tolist()
    g = p.to("cuda", non_blocking=True)
    back = g.to("cpu", non_blocking=True)
    ember.cuda.synchronize()
    assert back.is_pinned() and back.tolist() == x.tolist()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        g.pin_memory()
    w = ember.ones(3, requires_grad=True)
    pw = w.pin_memory()
    assert pw.is_pinned() and pw.grad_fn is not None


@pytest.mark.parametrize("factory", [
    lambda: ember.empty(3, pin_memory=True), lambda: ember.zeros(3, pin_memory=True),
    lambda: ember.ones(3, pin_memory=True), lambda: ember.full((3,), 2.0, pin_memory=True),
    lambda: ember.tensor([1.0, 2.0], pin_memory=True), lambda: ember.rand(3, pin_memory=True),
    lambda: ember.randn(3, pin_memory=True), lambda: ember.randperm(3, pin_memory=True),
    lambda: ember.empty_strided((2, 2), (1, 2), pin_memory=True),
    lambda: ember.ones(2, device="cuda").new_empty(3, device="cpu", pin_memory=True)])
def test_factories_pin_when_asked(factory):
    t = factory()
    assert t.device.type == "cpu" and t.is_pinned()


def test_pinned_factory_results_stay_leaves():
    t = ember.zeros(3, pin_memory=True, requires_grad=True)
    assert t.is_pinned() and t.is_leaf and t.requires_grad


def test_dataloader_pins_its_batches():
    data = ember.utils.data.TensorDataset(ember.arange(8.), ember.arange(8))
    for workers in (0, 2):
        loader = ember.utils.data.DataLoader(data, batch_size=4, pin_memory=True,
                                             num_workers=workers)
        x, y = next(iter(loader))
        assert x.is_pinned() and y.is_pinned() and y.tolist() == [0, 1, 2, 3]


def test_default_generators_and_streams_from_elsewhere():
    generators = ember.cuda.default_generators
    assert len(generators) == ember.cuda.device_count()
    assert [g.device for g in generators] == [ember.device("cuda", i)
                                              for i in range(len(generators))]
    generators[0].manual_seed(3)
    first = ember.rand(3, device="cuda:0")
    ember.cuda.manual_seed(3)
    assert ember.equal(first, ember.rand(3, device="cuda:0"))
    made = ember.cuda.Stream()
    wrapped = ember.cuda.get_stream_from_external(made.cuda_stream)
    assert wrapped == made and isinstance(wrapped, ember.cuda.ExternalStream)
