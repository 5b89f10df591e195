"""Second-order optimisation written as its reference repositories write it in torch, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: K-FAC
(forward pre-hooks and full backward hooks collecting activations and output gradients,
running-average Kronecker factors, eigen-decomposed and damped), Shampoo (inverse fourth roots
via eigh), AdaHessian and Sophia (Hutchinson Hessian diagonals by autograd.grad with
create_graph and Rademacher vectors from NumPy), natural gradient with a Fisher from
func.jacrev / vmap / functional_call, influence functions (Hessian-vector products by double
backward, LiSSA iterations) and SAM / ASAM as a two-step closure optimizer. Eigenvectors are
compared through the matrices they rebuild (their signs are the solver's choice)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests
from tests.parity.test_parity_programs_round20_recipes import sam_optimizer

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _mlp(torch, rng, sizes, act="Tanh"):
    nn = torch.nn
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(getattr(nn, act)())
    model = nn.Sequential(*layers)
    fill_(torch, model, rng, 0.5)
    return model


def kfac_program(torch):
    """K-FAC as the kfac-pytorch repositories write it: a forward pre-hook saving each
    Linear's input (with a ones column for the bias), a full backward hook saving grad_output,
    running averages of A = a^T a / n and G = g^T g * n under no_grad, eigh of each factor
    with damping, the preconditioned gradient V_G ((V_G^T grad V_A) / (l_G l_A^T + damping))
    V_A^T written back into .grad, a KL-clip rescale, then SGD."""
    nn = torch.nn
    rng = np.random.default_rng(2711)
    model = _mlp(torch, rng, [5, 7, 4])
    modules = [m for m in model if isinstance(m, nn.Linear)]
    store = {}

    def save_input(module, inputs):
        if torch.is_grad_enabled() and module.training:
            a = inputs[0].detach()
            store[(module, "a")] = torch.cat([a, a.new_ones(a.size(0), 1)], 1)

    def save_grad(module, grad_input, grad_output):
        store[(module, "g")] = grad_output[0].detach()

    handles = []
    for m in modules:
        handles.append(m.register_forward_pre_hook(save_input))
        handles.append(m.register_full_backward_hook(save_grad))
    factors = {}
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = normal(torch, rng, 12, 5)
    y = torch.from_numpy(rng.integers(0, 4, 12))
    res = {"losses": []}
    damping, decay = 0.05, 0.9
    for step in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        res["losses"].append(loss.item())
        updates = []
        with torch.no_grad():
            for m in modules:
                a, g = store[(m, "a")], store[(m, "g")]
                n = a.size(0)
                A, G = a.t() @ (a / n), g.t() @ (g * n)
                if step == 0:
                    factors[m] = [A, G]
                else:
                    factors[m][0].mul_(decay).add_(A, alpha=1 - decay)
                    factors[m][1].mul_(decay).add_(G, alpha=1 - decay)
                lA, QA = torch.linalg.eigh(factors[m][0], UPLO="U")
                lG, QG = torch.linalg.eigh(factors[m][1])
                lA, lG = lA.clamp(min=0), lG.clamp_min(0.0)
                grad = torch.cat([m.weight.grad, m.bias.grad.view(-1, 1)], 1)
                v1 = QG.t() @ grad @ QA
                v2 = v1 / (lG.unsqueeze(1) * lA.unsqueeze(0) + damping)
                updates.append((m, QG @ v2 @ QA.t()))
            vg = sum((u * torch.cat([m.weight.grad, m.bias.grad[:, None]], 1)).sum() * 0.01
                     for m, u in updates)
            nu = min(1.0, (0.001 / vg.abs()).sqrt().item())
            for m, u in updates:
                m.weight.grad.copy_(u[:, :-1]).mul_(nu)
                m.bias.grad.copy_(u[:, -1].view(m.bias.grad.size())).mul_(nu)
        res[f"nu_{step}"] = nu
        opt.step()
    res["factors"] = [f for m in modules for f in factors[m]]
    res["params"] = list(model.parameters())
    for h in handles:
        h.remove()
    res["hooks_left"] = [len(m._forward_pre_hooks) + len(m._backward_hooks) for m in modules]
    return res


def shampoo_program(torch):
    """Shampoo written as an Optimizer subclass: per-dimension preconditioners L += G G^T,
    R += G^T G, inverse fourth roots by eigh (eigenvalues clamped, powered by -1/4), the
    preconditioned step L^-1/4 G R^-1/4 with a grafted norm, state kept in self.state."""
    nn = torch.nn

    class Shampoo(torch.optim.Optimizer):
        def __init__(self, params, lr=0.1, eps=1e-4, update_freq=1):
            super().__init__(params, dict(lr=lr, eps=eps, update_freq=update_freq))

        @staticmethod
        def _root(mat, p, eps):
            vals, vecs = torch.linalg.eigh(mat)
            vals = torch.clamp(vals, min=eps).pow(-1.0 / p)
            return vecs @ torch.diag(vals) @ vecs.T

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    shape = grad.shape
                    g2 = grad.reshape(shape[0], -1) if grad.dim() > 1 else grad.view(-1, 1)
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["L"] = group["eps"] * torch.eye(g2.size(0))
                        state["R"] = group["eps"] * torch.eye(g2.size(1))
                    state["step"] += 1
                    state["L"].add_(g2 @ g2.T)
                    state["R"].addmm_(g2.T, g2)
                    if state["step"] % group["update_freq"] == 0:
                        state["L_inv"] = self._root(state["L"], 4, group["eps"])
                        state["R_inv"] = self._root(state["R"], 4, group["eps"])
                    pre = state["L_inv"] @ g2 @ state["R_inv"]
                    pre = pre * (g2.norm() / pre.norm().clamp_min(1e-12))
                    p.add_(pre.view(shape), alpha=-group["lr"])
            return loss

    rng = np.random.default_rng(2712)
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(12, 2))
    fill_(torch, model, rng)
    opt = Shampoo(model.parameters(), lr=0.05, eps=0.1)
    x, y = normal(torch, rng, 4, 2, 4, 4), normal(torch, rng, 4, 2)
    res = {"losses": []}
    for _ in range(3):
        def closure():
            opt.zero_grad()
            loss = nn.functional.smooth_l1_loss(model(x), y, beta=0.5)
            loss.backward()
            return loss
        res["losses"].append(opt.step(closure).item())
    res["params"] = list(model.parameters())
    first = opt.state[model[0].weight]
    res["state"] = [first["L"], first["R"], first["L_inv"], first["R_inv"]]
    res["steps"] = [opt.state[p]["step"] for p in model.parameters()]
    res["state_keys"] = sorted(opt.state_dict()["state"][0].keys())
    return res


def adahessian_program(torch):
    """AdaHessian: the Hutchinson estimate of diag(H) from autograd.grad(grads, params,
    grad_outputs=z, only_inputs=True, retain_graph=True) with Rademacher z drawn in NumPy,
    spatially averaged for conv kernels, Adam-style moments of grad and |diag H|^k with bias
    correction, in an Optimizer subclass whose step takes the closure's graph."""
    nn = torch.nn
    rng = np.random.default_rng(2713)

    class AdaHessian(torch.optim.Optimizer):
        def __init__(self, params, lr=0.1, betas=(0.9, 0.999), eps=1e-4, hessian_power=1.0):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                          hessian_power=hessian_power))

        def get_params(self):
            return (p for g in self.param_groups for p in g["params"] if p.requires_grad)

        @torch.no_grad()
        def set_hessian(self):
            params = [p for p in self.get_params() if p.grad is not None]
            zs = [torch.from_numpy(rng.integers(0, 2, tuple(p.shape)).astype(np.float32)
                                   * 2 - 1) for p in params]
            with torch.enable_grad():
                h_zs = torch.autograd.grad([p.grad for p in params], params, grad_outputs=zs,
                                           only_inputs=True, retain_graph=False)
            for h_z, z, p in zip(h_zs, zs, params):
                hess = h_z * z
                if p.dim() == 4:
                    hess = hess.abs().mean(dim=[2, 3], keepdim=True).expand_as(hess)
                self.state[p]["hessian"] = hess.clone()

        @torch.no_grad()
        def step(self, closure=None):
            self.set_hessian()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if "step" not in state:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_hessian_diag_sq"] = torch.zeros_like(p)
                    b1, b2 = group["betas"]
                    state["step"] += 1
                    state["exp_avg"].mul_(b1).add_(p.grad, alpha=1 - b1)
                    state["exp_hessian_diag_sq"].mul_(b2).addcmul_(
                        state["hessian"], state["hessian"], value=1 - b2)
                    bc1, bc2 = 1 - b1 ** state["step"], 1 - b2 ** state["step"]
                    k = group["hessian_power"]
                    denom = ((state["exp_hessian_diag_sq"] / bc2).pow_(k / 2)
                             .add_(group["eps"]))
                    p.addcdiv_(state["exp_avg"], denom, value=-group["lr"] / bc1)

    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Softplus(), nn.Flatten(), nn.Linear(4, 3))
    fill_(torch, model, rng)
    opt = AdaHessian(model.parameters(), lr=0.05)
    x = normal(torch, rng, 5, 1, 4, 3)
    y = torch.from_numpy(rng.integers(0, 3, 5))
    res = {"losses": []}
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward(create_graph=True)
        res["grad_fn"] = [p.grad.grad_fn is not None for p in model.parameters()]
        opt.step()
        res["losses"].append(loss.item())
    res["hessians"] = [opt.state[p]["hessian"] for p in model.parameters()]
    res["params"] = list(model.parameters())
    return res


