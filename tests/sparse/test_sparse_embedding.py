"""Embedding(sparse=True): sparse weight gradients, and the optimizers that take them."""

import numpy as np
import pytest

import ember
from ember import nn, optim

INDICES = [[0, 2, 2], [5, 0, 1]]


def _embedding(**kwargs):
    emb = nn.Embedding(6, 3, **kwargs)
    with ember.no_grad():
        emb.weight.copy_(ember.arange(18.0).reshape(6, 3) / 10)
    return emb


@pytest.mark.parametrize("options", [{}, dict(padding_idx=2)])
def test_the_gradient_is_sparse_with_the_dense_values(options):
    sparse, dense = _embedding(sparse=True, **options), _embedding(**options)
    for emb in (sparse, dense):
        emb(ember.tensor(INDICES)).pow(2).sum().backward()
    grad = sparse.weight.grad
    assert grad.is_sparse and grad.shape == (6, 3)
    np.testing.assert_allclose(grad.to_dense().numpy(), dense.weight.grad.numpy(), rtol=1e-6)
    held = sorted(set(grad.coalesce()._indices()[0].tolist()))
    assert held == ([0, 1, 5] if "padding_idx" in options else [0, 1, 2, 5])


def test_scale_grad_by_freq_with_sparse_gradients_raises_as_in_torch():
    emb = _embedding(sparse=True, scale_grad_by_freq=True)
    out = emb(ember.tensor(INDICES)).sum()
    with pytest.raises(RuntimeError, match="^embedding_backward: scale_grad_by_freq not "
                                           "supported with sparse gradients$"):
        out.backward()


def test_gradients_accumulate_sparsely():
    emb = _embedding(sparse=True)
    for _ in range(2):
        emb(ember.tensor(INDICES)).sum().backward()
    assert emb.weight.grad.is_sparse
    assert emb.weight.grad.to_dense()[2].tolist() == [4.0, 4.0, 4.0]


@pytest.mark.parametrize("name", ["SGD", "Adagrad", "SparseAdam"])
def test_sparse_optimizers_update_only_the_rows_used(name):
    emb = _embedding(sparse=True)
    opt = getattr(optim, name)(emb.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        emb(ember.tensor(INDICES)).pow(2).sum().backward()
        opt.step()
    assert emb.weight[3].tolist() == pytest.approx([0.9, 1.0, 1.1])   # row 3 is never used
    assert emb.weight[0].tolist() != pytest.approx([0.0, 0.1, 0.2])


@pytest.mark.parametrize("name, message", [
    ("Adam", "Adam does not support sparse gradients, please consider SparseAdam instead"),
    ("AdamW", "Adam does not support sparse gradients, please consider SparseAdam instead"),
    ("RMSprop", "RMSprop does not support sparse gradients"),
    ("Adadelta", "Adadelta does not support sparse gradients")])
def test_dense_optimizers_refuse_sparse_gradients(name, message):
    emb = _embedding(sparse=True)
    emb(ember.tensor(INDICES)).sum().backward()
    with pytest.raises(RuntimeError, match=f"^{message}$"):
        getattr(optim, name)(emb.parameters()).step()


def test_refusals_of_the_sparse_optimizers():
    dense = _embedding()
    dense(ember.tensor(INDICES)).sum().backward()
    with pytest.raises(RuntimeError, match="^SparseAdam does not support dense gradients, "
                                           "please consider Adam instead$"):
        optim.SparseAdam(dense.parameters()).step()
    emb = _embedding(sparse=True)
    emb(ember.tensor(INDICES)).sum().backward()
    with pytest.raises(RuntimeError, match=r"^add\(sparse, dense\) is not supported"):
        optim.SGD(emb.parameters(), lr=0.1, weight_decay=0.1).step()
    with pytest.raises(RuntimeError, match="^weight_decay option is not compatible with sparse"):
        optim.Adagrad(emb.parameters(), lr=0.1, weight_decay=0.1).step()
