"""Graph recording: the backward node of a registered op's call, and views' bookkeeping."""

import threading
import weakref

import numpy as np

from ember._conj_view import ConjView, NegView, view_of
from ember._device import CPU
from ember._inference import KEY as INFERENCE_KEY, MADE as INFERENCE_MADE, check_saved
from ember._inference import is_inference
from ember._storage_place import _storage_root
from ember._tensor import Tensor, _make, _view_tracks
from ember.autograd._forward_traces import FORWARD_SHOWN, TRACES as FORWARD_TRACES
from ember.autograd._forward_traces import grad_refused, refuse_traced_forward
from ember.autograd.engine import RawEdgeGrads, other_threads
from ember.autograd.forward_ad import STATE as FORWARD_AD
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.graph import InputMeta, Node, OpNode, grad_accumulator, history
from ember.autograd.saved_hooks import ACTIVE as SAVED_HOOKS_ACTIVE
from ember.autograd.saved_hooks import current_hooks as current_saved_hooks
from ember.backend import XP_BY_ARRAY_TYPE, device_of
from ember.backend.meta import MetaArray
from ember.ops._op_errors import not_differentiable

__all__ = ["record_checks", "rename_node", "RoutedOpNode", "gradient_t", "fast_reshape"]

_NDARRAY = np.ndarray
_NP_NUMBER = np.generic