def sophia_program(torch):
    """Sophia-H: every other step a Hutchinson estimate u * (H u) from torch.autograd.grad of
    (grad * u).sum() (create_graph on the first grad), an EMA of the Hessian diagonal, the
    clipped update clamp(m / max(gamma * h, eps), -1, 1) with decoupled weight decay."""
    nn = torch.nn
    rng = np.random.default_rng(2714)
    model = _mlp(torch, rng, [4, 6, 1], act="SiLU")
    params = list(model.parameters())
    x, y = normal(torch, rng, 10, 4), normal(torch, rng, 10, 1)
    m = [torch.zeros_like(p) for p in params]
    h = [torch.zeros_like(p) for p in params]
    lr, b1, b2, gamma, wd = 0.05, 0.9, 0.95, 0.05, 0.1
    res = {"losses": [], "h_norm": []}
    for step in range(4):
        loss = nn.functional.mse_loss(model(x), y)
        grads = torch.autograd.grad(loss, params, create_graph=step % 2 == 0)
        if step % 2 == 0:
            us = [torch.from_numpy(rng.choice([-1.0, 1.0], size=tuple(p.shape))
                                   .astype(np.float32)) for p in params]
            gu = sum((g * u).sum() for g, u in zip(grads, us))
            hvs = torch.autograd.grad(gu, params)
            with torch.no_grad():
                for hi, u, hv in zip(h, us, hvs):
                    hi.mul_(b2).add_((1 - b2) * u * hv)
            res["h_norm"].append(sum(hi.norm() ** 2 for hi in h).sqrt().item())
        with torch.no_grad():
            for p, g, mi, hi in zip(params, grads, m, h):
                p.mul_(1 - lr * wd)
                mi.mul_(b1).add_(g.detach(), alpha=1 - b1)
                ratio = (mi.abs() / (gamma * hi * x.size(0)).clamp(min=1e-15)).clamp(max=1.0)
                p.addcmul_(mi.sign(), ratio, value=-lr)
        res["losses"].append(loss.item())
    res["params"] = params
    res["h"] = h
    return res


