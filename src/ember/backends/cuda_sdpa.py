"""Which attention kernel would take a call of ``F.scaled_dot_product_attention``
(``torch.backends.cuda.SDPAParams`` and ``can_use_*_attention``).

ember has one fused attention kernel, its flash-attention kernel (Triton, on CUDA: the
override in backend/cuda_kernels/forwards.py), and runs every other call on its generic path.
``can_use_flash_attention`` asks that kernel's conditions of the inputs; ember has no
memory-efficient or cuDNN kernel, so those answers are False. Without CUDA (no CuPy or no
GPU) every answer is False and ``debug`` says nothing, as with PyTorch's CPU build.
"""

import numbers
import sys
import warnings

import numpy as np

__all__ = ["SDPAParams", "can_use_flash_attention", "can_use_efficient_attention",
           "can_use_cudnn_attention", "is_ck_sdpa_available"]

_FLASH_OP = "nn.functional.scaled_dot_product_attention"
_FIELDS = ("query", "key", "value", "attn_mask", "dropout", "is_causal", "enable_gqa")


class SDPAParams:
    """The inputs an attention kernel is chosen by, given positionally: ``query``, ``key``,
    ``value``, ``attn_mask`` (a tensor or None), ``dropout``, ``is_causal`` and
    ``enable_gqa``; read-only attributes of the same names."""

    __slots__ = ("_values",)

    def __init__(self, query, key, value, attn_mask, dropout, is_causal, enable_gqa, /):
        from ember._tensor import Tensor
        flags = (is_causal, enable_gqa)
        if not (all(isinstance(t, Tensor) for t in (query, key, value))
                and (attn_mask is None or isinstance(attn_mask, Tensor))
                and isinstance(dropout, numbers.Real)
                and all(f is None or isinstance(f, (numbers.Real, np.bool_)) for f in flags)):
            got = ", ".join(type(a).__name__ for a in (query, key, value, attn_mask, dropout,
                                                       is_causal, enable_gqa))
            raise TypeError(f"SDPAParams(): expected (Tensor query, Tensor key, Tensor value, "
                            f"Tensor? attn_mask, float dropout, bool is_causal, bool "
                            f"enable_gqa), but got ({got})")
        self._values = (query, key, value, attn_mask, float(dropout), bool(is_causal),
                        bool(enable_gqa))

    def __repr__(self):
        return f"<ember.backends.cuda.SDPAParams is_causal={self.is_causal} " \
               f"dropout={self.dropout} enable_gqa={self.enable_gqa}>"


for _i, _name in enumerate(_FIELDS):
    setattr(SDPAParams, _name, property(lambda self, i=_i: self._values[i],
                                        doc=f"The ``{_name}`` of the call."))
del _i, _name


def _checked(params, function):
    if not isinstance(params, SDPAParams):
        raise TypeError(f"{function}(): argument 'params' must be SDPAParams, not "
                        f"{type(params).__name__}")
    from ember import cuda
    return cuda.is_available()


def _answer(reason, debug):
    """True when there is no ``reason`` against the kernel; with ``debug`` the reason is
    warned."""
    if reason is not None and debug:
        warnings.warn(reason, UserWarning, stacklevel=3)
    return reason is None


def can_use_flash_attention(params, debug=False):
    """Whether ember's flash-attention kernel would run ``scaled_dot_product_attention`` on
    ``params``: the switch on, the kernel loaded (Triton present), the tensors on one GPU and
    valid, 3-D (without ``enable_gqa``) or 4-D float32/float16/bfloat16 heads of at most
    128 features, contiguous in their last dim, key and value heads matching the query's
    batch (as many key as value heads), non-empty sequences, a mask that broadcasts to the
    scores, dropout below 1.
    With ``debug``, a UserWarning says what stood in the way."""
    if not _checked(params, "can_use_flash_attention"):
        return False
    return _answer(_flash_refusal(params), debug)


def can_use_efficient_attention(params, debug=False):
    """Whether the memory-efficient attention kernel could run on ``params``: never, as ember
    has none (its generic path runs in its place); ``debug`` warns so."""
    if not _checked(params, "can_use_efficient_attention"):
        return False
    return _answer("ember has no memory-efficient attention kernel: its generic attention "
                   "runs where PyTorch would use one", debug)


def can_use_cudnn_attention(params, debug=False):
    """Whether the cuDNN attention kernel could run on ``params``: never, as ember has no
    cuDNN (its generic path runs in its place); ``debug`` warns so."""
    if not _checked(params, "can_use_cudnn_attention"):
        return False
    return _answer("ember has no cuDNN attention kernel: its generic attention runs where "
                   "PyTorch would use one", debug)


