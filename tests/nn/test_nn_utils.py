"""nn.utils: gradient clipping, parameter vectors, functional_call, parametrizations, fusion."""

import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.nn import utils
from ember.nn.utils import parametrize
from ember.func import functional_call
from ember.nn.utils import stateless


class Affine(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.weight = nn.Parameter(ember.randn(o, i))
        self.bias = nn.Parameter(ember.randn(o))

    def forward(self, x):
        return x @ self.weight.t() + self.bias


def params_with_grads(*grads):
    out = []
    for g in grads:
        p = nn.Parameter(ember.zeros(len(g)))
        p.grad = ember.tensor(g)
        out.append(p)
    return out


# ----- clipping ----------------------------------------------------------------------------

def test_clip_grad_norm_scales_to_max_norm():
    ps = params_with_grads([3.0, 4.0], [12.0])             # total 2-norm 13
    total = utils.clip_grad_norm_(ps, 6.5)
    assert isinstance(total, ember.Tensor) and float(total) == pytest.approx(13.0)
    np.testing.assert_allclose(ps[0].grad.numpy(), [1.5, 2.0], rtol=1e-5)
    np.testing.assert_allclose(ps[1].grad.numpy(), [6.0], rtol=1e-5)
    ps = params_with_grads([0.3, 0.4])
    utils.clip_grad_norm_(ps, 1.0)                         # below the limit: unchanged
    np.testing.assert_allclose(ps[0].grad.numpy(), [0.3, 0.4], rtol=1e-6)


@pytest.mark.parametrize("norm_type, expected", [(1, 7.0), (float("inf"), 4.0), ("inf", 4.0),
                                                 (3, (27 + 64) ** (1 / 3))])
def test_clip_grad_norm_types(norm_type, expected):
    ps = params_with_grads([3.0, -4.0], [0.0])
    total = utils.clip_grad_norm_(ps, 1.0, norm_type=norm_type)
    assert float(total) == pytest.approx(expected, rel=1e-5)
    np.testing.assert_allclose(ps[0].grad.numpy(), np.array([3.0, -4.0]) / (expected + 1e-6),
                               rtol=1e-5)


def test_clip_grad_norm_nonfinite_and_edge_cases():
    ps = params_with_grads([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from "
                                           "`parameters` is non-finite, so it cannot be "
                                           "clipped"):
        utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert float(utils.clip_grad_norm_([nn.Parameter(ember.zeros(2))], 1.0)) == 0.0
    single = params_with_grads([6.0, 8.0])[0]
    assert float(utils.clip_grad_norm_(single, 5.0, foreach=True)) == pytest.approx(10.0)
    with pytest.warns(UserWarning, match="`parameters` is an empty generator"):
        utils.clip_grad_norm_((p for p in []), 1.0)


def test_get_total_norm_and_clip_grads_with_norm():
    grads = [ember.tensor([3.0]), ember.tensor([4.0])]
    total = utils.get_total_norm(grads)
    assert float(total) == pytest.approx(5.0)
    ps = params_with_grads([3.0], [4.0])
    utils.clip_grads_with_norm_(ps, 1.0, total)
    assert float(ps[0].grad) == pytest.approx(0.6, rel=1e-5)


def test_clip_grad_norm_scales_bfloat16_grads_by_the_full_precision_coefficient():
    low = nn.Parameter(ember.zeros(2, dtype=ember.bfloat16))
    low.grad = ember.tensor([3.0, -4.0], dtype=ember.bfloat16)
    wide = nn.Parameter(ember.zeros(2, dtype=ember.float64))
    wide.grad = ember.tensor([3.0, -4.0], dtype=ember.float64)
    total = utils.clip_grad_norm_([low, wide], 1.0)         # coefficient 1 / sqrt(50), float64
    assert total.dtype is ember.float64
    # 3 / sqrt(50) = 0.42426 rounds to bfloat16 0.423828125 (not 3 * bf16(coef) = 0.42578125)
    assert low.grad.dtype is ember.bfloat16
    assert low.grad.tolist() == [0.423828125, -0.56640625]


def test_clip_grad_value():
    ps = params_with_grads([-3.0, 0.5, 2.0])
    utils.clip_grad_value_(ps, 1.0)
    assert ps[0].grad.tolist() == [-1.0, 0.5, 1.0]


# ----- parameter vectors -----------------------------------------------------------------

def test_parameters_to_vector_and_back():
    m = Affine(3, 2)
    vec = utils.parameters_to_vector(m.parameters())
    expected = np.concatenate([m.weight.detach().numpy().ravel(), m.bias.detach().numpy()])
    np.testing.assert_array_equal(vec.detach().numpy(), expected)
    new = ember.arange(8, dtype=ember.float32)
    weight = m.weight
    utils.vector_to_parameters(new, m.parameters())
    assert m.weight is weight
    assert m.weight.tolist() == [[0, 1, 2], [3, 4, 5]] and m.bias.tolist() == [6, 7]
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        utils.vector_to_parameters([1.0], m.parameters())


# ----- functional_call ---------------------------------------------------------------------

def test_functional_call_swaps_temporarily():
    m = Affine(2, 1)
    w, b = m.weight, m.bias
    x = ember.ones(1, 2)
    new_w = ember.full((1, 2), 2.0, requires_grad=True)
    out = functional_call(m, {"weight": new_w, "bias": ember.zeros(1)}, (x,))
    assert float(out) == 4.0
    out.sum().backward()
    assert new_w.grad.tolist() == [[1.0, 1.0]]
    assert m.weight is w and m.bias is b and w.grad is None
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    out = functional_call(m, ({"weight": ember.zeros(1, 2)}, {"bias": ember.ones(1)}), x)
    assert float(out) == 1.0
    with pytest.raises(ValueError, match=r"^\['bias'\] appeared in multiple dictionaries"):
        functional_call(m, ({"bias": ember.ones(1)}, {"bias": ember.ones(1)}), x)
    both = {"weight": ember.zeros(1, 2), "bias": ember.ones(1)}
    with pytest.raises(ValueError, match=r"^\['weight', 'bias'\] appeared in multiple"):
        functional_call(m, (both, both), x)
    with pytest.warns(FutureWarning, match="stateless.functional_call` is deprecated"):
        out = stateless.functional_call(m, both, x)
    assert float(out) == 1.0


def test_functional_call_strict_and_tied_weights():
    m = Affine(2, 1)
    with pytest.raises(RuntimeError) as info:
        functional_call(m, {"weight": ember.zeros(1, 2), "x": ember.zeros(1)}, (ember.ones(1, 2),),
                        strict=True)
    assert str(info.value) == ("Error(s) in reparametrizing for Affine:\n\tUnexpected key(s): "
                               "'x'.\n\tMissing key(s): 'bias'.")

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Affine(2, 2)
            self.b = self.a

        def forward(self, x):
            return self.b(x)

    t = Tied()
    out = functional_call(t, {"a.weight": ember.zeros(2, 2)}, (ember.ones(1, 2),))
    np.testing.assert_allclose(out.detach().numpy(), t.a.bias.detach().numpy()[None])
    with pytest.raises(ValueError, match=r"functional_call got multiple values for keys "
                                         r"\['a.weight', 'b.weight'\], which are tied"):
        functional_call(t, {"a.weight": ember.zeros(2, 2), "b.weight": ember.ones(2, 2)},
                        (ember.ones(1, 2),))


def test_functional_call_rejects_non_tensor_values_before_running_forward():
    m = Affine(2, 1)
    w = m.weight
    for bad in (3.0, [1.0]):
        with pytest.raises(TypeError, match=r"is not an instance of torch.Tensor"):
            functional_call(m, {"bias": bad}, (ember.ones(1, 2),))
    assert m.weight is w and isinstance(m.bias, nn.Parameter)
    lin = nn.Linear(2, 2)
    out = functional_call(lin, {"bias": None, "weight": ember.eye(2)}, (ember.ones(1, 2),))
    assert out.tolist() == [[1.0, 1.0]]                 # None removes the bias for the call


def test_functional_call_value_under_a_parametrized_name_replaces_the_parametrization():
    # documented: the value is used as the tensor itself (PyTorch itself runs it through
    # right_inverse without grad); "....parametrizations.weight.original" feeds the function
    class Double(nn.Module):
        def forward(self, X):
            return X * 2

    m = Affine(2, 1)
    with ember.no_grad():
        m.weight.fill_(1.0)
        m.bias.zero_()
    parametrize.register_parametrization(m, "weight", Double())
    twin = copy.deepcopy(m)                       # shares the generated class
    x = ember.tensor([[1.0, 2.0]])
    w = ember.tensor([[5.0, 5.0]], requires_grad=True)
    out = functional_call(m, {"weight": w}, (x,))
    assert out.tolist() == [[15.0]] and float(twin(x)) == 6.0
    out.sum().backward()
    assert w.grad.tolist() == [[1.0, 2.0]]
    assert float(m(x)) == 6.0 and m.weight.tolist() == [[2.0, 2.0]]
    out = functional_call(m, {"parametrizations.weight.original": w}, (x,))
    assert out.tolist() == [[30.0]]


# ----- parametrizations --------------------------------------------------------------------

class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).t()

    def right_inverse(self, A):
        return A.triu()


def test_register_and_remove_parametrization():
    m = Affine(4, 4)
    w0 = m.weight
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    assert type(m).__name__ == "ParametrizedAffine"
    assert parametrize.type_before_parametrizations(m) is Affine
    assert m.parametrizations.weight.original is w0          # optimizers keep their reference
    W = m.weight.detach().numpy()
    np.testing.assert_array_equal(W, W.T)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    m(ember.ones(2, 4)).sum().backward()
    assert w0.grad is not None
    sym = ember.tensor([[1.0, 2.0, 0, 0], [2.0, 3.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]])
    m.weight = sym                                             # right_inverse
    np.testing.assert_array_equal(m.weight.detach().numpy(), sym.numpy())
    with parametrize.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    parametrize.remove_parametrizations(m, "weight")
    assert type(m) is Affine and m.weight is w0 and isinstance(m.weight, nn.Parameter)
    np.testing.assert_array_equal(m.weight.detach().numpy(), sym.numpy())
    assert not hasattr(m, "parametrizations")
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(m, "weight")


def test_parametrization_errors_and_state_dict_round_trip():
    class Shrink(nn.Module):
        def forward(self, X):
            return X[:1]

    m = Affine(3, 3)
    with pytest.raises(ValueError, match="Registering a parametrization may not change the "
                                         "shape of the tensor"):
        parametrize.register_parametrization(m, "weight", Shrink())
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a "
                                         "parametrized element with name 'nope'"):
        parametrize.register_parametrization(m, "nope", Symmetric())
    a, b = Affine(3, 3), Affine(3, 3)
    for mod in (a, b):
        parametrize.register_parametrization(mod, "weight", Symmetric())
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
    clone = copy.deepcopy(a)
    np.testing.assert_array_equal(clone.weight.detach().numpy(), a.weight.detach().numpy())


