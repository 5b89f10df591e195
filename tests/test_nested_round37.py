"""Regressions of ember.nested found by the round-37 nested fuzzer: jagged unflatten, narrow
without holes, ragged sizes of tensors with holes, PyTorch's node names and messages of jagged
ops, strided cat / squeeze / chunk / matmul."""

import warnings

import numpy as np
import pytest

import ember

F = ember.nn.functional


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (the once-per-process prototype warning)
        yield


def _nt(*shapes, grad=False, layout=ember.jagged):
    parts = [ember.arange(float(np.prod(s))).reshape(s) for s in shapes]
    return ember.nested.nested_tensor(parts, layout=layout, requires_grad=grad)


def _node(t):
    return type(t.grad_fn).__name__


def _holes():
    base = ember.arange(12.0).reshape(3, 4)
    return ember.nested.narrow(base, 1, ember.tensor([0, 0, 0]), ember.tensor([4, 2, 3]),
                               layout=ember.jagged)


def test_jagged_unflatten_splits_a_dense_dim():
    x = _nt((2, 4), (3, 4))
    y = x.unflatten(-1, (2, -1))
    assert y.dim() == 4 and y.shape[2:] == (2, 2)
    assert y.unbind()[1].tolist() == [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]],
                                      [[8.0, 9.0], [10.0, 11.0]]]
    with pytest.raises(RuntimeError, match=r"Provided sizes \[3, -1\] don't multiply up to "
                                           r"the size of dim 2 \(4\)"):
        x.unflatten(2, (3, -1))


def test_jagged_narrow_without_holes_is_contiguous():
    base = ember.arange(12.0).reshape(3, 4)
    x = ember.nested.narrow(base, 1, ember.tensor([1, 0, 0]), ember.tensor([3, 4, 4]),
                            layout=ember.jagged)
    assert x._lengths is None and x.is_contiguous()
    assert x.offsets().tolist() == [0, 3, 7, 11]
    assert [c.tolist() for c in x.unbind()] == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0],
                                                [8.0, 9.0, 10.0, 11.0]]
    y = ember.nested.narrow(ember.arange(6.0).reshape(2, 3), 1, 0, ember.tensor([3, 2]),
                            layout=ember.jagged)
    assert y._lengths is None
    assert tuple(ember.nested.to_padded_tensor(y, 0.0).shape) == (2, 3)   # the max length
    assert _holes()._lengths.tolist() == [4, 2, 3]


def test_holes_have_their_own_ragged_size():
    x = _holes()
    assert x.numel() == 9
    other = ember.nested.nested_tensor_from_jagged(ember.ones(12), x.offsets())
    with pytest.raises(RuntimeError, match="cannot call binary pointwise function add.Tensor"):
        x + other
    with pytest.raises(RuntimeError, match="Attempting to broadcast a dimension of length j"):
        ember.where(x > 2, x, other)
    same = ember.nested.nested_tensor_from_jagged(ember.ones(12), x.offsets(), x.lengths())
    assert (x + same).unbind()[1].tolist() == [5.0, 6.0]


def test_dense_operand_of_the_ragged_dim():
    x = _nt((2,), (4,))
    assert [c.tolist() for c in (x * ember.tensor([[2.0]])).unbind()] == [[0.0, 2.0],
                                                                         [0.0, 2.0, 4.0, 6.0]]
    with pytest.raises(RuntimeError, match=r"mul.Tensor with inputs of shapes ember.Size\(\[2, "
                                           r"j\d+\]\) and ember.Size\(\[1, 4\]\)"):
        x * ember.ones(1, 4)
    with pytest.raises(RuntimeError, match=r"shapes ember.Size\(\[5\]\) and ember.Size\(\[2, "):
        ember.maximum(ember.ones(5), x)       # (named in the arguments' order)
    with pytest.raises(RuntimeError, match=r"pow.Tensor_Tensor with inputs"):
        ember.pow(x, ember.ones(5))
    h = _holes().unsqueeze(-1)
    assert (h + ember.ones(1, 1, 1)).unbind()[1].flatten().tolist() == [5.0, 6.0]


