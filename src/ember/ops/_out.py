"""Writing an op's results into its ``out=`` tensors: PyTorch's checks (no autograd, the count,
the dtype rules of ops/_out_dtypes.py, inference tensors), then the copy, resizing as PyTorch
does with its deprecation warning."""

import warnings

from ember import _dtype as D
from ember._conj_view import set_memory
from ember._inference import MADE as INFERENCE_MADE, check_inplace
from ember._memory_format import dense, preserved, restrided
from ember._storage_place import born_row_major
from ember._tensor import Tensor, _view_tracks
from ember._warn import outside_level
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.graph import history
from ember.backend import loud_fp, quiet_fp, xp_of
from ember.ops._out_names import KERNEL_CHECKS_AFTER, cast_refusal, grad_refusal_kernel
from ember.ops._out_names import copies_out, not_implemented_kernel
from ember.ops._not_implemented import hang_not_implemented
from ember.ops._op_errors import RefusedFirst
from ember.ops._overlap import check_internal_overlap

__all__ = ["grad_refused_out", "refused_out", "write_out"]


def _count_error(op, out, wanted, given):
    """PyTorch's parser's error for ``out=`` of another count of tensors than the op's."""
    from ember.ops._overloads import in_parser_words
    if wanted > 1 and given > 1 or isinstance(out, (tuple, list)) and wanted > 1:
        return TypeError(f"expected tuple of {wanted} elements but got {given}")
    kind = "tuple of Tensors" if wanted > 1 else "Tensor"
    # (the parser's name: special_i0e, linalg_vector_norm)
    name = op.short_name if op.namespace == "nn.functional" else op.name.replace(".", "_")
    return TypeError(in_parser_words(f"{name}(): argument 'out' must be {kind}, not "
                                     f"{type(out).__name__}"))


def write_out(op, out, outputs, requires_grad, inputs=(), params=()):
    """Copy results into the ``out=`` tensor(s), resizing as PyTorch does; ``inputs`` are the
    op's operands (and ``params`` its other arguments), for the ops whose checks depend on
    them."""
    results = outputs if type(outputs) is tuple else (outputs,)
    targets = out if isinstance(out, (tuple, list)) else (out,)
    hang = copied = None
    views = {}                          # id(out) -> what hang_not_implemented needs
    if _GRAD.grad_enabled and (requires_grad or any(
            isinstance(d, Tensor) and (d._requires_grad or d._grad_fn is not None
                                       or _view_tracks(d))
            for d in targets)):     # (a forward-mode transform's input too: it records)
        name = grad_refusal_kernel(op, inputs, params)  # (None: written untracked)
        kernel = None if name is not None else not_implemented_kernel(op, inputs, params)
        if kernel is not None:      # recorded, unless an out is a leaf requiring grad
            from ember.ops.view_copies import _refuse_grad_out      # (or a view of one)
            for d in targets:
                if isinstance(d, Tensor):
                    _refuse_grad_out(kernel, d)
            hang = kernel
        elif name is None and requires_grad and copies_out(op, params):
            copied = True               # (the outputs were recorded: ops/_dispatch.py)
        if name is not None:
            raise _grad_refusal(name)
    if len(targets) != len(results) or targets is out and len(results) == 1:
        raise _count_error(op, out, len(results), len(targets))
    token = quiet_fp()      # (casts that overflow give inf, as PyTorch's, unwarned)
    try:
        for dst, res in zip(targets, results):
            if not isinstance(dst, Tensor):
                raise TypeError(f"{op.name}(): argument 'out' must be Tensor, not "
                                f"{type(dst).__name__}")
            if INFERENCE_MADE[0]:
                check_inplace(dst)
            check_internal_overlap(dst._data)
            op.overlap_check(dst, inputs)
            checked = False
            if op.out_dtype_check is not None:      # True: accepted, whatever the cast
                checked = op.out_dtype_check(dst.dtype, res.dtype, inputs)
            if op.out_dtype_error is not None and dst.dtype is not res.dtype:
                from ember.ops._out_dtypes import message
                raise RuntimeError(message(op, res.dtype, dst.dtype,
                                           next(i for i, r in enumerate(results) if r is res)))
            if not checked and not D.can_cast(res.dtype, dst.dtype):
                raise cast_refusal(op, res.dtype, dst.dtype,
                                   next(i for i, r in enumerate(results) if r is res), inputs)
            if hang is not None:    # (out's history and a view's base's, from before)
                from ember.ops._inplace import _history_snapshot, view_recipe
                old = _history_snapshot(dst, False) if dst.requires_grad else None
                views[id(dst)] = (old, None if dst._view is None else
                                  (None, history(dst._view[0]), view_recipe(dst)))
            if dst.shape != res.shape:
                if dst.numel() != 0:
                    warn_resized(dst.shape, res.shape)
                laid = _resized_layout(op, res._data, inputs, dst)
                if dst._view is None and dst._meta is None and dst._data.size == 0:
                    # (memory no one shares.) An elementwise op's out is resized to the layout
                    # its result has, odd strides of dims of size 1 included
                    # (an empty one row-major, as a fresh array: see _storage_place.born_row_major)
                    dst._data = res._data.astype(dst._data.dtype) if laid is None or not laid.size \
                        else preserved(xp_of(laid), laid, dst._data.dtype)
                    if not dst._data.size:
                        dst._data = born_row_major(dst._data)
                    if copied:
                        dst.copy_(res)      # PyTorch's composite: resize_, then copy_ (recorded)
                        continue
                    dst._bump_version()
                    continue
                # as Tensor.resize_: contiguous over its own memory while that is large enough
                # (out=base[:2] grown to three rows writes base's third row), else new memory
                from ember.ops.conversion import _resize_storage
                _resize_storage(dst, res.shape)
                if laid is not None:
                    _restride_as(dst, laid)
            if copied:
                dst.copy_(res)
                continue
            xp_of(dst._data).copyto(dst._data, res._data, casting="unsafe")
            dst._bump_version()
    finally:
        loud_fp(token)
    if hang is not None:                # PyTorch's node NotImplemented (a view's: its base's)
        for dst in targets:     # over the inputs requiring grad, then out's former history
            old, view = views[id(dst)]
            hang_not_implemented(dst, hang, tuple(inputs) + (old,), view)
    if op.namedtuple is not None and type(out) is tuple:     # sort(out=...): return_types.sort_out
        return getattr(op.namedtuple, "out_type", op.namedtuple)(*out)
    return out


