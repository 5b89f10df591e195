"""Loss edge cases around targets and weights: zero total weight, target dtypes, weight
shapes and dtypes, unbatched shapes, and the sign of zero gradients (values from PyTorch)."""

import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _logits():
    return (ember.arange(15.0).reshape(3, 5) * 0.37).sin().requires_grad_()


def test_nll_loss_gradient_is_positive_zero_off_the_target_class():
    x = ember.zeros(2, 3, 2, requires_grad=True)
    F.nll_loss(x, ember.tensor([[0, 2], [1, -100]])).backward()
    g = x.grad.numpy()
    assert g.reshape(-1).tolist() == pytest.approx([-1 / 3, 0, 0, 0, 0, -1 / 3, 0, 0, -1 / 3, 0,
                                                    0, 0])
    assert not np.signbit(g[g == 0]).any()


def test_cross_entropy_mean_over_zero_total_weight_is_nan():
    x, t = _logits(), ember.tensor([1, 0, 4])
    weight = ember.tensor([0.0, 0.0, 1.0, 1.0, 0.0])
    assert math.isnan(F.cross_entropy(x, t, weight=weight).item())
    # smoothing adds terms that are not 0, but 0/0 stays NaN (PyTorch: nan, not inf)
    loss = F.cross_entropy(x, t, weight=weight, label_smoothing=0.2)
    assert math.isnan(loss.item())
    loss.backward()
    assert np.isnan(x.grad.numpy()).all()


def test_zero_total_weight_gradient_is_nan_where_kept_and_zero_where_ignored():
    x, t = _logits(), ember.tensor([1, -100, 4])
    weight = ember.tensor([0.0, 0.0, 1.0, 1.0, 0.0])
    F.cross_entropy(x, t, weight=weight).backward()
    g = x.grad.numpy()
    assert np.isnan(g[[0, 2]]).all() and (g[1] == 0).all()
    x.grad = None
    F.nll_loss(x, t, weight=weight).backward()
    g = x.grad.numpy()
    assert np.isnan(g[0, 1]) and np.isnan(g[2, 4])
    assert np.count_nonzero(np.isnan(g)) == 2 and (g[~np.isnan(g)] == 0).all()


def test_all_targets_ignored_still_gives_zero_gradient():
    x = _logits()
    loss = F.cross_entropy(x, ember.tensor([-100, -100, -100]), label_smoothing=0.3)
    assert math.isnan(loss.item())
    loss.backward()
    assert (x.grad.numpy() == 0).all()


def test_cross_entropy_probability_targets_refuse_a_class_ignore_index():
    x = _logits()
    p = ember.softmax(ember.arange(15.0).reshape(3, 5).cos(), 1)
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point "
                                           "target"):
        F.cross_entropy(x, p, ignore_index=0)
    loss = F.cross_entropy(x, p, ignore_index=-1)      # negative: nothing to ignore
    assert loss.item() == pytest.approx(F.cross_entropy(x, p).item())


@pytest.mark.parametrize("shape, message", [
    ((3,), r"Attempting to broadcast a dimension of length 3 at -1! Mismatching argument at "
           r"index 1 had ember\.Size\(\[3\]\); but expected shape should be broadcastable to "
           r"\[2, 4\]"),
    ((3, 2, 4), r"output with shape \[2, 4\] doesn't match the broadcast shape \[3, 2, 4\]"),
])
def test_binary_cross_entropy_weight_shape_errors(shape, message):
    x, y = ember.full((2, 4), 0.3), ember.ones(2, 4)
    with pytest.raises(RuntimeError, match=message):
        F.binary_cross_entropy(x, y, weight=ember.ones(shape))


@pytest.mark.parametrize("dtype, weight_dtype", [
    (ember.float32, ember.float64), (ember.float16, ember.float32),
    (ember.bfloat16, ember.float64), (ember.float32, ember.int64)])
def test_binary_cross_entropy_keeps_the_inputs_dtype_whatever_the_weights(dtype, weight_dtype):
    x = ember.full((2, 4), 0.3, dtype=dtype, requires_grad=True)
    y = ember.ones(2, 4, dtype=dtype)
    loss = F.binary_cross_entropy(x, y, weight=ember.full((4,), 2, dtype=weight_dtype))
    assert loss.dtype is dtype
    assert loss.float().item() == pytest.approx(-2 * math.log(0.3), rel=1e-2)
    loss.backward()
    assert x.grad.dtype is dtype


