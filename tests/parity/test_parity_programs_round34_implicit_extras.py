"""Implicit-layer programs for the rarer autograd entry points, run once with `torch` bound to
ember and once to PyTorch: an equilibrium autograd.Function with a forward-mode jvp rule used
through forward_ad dual tensors, batched vector-Jacobian products (is_grads_batched) for the
exact Jacobian regulariser with lstsq/pinv/solve(left=False) on it, and the hooks a
learned-optimiser/DEQ training loop uses (module full backward hooks, multi-grad hooks,
post-accumulate-grad hooks doing the optimiser step inside backward)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def forward_ad_equilibrium_program(torch):
    """z* = tanh(W z* + x) as a Function with forward (vjp) and jvp rules from the implicit
    function theorem, evaluated on forward_ad dual tensors and by backward, compared with
    func.jvp of the unrolled iteration."""
    rng = np.random.default_rng(30)
    fwAD = torch.autograd.forward_ad
    W = normal(torch, rng, 4, 4) * 0.25

    def solve(x):
        z = torch.zeros_like(x)
        for _ in range(80):
            z = torch.tanh(z @ W.T + x)
        return z

    class Equilibrium(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with torch.no_grad():
                z = solve(x)
            ctx.save_for_backward(z)
            ctx.save_for_forward(z)
            return z

        @staticmethod
        def _jac(z):
            d = 1 - z * z
            return torch.eye(4) - d[..., :, None] * W, d

        @staticmethod
        def backward(ctx, gz):
            (z,) = ctx.saved_tensors
            M, d = Equilibrium._jac(z)
            u = torch.linalg.solve(M.mT, gz.unsqueeze(-1)).squeeze(-1)
            return u * d

        @staticmethod
        def jvp(ctx, tx):
            (z,) = ctx.saved_tensors
            M, d = Equilibrium._jac(z)
            return torch.linalg.solve(M, (d * tx).unsqueeze(-1)).squeeze(-1)

    x = normal(torch, rng, 3, 4)
    t = normal(torch, rng, 3, 4)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, t)
        out = Equilibrium.apply(dual)
        primal, tangent = fwAD.unpack_dual(out)
        res = {"primal": primal, "tangent": tangent}
    res["func_jvp"] = torch.func.jvp(solve, (x,), (t,))[1]
    xr = x.clone().requires_grad_()
    Equilibrium.apply(xr).mul(t).sum().backward()
    res["vjp"] = xr.grad
    xr2 = x.clone().requires_grad_()
    solve(xr2).mul(t).sum().backward()
    res["vjp_unrolled"] = xr2.grad
    return res


def batched_jacobian_program(torch):
    """The exact Jacobian of a small equilibrium cell by one autograd.grad with
    is_grads_batched=True (rows of the identity), then the regulariser ||J||_F^2, the
    pseudo-inverse, a least-squares fit of J against a target map with linalg.lstsq (gelsd,
    rcond), solve(left=False) and the gradient of the regulariser to the cell's weights."""
    rng = np.random.default_rng(31)
    nn = torch.nn
    cell = nn.Sequential(nn.Linear(5, 5), nn.Softplus(beta=2.0), nn.Linear(5, 5))
    fill_(torch, cell, rng, 0.4)
    z0 = normal(torch, rng, 5).requires_grad_()
    f0 = cell(z0)
    eye = torch.eye(5)
    (J,) = torch.autograd.grad(f0, z0, eye, is_grads_batched=True, create_graph=True)
    reg = J.pow(2).sum()
    reg.backward()
    res = {"J": J.detach(), "reg": reg.detach(), "g_w0": cell[0].weight.grad,
           "g_w2": cell[2].weight.grad}
    Jd = J.detach()
    target = normal(torch, rng, 5, 3)
    sol = torch.linalg.lstsq(Jd, target, rcond=None, driver="gelsd")
    res["lstsq"] = sol.solution
    res["rank"] = sol.rank.tolist()
    res["pinv"] = torch.linalg.pinv(Jd)
    res["right_solve"] = torch.linalg.solve(eye - 0.1 * Jd, target.T, left=False)
    res["slogdet"] = list(torch.linalg.slogdet(eye - 0.1 * Jd))
    return res


def hooks_program(torch):
    """A DEQ-style training loop instrumented as repos do: register_full_backward_hook on the
    cell (recording grad norms), a multi-grad hook over the two heads, and the optimiser
    step performed per parameter in register_post_accumulate_grad_hook."""
    rng = np.random.default_rng(32)
    nn = torch.nn
    cell = nn.Linear(4, 4)
    head_a, head_b = nn.Linear(4, 1), nn.Linear(4, 2)
    for m in (cell, head_a, head_b):
        fill_(torch, m, rng, 0.4)
    seen = []
    cell.register_full_backward_hook(
        lambda mod, gin, gout: seen.append(("cell", round(gout[0].norm().item(), 5))))
    params = list(cell.parameters()) + list(head_a.parameters()) + list(head_b.parameters())
    opts = {p: torch.optim.SGD([p], lr=0.1, momentum=0.5) for p in params}

    def step_hook(p):
        opts[p].step()
        opts[p].zero_grad()
    for p in params:
        p.register_post_accumulate_grad_hook(step_hook)
    x = normal(torch, rng, 6, 4)
    res = {}
    for it in range(3):
        with torch.no_grad():
            z = torch.zeros(6, 4)
            for _ in range(20):
                z = torch.tanh(cell(z) * 0.5 + x)
        z = torch.tanh(cell(z) * 0.5 + x)
        a, b = head_a(z), head_b(z)
        torch.autograd.graph.register_multi_grad_hook(
            (a, b), lambda grads: seen.append(("multi", sum(g is not None for g in grads))))
        loss = a.pow(2).mean() + b.logsumexp(1).mean()
        loss.backward()
        res[f"loss{it}"] = loss.detach()
    res["seen"] = [s[0] for s in seen]
    res["seen_vals"] = [float(s[1]) for s in seen]
    res["w"] = cell.weight.detach()
    res["grad_none"] = all(p.grad is None for p in params)
    return res


PROGRAMS = [forward_ad_equilibrium_program, batched_jacobian_program, hooks_program]

# fixed-point iterations and small solves reassociate float32 sums
TOLERANCES = {"forward_ad_equilibrium_program": (1e-4, 1e-5),
              "batched_jacobian_program": (1e-4, 1e-5), "hooks_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
