"""Multimodal fusion programs written as the BLIP-2, Flamingo, LLaVA, ALBEF and LayoutLM
repositories write them in torch, run once with `torch` bound to ember and once to PyTorch from
the same NumPy weights and data: a Q-Former (learned queries, cross-attention every other layer,
ITC / ITM / ITG losses under padding, bidirectional and prefix-causal masks), a perceiver
resampler with tanh-gated cross-attention (gates at 0, media masks by cumsum), image-token
splicing by split/cat (padded by hand and through a nested tensor), masked_scatter and
index_put_, ALBEF momentum distillation (EMA under no_grad, a queue of negatives written by
slices), LayoutLM 2-D position embeddings and relative-position buckets. Sibling _causal:
treatment-effect and energy-model programs; _fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _bert_layers(torch, d, heads, n_layers, cross_freq=2, d_enc=None):
    """BLIP-2's Q-Former layers: self-attention, cross-attention on every cross_freq-th layer."""
    nn = torch.nn

    class Attention(nn.Module):
        def __init__(self, d_kv):
            super().__init__()
            self.query = nn.Linear(d, d)
            self.key, self.value = nn.Linear(d_kv, d), nn.Linear(d_kv, d)
            self.dense, self.norm = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)

        def transpose_for_scores(self, x):
            new_shape = x.size()[:-1] + (heads, d // heads)
            return x.view(*new_shape).permute(0, 2, 1, 3)

        def forward(self, hidden, kv, mask):
            q = self.transpose_for_scores(self.query(hidden))
            k = self.transpose_for_scores(self.key(kv))
            v = self.transpose_for_scores(self.value(kv))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // heads)
            scores = scores + mask
            probs = nn.Softmax(dim=-1)(scores)
            ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
            ctx = ctx.view(*ctx.size()[:-2], d)
            return self.norm(self.dense(ctx) + hidden)

    class Layer(nn.Module):
        def __init__(self, idx):
            super().__init__()
            self.attention = Attention(d)
            self.has_cross_attention = idx % cross_freq == 0
            if self.has_cross_attention:
                self.crossattention = Attention(d_enc or d)
            self.intermediate = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU())
            self.output, self.out_norm = nn.Linear(2 * d, d), nn.LayerNorm(d, eps=1e-12)

        def forward(self, hidden, mask, enc=None, enc_mask=None, query_length=0):
            hidden = self.attention(hidden, hidden, mask)
            if query_length > 0 and enc is not None and self.has_cross_attention:
                q = self.crossattention(hidden[:, :query_length], enc, enc_mask)
                hidden = torch.cat([q, hidden[:, query_length:]], dim=1)
            return self.out_norm(self.output(self.intermediate(hidden)) + hidden)

    return nn.ModuleList([Layer(i) for i in range(n_layers)])


def _extended_mask(torch, attention_mask, is_decoder, prefix_len=0, dtype=None):
    """HF's get_extended_attention_mask, with BLIP-2's query-prefix causal variant."""
    dtype = dtype or torch.float32
    if is_decoder:
        batch_size, seq_length = attention_mask.shape[0], attention_mask.shape[1] - prefix_len
        seq_ids = torch.arange(seq_length, device=attention_mask.device)
        causal_mask = (seq_ids[None, None, :].repeat(batch_size, seq_length, 1)
                       <= seq_ids[None, :, None])
        causal_mask = causal_mask.to(attention_mask.dtype)
        if prefix_len > 0:
            causal_mask = torch.cat([torch.zeros((batch_size, prefix_len, seq_length),
                                                 dtype=causal_mask.dtype), causal_mask], dim=1)
            causal_mask = torch.cat([torch.ones((batch_size, causal_mask.shape[1], prefix_len),
                                                dtype=causal_mask.dtype), causal_mask], dim=-1)
        extended = causal_mask[:, None, :, :] * attention_mask[:, None, None, :]
    else:
        extended = attention_mask[:, None, None, :]
    extended = extended.to(dtype=dtype)
    return (1.0 - extended) * torch.finfo(dtype).min


