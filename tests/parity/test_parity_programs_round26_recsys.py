"""Recommendation models written as their reference repositories write them in torch, run once
with `torch` bound to ember and once to PyTorch from the same NumPy data: DLRM (sum
EmbeddingBags with offsets and per-sample weights, sparse gradients under SGD and Adagrad, a dot
interaction gathered with li/lj index lists, an _LRScheduler subclass), two-tower retrieval
(in-batch negatives with a logQ correction, hard negatives from topk), NeuMF from pre-trained
GMF and MLP, pytorch-fm's DeepFM and FFM, and DCN-v2 with a sparse wide & deep part. Sibling
files: _recsys_models (CTR interaction layers, DIN/DIEN, LightGCN/NGCF, matrix factorisation),
_recsys_ranking (learning to rank, SASRec, GRU4Rec), _recsys_prediction (survival, conformal
prediction, active learning); _recsys_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _dtype(t):
    return str(t.dtype).rsplit(".", 1)[-1]


def dlrm_program(torch):
    """DLRM trained with SGD (see _dlrm)."""
    return _dlrm(torch, "sgd")


def dlrm_adagrad_program(torch):
    """DLRM trained with Adagrad, which takes the sparse embedding gradients too."""
    return _dlrm(torch, "adagrad")


def _dlrm(torch, optimizer_name):
    """DLRM as facebookresearch/dlrm builds it: weights set through ``.data`` from NumPy,
    sum-mode EmbeddingBags fed (indices, offsets, per_sample_weights) with sparse=True,
    bottom and top MLPs from a ModuleList-built Sequential, the dot interaction as bmm of the
    stacked features with li/lj index lists, BCELoss on a clamped sigmoid, SGD over sparse
    and dense parameters and an LR policy written as an _LRScheduler subclass."""
    nn = torch.nn
    rng = np.random.default_rng(2601)
    m_spa, ln_emb = 4, [7, 5, 9]
    ln_bot, ln_top = [3, 6, m_spa], [m_spa + 6, 5, 1]

    def create_mlp(ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(len(ln) - 1):
            n, m = ln[i], ln[i + 1]
            LL = nn.Linear(int(n), int(m), bias=True)
            std_dev = np.sqrt(2 / (m + n))
            W = rng.normal(0.0, std_dev, size=(m, n)).astype(np.float32)
            bt = rng.normal(0.0, np.sqrt(1 / m), size=m).astype(np.float32)
            LL.weight.data = torch.tensor(W, requires_grad=True)
            LL.bias.data = torch.tensor(bt, requires_grad=True)
            layers.append(LL)
            layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
        return torch.nn.Sequential(*layers)

    def create_emb(m, ln):
        emb_l = nn.ModuleList()
        for n in ln:
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=True)
            W = rng.uniform(low=-np.sqrt(1 / n), high=np.sqrt(1 / n),
                            size=(n, m)).astype(np.float32)
            EE.weight.data = torch.tensor(W, requires_grad=True)
            emb_l.append(EE)
        return emb_l

    class DLRM_Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb_l = create_emb(m_spa, ln_emb)
            self.bot_l = create_mlp(ln_bot, -1)
            self.top_l = create_mlp(ln_top, len(ln_top) - 2)
            self.loss_fn = torch.nn.BCELoss(reduction="mean")

        def apply_emb(self, lS_o, lS_i, lS_w):
            ly = []
            for k, sparse_index_group_batch in enumerate(lS_i):
                sparse_offset_group_batch = lS_o[k]
                per_sample_weights = lS_w[k] if lS_w is not None else None
                E = self.emb_l[k]
                V = E(sparse_index_group_batch, sparse_offset_group_batch,
                      per_sample_weights=per_sample_weights)
                ly.append(V)
            return ly

        def interact_features(self, x, ly):
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            offset = 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            return torch.cat([x] + [Zflat], dim=1)

        def forward(self, dense_x, lS_o, lS_i, lS_w=None):
            x = self.bot_l(dense_x)
            ly = self.apply_emb(lS_o, lS_i, lS_w)
            z = self.interact_features(x, ly)
            p = self.top_l(z)
            return torch.clamp(p, min=1e-4, max=1 - 1e-4)

    class LRPolicyScheduler(torch.optim.lr_scheduler._LRScheduler):
        def __init__(self, optimizer, num_warmup_steps, decay_start_step, num_decay_steps):
            self.num_warmup_steps = num_warmup_steps
            self.decay_start_step = decay_start_step
            self.decay_end_step = decay_start_step + num_decay_steps
            self.num_decay_steps = num_decay_steps
            super().__init__(optimizer)

        def get_lr(self):
            step_count = self._step_count
            if step_count < self.num_warmup_steps:
                scale = 1.0 - (self.num_warmup_steps - step_count) / self.num_warmup_steps
                return [base_lr * scale for base_lr in self.base_lrs]
            if self.decay_start_step <= step_count < self.decay_end_step:
                decayed_steps = step_count - self.decay_start_step
                scale = ((self.num_decay_steps - decayed_steps) / self.num_decay_steps) ** 2
                return [max(0.0001, base_lr * scale) for base_lr in self.base_lrs]
            if self.num_decay_steps > 0 and step_count >= self.decay_end_step:
                return [0.0001 for _ in self.base_lrs]
            return self.base_lrs

    dlrm = DLRM_Net()
    parameters = dlrm.parameters()
    opts = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad}
    optimizer = opts[optimizer_name](parameters, lr=0.5)
    lr_scheduler = LRPolicyScheduler(optimizer, 2, 3, 3)
    B, res = 4, {"losses": [], "lrs": []}
    for step in range(6):
        X = torch.tensor(np.log(rng.uniform(1.0, 30.0, (B, ln_bot[0])).astype(np.float32)))
        lS_i, lS_o, lS_w = [], [], []
        for n in ln_emb:
            sizes = rng.integers(1, 4, B)
            lS_o.append(torch.tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]])))
            lS_i.append(torch.tensor(rng.integers(0, n, int(sizes.sum()))))
            lS_w.append(torch.tensor(rng.uniform(0.5, 1.5, int(sizes.sum())).astype(np.float32)))
        T = torch.tensor(rng.integers(0, 2, (B, 1)).astype(np.float32))
        Z = dlrm(X, lS_o, lS_i, lS_w if step % 2 else None)
        E = dlrm.loss_fn(Z, T)
        optimizer.zero_grad()
        E.backward()
        if step == 0:
            g = dlrm.emb_l[0].weight.grad
            res["sparse_grad"] = [g.is_sparse, g.layout == torch.sparse_coo, _dtype(g)]
            res["sparse_grad_dense"] = g.to_dense()
            res["sparse_grad_nnz"] = [g.coalesce()._nnz()]
        optimizer.step()
        lr_scheduler.step()
        res["losses"].append(E.item())
        res["lrs"].append(optimizer.param_groups[0]["lr"])
        res["acc"] = [int((Z.detach().round() == T).sum().item())]
    res["emb"] = [e.weight for e in dlrm.emb_l]
    res["top"] = [p for p in dlrm.top_l.parameters()]
    res["last_lr"] = lr_scheduler.get_last_lr()
    with torch.no_grad():
        res["eval"] = dlrm(X, lS_o, lS_i)
    return res


def two_tower_program(torch):
    """Two-tower retrieval: hashed id features through EmbeddingBag(mode="mean") with
    padding_idx, towers ending in F.normalize, in-batch negatives over a temperature-scaled
    similarity matrix with a logQ correction (log of the sampling probability subtracted),
    duplicate items masked with -inf via masked_fill, cross_entropy with label smoothing,
    hard negatives mined with topk past the diagonal, a triplet margin loss on them, Adam with
    AMSGrad, gradient clipping by norm, and recall@k from the full catalogue."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2602)
    n_users, n_items, d, B = 12, 15, 6, 6

    class Tower(nn.Module):
        def __init__(self, vocab, feat_dim):
            super().__init__()
            self.ids = nn.EmbeddingBag(vocab + 1, 8, mode="mean", padding_idx=0)
            self.mlp = nn.Sequential(nn.Linear(8 + feat_dim, 10), nn.GELU(), nn.Linear(10, d))

        def forward(self, bag, feats):
            h = torch.cat([self.ids(bag), feats], dim=-1)
            return F.normalize(self.mlp(h), p=2, dim=-1, eps=1e-6)

    user_tower, item_tower = Tower(n_users, 2), Tower(n_items, 3)
    fill_(torch, user_tower, rng, 0.4)
    fill_(torch, item_tower, rng, 0.4)
    params = list(user_tower.parameters()) + list(item_tower.parameters())
    log_temp = nn.Parameter(torch.tensor(math.log(0.2)))
    opt = torch.optim.Adam([{"params": params}, {"params": [log_temp], "lr": 0.01}],
                           lr=0.05, amsgrad=True)
    item_freq = torch.tensor(rng.integers(1, 20, n_items + 1).astype(np.float32))
    item_prob = item_freq / item_freq.sum()
    item_feats = normal(torch, rng, n_items + 1, 3)
    res = {"losses": [], "norms": [], "hard": []}
    for step in range(4):
        ubag = torch.tensor(rng.integers(0, n_users + 1, (B, 3)))
        items = torch.tensor(rng.integers(1, n_items + 1, B))
        items[-1] = items[0]          # a duplicate positive in the batch
        ibag = torch.stack([items, torch.zeros_like(items)], dim=1)
        u = user_tower(ubag, normal(torch, rng, B, 2))
        v = item_tower(ibag, item_feats[items])
        temperature = log_temp.exp()
        logits = u @ v.T / temperature
        logits = logits - torch.log(item_prob[items]).unsqueeze(0)
        labels = torch.arange(B)
        same = items.unsqueeze(0) == items.unsqueeze(1)
        dup = same & ~torch.eye(B, dtype=torch.bool)
        logits = logits.masked_fill(dup, float("-inf"))
        loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
        with torch.no_grad():
            sim = u @ v.t()
            sim.fill_diagonal_(-float("inf"))
            sim[dup] = -float("inf")
            hard_idx = sim.topk(2, dim=1).indices
        hard_v = v[hard_idx[:, 0]]
        loss = loss + 0.5 * F.triplet_margin_loss(u, v, hard_v, margin=0.3)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        res["norms"].append(nn.utils.clip_grad_norm_(params, max_norm=1.0).item())
        opt.step()
        res["losses"].append(loss.item())
        # duplicate items tie: which index topk returns for a tie is unspecified
        res["hard"].append(sim.gather(1, hard_idx))
    with torch.inference_mode():
        catalogue = torch.arange(1, n_items + 1)
        all_v = item_tower(catalogue.unsqueeze(1), item_feats[1:])
        scores = u @ all_v.T
        top = scores.topk(5, dim=-1).indices + 1
        hits = (top == items.unsqueeze(1)).any(dim=1)
        res["recall@5"] = [hits.float().mean().item()]
        res["scores"] = scores
        res["inference"] = [scores.is_inference(), scores.requires_grad]
    res["temperature"] = [log_temp.exp().item()]
    res["max_exp_avg_sq"] = opt.state[log_temp]["max_exp_avg_sq"]
    res["user"] = list(user_tower.parameters())
    return res


