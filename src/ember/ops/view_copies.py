"""The ``*_copy`` functions: each view op followed by a copy into fresh contiguous memory
(``t_copy``, ``select_copy``, ``split_copy``, ...), differentiable through the view and the
copy, with PyTorch's ``out=``.

NOTE [out= of the view copies]
PyTorch's one-result copies resize ``out`` (warning when it had elements) and insist on the
result's exact dtype; its several-result ones (``split_copy``, ``unbind_copy``) instead
``copy_`` each result into its ``out`` tensor (broadcasting and casting, never resizing) and
return None, untracked, whatever requires grad (but ``unbind_copy``, with grad mode on,
refuses an ``out`` that requires grad). The one-result copies have no derivative:
with grad mode on, an ``out`` that is a leaf requiring grad (or a view of one, or a no_grad
view) is refused; else, where the input requires grad or ``out`` has history, the write
records a node named NotImplemented, whose backward raises (on ``out``'s base, through a
CopySlices, when ``out`` is a view).
"""

import warnings

from ember import _dtype as D
from ember._memory_format import contiguous_format
from ember._tensor import Tensor, _view_tracks
from ember._warn import user_level
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import no_grad
from ember.ops._dims import wrap_dim
from ember.ops._not_implemented import hang_not_implemented
from ember.ops.dtype_view import view_dtype
from ember.ops._out_dtypes import _C_NAMES
from ember.ops._scalars import int_arg

__all__ = ["alias_copy", "detach_copy", "diagonal_copy", "expand_copy", "permute_copy",
           "select_copy", "slice_copy", "split_copy", "split_with_sizes_copy",
           "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy", "unfold_copy",
           "unsqueeze_copy", "view_as_complex_copy", "view_as_real_copy", "view_copy"]

_MISSING = object()

# the copies PyTorch gives no complex derivative: they refuse complex inputs that require grad
_NO_COMPLEX_GRAD = ("select_copy", "slice_copy", "view_as_complex_copy")


# --- helpers ---------------------------------------------------------------------------------

def _input(value, fname):
    if not isinstance(value, Tensor):
        raise TypeError(f"{fname}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(value).__name__}")
    return value


def _view(fname, vname, make):
    """``make()``, with the argument errors PyTorch's parser words naming ``fname`` (the view
    op's own checks keep their wording, as in PyTorch)."""
    try:
        return make()
    except TypeError as e:
        message = str(e)
        if message.startswith(f"{vname}():"):
            raise TypeError(fname + message[len(vname):]) from None
        raise


def _ints(fname, *values):
    """The (value, name) pairs, from position 2 on, as ints (PyTorch's TypeError if not)."""
    return tuple(int_arg(v, fname, name, i) for i, (v, name) in enumerate(values, 2))


def _fresh(t):
    return t.clone(memory_format=contiguous_format)


def _finish(fname, view, out, source=None):
    """A contiguous copy of ``view``, or ``view`` written into ``out`` (see NOTE [out= of
    the view copies]); ``source``: the input the copy's node takes (default: what ``view``
    was made of)."""
    if fname in _NO_COMPLEX_GRAD and _GRAD.grad_enabled and view.requires_grad \
            and view.is_complex():
        raise RuntimeError(f"{fname} does not support automatic differentiation for outputs "
                           f"with complex dtype.")
    if out is None:
        return _fresh(view)
    if not isinstance(out, Tensor):
        raise TypeError(f"{fname}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if source is None:
        source = view if view._view is None else view._view[1]
    tracked = _GRAD.grad_enabled and (source.requires_grad or out._requires_grad
                                      or out._grad_fn is not None or _view_tracks(out))
    if tracked:
        _refuse_grad_out(fname, out)
        old, base_edge, recipe = _before_write(out)
    with no_grad():
        if out.shape != view.shape:
            if out.numel():
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape "
                    f"{list(out.shape)}, which does not match the required output shape "
                    f"{list(view.shape)}. This behavior is deprecated, and in a future PyTorch "
                    f"release outputs will not be resized unless they have zero elements. You "
                    f"can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                    f"elements with t.resize_(0).", UserWarning,
                    stacklevel=user_level(3))
            if tracked:     # (PyTorch's resize of an out= tensor skips autograd's refusal)
                from ember.ops.conversion import _resize_storage
                _resize_storage(out, view.shape)
            else:
                out.resize_(view.shape)
        if out.dtype is not view.dtype:
            raise RuntimeError(f"Expected out tensor to have dtype {_C_NAMES[view.dtype]}, but "
                               f"got {_C_NAMES[out.dtype]} instead")
        out.copy_(view)
    if tracked:     # (PyTorch's node NotImplemented: the out= kernel has no derivative)
        if out._view is None:
            hang_not_implemented(out, fname, (source, old))
        else:
            hang_not_implemented(out, fname, (source,), (old, base_edge, recipe))
    return out


