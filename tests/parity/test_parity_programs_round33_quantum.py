"""Quantum statevector simulation written as PennyLane's and TorchQuantum's torch backends write
it, run once with `torch` bound to ember and once to PyTorch from the same NumPy parameters: gates
as complex matrices stacked from cos/sin/exp(1j*theta), applied by tensordot/einsum on a (2,)*n
state, controlled gates, |psi|^2 probabilities, Pauli-string expectations, a VQE loop with Adam on
real parameters through complex intermediates, QAOA with the parameter-shift rule checked against
autograd, and time evolution by matrix_exp of an anti-Hermitian generator. The sibling _density
covers density matrices and noise channels; _tensor covers MPS, TT, CP, Tucker and TT layers."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _real(torch, t):
    """A complex tensor as its (..., 2) real view, so results compare as floats."""
    return torch.view_as_real(t.detach().resolve_conj()).clone()


def _rx(torch, theta):
    """TorchQuantum's rx_matrix: [[cos, -i sin], [-i sin, cos]] stacked from a real angle."""
    co = torch.cos(theta / 2)
    jsi = 1j * torch.sin(-theta / 2)
    return torch.stack([torch.cat([co, jsi], dim=-1), torch.cat([jsi, co], dim=-1)],
                       dim=-2).squeeze(0)


def _ry(torch, theta):
    co = torch.cos(theta / 2)
    si = torch.sin(theta / 2)
    return torch.stack([torch.cat([co, -si], dim=-1), torch.cat([si, co], dim=-1)],
                       dim=-2).squeeze(0).to(torch.complex64)


def _rz(torch, theta):
    exp = torch.exp(-0.5j * theta)
    return torch.stack([torch.cat([exp, torch.zeros(exp.shape, device=theta.device)], dim=-1),
                        torch.cat([torch.zeros(exp.shape, device=theta.device), exp.conj()],
                                  dim=-1)], dim=-2).squeeze(0)


def _apply_single(torch, state, mat, wire, n):
    """Contract a 2x2 gate into axis `wire` of a (batch, 2, ..., 2) state, as
    TorchQuantum's apply_unitary_einsum does with an einsum string built from letters."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    idx = list(letters[:n + 1])
    new = list(idx)
    new[wire + 1] = "z"
    eq = f"z{idx[wire + 1]},{''.join(idx)}->{''.join(new)}"
    return torch.einsum(eq, mat, state)


def _apply_cnot(torch, state, control, target, n):
    """PennyLane's torch backend: a 4x4 matrix, tensordot over the two wires, moveaxis back."""
    cnot = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]],
                        dtype=state.dtype).reshape(2, 2, 2, 2)
    out = torch.tensordot(cnot, state, dims=([2, 3], [control + 1, target + 1]))
    return torch.movedim(out, (0, 1), (control + 1, target + 1))


def _pauli_expval(torch, state, paulis, n):
    """<psi| P_1 x ... x P_n |psi> with each factor applied on its wire, real part taken."""
    mats = {"X": torch.tensor([[0, 1], [1, 0]], dtype=torch.complex64),
            "Y": torch.tensor([[0, -1j], [1j, 0]], dtype=torch.complex64),
            "Z": torch.tensor([[1, 0], [0, -1]], dtype=torch.complex64)}
    phi = state
    for w, p in enumerate(paulis):
        if p != "I":
            phi = _apply_single(torch, phi, mats[p], w, n)
    dims = tuple(range(1, n + 1))
    return torch.sum(state.conj() * phi, dim=dims).real


