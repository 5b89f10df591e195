"""More training recipes written the way their popular repositories write them (see
test_parity_programs_round20_recipes.py), run once with `torch` bound to ember and once to
PyTorch from the same NumPy weights and data: a TabNet-style tabular model (sparsemax/entmax
Functions, ghost batch norm, max_norm and sparse embeddings with SparseAdam), an optimizer and
scheduler zoo with their state_dicts, and knowledge distillation with an EMA teacher, SWA and
inference_mode mixes; and grad mode inside inference mode."""

import copy

import numpy as np
import pytest

import ember
from tests.parity._compare import error
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def entmax_functions(torch):
    """entmax15 (with its custom backward), sparsemax and sparsemoid as NODE's lib writes them."""

    def _make_ix_like(input, dim=0):
        d = input.size(dim)
        rho = torch.arange(1, d + 1, device=input.device, dtype=input.dtype)
        view = [1] * input.dim()
        view[0] = -1
        return rho.view(view).transpose(0, dim)

    class SparsemaxFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, dim=-1):
            ctx.dim = dim
            max_val, _ = input.max(dim=dim, keepdim=True)
            input -= max_val
            tau, supp_size = SparsemaxFunction._threshold_and_support(input, dim=dim)
            output = torch.clamp(input - tau, min=0)
            ctx.save_for_backward(supp_size, output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            supp_size, output = ctx.saved_tensors
            dim = ctx.dim
            grad_input = grad_output.clone()
            grad_input[output == 0] = 0
            v_hat = grad_input.sum(dim=dim) / supp_size.to(output.dtype).squeeze()
            v_hat = v_hat.unsqueeze(dim)
            grad_input = torch.where(output != 0, grad_input - v_hat, grad_input)
            return grad_input, None

        @staticmethod
        def _threshold_and_support(input, dim=-1):
            input_srt, _ = torch.sort(input, descending=True, dim=dim)
            input_cumsum = input_srt.cumsum(dim) - 1
            rhos = _make_ix_like(input, dim)
            support = rhos * input_srt > input_cumsum
            support_size = support.sum(dim=dim).unsqueeze(dim)
            tau = input_cumsum.gather(dim, support_size - 1)
            tau /= support_size.to(input.dtype)
            return tau, support_size

    class Entmax15Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, dim=-1):
            ctx.dim = dim
            max_val, _ = input.max(dim=dim, keepdim=True)
            input = input - max_val
            input = input / 2
            tau_star, _ = Entmax15Function._threshold_and_support(input, dim)
            output = torch.clamp(input - tau_star, min=0) ** 2
            ctx.save_for_backward(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            Y, = ctx.saved_tensors
            gppr = Y.sqrt()
            dX = grad_output * gppr
            q = dX.sum(ctx.dim) / gppr.sum(ctx.dim)
            q = q.unsqueeze(ctx.dim)
            dX -= q * gppr
            return dX, None

        @staticmethod
        def _threshold_and_support(input, dim=-1):
            Xsrt, _ = torch.sort(input, descending=True, dim=dim)
            rho = _make_ix_like(input, dim)
            mean = Xsrt.cumsum(dim) / rho
            mean_sq = (Xsrt ** 2).cumsum(dim) / rho
            ss = rho * (mean_sq - mean ** 2)
            delta = (1 - ss) / rho
            delta_nz = torch.clamp(delta, 0)
            tau = mean - torch.sqrt(delta_nz)
            support_size = (tau <= Xsrt).sum(dim).unsqueeze(dim)
            tau_star = tau.gather(dim, support_size - 1)
            return tau_star, support_size

    def sparsemoid(input):
        return (0.5 * input + 0.5).clamp_(0, 1)

    def entmoid15(input):
        input = input.abs()
        is_pos = input >= 0  # NODE's Entmoid15 is its own Function; the same value here
        tau = (input + torch.sqrt(F_relu(8 - input ** 2))) / 2
        tau = torch.where(tau <= input, torch.full_like(tau, 2.0), tau)
        y_neg = 0.25 * F_relu(tau - input) ** 2
        return torch.where(is_pos, 1 - y_neg, y_neg)

    F_relu = torch.nn.functional.relu
    return (lambda x, dim=-1: Entmax15Function.apply(x, dim),
            lambda x, dim=-1: SparsemaxFunction.apply(x, dim), sparsemoid, entmoid15)


def tabnet_program(torch):
    """A TabNet-style classifier (pytorch-tabnet's sparsemax/entmax Functions, ghost batch
    norm, attentive transformer with priors), categorical embeddings with max_norm and
    padding_idx, and a sparse embedding trained by SparseAdam beside Adam."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(22)

    entmax15, sparsemax = entmax_functions(torch)[:2]

    class Sparsemax(nn.Module):
        def __init__(self, dim=-1):
            self.dim = dim
            super().__init__()

        def forward(self, input):
            return sparsemax(input, self.dim)

    class GBN(nn.Module):
        def __init__(self, input_dim, virtual_batch_size=4, momentum=0.01):
            super().__init__()
            self.virtual_batch_size = virtual_batch_size
            self.bn = nn.BatchNorm1d(input_dim, momentum=momentum)

        def forward(self, x):
            chunks = x.chunk(int(np.ceil(x.shape[0] / self.virtual_batch_size)), 0)
            res = [self.bn(x_) for x_ in chunks]
            return torch.cat(res, dim=0)

    class GLULayer(nn.Module):
        def __init__(self, input_dim, output_dim):
            super().__init__()
            self.output_dim = output_dim
            self.fc = nn.Linear(input_dim, 2 * output_dim, bias=False)
            self.bn = GBN(2 * output_dim)

        def forward(self, x):
            x = self.bn(self.fc(x))
            return torch.mul(x[:, : self.output_dim], torch.sigmoid(x[:, self.output_dim:]))

    class FeatTransformer(nn.Module):
        def __init__(self, input_dim, output_dim):
            super().__init__()
            self.glu1 = GLULayer(input_dim, output_dim)
            self.glu2 = GLULayer(output_dim, output_dim)

        def forward(self, x):
            scale = torch.sqrt(torch.FloatTensor([0.5]).to(x.device))
            x = self.glu1(x)
            return (x + self.glu2(x)) * scale

    class AttentiveTransformer(nn.Module):
        def __init__(self, input_dim, group_dim):
            super().__init__()
            self.fc = nn.Linear(input_dim, group_dim, bias=False)
            self.bn = GBN(group_dim, momentum=0.02)
            self.selector = Sparsemax(dim=-1)

        def forward(self, priors, processed_feat):
            x = self.bn(self.fc(processed_feat))
            return self.selector(torch.mul(x, priors))

    class TabNet(nn.Module):
        def __init__(self, cat_dims, cat_emb_dim, n_cont, n_d=4, n_a=4, n_steps=2, gamma=1.3):
            super().__init__()
            self.embeddings = nn.ModuleList(
                nn.Embedding(n, cat_emb_dim, padding_idx=0, max_norm=1.0) for n in cat_dims)
            self.post_embed_dim = len(cat_dims) * cat_emb_dim + n_cont
            self.n_d, self.n_steps, self.gamma, self.epsilon = n_d, n_steps, gamma, 1e-15
            self.initial_bn = nn.BatchNorm1d(self.post_embed_dim, momentum=0.01)
            self.initial_splitter = FeatTransformer(self.post_embed_dim, n_d + n_a)
            self.feat_transformers = nn.ModuleList(
                FeatTransformer(self.post_embed_dim, n_d + n_a) for _ in range(n_steps))
            self.att_transformers = nn.ModuleList(
                AttentiveTransformer(n_a, self.post_embed_dim) for _ in range(n_steps))
            self.final_mapping = nn.Linear(n_d, 3, bias=False)

        def forward(self, x_cat, x_cont):
            cols = [emb(x_cat[:, i]) for i, emb in enumerate(self.embeddings)]
            x = torch.cat(cols + [x_cont], dim=1)
            x = self.initial_bn(x)
            prior = torch.ones(x.shape).to(x.device)
            M_loss = 0
            att = self.initial_splitter(x)[:, self.n_d:]
            steps_output = []
            masks = []
            for step in range(self.n_steps):
                M = self.att_transformers[step](prior, att)
                M_loss += torch.mean(torch.sum(torch.mul(M, torch.log(M + self.epsilon)),
                                               dim=1))
                prior = torch.mul(self.gamma - M, prior)
                out = self.feat_transformers[step](torch.mul(M, x))
                steps_output.append(F.relu(out[:, : self.n_d]))
                att = out[:, self.n_d:]
                masks.append(M)
            res = torch.sum(torch.stack(steps_output, dim=0), dim=0)
            return self.final_mapping(res), M_loss / self.n_steps, masks

    res = {}
    # the mapping functions alone: values, sparsity and custom gradients
    z = normal(torch, rng, 5, 6) * 2
    z.requires_grad_()
    sp = sparsemax(z.clone(), -1)
    en = entmax15(z, -1)
    (sp * torch.arange(6.0)).sum().backward(retain_graph=True)
    res["sparsemax"] = sp
    res["sparsemax_grad"] = z.grad
    z.grad = None
    (en * torch.arange(6.0)).sum().backward()
    res["entmax"] = en
    res["entmax_grad"] = z.grad
    res["sums"] = [sp.sum(-1), en.sum(-1)]
    res["support"] = [(sp > 0).sum(-1), (en > 0).sum(-1)]
    res["sparsemax_dim0"] = sparsemax(z.detach().clone(), 0)

    cat_dims = [5, 4]
    torch.manual_seed(0)
    model = TabNet(cat_dims, 3, n_cont=2)
    fill_(torch, model, rng, 0.5)
    with torch.no_grad():
        for emb in model.embeddings:     # rows of norm > 1 for max_norm to renormalize
            emb.weight.mul_(3.0)
            emb.weight[emb.padding_idx].fill_(0)
    x_cat = torch.from_numpy(np.stack([rng.integers(0, n, 10) for n in cat_dims], 1))
    x_cont = normal(torch, rng, 10, 2)
    y = torch.from_numpy(rng.integers(0, 3, 10))
    norms_before = [emb.weight.norm(dim=1) for emb in model.embeddings]
    dense = [p for n, p in model.named_parameters() if not n.startswith("embeddings")]
    # SGD, not Adam: the initial batch norm's shift of a column that reaches the loss only
    # through the splitter's ghost batch norm has a gradient of exactly zero, whose rounding
    # noise Adam would scale up to a full step of either sign
    opt = torch.optim.SGD(dense, lr=0.05, momentum=0.9, nesterov=True)
    emb_opt = torch.optim.Adam(model.embeddings.parameters(), lr=0.02)
    res.update(loss=[], m_loss=[])
    model.train()
    for step in range(3):
        opt.zero_grad()
        emb_opt.zero_grad()
        logits, m_loss, masks = model(x_cat, x_cont)
        loss = F.cross_entropy(logits, y) + 1e-3 * m_loss
        loss.backward()
        opt.step()
        emb_opt.step()
        res["loss"].append(loss.item())
        res["m_loss"].append(m_loss.item())
    res["masks"] = masks
    res["mask_rows"] = [m.sum(-1) for m in masks]
    used = [torch.unique(x_cat[:, i]) for i in range(len(cat_dims))]
    res["renormed"] = [torch.cat([emb.weight.norm(dim=1)[u] for emb, u in
                                  zip(model.embeddings, used)])]
    res["norms_before"] = norms_before
    res["padding_rows"] = [emb.weight[0] for emb in model.embeddings]
    res["padding_grad"] = [emb.weight.grad[0] for emb in model.embeddings]
    res["running"] = [model.initial_bn.running_mean, model.initial_bn.running_var,
                      model.att_transformers[0].bn.bn.running_var]
    res["tracked"] = [int(model.att_transformers[0].bn.bn.num_batches_tracked),
                      int(model.initial_bn.num_batches_tracked)]
    # explain: aggregate feature importances from the masks, in eval mode
    model.eval()
    with torch.no_grad():
        _, _, masks = model(x_cat, x_cont)
        importance = torch.stack(masks).sum(0).sum(0)
        res["importance"] = importance / importance.sum()
    # the functional renorm, and a max_norm lookup under no_grad
    w = torch.from_numpy(rng.standard_normal((4, 3)).astype(np.float32) * 2)
    with torch.no_grad():
        torch.embedding_renorm_(w, torch.tensor([0, 2, 2]), 1.5, 2.0)
    res["embedding_renorm_"] = w
    w2 = w.clone()
    out = F.embedding(torch.tensor([[1, 3], [3, 0]]), w2, max_norm=0.5, norm_type=1.0)
    res["f_embedding_max_norm"] = [out, w2]

    # sparse embeddings: SparseAdam for the table, Adam for the rest
    emb = nn.Embedding(6, 3, sparse=True)
    head = nn.Linear(3, 1)
    fill_(torch, emb, rng, 1.0)
    fill_(torch, head, rng, 0.5)
    sparse_opt = torch.optim.SparseAdam(list(emb.parameters()), lr=0.1)
    dense_opt = torch.optim.Adam(head.parameters(), lr=0.1)
    ids = torch.tensor([[0, 2, 2], [5, 1, 2]])
    target = torch.tensor([[1.0], [-1.0]])
    res.update(sparse_loss=[])
    for step in range(3):
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        pred = head(emb(ids).mean(1))
        loss = F.mse_loss(pred, target)
        loss.backward()
        if step == 0:
            g = emb.weight.grad
            res["sparse_grad"] = [g.is_sparse, g.layout == torch.sparse_coo, g._nnz(),
                                  str(tuple(g.shape)), g.is_coalesced()]
            res["sparse_grad_dense"] = g.to_dense()
            res["sparse_grad_coalesced"] = g.coalesce().indices()
        sparse_opt.step()
        dense_opt.step()
        res["sparse_loss"].append(loss.item())
    res["sparse_table"] = emb.weight
    res["untouched_rows"] = emb.weight[[3, 4]]
    st = sparse_opt.state_dict()["state"][0]
    res["sparse_state"] = sorted(st)
    res["sparse_step"] = [str(st["step"]), type(st["step"]).__name__]
    res["sparse_exp_avg_sq"] = st["exp_avg_sq"]
    res["sparse_dense_param_error"] = list(error(
        lambda lib: torch.optim.SparseAdam(head.parameters()), torch) or ("none",))
    try:
        bad = nn.Embedding(3, 2)
        opt_bad = torch.optim.SparseAdam(bad.parameters())
        bad(torch.tensor([1])).sum().backward()
        opt_bad.step()
    except RuntimeError as e:
        res["sparse_dense_grad_error"] = [str(e)]
    return res


def optimizer_zoo_program(torch):
    """Every classic optimizer on one small model, with the schedulers recipes pair them
    with, the foreach/fused switches, and their state_dicts."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(23)
    x = normal(torch, rng, 8, 4)
    y = normal(torch, rng, 8, 2)
    init = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in ((3, 4), (3,), (2, 3),
                                                                     (2,))]

    def model_and_params():
        model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
        with torch.no_grad():
            for p, v in zip(model.parameters(), init):
                p.copy_(torch.from_numpy(v))
        return model

    def groups(model):
        return [{"params": [model[0].weight, model[2].weight]},
                {"params": [model[0].bias, model[2].bias], "weight_decay": 0.0}]

    def closure_for(model, opt):
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss
        return closure

    optim = torch.optim
    S = torch.optim.lr_scheduler
    recipes = {
        "adagrad": (lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=1e-3,
                                         initial_accumulator_value=0.1, foreach=True),
                    lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=1e-3)),
        "adadelta": (lambda ps: optim.Adadelta(ps, lr=1.0, rho=0.8, weight_decay=1e-3,
                                           foreach=False, maximize=False),
                     lambda o: S.PolynomialLR(o, total_iters=4, power=2.0)),
        "rmsprop": (lambda ps: optim.RMSprop(ps, lr=0.01, alpha=0.9, momentum=0.5, centered=True,
                                         weight_decay=1e-3, foreach=True),
                    lambda o: S.CyclicLR(o, base_lr=0.001, max_lr=0.01, step_size_up=2,
                                         mode="triangular2", cycle_momentum=True,
                                         base_momentum=0.3, max_momentum=0.6)),
        "nadam": (lambda ps: optim.NAdam(ps, lr=0.01, weight_decay=0.01, momentum_decay=4e-3,
                                     decoupled_weight_decay=True, foreach=False),
                  lambda o: S.ChainedScheduler([S.ConstantLR(o, factor=0.5, total_iters=2),
                                                S.ExponentialLR(o, gamma=0.9)])),
        "radam": (lambda ps: optim.RAdam(ps, lr=0.01, weight_decay=0.01,
                                     decoupled_weight_decay=True, foreach=True),
                  lambda o: S.StepLR(o, step_size=2, gamma=0.5)),
        "adamax": (lambda ps: optim.Adamax(ps, lr=0.02, betas=(0.8, 0.99), weight_decay=1e-3,
                                       foreach=False),
                   lambda o: S.MultiStepLR(o, milestones=[1, 3], gamma=0.3)),
        "asgd": (lambda ps: optim.ASGD(ps, lr=0.05, lambd=1e-3, alpha=0.75, t0=2,
                                   weight_decay=1e-3, foreach=True),
                 lambda o: S.LinearLR(o, start_factor=0.5, total_iters=3)),
        "rprop": (lambda ps: optim.Rprop(ps, lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-4, 0.5),
                                     foreach=False, maximize=False),
                  lambda o: S.LambdaLR(o, lr_lambda=[lambda e: 0.9 ** e, lambda e: 1.0])),
        "sgd": (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, dampening=0,
                                 weight_decay=1e-3, maximize=True, foreach=True),
                lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.05, step_size_up=1,
                                     step_size_down=2, mode="exp_range", gamma=0.9)),
        "adam_fused": (lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True, fused=True),
                       lambda o: S.OneCycleLR(o, max_lr=0.05, total_steps=6)),
        "adamw_capturable": (lambda ps: optim.AdamW(ps, lr=0.01, capturable=False, foreach=True),
                             lambda o: S.ReduceLROnPlateau(o, factor=0.5, patience=0)),
    }
    res = {}
    for name, (make_opt, make_sched) in recipes.items():
        model = model_and_params()
        opt = make_opt(groups(model))
        sched = make_sched(opt)
        closure = closure_for(model, opt)
        losses, lrs, params, extra = [], [], [], []
        for step in range(4):
            loss = opt.step(closure)
            if isinstance(sched, S.ReduceLROnPlateau):
                sched.step(loss.item() + (1.0 if step == 1 else 0.0))
            else:
                sched.step()
            losses.append(loss.item())
            lrs.append(opt.param_groups[0]["lr"])
            params.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
            if "momentum" in opt.param_groups[0]:
                extra.append(opt.param_groups[0]["momentum"])
            elif "betas" in opt.param_groups[0]:
                extra.append(opt.param_groups[0]["betas"][0])
        res[f"{name}_loss"] = losses
        res[f"{name}_lr"] = lrs
        res[f"{name}_params"] = params
        res[f"{name}_momentum"] = extra
        sd = opt.state_dict()
        state = sd["state"][0]
        res[f"{name}_state_keys"] = sorted(state)
        res[f"{name}_state_types"] = [
            f"{k}:{_name(v.dtype)}:{tuple(v.shape)}" if hasattr(v, "dtype")
            else f"{k}:{type(v).__name__}" for k, v in sorted(state.items())]
        res[f"{name}_group_keys"] = sorted(sd["param_groups"][1])
        res[f"{name}_group_values"] = sorted(
            f"{k}={v}" for k, v in sd["param_groups"][1].items()
            if k not in ("params", "lr", "initial_lr", "momentum", "betas", "max_lr",
                         "min_lr", "base_momentum", "max_momentum", "max_momentum"))
        res[f"{name}_sched_keys"] = sorted(k for k in sched.state_dict()
                                           if not k.startswith("_"))
        # a fresh optimizer loaded from the state_dict steps exactly as the original
        twin = model_and_params()
        with torch.no_grad():
            for p, q in zip(twin.parameters(), model.parameters()):
                p.copy_(q)
        opt2 = make_opt(groups(twin))
        opt2.load_state_dict(copy.deepcopy(sd))
        opt.step(closure)
        opt2.step(closure_for(twin, opt2))
        res[f"{name}_resumed"] = [max((p - q).abs().max().item()
                                      for p, q in zip(model.parameters(), twin.parameters()))]
    # schedulers' own values over more steps
    p = [nn.Parameter(torch.zeros(1))]
    o = optim.SGD(p, lr=1.0, momentum=0.9)
    warm = S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=1, eta_min=0.1)
    values = []
    for epoch in range(7):
        for i in range(2):      # fractional epochs, as the docs' batch loop passes them
            warm.step(epoch + i / 2)
            values.append(warm.get_last_lr()[0])
    res["warm_restarts"] = values
    res["warm_T_cur"] = [warm.T_cur, warm.T_i, warm.last_epoch]
    o = optim.SGD(p, lr=1.0, momentum=0.9)
    cyc = S.CyclicLR(o, base_lr=0.1, max_lr=1.0, step_size_up=2, scale_fn=lambda x: 0.5 ** x,
                     scale_mode="cycle")
    cyc_lr, cyc_mom = [], []
    for _ in range(6):
        o.step()
        cyc.step()
        cyc_lr.append(cyc.get_last_lr()[0])
        cyc_mom.append(o.param_groups[0]["momentum"])
    res["cyclic_scale_fn"] = [cyc_lr, cyc_mom]
    res["cyclic_no_momentum"] = list(error(lambda lib: S.CyclicLR(
        optim.Adagrad(p), base_lr=0.1, max_lr=1.0, cycle_momentum=True), torch) or ("none",))
    o = optim.SGD(p, lr=1.0)
    poly = S.PolynomialLR(o, total_iters=3, power=0.5)
    res["poly"] = [poly.get_last_lr()[0]] + [(o.step(), poly.step(), poly.get_last_lr()[0])[2]
                                             for _ in range(5)]
    errors = {
        "fused_sgd_nesterov": lambda lib: optim.SGD(p, lr=0.1, nesterov=True),
        "nadam_bad_momentum_decay": lambda lib: optim.NAdam(p, momentum_decay=-1.0),
        "rprop_bad_etas": lambda lib: optim.Rprop(p, etas=(1.5, 1.2)),
        "foreach_and_fused": lambda lib: optim.Adam(p, foreach=True, fused=True),
        "asgd_bad_lr": lambda lib: optim.ASGD(p, lr=-0.1),
        "adadelta_bad_rho": lambda lib: optim.Adadelta(p, rho=1.5),
        "warm_restarts_bad_T0": lambda lib: S.CosineAnnealingWarmRestarts(optim.SGD(p, 0.1),
                                                                          T_0=0),
    }
    for key, fn in errors.items():
        res[f"error_{key}"] = list(error(fn, torch) or ("none",))
    return res


