"""In-place ops: leaf checks, dtype and shape rules, version bumps, and autograd on views.

NOTE [In-place on views]
An in-place op on a view ``v`` of ``base`` changes ``base`` too, so ``base``'s history must
change with it. As in PyTorch, ``base`` gets a ``CopySlices`` node: its gradient is passed
through unchanged except in the region ``v`` covers, where the in-place op's own backward
runs. ``v`` (and every other view of ``base``) recreates its ``grad_fn`` from ``base``'s new
history the next time it is needed: each view remembers which ``base._grad_fn`` it was built
on, and ``refresh_view_history`` replays the view ops when that changed.

NOTE [In-place view ops]
``x.t_()``, ``x.transpose_(0, 1)``, ``x.squeeze_()``, ``x.unsqueeze_(0)`` (view ops registered
with ``inplace=True``) change ``x``'s shape and strides, not its memory or values: ``x`` takes
the array the view op makes of it. Its history becomes that view op applied to what ``x`` was
(an ``old`` stand-in holding its former array, history and view recipe), and a view's recipe
grows by the op, so later in-place ops on it or on its base see the new shape. The version
counter is bumped, as for any in-place op. Views taken from ``x`` *before* the change name
``x`` in their recipes but were made from its old shape: ``x`` logs an undo step for each
change (``_meta["view_undo"]``), and ``view_recipe`` puts back the undo steps of the changes
that came after a view was taken (found from the memory the view covers).
"""

import itertools
import warnings
import weakref

import numpy as np

from ember import _dtype as D
from ember._conj_view import memory, stand_in, take_memory
from ember._creation import empty_permuted
from ember._inference import ACTIVE as INFERENCE_ACTIVE, MADE as INFERENCE_MADE, check_inplace
from ember._transform_births import STATE as BIRTHS, check_captured
from ember._memory_format import contiguous_format
from ember._storage_place import _address, _storage_root
from ember._tensor import Tensor, _make, _view_tracks
from ember.autograd._forward_traces import FORWARD_OPEN, FORWARD_SHOWN, TRACES as FORWARD_TRACES
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.graph import Node, history, move_retained_grad
from ember.backend import SEVERAL_GPUS, device_guard, loud_fp, quiet_fp, xp_of
from ember.ops._dispatch import (ACTIVE_VMAPS, Refused, _as_scalar, _Override, _other_gpu,
                                 _prepare, has_batched, params_in_dtype, refuse_after_checks,
                                 uint64_numbers_wrapped)
from ember.ops._barebones import KernelCheck
from ember.ops._meta import MetaCall
from ember.ops._not_implemented import hang_not_implemented
from ember.ops._op_errors import BroadcastError, OpValueError, RefusedFirst, broadcast_message
from ember.ops._overlap import INTERNAL_OVERLAP
from ember.ops._recording import _DIFFERENTIABLE_KINDS, in_multi_output_view

__all__ = ["call_inplace", "refresh_view_history", "CopySlices"]


