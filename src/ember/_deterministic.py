"""Deterministic algorithms: ``use_deterministic_algorithms`` and its debug-mode twin.

ember's CPU ops are deterministic in any mode, but for NumPy's BLAS: by default its thread
count follows the machine's load (backend/blas_threads.py), and a product's last bits can
change with it; the mode keeps the count as it is. On a GPU the only run-to-run differences come
from floating-point sums whose order is left to the hardware: repeated indices added with
atomics (``index_add``, ``index_put(accumulate=True)``, ``scatter_add``, embedding and pooling
gradients, weighted histograms) and the interpolation gradient's kernel. With the mode on
they take an ordered path instead (``backend.combine_at``), so no op must refuse, and
``warn_only`` never has anything to warn about. With ``utils.deterministic
.fill_uninitialized_memory`` (True by default) ``empty`` and its kin fill their tensors as
PyTorch does: NaN for floats, the largest value for integers.
"""

__all__ = ["use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
           "get_deterministic_debug_mode"]


class _State:
    enabled = False
    warn_only = False
    fill_uninitialized_memory = True


STATE = _State()
_MODES = {"default": 0, "warn": 1, "error": 2}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Make ops use deterministic algorithms (``warn_only``: warn where none exists)."""
    for name, value in (("mode' (position 1)", mode), ("warn_only'", warn_only)):
        if not isinstance(value, bool):
            raise TypeError(f"_set_deterministic_algorithms(): argument '{name} must be bool, "
                            f"not {type(value).__name__}")
    STATE.enabled = mode
    STATE.warn_only = warn_only


def are_deterministic_algorithms_enabled():
    """Whether ``use_deterministic_algorithms(True)`` is in force."""
    return STATE.enabled


def is_deterministic_algorithms_warn_only_enabled():
    """Whether deterministic mode only warns about nondeterministic ops."""
    return STATE.warn_only


def set_deterministic_debug_mode(debug_mode):
    """Set the mode by level: "default" (0) off, "warn" (1) warn only, "error" (2) on."""
    if isinstance(debug_mode, str):
        if debug_mode not in _MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, "
                               f"`warn`, `error`, but got {debug_mode}")
        debug_mode = _MODES[debug_mode]
    elif not isinstance(debug_mode, int):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                           f"{debug_mode}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    """The mode as a level: 0 off, 1 warn only, 2 on."""
    return 0 if not STATE.enabled else 1 if STATE.warn_only else 2