def distillation_program(torch):
    """Knowledge distillation from a frozen teacher (temperature-scaled KLDivLoss with log
    targets), a DINO-style EMA teacher, and SWA with update_bn, mixing no_grad and
    inference_mode as training loops do."""
    nn = torch.nn
    F = nn.functional
    swa_utils = torch.optim.swa_utils
    rng = np.random.default_rng(24)

    def net(width):     # no bias before batch norm: its gradient would be rounding noise
        return nn.Sequential(nn.Linear(5, width, bias=False), nn.BatchNorm1d(width), nn.GELU(),
                             nn.Dropout(0.0), nn.Linear(width, 4))

    class DistillKL(nn.Module):
        """The CRD repository's distillation loss."""
        def __init__(self, T):
            super().__init__()
            self.T = T

        def forward(self, y_s, y_t):
            p_s = F.log_softmax(y_s / self.T, dim=1)
            p_t = F.softmax(y_t / self.T, dim=1)
            return F.kl_div(p_s, p_t, reduction="sum") * (self.T ** 2) / y_s.shape[0]

    res = {}
    torch.manual_seed(0)
    teacher, student = net(8), net(6)
    fill_(torch, teacher, rng, 0.6)
    fill_(torch, student, rng, 0.4)
    teacher.eval()
    teacher.requires_grad_(False)
    x = normal(torch, rng, 12, 5)
    y = torch.from_numpy(rng.integers(0, 4, 12))
    T = 3.0
    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    crd = DistillKL(T)
    opt = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    res.update(loss=[], kd=[], crd=[], ce=[])
    for step in range(3):
        with torch.no_grad():
            t_logits = teacher(x)
        s_logits = student(x)
        kd = kl(F.log_softmax(s_logits / T, dim=-1), F.log_softmax(t_logits / T, dim=-1))
        kd = kd * T * T
        ce = F.cross_entropy(s_logits, y)
        loss = 0.7 * kd + 0.3 * ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["kd"].append(kd.item())
        res["crd"].append(crd(s_logits, t_logits).item())
        res["ce"].append(ce.item())
    res["teacher_grads"] = [p.grad is None for p in teacher.parameters()]
    res["kl_node"] = [type(kd.grad_fn).__name__, type(kd.grad_fn.next_functions[0][0]).__name__]
    # the KLDivLoss reductions against each other, and their warning
    s_lp = F.log_softmax(normal(torch, rng, 3, 4), -1)
    t_lp = F.log_softmax(normal(torch, rng, 3, 4), -1)
    res["kl_reductions"] = [F.kl_div(s_lp, t_lp, reduction=r, log_target=True)
                            for r in ("sum", "batchmean", "none")]
    res["kl_prob_target"] = [F.kl_div(s_lp, t_lp.exp(), reduction="batchmean")]
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res["kl_mean"] = [F.kl_div(s_lp, t_lp, reduction="mean", log_target=True)]
    res["kl_mean_warning"] = [str(w.message) for w in caught]

    # teacher outputs from inference_mode cannot be saved for backward; a clone can
    with torch.inference_mode():
        t_inf = F.log_softmax(teacher(x) / T, dim=-1)
    res["inference"] = [t_inf.is_inference(), t_inf.requires_grad, torch.is_inference(t_inf)]
    res["inference_saved"] = list(error(
        lambda lib: (F.log_softmax(student(x) / T, dim=-1) * t_inf).sum().backward(),
        torch) or ("none",))
    res["inference_kl"] = list(error(
        lambda lib: F.kl_div(F.log_softmax(student(x) / T, dim=-1), t_inf,
                             reduction="batchmean", log_target=True).backward(),
        torch) or ("none",))
    s_lp = F.log_softmax(student(x) / T, dim=-1)
    loss = F.kl_div(s_lp, t_inf.clone(), reduction="batchmean", log_target=True)
    loss.backward()
    res["clone_workaround"] = [loss.item(), t_inf.clone().is_inference()]
    with torch.inference_mode():
        with torch.inference_mode(mode=False):
            inner = teacher(x)
        res["nested_modes"] = [inner.is_inference(), torch.is_inference_mode_enabled(),
                               torch.is_grad_enabled()]
    with torch.no_grad():
        res["no_grad_not_inference"] = [teacher(x).is_inference()]

    # DINO's EMA teacher: centering, sharpening, and a momentum update by _foreach ops
    student2, ema = net(6), net(6)
    fill_(torch, student2, rng, 0.4)
    ema.load_state_dict(student2.state_dict())
    for p in ema.parameters():
        p.requires_grad = False
    center = torch.zeros(1, 4)
    opt2 = torch.optim.AdamW(student2.parameters(), lr=0.01, weight_decay=0.04)
    res.update(dino=[], center=[])
    views = [normal(torch, rng, 6, 5), normal(torch, rng, 6, 5)]
    for step in range(3):
        s_out = torch.cat([student2(v) for v in views]) / 0.1
        with torch.no_grad():
            t_raw = torch.cat([ema(v) for v in views])
        t_out = F.softmax((t_raw - center) / 0.04, dim=-1).detach().chunk(2)
        s_chunks = s_out.chunk(2)
        total, n = 0, 0
        for iq, q in enumerate(t_out):
            for v in range(len(s_chunks)):
                if v == iq:
                    continue
                total += torch.sum(-q * F.log_softmax(s_chunks[v], dim=-1), dim=-1).mean()
                n += 1
        total /= n
        opt2.zero_grad()
        total.backward()
        nn.utils.clip_grad_norm_(student2.parameters(), 3.0)
        opt2.step()
        with torch.no_grad():
            batch_center = torch.sum(t_raw, dim=0, keepdim=True) / len(t_raw)
            center = center * 0.9 + batch_center * 0.1
            m = 0.996 - 0.05 * step
            names_q = [p for p in student2.parameters()]
            names_k = [p for p in ema.parameters()]
            torch._foreach_mul_(names_k, m)
            torch._foreach_add_(names_k, names_q, alpha=1 - m)
        res["dino"].append(total.item())
        res["center"].append(center)
    res["ema_params"] = torch.cat([p.flatten() for p in ema.parameters()])

    # AveragedModel: an EMA over parameters and buffers, and SWA with update_bn
    averaged = swa_utils.AveragedModel(student, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9),
                                       use_buffers=True)
    swa = swa_utils.AveragedModel(student)
    swa_sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy="cos")
    loader = [(normal(torch, rng, 4, 5), torch.tensor([0, 1, 2, 3])) for _ in range(3)]
    res.update(swa_lr=[], n_averaged=[])
    for epoch in range(3):
        student.train()
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(student(xb), yb).backward()
            opt.step()
            averaged.update_parameters(student)
        swa.update_parameters(student)
        swa_sched.step()
        res["swa_lr"].append(swa_sched.get_last_lr()[0])
        res["n_averaged"].append(int(swa.n_averaged))
    res["ema_model"] = torch.cat([p.flatten() for p in averaged.module.parameters()])
    res["ema_buffers"] = [b.float() for b in averaged.module.buffers()]
    res["swa_params"] = torch.cat([p.flatten() for p in swa.parameters()])
    res["swa_keys"] = list(swa.state_dict().keys())
    before = swa.module[1].running_mean.clone()
    swa_utils.update_bn(loader, swa)
    res["update_bn"] = [before, swa.module[1].running_mean, swa.module[1].running_var,
                        swa.module[1].momentum is None or swa.module[1].momentum]
    res["update_bn_tracked"] = [int(swa.module[1].num_batches_tracked)]
    swa.eval()
    with torch.inference_mode():
        res["swa_out"] = swa(x)
    return res