def neumf_program(torch):
    """NeuMF as the NCF repositories build it: GMF and MLP pre-trained separately, their
    embeddings and a 0.5-weighted concatenated predict layer copied into NeuMF through
    ``weight.data.copy_``, xavier/kaiming initialisers re-drawn from NumPy, BCEWithLogitsLoss
    with Adam, and hit-rate / NDCG@k from topk and torch.take over a candidate list."""
    nn = torch.nn
    rng = np.random.default_rng(2603)
    user_num, item_num, factor_num, num_layers = 6, 10, 4, 2

    class NCF(nn.Module):
        def __init__(self, model, GMF_model=None, MLP_model=None):
            super().__init__()
            self.model = model
            self.GMF_model, self.MLP_model = GMF_model, MLP_model
            self.embed_user_GMF = nn.Embedding(user_num, factor_num)
            self.embed_item_GMF = nn.Embedding(item_num, factor_num)
            mlp_dim = factor_num * (2 ** (num_layers - 1))
            self.embed_user_MLP = nn.Embedding(user_num, mlp_dim)
            self.embed_item_MLP = nn.Embedding(item_num, mlp_dim)
            MLP_modules = []
            for i in range(num_layers):
                input_size = factor_num * (2 ** (num_layers - i))
                MLP_modules.append(nn.Dropout(p=0.0))
                MLP_modules.append(nn.Linear(input_size, input_size // 2))
                MLP_modules.append(nn.ReLU())
            self.MLP_layers = nn.Sequential(*MLP_modules)
            predict_size = factor_num if model in ["MLP", "GMF"] else factor_num * 2
            self.predict_layer = nn.Linear(predict_size, 1)
            self._init_weight_()

        def _init_weight_(self):
            if not self.model == "NeuMF-pre":
                for e in [self.embed_user_GMF, self.embed_item_GMF, self.embed_user_MLP,
                          self.embed_item_MLP]:
                    e.weight.data.copy_(torch.from_numpy(
                        rng.normal(0, 0.01, tuple(e.weight.shape)).astype(np.float32)) * 30)
                for m in self.MLP_layers:
                    if isinstance(m, nn.Linear):
                        bound = math.sqrt(6.0 / sum(m.weight.shape))
                        m.weight.data = torch.from_numpy(rng.uniform(
                            -bound, bound, tuple(m.weight.shape)).astype(np.float32))
                gain = nn.init.calculate_gain("sigmoid")
                bound = gain * math.sqrt(3.0 / self.predict_layer.in_features)
                self.predict_layer.weight.data[:] = torch.from_numpy(rng.uniform(
                    -bound, bound, tuple(self.predict_layer.weight.shape)).astype(np.float32))
                for m in self.modules():
                    if isinstance(m, nn.Linear) and m.bias is not None:
                        m.bias.data.zero_()
            else:
                self.embed_user_GMF.weight.data.copy_(self.GMF_model.embed_user_GMF.weight)
                self.embed_item_GMF.weight.data.copy_(self.GMF_model.embed_item_GMF.weight)
                self.embed_user_MLP.weight.data.copy_(self.MLP_model.embed_user_MLP.weight)
                self.embed_item_MLP.weight.data.copy_(self.MLP_model.embed_item_MLP.weight)
                for m1, m2 in zip(self.MLP_layers, self.MLP_model.MLP_layers):
                    if isinstance(m1, nn.Linear) and isinstance(m2, nn.Linear):
                        m1.weight.data.copy_(m2.weight)
                        m1.bias.data.copy_(m2.bias)
                predict_weight = torch.cat([self.GMF_model.predict_layer.weight,
                                            self.MLP_model.predict_layer.weight], dim=1)
                precit_bias = self.GMF_model.predict_layer.bias + \
                    self.MLP_model.predict_layer.bias
                self.predict_layer.weight.data.copy_(0.5 * predict_weight)
                self.predict_layer.bias.data.copy_(0.5 * precit_bias)

        def forward(self, user, item):
            if not self.model == "MLP":
                output_GMF = self.embed_user_GMF(user) * self.embed_item_GMF(item)
            if not self.model == "GMF":
                interaction = torch.cat((self.embed_user_MLP(user),
                                         self.embed_item_MLP(item)), -1)
                output_MLP = self.MLP_layers(interaction)
            if self.model == "GMF":
                concat = output_GMF
            elif self.model == "MLP":
                concat = output_MLP
            else:
                concat = torch.cat((output_GMF, output_MLP), -1)
            return self.predict_layer(concat).view(-1)

    users = torch.tensor(rng.integers(0, user_num, 16))
    items = torch.tensor(rng.integers(0, item_num, 16))
    labels = torch.tensor(rng.integers(0, 2, 16)).float()
    loss_function = nn.BCEWithLogitsLoss()
    res = {}

    def train(model, lr, optimizer_cls):
        optimizer = optimizer_cls(model.parameters(), lr=lr)
        out = []
        model.train()
        for _ in range(3):
            model.zero_grad()
            prediction = model(users, items)
            loss = loss_function(prediction, labels)
            loss.backward()
            optimizer.step()
            out.append(loss.item())
        return out

    GMF_model, MLP_model = NCF("GMF"), NCF("MLP")
    res["gmf"] = train(GMF_model, 0.05, torch.optim.Adam)
    res["mlp"] = train(MLP_model, 0.05, torch.optim.Adam)
    neumf = NCF("NeuMF-pre", GMF_model, MLP_model)
    res["neumf_start"] = neumf.predict_layer.weight
    res["neumf"] = train(neumf, 0.05, torch.optim.SGD)

    def hit(gt_item, pred_items):
        return 1 if gt_item in pred_items else 0

    def ndcg(gt_item, pred_items):
        if gt_item in pred_items:
            index = pred_items.index(gt_item)
            return np.reciprocal(np.log2(index + 2))
        return 0

    HR, NDCG = [], []
    neumf.eval()
    with torch.no_grad():
        for u in range(3):
            item = torch.tensor(rng.permutation(item_num)[:6])
            user = torch.full_like(item, u)
            predictions = neumf(user, item)
            _, indices = torch.topk(predictions, 3)
            recommends = torch.take(item, indices).cpu().numpy().tolist()
            gt_item = item[0].item()
            HR.append(hit(gt_item, recommends))
            NDCG.append(float(ndcg(gt_item, recommends)))
    res["HR"], res["NDCG"] = HR, [np.mean(NDCG)]
    return res


def deepfm_program(torch):
    """pytorch-fm's DeepFM and FFM: per-field offsets added with ``x.new_tensor`` of a NumPy
    int64 array, the linear term as a 1-wide Embedding plus a bias, the FM pairwise term as
    0.5 * ((sum)^2 - sum of squares), field-aware pairs stacked in a double loop, an MLP with
    BatchNorm1d, sigmoid + BCELoss, Adam with weight decay, and a rank-based ROC AUC."""
    nn = torch.nn
    rng = np.random.default_rng(2604)
    field_dims = np.array([4, 6, 3, 5])

    class FeaturesLinear(nn.Module):
        def __init__(self, field_dims, output_dim=1):
            super().__init__()
            self.fc = nn.Embedding(sum(field_dims), output_dim)
            self.bias = nn.Parameter(torch.zeros((output_dim,)))
            self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)

        def forward(self, x):
            x = x + x.new_tensor(self.offsets).unsqueeze(0)
            return torch.sum(self.fc(x), dim=1) + self.bias

    class FeaturesEmbedding(nn.Module):
        def __init__(self, field_dims, embed_dim):
            super().__init__()
            self.embedding = nn.Embedding(sum(field_dims), embed_dim)
            self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)

        def forward(self, x):
            x = x + x.new_tensor(self.offsets).unsqueeze(0)
            return self.embedding(x)

    class FieldAwareFactorizationMachine(nn.Module):
        def __init__(self, field_dims, embed_dim):
            super().__init__()
            self.num_fields = len(field_dims)
            self.embeddings = nn.ModuleList([
                nn.Embedding(sum(field_dims), embed_dim) for _ in range(self.num_fields)])
            self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)

        def forward(self, x):
            x = x + x.new_tensor(self.offsets).unsqueeze(0)
            xs = [self.embeddings[i](x) for i in range(self.num_fields)]
            ix = list()
            for i in range(self.num_fields - 1):
                for j in range(i + 1, self.num_fields):
                    ix.append(xs[j][:, i] * xs[i][:, j])
            return torch.stack(ix, dim=1)

    class FactorizationMachine(nn.Module):
        def __init__(self, reduce_sum=True):
            super().__init__()
            self.reduce_sum = reduce_sum

        def forward(self, x):
            square_of_sum = torch.sum(x, dim=1) ** 2
            sum_of_square = torch.sum(x ** 2, dim=1)
            ix = square_of_sum - sum_of_square
            if self.reduce_sum:
                ix = torch.sum(ix, dim=1, keepdim=True)
            return 0.5 * ix

    class MultiLayerPerceptron(nn.Module):
        def __init__(self, input_dim, embed_dims, dropout, output_layer=True):
            super().__init__()
            layers = list()
            for embed_dim in embed_dims:
                # bias=False: a bias before BatchNorm gets a gradient of rounding noise,
                # which Adam turns into full-size steps of either sign
                layers.append(nn.Linear(input_dim, embed_dim, bias=False))
                layers.append(nn.BatchNorm1d(embed_dim))
                layers.append(nn.ReLU())
                layers.append(nn.Dropout(p=dropout))
                input_dim = embed_dim
            if output_layer:
                layers.append(nn.Linear(input_dim, 1))
            self.mlp = nn.Sequential(*layers)

        def forward(self, x):
            return self.mlp(x)

    class DeepFactorizationMachineModel(nn.Module):
        def __init__(self, field_dims, embed_dim, mlp_dims, dropout):
            super().__init__()
            self.linear = FeaturesLinear(field_dims)
            self.fm = FactorizationMachine(reduce_sum=True)
            self.embedding = FeaturesEmbedding(field_dims, embed_dim)
            self.embed_output_dim = len(field_dims) * embed_dim
            self.mlp = MultiLayerPerceptron(self.embed_output_dim, mlp_dims, dropout)

        def forward(self, x):
            embed_x = self.embedding(x)
            x = self.linear(x) + self.fm(embed_x) + self.mlp(
                embed_x.view(-1, self.embed_output_dim))
            return torch.sigmoid(x.squeeze(1))

    class FieldAwareFactorizationMachineModel(nn.Module):
        def __init__(self, field_dims, embed_dim):
            super().__init__()
            self.linear = FeaturesLinear(field_dims)
            self.ffm = FieldAwareFactorizationMachine(field_dims, embed_dim)

        def forward(self, x):
            ffm_term = torch.sum(torch.sum(self.ffm(x), dim=1), dim=1, keepdim=True)
            x = self.linear(x) + ffm_term
            return torch.sigmoid(x.squeeze(1))

    def roc_auc(target, score):
        order = torch.argsort(score)
        ranks = torch.empty_like(order)
        ranks[order] = torch.arange(1, len(score) + 1)
        pos = target.bool()
        n_pos, n_neg = pos.sum(), (~pos).sum()
        return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)

    X = torch.tensor(np.stack([rng.integers(0, d, 24) for d in field_dims], axis=1))
    y = torch.tensor(rng.integers(0, 2, 24).astype(np.float32))
    res = {}
    for name, model in [("deepfm", DeepFactorizationMachineModel(field_dims, 3, (8, 4), 0.0)),
                        ("ffm", FieldAwareFactorizationMachineModel(field_dims, 3))]:
        fill_(torch, model, rng, 0.5)
        criterion = nn.BCELoss()
        optimizer = torch.optim.Adam(params=model.parameters(), lr=0.02, weight_decay=1e-6)
        model.train()
        losses = []
        for i in range(0, 24, 8):
            fields, target = X[i:i + 8], y[i:i + 8]
            y_hat = model(fields)
            loss = criterion(y_hat, target.float())
            model.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            scores = model(X)
        res[name + "_losses"] = losses
        res[name + "_scores"] = scores
        res[name + "_auc"] = [roc_auc(y, scores).item()]
        res[name + "_auc_dtype"] = [_dtype(roc_auc(y, scores))]
    emb = torch.from_numpy(rng.standard_normal((5, 4, 3)).astype(np.float32))
    pairs = sum((emb[:, i] * emb[:, j]).sum(-1, keepdim=True)
                for i in range(4) for j in range(i + 1, 4))
    res["fm_trick"] = [FactorizationMachine()(emb), pairs]
    return res


