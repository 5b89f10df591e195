"""What round 36's loss fuzzer found (tests/parity/test_parity_loss_fuzz_round36.py), pinned
with PyTorch 2.13's results: NaN terms of the margin kernels, the order of autograd's refusal
of a weight or target that requires grad, argument-check orders, signed zeros, dtypes of
mixed-precision losses, ctc_loss's unbatched targets and node names, and empty batches."""

import math

import numpy as np
import pytest

import ember as torch
import ember.nn.functional as F


def _raises(cls, text, fn):
    with pytest.raises(cls) as info:
        fn()
    assert str(info.value).replace("ember", "torch") == text


def _refused(kernel, argument):
    return (f"The function '{kernel}' is not differentiable with respect to argument "
            f"'{argument}'. This input cannot have requires_grad True.")


# --- the margin kernels add only the terms > 0: a NaN term is skipped -------------------------

def test_multi_margin_loss_skips_nan_terms():
    x = torch.tensor([0.6703, math.nan, 1.0219, -0.6349])
    w = torch.tensor([0.1326, 0.0, 0.2203, 0.7877])
    assert F.multi_margin_loss(x, torch.tensor(1), p=1, weight=w).item() == 0.0
    x = torch.tensor([[0.5, math.nan, 0.2], [0.2, 0.1, 0.3]])
    loss = F.multi_margin_loss(x, torch.tensor([0, 2]), reduction="none")
    assert loss[0].item() == pytest.approx(0.7 / 3)       # the NaN term skipped
    assert loss[1].item() == pytest.approx((0.9 + 0.8) / 3)


def test_multilabel_margin_loss_skips_nan_terms():
    x = torch.tensor([[1.1124, math.nan], [-0.8126, 0.3813], [-0.0326, -0.4615]],
                     dtype=torch.float64, requires_grad=True)
    t = torch.tensor([[1, 1], [0, 0], [-1, 1]])
    loss = F.multilabel_margin_loss(x, t)
    # (row 0's one pair is NaN, skipped; row 1 counts its pair once per listed target)
    assert loss.item() == pytest.approx(2 * (1 + 0.8126 + 0.3813) / 2 / 3, rel=1e-12)
    loss.backward()
    assert np.isfinite(x.grad.numpy()).all()


# --- autograd refuses a weight (target) that requires grad before the kernel's checks -------

