"""Attention variants written as their reference code writes them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: linear
attention / Performer (elu + 1 and FAVOR+ features over orthogonal random projections, causal
prefix sums with cumsum), ALiBi (a float mask for scaled_dot_product_attention, BLOOM's baddbmm
form), sliding-window attention (a banded mask, unfold windows, Longformer's as_strided chunks
and skewed band scores), and Reformer's LSH attention (argmax hashing, sorting and unsorting by
gather / scatter / a custom Function, chunked attention, reversible blocks with a hand-written
backward). Part of round 25's architecture programs
(test_parity_programs_round25_architectures.py)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


# ----------------------------------------------------------------------- linear / sparse attention

def linear_attention_program(torch):
    """Linear attention (elu + 1 features, einsum KV products, causal prefix sums with cumsum),
    Performer FAVOR+ softmax-kernel features over orthogonal random projections, ALiBi biases
    with a float mask in scaled_dot_product_attention, and sliding-window attention three ways
    (a banded mask, unfold windows, Longformer's as_strided chunks); a small LM trained with
    AdamW on it."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(252)
    res = {}
    b, h, n, d = 2, 4, 12, 8

    def elu_feature_map(x):
        return F.elu(x) + 1

    def linear_attention(q, k, v, eps=1e-6):
        # (N, L, H, D) layout as fast-transformers writes it
        Q, K = elu_feature_map(q), elu_feature_map(k)
        KV = torch.einsum("nshd,nshm->nhmd", K, v)
        Z = 1 / (torch.einsum("nlhd,nhd->nlh", Q, K.sum(dim=1)) + eps)
        return torch.einsum("nlhd,nhmd,nlh->nlhm", Q, KV, Z)

    def causal_linear_attention(q, k, v, eps=1e-6):
        # (B, H, N, D): prefix sums of k v^T and of k
        q, k = elu_feature_map(q), elu_feature_map(k)
        k_cumsum = k.cumsum(dim=-2)
        D_inv = 1.0 / torch.einsum("...nd,...nd->...n", q, k_cumsum.type_as(q)).clamp(min=eps)
        context = torch.einsum("...nd,...ne->...nde", k, v).cumsum(dim=-3)
        return torch.einsum("...nde,...nd,...n->...ne", context, q, D_inv)

    def orthogonal_matrix_chunk(cols):
        unstructured_block = torch.from_numpy(rng.standard_normal((cols, cols)).astype(
            np.float32))
        q, r = torch.linalg.qr(unstructured_block.cpu(), mode="reduced")
        return q.t()

    def gaussian_orthogonal_random_matrix(nb_rows, nb_columns, scaling=0):
        nb_full_blocks = int(nb_rows / nb_columns)
        block_list = [orthogonal_matrix_chunk(nb_columns) for _ in range(nb_full_blocks)]
        remaining_rows = nb_rows - nb_full_blocks * nb_columns
        if remaining_rows > 0:
            q = orthogonal_matrix_chunk(nb_columns)
            block_list.append(q[:remaining_rows])
        final_matrix = torch.cat(block_list)
        if scaling == 0:
            multiplier = torch.from_numpy(rng.standard_normal((nb_rows, nb_columns)).astype(
                np.float32)).norm(dim=1)
        else:
            multiplier = math.sqrt(float(nb_columns)) * torch.ones((nb_rows,))
        return torch.diag(multiplier) @ final_matrix

    def softmax_kernel(data, *, projection_matrix, is_query, normalize_data=True, eps=1e-4):
        b_, h_, *_ = data.shape
        data_normalizer = (data.shape[-1] ** -0.25) if normalize_data else 1.0
        ratio = projection_matrix.shape[0] ** -0.5
        projection = projection_matrix.expand(b_, h_, -1, -1).type_as(data)
        data_dash = torch.einsum("...id,...jd->...ij", (data_normalizer * data), projection)
        diag_data = data ** 2
        diag_data = torch.sum(diag_data, dim=-1)
        diag_data = (diag_data / 2.0) * (data_normalizer ** 2)
        diag_data = diag_data.unsqueeze(dim=-1)
        if is_query:
            data_dash = ratio * (torch.exp(data_dash - diag_data - torch.amax(
                data_dash, dim=-1, keepdim=True).detach()) + eps)
        else:
            data_dash = ratio * (torch.exp(data_dash - diag_data - torch.amax(
                data_dash, dim=(-1, -2), keepdim=True).detach()) + eps)
        return data_dash.type_as(data)

    def performer_attention(q, k, v, proj):
        q = softmax_kernel(q, projection_matrix=proj, is_query=True)
        k = softmax_kernel(k, projection_matrix=proj, is_query=False)
        k_cumsum = k.sum(dim=-2)
        D_inv = 1.0 / torch.einsum("...nd,...d->...n", q, k_cumsum.type_as(q))
        context = torch.einsum("...nd,...ne->...de", k, v)
        return torch.einsum("...de,...nd,...n->...ne", context, q, D_inv)

    def get_slopes(n):
        def get_slopes_power_of_2(n):
            start = 2 ** (-2 ** -(math.log2(n) - 3))
            ratio = start
            return [start * ratio ** i for i in range(n)]
        if math.log2(n).is_integer():
            return get_slopes_power_of_2(n)
        closest_power_of_2 = 2 ** math.floor(math.log2(n))
        return (get_slopes_power_of_2(closest_power_of_2)
                + get_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2])

    def alibi_bias(heads, n):
        slopes = torch.Tensor(get_slopes(heads))
        alibi = slopes.unsqueeze(1).unsqueeze(1) * torch.arange(n).unsqueeze(0).unsqueeze(
            0).expand(heads, -1, -1)
        alibi = alibi.view(heads, 1, n)
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        return mask.unsqueeze(0) + alibi

    def banded_attention(q, k, v, w):
        idx = torch.arange(q.shape[-2], device=q.device)
        band = (idx[None, :] - idx[:, None]).abs() <= w
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~band, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    def unfold_window_attention(q, k, v, w):
        k_pad = F.pad(k, (0, 0, w, w))
        v_pad = F.pad(v, (0, 0, w, w))
        k_win = k_pad.unfold(dimension=2, size=2 * w + 1, step=1)   # b h n d (2w+1)
        v_win = v_pad.unfold(2, 2 * w + 1, 1)
        valid = F.pad(torch.ones(q.shape[-2], dtype=torch.bool), (w, w)).unfold(0, 2 * w + 1, 1)
        scores = torch.einsum("bhnd,bhndw->bhnw", q, k_win) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~valid, torch.finfo(scores.dtype).min)
        attn = scores.softmax(dim=-1)
        return torch.einsum("bhnw,bhndw->bhnd", attn, v_win)

    def chunk(hidden_states, window_overlap):
        # Longformer: overlapping chunks of size 2w with overlap w, as a strided view
        hidden_states = hidden_states.view(
            hidden_states.size(0), torch.div(hidden_states.size(1), (window_overlap * 2),
                                             rounding_mode="trunc"),
            window_overlap * 2, hidden_states.size(2))
        chunk_size = list(hidden_states.size())
        chunk_size[1] = chunk_size[1] * 2 - 1
        chunk_stride = list(hidden_states.stride())
        chunk_stride[1] = chunk_stride[1] // 2
        return hidden_states.as_strided(size=chunk_size, stride=chunk_stride)

    q = normal(torch, rng, b, h, n, d) * 0.5
    k = normal(torch, rng, b, h, n, d) * 0.5
    v = normal(torch, rng, b, h, n, d)
    res["linear"] = linear_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    res["causal_linear"] = causal_linear_attention(q, k, v)
    proj = gaussian_orthogonal_random_matrix(16, d)
    proj_fixed = gaussian_orthogonal_random_matrix(12, d, scaling=1)
    res["proj"] = proj
    res["proj_orthogonal"] = [bool(torch.allclose(proj_fixed[:d] @ proj_fixed[:d].t(),
                                                  d * torch.eye(d), atol=1e-4))]
    res["performer"] = performer_attention(q, k, v, proj)
    exact = F.scaled_dot_product_attention(q, k, v)
    res["performer_err"] = (res["performer"] - exact).abs().mean()
    res["slopes"] = get_slopes(6)
    bias = alibi_bias(h, n)
    res["alibi"] = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    manual = torch.softmax(q @ k.transpose(-1, -2) * d ** -0.5 + bias, dim=-1) @ v
    res["alibi_manual"] = manual
    w = 2
    band = banded_attention(q, k, v, w)
    res["banded"] = band
    res["unfold_window"] = unfold_window_attention(q, k, v, w)
    flat = k.reshape(b * h, n, d)
    chunks = chunk(flat, 3)
    res["chunks_meta"] = list(chunks.shape) + list(chunks.stride()) + [chunks.is_contiguous()]
    res["chunks"] = chunks.contiguous()
    res["chunk_shares_storage"] = [chunks.data_ptr() == flat.data_ptr()]

    # HF Longformer's sliding-chunk scores: strided chunks, a pad-and-view skew, the band
    # written into new_zeros by slices, the corners masked in place with where
    def pad_and_transpose_last_two_dims(x, padding):
        x = F.pad(x, padding)
        return x.view(*x.size()[:-2], x.size(-1), x.size(-2))

    def mask_invalid_locations(input_tensor, affected_seq_len):
        beginning_mask_2d = input_tensor.new_ones(affected_seq_len, affected_seq_len + 1).tril(
        ).flip(dims=[0])
        beginning_mask = beginning_mask_2d[None, :, None, :]
        ending_mask = beginning_mask.flip(dims=(1, 3))
        beginning_input = input_tensor[:, :affected_seq_len, :, : affected_seq_len + 1]
        beginning_mask = beginning_mask.expand(beginning_input.size())
        input_tensor[:, :affected_seq_len, :, : affected_seq_len + 1] = torch.full_like(
            beginning_input, -float("inf")).where(beginning_mask.bool(), beginning_input)
        ending_input = input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1):]
        ending_mask = ending_mask.expand(ending_input.size())
        input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1):] = torch.full_like(
            ending_input, -float("inf")).where(ending_mask.bool(), ending_input)

    def sliding_chunks_query_key_matmul(query, key, w):
        batch_size, seq_len, num_heads, head_dim = query.size()
        chunks_count = torch.div(seq_len, w, rounding_mode="trunc") - 1
        query = query.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        key = key.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        query, key = chunk(query, w), chunk(key, w)
        chunked = torch.einsum("bcxd,bcyd->bcxy", (query, key))
        chunked = pad_and_transpose_last_two_dims(chunked, padding=(0, 0, 0, 1))
        scores = chunked.new_zeros((batch_size * num_heads, chunks_count + 1, w, w * 2 + 1))
        scores[:, :-1, :, w:] = chunked[:, :, :w, : w + 1]
        scores[:, -1, :, w:] = chunked[:, -1, w:, : w + 1]
        scores[:, 1:, :, :w] = chunked[:, :, -(w + 1): -1, w + 1:]
        scores[:, 0, 1:w, 1:w] = chunked[:, 0, : w - 1, 1 - w:]
        scores = scores.view(batch_size, num_heads, seq_len, 2 * w + 1).transpose(2, 1)
        mask_invalid_locations(scores, w)
        return scores

    ql = (q * 1.0).requires_grad_()
    kl = (k * 1.0).requires_grad_()
    band_scores = sliding_chunks_query_key_matmul(ql.transpose(1, 2), kl.transpose(1, 2), 3)
    res["longformer_scores"] = band_scores
    res["longformer_meta"] = [type(band_scores.grad_fn).__name__, list(band_scores.shape)]
    probs = band_scores.float().softmax(dim=-1)
    (probs * torch.arange(7.0)).sum().backward()
    res["longformer_grads"] = [ql.grad, kl.grad]

    # gradients through the other windows and kernels
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    total = (unfold_window_attention(qg, kg, vg, 2).sin().sum()
             + causal_linear_attention(qg, kg, vg).cos().sum()
             + performer_attention(qg, kg, vg, proj).square().sum()
             + chunk(kg.reshape(b * h, n, d), 3).exp().sum()
             + linear_attention(qg.transpose(1, 2), kg.transpose(1, 2), vg.transpose(1, 2)
                                ).tanh().sum())
    total.backward()
    res["window_grads"] = [qg.grad, kg.grad, vg.grad]

    # BLOOM's ALiBi: int32 powers of a float base, positions from the padding mask's cumsum,
    # added to the scores by baddbmm, softmax in float32
    def build_alibi_tensor(attention_mask, num_heads, dtype):
        batch_size, seq_length = attention_mask.shape
        closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
        base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))),
                            device=attention_mask.device, dtype=torch.float32)
        powers = torch.arange(1, 1 + closest_power_of_2, device=attention_mask.device,
                              dtype=torch.int32)
        slopes = torch.pow(base, powers)
        if closest_power_of_2 != num_heads:
            extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))),
                                      device=attention_mask.device, dtype=torch.float32)
            num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
            extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2,
                                        device=attention_mask.device, dtype=torch.int32)
            slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
        arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
        alibi = slopes[..., None] * arange_tensor
        return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)

    heads6 = 6
    attention_mask = torch.ones(b, n, dtype=torch.long)
    attention_mask[1, :3] = 0                                   # left padding
    alibi6 = build_alibi_tensor(attention_mask, heads6, torch.float32)
    res["bloom_alibi"] = alibi6
    q6 = normal(torch, rng, b * heads6, n, d)
    k6 = normal(torch, rng, b * heads6, d, n)
    scores6 = alibi6.baddbmm(batch1=q6, batch2=k6, beta=1.0, alpha=1.0 / math.sqrt(d))
    scores6 = scores6.view(b, heads6, n, n)
    causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    pad = ~attention_mask.bool()[:, None, None, :]
    scores6 = torch.masked_fill(scores6, causal | pad, torch.finfo(scores6.dtype).min)
    res["bloom_probs"] = F.softmax(scores6, dim=-1, dtype=torch.float32).to(torch.float32)

    class Block(nn.Module):
        def __init__(self, dim, heads, kind):
            super().__init__()
            self.heads, self.kind = heads, kind
            self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
            self.to_out = nn.Linear(dim, dim)
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(approximate="tanh"),
                                    nn.Linear(2 * dim, dim))
            self.register_buffer("alibi", alibi_bias(heads, n), persistent=False)

        def forward(self, x):
            bsz, seq, dim = x.shape
            qkv = self.to_qkv(self.norm1(x)).chunk(3, dim=-1)
            q, k, v = (t.view(bsz, seq, self.heads, -1).transpose(1, 2) for t in qkv)
            if self.kind == "linear":
                out = causal_linear_attention(q, k, v)
            else:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.alibi[:, :seq, :seq])
            out = out.transpose(1, 2).reshape(bsz, seq, dim)
            x = x + self.to_out(out)
            return x + self.ff(self.norm2(x))

    class LM(nn.Module):
        def __init__(self, vocab=11, dim=16):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.blocks = nn.ModuleList([Block(dim, 4, "linear"), Block(dim, 4, "alibi")])
            self.head = nn.Linear(dim, vocab, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, idx):
            x = self.emb(idx)
            for blk in self.blocks:
                x = blk(x)
            return self.head(x)

    model = LM()
    fill_(torch, model, rng, 0.3)
    res["tied"] = [model.head.weight is model.emb.weight, len(list(model.parameters()))]
    idx = torch.from_numpy(rng.integers(0, 11, (3, n + 1)))
    inputs, targets = idx[:, :-1], idx[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    res["losses"] = []
    for _ in range(4):
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["emb_grad"] = model.emb.weight.grad
    res["qkv_weight"] = model.blocks[0].to_qkv.weight
    return res


# -------------------------------------------------------------------------- Reformer LSH attention

def lsh_attention_program(torch):
    """Reformer's LSH self-attention as the reference implementations write it: random
    rotations, argmax hashing over [xR, -xR], sort by (bucket, position), gather into chunks
    with expanded indices, attend within a chunk and the one before it with self-masking and
    logsumexp, undo the sort by a second argsort (a custom autograd Function with index_select
    and scatter), combine the hash rounds; reversible residual blocks; trained with Adam."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(253)
    res = {}
    batch, seqlen, dim = 2, 16, 8
    n_buckets, n_hashes = 4, 2
    TOKEN_SELF_ATTN_VALUE = -5e4

    def sort_key_val(t1, t2, dim=-1):
        values, indices = t1.sort(dim=dim)
        t2 = t2.expand_as(t1)
        return values, t2.gather(dim, indices)

    def batched_index_select(values, indices):
        last_dim = values.shape[-1]
        return values.gather(1, indices[:, :, None].expand(-1, -1, last_dim))

    def max_neg_value(tensor):
        return -torch.finfo(tensor.dtype).max

    def look_one_back(x):
        x_extra = torch.cat([x[:, -1:, ...], x[:, :-1, ...]], dim=1)
        return torch.cat([x, x_extra], dim=2)

    rotations = torch.from_numpy(rng.standard_normal((1, dim, n_hashes, n_buckets // 2))
                                 .astype(np.float32))

    def hash_vectors(vecs):
        batch_size = vecs.shape[0]
        random_rotations = rotations.expand(batch_size, -1, -1, -1)
        rotated_vecs = torch.einsum("btf,bfhi->bhti", vecs, random_rotations)
        rotated_vecs = torch.cat([rotated_vecs, -rotated_vecs], dim=-1)
        buckets = torch.argmax(rotated_vecs, dim=-1)
        offsets = torch.arange(n_hashes, device=vecs.device)
        offsets = torch.reshape(offsets * n_buckets, (1, -1, 1))
        return torch.reshape(buckets + offsets, (batch_size, -1,))

    class ReverseSort(torch.autograd.Function):
        @staticmethod
        def forward(ctx, out_vectors, logits, sorted_bucket_idx, undo_sorted_bucket_idx):
            with torch.no_grad():
                ctx.sorted_bucket_idx = sorted_bucket_idx
                expanded = undo_sorted_bucket_idx.unsqueeze(-1).expand(out_vectors.shape)
                out_vectors = torch.gather(out_vectors, 2, expanded)
                logits = torch.gather(logits, 2, undo_sorted_bucket_idx)
            return out_vectors, logits

        @staticmethod
        def backward(ctx, grad_out_vectors, grad_logits):
            sorted_bucket_idx = ctx.sorted_bucket_idx
            expanded = sorted_bucket_idx.unsqueeze(-1).expand(grad_out_vectors.shape)
            grad_out_vectors = torch.gather(grad_out_vectors, 2, expanded)
            grad_logits = torch.gather(grad_logits, 2, sorted_bucket_idx)
            return grad_out_vectors, grad_logits, None, None

    def lsh_attend(qk, v):
        batch_size, seqlen_, dim_ = qk.shape
        buckets = hash_vectors(qk)
        total_hashes = n_hashes
        ticker = torch.arange(total_hashes * seqlen_, device=qk.device).unsqueeze(0).expand_as(
            buckets)
        buckets_and_t = seqlen_ * buckets + (ticker % seqlen_)
        buckets_and_t = buckets_and_t.detach()
        sbuckets_and_t, sticker = sort_key_val(buckets_and_t, ticker, dim=-1)
        _, undo_sort = sticker.sort(dim=-1)
        del ticker
        sbuckets_and_t = sbuckets_and_t.detach()
        sticker = sticker.detach()
        undo_sort = undo_sort.detach()
        st = sticker % seqlen_
        sqk = batched_index_select(qk, st)
        sv = batched_index_select(v, st)
        chunk_size = total_hashes * n_buckets
        bq_t = bkv_t = torch.reshape(st, (batch_size, chunk_size, -1))
        bqk = torch.reshape(sqk, (batch_size, chunk_size, -1, dim_))
        bv = torch.reshape(sv, (batch_size, chunk_size, -1, dim_))
        bq = bqk
        bk = F.normalize(bqk, p=2, dim=-1).type_as(bq)
        bk, bv = look_one_back(bk), look_one_back(bv)
        bkv_t = look_one_back(bkv_t)
        dots = torch.einsum("bhie,bhje->bhij", bq, bk) * (dim_ ** -0.5)
        masked_value = max_neg_value(dots)
        causal = bq_t[:, :, :, None] < bkv_t[:, :, None, :]
        dots.masked_fill_(causal, masked_value)
        self_mask = bq_t[:, :, :, None] == bkv_t[:, :, None, :]
        dots.masked_fill_(self_mask, TOKEN_SELF_ATTN_VALUE)
        dots_logsumexp = torch.logsumexp(dots, dim=-1, keepdim=True)
        dots = torch.exp(dots - dots_logsumexp).type_as(dots)
        bo = torch.einsum("buij,buje->buie", dots, bv)
        so = torch.reshape(bo, (batch_size, -1, dim_))
        slogits = torch.reshape(dots_logsumexp, (batch_size, -1,))
        # undo the sort, the lucidrains way (gather) and the HF way (a custom Function)
        o = batched_index_select(so, undo_sort)
        logits = slogits.gather(1, undo_sort)
        o_hf, logits_hf = ReverseSort.apply(so.view(batch_size, 1, -1, dim_),
                                            slogits.view(batch_size, 1, -1),
                                            sticker.view(batch_size, 1, -1),
                                            undo_sort.view(batch_size, 1, -1))
        o = torch.reshape(o, (batch_size, total_hashes, seqlen_, dim_))
        logits = torch.reshape(logits, (batch_size, total_hashes, seqlen_, 1))
        probs = torch.exp(logits - torch.logsumexp(logits, dim=1, keepdim=True))
        out = torch.sum(o * probs, dim=1)
        out_hf = (o_hf.view(batch_size, total_hashes, seqlen_, dim_)
                  * torch.softmax(logits_hf.view(batch_size, total_hashes, seqlen_, 1), dim=1)
                  ).sum(dim=1)
        return out, out_hf, buckets, undo_sort

    x = normal(torch, rng, batch, seqlen, dim)
    out, out_hf, buckets, undo_sort = lsh_attend(x, x * 0.5)
    res["buckets"] = buckets
    res["undo_sort"] = undo_sort
    res["lsh_out"] = out
    res["lsh_out_hf"] = out_hf
    res["bucket_counts"] = torch.bincount(buckets.flatten(), minlength=n_hashes * n_buckets)
    # scatter the sorted rows back instead of gathering by the inverse permutation
    perm = buckets[0, :seqlen].argsort(stable=True)
    sorted_rows = torch.index_select(x[0], 0, perm)
    back = torch.zeros_like(sorted_rows).scatter_(0, perm.unsqueeze(-1).expand(-1, dim),
                                                   sorted_rows)
    res["scatter_back"] = [bool(torch.equal(back, x[0]))]
    res["index_copy_back"] = torch.empty_like(sorted_rows).index_copy_(0, perm, sorted_rows)

    class LSHSelfAttention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.toqk = nn.Linear(dim, dim, bias=False)
            self.tov = nn.Linear(dim, dim, bias=False)
            self.to_out = nn.Linear(dim, dim)

        def forward(self, x):
            qk, v = self.toqk(x), self.tov(x)
            out, out_hf, _, _ = lsh_attend(qk, v)
            return self.to_out(out + out_hf)

    class FeedForward(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))

        def forward(self, x):
            return self.net(x)

    class ReversibleBlock(nn.Module):
        def __init__(self, f, g):
            super().__init__()
            self.f, self.g = f, g

        def forward(self, x):
            x1, x2 = torch.chunk(x, 2, dim=2)
            y1 = x1 + self.f(x2)
            y2 = x2 + self.g(y1)
            return torch.cat([y1, y2], dim=2)

        def inverse(self, y):
            y1, y2 = torch.chunk(y, 2, dim=2)
            with torch.no_grad():
                x2 = y2 - self.g(y1)
                x1 = y1 - self.f(x2)
            return torch.cat([x1, x2], dim=2)

    class Reformer(nn.Module):
        def __init__(self, vocab=9, dim=8):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList([ReversibleBlock(LSHSelfAttention(dim), FeedForward(dim))
                                         for _ in range(2)])
            self.norm = nn.LayerNorm(dim * 2)
            self.out = nn.Linear(dim * 2, vocab)

        def forward(self, idx):
            x = self.emb(idx)
            x = torch.cat([x, x], dim=-1)
            for layer in self.layers:
                x = layer(x)
            return self.out(self.norm(x))

    def stable_argsort(vector, dim):
        # HF Reformer: a stable argsort by scaling with the length and adding positions
        scale_offset = torch.arange(vector.shape[dim], device=vector.device).view(1, 1, -1)
        scale_offset = scale_offset.expand(vector.shape)
        scaled_vector = vector.shape[dim] * vector + (scale_offset % vector.shape[dim])
        return torch.argsort(scaled_vector, dim=dim)

    heads_buckets = buckets.view(batch, 1, -1)
    sorted_idx = stable_argsort(heads_buckets, dim=-1)
    undo_idx = torch.arange(sorted_idx.shape[-1]).expand_as(sorted_idx).new_empty(
        sorted_idx.shape)
    undo_idx.scatter_(-1, sorted_idx, torch.arange(sorted_idx.shape[-1]).expand_as(sorted_idx))
    res["hf_sorted_idx"] = sorted_idx
    res["hf_undo_matches"] = [bool(torch.equal(undo_idx.view(batch, -1), undo_sort))]
    res["hf_sorted_matches"] = [bool(torch.equal(
        sorted_idx.view(batch, -1), buckets.argsort(dim=-1, stable=True)))]

    # HF's reversible function: no activations kept, inputs rebuilt from outputs in backward
    class RevFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, blocks, *params):
            with torch.no_grad():
                for blk in blocks:
                    x = blk(x)
            ctx.save_for_backward(x.detach())
            ctx.blocks = blocks
            return x

        @staticmethod
        def backward(ctx, grad_y):
            (y,) = ctx.saved_tensors
            for blk in ctx.blocks[::-1]:
                y1, y2 = torch.chunk(y, 2, dim=2)
                g1, g2 = torch.chunk(grad_y, 2, dim=2)
                with torch.enable_grad():
                    y1 = y1.detach().requires_grad_(True)
                    gy1 = blk.g(y1)
                    torch.autograd.backward(gy1, g2, retain_graph=True)
                with torch.no_grad():
                    x2 = y2 - gy1
                    del y2, gy1
                    g1 = g1 + y1.grad
                    y1.grad = None
                with torch.enable_grad():
                    x2.requires_grad_(True)
                    fx2 = blk.f(x2)
                    torch.autograd.backward(fx2, g1, retain_graph=True)
                with torch.no_grad():
                    x1 = y1 - fx2
                    del y1, fx2
                    g2 = g2 + x2.grad
                    x2.grad = None
                    y = torch.cat([x1, x2.detach()], dim=2)
                    grad_y = torch.cat([g1, g2], dim=2)
            return (grad_y, None) + (None,) * (len(ctx.needs_input_grad) - 2)

    # dropout replayed from a saved generator state, as the reversible backward must
    state = torch.get_rng_state()
    first = F.dropout(torch.ones(64), 0.5, training=True)
    torch.set_rng_state(state)
    second = F.dropout(torch.ones(64), 0.5, training=True)
    res["replayed_dropout"] = [bool(torch.equal(first, second)),
                               _name(state.dtype), sorted(set(first.tolist()))]

    model = Reformer()
    fill_(torch, model, rng, 0.3)
    idx = torch.from_numpy(rng.integers(0, 9, (batch, seqlen)))
    h = torch.cat([model.emb(idx)] * 2, dim=-1).detach().requires_grad_()
    y_rev = RevFunction.apply(h, list(model.layers), *model.layers.parameters())
    y_ref = h
    for layer in model.layers:
        y_ref = layer(y_ref)
    res["rev_same"] = [bool(torch.allclose(y_rev, y_ref, atol=1e-6))]
    y_rev.square().sum().backward()
    res["rev_input_grad"] = h.grad
    res["rev_param_grads"] = [p.grad.clone() for p in model.layers.parameters()]
    ref_h = h.detach().requires_grad_()
    y_ref = ref_h
    for layer in model.layers:
        y_ref = layer(y_ref)
    ref_grad = torch.autograd.grad(y_ref.square().sum(), ref_h)[0]
    res["rev_matches_autograd"] = [bool(torch.allclose(ref_grad, h.grad, atol=1e-4))]
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        h = torch.cat([model.emb(idx)] * 2, dim=-1)
        y = model.layers[0](h)
        res["inverse_err"] = (model.layers[0].inverse(y) - h).abs().max()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res["losses"] = []
    for _ in range(4):
        logits = model(idx)
        loss = F.cross_entropy(logits.transpose(1, 2), idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["toqk_grad"] = model.layers[0].f.toqk.weight.grad
    res["tov_grad"] = model.layers[1].f.tov.weight.grad
    return res



# ----------------------------------------------------------------- Nystromformer / Linformer / FNet

def token_mixers_program(torch):
    """Nystromformer (segment-mean landmarks, the iterative Moore-Penrose pseudo-inverse, a
    depthwise conv residual over the values), Linformer (keys and values projected along the
    sequence by einsum), and FNet (Fourier mixing: the real part of a 2-D FFT) as token mixers
    in one encoder, trained a few steps with Adam and a cosine schedule."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(255)
    res = {}
    b, n, dim, heads = 2, 12, 16, 4

    def iterative_inv(mat, n_iter=6):
        eye = torch.eye(mat.size(-1), device=mat.device)
        K = mat
        V = 1 / torch.max(torch.sum(K, dim=-2)) * K.transpose(-1, -2)
        for _ in range(n_iter):
            KV = torch.matmul(K, V)
            V = torch.matmul(0.25 * V, 13 * eye - torch.matmul(KV, 15 * eye - torch.matmul(
                KV, 7 * eye - KV)))
        return V

    class NystromAttention(nn.Module):
        def __init__(self, dim, heads, num_landmarks=4, conv_kernel=3):
            super().__init__()
            self.heads, self.m = heads, num_landmarks
            self.head_dim = dim // heads
            self.scale = self.head_dim ** -0.5
            self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
            self.to_out = nn.Linear(dim, dim)
            self.res_conv = nn.Conv2d(heads, heads, (conv_kernel, 1),
                                      padding=(conv_kernel // 2, 0), groups=heads, bias=False)

        def forward(self, x):
            bsz, seq, _ = x.shape
            q, k, v = self.to_qkv(x).chunk(3, dim=-1)
            q, k, v = map(lambda t: t.reshape(bsz, seq, self.heads, -1).permute(0, 2, 1, 3),
                          (q, k, v))
            q = q * self.scale
            q_landmarks = q.reshape(bsz, self.heads, self.m, seq // self.m, -1).mean(dim=-2)
            k_landmarks = k.reshape(bsz, self.heads, self.m, seq // self.m, -1).mean(dim=-2)
            kernel_1 = F.softmax(torch.matmul(q, k_landmarks.transpose(-1, -2)), dim=-1)
            kernel_2 = F.softmax(torch.matmul(q_landmarks, k_landmarks.transpose(-1, -2)),
                                 dim=-1)
            kernel_3 = F.softmax(torch.matmul(q_landmarks, k.transpose(-1, -2)), dim=-1)
            out = torch.matmul(torch.matmul(kernel_1, iterative_inv(kernel_2)),
                               torch.matmul(kernel_3, v))
            out = out + self.res_conv(v)
            out = out.transpose(1, 2).reshape(bsz, seq, -1)
            return self.to_out(out)

    class LinformerAttention(nn.Module):
        def __init__(self, dim, seq_len, heads, k=4):
            super().__init__()
            self.heads = heads
            self.to_q = nn.Linear(dim, dim, bias=False)
            self.to_kv = nn.Linear(dim, dim * 2, bias=False)
            self.proj_k = nn.Parameter(torch.zeros(seq_len, k))
            self.proj_v = nn.Parameter(torch.zeros(seq_len, k))
            self.to_out = nn.Linear(dim, dim)

        def forward(self, x):
            bsz, seq, d = x.shape
            q = self.to_q(x)
            keys, values = self.to_kv(x).chunk(2, dim=-1)
            keys = torch.einsum("bnd,nk->bkd", keys, self.proj_k[:seq])
            values = torch.einsum("bnd,nk->bkd", values, self.proj_v[:seq])
            q = q.reshape(bsz, seq, self.heads, -1).transpose(1, 2)
            keys, values = (t.reshape(bsz, -1, self.heads, d // self.heads).transpose(1, 2)
                            for t in (keys, values))
            attn = F.scaled_dot_product_attention(q, keys, values)
            return self.to_out(attn.transpose(1, 2).reshape(bsz, seq, d))

    class FourierMixing(nn.Module):
        def forward(self, x):
            return torch.fft.fft(torch.fft.fft(x, dim=-1), dim=-2).real

    class Layer(nn.Module):
        def __init__(self, mixer):
            super().__init__()
            self.mixer = mixer
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.ff = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))

        def forward(self, x):
            x = self.norm1(x + self.mixer(x))
            return self.norm2(x + self.ff(x))

    model = nn.Sequential(Layer(NystromAttention(dim, heads)),
                          Layer(LinformerAttention(dim, n, heads)),
                          Layer(FourierMixing()))
    fill_(torch, model, rng, 0.25)
    x = normal(torch, rng, b, n, dim)
    target = normal(torch, rng, b, n, dim)

    # the pseudo-inverse iteration against the exact one, on a softmax kernel
    kern = F.softmax(normal(torch, rng, 2, 4, 4), dim=-1)
    res["pinv_iterative"] = iterative_inv(kern, 12)
    res["pinv_exact"] = torch.linalg.pinv(kern)
    res["fft2_same"] = [bool(torch.allclose(FourierMixing()(x), torch.fft.fft2(x).real,
                                            atol=1e-4))]
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-4)
    res["losses"], res["lrs"] = [], []
    for _ in range(4):
        out = model(x)
        loss = F.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
    res["res_conv_grad"] = model[0].mixer.res_conv.weight.grad
    res["proj_k_grad"] = model[1].mixer.proj_k.grad
    res["ff_grad"] = model[2].ff[0].weight.grad
    xg = x.clone().requires_grad_()
    FourierMixing()(xg).pow(2).mean().backward()
    res["fft_input_grad"] = xg.grad
    model.eval()
    with torch.no_grad():
        res["eval_out"] = model(x)
    return res

PROGRAMS = [linear_attention_program, lsh_attention_program, token_mixers_program]

# The reversible backward rebuilds each block's inputs by subtraction (x1 = y1 - f(x2)),
# which keeps float32's absolute, not relative, error of the activations: its parameter
# gradients (up to 35) differ by up to 3.3e-6 in their small elements.
TOLERANCES = {"lsh_attention_program": (1e-5, 1e-5)}


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
