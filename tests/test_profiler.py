"""ember.profiler and ember.autograd.profiler: events per op call with real times and
nesting, the table, the Chrome trace, schedules, and the ops' original forwards back once no
profiler records."""

import gzip
import json
import re
import threading
import warnings

import pytest

import ember
import ember.autograd.profiler as legacy
import ember.profiler as profiler
from ember.autograd import engine
from ember.autograd.graph import Node
from ember.ops._registry import REGISTRY
from ember.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule
from ember.profiler._events import EventList, FunctionEvent, format_time
from ember.profiler._recorder import _node_classes


def _names(events, name):
    return [e for e in events if e.name == name]


def _originals():
    ops = {n: (o.forward, o.inplace_forward) for n, o in REGISTRY.items()}
    nodes = {cls: cls.__dict__.get("apply") for cls in _node_classes()}
    return ops, nodes, engine._run_node, engine._run_leaf


# --- what is recorded -------------------------------------------------------------------------

def test_each_op_call_is_one_event_named_as_pytorchs_kernel():
    a, b = ember.randn(3, 4), ember.randn(4, 5)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            ember.mm(a, b)
        ember.add(a, 1)
        ember.linalg.inv(ember.eye(3))
    events = prof.events()
    assert len(_names(events, "aten::mm")) == 3
    assert len(_names(events, "aten::add")) == 1
    assert len(_names(events, "aten::linalg_inv")) == 1
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::mm"].count == 3
    mm = averages["aten::mm"]
    assert mm.cpu_time_total == pytest.approx(sum(e.cpu_time_total
                                                  for e in _names(events, "aten::mm")))
    assert mm.cpu_time == pytest.approx(mm.cpu_time_total / 3)
    assert all(e.cpu_time_total > 0 for e in events)


def test_in_place_kernels_get_a_trailing_underscore():
    a = ember.ones(3)
    with profile(record_shapes=True) as prof:
        a.add_(1)
    (evt,) = _names(prof.events(), "aten::add_")
    assert evt.input_shapes[0] == [3]


def test_input_shapes_are_the_array_arguments_shapes():
    a, b = ember.randn(3, 4), ember.randn(4, 5)
    with profile(record_shapes=True) as prof:
        ember.mm(a, b)
        ember.sum(a, 1)
    assert _names(prof.events(), "aten::mm")[0].input_shapes == [[3, 4], [4, 5]]
    shapes = _names(prof.events(), "aten::sum")[0].input_shapes
    assert shapes[0] == [3, 4] and all(s == [] for s in shapes[1:])
    with profile() as prof:
        ember.mm(a, b)
    assert _names(prof.events(), "aten::mm")[0].input_shapes == []


def test_record_function_nests_ops_and_self_time_excludes_them():
    a = ember.randn(30, 30)
    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                ember.mm(a, a)
                ember.mm(a, a)
            ember.relu(a)
    events = prof.events()
    (outer,) = _names(events, "outer")
    (inner,) = _names(events, "inner")
    assert outer.cpu_parent is None and inner.cpu_parent is outer
    assert [c.name for c in inner.cpu_children] == ["aten::mm", "aten::mm"]
    assert [c.name for c in outer.cpu_children] == ["inner", "aten::relu"]
    for evt in events:
        assert 0 <= evt.self_cpu_time_total <= evt.cpu_time_total
    assert outer.self_cpu_time_total == pytest.approx(
        outer.cpu_time_total - inner.cpu_time_total - _names(events, "aten::relu")[0]
        .cpu_time_total)
    for child in inner.cpu_children:
        assert inner.time_range.start <= child.time_range.start
        assert child.time_range.end <= inner.time_range.end
    assert outer.is_user_annotation and not inner.cpu_children[0].is_user_annotation


def test_ops_that_call_other_ops_show_them_nested():
    a = ember.randn(4, 4) + 4 * ember.eye(4)
    with profile() as prof:
        ember.linalg.matrix_power(a, -2)
    (power,) = _names(prof.events(), "aten::linalg_matrix_power")
    assert "aten::linalg_inv" in [c.name for c in power.cpu_children]
    assert power.self_cpu_time_total < power.cpu_time_total


