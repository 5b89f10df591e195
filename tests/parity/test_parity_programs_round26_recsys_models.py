"""Recommendation models of round 26 (see test_parity_programs_round26_recsys.py), second part:
DeepCTR-Torch's interaction layers (xDeepFM's CIN, AutoInt, FiBiNET, AFM, PNN), DIN and DIEN
(Dice, masked attention pooling, packed GRUs and AUGRU/AGRU cells over a PackedSequence),
LightGCN and NGCF over a SciPy-normalised sparse adjacency, and collaborative filtering by
hand (biased MF with SparseAdam, ALS, EASE, Mult-VAE/DAE)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def ctr_zoo_program(torch):
    """DeepCTR-Torch's interaction layers on one batch of field embeddings: xDeepFM's CIN
    (einsum 'bhd,bmd->bhmd', Conv1d(kernel 1), split_half), AutoInt (tensordot projections,
    stacked head splits, an in-place ``/=`` on the einsum scores, torch.split(result, 1, )),
    FiBiNET (SENET with mean(out=None) and the three bilinear types over
    itertools.combinations), AFM attention pooling, PNN inner and 'mat' outer products (an
    in-place unsqueeze_ on a cat result), an L1+L2 regulariser, SGD and a summed BCE."""
    import itertools
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2612)
    B, n_fields, dim = 4, 4, 6

    class CIN(nn.Module):
        def __init__(self, field_size, layer_size=(4, 3), split_half=True):
            super().__init__()
            self.layer_size, self.split_half = layer_size, split_half
            self.field_nums = [field_size]
            self.activation = nn.ReLU()
            self.conv1ds = nn.ModuleList()
            for i, size in enumerate(self.layer_size):
                self.conv1ds.append(nn.Conv1d(self.field_nums[-1] * self.field_nums[0], size, 1))
                if self.split_half:
                    if i != len(self.layer_size) - 1 and size % 2 > 0:
                        raise ValueError("layer_size must be even number except for the last "
                                         "layer when split_half=True")
                    self.field_nums.append(size // 2)
                else:
                    self.field_nums.append(size)

        def forward(self, inputs):
            batch_size, dim = inputs.shape[0], inputs.shape[-1]
            hidden_nn_layers, final_result = [inputs], []
            for i, size in enumerate(self.layer_size):
                x = torch.einsum("bhd,bmd->bhmd", hidden_nn_layers[-1], hidden_nn_layers[0])
                x = x.reshape(batch_size, hidden_nn_layers[-1].shape[1]
                              * hidden_nn_layers[0].shape[1], dim)
                curr_out = self.activation(self.conv1ds[i](x))
                if i != len(self.layer_size) - 1:
                    next_hidden, direct_connect = torch.split(curr_out, 2 * [size // 2], 1)
                else:
                    direct_connect, next_hidden = curr_out, 0
                final_result.append(direct_connect)
                hidden_nn_layers.append(next_hidden)
            return torch.sum(torch.cat(final_result, dim=1), -1)

    class InteractingLayer(nn.Module):
        def __init__(self, embedding_size, head_num=2, use_res=True, scaling=True):
            super().__init__()
            self.att_embedding_size = embedding_size // head_num
            self.head_num, self.use_res, self.scaling = head_num, use_res, scaling
            self.W_Query = nn.Parameter(torch.Tensor(embedding_size, embedding_size))
            self.W_key = nn.Parameter(torch.Tensor(embedding_size, embedding_size))
            self.W_Value = nn.Parameter(torch.Tensor(embedding_size, embedding_size))
            self.W_Res = nn.Parameter(torch.Tensor(embedding_size, embedding_size))

        def forward(self, inputs):
            querys = torch.tensordot(inputs, self.W_Query, dims=([-1], [0]))
            keys = torch.tensordot(inputs, self.W_key, dims=([-1], [0]))
            values = torch.tensordot(inputs, self.W_Value, dims=([-1], [0]))
            querys = torch.stack(torch.split(querys, self.att_embedding_size, dim=2))
            keys = torch.stack(torch.split(keys, self.att_embedding_size, dim=2))
            values = torch.stack(torch.split(values, self.att_embedding_size, dim=2))
            inner_product = torch.einsum("bnik,bnjk->bnij", querys, keys)
            if self.scaling:
                inner_product /= self.att_embedding_size ** 0.5
            self.normalized_att_scores = F.softmax(inner_product, dim=-1)
            result = torch.matmul(self.normalized_att_scores, values)
            result = torch.cat(torch.split(result, 1, ), dim=-1)
            result = torch.squeeze(result, dim=0)
            if self.use_res:
                result += torch.tensordot(inputs, self.W_Res, dims=([-1], [0]))
            return F.relu(result)

    class SENETLayer(nn.Module):
        def __init__(self, filed_size, reduction_ratio=2):
            super().__init__()
            reduction_size = max(1, filed_size // reduction_ratio)
            self.excitation = nn.Sequential(nn.Linear(filed_size, reduction_size, bias=False),
                                            nn.ReLU(),
                                            nn.Linear(reduction_size, filed_size, bias=False),
                                            nn.ReLU())

        def forward(self, inputs):
            Z = torch.mean(inputs, dim=-1, out=None)
            A = self.excitation(Z)
            return torch.mul(inputs, torch.unsqueeze(A, dim=2))

    class BilinearInteraction(nn.Module):
        def __init__(self, filed_size, embedding_size, bilinear_type):
            super().__init__()
            self.bilinear_type = bilinear_type
            if bilinear_type == "all":
                self.bilinear = nn.Linear(embedding_size, embedding_size, bias=False)
            elif bilinear_type == "each":
                self.bilinear = nn.ModuleList([nn.Linear(embedding_size, embedding_size,
                                                         bias=False) for _ in range(filed_size)])
            else:
                self.bilinear = nn.ModuleList([
                    nn.Linear(embedding_size, embedding_size, bias=False)
                    for _ in itertools.combinations(range(filed_size), 2)])

        def forward(self, inputs):
            inputs = torch.split(inputs, 1, dim=1)
            if self.bilinear_type == "all":
                p = [torch.mul(self.bilinear(v_i), v_j)
                     for v_i, v_j in itertools.combinations(inputs, 2)]
            elif self.bilinear_type == "each":
                p = [torch.mul(self.bilinear[i](inputs[i]), inputs[j])
                     for i, j in itertools.combinations(range(len(inputs)), 2)]
            else:
                p = [torch.mul(bilinear(v[0]), v[1])
                     for v, bilinear in zip(itertools.combinations(inputs, 2), self.bilinear)]
            return torch.cat(p, dim=1)

    class AFMLayer(nn.Module):
        def __init__(self, in_features, attention_factor=4):
            super().__init__()
            self.attention_W = nn.Parameter(torch.Tensor(in_features, attention_factor))
            self.attention_b = nn.Parameter(torch.Tensor(attention_factor))
            self.projection_h = nn.Parameter(torch.Tensor(attention_factor, 1))
            self.projection_p = nn.Parameter(torch.Tensor(in_features, 1))
            self.dropout = nn.Dropout(0.0)

        def forward(self, inputs):
            row, col = [], []
            for r, c in itertools.combinations(inputs, 2):
                row.append(r)
                col.append(c)
            p = torch.cat(row, dim=1)
            q = torch.cat(col, dim=1)
            bi_interaction = p * q
            attention_temp = F.relu(torch.tensordot(
                bi_interaction, self.attention_W, dims=([-1], [0])) + self.attention_b)
            self.normalized_att_score = F.softmax(torch.tensordot(
                attention_temp, self.projection_h, dims=([-1], [0])), dim=1)
            attention_output = torch.sum(self.normalized_att_score * bi_interaction, dim=1)
            attention_output = self.dropout(attention_output)
            return torch.tensordot(attention_output, self.projection_p, dims=([-1], [0]))

    class OutterProductLayer(nn.Module):
        def __init__(self, field_size, embedding_size):
            super().__init__()
            num_pairs = int(field_size * (field_size - 1) / 2)
            self.kernel = nn.Parameter(torch.Tensor(embedding_size, num_pairs, embedding_size))

        def forward(self, inputs):
            embed_list = inputs
            row, col = [], []
            num_inputs = len(embed_list)
            for i in range(num_inputs - 1):
                for j in range(i + 1, num_inputs):
                    row.append(i)
                    col.append(j)
            p = torch.cat([embed_list[idx] for idx in row], dim=1)
            q = torch.cat([embed_list[idx] for idx in col], dim=1)
            p.unsqueeze_(dim=1)
            return torch.sum(torch.mul(torch.transpose(
                torch.sum(torch.mul(p, self.kernel), dim=-1), 2, 1), q), dim=-1)

    class Zoo(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = nn.ModuleList([nn.Embedding(5, dim) for _ in range(n_fields)])
            self.cin = CIN(n_fields)
            self.autoint = InteractingLayer(dim)
            self.senet = SENETLayer(n_fields)
            self.bilinear = nn.ModuleList([BilinearInteraction(n_fields, dim, t)
                                           for t in ("all", "each", "interaction")])
            self.afm = AFMLayer(dim)
            self.opl = OutterProductLayer(n_fields, dim)
            n_pairs = n_fields * (n_fields - 1) // 2
            self.out = nn.Linear(5 + n_fields * dim + 3 * n_pairs * dim + 1 + n_pairs + n_pairs,
                                 1)

        def forward(self, X):
            embs = [emb(X[:, i:i + 1]) for i, emb in enumerate(self.embeddings)]
            stacked = torch.cat(embs, dim=1)
            senet = self.senet(stacked)
            inner = torch.sum(torch.cat([embs[i] for i, _ in itertools.combinations(
                range(n_fields), 2)], dim=1) * torch.cat([embs[j] for _, j in
                                                           itertools.combinations(
                                                               range(n_fields), 2)], dim=1),
                dim=2, keepdim=False)
            parts = [self.cin(stacked), torch.flatten(self.autoint(stacked), start_dim=1)]
            parts += [torch.flatten(b(senet), start_dim=1) for b in self.bilinear]
            parts += [self.afm(embs), inner, self.opl(embs)]
            return torch.sigmoid(self.out(torch.cat(parts, dim=-1)))

    model = Zoo()
    fill_(torch, model, rng, 0.3)
    X = torch.tensor(rng.integers(0, 5, (B, n_fields)))
    y = torch.tensor(rng.integers(0, 2, (B, 1)).astype(np.float32))
    # SGD, not Adagrad: AFM's attention bias shifts every pair's logit alike, so its exact
    # gradient is 0, and Adagrad would turn the 1e-10 rounding left there into lr-sized steps
    optim = torch.optim.SGD(model.parameters(), lr=0.05)
    res = {"losses": []}
    for _ in range(3):
        y_pred = model(X).squeeze()
        optim.zero_grad()
        loss = F.binary_cross_entropy(y_pred, y.squeeze(), reduction="sum")
        reg_loss = torch.zeros((1,))
        for name, parameter in model.named_parameters():
            if "embeddings" in name:
                reg_loss += torch.sum(1e-4 * torch.abs(parameter))
                reg_loss += 1e-4 * torch.sum(torch.square(parameter))
        total_loss = loss + reg_loss
        total_loss.backward()
        optim.step()
        res["losses"].append([loss.item(), reg_loss.item()])
    res["attention"] = [model.autoint.normalized_att_scores, model.afm.normalized_att_score]
    res["params"] = list(model.parameters())
    try:
        CIN(3, layer_size=(3, 2))
    except ValueError as err:
        res["cin_error"] = [str(err)]
    return res


def din_dien_program(torch):
    """DIN and DIEN as DeepCTR-Torch writes them: Dice (BatchNorm1d on a transposed 3-D input
    and a learned alpha), the local activation unit on [q, k, q - k, q * k], key masks from
    arange().repeat() < lengths, -2 ** 32 + 1 paddings through torch.where and softmax; the
    interest extractor as nn.GRU over pack_padded_sequence(enforce_sorted=False) and
    pad_packed_sequence(total_length=...), an auxiliary click/no-click BCE, and the AUGRU /
    AGRU cells looped over a PackedSequence's batch_sizes (unpacked as a 4-tuple, sliced by
    0-dim tensors, written into a zeros buffer by slice assignment, re-wrapped)."""
    nn, F = torch.nn, torch.nn.functional
    PackedSequence = torch.nn.utils.rnn.PackedSequence
    pack_padded_sequence = torch.nn.utils.rnn.pack_padded_sequence
    pad_packed_sequence = torch.nn.utils.rnn.pad_packed_sequence
    rng = np.random.default_rng(2615)
    B, T, E = 4, 5, 4

    class Dice(nn.Module):
        def __init__(self, emb_size, dim=2, epsilon=1e-8):
            super().__init__()
            self.dim = dim
            self.bn = nn.BatchNorm1d(emb_size, eps=epsilon)
            self.sigmoid = nn.Sigmoid()
            shape = (emb_size,) if dim == 2 else (emb_size, 1)
            self.alpha = nn.Parameter(torch.zeros(shape))

        def forward(self, x):
            if self.dim == 2:
                x_p = self.sigmoid(self.bn(x))
                return self.alpha * (1 - x_p) * x + x_p * x
            x = torch.transpose(x, 1, 2)
            x_p = self.sigmoid(self.bn(x))
            out = self.alpha * (1 - x_p) * x + x_p * x
            return torch.transpose(out, 1, 2)

    class LocalActivationUnit(nn.Module):
        def __init__(self, hidden_units=(6,), embedding_dim=E):
            super().__init__()
            self.linear = nn.Linear(4 * embedding_dim, hidden_units[0])
            self.act = Dice(hidden_units[0], dim=3)
            # bias=False: a bias before the softmax over the sequence has an exact gradient
            # of 0, whose rounding noise Adam would turn into lr-sized steps
            self.dense = nn.Linear(hidden_units[-1], 1, bias=False)

        def forward(self, query, user_behavior):
            user_behavior_len = user_behavior.size(1)
            queries = query.expand(-1, user_behavior_len, -1)
            attention_input = torch.cat([queries, user_behavior, queries - user_behavior,
                                         queries * user_behavior], dim=-1)
            return self.dense(self.act(self.linear(attention_input)))

    class AttentionSequencePoolingLayer(nn.Module):
        def __init__(self, weight_normalization=False, return_score=False):
            super().__init__()
            self.weight_normalization, self.return_score = weight_normalization, return_score
            self.local_att = LocalActivationUnit()

        def forward(self, query, keys, keys_length):
            batch_size, max_length, _ = keys.size()
            keys_masks = torch.arange(max_length, device=keys_length.device,
                                      dtype=keys_length.dtype).repeat(batch_size, 1)
            keys_masks = keys_masks < keys_length.view(-1, 1)
            keys_masks = keys_masks.unsqueeze(1)
            attention_score = self.local_att(query, keys)
            outputs = torch.transpose(attention_score, 1, 2)
            if self.weight_normalization:
                paddings = torch.ones_like(outputs) * (-2 ** 32 + 1)
            else:
                paddings = torch.zeros_like(outputs)
            outputs = torch.where(keys_masks, outputs, paddings)
            if self.weight_normalization:
                outputs = F.softmax(outputs, dim=-1)
            if not self.return_score:
                outputs = torch.matmul(outputs, keys)
            return outputs

    class AUGRUCell(nn.Module):
        def __init__(self, input_size, hidden_size, attentional_update=True):
            super().__init__()
            self.hidden_size, self.augru = hidden_size, attentional_update
            self.weight_ih = nn.Parameter(torch.Tensor(3 * hidden_size, input_size))
            self.register_parameter("weight_ih", self.weight_ih)
            self.weight_hh = nn.Parameter(torch.Tensor(3 * hidden_size, hidden_size))
            self.bias_ih = nn.Parameter(torch.Tensor(3 * hidden_size))
            self.bias_hh = nn.Parameter(torch.Tensor(3 * hidden_size))
            for tensor in [self.bias_ih, self.bias_hh]:
                nn.init.zeros_(tensor, )

        def forward(self, inputs, hx, att_score):
            gi = F.linear(inputs, self.weight_ih, self.bias_ih)
            gh = F.linear(hx, self.weight_hh, self.bias_hh)
            i_r, i_z, i_n = gi.chunk(3, 1)
            h_r, h_z, h_n = gh.chunk(3, 1)
            reset_gate = torch.sigmoid(i_r + h_r)
            new_state = torch.tanh(i_n + reset_gate * h_n)
            att_score = att_score.view(-1, 1)
            if self.augru:
                update_gate = att_score * torch.sigmoid(i_z + h_z)
                return (1. - update_gate) * hx + update_gate * new_state
            return (1. - att_score) * hx + att_score * new_state

    class DynamicGRU(nn.Module):
        def __init__(self, input_size, hidden_size, gru_type):
            super().__init__()
            self.hidden_size = hidden_size
            self.rnn = AUGRUCell(input_size, hidden_size, gru_type == "AUGRU")

        def forward(self, inputs, att_scores=None, hx=None):
            if not isinstance(inputs, PackedSequence) or not isinstance(att_scores,
                                                                        PackedSequence):
                raise NotImplementedError("DynamicGRU only supports packed input and "
                                          "att_scores")
            inputs, batch_sizes, sorted_indices, unsorted_indices = inputs
            att_scores, _, _, _ = att_scores
            max_batch_size = int(batch_sizes[0])
            if hx is None:
                hx = torch.zeros(max_batch_size, self.hidden_size, dtype=inputs.dtype,
                                 device=inputs.device)
            outputs = torch.zeros(inputs.size(0), self.hidden_size, dtype=inputs.dtype,
                                  device=inputs.device)
            begin = 0
            for batch in batch_sizes:
                new_hx = self.rnn(inputs[begin:begin + batch], hx[0:batch],
                                  att_scores[begin:begin + batch])
                outputs[begin:begin + batch] = new_hx
                hx = new_hx
                begin += batch
            return PackedSequence(outputs, batch_sizes, sorted_indices, unsorted_indices)

    item_emb = nn.Embedding(10, E, padding_idx=0)
    din_att = AttentionSequencePoolingLayer(weight_normalization=True)
    score_att = AttentionSequencePoolingLayer(weight_normalization=True, return_score=True)
    gru = nn.GRU(input_size=E, hidden_size=E, batch_first=True)
    augru = DynamicGRU(E, E, "AUGRU")
    agru = DynamicGRU(E, E, "AGRU")
    head = nn.Sequential(nn.Linear(4 * E, 6), Dice(6), nn.Linear(6, 1))
    modules = nn.ModuleList([item_emb, din_att, score_att, gru, augru, agru, head])
    fill_(torch, modules, rng, 0.4)
    opt = torch.optim.Adam(modules.parameters(), lr=0.01)
    res = {"losses": []}
    modules.train()
    for step in range(3):
        lengths = torch.tensor(rng.integers(1, T + 1, B))
        hist = torch.tensor(rng.integers(1, 10, (B, T)))
        hist = hist.masked_fill(torch.arange(T)[None, :] >= lengths[:, None], 0)
        neg = torch.tensor(rng.integers(1, 10, (B, T)))
        target_item = torch.tensor(rng.integers(1, 10, (B, 1)))
        y = torch.tensor(rng.integers(0, 2, (B, 1)).astype(np.float32))
        query, keys = item_emb(target_item), item_emb(hist)
        din_out = din_att(query, keys, lengths).squeeze(1)
        packed_keys = pack_padded_sequence(keys, lengths=lengths, batch_first=True,
                                           enforce_sorted=False)
        packed_interests, _ = gru(packed_keys)
        interests, _ = pad_packed_sequence(packed_interests, batch_first=True,
                                           padding_value=0.0, total_length=T)
        # auxiliary loss: interest t should score the click at t + 1 above a sampled one
        mask = (torch.arange(T - 1)[None, :] < (lengths[:, None] - 1)).float()
        click_p = torch.sigmoid((interests[:, :-1] * keys[:, 1:]).sum(-1))
        noclick_p = torch.sigmoid((interests[:, :-1] * item_emb(neg)[:, 1:]).sum(-1))
        aux = F.binary_cross_entropy(torch.cat([click_p, noclick_p], dim=0),
                                     torch.cat([torch.ones_like(click_p),
                                                torch.zeros_like(noclick_p)], dim=0),
                                     weight=torch.cat([mask, mask], dim=0), reduction="sum")
        aux = aux / mask.sum().clamp(min=1)
        scores = score_att(query, interests, lengths).squeeze(1)
        packed_scores = pack_padded_sequence(scores, lengths=lengths, batch_first=True,
                                             enforce_sorted=False)
        packed_interests = pack_padded_sequence(interests, lengths=lengths, batch_first=True,
                                                enforce_sorted=False)
        finals = []
        for cell in (augru, agru):
            out = cell(packed_interests, packed_scores)
            padded, out_lengths = pad_packed_sequence(out, batch_first=True, total_length=T)
            finals.append(padded[torch.arange(B), out_lengths - 1])
        logit = head(torch.cat([din_out, query.squeeze(1)] + finals, dim=-1))
        loss = F.binary_cross_entropy_with_logits(logit, y) + 0.5 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append([loss.item(), aux.item()])
    res["batch_sizes"] = out.batch_sizes.tolist()
    res["sorted_indices"] = out.sorted_indices.tolist()
    res["scores"] = scores
    res["finals"] = finals
    res["params"] = list(modules.parameters())
    try:
        augru(interests, scores)
    except NotImplementedError as err:
        # ember appends a line naming the failing module (NOTE [Module error context])
        res["unpacked"] = [type(err).__name__, str(err).split("\n")[0]]
    return res


def lightgcn_program(torch):
    """LightGCN and NGCF as their repositories write them: a SciPy-normalised bipartite
    adjacency turned into torch.sparse.FloatTensor from coo rows/cols (and coalesced),
    propagation by torch.sparse.mm with a stack/mean over layers and torch.split, a
    node-dropout on the sparse values with a fixed NumPy keep mask, BPR as softplus of the
    score difference plus a 1/2-norm regulariser, NGCF's bi-interaction with LeakyReLU and
    F.normalize, and top-k evaluation after masking seen items with -(1 << 10)."""
    import scipy.sparse as sp
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2611)
    n_users, n_items, d, n_layers = 5, 7, 4, 2
    R = (rng.random((n_users, n_items)) < 0.4).astype(np.float32)
    R[:, 0] = 1.0
    adj_mat = sp.dok_matrix((n_users + n_items, n_users + n_items), dtype=np.float32)
    adj_mat = adj_mat.tolil()
    adj_mat[:n_users, n_users:] = R
    adj_mat[n_users:, :n_users] = R.T
    adj_mat = adj_mat.todok()
    rowsum = np.array(adj_mat.sum(axis=1))
    d_inv = np.power(rowsum, -0.5).flatten()
    d_inv[np.isinf(d_inv)] = 0.
    d_mat = sp.diags(d_inv)
    norm_adj = d_mat.dot(adj_mat).dot(d_mat).tocsr()

    def _convert_sp_mat_to_sp_tensor(X):
        coo = X.tocoo().astype(np.float32)
        row = torch.Tensor(coo.row).long()
        col = torch.Tensor(coo.col).long()
        index = torch.stack([row, col])
        data = torch.FloatTensor(coo.data)
        return torch.sparse.FloatTensor(index, data, torch.Size(coo.shape))

    Graph = _convert_sp_mat_to_sp_tensor(norm_adj).coalesce()
    keep = torch.from_numpy(rng.random(Graph._nnz()) < 0.8)

    def dropout_x(x, keep_prob):
        size = x.size()
        index = x.indices().t()
        values = x.values()
        index = index[keep]
        values = values[keep] / keep_prob
        return torch.sparse.FloatTensor(index.t(), values, size)

    class LightGCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding_user = nn.Embedding(num_embeddings=n_users, embedding_dim=d)
            self.embedding_item = nn.Embedding(num_embeddings=n_items, embedding_dim=d)
            self.f = nn.Sigmoid()

        def computer(self, dropout):
            users_emb = self.embedding_user.weight
            items_emb = self.embedding_item.weight
            all_emb = torch.cat([users_emb, items_emb])
            embs = [all_emb]
            g_droped = dropout_x(Graph, 0.8) if dropout else Graph
            for layer in range(n_layers):
                all_emb = torch.sparse.mm(g_droped, all_emb)
                embs.append(all_emb)
            embs = torch.stack(embs, dim=1)
            light_out = torch.mean(embs, dim=1)
            return torch.split(light_out, [n_users, n_items])

        def bpr_loss(self, users, pos, neg, dropout):
            all_users, all_items = self.computer(dropout)
            users_emb, pos_emb, neg_emb = all_users[users], all_items[pos], all_items[neg]
            userEmb0 = self.embedding_user(users)
            posEmb0, negEmb0 = self.embedding_item(pos), self.embedding_item(neg)
            reg_loss = (1 / 2) * (userEmb0.norm(2).pow(2) + posEmb0.norm(2).pow(2)
                                  + negEmb0.norm(2).pow(2)) / float(len(users))
            pos_scores = torch.sum(torch.mul(users_emb, pos_emb), dim=1)
            neg_scores = torch.sum(torch.mul(users_emb, neg_emb), dim=1)
            loss = torch.mean(F.softplus(neg_scores - pos_scores))
            return loss, reg_loss

        def getUsersRating(self, users):
            all_users, all_items = self.computer(False)
            return self.f(torch.matmul(all_users[users.long()], all_items.t()))

    class NGCF(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding_dict = nn.ParameterDict({
                "user_emb": nn.Parameter(torch.empty(n_users, d)),
                "item_emb": nn.Parameter(torch.empty(n_items, d))})
            self.weight_dict = nn.ParameterDict()
            for k in range(n_layers):
                self.weight_dict.update({"W_gc_%d" % k: nn.Parameter(torch.empty(d, d))})
                self.weight_dict.update({"b_gc_%d" % k: nn.Parameter(torch.empty(1, d))})
                self.weight_dict.update({"W_bi_%d" % k: nn.Parameter(torch.empty(d, d))})
                self.weight_dict.update({"b_bi_%d" % k: nn.Parameter(torch.empty(1, d))})

        def forward(self, users, pos_items, neg_items, drop_flag):
            A_hat = dropout_x(Graph, 0.8) if drop_flag else Graph
            ego_embeddings = torch.cat([self.embedding_dict["user_emb"],
                                        self.embedding_dict["item_emb"]], 0)
            all_embeddings = [ego_embeddings]
            for k in range(n_layers):
                side_embeddings = torch.sparse.mm(A_hat, ego_embeddings)
                sum_embeddings = torch.matmul(side_embeddings, self.weight_dict["W_gc_%d" % k]) \
                    + self.weight_dict["b_gc_%d" % k]
                bi_embeddings = torch.mul(ego_embeddings, side_embeddings)
                bi_embeddings = torch.matmul(bi_embeddings, self.weight_dict["W_bi_%d" % k]) \
                    + self.weight_dict["b_bi_%d" % k]
                ego_embeddings = nn.LeakyReLU(negative_slope=0.2)(sum_embeddings + bi_embeddings)
                norm_embeddings = F.normalize(ego_embeddings, p=2, dim=1)
                all_embeddings += [norm_embeddings]
            all_embeddings = torch.cat(all_embeddings, 1)
            u_g_embeddings = all_embeddings[:n_users, :]
            i_g_embeddings = all_embeddings[n_users:, :]
            return (u_g_embeddings[users, :], i_g_embeddings[pos_items, :],
                    i_g_embeddings[neg_items, :])

    res = {"graph": [Graph.to_dense(), Graph.is_coalesced()]}
    model = LightGCN()
    fill_(torch, model, rng, 0.1)
    ngcf = NGCF()
    fill_(torch, ngcf, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    opt_ngcf = torch.optim.Adam(ngcf.parameters(), lr=0.01)
    losses = []
    for step in range(3):
        users = torch.tensor(rng.integers(0, n_users, 6))
        pos = torch.tensor([int(rng.choice(np.nonzero(R[u])[0])) for u in users.tolist()])
        neg = torch.tensor(rng.integers(0, n_items, 6))
        loss, reg_loss = model.bpr_loss(users, pos, neg, dropout=step > 0)
        loss = loss + reg_loss * 1e-2
        opt.zero_grad()
        loss.backward()
        opt.step()
        u, p_, n_ = ngcf(users, pos, neg, drop_flag=step > 0)
        maxi = F.logsigmoid(torch.sum(u * p_, 1) - torch.sum(u * n_, 1))
        mf_loss = -1 * torch.mean(maxi)
        regularizer = (torch.norm(u) ** 2 + torch.norm(p_) ** 2 + torch.norm(n_) ** 2) / 2
        ngcf_loss = mf_loss + 1e-3 * regularizer / 6
        opt_ngcf.zero_grad()
        ngcf_loss.backward()
        opt_ngcf.step()
        losses.append([loss.item(), reg_loss.item(), ngcf_loss.item()])
    res["losses"] = losses
    res["lightgcn"] = list(model.parameters())
    res["ngcf"] = list(ngcf.parameters())
    with torch.no_grad():
        rating = model.getUsersRating(torch.arange(n_users))
        exclude_index, exclude_items = np.nonzero(R)
        rating[exclude_index, exclude_items] = -(1 << 10)
        _, rating_K = torch.topk(rating, k=3)
    res["rating"] = rating
    # seen items tie at -1024: which of them topk returns is unspecified
    res["rating_K"] = rating.gather(1, rating_K)
    res["top1"] = rating_K[:, 0].tolist()
    return res


def matrix_factorization_program(torch):
    """Collaborative filtering by hand: biased MF with sparse=True embeddings split between
    SparseAdam and Adam, explicit ALS sweeps by batched torch.linalg.solve and
    cholesky_solve, EASE (inverse Gram matrix, B = P / -diag(P) with the diagonal zeroed by
    index), and Mult-VAE / Mult-DAE (F.normalize on the input, a multinomial log-likelihood
    from log_softmax, KL annealed by update count, a fixed NumPy dropout mask) scored by
    recall@k with seen items masked to -inf."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2613)
    n_users, n_items, k = 6, 8, 3
    R = np.where(rng.random((n_users, n_items)) < 0.5,
                 rng.integers(1, 6, (n_users, n_items)), 0).astype(np.float32)
    R[:, 0] = np.maximum(R[:, 0], 1)
    rows, cols = np.nonzero(R)
    res = {}

    class MF(nn.Module):
        def __init__(self):
            super().__init__()
            self.user_factors = nn.Embedding(n_users, k, sparse=True)
            self.item_factors = nn.Embedding(n_items, k, sparse=True)
            self.user_biases = nn.Embedding(n_users, 1, sparse=True)
            self.item_biases = nn.Embedding(n_items, 1, sparse=True)
            self.global_bias = nn.Parameter(torch.tensor(float(R[R > 0].mean())))

        def forward(self, user, item):
            pred = self.user_biases(user) + self.item_biases(item)
            pred += (self.user_factors(user) * self.item_factors(item)).sum(dim=1, keepdim=True)
            return pred.squeeze() + self.global_bias

    mf = MF()
    fill_(torch, [p for n, p in mf.named_parameters() if n != "global_bias"], rng, 0.1)
    sparse_params = [p for n, p in mf.named_parameters() if n != "global_bias"]
    opts = [torch.optim.SparseAdam(sparse_params, lr=0.05),
            torch.optim.Adam([mf.global_bias], lr=0.05)]
    users, items = torch.from_numpy(rows), torch.from_numpy(cols)
    ratings = torch.from_numpy(R[rows, cols])
    mf_losses = []
    for epoch in range(3):
        for start in range(0, len(rows), 8):
            u, i, r = users[start:start + 8], items[start:start + 8], ratings[start:start + 8]
            for o in opts:
                o.zero_grad()
            loss = F.mse_loss(mf(u, i), r)
            loss.backward()
            for o in opts:
                o.step()
        mf_losses.append(loss.item())
    res["mf_losses"] = mf_losses
    res["mf_rmse"] = [torch.sqrt(F.mse_loss(mf(users, items), ratings)).item()]

    # explicit ALS: each user's factors solve (V_u^T V_u + lam I) x = V_u^T r_u
    Rt = torch.from_numpy(R)
    mask = (Rt > 0).float()
    lam = 0.1
    U = torch.from_numpy(rng.standard_normal((n_users, k)).astype(np.float32) * 0.3)
    V = torch.from_numpy(rng.standard_normal((n_items, k)).astype(np.float32) * 0.3)
    eye = torch.eye(k)
    als_loss = []
    for sweep in range(2):
        A = torch.einsum("ui,ik,il->ukl", mask, V, V) + lam * eye
        b = (mask * Rt) @ V
        U = torch.linalg.solve(A, b.unsqueeze(-1)).squeeze(-1)
        A = torch.einsum("ui,uk,ul->ikl", mask, U, U) + lam * eye
        b = (mask * Rt).T @ U
        L = torch.linalg.cholesky(A)
        V = torch.cholesky_solve(b.unsqueeze(-1), L).squeeze(-1)
        als_loss.append((((U @ V.T - Rt) * mask) ** 2).sum().item())
    res["als"], res["als_UV"] = als_loss, [U @ V.T]

    # EASE
    X = (Rt > 0).float()
    G = X.T @ X
    diagIndices = torch.arange(n_items)
    G[diagIndices, diagIndices] += 5.0
    P = torch.linalg.inv(G)
    B = P / (-torch.diag(P))
    B[diagIndices, diagIndices] = 0
    scores = X @ B
    res["ease"] = scores

    # Mult-VAE / Mult-DAE
    class MultiVAE(nn.Module):
        def __init__(self, p_dims, vae=True):
            super().__init__()
            self.vae = vae
            q_dims = p_dims[::-1]
            temp_q_dims = q_dims[:-1] + [q_dims[-1] * 2] if vae else q_dims
            self.q_layers = nn.ModuleList([nn.Linear(d_in, d_out) for d_in, d_out in
                                           zip(temp_q_dims[:-1], temp_q_dims[1:])])
            self.p_layers = nn.ModuleList([nn.Linear(d_in, d_out) for d_in, d_out in
                                           zip(p_dims[:-1], p_dims[1:])])
            self.latent = q_dims[-1]

        def forward(self, input, drop_mask):
            h = F.normalize(input)
            h = h * drop_mask / 0.5
            for i, layer in enumerate(self.q_layers):
                h = layer(h)
                if i != len(self.q_layers) - 1:
                    h = torch.tanh(h)
            if self.vae:
                mu, logvar = h[:, :self.latent], h[:, self.latent:]
                z = mu       # eval-style reparameterisation (no noise)
            else:
                mu = logvar = None
                z = h
            for i, layer in enumerate(self.p_layers):
                z = layer(z)
                if i != len(self.p_layers) - 1:
                    z = torch.tanh(z)
            return z, mu, logvar

    def loss_function(recon_x, x, mu, logvar, anneal=1.0):
        BCE = -torch.mean(torch.sum(F.log_softmax(recon_x, 1) * x, -1))
        if mu is None:
            return BCE
        KLD = -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1))
        return BCE + anneal * KLD

    drop = torch.from_numpy((rng.random((3, n_users, n_items)) < 0.5).astype(np.float32))
    for vae in (True, False):
        model = MultiVAE([2, 5, n_items], vae=vae)
        fill_(torch, model, rng, 0.3)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0)
        update_count, losses = 0, []
        for step in range(3):
            anneal = min(0.2, 1. * update_count / 10)
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(X, drop[step])
            loss = loss_function(recon_batch, X, mu, logvar, anneal)
            loss.backward()
            optimizer.step()
            update_count += 1
            losses.append(loss.item())
        with torch.no_grad():
            recon, _, _ = model(X, torch.ones_like(X) * 0.5)
            recon[X.nonzero(as_tuple=True)] = -np.inf
            topk = torch.topk(recon, 2, dim=1).indices
            hits = torch.zeros_like(recon, dtype=torch.bool).scatter_(1, topk, True)
        name = "vae" if vae else "dae"
        res[name + "_losses"] = losses
        res[name + "_recon"] = torch.where(torch.isinf(recon), torch.zeros_like(recon), recon)
        # a user with one unseen item ties at -inf for the second place: compare values
        res[name + "_topk"] = recon.gather(1, topk).clamp(min=-1e4)
        res[name + "_hits"] = [int(hits.sum())]
    return res


PROGRAMS = [ctr_zoo_program, din_dien_program, lightgcn_program,
            matrix_factorization_program]

TOLERANCES = {
    # the query columns' gradients in DIN's attention cancel across the sequence: float32
    # rounding (1e-6 relative) grows to 1e-4 in three Adam steps (float64 runs agree to 1e-13)
    "din_dien_program": (2e-4, 2e-5),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
