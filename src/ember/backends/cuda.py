"""``ember.backends.cuda``: the cuBLAS and attention switches (``torch.backends.cuda``).

``matmul.allow_tf32`` is another view of ``ember.set_float32_matmul_precision`` (see
_precision.py): on a GPU it lets float32 matrix products use TF32 tensor cores. The
reduced-precision-reduction flags are accepted and remembered but change nothing:
float16/bfloat16 products accumulate as cuBLAS's default does.

The scaled-dot-product-attention switches say which kernels ``F.scaled_dot_product_attention``
may use. ember has two: the flash kernel (Triton, on CUDA), whose override consults
``flash_sdp_enabled()``, and the generic one, which runs where ``generic_sdp_allowed`` says
the switches let one of the kernels it stands in for run. A call no allowed path can take
raises, as PyTorch's does. The math reduction switch is remembered only. Which kernel would
take given inputs (``SDPAParams``, ``can_use_*_attention``) is in cuda_sdpa.py, the library
preferences in cuda_libraries.py and the cuFFT plan caches in cuda_fft.py.
"""

import contextlib
import importlib.util
import sys
import warnings

from ember.backends import _fp32_precision, _precision
from ember.backends._flags import check_bool
from ember.backends.cuda_fft import (cuFFTPlanCache, cuFFTPlanCacheAttrContextProp,
                                     cuFFTPlanCacheManager, cufft_plan_cache)
from ember.backends.cuda_libraries import (preferred_blas_library, preferred_linalg_library,
                                           preferred_rocm_fa_library)
from ember.backends.cuda_sdpa import (SDPAParams, can_use_cudnn_attention,
                                      can_use_efficient_attention, can_use_flash_attention,
                                      is_ck_sdpa_available)

__all__ = ["matmul", "is_built", "enable_flash_sdp", "flash_sdp_enabled",
           "enable_mem_efficient_sdp", "mem_efficient_sdp_enabled", "enable_math_sdp",
           "math_sdp_enabled", "enable_cudnn_sdp", "cudnn_sdp_enabled",
           "allow_fp16_bf16_reduction_math_sdp", "fp16_bf16_reduction_math_sdp_allowed",
           "sdp_kernel", "sdp_switches", "generic_sdp_allowed", "is_flash_attention_available",
           "cuBLASModule", "cufft_plan_cache", "cuFFTPlanCache", "cuFFTPlanCacheManager",
           "cuFFTPlanCacheAttrContextProp", "preferred_blas_library",
           "preferred_linalg_library", "preferred_rocm_fa_library", "SDPAParams",
           "can_use_flash_attention", "can_use_efficient_attention",
           "can_use_cudnn_attention", "is_ck_sdpa_available"]


def __getattr__(name):
    if name == "SDPBackend":            # ember.nn.attention imports this module
        from ember.nn.attention import SDPBackend
        return SDPBackend
    raise AttributeError(f"module 'ember.backends.cuda' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | {"SDPBackend"})


def is_built():
    """Whether ember can run on CUDA here: CuPy is installed (found without importing it;
    ``ember.cuda.is_available()`` also needs a GPU)."""
    return "cupy" in sys.modules or importlib.util.find_spec("cupy") is not None


class cuBLASModule:  # noqa: N801  (PyTorch's name)
    """``ember.backends.cuda.matmul``: cuBLAS's precision switches (``allow_tf32`` acts on a
    GPU; the others are remembered only)."""

    _REDUCED = ("allow_fp16_reduced_precision_reduction",
                "allow_bf16_reduced_precision_reduction")

    def __init__(self):
        object.__setattr__(self, "_flags", {name: True for name in self._REDUCED})
        self._flags["allow_fp16_accumulation"] = False

    def __getattr__(self, name):
        if name == "allow_tf32":
            return _precision.allow_tf32()
        if name == "fp32_precision":
            return _fp32_precision.get("cuda.matmul")
        if name in self._flags:
            return self._flags[name]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name, value):
        if name == "allow_tf32":
            _precision.set_allow_tf32(check_bool("set_allow_tf32_cublas", value))
        elif name == "fp32_precision":
            _fp32_precision.set_precision("cuda.matmul", value)
        elif name in self._REDUCED:
            self._flags[name] = _reduced_precision(name, value)
        elif name == "allow_fp16_accumulation":
            self._flags[name] = check_bool("set_allow_fp16_accumulation_cublas", value)
        else:
            raise AttributeError(f"Unknown attribute {name}")


