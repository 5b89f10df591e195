"""Backward kernels meet inf/nan gradients silently, as PyTorch's do: an overflowed loss (for
instance under a GradScaler) must not make NumPy print RuntimeWarnings from inside ember."""

import warnings

import pytest

import ember
import ember.nn.functional as F

TARGETS = ember.tensor([0, 1, 2, 0])

LOSSES = {
    "cross_entropy": lambda x: F.cross_entropy(x, TARGETS),
    "cross_entropy_smoothed": lambda x: F.cross_entropy(x, TARGETS, label_smoothing=0.1),
    "softmax": lambda x: x.softmax(1).sum(),
    "log_softmax": lambda x: x.log_softmax(1).sum(),
    "kl_div": lambda x: F.kl_div(x.log_softmax(1), ember.full((4, 3), 0.3), reduction="batchmean"),
    "layer_norm": lambda x: F.layer_norm(x, (3,)).sum(),
}


@pytest.mark.parametrize("loss_of", LOSSES.values(), ids=list(LOSSES))
def test_backward_of_an_infinite_loss_warns_nothing_and_gives_nan(loss_of):
    x = ember.tensor([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3], [1.0, 1.0, -1.0], [3.0, 0.0, -2.0]],
                     requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (loss_of(x) * float("inf")).backward()
    assert ember.isnan(x.grad).any()


def test_user_numpy_code_in_a_hook_still_warns():
    """Only ember's own kernels are silenced: a hook's NumPy code behaves as NumPy does."""
    import numpy as np

    x = ember.ones(2, requires_grad=True)
    x.register_hook(lambda g: ember.from_numpy(np.log(np.zeros(2, np.float32))))
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        (x * 2).sum().backward()