def dcn_wide_deep_program(torch):
    """DCN-v2 (a full-rank CrossNetV2 over a (layers, d, d) kernel Parameter with matmul on
    x_l.unsqueeze(2), and the low-rank mixture of experts with einsum, tanh and a softmax
    gate) plus wide & deep: the wide part both as a sparse=True EmbeddingBag over hashed
    crosses (SparseAdam) and as torch.sparse.mm of a COO multi-hot matrix with a dense weight,
    the deep part trained by Adagrad, and ReduceLROnPlateau on the logloss."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2605)
    d, layer_num, B = 6, 2, 8

    class CrossNetV2(nn.Module):
        def __init__(self, in_features, layer_num=2):
            super().__init__()
            self.layer_num = layer_num
            self.kernels = nn.Parameter(torch.Tensor(self.layer_num, in_features, in_features))
            self.bias = nn.Parameter(torch.Tensor(self.layer_num, in_features, 1))
            for i in range(self.kernels.shape[0]):
                nn.init.xavier_normal_(self.kernels[i])
            for i in range(len(self.bias)):
                nn.init.zeros_(self.bias[i])

        def forward(self, inputs):
            x_0 = inputs.unsqueeze(2)
            x_l = x_0
            for i in range(self.layer_num):
                xl_w = torch.matmul(self.kernels[i], x_l)
                dot_ = xl_w + self.bias[i]
                x_l = x_0 * dot_ + x_l
            return torch.squeeze(x_l, dim=2)

    class CrossNetMix(nn.Module):
        def __init__(self, in_features, low_rank=2, num_experts=3, layer_num=2):
            super().__init__()
            self.layer_num, self.num_experts = layer_num, num_experts
            self.U_list = nn.ParameterList([nn.Parameter(nn.init.xavier_normal_(
                torch.empty(num_experts, in_features, low_rank))) for _ in range(layer_num)])
            self.V_list = nn.ParameterList([nn.Parameter(nn.init.xavier_normal_(
                torch.empty(num_experts, in_features, low_rank))) for _ in range(layer_num)])
            self.C_list = nn.ParameterList([nn.Parameter(nn.init.xavier_normal_(
                torch.empty(num_experts, low_rank, low_rank))) for _ in range(layer_num)])
            self.gating = nn.ModuleList([nn.Linear(in_features, 1, bias=False)
                                         for _ in range(num_experts)])
            self.bias = nn.ParameterList([nn.Parameter(nn.init.zeros_(
                torch.empty(in_features, 1))) for _ in range(layer_num)])

        def forward(self, inputs):
            x_0 = inputs.unsqueeze(2)
            x_l = x_0
            for i in range(self.layer_num):
                output_of_experts, gating_score_of_experts = [], []
                for expert_id in range(self.num_experts):
                    gating_score_of_experts.append(self.gating[expert_id](x_l.squeeze(2)))
                    v_x = torch.matmul(self.V_list[i][expert_id].t(), x_l)
                    v_x = torch.tanh(v_x)
                    v_x = torch.matmul(self.C_list[i][expert_id], v_x)
                    v_x = torch.tanh(v_x)
                    uv_x = torch.matmul(self.U_list[i][expert_id], v_x)
                    dot_ = uv_x + self.bias[i]
                    dot_ = x_0 * dot_
                    output_of_experts.append(dot_.squeeze(2))
                output_of_experts = torch.stack(output_of_experts, 2)
                gating_score_of_experts = torch.stack(gating_score_of_experts, 1)
                moe_out = torch.matmul(output_of_experts, gating_score_of_experts.softmax(1))
                x_l = moe_out + x_l
            return x_l.squeeze()

    class WideDeep(nn.Module):
        def __init__(self, n_cross, n_multi, cross):
            super().__init__()
            self.wide = nn.EmbeddingBag(n_cross, 1, mode="sum", sparse=True)
            self.wide_w = nn.Parameter(torch.zeros(n_multi, 1))
            self.cross = cross
            self.deep = nn.Sequential(nn.Linear(d, 8), nn.ReLU(), nn.Linear(8, 1))
            self.head = nn.Linear(d, 1)

        def forward(self, dense, cross_ids, cross_offsets, multi_hot):
            wide = self.wide(cross_ids, cross_offsets) + torch.sparse.mm(multi_hot, self.wide_w)
            return (wide + self.deep(dense) + self.head(self.cross(dense))).squeeze(-1)

    res = {}
    for name, cross in [("v2", CrossNetV2(d, layer_num)), ("mix", CrossNetMix(d))]:
        model = WideDeep(11, 7, cross)
        fill_(torch, model, rng, 0.3)
        sparse_params = [model.wide.weight]
        dense_params = [p for n, p in model.named_parameters() if n != "wide.weight"]
        sparse_opt = torch.optim.SparseAdam(sparse_params, lr=0.05)
        dense_opt = torch.optim.Adagrad(dense_params, lr=0.05, initial_accumulator_value=0.1)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(dense_opt, factor=0.5, patience=0)
        losses, lrs = [], []
        for step in range(4):
            dense = normal(torch, rng, B, d)
            lengths = rng.integers(1, 4, B)
            ids = torch.tensor(rng.integers(0, 11, int(lengths.sum())))
            offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)[:-1]]))
            rows, cols = np.nonzero(rng.random((B, 7)) < 0.3)
            multi_hot = torch.sparse_coo_tensor(torch.tensor(np.stack([rows, cols])),
                                                torch.ones(len(rows)), (B, 7))
            target = torch.tensor(rng.integers(0, 2, B).astype(np.float32))
            logit = model(dense, ids, offsets, multi_hot)
            loss = F.binary_cross_entropy_with_logits(logit, target)
            sparse_opt.zero_grad()
            dense_opt.zero_grad()
            loss.backward()
            if step == 0:
                res[name + "_wide_grad"] = [model.wide.weight.grad.is_sparse,
                                            model.wide_w.grad.is_sparse]
                res[name + "_wide_w_grad"] = model.wide_w.grad
            sparse_opt.step()
            dense_opt.step()
            plateau.step(loss.item() + (1.0 if step == 2 else 0.0))
            losses.append(loss.item())
            lrs.append(dense_opt.param_groups[0]["lr"])
        res[name + "_losses"], res[name + "_lrs"] = losses, lrs
        res[name + "_params"] = list(model.parameters())
        res[name + "_sparse_state"] = [sparse_opt.state[model.wide.weight]["exp_avg"],
                                       sparse_opt.state[model.wide.weight]["exp_avg_sq"]]
    return res


PROGRAMS = [dlrm_program, dlrm_adagrad_program, two_tower_program, neumf_program,
            deepfm_program, dcn_wide_deep_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
