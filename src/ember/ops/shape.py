"""Shape ops that return views: view, reshape, flatten, expand, squeeze, permute, movedim, ...

The ops that join or split tensors live in join.py, the ones that take slices and
diagonals in slicing.py, and the copying rearrangements (flip, roll, repeat) in reorder.py;
their aliases and composite functions are collected here, where ops/__init__.py looks.

squeeze, unsqueeze, t and transpose have in-place forms (``x.t_()``) that change the tensor's
own shape and strides, not its values: see NOTE [In-place view ops] in _inplace.py.
"""

import math
import operator
import warnings

import numpy as np

from ember import _dtype as D
from ember._memory_format import contiguous_format, restrided
from ember._tensor import Size, Tensor, _make
from ember._transform_births import STATE as _BIRTHS, refuse_captured
from ember.backend import broadcast_view, xp_of
from ember.ops._dims import (check_overloaded_dims, int_sequence, invalid_combination,
                             unpack_error, wrap_dim)
from ember.ops._recording import _record
from ember.ops._registry import REGISTRY, broadcast_message, op, varargs


def infer_shape(shape, numel):
    """Resolve one ``-1`` in ``shape`` and check the element count."""
    shape = [int(s) for s in shape]
    unknown = None
    for i, s in enumerate(shape):
        if s == -1:
            if unknown is not None:
                raise RuntimeError("only one dimension can be inferred")
            unknown = i
        elif s < 0:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {shape}")
    known = math.prod(s for s in shape if s != -1)
    if unknown is not None:
        if known == 0 and numel == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {shape} because "
                               f"the unspecified dimension size -1 can be any value and is "
                               f"ambiguous")
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
        shape[unknown] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
    return tuple(shape)


def _check_shape(shape, x, arg):
    """What NumPy does not check: only -1 means "infer" (NumPy takes any negative size), and
    sizes are ints; ``arg`` names the argument in a TypeError, as for ``wrap_dim``. A bare
    number (the function form) is no shape, as in PyTorch."""
    if type(shape) is not tuple:            # the function form's list, or a bad value
        shape = int_sequence(shape, arg, scalar=False)
    if not shape:
        return
    try:
        too_low = min(shape) < -1
    except (TypeError, RuntimeError):       # (4, "a"), an object with __index__, a tensor
        too_low = min(int_sequence(shape, arg)) < -1
    if too_low:
        infer_shape(int_sequence(shape, arg), x.size)


def _int_shape(shape, x, arg):
    """``shape`` (which NumPy refused) as plain ints, once PyTorch's checks of it pass: the
    parser reads bools after the first element and objects with ``__index__`` as ints."""
    shape = int_sequence(shape, arg)
    infer_shape(shape, x.size)              # PyTorch's words for a size that does not fit
    return shape


