"""The Transformer of "Attention Is All You Need" and its encoder and decoder stacks.

Layers are built from ember.nn's Linear, LayerNorm, Dropout and ModuleList, looked up when a
layer is constructed. There is no separate inference fast path: every call computes the
documented math, then shows what PyTorch's fused kernel would change in the values (NOTE
[Attention fast path] in _fast_path.py). ember has no nested tensors either, but it shows
what PyTorch's packing of padded batches into them (``enable_nested_tensor``) shows: the
warning when a layer rules it out, and an encoder output of 0 at padded positions when it
would pack (eval, no gradient, a right-padded ``src_key_padding_mask`` and no ``mask``).
"""

import copy
import warnings

import ember
from ember._warn import warn_once
from ember.nn import init
from ember.nn.modules._fast_path import as_fast_path_mask, layer_takes_fast_path, nan_unattended
from ember.nn.modules.attention import MultiheadAttention
from ember.nn.modules.module import Module
from ember.ops.multi_head_attention import _canonical_mask, _none_or_dtype

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """A (sz, sz) float mask: -inf above the diagonal (future positions), 0 elsewhere."""
    return ember.triu(ember.full((sz, sz), float("-inf"), dtype=dtype, device=device),
                      diagonal=1)


def _get_seq_len(src, batch_first):
    """The sequence length of a (batched or unbatched) input."""
    if src.dim() == 2:
        return src.shape[0]
    return src.shape[1 if batch_first else 0]


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """``is_causal`` if given, else whether ``mask`` is exactly the square causal mask."""
    if is_causal is not None or mask is None:
        return is_causal is True
    sz = size if size is not None else mask.shape[-2]
    causal = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
    return mask.shape == causal.shape and bool((mask == causal).all())


def _why_not_nested(layer):
    """Why PyTorch would never pack this encoder's padded batches into nested tensors (the
    end of its warning), or None."""
    if not isinstance(layer, TransformerEncoderLayer):
        return "encoder_layer was not TransformerEncoderLayer"
    attn = layer.self_attn
    for failed, why in [
            (layer.norm_first, "encoder_layer.norm_first was True"),
            (not attn.batch_first, "encoder_layer.self_attn.batch_first was not True(use "
                                   "batch_first for better inference performance)"),
            (not attn._qkv_same_embed_dim,
             "encoder_layer.self_attn._qkv_same_embed_dim was not True"),
            (attn.in_proj_bias is None, "encoder_layer.self_attn was passed bias=False"),
            (not layer.activation_relu_or_gelu,
             "encoder_layer.activation_relu_or_gelu was not True"),
            (layer.norm1.eps != layer.norm2.eps,
             "encoder_layer.norm1.eps was not equal to encoder_layer.norm2.eps"),
            (attn.num_heads % 2 == 1, "encoder_layer.self_attn.num_heads is odd")]:
        if failed:
            return why
    return None


def _get_clones(module, n):
    return ember.nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


def _get_activation_fn(activation):
    if activation == "relu":
        return ember.nn.functional.relu
    if activation == "gelu":
        return ember.nn.functional.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _activation_kind(activation):
    """1 for ReLU, 2 for GELU, 0 for anything else (PyTorch's activation_relu_or_gelu)."""
    nn, F = ember.nn, ember.nn.functional
    if activation is getattr(F, "relu", None) or isinstance(activation, getattr(nn, "ReLU", ())):
        return 1
    if activation is getattr(F, "gelu", None) or isinstance(activation, getattr(nn, "GELU", ())):
        return 2
    return 0


def _resolve_activation(activation):
    """The activation function and PyTorch's ``activation_relu_or_gelu`` code for it."""
    if isinstance(activation, str):
        activation = _get_activation_fn(activation)
    return activation, _activation_kind(activation)


def _add_feed_forward(layer, d_model, dim_feedforward, dropout, bias, kw):
    nn = ember.nn
    layer.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, **kw)
    layer.dropout = nn.Dropout(dropout)
    layer.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, **kw)


