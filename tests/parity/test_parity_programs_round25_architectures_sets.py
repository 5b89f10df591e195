"""Set models written as their reference code writes them in torch, run once with `torch` bound
to ember and once to PyTorch from the same NumPy weights and data: the Set Transformer (MAB /
ISAB / PMA over nn.MultiheadAttention with batch_first and key_padding_mask, cross-attention
with kdim / vdim and bias / zero keys, a stock TransformerEncoder that packs padded sets in
eval), Slot Attention (GRUCell refinement, a spatial-broadcast decoder) and Deep Sets pooling
(masked, and over flat batches with index_add_ / scatter_reduce). Part of round 25's
architecture programs (test_parity_programs_round25_architectures.py)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


# ---------------------------------------------------------------- Set Transformer / Slot Attention

def set_transformer_program(torch):
    """Set Transformer (MAB / SAB / ISAB with inducing points / PMA over nn.MultiheadAttention
    with batch_first and key_padding_mask), Slot Attention (iterative refinement with a GRUCell,
    softmax over slots, a spatial-broadcast decoder with alpha masks), and Deep Sets pooling
    (masked sum / mean / max); trained with Adam, a warmup LambdaLR and grad clipping."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(254)
    res = {}

    class MAB(nn.Module):
        def __init__(self, dim_Q, dim_K, dim_V, num_heads, ln=True):
            super().__init__()
            self.fc_q = nn.Linear(dim_Q, dim_V)
            self.fc_k = nn.Linear(dim_K, dim_V)
            self.mha = nn.MultiheadAttention(dim_V, num_heads, batch_first=True)
            self.ln0 = nn.LayerNorm(dim_V) if ln else nn.Identity()
            self.ln1 = nn.LayerNorm(dim_V) if ln else nn.Identity()
            self.fc_o = nn.Linear(dim_V, dim_V)

        def forward(self, Q, K, key_padding_mask=None):
            Q, K = self.fc_q(Q), self.fc_k(K)
            A, _ = self.mha(Q, K, K, key_padding_mask=key_padding_mask, need_weights=False)
            H = self.ln0(Q + A)
            return self.ln1(H + F.relu(self.fc_o(H)))

    class ISAB(nn.Module):
        def __init__(self, dim_in, dim_out, num_heads, num_inds):
            super().__init__()
            self.I = nn.Parameter(torch.Tensor(1, num_inds, dim_out))
            nn.init.xavier_uniform_(self.I)
            self.mab0 = MAB(dim_out, dim_in, dim_out, num_heads)
            self.mab1 = MAB(dim_in, dim_out, dim_out, num_heads)

        def forward(self, X, mask=None):
            H = self.mab0(self.I.repeat(X.size(0), 1, 1), X, key_padding_mask=mask)
            return self.mab1(X, H)

    class PMA(nn.Module):
        def __init__(self, dim, num_heads, num_seeds):
            super().__init__()
            self.S = nn.Parameter(torch.Tensor(1, num_seeds, dim))
            nn.init.xavier_uniform_(self.S)
            self.mab = MAB(dim, dim, dim, num_heads)

        def forward(self, X, mask=None):
            return self.mab(self.S.repeat(X.size(0), 1, 1), X, key_padding_mask=mask)

    class SetTransformer(nn.Module):
        def __init__(self, dim_input=3, dim_hidden=16, num_heads=4, num_inds=4, dim_output=2):
            super().__init__()
            self.enc = nn.ModuleList([ISAB(dim_input, dim_hidden, num_heads, num_inds),
                                      ISAB(dim_hidden, dim_hidden, num_heads, num_inds)])
            self.pma = PMA(dim_hidden, num_heads, 1)
            self.dec = nn.Linear(dim_hidden, dim_output)

        def forward(self, X, mask=None):
            for layer in self.enc:
                X = layer(X, mask)
            return self.dec(self.pma(X, mask)).squeeze(1)

    def deep_sets_pool(x, mask):
        m = mask.unsqueeze(-1).to(x.dtype)
        total = (x * m).sum(dim=1)
        mean = total / m.sum(dim=1).clamp(min=1.0)
        mx = x.masked_fill(~mask[..., None], float("-inf")).max(dim=1).values
        return torch.cat([total, mean, mx], dim=-1)

    B, N = 4, 7
    X = normal(torch, rng, B, N, 3)
    lengths = torch.tensor([7, 5, 3, 6])
    valid = torch.arange(N)[None, :] < lengths[:, None]
    pad_mask = ~valid
    y = torch.from_numpy(rng.standard_normal((B, 2)).astype(np.float32))
    model = SetTransformer()
    fill_(torch, model, rng, 0.3)
    phi = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 8))
    rho = nn.Sequential(nn.Linear(24, 8), nn.ELU(), nn.Linear(8, 2))
    fill_(torch, phi, rng, 0.3)
    fill_(torch, rho, rng, 0.3)
    params = list(model.parameters()) + list(phi.parameters()) + list(rho.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    warmup = 3
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup))
    res["losses"], res["norms"] = [], []
    for _ in range(4):
        pred = model(X, pad_mask)
        ds = rho(deep_sets_pool(phi(X), valid))
        loss = F.mse_loss(pred, y) + F.smooth_l1_loss(ds, y, beta=0.5)
        opt.zero_grad()
        loss.backward()
        res["norms"].append(float(nn.utils.clip_grad_norm_(params, max_norm=1.0)))
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
    res["inducing"] = model.enc[0].I
    res["in_proj_grad"] = model.enc[1].mab0.mha.in_proj_weight.grad
    model.eval()
    with torch.no_grad():
        res["eval_pred"] = model(X, pad_mask)
        # padded elements must not change the prediction
        X2 = X.clone()
        X2[pad_mask] = 100.0
        res["pad_invariant"] = [bool(torch.allclose(model(X2, pad_mask), res["eval_pred"],
                                                    atol=1e-5))]
        perm = torch.tensor([3, 1, 0, 2, 4, 5, 6])
        res["perm_invariant"] = model(X[:1, perm], None)
        mha = model.enc[0].mab1.mha
        q = model.enc[0].mab1.fc_q(X)
        attn_out, attn_w = mha(q, q, q, key_padding_mask=pad_mask,
                               average_attn_weights=False)
        res["attn_out"] = attn_out
        res["attn_w"] = attn_w
        _, attn_avg = mha(q, q, q, key_padding_mask=pad_mask.float() * -1e9)
        res["attn_avg"] = attn_avg

    # cross-attention over sets of another width (kdim / vdim), learned bias key/value and a
    # zero key, a per-head float mask, causal masking by is_causal, gradients through all
    cross = nn.MultiheadAttention(16, 4, kdim=3, vdim=5, batch_first=True, add_bias_kv=True,
                                  add_zero_attn=True, dropout=0.0)
    fill_(torch, cross, rng, 0.3)
    res["cross_params"] = sorted(n for n, _ in cross.named_parameters())
    queries = normal(torch, rng, B, 2, 16).requires_grad_()
    values5 = normal(torch, rng, B, N, 5)
    head_mask = torch.from_numpy(rng.standard_normal((B * 4, 2, N)).astype(np.float32))
    c_out, c_w = cross(queries, X, values5, attn_mask=head_mask,
                       need_weights=True)
    c_out.sum().backward()
    res["cross_out"] = c_out
    res["cross_w"] = c_w
    res["cross_grads"] = [queries.grad, cross.q_proj_weight.grad, cross.bias_k.grad,
                          cross.k_proj_weight.grad]
    self_attn = model.enc[1].mab1.mha
    seq = normal(torch, rng, B, 5, 16)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    res["causal_mask"] = causal
    s_out, s_w = self_attn(seq, seq, seq, attn_mask=causal, is_causal=True)
    res["causal_out"] = [s_out, s_w]

    # Deep Sets over a flat batch of variable-size sets: index_add_, scatter_reduce, bincount
    set_index = torch.from_numpy(np.repeat(np.arange(4), [3, 1, 4, 2]))
    elems = normal(torch, rng, 10, 3).requires_grad_()
    feats = phi(elems)
    pooled_sum = torch.zeros(4, 8).index_add_(0, set_index, feats)
    counts = torch.bincount(set_index, minlength=4).clamp(min=1).unsqueeze(-1)
    pooled_max = torch.full((4, 8), float("-inf")).scatter_reduce(
        0, set_index[:, None].expand(-1, 8), feats, reduce="amax", include_self=False)
    pooled_mean = torch.zeros(4, 8).scatter_reduce(
        0, set_index[:, None].expand(-1, 8), feats, reduce="mean", include_self=False)
    flat_pred = rho(torch.cat([pooled_sum, pooled_sum / counts, pooled_max], dim=-1))
    (flat_pred.square().sum() + pooled_mean.sum()).backward()
    res["flat_sets"] = [pooled_sum, pooled_max, pooled_mean, flat_pred]
    res["flat_sets_grad"] = elems.grad

    # a permutation-equivariant encoder from the stock layers (no positional encodings): in
    # eval without gradients PyTorch packs the padded sets into nested tensors, so padded
    # elements come back as zeros (and the packing warns)
    sab = nn.TransformerEncoder(nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, batch_first=True, activation="gelu"), num_layers=2)
    fill_(torch, sab, rng, 0.2)
    right_padded = normal(torch, rng, B, N, 16)
    sab.train()
    res["sab_train"] = sab(right_padded, src_key_padding_mask=pad_mask)
    sab.eval()
    with torch.no_grad():
        packed = sab(right_padded, src_key_padding_mask=pad_mask)
    res["sab_eval"] = packed
    res["sab_eval_padded_zero"] = [bool((packed[pad_mask] == 0).all())]

    class SlotAttention(nn.Module):
        def __init__(self, num_slots, dim, iters=3, eps=1e-8, hidden_dim=32):
            super().__init__()
            self.num_slots, self.iters, self.eps = num_slots, iters, eps
            self.scale = dim ** -0.5
            self.slots_mu = nn.Parameter(torch.randn(1, 1, dim))
            self.slots_logsigma = nn.Parameter(torch.zeros(1, 1, dim))
            nn.init.xavier_uniform_(self.slots_logsigma)
            self.to_q = nn.Linear(dim, dim)
            self.to_k = nn.Linear(dim, dim)
            self.to_v = nn.Linear(dim, dim)
            self.gru = nn.GRUCell(dim, dim)
            hidden_dim = max(dim, hidden_dim)
            self.mlp = nn.Sequential(nn.Linear(dim, hidden_dim), nn.ReLU(inplace=True),
                                     nn.Linear(hidden_dim, dim))
            self.norm_input = nn.LayerNorm(dim)
            self.norm_slots = nn.LayerNorm(dim)
            self.norm_pre_ff = nn.LayerNorm(dim)

        def forward(self, inputs, noise):
            b, n, d = inputs.shape
            mu = self.slots_mu.expand(b, self.num_slots, -1)
            sigma = self.slots_logsigma.exp().expand(b, self.num_slots, -1)
            slots = mu + sigma * noise
            inputs = self.norm_input(inputs)
            k, v = self.to_k(inputs), self.to_v(inputs)
            for i in range(self.iters):
                if i == self.iters - 1:
                    slots = slots.detach() + mu - mu.detach()
                slots_prev = slots
                slots = self.norm_slots(slots)
                q = self.to_q(slots)
                dots = torch.einsum("bid,bjd->bij", q, k) * self.scale
                attn = dots.softmax(dim=1) + self.eps
                attn = attn / attn.sum(dim=-1, keepdim=True)
                updates = torch.einsum("bjd,bij->bid", v, attn)
                slots = self.gru(updates.reshape(-1, d), slots_prev.reshape(-1, d))
                slots = slots.reshape(b, -1, d)
                slots = slots + self.mlp(self.norm_pre_ff(slots))
            return slots, attn

    def build_grid(resolution):
        ranges = [np.linspace(0.0, 1.0, num=res_) for res_ in resolution]
        grid = np.meshgrid(*ranges, sparse=False, indexing="ij")
        grid = np.stack(grid, axis=-1)
        grid = np.reshape(grid, [resolution[0], resolution[1], -1])
        grid = np.expand_dims(grid, axis=0).astype(np.float32)
        return torch.from_numpy(np.concatenate([grid, 1.0 - grid], axis=-1))

    class SoftPositionEmbed(nn.Module):
        def __init__(self, hidden_size, resolution):
            super().__init__()
            self.embedding = nn.Linear(4, hidden_size, bias=True)
            self.register_buffer("grid", build_grid(resolution))

        def forward(self, inputs):
            return inputs + self.embedding(self.grid)

    class SlotAutoencoder(nn.Module):
        def __init__(self, dim=16, num_slots=3, res_=(6, 6)):
            super().__init__()
            self.res_ = res_
            self.encoder = nn.Conv2d(3, dim, 3, padding=1)
            self.enc_pos = SoftPositionEmbed(dim, res_)
            self.slot_attention = SlotAttention(num_slots, dim, iters=3)
            self.dec_pos = SoftPositionEmbed(dim, res_)
            self.decoder = nn.ConvTranspose2d(dim, 4, 3, stride=1, padding=1)

        def forward(self, image, noise):
            x = F.relu(self.encoder(image)).permute(0, 2, 3, 1)
            x = self.enc_pos(x)
            x = torch.flatten(x, 1, 2)
            slots, attn = self.slot_attention(x, noise)
            b = image.shape[0]
            s = slots.reshape((-1, slots.shape[-1])).unsqueeze(1).unsqueeze(2)
            s = s.repeat((1, self.res_[0], self.res_[1], 1))
            s = self.dec_pos(s).permute(0, 3, 1, 2)
            s = self.decoder(s).permute(0, 2, 3, 1)
            recons, masks = s.reshape(b, -1, s.shape[1], s.shape[2], s.shape[3]).split([3, 1],
                                                                                    dim=-1)
            masks = nn.Softmax(dim=1)(masks)
            recon_combined = torch.sum(recons * masks, dim=1).permute(0, 3, 1, 2)
            return recon_combined, recons, masks, slots, attn

    sa = SlotAutoencoder()
    fill_(torch, sa, rng, 0.25)
    image = normal(torch, rng, 2, 3, 6, 6)
    noise = normal(torch, rng, 2, 3, 16)
    opt2 = torch.optim.Adam(sa.parameters(), lr=4e-4)
    res["slot_losses"] = []
    for _ in range(3):
        recon, recons, masks, slots, attn = sa(image, noise)
        loss = F.mse_loss(recon, image)
        opt2.zero_grad()
        loss.backward()
        opt2.step()
        res["slot_losses"].append(loss.item())
    res["masks_sum"] = masks.sum(dim=1)
    res["slots"] = slots
    res["slot_attn"] = attn
    res["gru_grad"] = sa.slot_attention.gru.weight_hh.grad
    res["mu_grad"] = sa.slot_attention.slots_mu.grad
    res["shapes"] = [list(recons.shape), list(masks.shape)]
    return res


PROGRAMS = [set_transformer_program]

# The causal self-attention outputs (up to 4) are sums that cancel to 0.025 in places, where
# float32 rounding of the terms leaves 1.3e-6.
TOLERANCES = {"set_transformer_program": (1e-5, 5e-6)}


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
