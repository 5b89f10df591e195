"""grad, grad_and_value, vjp, jvp, linearize: function transforms on ember's autograd engine.

NOTE [Transforms on the tape]
Each transform differentiates a fresh copy of its inputs: a new leaf, or (when the input is
already part of a graph an outer transform differentiates) an alias of it, so gradients
reach only that copy and nesting works (grad of grad, jacfwd of jacrev). Inside vmap the
copy is made batched at every active level first (an unbatched input is expanded), and the
engine runs on the values: each batch element's output depends only on its own slice of
the inputs, so one backward pass through the summed outputs gives every per-element
gradient (vmap(grad) = per-sample gradients). Cotangents that are themselves batched at a
newer level (jacrev's vmap over the rows of the identity) flow through the engine as
BatchedTensors, and each derivative's ops run their batching rules.
"""

import functools
import threading

from ember import autograd
from ember.autograd._forward_traces import (FORWARD_SHOWN, LINEARIZING, PULLING,
                                             tracing_forward, tracing_reverse)
from ember._tensor import Tensor
from ember._transform_births import note_given, tracing_births
from ember._transform_state import STATE as _TRANSFORMS
from ember._inference import is_inference
from ember.autograd.grad_mode import inference_mode, is_grad_enabled
from ember.autograd.graph import AccumulateGrad
from ember.autograd.graph import _sequence as _node_sequence
from ember.func._batched import BatchedTensor, active_levels, materialize, rewrap
from ember.func._forward_primal import (PrimalBackward, ViewBackward0, collect_dead, cut,
                                         forward_running, leaf_for, linearize_running,
                                         note_dead, outer_terms, own_pass, primal_for,
                                         release, show, showing, tracks_grad)
from ember.func._hooks import owning, pulling
from ember.func._linearize_folds import draws, fold_constants, folded_links
from ember.func._no_grad_tangents import NoGradGateBackward, settle
from ember.func._zero_terms import Terms, link_outputs
from ember.ops._reduce import TRANSFORM_BACKWARD
from ember.utils._pytree import tree_flatten, tree_unflatten, treespec_pprint

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize"]


class _Depth(threading.local):
    value = 0                   # how many transforms are differentiating right now
    levels = 0                  # how many vmap levels were active when the innermost began
    top_leaves = ()             # the outermost transform's leaves


def batched_within(tensors):
    """Whether a tensor of ``tensors`` is batched by a vmap running inside the innermost
    running transform (or outside all of them): PyTorch's ops then meet vmap's batching
    rules, not that transform's own wrappers first."""
    levels = active_levels()[_DEPTH.levels:]
    if levels:
        newer = {lv.level for lv in levels}
        for t in tensors:
            while type(t) is BatchedTensor:
                if t._level in newer:
                    return True
                t = t._value
    return False


_DEPTH = _Depth()


_FORWARD_APIS = ("jvp(", "linearize(", "jacfwd(")
_TERMS_APIS = ("jvp(", "jacfwd(", "linearize(")


def _tracing(api, leaves):
    """The context that makes custom Functions without a ``setup_context`` (or, for a
    forward-mode transform, without a ``jvp``; for jacfwd, without a vmap rule) and ops
    without a forward derivative refuse, as in PyTorch (see
    ember/autograd/_forward_traces.py)."""
    if api.startswith(_FORWARD_APIS):
        return tracing_forward(leaves, not api.startswith("linearize("),
                               api.startswith("jacfwd("))
    return tracing_reverse(leaves)


class _recording(inference_mode):
    """Where transforms run ``func`` and differentiate it: grad mode on and, as in PyTorch,
    inference mode off (inside inference mode nothing would record). ember's own code there
    may flag leaves as requiring grad; the user's may not (NOTE [Leaves made inside a
    transform] in ember/_transform_state.py)."""

    def __init__(self):
        self._mode = False

    def __enter__(self):
        inference_mode.__enter__(self)
        self._user, _TRANSFORMS.user = _TRANSFORMS.user, False

    def __exit__(self, *exc):
        _TRANSFORMS.user = self._user
        inference_mode.__exit__(self, *exc)