def vqe_program(torch):
    """A hardware-efficient ansatz (RZ-RY layers + CNOT ladder) on 3 qubits, batch 2 of input
    angles encoded by RX, minimising a 2-local Hamiltonian with Adam; per-step energies,
    gradients, final probabilities (abs()**2 and conj()*psi paths) and the state's dtype."""
    rng = np.random.default_rng(0)
    n, layers, B = 3, 2, 2
    weights = torch.nn.Parameter(torch.from_numpy(rng.uniform(0, 2 * math.pi, (layers, n, 2))
                                                  .astype(np.float32)))
    inputs = torch.from_numpy(rng.uniform(0, math.pi, (B, n)).astype(np.float32))
    ham = [(0.5, "ZZI"), (-0.8, "IZZ"), (0.3, "XII"), (0.2, "IYY"), (-0.4, "XXX")]
    opt = torch.optim.Adam([weights], lr=0.1)
    res = {"energy": [], "grad": []}

    def circuit(w):
        state = torch.zeros((B,) + (2,) * n, dtype=torch.complex64)
        state.view(B, -1)[:, 0] = 1.0
        for q in range(n):
            mats = torch.stack([_rx(torch, inputs[b, q:q + 1]) for b in range(B)])
            state = _batched_gate(torch, state, mats, q)
        for layer in range(layers):
            for q in range(n):
                state = _apply_single(torch, state, _rz(torch, w[layer, q, 1:2]), q, n)
                state = _apply_single(torch, state, _ry(torch, w[layer, q, 0:1]), q, n)
            for q in range(n - 1):
                state = _apply_cnot(torch, state, q, q + 1, n)
        return state

    for _ in range(4):
        opt.zero_grad()
        state = circuit(weights)
        energy = sum(c * _pauli_expval(torch, state, p, n) for c, p in ham).mean()
        energy.backward()
        opt.step()
        res["energy"].append(energy.item())
        res["grad"].append(weights.grad.clone())
    with torch.no_grad():
        state = circuit(weights)
        flat = state.reshape(B, -1)
        res["probs_abs"] = flat.abs() ** 2
        res["probs_conj"] = (flat.conj() * flat).real
        res["norm"] = torch.linalg.vector_norm(flat, dim=-1)
        res["state"] = _real(torch, flat)
    res["weights"] = weights.detach().clone()
    res["dtypes"] = [str(d).split(".")[-1] for d in (state.dtype, res["probs_abs"].dtype,
                                                      state.real.dtype)]
    return res


def _batched_gate(torch, state, mats, wire):
    """Apply a per-sample 2x2 gate (B, 2, 2) to axis `wire` of a (B, 2, ..., 2) state by
    moving the wire last and using matmul, as TorchQuantum's apply_unitary_bmm does."""
    moved = state.movedim(wire + 1, -1)
    shape = moved.shape
    flat = moved.reshape(shape[0], -1, 2)
    out = flat @ mats.transpose(-1, -2)
    return out.reshape(shape).movedim(-1, wire + 1)


def _qaoa_state(torch, gammas, betas, cost, n):
    """Plus state, then p rounds of diag(exp(-i gamma C)) and RX(2 beta) on every wire."""
    dim = 2 ** n
    state = torch.full((dim,), 1 / math.sqrt(dim), dtype=torch.complex128)
    for gamma, beta in zip(gammas, betas):
        state = torch.exp(-1j * gamma * cost) * state
        psi = state.reshape((2,) * n)
        c, s = torch.cos(beta), -1j * torch.sin(beta)
        rx = torch.stack([torch.stack([c + 0j, s]), torch.stack([s, c + 0j])])
        for w in range(n):
            psi = torch.tensordot(rx, psi, dims=([1], [w])).movedim(0, w)
        state = psi.reshape(dim)
    return state


