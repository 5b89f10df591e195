"""Basic-index views: ``input[key]`` for keys of ints, slices and None, one view op per
PyTorch node name (``_getitem_select``, ``_getitem_slice``, ``_getitem_unsqueeze``,
``_getitem_alias``) and their backward ``_slice_backward``. ops/indexing.py re-exports them.
"""

import numpy as np

from ember._memory_format import restrided
from ember._storage_place import empty_at, empty_slice_geometry, keep_empty_geometry
from ember._tensor import _make
from ember.ops._recording import _mark_view
from ember.ops._registry import call, op

_FULL = slice(None)


def _explicit(key):
    """``key`` completed with an Ellipsis, so that NumPy returns a view even for ints."""
    for k in key:
        if k is Ellipsis:
            return key
    return key + (Ellipsis,)


def _basic_forward(xp, x, key):
    """``input[key]`` for a key of ints, slices (step > 0) and None: a view."""
    out = x[_explicit(key)]
    if not out.size and Ellipsis not in key:    # placed where PyTorch places it
        strides, offset = empty_slice_geometry(x.shape, x.strides, 0, key, x.itemsize)
        return empty_at(xp, out, x, offset, strides)
    return _new_dim_strides(xp, out, key, x) if None in key else out


def _new_dim_strides(xp, out, key, x):
    """``out`` with PyTorch's strides for the dims None inserted (NumPy gives them 0): as
    ``unsqueeze`` in front of the input dim that follows, its size times its stride (one
    element after the last dim)."""
    consumed = sum(k is not None and k is not Ellipsis for k in key)
    strides, pos, dim = list(out.strides), 0, 0
    for k in key:
        if k is None:
            strides[pos] = (x.shape[dim] * x.strides[dim] if dim < x.ndim else x.itemsize)
            pos += 1
        elif k is Ellipsis:
            pos += x.ndim - consumed
            dim += x.ndim - consumed
        else:
            pos += type(k) is not int
            dim += 1
    return restrided(xp, out, out.shape, strides)


def _basic_derivative(grad, x, key):
    return _slice_backward(grad, x.shape, key)


def _unsqueeze_derivative(grad, x, key):
    """One None (a subscript step): squeeze its dim, as PyTorch's UnsqueezeBackward0 does."""
    step = _sole_step(key, x.shape)
    if step is None:
        return _slice_backward(grad, x.shape, key)
    return grad.squeeze(sum(k is not None and type(k) is not int for k in key[:step]) +
                        key[:step].count(None))


def _view_op(kind, derivative=_basic_derivative):
    new = op(f"_getitem_{kind}(input, key)", view=True, method=False, saves_inputs=False,
             grad_fn_name=f"{kind.capitalize()}Backward0")(_basic_forward)
    new.derivative(derivative)
    return new


_getitem_select = _view_op("select")
_getitem_slice = _view_op("slice")
_getitem_unsqueeze = _view_op("unsqueeze", _unsqueeze_derivative)
_getitem_alias = _view_op("alias", lambda grad, x, key: grad)     # (AliasBackward0's)


def _steps(key, shape):
    """The positions of the components of ``key`` that PyTorch records as a step on ``shape``:
    ints, Nones, and slices other than one covering its whole dim from 0 with step 1."""
    found, dim = [], 0
    for i, k in enumerate(key):
        if k is None:
            found.append(i)
        elif k is Ellipsis:
            dim += len(shape) - sum(j is not None and j is not Ellipsis for j in key)
        else:
            if type(k) is int or k.start not in (None, 0) or k.step not in (None, 1) or \
                    k.stop is not None and k.stop < shape[dim]:
                found.append(i)
            dim += 1
    return found


def _sole_step(key, shape):
    """The position of the one step of ``key`` on ``shape`` (see ``_steps``), or None."""
    found = _steps(key, shape)
    return found[0] if len(found) == 1 else None


def alias_of(t):
    """A view of all of ``t``, made without recording a node (what an input returned as-is
    by a custom Function becomes)."""
    alias = _make(_basic_forward(None, t._data, ()))
    _mark_view(_getitem_alias, t, ((),), alias)
    return alias


def _kind_of(key, shape):
    """The view op named after the last step of ``key`` on ``shape`` (see ``_steps``)."""
    for i in range(len(key) - 1, -1, -1):
        k = key[i]
        if k is None:
            return _getitem_unsqueeze
        if type(k) is int:
            return _getitem_select
        if k is Ellipsis or k == _FULL:
            continue
        if k.start in (None, 0) and k.step in (None, 1) and i not in _steps(key, shape):
            continue                        # (a slice of the whole dim, from 0: no step)
        return _getitem_slice
    return _getitem_alias


def basic_view(t, key, kind=None):
    """``t[key]`` for a normalized basic key, one view named after its last non-trivial step
    (or ``kind``)."""
    view = call(kind or _kind_of(key, t.shape), (t,), (key,))
    if not view._data.size and type(view._data) is not np.ndarray:
        keep_empty_geometry(view, t, key)   # (NumPy's empty views are placed: _basic_forward)
    return view


@op("_slice_backward(grad, input_shape, key)", method=False, saves_inputs=False)
def _slice_backward(xp, grad, input_shape, key):
    """Zeros of ``input_shape`` with ``grad`` written at ``key`` (the backward of a view)."""
    out = xp.zeros(tuple(input_shape), dtype=grad.dtype)
    out[_explicit(key)] = grad
    return out


@_slice_backward.named_by
def _(flat, params, out):           # PyTorch's select_backward for one int, else slice_backward
    key = params[1]
    step = _sole_step(key, params[0])
    return "SelectBackwardBackward0" if step is not None and type(key[step]) is int else \
        "SliceBackwardBackward0"


@_slice_backward.derivative
def _(grad, g, input_shape, key):
    return basic_view(grad, key)
