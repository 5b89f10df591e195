"""Corners of the round-29 NLP programs written as their repositories write them in torch, run
with `torch` bound to ember and to PyTorch from the same NumPy weights and data: Longformer's
global attention (nonzero(as_tuple=True) index sets, a 0-dim tensor max as a size, writes by
advanced indices split by slices), Transformer-XL's ProjectedAdaptiveLogSoftmax (cluster
masks, ``nonzero().squeeze()``, index_select, ``index_copy_`` into a zeros_like nll), AllenNLP's
sort_batch_by_length with restoration indices and stateful LSTM states, DeBERTa's XDropout
Function (bernoulli_ masks checked under manual_seed by shape and rate, not value), fairseq's
accuracy report by masked_select and its ConvS2S pieces (conv_tbc, weight_norm dim=2, GLU,
GradMultiply, the linearized incremental buffer)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def longformer_global_program(torch):
    """HF Longformer's ``_get_global_attn_indices`` and the global key/value gathers: per-row
    global counts, ``torch.arange(max) < counts.unsqueeze(-1)``, the (row, slot) nonzero sets,
    ``new_zeros(batch, max_num_global, ...)`` with a 0-dim tensor in the size, writes through
    advanced indices (``x[rows, :, :, slots] = finfo.min`` puts the indexed dim first), the
    global-key scores concatenated before the local ones, and gradients of q, k, v."""
    F = torch.nn.functional
    rng = np.random.default_rng(2970)
    B, L, nh, dh = 2, 6, 2, 3
    q = normal(torch, rng, B, L, nh, dh).requires_grad_()
    k = normal(torch, rng, B, L, nh, dh).requires_grad_()
    v = normal(torch, rng, B, L, nh, dh).requires_grad_()
    is_index_global_attn = torch.tensor([[True, False, False, True, False, False],
                                         [False, False, True, False, False, False]])
    num_global_attn_indices = is_index_global_attn.long().sum(dim=1)
    max_num_global_attn_indices = num_global_attn_indices.max()
    is_index_global_attn_nonzero = is_index_global_attn.nonzero(as_tuple=True)
    is_local_index_global_attn = torch.arange(
        max_num_global_attn_indices, device=is_index_global_attn.device
    ) < num_global_attn_indices.unsqueeze(dim=-1)
    is_local_index_global_attn_nonzero = is_local_index_global_attn.nonzero(as_tuple=True)
    is_local_index_no_global_attn_nonzero = (is_local_index_global_attn == 0).nonzero(
        as_tuple=True)
    key_vectors_only_global = k.new_zeros(B, max_num_global_attn_indices, nh, dh)
    key_vectors_only_global[is_local_index_global_attn_nonzero] = k[is_index_global_attn_nonzero]
    attn_probs_from_global_key = torch.einsum("blhd,bshd->blhs", (q, key_vectors_only_global))
    attn_probs_from_global_key = attn_probs_from_global_key.transpose(1, 3)
    attn_probs_from_global_key[is_local_index_no_global_attn_nonzero[0],
                               is_local_index_no_global_attn_nonzero[1], :, :] = torch.finfo(
        attn_probs_from_global_key.dtype).min
    attn_probs_from_global_key = attn_probs_from_global_key.transpose(1, 3)
    local = torch.einsum("blhd,bshd->blhs", q, k)
    band = (torch.arange(L)[:, None] - torch.arange(L)[None, :]).abs() <= 1
    local = local.masked_fill(~band[None, :, None, :], float("-inf"))
    scores = torch.cat((attn_probs_from_global_key, local), dim=-1)
    probs = F.softmax(scores, dim=-1, dtype=torch.float32)
    value_vectors_only_global = v.new_zeros(B, max_num_global_attn_indices, nh, dh)
    value_vectors_only_global[is_local_index_global_attn_nonzero] = v[
        is_index_global_attn_nonzero]
    probs_g = probs.narrow(-1, 0, max_num_global_attn_indices)
    out = torch.matmul(probs_g.transpose(1, 2).clone(),
                       value_vectors_only_global.transpose(1, 2).clone()).transpose(1, 2)
    probs_l = probs.narrow(-1, max_num_global_attn_indices,
                           probs.size(-1) - max_num_global_attn_indices).contiguous()
    out = out + torch.einsum("blhs,bshd->blhd", probs_l, v)
    # the split index form too: rows and slots with the head dims between them
    side = torch.zeros(B, max_num_global_attn_indices, 4, 5)
    side[is_local_index_no_global_attn_nonzero[0], :, :,
         is_local_index_no_global_attn_nonzero[1]] = -1.0
    loss = out.pow(2).sum()
    loss.backward()
    return {"out": out, "probs": probs, "grads": [q.grad, k.grad, v.grad],
            "max_num": max_num_global_attn_indices,
            "nonzero": list(is_local_index_no_global_attn_nonzero),
            "side": side, "side_shape": [str(tuple(side[
                is_local_index_no_global_attn_nonzero[0], :, :,
                is_local_index_no_global_attn_nonzero[1]].shape))]}


def projected_adaptive_softmax_program(torch):
    """kimiyoung's ProjectedAdaptiveLogSoftmax: one weight/bias cut into clusters by
    cutoff_ends, cluster logits appended to the head (``torch.cat([weight_i,
    self.cluster_weight], dim=0)``), per-cluster masks, ``mask_i.nonzero().squeeze()``,
    ``head_logprob.index_select``, the tail's gather, ``nll.index_copy_(0, indices_i,
    -logprob_i)`` into ``torch.zeros_like(target, dtype=hidden.dtype, device=...)``; Adam steps
    and the full log-probability table against logsumexp."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2971)
    n_token, d, cutoffs = 20, 8, [6, 12]
    cutoffs = cutoffs + [n_token]
    cutoff_ends = [0] + cutoffs
    shortlist_size = cutoffs[0]
    n_clusters = len(cutoffs) - 1

    class Crit(nn.Module):
        def __init__(self):
            super().__init__()
            self.cluster_weight = nn.Parameter(torch.zeros(n_clusters, d))
            self.cluster_bias = nn.Parameter(torch.zeros(n_clusters))
            self.out_layers = nn.ModuleList([nn.Linear(d, n_token)])

        def forward(self, hidden, target):
            weights, biases = [], []
            for i in range(len(cutoffs)):
                l_idx, r_idx = cutoff_ends[i], cutoff_ends[i + 1]
                weight_i = self.out_layers[0].weight[l_idx:r_idx]
                bias_i = self.out_layers[0].bias[l_idx:r_idx]
                if i == 0:
                    weight_i = torch.cat([weight_i, self.cluster_weight], dim=0)
                    bias_i = torch.cat([bias_i, self.cluster_bias], dim=0)
                weights.append(weight_i)
                biases.append(bias_i)
            head_logit = F.linear(hidden, weights[0], bias=biases[0])
            head_logprob = F.log_softmax(head_logit, dim=1)
            nll = torch.zeros_like(target, dtype=hidden.dtype, device=hidden.device)
            offset = 0
            table = []
            for i in range(len(cutoffs)):
                l_idx, r_idx = cutoff_ends[i], cutoff_ends[i + 1]
                mask_i = (target >= l_idx) & (target < r_idx)
                indices_i = mask_i.nonzero().squeeze()
                if indices_i.numel() == 0:
                    continue
                target_i = target.index_select(0, indices_i) - l_idx
                head_logprob_i = head_logprob.index_select(0, indices_i)
                if i == 0:
                    logprob_i = head_logprob_i.gather(1, target_i[:, None]).squeeze(1)
                else:
                    hidden_i = hidden.index_select(0, indices_i)
                    tail_logit_i = F.linear(hidden_i, weights[i], bias=biases[i])
                    tail_logprob_i = F.log_softmax(tail_logit_i, dim=1)
                    logprob_i = head_logprob_i[:, -i] + tail_logprob_i.gather(
                        1, target_i[:, None]).squeeze(1)
                nll.index_copy_(0, indices_i, -logprob_i)
                offset += logprob_i.size(0)
            for i in range(len(cutoffs)):
                if i == 0:
                    table.append(head_logprob[:, :shortlist_size])
                else:
                    tail = F.log_softmax(F.linear(hidden, weights[i], bias=biases[i]), dim=1)
                    table.append(head_logprob[:, -i, None] + tail)
            return nll, torch.cat(table, 1), offset

    crit = Crit()
    fill_(torch, crit, rng, 0.4)
    proj = nn.Linear(d, d)
    fill_(torch, proj, rng, 0.4)
    params = [*crit.parameters(), *proj.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2, eps=1e-6)
    res = {"loss": []}
    for step in range(3):
        hidden = proj(normal(torch, rng, 7, d))
        target = torch.from_numpy(rng.integers(0, n_token, 7))
        if step == 2:
            target[:] = 15      # a single cluster hit: its nonzero().squeeze() is 0-dim
            target[0] = 3
        nll, table, offset = crit(hidden, target)
        loss = nll.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss)
        res["offset"] = [offset]
    res["nll"] = nll
    res["table_logsumexp"] = table.logsumexp(1)
    res["table_gather"] = -table.gather(1, target[:, None]).squeeze(1)
    res["params"] = params
    return res


