"""LLM post-training, decoding and search written as their reference repositories write them,
run once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
reward models (TRL, OpenRLHF, DeepSpeed-Chat pooling and pairwise losses), preference losses
(DPO with label smoothing, IPO, hinge, KTO, SimPO) against a frozen reference model, GRPO
(group-normalised advantages, clipped ratios, the k3 KL estimator) and PPO-RLHF (value head,
masked whitening, GAE over tokens). Decoding, parameter-efficient tuning and search are in
test_parity_programs_round26_post_training_search.py."""

import copy
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

PAD, EOS, VOCAB = 0, 1, 13


def _gpt(torch, vocab=VOCAB, n_embd=16, n_head=2, n_layer=2, block_size=12):
    """A minGPT-style decoder: a causal-mask buffer, NewGELU, pre-LayerNorm blocks; an
    attention mask adds finfo.min on padded keys (HF's way, so no row is all -inf)."""
    nn = torch.nn
    F = nn.functional

    class NewGELU(nn.Module):
        def forward(self, x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                               * (x + 0.044715 * torch.pow(x, 3.0))))

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                                 .view(1, 1, block_size, block_size))

        def forward(self, x, attention_mask=None, prefix=None):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            if attention_mask is not None:
                keep = attention_mask[:, None, None, :].bool()
                att = att.masked_fill(~keep, torch.finfo(att.dtype).min)
            if prefix is not None:              # prefix tuning: learned keys and values
                pk, pv = prefix
                pk = pk.view(1, -1, n_head, C // n_head).transpose(1, 2).expand(B, -1, -1, -1)
                pv = pv.view(1, -1, n_head, C // n_head).transpose(1, 2).expand(B, -1, -1, -1)
                att = torch.cat([(q @ pk.transpose(-2, -1)) / math.sqrt(k.size(-1)), att], -1)
                v = torch.cat([pv, v], dim=2)
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(n_embd, 4 * n_embd),
                                          c_proj=nn.Linear(4 * n_embd, n_embd), act=NewGELU()))
            m = self.mlp
            self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))

        def forward(self, x, attention_mask=None, prefix=None):
            x = x + self.attn(self.ln_1(x), attention_mask, prefix)
            return x + self.mlpf(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.block_size = block_size
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab, n_embd), wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([Block() for _ in range(n_layer)]), ln_f=nn.LayerNorm(n_embd)))
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)

        def hidden(self, idx=None, attention_mask=None, inputs_embeds=None, prefixes=None):
            x = self.transformer.wte(idx) if inputs_embeds is None else inputs_embeds
            t = x.size(1)
            if attention_mask is not None:      # positions from the mask (left padding)
                pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
            else:
                pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
            x = x + self.transformer.wpe(pos)
            for i, block in enumerate(self.transformer.h):
                x = block(x, attention_mask, None if prefixes is None else prefixes[i])
            return self.transformer.ln_f(x)

        def forward(self, idx=None, attention_mask=None, **kw):
            return self.lm_head(self.hidden(idx, attention_mask, **kw))

    return GPT()


def _ids(torch, rng, lengths, T, lo=2, left=False):
    """Token ids padded with PAD to length T (right, or left) and their attention mask."""
    ids = np.full((len(lengths), T), PAD, dtype=np.int64)
    for i, n in enumerate(lengths):
        tokens = rng.integers(lo, VOCAB, n)
        if left:
            ids[i, T - n:] = tokens
        else:
            ids[i, :n] = tokens
    ids = torch.from_numpy(ids)
    return ids, (ids != PAD).long()


