"""``_dirichlet_grad`` and the gradients of Dirichlet and Beta ``rsample`` against torch:
values (torch's kernel is an approximation good to about 1e-3), errors, the refused
backward, and the gradient of samples fed to torch's own ``_Dirichlet`` backward."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _both(*arrays, dtype="float64"):
    arrays = [np.asarray(a, dtype=dtype) for a in arrays]
    return [ember.tensor(a) for a in arrays], [torch.from_numpy(a.copy()) for a in arrays]


def test_known_point():
    mine, theirs = _both([0.2, 0.5], [1.5, 2.0], [3.5, 3.5], dtype="float32")
    assert_close(ember._dirichlet_grad(*mine), torch._dirichlet_grad(*theirs), rtol=1e-3,
                 atol=1e-6)


@pytest.mark.parametrize("low,high", [(0.1, 1.0), (0.5, 20.0), (2.0, 200.0)])
def test_random_points(low, high):
    rng = np.random.default_rng(int(low * 10 + high))
    alpha, beta = rng.uniform(low, high, (40, 3)), rng.uniform(low, high, (40, 3))
    x = np.clip(rng.beta(alpha, beta), 1e-6, 1 - 1e-6)
    mine, theirs = _both(x, alpha, alpha + beta)
    assert_close(ember._dirichlet_grad(*mine), torch._dirichlet_grad(*theirs), rtol=5e-3,
                 atol=1e-6)


def test_broadcast_shape_and_zero_below_support():
    mine, theirs = _both([[0.0, 0.3], [-1.0, 0.6]], [2.0, 1.2], [[5.0], [4.0]])
    ours, other = ember._dirichlet_grad(*mine), torch._dirichlet_grad(*theirs)
    assert ours.shape == other.shape
    assert_close(ours, other, rtol=5e-3, atol=1e-6)


@pytest.mark.parametrize("dtypes", [("float64", "float32", "float64"),
                                    ("float32", "float32", "float64"),
                                    ("float16", "float16", "float16"),
                                    ("int64", "int64", "int64")])
def test_errors(dtypes):
    mine = [ember.ones(2, dtype=getattr(ember, d)) for d in dtypes]
    theirs = [torch.ones(2, dtype=getattr(torch, d)) for d in dtypes]
    with pytest.raises(Exception) as expected:
        torch._dirichlet_grad(*theirs)
    with pytest.raises(type(expected.value)) as got:
        ember._dirichlet_grad(*mine)
    assert str(got.value) == str(expected.value)


def test_backward_refused_alike():
    mine, theirs = _both([0.2, 0.5], [1.5, 2.0], [3.5, 3.5])
    mine[1].requires_grad_()
    theirs[1].requires_grad_()
    ours, other = ember._dirichlet_grad(*mine), torch._dirichlet_grad(*theirs)
    assert ours.grad_fn.name() == other.grad_fn.name()
    with pytest.raises(RuntimeError) as expected:
        other.sum().backward()
    with pytest.raises(RuntimeError) as got:
        ours.sum().backward()
    assert str(got.value) == str(expected.value)


def test_dirichlet_rsample_gradient_as_torch_backward():
    from torch.distributions.dirichlet import _Dirichlet_backward
    ember.manual_seed(7)
    c = ember.tensor([[1.5, 2.0, 0.7], [0.3, 4.0, 9.0]], dtype=ember.float64,
                     requires_grad=True)
    w = np.array([1.0, -2.0, 0.5])
    x = ember.distributions.Dirichlet(c).rsample((6,))
    (x * ember.tensor(w)).sum().backward()
    xs = torch.from_numpy(x.detach().numpy().copy())
    ct = torch.from_numpy(c.detach().numpy().copy()).expand(6, 2, 3)
    expected = _Dirichlet_backward(xs, ct, torch.from_numpy(w).expand(6, 2, 3)).sum(0)
    assert type(x.grad_fn).__name__ == "_DirichletBackward"
    assert_close(c.grad, expected, rtol=5e-3, atol=1e-6)


def test_beta_rsample_gradient_as_torch_backward():
    from torch.distributions.dirichlet import _Dirichlet_backward
    ember.manual_seed(11)
    c1 = ember.tensor([1.5, 0.7, 6.0], dtype=ember.float64, requires_grad=True)
    c0 = ember.tensor([2.0, 3.0, 0.4], dtype=ember.float64, requires_grad=True)
    x = ember.distributions.Beta(c1, c0).rsample()
    x.sum().backward()
    xs = torch.from_numpy(x.detach().numpy().copy())
    both = torch.stack([torch.from_numpy(c1.detach().numpy().copy()),
                        torch.from_numpy(c0.detach().numpy().copy())], -1)
    grad_out = torch.tensor([1.0, 0.0]).double().expand(3, 2)
    expected = _Dirichlet_backward(torch.stack([xs, 1 - xs], -1), both, grad_out)
    assert_close(c1.grad, expected[:, 0], rtol=5e-3, atol=1e-6)
    assert_close(c0.grad, expected[:, 1], rtol=5e-3, atol=1e-6)


def test_rsample_gradient_is_once_differentiable():
    messages = []
    for lib in (ember, torch):
        c = lib.tensor([1.5, 2.0, 0.7], requires_grad=True)
        x = lib.distributions.Dirichlet(c).rsample((3,))
        (g,) = lib.autograd.grad((x * lib.tensor([1.0, -2.0, 0.5])).sum(), c, create_graph=True)
        assert g.grad_fn is None
        with pytest.raises(RuntimeError) as err:
            g.sum().backward()
        messages.append(str(err.value))
    assert messages[0] == messages[1]
