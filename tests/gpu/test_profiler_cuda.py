"""The profiler with CUDA activity: GPU ops get device time from CUDA events around them,
ranges sum their ops' device time, the table grows PyTorch's CUDA columns, and the Chrome
trace places the ops' device spans on a GPU track (tests/test_profiler.py has the rest)."""

import json

import pytest

import ember
import ember.autograd.profiler
from ember.ops._registry import REGISTRY
from ember.profiler import ProfilerActivity, profile, record_function

pytestmark = pytest.mark.cuda

CPU_AND_CUDA = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def test_gpu_ops_get_device_time():
    a = ember.randn(128, 128, device="cuda")
    with profile(activities=CPU_AND_CUDA, record_shapes=True) as prof:
        with record_function("block"):
            for _ in range(3):
                ember.mm(a, a)
            ember.relu(a)
    events = prof.events()
    mms = [e for e in events if e.name == "aten::mm"]
    assert len(mms) == 3
    for e in mms:
        assert e.device_time_total > 0 and e.self_device_time_total == e.device_time_total
        assert e.input_shapes == [[128, 128], [128, 128]]
        assert e.kernels and e.kernels[0].device == 0
    (block,) = [e for e in events if e.name == "block"]
    assert block.self_device_time_total == 0
    assert block.device_time_total == pytest.approx(sum(c.device_time_total
                                                        for c in block.cpu_children))
    mm = {e.key: e for e in prof.key_averages()}["aten::mm"]
    assert mm.count == 3 and mm.device_time == pytest.approx(mm.device_time_total / 3)


def test_cpu_ops_under_cuda_activity_have_no_device_time():
    with profile(activities=CPU_AND_CUDA) as prof:
        ember.mm(ember.ones(4, 4), ember.ones(4, 4))
    (mm,) = [e for e in prof.events() if e.name == "aten::mm"]
    assert mm.device_time_total == 0 and mm.kernels == []


def test_cpu_activity_alone_times_no_device_work():
    a = ember.randn(16, 16, device="cuda")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        ember.mm(a, a)
    (mm,) = prof.events()
    assert mm.device_time_total == 0
    assert "CUDA" not in prof.key_averages().table()


def test_table_has_cuda_columns_and_footer():
    a = ember.randn(64, 64, device="cuda")
    with profile(activities=CPU_AND_CUDA) as prof:
        ember.mm(a, a)
    lines = prof.key_averages().table(sort_by="cuda_time_total").splitlines()
    for title in ("Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"):
        assert title in lines[1]
    assert lines[1].index("CPU time avg") < lines[1].index("Self CUDA") \
        < lines[1].index("# of Calls")
    assert lines[-1].startswith("Self CUDA time total: ")
    assert lines[-2].startswith("Self CPU time total: ")
    assert "100.00%" in lines[3]


def test_chrome_trace_has_gpu_spans(tmp_path):
    a = ember.randn(64, 64, device="cuda")
    with profile(activities=CPU_AND_CUDA) as prof:
        ember.mm(a, a)
        ember.mm(a, a)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    gpu = [e for e in events if e.get("cat") == "gpu_op"]
    cpu = [e for e in events if e.get("cat") == "cpu_op"]
    assert [e["name"] for e in gpu] == ["aten::mm", "aten::mm"]
    assert all(e["pid"] == "GPU 0" and e["dur"] > 0 for e in gpu)
    assert [e["args"]["External id"] for e in gpu] == [e["args"]["External id"] for e in cpu]
    assert gpu[0]["ts"] <= gpu[1]["ts"]


def test_legacy_use_device_cuda_and_originals_back():
    before = {n: o.forward for n, o in REGISTRY.items()}
    a = ember.randn(32, 32, device="cuda", requires_grad=True)
    with ember.autograd.profiler.profile(use_device="cuda") as prof:
        ember.mm(a, a).sum().backward()
    names = [e.name for e in prof.function_events]
    assert "autograd::engine::evaluate_function: MmBackward0" in names
    assert sum(e.device_time_total > 0 for e in prof.function_events if e.name == "aten::mm") \
        == 3
    assert {n: o.forward for n, o in REGISTRY.items()} == before


def test_only_the_profiler_that_asked_gets_device_time():
    a = ember.randn(32, 32, device="cuda")
    with profile(activities=[ProfilerActivity.CPU]) as cpu_only:
        with profile(activities=CPU_AND_CUDA) as with_cuda:
            ember.mm(a, a)
    assert [e.device_time_total > 0 for e in with_cuda.events()] == [True]
    assert [e.device_time_total for e in cpu_only.events()] == [0]
