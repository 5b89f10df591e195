"""The dispatcher every registered op's call goes through: operands checked and cast to the
compute dtype, the forward run on backend arrays, the graph recorded, ``out=`` written."""

import numpy as np

from ember import _dtype as D
from ember._conj_view import ConjView, memory
from ember._memory_format import laid_like, row_major
from ember._tensor import Tensor, _make, _view_tracks
from ember.amp._state import STATE as _AMP
from ember.amp._policy import Composite
from ember.amp.autocast_mode import cast_operands
from ember.autograd._forward_traces import FORWARD_OPEN, TRACES as FORWARD_TRACES
from ember.autograd.grad_mode import STATE as _GRAD
from ember.backend import (ROUNDS_SCALAR_OPERANDS, SEVERAL_GPUS, XP_BY_ARRAY_TYPE, device_guard,
                           device_scalar, loud_fp, operands_gpu_elsewhere, quiet_fp)
from ember.backend.meta import MetaArray
from ember.ops._meta import MetaCall
from ember.ops._barebones import WIDE_UNSIGNED_NP, KernelCheck, Refused, refuse_operands
from ember.ops._op_errors import RefusedFirst, check_broadcast, translate_error
from ember.ops._out import grad_refused_out, refused_out, write_out
from ember.ops._out_names import COPIED_OUT
from ember.ops._pointwise_layout import laid_as_operands, odd_unit_strides, row_major_before_last
from ember.ops._promotion import UINT64_NUMBER, compute_dtype
from ember.ops._recording import _mark_view, _record, refused_grads_first
from ember.ops._scalars import ROUNDED, checked_scalar, huge_int_error, rounded_number
from ember.overrides import is_plain as _plain_subclass

__all__ = ["call", "RAW_OUTPUTS", "device_mismatch", "ACTIVE_VMAPS"]

_NDARRAY = np.ndarray
_SCALARS = {int: int, float: float, bool: bool, complex: complex}
_E4M3 = D.float8_e4m3fn.np
_WRAP_INT = {np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.uint16,
                                   np.uint32, np.uint64)}


# NOTE [Batched parameters]
# A vmap BatchedTensor among a call's tensor inputs reaches vmap through _prepare's override;
# one hidden in a parameter (x[i], index_put's indices, searchsorted's sorter, a tensor atol)
# does not. While any vmap runs (the count, all threads together), a call whose inputs are
# unbatched looks through its parameters too; with none running that costs one list read.
ACTIVE_VMAPS = [0]


class _Override(Exception):
    """Raised inside preparation when an operand overrides ``__torch_function__``."""