def qaoa_program(torch):
    """MaxCut QAOA (p=2) on a 4-node graph in complex128: cost diagonal built from bit masks
    with bitwise ops, energy as sum(|psi|^2 * C), autograd gradients compared with the
    parameter-shift rule (shift pi/4 on 2*beta, finite on gamma since C has integer gaps),
    then a few Adam steps and the most likely bitstring via argmax."""
    n = 4
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]
    idx = torch.arange(2 ** n)
    bits = (idx.unsqueeze(-1) >> torch.arange(n - 1, -1, -1)) & 1
    cost = torch.zeros(2 ** n, dtype=torch.float64)
    for i, j in edges:
        cost = cost + (bits[:, i] ^ bits[:, j]).to(torch.float64)
    params = torch.tensor([[0.4, 0.7], [0.3, 0.2]], dtype=torch.float64, requires_grad=True)

    def energy(p):
        st = _qaoa_state(torch, p[0], p[1], cost, n)
        return -(st.abs().pow(2) * cost).sum()

    e = energy(params)
    (g_auto,) = torch.autograd.grad(e, params)
    shift = torch.zeros_like(params)
    g_ps = torch.zeros_like(params)
    with torch.no_grad():
        for r in range(2):
            for c in range(2):
                shift.zero_()
                shift[r, c] = math.pi / 4 if r == 1 else 1e-4
                up, down = energy(params + shift), energy(params - shift)
                g_ps[r, c] = (up - down) if r == 1 else (up - down) / 2e-4
    res = {"energy0": e.detach(), "grad_auto": g_auto, "grad_ps_beta": g_ps[1],
           "grad_fd_gamma": g_ps[0]}
    opt = torch.optim.Adam([params], lr=0.05)
    hist = []
    for _ in range(5):
        opt.zero_grad()
        loss = energy(params)
        loss.backward()
        opt.step()
        hist.append(loss.item())
    res["hist"] = hist
    with torch.no_grad():
        probs = _qaoa_state(torch, params[0], params[1], cost, n).abs() ** 2
    res["probs"] = probs
    res["best"] = [int(probs.argmax()), int(torch.topk(probs, 3).indices[1])]
    res["cost"] = cost
    res["dtype"] = [str(probs.dtype).split(".")[-1], str(bits.dtype).split(".")[-1]]
    return res


def evolution_program(torch):
    """Time evolution U = matrix_exp(-i t H) for a transverse-field Ising H built from Kronecker
    products (torch.kron of complex Paulis), with the coupling and field learnable: fidelity to a
    target state, its gradient (matrix_exp backward through a complex anti-Hermitian matrix),
    unitarity error, and the evolved state's Z-magnetisation."""
    rng = np.random.default_rng(1)
    n = 3
    eye = torch.eye(2, dtype=torch.complex128)
    X = torch.tensor([[0, 1], [1, 0]], dtype=torch.complex128)
    Z = torch.tensor([[1, 0], [0, -1]], dtype=torch.complex128)

    def op_on(mats):
        out = mats[0]
        for m in mats[1:]:
            out = torch.kron(out, m)
        return out

    zz = sum(op_on([Z if k in (i, i + 1) else eye for k in range(n)]) for i in range(n - 1))
    xs = sum(op_on([X if k == i else eye for k in range(n)]) for i in range(n))
    J = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    h = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    tgt = rng.standard_normal(2 ** n) + 1j * rng.standard_normal(2 ** n)
    target = torch.from_numpy(tgt / np.linalg.norm(tgt))
    psi0 = torch.zeros(2 ** n, dtype=torch.complex128)
    psi0[0] = 1
    res = {"fid": [], "gJ": [], "gh": []}
    opt = torch.optim.SGD([J, h], lr=0.5)
    for _ in range(3):
        opt.zero_grad()
        H = -J * zz - h * xs
        U = torch.linalg.matrix_exp(-1j * 0.8 * H)
        psi = U @ psi0
        fid = torch.abs(torch.vdot(target, psi)) ** 2
        (-fid).backward()
        opt.step()
        res["fid"].append(fid.item())
        res["gJ"].append(J.grad.item())
        res["gh"].append(h.grad.item())
    with torch.no_grad():
        res["unitarity"] = torch.dist(U.mH @ U, torch.eye(2 ** n, dtype=U.dtype)).item() < 1e-10
        zmag = op_on([Z, eye, eye])
        res["zmag"] = torch.vdot(psi, zmag @ psi).real
        res["is_herm"] = bool(torch.allclose(H, H.mH))
        res["psi"] = _real(torch, psi)
    return res


PROGRAMS = [vqe_program, qaoa_program, evolution_program]
test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
