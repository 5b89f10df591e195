"""Custom differentiable functions: ``class MyFn(ember.autograd.Function)``.

As in PyTorch, the ``ctx`` object handed to ``forward``/``backward`` is the graph node itself,
named ``<Function>Backward``; it saves tensors with their versions so an in-place change
after saving is caught at backward time.
"""

import functools

from ember.autograd._forward_traces import TRACES as _FORWARD_TRACES
from ember.autograd._forward_traces import check_function as _check_forward_traced
from ember.autograd._forward_traces import check_vmappable as _check_vmappable
from ember.autograd._forward_traces import PULLING as _PULLING
from ember.autograd._function_jvp import keep_for_jvp as _keep_for_jvp
from ember.autograd._function_jvp import transposed_jvp as _transposed_jvp
from ember import _inference
from ember._tensor import Tensor, _view_tracks
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import is_grad_enabled, restore_grad_mode, swap_grad_mode
from ember.autograd.forward_ad import STATE as _FORWARD_AD
from ember.autograd.graph import (_PACKED, Node, _modified_message, conform, history,
                                  move_retained_grad)
from ember.autograd.saved_hooks import ACTIVE as SAVED_HOOKS_ACTIVE
from ember.autograd.saved_hooks import Packed
from ember.autograd.saved_hooks import current_hooks as current_saved_hooks

__all__ = ["Function", "FunctionCtx", "FunctionMeta", "BackwardCFunction",
           "once_differentiable", "InplaceFunction", "NestedIOFunction"]


