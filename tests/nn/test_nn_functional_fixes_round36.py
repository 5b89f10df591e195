"""Regression tests for the nn.functional fuzzer's findings (round 36): each as PyTorch 2.13
behaves, checked without torch."""

import math

import pytest

import ember
import ember.nn.functional as F


def test_local_response_norm_keeps_a_nan_in_its_window():
    # window sums were differences of a cumulative sum: a NaN (or inf, or a huge square)
    # reached every later channel
    x = ember.tensor([[[math.nan], [1.0], [2.0], [3.0]], [[1e10], [1.0], [2.0], [3.0]]],
                     dtype=ember.float64)
    y = F.local_response_norm(x, 3, alpha=0.5)
    assert math.isnan(y[0, 0, 0]) and math.isnan(y[0, 1, 0])
    assert y[0, 2, 0].item() == pytest.approx(2 / (1 + 0.5 / 3 * 14) ** 0.75, rel=1e-12)
    assert y[1, 3, 0].item() == pytest.approx(3 / (1 + 0.5 / 3 * 13) ** 0.75, rel=1e-12)
    assert y[1, 2, 0].item() == pytest.approx(2 / (1 + 0.5 / 3 * 14) ** 0.75, rel=1e-12)


@pytest.mark.parametrize("fn", [F.dropout, F.alpha_dropout, F.feature_alpha_dropout])
def test_dropout_of_a_0d_tensor(fn):
    ember.manual_seed(0)
    x = ember.tensor(1.5)
    if fn is F.feature_alpha_dropout:
        with pytest.raises(RuntimeError, match="at least 2 dimensions"):
            fn(x, 0.5, True)
        return
    y = fn(x, 0.5, True)
    assert y.shape == () and y.dtype == ember.float32
    assert ember.native_dropout(x, 0.5, True)[1].shape == ()


@pytest.mark.parametrize("fn", [F.dropout1d, F.dropout3d])
def test_unbatched_feature_dropout_in_place(fn):
    # as PyTorch: unsqueeze_ and squeeze_ of the input itself, an error on a leaf that
    # requires grad even when nothing is dropped
    leaf = ember.ones(2, 3, requires_grad=True)
    with pytest.warns(UserWarning) if fn is F.dropout3d else _nothing():
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            fn(leaf, 0.0, True, inplace=True)
    x = leaf.clone()
    v = x._version
    with pytest.warns(UserWarning) if fn is F.dropout3d else _nothing():
        y = fn(x, 0.5, False, inplace=True)
    assert y is x and x._version - v == 2 and y.grad_fn.name() == "SqueezeBackward4"
    assert x.shape == (2, 3)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_momentum_none_is_refused_by_the_functional_norms():
    x = ember.ones(2, 3, 4)
    with pytest.raises(TypeError, match=r"batch_norm\(\): argument 'momentum' \(position 7\) "
                                        r"must be float, not NoneType"):
        F.batch_norm(x, None, None, training=True, momentum=None)
    with pytest.raises(TypeError, match=r"instance_norm\(\): argument 'momentum'"):
        F.instance_norm(x, momentum=None)
    m = ember.nn.BatchNorm1d(3, momentum=None)      # (the module averages itself)
    m(ember.randn(4, 3))
    assert int(m.num_batches_tracked) == 1


def test_group_norm_needs_more_than_one_value_per_group():
    for shape, groups, size in (((1, 3), 3, [1, 3]), ((1, 4), 3, [1, 3]),
                                ((1, 4, 1), 4, [1, 4, 1])):
        with pytest.raises(ValueError, match=rf"Expected more than 1 value per channel when "
                                             rf"training, got input size \[{size[0]}, {size[1]}"):
            F.group_norm(ember.ones(shape), groups)
    assert F.group_norm(ember.ones(1, 4), 2).shape == (1, 4)


def test_embedding_bag_checks_the_mode_before_the_offsets():
    w = ember.ones(4, 2)
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        F.embedding_bag(ember.tensor([3]), w, ember.tensor([1, 2]), mode="bad")
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported"):
        F.embedding_bag(ember.tensor([3]), w, ember.tensor([1, 2]), mode="mean",
                        per_sample_weights=ember.ones(1))
    with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0"):
        F.embedding_bag(ember.tensor([3]), w, ember.tensor([1, 2]))


def test_embedding_renorm_names_its_own_check():
    for call in (lambda: F.embedding(ember.tensor([1.0]), ember.ones(3, 2), max_norm=1.0),
                 lambda: F.embedding_bag(ember.tensor([1.0]), ember.ones(3, 2),
                                         ember.tensor([0]), max_norm=1.0)):
        with pytest.raises(RuntimeError, match=r"argument #2 'indices'.*embedding_renorm_\)"):
            call()


def test_results_laid_out_as_pytorch_lays_them():
    x = ember.randn(3, 4, 2, dtype=ember.float64).permute(2, 0, 1)     # strides (1, 8, 2)
    assert F.logsigmoid(x).stride() == (12, 4, 1)
    assert F.logsigmoid(ember.tensor(0.5, dtype=ember.float16)).shape == ()
    assert F.rrelu(x).stride() == (12, 4, 1)
    assert F.rrelu(x, training=True).stride() == (12, 4, 1)
    assert F.batch_norm(x, None, None, training=True).stride() == (12, 4, 1)
    assert F.dropout(x, 0.5).stride() == (1, 8, 2)     # input * mask: the input's layout
    assert F.alpha_dropout(x, 0.5, True).stride() == (1, 8, 2)
    leaf = ember.randn(4, 3, dtype=ember.float64, requires_grad=True)
    y = F.rms_norm(leaf.t().contiguous().t(), [3])
    assert y.stride() == (3, 1) and y.grad_fn.name() == "CloneBackward0"
    assert F.rms_norm(leaf, [3]).grad_fn.name() == "MulBackward0"


def test_instance_norm_below_two_dims_and_pairwise_distance_of_scalars():
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dim"):
        F.instance_norm(ember.tensor(1.0), ember.zeros(3), ember.ones(3),
                        use_input_stats=False)
    a = ember.tensor(1.0, requires_grad=True)
    assert F.pairwise_distance(a, ember.tensor(2.0)).grad_fn.name() == "NormBackward1"


def test_rrelu_training_refuses_float16_on_cpu():
    with pytest.raises(NotImplementedError, match="rrelu_with_noise_out_cpu.*Half"):
        F.rrelu(ember.ones(3, dtype=ember.float16), training=True)
    assert F.rrelu(ember.ones(3, dtype=ember.bfloat16), training=True).dtype == ember.bfloat16
    assert F.rrelu(ember.ones(3, dtype=ember.float16)).dtype == ember.float16
