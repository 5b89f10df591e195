"""AlphaFold/OpenFold-style structure modules written as the reference repositories write them
in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights:
triangle multiplicative updates (outgoing and incoming) by einsum with masks and gates,
triangle attention with a pair bias and a chunk-size loop, invariant point attention over rigid
frames built from quaternions (apply, invert, compose), the backbone update, FAPE with clamping,
the distogram cross-entropy, recycling under no_grad with detach, and an Evoformer block (MSA
row attention with pair bias, column and global attention, outer product mean, lDDT and pLDDT
heads). Sibling _video covers
video models; _video_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _quat_to_rot(torch, quat):
    """OpenFold's quat_to_rot: an outer product with a (4, 4, 3, 3) table, summed."""
    table = np.zeros((4, 4, 3, 3), dtype=np.float32)
    entries = {
        (0, 0): [[1, 0, 0], [0, 1, 0], [0, 0, 1]], (1, 1): [[1, 0, 0], [0, -1, 0], [0, 0, -1]],
        (2, 2): [[-1, 0, 0], [0, 1, 0], [0, 0, -1]], (3, 3): [[-1, 0, 0], [0, -1, 0], [0, 0, 1]],
        (1, 2): [[0, 2, 0], [2, 0, 0], [0, 0, 0]], (1, 3): [[0, 0, 2], [0, 0, 0], [2, 0, 0]],
        (2, 3): [[0, 0, 0], [0, 0, 2], [0, 2, 0]], (0, 1): [[0, 0, 0], [0, 0, -2], [0, 2, 0]],
        (0, 2): [[0, 0, 2], [0, 0, 0], [-2, 0, 0]], (0, 3): [[0, -2, 0], [2, 0, 0], [0, 0, 0]],
    }
    for (i, j), m in entries.items():
        table[i, j] = m
    table = torch.tensor(table, dtype=quat.dtype, device=quat.device)
    quat = quat[..., None] * quat[..., None, :]
    mat = table.view(*((1,) * len(quat.shape[:-2])), 4, 4, 3, 3)
    return torch.sum(quat[..., None, None] * mat, dim=(-3, -4))


class _Rigid:
    """A rotation matrix and translation, applied, inverted and composed like OpenFold's Rigid."""

    def __init__(self, rots, trans):
        self.rots, self.trans = rots, trans

    def apply(self, pts):
        return (self.rots @ pts.unsqueeze(-1)).squeeze(-1) + self.trans

    def invert_apply(self, pts):
        return (self.rots.transpose(-1, -2) @ (pts - self.trans).unsqueeze(-1)).squeeze(-1)

    def invert(self):
        inv = self.rots.transpose(-1, -2)
        return _Rigid(inv, -(inv @ self.trans.unsqueeze(-1)).squeeze(-1))

    def compose(self, other):
        return _Rigid(self.rots @ other.rots, self.apply(other.trans))

    def unsqueeze(self, dim):
        d = dim if dim >= 0 else dim - 1
        return _Rigid(self.rots.unsqueeze(d - 1 if dim < 0 else d), self.trans.unsqueeze(d))

    def stop_rot_gradient(self):
        return _Rigid(self.rots.detach(), self.trans)