def _record(op, flat, lengths, params, outputs, kept=None, inplace=False):
    """Attach a backward node for this call to the differentiable outputs; ``kept``: what
    its forward kept for the node (NOTE [Kept values] in _registry.py), or None; ``inplace``:
    the call is the op's in-place variant."""
    if op.record_check is not None:
        op.record_check(op, flat, params, inplace)
    if kept is not None:
        kept = _kept_values(op, flat, kept)
    edges = []
    in_meta = []            # per input: None, or (shape, NumPy dtype, ...) if it needs a gradient
    dead_view = False       # a view input that requires grad through nothing (see _inert_class)
    if op.saves_inputs:
        if INFERENCE_MADE[0]:
            check_saved(flat)
        saved = list(flat)
        versions = []
        for x in flat:
            if isinstance(x, Tensor):
                a = x._data
                if x._view is None:     # _edge(x), inlined for tensors that are no views
                    fn = x._grad_fn
                    if fn is not None:
                        edge = fn, x._output_nr
                    elif x._requires_grad:      # (grad_accumulator's lookup, inlined)
                        edge = (x._meta or _NO_META).get("grad_acc") or grad_accumulator(x), 0
                    else:
                        edge = _NO_EDGE
                else:
                    edge = _edge(x)
                    dead_view = dead_view or edge[0] is None
                edges.append(edge)
                in_meta.append(None if edge is _NO_EDGE else (a.shape, a.dtype))
                vc = x._vc
                versions.append(vc.value if vc is not None else x._shared_version().value)
            else:
                if isinstance(x, _NP_NUMBER):   # a NumPy number: saved as the parser read it
                    from ember.ops._dispatch import _as_scalar
                    saved[len(edges)] = _as_scalar(op, flat, x)
                edges.append(_NO_EDGE)
                in_meta.append(None)
                versions.append(None)
        readers = op.input_readers
        if readers is not None:
            if type(readers) is not tuple:      # fn(flat, params): this call's readers
                readers = readers(flat, params) if kept is None else \
                    readers(flat, params, kept=kept)
            _skip_unread(readers, edges, versions, saved)
    else:
        saved = []
        versions = None
        for x in flat:
            if isinstance(x, Tensor):
                a = x._data
                # _input_meta(a) and _edge(x), inlined for CPU tensors that are no views
                meta = _METAS.get((a.shape, a.dtype)) if type(a) is _NDARRAY else None
                if meta is None:
                    meta = _input_meta(a)
                saved.append(meta)
                if x._view is None:
                    fn = x._grad_fn
                    if fn is not None:
                        edge = fn, x._output_nr
                    elif x._requires_grad:      # (grad_accumulator's lookup, inlined)
                        edge = (x._meta or _NO_META).get("grad_acc") or grad_accumulator(x), 0
                    else:
                        edge = _NO_EDGE
                else:
                    edge = _edge(x)
                    dead_view = dead_view or edge[0] is None
                edges.append(edge)
                in_meta.append(None if edge is _NO_EDGE else meta)
            else:
                saved.append(x)
                edges.append(_NO_EDGE)
                in_meta.append(None)
    more = op.records_more          # one test for copied inputs and versioned params
    if more is not False:
        if more is None:            # (the op's first recorded call: declared by now)
            more = op.records_more = bool(op.copied_inputs or op.versioned_params)
        if more and op.copied_inputs and op.saves_inputs:
            _copy_saved(op.copied_inputs, flat, params, versions, saved, kept)
    if op.dropped_inputs is not None:
        edges = op.kept_edges(edges, flat, lengths)
    node_class = op.node_class
    if op.node_names is not None:
        node_class = op.node_class_for(flat, params, outputs, kept)
    if dead_view and not any([edge[0] is not None for edge in edges]):
        node_class = _inert_class(node_class)
    in_meta = tuple(in_meta)
    if versions is not None:
        versions = tuple(versions)  # a tuple of numbers: the collector untracks it
        try:        # shared (NOTE [Interned metadata]), keyed by its (shape, dtype) pairs
            in_meta = _IN_METAS.get(in_meta) or _share_meta(in_meta)
        except TypeError:           # (a backend's unhashable shape)
            pass
    if type(outputs) is tuple:
        node = _record_outputs(node_class, op, edges, saved, lengths, versions, params,
                               in_meta, outputs, flat, kept)
    else:
        saved_out = None
        needs = op.needs_output         # True, or fn(flat) for an op keeping it only at times
        if needs is True or needs and needs(flat):
            vc = outputs._shared_version()
            saved_out = ((outputs._data,), vc, vc.value)
        node = node_class(tuple(edges), (saved, lengths), versions, params, in_meta, saved_out)
        if outputs._data.dtype.kind in _DIFFERENTIABLE_KINDS:
            outputs._grad_fn = node
        elif op.integral_results_refused:
            raise RuntimeError(f"Autograd not support dtype: {outputs.dtype._torch_name}")
    if kept is not None:
        node._kept = kept
    if more and op.versioned_params:
        kept = _param_versions(op.versioned_params, params)
        if kept is not None:
            _checking_params(node, kept)
    if SAVED_HOOKS_ACTIVE[0]:
        hooks = current_saved_hooks()
        if hooks is not None:
            node._pack_saved(hooks, outputs)
    if FORWARD_SHOWN:
        FORWARD_SHOWN[-1](flat, outputs, op, lengths, params, inplace)
    return node


def _param_versions(positions, params):
    """(tensor, its version counter, its version) of each tensor in the params at
    ``positions`` (``Op.versioned_params``), for backward's check."""
    kept = []
    for i in positions:
        p = params[i]
        for t in (p if isinstance(p, (tuple, list)) else (p,)):
            if isinstance(t, Tensor):
                vc = t._vc
                if vc is None:
                    vc = t._shared_version()
                kept.append((t, vc, vc.value))
    return tuple(kept) or None


