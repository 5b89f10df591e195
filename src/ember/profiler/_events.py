"""What a profiler returns: ``FunctionEvent`` (one timed range), ``FunctionEventAvg`` (the
events sharing a key, summed) and ``EventList`` (a list of either, with ``key_averages``,
``table`` and ``export_chrome_trace``), as ``torch.autograd.profiler_util`` has them.

Times are in microseconds, as PyTorch's are.
"""

import enum
import itertools
import warnings

__all__ = ["DeviceType", "Interval", "Kernel", "FunctionEvent", "FunctionEventAvg", "EventList",
           "format_time"]


class DeviceType(enum.Enum):
    """Where an event ran (``torch.autograd.DeviceType``)."""

    CPU = 0
    CUDA = 1


class Interval:
    """A range of time in microseconds."""

    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start = start
        self.end = end

    def elapsed_us(self):
        """Its length in microseconds."""
        return self.end - self.start

    def __repr__(self):
        return f"Interval(start={self.start:.3f}, end={self.end:.3f})"


class Kernel:
    """Device work attributed to an event: ember measures one span per op, with CUDA events
    around it, where PyTorch lists each kernel CUPTI saw."""

    __slots__ = ("name", "device", "duration")

    def __init__(self, name, device, duration):
        self.name = name
        self.device = device
        self.duration = duration

    def __repr__(self):
        return f"Kernel(name={self.name!r}, device={self.device}, duration={self.duration:.3f})"


def format_time(time_us, unit=None):
    """A duration as PyTorch's tables print it: ``12.345us``, ``1.234ms``, ``2.000s``."""
    if unit == "s" or (unit is None and time_us >= 1e6):
        return f"{time_us / 1e6:.3f}s"
    if unit == "ms" or (unit is None and time_us >= 1e3):
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


def _deprecated_cuda(old, new):
    warnings.warn(f"`{old}` is deprecated. Use `{new}` instead.", FutureWarning, stacklevel=3)


class _Times:
    """The properties FunctionEvent and FunctionEventAvg share."""

    @property
    def cpu_time(self):
        """Average CPU time per call (us)."""
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self):
        """Average device time per call (us)."""
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    @property
    def cpu_time_str(self):
        """``cpu_time`` formatted."""
        return format_time(self.cpu_time)

    @property
    def cpu_time_total_str(self):
        """``cpu_time_total`` formatted."""
        return format_time(self.cpu_time_total)

    @property
    def self_cpu_time_total_str(self):
        """``self_cpu_time_total`` formatted."""
        return format_time(self.self_cpu_time_total)

    @property
    def device_time_str(self):
        """``device_time`` formatted."""
        return format_time(self.device_time)

    @property
    def device_time_total_str(self):
        """``device_time_total`` formatted."""
        return format_time(self.device_time_total)

    @property
    def self_device_time_total_str(self):
        """``self_device_time_total`` formatted."""
        return format_time(self.self_device_time_total)

    @property
    def cuda_time(self):
        """Deprecated alias of ``device_time``."""
        _deprecated_cuda("cuda_time", "device_time")
        return self.device_time

    @property
    def cuda_time_total(self):
        """Deprecated alias of ``device_time_total``."""
        _deprecated_cuda("cuda_time_total", "device_time_total")
        return self.device_time_total

    @property
    def self_cuda_time_total(self):
        """Deprecated alias of ``self_device_time_total``."""
        _deprecated_cuda("self_cuda_time_total", "self_device_time_total")
        return self.self_device_time_total

    @property
    def self_cuda_memory_usage(self):
        """Deprecated alias of ``self_device_memory_usage``."""
        return self.self_device_memory_usage