def _refuse_grad_out(fname, out):
    """PyTorch's refusal of an ``out`` that may not be written with grad mode on: a leaf that
    requires grad, a view of one, a view made in no_grad mode of a tensor that requires grad
    (the checks of an in-place write, in the out= refusal's words)."""
    from ember.ops._inplace import _check_leaf
    try:
        _check_leaf(out)
    except RuntimeError:
        raise RuntimeError(f"aten::{fname}(): functions with out=... arguments don't support "
                           f"automatic differentiation, but one of the arguments requires "
                           f"grad.") from None


def _before_write(out):
    """What recording the write into ``out`` needs from before it: a stand-in for ``out``
    with its history, its base's history and its view recipe (when a view)."""
    from ember.autograd.graph import history
    from ember.ops._inplace import _history_snapshot, view_recipe
    old = _history_snapshot(out, False)
    if out._view is None:
        return old, None, None
    return old, history(out._view[0]), view_recipe(out)


def _finish_all(fname, out_name, position, views, out, refuse_grad=False):
    """Contiguous copies of ``views`` as a tuple, or each copied into ``out`` (None);
    ``refuse_grad``: an ``out`` that requires grad is refused with grad mode on (unbind's)."""
    if out is None:
        return tuple(_fresh(v) for v in views)
    if not isinstance(out, (tuple, list)):
        raise TypeError(f"{fname}(): argument 'out' must be tuple of Tensors, not "
                        f"{type(out).__name__}")
    for i, t in enumerate(out):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument {position}, but got "
                            f"{type(t).__name__}")
    if len(out) != len(views):
        raise RuntimeError(f"{out_name} expected an out= argument of size {len(views)}, got "
                           f"size {len(out)}")
    if refuse_grad and _GRAD.grad_enabled and any(t.requires_grad for t in out):
        raise RuntimeError(f"{fname}(): functions with out=... arguments don't support "
                           f"automatic differentiation, but one of the arguments requires "
                           f"grad.")
    with no_grad():     # (else untracked, whatever requires grad, as PyTorch's)
        for t, v in zip(out, views):
            t.copy_(v)
    return None


# --- one result ------------------------------------------------------------------------------

def alias_copy(input, *, out=None):
    """A contiguous copy of ``input`` (what ``alias`` views)."""
    x = _input(input, "alias_copy")
    return _finish("alias_copy", x, out, x)


def detach_copy(input, *, out=None):
    """A contiguous copy of ``input.detach()``."""
    x = _input(input, "detach_copy")
    return _finish("detach_copy", x.detach(), out, x)


def diagonal_copy(input, offset=0, dim1=0, dim2=1, *, out=None):
    """A contiguous copy of ``diagonal(input, offset, dim1, dim2)``."""
    x = _input(input, "diagonal_copy")
    offset, dim1, dim2 = _ints("diagonal_copy", (offset, "offset"), (dim1, "dim1"),
                               (dim2, "dim2"))
    return _finish("diagonal_copy", _view("diagonal_copy", "diagonal",
                                          lambda: x.diagonal(offset, dim1, dim2)), out)