def triangle_multiplication_program(torch):
    """TriangleMultiplicationOutgoing/Incoming: LayerNorm, masked gated projections a and b,
    einsum "bikc,bjkc->bijc" (and its incoming transpose), the output gate, with pair masks
    from a sequence mask, trained two Adam steps; also the permute-then-matmul variant."""
    rng = np.random.default_rng(10)
    nn = torch.nn
    N, c_z, c = 5, 8, 6

    class TriMul(nn.Module):
        def __init__(self, outgoing):
            super().__init__()
            self.outgoing = outgoing
            self.ln_in, self.ln_out = nn.LayerNorm(c_z), nn.LayerNorm(c)
            self.a_p, self.a_g = nn.Linear(c_z, c), nn.Linear(c_z, c)
            self.b_p, self.b_g = nn.Linear(c_z, c), nn.Linear(c_z, c)
            self.g, self.z = nn.Linear(c_z, c_z), nn.Linear(c, c_z)

        def _combine(self, a, b):
            if self.outgoing:
                return torch.einsum("...ikc,...jkc->...ijc", a, b)
            p = torch.matmul(a.permute(0, 3, 2, 1), b.permute(0, 3, 1, 2))  # incoming
            return p.permute(0, 2, 3, 1)

        def forward(self, z, mask):
            mask = mask.unsqueeze(-1)
            z = self.ln_in(z)
            a = mask * self.a_g(z).sigmoid() * self.a_p(z)
            b = mask * self.b_g(z).sigmoid() * self.b_p(z)
            x = self.z(self.ln_out(self._combine(a, b)))
            return x * self.g(z).sigmoid()

    res = {}
    seq_mask = torch.tensor([[1.0, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
    pair_mask = seq_mask[..., None] * seq_mask[..., None, :]
    z0 = normal(torch, rng, 2, N, N, c_z)
    for outgoing in (True, False):
        m = TriMul(outgoing)
        fill_(torch, m, rng, 0.3)
        opt = torch.optim.Adam(m.parameters(), lr=1e-2, eps=1e-6)
        for step in range(2):
            z = z0 + m(z0, pair_mask)
            loss = ((z ** 2).sum(-1) * pair_mask).sum() / pair_mask.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            res[f"loss_{outgoing}_{step}"] = loss
        res[f"a_p_{outgoing}"] = m.a_p.weight
        res[f"z_grad_{outgoing}"] = m.z.weight.grad
    a, b = normal(torch, rng, 2, N, N, 3), normal(torch, rng, 2, N, N, 3)
    res["einsum_in"] = torch.einsum("...kic,...kjc->...ijc", a, b)
    res["einsum_in_mm"] = (a.permute(0, 3, 2, 1) @ b.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
    return res


def triangle_attention_program(torch):
    """TriangleAttentionStartingNode/EndingNode: the mask bias inf * (mask - 1), a pair bias
    from a bias-free Linear permuted to heads, gated multi-head attention over rows, chunked
    over the batch-like row dim with a chunk-size loop and torch.cat, and the ending-node
    variant by transpose(-2, -3); chunked must equal unchunked, values and gradients."""
    rng = np.random.default_rng(11)
    nn = torch.nn
    N, c_z, c, H = 6, 8, 4, 2
    inf = 1e9

    class TriAttn(nn.Module):
        def __init__(self, starting):
            super().__init__()
            self.starting = starting
            self.ln = nn.LayerNorm(c_z)
            self.tri = nn.Linear(c_z, H, bias=False)
            self.q, self.k, self.v = (nn.Linear(c_z, H * c, bias=False) for _ in range(3))
            self.g = nn.Linear(c_z, H * c)
            self.o = nn.Linear(H * c, c_z)

        def _attend(self, x, biases):
            q = self.q(x).view(*x.shape[:-1], H, c).transpose(-2, -3) / math.sqrt(c)
            k = self.k(x).view(*x.shape[:-1], H, c).transpose(-2, -3)
            v = self.v(x).view(*x.shape[:-1], H, c).transpose(-2, -3)
            a = torch.matmul(q, k.transpose(-1, -2))
            for bias in biases:
                a = a + bias
            a = torch.nn.functional.softmax(a, dim=-1)
            o = torch.matmul(a, v).transpose(-2, -3)
            g = self.g(x).sigmoid().view(*x.shape[:-1], H, c)
            return self.o((o * g).reshape(*x.shape[:-1], H * c))

        def forward(self, x, mask, chunk_size=None):
            if not self.starting:
                x, mask = x.transpose(-2, -3), mask.transpose(-1, -2)
            x = self.ln(x)
            mask_bias = (inf * (mask - 1))[..., :, None, None, :]
            tri_bias = self.tri(x).permute(0, 3, 1, 2).unsqueeze(-4)
            if chunk_size is None:
                out = self._attend(x, [mask_bias, tri_bias])
            else:
                outs = []
                for i in range(0, x.shape[-3], chunk_size):
                    outs.append(self._attend(x[:, i:i + chunk_size],
                                             [mask_bias[:, i:i + chunk_size], tri_bias]))
                out = torch.cat(outs, dim=-3)
            if not self.starting:
                out = out.transpose(-2, -3)
            return out

    res = {}
    mask = torch.ones(2, N, N)
    mask[0, :, -2:] = 0
    mask[1, -1, :] = 0
    z = normal(torch, rng, 2, N, N, c_z)
    for starting in (True, False):
        m = TriAttn(starting)
        fill_(torch, m, rng, 0.3)
        full = m(z, mask)
        (full ** 2).sum().backward()
        g_full = m.tri.weight.grad.clone()
        m.zero_grad()
        chunked = m(z, mask, chunk_size=4)
        (chunked ** 2).sum().backward()
        res[f"out_{starting}"] = full
        res[f"chunk_same_{starting}"] = bool(torch.allclose(full, chunked, atol=1e-5))
        res[f"grad_same_{starting}"] = bool(torch.allclose(g_full, m.tri.weight.grad, atol=1e-4))
        res[f"tri_grad_{starting}"] = g_full
    return res


def ipa_structure_program(torch):
    """The structure module: invariant point attention over frames from quaternions (query and
    key points mapped to the global frame, squared distances weighted by a softplus head
    weight, the pair bias, output points mapped back by invert_apply and their norms), the
    backbone update from a (b, c, d) quaternion normalised with (1, b, c, d), rigid compose with
    stop_rot_gradient between layers, then FAPE with clamping and the distogram loss."""
    rng = np.random.default_rng(12)
    nn = torch.nn
    F = nn.functional
    N, c_s, c_z, H, c, Pq, Pv = 5, 12, 6, 2, 4, 2, 3
    eps = 1e-8

    class IPA(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.kv = nn.Linear(c_s, H * c), nn.Linear(c_s, 2 * H * c)
            self.q_pts = nn.Linear(c_s, H * Pq * 3)
            self.kv_pts = nn.Linear(c_s, H * (Pq + Pv) * 3)
            self.b = nn.Linear(c_z, H)
            self.head_weights = nn.Parameter(torch.zeros(H))
            self.out = nn.Linear(H * (c_z + c + Pv * 4), c_s)

        def forward(self, s, z, r, mask):
            q = self.q(s).view(*s.shape[:-1], H, c)
            k, v = torch.split(self.kv(s).view(*s.shape[:-1], H, 2 * c), c, dim=-1)
            q_pts = torch.stack(torch.split(self.q_pts(s), H * Pq, dim=-1), dim=-1)
            q_pts = r.unsqueeze(-1).apply(q_pts).view(*q_pts.shape[:-2], H, Pq, 3)
            kv_pts = torch.stack(torch.split(self.kv_pts(s), H * (Pq + Pv), dim=-1), dim=-1)
            kv_pts = r.unsqueeze(-1).apply(kv_pts).view(*kv_pts.shape[:-2], H, -1, 3)
            k_pts, v_pts = torch.split(kv_pts, [Pq, Pv], dim=-2)
            b = self.b(z)
            a = torch.matmul(q.permute(0, 2, 1, 3), k.permute(0, 2, 3, 1))
            a = a * math.sqrt(1.0 / (3 * c)) + math.sqrt(1.0 / 3) * b.permute(0, 3, 1, 2)
            pt_att = q_pts.unsqueeze(-4) - k_pts.unsqueeze(-5)
            pt_att = sum(torch.unbind(pt_att ** 2, dim=-1))
            hw = F.softplus(self.head_weights).view(*((1,) * 3 + (H, 1)))
            hw = hw * math.sqrt(1.0 / (3 * (Pq * 9.0 / 2)))
            pt_att = torch.sum(pt_att * hw, dim=-1) * (-0.5)
            sq_mask = 1e5 * (mask.unsqueeze(-1) * mask.unsqueeze(-2) - 1)
            a = a + pt_att.permute(0, 3, 1, 2) + sq_mask.unsqueeze(-3)
            a = torch.softmax(a, dim=-1)
            o = torch.matmul(a, v.transpose(-2, -3).to(dtype=a.dtype)).transpose(-2, -3)
            o = o.reshape(*o.shape[:-2], -1)
            o_pt = torch.sum(a[..., None, :, :, None]
                             * v_pts.permute(0, 2, 3, 1, 4)[..., None, :, :], dim=-2)
            o_pt = o_pt.permute(0, 3, 1, 2, 4)
            o_pt = r.unsqueeze(-1).unsqueeze(-1).invert_apply(o_pt)
            o_pt_norm = torch.sqrt(torch.sum(o_pt ** 2, dim=-1) + eps).flatten(-2)
            o_pt = o_pt.reshape(*o_pt.shape[:-3], -1, 3)
            o_pair = torch.matmul(a.transpose(-2, -3), z.to(dtype=a.dtype)).flatten(-2)
            feats = torch.cat((o, *torch.unbind(o_pt, dim=-1), o_pt_norm, o_pair), dim=-1)
            return self.out(feats)

    class StructureModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_s, self.ln_z = nn.LayerNorm(c_s), nn.LayerNorm(c_z)
            self.ipa, self.ln_ipa = IPA(), nn.LayerNorm(c_s)
            self.trans = nn.Sequential(nn.Linear(c_s, c_s), nn.ReLU(), nn.Linear(c_s, c_s))
            self.bb = nn.Linear(c_s, 6)
            self.disto = nn.Linear(c_z, 8)

        def forward(self, s, z, mask, n_layers=3):
            s, z = self.ln_s(s), self.ln_z(z)
            quat = torch.zeros(*s.shape[:-1], 4)
            quat[..., 0] = 1
            r = _Rigid(_quat_to_rot(torch, quat), torch.zeros(*s.shape[:-1], 3))
            frames = []
            for _ in range(n_layers):
                s = s + self.ipa(s, z, r, mask)
                s = self.ln_ipa(F.dropout(s, p=0.0, training=self.training))
                s = s + self.trans(s)
                upd = self.bb(s)
                bcd, t = upd[..., :3], upd[..., 3:]
                q = torch.cat((torch.ones_like(bcd[..., :1]), bcd), dim=-1)
                q = q / torch.linalg.norm(q, dim=-1, keepdim=True)
                r = r.compose(_Rigid(_quat_to_rot(torch, q), t))
                frames.append(r)
                r = r.stop_rot_gradient()
            return s, frames, self.disto(z + z.transpose(-2, -3))

    def fape(pred_frames, target_frames, pred_pos, target_pos, mask, clamp=10.0, length=10.0):
        local_pred = pred_frames.invert().unsqueeze(-1).apply(pred_pos.unsqueeze(-3))
        local_tgt = target_frames.invert().unsqueeze(-1).apply(target_pos.unsqueeze(-3))
        err = torch.sqrt(torch.sum((local_pred - local_tgt) ** 2, dim=-1) + 1e-4)
        err = torch.clamp(err, min=0, max=clamp) / length
        err = err * mask[..., None] * mask[..., None, :]
        err = torch.sum(err, dim=-1) / (eps + torch.sum(mask, dim=-1))[..., None]
        return torch.sum(err, dim=-1) / (eps + torch.sum(mask, dim=-1))

    def distogram_loss(logits, pos, mask, min_bin=0.5, max_bin=4.0, no_bins=8):
        bounds = torch.linspace(min_bin, max_bin, no_bins - 1) ** 2
        dists = torch.sum((pos[..., None, :] - pos[..., None, :, :]) ** 2, dim=-1, keepdims=True)
        true_bins = torch.sum(dists > bounds, dim=-1)
        errors = -torch.sum(F.one_hot(true_bins, no_bins) * F.log_softmax(logits, dim=-1), -1)
        square_mask = mask[..., None] * mask[..., None, :]
        denom = eps + torch.sum(square_mask, dim=(-1, -2))
        return (torch.sum(errors * square_mask, dim=-1) / denom[..., None]).sum(-1)

    sm = StructureModule()
    fill_(torch, sm, rng, 0.2)
    s0, z0 = normal(torch, rng, 2, N, c_s), normal(torch, rng, 2, N, N, c_z)
    mask = torch.tensor([[1.0, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    tq = normal(torch, rng, 2, N, 4)
    tq = tq / tq.norm(dim=-1, keepdim=True)
    tgt = _Rigid(_quat_to_rot(torch, tq), normal(torch, rng, 2, N, 3) * 3)
    opt = torch.optim.Adam(sm.parameters(), lr=1e-3)
    res = {"loss": []}
    for step in range(2):
        s, frames, disto = sm(s0, z0, mask)
        f_losses = torch.stack([fape(f, tgt, f.trans, tgt.trans, mask) for f in frames])
        d_loss = distogram_loss(disto, tgt.trans, mask)
        loss = f_losses.mean() + 0.3 * d_loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res[f"fape_{step}"] = f_losses
        res[f"disto_{step}"] = d_loss
    res["rots_orthonormal"] = frames[-1].rots @ frames[-1].rots.transpose(-1, -2)
    res["trans"] = frames[-1].trans
    res["hw_grad"] = sm.ipa.head_weights.grad
    res["bb_grad"] = sm.bb.weight.grad
    res["quat_rot"] = _quat_to_rot(torch, tq)
    res["det"] = torch.linalg.det(res["quat_rot"])
    return res


def recycling_program(torch):
    """AlphaFold recycling: a random number of cycles, all but the last under no_grad (the
    reference's `torch.set_grad_enabled(is_final_iter)`), the previous pair and single
    representations and pseudo-beta positions detached and embedded (LayerNorm, a one-hot
    distance histogram of the recycled positions), and gradients only through the last cycle."""
    rng = np.random.default_rng(13)
    nn = torch.nn
    F = nn.functional
    N, c_m, c_z, bins = 5, 6, 4, 5

    class Recycler(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_m, self.ln_z = nn.LayerNorm(c_m), nn.LayerNorm(c_z)
            self.linear = nn.Linear(bins, c_z)
            self.register_buffer("squared_bins",
                                 torch.linspace(1.0, 6.0, bins) ** 2, persistent=False)

        def forward(self, m, z, x):
            upper = torch.cat([self.squared_bins[1:], self.squared_bins.new_tensor([1e9])],
                              dim=-1)
            d = torch.sum((x[..., None, :] - x[..., None, :, :]) ** 2, dim=-1, keepdims=True)
            d = ((d > self.squared_bins) * (d < upper)).type(x.dtype)
            return self.ln_m(m), self.ln_z(z) + self.linear(d)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_m, self.embed_z = nn.Linear(3, c_m), nn.Linear(6, c_z)
            self.recycle = Recycler()
            self.trunk = nn.Linear(c_z, c_z)
            self.pos = nn.Linear(c_m, 3)

        def iteration(self, feats, prevs):
            m = self.embed_m(feats)
            z = self.embed_z(torch.cat([feats[:, :, None].expand(-1, -1, N, -1),
                                        feats[:, None].expand(-1, N, -1, -1)], -1))
            m_prev, z_prev, x_prev = prevs
            if m_prev is None:
                m_prev = z.new_zeros(m.shape)
                z_prev = z.new_zeros(z.shape)
                x_prev = z.new_zeros((*m.shape[:-1], 3))
            m1, z1 = self.recycle(m_prev, z_prev, x_prev)
            m = m + m1
            z = z + z1
            z = z + torch.tanh(self.trunk(z))
            m = m + z.mean(2)[..., :c_m].sum(-1, keepdim=True)
            return m, z, self.pos(m) * 2.0

        def forward(self, feats, num_iters):
            prevs = [None, None, None]
            is_grad_enabled = torch.is_grad_enabled()
            for cycle_no in range(num_iters):
                is_final_iter = cycle_no == (num_iters - 1)
                with torch.set_grad_enabled(is_grad_enabled and is_final_iter):
                    if is_final_iter and torch.is_autocast_enabled():
                        torch.clear_autocast_cache()
                    m, z, x = self.iteration(feats, prevs)
                    if not is_final_iter:
                        del m
                        prevs = [None, z, x]
                        prevs[0] = self.embed_m(feats).detach()
                        prevs = [p.detach() for p in prevs]
                    res_grad.append(z.requires_grad)
            return m, z, x

    res_grad = []
    model = Model()
    fill_(torch, model, rng, 0.4)
    feats = normal(torch, rng, 2, N, 3)
    target = normal(torch, rng, 2, N, 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res = {"loss": []}
    for num_iters in (1, 3, 2):
        m, z, x = model(feats, num_iters)
        loss = F.mse_loss(x, target) + 0.1 * z.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        res["loss"].append(loss.item())
    res["grad_flags"] = res_grad
    res["recycle_linear"] = model.recycle.linear.weight
    res["buffers"] = [n for n, _ in model.named_buffers()]
    res["state_keys"] = sorted(model.state_dict())
    with torch.no_grad():
        res["eval_x"] = model(feats, 2)[2]
    return res


def evoformer_program(torch):
    """An Evoformer block: MSA row attention with pair bias (gated, masked by inf * (mask - 1)),
    MSA column attention by transposes, the extra-MSA global column attention (masked mean
    query, logsumexp-free softmax), outer product mean by einsum over sequences normalised by
    the mask outer product, msa/pair transitions, and pLDDT and lDDT heads on top; SGD with
    momentum and a gradient hook recording the pair gradient norm."""
    rng = np.random.default_rng(6)
    nn = torch.nn
    F = nn.functional
    S, N, c_m, c_z, H, c, inf = 3, 5, 8, 6, 2, 4, 1e9

    class Attention(nn.Module):
        def __init__(self, c_q):
            super().__init__()
            self.q, self.k, self.v = (nn.Linear(c_q, H * c, bias=False) for _ in range(3))
            self.g, self.o = nn.Linear(c_q, H * c), nn.Linear(H * c, c_q)

        def forward(self, x, biases):
            q = self.q(x).view(*x.shape[:-1], H, -1).transpose(-2, -3)
            k = self.k(x).view(*x.shape[:-1], H, -1).transpose(-2, -3)
            v = self.v(x).view(*x.shape[:-1], H, -1).transpose(-2, -3)
            q = q / math.sqrt(c)
            a = torch.matmul(q, k.transpose(-1, -2))
            for b in biases:
                a += b
            a = torch.softmax(a, dim=-1)
            o = torch.matmul(a, v).transpose(-2, -3)
            o = o * torch.sigmoid(self.g(x)).view(*x.shape[:-1], H, -1)
            return self.o(o.flatten(-2))

    class GlobalAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(c_m, H * c, bias=False)
            self.k, self.v = nn.Linear(c_m, c, bias=False), nn.Linear(c_m, c, bias=False)
            self.g, self.o = nn.Linear(c_m, H * c), nn.Linear(H * c, c_m)

        def forward(self, m, mask):
            q = torch.sum(m * mask.unsqueeze(-1), dim=-2) \
                / (torch.sum(mask, dim=-1)[..., None] + 1e-10)
            q = self.q(q).view(*q.shape[:-1], H, -1) * (c ** -0.5)
            k, v = self.k(m), self.v(m)
            bias = (inf * (mask - 1))[..., :, None, :]
            a = torch.matmul(q, k.transpose(-1, -2)) + bias
            a = torch.softmax(a, dim=-1)
            o = torch.matmul(a, v)
            g = torch.sigmoid(self.g(m)).view(*m.shape[:-1], H, -1)
            o = o.unsqueeze(-3) * g
            return self.o(o.reshape(o.shape[:-2] + (H * c,)))

    class OuterProductMean(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.a, self.b = nn.LayerNorm(c_m), nn.Linear(c_m, 3), nn.Linear(c_m, 3)
            self.o = nn.Linear(9, c_z)

        def forward(self, m, mask):
            ln = self.ln(m)
            mask = mask.unsqueeze(-1)
            a, b = self.a(ln) * mask, self.b(ln) * mask
            a, b = a.transpose(-2, -3), b.transpose(-2, -3)
            outer = torch.einsum("...bac,...dae->...bdce", a, b)
            outer = self.o(outer.reshape(outer.shape[:-2] + (-1,)))
            norm = torch.einsum("...abc,...adc->...bdc", mask, mask)
            return outer / (norm + 1e-3)

    class Evoformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_m_row, self.ln_z_row = nn.LayerNorm(c_m), nn.LayerNorm(c_z)
            self.z_bias = nn.Linear(c_z, H, bias=False)
            self.row, self.col = Attention(c_m), Attention(c_m)
            self.ln_col = nn.LayerNorm(c_m)
            self.glob = GlobalAttention()
            self.msa_t = nn.Sequential(nn.LayerNorm(c_m), nn.Linear(c_m, 4 * c_m), nn.ReLU(),
                                       nn.Linear(4 * c_m, c_m))
            self.opm = OuterProductMean()
            self.plddt = nn.Sequential(nn.LayerNorm(c_m), nn.Linear(c_m, 10))

        def forward(self, m, z, msa_mask):
            mask_bias = (inf * (msa_mask - 1))[..., :, None, None, :]
            zb = self.z_bias(self.ln_z_row(z)).permute(0, 3, 1, 2).unsqueeze(-4)
            m = m + self.row(self.ln_m_row(m), [mask_bias, zb])
            mt = m.transpose(-2, -3)
            col_bias = (inf * (msa_mask.transpose(-1, -2) - 1))[..., :, None, None, :]
            m = m + self.col(self.ln_col(mt), [col_bias]).transpose(-2, -3)
            m = m + self.glob(m.transpose(-2, -3), msa_mask.transpose(-1, -2)).transpose(-2, -3)
            m = m + self.msa_t(m)
            z = z + self.opm(m, msa_mask)
            return m, z, self.plddt(m[..., 0, :, :])

    def lddt(pred, true, mask, cutoff=3.0, eps=1e-10):
        def dmat(x):
            return torch.sqrt(eps + torch.sum((x[..., None, :] - x[..., None, :, :]) ** 2, dim=-1))
        dmat_true, dmat_pred = dmat(true), dmat(pred)
        dists_to_score = (dmat_true < cutoff) * mask[..., None] * mask[..., None, :] \
            * (1.0 - torch.eye(mask.shape[-1]))
        dist_l1 = torch.abs(dmat_true - dmat_pred)
        score = ((dist_l1 < 0.5).type(dist_l1.dtype) + (dist_l1 < 1.0).type(dist_l1.dtype)
                 + (dist_l1 < 2.0).type(dist_l1.dtype) + (dist_l1 < 4.0).type(dist_l1.dtype)) * 0.25
        norm = 1.0 / (eps + torch.sum(dists_to_score, dim=-1))
        return norm * (eps + torch.sum(dists_to_score * score, dim=-1))

    model = Evoformer()
    fill_(torch, model, rng, 0.3)
    m0, z0 = normal(torch, rng, 2, S, N, c_m), normal(torch, rng, 2, N, N, c_z)
    msa_mask = torch.ones(2, S, N)
    msa_mask[0, 2, 3:] = 0
    msa_mask[1, 1:, 4] = 0
    pred_x, true_x = normal(torch, rng, 2, N, 3) * 2, normal(torch, rng, 2, N, 3) * 2
    seq_mask = msa_mask[:, 0]
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, dampening=0.1)
    res = {"loss": [], "znorm": []}
    for _ in range(3):
        m, z, logits = model(m0, z0, msa_mask)
        z.register_hook(lambda g: res["znorm"].append(g.norm().item()))
        with torch.no_grad():
            score = lddt(pred_x, true_x, seq_mask)
            bins = torch.clamp(torch.floor(score * 10).long(), max=9)
        ce = F.cross_entropy(logits.transpose(-1, -2), bins, reduction="none")
        plddt_loss = (ce * seq_mask).sum() / seq_mask.sum()
        loss = plddt_loss + 0.01 * (z ** 2).mean() + 0.01 * m.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["lddt"] = score
    probs = F.softmax(logits, dim=-1)
    res["plddt"] = torch.sum(probs * torch.arange(0.05, 1.0, 0.1), dim=-1) * 100
    res["z_bias_grad"] = model.z_bias.weight.grad
    res["opm_w"] = model.opm.o.weight
    return res


PROGRAMS = [triangle_multiplication_program, triangle_attention_program, ipa_structure_program,
            recycling_program, evoformer_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
