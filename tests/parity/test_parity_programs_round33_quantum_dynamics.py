"""Quantum dynamics and variational geometry written as quimb/TeNPy-style torch code and
PennyLane's torch interface write them, run once with `torch` bound to ember and once to
PyTorch from the same NumPy values: complex TEBD on an MPS (two-site gates from matrix_exp,
SVD truncation, gradients through complex SVD of a gauge-invariant loss), a two-site DMRG
step (effective Hamiltonian from environments, eigh and lobpcg ground states), the quantum
natural gradient with the Fubini-Study metric from torch.func.jacrev of a complex state,
a QAOA landscape by vmap, and a forward-mode JVP of an expectation value."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _heisenberg_bond(torch, J):
    """J (XX + YY + ZZ) on two sites as a (4, 4) complex128 matrix built with kron."""
    X = torch.tensor([[0, 1], [1, 0]], dtype=torch.complex128)
    Y = torch.tensor([[0, -1j], [1j, 0]], dtype=torch.complex128)
    Z = torch.tensor([[1, 0], [0, -1]], dtype=torch.complex128)
    return J * (torch.kron(X, X) + torch.kron(Y, Y) + torch.kron(Z, Z))


def tebd_program(torch):
    """Real-time TEBD on a 4-site complex MPS: U = matrix_exp(-i dt h) reshaped to (2,2,2,2),
    even/odd sweeps, each bond contracted, SVD'd, truncated to chi=3 and renormalised; the
    per-step discarded weight, the final <Z_i> profile, the norm (no Vidal gauge is kept, so
    it drifts, identically in both), and the gradient of the squared overlap with the initial
    state with respect to the coupling J (through complex SVD, matrix_exp and the truncation)."""
    rng = np.random.default_rng(0)
    L, chi, dt = 4, 3, 0.1
    J = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    init = []
    for i in range(L):
        v = rng.standard_normal(2) + 1j * rng.standard_normal(2)
        init.append(torch.from_numpy((v / np.linalg.norm(v)).reshape(1, 2, 1)))
    U = torch.linalg.matrix_exp(-1j * dt * _heisenberg_bond(torch, J)).reshape(2, 2, 2, 2)
    mps = list(init)
    discarded = []
    for _ in range(3):
        for start in (0, 1):
            for i in range(start, L - 1, 2):
                theta = torch.einsum("asb,btc->astc", mps[i], mps[i + 1])
                theta = torch.einsum("stuv,auvc->astc", U, theta)
                Dl, _, _, Dr = theta.shape
                Um, S, Vh = torch.linalg.svd(theta.reshape(Dl * 2, 2 * Dr), full_matrices=False)
                k = min(chi, S.shape[0])
                discarded.append((S[k:] ** 2).sum().detach())
                S = S[:k] / torch.linalg.vector_norm(S[:k])
                mps[i] = Um[:, :k].reshape(Dl, 2, k)
                mps[i + 1] = (S.to(Vh.dtype)[:, None] * Vh[:k]).reshape(k, 2, Dr)

    def overlap(A, B):
        env = torch.ones(1, 1, dtype=torch.complex128)
        for a, b in zip(A, B):
            env = torch.einsum("ab,asc,bsd->cd", env, a.conj(), b)
        return env[0, 0]

    Z = torch.tensor([[1, 0], [0, -1]], dtype=torch.complex128)
    zs = []
    for site in range(L):
        ops = [Z if j == site else torch.eye(2, dtype=torch.complex128) for j in range(L)]
        env = torch.ones(1, 1, dtype=torch.complex128)
        for a, o in zip(mps, ops):
            env = torch.einsum("ab,asc,st,btd->cd", env, a.conj(), o, a)
        zs.append(env[0, 0].real)
    loss = overlap(init, mps).abs() ** 2
    loss.backward()
    return {"loschmidt": loss.detach(), "gradJ": J.grad, "z": torch.stack(zs).detach(),
            "discarded": torch.stack(discarded), "norm": overlap(mps, mps).real.detach(),
            "bonds": [t.shape[-1] for t in mps]}


def dmrg_step_program(torch):
    """One two-site DMRG update for the 6-site Heisenberg chain without an MPO: the outer
    blocks (sites 0-1 and 4-5) compressed to bond 2 by isometries from linalg.qr, the
    16-dimensional effective Hamiltonian W^T H W, its ground state from linalg.eigh and from
    torch.lobpcg (float64, fixed start), the overlap of the two up to sign, the split of the
    two-site tensor by SVD, and the variational bound against the exact ground energy."""
    rng = np.random.default_rng(1)
    L = 6
    H = torch.zeros(2 ** L, 2 ** L, dtype=torch.float64)
    h = _heisenberg_bond(torch, 1.0).real
    for i in range(L - 1):
        H = H + torch.kron(torch.kron(torch.eye(2 ** i, dtype=torch.float64), h),
                           torch.eye(2 ** (L - i - 2), dtype=torch.float64))
    # Q comes back column-major, and torch 2.13's kron refuses transposed inputs
    Pl = torch.linalg.qr(torch.from_numpy(rng.standard_normal((4, 2))))[0].contiguous()
    Pr = torch.linalg.qr(torch.from_numpy(rng.standard_normal((4, 2))))[0].contiguous()
    W = torch.kron(torch.kron(Pl, torch.eye(4, dtype=torch.float64)), Pr)
    Heff = W.T @ H @ W
    w, v = torch.linalg.eigh(Heff)
    X0 = torch.from_numpy(rng.standard_normal((16, 1)))
    lw, lv = torch.lobpcg(Heff, k=1, X=X0, largest=False, niter=100, tol=1e-10)
    gs = v[:, 0]
    theta = gs.reshape(2, 2, 2, 2).reshape(4, 4)
    U, S, Vh = torch.linalg.svd(theta)
    full = torch.linalg.eigvalsh(H)
    return {"e_eigh": w, "e_lobpcg": lw, "overlap": (gs @ lv[:, 0]).abs(),
            "S": S, "trunc": (S[2:] ** 2).sum(), "full_ground": full[0],
            "variational": bool(w[0] >= full[0] - 1e-12),
            "iso": torch.allclose(W.T @ W, torch.eye(16, dtype=torch.float64))}


def _circuit_state(torch, params):
    """A 2-qubit RY-RZ-CNOT state as a complex128 vector of 4 amplitudes."""
    def ry(t):
        c, s = torch.cos(t / 2), torch.sin(t / 2)
        return torch.stack([torch.stack([c, -s]), torch.stack([s, c])]).to(torch.complex128)

    def rz(t):
        e = torch.exp(-0.5j * t)
        z = torch.zeros((), dtype=torch.complex128)
        return torch.stack([torch.stack([e, z]), torch.stack([z, e.conj()])])

    psi = torch.zeros(4, dtype=torch.complex128)
    psi = psi + torch.tensor([1, 0, 0, 0], dtype=torch.complex128)
    layer0 = torch.kron(rz(params[2]) @ ry(params[0]), rz(params[3]) @ ry(params[1]))
    cnot = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]],
                        dtype=torch.complex128)
    layer1 = torch.kron(ry(params[4]), ry(params[5]))
    return layer1 @ cnot @ layer0 @ psi


def qng_program(torch):
    """Quantum natural gradient: the Fubini-Study metric g = Re(<d psi|d psi>) -
    <d psi|psi><psi|d psi> from torch.func.jacrev of the real and imaginary parts (jacrev
    refuses complex outputs, so the state is split), a regularised solve, three QNG steps vs
    three plain gradient steps on <ZZ + 0.5 XI>, and the metric's eigenvalues."""
    ham = (torch.kron(torch.tensor([[1., 0], [0, -1]]), torch.tensor([[1., 0], [0, -1]]))
           + 0.5 * torch.kron(torch.tensor([[0., 1], [1, 0]]), torch.eye(2))
           ).to(torch.complex128)

    def energy(p):
        psi = _circuit_state(torch, p)
        return (psi.conj() @ ham @ psi).real

    def split(p):
        psi = _circuit_state(torch, p)
        return torch.stack([psi.real, psi.imag])

    def metric(p):
        jac = torch.func.jacrev(split)(p)
        dpsi = torch.complex(jac[0], jac[1])
        psi = _circuit_state(torch, p).detach()
        inner = dpsi.mH @ dpsi
        berry = dpsi.mH @ psi
        return (inner - torch.outer(berry, berry.conj())).real

    p0 = torch.tensor([0.4, -0.3, 0.8, 0.2, 1.1, -0.7], dtype=torch.float64)
    res = {"metric_eig": torch.linalg.eigvalsh(metric(p0)), "qng": [], "gd": []}
    p = p0.clone()
    q = p0.clone()
    for _ in range(3):
        g = torch.func.grad(energy)(p)
        G = metric(p) + 1e-3 * torch.eye(6, dtype=torch.float64)
        p = p - 0.1 * torch.linalg.solve(G, g)
        res["qng"].append(energy(p))
        q = q - 0.1 * torch.func.grad(energy)(q)
        res["gd"].append(energy(q))
    res["p"] = p
    return res


