"""CUDA streams and events over CuPy's (``torch.cuda.Stream``, ``torch.cuda.Event``).

ember's CUDA ops run on CuPy's current stream, so ``with ember.cuda.stream(s):`` queues
them on ``s``.
"""

from ember import _streams, backend
from ember._device import device as _device
from ember.cuda import _sync_debug
from ember.cuda._common import cupy, index_of

__all__ = ["Stream", "ExternalStream", "Event", "StreamContext", "stream", "current_stream",
           "default_stream", "set_stream", "is_current_stream_capturing"]


class Stream(_streams.Stream):
    """A queue of GPU work that runs in order (``torch.cuda.Stream``). Like PyTorch's, a new
    stream does not synchronize with the default stream: use ``wait_stream``."""

    device_type = "cuda"

    def __init__(self, device=None, priority=0, *, _wrap=None):
        if _wrap is None:
            index = index_of(device, optional=False)
            with cupy().cuda.Device(index):
                _wrap = cupy().cuda.Stream(non_blocking=True, priority=priority or None)
        self._stream = _wrap
        index = _wrap.device_id
        self.device = _device("cuda", cupy().cuda.runtime.getDevice() if index < 0 else index)
        self.device_index = self.device.index
        self._entered = []              # the StreamContexts of ``with stream:`` blocks, nested

    @property
    def cuda_stream(self):
        """The raw ``cudaStream_t`` handle as an int."""
        return self._stream.ptr

    native_handle = stream_id = cuda_stream

    @property
    def priority(self):
        """The stream's priority (lower numbers run first; 0 is the default)."""
        if self._stream.ptr == 0:       # the legacy default stream has the default priority
            return 0
        return backend.cuda_backend().cupy.cuda.runtime.streamGetPriority(self._stream.ptr)

    def wait_event(self, event):
        """Make later work on this stream wait until ``event`` completes."""
        self._stream.wait_event(event._event)

    def wait_stream(self, stream):
        """Make later work on this stream wait for the work queued on ``stream`` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Record ``event`` (a new one by default) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def query(self):
        """Whether all work queued on this stream has completed."""
        return self._stream.done

    def synchronize(self):
        """Wait until all work queued on this stream has completed (a wait that
        ``set_sync_debug_mode`` reports, as PyTorch's does)."""
        if _sync_debug.MODE[0]:
            _sync_debug.synchronizing()
        self._stream.synchronize()
        backend.cuda_backend().raise_deferred()

    def __cuda_stream__(self):
        """The CUDA stream protocol: (version, handle), for other libraries to use it."""
        return 0, self.cuda_stream

    def __enter__(self):
        self._entered.append(StreamContext(self))
        return self._entered[-1].__enter__()

    def __exit__(self, *exc):
        self._entered.pop().__exit__(*exc)

    def __eq__(self, other):
        return isinstance(other, Stream) and self.cuda_stream == other.cuda_stream

    def __hash__(self):
        return hash((self.cuda_stream, self.device))

    def __repr__(self):
        return f"<ember.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class _Handle:
    """A raw ``cudaStream_t`` presented through the CUDA stream protocol."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __cuda_stream__(self):
        return 0, self.ptr


class ExternalStream(Stream):
    """A stream made elsewhere (another library's), given by its ``cudaStream_t`` handle;
    ember queues work on it but neither owns nor destroys it."""

    def __init__(self, stream_ptr, device=None):
        index = index_of(device, optional=False)
        with cupy().cuda.Device(index):
            super().__init__(_wrap=cupy().cuda.Stream.from_external(_Handle(int(stream_ptr))))
        self.device = _device("cuda", index)


def is_current_stream_capturing():
    """Whether the current stream is capturing a CUDA graph: never, as ember captures none."""
    return False


class Event(_streams.Event):
    """A marker in a stream, to wait on or to time GPU work (``torch.cuda.Event``)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self._event = cupy().cuda.Event(block=blocking, disable_timing=not enable_timing,
                                        interprocess=interprocess)
        self.enable_timing = enable_timing
        self.device = _device("cuda", cupy().cuda.runtime.getDevice())
        self._recorded = False

    def record(self, stream=None):
        """Record the event on ``stream`` (the current stream by default)."""
        self._event.record(None if stream is None else stream._stream)
        self._recorded = True

    def wait(self, stream=None):
        """Make later work on ``stream`` (the current one by default) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self):
        """Whether the work before the event has completed."""
        return self._event.done

    def synchronize(self):
        """Wait until the work before the event has completed."""
        self._event.synchronize()
        backend.cuda_backend().raise_deferred()

    def elapsed_time(self, end_event):
        """Milliseconds between this event and ``end_event`` (both recorded, with timing)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if not (self._recorded and end_event._recorded):
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        if not (self.query() and end_event.query()):    # PyTorch does not wait for them
            raise RuntimeError("Both events must be completed before calculating elapsed "
                               "time.")
        return cupy().cuda.get_elapsed_time(self._event, end_event._event)

    @property
    def cuda_event(self):
        """The raw ``cudaEvent_t`` handle as an int."""
        return self._event.ptr

    event_id = cuda_event

    def __repr__(self):
        return f"<ember.cuda.Event device={self.device} cuda_event={self.event_id:#x}>"


def current_stream(device=None):
    """The stream CUDA work is queued on now."""
    return Stream(_wrap=cupy().cuda.get_current_stream(index_of(device, optional=False)))


def default_stream(device=None):
    """The device's default (legacy null) stream."""
    with cupy().cuda.Device(index_of(device, optional=False)):
        return Stream(_wrap=cupy().cuda.Stream.null)


def set_stream(stream):
    """Make ``stream`` the current stream (prefer the ``stream`` context manager)."""
    if stream is not None:
        stream._stream.use()


class StreamContext:
    """Queue the region's CUDA work on ``stream``; None makes the context a no-op."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            self.stream._stream.__enter__()
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream._stream.__exit__(*exc)


def stream(stream):
    """``with ember.cuda.stream(s):`` runs the block's CUDA work on ``s``."""
    return StreamContext(stream)