def reward_model_program(torch):
    """Reward modelling: a scalar value head read at the last non-pad token four ways (OpenRLHF's
    fliplr argmax, HF's old eq-argmax modulo and new arange*mask argmax, the cumsum equal to the
    sum), TRL's Bradley-Terry loss with a margin and reward centring, OpenRLHF's log-exp loss,
    DeepSpeed-Chat's per-pair loop over the divergent tokens, AdamW with clipping."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(2601)
    res = {}

    class RewardModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = _gpt(torch)
            self.value_head = nn.Linear(16, 1)

        def forward(self, input_ids, attention_mask):
            hidden = self.base.hidden(input_ids)
            return self.value_head(hidden).squeeze(-1)

    model = RewardModel()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    T = 9
    for step in range(3):
        shared = rng.integers(2, VOCAB, 3)
        chosen, c_mask = _ids(torch, rng, rng.integers(4, T, 4), T)
        rejected, r_mask = _ids(torch, rng, rng.integers(4, T, 4), T)
        chosen[:, :3] = torch.from_numpy(shared)
        rejected[:, :3] = torch.from_numpy(shared)
        margin = torch.from_numpy(rng.uniform(0, 0.5, 4).astype(np.float32))
        ids = torch.cat([chosen, rejected], dim=0)
        mask = torch.cat([c_mask, r_mask], dim=0)
        values = model(ids, mask)
        eos_indices = mask.size(1) - 1 - mask.long().fliplr().argmax(dim=1, keepdim=True)
        reward = values.gather(dim=1, index=eos_indices).squeeze(1)
        seq_len = torch.eq(ids, PAD).int().argmax(-1) - 1
        seq_len = seq_len % ids.shape[-1]
        pooled = values[torch.arange(ids.size(0)), seq_len]
        last_non_pad = (torch.arange(ids.shape[-1]) * (ids != PAD).to(torch.int32)).argmax(-1)
        by_cumsum = (mask.cumsum(-1) == mask.sum(-1, keepdim=True)).int().argmax(-1)
        res.setdefault("pool_idx", []).append(
            [eos_indices.squeeze(1).tolist(), seq_len.tolist(), last_non_pad.tolist(),
             by_cumsum.tolist()])
        rewards_chosen, rewards_rejected = reward.chunk(2)
        loss = -F.logsigmoid(rewards_chosen - rewards_rejected - margin).mean()
        loss = loss + 0.01 * torch.mean((rewards_chosen + rewards_rejected) ** 2)
        log_exp = torch.log(1 + torch.exp(rewards_rejected - rewards_chosen)).mean()
        # DeepSpeed-Chat: compare the two sequences from where they diverge to the later pad
        ds_loss, c_scores = 0.0, []
        c_vals, r_vals = values.chunk(2)
        for i in range(chosen.size(0)):
            c_id, r_id = chosen[i], rejected[i]
            c_inds = (c_id == PAD).nonzero()
            c_ind = c_inds[0].item() if len(c_inds) > 0 else T
            check_divergence = (c_id != r_id).nonzero()
            if len(check_divergence) == 0:
                end_ind = rejected.size(-1)
                divergence_ind = end_ind - 1
                r_ind = c_ind
            else:
                r_inds = (r_id == PAD).nonzero()
                r_ind = r_inds[0].item() if len(r_inds) > 0 else T
                end_ind = max(c_ind, r_ind)
                divergence_ind = check_divergence[0]
            c_trunc = c_vals[i][divergence_ind:end_ind]
            r_trunc = r_vals[i][divergence_ind:end_ind]
            c_scores.append(c_vals[i][c_ind - 1])
            ds_loss += -F.logsigmoid(c_trunc - r_trunc).mean()
        ds_loss = ds_loss / chosen.size(0)
        total = loss + 0.5 * log_exp + 0.5 * ds_loss
        opt.zero_grad()
        total.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        res.setdefault("losses", []).append([loss.item(), log_exp.item(), ds_loss.item(),
                                             norm.item()])
        res.setdefault("pooled_agree", []).append(bool(torch.equal(pooled, reward)))
        res.setdefault("c_scores", []).append(torch.stack(c_scores).detach())
        acc = (rewards_chosen > rewards_rejected).float().mean()
        res.setdefault("accuracy", []).append(acc.item())
    res["head"] = model.value_head.weight
    res["wpe_grad"] = model.base.transformer.wpe.weight.grad
    return res


def get_batch_logps(torch, logits, labels, average_log_prob=False, label_pad_token_id=-100):
    """DPO's per-sequence log-probabilities: shift, mask -100 labels, gather log_softmax."""
    labels = labels[:, 1:].clone()
    logits = logits[:, :-1, :]
    loss_mask = labels != label_pad_token_id
    labels[labels == label_pad_token_id] = 0
    per_token_logps = torch.gather(logits.log_softmax(-1), dim=2,
                                   index=labels.unsqueeze(2)).squeeze(2)
    if average_log_prob:
        return (per_token_logps * loss_mask).sum(-1) / loss_mask.sum(-1)
    return (per_token_logps * loss_mask).sum(-1)


