"""``torch.autograd.profiler`` for ember: ``profile`` (a context manager whose results are
``prof.key_averages()``, ``prof.table()``, ``prof.export_chrome_trace(path)``),
``record_function``, ``emit_nvtx``/``emit_itt`` (accepted, record nothing), and the event
types. The implementation lives in ``ember.profiler``, whose docstring says what is measured
and how it differs from PyTorch."""

from ember.profiler._autograd import (emit_itt, emit_nvtx, kineto_available, profile,
                                      record_function)
from ember.profiler._events import (DeviceType, EventList, FunctionEvent, FunctionEventAvg,
                                    Interval, Kernel, format_time)

__all__ = ["profile", "record_function", "emit_nvtx", "emit_itt", "EventList", "FunctionEvent",
           "FunctionEventAvg", "Interval", "Kernel", "DeviceType", "kineto_available",
           "format_time"]
