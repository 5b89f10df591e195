"""The autograd profiler, which ``ember.autograd.profiler`` exports
(``torch.autograd.profiler``): ``profile`` as a context manager, ``record_function`` ranges,
and ``emit_nvtx``/``emit_itt`` (accepted, record nothing). ``ember.profiler.profile`` runs
one of these per recording.

``ember.profiler`` documents what is measured and how it differs from PyTorch.
"""

import contextlib
import warnings

from ember.profiler._events import EventList, FunctionEvent, FunctionEventAvg
from ember.profiler._recorder import Session, begin, end
from ember.profiler._recorder import active as _active

__all__ = ["profile", "record_function", "emit_nvtx", "emit_itt", "EventList", "FunctionEvent",
           "FunctionEventAvg", "kineto_available"]


def kineto_available():
    """Whether PyTorch's Kineto library profiles: never in ember (it times ops itself)."""
    return False


def _cuda_or_none(use_device):
    if use_device is None:
        return None
    device = str(use_device)
    if device != "cuda":
        raise AssertionError(f"{device} is not a supported device for profiling in ember")
    from ember import cuda
    if not cuda.is_available():
        warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=3)
        return None
    return device


class profile:
    """Profile the ops run inside ``with profile() as prof:``; then ``prof.key_averages()``,
    ``prof.table()``, ``prof.export_chrome_trace(path)``."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None, post_processing_timeout_s=None,
                 activity_filters=None):
        self.enabled = enabled
        if use_cuda:
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use "
                          "``use_device = 'cuda'`` instead.", FutureWarning, stacklevel=2)
            use_device = "cuda"
        if not enabled:
            use_device = None
        self.use_device = _cuda_or_none(use_device)
        self.use_cuda = self.use_device == "cuda"
        self.record_shapes = record_shapes
        self.with_flops = with_flops
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_modules = with_modules
        self.use_kineto = use_kineto
        self.use_cpu = use_cpu
        self.acc_events = acc_events
        self.entered = False
        self._session = None
        self._function_events = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self._start()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if self.enabled:
            self._stop()
        return False

    def _start(self):
        self.entered = True
        self._function_events = None
        self._session = Session(self.record_shapes, self.with_stack, self.use_device)
        self._session.start()

    def _stop(self):
        if self._session is not None:
            self._session.stop()
        self.entered = False

    @property
    def function_events(self):
        """The recorded events (an ``EventList``), or None before the profiler ran."""
        if self._function_events is None and self._session is not None \
                and self._session.stop_ns is not None:
            self._function_events = self._session.events()
        return self._function_events

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        """The events' table (``EventList.table``)."""
        self._check_finish()
        return self.function_events.table(
            sort_by=sort_by, row_limit=row_limit, max_src_column_width=max_src_column_width,
            max_name_column_width=max_name_column_width,
            max_shapes_column_width=max_shapes_column_width, header=header,
            top_level_events_only=top_level_events_only, time_unit=time_unit)

    def export_chrome_trace(self, path):
        """Write the events as a Chrome trace (JSON)."""
        self._check_finish()
        self.function_events.export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write the recorded stacks (``with_stack=True``) for flame graphs."""
        self._check_finish()
        if not self.with_stack:
            raise AssertionError("export_stacks() requires with_stack=True")
        self.function_events.export_stacks(path, metric)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """The events averaged by name (``EventList.key_averages``)."""
        self._check_finish()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n,
                                                 group_by_overload_name)

    def total_average(self):
        """All events summed into one ``FunctionEventAvg``."""
        self._check_finish()
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self):
        """The sum of all events' self CPU times (us)."""
        self._check_finish()
        return self.function_events.self_cpu_time_total

    def __str__(self):
        self._check_finish()
        return str(self.function_events)

    __repr__ = object.__repr__


class record_function(contextlib.ContextDecorator):
    """Label a block of code (``with record_function("name"):``) or a function (as a
    decorator) in the profile, as a range that contains the ops it runs."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self.run_callbacks_on_exit = True
        self._range = None

    def __enter__(self):
        if _active():
            self._range = begin(self.name, "user_annotation")
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if self.run_callbacks_on_exit and self._range is not None:
            end(self._range)
        self._range = None
        return False

    def _recreate_cm(self):
        return record_function(self.name, self.args)     # each decorated call its own range

    def _call_end_callbacks_on_future(self, fut):
        """End the range when the future ``fut`` completes; returns a future for it."""
        self.run_callbacks_on_exit = False
        rng, self._range = self._range, None

        def close(done):
            if rng is not None:
                end(rng)
            return done.value()
        return fut.then(close)


class _NoRanges:
    """A context manager that is accepted and records nothing (no NVTX/ITT ranges per op)."""

    _kind = ""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.entered = False

    def __enter__(self):
        if self.enabled:
            if self.entered:
                raise RuntimeError(f"{self._kind} annotation context manager is not reentrant")
            self.entered = True
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.entered = False
        return False


class emit_nvtx(_NoRanges):
    """Accepted for PyTorch scripts: ember emits no NVTX range per op (use
    ``ember.cuda.nvtx.range`` or ``record_function`` for ranges)."""

    _kind = "NVTX"


class emit_itt(_NoRanges):
    """Accepted for PyTorch scripts: ember emits no ITT range per op."""

    _kind = "ITT"