def int_tuple(value, where="size"):
    """An int or a sequence of ints as a tuple of ints. An element that is not an integer
    (a float would be truncated) raises PyTorch's TypeError, naming the argument: ``where``
    is its op and name, as in ``"expand(): argument 'size'"``."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    try:
        return tuple(map(operator.index, items))
    except TypeError:
        pos, bad = next((i, v) for i, v in enumerate(items, 1)
                        if not hasattr(type(v), "__index__"))
        raise TypeError(unpack_error(where, pos, bad)) from None


def wrap_dim_of_tensor(dim, ndim):
    """``wrap_dim`` for ops that need at least one dimension and name the dim as given in
    the 0-dim error (roll)."""
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return wrap_dim(dim, ndim)


def distinct_dims(dims, ndim, where="argument 'dim'"):
    """Wrapped ``dims`` (an int or a sequence), each at most once; ``where`` as for
    ``int_tuple``."""
    wrapped = []
    for d in int_tuple(dims, where):    # one by one: a repeat before a later dim's range error
        d = wrap_dim(d, ndim)
        if d in wrapped:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        wrapped.append(d)
    return tuple(wrapped)


_VIEW_SIZE = ("view", "size", 1)
_RESHAPE_SHAPE = ("reshape", "shape", 1)


def _unit_strides(xp, x, out):
    """``out``, a view of ``x`` reshaped, with PyTorch's strides for its size-1 dims, where
    NumPy's differ: the last dim's is ``x``'s last stride (1 for a 0-dim ``x``); any other's,
    the next dim's stride times its size (``ones(2, 5)[:, 1:2].view(1, 2, 1, 1)``: (10, 5, 1,
    1), not NumPy's (10, 5, 5, 5)).

    NumPy's differ only in the size-1 dims after the last larger one, where ``x``'s last dim
    has size 1 too (PyTorch gives them that dim's stride, NumPy the last larger dim's or the
    item size), and for ``x``'s own shape (NumPy keeps ``x``'s strides, PyTorch recomputes)."""
    shape = out.shape
    if shape == x.shape:
        if 1 not in shape or x.base is None and x.flags.c_contiguous:    # (NumPy's own
            return out                                                  # layout: PyTorch's)
    elif shape[-1:] != (1,) or x.shape[-1:] != (1,) or out.strides[-1] == x.strides[-1]:
        return out
    if not out.size:
        return out
    if shape != x.shape:        # the size-1 dims after the last larger one: x's last stride
        end = len(shape) - 1
        while end and shape[end - 1] == 1:
            end -= 1
        return restrided(xp, out, shape, out.strides[:end] + x.strides[-1:] * (len(shape) - end))
    strides = list(out.strides)
    inner = x.strides[-1]       # (x has dims here)
    for d in range(out.ndim - 1, -1, -1):
        if shape[d] == 1:
            strides[d] = inner
        inner = strides[d] * shape[d]
    strides = tuple(strides)
    return out if strides == out.strides else restrided(xp, out, shape, strides)


def _unit_strides_if_view(xp, x, out):
    """``_unit_strides`` for a reshape of ``x``, which may have copied it instead."""
    if 1 not in out.shape:
        return out
    base = out.base
    return out if base is None or base is not x and base is not x.base else _unit_strides(
        xp, x, out)


@op("view(input, size)", view=True, saves_inputs=False, method_varargs="size")
def view(xp, x, shape):
    """The same data with another shape; never copies (fails where strides don't allow)."""
    _check_shape(shape, x, _VIEW_SIZE)
    if not x.size:      # (NumPy recomputes an empty view's strides for a -1 it infers)
        shape = infer_shape(int_sequence(shape, _VIEW_SIZE), 0)
    out = x.view()
    try:
        try:
            out.shape = shape           # NumPy refuses instead of copying
        except (ValueError, TypeError):
            out.shape = _int_shape(shape, x, _VIEW_SIZE)
    except AttributeError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride "
                           "(at least one dimension spans across two contiguous subspaces). "
                           "Use .reshape(...) instead.") from None
    return _unit_strides(xp, x, out)


@view.derivative
def _(grad, x, shape):
    return grad.reshape(x.shape)


@op("reshape(input, shape)", view="maybe", saves_inputs=False, method_varargs="shape")
def reshape(xp, x, shape):
    """The same data with another shape: a view when possible, else a copy."""
    _check_shape(shape, x, _RESHAPE_SHAPE)
    if not x.size:      # (as view's)
        shape = infer_shape(int_sequence(shape, _RESHAPE_SHAPE), 0)
    try:
        out = x.reshape(shape)          # NumPy checks the rest of what PyTorch checks
    except (ValueError, TypeError):
        out = x.reshape(_int_shape(shape, x, _RESHAPE_SHAPE))
    return _unit_strides_if_view(xp, x, out)


@reshape.derivative
def _(grad, x, shape):
    return grad.reshape(x.shape)


@op("_unsafe_view(input, size)", method=False, saves_inputs=False,
    grad_fn_name="UnsafeViewBackward0")
def _unsafe_view(xp, x, size):
    """``input`` viewed as ``size``, but as a tensor of its own, not a view (PyTorch's
    ``_unsafe_view``, which ends a reshape that copies: only for a fresh input)."""
    return view.forward(xp, x, size)


@_unsafe_view.derivative
def _(grad, x, size):
    return grad.reshape(x.shape)


def _copying_reshape(x, reshaped):
    """PyTorch's graph of a reshape that must copy, ``reshaped`` its forward's result: a
    contiguous clone (CloneBackward0) reshaped by ``_unsafe_view`` (UnsafeViewBackward0),
    both recorded here on that one copy (no further dispatch: a reshape of transposed heads
    runs in every attention block); NotImplemented where strides allowed a view."""
    a = x._data
    owner = reshaped.base               # (NumPy and CuPy point a view at the memory's owner)
    if owner is not None and (owner is a or owner is a.base):
        return NotImplemented
    copy = _make(reshaped.reshape(a.shape))
    _record(REGISTRY["clone"], (x,), None, (contiguous_format,), copy)
    out = _make(reshaped)
    _record(_unsafe_view, (copy,), None, (reshaped.shape,), out)
    return out


