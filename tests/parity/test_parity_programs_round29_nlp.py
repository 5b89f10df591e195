"""NLP architectures of the second wave, written as their reference repositories write them in
torch and run once with `torch` bound to ember and once to PyTorch from the same NumPy weights
and data: Transformer-XL (the pad+view ``_rel_shift``, detached segment memory grown from
``torch.empty(0)`` by legacy cat, old-style ``einsum(eq, (a, b))``, AdaptiveLogSoftmaxWithLoss),
XLNet's two-stream attention (permutation masks, ``rel_shift_bnij`` by reshape and index_select,
segment one-hots, target mappings), DeBERTa's disentangled attention (log-bucket positions,
c2p/p2c by gather on clamped relative positions, the XSoftmax Function whose backward calls
``torch._softmax_backward_data``) and Longformer's sliding chunks (as_strided overlapping windows,
pad-and-diagonalize, -inf masks written through slices, ``torch.div(int, int)`` sizes). Sibling
files: _seq (BigBird, ELMo, ByT5, fairseq, Funnel); _fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _txl_layer(torch, d_model, n_head, d_head):
    """kimiyoung's RelPartialLearnableDecoderLayer (attention + position-wise FF)."""
    nn, F = torch.nn, torch.nn.functional

    class RelPartialLearnableMultiHeadAttn(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_head, self.d_head = n_head, d_head
            self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
            self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
            self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)
            self.layer_norm = nn.LayerNorm(d_model)
            self.scale = 1 / (d_head ** 0.5)

        def _rel_shift(self, x, zero_triu=False):
            zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
            x_padded = torch.cat([zero_pad, x], dim=1)
            x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
            x = x_padded[1:].view_as(x)
            if zero_triu:
                ones = torch.ones((x.size(0), x.size(1)))
                x = x * torch.tril(ones, x.size(1) - x.size(0))[:, :, None, None]
            return x

        def forward(self, w, r, r_w_bias, r_r_bias, attn_mask=None, mems=None):
            qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
            if mems is not None:
                cat = torch.cat([mems, w], 0)
                w_heads = self.qkv_net(cat)
                r_head_k = self.r_net(r)
                w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
                w_head_q = w_head_q[-qlen:]
            else:
                w_heads = self.qkv_net(w)
                r_head_k = self.r_net(r)
                w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
            klen = w_head_k.size(0)
            w_head_q = w_head_q.view(qlen, bsz, self.n_head, self.d_head)
            w_head_k = w_head_k.view(klen, bsz, self.n_head, self.d_head)
            w_head_v = w_head_v.view(klen, bsz, self.n_head, self.d_head)
            r_head_k = r_head_k.view(rlen, self.n_head, self.d_head)
            rw_head_q = w_head_q + r_w_bias
            AC = torch.einsum("ibnd,jbnd->ijbn", (rw_head_q, w_head_k))
            rr_head_q = w_head_q + r_r_bias
            BD = torch.einsum("ibnd,jnd->ijbn", (rr_head_q, r_head_k))
            BD = self._rel_shift(BD)
            attn_score = AC + BD
            attn_score.mul_(self.scale)
            if attn_mask is not None and attn_mask.any().item():
                attn_score = attn_score.float().masked_fill(
                    attn_mask[:, :, :, None], -float("inf")).type_as(attn_score)
            attn_prob = F.softmax(attn_score, dim=1)
            attn_vec = torch.einsum("ijbn,jbnd->ibnd", (attn_prob, w_head_v))
            attn_vec = attn_vec.contiguous().view(
                attn_vec.size(0), attn_vec.size(1), self.n_head * self.d_head)
            return self.layer_norm(w + self.o_net(attn_vec))

    class PositionwiseFF(nn.Module):
        def __init__(self):
            super().__init__()
            self.CoreNet = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.ReLU(inplace=True),
                                         nn.Linear(2 * d_model, d_model))
            self.layer_norm = nn.LayerNorm(d_model)

        def forward(self, inp):
            return self.layer_norm(inp + self.CoreNet(inp))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.dec_attn = RelPartialLearnableMultiHeadAttn()
            self.pos_ff = PositionwiseFF()

        def forward(self, dec_inp, r, r_w_bias, r_r_bias, dec_attn_mask=None, mems=None):
            out = self.dec_attn(dec_inp, r, r_w_bias, r_r_bias, attn_mask=dec_attn_mask,
                                mems=mems)
            return self.pos_ff(out)
    return Layer, RelPartialLearnableMultiHeadAttn._rel_shift


