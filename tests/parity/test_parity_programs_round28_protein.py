"""Protein-structure blocks written as OpenFold / ESM write them in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights and data: the Evoformer's pair
stack (triangle multiplicative updates outgoing and incoming by einsum with sigmoid gates and
pair masks, triangle attention around the starting and ending node with a pair bias and an
``inf * (mask - 1)`` mask bias, outer-product mean, transition), the structure module's
invariant point attention (quaternions to rotation matrices, rigid frames composed and
applied, point distances under softplus head weights), FAPE with clamped distances, a distogram
loss from bucketised distances, and ESM's rotary embeddings (cached cos/sin tables,
rotate_half)."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _permute_final_dims(tensor, inds):
    """OpenFold's permute_final_dims: permute only the last len(inds) dims."""
    zero_index = -1 * len(inds)
    first_inds = list(range(len(tensor.shape[:zero_index])))
    return tensor.permute(first_inds + [zero_index + i for i in inds])


def _flatten_final_dims(t, no_dims):
    """OpenFold's flatten_final_dims."""
    return t.reshape(t.shape[:-no_dims] + (-1,))


def _pair_stack(torch, c_z, c_hidden, no_heads):
    """OpenFold's TriangleMultiplicationOutgoing/Incoming, TriangleAttention (starting and
    ending node) and PairTransition, as one residual pair block."""
    nn = torch.nn

    class TriangleMultiplicativeUpdate(nn.Module):
        def __init__(self, outgoing):
            super().__init__()
            self._outgoing = outgoing
            self.linear_a_p = nn.Linear(c_z, c_hidden)
            self.linear_a_g = nn.Linear(c_z, c_hidden)
            self.linear_b_p = nn.Linear(c_z, c_hidden)
            self.linear_b_g = nn.Linear(c_z, c_hidden)
            self.linear_g = nn.Linear(c_z, c_z)
            self.linear_z = nn.Linear(c_hidden, c_z)
            self.layer_norm_in = nn.LayerNorm(c_z)
            self.layer_norm_out = nn.LayerNorm(c_hidden)
            self.sigmoid = nn.Sigmoid()

        def _combine_projections(self, a, b):
            if self._outgoing:
                a, b = _permute_final_dims(a, (2, 0, 1)), _permute_final_dims(b, (2, 1, 0))
            else:
                a, b = _permute_final_dims(a, (2, 1, 0)), _permute_final_dims(b, (2, 0, 1))
            p = torch.matmul(a, b)
            return _permute_final_dims(p, (1, 2, 0))

        def forward(self, z, mask):
            mask = mask.unsqueeze(-1)
            z = self.layer_norm_in(z)
            a = mask * self.sigmoid(self.linear_a_g(z)) * self.linear_a_p(z)
            b = mask * self.sigmoid(self.linear_b_g(z)) * self.linear_b_p(z)
            x = self._combine_projections(a, b)
            eq = "bikc,bjkc->bijc" if self._outgoing else "bkic,bkjc->bijc"
            x_einsum = torch.einsum(eq, a, b)
            x = self.layer_norm_out(x)
            x = self.linear_z(x)
            g = self.sigmoid(self.linear_g(z))
            return x * g, x_einsum

    class TriangleAttention(nn.Module):
        def __init__(self, starting):
            super().__init__()
            self.starting, self.inf = starting, 1e9
            self.layer_norm = nn.LayerNorm(c_z)
            self.linear = nn.Linear(c_z, no_heads, bias=False)
            self.linear_q = nn.Linear(c_z, c_hidden * no_heads, bias=False)
            self.linear_k = nn.Linear(c_z, c_hidden * no_heads, bias=False)
            self.linear_v = nn.Linear(c_z, c_hidden * no_heads, bias=False)
            self.linear_g = nn.Linear(c_z, c_hidden * no_heads)
            self.linear_o = nn.Linear(c_hidden * no_heads, c_z)

        def forward(self, x, mask):
            if not self.starting:
                x = x.transpose(-2, -3)
                mask = mask.transpose(-1, -2)
            x = self.layer_norm(x)
            mask_bias = (self.inf * (mask - 1))[..., :, None, None, :]
            triangle_bias = _permute_final_dims(self.linear(x), (2, 0, 1)).unsqueeze(-4)
            q, k, v = self.linear_q(x), self.linear_k(x), self.linear_v(x)
            q = q.view(q.shape[:-1] + (no_heads, -1)).transpose(-2, -3)
            k = k.view(k.shape[:-1] + (no_heads, -1)).transpose(-2, -3)
            v = v.view(v.shape[:-1] + (no_heads, -1)).transpose(-2, -3)
            q = q / math.sqrt(c_hidden)
            a = torch.matmul(q, _permute_final_dims(k, (1, 0)))
            for b in (mask_bias, triangle_bias):
                a += b
            a = torch.softmax(a, dim=-1)
            o = torch.matmul(a, v).transpose(-2, -3)
            g = self.linear_g(x).sigmoid()
            g = g.view(g.shape[:-1] + (no_heads, -1))
            o = _flatten_final_dims(o * g, 2)
            x = self.linear_o(o)
            if not self.starting:
                x = x.transpose(-2, -3)
            return x

    class PairBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.tri_mul_out = TriangleMultiplicativeUpdate(True)
            self.tri_mul_in = TriangleMultiplicativeUpdate(False)
            self.tri_att_start = TriangleAttention(True)
            self.tri_att_end = TriangleAttention(False)
            self.pair_transition = nn.Sequential(nn.LayerNorm(c_z), nn.Linear(c_z, 2 * c_z),
                                                 nn.ReLU(), nn.Linear(2 * c_z, c_z))

        def forward(self, z, pair_mask):
            extra = []
            for m in (self.tri_mul_out, self.tri_mul_in):
                upd, x_einsum = m(z, pair_mask)
                z = z + upd
                extra.append(x_einsum)
            z = z + self.tri_att_start(z, pair_mask)
            z = z + self.tri_att_end(z, pair_mask)
            z = z + self.pair_transition(z) * pair_mask.unsqueeze(-1)
            return z, extra
    return PairBlock()


