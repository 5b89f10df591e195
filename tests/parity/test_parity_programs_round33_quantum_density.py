"""Mixed-state simulation written as PennyLane's default.mixed and TorchQuantum's density-matrix
backends write it in torch, run once with `torch` bound to ember and once to PyTorch from the
same NumPy parameters: density matrices as (2,)*2n complex128 tensors, gates applied as
U rho U^dagger by einsum, Kraus channels (amplitude damping, depolarising, bit flip) summed
over a stacked Kraus axis, partial trace by einsum over paired indices, purity, von Neumann
entropy from eigvalsh, Uhlmann fidelity by eigh square roots, a noisy VQE step with Adam, a
parameter-shift custom autograd.Function, and shot sampling by multinomial under manual_seed."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_LETTERS = "abcdefghijklmnop"


def _apply_unitary(torch, rho, U, wires, n):
    """rho -> U rho U^dagger on `wires` of an n-qubit density tensor of shape (2,)*2n, with
    the einsum string built from letters as default.mixed builds it."""
    k = len(wires)
    U = U.reshape((2,) * 2 * k)
    row, col = list(_LETTERS[:n]), list(_LETTERS[n:2 * n])
    new_row = list(row)
    new_col = list(col)
    u_out = [_LETTERS[2 * n + i] for i in range(k)]
    v_out = [_LETTERS[2 * n + k + i] for i in range(k)]
    for i, w in enumerate(wires):
        new_row[w] = u_out[i]
        new_col[w] = v_out[i]
    u_in = [row[w] for w in wires]
    v_in = [col[w] for w in wires]
    eq = (f"{''.join(u_out + u_in)},{''.join(row + col)},{''.join(v_out + v_in)}"
          f"->{''.join(new_row + new_col)}")
    return torch.einsum(eq, U, rho, U.conj())


def _apply_channel(torch, rho, kraus, wire, n):
    """sum_k K_k rho K_k^dagger on one wire, the Kraus operators stacked on a leading axis."""
    row, col = list(_LETTERS[:n]), list(_LETTERS[n:2 * n])
    new_row, new_col = list(row), list(col)
    new_row[wire], new_col[wire] = "y", "z"
    eq = (f"xy{row[wire]},{''.join(row + col)},xz{col[wire]}"
          f"->{''.join(new_row + new_col)}")
    return torch.einsum(eq, kraus, rho, kraus.conj())


def _amplitude_damping(torch, gamma):
    z = torch.zeros_like(gamma)
    one = torch.ones_like(gamma)
    k0 = torch.stack([torch.stack([one, z]), torch.stack([z, torch.sqrt(1 - gamma)])])
    k1 = torch.stack([torch.stack([z, torch.sqrt(gamma)]), torch.stack([z, z])])
    return torch.stack([k0, k1]).to(torch.complex128)


def _depolarizing(torch, p):
    eye = torch.eye(2, dtype=torch.complex128)
    X = torch.tensor([[0, 1], [1, 0]], dtype=torch.complex128)
    Y = torch.tensor([[0, -1j], [1j, 0]], dtype=torch.complex128)
    Z = torch.tensor([[1, 0], [0, -1]], dtype=torch.complex128)
    coeffs = torch.stack([torch.sqrt(1 - p), torch.sqrt(p / 3), torch.sqrt(p / 3),
                          torch.sqrt(p / 3)])
    return coeffs.to(torch.complex128)[:, None, None] * torch.stack([eye, X, Y, Z])


def _rot(torch, phi, theta, omega):
    """PennyLane's Rot(phi, theta, omega) = RZ(omega) RY(theta) RZ(phi) in closed form."""
    c, s = torch.cos(theta / 2), torch.sin(theta / 2)
    return torch.stack([
        torch.stack([torch.exp(-0.5j * (phi + omega)) * c, -torch.exp(0.5j * (phi - omega)) * s]),
        torch.stack([torch.exp(-0.5j * (phi - omega)) * s, torch.exp(0.5j * (phi + omega)) * c]),
    ])


_CNOT = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]


def _partial_trace(torch, rho, keep, n):
    """Trace out every wire not in `keep` by repeating its row letter in the column slot."""
    row, col = list(_LETTERS[:n]), list(_LETTERS[n:2 * n])
    for w in range(n):
        if w not in keep:
            col[w] = row[w]
    out = [row[w] for w in keep] + [col[w] for w in keep]
    d = 2 ** len(keep)
    return torch.einsum(f"{''.join(row + col)}->{''.join(out)}", rho).reshape(d, d)