def transformer_xl_program(torch):
    """Transformer-XL training over three segments: sinusoidal relative positions from a
    registered inv_freq buffer and ``torch.ger``, memories started as ``torch.empty(0)`` and
    grown by cat then detached under no_grad, a bool triu mask shifted by the memory length,
    AdaptiveLogSoftmaxWithLoss (loss, per-token output, log_prob, predict), Adam with a LambdaLR
    warmup and clip_grad_norm_; plus the _rel_shift trick on its own against the explicit index."""
    nn = torch.nn
    rng = np.random.default_rng(2960)
    n_token, d_model, n_head, d_head, n_layer = 40, 16, 2, 8, 2
    tgt_len, mem_len, bsz = 5, 6, 3
    Layer, rel_shift = _txl_layer(torch, d_model, n_head, d_head)

    class MemTransformerLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_emb = nn.Embedding(n_token, d_model)
            inv_freq = 1 / (10000 ** (torch.arange(0.0, d_model, 2.0) / d_model))
            self.register_buffer("inv_freq", inv_freq)
            self.layers = nn.ModuleList([Layer() for _ in range(n_layer)])
            self.r_w_bias = nn.Parameter(torch.Tensor(n_head, d_head))
            self.r_r_bias = nn.Parameter(torch.Tensor(n_head, d_head))
            self.crit = nn.AdaptiveLogSoftmaxWithLoss(d_model, n_token, cutoffs=[8, 20],
                                                      div_value=2.0)

        def init_mems(self):
            param = next(self.parameters())
            return [torch.empty(0, dtype=param.dtype, device=param.device)
                    for _ in range(n_layer + 1)]

        def _update_mems(self, hids, mems, qlen, mlen):
            with torch.no_grad():
                new_mems = []
                end_idx = mlen + max(0, qlen)
                beg_idx = max(0, end_idx - mem_len)
                for i in range(len(hids)):
                    cat = torch.cat([mems[i], hids[i]], dim=0)
                    new_mems.append(cat[beg_idx:end_idx].detach())
            return new_mems

        def forward(self, data, target, *mems):
            if not mems:
                mems = self.init_mems()
            qlen, bsz = data.size()
            word_emb = self.word_emb(data) * d_model ** 0.5
            mlen = mems[0].size(0) if mems is not None else 0
            klen = mlen + qlen
            dec_attn_mask = torch.triu(word_emb.new_ones(qlen, klen),
                                       diagonal=1 + mlen).bool()[:, :, None]
            pos_seq = torch.arange(klen - 1, -1, -1.0, device=word_emb.device,
                                   dtype=word_emb.dtype)
            sinusoid_inp = torch.ger(pos_seq, self.inv_freq)
            pos_emb = torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)[:, None, :]
            hids = [word_emb]
            core_out = word_emb
            for i, layer in enumerate(self.layers):
                mems_i = None if mems is None else mems[i]
                core_out = layer(core_out, pos_emb, self.r_w_bias, self.r_r_bias,
                                 dec_attn_mask=dec_attn_mask, mems=mems_i)
                hids.append(core_out)
            new_mems = self._update_mems(hids, mems, qlen, mlen)
            pred_hid = core_out[-qlen:]
            out = self.crit(pred_hid.reshape(-1, d_model), target.reshape(-1))
            return [out.loss, out.output.view(qlen, bsz)] + new_mems

    model = MemTransformerLM()
    fill_(torch, model, rng, 0.2)
    # eps 1e-6: r_net's gradients are ~1e-9 in places, where the default eps would turn
    # float32 summation-order noise into whole Adam steps
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 2))
    tokens = torch.from_numpy(rng.integers(0, n_token, (3 * tgt_len + 1, bsz)))
    res = {"loss": [], "mem_shapes": [], "lr": [], "nll": []}
    mems = tuple()
    for seg in range(3):
        data = tokens[seg * tgt_len:(seg + 1) * tgt_len]
        target = tokens[seg * tgt_len + 1:(seg + 1) * tgt_len + 1]
        ret = model(data, target, *mems)
        loss, nll, mems = ret[0], ret[1], ret[2:]
        opt.zero_grad()
        loss.backward()
        res["grad_norm"] = nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        sched.step()
        res["loss"].append(loss)
        res["nll"].append(-nll)
        res["lr"].append(opt.param_groups[0]["lr"])
        res["mem_shapes"].append(str(tuple(mems[0].shape)))
        res["mem_grad"] = [m.requires_grad for m in mems]
    model.eval()
    with torch.no_grad():
        hid = normal(torch, rng, 4, d_model)
        res["log_prob"] = model.crit.log_prob(hid)
        res["predict"] = model.crit.predict(hid)
        res["log_prob_sum"] = model.crit.log_prob(hid).exp().sum(-1)
    x = normal(torch, rng, 4, 4, 2, 1)
    shifted = rel_shift(None, x)
    res["rel_shift"] = shifted
    res["rel_shift_triu"] = rel_shift(None, x, zero_triu=True)
    res["params"] = list(model.parameters())
    return res


