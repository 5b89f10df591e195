"""An optimizer step on state kept from before the parameter changed shape raises PyTorch's
RuntimeError (its broadcast messages), not NumPy's ValueError."""

import pytest

import ember


def _step_after_reshape(name, new_shape, **kwargs):
    p = ember.nn.Parameter(ember.ones(2, 2))
    opt = getattr(ember.optim, name)([p], lr=0.1, **kwargs)
    p.sum().backward()
    opt.step()
    p.data = ember.ones(new_shape)
    p.grad = None
    (p * 2).sum().backward()
    opt.step()


@pytest.mark.parametrize("name", ["Adam", "SGD", "RMSprop", "Adagrad"])
def test_unbroadcastable_state_names_both_sizes(name):
    kwargs = {"momentum": 0.9} if name == "SGD" else {}
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(2\) must match the size of "
                       r"tensor b \(3\) at non-singleton dimension 1$"):
        _step_after_reshape(name, (3, 3), **kwargs)


def test_broadcastable_state_cannot_write_the_smaller_parameter():
    with pytest.raises(RuntimeError, match=r"^output with shape \[2\] doesn't match the "
                       r"broadcast shape \[2, 2\]$"):
        _step_after_reshape("Adam", (2,))