def test_jagged_node_names():
    x = _nt((2, 4), (3, 4), grad=True)
    w = ember.ones(3, 4)
    assert _node(x.view(2, -1, 4)) == "ViewBackwardAutogradNestedTensor0"
    assert _node(x.unflatten(-1, (2, 2))) == "ViewBackwardAutogradNestedTensor0"
    assert _node(x.sum()) == "SumBackwardAutogradNestedTensor0"
    assert _node(x.sum(-1)) == "SumBackwardAutogradNestedTensor1"
    assert _node(x.mean()) == "MeanBackwardAutogradNestedTensor0"
    assert _node(F.linear(x, w)) == "LinearBackward0"
    assert _node(x @ w.t()) == "MatmulBackward0"
    assert _node(x.chunk(2, -1)[0]) == "ChunkBackwardAutogradNestedTensor0"
    assert _node(x.split([1, 3], -1)[0]) == "SplitWithSizesBackwardAutogradNestedTensor0"
    assert _node(x.unsqueeze(2).squeeze(2)) == "SqueezeBackwardAutogradNestedTensor0"
    assert _node(x.softmax(1)) == "SoftmaxBackward0"
    assert _node(x.transpose(1, 2)) == "TransposeBackward0"
    assert _node(F.dropout(x, 0.5, training=False)) == "NativeDropoutBackward0"
    assert _node(ember.nested.to_padded_tensor(x, 0.0)) == "ToPaddedTensorBackward0"
    assert {_node(c) for c in x.unbind()} == {"UnbindBackwardAutogradNestedTensor0"}
    q = x.unflatten(-1, (2, 2)).transpose(1, 2)
    assert _node(F.scaled_dot_product_attention(q, q, q)) == "TransposeBackward0"
    x.sum().backward()
    assert x.grad.values().tolist() == [[1.0] * 4] * 5


