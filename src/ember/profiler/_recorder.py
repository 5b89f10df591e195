"""Recording: what runs while a profiler is active, and nothing while none is.

NOTE [Profiling at no cost]
ember's dispatcher has no profiling check. While at least one profiler records, every
registered op's ``forward`` (and ``inplace_forward``) is replaced by a timing wrapper, and the
autograd engine's node evaluation (``engine._run_node``, ``engine._run_leaf``) and the nodes'
``apply`` are wrapped likewise; when the last profiler stops, the original functions are put
back, so an unprofiled call runs exactly the code it ran before.

Each wrapper opens a ``_Range`` on its thread's stack (its parent is the range open below
it), appends it to every recording session, and closes it when the call returns. With CUDA
activity, an op whose arrays are on a GPU is bracketed by two timing CUDA events; their
elapsed time is read when a session is turned into events, so profiling never waits for the
GPU mid-run.
"""

import functools
import os
import sys
import threading
import time

import numpy as np

__all__ = ["Session", "begin", "end", "active", "aten_name"]

_ACTIVE = []                # the sessions recording now
_LOCK = threading.RLock()    # (reentered where installing the hooks makes a node class)
_LOCAL = threading.local()
_SAVED = []                 # (owner, attribute, original) while the hooks are installed
_INSTALLED = []             # [True] while the hooks are installed


class _Flags:
    shapes = False          # some session records input shapes
    stack = False           # some session records Python stacks
    device = False          # some session times device work


_FLAGS = _Flags()
_PROFILER_DIR = os.path.dirname(os.path.abspath(__file__))


class _Range:
    """One open or closed range; sessions turn them into ``FunctionEvent``."""

    __slots__ = ("name", "kind", "parent", "thread", "start", "end", "shapes", "stack",
                 "device", "obj")

    def __init__(self, name, kind, parent):
        self.name = name
        self.kind = kind                # "cpu_op" or "user_annotation"
        self.parent = parent
        self.thread = threading.get_native_id()
        self.end = None
        self.shapes = None
        self.stack = None
        self.device = None              # (device index, start event, end event, reference)
        self.obj = None                 # the autograd node an evaluation range is for


class Session:
    """One recording window of one profiler: the ranges begun while it was active."""

    def __init__(self, record_shapes=False, with_stack=False, use_device=None):
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.use_device = use_device
        self.ranges = []
        self.start_ns = self.stop_ns = None
        self.wall_offset_ns = 0         # time.time_ns() - perf_counter_ns() at the start

    def start(self):
        """Start recording (installs the hooks if no other session did)."""
        with _LOCK:
            self.wall_offset_ns = time.time_ns() - time.perf_counter_ns()
            self.start_ns = time.perf_counter_ns()
            _ACTIVE.append(self)
            if len(_ACTIVE) == 1:
                _install()
            _update_flags()

    def stop(self):
        """Stop recording (removes the hooks if no other session records)."""
        with _LOCK:
            self.stop_ns = time.perf_counter_ns()
            if self in _ACTIVE:
                _ACTIVE.remove(self)
                if not _ACTIVE:
                    _uninstall()
                _update_flags()

    def events(self):
        """The recorded ranges as an ``EventList`` (device times read now)."""
        from ember.profiler._events import EventList, FunctionEvent
        stop = self.stop_ns if self.stop_ns is not None else time.perf_counter_ns()
        origin = self.start_ns
        made = {}
        events = EventList(use_device=self.use_device, trace=self)
        for i, r in enumerate(self.ranges):
            end = r.end if r.end is not None and r.end <= stop else stop
            device_us, device_index = _device_time(r) if self.use_device else (0.0, 0)
            # PyTorch names every step "ProfilerStep*"; the trace keeps "ProfilerStep#<n>"
            name = "ProfilerStep*" if r.name.startswith("ProfilerStep#") else r.name
            evt = FunctionEvent(i + 1, name, r.thread, (r.start - origin) / 1e3,
                                (end - origin) / 1e3,
                                input_shapes=r.shapes if self.record_shapes else [],
                                stack=r.stack if self.with_stack else [],
                                use_device=self.use_device, device_time_us=device_us,
                                device_index=device_index,
                                is_user_annotation=r.kind == "user_annotation",
                                trace_name=r.name)
            evt._range = r
            parent = r.parent
            while parent is not None and parent not in made:
                parent = parent.parent
            if parent is not None:
                evt.set_cpu_parent(made[parent])
                made[parent].append_cpu_child(evt)
            made[r] = evt
            events.append(evt)
        return events


