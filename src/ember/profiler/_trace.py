"""Chrome trace export (the JSON ``chrome://tracing``, Perfetto and TensorBoard read): one
complete event (``"ph": "X"``) per profiled range on its process and thread, and one per op's
device span on a ``GPU <index>`` process."""

import gzip
import json
import os

from ember.profiler._recorder import device_span

__all__ = ["write_trace", "trace_dict"]


def trace_dict(events, metadata=None):
    """The trace of ``events`` (an ``EventList`` a profiler returned) as a dict."""
    session = events._trace
    offset_ns = session.wall_offset_ns if session is not None else 0
    origin_ns = session.start_ns if session is not None else 0
    pid = os.getpid()
    trace = []
    threads = sorted({e.thread for e in events})
    trace.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                  "args": {"name": "python"}})
    for tid in threads:
        trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                      "args": {"name": f"thread {tid} (python)"}})
    gpus = set()
    for i, e in enumerate(events):
        start_ns = origin_ns + e.time_range.start * 1e3
        args = {"External id": e.id, "Ev Idx": i}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        trace.append({"ph": "X", "cat": "user_annotation" if e.is_user_annotation
                      else "cpu_op", "name": e.trace_name, "pid": pid, "tid": e.thread,
                      "ts": (start_ns + offset_ns) / 1e3, "dur": e.time_range.elapsed_us(),
                      "args": args})
        span = device_span(e._range) if e.kernels and hasattr(e, "_range") else None
        if span is not None:
            index, gpu_start_ns, dur_ns = span
            gpus.add(index)
            trace.append({"ph": "X", "cat": "gpu_op", "name": e.name, "pid": f"GPU {index}",
                          "tid": "stream", "ts": (gpu_start_ns + offset_ns) / 1e3,
                          "dur": dur_ns / 1e3,
                          "args": {"device": index, "External id": e.id}})
    for index in sorted(gpus):
        trace.append({"ph": "M", "name": "process_name", "pid": f"GPU {index}", "tid": 0,
                      "args": {"name": f"GPU {index}"}})
    result = {"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms",
              "baseTimeNanoseconds": 0, "traceEvents": trace}
    result.update(metadata or {})
    return result


def write_trace(events, path, metadata=None):
    """Write the trace of ``events`` to ``path`` (gzip-compressed when it ends in .gz)."""
    data = trace_dict(events, metadata)
    data["traceName"] = str(path)
    text = json.dumps(data)
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
