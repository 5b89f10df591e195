"""``torch.autograd.forward_ad``: forward-mode AD with dual tensors.

NOTE [Dual tensors]
``make_dual(x, t)`` returns a view of ``x`` whose class is ``_DualTensor``, a private Tensor
subclass holding the tangent ``t`` (``_fw_tangent``). The registry routes every op with a
Tensor-subclass operand to ``__torch_function__`` (see ember.overrides), so only ops that
touch a dual tensor do extra work; the ordinary dispatch path is unchanged. There, the op runs
on the primals as on plain tensors (same views, versions and reverse-mode history), and the
tangent of each floating-point output comes from the op's reverse-mode derivative by the
double-vjp trick: ``u -> vjp(u) = J^T u`` is linear in ``u``, so the vjp of that map with
weights ``t`` is ``J t``. The derivatives are written with ember ops, so this needs no
forward-mode rule per op. View ops are linear: their tangent is the same view of the tangent,
so in-place changes through a view reach its base's tangent, as in PyTorch. A kernel that
PyTorch gives no forward derivative (``Op.refuse_forward_ad``) refuses before it runs, in
PyTorch's words. An in-place op
takes its tangent from the values before the write and copies it into the tangent in place.
When the derivative work runs with reverse-mode history (a primal, tangent or other operand
requires grad), tangents keep a graph: the gradient of a jvp works, and so does forward over
reverse (backward of a dual graph gives dual gradients: Hessian-vector products). A tangent
also requires grad where PyTorch's formula reads a primal that does (NOTE [Zero-tangent
terms]).

How this differs from PyTorch: ``type(d)`` is ``_DualTensor``, not Tensor (``isinstance(d,
Tensor)`` holds); ``exit_dual_level`` turns the level's dual tensors back into plain tensors;
one level at a time (PyTorch's rule too); ``vmap`` over dual tensors works, ``make_dual``
inside ``vmap`` does not (nor in PyTorch) unless a transform runs between them
(``vmap(grad(f))``: the dual is made of the physical tensor and batched again);
``ember.func.jvp``/``jacfwd`` do not use this module (they run the double-vjp through the
engine, which composes with vmap); a plain view taken before an in-place op made its base
dual shows no tangent; an in-place op whose other operand is ``self`` (``x.mul_(x)``) reads
``self`` before the write (PyTorch reads it after); a tangent's ``grad_fn`` is the last node
of the double vjp (``MulBackward0`` for ``x * y``), not always that of PyTorch's formula
(``AddBackward0``).
"""

import weakref
from typing import Any, NamedTuple

from ember._conj_view import hold_values
from ember._tensor import Tensor, _make
from ember.autograd._forward_traces import PULLING
from ember.autograd.graph import _sequence
from ember.autograd.grad_mode import entering_clones

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level",
           "make_dual", "unpack_dual"]


class _State:
    level = None            # the active level (0), or None
    duals = []              # weak references to the level's dual tensors, for exit
    pushing = 0             # _double_vjp calls running: what they record is not the user's


STATE = _State()


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: a dual tensor's primal value and its tangent."""

    primal: Any
    tangent: Any


def enter_dual_level():
    """Open a forward-AD level and return its number (only one may be open at a time)."""
    from ember.func._forward_primal import forward_running      # (func.jvp's levels too)
    if STATE.level is not None or forward_running():
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    STATE.level = 0
    return 0


def exit_dual_level(*, level=None):
    """Close the level: its dual tensors become plain tensors, their tangents dropped."""
    if level is None:
        level = -1 if STATE.level is None else STATE.level
        if level < 0:
            raise RuntimeError("Dual level must be a positive number.")
    if level != STATE.level:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    duals, STATE.duals = STATE.duals, []
    STATE.level = None
    for ref in duals:
        t = ref()
        if t is not None and type(t) is _DualTensor:
            t.__class__ = Tensor
            del t._fw_tangent


class dual_level:
    """Context manager (or decorator) for a forward-AD level::

        with dual_level():
            y = f(make_dual(x, t))
            jvp = unpack_dual(y).tangent
    """

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()

    def __call__(self, fn):
        return entering_clones(self, fn)

    def clone(self):
        """A fresh dual level (what each call of a decorated function enters)."""
        return self.__class__()


def _check_level(level, fname):
    if level is None:
        level = STATE.level
    elif level != STATE.level:
        raise RuntimeError(f"Invalid level given to {fname}")
    return level


