"""Model compression written as its reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data: the pruning
API's corners (random_structured compared by shape, importance scores, global pruning,
custom_from_mask, a custom BasePruningMethod, remove, the masks in state_dict and reloading
them), iterative magnitude pruning with rewinding (the lottery ticket), parametrize
(a symmetric and a low-rank parametrization with right_inverse, cached(), orthogonal,
spectral_norm and weight_norm, old and new style), knowledge distillation (temperature KL,
log_target, FitNets hints) and low-rank factorisation of trained Linear layers by SVD. The
sibling _second_order file holds K-FAC, Shampoo, AdaHessian/Sophia, natural gradient,
influence functions and SAM; _compression_fixes pins what they found."""

import copy
import importlib

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _error(fn):
    """The (type name, message) an erroring call raises."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the type is the result
        return [type(exc).__name__, str(exc)]
    return ["no error", ""]


def prune_api_program(torch):
    """The pruning API beyond the tutorial: random_structured (compared by shape and count
    only), l1_unstructured with importance_scores, identity, custom_from_mask, a structured
    custom method, global pruning with importance scores, the pre-hook container, state_dict
    keys and a reload into a pruned copy, deepcopy, remove and its errors."""
    nn = torch.nn
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    rng = np.random.default_rng(2701)
    res = {}
    net = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 6),
                        nn.ReLU(), nn.Linear(6, 3))
    fill_(torch, net, rng)
    conv, fc1, fc2 = net[0], net[3], net[5]
    torch.manual_seed(0)
    prune.random_structured(conv, "weight", amount=0.5, dim=0)
    mask = conv.weight_mask
    res["rs_shape"] = list(mask.shape)
    res["rs_zero_channels"] = int((mask.sum(dim=(1, 2, 3)) == 0).sum())
    res["rs_channel_const"] = bool(((mask.amax(dim=(1, 2, 3)) - mask.amin(dim=(1, 2, 3))) == 0)
                                   .all())
    scores = torch.from_numpy(np.abs(rng.standard_normal(fc1.weight.shape)).astype(np.float32))
    prune.l1_unstructured(fc1, "weight", amount=0.3, importance_scores=scores)
    res["fc1_mask"] = fc1.weight_mask
    prune.identity(fc1, "bias")
    res["identity_mask"] = fc1.bias_mask
    cmask = torch.from_numpy((rng.random(fc2.weight.shape) > 0.4).astype(np.float32))
    prune.custom_from_mask(fc2, "weight", mask=cmask)
    res["custom_from_mask"] = fc2.weight

    class RowNorm(prune.BasePruningMethod):
        """Zeroes the rows whose L2 norm is below a threshold."""
        PRUNING_TYPE = "structured"

        def __init__(self, threshold, dim=-1):
            self.threshold = threshold
            self.dim = dim

        def compute_mask(self, t, default_mask):
            keep = t.norm(dim=1, keepdim=True) > self.threshold
            return default_mask * keep.to(default_mask.dtype)

        @classmethod
        def apply(cls, module, name, threshold):
            return super().apply(module, name, threshold=threshold)

    RowNorm.apply(fc1, "weight", 1.8)
    res["fc1_mask_2"] = fc1.weight_mask
    hook = next(h for h in fc1._forward_pre_hooks.values()
                if getattr(h, "_tensor_name", None) == "weight")
    res["container"] = [type(hook).__name__] + [type(h).__name__ for h in hook]
    res["is_pruned"] = [prune.is_pruned(fc1), prune.is_pruned(nn.Linear(2, 2))]
    res["keys"] = list(net.state_dict().keys())
    res["buffers"] = [n for n, _ in net.named_buffers()]
    x = normal(torch, rng, 3, 2, 6, 6)
    res["out"] = net(x)

    # the pruned weight is a non-leaf attribute: torch refuses to deepcopy the module
    res["deepcopy_err"] = _error(lambda: copy.deepcopy(net))
    twin = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 6),
                         nn.ReLU(), nn.Linear(6, 3))
    for m, n in [(twin[0], "weight"), (twin[3], "weight"), (twin[3], "bias"),
                 (twin[5], "weight")]:
        prune.identity(m, n)
    missing = twin.load_state_dict(net.state_dict())
    res["load"] = [list(missing.missing_keys), list(missing.unexpected_keys)]
    res["twin_out"] = twin(x)

    targets = ((net[0], "weight"), (net[3], "weight"), (net[5], "weight"))
    imp = {t: torch.from_numpy(rng.random(getattr(t[0], t[1]).shape).astype(np.float32))
           for t in targets}
    prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=20,
                              importance_scores=imp)
    res["global_zeros"] = [int((m.weight == 0).sum()) for m, _ in targets]
    res["global_struct_err"] = _error(lambda: prune.global_unstructured(
        targets, pruning_method=prune.LnStructured, amount=0.1))
    res["amount_err"] = _error(lambda: prune.l1_unstructured(nn.Linear(2, 2), "weight",
                                                             amount=7))
    res["neg_amount_err"] = _error(lambda: prune.l1_unstructured(nn.Linear(2, 2), "weight",
                                                                 amount=-0.5))
    res["remove_err"] = _error(lambda: prune.remove(nn.Linear(2, 2), "weight"))
    for m, n in [(conv, "weight"), (fc1, "weight"), (fc1, "bias"), (fc2, "weight")]:
        prune.remove(m, n)
    res["after_remove"] = [n for n, _ in net.named_parameters()]
    res["after_remove_hooks"] = [len(m._forward_pre_hooks) for m in net]
    res["weights"] = [conv.weight, fc1.weight, fc2.weight]
    res["is_param"] = [isinstance(fc1.weight, nn.Parameter), fc1.weight.requires_grad]
    return res


def lottery_ticket_program(torch):
    """Iterative magnitude pruning with rewinding as the lottery-ticket repositories write it:
    train, prune 20% of the remaining weights per layer by magnitude (l1_unstructured on the
    already-masked tensor), rewind weight_orig to the saved initial values under no_grad,
    retrain with Adam through the masks; sparsity, masks and losses per round."""
    nn = torch.nn
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    rng = np.random.default_rng(2702)
    model = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 8), nn.Tanh(),
                          nn.Linear(8, 3))
    fill_(torch, model, rng, 0.5)
    init_state = copy.deepcopy(model.state_dict())
    layers = [m for m in model if isinstance(m, nn.Linear)]
    x, y = normal(torch, rng, 16, 6), torch.from_numpy(rng.integers(0, 3, 16))
    res = {"losses": [], "sparsity": []}
    for round_ in range(3):
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        for _ in range(4):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            res["losses"].append(loss.item())
        for m in layers:
            prune.l1_unstructured(m, name="weight", amount=0.2)
        res["sparsity"].append(100.0 * sum(float((m.weight == 0).sum()) for m in layers)
                               / sum(m.weight.nelement() for m in layers))
        with torch.no_grad():
            for i, m in enumerate(layers):
                m.weight_orig.copy_(init_state[f"{2 * i}.weight"])
                m.bias.copy_(init_state[f"{2 * i}.bias"])
        res[f"grad_{round_}"] = layers[0].weight_orig.grad
    res["masks"] = [m.weight_mask for m in layers]
    res["final"] = [m.weight for m in layers]
    res["keys"] = list(model.state_dict().keys())
    res["grad_in_mask_zero"] = bool((layers[1].weight_orig.grad
                                     * (1 - layers[1].weight_mask) == 0).all())
    return res


def parametrize_program(torch):
    """torch.nn.utils.parametrize: a Symmetric parametrization with right_inverse, a chain of
    two on one tensor, a low-rank one whose right_inverse returns a tuple, cached() around
    several forwards, the `parametrizations.weight.original` names in state_dict and
    named_parameters, remove_parametrizations with and without leave_parametrized, and
    training through them."""
    nn = torch.nn
    P = torch.nn.utils.parametrize
    rng = np.random.default_rng(2703)
    res = {}

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = nn.Parameter(torch.tensor(1.5))

        def forward(self, X):
            return X * self.s

        def right_inverse(self, X):
            return X / self.s

    class LowRank(nn.Module):
        def forward(self, U, V):
            return U @ V.T

        def right_inverse(self, W):
            u, s, vh = torch.linalg.svd(W, full_matrices=False)
            r = 2
            return u[:, :r] * s[:r].sqrt(), vh[:r].T * s[:r].sqrt()

    lin = nn.Linear(4, 4)
    fill_(torch, lin, rng)
    P.register_parametrization(lin, "weight", Symmetric())
    res["sym"] = lin.weight
    res["sym_orig"] = lin.parametrizations.weight.original
    P.register_parametrization(lin, "weight", Scale())
    res["chain"] = lin.weight
    res["names"] = [n for n, _ in lin.named_parameters()]
    res["keys"] = list(lin.state_dict().keys())
    res["type"] = [type(lin).__name__, P.is_parametrized(lin), P.is_parametrized(lin, "bias")]
    with torch.no_grad():
        lin.weight = torch.from_numpy(rng.standard_normal((4, 4)).astype(np.float32))
    res["assigned"] = [lin.weight, lin.parametrizations.weight.original]

    low = nn.Linear(5, 4, bias=False)
    fill_(torch, low, rng)
    w0 = low.weight.detach().clone()
    P.register_parametrization(low, "weight", LowRank())
    res["low_names"] = [n for n, _ in low.named_parameters()]
    res["low_rank_err"] = (low.weight - w0).norm()
    res["low_shapes"] = [list(low.parametrizations.weight.original0.shape),
                         list(low.parametrizations.weight.original1.shape)]

    opt = torch.optim.SGD(list(lin.parameters()) + list(low.parameters()), lr=0.1,
                          momentum=0.9)
    x = normal(torch, rng, 6, 4)
    for _ in range(3):
        opt.zero_grad()
        with P.cached():
            h = lin(x) + lin(x).tanh()
            loss = (low(torch.cat([h, h[:, :1]], 1)) ** 2).mean()
        loss.backward()
        opt.step()
        res.setdefault("losses", []).append(loss.item())
    res["s"] = lin.parametrizations.weight[1].s
    res["grads"] = [p.grad for p in lin.parameters()]
    res["low_w"] = low.weight
    P.remove_parametrizations(lin, "weight", leave_parametrized=True)
    res["removed"] = [type(lin).__name__] + [n for n, _ in lin.named_parameters()]
    res["removed_w"] = lin.weight
    P.remove_parametrizations(low, "weight", leave_parametrized=True)
    res["low_removed"] = low.weight
    sym2 = nn.Linear(3, 3)
    fill_(torch, sym2, rng)
    P.register_parametrization(sym2, "weight", Symmetric())
    P.remove_parametrizations(sym2, "weight", leave_parametrized=False)
    res["not_left"] = sym2.weight
    res["unparam_err"] = _error(lambda: P.remove_parametrizations(sym2, "weight"))
    return res


def norms_program(torch):
    """The built-in parametrizations and the old hooks side by side: orthogonal (matrix_exp,
    cayley and householder maps on square and tall weights, the orthogonality error),
    spectral_norm from parametrizations with its u/v buffers set from NumPy and the old
    spectral_norm hook with weight_u, weight_norm both ways with dim=0 and dim=None, in
    train and eval mode, a few SGD steps through each."""
    nn = torch.nn
    pz = torch.nn.utils.parametrizations
    rng = np.random.default_rng(2704)
    res = {}
    x = normal(torch, rng, 5, 4)
    for i, (kind, shape) in enumerate([("matrix_exp", (4, 4)), ("cayley", (4, 4)),
                                       ("householder", (6, 4)), ("matrix_exp", (3, 4))]):
        lin = nn.Linear(shape[1], shape[0])
        fill_(torch, lin, rng)
        pz.orthogonal(lin, orthogonal_map=kind)
        w = lin.weight
        gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
        res[f"orth_err_{i}"] = (gram - torch.eye(gram.shape[0])).abs().max() < 1e-5
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            loss = lin(x[:, :shape[1]]).sin().sum()
            loss.backward()
            opt.step()
        w = lin.weight
        gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
        res[f"orth_after_{i}"] = (gram - torch.eye(gram.shape[0])).abs().max() < 1e-4
        res[f"orth_loss_{i}"] = loss

    sn = nn.Linear(4, 6)
    fill_(torch, sn, rng)
    pz.spectral_norm(sn, n_power_iterations=3)
    par = sn.parametrizations.weight[0]
    with torch.no_grad():
        par._u.copy_(torch.nn.functional.normalize(normal(torch, rng, 6), dim=0))
        par._v.copy_(torch.nn.functional.normalize(normal(torch, rng, 4), dim=0))
    res["sn_keys"] = list(sn.state_dict().keys())
    res["sn_w"] = sn.weight
    sn.eval()
    res["sn_eval"] = sn.weight
    sn.train()
    opt = torch.optim.SGD(sn.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        sn(x).pow(2).sum().backward()
        opt.step()
    res["sn_u"], res["sn_orig"] = par._u, sn.parametrizations.weight.original
    res["sn_sigma"] = torch.linalg.matrix_norm(sn.weight, 2)

    old = nn.Linear(4, 6)
    fill_(torch, old, rng)
    old = torch.nn.utils.spectral_norm(old, n_power_iterations=2)
    with torch.no_grad():
        old.weight_u.copy_(torch.nn.functional.normalize(normal(torch, rng, 6), dim=0))
        old.weight_v.copy_(torch.nn.functional.normalize(normal(torch, rng, 4), dim=0))
    res["old_sn_keys"] = list(old.state_dict().keys())
    res["old_sn_params"] = [n for n, _ in old.named_parameters()]
    old(x)
    res["old_sn_w"] = old.weight
    old.eval()
    res["old_sn_eval"] = old(x)
    old = torch.nn.utils.remove_spectral_norm(old)
    res["old_sn_removed"] = [n for n, _ in old.named_parameters()]

    for dim in (0, None):
        wn = nn.Linear(4, 3)
        fill_(torch, wn, rng)
        pz.weight_norm(wn, dim=dim)
        res[f"wn_keys_{dim}"] = list(wn.state_dict().keys())
        res[f"wn_g_{dim}"] = wn.parametrizations.weight.original0
        opt = torch.optim.SGD(wn.parameters(), lr=0.2)
        for _ in range(2):
            opt.zero_grad()
            wn(x).tanh().sum().backward()
            opt.step()
        res[f"wn_w_{dim}"] = wn.weight
        oldwn = nn.Linear(4, 3)
        fill_(torch, oldwn, rng)
        oldwn = torch.nn.utils.weight_norm(oldwn, dim=dim)
        res[f"old_wn_names_{dim}"] = [n for n, _ in oldwn.named_parameters()]
        res[f"old_wn_g_{dim}"] = oldwn.weight_g
        oldwn(x).sum().backward()
        res[f"old_wn_grads_{dim}"] = [oldwn.weight_g.grad, oldwn.weight_v.grad]
        torch.nn.utils.remove_weight_norm(oldwn)
        res[f"old_wn_removed_{dim}"] = [oldwn.weight]
    return res


def distillation_program(torch):
    """Knowledge distillation as the KD repositories write it: a frozen teacher in eval mode
    under no_grad, a student trained on alpha * T^2 * KL(student/T || teacher/T) plus
    cross-entropy, the KL both with log-probabilities as target (log_target=True) and with
    probabilities, reduction batchmean, and a FitNets hint loss on an intermediate feature map
    through a 1x1 conv regressor caught with a forward hook."""
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(2705)
    res = {}

    def net(width):
        return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width),
                             nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                             nn.Linear(width * 4, 5))

    teacher, student = net(8), net(4)
    fill_(torch, teacher, rng)
    fill_(torch, student, rng)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    regressor = nn.Conv2d(4, 8, 1)
    fill_(torch, regressor, rng)
    feats = {}
    teacher[2].register_forward_hook(lambda m, i, o: feats.__setitem__("t", o))
    student[2].register_forward_hook(lambda m, i, o: feats.__setitem__("s", o))
    opt = torch.optim.SGD(list(student.parameters()) + list(regressor.parameters()), lr=0.05,
                          momentum=0.9, nesterov=True, weight_decay=5e-4)
    x = normal(torch, rng, 6, 3, 5, 5)
    y = torch.from_numpy(rng.integers(0, 5, 6))
    T, alpha = 4.0, 0.7
    for step in range(3):
        with torch.no_grad():
            t_logits = teacher(x)
        s_logits = student(x)
        log_p = F.log_softmax(s_logits / T, dim=1)
        if step % 2 == 0:
            kd = F.kl_div(log_p, F.log_softmax(t_logits / T, dim=1), reduction="batchmean",
                          log_target=True)
        else:
            kd = nn.KLDivLoss(reduction="batchmean")(log_p, F.softmax(t_logits / T, dim=1))
        hint = F.mse_loss(regressor(feats["s"]), feats["t"])
        loss = alpha * T * T * kd + (1 - alpha) * F.cross_entropy(s_logits, y) + 0.1 * hint
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("kd", []).append(kd.item())
        res.setdefault("hint", []).append(hint.item())
        res.setdefault("loss", []).append(loss.item())
    res["kl_none"] = F.kl_div(log_p, F.log_softmax(t_logits / T, 1), reduction="none",
                              log_target=True)
    res["kl_sum_vs_mean"] = [F.kl_div(log_p, F.softmax(t_logits / T, 1), reduction="sum"),
                             F.kl_div(log_p, F.softmax(t_logits / T, 1), reduction="mean")]
    res["student"] = list(student.parameters())
    res["running"] = [student[1].running_mean, student[1].running_var,
                      student[1].num_batches_tracked]
    res["teacher_grad"] = [p.grad is None for p in teacher.parameters()]
    return res


def low_rank_program(torch):
    """Low-rank factorisation of trained Linear layers: train an MLP, replace each Linear by
    two (rank r from an energy threshold on the singular values, U*sqrt(S) and sqrt(S)*Vh
    copied into the new weights through .data), compare outputs before and after, count
    parameters, fine-tune the factorised model a few steps."""
    nn = torch.nn
    rng = np.random.default_rng(2706)
    res = {}
    model = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.Linear(16, 10), nn.GELU(),
                          nn.Linear(10, 4))
    fill_(torch, model, rng)
    x, y = normal(torch, rng, 20, 12), normal(torch, rng, 20, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    before = model(x).detach()
    ranks = []
    for i, m in enumerate(list(model)):
        if not isinstance(m, nn.Linear) or m.out_features < 8:
            continue
        U, S, Vh = torch.linalg.svd(m.weight.data, full_matrices=False)
        energy = torch.cumsum(S ** 2, 0) / (S ** 2).sum()
        r = int((energy < 0.9).sum().item()) + 1
        ranks.append(r)
        first = nn.Linear(m.in_features, r, bias=False)
        second = nn.Linear(r, m.out_features)
        first.weight.data = (S[:r].sqrt()[:, None] * Vh[:r]).contiguous()
        second.weight.data = U[:, :r] * S[:r].sqrt()
        second.bias.data = m.bias.data.clone()
        model[i] = nn.Sequential(first, second)
    res["ranks"] = ranks
    after = model(x)
    res["approx_err"] = (after - before).norm() / before.norm()
    res["n_params"] = sum(p.numel() for p in model.parameters())
    res["names"] = [n for n, _ in model.named_parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        res.setdefault("losses", []).append(loss.item())
    # the factors carry the SVD's sign choice: compare their products
    res["products"] = [model[0][1].weight @ model[0][0].weight,
                       model[2][1].weight @ model[2][0].weight, model[4].weight]
    res["biases"] = [model[0][1].bias, model[2][1].bias, model[4].bias]
    res["svdvals"] = torch.linalg.svdvals(model[0][1].weight @ model[0][0].weight)
    return res


def stacked_reparam_program(torch):
    """Reparametrizations stacked the way GAN and sparse-training repositories stack them:
    weight_norm then spectral_norm on one Linear (u/v set from NumPy, eval mode), magnitude
    pruning of a parametrization's `original`, an LSTM with orthogonal recurrent weights and an
    old-style weight-normed hidden matrix, torch.func.functional_call and grad through the
    `parametrizations.weight.original` names (the parametrization applied to the value given),
    and a step of SGD through all of it."""
    nn = torch.nn
    F = torch.nn.functional
    pz = torch.nn.utils.parametrizations
    P = torch.nn.utils.parametrize
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    rng = np.random.default_rng(2707)
    res = {}

    class Sym(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    lin = nn.Linear(3, 4)
    fill_(torch, lin, rng)
    pz.weight_norm(lin)
    pz.spectral_norm(lin, n_power_iterations=2)
    par = lin.parametrizations.weight[1]
    with torch.no_grad():
        par._u.copy_(F.normalize(normal(torch, rng, 4), dim=0))
        par._v.copy_(F.normalize(normal(torch, rng, 3), dim=0))
    res["stack_keys"] = list(lin.state_dict().keys())
    x = normal(torch, rng, 5, 3)
    res["stack_train"] = lin(x)
    lin.eval()
    res["stack_eval"] = lin(x)

    sym = nn.Linear(3, 3)
    fill_(torch, sym, rng)
    P.register_parametrization(sym, "weight", Sym())
    prune.l1_unstructured(sym.parametrizations.weight, "original", amount=3)
    res["pruned_sym"] = sym.weight
    res["pruned_sym_keys"] = list(sym.state_dict().keys())

    lstm = nn.LSTM(3, 4, batch_first=True)
    fill_(torch, lstm, rng)
    pz.orthogonal(lstm, "weight_hh_l0")
    # a tall weight's base is completed to a square orthogonal matrix with torch.randn
    # columns: replace them with a completion drawn from NumPy
    base = lstm.parametrizations.weight_hh_l0[0].base
    q = base[:, :4].numpy().astype(np.float64)
    extra = rng.standard_normal((16, 12))
    extra = np.linalg.qr(extra - q @ (q.T @ extra))[0]
    with torch.no_grad():
        base[:, 4:] = torch.from_numpy(extra.astype(np.float32))
    res["lstm_orth"] = (lstm.weight_hh_l0.T @ lstm.weight_hh_l0 - torch.eye(4)).abs().max() < 1e-5
    lstm2 = nn.LSTM(3, 4)
    fill_(torch, lstm2, rng)
    lstm2 = torch.nn.utils.weight_norm(lstm2, "weight_hh_l0", dim=0)
    seq = normal(torch, rng, 2, 5, 3)
    out, (h, c) = lstm(seq)
    out2, _ = lstm2(seq.transpose(0, 1))
    res["lstm_names"] = [n for n, _ in lstm2.named_parameters()]

    params = {n: p.detach() for n, p in sym.named_parameters()}
    params["parametrizations.weight.original_orig"] = normal(torch, rng, 3, 3)
    res["fc_orig"] = torch.func.functional_call(sym, params, (x,))
    grads = torch.func.grad(
        lambda p: torch.func.functional_call(sym, p, (x,)).pow(2).sum())(params)
    res["fc_grads"] = [grads[k] for k in sorted(grads)]
    res["fc_keys"] = sorted(grads)

    lin.train()
    opt = torch.optim.SGD(list(lin.parameters()) + list(sym.parameters())
                          + list(lstm.parameters()) + list(lstm2.parameters()), lr=0.1)
    loss = (lin(x).pow(2).mean() + sym(x).tanh().sum() + out.pow(2).mean() + h.sum()
            + out2.abs().mean())
    opt.zero_grad()
    loss.backward()
    opt.step()
    res["loss"] = loss
    res["after"] = [lin.weight, sym.weight, lstm.weight_hh_l0, lstm2.weight_hh_l0]
    res["grads"] = [lin.parametrizations.weight.original0.grad,
                    sym.parametrizations.weight.original_orig.grad,
                    lstm.parametrizations.weight_hh_l0.original.grad, lstm2.weight_hh_l0_g.grad]
    return res


def sparse_deploy_program(torch):
    """Deploying a pruned network as compression repositories do: structured L2 pruning of
    conv filters, the pruned filters physically removed (index_select on the kept channels of
    the conv, its BatchNorm and the next conv's input channels, outputs compared), then
    unstructured pruning of the classifier made permanent with prune.remove and its weight
    stored as COO and CSR tensors used by F.linear (with and without a bias) and by a
    Linear whose weight is a sparse Parameter; a fine-tuning step through the sparse weight."""
    nn = torch.nn
    F = torch.nn.functional
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    rng = np.random.default_rng(2708)
    res = {}
    net = nn.Sequential(nn.Conv2d(2, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                        nn.Conv2d(6, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
    fill_(torch, net, rng)
    with torch.no_grad():
        net[1].running_mean.copy_(normal(torch, rng, 6) * 0.1)
        net[1].running_var.copy_(normal(torch, rng, 6).abs() + 0.5)
    net.eval()
    x = normal(torch, rng, 3, 2, 6, 6)
    prune.ln_structured(net[0], "weight", amount=2, n=2, dim=0)
    keep = net[0].weight_mask.flatten(1).sum(1).nonzero().squeeze(1)
    res["keep"] = keep.tolist()
    reference = net(x)
    small = nn.Sequential(nn.Conv2d(2, len(keep), 3, padding=1), nn.BatchNorm2d(len(keep)),
                          nn.ReLU(), nn.Conv2d(len(keep), 4, 3), nn.ReLU(), nn.Flatten(),
                          nn.Linear(64, 5)).eval()
    with torch.no_grad():
        small[0].weight.copy_(net[0].weight.index_select(0, keep))
        small[0].bias.copy_(net[0].bias[keep])
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(small[1], name).copy_(getattr(net[1], name)[keep])
        small[3].weight.copy_(net[3].weight[:, keep])
        small[3].bias.copy_(net[3].bias)
        small[6].load_state_dict(net[6].state_dict())
    res["surgery_err"] = (small(x) - reference).abs().max() < 1e-5
    res["params"] = [sum(p.numel() for p in net.parameters()),
                     sum(p.numel() for p in small.parameters())]

    fc = small[6]
    prune.l1_unstructured(fc, "weight", amount=0.7)
    prune.remove(fc, "weight")
    feats = small[:6](x)
    dense_out = fc(feats)
    coo, csr = fc.weight.detach().to_sparse(), fc.weight.detach().to_sparse_csr()
    res["nnz"] = [coo._nnz(), csr.values().numel()]
    res["sparse_outs"] = [F.linear(feats, coo) + fc.bias, F.linear(feats, csr, fc.bias),
                          F.linear(feats.unsqueeze(0), coo, fc.bias).squeeze(0), dense_out]
    sparse_fc = nn.Linear(64, 5)
    sparse_fc.weight = nn.Parameter(coo.clone())
    sparse_fc.bias = nn.Parameter(fc.bias.detach().clone())
    y = torch.from_numpy(rng.integers(0, 5, 3))
    loss = F.cross_entropy(sparse_fc(feats.detach().unsqueeze(1)).squeeze(1), y)
    loss.backward()
    res["loss"] = loss
    res["grad_layout"] = [str(sparse_fc.weight.grad.layout).rsplit(".", 1)[-1]]
    res["grad"] = sparse_fc.weight.grad
    with torch.no_grad():
        masked = sparse_fc.weight.grad * (fc.weight != 0)
    res["masked_grad"] = masked
    return res


PROGRAMS = [prune_api_program, lottery_ticket_program, parametrize_program, norms_program,
            distillation_program, low_rank_program, stacked_reparam_program,
            sparse_deploy_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