@reshape.composed_when_recording
def _(inputs, params):
    x = inputs[0]
    if x._data.flags.c_contiguous:
        return NotImplemented
    return _copying_reshape(x, reshape.forward(xp_of(x._data), x._data, params[0]))


def _flat_shape(shape, start_dim, end_dim):
    start = wrap_dim(start_dim, len(shape), ("flatten", "start_dim", 1))
    end = wrap_dim(end_dim, len(shape), ("flatten", "end_dim", 2))
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if not shape:
        return (1,)
    return shape[:start] + (math.prod(shape[start:end + 1]),) + shape[end + 1:]


@op("flatten(input, start_dim=0, end_dim=-1)", view="maybe", saves_inputs=False)
def flatten(xp, x, start_dim, end_dim):
    """Dims ``start_dim`` to ``end_dim`` merged into one (a view when possible)."""
    return xp.reshape(x, _flat_shape(x.shape, start_dim, end_dim))


@flatten.derivative
def _(grad, x, start_dim, end_dim):
    return grad.reshape(x.shape)


@flatten.composed_when_recording
def _(inputs, params):
    x = inputs[0]
    a = x._data
    if a.flags.c_contiguous:
        return NotImplemented
    return _copying_reshape(x, a.reshape(_flat_shape(a.shape, *params)))


@flatten.returns_input_when
def _(x, params):
    """A flatten of one dim (``start_dim`` and ``end_dim`` naming the same one) is the input
    itself in PyTorch; a 0-dim tensor's is a view of shape (1,)."""
    start, end = params
    n = x._data.ndim
    if not n or type(start) is bool or type(end) is bool:   # (bools: the op raises)
        return False
    try:                                # a NumPy integer or 0-dim tensor names a dim too
        start, end = operator.index(start), operator.index(end)
    except TypeError:
        return False
    start += n if start < 0 else 0
    end += n if end < 0 else 0
    return start == end and 0 <= start < n


@op("unflatten(input, dim, sizes)", view="maybe", saves_inputs=False)
def unflatten(xp, x, dim, sizes):
    """Dim ``dim`` split into several dims of the given ``sizes`` (one may be -1)."""
    d = wrap_dim(dim, x.ndim, ("unflatten", "dim", 1))
    if x.ndim == 0:
        # PyTorch wraps this IndexError into a RuntimeError, for unflatten alone
        raise RuntimeError(f"unflatten got an unexpected error:\nDimension specified as {d} "
                           f"but tensor has no dimensions")
    sizes = list(int_sequence(sizes, ("unflatten", "sizes", 2)))
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = x.shape[d]
    known = math.prod(s for s in sizes if s != -1)
    inferred = -1 in sizes and not (known == 0 and n == 0) and sizes.count(-1) == 1
    if (inferred and (known == 0 or n % known)) or (-1 not in sizes and known != n):
        raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size "
                           f"of dim {d} ({n}) in the input tensor")
    try:
        inner = infer_shape(sizes, n)
    except RuntimeError as e:       # -1 beside a 0 size: as ambiguous as in reshape
        raise RuntimeError(f"unflatten got an unexpected error:\n{e}") from None
    return _unit_strides_if_view(xp, x, x.reshape(x.shape[:d] + inner + x.shape[d + 1:]))


@unflatten.derivative
def _(grad, x, dim, sizes):
    return grad.reshape(x.shape)


@op("expand(input, size)", view=True, saves_inputs=False, method_varargs="size",
    method=True)