def active():
    """Whether any profiler is recording now."""
    return bool(_ACTIVE)


def _update_flags():
    _FLAGS.shapes = any(s.record_shapes for s in _ACTIVE)
    _FLAGS.stack = any(s.with_stack for s in _ACTIVE)
    _FLAGS.device = any(s.use_device for s in _ACTIVE)


def _stack():
    st = getattr(_LOCAL, "stack", None)
    if st is None:
        st = _LOCAL.stack = []
    return st


def begin(name, kind="cpu_op", args=None):
    """Open a range named ``name`` on this thread (``args``: the arrays whose shapes to
    record); returns it for ``end``."""
    st = _stack()
    r = _Range(name, kind, st[-1] if st else None)
    if args is not None and _FLAGS.shapes:
        r.shapes = [list(a.shape) if hasattr(a, "shape") and hasattr(a, "dtype") else []
                    for a in args]
    if _FLAGS.stack:
        r.stack = _python_stack()
    for s in _ACTIVE:
        s.ranges.append(r)
    st.append(r)
    r.start = time.perf_counter_ns()
    return r


def end(r):
    """Close the range ``begin`` opened."""
    r.end = time.perf_counter_ns()
    st = _stack()
    if st and st[-1] is r:
        st.pop()
    elif r in st:               # closed out of order (record_function exited by hand)
        st.remove(r)


def _python_stack():
    """``file(line): function`` for the calling Python frames, innermost first, leaving
    out the profiler's own and the generated op wrappers."""
    frames = []
    f = sys._getframe(2)
    while f is not None:
        filename = f.f_code.co_filename
        if not filename.startswith((_PROFILER_DIR, "<ember op")):
            frames.append(f"{filename}({f.f_lineno}): {f.f_code.co_name}")
        f = f.f_back
    return frames


# --- device time ------------------------------------------------------------------------------

_REFERENCES = {}            # device index -> (CUDA event, perf_counter_ns when recorded)


def _device_begin(r):
    from ember import cuda
    index = cuda.current_device()
    ref = _REFERENCES.get(index)
    if ref is None:             # a per-device origin, to place GPU spans on the timeline
        event = cuda.Event(enable_timing=True)
        event.record()
        ref = _REFERENCES[index] = (event, time.perf_counter_ns())
    start = cuda.Event(enable_timing=True)
    start.record()
    r.device = (index, start, None, ref)


def _device_end(r):
    from ember import cuda
    stop = cuda.Event(enable_timing=True)
    stop.record()
    index, start, _, ref = r.device
    r.device = (index, start, stop, ref)


def _device_time(r):
    """(device time in us, device index) of a range; (0, 0) for ranges without one."""
    if r.device is None or r.device[2] is None:
        return 0.0, 0
    index, start, stop, _ = r.device
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3, index


def device_span(r):
    """(device index, start in ns on the perf_counter clock, duration in ns) of a range's
    device work, or None: the start is the reference event's CPU time plus the GPU time
    between the reference and the range's start event."""
    if r.device is None or r.device[2] is None:
        return None
    index, start, stop, (ref, ref_ns) = r.device
    stop.synchronize()
    offset = ref.elapsed_time(start) * 1e6
    return index, ref_ns + offset, start.elapsed_time(stop) * 1e6


# --- the hooks --------------------------------------------------------------------------------

