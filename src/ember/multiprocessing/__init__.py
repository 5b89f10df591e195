"""``ember.multiprocessing`` (``torch.multiprocessing``): the standard library's
multiprocessing, plus PyTorch's sharing-strategy switches and ``spawn``/``start_processes``,
which run ``fn(i, *args)`` in ``nprocs`` processes and re-raise a child's failure.

Tensors moved into shared memory (``share_memory_``, ``Module.share_memory``) travel
between processes by the name of their segment, so every process sees the same memory;
other tensors are copied. The sharing strategy is recorded and reported as PyTorch's is but
changes nothing (ember's segments work the same way under both).
"""

import multiprocessing
import sys
from multiprocessing import *  # noqa: F401,F403

from ember.multiprocessing.spawn import (ProcessContext, ProcessExitedException,  # noqa: F401
                                         ProcessRaisedException, SpawnContext, spawn,
                                         start_processes)

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies"]
__all__ += multiprocessing.__all__

if sys.platform == "darwin":
    _sharing_strategy = "file_system"
    _all_sharing_strategies = {"file_system"}
else:
    _sharing_strategy = "file_descriptor"
    _all_sharing_strategies = {"file_descriptor", "file_system"}


def set_sharing_strategy(new_strategy):
    """Set the strategy for sharing CPU tensors between processes (recorded only)."""
    global _sharing_strategy
    assert new_strategy in _all_sharing_strategies, (
        f"invalid sharing strategy '{new_strategy}', expected one of "
        f"{_all_sharing_strategies}")
    _sharing_strategy = new_strategy


def get_sharing_strategy():
    """The current strategy for sharing CPU tensors between processes."""
    return _sharing_strategy


def get_all_sharing_strategies():
    """The set of sharing strategies this platform supports."""
    return _all_sharing_strategies