def call(op, inputs, params, out=None):
    """Run ``op`` on ``inputs`` (tensors or numbers) with ``params``; record the graph."""
    if op.unusual_inputs:               # (one test for most ops: see Op.returns_input_when)
        x = inputs[0]
        if op.returns_input is not None and out is None and _returnable(x) \
                and op.returns_input(x, params):
            return x
        flat, lengths = op.flatten_inputs(inputs) if op.seq_inputs else (inputs, None)
    else:
        flat, lengths = inputs, None
    # autocast covers the plain form of an op: a call with out= runs in its operands' dtypes
    if op.autocast is not None and _AMP.enabled and (out is None or out is RAW_OUTPUTS):
        flat = cast_operands(op.autocast, flat, params)
        if type(flat) is Composite:     # PyTorch composes this call of other ops
            return flat.run(inputs, params, out)
    if SEVERAL_GPUS[0]:
        elsewhere = _other_gpu(flat)
        if elsewhere is not None:       # run where the operands are, as PyTorch does
            with device_guard(elsewhere):
                return call(op, inputs, params, out)
    try:
        xp, arrays, requires_grad, casts, _ = _prepare(op, flat)
    except _Override:
        from ember.overrides import handle_op
        return handle_op(op, inputs, params, out)
    except MetaCall:
        from ember.ops._meta import meta_call
        return meta_call(op, inputs, params, out)
    except Refused as refused:
        if out is not None:
            refused_out(op, flat, params, out, refused)
        refuse_after_checks(op, refused, params, lengths)
    except NotImplementedError as refused:
        if out is not None and out is not RAW_OUTPUTS:  # (PyTorch checks out's dtype
            refused_out(op, flat, params, out, refused)     # first: neg, abs)
        raise
    except RuntimeError:                # (a policy's refusal: maximum of complex tensors)
        if out is not None and out is not RAW_OUTPUTS:
            grad_refused_out(op, flat, params)
        raise
    if ACTIVE_VMAPS[0] and params and has_batched(params):
        from ember.func._batching import dispatch_params
        return dispatch_params(op, inputs, params, out)
    recording = requires_grad and _GRAD.grad_enabled    # (a thread-local: read it once)
    if requires_grad and not recording and FORWARD_OPEN[0] and out is None \
            and FORWARD_TRACES.starts and not _GRAD.inference:  # NOTE [Tangents through no_grad]
        from ember.func._no_grad_tangents import call_recording_tangents
        return call_recording_tangents(op, inputs, params)
    if recording and op.composed is not None and out is None:
        res = op.composed(flat if lengths is None else op.structure(flat, lengths), params)
        if res is not NotImplemented:
            return res
    if lengths is not None:
        arrays = op.structure(arrays, lengths)
    args = params if casts is None or not op.dtype_params else params_in_dtype(op, params,
                                                                                casts[0])
    token = None if op.view else quiet_fp()     # views compute nothing to warn of
    kept = None
    try:
        if recording and op.keeps:      # NOTE [Kept values]: only a recorded call keeps
            kept = []
            res = op.forward(xp, *arrays, *args, keep=kept)
        else:
            res = op.forward(xp, *arrays, *args)
        # an elementwise result: NumPy lays it out as PyTorch does after a row-major first
        # operand that does not broadcast, or row-major operands (ops/_pointwise_layout.py);
        # else PyTorch's layout is looked up. One operand's layout NumPy keeps as PyTorch does
        # but for the strides of dims of size 1 or 0 in a non-contiguous one (a contiguous
        # one's result is row-major in both)
        n = op.laid_operands
        if n == 1:
            # (an array: no one-operand pointwise op takes numbers.) PyTorch computes 16 bits
            # in float32 without a copy; a copy cast to another dtype is laid out as PyTorch's
            # is, a view (_prepare). A fresh operand (no base) is taken as contiguous, so the
            # common call pays one test; a 16-bit one is checked (a cast's may not be)
            a = arrays[0] if casts is None else flat[0]._data
            if (a.base is not None or casts is not None) and not a.flags.c_contiguous \
                    and type(res) is type(a) \
                    and (1 in res.shape or 0 in a.strides):
                res = laid_as_operands(xp, _rounded(res, xp, casts), [a], op.pointwise)
        elif n:
            a = arrays[0]
            # (a broadcast first operand: the last one's layout counts, the middle ones' are
            # tested below)
            if (type(a) is _NDARRAY or type(a) in XP_BY_ARRAY_TYPE) and (
                        not a.flags.c_contiguous
                        or type(res) is not tuple and a.size != res.size
                        and type(arrays[-1]) in XP_BY_ARRAY_TYPE
                        and not arrays[-1].flags.c_contiguous) \
                    or n > 2 and not row_major_before_last(arrays) \
                    or type(res) is not tuple and 1 in res.shape \
                    and odd_unit_strides(arrays, res.strides):
                res = laid_as_operands(xp, _rounded(res, xp, casts), arrays, op.pointwise)
        if type(res) is _NDARRAY and casts is None:
            outputs = _make(res)
        elif type(res) is tuple:
            outputs = tuple([_make(r) if type(r) is _NDARRAY and casts is None
                             else _wrap(r, xp, casts) for r in res])
        elif casts is None:             # (_wrap's work inlined: a full reduction's scalar)
            outputs = _make(res if type(res) in XP_BY_ARRAY_TYPE else xp.asarray(res))
        else:
            outputs = _wrap(res, xp, casts)
    except (ValueError, TypeError, IndexError, OverflowError) as e:
        if recording and op.refused_grads is not None:
            refused_grads_first(op, flat, e)
        if out is not None and out is not RAW_OUTPUTS and type(e) is not TypeError:
            grad_refused_out(op, flat, params, own=True)    # (its kernel's checks follow)
        if type(e) is OverflowError and lengths is None:
            wrapped = uint64_numbers_wrapped(op, flat, arrays)
            if wrapped is not None:
                return call(op, wrapped, params, out)
        raise translate_error(op, e, arrays) from None
    except RuntimeError as e:           # (NotImplementedError too)
        if recording and op.refused_grads is not None:
            refused_grads_first(op, flat, e)
        if out is not None and out is not RAW_OUTPUTS:  # (a kernel's checks come after
            if type(e) is NotImplementedError:          # out='s: a dtype refusal after
                refused_out(op, flat, params, out, e)
            else:
                grad_refused_out(op, flat, params, own=True)
        raise
    finally:
        if token is not None:
            loud_fp(token)
    if op.view and _mark_view(op, flat[0], params, outputs, requires_grad and not recording):
        recording = False               # views of an inference tensor: no graph
    # (a call with out= and inputs requiring grad is refused by write_out: nothing to record,
    # but for PyTorch's composites that copy their recorded result into out)
    if recording and op.vjp is not None and (out is None or out is RAW_OUTPUTS
                                             or op.name in COPIED_OUT):
        _record(op, flat, lengths, params, outputs, kept or None)
    elif requires_grad and op.unrecorded_check is not None:
        op.unrecorded_check(flat, params)
    if out is not None:
        if out is RAW_OUTPUTS:
            return outputs
        return write_out(op, out, outputs, requires_grad, flat, params)
    if op.namedtuple is not None:
        return op.namedtuple(*outputs)
    return outputs