def natural_gradient_program(torch):
    """Natural gradient with an empirical and a model Fisher built by torch.func: per-sample
    gradients from vmap(grad(functional_call)), Jacobians of the logits by jacrev over the
    flattened parameters, F = J^T diag(p) J - (J^T p)(J^T p)^T averaged, damped, solved with
    linalg.solve / cholesky_solve, and the update written back through vector_to_parameters."""
    nn = torch.nn
    fn = torch.func
    rng = np.random.default_rng(2715)
    model = _mlp(torch, rng, [3, 4, 3])
    x = normal(torch, rng, 6, 3)
    y = torch.from_numpy(rng.integers(0, 3, 6))
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    sizes = [p.numel() for p in model.parameters()]

    def unflatten(theta):
        return {n: t.view(s) for n, t, s in zip(names, theta.split(sizes), shapes)}

    def logits_fn(theta, xi):
        return fn.functional_call(model, unflatten(theta), (xi.unsqueeze(0),)).squeeze(0)

    def loss_fn(params, xi, yi):
        out = fn.functional_call(model, params, (xi.unsqueeze(0),))
        return nn.functional.cross_entropy(out, yi.unsqueeze(0))

    res = {"losses": []}
    for step in range(3):
        params = {k: v.detach() for k, v in model.named_parameters()}
        per_sample = fn.vmap(fn.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
        G = torch.cat([per_sample[n].flatten(1) for n in names], 1)
        theta = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
        J = fn.vmap(fn.jacrev(logits_fn), in_dims=(None, 0))(theta, x)
        probs = torch.softmax(fn.vmap(logits_fn, in_dims=(None, 0))(theta, x), -1)
        JTp = torch.einsum("bkp,bk->bp", J, probs)
        F_model = (torch.einsum("bkp,bk,bkq->pq", J, probs, J)
                   - torch.einsum("bp,bq->pq", JTp, JTp)) / x.size(0)
        F_emp = G.T @ G / x.size(0)
        g = G.mean(0)
        damp = 0.1 * torch.eye(theta.numel())
        nat_model = torch.linalg.solve(F_model + damp, g)
        L = torch.linalg.cholesky(F_emp + damp)
        nat_emp = torch.cholesky_solve(g.unsqueeze(1), L).squeeze(1)
        res[f"fisher_{step}"] = [F_model, F_emp]
        res[f"nat_{step}"] = [nat_model, nat_emp]
        res[f"psd_{step}"] = bool((torch.linalg.eigvalsh(F_model) > -1e-5).all())
        torch.nn.utils.vector_to_parameters(theta - 0.5 * nat_model, model.parameters())
        with torch.no_grad():
            res["losses"].append(nn.functional.cross_entropy(model(x), y).item())
    res["params"] = list(model.parameters())
    return res


def influence_program(torch):
    """Influence functions as pytorch-influence-functions writes them: hvp by double backward
    (grad with create_graph, dot with v, grad again), LiSSA recursion h <- v + (1 - damp) h -
    H h / scale over a few mini-batches, s_test, the influence of each training point
    -grad_z . s_test / n, and the exact check against a Hessian from torch.autograd.functional."""
    nn = torch.nn
    rng = np.random.default_rng(2716)
    model = nn.Linear(4, 2)
    fill_(torch, model, rng)
    params = [p for p in model.parameters() if p.requires_grad]
    xt, yt = normal(torch, rng, 8, 4), torch.from_numpy(rng.integers(0, 2, 8))
    xq, yq = normal(torch, rng, 1, 4), torch.from_numpy(rng.integers(0, 2, 1))
    F = nn.functional

    def hvp(y, w, v):
        first_grads = torch.autograd.grad(y, w, retain_graph=True, create_graph=True)
        elemwise = 0
        for grad_elem, v_elem in zip(first_grads, v):
            elemwise += torch.sum(grad_elem * v_elem)
        return torch.autograd.grad(elemwise, w, create_graph=True)

    def grad_z(xb, yb):
        model.eval()
        loss = F.cross_entropy(model(xb), yb)
        return list(torch.autograd.grad(loss, params, create_graph=True))

    v = grad_z(xq, yq)
    h_estimate = [t.clone() for t in v]
    damp, scale = 0.01, 5.0
    for i in range(6):
        idx = torch.from_numpy(rng.integers(0, 8, 4))
        loss = F.cross_entropy(model(xt[idx]), yt[idx])
        hv = hvp(loss, params, h_estimate)
        h_estimate = [_v + (1 - damp) * _h - _hv / scale
                      for _v, _h, _hv in zip(v, h_estimate, hv)]
    s_test = [h / scale for h in h_estimate]
    res = {"s_test": [s.detach() for s in s_test]}
    influences = []
    for i in range(8):
        gz = grad_z(xt[i:i + 1], yt[i:i + 1])
        influences.append(-sum((g * s).sum() for g, s in zip(gz, s_test)).item() / 8)
    res["influences"] = influences
    res["order"] = np.argsort(influences).tolist()

    def flat_loss(w, b):
        return F.cross_entropy(xt @ w.T + b, yt)

    H = torch.autograd.functional.hessian(flat_loss, (model.weight, model.bias))
    res["hessian_blocks"] = [H[0][0], H[0][1], H[1][1]]
    Hm = torch.cat([torch.cat([H[0][0].reshape(8, 8), H[0][1].reshape(8, 2)], 1),
                    torch.cat([H[1][0].reshape(2, 8), H[1][1].reshape(2, 2)], 1)])
    vv = torch.cat([t.detach().flatten() for t in v])
    res["exact"] = torch.linalg.lstsq(Hm + 0.05 * torch.eye(10), vv.unsqueeze(1)).solution
    _, vhp_out = torch.autograd.functional.vhp(flat_loss, (model.weight, model.bias),
                                               (v[0].detach(), v[1].detach()))
    _, hvp_out = torch.autograd.functional.hvp(flat_loss, (model.weight, model.bias),
                                               (v[0].detach(), v[1].detach()))
    res["vhp"], res["hvp"] = list(vhp_out), list(hvp_out)
    return res


def sam_program(torch):
    """SAM and ASAM as davda54/sam writes them: an Optimizer wrapping a base optimizer class,
    first_step climbing to w + rho * (|w| if adaptive) * g / ||g||, second_step restoring w
    from state["old_p"] and stepping the base optimizer; step(closure) running the closure
    again under enable_grad; the BatchNorm momentum disabled on the second pass; a cosine
    schedule on the shared param_groups."""
    nn = torch.nn
    rng = np.random.default_rng(2717)

    SAM = sam_optimizer(torch)

    def disable_running_stats(model):
        def _disable(module):
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.backup_momentum = module.momentum
                module.momentum = 0
        model.apply(_disable)

    def enable_running_stats(model):
        def _enable(module):
            if isinstance(module, nn.modules.batchnorm._BatchNorm) and hasattr(
                    module, "backup_momentum"):
                module.momentum = module.backup_momentum
        model.apply(_enable)

    res = {}
    x = normal(torch, rng, 8, 5)
    y = torch.from_numpy(rng.integers(0, 3, 8))
    for adaptive in (False, True):
        model = nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))
        fill_(torch, model, rng)
        opt = SAM(model.parameters(), torch.optim.SGD, rho=2.0 if adaptive else 0.05,
                  adaptive=adaptive, lr=0.1, momentum=0.9, weight_decay=5e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt.base_optimizer, T_max=4)
        tag = "asam" if adaptive else "sam"
        for step in range(3):
            enable_running_stats(model)
            loss = nn.functional.cross_entropy(model(x), y, label_smoothing=0.1)
            loss.backward()
            opt.first_step(zero_grad=True)
            disable_running_stats(model)
            nn.functional.cross_entropy(model(x), y, label_smoothing=0.1).backward()
            opt.second_step(zero_grad=True)
            sched.step()
            res.setdefault(tag + "_losses", []).append(loss.item())

            def closure():
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                return loss
            closure().item()
            opt.step(closure)
            opt.zero_grad()
        res[tag + "_params"] = list(model.parameters())
        res[tag + "_bn"] = [model[1].running_mean, model[1].running_var]
        res[tag + "_lr"] = opt.param_groups[0]["lr"]
        res[tag + "_momentum"] = opt.base_optimizer.state[model[0].weight]["momentum_buffer"]
    try:
        SAM(model.parameters(), torch.optim.SGD, rho=-1.0, lr=0.1)
    except ValueError as exc:
        res["rho_err"] = [str(exc)]
    return res


