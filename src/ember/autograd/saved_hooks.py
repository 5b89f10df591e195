"""Saved-tensor hooks: what autograd keeps for backward passes through user functions.

Inside ``saved_tensors_hooks(pack, unpack)`` every tensor an op (or a custom Function's
``save_for_backward``) keeps for backward is handed to ``pack`` at once, and only what
``pack`` returns is kept; backward gets the tensor back from ``unpack``. ``save_on_cpu``
parks saved activations in host memory this way.

Recording stays free of this when no hooks are on: a node checks one global count
(``ACTIVE``) and only then the calling thread's stack of hooks.
"""

import contextlib
import itertools
import threading

from ember.autograd.grad_mode import STATE as _GRAD

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks",
           "allow_mutation_on_saved_tensors"]

ACTIVE = [0]                            # hook contexts open in any thread
_LOCK = threading.Lock()


class _State(threading.local):
    stack = ()                          # (pack, unpack) pairs, innermost last
    disabled = None                     # the message of disable_saved_tensors_hooks
    mutation_allowed = False            # inside allow_mutation_on_saved_tensors


_STATE = _State()


def current_hooks():
    """This thread's innermost ``(pack, unpack)`` pair, or None."""
    stack = _STATE.stack
    return stack[-1] if stack else None


class saved_tensors_hooks:
    """Pack each tensor saved for backward with ``pack_hook``; unpack it with ``unpack_hook``.

    ``pack_hook(tensor)`` may return any object; ``unpack_hook(that object)`` must return a
    tensor with the original's values. Hooks nest: the innermost pair applies."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if _STATE.disabled is not None:
            raise RuntimeError(_STATE.disabled)
        _STATE.stack = _STATE.stack + ((self.pack_hook, self.unpack_hook),)
        with _LOCK:
            ACTIVE[0] += 1
        return self

    def __exit__(self, *exc):
        _STATE.stack = _STATE.stack[:-1]
        with _LOCK:
            ACTIVE[0] -= 1


class save_on_cpu(saved_tensors_hooks):
    """Keep tensors saved for backward in CPU memory (pinned if ``pin_memory``), moving them
    back to their device when backward needs them."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(tensor):
            if not pin_memory or tensor.device.type == "cpu":
                return tensor.device, tensor.cpu()
            host = tensor.new_empty(tensor.shape, device="cpu", pin_memory=True)
            host.copy_(tensor)
            return tensor.device, host

        def unpack(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks(contextlib.ContextDecorator):
    """Within this block, entering saved-tensor hooks raises ``RuntimeError(error_message)``;
    so does entering this block while hooks are on. Also a decorator."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        if _STATE.stack:
            raise RuntimeError(self.error_message)
        self._prev = _STATE.disabled
        _STATE.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        _STATE.disabled = self._prev


class _AllowMutationOnSavedContext:
    """The state of one ``allow_mutation_on_saved_tensors`` block: the saved copies."""

    def __init__(self):
        self.cloned = {}


_OUTSIDE = ("Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
            "in which the graph was originally recorded.")     # (PyTorch's words, verbatim)


@contextlib.contextmanager
def allow_mutation_on_saved_tensors():
    """Within the block, tensors saved for backward may be modified in place: backward (run
    in the same block) uses their values as they were saved."""
    # NOTE: PyTorch clones a saved tensor only when an in-place op is about to write it;
    # ember copies each saved tensor when it is saved (same values, more memory).
    if _STATE.mutation_allowed:
        raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
    ctx = _AllowMutationOnSavedContext()
    keys = itertools.count()

    def pack(tensor):
        key = next(keys)
        ctx.cloned[key] = tensor.detach().clone()
        return key

    def unpack(key):
        if key not in ctx.cloned:
            raise AssertionError(_OUTSIDE)
        return ctx.cloned[key]

    with saved_tensors_hooks(pack, unpack):
        _STATE.mutation_allowed = True
        try:
            yield ctx
        finally:
            _STATE.mutation_allowed = False
            ctx.cloned.clear()


class Packed:
    """What one node saved, as ``pack`` returned it: the index tensors among its params
    (``x[idx]``'s idx: ``Op.versioned_params``), the tensors its forward kept (NOTE [Kept
    values] in ops/_registry.py: cross_entropy's stand-in for PyTorch's saved log-softmax,
    packed first as PyTorch packs that), its saved inputs (in reverse for an op that
    ``packs_reversed``; ``reverse`` may also be the order, a list of their positions), the
    last ``kept_last`` kept tensors (nll_loss's total weight,
    which PyTorch saves after the inputs), then its outputs. The inputs at ``flipped``
    (positions among them) were packed as their ``t()``, and are unpacked transposed back."""

    __slots__ = ("_unpack", "_values", "_edges", "_kept_edges", "param_template",
                 "_param_values", "_reverse", "_kept_last", "_flipped")

    def __init__(self, hooks, inputs, outputs, kept=(), params=(), template=None,
                 reverse=False, kept_last=0, flipped=()):
        pack, self._unpack = hooks
        pack = _unmodified_by(pack)
        first = len(kept) - kept_last
        # (the t() views are made recording, so that pack sees their TBackward0 as PyTorch's)
        shown = inputs if not flipped else [t.t() if k in flipped else t
                                             for k, t in enumerate(inputs)]
        prev = _GRAD.grad_enabled
        _GRAD.grad_enabled = False      # pack hooks run without recording, as in PyTorch
        try:
            # the index tensors among the params come first (PyTorch's x[idx] packs idx)
            self._param_values = [pack(t) for t in params]
            values = [pack(t) for t in kept[:first]]
            if reverse is True:         # (gather: PyTorch packs index, then self)
                reverse = list(range(len(shown)))[::-1]
            if reverse:
                ordered = [None] * len(shown)
                for k in reverse:
                    ordered[k] = pack(shown[k])
                values += ordered
            else:
                values += [pack(t) for t in shown]
            values += [pack(t) for t in kept[first:]]
            self._values = values + [pack(t) for t in outputs]
        finally:
            _GRAD.grad_enabled = prev
        self.param_template = template  # the params, _PACKED where an index tensor was
        self._reverse = reverse
        self._kept_last = kept_last
        self._flipped = flipped
        # the history each input had, for a backward of backward through an unpacked copy
        # (an output's is its node, which gives it back), and each kept tensor's
        self._edges = [_edge_of(t) for t in inputs]
        self._kept_edges = [_edge_of(t) for t in kept]

    def _unpacked(self, value):
        from ember._tensor import Tensor
        t = self._unpack(value)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor "
                            f"but got result of type {type(t).__name__}")
        return t

    def inputs(self):
        """The saved inputs, each with the autograd history its original had."""
        start = len(self._kept_edges) - self._kept_last
        values = self._values[start:start + len(self._edges)]
        flipped = self._flipped
        order = self._reverse
        if order:                       # (unpacked in the order packed, as PyTorch does)
            got = self._with_history([values[k] for k in order],
                                     [self._edges[k] for k in order],
                                     [j for j, k in enumerate(order) if k in flipped])
            out = [None] * len(order)
            for j, k in enumerate(order):
                out[k] = got[j]
            return out
        return self._with_history(values, self._edges, flipped)

    def kept(self):
        """The kept tensors, each with the autograd history its original had."""
        first = len(self._kept_edges) - self._kept_last
        values = self._values[:first] + self._values[
            first + len(self._edges):first + len(self._edges) + self._kept_last]
        return self._with_history(values, self._kept_edges)

    def _with_history(self, values, edges, flipped=()):
        from ember._tensor import _make
        out = []
        for k, (value, edge) in enumerate(zip(values, edges)):
            t = self._unpacked(value)
            if k in flipped:            # (packed as its t(): see the class docstring)
                t = t.t()
            if edge is not None and t._grad_fn is None and not t._requires_grad:
                t = _make(t._data)
                t._grad_fn, t._output_nr = edge
            out.append(t)
        return out

    def params(self):
        """The node's params, the index tensors in them unpacked."""
        from ember.autograd.graph import _PACKED
        unpacked = iter([self._unpacked(v) for v in self._param_values])
        params, positions = self.param_template
        return tuple([p if i not in positions else next(unpacked) if p is _PACKED else
                      type(p)([next(unpacked) if e is _PACKED else e for e in p])
                      for i, p in enumerate(params)])

    def output_arrays(self):
        """The saved outputs' backend arrays."""
        start = len(self._kept_edges) + len(self._edges)
        return tuple(self._unpacked(v)._data for v in self._values[start:])


def _unmodified_by(pack):
    """``pack``, refusing (as PyTorch does) to let it change its input in place."""
    def checked(t):
        version = 0 if t._vc is None else t._vc.value
        out = pack(t)
        if (0 if t._vc is None else t._vc.value) != version:
            raise RuntimeError("A saved tensor pack hook is modifying its input in place. Tensors "
                               "provided as input to pack hook cannot be modified by in-place "
                               "operations as this can lead to unexpected side-effects. Please "
                               "open an issue if you need to perform in-place operations on the "
                               "input to a pack hook.")
        return out
    return checked


def _edge_of(t):
    if t._grad_fn is None and not t._requires_grad:
        return None
    from ember.autograd.graph import history
    return history(t)