def refuse_after_checks(op, refused, params, lengths):
    """Raise ``refused`` (ops/_barebones.py) after the forward's argument errors, which
    PyTorch raises before it picks a kernel: the forward runs for them, its result unused."""
    if refused.xp is not None:
        arrays = refused.arrays if lengths is None else op.structure(refused.arrays, lengths)
        token = quiet_fp()
        try:
            op.forward(refused.xp, *arrays, *params)
        except OverflowError as e:      # (a number too large for a refused dtype: no kernel
            error = translate_error(op, e, arrays)      # converts it; one beyond 64 bits:
            if refused.dtype is None or error is not e:  # PyTorch's Scalar refuses it first)
                raise error from None
        except (ValueError, TypeError, IndexError) as e:
            raise translate_error(op, e, arrays) from None
        except (NotImplementedError, KernelCheck):
            pass
        finally:
            loud_fp(token)
    message = str(refused) if refused.by_params is None else refused.by_params(str(refused),
                                                                                 params)
    raise NotImplementedError(message) from None


def _returnable(x):
    """Whether ``x`` may be returned itself by an op declaring ``returns_input_when``: a plain
    tensor, or one of a subclass that skips ``__torch_function__`` now (a Parameter; any
    subclass under its default ``__torch_function__``), as PyTorch returns those too; not
    ember's own overriding types (batched, dual, sparse, nested), whose data is laid out
    otherwise."""
    t = type(x)
    return t is Tensor or (isinstance(x, Tensor) and _plain_subclass(t)
                           and not getattr(t, "_takes_registry_calls", False))


RAW_OUTPUTS = object()      # call(..., out=RAW_OUTPUTS): every output, before ``namedtuple``


def has_batched(params):
    """Whether a vmap BatchedTensor is among ``params`` or inside their lists and tuples."""
    from ember.func._batched import BatchedTensor
    for p in params:
        if type(p) is BatchedTensor:
            return True
        if type(p) is list or isinstance(p, tuple):
            if has_batched(p):
                return True
    return False


def _wrap(res, xp, casts):
    if type(res) not in XP_BY_ARRAY_TYPE:       # a scalar (a forward may return another
        res = xp.asarray(res)                   # backend's array: _to_copy moves devices)
    return _make(_rounded(res, xp, casts))


def _rounded(res, xp, casts):
    """``res`` (an array) rounded back to the 16-bit (or 8-bit) dtype it was computed for."""
    if casts is not None and res.dtype == casts[1]:
        if casts[0] is _E4M3:                   # no infinity: PyTorch saturates to +-448
            res = xp.asarray(xp.clip(res, -448.0, 448.0))   # (a 0-dim clip is a scalar)
        # (NumPy's cast of a non-contiguous array drops the strides of its dims of size 1)
        res = res.astype(casts[0]) if res.flags.c_contiguous else \
            laid_like(xp, res, res, casts[0])
    return res