def elmo_sort_program(torch):
    """AllenNLP's sort_batch_by_length (sort descending, the reverse mapping by a second sort,
    ``index_range.index_select``), a stateful biLSTM whose final states are restored to batch
    order by ``index_select(1, restoration_indices)`` and carried into the next batch as
    detached state with ``.data`` copies, over two SGD steps."""
    nn = torch.nn
    rng = np.random.default_rng(2972)
    B, T, d, h = 4, 5, 3, 4

    def sort_batch_by_length(tensor, sequence_lengths):
        sorted_sequence_lengths, permutation_index = sequence_lengths.sort(0, descending=True)
        sorted_tensor = tensor.index_select(0, permutation_index)
        index_range = torch.arange(0, len(sequence_lengths), device=sequence_lengths.device)
        _, reverse_mapping = permutation_index.sort(0, descending=False)
        restoration_indices = index_range.index_select(0, reverse_mapping)
        return sorted_tensor, sorted_sequence_lengths, restoration_indices, permutation_index

    lstm = nn.LSTM(d, h, batch_first=True, bidirectional=True)
    fill_(torch, lstm, rng, 0.4)
    opt = torch.optim.SGD(lstm.parameters(), lr=0.1)
    states = None
    res = {"loss": [], "restore": []}
    for step in range(2):
        x = normal(torch, rng, B, T, d)
        lengths = torch.tensor([3, 5, 2, 4]) if step == 0 else torch.tensor([5, 1, 4, 4])
        mask = torch.arange(T)[None] < lengths[:, None]
        sorted_x, sorted_len, restore, perm = sort_batch_by_length(x, lengths)
        packed = nn.utils.rnn.pack_padded_sequence(sorted_x, sorted_len.data.tolist(),
                                                   batch_first=True)
        init = None
        if states is not None:
            init = tuple(s.index_select(1, perm).contiguous() for s in states)
        out, final = lstm(packed, init)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        out = out.index_select(0, restore)
        final = tuple(s.index_select(1, restore) for s in final)
        states = tuple(s.detach().data.clone() for s in final)
        loss = (out.sum(-1) * mask[:, :out.size(1)]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss)
        res["restore"].append(restore)
    res["states"] = list(states)
    res["params"] = list(lstm.parameters())
    return res


