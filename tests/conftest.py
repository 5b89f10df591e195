"""Fixtures for every test."""

import pytest


def pytest_configure(config):
    """NumPy's BLAS keeps one thread count for the whole run, so that results repeat bit for
    bit (by default its count follows the machine's load: ember/backend/blas_threads.py)."""
    from ember.backend.blas_threads import controls, set_blas_threads
    found = controls()
    if found:
        set_blas_threads(found[0][1]())


@pytest.fixture(autouse=True)
def _fresh_warn_once():
    """PyTorch's once-per-process warnings (``ember._warn.warn_once``) warn again in each
    test, so that a test expecting one does not depend on which tests ran before it."""
    from ember import _warn
    from ember.sparse._invariants import check_sparse_tensor_invariants as invariants
    _warn._WARNED_ONCE.clear()
    # a program's choice of sparse invariant checks silences a once-per-process warning too
    invariants._enabled[0] = invariants._chosen[0] = False