def expand(xp, x, size):
    """A broadcast view with ``size`` (-1 keeps a dim); adds no memory."""
    if not x.ndim and type(size) is Size and (not size or min(size) >= 0):
        return broadcast_view(xp, x, size)     # a full reduction's backward: nothing to check
    size = int_sequence(size, ("expand", "size", 1))
    if len(size) < x.ndim:
        raise RuntimeError(f"expand(ember.{D.FROM_NUMPY[x.dtype]._legacy}{{{list(x.shape)}}}, "
                           f"size={list(size)}): the number of sizes provided ({len(size)}) "
                           f"must be greater or equal to the number of dimensions in the tensor "
                           f"({x.ndim})")
    lead = len(size) - x.ndim
    if size[lead:] == x.shape and (not lead or min(size[:lead]) >= 0):
        # the common call: leading dims added, the others kept (nothing to check or infer)
        strides = _expanded_strides(size, lead, x.strides)
        out = broadcast_view(xp, x, size, strides)
        return out if out.strides == strides else restrided(xp, out, size, strides)
    target = []
    # PyTorch checks from the last dim back, so the first error reported is the innermost one.
    for i in reversed(range(len(size))):
        s = size[i]
        if i < lead:
            if s < 0:
                raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            target.append(s)
            continue
        have = x.shape[i - lead]
        if s == -1:
            s = have
        elif have != s and have != 1 or s < 0:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({have}) at non-singleton dimension {i}.  Target sizes: "
                               f"{list(size)}.  Tensor sizes: {list(x.shape)}")
        target.append(s)
    target = tuple(reversed(target))
    # NumPy gives every size-1 dim stride 0; PyTorch only the dims it expands
    strides = _expanded_strides(target, lead, x.strides if 1 not in x.shape else tuple(
        st if n == s else 0 for st, n, s in zip(x.strides, x.shape, target[lead:])))
    out = broadcast_view(xp, x, target, strides)
    return out if out.strides == strides else restrided(xp, out, target, strides)


def _expanded_strides(size, lead, inner):
    """The strides of an expanded view of ``size``: ``inner``, the kept dims' (0 where they
    repeat), after those of the ``lead`` dims put before them: 0, but for a dim of size 1,
    which PyTorch gives the extent of the dim after it (of a 0-dim input's, 0)."""
    if not inner or 1 not in size[:lead]:
        return (0,) * lead + inner
    strides = list(inner)
    extent = size[lead] * inner[0]
    for n in reversed(size[:lead]):
        step = extent if n == 1 else 0
        strides.insert(0, step)
        extent = n * step
    return tuple(strides)


@expand.derivative
def _(grad, x, size):
    from ember.autograd.graph import sum_to
    return sum_to(grad, x.shape)


@op("unsqueeze(input, dim)", view=True, saves_inputs=False, inplace=True)
def unsqueeze(xp, x, dim):
    """A view with a size-1 dim inserted at ``dim``, of PyTorch's stride there (that of the
    dims inside it: copies keep the strides of size-1 dims)."""
    d = wrap_dim(dim, x.ndim + 1, ("unsqueeze", "dim", 1))
    stride = x.itemsize if d == x.ndim else x.shape[d] * x.strides[d]
    strides = x.strides[:d] + (stride,) + x.strides[d:]
    # (NumPy's expand_dims is this reshape, after its argument checks)
    out = x.reshape(x.shape[:d] + (1,) + x.shape[d:]) if type(x) is np.ndarray else \
        xp.expand_dims(x, d)
    return out if out.strides == strides else restrided(xp, x, out.shape, strides)


@unsqueeze.derivative
def _(grad, x, dim):
    return grad.squeeze(wrap_dim(dim, x.ndim + 1))      # (SqueezeBackward1, as PyTorch's)


@op("squeeze(input, dim=None)", view=True, saves_inputs=False, inplace=True)
def squeeze(xp, x, dim):
    """A view without size-1 dims (only those in ``dim`` when given)."""
    if dim is None:
        return xp.squeeze(x)
    if type(dim) is not int:
        check_overloaded_dims(dim, "squeeze", (dim,))
    dims = tuple(d for d in distinct_dims(dim, x.ndim, "squeeze(): argument 'dim'")
                 if x.ndim and x.shape[d] == 1)
    return xp.squeeze(x, axis=dims) if dims else x.view()


def _squeezed_dims(shape, dim):
    """The dims ``squeeze(dim)`` removes from ``shape``, ascending."""
    if dim is None:
        return tuple(d for d, n in enumerate(shape) if n == 1)
    return tuple(sorted(d for d in distinct_dims(dim, len(shape), "squeeze(): argument 'dim'")
                        if shape and shape[d] == 1))


