"""Anomaly detection: forward tracebacks for failing backward nodes, and NaN checks."""

import os
import traceback

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled"]

ENABLED = [False]
CHECK_NAN = [True]


_OPS_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "ops") + os.sep


def capture_trace():
    """The current stack as text, recorded on nodes created while anomaly mode is on; it ends
    at the op's call, as PyTorch's does (the dispatch frames below it are left out)."""
    frames = traceback.extract_stack()[:-3]
    while frames and (frames[-1].filename.startswith(("<ember op", _OPS_DIR))):
        frames.pop()
    return "".join(traceback.format_list(frames))


def is_anomaly_enabled():
    """Whether anomaly detection is on."""
    return ENABLED[0]


class detect_anomaly:
    """Context manager/decorator: record forward traces and raise on NaN gradients."""

    def __init__(self, check_nan=True):
        import warnings
        self.check_nan = check_nan
        # PyTorch warns on construction, so ``detect_anomaly()`` alone warns too
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self._prev = (ENABLED[0], CHECK_NAN[0])
        ENABLED[0], CHECK_NAN[0] = True, self.check_nan
        return self

    def __exit__(self, *exc):
        ENABLED[0], CHECK_NAN[0] = self._prev

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly(detect_anomaly):
    """Turn anomaly detection on or off; usable as a plain call or a context manager."""

    def __init__(self, mode, check_nan=True):
        self._prev = (ENABLED[0], CHECK_NAN[0])
        ENABLED[0], CHECK_NAN[0] = bool(mode), check_nan

    def __enter__(self):
        return self