def _prepare(op, flat):
    """Check operands and cast them to the op's compute dtype.

    Returns (xp, arrays, requires_grad, casts, compute): casts is None, or (compute dtype,
    upcast dtype) when 16-bit floats are computed in float32 and must be rounded back;
    compute is the compute dtype (None for ops without a dtype policy).
    """
    arrays = []
    signature = []                      # see NOTE [Operand signatures] in _promotion.py
    requires_grad = False
    array_type = None
    for x in flat:
        t = type(x)
        if t is Tensor:
            a = x._data
        elif t in _SCALARS:
            if not op.scalars:
                _reject_operand(op, flat, x)
            if t is int and not -0x8000000000000000 <= x < 0x8000000000000000:
                if not 0 <= x < 0x10000000000000000:
                    raise huge_int_error(x)     # PyTorch's parser: a Scalar holds (u)int64
                t = UINT64_NUMBER               # (a uint64 Scalar: promotes a bool tensor)
            arrays.append(x)
            signature.append(t)
            continue
        elif x is None:
            if len(arrays) not in op.optional_inputs or op.seq_inputs:
                _reject_operand(op, flat, x)
            arrays.append(None)
            continue
        elif isinstance(x, Tensor):
            if not _plain_subclass(t):
                raise _Override
            # a view op of a conjugate view runs on its memory (NOTE [Conjugate views])
            a = x._data if t is not ConjView or op.view is not True or x is not flat[0] \
                else memory(x)
        else:
            x = _as_scalar(op, flat, x)
            arrays.append(x)
            signature.append(type(x))
            continue
        if x._requires_grad or x._grad_fn is not None:
            requires_grad = True
        elif x._view is not None:       # a view whose base gained history since it was made
            base = x._view[0]           # (its cheap test first, inlined: the hot path)
            if (base._requires_grad or base._grad_fn is not None) and _view_tracks(x):
                requires_grad = True
        if type(a) is not array_type:
            if array_type is None:
                array_type = type(a)
            else:
                a, array_type = _join_devices(flat, arrays, a, array_type)
        arrays.append(a)
        signature.append(a.dtype if a.ndim else (a.dtype,))
    if array_type is None:
        if op.name in NUMBERS_AS_TENSORS and type(arrays[0]) in _SCALARS:   # (NumPy's, parsed)
            return _prepare(op, [_wrapped_number(arrays[0]), *flat[1:]])
        raise TypeError(f"{op.name}(): expected at least one Tensor argument")
    if array_type is MetaArray:
        raise MetaCall
    if op.promote is None:
        if op.unsigned_kernel is not None and \
                getattr(arrays[0], "dtype", None) in WIDE_UNSIGNED_NP:  # (ops/_barebones.py)
            refuse_operands(op, XP_BY_ARRAY_TYPE[array_type], arrays)
        return XP_BY_ARRAY_TYPE[array_type], arrays, requires_grad, None, None
    signature = tuple(signature)
    hit = op.dtype_cache.get(signature)
    if hit is None:
        try:
            hit = op.dtype_cache[signature] = compute_dtype(op.promote, signature, op.name,
                                                            op.upcast)
        except (NotImplementedError, D.PromotionError) as refused:
            raise _refused(op, refused, array_type, arrays) from None
    compute, casts, target = hit
    if casts is not None and casts[2] and array_type in ROUNDS_SCALAR_OPERANDS:
        _round_scalars(op, arrays, array_type, compute)
    if target is not None:
        for i, a in enumerate(arrays):
            ta = type(a)
            if ta is array_type:
                if a.dtype is not target and i not in op.uncast:
                    arrays[i] = a.astype(target) if not op.casts_keep_layout else \
                        _cast_keeping_layout(a, target)
                    if op.laid_operands > (casts is not None) and not row_major(a):
                        # PyTorch's preserve_format copy, by which it lays out the result
                        # (not of a 16-bit one-operand op's operand: call lays out by it)
                        arrays[i] = laid_like(XP_BY_ARRAY_TYPE[array_type], a, a, target)
            elif ta is int and target in _WRAP_INT:
                arrays[i] = _narrow_int(op, i, a, target)
                if array_type is not _NDARRAY:
                    arrays[i] = device_scalar(XP_BY_ARRAY_TYPE[array_type], arrays[i])
    return XP_BY_ARRAY_TYPE[array_type], arrays, requires_grad, casts, compute


