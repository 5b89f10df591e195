"""Print the environment a bug report needs: ``python -m ember.utils.collect_env``.

Like ``torch.utils.collect_env``: versions of ember, Python and the libraries ember runs on
(NumPy with its BLAS, SciPy, CuPy with CUDA when present), the OS and the CPU.
"""

import importlib.metadata
import os
import platform
import sys
from collections import namedtuple

__all__ = ["get_env_info", "get_pretty_env_info", "main"]

SystemEnv = namedtuple("SystemEnv", [
    "ember_version", "python_version", "python_platform", "os", "numpy_version", "numpy_blas",
    "scipy_version", "cuda_available", "cupy_version", "cuda_runtime_version",
    "cuda_driver_version", "gpu_models", "cpu", "cpu_count", "libraries"])

# packages ember uses, listed under "Versions of relevant libraries"
_RELEVANT = ["ml_dtypes", "numpy", "scipy", "safetensors", "tqdm", "scikit-learn", "cupy",
             "cupy-cuda12x", "cupy-cuda13x", "mpi4py", "torch"]


def _version(module_name):
    try:
        return importlib.import_module(module_name).__version__
    except Exception:                       # absent, or broken: a report should still print
        return None


def _numpy_blas():
    import numpy
    try:
        deps = numpy.show_config(mode="dicts")["Build Dependencies"]
    except Exception:
        return None
    blas = deps.get("blas", {})
    text = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    config = blas.get("openblas configuration")
    return f"{text} ({config.strip()})" if config else text


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def _cuda():
    """(available, cupy version, runtime version, driver version, GPU names)."""
    from ember import cuda
    if not cuda.is_available():
        return False, _version("cupy"), None, None, []
    import cupy
    rt = cupy.cuda.runtime

    def dotted(v):
        return f"{v // 1000}.{v % 1000 // 10}"
    names = []
    for i in range(rt.getDeviceCount()):
        name = rt.getDeviceProperties(i)["name"]
        names.append(name.decode() if isinstance(name, bytes) else name)
    return (True, cupy.__version__, dotted(rt.runtimeGetVersion()),
            dotted(rt.driverGetVersion()), names)


def _libraries():
    found = []
    for name in _RELEVANT:
        try:
            found.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def get_env_info():
    """The environment as a ``SystemEnv`` named tuple."""
    import ember
    available, cupy_version, runtime, driver, gpus = _cuda()
    bits = "64-bit" if sys.maxsize > 2**32 else "32-bit"
    python = " ".join(sys.version.split())
    return SystemEnv(
        ember_version=ember.__version__,
        python_version=f"{python} ({bits} runtime)",
        python_platform=platform.platform(),
        os=f"{platform.system()} {platform.release()} ({platform.machine()})",
        numpy_version=_version("numpy"),
        numpy_blas=_numpy_blas(),
        scipy_version=_version("scipy"),
        cuda_available=available,
        cupy_version=cupy_version,
        cuda_runtime_version=runtime,
        cuda_driver_version=driver,
        gpu_models=gpus,
        cpu=_cpu(),
        cpu_count=os.cpu_count(),
        libraries=_libraries())


def get_pretty_env_info():
    """The environment as the text ``python -m ember.utils.collect_env`` prints."""
    env = get_env_info()

    def show(value):
        return "Could not collect" if value is None else value
    gpus = "".join(f"\nGPU {i}: {name}" for i, name in enumerate(env.gpu_models)) or " N/A"
    lines = [
        f"ember version: {env.ember_version}",
        "",
        f"OS: {env.os}",
        f"Python version: {env.python_version}",
        f"Python platform: {env.python_platform}",
        "",
        f"NumPy version: {show(env.numpy_version)}",
        f"NumPy BLAS: {show(env.numpy_blas)}",
        f"SciPy version: {show(env.scipy_version)}",
        "",
        f"Is CUDA available: {env.cuda_available}",
        f"CuPy version: {env.cupy_version or 'N/A'}",
        f"CUDA runtime version: {env.cuda_runtime_version or 'N/A'}",
        f"CUDA driver version: {env.cuda_driver_version or 'N/A'}",
        f"GPU models and configuration:{gpus}",
        "",
        "CPU:",
        f"Model name: {show(env.cpu)}",
        f"CPU(s): {show(env.cpu_count)}",
        "",
        "Versions of relevant libraries:",
        *(f"[pip3] {lib}" for lib in env.libraries),
    ]
    return "\n".join(lines)


def main():
    """Collect and print the environment."""
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    main()
