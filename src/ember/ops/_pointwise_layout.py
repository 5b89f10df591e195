"""The memory layout of an elementwise op's result, as PyTorch's TensorIterator chooses it.

Both sort the dims by the operands' strides. For each two dims PyTorch follows the first
operand whose strides tell them apart; NumPy's ufuncs (order "K") swap them only if no operand
objects, so they keep row-major order where the operands disagree: ``channels_last +
row_major`` is channels-last in PyTorch and row-major in NumPy (``row_major + channels_last``
row-major in both). While the first operand is row-major and of the result's shape (and so
always objects first), or every operand is row-major, the two agree, but for ties between
equal strides (dims of size 1); a row-major first operand that broadcasts leaves the dims it
repeats to the later ones, which the two read differently. The dispatcher
calls ``laid_as_operands`` only otherwise, which re-lays the forward's result where the two
differ (a copy, only then; the layout chosen is cached by the operands' shapes and strides).
"""

from ember._memory_format import _order_strides, _stride_order, _strided_copy, dense, laid_out
from ember._storage_place import _row_major_strides
from ember.backend import XP_BY_ARRAY_TYPE

__all__ = ["laid_as_operands", "row_major_before_last", "odd_unit_strides", "result_strides",
           "result_layout", "NUMBERS_ASIDE"]

# ``op(pointwise=NUMBERS_ASIDE)``: the op's numbers after its first input are parameters of a
# one-tensor kernel in PyTorch (``pow(x, 2)``, ``clamp(x, 0, 1)``), not 0-dim operands as
# ``x + 2``'s (and ``2 ** x``'s) are
NUMBERS_ASIDE = "numbers aside"

_CHANNELS_LAST = (0, 2, 3, 1)


def row_major_before_last(arrays):
    """Whether the arrays among ``arrays`` after the first and before the last are row-major
    (with a row-major first, NumPy then lays the result out as PyTorch does)."""
    for a in arrays[1:-1]:
        if type(a) in XP_BY_ARRAY_TYPE and not a.flags.c_contiguous:
            return False
    return True


def odd_unit_strides(arrays, strides):
    """Whether an array among ``arrays`` has a dim of size 1 whose stride is not the row-major
    one (a ``t()`` of a column), or has one and is not row-major: NumPy's layout ignores such
    strides, PyTorch's sort reads them (a result of size 1 along a dim is otherwise laid out
    alike). ``strides``: the fresh, row-major result's; an operand with those reads as
    row-major to PyTorch too (the dims it broadcasts along count as stride 0), so the common
    call pays a tuple compare an operand."""
    for a in arrays:
        if type(a) in XP_BY_ARRAY_TYPE and a.strides != strides and 1 in a.shape:
            key = (a.shape, a.strides, a.itemsize)
            odd = _ODD.get(key)
            if odd is None:
                if len(_ODD) > 4096:
                    _ODD.clear()
                odd = _ODD[key] = not a.flags.c_contiguous or _odd_steps(*key)
            if odd:
                return True
    return False


# (shape, strides, itemsize) -> odd_unit_strides's answer for such an array
_ODD = {}


def _odd_steps(shape, strides, itemsize):
    step = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1 and s != step:
            return True
        step *= n
    return False


