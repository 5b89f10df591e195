"""OpInfo entries for ember/ops/embedding.py: embedding, its backward, and one_hot."""

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make


def _s(x, *args, name="", **kwargs):
    return SampleInput(x, args, kwargs, name=name)


def _idx(*values):
    return ember.tensor(values, dtype=ember.int64)


def _embedding_ref(w, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return w[indices]


def _embedding_samples(dtype, rg):
    w = make((5, 3), dtype, rg)
    yield _s(w, _idx(1, 2, 4, 1), name="1d")
    yield _s(w, ember.tensor([[0, 4], [4, 4]]), name="2d_repeats")
    yield _s(w, ember.tensor(3), name="0d")
    yield _s(w, ember.tensor([2, 0], dtype=ember.int32), name="int32")
    yield _s(make((3, 5), dtype, rg).t(), _idx(0, 4), name="noncontiguous")
    yield _s(w, ember.zeros(0, dtype=ember.int64), name="empty")
    if not rg:                          # the padding row gets no gradient, by design
        yield _s(w, _idx(1, 2, 1), 1, True, name="padding_freq")


def _embedding_errors():
    w = ember.ones(4, 3)
    yield ErrorInput(_s(w, _idx(1, 4)), IndexError, "index out of range in self")
    yield ErrorInput(_s(w, _idx(-1, 2)), IndexError, "index out of range in self")
    yield ErrorInput(_s(w, ember.tensor([1., 2.])), RuntimeError,
                     r"Expected tensor for argument #1 'indices' to have one of the following "
                     r"scalar types: Long, Int; but got ember.FloatTensor instead \(while "
                     r"checking arguments for embedding\)")
    yield ErrorInput(_s(ember.ones(4), _idx(1)), RuntimeError, "'weight' must be 2-D")


def _backward_ref(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    flat = indices.reshape(-1)
    out = np.zeros((num_weights, grad.shape[-1]), grad.dtype)
    np.add.at(out, flat, grad.reshape(-1, grad.shape[-1]))
    if scale_grad_by_freq:
        out /= np.maximum(np.bincount(flat, minlength=num_weights), 1)[:, None]
    if padding_idx >= 0:
        out[padding_idx] = 0
    return out


def _backward_samples(dtype, rg):
    def mk(*shape):
        return make(shape, dtype, rg)
    yield _s(mk(4, 3), _idx(1, 2, 1, 0), 5, -1, False, name="plain")
    yield _s(mk(2, 2, 3), ember.tensor([[0, 4], [4, 4]]), 5, 0, True, name="pad_freq")
    yield _s(mk(3, 2), _idx(1, 1, 3), 4, 3, False, name="padding")
    yield _s(mk(300, 2), ember.arange(300) % 7, 7, -1, True, name="sparse_path")
    yield _s(mk(0, 3), ember.zeros(0, dtype=ember.int64), 4, -1, False, name="empty")


def _one_hot_ref(x, num_classes=-1):
    n = int(x.max()) + 1 if num_classes == -1 else num_classes
    return (x[..., None] == np.arange(n)).astype(np.int64)


def _one_hot_samples(dtype, rg):
    yield _s(_idx(1, 0, 3))
    yield _s(ember.tensor([[1, 2], [0, 0]]), 4, name="2d_num_classes")
    yield _s(ember.tensor(2), 3, name="0d")
    yield _s(ember.zeros(0, dtype=ember.int64), 2, name="empty")
    yield _s(ember.zeros((2, 0), dtype=ember.int64), 3, name="empty_2d")


def _one_hot_errors():
    yield ErrorInput(_s(_idx(1, -1)), RuntimeError, "Class values must be non-negative.")
    yield ErrorInput(_s(_idx(1, 5), 3), RuntimeError,
                     "Class values must be smaller than num_classes.")
    yield ErrorInput(_s(ember.tensor([1., 2.])), RuntimeError,
                     "one_hot is only applicable to index tensor of type LongTensor.")
    yield ErrorInput(_s(ember.zeros(0, dtype=ember.int64)), RuntimeError,
                     "Can not infer total number of classes from empty tensor.")
    yield ErrorInput(_s(ember.zeros(0, dtype=ember.int64), 0), RuntimeError,
                     "Can not infer total number of classes from empty tensor.")


OPS = [
    OpInfo("embedding", _embedding_ref, _embedding_samples, dtypes=FLOATS + LOW,
           gradgrad=True, error_inputs=_embedding_errors),
    OpInfo("_embedding_backward", _backward_ref, _backward_samples, dtypes=FLOATS,
           gradgrad=True),
    OpInfo("nn.functional.one_hot", _one_hot_ref, _one_hot_samples, dtypes=(ember.int64,),
           grad=False, error_inputs=_one_hot_errors),
]