@reshape.named_by
def _(flat, params, out):
    # PyTorch views a contiguous input, aliases a strided one it can view (_reshape_alias),
    # and copies the rest
    if out._view is None:
        return "UnsafeViewBackward0"
    x = flat[0]
    return "ViewBackward0" if x._data.flags.c_contiguous or x.is_contiguous() else \
        "ReshapeAliasBackward0"


flatten.named_by(reshape.node_names)
unflatten.name_nodes("ViewBackward0")      # splitting a dim is always a view in PyTorch


@squeeze.named_by
def _(flat, params, out):                    # PyTorch's overloads: all dims, one dim, dims
    dim = params[0]
    return "SqueezeBackward0" if dim is None else \
        "SqueezeBackward2" if isinstance(dim, (tuple, list)) else "SqueezeBackward1"


@squeeze.derivative
def _(grad, x, dim):
    for d in _squeezed_dims(x.shape, dim):  # one unsqueeze per dim removed, as PyTorch's
        grad = grad.unsqueeze(d)
    return grad


@op("permute(input, dims)", view=True, saves_inputs=False, method_varargs="dims")
def permute(xp, x, dims):
    """A view with dims reordered."""
    dims = int_sequence(dims, ("permute", "dims", 1))
    if len(dims) != x.ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {x.ndim} is not equal to len(dims) = {len(dims)}")
    wrapped = [wrap_dim(d, x.ndim) for d in dims]
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return xp.transpose(x, wrapped)


@permute.derivative
def _(grad, x, dims):
    wrapped = [wrap_dim(d, x.ndim) for d in int_tuple(dims)]
    inverse = [0] * len(wrapped)
    for i, d in enumerate(wrapped):
        inverse[d] = i
    return grad.permute(inverse)


def _movedim_order(ndim, source, destination):
    if type(source) is not int or type(destination) is not int:
        if isinstance(source, (tuple, list)) != isinstance(destination, (tuple, list)):
            raise invalid_combination("movedim", (source, destination))  # int & int[] only
        for value, name in ((source, "source"), (destination, "destination")):
            check_overloaded_dims(value, "movedim", (source, destination), name)
    src = int_tuple(source, "movedim(): argument 'source'")
    dst = int_tuple(destination, "movedim(): argument 'destination'")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    for name, dims in (("source", src), ("destination", dst)):
        if len({wrap_dim(d, ndim) for d in dims}) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(dims)})")
    if ndim == 0:
        return ()
    moved = {wrap_dim(d, ndim) for d in src}
    order = [d for d in range(ndim) if d not in moved]
    for to, frm in sorted((wrap_dim(t, ndim), wrap_dim(f, ndim)) for f, t in zip(src, dst)):
        order.insert(to, frm)
    return tuple(order)


@op("movedim(input, source, destination)", view=True, saves_inputs=False,
    grad_fn_name="PermuteBackward0")
def movedim(xp, x, source, destination):
    """A view with dims ``source`` moved to positions ``destination``."""
    order = _movedim_order(x.ndim, source, destination)
    return xp.transpose(x, order)


@movedim.derivative
def _(grad, x, source, destination):
    return grad.movedim(destination, source)


@movedim.named_by
def _(flat, params, out):
    # PyTorch aliases a 0-dim tensor (there are no dims to permute)
    return "AliasBackward0" if out.ndim == 0 else "PermuteBackward0"


@op("transpose(input, dim0, dim1)", view=True, saves_inputs=False, inplace=True)
def transpose(xp, x, dim0, dim1):
    """A view with ``dim0`` and ``dim1`` swapped."""
    d0 = wrap_dim(dim0, x.ndim, ("transpose", "dim0", 1))
    d1 = wrap_dim(dim1, x.ndim, ("transpose", "dim1", 2))
    if x.ndim == 0:
        return x.view()
    return xp.swapaxes(x, d0, d1)


@transpose.derivative
def _(grad, x, dim0, dim1):
    return grad.transpose(dim0, dim1)


@op("t(input)", view=True, saves_inputs=False, inplace=True)
def t(xp, x):
    """The transpose of a tensor of at most 2 dims."""
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.T


@t.derivative
def _(grad, x):
    return grad.t()


# --- the transpose properties -----------------------------------------------------------------

def _identity_on_0d(name, hint):
    warnings.warn(f"Tensor.{name} is deprecated on 0-D tensors. {hint}", UserWarning,
                  stacklevel=3)


