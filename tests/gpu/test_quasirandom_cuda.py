"""SobolEngine draws into an out= tensor on a GPU."""

import numpy as np
import pytest

import ember
from ember.quasirandom import SobolEngine

pytestmark = pytest.mark.cuda


def test_out_on_cuda():
    out = ember.empty(0, device="cuda")
    result = SobolEngine(2).draw(3, out=out)
    assert result is out and out.device.type == "cuda"
    np.testing.assert_array_equal(out.cpu().numpy(), [[0, 0], [0.5, 0.5], [0.75, 0.25]])