def call_inplace(op, inputs, params, entry=None):
    """Run ``op`` writing into ``inputs[0]`` and return it (``Tensor.<op>_``); ``entry``:
    the name of the entry point called, where it is not the op's (an alias's: ``greater``)."""
    self = inputs[0]
    if not isinstance(self, Tensor):
        if hasattr(type(self), "__torch_function__"):     # a nested tensor: offered the call
            from ember.overrides import handle_op
            return handle_op(op, inputs, params, None, inplace=True)
        raise TypeError(f"{op.name}_(): expected a Tensor, got {type(self).__name__}")
    grad_mode = _GRAD.grad_enabled
    if grad_mode:
        _check_leaf(self)
    if INFERENCE_MADE[0]:
        check_inplace(self)
    if INFERENCE_ACTIVE[0] and BIRTHS.levels:      # NOTE [Captured tensors]
        check_captured(op, inputs, params, entry)
    if op.seq_inputs:
        flat, lengths = op.flatten_inputs(inputs)
    else:
        flat, lengths = inputs, None
    if SEVERAL_GPUS[0]:
        elsewhere = _other_gpu(flat)
        if elsewhere is not None:       # run where the operands are, as PyTorch does
            with device_guard(elsewhere):
                return call_inplace(op, inputs, params, entry)
    try:
        xp, arrays, requires_grad, casts, compute = _prepare(op, flat)
    except _Override:
        from ember.overrides import handle_op
        return handle_op(op, inputs, params, None, inplace=True)
    except MetaCall:
        from ember.ops._meta import meta_inplace
        return meta_inplace(op, self, inputs, params)
    except Refused as refused:          # (ops/_barebones.py)
        _check_self_overlap(op, self, params, flat)
        _check_result_shape(op, self, flat)
        _check_promoted_cast(op, flat, self)
        refuse_after_checks(op, refused, params, lengths)
    except NotImplementedError as refused:
        if type(refused) is not RefusedFirst:   # (clamp_ of complex tensors: the op's own)
            _check_self_overlap(op, self, params, flat)
            _check_result_shape(op, self, flat)
            _check_promoted_cast(op, flat, self)    # PyTorch checks the cast before the kernel
        raise
    except D.PromotionError:
        _check_self_overlap(op, self, params, flat)
        _check_result_shape(op, self, flat)
        raise
    except BroadcastError:
        _check_self_overlap(op, self, params, flat)
        raise
    if ACTIVE_VMAPS[0] and params and has_batched(params):   # NOTE [Batched parameters]
        from ember.func._batching import dispatch_params
        return dispatch_params(op, inputs, params, None, inplace=True)
    if op.view:
        return _inplace_view(op, self, params)
    if not grad_mode and requires_grad and FORWARD_OPEN[0] and FORWARD_TRACES.starts \
            and not _GRAD.inference:
        # NOTE [Tangents through no_grad]
        from ember.func._no_grad_tangents import call_inplace_recording_tangents
        res = call_inplace_recording_tangents(op, inputs, params)
        if res is not NotImplemented:
            return res
    if lengths is not None:
        arrays = op.structure(arrays, lengths)
    record = grad_mode and requires_grad and op.vjp is not None
    old = _history_snapshot(self, _reads_self(op)) if record else None
    # checked before writing: the base's gradient must replay self's recipe
    recipe = None
    if record and self._view is not None:
        # a no_grad view written with an operand needing grad (else checked by _check_leaf)
        if not (self._requires_grad or self._grad_fn is not None or _view_tracks(self)):
            check_no_grad_view(self)
        if _in_nested_select(self):     # (PyTorch's CopySlices asks the nested base's sizes)
            from ember.nested import NO_SIZES
            raise RuntimeError(NO_SIZES)
        recipe = view_recipe(self)
    dst = self._data
    if 0 in dst.strides and not op.checks_internal_overlap:   # (else the forward checks it)
        _check_self_overlap(op, self, params, flat)
    op.overlap_check(self, flat[1:])
    token = quiet_fp()
    try:
        _write(op, self, dst, xp, arrays, params if casts is None or not op.dtype_params else
               params_in_dtype(op, params, casts[0]), casts, compute, flat)
    except OverflowError:       # (a number in [2**63, 2**64) beside int64: wrapped, as call's)
        wrapped = None if lengths is not None else uint64_numbers_wrapped(op, flat, arrays)
        if wrapped is None:
            raise
        return call_inplace(op, wrapped, params, entry)
    except (KernelCheck, NotImplementedError) as refused:   # (an integer division by zero,
        if type(refused) is not RefusedFirst:   # a kernel's refusal: self's shape and the
            _check_result_shape(op, self, flat)     # result's cast are checked first)
            _check_promoted_cast(op, flat, self)
        raise
    finally:
        loud_fp(token)
    if record:
        operand_views = _current_operand_views(self, flat)
    self._bump_version()
    if record:
        for x in operand_views:         # recorded with their history from before the write
            x._view = x._view[:6] + (x._vc.value,)
        _record_inplace(op, self, old, flat, lengths, params, recipe)
    return self


def _current_operand_views(self, flat):
    """The operands that are views sharing ``self``'s memory (``out[:, :2].copy_(out[:, 4:])``),
    their grad_fn brought up to date before the write bumps their version too: PyTorch reads an
    operand's history before writing. (The write gives their base a new node, from which a
    later use rebuilds them.)"""
    counter = self._vc
    if counter is None:                 # (a tensor without a counter yet has no views)
        return ()
    views = [x for x in flat[1:] if isinstance(x, Tensor) and x._view is not None
             and x._vc is counter]
    for x in views:
        history(x)
    return views


_E4M3 = D.float8_e4m3fn.np


