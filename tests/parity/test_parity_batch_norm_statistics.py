"""Batch norm's training statistics against PyTorch's (which accumulates float32 sums in
double: ember's float32 sums round an ulp off in about half the channels), the running
variance from one value per channel, and the autograd node of batch_norm_update_stats."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _input(shape):
    return (np.random.default_rng(3).standard_normal(shape) * 3 + 5).astype(np.float32)


@pytest.mark.parametrize("shape", [(16, 64, 8, 8), (4, 50, 33, 17), (32, 100, 7)])
def test_saved_and_running_means_match_pytorchs(shape):
    x = _input(shape)
    got, want = [], []
    for T, out in ((ember, got), (torch, want)):
        rm, rv = T.zeros(shape[1]), T.ones(shape[1])
        saved = T.native_batch_norm(T.tensor(x), None, None, rm, rv, True, 0.1, 1e-5)[1]
        rm2 = T.zeros(shape[1])
        upd = T.batch_norm_update_stats(T.tensor(x), rm2, None, 0.1)[0]
        out += [saved.numpy(), rm.numpy(), upd.numpy(), rm2.numpy()]
    for g, w in zip(got, want):               # (an ulp apart in about half the channels)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=0)


def test_one_value_per_channel_running_variance_is_nan_as_pytorchs():
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    got, want = [], []
    for T, out in ((ember, got), (torch, want)):
        rm, rv = T.zeros(3), T.ones(3)
        T.native_batch_norm(T.tensor(x), None, None, rm, rv, True, 0.5, 1e-5)
        out += [rm.tolist(), np.isnan(rv.numpy()).tolist()]
    assert got == want


def test_update_stats_autograd_node_as_pytorchs():
    x = _input((4, 3, 5))

    def run(T):
        leaf = T.tensor(x, requires_grad=True)
        mean, var = T.batch_norm_update_stats(leaf, None, None, 0.1)
        flags = (mean.requires_grad, var.requires_grad, type(mean.grad_fn).__name__,
                 mean.grad_fn.name())
        try:
            T.autograd.grad(var.sum(), leaf)
        except RuntimeError as e:
            return flags, str(e)
        return flags, None
    assert run(ember) == run(torch)


@pytest.mark.parametrize("eps", [1e-5, 1e-3, 0.1])
def test_constant_channel_invstd_is_pytorchs_bit_for_bit(eps):
    # PyTorch takes 1 / sqrt(var + eps) in double: a float32 one rounds an ulp off
    x = np.ones((4, 3, 5), np.float32) * np.array([1.0, 2.5, -7.0], np.float32)[:, None]
    got, want = (T.native_batch_norm(T.tensor(x), None, None, None, None, True, 0.1, eps)[2]
                 .numpy() for T in (ember, torch))
    np.testing.assert_array_equal(got, want)


def _low_run(T, dtype, training, shape=(32, 16, 64)):
    rng = np.random.default_rng(7)
    c = shape[1]
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    vectors = [rng.standard_normal(c), rng.standard_normal(c), rng.standard_normal(c),
               rng.uniform(0.5, 2, c)]
    d = getattr(T, dtype)
    w, b, rm, rv = (T.tensor(v.astype(np.float32)).to(d) for v in vectors)
    out = T.native_batch_norm(T.tensor(x).to(d), w, b, rm, rv, training, 0.1, 1e-5)
    return [t.float().numpy() for t in out]


@pytest.mark.parametrize("dtype,training", [("float16", True), ("float16", False)])
def test_16_bit_output_is_pytorchs_bit_for_bit(dtype, training):
    # x * (invstd * w) + (b - mean * invstd * w) rounded once to float32, the training
    # output from the statistics rounded to the input's dtype, as PyTorch's kernel
    got, want = _low_run(ember, dtype, training), _low_run(torch, dtype, training)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_input_with_float32_parameters_saves_float32_statistics(dtype):
    def run(T):
        x = T.ones(4, 3, 2, dtype=getattr(T, dtype))
        out = T.native_batch_norm(x, T.ones(3), None, T.zeros(3), T.ones(3), True, 0.1, 1e-5)
        alone = T.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
        return [str(t.dtype).split(".")[-1] for t in out + alone]
    assert run(ember) == run(torch)


def test_empty_batch_refused_by_native_batch_norm_in_training_only():
    def run(T):
        x = T.zeros(0, 3, 4)
        try:
            T.native_batch_norm(x, None, None, T.zeros(3), T.ones(3), True, 0.1, 1e-5)
            refused = None
        except RuntimeError as e:
            refused = str(e)
        shapes = [tuple(t.shape) for t in
                  T.native_batch_norm(x, None, None, T.zeros(3), T.ones(3), False, 0.1, 1e-5)]
        return refused, shapes
    got, want = run(ember), run(torch)
    assert got == want and want[0] is not None


def test_empty_batch_through_batch_norm_and_instance_norm_as_pytorchs():
    def run(T):
        x = T.zeros(0, 3, 2, requires_grad=True)
        w, b = T.full((3,), 2.0, requires_grad=True), T.zeros(3, requires_grad=True)
        rm, rv = T.zeros(3), T.ones(3)
        y = T.nn.functional.batch_norm(x, rm, rv, w, b, training=True)
        y.sum().backward()
        irm, irv = T.zeros(3), T.ones(3)
        z = T.nn.functional.instance_norm(T.zeros(0, 3, 4), irm, irv, use_input_stats=True)
        m = T.nn.BatchNorm2d(3)
        m(T.zeros(0, 3, 2, 2))
        return (tuple(y.shape), tuple(x.grad.shape), w.grad.tolist(), b.grad.tolist(),
                rm.tolist(), rv.tolist(), tuple(z.shape), np.isnan(irm.numpy()).tolist(),
                m.running_mean.tolist(), int(m.num_batches_tracked))
    assert run(ember) == run(torch)


def test_create_graph_gradient_finite_for_a_tiny_eps_on_constant_channels():
    # invstd = 1e15: invstd^3 overflows float32, and inf * 0 made the gradient NaN
    def run(T):
        x = T.full((4, 2, 3), 2.0, requires_grad=True)
        y = T.nn.functional.batch_norm(x, None, None, training=True, eps=1e-30)
        g, = T.autograd.grad((y * T.arange(24.0).reshape(4, 2, 3)).sum(), x,
                             create_graph=True)
        return g.detach().numpy()
    got, want = run(ember), run(torch)
    assert np.isfinite(want).all()
    np.testing.assert_allclose(got, want, rtol=1e-6)