def landscape_program(torch):
    """A QAOA (p=1) energy landscape for a 3-node triangle on a 5x5 (gamma, beta) grid by
    torch.func.vmap over a flattened meshgrid, gradients by vmap(grad), the argmin located with
    unravel_index, and a JVP of the energy along (1, 1) at the best point."""
    n = 3
    bits = (torch.arange(8).unsqueeze(-1) >> torch.arange(n - 1, -1, -1)) & 1
    cost = ((bits[:, 0] ^ bits[:, 1]) + (bits[:, 1] ^ bits[:, 2])
            + (bits[:, 0] ^ bits[:, 2])).to(torch.float64)

    def energy(gb):
        gamma, beta = gb[0], gb[1]
        psi = torch.full((8,), 1 / math.sqrt(8), dtype=torch.complex128)
        psi = torch.exp(-1j * gamma * cost) * psi
        c, s = torch.cos(beta), -1j * torch.sin(beta)
        rx = torch.stack([torch.stack([c + 0j, s]), torch.stack([s, c + 0j])])
        psi = psi.reshape(2, 2, 2)
        psi = torch.einsum("ij,jkl->ikl", rx, psi)
        psi = torch.einsum("ij,kjl->kil", rx, psi)
        psi = torch.einsum("ij,klj->kli", rx, psi)
        return -(psi.abs() ** 2 * cost.reshape(2, 2, 2)).sum()

    gammas = torch.linspace(0, math.pi, 5, dtype=torch.float64)
    betas = torch.linspace(0, math.pi / 2, 5, dtype=torch.float64)
    G, B = torch.meshgrid(gammas, betas, indexing="ij")
    grid = torch.stack([G.flatten(), B.flatten()], dim=-1)
    values = torch.func.vmap(energy)(grid)
    grads = torch.func.vmap(torch.func.grad(energy))(grid)
    best = torch.argmin(values)
    i, j = torch.unravel_index(best, (5, 5))
    _, tangent = torch.func.jvp(energy, (grid[best],),
                                (torch.ones(2, dtype=torch.float64),))
    loop = torch.stack([energy(g) for g in grid])
    return {"values": values.reshape(5, 5), "grads": grads, "best": [int(i), int(j)],
            "tangent": tangent, "loop_same": torch.allclose(loop, values)}


PROGRAMS = [tebd_program, dmrg_step_program, qng_program, landscape_program]
test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