def _refused(op, refused, array_type, arrays):
    """The error to raise for a refusal of an op's dtypes by its policy: PyTorch's
    TensorIterator checks that an elementwise op's operands broadcast first; a refusal of
    uint16/32/64 (ops/_barebones.py) comes after the forward's argument errors too."""
    if op.pointwise and type(refused) is not RefusedFirst:
        check_broadcast(*arrays)
    if type(refused) is Refused:
        return refused.at(XP_BY_ARRAY_TYPE[array_type], arrays)
    return refused


def _cast_keeping_layout(a, dtype):
    """``a`` cast to ``dtype``; non-contiguous if ``a`` is (a strided view of a new buffer).
    Silently, as PyTorch casts (an int64 beyond float16's range becomes inf)."""
    token = quiet_fp()
    try:
        if a.flags.c_contiguous or not a.ndim:
            return a.astype(dtype)
        xp = XP_BY_ARRAY_TYPE[type(a)]
        buffer = xp.empty(a.shape[:-1] + (2 * a.shape[-1],), dtype)
        out = buffer[..., ::2]
        out[...] = a
        return out
    finally:
        loud_fp(token)


# NOTE [Scalars beside 16-bit floats]
# A float16 or bfloat16 op computes in float32 and rounds its result back (casts), as
# PyTorch's CPU kernels do. Its number operands, and 0-dim tensors of another dtype, are
# first rounded to the 16-bit dtype there, as TensorIterator casts every operand to the
# common dtype: ``half(-65504) + 70000.`` is inf (70000 is inf in float16), and
# ``bfloat16(256) < 257`` is False (257 is 256 in bfloat16). mul and div read their second
# operand in float32 instead (``Op.keep_scalars_unrounded``), and PyTorch's CUDA kernels read
# every CPU scalar in float32: which array types round is the backend's to say.
def _round_scalars(op, arrays, array_type, compute):
    """Round the number and foreign 0-dim operands of a 16-bit float op to its dtype."""
    keep = op.unrounded
    for i, a in enumerate(arrays):
        ta = type(a)
        if ta is float or ta is int:
            if (i, "number") not in keep:
                rounded = ROUNDED.get((a, compute))
                if rounded is None:
                    rounded = rounded_number(a, compute)
                if rounded != a:
                    arrays[i] = rounded
        elif ta is array_type and a.ndim == 0 and a.dtype is not compute \
                and (i, "zero_dim") not in keep:
            with np.errstate(over="ignore"):
                arrays[i] = a.astype(compute)


def params_in_dtype(op, params, dtype):
    """``params`` with the op's dtype parameters (``Op.params_in_dtype``) that are numbers
    rounded to the 16-bit float ``dtype``, after checking that they fit it."""
    changed = None
    for i in op.dtype_params:
        value = params[i]
        if value == 1 and type(value) is int:
            continue                    # (add's and sub's alpha, mostly)
        if type(value) is float or type(value) is int:
            rounded = _FITTED.get((value, dtype))
            if rounded is None:
                checked_scalar(np, value, dtype)        # PyTorch's error when it does not fit
                if len(_FITTED) > 4096:
                    _FITTED.clear()
                rounded = _FITTED[value, dtype] = rounded_number(value, dtype)
            if rounded != value:
                changed = changed or list(params)
                changed[i] = rounded
    return params if changed is None else tuple(changed)


_FITTED = {}        # (number parameter, 16-bit dtype) -> the number rounded, known to fit


def uint64_numbers_wrapped(op, flat, arrays):
    """``flat`` with its numbers in ``[2**63, 2**64)`` wrapped into int64 when an operand is
    int64 (PyTorch's Scalar holds them as uint64: ``x * 0x9E3779B97F4A7C15`` wraps around, as
    hashing code relies on), or None when there is none to wrap. Bounds, fill values and
    exponents must fit instead (``clamp``, ``where``, ``pow``): PyTorch's error."""
    if not any(getattr(a, "dtype", None) == np.int64 for a in arrays):
        return None
    big = [type(x) is int and 2 ** 63 <= x < 2 ** 64 for x in flat]
    if not any(big):
        return None
    if op.checked_scalars is True or op.name == "pow":
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    return tuple(x - 2 ** 64 if b else x for x, b in zip(flat, big))


