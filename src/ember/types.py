"""The type aliases PyTorch annotates its API with (``torch.types``): programs import them for
their own annotations (``from torch.types import Device, Number``)."""

import os
from collections.abc import Sequence
from typing import IO, TypeAlias, Union

from ember._api import layout as _layout  # noqa: F401
from ember._device import device as _device
from ember._dtype import dtype as _dtype  # noqa: F401
from ember._storage import UntypedStorage as Storage
from ember._symbolic import SymBool, SymFloat, SymInt
from ember._tensor import Size, Tensor

__all__ = ["Number", "Device", "FileLike", "IntLikeType", "FloatLikeType", "BoolLikeType",
           "PySymType", "Storage", "Tensor", "SymInt", "SymFloat", "SymBool", "Size",
           "py_sym_types"]

_bool = bool
_int = int
_float = float
_complex = complex
_str = str
_bytes = bytes

_TensorOrTensors: TypeAlias = Union[Tensor, Sequence[Tensor]]
_TensorOrOptionalTensors: TypeAlias = Union[Tensor, Sequence[Union[Tensor, None]]]
_size: TypeAlias = Union[Size, list[int], tuple[int, ...]]
_symsize: TypeAlias = Union[Size, Sequence[Union[int, SymInt]]]

IntLikeType: TypeAlias = Union[int, SymInt]
FloatLikeType: TypeAlias = Union[float, SymFloat]
BoolLikeType: TypeAlias = Union[bool, SymBool]
py_sym_types = (SymInt, SymFloat, SymBool)
PySymType: TypeAlias = Union[SymInt, SymFloat, SymBool]

Number: TypeAlias = Union[int, float, bool]
_Number = (int, float, bool)          # for isinstance checks
FileLike: TypeAlias = Union[str, os.PathLike[str], IO[bytes]]
Device: TypeAlias = Union[_device, str, int, None]
