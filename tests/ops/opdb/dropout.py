"""OpInfo entries for ember/ops/dropout.py (the deterministic masked multiply behind dropout)."""

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, LOW, OpInfo, SampleInput, make


def _masked_scale_samples(dtype, requires_grad):
    def mask(*shape):
        return make(shape, ember.bool)
    yield SampleInput(make((5,), dtype, requires_grad), (mask(5), 2.0), name="1d")
    yield SampleInput(make((), dtype, requires_grad), (mask(), 1.0), name="0d")
    yield SampleInput(make((0, 3), dtype, requires_grad), (mask(0, 3), 2.0), name="empty")
    yield SampleInput(make((2, 3, 4), dtype, requires_grad), (mask(2, 3, 1), 1.25),
                      name="feature_mask")
    yield SampleInput(make((3, 4), dtype, requires_grad, noncontiguous=True), (mask(3, 4), 4.0),
                      name="noncontiguous")
    yield SampleInput(make((3, 4), dtype, requires_grad),
                      (make((3, 4), dtype, low=0.1, high=0.4), 1.0), name="float_mask")


OPS = [
    OpInfo("_masked_scale", lambda x, m, s: (x * m * s).astype(np.asarray(x).dtype),
           _masked_scale_samples, dtypes=FLOATS + LOW, gradgrad=True),
]