def laid_as_operands(xp, res, arrays, mode=True):
    """``res``, the fresh array an elementwise forward computed from ``arrays`` (backend arrays
    and numbers), with the strides PyTorch gives that result (a copy when NumPy's differ).
    ``mode``: the op's ``pointwise``."""
    kind = type(res)
    if kind not in XP_BY_ARRAY_TYPE or res.ndim < 2:
        return res                  # (one dim: a fresh array has the only dense strides)
    first = arrays[0]
    if type(first) is kind:
        strides = first.strides
        if strides == res.strides and first.shape == res.shape \
                and first.itemsize == res.itemsize and 1 not in res.shape:
            return res  # a dense first operand without dims of size 1 orders every two dims
        if len(arrays) == 2 and type(arrays[1]) is not kind and not any(strides) \
                and res.flags.c_contiguous:
            return res  # an expanded number (sum's gradient) and a number: row-major
    key = [mode, res.shape, res.itemsize]
    for a in arrays:
        key.append((a.shape, a.strides, a.itemsize) if type(a) is kind else a is None)
    key = tuple(key)
    strides = _CHOSEN.get(key, False)
    if strides is False:
        if len(_CHOSEN) > 4096:
            _CHOSEN.clear()
        strides = _CHOSEN[key] = _chosen(res.shape, res.itemsize, arrays, kind, mode)
    return res if strides is None or res.strides == strides else \
        _strided_copy(xp, res, strides)


# (mode, shape, itemsize, operands' (shape, strides, itemsize) or whether None) -> _chosen(...)
_CHOSEN = {}


def _chosen(shape, itemsize, arrays, kind, mode):
    """The byte strides PyTorch gives the result; None where NumPy's are known to be them."""
    operands = [a for a in arrays if type(a) is kind]
    if not all(_broadcasts(a.shape, shape) for a in operands):
        return None                 # (a forward that reshapes an operand first)
    # a number operand is a 0-dim tensor to PyTorch (add.Scalar wraps it), not the same shape
    numbers = any(a is not None and type(a) is not kind
                  for a in (arrays if mode is True else arrays[:1]))
    strides = result_strides(shape, itemsize, operands, numbers)
    return _row_major(shape, itemsize) if strides is None else strides


def result_layout(shape, itemsize, arrays, kind, mode=True):
    """The byte strides of the ``shape`` result of an elementwise op (``mode``: its
    ``pointwise``) on ``arrays`` (arrays of type ``kind``; the others count as numbers), read
    off without a result to lay out (a meta tensor's); None for row-major."""
    strides = _chosen(tuple(shape), itemsize, arrays, kind, mode)
    return None if strides == _row_major(shape, itemsize) else strides


def _row_major(shape, itemsize):
    """PyTorch's row-major byte strides (a dim of size 0 steps as one of size 1: a permuted
    layout's, ``_order_strides``, do not)."""
    return tuple(s * itemsize for s in _row_major_strides(shape))


def result_strides(shape, itemsize, operands, numbers=False):
    """The byte strides (``itemsize`` bytes an element) of the ``shape`` result PyTorch's
    TensorIterator allocates for ``operands`` (arrays, in its operand order: a written output
    first; ``numbers``: and 0-dim ones besides); None for row-major."""
    if not numbers and all(a.shape == shape for a in operands):   # its "fast setup"
        if all(a.flags.c_contiguous for a in operands):
            return None
        if len(shape) == 4 and all(laid_out(a, _CHANNELS_LAST) for a in operands):
            return _order_strides(shape, _CHANNELS_LAST, itemsize)
        if all(dense(a) for a in operands):
            first = _element_strides(operands[0])
            if all(_element_strides(a) == first for a in operands):
                return tuple(s * itemsize for s in first)
    ndim = len(shape)
    order = _stride_order(shape, *[_broadcast_strides(a, shape, ndim) for a in operands])
    if order == tuple(range(ndim)):
        return None
    return _order_strides(shape, order, itemsize)


def _broadcasts(own, shape):
    """Whether an operand of shape ``own`` broadcasts to ``shape``."""
    return len(own) <= len(shape) and all(
        n == 1 or n == m for n, m in zip(reversed(own), reversed(shape)))


def _element_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def _broadcast_strides(a, shape, ndim):
    """``a``'s strides as an operand broadcast to ``shape``: 0 along the dims it repeats."""
    lead = ndim - a.ndim
    return (0,) * lead + tuple(0 if n == 1 and shape[lead + i] != 1 else s
                               for i, (n, s) in enumerate(zip(a.shape, a.strides)))
