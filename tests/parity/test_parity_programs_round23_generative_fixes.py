"""What the generative-model programs of round 23 (test_parity_programs_round23_generative.py
and test_parity_programs_round23_generative_scores.py) found, each pinned against PyTorch:
Adam's refusal of integer betas; buffers made by zeros/ones/empty/full_like and new_* from a
batched tensor are batched under vmap, and per-example values written into them by index take
one batched index_put; reshape of a strided view is a _reshape_alias; and the names of the nodes
that gradients taken with create_graph=True carry (R1 and path-length penalties, sliced score
matching and MAML-style updates differentiate them again): convolution_backward for every
gradient of a convolution, an unbatched convolution's squeeze, the transposes behind a linear
weight's gradient, the reflect/replicate pad, pooling and upsampling backward kernels, and
log_softmax's backward behind cross_entropy, nll_loss and log_softmax."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


@pytest.mark.parametrize("betas", [(0, 0.99), (0.9, 1), (True, 0.9), (0.0, 0.99)])
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_betas_must_be_floats_like_torch(name, betas):
    # StyleGAN2 writes betas=(0 ** ratio, 0.99 ** ratio): floats; a literal 0 is refused
    def run(lib):
        param = lib.nn.Parameter(lib.zeros(2))
        return outcome(lambda: getattr(lib.optim, name)([param], betas=betas).defaults["betas"])
    assert run(ember) == run(torch)


def _double_names(lib, fn, shapes):
    """The node names of the gradients of ``fn(*inputs).pow(2).sum()`` taken with
    create_graph, the output's node name, and the gradients' strides."""
    inputs = [lib.ones(*shape).requires_grad_() for shape in shapes]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # padding='same' with an even kernel warns
        out = fn(lib, *inputs)
    grads = lib.autograd.grad(out.pow(2).sum(), inputs, create_graph=True)
    return (out.grad_fn.name(), [g.grad_fn.name() for g in grads],
            [g.stride() for g in grads], [g.sum().item() for g in grads])


CONVOLUTIONS = {
    "conv2d": (lambda lib, x, w: lib.nn.functional.conv2d(x, w, padding=1),
               [(2, 3, 5, 5), (4, 3, 3, 3)]),
    "conv2d_bias": (lambda lib, x, w, b: lib.nn.functional.conv2d(x, w, b, padding=1),
                    [(2, 3, 5, 5), (4, 3, 3, 3), (4,)]),
    "conv2d_unbatched": (lambda lib, x, w: lib.nn.functional.conv2d(x, w, padding=1),
                         [(3, 5, 5), (4, 3, 3, 3)]),
    "conv2d_same_even": (lambda lib, x, w: lib.nn.functional.conv2d(x, w, padding="same"),
                         [(2, 3, 5, 5), (4, 3, 4, 4)]),
    "conv1d_strided": (lambda lib, x, w: lib.nn.functional.conv1d(x, w, stride=2),
                       [(2, 3, 8), (4, 3, 3)]),
    "conv3d": (lambda lib, x, w: lib.nn.functional.conv3d(x, w), [(1, 2, 4, 4, 4),
                                                                   (2, 2, 2, 2, 2)]),
    "grouped": (lambda lib, x, w: lib.nn.functional.conv2d(x, w, padding=1, groups=2),
                [(1, 4, 5, 5), (4, 2, 3, 3)]),
    "transposed_output_padding": (
        lambda lib, x, w: lib.nn.functional.conv_transpose2d(x, w, stride=2, output_padding=1),
        [(2, 3, 4, 4), (3, 2, 3, 3)]),
    "transposed_grouped": (
        lambda lib, x, w: lib.nn.functional.conv_transpose2d(x, w, stride=2, groups=3),
        [(2, 3, 4, 4), (3, 2, 3, 3)]),
    "transposed_unbatched": (lambda lib, x, w: lib.nn.functional.conv_transpose1d(x, w),
                             [(3, 5), (3, 4, 3)]),
    "convolution": (lambda lib, x, w: lib.convolution(x, w, None, [1, 1], [0, 0], [1, 1], False,
                                                       [0, 0], 1),
                    [(2, 3, 5, 5), (4, 3, 3, 3)]),
    "channels_last": (lambda lib, x, w: lib.nn.functional.conv2d(
        x.contiguous(memory_format=lib.channels_last), w), [(2, 3, 5, 5), (4, 3, 3, 3)]),
}


@pytest.mark.parametrize("case", CONVOLUTIONS)
def test_convolution_gradients_are_convolution_backward_nodes(case):
    # ConvolutionBackwardBackward0 for the input's, the weight's and the bias's gradient (they
    # were ConvolutionBackward0 and ConvolutionWeightBackward0); SqueezeBackward1 for an
    # unbatched call; a negative constant pad crops the 'same' padding (was a slice view)
    fn, shapes = CONVOLUTIONS[case]
    assert _double_names(ember, fn, shapes) == _double_names(torch, fn, shapes)


def test_r1_penalty_gradient_nodes_like_torch():
    # the R1 penalty of a small convolutional discriminator, differentiated again
    def run(lib):
        F = lib.nn.functional
        x = lib.linspace(-1, 1, 2 * 3 * 6 * 6).reshape(2, 3, 6, 6).requires_grad_()
        w1 = lib.linspace(-0.5, 0.5, 4 * 3 * 3 * 3).reshape(4, 3, 3, 3).requires_grad_()
        w2 = lib.linspace(-0.3, 0.4, 4 * 6 * 6).reshape(1, 4 * 6 * 6).requires_grad_()
        pred = F.linear(F.leaky_relu(F.conv2d(x, w1, padding=1), 0.2).flatten(1), w2)
        grad, = lib.autograd.grad(pred.sum(), x, create_graph=True)
        penalty = grad.pow(2).reshape(2, -1).sum(1).mean()
        second = lib.autograd.grad(penalty, [w1, w2])
        return grad.grad_fn.name(), penalty.item(), [g.sum().item() for g in second]
    ours, theirs = run(ember), run(torch)
    assert ours[0] == theirs[0] == "ConvolutionBackwardBackward0"
    assert ours[1] == pytest.approx(theirs[1], rel=1e-5)
    assert ours[2] == pytest.approx(theirs[2], rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("x_shape", [(4, 6), (2, 4, 6), (6,)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_weight_gradient_is_transposed_back_like_torch(x_shape, bias):
    # PyTorch differentiates mm(x, weight.t()): the weight's gradient comes out of two t()s
    def run(lib):
        x, w = lib.ones(*x_shape, requires_grad=True), lib.ones(3, 6, requires_grad=True)
        b = lib.ones(3, requires_grad=True) if bias else None
        gw, = lib.autograd.grad(lib.nn.functional.linear(x, w, b).pow(2).sum(), w,
                                create_graph=True)
        return gw.grad_fn.name(), gw.grad_fn.next_functions[0][0].name(), gw.stride()
    assert run(ember) == run(torch)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_pad_double_backward_names_like_torch(mode, nd):
    # the backward of a reflect/replicate pad is its own kernel (was PadBackwardBackward0)
    def run(lib):
        x = lib.ones(*([2, 3] + [5] * nd), requires_grad=True)
        y = lib.nn.functional.pad(x, (2, 1) * nd, mode=mode)
        gx, = lib.autograd.grad(y.pow(2).sum(), x, create_graph=True)
        second, = lib.autograd.grad(gx.sum(), x)
        return gx.grad_fn.name(), gx.sum().item(), second.sum().item()
    assert run(ember) == run(torch)


LOG_SOFTMAX_CASES = {
    "cross_entropy": lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor([0, 1, 2, 1])),
    "cross_entropy_none": lambda lib, x: lib.nn.functional.cross_entropy(
        x, lib.tensor([0, 1, 2, 1]), reduction="none"),
    "cross_entropy_weight": lambda lib, x: lib.nn.functional.cross_entropy(
        x, lib.tensor([0, 1, 2, 1]), weight=lib.tensor([1.0, 2.0, 3.0])),
    "cross_entropy_smoothing": lambda lib, x: lib.nn.functional.cross_entropy(
        x, lib.tensor([0, 1, 2, 1]), label_smoothing=0.1),
    "cross_entropy_ignore": lambda lib, x: lib.nn.functional.cross_entropy(
        x, lib.tensor([0, 1, 2, 1]), ignore_index=1),
    "cross_entropy_probabilities": lambda lib, x: lib.nn.functional.cross_entropy(
        x, lib.full((4, 3), 1 / 3)),
    "cross_entropy_pixels": lambda lib, x: lib.nn.functional.cross_entropy(
        x.reshape(1, 4, 3).permute(0, 2, 1).unsqueeze(-1), lib.tensor([[[0], [1], [2], [1]]])),
    "nll_log_softmax": lambda lib, x: lib.nn.functional.nll_loss(
        lib.nn.functional.log_softmax(x, 1), lib.tensor([0, 1, 2, 1])),
    "nll_loss": lambda lib, x: lib.nn.functional.nll_loss(x, lib.tensor([0, 1, 2, 1])),
    "log_softmax": lambda lib, x: lib.log_softmax(x, 1).pow(2).sum(),
    "softmax": lambda lib, x: lib.softmax(x, 1).pow(2).sum(),
    "log_softmax_float64_dim0": lambda lib, x: lib.log_softmax(x.double(), 0).pow(2).sum(),
}


@pytest.mark.parametrize("case", LOG_SOFTMAX_CASES)
def test_softmax_family_double_backward_names_like_torch(case):
    # PyTorch's gradients end in _log_softmax_backward_data / _softmax_backward_data /
    # nll_loss_backward (they were MulBackward0, SubBackward0, MaskedGradBackward0)
    def run(lib):
        x = (lib.arange(12.0).reshape(4, 3) / 7).requires_grad_()
        loss = LOG_SOFTMAX_CASES[case](lib, x)
        gx, = lib.autograd.grad(loss.sum(), x, create_graph=True)
        second, = lib.autograd.grad(gx.pow(2).sum(), x, allow_unused=True,
                                    materialize_grads=True)
        return gx.grad_fn.name(), gx.detach().numpy(), second.numpy()
    ours, theirs = run(ember), run(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-4, atol=1e-6)


def _vmapped(lib, fn, randomness="error"):
    """``vmap(fn)`` over three examples, as (result, warning messages) or the error."""
    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = lib.func.vmap(fn(lib), randomness=randomness)(lib.arange(6.0).view(3, 2))
        return out.tolist(), [str(w.message) for w in caught]
    return outcome(run)


def _trajectory(lib):
    def solve(x):               # a per-example buffer written step by step
        traj = x.new_zeros(4, 2)
        speed = lib.zeros_like(traj[:, 0])
        traj[0] = x
        for i in range(3):
            traj[i + 1] = traj[i] * 0.5 + 1
            speed[i] = traj[i + 1].sum()
        return lib.cat([traj.flatten(), speed])
    return solve


BUFFERS = {
    "trajectory": _trajectory,
    "zeros_like_copy": lambda lib: lambda p: lib.zeros_like(p).copy_(p * 2),
    "empty_like_fill": lambda lib: lambda p: lib.empty_like(p).fill_(0).index_fill(
        0, lib.tensor([1]), 3) + p,
    "ones_like_setitem": lambda lib: lambda p: _set(lib.ones_like(p), 0, p[1]),
    "full_like_add_": lambda lib: lambda p: lib.full_like(p, 2.0).add_(p),
    "new_full_rows": lambda lib: lambda p: _set(p.new_full((3, 2), -1.0), lib.tensor([0, 2]),
                                               p.unsqueeze(0).expand(2, 2)),
    "new_empty_region": lambda lib: lambda p: _set(p.new_empty(2, 3, 2).zero_(),
                                                  (1, slice(None), 0), p[0]),
    "accumulate": lambda lib: lambda p: p.new_zeros(4, 2).index_put_(
        (lib.tensor([0, 0]),), p.unsqueeze(0).expand(2, 2), accumulate=True),
    "unbatched_buffer": lambda lib: lambda p: _set(lib.zeros(2, 2), 0, p),
}


def _set(t, key, value):
    t[key] = value
    return t


@pytest.mark.parametrize("case", BUFFERS)
def test_vmap_buffers_made_like_batched_tensors_are_batched(case):
    # zeros/ones/empty/full_like and new_zeros/ones/empty/full of a batched tensor are batched
    # in PyTorch: writing an example's values into them works (it raised), and x[key] = value
    # with per-example values runs as one batched index_put (it warned and looped)
    assert _vmapped(ember, BUFFERS[case]) == _vmapped(torch, BUFFERS[case])


@pytest.mark.parametrize("randomness", ["different", "same", "error"])
@pytest.mark.parametrize("make", ["empty_like", "new_empty", "full_like"])
def test_vmap_random_fills_of_made_buffers(make, randomness):
    # torch.empty_like(x).normal_() draws per example under randomness="different" (it raised
    # that the tensor was unbatched); "same" refuses bernoulli of a batched probability
    def fn(lib):
        def draw(p):
            if make == "empty_like":
                return lib.empty_like(p).normal_()
            if make == "new_empty":
                return p.new_empty(5).uniform_()
            return lib.bernoulli(lib.full_like(p.new_zeros(64), 0.5))
        return draw

    def describe(result):
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], list):
            rows, warned = result
            return len(rows), len(rows[0]), rows[0] == rows[1], warned
        return result
    assert describe(_vmapped(ember, fn, randomness)) == describe(_vmapped(torch, fn, randomness))


def test_flatten_of_one_dim_returns_the_input_itself():
    # flatten() with start_dim == end_dim (after wrapping) returns its input itself in
    # PyTorch (same object: a leaf stays a leaf, no ViewBackward0): Op.returns_input_when
    def run(lib):
        x = lib.ones(3, 4, requires_grad=True)
        y = x.flatten(1)
        return y is x, y.is_leaf, y.grad_fn is None, lib.flatten(x.t(), 0, 0).grad_fn.name()
    assert run(ember) == run(torch)


RESAMPLERS = {
    "avg_pool1d": (lambda F, x: F.avg_pool1d(x, 2), (2, 3, 4)),
    "avg_pool2d": (lambda F, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), (2, 3, 4, 4)),
    "avg_pool3d": (lambda F, x: F.avg_pool3d(x, 2), (1, 2, 4, 4, 4)),
    "adaptive_avg_pool1d": (lambda F, x: F.adaptive_avg_pool1d(x, 3), (2, 3, 4)),
    "adaptive_avg_pool1d_to_1": (lambda F, x: F.adaptive_avg_pool1d(x, 1), (2, 3, 4)),
    "adaptive_avg_pool2d": (lambda F, x: F.adaptive_avg_pool2d(x, 3), (2, 3, 4, 4)),
    "adaptive_avg_pool2d_to_1": (lambda F, x: F.adaptive_avg_pool2d(x, 1), (2, 3, 4, 4)),
    "nearest": (lambda F, x: F.interpolate(x, scale_factor=2), (2, 3, 4, 4)),
    "bilinear": (lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear"), (2, 3, 4, 4)),
    "bilinear_antialias": (lambda F, x: F.interpolate(x, scale_factor=0.5, mode="bilinear",
                                                      antialias=True), (2, 3, 4, 4)),
    "linear": (lambda F, x: F.interpolate(x, scale_factor=2, mode="linear"), (2, 3, 4)),
    "area": (lambda F, x: F.interpolate(x, scale_factor=0.5, mode="area"), (2, 3, 4, 4)),
    "area_1d": (lambda F, x: F.interpolate(x, scale_factor=0.5, mode="area"), (2, 3, 4)),
}


@pytest.mark.parametrize("case", RESAMPLERS)
def test_pooling_and_interpolation_double_backward_names(case):
    # their gradients are PyTorch's backward kernels under create_graph (they were
    # AlongDimsBackward0, DivBackward0); 1-D ones are squeezed 2-D ones, forward and backward
    fn, shape = RESAMPLERS[case]

    def run(lib):
        x = lib.linspace(-1, 1, int(np.prod(shape))).reshape(shape).requires_grad_()
        y = fn(lib.nn.functional, x)
        gx, = lib.autograd.grad(y.pow(2).sum(), x, create_graph=True)
        second, = lib.autograd.grad(gx.pow(2).sum(), x)
        return y.grad_fn.name(), gx.grad_fn.name(), gx.detach().numpy(), second.numpy()
    ours, theirs = run(ember), run(torch)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-4, atol=1e-5)


def _reshape_names(lib):
    x = lib.ones(3, 4, requires_grad=True)
    t = x.t()
    return [t.reshape(4, 3, 1).grad_fn.name(), t.reshape(12).grad_fn.name(),
            x[:, :1].reshape(3).grad_fn.name(), x[:1].reshape(4).grad_fn.name(),
            x.unsqueeze(0).expand(2, 3, 4).reshape(2, 12).grad_fn.name(),
            t.unsqueeze(0).flatten(0, 1).grad_fn.name(),
            t.reshape_as(lib.ones(4, 3, 1)).grad_fn.name(), x.reshape(2, 6).grad_fn.name()]


def test_reshape_of_a_strided_view_is_a_reshape_alias():
    # PyTorch views a contiguous input (ViewBackward0), aliases a strided one it can view
    # (ReshapeAliasBackward0; ember said ViewBackward0) and copies the rest (UnsafeView)
    assert _reshape_names(ember) == _reshape_names(torch)
