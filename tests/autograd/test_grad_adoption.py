"""A leaf's first gradient takes over the array the backward made when nothing else holds it
(PyTorch's AccumulateGrad steals it too), and is copied whenever anyone else could see it."""

import numpy as np
import pytest

import ember
import ember.autograd.graph as graph


@pytest.fixture
def copies(monkeypatch):
    """The number of gradient arrays accumulate copied."""
    made = []
    real = graph.layout_copy

    def counting(g, v):
        made.append(g)
        return real(g, v)
    monkeypatch.setattr(graph, "layout_copy", counting)
    return made


def test_a_gradient_nobody_else_holds_is_adopted(copies):
    w = ember.randn(4, 3, requires_grad=True)
    x = ember.randn(5, 4)
    (x @ w).sum().backward()
    assert copies == []
    np.testing.assert_allclose(w.grad.numpy(), np.repeat(x.numpy().sum(0)[:, None], 3, 1),
                               rtol=1e-6)


def test_a_gradient_a_hook_kept_is_copied(copies):
    w = ember.randn(4, 3, requires_grad=True)
    kept = []
    w.register_hook(kept.append)
    (ember.randn(5, 4) @ w).sum().backward()
    assert len(copies) == 1 and not np.shares_memory(kept[0].numpy(), w.grad.numpy())
    before = kept[0].numpy().copy()
    w.grad.zero_()
    np.testing.assert_array_equal(kept[0].numpy(), before)


def test_one_gradient_reaching_two_leaves_gives_each_its_own():
    a = ember.randn(3, requires_grad=True)
    b = ember.randn(3, requires_grad=True)
    (a + b).sum().backward()
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    a.grad.add_(1)
    assert b.grad.tolist() == [1.0, 1.0, 1.0]


def test_a_users_gradient_given_to_backward_is_copied():
    given = ember.ones(3)
    leaf = ember.randn(3, requires_grad=True)
    leaf.backward(given)
    leaf.grad.mul_(5)
    assert given.tolist() == [1.0, 1.0, 1.0]


def test_a_post_hook_on_the_accumulator_sees_a_gradient_apart_from_grad():
    w = ember.randn(2, requires_grad=True)
    seen = []
    graph.grad_accumulator(w).register_hook(lambda grads_in, grads_out: seen.append(
        grads_out[0]))
    (w * 3).sum().backward()
    w.grad.zero_()
    assert seen[0].tolist() == [3.0, 3.0]


def test_adopted_gradients_accumulate_in_later_backwards():
    w = ember.randn(4, 3, requires_grad=True)
    x = ember.randn(5, 4)
    for _ in range(3):
        (x @ w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(),
                               3 * np.repeat(x.numpy().sum(0)[:, None], 3, 1), rtol=1e-5)


def test_a_tensor_a_hook_returned_is_never_adopted():
    scale = ember.full((3,), 0.5)
    w = ember.randn(3, requires_grad=True)
    w.register_hook(lambda g: scale)
    (w * 2).sum().backward()
    ember.optim.SGD([w], lr=1.0).zero_grad(set_to_none=False)
    assert scale.tolist() == [0.5, 0.5, 0.5]