def aten_name(op):
    """PyTorch's name of an op's kernel: ``aten::mm``, ``aten::linalg_inv``, ``aten::gelu``."""
    if op.namespace == "nn.functional":
        return "aten::" + op.short_name
    return "aten::" + op.name.replace(".", "_")


def _timed_forward(name, forward, inplace=False):
    @functools.wraps(forward)
    def timed(xp, *args, **kwargs):
        if not _ACTIVE:         # kept by someone past the profiler's end
            return forward(xp, *args, **kwargs)
        r = begin(name, "cpu_op", args[1:] if inplace else args)    # not the destination
        on_device = _FLAGS.device and xp is not np
        if on_device:
            _device_begin(r)
        try:
            return forward(xp, *args, **kwargs)
        finally:
            if on_device:
                _device_end(r)
            end(r)
    return timed


def _timed_call(name_of, fn, shapes_of=None):
    """Wrap ``fn(obj, *args)`` (a node's ``apply``, the engine's ``_run_node``) into a
    range named ``name_of(obj)``."""
    @functools.wraps(fn)
    def timed(obj, *args, **kwargs):
        st = _stack()
        if not _ACTIVE or (st and st[-1].obj is obj and st[-1].name == name_of(obj)):
            return fn(obj, *args, **kwargs)     # the engine reruns a node on another GPU
        r = begin(name_of(obj), "cpu_op", shapes_of(args) if shapes_of else None)
        r.obj = obj
        try:
            return fn(obj, *args, **kwargs)
        finally:
            end(r)
    return timed


def _node_name(node):
    return node.name()


def _grad_arrays(args):
    grads = args[0] if args else ()
    return [getattr(g, "_data", None) for g in grads]


def _evaluation_name(node):
    return "autograd::engine::evaluate_function: " + node.name()


def _node_classes():
    from ember.autograd.graph import Node
    todo, seen = [Node], []
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return seen


def _replace(owner, attribute, wrapper):
    original = owner.__dict__[attribute] if isinstance(owner, type) else getattr(owner,
                                                                                  attribute)
    _SAVED.append((owner, attribute, original))
    setattr(owner, attribute, wrapper(original))


def _install():
    from ember.autograd import engine
    from ember.ops._registry import REGISTRY
    for op in list(REGISTRY.values()):
        name = aten_name(op)
        _replace(op, "forward", functools.partial(_timed_forward, name))
        if op.inplace_forward is not None:
            _replace(op, "inplace_forward", functools.partial(_timed_forward, name + "_",
                                                                inplace=True))
    _replace(engine, "_run_node", functools.partial(_timed_call, _evaluation_name))
    _replace(engine, "_run_leaf", functools.partial(
        _timed_call, lambda node: "torch::autograd::AccumulateGrad"))
    _route_transposed_inputs()
    for cls in _node_classes():
        if "apply" in cls.__dict__:
            _time_apply(cls)
    _INSTALLED.append(True)


def _time_apply(cls):
    _replace(cls, "apply", functools.partial(_timed_call, _node_name, shapes_of=_grad_arrays))


def node_class_made(cls):
    """Time the ``apply`` of a node class made while the hooks are installed (Node's
    ``__init_subclass__`` calls this for the classes that define their own)."""
    with _LOCK:
        if _INSTALLED:
            _time_apply(cls)


def _route_transposed_inputs():
    """Have the engine walk linear's edges through the TBackward0 nodes PyTorch's graph has
    (see RoutedOpNode), so that a profiled backward records them as PyTorch's does."""
    from ember.ops._recording import _T_NODE, RoutedOpNode, _t_node_class
    if not _T_NODE:
        _t_node_class()             # (made now, its apply is timed as the other nodes')
    _SAVED.append((RoutedOpNode, "_edges", RoutedOpNode._edges))
    RoutedOpNode._edges = RoutedOpNode.__dict__["next_functions"]      # reading it routes


def _uninstall():
    _INSTALLED.clear()
    while _SAVED:
        owner, attribute, original = _SAVED.pop()
        setattr(owner, attribute, original)
    _REFERENCES.clear()