W3 = dict(dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("call, kernel, argument", [
    (lambda: F.nll_loss(torch.randn(3, 3, dtype=torch.float64),
                        torch.tensor([1, 2, 0], dtype=torch.int32), weight=torch.ones(3, **W3)),
     "nll_loss_forward", "weight"),
    (lambda: F.nll_loss(torch.randn(3, dtype=torch.float64), torch.tensor([1, 2]),
                        weight=torch.ones(3, **W3)), "nll_loss_forward", "weight"),
    (lambda: F.nll_loss(torch.randn(2, 3, 2, 2, dtype=torch.float64),
                        torch.zeros(2, 2, 2, dtype=torch.uint8), weight=torch.ones(4, **W3)),
     "nll_loss2d_forward", "weight"),
    (lambda: F.cross_entropy(torch.randn(3, 3, dtype=torch.float64),
                             torch.tensor([1, 2, 0], dtype=torch.int32),
                             weight=torch.ones(3, **W3), label_smoothing=0.2),
     "nll_loss_forward", "weight"),
    (lambda: F.multi_margin_loss(torch.randn(3, 1, dtype=torch.float64), torch.tensor([0, 0, 0]),
                                 weight=torch.ones(2, **W3)), "multi_margin_loss", "weight"),
    (lambda: F.multi_margin_loss(torch.randn(2, dtype=torch.float64),
                                 torch.tensor(1, dtype=torch.uint8), weight=torch.ones(2, **W3)),
     "multi_margin_loss", "weight"),
    (lambda: F.binary_cross_entropy(torch.rand((), dtype=torch.float64), torch.tensor(1),
                                    weight=torch.ones(5, **W3)), "binary_cross_entropy", "weight"),
    (lambda: F.binary_cross_entropy_with_logits(torch.randn(2, dtype=torch.float64),
                                                torch.tensor([1, 0]), weight=torch.ones(2, **W3)),
     "binary_cross_entropy_with_logits", "weight"),
    (lambda: F.soft_margin_loss(torch.randn((), dtype=torch.float64), torch.ones(1, **W3)),
     "soft_margin_loss", "target"),
])
def test_refused_grad_comes_before_kernel_checks(call, kernel, argument):
    _raises(RuntimeError, _refused(kernel, argument), call)


def test_composite_checks_come_before_the_refused_grad():
    w = torch.ones(3, **W3)
    _raises(ValueError, "Expected input batch_size (3) to match target batch_size (2).",
            lambda: F.nll_loss(torch.randn(3, 3), torch.tensor([1, 2]), weight=w))
    _raises(RuntimeError, "Expected target size [3, 2], got [3, 3]",
            lambda: F.nll_loss(torch.randn(3, 3, 2), torch.zeros(3, 3, dtype=torch.int64),
                               weight=w))
    _raises(ValueError, "avg is not a valid value for reduction",
            lambda: F.nll_loss(torch.randn(3, 3), torch.tensor([1, 2, 0]), weight=w,
                               reduction="avg"))


# --- argument checks in PyTorch's order --------------------------------------------------------

def test_multilabel_soft_margin_loss_bad_reduction_message():
    _raises(ValueError, "avg is not valid",
            lambda: F.multilabel_soft_margin_loss(torch.randn(3), torch.ones(3), reduction="avg"))


def test_margin_kernels_check_values_and_input_dtype_before_target_dtype():
    x = torch.randn(3, 3, dtype=torch.float64)
    _raises(RuntimeError, "argument #2 'target' is out of range",
            lambda: F.multilabel_margin_loss(x, torch.tensor([[1, 2, -1]] * 3).to(torch.uint8)))
    _raises(NotImplementedError,
            "\"multilabel_margin_loss_forward_out_frame\" not implemented for 'Half'",
            lambda: F.multilabel_margin_loss(x.half(), torch.tensor([[1, 2, 0]] * 3,
                                                                    dtype=torch.int32)))
    _raises(NotImplementedError, "\"multi_margin_loss_cpu_kernel\" not implemented for 'Half'",
            lambda: F.multi_margin_loss(x.half(), torch.tensor([1, 2, 1], dtype=torch.uint8)))
    _raises(RuntimeError, "expected scalar type Long but found Byte",
            lambda: F.multi_margin_loss(x, torch.tensor([1, 2, 1], dtype=torch.uint8)))


@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss"])
def test_pointwise_losses_broadcast_before_reading_the_reduction(name):
    _raises(RuntimeError, "The size of tensor a (2) must match the size of tensor b (3) at "
            "non-singleton dimension 1",
            lambda: getattr(F, name)(torch.zeros(1, 2, 1), torch.zeros(2, 3, 2), reduction="avg"))


# --- values, dtypes and zeros -------------------------------------------------------------------

def test_cross_entropy_signed_zeros():
    one = torch.zeros(1, dtype=torch.float64)
    # probabilities: the sums negated last (-0.0); class indices: added to 0 (+0.0)
    assert math.copysign(1, F.cross_entropy(one, torch.ones(1, dtype=torch.float64)).item()) < 0
    assert math.copysign(1, F.cross_entropy(one[None], one[None] + 1, reduction="sum").item()) < 0
    assert math.copysign(1, F.cross_entropy(one, torch.tensor(0), reduction="none").item()) > 0


def test_poisson_nll_loss_full_keeps_the_input_dtype():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float16)
    t = torch.tensor([1, 3, 4], dtype=torch.int32)
    loss = F.poisson_nll_loss(x, t, full=True, reduction="none")
    assert loss.dtype is torch.float16


def test_mixed_precision_losses_take_log_softmax_and_log_sigmoid_in_the_input_dtype():
    x = torch.tensor([[0.3, -1.2, 0.5], [2.0, 0.1, -0.7]])
    t = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], dtype=torch.float64)
    got = F.cross_entropy(x, t, reduction="none")
    assert got.dtype is torch.float64
    want = -(F.log_softmax(x, 1).double() * t).sum(1)
    assert np.array_equal(got.numpy(), want.numpy())
    got = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    want = (1 - t) * x - F.logsigmoid(x)
    assert np.array_equal(got.numpy(), want.numpy())


def test_l1_loss_broadcasts_a_zero_dim_target_before_promoting():
    loss = F.l1_loss(torch.ones(4, dtype=torch.bfloat16), torch.tensor(0.5, dtype=torch.float64))
    assert loss.dtype is torch.float64 and loss.item() == 0.5


@pytest.mark.parametrize("name", ["huber_loss", "smooth_l1_loss"])
def test_huber_gradient_of_nan_difference_is_nan(name):
    x = torch.tensor([0.2, 0.7], dtype=torch.float64, requires_grad=True)
    getattr(F, name)(x, torch.tensor([0.1, math.nan], dtype=torch.float64), reduction="sum")\
        .backward()
    assert x.grad[0].item() == pytest.approx(0.1 if name == "huber_loss" else 0.1)
    assert math.isnan(x.grad[1].item())


