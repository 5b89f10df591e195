"""Model-agnostic meta-learning written as its reference repositories write it in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
MAML the dragen1860 way (a Learner whose forward takes a list of fast weights, F.conv2d /
F.batch_norm with running statistics / F.linear, autograd.grad with create_graph in the inner
loop, fine-tuning a deepcopy), the learn2learn way (clone_module writing non-leaf tensors into
_parameters, update_module, first_order and allow_unused), the torch.func way (functional_call
with per-step fast weights, grad inside vmap over tasks, second- and first-order), ANIL (only
the head adapted over features computed once) and Meta-SGD (learned per-parameter learning
rates). Sibling _fixes pins what they found."""

import copy

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _tasks(torch, rng, n_tasks, n_way, k_shot, k_query, img=6):
    """N-way K-shot image tasks: support and query images with integer labels."""
    x_spt = normal(torch, rng, n_tasks, n_way * k_shot, 1, img, img)
    y_spt = torch.from_numpy(np.tile(np.arange(n_way), (n_tasks, k_shot)).astype(np.int64))
    x_qry = normal(torch, rng, n_tasks, n_way * k_query, 1, img, img)
    y_qry = torch.from_numpy(np.tile(np.arange(n_way), (n_tasks, k_query)).astype(np.int64))
    return x_spt, y_spt, x_qry, y_qry


