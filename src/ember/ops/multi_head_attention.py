"""F.multi_head_attention_forward: projections, head split, masks and attention, from ops.

Shapes follow PyTorch: query (L, N, E), key (S, N, kdim), value (S, N, vdim) (or 2-D when
unbatched). Masks are made float (-inf where a bool mask says "do not attend"), merged, and
passed to scaled_dot_product_attention; with ``need_weights`` the weights are computed
explicitly (a plain softmax, so fully masked rows give NaN, as in PyTorch).
"""

import math
import warnings

import ember
from ember.ops.attention import _c_name

__all__ = ["multi_head_attention_forward"]


def _none_or_dtype(input):
    """The dtype of a tensor, or None."""
    if input is None:
        return None
    if isinstance(input, ember.Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A float mask (-inf where a bool mask is True), checking its dtype against the other's."""
    if mask is None:
        return None
    is_float = mask.is_floating_point()
    if mask.dtype is not ember.bool and not is_float:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype is not other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                      f"Use same type for both instead.", stacklevel=2)
    if is_float:
        return mask
    return ember.zeros(mask.shape, dtype=target_type, device=mask.device).masked_fill_(
        mask, float("-inf"))


def _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """Whether the inputs are batched; PyTorch's assertion for each bad rank."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(f"For batched (3-D) `query`, expected `key` and `value` to be "
                                 f"3-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 f"respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(f"For batched (3-D) `query`, expected `key_padding_mask` to be "
                                 f"`None` or 2-D but found {key_padding_mask.dim()}-D tensor "
                                 f"instead")
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(f"For batched (3-D) `query`, expected `attn_mask` to be `None`, "
                                 f"2-D or 3-D but found {attn_mask.dim()}-D tensor instead")
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key` and `value` to be "
                                 f"2-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 f"respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key_padding_mask` to "
                                 f"be `None` or 1-D but found {key_padding_mask.dim()}-D tensor "
                                 f"instead")
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(f"For unbatched (2-D) `query`, expected `attn_mask` to be "
                                     f"`None`, 2-D or 3-D but found {attn_mask.dim()}-D tensor "
                                     f"instead")
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.dim() == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                     f"{attn_mask.shape}")
        return False
    raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                         f"{query.dim()}-D query tensor")


def _linear(x, weight, bias):
    """x W^T + b over the last dim, as one 2-D matrix product."""
    flat = x.reshape(-1, x.shape[-1])
    if bias is None:
        out = flat @ weight.mT
    else:
        try:
            out = ember.addmm(bias, flat, weight.mT)
        except RuntimeError:
            if x.dim() > 2 and not x.is_contiguous():   # (batch_first) PyTorch's linear runs
                flat @ weight.mT                        # matmul: mm's error comes first
            raise
    return out.reshape(tuple(x.shape[:-1]) + (weight.shape[0],))


def _project(query, key, value, e, separate, in_w, in_b, q_w, k_w, v_w):
    """The query, key and value projections (one product when they are the same tensor)."""
    biases = (None,) * 3 if in_b is None else in_b.chunk(3)
    if not separate:
        if query is key and key is value:
            return _linear(query, in_w, in_b).chunk(3, -1)
        ws = in_w.chunk(3)
        if key is value:
            k, v = _linear(key, in_w[e:], None if in_b is None else in_b[e:]).chunk(2, -1)
            return _linear(query, ws[0], biases[0]), k, v
        return tuple(_linear(x, w, b) for x, w, b in zip((query, key, value), ws, biases))
    for name, x, w in (("query", query, q_w), ("key", key, k_w), ("value", value, v_w)):
        if tuple(w.shape) != (e, x.shape[-1]):
            raise AssertionError(f"expecting {name} weights shape of {(e, x.shape[-1])}, but "
                                 f"got {w.shape}")
    return tuple(_linear(x, w, b) for x, w, b in zip((query, key, value), (q_w, k_w, v_w),
                                                       biases))


def _pad_column(mask):
    """The mask with a zero (attend) column appended for an extra key."""
    if mask is None:
        return None
    return ember.cat([mask, mask.new_zeros(tuple(mask.shape[:-1]) + (1,))], -1)


def _heads(x, n, h, hd):
    """(T, N, E) -> (N, H, T, head_dim), through PyTorch's (T, N * H, head_dim) (whose
    error a key or value of another batch size meets)."""
    return x.reshape(x.shape[0], n * h, hd).view(x.shape[0], n, h, hd).permute(1, 2, 0, 3)


def _autocast_mask(attn_mask, q, k):
    """The float mask as PyTorch's weights path takes it: it adds the mask with ``baddbmm``,
    which autocast casts, mask included, to the dtype of its matrix product."""
    from ember.amp._policy import POLICY
    from ember.amp.autocast_mode import cast_operands
    return cast_operands(POLICY["baddbmm"], [attn_mask, q, k])[0]


def multi_head_attention_forward(
        query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
        bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
        training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
        use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
        v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
        is_causal=False):
    """Multi-head attention (the functional form of ``nn.MultiheadAttention``)."""
    batched = _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       _none_or_dtype(attn_mask), "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None                    # attention applies the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if key.shape[:2] != value.shape[:2]:
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
    elif key.shape != value.shape:
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
    q, k, v = _project(query, key, value, embed_dim, use_separate_proj_weight, in_proj_weight,
                       in_proj_bias, q_proj_weight, k_proj_weight, v_proj_weight)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.reshape(1, 1, tgt_len, src_len)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(bsz * num_heads, tgt_len, src_len)}.")
            attn_mask = attn_mask.reshape(bsz, num_heads, tgt_len, src_len)
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key." if static_k is not None
                                 else "bias cannot be added to static value.")
        k = ember.cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = ember.cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask, key_padding_mask = _pad_column(attn_mask), _pad_column(key_padding_mask)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k is set but bias_v is None" if bias_k is not None
                             else "bias_v is set but bias_k is None")

    q = _heads(q, bsz, num_heads, head_dim)
    k = _heads(k, bsz, num_heads, head_dim) if static_k is None else \
        _static(static_k, "static_k", bsz, num_heads, head_dim)
    v = _heads(v, bsz, num_heads, head_dim) if static_v is None else \
        _static(static_v, "static_v", bsz, num_heads, head_dim)
    if add_zero_attn:
        zeros = k.new_zeros((bsz, num_heads, 1, head_dim))
        k, v = ember.cat([k, zeros], 2), ember.cat([v, zeros], 2)
        attn_mask, key_padding_mask = _pad_column(attn_mask), _pad_column(key_padding_mask)
    src_len = k.shape[2]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            dim = 0 if key_padding_mask.shape[0] != bsz else 1
            want = (bsz, src_len)[dim]
            raise AssertionError(f"Expected key_padded_mask.shape[{dim}] to be {want}, but got "
                                 f"{key_padding_mask.shape[dim]}")
        key_padding_mask = key_padding_mask.reshape(bsz, 1, 1, src_len)
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask
    if not training:
        dropout_p = 0.0

    if need_weights:
        if attn_mask is not None and attn_mask.dtype is not q.dtype:
            attn_mask = _autocast_mask(attn_mask, q, k)
        if attn_mask is not None and attn_mask.dtype is not q.dtype:
            raise RuntimeError(f"Input dtypes must be the same, got: input "
                               f"{_c_name(attn_mask.dtype)}, batch1: {_c_name(q.dtype)}, "
                               f"batch2: {_c_name(k.dtype)}")
        q_scaled = q * math.sqrt(1.0 / head_dim)
        if attn_mask is None:
            scores = q_scaled @ k.mT
        else:                           # the mask added in the product: one rounding
            shape = q_scaled.shape[:-1] + k.shape[-2:-1]
            scores = ember.baddbmm(attn_mask.expand(shape).flatten(0, 1),
                                   q_scaled.flatten(0, 1), k.mT.flatten(0, 1)).view(shape)
        # softmax over (batch * heads, L, S), viewed back, as PyTorch (its grad_fn shows)
        weights = ember.softmax(scores.flatten(0, 1), -1).view(scores.shape)
        attended = weights
        if dropout_p > 0.0:
            attended = ember.nn.functional.dropout(weights, p=dropout_p)
        out = attended @ v
        if average_attn_weights:
            weights = weights.mean(dim=1)
    else:
        out = ember.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p,
                                                               is_causal)
        weights = None
    out = _linear(out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim), out_proj_weight,
                  out_proj_bias)
    if not batched:
        out = out.squeeze(1)
        if weights is not None:
            weights = weights.squeeze(0)
    return out, weights


def _static(t, name, bsz, num_heads, head_dim):
    """A precomputed key or value, (N*H, S, head_dim), as (N, H, S, head_dim)."""
    if t.shape[0] != bsz * num_heads:
        raise AssertionError(f"expecting {name}.size(0) of {bsz * num_heads}, but got "
                             f"{t.shape[0]}")
    if t.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {t.shape[2]}")
    return t.reshape(bsz, num_heads, t.shape[1], head_dim)