def _feed_forward(layer, x):
    return layer.linear2(layer.dropout(layer.activation(layer.linear1(x))))


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward network, each with a residual and a LayerNorm."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        kw = {"device": device, "dtype": dtype}
        super().__init__()
        nn = ember.nn
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        _add_feed_forward(self, d_model, dim_feedforward, dropout, bias, kw)
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.activation, self.activation_relu_or_gelu = _resolve_activation(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """Encode ``src`` (with an optional attention mask and key padding mask)."""
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               _none_or_dtype(src_mask), "src_mask", src.dtype)
        src_mask = _canonical_mask(src_mask, "src_mask", None, "", src.dtype, check_other=False)
        fast = not self.training and layer_takes_fast_path(self, src)
        if fast:        # see NOTE [Attention fast path]
            src_mask, is_causal = as_fast_path_mask(src_mask), False
            src_key_padding_mask = as_fast_path_mask(src_key_padding_mask)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        if fast and self.self_attn.training:    # else self_attn's own fast path gave the NaN
            x = nan_unattended(x, src_mask, src_key_padding_mask, self.self_attn.num_heads)
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(_feed_forward(self, x))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's memory, then a feed-forward network."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        kw = {"device": device, "dtype": dtype}
        super().__init__()
        nn = ember.nn
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **kw)
        _add_feed_forward(self, d_model, dim_feedforward, dropout, bias, kw)
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.activation, self.activation_relu_or_gelu = _resolve_activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        """Decode ``tgt`` attending to ``memory`` (the encoder's output)."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(_feed_forward(self, x))


class TransformerEncoder(Module):
    """``num_layers`` copies of an encoder layer, then an optional norm."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        why = _why_not_nested(encoder_layer) if enable_nested_tensor else None
        if why is not None:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why}", stacklevel=2)
        self.use_nested_tensor = enable_nested_tensor and why is None
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """Pass ``src`` through every layer (``is_causal=None``: detect a causal ``mask``)."""
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               _none_or_dtype(mask), "mask", src.dtype)
        mask = _canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        batch_first = self.layers[0].self_attn.batch_first
        is_causal = _detect_is_causal_mask(mask, is_causal, _get_seq_len(src, batch_first))
        pack = self._would_pack(src, src_key_padding_mask, mask)
        if pack:        # PyTorch's packing makes a (strided) nested tensor, which warns so
            from ember.nested import NESTED_PROTOTYPE   # (ember.nested imports after nn)
            warn_once(NESTED_PROTOTYPE)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=is_causal,
                           src_key_padding_mask=src_key_padding_mask)
        if pack:
            output = output.masked_fill((src_key_padding_mask != 0).unsqueeze(-1), 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _would_pack(self, src, padding_mask, mask):
        """Whether PyTorch would run this call on nested tensors, which come back with 0 at
        the padded positions; its checks come in its order (the mask check raises for a
        padding mask of the wrong size even where the call is not packed after all)."""
        if not self.use_nested_tensor or self.layers[0].training or padding_mask is None \
                or src.dim() != 3:
            return False
        if getattr(self, "mask_check", True) and not _left_aligned(src, padding_mask):
            return False
        if mask is not None or src.is_meta:
            return False
        first = self.layers[0]
        return not (ember.is_grad_enabled() and (src.requires_grad or any(
            p.requires_grad for p in (*first.self_attn.parameters(), *first.norm1.parameters(),
                                      *first.norm2.parameters(), *first.linear1.parameters(),
                                      *first.linear2.parameters()))))


def _left_aligned(src, padding_mask):
    """Whether every row's padding comes after all its tokens (PyTorch's mask check)."""
    if tuple(padding_mask.shape) != tuple(src.shape[:2]):
        raise RuntimeError("Mask size should match input size")
    keep = padding_mask == 0
    return bool((keep[:, 1:] <= keep[:, :-1]).all())


class TransformerDecoder(Module):
    """``num_layers`` copies of a decoder layer, then an optional norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        """Pass ``tgt`` through every layer, each attending to ``memory``."""
        batch_first = self.layers[0].self_attn.batch_first
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal,
                                               _get_seq_len(tgt, batch_first))
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """An encoder-decoder Transformer (encoder and decoder stacks with final norms)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        kw = {"device": device, "dtype": dtype}
        super().__init__()
        layer_kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                        layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                        norm_first=norm_first, bias=bias, **kw)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, **layer_kw)
            norm = ember.nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, **layer_kw)
            norm = ember.nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        """Encode ``src`` and decode ``tgt`` against it."""
        if src.dim() == 3:
            batch_dim = 0 if self.batch_first else 1
            if src.shape[batch_dim] != tgt.shape[batch_dim]:
                raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A (sz, sz) float mask: -inf above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self):
        with ember.no_grad():
            for p in self.parameters():
                if p.dim() > 1:
                    init.xavier_uniform_(p)