class FunctionEvent(_Times):
    """One profiled range: an op (``aten::mm``), a ``record_function`` block, or an autograd
    node's evaluation, with its CPU interval and the device time its ops took."""

    def __init__(self, id, name, thread, start_us, end_us, *, input_shapes=None, stack=None,
                 use_device=None, device_time_us=0.0, device_index=0, is_user_annotation=False,
                 sequence_nr=-1, overload_name="", trace_name=None):
        self.id = id
        self.name = name
        self.thread = thread
        self.fwd_thread = thread
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = [] if input_shapes is None else input_shapes
        self.stack = [] if stack is None else stack
        self.use_device = use_device
        self.device_index = device_index
        self.device_type = DeviceType.CPU
        self.is_user_annotation = is_user_annotation
        self.sequence_nr = sequence_nr
        self.overload_name = overload_name
        self.trace_name = name if trace_name is None else trace_name
        self.kernels = []
        if device_time_us:
            self.kernels.append(Kernel(name, device_index, device_time_us))
        self.cpu_parent = None
        self.cpu_children = []
        self.count = 1
        self.scope = 0
        self.node_id = -1
        self.flops = 0
        self.is_async = False
        self.is_remote = False
        self.is_legacy = False
        self.concrete_inputs = []
        self.cpu_memory_usage = 0
        self.device_memory_usage = 0
        self.self_cpu_percent = -1
        self.total_cpu_percent = -1
        self.total_device_percent = -1

    @property
    def key(self):
        """What ``key_averages`` groups by: the name."""
        return self.name

    def append_kernel(self, name, device, duration):
        """Attribute ``duration`` us of device work to this event."""
        self.kernels.append(Kernel(name, device, duration))

    def append_cpu_child(self, child):
        """Record ``child`` as nested directly in this event."""
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent):
        """Record the event this one is nested directly in."""
        self.cpu_parent = parent

    @property
    def cpu_time_total(self):
        """Wall time of the range on the CPU (us), nested events included."""
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        """CPU time (us) not spent in nested events."""
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def device_time_total(self):
        """Device time (us) of this event's ops, nested ones included."""
        own = sum(k.duration for k in self.kernels)
        if own:         # an op's span on the device already covers the ops it calls
            return own
        return sum(c.device_time_total for c in self.cpu_children)

    @property
    def self_device_time_total(self):
        """Device time (us) not spent in nested events' ops."""
        own = sum(k.duration for k in self.kernels)
        if not own:
            return 0.0
        return max(own - sum(c.device_time_total for c in self.cpu_children), 0.0)

    @property
    def self_cpu_memory_usage(self):
        """Memory is not profiled: always 0."""
        return 0

    @property
    def self_device_memory_usage(self):
        """Memory is not profiled: always 0."""
        return 0

    def __repr__(self):
        device = self.use_device or "cuda"
        return (f"<FunctionEvent id={self.id} name={self.name} overload_name="
                f"{self.overload_name} device_type={self.device_type} node_id={self.node_id} "
                f"cpu_time={self.cpu_time_str} start_us={self.time_range.start:.3f} "
                f"end_us={self.time_range.end:.3f} "
                f"cpu_children={[c.id for c in self.cpu_children]} "
                f"{device}_time={self.device_time_str} name={self.name} thread={self.thread} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage} "
                f"{device}_memory_usage={self.device_memory_usage} is_async={self.is_async} "
                f"is_remote={self.is_remote} seq_nr={self.sequence_nr} "
                f"is_legacy={self.is_legacy}>")


