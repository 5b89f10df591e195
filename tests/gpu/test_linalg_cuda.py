"""What the OpInfo run cannot say about linalg on CUDA: behaviours PyTorch has only there."""

import pytest

import ember
from ember.testing import assert_close

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("driver", ["gesvd", "gesvdj", "gesvda"])
def test_svd_takes_a_cusolver_driver_on_cuda(driver):
    a = ember.randn(5, 3, dtype=ember.float64)
    u, s, vh = ember.linalg.svd(a.cuda(), full_matrices=False, driver=driver)
    assert u.device.type == s.device.type == vh.device.type == "cuda"
    assert_close((u * s.unsqueeze(-2) @ vh).cpu(), a)
    assert_close(ember.linalg.svdvals(a.cuda(), driver=driver).cpu(), s.cpu())


def test_svd_driver_errors():
    a = ember.randn(3, 3)
    with pytest.raises(RuntimeError, match="only supported on CUDA inputs"):
        ember.linalg.svd(a, driver="gesvd")
    with pytest.raises(RuntimeError, match="unknown svd driver gesvx"):
        ember.linalg.svd(a.cuda(), driver="gesvx")
