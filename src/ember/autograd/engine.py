"""The backward engine: one loop serves ``Tensor.backward`` and ``autograd.grad``.

Nodes run once every node that feeds them gradient has run (dependency counting), leaves'
accumulators first, then the most recently created among those ready, as PyTorch's engine
orders them. Backwards may run in several threads at once, over shared leaves.
"""

import _thread
import heapq
import sys
import threading
import warnings

from ember.autograd import anomaly
from ember.autograd.graph import _FIRST, AccumulateGrad, accumulate
from ember.autograd.graph import OpNode, post_accumulate_hooks
from ember.autograd._reshaped_outputs import check_reshaped, conform_reshaped
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import restore_grad_mode, swap_grad_mode
from ember._memory_format import contiguous_format as _ROW_MAJOR
from ember.backend import SEVERAL_GPUS, device_guard, operands_gpu_elsewhere

__all__ = ["run_backward", "queue_callback", "RawEdgeGrads", "engine_will_run", "hook_state",
           "other_threads"]


def _discover(roots):
    """Count, for each node reachable from the roots, the edges that lead into it."""
    deps = {}
    seen = set()
    stack = list(dict.fromkeys(n for n, _ in roots))     # a node may own several roots
    seen.update(stack)
    while stack:
        node = stack.pop()
        for nxt, _ in node._edges:
            if nxt is None:
                continue
            deps[nxt] = deps.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return deps, seen


def _needed(nodes, target_nodes):
    """The nodes from which a target can be reached (only they need to run)."""
    needed = {}
    for start in nodes:
        if start in needed:
            continue
        stack = [(start, iter(start._edges))]
        needed[start] = start in target_nodes
        while stack:
            node, edges = stack[-1]
            for nxt, _ in edges:
                if nxt is None:
                    continue
                if nxt not in needed:
                    needed[nxt] = nxt in target_nodes
                    stack.append((nxt, iter(nxt._edges)))
                    break
                if needed[nxt]:
                    needed[node] = True
            else:
                stack.pop()
                if stack and needed[node]:
                    needed[stack[-1][0]] = True
    return {n for n, flag in needed.items() if flag}


def run_backward(roots, root_grads, retain_graph, create_graph, targets=None,
                 accumulate_into_grad=True):
    """Propagate ``root_grads`` from the ``(node, output_nr)`` roots through the graph.

    Without ``targets`` every leaf reached gets its ``.grad`` accumulated. With ``targets``
    (a list of ``(node, output_nr)``) only what leads to them runs; their gradients are
    returned in a list (``autograd.grad``), or accumulated into the tensors given in
    ``accumulate_into_grad`` when it is a list (``backward(inputs=...)``).
    """
    deps, nodes = _discover(roots)
    run_set = None
    captured = None
    target_index = None
    if targets is not None:
        target_nodes = {n for n, _ in targets}
        run_set = _needed(nodes, target_nodes)
        captured = [None] * len(targets)
        target_index = {}
        for i, key in enumerate(targets):
            target_index.setdefault(key, []).append(i)

    buffers = {}
    for (node, nr), grad in zip(roots, root_grads):
        _add_to_buffer(buffers, node, nr, grad)

    ready = []
    pushed = set()
    for node, _ in roots:
        if deps.get(node, 0) == 0 and (run_set is None or node in run_set) \
                and node not in pushed:
            pushed.add(node)
            key = -node._seq
            _push(ready, (key if key > _LEAF else _LEAF, _NAN + 0.0, node))

    prev_mode = swap_grad_mode(bool(create_graph))     # (records nothing in inference mode)
    callbacks = []
    # (what the hooks of several tensors ask of it: engine_will_run, hook_state)
    _FINAL.stacks.append((callbacks, nodes, run_set,
                          targets is not None and type(accumulate_into_grad) is not list, {}))
    try:
        # derivatives run under the caller's autocast state, as PyTorch's do: inside an
        # autocast region their matrix products compute in its dtype, and each gradient
        # leaves its node cast back to its input's dtype (graph.conform). Derivatives standing
        # for a backward kernel autocast does not list suspend it (cdist's, conv_tbc's)
        while ready:
            node = _pop(ready)[2]
            buf = buffers.pop(node, None) or [None] * node.n_outputs
            try:
                grads_in = _run_node(node, buf, retain_graph, run_set, target_index, captured,
                                     accumulate_into_grad) or ()
            except Exception:           # (its hooks' errors too, as PyTorch's engine)
                if _ANOMALY[0]:
                    _warn_failed(node)
                raise
            if node._late_edges:            # a RoutedOpNode
                late, pairs = _routed_pairs(node, grads_in)
            else:                   # (read after its hooks ran, which may route it)
                late, pairs = (), enumerate(node._edges)
            n_in = len(grads_in)
            for i, (nxt, nr) in pairs:
                if nxt is None:
                    continue
                g = grads_in[i] if i < n_in else None
                if g is not None:       # (_add_to_buffer, inlined)
                    buf = buffers.get(nxt)
                    if buf is None:
                        buf = buffers[nxt] = [None] * nxt.n_outputs
                        buf[nr] = g
                    elif buf[nr] is None:
                        buf[nr] = g
                    else:
                        try:
                            buf[nr] = buf[nr] + g
                        except RuntimeError:    # (shapes apart: a node's output reshaped)
                            check_reshaped(nxt, nr, buf[nr], g)
                            raise
                try:
                    left = deps[nxt] - 1
                except KeyError:
                    left = _inserted(nxt, run_set)
                deps[nxt] = left
                if left == 0 and (run_set is None or nxt in run_set):
                    key = -nxt._seq
                    if key < _LEAF:
                        key = _LEAF
                        if late and i in late:
                            key = 0.5 - node._seq   # when its t() node would have run
                    _push(ready, (key, _NAN + 0.0, nxt))
            grads_in = g = buf = None   # the buffers hold them now (see _held_only_here)
        while callbacks:
            callbacks.pop(0)()
    finally:
        _FINAL.stacks.pop()
        restore_grad_mode(prev_mode)
    return captured


