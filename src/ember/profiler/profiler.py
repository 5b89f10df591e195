"""``ember.profiler.profile`` (``torch.profiler.profile``): activities, a schedule of
wait/warmup/active steps with ``prof.step()``, ``on_trace_ready`` handlers."""

import enum
import json
import os
import socket
import time
import warnings

from ember.profiler import _autograd as _legacy

__all__ = ["ProfilerAction", "ProfilerActivity", "profile", "schedule",
           "supported_activities", "tensorboard_trace_handler"]


class ProfilerActivity(enum.Enum):
    """What a profiler records: CPU ops, and their device time on CUDA."""

    CPU = 0
    XPU = 1
    CUDA = 2
    HPU = 3
    MTIA = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What the profiler does at a step, as a schedule decides."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
    DEVICE_STOPPED = 4


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def supported_activities():
    """The activities ember can profile here: CPU, and CUDA where a GPU is available."""
    from ember import cuda
    activities = {ProfilerActivity.CPU}
    if cuda.is_available():
        activities.add(ProfilerActivity.CUDA)
    return activities


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """A schedule for ``profile(schedule=...)``: after ``skip_first`` steps, cycles of
    ``wait`` idle steps, ``warmup`` steps and ``active`` recorded steps (the last one saves,
    calling ``on_trace_ready``), ``repeat`` times (0: until the end). ``skip_first_wait``
    skips the first cycle's wait."""
    if not (wait >= 0 and warmup >= 0 and active > 0 and repeat >= 0 and skip_first >= 0):
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), "
            f"warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} "
            f"(need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)
    cycle = wait + warmup + active

    def schedule_fn(step):
        """The action for step ``step``."""
        if step < 0:
            raise AssertionError(f"Step number must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return schedule_fn


def _always_record(step):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False,
                              use_python_export=False):
    """An ``on_trace_ready`` handler writing each trace into ``dir_name`` as
    ``<worker_name>.<time in ns>.pt.trace.json[.gz]``, the layout TensorBoard's profiler
    plugin reads."""
    def handler_fn(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler_fn


class profile:
    """Profile ops (names ``aten::<op>``, CPU wall time, CUDA time per op), ``record_function``
    ranges and autograd nodes, between ``start()``/``stop()`` or in a ``with`` block; with a
    ``schedule``, only the steps it marks active are recorded, and ``on_trace_ready(prof)``
    runs at the end of each active span."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, experimental_config=None, execution_trace_observer=None,
                 acc_events=False, use_cuda=None, custom_trace_id_callback=None,
                 post_processing_timeout_s=None):
        self.activities = set(activities) if activities else supported_activities()
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead",
                          FutureWarning, stacklevel=2)
            if use_cuda:
                self.activities.add(ProfilerActivity.CUDA)
            else:
                self.activities.discard(ProfilerActivity.CUDA)
        if ProfilerActivity.CUDA in self.activities:
            from ember import cuda
            if not cuda.is_available():
                warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=2)
                self.activities.discard(ProfilerActivity.CUDA)
        self.use_device = "cuda" if ProfilerActivity.CUDA in self.activities else None
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.experimental_config = experimental_config
        self.execution_trace_observer = execution_trace_observer
        self.acc_events = acc_events
        self.on_trace_ready = on_trace_ready
        self.record_steps = schedule is not None
        self.schedule = schedule if schedule is not None else _always_record
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self.profiler = None
        self.step_rec_fn = None
        self._metadata = {}

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.stop()
        return False

    def start(self):
        """Begin profiling (recording now if the schedule says so for step 0)."""
        self._transit(None, self.current_action)
        self._open_step()

    def stop(self):
        """End profiling; a recording in progress is finished (and ``on_trace_ready``
        called)."""
        self._close_step()
        self._transit(self.current_action, None)

    def step(self):
        """Mark the end of a training step: the schedule moves on to the next one."""
        self._close_step()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(previous, self.current_action)
        self._open_step()

    def _open_step(self):
        if self.record_steps:
            self.step_rec_fn = _legacy.record_function(f"ProfilerStep#{self.step_num}")
            self.step_rec_fn.__enter__()

    def _close_step(self):
        if self.step_rec_fn is not None:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None

    def _transit(self, previous, current):
        """Start, stop and save recordings as the action changes (see ProfilerAction)."""
        was_recording = previous in _RECORDING and self.profiler is not None \
            and self.profiler.entered
        if was_recording and (previous is ProfilerAction.RECORD_AND_SAVE
                              or current not in _RECORDING):
            self.profiler._stop()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
            was_recording = False
        if current in _RECORDING and not was_recording:
            self.profiler = _legacy.profile(use_device=self.use_device,
                                            record_shapes=self.record_shapes,
                                            with_flops=self.with_flops,
                                            profile_memory=self.profile_memory,
                                            with_stack=self.with_stack,
                                            with_modules=self.with_modules)
            self.profiler._start()

    def events(self):
        """The events of the last recording (an ``EventList``)."""
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before accessing events")
        return self.profiler.function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """The last recording's events averaged by name (and input shapes, stack)."""
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before getting key averages")
        return self.profiler.key_averages(group_by_input_shape, group_by_stack_n,
                                          group_by_overload_name)

    def export_chrome_trace(self, path):
        """Write the last recording as a Chrome trace (gzip-compressed for a .gz path)."""
        from ember.profiler._trace import write_trace
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before exporting the trace")
        self.profiler._check_finish()
        write_trace(self.profiler.function_events, path, self._metadata)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write the recorded stacks (``with_stack=True``) for flame graphs."""
        self.profiler.export_stacks(path, metric)

    def add_metadata(self, key, value):
        """Add ``key: value`` (a string) to the trace's top level."""
        self._metadata[key] = value

    def add_metadata_json(self, key, value):
        """Add ``key`` with the JSON text ``value`` decoded to the trace's top level."""
        self._metadata[key] = json.loads(value)

    def export_memory_timeline(self, path, device=None):
        """Memory is not profiled by ember."""
        raise RuntimeError("ember's profiler does not profile memory; "
                           "export_memory_timeline is not available")
