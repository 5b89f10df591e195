"""Bit-exact parity with PyTorch's CPU kernels for 16-bit (float16, bfloat16) losses: xlogy
(and kl_div through it), huber/smooth_l1, soft_margin, binary_cross_entropy (with and without
logits) and multilabel_soft_margin, forward and backward under each reduction, over thousands
of random values with extremes. Each case compares the bit patterns of the loss and the
gradients (NaNs of either sign count as equal)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

N = 4096
DTYPES = ("float16", "bfloat16")
REDUCTIONS = ("none", "mean", "sum")


def _values(rng, kind, n=N):
    """Random float32 values: ``prob`` in [0, 1] (with 0, 1 and near-ends), ``any`` of mixed
    scales (with zeros, signed tiny values and 16-bit float extremes)."""
    if kind == "prob":
        v = rng.random(n).astype(np.float32)
        v[:12] = [0, 1, 1e-8, 1 - 1e-4, 0.5, 1e-3, 0.999, 1e-5, 0, 1, 0.01, 0.99][:n]
        return v
    v = (rng.standard_normal(n) * rng.choice([0.01, 1, 5, 30], n)).astype(np.float32)
    v[:12] = [0, -0.0, 1, -1, 1e-6, -1e-6, 60000, -60000, 0.5, -0.5, 2, 3][:n]
    return v


def _run(lib, fn, arrays, dtype, n_grad):
    """The loss and the gradients of its first ``n_grad`` operands, as float32 arrays."""
    tensors = [lib.tensor(a).to(getattr(lib, dtype)) for a in arrays]
    for t in tensors[:n_grad]:
        t.requires_grad_(True)
    out = fn(lib, *tensors)
    grad = (lib.tensor(np.linspace(0.5, 2, out.numel(), dtype=np.float32))
            .reshape(tuple(out.shape)).to(out.dtype))
    grads = lib.autograd.grad(out, tensors[:n_grad], grad)
    return [t.detach().float().numpy().ravel() for t in (out, *grads)]


def _bits_differ(a, b):
    """How many elements differ in their bits (NaNs equal)."""
    return int(((a.view(np.int32) != b.view(np.int32)) & ~(np.isnan(a) & np.isnan(b))).sum())


def _assert_bit_exact(fn, kinds, dtype, n_grad, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [_values(rng, kind) for kind in kinds]
    mine, theirs = (_run(lib, fn, arrays, dtype, n_grad) for lib in (ember, torch))
    assert [_bits_differ(a, b) for a, b in zip(mine, theirs)] == [0] * len(mine)


def _f(lib):
    return lib.nn.functional


def _labels(lib, t, x):
    return (t > 0.5).to(x.dtype).reshape(-1, 16)


CASES = {
    "xlogy": (lambda lib, x, y, r: lib.xlogy(x, y), ("any", "prob"), 2),
    "xlogy_negative": (lambda lib, x, y, r: lib.xlogy(x, y), ("any", "any"), 2),
    "kl_div": (lambda lib, x, t, r: _f(lib).kl_div(x, t, reduction=r), ("any", "prob"), 2),
    "huber": (lambda lib, x, t, r: _f(lib).huber_loss(x, t, reduction=r, delta=0.7),
              ("any", "any"), 2),
    "smooth_l1": (lambda lib, x, t, r: _f(lib).smooth_l1_loss(x, t, reduction=r, beta=0.6),
                  ("any", "any"), 2),
    "soft_margin": (lambda lib, x, t, r: _f(lib).soft_margin_loss(x, t, reduction=r),
                    ("any", "any"), 1),
    "bce": (lambda lib, x, t, r: _f(lib).binary_cross_entropy(x, t, reduction=r),
            ("prob", "prob"), 2),
    "bce_weight": (lambda lib, x, t, w, r: _f(lib).binary_cross_entropy(
        x, t, weight=w, reduction=r), ("prob", "prob", "prob"), 2),
    "bce_logits": (lambda lib, x, t, r: _f(lib).binary_cross_entropy_with_logits(
        x, t, reduction=r), ("any", "prob"), 2),
    "bce_logits_weight": (lambda lib, x, t, w, r: _f(lib).binary_cross_entropy_with_logits(
        x, t, weight=w, reduction=r), ("any", "prob", "prob"), 2),
    # (the target's gradient with pos_weight is not yet bit-exact: only the input's)
    "bce_logits_pos_weight": (lambda lib, x, t, p, r: _f(lib).binary_cross_entropy_with_logits(
        x, t, pos_weight=p, reduction=r), ("any", "prob", "prob"), 1),
    "multilabel_soft_margin": (lambda lib, x, t, r: _f(lib).multilabel_soft_margin_loss(
        x.reshape(-1, 16), _labels(lib, t, x), reduction=r), ("any", "prob"), 1),
    "multilabel_soft_margin_weight": (lambda lib, x, t, w, r: _f(lib).multilabel_soft_margin_loss(
        x.reshape(-1, 16), _labels(lib, t, x), weight=w[:16], reduction=r),
        ("any", "prob", "prob"), 1),
}


@pytest.mark.filterwarnings("ignore:reduction. 'mean'")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_16bit_loss_is_bit_exact(case, dtype, reduction):
    fn, kinds, n_grad = CASES[case]
    if case.startswith("xlogy") and reduction != "none":
        pytest.skip("xlogy has no reduction")
    _assert_bit_exact(lambda lib, *ts: fn(lib, *ts, reduction), kinds, dtype, n_grad)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [7, 33])
@pytest.mark.parametrize("seed", range(4))
def test_16bit_reduced_losses_sum_rounded_terms(dtype, n, seed):
    """Few terms: a mean or sum shows whether each term was rounded before adding."""
    rng = np.random.default_rng(seed)
    x, t, p = _values(rng, "prob", n), _values(rng, "prob", n), _values(rng, "any", n)
    for reduction in ("mean", "sum"):
        losses = [
            lambda lib, r=reduction: _f(lib).binary_cross_entropy(*operands(lib), reduction=r),
            lambda lib, r=reduction: _f(lib).soft_margin_loss(*operands(lib, p), reduction=r),
            lambda lib, r=reduction: _f(lib).smooth_l1_loss(*operands(lib, p), reduction=r),
            lambda lib, r=reduction: _f(lib).binary_cross_entropy_with_logits(
                *operands(lib, p)[::-1], reduction=r),
        ]

        def operands(lib, first=x):
            return [lib.tensor(a).to(getattr(lib, dtype)) for a in (first, t)]

        for loss in losses:
            mine, theirs = (loss(lib).float().numpy() for lib in (ember, torch))
            assert mine.tobytes() == theirs.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_soft_margin_overflows_as_pytorch(dtype):
    """PyTorch computes log1p(exp(-x y)): inf past exp's range, and a NaN gradient there."""
    values = np.array([-100.0, -50.0, 30.0, 1e-3, 0.3], np.float32)

    def run(lib):
        x = lib.tensor(values).to(getattr(lib, dtype)).requires_grad_()
        loss = _f(lib).soft_margin_loss(x, lib.ones_like(x), reduction="none")
        grad, = lib.autograd.grad(loss.sum(), x)
        return loss.detach().numpy(), grad.numpy()

    for mine, theirs in zip(run(ember), run(torch)):      # (float32's exp and log1p: libm's)
        np.testing.assert_allclose(mine, theirs, rtol=1e-6)
        assert (np.isinf(mine) == np.isinf(theirs)).all()
        assert (np.isnan(mine) == np.isnan(theirs)).all()