# The ready queue orders nodes as PyTorch's heap does: by creation, latest first, leaves'
# accumulators before all (equal among themselves: then the heap's own order, which heapq's
# algorithm shares with the C++ library's; a distinct NaN in each entry, never less than
# another nor equal to it, keeps tuple comparison from ordering ties)
_LEAF = -_FIRST
_NAN = float("nan")
_push, _pop = heapq.heappush, heapq.heappop
_ANOMALY = anomaly.ENABLED              # [whether anomaly mode is on]


def _routed_pairs(node, grads_in):
    """``(late, (index, edge) pairs)`` of a RoutedOpNode that ran: the raw edges it read as it
    ran (``RawEdgeGrads``: another thread may have routed it since), else its edges (read
    after its hooks ran, which may route it; unrouted, the late ones stand for t() nodes)."""
    if type(grads_in) is RawEdgeGrads:
        edges, late = grads_in.raw
        return late, enumerate(edges)
    late = () if node._routed else node.op.transposed_inputs     # (one thread: raw edges)
    return late, enumerate(node._edges)


def _inserted(node, run_set):
    """The dependencies left of a node met on an edge after _discover: a t() node that a hook
    routed in (RoutedOpNode) while this backward ran, standing on the raw edge _discover
    counted, so that this edge is its only one."""
    if run_set is not None:
        _joins(node, run_set)
    return 0


def _joins(node, run_set):
    """Whether ``node``, met on an edge, leads to a node that must run though _needed did not
    find it (a t() node routed in since, see _inserted); then it joins ``run_set``. (A node
    _needed saw that leads to one is in ``run_set`` already.)"""
    if node is None or node in run_set or not any(nxt in run_set for nxt, _ in node._edges):
        return False
    run_set.add(node)
    return True


class RawEdgeGrads(list):
    """A RoutedOpNode's gradients for the raw edges it read as it ran, which another thread
    may have routed since (see ops/_recording.py). ``raw``: ``(edges, late)``, ``late`` the
    inputs whose edges stand for a t() node: what they lead to is made ready no sooner than
    that node would have run."""

    __slots__ = ("raw",)


class _FinalCallbacks(threading.local):
    def __init__(self):
        # per backward running in this thread: (its final callbacks, the nodes it reached,
        # those it runs (None: all), whether it is autograd.grad's, its hooks' states)
        self.stacks = []


_FINAL = _FinalCallbacks()


def queue_callback(callback):
    """Run ``callback()`` once the backward pass now running has finished its graph."""
    if not _FINAL.stacks:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    _FINAL.stacks[-1][0].append(callback)


