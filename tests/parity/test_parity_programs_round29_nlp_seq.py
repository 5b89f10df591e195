"""More NLP architectures of round 29, as their reference repositories write them in torch, run
with `torch` bound to ember and to PyTorch from the same NumPy weights and data: BigBird's block
sparse attention (random blocks drawn by NumPy, ``torch_gather_b2`` by flattened index_select,
global/sliding/random key blocks), ELMo's character CNN with highway layers, a projected biLSTM
over packed sequences and a scalar mix, ByT5's byte vocabulary with T5's RMS layer norm, fairseq's
label-smoothed cross entropy with ignore_index and incremental decoding whose cached keys are
reordered by index_select on the beam order, and Funnel-Transformer's pooling (``cat(axis=)``,
avg/max pools with ceil_mode). _fixes pins what they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def bigbird_program(torch):
    """A BigBird-style block sparse attention: random key blocks per query block drawn with
    NumPy (as HF's ``_bigbird_block_rand_mask``) and turned into a long tensor, gathered by
    HF's ``torch_gather_b2`` (``torch.div(..., rounding_mode="floor")`` shifts, index_select on
    the flattened blocks), global first/last query blocks attending everywhere, middle blocks
    attending to global, sliding and random blocks; gradients and two Adam steps, and the
    dense equivalent through the same block mask."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2964)
    B, nh, dh, bs, nb, r = 2, 2, 4, 2, 6, 1
    L, H = bs * nb, nh * dh

    def torch_gather_b2(params, indices):
        num_indices_to_gather = indices.shape[-2] * indices.shape[-1]
        num_indices_to_pick_from = params.shape[2]
        shift = torch.arange(indices.shape[0] * indices.shape[1] * num_indices_to_gather,
                             device=indices.device)
        indices_shift = torch.div(shift, num_indices_to_gather,
                                  rounding_mode="floor") * num_indices_to_pick_from
        flattened_indices = indices.view(-1) + indices_shift
        flattened_params = params.reshape(-1, params.shape[-2], params.shape[-1])
        out_flattened = flattened_params.index_select(0, flattened_indices)
        return out_flattened.reshape(params.shape[:2] + (num_indices_to_gather,)
                                     + params.shape[3:])

    rand_attn = np.zeros((nb - 2, r), dtype=np.int32)
    for i in range(1, nb - 1):
        allowed = np.array([j for j in range(1, nb - 1) if abs(j - i) > 1], dtype=np.int32)
        rand_attn[i - 1] = np.random.default_rng(i).permutation(allowed)[:r]
    rand = torch.tensor(np.stack([np.stack([rand_attn] * nh)] * B), dtype=torch.long)

    proj = nn.Linear(H, 3 * H)
    out_proj = nn.Linear(H, H)
    params = [*proj.parameters(), *out_proj.parameters()]
    fill_(torch, params, rng, 0.3)
    # SGD, not Adam: the key bias's true gradient is 0 (softmax ignores a per-row constant),
    # and Adam would turn its float32 rounding noise into whole steps
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    x = normal(torch, rng, B, L, H)

    def attend(x):
        q, k, v = proj(x).view(B, L, 3, nh, dh).permute(2, 0, 3, 1, 4).unbind(0)
        bq, bk, bv = (t.view(B, nh, nb, bs, dh) for t in (q, k, v))
        scale = dh ** -0.5
        first = F.softmax(torch.einsum("bhqd,bhkd->bhqk", bq[:, :, 0], k) * scale, -1) @ v
        last = F.softmax(torch.einsum("bhqd,bhkd->bhqk", bq[:, :, -1], k) * scale, -1) @ v
        gk = torch_gather_b2(bk[:, :, 1:-1], rand - 1).view(B, nh, nb - 2, r * bs, dh)
        gv = torch_gather_b2(bv[:, :, 1:-1], rand - 1).view(B, nh, nb - 2, r * bs, dh)
        mid_k = torch.cat([bk[:, :, :1].expand(-1, -1, nb - 2, -1, -1),
                           bk[:, :, :-2], bk[:, :, 1:-1], bk[:, :, 2:],
                           gk, bk[:, :, -1:].expand(-1, -1, nb - 2, -1, -1)], dim=3)
        mid_v = torch.cat([bv[:, :, :1].expand(-1, -1, nb - 2, -1, -1),
                           bv[:, :, :-2], bv[:, :, 1:-1], bv[:, :, 2:],
                           gv, bv[:, :, -1:].expand(-1, -1, nb - 2, -1, -1)], dim=3)
        s = torch.einsum("bhnqd,bhnkd->bhnqk", bq[:, :, 1:-1], mid_k) * scale
        # a middle block next to a global one sees that block twice: mask the duplicates
        dup = torch.zeros(nb - 2, mid_k.shape[3], dtype=torch.bool)
        dup[0, bs:2 * bs] = True
        dup[-1, 3 * bs:4 * bs] = True
        s = s.masked_fill(dup[:, None, :], float("-inf"))
        mid = torch.einsum("bhnqk,bhnkd->bhnqd", F.softmax(s, dim=-1), mid_v)
        ctx = torch.cat([first.unsqueeze(2), mid, last.unsqueeze(2)], dim=2)
        return out_proj(ctx.reshape(B, nh, L, dh).transpose(1, 2).reshape(B, L, H)), (q, k, v)

    res = {"loss": []}
    for _ in range(2):
        out, (q, k, v) = attend(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss)
    # the dense attention through the same block mask gives the same context
    mask = torch.zeros(nb, nb, dtype=torch.bool)
    mask[0] = mask[-1] = mask[:, 0] = mask[:, -1] = True
    for i in range(1, nb - 1):
        mask[i, i - 1:i + 2] = True
        mask[i, torch.from_numpy(rand_attn[i - 1].astype(np.int64))] = True
    full = mask.repeat_interleave(bs, 0).repeat_interleave(bs, 1)
    with torch.no_grad():
        out, (q, k, v) = attend(x)
        dense = (q @ k.transpose(-1, -2) * dh ** -0.5).masked_fill(~full, float("-inf"))
        ref = out_proj((dense.softmax(-1) @ v).transpose(1, 2).reshape(B, L, H))
    res["out"] = out
    res["dense_gap"] = (out - ref).abs().max()
    res["rand"] = rand
    res["params"] = params
    return res