def make_dual(tensor, tangent, *, level=None):
    """A view of ``tensor`` carrying ``tangent`` as its forward gradient at ``level``."""
    if level is None and STATE.level is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    level = _check_level(level, "_make_dual")
    refuse_batched("_make_dual", tensor, tangent)
    if type(tensor) is _DualTensor:
        raise RuntimeError(f"Making a dual Tensor based on a Tensor that already has a forward "
                           f"gradient at the same level {level} is not supported.")
    if type(tangent) is _DualTensor:
        raise RuntimeError(f"Setting a forward grad that itself has a forward gradient at the "
                           f"same level{level} is not supported.")
    _check_size(tensor, tangent)
    levels = _batch_levels(tensor, tangent)
    if levels:      # a transform between vmap and this call (vmap(grad(f))): per physical
        from ember.func._batched import materialize, rewrap
        primal = materialize(tensor, levels)
        if any(s == 0 and n > 1 for s, n in zip(primal.stride(), primal.shape)):
            primal = primal.clone()     # (expanded along a batch it lacked: one per example)
        return rewrap(make_dual(primal, materialize(tangent, levels), level=level), levels)
    from ember.overrides import DisableTorchFunctionSubclass, is_plain
    for t in (tensor, tangent):
        if type(t) is not Tensor and not is_plain(type(t)):
            raise NotImplementedError(f"make_dual: tensors of type {type(t).__name__} (a "
                                      f"Tensor subclass with __torch_function__, such as "
                                      f"vmap's) are not supported by ember's forward AD")
    with DisableTorchFunctionSubclass():
        out = tensor.view(tensor.shape)
        tangent = _laid_out_as(out, tangent)
    return _as_dual(out, tangent)


def _laid_out_as(primal, tangent):
    """``tangent``, or a copy laid out as ``primal``: PyTorch gives the tangent the primal's
    strides, storage offset and storage size (as_strided reads the same window of both)."""
    from ember.ops import as_strided as strided
    store, offset = strided._locate(primal)
    size = strided._extent(store) // store.itemsize
    if offset == 0 and strided._extent(primal._data) // primal._data.itemsize == size:
        if tangent.stride() == primal.stride():
            return tangent
        return _zeros_as(primal, tangent.dtype).copy_(tangent)
    if not primal.numel():
        return tangent
    from ember._creation import zeros
    storage = zeros(size, dtype=tangent.dtype, device=primal.device)
    return strided.as_strided(storage, primal.shape, primal.stride(), offset).copy_(tangent)


def refuse_batched(name, *tensors):
    """PyTorch's refusal of ``aten::{name}`` on vmap's batched tensors (it has no batching
    rule: ``forward_ad`` and ``linearize`` under ``vmap``; ``func.jvp`` has its own levels),
    unless a transform between the vmap and the call wraps them first."""
    for t in tensors:
        if type(t) is not Tensor and type(t) is not _DualTensor:   # (maybe vmap's wrapper)
            from ember.func._autodiff import batched_within
            if batched_within(tensors):
                raise RuntimeError(f"Batching rule not implemented for aten::{name}; the "
                                   f"fallback path doesn't work on out= or view ops.")
            return


def _batch_levels(*tensors):
    """The active vmap levels (outermost first) that a tensor of ``tensors`` is batched at."""
    from ember.func._batched import BatchedTensor, active_levels
    found = set()
    for t in tensors:
        while type(t) is BatchedTensor:
            found.add(t._level)
            t = t._value
    return [lv for lv in active_levels() if lv.level in found] if found else []


def _check_size(tensor, tangent):
    if tangent.shape != tensor.shape:
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than "
                           f"that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor`` at ``level``: a plain view and its tangent (None
    when it has none, or when no level is open)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"_unpack_dual(): argument 'dual' (position 1) must be Tensor, not "
                        f"{type(tensor).__name__}")
    if level is None and STATE.level is None or level is not None and level < 0:
        return UnpackedDualTensor(tensor, None)     # (no level: PyTorch's is -1)
    refuse_batched("_unpack_dual", tensor)
    levels = _batch_levels(tensor)
    if not levels and type(tensor) is not _DualTensor:
        return UnpackedDualTensor(tensor, None)     # (PyTorch checks the level of duals only)
    _check_level(level, "_fw_primal")
    if levels:      # (see make_dual): unpacked per physical, each part batched again
        from ember.func._batched import materialize, rewrap
        primal, tangent = unpack_dual(materialize(tensor, levels), level=level)
        return UnpackedDualTensor(rewrap(primal, levels),
                                  None if tangent is None else rewrap(tangent, levels))
    return UnpackedDualTensor(_primal(tensor), tensor._fw_tangent)