def _write(op, self, dst, xp, arrays, params, casts, compute, flat=()):
    """Compute the op's result into ``dst`` (self's array), checking dtype and shape."""
    # (float8_e4m3fn saturates, which writing into it directly would not do)
    if op.inplace_forward is not None and compute is not _E4M3:
        result_dtype = D.bool_ if op.promote is not None and op.promote.name == "compare" \
            else D.FROM_NUMPY[compute] if compute is not None else self.dtype
        _check_cast(result_dtype, self.dtype, op, flat, self)
        try:
            op.inplace_forward(xp, dst, *arrays, *params)
        except ValueError as e:
            if "broadcast" not in str(e):
                raise
            _broadcast_failure(self, [a.shape for a in arrays if hasattr(a, "shape")])
    else:
        try:
            res = op.forward(xp, *arrays, *params)
        except ValueError as e:
            if isinstance(e, OpValueError) or "broadcast" not in str(e):
                raise
            _broadcast_failure(self, [a.shape for a in arrays if hasattr(a, "shape")])
        if type(res) is not type(dst):
            res = xp.asarray(res)
        if casts is not None and res.dtype == casts[1]:
            result_dtype = D.FROM_NUMPY[casts[0]]
            if casts[0] is _E4M3:               # no infinity: PyTorch saturates to +-448
                res = xp.clip(res, -448.0, 448.0)
        else:
            result_dtype = D.FROM_NUMPY[res.dtype]
        _check_cast(result_dtype, self.dtype, op, flat, self)
        if res.shape != dst.shape:
            _shape_mismatch(self, res.shape)
        xp.copyto(dst, res, casting="unsafe")


# ops that only warn when writing into an expanded tensor, and PyTorch's example of each
_DEPRECATED_ON_EXPANDED = {"masked_fill": "tensor[mask] = scalar",
                           "index_fill": "tensor[mask] = scalar",
                           "index_put": "tensor[indices] = tensor"}


def _check_overlap(op, dst, params, operands=()):
    """PyTorch's rule for writing into memory that several elements share (an expanded
    tensor): filling with a number is fine, masked and advanced-index writes are deprecated,
    and every other in-place op raises (fill_ with a tensor too)."""
    if op.name == "fill_" and not isinstance(operands[0], Tensor) or not dst.size \
            or not any(s == 0 and n > 1 for n, s in zip(dst.shape, dst.strides)):
        return                          # (an empty array's strides may be 0: nothing repeats)
    example = _DEPRECATED_ON_EXPANDED.get(op.name)
    if example is None or op.name == "index_put" and not params[0]:  # basic-index writes raise
        raise RuntimeError(INTERNAL_OVERLAP)
    names = [op.name]
    if op.name == "index_put" and _writes_through_masked_fill(dst, params, operands):
        names.append("masked_fill")     # PyTorch's index_put_ warns, then its masked_fill_
    for name in names:
        warnings.warn(f"Use of {name}_ on expanded tensors is deprecated. Please clone() the "
                      f"tensor before performing this operation. This also applies to "
                      f"advanced indexing e.g. {_DEPRECATED_ON_EXPANDED[name]}", UserWarning,
                      stacklevel=4)


def _check_self_overlap(op, self, params, flat):
    """``_check_overlap`` of self, which PyTorch's TensorIterator runs before it checks the
    shapes, dtypes and kernel (``expanded.bitwise_or_(complex)``: the overlap error)."""
    dst = self._data
    if 0 in dst.strides and not (op.name == "copy_" and _same_data(self, flat[1])):
        _check_overlap(op, dst, params, flat[1:])


def _same_data(dst, src):
    """Whether ``src`` is ``dst``'s very elements, laid out alike: PyTorch's copy_ then writes
    nothing, so even an expanded tensor may be copied onto itself."""
    a, b = dst._data, src._data if isinstance(src, Tensor) else None
    return b is not None and (a is b or a.dtype == b.dtype and a.shape == b.shape
                              and a.strides == b.strides and _address(a) == _address(b)) \
        and dst.is_conj() == src.is_conj() and dst.is_neg() == src.is_neg()


def _writes_through_masked_fill(dst, params, operands):
    """Whether index_put_ hands this write to masked_fill_ (one value, a sole mask)."""
    from ember.ops.indexing import BatchIndices, SubscriptIndices, _sole_mask
    indices, accumulate = params[0], params[1]
    values = operands[0] if operands else None
    if accumulate or type(indices) is BatchIndices or not isinstance(values, Tensor) \
            or values._data.size != 1:
        return False
    mask = _sole_mask(dst, indices, not isinstance(indices, SubscriptIndices))
    return mask is not None and mask.dtype == np.bool_     # (a uint8 mask raises there first)


