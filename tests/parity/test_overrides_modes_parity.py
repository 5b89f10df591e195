"""ember.overrides.TorchFunctionMode against torch.overrides.TorchFunctionMode: a logging mode
sees the same functions, by name and in the same order, for the same small programs.
Skipped when PyTorch is not installed."""

import numpy as np
import pytest

import ember
import ember.overrides

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

from torch import overrides as _torch_overrides  # noqa: E402,F401  (torch.overrides)


def _log(lib, program):
    """The names of the functions a logging mode of ``lib`` sees while the steps
    ``program(lib)`` returns run (its setup runs before the mode), and the values of the
    tensors the steps return (a callable among them: called after the mode)."""
    seen = []

    class Log(lib.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return func(*args, **(kwargs or {}))

    steps = program(lib)
    with Log():
        result = steps()
    return seen, [np.asarray((t() if callable(t) else t).detach().tolist()) for t in result]


def _arithmetic(lib):
    x, y = lib.ones(2, 3), lib.full((2, 3), 2.0)
    return lambda: [x.add(y), x + y, 2 - x, lib.add(x, y, alpha=2), 3 * x, x / 2, x.sum(1),
                    -x, x ** 2, 2 ** x, x @ y.t(), x == y, x < 1, x.mean(), x.view(-1),
                    x.reshape(3, 2)]


def _training_step(lib):
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
        lin.bias.zero_()

    def steps():
        loss = lib.nn.functional.mse_loss(lin(lib.ones(4, 3)), lib.zeros(4, 2))
        loss.backward()
        return [loss, lambda: lin.weight.grad, lambda: lin.bias.grad]
    return steps


def _classification(lib):
    logits = lib.tensor([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], requires_grad=True)
    target = lib.tensor([1, 2])

    def steps():
        loss = lib.nn.functional.cross_entropy(logits, target)
        (grad,) = lib.autograd.grad(loss * 2, [logits])
        return [loss, grad, lib.nn.functional.log_softmax(logits, 1)]
    return steps


def _factories(lib):
    return lambda: [lib.zeros_like(lib.ones(2)), lib.tensor([1.0, 2.0]), lib.arange(3),
                    lib.full((2,), 1.5), lib.eye(2), lib.empty(2).fill_(3.0)]


def _in_place_and_integers(lib):
    x, i = lib.ones(3), lib.tensor([6, 3, 5])

    def steps():
        x.add_(1)
        x.mul_(2)
        j = i.clone()
        j &= 3
        return [x, j, i // 2, i % 4, i & 1, ~i]
    return steps


def _tensor_methods(lib):
    x = lib.tensor([[1.0, -2.0], [3.0, 0.5]])
    return lambda: [
        lib.relu(x), lib.softmax(x, 1), lib.cat([x, x]), lib.stack([x, x]), x.t(),
        x.unsqueeze(0).squeeze(0), x.transpose(0, 1).contiguous(), x.max(), x.argmax(),
        lib.where(x > 0, x, -x), x.float(), x.to(lib.float64), x[0], x.exp().log(),
        lib.tensor(x.size()), lib.tensor(x.dim()), lib.tensor(x[1, 0].item()),
        lib.tensor(len(x)), x.detach(), lib.tensor(x.tolist())]


def _properties(lib):
    x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x * x).sum().backward()

    def steps():
        y = x.detach()
        y.requires_grad = True
        return [x.T, x.mT, x.grad, x.real, lib.tensor(list(x.shape)), lib.tensor(x.ndim),
                lib.tensor(x.is_leaf), lib.tensor(y.requires_grad), x.data]
    return steps


PROGRAMS = [_arithmetic, _training_step, _classification, _factories,
            _in_place_and_integers, _tensor_methods, _properties]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_a_logging_mode_sees_the_same_functions(program):
    theirs, their_values = _log(torch, program)
    ours, our_values = _log(ember, program)
    assert ours == theirs
    assert len(ours) >= 4
    for a, b in zip(our_values, their_values):
        assert a.shape == b.shape and np.allclose(a, b, rtol=1e-5)


def test_backward_hides_the_gradient_ops():
    theirs, _ = _log(torch, _training_step)
    ours, _ = _log(ember, _training_step)
    assert ours[-1] == theirs[-1] == "backward"
    assert ours == ["ones", "linear", "zeros", "mse_loss", "backward"]
