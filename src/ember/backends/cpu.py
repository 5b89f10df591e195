"""``ember.backends.cpu`` (``torch.backends.cpu``)."""

from numpy._core._multiarray_umath import __cpu_features__

__all__ = ["get_cpu_capability"]


def get_cpu_capability():
    """The widest SIMD instruction set the CPU offers NumPy's kernels, named as PyTorch
    names its CPU kernel levels: "AVX512", "AVX2" or "DEFAULT"."""
    features = __cpu_features__
    if all(features.get(f"AVX512{x}") for x in ("F", "BW", "VL", "DQ")):
        return "AVX512"
    return "AVX2" if features.get("AVX2") and features.get("FMA3") else "DEFAULT"


def _onednn_supports(dtype_name):
    """Whether PyTorch's oneDNN runs ``dtype_name`` ("bfloat16" or "float16") kernels on this
    CPU, as its mkldnn_bf16/fp16_device_check decide on x86: AVX-512 core for bfloat16,
    AVX512-FP16 for float16."""
    need = ("F", "BW", "VL", "DQ") if dtype_name == "bfloat16" else ("FP16",)
    return all(__cpu_features__.get(f"AVX512{x}") for x in need)