def _check_leaf(t):
    if type(t) is not Tensor and getattr(t, "_transform_leaf", False):
        # an input of grad/vjp/jacrev is a leaf to the user even where ember made it an alias
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    if t._view is not None:
        if t._requires_grad or t._grad_fn is not None or _view_tracks(t):  # (else checked
            # once the write is known to record)
            check_no_grad_view(t)
        # as PyTorch: a view of a leaf that requires grad, or a view that requires grad of
        # any leaf (a view of a non-grad base made a leaf by requires_grad_(), views of that)
        base = t._view[0]
        if base._grad_fn is None and (base._requires_grad or t._requires_grad
                                      or t._grad_fn is not None):
            _check_single_view(t)       # (PyTorch names an unbind's or split's output first)
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in "
                               "an in-place operation.")
    # (a view whose base gained history since it was made, its grad_fn not yet regenerated
    # by a read, is such a leaf to PyTorch's check too)
    if t._grad_fn is None and (t._requires_grad or _view_tracks(t)):
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")


_COMPARISONS = ("compare", "equality", "order")


REBASED = "its base or another view of its base has been"     # (check_no_grad_view's words)


def _no_grad_view_error(mode, change):
    block, now = (("inference_mode", "in normal mode") if mode == "inference mode"
                  else ("no_grad", "with grad mode enabled"))
    return (f"created in {mode} and {change} modified inplace {now}. Given that this use case "
            f"is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
            f"both the view and the inplace either both inside the {block} block (if you don't "
            f"want the inplace to be tracked) or both outside (if you want the inplace to be "
            f"tracked).")


def check_no_grad_view(t, change="is being"):
    """Raise PyTorch's error for writing, with grad mode on, into a view made in no_grad or
    inference mode of a tensor that requires grad (or into a view of such a view): the write
    could not be recorded on the base's history consistently. Likewise for a view a custom
    Function returned (its backward stands for the view's). ``change``: ``REBASED`` when it is
    the view's base (or another view of it) that was written, in any mode."""
    made_by = t._meta.get("function_view") if t._meta else None
    if made_by:
        raise RuntimeError(_function_view_error(*made_by, change))
    mode = t._meta.get("no_grad_view") if t._meta else None
    if mode:
        raise RuntimeError("A view was " + _no_grad_view_error(mode, change))
    src = t._view[1]
    while src._view is not None:
        meta = src._meta
        # a view of a custom Function's view output inherits how that was made, as in PyTorch
        if meta and ((made_by := meta.get("function_view")) or
                     (mode := meta.get("no_grad_view"))):
            index = t._view[5] or 0
            name = t._view[2].node_class.__name__.rstrip("0123456789").removesuffix("Backward")
            if made_by:
                raise RuntimeError(_function_view_error(name, index, made_by[2], change))
            if t._grad_fn is None and not t._requires_grad:     # (made with no node)
                raise RuntimeError("A view was " + _no_grad_view_error(mode, change))
            raise RuntimeError(f"Output {index} of {name} is a view of a view which was "
                               + _no_grad_view_error(mode, change))
        src = src._view[1]


def _function_view_error(name, index, multi, change):
    """PyTorch's error for writing into a view a custom Function returned (``multi``: one of
    several differentiable outputs), or into a view of one."""
    if multi:
        return (f"Output {index} of {name} is a view and {change} modified inplace. This view "
                f"is the output of a function that returns multiple views. Such functions do "
                f"not allow the output views to be modified inplace. You should replace the "
                f"inplace operation by an out-of-place one.")
    return (f"Output {index} of {name} is a view and {change} modified inplace. This view was "
            f"created inside a custom Function (or because an input was returned as-is) and the "
            f"autograd logic to handle view+inplace would override the custom backward "
            f"associated with the custom Function, leading to incorrect gradients. This "
            f"behavior is forbidden. You can fix this by cloning the output of the custom "
            f"Function.")


