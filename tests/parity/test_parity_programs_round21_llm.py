"""Programs from modern LLM training and inference, written as such repositories write them
by hand (llama, nanoGPT, gpt-fast, Hugging Face generation utilities), run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights and data: a grouped-query
attention decoder (rotary embeddings by polar/view_as_complex and by cos/sin with rotate_half,
RMSNorm, SwiGLU, SDPA with enable_gqa and boolean or HF float masks, weight tying, AdamW param
groups, warm-up cosine LambdaLR, a tied state dict's round trip); KV-cached generation
(index_copy_ and cat caches, left-padded batches, top-k/top-p/repetition-penalty processors,
eos bookkeeping); speculative decoding and contrastive search. Retrieval and the bf16
fine-tune are in test_parity_programs_round21_llm_training.py, the focused tests of what the
programs found in test_parity_programs_round21_llm_fixes.py.

Sampling in the programs takes its noise from NumPy (gpt-fast's exponential-race sampling)
so that both libraries follow one trajectory; where a program draws from a torch.Generator it
returns only what does not depend on the stream (ember's streams are not PyTorch's)."""

import functools
import inspect
import io
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]

# --- a llama-style decoder, shared by the programs ------------------------------------------

def _llama_modules(torch):
    """RMSNorm, SwiGLU feed-forward, GQA attention and a decoder, as llama/HF write them."""
    nn, F = torch.nn, torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            output = self._norm(x.float()).type_as(x)
            return output * self.weight

    class FeedForward(nn.Module):
        def __init__(self, dim, hidden_dim, multiple_of=8):
            super().__init__()
            hidden_dim = int(2 * hidden_dim / 3)
            hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
            self.w1 = nn.Linear(dim, hidden_dim, bias=False)
            self.w2 = nn.Linear(hidden_dim, dim, bias=False)
            self.w3 = nn.Linear(dim, hidden_dim, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    return RMSNorm, FeedForward


def precompute_freqs_cis(torch, dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(torch, xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def rotate_half(torch, x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(torch, q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(torch, q) * sin)
    k_embed = (k * cos) + (rotate_half(torch, k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(
        batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def _decoder(torch, rope, vocab=23, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, max_len=16):
    """A llama decoder: `rope` is "polar" (llama's complex rotary, SDPA with enable_gqa and an
    explicit boolean mask) or "rotate_half" (HF's cos/sin, repeat_interleave and is_causal)."""
    nn, F = torch.nn, torch.nn.functional
    RMSNorm, FeedForward = _llama_modules(torch)
    head_dim = dim // n_heads

    class RotaryEmbedding(nn.Module):
        def __init__(self, dim, base=10000):
            super().__init__()
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)

        @torch.no_grad()
        def forward(self, x, position_ids):
            inv_freq_expanded = self.inv_freq[None, :, None].float().expand(
                position_ids.shape[0], -1, 1)
            position_ids_expanded = position_ids[:, None, :].float()
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_rep = n_heads // n_kv_heads
            self.wq = nn.Linear(dim, n_heads * head_dim, bias=False)
            self.wk = nn.Linear(dim, n_kv_heads * head_dim, bias=False)
            self.wv = nn.Linear(dim, n_kv_heads * head_dim, bias=False)
            self.wo = nn.Linear(n_heads * head_dim, dim, bias=False)

        def forward(self, x, rotary, mask, cache=None):
            bsz, seqlen, _ = x.shape
            xq = self.wq(x).view(bsz, seqlen, n_heads, head_dim)
            xk = self.wk(x).view(bsz, seqlen, n_kv_heads, head_dim)
            xv = self.wv(x).view(bsz, seqlen, n_kv_heads, head_dim)
            if rope == "polar":
                xq, xk = apply_rotary_emb(torch, xq, xk, freqs_cis=rotary)
                xq, xk, xv = (t.transpose(1, 2) for t in (xq, xk, xv))
            else:
                xq, xk, xv = (t.transpose(1, 2) for t in (xq, xk, xv))
                xq, xk = apply_rotary_pos_emb(torch, xq, xk, *rotary)
            if cache is not None:
                xk, xv = cache(xk, xv)
            if rope == "polar":
                out = F.scaled_dot_product_attention(xq, xk, xv, attn_mask=mask,
                                                     enable_gqa=True)
            else:
                keys = torch.repeat_interleave(xk, dim=1, repeats=self.n_rep)
                values = torch.repeat_interleave(xv, dim=1, repeats=self.n_rep)
                out = F.scaled_dot_product_attention(xq, keys, values, attn_mask=mask,
                                                     is_causal=mask is None)
            out = out.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
            return self.wo(out)

    class TransformerBlock(nn.Module):
        def __init__(self, layer_id):
            super().__init__()
            self.layer_id = layer_id
            self.attention = Attention()
            self.feed_forward = FeedForward(dim, 4 * dim)
            self.attention_norm = RMSNorm(dim, eps=1e-5)
            self.ffn_norm = RMSNorm(dim, eps=1e-5) if rope == "polar" else nn.RMSNorm(dim, 1e-5)

        def forward(self, x, rotary, mask, cache=None):
            h = x + self.attention(self.attention_norm(x), rotary, mask, cache)
            return h + self.feed_forward(self.ffn_norm(h))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList(TransformerBlock(i) for i in range(n_layers))
            self.norm = RMSNorm(dim, eps=1e-5)
            self.output = nn.Linear(dim, vocab, bias=False)
            self.output.weight = self.tok_embeddings.weight      # weight tying
            if rope == "polar":
                self.register_buffer("freqs_cis", precompute_freqs_cis(torch, head_dim, max_len),
                                     persistent=False)
            else:
                self.rotary_emb = RotaryEmbedding(head_dim)
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("wo.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layers))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, tokens, mask=None, start_pos=0, caches=None, position_ids=None):
            _bsz, seqlen = tokens.shape
            h = self.tok_embeddings(tokens)
            if rope == "polar":
                rotary = self.freqs_cis[start_pos: start_pos + seqlen]
            else:
                if position_ids is None:
                    position_ids = torch.arange(start_pos, start_pos + seqlen).unsqueeze(0)
                rotary = self.rotary_emb(h, position_ids)
            for i, layer in enumerate(self.layers):
                h = layer(h, rotary, mask, None if caches is None else caches[i])
            return self.output(self.norm(h)).float()

    return Transformer()


def _configure_optimizers(torch, model, weight_decay, learning_rate, betas):
    """nanoGPT's configure_optimizers: decay 2-D weights only, fused AdamW on CUDA alone."""
    param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
    nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
    optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                    {"params": nodecay_params, "weight_decay": 0.0}]
    fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
    use_fused = fused_available and next(model.parameters()).device.type == "cuda"
    extra_args = dict(fused=True) if use_fused else dict()
    optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)
    counts = [sum(p.numel() for p in decay_params), sum(p.numel() for p in nodecay_params)]
    return optimizer, counts + [fused_available]


def get_cosine_schedule_with_warmup(torch, optimizer, num_warmup_steps, num_training_steps,
                                    num_cycles=0.5, last_epoch=-1):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(
            max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda, last_epoch)

# --- 1. GQA decoder pre-training ------------------------------------------------------------

def gqa_decoder_program(torch, rope):
    """Next-token pre-training of a tied-embedding GQA decoder with padded batches."""
    F = torch.nn.functional
    rng = np.random.default_rng(21)
    res = {}
    vocab, batch, seqlen = 23, 3, 10
    model = _decoder(torch, rope, vocab=vocab)
    fill_(torch, model, rng, scale=0.2)
    res["tied"] = [model.output.weight is model.tok_embeddings.weight,
                   len(list(model.parameters())), len(model.state_dict()),
                   sum(p.numel() for p in model.parameters())]
    optimizer, counts = _configure_optimizers(torch, model, 0.1, 3e-3, (0.9, 0.95))
    scheduler = get_cosine_schedule_with_warmup(torch, optimizer, 2, 6)
    res["groups"] = counts + [len(optimizer.param_groups)]
    data = torch.from_numpy(rng.integers(1, vocab, size=(batch, seqlen + 1)))
    lengths = torch.tensor([seqlen + 1, 8, 6])
    keep = torch.arange(seqlen + 1)[None, :] < lengths[:, None]
    targets = data[:, 1:].masked_fill(~keep[:, 1:], -1)
    inputs = data[:, :-1].masked_fill(~keep[:, :-1], 0)
    if rope == "polar":
        causal = torch.ones(seqlen, seqlen, dtype=torch.bool).tril(diagonal=0)
        mask = causal[None, None] & keep[:, None, None, :-1]
        # a fully padded query row would give NaN: let padded queries see themselves
        mask = mask | torch.eye(seqlen, dtype=torch.bool)
        res["mask"] = [str(tuple(mask.shape)), int(mask.sum())]
    else:
        # HF's 4-D float mask: finfo.min above the diagonal and on padded keys
        min_dtype = torch.finfo(torch.float32).min
        cache_position = torch.arange(seqlen)
        mask = torch.full((seqlen, seqlen), fill_value=min_dtype, dtype=torch.float32)
        mask = torch.triu(mask, diagonal=1)
        mask *= torch.arange(seqlen) > cache_position.reshape(-1, 1)
        mask = mask[None, None, :, :].expand(batch, 1, -1, -1).clone()
        padding_mask = (mask + keep[:, None, None, :-1]) == 0
        mask = mask.masked_fill(padding_mask, min_dtype)
        # rows that see nothing attend everywhere (AttentionMaskConverter._unmask_unattended)
        mask = torch.mul(mask, ~torch.all(mask == min_dtype, dim=-1, keepdim=True))
        res["mask"] = [str(tuple(mask.shape)), int((mask == 0).sum()),
                       int(torch.signbit(mask).sum())]
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    losses, lrs, norms = [], [], []
    for _ in range(6):
        logits = model(inputs, mask=mask)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1, label_smoothing=0.1)
        z_loss = 1e-4 * torch.logsumexp(logits, dim=-1)[targets != -1].pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        (loss + z_loss).backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True))
        optimizer.step()
        lrs.append(scheduler.get_last_lr()[0])
        scheduler.step()
        losses.append(loss.detach())
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    saved = optimizer.state_dict()
    res["optimizer_state"] = sorted(saved["state"][0]) + [
        str(len(saved["state"])), str(saved["param_groups"][1]["params"]),
        str(optimizer.param_groups[0]["initial_lr"])]
    # a state dict keeps both tied names; loading it restores the one shared tensor
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    twin = _decoder(torch, rope, vocab=vocab)
    result = twin.load_state_dict(state, strict=True)
    res["reload"] = sorted(k for k in state if "output" in k or "tok_" in k) + [
        str(result.missing_keys), str(result.unexpected_keys),
        str(twin.output.weight is twin.tok_embeddings.weight),
        str(torch.equal(twin.output.weight, model.tok_embeddings.weight))]
    with torch.no_grad(), torch.nn.attention.sdpa_kernel(
            [torch.nn.attention.SDPBackend.MATH]):
        res["reloaded_logits"] = twin(inputs, mask=mask)[:, -1]
    res["losses"] = torch.stack(losses)
    res["grad_norms"] = torch.stack(norms)
    res["lrs"] = lrs
    res["tok_embeddings"] = model.tok_embeddings.weight
    res["norm_weight"] = model.norm.weight
    res["logits_dtype"] = [_name(logits.dtype), str(tuple(logits.shape))]
    return res


# --- 2. KV-cached generation ----------------------------------------------------------------

def _logits_processors(torch):
    """Hugging Face's repetition penalty, top-k and top-p warpers."""
    def repetition_penalty(input_ids, scores, penalty):
        score = torch.gather(scores, 1, input_ids)
        score = torch.where(score < 0, score * penalty, score / penalty)
        scores.scatter_(1, input_ids, score)
        return scores

    def top_k(scores, k, filter_value=-float("Inf")):
        top_k = min(k, scores.size(-1))
        indices_to_remove = scores < torch.topk(scores, top_k)[0][..., -1, None]
        return scores.masked_fill(indices_to_remove, filter_value)

    def top_p(scores, p, filter_value=-float("Inf"), min_tokens_to_keep=1):
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        sorted_indices_to_remove = cumulative_probs <= (1 - p)
        sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
        indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices,
                                                             sorted_indices_to_remove)
        return scores.masked_fill(indices_to_remove, filter_value)

    return repetition_penalty, top_k, top_p


def kv_cache_generation_program(torch):
    """Prefill then decode token by token through static (index_copy_) and dynamic (cat)
    caches; sampling by gpt-fast's exponential race with NumPy noise; eos bookkeeping."""
    F = torch.nn.functional
    rng = np.random.default_rng(22)
    res = {}
    vocab, batch, max_len, n_kv, head_dim = 23, 3, 16, 2, 4
    model = _decoder(torch, "polar", vocab=vocab, max_len=max_len)
    fill_(torch, model, rng, scale=0.5)
    model.eval()
    repetition_penalty, top_k, top_p = _logits_processors(torch)

    class StaticCache:
        def __init__(self):
            self.k = torch.zeros(batch, n_kv, max_len, head_dim)
            self.v = torch.zeros(batch, n_kv, max_len, head_dim)
            self.input_pos = None

        def __call__(self, k_val, v_val):
            self.k.index_copy_(2, self.input_pos, k_val)
            self.v.index_copy_(2, self.input_pos, v_val)
            return self.k, self.v

    class DynamicCache:
        def __init__(self):
            self.k = self.v = None

        def __call__(self, k_val, v_val):
            if self.k is None:
                self.k, self.v = k_val, v_val
            else:
                self.k = torch.cat([self.k, k_val], dim=-2)
                self.v = torch.cat([self.v, v_val], dim=-2)
            return self.k, self.v

    causal_mask = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))

    def multinomial_sample_one_no_sync(probs_sort, q):
        return torch.argmax(probs_sort / q, dim=-1, keepdim=True).to(dtype=torch.int)

    @torch.inference_mode()
    def generate(prompt, max_new_tokens, eos_token_id, pad_token_id, temperature):
        static = [StaticCache() for _ in model.layers]
        dynamic = [DynamicCache() for _ in model.layers]
        input_ids = prompt.clone()
        unfinished = torch.ones(batch, dtype=torch.long)
        eos = torch.tensor(eos_token_id)
        pos, tokens, agree, trace = 0, prompt, [], []
        for step in range(max_new_tokens):
            seqlen = tokens.shape[1]
            input_pos = torch.arange(pos, pos + seqlen, dtype=torch.long)
            for cache in static:
                cache.input_pos = input_pos
            mask = causal_mask[None, None, input_pos]
            logits = model(tokens, mask=mask, start_pos=pos, caches=static)
            logits_dyn = model(tokens, mask=mask[..., : pos + seqlen], start_pos=pos,
                               caches=dynamic)
            agree.append((logits - logits_dyn).abs().max())
            pos += seqlen
            scores = logits[:, -1, :] / max(temperature, 1e-5)
            scores = repetition_penalty(input_ids, scores, 1.3)
            scores = top_p(top_k(scores, 8), 0.9)
            probs = F.softmax(scores, dim=-1)
            q = torch.from_numpy(rng.exponential(size=probs.shape).astype(np.float32))
            next_tokens = multinomial_sample_one_no_sync(probs, q).squeeze(-1).long()
            next_tokens = next_tokens * unfinished + pad_token_id * (1 - unfinished)
            input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
            unfinished = unfinished & ~torch.isin(next_tokens, eos)
            trace.append([int((probs > 0).sum()), bool(unfinished.any()),
                          bool((unfinished == 0).all())])
            if unfinished.max() == 0:
                break
            tokens = next_tokens[:, None]
        return input_ids, torch.stack(agree), trace, probs

    def causal_mask_with_cache_position(attention_mask, sequence_length, target_length,
                                        cache_position, batch_size):
        """HF's 4-D float mask for a step: finfo.min on future and padded keys."""
        min_dtype = torch.finfo(torch.float32).min
        causal_mask = torch.full((sequence_length, target_length), fill_value=min_dtype)
        if sequence_length != 1:
            causal_mask = torch.triu(causal_mask, diagonal=1)
        causal_mask *= torch.arange(target_length) > cache_position.reshape(-1, 1)
        causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1)
        causal_mask = causal_mask.clone()
        mask_length = attention_mask.shape[-1]
        padding_mask = causal_mask[:, :, :, :mask_length] + attention_mask[:, None, None, :]
        padding_mask = padding_mask == 0
        causal_mask[:, :, :, :mask_length] = causal_mask[:, :, :, :mask_length].masked_fill(
            padding_mask, min_dtype)
        return causal_mask

    hf_model = _decoder(torch, "rotate_half", vocab=vocab, max_len=max_len)
    fill_(torch, hf_model, rng, scale=0.5)

    @torch.no_grad()
    def greedy_left_padded(input_ids, attention_mask, max_new_tokens, use_cache):
        """Batched greedy decoding of left-padded prompts, positions from the mask."""
        caches = [DynamicCache() for _ in hf_model.layers] if use_cache else None
        cache_position = torch.arange(input_ids.shape[1])
        step_ids, scores = input_ids, []
        for _ in range(max_new_tokens):
            position_ids = attention_mask.long().cumsum(-1) - 1
            position_ids.masked_fill_(attention_mask == 0, 1)
            position_ids = position_ids[:, -step_ids.shape[1]:]
            mask = causal_mask_with_cache_position(attention_mask, step_ids.shape[1],
                                                   attention_mask.shape[1], cache_position,
                                                   input_ids.shape[0])
            logits = hf_model(step_ids, mask=mask, caches=caches, position_ids=position_ids)
            next_token_logits = logits[:, -1, :].clone().float()
            scores.append(F.log_softmax(next_token_logits, dim=-1))
            next_tokens = torch.argmax(next_token_logits, dim=-1)
            input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
            attention_mask = torch.cat(
                [attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=-1)
            if use_cache:
                step_ids, cache_position = next_tokens[:, None], cache_position[-1:] + 1
            else:
                step_ids, cache_position = input_ids, torch.arange(input_ids.shape[1])
        return input_ids, torch.stack(scores, dim=1)

    lengths = np.array([5, 3, 4])
    prompt_mask = torch.from_numpy((np.arange(5)[None, :] >= 5 - lengths[:, None]).astype(
        np.int64))
    padded = torch.from_numpy(rng.integers(3, vocab, size=(batch, 5))) * prompt_mask
    cached_ids, cached_scores = greedy_left_padded(padded, prompt_mask, 5, use_cache=True)
    full_ids, full_scores = greedy_left_padded(padded, prompt_mask, 5, use_cache=False)
    res["left_padded"] = cached_ids.flatten().tolist() + [bool(torch.equal(cached_ids,
                                                                           full_ids))]
    res["left_padded_scores"] = cached_scores
    # a few ulps of scores ~5 (rounding noise, as below), or O(1) if the cache is wrong
    res["cached_vs_full"] = [bool((cached_scores - full_scores).abs().max() < 1e-5)]

    prompt = torch.from_numpy(rng.integers(3, vocab, size=(batch, 5)))
    ids, agree, trace, probs = generate(prompt, 10, eos_token_id=[1, 2], pad_token_id=0,
                                        temperature=0.7)
    res["ids"] = ids.flatten().tolist()
    res["ids_meta"] = [_name(ids.dtype), ids.is_inference(), ids.requires_grad,
                       probs.is_inference()]
    # static and dynamic caches attend over different key lengths: their logits differ by
    # rounding noise (~1e-6, which BLAS kernels set per CPU), or by O(1) if a cache is wrong
    res["cache_agreement"] = [bool((agree < 1e-5).all()), bool((agree > 0).any())]
    res["trace"] = [str(t) for t in trace]
    res["last_probs"] = probs
    lengths = torch.where((ids == 1) | (ids == 2), torch.arange(ids.shape[1]), ids.shape[1])
    res["first_eos"] = lengths.min(dim=1).values.tolist()
    # a seeded Generator's draws: the sample lies in the nucleus, repeats for one seed
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    s1 = torch.multinomial(probs, num_samples=4, replacement=True, generator=g1)
    s2 = torch.multinomial(probs, num_samples=4, replacement=True, generator=g2)
    res["multinomial"] = [bool(torch.equal(s1, s2)), bool((probs.gather(1, s1) > 0).all()),
                          _name(s1.dtype), str(tuple(s1.shape))]
    many = torch.multinomial(probs[0], 20000, replacement=True, generator=g1)
    frequencies = torch.bincount(many, minlength=vocab).float() / 20000
    # within 0.02 of the probabilities: over five standard errors (sd <= 0.0036)
    res["frequencies"] = [bool(((frequencies - probs[0]).abs() < 0.02).all()),
                          bool((frequencies[probs[0] == 0] == 0).all())]
    return res


# --- 3. speculative decoding ----------------------------------------------------------------

def speculative_decoding_program(torch):
    """gpt-fast's speculative decoding of a target model with a smaller draft model: draft k
    tokens, score them in one target pass, accept with probability min(1, q/p), resample from
    the clamped residual. Once with NumPy uniforms (compared step by step), once with a seeded
    torch.Generator against a greedy target (whose output no stream can change)."""
    rng = np.random.default_rng(23)
    res = {}
    vocab = 19
    target = _decoder(torch, "rotate_half", vocab=vocab, dim=16, n_layers=2, max_len=32)
    draft = _decoder(torch, "rotate_half", vocab=vocab, dim=8, n_layers=1, n_heads=2,
                     n_kv_heads=1, max_len=32)
    fill_(torch, target, rng, scale=0.6)
    fill_(torch, draft, rng, scale=0.6)

    def logits_to_probs(logits, temperature=1.0, top_k=None):
        logits = logits / max(temperature, 1e-5)
        if top_k is not None:
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            pivot = v.select(-1, -1).unsqueeze(-1)
            logits = torch.where(logits < pivot, -float("Inf"), logits)
        return torch.nn.functional.softmax(logits, dim=-1)

    def sample(probs, noise):
        if noise is None:       # a torch.Generator
            return torch.multinomial(probs, 1, generator=gen)
        q = torch.from_numpy(noise.exponential(size=probs.shape).astype(np.float32))
        return torch.argmax(probs / q, dim=-1, keepdim=True)

    def speculative_decode(seq, k, noise, **sampling_kwargs):
        draft_tokens, draft_probs = [], []
        cur = seq
        for _ in range(k):
            probs = logits_to_probs(draft(cur[None])[0, -1], **sampling_kwargs)
            tok = sample(probs, noise)
            draft_tokens.append(tok)
            draft_probs.append(probs)
            cur = torch.cat([cur, tok])
        draft_tokens = torch.cat(draft_tokens)
        target_logits = target(cur[None])[0, -(k + 1):]
        target_probs = logits_to_probs(target_logits, **sampling_kwargs)
        draft_probs = torch.stack(draft_probs)
        p = draft_probs[torch.arange(0, k), draft_tokens]
        q = target_probs[torch.arange(0, k), draft_tokens]
        accept_draft_prob = torch.minimum(torch.ones(()), q[:k] / p)
        if noise is None:
            u = torch.rand(accept_draft_prob.shape, generator=gen)
        else:
            u = torch.from_numpy(noise.random(k).astype(np.float32))
        rejected_locations = (u > accept_draft_prob).nonzero()
        if rejected_locations.shape[0] == 0:
            last_token = sample(target_probs[-1], noise)
            return torch.cat([draft_tokens, last_token]), k
        accept_length = rejected_locations[0].item()
        new = torch.clamp(target_probs[accept_length] - draft_probs[accept_length], min=0)
        new = new / new.sum()
        next_token = sample(new, noise)
        return torch.cat([draft_tokens[:accept_length], next_token]), accept_length

    @torch.no_grad()
    def generate(prompt, new_tokens, noise, **sampling_kwargs):
        seq = prompt.clone()
        accepted = []
        while seq.numel() < prompt.numel() + new_tokens:
            new, n = speculative_decode(seq, 3, noise, **sampling_kwargs)
            seq = torch.cat([seq, new])
            accepted.append(n)
        return seq[: prompt.numel() + new_tokens], torch.tensor(accepted)

    prompt = torch.from_numpy(rng.integers(0, vocab, size=6))
    seq, accepted = generate(prompt, 12, np.random.default_rng(5), temperature=0.8)
    res["sampled"] = seq.tolist()
    res["accepted"] = accepted.tolist()
    res["accepted_meta"] = [_name(accepted.dtype), int(accepted.cumsum(0)[-1]),
                            float(accepted.float().mean())]

    # greedy target: speculative output equals plain greedy decoding whatever the stream
    gen = torch.Generator().manual_seed(11)
    seq_g, _ = generate(prompt, 10, None, top_k=1)
    greedy = prompt.clone()
    with torch.no_grad():
        for _ in range(10):
            nxt = target(greedy[None])[0, -1].argmax(dim=-1, keepdim=True)
            greedy = torch.cat([greedy, nxt])
    res["greedy"] = seq_g.tolist()
    res["greedy_same"] = [bool(torch.equal(seq_g, greedy)), _name(seq_g.dtype)]

    # contrastive search (HF): top-k candidates scored by probability minus their hidden
    # state's largest cosine similarity to the context, hidden states from a forward hook
    captured = {}
    handle = target.norm.register_forward_hook(lambda m, i, o: captured.__setitem__("h", o))

    @torch.no_grad()
    def contrastive_search(prefix, steps, top_k=4, alpha=0.6):
        seq, chosen = prefix[None], []
        for _ in range(steps):
            logits = target(seq)
            context_hidden = captured["h"]
            probs = logits[:, -1].softmax(-1)
            top_k_probs, top_k_ids = torch.topk(probs, dim=-1, k=top_k)
            candidates = torch.cat([seq.repeat_interleave(top_k, dim=0),
                                    top_k_ids.view(-1, 1)], dim=1)
            target(candidates)
            next_hidden = captured["h"][:, -1:, :]
            context = context_hidden.repeat_interleave(top_k, dim=0)
            norm_context_hidden = context / context.norm(dim=2, keepdim=True)
            norm_next_hidden = next_hidden / next_hidden.norm(dim=2, keepdim=True)
            cosine_matrix = torch.matmul(norm_context_hidden,
                                         norm_next_hidden.transpose(1, 2)).squeeze(-1)
            degeneration_penalty, _ = torch.max(cosine_matrix, dim=-1)
            contrastive_score = (1.0 - alpha) * top_k_probs.view(-1) - alpha * \
                degeneration_penalty
            contrastive_score = torch.stack(torch.split(contrastive_score, top_k))
            best, selected_idx = contrastive_score.max(dim=-1)
            next_token = top_k_ids[range(len(top_k_ids)), selected_idx]
            seq = torch.cat([seq, next_token[:, None]], dim=-1)
            chosen.append(best)
        return seq[0], torch.cat(chosen)

    contrastive, best_scores = contrastive_search(prompt, 6)
    handle.remove()
    res["contrastive"] = contrastive.tolist() + [len(target._forward_hooks)]
    res["contrastive_scores"] = best_scores

    # ties: argmax picks the first maximum; topk of tied values gives the tied values
    tied = torch.tensor([0.5, 2.0, 1.0, 2.0, -1.0, 2.0])
    values, indices = torch.topk(tied, 3)
    res["ties"] = [int(tied.argmax()), int(torch.argmax(tied.view(2, 3), dim=1)[0]),
                   values.tolist()[0], sorted(indices.tolist())[0], _name(indices.dtype)]
    return res

PROGRAMS = [functools.partial(gqa_decoder_program, rope="polar"),
            functools.partial(gqa_decoder_program, rope="rotate_half"),
            kv_cache_generation_program, speculative_decoding_program]


def _program_id(program):
    if isinstance(program, functools.partial):
        return f"{program.func.__name__}-{program.keywords['rope']}"
    return program.__name__


@pytest.mark.parametrize("program", PROGRAMS, ids=_program_id)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=1e-5, atol=1e-6)
