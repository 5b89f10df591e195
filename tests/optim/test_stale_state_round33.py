"""Steps on optimizer state kept from before a parameter changed shape (``p.data = ...``):
ASGD and Rprop raise PyTorch's RuntimeError (not NumPy's ValueError) after writing what
PyTorch's ops write before the failing one; SGD's multi-tensor step fails at the same list op
as PyTorch's, with its buffers scaled or updated as far as that op got (round 33)."""

import numpy as np
import pytest

import ember

MISMATCH = r"^The size of tensor a \({}\) must match the size of tensor b \({}\) at " \
           r"non-singleton dimension 0$"
OUTPUT = r"^output with shape \[{}\] doesn't match the broadcast shape \[{}\]$"


def _stepped(opt_class, old, new, count=1, stale=(0,), seed=0, **options):
    """(params, optimizer, copies of each state before the failing step, new gradients)."""
    rng = np.random.default_rng(seed)
    params = [ember.nn.Parameter(ember.tensor(rng.standard_normal(old))) for _ in range(count)]
    opt = opt_class(params, **options)
    for p in params:
        p.grad = ember.tensor(rng.standard_normal(old))
    opt.step()
    for i in stale:
        params[i].data = ember.tensor(rng.standard_normal(new))
    grads = []
    for p in params:
        grads.append(rng.standard_normal(tuple(p.shape)))
        p.grad = ember.tensor(grads[-1])
    before = [{k: v.numpy().copy() for k, v in opt.state[p].items()} for p in params]
    return params, opt, before, grads


# ----- ASGD -------------------------------------------------------------------------------

@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("old, new, match", [
    ((3,), (5,), None), ((3,), (2, 3), OUTPUT.format("3", "2, 3")),
    ((1,), (3,), OUTPUT.format("1", "3"))])
def test_asgd_raises_after_stepping_the_parameter(foreach, old, new, match):
    if match is None:       # ax.copy_(param) vs the multi-tensor param.sub(ax)
        match = MISMATCH.format(*("5", "3") if foreach else ("3", "5"))
    (p,), opt, (before,), (g,) = _stepped(ember.optim.ASGD, old, new, foreach=foreach)
    x = p.detach().numpy().copy()
    with pytest.raises(RuntimeError, match=match):
        opt.step()
    state = opt.state[p]
    eta, lambd = float(before["eta"]), 1e-4
    np.testing.assert_allclose(p.detach().numpy(), x * (1 - lambd * eta) - eta * g, rtol=1e-12)
    assert float(state["step"]) == 2.0
    for key in ("ax", "eta", "mu"):
        np.testing.assert_array_equal(state[key].numpy(), before[key])


def test_asgd_broadcastable_parameter_steps_as_in_pytorch():
    (p,), opt, (before,), _ = _stepped(ember.optim.ASGD, (3,), (1,))
    opt.step()                                      # ax.copy_(param) broadcasts
    np.testing.assert_array_equal(opt.state[p]["ax"].numpy(), np.repeat(p.detach().numpy(), 3))


# ----- Rprop ------------------------------------------------------------------------------

@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("old, new, error, match", [
    ((3,), (5,), RuntimeError, MISMATCH.format("5", "3")),
    ((3,), (2, 3), RuntimeError, OUTPUT.format("3", "2, 3")),
    ((1,), (3,), RuntimeError, OUTPUT.format("1", "3"))])
def test_rprop_raises_before_writing_state(foreach, old, new, error, match):
    (p,), opt, (before,), _ = _stepped(ember.optim.Rprop, old, new, foreach=foreach)
    x = p.detach().numpy().copy()
    with pytest.raises(error, match=match):
        opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), x)
    for key in ("prev", "step_size"):
        np.testing.assert_array_equal(opt.state[p][key].numpy(), before[key])
    assert float(opt.state[p]["step"]) == 2.0


def _rprop_sizes(before, g):
    sign = np.sign(g * before["prev"])
    factor = np.where(sign > 0, 1.2, np.where(sign < 0, 0.5, 1.0))
    return sign, np.clip(before["step_size"] * factor, 1e-6, 50)


def test_rprop_smaller_parameter_single_tensor_is_pytorchs_mask_error():
    """grad[sign.eq(etaminus)] = 0 with a sign of the state's shape: after the step sizes."""
    (p,), opt, (before,), (g,) = _stepped(ember.optim.Rprop, (3,), (1,), seed=0)
    x = p.detach().numpy().copy()
    with pytest.raises(IndexError, match=r"^The shape of the mask \[3\] at index 0 does not "
                                         r"match the shape of the indexed tensor \[1\] at "
                                         r"index 0$"):
        opt.step()
    _, sizes = _rprop_sizes(before, g)
    np.testing.assert_allclose(opt.state[p]["step_size"].numpy(), sizes, rtol=1e-12)
    np.testing.assert_array_equal(opt.state[p]["prev"].numpy(), before["prev"])
    np.testing.assert_array_equal(p.detach().numpy(), x)


@pytest.mark.parametrize("name, new, error, match", [
    ("Rprop", (5,), RuntimeError, MISMATCH.format("5", "3")),
    ("Rprop", (1,), IndexError, r"^The shape of the mask \[3\] at index 0 does not match"),
    ("Rprop", (2, 3), RuntimeError, OUTPUT.format("3", "2, 3")),
    ("ASGD", (5,), RuntimeError, MISMATCH.format("3", "5")),     # ax.copy_(param)
    ("ASGD", (2, 3), RuntimeError, OUTPUT.format("3", "2, 3"))])
