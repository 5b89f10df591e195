"""What the quantum and tensor-network programs of round 33
(test_parity_programs_round33_quantum*.py: statevector VQE/QAOA, matrix_exp evolution, density
matrices and Kraus channels, MPS/TEBD/DMRG, TT/CP/Tucker, TT layers, quantum natural gradient)
found, each pinned against PyTorch. ``torch.lobpcg`` on a matrix that requires grad named its
node ``_EigenpairsBackward``; PyTorch's is ``LOBPCGAutogradFunctionBackward`` (the name printed
in ``grad_fn=<...>`` and compared by programs that list node names)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _spd(m, seed=0):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((m, m)))
    return (q * np.arange(1.0, m + 1) ** 1.5) @ q.T


def _lobpcg_nodes(lib, largest):
    A = lib.from_numpy(_spd(9)).requires_grad_()
    X0 = lib.from_numpy(np.random.default_rng(1).standard_normal((9, 2)))
    E, X = lib.lobpcg(A, k=2, X=X0, largest=largest)
    names = [type(E.grad_fn).__name__, type(X.grad_fn).__name__,
             type(E.grad_fn.next_functions[0][0]).__name__]
    E.sum().backward()
    return names, repr(E).split("grad_fn=")[1], A.grad.numpy()


@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_node_is_named_as_pytorch_names_it(largest):
    ours, theirs = _lobpcg_nodes(ember, largest), _lobpcg_nodes(torch, largest)
    assert ours[0] == theirs[0] == ["LOBPCGAutogradFunctionBackward"] * 2 + ["DivBackward0"]
    assert ours[1] == theirs[1] == "<LOBPCGAutogradFunctionBackward>)"
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6, atol=1e-8)


def test_lobpcg_without_grad_records_no_node():
    for lib in (ember, torch):
        E, X = lib.lobpcg(lib.from_numpy(_spd(9)), k=1)
        assert E.grad_fn is None and X.grad_fn is None and not E.requires_grad
