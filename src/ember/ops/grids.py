"""Grids and index sets: meshgrid, cartesian_prod, combinations, tril_indices, triu_indices,
vander. All compose existing ops (views, stack, indexing, cumprod), so they are
differentiable through their parts."""

import itertools
import warnings

import numpy as np

from ember import _dtype as D
from ember._creation import _dtype_arg, check_requires_grad, ones, tensor
from ember._tensor import Tensor
from ember.ops._scalars import int_arg
from ember.ops.join import cat, stack
from ember._warn import user_level

__all__ = ["cartesian_prod", "combinations", "meshgrid", "tril_indices", "triu_indices",
           "vander"]


def _tensor_list(tensors, unpack=True):
    """``f(a, b)`` and (when ``unpack``) ``f([a, b])`` both mean the tensors a and b."""
    if unpack and len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    return tensors


def _tensor_arg(value, fname, name="input"):
    """PyTorch's TypeError for a non-tensor first argument."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{fname}(): argument '{name}' (position 1) must be Tensor, not "
                        f"{type(value).__name__}")


def meshgrid(*tensors, indexing=None):
    """Coordinate grids: the i-th output holds the i-th (1-D or 0-d) input expanded along
    dim i ("ij"), or with the first two dims swapped ("xy"); the outputs are views."""
    tensors = _tensor_list(tensors)
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=user_level(2))
        indexing = "ij"
    elif not isinstance(indexing, str):
        raise TypeError(f"meshgrid(): argument 'indexing' must be str, not "
                        f"{type(indexing).__name__}")
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors[1:]:
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
        if t.device != tensors[0].device:
            raise RuntimeError("meshgrid expects all tensors to have the same device")
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t}")
    position = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        position[0], position[1] = 1, 0
    shape = [0] * len(tensors)
    for i, t in enumerate(tensors):
        shape[position[i]] = t.numel()
    grids = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[position[i]] = -1
        grids.append(t.view(view).expand(shape))
    return tuple(grids)


def _need_vector(t):
    if t.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")


def cartesian_prod(*tensors):
    """Every tuple of one element from each 1-D tensor, as the rows of a matrix (in the
    order of nested loops); a single tensor is returned as it is."""
    tensors = _tensor_list(tensors, unpack=False)
    for t in tensors:
        _need_vector(t)
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.flatten() for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of the elements of a 1-D tensor, as the rows of a
    matrix (as itertools.combinations, or combinations_with_replacement)."""
    _tensor_arg(input, "combinations")
    _need_vector(input)
    r = int_arg(r, "combinations", "r", 2)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_empty(0)
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    index = np.fromiter(itertools.chain.from_iterable(pick(range(input.shape[0]), r)),
                        dtype=np.int64).reshape(-1, r)
    # a stack of the columns, as PyTorch's (a StackBackward0 node)
    return stack([input.index_select(0, tensor(index[:, k], device=input.device))
                  for k in range(r)], 1)


def _triangle_indices(name, lower):
    def indices(row, col, offset=0, *, dtype=D.int64, device=None, layout=None,
                pin_memory=False, requires_grad=False):
        check_requires_grad(requires_grad, name)
        row = int_arg(row, name, "row", 1)
        col = int_arg(col, name, "col", 2)
        offset = int_arg(offset, name, "offset", 3)
        dtype = D.int64 if dtype is None else _dtype_arg(name, dtype)
        for what, n in (("row", row), ("col", col)):
            if n < 0:
                raise RuntimeError(f"{what} must be non-negative, got{n}")
        if dtype not in (D.int32, D.int64):
            raise NotImplementedError(f"\"{name}\" not implemented for '{dtype._torch_name}'")
        rows, cols = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
        return tensor(np.stack([rows, cols]).astype(dtype.np), device=device,
                      requires_grad=requires_grad is True)
    indices.__name__ = indices.__qualname__ = name
    side = "lower" if lower else "upper"
    indices.__doc__ = (f"The (row, column) indices of the {side} triangle of a row x col "
                       f"matrix (from diagonal ``offset``) as a 2 x N tensor, row by row.")
    return indices


tril_indices = _triangle_indices("tril_indices", lower=True)
triu_indices = _triangle_indices("triu_indices", lower=False)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-D tensor: columns ``x ** (N-1), ..., x, 1`` (or
    increasing powers); integers and bool give int64."""
    _tensor_arg(x, "vander", "x")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else int_arg(N, "vander", "N")
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if x.dtype.category <= D.INTEGRAL:
        x = x.to(D.int64)
    first = ones((x.shape[0], min(n, 1)), dtype=x.dtype, device=x.device)
    if n <= 1:
        return first
    powers = cat([first, x.unsqueeze(1).expand(x.shape[0], n - 1)], 1).cumprod(1)
    return powers if increasing else powers.flip(1)


ALIASES = {}
PUBLIC = {"meshgrid": meshgrid, "cartesian_prod": cartesian_prod,
          "combinations": combinations, "tril_indices": tril_indices,
          "triu_indices": triu_indices, "vander": vander}
