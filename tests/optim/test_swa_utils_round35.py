"""update_bn touches only batch norms (an InstanceNorm's running stats stay) and runs under
no_grad, as PyTorch's."""

import copy

import numpy as np

import ember
from ember.optim import swa_utils as S


def test_update_bn_leaves_instance_norm_running_stats_alone():
    ember.manual_seed(0)
    norm = ember.nn.InstanceNorm1d(2, track_running_stats=True, momentum=0.3).double()
    norm(ember.randn(3, 2, 4, dtype=ember.float64))
    mean, var = norm.running_mean.clone(), norm.running_var.clone()
    model = ember.nn.Sequential(norm)
    S.update_bn([ember.ones(2, 2, 4, dtype=ember.float64)], model)
    assert not np.allclose(mean.numpy(), 0.0)
    np.testing.assert_array_equal(norm.running_mean.numpy(), mean.numpy())
    np.testing.assert_array_equal(norm.running_var.numpy(), var.numpy())
    assert norm.momentum == 0.3


def test_update_bn_resets_batch_norm_next_to_instance_norm_and_restores_momentum():
    ember.manual_seed(0)
    bn = ember.nn.BatchNorm1d(2, momentum=0.5).double()
    inorm = ember.nn.InstanceNorm1d(2, track_running_stats=True).double()
    model = ember.nn.Sequential(bn, inorm)
    model(ember.randn(4, 2, 3, dtype=ember.float64))
    data = [ember.tensor(np.arange(24.0).reshape(4, 2, 3))]
    model.eval()
    twin = copy.deepcopy(model).train()
    twin[0].reset_running_stats()
    twin[0].momentum = None
    twin(data[0])
    expected = twin[1]
    assert not np.allclose(expected.running_var.numpy(), 1.0)
    S.update_bn(data, model)
    x = data[0].numpy()
    np.testing.assert_allclose(bn.running_mean.numpy(), x.mean(axis=(0, 2)))
    # not reset: one ordinary train-mode update on top of the statistics it had
    np.testing.assert_allclose(inorm.running_var.numpy(), expected.running_var.numpy())
    np.testing.assert_allclose(inorm.running_mean.numpy(), expected.running_mean.numpy())
    assert bn.momentum == 0.5 and not model.training


def test_update_bn_runs_without_grad():
    seen = []

    class Probe(ember.nn.Module):
        def forward(self, x):
            seen.append(ember.is_grad_enabled())
            return x

    model = ember.nn.Sequential(ember.nn.BatchNorm1d(2), Probe())
    S.update_bn([ember.ones(3, 2), (ember.zeros(3, 2), 1)], model)
    assert seen == [False, False]
    assert ember.is_grad_enabled()
