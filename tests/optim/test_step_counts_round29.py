"""Step counts that are not the optimizer's own 0-d tensor: A3C's shared optimizers set
``state["step"] = torch.zeros(1)`` (counted like the 0-d one) or a plain 0 (PyTorch's
"API has changed" error; ASGD counts on a copy and leaves the number)."""

import numpy as np
import pytest

import ember


def _adam_reference(x, steps, lr=0.01, b1=0.9, b2=0.999, eps=1e-8):
    m, v = np.zeros_like(x), np.zeros_like(x)
    for t in range(1, steps + 1):
        g = 2 * x
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x = x - lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
    return x


def test_one_element_step_count_matches_numpy_adam():
    start = np.array([0.3, -0.2, 0.9])
    p = ember.nn.Parameter(ember.tensor(start, dtype=ember.float64))
    opt = ember.optim.Adam([p], lr=0.01)
    state = opt.state[p]
    state["step"] = ember.zeros(1)
    state["exp_avg"] = p.data.new().resize_as_(p.data).zero_()
    state["exp_avg_sq"] = p.data.new().resize_as_(p.data).zero_()
    for _ in range(3):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), _adam_reference(start, 3), rtol=1e-12)
    assert state["step"].shape == (1,) and state["step"].tolist() == [3.0]


@pytest.mark.parametrize("name", ["Adam", "RMSprop", "Adagrad", "Rprop"])
def test_number_step_count_raises(name):
    p = ember.nn.Parameter(ember.ones(2))
    opt = getattr(ember.optim, name)([p], lr=0.01)
    (p * p).sum().backward()
    opt.step()
    opt.state[p]["step"] = 0
    with pytest.raises(RuntimeError, match=r"^API has changed, `state_steps` argument must "
                                           r"contain a list of singleton tensors$"):
        opt.step()


def test_asgd_number_step_count_is_left_alone():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.ASGD([p], lr=0.01)
    (p * p).sum().backward()
    opt.step()
    opt.state[p]["step"] = 1
    before = p.detach().clone()
    opt.step()
    assert opt.state[p]["step"] == 1
    assert not ember.equal(p.detach(), before)
