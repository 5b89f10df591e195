"""Warnings that point where PyTorch's do, through the wrappers ember adds around functions.

Autocast wraps some ``nn.functional`` compositions (amp/autocast_mode.py), which puts one
more frame between a warning and the caller its ``stacklevel`` means. Such wrappers register
their code here, and warning sites inside wrapped functions pass ``user_level(n)``: ``n``,
plus one for each registered frame on the way up.
"""

import sys

__all__ = ["HIDDEN", "user_level"]

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