def _fresh(p):
    """A copy of ``p`` that gradients can be taken with respect to (see NOTE above); an
    inference tensor is copied into a normal one."""
    if tracks_grad(p):
        from ember.ops.conversion import _alias
        with own_pass():        # (the transform's own leaf, not its caller's result)
            return _alias(p)
    leaf = p.clone() if is_inference(p) else p.detach()
    if _TRANSFORMS.made is not None:    # (an outer transform's own: a captured ``p``'s detach
        _TRANSFORMS.made[id(leaf)] = leaf   # counts as captured in the births' record)
    return leaf._set_requires_grad()


class _Traced:
    """One run of ``func`` on fresh copies of ``primals``, ready for vjps and jvps."""

    def __init__(self, func, primals, has_aux, api, scalar=False, levels=None):
        self.levels = active_levels() if levels is None else levels
        flat, self.in_spec = tree_flatten(primals)
        for x in flat:
            if not isinstance(x, Tensor):
                raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
        physical = [materialize(x, self.levels) for x in flat]
        forward = api.startswith(_FORWARD_APIS)
        if forward:
            from ember.autograd.forward_ad import STATE as _DUAL
            # (PyTorch's are dual levels too, and so is linearize's trace)
            if _DUAL.level is not None or _DEPTH.value and not api.startswith(
                    "linearize(") and linearize_running():
                raise RuntimeError("Nested forward mode AD is not supported at the moment")
        top = _DEPTH.value == 0         # (only the outermost transform decides what is cut)
        outer_grad = is_grad_enabled()
        # (under the caller's no_grad, as PyTorch's, its results record nothing for it, an
        # outer transform included; linearize's jvp_fn decides at its first call)
        self.connected = (outer_grad or api.startswith("linearize(")) and (
            not top or any(tracks_grad(p) for p in physical))
        # PyTorch's linearize results of an input that requires grad require grad after it
        forward_cut = not (api.startswith("linearize(") and any(tracks_grad(p) for p in physical))
        # the user's requires_grad_ is refused in func, except in linearize's, as in PyTorch
        user = _TRANSFORMS.user if api.startswith("linearize(") else True
        self.made = self.dead = self.born = None
        self.token = object()   # whose hooks its backward passes run (NOTE [Hooks inside ...])
        shown = versions = ()
        _DEPTH.value += 1
        outer_levels, _DEPTH.levels = _DEPTH.levels, len(self.levels)
        try:
            # (PyTorch's linearize lets its function write into captured tensors)
            with _recording(), tracing_births(not api.startswith("linearize(")) as births, \
                    owning(self.token):
                self.leaves = [_fresh(p) for p in physical]
                if top:
                    _DEPTH.top_leaves = self.leaves
                # (PyTorch's linearize traces its function on views of its primals)
                shown = [primal_for(x, not forward_cut and tracks_grad(p) and "view")
                         for x, p in zip(self.leaves, physical)] \
                    if forward else [leaf_for(x) for x in self.leaves]
                births[1].update(id(x) for x in self.leaves + shown)
                if forward:     # (made for it: what ``finish`` may cut, as the results)
                    births[0].update(id(x) for x in shown)
                if forward:
                    versions = [x._version for x in shown]
                inputs = tree_unflatten([rewrap(p, self.levels) for p in shown], self.in_spec)
                tracing = _tracing(api, self.leaves)
                if top:     # the leaves func makes are this transform's own, not a closure's
                    self.made = _TRANSFORMS.made = {}
                    self.dead, self.born = [], births[0]     # (what ``finish`` may cut)
                    outer_dead = collect_dead(self.dead)
                _TRANSFORMS.user = user
                # (NOTE [Zero-tangent terms in func.jvp])
                self.parent = None if top else outer_terms()  # (nested in a forward one)
                terms = Terms(shown, self.leaves, [tracks_grad(p) for p in physical],
                              not api.startswith("linearize("), self.parent, physical,
                              None if top or self.parent is not None else _outside()) \
                    if (outer_grad or api.startswith("linearize(")) \
                    and api.startswith(_TERMS_APIS) else None
                with tracing, showing(forward and (
                        "dual" if api.startswith("linearize(") else True), terms):
                    out = func(*inputs)
        finally:
            release(shown)      # (NOTE [Forward-mode primals])
            if forward:
                note_dead(shown)    # (NOTE [Leaked forward-mode results])
            # inputs func wrote into: jvp writes their tangents into the caller's, as PyTorch
            self.written = [(i, x) for i, (x, v) in enumerate(zip(shown, versions))
                            if x._version != v]
            _DEPTH.value -= 1
            _DEPTH.levels = outer_levels
            if top:
                _TRANSFORMS.made = None
                _DEPTH.top_leaves = ()
                if self.dead is not None:
                    collect_dead(outer_dead)
        # what a forward-mode transform recorded under no_grad (NOTE [Tangents through no_grad])
        self.no_grad_results = tracing.entry[3] if type(tracing) is tracing_forward else None
        self.closure = False
        if top and outer_grad and (not self.connected or self.made or self.no_grad_results):
            # ``func`` may close over tensors that require grad (a learning rate, a
            # hypernetwork's output): the results that depend on them stay in their graph,
            # as PyTorch's do; those that depend only on the inputs and on leaves func made
            # are cut, and so are those that reach the graph only through a no_grad region
            reach = _Reach(self.leaves, self.made)
            self.closure = self.connected = any(
                reach.tensor(materialize(y, self.levels)) for y in tree_flatten(out)[0]
                if isinstance(y, Tensor))
        self.aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                where = _OUTPUT_CHECK.get(api.split("(")[0], api)
                raise RuntimeError(f"{where}: output of function f should be a tuple: (output, "
                                   f"aux) if has_aux is True")
            out, aux = out
            self.aux = self.release(aux) if forward else \
                _returned_inputs(self, aux, self.release(aux), flat)
        if self.dead and not forward_cut:
            self.dead = self.born = None    # (linearize's of an input requiring grad: kept)
        if not self.closure:
            self.made = None    # (only a closure's walks need it: don't hold func's leaves)
        self.out = out
        if scalar:
            _check_scalar(out, api)
        flat_out, self.out_spec = tree_flatten(out)
        for y in flat_out:
            if not isinstance(y, Tensor):
                raise RuntimeError(_not_a_tensor(api, y))
        self.flat_out = flat_out
        # per flat output, the roots its tangent gets a zero-gradient link to (NOTE
        # [Zero-tangent terms in func.jvp]), or None
        self.links = terms.close(flat_out) if terms is not None else None
        self.outputs = [materialize(y, self.levels) for y in flat_out]
        for x in tree_flatten(self.aux)[0] if has_aux else ():
            if not isinstance(x, Tensor):     # PyTorch's transforms return tensors as aux only
                raise RuntimeError(f"Expected tensors, got unsupported type {type(x)}")

    def finish(self, *trees):
        """The outermost transform is done: cut the results its forward-mode functions leaked;
        the graph behind the tensors of ``trees`` (what the caller may still differentiate
        through), when it is connected to the caller's, keeps their history (NOTE [Leaked
        forward-mode results])."""
        if self.dead:
            roots = [x for tree in trees for x in tree_flatten(tree)[0] if isinstance(x, Tensor)]
            cut(self.dead, self.born, roots, self.connected)
        self.dead = self.born = None

    def release(self, tree):
        """``tree``'s tensors as the caller sees them: cut from this transform's graph (and,
        in a forward-mode transform's function, its results: NOTE [Forward-mode primals])."""
        if self.connected and not self.closure:
            if FORWARD_SHOWN:
                flat, spec = tree_flatten(tree)
                own = [id(x) for x in self.leaves]
                if any(id(x) in own for x in flat):     # (an input returned as it is: an
                    from ember.ops.conversion import _alias     # alias, its own leaf kept)
                    flat = [_alias(x) if id(x) in own else x for x in flat]
                    tree = tree_unflatten(flat, spec)
                for x in flat:
                    if isinstance(x, Tensor):
                        show(x)
            return tree
        flat, spec = tree_flatten(tree)
        reach = _Reach(self.leaves, self.made) if self.closure else None   # (one walk)
        return tree_unflatten([x.detach() if isinstance(x, Tensor) and not (
            reach is not None and reach.tensor(materialize(x, self.levels)))
            else x for x in flat], spec)

    def pull(self, cotangents, create_graph):
        """The vjp: gradients of the outputs with ``cotangents`` (flat, logical) as weights."""
        roots, weights = [], []
        for y, v in zip(self.outputs, cotangents):
            if v.shape != y.shape[len(self.levels):]:
                raise RuntimeError(f"Mismatch in shape: grad_output[{len(roots)}] has a shape "
                                   f"of {v.shape} and output[{len(roots)}] has a shape of "
                                   f"{y.shape[len(self.levels):]}.")
            if tracks_grad(y):
                roots.append(y)
                weights.append(materialize(v, self.levels))
        return self.backward(roots, weights, self.leaves, create_graph, self.token)

    @staticmethod
    def backward(roots, weights, inputs, create_graph, token):
        """Gradients of ``roots`` (weighted) for ``inputs``: a backward pass of the transform
        of ``token``."""
        from ember import zeros_like
        if not roots:
            return [zeros_like(x) for x in inputs]
        TRANSFORM_BACKWARD.depth += 1
        try:
            with _recording(), own_pass(), pulling(token):
                grads = autograd.grad(roots, inputs, weights, retain_graph=True,
                                      create_graph=create_graph, allow_unused=True)
        finally:
            TRANSFORM_BACKWARD.depth -= 1
        return [zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]

    def wrap_inputs(self, flat):
        """Per-input results as the caller sees them, in the primals' structure."""
        return tree_unflatten(self.release([rewrap(g, self.levels) for g in flat]),
                              self.in_spec)


