"""The code around the model, run once with `torch` bound to ember and once to PyTorch (weights
and data from one NumPy generator): a DataLoader with a custom collate and a fixed sampler,
chained lr schedulers, a checkpoint saved and resumed mid-training, weight_norm / orthogonal /
spectral_norm parametrizations, no_grad metrics (confusion matrix, AUC), EmbeddingBag with
packed LSTM text classification, a SparseAdam recommender, LBFGS logistic regression and SWA."""

import io

import numpy as np
import pytest

import ember
from tests.parity._programs import normal
from tests.parity.test_parity_programs_round3 import assert_same_results, fill_

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def dataloader_program(torch):
    """Two epochs over a dict dataset with a custom collate, a fixed sampler and drop_last."""
    data = torch.utils.data
    rng = np.random.default_rng(0)
    features, labels = rng.standard_normal((40, 5)).astype(np.float32), rng.integers(0, 3, 40)

    class Rows(data.Dataset):
        def __len__(self):
            return 40

        def __getitem__(self, i):
            return {"x": torch.from_numpy(features[i]), "y": int(labels[i]), "i": i}

    def collate(items):
        return (torch.stack([it["x"] for it in items]), torch.tensor([it["y"] for it in items]),
                [it["i"] for it in items])

    loader = data.DataLoader(Rows(), batch_size=6, sampler=rng.permutation(40).tolist(),
                             collate_fn=collate, drop_last=True)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    fill_(torch, model.parameters(), rng, 0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    losses, seen = [], []
    for _ in range(2):
        for x, y, index in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            seen += index
    shuffled = data.DataLoader(data.Subset(Rows(), list(range(10, 30))), batch_size=7,
                               shuffle=True, collate_fn=collate,
                               generator=torch.Generator().manual_seed(3))
    default = next(iter(data.DataLoader(Rows(), batch_size=4)))
    return {"loss": losses, "seen": seen, "lengths": [len(loader), len(shuffled)],
            "shuffled": sorted(sum([batch[2] for batch in shuffled], [])),
            "keys": sorted(default), "x": default["x"].numpy(), "y": default["y"].tolist(),
            "i": default["i"].tolist()}


def schedulers_program(torch):
    """SequentialLR warmup then cosine, ChainedScheduler, ReduceLROnPlateau and OneCycleLR."""
    sched = torch.optim.lr_scheduler
    rng = np.random.default_rng(1)
    model = torch.nn.Linear(3, 1)
    fill_(torch, model.parameters(), rng, 0.3)
    x = normal(torch, rng, 8, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    warm_cosine = sched.SequentialLR(opt, [sched.LinearLR(opt, 0.1, total_iters=3),
                                           sched.CosineAnnealingLR(opt, T_max=5, eta_min=0.01)],
                                     milestones=[3])
    lrs = []
    for _ in range(10):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        warm_cosine.step()
        lrs.append(warm_cosine.get_last_lr()[0])
    adam = torch.optim.Adam(model.parameters(), lr=0.1)
    chained = sched.ChainedScheduler([sched.StepLR(adam, 2, 0.5), sched.ExponentialLR(adam, 0.9)])
    plateau_opt = torch.optim.SGD(model.parameters(), lr=1.0)
    plateau = sched.ReduceLROnPlateau(plateau_opt, factor=0.5, patience=1, threshold=0.1,
                                      cooldown=1)
    cycle_opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    one_cycle = sched.OneCycleLR(cycle_opt, max_lr=1.0, total_steps=10)
    chained_lrs, plateau_lrs, cycle_lrs, momenta = [], [], [], []
    for metric in [1.0, 0.95, 0.94, 0.93, 0.5, 0.49, 0.48, 0.47, 0.46]:
        adam.step()
        chained.step()
        plateau.step(metric)
        cycle_opt.step()
        one_cycle.step()
        chained_lrs.append(adam.param_groups[0]["lr"])
        plateau_lrs.append(plateau_opt.param_groups[0]["lr"])
        cycle_lrs.append(cycle_opt.param_groups[0]["lr"])
        momenta.append(cycle_opt.param_groups[0]["momentum"])
    return {"lrs": lrs, "chained": chained_lrs, "plateau": plateau_lrs, "cycle": cycle_lrs,
            "momenta": momenta, "weight": model.weight.detach().numpy(),
            "state_keys": sorted(warm_cosine.state_dict())}


def resume_program(torch):
    """Six AdamW(amsgrad) steps in one go versus three, a torch.save checkpoint, and three more."""
    rng = np.random.default_rng(99)
    x = normal(torch, rng, 16, 4)
    y = x[:, :1] * 2

    def make(seed):
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8),
                                    torch.nn.Linear(8, 1))
        fill_(torch, model.parameters(), np.random.default_rng(seed), 0.4)
        opt = torch.optim.AdamW(model.parameters(), lr=0.02, amsgrad=True)
        return model, opt, torch.optim.lr_scheduler.StepLR(opt, 2, 0.7)

    def step(model, opt, sched):
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss.item()

    straight = make(0)
    full = [step(*straight) for _ in range(6)]
    first = make(0)
    resumed = [step(*first) for _ in range(3)]
    buffer = io.BytesIO()
    torch.save({"model": first[0].state_dict(), "opt": first[1].state_dict(),
                "sched": first[2].state_dict(), "epoch": 3}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer, weights_only=True)
    second = make(5)
    for part, key in zip(second, ("model", "opt", "sched")):
        part.load_state_dict(checkpoint[key])
    resumed += [step(*second) for _ in range(3)]
    state = second[1].state_dict()["state"][0]
    return {"full": full, "resumed": resumed, "weight": second[0][3].weight.detach().numpy(),
            "straight": straight[0][3].weight.detach().numpy(), "epoch": [checkpoint["epoch"]],
            "state_keys": sorted(state), "step": state["step"].numpy()}