def elmo_program(torch):
    """AllenNLP's ELMo token embedder: char ids with sentence boundaries added by
    ``new_zeros`` and a NumPy loop over lengths, a character embedding with padding, convolutions
    max-pooled over characters, highway layers whose gate bias starts at 1 (``bias[d:].data
    .fill_(1)``), a projection, a biLSTM with proj_size over packed sequences (enforce_sorted=
    False), and the ScalarMix (softmax of cat'ed scalar parameters, torch.split into ones, gamma);
    two SGD steps with gradient clipping by value."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2965)
    n_chars, max_chars, char_dim, d, proj = 30, 6, 4, 8, 6
    filters = [(1, 4), (2, 4), (3, 6)]
    n_filters = sum(f[1] for f in filters)
    bos, eos = 28, 29

    class Highway(nn.Module):
        def __init__(self, input_dim, num_layers):
            super().__init__()
            self._input_dim = input_dim
            self._layers = nn.ModuleList([nn.Linear(input_dim, input_dim * 2)
                                          for _ in range(num_layers)])
            for layer in self._layers:
                layer.bias[input_dim:].data.fill_(1)

        def forward(self, inputs):
            current_input = inputs
            for layer in self._layers:
                projected_input = layer(current_input)
                linear_part = current_input
                nonlinear_part, gate = projected_input.chunk(2, dim=-1)
                nonlinear_part = F.relu(nonlinear_part)
                gate = torch.sigmoid(gate)
                current_input = gate * linear_part + (1 - gate) * nonlinear_part
            return current_input

    class CharEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self._char_embedding_weights = nn.Parameter(torch.FloatTensor(n_chars, char_dim))
            self.convs = nn.ModuleList([nn.Conv1d(char_dim, num, kernel_size=width, bias=True)
                                        for width, num in filters])
            self._highways = Highway(n_filters, 2)
            self._projection = nn.Linear(n_filters, d, bias=True)

        def forward(self, inputs):
            mask_without_bos_eos = (inputs > 0).sum(dim=-1) > 0
            lengths = mask_without_bos_eos.sum(dim=1).detach().cpu().numpy()
            B, T = inputs.shape[:2]
            with_bos = inputs.new_zeros((B, T + 2, max_chars))
            with_bos[:, 1:-1] = inputs
            for i, j in enumerate(lengths):
                with_bos[i, 0, 0] = bos
                with_bos[i, j + 1, 0] = eos
            mask = (with_bos > 0).sum(dim=-1) > 0
            emb = F.embedding(with_bos.view(-1, max_chars), self._char_embedding_weights,
                              padding_idx=0)
            emb = torch.transpose(emb, 1, 2)
            convs = []
            for conv in self.convs:
                convolved = conv(emb)
                convolved, _ = torch.max(convolved, dim=-1)
                convs.append(F.relu(convolved))
            token_embedding = torch.cat(convs, dim=-1)
            token_embedding = self._highways(token_embedding)
            token_embedding = self._projection(token_embedding)
            return mask, token_embedding.view(B, T + 2, -1)

    class ScalarMix(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.scalar_parameters = nn.ParameterList(
                [nn.Parameter(torch.FloatTensor([0.0]), requires_grad=True) for _ in range(n)])
            self.gamma = nn.Parameter(torch.FloatTensor([1.0]), requires_grad=True)

        def forward(self, tensors, mask):
            normed_weights = F.softmax(torch.cat([p for p in self.scalar_parameters]), dim=0)
            normed_weights = torch.split(normed_weights, split_size_or_sections=1)
            broadcast_mask = mask.unsqueeze(-1).float()
            pieces = [w * t * broadcast_mask for w, t in zip(normed_weights, tensors)]
            return self.gamma * sum(pieces)

    enc = CharEncoder()
    fill_(torch, enc, rng, 0.3)
    with torch.no_grad():
        enc._char_embedding_weights[0].zero_()
        for layer in enc._highways._layers:
            layer.bias[n_filters:].fill_(1)
    lstm = nn.LSTM(d, 2 * proj, batch_first=True, bidirectional=True, proj_size=proj)
    fill_(torch, lstm, rng, 0.3)
    up = nn.Linear(d, 2 * proj)
    fill_(torch, up, rng, 0.3)
    mix = ScalarMix(2)
    head = nn.Linear(2 * proj, 5)
    fill_(torch, head, rng, 0.3)
    params = [*enc.parameters(), *lstm.parameters(), *up.parameters(), *mix.parameters(),
              *head.parameters()]
    opt = torch.optim.SGD(params, lr=0.1)
    chars = rng.integers(1, 28, (3, 4, max_chars))
    chars[:, :, 4:] = 0
    chars[1, 3:] = 0
    chars[2, 2:] = 0
    chars = torch.from_numpy(chars)
    labels = torch.from_numpy(rng.integers(0, 5, (3, 6)))
    res = {"loss": []}
    for _ in range(2):
        mask, emb = enc(chars)
        lengths = mask.sum(1)
        packed = nn.utils.rnn.pack_padded_sequence(emb, lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, (h, c) = lstm(packed)
        out, out_lengths = nn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                            total_length=emb.shape[1])
        mixed = mix([up(emb), out], mask)
        logits = head(mixed)
        loss = F.cross_entropy(logits.transpose(1, 2), labels.masked_fill(~mask, -100))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(params, 0.5)
        opt.step()
        res["loss"].append(loss)
    res["h"], res["c"] = h, c
    res["mask"] = mask
    res["out_lengths"] = out_lengths
    res["params"] = params
    return res


def byt5_program(torch):
    """ByT5's byte-level vocabulary (UTF-8 bytes offset by the three special ids, pad 0,
    eos 1), T5's RMS layer norm in float32 (``hidden.to(torch.float32).pow(2).mean(-1,
    keepdim=True)``, rsqrt) and a tied LM head scaled by d_model ** -0.5; the decoded bytes after
    an argmax by ``bytes(...).decode("utf-8", errors="ignore")``; three Adafactor-free Adam
    steps with a padding mask of -100 labels."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2966)
    d = 16
    texts = ["héllo wörld", "ümlaut", "byte"]
    ids = [[b + 3 for b in t.encode("utf-8")] + [1] for t in texts]
    L = max(len(i) for i in ids)
    batch = torch.tensor([i + [0] * (L - len(i)) for i in ids])

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

    emb = nn.Embedding(259, d, padding_idx=0)
    ff = nn.Sequential(nn.Linear(d, 2 * d, bias=False), nn.ReLU(), nn.Dropout(0.0),
                       nn.Linear(2 * d, d, bias=False))
    norm = T5LayerNorm(d)
    fill_(torch, [emb.weight, *ff.parameters()], rng, 0.5)
    params = [emb.weight, *ff.parameters(), norm.weight]
    opt = torch.optim.Adam(params, lr=1e-2)
    labels = batch.masked_fill(batch == 0, -100)
    res = {"loss": []}
    for _ in range(3):
        h = emb(batch)
        h = h + ff(norm(h))
        h = norm(h) * (d ** -0.5)
        logits = F.linear(h, emb.weight)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1),
                               ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss)
    pred = logits.argmax(-1)
    res["decoded"] = [bytes([t - 3 for t in row.tolist() if t >= 3]).decode(
        "utf-8", errors="ignore") for row in pred]
    res["pad_grad_zero"] = [bool(emb.weight.grad[0].eq(0).all())]
    res["params"] = params
    return res


