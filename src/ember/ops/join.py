"""Joining and splitting: cat, stack, hstack/vstack/dstack, split, chunk, unbind, tensor_split.

The split family returns tuples of views; their gradients concatenate the output gradients
(the engine passes zeros for outputs that got none).
"""

import operator

from ember import _dtype as D
from ember._creation import _tp_name, zeros
from ember._memory_format import _order_strides, laid_out, lay_out, restrided, suggested_order
from ember._storage_place import slice_along
from ember._tensor import Tensor
from ember.backend import xp_of
from ember.ops._dims import (check_overloaded_dims, int_param, int_sequence,
                             invalid_combination, is_index, type_name, wrap_dim,
                             wrap_dim_of_sized)
from ember.ops._promotion import BINARY, Policy
from ember.ops._arg_aliases import UNSET, alias_arg, numpy_names
from ember.ops._registry import REGISTRY, op

__all__ = ["cat", "chunk", "pad_along", "split", "stack", "tensor_split", "unbind",
           "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes"]


def _is_legacy_empty(shape):
    """cat skips 1-D empty tensors whatever the other inputs' shapes (as PyTorch does)."""
    return len(shape) == 1 and shape[0] == 0


def _cat_dim(shapes, dim):
    """The wrapped cat dim, checking ndims and sizes (a list of shapes); None when every
    input is skipped."""
    if () in shapes:
        raise RuntimeError(f"zero-dimensional tensor (at position {shapes.index(())}) cannot "
                           f"be concatenated")
    ref = d = None
    for i, shape in enumerate(shapes):
        if _is_legacy_empty(shape):
            continue
        if ref is None:
            ref = shape
            d = wrap_dim(dim, len(ref))
        elif shape != ref:          # (the comparisons below, for shapes that differ)
            if len(shape) != len(ref):
                raise RuntimeError(f"Tensors must have same number of dimensions: got "
                                   f"{len(ref)} and {len(shape)}")
            for k, (want, got) in enumerate(zip(ref, shape)):
                if k != d and want != got:
                    raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. "
                                       f"Expected size {want} but got size {got} for tensor "
                                       f"number {i} in the list.")
    return d


def _no_zero_dim(name, operands):
    """cat's refusal of a 0-dim tensor, which PyTorch checks before it promotes dtypes: here
    only where promoting would fail (else the forward refuses it, after dim's checks)."""
    kinds = [kind for _, kind in operands]
    if D.ZERO_DIM not in kinds:
        return
    try:
        BINARY.rule(D.result_type_of(operands), name, operands)
    except (NotImplementedError, RuntimeError):     # (PromotionError is a RuntimeError)
        raise RuntimeError(f"zero-dimensional tensor (at position {kinds.index(D.ZERO_DIM)}) "
                           f"cannot be concatenated") from None


@op("cat(tensors, dim=0)", inputs=("tensors*",), promote=Policy("cat", BINARY.rule,
                                                                first=_no_zero_dim),
    upcast=False, scalars=False,
    saves_inputs=False, method=False)          # (PyTorch's Tensor has no cat, stack, concat)
def cat(xp, tensors, dim):
    """The tensors joined along ``dim`` (dtypes promoted; 1-D empty tensors are skipped)."""
    if type(dim) is not int:            # (the parser checks the type before anything else)
        dim = int_param(dim, None, strict=True)
    shapes = [a.shape for a in tensors]
    d = _cat_dim(shapes, dim)
    if d is None:
        return xp.concatenate(tensors)
    kept = tensors if (0,) not in shapes else \
        [a for a in tensors if not _is_legacy_empty(a.shape)]
    return _joined_layout(xp, xp.concatenate(kept, axis=d), kept)


def _joined_layout(xp, out, arrays):
    """``out`` (arrays joined by NumPy, which follows their layout) row-major, as PyTorch's
    cat and stack give, unless every input suggests one channels-last format; with the
    strides a fresh tensor of that format has, size-1 dims included."""
    if out.flags.c_contiguous and (1 not in out.shape or not out.size):
        return out
    order = suggested_order(arrays[0])
    if order is None or any(suggested_order(a) != order for a in arrays[1:]):
        if not out.flags.c_contiguous:
            return xp.ascontiguousarray(out)
        order = range(out.ndim)
    strides = _order_strides(out.shape, order, out.itemsize)
    if out.strides == strides:
        return out
    return restrided(xp, out, out.shape, strides) if laid_out(out, order) else \
        lay_out(xp, out, order)