def engine_will_run(node):
    """Whether the backward running in this thread runs ``node`` (PyTorch's
    ``_will_engine_execute_node``)."""
    if not _FINAL.stacks:
        raise RuntimeError("_will_engine_execute_node should only be called during the "
                           "backward pass")
    _, nodes, run_set, grad_only, _ = _FINAL.stacks[-1]
    if grad_only and type(node) is AccumulateGrad:
        raise RuntimeError("A leaf node was passed to _will_engine_execute_node but we are "
                           "currently running autograd.grad(). This is currently not "
                           "supported.")
    return node in nodes and (run_set is None or node in run_set)


def hook_state(key, make):
    """The state ``key`` keeps for the backward running in this thread (``make()`` the first
    time it asks): a hook over several tensors counts each backward apart, also in threads."""
    states = _FINAL.stacks[-1][4]
    state = states.get(key)
    if state is None:
        state = states[key] = make()
    return state


def _add_to_buffer(buffers, node, nr, grad):
    buf = buffers.get(node)
    if buf is None:
        buf = buffers[node] = [None] * node.n_outputs
    buf[nr] = grad if buf[nr] is None else buf[nr] + grad


def _run_node(node, buf, retain_graph, run_set, target_index, captured, accumulate_into_grad):
    """Run one node; returns its input gradients ([] for leaves, None if nothing flowed).
    It runs on the GPU its gradients are on (that GPU made current), as in PyTorch."""
    if SEVERAL_GPUS[0]:
        elsewhere = operands_gpu_elsewhere([g._data for g in buf if g is not None], _mixed)
        if elsewhere is not None:
            with device_guard(elsewhere):
                return _run_node(node, buf, retain_graph, run_set, target_index, captured,
                                 accumulate_into_grad)
    hooks = node._tensor_pre_hooks
    if hooks:       # (hooks, retained and captured gradients see the shapes recorded for a
        buf = conform_reshaped(node, buf)   # node's outputs: see _reshaped_outputs)
        for nr, fns in hooks.items():   # (as PyTorch: also given None, no gradient there)
            for fn in list(fns.values()):
                buf[nr] = _hooked(fn, buf[nr])
    if node._retains:
        buf = conform_reshaped(node, buf)
        for nr, ref in node._retains.items():
            t = ref()
            if t is not None and buf[nr] is not None:
                g = buf[nr]             # (PyTorch keeps a row-major copy of the first)
                t._grad = (g if _GRAD.grad_enabled else g.detach()).clone(
                    memory_format=_ROW_MAJOR) if t._grad is None else t._grad + g
    if target_index is not None and type(node) is not AccumulateGrad:
        # (captured before the node's own pre-hooks run, as PyTorch captures it)
        buf = conform_reshaped(node, buf)
        for nr in range(node.n_outputs):
            for i in target_index.get((node, nr), ()):
                _capture(i, buf[nr], captured, accumulate_into_grad)
        if not any(nxt in run_set for nxt, _ in node._edges) \
                and not any([_joins(nxt, run_set) for nxt, _ in node._edges]):
            # a target that leads to no other target: backward(inputs=) runs it (hooks see
            # no gradient leave it) and frees it, as PyTorch does; autograd.grad does not
            if type(accumulate_into_grad) is list:
                _run_frontier(node, buf, retain_graph)
            return None
    if type(node) is AccumulateGrad:        # (object(): see _held_only_here)
        return _run_leaf(node, buf[0], object(), target_index, captured, accumulate_into_grad)
    if node._pre_hooks:
        buf = _run_pre_hooks(node, conform_reshaped(node, buf))

    for g in buf:
        if g is not None:
            break
    else:       # no gradient flowed into this node: PyTorch runs it all the same, then frees it
        if not _calls_backward_unreached(node):     # (an op's derivative gives None then)
            grads_in = None
            if node._post_hooks:        # (its hooks see None gradients)
                grads_in = _run_post_hooks(node, [None] * len(node._edges), buf)
            if not retain_graph:
                node._release()
            return grads_in
    grads_in = node.apply(buf)      # (its errors, a NaN found too: see _warn_failed)
    if _ANOMALY[0] and anomaly.CHECK_NAN[0]:
        _check_nan(node, grads_in)
    if node._post_hooks and type(grads_in) is not RawEdgeGrads:  # (else registered since)
        if run_set is not None and isinstance(node, OpNode):
            grads_in = _unneeded_as_none(node, grads_in, run_set)
        grads_in = _run_post_hooks(node, grads_in, buf)
    if not retain_graph:
        node._release()
    return grads_in