def xdropout_program(torch):
    """DeBERTa's XDropout Function (``(1 - torch.empty_like(input).bernoulli_(1 - p))
    .to(torch.bool)`` masks, masked_fill then scale, the mask saved on ctx for backward) and
    fairseq's accuracy report (``lprobs.argmax(1).masked_select(mask).eq(target
    .masked_select(mask))``): masks checked by shape, dtype, rate and reproducibility under
    manual_seed; the gradient equals the kept-and-scaled mask."""
    F = torch.nn.functional

    class XDropout(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, p):
            ctx.scale = 1.0 / (1 - p)
            mask = (1 - torch.empty_like(input).bernoulli_(1 - p)).to(torch.bool)
            ctx.save_for_backward(mask)
            return input.masked_fill(mask, 0) * ctx.scale

        @staticmethod
        def backward(ctx, grad_output):
            (mask,) = ctx.saved_tensors
            return grad_output.masked_fill(mask, 0) * ctx.scale, None

    res = {}
    torch.manual_seed(0)
    x = torch.ones(200, 50, requires_grad=True)
    y = XDropout.apply(x, 0.25)
    y.sum().backward()
    kept = y.detach() != 0
    res["kept_values"] = [sorted(set(y.detach()[kept].tolist()))[0] * 3]
    res["grad_is_mask"] = [bool((x.grad == kept.float() / 0.75).all())]
    res["rate_ok"] = [abs(kept.float().mean().item() - 0.75) < 0.02]
    torch.manual_seed(0)
    again = XDropout.apply(torch.ones(200, 50), 0.25)
    res["reproducible"] = [bool((again == y.detach()).all())]
    res["shape"] = [str(tuple(y.shape)), str(y.dtype).split(".")[-1]]
    rng = np.random.default_rng(2973)
    lprobs = F.log_softmax(normal(torch, rng, 12, 7), dim=-1)
    target = torch.from_numpy(rng.integers(0, 7, 12))
    target[[2, 5, 9]] = 1
    mask = target.ne(1)
    n_correct = torch.sum(lprobs.argmax(1).masked_select(mask).eq(target.masked_select(mask)))
    res["n_correct"] = [int(n_correct.item()), int(mask.sum().item())]
    res["n_correct_dtype"] = [str(n_correct.dtype).split(".")[-1]]
    return res


