"""Chemistry programs written as their reference repositories write them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: chemprop's D-MPNN
(directed bond messages through a reverse-bond index, index_select/index_add_/scatter_add_,
segment-sum readout), property fine tuning with NaN-masked multitask losses, a SMILES character
VAE (GRU, teacher forcing, KL annealing, multinomial sampling under manual_seed), MolGAN (dense
relational GCN, gumbel_softmax(hard=True), WGAN-GP) and torsional-diffusion-lite (wrapped normal
score on the torus). _fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _molecule_batch(rng):
    """Two small molecules as chemprop's BatchMolGraph builds them: atom features f_atoms,
    directed bond features f_bonds (atom feature of the source concatenated to the bond's),
    a2b (incoming bonds of each atom, zero-padded), b2a (source atom), b2revb (reverse bond);
    index 0 is chemprop's padding atom/bond."""
    edges = [[(0, 1), (1, 2), (2, 3), (3, 0), (2, 4)], [(0, 1), (1, 2)]]
    sizes = [5, 3]
    n_atoms = 1 + sum(sizes)
    a2b = [[] for _ in range(n_atoms)]
    b2a, b2revb = [0], [0]
    a_scope, start = [], 1
    for mol_edges, size in zip(edges, sizes):
        for u, v in mol_edges:
            u, v = u + start, v + start
            b1 = len(b2a)
            b2 = b1 + 1
            a2b[v].append(b1)
            b2a.append(u)
            a2b[u].append(b2)
            b2a.append(v)
            b2revb.extend([b2, b1])
        a_scope.append((start, size))
        start += size
    max_nb = max(len(b) for b in a2b)
    a2b = [b + [0] * (max_nb - len(b)) for b in a2b]
    f_atoms = rng.standard_normal((n_atoms, 6)).astype(np.float32)
    f_atoms[0] = 0
    f_bond_only = rng.standard_normal((len(b2a), 3)).astype(np.float32)
    f_bonds = np.concatenate([f_atoms[b2a], f_bond_only], 1)
    f_bonds[0] = 0
    return (f_atoms, f_bonds, np.array(a2b, dtype=np.int64), np.array(b2a, dtype=np.int64),
            np.array(b2revb, dtype=np.int64), a_scope)


def _index_select_nd(torch, source, index):
    """chemprop.nn_utils.index_select_ND."""
    index_size = index.size()
    suffix_dim = source.size()[1:]
    final_size = index_size + suffix_dim
    target = source.index_select(dim=0, index=index.view(-1))
    return target.view(final_size)


def chemprop_program(torch):
    """chemprop v1 MPNEncoder + FFN, NaN-masked multitask loss, Noam-like schedule."""
    rng = np.random.default_rng(0)
    nn = torch.nn
    f_atoms_np, f_bonds_np, a2b_np, b2a_np, b2revb_np, a_scope = _molecule_batch(rng)
    hidden, depth, tasks = 10, 3, 3

    class MPNEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_i = nn.Linear(f_bonds_np.shape[1], hidden, bias=False)
            self.W_h = nn.Linear(hidden, hidden, bias=False)
            self.W_o = nn.Linear(f_atoms_np.shape[1] + hidden, hidden)
            self.act_func = nn.ReLU()
            self.dropout_layer = nn.Dropout(p=0.0)
            self.cached_zero_vector = nn.Parameter(torch.zeros(hidden), requires_grad=False)

        def forward(self, f_atoms, f_bonds, a2b, b2a, b2revb):
            input = self.W_i(f_bonds)
            message = self.act_func(input)
            for _ in range(depth - 1):
                nei_a_message = _index_select_nd(torch, message, a2b)
                a_message = nei_a_message.sum(dim=1)
                rev_message = message[b2revb]
                message = a_message[b2a] - rev_message
                message = self.W_h(message)
                message = self.act_func(input + message)
                message = self.dropout_layer(message)
            nei_a_message = _index_select_nd(torch, message, a2b)
            a_message = nei_a_message.sum(dim=1)
            a_input = torch.cat([f_atoms, a_message], dim=1)
            atom_hiddens = self.act_func(self.W_o(a_input))
            mol_vecs = []
            for a_start, a_size in a_scope:
                if a_size == 0:
                    mol_vecs.append(self.cached_zero_vector)
                else:
                    cur_hiddens = atom_hiddens.narrow(0, a_start, a_size)
                    mol_vecs.append(cur_hiddens.sum(dim=0) / a_size)
            return torch.stack(mol_vecs, dim=0), atom_hiddens

    enc = MPNEncoder()
    ffn = nn.Sequential(nn.Dropout(0.0), nn.Linear(hidden, 8), nn.ReLU(), nn.Dropout(0.0),
                        nn.Linear(8, tasks))
    model = nn.ModuleList([enc, ffn])
    fill_(torch, [p for p in model.parameters() if p.requires_grad], rng)
    for p in model.parameters():
        if p.dim() == 1 and p.requires_grad:
            nn.init.constant_(p, 0)
        elif p.requires_grad:
            nn.init.xavier_normal_(p)
    fill_(torch, [p for p in model.parameters() if p.requires_grad], rng)
    t = (torch.from_numpy(f_atoms_np), torch.from_numpy(f_bonds_np), torch.from_numpy(a2b_np),
         torch.from_numpy(b2a_np), torch.from_numpy(b2revb_np))
    targets = torch.tensor([[1.0, float("nan"), 0.0], [float("nan"), 2.5, 1.0]])
    mask = ~torch.isnan(targets)
    targets_filled = torch.nan_to_num(targets, nan=0.0)
    class_weights = torch.ones(targets.shape)
    loss_func = nn.MSELoss(reduction="none")
    opt = torch.optim.Adam([{"params": model.parameters(), "lr": 1e-3, "weight_decay": 0}])
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=4,
                                                pct_start=0.5, anneal_strategy="linear")
    res = {"loss": [], "lr": []}
    for _ in range(3):
        mol_vecs, atoms = enc(*t)
        preds = ffn(mol_vecs)
        loss = loss_func(preds, targets_filled) * class_weights * mask
        loss = loss.sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["lr"].append(sched.get_last_lr()[0])
    res["preds"] = preds
    res["atoms"] = atoms
    res["W_h_g"] = enc.W_h.weight.grad
    res["zero_req"] = enc.cached_zero_vector.requires_grad
    # masked metric by torch.where; a fully-NaN task column gives nan, as sklearn would
    sq = torch.where(mask, (preds - targets_filled) ** 2, torch.zeros_like(preds))
    res["rmse_task"] = torch.sqrt(sq.sum(0) / mask.sum(0))
    res["nan_mean"] = torch.nanmean(torch.where(mask, preds, targets), dim=0)
    # chemprop v2 / PyG style aggregation: scatter_add_ over destination atoms, index_add_
    # for the readout with a batch vector, and scatter_reduce mean/amax
    msg = torch.relu(enc.W_i(t[1]))[1:]
    dst = torch.from_numpy(np.array([b2a_np[r] for r in b2revb_np[1:]], dtype=np.int64))
    agg = torch.zeros(len(f_atoms_np), hidden).scatter_add_(
        0, dst.unsqueeze(1).expand(-1, hidden), msg)
    res["agg_scatter"] = agg
    res["agg_index_add"] = torch.zeros(len(f_atoms_np), hidden).index_add_(0, dst, msg)
    batch = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1])
    res["readout_sum"] = torch.zeros(2, hidden).index_add_(0, batch, atoms[1:])
    res["readout_mean"] = torch.zeros(2, hidden).scatter_reduce(
        0, batch[:, None].expand(-1, hidden), atoms[1:], reduce="mean", include_self=False)
    res["readout_max"] = torch.full((2, hidden), -1e4).scatter_reduce(
        0, batch[:, None].expand(-1, hidden), atoms[1:], reduce="amax", include_self=True)
    res["bincount"] = torch.bincount(batch)
    res["seg_sum"] = torch.segment_reduce(atoms[1:], "sum", lengths=torch.tensor([5, 3]))
    # torch_scatter-free readout by offsets (the padding atom 0 left out), as a max
    res["seg_max"] = torch.segment_reduce(atoms, "max", offsets=torch.tensor([1, 6, 9]))
    return res