def qformer_program(torch):
    """BLIP-2 stage-1 pretraining: ITC on max query similarity, ITM with hard negatives picked
    from softmax weights after fill_diagonal_, ITG under the query-prefix causal mask."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    B, Q, D, L, V, P, D_img = 3, 4, 16, 6, 20, 5, 12
    torch.manual_seed(0)
    layers = _bert_layers(torch, D, 2, 2, cross_freq=2, d_enc=D_img)
    word = nn.Embedding(V, D, padding_idx=0)
    pos = nn.Embedding(16, D)
    emb_norm = nn.LayerNorm(D, eps=1e-12)
    vision_proj, text_proj, itm_head = nn.Linear(D, 8), nn.Linear(D, 8), nn.Linear(D, 2)
    lm_head = nn.Linear(D, V)
    ln_vision = nn.LayerNorm(D_img)
    mods = nn.ModuleList([layers, word, pos, emb_norm, vision_proj, text_proj, itm_head, lm_head,
                          ln_vision])
    fill_(torch, mods, rng, 0.2)
    query_tokens = nn.Parameter(torch.zeros(1, Q, D))
    query_tokens.data.normal_(mean=0.0, std=0.02)  # RNG stream differs: overwritten below
    with torch.no_grad():
        query_tokens.copy_(normal(torch, rng, 1, Q, D) * 0.5)
    temp = nn.Parameter(0.07 * torch.ones([]))
    opt = torch.optim.AdamW(list(mods.parameters()) + [query_tokens, temp], lr=1e-3,
                            weight_decay=0.05)

    def bert(input_ids=None, query_embeds=None, mask=None, enc=None, is_decoder=False):
        if input_ids is not None:
            position_ids = torch.arange(input_ids.size(1)).expand((1, -1))
            embeds = word(input_ids) + pos(position_ids)
            if query_embeds is not None:
                embeds = torch.cat((query_embeds, embeds), dim=1)
        else:
            embeds = query_embeds
        h = emb_norm(embeds)
        q_len = query_embeds.shape[1] if query_embeds is not None else 0
        ext = _extended_mask(torch, mask, is_decoder, prefix_len=q_len if is_decoder else 0)
        enc_mask = None
        if enc is not None:
            enc_atts = torch.ones(enc.size()[:-1], dtype=torch.long)
            enc_mask = (1.0 - enc_atts[:, None, None, :].to(h.dtype)) * -10000.0
        for layer in layers:
            h = layer(h, ext, enc, enc_mask, query_length=q_len)
        return h

    image = normal(torch, rng, B, P, D_img)
    text = torch.from_numpy(rng.integers(1, V, (B, L)))
    text[0, 4:] = 0
    text[2, 5:] = 0
    text_atts = (text != 0).long()
    res = {}
    for step in range(2):
        image_embeds = ln_vision(image)
        query = query_tokens.expand(image_embeds.shape[0], -1, -1)
        query_atts = torch.ones(query.size()[:-1], dtype=torch.long).to(image.device)
        query_output = bert(query_embeds=query, mask=query_atts, enc=image_embeds)
        image_feats = F.normalize(vision_proj(query_output), dim=-1)
        text_output = bert(input_ids=text, mask=text_atts)
        text_feat = F.normalize(text_proj(text_output[:, 0, :]), dim=-1)
        # ITC
        sim_q2t = torch.matmul(image_feats.unsqueeze(1), text_feat.unsqueeze(-1)).squeeze()
        sim_i2t, _ = sim_q2t.max(-1)
        sim_i2t = sim_i2t / temp
        sim_t2q = torch.matmul(text_feat.unsqueeze(1).unsqueeze(1),
                               image_feats.permute(0, 2, 1)).squeeze()
        sim_t2i, _ = sim_t2q.max(-1)
        sim_t2i = sim_t2i / temp
        targets = torch.linspace(0, B - 1, B, dtype=int)
        loss_itc = (F.cross_entropy(sim_i2t, targets, label_smoothing=0.1)
                    + F.cross_entropy(sim_t2i, targets, label_smoothing=0.1)) / 2
        # ITM with hard negatives
        with torch.no_grad():
            weights_t2i = F.softmax(sim_t2i, dim=1) + 1e-4
            weights_t2i[:, 0:B].fill_diagonal_(0)
            weights_i2t = F.softmax(sim_i2t, dim=1) + 1e-4
            weights_i2t[:, 0:B].fill_diagonal_(0)
        neg_img = torch.stack([image_embeds[torch.argmax(weights_t2i[b]).item()]
                               for b in range(B)], dim=0)
        neg_idx = weights_i2t.argmax(dim=1)
        text_ids_all = torch.cat([text, text, text[neg_idx]], dim=0)
        text_atts_all = torch.cat([text_atts, text_atts, text_atts[neg_idx]], dim=0)
        query_itm = query_tokens.expand(text_ids_all.shape[0], -1, -1)
        query_atts_itm = torch.ones(query_itm.size()[:-1], dtype=torch.long)
        attention_mask_all = torch.cat([query_atts_itm, text_atts_all], dim=1)
        image_embeds_all = torch.cat([image_embeds, neg_img, image_embeds], dim=0)
        out_itm = bert(input_ids=text_ids_all, query_embeds=query_itm,
                       mask=attention_mask_all, enc=image_embeds_all)
        vl_embeddings = out_itm[:, :query_itm.size(1), :]
        logits = itm_head(vl_embeddings).mean(dim=1)
        itm_labels = torch.cat([torch.ones(B, dtype=torch.long),
                                torch.zeros(2 * B, dtype=torch.long)], dim=0)
        loss_itm = F.cross_entropy(logits, itm_labels)
        # ITG: queries see each other, text is causal and sees all queries
        decoder_input_ids = text.clone()
        decoder_input_ids[:, 0] = 1
        labels = decoder_input_ids.masked_fill(decoder_input_ids == 0, -100)
        attention_mask = torch.cat([query_atts, text_atts], dim=1)
        out_lm = bert(input_ids=decoder_input_ids, query_embeds=query,
                      mask=attention_mask, is_decoder=True)
        prediction_scores = lm_head(out_lm[:, Q:, :])
        shifted = prediction_scores[:, :-1, :].contiguous()
        lm_labels = labels[:, 1:].contiguous()
        loss_lm = F.cross_entropy(shifted.view(-1, V), lm_labels.view(-1), reduction="none",
                                  label_smoothing=0.1)
        loss_lm = loss_lm.view(B, -1).sum(1).mean()
        loss = loss_itc + loss_itm + loss_lm
        opt.zero_grad(set_to_none=True)
        loss.backward()
        res[f"losses{step}"] = [loss_itc.item(), loss_itm.item(), loss_lm.item()]
        res[f"grad_q{step}"] = query_tokens.grad.clone()
        res[f"grad_temp{step}"] = temp.grad.clone()
        res[f"neg{step}"] = neg_idx.tolist()
        opt.step()
        with torch.no_grad():
            temp.clamp_(0.001, 0.5)
    res["ext_mask"] = _extended_mask(torch, attention_mask, True, prefix_len=Q)
    res["temp"] = temp.detach()
    res["cross_layers"] = [layer.has_cross_attention for layer in layers]
    res["dtypes"] = [str(targets.dtype)[6:], str(query_atts.dtype)[6:]]
    # a key bias cancels in softmax: its gradient is rounding noise that AdamW amplifies
    res["params"] = [p.detach().clone() for n, p in mods.named_parameters()
                     if not n.endswith("key.bias")][:8]
    return res


def flamingo_program(torch):
    """Flamingo: perceiver resampler over frames, tanh-gated cross-attention (gates at 0) into a
    frozen LM, each text token attending only to the latest media by a cumsum mask."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(1)
    B, T, N, D, H, DH, R, S, V = 2, 2, 5, 16, 2, 4, 3, 7, 11

    class PerceiverAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale, self.heads = DH ** -0.5, H
            self.norm_media, self.norm_latents = nn.LayerNorm(D), nn.LayerNorm(D)
            self.to_q = nn.Linear(D, H * DH, bias=False)
            self.to_kv = nn.Linear(D, H * DH * 2, bias=False)
            self.to_out = nn.Linear(H * DH, D, bias=False)

        def forward(self, x, latents):
            x, latents = self.norm_media(x), self.norm_latents(latents)
            b, t, n1, _ = x.shape
            q = self.to_q(latents)
            kv_input = torch.cat((x, latents), dim=-2)
            k, v = self.to_kv(kv_input).chunk(2, dim=-1)
            q, k, v = (z.reshape(*z.shape[:-1], H, DH).permute(0, 3, 1, 2, 4)
                       for z in (q, k, v))
            q = q * self.scale
            sim = torch.einsum("... i d, ... j d -> ... i j", q, k)
            sim = sim - sim.amax(dim=-1, keepdim=True).detach()
            attn = sim.softmax(dim=-1)
            out = torch.einsum("... i j, ... j d -> ... i d", attn, v)
            out = out.permute(0, 2, 3, 1, 4).flatten(-2)
            return self.to_out(out)

    class Resampler(nn.Module):
        def __init__(self):
            super().__init__()
            self.latents = nn.Parameter(torch.randn(R, D))
            self.frame_embs = nn.Parameter(torch.randn(4, D))
            self.media_time_embs = nn.Parameter(torch.randn(T, 1, D))
            self.layers = nn.ModuleList([nn.ModuleList([
                PerceiverAttention(),
                nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 2 * D, bias=False), nn.GELU(),
                              nn.Linear(2 * D, D, bias=False))]) for _ in range(2)])
            self.norm = nn.LayerNorm(D)

        def forward(self, x):
            b, T_, F_, v = x.shape[:4]
            x = x + self.frame_embs[:F_].view(1, 1, F_, 1, D)
            x = x.flatten(2, 3)
            x = x + self.media_time_embs[:T_]
            latents = self.latents.unsqueeze(0).unsqueeze(0).expand(b, T_, -1, -1)
            for attn, ff in self.layers:
                latents = attn(x, latents) + latents
                latents = ff(latents) + latents
            return self.norm(latents)

    class MaskedCrossAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(D)
            self.to_q = nn.Linear(D, H * DH, bias=False)
            self.to_kv = nn.Linear(D, 2 * H * DH, bias=False)
            self.to_out = nn.Linear(H * DH, D, bias=False)

        def forward(self, x, media, media_locations):
            b, t, m = media.shape[:3]
            x = self.norm(x)
            q = self.to_q(x).view(b, -1, H, DH).transpose(1, 2) * DH ** -0.5
            media = media.reshape(b, t * m, D)
            k, v = self.to_kv(media).chunk(2, dim=-1)
            k, v = (z.view(b, -1, H, DH).transpose(1, 2) for z in (k, v))
            sim = q @ k.transpose(-2, -1)
            text_time = media_locations.cumsum(dim=-1)
            media_time = torch.arange(t, device=x.device) + 1
            text_to_media_mask = (text_time[:, None, :, None]
                                  == media_time.repeat_interleave(m)[None, None, None, :])
            sim = sim.masked_fill(~text_to_media_mask, -torch.finfo(sim.dtype).max)
            sim = sim - sim.amax(dim=-1, keepdim=True).detach()
            attn = sim.softmax(dim=-1)
            text_without_media_mask = text_time == 0
            attn = attn.masked_fill(text_without_media_mask[:, None, :, None], 0.0)
            out = (attn @ v).transpose(1, 2).reshape(b, -1, H * DH)
            return self.to_out(out)

    class GatedXAttn(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = MaskedCrossAttention()
            self.attn_gate = nn.Parameter(torch.tensor([0.0]))
            self.ff = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 2 * D), nn.GELU(),
                                    nn.Linear(2 * D, D))
            self.ff_gate = nn.Parameter(torch.tensor([0.0]))

        def forward(self, x, media, media_locations):
            x = self.attn(x, media, media_locations) * self.attn_gate.tanh() + x
            x = self.ff(x) * self.ff_gate.tanh() + x
            return x

    resampler = Resampler()
    fill_(torch, resampler, rng, 0.3)
    xattn = nn.ModuleList([GatedXAttn() for _ in range(2)])
    lm = nn.ModuleDict({"emb": nn.Embedding(V, D),
                        "blocks": nn.ModuleList([nn.Linear(D, D) for _ in range(2)]),
                        "head": nn.Linear(D, V)})
    with torch.no_grad():
        for name, p in list(xattn.named_parameters()) + list(lm.named_parameters()):
            if "gate" not in name:
                p.copy_(normal(torch, rng, *p.shape) * 0.3)
    lm.requires_grad_(False)
    trainable = [p for p in list(resampler.parameters()) + list(xattn.parameters())
                 if p.requires_grad]
    opt = torch.optim.Adam(trainable, lr=1e-2)
    vision_x = normal(torch, rng, B, T, 2, N, D)
    media_token = 3
    lang_x = torch.from_numpy(rng.integers(4, V, (B, S)))
    lang_x[0, 0] = media_token
    lang_x[0, 4] = media_token
    lang_x[1, 2] = media_token
    targets = torch.roll(lang_x, -1, dims=1)
    res = {}
    for step in range(3):
        media = resampler(vision_x)
        media_locations = lang_x == media_token
        h = lm["emb"](lang_x)
        for blk, xa in zip(lm["blocks"], xattn):
            h = xa(h, media, media_locations)
            h = torch.tanh(blk(h)) + h
        logits = lm["head"](h)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), targets[:, :-1].reshape(-1))
        opt.zero_grad()
        loss.backward()
        res[f"loss{step}"] = loss.detach()
        res[f"gate_grads{step}"] = torch.stack([xa.attn_gate.grad for xa in xattn])
        res[f"xattn_q_grad_zero{step}"] = [bool((xa.attn.to_q.weight.grad == 0).all())
                                           for xa in xattn]
        res[f"latent_grad{step}"] = resampler.latents.grad.clone()
        opt.step()
    res["lm_grads_none"] = [p.grad is None for p in lm.parameters()]
    res["gates"] = torch.cat([torch.cat([xa.attn_gate, xa.ff_gate]) for xa in xattn]).detach()
    res["text_time"] = media_locations.cumsum(-1)
    res["media"] = media.detach()
    return res