def expand_copy(input, size, *, implicit=False, out=None):
    """A contiguous copy of ``input.expand(size)`` (``implicit`` is accepted and ignored,
    as in PyTorch's eager mode)."""
    x = _input(input, "expand_copy")
    return _finish("expand_copy", _view("expand_copy", "expand", lambda: x.expand(size)), out)


def permute_copy(input, dims, *, out=None):
    """A contiguous copy of ``permute(input, dims)``."""
    x = _input(input, "permute_copy")
    return _finish("permute_copy", _view("permute_copy", "permute", lambda: x.permute(dims)),
                   out)


def select_copy(input, dim, index, *, out=None):
    """A contiguous copy of ``select(input, dim, index)``."""
    x = _input(input, "select_copy")
    dim, index = _ints("select_copy", (dim, "dim"), (index, "index"))
    return _finish("select_copy", _view("select_copy", "select",
                                        lambda: x.select(dim, index)), out)


def _bound(value, fname, name, position):
    return None if value is None else int_arg(value, fname, name, position)


def slice_copy(input, dim=0, start=None, end=None, step=1, *, out=None):
    """A contiguous copy of ``input``'s slice ``start:end:step`` along ``dim``."""
    x = _input(input, "slice_copy")
    dim = int_arg(dim, "slice_copy", "dim", 2)
    start = _bound(start, "slice_copy", "start", 3)
    end = _bound(end, "slice_copy", "end", 4)
    step = int_arg(step, "slice_copy", "step", 5)
    if x.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, x.ndim)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    return _finish("slice_copy", x[(slice(None),) * d + (slice(start, end, step),)], out)


def squeeze_copy(input, dim=_MISSING, *, out=None):
    """A contiguous copy of ``squeeze(input)`` or ``squeeze(input, dim)``."""
    x = _input(input, "squeeze_copy")
    if dim is None:
        raise TypeError(
            "squeeze_copy() received an invalid combination of arguments - got (Tensor, "
            "NoneType), but expected one of:\n * (Tensor input, *, Tensor out = None)\n"
            " * (Tensor input, int dim, *, Tensor out = None)\n"
            " * (Tensor input, tuple of ints dim, *, Tensor out = None)\n")
    view = x.squeeze() if dim is _MISSING else _view("squeeze_copy", "squeeze",
                                                     lambda: x.squeeze(dim))
    return _finish("squeeze_copy", view, out)


def t_copy(input, *, out=None):
    """A contiguous copy of ``t(input)``."""
    return _finish("t_copy", _input(input, "t_copy").t(), out)


def transpose_copy(input, dim0, dim1, *, out=None):
    """A contiguous copy of ``transpose(input, dim0, dim1)``."""
    x = _input(input, "transpose_copy")
    dim0, dim1 = _ints("transpose_copy", (dim0, "dim0"), (dim1, "dim1"))
    return _finish("transpose_copy", _view("transpose_copy", "transpose",
                                           lambda: x.transpose(dim0, dim1)), out)


def unfold_copy(input, dimension, size, step, *, out=None):
    """A contiguous copy of ``input.unfold(dimension, size, step)``."""
    x = _input(input, "unfold_copy")
    dimension, size, step = _ints("unfold_copy", (dimension, "dimension"), (size, "size"),
                                  (step, "step"))
    return _finish("unfold_copy", _view("unfold_copy", "unfold",
                                        lambda: x.unfold(dimension, size, step)), out)


def unsqueeze_copy(input, dim, *, out=None):
    """A contiguous copy of ``unsqueeze(input, dim)``."""
    x = _input(input, "unsqueeze_copy")
    dim, = _ints("unsqueeze_copy", (dim, "dim"))
    return _finish("unsqueeze_copy", _view("unsqueeze_copy", "unsqueeze",
                                           lambda: x.unsqueeze(dim)), out)