def evoformer_pair_program(torch):
    """The pair stack on a masked (B, N, N, c_z) pair representation with an outer-product
    mean from an MSA (einsum "...bac,...dae->...bdce" normalised by the mask's norm), a few
    Adam steps on an MSE target; the triangle einsums against the matmul forms; gradients of
    the masked residues are zero."""
    nn = torch.nn
    rng = np.random.default_rng(2821)
    B, N, S, c_m, c_z, c_hidden, no_heads = 2, 5, 3, 4, 6, 4, 2
    block = _pair_stack(torch, c_z, c_hidden, no_heads)
    opm_a, opm_b = nn.Linear(c_m, 2), nn.Linear(c_m, 2)
    opm_out = nn.Linear(4, c_z)
    modules = nn.ModuleList([block, opm_a, opm_b, opm_out])
    fill_(torch, modules, rng, 0.3)
    z0 = normal(torch, rng, B, N, N, c_z)
    msa = normal(torch, rng, B, S, N, c_m)
    seq_mask = torch.ones(B, N)
    seq_mask[1, -1] = 0.0
    pair_mask = seq_mask[..., :, None] * seq_mask[..., None, :]
    msa_mask = seq_mask[:, None, :].expand(B, S, N)
    target = normal(torch, rng, B, N, N, c_z)
    opt = torch.optim.Adam(modules.parameters(), lr=3e-3)
    res = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        mask = msa_mask.unsqueeze(-1)
        a, b = opm_a(msa) * mask, opm_b(msa) * mask
        a, b = a.transpose(-2, -3), b.transpose(-2, -3)
        outer = torch.einsum("...bac,...dae->...bdce", a, b)
        outer = outer.reshape(outer.shape[:-2] + (-1,))
        outer = opm_out(outer)
        norm = torch.einsum("...abc,...adc->...bdc", mask, mask)
        z = z0 + outer / (1e-3 + norm)
        z, extra = block(z, pair_mask)
        loss = (((z - target) ** 2) * pair_mask[..., None]).sum() / pair_mask.sum()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["z"] = z
    res["einsums"] = extra
    res["params"] = list(modules.parameters())
    zz = z0.clone().requires_grad_()
    out, _ = block(zz, pair_mask)
    (out * pair_mask[..., None]).sum().backward()
    res["masked_grad_zero"] = [bool((zz.grad[1, -1, -1] == 0).all())]
    res["z_grad"] = zz.grad
    return res


