"""Decoding, parameter-efficient tuning and search as their reference repositories write them,
run once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
HF's beam search with a length penalty, contrastive search, min-p with frequency / presence
penalties, speculative sampling from NumPy uniforms; prompt and prefix tuning, IA3 and adapters
on a frozen decoder; AlphaZero's PUCT search and losses; OpenAI's evolution strategies. The
minGPT-style decoder is the post-training programs' (test_parity_programs_round26_post_training)."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests
from tests.parity.test_parity_programs_round26_post_training import EOS, VOCAB, _gpt, _ids

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _warpers(torch):
    """HF's min-p warper and OpenAI's frequency / presence penalties by scatter_add_."""
    def min_p(scores, p, filter_value=-float("inf"), min_tokens_to_keep=1):
        probs = torch.softmax(scores, dim=-1)
        top_probs, _ = probs.max(dim=-1, keepdim=True)
        tokens_to_remove = probs < p * top_probs
        sorted_indices = torch.argsort(scores, descending=True, dim=-1)
        sorted_indices_to_remove = torch.gather(tokens_to_remove, dim=-1, index=sorted_indices)
        sorted_indices_to_remove[..., :min_tokens_to_keep] = False
        indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices,
                                                             sorted_indices_to_remove)
        return scores.masked_fill(indices_to_remove, filter_value)

    def penalties(scores, generated, frequency, presence):
        counts = torch.zeros_like(scores).scatter_add_(
            1, generated, torch.ones_like(generated, dtype=scores.dtype))
        return scores - counts * frequency - (counts > 0).to(scores.dtype) * presence

    return min_p, penalties


def beam_search(torch, model, input_ids, num_beams, max_length, length_penalty, eos=EOS):
    """HF's beam search: beam scores added to log-softmax scores, topk over beams x vocab,
    floor division for the beam, finished hypotheses scored sum / len ** length_penalty."""
    batch_size, cur_len = input_ids.shape
    vocab_size = VOCAB
    input_ids = input_ids.repeat_interleave(num_beams, dim=0)
    beam_scores = torch.zeros((batch_size, num_beams), dtype=torch.float)
    beam_scores[:, 1:] = -1e9
    beam_scores = beam_scores.view((batch_size * num_beams,))
    hyps = [[] for _ in range(batch_size)]
    while cur_len < max_length:
        with torch.no_grad():
            next_token_logits = model(input_ids)[:, -1, :]
        next_token_scores = torch.nn.functional.log_softmax(next_token_logits, dim=-1)
        next_token_scores = next_token_scores + beam_scores[:, None].expand_as(next_token_scores)
        next_token_scores = next_token_scores.view(batch_size, num_beams * vocab_size)
        next_token_scores, next_tokens = torch.topk(next_token_scores, 2 * num_beams, dim=1,
                                                    largest=True, sorted=True)
        next_indices = torch.div(next_tokens, vocab_size, rounding_mode="floor")
        next_tokens = next_tokens % vocab_size
        new_scores = torch.zeros((batch_size, num_beams), dtype=next_token_scores.dtype)
        new_tokens = torch.zeros((batch_size, num_beams), dtype=input_ids.dtype)
        new_indices = torch.zeros((batch_size, num_beams), dtype=input_ids.dtype)
        for b in range(batch_size):
            beam_idx = 0
            for rank, (tok, score, idx) in enumerate(zip(next_tokens[b], next_token_scores[b],
                                                         next_indices[b])):
                batch_beam_idx = b * num_beams + idx
                if tok.item() == eos:
                    if rank >= num_beams:
                        continue
                    seq = input_ids[batch_beam_idx].clone()
                    hyps[b].append((score.item() / (seq.shape[-1] ** length_penalty),
                                    seq.tolist()))
                else:
                    new_scores[b, beam_idx] = score
                    new_tokens[b, beam_idx] = tok
                    new_indices[b, beam_idx] = batch_beam_idx
                    beam_idx += 1
                if beam_idx == num_beams:
                    break
        beam_scores = new_scores.view(-1)
        input_ids = torch.cat([input_ids[new_indices.view(-1), :],
                               new_tokens.view(-1).unsqueeze(-1)], dim=-1)
        cur_len += 1
    for b in range(batch_size):
        for j in range(num_beams):
            i = b * num_beams + j
            hyps[b].append((beam_scores[i].item() / (input_ids.shape[-1] ** length_penalty),
                            input_ids[i].tolist()))
    return [sorted(h, key=lambda x: x[0], reverse=True)[:num_beams] for h in hyps]


def decoding_program(torch):
    """Decoding: beam search with two length penalties, contrastive search (cosine
    degeneration penalty over hidden states), min-p with frequency / presence penalties and
    inverse-CDF sampling from NumPy uniforms, and speculative sampling of a target by a
    perturbed draft (accept when u < min(1, p/q), else resample from norm((p - q)+))."""
    F = torch.nn.functional
    rng = np.random.default_rng(2605)
    res = {}
    target = _gpt(torch, block_size=16)
    fill_(torch, target, rng, 0.5)
    draft = copy.deepcopy(target)               # a distilled draft: the target, perturbed
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(normal(torch, rng, *p.shape), alpha=0.15)
    target.eval()
    draft.eval()
    prompt = torch.from_numpy(rng.integers(2, VOCAB, (2, 3)))
    for lp in (1.0, 0.0):
        hyps = beam_search(torch, target, prompt, num_beams=3, max_length=8, length_penalty=lp)
        res[f"beam_scores_{lp}"] = [[s for s, _ in h] for h in hyps]
        res[f"beam_seqs_{lp}"] = [str([seq for _, seq in h]) for h in hyps]

    # contrastive search (HF's _ranking_fast), top_k candidates, alpha = 0.6
    top_k, alpha = 4, 0.6
    ids = prompt.clone()
    with torch.no_grad():
        for _ in range(5):
            hidden = target.hidden(ids)
            logits = target.lm_head(hidden[:, -1])
            next_probs = F.softmax(logits, dim=-1)
            top_k_probs, top_k_ids = torch.topk(next_probs, dim=-1, k=top_k)
            cand = torch.cat([ids.repeat_interleave(top_k, dim=0), top_k_ids.view(-1, 1)], 1)
            next_hidden = target.hidden(cand)[:, -1:, :]
            context_hidden = hidden.repeat_interleave(top_k, dim=0)
            norm_context_hidden = context_hidden / context_hidden.norm(dim=2, keepdim=True)
            norm_next_hidden = next_hidden / next_hidden.norm(dim=2, keepdim=True)
            cosine_matrix = torch.matmul(norm_context_hidden,
                                         norm_next_hidden.transpose(1, 2)).squeeze(-1)
            degeneration_penalty, _ = torch.max(cosine_matrix, dim=-1)
            contrastive_score = ((1.0 - alpha) * top_k_probs.view(-1)
                                 - alpha * degeneration_penalty)
            contrastive_score = torch.stack(torch.split(contrastive_score, top_k))
            _, selected_idx = contrastive_score.max(dim=-1)
            next_tokens = top_k_ids[torch.arange(ids.size(0)), selected_idx]
            ids = torch.cat([ids, next_tokens[:, None]], dim=-1)
            res.setdefault("contrastive_scores", []).append(contrastive_score)
    res["contrastive_ids"] = ids

    # sampling with min-p and penalties, tokens drawn by inverse CDF from NumPy uniforms
    min_p, penalties = _warpers(torch)
    ids = prompt.clone()
    with torch.no_grad():
        for _ in range(5):
            scores = target(ids)[:, -1, :] / 0.8
            scores = penalties(scores, ids, 0.3, 0.2)
            scores = min_p(scores, 0.1)
            probs = F.softmax(scores, dim=-1)
            u = torch.from_numpy(rng.random((ids.size(0), 1)).astype(np.float32))
            cdf = probs.cumsum(-1)
            nxt = torch.searchsorted(cdf, u * cdf[:, -1:]).clamp(max=VOCAB - 1)
            res.setdefault("min_p_kept", []).append(torch.isfinite(scores).sum(-1))
            ids = torch.cat([ids, nxt], dim=-1)
    res["sampled_ids"] = ids

    # speculative sampling (Leviathan et al. / DeepMind): gamma drafted tokens per round
    gamma = 3

    def norm_probs(model, x):
        return F.softmax(model(x) / 1.0, dim=-1)

    x = prompt[:1].clone()
    accepted_total = 0
    with torch.no_grad():
        while x.size(1) < 12:
            x_draft = x.clone()
            qs = []
            for _ in range(gamma):
                q = norm_probs(draft, x_draft)[:, -1]
                qs.append(q)
                u = float(rng.random())
                tok = torch.searchsorted(q.cumsum(-1), torch.tensor([[u]])).clamp(max=VOCAB - 1)
                x_draft = torch.cat([x_draft, tok], dim=1)
            p = norm_probs(target, x_draft)
            n = x.size(1)
            all_accepted = True
            for i in range(gamma):
                j = x_draft[0, n + i]
                r = torch.tensor(float(rng.random()))
                ratio = p[0, n + i - 1, j] / qs[i][0, j]
                if r < torch.min(torch.tensor(1.0), ratio):
                    x = torch.cat([x, j.view(1, 1)], dim=1)
                    accepted_total += 1
                else:
                    residual = torch.clamp(p[:, n + i - 1] - qs[i], min=0)
                    residual = residual / residual.sum(dim=-1, keepdim=True)
                    u = torch.tensor([[float(rng.random())]])
                    tok = torch.searchsorted(residual.cumsum(-1), u).clamp(max=VOCAB - 1)
                    x = torch.cat([x, tok], dim=1)
                    res.setdefault("residual", []).append(residual)
                    all_accepted = False
                    break
            if all_accepted:
                u = torch.tensor([[float(rng.random())]])
                tok = torch.searchsorted(p[:, -1].cumsum(-1), u).clamp(max=VOCAB - 1)
                x = torch.cat([x, tok], dim=1)
    res["speculative_ids"] = x
    res["accepted"] = accepted_total
    return res


def peft_program(torch):
    """Parameter-efficient tuning of a frozen decoder: a soft prompt initialised from vocabulary
    embeddings and prepended to inputs_embeds; prefix tuning through a reparametrising MLP
    into per-layer keys and values; IA3 vectors applied by forward and forward-pre hooks;
    Houlsby adapters spliced in by module surgery. Only the trainable parameters go to the
    optimiser; the state_dict is filtered to them and loaded (strict=False) elsewhere."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(2606)
    res = {}
    base = _gpt(torch, block_size=14)
    fill_(torch, base, rng, 0.3)
    n_virtual, n_layer, n_embd = 3, 2, 16

    class Adapter(nn.Module):
        def __init__(self, dim, bottleneck=4):
            super().__init__()
            self.adapter_down = nn.Linear(dim, bottleneck)
            self.adapter_up = nn.Linear(bottleneck, dim)
            nn.init.zeros_(self.adapter_up.weight)
            nn.init.zeros_(self.adapter_up.bias)

        def forward(self, x):
            return x + self.adapter_up(F.relu(self.adapter_down(x)))

    class PeftModel(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.base_model = model
            for p in self.base_model.parameters():
                p.requires_grad_(False)
            init_ids = torch.LongTensor([3, 5, 7])
            word_embedding_weights = model.transformer.wte(init_ids).detach().clone()
            self.prompt_encoder = nn.Embedding(n_virtual, n_embd)
            self.prompt_encoder.weight = nn.Parameter(word_embedding_weights.to(torch.float32))
            self.prefix_embedding = nn.Embedding(n_virtual, n_embd)
            self.prefix_transform = nn.Sequential(nn.Linear(n_embd, 8), nn.Tanh(),
                                                  nn.Linear(8, n_layer * 2 * n_embd))
            self.ia3 = nn.ParameterDict()
            self.handles = []
            for i, block in enumerate(model.transformer.h):
                self.ia3[f"ia3_kv_{i}"] = nn.Parameter(torch.ones(2 * n_embd))
                self.ia3[f"ia3_ff_{i}"] = nn.Parameter(torch.ones(4 * n_embd))
                kv, ff = self.ia3[f"ia3_kv_{i}"], self.ia3[f"ia3_ff_{i}"]
                self.handles.append(block.attn.c_attn.register_forward_hook(
                    lambda m, args, out, kv=kv: out * torch.cat([torch.ones(n_embd), kv])))
                self.handles.append(block.mlp.c_proj.register_forward_pre_hook(
                    lambda m, args, ff=ff: (args[0] * ff,)))
                block.attn.c_proj = nn.Sequential(block.attn.c_proj, Adapter(n_embd))

        def forward(self, input_ids, attention_mask, labels):
            B = input_ids.shape[0]
            prompts = self.prompt_encoder(torch.arange(n_virtual).unsqueeze(0).expand(B, -1))
            embeds = torch.cat((prompts, self.base_model.transformer.wte(input_ids)), dim=1)
            prefix_mask = torch.ones(B, n_virtual, dtype=attention_mask.dtype)
            attention_mask = torch.cat((prefix_mask, attention_mask), dim=1)
            labels = torch.cat((torch.full((B, n_virtual), -100), labels), dim=1)
            past = self.prefix_transform(self.prefix_embedding.weight)
            past = past.view(n_virtual, n_layer * 2, n_embd).permute(1, 0, 2).split(2)
            logits = self.base_model(inputs_embeds=embeds, attention_mask=attention_mask,
                                     prefixes=[(kv[0], kv[1]) for kv in past])
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            return F.cross_entropy(shift_logits.view(-1, VOCAB), shift_labels.view(-1))

    pristine = copy.deepcopy(base)
    model = PeftModel(base)
    fill_(torch, [p for n, p in model.named_parameters()
                  if "prefix" in n or "adapter_down" in n], rng, 0.2)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    res["param_counts"] = [trainable, total]
    res["trainable_names"] = [n for n, p in model.named_parameters() if p.requires_grad]
    opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-2)
    for step in range(4):
        ids, mask = _ids(torch, rng, rng.integers(4, 9, 3), 9)
        labels = ids.masked_fill(mask == 0, -100)
        loss = model(ids, mask, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("losses", []).append(loss.item())
    res["frozen_grads_none"] = [all(p.grad is None for p in model.base_model.parameters()
                                    if not p.requires_grad)]
    res["ia3"] = [model.ia3[k] for k in sorted(model.ia3.keys())]
    res["prompt"] = model.prompt_encoder.weight
    res["adapter_up"] = model.base_model.transformer.h[1].attn.c_proj[1].adapter_up.weight
    peft_state = {k: v for k, v in model.state_dict().items()
                  if "prompt" in k or "prefix" in k or "ia3" in k or "adapter" in k}
    res["peft_keys"] = sorted(peft_state)
    clone = PeftModel(pristine)
    clone.base_model.load_state_dict(model.base_model.state_dict())
    with torch.no_grad():
        for p in clone.parameters():
            if p.requires_grad:
                p.zero_()
    out = clone.load_state_dict(peft_state, strict=False)
    res["missing_n"] = len(out.missing_keys)
    res["unexpected"] = [str(out.unexpected_keys)]
    ids, mask = _ids(torch, rng, [5, 8], 9)
    with torch.no_grad():
        a = model(ids, mask, ids.masked_fill(mask == 0, -100))
        b = clone(ids, mask, ids.masked_fill(mask == 0, -100))
        for h in model.handles:
            h.remove()
        c = model(ids, mask, ids.masked_fill(mask == 0, -100))
    res["reloaded_losses"] = [a.item(), b.item(), c.item()]
    return res


def alphazero_program(torch):
    """AlphaZero-General on tic-tac-toe: a conv policy/value net (log_softmax, tanh), predict
    under eval + no_grad, MCTS whose PUCT scores are tensors (Q + c P sqrt(N) / (1 + N), invalid
    moves masked), Dirichlet noise from NumPy at the root, visit-count policies with a
    temperature, self-play examples with symmetries, and its pi / v losses under Adam."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(2607)
    res = {}

    class TTTNNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, stride=1, padding=1)
            self.conv2 = nn.Conv2d(8, 8, 3, stride=1, padding=1)
            self.bn1 = nn.BatchNorm2d(8)
            self.bn2 = nn.BatchNorm2d(8)
            self.fc1 = nn.Linear(8 * 9, 32)
            self.fc_bn1 = nn.BatchNorm1d(32)
            self.fc2 = nn.Linear(32, 9)
            self.fc3 = nn.Linear(32, 1)

        def forward(self, s):
            s = s.view(-1, 1, 3, 3)
            s = F.relu(self.bn1(self.conv1(s)))
            s = F.relu(self.bn2(self.conv2(s)))
            s = s.view(-1, 8 * 9)
            s = F.dropout(F.relu(self.fc_bn1(self.fc1(s))), p=0.0, training=self.training)
            pi = self.fc2(s)
            v = self.fc3(s)
            return F.log_softmax(pi, dim=1), torch.tanh(v)

    nnet = TTTNNet()
    fill_(torch, nnet, rng, 0.4)
    optimizer = torch.optim.Adam(nnet.parameters(), lr=1e-2)

    def predict(board):
        board = torch.FloatTensor(board.astype(np.float64)).view(1, 3, 3)
        nnet.eval()
        with torch.no_grad():
            pi, v = nnet(board)
        return torch.exp(pi).data.cpu().numpy()[0], v.data.cpu().numpy()[0]

    def winner(b):
        lines = list(b) + list(b.T) + [b.diagonal(), np.fliplr(b).diagonal()]
        for line in lines:
            if abs(line.sum()) == 3:
                return int(np.sign(line.sum()))
        return 0 if (b == 0).any() else 1e-4

    class MCTS:
        def __init__(self, cpuct=1.0):
            self.cpuct = cpuct
            self.nodes = {}     # s -> [P tensor, N tensor, Q tensor, valid tensor]

        def search(self, canonical, root=False):
            s = canonical.tobytes()
            end = winner(canonical)
            if end != 0:
                return -end
            if s not in self.nodes:
                p, v = predict(canonical)
                valid = torch.from_numpy((canonical.reshape(-1) == 0))
                P = torch.from_numpy(p) * valid
                P = P / P.sum()
                if root:
                    noise = rng.dirichlet([0.3] * int(valid.sum()))
                    Pn = P.clone()
                    Pn[valid] = 0.75 * P[valid] + 0.25 * torch.from_numpy(noise.astype(np.float32))
                    P = Pn
                self.nodes[s] = [P, torch.zeros(9), torch.zeros(9), valid]
                return -float(v[0])
            P, N, Q, valid = self.nodes[s]
            u = Q + self.cpuct * P * torch.sqrt(N.sum() + 1e-8) / (1 + N)
            u = u.masked_fill(~valid, -float("inf"))
            a = int(torch.argmax(u))
            nxt = canonical.reshape(-1).copy()
            nxt[a] = 1
            v = self.search(-nxt.reshape(3, 3))
            Q[a] = (N[a] * Q[a] + v) / (N[a] + 1)
            N[a] += 1
            return -v

        def action_prob(self, canonical, n_sims, temp=1):
            for i in range(n_sims):
                self.search(canonical, root=(i == 0))
            counts = self.nodes[canonical.tobytes()][1]
            if temp == 0:
                best = torch.nonzero(counts == counts.max()).view(-1)
                probs = torch.zeros(9)
                probs[best[0]] = 1.0
                return probs
            counts = counts ** (1.0 / temp)
            return counts / counts.sum()

    examples = []
    board, player = np.zeros((3, 3), dtype=np.int64), 1
    mcts = MCTS(cpuct=1.5)
    moves = 0
    while winner(board) == 0:
        canonical = board * player
        pi = mcts.action_prob(canonical, n_sims=12, temp=1 if moves < 2 else 0)
        res.setdefault("pis", []).append(pi)
        for k in range(4):      # rotations and flips, as getSymmetries
            b = np.rot90(canonical, k)
            p = np.rot90(pi.numpy().reshape(3, 3), k)
            examples.append((b, p.reshape(-1), player))
            examples.append((np.fliplr(b), np.fliplr(p).reshape(-1), player))
        action = int(rng.choice(9, p=(pi.double() / pi.double().sum()).numpy()))
        flat = board.reshape(-1)
        flat[action] = player
        player = -player
        moves += 1
    z = winner(board)
    res["moves"] = moves
    res["winner"] = float(z)
    boards = torch.FloatTensor(np.array([e[0] for e in examples]).astype(np.float64))
    target_pis = torch.FloatTensor(np.array([e[1] for e in examples]))
    target_vs = torch.FloatTensor(np.array([z * e[2] for e in examples]).astype(np.float64))
    nnet.train()
    for epoch in range(2):
        order = rng.permutation(len(examples))
        for start in range(0, len(examples), 16):
            idx = torch.from_numpy(order[start:start + 16])
            out_pi, out_v = nnet(boards[idx])
            l_pi = -torch.sum(target_pis[idx] * out_pi) / target_pis[idx].size()[0]
            l_v = torch.sum((target_vs[idx] - out_v.view(-1)) ** 2) / target_vs[idx].size()[0]
            total_loss = l_pi + l_v
            optimizer.zero_grad()
            total_loss.backward()
            optimizer.step()
            res.setdefault("losses", []).append([l_pi.item(), l_v.item()])
    # running_var only: a bias before BatchNorm gets a gradient of pure rounding noise (1e-8),
    # which Adam scales to lr-sized steps, so running means follow each library's noise
    res["bn_running_var"] = [nnet.bn1.running_var, nnet.bn2.running_var, nnet.fc_bn1.running_var]
    res["num_batches"] = int(nnet.bn2.num_batches_tracked)
    res["fc3"] = nnet.fc3.weight
    return res


def evolution_strategies_program(torch):
    """OpenAI ES: a flat parameter vector (parameters_to_vector), antithetic Gaussian noise
    from NumPy, fitness of each perturbation under no_grad after vector_to_parameters, centred
    ranks, the weighted noise sum as a gradient estimate with L2 weight decay, Adam stepping a
    flat Parameter whose .grad is set by hand; the population also scored in one vmap over
    functional_call, which must agree with the loop."""
    nn = torch.nn
    rng = np.random.default_rng(2608)
    res = {}
    policy = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    fill_(torch, policy, rng, 0.5)
    parameters_to_vector = torch.nn.utils.parameters_to_vector
    vector_to_parameters = torch.nn.utils.vector_to_parameters
    theta = nn.Parameter(parameters_to_vector(policy.parameters()).detach().clone())
    optimizer = torch.optim.Adam([theta], lr=0.05)
    n_pairs, sigma, l2coeff = 6, 0.1, 0.005
    obs0 = normal(torch, rng, 5, 3)
    names = [n for n, _ in policy.named_parameters()]
    shapes = [p.shape for p in policy.parameters()]

    def rollout(params=None):
        """A point mass pushed by the policy for 6 steps: reward is minus distance, effort."""
        obs, total = obs0.clone(), torch.zeros(obs0.shape[0])
        for t in range(6):
            act = policy(obs) if params is None else torch.func.functional_call(policy, params,
                                                                                (obs,))
            act = torch.tanh(act)
            obs = torch.cat([obs[:, :2] + 0.3 * act, obs[:, 2:] * 0.9], dim=1)
            total = total - obs[:, :2].norm(dim=1) - 0.01 * (act ** 2).sum(1)
        return total.mean()

    def unflatten(vec):
        out, i = {}, 0
        for n, s in zip(names, shapes):
            k = math.prod(s)
            out[n] = vec[i:i + k].view(s)
            i += k
        return out

    def compute_centered_ranks(x):
        ranks = torch.empty(x.numel(), dtype=torch.long)
        ranks[x.view(-1).argsort()] = torch.arange(x.numel())
        y = ranks.view(x.shape).float() / (x.numel() - 1) - 0.5
        return y

    for gen in range(4):
        noise = torch.from_numpy(rng.standard_normal((n_pairs, theta.numel()))
                                 .astype(np.float32))
        returns = torch.zeros(n_pairs, 2)
        with torch.no_grad():
            for i in range(n_pairs):
                for j, sign in enumerate((1, -1)):
                    vector_to_parameters(theta + sign * sigma * noise[i], policy.parameters())
                    returns[i, j] = rollout()
            population = torch.cat([theta + sigma * noise, theta - sigma * noise])
            batched = torch.func.vmap(lambda v: rollout(unflatten(v)))(population)
        res.setdefault("vmap_agrees", []).append(
            torch.allclose(batched, torch.cat([returns[:, 0], returns[:, 1]]), atol=1e-5))
        ranks = compute_centered_ranks(returns)
        weights = ranks[:, 0] - ranks[:, 1]
        g = (weights @ noise) / returns.numel()
        optimizer.zero_grad()
        theta.grad = -g + l2coeff * theta.detach()
        optimizer.step()
        with torch.no_grad():
            vector_to_parameters(theta, policy.parameters())
            res.setdefault("fitness", []).append(rollout().item())
        res.setdefault("ranks", []).append(ranks)
        res.setdefault("returns", []).append(returns)
    res["theta"] = theta
    res["param_is_view"] = [policy[0].weight.data_ptr() != theta.data_ptr()]
    res["roundtrip"] = [torch.equal(parameters_to_vector(policy.parameters()), theta.detach())]
    return res



PROGRAMS = [decoding_program, peft_program, alphazero_program, evolution_strategies_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
