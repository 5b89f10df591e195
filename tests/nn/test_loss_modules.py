"""The loss modules: constructor defaults, buffers, the deprecated size_average/reduce
arguments, repr, and forward equal to the functional form."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

RNG = np.random.default_rng(1)


def _t(shape, low=-2.0, high=2.0, grad=False):
    return ember.tensor(RNG.uniform(low, high, shape), requires_grad=grad)


def _sign(n):
    return ember.tensor(np.where(RNG.random(n) < 0.5, -1.0, 1.0))


X, T, P = _t((3, 4)), _t((3, 4)), _t((3, 4), 0.1, 0.9)
CLASSES = ember.tensor([0, 3, 1])
W = _t((4,), 0.5, 1.5)
SIGNS = _sign(3)

# (module, options, functional call with the same options, inputs)
MODULES = [
    (nn.L1Loss, {}, lambda **k: F.l1_loss(X, T, **k), (X, T)),
    (nn.MSELoss, {}, lambda **k: F.mse_loss(X, T, **k), (X, T)),
    (nn.CrossEntropyLoss, {"weight": W, "ignore_index": 3, "label_smoothing": 0.1},
     lambda **k: F.cross_entropy(X, CLASSES, **k), (X, CLASSES)),
    (nn.NLLLoss, {"weight": W, "ignore_index": 1},
     lambda **k: F.nll_loss(X, CLASSES, **k), (X, CLASSES)),
    (nn.BCELoss, {"weight": W}, lambda **k: F.binary_cross_entropy(P, P, **k), (P, P)),
    (nn.BCEWithLogitsLoss, {"weight": W, "pos_weight": W * 2},
     lambda **k: F.binary_cross_entropy_with_logits(X, P, **k), (X, P)),
    (nn.KLDivLoss, {"log_target": True, "reduction": "batchmean"},
     lambda **k: F.kl_div(X, T, **k), (X, T)),
    (nn.HuberLoss, {"delta": 0.5}, lambda **k: F.huber_loss(X, T, **k), (X, T)),
    (nn.SmoothL1Loss, {"beta": 0.5}, lambda **k: F.smooth_l1_loss(X, T, **k), (X, T)),
    (nn.SoftMarginLoss, {}, lambda **k: F.soft_margin_loss(X, T.sign(), **k), (X, T.sign())),
    (nn.MultiLabelSoftMarginLoss, {"weight": W},
     lambda **k: F.multilabel_soft_margin_loss(X, P, **k), (X, P)),
    (nn.MultiLabelMarginLoss, {}, lambda **k: F.multilabel_margin_loss(
        X, ember.tensor([[0, 2, -1, 0]] * 3), **k), (X, ember.tensor([[0, 2, -1, 0]] * 3))),
    (nn.MultiMarginLoss, {"p": 2, "margin": 0.5, "weight": W},
     lambda **k: F.multi_margin_loss(X, CLASSES, **k), (X, CLASSES)),
    (nn.CosineEmbeddingLoss, {"margin": 0.1},
     lambda **k: F.cosine_embedding_loss(X, T, SIGNS, **k), (X, T, SIGNS)),
    (nn.MarginRankingLoss, {"margin": 0.2},
     lambda **k: F.margin_ranking_loss(X, T, T.sign(), **k), (X, T, T.sign())),
    (nn.HingeEmbeddingLoss, {"margin": 0.3},
     lambda **k: F.hinge_embedding_loss(X, T.sign(), **k), (X, T.sign())),
    (nn.TripletMarginLoss, {"margin": 0.5, "p": 1.0, "swap": True},
     lambda **k: F.triplet_margin_loss(X, T, P, **k), (X, T, P)),
    (nn.PoissonNLLLoss, {"log_input": False, "full": True},
     lambda **k: F.poisson_nll_loss(P, P * 3, **k), (P, P * 3)),
    (nn.GaussianNLLLoss, {"full": True}, lambda **k: F.gaussian_nll_loss(X, T, P, **k),
     (X, T, P)),
]


@pytest.mark.parametrize("cls,options,functional,inputs", MODULES,
                         ids=[m[0].__name__ for m in MODULES])
def test_forward_equals_functional(cls, options, functional, inputs):
    for reduction in ("none", "sum", options.get("reduction", "mean")):
        module = cls(**{**options, "reduction": reduction})
        want = functional(**{**options, "reduction": reduction})
        np.testing.assert_allclose(np.asarray(module(*inputs)), np.asarray(want))


@pytest.mark.parametrize("cls", [m[0] for m in MODULES] + [nn.CTCLoss,
                                                           nn.TripletMarginWithDistanceLoss],
                         ids=lambda c: c.__name__)
def test_defaults_and_repr(cls):
    module = cls()
    assert module.reduction == "mean"
    assert repr(module).startswith(f"{cls.__name__}(")
    if cls is not nn.TripletMarginWithDistanceLoss:
        assert repr(module) == f"{cls.__name__}()"
    assert not list(module.parameters())


def test_options_are_attributes_with_pytorchs_defaults():
    ce = nn.CrossEntropyLoss()
    assert (ce.ignore_index, ce.label_smoothing, ce.weight) == (-100, 0.0, None)
    assert nn.NLLLoss().ignore_index == -100
    assert (nn.HuberLoss().delta, nn.SmoothL1Loss().beta) == (1.0, 1.0)
    assert (nn.KLDivLoss().log_target, nn.MultiMarginLoss().p, nn.MultiMarginLoss().margin) == \
        (False, 1, 1.0)
    triplet = nn.TripletMarginLoss()
    assert (triplet.margin, triplet.p, triplet.eps, triplet.swap) == (1.0, 2.0, 1e-6, False)
    poisson = nn.PoissonNLLLoss()
    assert (poisson.log_input, poisson.full, poisson.eps) == (True, False, 1e-8)
    assert (nn.GaussianNLLLoss().full, nn.GaussianNLLLoss().eps) == (False, 1e-6)
    assert (nn.CTCLoss().blank, nn.CTCLoss().zero_infinity) == (0, False)
    assert (nn.MarginRankingLoss().margin, nn.CosineEmbeddingLoss().margin,
            nn.HingeEmbeddingLoss().margin) == (0.0, 0.0, 1.0)
    with pytest.raises(TypeError):
        nn.GaussianNLLLoss(True)            # keyword-only, as PyTorch


def test_weights_are_buffers():
    ce = nn.CrossEntropyLoss(weight=W)
    assert dict(ce.named_buffers()) == {"weight": W}
    assert not list(ce.parameters())
    bce = nn.BCEWithLogitsLoss(pos_weight=W)
    assert set(dict(bce.named_buffers())) == {"pos_weight"}
    assert bce.weight is None and bce.pos_weight is W
    assert set(dict(nn.MultiMarginLoss(weight=W).named_buffers())) == {"weight"}
    assert not dict(nn.CrossEntropyLoss().named_buffers())


def test_legacy_arguments_set_reduction_with_a_warning():
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning, match="please use reduction='none' instead"):
        assert nn.CrossEntropyLoss(reduce=False).reduction == "none"
    with pytest.warns(UserWarning, match="please use reduction='mean' instead"):
        assert nn.L1Loss(size_average=True, reduce=True, reduction="sum").reduction == "mean"


def test_constructor_errors():
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="MultiMarginLoss: expected weight to be None or 1D "
                                         "tensor, got 2D instead"):
        nn.MultiMarginLoss(weight=ember.ones(2, 2))
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater than "
                                         "0, got -1 instead"):
        nn.TripletMarginLoss(margin=-1)
    with pytest.raises(ValueError, match="TripletMarginWithDistanceLoss: expected margin to be "
                                         "greater than 0, got 0 instead"):
        nn.TripletMarginWithDistanceLoss(margin=0)
    with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
        nn.CrossEntropyLoss(reduction="foo")(X, CLASSES)


def test_ctc_module_and_backward():
    log_probs = _t((5, 2, 4), grad=True)
    lp = log_probs.log_softmax(2)
    targets, lengths = ember.tensor([[1, 2], [3, 3]]), ember.tensor([5, 4])
    module = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    loss = module(lp, targets, lengths, ember.tensor([2, 2]))
    np.testing.assert_allclose(loss.detach().numpy(), F.ctc_loss(
        lp, targets, lengths, ember.tensor([2, 2]), reduction="sum").detach().numpy())
    loss.backward()
    grad = np.asarray(log_probs.grad)
    assert np.isfinite(grad).all() and np.abs(grad).sum() > 0
    assert not grad[4, 1].any()        # past the second sample's input length


def test_triplet_with_distance_module_uses_the_given_function():
    module = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: (a - b).abs().sum(-1), margin=1.5, swap=True)
    want = (1.5 + (X - T).abs().sum(-1) - ember.minimum((X - P).abs().sum(-1),
                                                         (T - P).abs().sum(-1))).clamp_min(0)
    np.testing.assert_allclose(np.asarray(module(X, T, P)), np.asarray(want.mean()))
    default = nn.TripletMarginWithDistanceLoss()(X, T, P)
    np.testing.assert_allclose(np.asarray(default),
                               np.asarray(F.triplet_margin_loss(X, T, P)))


def test_linear_cross_entropy_is_cross_entropy_of_a_linear_layer():
    ember.manual_seed(0)
    x, w, b = ember.randn(4, 8), ember.randn(5, 3, 8), ember.randn(5, 3)
    target = ember.randint(0, 5, (4, 3))
    logits = ember.einsum("ni,cdi->ncd", x, w) + b
    got = nn.functional.linear_cross_entropy(x, w, target, linear_bias=b, label_smoothing=0.1,
                                             options=nn.LinearCrossEntropyOptions())
    assert ember.allclose(got, nn.functional.cross_entropy(logits, target, label_smoothing=0.1),
                          atol=1e-6)
    loss = nn.LinearCrossEntropyLoss(8, 5, out_features=(3,), bias=True, ignore_index=1)
    assert loss.linear.weight.shape == (15, 8) and loss.linear.bias.shape == (15,)
    expected = nn.functional.cross_entropy(
        ember.einsum("ni,cdi->ncd", x, loss.linear.weight.reshape(5, 3, 8))
        + loss.linear.bias.reshape(5, 3), target, ignore_index=1)
    assert ember.allclose(loss(x, target), expected, atol=1e-6)
    with pytest.raises(RuntimeError, match="expected input with dimensionality 1 or 2, got 3"):
        nn.functional.linear_cross_entropy(ember.randn(2, 3, 8), w, target)
    with pytest.raises(RuntimeError, match="got 8 and 7, respectively"):
        nn.functional.linear_cross_entropy(x, ember.randn(5, 7), target[:, 0])
