"""Scaled dot-product attention (``F.scaled_dot_product_attention``) as one fused op.

NOTE [SDPA outputs]: the forward returns ``(output, weights)``, plus the boolean keep mask
when dropout is on, where ``weights`` is the softmax of the masked, scaled scores. They are
outputs so the derivative receives them (``out=``) instead of recomputing them, and so double
backward differentiates through them like any output; the public function returns only the
output (``namedtuple=_output_only``). The weights are the one (..., L, S) matrix the op
materializes: the scores are masked, exponentiated and normalized in place.

A flash-attention forward (the CUDA kernel in backend/cuda_kernels) never forms the weights:
its second output is each query row's log-sum-exp of the scaled scores, shape (..., L), one
dim fewer than the weights. The derivative tells the two apart by that rank and recomputes
the weights as ``exp(scores - lse)``; a gradient reaching the log-sum-exp (double backward)
adds ``grad_lse * weights`` to the scores' gradient. With dropout, its third output is not
the keep mask but the (seed, offset) of the Philox numbers the kernel drew it from, a host
pair: the mask is drawn again from them.
"""

import functools
import math
import threading
import warnings

import numpy as np

from ember import _dtype as D
from ember._random import _philox_uniform, _uniform_like
from ember._tensor import Tensor, _make
from ember._warn import outside_level
from ember.autograd._forward_traces import requires_grad_here
from ember.amp._state import STATE as _AMP
from ember.amp._state import suspended
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import no_grad
from ember.autograd.graph import InputMeta, carries_gradient
from ember.backend import xp_of
from ember.backend.blas_threads import follow_load
from ember.backends.cuda import flash_sdp_enabled, generic_sdp_allowed, math_sdp_enabled
from ember.ops._registry import broadcast_message, op
from ember.ops.log_space import row_max
from ember.ops.random_nodes import NOT_IMPLEMENTED, sampled
from ember.ops.underivable import on_values

__all__ = ["scaled_dot_product_attention"]

FUNCTIONAL = {}

_HALF = D.LOW_PRECISION_NP
_HALF_DTYPES = frozenset({D.bfloat16, D.float16})
_F32 = np.dtype(np.float32)
_NO_KERNEL = ("No viable backend for scaled_dot_product_attention was found. This is likely "
              "due to turning off both the math kernel and the fused kernels.")
_NO_FLASH = "No available kernel.  Aborting execution."
_FLASH_FORWARD = "_scaled_dot_product_flash_attention_for_cpu"
_FLASH_BACKWARD = _FLASH_FORWARD + "_backward"
_CAUSAL_WITH_MASK = ("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                     "is_causal=True")
_C_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char",
            "int16": "short int", "int32": "int", "int64": "long int", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double",
            "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def _output_only(output, *saved):
    """The public result of the op: its first output (see NOTE [SDPA outputs])."""
    return output


def _c_name(dtype):
    return _C_NAMES.get(dtype.name, dtype.name)


def _check(q, k, v, mask, dropout_p, is_causal, grouped, causal_with_mask=False):
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {q.ndim} key.dim: {k.ndim} and value.dim: "
                           f"{v.ndim} instead.")
    if not q.dtype == k.dtype == v.dtype:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {_c_name(q.dtype)} key.dtype: {_c_name(k.dtype)} "
                           f"and value.dtype: {_c_name(v.dtype)} instead.")
    kind = D.FROM_NUMPY[q.dtype]
    if kind.is_complex:
        raise NotImplementedError(f"\"softmax_lastdim_kernel_impl\" not implemented for "
                                  f"'{kind._torch_name}'")
    if not kind.is_floating_point:
        raise RuntimeError(f"expected scalar type Float but found {kind._torch_name}")
    if mask is not None and mask.dtype not in (np.bool_, _F32, q.dtype):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {_c_name(mask.dtype)} and  "
                           f"query.dtype: {_c_name(q.dtype)} instead.")
    if mask is not None and is_causal and not causal_with_mask:
        raise RuntimeError(_CAUSAL_WITH_MASK)
    if dropout_p > 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p:g}")
    lead = -3 if grouped else -2                   # grouped heads need not broadcast
    batch = [q.shape[:lead], k.shape[:lead], v.shape[:lead]]
    if not batch[0] == batch[1] == batch[2]:    # (equal shapes broadcast: skip NumPy's check)
        try:
            np.broadcast_shapes(*batch)
        except ValueError:
            raise RuntimeError(broadcast_message(batch)) from None
    if k.shape[-1] != q.shape[-1]:
        n = math.prod(q.shape[:-2])
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{n}, {q.shape[-1]}] but got: [{n}, {k.shape[-1]}].")
    if v.shape[-2] != k.shape[-2]:
        n = math.prod(q.shape[:-2])
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{n}, {k.shape[-2]}] but got: [{n}, {v.shape[-2]}].")


