"""``torch.autograd.profiler_util``: the profiler's event types (see ember.profiler)."""

from ember.profiler._events import (EventList, FunctionEvent, FunctionEventAvg,  # noqa: F401
                                    Interval, Kernel, format_time)

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "Interval", "Kernel",
           "format_time"]
