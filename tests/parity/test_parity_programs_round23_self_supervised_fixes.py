"""What the self-supervised and metric-learning programs of round 23
(test_parity_programs_round23_self_supervised.py and ..._metric.py) found, each pinned
against PyTorch: mse_loss of 16-bit floats rounds the difference before squaring it, its
gradient is taken in PyTorch's order (norm, difference, incoming gradient; the norm in the
operands' dtype); the pointwise losses refuse float8 operands with PyTorch's kernel names;
cross_entropy of 16-bit class probabilities (a soft teacher) rounds each step of PyTorch's
composite, forward and backward; and the CPU nll_loss/cross_entropy of 16-bit class indices
sum in their dtype, in cascaded partial sums, as PyTorch's CPU kernels."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _mse_run(lib, dtype, reduction, shape, seed=0):
    """mse_loss of two ``dtype`` tensors and the gradients of both operands."""
    rng = np.random.default_rng(seed)
    x, y, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    a = lib.from_numpy(x).to(getattr(lib, dtype)).requires_grad_()
    b = lib.from_numpy(y).to(getattr(lib, dtype)).requires_grad_()
    loss = lib.nn.functional.mse_loss(a, b, reduction=reduction)
    grad = lib.from_numpy(g).to(loss.dtype) if reduction == "none" else \
        lib.tensor(0.7, dtype=loss.dtype)
    loss.backward(grad)
    return [str(loss.dtype).rsplit(".", 1)[-1]] + [
        t.detach().float().numpy() for t in (loss, a.grad, b.grad)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(8, 7), (33, 5), (3,)])
def test_mse_loss_16bit_rounds_like_torch(dtype, reduction, shape):
    # PyTorch's kernel squares the difference rounded to the 16-bit dtype, and its backward
    # rounds 2/numel, the difference and each product (was: one float32 computation, rounded
    # once, which differed by an ulp in a quarter of the elements and in VICReg's bf16 steps)
    ours, theirs = _mse_run(ember, dtype, reduction, shape), _mse_run(torch, dtype, reduction,
                                                                       shape)
    assert ours[0] == theirs[0]
    for got, expected in zip(ours[1:], theirs[1:]):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(8, 7), (33, 5), (3,), (1000,)])
def test_mse_loss_gradients_bitwise_like_torch(dtype, reduction, shape):
    # (2/numel * d) * grad, not 2 * (grad/numel) * d: the mean's gradients differed in the
    # last bit
    ours, theirs = _mse_run(ember, dtype, reduction, shape), _mse_run(torch, dtype, reduction,
                                                                       shape)
    for got, expected in zip(ours[2:], theirs[2:]):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6 if dtype == "float32" else 1e-14)


def test_mse_loss_16bit_of_mixed_dtypes_like_torch():
    # a float16 input and a float32 target compute in float32 (the promoted dtype)
    def run(lib):
        a = lib.linspace(-1, 1, 9, dtype=lib.float16).requires_grad_()
        b = lib.linspace(0.3, 0.9, 9)
        loss = lib.nn.functional.mse_loss(a, b, reduction="none")
        loss.sum().backward()
        return str(loss.dtype).rsplit(".", 1)[-1], loss.detach().numpy(), a.grad.float().numpy()
    ours, theirs = run(ember), run(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_array_equal(ours[1], theirs[1])
    np.testing.assert_array_equal(ours[2], theirs[2])


def test_mse_loss_double_backward_like_torch():
    def run(lib):
        a = lib.linspace(-1, 1, 6, dtype=lib.float64).requires_grad_()
        b = lib.linspace(0.3, 0.9, 6, dtype=lib.float64).requires_grad_()
        loss = lib.nn.functional.mse_loss(a * a, b)
        ga, gb = lib.autograd.grad(loss, (a, b), create_graph=True)
        return [t.detach().numpy() for t in lib.autograd.grad((ga * gb).sum(), (a, b))]
    for got, expected in zip(run(ember), run(torch)):
        np.testing.assert_allclose(got, expected, rtol=1e-14)


@pytest.mark.parametrize("loss", ["mse_loss", "huber_loss", "smooth_l1_loss",
                                  "binary_cross_entropy_with_logits"])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_pointwise_losses_refuse_float8_like_torch(loss, dtype):
    # the kernels have no float8 version: PyTorch names them (was "_mse_loss_cpu", or a
    # float8 result for binary_cross_entropy_with_logits)
    assert_same_error(lambda lib, x: getattr(lib.nn.functional, loss)(x, x),
                      lambda lib: lib.ones(3, 4).to(getattr(lib, dtype)))


def _soft_ce_run(lib, dtype, reduction, shape, smoothing, weighted):
    """cross_entropy of ``dtype`` logits against ``dtype`` class probabilities (a soft
    teacher, as DINO's or mixup's), and the gradients of logits, targets and weight."""
    rng = np.random.default_rng(23)
    dim = 1 if len(shape) > 1 else 0
    x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    logits = lib.from_numpy(x).to(getattr(lib, dtype)).requires_grad_()
    probs = lib.from_numpy(y).softmax(dim).to(getattr(lib, dtype)).requires_grad_()
    weight = lib.linspace(0.5, 1.5, shape[dim]).to(getattr(lib, dtype)).requires_grad_() \
        if weighted else None
    loss = lib.nn.functional.cross_entropy(logits, probs, weight=weight, reduction=reduction,
                                           label_smoothing=smoothing)
    inputs = [logits, probs] + ([weight] if weighted else [])
    grads = lib.autograd.grad(loss, inputs, lib.full_like(loss, 0.7))
    return [str(loss.dtype).rsplit(".", 1)[-1], loss.grad_fn.name()] + [
        t.detach().float().numpy() for t in (loss, *grads)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(8, 7), (4, 5, 3), (7,)])
@pytest.mark.parametrize("smoothing, weighted", [(0.0, False), (0.1, False), (0.0, True),
                                                 (0.2, True)])
def test_cross_entropy_16bit_probability_targets_like_torch(dtype, reduction, shape, smoothing,
                                                            weighted):
    # PyTorch composes the loss of ops, each rounding to the 16-bit dtype (log_softmax, the
    # smoothed target, the products, the sums, the mean's division), and autograd derives
    # them in turn; ember's fused float32 loss rounded once (an ulp off in an eighth of the
    # losses, gradients off by up to 5%)
    ours = _soft_ce_run(ember, dtype, reduction, shape, smoothing, weighted)
    theirs = _soft_ce_run(torch, dtype, reduction, shape, smoothing, weighted)
    assert ours[:2] == theirs[:2]
    for got, expected in zip(ours[2:], theirs[2:]):
        np.testing.assert_array_equal(got, expected)


def test_cross_entropy_16bit_probability_targets_double_backward_like_torch():
    def run(lib):
        x = lib.linspace(-2, 2, 12).view(3, 4).to(lib.bfloat16).requires_grad_()
        q = lib.linspace(0, 1, 12).view(3, 4).softmax(1).to(lib.bfloat16)
        loss = lib.nn.functional.cross_entropy(x, q, label_smoothing=0.1)
        g, = lib.autograd.grad(loss, x, create_graph=True)
        return [t.detach().float().numpy() for t in (g, *lib.autograd.grad(g.pow(2).sum(), x))]
    first, second = zip(run(ember), run(torch))
    np.testing.assert_array_equal(*first)
    # the second order runs through log_softmax's double backward, which ember takes in
    # float32 and rounds once, PyTorch op by op: a bfloat16 ulp apart in places
    np.testing.assert_allclose(*second, rtol=8e-3, atol=1e-6)


def _class_loss_run(lib, loss, dtype, shape, reduction, weighted, ignore, smoothing=0.0):
    rng = np.random.default_rng(sum(shape) + 7 * weighted + 3 * ignore)
    c = shape[1] if len(shape) > 1 else shape[0]
    x = rng.standard_normal(shape).astype(np.float32)
    target_shape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    t = rng.integers(0, c, target_shape)
    if ignore and t.ndim:
        t[rng.random(target_shape) < 0.3] = -100
        t.flat[16 % t.size] = -100             # a position where the partial sums move up
    logits = lib.from_numpy(x).to(getattr(lib, dtype)).requires_grad_()
    weight = lib.linspace(0.5, 1.5, c).to(getattr(lib, dtype)) if weighted else None
    kwargs = {"label_smoothing": smoothing} if loss == "cross_entropy" else {}
    out = getattr(lib.nn.functional, loss)(logits, lib.from_numpy(t), weight=weight,
                                           reduction=reduction, **kwargs)
    return out.detach().float().item()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("shape", [(8, 7), (40, 5), (300, 3), (5000, 4), (7,), (6, 5, 9),
                                   (3, 4, 5, 6)])
@pytest.mark.parametrize("weighted, ignore", [(False, False), (True, False), (False, True),
                                              (True, True)])
def test_class_index_losses_16bit_sum_like_torch_cpu(dtype, loss, reduction, shape, weighted,
                                                     ignore):
    # PyTorch's CPU nll_loss kernels add the 16-bit terms in their dtype, into partial sums
    # that move up every 16 positions (was: one float32 sum, rounded once: bfloat16
    # cross-entropy losses an ulp off, 17.125 for 17.0)
    args = (loss, dtype, shape, reduction, weighted, ignore)
    assert _class_loss_run(ember, *args) == _class_loss_run(torch, *args)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_cross_entropy_16bit_label_smoothing_sum_like_torch_cpu(reduction):
    args = ("cross_entropy", "bfloat16", (300, 6), reduction, True, True, 0.1)
    assert _class_loss_run(ember, *args) == _class_loss_run(torch, *args)