def noisy_circuit_program(torch):
    """Two Rot layers with CNOT and amplitude damping / depolarising noise on 3 qubits: the
    reduced states, purity tr(rho^2), entanglement entropy from eigvalsh (xlogy for the zero
    eigenvalues), Uhlmann fidelity to the noiseless state by eigh square roots, <Z0 Z1>, and a
    few Adam steps on the rotation angles and a learnable damping logit (sigmoid)."""
    rng = np.random.default_rng(0)
    n = 3
    angles = torch.nn.Parameter(torch.from_numpy(rng.uniform(0, math.pi, (2, n, 3))))
    logit = torch.nn.Parameter(torch.tensor(-1.5, dtype=torch.float64))
    cnot = torch.tensor(_CNOT, dtype=torch.complex128)
    zz = torch.kron(torch.tensor([[1., 0], [0, -1]], dtype=torch.complex128),
                    torch.tensor([[1., 0], [0, -1]], dtype=torch.complex128))

    def run(noisy):
        rho = torch.zeros((2,) * 2 * n, dtype=torch.complex128)
        rho[(0,) * 2 * n] = 1
        gamma = torch.sigmoid(logit)
        for layer in range(2):
            for w in range(n):
                rho = _apply_unitary(torch, rho, _rot(torch, *angles[layer, w].unbind()), [w], n)
            for w in range(n - 1):
                rho = _apply_unitary(torch, rho, cnot, [w, w + 1], n)
            if noisy:
                rho = _apply_channel(torch, rho, _amplitude_damping(torch, gamma), 0, n)
                rho = _apply_channel(torch, rho, _depolarizing(torch, 0.5 * gamma), 2, n)
        return rho

    def entropy(r):
        evals = torch.linalg.eigvalsh(r).clamp(min=0)
        return -torch.xlogy(evals, evals).sum()

    def sqrtm_psd(r):
        w, v = torch.linalg.eigh(r)
        return (v * torch.sqrt(w.clamp(min=0)).to(v.dtype)) @ v.mH

    opt = torch.optim.Adam([angles, logit], lr=0.05)
    res = {"loss": [], "purity": [], "entropy": []}
    for _ in range(3):
        opt.zero_grad()
        rho = run(True)
        red = _partial_trace(torch, rho, [0, 1], n)
        zz_val = torch.trace(zz @ red).real
        purity = torch.trace(red @ red).real
        loss = zz_val + 0.1 * (1 - purity)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["purity"].append(purity.item())
        res["entropy"].append(entropy(_partial_trace(torch, rho, [0], n)).item())
    res["grad_angles"] = angles.grad
    res["grad_logit"] = logit.grad
    with torch.no_grad():
        rho = run(True).reshape(2 ** n, 2 ** n)
        pure = run(False).reshape(2 ** n, 2 ** n)
        s = sqrtm_psd(rho)
        res["fidelity"] = torch.linalg.eigvalsh(s @ pure @ s).clamp(min=0).sqrt().sum() ** 2
        res["trace"] = torch.trace(rho).real
        res["hermitian"] = torch.allclose(rho, rho.mH)
        res["diag"] = torch.diagonal(rho).real
        res["rho"] = torch.view_as_real(rho.resolve_conj())
    return res