def xlnet_program(torch):
    """HF XLNet's relative attention with the two streams: content (h) and query (g) streams,
    permutation masks built from a NumPy permutation, non-target masks by subtracting eye,
    ``rel_shift_bnij`` by reshape/slice/index_select, segment one-hots from F.one_hot and a
    target mapping einsum'd in and out; two SGD steps on the LM loss over predicted tokens."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2961)
    n_token, d_model, n_head, d_head, bsz, qlen, n_pred = 30, 12, 2, 6, 2, 6, 2

    class RelAttn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Parameter(torch.FloatTensor(d_model, n_head, d_head))
            self.k = nn.Parameter(torch.FloatTensor(d_model, n_head, d_head))
            self.v = nn.Parameter(torch.FloatTensor(d_model, n_head, d_head))
            self.o = nn.Parameter(torch.FloatTensor(d_model, n_head, d_head))
            self.r = nn.Parameter(torch.FloatTensor(d_model, n_head, d_head))
            self.r_r_bias = nn.Parameter(torch.FloatTensor(n_head, d_head))
            self.r_s_bias = nn.Parameter(torch.FloatTensor(n_head, d_head))
            self.r_w_bias = nn.Parameter(torch.FloatTensor(n_head, d_head))
            self.seg_embed = nn.Parameter(torch.FloatTensor(2, n_head, d_head))
            self.layer_norm = nn.LayerNorm(d_model, eps=1e-12)
            self.scale = 1 / (d_head ** 0.5)

        @staticmethod
        def rel_shift_bnij(x, klen=-1):
            x_size = x.shape
            x = x.reshape(x_size[0], x_size[1], x_size[3], x_size[2])
            x = x[:, :, 1:, :]
            x = x.reshape(x_size[0], x_size[1], x_size[2], x_size[3] - 1)
            return torch.index_select(x, 3, torch.arange(klen, device=x.device,
                                                         dtype=torch.long))

        def core(self, q_head, k_head_h, v_head_h, k_head_r, seg_mat, attn_mask):
            ac = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_w_bias, k_head_h)
            bd = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_r_bias, k_head_r)
            bd = self.rel_shift_bnij(bd, klen=ac.shape[3])
            ef = torch.einsum("ibnd,snd->ibns", q_head + self.r_s_bias, self.seg_embed)
            ef = torch.einsum("ijbs,ibns->bnij", seg_mat, ef)
            attn_score = (ac + bd + ef) * self.scale
            attn_score = attn_score - 1e30 * torch.einsum("ijbn->bnij", attn_mask)
            attn_prob = F.softmax(attn_score, dim=3)
            return torch.einsum("bnij,jbnd->ibnd", attn_prob, v_head_h)

        def post(self, h, attn_vec):
            attn_out = torch.einsum("ibnd,hnd->ibh", attn_vec, self.o)
            return self.layer_norm(attn_out + h)

        def forward(self, h, g, mask_h, mask_g, r, seg_mat, target_mapping):
            k_head_h = torch.einsum("ibh,hnd->ibnd", h, self.k)
            v_head_h = torch.einsum("ibh,hnd->ibnd", h, self.v)
            k_head_r = torch.einsum("ibh,hnd->ibnd", r.type(self.r.dtype), self.r)
            q_head_h = torch.einsum("ibh,hnd->ibnd", h, self.q)
            out_h = self.post(h, self.core(q_head_h, k_head_h, v_head_h, k_head_r, seg_mat,
                                           mask_h))
            q_head_g = torch.einsum("ibh,hnd->ibnd", g, self.q)
            q_head_g = torch.einsum("mbnd,mlb->lbnd", q_head_g, target_mapping)
            attn_vec_g = self.core(q_head_g, k_head_h, v_head_h, k_head_r, seg_mat, mask_g)
            attn_vec_g = torch.einsum("lbnd,mlb->mbnd", attn_vec_g, target_mapping)
            return out_h, self.post(g, attn_vec_g)

    emb = nn.Embedding(n_token, d_model)
    mask_emb = nn.Parameter(torch.FloatTensor(1, 1, d_model))
    layer = RelAttn()
    head = nn.Linear(d_model, n_token)
    params = [*emb.parameters(), mask_emb, *layer.parameters(), *head.parameters()]
    fill_(torch, params, rng, 0.3)
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    ids = torch.from_numpy(rng.integers(0, n_token, (bsz, qlen)))
    token_type_ids = torch.from_numpy(np.array([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]]))
    perm = np.stack([rng.permutation(qlen) for _ in range(bsz)])
    rank = np.argsort(perm, axis=1)
    perm_np = (rank[:, None, :] >= rank[:, :, None]).astype(np.float32)
    perm_mask = torch.from_numpy(perm_np)
    tgt_pos = perm[:, -n_pred:]
    target_mapping = torch.zeros(bsz, n_pred, qlen)
    for b in range(bsz):
        target_mapping[b, torch.arange(n_pred), torch.from_numpy(tgt_pos[b])] = 1.0
    labels = ids.gather(1, torch.from_numpy(tgt_pos))
    res = {"loss": []}
    for _ in range(2):
        word_emb_k = emb(ids.transpose(0, 1).contiguous())
        word_emb_q = mask_emb.expand(n_pred, bsz, -1)
        attn_mask = perm_mask.permute(1, 2, 0).contiguous()[:, :, :, None]
        non_tgt_mask = -torch.eye(qlen).to(attn_mask)
        non_tgt_mask = ((attn_mask + non_tgt_mask[:, :, None, None]) > 0).to(attn_mask)
        tt = token_type_ids.transpose(0, 1)
        seg_mat = (tt[:, None] != tt[None, :]).long()
        seg_mat = F.one_hot(seg_mat, num_classes=2).to(word_emb_k.dtype)
        freq_seq = torch.arange(0, d_model, 2.0, dtype=torch.int64).float()
        inv_freq = 1 / torch.pow(10000, (freq_seq / d_model))
        pos_seq = torch.arange(qlen, -qlen, -1.0)
        sinusoid_inp = torch.einsum("i,d->id", pos_seq, inv_freq)
        pos_emb = torch.cat([torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)], dim=-1)
        pos_emb = pos_emb[:, None, :].expand(-1, bsz, -1)
        out_h, out_g = layer(word_emb_k, word_emb_q, non_tgt_mask, attn_mask, pos_emb, seg_mat,
                             target_mapping.permute(1, 2, 0).contiguous())
        logits = head(out_g).transpose(0, 1)
        loss = F.cross_entropy(logits.reshape(-1, n_token), labels.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss)
    res["out_h"] = out_h
    res["dtypes"] = [str(non_tgt_mask.dtype).split(".")[-1], str(seg_mat.dtype).split(".")[-1]]
    res["params"] = params
    return res


def _deberta_positions(torch):
    def make_log_bucket_position(relative_pos, bucket_size, max_position):
        sign = torch.sign(relative_pos)
        mid = bucket_size // 2
        abs_pos = torch.where((relative_pos < mid) & (relative_pos > -mid),
                              torch.tensor(mid - 1).type_as(relative_pos),
                              torch.abs(relative_pos))
        log_pos = torch.ceil(torch.log(abs_pos / mid)
                             / torch.log(torch.tensor((max_position - 1) / mid))
                             * (mid - 1)) + mid
        return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)

    def build_relative_position(query_size, key_size, bucket_size=-1, max_position=-1):
        q_ids = torch.arange(0, query_size)
        k_ids = torch.arange(0, key_size)
        rel_pos_ids = q_ids[:, None] - k_ids[None, :]
        if bucket_size > 0 and max_position > 0:
            rel_pos_ids = make_log_bucket_position(rel_pos_ids, bucket_size, max_position)
        rel_pos_ids = rel_pos_ids.to(torch.long)
        return rel_pos_ids[:query_size, :].unsqueeze(0)
    return make_log_bucket_position, build_relative_position


def xsoftmax(torch):
    """DeBERTa's XSoftmax: a masked softmax whose backward calls
    ``torch._softmax_backward_data`` (shared with the fixes file)."""
    class XSoftmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, mask, dim):
            ctx.dim = dim
            rmask = ~(mask.to(torch.bool))
            output = input.masked_fill(rmask, torch.tensor(torch.finfo(input.dtype).min))
            output = torch.softmax(output, ctx.dim)
            output.masked_fill_(rmask, 0)
            ctx.save_for_backward(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            (output,) = ctx.saved_tensors
            grad = torch._softmax_backward_data(grad_output, output, ctx.dim, output.dtype)
            return grad, None, None
    return XSoftmax


def deberta_program(torch):
    """HF DeBERTa-v2's disentangled self-attention: log-bucket relative positions, shared
    position projections repeated per head, c2p and p2c scores by ``torch.gather`` on clamped
    positions expanded over the batch of heads, the XSoftmax Function (masked_fill with a finfo
    min tensor, ``_softmax_backward_data`` in its backward), a StableDropout off in eval; three
    AdamW steps, then the bucket table for a long sequence."""
    nn = torch.nn
    rng = np.random.default_rng(2962)
    B, L, H, nh = 2, 7, 12, 3
    bucket, max_pos = 8, 32
    att_span = bucket // 2
    make_bucket, build_rel = _deberta_positions(torch)

    XSoftmax = xsoftmax(torch)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query_proj = nn.Linear(H, H)
            self.key_proj = nn.Linear(H, H)
            self.value_proj = nn.Linear(H, H)
            self.rel_embeddings = nn.Embedding(bucket, H)
            self.norm = nn.LayerNorm(H, 1e-7, elementwise_affine=True)

        def transpose_for_scores(self, x, attention_heads):
            new_x_shape = x.size()[:-1] + (attention_heads, -1)
            x = x.view(new_x_shape)
            return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))

        def forward(self, hidden_states, attention_mask, relative_pos):
            query_layer = self.transpose_for_scores(self.query_proj(hidden_states), nh)
            key_layer = self.transpose_for_scores(self.key_proj(hidden_states), nh)
            value_layer = self.transpose_for_scores(self.value_proj(hidden_states), nh)
            scale_factor = 3
            scale = torch.sqrt(torch.tensor(query_layer.size(-1), dtype=torch.float)
                               * scale_factor)
            attention_scores = torch.bmm(query_layer, key_layer.transpose(-1, -2)
                                         / scale.to(dtype=query_layer.dtype))
            rel_embeddings = self.norm(self.rel_embeddings.weight)
            rel_embeddings = rel_embeddings[0:att_span * 2, :].unsqueeze(0)
            pos_key_layer = self.transpose_for_scores(self.key_proj(rel_embeddings), nh).repeat(
                query_layer.size(0) // nh, 1, 1)
            pos_query_layer = self.transpose_for_scores(
                self.query_proj(rel_embeddings), nh).repeat(query_layer.size(0) // nh, 1, 1)
            relative_pos = relative_pos.long().to(query_layer.device)
            c2p_att = torch.bmm(query_layer, pos_key_layer.transpose(-1, -2))
            c2p_pos = torch.clamp(relative_pos + att_span, 0, att_span * 2 - 1)
            c2p_att = torch.gather(c2p_att, dim=-1, index=c2p_pos.squeeze(0).expand(
                [query_layer.size(0), query_layer.size(1), relative_pos.size(-1)]))
            rel_att = c2p_att / scale.to(dtype=c2p_att.dtype)
            p2c_pos = torch.clamp(-relative_pos + att_span, 0, att_span * 2 - 1)
            p2c_att = torch.bmm(key_layer, pos_query_layer.transpose(-1, -2))
            p2c_att = torch.gather(p2c_att, dim=-1, index=p2c_pos.squeeze(0).expand(
                [query_layer.size(0), key_layer.size(-2), key_layer.size(-2)])).transpose(-1, -2)
            rel_att += p2c_att / scale.to(dtype=p2c_att.dtype)
            attention_scores = attention_scores + rel_att
            attention_scores = attention_scores.view(-1, nh, attention_scores.size(-2),
                                                     attention_scores.size(-1))
            attention_probs = XSoftmax.apply(attention_scores, attention_mask, -1)
            context = torch.bmm(attention_probs.view(-1, attention_probs.size(-2),
                                                     attention_probs.size(-1)), value_layer)
            context = context.view(-1, nh, context.size(-2), context.size(-1)).permute(
                0, 2, 1, 3).contiguous()
            return context.view(context.size()[:-2] + (-1,)), attention_probs

    attn = Attention()
    fill_(torch, attn, rng, 0.3)
    opt = torch.optim.AdamW(attn.parameters(), lr=1e-2, weight_decay=0.01)
    x = normal(torch, rng, B, L, H)
    lengths = torch.tensor([L, L - 2])
    input_mask = (torch.arange(L)[None, :] < lengths[:, None]).long()
    extended = input_mask.unsqueeze(1).unsqueeze(2)
    attention_mask = extended * extended.squeeze(-2).unsqueeze(-1)
    relative_pos = build_rel(L, L, bucket, max_pos)
    target = normal(torch, rng, B, L, H)
    res = {"loss": [], "relative_pos": relative_pos}
    for _ in range(3):
        out, probs = attn(x, attention_mask, relative_pos)
        loss = ((out - target) ** 2 * input_mask[..., None]).sum() / input_mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss)
    res["probs"] = probs
    res["grads"] = [p.grad for p in attn.parameters()]
    res["params"] = list(attn.parameters())
    res["long_buckets"] = build_rel(40, 40, 16, 64)
    res["bucket_dtype"] = [str(make_bucket(torch.arange(-5, 6), 4, 16).dtype).split(".")[-1]]
    return res


def _longformer(torch):
    nn = torch.nn

    def _chunk(hidden_states, window_overlap):
        hidden_states = hidden_states.view(
            hidden_states.size(0),
            torch.div(hidden_states.size(1), (window_overlap * 2), rounding_mode="trunc"),
            window_overlap * 2, hidden_states.size(2))
        chunk_size = list(hidden_states.size())
        chunk_size[1] = chunk_size[1] * 2 - 1
        chunk_stride = list(hidden_states.stride())
        chunk_stride[1] = chunk_stride[1] // 2
        return hidden_states.as_strided(size=chunk_size, stride=chunk_stride)

    def _pad_and_transpose_last_two_dims(hidden_states_padded, padding):
        hidden_states_padded = nn.functional.pad(hidden_states_padded, padding)
        return hidden_states_padded.view(*hidden_states_padded.size()[:-2],
                                         hidden_states_padded.size(-1),
                                         hidden_states_padded.size(-2))

    def _pad_and_diagonalize(chunked_hidden_states):
        total_num_heads, num_chunks, window_overlap, hidden_dim = chunked_hidden_states.size()
        chunked_hidden_states = nn.functional.pad(chunked_hidden_states, (0, window_overlap + 1))
        chunked_hidden_states = chunked_hidden_states.view(total_num_heads, num_chunks, -1)
        chunked_hidden_states = chunked_hidden_states[:, :, :-window_overlap]
        chunked_hidden_states = chunked_hidden_states.view(
            total_num_heads, num_chunks, window_overlap, window_overlap + hidden_dim)
        return chunked_hidden_states[:, :, :, :-1]

    def _mask_invalid_locations(input_tensor, affected_seq_len):
        beginning_mask_2d = input_tensor.new_ones(affected_seq_len,
                                                  affected_seq_len + 1).tril().flip(dims=[0])
        beginning_mask = beginning_mask_2d[None, :, None, :]
        ending_mask = beginning_mask.flip(dims=(1, 3))
        beginning_input = input_tensor[:, :affected_seq_len, :, :affected_seq_len + 1]
        beginning_mask = beginning_mask.expand(beginning_input.size())
        input_tensor[:, :affected_seq_len, :, :affected_seq_len + 1] = torch.full_like(
            beginning_input, -float("inf")).where(beginning_mask.bool(), beginning_input)
        ending_input = input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1):]
        ending_mask = ending_mask.expand(ending_input.size())
        input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1):] = torch.full_like(
            ending_input, -float("inf")).where(ending_mask.bool(), ending_input)

    def qk(query, key, window_overlap):
        batch_size, seq_len, num_heads, head_dim = query.size()
        chunks_count = torch.div(seq_len, window_overlap, rounding_mode="trunc") - 1
        query = query.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        key = key.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        query = _chunk(query, window_overlap)
        key = _chunk(key, window_overlap)
        diag_chunks = torch.einsum("bcxd,bcyd->bcxy", (query, key))
        diag_chunks = _pad_and_transpose_last_two_dims(diag_chunks, padding=(0, 0, 0, 1))
        scores = diag_chunks.new_zeros(
            (batch_size * num_heads, chunks_count + 1, window_overlap, window_overlap * 2 + 1))
        w = window_overlap
        scores[:, :-1, :, w:] = diag_chunks[:, :, :w, :w + 1]
        scores[:, -1, :, w:] = diag_chunks[:, -1, w:, :w + 1]
        scores[:, 1:, :, :w] = diag_chunks[:, :, -(w + 1):-1, w + 1:]
        scores[:, 0, 1:w, 1:w] = diag_chunks[:, 0, :w - 1, 1 - w:]
        scores = scores.view(batch_size, num_heads, seq_len, 2 * w + 1).transpose(2, 1)
        _mask_invalid_locations(scores, w)
        return scores

    def pv(attn_probs, value, window_overlap):
        batch_size, seq_len, num_heads, head_dim = value.size()
        w = window_overlap
        chunks_count = torch.div(seq_len, w, rounding_mode="trunc") - 1
        chunked_attn_probs = attn_probs.transpose(1, 2).reshape(
            batch_size * num_heads, torch.div(seq_len, w, rounding_mode="trunc"), w, 2 * w + 1)
        value = value.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        padded_value = nn.functional.pad(value, (0, 0, w, w), value=-1)
        chunked_value_size = (batch_size * num_heads, chunks_count + 1, 3 * w, head_dim)
        stride = padded_value.stride()
        chunked_value_stride = (stride[0], w * stride[1], stride[1], stride[2])
        chunked_value = padded_value.as_strided(size=chunked_value_size,
                                                stride=chunked_value_stride)
        chunked_attn_probs = _pad_and_diagonalize(chunked_attn_probs)
        context = torch.einsum("bcwd,bcdh->bcwh", (chunked_attn_probs, chunked_value))
        return context.view(batch_size, num_heads, seq_len, head_dim).transpose(1, 2)
    return qk, pv


def longformer_program(torch):
    """HF Longformer's local attention: sliding-chunk q·k through as_strided overlapping
    chunks, the band rebuilt by slice assignment into new_zeros, invalid corners set to -inf by
    ``full_like(...).where``, padding keys masked with a finfo-min float mask run through the
    same chunk matmul, softmax, masked_fill of padded queries, the p·v product over as_strided
    value windows; gradients w.r.t. q, k, v against a dense banded reference."""
    F = torch.nn.functional
    rng = np.random.default_rng(2963)
    B, L, nh, dh, w = 2, 8, 2, 3, 2
    qk, pv = _longformer(torch)
    q = normal(torch, rng, B, L, nh, dh).requires_grad_()
    k = normal(torch, rng, B, L, nh, dh).requires_grad_()
    v = normal(torch, rng, B, L, nh, dh).requires_grad_()
    attention_mask = torch.ones(B, L, dtype=torch.long)
    attention_mask[1, -3:] = 0
    remove = (attention_mask != 1)[:, :, None, None]
    scores = qk(q / math.sqrt(dh), k, w)
    float_mask = remove.type_as(q).masked_fill(remove, torch.finfo(q.dtype).min)
    diagonal_mask = qk(float_mask.new_ones(size=float_mask.size()), float_mask, w)
    scores += diagonal_mask
    probs = F.softmax(scores, dim=-1, dtype=torch.float32)
    probs = torch.masked_fill(probs, remove, 0.0)
    ctx = pv(probs.type_as(scores), v, w)
    target = normal(torch, rng, B, L, nh, dh)
    loss = ((ctx - target) ** 2).mean()
    loss.backward()
    res = {"scores": scores, "probs": probs, "ctx": ctx, "loss": loss,
           "grads": [q.grad, k.grad, v.grad], "isinf": scores.isinf().sum()}
    # a dense banded reference from the same q, k, v
    idx = torch.arange(L)
    band = (idx[:, None] - idx[None, :]).abs() <= w
    dense = torch.einsum("bqhd,bkhd->bhqk", q.detach() / math.sqrt(dh), k.detach())
    dense = dense.masked_fill(~band, float("-inf"))
    dense = dense.masked_fill(remove[:, None, None, :, 0, 0], torch.finfo(q.dtype).min)
    ref = torch.einsum("bhqk,bkhd->bqhd", dense.softmax(-1), v.detach())
    ref = ref.masked_fill(remove[..., 0:1].expand(-1, -1, nh, dh), 0.0)
    res["max_dense_gap"] = (ref - ctx.detach()).abs().max()
    return res


PROGRAMS = [transformer_xl_program, xlnet_program, deberta_program, longformer_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 matmul/einsum accumulation order over a few optimizer steps
        "transformer_xl_program": (1e-4, 1e-5),
        "xlnet_program": (1e-4, 1e-5),
        "deberta_program": (1e-4, 1e-5),
        "longformer_program": (1e-4, 1e-5),
    })
