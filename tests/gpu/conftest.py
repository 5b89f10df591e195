"""Tests marked ``cuda`` skip unless CuPy sees a GPU; ``tests/gpu/run_gpu_checks.sh`` runs
them on the borrowed GPU machine. ``EMBER_FAKE_CUDA=1`` runs them here on a NumPy stand-in
for CuPy (tests/gpu/fake_cupy.py), which checks the device plumbing but not the GPU."""

import os

import pytest

if os.environ.get("EMBER_FAKE_CUDA") == "1":
    from tests.gpu import fake_cupy
    fake_cupy.install()
    if os.environ.get("TRITON_INTERPRET") == "1":
        # the Triton kernels run interpreted on the stand-in's arrays (a slow, thorough check
        # of the overrides' glue): buffers become host pointers, and no CUDA driver is asked
        from ember.backend.cuda_kernels import _launch
        from tests.gpu.host_buffers import Host
        _launch.buffer = Host
        _launch.follow_cupy = lambda cupy: None
    else:
        os.environ["EMBER_CUDA_KERNELS"] = "0"  # Triton cannot launch on the stand-in's arrays

import ember  # noqa: E402  (after the stand-in, when asked for)


@pytest.fixture(autouse=True)
def full_precision_convolutions():
    """GPU results are compared with the CPU's at float32 tolerances: convolutions run
    without TF32 (PyTorch's default lets them use it), as in PyTorch's own tests. Tests of
    TF32 turn it back on."""
    with ember.backends.cudnn.flags(enabled=True, allow_tf32=False):
        yield


def pytest_runtest_setup(item):
    if item.get_closest_marker("cuda") and not ember.cuda.is_available():
        pytest.skip("needs CuPy and a CUDA GPU")


@pytest.fixture
def host_traffic():
    """fake_cupy.host_traffic: counts what would make the host wait for a GPU."""
    if not ember.cuda.is_available() or ember.backend.cuda_backend().cupy.__version__ != "fake":
        pytest.skip("counted by the CuPy stand-in (EMBER_FAKE_CUDA=1)")
    from tests.gpu.fake_cupy import host_traffic
    return host_traffic
