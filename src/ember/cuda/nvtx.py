"""NVTX ranges and marks that profilers such as Nsight Systems show on their timeline
(``torch.cuda.nvtx``), through CuPy's NVTX bindings; where CuPy was built without NVTX they
are recorded nowhere, and the calls still return PyTorch's values."""

import contextlib

from ember.cuda._common import cupy

__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]

_DEPTH = [0]                # ranges pushed and not yet popped, in this process


def _nvtx():
    module = cupy().cuda.nvtx
    return module if module.available else None


def range_push(msg):
    """Start a nested range named ``msg``; returns its zero-based depth."""
    nvtx = _nvtx()
    if nvtx is not None:
        nvtx.RangePush(msg)
    _DEPTH[0] += 1
    return _DEPTH[0] - 1


def range_pop():
    """End the innermost range ``range_push`` started; returns its depth (-1 if none)."""
    if _DEPTH[0] == 0:
        return -1
    nvtx = _nvtx()
    if nvtx is not None:
        nvtx.RangePop()
    _DEPTH[0] -= 1
    return _DEPTH[0]


def range_start(msg):
    """Start a range named ``msg`` that may end anywhere (not nested); returns its id for
    ``range_end``."""
    nvtx = _nvtx()
    return 0 if nvtx is None else nvtx.RangeStart(msg, -1)


def range_end(range_id):
    """End the range ``range_start`` returned ``range_id`` for."""
    nvtx = _nvtx()
    if nvtx is not None and range_id:
        nvtx.RangeEnd(range_id)


def mark(msg):
    """Mark an instant named ``msg``."""
    nvtx = _nvtx()
    if nvtx is not None:
        nvtx.Mark(msg)


@contextlib.contextmanager
def range(msg, *args, **kwargs):
    """A nested range around the block, named ``msg.format(*args, **kwargs)``."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