@cat.derivative
def _(grad, tensors, dim):
    # one narrow per input rather than one split: each gradient gets a node of its own
    d = _cat_dim([t.shape for t in tensors], dim)
    grads, start = [], 0
    for t in tensors:
        if d is None or _is_legacy_empty(t.shape):
            grads.append(_zeros_like_meta(grad, t))
            continue
        grads.append(grad.narrow(d, start, t.shape[d]))
        start += t.shape[d]
    return (grads,)


def _zeros_like_meta(grad, meta):
    return zeros(meta.shape, dtype=grad.dtype, device=grad.device)


@op("stack(tensors, dim=0)", inputs=("tensors*",), promote=BINARY, upcast=False,
    scalars=False, saves_inputs=False, method=False)
def stack(xp, tensors, dim):
    """The tensors (all of one shape) joined along a new dim ``dim``."""
    first = tensors[0].shape
    d = wrap_dim(dim, len(first) + 1)       # (PyTorch wraps the dim before it checks sizes)
    for i, a in enumerate(tensors[1:], 1):
        if a.shape != first:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(first)} at entry 0 and {list(a.shape)} at entry {i}")
    if 1 not in first and len(tensors) > 1 and tensors[0].flags.c_contiguous:
        # (the common case: PyTorch's stack is row-major when the first input is and no dim
        # has size 1, whatever the others' layout; NumPy's stack, without its checks)
        lead = (slice(None),) * d + (None,)
        out = xp.concatenate([a[lead] for a in tensors], axis=d)
        return out if out.flags.c_contiguous else xp.ascontiguousarray(out)
    # PyTorch's layout (channels-last inputs, size-1 dims): a cat along ``d`` whose dim ``d``
    # a view splits, or, for a new last dim, a cat of the inputs unsqueezed there
    if d < len(first):
        return REGISTRY["view"].forward(xp, cat.forward(xp, tensors, d),
                                        first[:d] + (len(tensors),) + first[d:])
    unsqueeze = REGISTRY["unsqueeze"].forward
    return cat.forward(xp, [unsqueeze(xp, a, d) for a in tensors], d)


@stack.derivative
def _(grad, tensors, dim):
    d = wrap_dim(dim, grad.ndim)
    return ([grad.select(d, i) for i in range(len(tensors))],)


def _tensors_of(tensors, name):
    """``tensors`` as a list, refused in PyTorch's words when it is a tensor or no sequence,
    or holds something other than tensors."""
    if not isinstance(tensors, (list, tuple)):     # (no other iterable: a dict, a generator)
        from ember.ops._call_site import call_site
        site = call_site()
        where = "" if site is not None and site.passed_by_keyword("tensors") else \
            " (position 1)"
        raise TypeError(f"{name}(): argument 'tensors'{where} must be tuple of Tensors, "
                        f"not {_tp_name(tensors)}")
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{_tp_name(t)}")
    return tensors


def _check_list(tensors, name):
    tensors = _tensors_of(tensors, name)
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


@numpy_names
def _public_cat(tensors, dim=0, *, out=None, axis=UNSET):
    """The tensors joined along ``dim`` (dtypes promoted; 1-D empty tensors are skipped)."""
    if axis is not UNSET:
        dim = alias_arg(dim, axis, 0, "cat", "axis")
    tensors = _tensors_of(tensors, "cat")
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    return cat(tensors, dim, out=out)


@numpy_names
def _public_stack(tensors, dim=0, *, out=None, axis=UNSET):
    """The tensors (all of one shape) joined along a new dim ``dim``."""
    if axis is not UNSET:
        dim = alias_arg(dim, axis, 0, "stack", "axis")
    return stack(_check_list(tensors, "stack"), dim, out=out)


def _atleast(x, ndim):
    """``x`` with size-1 dims added as numpy.atleast_{1,2,3}d does."""
    if x.ndim >= ndim:
        return x
    if ndim == 3 and x.ndim == 2:
        return x.unsqueeze(-1)
    if x.ndim == 1:                 # PyTorch unsqueezes a 1-D tensor (UnsqueezeBackward0)
        return x.unsqueeze(0) if ndim == 2 else x.unsqueeze(0).unsqueeze(-1)
    return x.reshape((1,) * (ndim - x.ndim) + tuple(x.shape))


