"""Hypergradient programs written as their reference repositories write them in torch, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights: implicit MAML
(conjugate gradient on Hessian-vector products by double backward), hyperparameter optimisation
through the implicit function theorem (Lorraine et al.'s Neumann series), an LSTM learned
optimiser unrolled with create_graph=True and truncated BPTT, a Neural ODE adjoint written by
hand (augmented dynamics via autograd.grad, an autograd.Function over flattened parameters),
implicit differentiation with torch.func (jacrev, vjp, linalg.solve) and a type-II Anderson
solver on torch.linalg.lstsq. The sibling test_parity_programs_round34_implicit covers DEQs."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def imaml_program(torch):
    """iMAML (Rajeswaran et al.): inner loop to a proximal-regularised solution, then the
    implicit meta-gradient (I + H/lam)^{-1} g_test by conjugate gradient whose matvec is a
    Hessian-vector product built by double backward on the flattened inner gradient."""
    rng = np.random.default_rng(10)
    nn = torch.nn
    F = nn.functional

    def cg_solve(f_Ax, b, cg_iters=10, residual_tol=1e-10):
        x = torch.zeros(b.shape[0])
        r = b.clone()
        p = r.clone()
        rdotr = r.dot(r)
        for i in range(cg_iters):
            Ap = f_Ax(p)
            alpha = rdotr / (p.dot(Ap))
            x = x + alpha * p
            r = r - alpha * Ap
            newrdotr = r.dot(r)
            beta = newrdotr / rdotr
            p = r + beta * p
            rdotr = newrdotr
            if rdotr < residual_tol:
                break
        return x

    meta = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    fill_(torch, meta, rng, 0.5)
    learner = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    outer_opt = torch.optim.Adam(meta.parameters(), lr=1e-2)
    lam, inner_lr = 2.0, 0.1
    res = {}
    for task in range(2):
        xs, ys = normal(torch, rng, 6, 2), normal(torch, rng, 6, 1)
        xq, yq = normal(torch, rng, 6, 2), normal(torch, rng, 6, 1)
        learner.load_state_dict(meta.state_dict())
        inner_opt = torch.optim.SGD(learner.parameters(), lr=inner_lr)
        meta_params = [p.detach() for p in meta.parameters()]
        for _ in range(5):
            loss = F.mse_loss(learner(xs), ys)
            reg = sum(((p - mp) ** 2).sum() for p, mp in zip(learner.parameters(), meta_params))
            inner_opt.zero_grad()
            (loss + 0.5 * lam * reg).backward()
            inner_opt.step()
        test_loss = F.mse_loss(learner(xq), yq)
        g_test = torch.autograd.grad(test_loss, list(learner.parameters()))
        flat_g = torch.cat([g.contiguous().view(-1) for g in g_test])
        tr_loss = F.mse_loss(learner(xs), ys)
        grad_ft = torch.autograd.grad(tr_loss, list(learner.parameters()), create_graph=True)
        flat_grad = torch.cat([g.contiguous().view(-1) for g in grad_ft])

        def hvp(v):
            h = torch.autograd.grad(flat_grad, list(learner.parameters()), grad_outputs=v,
                                    retain_graph=True)
            return v + torch.cat([t.contiguous().view(-1) for t in h]) / lam
        meta_grad = cg_solve(hvp, flat_g.detach(), cg_iters=5)
        outer_opt.zero_grad()
        offset = 0
        for p in meta.parameters():
            n = p.numel()
            p.grad = meta_grad[offset:offset + n].view_as(p).clone()
            offset += n
        outer_opt.step()
        res[f"test_loss{task}"] = test_loss.detach()
        res[f"meta_grad{task}"] = meta_grad
    res["meta_w"] = meta[0].weight.detach()
    return res


def ift_hyperopt_program(torch):
    """Lorraine et al. (2020): per-parameter log weight decay as hyperparameters; the
    hypergradient is -d2L_T/dlam dw . (d2L_T/dw2)^{-1} dL_V/dw with the inverse Hessian by
    a Neumann series of Hessian-vector products (autograd.grad with grad_outputs lists)."""
    rng = np.random.default_rng(11)
    nn = torch.nn
    F = nn.functional
    model = nn.Linear(5, 3)
    fill_(torch, model, rng, 0.3)
    log_wd = [torch.full_like(p, -3.0).requires_grad_() for p in model.parameters()]
    w_opt = torch.optim.SGD(model.parameters(), lr=0.2)
    h_opt = torch.optim.Adam(log_wd, lr=0.05)
    xt, yt = normal(torch, rng, 16, 5), torch.from_numpy(rng.integers(0, 3, 16))
    xv, yv = normal(torch, rng, 16, 5), torch.from_numpy(rng.integers(0, 3, 16))

    def train_loss():
        reg = sum((p.pow(2) * lw.exp()).sum() for p, lw in zip(model.parameters(), log_wd))
        return F.cross_entropy(model(xt), yt) + reg

    def neumann_hyperstep(i_steps=5, alpha=0.1):
        params = list(model.parameters())
        v_loss = F.cross_entropy(model(xv), yv)
        dv = torch.autograd.grad(v_loss, params)
        t_loss = train_loss()
        dtrain_dw = torch.autograd.grad(t_loss, params, create_graph=True)
        v = [d.detach().clone() for d in dv]
        p = [d.detach().clone() for d in dv]
        for _ in range(i_steps):
            hv = torch.autograd.grad(dtrain_dw, params, grad_outputs=v, retain_graph=True)
            v = [vi - alpha * h for vi, h in zip(v, hv)]
            p = [pi + vi for pi, vi in zip(p, v)]
        p = [alpha * pi for pi in p]
        hyper = torch.autograd.grad(dtrain_dw, log_wd, grad_outputs=p)
        for lw, g in zip(log_wd, hyper):
            lw.grad = -g
        return v_loss

    res = {}
    for it in range(6):
        w_opt.zero_grad()
        train_loss().backward()
        w_opt.step()
        if it % 2 == 1:
            h_opt.zero_grad()
            res[f"val{it}"] = neumann_hyperstep().detach()
            res[f"hgrad{it}"] = [lw.grad.clone() for lw in log_wd]
            h_opt.step()
    res["log_wd"] = [lw.detach() for lw in log_wd]
    res["w"] = model.weight.detach()
    return res


def learned_optimizer_program(torch):
    """Andrychowicz et al. (2016): a coordinatewise two-layer LSTM optimiser fed preprocessed
    gradients (log|g|/p, sign) on random quadratics, unrolled with create_graph=True, meta-loss
    summed over a truncation window, then hidden states and optimisee detached (truncated
    BPTT) and the optimiser trained by Adam."""
    rng = np.random.default_rng(12)
    nn = torch.nn

    class Optimizer(nn.Module):
        def __init__(self, preproc=True, hidden_sz=10, preproc_factor=10.0):
            super().__init__()
            self.hidden_sz = hidden_sz
            self.recurs = nn.LSTMCell(2 if preproc else 1, hidden_sz)
            self.recurs2 = nn.LSTMCell(hidden_sz, hidden_sz)
            self.output = nn.Linear(hidden_sz, 1)
            self.preproc = preproc
            self.preproc_factor = preproc_factor
            self.preproc_threshold = float(np.exp(-preproc_factor))

        def forward(self, inp, hidden, cell):
            if self.preproc:
                inp = inp.data
                inp2 = torch.zeros(inp.size()[0], 2)
                keep_grads = (torch.abs(inp) >= self.preproc_threshold).squeeze()
                inp2[:, 0][keep_grads] = (
                    torch.log(torch.abs(inp[keep_grads]) + 1e-8) / self.preproc_factor).squeeze()
                inp2[:, 1][keep_grads] = torch.sign(inp[keep_grads]).squeeze()
                inp2[:, 0][~keep_grads] = -1
                inp2[:, 1][~keep_grads] = (
                    float(np.exp(self.preproc_factor)) * inp[~keep_grads]).squeeze()
                inp = inp2
            hidden0, cell0 = self.recurs(inp, (hidden[0], cell[0]))
            hidden1, cell1 = self.recurs2(hidden0, (hidden[1], cell[1]))
            return self.output(hidden1), (hidden0, hidden1), (cell0, cell1)

    opt_net = Optimizer()
    fill_(torch, opt_net, rng, 0.3)
    meta_opt = torch.optim.Adam(opt_net.parameters(), lr=1e-3)
    n, optim_it, unroll = 4, 6, 3
    res = {}
    for epoch in range(2):
        W = normal(torch, rng, n, n)
        y = normal(torch, rng, n)
        theta = torch.zeros(n, requires_grad=True)
        hidden = [torch.zeros(n, opt_net.hidden_sz) for _ in range(2)]
        cells = [torch.zeros(n, opt_net.hidden_sz) for _ in range(2)]
        all_losses = None
        for it in range(1, optim_it + 1):
            loss = ((W.matmul(theta) - y) ** 2).sum()
            all_losses = loss if all_losses is None else all_losses + loss
            loss.backward(retain_graph=True)
            grads = theta.grad.detach().view(n, 1)
            updates, new_hidden, new_cell = opt_net(grads, hidden, cells)
            theta_new = theta + updates.view(n) * 0.1
            theta_new.retain_grad()
            hidden, cells = list(new_hidden), list(new_cell)
            theta = theta_new
            if it % unroll == 0:
                meta_opt.zero_grad()
                all_losses.backward()
                res[f"meta_loss{epoch}_{it}"] = all_losses.detach()
                res[f"g_out{epoch}_{it}"] = opt_net.output.weight.grad.clone()
                meta_opt.step()
                all_losses = None
                theta = theta.detach().requires_grad_()
                hidden = [h.detach() for h in hidden]
                cells = [c.detach() for c in cells]
        res[f"theta{epoch}"] = theta.detach()
    return res


def neural_ode_adjoint_program(torch):
    """A hand-written Neural ODE adjoint (after the 'Neural ODEs from scratch' tutorial): a
    fixed-step RK4 solver, the ODEF base class with forward_with_grad computing
    a df/dz, a df/dp, a df/dt by autograd.grad over (z, t, *params), an autograd.Function taking
    the flattened parameters and integrating the augmented system backwards."""
    rng = np.random.default_rng(13)
    nn = torch.nn

    def ode_solve(z0, t0, t1, f):
        n_steps = 4
        h = (t1 - t0) / n_steps
        t, z = t0, z0
        for _ in range(n_steps):
            k1 = f(z, t)
            k2 = f(z + 0.5 * h * k1, t + 0.5 * h)
            k3 = f(z + 0.5 * h * k2, t + 0.5 * h)
            k4 = f(z + h * k3, t + h)
            z = z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t = t + h
        return z

    class ODEF(nn.Module):
        def forward_with_grad(self, z, t, grad_outputs):
            batch_size = z.shape[0]
            out = self.forward(z, t)
            a = grad_outputs
            adfdz, adfdt, *adfdp = torch.autograd.grad(
                (out,), (z, t) + tuple(self.parameters()), grad_outputs=(a,),
                allow_unused=True, retain_graph=True)
            if adfdp is not None:
                adfdp = torch.cat([p_grad.flatten() for p_grad in adfdp]).unsqueeze(0)
                adfdp = adfdp.expand(batch_size, -1) / batch_size
            if adfdt is not None:
                adfdt = adfdt.expand(batch_size, 1) / batch_size
            return out, adfdz, adfdt, adfdp

        def flatten_parameters(self):
            return torch.cat([p.flatten() for p in self.parameters()])

    class LinearODEF(ODEF):
        def __init__(self, dim):
            super().__init__()
            self.lin = nn.Linear(dim + 1, dim)
            self.lin2 = nn.Linear(dim, dim, bias=False)

        def forward(self, x, t):
            tt = t.expand(x.shape[0], 1)
            return self.lin2(torch.tanh(self.lin(torch.cat([x, tt], 1))))

    class ODEAdjoint(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z0, t, flat_parameters, func):
            bs, *z_shape = z0.size()
            time_len = t.size(0)
            with torch.no_grad():
                z = torch.zeros(time_len, bs, *z_shape).to(z0)
                z[0] = z0
                for i_t in range(time_len - 1):
                    z0 = ode_solve(z0, t[i_t], t[i_t + 1], func)
                    z[i_t + 1] = z0
            ctx.func = func
            ctx.save_for_backward(t, z.clone(), flat_parameters)
            return z

        @staticmethod
        def backward(ctx, dLdz):
            func = ctx.func
            t, z, flat_parameters = ctx.saved_tensors
            time_len, bs, *z_shape = z.size()
            n_dim = int(np.prod(z_shape))
            n_params = flat_parameters.size(0)

            def augmented_dynamics(aug_z_i, t_i):
                z_i, a = aug_z_i[:, :n_dim], aug_z_i[:, n_dim:2 * n_dim]
                z_i = z_i.view(bs, *z_shape)
                a = a.view(bs, *z_shape)
                with torch.set_grad_enabled(True):
                    t_i = t_i.detach().requires_grad_(True)
                    z_i = z_i.detach().requires_grad_(True)
                    func_eval, adfdz, adfdt, adfdp = func.forward_with_grad(z_i, t_i, a)
                    adfdz = adfdz.to(z_i) if adfdz is not None else torch.zeros(bs, *z_shape)
                    adfdp = adfdp.to(z_i) if adfdp is not None else torch.zeros(bs, n_params)
                    adfdt = adfdt.to(z_i) if adfdt is not None else torch.zeros(bs, 1)
                func_eval = func_eval.view(bs, n_dim)
                adfdz = adfdz.view(bs, n_dim)
                return torch.cat((func_eval, -adfdz, -adfdp, -adfdt), dim=1)

            dLdz = dLdz.view(time_len, bs, n_dim)
            with torch.no_grad():
                adj_z = torch.zeros(bs, n_dim).to(dLdz)
                adj_p = torch.zeros(bs, n_params).to(dLdz)
                adj_t = torch.zeros(time_len, bs, 1).to(dLdz)
                for i_t in range(time_len - 1, 0, -1):
                    z_i = z[i_t]
                    t_i = t[i_t]
                    f_i = func(z_i, t_i).view(bs, n_dim)
                    dLdz_i = dLdz[i_t]
                    dLdt_i = torch.bmm(torch.transpose(dLdz_i.unsqueeze(-1), 1, 2),
                                       f_i.unsqueeze(-1))[:, 0]
                    adj_z += dLdz_i
                    adj_t[i_t] = adj_t[i_t] - dLdt_i
                    aug_z = torch.cat((z_i.view(bs, n_dim), adj_z,
                                       torch.zeros(bs, n_params).to(z), adj_t[i_t]), dim=-1)
                    aug_ans = ode_solve(aug_z, t_i, t[i_t - 1], augmented_dynamics)
                    adj_z[:] = aug_ans[:, n_dim:2 * n_dim]
                    adj_p[:] += aug_ans[:, 2 * n_dim:2 * n_dim + n_params]
                    adj_t[i_t - 1] = aug_ans[:, 2 * n_dim + n_params:]
                    del aug_z, aug_ans
                dLdz_0 = dLdz[0]
                dLdt_0 = torch.bmm(torch.transpose(dLdz_0.unsqueeze(-1), 1, 2),
                                   f_i.unsqueeze(-1))[:, 0]
                adj_z += dLdz_0
                adj_t[0] = adj_t[0] - dLdt_0
            return adj_z.view(bs, *z_shape), adj_t, adj_p, None

    class NeuralODE(nn.Module):
        def __init__(self, func):
            super().__init__()
            self.func = func

        def forward(self, z0, t, return_whole_sequence=False):
            t = t.to(z0)
            z = ODEAdjoint.apply(z0, t, self.func.flatten_parameters(), self.func)
            return z if return_whole_sequence else z[-1]

    func = LinearODEF(3)
    fill_(torch, func, rng, 0.4)
    ode = NeuralODE(func)
    z0 = normal(torch, rng, 5, 3).requires_grad_()
    t = torch.linspace(0.0, 1.0, 4).view(-1, 1, 1).requires_grad_()
    target = normal(torch, rng, 4, 5, 3)
    zs = ode(z0, t, return_whole_sequence=True)
    loss = ((zs - target) ** 2).mean()
    loss.backward()
    res = {"loss": loss.detach(), "g_z0": z0.grad, "g_t": t.grad,
           "g_lin": func.lin.weight.grad, "g_lin2": func.lin2.weight.grad}
    # the same gradients by direct backprop through the solver, for a consistency number
    z, zz = z0.detach().requires_grad_(), []
    cur = z
    for i in range(3):
        cur = ode_solve(cur, t.detach()[i], t.detach()[i + 1], func)
        zz.append(cur)
    direct = ((torch.stack([z] + zz) - target) ** 2).mean()
    res["direct_g_z0"] = torch.autograd.grad(direct, z)[0]
    return res


def implicit_func_program(torch):
    """Implicit differentiation with torch.func: the root z*(theta) of F(z, theta) = z -
    tanh(W z + U theta) found by Newton with jacrev and linalg.solve; dz*/dtheta =
    -(dF/dz)^{-1} dF/dtheta, and a VJP form (vjp of F w.r.t. theta applied to the adjoint),
    checked against finite unrolling."""
    rng = np.random.default_rng(14)
    jacrev, vjp = torch.func.jacrev, torch.func.vjp
    W = normal(torch, rng, 4, 4) * 0.3
    U = normal(torch, rng, 4, 3)
    theta = normal(torch, rng, 3)

    def Fz(z, th):
        return z - torch.tanh(W @ z + U @ th)

    z = torch.zeros(4)
    for _ in range(8):
        J = jacrev(Fz, argnums=0)(z, theta)
        z = z - torch.linalg.solve(J, Fz(z, theta))
    Jz = jacrev(Fz, argnums=0)(z, theta)
    Jt = jacrev(Fz, argnums=1)(z, theta)
    dz_dth = -torch.linalg.solve(Jz, Jt)
    g = torch.arange(1.0, 5.0)
    lam = torch.linalg.solve(Jz.T, g)
    _, vjp_fn = vjp(lambda th: Fz(z, th), theta)
    (vjp_th,) = vjp_fn(lam)
    zu = torch.zeros(4)
    th = theta.clone().requires_grad_()
    for _ in range(60):
        zu = torch.tanh(W @ zu + U @ th)
    (unrolled,) = torch.autograd.grad((g * zu).sum(), th)
    jac_fn = torch.func.jacfwd(lambda th: torch.tanh(W @ z + U @ th))
    return {"z": z, "dz_dth": dz_dth, "vjp": -vjp_th, "unrolled": unrolled,
            "residual": Fz(z, theta).abs().max(), "jacfwd": jac_fn(theta)}


def anderson_lstsq_program(torch):
    """DEQ-repo style Anderson (type II) with torch.linalg.lstsq on a batch of small
    least-squares problems, and Broyden-style rank-one updates kept in batched tensors
    (einsum, bmm, masked updates) for a tanh equilibrium layer; gradients by the implicit
    function theorem with linalg.solve on the batch Jacobians from torch.func.vmap(jacrev)."""
    rng = np.random.default_rng(15)
    jacrev, vmap = torch.func.jacrev, torch.func.vmap
    nn = torch.nn
    lin = nn.Linear(5, 5, bias=False)
    inj = nn.Linear(2, 5)
    fill_(torch, lin, rng, 0.2)
    fill_(torch, inj, rng, 0.5)
    x = normal(torch, rng, 3, 2)

    def f(z, xin):
        return torch.tanh(lin(z) + inj(xin))

    def anderson2(g, z0, m=4, iters=20):
        zs, gs = [z0], [g(z0)]
        z = gs[0]
        for k in range(1, iters):
            zs.append(z)
            gs.append(g(z))
            n = min(m, len(zs) - 1)
            dG = torch.stack([(gs[-i] - zs[-i]) - (gs[-i - 1] - zs[-i - 1])
                              for i in range(1, n + 1)], -1)
            dZ = torch.stack([gs[-i] - gs[-i - 1] for i in range(1, n + 1)], -1)
            r = (gs[-1] - zs[-1]).unsqueeze(-1)
            gamma = torch.linalg.lstsq(dG, r).solution
            z = gs[-1] - (dZ @ gamma).squeeze(-1)
        return z

    with torch.no_grad():
        zstar = anderson2(lambda z: f(z, x), torch.zeros(3, 5))
    res = {"zstar": zstar, "residual": (f(zstar, x) - zstar).abs().max()}
    # Broyden's method on the residual
    with torch.no_grad():
        z = torch.zeros(3, 5)
        Binv = -torch.eye(5).repeat(3, 1, 1)
        gz = f(z, x) - z
        for _ in range(8):
            dz = -torch.bmm(Binv, gz.unsqueeze(-1)).squeeze(-1)
            z_new = z + dz
            g_new = f(z_new, x) - z_new
            dg = g_new - gz
            Bdg = torch.einsum("bij,bj->bi", Binv, dg)
            denom = torch.einsum("bi,bi->b", dz, Bdg)
            upd = torch.einsum("bi,bj->bij", dz - Bdg, torch.einsum("bi,bij->bj", dz, Binv))
            ok = denom.abs() > 1e-10
            Binv = torch.where(ok[:, None, None],
                               Binv + upd / torch.where(ok, denom, 1.0)[:, None, None], Binv)
            z, gz = z_new, g_new
    res["broyden"] = z
    # IFT gradient of sum(z*) w.r.t. x through per-sample Jacobians
    Jz = vmap(jacrev(f, argnums=0))(zstar, x)
    Jx = vmap(jacrev(f, argnums=1))(zstar, x)
    eye = torch.eye(5).expand(3, 5, 5)
    dz_dx = torch.linalg.solve(eye - Jz, Jx)
    res["dz_dx"] = dz_dx
    res["cond"] = torch.linalg.cond(eye - Jz)
    return res


PROGRAMS = [imaml_program, ift_hyperopt_program, learned_optimizer_program,
            neural_ode_adjoint_program, implicit_func_program, anderson_lstsq_program]

# CG/Neumann/Newton/lstsq iterations reassociate float32 sums; a few Adam steps follow
TOLERANCES = {"imaml_program": (1e-4, 1e-5), "ift_hyperopt_program": (1e-4, 1e-5),
              "learned_optimizer_program": (1e-4, 1e-5),
              "neural_ode_adjoint_program": (1e-4, 1e-5), "implicit_func_program": (1e-4, 1e-5),
              "anderson_lstsq_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