def _outside():
    """Whether a tensor's graph reaches a tensor that requires grad outside the transforms
    (for a forward-mode one nested in reverse-mode ones: NOTE [Zero-tangent terms in
    func.jvp])."""
    reach = _Reach(_DEPTH.top_leaves, _TRANSFORMS.made)

    def reaches(t):     # (by the recorded history: a transform's leaf reports none)
        node = t._grad_fn
        if node is None:
            return t._requires_grad and id(t) not in reach.own
        return reach._node(node)
    return reaches


class _Reach:
    """Whether the graph behind a tensor reaches a tensor that requires grad other than a
    transform's own: its fresh ``leaves`` and the leaves its function ``made`` (``{id:
    leaf}``). Each node is walked once however many tensors share it (a gradient per
    parameter shares most of the double-backward graph), and a walk stops at the first
    such tensor."""

    def __init__(self, leaves, made=None):
        self.own = {id(x) for x in leaves}
        if made:        # (the record holds them: their ids are theirs)
            self.own.update(made)
        self.memo = {}              # id(node) -> bool (the tensors asked about keep them alive)

    def tensor(self, t):
        """Whether ``t``'s graph reaches outside."""
        if t.grad_fn is None:
            return t.requires_grad and id(t) not in self.own
        return self._node(t.grad_fn)

    def _known(self, node):
        """The memoized answer for ``node`` (a leaf's at once), or None when unexplored."""
        known = self.memo.get(id(node))
        if known is None:
            if isinstance(node, AccumulateGrad):
                # (a leaf that is gone is none of func's: those ``made`` are held)
                var = node.variable
                known = self.memo[id(node)] = var is None or id(var) not in self.own
            elif type(node) is NoGradGateBackward:     # closed to reverse mode
                known = self.memo[id(node)] = False
        return known

    def _node(self, root):
        known = self._known(root)
        if known is not None:
            return known
        memo = self.memo
        stack = [(root, iter(root.next_functions))]     # a path from root, depth first
        while stack:
            node, children = stack[-1]
            for fn, _ in children:
                if fn is None:
                    continue
                known = self._known(fn)
                if known is None:
                    stack.append((fn, iter(fn.next_functions)))
                    break
                if known:       # so does every node on the path to it
                    for on_path, _ in stack:
                        memo[id(on_path)] = True
                    return True
            else:
                stack.pop()
                memo[id(node)] = False
        return False