class FunctionCtx:
    """What ``forward`` may record for ``backward`` (mixed into the backward node)."""

    _packed = None                      # the saved tensors, when saved-tensor hooks took them
    _saved_for_forward = ()
    _in_jvp = False                     # saved_tensors reads _saved_for_forward in jvp
    _saved_output_nrs = {}              # saved tensor index -> output number, for outputs

    def save_for_backward(self, *tensors):
        """Keep tensors (or None) for backward; read them back as ``ctx.saved_tensors``."""
        self._to_save = tensors     # (checked once the call records, as PyTorch checks them)

    @property
    def saved_tensors(self):
        if self._in_jvp:
            return self._saved_for_forward
        if self._saved is None:
            from ember.autograd.graph import _FREED
            raise RuntimeError(_FREED)
        if self._packed is not None:            # PyTorch checks no versions then
            unpacked = iter(self._packed.inputs())
            return tuple(None if t is None else next(unpacked) for t, _ in self._saved)
        out = []
        for i, (t, version) in enumerate(self._saved):
            if t is not None and _version_of(t) != version:
                raise RuntimeError(self._modified_message(i, t, version))
            out.append(t)
        return tuple(out)

    def _modified_message(self, index, t, version):
        """The error for saved tensor ``index`` changed in place: an output of this call is
        named as this node's output, as PyTorch names it (not by the op that changed it)."""
        nr = self._saved_output_nrs.get(index)
        if nr is None:
            return _modified_message(t, version)
        return _modified_message(None, version, t._version, self, (t._data, nr))

    @property
    def saved_variables(self):
        """Deprecated name of ``saved_tensors``."""
        import warnings
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning,
                      stacklevel=2)
        return self.saved_tensors

    def save_for_forward(self, *tensors):
        """Keep tensors (or None) for ``jvp``, which reads them as ``ctx.saved_tensors``."""
        if not all(t is None or isinstance(t, Tensor) for t in tensors):
            raise AssertionError("save_for_forward expects all arguments to be tensors; you "
                                 "should save non-tensors as attributes on ctx.")
        self._saved_for_forward = tensors

    def mark_dirty(self, *tensors):
        """Declare inputs that ``forward`` modified in place."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        """Declare outputs that get no gradient (indices, masks)."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        """Whether missing output gradients reach ``backward`` as zeros (default) or None."""
        self._materialize = bool(value)

    def mark_shared_storage(self, *pairs):
        """Deprecated, does nothing: tensors sharing storage are tracked without it."""
        import warnings
        warnings.warn("`mark_shared_storage` is deprecated. Tensors with shared storages are "
                      "automatically tracked. Note that calls to `set_()` are not tracked",
                      FutureWarning, stacklevel=2)


class BackwardFunction(FunctionCtx, Node):
    """The node (and ctx) of one ``Function.apply`` call."""

    _function = None                    # the Function subclass, set per subclass
    _jvp_args = None                    # see NOTE [Function jvp in the double vjp]

    def __init__(self, next_functions, needs_input_grad):
        Node.__init__(self, next_functions)
        self.needs_input_grad = needs_input_grad
        self._to_save = ()
        self._saved = ()
        self._dirty = ()
        self._non_differentiable = ()
        self._materialize = True
        self._out_meta = ()
        self._in_meta = ()
        self.n_outputs = 0

    def __repr__(self):
        # a Python class, named by its module as PyTorch's are (C++ nodes print bare names)
        return f"<{type(self).__module__}.{type(self).__name__} object at {hex(id(self))}>"

    def apply(self, grads):
        if self._jvp_args is not None and _PULLING.depth and _GRAD.grad_enabled:
            return _transposed_jvp(self, grads)
        if self._materialize:
            from ember._creation import zeros
            grads = [g if g is not None or meta is None else zeros(meta[0], dtype=meta[1],
                                                                     device=meta[2])
                     for g, meta in zip(grads, self._out_meta)]
        result = user_backward(self._function)(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_inputs = len(self.needs_input_grad)
        if len(result) < n_inputs:
            raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                               f"gradients (expected {n_inputs}, got {len(result)})")
        result = result[:n_inputs] if all(r is None for r in result[n_inputs:]) else result
        if len(result) != n_inputs:
            raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                               f"gradients (expected {n_inputs}, got {len(result)})")
        for i, (g, meta) in enumerate(zip(result, self._in_meta)):
            if g is not None and not isinstance(g, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
            if g is not None and meta is False:
                raise RuntimeError(f"function {self.name()} returned a gradient different than "
                                   f"None at position {i + 1}, but the corresponding forward "
                                   f"input was not a Variable")
        # one gradient per edge: per tensor argument (non-tensor ones have no edge); one for
        # an input that needs none stays as returned (unchecked; the node's hooks see it)
        return [self._conformed(i, g) if needed and isinstance(g, Tensor) else g
                for i, (g, needed, meta) in enumerate(zip(
                    result, self.needs_input_grad, self._in_meta)) if meta is not False]

    def _conformed(self, index, grad):
        """``grad`` for input ``index`` made to fit it, as PyTorch's engine does: summed down
        to its shape where it broadcasts to ``grad``'s, cast to its dtype; a shape it does not
        broadcast to, or another device (but for a 0-d gradient, moved), is an error."""
        shape, np_dtype, device = self._in_meta[index]
        if len(shape) > grad.dim() or any(s not in (g, 1) for s, g in zip(
                reversed(shape), reversed(grad.shape))):
            raise RuntimeError(f"Function {self.name()} returned an invalid gradient at index "
                               f"{index} - got {list(grad.shape)} but expected shape "
                               f"compatible with {list(shape)}")
        if grad.device != device:
            if grad.dim():
                raise RuntimeError(f"Function {self.name()} returned an invalid gradient at "
                                   f"index {index} - expected device {device} but got "
                                   f"{grad.device}")
            grad = grad.to(device)
        return conform(grad, (shape, np_dtype))

    def _release(self):
        self._saved = None
        self._packed = None


BackwardCFunction = BackwardFunction       # PyTorch's name of the class of these nodes


def user_backward(cls):
    """The Function's backward: its ``vjp`` when that is the one overridden (an alias)."""
    vjp = cls.vjp
    if vjp is Function.vjp:
        return cls.backward
    if cls.backward is not Function.backward:
        raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is not "
                           "allowed. You should only implement one of them.")
    return vjp


class FunctionMeta(type):
    """The metaclass of Function: each subclass's graph node class is its ``_backward_cls``
    (made on first use)."""

    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)

    @property
    def _backward_cls(cls):
        return cls._node_class()