def pad_to_length(torch, tensor, length, pad_value, dim=-1):
    """TRL's pad_to_length: cat a filled block up to `length` along `dim`."""
    if tensor.size(dim) >= length:
        return tensor
    pad_size = list(tensor.shape)
    pad_size[dim] = length - tensor.size(dim)
    return torch.cat([tensor, pad_value * torch.ones(*pad_size, dtype=tensor.dtype,
                                                     device=tensor.device)], dim=dim)


def preference_program(torch):
    """DPO-family losses on a concatenated chosen/rejected forward: the reference model a frozen
    deepcopy run under inference_mode (and no_grad), sigmoid DPO with label smoothing, IPO,
    hinge, SimPO and ORPO on length-averaged log-probs, KTO with a detached clamped KL
    estimate, and an SFT term (cross_entropy with ignore_index)."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(2602)
    res = {}
    policy = _gpt(torch)
    fill_(torch, policy, rng, 0.3)
    ref = copy.deepcopy(policy)
    ref.requires_grad_(False)
    ref.eval()
    opt = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=5e-3)
    beta, label_smoothing = 0.1, 0.1
    T = 10

    def batch():
        prompt_len = rng.integers(2, 4, 3)
        lens_c, lens_r = rng.integers(5, T, 3), rng.integers(4, T - 2, 3)
        c_ids, _ = _ids(torch, rng, lens_c, T)
        r_ids, _ = _ids(torch, rng, lens_r, T - 2)
        c_lab, r_lab = c_ids.clone(), r_ids.clone()
        for i, p in enumerate(prompt_len):
            c_lab[i, :p] = -100
            r_lab[i, :p] = -100
            r_ids[i, :p] = c_ids[i, :p]
        c_lab[c_ids == PAD] = -100
        r_lab[r_ids == PAD] = -100
        return c_ids, c_lab, r_ids, r_lab

    def concatenated_forward(model, c_ids, c_lab, r_ids, r_lab, average=False):
        max_len = max(c_ids.shape[1], r_ids.shape[1])
        ids = torch.cat([pad_to_length(torch, c_ids, max_len, PAD),
                         pad_to_length(torch, r_ids, max_len, PAD)], dim=0)
        labels = torch.cat([pad_to_length(torch, c_lab, max_len, -100),
                            pad_to_length(torch, r_lab, max_len, -100)], dim=0)
        logits = model(ids, (ids != PAD).long()).to(torch.float32)
        logps = get_batch_logps(torch, logits, labels, average_log_prob=average)
        n = c_ids.shape[0]
        return logps[:n], logps[n:], logits[:n], logits[n:]

    for step in range(5):
        c_ids, c_lab, r_ids, r_lab = batch()
        pc, pr, c_logits, _ = concatenated_forward(policy, c_ids, c_lab, r_ids, r_lab)
        mode = torch.inference_mode() if step % 2 == 0 else torch.no_grad()
        with mode:
            rc, rr, _, _ = concatenated_forward(ref, c_ids, c_lab, r_ids, r_lab)
        res.setdefault("ref_flags", []).append([rc.requires_grad, rc.is_inference(),
                                                pc.requires_grad])
        logits = (pc - pr) - (rc - rr)
        dpo = (-F.logsigmoid(beta * logits) * (1 - label_smoothing)
               - F.logsigmoid(-beta * logits) * label_smoothing)
        ipo = (logits - 1 / (2 * beta)) ** 2
        hinge = torch.relu(1 - beta * logits)
        chosen_rewards = beta * (pc - rc).detach()
        rejected_rewards = beta * (pr - rr).detach()
        avg_c, avg_r, _, _ = concatenated_forward(policy, c_ids, c_lab, r_ids, r_lab, True)
        gamma_beta_ratio = 0.5
        simpo = -F.logsigmoid(2.0 * (avg_c - avg_r) - gamma_beta_ratio)
        # KTO: chosen desirable, rejected undesirable, KL from mismatched pairs, detached
        kl = ((pc.roll(1) - rc.roll(1)).mean().clamp(min=0)).detach()
        kto = torch.cat((1 - F.sigmoid(beta * ((pc - rc) - kl)),
                         1 - F.sigmoid(beta * (kl - (pr - rr)))), 0)
        # ORPO: the odds ratio of the length-averaged log-probabilities
        log_odds = (avg_c - avg_r) - (torch.log1p(-torch.exp(avg_c))
                                      - torch.log1p(-torch.exp(avg_r)))
        orpo = -F.logsigmoid(log_odds)
        which = ["sigmoid", "ipo", "orpo", "simpo", "kto"][step]
        losses = {"sigmoid": dpo, "ipo": ipo, "hinge": hinge, "simpo": simpo, "kto": kto,
                  "orpo": orpo}
        loss = losses[which].mean() + 0.1 * dpo.mean()
        # an SFT term on the chosen completions (RPO), cross_entropy with ignore_index
        nll = F.cross_entropy(c_logits[:, :-1].reshape(-1, VOCAB), c_lab[:, 1:].reshape(-1),
                              ignore_index=-100)
        loss = loss + 0.2 * nll
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        res.setdefault("losses", []).append(
            [dpo.mean().item(), ipo.mean().item(), hinge.mean().item(), simpo.mean().item(),
             kto.mean().item(), orpo.mean().item(), nll.item(), loss.item()])
        res.setdefault("rewards", []).append(torch.stack([chosen_rewards, rejected_rewards]))
        res.setdefault("margins", []).append((chosen_rewards - rejected_rewards).mean().item())
    res["ref_grad_none"] = [all(p.grad is None for p in ref.parameters())]
    res["lm_head"] = policy.lm_head.weight
    res["ref_unchanged"] = [torch.equal(ref.lm_head.weight, policy.lm_head.weight)]
    return res


def selective_log_softmax(torch, logits, index):
    """TRL's per-token log-prob: gather the logit, subtract a row-wise logsumexp."""
    selected = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)
    logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
    return selected - logsumexp_values