# the transform whose check names a non-tensor output (jacrev runs vjp, jacfwd runs jvp)
_OUTPUT_CHECK = {"vjp": "vjp(f, *primals)", "jacrev": "vjp(f, *primals)",
                 "jvp": "jvp(f, primals, tangents)", "jacfwd": "jvp(f, primals, tangents)"}


def _not_a_tensor(api, y):
    where = _OUTPUT_CHECK.get(api.split("(")[0])
    if where is None:
        return f"Expected tensors, got unsupported type {type(y)}"
    return f"{where}: expected f(*primals) to return only tensors, got unsupported type {type(y)}"


def check_jvp_primals(flat_primals):
    """Forward mode needs primals with tangents: floating-point or complex."""
    for p in flat_primals:
        if not (p.is_floating_point() or p.is_complex()):
            raise ValueError(f"Expected primal to be floating point or complex, but got: "
                             f"{p.dtype}")


def check_vjp_outputs(flat_out):
    """Reverse mode needs outputs that can carry gradients: floating-point or complex."""
    for y in flat_out:
        if not (y.is_floating_point() or y.is_complex()):
            raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or complex "
                               f"Tensors, got Tensor with dtype {y.dtype}")


def _check_scalar(out, api):
    if not isinstance(out, Tensor):
        raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
    if out.ndim != 0:
        raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor "
                           f"with {out.ndim} dims. Maybe you wanted to use the vjp or jacrev "
                           f"APIs instead?")
    if out.is_complex():
        raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but "
                           f"got {out.dtype}")


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn[, aux])``; ``vjp_fn(cotangents)`` gives the vector-Jacobian
    products with respect to each primal (``torch.func.vjp``)."""
    traced = _Traced(func, primals, has_aux, "vjp(f, *primals)")
    check_vjp_outputs(traced.flat_out)

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        flat, spec = tree_flatten(cotangents)
        if spec != traced.out_spec:
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as "
                               f"pytree structure of outputs to the function. cotangents: "
                               f"{treespec_pprint(spec)}, primal output: "
                               f"{treespec_pprint(traced.out_spec)}")
        cg = traced.connected if create_graph is None else create_graph
        return traced.wrap_inputs(traced.pull(flat, cg))

    out = _returned_inputs(traced, traced.out, traced.release(traced.out), primals)
    traced.finish(out, traced.aux, traced.outputs)
    return (out, vjp_fn, traced.aux) if has_aux else (out, vjp_fn)


def _returned_inputs(traced, raw, out, primals):
    """``out`` (``raw`` released: a reverse-mode transform's primal outputs, or its aux) with
    each tensor that is an input as the function got it, that input: PyTorch's vjp (and
    grad's, jacrev's aux) gives back the caller's tensor itself, nested in reverse-mode
    transforms too (not inside vmap or a forward-mode function, where ember's is unwrapped
    anew)."""
    own = traced.leaves
    if traced.levels or FORWARD_SHOWN and forward_running():
        return out
    flat_raw = tree_flatten(raw)[0]
    if not any(y is x for y in flat_raw for x in own):
        return out
    flat, spec = tree_flatten(out)
    given = tree_flatten(primals)[0]
    for i, y in enumerate(flat_raw):
        for x, p in zip(own, given):
            if y is x:
                flat[i] = p
    return tree_unflatten(flat, spec)


def _argnums(argnums, nargs):
    if isinstance(argnums, int):
        nums = (argnums,)
    elif isinstance(argnums, tuple):
        if not argnums:
            raise RuntimeError("argnums must be non-empty")
        for a in argnums:
            if not isinstance(a, int):
                raise RuntimeError(f"argnum must be int, got: {type(a)}")
        nums = argnums
    else:
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    for a in nums:
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnum={a}, but only {nargs} positional inputs")
    nums = tuple(a % nargs for a in nums)
    if len(set(nums)) != len(nums):
        raise RuntimeError(f"argnums elements must be unique, got {nums}")
    return nums


def _physical(x):
    while type(x) is BatchedTensor:
        x = x._value
    return x


def split_args(func, argnums, args, kwargs):
    """``(diff_args, f)``: the arguments ``argnums`` selects and ``func`` of those alone
    (``f.settle()``: call it once the transform is done)."""
    nums = _argnums(argnums, len(args))

    given = [x for i, a in enumerate(args) if i not in nums for x in tree_flatten(a)[0]
             if isinstance(x, Tensor)]
    given += [x for x in tree_flatten(kwargs)[0] if isinstance(x, Tensor)]
    # (a vmap's given tensor: the write reaches its physical value)
    given += [_physical(x) for x in given if type(x) is BatchedTensor]
    nested = _DEPTH.value > 0

    def outer_grad():       # (scanned only after a write: a model's parameters are many)
        return nested or any(isinstance(x, Tensor) and x.requires_grad
                             for i in nums for x in tree_flatten(args[i])[0])

    plain = []

    def partial(*diff):
        full = list(args)
        for i, d in zip(nums, diff):
            full[i] = d
        note_given(given)
        plain[:] = [x for x in given if x._grad_fn is None and not x._requires_grad]
        plain.extend([x._view[0] for x in plain if x._view is not None   # (a write reaches it)
                      and x._view[0]._grad_fn is None and not x._view[0]._requires_grad])
        return func(*full, **kwargs)

    def settle():
        """The transform is done (its function may have returned such an argument, to be
        differentiated): PyTorch's function wrote into its own wrapper of the argument, so the
        caller's tensor keeps no history of a write from the differentiated inputs (the graph
        built from it keeps its edges)."""
        written = [x for x in plain if x._grad_fn is not None]
        if written and not outer_grad():
            for x in written:
                x._grad_fn, x._requires_grad = None, False
    partial.settle = settle
    return tuple(args[i] for i in nums), partial


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning ``(gradient, value)`` of the scalar ``func`` with respect to the
    arguments ``argnums`` (``((gradient, (value, aux))`` with ``has_aux``)."""
    api = "grad_and_value(f)(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        diff, partial = split_args(func, argnums, args, kwargs)
        traced = _Traced(partial, diff, has_aux, api, scalar=True)
        out = traced.out
        from ember import ones_like
        grads = traced.wrap_inputs(traced.pull([ones_like(out)], traced.connected))
        if isinstance(argnums, int):
            grads = grads[0]
        value = traced.release(out)
        traced.finish(grads, value, traced.aux)
        partial.settle()
        return (grads, (value, traced.aux)) if has_aux else (grads, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of the scalar ``func`` with respect to the arguments
    ``argnums`` (``(gradient, aux)`` with ``has_aux``) (``torch.func.grad``)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        grads, value = gv(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return wrapper


def _check_jvp_args(primals, tangents):
    api = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{api}: Expected primals to be a tuple. E.g. it should be valid to "
                           f"call f(*primals).")
    flat_p, spec_p = tree_flatten(primals)
    flat_t, spec_t = tree_flatten(tangents)
    if not isinstance(tangents, tuple) or spec_p != spec_t:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, "
                           f"tangents also must be. Got primals with structure {spec_p} and "
                           f"tangents with structure {spec_t}")
    for what, flat in (("primals", flat_p), ("tangents", flat_t)):
        for x in flat:
            if not isinstance(x, Tensor):
                raise RuntimeError(f"{api}: Expected {what} to only contain Tensors, got "
                                   f"{type(x)}")
    check_jvp_primals(flat_p)
    for p, t in zip(flat_p, flat_t):
        if p.shape != t.shape:
            raise RuntimeError(f"Trying to set a forward gradient that has a different size "
                               f"than that of the original Tensor, this is not supported. "
                               f"Tensor is of size {list(p.shape)} while the given forward "
                               f"gradient is of size {list(t.shape)}.")
    return flat_t