def _calls_backward_unreached(node):
    """Whether a node no gradient reached still computes: a custom Function's backward is
    called (with zeros for its gradients, unless it set_materialize_grads(False))."""
    if isinstance(node, OpNode):
        return False
    from ember.autograd.function import BackwardFunction
    return isinstance(node, BackwardFunction)


def _unneeded_as_none(node, grads_in, run_set):
    """``grads_in`` with None for the edges that lead to no target of ``autograd.grad``: what
    a node's hooks see there, as PyTorch's kernels compute only the gradients needed (but all
    of a sequence input's, cat's or stack's, when one of them is needed)."""
    needed = [nxt is not None and (nxt in run_set or _joins(nxt, run_set))
              for nxt, _ in node._edges]
    if node.op.seq_inputs and any(needed):
        return grads_in
    return [g if keep else None for g, keep in zip(grads_in, needed)] \
        + list(grads_in[len(node._edges):])


def _run_pre_hooks(node, buf):
    """``buf`` after the node's hooks ``fn(grad_outputs)``."""
    slots = _differentiable_outputs(node)
    for fn in list(node._pre_hooks.values()):
        seen = buf if slots is None else [buf[nr] for nr in slots]
        out = fn(tuple(seen))
        if out is not None:
            seen = _hook_values(fn, out, seen)
            if slots is None:
                buf = seen
            else:
                for nr, g in zip(slots, seen):
                    buf[nr] = g
    return buf


def _run_frontier(node, buf, retain_graph):
    """Run a node none of whose input gradients is wanted: its hooks, then free it. A custom
    Function's backward is called (PyTorch calls it; what it returns goes nowhere); a
    registered op's computes nothing (its hooks see None gradients, as PyTorch's)."""
    if node._pre_hooks:
        buf = _run_pre_hooks(node, buf)
    if any(g is not None for g in buf):
        grads_in = (None,) * len(node._edges)
        if not isinstance(node, (OpNode, AccumulateGrad)):
            from ember.autograd.function import BackwardFunction
            if isinstance(node, BackwardFunction):
                grads_in = node.apply(buf)
                if _ANOMALY[0] and anomaly.CHECK_NAN[0]:
                    _check_nan(node, grads_in)
        if node._post_hooks:
            _run_post_hooks(node, grads_in, buf)
        if not retain_graph:
            node._release()


def _warn_failed(node):
    """PyTorch's anomaly-mode warning of the node whose backward (or hook) failed."""
    if node._trace is not None:
        warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that "
                      f"caused the error:\n{node._trace}", UserWarning, stacklevel=3)
    else:
        warnings.warn(f"Error detected in {node.name()}. No forward pass information "
                      f"available. Enable detect anomaly during forward pass for more "
                      f"information.", UserWarning, stacklevel=3)


def _run_post_hooks(node, grads_in, buf):
    """``grads_in`` after the node's hooks ``fn(grad_inputs, grad_outputs)``."""
    slots = _differentiable_outputs(node)
    grads_out = tuple(buf) if slots is None else tuple([buf[nr] for nr in slots])
    for fn in list(node._post_hooks.values()):
        out = fn(tuple(grads_in), grads_out)
        if out is not None:
            grads_in = _hook_values(fn, out, grads_in)
    return grads_in


def _differentiable_outputs(node):
    """The outputs of a registered op's node that its hooks see gradients of, when not all
    (None): PyTorch's leave out integer ones (indices, pivots, info) and those it marks not
    differentiable (``differentiable_outputs``); a custom Function's node shows all."""
    meta = getattr(node, "_out_meta", None) if node.n_outputs > 1 else None
    if meta is None or not isinstance(node, OpNode):
        return None
    from ember.ops._recording import _DIFFERENTIABLE_KINDS
    kept = node.op.differentiable_outputs       # (layer norm's statistics: see op())
    slots = [nr for nr, m in enumerate(meta) if m[1].kind in _DIFFERENTIABLE_KINDS
             and (kept is None or nr in kept)]
    return None if len(slots) == len(meta) else slots


def _hook_values(fn, out, grads):
    """A node hook's returned gradients (replacing ``grads``), as a list, after PyTorch's
    checks: a tuple of one value per gradient, each None or a tensor like that gradient (None
    where there was no gradient)."""
    if not isinstance(out, tuple):
        from ember.ops._dims import type_name
        raise TypeError(f"expected tuple, but hook returned '{type_name(out)}'")
    if len(out) != len(grads):
        raise RuntimeError(f"hook '{_hook_name(fn)}' has returned an incorrect number of values "
                           f"(got {len(out)}, but expected {len(grads)})")
    for grad, value in zip(grads, out):
        if value is not None:
            if grad is None:
                raise RuntimeError("can't replace a None gradient with a non-None value")
            _check_value(fn, grad, value)
    return list(out)