def convs2s_program(torch):
    """fairseq's ConvS2S decoder pieces: ConvTBC layers (``torch.conv_tbc``) under
    ``weight_norm(dim=2)``, GLU, the GradMultiply Function (``x.new(x)`` forward, scaled
    backward), and LinearizedConvolution's incremental buffer (``buffer[:, :-1] =
    buffer[:, 1:].clone()``, reordered by index_select) agreeing with the full-sequence
    convolution; two Adam steps on the training path."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2974)
    T, B, C, K = 5, 2, 4, 3

    class GradMultiply(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.scale = scale
            return x.new(x)

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.scale, None

    class ConvTBC(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, padding=0):
            super().__init__()
            self.padding = padding
            self.weight = nn.Parameter(torch.Tensor(kernel_size, in_channels, out_channels))
            self.bias = nn.Parameter(torch.Tensor(out_channels))

        def forward(self, input):
            return torch.conv_tbc(input.contiguous(), self.weight, self.bias, self.padding)

    conv = ConvTBC(C, 2 * C, K, padding=K - 1)
    fill_(torch, conv, rng, 0.4)
    conv = nn.utils.weight_norm(conv, dim=2)
    params = list(conv.parameters())
    opt = torch.optim.Adam(params, lr=1e-2, eps=1e-6)
    x = normal(torch, rng, T, B, C)
    res = {"loss": []}
    for _ in range(2):
        h = GradMultiply.apply(x.requires_grad_(), 0.5)
        out = F.glu(conv(h)[:-(K - 1)], dim=2)
        loss = out.pow(2).mean()
        opt.zero_grad()
        x.grad = None
        loss.backward()
        opt.step()
        res["loss"].append(loss)
        res["x_grad"] = x.grad
    with torch.no_grad():
        full = F.glu(conv(x)[:-(K - 1)], dim=2)
        weight = conv.weight.transpose(2, 1).transpose(1, 0).contiguous().view(2 * C, -1)
        buffer = x.new(B, K, C).zero_()
        steps = []
        for t in range(T):
            buffer[:, :-1, :] = buffer[:, 1:, :].clone()
            buffer[:, -1, :] = x[t]
            step = F.linear(buffer.view(B, -1), weight, conv.bias)
            steps.append(F.glu(step, dim=1))
            if t == 2:
                buffer = buffer.index_select(0, torch.tensor([1, 0]))
        res["incremental"] = torch.stack(steps)
        res["full"] = full
    res["g_shape"] = [str(tuple(conv.weight_g.shape))]
    res["params"] = params
    return res


PROGRAMS = [longformer_global_program, projected_adaptive_softmax_program, elmo_sort_program,
            xdropout_program, convs2s_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 matmul/einsum accumulation order over a few optimizer steps
        "projected_adaptive_softmax_program": (1e-4, 1e-5),
        "elmo_sort_program": (1e-4, 1e-5),
        "convs2s_program": (1e-4, 1e-5),
    })