def test_record_function_as_a_decorator_and_without_a_profiler():
    @record_function("step_fn")
    def f(x, depth):
        return f(x + 1, depth - 1) if depth else x

    a = ember.ones(2)
    assert f(a, 1).tolist() == [2.0, 2.0]             # no profiler: nothing to record
    with profile() as prof:
        f(a, 2)
    steps = _names(prof.events(), "step_fn")
    assert len(steps) == 3                             # each call its own range, nested
    assert steps[1].cpu_parent is steps[0] and steps[2].cpu_parent is steps[1]
    with record_function("label", "args") as rf:
        assert rf.name == "label" and rf.args == "args"


def test_backward_shows_the_engine_and_its_nodes():
    x = ember.randn(3, 4, requires_grad=True)
    w = ember.randn(4, 5, requires_grad=True)
    with profile() as prof:
        ember.mm(x, w).sum().backward()
    events = prof.events()
    names = [e.name for e in events]
    assert len(_names(events, "aten::mm")) == 3        # forward, and one per input's gradient
    (evaluate,) = _names(events, "autograd::engine::evaluate_function: MmBackward0")
    (node,) = _names(events, "MmBackward0")
    assert node.cpu_parent is evaluate
    assert [c.name for c in node.cpu_children if c.name == "aten::mm"] == ["aten::mm"] * 2
    assert names.count("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad") \
        == 2
    assert names.count("torch::autograd::AccumulateGrad") == 2
    assert "autograd::engine::evaluate_function: SumBackward0" in names


def test_ops_on_other_threads_are_recorded_with_their_thread():
    a = ember.randn(3, 3)
    with profile() as prof:
        t = threading.Thread(target=lambda: ember.mm(a, a))
        t.start()
        t.join()
        ember.mm(a, a)
    mms = _names(prof.events(), "aten::mm")
    assert len(mms) == 2 and mms[0].thread != mms[1].thread
    assert all(m.cpu_parent is None for m in mms)


def test_with_stack_records_the_calling_frames():
    a = ember.randn(3, 3)
    with profile(with_stack=True) as prof:
        ember.mm(a, a)
    stack = _names(prof.events(), "aten::mm")[0].stack
    assert any("test_profiler.py" in s and "test_with_stack" in s for s in stack)
    assert not any("ember/profiler" in s for s in stack)
    grouped = prof.key_averages(group_by_stack_n=1)
    assert grouped[0].stack == stack[:1]


# --- zero cost when off -----------------------------------------------------------------------

def test_original_functions_are_back_after_the_profiler():
    before = _originals()
    a = ember.randn(3, 3, requires_grad=True)
    with profile():
        assert REGISTRY["mm"].forward is not before[0]["mm"][0]
        assert engine._run_node is not before[2]
        (a @ a).sum().backward()
    after = _originals()
    assert after[0].keys() == before[0].keys()
    for name, (fwd, inplace) in before[0].items():
        assert after[0][name][0] is fwd and after[0][name][1] is inplace, name
    for cls, apply in before[1].items():
        assert after[1][cls] is apply, cls
    assert after[2] is before[2] and after[3] is before[3]
    assert not hasattr(REGISTRY["mm"].forward, "__wrapped__")


def test_originals_are_back_after_an_error_inside():
    before = _originals()
    with pytest.raises(ValueError, match="boom"):
        with profile():
            ember.mm(ember.ones(2, 2), ember.ones(2, 2))
            raise ValueError("boom")
    assert _originals()[0] == before[0] and _originals()[2] is before[2]


def test_nested_profilers_share_the_hooks_until_the_last_stops():
    before = _originals()
    a = ember.randn(3, 3)
    with profile() as outer:
        ember.mm(a, a)
        with profile() as inner:
            ember.relu(a)
        assert REGISTRY["mm"].forward is not before[0]["mm"][0]      # outer still records
        ember.mm(a, a)
    assert [e.name for e in inner.events()] == ["aten::relu"]
    assert [e.name for e in outer.events()] == ["aten::mm", "aten::relu", "aten::mm"]
    assert _originals()[0] == before[0]


def test_a_profiler_started_inside_a_range_sees_no_parent():
    a = ember.randn(3, 3)
    with profile() as outer:
        with record_function("block"):
            with profile() as inner:
                ember.mm(a, a)
    (mm,) = _names(inner.events(), "aten::mm")
    assert mm.cpu_parent is None
    assert _names(outer.events(), "aten::mm")[0].cpu_parent.name == "block"


# --- tables -----------------------------------------------------------------------------------

def _columns(line):
    return re.split(r"\s{2,}", line.strip())


