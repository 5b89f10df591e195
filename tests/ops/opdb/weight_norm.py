"""OpInfo entry for ember/ops/weight_norm.py: the fused weight-norm kernel, ``g * v / ||v||``
with the norm over every dim of ``v`` but ``dim`` (0 or the last one)."""

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make


def _ref(v, g, dim=0):
    others = tuple(d for d in range(v.ndim) if d != dim)
    wide = v.astype(np.float64)
    norm = np.sqrt((wide * wide).sum(axis=others, keepdims=True))
    return (wide * (g.astype(np.float64).reshape(norm.shape) / norm)).astype(v.dtype)


def _samples(dtype, requires_grad):
    def mk(*shape, **kw):
        return make(shape, dtype, requires_grad, **kw)
    yield SampleInput(mk(3, 4), (mk(3, 1), 0), name="rows")
    yield SampleInput(mk(3, 4), (mk(1, 4), 1), name="columns")
    yield SampleInput(mk(4, 2, 3), (mk(4, 1, 1), 0), name="conv_weight")
    yield SampleInput(mk(4, 2, 3), (mk(1, 1, 3),), {"dim": 2}, name="last_dim")
    yield SampleInput(mk(4, 2, 3), (mk(4), 0), name="flat_g")
    yield SampleInput(mk(5), (mk(5), 0), name="1d")
    yield SampleInput(mk(3, 4, noncontiguous=True), (mk(3, 1), 0), name="noncontiguous")


def _errors():
    f = ember.ones
    yield ErrorInput(SampleInput(f(3, 4, dtype=ember.int64), (f(3, 1, dtype=ember.int64), 0)),
                     NotImplementedError, "\"weight_norm_kernel\" not implemented for 'Long'")
    yield ErrorInput(SampleInput(f(3, 4), (f(3, 1, dtype=ember.float64), 0)), RuntimeError,
                     "expected scalar type Float but found Double")


def _torch_op(v, g, dim=0):
    """torch._weight_norm: for these dims, the fused kernel on contiguous operands (torch's
    bare _weight_norm_interface misreads non-contiguous ones)."""
    import torch
    return torch._weight_norm(v, g, dim)


OPS = [
    OpInfo("_weight_norm_interface", _ref, _samples, dtypes=FLOATS + LOW, gradgrad=True,
           error_inputs=_errors, tol={ember.float32: (1e-5, 1e-6)}, torch_op=_torch_op),
]
