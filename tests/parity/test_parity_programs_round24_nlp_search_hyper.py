"""Architecture and hyper-parameter search written by hand in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy data: DARTS (softmax(alpha)-weighted
mixed operations, architecture parameters in their own optimiser, first-order and unrolled
second-order steps through functional_call with a finite-difference Hessian-vector product
perturbed through .data with the deprecated add_(alpha, other) overload, discretisation by
argmax/topk) and hypernetworks (a hypernetwork emitting a target MLP's weights, a learned log
learning rate differentiated through unrolled SGD with create_graph=True, a learned LSTM
optimiser, torch.func.grad / hessian under vmap over tasks). The NLP programs of this round
are in test_parity_programs_round24_nlp_search.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def darts_program(torch):
    """DARTS on a tiny cell: softmax(alpha)-weighted mixed operations, architecture parameters
    in their own Adam, first-order and second-order (unrolled virtual step through
    functional_call, finite-difference Hessian-vector product) alternation, and discretisation
    by argmax/topk."""
    nn, F = torch.nn, torch.nn.functional
    functional_call = torch.func.functional_call
    rng = np.random.default_rng(244)
    res = {}
    C, L, n_nodes = 4, 8, 3

    class Zero(nn.Module):
        def forward(self, x):
            return x.mul(0.0)

    class SepConv(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.op = nn.Sequential(
                nn.ReLU(inplace=False),
                nn.Conv1d(C, C, k, padding=k // 2, groups=C, bias=False),
                nn.Conv1d(C, C, 1, bias=False),
                nn.BatchNorm1d(C, affine=False))

        def forward(self, x):
            return self.op(x)

    def make_ops():
        return nn.ModuleList([Zero(), nn.Identity(), nn.MaxPool1d(3, 1, 1),
                              nn.AvgPool1d(3, 1, 1, count_include_pad=False),
                              SepConv(3), SepConv(5)])

    class MixedOp(nn.Module):
        def __init__(self):
            super().__init__()
            self._ops = make_ops()

        def forward(self, x, weights):
            return sum(w * op(x) for w, op in zip(weights, self._ops))

    class Network(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv1d(2, C, 3, padding=1)
            self.edges = nn.ModuleList()
            for i in range(n_nodes):
                for _ in range(i + 1):
                    self.edges.append(MixedOp())
            self.classifier = nn.Linear(C, 3)
            n_edges = len(self.edges)
            self.alphas = nn.Parameter(1e-3 * torch.ones(n_edges, 6))   # overwritten below
            self.register_buffer("steps_seen", torch.zeros((), dtype=torch.long))

        def arch_parameters(self):
            return [self.alphas]

        def weights(self):
            return [p for n, p in self.named_parameters() if n != "alphas"]

        def forward(self, x):
            self.steps_seen += 1
            weights = F.softmax(self.alphas, dim=-1)
            states = [self.stem(x)]
            offset = 0
            for i in range(n_nodes):
                s = sum(self.edges[offset + j](h, weights[offset + j])
                        for j, h in enumerate(states))
                offset += len(states)
                states.append(s)
            out = torch.cat(states[1:], dim=1).reshape(x.shape[0], n_nodes, C, -1).mean(1)
            return self.classifier(F.adaptive_avg_pool1d(out, 1).flatten(1))

    net = Network()
    fill_(torch, net, rng, 0.3)
    x_train, x_val = normal(torch, rng, 6, 2, L), normal(torch, rng, 6, 2, L)
    y_train = torch.from_numpy(rng.integers(0, 3, 6))
    y_val = torch.from_numpy(rng.integers(0, 3, 6))
    w_opt = torch.optim.SGD(net.weights(), lr=0.05, momentum=0.9, weight_decay=3e-4)
    a_opt = torch.optim.Adam(net.arch_parameters(), lr=3e-3, betas=(0.5, 0.999),
                             weight_decay=1e-3)
    res["n_weights"] = [len(net.weights()), sum(p.numel() for p in net.weights())]
    res["alpha_grad_before"] = [net.alphas.grad is None]

    def loss_fn(params, buffers, x, y):
        return F.cross_entropy(functional_call(net, (params, buffers), (x,)), y)

    eta = 0.05
    first, second = [], []
    for step in range(4):
        # architecture step
        a_opt.zero_grad()
        if step % 2 == 0:                                    # first order
            loss_a = F.cross_entropy(net(x_val), y_val)
            loss_a.backward()
            first.append(loss_a.item())
        else:                                                # second order, unrolled
            names = [n for n, _ in net.named_parameters() if n != "alphas"]
            params = dict(net.named_parameters())
            buffers = dict(net.named_buffers())
            train_loss = loss_fn(params, buffers, x_train, y_train)
            grads = torch.autograd.grad(train_loss, [params[n] for n in names])
            virtual = {n: (params[n] - eta * g).detach().requires_grad_()
                       for n, g in zip(names, grads)}
            virtual["alphas"] = net.alphas
            val_loss = loss_fn(virtual, buffers, x_val, y_val)
            dalpha, *dw = torch.autograd.grad(val_loss, [net.alphas] + [virtual[n] for n in names])
            # finite-difference Hessian-vector product
            # (the original DARTS code perturbs through .data with the deprecated
            # add_(Number alpha, Tensor other) overload)
            R = (0.01 / torch.cat([g.flatten() for g in dw]).norm()).item()
            for n, v in zip(names, dw):
                params[n].data.add_(R, v)
            g_pos = torch.autograd.grad(loss_fn(params, buffers, x_train, y_train), net.alphas)[0]
            with torch.no_grad():
                for n, v in zip(names, dw):
                    params[n].sub_(v, alpha=2 * R)
            g_neg = torch.autograd.grad(loss_fn(params, buffers, x_train, y_train), net.alphas)[0]
            with torch.no_grad():
                for n, v in zip(names, dw):
                    params[n].add_(v, alpha=R)
            hvp = (g_pos - g_neg) / (2 * R)
            net.alphas.grad = dalpha - eta * hvp
            second.append([val_loss.item(), hvp.abs().sum().item()])
        a_opt.step()
        # weight step
        w_opt.zero_grad()
        loss_w = F.cross_entropy(net(x_train), y_train)
        loss_w.backward()
        nn.utils.clip_grad_norm_(net.weights(), 5.0)
        w_opt.step()
        res[f"w_loss_{step}"] = loss_w.item()
    res["first_order"] = first
    res["second_order"] = second
    res["alphas"] = net.alphas
    res["bn_running"] = net.edges[0]._ops[4].op[3].running_mean
    res["steps_seen"] = [int(net.steps_seen)]
    res["a_state"] = a_opt.state[net.alphas]["exp_avg_sq"]

    # discretisation: strongest non-zero op per edge, top-2 incoming edges per node
    probs = F.softmax(net.alphas.detach(), dim=-1)
    best_op = probs[:, 1:].argmax(dim=-1) + 1
    strength = probs[:, 1:].max(dim=-1).values
    genotype, offset = [], 0
    for i in range(n_nodes):
        k = min(2, i + 1)
        top = torch.topk(strength[offset:offset + i + 1], k)
        genotype.append([(int(j), int(best_op[offset + j])) for j in top.indices])
        offset += i + 1
    res["genotype"] = [str(genotype)]
    res["probs"] = probs
    res["entropy"] = torch.distributions.Categorical(logits=net.alphas.detach()).entropy()
    return res


def hypernetwork_program(torch):
    """A hypernetwork emitting a target MLP's weights (used through functional_call), a learned
    log learning rate trained by differentiating through unrolled SGD steps (create_graph=True),
    a learned per-parameter optimiser (an LSTMCell over gradients), and per-task gradients with
    torch.func.grad under vmap."""
    nn, F = torch.nn, torch.nn.functional
    func = torch.func
    rng = np.random.default_rng(245)
    res = {}

    # target network whose parameters come from the hypernetwork
    target = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    shapes = {n: p.shape for n, p in target.named_parameters()}
    sizes = {n: math.prod(s) for n, s in shapes.items()}
    total = sum(sizes.values())
    res["target_sizes"] = [int(total)] + [int(v) for v in sizes.values()]

    class HyperNet(nn.Module):
        def __init__(self, n_tasks, z_dim=4):
            super().__init__()
            self.z = nn.Embedding(n_tasks, z_dim)
            self.body = nn.Sequential(nn.Linear(z_dim, 16), nn.ReLU(), nn.Linear(16, total))

        def forward(self, task):
            flat = self.body(self.z(task))
            chunks = torch.split(flat, list(sizes.values()), dim=-1)
            return {n: c.view(*c.shape[:-1], *shapes[n]) for n, c in zip(shapes, chunks)}

    n_tasks = 3
    hyper = HyperNet(n_tasks)
    fill_(torch, hyper, rng, 0.3)
    xs = normal(torch, rng, n_tasks, 10, 3)
    slopes = torch.tensor([[1.0, -2.0, 0.5], [0.3, 0.3, 0.3], [-1.0, 0.0, 2.0]])
    ys = torch.sin(torch.einsum("tnd,td->tn", xs, slopes)).unsqueeze(-1)
    opt = torch.optim.AdamW(hyper.parameters(), lr=0.01, weight_decay=0.05)
    hyper_losses = []
    for step in range(4):
        total_loss = 0.0
        for t in range(n_tasks):
            weights = hyper(torch.tensor(t))
            pred = func.functional_call(target, weights, (xs[t],))
            total_loss = total_loss + F.mse_loss(pred, ys[t])
        opt.zero_grad()
        total_loss.backward()
        opt.step()
        hyper_losses.append(total_loss.item())
    res["hyper_loss"] = hyper_losses
    res["hyper_grad_z"] = hyper.z.weight.grad
    res["hyper_z"] = hyper.z.weight

    # all tasks at once: batched weights under vmap over functional_call
    batched = hyper(torch.arange(n_tasks))
    res["batched_shapes"] = [str(list(v.shape)) for v in batched.values()]
    preds = func.vmap(lambda w, x: func.functional_call(target, w, (x,)))(batched, xs)
    res["vmap_preds"] = preds
    res["vmap_vs_loop"] = (preds[1] - func.functional_call(
        target, {k: v[1] for k, v in batched.items()}, (xs[1],))).abs().max()

    # torch.func inside ordinary autograd: per-example gradients of a last layer whose loss
    # closes over the hypernetwork's other weights and a learnable step size, one adapted
    # step, and the validation loss back-propagated to the hypernetwork and the step size
    hyper.zero_grad()
    log_step = torch.tensor(-1.0, requires_grad=True)
    weights = hyper(torch.tensor(1))

    def head_loss(w_last, x, y):
        h = torch.tanh(x @ weights["0.weight"].T + weights["0.bias"])
        return (h @ w_last.T + weights["2.bias"] - y).pow(2).mean()

    w_last = torch.zeros(1, 5)
    per_example = func.vmap(func.grad(head_loss), in_dims=(None, 0, 0))(
        w_last, xs[1], ys[1])
    adapted = w_last - log_step.exp() * per_example.mean(0)
    outer = head_loss(adapted, xs[1] * 0.5, ys[1])
    outer.backward()
    res["closure_per_example"] = per_example
    res["closure_flags"] = [per_example.requires_grad, adapted.requires_grad]
    res["closure_grads"] = [hyper.z.weight.grad, hyper.body[0].weight.grad, log_step.grad]

    # hyper-gradient of the log learning rate through unrolled SGD (create_graph=True)
    model = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 1))
    fill_(torch, model, rng, 0.4)
    log_lr = torch.tensor(math.log(0.05), requires_grad=True)
    meta_opt = torch.optim.Adam([log_lr], lr=0.05)
    x_tr, y_tr = xs[0], ys[0]
    x_va, y_va = xs[0] * 0.9 + 0.1, ys[0]
    lr_history, val_history = [], []
    for outer in range(3):
        params = {n: p.clone() for n, p in model.named_parameters()}
        for _ in range(3):
            loss = F.mse_loss(func.functional_call(model, params, (x_tr,)), y_tr)
            grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
            params = {n: p - log_lr.exp() * g for (n, p), g in zip(params.items(), grads)}
        val = F.mse_loss(func.functional_call(model, params, (x_va,)), y_va)
        meta_opt.zero_grad()
        val.backward()
        if outer == 0:
            res["hypergrad"] = log_lr.grad.clone()
            res["model_grad_after_meta"] = model[0].weight.grad
            res["hypergrad_node"] = [type(log_lr.grad).__name__, log_lr.grad.requires_grad]
        meta_opt.step()
        lr_history.append(log_lr.exp().item())
        val_history.append(val.item())
    res["learned_lr"] = lr_history
    res["val_after_unroll"] = val_history

    # the same hyper-gradient by torch.func: grad of the unrolled loss w.r.t. log_lr
    base = {n: p.detach() for n, p in model.named_parameters()}

    def unrolled(log_lr, params):
        for _ in range(2):
            g = func.grad(lambda p: F.mse_loss(func.functional_call(model, p, (x_tr,)),
                                               y_tr))(params)
            params = {n: params[n] - torch.exp(log_lr) * g[n] for n in params}
        return F.mse_loss(func.functional_call(model, params, (x_va,)), y_va)

    value, hg = func.grad_and_value(unrolled)(torch.tensor(-3.0), base)
    res["func_hypergrad"] = [value, hg]
    check = torch.tensor(-3.0, requires_grad=True)
    res["func_vs_autograd"] = torch.autograd.grad(unrolled(check, base), check)[0] - hg

    # a learned optimiser: coordinatewise LSTM over (grad, log|grad|) features
    class LearnedOpt(nn.Module):
        def __init__(self, hid=6):
            super().__init__()
            self.cell = nn.LSTMCell(2, hid)
            self.out = nn.Linear(hid, 1)
            self.hid = hid

        def forward(self, grad, state):
            feats = torch.stack([grad, torch.log(grad.abs() + 1e-8) / 10], -1)
            h, c = self.cell(feats, state)
            return 0.1 * self.out(h).squeeze(-1), (h, c)

    lopt = LearnedOpt()
    fill_(torch, lopt, rng, 0.3)
    outer_opt = torch.optim.Adam(lopt.parameters(), lr=0.01)
    w0 = normal(torch, rng, 3, 1) * 0.1
    meta_losses = []
    for episode in range(2):
        w = w0.clone().requires_grad_()
        state = (torch.zeros(3, lopt.hid), torch.zeros(3, lopt.hid))
        total_meta = 0.0
        for _ in range(3):
            loss = F.mse_loss(xs[2] @ w, ys[2])
            g, = torch.autograd.grad(loss, w, create_graph=True)
            update, state = lopt(g.squeeze(-1).detach(), state)
            w = w + update.unsqueeze(-1)
            total_meta = total_meta + loss
        outer_opt.zero_grad()
        total_meta.backward()
        outer_opt.step()
        meta_losses.append(total_meta.item())
    res["learned_opt_loss"] = meta_losses
    res["learned_opt_cell"] = lopt.cell.weight_ih

    # per-task gradients, Hessian-vector products and Jacobians with torch.func under vmap
    lin = {"w": normal(torch, rng, 3, 1), "b": torch.zeros(1)}

    def task_loss(p, x, y):
        return F.mse_loss(x @ p["w"] + p["b"], y)

    per_task = func.vmap(func.grad(task_loss), in_dims=(None, 0, 0))(lin, xs, ys)
    res["per_task_grads"] = [per_task["w"], per_task["b"]]
    res["per_task_loop"] = torch.stack([func.grad(task_loss)(lin, xs[t], ys[t])["w"]
                                        for t in range(n_tasks)])
    gl, lv = func.vmap(func.grad_and_value(task_loss, argnums=0, has_aux=False),
                       in_dims=(None, 0, 0))(lin, xs, ys)
    res["per_task_values"] = lv

    def inner_adapt(p, x, y):
        g = func.grad(task_loss)(p, x, y)
        adapted = {k: p[k] - 0.1 * g[k] for k in p}
        return task_loss(adapted, x, y), adapted["w"]

    post, adapted_w = func.vmap(inner_adapt, in_dims=(None, 0, 0))(lin, xs, ys)
    res["adapted"] = [post, adapted_w]
    hess = func.vmap(func.hessian(lambda w, x, y: task_loss({"w": w, "b": lin["b"]}, x, y)),
                     in_dims=(None, 0, 0))(lin["w"], xs, ys)
    res["hessian_shape"] = list(hess.shape)
    res["hessian"] = hess
    jac = func.jacrev(lambda w: xs[0] @ w)(lin["w"])
    res["jacrev"] = jac
    return res


PROGRAMS = [darts_program, hypernetwork_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