def test_table_columns_footer_and_widths():
    a = ember.randn(3, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("model_inference"):
            ember.mm(a, a.T)
            ember.mm(a, a.T)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    lines = table.splitlines()
    assert _columns(lines[1]) == ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total",
                                  "CPU time avg", "# of Calls"]
    assert lines[0] == lines[2] == lines[-2]
    assert lines[0] == "-" * len("model_inference    ") + "  " + "------------  " * 6
    assert lines[-1].startswith("Self CPU time total: ")
    rows = {_columns(line)[0]: _columns(line) for line in lines[3:-2]}
    assert rows["aten::mm"][-1] == "2"
    assert rows["model_inference"][3] == "100.00%"          # the one top-level range
    assert list(rows)[0] == "model_inference"               # sorted by CPU total
    assert len(table.splitlines()) == 3 + 3 + 2             # two rows; rules and footer
    assert table.endswith("\n")
    one_row = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=1)
    assert len(one_row.splitlines()) == 3 + 1 + 2


def test_table_with_input_shapes_and_truncated_names():
    a = ember.randn(3, 4)
    with profile(record_shapes=True) as prof:
        with record_function("x" * 70):
            ember.mm(a, a.T)
            ember.mm(a.T, a)
    table = prof.key_averages(group_by_input_shape=True).table()
    lines = table.splitlines()
    assert _columns(lines[1])[-1] == "Input Shapes"
    assert "[[3, 4], [4, 3]]" in table and "[[4, 3], [3, 4]]" in table
    assert lines[3].startswith("x" * 52 + "...  ")              # clipped to 55 characters
    assert "Input Shapes" not in prof.key_averages().table()


def test_format_time_follows_pytorch_units():
    assert format_time(12.3456) == "12.346us"
    assert format_time(1234.0) == "1.234ms" and format_time(999.9994) == "999.999us"
    assert format_time(2_500_000) == "2.500s"
    assert format_time(1500, "us") == "1500.000us" and format_time(15, "ms") == "0.015ms"


def _fake_events(device=None):
    outer = FunctionEvent(1, "outer", 1, 0.0, 3000.0, use_device=device)
    mm = FunctionEvent(2, "aten::mm", 1, 10.0, 1510.0, use_device=device,
                       device_time_us=480.0 if device else 0.0)
    mm.set_cpu_parent(outer)
    outer.append_cpu_child(mm)
    return EventList([outer, mm], use_device=device)


def test_table_times_percentages_and_device_columns():
    events = _fake_events()
    lines = events.table().splitlines()
    assert _columns(lines[3]) == ["outer", "50.00%", "1.500ms", "100.00%", "3.000ms",
                                  "3.000ms", "1"]
    assert _columns(lines[4]) == ["aten::mm", "50.00%", "1.500ms", "50.00%", "1.500ms",
                                  "1.500ms", "1"]
    assert lines[-1] == "Self CPU time total: 3.000ms"
    cuda = _fake_events("cuda").table(time_unit="us").splitlines()
    assert _columns(cuda[1]) == ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total",
                                 "CPU time avg", "Self CUDA", "Self CUDA %", "CUDA total",
                                 "CUDA time avg", "# of Calls"]
    assert _columns(cuda[3])[6:10] == ["0.000us", "0.00%", "480.000us", "480.000us"]
    assert _columns(cuda[4])[6:10] == ["480.000us", "100.00%", "480.000us", "480.000us"]
    assert cuda[-1] == "Self CUDA time total: 480.000us"
    assert EventList([]).table() == ""
    top = _fake_events().table(top_level_events_only=True).splitlines()
    assert top[1] == "This report only display top-level ops statistics"
    assert len(top[0]) == len(top[2]) - 2 and set(top[0]) == {"="}
    assert len(top) == 2 + 3 + 1 + 2


def test_key_averages_order_sort_and_total():
    a = ember.randn(3, 3)
    with profile() as prof:
        ember.relu(a)
        ember.mm(a, a)
        ember.relu(a)
    averages = prof.key_averages()
    assert [e.key for e in averages] == ["aten::relu", "aten::mm"]   # first-seen order
    assert averages[0].count == 2
    total = prof.events().total_average()
    assert total.key == "Total" and total.count == 3
    assert prof.events().self_cpu_time_total == pytest.approx(
        sum(e.self_cpu_time_total for e in prof.events()))
    with pytest.raises(AttributeError):
        averages.table(sort_by="not_a_column")
    assert "FunctionEventAvg key=aten::relu" in repr(averages[0])
    with pytest.warns(FutureWarning, match="device_time_total"):
        assert averages[0].cuda_time_total == 0


