"""``ember.nn.attention``: which kernels ``F.scaled_dot_product_attention`` may use.

``sdpa_kernel`` sets the attention switches of ``ember.backends.cuda`` inside a ``with``
block. ember has two attention paths: its flash kernel (Triton, CUDA only) and the generic
one. On the CPU the generic path is what PyTorch's flash and math kernels both compute; on a
GPU it stands in for the math, memory-efficient and cuDNN kernels (see
``backends.cuda.generic_sdp_allowed``).
"""

import contextlib
import enum

from ember.backends import cuda as _cuda_switches
# (importable from here as from PyTorch's module, where they are not in __all__ either)
from ember.backends.cuda_sdpa import (SDPAParams, can_use_efficient_attention,  # noqa: F401
                                      can_use_flash_attention)
from ember.nn.attention._registry import (activate_flash_attention_impl,
                                          current_flash_attention_impl,
                                          list_flash_attention_impls,
                                          register_flash_attention_impl,
                                          restore_flash_attention_impl)

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS",
           "register_flash_attention_impl", "activate_flash_attention_impl",
           "list_flash_attention_impls", "current_flash_attention_impl",
           "restore_flash_attention_impl"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The attention kernels PyTorch names (``torch.nn.attention.SDPBackend``)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __str__(self):                  # printed by name, as PyTorch's (not as an int)
        return f"SDPBackend.{self.name}"

    __format__ = object.__format__


_SWITCH = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
           SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
           SDPBackend.CUDNN_ATTENTION: "cudnn"}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Allow only ``backends`` (one SDPBackend or a list) inside the ``with`` block.

    ``set_priority`` is accepted; ember tries its flash kernel first either way."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    if not (isinstance(backends, (list, tuple))
            and all(isinstance(b, SDPBackend) for b in backends)):
        raise AssertionError(f"Backend must be an instance of SDPBackend or a list of "
                             f"SDPBackend instances, got {type(backends).__name__}")
    wanted = {switch: backend in backends for backend, switch in _SWITCH.items()}
    with _cuda_switches.sdp_switches(wanted):
        yield
