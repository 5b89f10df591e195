"""``nn.MultiheadAttention`` on a strided nested tensor: PyTorch takes nested inputs on its
fused inference path alone, so ember runs the same checks (with PyTorch's reasons, in its order)
and then attends within each component with the dense module."""

import ember
from ember.nested import _strided_ops

__all__ = ["multihead_attention"]


def _why_not_mha(mha, query, key, value, attn_mask, key_padding_mask):
    """Why PyTorch's MultiheadAttention would not take its fused path (which alone accepts
    nested inputs) for this call, in PyTorch's words and order; None when it would."""
    weight, bias = mha.in_proj_weight, mha.in_proj_bias
    params = [query, weight, bias, mha.out_proj.weight, mha.out_proj.bias]
    checks = (
        (not ember.backends.mha.get_fastpath_enabled(),
         "ember.backends.mha.get_fastpath_enabled() was not True"),
        (query.dim() != 3, f"input not batched; expected query.dim() of 3 but got "
                           f"{query.dim()}"),
        (query is not key or key is not value,
         "non-self attention was used (query, key, and value are not the same Tensor)"),
        (bias is not None and query.dtype != bias.dtype,
         f"dtypes of query ({query.dtype}) and self.in_proj_bias "
         f"({getattr(bias, 'dtype', None)}) don't match"),
        (weight is None, "in_proj_weight was None"),
        (weight is not None and query.dtype != weight.dtype,
         f"dtypes of query ({query.dtype}) and self.in_proj_weight "
         f"({getattr(weight, 'dtype', None)}) don't match"),
        (mha.training, "training is enabled"),
        (mha.num_heads % 2 == 1, "self.num_heads is not even"),
        (not mha.batch_first, "batch_first was not True"),
        (mha.bias_k is not None, "self.bias_k was not None"),
        (mha.bias_v is not None, "self.bias_v was not None"),
        (mha.add_zero_attn, "add_zero_attn was enabled"),
        (not mha._qkv_same_embed_dim, "_qkv_same_embed_dim was not True"),
        (key_padding_mask is not None or attn_mask is not None,
         "supplying both src_key_padding_mask and src_mask at the same time "
         "                                 is not supported with NestedTensor input"),
        (ember.is_autocast_enabled(), "autocast is enabled"),
        (ember.is_grad_enabled() and any(p is not None and p.requires_grad for p in params),
         "grad is enabled and at least one of query or the input/output projection weights or "
         "biases requires_grad"))
    return next((why for failed, why in checks if failed), None)


def multihead_attention(mha, query, key, value, key_padding_mask=None, need_weights=True,
                        attn_mask=None, average_attn_weights=True):
    """``mha`` on a nested (batch-first) self-attention input: each component attends to
    itself; the weights, when wanted, padded with zeros to one dense tensor."""
    why = _why_not_mha(mha, query, key, value, attn_mask, key_padding_mask)
    if why is None and mha.in_proj_bias is None:
        why = ""        # (PyTorch's fused kernel wants the bias: it names no reason)
    if why is not None:
        raise AssertionError(f"MultiheadAttention does not support NestedTensor outside of its "
                             f"fast path. The fast path was not hit because {why}")
    outs, weights = [], []
    for t in query._components:        # (forward: the module's hooks ran once, for this call)
        out, w = mha.forward(t[None], t[None], t[None], need_weights=need_weights,
                             average_attn_weights=average_attn_weights)
        outs.append(out[0])
        weights.append(w)
    if not need_weights:
        return _strided_ops.wrap(outs), None
    n = max(w.shape[-1] for w in weights)
    padded = [ember.nn.functional.pad(w[0], [0, n - w.shape[-1], 0, n - w.shape[-2]])
              for w in weights]
    return _strided_ops.wrap(outs), ember.stack(padded)