def _groups(q, k, v, enable_gqa):
    """How many query heads share one key head and one value head (grouped-query attention)."""
    if not enable_gqa:
        return 1, 1
    for t in (q, k, v):
        if t.ndim < 3:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{t.ndim}, {t.ndim - 1}], but got -3)")
    hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
    if hq % hk or hq % hv:
        raise RuntimeError("Number of heads in key and value must divide the number of heads "
                           "in ")
    return hq // hk, hq // hv


def _grouped(a, b, g):
    """``a @ b`` where ``a`` has ``g`` times the heads (dim -3) of ``b``, each head of ``b``
    serving ``g`` consecutive heads of ``a``. Works on arrays and Tensors alike."""
    if g == 1:
        return a @ b
    sa, sb = tuple(a.shape), tuple(b.shape)
    r = a.reshape(sa[:-3] + (sa[-3] // g, g) + sa[-2:]) @ b.reshape(sb[:-2] + (1,) + sb[-2:])
    return r.reshape(tuple(r.shape[:-4]) + (-1,) + tuple(r.shape[-2:]))


def _group_sum(x, g):
    """Sum the ``g`` query heads of each group: the gradient of a shared key/value head."""
    if g == 1:
        return x
    s = tuple(x.shape)
    return x.reshape(s[:-3] + (s[-3] // g, g) + s[-2:]).sum(-3)


@functools.lru_cache(maxsize=16)
def _causal_bias(xp, L, S, dtype):
    """-inf above the diagonal (a query attends to keys up to its own position), else 0."""
    return xp.where(xp.triu(xp.ones((L, S), dtype=bool), 1), -xp.inf, 0).astype(dtype)


def _ones_column(xp, n, dtype):
    """An (n, 1) column of ones; on the CPU made once (shared: never written)."""
    return _cpu_ones_column(n, dtype) if xp is np else xp.ones((n, 1), dtype=dtype)


@functools.lru_cache(maxsize=16)
def _cpu_ones_column(n, dtype):
    return np.ones((n, 1), dtype=dtype)


def _scale(e, scale):
    if scale is not None:
        return scale
    return 1.0 / math.sqrt(e) if e else 1.0


@op("scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, "
    "is_causal=False, *, scale=None, enable_gqa=False)", inputs=4, namespace="nn.functional",
    out=False, namedtuple=_output_only, grad_fn_name="ScaledDotProductAttentionBackward0",
    differentiable_outputs=(0,))
def scaled_dot_product_attention(xp, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa, *,
                                 keep=None):
    """Attention softmax(Q K^T * scale + mask) V, with optional causal mask and dropout."""
    empty = 0 in q.shape[:-1] or 0 in v.shape
    arrays = q, k, v, mask
    if not generic_sdp_allowed(on_cpu=xp is np) and not (empty and xp is np):
        raise RuntimeError(_NO_KERNEL if xp is np else "No available kernel. Aborting "
                           "execution.")
    gk, gv = _groups(q, k, v, enable_gqa)
    # the kernel choice shows in the forward only with a mask (checked, and taken with
    # is_causal by the flash kernel alone), 16-bit inputs or the math kernel off
    flash = xp is np and (mask is not None or q.dtype in _HALF or not math_sdp_enabled()) \
        and flash_sdp_enabled() and _flash_layout(q, k, v, mask, dropout_p, enable_gqa)
    # PyTorch's CPU flash kernel applies attn_mask and the causal mask together; its math
    # kernel refuses the pair (empty inputs reach neither, nor the kernel choice on the CPU)
    if xp is np and not flash and not empty and not math_sdp_enabled():
        _refuse_flash(q, k, v, dropout_p)
    _check(q, k, v, mask, dropout_p, is_causal, gk != 1 or gv != 1,
           causal_with_mask=flash or empty)
    dtype = q.dtype
    # PyTorch's CPU flash kernel multiplies V by exp(s - max) rounded to a 16-bit input's dtype
    rounded = dtype in _HALF and flash
    if dtype in _HALF:
        q, k, v = q.astype(_F32), k.astype(_F32), v.astype(_F32)
    if mask is not None and mask.dtype != np.bool_ and mask.dtype != q.dtype:
        mask = mask.astype(q.dtype)
    L, S = q.shape[-2], k.shape[-2]
    p = _grouped(q * _scale(q.shape[-1], scale), k.swapaxes(-1, -2), gk)
    if is_causal:
        p += _causal_bias(xp, L, S, p.dtype)
    if mask is not None:
        shape = p.shape
        try:
            full = xp.broadcast_shapes(shape, mask.shape)
        except ValueError:
            raise RuntimeError(broadcast_message([shape, mask.shape])) from None
        if full != shape:
            raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast "
                               f"shape {list(full)}")
        if mask.dtype == np.bool_:
            xp.copyto(p, -xp.inf, where=~mask)
        else:
            p += mask
    if S:
        top = row_max(xp, p, -1)
        # rows masked throughout stay -inf: a -inf max is lifted to a finite one (the
        # others are finite or NaN already); one call where a where() takes two
        p -= xp.maximum(top, xp.finfo(p.dtype).min, out=top)
        xp.exp(p, out=p)
        total = p @ _ones_column(xp, S, p.dtype)    # a row sum, faster through BLAS
        # a row's sum holds its max's exp(0) = 1 unless the row is all -inf (sum 0): so
        # the 0 -> 1 below is a maximum, one call
        total = xp.maximum(total, 1, out=total)
        if rounded:                                 # the sum stays in float32
            result = _grouped(p.astype(dtype).astype(_F32), v, gv) / total
        p /= total                                  # ... and give zero weights, as PyTorch
    weights = p
    if dropout_p > 0:
        kept_mask = _uniform_like(None, p.shape, p) >= dropout_p
        p = p * kept_mask * (1.0 / (1.0 - dropout_p) if dropout_p < 1 else 0.0)
    if not (rounded and S):
        result = _grouped(p, v, gv)
    if result.dtype != dtype:
        result = result.astype(dtype)
    if keep is not None and xp is np and not empty:    # the node's CPU kernel (_math_kernel)
        keep.append("flash" if flash_sdp_enabled() and _flash_layout(*arrays, dropout_p,
                                                                      enable_gqa) else "math")
    return (result, weights) if dropout_p <= 0 else (result, weights, kept_mask)


def _refuse_flash(q, k, v, dropout_p):
    """PyTorch's warnings and error when only its CPU flash kernel is allowed and cannot take
    the call (the reasons it gives for the cases it words: rank and dropout)."""
    warnings.warn("Flash attention kernel not used because:", stacklevel=outside_level())
    ranks = _LOGICAL.ranks or (q.ndim, k.ndim, v.ndim)     # (under vmap: the logical ones)
    if ranks != (4, 4, 4):
        warnings.warn(f"All fused kernels requires query, key and value to be 4 dimensional, "
                      f"but got Query dim: {ranks[0]}, Key dim: {ranks[1]}, Value dim: "
                      f"{ranks[2]} instead.", stacklevel=outside_level())
    elif dropout_p:
        warnings.warn("Both fused kernels do not support non-zero dropout.",
                      stacklevel=outside_level())
    raise RuntimeError(_NO_FLASH)


@scaled_dot_product_attention.named_by
def _(flat, params, out, *, kept=None):     # the CPU kernel PyTorch picks (see _cpu_flash)
    q, k, v, mask = flat
    if q.device.type != "cpu":
        return "ScaledDotProductAttentionBackward0"
    if 0 in q._data.shape[:-1] or 0 in v._data.shape:     # nothing to attend: zeros + ...
        return "AddBackward0"
    if not _math_kernel(flat, params, kept=kept):
        return "ScaledDotProductFlashAttentionForCpuBackward0"
    _grad_mask_refusals(flat, params)
    # the math kernel computes 16-bit inputs in float32 and casts its result back
    return "ToCopyBackward0" if q.dtype in _HALF_DTYPES else "UnsafeViewBackward0"


@scaled_dot_product_attention.check_unrecorded
def _grad_mask_refusals(flat, params):
    """A CPU mask that requires grad keeps PyTorch's flash kernel out, which the forward (on
    arrays) could not see: the math kernel's refusals, raised while recording, or without a
    graph (PyTorch's choice reads ``requires_grad``, whatever the grad mode)."""
    q, k, v, mask = flat
    if mask is None or not mask.requires_grad or q.device.type != "cpu" or \
            0 in q._data.shape[:-1] or 0 in v._data.shape:
        return
    if not math_sdp_enabled():
        warnings.warn("Flash attention kernel not used because:", stacklevel=outside_level())
        raise RuntimeError(_NO_FLASH)
    if params[1]:
        raise RuntimeError(_CAUSAL_WITH_MASK)


def _no_mask_gradient(flat):
    """Whether the call's ``attn_mask`` is absent, boolean or a float one that needs no
    gradient: no edge for it, as PyTorch's kernels take it as non-differentiable (its CPU
    flash kernel, which takes such a mask, has edges for q, k and v alone)."""
    mask = flat[3]
    # (reads ``requires_grad``, which a leaf may change before backward: the mask is the last
    # input, so that only adds or drops a trailing gradient, which the engine reads by edge)
    # (and reads the recorded truth: a forward-mode transform's input reports no
    # requires_grad, yet carries a tangent, NOTE [Forward-mode primals])
    return mask is None or not mask.is_floating_point() or \
        isinstance(mask, Tensor) and not (mask._requires_grad or mask._grad_fn is not None)


scaled_dot_product_attention.nondifferentiable_when(_no_mask_gradient, "attn_mask")


def _cpu_flash(q, k, v, dropout_p, enable_gqa, mask=None, mask_grad=None):
    """Whether PyTorch's CPU flash kernel takes the call: 4-D inputs without dropout, equal
    batch sizes and head sizes, heads equal (or grouped), an attn_mask that needs no gradient
    (``mask_grad``: whether it counts as needing one; by default its ``requires_grad``)
    and is 2-D or 4-D over (batch, heads, queries, keys) or 1s there, unit last strides.
    Under vmap, the logical tensors' layout decides (see ``logical_layout``)."""
    if mask_grad is None:
        mask_grad = mask is not None and mask.requires_grad
    if mask_grad or not flash_sdp_enabled():
        return False
    return _flash_layout(q._data, k._data, v._data, None if mask is None else mask._data,
                         dropout_p, enable_gqa)


def _flash_layout(q, k, v, mask, dropout_p, enable_gqa):
    """``_cpu_flash`` on backend arrays, the mask's ``requires_grad`` and the switch aside:
    under vmap the logical tensors' layout (see ``logical_layout``), else ``_flash_arrays``."""
    if _LOGICAL.layout is not None:
        return _LOGICAL.layout
    return _flash_arrays(q, k, v, dropout_p, enable_gqa, mask)


class _Logical(threading.local):
    layout = None       # in vmap's rule: whether the logical call suits the flash kernel
    ranks = None        # ... and the logical query's, key's and value's ranks


_LOGICAL = _Logical()


class logical_layout:
    """Context manager for vmap's rule, which calls the op on physical tensors (a batch dim
    more): PyTorch picks its kernel by the logical tensors ``q, k, v, mask`` (``flags``:
    those batched, at dim 0), so 4-D ones take the flash kernel (and its refusals of forward
    AD and double backward) where 3-D ones do not. An enclosing rule's choice stands."""

    def __init__(self, tensors, flags, dropout_p, enable_gqa):
        self.tensors, self.flags = tensors, flags
        self.dropout_p, self.enable_gqa = dropout_p, enable_gqa

    def __enter__(self):
        self.outer = _LOGICAL.layout, _LOGICAL.ranks
        if self.outer[0] is None:
            _LOGICAL.layout = self._layout()
            _LOGICAL.ranks = tuple(t.ndim - f for t, f in zip(self.tensors[:3], self.flags))

    def __exit__(self, *exc):
        _LOGICAL.layout, _LOGICAL.ranks = self.outer

    def _layout(self):
        shapes = [None if t is None else tuple(t.shape)[1:] if f else tuple(t.shape)
                  for t, f in zip(self.tensors, self.flags)]
        if not _flash_shapes(*shapes, self.dropout_p, self.enable_gqa):
            return False
        return all(s[-1] == 1 or t.stride(-1) == 1 for s, t in zip(shapes, self.tensors[:3]))


def _flash_arrays(q, k, v, dropout_p, enable_gqa, mask=None):
    """``_cpu_flash`` on the backend arrays (PyTorch's check of the mask's last two sizes
    raises IndexError for a mask of fewer dims)."""
    if not _flash_shapes(q.shape, k.shape, v.shape, None if mask is None else mask.shape,
                         dropout_p, enable_gqa):
        return False
    for t in (q, k, v):                 # (a loop: a generator costs a microsecond here)
        if t.strides[-1] != t.itemsize and t.shape[-1] != 1:
            return False
    return True


def _flash_shapes(qs, ks, vs, ms, dropout_p, enable_gqa):
    """``_flash_arrays`` but for the strides, on the shapes (``ms``: the mask's, or None)."""
    if dropout_p or not len(qs) == len(ks) == len(vs) == 4:
        return False
    if not qs[0] == ks[0] == vs[0] or not qs[-1] == ks[-1] == vs[-1]:
        return False
    if ks[1] != vs[1] or (qs[1] != ks[1] and not enable_gqa):
        return False
    if ms is not None:
        if len(ms) < 2:
            raise IndexError("Dimension specified as -2 but tensor has no dimensions" if not ms
                             else "Dimension out of range (expected to be in range of "
                                  "[-1, 0], but got -2)")
        if ms[-2] not in (qs[2], 1) or ms[-1] not in (ks[2], 1):
            return False
        if len(ms) != 2 and not (len(ms) == 4 and ms[0] in (1, qs[0]) and ms[1] in (1, qs[1])):
            return False
    return True


def _math_kernel(flat, params, *, kept=None):
    """Whether a recorded call runs PyTorch's CPU math kernel: composed ops, whose nodes keep
    Q and K scaled (copies), V (for the gradients of all but V), the weights, and neither the
    mask nor the result. The flash kernel's node keeps them all (as the CUDA kernels').
    ``kept``: what the forward kept (NOTE [Kept values]), the CPU kernel its arrays take,
    "flash" (unless the mask requires grad) or "math"; a call recorded without (off the CPU,
    nothing to attend, a kernel override's forward) is decided here."""
    q, k, v, mask = flat
    if kept is not None:
        return kept[0] == "math" or mask is not None and mask.requires_grad
    return q.device.type == "cpu" and not (0 in q._data.shape[:-1] or 0 in v._data.shape) \
        and not _cpu_flash(q, k, v, params[0], params[3], mask)


def _math_outputs(flat, params, *, kept=None):
    """The outputs the node keeps."""
    return _MATH_OUTPUTS if _math_kernel(flat, params, kept=kept) else None


_MATH_READERS = ((1,), (0,), (0, 1, 3), (0, 1, 2, 3))   # q for k's gradient, k for q's, ...
_ALL_READ = ((0, 1, 2, 3),) * 4
_MATH_OUTPUTS = frozenset((1, 2))               # the weights (and dropout's mask)
scaled_dot_product_attention.reads_inputs(
    lambda flat, params, *, kept=None: _MATH_READERS if _math_kernel(flat, params, kept=kept)
    else _ALL_READ)
scaled_dot_product_attention.copies_inputs(0, 1, when=_math_kernel)
# (the mask is kept unversioned: whether it needs a gradient decides its edge at backward)
scaled_dot_product_attention.aliases_inputs(3, when=_math_kernel)
# (grouped heads: the math kernel's matmul keeps V repeated per query head, a copy)
scaled_dot_product_attention.copies_inputs(2, when=lambda flat, params, *, kept=None: params[3]
    and (flat[0].shape[-3] != flat[2].shape[-3]) and _math_kernel(flat, params, kept=kept))


@scaled_dot_product_attention.derivative(outputs=_math_outputs)
def _(grads, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa, *, out, needs=None):
    args = grads, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa, out
    if q.device.type == "cpu" and not _ran_cpu_flash(out):
        # PyTorch's CPU math kernel: ops autocast casts in a backward; only the gradients
        # needed (its node keeps only what those read)
        return _sdpa_grad(*args, needs=needs)
    if q.device.type == "cpu":
        _warn_looped_backward(grads[0])
    # PyTorch's fused kernels (CPU flash; flash, efficient, cuDNN on CUDA) have backward
    # kernels autocast does not list: a backward inside autocast computes them as outside
    with suspended():
        if q.device.type == "cpu" and _GRAD.grad_enabled:
            return _flash_cpu_grads_underivable(args)
        return _sdpa_grad(*args)


def _warn_looped_backward(grad):
    """PyTorch's vmap fallback warnings for its CPU flash backward kernel called with a
    gradient batched by vmaps (jacrev's) the forward was not under: innermost level first,
    each once per example of the levels inside it. (A vmap the forward ran under warns from
    its rule: func/_batching/nn.py.)"""
    from ember.func._batched import BatchedTensor, level_size
    if type(grad) is not BatchedTensor:
        return
    from ember.func._batching import repeating, warn_fallback
    sizes = []
    while type(grad) is BatchedTensor:
        sizes.append((grad._level, level_size(grad._level)))
        grad = grad._value
    calls = 1
    for _, n in sorted(sizes, reverse=True):
        with repeating(calls):
            warn_fallback("aten::" + _FLASH_BACKWARD)
        calls *= n


@scaled_dot_product_attention.refuse_forward_ad
def _(flat, params):
    # PyTorch's CPU flash kernel has no forward derivative (its math kernel's ops have)
    q, k, v, mask = flat
    if q.device.type != "cpu" or 0 in q._data.shape[:-1] or 0 in v._data.shape:
        return None
    # a mask that requires grad keeps the flash kernel out, as PyTorch's choice sees it
    # inside transforms (see requires_grad_here)
    mask_grad = mask is not None and requires_grad_here(mask)
    return _FLASH_FORWARD if _cpu_flash(q, k, v, params[0], params[3], mask, mask_grad) \
        else None


def _flash_cpu_grads_underivable(args):
    """The CPU flash kernel's gradients under ``create_graph``: PyTorch has no derivative for
    its backward kernel, so they hang from a node that refuses double backward."""
    grads, q, k, v = args[:4]
    with no_grad():
        computed = _sdpa_grad(*args)
    params = [t for t in (grads[0], q, k, v, args[-1][0]) if isinstance(t, Tensor)]
    return tuple(None if g is None else on_values(
        lambda ts, x: sampled(ts, x, NOT_IMPLEMENTED, _FLASH_BACKWARD), params, g)
        for g in computed)


def _ran_cpu_flash(out):
    """Whether the forward whose (remade) outputs are ``out`` ran as PyTorch's CPU flash
    kernel: the kernel chosen then (under the switches of that moment) named their node."""
    return type(out[1]._grad_fn).__name__ == "ScaledDotProductFlashAttentionForCpuBackward0"


def _sdpa_grad(grads, q, k, v, mask, dropout_p, is_causal, scale, enable_gqa, out, *,
               needs=None):
    """The gradients of q, k, v and a float mask; ``needs``: which (None: all); an input no
    needed gradient reads may be its metadata alone (``InputMeta``)."""
    grad, grad_weights = grads[0], grads[1]
    low = grad.dtype
    weights = out[1]
    gk, gv = _groups(q, k, v, enable_gqa)
    scale = _scale(q.shape[-1], scale)
    if needs is None:
        needs = (True, True, True, mask is not None and mask.is_floating_point())
    if _first_order_only(grad, grad_weights, q, k, v, out):
        return _sdpa_grad_arrays(grad, q, k, v, mask, dropout_p, scale, gk, gv, out, needs)
    # sum_j dp_ij w_ij below is grad_i . output_i, the smaller product, where PyTorch's
    # kernel reads the output: all but its CPU math kernel, whose softmax backward forms the
    # sum (and whose node keeps no output)
    half = grad.dtype != weights.dtype
    from_output = q.device.type != "cpu" or _ran_cpu_flash(out)
    if half:                            # half inputs: float32 weights, and so the backward
        grad, q, k, v = (t.to(weights.dtype) if isinstance(t, Tensor) else t
                         for t in (grad, q, k, v))
    grad_lse = None
    flash = weights.ndim < q.ndim       # a flash forward's log-sum-exp (NOTE [SDPA outputs])
    if flash:
        grad_lse, grad_weights = grad_weights, None
        weights = _weights_from_lse(q, k, weights, is_causal, mask, scale, gk)
    p = weights
    if dropout_p > 0:
        keep = _flash_keep(out[2], weights, dropout_p) if flash else out[2]
        drop = keep.to(weights.dtype) * (1.0 / (1.0 - dropout_p) if dropout_p < 1 else 0.0)
        p = p * drop
    grad_v = _group_sum(p.mT @ grad, gv) if needs[2] else None
    if not (needs[0] or needs[1] or needs[3]):
        return None, None, grad_v, None
    dp = _grouped(grad, v.mT, gv)
    if dropout_p > 0:
        dp = dp * drop
    # sum_j dp_ij w_ij (see above), plus the double backward term
    rows = (grad * out[0] if from_output else dp * weights).sum(-1, keepdim=True)
    if carries_gradient(grad_weights):                          # only in double backward
        dp = dp + grad_weights
        rows = rows + (grad_weights * weights).sum(-1, keepdim=True)
    # PyTorch's CPU math kernel scales Q and K by sqrt(scale) each: under autocast its
    # backward's products take them so scaled, rounded to the low dtype
    k_scale = q_scale = scale
    sq = sk = None
    if not flash and q.device.type == "cpu":
        sk = math.sqrt(abs(scale))
        sq = -sk if scale < 0 else sk
        q_scale, k_scale = sq, sk
    if (half and from_output and q.device.type == "cpu" and not carries_gradient(grad_weights)
            and min(q.shape[-2], k.shape[-2]) > 0):      # PyTorch's CPU flash kernel
        ds = weights * (dp - rows)
        grad_q, grad_k, grad_v = _cpu_flash_low_grads(p, ds, grad, q, k, gk, scale, low)
    else:
        if _GRAD.grad_enabled or dp.dtype != weights.dtype:
            ds = weights * (dp - rows)
        else:                   # no graph to record: reuse the fresh buffer in place
            ds = dp.sub_(rows).mul_(weights)
        grad_q = grad_k = None
        if needs[0]:
            grad_q = _grouped(ds, k if sk is None else k * sk, gk) * q_scale
        if needs[1]:
            grad_k = _group_sum(ds.mT @ (q if sq is None else q * sq), gk) * k_scale
    if carries_gradient(grad_lse):                        # only in double backward
        extra = weights * grad_lse.unsqueeze(-1)
        grad_q = grad_q + _grouped(extra, k, gk) * scale
        grad_k = grad_k + _group_sum(extra.mT @ q, gk) * scale
    grad_mask = ds if mask is not None and mask.is_floating_point() else None
    return grad_q, grad_k, grad_v, grad_mask


def _first_order_only(grad, grad_weights, q, k, v, out):
    """Whether the backward below may run on the arrays: no graph to record, no autocast to
    cast its products, plain tensors (not vmap's; or unsaved inputs' metadata), full
    float32/64 weights (not a flash forward's log-sum-exp, not a 16-bit input's float32
    ones) and no gradient for them."""
    weights = out[1]
    return (not _GRAD.grad_enabled and not _AMP.enabled and type(grad) is Tensor
            and type(q) in _PLAIN and type(k) in _PLAIN and type(v) in _PLAIN
            and type(weights) is Tensor and grad._data.dtype == weights._data.dtype
            and weights.ndim == q.ndim and not carries_gradient(grad_weights))


_PLAIN = (Tensor, InputMeta)


def _sdpa_grad_arrays(grad, q, k, v, mask, dropout_p, scale, gk, gv, out, needs):
    """``_sdpa_grad``'s first-order case on the backend arrays, the same products in the
    same order: a dozen array calls where the composition dispatches some fifteen ops."""
    on_cpu = q.device.type == "cpu"
    g, w = grad._data, out[1]._data
    q, k, v = (getattr(t, "_data", None) for t in (q, k, v))    # (None: not saved)
    p = w
    if dropout_p > 0:
        drop = out[2]._data.astype(w.dtype) * (1.0 / (1.0 - dropout_p) if dropout_p < 1
                                              else 0.0)
        p = p * drop
    follow_load(xp_of(g))
    grad_v = _make(_group_sum(p.mT @ g, gv)) if needs[2] else None
    if not (needs[0] or needs[1] or needs[3]):
        return None, None, grad_v, None
    dp = _grouped(g, v.mT, gv)
    if dropout_p > 0:
        dp = dp * drop
    # (the CPU math kernel's softmax backward forms sum_j dp_ij w_ij, the others read the
    # output they keep: see _sdpa_grad)
    if not on_cpu or _ran_cpu_flash(out):
        rows = (g * out[0]._data).sum(-1, keepdims=True)
    else:
        rows = (dp * w).sum(-1, keepdims=True)
    # the CPU kernels scale Q and K by sqrt(scale) each (see _sdpa_grad)
    q_scale = k_scale = scale
    if on_cpu:
        k_scale = math.sqrt(abs(scale))
        q_scale = -k_scale if scale < 0 else k_scale
    dp -= rows
    dp *= w
    grad_q = grad_k = None
    if needs[0]:
        grad_q = _grouped(dp, k * k_scale if on_cpu else k, gk)
        grad_q *= q_scale
        grad_q = _make(grad_q)
    if needs[1]:
        grad_k = _group_sum(dp.mT @ (q * q_scale if on_cpu else q), gk)
        grad_k *= k_scale
        grad_k = _make(grad_k)
    grad_mask = _make(dp) if mask is not None and mask.is_floating_point() else None
    return grad_q, grad_k, grad_v, grad_mask


def _cpu_flash_low_grads(p, ds, grad, q, k, groups, scale, low):
    """The gradients of q, k and v as PyTorch's CPU flash kernel forms them for 16-bit inputs
    (float32 ``p``, ``ds``, ``grad``, ``q``, ``k``; ``low`` the inputs' dtype): the weights
    and score gradients rounded to ``low`` before each product, and each gradient summed in
    ``low`` over blocks: q's over blocks of 512 keys, k's and v's over the query heads of a
    group, then blocks of 32, 64 or 256 queries (by the query length)."""
    def rounded(x):
        return x.to(low).to(x.dtype)

    def add(total, part):
        return rounded(part) if total is None else rounded(total + part)

    p, ds = rounded(p), rounded(ds)
    B, H, L, S = ds.shape
    grad_q = None
    for j in range(0, S, 512):
        grad_q = add(grad_q, _grouped(ds[..., j:j + 512], k[..., j:j + 512, :], groups) * scale)
    q_block = 32 if L < 192 else 64 if L < 768 else 256
    heads = (B, H // groups, groups, L)
    ds, p = ds.reshape(heads + (S,)), p.reshape(heads + (S,))
    q, grad = q.reshape(heads + (q.shape[-1],)), grad.reshape(heads + (grad.shape[-1],))
    grad_k = grad_v = None
    for r in range(groups):
        for i in range(0, L, q_block):
            rows = slice(i, i + q_block)
            grad_k = add(grad_k, ds[:, :, r, rows].mT @ q[:, :, r, rows] * scale)
            grad_v = add(grad_v, p[:, :, r, rows].mT @ grad[:, :, r, rows])
    return grad_q, grad_k, grad_v


def _flash_keep(philox, weights, dropout_p):
    """A flash forward's dropout mask, drawn again from the (seed, offset) of its Philox
    numbers (a host pair; NOTE [SDPA outputs])."""
    seed, offset = philox._data.tolist()
    return _make(_philox_uniform(seed, offset, weights.shape, weights._data) >= dropout_p)


def _weights_from_lse(q, k, lse, is_causal, mask, scale, gk):
    """The attention weights recomputed from each row's log-sum-exp and the mask (causal,
    ``attn_mask`` or none); a row that sees no key (log-sum-exp -inf) weighs nothing."""
    scores = _grouped(q * scale, k.mT, gk)
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores + _make(_causal_bias(xp_of(scores._data), L, S, scores._data.dtype))
    elif mask is not None and mask.dtype is D.bool_:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    elif mask is not None:
        scores = scores + mask.to(scores.dtype)
    lse = lse.unsqueeze(-1)
    return (scores - lse).exp().masked_fill(lse == float("-inf"), 0.0)


from ember.ops import multi_head_attention as _mha  # noqa: E402

FUNCTIONAL.update({"multi_head_attention_forward": _mha.multi_head_attention_forward,
                   "_canonical_mask": _mha._canonical_mask,
                   "_none_or_dtype": _mha._none_or_dtype})