def parametrizations_program(torch):
    """Adam through weight_norm, orthogonal and spectral_norm (fixed power-iteration vectors)."""
    nn = torch.nn
    P = nn.utils.parametrizations
    rng = np.random.default_rng(7)
    lin, orth_lin, sn_lin = nn.Linear(5, 4), nn.Linear(4, 4, bias=False), nn.Linear(4, 3)
    fill_(torch, list(lin.parameters()) + list(sn_lin.parameters()), rng, 0.3)
    fill_(torch, orth_lin.parameters(), rng, 0.2)
    lin, orth = P.weight_norm(lin, dim=0), P.orthogonal(orth_lin)
    sn = P.spectral_norm(sn_lin, n_power_iterations=3)
    power = sn.parametrizations.weight[0]
    with torch.no_grad():
        power._u.copy_(nn.functional.normalize(torch.ones(3), dim=0))
        power._v.copy_(nn.functional.normalize(torch.ones(4), dim=0))
    model = nn.Sequential(lin, nn.Tanh(), orth, nn.Tanh(), sn)
    x = normal(torch, rng, 6, 5)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(4):
        loss = model(x).pow(2).mean() - model(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    weight = orth.weight.detach()
    return {"loss": losses, "gram": (weight @ weight.T).numpy(),
            "names": sorted(n for n, _ in model.named_parameters()),
            "keys": sorted(model.state_dict()), "sn_weight": sn.weight.detach().numpy(),
            "g": lin.parametrizations.weight.original0.detach().numpy(),
            "eval": model(x).detach().numpy()}


def metrics_program(torch):
    """Accuracy, a bincount confusion matrix, F1, top-2, AUC by cumsum and by ranks, histc."""
    rng = np.random.default_rng(8)
    logits, y = normal(torch, rng, 50, 4), torch.from_numpy(rng.integers(0, 4, 50))
    with torch.no_grad():
        pred = logits.argmax(1)
        confusion = torch.bincount(y * 4 + pred, minlength=16).reshape(4, 4)
        precision = confusion.diag() / confusion.sum(0).clamp(min=1)
        recall = confusion.diag() / confusion.sum(1).clamp(min=1)
        f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)
        top2 = (logits.topk(2, dim=1).indices == y[:, None]).any(1).float().mean()
        scores, positive = torch.sigmoid(logits[:, 0]), (y == 0).long()
        order = torch.argsort(scores, descending=True)
        tps = torch.cumsum(positive[order], 0).float()
        fps = torch.cumsum(1 - positive[order], 0).float()
        auc = torch.trapezoid(torch.cat([torch.zeros(1), tps / tps[-1]]),
                              torch.cat([torch.zeros(1), fps / fps[-1]]))
        ranks = scores.argsort().argsort().float() + 1
        n_pos = positive.sum()
        rank_auc = (ranks[positive == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * (50 - n_pos))
        per_item = torch.nn.functional.cross_entropy(logits, y, reduction="none")
        confidence = torch.bucketize(logits.softmax(1).max(1).values, torch.linspace(0, 1, 6))
    return {"accuracy": (pred == y).float().mean().numpy(), "confusion": confusion.numpy(),
            "f1": f1.numpy(), "top2": top2.numpy(), "auc": auc.numpy(),
            "rank_auc": rank_auc.numpy(), "worst": per_item.topk(3).indices.tolist(),
            "hist": torch.histc(per_item, bins=5, min=0, max=5).numpy(),
            "confidence": confidence.tolist()}


def text_program(torch):
    """EmbeddingBag(mean) features plus a packed bidirectional LSTM over unsorted lengths."""
    nn = torch.nn
    rnn_utils = nn.utils.rnn
    rng = np.random.default_rng(12)
    seqs = [torch.from_numpy(rng.integers(1, 20, n)) for n in [5, 2, 7, 3]]
    labels = torch.tensor([0, 1, 1, 0])
    bag, emb = nn.EmbeddingBag(20, 6, mode="mean"), nn.Embedding(20, 6, padding_idx=0)
    lstm, head = nn.LSTM(6, 5, batch_first=True, bidirectional=True), nn.Linear(16, 2)
    params = [p for m in (bag, emb, lstm, head) for p in m.parameters()]
    fill_(torch, params, rng, 0.3)
    opt = torch.optim.Adam(params, lr=0.01)
    flat = torch.cat(seqs)
    offsets = torch.tensor([0] + [len(s) for s in seqs[:-1]]).cumsum(0)
    lengths = torch.tensor([len(s) for s in seqs])
    padded = rnn_utils.pad_sequence(seqs, batch_first=True)
    losses = []
    for _ in range(3):
        packed = rnn_utils.pack_padded_sequence(emb(padded), lengths, batch_first=True,
                                                enforce_sorted=False)
        out, (h, _) = lstm(packed)
        unpacked, _ = rnn_utils.pad_packed_sequence(out, batch_first=True)
        features = torch.cat([bag(flat, offsets), h[0], h[1]], 1)[:, :16]
        loss = nn.functional.cross_entropy(head(features), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    weights = torch.from_numpy(rng.random(len(flat)).astype(np.float32))
    summed = nn.EmbeddingBag.from_pretrained(bag.weight.detach(), mode="sum")
    return {"loss": losses, "unpacked": unpacked.detach().numpy(),
            "batch_sizes": packed.batch_sizes.tolist(), "order": packed.sorted_indices.tolist(),
            "weighted": summed(flat, offsets, per_sample_weights=weights).numpy(),
            "max": nn.functional.embedding_bag(flat, bag.weight, offsets,
                                               mode="max").detach().numpy()}


def recommender_program(torch):
    """Matrix factorization with sparse embeddings and biases trained by SparseAdam."""
    nn = torch.nn
    rng = np.random.default_rng(15)
    users = torch.from_numpy(rng.integers(0, 6, 30))
    items = torch.from_numpy(rng.integers(0, 8, 30))
    ratings = torch.from_numpy(rng.integers(1, 6, 30).astype(np.float32))
    U, V = nn.Embedding(6, 3, sparse=True), nn.Embedding(8, 3, sparse=True)
    user_bias, item_bias = nn.Embedding(6, 1, sparse=True), nn.Embedding(8, 1, sparse=True)
    params = [U.weight, V.weight, user_bias.weight, item_bias.weight]
    fill_(torch, params, rng, 0.1)
    opt = torch.optim.SparseAdam(params, lr=0.05)
    mean, losses = ratings.mean(), []
    for _ in range(3):
        for s in range(0, 30, 10):
            u, i, r = users[s:s + 10], items[s:s + 10], ratings[s:s + 10]
            pred = (U(u) * V(i)).sum(1) + user_bias(u).squeeze(1) + item_bias(i).squeeze(1) + mean
            loss = ((pred - r) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    with torch.no_grad():
        full = U.weight @ V.weight.T + user_bias.weight + item_bias.weight.T + mean
    return {"loss": losses, "full": full.numpy(), "top": full.topk(3, dim=1).indices.tolist(),
            "sparse": [int(U.weight.grad.is_sparse)], "grad": U.weight.grad.to_dense().numpy()}


def lbfgs_program(torch):
    """Float64 L2-regularized logistic regression by LBFGS, fixed step and strong Wolfe."""
    nn = torch.nn
    rng = np.random.default_rng(16)
    X = torch.from_numpy(rng.standard_normal((40, 3)))
    w_true = torch.tensor([1.5, -2.0, 0.7], dtype=torch.float64)
    y = (torch.sigmoid(X @ w_true) > torch.from_numpy(rng.random(40))).double()
    results = {}
    for search in [None, "strong_wolfe"]:
        model = nn.Linear(3, 1).double()
        fill_(torch, model.parameters(), np.random.default_rng(0), 0.1)
        opt = torch.optim.LBFGS(model.parameters(), lr=1 if search else 0.5, max_iter=20,
                                history_size=5, line_search_fn=search)

        def closure():
            opt.zero_grad()
            logits = model(X).squeeze(1)
            loss = nn.functional.binary_cross_entropy_with_logits(logits, y)
            loss = loss + 1e-3 * model.weight.pow(2).sum()
            loss.backward()
            return loss

        losses = [opt.step(closure).item(), opt.step(closure).item()]
        state = opt.state[model.weight]
        results[f"{search}_weight"] = model.weight.detach().numpy()
        results[f"{search}_loss"] = losses
        results[f"{search}_evals"] = [state["func_evals"], state["n_iter"]]
    return results


def swa_program(torch):
    """SGD with SWALR, an AveragedModel and an EMA model over buffers, then update_bn."""
    nn = torch.nn
    swa_utils = torch.optim.swa_utils
    rng = np.random.default_rng(30)
    model = nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1))
    fill_(torch, model.parameters(), rng, 0.3)
    swa = swa_utils.AveragedModel(model)
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9),
                                  use_buffers=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=3, anneal_strategy="cos")
    X = normal(torch, rng, 24, 3)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, X.sum(1, keepdim=True)),
                                         batch_size=8)
    lrs = []
    for _ in range(5):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ema.update_parameters(model)
        swa.update_parameters(model)
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    swa_utils.update_bn(((xb,) for xb, _ in loader), swa)
    swa.eval()
    ema.eval()
    with torch.no_grad():
        return {"lrs": lrs, "n_averaged": swa.n_averaged.numpy(),
                "mean": swa.module[1].running_mean.numpy(),
                "var": swa.module[1].running_var.numpy(),
                "ema_mean": ema.module[1].running_mean.numpy(),
                "swa_out": swa(X).numpy(), "ema_out": ema(X).numpy(),
                "keys": sorted(swa.state_dict())}


@pytest.mark.parametrize("program", [dataloader_program, schedulers_program, resume_program,
                                     parametrizations_program, metrics_program, text_program,
                                     recommender_program, lbfgs_program, swa_program],
                         ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch))


def test_resumed_training_matches_uninterrupted_training():
    results = resume_program(ember)
    np.testing.assert_allclose(results["resumed"], results["full"], rtol=1e-6)
    np.testing.assert_allclose(results["weight"], results["straight"], rtol=1e-6)
