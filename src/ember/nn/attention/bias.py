"""``ember.nn.attention.bias``: causal masks for ``F.scaled_dot_product_attention`` that are
kept as their two lengths and materialized only when needed (``torch.nn.attention.bias``).

``CausalBias`` is a Tensor subclass so it can be passed as ``attn_mask``; its
``__torch_function__`` takes the attention call over (NOTE [CausalBias placeholder]).
"""

import enum
import warnings

import ember
from ember._sizes import _size
from ember._tensor import Tensor
from ember.nn.attention._validate import check_same_device_and_rank, check_same_dtype
from ember.ops.attention import scaled_dot_product_attention as _sdpa_op

__all__ = ["causal_upper_left", "causal_lower_right", "CausalVariant", "CausalBias"]

_SDPA = _sdpa_op.function           # F.scaled_dot_product_attention, as __torch_function__ sees it


class CausalVariant(enum.IntEnum):
    """Where the causal triangle is anchored in the (seq_len_q, seq_len_kv) mask.

    ``UPPER_LEFT``: ``tril(ones(L, S))``, query ``i`` sees keys ``0..i`` (``is_causal=True``).
    ``LOWER_RIGHT``: ``tril(ones(L, S), diagonal=S - L)``, the last query sees every key.
    The two are the same mask when ``L == S``.
    """

    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias(Tensor):
    """A causal attention mask of shape (seq_len_q, seq_len_kv), held as its two lengths.

    Made by :func:`causal_upper_left` and :func:`causal_lower_right`; pass it as ``attn_mask``
    to ``F.scaled_dot_product_attention``. ``_materialize()`` gives the boolean mask.

    NOTE [CausalBias placeholder]: as PyTorch's, the tensor itself is not the mask but a
    float32 placeholder of shape (variant, seq_len_q, seq_len_kv) (PyTorch builds it with the
    legacy ``Tensor(*sizes)`` constructor and leaves it uninitialized). Ops other than the
    attention see that placeholder, and their results are CausalBias without lengths, as in
    PyTorch. ember's placeholder is one zero expanded to that shape, on the CPU whatever the
    default device (as PyTorch's): it costs no memory, where PyTorch's allocates
    4 * variant * seq_len_q * seq_len_kv bytes (and fails for long sequences).
    """

    def __new__(cls, variant, seq_len_q, seq_len_kv):
        sizes = (variant, seq_len_q, seq_len_kv)
        for pos, s in enumerate(sizes, 1):
            if not hasattr(type(s), "__index__"):
                raise TypeError(f"new(): argument 'size' failed to unpack the object at pos "
                                f"{pos} with error \"type must be tuple of ints,but got "
                                f"{type(s).__name__}\"")
        return ember.zeros((), device="cpu").expand(_size(sizes)).as_subclass(cls)

    def __init__(self, variant, seq_len_q, seq_len_kv):
        if not isinstance(variant, CausalVariant):
            raise AssertionError(f"variant must be a CausalVariant, got {type(variant).__name__}")
        self.variant = variant
        self.seq_len_q = seq_len_q
        self.seq_len_kv = seq_len_kv
        if variant is CausalVariant.LOWER_RIGHT and seq_len_q > seq_len_kv:
            warnings.warn("Lower right causal bias will produce NaNs in the output when "
                          "seq_len_q > seq_len_kv!", stacklevel=2)

    def _materialize(self, device=None):
        """The boolean mask (True where a query may attend to a key) on ``device``."""
        upper_left = self.variant is CausalVariant.UPPER_LEFT
        L, S = self.seq_len_q, self.seq_len_kv
        return ember.ones(L, S, dtype=ember.bool, device=device).tril(0 if upper_left else S - L)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """Attention with a CausalBias mask is computed here; any other op runs on the
        placeholder (NOTE [CausalBias placeholder])."""
        kwargs = kwargs or {}
        if func is _SDPA and isinstance(_mask_of(*args, **kwargs), CausalBias):
            return _attend(*args, **kwargs)
        return super().__torch_function__(func, types, args, kwargs)

    def __repr__(self):
        return repr(self._materialize())


def _mask_of(query, key, value, attn_mask=None, *args, **kwargs):
    return attn_mask


def _attend(query, key, value, attn_mask, dropout_p=0.0, is_causal=False, *, scale=None,
            enable_gqa=False):
    """SDPA with a CausalBias: the causal flag when the mask is the upper-left triangle (as
    PyTorch, the bias's lengths are not checked then), else the materialized boolean mask."""
    if is_causal:
        raise ValueError("CausalBias should not be used with causal=True")
    bias = attn_mask
    if bias.variant is CausalVariant.UPPER_LEFT or bias.seq_len_q == bias.seq_len_kv:
        return _SDPA(query, key, value, None, dropout_p, True, scale=scale,
                     enable_gqa=enable_gqa)
    check_same_dtype(query, key, value)         # PyTorch's checks before it materializes
    check_same_device_and_rank(query, key, value)
    return _SDPA(query, key, value, bias._materialize(query.device), dropout_p, False,
                 scale=scale, enable_gqa=enable_gqa)


def causal_upper_left(*size):
    """A causal mask whose triangle starts at the top-left corner: ``tril(ones(size))``."""
    if len(size) != 2:
        raise AssertionError("causal_upper_left only supports 2D tensors")
    return CausalBias(CausalVariant.UPPER_LEFT, *size)


def causal_lower_right(*size):
    """A causal mask whose triangle ends at the bottom-right corner:
    ``tril(ones(size), diagonal=size[1] - size[0])``."""
    if len(size) != 2:
        raise AssertionError("causal_lower_right only supports 2D tensors")
    return CausalBias(CausalVariant.LOWER_RIGHT, *size)