def lbfgs_program(torch):
    """Full-batch L-BFGS as the classical-ML and style-transfer repositories call it, in
    float64 (its stopping tests compare losses to 1e-9, below float32's resolution): logistic
    regression with an L2 term and a small MLP regression, with and without the strong-Wolfe
    line search, the closure zeroing grads and returning the loss, several step() calls
    resuming from the saved state; counters, step length, parameters and loss histories."""
    nn = torch.nn
    rng = np.random.default_rng(2718)
    X = torch.from_numpy(rng.standard_normal((30, 4)))
    y = torch.from_numpy((rng.random(30) > 0.5).astype(np.float64))
    res = {}
    for ls in (None, "strong_wolfe"):
        tag = ls or "fixed"
        w = torch.zeros(4, dtype=torch.float64, requires_grad=True)
        b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([w, b], lr=1, max_iter=15, history_size=5, line_search_fn=ls)
        calls = []

        def closure():
            opt.zero_grad()
            logits = X @ w + b
            loss = nn.functional.binary_cross_entropy_with_logits(logits, y) + 0.01 * w.dot(w)
            loss.backward()
            calls.append(loss.item())
            return loss
        firsts = [opt.step(closure).item() for _ in range(2)]
        st = opt.state[w]
        res[tag + "_logreg"] = [w, b]
        res[tag + "_counts"] = [len(calls), st["func_evals"], st["n_iter"], len(st["old_dirs"])]
        res[tag + "_losses"] = calls
        res[tag + "_firsts"] = firsts
        res[tag + "_t"] = float(st["t"])

        mlp = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1)).double()
        fill_(torch, mlp, rng, 0.5)
        target = torch.from_numpy(rng.standard_normal((30, 1)))
        opt = torch.optim.LBFGS(mlp.parameters(), lr=0.8, max_iter=8, max_eval=12,
                                tolerance_grad=1e-6, line_search_fn=ls)

        def mlp_closure():
            opt.zero_grad()
            loss = nn.functional.mse_loss(mlp(X), target)
            loss.backward()
            return loss
        res[tag + "_mlp_first"] = [opt.step(mlp_closure).item() for _ in range(3)]
        res[tag + "_mlp"] = list(mlp.parameters())
        st = opt.state[next(mlp.parameters())]
        res[tag + "_mlp_counts"] = [st["func_evals"], st["n_iter"]]
        res[tag + "_state_keys"] = sorted(opt.state_dict()["state"][0].keys())
    return res