class _Linearized:
    """The Jacobian of a traced function as a linear map of tangents (the double-vjp trick:
    ``g(u) = J^T u`` is linear in ``u``, so the vjp of ``g`` with weights ``t`` is ``J t``)."""

    def __init__(self, traced, extra=()):
        from ember import zeros_like
        self.traced = traced
        self.outputs = traced.outputs + list(extra)     # (extra: their tangents kept apart)
        live = [y for y in self.outputs if tracks_grad(y)]
        with _recording():      # (no inference tensors: their views would record nothing)
            self.dummies = [zeros_like(y).requires_grad_() for y in live]
        # (NOTE [Tangents through no_grad], NOTE [Function jvp in the double vjp])
        with LINEARIZING, PULLING:
            self.pulled = _Traced.backward(live, self.dummies, traced.leaves, True,
                                           traced.token) if live else []
        self.live = [tracks_grad(y) for y in self.outputs]
        self.extra_tangents = []

    def push(self, flat_tangents, create_graph, release=True):
        """``J @ tangents`` (flat), in the outputs' structure; ``release``: cut from the
        transform's graph as its results are (else kept, with their graph)."""
        traced = self.traced
        tangents = [materialize(t, traced.levels) for t in flat_tangents]
        roots, weights = [], []
        for g, t in zip(self.pulled, tangents):
            if tracks_grad(g):
                roots.append(g)
                weights.append(t)
        if self.dummies:
            with LINEARIZING:
                outs = iter(_Traced.backward(roots, weights, self.dummies, create_graph,
                                             traced.token))
        from ember import zeros_like
        flat = [next(outs) if live else zeros_like(y)
                for y, live in zip(self.outputs, self.live)]
        n = len(traced.outputs)
        self.extra_tangents = [rewrap(x, traced.levels) for x in flat[n:]]
        flat = [rewrap(x, traced.levels) for x in flat[:n]]
        return tree_unflatten(traced.release(flat) if release else flat, traced.out_spec)


