"""What the probabilistic programs of round 29 (test_parity_programs_round29_ppl.py) found,
each pinned against PyTorch: a user constraint's repr drops the first letter of its class name
as torch's does (torch's constraints are all ``_Name``), and the private helpers pyro-style code
imports from torch.distributions live where torch keeps them: ``utils._sum_rightmost``,
``kl._batch_trace_XXT`` and ``gamma._standard_gamma``."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _constraint_reprs(lib):
    dist = lib.distributions

    class Pos2(dist.constraints.Constraint):
        def check(self, value):
            return value > 2

    class _Unit(dist.constraints.Constraint):
        def check(self, value):
            return value.abs() <= 1

    class __Odd(dist.constraints.Constraint):
        def check(self, value):
            return value % 2 == 1

    return [repr(Pos2()), str(_Unit()), repr(__Odd()), repr(dist.constraints.real),
            repr(dist.constraints.simplex), repr(dist.constraints.independent(Pos2(), 1))]


def test_user_constraint_repr_like_torch():
    assert _constraint_reprs(ember) == _constraint_reprs(torch)
    assert _constraint_reprs(torch)[0] == "os2()"


@pytest.mark.parametrize("shape,dim", [((2, 3, 4), 2), ((2, 3), 0), ((5,), 1), ((2, 1, 3), 3)])
def test_sum_rightmost_from_utils_like_torch(shape, dim):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ours = ember.distributions.utils._sum_rightmost(ember.from_numpy(x), dim)
    theirs = torch.distributions.utils._sum_rightmost(torch.from_numpy(x), dim)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6)
    assert ember.distributions.transforms._sum_rightmost is \
        ember.distributions.utils._sum_rightmost


def test_sum_rightmost_of_a_number_like_torch():
    assert ember.distributions.utils._sum_rightmost(2.5, 0) == \
        torch.distributions.utils._sum_rightmost(2.5, 0) == 2.5


@pytest.mark.parametrize("shape", [(3, 2), (4, 2, 3), (2, 2, 1, 5)])
def test_batch_trace_xxt_like_torch(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    ours = ember.distributions.kl._batch_trace_XXT(ember.from_numpy(x).requires_grad_())
    theirs = torch.distributions.kl._batch_trace_XXT(torch.from_numpy(x).requires_grad_())
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(ours.detach().numpy(),
                               (x.astype(np.float64) ** 2).sum((-2, -1)), rtol=1e-5)


def test_gamma_module_standard_gamma_like_torch():
    conc = np.array([0.5, 2.0, 7.0], dtype=np.float32)
    for lib in (ember, torch):
        c = lib.from_numpy(conc).requires_grad_()
        lib.manual_seed(0)
        draws = lib.distributions.gamma._standard_gamma(c.expand(2000, 3))
        assert tuple(draws.shape) == (2000, 3) and draws.requires_grad
        assert bool((draws > 0).all())
        # E[x] = concentration for Gamma(c, 1): within 5 standard errors
        np.testing.assert_allclose(draws.detach().mean(0).numpy(), conc,
                                   atol=float(5 * np.sqrt(conc.max() / 2000)))
