"""nn.AdaptiveLogSoftmaxWithLoss against PyTorch with the same weights: outputs, loss,
gradients, log_prob and predict."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


@pytest.mark.parametrize("head_bias", [False, True])
@pytest.mark.parametrize("cutoffs,div_value", [([3, 6], 2.0), ([2], 4.0), ([1, 4, 8], 1.5)])
def test_adaptive_softmax_matches_torch(cutoffs, div_value, head_bias):
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs, div_value, head_bias)
    ours = ember.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs, div_value, head_bias)
    ours.load_state_dict({k: ember.tensor(v.detach().numpy())
                          for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(len(cutoffs))
    x = rng.standard_normal((7, 8)).astype(np.float32)
    target = rng.integers(0, 10, 7)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    t_out, e_out = theirs(tx, torch.tensor(target)), ours(ex, ember.tensor(target))
    np.testing.assert_allclose(np.asarray(e_out.output.detach()), t_out.output.detach(),
                               rtol=1e-5, atol=1e-6)
    t_out.loss.backward()
    e_out.loss.backward()
    np.testing.assert_allclose(np.asarray(ex.grad), tx.grad, rtol=1e-4, atol=1e-6)
    for (name, p), (_, q) in zip(theirs.named_parameters(), ours.named_parameters()):
        np.testing.assert_allclose(np.asarray(q.grad), p.grad, rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_allclose(np.asarray(ours.log_prob(ex).detach()),
                               theirs.log_prob(tx).detach(), rtol=1e-5, atol=1e-5)
    assert ours.predict(ex).tolist() == theirs.predict(tx).tolist()