def test_right_inverse_dtype_and_type_errors_in_pytorchs_words():
    class Flip(nn.Module):
        mode = "same"

        def forward(self, X):
            return X

        def right_inverse(self, X):
            return {"dtype": X.double(), "int": 3}.get(self.mode, X)

    flip = Flip()
    flip.mode = "dtype"
    with pytest.raises(ValueError, match=r"^When `right_inverse` outputs one tensor, it may not "
                                         r"change the dtype.\noriginal.dtype: ember.float32\n"
                                         r"right_inverse\(original\).dtype: ember.float64$"):
        parametrize.register_parametrization(Affine(2, 2), "weight", flip)
    flip.mode = "same"
    m = Affine(2, 2)
    parametrize.register_parametrization(m, "weight", flip)
    flip.mode = "dtype"
    with pytest.raises(ValueError, match="^The tensor returned by `right_inverse` has dtype "
                                         "ember.float64 while `original` has dtype "
                                         "ember.float32$"):
        m.weight = ember.ones(2, 2)
    flip.mode = "int"
    with pytest.raises(ValueError, match="^`right_inverse` should return a tensor. Got int$"):
        m.weight = ember.ones(2, 2)


def test_weight_norm_parametrization():
    m = Affine(5, 3)
    w = m.weight.detach().numpy().copy()
    utils.parametrizations.weight_norm(m)
    g = m.parametrizations.weight.original0
    v = m.parametrizations.weight.original1
    assert g.shape == (3, 1) and v.shape == (3, 5)
    np.testing.assert_allclose(g.detach().numpy()[:, 0], np.linalg.norm(w, axis=1), rtol=1e-6)
    np.testing.assert_allclose(m.weight.detach().numpy(), w, rtol=1e-5)
    with ember.no_grad():
        g.mul_(2)
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w, rtol=1e-5)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0",
                                    "parametrizations.weight.original1"]
    m(ember.ones(1, 5)).sum().backward()
    assert g.grad is not None and v.grad is not None


