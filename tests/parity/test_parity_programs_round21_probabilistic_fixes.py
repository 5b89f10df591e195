"""What the probabilistic programs of round 21 (test_parity_programs_round21_probabilistic.py)
found, each behaviour checked against PyTorch on its own: the verdicts distributions validate
with under vmap, Bernoulli's tails, in-place draws under vmap's randomness, and the exact
implicit Gamma gradient."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same_error, error, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _verdicts(lib):
    x = lib.tensor([[True, False], [True, True]])
    vmap, empty = lib.func.vmap, lib.ones(0, dtype=lib.bool)
    return [lib._is_all_true(x), lib._is_any_true(x), x._is_all_true(), (~x)._is_any_true(),
            lib._is_all_true(empty), lib._is_any_true(empty), lib._is_all_true(lib.tensor(True)),
            vmap(lib._is_all_true)(x), vmap(lib._is_any_true, in_dims=1)(~x),
            vmap(lib._is_all_true, out_dims=None)(x),
            vmap(vmap(lib._is_all_true))(lib.ones(2, 3, 2, dtype=lib.bool)),
            vmap(lambda row: lib._is_all_true(row) & row)(x)]


def test_verdicts_match_torch_and_cover_the_vmap_batch():
    """torch._is_all_true/_is_any_true: a 0-dim bool; under vmap one unbatched answer for the
    whole batch (what lets distributions validate inside vmap)."""
    for ours, theirs in zip(_verdicts(ember), _verdicts(torch), strict=True):
        assert _name(ours.dtype) == _name(theirs.dtype) == "bool"
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("name", ["_is_all_true", "_is_any_true"])
def test_verdicts_refuse_non_bool_tensors_as_torch(name):
    assert_same_error(lambda lib, x: getattr(lib, name)(x), lambda lib: lib.tensor([1.0, 0.0]))


def _validated_in_vmap(lib):
    D = lib.distributions
    scale = lib.tensor([[0.5, 2.0], [1.0, 1.5], [3.0, 0.2]])
    value = lib.tensor([[0.3, -1.0], [2.0, 0.1], [-0.4, 0.0]])

    def log_lik(s, v):
        normal = D.Independent(D.Normal(lib.zeros(2), s), 1)
        return normal.log_prob(v) + D.Gamma(s, 1.0).log_prob(s).sum() + D.kl_divergence(
            normal, D.Independent(D.Normal(lib.ones(2), s * 2), 1))
    return [lib.func.vmap(log_lik)(scale, value),
            lib.func.vmap(lib.func.grad(log_lik))(scale, value),
            lib.func.vmap(lib.func.vmap(lambda s: D.Normal(0.0, s).log_prob(s)))(scale)]


def test_distributions_validate_their_arguments_inside_vmap():
    for ours, theirs in zip(_validated_in_vmap(ember), _validated_in_vmap(torch), strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["parameter", "parameter_0d", "value"])
def test_invalid_arguments_inside_vmap_raise_as_torch(case):
    def call(lib, x):
        D = lib.distributions
        fn = {"parameter": lambda s: D.Normal(lib.zeros(2), s).log_prob(s),
              "parameter_0d": lambda s: D.Normal(0.0, s).log_prob(s),
              "value": lambda v: D.Gamma(2.0, 1.0).log_prob(v)}[case]
        return lib.func.vmap(fn)(x if case != "parameter_0d" else x[:, 0])

    def first_words(text):          # ember names the batched tensor's class (see the report)
        return text.split(" (")[0]

    ours = error(call, ember, ember.tensor([[1.0, 2.0], [-1.0, 1.0]]))
    theirs = error(call, torch, torch.tensor([[1.0, 2.0], [-1.0, 1.0]]))
    assert theirs is not None
    assert (ours[0], first_words(ours[1])) == (theirs[0], first_words(theirs[1]))


def test_standard_gamma_grad_is_exact():
    """ember's implicit Gamma gradient against finite differences of the quantile function
    (PyTorch's approximation is within ~1e-3 of these, see the transforms program)."""
    from scipy.special import gammainc, gammaincinv
    alpha = np.array([0.5, 1.0, 2.0, 3.0, 5.0, 9.0, 20.0])
    x = np.array([0.3, 1.5, 3.0, 0.8, 7.0, 1.5, 12.0])
    step = 1e-6
    u = gammainc(alpha, x)
    expected = (gammaincinv(alpha + step, u) - gammaincinv(alpha - step, u)) / (2 * step)
    got = ember._standard_gamma_grad(ember.tensor(alpha), ember.tensor(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-7)


def _bernoulli_tails(lib):
    D = lib.distributions
    logits = lib.tensor([-200.0, -30.0, 0.0, 2.0, 20.0, 30.0, 50.0])
    value = lib.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    probs = lib.tensor([1e-8, 0.5, 1 - 1e-7, 0.0, 1.0])
    return [D.Bernoulli(logits=logits).log_prob(value), D.Bernoulli(logits=logits).entropy(),
            D.Bernoulli(probs=probs).log_prob(lib.tensor([1.0, 0.0, 1.0, 0.0, 1.0])),
            D.Bernoulli(probs=probs).entropy()]


def test_bernoulli_log_prob_and_entropy_keep_their_tails():
    """Bernoulli.log_prob is -BCE-with-logits and entropy BCE(logits, probs), as PyTorch's:
    confident predictions give -2e-9, not a cancelled 0, and signed zeros match."""
    for ours, theirs in zip(_bernoulli_tails(ember), _bernoulli_tails(torch), strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=2e-7, atol=0)
        assert np.array_equal(np.signbit(ours.numpy()), np.signbit(theirs.numpy()))


_INPLACE_DRAWS = {
    "normal_": lambda lib, x: lib.empty(2).normal_() + x,
    "uniform_": lambda lib, x: lib.empty(2).uniform_() + x,
    "Normal.rsample": lambda lib, x: lib.distributions.Normal(x, 1.0).rsample(),
    "MultivariateNormal.rsample": lambda lib, x: lib.distributions.MultivariateNormal(
        x, lib.eye(2)).rsample(),
    "LowRankMultivariateNormal.sample": lambda lib, x: lib.distributions.
    LowRankMultivariateNormal(x, lib.ones(2, 1), lib.ones(2)).sample(),
    "StudentT.rsample": lambda lib, x: lib.distributions.StudentT(3.0, x, 1.0).rsample(),
    "Geometric.sample": lambda lib, x: lib.distributions.Geometric(logits=x).sample(),
}


@pytest.mark.parametrize("inner", ["different", "same", "error"])
@pytest.mark.parametrize("outer", ["different", "same", "error", None])
@pytest.mark.parametrize("draw", sorted(_INPLACE_DRAWS))
def test_inplace_draws_on_unbatched_tensors_under_vmap_randomness(draw, outer, inner):
    """PyTorch draws reparameterized noise in place into a new (unbatched) tensor: the
    innermost vmap that is not randomness="same" refuses it ("different": it would look like
    same randomness); "same" gives one draw for the whole batch."""
    def run(lib):
        fn = lib.func.vmap(lambda x: _INPLACE_DRAWS[draw](lib, x), randomness=inner)
        if outer is not None:
            fn = lib.func.vmap(fn, randomness=outer)
        x = lib.full((4, 3, 2) if outer else (3, 2), 0.3)
        out = fn(x).reshape(-1, 2)
        return [str(tuple(out.shape)), bool((out == out[0]).all())]

    assert outcome(run, ember) == outcome(run, torch)