VOCAB = ["<pad>", "<bos>", "<eos>", "C", "c", "O", "N", "(", ")", "=", "1"]


def smiles_vae_program(torch):
    """Gomez-Bombarelli-style char VAE with GRU encoder/decoder (as in the moses VAE): packed
    encoder, teacher forcing with a word-dropout mask, KL annealing, clip_grad_norm_, sampling."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    V, E, H, Z = len(VOCAB), 8, 12, 4
    smiles = ["CCO", "c1ccccc1", "CC(=O)N", "NCC"]
    stoi = {c: i for i, c in enumerate(VOCAB)}
    seqs = [torch.tensor([1] + [stoi[c] for c in s] + [2], dtype=torch.long) for s in smiles]
    x = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=0)
    lengths = [len(s) for s in seqs]

    x_emb = nn.Embedding(V, E, padding_idx=0)
    encoder_rnn = nn.GRU(E, H, num_layers=1, batch_first=True, bidirectional=True)
    q_mu, q_logvar = nn.Linear(2 * H, Z), nn.Linear(2 * H, Z)
    decoder_rnn = nn.GRU(E + Z, H, num_layers=2, batch_first=True, dropout=0.0)
    decoder_lat = nn.Linear(Z, H)
    decoder_fc = nn.Linear(H, V)
    model = nn.ModuleList([x_emb, encoder_rnn, q_mu, q_logvar, decoder_rnn, decoder_lat,
                           decoder_fc])
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    res = {"loss": [], "kl": [], "recon": []}
    kl_w = [0.0, 0.05, 0.1]
    for step in range(3):
        emb = x_emb(x)
        packed = nn.utils.rnn.pack_padded_sequence(emb, lengths, batch_first=True,
                                                   enforce_sorted=False)
        _, h = encoder_rnn(packed, None)
        h = h[-(1 + int(encoder_rnn.bidirectional)):]
        h = torch.cat(h.split(1), dim=-1).squeeze(0)
        mu, logvar = q_mu(h), q_logvar(h)
        eps = normal(torch, rng, *mu.shape)
        z = mu + (logvar / 2).exp() * eps
        kl_loss = 0.5 * (logvar.exp() + mu ** 2 - 1 - logvar).sum(1).mean()
        # word dropout on the decoder inputs (teacher forcing with <unk>-like pad)
        keep = torch.from_numpy(rng.random(x.shape) > 0.2)
        dec_in = torch.where(keep | (x == 1), x, torch.zeros_like(x))
        z_0 = z.unsqueeze(1).repeat(1, x.size(1), 1)
        x_input = torch.cat([x_emb(dec_in), z_0], dim=-1)
        x_input = nn.utils.rnn.pack_padded_sequence(x_input, lengths, batch_first=True,
                                                    enforce_sorted=False)
        h_0 = decoder_lat(z).unsqueeze(0).repeat(decoder_rnn.num_layers, 1, 1)
        output, _ = decoder_rnn(x_input, h_0)
        output, out_lens = nn.utils.rnn.pad_packed_sequence(output, batch_first=True)
        y = decoder_fc(output)
        recon_loss = F.cross_entropy(y[:, :-1].contiguous().view(-1, y.size(-1)),
                                     x[:, 1:].contiguous().view(-1), ignore_index=0)
        loss = kl_w[step] * kl_loss + recon_loss
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 50)
        opt.step()
        res["loss"].append(loss.item())
        res["kl"].append(kl_loss.item())
        res["recon"].append(recon_loss.item())
    res["out_lens"] = out_lens.tolist()
    res["enc_g"] = encoder_rnn.weight_hh_l0_reverse.grad
    res["dec_g"] = decoder_rnn.weight_ih_l1.grad
    # sampling: greedy decode values; multinomial: shapes/ranges/reproducibility only
    with torch.no_grad():
        n, max_len = 3, 6
        z = normal(torch, rng, n, Z)
        z_0 = z.unsqueeze(1)
        h = decoder_lat(z).unsqueeze(0).repeat(decoder_rnn.num_layers, 1, 1)
        w = torch.tensor(1).repeat(n)
        x_g = torch.tensor([0]).repeat(n, max_len)
        x_g[:, 0] = 1
        end_pads = torch.tensor([max_len]).repeat(n)
        eos_mask = torch.zeros(n, dtype=torch.bool)
        for i in range(1, max_len):
            x_input = torch.cat([x_emb(w).unsqueeze(1), z_0], dim=-1)
            o, h = decoder_rnn(x_input, h)
            y = F.softmax(decoder_fc(o.squeeze(1)) / 1.0, dim=-1)
            w = y.argmax(-1)
            x_g[~eos_mask, i] = w[~eos_mask]
            i_eos_mask = ~eos_mask & (w == 2)
            end_pads[i_eos_mask] = i + 1
            eos_mask = eos_mask | i_eos_mask
        res["greedy"] = x_g
        res["end_pads"] = end_pads
        torch.manual_seed(0)
        s1 = torch.multinomial(y, 5, replacement=True)
        torch.manual_seed(0)
        s2 = torch.multinomial(y, 5, replacement=True)
        s3 = torch.multinomial(y, 4, replacement=False)
        res["multi_shape"] = list(s1.shape)
        res["multi"] = [bool((s1 == s2).all()), s1.dtype == torch.long,
                        bool(((s1 >= 0) & (s1 < V)).all()),
                        bool((s3.sort(1)[0][:, 1:] != s3.sort(1)[0][:, :-1]).all())]
        g = torch.Generator().manual_seed(3)
        res["multi_gen"] = list(torch.multinomial(y[0], 2, generator=g).shape)
    return res


def molgan_program(torch):
    """MolGAN: generator producing edge/node logits, gumbel_softmax(hard=True) discretisation,
    a relational GCN discriminator on dense adjacency, WGAN-GP on the continuous relaxation."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional
    N, T_atom, T_bond, Z = 5, 4, 3, 6   # bond type 0 = no bond

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(nn.Linear(Z, 16), nn.Tanh(), nn.Dropout(0.0),
                                        nn.Linear(16, 16), nn.Tanh())
            self.edges_layer = nn.Linear(16, T_bond * N * N)
            self.nodes_layer = nn.Linear(16, N * T_atom)

        def forward(self, x):
            output = self.layers(x)
            edges_logits = self.edges_layer(output).view(-1, T_bond, N, N)
            edges_logits = (edges_logits + edges_logits.permute(0, 1, 3, 2)) / 2
            edges_logits = edges_logits.permute(0, 2, 3, 1)
            nodes_logits = self.nodes_layer(output).view(-1, N, T_atom)
            return edges_logits, nodes_logits

    class GraphConvolution(nn.Module):
        def __init__(self, in_features, out_feature_list, b_dim):
            super().__init__()
            self.linear1 = nn.Linear(in_features, out_feature_list[0])
            self.linear2 = nn.Linear(out_feature_list[0], out_feature_list[1])
            self.b_dim = b_dim

        def forward(self, inp, adj, activation=None):
            hidden = torch.stack([self.linear1(inp) for _ in range(adj.size(1))], 1)
            hidden = torch.einsum("bijk,bikl->bijl", (adj, hidden))
            hidden = torch.sum(hidden, 1) + self.linear1(inp)
            hidden = activation(hidden) if activation is not None else hidden
            output = torch.stack([self.linear2(hidden) for _ in range(adj.size(1))], 1)
            output = torch.einsum("bijk,bikl->bijl", (adj, output))
            output = torch.sum(output, 1) + self.linear2(hidden)
            return activation(output) if activation is not None else output

    class GraphAggregation(nn.Module):
        def __init__(self, in_features, out_features, m_dim):
            super().__init__()
            self.sigmoid_linear = nn.Sequential(nn.Linear(in_features + m_dim, out_features),
                                                nn.Sigmoid())
            self.tanh_linear = nn.Sequential(nn.Linear(in_features + m_dim, out_features),
                                             nn.Tanh())

        def forward(self, inp, activation):
            i = self.sigmoid_linear(inp)
            j = self.tanh_linear(inp)
            output = torch.sum(torch.mul(i, j), 1)
            return activation(output) if activation is not None else output

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.gcn_layer = GraphConvolution(T_atom, [8, 6], T_bond - 1)
            self.agg_layer = GraphAggregation(6, 8, T_atom)
            self.linear_layer = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
            self.output_layer = nn.Linear(8, 1)

        def forward(self, adj, node, activation=None):
            adj = adj[:, :, :, 1:].permute(0, 3, 1, 2)
            h = self.gcn_layer(node, adj, torch.tanh)
            annotations = torch.cat((h, node), -1)
            h = self.agg_layer(annotations, torch.tanh)
            h = self.linear_layer(h)
            output = self.output_layer(h)
            return activation(output) if activation is not None else output, h

    G, D = Generator(), Discriminator()
    fill_(torch, G, rng, 0.3)
    fill_(torch, D, rng, 0.3)
    g_opt = torch.optim.Adam(G.parameters(), 1e-3, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(D.parameters(), 1e-3, betas=(0.5, 0.999))
    b = 4
    a = torch.from_numpy(rng.integers(0, T_bond, (b, N, N)))
    a = torch.triu(a, 1)
    a = a + a.transpose(1, 2)
    x = torch.from_numpy(rng.integers(0, T_atom, (b, N)))
    a_tensor = F.one_hot(a, T_bond).float()
    x_tensor = F.one_hot(x, T_atom).float()
    res = {"d_loss": [], "g_loss": [], "gp": []}
    for _ in range(2):
        z = normal(torch, rng, b, Z)
        edges_logits, nodes_logits = G(z)
        edges_hat = F.softmax(edges_logits / 1.0, -1)
        nodes_hat = F.softmax(nodes_logits / 1.0, -1)
        logits_real, _ = D(a_tensor, x_tensor)
        logits_fake, _ = D(edges_hat.detach(), nodes_hat.detach())
        eps = torch.from_numpy(rng.random((b, 1, 1, 1)).astype(np.float32))
        x_int0 = (eps * a_tensor + (1. - eps) * edges_hat.detach()).requires_grad_(True)
        x_int1 = (eps.squeeze(-1) * x_tensor + (1. - eps.squeeze(-1)) * nodes_hat.detach()
                  ).requires_grad_(True)
        grad0, grad1 = D(x_int0, x_int1)
        dydx = torch.autograd.grad(outputs=grad0, inputs=(x_int0, x_int1),
                                   grad_outputs=torch.ones(grad0.size()),
                                   retain_graph=True, create_graph=True, only_inputs=True)
        gp = 0
        for dy in dydx:
            dy = dy.view(dy.size(0), -1)
            gp = gp + ((torch.sqrt(torch.sum(dy ** 2, dim=1)) - 1) ** 2).mean()
        d_loss = -torch.mean(logits_real) + torch.mean(logits_fake) + 10 * gp
        d_opt.zero_grad()
        d_loss.backward()
        d_opt.step()
        edges_logits, nodes_logits = G(z)
        edges_hat = F.softmax(edges_logits, -1)
        nodes_hat = F.softmax(nodes_logits, -1)
        logits_fake, _ = D(edges_hat, nodes_hat)
        g_loss = -torch.mean(logits_fake)
        g_opt.zero_grad()
        g_loss.backward()
        g_opt.step()
        res["d_loss"].append(d_loss.item())
        res["g_loss"].append(g_loss.item())
        res["gp"].append(float(gp))
    res["g_grad"] = G.edges_layer.weight.grad
    res["d_grad"] = D.gcn_layer.linear1.weight.grad
    # hard gumbel: one-hot forward, soft gradient; value depends on the RNG, so check structure
    torch.manual_seed(0)
    logits = edges_logits.detach().requires_grad_()
    hard = F.gumbel_softmax(logits, tau=1.0, hard=True)
    (hard * torch.arange(T_bond).float()).sum().backward()
    res["gumbel_shape"] = list(hard.shape)
    res["gumbel"] = [bool((hard.sum(-1) == 1).all()),
                     bool(((hard == 0) | (hard == 1)).all()), logits.grad is not None,
                     bool(torch.isfinite(logits.grad).all()),
                     bool((logits.grad.sum(-1).abs() < 1e-5).all())]
    # postprocess 'hard_gumbel' with argmax, and MolGAN's reward masking by validity
    res["argmax_adj"] = torch.max(edges_hat, -1)[1]
    valid = torch.tensor([True, False, True, True])
    res["masked_reward"] = torch.where(valid, logits_fake.squeeze(-1),
                                       torch.tensor(0.)).masked_fill(~valid, -1.)
    return res


def torsional_diffusion_program(torch):
    """torsional-diffusion lite: wrapped normal score on the torus summed over periodic images
    (as its torus.py precomputes), a small torsion-score MLP on edge features, score matching
    with the score's norm as weight, and an Euler-Maruyama step wrapped to (-pi, pi]."""
    rng = np.random.default_rng(3)
    nn = torch.nn

    def p_wrapped(x, sigma, N=10):
        p_ = 0
        for i in range(-N, N + 1):
            p_ = p_ + torch.exp(-(x + 2 * math.pi * i) ** 2 / 2 / sigma ** 2)
        return p_

    def grad_wrapped(x, sigma, N=10):
        p_ = 0
        for i in range(-N, N + 1):
            p_ = p_ + (x + 2 * math.pi * i) / sigma ** 2 * torch.exp(
                -(x + 2 * math.pi * i) ** 2 / 2 / sigma ** 2)
        return p_

    def score(x, sigma):
        return -grad_wrapped(x, sigma) / p_wrapped(x, sigma)

    sigma_min, sigma_max = 0.01 * math.pi, math.pi
    n_tors, feat = 6, 5
    mlp = nn.Sequential(nn.Linear(feat + 1, 16), nn.SiLU(), nn.Linear(16, 16), nn.SiLU(),
                        nn.Linear(16, 1))
    fill_(torch, mlp, rng, 0.3)
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    edge_feat = normal(torch, rng, n_tors, feat)
    res = {"loss": []}
    for _ in range(3):
        t = float(rng.random())
        sigma = np.exp(np.log(sigma_min) + t * (np.log(sigma_max) - np.log(sigma_min)))
        tor = torch.from_numpy(rng.standard_normal(n_tors).astype(np.float32)) * sigma
        tor = (tor + math.pi) % (2 * math.pi) - math.pi
        target = score(tor.double(), float(sigma)).float()
        norm = torch.tensor(float((score(torch.linspace(-math.pi, math.pi, 50).double(),
                                               float(sigma)) ** 2).mean()))
        sig_in = torch.full((n_tors, 1), math.log(sigma))
        pred = mlp(torch.cat([edge_feat, sig_in], 1)).squeeze(-1)
        loss = ((pred - target / norm.sqrt()) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["target"] = target
    res["p_wrapped"] = p_wrapped(torch.linspace(-4, 4, 9, dtype=torch.float64), 0.7)
    res["score_f32"] = score(torch.linspace(-3, 3, 7), 0.5)
    # reverse SDE step
    with torch.no_grad():
        g = sigma * math.sqrt(2 * math.log(sigma_max / sigma_min))
        z = normal(torch, rng, n_tors)
        x_t = tor + g ** 2 * 0.1 * pred * norm.sqrt() + g * math.sqrt(0.1) * z
        res["wrapped"] = torch.remainder(x_t + math.pi, 2 * math.pi) - math.pi
        res["atan2"] = torch.atan2(torch.sin(x_t), torch.cos(x_t))
    res["grad"] = mlp[0].weight.grad
    return res


PROGRAMS = [chemprop_program, smiles_vae_program, molgan_program,
            torsional_diffusion_program]

TOLERANCES = {
    # the gradient penalty's double backward sums einsum products of gradients ~10 in float32
    "molgan_program": (1e-4, 1e-5),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
