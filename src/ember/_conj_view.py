"""Lazily conjugated views: PyTorch's conjugate bit.

NOTE [Conjugate views]
``x.conj()`` of a complex tensor is a ``ConjView``: a Tensor subclass whose slot ``_data``
holds the *unconjugated* array, in ``x``'s memory. The class shadows that slot with a
property, so every read of ``view._data`` (each op's operand, printing, ``tolist``) gets the
conjugated values, made here and nowhere else; plain tensors keep the slot itself, so no op
pays for this. The subclass skips ``__torch_function__`` (as Parameter does), so results of
ops on a view are plain tensors and autograd records the view itself.
Writes: every in-place write bumps the version counter after writing into an array it
read; the view remembers the arrays it handed out since the last bump and, at the bump,
writes the conjugate of the one that changed back into the shared memory. View ops of a
view (``y[0]``, ``y.mT``) run on the unconjugated array (the dispatcher hands a ``view=True``
op ``memory(y)``; others are redone there by ``view_of``, called from ``_mark_view``), so they
are views of ``x`` with the bit set too. Memory: a view keeps the last array it handed out
alive until its next write or its end (one copy of its values per live view read). Reads:
that array is handed out again while the version counter (shared with ``x`` and its views)
is unchanged and nothing else holds it, so ``y[0]`` in a loop costs one copy, not one a row;
a write into the memory that bumps no version (through ``x.numpy()``) is not seen until the
next bump. ``y.imag`` is a ``NegView``, the same machinery with negation for conjugation:
PyTorch's negative bit (``_neg_view``); its view ops keep the bit too. Saved and pickled, a
conjugate view keeps its memory and the bit; loaded aliases have version counters of their
own, so such a view never reuses a read (``written_elsewhere``).
"""

import weakref
from sys import getrefcount

from ember._tensor import Tensor, _make
from ember.backend import device_guard, gpu_elsewhere
from ember.overrides import _disabled_torch_function_impl

__all__ = ["ConjView", "NegView", "view_of", "stand_in", "take_memory", "hold_values", "memory",
           "set_memory", "written_elsewhere"]

_RAW = Tensor._data         # the slot's own descriptor: the unconjugated array


class ConjView(Tensor):
    """A complex tensor whose values are the conjugate of the memory it views."""

    __slots__ = ()
    __torch_function__ = _disabled_torch_function_impl

    @property
    def _data(self):
        """The conjugated values: the one place a conjugate view is materialised."""
        raw = _RAW.__get__(self)
        reads = _READS.get(id(self))
        if reads is not None and reads[1] is raw and reads[0] == _version(self):
            out = reads[2]      # the last array read, if nobody else holds it: no write since
            if out is not None and getrefcount(out) <= _UNHELD and not (
                    _ELSEWHERE and _ELSEWHERE.get(id(_owner(raw))) is not None):
                return out
        out = self._flip(raw)
        _note_read(self, raw, out)
        return out

    @_data.setter
    def _data(self, values):
        _RAW.__set__(self, self._flip(values))

    def _bump_version(self):
        """Write what an in-place op wrote (into an array this view handed out since the last
        write) back into the shared memory, then bump the version as any tensor does."""
        reads = _READS.get(id(self))
        raw = _RAW.__get__(self)
        if reads is not None and reads[0] == _version(self) and reads[1] is raw:
            before = self._flip(raw)
            for a in [r() for r in reads[3]] + [reads[2]]:
                if a is not None and a.shape == before.shape and _changed(a, before):
                    raw[...] = self._flip(a)
            reads[2], reads[3] = None, []
        Tensor._bump_version(self)

    _BIT, _RESOLVE = "conjugate", "resolve_conj"

    @staticmethod
    def _flip(a):
        """The values memory ``a`` holds seen through this view (and back: its own inverse)."""
        with device_guard(gpu_elsewhere(a)):    # (a kernel runs on its array's GPU)
            out = a.conj()
            if type(out) is not type(a):        # NumPy conjugates a 0-dim array to a scalar
                out = a.copy()
                out.imag *= -1
        return out

    def _unconjugated(self):
        """A plain tensor over the same memory (holding the unconjugated values)."""
        out = _make(_RAW.__get__(self))
        out._vc, out._view, out._meta = self._vc, self._view, self._meta
        return out

    # metadata read from the memory itself, not from a materialised copy
    dtype = property(lambda self: Tensor.dtype.fget(self._unconjugated()))
    shape = property(lambda self: Tensor.shape.fget(self._unconjugated()))
    ndim = property(lambda self: _RAW.__get__(self).ndim)

    def stride(self, dim=None):
        """Strides in elements of the memory viewed."""
        return self._unconjugated().stride(dim)

    def is_contiguous(self, *, memory_format=None):
        """Whether the memory viewed is laid out densely (see ``Tensor.is_contiguous``)."""
        return self._unconjugated().is_contiguous(memory_format=memory_format)

    def storage_offset(self):
        """Offset in elements into the memory viewed."""
        return self._unconjugated().storage_offset()

    def data_ptr(self):
        """The address of the first element of the memory viewed."""
        return self._unconjugated().data_ptr()

    const_data_ptr = data_ptr

    @Tensor.data.setter
    def data(self, value):
        """Take ``value``'s memory and values: a plain tensor from then on (as PyTorch's)."""
        Tensor.data.fset(self, value)           # (its checks)
        self.__class__ = Tensor
        self._data = value._data

    def detach(self):
        """A conjugate view of the same memory, cut from the graph (PyTorch keeps the bit)."""
        out = self._unconjugated().detach()
        out.__class__ = type(self)
        return out

    def __reduce_ex__(self, protocol):
        """Pickled as its memory (unconjugated, aliasing what it aliases) and the bit, as
        PyTorch's; ``ember.save`` writes PyTorch's ``{"conj": True}`` metadata instead."""
        return _rebuild_conj, (self._unconjugated(), self._requires_grad)

    def __deepcopy__(self, memo):
        """A plain tensor of its values, in new memory (as PyTorch's deepcopy)."""
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            return Tensor.__deepcopy__(self, memo)      # (raises PyTorch's error)
        new = memo[id(self)] = _make(self._data)
        new._requires_grad = self._requires_grad
        return new

    def numpy(self, *, force=False):
        """Refused, as PyTorch does, unless ``force``: NumPy has no conjugate bit."""
        if not force and self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if not force:
            raise RuntimeError(f"Can't call numpy() on Tensor that has {self._BIT} bit set. "
                               f"Use tensor.{self._RESOLVE}().numpy() instead.")
        return Tensor.numpy(self.clone(), force=True)

    def __dlpack__(self, **kwargs):
        """Refused for the conjugate bit, as PyTorch's (a negative bit exports the values)."""
        if type(self) is ConjView and not self.requires_grad:
            raise BufferError("Can't export tensors with the conjugate bit set")
        return Tensor.__dlpack__(self, **kwargs)

    def __array__(self, dtype=None, copy=None):
        """Refused as ``numpy()`` refuses (PyTorch's ``__array__`` calls it; the grad check
        heeds grad mode there): NumPy has no conjugate bit."""
        from ember.autograd.grad_mode import is_grad_enabled
        if self.requires_grad and is_grad_enabled():
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        raise RuntimeError(f"Can't call numpy() on Tensor that has {self._BIT} bit set. "
                           f"Use tensor.{self._RESOLVE}().numpy() instead.")


