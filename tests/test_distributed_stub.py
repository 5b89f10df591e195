"""ember.distributed answers as a PyTorch build without distributed support."""

import ember


def test_distributed_is_not_available_and_defines_nothing_else():
    dist = ember.distributed
    assert dist.is_available() is False
    assert not hasattr(dist, "is_initialized")
    assert not (dist.is_available() and dist.is_initialized())     # the usual guard
