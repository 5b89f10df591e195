"""NumPy-style arrangements: atleast_1d/2d/3d, rot90, hsplit/vsplit/dsplit, column_stack,
diagflat, type_as (compositions), and block_diag (an op).
"""

from ember._creation import empty
from ember._tensor import Tensor
from ember.ops._dims import int_param, int_sequence, invalid_combination, is_index, wrap_dim
from ember.ops._promotion import BINARY
from ember.ops._registry import op
from ember.ops._scalars import int_arg
from ember.ops.grids import _tensor_arg, _tensor_list
from ember.ops.join import _atleast, _check_list, cat, tensor_split
from ember.ops.slicing import diag

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "column_stack", "diagflat",
           "dsplit", "hsplit", "rot90", "type_as", "vsplit"]


# --- atleast_1d/2d/3d -------------------------------------------------------------------------

def _atleast_nd(ndim):
    def atleast(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], Tensor):
            return _atleast(tensors[0], ndim)
        return tuple(_atleast(t, ndim) for t in _tensor_list(tensors))
    atleast.__name__ = atleast.__qualname__ = f"atleast_{ndim}d"
    atleast.__doc__ = (f"The tensor (or a tuple of the tensors) with size-1 dims added to reach "
                       f"{ndim} dims, as numpy.atleast_{ndim}d; tensors with enough dims are "
                       f"returned as they are.")
    return atleast


atleast_1d = _atleast_nd(1)
atleast_2d = _atleast_nd(2)
atleast_3d = _atleast_nd(3)


# --- rot90 ------------------------------------------------------------------------------------

def rot90(input, k=1, dims=(0, 1)):
    """A copy rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first
    towards the second."""
    _tensor_arg(input, "rot90")
    k = int_param(k, ("rot90", "k", 1))
    dims = int_sequence(dims, ("rot90", "dims", 2), scalar=False)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = wrap_dim(dims[0], input.ndim), wrap_dim(dims[1], input.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} "
                           f"and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip((d0, d1))
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


# --- hsplit, vsplit, dsplit -------------------------------------------------------------------

def _sections(value):
    """An int from an int or a 0-d integer tensor (``hsplit(x, torch.tensor(2))``)."""
    if isinstance(value, Tensor) and value.ndim == 0 and not value.is_floating_point():
        return int(value)
    return value


_UNSET = object()


def _split_choice(name, got, indices_or_sections, sections, indices, method):
    """The split argument passed positionally or as ``sections=`` / ``indices=`` (PyTorch's
    two overloads); a missing one or a type the keyword does not take raises as PyTorch."""
    given = [v for v in (indices_or_sections, sections, indices) if v is not _UNSET]
    ok = len(given) == 1 and (
        (sections is _UNSET or isinstance(_sections(sections), int))
        and (indices is _UNSET or isinstance(indices, (tuple, list))))
    if ok:
        return given[0]
    lead = "" if method else "Tensor input, "
    raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), but "
                    f"expected one of:\n * ({lead}int sections)\n * ({lead}tuple of ints "
                    f"indices)\n")


def _got(input, args, kwargs):
    """PyTorch's ``got (...)`` summary of the arguments of a failed call."""
    parts = ([] if input is _UNSET else [type(input).__name__])
    parts += [type(a).__name__ for a in args]
    parts += [f"{k}={type(v).__name__}" for k, v in kwargs.items() if v is not _UNSET]
    return ", ".join(parts)