def _primal(t):
    """A plain tensor for the dual ``t``: the same memory, version, view and history."""
    if t._grad_fn is None and t._requires_grad:     # a leaf: its own .grad must fill up
        from ember.overrides import DisableTorchFunctionSubclass
        with DisableTorchFunctionSubclass():
            return t.view(t.shape)
    p = _make(t._data)
    p._grad_fn, p._output_nr, p._view = t._grad_fn, t._output_nr, t._view
    p._vc = t._shared_version()
    if t._meta and "storage_root" in t._meta:
        p._meta = {"storage_root": t._meta["storage_root"]}
    return p


# --- dual tensors -------------------------------------------------------------------------------

def _as_dual(t, tangent):
    """Make the plain tensor ``t`` dual (in place) with ``tangent``; returns it."""
    if type(t) is not _DualTensor:
        hold_values(t)                  # (NOTE [Conjugate views])
        t.__class__ = _DualTensor
        STATE.duals.append(weakref.ref(t))
        if len(STATE.duals) % 4096 == 0:
            STATE.duals = [r for r in STATE.duals if r() is not None]
    t._fw_tangent = tangent
    return t


def _zeros_as(t, dtype=None):
    """Zeros laid out as ``t`` (same shape and strides)."""
    from ember._creation import empty_strided
    return empty_strided(t.shape, t.stride(), dtype=dtype or t.dtype, device=t.device).zero_()


class _DualTensor(Tensor):
    """A tensor with a tangent at the open forward-AD level (see NOTE [Dual tensors])."""

    __slots__ = ()
    _takes_registry_calls = True       # offered op functions, parameters by name (handle_op)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, types, args, kwargs or {})

    def __repr__(self, *, tensor_contents=None):
        from ember._tensor_str import _close, _contents, _suffixes
        tangent = self._fw_tangent
        body = (tensor_contents if tensor_contents is not None
                else "[]" if self._data.size == 0 else _contents(self, 7))
        text = repr(tangent.item()) if tangent.ndim == 0 else repr(tangent)
        return _close("tensor(" + body, _suffixes(self) + [f"tangent={text}"], 7)

    __str__ = __repr__

    def __reduce_ex__(self, protocol):      # saved and copied without the tangent, as PyTorch
        from ember._creation import _rebuild_tensor
        from ember._host_values import _to_host
        return (_rebuild_tensor, (Tensor, _to_host(self._data), self.requires_grad))

    def __deepcopy__(self, memo):
        new = Tensor.__deepcopy__(self, memo)
        new.__class__ = Tensor
        del new._fw_tangent
        return new

    def set_(self, *args, **kwargs):
        raise NotImplementedError("Trying to use forward AD with set_ that does not support it "
                                  "because it has not been implemented yet.")

    def resize_(self, *args, **kwargs):
        raise RuntimeError("cannot resize variables that has a forward grad")

    resize_as_ = resize_


def _sampler(name):
    """A random in-place fill (``x.normal_()``): the values no longer depend on anything, so
    the tangent becomes zero, in place."""
    def sample_(self, *args, **kwargs):
        getattr(Tensor, name)(self, *args, **kwargs)
        self._fw_tangent.zero_()
        return self
    sample_.__name__ = sample_.__qualname__ = name
    return sample_


for _name in ("uniform_", "normal_", "random_", "bernoulli_", "exponential_", "geometric_",
              "log_normal_", "cauchy_"):
    setattr(_DualTensor, _name, _sampler(_name))


# --- ops on dual tensors ------------------------------------------------------------------------

_INPLACE = {}       # Tensor's in-place methods -> their ops (what handle_op offers for `x.op_()`)


def _inplace_op(func):
    """The op whose in-place method is ``func``, or None."""
    op = getattr(func, "_ember_op", None)
    if op is not None:                  # a generated in-place method (or the public function)
        return None if func is op.function else op
    if func not in _INPLACE:
        from ember.ops._registry import REGISTRY
        for op in REGISTRY.values():
            name = op.method_name or op.short_name
            name = name if name.endswith("_") else name + "_"
            f = getattr(Tensor, name, None)
            if f is not None and (f not in _INPLACE or op.short_name == name):
                _INPLACE[f] = op
    return _INPLACE.get(func)


