"""``grad_fn._raw_saved_<name>``: one tensor a node saved, as a ``SavedTensor`` whose
``register_hooks(pack_hook, unpack_hook)`` packs that tensor alone (PyTorch's per-tensor form
of ``saved_tensors_hooks``).

A node some of whose saved tensors have hooks of their own keeps all its saved tensors in a
``SlotPacked`` (in ``_released``, where ``saved_tensors_hooks`` keep a ``Packed``): per saved
input and kept output, the tensor as saved (checked for in-place changes when read) or what
its pack hook returned. The node reads it as it reads a ``Packed``.
"""

import weakref

from ember.autograd.grad_mode import STATE as _GRAD

__all__ = ["SavedTensor", "raw_saved"]

_FREED = ("Calling register_hooks on a saved tensor after it has been freed. Saved "
          "intermediate values of the graph are freed when you call .backward() or "
          "autograd.grad(). Specify retain_graph=True if you need to backward through the graph "
          "a second time or if you need to access saved variables after calling backward.")
_HOOKS_SET = ("Calling register_hooks on a saved tensor whose hooks have already been set. "
              "Hint: only one pair of hooks is allowed at a time.")


class SavedTensor:
    """A tensor saved for backward by a node, or None where the node did not save it."""

    __slots__ = ("_node", "_slot")

    def __init__(self, node, slot):
        self._node = node
        self._slot = slot           # ("in", flat index) or ("out", output index); None: no value

    def register_hooks(self, *hooks):
        """Pack the saved tensor with ``pack_hook`` now; ``unpack_hook`` gives it back
        whenever backward (or ``grad_fn._saved_<name>``) reads it."""
        if len(hooks) != 2 or not all(callable(h) for h in hooks):
            raise TypeError("register_hooks(): incompatible function arguments. The following "
                            "argument types are supported:\n    1. (self: SavedTensor, arg0: "
                            "Callable, arg1: Callable) -> None")
        if self._slot is None:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is "
                               "forbidden")
        released = self._node._released
        if released is True:
            raise RuntimeError(_FREED)
        if not released:
            released = SlotPacked.take_over(self._node)
        elif type(released) is not SlotPacked:      # packed by saved_tensors_hooks
            raise RuntimeError(_HOOKS_SET)
        released.pack(self._node, self._slot, *hooks)


def raw_saved(node, key, name):
    """``node._raw_saved_<key>`` (``name``): a SavedTensor for each tensor the node saves as
    its op's argument ``key`` (``self``: the first input; ``result``: the output)."""
    from ember.autograd._saved_names import raw_key, raw_transposed, wrapped_number
    from ember._tensor import Tensor
    from ember.autograd.graph import _FREED_INPUT, _PACKED, InputMeta, is_result_key, saved_key
    kind = "in_t" if raw_transposed(node, key) else "in"
    torch_key, key = key, raw_key(node, key)
    op = node.op
    names = op.input_names
    key = saved_key(op, key)
    if is_result_key(key):
        if node.keeps_output():
            return SavedTensor(node, ("out", int(key[6:] or 0)))
    elif key in op.param_names and op.param_names.index(key) in op.versioned_params:
        # x[idx]'s indices: one per entry of the tuple ``_saved_indices`` gives
        if node._param_versions is not None:
            entries, k = [], 0
            for e in node._params[op.param_names.index(key)]:
                if isinstance(e, Tensor) or e is _PACKED:
                    entries.append(SavedTensor(node, ("param", k)))
                    k += 1
                else:
                    entries.append(SavedTensor(node, None))
            return tuple(entries)
    elif key in names and node._versions is not None and not op.seq_inputs:
        index = names.index(key)
        saved = node.released_input(index) if node._released is True else node._inputs[0][index]
        if saved is _FREED_INPUT:
            return SavedTensor(node, (kind, index))
        if saved is None or isinstance(saved, InputMeta):
            return SavedTensor(node, None)      # a tensor no needed gradient reads: not saved
        if _is_saved_tensor(saved) or wrapped_number(node, torch_key, saved) is not None:
            return SavedTensor(node, (kind, index))
    raise AttributeError(f"'{type(node).__name__}' object has no attribute '{name}'")


def _is_saved_tensor(x):
    from ember._tensor import Tensor
    from ember.autograd.graph import _PACKED
    return x is _PACKED or isinstance(x, Tensor)


