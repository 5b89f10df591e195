"""Intel ITT ranges (``torch.profiler.itt``): ember has no ITT bindings, so ranges are
accepted and recorded nowhere, and ``is_available()`` is False."""

import contextlib

__all__ = ["is_available", "range_push", "range_pop", "mark", "range"]


def is_available():
    """Whether ITT ranges reach a profiler such as VTune: never in ember."""
    return False


def range_push(msg):
    """Start a range named ``msg`` (recorded nowhere)."""


def range_pop():
    """End the innermost range (recorded nowhere)."""


def mark(msg):
    """Mark an instant named ``msg`` (recorded nowhere)."""


@contextlib.contextmanager
def range(msg, *args, **kwargs):
    """A range named ``msg.format(*args, **kwargs)`` around the ``with`` block (recorded
    nowhere)."""
    msg.format(*args, **kwargs)             # the same errors as a real range's name
    yield
