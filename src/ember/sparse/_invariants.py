"""``torch.sparse.check_sparse_tensor_invariants``, and the warning sparse constructors give
while a program has not chosen whether their indices are checked."""

from ember._warn import warn_once

__all__ = ["check_sparse_tensor_invariants", "warn_if_implicit"]

_IMPLICIT = ("Sparse invariant checks are implicitly disabled. Memory errors (e.g. SEGFAULT) "
             "will occur when operating on a sparse tensor which violates the invariants, but "
             "checks incur performance overhead. To silence this warning, explicitly opt in or "
             "out. See `torch.sparse.check_sparse_tensor_invariants.__doc__` for guidance. ")


class check_sparse_tensor_invariants:  # noqa: N801  (PyTorch's name)
    """``torch.sparse.check_sparse_tensor_invariants``: ember's sparse constructors always
    check their indices (unless given ``check_invariants=False``), so this only records the
    setting programs ask for, and that they chose one."""

    _enabled = [False]
    _chosen = [False]       # enable(), disable() or the context manager was used

    def __init__(self, enable=True):
        self._wanted = enable

    @staticmethod
    def is_enabled():
        """Whether checks were switched on."""
        return check_sparse_tensor_invariants._enabled[0]

    @staticmethod
    def enable():
        """Switch the checks on."""
        check_sparse_tensor_invariants._set(True)

    @staticmethod
    def disable():
        """Switch the checks off (ember checks anyway)."""
        check_sparse_tensor_invariants._set(False)

    @staticmethod
    def _set(enabled):
        check_sparse_tensor_invariants._enabled[0] = enabled
        check_sparse_tensor_invariants._chosen[0] = True

    def __enter__(self):
        self._saved = self.is_enabled()
        self._set(self._wanted)

    def __exit__(self, *exc):
        self._set(self._saved)


def warn_if_implicit(check_invariants):
    """PyTorch's once-per-process warning when a sparse constructor is called without
    ``check_invariants`` before the program chose a setting."""
    if check_invariants is None and not check_sparse_tensor_invariants._chosen[0]:
        warn_once(_IMPLICIT)
