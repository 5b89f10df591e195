"""What PyTorch's fused inference fast path of MultiheadAttention and TransformerEncoderLayer
changes in the values it returns.

NOTE [Attention fast path]
PyTorch runs ``nn.MultiheadAttention`` (self-attention, boolean masks only) and
``nn.TransformerEncoderLayer`` (any masks) through one fused kernel in eval mode when no gradient
is wanted. ember computes the documented math on every call, but two things that kernel does
show in the results, so ember reproduces them under the same conditions:
- the encoder layer reads its masks as booleans: any nonzero entry of a float mask (a GPT-2
  style ``(1 - mask) * -10000.0`` padding mask, say) masks that key out entirely;
- both ignore the ``is_causal`` hint (without a mask: no error, and no causal masking);
- a query whose every key is masked (in any head) comes out NaN, where the composite path's
  safe softmax gives it zero attention.
"""

import ember
from ember._tensor import Tensor
from ember.nn.parameter import Parameter

_PLAIN = (Tensor, Parameter)


def _tensor_args_allow(args):
    """PyTorch's last checks: no __torch_function__ override (or mode), a CPU or CUDA input (a
    meta one is not), no gradient wanted."""
    has_torch_function = ember.overrides.has_torch_function
    if has_torch_function(args[:1]) or args[0].device.type not in ("cpu", "cuda"):
        return False
    if any(type(a) not in _PLAIN for a in args) and has_torch_function(args):
        return False
    return not (ember.is_grad_enabled() and any(a.requires_grad for a in args))


def mha_takes_fast_path(mha, query, key, value, attn_mask, key_padding_mask):
    """Whether PyTorch's MultiheadAttention.forward would call its fused kernel (the masks as
    given, before they are made float)."""
    if any(m is not None and m.is_floating_point() for m in (attn_mask, key_padding_mask)):
        return False
    if query is not key or key is not value or query.dim() != 3:
        return False
    d = mha.__dict__
    weight, bias = d["_parameters"]["in_proj_weight"], d["_parameters"]["in_proj_bias"]
    if weight is None or query.dtype != weight.dtype:
        return False
    if bias is not None and query.dtype != bias.dtype:
        return False
    if d["training"] or mha.num_heads % 2 or not mha.batch_first or mha.add_zero_attn:
        return False
    if mha.bias_k is not None or mha.bias_v is not None:
        return False
    if not mha._qkv_same_embed_dim or not ember.backends.mha.get_fastpath_enabled():
        return False
    if ember.is_autocast_enabled():
        return False
    out = d["_modules"]["out_proj"].__dict__["_parameters"]
    return _tensor_args_allow([query, weight] + [t for t in (bias, out["weight"], out["bias"])
                                                 if t is not None])


def _unhooked_parameters(module, params):
    """Whether no module in ``module``'s tree has forward (pre-)hooks; collects their
    parameters into ``params`` on the way."""
    d = module.__dict__
    if d["_forward_hooks"] or d["_forward_pre_hooks"]:
        return False
    params.extend(p for p in d["_parameters"].values() if p is not None)
    return all(_unhooked_parameters(m, params) for m in d["_modules"].values() if m is not None)


def layer_takes_fast_path(layer, src):
    """Whether PyTorch's TransformerEncoderLayer.forward would call its fused kernel."""
    if layer.__dict__["training"] or src.dim() != 3:
        return False
    attn = layer.self_attn
    if not attn.batch_first or attn.in_proj_bias is None or not attn._qkv_same_embed_dim:
        return False
    if not layer.activation_relu_or_gelu or layer.norm1.eps != layer.norm2.eps:
        return False
    if attn.num_heads % 2 or not ember.backends.mha.get_fastpath_enabled():
        return False
    params = [src]
    if ember.is_autocast_enabled() or not _unhooked_parameters(layer, params):
        return False
    return _tensor_args_allow(params)


def as_fast_path_mask(mask):
    """The mask as the fused kernel reads it: True (masked out) wherever it is nonzero."""
    if mask is None or mask.dtype == ember.bool:
        return mask
    return mask != 0


def nan_unattended(out, attn_mask, key_padding_mask, num_heads):
    """``out`` (batch, seq, embed) with NaN in the rows of queries that every key is masked
    from in some head (a mask entry masks where it is nonzero)."""
    if attn_mask is None:
        if key_padding_mask is None:
            return out
        rows = (key_padding_mask != 0).all(dim=-1)             # (batch,): every query
        if not bool(rows.any()):
            return out
        return out.masked_fill(rows.view(-1, 1, 1), float("nan"))
    masked = attn_mask != 0
    if masked.dim() == 3:
        masked = masked.view(out.shape[0], num_heads, out.shape[1], -1)
    if key_padding_mask is not None:
        pad = (key_padding_mask != 0).view(out.shape[0], 1, 1, -1)
        masked = masked | (pad if masked.dim() == 4 else pad.squeeze(1))
    rows = masked.all(dim=-1)
    if rows.dim() == 3:
        rows = rows.any(dim=1)
    if not bool(rows.any()):
        return out
    return out.masked_fill(rows.unsqueeze(-1), float("nan"))