def _dispatch(func, types, args, kwargs):
    """An op with a dual operand: the op on the primals, then the outputs' tangents."""
    from ember.overrides import DisableTorchFunctionSubclass
    from ember.overrides._protocol import op_arguments
    if any(t is not _DualTensor for t in types):
        return NotImplemented           # another subclass unwraps first, then calls us again
    op = getattr(func, "_ember_op", None)
    inplace = op is None or func is not op.function
    if inplace:
        op = _inplace_op(func)
    if op is None or STATE.level is None:
        if STATE.level is None:         # not reachable in one thread: duals die with the level
            with DisableTorchFunctionSubclass():
                return func(*args, **kwargs)
        raise NotImplementedError(f"Trying to use forward AD with "
                                  f"{getattr(func, '__name__', func)} that does not support it")
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    args, params = op_arguments(op, args, kwargs)
    params = _storage_params(op, args[0], params)
    if op.forward_ad_refusal is not None:
        _refuse(op, args, params, inplace)
    if inplace:
        return _inplace(op, args, params)
    if out is not None:
        _refuse_out(op, args)
    from ember.ops._registry import call
    with DisableTorchFunctionSubclass():
        result = call(op, args, params, out)
    tangents = _push(op, args, params)
    outputs = result if isinstance(result, tuple) else (result,)
    if out is not None:
        outputs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    for o, t in zip(outputs, tangents):
        if t is not None:
            _as_dual(o, t)
    return result


def _refuse(op, inputs, params, inplace=False):
    """PyTorch's error for a kernel without a forward derivative (``Op.refuse_forward_ad``);
    ``inplace``: the call is the op's in-place form."""
    from ember.autograd._forward_traces import forward_ad_kernel
    from ember.ops._op_errors import forward_ad_not_implemented
    flat = op.flatten_inputs(inputs)[0] if op.seq_inputs else inputs
    kernel = forward_ad_kernel(op, flat, params, inplace)
    if kernel is not None:
        raise forward_ad_not_implemented(kernel)


def _refuse_out(op, inputs):
    """PyTorch's error for an out= call it runs as a kernel without derivative (ops/_out_names.py
    NOT_IMPLEMENTED_OUT: ``fft.ifft`` of a real signal conjugates in place)."""
    from ember.ops._op_errors import forward_ad_not_implemented
    from ember.ops._out_names import NOT_IMPLEMENTED_OUT, not_implemented_kernel
    if op.name in NOT_IMPLEMENTED_OUT:
        flat = op.flatten_inputs(inputs)[0] if op.seq_inputs else inputs
        kernel = not_implemented_kernel(op, flat)
        if kernel is not None and any(_live(x) for x in flat):
            raise forward_ad_not_implemented(f"aten::{kernel}")


def _storage_params(op, x, params):
    """``params`` with as_strided's storage offset placed in the storage of ``x`` (the
    public functions place it for plain tensors only; a dual arrives with the bare number)."""
    from ember.ops import as_strided as strided
    if op is not strided.as_strided and op is not strided.as_strided_scatter:
        return params
    size, stride, offset = params
    return size, stride, strided._place(_primal(x) if _live(x) else x, offset)


def _live(x):
    return type(x) is _DualTensor


def _push(op, inputs, params):
    """The tangent of each of the op's outputs (None for outputs without one), from the
    tangents of its dual inputs (see NOTE [Dual tensors])."""
    from ember.autograd.grad_mode import STATE as GRAD
    from ember.overrides import DisableTorchFunctionSubclass
    from ember.ops._registry import call
    flat, lengths = op.flatten_inputs(inputs) if op.seq_inputs else (list(inputs), None)
    dual = [i for i, x in enumerate(flat) if _live(x)]
    tangents = [flat[i]._fw_tangent for i in dual]
    with DisableTorchFunctionSubclass():
        if op.view and len(flat) == 1:              # linear: the same view of the tangent
            res = call(op, (tangents[0],), _storage_params(op, tangents[0], params))
            return [t if isinstance(t, Tensor) and t._data.dtype.kind in "fcV" else None
                    for t in (res if isinstance(res, tuple) else (res,))]
        return _double_vjp(op, flat, lengths, params, dual, tangents, GRAD.grad_enabled, call)