def parameter_shift_program(torch):
    """A custom autograd.Function whose backward is the parameter-shift rule (as qiskit's
    TorchConnector-style hybrids do), its gradient against plain autograd of the same circuit,
    a ctx.needs_input_grad branch, a tensor hook scaling the incoming gradient, and a hybrid
    classical-quantum model trained two steps with SGD."""
    rng = np.random.default_rng(1)
    n = 2
    obs = torch.kron(torch.tensor([[1., 0], [0, -1]], dtype=torch.complex128),
                     torch.eye(2, dtype=torch.complex128))

    def expval(theta):
        rho = torch.zeros((2,) * 2 * n, dtype=torch.complex128)
        rho[(0,) * 2 * n] = 1
        for w in range(n):
            ry = torch.stack([torch.stack([torch.cos(theta[w] / 2), -torch.sin(theta[w] / 2)]),
                              torch.stack([torch.sin(theta[w] / 2), torch.cos(theta[w] / 2)])])
            rho = _apply_unitary(torch, rho, ry.to(torch.complex128), [w], n)
        rho = _apply_unitary(torch, rho, torch.tensor(_CNOT, dtype=torch.complex128), [1, 0], n)
        return torch.trace(obs @ rho.reshape(4, 4)).real

    calls = []

    class ShiftExpval(torch.autograd.Function):
        @staticmethod
        def forward(ctx, theta):
            ctx.save_for_backward(theta)
            with torch.no_grad():
                return expval(theta)

        @staticmethod
        def backward(ctx, grad_out):
            (theta,) = ctx.saved_tensors
            calls.append(bool(ctx.needs_input_grad[0]))
            grads = []
            for i in range(theta.shape[0]):
                shift = torch.zeros_like(theta)
                shift[i] = math.pi / 2
                grads.append((expval(theta + shift) - expval(theta - shift)) / 2)
            return grad_out * torch.stack(grads)

    theta = torch.from_numpy(rng.uniform(0, math.pi, n)).requires_grad_()
    value = ShiftExpval.apply(theta)
    (g_shift,) = torch.autograd.grad(value, theta)
    (g_auto,) = torch.autograd.grad(expval(theta), theta)
    res = {"value": value.detach(), "g_shift": g_shift, "g_auto": g_auto,
           "same": torch.allclose(g_shift, g_auto), "grad_fn": [type(value.grad_fn).__name__]}

    class Hybrid(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = torch.nn.Linear(3, n).double()
            self.post = torch.nn.Linear(1, 1).double()

        def forward(self, x):
            angles = torch.pi * torch.tanh(self.pre(x))
            angles.register_hook(lambda g: g * 0.5)
            q = torch.stack([ShiftExpval.apply(a) for a in angles])
            return self.post(q.unsqueeze(-1)).squeeze(-1)

    model = Hybrid()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * 0.5))
    x = torch.from_numpy(rng.standard_normal((4, 3)))
    y = torch.from_numpy(rng.standard_normal(4))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"] = losses
    res["pre_grad"] = model.pre.weight.grad
    res["calls"] = calls
    return res


def shots_program(torch):
    """Finite-shot estimation: probabilities from the diagonal of a noisy rho, samples drawn by
    multinomial under manual_seed (reproducible, in range, counts summing to the shots) and
    bit strings decoded with bitwise shifts; values compared only where they do not depend on
    the generator (the exact expectation, shapes, dtypes, reproducibility)."""
    n, shots = 2, 500
    rho = torch.zeros((2,) * 2 * n, dtype=torch.complex128)
    rho[(0,) * 2 * n] = 1
    h = torch.tensor([[1, 1], [1, -1]], dtype=torch.complex128) / math.sqrt(2)
    rho = _apply_unitary(torch, rho, h, [0], n)
    rho = _apply_unitary(torch, rho, torch.tensor(_CNOT, dtype=torch.complex128), [0, 1], n)
    rho = _apply_channel(torch, rho, _depolarizing(torch, torch.tensor(0.2, dtype=torch.float64)),
                         1, n)
    probs = torch.diagonal(rho.reshape(4, 4)).real
    torch.manual_seed(0)
    s1 = torch.multinomial(probs, shots, replacement=True)
    torch.manual_seed(0)
    s2 = torch.multinomial(probs, shots, replacement=True)
    bits = (s1.unsqueeze(-1) >> torch.arange(n - 1, -1, -1)) & 1
    counts = torch.bincount(s1, minlength=4)
    z0 = 1 - 2 * bits[:, 0].double()
    exact = (probs * torch.tensor([1., 1, -1, -1], dtype=torch.float64)).sum()
    return {"probs": probs, "exact_z0": exact, "repro": torch.equal(s1, s2),
            "in_range": bool(((s1 >= 0) & (s1 < 4)).all()), "count_sum": int(counts.sum()),
            "shapes": [*bits.shape, *counts.shape],
            "dtypes": [str(t.dtype).split(".")[-1] for t in (s1, bits, counts, z0)],
            "z0_close": abs(z0.mean().item() - exact.item()) < 0.2}


PROGRAMS = [noisy_circuit_program, parameter_shift_program, shots_program]
test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