def is_ck_sdpa_available():
    """Whether composable_kernel (ROCm's) attention can run: never, as ember has no ROCm
    path."""
    return False


def _flash_refusal(params):
    """Why ember's flash kernel would not take ``params`` (None: it would)."""
    from ember.backends.cuda import flash_sdp_enabled
    if not flash_sdp_enabled():
        return "Flash attention has been turned off (enable_flash_sdp or sdpa_kernel)."
    tensors = [t for t in (params.query, params.key, params.value, params.attn_mask)
               if t is not None]
    if len({t.device for t in tensors}) != 1 or tensors[0].device.type != "cuda":
        places = ", ".join(f"{name} on {t.device}" for name, t in zip(_FIELDS, tensors))
        return f"ember's flash attention needs its tensors on one CUDA device, but got {places}"
    kernels = sys.modules.get("ember.backend.cuda_kernels")
    if kernels is None or _FLASH_OP not in kernels.OVERRIDES:
        return ("ember's flash attention kernel is not loaded here: it needs Triton, and "
                "EMBER_CUDA_KERNELS unset or 1")
    if _FLASH_OP in kernels.DISABLED:
        return f"ember's flash attention kernel is off here: {kernels.DISABLED[_FLASH_OP]}"
    q, k, v = (t._data for t in (params.query, params.key, params.value))
    mask = None if params.attn_mask is None else params.attn_mask._data
    return _layout_refusal(q, k, v, mask, params.dropout, params.is_causal, params.enable_gqa)


def _layout_refusal(q, k, v, mask, dropout, is_causal, enable_gqa):
    """Why the flash kernel would not take these GPU arrays (None: it would), in the order
    the override in backend/cuda_kernels/forwards.py tests them."""
    from ember.backend import DEVICE_KERNELS
    from ember.backend.cuda_kernels._launch import FAST_DTYPES
    from ember.backend.cuda_kernels.triton_attention import MAX_HEAD
    from ember.ops.attention import _check, _groups
    if dropout >= 1:
        return f"ember's flash attention needs dropout below 1, but got {dropout}"
    if not q.ndim == k.ndim == v.ndim:
        return (f"ember's flash attention needs query, key and value of one rank, but got "
                f"{q.ndim}, {k.ndim} and {v.ndim} dims")
    if q.ndim == 3 and not enable_gqa:     # one head: (B, L, E) taken as (B, 1, L, E)
        q, k, v = q[:, None], k[:, None], v[:, None]
        mask = mask[:, None] if mask is not None and mask.ndim == 3 else mask
    if q.ndim != 4:
        return (f"ember's flash attention needs 4-D (batch, heads, length, features) inputs, "
                f"or 3-D ones without enable_gqa, but got {q.ndim}-D ones")
    try:
        gk, gv = _groups(q, k, v, enable_gqa)
        _check(q, k, v, mask, dropout, is_causal, gk != 1 or gv != 1)
    except (RuntimeError, IndexError, NotImplementedError) as e:
        return f"scaled_dot_product_attention would refuse these inputs: {e}"
    (B, H, L, E), (S, Ev) = q.shape, v.shape[2:]
    if q.dtype not in FAST_DTYPES:
        return f"ember's flash attention needs float32, float16 or bfloat16, not {q.dtype}"
    if gk != gv or k.shape[:2] != (B, H // gk) or v.shape[:3] != k.shape[:3]:
        return ("ember's flash attention needs key and value of the query's batch size, with "
                "as many key heads as value heads")
    if not L or not S:
        return "ember's flash attention needs non-empty query and key sequences"
    if max(E, Ev) > MAX_HEAD:
        return (f"ember's flash attention needs at most {MAX_HEAD} features a head, but got "
                f"{E} (query and key) and {Ev} (value)")
    if any(a.strides[3] != a.itemsize for a in (q, k, v)):
        return "ember's flash attention needs query, key and value contiguous in their last dim"
    if mask is not None and not _broadcasts(mask.shape, (B, H, L, S)):
        return (f"ember's flash attention needs an attn_mask that broadcasts to "
                f"{(B, H, L, S)}, but got one of shape {mask.shape}")
    if dropout > 0 and "random" not in DEVICE_KERNELS:
        return "ember's flash attention needs its GPU random-number kernel for dropout"
    return None


def _broadcasts(shape, to):
    """Whether an array of ``shape`` broadcasts to ``to``."""
    try:
        return np.broadcast_shapes(shape, to) == to
    except ValueError:
        return False
