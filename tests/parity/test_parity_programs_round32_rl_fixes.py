"""What the RL programs of round 32 (test_parity_programs_round32_rl*.py: MuZero, PETS,
option-critic, RND, ICM, GAIL/AIRL, HER, AWR/AWAC, TD-MPC2, Gumbel MuZero, DIAYN/APT) found,
each pinned against PyTorch. GAIL's ``mixup_data.requires_grad = True`` written on a computed
tensor (a non-leaf, or a view of a leaf that requires grad) was accepted as a no-op; PyTorch's
attribute setter refuses any change on a non-leaf ("you can only change requires_grad flags of
leaf variables."), while ``requires_grad_(True)`` stays a no-op there."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(lib, make, how, flag):
    t = make(lib)
    try:
        if how == "attr":
            t.requires_grad = flag
        else:
            t.requires_grad_(flag)
    except RuntimeError as e:
        return "RuntimeError", str(e)
    return t.requires_grad, t.is_leaf, t.grad_fn is None


_MAKERS = {
    "computed": lambda lib: lib.ones(3, requires_grad=True) * 2,
    "computed_no_grad": lambda lib: lib.ones(3) * 2,
    "view_of_leaf": lambda lib: lib.ones(3, requires_grad=True)[1:],
    "view_made_in_no_grad": lambda lib: _no_grad_view(lib),
    "leaf": lambda lib: lib.ones(3),
    "detached": lambda lib: (lib.ones(3, requires_grad=True) * 2).detach(),
}


def _no_grad_view(lib):
    with lib.no_grad():
        return lib.ones(3, requires_grad=True)[1:]


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("how", ["attr", "method"])
@pytest.mark.parametrize("make", _MAKERS)
def test_requires_grad_setter_on_non_leaves(make, how, flag):
    assert _outcome(ember, _MAKERS[make], how, flag) == _outcome(torch, _MAKERS[make], how, flag)


def test_gail_gradient_penalty_on_a_computed_mixup():
    """ikostrikov's compute_grad_pen when the policy batch still carries a graph: the
    assignment raises; detaching first (as the fix in the wild does) works."""
    def run(lib):
        expert = lib.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3) / 7)
        policy = lib.from_numpy(np.ones((2, 3), np.float32)).requires_grad_() * 0.5
        alpha = lib.tensor([[0.25], [0.75]]).expand_as(expert)
        mixup = alpha * expert + (1 - alpha) * policy
        try:
            mixup.requires_grad = True
        except RuntimeError as e:
            first = str(e)
        mixup = mixup.detach()
        mixup.requires_grad = True
        disc = lib.tanh(mixup @ lib.tensor([[0.3], [-0.2], [0.5]]))
        grad = lib.autograd.grad(disc, mixup, lib.ones_like(disc), create_graph=True)[0]
        return first, (grad.norm(2, dim=1) - 1).pow(2).mean().item()
    assert run(ember) == pytest.approx(run(torch))


def test_requires_grad_true_on_a_non_leaf_without_torch():
    y = ember.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"^you can only change requires_grad flags of leaf "
                                           r"variables\.$"):
        y.requires_grad = True
    assert y.requires_grad_(True) is y and not y.is_leaf