# --- ctc_loss --------------------------------------------------------------------------------

def _log_probs(*shape):
    return torch.randn(*shape, dtype=torch.float64).log_softmax(-1).requires_grad_()


def test_ctc_unbatched_target_is_concatenated():
    lp = _log_probs(3, 2)
    _raises(RuntimeError, "Expected tensor to have size 1 at dimension 0, but got size 3 for "
            "argument #2 'targets' (while checking arguments for ctc_loss_allocate_outputs)",
            lambda: F.ctc_loss(lp, torch.tensor([1, 1, 1]), [2], [1], reduction="none"))
    whole = F.ctc_loss(lp, torch.tensor([1]), [3], [1], reduction="none")
    batched = F.ctc_loss(lp[:, None], torch.tensor([[1]]), [3], [1], reduction="none")
    assert whole.shape == () and whole.item() == pytest.approx(batched.item())


def test_ctc_checks_targets_before_input_lengths():
    lp = _log_probs(5, 2, 3)
    _raises(RuntimeError, "Expected tensor to have size 2 at dimension 0, but got size 3 for "
            "argument #2 'targets' (while checking arguments for ctc_loss_allocate_outputs)",
            lambda: F.ctc_loss(lp, torch.tensor([[1, 2], [1, 1], [2, 2]]), [5, 7], [2, 2]))
    _raises(RuntimeError, "Expected tensor to have size 3 at dimension 0, but got size 4 for "
            "argument #2 'targets' (while checking arguments for ctc_loss_allocate_outputs)",
            lambda: F.ctc_loss(lp, torch.tensor([1, 2, 1, 1]), [5, 7], [2, 1]))


@pytest.mark.parametrize("batched, zero_infinity, name", [
    (True, False, "CtcLossBackward0"), (True, True, "WhereBackward0"),
    (False, False, "SqueezeBackward1"), (False, True, "SqueezeBackward1")])
def test_ctc_unreduced_node_names(batched, zero_infinity, name):
    lp = _log_probs(4, 1, 3) if batched else _log_probs(4, 3)
    targets = torch.tensor([[1, 2]]) if batched else torch.tensor([1, 2])
    loss = F.ctc_loss(lp, targets, [4], [2], reduction="none", zero_infinity=zero_infinity)
    assert type(loss.grad_fn).__name__ == name


# --- empty batches ---------------------------------------------------------------------------

def test_class_losses_of_empty_batches():
    _raises(IndexError, "Dimension specified as 0 but tensor has no dimensions",
            lambda: F.nll_loss(torch.zeros(0, 2), torch.tensor(0), reduction="sum"))
    _raises(IndexError, "Dimension specified as 0 but tensor has no dimensions",
            lambda: F.cross_entropy(torch.zeros(0, 2), torch.tensor(0)))
    target = torch.zeros(0, 4, 3, dtype=torch.uint8)
    assert F.nll_loss(torch.zeros(0, 4, 4, 3), target, reduction="sum").item() == 0
    _raises(RuntimeError, "expected scalar type Long but found Byte",
            lambda: F.nll_loss(torch.zeros(0, 4, 4, 3), target, reduction="none"))
    x = torch.zeros(0, 3, dtype=torch.float64, requires_grad=True)
    loss = F.cross_entropy(x, torch.zeros(0, 3, dtype=torch.float64))
    assert type(loss.grad_fn).__name__ == "NegBackward0" and math.isnan(loss.item())


def test_margin_losses_of_empty_batches_skip_dtype_checks():
    x = torch.zeros(0, 4, dtype=torch.float64, requires_grad=True)
    loss = F.multi_margin_loss(x, torch.zeros(0, dtype=torch.uint8), reduction="none")
    assert loss.shape == (0,) and type(loss.grad_fn).__name__ == "MultiMarginLossBackward0"
    F.multi_margin_loss(x, torch.zeros(0, dtype=torch.uint8), p=2).backward()
    assert x.grad.shape == (0, 4)
    assert F.multi_margin_loss(torch.zeros(0, 4, dtype=torch.bfloat16), torch.zeros(0).long(),
                               reduction="none").dtype is torch.bfloat16
    assert F.multilabel_margin_loss(torch.zeros(0, 4, dtype=torch.float16),
                                    torch.zeros(0, 4, dtype=torch.int32),
                                    reduction="none").shape == (0,)