PROGRAMS = [tabnet_program, optimizer_zoo_program, distillation_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)


# --- grad mode inside inference mode (ember/autograd/grad_mode.py) ---------------------------

def test_enable_grad_inside_inference_mode_records_nothing():
    def run(lib):
        w = lib.ones(2, requires_grad=True)
        seen = []
        with lib.inference_mode():
            with lib.enable_grad():
                x = lib.ones(2, requires_grad=True)
                y, z = x * 2, w * 2
                seen += [lib.is_grad_enabled(), x.requires_grad, y.requires_grad,
                         y.grad_fn is None, z.requires_grad, z.is_inference()]
                m = lib.ones(3, 3, requires_grad=True)
                m.fill_diagonal_(2.0)           # no leaf check: autograd is off
                seen.append(m.grad_fn is None)
            with lib.set_grad_enabled(True):
                seen += [lib.is_grad_enabled(), (w * 3).requires_grad]
            with lib.inference_mode(False):
                seen += [lib.is_grad_enabled(), (w * 3).requires_grad]
            seen.append(lib.is_grad_enabled())

            @lib.enable_grad()
            def double(a):
                return a * 2
            seen.append(double(w).requires_grad)
        with lib.no_grad():
            with lib.inference_mode(False):
                seen.append(lib.is_grad_enabled())
        seen.append(lib.is_grad_enabled())
        return seen
    assert run(ember) == run(torch)