def _check_promoted_cast(op, flat, self):
    """Raise PyTorch's cast error if the operands' promoted dtype can't be written to self."""
    if op.promote is None or op.promote.name in _COMPARISONS:
        return                          # (a comparison's bool result fits any tensor)
    operands = []
    for x in flat:
        if isinstance(x, np.generic):       # a NumPy number, read as the parser does
            x = _as_scalar(op, flat, x)
        if isinstance(x, Tensor):
            operands.append((x.dtype, D.DIM if x.ndim else D.ZERO_DIM))
        elif isinstance(x, (bool, int, float, complex)):
            operands.append((D.scalar_dtype(x), D.SCALAR))
    if op.promote.promoted is not None:
        operands = op.promote.promoted(operands)
    if operands:
        _check_cast(D.result_type_of(operands), self.dtype, op, flat)


def _c_named_cast(op, flat):
    """Whether ``op``'s cast error names self's C++ type: clamp's number-bound kernels check
    the cast themselves (``long int``); tensor bounds go through the common check (``Long``)."""
    return op is not None and op.name in ("clamp", "clamp_min", "clamp_max") and any(
        isinstance(x, (bool, int, float)) for x in flat[1:])


def _check_cast(result_dtype, self_dtype, op=None, flat=(), written=None):
    """PyTorch's error for a result it can't cast to ``self_dtype``; ``written``: the tensor
    written, whose mismatched broadcast shape is named first."""
    if result_dtype is not self_dtype and not D.can_cast(result_dtype, self_dtype):
        if written is not None:
            _check_result_shape(op, written, flat)
        from ember.ops._out_dtypes import _C_NAMES
        name = _C_NAMES[self_dtype] if _c_named_cast(op, flat) else self_dtype._torch_name
        raise RuntimeError(f"result type {result_dtype._torch_name} can't be cast to the "
                           f"desired output type {name}")


def _check_result_shape(op, t, flat):
    """PyTorch's error, before a refusal of the dtypes, when an elementwise op's operands
    broadcast to another shape than ``t``'s, which it writes."""
    if op.pointwise:
        shapes = [x.shape for x in flat if isinstance(x, Tensor)]
        try:
            fits = np.broadcast_shapes(*shapes) == t.shape
        except ValueError:              # (_broadcast_failure words it)
            fits = False
        if not fits:
            _broadcast_failure(t, shapes)


def _broadcast_failure(t, shapes):
    """PyTorch's error when an in-place op's operands don't broadcast into ``t``."""
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise RuntimeError(broadcast_message(shapes)) from None
    _shape_mismatch(t, shape)


def _shape_mismatch(t, shape):
    raise RuntimeError(f"output with shape {list(t.shape)} doesn't match the broadcast shape "
                       f"{list(shape)}")


def _history_snapshot(t, copy_values):
    """A stand-in for ``t`` before it is overwritten: same history, old values if needed."""
    fn, nr = history(t)
    old = _make(t._data.copy() if copy_values else t._data)
    old._grad_fn = fn
    old._output_nr = nr
    old._requires_grad = t._requires_grad
    _check_single_view(t)
    return old


def _reads_self(op):
    """Whether a recorded in-place call of ``op`` saves ``self``'s values from before the
    write (a copy): not where no gradient reads them (``Op.reads_inputs``: index_add_,
    masked_fill_, scatter_, addmm_ save only its metadata)."""
    reads = _READS_SELF.get(op)
    if reads is None:
        readers = op.input_readers
        reads = _READS_SELF[op] = op.saves_inputs and not (
            type(readers) is tuple and readers[:1] == ((),) and op.not_implemented_kernel is None)
    return reads


_READS_SELF = {}                # op -> whether its recorded in-place calls copy self


def _check_single_view(t):
    if t._view is not None and in_multi_output_view(t):
        # (a view with no grad_fn, of a base that needs none, PyTorch supposes made in no_grad)
        head = (f"{_view_output_name(t)} is a view and is being modified inplace."
                if t._grad_fn is not None else "A view was created in no_grad mode and is being "
                "modified inplace with grad mode enabled.")
        raise RuntimeError(
            f"{head} This view is the output of a function that returns multiple views. Such "
            f"functions do not allow the output views to be modified inplace. You should replace "
            f"the inplace operation by an out-of-place one.")


def _in_nested_select(t):
    """Whether view ``t`` is a strided nested tensor's component ``nt[i]``, or a view of one
    (marked by ``ember.nested``)."""
    while t._view is not None:
        if t._meta and "nested_select" in t._meta:
            return True
        t = t._view[1]
    return False


