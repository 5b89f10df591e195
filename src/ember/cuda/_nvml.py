"""What ``nvidia-smi`` reports about a GPU (utilization, temperature, power, clocks,
processes), through NVIDIA's management library: the optional ``nvidia-ml-py`` package
(module ``pynvml``), as PyTorch reads them."""

from ember.cuda._common import cupy, index_of

__all__ = ["utilization", "memory_usage", "temperature", "power_draw", "clock_rate",
           "device_memory_used", "list_gpu_processes"]

_MISSING = "nvidia-ml-py does not seem to be installed or it can't be imported."
_STARTED = []


def _nvml():
    try:
        import pynvml
    except ModuleNotFoundError:
        raise ModuleNotFoundError(_MISSING) from None
    if not _STARTED:
        pynvml.nvmlInit()
        _STARTED.append(True)
    return pynvml


def _handle(nvml, device):
    """NVML's handle of ``device``, found by PCI bus id: NVML numbers all GPUs, CUDA only
    those ``CUDA_VISIBLE_DEVICES`` shows."""
    bus_id = cupy().cuda.runtime.deviceGetPCIBusId(index_of(device, optional=False))
    return nvml.nvmlDeviceGetHandleByPciBusId(bus_id)


def _read(device, what):
    nvml = _nvml()
    return what(nvml, _handle(nvml, device))


def utilization(device=None):
    """Percent of the last sample period in which a kernel ran on ``device``."""
    return _read(device, lambda nvml, h: nvml.nvmlDeviceGetUtilizationRates(h).gpu)


def memory_usage(device=None):
    """Percent of the last sample period in which ``device``'s memory was read or written."""
    return _read(device, lambda nvml, h: nvml.nvmlDeviceGetUtilizationRates(h).memory)


def temperature(device=None):
    """The GPU's temperature in degrees Celsius."""
    return _read(device, lambda nvml, h: nvml.nvmlDeviceGetTemperature(
        h, nvml.NVML_TEMPERATURE_GPU))


def power_draw(device=None):
    """The GPU's power draw in milliwatts."""
    return _read(device, lambda nvml, h: nvml.nvmlDeviceGetPowerUsage(h))


def clock_rate(device=None):
    """The GPU's streaming-multiprocessor clock in MHz."""
    return _read(device, lambda nvml, h: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))


def device_memory_used(device=None):
    """Bytes of ``device``'s memory in use, by all processes."""
    return _read(device, lambda nvml, h: nvml.nvmlDeviceGetMemoryInfo(h).used)


def list_gpu_processes(device=None):
    """A printable list of the processes using ``device`` and the memory each holds (or why
    there is none: no nvidia-ml-py, no driver)."""
    try:
        import pynvml
    except ModuleNotFoundError:
        return "pynvml module not found, please install nvidia-ml-py"
    try:
        nvml = _nvml()
    except pynvml.NVMLError_DriverNotLoaded:
        return "cuda driver can't be loaded, is cuda enabled?"
    index = index_of(device, optional=False)
    processes = nvml.nvmlDeviceGetComputeRunningProcesses(_handle(nvml, index))
    lines = [f"GPU:{index}"]
    lines += [f"process {p.pid:>10d} uses {p.usedGpuMemory / 2 ** 20:>12.3f} MB GPU memory"
              for p in processes]
    if not processes:
        lines.append("no processes are running")
    return "\n".join(lines)
