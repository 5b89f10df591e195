"""Tensors shared with other array libraries through DLPack (``torch.utils.dlpack``)."""

import enum

from ember._creation import from_dlpack

__all__ = ["DLDeviceType", "from_dlpack", "to_dlpack"]


class DLDeviceType(enum.IntEnum):
    """DLPack's device type codes (what ``Tensor.__dlpack_device__`` returns first)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


def to_dlpack(tensor):
    """A DLPack capsule of ``tensor``'s memory, for a library that takes capsules."""
    return tensor.detach().__dlpack__()     # (PyTorch exports tensors that require grad)