def llava_program(torch):
    """LLaVA: projector over patch features, image tokens spliced into the embedding sequence
    three ways (split/cat with IGNORE_INDEX labels and right padding, masked_scatter,
    index_put_), the masked_scatter size error."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2)
    V, D, Dv, P = 15, 8, 6, 3
    IMAGE_TOKEN_INDEX, IGNORE_INDEX, image_token_id = -200, -100, 14
    projector = nn.Sequential(nn.Linear(Dv, D), nn.GELU(), nn.Linear(D, D))
    embed = nn.Embedding(V, D)
    head = nn.Linear(D, V, bias=False)
    mods = nn.ModuleList([projector, embed, head])
    fill_(torch, mods, rng, 0.4)
    embed.requires_grad_(False)
    images = normal(torch, rng, 2, P, Dv)
    ids = [torch.tensor([1, 5, IMAGE_TOKEN_INDEX, 7, 8]),
           torch.tensor([2, IMAGE_TOKEN_INDEX, 9, IMAGE_TOKEN_INDEX])]
    labels = [torch.tensor([IGNORE_INDEX, IGNORE_INDEX, IMAGE_TOKEN_INDEX, 7, 8]),
              torch.tensor([IGNORE_INDEX, IMAGE_TOKEN_INDEX, 9, IMAGE_TOKEN_INDEX])]
    image_features = projector(images)
    feats_list = [image_features[0], image_features[1], image_features[1] * 0.5]
    new_embeds, new_labels, cur_image_idx = [], [], 0
    for cur_input_ids, cur_labels in zip(ids, labels):
        image_token_indices = ([-1] + torch.where(cur_input_ids == IMAGE_TOKEN_INDEX)[0].tolist()
                               + [cur_input_ids.shape[0]])
        noim_ids, noim_labels = [], []
        for i in range(len(image_token_indices) - 1):
            noim_ids.append(cur_input_ids[image_token_indices[i] + 1:image_token_indices[i + 1]])
            noim_labels.append(cur_labels[image_token_indices[i] + 1:image_token_indices[i + 1]])
        split_sizes = [x.shape[0] for x in noim_labels]
        cur_embeds = embed(torch.cat(noim_ids))
        cur_embeds_no_im = torch.split(cur_embeds, split_sizes, dim=0)
        cur_new_embeds, cur_new_labels = [], []
        for i in range(len(image_token_indices) - 1):
            cur_new_embeds.append(cur_embeds_no_im[i])
            cur_new_labels.append(noim_labels[i])
            if i < len(image_token_indices) - 2:
                feats = feats_list[cur_image_idx]
                cur_image_idx += 1
                cur_new_embeds.append(feats)
                cur_new_labels.append(torch.full((feats.shape[0],), IGNORE_INDEX,
                                                 dtype=cur_labels.dtype))
        new_embeds.append(torch.cat(cur_new_embeds))
        new_labels.append(torch.cat(cur_new_labels))
    max_len = max(x.shape[0] for x in new_embeds)
    batch_size = len(new_embeds)
    padded_labels = torch.full((batch_size, max_len), IGNORE_INDEX, dtype=new_labels[0].dtype)
    attention_mask = torch.zeros((batch_size, max_len), dtype=torch.bool)
    position_ids = torch.zeros((batch_size, max_len), dtype=torch.long)
    padded = []
    for i, (cur_new_embed, cur_new_labels) in enumerate(zip(new_embeds, new_labels)):
        cur_len = cur_new_embed.shape[0]
        padded.append(torch.cat((cur_new_embed, torch.zeros((max_len - cur_len, D),
                                                             dtype=cur_new_embed.dtype)), dim=0))
        padded_labels[i, :cur_len] = cur_new_labels
        attention_mask[i, :cur_len] = True
        position_ids[i, :cur_len] = torch.arange(0, cur_len, dtype=position_ids.dtype)
    inputs_embeds = torch.stack(padded, dim=0)
    # the same padding through a (strided) nested tensor, which keeps the graph
    packed = torch.nested.as_nested_tensor(new_embeds)
    res_nested = torch.nested.to_padded_tensor(packed, 0.0)
    nested_grad = torch.autograd.grad(res_nested.pow(2).sum(), projector[2].bias,
                                      retain_graph=True)[0]
    logits = head(inputs_embeds)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), padded_labels[:, 1:].reshape(-1),
                           ignore_index=IGNORE_INDEX)
    loss.backward()
    res = {"splice_loss": loss.detach(), "labels": padded_labels, "mask": attention_mask,
           "pos": position_ids, "proj_grad": projector[0].weight.grad.clone(),
           "nested_same": bool(torch.equal(res_nested, inputs_embeds)),
           "nested_grad": nested_grad}
    # HF style: placeholder tokens replaced by masked_scatter
    projector.zero_grad()
    input_ids = torch.tensor([[1, 14, 14, 14, 5, 6], [14, 14, 14, 2, 3, 4]])
    feats = projector(images)
    emb = embed(input_ids)
    special_image_mask = (input_ids == image_token_id).unsqueeze(-1).expand_as(emb)
    merged = emb.masked_scatter(special_image_mask, feats.to(emb.device, emb.dtype))
    merged.pow(2).sum().backward()
    res["scatter"] = merged.detach()
    res["scatter_grad"] = projector[2].weight.grad.clone()
    res["scatter_grad_fn"] = [type(merged.grad_fn).__name__]
    # index_put_ into a fresh buffer
    batch_idx, pos_idx = torch.where(input_ids == image_token_id)
    buf = embed(input_ids).clone()
    feats2 = projector(images)
    buf.index_put_((batch_idx, pos_idx), feats2.reshape(-1, D))
    res["index_put"] = buf.detach()
    res["same"] = bool(torch.equal(buf, merged))
    g = torch.autograd.grad(buf.sum(), projector[2].bias)[0]
    res["index_put_grad"] = g
    try:
        emb.masked_scatter(special_image_mask, feats[:1])
    except RuntimeError as e:
        res["err"] = [str(e).split("\n")[0]]
    return res


def albef_program(torch):
    """ALBEF: momentum encoders updated by EMA under @torch.no_grad(), queues of negatives
    written by slices with a long pointer buffer, ITC against soft momentum targets and MLM
    distillation restricted to masked positions."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3)
    B, Din, E, K, Vc, L = 2, 10, 6, 8, 9, 5

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual_encoder = nn.Sequential(nn.Linear(Din, 12), nn.ReLU())
            self.text_encoder = nn.Embedding(Vc, 12)
            self.vision_proj, self.text_proj = nn.Linear(12, E), nn.Linear(12, E)
            self.mlm_head = nn.Linear(12, Vc)
            self.temp = nn.Parameter(torch.ones([]) * 0.07)
            self.momentum, self.alpha = 0.995, 0.4
            self.visual_encoder_m = nn.Sequential(nn.Linear(Din, 12), nn.ReLU())
            self.text_encoder_m = nn.Embedding(Vc, 12)
            self.vision_proj_m, self.text_proj_m = nn.Linear(12, E), nn.Linear(12, E)
            self.mlm_head_m = nn.Linear(12, Vc)
            self.model_pairs = [[self.visual_encoder, self.visual_encoder_m],
                                [self.text_encoder, self.text_encoder_m],
                                [self.vision_proj, self.vision_proj_m],
                                [self.text_proj, self.text_proj_m],
                                [self.mlm_head, self.mlm_head_m]]
            self.register_buffer("image_queue", torch.zeros(E, K))
            self.register_buffer("text_queue", torch.zeros(E, K))
            self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

        def init_queues(self, iq, tq):
            self.image_queue.copy_(nn.functional.normalize(iq, dim=0))
            self.text_queue = nn.functional.normalize(tq, dim=0)

        @torch.no_grad()
        def copy_params(self):
            for model_pair in self.model_pairs:
                for param, param_m in zip(model_pair[0].parameters(), model_pair[1].parameters()):
                    param_m.data.copy_(param.data)
                    param_m.requires_grad = False

        @torch.no_grad()
        def _momentum_update(self):
            for model_pair in self.model_pairs:
                for param, param_m in zip(model_pair[0].parameters(), model_pair[1].parameters()):
                    param_m.data = param_m.data * self.momentum + param.data * (1.0 - self.momentum)

        @torch.no_grad()
        def _dequeue_and_enqueue(self, image_feat, text_feat):
            batch_size = image_feat.shape[0]
            ptr = int(self.queue_ptr)
            assert K % batch_size == 0
            self.image_queue[:, ptr:ptr + batch_size] = image_feat.T
            self.text_queue[:, ptr:ptr + batch_size] = text_feat.T
            ptr = (ptr + batch_size) % K
            self.queue_ptr[0] = ptr

        def forward(self, image, text, mlm_ids, mlm_labels):
            with torch.no_grad():
                self.temp.clamp_(0.001, 0.5)
            image_embeds = self.visual_encoder(image)
            image_feat = F.normalize(self.vision_proj(image_embeds), dim=-1)
            text_embeds = self.text_encoder(text).mean(1)
            text_feat = F.normalize(self.text_proj(text_embeds), dim=-1)
            with torch.no_grad():
                self._momentum_update()
                image_feat_m = F.normalize(self.vision_proj_m(self.visual_encoder_m(image)), dim=-1)
                image_feat_all = torch.cat([image_feat_m.t(), self.image_queue.clone().detach()],
                                           dim=1)
                text_feat_m = F.normalize(self.text_proj_m(self.text_encoder_m(text).mean(1)),
                                          dim=-1)
                text_feat_all = torch.cat([text_feat_m.t(), self.text_queue.clone().detach()],
                                          dim=1)
                sim_i2t_m = image_feat_m @ text_feat_all / self.temp
                sim_t2i_m = text_feat_m @ image_feat_all / self.temp
                sim_targets = torch.zeros(sim_i2t_m.size()).to(image.device)
                sim_targets.fill_diagonal_(1)
                sim_i2t_targets = (self.alpha * F.softmax(sim_i2t_m, dim=1)
                                   + (1 - self.alpha) * sim_targets)
                sim_t2i_targets = (self.alpha * F.softmax(sim_t2i_m, dim=1)
                                   + (1 - self.alpha) * sim_targets)
            sim_i2t = image_feat @ text_feat_all / self.temp
            sim_t2i = text_feat @ image_feat_all / self.temp
            loss_i2t = -torch.sum(F.log_softmax(sim_i2t, dim=1) * sim_i2t_targets, dim=1).mean()
            loss_t2i = -torch.sum(F.log_softmax(sim_t2i, dim=1) * sim_t2i_targets, dim=1).mean()
            loss_ita = (loss_i2t + loss_t2i) / 2
            self._dequeue_and_enqueue(image_feat_m, text_feat_m)
            prediction_scores = self.mlm_head(self.text_encoder(mlm_ids))
            with torch.no_grad():
                logits_m = self.mlm_head_m(self.text_encoder_m(mlm_ids))
                soft_labels = F.softmax(logits_m, dim=-1)
            loss_mlm = F.cross_entropy(prediction_scores.view(-1, Vc), mlm_labels.view(-1))
            loss_distill = -torch.sum(F.log_softmax(prediction_scores, dim=-1) * soft_labels,
                                      dim=-1)
            loss_distill = loss_distill[mlm_labels != -100].mean()
            loss_mlm = (1 - self.alpha) * loss_mlm + self.alpha * loss_distill
            return loss_ita, loss_mlm

    model = Model()
    fill_(torch, model, rng, 0.4)
    with torch.no_grad():
        model.temp.fill_(0.07)
    model.copy_params()
    model.init_queues(normal(torch, rng, E, K), normal(torch, rng, E, K))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-2)
    res = {"n_trainable": sum(p.requires_grad for p in model.parameters())}
    for step in range(5):
        image = normal(torch, rng, B, Din)
        text = torch.from_numpy(rng.integers(0, Vc, (B, L)))
        mlm_labels = torch.full((B, L), -100)
        mask = torch.from_numpy(rng.random((B, L)) < 0.4)
        mask[:, 0] = True
        mlm_labels[mask] = text[mask]
        mlm_ids = text.masked_fill(mask, 1)
        loss_ita, loss_mlm = model(image, text, mlm_ids, mlm_labels)
        opt.zero_grad()
        (loss_ita + loss_mlm).backward()
        opt.step()
        res[f"loss{step}"] = [loss_ita.item(), loss_mlm.item()]
        res[f"ptr{step}"] = model.queue_ptr.tolist()
    res["queue"] = model.image_queue.clone()
    res["text_queue"] = model.text_queue.clone()
    res["buffers"] = sorted(n for n, _ in model.named_buffers())
    res["mom"] = model.vision_proj_m.weight.detach()
    res["mom_leaf_grad"] = [model.vision_proj_m.weight.requires_grad,
                            model.vision_proj_m.weight.is_leaf]
    res["temp"] = model.temp.detach()
    return res