def view_as_complex_copy(input, *, out=None):
    """A contiguous copy of ``view_as_complex(input)``."""
    from ember.ops.complex_ops import view_as_complex
    x = _input(input, "view_as_complex_copy")
    return _finish("view_as_complex_copy", view_as_complex.function(x), out)


def view_as_real_copy(input, *, out=None):
    """A contiguous copy of ``view_as_real(input)``."""
    from ember.ops.complex_ops import view_as_real
    x = _input(input, "view_as_real_copy")
    return _finish("view_as_real_copy", view_as_real.function(x), out)


_VIEW_COPY_USAGE = ("view_copy() received an invalid combination of arguments - got ({}), but "
                    "expected one of:\n * (Tensor input, ember.dtype dtype, *, Tensor out = "
                    "None)\n * (Tensor input, tuple of ints size, *, Tensor out = None)\n")


def _reinterpreted(x, dtype):
    """``x``'s bytes read as ``dtype`` (no autograd), after PyTorch's checks of
    ``x.view(dtype)``."""
    return view_dtype(x, dtype)


def view_copy(input, size=_MISSING, *, dtype=_MISSING, out=None):
    """A contiguous copy of ``input.view(size)`` (any input strides: it reshapes) or of
    ``input.view(dtype)``."""
    x = _input(input, "view_copy")
    if size is not _MISSING and dtype is _MISSING and isinstance(size, D.dtype):
        size, dtype = _MISSING, size
    if (size is _MISSING) == (dtype is _MISSING) or (
            size is not _MISSING and not isinstance(size, (tuple, list))):
        got = ["Tensor"] + [type(v).__name__ for v in (size,) if v is not _MISSING]
        got += [f"dtype={type(v).__name__}" for v in (dtype,) if v is not _MISSING]
        raise TypeError(_VIEW_COPY_USAGE.format(", ".join(got)))
    if dtype is not _MISSING:
        return _finish("view_copy", _reinterpreted(x, dtype), out)
    return _finish("view_copy", _view("view_copy", "reshape", lambda: x.reshape(size)), out)


# --- several results -------------------------------------------------------------------------

def split_copy(input, split_size, dim=0, *, out=None):
    """Contiguous copies of the chunks of ``split(input, split_size, dim)``."""
    x = _input(input, "split_copy")
    split_size, dim = _ints("split_copy", (split_size, "split_size"), (dim, "dim"))
    views = _view("split_copy", "split", lambda: x.split(split_size, dim))
    return _finish_all("split_copy", "split_copy_Tensor_out()", 3, views, out)


def split_with_sizes_copy(input, split_sizes, dim=0, *, out=None):
    """Contiguous copies of the pieces of ``split(input, split_sizes, dim)``."""
    x = _input(input, "split_with_sizes_copy")
    if not isinstance(split_sizes, (tuple, list)):
        raise TypeError(f"split_with_sizes_copy(): argument 'split_sizes' (position 2) must be "
                        f"tuple of ints, not {type(split_sizes).__name__}")
    views = _view("split_with_sizes_copy", "split_with_sizes",
                  lambda: x.split_with_sizes(split_sizes, dim))
    return _finish_all("split_with_sizes_copy", "split_with_sizes_copy_out", 3, views, out)


def unbind_copy(input, dim=0, *, out=None):
    """Contiguous copies of the slices of ``unbind(input, dim)``."""
    x = _input(input, "unbind_copy")
    dim, = _ints("unbind_copy", (dim, "dim"))
    views = _view("unbind_copy", "unbind", lambda: x.unbind(dim))
    return _finish_all("unbind_copy", "unbind_copy_int_out", 2, views, out, True)


def _publish(fn):
    fn.__module__ = "ember"
    return fn


PUBLIC = {name: _publish(globals()[name]) for name in __all__}
