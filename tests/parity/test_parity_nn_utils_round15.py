"""nn.init and nn.utils against PyTorch (round 15): truncated normal in the tails, weight
normalization of 1-D tensors and negative dims, skip_init's errors."""

import math
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.parity,
              pytest.mark.filterwarnings("ignore:mean is more than 2 std")]


def _truncated_normal_mean(mean, std, a, b):
    """The exact mean of N(mean, std^2) truncated to [a, b]."""
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    upper_tail = lambda x: math.erfc(x / math.sqrt(2)) / 2  # noqa: E731  (exact far out)
    if alpha > 0:
        mass = upper_tail(alpha) - upper_tail(beta)
    else:
        mass = upper_tail(-beta) - upper_tail(-alpha)
    return mean + std * (pdf(alpha) - pdf(beta)) / mass


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("a, b", [(5.0, 6.0), (10.0, 11.0), (-11.0, -10.0)])
def test_trunc_normal_far_tail_follows_the_truncated_density(dtype, a, b):
    ember.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = ember.nn.init.trunc_normal_(ember.empty(20000, dtype=getattr(ember, dtype)), a=a, b=b)
    values = x.float().numpy()
    assert values.min() >= a and values.max() <= b
    assert abs(values.mean() - _truncated_normal_mean(0.0, 1.0, a, b)) < 0.01
    assert values.std() > 0.05                     # not collapsed onto one bound


def test_trunc_normal_negative_std_samples_like_torch():
    for lib in (ember, torch):
        lib.manual_seed(0)
        x = lib.nn.init.trunc_normal_(lib.empty(20000), std=-1.0).numpy()
        assert x.min() >= -2.0 and x.max() <= 2.0
        assert abs(x.std() - 0.88) < 0.02


def test_trunc_normal_bad_bounds_and_dtypes_raise_like_torch():
    def calls(lib):
        yield lambda: lib.nn.init.trunc_normal_(lib.empty(3), a=3.0, b=float("inf"))
        yield lambda: lib.nn.init.trunc_normal_(lib.zeros(3, dtype=lib.int64), a=5.0, b=6.0)
        yield lambda: lib.nn.init.trunc_normal_(lib.zeros(3, dtype=lib.int64))
    for ember_call, torch_call in zip(calls(ember), calls(torch)):
        with pytest.raises(Exception) as expected:
            torch_call()
        with pytest.raises(type(expected.value), match=str(expected.value).replace('"', '.')):
            ember_call()


def test_trunc_normal_bumps_the_version_once_and_uses_the_generator():
    p = ember.nn.Parameter(ember.ones(4, 4))
    ember.nn.init.trunc_normal_(p)
    assert p._version == 1 and p.grad_fn is None

    def draw():
        gen = ember.Generator().manual_seed(3)
        return ember.nn.init.trunc_normal_(ember.empty(50), a=3.0, b=4.0, generator=gen)
    assert ember.equal(draw(), draw())


@pytest.mark.parametrize("pow_", [1, 2])
def test_norm_except_dim_of_a_vector_is_elementwise(pow_):
    results = []
    for lib in (ember, torch):
        v = lib.tensor([-3.0, 4.0, 0.5], requires_grad=True)
        out = lib.norm_except_dim(v, pow_, 0)
        (out * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        results.append((out.detach().numpy(), v.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1])


@pytest.mark.parametrize("dim", [0, 1, -2, None])
def test_weight_norm_parametrization_magnitude_shape_and_value(dim):
    results = []
    for lib in (ember, torch):
        layer = lib.nn.Linear(4, 3)
        with lib.no_grad():
            layer.weight.copy_(lib.arange(12.0).reshape(3, 4) - 5)
        layer = lib.nn.utils.parametrizations.weight_norm(layer, dim=dim)
        results.append((layer.parametrizations.weight.original0.detach().numpy(),
                        layer.weight.detach().numpy()))
    assert results[0][0].shape == results[1][0].shape
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6, atol=1e-6)


