"""The jagged nested layout: one values tensor plus offsets; construction, parts, unbinding,
padding, elementwise ops, linear, reductions, softmax, attention and gradients."""

import numpy as np
import pytest

import ember
from ember.nn import functional as F


def _nt(**kwargs):
    return ember.nested.nested_tensor([ember.arange(6.0).reshape(2, 3),
                                       ember.arange(3.0).reshape(1, 3) + 10],
                                      layout=ember.jagged, **kwargs)


def test_parts_and_shape():
    nt = _nt()
    assert nt.layout is ember.jagged and nt.is_nested and nt._ragged_idx == 1
    assert nt.values().tolist() == [[0, 1, 2], [3, 4, 5], [10, 11, 12]]
    assert nt.offsets().tolist() == [0, 2, 3] and nt.lengths() is None
    assert nt.dim() == 3 and nt.size(0) == 2 and nt.size(-1) == 3 and nt.numel() == 9
    assert str(nt.shape) == f"ember.Size([2, {nt.size(1)}, 3])"
    assert str(nt.size(1)).startswith("j")
    assert (nt * 2).size(1) is nt.size(1)          # same offsets, same ragged size
    assert _nt().size(1) is not nt.size(1)
    assert repr(nt).endswith("offsets=tensor([0, 2, 3]), contiguous=True)")


def test_unbind_index_and_padding():
    nt = _nt()
    assert [t.tolist() for t in nt.unbind()] == [[[0, 1, 2], [3, 4, 5]], [[10, 11, 12]]]
    assert nt[1].tolist() == [[10, 11, 12]] and nt[0, 1].tolist() == [3, 4, 5]
    assert nt.to_padded_tensor(-1.0).tolist() == [[[0, 1, 2], [3, 4, 5]],
                                                 [[10, 11, 12], [-1, -1, -1]]]
    assert ember.nested.to_padded_tensor(nt, 0.0, output_size=(2, 1, 3)).tolist() == [
        [[0, 1, 2]], [[10, 11, 12]]]
    with pytest.raises(RuntimeError, match="only supported for NestedTensor on dim=0"):
        nt.unbind(1)


def test_from_jagged_offsets_lengths_and_jagged_dim():
    v = ember.arange(12.0).reshape(4, 3)
    nt = ember.nested.nested_tensor_from_jagged(v, lengths=ember.tensor([1, 3]))
    assert nt.offsets().tolist() == [0, 1, 4] and [t.shape[0] for t in nt.unbind()] == [1, 3]
    holes = ember.nested.nested_tensor_from_jagged(v, ember.tensor([0, 1, 4]),
                                                   lengths=ember.tensor([1, 2]))
    assert not holes.is_contiguous()
    assert holes.unbind()[1].tolist() == [[3, 4, 5], [6, 7, 8]]
    with pytest.raises(RuntimeError, match="nested tensors with holes"):
        holes.to_padded_tensor(0.0)
    cols = ember.nested.nested_tensor_from_jagged(v.reshape(3, 4), ember.tensor([0, 1, 4]),
                                                  jagged_dim=2)
    assert cols.values().shape == (3, 4) and cols.unbind()[1].tolist() == [[1, 2, 3],
                                                                           [5, 6, 7],
                                                                           [9, 10, 11]]
    with pytest.raises(RuntimeError, match="At least one of offsets or lengths"):
        ember.nested.nested_tensor_from_jagged(v)
    with pytest.raises(ValueError, match="Expected jagged_dim >=1, but got 0"):
        ember.nested.nested_tensor_from_jagged(v, ember.tensor([0, 4]), jagged_dim=0)


def test_elementwise_and_broadcasting():
    nt = _nt()
    v = nt.values().numpy()
    np.testing.assert_allclose((ember.sin(nt) * 2 + nt).values().numpy(), np.sin(v) * 2 + v,
                               rtol=1e-6)
    per_batch = ember.tensor([1.0, 2.0]).reshape(2, 1, 1)
    assert (nt + per_batch).values()[:, 0].tolist() == [1, 4, 12]
    assert (nt > 3).values().dtype is ember.bool
    with pytest.raises(RuntimeError, match="binary pointwise function add.Tensor"):
        nt + _nt()                   # other offsets: another ragged size
    with pytest.raises(RuntimeError, match="binary pointwise function add.Tensor"):
        nt + ember.ones(2, 3)


