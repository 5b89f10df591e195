"""F.linear_cross_entropy and nn.LinearCrossEntropyLoss against PyTorch: values and
gradients, with K-dimensional logits, smoothing, ignored targets and class weights."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


@pytest.mark.parametrize("out_features", [(), (3,)])
@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.2, "reduction": "sum"},
                                    {"ignore_index": 2, "reduction": "none"}])
def test_linear_cross_entropy_matches_torch(out_features, kwargs):
    theirs = torch.nn.LinearCrossEntropyLoss(8, 5, out_features=out_features, bias=True,
                                             weight=torch.rand(5), **kwargs)
    ours = ember.nn.LinearCrossEntropyLoss(8, 5, out_features=out_features, bias=True,
                                           weight=ember.ones(5), **kwargs)
    ours.load_state_dict({k: ember.tensor(v.detach().numpy())
                          for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(len(out_features))
    x = rng.standard_normal((6, 8)).astype(np.float32)
    target = rng.integers(0, 5, (6,) + out_features)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    t_loss, e_loss = theirs(tx, torch.tensor(target)), ours(ex, ember.tensor(target))
    np.testing.assert_allclose(np.asarray(e_loss.detach()), t_loss.detach(), rtol=1e-5,
                               atol=1e-6)
    t_loss.sum().backward()
    e_loss.sum().backward()
    np.testing.assert_allclose(np.asarray(ex.grad), tx.grad, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ours.linear.weight.grad), theirs.linear.weight.grad,
                               rtol=1e-4, atol=1e-6)
