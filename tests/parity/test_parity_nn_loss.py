"""Every loss of ember.nn.functional (and its module) against PyTorch: values and gradients
of each differentiable input, over reductions, weights, ignore_index, smoothing, K-dim inputs
and the losses' other options; errors with PyTorch's type and message."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

RNG = np.random.default_rng(0)


def _randn(*shape):
    return RNG.standard_normal(shape)


def _rand(*shape):
    return RNG.uniform(0.05, 0.95, shape)


def _sign(*shape):
    return np.where(RNG.random(shape) < 0.5, -1.0, 1.0)


def _classes(c, *shape):
    return RNG.integers(0, c, shape)


def _log_softmax(x, dim):
    return x - np.log(np.exp(x).sum(dim, keepdims=True))


class Arg:
    """A sample argument: an array that becomes a tensor in both libraries (``grad``: it is
    differentiated)."""

    def __init__(self, value, grad=False):
        self.value, self.grad = np.asarray(value), grad


def G(value):
    return Arg(value, grad=True)


def C(value):
    return Arg(value)


CASES = []


def case(name, *args, **kwargs):
    CASES.append(pytest.param(name, args, kwargs, id=f"{name}-{len(CASES)}"))


for red in ("none", "mean", "sum"):
    for shape in ((4, 5), (5,), (2, 5, 3), (2, 5, 2, 2), (0, 5)):
        tshape = shape[:1] + shape[2:] if len(shape) > 1 else ()
        t = _classes(5, *tshape)
        x = _randn(*shape)
        case("cross_entropy", G(x), C(t), reduction=red)
        case("cross_entropy", G(x), C(t), weight=C(_rand(5)), reduction=red, label_smoothing=0.3)
        ignored = np.where(RNG.random(tshape) < 0.4, 2, t)
        case("cross_entropy", G(x), C(ignored), weight=C(_rand(5)), ignore_index=2,
             reduction=red)
        case("cross_entropy", G(x), C(ignored), ignore_index=2, reduction=red,
             label_smoothing=0.1)
        case("cross_entropy", G(x), G(_rand(*shape)), reduction=red)
        case("cross_entropy", G(x), G(_rand(*shape)), weight=C(_rand(5)), reduction=red,
             label_smoothing=0.2)
        case("nll_loss", G(_log_softmax(x, 1 if len(shape) > 1 else 0)), C(t), reduction=red)
        case("nll_loss", G(x), C(ignored), weight=C(_rand(5)), ignore_index=2, reduction=red)
    a, b = _randn(3, 4), _randn(3, 4)
    case("l1_loss", G(a), G(b), reduction=red)
    case("l1_loss", G(a), G(b), reduction=red, weight=C(_rand(3, 4)))
    case("mse_loss", G(a), G(b), reduction=red)
    case("mse_loss", G(a), G(b), reduction=red, weight=C(_rand(3, 4)))
    case("huber_loss", G(a), G(b), reduction=red, delta=0.7)
    case("huber_loss", G(a), G(b), reduction=red, weight=C(_rand(3, 4)))
    case("smooth_l1_loss", G(a), G(b), reduction=red, beta=0.5)
    case("smooth_l1_loss", G(a), G(b), reduction=red, beta=0.0)
    case("soft_margin_loss", G(a), C(_sign(3, 4)), reduction=red)
    case("binary_cross_entropy", G(_rand(3, 4)), G(_rand(3, 4)), reduction=red)
    case("binary_cross_entropy", G(_rand(3, 4)), G(_rand(3, 4)), weight=C(_rand(4)),
         reduction=red)
    case("binary_cross_entropy_with_logits", G(a), G(_rand(3, 4)), reduction=red)
    case("binary_cross_entropy_with_logits", G(a * 30), G(_rand(3, 4)), weight=C(_rand(4)),
         pos_weight=C(_rand(4) * 3), reduction=red)
    case("poisson_nll_loss", G(a), G(_rand(3, 4) * 4), reduction=red)
    case("poisson_nll_loss", G(_rand(3, 4)), G(_rand(3, 4) * 4), log_input=False, full=True,
         reduction=red)
    case("gaussian_nll_loss", G(a), G(b), G(_rand(3, 4)), reduction=red)
    case("gaussian_nll_loss", G(a), G(b), G(_rand(3)), full=True, reduction=red)
    case("gaussian_nll_loss", G(a), G(b), G(_rand(3, 1) * 1e-8), reduction=red)
    case("gaussian_nll_loss", G(a), G(b), 0.5, reduction=red)
    case("margin_ranking_loss", G(_randn(5)), G(_randn(5)), C(_sign(5)), margin=0.3,
         reduction=red)
    case("hinge_embedding_loss", G(a), C(_sign(3, 4)), margin=0.5, reduction=red)
    case("cosine_embedding_loss", G(a), G(b), C(_sign(3)), margin=0.2, reduction=red)
    case("cosine_embedding_loss", G(a[0]), G(b[0]), C(-1.0), margin=-0.5, reduction=red)
    case("multilabel_soft_margin_loss", G(a), C(_classes(2, 3, 4).astype(float)),
         reduction=red)
    case("multilabel_soft_margin_loss", G(a), C(_rand(3, 4)), weight=C(_rand(4)),
         reduction=red)
    case("multi_margin_loss", G(a), C(_classes(4, 3)), reduction=red)
    case("multi_margin_loss", G(a), C(_classes(4, 3)), p=2, margin=0.5, weight=C(_rand(4)),
         reduction=red)
    case("multi_margin_loss", G(a[0]), C(2), reduction=red)
    case("multilabel_margin_loss", G(a), C([[1, 3, -1, 0], [0, 1, 2, 3], [-1, 1, 2, 0]]),
         reduction=red)
    case("multilabel_margin_loss", G(a[0]), C([2, 0, -1, 1]), reduction=red)
    case("triplet_margin_loss", G(a), G(b), G(_randn(3, 4)), reduction=red)
    case("triplet_margin_loss", G(a), G(b), G(_randn(3, 4)), margin=2.0, p=1, swap=True,
         reduction=red)
    case("triplet_margin_with_distance_loss", G(a), G(b), G(_randn(3, 4)), reduction=red)
    case("kl_div", G(_log_softmax(a, 1)), G(_rand(3, 4)), reduction=red)
    case("kl_div", G(_log_softmax(a, 1)), G(np.log(_rand(3, 4))), reduction=red,
         log_target=True)
case("kl_div", G(_randn(3, 4)), G(_rand(3, 4)), reduction="batchmean")
case("kl_div", G(_randn(3, 4)), C(np.where(_rand(3, 4) < 0.5, 0.0, 0.5)), reduction="sum")
case("mse_loss", G(_randn(3, 4)), G(_randn(4)))
case("l1_loss", G(_randn(3, 4)), G(_randn(3, 4)), size_average=False)
case("cross_entropy", G(_randn(3, 4)), C(_classes(4, 3)), reduce=False)
case("poisson_nll_loss", G(_randn(3, 4)), G(_rand(3, 4)), size_average=True, reduce=True)


def _tensors(lib, args, kwargs):
    made = []

    def convert(a):
        if not isinstance(a, Arg):
            return a
        t = lib.tensor(a.value)
        if a.grad:
            t.requires_grad_(True)
            made.append(t)
        return t
    return [convert(a) for a in args], {k: convert(v) for k, v in kwargs.items()}, made


@pytest.mark.parametrize("name,args,kwargs", CASES)
def test_functional_loss_matches_torch(name, args, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta, tk, tgrad = _tensors(torch, args, kwargs)
        want = getattr(torch.nn.functional, name)(*ta, **tk)
        ea, ek, egrad = _tensors(ember, args, kwargs)
        got = getattr(ember.nn.functional, name)(*ea, **ek)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(np.asarray(got.detach()), want.detach().numpy(), rtol=1e-9,
                               atol=1e-9)
    if want.numel() == 0 or not want.requires_grad:
        return
    g = RNG.standard_normal(tuple(want.shape))
    want_grads = torch.autograd.grad(want, tgrad, torch.tensor(g), allow_unused=True)
    got_grads = ember.autograd.grad(got, egrad, ember.tensor(g), allow_unused=True)
    for w, e in zip(want_grads, got_grads):
        if w is None:
            assert e is None or not np.asarray(e).any()
            continue
        np.testing.assert_allclose(np.asarray(e), w.numpy(), rtol=1e-7, atol=1e-9)


def test_ctc_loss_matches_torch():
    x = _log_softmax(_randn(6, 3, 5), 2)
    targets, in_len, tg_len = _classes(4, 3, 3) + 1, [6, 4, 5], [3, 1, 2]
    for reduction in ("none", "mean", "sum"):
        xt = torch.tensor(x, requires_grad=True)
        xe = ember.tensor(x, requires_grad=True)
        want = torch.nn.functional.ctc_loss(xt, torch.tensor(targets), in_len, tg_len,
                                            reduction=reduction)
        got = ember.nn.functional.ctc_loss(xe, ember.tensor(targets), in_len, tg_len,
                                           reduction=reduction)
        np.testing.assert_allclose(np.asarray(got.detach()), want.detach().numpy(), rtol=1e-9)
        want.sum().backward()
        got.sum().backward()
        np.testing.assert_allclose(np.asarray(xe.grad), xt.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_top_level_losses_match_torch():
    a, b, y = _randn(3, 4), _rand(3, 4), _sign(3)
    for name, args in [("binary_cross_entropy_with_logits", (a, b)), ("kl_div", (a, b)),
                       ("hinge_embedding_loss", (a, _sign(3, 4))),
                       ("margin_ranking_loss", (a[:, 0], a[:, 1], y)),
                       ("cosine_embedding_loss", (a, b, y)),
                       ("triplet_margin_loss", (a, b, a * 2)),
                       ("poisson_nll_loss", (a, b, True, False, 1e-8, 2))]:
        for extra in ({}, {"reduction": 1}) if name != "poisson_nll_loss" else ({},):
            want = getattr(torch, name)(*[torch.tensor(v) if isinstance(v, np.ndarray) else v
                                          for v in args], **extra)
            got = getattr(ember, name)(*[ember.tensor(v) if isinstance(v, np.ndarray) else v
                                         for v in args], **extra)
            np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-9,
                                       err_msg=name)
