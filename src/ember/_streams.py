"""Device-agnostic streams and events (``torch.Stream``, ``torch.Event``).

``ember.Stream(device)`` and ``ember.Event(device)`` build the device's own kind: on a GPU an
``ember.cuda.Stream`` or ``ember.cuda.Event``, which subclass these. Without a device they
take the current accelerator's (the GPU when CUDA is available, else the CPU). The CPU runs
ember's ops eagerly, in order, so its one stream is always done and it records no events.
"""

from ember._device import device as _device

__all__ = ["Stream", "Event"]

_NO_CPU_EVENTS = "cpu backend doesn't support events."


def accelerator_device(device):
    """``device`` as an ember device; None means the current accelerator's device type."""
    if device is None:
        from ember import cuda
        return _device("cuda" if cuda.is_available() else "cpu")
    if isinstance(device, int) and not isinstance(device, bool):
        from ember.accelerator._current import require
        return _device(require().type, device)
    return _device(device)


class _BuiltPerDevice(type):
    """``Stream(device="cuda")`` returns an ``ember.cuda.Stream``, as PyTorch's generic
    constructors hand out the device's own stream; the subclasses construct as usual."""

    def __call__(cls, *args, **kwargs):
        if cls not in (Stream, Event):
            return super().__call__(*args, **kwargs)
        device = accelerator_device(args[0] if args else kwargs.pop("device", None))
        if device.type == "cuda":
            return cls._for_cuda(device, *args[1:], **kwargs)
        if device.type != "cpu":
            raise RuntimeError(f"ember is not built with support for {device.type} devices")
        return super().__call__(device, *args[1:], **kwargs)


class Stream(metaclass=_BuiltPerDevice):
    """An in-order queue of work on a device (``torch.Stream``); ``with stream:`` queues the
    block's work on it. The CPU's is the eager order itself."""

    device_type = "cpu"
    device_index = -1
    stream_id = 0

    def __init__(self, device=None, *, priority=0):
        self.device = _device("cpu")

    @staticmethod
    def _for_cuda(device, priority=0):
        from ember import cuda
        return cuda.Stream(device, priority=priority)

    def query(self):
        """Whether all work queued on this stream has completed."""
        return True

    def synchronize(self):
        """Wait until all work queued on this stream has completed."""

    def wait_event(self, event):
        """Make later work on this stream wait until ``event`` completes."""

    def wait_stream(self, stream):
        """Make later work on this stream wait for the work queued on ``stream`` so far."""
        raise RuntimeError(_NO_CPU_EVENTS)

    def record_event(self, event=None):
        """Record ``event`` (a new one by default) on this stream; returns it."""
        raise RuntimeError(_NO_CPU_EVENTS)

    @property
    def native_handle(self):
        """The device's own handle of the stream (``cudaStream_t`` on a GPU)."""
        raise RuntimeError("Backend doesn't support getting stream native handle.")

    def is_capturing(self):
        """Whether the stream is capturing a graph: never, as ember captures none."""
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def __eq__(self, other):
        return (isinstance(other, Stream) and self.device == other.device
                and self.stream_id == other.stream_id)

    def __hash__(self):
        return hash((self.device, self.stream_id))

    def __repr__(self):
        return (f"ember.Stream device_type={self.device_type}, "
                f"device_index={self.device_index}, stream_id={self.stream_id}")


class Event(metaclass=_BuiltPerDevice):
    """A marker in a stream, to wait on or to time a device's work (``torch.Event``).
    The CPU records none."""

    event_id = 0

    def __init__(self, device=None, *, enable_timing=False, blocking=False,
                 interprocess=False):
        self.device = _device("cpu")
        self.enable_timing = enable_timing

    @staticmethod
    def _for_cuda(device, enable_timing=False, blocking=False, interprocess=False):
        from ember import cuda
        with cuda.device(device.index):
            return cuda.Event(enable_timing=enable_timing, blocking=blocking,
                              interprocess=interprocess)

    def record(self, stream=None):
        """Record the event on ``stream`` (the current stream by default)."""
        raise RuntimeError(_NO_CPU_EVENTS)

    def wait(self, stream=None):
        """Make later work on ``stream`` (the current one by default) wait for this event."""

    def query(self):
        """Whether the work before the event has completed."""
        return True

    def synchronize(self):
        """Wait until the work before the event has completed."""

    def elapsed_time(self, end_event):
        """Milliseconds between this event and ``end_event`` (both recorded, with timing)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        raise RuntimeError(_NO_CPU_EVENTS)

    def __repr__(self):
        return (f"ember.Event device_type={self.device.type}, device_index=-1, "
                f"event_id={self.event_id}")