def _tangent_aliased(primal, tangent):
    """Whether PyTorch's jvp takes ``tangent`` as the primal's tangent itself (so a write into
    the primal reaches it) rather than a copy: so where both lay their elements out alike
    (shape, strides but those of a dimension of size 0 or 1, offset, memory's size)."""
    if isinstance(primal, BatchedTensor) or isinstance(tangent, BatchedTensor):
        return True         # (vmap's wrappers: their physical layouts say nothing of this)
    if primal.shape != tangent.shape or primal.storage_offset() != tangent.storage_offset():
        return False
    for size, a, b in zip(primal.shape, primal.stride(), tangent.stride()):
        if a != b and size > 1:
            return False
    return (primal.untyped_storage().nbytes() // primal.element_size()
            == tangent.untyped_storage().nbytes() // tangent.element_size())


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(func(*primals), J @ tangents[, aux])`` (``torch.func.jvp``).

    Computed in reverse mode by the double-vjp construction (see ``_Linearized``): ember's
    engine is reverse-mode only, and this composes with vmap and with the other transforms
    at the cost of a second backward pass.
    """
    flat_t = _check_jvp_args(primals, tangents)
    traced = _Traced(func, primals, has_aux, "jvp(f, primals, tangents)")
    lin = _Linearized(traced, [x for _, x in traced.written])
    # tangents that require grad (where the primals' graph does not reach the caller's):
    # PyTorch's tangent outputs computed from them require grad, the others not
    graded = not traced.connected and is_grad_enabled() and any(tracks_grad(t) for t in flat_t)
    out = lin.push(flat_t, traced.connected or graded, release=not graded)
    if graded:
        out = _reaching(out, traced)
    out = _not_a_tangent(out, flat_t, traced.outputs)
    if traced.links is not None:    # (NOTE [Zero-tangent terms in func.jvp])
        flat, spec = tree_flatten(out)
        out = tree_unflatten(link_outputs(traced.links, flat, traced.parent), spec)
    if traced.written:
        from ember.autograd.grad_mode import no_grad
        flat_p = tree_flatten(primals)[0]
        with no_grad():
            for (i, _), tangent in zip(traced.written, lin.extra_tangents):
                if _tangent_aliased(flat_p[i], flat_t[i]):
                    flat_t[i].copy_(tangent)
    primal_out = traced.release(traced.out)
    if traced.no_grad_results:
        settle(traced.no_grad_results)
    primal_out = _aliased(primal_out)       # (after settle: its view of a settled history)
    traced.finish(primal_out, out, traced.aux)
    return (primal_out, out, traced.aux) if has_aux else (primal_out, out)


def _reaching(tree, traced):
    """``tree``'s tensors, detached but those whose graph reaches a tensor that requires grad
    other than ``traced``'s own leaves."""
    reach = _Reach(traced.leaves, traced.made)
    flat, spec = tree_flatten(tree)
    return tree_unflatten([x.detach() if isinstance(x, Tensor) and not reach.tensor(
        materialize(x, traced.levels)) else x for x in flat], spec)


def _not_a_tangent(tree, flat_t, outputs):
    """``tree`` with a copy of each tensor that is one of the given tangents itself (the
    engine passes a gradient through an identity node unchanged: ``a + 1``'s): PyTorch's
    tangent of an op's result is a new tensor (computed from the tangents where these require
    grad); that of an input returned as it is (``outputs``: the primal results), the
    tangent itself."""
    flat, spec = tree_flatten(tree)
    if not any(any(x is t for t in flat_t) for x in flat):
        return tree
    return tree_unflatten([x.clone() if any(x is t for t in flat_t)
                           and type(y._grad_fn) not in (PrimalBackward, ViewBackward0) else x
                           for x, y in zip(flat, outputs)], spec)


def _aliased(tree):
    """jvp's primal outputs, each as an alias of itself: PyTorch's unwrap of a result from its
    dual level is a view (``AliasBackward0`` where it requires grad)."""
    from ember.ops.conversion import _alias
    flat, spec = tree_flatten(tree)
    return tree_unflatten([_alias(x) if isinstance(x, Tensor) else x for x in flat], spec)


def _check_linearize_tangents(primals, tangents):
    flat_p, spec_p = tree_flatten(primals)
    flat_t, spec_t = tree_flatten(tangents)
    if spec_p != spec_t:
        raise RuntimeError(f"Expected the tangents {spec_t} to have the same argspec as the "
                           f"primals {spec_p}")
    for i, (p, t) in enumerate(zip(flat_p, flat_t)):
        if t.shape != p.shape:
            raise RuntimeError(f"tangent:{i} with shape {t.shape} in flattened pytree doesn't "
                               f"match the shape {p.shape} of the corresponding primal.")
        if t.dtype != p.dtype:
            raise RuntimeError(f"tangent:{i} with dtype {t.dtype} in flattened pytree doesn't "
                               f"match the dtype {p.dtype} of the corresponding primal.")
    return flat_t


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is the jvp at ``primals``, reusing
    one traced run of ``func`` (``torch.func.linearize``).

    As PyTorch's, ``func`` runs twice: once on ``primals`` for the output, then traced on
    views of them for ``jvp_fn``, which is a function of the tangents alone: outside other
    transforms, its results have no path to ``primals`` (PyTorch folds what it computed from
    them into constants, which require grad where they did).
    """
    if forward_running():
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    from ember.autograd.forward_ad import refuse_batched
    flat, spec = tree_flatten(primals)
    refuse_batched("_make_dual", *flat)     # (PyTorch's linearize makes duals)
    out = func(*primals)
    alone = _DEPTH.value == 0 and all(type(p) is Tensor for p in flat)
    if alone:
        check_jvp_primals(flat)     # (PyTorch's make_dual of each, once func has run)
    traced_primals = primals
    if alone:       # (the traced run's own leaves: the constants PyTorch folds, which
        # require grad where the primals do, whatever the grad mode here)
        traced_primals = tree_unflatten([p.detach().requires_grad_() if p.requires_grad
                                         else p.detach() for p in flat], spec)
    # traced outside the vmaps inside the innermost transform (its primals are not batched
    # there): a result a closure's tensor batches there is refused, as PyTorch's unpack_dual
    levels = active_levels()[:_DEPTH.levels]

    def trace():
        traced = _Traced(func, traced_primals, False, "linearize(f, *primals)", levels=levels)
        refuse_batched("_unpack_dual", *traced.flat_out)
        lin = _Linearized(traced)
        traced.finish(traced.release(traced.out), traced.outputs, lin.pulled)
        return traced, lin
    drawn = draws()
    traced, lin = trace()
    # PyTorch's jvp_fn replays the traced graph, random ops included: where the traced run
    # drew from the default generator (dropout), each call runs ``func`` again, drawing anew
    redraw = draws() != drawn
    if redraw:
        traced = lin = None     # (each call traces its own)
    folded = []     # (PyTorch folds its constants at the first call, in that call's grad mode)

    def jvp_fn(*tangents):
        flat_t = _check_linearize_tangents(primals, tangents)
        traced_now, lin_now = trace() if redraw else (traced, lin)
        if alone:       # (a function of the tangents, recorded as the caller's grad mode says)
            if not folded:
                folded.append(is_grad_enabled() and traced_now.connected)
            record = is_grad_enabled() and (folded[0] or any(t.requires_grad for t in flat_t))
            start = next(_node_sequence)
            out = lin_now.push(flat_t, record, release=False)
            if record:
                fold_constants(out, traced_now, lin_now, start)
            if record and traced_now.links is not None:     # (NOTE [Zero-tangent terms ...])
                flat, spec = tree_flatten(out)
                out = tree_unflatten(link_outputs(folded_links(traced_now), flat), spec)
            return out
        return lin_now.push(flat_t, traced_now.connected)
    return out, jvp_fn