def test_broadcast_shapes_error_names_a_size_as_given():
    with pytest.raises(RuntimeError, match=r"index 1 had ember\.Size\(\[3\]\);"):
        ember.broadcast_shapes(ember.Size([2, 4]), ember.Size([3]))
    with pytest.raises(RuntimeError, match=r"index 1 had \(3,\);"):
        ember.broadcast_shapes((2, 4), (3,))


@pytest.mark.parametrize("dtype, name", [
    (ember.int32, "Int"), (ember.uint8, "Byte"), (ember.int16, "Short"), (ember.bool, "Bool")])
def test_hinge_losses_need_long_targets(dtype, name):
    x = ember.zeros(3, 4)
    with pytest.raises(RuntimeError, match=f"expected scalar type Long but found {name}"):
        F.multi_margin_loss(x, ember.tensor([1, 0, 1]).to(dtype))
    with pytest.raises(RuntimeError, match=f"expected scalar type Long but found {name}"):
        F.multilabel_margin_loss(x, ember.zeros(3, 4).to(dtype))


def test_unbatched_multi_margin_loss_takes_the_targets_shape():
    x = ember.tensor([0.1, 0.5, -0.3, 2.0], requires_grad=True)
    loss = F.multi_margin_loss(x, ember.tensor([2]), reduction="none")
    assert loss.shape == (1,) and loss.tolist() == pytest.approx([1.625])
    assert F.multi_margin_loss(x, ember.tensor(2), reduction="none").shape == ()
    loss.sum().backward()
    assert x.grad.tolist() == pytest.approx([0.25, 0.25, -0.75, 0.25])


def test_ctc_loss_refuses_empty_log_probs_and_float_lengths():
    targets, lengths = ember.zeros(0, 2, dtype=ember.int64), ember.zeros(0, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="log_probs tensor must not be empty"):
        F.ctc_loss(ember.zeros(5, 0, 4), targets, lengths, lengths)
    log_probs, targets = ember.zeros(5, 2, 4), ember.ones(2, 1, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="input_lengths must be integral"):
        F.ctc_loss(log_probs, targets, ember.tensor([5.0, 5.0]), ember.tensor([1, 1]))
    with pytest.raises(RuntimeError, match="target_lengths must be integral"):
        F.ctc_loss(log_probs, targets, ember.tensor([5, 5]), ember.tensor([1.0, 1.0]))


@pytest.mark.parametrize("loss", [F.nll_loss, F.cross_entropy])
def test_one_dimensional_input_needs_a_target_of_one_class(loss):
    with pytest.raises(ValueError, match="For 1D input, 1D target must have size 1, but got "
                                         "target size: 2"):
        loss(ember.zeros(3), ember.tensor([1, 2]))


def test_cross_entropy_probability_targets_promote_with_the_weight():
    x = ember.linspace(-1, 1, 6).reshape(2, 3).requires_grad_()
    p = ember.tensor([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    loss = F.cross_entropy(x, p, weight=ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64),
                           label_smoothing=0.1)
    assert loss.dtype is ember.float64
    assert loss.item() == pytest.approx(F.cross_entropy(
        x.double(), p.double(), weight=ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64),
        label_smoothing=0.1).item())
    loss.backward()
    assert x.grad.dtype is ember.float32
    with pytest.raises(RuntimeError, match=r"cross_entropy: weight tensor should be defined "
                                           r"either for all 3 classes or no classes but got "
                                           r"weight tensor of shape: \[1, 3\]"):
        F.cross_entropy(x, p, weight=ember.ones(1, 3))


def test_margin_ranking_loss_of_integers_is_float():
    loss = F.margin_ranking_loss(ember.tensor([1, 2]), ember.tensor([2, 1]), ember.tensor([1, -1]),
                                 reduction="none")
    assert loss.dtype is ember.float32 and loss.tolist() == [1.0, 1.0]
    assert F.margin_ranking_loss(ember.tensor([1, 2]), ember.tensor([2, 1]),
                                 ember.tensor([1, -1])).item() == 1.0


@pytest.mark.parametrize("input, target", [
    (ember.tensor([1.0, 2.0]), ember.tensor([True, False])),
    (ember.tensor([1, 2]), ember.tensor([1.0, 2.0]))])
def test_kl_div_refuses_integral_inputs(input, target):
    with pytest.raises(RuntimeError, match="kl_div: Integral inputs not supported."):
        F.kl_div(input, target, reduction="sum")
