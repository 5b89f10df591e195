"""Fixtures for every test."""

import pytest


@pytest.fixture(autouse=True)
def _fresh_warn_once():
    """PyTorch's once-per-process warnings (``ember._warn.warn_once``) warn again in each
    test, so that a test expecting one does not depend on which tests ran before it."""
    from ember import _warn
    _warn._WARNED_ONCE.clear()