class NegView(ConjView):
    """A real tensor whose values are the negation of the memory it views: PyTorch's negative
    bit, which ``x.conj().imag`` carries. The machinery is ConjView's with negation for
    conjugation; view ops of it are copies (no bit), and it is saved as its values."""

    __slots__ = ()
    _BIT, _RESOLVE = "negative", "resolve_neg"

    @staticmethod
    def _flip(a):
        """The negated values of memory ``a`` (and back)."""
        with device_guard(gpu_elsewhere(a)):
            out = -a
            if type(out) is not type(a):        # (a 0-dim array negates to a scalar)
                out = a.copy()
                out *= -1
        return out

    def __reduce_ex__(self, protocol):
        """Pickled as its values, a plain tensor."""
        plain = _make(self._data)
        plain._requires_grad = self._requires_grad
        return plain.__reduce_ex__(protocol)


def _rebuild_conj(memory, requires_grad):
    """Unpickle a conjugate view: of the tensor over its memory, a leaf as PyTorch's."""
    out = memory.conj()
    written_elsewhere(out)      # (its aliases in the pickle have version counters of their own)
    if requires_grad:
        out.requires_grad_()
    return out


def _version(t):
    vc = t._vc
    return None if vc is None else vc.value


# id(view) -> [version, its memory then, last array handed out, weak references to all
# handed out since]
_READS = {}
_UNHELD = 3         # getrefcount of the last array read when only _READS holds it (+ the
#                     local name and the call's argument): safe to hand out again


def _note_read(t, raw, out):
    """Remember an array handed out at this version: an in-place write goes into one of them
    (the last strongly, as ``copyto(t._data, ...)`` drops it; the others weakly)."""
    version = _version(t)
    reads = _READS.get(id(t))
    if reads is None or reads[0] != version or reads[1] is not raw:
        if reads is None:
            weakref.finalize(t, _READS.pop, id(t), None)
        _READS[id(t)] = [version, raw, out, [weakref.ref(out)]]
        return
    reads[2] = out
    reads[3] = [r for r in reads[3] if r() is not None] + [weakref.ref(out)]


# id(array) -> array: memory that tensors sharing no version counter with its conjugate views
# write (those torch.load rebuilds over one storage): such a view never reuses a read
_ELSEWHERE = weakref.WeakValueDictionary()


def written_elsewhere(t):
    """Mark the memory of conjugate view ``t`` as written by tensors with version counters of
    their own (a loaded file's aliases): its views then read it afresh every time."""
    base = _owner(_RAW.__get__(t))
    _ELSEWHERE[id(base)] = base


def _owner(a):
    while a.base is not None and hasattr(a.base, "base"):
        a = a.base
    return a