def _reduced_precision(name, value):
    """A reduced-precision-reduction flag's value: a bool, or (allow, allow_splitk)."""
    if type(value) is bool:
        return value
    if isinstance(value, (tuple, list)) and value and all(type(v) is bool for v in value):
        if value[0] and len(value) > 1 and not value[1]:
            raise RuntimeError("allow_splitk=False is not supported when reduced precision "
                               "reductions are enabled")
        return value[0]
    raise TypeError(f"{name} expects a bool or a tuple/list of bools, but got {type(value)}")


matmul = cuBLASModule()

# --- scaled dot-product attention ------------------------------------------------------------

_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True,
        "fp16_bf16_reduction_math": False}


def enable_flash_sdp(enabled):
    """Allow or forbid the flash-attention kernel (ember's Triton kernel on CUDA)."""
    _SDP["flash"] = check_bool("set_sdp_use_flash", enabled)


def flash_sdp_enabled():
    """Whether the flash-attention kernel may be used (True by default)."""
    return _SDP["flash"]


def enable_mem_efficient_sdp(enabled):
    """Allow or forbid the memory-efficient attention kernel (ember has none: no effect)."""
    _SDP["mem_efficient"] = check_bool("set_sdp_use_mem_efficient", enabled)


def mem_efficient_sdp_enabled():
    """Whether the memory-efficient attention kernel may be used (True by default)."""
    return _SDP["mem_efficient"]


def enable_math_sdp(enabled):
    """Allow or forbid the math (generic) attention path (remembered; ember still uses it
    where the flash kernel does not apply)."""
    _SDP["math"] = check_bool("set_sdp_use_math", enabled)


def math_sdp_enabled():
    """Whether the math attention path may be used (True by default)."""
    return _SDP["math"]


def enable_cudnn_sdp(enabled):
    """Allow or forbid the cuDNN attention kernel (ember has no cuDNN: no effect)."""
    _SDP["cudnn"] = check_bool("set_sdp_use_cudnn", enabled)


def cudnn_sdp_enabled():
    """Whether the cuDNN attention kernel may be used (True by default)."""
    return _SDP["cudnn"]


def allow_fp16_bf16_reduction_math_sdp(enabled):
    """Allow the math attention path to reduce in float16/bfloat16 (no effect: ember's
    reduces in float32)."""
    _SDP["fp16_bf16_reduction_math"] = check_bool("allow_fp16_bf16_reduction_math_sdp",
                                                  enabled)


def fp16_bf16_reduction_math_sdp_allowed():
    """Whether the math attention path may reduce in float16/bfloat16 (False by default)."""
    return _SDP["fp16_bf16_reduction_math"]


def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True,
               enable_cudnn=True):
    """Deprecated: set the four attention switches inside a ``with`` block and restore
    them after it."""
    warnings.warn("`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this "
                  "context manager will be removed. Please see "
                  "`torch.nn.attention.sdpa_kernel()` for the new context manager, with "
                  "updated signature.", FutureWarning, stacklevel=2)
    return sdp_switches({"flash": bool(enable_flash), "math": bool(enable_math),
                          "mem_efficient": bool(enable_mem_efficient),
                          "cudnn": bool(enable_cudnn)})


def generic_sdp_allowed(on_cpu):
    """Whether the switches let ember's generic attention path run: on the CPU it computes
    what PyTorch's flash and math kernels do there; on a GPU it stands in for the math,
    memory-efficient and cuDNN kernels (ember has only the flash one of its own)."""
    if on_cpu:
        return _SDP["flash"] or _SDP["math"]
    return _SDP["math"] or _SDP["mem_efficient"] or _SDP["cudnn"]


def is_flash_attention_available():
    """Whether ember's flash-attention kernel can be built here (CuPy and Triton present)."""
    return is_built() and importlib.util.find_spec("triton") is not None


@contextlib.contextmanager
def sdp_switches(wanted):
    """Set the attention switches in ``wanted`` inside a ``with`` block, restoring all after."""
    saved = dict(_SDP)
    _SDP.update(wanted)
    try:
        yield {}
    finally:
        _SDP.update(saved)