def test_weight_norm_of_a_bias_keeps_one_magnitude_per_element():
    shapes = []
    for lib in (ember, torch):
        layer = lib.nn.Linear(4, 3)
        with lib.no_grad():
            layer.bias.copy_(lib.tensor([-1.0, 2.0, 0.5]))
        new = lib.nn.utils.parametrizations.weight_norm(layer, name="bias")
        assert new.parametrizations.bias.original0.tolist() == [1.0, 2.0, 0.5]
        assert new.bias.tolist() == [-1.0, 2.0, 0.5]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            old = lib.nn.utils.weight_norm(lib.nn.Linear(4, 3), name="bias")
        shapes.append((tuple(old.bias_g.shape), tuple(old.bias_v.shape)))
    assert shapes[0] == shapes[1] == ((3,), (3,))


def test_skip_init_of_a_non_class_raises_type_error_like_torch():
    for lib in (ember, torch):
        with pytest.raises(TypeError, match="issubclass"):
            lib.nn.utils.skip_init(lambda: None)
        with pytest.raises(RuntimeError, match="Expected a Module"):
            lib.nn.utils.skip_init(int)


def test_pad_sequence_of_non_tensors_raises_type_error_like_torch():
    for lib in (ember, torch):
        with pytest.raises(TypeError, match="expected Tensor as element 1 in argument 0, but "
                                            "got list"):
            lib.nn.utils.rnn.pad_sequence([lib.ones(2), [1.0]])


def test_clip_grads_with_norm_needs_a_tensor_total_norm():
    for lib in (ember, torch):
        p = lib.nn.Parameter(lib.ones(2))
        p.grad = lib.tensor([3.0, 4.0])
        with pytest.raises(TypeError, match="clamp"):
            lib.nn.utils.clip_grads_with_norm_([p], 1.0, 5.0)
        lib.nn.utils.clip_grads_with_norm_([p], 1.0, lib.tensor(5.0))
        np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)


@pytest.mark.parametrize("hook, what", [("weight_norm", "weight normalization"),
                                        ("spectral_norm", "spectral normalization")])
def test_hook_reparametrizations_reject_lazy_modules_like_torch(hook, what):
    for lib in (ember, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with pytest.raises(ValueError, match=f"can't have uninitialized parameters. Make "
                                                 f"sure to run the dummy forward before "
                                                 f"applying {what}"):
                getattr(lib.nn.utils, hook)(lib.nn.LazyLinear(3))


def test_old_spectral_norm_of_a_bias_matches_torch():
    layers = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        layers.append(lib.nn.utils.spectral_norm(lib.nn.Linear(3, 3), name="bias"))
    state = {k: ember.tensor(v.numpy()) for k, v in layers[0].state_dict().items()}
    assert {k: tuple(v.shape) for k, v in state.items()} == \
        {k: tuple(v.shape) for k, v in layers[1].state_dict().items()}
    layers[1].load_state_dict(state)
    for mode in ("train", "eval"):
        outs = [getattr(layer, mode)()(lib.ones(1, 3)).detach().numpy()
                for layer, lib in zip(layers, (torch, ember))]
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, atol=1e-7)


def test_private_no_grad_init_helpers_exist_as_in_torch():
    for lib in (ember, torch):
        init = lib.nn.init
        p = lib.nn.Parameter(lib.ones(2, 3))
        assert init._no_grad_fill_(p, 2.5) is p and p.tolist() == [[2.5] * 3] * 2
        assert init._no_grad_zero_(p).tolist() == [[0.0] * 3] * 2
        assert float(init._no_grad_uniform_(p, 3.0, 4.0).detach().min()) >= 3.0
        assert init._no_grad_normal_(p, 0.0, 1.0).shape == (2, 3)
        assert float(init._no_grad_trunc_normal_(p, 0.0, 1.0, 0.5, 0.6).detach().min()) >= 0.5
        assert p.grad_fn is None
