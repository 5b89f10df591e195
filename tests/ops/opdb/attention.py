"""OpInfo entries for ember/ops/attention.py."""

import math

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make


def _sdpa_ref(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False):
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    if enable_gqa:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    e = q.shape[-1]
    scale = (1 / math.sqrt(e) if e else 1.0) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    L, S = scores.shape[-2:]
    if is_causal:
        scores = np.where(np.tril(np.ones((L, S), bool)), scores, -np.inf)
    if attn_mask is not None:
        if attn_mask.dtype == bool:
            scores = np.where(attn_mask, scores, -np.inf)
        else:
            scores = scores + attn_mask
    if S == 0:
        return np.zeros(scores.shape[:-1] + v.shape[-1:])
    top = scores.max(-1, keepdims=True)
    w = np.exp(scores - np.where(np.isneginf(top), 0, top))
    total = w.sum(-1, keepdims=True)
    w = np.where(total == 0, 0, w / np.where(total == 0, 1, total))   # masked rows: zero
    return w @ v


def _sdpa_samples(dtype, requires_grad):
    def t(*shape, **kw):
        return make(shape, dtype, requires_grad, **kw)

    yield SampleInput(t(2, 3, 4), (t(2, 5, 4), t(2, 5, 6)), name="L!=S,Ev!=E")
    yield SampleInput(t(2, 3), (t(2, 3), t(2, 3)), name="2d")
    yield SampleInput(t(2, 2, 4, 3), (t(2, 2, 4, 3), t(2, 2, 4, 3)), {"is_causal": True},
                      name="causal")
    yield SampleInput(t(5, 2), (t(3, 2), t(3, 2)), {"is_causal": True}, name="causal_L>S")
    bool_mask = ember.tensor([[True, False, True, True, False], [False] * 5,
                              [True] * 5])
    yield SampleInput(t(2, 3, 4), (t(2, 5, 4), t(2, 5, 4)), {"attn_mask": bool_mask},
                      name="bool_mask_with_masked_row")
    yield SampleInput(t(2, 3, 4), (t(2, 5, 4), t(2, 5, 4)), {"attn_mask": t(2, 1, 5)},
                      name="float_mask_broadcast")
    yield SampleInput(t(3, 2), (t(4, 2), t(4, 3)), {"attn_mask": t(4)}, name="float_mask_1d")
    yield SampleInput(t(1, 4, 3, 2), (t(1, 2, 5, 2), t(1, 1, 5, 3)),
                      {"enable_gqa": True, "scale": 0.3}, name="gqa")
    yield SampleInput(t(2, 1, 3, 4), (t(3, 5, 4), t(1, 5, 4)), name="broadcast_batch")
    yield SampleInput(t(2, 3, 4, noncontiguous=True), (t(2, 5, 4, noncontiguous=True),
                                                       t(2, 5, 4, noncontiguous=True)),
                      name="noncontiguous")
    yield SampleInput(t(2, 0, 4), (t(2, 5, 4), t(2, 5, 4)), name="empty_L")
    yield SampleInput(t(2, 3, 4), (t(2, 0, 4), t(2, 0, 4)), name="empty_S")
    yield SampleInput(t(0, 3, 4), (t(0, 5, 4), t(0, 5, 4)), name="empty_batch")


def _sdpa_errors():
    def r(*shape, dtype=ember.float32):
        return ember.ones(shape, dtype=dtype)

    q, k = r(2, 3, 4), r(2, 5, 4)
    yield ErrorInput(SampleInput(q, (k, k), {"attn_mask": ember.ones(3, 5, dtype=ember.bool),
                                             "is_causal": True}),
                     RuntimeError, "Explicit attn_mask should not be set when is_causal=True")
    yield ErrorInput(SampleInput(q, (r(2, 5, 4, dtype=ember.float64), k)), RuntimeError,
                     "query.dtype: float key.dtype: double and value.dtype: float")
    yield ErrorInput(SampleInput(r(4), (r(4), r(4))), RuntimeError, "at least 2 dimensional")
    yield ErrorInput(SampleInput(q, (r(2, 5, 3), k)), RuntimeError,
                     r"batch2 tensor to be: \[2, 4\] but got: \[2, 3\]")
    yield ErrorInput(SampleInput(q, (r(3, 5, 4), r(3, 5, 4))), RuntimeError,
                     r"size of tensor a \(2\) must match the size of tensor b \(3\) at "
                     r"non-singleton dimension 0")
    yield ErrorInput(SampleInput(q, (k, k), {"attn_mask": ember.ones(3, 5, dtype=ember.int64)}),
                     RuntimeError, "attn_mask.dtype: long int and  query.dtype: float")
    yield ErrorInput(SampleInput(q, (k, k), {"attn_mask": ember.ones(3, 4)}), RuntimeError,
                     r"size of tensor a \(5\) must match the size of tensor b \(4\)")
    yield ErrorInput(SampleInput(q, (k, k), {"attn_mask": ember.ones(7, 2, 3, 5)}),
                     RuntimeError, r"output with shape \[2, 3, 5\] doesn't match the broadcast")
    yield ErrorInput(SampleInput(q, (k, k), {"dropout_p": 1.5}), RuntimeError,
                     "dropout probability has to be between 0 and 1, but got 1.5")
    yield ErrorInput(SampleInput(q, (k, k), {"dropout_p": 2.0}), RuntimeError,   # C++'s %g
                     "dropout probability has to be between 0 and 1, but got 2$")
    yield ErrorInput(SampleInput(r(2, 4, 3, 4), (r(2, 3, 5, 4), r(2, 3, 5, 4)),
                                 {"enable_gqa": True}),
                     RuntimeError, "Number of heads in key and value must divide")
    i = ember.ones(2, 3, 4, dtype=ember.int64)
    yield ErrorInput(SampleInput(i, (i, i)), RuntimeError, "expected scalar type Float but "
                     "found Long")


OPS = [
    OpInfo("nn.functional.scaled_dot_product_attention", _sdpa_ref, _sdpa_samples,
           dtypes=FLOATS + LOW, gradgrad=True, error_inputs=_sdpa_errors,
           tol={ember.float16: (2e-3, 2e-3), ember.bfloat16: (2e-2, 2e-2)}),
]
