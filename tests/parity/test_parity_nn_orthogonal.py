"""nn.utils.parametrizations.orthogonal against PyTorch: from the same initial weight, the
same parametrized weight and the same gradient for the original, for every map."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _build(lib, weight, **kwargs):
    dtype = lib.complex128 if np.iscomplexobj(weight) else lib.float64
    m = lib.nn.Linear(weight.shape[1], weight.shape[0], dtype=dtype)
    with lib.no_grad():
        m.weight.copy_(lib.tensor(weight))
        m.bias.fill_(0.5)
    return lib.nn.utils.parametrizations.orthogonal(m, **kwargs)


def _array(t):
    return np.asarray(t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach())


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("use_trivialization", [True, False])
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder", None])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_orthogonal_matches_torch(shape, orthogonal_map, use_trivialization, complex_):
    if complex_ and orthogonal_map == "householder":
        pytest.skip("real only (both raise; see tests/nn/test_orthogonal.py)")
    rng = np.random.default_rng(sum(shape))
    weight = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
    kwargs = dict(orthogonal_map=orthogonal_map, use_trivialization=use_trivialization)
    t, e = _build(torch, weight, **kwargs), _build(ember, weight, **kwargs)
    np.testing.assert_allclose(_array(e.weight), _array(t.weight), atol=1e-12)
    if use_trivialization:
        # a non-square weight's base is completed with random columns: take torch's
        e.parametrizations.weight[0].base = ember.tensor(
            _array(t.parametrizations.weight[0].base))
    np.testing.assert_allclose(_array(e.parametrizations.weight.original),
                               _array(t.parametrizations.weight.original), atol=1e-12)
    x = rng.standard_normal((2, shape[1]))
    g = rng.standard_normal((2, shape[0]))
    for lib, m in ((torch, t), (ember, e)):
        out = m(lib.tensor(x, dtype=m.bias.dtype))
        (out.real * lib.tensor(g)).sum().backward()
    np.testing.assert_allclose(_array(e.parametrizations.weight.original.grad),
                               _array(t.parametrizations.weight.original.grad), atol=1e-12)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_training_step_matches_torch(orthogonal_map):
    """A few SGD steps on the original: the weights stay together."""
    weight = np.random.default_rng(3).standard_normal((4, 4))
    t, e = (_build(lib, weight, orthogonal_map=orthogonal_map) for lib in (torch, ember))
    x = np.random.default_rng(4).standard_normal((8, 4))
    for lib, m in ((torch, t), (ember, e)):
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(5):
            opt.zero_grad()
            m(lib.tensor(x)).sin().sum().backward()
            opt.step()
    np.testing.assert_allclose(_array(e.weight), _array(t.weight), atol=1e-10)
