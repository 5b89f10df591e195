"""PyTorch's checks and wording for the ``index_put`` arguments users give, and for
masked_scatter's (ops/indexing.py)."""

import warnings

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember._warn import outside_level


def check_user_indices(x, indices):
    """PyTorch's parser's check of ``index_put``'s indices (Tensors only, named as the
    method's argument 0 or the function's argument 1), then their count."""
    for pos, entry in enumerate(indices):
        if not isinstance(entry, Tensor):
            from ember.ops._call_site import call_site
            site = call_site()
            where = 0 if site is not None and site.kind in ("method", "inplace") else 1
            raise TypeError(f"expected Tensor as element {pos} in argument {where}, but got "
                            f"{type(entry).__name__}")
    if len(indices) > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim} "
                         f"(got {len(indices)})")


def dim_out_of_range(ndim, dim):
    return IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                      f"{max(ndim, 1) - 1}], but got {dim})")


def type_string(dtype):
    """How PyTorch's messages name a CPU tensor's type: its legacy class where it has one
    (``torch.FloatTensor``), else ``CPUComplexFloatType``."""
    name = dtype._legacy
    return f"torch.{name}" if dtype in _LEGACY_CLASSES else f"CPU{name[:-len('Tensor')]}Type"


_LEGACY_CLASSES = frozenset({D.float32, D.float64, D.float16, D.uint8, D.int8, D.int16, D.int32,
                             D.int64})


def check_masked_scatter(x, mask, source):
    """masked_scatter's checks of the dtypes (backend arrays), in PyTorch's order: after the
    shapes' (``mask`` None: the source's alone)."""
    if source.dtype != x.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got{D.FROM_NUMPY[x.dtype]._torch_name} and "
                           f"{D.FROM_NUMPY[source.dtype]._torch_name}")
    if mask is not None and mask.dtype != np.bool_:
        if mask.dtype == np.uint8:      # PyTorch warns (every time) before it refuses
            warnings.warn("masked_scatter_ received a mask with dtype torch.uint8, this "
                          "behavior is now deprecated,please use a mask with dtype torch.bool "
                          "instead.", UserWarning, stacklevel=outside_level())
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {D.FROM_NUMPY[mask.dtype]._torch_name}")


def check_expands(mask, shape):
    """PyTorch's errors of an in-place op that expands ``mask`` (a backend array) to its
    tensor's ``shape``."""
    name = D.FROM_NUMPY[mask.dtype]._torch_name
    if mask.ndim > len(shape):
        raise RuntimeError(f"expand(CPU{name}Type{{{list(mask.shape)}}}, size={list(shape)}): "
                           f"the number of sizes provided ({len(shape)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({mask.ndim})")
    for i in range(1, mask.ndim + 1):       # the innermost mismatch first
        if mask.shape[-i] not in (1, shape[-i]):
            raise RuntimeError(f"The expanded size of the tensor ({shape[-i]}) must match the "
                               f"existing size ({mask.shape[-i]}) at non-singleton dimension "
                               f"{len(shape) - i}.  Target sizes: {list(shape)}.  Tensor "
                               f"sizes: {list(mask.shape)}")
