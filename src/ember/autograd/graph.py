"""The autograd graph: nodes, edges, saved tensors, gradient accumulators and hooks.

A tensor that requires grad is either a leaf (``_grad_fn is None``; its gradient is
accumulated into ``.grad`` by an ``AccumulateGrad`` node) or the ``_output_nr``-th output of
the node in ``_grad_fn``. A node's ``next_functions`` holds one ``(node, output_nr)`` edge per
differentiable input, ``(None, 0)`` where the input needs no gradient; inputs that are not
differentiable by definition (an op's ``nondifferentiable`` ones: indices, masks) have none.
``apply`` returns one gradient per edge.
"""

import itertools
import re
import sys
import threading
import weakref

from ember._conj_view import ConjView, memory, stand_in
from ember._dtype import FROM_NUMPY
from ember._hook_handles import RemovableHandle
from ember._shape import _shape
from ember._tensor import Tensor, _make, _Version
from ember.backend import device_of, loud_fp, quiet_fp, xp_for
from ember.autograd._detached import DETACHED_IN_PLACE, check_detached
from ember.autograd._grad_layout import dense_leaf, empty_grad_like, layout_copy, owned_in_layout
from ember.autograd import anomaly
from ember.autograd.grad_mode import STATE as _GRAD

__all__ = ["Node", "OpNode", "AccumulateGrad", "history", "RemovableHandle",
           "carries_gradient", "GradientEdge", "get_gradient_edge", "increment_version",
           "register_multi_grad_hook", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks", "allow_mutation_on_saved_tensors"]

_sequence = itertools.count()
_accumulators = itertools.count()
_ANOMALY = anomaly.ENABLED              # [whether anomaly mode is on], read per recorded op

_FREED = ("Trying to backward through the graph a second time (or directly access saved "
          "tensors after they have already been freed). Saved intermediate values of the graph "
          "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "
          "you need to backward through the graph a second time or if you need to access saved "
          "tensors after calling backward.")


class _HookDict(dict):
    """A dict that can be weakly referenced, holding hooks by handle id in insertion order."""

    __slots__ = ("__weakref__",)


def _add_hook(hooks, fn):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


_CPP_NAMED = frozenset(("NotImplemented", "CopyBackwards"))


class Node:
    """A backward function in the graph (``grad_fn``)."""

    # Hooks, anomaly traces and metadata are rare: they default to the class's None and land
    # in the instance dict when set, so that recording a node stores two fields, not eight.
    __slots__ = ("next_functions", "_seq", "__dict__", "__weakref__")

    n_outputs = 1
    _pre_hooks = None                   # fn(grad_outputs) for the node itself
    _tensor_pre_hooks = None            # {output_nr: OrderedDict} registered through tensors
    _retains = None                     # {output_nr: weakref to tensor} for retain_grad
    _post_hooks = None                  # fn(grad_inputs, grad_outputs)
    _trace = None                       # the forward's stack, under detect_anomaly
    _metadata = None
    _late_edges = False                 # see RoutedOpNode (ops/_recording.py)

    def __init_subclass__(cls, **kwargs):     # (one with its own apply, made while profiling,
        super().__init_subclass__(**kwargs)     # is timed: the fast reshape nodes' classes)
        recorder = sys.modules.get("ember.profiler._recorder")
        if recorder is not None and "apply" in cls.__dict__:
            recorder.node_class_made(cls)

    def __init__(self, next_functions, seq=None):
        self.next_functions = next_functions
        self._seq = next(_sequence) if seq is None else seq
        if anomaly.ENABLED[0]:
            self._trace = anomaly.capture_trace()

    @property
    def metadata(self):
        """A dict for users to attach information to this node."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def name(self):
        """PyTorch-style name of the backward function, e.g. ``MulBackward0`` (the node of an
        op without a derivative is ``torch::autograd::NotImplemented``, and ``copy_``'s
        ``torch::autograd::CopyBackwards``, as PyTorch's: its hand-written C++ nodes)."""
        name = type(self).__name__
        return f"torch::autograd::{name}" if name in _CPP_NAMED else name

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    def _sequence_nr(self):
        """This node's creation number: later nodes have larger ones (counted across threads,
        and over the nodes ember's composites make, so the values differ from PyTorch's)."""
        return int(self._seq)

    def __call__(self, *grads):
        """Run this node on ``grads``: one gradient alone, several as a tuple."""
        out = tuple(self.apply(list(grads)) or ())
        return out[0] if len(out) == 1 else out

    def apply(self, grads):
        """Input gradients (one per next_function) from output gradients."""
        raise NotImplementedError

    def register_hook(self, fn):
        """Call ``fn(grad_inputs, grad_outputs)`` after this node ran."""
        if self._post_hooks is None:
            self._post_hooks = _HookDict()
        return _add_hook(self._post_hooks, fn)

    def register_prehook(self, fn):
        """Call ``fn(grad_outputs)`` before this node runs; it may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        return _add_hook(self._pre_hooks, fn)

    def _release(self):
        """Free what was saved for backward (after a backward without retain_graph)."""


Node._edges = Node.next_functions       # the slot, which the engine walks (see RoutedOpNode)


class InputMeta(tuple):
    """What a derivative may know of an input whose values were not saved: its metadata.

    A tuple ``(shape, NumPy dtype, device)``: one is recorded per input of every op that saves
    no inputs, and a tuple is four times cheaper to make than an object with fields."""

    __slots__ = ()

    @property
    def _shape(self):
        return self[0]

    @property
    def _dtype(self):
        return self[1]

    @property
    def device(self):
        return self[2]

    @property
    def shape(self):
        return _shape(self[0])

    @property
    def dtype(self):
        return FROM_NUMPY[self[1]]

    @property
    def ndim(self):
        return len(self[0])

    def dim(self):
        return len(self[0])

    def size(self, dim=None):
        return self.shape if dim is None else self[0][dim]

    def numel(self):
        return self.shape.numel()

    def is_complex(self):
        return self._dtype.kind == "c"

    def is_floating_point(self):
        return self._dtype.kind in "fV"


class OpNode(Node):
    """The backward of a registry op; one subclass per op gives it its PyTorch name."""

    __slots__ = ("_inputs", "_versions", "_params", "_in_meta", "_out")

    op = None                           # set on each per-op subclass
    # True once backward freed the saved values, or the Packed of saved_tensors_hooks: set
    # on the instance (its dict) only then, one store fewer per recorded op
    _released = False
    _kept_output = False                # set on a released node that had kept its output
    _param_versions = None              # see checking_params (set on the instance)
    _kept = None                        # what the forward kept (NOTE [Kept values]), a tuple
    _out_history = None                 # (weakref to grad_fn, output_nr) of an output saved by
                                        # an in-place op on a view (ops/_inplace.py)

    def __init__(self, next_functions, inputs, versions, params, in_meta, out):
        self.next_functions = next_functions        # Node.__init__, inlined: this runs per op
        self._seq = next(_sequence)
        if _ANOMALY[0]:
            self._trace = anomaly.capture_trace()
        self._inputs = inputs           # (flat inputs: tensors, scalars or InputMeta, lengths)
        self._versions = versions       # version of each saved input (None: not a tensor),
                                        # or None when only metadata was saved
        self._params = params
        self._in_meta = in_meta         # (shape, dtype) of each differentiable input
        self._out = out                 # (arrays, version counter, version) or None

    def __getattr__(self, name):
        # only for names not found otherwise: PyTorch's ``grad_fn._saved_<name>``
        if name.startswith("_saved_"):
            from ember.autograd._saved_names import read_saved
            return read_saved(self, name[7:], name)
        if name.startswith("_raw_saved_"):
            from ember.autograd._raw_saved import raw_saved
            return raw_saved(self, name[11:], name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __dir__(self):
        from ember.autograd._saved_names import saved_dir
        return saved_dir(self)

    def _lookup_saved(self, key, name):
        """What the node saved as its op's ``key`` argument (``self``: the first input;
        ``result``/``resultN``: an output); its tensors are freed after backward, its numbers
        are not, as in PyTorch."""
        op = self.op
        names = op.input_names
        key = saved_key(op, key)
        if is_result_key(key):
            if not self.keeps_output():
                raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                     f"'{name}'")
            if self._released is True:
                raise RuntimeError(_FREED)
            outs = self._unpack_output()
            return outs[int(key[6:] or 0)] if type(outs) is tuple else outs
        if key in names and self._versions is not None:
            index = names.index(key)
            if self._released is True:
                value = self.released_input(index)
                if value is _FREED_INPUT or type(value) is list and any(
                        x is _FREED_INPUT for x in value):
                    raise RuntimeError(_FREED)
            else:
                value = op.structure_inputs(self._unpack_inputs())[index]
            # an InputMeta: no needed gradient reads it, and PyTorch does not save it
            return None if isinstance(value, InputMeta) else value
        elif key in op.param_names:
            if self._released is True and self._param_versions is not None \
                    and op.param_names.index(key) in op.versioned_params:
                raise RuntimeError(_FREED)      # (x[idx]'s indices: freed as PyTorch's)
            packed = getattr(self._released, "param_template", None)    # (x[idx] hooked)
            params = self._params if packed is None else self._released.params()
            return params[op.param_names.index(key)]
        elif key == "self_sym_sizes":
            from ember.autograd._saved_sizes import saved_self_sizes
            sizes = saved_self_sizes(self)
            if sizes is not None:
                return sizes
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def keeps_output(self):
        """Whether this node saved its op's output (freed or not): pow keeps it only for a
        tensor exponent."""
        if self._out is not None:
            return True
        return self._released is True and (self.op.needs_output is True or self._kept_output)

    def released_input(self, index):
        """Input ``index`` (of the op's signature) of a released node: a number PyTorch keeps
        as a Scalar (``x ** 2.0``'s exponent), None for a tensor the node saved the metadata
        of only, ``_FREED_INPUT`` for a freed tensor, or a number PyTorch saves as one
        (``x * 2.0``'s); a list for a sequence."""
        if self._inputs is not None:        # (numbers kept: see _release)
            return self.op.structure_inputs(self._inputs)[index]
        if self.op.seq_inputs or self._versions[index] is not None \
                or self._in_meta[index] is None:
            return _FREED_INPUT
        return None

    def _release(self):
        op = self.op
        if op.saves_inputs or self._out is not None or self._kept is not None \
                or self._param_versions is not None:    # (x[idx]'s saved indices)
            self._released = True
            versions = self._versions
            if versions is not None and op.number_groups and None in versions:
                # a number of an op PyTorch takes Scalars for outlives the tensors (pow's
                # exponent), as PyTorch's saved Scalars do; the list is the node's own
                flat = self._inputs[0]
                for i, v in enumerate(versions):
                    if v is not None:
                        flat[i] = _FREED_INPUT
            else:
                self._inputs = None
            if self._out is not None and op.needs_output is not True:
                self._kept_output = True    # (needs_output is a function of the inputs)
            self._out = None
            if self._kept is not None:
                self._kept = None

    def _pack_saved(self, hooks, outputs):
        """Hand the tensors this node saved to saved-tensor hooks, keeping what they return
        (a ``Packed`` in ``_released``) in place of the tensors."""
        from ember.autograd.saved_hooks import Packed
        saved, lengths = self._inputs
        versions = self._versions       # None for inputs no needed gradient reads (not saved)
        packed = [v is not None and isinstance(x, Tensor)
                  for x, v in zip(saved, versions)] if versions is not None else ()
        inputs = [x for x, p in zip(saved, packed) if p]
        flipped = ()
        if self.op.transposed_inputs:  # PyTorch's node saved their t() (linear's weight.t())
            at = [i for i, p in enumerate(packed) if p]
            flipped = [k for k, i in enumerate(at) if i in self.op.transposed_inputs]
        outs = ()
        if self._out is not None:       # the outputs kept for backward (see _unpack_output)
            outs = [o for o, a in zip(outputs if type(outputs) is tuple else (outputs,),
                                      self._out[0]) if a is not None]
        kept = self._kept
        kept = () if kept is None else [v for v in kept if isinstance(v, Tensor)]
        params, template = (), None
        if self._param_versions is not None:    # index tensors among the params (x[idx])
            params = [t for t, _, _ in self._param_versions]
            template = _packed_params(self._params, self.op.versioned_params)
        if not inputs and not outs and not kept and not params:
            return
        last = self.op.kept_last if kept else 0
        if last < 0:                    # (counted from the start: all kept but the first)
            last += len(kept)
        self._released = Packed(hooks, inputs, outs, kept, params, template,
                                self.op.packs_reversed or _pack_order(self.op, packed),
                                last, flipped)
        if params:
            self._params = template[0]
        if inputs:
            self._inputs = ([_PACKED if p else x for x, p in zip(saved, packed)], lengths)
        if outs:
            self._out = (None,) + self._out[1:]
        if kept:
            self._kept = tuple([_PACKED if isinstance(v, Tensor) else v for v in self._kept])

    def _unpack_kept(self):
        """What the forward kept (NOTE [Kept values]), its tensors unpacked where
        saved-tensor hooks packed them; None if it kept nothing."""
        released = self._released
        if released is True:
            raise RuntimeError(_FREED)
        kept = self._kept
        if released and kept is not None:
            unpacked = iter(released.kept())
            kept = tuple([next(unpacked) if v is _PACKED else v for v in kept])
        return kept

    def _unpack_inputs(self):
        released = self._released
        if released:
            if released is True:
                raise RuntimeError(_FREED)
            saved, lengths = self._inputs       # packed: PyTorch checks no versions then
            if _PACKED not in saved:
                return self._inputs
            unpacked = iter(released.inputs())
            return [next(unpacked) if x is _PACKED else x for x in saved], lengths
        inputs = self._inputs
        if self._versions is not None:
            for t, v in zip(inputs[0], self._versions):
                if v is not None and t._vc.value != v:
                    raise RuntimeError(_modified_message(t, v))
        return inputs

    def _check_param_versions(self):
        """Raise PyTorch's error if a tensor among the params kept (``_param_versions``) was
        written in place since the call (see ``checking_params``)."""
        for t, vc, v in self._param_versions:
            if vc.value != v:
                raise RuntimeError(_modified_message(t, v))

    def _unpack_output(self):
        """The outputs the derivative reads, as tensors of this node (None for the others:
        see ``Op.derivative``'s ``outputs``), after checking none changed in place."""
        arrays, vc, version = self._out
        several = type(vc) is tuple         # one counter per output, None where not kept
        if self._released:                      # packed (a freed node fails to unpack inputs)
            unpacked = iter(self._released.output_arrays())
            arrays = [None if several and vc[nr] is None else next(unpacked)
                      for nr in range(self.n_outputs)]
        elif several:
            for nr, (counter, saved) in enumerate(zip(vc, version)):
                if counter is not None and counter.value != saved:
                    raise RuntimeError(_modified_message(None, saved, counter.value, self,
                                                         (arrays[nr], nr)))
        elif vc.value != version:
            raise RuntimeError(_modified_message(None, version, vc.value, self, (arrays[0], 0)))
        outs = []
        fn, at = self, None
        if self._out_history is not None:
            fn, at = self._out_history[0]() or self, self._out_history[1]
        for nr, arr in enumerate(arrays):
            if arr is None:
                outs.append(None)
                continue
            t = _make(arr)
            if arr.dtype.kind in "fcV":     # (not max's indices)
                t._grad_fn = fn
            t._output_nr = nr if fn is self else at
            t._vc = vc[nr] if several else vc
            outs.append(t)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _vjp(self, op, grad, args):
        """The op's vjp on the incoming gradient, with what its signature asks for."""
        if op.vjp_keywords == "kept":
            return self._vjp_kept(op, grad, args)
        if op.vjp_keywords:     # ("needs" without a saved output: apply calls the op itself)
            return op.vjp(grad, *args, *self._params, out=self._unpack_output(),
                          needs=self._needs())
        if self._out is not None:
            return op.vjp(grad, *args, *self._params, out=self._unpack_output())
        return op.vjp(grad, *args, *self._params)

    def _needs(self):
        """Which inputs want a gradient (a derivative's ``needs`` mask)."""
        metas = self._in_meta
        return (metas[0] is not None, metas[1] is not None) if len(metas) == 2 else \
            tuple([meta is not None for meta in metas])

    def _vjp_kept(self, op, grad, args):
        """``_vjp`` for a derivative that takes ``kept`` (NOTE [Kept values])."""
        kept = self._unpack_kept()
        if op.needs_mask:
            needs = self._needs()
            if self._out is not None:
                return op.vjp(grad, *args, *self._params, out=self._unpack_output(),
                              needs=needs, kept=kept)
            return op.vjp(grad, *args, *self._params, needs=needs, kept=kept)
        if self._out is not None:
            return op.vjp(grad, *args, *self._params, out=self._unpack_output(), kept=kept)
        return op.vjp(grad, *args, *self._params, kept=kept)

    def apply(self, grads, in_meta=None):
        """Input gradients from output gradients, conformed to ``in_meta`` (or the inputs')."""
        op = self.op
        if DETACHED_IN_PLACE[0]:
            check_detached(self)
        inputs = self._unpack_inputs()
        if self.n_outputs == 1:
            grad = grads[0]
        else:
            kept = op.differentiable_outputs   # (None for the others: nothing to fill)
            grad = tuple(g if g is not None or kept is not None and i not in kept
                         else _zeros_like_output(self, i) for i, g in enumerate(grads))
        flat, lengths = inputs
        args = flat if lengths is None else op.structure(flat, lengths)
        token = quiet_fp()      # fused backward kernels meet inf/nan silently, as PyTorch's do
        try:
            if op.vjp_keywords == "needs" and self._out is None:    # (the commonest case)
                result = op.vjp(grad, *args, *self._params, needs=self._needs())
            else:
                result = self._vjp(op, grad, args)
        finally:
            loud_fp(token)
        if op.n_diff_inputs == 1 and not isinstance(result, (tuple, list)):
            result = (result,)
        if op.seq_inputs:
            result = op.flatten_grads(result)
        grads = []
        for g, meta in zip(result, in_meta or self._in_meta):
            if meta is None or g is None:
                grads.append(None)
            else:                       # (conform's test, inlined: most gradients conform)
                data = g._data
                grads.append(g if data.shape == meta[0] and data.dtype == meta[1]
                             else conform(g, meta))
        if op.dropped_inputs is not None:       # one gradient per edge
            return op.kept_edges(grads, *inputs)
        return grads


_PACKED = object()                      # where a saved input was handed to a pack hook
_FREED_INPUT = object()                 # where a released node's saved input tensor was
_RESULT_SUFFIXES = ("",) + tuple(map(str, range(9)))


def _packed_params(params, positions):
    """(``params`` with ``_PACKED`` for each tensor at ``positions``, the positions)."""
    return tuple([p if i not in positions else _PACKED if isinstance(p, Tensor) else
                  type(p)([_PACKED if isinstance(e, Tensor) else e for e in p])
                  if isinstance(p, (tuple, list)) else p
                  for i, p in enumerate(params)]), positions


def _pack_order(op, packed):
    """The order saved-tensor hooks get an op's saved inputs in (positions among them), None
    for as given: PyTorch's nodes save them sorted by name (mul packs other, then self; a
    method's ``input`` is its ``self`` there)."""
    names = op.input_names
    if op.seq_inputs or len(packed) != len(names):
        return None
    if names[0] == "input" and (op.method_name or op.namespace == "special"):
        names = ("self",) + names[1:]
    at = [i for i, p in enumerate(packed) if p]
    order = sorted(range(len(at)), key=lambda k: names[at[k]])
    return None if order == sorted(order) else order


def is_result_key(key):
    """Whether ``grad_fn._saved_<key>`` names an output (``result``, ``result1``...)."""
    return key.startswith("result") and key[6:] in _RESULT_SUFFIXES


def saved_key(op, key):
    """The argument ``grad_fn._saved_<key>`` names: ``self`` is the first input, and a
    named output (max's ``indices``, svd's ``U``) is ``result<its index>``."""
    names = op.input_names
    if key == "self" and names:
        return names[0]
    fields = getattr(op.namedtuple, "_fields", ())
    if key in fields and key not in names and key not in op.param_names:
        return f"result{fields.index(key)}"
    return key


def _zeros_like_output(node, index):
    shape, np_dtype, device = node._out_meta[index]     # (see _recording._record_outputs)
    dtype = FROM_NUMPY[np_dtype]
    if not (dtype.is_floating_point or dtype.is_complex):
        return None
    if device.type == "cpu":            # (ember.zeros parses its arguments: 10x the time)
        filled = _make(xp_for(device).zeros(shape, dtype.np))
    else:
        from ember import zeros
        filled = zeros(shape, dtype=dtype, device=device)
    filled._filled_zeros = True         # known zero: see carries_gradient
    return filled


def carries_gradient(grad):
    """Whether a derivative's incoming ``grad`` (of one of several outputs) is nonzero: False
    for None and for the zeros the engine fills in for an output no gradient reached, known
    without reading them (on a GPU, reading them would wait for the device)."""
    if grad is None or grad.__dict__.get("_filled_zeros"):
        return False
    if grad.requires_grad:      # zero now, but its derivative need not be (double-vjp, jvp)
        return True
    if type(grad) is not Tensor:
        from ember.func._batched import BatchedTensor
        if type(grad) is BatchedTensor:     # under vmap: no values to read; may be nonzero
            return True
    return bool(grad._data.any())


def conform(grad, meta):
    """Sum a gradient back to its input's shape and cast it to the input's dtype."""
    shape, np_dtype = meta[0], meta[1]
    if grad._data.shape != shape:
        if grad.is_sparse:              # (an Embedding(sparse=True)'s): shaped as its input
            return grad
        grad = sum_to(grad, shape)
    if grad._data.dtype != np_dtype:
        if grad._data.dtype.kind == "c" and np_dtype.kind != "c":
            grad = grad.real
        grad = grad.to(FROM_NUMPY[np_dtype])
    return grad


def sum_to(grad, shape):
    """Sum a broadcast gradient down to ``shape`` (the inverse of broadcasting)."""
    if not shape:
        return grad.sum()               # one full sum, as PyTorch's (SumBackward0 in a graph)
    lead = grad.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and grad.shape[lead + i] != 1)
    if lead and len(dims) == lead and not _GRAD.grad_enabled:
        # only leading dims (a bias's gradient): one op; the reshape, a view as in PyTorch,
        # shows only in a graph built for the gradient (create_graph=True)
        return grad.sum(dims)
    if dims:
        grad = grad.sum(dims, keepdim=True)
    if lead:
        grad = grad.reshape(shape)
    return grad


def _modified_message(t, expected, actual=None, node=None, output=None):
    """PyTorch's error for a saved tensor ``t`` (or a node's ``output``: ``(array, index)``)
    changed in place between forward and backward; it names the op that made the tensor
    ("Sigmoid" for SigmoidBackward0), and nothing for a tensor no op made."""
    if t is not None:
        actual = t._version
        kind = _type_string(t.dtype, t.device.type == "cuda")
        shape = list(t.shape)
        if t._vc is not None and type(t._vc) is not _Version:   # (a sparse or nested one)
            kind, shape = t._vc.describe(t, kind, shape)
        fn = t._grad_fn if t._view is None else t.grad_fn     # (a view's rebuilt first)
        where = f", which is output {t._output_nr} of {_op_of(fn)}," if fn is not None else ""
    else:
        array, nr = output
        dtype = FROM_NUMPY[array.dtype]
        kind, shape = _type_string(dtype, device_of(array).type == "cuda"), list(array.shape)
        differentiable = dtype.is_floating_point or dtype.is_complex
        where = f", which is output {nr} of {_op_of(node)}," if differentiable else ""
    hint = ("the backtrace further above shows the operation that failed to compute its "
            "gradient. The variable in question was changed in there or anywhere later. Good "
            "luck!" if anomaly.ENABLED[0] else
            "enable anomaly detection to find the operation that failed to compute its "
            "gradient, with ember.autograd.set_detect_anomaly(True, check_nan=False).")
    return (f"one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{kind} {shape}]{where} is at version {actual}; "
            f"expected version {expected} instead. Hint: {hint}")


# the dtypes with a classic tensor type name ("ember.FloatTensor"); PyTorch names the
# others by backend and scalar type ("CPUComplexFloatType", "CPUBFloat16Type", "CPUBoolType")
_CLASSIC = {"Float", "Double", "Half", "Long", "Int", "Short", "Char", "Byte"}


def _type_string(dtype, gpu=False):
    """A tensor's type as PyTorch's saved-tensor version error names it (``gpu``: on a GPU,
    "ember.cuda.FloatTensor", "CUDAComplexFloatType")."""
    if dtype._torch_name in _CLASSIC:
        return f"ember.cuda.{dtype._legacy}" if gpu else f"ember.{dtype._legacy}"
    return f"{'CUDA' if gpu else 'CPU'}{dtype._torch_name}Type"


def _op_of(node):
    """The op a backward node differentiates, as PyTorch's message names it.

    PyTorch drops a trailing "Backward" and the overload number 0 only: ``EluBackward1`` is
    ``Elu1``, ``ExpBackward0`` is ``Exp``.
    """
    return re.sub(r"Backward0?(\d*)$", r"\1", node.name())


class AccumulateGrad(Node):
    """The node that adds incoming gradient into a leaf tensor's ``.grad``.

    The leaf keeps its node alive (one node per leaf, however many graphs use it) and the
    node refers back to the leaf weakly, so the pair forms no reference cycle.
    """

    __slots__ = ("_variable",)

    def __init__(self, variable):
        # runs as soon as it is ready, before other nodes, as in PyTorch; numbered apart (it
        # takes no number from the other nodes' count, Node._sequence_nr)
        Node.__init__(self, (), _FIRST + next(_accumulators))
        self._variable = weakref.ref(variable)

    def name(self):
        """``torch::autograd::AccumulateGrad``, as PyTorch names this node."""
        return "torch::autograd::AccumulateGrad"

    def _sequence_nr(self):
        """PyTorch's number for accumulators: the largest uint64."""
        return (1 << 64) - 1

    @property
    def variable(self):
        """The leaf tensor (None once it is gone)."""
        return self._variable()

    def apply(self, grads):
        var = self._variable()
        if var is not None and var._requires_grad:     # not if it stopped requiring grad
            accumulate(var, grads[0])
        return []


_FIRST = 1 << 62                # the engine runs nodes by descending _seq


def accumulate(var, grad, sole=False):
    """Add ``grad`` into ``var.grad`` (out of place while building a graph for it).
    ``sole``: nothing but the caller holds ``grad`` or its array, so a first gradient may
    take over the array instead of copying it (as PyTorch's AccumulateGrad steals it)."""
    plain = type(grad) is Tensor        # not a sparse gradient (Embedding(sparse=True)'s)
    if var._grad is None:
        if type(grad) is ConjView and grad._grad_fn is None and sole \
                and owned_in_layout(memory(grad), memory(var), _GRAD.grad_layout, False):
            var._grad = stand_in(grad)  # (PyTorch takes it over, its conjugate bit too)
        elif plain and grad._grad_fn is None:
            data = grad._data
            # (building a graph, PyTorch copies it into the leaf's strides, size-1 dims' too)
            if not (sole and grad._view is None and not _GRAD.grad_enabled
                    and owned_in_layout(data, var._data, _GRAD.grad_layout)):
                data = layout_copy(data, var._data)
            var._grad = _make(data)
        elif _GRAD.grad_enabled or not plain:
            if grad._grad_fn is None:
                grad = grad.detach().clone()
            elif plain and grad._data.strides != var._data.strides and dense_leaf(var._data):
                grad = empty_grad_like(var, dtype=grad.dtype).copy_(grad)
            elif plain and grad._view is not None:     # as PyTorch: a copy, which
                grad = grad.clone()                    # zero_grad can detach in place
            var._grad = grad
        else:
            var._grad = _make(layout_copy(grad._data, var._data))
    elif var._meta and "nested_leaf" in var._meta:     # a strided nested leaf's component
        from ember.nested import NO_STRIDES
        raise RuntimeError(NO_STRIDES)
    elif type(var._grad) is ConjView and not _GRAD.grad_enabled \
            and not var._grad.requires_grad and type(grad) in (Tensor, ConjView):
        var._grad.add_(grad)            # in place, keeping the bit (as PyTorch's)
    elif _GRAD.grad_enabled or not plain or type(var._grad) is not Tensor:
        # a dense gradient arriving on a sparse one: dense + sparse (sparse + dense refuses)
        var._grad = grad + var._grad if plain and var._grad.is_sparse else var._grad + grad
    else:       # (in place, as PyTorch's, into a .grad that requires grad too)
        data = var._grad._data
        if 0 in data.strides:           # an expanded .grad is refused, as by PyTorch's +=
            from ember.ops._overlap import check_internal_overlap
            check_internal_overlap(data)
        data += grad._data
        var._grad._bump_version()


def grad_accumulator(t):
    """The AccumulateGrad node of a leaf that requires grad (made once per leaf)."""
    meta = t._meta
    if meta is not None:
        node = meta.get("grad_acc")
        if node is not None:
            return node
    with _MAKING_ACCUMULATOR:   # (first forwards in several threads: one node all the same)
        meta = t._meta
        if meta is None:
            meta = t._meta = {}
        node = meta.get("grad_acc")
        if node is None:
            node = meta["grad_acc"] = AccumulateGrad(t)
    return node


_MAKING_ACCUMULATOR = threading.RLock()      # (RLock: a collection may run code here)


def history(t):
    """The ``(node, output_nr)`` edge through which gradient reaches ``t``."""
    if t._view is not None:
        if t._grad_fn is None and t._meta is not None and "no_grad_view" in t._meta:
            if not t._view[0].requires_grad or "own_leaf" in t._meta \
                    and t._vc.value == t._view[6]:      # (made a leaf by hand; else stale)
                return (grad_accumulator(t), 0) if t._requires_grad else (None, 0)
            if t._vc.value != t._view[6]:    # written since
                from ember.ops._inplace import REBASED, check_no_grad_view
                check_no_grad_view(t, REBASED)
            return None, 0      # a view made without grad mode: PyTorch drops its gradient
        if t._view[0]._grad_fn is not t._view[4] or t._vc.value != t._view[6]:  # moved on since
            from ember.ops._inplace import refresh_view_history
            refresh_view_history(t)
    fn = t._grad_fn
    if fn is not None:
        return fn, t._output_nr
    if t._requires_grad:
        return grad_accumulator(t), 0
    return None, 0


from ember.autograd._edges_and_multi_hooks import (GradientEdge,  # noqa: E402
                                                   get_gradient_edge, increment_version,
                                                   register_multi_grad_hook)
from ember.autograd.saved_hooks import (allow_mutation_on_saved_tensors,  # noqa: E402
                                        disable_saved_tensors_hooks, save_on_cpu,
                                        saved_tensors_hooks)
from ember.autograd._tensor_hooks import (add_retain_grad_hook, leaf_hooks,  # noqa: E402,F401
                                          move_retained_grad,
                                          post_accumulate_hooks, register_post_accumulate_hook,
                                          register_tensor_hook, tensor_hooks)
