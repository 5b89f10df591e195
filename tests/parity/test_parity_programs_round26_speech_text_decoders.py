"""Text and decoding programs written as openai/whisper, google T5 / HF transformers and the
guided-diffusion repositories write them in torch, run once with `torch` bound to ember and once
to PyTorch from the same NumPy weights and data: Whisper (an stft log-mel front end, sinusoidal
positions, a decoder with cross-attention whose KV cache is filled by forward hooks on the key
and value projections, suppress-token and timestamp logit filters, temperature fallback from a
compression-ratio heuristic), T5 / BERT / ELECTRA pretraining (log-spaced bidirectional
relative position buckets, T5's RMS norm with float32 variance under bfloat16 and float16
weights, span corruption with sentinels, 80/10/10 MLM masking, Gumbel-argmax generator
sampling and the replaced-token discriminator loss) and classifier-free guidance diffusion
(cosine schedule, v-prediction, conditioning dropout to a null embedding, DDIM with eta=0 and
eta>0 from fixed noise)."""

import math
import zlib

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _sinusoids(torch, length, channels, max_timescale=10000):
    """Whisper's sinusoidal position table."""
    log_timescale_increment = np.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2))
    scaled_time = torch.arange(length)[:, np.newaxis] * inv_timescales[np.newaxis, :]
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)


