"""Tests marked ``cuda`` skip unless CuPy sees a GPU; ``tests/gpu/run_gpu_checks.sh`` runs
them on the borrowed GPU machine."""

import pytest

import ember


def pytest_runtest_setup(item):
    if item.get_closest_marker("cuda") and not ember.cuda.is_available():
        pytest.skip("needs CuPy and a CUDA GPU")