def _view_output_name(t):
    """'Output 1 of Unbind': how PyTorch names view ``t`` in its errors (the forward function
    of its grad_fn: Split, SplitWithSizes, Unbind, or Select, View... for a view of their
    outputs, which it calls output 0)."""
    node = t._grad_fn.name() if t._grad_fn is not None else t._view[2].node_class.__name__
    if t._meta and "nested_output" in t._meta:     # (a nested tensor's unbind: the whole name)
        return f"Output {t._meta['nested_output']} of {node}"
    return f"Output {t._view[5] or 0} of {node.rstrip('0123456789').removesuffix('Backward')}"


def _record_inplace(op, self, old, flat, lengths, params, recipe):
    from ember.ops._recording import _record
    base_edge = history(self._view[0]) if self._view is not None else None
    node = None
    if op.not_implemented_kernel is not None:   # PyTorch's node names the in-place kernel
        op.record_check(op, (old,) + tuple(flat[1:]), params, True)
        # (no edge for self when it needs no grad, even on a view, whose CopySlices then
        # drops the first of the others', as PyTorch's)
        hang_not_implemented(self, f"{op.not_implemented_kernel}_", (old,) + tuple(flat[1:]),
                             None if self._view is None else (None, base_edge, recipe))
    else:
        node = _record(op, (old,) + tuple(flat[1:]), lengths, params, self, inplace=True)
        _date_saved_self(node, flat, self)
    self._output_nr = 0                 # it was output 1 of var_mean, say; now of this node
    move_retained_grad(self, old._grad_fn, old._output_nr)
    if self._view is not None:
        base = self._view[0]
        if node is not None and self._data.dtype.kind in _DIFFERENTIABLE_KINDS:  # (not ints)
            base._grad_fn = CopySlices(base_edge, node, recipe,
                                       None if base.is_contiguous() else base.dim_order())
            base._output_nr = 0
        move_retained_grad(base, *base_edge)
        if FORWARD_SHOWN:               # (NOTE [Forward-mode primals])
            from ember.func._forward_primal import show
            show(base)
        if node is not None and getattr(node, "_out", None) is not None:
            # as PyTorch, the output saved (exp_'s, relu_'s) has the view's history rebuilt
            # over the CopySlices, not this node: a double backward through it then reaches
            # the base's history instead of running this node a second time
            refresh_view_history(self)
            if self._grad_fn is not None:
                node._out_history = (weakref.ref(self._grad_fn), self._output_nr)


def _date_saved_self(node, flat, self):
    """An operand sharing ``self``'s memory (``v.mul_(v)``) was saved after the write bumped
    their version: date it to before the write, so that backward, which needs its old
    values, reports the change as PyTorch does instead of using the new ones."""
    versions = getattr(node, "_versions", None)
    if versions is None:
        return
    counter = self._vc
    for x in flat[1:]:
        if isinstance(x, Tensor) and x._vc is counter:
            break
    else:
        return                          # (the common case: no operand shares self's memory)
    versions = list(versions)           # (a tuple: see _recording._record)
    for i, x in enumerate(flat[1:], 1):
        if isinstance(x, Tensor) and x._vc is counter and versions[i] is not None:
            versions[i] -= 1
    node._versions = tuple(versions)


def _inplace_view(op, self, params):
    """``self.<op>_()`` for a view op: ``self`` becomes the view ``op`` makes of it (see NOTE
    [In-place view ops]); returns ``self``."""
    from ember.ops._registry import call
    record = _GRAD.grad_enabled and (self._requires_grad or self._grad_fn is not None) \
        and op.vjp is not None
    old = stand_in(self)                # NOTE [Conjugate views]
    if old is None:
        old = _make(self._data)
    if record:
        _check_single_view(self)            # outputs of split, unbind, ... stay as they are
        old._grad_fn, old._output_nr = history(self)
        old._requires_grad = self._requires_grad
    old._vc = self._shared_version()
    old._view = self._view
    try:
        new = call(op, (old,), params)
    except RuntimeError as e:           # "t() expects ..." is "t_() expects ..." here
        text = str(e)
        if not text.startswith(f"{op.name}()"):
            raise
        raise RuntimeError(f"{op.name}_(){text[len(op.name) + 2:]}") from None
    if op.name == "as_strided" and self._view is None \
            and _address(new._data) != _address(self._data) and _storage_root(self) is self:
        # (as_strided_ at an offset into its own memory: the only in-place view op that moves)
        self._meta = {**(self._meta or {}), "storage_root": _GONE,
                      "storage_array": memory(self)}
    take_memory(self, new)
    if self._view is not None:
        self._view = new._view          # the recipe gains ``op``
    if not record and new._data.shape != old._data.shape and (
            self._grad_fn is not None or self._requires_grad):
        from ember.autograd._reshaped_outputs import mark   # (its node now expects old's)
        mark(self, old._data.shape)
    if record:
        self._grad_fn, self._output_nr = new._grad_fn, new._output_nr
        _rename_inplace_node(self._grad_fn)
    self._bump_version()
    if record and self._view is not None:   # that history is current: keep it
        self._view = self._view[:6] + (self._vc.value,)
    if self._meta is None:
        self._meta = {}
    self._meta.setdefault("view_undo", []).append(_undo_step(op, params, old._data.shape))
    return self


