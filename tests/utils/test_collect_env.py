"""python -m ember.utils.collect_env: what a bug report needs."""

import platform
import subprocess
import sys
import types

import numpy as np
import scipy

import ember
from ember.utils import collect_env


def test_module_prints_versions_and_cpu():
    proc = subprocess.run([sys.executable, "-m", "ember.utils.collect_env"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "Collecting environment information..."
    assert f"ember version: {ember.__version__}" in lines
    assert f"NumPy version: {np.__version__}" in lines
    assert f"SciPy version: {scipy.__version__}" in lines
    assert any(line.startswith(f"Python version: {platform.python_version()} ") for line in lines)
    assert any(line.startswith("NumPy BLAS: ") and "Could not" not in line for line in lines)
    assert f"[pip3] numpy=={np.__version__}" in lines
    assert any(line.startswith("Model name: ") for line in lines)
    assert "Is CUDA available: " + str(ember.cuda.is_available()) in lines


def test_env_info_fields():
    env = collect_env.get_env_info()
    assert env.ember_version == ember.__version__
    assert env.numpy_version == np.__version__ and env.scipy_version == scipy.__version__
    assert env.cpu_count >= 1 and env.cpu
    if not ember.cuda.is_available():
        assert env.cuda_available is False and env.gpu_models == []


def test_cuda_section_with_a_gpu(monkeypatch):
    # CuPy's runtime API as the report reads it: versions are encoded as 1000*major + 10*minor
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 2, runtimeGetVersion=lambda: 12080,
        driverGetVersion=lambda: 13000,
        getDeviceProperties=lambda i: {"name": b"NVIDIA H200"})
    fake = types.SimpleNamespace(__version__="14.2.0",
                                 cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(ember.cuda, "is_available", lambda: True)
    text = collect_env.get_pretty_env_info()
    assert "Is CUDA available: True" in text
    assert "CuPy version: 14.2.0" in text
    assert "CUDA runtime version: 12.8" in text and "CUDA driver version: 13.0" in text
    assert "GPU models and configuration:\nGPU 0: NVIDIA H200\nGPU 1: NVIDIA H200" in text


def test_collect_env_is_reachable_without_an_import():
    code = "import ember; print(ember.utils.collect_env.get_pretty_env_info().split(':')[0])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out == "ember version\n"