def _T(self):
    if self.ndim == 0:
        _identity_on_0d("T", "This function is the identity in these cases.")
    elif self.ndim > 2:                 # (1-D tensors pass silently, as in PyTorch)
        warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their "
                      "shape is deprecated and it will throw an error in a future release. "
                      "Consider `x.mT` to transpose batches of matrices or `x.permute(*ember."
                      "arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.",
                      UserWarning, stacklevel=2)
    return self.permute(tuple(reversed(range(self.ndim))))


def _mT(self):
    if self.ndim == 0:
        _identity_on_0d("mT", "This function is the identity in these cases.")
        return self                     # (itself, as PyTorch's: no view)
    if self.ndim == 1:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                           "Got 1-D tensor.")
    return self.transpose(-2, -1)


def _H(self):
    if self.ndim == 0:
        _identity_on_0d("H", "Consider using x.conj().")
        return self.conj()
    if self.ndim != 2:
        hint = ". For batches of matrices, consider using tensor.mH" if self.ndim > 2 else "."
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.ndim}-D tensor{hint}")
    return self.transpose(0, 1).conj()


def _mH(self):
    if self.ndim == 0:
        _identity_on_0d("mH", "Consider using x.conj().")
        return self.conj()
    if self.ndim == 1:
        raise RuntimeError("tensor.mH is only supported on matrices or batches of matrices. "
                           "Got 1-D tensor.")
    return self.transpose(-2, -1).conj()


def adjoint(input):
    """The conjugate transpose of the last two dims: a view (``mH``)."""
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {input.ndim}-D tensor.")
    return input.transpose(-2, -1).conj()


def swapaxes(input, axis0, axis1):
    """``transpose`` under NumPy's name, which takes NumPy's argument names."""
    if not isinstance(input, Tensor):
        raise TypeError(f"swapaxes(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return input.transpose(*_axes(axis0, axis1, "swapaxes", "function"))


def _swapaxes_method(self, axis0, axis1):
    """A view with ``axis0`` and ``axis1`` swapped (``transpose``)."""
    return self.transpose(*_axes(axis0, axis1, "swapaxes", "method"))


def _swapaxes_inplace(self, axis0, axis1):
    """Swap ``axis0`` and ``axis1`` of this tensor in place (``transpose_``)."""
    axes = _axes(axis0, axis1, "swapaxes_", "method")
    if _BIRTHS.levels:      # (named as PyTorch's, not transpose_'s: NOTE [Captured tensors])
        refuse_captured(self, "aten::swapaxes_")
    return self.transpose_(*axes)


def _axes(axis0, axis1, name, kind):
    """``axis0`` and ``axis1`` as ints, or PyTorch's TypeError naming them as ``swapaxes``
    names them (not as ``transpose``'s ``dim0`` and ``dim1``)."""
    from ember.ops._dims import int_param
    return (int_param(axis0, (name, "axis0", 1, kind), strict=True),
            int_param(axis1, (name, "axis1", 2, kind), strict=True))


_swapaxes_method.__name__ = _swapaxes_method.__qualname__ = "swapaxes"
_swapaxes_inplace.__name__ = _swapaxes_inplace.__qualname__ = "swapaxes_"
Tensor.swapaxes, Tensor.swapaxes_ = _swapaxes_method, _swapaxes_inplace
Tensor.adjoint = adjoint
Tensor.T = property(_T, doc="All dims reversed.")
Tensor.mT = property(_mT, doc="The last two dims swapped.")
Tensor.H = property(_H, doc="The conjugate transpose of a matrix.")
Tensor.mH = property(_mH, doc="The conjugate of mT.")


# --- composites: shapes taken from another tensor, broadcasting several -----------------------

def view_as(self, other):
    """This tensor viewed with ``other``'s shape."""
    return self.view(other.shape)


def reshape_as(self, other):
    """This tensor reshaped to ``other``'s shape."""
    return self.reshape(other.shape)


def expand_as(self, other):
    """This tensor expanded (broadcast, without copying) to ``other``'s shape."""
    return self.expand(other.shape)


Tensor.view_as = view_as
Tensor.reshape_as = reshape_as
Tensor.expand_as = expand_as


def ravel(input):
    """The elements as a contiguous 1-D tensor: a view when ``input`` is contiguous."""
    if not isinstance(input, Tensor):
        raise TypeError(f"ravel(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return input.contiguous().view(-1)


Tensor.ravel = ravel


def _size_arg(args, size):
    """``sum_to_size``'s size from ``(2, 3)``, ``((2, 3),)`` or ``size=(2, 3)``."""
    if args and size is not None:
        raise TypeError("sum_to_size() got multiple values for argument 'size'")
    if not args and size is None:
        raise TypeError('sum_to_size() missing 1 required positional arguments: "size"')
    size = varargs(args) if args else size
    if not isinstance(size, (tuple, list)):
        size = (size,)
    for s in size:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"sum_to_size(): argument 'size' (position 1) must be tuple of "
                            f"ints, not {type(s).__name__}")
    return tuple(s.__index__() for s in size)


def sum_to_size(self, *args, size=None):
    """This tensor summed down to ``size``, which must broadcast to its shape."""
    size = _size_arg(args, size)
    lead = self.ndim - len(size)
    if lead < 0 or any(s != n and s != 1 for s, n in zip(size, self.shape[lead:])):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                           f"{{{list(self.shape)}}}.")
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size)
                                      if s == 1 and self.shape[lead + i] != 1)
    if not dims:
        return self
    return self.sum(dims, keepdim=True).view(size)