# PyTorch numbers the in-place overloads of a view op after its out-of-place ones, so the node
# of ``x.transpose_(0, 1)`` is TransposeBackward1 and that of ``x.squeeze_(0)`` SqueezeBackward4
_INPLACE_VIEW_NODES = {"TBackward0": "TBackward1", "TransposeBackward0": "TransposeBackward1",
                       "SqueezeBackward0": "SqueezeBackward3",
                       "SqueezeBackward1": "SqueezeBackward4",
                       "SqueezeBackward2": "SqueezeBackward5",
                       "UnsqueezeBackward0": "UnsqueezeBackward1",
                       "AsStridedBackward0": "AsStridedBackward1"}
_INPLACE_VIEW_CLASSES = {}


def _GONE():
    return None                         # (a storage root no tensor holds: see _storage_root)


def _rename_inplace_node(node):
    """Give the node of an in-place view op the name of PyTorch's in-place overload."""
    cls = type(node)
    renamed = _INPLACE_VIEW_CLASSES.get(cls)
    if renamed is None:
        name = _INPLACE_VIEW_NODES.get(cls.__name__)
        if name is None:
            return
        renamed = _INPLACE_VIEW_CLASSES[cls] = type(name, (cls,), {"__slots__": ()})
    node.__class__ = renamed


def _undo_step(op, params, old_shape):
    """The view step that takes a tensor changed by ``op`` in place back to its old shape."""
    from ember.ops._dims import wrap_dim
    from ember.ops._registry import REGISTRY
    if op.name in ("t", "transpose"):
        return op, params, None
    if op.name == "unsqueeze":
        return REGISTRY["squeeze"], (wrap_dim(params[0], len(old_shape) + 1),), None
    return REGISTRY["view"], (tuple(old_shape),), None


# --- views ------------------------------------------------------------------------------------

def _hops(t):
    """The view steps from ``t``'s base out to ``t``, each with the undo steps of the in-place
    shape changes its source has had (when there were any, the step may predate some)."""
    hops = []
    while t._view is not None:
        base, src, op, params, _, index = t._view[:6]
        undo = src._meta.get("view_undo") if src._meta else None
        hops.append(((op, params, index), tuple(reversed(undo)) if undo else ()))
        if src is base:
            break
        t = src
    hops.reverse()
    return hops


def view_recipe(t):
    """The view ops, from the base outwards, that turn ``t``'s base into ``t``.

    A tensor ``t`` was taken from may have changed shape in place since (``x.t_()``): the step
    taken from it then needs that change undone first. How many of its changes came after the
    step is read off the memory: the recipe must give ``t``'s own shape, strides and address.
    """
    hops = _hops(t)
    if not any(undo for _, undo in hops):
        return tuple(step for step, _ in hops)
    for counts in itertools.product(*(range(len(undo) + 1) for _, undo in hops)):
        recipe = tuple(s for (step, undo), k in zip(hops, counts) for s in undo[:k] + (step,))
        if _recreates(t, recipe):
            return recipe
    raise RuntimeError("ember cannot recreate a view from its base after in-place shape "
                       "changes (t_, transpose_, squeeze_, unsqueeze_) of the tensors it was "
                       "taken from; take the view after those changes.")


def _recreates(t, recipe):
    """Whether ``recipe`` on ``t``'s base array gives ``t``'s array (run on arrays only)."""
    a = t._view[0]._data
    xp = xp_of(a)
    try:
        for op, params, index in recipe:
            a = op.forward(xp, a, *params)
            if index is not None:
                a = a[index]
    except (RuntimeError, IndexError, ValueError, TypeError):
        return False
    b = t._data
    return a.shape == b.shape and (a.size == 0 or (a.strides == b.strides
                                                    and _address(a) == _address(b)))