class Function(FunctionCtx, metaclass=FunctionMeta):     # (PyTorch's is a FunctionCtx too)
    """Base class of custom autograd functions: define ``forward`` and ``backward``.

    Under ``ember.func.vmap`` (and ``jacfwd``, which PyTorch runs under vmap) a function
    needs ``setup_context`` and either a ``vmap`` staticmethod, its batching rule, or
    ``generate_vmap_rule = True`` (NOTE [Custom functions under vmap]); ember's own
    functions, native ops in PyTorch, get a generated rule.
    """

    _node_classes = {}
    generate_vmap_rule = False

    def __init__(self, *args, **kwargs):
        import warnings
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions "
                      f"are all static, so you should invoke them on the class itself. "
                      f"Instantiating an autograd function will raise an error in a future "
                      f"version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is "
                           "deprecated. Please use new-style autograd function with static "
                           "forward method. (Example: https://pytorch.org/docs/stable/"
                           "autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(*args, **kwargs):
        """Compute outputs from inputs (tensors and any other arguments; ``ctx`` first unless
        the function defines ``setup_context``)."""
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Optional: save what backward needs when ``forward`` takes no ctx."""
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Gradients w.r.t. each input of forward, from the gradients of its outputs."""
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """Forward mode: the tangents of the outputs from those of the inputs."""
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @staticmethod
    def vmap(info, in_dims, *args):
        """Optional: this function's rule under ``ember.func.vmap``: ``(output, out_dims)``
        from the unbatched-view arguments, ``in_dims`` (each arg's batch dim or None) and
        ``info`` (``batch_size``, ``randomness``)."""
        raise NotImplementedError("To use autograd.Function with vmap, you must either "
                                  "override the vmap staticmethod or set "
                                  "generate_vmap_rule=True.")

    @classmethod
    def _node_class(cls):
        node = Function._node_classes.get(cls)
        if node is None:
            name = cls.__dict__.get("_node_name") or f"{cls.__name__}Backward"
            node = type(name, (BackwardFunction,), {"_function": cls, "_forward_cls": cls,
                                                    **cls.__dict__.get("_node_attrs", {})})
            Function._node_classes[cls] = node
        return node

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward and record one graph node for the call."""
        if cls.setup_context is not Function.setup_context:
            args, kwargs = _bind_forward_args(cls, args, kwargs)
        elif kwargs:
            args, kwargs = _keywords_made_positional(cls, args, kwargs)
        from ember.func._batched import STATE as _VMAP
        if _VMAP.levels:                # (PyTorch checks these first)
            _check_vmappable(cls, Function)
        if _FORWARD_TRACES.starts or _FORWARD_TRACES.reverse:
            _check_forward_traced(cls.__dict__.get("_vmapped_from", cls), Function, args)
        if _VMAP.levels:                # see NOTE [Custom functions under vmap]
            from ember.func._custom_function import function_vmap
            result = function_vmap(cls, args, kwargs)
            if result is not NotImplemented:
                return result
        if _FORWARD_AD.level is not None:
            from ember.autograd.forward_ad import apply_function
            return apply_function(cls, args, kwargs)
        if _FORWARD_TRACES.starts and cls.jvp is not Function.jvp:
            if not _GRAD.grad_enabled and not _GRAD.inference and any(
                    isinstance(a, Tensor) and _tracks(a) for a in args):
                from ember.func._no_grad_tangents import call_function_recording_tangents
                return call_function_recording_tangents(cls, args, kwargs)
            ctx, output = cls._apply_ctx(args, kwargs)
            _keep_for_jvp(ctx, args, output)    # (NOTE [Function jvp in the double vjp])
            return output
        return cls._apply_ctx(args, kwargs)[1]

    @classmethod
    def _apply_ctx(cls, args, kwargs):
        """``(ctx, outputs)`` of one call."""
        needs = tuple(isinstance(a, Tensor) and _tracks(a) for a in args)
        # the grad mode decides, as in PyTorch: even inside inference mode (enable_grad
        # there) a custom function records, though the ops in it do not
        record = any(needs) and is_grad_enabled()
        edges = tuple(history(a) if need else (None, 0) for a, need in zip(args, needs)
                      if isinstance(a, Tensor))
        ctx = cls._node_class()(edges, needs)    # (as in PyTorch, also when not recording)
        if record:
            # (False marks a non-tensor argument: a gradient for it is an error)
            ctx._in_meta = tuple((a._data.shape, a._data.dtype, a.device) if need else
                                 (None if isinstance(a, Tensor) else False)
                                 for a, need in zip(args, needs))
        if _FORWARD_TRACES.starts and _FORWARD_TRACES.forward[-1] and any(needs):
            ctx.needs_input_grad = _shown_needs(args, needs)    # (what the user's code reads)
        uses_ctx = cls.setup_context is Function.setup_context
        try:
            prev = swap_grad_mode(False)
            try:
                output = cls.forward(ctx, *args, **kwargs) if uses_ctx else cls.forward(
                    *args, **kwargs)
            finally:
                restore_grad_mode(prev)
            if not uses_ctx:
                cls.setup_context(ctx, args, output)
        finally:
            ctx.needs_input_grad = needs
        return ctx, _wrap_outputs(ctx, args, output, record)


_SIGNATURES = {}


def _tracks(t):
    # (a forward-mode transform's input reports requires_grad=False, NOTE [Forward-mode
    # primals], but records as any: ember's own checks read the graph's fields)
    return t._requires_grad or t._grad_fn is not None or _view_tracks(t)


def _shown_needs(args, needs):
    """``needs_input_grad`` as the innermost of PyTorch's transforms, a forward-mode one,
    shows it to a Function's ``forward`` and ``setup_context``: False for the tensors whose
    gradient history comes from its inputs (which carry tangents there)."""
    from ember.autograd._forward_traces import reaches_forward_inputs
    return tuple(need and not reaches_forward_inputs(a) for a, need in zip(args, needs))


def _bind_forward_args(cls, args, kwargs):
    """``forward``'s arguments with keywords and defaults made positional, as PyTorch hands
    them to ``setup_context`` (keyword-only ones stay keywords)."""
    sig = _SIGNATURES.get(cls)
    if sig is None:
        import inspect
        sig = _SIGNATURES[cls] = inspect.signature(cls.forward)
    if not kwargs and len(args) == len(sig.parameters):
        return args, kwargs
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.args, bound.kwargs


def _keywords_made_positional(cls, args, kwargs):
    """A ctx-style ``forward``'s keyword arguments made positional, as PyTorch passes them:
    every positional parameter up to the last one named must be given (a gap is an error)."""
    import inspect
    params = [p.name for p in list(inspect.signature(cls.forward).parameters.values())[1:]
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for name in kwargs:
        if name not in params:
            raise TypeError(f"forward() got an unexpected keyword argument '{name}'")
        if params.index(name) < len(args):
            raise TypeError(f"forward() got multiple values for argument '{name}'")
    args = list(args)
    for i in range(len(args), max(map(params.index, kwargs)) + 1):
        if params[i] not in kwargs:
            raise TypeError(f"forward() missing required argument: '{params[i]}' (position {i})")
        args.append(kwargs[params[i]])
    return tuple(args), {}


def _version_of(t):
    """``t``'s version counter, 0 for None (read directly: an inference tensor, saved in
    inference mode, has no ``_version`` to read)."""
    return 0 if t is None or t._vc is None else t._vc.value


_DIRTY_VIEW_OF_SEVERAL = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function "
    "cannot return more than one Tensor. This is not supported by the current autograd engine. "
    "You should either make sure the input is not a view (using .clone() for example) or make "
    "your Function only return one Tensor (potentially splitting it into two Functions: one "
    "doing the inplace that returns a single Tensor and a second one that does the other "
    "operations). You can ask on the forum https://discuss.pytorch.org/ if you need help to do "
    "this change.")


def _wrap_outputs(ctx, args, output, record):
    single = not isinstance(output, tuple)
    outputs = (output,) if single else output
    dirty = {id(t) for t in ctx._dirty}
    for t in ctx._dirty:                # PyTorch counts the marking as one more in-place write
        t._bump_version()
    non_diff = {id(t) for t in ctx._non_differentiable}
    inputs = {id(a) for a in args if isinstance(a, Tensor)}
    if dirty and not dirty <= {id(o) for o in outputs}:
        raise RuntimeError("Some elements marked as dirty during the forward method were not "
                           "returned as output. The inputs that are modified inplace must all "
                           "be outputs of the Function.")
    wrapped = []
    for out in outputs:
        if isinstance(out, Tensor) and id(out) in inputs and (
                id(out) not in dirty or id(out) in non_diff and _tracks(out)):
            if id(out) in non_diff:     # (as PyTorch: the same memory, no view to track)
                out = Tensor.detach(out)
                non_diff.add(id(out))
            else:
                from ember.ops.indexing import alias_of
                out = alias_of(out)            # an input returned as-is becomes a view of it
        wrapped.append(out)
    ctx.n_outputs = len(wrapped)
    ctx._out_meta = tuple((o.shape, o.dtype, o.device) if isinstance(o, Tensor) else None
                          for o in wrapped)
    for nr, out in enumerate(wrapped):
        if not isinstance(out, Tensor):
            continue
        if id(out) in dirty and record and out._view is not None and len(wrapped) > 1:
            raise RuntimeError(_DIRTY_VIEW_OF_SEVERAL)
        if id(out) in dirty and record and out._grad_fn is None and out._requires_grad:
            raise RuntimeError("a leaf Variable that requires grad has been used in an "
                               "in-place operation.")
        if id(out) in dirty and record and out._view is not None:
            base = out._view[0]
            if base._grad_fn is None and base._requires_grad:
                raise RuntimeError("a view of a leaf Variable that requires grad is being used "
                                   "in an in-place operation.")
        if record and id(out) not in non_diff and (out.is_floating_point()
                                                   or out.is_complex()):
            old_edge = out._grad_fn, out._output_nr
            out._grad_fn = ctx
            out._output_nr = nr
            if id(out) in dirty:
                move_retained_grad(out, *old_edge)
                if out._view is not None and nr == 0 and len(wrapped) == 1:
                    _rebase_dirty_view(ctx, out, args)
            elif out._view is not None:     # writing into it in place is an error
                out._meta = dict(out._meta or (), function_view=(
                    type(ctx)._function.__name__, nr, _several_differentiable(wrapped, non_diff)))
    bad = [i for i, t in enumerate(ctx._to_save) if t is not None and not isinstance(t, Tensor)]
    if bad and record:
        raise TypeError("save_for_backward can only save variables, but argument "
                        f"{bad[0]} is of type {type(ctx._to_save[bad[0]]).__name__}")
    if bad:                             # (nothing records: nothing is kept)
        ctx._to_save = ()
    if record and _inference.MADE[0]:
        _inference.check_saved(ctx._to_save, all_saved=True)
    ctx._saved = tuple((t, _version_of(t)) for t in ctx._to_save)
    output_nrs = {id(o): nr for nr, o in enumerate(wrapped) if isinstance(o, Tensor)}
    if any(id(t) in output_nrs for t in ctx._to_save):
        ctx._saved_output_nrs = {i: output_nrs[id(t)] for i, t in enumerate(ctx._to_save)
                                 if id(t) in output_nrs}
    ctx._to_save = ()
    if record and SAVED_HOOKS_ACTIVE[0] and any(t is not None for t, _ in ctx._saved):
        hooks = current_saved_hooks()
        if hooks is not None:
            ctx._packed = Packed(hooks, [t for t, _ in ctx._saved if t is not None], ())
            ctx._saved = tuple((None if t is None else _PACKED, 0) for t, _ in ctx._saved)
    return wrapped[0] if single else tuple(wrapped)


def _rebase_dirty_view(ctx, view, args):
    """A view modified in place by forward changes its base: as for an in-place op on a
    view (NOTE [In-place on views]), the base's history becomes a ``CopySlices`` that runs
    this function's backward on the region the view covers. As in PyTorch, the view must be
    the first tensor argument (its gradient comes first); otherwise it keeps ``ctx``."""
    first = next(a for a in args if isinstance(a, Tensor))
    if first is not view:
        return
    from ember.ops._inplace import CopySlices, view_recipe
    base = view._view[0]
    base_edge = history(base)
    copy = CopySlices(base_edge, ctx, view_recipe(view),
                      None if base.is_contiguous() else base.dim_order())
    base._grad_fn = copy
    base._output_nr = 0
    move_retained_grad(base, *base_edge)


def once_differentiable(fn):
    """Mark a backward as not itself differentiable: it runs with grad mode off, and when a
    graph of it is being built (``create_graph`` with gradients that require grad) its
    results differentiate into PyTorch's "trying to differentiate twice" error rather than
    into a silently missing term."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        prev = _GRAD.grad_enabled
        _GRAD.grad_enabled = False
        try:
            outputs = fn(ctx, *args)
        finally:
            _GRAD.grad_enabled = prev
        if not prev or not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        marked = [o.detach()._set_requires_grad() if isinstance(o, Tensor) and
                  (o.is_floating_point() or o.is_complex()) else o
                  for o in ((outputs,) if single else outputs)]
        marked = _DelayedError.apply(*marked)
        return marked[0] if single else marked
    return wrapper


class _DelayedError(Function):
    """Passes tensors through; differentiating them raises (see ``once_differentiable``)."""

    # PyTorch's C++ node: class Error, name() torch::autograd::Error, a bare repr
    _node_name = "Error"
    _node_attrs = {"__module__": "builtins", "name": lambda self: "torch::autograd::Error",
                   "__repr__": lambda self: f"<Error object at {hex(id(self))}>"}

    @staticmethod
    def forward(ctx, *values):
        return tuple(v.clone() if isinstance(v, Tensor) else v for v in values)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")


def _several_differentiable(outputs, non_diff):
    """Whether a Function returned several differentiable tensors: a view among them is one
    of PyTorch's multi-output views (``non_diff``: ids of those marked non-differentiable)."""
    return sum(isinstance(o, Tensor) and id(o) not in non_diff
               and (o.is_floating_point() or o.is_complex()) for o in outputs) > 1


from ember.autograd._legacy_functions import InplaceFunction, NestedIOFunction  # noqa: E402
