"""NumPy-style arrangements: atleast_1d/2d/3d, rot90, column_stack, diagflat, type_as
(compositions), block_diag (an op), and hsplit/vsplit/dsplit (from ``directional_split``).
"""

from ember._creation import empty
from ember._tensor import Tensor
from ember.ops._dims import int_param, int_sequence, wrap_dim
from ember.ops._promotion import BINARY
from ember.ops._registry import REGISTRY, op
from ember.ops.directional_split import METHODS, dsplit, hsplit, vsplit
from ember.ops.grids import _tensor_arg, _tensor_list
from ember.ops.join import _atleast, _check_list, cat
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

@op("rot90(input, k=1, dims=(0, 1))", saves_inputs=False)
def rot90(xp, x, k, dims):
    """A copy rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first
    towards the second."""
    k = int_param(k, ("rot90", "k", 1))
    dims = int_sequence(dims, ("rot90", "dims", 2), scalar=False)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    d0, d1 = wrap_dim(dims[0], x.ndim), wrap_dim(dims[1], x.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} "
                           f"and dim1 = {dims[1]}")
    flip = REGISTRY["flip"].forward
    k %= 4
    if k == 1:      # PyTorch's layouts: a flip (laid as the input) transposed, or a flip
        return flip(xp, x, (d1,)).swapaxes(d0, d1)
    if k == 2:
        return flip(xp, x, (d0, d1))
    if k == 3:
        return flip(xp, x, (d0,)).swapaxes(d0, d1)
    return x.copy()                     # (a row-major clone)


@rot90.derivative
def _(grad, x, k, dims):
    return grad.rot90(-int_param(k, ("rot90", "k", 1)), dims)


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
for _name, _method in METHODS.items():
    setattr(Tensor, _name, _method)
Tensor.diagflat = diagflat
Tensor.type_as = type_as

ALIASES = {"row_stack": "vstack"}
PUBLIC = {"atleast_1d": atleast_1d, "atleast_2d": atleast_2d, "atleast_3d": atleast_3d,
          "hsplit": hsplit, "vsplit": vsplit, "dsplit": dsplit,
          "column_stack": column_stack, "block_diag": _block_diag, "diagflat": diagflat}