def hstack(tensors, *, out=None):
    """The tensors joined column-wise (along dim 1, or dim 0 for 1-D tensors)."""
    tensors = [_atleast(x, 1) for x in _check_list(tensors, "hstack")]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1, out=out)


def vstack(tensors, *, out=None):
    """The tensors, made at least 2-D, joined row-wise (along dim 0)."""
    tensors = [_atleast(x, 2) for x in _check_list(tensors, "vstack")]
    return cat(tensors, 0, out=out)


def dstack(tensors, *, out=None):
    """The tensors, made at least 3-D, joined depth-wise (along dim 2)."""
    tensors = [_atleast(x, 3) for x in _check_list(tensors, "dstack")]
    return cat(tensors, 2, out=out)


# --- splitting into views ---------------------------------------------------------------------

def _pieces(x, d, bounds):
    """The views ``x[..., start:stop, ...]`` along dim ``d`` for each (start, stop)."""
    lead = (slice(None),) * d
    pieces = []
    for start, stop in bounds:
        piece = x[lead + (slice(start, stop),)]
        if not piece.size and start:        # placed as PyTorch places an empty slice
            piece = slice_along(xp_of(x), x, d, start, stop)
        pieces.append(piece)
    return tuple(pieces)


def _bounds(sizes):
    out, start = [], 0
    for s in sizes:
        out.append((start, start + s))
        start += s
    return out


def _need_dims(x, name):
    if x.ndim == 0:
        raise RuntimeError(f"{name} expects at least a 1-dimensional tensor")


def _split_sizes(n, split_size_or_sections, dim):
    """The piece sizes of ``split``: pieces of one size (the last smaller), or the list."""
    if isinstance(split_size_or_sections, (tuple, list)):
        for pos, s in enumerate(split_size_or_sections):
            if not hasattr(type(s), "__index__"):     # int() would truncate a float
                raise TypeError(f"split_with_sizes(): argument 'split_sizes' must be tuple of "
                                f"ints, but found element of type {type_name(s)} at pos "
                                f"{pos}")
        sizes = [operator.index(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={sizes}")
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {dim}), but got "
                               f"split_sizes={sizes}")
        return sizes
    size = int(split_size_or_sections)
    if size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got "
                           f"split_size={size}")
    if size == 0:
        if n != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        return [0]
    return [min(size, n - start) for start in range(0, n, size)] or [0]


def _check_split_args(sizes, dim):
    """PyTorch's TypeErrors for split: its ``Tensor.split`` calls ``split_with_sizes`` for
    anything but an int (or a tensor), and the function form of either."""
    if isinstance(sizes, (tuple, list)):
        int_sequence(sizes, ("split_with_sizes", "split_sizes", 1, "function"))
        if not is_index(dim) or isinstance(dim, bool):
            raise TypeError(f"split_with_sizes(): argument 'dim' (position 3) must be int, "
                            f"not {type_name(dim)}")
    elif not isinstance(sizes, (int, Tensor)):     # Tensor.split sends the rest there
        raise TypeError(f"split_with_sizes(): argument 'split_sizes' (position 2) must be "
                        f"tuple of ints, not {type_name(sizes)}")
    if isinstance(sizes, bool) or isinstance(dim, bool) or not is_index(dim):
        raise invalid_combination("split", (sizes, dim), kind="function")


@op("split(tensor, split_size_or_sections, dim=0)", view=True, saves_inputs=False)
def split(xp, x, split_size_or_sections, dim):
    """Views of pieces of ``split_size`` along ``dim`` (the last smaller), or of given sizes."""
    if type(split_size_or_sections) is not int or type(dim) is not int:
        _check_split_args(split_size_or_sections, dim)
    _need_dims(x, "split")
    d = wrap_dim(dim, x.ndim)
    # (the message names the dim as given: -1 stays -1)
    return _pieces(x, d, _bounds(_split_sizes(x.shape[d], split_size_or_sections, dim)))