def _grad_refusal(name):
    return RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                        f"differentiation, but one of the arguments requires grad.")


def grad_refused_out(op, flat, params, own=False):
    """Raise autograd's refusal of an out= call with inputs requiring grad, which PyTorch
    raises before its kernel's checks (a dim out of range, a refused dtype); if ``own``, only
    where that kernel is the op's own (a composite's checks, diff's or outer's, come first)."""
    if op.vjp is not None and _GRAD.grad_enabled and any(
            isinstance(d, Tensor) and d.requires_grad for d in flat):
        name = grad_refusal_kernel(op, flat, params)
        if name is not None and (not own or op.name in KERNEL_CHECKS_AFTER or name in (
                op.name, op.name.replace(".", "_"), op.short_name)):
            raise _grad_refusal(name)


def refused_out(op, flat, params, out, refused):
    """PyTorch's checks of an out= call that come before its kernel refuses the compute dtype
    (``refused``): autograd's refusal of inputs requiring grad, then (but for a refusal in
    the op's own checks, RefusedFirst) out's dtype rules and, for an elementwise op, the cast
    of its result type into out's dtype."""
    grad_refused_out(op, flat, params)
    if type(refused) is RefusedFirst:
        return
    from ember.ops._out_dtypes import check_kept_out
    check_kept_out(op, flat, out)
    want = getattr(refused, "result_type", None)    # (a policy's refusal: see compute_dtype)
    if want is None and op.pointwise and len(flat) == 1 and isinstance(flat[0], Tensor):
        want = flat[0].dtype                        # (a one-operand forward's own refusal)
    if op.pointwise and want is not None and isinstance(out, Tensor) \
            and not D.can_cast(want, out.dtype):
        raise cast_refusal(op, want, out.dtype, 0, flat)


def _resized_layout(op, res, inputs, dst):
    """The array whose layout a resized out= tensor ``dst`` takes (PyTorch's TensorIterator
    gives it the strides it chose for the result); None for the other ops' default."""
    if op.out_layout is not None:
        return op.out_layout(res, inputs, dst)
    return res if op.laid_operands else None


def _restride_as(dst, res):
    """``dst``, just laid out row-major over its memory, restrided as an elementwise op's
    dense result ``res`` (PyTorch's TensorIterator resizes an out tensor, then sets the
    strides it chose for the result, over the same memory)."""
    strides = tuple(s // res.itemsize * dst._data.itemsize for s in res.strides)
    if dst._data.strides != strides and dense(res) and min(strides, default=0) > 0:
        set_memory(dst, restrided(xp_of(dst._data), dst._data, res.shape, strides))


def warn_resized(had, required):
    """PyTorch's warning for an ``out=`` tensor of shape ``had`` (with elements) resized to
    the ``required`` shape."""
    warnings.warn(
        f"An output with one or more elements was resized since it had shape {list(had)}, "
        f"which does not match the required output shape {list(required)}. This behavior is "
        f"deprecated, and in a future PyTorch release outputs will not be resized unless they "
        f"have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, "
        f"to zero elements with t.resize_(0).", UserWarning, stacklevel=outside_level())