def test_custom_function_and_backward_in_inference_mode():
    """What decides on grad mode rather than on "ops record": a custom Function records under
    enable_grad inside inference mode (its forward sees grad mode off), and backward with
    create_graph inside inference mode builds no graph."""
    def run(lib):
        class Triple(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                seen.append(lib.is_grad_enabled())
                return a * 3

            @staticmethod
            def backward(ctx, g):
                seen.append(lib.is_grad_enabled())
                return g * 3

        seen, x = [], lib.ones(3, requires_grad=True)
        with lib.inference_mode():
            with lib.enable_grad():
                y = Triple.apply(x)
                seen += [y.requires_grad, type(y.grad_fn).__name__, y.is_inference()]
            seen.append(Triple.apply(x).requires_grad)
        y.backward(lib.ones(3))
        seen.append(x.grad.tolist())
        loss = (Triple.apply(x) * x).sum()
        with lib.inference_mode():
            g, = lib.autograd.grad(loss, x, create_graph=True)
            seen += [g.tolist(), g.requires_grad, g.grad_fn is None, g.is_inference(),
                     lib.is_grad_enabled()]
        lin = lib.nn.Linear(3, 2)
        with lib.inference_mode(), lib.enable_grad():
            out = lib.utils.checkpoint.checkpoint(lin, x, use_reentrant=True)
            seen += [out.requires_grad, type(out.grad_fn).__name__]
        return seen
    assert run(ember) == run(torch)


def test_grad_mode_in_one_thread_while_another_is_in_inference_mode():
    """Grad modes stay per thread while some other thread holds inference mode open."""
    import threading
    inside, release, seen = threading.Event(), threading.Event(), []

    def hold_inference_mode():
        with ember.inference_mode():
            with ember.enable_grad():
                inside.set()
                release.wait(10)
                seen.append((ember.is_grad_enabled(), ember.is_inference_mode_enabled()))
    worker = threading.Thread(target=hold_inference_mode)
    worker.start()
    assert inside.wait(10)
    w = ember.ones(2, requires_grad=True)
    with ember.no_grad():
        seen.append((ember.is_grad_enabled(), (w * 2).requires_grad))
        with ember.enable_grad():
            seen.append((ember.is_grad_enabled(), (w * 2).requires_grad))
    with ember.set_grad_enabled(False):
        seen.append(ember.is_grad_enabled())
    seen.append((ember.is_grad_enabled(), (w * 2).requires_grad))
    release.set()
    worker.join()
    assert seen == [(False, False), (True, True), False, (True, True), (True, True)]


def test_transforms_and_conv_gradients_inside_inference_mode():
    """Code that differentiates on its own (torch.func's transforms, torch.nn.grad) still
    computes inside inference mode, where ops record nothing: the transforms run their
    function with inference mode off, nn.grad gives inference tensors."""
    def run(lib):
        x = lib.tensor([1.0, 2.0, 3.0])
        seen, res = [], {}

        def cube_sum(t):
            seen.append([lib.is_inference_mode_enabled(), lib.is_grad_enabled()])
            return (t ** 3).sum()
        w = lib.linspace(-1, 1, 9).reshape(1, 1, 3, 3)
        with lib.inference_mode():
            xi = lib.tensor([1.0, -2.0])            # an inference tensor
            res["grad"] = lib.func.grad(cube_sum)(x)
            res["grad_inference_input"] = lib.func.grad(cube_sum)(xi)
            res["jacrev"] = lib.func.jacrev(lib.sin)(x)
            res["jacfwd"] = lib.func.jacfwd(lib.sin)(x)
            res["hessian"] = lib.func.hessian(cube_sum)(x)
            out, pull = lib.func.vjp(lib.exp, x)
            res["vjp"] = pull(lib.ones(3))[0]
            res["jvp"] = lib.func.jvp(lib.exp, (x,), (lib.ones(3),))[1]
            res["conv_input"] = lib.nn.grad.conv2d_input((1, 1, 4, 4), w,
                                                         lib.ones(1, 1, 2, 2))
            res["conv_weight"] = lib.nn.grad.conv2d_weight(lib.ones(1, 1, 4, 4), (1, 1, 3, 3),
                                                           lib.ones(1, 1, 2, 2))
        flags = {k: [v.is_inference(), v.requires_grad] for k, v in res.items()}
        with lib.no_grad():     # nn.grad's results follow grad mode
            g = lib.nn.grad.conv2d_input((1, 1, 4, 4), w.requires_grad_(),
                                         lib.ones(1, 1, 2, 2, requires_grad=True))
        return res, flags, seen, g.requires_grad
    (ours, *rest), (theirs, *rest_t) = run(ember), run(torch)
    assert rest == rest_t
    for key in theirs:
        np.testing.assert_allclose(ours[key].numpy(), theirs[key].numpy(), rtol=1e-6,
                                   err_msg=key)


def test_numpy_of_a_tensor_requiring_grad_follows_grad_mode_in_inference_mode():
    from tests.parity._compare import assert_same_error

    def numpy_under_enable_grad(lib, x):
        with lib.inference_mode(), lib.enable_grad():
            return x.numpy()
    assert_same_error(numpy_under_enable_grad, lambda lib: lib.ones(2, requires_grad=True))
    with ember.inference_mode():
        assert ember.ones(2, requires_grad=True).numpy().tolist() == [1.0, 1.0]
