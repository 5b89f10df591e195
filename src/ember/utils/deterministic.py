"""``torch.utils.deterministic``: what deterministic mode does to uninitialized memory."""

import sys
import types

from ember._deterministic import STATE


class _Deterministic(types.ModuleType):
    @property
    def fill_uninitialized_memory(self):
        """Whether ``empty`` and its kin fill their tensors (NaN for floats, the largest value
        for integers) while ``use_deterministic_algorithms(True)`` is on (default True)."""
        return STATE.fill_uninitialized_memory

    @fill_uninitialized_memory.setter
    def fill_uninitialized_memory(self, mode):
        if not isinstance(mode, bool):
            raise RuntimeError(f"expected a bool, but got {type(mode).__name__}")
        STATE.fill_uninitialized_memory = mode


sys.modules[__name__].__class__ = _Deterministic