@split.named_by
def _(flat, params, out):
    # a list of sizes is PyTorch's split_with_sizes
    return "SplitWithSizesBackward0" if isinstance(params[0], (tuple, list)) else "SplitBackward0"


@split.derivative
def _(grad, x, split_size_or_sections, dim):
    return cat(list(_as_tuple(grad)), dim)


def _as_tuple(grad):
    return grad if isinstance(grad, tuple) else (grad,)


def _sizes_arg(split_sizes, position):
    """PyTorch's TypeError for a ``split_sizes`` that is not a sequence of ints."""
    if not isinstance(split_sizes, (tuple, list)):
        raise TypeError(f"split_with_sizes(): argument 'split_sizes' (position {position}) "
                        f"must be tuple of ints, not {type_name(split_sizes)}")
    return split_sizes


def split_with_sizes(input, split_sizes, dim=0):
    """Views of pieces of the given sizes along ``dim`` (``split`` with a list)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"split_with_sizes(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    return input.split(_sizes_arg(split_sizes, 2), dim)


def _split_with_sizes_method(self, split_sizes, dim=0):
    """Views of pieces of the given sizes along ``dim`` (``split`` with a list)."""
    return self.split(_sizes_arg(split_sizes, 1), dim)


_split_with_sizes_method.__name__ = _split_with_sizes_method.__qualname__ = "split_with_sizes"
Tensor.split_with_sizes = _split_with_sizes_method


@op("chunk(input, chunks, dim=0)", view=True, saves_inputs=False)
def chunk(xp, x, chunks, dim):
    """At most ``chunks`` views of equal size (the last may be smaller) along ``dim``."""
    chunks = int_param(chunks, ("chunk", "chunks", 1), strict=True)
    if type(dim) is not int:            # (the parser's check comes first)
        dim = int_param(dim, ("chunk", "dim", 2), strict=True)
    _need_dims(x, "chunk")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, x.ndim, ("chunk", "dim", 2))
    n = x.shape[d]
    if n == 0:
        return _pieces(x, d, [(0, 0)] * chunks)
    size = -(-n // chunks)
    return _pieces(x, d, _bounds(_split_sizes(n, size, d)))


@chunk.named_by
def _(flat, params, outputs):
    # PyTorch splits to chunk, by split_with_sizes where the dim is empty
    x = flat[0]
    return "SplitWithSizesBackward0" if x.shape[wrap_dim(params[1], x.ndim)] == 0 else \
        "SplitBackward0"


@chunk.derivative
def _(grad, x, chunks, dim):
    return cat(list(_as_tuple(grad)), dim)


# --- unsafe_split, unsafe_split_with_sizes, unsafe_chunk ----------------------------------------
# The pieces of split and chunk, sharing memory with the input but not tracked as its views:
# writing into one in place neither bumps the input's version nor is refused (PyTorch's
# "unsafe": the caller guarantees the input and the pieces are not modified in place).

@op("unsafe_split(input, split_size, dim=0)", saves_inputs=False)
def unsafe_split(xp, x, split_size, dim):
    """``split``'s pieces of ``split_size`` along ``dim``, not tracked as views."""
    split_size = int_param(split_size, ("unsafe_split", "split_size", 1))
    return split.forward(xp, x, split_size, dim)


@op("unsafe_split_with_sizes(input, split_sizes, dim=0)", saves_inputs=False)
def unsafe_split_with_sizes(xp, x, split_sizes, dim):
    """``split``'s pieces of the given sizes along ``dim``, not tracked as views."""
    return split.forward(xp, x, list(split_sizes), dim)


@op("unsafe_chunk(input, chunks, dim=0)", saves_inputs=False)
def unsafe_chunk(xp, x, chunks, dim):
    """``chunk``'s pieces, not tracked as views."""
    return chunk.forward(xp, x, chunks, dim)


unsafe_chunk.name_nodes("UnsafeSplitBackward0")     # PyTorch splits to chunk


def _cat_grads(grad, x, sizes, dim):
    return cat(list(_as_tuple(grad)), dim)


for _unsafe in (unsafe_split, unsafe_split_with_sizes, unsafe_chunk):
    _unsafe.derivative(_cat_grads)