def _directional_split(name, ndim_needed, dim_of):
    def split(input, indices_or_sections=_UNSET, *, sections=_UNSET, indices=_UNSET):
        _tensor_arg(input, name)
        if sections is not _UNSET or indices is not _UNSET or indices_or_sections is _UNSET:
            got = _got(input, () if indices_or_sections is _UNSET else (indices_or_sections,),
                       {"sections": sections, "indices": indices})
            indices_or_sections = _split_choice(name, got, indices_or_sections, sections,
                                                indices, method=False)
        if input.ndim < ndim_needed:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {ndim_needed} "
                               f"dimension, but got a tensor with {input.ndim} dimensions!")
        d = dim_of(input.ndim)
        arg = _sections(indices_or_sections)
        if isinstance(arg, (tuple, list)):
            indices = [int_arg(i, name, "indices") for i in arg]
            return tensor_split(input, indices, d)
        if not is_index(arg):           # no overload takes it (a float, a bool)
            raise invalid_combination(name, (arg,), kind="function")
        sections = arg.__index__()
        n = input.shape[d]
        if sections == 0 or n % sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the "
                               f"size of the dimension {n} is not divisible by the split_size "
                               f"{sections}!")
        return tensor_split(input, sections, d)

    def method(self, *indices_or_sections, sections=_UNSET, indices=_UNSET):
        if sections is not _UNSET or indices is not _UNSET or not indices_or_sections:
            got = _got(_UNSET, indices_or_sections, {"sections": sections, "indices": indices})
            arg = _split_choice(name, got, indices_or_sections or _UNSET, sections, indices,
                                method=True)
        else:
            arg = (indices_or_sections[0] if len(indices_or_sections) == 1
                   else indices_or_sections)
        return split(self, arg)
    split.__name__ = split.__qualname__ = method.__name__ = name
    split.__doc__ = method.__doc__ = (
        f"Views of the tensor split along dim {dim_of(3)}"
        + (" (dim 0 for 1-D tensors)" if name == "hsplit" else "")
        + ": into ``sections`` equal pieces, or at ``indices``.")
    return split, method


hsplit, _hsplit_method = _directional_split("hsplit", 1, lambda ndim: 1 if ndim > 1 else 0)
vsplit, _vsplit_method = _directional_split("vsplit", 2, lambda ndim: 0)
dsplit, _dsplit_method = _directional_split("dsplit", 3, lambda ndim: 2)


# --- column_stack, block_diag, diagflat, type_as ----------------------------------------------

def column_stack(tensors, *, out=None):
    """The tensors joined column-wise; 0-d and 1-D tensors become columns first."""
    tensors = _tensor_list(_check_list(tensors, "column_stack"), unpack=False)
    return cat([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors], 1, out=out)


def _matrix_shape(shape):
    """The shape block_diag gives a block: 0-d is 1 x 1, 1-D is one row."""
    return tuple(shape) if len(shape) == 2 else (1, shape[0] if shape else 1)


@op("block_diag(*tensors)", inputs=("tensors*",), promote=BINARY, upcast=False, scalars=False,
    out=False, method=False, saves_inputs=False)
def block_diag(xp, tensors):
    """The block-diagonal matrix of the tensors (0-d and 1-D ones as one-row blocks)."""
    for i, a in enumerate(tensors):
        if a.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {a.ndim} dimensions")
    shapes = [_matrix_shape(a.shape) for a in tensors]
    out = xp.zeros((sum(s[0] for s in shapes), sum(s[1] for s in shapes)),
                   dtype=tensors[0].dtype)
    r = c = 0
    for a, (h, w) in zip(tensors, shapes):
        out[r:r + h, c:c + w] = a.reshape(h, w)
        r, c = r + h, c + w
    return out


@block_diag.derivative
def _(grad, tensors):
    grads, r, c = [], 0, 0
    for t in tensors:
        h, w = _matrix_shape(t.shape)
        grads.append(grad[r:r + h, c:c + w].reshape(t.shape))
        r, c = r + h, c + w
    return (grads,)


def _block_diag(*tensors):
    """The block-diagonal matrix of the tensors (0-d and 1-D ones as one-row blocks)."""
    tensors = _tensor_list(tensors, unpack=False)
    if not tensors:
        return empty((1, 0))
    return block_diag(*tensors)


def diagflat(input, offset=0):
    """The matrix with the flattened ``input`` on diagonal ``offset``."""
    _tensor_arg(input, "diagflat")
    return diag(input.reshape(-1), int_param(offset, ("diagflat", "offset", 1)))


def type_as(self, other):
    """This tensor converted to ``other``'s dtype (itself when it already has it)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"type_as(): argument 'other' (position 1) must be Tensor, not "
                        f"{type(other).__name__}")
    return self.to(other)


_block_diag.__name__ = _block_diag.__qualname__ = "block_diag"
Tensor.rot90 = rot90
Tensor.hsplit = _hsplit_method
Tensor.vsplit = _vsplit_method
Tensor.dsplit = _dsplit_method
Tensor.diagflat = diagflat
Tensor.type_as = type_as

ALIASES = {"row_stack": "vstack"}
PUBLIC = {"atleast_1d": atleast_1d, "atleast_2d": atleast_2d, "atleast_3d": atleast_3d,
          "rot90": rot90, "hsplit": hsplit, "vsplit": vsplit, "dsplit": dsplit,
          "column_stack": column_stack, "block_diag": _block_diag, "diagflat": diagflat}