# --- the Chrome trace -------------------------------------------------------------------------

def test_chrome_trace_has_complete_events_with_shapes(tmp_path):
    a, b = ember.randn(3, 4), ember.randn(4, 3)
    with profile(record_shapes=True) as prof:
        with record_function("block"):
            ember.mm(a, b)
    prof.add_metadata("run", "unit-test")
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    assert data["run"] == "unit-test" and data["traceName"] == str(path)
    complete = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in complete] == ["block", "aten::mm"]
    for e in complete:
        assert {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"} <= e.keys()
        assert e["dur"] >= 0
    block, mm = complete
    assert block["cat"] == "user_annotation" and mm["cat"] == "cpu_op"
    assert mm["args"]["Input Dims"] == [[3, 4], [4, 3]]
    assert block["ts"] <= mm["ts"] and mm["ts"] + mm["dur"] <= block["ts"] + block["dur"]
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in data["traceEvents"])
    gz = tmp_path / "trace.json.gz"
    prof.export_chrome_trace(str(gz))
    with gzip.open(gz, "rt") as f:
        assert json.load(f)["traceEvents"] == data["traceEvents"]


def test_tensorboard_trace_handler_writes_one_file_per_trace(tmp_path):
    handler = profiler.tensorboard_trace_handler(str(tmp_path / "logs"), worker_name="w0")
    with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
                 on_trace_ready=handler) as prof:
        for _ in range(5):
            ember.mm(ember.ones(2, 2), ember.ones(2, 2))
            prof.step()
    files = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert len(files) == 2 and all(re.fullmatch(r"w0\.\d+\.pt\.trace\.json", f) for f in files)
    gz = profiler.tensorboard_trace_handler(str(tmp_path / "gz"), use_gzip=True)
    with profile(schedule=schedule(wait=0, warmup=1, active=1), on_trace_ready=gz) as prof:
        ember.relu(ember.ones(2))
        prof.step()
        ember.relu(ember.ones(2))
        prof.step()
    (path,) = (tmp_path / "gz").iterdir()
    assert path.name.endswith(".pt.trace.json.gz")
    with gzip.open(path, "rt") as f:
        assert [e["name"] for e in json.load(f)["traceEvents"] if e["ph"] == "X"] == \
            ["ProfilerStep#1", "aten::relu"]


# --- schedules --------------------------------------------------------------------------------

def _actions(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = schedule(**kw)
    return [s(i).value for i in range(12)]


def test_schedule_actions():
    assert _actions(wait=1, warmup=1, active=2, repeat=2, skip_first=1) == \
        [0, 0, 1, 2, 3, 0, 1, 2, 3, 0, 0, 0]
    assert _actions(wait=1, warmup=0, active=1) == [0, 3] * 6
    assert _actions(wait=0, warmup=0, active=2, repeat=1) == [2, 3] + [0] * 10
    assert _actions(wait=2, warmup=1, active=1, repeat=2, skip_first_wait=1) == \
        [1, 3, 0, 0, 1, 3, 0, 0, 0, 0, 0, 0]
    assert _actions(wait=2, warmup=1, active=1, skip_first=2, skip_first_wait=1) == \
        [0, 0, 1, 3, 0, 0, 1, 3, 0, 0, 1, 3]
    with pytest.warns(UserWarning, match="won't be using warmup"):
        schedule(wait=1, warmup=0, active=1)
    with pytest.raises(AssertionError, match=r"active=0 \(need > 0\)"):
        schedule(wait=0, warmup=0, active=0)
    assert [a.name for a in ProfilerAction] == ["NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE",
                                                "DEVICE_STOPPED"]


def test_schedule_records_only_active_steps_and_calls_on_trace_ready(tmp_path):
    calls = []

    def ready(p):
        events = p.events()
        calls.append((p.step_num, [e.name for e in events if e.name.startswith("ProfilerStep")],
                      len(_names(events, "aten::mm"))))

    a = ember.ones(2, 2)
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=ready) as prof:
        for _ in range(6):
            ember.mm(a, a)
            prof.step()
    assert calls == [(4, ["ProfilerStep*", "ProfilerStep*"], 2)]
    steps = [e for e in prof.events() if e.name == "ProfilerStep*"]
    assert [e.trace_name for e in steps] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert prof.step_num == 6 and prof.current_action is ProfilerAction.NONE
    keys = [e.key for e in prof.key_averages()]
    assert keys[0] == "ProfilerStep*" and prof.key_averages()[0].count == 2
    (mm,) = [e for e in prof.events() if e.name == "aten::mm"][:1]
    assert mm.cpu_parent is steps[0]
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    trace = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert [e["name"] for e in trace if e["name"].startswith("ProfilerStep")] == \
        ["ProfilerStep#2", "ProfilerStep#3"]