def maml_learner_program(torch):
    """dragen1860/MAML-Pytorch: Learner with nn.ParameterList vars and vars_bn running
    statistics, forward(x, vars=None, bn_training=True), the Meta module's inner loop by
    autograd.grad and a list(map(lambda ...)) update, query losses and corrects per step,
    meta Adam on the summed query loss / task_num, finetunning on a deepcopy of the net."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2821)
    n_way, k_spt, k_qry, task_num, update_lr, update_step = 3, 2, 2, 2, 0.4, 2
    config = [("conv2d", [4, 1, 3, 3, 2, 0]), ("relu", [True]), ("bn", [4]),
              ("flatten", []), ("linear", [n_way, 16])]

    class Learner(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.vars = nn.ParameterList()
            self.vars_bn = nn.ParameterList()
            for name, param in self.config:
                if name == "conv2d":
                    w = nn.Parameter(torch.ones(*param[:4]))
                    torch.nn.init.kaiming_normal_(w)
                    self.vars.append(w)
                    self.vars.append(nn.Parameter(torch.zeros(param[0])))
                elif name == "linear":
                    w = nn.Parameter(torch.ones(*param))
                    torch.nn.init.kaiming_normal_(w)
                    self.vars.append(w)
                    self.vars.append(nn.Parameter(torch.zeros(param[0])))
                elif name == "bn":
                    w = nn.Parameter(torch.ones(param[0]))
                    self.vars.append(w)
                    self.vars.append(nn.Parameter(torch.zeros(param[0])))
                    running_mean = nn.Parameter(torch.zeros(param[0]), requires_grad=False)
                    running_var = nn.Parameter(torch.ones(param[0]), requires_grad=False)
                    self.vars_bn.extend([running_mean, running_var])

        def forward(self, x, vars=None, bn_training=True):
            if vars is None:
                vars = self.vars
            idx, bn_idx = 0, 0
            for name, param in self.config:
                if name == "conv2d":
                    w, b = vars[idx], vars[idx + 1]
                    x = F.conv2d(x, w, b, stride=param[4], padding=param[5])
                    idx += 2
                elif name == "linear":
                    w, b = vars[idx], vars[idx + 1]
                    x = F.linear(x, w, b)
                    idx += 2
                elif name == "bn":
                    w, b = vars[idx], vars[idx + 1]
                    running_mean, running_var = self.vars_bn[bn_idx], self.vars_bn[bn_idx + 1]
                    x = F.batch_norm(x, running_mean, running_var, weight=w, bias=b,
                                     training=bn_training)
                    idx += 2
                    bn_idx += 2
                elif name == "flatten":
                    x = x.view(x.size(0), -1)
                elif name == "relu":
                    x = F.relu(x, inplace=param[0])
            assert idx == len(vars)
            assert bn_idx == len(self.vars_bn)
            return x

        def zero_grad(self, vars=None):
            with torch.no_grad():
                for p in (self.vars if vars is None else vars):
                    if p.grad is not None:
                        p.grad.zero_()

        def parameters(self):
            return self.vars

    net = Learner(config)
    fill_(torch, net.vars, rng)
    meta_optim = torch.optim.Adam(net.parameters(), lr=1e-3)
    x_spt, y_spt, x_qry, y_qry = _tasks(torch, rng, task_num, n_way, k_spt, k_qry)
    res = {"n_vars": [len(net.vars), len(net.vars_bn)],
           "names": [n for n, _ in net.named_parameters()]}
    querysz = x_qry.size(1)
    losses_q = [0 for _ in range(update_step + 1)]
    corrects = [0 for _ in range(update_step + 1)]
    for i in range(task_num):
        logits = net(x_spt[i], vars=None, bn_training=True)
        loss = F.cross_entropy(logits, y_spt[i])
        grad = torch.autograd.grad(loss, net.parameters())
        fast_weights = list(map(lambda p: p[1] - update_lr * p[0], zip(grad, net.parameters())))
        with torch.no_grad():
            logits_q = net(x_qry[i], net.parameters(), bn_training=True)
            losses_q[0] += F.cross_entropy(logits_q, y_qry[i])
            pred_q = F.softmax(logits_q, dim=1).argmax(dim=1)
            corrects[0] += torch.eq(pred_q, y_qry[i]).sum().item()
        for k in range(1, update_step):
            logits = net(x_spt[i], fast_weights, bn_training=True)
            loss = F.cross_entropy(logits, y_spt[i])
            grad = torch.autograd.grad(loss, fast_weights, create_graph=True)
            fast_weights = list(map(lambda p: p[1] - update_lr * p[0], zip(grad, fast_weights)))
            logits_q = net(x_qry[i], fast_weights, bn_training=True)
            losses_q[k + 1] += F.cross_entropy(logits_q, y_qry[i])
            with torch.no_grad():
                pred_q = F.softmax(logits_q, dim=1).argmax(dim=1)
                corrects[k + 1] += torch.eq(pred_q, y_qry[i]).sum().item()
    loss_q = losses_q[-1] / task_num
    meta_optim.zero_grad()
    loss_q.backward()
    res["meta_grads"] = [p.grad for p in net.parameters()]
    meta_optim.step()
    res["loss_q"] = loss_q
    res["losses_q0"] = losses_q[0]
    res["accs"] = np.array(corrects) / (querysz * task_num)
    res["running"] = [p.clone() for p in net.vars_bn]
    res["params"] = list(net.parameters())
    # finetunning: a deepcopy adapted on one task, the original untouched
    ft = copy.deepcopy(net)
    logits = ft(x_spt[0])
    loss = F.cross_entropy(logits, y_spt[0])
    grad = torch.autograd.grad(loss, ft.parameters())
    fast_weights = list(map(lambda p: p[1] - update_lr * p[0], zip(grad, ft.parameters())))
    with torch.no_grad():
        logits_q = ft(x_qry[0], fast_weights, bn_training=True)
    res["ft_logits"] = logits_q
    res["ft_is_copy"] = [ft.vars[0] is not net.vars[0],
                         bool((ft.vars[0] == net.vars[0]).all()),
                         ft.vars[0].grad is None]
    res["fast_flags"] = [fast_weights[0].is_leaf, fast_weights[0].requires_grad]
    return res


def _l2l(torch):
    """learn2learn's clone_module / update_module and a MAML wrapper over them, as the library
    writes them (parameters replaced by non-leaf tensors in each module's _parameters)."""
    nn = torch.nn

    def clone_module(module, memo=None):
        if memo is None:
            memo = {}
        if not isinstance(module, nn.Module):
            return module
        clone = module.__new__(type(module))
        clone.__dict__ = module.__dict__.copy()
        clone._parameters = clone._parameters.copy()
        clone._buffers = clone._buffers.copy()
        clone._modules = clone._modules.copy()
        if hasattr(clone, "_parameters"):
            for param_key in module._parameters:
                if module._parameters[param_key] is not None:
                    param = module._parameters[param_key]
                    param_ptr = param.data_ptr
                    if param_ptr in memo:
                        clone._parameters[param_key] = memo[param_ptr]
                    else:
                        cloned = param.clone()
                        clone._parameters[param_key] = cloned
                        memo[param_ptr] = cloned
        if hasattr(clone, "_buffers"):
            for buffer_key in module._buffers:
                if clone._buffers[buffer_key] is not None and \
                        clone._buffers[buffer_key].requires_grad:
                    buff = module._buffers[buffer_key]
                    clone._buffers[buffer_key] = buff.clone()
        if hasattr(clone, "_modules"):
            for module_key in clone._modules:
                clone._modules[module_key] = clone_module(module._modules[module_key],
                                                          memo=memo)
        if hasattr(clone, "flatten_parameters"):
            clone = clone._apply(lambda x: x)
        return clone

    def update_module(module, updates=None, memo=None):
        if memo is None:
            memo = {}
        if updates is not None:
            params = list(module.parameters())
            for p, g in zip(params, updates):
                p.update = g
        for param_key in module._parameters:
            p = module._parameters[param_key]
            if p in memo:
                module._parameters[param_key] = memo[p]
            elif p is not None and hasattr(p, "update") and p.update is not None:
                updated = p + p.update
                p.update = None
                memo[p] = updated
                module._parameters[param_key] = updated
        for buffer_key in module._buffers:
            buff = module._buffers[buffer_key]
            if buff in memo:
                module._buffers[buffer_key] = memo[buff]
        for module_key in module._modules:
            module._modules[module_key] = update_module(module._modules[module_key], updates=None,
                                                        memo=memo)
        if hasattr(module, "flatten_parameters"):
            module._apply(lambda x: x)
        return module

    class MAML(nn.Module):
        def __init__(self, model, lr, first_order=False, allow_unused=None, allow_nograd=False):
            super().__init__()
            self.module, self.lr, self.first_order = model, lr, first_order
            self.allow_nograd = allow_nograd
            self.allow_unused = allow_nograd if allow_unused is None else allow_unused

        def forward(self, *args, **kwargs):
            return self.module(*args, **kwargs)

        def adapt(self, loss, first_order=None):
            first_order = self.first_order if first_order is None else first_order
            second_order = not first_order
            if self.allow_nograd:
                diff_params = [p for p in self.module.parameters() if p.requires_grad]
                grad_params = torch.autograd.grad(loss, diff_params, retain_graph=second_order,
                                                  create_graph=second_order,
                                                  allow_unused=self.allow_unused)
                gradients = []
                grad_counter = 0
                for param in self.module.parameters():
                    if param.requires_grad:
                        gradient = grad_params[grad_counter]
                        grad_counter += 1
                    else:
                        gradient = None
                    gradients.append(gradient)
            else:
                gradients = torch.autograd.grad(loss, self.module.parameters(),
                                                retain_graph=second_order,
                                                create_graph=second_order,
                                                allow_unused=self.allow_unused)
            updates = [-self.lr * g if g is not None else None for g in gradients]
            self.module = update_module(self.module, updates=updates)

        def clone(self, first_order=None):
            first_order = self.first_order if first_order is None else first_order
            return MAML(clone_module(self.module), lr=self.lr, first_order=first_order,
                        allow_unused=self.allow_unused, allow_nograd=self.allow_nograd)

    return MAML


def l2l_maml_program(torch):
    """learn2learn's sine-wave example: a small MLP wrapped in l2l.algorithms.MAML, per task
    learner = maml.clone(), a few learner.adapt(loss) steps, the evaluation loss summed over
    tasks, the meta step by Adam; then first_order=True and a frozen layer with allow_nograd."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2822)
    MAML = _l2l(torch)
    n_tasks, shots, adapt_steps = 3, 5, 2

    def sine_task():
        amp, phase = rng.uniform(0.1, 5.0), rng.uniform(0, np.pi)
        x = rng.uniform(-5, 5, (2 * shots, 1)).astype(np.float32)
        y = (amp * np.sin(x + phase)).astype(np.float32)
        return torch.from_numpy(x), torch.from_numpy(y)

    tasks = [sine_task() for _ in range(n_tasks)]
    res = {}
    for name, first_order in (("second", False), ("first", True)):
        model = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                              nn.Linear(16, 1))
        fill_(torch, model, np.random.default_rng(7))
        maml = MAML(model, lr=0.05, first_order=first_order)
        opt = torch.optim.Adam(maml.parameters(), lr=3e-3)
        metas = []
        for _ in range(2):
            opt.zero_grad()
            meta_loss = 0.0
            for x, y in tasks:
                learner = maml.clone()
                for _ in range(adapt_steps):
                    learner.adapt(F.mse_loss(learner(x[:shots]), y[:shots]))
                meta_loss += F.mse_loss(learner(x[shots:]), y[shots:])
            meta_loss = meta_loss / n_tasks
            meta_loss.backward()
            opt.step()
            metas.append(meta_loss.item())
        res[name + "_meta"] = metas
        res[name + "_grads"] = [p.grad for p in maml.parameters()]
        res[name + "_params"] = list(maml.parameters())
        res[name + "_learner"] = [p.is_leaf for p in learner.parameters()] + \
            [p.grad_fn is not None for p in learner.parameters()]
    # allow_nograd: the first layer frozen, its clone never updated
    model = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
    fill_(torch, model, np.random.default_rng(8))
    model[0].weight.requires_grad_(False)
    maml = MAML(model, lr=0.1, allow_nograd=True)
    learner = maml.clone()
    x, y = tasks[0]
    learner.adapt(F.mse_loss(learner(x[:shots]), y[:shots]))
    loss = F.mse_loss(learner(x[shots:]), y[shots:])
    loss.backward()
    res["nograd_loss"] = loss
    res["nograd_grads"] = [p.grad is None for p in model.parameters()]
    res["nograd_values"] = [p.grad for p in model.parameters() if p.grad is not None]
    res["nograd_same"] = [learner.module[0].weight is model[0].weight,
                          learner.module[2].weight is model[2].weight]
    return res


def func_maml_program(torch):
    """PyTorch's maml-omniglot-transforms example: params and buffers of a conv net (in-place
    ReLUs after a normalisation and after a conv), fnet by functional_call, loss_for_task taking
    grad(compute_loss) for a few inner steps over dict comprehensions, vmap over tasks of the
    partial, qry_losses.sum().backward() into the module's parameters; also a loop version
    with autograd.grad(create_graph=True) and a first-order one (grads detached)."""
    nn, F = torch.nn, torch.nn.functional
    from functools import partial
    grad, vmap, functional_call = torch.func.grad, torch.func.vmap, torch.func.functional_call
    rng = np.random.default_rng(2823)
    n_way, k_spt, k_qry, task_num, n_inner_iter = 3, 2, 2, 2, 2
    # the example's BatchNorm2d(track_running_stats=False) is a GroupNorm here: PyTorch 2.13's
    # second-order vmap(grad) through a batch (or layer) norm's weight is wrong (it differs from
    # its own loop and from finite differences; ember's matches them: see the _fixes file)
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.GroupNorm(2, 4, affine=True),
                        nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
                        nn.Conv2d(4, 4, 1), nn.ReLU(inplace=True), nn.Flatten(),
                        nn.Linear(16, n_way))
    fill_(torch, net, rng)
    meta_opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x_spt, y_spt, x_qry, y_qry = _tasks(torch, rng, task_num, n_way, k_spt, k_qry)

    def loss_for_task(net, n_inner_iter, first_order, x_spt, y_spt, x_qry, y_qry):
        params, buffers, fnet = net
        querysz = x_qry.size(0)

        def compute_loss(new_params, buffers, x, y):
            logits = fnet(new_params, buffers, x)
            return F.cross_entropy(logits, y)

        new_params = params
        for _ in range(n_inner_iter):
            grads = grad(compute_loss)(new_params, buffers, x_spt, y_spt)
            if first_order:
                grads = {k: g.detach() for k, g in grads.items()}
            new_params = {k: new_params[k] - g * 1e-1 for k, g, in grads.items()}
        qry_logits = fnet(new_params, buffers, x_qry)
        qry_loss = F.cross_entropy(qry_logits, y_qry)
        qry_acc = (qry_logits.argmax(dim=1) == y_qry).float().sum() / querysz
        return qry_loss, qry_acc

    res = {"buffers": [k for k, _ in net.named_buffers()]}
    for name, first_order in (("second", False), ("first", True)):
        params = dict(net.named_parameters())
        buffers = dict(net.named_buffers())
        fnet = lambda params, buffers, x: functional_call(net, (params, buffers), (x,))  # noqa
        compute_loss_for_task = partial(loss_for_task, (params, buffers, fnet), n_inner_iter,
                                        first_order)
        meta_opt.zero_grad()
        qry_losses, qry_accs = vmap(compute_loss_for_task)(x_spt, y_spt, x_qry, y_qry)
        qry_losses.sum().backward()
        res[name + "_losses"] = qry_losses
        res[name + "_accs"] = qry_accs
        res[name + "_grads"] = [p.grad.clone() for p in net.parameters()]
    meta_opt.step()
    res["params"] = list(net.parameters())

    # the same second-order meta gradient by a Python loop over tasks with autograd.grad
    params = {k: v.detach().requires_grad_() for k, v in net.named_parameters()}
    total = 0.0
    for i in range(task_num):
        fast = dict(params)
        for _ in range(n_inner_iter):
            loss = F.cross_entropy(functional_call(net, fast, (x_spt[i],)), y_spt[i])
            gs = torch.autograd.grad(loss, list(fast.values()), create_graph=True)
            fast = {k: w - 1e-1 * g for (k, w), g in zip(fast.items(), gs)}
        total = total + F.cross_entropy(functional_call(net, fast, x_qry[i]), y_qry[i])
    meta_grads = torch.autograd.grad(total, list(params.values()))
    res["loop_grads"] = list(meta_grads)
    res["loop_total"] = total
    res["strict_error"] = []
    try:
        functional_call(net, {"0.weight": params["0.weight"], "nope": params["0.bias"]},
                        (x_spt[0],), strict=True)
    except RuntimeError as e:
        res["strict_error"] = [str(e)]
    try:
        functional_call(net, (params, {"0.bias": params["0.bias"]}), (x_spt[0],))
    except ValueError as e:
        res["strict_error"].append(str(e))
    return res


def anil_meta_sgd_program(torch):
    """ANIL: a feature body whose features are computed once per task, only the head's weight
    and bias adapted by autograd.grad(create_graph=True), the meta gradient reaching the body
    through the head; Meta-SGD: a learned learning rate per parameter (nn.ParameterList of
    lr * ones_like), the fast weights p - lr * g, the meta optimizer over both lists; the
    per-parameter lrs clamp_ under no_grad after the step."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2824)
    n_way, k_spt, k_qry, task_num = 3, 2, 3, 2
    x_spt, y_spt, x_qry, y_qry = _tasks(torch, rng, task_num, n_way, k_spt, k_qry)
    body = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.GroupNorm(1, 3), nn.ELU(),
                         nn.AdaptiveAvgPool2d(2), nn.Flatten())
    head = nn.Linear(12, n_way)
    fill_(torch, body, rng)
    fill_(torch, head, rng)
    opt = torch.optim.SGD(list(body.parameters()) + list(head.parameters()), lr=0.1,
                          momentum=0.9, nesterov=True)
    res = {}
    for step in range(2):
        opt.zero_grad()
        meta_loss = 0
        for i in range(task_num):
            feats_s, feats_q = body(x_spt[i]), body(x_qry[i])
            w, b = head.weight, head.bias
            for _ in range(3):
                loss = F.cross_entropy(F.linear(feats_s, w, b), y_spt[i])
                gw, gb = torch.autograd.grad(loss, (w, b), create_graph=True)
                w, b = w - 0.5 * gw, b - 0.5 * gb
            meta_loss = meta_loss + F.cross_entropy(F.linear(feats_q, w, b), y_qry[i])
        (meta_loss / task_num).backward()
        opt.step()
        res["anil_loss%d" % step] = meta_loss
    res["anil_grads"] = [p.grad for p in list(body.parameters()) + list(head.parameters())]
    res["anil_params"] = list(body.parameters()) + list(head.parameters())

    class MetaSGD(nn.Module):
        def __init__(self, model, lr=0.3):
            super().__init__()
            self.module = model
            self.lrs = nn.ParameterList([nn.Parameter(torch.ones_like(p) * lr)
                                         for p in model.parameters()])

        def fast(self, loss, weights):
            grads = torch.autograd.grad(loss, weights, create_graph=True)
            return [w - lr * g for w, lr, g in zip(weights, self.lrs, grads)]

    model = nn.Sequential(nn.Flatten(), nn.Linear(36, 8), nn.Softplus(beta=2.0),
                          nn.Linear(8, n_way))
    fill_(torch, model, rng)
    meta = MetaSGD(model)
    mopt = torch.optim.Adam(meta.parameters(), lr=1e-2)
    names = [n for n, _ in meta.named_parameters()]
    res["msgd_names"] = names

    def run(x, weights):
        h = F.softplus(F.linear(x.flatten(1), weights[0], weights[1]), beta=2.0)
        return F.linear(h, weights[2], weights[3])

    for step in range(2):
        mopt.zero_grad()
        total = 0
        for i in range(task_num):
            weights = list(model.parameters())
            loss = F.cross_entropy(run(x_spt[i], weights), y_spt[i])
            weights = meta.fast(loss, weights)
            total = total + F.cross_entropy(run(x_qry[i], weights), y_qry[i],
                                            label_smoothing=0.1)
        total.backward()
        mopt.step()
        with torch.no_grad():
            for lr in meta.lrs:
                lr.clamp_(min=1e-4)
        res["msgd_loss%d" % step] = total
    res["msgd_lr_grads"] = [p.grad for p in meta.lrs]
    res["msgd_lrs"] = list(meta.lrs)
    res["msgd_params"] = list(model.parameters())
    return res


PROGRAMS = [maml_learner_program, l2l_maml_program, func_maml_program, anil_meta_sgd_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 second-order gradients through a few inner steps
        "maml_learner_program": (1e-4, 1e-5),
        "l2l_maml_program": (1e-4, 1e-5),
        "func_maml_program": (1e-4, 1e-5),
        "anil_meta_sgd_program": (1e-4, 1e-5),
    })
