"""The meta device: arrays with a shape and a dtype but no memory.

A model built under ``with ember.device("meta"):`` allocates nothing, so its size does not
matter; ``Module.to_empty`` or ``load_state_dict(..., assign=True)`` gives it real memory
later. Ops on meta tensors compute only their results' shapes and dtypes (ops/_meta.py): they
run on *stand-ins*, NumPy arrays of the right shape over one row of memory (every other dim
has stride 0), so that one row stands for any number of them.
"""

import math
import types

import numpy as np

__all__ = ["MetaArray", "meta_like", "stand_in", "NO_DATA"]

NO_DATA = "Cannot copy out of meta tensor; no data!"


class MetaArray:
    """The shape and dtype of an array that does not exist (what a meta tensor holds)."""

    __slots__ = ("shape", "dtype", "layout", "__weakref__")

    base = None                 # owns no memory, views none
    _ROW_MAJOR_FLAGS = types.SimpleNamespace(c_contiguous=True, f_contiguous=False,
                                             writeable=True, owndata=True)

    def __init__(self, shape, dtype, layout=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        # (byte strides, byte offset) of a view (ops/_meta.py lays views out as PyTorch's
        # meta tensors are); None: a fresh row-major array at offset 0
        self.layout = layout

    @property
    def flags(self):
        """NumPy's flags, as a fresh array's, but for a view's c_contiguous."""
        if self.layout is None:
            return self._ROW_MAJOR_FLAGS
        return types.SimpleNamespace(c_contiguous=self._c_contiguous(), f_contiguous=False,
                                     writeable=True, owndata=False)

    def _c_contiguous(self):
        """NumPy's c_contiguous: row-major but for the strides of dims of size 1 (and of an
        empty array), which place no element."""
        if 0 in self.shape:
            return True
        step = self.dtype.itemsize
        for n, s in zip(reversed(self.shape), reversed(self.layout[0])):
            if n != 1:
                if s != step:
                    return False
                step *= n
        return True

    @property
    def offset(self):
        """Bytes from the start of the memory this array's base would own."""
        return 0 if self.layout is None else self.layout[1]

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def strides(self):
        """Strides in bytes: a view's, else row-major (those of a fresh tensor)."""
        return self._row_major() if self.layout is None else self.layout[0]

    def _row_major(self):
        strides, step = [], self.dtype.itemsize
        for n in reversed(self.shape):
            strides.append(step)
            step *= max(n, 1)
        return tuple(reversed(strides))

    def astype(self, dtype, copy=True):
        """This shape with another dtype."""
        return MetaArray(self.shape, dtype)

    def copy(self, order="K"):
        """Another array of this shape and dtype (``deepcopy``, ``clone``)."""
        return MetaArray(self.shape, self.dtype)

    def reshape(self, *shape):
        """This dtype with another shape of the same size."""
        shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
        if -1 in shape:
            known = math.prod(n for n in shape if n != -1)
            shape = tuple(self.size // known if n == -1 else n for n in shape)
        return MetaArray(shape, self.dtype)

    def _elementwise(self, other, name):
        """The result of ``self <name> other`` (array code on a meta tensor's array, such as
        dropout's mask): the broadcast shape, and the dtype NumPy's rules give."""
        like = np.zeros((), other.dtype) if type(other) is MetaArray else other
        dtype = np.asarray(getattr(np.zeros((), self.dtype), name)(like)).dtype
        return MetaArray(np.broadcast_shapes(self.shape, np.shape(other)), dtype)

    def __array__(self, dtype=None, copy=None):
        raise NotImplementedError(NO_DATA)

    def __repr__(self):
        return f"MetaArray(shape={self.shape}, dtype={self.dtype})"


for _name in ("__lt__", "__le__", "__gt__", "__ge__", "__add__", "__radd__", "__sub__",
              "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__"):
    setattr(MetaArray, _name, lambda self, other, _n=_name: self._elementwise(other, _n))


def meta_like(array, dtype=None):
    """A MetaArray of ``array``'s shape (any backend's array, or a stand-in), and its dtype
    unless ``dtype`` is given."""
    return MetaArray(array.shape, array.dtype if dtype is None else dtype)


def stand_in(meta, shape=None, identity=False):
    """A NumPy array of ``meta``'s dtype and shape (or ``shape``), every row of which is one
    and the same row in memory (the last dim is real: some ops need it contiguous; the others
    repeat it at stride 0). Its values are 1 for floats (logs, divisions and probabilities
    stay finite) and 0 for integers and bools (always a valid index). With ``identity``,
    float matrices are identities (factorizations refuse singular ones) and integer rows
    count from 1 (valid pivots). Writes land in the shared row: they are lost, as on meta."""
    dtype = meta.dtype
    shape = tuple(meta.shape if shape is None else shape)
    if not shape:
        return np.full((), 0 if dtype.kind in "iub" else 1, dtype)
    if identity and len(shape) >= 2 and dtype.kind in "fc":
        rows = np.eye(shape[-2], shape[-1], dtype=dtype)
    elif identity and dtype.kind in "iu":
        rows = np.arange(1, shape[-1] + 1, dtype=dtype)
    else:
        rows = np.full(shape[-1], 0 if dtype.kind in "iub" else 1, dtype)
    strides = (0,) * (len(shape) - rows.ndim) + rows.strides
    if dtype.itemsize > 8:              # complex128
        return np.lib.stride_tricks.as_strided(rows, shape, strides, writeable=True)
    bits = rows.view(f"u{dtype.itemsize}")  # as_strided would lose ml_dtypes' dtypes
    return np.lib.stride_tricks.as_strided(bits, shape, strides, writeable=True).view(dtype)