def whisper_program(torch):
    """A tiny Whisper: log-mel from stft, a conv/GELU encoder with sinusoidal positions, a
    decoder with masked self- and cross-attention using a hook-filled KV cache, greedy decoding
    with SuppressBlank / SuppressTokens / timestamp rules, and temperature fallback decided by
    the zlib compression ratio of the decoded tokens."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2611)
    n_fft, hop, n_mels, D, H, V = 32, 8, 6, 8, 2, 12
    eot, sot, no_ts, ts_begin = 1, 2, 3, 8      # tokens 8.. are timestamps

    audio = torch.from_numpy(rng.standard_normal(128).astype(np.float32) * 0.3)
    window = torch.hann_window(n_fft)
    stft = torch.stft(audio, n_fft, hop, window=window, return_complex=True)
    magnitudes = stft[..., :-1].abs() ** 2
    filters = torch.from_numpy(np.abs(rng.standard_normal((n_mels, n_fft // 2 + 1)))
                               .astype(np.float32))
    mel_spec = filters @ magnitudes
    log_spec = torch.clamp(mel_spec, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    mel = (log_spec + 4.0) / 4.0
    res = {"mel": mel}

    class MultiHeadAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query, self.key = nn.Linear(D, D), nn.Linear(D, D, bias=False)
            self.value, self.out = nn.Linear(D, D), nn.Linear(D, D)

        def forward(self, x, xa=None, mask=None, kv_cache=None):
            q = self.query(x)
            if kv_cache is None or xa is None or self.key not in kv_cache:
                k = self.key(x if xa is None else xa)
                v = self.value(x if xa is None else xa)
            else:
                k, v = kv_cache[self.key], kv_cache[self.value]
            n_batch, n_ctx, n_state = q.shape
            scale = (n_state // H) ** -0.25
            q = q.view(*q.shape[:2], H, -1).permute(0, 2, 1, 3) * scale
            k = k.view(*k.shape[:2], H, -1).permute(0, 2, 3, 1) * scale
            v = v.view(*v.shape[:2], H, -1).permute(0, 2, 1, 3)
            qk = q @ k
            if mask is not None:
                qk = qk + mask[:n_ctx, :n_ctx]
            w = F.softmax(qk.float(), dim=-1).to(q.dtype)
            return self.out((w @ v).permute(0, 2, 1, 3).flatten(start_dim=2))

    class Block(nn.Module):
        def __init__(self, cross):
            super().__init__()
            self.attn, self.attn_ln = MultiHeadAttention(), nn.LayerNorm(D)
            self.cross_attn = MultiHeadAttention() if cross else None
            self.cross_attn_ln = nn.LayerNorm(D) if cross else None
            self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
            self.mlp_ln = nn.LayerNorm(D)

        def forward(self, x, xa=None, mask=None, kv_cache=None):
            x = x + self.attn(self.attn_ln(x), mask=mask, kv_cache=kv_cache)
            if self.cross_attn:
                x = x + self.cross_attn(self.cross_attn_ln(x), xa, kv_cache=kv_cache)
            return x + self.mlp(self.mlp_ln(x))

    class Whisper(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv1d(n_mels, D, 3, padding=1)
            self.conv2 = nn.Conv1d(D, D, 3, stride=2, padding=1)
            self.register_buffer("positional_embedding", _sinusoids(torch, 16, D))
            self.enc_block, self.ln_post = Block(False), nn.LayerNorm(D)
            self.token_embedding = nn.Embedding(V, D)
            self.dec_pos = nn.Parameter(torch.empty(10, D))
            self.dec_block, self.ln = Block(True), nn.LayerNorm(D)
            mask = torch.empty(10, 10).fill_(-np.inf).triu_(1)
            self.register_buffer("mask", mask, persistent=False)

        def encoder(self, x):
            x = F.gelu(self.conv1(x))
            x = F.gelu(self.conv2(x)).permute(0, 2, 1)
            x = (x + self.positional_embedding[: x.shape[1]]).to(x.dtype)
            return self.ln_post(self.enc_block(x))

        def decoder(self, tokens, xa, kv_cache=None):
            offset = next(iter(kv_cache.values())).shape[1] if kv_cache else 0
            x = self.token_embedding(tokens) + self.dec_pos[offset: offset + tokens.shape[-1]]
            x = self.dec_block(x.to(xa.dtype), xa, mask=self.mask, kv_cache=kv_cache)
            x = self.ln(x)
            return (x @ torch.transpose(self.token_embedding.weight.to(x.dtype), 0, 1)).float()

        def install_kv_cache_hooks(self):
            cache, hooks = {}, []

            def save_to_cache(module, _, output):
                if module not in cache or output.shape[1] > 10:
                    cache[module] = output
                else:
                    cache[module] = torch.cat([cache[module], output], dim=1).detach()
                return cache[module]

            def install_hooks(layer):
                if isinstance(layer, MultiHeadAttention):
                    hooks.append(layer.key.register_forward_hook(save_to_cache))
                    hooks.append(layer.value.register_forward_hook(save_to_cache))

            self.dec_block.apply(install_hooks)
            return cache, hooks

    model = Whisper()
    fill_(torch, model, rng, 0.5)
    audio_features = model.encoder(mel.unsqueeze(0))
    res["audio_features"] = audio_features
    # one teacher-forced training step
    tokens = torch.tensor([[sot, 5, 6, 9, 4, eot]])
    logits = model.decoder(tokens[:, :-1], audio_features)
    loss = F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1), ignore_index=-100)
    loss.backward()
    res["loss"] = loss
    res["grads"] = [model.dec_pos.grad, model.conv1.weight.grad,
                    model.dec_block.cross_attn.key.weight.grad]

    def apply_filters(logits, toks, sample_begin):
        if toks.shape[1] == sample_begin:
            logits[:, [eot, 0]] = -np.inf                              # SuppressBlank
        logits[:, [no_ts]] = -np.inf                                    # SuppressTokens
        for k in range(toks.shape[0]):                                  # ApplyTimestampRules
            seq = [t for t in toks[k, sample_begin:].tolist()]
            last_was_ts = len(seq) >= 1 and seq[-1] >= ts_begin
            penult_was_ts = len(seq) < 2 or seq[-2] >= ts_begin
            if last_was_ts:
                if penult_was_ts:
                    logits[k, ts_begin:] = -np.inf
                else:
                    logits[k, :eot] = -np.inf
            timestamps = toks[k, sample_begin:][toks[k, sample_begin:].ge(ts_begin)]
            if timestamps.numel() > 0:
                logits[k, ts_begin: int(timestamps[-1]) + 1] = -np.inf
        if toks.shape[1] == sample_begin:
            logits[:, :ts_begin] = -np.inf
        logprobs = F.log_softmax(logits.float(), dim=-1)
        for k in range(toks.shape[0]):
            timestamp_logprob = logprobs[k, ts_begin:].logsumexp(dim=-1)
            max_text_token_logprob = logprobs[k, :ts_begin].max()
            if timestamp_logprob > max_text_token_logprob:
                logits[k, :ts_begin] = -np.inf
        return logits

    def decode(temperature, noise):
        cache, hooks = model.install_kv_cache_hooks()
        toks = torch.tensor([[sot]])
        sum_logprob = 0.0
        with torch.no_grad():
            for i in range(6):
                inp = toks if not cache else toks[:, -1:]
                logits = model.decoder(inp, audio_features, kv_cache=cache)[:, -1]
                logits = apply_filters(logits, toks, 1)
                if temperature == 0:
                    nxt = logits.argmax(dim=-1)
                else:
                    nxt = (logits / temperature + noise[i]).argmax(dim=-1)
                lp = F.log_softmax(logits.float(), dim=-1)
                sum_logprob += lp[torch.arange(lp.shape[0]), nxt].item()
                toks = torch.cat([toks, nxt[:, None]], dim=-1)
                if (toks[:, -1] == eot).all():
                    break
        for h in hooks:
            h.remove()
        text_bytes = bytes(toks[0].tolist()) * 3
        ratio = len(text_bytes) / len(zlib.compress(text_bytes))
        return toks[0].tolist(), sum_logprob / toks.shape[1], ratio, sorted(
            tuple(v.shape) for v in cache.values())

    gumbel = [torch.from_numpy(-np.log(-np.log(rng.uniform(1e-6, 1, (1, V)))).astype(np.float32))
              for _ in range(6)]
    attempts = []
    for t in (0.0, 0.2, 0.4, 0.6):
        toks, avg_lp, ratio, cache_shapes = decode(t, gumbel)
        attempts.append([t, avg_lp, ratio])
        res.setdefault("tokens", []).extend(toks)
        res["cache_shapes"] = [list(s) for s in cache_shapes]
        if ratio <= 2.4 and avg_lp >= -0.6:      # strict enough to fall back at least once
            break
    res["attempts"] = attempts
    return res


def _relative_position_bucket(torch, relative_position, bidirectional=True, num_buckets=32,
                              max_distance=128):
    """T5's log-spaced relative position buckets (HF transformers' formulation)."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact) * (num_buckets - max_exact)).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def t5_program(torch):
    """T5 span corruption on a one-layer encoder with relative position bias and T5LayerNorm
    (float32 variance, cast back to half/bfloat16 weights), the bucket table for both
    directions, a causal unidirectional bucket table, Adafactor-free AdamW steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2612)
    V, D, H, L = 24, 8, 2, 10
    sentinel0 = V - 1

    class T5LayerNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            if self.weight.dtype in [torch.float16, torch.bfloat16]:
                hidden_states = hidden_states.to(self.weight.dtype)
            return self.weight * hidden_states

    res = {}
    ctx = torch.arange(12, dtype=torch.long)[:, None]
    mem = torch.arange(12, dtype=torch.long)[None, :]
    res["buckets_bi"] = _relative_position_bucket(torch, mem - ctx, True, 8, 20)
    res["buckets_uni"] = _relative_position_bucket(torch, mem - ctx, False, 8, 20)
    res["buckets_dtype"] = [str(res["buckets_bi"].dtype).split(".")[-1]]

    ln = T5LayerNorm(D)
    x = normal(torch, rng, 2, 3, D) * 30
    for dt in (torch.float16, torch.bfloat16):
        ln_h = T5LayerNorm(D).to(dt)
        with torch.no_grad():
            ln_h.weight.mul_(torch.linspace(0.5, 1.5, D).to(dt))
        y = ln_h(x.to(dt))
        res[f"rms_{str(dt).split('.')[-1]}"] = y.float()
        res[f"rms_dtype_{str(dt).split('.')[-1]}"] = [str(y.dtype).split(".")[-1]]
        y32 = ln_h(x)
        res[f"rms_mixed_{str(dt).split('.')[-1]}"] = [str(y32.dtype).split(".")[-1]]
    res["rms_f32"] = ln(x)

    # span corruption with fixed spans
    seq = rng.integers(1, V - 4, (2, L))
    noise = np.zeros((2, L), dtype=bool)
    noise[0, 2:4] = noise[0, 7:8] = noise[1, 0:2] = noise[1, 5:7] = True
    noise_t = torch.from_numpy(noise)

    def sentinel_ids(mask):
        prev = F.pad(mask[:, :-1], (1, 0), value=False)
        first = mask & ~prev
        sentinel = torch.where(first, torch.cumsum(first.long(), dim=-1), 0)
        sentinel = torch.where(sentinel != 0, sentinel0 + 1 - sentinel, 0)
        sentinel -= (mask & ~first).long()
        return sentinel

    ids = torch.from_numpy(seq)
    inp_sent = sentinel_ids(noise_t)
    tgt_sent = sentinel_ids(~noise_t)
    inputs = [torch.where(inp_sent != 0, inp_sent, ids)[b][torch.where(inp_sent != 0, inp_sent,
                                                                       ids)[b] >= 0]
              for b in range(2)]
    targets = [torch.where(tgt_sent != 0, tgt_sent, ids)[b][torch.where(tgt_sent != 0, tgt_sent,
                                                                        ids)[b] >= 0]
               for b in range(2)]
    res["span_inputs"] = [t.tolist() for t in inputs][0] + [t.tolist() for t in inputs][1]
    res["span_targets"] = targets[0].tolist() + targets[1].tolist()
    enc_in = nn.utils.rnn.pad_sequence(inputs, batch_first=True, padding_value=0)
    labels = nn.utils.rnn.pad_sequence(targets, batch_first=True, padding_value=-100)

    emb = nn.Embedding(V, D)
    rel_bias = nn.Embedding(8, H)
    qkv, o = nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D, bias=False)
    ln1, ln2, head = T5LayerNorm(D), T5LayerNorm(D), nn.Linear(D, V, bias=False)
    mods = nn.ModuleList([emb, rel_bias, qkv, o, ln1, ln2, head])
    fill_(torch, mods, rng, 0.4)
    with torch.no_grad():
        ln1.weight.fill_(1.0)
    opt = torch.optim.AdamW(mods.parameters(), lr=3e-3)
    losses = []
    for _ in range(3):
        h = emb(enc_in)
        n = h.size(1)
        pos = torch.arange(n)
        bucket = _relative_position_bucket(torch, pos[None, :] - pos[:, None], True, 8, 20)
        bias = rel_bias(bucket).permute([2, 0, 1]).unsqueeze(0)
        pad = (enc_in == 0)[:, None, None, :]
        bias = bias + pad * torch.finfo(h.dtype).min
        q, k, v = qkv(ln1(h)).view(2, n, 3, H, D // H).permute(2, 0, 3, 1, 4).unbind(0)
        scores = torch.matmul(q, k.transpose(3, 2)) + bias
        attn = F.softmax(scores.float(), dim=-1).type_as(scores)
        h = h + o(torch.matmul(attn, v).transpose(1, 2).contiguous().view(2, n, D))
        dec_len = labels.size(1)
        logits = head(ln2(h)[:, :1].expand(2, dec_len, D) * (D ** -0.5)
                      + emb(labels.clamp(min=0)))
        loss = F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["rel_bias_grad"] = rel_bias.weight.grad
    res["ln1_grad"] = ln1.weight.grad
    return res


def electra_mlm_program(torch):
    """BERT 80/10/10 masking from NumPy draws (special tokens excluded through a
    special_tokens_mask, -100 labels), an ELECTRA generator sampled by argmax of logits plus fixed
    Gumbel noise under no_grad, the discriminator's replaced-token BCE over attention-masked
    positions, and the weighted sum of both losses with a shared embedding."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2613)
    V, D, B, L = 20, 8, 3, 9
    cls_id, sep_id, pad_id, mask_id = 1, 2, 0, 3
    ids = rng.integers(5, V, (B, L))
    ids[:, 0] = cls_id
    lens = [9, 7, 5]
    for b, n in enumerate(lens):
        ids[b, n - 1] = sep_id
        ids[b, n:] = pad_id
    input_ids = torch.from_numpy(ids)
    attention_mask = (input_ids != pad_id).long()
    special = (input_ids == cls_id) | (input_ids == sep_id) | (input_ids == pad_id)

    probability_matrix = torch.full(input_ids.shape, 0.3)
    probability_matrix.masked_fill_(special, value=0.0)
    u = [torch.from_numpy(rng.random((B, L)).astype(np.float32)) for _ in range(3)]
    masked_indices = u[0] < probability_matrix
    labels = input_ids.clone()
    labels[~masked_indices] = -100
    inputs = input_ids.clone()
    indices_replaced = (u[1] < 0.8) & masked_indices
    inputs[indices_replaced] = mask_id
    indices_random = (u[2] < 0.5) & masked_indices & ~indices_replaced
    random_words = torch.from_numpy(rng.integers(0, V, (B, L)))
    inputs[indices_random] = random_words[indices_random]
    res = {"inputs": inputs, "labels": labels}

    embeddings = nn.Embedding(V, D, padding_idx=pad_id)
    gen = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True,
                                     activation="gelu")
    gen_head = nn.Linear(D, V)
    disc = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
    disc_head = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.Linear(D, 1))
    mods = nn.ModuleList([embeddings, gen, gen_head, disc, disc_head])
    fill_(torch, mods, rng, 0.4)
    opt = torch.optim.Adam(mods.parameters(), lr=2e-3)
    pad_mask = attention_mask == 0
    losses = []
    for step in range(3):
        h = gen(embeddings(inputs), src_key_padding_mask=pad_mask)
        gen_logits = gen_head(h)
        mlm_loss = F.cross_entropy(gen_logits.transpose(1, 2), labels)
        with torch.no_grad():
            gumbel = torch.from_numpy(
                -np.log(-np.log(rng.uniform(1e-9, 1, (B, L, V)))).astype(np.float32))
            sampled = (gen_logits.detach() + gumbel).argmax(dim=-1)
            generated = inputs.clone()
            mask_pos = labels != -100
            generated[mask_pos] = sampled[mask_pos]
            is_replaced = (generated != input_ids) & mask_pos
            is_replaced = is_replaced | (~mask_pos & (generated != input_ids))
        dh = disc(embeddings(generated), src_key_padding_mask=pad_mask)
        disc_logits = disc_head(dh).squeeze(-1)
        active = attention_mask.view(-1, dh.shape[1]) == 1
        disc_loss = nn.BCEWithLogitsLoss()(disc_logits[active], is_replaced[active].float())
        loss = mlm_loss + 50.0 * disc_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append([mlm_loss.item(), disc_loss.item()])
        res.setdefault("generated", []).extend(generated.flatten().tolist())
    res["losses"] = losses
    res["emb_grad_pad_row"] = embeddings.weight.grad[pad_id]
    res["emb_grad"] = embeddings.weight.grad
    acc = ((torch.sigmoid(disc_logits) > 0.5) == is_replaced)[active].float().mean()
    res["disc_acc"] = acc
    return res


