"""ember.profiler against torch.profiler: the same event names, counts, nesting and input
shapes for the same small computation, the same schedule actions and trace-ready steps, and
tables laid out identically (checked byte for byte on events with fixed times). Skipped when
PyTorch is not installed."""

import itertools
import json
import warnings

import numpy as np
import pytest

import ember
import ember.autograd.profiler as ember_autograd_profiler
import ember.profiler as ember_profiler

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

from torch.autograd import profiler_util as torch_util  # noqa: E402


def _run(lib, prof_mod, record_shapes=False):
    """block{mm x3, relu}, then a backward through one mm; returns the profile."""
    a = lib.tensor(np.arange(12.0).reshape(3, 4), dtype=lib.float32)
    b = lib.tensor(np.ones((4, 5)), dtype=lib.float32)
    x = lib.tensor(np.ones((2, 3)), dtype=lib.float32, requires_grad=True)
    w = lib.tensor(np.ones((3, 2)), dtype=lib.float32, requires_grad=True)
    with prof_mod.profile(activities=[prof_mod.ProfilerActivity.CPU],
                          record_shapes=record_shapes) as prof:
        with prof_mod.record_function("block"):
            for _ in range(3):
                lib.mm(a, b)
            lib.relu(a)
        lib.mm(x, w).sum().backward()
    return prof


def _by_name(events, name):
    return [e for e in events if e.name == name]


def test_same_events_counts_and_nesting():
    theirs = _run(torch, torch.profiler)
    ours = _run(ember, ember_profiler)
    for prof in (theirs, ours):
        events = prof.events()
        (block,) = _by_name(events, "block")
        assert [c.name for c in block.cpu_children] == ["aten::mm"] * 3 + ["aten::relu"]
        assert len(_by_name(events, "aten::mm")) == 6       # 3 + forward + 2 in MmBackward0
    for name in ("autograd::engine::evaluate_function: MmBackward0", "MmBackward0",
                 "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                 "torch::autograd::AccumulateGrad",
                 "autograd::engine::evaluate_function: SumBackward0", "SumBackward0"):
        assert len(_by_name(theirs.events(), name)) == len(_by_name(ours.events(), name)), name
    (t_node,) = _by_name(theirs.events(), "MmBackward0")
    (o_node,) = _by_name(ours.events(), "MmBackward0")
    assert t_node.cpu_parent.name == o_node.cpu_parent.name
    t_keys = {e.key: e.count for e in theirs.key_averages()}
    o_keys = {e.key: e.count for e in ours.key_averages()}
    for key in ("block", "aten::mm", "aten::relu", "aten::sum", "MmBackward0"):
        assert t_keys[key] == o_keys[key], key