def test_spectral_norm_parametrization():
    m = Affine(6, 4)
    utils.parametrizations.spectral_norm(m)
    for _ in range(20):
        W = m.weight                                            # training: power iterations
    sigma = np.linalg.svd(W.detach().numpy().astype(np.float64), compute_uv=False)[0]
    assert sigma == pytest.approx(1.0, rel=1e-3)
    assert "parametrizations.weight.0._u" in m.state_dict()
    m.eval()
    np.testing.assert_array_equal(m.weight.detach().numpy(), m.weight.detach().numpy())


def test_hook_based_weight_norm():
    m = Affine(4, 2)
    w = m.weight.detach().numpy().copy()
    with pytest.warns(FutureWarning):
        utils.weight_norm(m)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_g", "weight_v"]
    with ember.no_grad():
        m.weight_g.mul_(3)
    m(ember.ones(1, 4))
    np.testing.assert_allclose(m.weight.detach().numpy(), 3 * w, rtol=1e-5)
    utils.remove_weight_norm(m)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"]
    np.testing.assert_allclose(m.weight.detach().numpy(), 3 * w, rtol=1e-5)


# ----- fusion ------------------------------------------------------------------------------

class FakeBN(nn.Module):
    """BatchNorm's attributes (running stats, eps, affine weight/bias) without its forward."""

    def __init__(self, n):
        super().__init__()
        self.num_features, self.eps = n, 1e-5
        self.weight = nn.Parameter(ember.rand(n) + 0.5)
        self.bias = nn.Parameter(ember.randn(n))
        self.register_buffer("running_mean", ember.randn(n))
        self.register_buffer("running_var", ember.rand(n) + 0.5)

    def forward(self, x):
        shape = (1, -1) + (1,) * (x.ndim - 2)
        return ((x - self.running_mean.reshape(shape))
                / (self.running_var.reshape(shape) + self.eps).sqrt()
                * self.weight.reshape(shape) + self.bias.reshape(shape))