def _narrow_int(op, position, value, dtype):
    """A Python int as a 0-d array of a narrow integer dtype: wrapped like a C cast, or
    range-checked as PyTorch does for bounds and fill values (``checked_scalars``)."""
    check = op.checked_scalars
    if check is True:
        from ember.ops._scalars import checked_scalar
        return checked_scalar(np, value, dtype)
    if check:
        return check(position, value, dtype)
    return np.array(value).astype(dtype)


# PyTorch's parser takes a number for the input of these (and their aliases) alone:
# ``torch.div(12, 5, rounding_mode="trunc")`` is ``tensor(2)``; ``torch.maximum(1, 2)`` raises
NUMBERS_AS_TENSORS = frozenset({"add", "sub", "mul", "div", "floor_divide"})


def _wrapped_number(x):
    """The 0-dim CPU tensor PyTorch makes of a number given as an op's input: int64, the
    default float or complex dtype, or bool; the other operand, a number, stays weak."""
    from ember._creation import tensor
    return tensor(x, device="cpu")


def _as_scalar(op, flat, x):
    if isinstance(x, (np.bool_, np.integer, np.floating, np.complexfloating)) and op.scalars:
        # PyTorch's parser reads a NumPy bool as a float (``int_tensor * np.bool_(1)`` is float),
        # and np.complex64 (no Python complex) through __float__: its real part, NumPy warning
        if type(x) is np.bool_ or isinstance(x, np.complexfloating) and not isinstance(x, complex):
            return float(x)
        return x.item()
    if hasattr(type(x), "__torch_function__"):
        from ember.overrides._protocol import is_foreign_tensor
        if not is_foreign_tensor(type(x)):
            raise _Override
    _reject_operand(op, flat, x)


def _reject_operand(op, flat, x):
    pos = next(i for i, y in enumerate(flat) if y is x)
    name = op.input_names[min(pos, len(op.input_names) - 1)]
    params = [a.arg for a in op._args.args]     # (index_put's values come after its indices)
    pos = params.index(name) if name in params else pos
    from ember._creation import _tp_name
    # PyTorch's parser names the kernel: gelu, linalg_inv, fft_fft
    kernel = op.short_name if op.namespace == "nn.functional" else op.name.replace(".", "_")
    from ember.ops._dims import _argument        # the call's form words the position
    raise TypeError(f"{_argument((kernel, name, pos))} must be Tensor, "
                    f"not {_foreign_name(type(x)) or _tp_name(x)}")


def _foreign_name(cls):
    """``torch.Tensor`` for PyTorch's tensors, which ember's own name of a type would call
    just ``Tensor``; None for any other type."""
    from ember.overrides._protocol import is_foreign_tensor
    return f"{cls.__module__}.{cls.__qualname__}" if is_foreign_tensor(cls) else None


def _join_devices(flat, arrays, a, array_type):
    """PyTorch lets CPU 0-dim tensors join an op on a GPU, as scalars: returns the operand
    and the op's array type, moving such operands over (as kernel-filled scalars: an upload
    would wait for the GPU); any other mix of devices raises."""
    if type(a) is _NDARRAY and a.ndim == 0:
        return device_scalar(XP_BY_ARRAY_TYPE[array_type], a), array_type
    if array_type is _NDARRAY and all(x.ndim == 0 for x in arrays if type(x) is _NDARRAY):
        xp = XP_BY_ARRAY_TYPE[type(a)]
        for i, x in enumerate(arrays):
            if type(x) is _NDARRAY:
                arrays[i] = device_scalar(xp, x)
        return a, type(a)
    device_mismatch(flat)


def _other_gpu(flat):
    """The GPU of a call's tensors when it is not the current one (the call then reruns
    there), else None; tensors on two GPUs raise PyTorch's error."""
    return operands_gpu_elsewhere([x._data for x in flat if isinstance(x, Tensor)],
                                  lambda: device_mismatch(flat))


def device_mismatch(flat):
    """Raise PyTorch's error for the tensors among ``flat`` lying on two devices."""
    devices = []
    for x in flat:
        if isinstance(x, Tensor) and str(x.device) not in devices:
            devices.append(str(x.device))
    if "meta" in devices:
        from ember.ops._meta import check_devices
        check_devices(flat)             # PyTorch words a meta mismatch its own way
    devices.sort(key=lambda d: d == "cpu")      # PyTorch names the GPU first: "cuda:0 and cpu"
    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                       f"two devices, {devices[0]} and {devices[1]}!")
