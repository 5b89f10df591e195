"""Per-sample gradients the DP-SGD way (round 29), against NumPy: an example whose targets are
all ignored has a NaN loss and a zero gradient, a grad function may write into the arguments
it does not differentiate, and vmap runs over an empty batch."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.func import functional_call, grad, jacfwd, jacrev, vmap


def _softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_vmap_grad_of_an_example_with_every_target_ignored_is_zero():
    x = np.random.default_rng(0).standard_normal((3, 2, 4)).astype(np.float32)
    t = np.array([[-100, -100], [1, -100], [3, 0]])
    grads = vmap(grad(F.cross_entropy))(ember.from_numpy(x), ember.from_numpy(t))
    values = vmap(F.cross_entropy)(ember.from_numpy(x), ember.from_numpy(t))
    expected = np.zeros_like(x)
    for i in range(3):
        kept = t[i] != -100
        for j in np.flatnonzero(kept):
            expected[i, j] = (_softmax(x[i, j]) - np.eye(4)[t[i, j]]) / kept.sum()
    np.testing.assert_allclose(grads.numpy(), expected, rtol=1e-5, atol=1e-7)
    assert np.isnan(values[0].item()) and not np.isnan(values[1:].numpy()).any()


@pytest.mark.parametrize("transform", ["grad", "jacrev", "kwarg"])
def test_grad_function_writes_into_an_argument_it_does_not_differentiate(transform):
    b = ember.zeros(3)
    x = ember.tensor([1.0, 2.0])
    if transform == "grad":
        out = grad(lambda x, b: (b.add_(1), (x * x).sum())[1])(x, b)
    elif transform == "jacrev":
        out = jacrev(lambda x, b: (b.add_(1), (x * x).sum())[1])(x, b)
    else:
        out = grad(lambda x, b=None: (b[1:].add_(1), (x * x).sum())[1])(x, b=b)
    np.testing.assert_allclose(out.numpy(), [2.0, 4.0])
    np.testing.assert_allclose(b.numpy(), [0.0, 1.0, 1.0] if transform == "kwarg" else 1.0)


def test_grad_still_refuses_a_captured_write():
    b = ember.zeros(3)
    with pytest.raises(RuntimeError, match="would mutate a captured Tensor"):
        grad(lambda x: (b.add_(1), (x * x).sum())[1])(ember.ones(2))


def test_per_sample_grads_through_batchnorm_in_training_refuse_a_single_value():
    model = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss(p, b, xi):
        return functional_call(model, (p, b), (xi.unsqueeze(0),)).sum()
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when "
                                         r"training, got input size ember.Size\(\[1, 4\]\)"):
        vmap(grad(loss), in_dims=(None, None, 0))(params, buffers, ember.ones(4, 3))


@pytest.mark.parametrize("fn", [
    lambda x: x.norm(), lambda x: x.argmax(), lambda x: x.max(), lambda x: x.prod(),
    lambda x: x.median(), lambda x: F.mse_loss(x, ember.zeros(3, 4)),
    lambda x: F.cross_entropy(x, ember.zeros(3, dtype=ember.long)),
    lambda x: ember.dist(x, 2 * x), lambda x: ember.dist(x, x, float("inf"))])
def test_vmap_over_an_empty_batch(fn):
    out = vmap(fn)(ember.ones(0, 3, 4))
    assert out.shape == (0,)


def test_per_sample_grads_of_an_empty_batch():
    model = ember.nn.Linear(4, 3)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi, yi):
        return F.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))
    gs = vmap(grad(loss), in_dims=(None, 0, 0))(params, ember.ones(0, 4),
                                                ember.zeros(0, dtype=ember.long))
    assert gs["weight"].shape == (0, 3, 4) and gs["bias"].shape == (0, 3)


def test_an_argument_written_from_the_differentiated_input_keeps_no_history():
    b = ember.zeros(2)
    g = grad(lambda x, b: (b.add_(x * 2), (b * b * x).sum())[1])(ember.tensor([1.0, 2.0]), b)
    # b = 2x inside, so the loss is 4 x**3 and its gradient 12 x**2
    np.testing.assert_allclose(g.numpy(), [12.0, 48.0])
    np.testing.assert_allclose(b.numpy(), [2.0, 4.0])
    assert b.grad_fn is None and not b.requires_grad


def test_grad_function_writes_into_a_view_of_an_argument_that_is_a_view():
    base = ember.zeros(2, 3)
    b = base[0]
    g = grad(lambda x, b: (b[:2].add_(x[:2]), (x * x).sum())[1])(ember.tensor([1.0, 2.0, 3.0]),
                                                                  b)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_allclose(base.numpy(), [[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
    assert base.grad_fn is None and b.grad_fn is None and not base.requires_grad


@pytest.mark.parametrize("in_dims", [0, (0, 1)])
def test_vmap_of_grad_writes_into_a_batched_argument(in_dims):
    xs = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    bs = ember.zeros(2, 2)
    g = vmap(grad(lambda x, b: (b.add_(x), (x * b).sum())[1]), in_dims=in_dims)(xs, bs)
    # b = x inside: the loss is x**2, its gradient 2x
    np.testing.assert_allclose(g.numpy(), 2 * xs.numpy())
    np.testing.assert_allclose(bs.numpy(), xs.numpy() if in_dims == 0 else xs.numpy().T)


@pytest.mark.parametrize("weight", [None, ember.ones(4)])
def test_vmap_class_loss_of_examples_without_positions_is_nan(weight):
    # each example is a (0, 4) batch of logits: its mean over no positions is 0/0
    out = vmap(lambda x, t: F.cross_entropy(x, t, weight=weight))(
        ember.zeros(2, 0, 4), ember.zeros(2, 0, dtype=ember.long))
    assert out.shape == (2,) and np.isnan(out.numpy()).all()


@pytest.mark.parametrize("transform", [jacrev, jacfwd])
def test_jacobian_of_a_function_returning_the_argument_it_wrote(transform):
    b = ember.zeros(2)
    x = ember.tensor([1.0, 2.0])
    jac = transform(lambda x, b: b.add_(x * x))(x, b)
    np.testing.assert_allclose(jac.numpy(), np.diag(2 * x.numpy()))
    np.testing.assert_allclose(b.numpy(), [1.0, 4.0])
    assert b.grad_fn is None and not b.requires_grad