def _quat_to_rot(torch, quat):
    """OpenFold's quat_to_rot: outer product of the quaternion with itself against the
    _QTR_MAT 4x4x3x3 table."""
    table = np.zeros((4, 4, 3, 3), dtype=np.float32)
    pairs = {"aa": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "bb": [[1, 0, 0], [0, -1, 0], [0, 0, -1]],
             "cc": [[-1, 0, 0], [0, 1, 0], [0, 0, -1]], "dd": [[-1, 0, 0], [0, -1, 0], [0, 0, 1]],
             "ab": [[0, 0, 0], [0, 0, -2], [0, 2, 0]], "ac": [[0, 0, 2], [0, 0, 0], [-2, 0, 0]],
             "ad": [[0, -2, 0], [2, 0, 0], [0, 0, 0]], "bc": [[0, 2, 0], [2, 0, 0], [0, 0, 0]],
             "bd": [[0, 0, 2], [0, 0, 0], [2, 0, 0]], "cd": [[0, 0, 0], [0, 0, 2], [0, 2, 0]]}
    for key, mat in pairs.items():
        i, j = "abcd".index(key[0]), "abcd".index(key[1])
        table[i, j] = mat
    quat = quat[..., None] * quat[..., None, :]
    mat = torch.from_numpy(table).to(dtype=quat.dtype)
    shaped = mat.view((1,) * len(quat.shape[:-2]) + mat.shape)
    quat = quat[..., None, None] * shaped
    return torch.sum(quat, dim=(-3, -4))