class SlotPacked:
    """A node's saved tensors, each as saved (``("raw", tensor or array, counter,
    version)``) or packed by its own hooks (``("hooked", packed, unpack_hook, edge)``)."""

    __slots__ = ("ins", "outs", "in_slots", "out_slots", "node", "param_entries",
                 "param_template")

    @classmethod
    def take_over(cls, node):
        """Move the tensors ``node`` saved into a new SlotPacked, in ``node._released``."""
        from ember.autograd.graph import _PACKED
        self = cls()
        self.node = weakref.ref(node)   # (for error messages; the node holds this object)
        saved, lengths = node._inputs
        versions = node._versions
        self.ins, self.in_slots = [], []
        if versions is not None:
            for i, (x, v) in enumerate(zip(saved, versions)):
                if v is not None and _is_saved_tensor(x):
                    self.ins.append(("raw", x, x._shared_version(), v))
                    self.in_slots.append(i)
            kept = set(self.in_slots)
            node._inputs = ([_PACKED if i in kept else x for i, x in enumerate(saved)], lengths)
        self.outs, self.out_slots = [], []
        if node._out is not None:
            arrays, vc, version = node._out
            several = type(vc) is tuple
            for nr in range(len(arrays)):
                counter = vc[nr] if several else vc
                if counter is not None:
                    ours = version[nr] if several else version
                    self.outs.append(("raw", arrays[nr], counter, ours))
                    self.out_slots.append(nr)
            node._out = (None,) + node._out[1:]
        self.param_entries, self.param_template = [], None
        if node._param_versions is not None:    # (x[idx]'s indices)
            from ember.autograd.graph import _packed_params
            self.param_entries = [("raw", t, vc, v) for t, vc, v in node._param_versions]
            self.param_template = _packed_params(node._params, node.op.versioned_params)
            node._params = self.param_template[0]
        node._released = self
        return self

    def pack(self, node, slot, pack_hook, unpack_hook):
        """Hand the saved tensor at ``slot`` to ``pack_hook``, keeping what it returns."""
        kind, where = slot
        transposed = kind == "in_t"     # (linear's mat2: PyTorch saves weight.t())
        if transposed:
            kind, unpack_hook = "in", _transposing(unpack_hook)
        entries, slots = (self.ins, self.in_slots) if kind == "in" else (self.outs,
                                                                          self.out_slots)
        if kind == "param":
            entries, slots = self.param_entries, range(len(self.param_entries))
        if kind == "in" and where not in slots:
            i = self._add_number(node, where)
        else:
            i = slots.index(where)
        if entries[i][0] == "hooked":
            raise RuntimeError(_HOOKS_SET)
        if kind == "in":
            tensor = self._raw_input(entries[i])
            from ember.autograd.saved_hooks import _edge_of
            edge = _edge_of(tensor)
            if transposed:
                tensor = tensor.t()
        elif kind == "param":
            tensor, edge = self._raw_input(entries[i]), None
        else:
            tensor = self._raw_output(node, entries[i], where)
            edge = None                 # an unpacked output gets its node back
        prev = _GRAD.grad_enabled
        _GRAD.grad_enabled = False      # pack hooks run without recording, as in PyTorch
        try:
            from ember.autograd.saved_hooks import _unmodified_by
            packed = _unmodified_by(pack_hook)(tensor.detach())     # (the data, no history)
        finally:
            _GRAD.grad_enabled = prev
        entries[i] = ("hooked", packed, unpack_hook, edge)

    def _add_number(self, node, where):
        """Save input ``where``, a number PyTorch's node saves as a 0-dim tensor (``x * 2``'s
        2), as that tensor, which backward then reads (and frees) as a saved input."""
        from ember.autograd._saved_names import wrapped_number
        from ember.autograd.graph import _PACKED
        saved, lengths = node._inputs
        t = wrapped_number(node, node.op.input_names[where], saved[where])
        i = sum(s < where for s in self.in_slots)
        self.ins.insert(i, ("raw", t, t._shared_version(), t._shared_version().value))
        self.in_slots.insert(i, where)
        node._inputs = ([_PACKED if j == where else x for j, x in enumerate(saved)], lengths)
        versions = list(node._versions)
        versions[where] = 0             # (freed with the tensors after backward)
        node._versions = tuple(versions)
        return i

    @staticmethod
    def _raw_input(entry):
        _, t, counter, version = entry
        if counter.value != version:
            from ember.autograd.graph import _modified_message
            raise RuntimeError(_modified_message(t, version))
        return t

    @staticmethod
    def _raw_output(node, entry, nr):
        from ember._tensor import _make
        from ember.autograd.graph import _modified_message
        _, array, counter, version = entry
        if counter.value != version:
            raise RuntimeError(_modified_message(None, version, counter.value, node,
                                                 (array, nr)))
        t = _make(array)
        t._grad_fn, t._output_nr, t._vc = node, nr, counter
        return t

    @staticmethod
    def _unpacked(entry):
        from ember._tensor import Tensor, _make
        _, packed, unpack_hook, edge = entry
        t = unpack_hook(packed)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor "
                            f"but got result of type {type(t).__name__}")
        if edge is not None and t._grad_fn is None and not t._requires_grad:
            t = _make(t._data)          # the history the saved input had
            t._grad_fn, t._output_nr = edge
        return t

    def inputs(self):
        """The saved inputs, in order (as ``Packed.inputs``)."""
        return [self._raw_input(e) if e[0] == "raw" else self._unpacked(e) for e in self.ins]

    def kept(self):
        """The kept values it packed (as ``Packed.kept``): none, they stay in ``node._kept``
        (NOTE [Kept values])."""
        return []

    def params(self):
        """The node's params, the index tensors in them unpacked (as ``Packed.params``)."""
        from ember.autograd.graph import _PACKED
        values = iter([self._raw_input(e) if e[0] == "raw" else self._unpacked(e)
                       for e in self.param_entries])
        params, positions = self.param_template
        return tuple([p if i not in positions else next(values) if p is _PACKED else
                      type(p)([next(values) if e is _PACKED else e for e in p])
                      for i, p in enumerate(params)])

    def output_arrays(self):
        """The kept outputs' arrays, in order (as ``Packed.output_arrays``)."""
        return tuple(self._raw_output(self.node(), entry, nr)._data if entry[0] == "raw"
                     else self._unpacked(entry)._data
                     for entry, nr in zip(self.outs, self.out_slots))


def _transposing(unpack_hook):
    """``unpack_hook`` for a tensor packed as its ``t()``: the node reads it back as saved."""
    def unpack(packed):
        from ember._tensor import Tensor
        t = unpack_hook(packed)
        return t.t() if isinstance(t, Tensor) else t
    return unpack