Tensor.sum_to_size = sum_to_size


def _is_same_size(input, other, offset):
    for pos, (name, x) in enumerate((("input", input), ("other", other))):
        if not isinstance(x, Tensor):
            from ember._from_data import _tp_name      # (numpy.int8, as CPython's C API)
            raise TypeError(f"is_same_size(): argument '{name}' (position {pos + offset}) must "
                            f"be Tensor, not {_tp_name(x)}")
    return input.shape == other.shape


def is_same_size(input, other):
    """Whether the two tensors have the same shape."""
    return _is_same_size(input, other, 1)


def _is_same_size_method(self, other):
    return _is_same_size(self, other, 0)


_is_same_size_method.__doc__ = is_same_size.__doc__
_is_same_size_method.__name__ = "is_same_size"
_is_same_size_method.__qualname__ = "Tensor.is_same_size"
Tensor.is_same_size = _is_same_size_method


def broadcast_shapes(*shapes):
    """The shape that tensors of the given ``shapes`` broadcast to."""
    # (sized to the longest shape from the start: a mismatch's message shows the padded dims)
    result = [1] * max((1 if isinstance(s, int) else len(s) if isinstance(s, (tuple, list))
                        else 0 for s in shapes), default=0)
    for i, shape in enumerate(shapes):
        shape = int_tuple(shape, "broadcast_shapes(): argument 'shapes'")
        for k in range(1, len(shape) + 1):
            n = shape[-k]
            if k > len(result):
                result.insert(0, n)
            elif result[-k] == 1:
                result[-k] = n
            elif n != 1 and n != result[-k]:
                had = shapes[i] if isinstance(shapes[i], Size) else shape
                raise RuntimeError(f"Attempting to broadcast a dimension of length {n} at {-k}! "
                                   f"Mismatching argument at index {i} had {had}; but "
                                   f"expected shape should be broadcastable to {result}")
        if any(n < 0 for n in result):
            raise ValueError("Attempting to broadcast a dimension with negative length!")
    return Size(result)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views)."""
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(x).__name__}")
    try:
        shape = broadcast_shapes(*(x.shape for x in tensors))
    except RuntimeError:
        raise RuntimeError(broadcast_message([x.shape for x in tensors])) from None
    return tuple(x if x.shape == shape else x.expand(shape) for x in tensors)


from ember.ops import join, reorder, slicing  # noqa: E402,F401  (registers their ops)
from ember.ops import as_strided  # noqa: E402  (registers its ops)

ALIASES = {"swapdims": "transpose", "moveaxis": "movedim",
           "broadcast_to": "expand", "concat": "cat", "concatenate": "cat"}

PUBLIC = {"broadcast_shapes": broadcast_shapes, "broadcast_tensors": broadcast_tensors,
          "ravel": ravel, "is_same_size": is_same_size, "adjoint": adjoint,
          "swapaxes": swapaxes, **join.PUBLIC,
          **reorder.PUBLIC, **slicing.PUBLIC, **as_strided.PUBLIC}