def _hooked(fn, grad):
    """``grad`` after the tensor hook ``fn``, which may replace it by a tensor like it."""
    out = fn(grad)
    if out is None:
        return grad
    if grad is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    _check_value(fn, grad, out)
    return out


def _check_value(fn, grad, out):
    """PyTorch's checks of a hook's value ``out`` standing for ``grad``: a tensor of its type
    (dtype and device) and size."""
    from ember._tensor import Tensor
    if not isinstance(out, Tensor):
        from ember.ops._dims import type_name
        raise TypeError(f"expected Variable, but hook returned '{type_name(out)}'")
    if out.dtype != grad.dtype or out.device != grad.device:     # (one message for both)
        raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the type of value (was "
                           f"{_type_text(grad)} got {_type_text(out)})")
    if out.shape != grad.shape:
        raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the size of value")


def _hook_name(fn):
    return getattr(fn, "__name__", "<unknown>")


# the dtypes PyTorch's messages name by their legacy type (torch.FloatTensor) on CPU and CUDA;
# the others by the backend form (CPUBoolType, CUDABFloat16Type, MetaFloatType)
_LEGACY_NAMED = frozenset(("Byte", "Char", "Short", "Int", "Long", "Half", "Float", "Double"))
_BACKEND_NAMES = {"cpu": "CPU", "cuda": "CUDA"}


def _type_text(t):
    """A tensor's type as PyTorch's hook messages print it."""
    scalar = t.dtype._legacy[:-len("Tensor")]
    device = t.device.type
    if scalar in _LEGACY_NAMED and device in ("cpu", "cuda"):
        return t.type()
    return f"{_BACKEND_NAMES.get(device, device.capitalize())}{scalar}Type"


def _mixed():
    raise RuntimeError("a backward node received gradients on two GPUs")


def _run_leaf(node, grad, probe, target_index, captured, accumulate_into_grad):
    # the node's own pre-hooks run after the leaf's hooks, and not for autograd.grad, which
    # captures the gradient before them (PyTorch runs no accumulator there)
    pre = node._pre_hooks
    if pre and target_index is not None and type(accumulate_into_grad) is not list:
        pre = None
    if grad is None:
        _run_leaf_unreached(node, pre, target_index, accumulate_into_grad)
        return []
    var = node._variable()
    meta = None if var is None else var._meta
    hooks = None
    if meta:                # (leaf_hooks, inlined; a leaf's meta holds its accumulator)
        if "grad_dtype" in meta:
            wanted = meta["grad_dtype"]             # set on the leaf (Tensor.grad_dtype)
            if wanted is not None and wanted is not grad.dtype:
                grad = grad.to(wanted)
        hooks = meta.get("hooks")
    if hooks:
        for fn in list(hooks.values()):
            grad = _hooked(fn, grad)
    if pre:
        grad = _run_pre_hooks(node, [grad])[0]
        if grad is None:
            return []
    if target_index is not None:
        for i in target_index.get((node, 0), ()):
            _capture(i, grad, captured, accumulate_into_grad)
        if node._post_hooks and type(accumulate_into_grad) is list:
            _run_post_hooks(node, [], [grad])       # (backward(inputs=) runs the accumulator)
        return []
    if var is None:                     # the leaf is gone: nobody can read its gradient
        return []
    if not var._requires_grad:          # frozen after the graph was built: no .grad
        return []
    if _GRAD.grad_enabled and grad.requires_grad:
        _warn_grad_cycle()
    # (a hook's result may be held elsewhere while the buffer holds the tensor it replaced;
    # counted before the call, whose arguments would hold grad too)
    sole = not hooks and not pre and not node._post_hooks and _held_only_here(grad, probe)
    if other_threads():     # backwards in other threads may share the leaf (as PyTorch's)
        _LOCK()
        try:
            accumulate(var, grad, sole)
        finally:
            _UNLOCK()
    else:
        accumulate(var, grad, sole)
    meta = var._meta                    # (post_accumulate_hooks, inlined)
    post = None if meta is None else meta.get("post_acc_hooks")
    if post:
        _run_post_accumulate(post, var)
    if node._post_hooks:
        _run_post_hooks(node, [], [grad])
    return []