@op("unbind(input, dim=0)", view=True, saves_inputs=False)
def unbind(xp, x, dim):
    """The slices along ``dim``, as a tuple of views with that dim removed."""
    d = wrap_dim_of_sized(dim, x.ndim, ("unbind", "dim", 1))
    lead = (slice(None),) * d
    return tuple(x[lead + (i, Ellipsis)] for i in range(x.shape[d]))


@unbind.derivative
def _(grad, x, dim):
    return stack(list(_as_tuple(grad)), dim)


def _split_tensor_checks(arg):
    if arg.dtype is not D.int64:
        raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of "
                           f"long, but got {arg.dtype._torch_name}")
    if arg.ndim > 1:
        raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a "
                           f"zero-dimensional or one-dimensional tensor, but got a tensor with "
                           f"{arg.ndim} dims")


def _tensor_split_bounds(n, arg):
    """(start, stop) of each piece of ``tensor_split``: sections, or indices (as slicing)."""
    if isinstance(arg, Tensor):
        _split_tensor_checks(arg)
        arg = arg.tolist()
    if isinstance(arg, (tuple, list)):
        edges = [slice(int(i), None).indices(n)[0] for i in arg]
        return list(zip([0] + edges, edges + [n]))
    sections = int(arg)
    if sections <= 0:
        raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
    small, extra = divmod(n, sections)
    return _bounds([small + 1] * extra + [small] * (sections - extra))


def _checked_split(x, indices_or_sections, dim):
    """(wrapped dim, bounds of each piece) of ``tensor_split`` (an array or a tensor)."""
    if type(indices_or_sections) is not int and not isinstance(indices_or_sections, Tensor):
        given = (indices_or_sections,) if dim == 0 else (indices_or_sections, dim)
        check_overloaded_dims(indices_or_sections, "tensor_split", given, "indices")
    if type(dim) is not int:            # (the parser's checks come first)
        dim = int_param(dim, None, strict=True)
    if x.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    if isinstance(indices_or_sections, Tensor):     # (before the dim's range)
        _split_tensor_checks(indices_or_sections)
    d = wrap_dim(dim, x.ndim)
    return d, _tensor_split_bounds(x.shape[d], indices_or_sections)


@op("tensor_split(input, indices_or_sections, dim=0)", view=True, saves_inputs=False)
def tensor_split(xp, x, indices_or_sections, dim):
    """Views of ``sections`` near-equal pieces, or of the pieces between ``indices``."""
    return _pieces(x, *_checked_split(x, indices_or_sections, dim))


@tensor_split.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: each piece a slice of its own (SliceBackward0, output 0)."""
    x = inputs[0]
    d, bounds = _checked_split(x, *params)
    # narrow: a slice node even for a piece spanning the dim (a subscript would be an alias)
    return tuple(x.narrow(d, start, max(stop - start, 0)) for start, stop in bounds)


tensor_split.name_nodes("SliceBackward0")     # PyTorch slices to tensor_split
tensor_split.independent_views = True         # so each piece may be modified in place


@tensor_split.derivative
def _(grad, x, indices_or_sections, dim):
    d = wrap_dim(dim, x.ndim)
    n = x.shape[d]
    bounds = _tensor_split_bounds(n, indices_or_sections)
    grads = _as_tuple(grad)
    if all(start <= stop for start, stop in bounds):
        return cat(list(grads), d)
    total = None                        # indices out of order: pieces overlap, so sum them
    for g, (start, stop) in zip(grads, bounds):
        stop = max(start, stop)
        g = pad_along(g, d, start, n - stop)
        total = g if total is None else total + g
    return total


def pad_along(grad, dim, before, after):
    """``grad`` with ``before`` and ``after`` zeros added along ``dim`` (slices' backward)."""
    if not before and not after:
        return grad
    parts = []
    for n in (before, after):
        shape = list(grad.shape)
        shape[dim] = n
        parts.append(zeros(shape, dtype=grad.dtype, device=grad.device))
    return cat([parts[0], grad, parts[1]], dim)


_public_cat.__name__ = _public_cat.__qualname__ = "cat"
_public_stack.__name__ = _public_stack.__qualname__ = "stack"

PUBLIC = {"cat": _public_cat, "stack": _public_stack, "hstack": hstack, "vstack": vstack,
          "dstack": dstack, "split_with_sizes": split_with_sizes}
