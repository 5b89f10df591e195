"""MultiheadAttention (``torch.nn.MultiheadAttention``) and its output projection."""


import ember
from ember.nn import init
from ember.nn.modules._fast_path import mha_takes_fast_path, nan_unattended
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.ops.multi_head_attention import _canonical_mask, _none_or_dtype

__all__ = ["MultiheadAttention"]


class NonDynamicallyQuantizableLinear(Linear):
    """The output projection of MultiheadAttention: a Linear layer under PyTorch's name."""


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of size ``embed_dim // num_heads`` (see
    ``F.multi_head_attention_forward``)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        kw = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(ember.empty((3 * embed_dim, embed_dim), **kw))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(ember.empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(ember.empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(ember.empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(ember.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(ember.empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(ember.empty((1, 1, embed_dim), **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        with ember.no_grad():
            if self._qkv_same_embed_dim:
                init.xavier_uniform_(self.in_proj_weight)
            else:
                for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                    init.xavier_uniform_(w)
            if self.in_proj_bias is not None:
                self.in_proj_bias.zero_()
                self.out_proj.bias.zero_()
            if self.bias_k is not None:
                init.xavier_normal_(self.bias_k)
                init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """(attn_output, attn_weights or None); see ``F.multi_head_attention_forward``."""
        if type(query).__name__ == "NestedTensor":      # (strided: ember.nested)
            from ember.nested._strided_mha import multihead_attention
            return multihead_attention(self, query, key, value, key_padding_mask, need_weights,
                                       attn_mask, average_attn_weights)
        batched = query.dim() == 3
        fast = not self.training and mha_takes_fast_path(self, query, key, value, attn_mask,
                                                         key_padding_mask)
        is_causal = is_causal and not fast      # the fused kernel ignores the hint
        key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                           _none_or_dtype(attn_mask), "attn_mask", query.dtype)
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if self.batch_first and batched:
            # keep "key is value" (and "query is key") true: the packed projection uses it
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = query.transpose(1, 0), key.transpose(1, 0)
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        separate = not self._qkv_same_embed_dim
        out, weights = ember.nn.functional.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=separate, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        if fast:        # see NOTE [Attention fast path]
            out = nan_unattended(out, attn_mask, key_padding_mask, self.num_heads)
        return out, weights

    def merge_masks(self, attn_mask, key_padding_mask, query):
        """(merged mask, mask type): the key padding mask alone is type 1; with an attention
        mask, both are expanded to (batch, heads, seq, seq) and or-ed (or summed): type 2."""
        if attn_mask is None:
            return key_padding_mask, (None if key_padding_mask is None else 1)
        batch, seq_len = query.shape[0], query.shape[1]
        if attn_mask.dim() == 3:
            merged = attn_mask.view(batch, -1, seq_len, seq_len)
        else:
            merged = attn_mask.view(1, 1, seq_len, seq_len).expand(batch, self.num_heads, -1, -1)
        if key_padding_mask is not None:
            merged = merged + key_padding_mask.view(batch, 1, 1, seq_len).expand(
                -1, self.num_heads, -1, -1)
        return merged, 2