def cfg_ddim_program(torch):
    """Classifier-free guidance: a class-conditional MLP denoiser trained with v-prediction on a
    cosine schedule with conditioning dropped to a null embedding from fixed NumPy draws, then
    DDIM sampling (eta=0 and eta=0.5 with fixed noise) combining conditional and unconditional
    predictions in one doubled batch."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2614)
    T, n_cls, Dx, B = 50, 3, 4, 6

    def cosine_beta_schedule(timesteps, s=0.008):
        steps = timesteps + 1
        x = torch.linspace(0, timesteps, steps, dtype=torch.float64)
        alphas_cumprod = torch.cos(((x / timesteps) + s) / (1 + s) * math.pi * 0.5) ** 2
        alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
        betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
        return torch.clip(betas, 0, 0.999)

    betas = cosine_beta_schedule(T).float()
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
    alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
    res = {"betas": betas, "acp_prev": alphas_cumprod_prev}

    def extract(a, t, x_shape):
        b, *_ = t.shape
        out = a.gather(-1, t)
        return out.reshape(b, *((1,) * (len(x_shape) - 1)))

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.class_emb = nn.Embedding(n_cls + 1, 8)     # last row is the null class
            self.time_mlp = nn.Sequential(nn.Linear(8, 8), nn.SiLU())
            self.net = nn.Sequential(nn.Linear(Dx + 8, 16), nn.Mish(), nn.Linear(16, Dx))

        def forward(self, x, t, y):
            half = 4
            freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
            args = t[:, None].float() * freqs[None]
            temb = self.time_mlp(torch.cat([args.sin(), args.cos()], dim=-1))
            return self.net(torch.cat([x, temb + self.class_emb(y)], dim=-1))

    model = Denoiser()
    fill_(torch, model, rng, 0.4)
    ema = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in range(4):
        x0 = normal(torch, rng, B, Dx)
        y = torch.from_numpy(rng.integers(0, n_cls, B))
        drop = torch.from_numpy(rng.random(B) < 0.3)
        y = torch.where(drop, torch.full_like(y, n_cls), y)
        t = torch.from_numpy(rng.integers(0, T, B))
        noise = normal(torch, rng, B, Dx)
        sa = extract(alphas_cumprod.sqrt(), t, x0.shape)
        s1a = extract((1 - alphas_cumprod).sqrt(), t, x0.shape)
        x_t = sa * x0 + s1a * noise
        v_target = sa * noise - s1a * x0
        pred = model(x_t, t, y)
        loss = F.mse_loss(pred, v_target, reduction="none").mean(dim=list(range(1, 2)))
        snr = alphas_cumprod[t] / (1 - alphas_cumprod[t])
        weight = torch.clamp(snr, max=5.0) / (snr + 1)
        loss = (loss * weight).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        losses.append(loss.item())
    res["losses"] = losses
    res["ema_n_averaged"] = ema.n_averaged
    res["ema_w"] = ema.module.net[0].weight

    @torch.inference_mode()
    def ddim_sample(net, y, eta, noises, guidance=3.0, steps=5):
        times = torch.linspace(-1, T - 1, steps=steps + 1).int().tolist()[::-1]
        pairs = list(zip(times[:-1], times[1:]))
        x = noises[0]
        null = torch.full_like(y, n_cls)
        for i, (time, time_next) in enumerate(pairs):
            tt = torch.full((y.shape[0],), time, dtype=torch.long)
            both = net(torch.cat([x, x]), torch.cat([tt, tt]), torch.cat([y, null]))
            v_c, v_u = both.chunk(2)
            v = torch.lerp(v_u, v_c, guidance)
            a = alphas_cumprod[time]
            x0 = a.sqrt() * x - (1 - a).sqrt() * v
            x0 = x0.clamp(-3.0, 3.0)
            eps = ((1 - a).sqrt() * x + a.sqrt() * v) if False else (x - a.sqrt() * x0) / (
                1 - a).sqrt()
            if time_next < 0:
                x = x0
                continue
            a_next = alphas_cumprod[time_next]
            sigma = eta * ((1 - a / a_next) * (1 - a_next) / (1 - a)).sqrt()
            c = (1 - a_next - sigma ** 2).sqrt()
            x = x0 * a_next.sqrt() + c * eps + sigma * noises[i + 1]
        return x

    y = torch.tensor([0, 1, 2, 1])
    noises = [normal(torch, rng, 4, Dx) for _ in range(6)]
    s0 = ddim_sample(ema.module, y, 0.0, noises)
    s1 = ddim_sample(ema.module, y, 0.5, noises)
    res["ddim_eta0"] = s0
    res["ddim_eta05"] = s1
    res["inference_flags"] = [s0.is_inference(), s0.requires_grad]
    return res


PROGRAMS = [whisper_program, t5_program, electra_mlm_program, cfg_ddim_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