class FunctionEventAvg(_Times):
    """The events that share a key (name, and input shapes or stack when grouped by them),
    their times summed."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.node_id = 0
        self.is_async = False
        self.is_remote = False
        self.use_device = None
        self.cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.self_device_time_total = 0.0
        self.input_shapes = None
        self.overload_name = None
        self.stack = None
        self.scope = None
        self.cpu_memory_usage = 0
        self.device_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.self_device_memory_usage = 0
        self.cpu_children = None
        self.cpu_parent = None
        self.device_type = DeviceType.CPU
        self.is_legacy = False
        self.is_user_annotation = False
        self.flops = 0

    def add(self, other):
        """Add an event (or average) to this one; the first sets the descriptive fields."""
        if self.key is None:
            self.key = other.key
            self.node_id = other.node_id
            self.is_async = other.is_async
            self.is_remote = other.is_remote
            self.cpu_parent = other.cpu_parent
            self.cpu_children = other.cpu_children
            self.input_shapes = other.input_shapes
            self.overload_name = other.overload_name
            self.stack = other.stack
            self.scope = other.scope
            self.device_type = other.device_type
            self.is_legacy = other.is_legacy
            self.use_device = other.use_device
            self.is_user_annotation = other.is_user_annotation
        self.cpu_time_total += other.cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.self_device_time_total += other.self_device_time_total
        self.count += other.count
        self.flops += other.flops or 0
        return self

    def __iadd__(self, other):
        return self.add(other)

    def __repr__(self):
        device = self.use_device or "cuda"
        shapes = "" if self.input_shapes is None else self.input_shapes
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_total_str}  self_{device}_time="
                f"{self.self_device_time_total_str} {device}_time={self.device_time_total_str} "
                f"input_shapes={shapes} cpu_memory_usage={self.cpu_memory_usage} "
                f"{device}_memory_usage={self.device_memory_usage}>")


class EventList(list):
    """A list of ``FunctionEvent`` (or ``FunctionEventAvg``) with summaries."""

    def __init__(self, *args, use_device=None, profile_memory=False, with_flops=False,
                 trace=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops
        self._trace = trace             # (profile, session) when it came from a profiler

    def __str__(self):
        return self.table()

    @property
    def self_cpu_time_total(self):
        """The sum of the events' self CPU times (us)."""
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        """The events as PyTorch's profiler table, sorted (descending) by the attribute
        ``sort_by`` (``"cpu_time_total"``, ``"self_cuda_time_total"``, ``"count"``...)."""
        from ember.profiler._table import build_table
        return build_table(self, sort_by=sort_by, header=header, row_limit=row_limit,
                           max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width,
                           top_level_events_only=top_level_events_only,
                           time_unit=time_unit, use_device=self._use_device)

    def key_averages(self, group_by_input_shapes=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """One ``FunctionEventAvg`` per name (and input shapes, first ``group_by_stack_n``
        stack frames, overload name when asked), in the order the names first appear."""
        groups = {}
        for evt in self:
            key = evt.key
            group = (key, evt.node_id,
                     str(evt.input_shapes) if group_by_input_shapes else None,
                     tuple(evt.stack[:group_by_stack_n]) if group_by_stack_n > 0 else None,
                     evt.overload_name if group_by_overload_name else None)
            avg = groups.get(group)
            if avg is None:
                avg = groups[group] = FunctionEventAvg()
                avg.add(evt)
                avg.key = key
                avg.input_shapes = evt.input_shapes if group_by_input_shapes else ""
                avg.stack = evt.stack[:group_by_stack_n] if group_by_stack_n > 0 else []
            else:
                avg.add(evt)
        return EventList(groups.values(), use_device=self._use_device,
                         profile_memory=self._profile_memory, with_flops=self._with_flops)

    def total_average(self):
        """All events summed into one ``FunctionEventAvg`` keyed "Total"."""
        total = FunctionEventAvg()
        for evt in self:
            total.add(evt)
        total.key = "Total"
        return total

    def export_chrome_trace(self, path):
        """Write the events as a Chrome trace (JSON, ``chrome://tracing``, Perfetto)."""
        from ember.profiler._trace import write_trace
        write_trace(self, path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write ``frame;frame;...;name value`` lines (flame-graph input) for the events
        that recorded a stack (``with_stack=True``), outermost frame first."""
        metric = metric.replace("cuda", "device")
        with open(path, "w") as f:
            for evt in self:
                if evt.stack:
                    frames = ";".join(itertools.chain(reversed(evt.stack), [evt.name]))
                    f.write(f"{frames} {int(getattr(evt, metric))}\n")