def grpo_program(torch):
    """GRPO as TRL writes it: left-padded prompts, completions masked after the first EOS,
    rewards from a rule, advantages normalised within each group, the clipped ratio objective,
    the k3 KL estimator to a frozen reference, and sequence-, token- and DAPO-level averaging."""
    rng = np.random.default_rng(2603)
    res = {}
    policy = _gpt(torch, block_size=14)
    fill_(torch, policy, rng, 0.3)
    ref = copy.deepcopy(policy).eval()
    for p in ref.parameters():
        p.requires_grad = False
    opt = torch.optim.AdamW(policy.parameters(), lr=3e-3, betas=(0.9, 0.99),
                            weight_decay=0.0)
    G, n_prompts, P, C = 4, 2, 5, 6
    beta, eps_low, eps_high = 0.04, 0.2, 0.28
    for step in range(3):
        prompt_ids, prompt_mask = _ids(torch, rng, rng.integers(2, P + 1, n_prompts), P,
                                       left=True)
        prompt_ids = prompt_ids.repeat_interleave(G, dim=0)
        prompt_mask = prompt_mask.repeat_interleave(G, dim=0)
        completion_ids = torch.from_numpy(rng.integers(1, VOCAB, (n_prompts * G, C)))
        is_eos = completion_ids == EOS
        eos_idx = torch.full((is_eos.size(0),), is_eos.size(1), dtype=torch.long)
        eos_idx[is_eos.any(dim=1)] = is_eos.int().argmax(dim=1)[is_eos.any(dim=1)]
        sequence_indices = torch.arange(is_eos.size(1)).expand(is_eos.size(0), -1)
        completion_mask = (sequence_indices <= eos_idx.unsqueeze(1)).int()
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)

        def per_token_logps(model):
            logits = model(input_ids, attention_mask)[:, :-1, :]
            logits = logits[:, -C:] / 0.9       # temperature
            return selective_log_softmax(torch, logits, input_ids[:, -C:])

        with torch.no_grad():
            old_logps = per_token_logps(policy)
            ref_logps = per_token_logps(ref)
        # reward: count of even tokens before EOS, plus a length bonus
        even = ((completion_ids % 2 == 0) & completion_mask.bool()).sum(1).float()
        rewards = even / C + 0.1 * (completion_mask.sum(1) < C).float()
        mean_grouped = rewards.view(-1, G).mean(dim=1)
        std_grouped = rewards.view(-1, G).std(dim=1)
        mean_grouped = mean_grouped.repeat_interleave(G, dim=0)
        std_grouped = std_grouped.repeat_interleave(G, dim=0)
        advantages = (rewards - mean_grouped) / (std_grouped + 1e-4)
        res.setdefault("advantages", []).append(advantages)
        for inner in range(2):
            logps = per_token_logps(policy)
            kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
            coef_1 = torch.exp(logps - old_logps)
            coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
            l1 = coef_1 * advantages.unsqueeze(1)
            l2 = coef_2 * advantages.unsqueeze(1)
            per_token_loss = -torch.min(l1, l2) + beta * kl
            mask = completion_mask
            seq_level = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
            token_level = (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
            dr_grpo = (per_token_loss * mask).sum() / (per_token_loss.size(0) * C)
            loss = [seq_level, token_level, dr_grpo][step]
            opt.zero_grad()
            loss.backward()
            opt.step()
            is_clipped = ((coef_1 < 1 - eps_low) & (advantages.unsqueeze(1) < 0)) | (
                (coef_1 > 1 + eps_high) & (advantages.unsqueeze(1) > 0))
            clip_ratio = (is_clipped * mask).sum() / mask.sum()
            mean_kl = (kl * mask).sum() / mask.sum()
            res.setdefault("losses", []).append(
                [seq_level.item(), token_level.item(), dr_grpo.item(), clip_ratio.item(),
                 mean_kl.item()])
    res["completion_mask"] = completion_mask
    res["wte"] = policy.transformer.wte.weight
    return res


def masked_mean(torch, values, mask, axis=None):
    """TRL's masked mean."""
    if axis is not None:
        return (values * mask).sum(axis=axis) / mask.sum(axis=axis)
    return (values * mask).sum() / mask.sum()


def masked_var(torch, values, mask, unbiased=True):
    """TRL's masked variance with Bessel's correction."""
    mean = masked_mean(torch, values, mask)
    centered_values = values - mean
    variance = masked_mean(torch, centered_values ** 2, mask)
    if unbiased:
        mask_sum = mask.sum()
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def masked_whiten(torch, values, mask, shift_mean=True):
    """TRL's masked whitening."""
    mean, var = masked_mean(torch, values, mask), masked_var(torch, values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


def ppo_rlhf_program(torch):
    """PPO-RLHF (TRL's PPOTrainer): a policy with a value head, per-token KL penalties, the
    score added at the last response token, GAE over tokens in a reversed loop, masked
    whitening, clipped value and policy losses, minibatches from a NumPy permutation."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(2604)
    res = {}

    class PolicyAndValue(nn.Module):
        def __init__(self):
            super().__init__()
            self.policy = _gpt(torch)
            self.v_head = nn.Sequential(nn.Dropout(0.0), nn.Linear(16, 1))

        def forward(self, ids, mask):
            h = self.policy.hidden(ids, mask)
            return self.policy.lm_head(h), self.v_head(h).squeeze(-1)

    model = PolicyAndValue()
    fill_(torch, model, rng, 0.3)
    ref = copy.deepcopy(model.policy).requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, eps=1e-5)
    B, P, R = 4, 3, 5
    gamma, lam, cliprange, cliprange_value, vf_coef, kl_coef = 1.0, 0.95, 0.2, 0.2, 0.1, 0.05
    for step in range(2):
        query = torch.from_numpy(rng.integers(2, VOCAB, (B, P)))
        response = torch.from_numpy(rng.integers(2, VOCAB, (B, R)))
        lengths = rng.integers(2, R + 1, B)
        for i, n in enumerate(lengths):
            response[i, n:] = PAD
        ids = torch.cat([query, response], 1)
        mask = (ids != PAD).long()
        response_mask = mask[:, P:].float()
        scores = torch.from_numpy(rng.standard_normal(B).astype(np.float32))
        with torch.no_grad():
            logits, values = model(ids, mask)
            values = values[:, P - 1:-1]
            logprobs = torch.gather(F.log_softmax(logits[:, P - 1:-1], -1), 2,
                                    response.unsqueeze(-1)).squeeze(-1)
            ref_logits = ref(ids, mask)
            ref_logprobs = torch.gather(F.log_softmax(ref_logits[:, P - 1:-1], -1), 2,
                                        response.unsqueeze(-1)).squeeze(-1)
            kl = logprobs - ref_logprobs
            rewards = -kl_coef * kl * response_mask
            last = torch.from_numpy(lengths - 1)
            rewards[torch.arange(B), last] += scores
            values = values * response_mask
            lastgaelam = 0
            advantages_reversed = []
            for t in reversed(range(R)):
                nextvalues = values[:, t + 1] if t < R - 1 else 0.0
                delta = rewards[:, t] + gamma * nextvalues - values[:, t]
                lastgaelam = delta + gamma * lam * lastgaelam
                advantages_reversed.append(lastgaelam)
            advantages = torch.stack(advantages_reversed[::-1]).transpose(0, 1)
            returns = advantages + values
            advantages = masked_whiten(torch, advantages, response_mask)
            advantages = advantages.detach()
        res.setdefault("advantages", []).append(advantages)
        res.setdefault("returns", []).append(returns)
        for epoch in range(2):
            perm = rng.permutation(B)
            for mb in range(0, B, 2):
                idx = torch.from_numpy(perm[mb:mb + 2])
                m = response_mask[idx]
                new_logits, vpred = model(ids[idx], mask[idx])
                vpred = vpred[:, P - 1:-1]
                new_logp = torch.gather(F.log_softmax(new_logits[:, P - 1:-1], -1), 2,
                                        response[idx].unsqueeze(-1)).squeeze(-1)
                vpredclipped = torch.clamp(vpred, values[idx] - cliprange_value,
                                           values[idx] + cliprange_value)
                vf_losses1 = (vpred - returns[idx]) ** 2
                vf_losses2 = (vpredclipped - returns[idx]) ** 2
                vf_loss = 0.5 * masked_mean(torch, torch.max(vf_losses1, vf_losses2), m)
                ratio = torch.exp(new_logp - logprobs[idx])
                pg_losses = -advantages[idx] * ratio
                pg_losses2 = -advantages[idx] * torch.clamp(ratio, 1.0 - cliprange,
                                                            1.0 + cliprange)
                pg_loss = masked_mean(torch, torch.max(pg_losses, pg_losses2), m)
                loss = pg_loss + vf_coef * vf_loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                approxkl = 0.5 * masked_mean(torch, (new_logp - logprobs[idx]) ** 2, m)
                pg_clipfrac = masked_mean(torch, torch.gt(pg_losses2, pg_losses).float(), m)
                entropy = masked_mean(torch, torch.logsumexp(new_logits[:, P - 1:-1], dim=-1)
                                      - torch.sum(F.softmax(new_logits[:, P - 1:-1], dim=-1)
                                                  * new_logits[:, P - 1:-1], dim=-1), m)
                res.setdefault("stats", []).append(
                    [pg_loss.item(), vf_loss.item(), approxkl.item(), pg_clipfrac.item(),
                     entropy.item()])
    res["v_head"] = model.v_head[1].weight
    res["var_biased"] = masked_var(torch, returns, response_mask, unbiased=False)
    return res



def per_example_gradients_program(torch):
    """Data selection by per-example gradients (LESS-style): torch.func.grad of a sequence's
    log-probability through functional_call, vmapped over the batch; DPO's get_batch_logps
    refused there (its boolean-mask write has a per-example shape) and a torch.where form
    accepted; gradient-feature inner products against a validation gradient; a jvp of the
    logits along a parameter direction; the vmapped gradients against a loop of backward()."""
    rng = np.random.default_rng(2609)
    res = {}
    model = _gpt(torch, block_size=8)
    fill_(torch, model, rng, 0.3)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    ids, mask = _ids(torch, rng, [6, 4, 5], 6)
    labels = ids.masked_fill(torch.from_numpy(np.arange(6) < 2) | (mask == 0), -100)

    def logps_where(logits, labels):
        labels, logits = labels[:, 1:], logits[:, :-1, :]
        loss_mask = labels != -100
        labels = torch.where(loss_mask, labels, 0)
        per_token = torch.gather(logits.log_softmax(-1), 2, labels.unsqueeze(2)).squeeze(2)
        return (per_token * loss_mask).sum(-1)

    def loss_with(logps_fn):
        def loss(p, b, x, m, y):
            logits = torch.func.functional_call(model, (p, b), (x[None], m[None]))
            return -logps_fn(logits, y[None]).sum()
        return loss

    per_example = torch.func.vmap(torch.func.grad(loss_with(logps_where)),
                                  in_dims=(None, None, 0, 0, 0))
    try:
        torch.func.vmap(torch.func.grad(loss_with(
            lambda lg, lb: get_batch_logps(torch, lg, lb))), in_dims=(None, None, 0, 0, 0))(
            params, buffers, ids, mask, labels)
        res["bool_mask_error"] = ["none"]
    except RuntimeError as e:
        res["bool_mask_error"] = [str(e)]
    g = per_example(params, buffers, ids, mask, labels)
    feats = torch.cat([v.flatten(1) for v in g.values()], dim=1)
    res["grad_norms"] = feats.norm(dim=1)
    val = torch.func.grad(loss_with(logps_where))(params, buffers, ids[1], mask[1], labels[1])
    val = torch.cat([v.flatten() for v in val.values()])
    res["influence"] = torch.nn.functional.cosine_similarity(feats, val[None], dim=1)
    res["names"] = list(g)
    loop = []
    for i in range(ids.size(0)):
        model.zero_grad()
        (-logps_where(model(ids[i:i + 1], mask[i:i + 1]), labels[i:i + 1]).sum()).backward()
        loop.append(model.transformer.wpe.weight.grad.clone())
    res["loop_agrees"] = [torch.allclose(torch.stack(loop), g["transformer.wpe.weight"],
                                         atol=1e-5)]
    direction = {k: torch.from_numpy(rng.standard_normal(tuple(v.shape)).astype(np.float32))
                 for k, v in params.items()}
    _, jv = torch.func.jvp(lambda p: torch.func.functional_call(model, (p, buffers),
                                                                (ids, mask)),
                           (params,), (direction,))
    res["jvp"] = jv[:, -1]
    return res


def packed_sft_program(torch):
    """Supervised fine-tuning with packing (TRL / OpenRLHF): examples concatenated into one row,
    position ids restarting per example, a block-diagonal causal mask from sequence ids for
    scaled_dot_product_attention, the completion-only collator finding the response template
    by unfold, labels -100 on prompts and across boundaries, cross_entropy summed then
    divided by the token count, gradient accumulation, and the unpacked batch's loss."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(2610)
    res = {}
    d, heads, T = 16, 2, 24
    template = [11, 12]                 # "### Response:"

    class PackedLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, d)
            self.wpe = nn.Embedding(T, d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.norm = nn.RMSNorm(d)
            self.head = nn.Linear(d, VOCAB, bias=False)

        def forward(self, ids, position_ids, mask):
            x = self.wte(ids) + self.wpe(position_ids)
            B, L, _ = x.shape
            q, k, v = self.qkv(self.norm(x)).view(B, L, 3, heads, d // heads).unbind(2)
            y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), attn_mask=mask)
            x = x + self.proj(y.transpose(1, 2).reshape(B, L, d))
            return self.head(self.norm(x))

    model = PackedLM()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    examples = []
    for n_prompt, n_answer in [(3, 2), (2, 4), (4, 3), (2, 2)]:
        ex = np.concatenate([rng.integers(2, 11, n_prompt), template,
                             rng.integers(2, 11, n_answer), [EOS]])
        examples.append(torch.from_numpy(ex))

    def completion_labels(ids):
        labels = ids.clone()
        windows = ids.unfold(0, len(template), 1)
        hit = (windows == torch.tensor(template)).all(dim=1).nonzero()
        end = int(hit[0, 0]) + len(template)
        labels[:end] = -100
        return labels

    for accum_round in range(2):
        opt.zero_grad()
        for micro in (examples[:2], examples[2:]):
            ids = torch.cat(micro)
            labels = torch.cat([completion_labels(e) for e in micro])
            position_ids = torch.cat([torch.arange(e.numel()) for e in micro])
            seq_ids = torch.cat([torch.full((e.numel(),), i) for i, e in enumerate(micro)])
            lengths = torch.tensor([e.numel() for e in micro])
            cu_seqlens = F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
            same = seq_ids[:, None] == seq_ids[None, :]
            causal = torch.ones(ids.numel(), ids.numel(), dtype=torch.bool).tril()
            mask = (same & causal)[None, None]
            logits = model(ids[None], position_ids[None], mask)
            shift_labels = labels[1:].clone()
            shift_labels[(cu_seqlens[1:-1] - 1).long()] = -100   # no prediction across examples
            loss_sum = F.cross_entropy(logits[0, :-1], shift_labels, ignore_index=-100,
                                       reduction="sum")
            n_tokens = (shift_labels != -100).sum()
            loss = loss_sum / n_tokens
            (loss / 2).backward()
            res.setdefault("micro_losses", []).append(loss.item())
            res.setdefault("n_tokens", []).append(int(n_tokens))
            res.setdefault("cu_seqlens", []).append(cu_seqlens.tolist())
        res.setdefault("grad_norms", []).append(
            nn.utils.clip_grad_norm_(model.parameters(), 5.0).item())
        opt.step()
    # the same examples unpacked and right-padded: the per-example losses must agree
    with torch.no_grad():
        padded = nn.utils.rnn.pad_sequence(examples, batch_first=True, padding_value=PAD)
        labels = nn.utils.rnn.pad_sequence([completion_labels(e) for e in examples],
                                           batch_first=True, padding_value=-100)
        L = padded.size(1)
        keep = (padded != PAD) | (torch.arange(L) == 0)
        mask = torch.ones(L, L, dtype=torch.bool).tril()[None, None] & keep[:, None, None, :]
        logits = model(padded, torch.arange(L).expand_as(padded), mask)
        per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:],
                                    ignore_index=-100, reduction="none")
        res["unpacked"] = per_token.sum(1) / (labels[:, 1:] != -100).sum(1)
        packed = torch.cat(examples)
        seq_ids = torch.cat([torch.full((e.numel(),), i) for i, e in enumerate(examples)])
        mask = ((seq_ids[:, None] == seq_ids[None, :]) &
                torch.ones(packed.numel(), packed.numel(), dtype=torch.bool).tril())[None, None]
        position_ids = torch.cat([torch.arange(e.numel()) for e in examples])
        logits = model(packed[None], position_ids[None], mask)[0]
        starts = [0] + torch.tensor([e.numel() for e in examples]).cumsum(0).tolist()
        res["packed"] = torch.stack([
            F.cross_entropy(logits[a:b - 1], completion_labels(examples[i])[1:],
                            ignore_index=-100)
            for i, (a, b) in enumerate(zip(starts[:-1], starts[1:]))])
    res["head"] = model.head.weight
    return res


PROGRAMS = [reward_model_program, preference_program, grpo_program, ppo_rlhf_program,
            per_example_gradients_program, packed_sft_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