def _checking_params(node, kept):
    """Make ``node`` check at backward that no tensor of ``kept`` (see ``_param_versions``)
    was written in place since: a subclass of its class, so that other nodes pay nothing."""
    cls = type(node)
    checking = _CHECKING.get(cls)
    if checking is None:
        checking = _CHECKING[cls] = type(cls.__name__, (cls,), {
            "__slots__": (), "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "_unpack_inputs": _unpack_checked(cls._unpack_inputs)})
    node._param_versions = kept
    node.__class__ = checking


def _unpack_checked(unpack):
    """``unpack`` (a node class's ``_unpack_inputs``), then the check of params' versions
    (bound here, not looked up by the class's bases: renamed nodes subclass this class)."""
    def _unpack_inputs(self):
        inputs = unpack(self)
        if not self._released:          # (packed by saved_tensors_hooks: PyTorch checks none)
            self._check_param_versions()
        elif getattr(self._released, "param_template", None) is not None:
            self._params = self._released.params()      # (True raised in unpack)
        return inputs
    return _unpack_inputs


_CHECKING = {}                  # a node class -> its subclass checking params' versions


def _skip_unread(readers, edges, versions, saved):
    """Keep only the metadata of inputs that no needed gradient reads, unversioned (see
    ``Op.reads_inputs``): PyTorch does not save them. einsum's operands, a sequence its
    derivative reads whole, stay saved, but unversioned."""
    others = readers == ("others",)
    if others:
        readers = [[j for j in range(len(edges)) if j != i] for i in range(len(edges))]
    for i, users in enumerate(readers):
        if versions[i] is not None:
            for j in users:
                if edges[j] is not _NO_EDGE:
                    break
            else:
                versions[i] = None
                if not others:
                    a = saved[i]._data
                    saved[i] = _input_meta(a)


_MAKERS = []        # the clone and _unsafe_view ops and the dispatcher, once looked up


def _copy_saved(copied, flat, params, versions, saved, kept):
    """Save private copies of the inputs PyTorch's composite saves values computed from (see
    ``Op.copies_inputs``) in place of the inputs, or keep those it aliases unversioned (see
    ``Op.aliases_inputs``)."""
    for positions, when, copies in copied:
        if when is None or (when(flat, params) if kept is None else
                            when(flat, params, kept=kept)):
            for i in positions:
                if versions[i] is None:         # not a tensor, or no needed gradient reads it
                    continue
                x = saved[i]
                a = x._data
                if not _MAKERS:
                    from ember.ops._registry import REGISTRY, call
                    _MAKERS.extend((REGISTRY["clone"], REGISTRY["_unsafe_view"], call,
                                    REGISTRY))
                maker = _MAKERS[0] if copies else _MAKERS[1]
                args = (None,) if copies else (a.shape,)
                if type(a) is not _NDARRAY:     # (CUDA, meta: through the dispatcher)
                    copy = _MAKERS[2](maker, (x,), args)
                else:   # recorded here as clone's or _unsafe_view's node, without a dispatch
                    copy = _make(maker.forward(np, a, None) if copies else a.view())
                    # (a ForwardPrimal too; a view whose base gained history since)
                    if x._requires_grad or x._grad_fn is not None or _view_tracks(x):
                        _record(maker, (x,), None, args, copy)
                saved[i] = copy
                versions[i] = copy._shared_version().value


def _kept_values(op, flat, kept):
    """What a forward kept (NOTE [Kept values] in _registry.py) as its node keeps it: a tuple,
    its backend arrays made tensors, those ``Op.kept_as`` declares recorded as that op's
    node of their input (when the input has history: a ForwardPrimal's too)."""
    kept = [_make(v) if type(v) in XP_BY_ARRAY_TYPE else v for v in kept]
    for index, name, position in op.kept_recipes:
        x = flat[position]
        if isinstance(x, Tensor) and (x._requires_grad or x._grad_fn is not None
                                      or _view_tracks(x)):
            if not _MAKERS:
                from ember.ops._registry import REGISTRY, call
                _MAKERS.extend((REGISTRY["clone"], REGISTRY["_unsafe_view"], call, REGISTRY))
            _record(_MAKERS[3][name], (x,), None, (), kept[index])
    return tuple(kept)


_NEXT_FUNCTIONS = Node.next_functions       # the slot, under RoutedOpNode's property
_T_NODE = []                                # the class of the t() nodes routing makes
_ROUTED = {}                                # a RoutedOpNode class -> its class once routed
# routing (several writes) and an unrouted node's reading of its raw edges and metadata are
# atomic to other threads: one thread's backward may run a node another thread routes
_ROUTING = threading.Lock()
_LOCK, _UNLOCK = _ROUTING.acquire, _ROUTING.release


class RoutedOpNode(OpNode):
    """The node of an op that reads inputs through ``t()`` (``Op.reads_transposed``): its
    derivative returns the gradient of ``t(input)``. Such an input's edge is recorded as it
    is (raw), and routed through a node of the ``t`` op (TBackward0, as PyTorch's graph has)
    only once the graph is observed: ``next_functions`` read, a hook registered on this node
    (its hooks see ``t(input)``'s gradient), the node called. Until then the engine walks the
    raw edges (``Node._edges``) and the node transposes that gradient back itself, so that a
    backward runs no node for it. Routed, the node takes a subclass of its class that reads
    ``next_functions`` from the slot and runs as any OpNode (its methods are this class's,
    which a profiler may wrap); the engine adopts the t() node of one routed while a
    backward runs (see engine._inserted).

    Another thread may route the node while a backward runs it: an unrouted run returns its
    gradients with the raw edges it read (``RawEdgeGrads``), which the engine walks then."""

    __slots__ = ()
    _routed = False
    _late_edges = True                  # (the engine's test for such a node)

    @property
    def next_functions(self):
        """One ``(node, output_nr)`` edge per differentiable input."""
        return self._route()

    @next_functions.setter
    def next_functions(self, edges):
        _NEXT_FUNCTIONS.__set__(self, edges)

    def apply(self, grads):
        """The gradients of the raw edges: a transposed input's own, as its t() node would
        pass it on (with those edges, ``RawEdgeGrads``: the engine walks them, though the
        node be routed since)."""
        if self._routed:
            return OpNode.apply(self, grads)
        if other_threads():     # (else no code runs between these reads and this check)
            _LOCK()
            try:
                routed = self._routed
                if not routed:
                    edges = _NEXT_FUNCTIONS.__get__(self)
                    in_meta = self._transposed_meta()
            finally:
                _UNLOCK()
            if routed:
                return OpNode.apply(self, grads)
        else:
            edges = _NEXT_FUNCTIONS.__get__(self)
            in_meta = self._transposed_meta()
        grads = OpNode.apply(self, grads, in_meta)
        if self._routed:        # meanwhile (a saved-tensor hook read next_functions): the
            return grads        # engine walks the t() nodes now, which transpose it back
        late = self.op.transposed_inputs
        for i in late:
            g = grads[i]
            if g is not None:
                fast = _t_fast(g)
                grads[i] = g.t() if fast is None else fast
        if other_threads():     # (else nothing can route it before the engine reads _edges)
            grads = RawEdgeGrads(grads)
            # (what the late inputs lead to runs no sooner than their t() nodes would have,
            # after the leaves this node feeds directly, as PyTorch's engine orders them)
            grads.raw = (edges, late)
        return grads

    def register_hook(self, fn):
        """Call ``fn(grad_inputs, grad_outputs)`` after this node ran (routed first: its
        ``grad_inputs`` hold ``t(input)``'s gradient)."""
        if not self._routed:
            self._route()
        return OpNode.register_hook(self, fn)

    def __call__(self, *grads):
        """Run this node on ``grads`` (routed first: it returns ``t(input)``'s gradient)."""
        if not self._routed:
            self._route()
        return OpNode.__call__(self, *grads)

    def _transposed_meta(self):
        """The inputs' metadata, a transposed input's as that of its ``t()``."""
        in_meta = list(self._in_meta)
        for i in self.op.transposed_inputs:
            meta = in_meta[i]
            if meta is not None:
                in_meta[i] = (meta[0][::-1], meta[1])
        return in_meta

    def _route(self):
        _LOCK()
        try:
            if self._routed:    # by another thread, since this one read the property
                return _NEXT_FUNCTIONS.__get__(self)
            return self._route_now()
        finally:
            _UNLOCK()

    def _route_now(self):
        edges = list(_NEXT_FUNCTIONS.__get__(self))
        in_meta = self._in_meta
        t_node = _T_NODE[0] if _T_NODE else _t_node_class()
        for i in self.op.transposed_inputs:
            edge = edges[i]
            if edge[0] is None:
                continue
            shape, dtype = in_meta[i][:2]
            meta = _tuple_new(InputMeta, (shape, dtype, self._device_of(i, edge[0])))
            node = t_node((edge,), ([meta], None), None, (), [meta], None)
            node._seq = self._seq - 0.5             # made just before this node, as PyTorch's
            if node._trace is not self._trace:      # (detect_anomaly) this node's forward's
                node._trace = self._trace
            edges[i] = (node, 0)
        edges = tuple(edges)
        self._in_meta = self._transposed_meta()     # this node's gradient is t(input)'s
        _NEXT_FUNCTIONS.__set__(self, edges)
        cls = type(self)
        routed = _ROUTED.get(cls)
        if routed is None:
            routed = _ROUTED[cls] = type(cls.__name__, (cls,), {
                "__slots__": (), "next_functions": _NEXT_FUNCTIONS, "_edges": _NEXT_FUNCTIONS,
                "_routed": True})
        self.__class__ = routed
        return edges

    def _device_of(self, i, source):
        """The device of input ``i`` (for its t() node's metadata, which t's derivative does
        not read): from what this node saved, else from the leaf, else None."""
        saved = self._inputs[0][i] if self._inputs is not None else None
        if type(saved) is Tensor:
            a = saved._data
            return CPU if type(a) is _NDARRAY else device_of(a)
        if type(saved) is InputMeta:
            return saved[2]
        leaf = getattr(source, "variable", None)
        return leaf.device if leaf is not None else None


def _t_fast(g):
    """``g.t()`` of a plain CPU gradient with no graph built of it, made without a dispatch,
    else None. The t() of a transposed product (linear's gradient) is the product itself:
    handed over whole, a leaf may adopt it as its .grad rather than copy it."""
    if type(g) is Tensor and type(g._data) is _NDARRAY and not _GRAD.grad_enabled:
        a = g._data.T
        whole = a.base
        if type(whole) is _NDARRAY and whole.shape == a.shape \
                and whole.strides == a.strides and whole.dtype == a.dtype:
            a = whole
        return _make(a)
    return None


def gradient_t(g):
    """``g.t()`` for a derivative: with no graph built of the gradient, a plain CPU tensor's
    transpose is made without a dispatch (a tenth of the time)."""
    if type(g) is Tensor and type(g._data) is _NDARRAY and not _GRAD.grad_enabled:
        return _make(g._data.T)
    return g.t()


def _t_node_class():
    """The class of the t() nodes RoutedOpNode makes (made once): the ``t`` op's, whose
    derivative (``grad.t()``) it runs without a dispatch when no graph is built of the
    gradient."""
    from ember.ops._registry import REGISTRY        # (it imports this module)

    def apply(self, grads):
        fast = _t_fast(grads[0])
        return [fast] if fast is not None else OpNode.apply(self, grads)
    base = REGISTRY["t"].node_class
    _T_NODE.append(type(base.__name__, (base,), {"__slots__": (), "apply": apply}))
    return _T_NODE[0]


def fast_reshape(node):
    """``node``, a reshaping view's (``view``, ``_unsafe_view``) that a composed op recorded
    by hand, made to reshape a plain CPU gradient without a dispatch when no graph is built
    of it (as linear's views do in every backward)."""
    cls = type(node)
    fast = _FAST_RESHAPES.get(cls)
    if fast is None:
        fast = _FAST_RESHAPES[cls] = type(cls.__name__, (cls,), {"__slots__": (),
                                                                  "apply": _reshape_apply})
    node.__class__ = fast
    return node


def _reshape_apply(self, grads):
    g = grads[0]
    if type(g) is Tensor and type(g._data) is _NDARRAY and not _GRAD.grad_enabled:
        return [_make(g._data.reshape(self._in_meta[0][0]))]
    return OpNode.apply(self, grads)


_FAST_RESHAPES = {}             # a view op's node class -> its fast_reshape class


def record_checks(op, flat, params, inplace=False):
    """The refusals an op declares for recorded calls (``Op.refuse_forward_ad`` first, as
    forward-mode AD reaches a kernel before its backward could, then ``Op.refuse_grad``, then
    ``Op.refuse_complex_grad``, which an in-place call passes)."""
    if op.forward_ad_refusal is not None and FORWARD_TRACES.starts:
        refuse_traced_forward(op, flat, params, inplace)
    if op.refused_grads is not None:
        _check_refused_grads(op, flat)
    refused = op.complex_grad_refused
    if refused and not inplace and not FORWARD_AD.pushing:
        if refused is True:
            complex_grad = any(isinstance(x, Tensor) and x._data.dtype.kind == "c"
                               and grad_refused(x, True) for x in flat)
        else:               # (the result takes one input's dtype)
            complex_grad = flat[refused[0]]._data.dtype.kind == "c" and any(
                isinstance(x, Tensor) and grad_refused(x, True) for x in flat)
        if complex_grad:
            name = op.name.rpartition(".")[2]      # nn.functional.silu: silu
            raise RuntimeError(f"{name} does not support automatic differentiation for "
                               f"outputs with complex dtype.")


def unrecorded_checks(op, flat, params):
    """The checks of a call that records nothing though an input requires grad (grad mode
    off): ``Op.refuse_forward_ad``'s, inside a forward-mode transform (PyTorch's forward AD
    runs whatever the grad mode; not in inference mode, which it leaves), then the op's own
    (``Op.check_unrecorded``)."""
    if op.forward_ad_refusal is not None and FORWARD_TRACES.starts and not _GRAD.inference:
        refuse_traced_forward(op, flat, params)
    if op.own_unrecorded_check is not None:
        op.own_unrecorded_check(flat, params)


def refused_grads_first(op, flat, error):
    """Raise ``Op.refuse_grad``'s error for a recorded call whose forward raised ``error``:
    PyTorch refuses such an input before its kernel checks anything, after the checks of its
    Python or composite layer (the forward marks those: ``_op_errors.before_grad_checks``)."""
    if not getattr(error, "before_grad_checks", False):
        try:
            _check_refused_grads(op, flat)
        except RuntimeError as refused:
            raise refused from None


def _check_refused_grads(op, flat):
    for index, argument, kernel, forward in op.refused_grads:
        x = flat[index]
        if isinstance(x, Tensor) and grad_refused(x, forward):
            if callable(kernel):
                kernel = kernel(flat)
            if kernel is not None:
                raise not_differentiable(kernel, argument)


def _inert_class(cls):
    """``cls`` for a node none of whose inputs leads anywhere: its inputs' gradients are
    not computed. Only a view of a leaf made before its base required grad gets here: the
    view requires grad yet has no history, as PyTorch's, whose node computes nothing."""
    inert = _INERT.get(cls)
    if inert is None:
        inert = _INERT[cls] = type(cls.__name__, (cls,), {
            "__slots__": (), "apply": _inert_apply, "__module__": cls.__module__})
    return inert


def _inert_apply(self, grads, in_meta=None):
    return [None] * len(self._edges)


_INERT = {}                                 # an OpNode class -> its _inert_class


def _record_outputs(node_class, op, edges, saved, lengths, versions, params, in_meta,
                    outputs, flat, kept_values):
    saved_out = None
    if op.needs_output:             # (arrays, counters, versions): None for outputs not kept
        kept, n = op.saved_outputs, len(outputs)
        if kept is not None and type(kept) is not frozenset:   # fn(flat, params): this call's
            kept = kept(flat, params) if kept_values is None else \
                kept(flat, params, kept=kept_values)
        # (list comprehensions: a generator costs a frame per tuple)
        counters = tuple([o._shared_version() if kept is None or i in kept or i - n in kept
                          else None for i, o in enumerate(outputs)])
        saved_out = (tuple([None if vc is None else o._data
                            for o, vc in zip(outputs, counters)]),
                     counters, tuple([None if vc is None else vc.value for vc in counters]))
    node = node_class(tuple(edges), (saved, lengths), versions, params, in_meta, saved_out)
    node.n_outputs = len(outputs)
    # each output's (shape, NumPy dtype, device), for graph._zeros_like_output: the arrays'
    # own, a quarter of the cost of the tensors' Size, dtype and device
    node._out_meta = tuple([(a.shape, a.dtype, CPU if type(a) is _NDARRAY else device_of(a))
                            for a in [o._data for o in outputs]])
    kept = op.differentiable_outputs
    for nr, o in enumerate(outputs):
        if o._data.dtype.kind in _DIFFERENTIABLE_KINDS and (kept is None or nr in kept):
            o._grad_fn = node
            o._output_nr = nr
    return node


_DIFFERENTIABLE_KINDS = "fcV"           # V: ml_dtypes' bfloat16 and float8
_NO_EDGE = (None, 0)
_NO_META = {}
_tuple_new = tuple.__new__


# NOTE [Interned metadata]: the InputMetas and the tuples of (shape, dtype) pairs that nodes
# record of their inputs are shared between nodes: each would otherwise be one more object
# per recorded op for the cyclic garbage collector to track and traverse (a tuple holding a
# NumPy dtype is never untracked). They are immutable; the caches are emptied when they grow
# large. (A tuple of InputMetas is not shared: hashing one hashes its device, slowly.)
_METAS = {}             # (shape, NumPy dtype) -> the InputMeta of a CPU array
_IN_METAS = {}          # a node's metadata of its inputs -> that tuple
_INTERNED_MAX = 4096


def _share_meta(in_meta):
    """Share the tuple ``in_meta`` from now on (NOTE [Interned metadata])."""
    if len(_IN_METAS) >= _INTERNED_MAX:
        _IN_METAS.clear()
    _IN_METAS[in_meta] = in_meta
    return in_meta


def _input_meta(a):
    """Array ``a``'s InputMeta, shared for CPU arrays (NOTE [Interned metadata])."""
    if type(a) is not _NDARRAY:
        return _tuple_new(InputMeta, (a.shape, a.dtype, device_of(a)))
    key = (a.shape, a.dtype)
    meta = _METAS.get(key)
    if meta is None:
        if len(_METAS) >= _INTERNED_MAX:
            _METAS.clear()
        meta = _METAS[key] = _tuple_new(InputMeta, (key[0], key[1], CPU))
    return meta


def _edge(x):
    """The edge through which gradient reaches tensor ``x``, or _NO_EDGE."""
    fn = x._grad_fn
    if x._view is None:     # (history's view checks are for views only; inlined in _record)
        if fn is not None:
            return fn, x._output_nr
        if x._requires_grad:
            return grad_accumulator(x), 0
        return _NO_EDGE
    if x._requires_grad or fn is not None:
        return history(x)
    if _view_tracks(x):     # its base gained history after it was made: regenerated
        edge = history(x)
        return edge if edge[0] is not None else _NO_EDGE
    return _NO_EDGE


_LAZY_VIEWS = frozenset((ConjView, NegView))        # views with PyTorch's conjugate or
_LAZY_BITS = frozenset(("conj", "_neg_view"))       # negative bit, and the ops making them


def _mark_view(op, src, params, outputs, no_grad=False):
    """Make outputs views of ``src``'s base: shared version, and a recipe to recreate them;
    True when they are inference tensors instead, which record nothing (``_alias_inference``).

    ``no_grad``: ``src`` requires grad but grad mode is off; such views may not be written to
    in place with grad mode on (see ``_inplace.check_no_grad_view``)."""
    maybe = op.view == "maybe"
    if type(src) in _LAZY_VIEWS or op.name in _LAZY_BITS:     # NOTE [Conjugate views]
        if view_of(op, src, params, outputs) is None:
            return
        maybe = False
    if INFERENCE_MADE[0] and src._meta is not None and is_inference(src):
        return _alias_inference(op, src, outputs)
    if no_grad and src._view is not None and not src._view[0].requires_grad:
        no_grad = False     # src requires grad as a leaf of its own: a view of its base's
    if no_grad:     # such a view requires grad as a leaf whose gradients are dropped
        mode = "inference mode" if _GRAD.inference else "no_grad mode"
        for o in outputs if type(outputs) is tuple else (outputs,):
            o._meta = dict(o._meta or (), no_grad_view=mode)
            o._requires_grad = o._data.dtype.kind in _DIFFERENTIABLE_KINDS
    elif not _GRAD.grad_enabled:    # of a base without grad: an error to use once the base
        _mark_no_grad_view(outputs)     # gains history too
    vc = src._vc
    if vc is None:
        vc = src._shared_version()
    view = src._view
    base = src if view is None else view[0]
    if view is not None and view[4] is not base._grad_fn and src._grad_fn is None \
            and not src._requires_grad and _GRAD.grad_enabled and _view_tracks(src):
        history(src)    # src's base gained history since src was made: regenerate src's first
    if type(outputs) is not tuple:
        if maybe and not _shares_memory(outputs._data, src._data):
            return
        outputs._vc = vc
        outputs._view = (base, src, op, params, base._grad_fn, None, vc.value)
        if view is not None and in_multi_output_view(src):
            outputs._meta = dict(outputs._meta or (), multi_output_view=True)
        return
    for i, o in enumerate(outputs):
        if maybe and not _shares_memory(o._data, src._data):
            continue
        o._vc = vc
        o._view = (base, src, op, params, base._grad_fn, i, vc.value)


def _mark_no_grad_view(outputs):
    """Record that views ``outputs`` were made with grad mode off (PyTorch's creation meta)."""
    mode = "inference mode" if _GRAD.inference else "no_grad mode"
    for o in outputs if type(outputs) is tuple else (outputs,):
        if o._data.dtype.kind in _DIFFERENTIABLE_KINDS:
            meta = o._meta
            o._meta = {"no_grad_view": mode} if meta is None else dict(meta, no_grad_view=mode)


def _alias_inference(op, src, outputs):
    """Views of an inference tensor are no views to autograd (PyTorch: ``_is_view()`` is
    False, ``_base`` None): make them inference tensors sharing ``src``'s memory instead
    (the copies a "maybe" view op such as reshape makes share nothing). Returns whether it
    made any: those record no graph, even of a source that requires grad (PyTorch's are
    leaves that do not)."""
    root = _storage_root(src)
    aliased = False
    for o in outputs if type(outputs) is tuple else (outputs,):
        if op.view == "maybe" and not _shares_memory(o._data, src._data):
            continue
        o._meta = dict(o._meta or (), storage_root=weakref.ref(root),
                       storage_array=root._data)
        o._meta[INFERENCE_KEY] = True
        aliased = True
    return aliased


def in_multi_output_view(t):
    """Whether view ``t`` is an output of an op returning several views (split, unbind), or a
    view of one: PyTorch refuses to modify those in place under autograd."""
    view = t._view
    if view[5] is not None and not view[2].independent_views:
        return True
    meta = t._meta
    return meta is not None and "multi_output_view" in meta


def _shares_memory(out, src):
    """Whether ``out`` views ``src``'s memory (NumPy records the owner as ``base``)."""
    owner = out.base
    if owner is None:
        return type(out) is MetaArray and out.layout is not None    # (a meta view's)
    if owner is src or owner is src.base:
        return True
    return bool(np.may_share_memory(out, src))


def rename_node(t, name):
    """``t``, its backward node renamed ``name``: a composite of ops standing for one of
    PyTorch's kernels (``mse_loss``'s node is MseLossBackward0) shows that kernel's name."""
    node = t._grad_fn
    if node is not None:
        key = (type(node), name)
        cls = _RENAMED.get(key)
        if cls is None:
            cls = _RENAMED[key] = type(name, (type(node),), {"__slots__": ()})
        node.__class__ = cls
    return t


_RENAMED = {}                   # (node class, name) -> the renamed subclass