def newton_program(torch):
    """Exact and Hessian-free Newton steps on a small MLP: the Hessian over the flattened
    parameters by torch.func.hessian, by jacfwd(jacrev), by torch.autograd.functional.hessian
    (reverse-over-reverse and forward-over-reverse), rows by autograd.grad with
    is_grads_batched, a vmap of jvp(grad) Hessian-vector products, damped Newton updates by
    linalg.solve and conjugate gradients driven by double-backward HVPs."""
    nn = torch.nn
    fn = torch.func
    AF = torch.autograd.functional
    rng = np.random.default_rng(2719)
    model = _mlp(torch, rng, [2, 3, 1])
    x, y = normal(torch, rng, 8, 2), normal(torch, rng, 8, 1)
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    sizes = [p.numel() for p in model.parameters()]

    def loss_of(theta):
        params = {n: t.view(s) for n, t, s in zip(names, theta.split(sizes), shapes)}
        # written out: PyTorch's mse_loss double backward fails under forward AD (jvp of grad)
        return (fn.functional_call(model, params, (x,)) - y).pow(2).mean()

    res = {"losses": []}
    theta = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
    n = theta.numel()
    H = fn.hessian(loss_of)(theta)
    res["hessians"] = [H, fn.jacfwd(fn.jacrev(loss_of))(theta), AF.hessian(loss_of, theta),
                       AF.hessian(loss_of, theta, vectorize=True),
                       AF.hessian(loss_of, theta, vectorize=True,
                                  outer_jacobian_strategy="forward-mode")]
    t = theta.clone().requires_grad_()
    g, = torch.autograd.grad(loss_of(t), t, create_graph=True)
    res["batched_rows"] = torch.autograd.grad(g, t, torch.eye(n)[:4], is_grads_batched=True)[0]
    res["vmap_hvp"] = fn.vmap(lambda v: fn.jvp(fn.grad(loss_of), (theta,), (v,))[1])(
        torch.eye(n)[4:8])
    for step in range(2):
        H = fn.hessian(loss_of)(theta)
        grad = fn.grad(loss_of)(theta)
        theta = theta - torch.linalg.solve(H + 0.1 * torch.eye(n), grad)
        res["losses"].append(loss_of(theta).item())

    def hvp(v):
        t = theta.detach().requires_grad_()
        g, = torch.autograd.grad(loss_of(t), t, create_graph=True)
        return torch.autograd.grad(g @ v, t)[0] + 0.1 * v

    b = -fn.grad(loss_of)(theta)
    z = torch.zeros_like(b)
    r, p = b.clone(), b.clone()
    rs = r @ r
    for _ in range(3):      # short of convergence, where float32 noise would dominate
        Ap = hvp(p)
        alpha = rs / (p @ Ap)
        z = z + alpha * p
        r = r - alpha * Ap
        rs_new = r @ r
        p = r + (rs_new / rs) * p
        rs = rs_new
    res["cg"] = z
    res["cg_residual"] = rs.sqrt()
    torch.nn.utils.vector_to_parameters(theta + z, model.parameters())
    with torch.no_grad():
        res["final"] = nn.functional.mse_loss(model(x), y)
    return res


