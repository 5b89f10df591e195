"""ember.profiler: ``torch.profiler`` for ember.

Usage is PyTorch's::

    from ember.profiler import profile, record_function, ProfilerActivity, schedule
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 record_shapes=True) as prof:
        with record_function("model_inference"):
            model(inputs)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

What is measured: while a profiler records, each call of a registered op is one event named
as PyTorch names its kernel (``aten::mm``, ``aten::linalg_inv``; in-place kernels
``aten::add_``) with its CPU wall time and, with ``record_shapes``, the shapes of its array
arguments (``[]`` for other arguments); ``record_function`` blocks, ``ProfilerStep#<n>``
steps (with a schedule) and the autograd engine's work
(``autograd::engine::evaluate_function: MmBackward0``, the node ``MmBackward0`` inside it,
``torch::autograd::AccumulateGrad``) are ranges around the events they contain. Self time is
total time minus the time of the events nested directly inside. Outside a profiler nothing is
added to an op call: see NOTE [Profiling at no cost] in ``_recorder.py``.

How it differs from PyTorch:

- An op's CPU time covers its computation (the op's forward on arrays); the dispatch around it
  (argument checks, type promotion, graph recording) counts as its caller's self time. Ops
  that PyTorch runs as several kernels (``aten::linear`` -> ``aten::t`` + ``aten::addmm``) are
  the ops ember composes them of, so names and counts follow ember's decomposition.
- No CUPTI: there are no kernel-level events. With CUDA activity, each op whose arrays are on
  a GPU is timed with two CUDA events (``ember.cuda.Event``) around it; that span is the op's
  device time (``device_time_total``/``cuda_time_total``), read when the profile is built,
  and in the Chrome trace it is placed on a ``GPU <n>`` track, aligned from a reference event
  recorded at the first GPU op (so its offset from the CPU ranges is approximate).
- ``profile_memory``, ``with_flops`` and ``with_modules`` are accepted and record nothing:
  memory columns, FLOPs and module hierarchy are absent (``cpu_memory_usage`` is 0).
  ``with_stack`` records Python frames (``file(line): function``) in ``FunctionEvent.stack``
  for ``key_averages(group_by_stack_n=...)`` and ``export_stacks``, but Python functions are
  not events of their own as in PyTorch's Python tracer.
- ``emit_nvtx``/``emit_itt`` and ``ember.profiler.itt`` are accepted and emit nothing;
  ``kineto_available()`` is False. The WARMUP action records nothing (there is no tracer to
  warm up). Execution-trace observers are accepted and unused.
"""

from ember.profiler import itt
from ember.profiler._autograd import kineto_available, record_function
from ember.profiler._events import DeviceType, EventList, FunctionEvent, FunctionEventAvg
from ember.profiler.profiler import (ProfilerAction, ProfilerActivity, profile, schedule,
                                     supported_activities, tensorboard_trace_handler)

__all__ = ["profile", "record_function", "schedule", "ProfilerAction", "ProfilerActivity",
           "supported_activities", "tensorboard_trace_handler", "kineto_available", "itt",
           "DeviceType", "EventList", "FunctionEvent", "FunctionEventAvg"]