def test_stop_during_an_active_span_saves_it():
    calls = []
    with profile(schedule=schedule(wait=0, warmup=1, active=3),
                 on_trace_ready=lambda p: calls.append(p.step_num)) as prof:
        for _ in range(3):
            ember.relu(ember.ones(2))
            prof.step()
    assert calls == [3]
    assert len(_names(prof.events(), "aten::relu")) == 2
    prof.stop()                                        # a second stop saves nothing more
    assert calls == [3]


def test_without_a_schedule_steps_record_everything_and_no_step_ranges():
    with profile() as prof:
        for _ in range(3):
            ember.relu(ember.ones(2))
            prof.step()
    names = [e.name for e in prof.events()]
    assert names == ["aten::relu"] * 3                 # no ProfilerStep ranges


def test_profile_api_errors_and_activities():
    prof = profile()
    with pytest.raises(AssertionError, match="initialized before accessing events"):
        prof.events()
    with pytest.raises(AssertionError, match="initialized before getting key averages"):
        prof.key_averages()
    assert ProfilerActivity.CPU in profiler.supported_activities()
    if not ember.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available, disabling CUDA profiling"):
            p = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        assert p.activities == {ProfilerActivity.CPU}
    assert not profiler.kineto_available() and not profiler.itt.is_available()
    with profiler.itt.range("x{}", 1):
        pass


# --- the autograd profiler --------------------------------------------------------------------

def test_autograd_profile_context_manager():
    a = ember.randn(3, 3)
    with legacy.profile(record_shapes=True) as prof:
        ember.mm(a, a)
    assert [e.name for e in prof.function_events] == ["aten::mm"]
    assert "aten::mm" in prof.table() and "aten::mm" in str(prof)
    assert prof.key_averages()[0].count == 1
    assert prof.self_cpu_time_total == pytest.approx(prof.function_events[0].cpu_time_total)
    with pytest.raises(RuntimeError, match="not reentrant"):
        with prof:
            with prof:
                pass
    with pytest.raises(RuntimeError, match="didn't finish running"):
        legacy.profile().key_averages()
    off = legacy.profile(enabled=False)
    with off:
        ember.mm(a, a)
    assert off.function_events is None


def test_autograd_profile_use_cuda_is_deprecated():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = legacy.profile(use_cuda=True)
    messages = [(w.category, str(w.message)) for w in caught]
    assert (FutureWarning, "The attribute `use_cuda` will be deprecated soon, please use "
            "``use_device = 'cuda'`` instead.") in messages
    if ember.cuda.is_available():
        assert p.use_device == "cuda" and p.use_cuda
    else:
        assert (UserWarning, "CUDA is not available, disabling CUDA profiling") in messages
        assert p.use_device is None


def test_emit_nvtx_and_emit_itt_are_accepted():
    for cm in (legacy.emit_nvtx(), legacy.emit_itt(record_shapes=True)):
        with cm:
            ember.relu(ember.ones(2))
        with pytest.raises(RuntimeError, match="not reentrant"):
            with cm:
                with cm:
                    pass


def test_export_stacks(tmp_path):
    a = ember.randn(3, 3)
    with profile(with_stack=True) as prof:
        ember.mm(a, a)
    path = tmp_path / "stacks.txt"
    prof.export_stacks(str(path))
    (line,) = path.read_text().splitlines()
    frames, value = line.rsplit(" ", 1)
    assert frames.endswith(";aten::mm") and int(value) >= 0
    assert "test_export_stacks" in frames


def test_node_classes_found():
    assert {"OpNode", "AccumulateGrad"} <= {c.__name__ for c in _node_classes()}
    assert all(issubclass(c, Node) for c in _node_classes())
