"""Per-sample gradients and model ensembling: vmap over functional_call of real modules."""

import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.func import functional_call, grad, stack_module_state, vmap


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.fc = nn.Linear(6 * 2 * 2, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x)).flatten(1)
        return self.fc(x)


def _loss(model):
    def loss(params, buffers, x, t):
        out = functional_call(model, (params, buffers), (x.unsqueeze(0),))
        return F.cross_entropy(out, t.unsqueeze(0))
    return loss


def test_per_sample_gradients_equal_the_loop():
    ember.manual_seed(0)
    model = SmallCNN().double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = dict(model.named_buffers())
    x, t = ember.randn(6, 1, 10, 10, dtype=ember.float64), ember.randint(0, 5, (6,))
    loss = _loss(model)
    batched = vmap(grad(loss), in_dims=(None, None, 0, 0))(params, buffers, x, t)
    for k, p in params.items():
        loop = ember.stack([grad(loss)(params, buffers, x[i], t[i])[k] for i in range(6)])
        assert batched[k].shape == (6,) + p.shape
        assert loop.abs().sum() > 0 and ember.allclose(batched[k], loop)


def test_per_sample_gradients_sum_to_the_batch_gradient():
    ember.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    x, y = ember.randn(8, 3, dtype=ember.float64), ember.randn(8, 1, dtype=ember.float64)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, a, b):
        return F.mse_loss(functional_call(model, p, (a,)), b)
    per = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    F.mse_loss(model(x), y, reduction="sum").backward()
    for k, p in model.named_parameters():
        assert ember.allclose(per[k].sum(0), p.grad)


def test_ensembling_matches_running_each_model():
    ember.manual_seed(2)
    models = [nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2)) for _ in range(4)]
    params, buffers = stack_module_state(models)
    assert params["0.weight"].shape == (4, 8, 3) and params["0.weight"].requires_grad
    base = models[0]
    x = ember.randn(5, 3)

    def run(p, b, a):
        return functional_call(base, (p, b), (a,))
    same_x = vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    xs = ember.randn(4, 5, 3)
    own_x = vmap(run)(params, buffers, xs)
    for i, m in enumerate(models):
        assert ember.allclose(same_x[i], m(x), atol=1e-6)
        assert ember.allclose(own_x[i], m(xs[i]), atol=1e-6)


def test_ensemble_of_cnns_with_batch_norm_in_eval():
    ember.manual_seed(3)
    models = [nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU()).eval()
              for _ in range(3)]
    for m in models:
        m[1].running_mean.uniform_(-1, 1)
    params, buffers = stack_module_state(models)
    x = ember.randn(2, 2, 6, 6)
    out = vmap(lambda p, b: functional_call(models[0], (p, b), (x,)))(params, buffers)
    for i, m in enumerate(models):
        assert ember.allclose(out[i], m(x), atol=1e-5)


def test_stack_module_state_errors():
    with pytest.raises(RuntimeError, match="Expected at least one model"):
        stack_module_state([])
    with pytest.raises(RuntimeError, match="same class"):
        stack_module_state([nn.Linear(1, 1), nn.Identity()])
    with pytest.raises(RuntimeError, match="training/eval mode"):
        stack_module_state([nn.Linear(1, 1), nn.Linear(1, 1).eval()])


def test_functional_call_replaces_and_restores():
    m = nn.Linear(2, 1, bias=False)
    w = ember.ones(1, 2)
    assert functional_call(m, {"weight": w}, (ember.ones(1, 2),)).item() == 2.0
    assert m.weight is not w