def structure_program(torch):
    """Invariant point attention over rigid frames from normalised quaternions (plus a
    quaternion update composed as in OpenFold's compose_q_update_vec), FAPE with clamp 10 and
    length scale 10, a distogram loss from bucketised pairwise distances, ESM's rotary embedding
    on the attention queries/keys; Adam steps, then the frames' rotations stay orthonormal."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2822)
    B, N, c_s, c_z, H, c, Pq, Pv = 2, 6, 8, 4, 2, 4, 2, 2

    class RotaryEmbedding(nn.Module):
        def __init__(self, dim):
            super().__init__()
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
            self.register_buffer("inv_freq", inv_freq)
            self._seq_len_cached = None
            self._cos_cached = self._sin_cached = None

        def _update_cos_sin_tables(self, x, seq_dimension=-2):
            seq_len = x.shape[seq_dimension]
            if seq_len != self._seq_len_cached or self._cos_cached.device != x.device:
                self._seq_len_cached = seq_len
                t = torch.arange(x.shape[seq_dimension], device=x.device).type_as(self.inv_freq)
                freqs = torch.einsum("i,j->ij", t, self.inv_freq)
                emb = torch.cat((freqs, freqs), dim=-1).to(x.device)
                self._cos_cached = emb.cos()[None, :, :]
                self._sin_cached = emb.sin()[None, :, :]
            return self._cos_cached, self._sin_cached

        def forward(self, q, k):
            cos, sin = self._update_cos_sin_tables(k, seq_dimension=-2)

            def rotate_half(x):
                x1, x2 = x.chunk(2, dim=-1)
                return torch.cat((-x2, x1), dim=-1)

            def apply(x):
                cos_, sin_ = cos[:, : x.shape[-2], :], sin[:, : x.shape[-2], :]
                return (x * cos_) + (rotate_half(x) * sin_)
            return apply(q), apply(k)

    class IPA(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear_q = nn.Linear(c_s, H * c)
            self.linear_kv = nn.Linear(c_s, 2 * H * c)
            self.linear_q_points = nn.Linear(c_s, H * Pq * 3)
            self.linear_kv_points = nn.Linear(c_s, H * (Pq + Pv) * 3)
            self.linear_b = nn.Linear(c_z, H)
            self.head_weights = nn.Parameter(torch.zeros(H))
            self.linear_out = nn.Linear(H * (c_z + c + Pv * 4), c_s)
            self.softplus = nn.Softplus()
            self.rotary = RotaryEmbedding(c)

        def forward(self, s, z, rots, trans, mask):
            q = self.linear_q(s).view(s.shape[:-1] + (H, -1))
            kv = self.linear_kv(s).view(s.shape[:-1] + (H, -1))
            k, v = torch.split(kv, c, dim=-1)
            q, k = self.rotary(q.transpose(-2, -3), k.transpose(-2, -3))
            q, k = q.transpose(-2, -3), k.transpose(-2, -3)

            def apply_frames(pts):
                pts = torch.split(pts, pts.shape[-1] // 3, dim=-1)
                pts = torch.stack(pts, dim=-1)
                return torch.einsum("...ij,...j->...i", rots[..., None, :, :], pts) \
                    + trans[..., None, :]

            q_pts = apply_frames(self.linear_q_points(s))
            q_pts = q_pts.view(q_pts.shape[:-2] + (H, Pq, 3))
            kv_pts = apply_frames(self.linear_kv_points(s))
            kv_pts = kv_pts.view(kv_pts.shape[:-2] + (H, -1, 3))
            k_pts, v_pts = torch.split(kv_pts, [Pq, Pv], dim=-2)
            b = self.linear_b(z)
            a = torch.matmul(_permute_final_dims(q, (1, 0, 2)),
                             _permute_final_dims(k, (1, 2, 0)))
            a *= math.sqrt(1.0 / (3 * c))
            a += math.sqrt(1.0 / 3) * _permute_final_dims(b, (2, 0, 1))
            pt_att = q_pts.unsqueeze(-4) - k_pts.unsqueeze(-5)
            pt_att = sum(torch.unbind(pt_att ** 2, dim=-1))
            hw = self.softplus(self.head_weights).view((1,) * len(pt_att.shape[:-2]) + (-1, 1))
            hw = hw * math.sqrt(1.0 / (3 * (Pq * 9.0 / 2)))
            pt_att = torch.sum(pt_att * hw, dim=-1) * (-0.5)
            square_mask = 1e5 * (mask.unsqueeze(-1) * mask.unsqueeze(-2) - 1)
            a = a + _permute_final_dims(pt_att, (2, 0, 1)) + square_mask.unsqueeze(-3)
            a = torch.softmax(a, dim=-1)
            o = torch.matmul(a, v.transpose(-2, -3).to(dtype=a.dtype)).transpose(-2, -3)
            o = _flatten_final_dims(o, 2)
            o_pt = torch.sum(a[..., None, :, :, None]
                             * _permute_final_dims(v_pts, (1, 3, 0, 2))[..., None, :, :], dim=-2)
            o_pt = _permute_final_dims(o_pt, (2, 0, 3, 1))
            o_pt = torch.einsum("...ji,...j->...i", rots[..., None, None, :, :],
                                o_pt - trans[..., None, None, :])
            o_pt_norm = _flatten_final_dims(torch.sqrt(torch.sum(o_pt ** 2, dim=-1) + 1e-8), 2)
            o_pt = o_pt.reshape(*o_pt.shape[:-3], -1, 3)
            o_pair = torch.matmul(a.transpose(-2, -3), z.to(dtype=a.dtype))
            o_pair = _flatten_final_dims(o_pair, 2)
            cat = torch.cat((o, *torch.unbind(o_pt, dim=-1), o_pt_norm, o_pair), dim=-1)
            return self.linear_out(cat)

    ipa = IPA()
    bb_update = nn.Linear(c_s, 6)
    modules = nn.ModuleList([ipa, bb_update])
    fill_(torch, modules, rng, 0.3)
    # linear_b's bias shifts every logit of a softmax row alike: its gradient is 0 up to
    # rounding, which Adam would blow up to a full step of noise
    ipa.linear_b.bias.requires_grad_(False)
    s = normal(torch, rng, B, N, c_s)
    z = normal(torch, rng, B, N, N, c_z)
    quat0 = normal(torch, rng, B, N, 4)
    quat0 = quat0 / torch.linalg.norm(quat0, dim=-1, keepdim=True)
    trans0 = normal(torch, rng, B, N, 3) * 3
    true_pos = normal(torch, rng, B, N, 3) * 3
    mask = torch.ones(B, N)
    mask[0, 0] = 0
    boundaries = torch.linspace(2.0, 8.0, 7)
    dgram_head = nn.Linear(c_z, 8)
    fill_(torch, dgram_head, rng, 0.3)
    opt = torch.optim.Adam(list(modules.parameters()) + list(dgram_head.parameters()), lr=2e-3)
    res = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        s1 = s + ipa(s, z, _quat_to_rot(torch, quat0), trans0, mask)
        upd = bb_update(s1)
        b_, c_, d_ = upd[..., 0], upd[..., 1], upd[..., 2]
        quat_upd = torch.stack([torch.ones_like(b_), b_, c_, d_], dim=-1)
        quat_upd = quat_upd / torch.sqrt(torch.sum(quat_upd ** 2, dim=-1, keepdim=True))
        a1, v1 = quat0[..., :1], quat0[..., 1:]
        a2, v2 = quat_upd[..., :1], quat_upd[..., 1:]
        new_q = torch.cat([a1 * a2 - (v1 * v2).sum(-1, keepdim=True),
                           a1 * v2 + a2 * v1 + torch.linalg.cross(v1, v2, dim=-1)], dim=-1)
        rots = _quat_to_rot(torch, new_q)
        trans = trans0 + torch.einsum("...ij,...j->...i", _quat_to_rot(torch, quat0),
                                      upd[..., 3:])
        local_pred = torch.einsum("...ji,...j->...i", rots[..., :, None, :, :],
                                  trans[..., None, :, :] - trans[..., :, None, :])
        local_true = torch.einsum("...ji,...j->...i", rots.detach()[..., :, None, :, :],
                                  true_pos[..., None, :, :] - true_pos[..., :, None, :])
        err = torch.sqrt(torch.sum((local_pred - local_true) ** 2, dim=-1) + 1e-4)
        err = torch.clamp(err, min=0, max=10.0) / 10.0
        pm = mask[..., :, None] * mask[..., None, :]
        fape = (err * pm).sum(dim=(-1, -2)) / (1e-8 + pm.sum(dim=(-1, -2)))
        dists = torch.sum((true_pos[..., None, :] - true_pos[..., None, :, :]) ** 2, dim=-1,
                          keepdim=True)
        true_bins = torch.sum(dists > boundaries ** 2, dim=-1)
        logits = dgram_head(z + z.transpose(-2, -3))
        errors = -torch.sum(F.one_hot(true_bins, 8) * F.log_softmax(logits, dim=-1), dim=-1)
        dgram = torch.sum(errors * pm, dim=(-1, -2)) / (1e-6 + pm.sum(dim=(-1, -2)))
        loss = torch.mean(fape + 0.3 * dgram)
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["true_bins"] = true_bins.flatten().tolist()
    res["bucketize"] = torch.bucketize(dists.squeeze(-1).sqrt(), boundaries).flatten().tolist()
    res["bins_dtype"] = [str(true_bins.dtype).rsplit(".", 1)[-1]]
    res["params"] = list(modules.parameters())
    res["rots"] = rots
    eye = torch.eye(3).expand(B, N, 3, 3)
    res["orthonormal"] = [bool(torch.allclose(rots @ rots.transpose(-1, -2), eye, atol=1e-5))]
    res["det"] = torch.linalg.det(rots)
    res["rotary_cache_len"] = [ipa.rotary._seq_len_cached]
    return res


PROGRAMS = [evoformer_pair_program, structure_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 einsum / softmax accumulation order over a few Adam steps
        "evoformer_pair_program": (1e-4, 1e-5),
        "structure_program": (1e-4, 1e-5),
    })
