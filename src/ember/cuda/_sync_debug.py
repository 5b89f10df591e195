"""The synchronization debug mode (``torch.cuda.set_sync_debug_mode``): warn about, or refuse,
the operations that make the host wait for the GPU.

NOTE [Sync debug mode]: ember checks the mode where a GPU array is downloaded and the host
waits for it (``backend/cuda.py``'s ``to_host``: ``.item()``, ``float(t)``, ``.tolist()``,
``.cpu()`` and ember's own reads of device values) and in ``Stream.synchronize``, as PyTorch
checks its blocking copies and stream synchronizations; ``ember.cuda.synchronize`` and
``Event.synchronize`` are explicit waits and pass, as in PyTorch. The check is one list
lookup on the GPU path and none on the CPU's. Reads that bypass ``to_host`` are not seen:
``bool(t)``, printing a GPU tensor, the read of deferred input checks after every 64 of them
(NOTE [Deferred device checks]) and the syncs inside CuPy calls (the output size of
``nonzero`` or ``masked_select``).
"""

import sys
import warnings

import numpy as np

from ember import backend

__all__ = ["MODE", "set_sync_debug_mode", "get_sync_debug_mode", "synchronizing"]

MODE = [0]                      # 0: default, 1: warn, 2: error (read by backend/cuda.py)
_NAMES = {"default": 0, "warn": 1, "error": 2}
_PROTOTYPE_WARNED = []
_MESSAGE = "called a synchronizing CUDA operation"


def set_sync_debug_mode(debug_mode):
    """Make the operations that wait for the GPU warn ("warn" or 1) or raise ("error" or 2),
    or pass silently ("default" or 0, the start); see NOTE [Sync debug mode] for which."""
    backend.cuda_backend()
    if isinstance(debug_mode, str):
        if debug_mode not in _NAMES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, "
                               "`warn`, `error`")
        debug_mode = _NAMES[debug_mode]
    if not _PROTOTYPE_WARNED:
        _PROTOTYPE_WARNED.append(True)
        warnings.warn("Synchronization debug mode is a prototype feature and does not yet "
                      "detect all synchronizing operations", UserWarning, stacklevel=2)
    if not isinstance(debug_mode, (int, np.integer)) or isinstance(debug_mode, bool):
        raise RuntimeError("invalid argument to set_sync_debug_mode")
    if not 0 <= debug_mode <= 2:
        raise RuntimeError("invalid value of debug_mode, expected one of 0,1,2")
    MODE[0] = int(debug_mode)


def get_sync_debug_mode():
    """The synchronization debug mode: 0 (default), 1 (warn) or 2 (error)."""
    backend.cuda_backend()
    return MODE[0]


def synchronizing():
    """Warn or raise, as the mode says, for an operation that makes the host wait for the
    GPU; the warning points at the first caller outside ember."""
    if MODE[0] == 2:
        raise RuntimeError(_MESSAGE)
    if MODE[0] == 1:
        frame, level = sys._getframe(1), 2
        while frame is not None and frame.f_globals.get("__name__", "").startswith("ember."):
            frame, level = frame.f_back, level + 1
        warnings.warn(_MESSAGE, UserWarning, stacklevel=level)
