"""PyTorch's checks and wording for the ``index_put`` arguments users give (ops/indexing.py)."""

from ember import _dtype as D
from ember._tensor import Tensor


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