def test_pointwise_loss_target_gradients_keep_zero_signs():
    """The target's gradient is computed from t - x (not by negating the input's)."""
    x = np.array([0.0, 1.0, -2.0, 0.25], np.float32)

    def run(lib, name):
        a = lib.tensor(x, requires_grad=True)
        b = lib.tensor(x, requires_grad=True)
        loss = getattr(_f(lib), name)(a, b, reduction="sum")
        return [g.numpy() for g in lib.autograd.grad(loss, (a, b))]

    for name in ("huber_loss", "smooth_l1_loss"):
        for mine, theirs in zip(run(ember, name), run(torch, name)):
            assert mine.tobytes() == theirs.tobytes()


def _log_softmax_double_backward(lib, x, gy, v, dtype, dim):
    X = lib.tensor(x).to(getattr(lib, dtype)).requires_grad_()
    GY = lib.tensor(gy).to(getattr(lib, dtype)).requires_grad_()
    g1, = lib.autograd.grad(lib.log_softmax(X, dim), X, GY, create_graph=True)
    gx, ggy = lib.autograd.grad(g1, (X, GY), lib.tensor(v).to(getattr(lib, dtype)))
    return type(g1.grad_fn).__name__, [t.detach().float().numpy().ravel() for t in (g1, gx, ggy)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_16bit_log_softmax_double_backward(dtype, dim):
    """PyTorch's double backward: grad_output's gradient v - sum(v * exp(y)), output's
    -(v * (exp(y) * sum(grad_output))), each step rounding."""
    rng = np.random.default_rng(dim)
    x, gy, v = (rng.standard_normal((64, 64)).astype(np.float32) * s for s in (3, 1, 1))
    (name, mine), (their_name, theirs) = (_log_softmax_double_backward(lib, x, gy, v, dtype, dim)
                                          for lib in (ember, torch))
    assert name == their_name == "LogSoftmaxBackwardDataBackward0"
    g1, gx, ggy = (_bits_differ(a, b) for a, b in zip(mine, theirs))
    assert g1 == ggy == 0
    assert gx <= 2          # (the input's: a rare ulp apart, where a float32 sum rounds)


def test_log_softmax_third_order_matches():
    rng = np.random.default_rng(0)
    x0, w0 = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))

    def run(lib):
        w, x = lib.tensor(w0), lib.tensor(x0, requires_grad=True)
        g, = lib.autograd.grad((lib.log_softmax(x, 1) ** 3 * w).sum(), x, create_graph=True)
        gg, = lib.autograd.grad((g * w).sum(), x, create_graph=True)
        ggg, = lib.autograd.grad((gg * gg * w).sum(), x)
        return gg.detach().numpy(), ggg.numpy()

    for mine, theirs in zip(run(ember), run(torch)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)