def _double_vjp(op, flat, lengths, params, dual, tangents, grad_mode, call):
    from ember import autograd
    from ember._creation import zeros_like
    from ember.autograd.grad_mode import enable_grad
    from ember.ops.conversion import _alias
    connected = grad_mode and (any(isinstance(x, Tensor) and x.requires_grad for x in flat)
                               or any(t.requires_grad for t in tangents))
    args = _private_constants(op, flat, dual)
    start = next(_sequence) if connected else 0     # (this run's nodes number from here)
    with enable_grad():
        leaves = []
        for i in dual:
            x = flat[i]
            leaf = _alias(x) if connected and x.requires_grad else \
                _make(x._data)._set_requires_grad()
            args[i] = leaf
            leaves.append(leaf)
        outs = _second_run(op, args, lengths, params, call)
        live = [isinstance(o, Tensor) and o.requires_grad and o._data.dtype.kind in "fcV"
                for o in outs]
        if not any(live):
            return [None] * len(outs)
        roots = [o for o, keep in zip(outs, live) if keep]
        dummies = [zeros_like(o)._set_requires_grad() for o in roots]
        with PULLING:       # (an op's derivative may take its forward formula: polar's)
            pulled = autograd.grad(roots, leaves, dummies, create_graph=True, allow_unused=True)
        gs, ws = [], []
        for g, t in zip(pulled, tangents):
            if g is not None and g.requires_grad:
                gs.append(g)
                ws.append(t if t.dtype is g.dtype else t.to(g.dtype))
        if any(g is not None and not g.requires_grad for g in pulled):
            _check_linear_in_cotangent(op, roots, leaves, pulled)
        pushed = autograd.grad(gs, dummies, ws, create_graph=connected,
                               allow_unused=True) if gs else [None] * len(dummies)
    pushed = iter(pushed)
    result = []
    for o, keep in zip(outs, live):
        if not keep:
            result.append(None)
            continue
        jt = next(pushed)
        if jt is None:
            jt = _zeros_as(o)
        elif jt.stride() != o.stride() or any(_overlap(jt, t) for t in tangents):
            jt = _zeros_as(o, jt.dtype).copy_(jt)   # laid out as o, sharing no tangent
        result.append(jt if connected else jt.detach())
    if connected:       # (NOTE [Zero-tangent terms])
        from ember.autograd._forward_zero_terms import link_zero_terms
        return link_zero_terms(op, flat, lengths, params, dual, leaves, start, result, call)
    return result


def _check_linear_in_cotangent(op, roots, leaves, pulled):
    """Raise PyTorch's error when a gradient that has no history to the cotangent is not
    zero everywhere: the op's backward is not differentiable (ctc_loss's), so its tangent
    is unknown (a derivative of 0, as round's, has no history and is fine)."""
    from ember import autograd
    from ember._creation import ones_like
    cut = [i for i, g in enumerate(pulled) if g is not None and not g.requires_grad]
    grads = autograd.grad(roots, [leaves[i] for i in cut], [ones_like(o) for o in roots],
                          retain_graph=True, allow_unused=True)
    if any(g is not None and bool(g.ne(0).any()) for g in grads):
        raise NotImplementedError(f"Trying to use forward AD with {op.name} that does not "
                                  f"support it because it has not been implemented yet.")


def _second_run(op, args, lengths, params, call):
    """The op's outputs (a tuple) on ``args``, run without pushing tangents."""
    STATE.pushing += 1
    try:
        res = call(op, op.structure(args, lengths) if lengths else args, params)
    finally:
        STATE.pushing -= 1
    return res if isinstance(res, tuple) else (res,)


def _private_constants(op, flat, dual):
    """The op's operands for its second run, with a copy of each operand its forward updates
    in place (batch norm's running statistics), so that they move once, as in PyTorch."""
    args = list(flat)
    for i in op.written_inputs:
        x = flat[i]
        if isinstance(x, Tensor) and i not in dual and not x.requires_grad:
            args[i] = _make(x._data.copy(order="K"))
    return args


def _overlap(a, b):
    from ember.backend import xp_of
    return bool(xp_of(a._data).may_share_memory(a._data, b._data))


