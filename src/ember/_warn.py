"""Warnings that point where PyTorch's do, through the wrappers ember adds around functions.

Autocast wraps some ``nn.functional`` compositions (amp/autocast_mode.py), which puts one
more frame between a warning and the caller its ``stacklevel`` means. Such wrappers register
their code here, and warning sites inside wrapped functions pass ``user_level(n)``: ``n``,
plus one for each registered frame on the way up.
"""

import sys
import warnings

__all__ = ["HIDDEN", "user_level", "outside_level", "warn_once"]

HIDDEN = set()          # code objects of wrapper frames a stacklevel does not count


def user_level(level):
    """The ``stacklevel`` for a ``warnings.warn`` made by this function's caller that blames
    the frame ``level`` would blame without wrappers in between."""
    frame = sys._getframe(1)
    extra = 0
    for _ in range(level - 1):
        frame = frame.f_back
        while frame is not None and frame.f_code in HIDDEN:
            frame = frame.f_back
            extra += 1
        if frame is None:
            break
    return level + extra


def _inside(frame):
    name = frame.f_globals.get("__name__", "")
    return (name == "ember" or name.startswith("ember.")
            or frame.f_code.co_filename.startswith("<ember op"))


def outside_level():
    """The ``stacklevel`` that blames the first frame outside ember (ember's modules and its
    generated op functions) for a warning its caller makes, as PyTorch's C++ warnings do."""
    frame, level = sys._getframe(2), 2
    while frame is not None and _inside(frame):
        frame, level = frame.f_back, level + 1
    return level


_WARNED_ONCE = set()
WARN_ALWAYS = [False]           # set_warn_always(True): warn_once warns every time


def warn_once(message, category=UserWarning, *, key=None):
    """Warn once per process (PyTorch's TORCH_WARN_ONCE; every time after
    ``set_warn_always(True)``), blaming the first caller outside ember. ``key`` names the
    warning site where its message varies (the message itself otherwise)."""
    key = message if key is None else key
    if not WARN_ALWAYS[0]:
        if key in _WARNED_ONCE:
            return
        _WARNED_ONCE.add(key)       # (warnings given under warn-always leave the once unspent)
    warnings.warn(message, category, stacklevel=outside_level())