def layoutlm_program(torch):
    """LayoutLM(v2): 2-D position embeddings gathered from bbox coordinates (with the
    out-of-range IndexError re-raised), the visual grid's boxes by floor division, T5-style
    relative-position buckets one-hot into a bias, masked self-attention, token classification."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(4)
    B, L, D, V, C, NB, MAXC = 2, 6, 12, 20, 3, 8, 1001

    class Embeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(V, D, padding_idx=0)
            self.position_embeddings = nn.Embedding(32, D)
            self.x_position_embeddings = nn.Embedding(MAXC, D)
            self.y_position_embeddings = nn.Embedding(MAXC, D)
            self.h_position_embeddings = nn.Embedding(MAXC, D)
            self.w_position_embeddings = nn.Embedding(MAXC, D)
            self.token_type_embeddings = nn.Embedding(2, D)
            self.LayerNorm = nn.LayerNorm(D, eps=1e-12)
            self.register_buffer("position_ids", torch.arange(32).expand((1, -1)),
                                 persistent=False)

        def forward(self, input_ids, bbox, token_type_ids=None):
            seq_length = input_ids.size(1)
            position_ids = self.position_ids[:, :seq_length]
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            words = self.word_embeddings(input_ids)
            try:
                left = self.x_position_embeddings(bbox[:, :, 0])
                upper = self.y_position_embeddings(bbox[:, :, 1])
                right = self.x_position_embeddings(bbox[:, :, 2])
                lower = self.y_position_embeddings(bbox[:, :, 3])
            except IndexError as e:
                raise IndexError("The `bbox`coordinate values should be within 0-1000 "
                                 "range.") from e
            h = self.h_position_embeddings(bbox[:, :, 3] - bbox[:, :, 1])
            w = self.w_position_embeddings(bbox[:, :, 2] - bbox[:, :, 0])
            emb = (words + self.position_embeddings(position_ids) + left + upper + right + lower
                   + h + w + self.token_type_embeddings(token_type_ids))
            return self.LayerNorm(emb)

    def relative_position_bucket(relative_position, bidirectional=True, num_buckets=NB,
                                 max_distance=16):
        ret = 0
        if bidirectional:
            num_buckets //= 2
            ret += (relative_position > 0).long() * num_buckets
            n = torch.abs(relative_position)
        else:
            n = torch.max(-relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = n < max_exact
        val_if_large = max_exact + (
            torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)).to(torch.long)
        val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
        ret += torch.where(is_small, n, val_if_large)
        return ret

    emb = Embeddings()
    fill_(torch, emb, rng, 0.2)
    attn = nn.MultiheadAttention(D, 2, batch_first=True)
    rel_pos_bias = nn.Linear(NB, 2, bias=False)
    rel_2d_x, rel_2d_y = nn.Linear(NB, 2, bias=False), nn.Linear(NB, 2, bias=False)
    classifier = nn.Linear(D, C)
    others = nn.ModuleList([attn, rel_pos_bias, rel_2d_x, rel_2d_y, classifier])
    fill_(torch, others, rng, 0.3)
    params = list(emb.parameters()) + list(others.parameters())
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True)
    input_ids = torch.from_numpy(rng.integers(1, V, (B, L)))
    input_ids[1, 4:] = 0
    x0 = torch.from_numpy(rng.integers(0, 500, (B, L)))
    y0 = torch.from_numpy(rng.integers(0, 500, (B, L)))
    bbox = torch.stack([x0, y0, x0 + torch.from_numpy(rng.integers(1, 400, (B, L))),
                        y0 + torch.from_numpy(rng.integers(1, 400, (B, L)))], dim=-1)
    attention_mask = input_ids != 0
    labels = torch.from_numpy(rng.integers(0, C, (B, L))).masked_fill(~attention_mask, -100)
    # visual grid boxes (LayoutLMv2 _calc_visual_bbox)
    image_feature_pool_shape = (2, 3)
    visual_bbox_x = torch.div(torch.arange(0, 1000 * (image_feature_pool_shape[1] + 1), 1000),
                              image_feature_pool_shape[1], rounding_mode="floor")
    visual_bbox_y = torch.div(torch.arange(0, 1000 * (image_feature_pool_shape[0] + 1), 1000),
                              image_feature_pool_shape[0], rounding_mode="floor")
    visual_bbox = torch.stack([
        visual_bbox_x[:-1].repeat(image_feature_pool_shape[0], 1),
        visual_bbox_y[:-1].repeat(image_feature_pool_shape[1], 1).transpose(0, 1),
        visual_bbox_x[1:].repeat(image_feature_pool_shape[0], 1),
        visual_bbox_y[1:].repeat(image_feature_pool_shape[1], 1).transpose(0, 1)],
        dim=-1).view(-1, bbox.size(-1))
    res = {"visual_bbox": visual_bbox, "visual_dtype": [str(visual_bbox.dtype).split(".")[1]]}
    position_ids = torch.arange(L).unsqueeze(0).expand(B, -1)
    for step in range(3):
        h = emb(input_ids, bbox)
        rel_pos_mat = position_ids.unsqueeze(-2) - position_ids.unsqueeze(-1)
        rel_pos = relative_position_bucket(rel_pos_mat)
        rel_pos = F.one_hot(rel_pos, num_classes=NB).type_as(h)
        bias = rel_pos_bias(rel_pos).permute(0, 3, 1, 2)
        position_coord_x, position_coord_y = bbox[:, :, 0], bbox[:, :, 3]
        rel_x = relative_position_bucket(position_coord_x.unsqueeze(-2)
                                         - position_coord_x.unsqueeze(-1), max_distance=256)
        rel_y = relative_position_bucket(position_coord_y.unsqueeze(-2)
                                         - position_coord_y.unsqueeze(-1), max_distance=256)
        bias = bias + rel_2d_x(F.one_hot(rel_x, num_classes=NB).type_as(h)).permute(0, 3, 1, 2)
        bias = bias + rel_2d_y(F.one_hot(rel_y, num_classes=NB).type_as(h)).permute(0, 3, 1, 2)
        bias = bias.masked_fill(~attention_mask[:, None, None, :], float("-inf"))
        out, weights = attn(h, h, h, attn_mask=bias.reshape(B * 2, L, L),
                            average_attn_weights=False)
        logits = classifier(out + h)
        loss = F.cross_entropy(logits.view(-1, C), labels.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        res[f"loss{step}"] = loss.detach()
        res[f"weights{step}"] = weights.detach()
    res["rel_pos"] = rel_pos.argmax(-1)
    res["rel_x"] = rel_x
    res["x_grad_rows"] = emb.x_position_embeddings.weight.grad.abs().sum(1).nonzero().flatten()
    res["word_pad_grad"] = emb.word_embeddings.weight.grad[0]
    bad = bbox.clone()
    bad[0, 0, 2] = 1001
    try:
        emb(input_ids, bad)
    except IndexError as e:
        # ember appends the failing module's path (NOTE [Module error context])
        res["err"] = [str(e).split("\n  in model")[0], type(e.__cause__).__name__]
    return res


PROGRAMS = [qformer_program, flamingo_program, llava_program, albef_program, layoutlm_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 attention stacks, then two AdamW steps on 40 tensors
        "qformer_program": (1e-4, 1e-5),
        # three Adam steps at lr 1e-2 through two resampler layers
        "flamingo_program": (1e-4, 1e-5),
        # five AdamW steps at lr 5e-2 through normalize / softmax targets
        "albef_program": (1e-4, 1e-5),
    })