def test_jagged_refusals_word_pytorchs_messages():
    x, x1 = _nt((2, 3), (4, 3)), _nt((2,), (4,))
    cases = [
        (lambda: x.transpose(2, 0), RuntimeError,
         r"transpose\(\): not supported for NestedTensor on dim=0"),
        (lambda: x.transpose(0, 1), ValueError,
         "Transpose is not supported on the batch dimension for jagged NT"),
        (lambda: x.log_softmax(1), RuntimeError,
         r"log_softmax\(\): not supported when reducing along the ragged dimension"),
        (lambda: F.layer_norm(x1, (4,)), RuntimeError,
         r"layer_norm\(\): not supported for NestedTensor objects with 2 or fewer "
         r"dimensions"),
        (lambda: F.linear(x1, ember.ones(3, 3)), RuntimeError,
         r"mat1 and mat2 shapes cannot be multiplied \(1x6 and 3x3\)"),
        (lambda: ember.matmul(x1, ember.ones(3, 3)), RuntimeError,
         r"matmul\(\): not supported between inputs of shapes \(2, j\d+\)"),
        (lambda: ember.bmm(x1, ember.ones(2, 3, 1)), ValueError, r"bmm\(\): input must be 3D"),
        (lambda: ember.bmm(x, x.transpose(-1, -2)), RuntimeError,
         r"matmul\(\): not supported between"),
        (lambda: ember.bmm(x, ember.ones(2, 4, 2)), RuntimeError,
         r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: "
         r"\[2, 4\]."),
        (lambda: x.split([1, 1], 0), RuntimeError,
         r"split_with_sizes\(\): not supported for NestedTensor on dim=0"),
        (lambda: F.linear(_holes().unsqueeze(-1), ember.ones(2, 1)), ValueError,
         r"linear_default\(input: jt, weight: t, bias: t\?\): expected input to be a "
         r"contiguous"),
        (lambda: F.dropout(_holes(), 0.5, training=False), ValueError,
         r"native_dropout_default"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind, match=message):
            call()


def test_jagged_sdpa_refuses_what_pytorchs_cpu_kernels_refuse():
    q = _nt((2, 4), (3, 4)).unflatten(-1, (2, 2)).transpose(1, 2)
    with pytest.raises(RuntimeError, match="No viable backend"):
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    out = F.scaled_dot_product_attention(q, q, q).transpose(1, 2)
    assert tuple(out.unbind()[1].shape) == (3, 2, 2)


def test_strided_ops_on_irregular_dims():
    x = _nt((5,), (1,), layout=ember.strided)
    with pytest.raises(RuntimeError, match="same trailing dimension, instead last dimension "
                                           "equals:  5\n 1\n"):
        x.chunk(2, -1)
    y = _nt((2, 3), (3, 4), layout=ember.strided)
    with pytest.raises(RuntimeError, match="same trailing dimension"):
        F.linear(y, ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="cat\\(\\): only nested tensors with a single "
                                           "ragged dim next to the batch dim"):
        ember.cat([y, y], -1)
    z = _nt((1, 3), (2, 3), layout=ember.strided)
    assert [tuple(c.shape) for c in z.squeeze(1).unbind()] == [(1, 3), (2, 3)]
    assert [tuple(c.shape) for c in _nt((1, 3), (1, 3), layout=ember.strided).squeeze(1)
            .unbind()] == [(3,), (3,)]


def test_strided_4d_nested_times_dense_matrix():
    x = _nt((2, 2, 3), (1, 2, 3), grad=True, layout=ember.strided)
    y = ember.matmul(x, ember.ones(3, 1))
    assert _node(y) == "MatmulBackward0"
    assert y.unbind()[1].flatten().tolist() == [3.0, 12.0]
    with pytest.raises(RuntimeError, match="Expected both to be nested, but got a nested self"):
        ember.matmul(_nt((2, 3), (1, 3), layout=ember.strided), ember.ones(3, 1))


def test_holes_refuse_reductions_over_the_ragged_dim():
    x = _holes()
    with pytest.raises(RuntimeError, match=r"softmax\(\): not supported where lengths is not "
                                           r"None if reducing across the ragged dimension"):
        x.softmax(1)
    with pytest.raises(RuntimeError, match=r"sum\(\): reducing across the ragged dimension is "
                                           r"not supported for non-contiguous nested tensors"):
        ember.sum(x, [-1, 0])
    assert x.unsqueeze(-1).softmax(-1).unbind()[1].flatten().tolist() == [1.0, 1.0]


def test_strided_flatten_of_one_dim_is_the_input():
    x = _nt((2, 3), (1, 3), layout=ember.strided)
    assert x.flatten(-1, -1) is x and x.flatten(1, 1) is x
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        x.flatten(2, 1)
    with pytest.raises(RuntimeError, match="doesn't support sizes"):
        x.flatten(1, 2)


def test_strided_unflatten_checks_the_sizes_first():
    x = _nt((2, 4), (3, 4), layout=ember.strided)
    with pytest.raises(RuntimeError, match=r"Provided sizes \[3, -1\] don't multiply up to the "
                                           r"size of dim 2 \(4\)"):
        x.unflatten(-1, (3, -1))
    with pytest.raises(RuntimeError, match="unflatten got an unexpected error:\nGiven "
                                           "dimension 1 is irregular"):
        x.unflatten(1, (1, -1))
    with pytest.raises(RuntimeError, match="doesn't support sizes"):
        x.unflatten(-1, (2, 2))


def test_strided_messages_name_the_dims_as_given():
    x = _nt((2,), (5,), layout=ember.strided)
    with pytest.raises(RuntimeError, match="Given dimension -1 is irregular"):
        x.size(-1)
    y = _nt((2, 3, 4), (1, 3, 4), layout=ember.strided)
    with pytest.raises(RuntimeError, match="The shape at dimension 1of normalized_shape doesn't "
                                           "match the input"):
        F.layer_norm(y, (3, 5), ember.ones(3, 5), ember.ones(3, 5))