def _changed(a, before):
    """Whether array ``a`` differs from ``before``, bit for bit in either part (so a NaN left
    alone is no change, while a write beside a NaN, or of ``-0.0`` over ``0.0``, is one)."""
    bits = _BITS[a.real.dtype.itemsize]
    return bool(((a.real.view(bits) != before.real.view(bits))
                 | (a.imag.view(bits) != before.imag.view(bits))).any())


_BITS = {2: "int16", 4: "int32", 8: "int64"}    # a complex part's width -> an integer dtype


def memory(t):
    """The array ``t``'s memory holds: a conjugate view's unconjugated one, else ``t._data``."""
    return _RAW.__get__(t) if type(t) is ConjView else t._data


def set_memory(t, array):
    """Point ``t`` at the memory ``array`` (which a conjugate view keeps conjugating)."""
    if type(t) is ConjView:
        _RAW.__set__(t, array)
    else:
        t._data = array


def hold_values(t):
    """Before ``t`` changes class (made dual, or a forward-mode primal): a conjugate view is
    given its values in memory of its own, which the new class reads as they are."""
    if type(t) is ConjView:
        _RAW.__set__(t, t._data)


def stand_in(t):
    """For an in-place view op (``y.t_()``): a conjugate view of ``t``'s memory, else None."""
    if type(t) is not ConjView:
        return None
    out = _make(_RAW.__get__(t))
    out.__class__ = ConjView
    return out


def take_memory(t, new):
    """Point ``t`` at the memory of ``new`` (the view an in-place view op made)."""
    if type(new) is ConjView:
        _RAW.__set__(t, _RAW.__get__(new))
    else:
        t._data = new._data


def view_of(op, src, params, outputs):
    """Remake the outputs of view op ``op`` as PyTorch's: ``conj`` of a plain complex tensor is
    a conjugate view of its memory; a view op of a conjugate view (``conj`` aside, which gives
    back plain memory) keeps the bit: the dispatcher runs a ``view=True`` op on the unconjugated
    memory (``memory`` in ``_prepare``), other outputs (made from the values read) are redone
    there. Returns ``outputs`` when they are views of ``src``'s memory, else None (a copy)."""
    neg = type(src) is NegView          # its view ops keep the negative bit
    if type(src) is not ConjView and not neg:   # src.conj(): outputs views src's own array
        raw = src._data
        if not hasattr(raw, "view"):        # a meta tensor: no memory to share, values kept
            return outputs
        if type(outputs) is Tensor and (raw.dtype.kind == "c" or op.name == "_neg_view"):
            outputs.__class__ = ConjView if op.name == "conj" else NegView
            _RAW.__set__(outputs, raw.view())
        return outputs
    if op.name == "view_as_real" and not neg:
        raise RuntimeError(
            "view_as_real doesn't work on unresolved conjugated tensors.  To resolve the "
            "conjugate tensor so you can view it as real, use self.resolve_conj(); however, "
            "be warned that the resulting tensor will NOT alias the original.")
    if op.name == "_view_dtype" and neg:
        raise RuntimeError("torch.Tensor.view is not supported for tensors with negative bit "
                           "set when converting to a different dtype.")
    if op.name == "_view_dtype":
        raise RuntimeError("torch.Tensor.view is not supported for conjugate view tensors when "
                           "converting to a different dtype.")
    raw = _RAW.__get__(src)
    if op.name == ("_neg_view" if neg else "conj"):     # the bit undone: the memory itself
        outputs._data = raw.view()
        return outputs
    if op.name in ("conj", "_neg_view") and raw.dtype.kind == "c":
        # both bits, which no view class here carries: the values in memory of their own (a
        # copy), under the bit this op sets (so a second conj or _neg_view clears it)
        values = _RAW.__get__(outputs)
        outputs.__class__ = ConjView if op.name == "conj" else NegView
        _RAW.__set__(outputs, outputs._flip(values))
        return None
    several = type(outputs) is tuple
    outs = outputs if several else (outputs,)
    redone = None
    shared = False
    for i, o in enumerate(outs):
        a = _RAW.__get__(o)
        read = not _overlaps(a, raw)        # made from the values read, not the memory
        if read:                            # (not through the dispatcher): redo it there
            if redone is None:
                from ember.ops._dispatch import call
                redone = call(op, (src._unconjugated(),), params)
                redone = redone if several else (redone,)
            a = _RAW.__get__(redone[i])
            if not _overlaps(a, raw):
                continue                    # a copy (reshape): the values read stand
        shared = True
        if neg:         # (view_as_complex / view_as_real of one too: PyTorch keeps the bit)
            o.__class__ = NegView
            _RAW.__set__(o, a)
        elif a.dtype.kind == "c":
            o.__class__ = ConjView
            _RAW.__set__(o, a)
        elif op.name == "real":             # the same memory, the same values
            o._data = a
        else:                               # ``imag``: a view with the negative bit
            o.__class__ = NegView
            _RAW.__set__(o, a)
    return outputs if shared or several else None


def _overlaps(a, b):
    """Whether arrays ``a`` and ``b`` lie in the same memory (views of one owner)."""
    while a.base is not None:
        a = a.base
    while b.base is not None:
        b = b.base
    return a is b