def test_differentiable_steps_raise_pytorchs_error(name, new, error, match):
    """``differentiable=True`` (a parameter that is not a leaf) fails as the plain step."""
    rng = np.random.default_rng(0)
    p = ember.tensor(rng.standard_normal(3), requires_grad=True) * 1
    opt = getattr(ember.optim, name)([p], differentiable=True)
    p.grad = ember.tensor(rng.standard_normal(3))
    opt.step()
    p.data = ember.tensor(rng.standard_normal(new))
    p.grad = ember.tensor(rng.standard_normal(new))
    with pytest.raises(error, match=match):
        opt.step()


def test_rprop_smaller_parameter_multi_tensor_fails_at_the_parameter():
    """The multi-tensor step copies the gradient into prev first: prev and the step sizes are
    written, the parameter is not."""
    (p,), opt, (before,), (g,) = _stepped(ember.optim.Rprop, (3,), (1,), seed=0, foreach=True)
    x = p.detach().numpy().copy()
    with pytest.raises(RuntimeError, match=OUTPUT.format("1", "3")):
        opt.step()
    sign, sizes = _rprop_sizes(before, g)
    assert (sign < 0).any() and (sign > 0).any()        # both branches are exercised
    np.testing.assert_allclose(opt.state[p]["step_size"].numpy(), sizes, rtol=1e-12)
    np.testing.assert_array_equal(opt.state[p]["prev"].numpy(),
                                  np.where(sign < 0, 0, np.broadcast_to(g, (3,))))
    np.testing.assert_array_equal(p.detach().numpy(), x)


# ----- SGD --------------------------------------------------------------------------------

def test_sgd_single_tensor_names_the_buffer_as_the_output():
    (p,), opt, _, _ = _stepped(ember.optim.SGD, (3,), (2, 3), lr=0.1, momentum=0.9)
    with pytest.raises(RuntimeError, match=OUTPUT.format("3", "2, 3")):
        opt.step()


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_foreach_scales_every_buffer_then_adds_up_to_the_stale_one(nesterov):
    params, opt, before, grads = _stepped(ember.optim.SGD, (3,), (5,), count=3, stale=(1,),
                                          lr=0.1, momentum=0.9, nesterov=nesterov, foreach=True)
    values = [p.detach().numpy().copy() for p in params]
    with pytest.raises(RuntimeError, match=MISMATCH.format("3", "5")):
        opt.step()
    bufs = [opt.state[p]["momentum_buffer"].numpy() for p in params]
    np.testing.assert_allclose(bufs[0], 0.9 * before[0]["momentum_buffer"] + grads[0],
                               rtol=1e-12)
    for i in (1, 2):        # _foreach_mul_ reached them, _foreach_add_ stopped at 1
        np.testing.assert_allclose(bufs[i], 0.9 * before[i]["momentum_buffer"], rtol=1e-12)
    for p, x in zip(params, values):
        np.testing.assert_array_equal(p.detach().numpy(), x)


def test_sgd_foreach_broadcastable_buffer_fails_at_the_parameter():
    params, opt, before, grads = _stepped(ember.optim.SGD, (3,), (1,), count=3, stale=(1,),
                                          lr=0.1, momentum=0.9, foreach=True)
    values = [p.detach().numpy().copy() for p in params]
    with pytest.raises(RuntimeError, match=OUTPUT.format("1", "3")):
        opt.step()
    bufs = [opt.state[p]["momentum_buffer"].numpy() for p in params]
    for i in range(3):
        np.testing.assert_allclose(bufs[i], 0.9 * before[i]["momentum_buffer"] + grads[i],
                                   rtol=1e-12)
    np.testing.assert_allclose(params[0].detach().numpy(), values[0] - 0.1 * bufs[0],
                               rtol=1e-12)
    for i in (1, 2):
        np.testing.assert_array_equal(params[i].detach().numpy(), values[i])


def test_sgd_foreach_nesterov_leaves_the_gradient_alone():
    """PyTorch's multi-tensor Nesterov step adds the momentum into p.grad itself (its other
    steps and optimizers never write a gradient: a PyTorch bug, not copied)."""
    p = ember.nn.Parameter(ember.ones(3, dtype=ember.float64))
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, foreach=True)
    grad = ember.full((3,), 2.0, dtype=ember.float64)
    p.grad = grad
    opt.step()
    assert p.grad is grad and grad.tolist() == [2.0] * 3
    np.testing.assert_allclose(p.detach().numpy(), 1 - 0.1 * 3.8, rtol=1e-15)  # g + 0.9 * g


def test_sgd_foreach_nesterov_steps_with_an_expanded_gradient():
    """Nothing writes into the gradient, so one that repeats memory steps as in the
    single-tensor step (PyTorch's multi-tensor step refuses it: see above)."""
    p = ember.nn.Parameter(ember.ones(3, 4))
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, foreach=True)
    p.grad = ember.arange(4.0).expand(3, 4)
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), 1 - 0.1 * 1.9 * np.arange(4.0)[None].repeat(
        3, 0), rtol=1e-6)
    np.testing.assert_array_equal(p.grad.numpy(), np.arange(4.0)[None].repeat(3, 0))
    np.testing.assert_array_equal(opt.state[p]["momentum_buffer"].numpy(),
                                  np.arange(4.0)[None].repeat(3, 0))
