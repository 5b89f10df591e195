"""Complex tensors against PyTorch: gradients of complex layers (conjugate Wirtinger
convention), casts and pointwise edge values."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _pair(shape, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * 0.5
    return ember.tensor(a), torch.tensor(a)


def _close(a, b):
    """Assert ember's ``a`` matches torch's ``b`` in shape and values."""
    assert_close(a, b, 1e-7, 1e-9)


@pytest.mark.parametrize("name", ["Linear", "RNN", "GRU", "LSTM"])
def test_complex_layer_gradients(name):
    em = getattr(ember.nn, name)(3, 2, dtype=ember.complex128)
    tm = getattr(torch.nn, name)(3, 2, dtype=torch.complex128)
    for i, (p, q) in enumerate(zip(em.parameters(), tm.parameters())):
        e, t = _pair(tuple(p.shape), i)
        with ember.no_grad():
            p.copy_(e)
        with torch.no_grad():
            q.copy_(t)
    ex, tx = _pair((4, 3), 99)
    eo, to = em(ex), tm(tx)
    eo, to = (eo[0], to[0]) if isinstance(eo, tuple) else (eo, to)
    eo.abs().pow(2).sum().backward()
    to.abs().pow(2).sum().backward()
    for p, q in zip(em.parameters(), tm.parameters()):
        _close(p.grad, q.grad)


def test_complex_casts_and_edges():
    inf = float("inf")
    values = [0j, 1j, complex(0, float("nan")), complex(-2, -0.0), complex(2, inf)]
    e, t = ember.tensor(values), torch.tensor(values)
    assert e.bool().tolist() == t.bool().tolist()
    np.testing.assert_array_equal(np.array(e.sgn()), t.sgn().numpy())
    z = [-1 + 0j, -4 + 0j, 3 - 4j]
    assert ember.tensor(z).pow(0.5).tolist() == torch.tensor(z).pow(0.5).tolist()