def test_same_input_shapes_and_trace_dims(tmp_path):
    traces = []
    for lib, mod in ((torch, torch.profiler), (ember, ember_profiler)):
        prof = _run(lib, mod, record_shapes=True)
        mm = _by_name(prof.events(), "aten::mm")[0]
        assert mm.input_shapes == [[3, 4], [4, 5]]
        grouped = {(e.key, str(e.input_shapes)) for e in prof.key_averages(True)}
        assert ("aten::mm", "[[3, 4], [4, 5]]") in grouped
        path = tmp_path / f"{lib.__name__}.json"
        prof.export_chrome_trace(str(path))
        traces.append(json.loads(path.read_text()))
    for data in traces:
        mm = [e for e in data["traceEvents"] if e.get("ph") == "X" and e["name"] == "aten::mm"]
        assert mm[0]["args"]["Input Dims"] == [[3, 4], [4, 5]]
        assert {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"} <= mm[0].keys()
        block = [e for e in data["traceEvents"] if e.get("name") == "block"][0]
        assert block["cat"] == "user_annotation"


def test_same_table_columns():
    theirs = _run(torch, torch.profiler, record_shapes=True)
    ours = _run(ember, ember_profiler, record_shapes=True)
    for grouped in (False, True):
        t = theirs.key_averages(grouped).table(sort_by="cpu_time_total").splitlines()
        o = ours.key_averages(grouped).table(sort_by="cpu_time_total").splitlines()
        assert t[1].split("  ")[-5:] == o[1].split("  ")[-5:]
        assert [c.strip() for c in t[1].split("  ") if c.strip()] == \
            [c.strip() for c in o[1].split("  ") if c.strip()]
        assert t[-1].split(":")[0] == o[-1].split(":")[0] == "Self CPU time total"


def _schedule_grid():
    for wait, warmup, active, repeat, skip_first, skip_first_wait in itertools.product(
            (0, 1, 2), (0, 1, 2), (1, 2), (0, 1, 2), (0, 1, 3), (0, 1)):
        yield dict(wait=wait, warmup=warmup, active=active, repeat=repeat,
                   skip_first=skip_first, skip_first_wait=skip_first_wait)


def test_same_schedule_actions():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kw in _schedule_grid():
            t, o = torch.profiler.schedule(**kw), ember_profiler.schedule(**kw)
            assert [t(i).name for i in range(20)] == [o(i).name for i in range(20)], kw
    assert [a.name for a in torch.profiler.ProfilerAction] == \
        [a.name for a in ember_profiler.ProfilerAction]
    assert {a.name: a.value for a in torch.profiler.ProfilerAction} == \
        {a.name: a.value for a in ember_profiler.ProfilerAction}


@pytest.mark.parametrize("kw", [dict(wait=1, warmup=1, active=2, repeat=1),
                                dict(wait=0, warmup=1, active=1, repeat=2),
                                dict(wait=1, warmup=1, active=3, repeat=0, skip_first=1)])
def test_same_trace_ready_steps_and_step_ranges(kw):
    results = []
    for lib, mod in ((torch, torch.profiler), (ember, ember_profiler)):
        calls = []

        def ready(p):
            calls.append((p.step_num, sorted(e.name for e in p.events()
                                             if e.name.startswith("ProfilerStep")),
                          len(_by_name(p.events(), "aten::mm"))))

        a = lib.ones(2, 2)
        with mod.profile(activities=[mod.ProfilerActivity.CPU], schedule=mod.schedule(**kw),
                         on_trace_ready=ready) as prof:
            for _ in range(7):
                lib.mm(a, a)
                prof.step()
        results.append((calls, prof.step_num, prof.current_action.name))
    assert results[0] == results[1]


def _fixed_events(util, device=None, **extra):
    """outer(0-3000us){mm(10-1510us), relu(1600-1700us)} and a later top-level mm."""
    def event(i, name, start, end, shapes):
        return util.FunctionEvent(i, name, 1, start, end, input_shapes=shapes,
                                  use_device=device, stack=[], **extra)
    outer = event(1, "outer_range", 0.0, 3000.0, [])
    mm = event(2, "aten::mm", 10.0, 1510.0, [[3, 4], [4, 5]])
    relu = event(3, "aten::relu", 1600.0, 1700.0, [[3, 5]])
    late = event(4, "aten::mm", 4000.0, 4250.5, [[3, 4], [4, 5]])
    events = [outer, mm, relu, late]
    if util is torch_util:
        events = torch_util.EventList(events, use_device=device)
        events._build_tree()                            # nests by time ranges
        return events
    for child in (mm, relu):
        child.set_cpu_parent(outer)
        outer.append_cpu_child(child)
    return ember_profiler.EventList(events, use_device=device)


@pytest.mark.parametrize("options", [
    {}, {"sort_by": "cpu_time_total"}, {"sort_by": "self_cpu_time_total", "row_limit": 2},
    {"time_unit": "ms"}, {"time_unit": "s", "sort_by": "count"},
    {"top_level_events_only": True}, {"max_name_column_width": 8},
    {"header": "A HEADER"}, {"max_shapes_column_width": 10},
    {"sort_by": "self_cpu_time_total", "row_limit": 1}, {"max_name_column_width": 11},
    {"top_level_events_only": True, "sort_by": "cpu_time_total", "row_limit": 1}])
def test_tables_are_identical_for_fixed_times(options):
    theirs = _fixed_events(torch_util)
    ours = _fixed_events(ember_autograd_profiler)
    assert ours.table(**options) == theirs.table(**options)
    assert ours.key_averages().table(**options) == theirs.key_averages().table(**options)
    assert ours.key_averages(group_by_input_shapes=True).table(**options) == \
        theirs.key_averages(group_by_input_shapes=True).table(**options)


def test_cuda_table_layout_matches():
    t_events = _fixed_events(torch_util, "cuda")
    t_events[1].append_kernel("aten::mm", 0, 480.0)
    kernel = torch_util.FunctionEvent(9, "aten::mm", 1, 20.0, 500.0, use_device="cuda",
                                      device_type=torch.autograd.DeviceType.CUDA, stack=[])
    theirs = torch_util.EventList(t_events + [kernel], use_device="cuda").table().splitlines()
    o_events = _fixed_events(ember_autograd_profiler, "cuda")
    o_events[1].append_kernel("aten::mm", 0, 480.0)
    ours = ember_profiler.EventList(o_events, use_device="cuda").table().splitlines()
    assert ours[:3] == theirs[:3]                       # rules and column titles
    assert ours[3:7] == theirs[3:7]                     # the rows both have (not the kernel's)
    assert ours[-3:] == theirs[-3:]                     # rule and both footers