def _inplace(op, inputs, params):
    """``self.op_(...)`` with a dual among the operands: the tangent from the values before
    the write, copied into self's tangent in place (self becomes dual if it was not)."""
    from ember.ops._inplace import call_inplace
    from ember.overrides import DisableTorchFunctionSubclass
    from ember.autograd.grad_mode import STATE as GRAD
    self = inputs[0]
    if GRAD.inference or self._data.dtype.kind not in "fcV":
        # no tangent to update: inference mode computes none (a dual keeps its own), and an
        # integer or bool tensor holds none
        with DisableTorchFunctionSubclass():
            call_inplace(op, inputs, params)
        return self
    if op.view:                         # t_(), squeeze_(): reshape the tangent alike
        with DisableTorchFunctionSubclass():
            tangent = self._fw_tangent
            call_inplace(op, inputs, params)
            call_inplace(op, [tangent], _storage_params(op, tangent, params))
        return self
    try:                                # from the values before the write
        tangent = _push(op, inputs, params)[0]
    except Exception:
        with DisableTorchFunctionSubclass():    # PyTorch's error for the in-place call
            call_inplace(op, inputs, params)
        raise
    with DisableTorchFunctionSubclass():
        call_inplace(op, inputs, params)
        if tangent is None:
            tangent = _zeros_as(self)
        if not _live(self):
            _as_dual(self, _tangent_slot(self))
        self._fw_tangent.copy_(tangent)
    return self


def _tangent_slot(t):
    """A zero tangent for the plain tensor ``t`` about to become dual: for a view, the same
    view of a zero tangent given to its base, so the base sees the change too."""
    view = t._view
    if view is None:
        return _zeros_as(t)
    base = view[0]
    if not _live(base):
        _as_dual(base, _zeros_as(base))
    from ember.ops.as_strided import as_strided
    offset = t.storage_offset() - base.storage_offset()
    if t.ndim == 0:         # (as_strided copies for a 0-dim size: take a 1-element view)
        return as_strided(base._fw_tangent, (1,), (1,), offset).squeeze(0)
    return as_strided(base._fw_tangent, t.shape, t.stride(), offset)


# --- custom Functions ---------------------------------------------------------------------------

def apply_function(cls, args, kwargs):
    """``cls.apply(*args, **kwargs)`` in a level: ``forward`` and ``jvp`` see plain tensors
    (the duals among ``args`` are plain meanwhile); ``jvp`` gets one tangent per argument
    (zeros for a plain floating-point tensor, None for anything else) and returns one per
    output."""
    duals = [a for a in args if type(a) is _DualTensor]
    if not duals:
        return cls._apply_ctx(args, kwargs)[1]
    tangents = [a._fw_tangent if type(a) is _DualTensor else
                _zeros_as(a) if isinstance(a, Tensor) and a._data.dtype.kind in "fcV" else None
                for a in args]
    for a in duals:
        a.__class__ = Tensor
    try:
        ctx, output = cls._apply_ctx(args, kwargs)
        ctx._in_jvp = True
        try:
            pushed = cls.jvp(ctx, *tangents)
        finally:
            ctx._in_jvp = False
    finally:
        for a in duals:
            a.__class__ = _DualTensor
    outputs = output if isinstance(output, tuple) else (output,)
    pushed = pushed if isinstance(pushed, tuple) else (pushed,)
    for i, t in enumerate(pushed):      # (PyTorch checks the types before the count)
        if t is not None and not isinstance(t, Tensor):
            raise RuntimeError(f"expected Variable or None (got {type(t).__name__}) for grad "
                               f"output {i}.")
    if len(pushed) != len(outputs):
        raise RuntimeError(f"Function's jvp returned an invalid number of forward gradients "
                           f"(expected {len(outputs)} but got {len(pushed)})")
    dirty = {id(t) for t in ctx._dirty}
    for o, t in zip(outputs, pushed):
        if t is None or not isinstance(o, Tensor) or o._data.dtype.kind not in "fcV":
            continue
        _check_size(o, t)
        if id(o) in dirty and type(o) is _DualTensor:
            if t is not o._fw_tangent:
                raise RuntimeError("An inplace custom Function is not modifying the forward "
                                   "mode gradients inplace. If the forward is modifying an "
                                   "input inplace, then the jvp function must modify the "
                                   "corresponding gradient inplace.")
            continue
        if any(t is u for u in tangents):       # an input's tangent as-is: not shared
            t = t.clone()
        _as_dual(o, t)
    return output
