"""Losses' deprecation and size-mismatch warnings blame the user's line, wherever ember
raises them from (a registered kernel, a composite, a module's constructor or forward)."""

import warnings

import pytest

import ember
import ember.nn.functional as F
from ember import nn

_A = ember.randn(3, 4)
_B = ember.randn(4)
_LOG_PROBS = ember.randn(3, 4).log_softmax(1)
_TARGET = ember.tensor([0, 1, 2])


@pytest.mark.parametrize("call", [
    lambda: F.nll_loss(_LOG_PROBS, _TARGET, reduce=False),
    lambda: F.cross_entropy(_A, _TARGET, size_average=True),
    lambda: F.mse_loss(_A, _A, size_average=False),
    lambda: nn.MSELoss(size_average=False),
    lambda: F.mse_loss(_A, _B),
    lambda: F.huber_loss(_A, _B),
    lambda: nn.MSELoss()(_A, _B),
    lambda: nn.L1Loss()(_A, _B),
], ids=["nll_reduce", "cross_entropy_size_average", "mse_size_average", "module_ctor",
        "mse_broadcast", "huber_broadcast", "module_forward_broadcast", "l1_module_broadcast"])
def test_loss_warnings_point_at_the_callers_line(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert caught, "the call should warn"
    assert {w.filename for w in caught} == {__file__}