def pyhessian_program(torch):
    """Loss-landscape spectra as PyHessian computes them: Hessian-vector products by
    autograd.grad(gradsH, params, grad_outputs=v, only_inputs=True, retain_graph=True), the
    top eigenvalues by power iteration with Gram-Schmidt against the found eigenvectors, the
    trace by Hutchinson with Rademacher vectors from NumPy, and the spectral density by
    stochastic Lanczos quadrature (a tridiagonal matrix built with diag(offset), eigh)."""
    nn = torch.nn
    rng = np.random.default_rng(2720)
    model = nn.Sequential(nn.Linear(3, 4), nn.Softplus(), nn.Linear(4, 2))
    fill_(torch, model, rng, 0.6)
    x, y = normal(torch, rng, 10, 3), torch.from_numpy(rng.integers(0, 2, 10))
    params = [p for p in model.parameters() if p.requires_grad]
    loss = nn.functional.cross_entropy(model(x), y)
    gradsH = torch.autograd.grad(loss, params, create_graph=True)

    def group_product(xs, ys):
        return sum(torch.sum(a * b) for (a, b) in zip(xs, ys))

    def group_add(params, update, alpha=1):
        for i, p in enumerate(params):
            params[i].data.add_(update[i] * alpha)
        return params

    def normalization(v):
        s = group_product(v, v) ** 0.5
        return [vi / (s + 1e-6) for vi in v]

    def orthnormal(w, v_list):
        for v in v_list:
            w = group_add(w, v, alpha=-group_product(w, v))
        return normalization(w)

    def hv(v):
        return torch.autograd.grad(gradsH, params, grad_outputs=v, only_inputs=True,
                                   retain_graph=True)

    def rand_like(p):
        return torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32))

    res = {}
    eigenvalues, eigenvectors = [], []
    for _ in range(2):
        v = normalization([rand_like(p) for p in params])
        eigenvalue = None
        for _ in range(12):
            v = orthnormal(v, eigenvectors)
            Hv = hv(v)
            tmp = group_product(Hv, v).cpu().item()
            v = normalization(Hv)
            eigenvalue = tmp
        eigenvalues.append(eigenvalue)
        eigenvectors.append(v)
    res["top"] = eigenvalues
    trace = []
    for _ in range(4):
        v = [torch.from_numpy(rng.integers(0, 2, tuple(p.shape)).astype(np.float32) * 2 - 1)
             for p in params]
        trace.append(group_product(hv(v), v).cpu().item())
    res["trace"] = [float(np.mean(trace))] + trace
    v = normalization([rand_like(p) for p in params])
    v_list, alphas, betas = [v], [], []
    w_prime = hv(v)
    alpha = group_product(w_prime, v)
    alphas.append(alpha.item())
    w = group_add(list(w_prime), v, alpha=-alpha)
    for _ in range(5):
        beta = torch.sqrt(group_product(w, w))
        betas.append(beta.item())
        v = orthnormal(w, v_list) if beta.item() != 0 else orthnormal(
            [rand_like(p) for p in params], v_list)
        v_list.append(v)
        w_prime = hv(v)
        alpha = group_product(w_prime, v)
        alphas.append(alpha.item())
        w_tmp = group_add(list(w_prime), v, alpha=-alpha)
        w = group_add(w_tmp, v_list[-2], alpha=-beta)
    T = torch.zeros(len(alphas), len(alphas))
    T = T + torch.diag(torch.tensor(alphas)) + torch.diag(torch.tensor(betas), 1) \
        + torch.diag(torch.tensor(betas), -1)
    a_, b_ = torch.linalg.eigh(T)
    res["ritz"] = a_
    res["weights"] = b_[0, :] ** 2
    res["alphas"], res["betas"] = alphas, betas
    return res


PROGRAMS = [kfac_program, shampoo_program, adahessian_program, sophia_program,
            natural_gradient_program, influence_program, sam_program, lbfgs_program,
            newton_program, pyhessian_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch)