def replay(recipe, tensor):
    """Apply a view recipe to ``tensor``."""
    from ember.ops._registry import call
    for op, params, index in recipe:
        tensor = call(op, (tensor,), params)
        if index is not None:
            tensor = tensor[index]
    return tensor


_DTYPE_VIEWS = frozenset(("view_as_real", "view_as_complex", "_view_dtype"))
# views a multi-step recipe is replayed through rather than rebuilt as one as_strided: those
# changing the dtype, and those whose values are not their memory's (a conjugate)
_REPLAYED = _DTYPE_VIEWS | {"real", "imag", "conj", "_alias", "_kernel_input"}
_KEEP_NODE = _DTYPE_VIEWS | {"conj"}        # the last views whose replayed node stays


def refresh_view_history(t):
    """Rebuild a view's grad_fn when its base's history changed since it was made, or when
    their memory was written in place since (under no_grad too: an optimizer's step on a
    leaf), as PyTorch regenerates a view's grad_fn when its version moved on."""
    view = t._view
    base = view[0]
    version = t._vc.value
    if base._grad_fn is view[4] and version == view[6]:
        return
    if base._grad_fn is None and not base._requires_grad:
        if version != view[6]:
            t._view = view[:6] + (version,)
        return
    check_no_grad_view(t, REBASED)      # (a base without history: nothing to refuse)
    if in_multi_output_view(t):
        # (made when its base had no history, it has no node: PyTorch's message then says
        # it was made in no_grad mode)
        if t._grad_fn is not None:
            head = (f"{_view_output_name(t)} is a view and its base or another view of its "
                    f"base has been modified inplace.")
        else:
            head = ("A view was created in no_grad mode and its base or another view of its "
                    "base has been modified inplace with grad mode enabled.")
        raise RuntimeError(f"{head} This view is the output of a "
                           f"function that returns multiple views. Such functions do not allow "
                           f"the output views to be modified inplace. You should replace the "
                           f"inplace operation by an out-of-place one.")
    recipe = view_recipe(t)
    prev = _GRAD.grad_enabled
    _GRAD.grad_enabled = True
    try:
        if len(recipe) > 1 and not any(op.name in _REPLAYED for op, _, _ in recipe):
            # PyTorch's one AsStridedBackward0 (its saved geometry), straight over the base
            from ember.ops.as_strided import _as_strided
            fresh = _as_strided(base, t.shape, t.stride(), t.storage_offset())
        else:
            fresh = replay(recipe, base)
    finally:
        _GRAD.grad_enabled = prev
    if recipe and recipe[-1][0].name not in _KEEP_NODE and fresh._grad_fn is not None:
        # PyTorch rebuilds such a view by one as_strided (and replays only dtype-changing
        # views, as view_as_real, below it: ``z.real``; a conjugate last, no as_strided
        # gives one): its node shows that name
        from ember.ops._registry import rename_node
        rename_node(fresh, "AsStridedBackward0")
    old_edge = t._grad_fn, t._output_nr
    t._grad_fn = fresh._grad_fn
    t._output_nr = fresh._output_nr
    t._view = view[:4] + (base._grad_fn, view[5], version)
    move_retained_grad(t, *old_edge)


class CopySlices(Node):
    """Backward of an in-place op on a view, recorded on the view's base."""

    __slots__ = ("fn", "recipe", "order")

    def __init__(self, base_edge, fn, recipe, order=None):
        Node.__init__(self, (base_edge,) + fn.next_functions[1:])
        self.fn = fn
        self.recipe = recipe
        self.order = order          # the base's dims in memory order, when not row-major

    def name(self):
        """``torch::autograd::CopySlices``, as PyTorch names this node."""
        return "torch::autograd::CopySlices"

    def apply(self, grads):
        grad = grads[0]
        # laid out as the base (the gradient may arrive transposed): an as_strided view in the
        # recipe reads memory order
        if self.order is None:
            result = grad.clone(memory_format=contiguous_format)
        else:
            result = empty_permuted(grad.shape, self.order, dtype=grad.dtype,
                                    device=grad.device).copy_(grad)
        region = replay(self.recipe, result)
        inner = self.fn.apply([region.clone()])
        if inner[0] is None:
            region.zero_()
        else:
            region.copy_(inner[0])
        return [result] + list(inner[1:])

    def _release(self):
        self.fn._release()