def test_fuse_linear_bn_eval():
    lin = Affine(5, 3)
    lin.out_features = 3
    bn = FakeBN(3)
    lin.eval(), bn.eval()
    fused = utils.fuse_linear_bn_eval(lin, bn)
    x = ember.randn(4, 5)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(lin(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    assert fused is not lin and isinstance(fused.weight, nn.Parameter)
    with pytest.raises(AssertionError, match="got linear.out_features=4 and bn.num_features=2"):
        utils.fuse_linear_bn_eval(nn.Linear(3, 4).eval(), nn.BatchNorm1d(2).eval())


def test_fuse_conv_bn_weights_matches_reference():
    w, b = ember.randn(4, 2, 3, 3), ember.randn(4)
    bn = FakeBN(4)
    fw, fb = utils.fuse_conv_bn_weights(w, b, bn.running_mean, bn.running_var, bn.eps,
                                        bn.weight, bn.bias)
    scale = (bn.weight / (bn.running_var + bn.eps).sqrt()).detach().numpy()
    np.testing.assert_allclose(fw.detach().numpy(), w.numpy() * scale[:, None, None, None],
                               rtol=1e-5)
    np.testing.assert_allclose(
        fb.detach().numpy(),
        (b.numpy() - bn.running_mean.numpy()) * scale + bn.bias.detach().numpy(), rtol=1e-5)
    fw_t, _ = utils.fuse_conv_bn_weights(ember.randn(2, 4, 3), None, bn.running_mean,
                                         bn.running_var, bn.eps, None, None, transpose=True)
    assert fw_t.shape == (2, 4, 3)


def test_fuse_conv_bn_eval_with_real_layers():
    if not hasattr(nn, "Conv2d") or not hasattr(nn, "BatchNorm2d"):
        pytest.skip("Conv2d/BatchNorm2d are written by other helpers")
    conv, bn = nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4)
    with ember.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 1.5)
    conv.eval(), bn.eval()
    fused = utils.fuse_conv_bn_eval(conv, bn)
    x = ember.randn(2, 2, 6, 6)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(conv(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_fuse_without_running_stats_says_why():
    stateless_bn = nn.BatchNorm2d(3, track_running_stats=False).eval()
    with pytest.raises(AssertionError,
                       match="bn.running_mean and bn.running_var must not be None"):
        utils.fuse_conv_bn_eval(nn.Conv2d(2, 3, 1).eval(), stateless_bn)
    stateless_bn1 = nn.BatchNorm1d(3, track_running_stats=False).eval()
    with pytest.raises(AssertionError,
                       match="bn.running_mean and bn.running_var must not be None"):
        utils.fuse_linear_bn_eval(nn.Linear(2, 3).eval(), stateless_bn1)


def test_hook_based_spectral_norm():
    ember.manual_seed(0)
    layer = nn.utils.spectral_norm(nn.Linear(5, 4), n_power_iterations=30)
    assert list(layer.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert layer.weight_u.shape == (4,) and layer.weight_v.shape == (5,)
    x = ember.randn(3, 5)
    layer(x).sum().backward()                       # training: u and v take their steps
    assert ember.linalg.matrix_norm(layer.weight, 2).item() == pytest.approx(1.0, rel=1e-4)
    assert layer.weight_orig.grad is not None and layer.weight_orig.grad.shape == (4, 5)
    u = layer.weight_u.clone()
    layer.eval()
    layer(x)
    assert ember.equal(layer.weight_u, u)           # no steps in eval mode
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks on the "
                                           "same parameter weight"):
        nn.utils.spectral_norm(layer)
    expected = layer.weight.detach().clone()
    nn.utils.remove_spectral_norm(layer)
    assert list(layer.state_dict()) == ["bias", "weight"]
    assert isinstance(layer.weight, nn.Parameter) and ember.allclose(layer.weight, expected)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in Linear"):
        nn.utils.remove_spectral_norm(layer)
    transposed = nn.utils.spectral_norm(nn.ConvTranspose2d(3, 6, 2))
    assert transposed.weight_u.shape == (6,)        # dim 1 for transposed convolutions
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
        nn.utils.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)


class _Double(nn.Module):
    def forward(self, x):
        return 2 * x


def test_transfer_parametrizations_and_params_shares_originals():
    src = nn.Linear(2, 2)
    parametrize.register_parametrization(src, "weight", _Double())
    dst = nn.Linear(3, 3)
    assert parametrize.transfer_parametrizations_and_params(src, dst) is dst
    assert dst.parametrizations.weight[0] is src.parametrizations.weight[0]
    assert dst.parametrizations.weight.original is src.parametrizations.weight.original
    np.testing.assert_array_equal(dst.weight.detach().numpy(), src.weight.detach().numpy())
    bare = nn.Module()
    parametrize.transfer_parametrizations_and_params(src, bare, "weight")
    assert bare.weight.shape == (2, 2) and not hasattr(bare, "bias")
    plain = nn.Linear(2, 2)
    assert parametrize.transfer_parametrizations_and_params(plain, dst) is dst


def test_skip_init_needs_a_module_class():
    with pytest.raises(RuntimeError, match="Expected a Module; got <class 'int'>"):
        utils.skip_init(int, 3)
    assert utils.skip_init(nn.Linear, 3, 2).weight.shape == (2, 3)
