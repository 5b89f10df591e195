"""OpInfo entries for ember/ops/_kernel_reads.py: _tied_grad, a gradient passed on with an
edge of no derivative to a backward kernel's input."""

import ember
from tests.ops.opdb.core import COMPLEX, FLOATS, LOW, OpInfo, SampleInput, make


def _tied_samples(dtype, rg):
    """(gradient, the input it is tied to): any shapes, the gradient passed on."""
    yield SampleInput(make((2, 3, 4), dtype, rg), (make((2, 3, 4), dtype, rg),), name="same")
    yield SampleInput(make((4, 3, 2, 2), dtype, rg, noncontiguous=True),
                      (make((1, 3, 5), dtype, rg),), name="other")
    yield SampleInput(make((0, 3), dtype, rg), (make((), dtype, rg),), name="empty")
    yield SampleInput(make((), dtype, rg), (make((2,), ember.float32, rg),), name="0d")


OPS = [
    OpInfo("_tied_grad", lambda g, x: g, _tied_samples, dtypes=FLOATS + LOW + COMPLEX,
           gradgrad=True),
]