def test_linear_softmax_and_reductions():
    nt = _nt()
    out = F.linear(nt, ember.ones(4, 3), ember.ones(4))
    assert out.shape[2] == 4 and out.values()[:, 0].tolist() == [4, 13, 34]
    assert nt.softmax(-1).values().sum(-1).tolist() == pytest.approx([1, 1, 1])
    assert ember.softmax(nt, 1).values()[:, 0].tolist() == pytest.approx(
        [1 / (1 + np.e ** 3), 1 / (1 + np.e ** -3), 1.0])
    assert nt.sum().item() == 48 and nt.sum(1).tolist() == [[3, 5, 7], [10, 11, 12]]
    assert nt.mean(-1).values().tolist() == [1, 4, 11]
    assert nt.mean(dim=(0, 1), keepdim=True).shape == (1, 1, 3)
    with pytest.raises(RuntimeError, match="along the batch dimension but not the ragged"):
        nt.sum(0)


def test_gradients_reach_values_and_leaves():
    v = ember.arange(12.0).reshape(4, 3).requires_grad_()
    nt = ember.nested.nested_tensor_from_jagged(v, ember.tensor([0, 1, 4]))
    (nt * nt).sum().backward()
    assert v.grad.tolist() == (2 * v.detach()).tolist()
    leaf = _nt(requires_grad=True)
    assert leaf.is_leaf and leaf.grad is None
    leaf.exp().to_padded_tensor(0.0).sum().backward()
    np.testing.assert_allclose(leaf.grad.values().numpy(),
                               np.exp(leaf.values().detach().numpy()), rtol=1e-6)
    assert leaf.grad.offsets() is leaf.offsets()


def test_attention_on_transposed_heads():
    ember.manual_seed(0)
    parts = [ember.randn(3, 2, 4), ember.randn(5, 2, 4)]
    nt = ember.nested.nested_tensor(parts, layout=ember.jagged)
    q = nt.transpose(1, 2)                              # (B, H, j, D)
    out = F.scaled_dot_product_attention(q, q, q).transpose(1, 2)
    for got, x in zip(out.unbind(), parts):
        h = x.transpose(0, 1)
        want = F.scaled_dot_product_attention(h, h, h).transpose(0, 1)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_narrow_and_masked_select():
    x = ember.arange(24.0).reshape(2, 4, 3)
    nt = ember.nested.narrow(x, 1, ember.tensor([0, 1]), ember.tensor([2, 3]),
                             layout=ember.jagged)
    assert nt.offsets().tolist() == [0, 5, 8] and nt.lengths().tolist() == [2, 3]
    assert nt.unbind()[1][:, 0].tolist() == [15, 18, 21]
    m = ember.nested.masked_select(ember.arange(6.0).reshape(2, 3),
                                   ember.tensor([[True, False, True], [False, False, True]]))
    assert m.values().tolist() == [0, 2, 5] and m.offsets().tolist() == [0, 2, 3]


def test_dropout_and_max_gradients_reach_values():
    leaf = ember.nested.nested_tensor([ember.ones(40, 3), ember.ones(30, 3)],
                                      layout=ember.jagged, requires_grad=True)
    ember.manual_seed(0)
    out = F.dropout(leaf, 0.5)
    assert set(out.values().flatten().tolist()) == {0.0, 2.0}
    out.sum().backward()
    assert leaf.grad.values().tolist() == out.values().detach().tolist()
    nt = _nt(requires_grad=True)
    nt.max(1).values.sum().backward()
    assert nt.grad.values()[:, 0].tolist() == [0, 1, 1]
    assert nt[..., 1:].values().tolist() == [[1, 2], [4, 5], [11, 12]]


def test_gradients_through_slices_select_narrow_and_ragged_max():
    nt = _nt(requires_grad=True)
    a = nt[..., 1:].chunk(2, -1)[1]                     # column 2
    b = nt.narrow(2, 0, 2).select(2, 0)                 # column 0
    (a.squeeze(-1) * 2 + b * 3).sum().backward()
    assert nt.grad.values().tolist() == [[3, 0, 2]] * 3
    nt.grad = None
    nt.argmax(1).sum()                                  # (no gradient: indices)
    nt.max(1).values.sum().backward()                   # the last row of each component
    assert nt.grad.values().tolist() == [[0, 0, 0], [1, 1, 1], [1, 1, 1]]


def test_plain_pickle_deepcopy_and_copy_keep_the_layout():
    import copy
    import pickle
    nt = _nt(requires_grad=True)
    for other in (pickle.loads(pickle.dumps(nt)), copy.deepcopy(nt)):
        assert other.is_leaf and other.requires_grad and other._ragged_idx == 1
        assert other.values().tolist() == nt.values().tolist()
        assert other.offsets() is not nt.offsets()
    assert copy.copy(nt).offsets() is nt.offsets()
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(nt * 2)