def fairseq_program(torch):
    """fairseq's label_smoothed_nll_loss (gather on unsqueezed targets, masked_fill_ of pad
    positions, eps_i = eps / (V - 1)) against F.cross_entropy's label_smoothing, make_positions
    by cumsum of ``ne(pad).int()``, and an incremental decoder whose cached keys/values live in
    a dict and are reordered by ``index_select(0, new_order)`` after each beam step (topk on
    flattened scores, ``torch.div(..., rounding_mode="trunc")`` beam ids, bbsz offsets); the
    beam's tokens and scores, and a training step through the same decoder."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2967)
    V, d, pad, eos, beam, bsz = 12, 8, 1, 2, 3, 2

    def label_smoothed_nll_loss(lprobs, target, epsilon, ignore_index=None, reduce=True):
        if target.dim() == lprobs.dim() - 1:
            target = target.unsqueeze(-1)
        nll_loss = -lprobs.gather(dim=-1, index=target)
        smooth_loss = -lprobs.sum(dim=-1, keepdim=True)
        if ignore_index is not None:
            pad_mask = target.eq(ignore_index)
            nll_loss.masked_fill_(pad_mask, 0.0)
            smooth_loss.masked_fill_(pad_mask, 0.0)
        else:
            nll_loss = nll_loss.squeeze(-1)
            smooth_loss = smooth_loss.squeeze(-1)
        if reduce:
            nll_loss = nll_loss.sum()
            smooth_loss = smooth_loss.sum()
        eps_i = epsilon / (lprobs.size(-1) - 1)
        loss = (1.0 - epsilon - eps_i) * nll_loss + eps_i * smooth_loss
        return loss, nll_loss

    def make_positions(tensor, padding_idx):
        mask = tensor.ne(padding_idx).int()
        return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, d, padding_idx=pad)
            self.pos = nn.Embedding(16, d, padding_idx=pad)
            # no key bias: its true gradient is 0, and Adam would step on rounding noise
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d, bias=False), nn.Linear(d, d)
            self.out = nn.Linear(d, V)

        def forward(self, tokens, incremental_state=None):
            positions = make_positions(tokens, pad)
            if incremental_state is not None:
                tokens, positions = tokens[:, -1:], positions[:, -1:]
            x = self.embed(tokens) * d ** 0.5 + self.pos(positions)
            k, v = self.k(x), self.v(x)
            if incremental_state is not None:
                if "prev_key" in incremental_state:
                    k = torch.cat([incremental_state["prev_key"], k], dim=1)
                    v = torch.cat([incremental_state["prev_value"], v], dim=1)
                incremental_state["prev_key"], incremental_state["prev_value"] = k, v
                causal = None
            else:
                T = x.size(1)
                causal = torch.triu(torch.full((T, T), float("-inf")), 1)
            scores = torch.bmm(self.q(x), k.transpose(1, 2)) / d ** 0.5
            if causal is not None:
                scores = scores + causal.unsqueeze(0)
            x = torch.bmm(F.softmax(scores, dim=-1), v)
            return self.out(x)

        def reorder_incremental_state(self, incremental_state, new_order):
            for key in ("prev_key", "prev_value"):
                incremental_state[key] = incremental_state[key].index_select(0, new_order)

    model = Decoder()
    fill_(torch, model, rng, 0.4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    tokens = torch.from_numpy(rng.integers(3, V, (bsz, 6)))
    tokens[1, 4:] = pad
    prev = torch.cat([torch.full((bsz, 1), eos, dtype=torch.long), tokens[:, :-1]], 1)
    res = {"loss": [], "nll": []}
    for _ in range(2):
        lprobs = F.log_softmax(model(prev).float(), dim=-1)
        loss, nll = label_smoothed_nll_loss(lprobs.view(-1, V), tokens.view(-1), 0.1,
                                            ignore_index=pad)
        ce = F.cross_entropy(model(prev).view(-1, V), tokens.view(-1), ignore_index=pad,
                             label_smoothing=0.1, reduction="sum")
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss)
        res["nll"].append(nll)
        res["ce_ls"] = ce
    res["positions"] = make_positions(prev, pad)
    model.eval()
    with torch.no_grad():
        state = {}
        seqs = torch.full((bsz * beam, 1), eos, dtype=torch.long)
        scores = torch.zeros(bsz, beam)
        bbsz_offsets = (torch.arange(0, bsz) * beam).unsqueeze(1)
        orders = []
        for step in range(4):
            lp = F.log_softmax(model(seqs, state)[:, -1], dim=-1).view(bsz, beam, V)
            lp[:, :, pad] = -float("inf")
            if step == 0:
                lp[:, 1:] = -float("inf")
            cand = (scores.unsqueeze(-1) + lp).view(bsz, -1)
            scores, indices = cand.topk(beam, dim=1)
            cand_beams = torch.div(indices, V, rounding_mode="trunc")
            cand_tokens = indices.fmod(V)
            new_order = (cand_beams + bbsz_offsets).view(-1)
            model.reorder_incremental_state(state, new_order)
            seqs = torch.cat([seqs.index_select(0, new_order), cand_tokens.view(-1, 1)], 1)
            orders.append(new_order)
        full = F.log_softmax(model(seqs[:, :-1]), dim=-1)
        rescored = full.gather(-1, seqs[:, 1:, None]).squeeze(-1).sum(-1)
    res["seqs"], res["scores"], res["orders"] = seqs, scores, orders
    res["rescored"] = rescored.view(bsz, beam)
    res["cache"] = state["prev_key"]
    res["params"] = list(model.parameters())
    return res


def funnel_program(torch):
    """HF Funnel-Transformer's pooling: ``stride_pool`` by slicing with separate_cls and
    truncate_seq (``torch.cat([...], axis=axis)``), ``pool_tensor`` in mean, max and min modes
    through avg_pool2d/max_pool2d with ceil_mode on ``tensor[:, None]``, attention masks pooled
    the same way, and a pooled-query attention block trained for two steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2968)
    B, L, d = 2, 9, 8

    def stride_pool(tensor, axis, separate_cls=True, truncate_seq=True):
        if tensor is None:
            return None
        if isinstance(axis, (list, tuple)):
            for ax in axis:
                tensor = stride_pool(tensor, ax)
            return tensor
        if isinstance(tensor, (tuple, list)):
            return type(tensor)(stride_pool(x, axis) for x in tensor)
        axis %= tensor.ndim
        axis_slice = (slice(None, -1, 2) if separate_cls and truncate_seq
                      else slice(None, None, 2))
        enc_slice = [slice(None)] * axis + [axis_slice]
        if separate_cls:
            cls_slice = [slice(None)] * axis + [slice(None, 1)]
            tensor = torch.cat([tensor[cls_slice], tensor], axis=axis)
        return tensor[enc_slice]

    def pool_tensor(tensor, mode="mean", stride=2, separate_cls=True, truncate_seq=True):
        if separate_cls:
            suffix = tensor[:, :-1] if truncate_seq else tensor
            tensor = torch.cat([tensor[:, :1], suffix], dim=1)
        ndim = tensor.ndim
        if ndim == 2:
            tensor = tensor[:, None, :, None]
        elif ndim == 3:
            tensor = tensor[:, None, :, :]
        stride = (stride, 1)
        if mode == "mean":
            tensor = F.avg_pool2d(tensor, stride, stride=stride, ceil_mode=True)
        elif mode == "max":
            tensor = F.max_pool2d(tensor, stride, stride=stride, ceil_mode=True)
        elif mode == "min":
            tensor = -F.max_pool2d(-tensor, stride, stride=stride, ceil_mode=True)
        if ndim == 2:
            return tensor[:, 0, :, 0]
        elif ndim == 3:
            return tensor[:, 0]
        return tensor

    attn = nn.MultiheadAttention(d, 2, batch_first=True)
    ff = nn.Linear(d, d)
    fill_(torch, [*attn.parameters(), *ff.parameters()], rng, 0.3)
    params = [*attn.parameters(), *ff.parameters()]
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.5)
    h = normal(torch, rng, B, L, d)
    mask = torch.ones(B, L)
    mask[1, 6:] = 0
    res = {"loss": []}
    for _ in range(2):
        pooled_q = pool_tensor(h, "mean")
        pooled_mask = pool_tensor(mask, "min")
        out, weights = attn(pooled_q, h, h, key_padding_mask=mask == 0)
        out = ff(out) + pooled_q
        loss = (out.pow(2).sum(-1) * pooled_mask).sum() / pooled_mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss)
    res["weights"] = weights
    res["max_pool"] = pool_tensor(h, "max", separate_cls=False)
    res["min_pool"] = pool_tensor(h, "min", truncate_seq=False)
    res["pooled_mask"] = pooled_mask
    res["stride_pool"] = stride_pool(h, 1)
    res["stride_pool_2d"] = stride_pool(h[..., 0].unsqueeze(-1).expand(B, L, L), [1, 2])
    res["shapes"] = [str(tuple(stride_pool([h, h[:, :, 0]], 1)[1].shape))]
    res["params"] = params
    return res


PROGRAMS = [bigbird_program, elmo_program, byt5_program, fairseq_program, funnel_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 matmul/einsum accumulation order over a few optimizer steps
        "bigbird_program": (1e-4, 1e-5),
        "elmo_program": (1e-4, 1e-5),
        "byt5_program": (1e-4, 1e-5),
        "fairseq_program": (1e-4, 1e-5),
        "funnel_program": (1e-4, 1e-5),
    })