def _run_leaf_unreached(node, pre, target_index, accumulate_into_grad):
    """A leaf's accumulator no gradient reached: as PyTorch's, its hooks all run, seeing None
    (the accumulator's own ones not for autograd.grad), and nothing accumulates."""
    var = node._variable()
    meta = None if var is None else var._meta
    hooks = None if meta is None else meta.get("hooks")
    for fn in list(hooks.values()) if hooks else ():
        _hooked(fn, None)
    if pre:
        _run_pre_hooks(node, [None])
    if var is None or not var._requires_grad or (
            target_index is not None and type(accumulate_into_grad) is not list):
        return
    post = None if meta is None else meta.get("post_acc_hooks")
    if post:
        _run_post_accumulate(post, var)
    if node._post_hooks:
        _run_post_hooks(node, [], [None])


def _held_only_here(grad, probe):
    """Whether only the engine's buffer slot and _run_leaf hold ``grad``, and only ``grad``
    holds its array: then no one (a user's root gradient, a hook that kept it, another leaf's
    pending gradient) can see that array adopted as a ``.grad``.

    ``grad`` is counted against ``probe``, a fresh object (no other thread holds it) passed
    down the same calls: what the interpreter holds per call (one more reference per call
    and argument under a frame hook such as torch dynamo's, which stops calls being inlined;
    one per local while a tracer reads ``f_locals``) counts for both, so that the difference
    allowed, measured once (_sole_refs), holds whatever hooks come and go after. (Absolute
    counts measured under such a hook let gradients held elsewhere pass as sole once it was
    gone.)"""
    if not _SOLE_REFS:
        _SOLE_REFS.extend(_sole_refs())
    return (sys.getrefcount(grad) - sys.getrefcount(probe) <= _SOLE_REFS[0]
            and sys.getrefcount(grad._data) <= _SOLE_REFS[1])


_SOLE_REFS = []
_ACCUMULATING = threading.RLock()        # (RLock: a gradient's own ops may run a backward)
_LOCK, _UNLOCK = _ACCUMULATING.acquire, _ACCUMULATING.release
# how many threads run besides the main one (the interpreter's own count, a tenth of a lock's
# cost): with none, the main thread alone runs Python code and needs no lock (a thread can
# only be started by running code)
other_threads = _thread._count


def _sole_refs():
    """What _held_only_here counts for a tensor held by one list slot, passed as _run_node
    passes it: (its count less the probe's, its array's count)."""
    import numpy as np

    from ember._tensor import _make

    def counts(grad, probe):
        return sys.getrefcount(grad) - sys.getrefcount(probe), sys.getrefcount(grad._data)

    def run_leaf(grad, probe):
        return counts(grad, probe)
    slot = [_make(np.zeros(1))]
    return run_leaf(slot[0], object())


def _run_post_accumulate(hooks, var):
    """Call the leaf's post-accumulate-grad hooks, which must return None."""
    for fn in list(hooks.values()):
        result = fn(var)
        if result is None:
            continue
        from ember._tensor import Tensor
        if not isinstance(result, Tensor):
            raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
        raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def _warn_grad_cycle():
    warnings.warn("Using backward() with create_graph=True will create a reference cycle between "
                  "the parameter and its gradient which can cause a memory leak. We recommend "
                  "using autograd.grad when creating the graph to avoid this. If you have to use "
                  "this function, make sure to reset the .grad fields of your parameters to None "
                  "after use to break the cycle and avoid the leak.", UserWarning, stacklevel=5)


def _capture(i, grad, captured, accumulate_into_grad):
    if grad is None:
        return
    if isinstance(accumulate_into_grad, list):     # backward(inputs=...)
        var = accumulate_into_grad[i]
        if getattr(var, "_grad_fn", None) is not None:     # retain_grad filled its .grad
            captured[i] = True
            return
        _LOCK()
        try:
            accumulate(var, grad)
        finally:
            _UNLOCK()
        post = post_accumulate_hooks(var)
        if post and var._grad_fn is None:
            _run_post_accumulate(post, var)
        captured[i] = True
    else:
        captured[i] = grad if captured[i] is None else captured[i] + grad


def _check_nan(node, grads):
    from ember.backend import xp_of
    for i, g in enumerate(grads):
        if g is not None and bool(xp_of(g._data).isnan(g._data).any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                               f"output.")
