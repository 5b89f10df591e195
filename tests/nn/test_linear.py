"""Identity, Linear, Bilinear, Flatten, Unflatten and F.bilinear."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.autograd import gradcheck, gradgradcheck


def test_identity_ignores_arguments():
    m = nn.Identity(3, foo=1)
    x = ember.randn(2, 3)
    assert m(x) is x
    assert repr(m) == "Identity()"


def test_linear_defaults_and_repr():
    m = nn.Linear(4, 3)
    assert repr(m) == "Linear(in_features=4, out_features=3, bias=True)"
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [("weight", (3, 4)),
                                                                        ("bias", (3,))]
    m = nn.Linear(4, 3, bias=False, dtype=ember.float64)
    assert m.bias is None and m.weight.dtype is ember.float64
    assert repr(m) == "Linear(in_features=4, out_features=3, bias=False)"


def test_linear_init_bounds():
    ember.manual_seed(0)
    m = nn.Linear(400, 300)
    bound = 1 / 20
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert abs(w.mean()) < 0.002
    assert abs(w.std() - bound / np.sqrt(3)) < 0.002       # U(-b, b) has std b/sqrt(3)
    assert np.abs(m.bias.detach().numpy()).max() <= bound


def test_linear_forward_and_grads_match_numpy():
    m = nn.Linear(3, 2, dtype=ember.float64)
    x = ember.randn(5, 4, 3, dtype=ember.float64, requires_grad=True)
    y = m(x)
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() @ w.T + b)
    g = ember.randn(5, 4, 2, dtype=ember.float64)
    y.backward(g)
    gn = g.numpy().reshape(-1, 2)
    np.testing.assert_allclose(m.weight.grad.numpy(), gn.T @ x.detach().numpy().reshape(-1, 3))
    np.testing.assert_allclose(m.bias.grad.numpy(), gn.sum(0))
    np.testing.assert_allclose(x.grad.numpy(), (gn @ w).reshape(5, 4, 3))


def test_linear_shape_error():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied "
                                           r"\(4x5 and 3x2\)"):
        nn.Linear(3, 2)(ember.randn(4, 5))


def _bilinear_ref(x1, x2, w, b=None):
    out = np.einsum("...i,oij,...j->...o", x1, w, x2)
    return out if b is None else out + b


def test_bilinear_module_and_function():
    m = nn.Bilinear(2, 3, 4, dtype=ember.float64)
    assert repr(m) == "Bilinear(in1_features=2, in2_features=3, out_features=4, bias=True)"
    assert tuple(m.weight.shape) == (4, 2, 3) and tuple(m.bias.shape) == (4,)
    assert np.abs(m.weight.detach().numpy()).max() <= 1 / np.sqrt(2)
    x1 = ember.randn(5, 2, dtype=ember.float64)
    x2 = ember.randn(5, 3, dtype=ember.float64)
    np.testing.assert_allclose(m(x1, x2).detach().numpy(),
                               _bilinear_ref(x1.numpy(), x2.numpy(), m.weight.detach().numpy(),
                                             m.bias.detach().numpy()))
    x1 = ember.randn(2, 3, 2, dtype=ember.float64)
    x2 = ember.randn(2, 3, 3, dtype=ember.float64)
    w = ember.randn(4, 2, 3, dtype=ember.float64)
    np.testing.assert_allclose(F.bilinear(x1, x2, w).numpy(),
                               _bilinear_ref(x1.numpy(), x2.numpy(), w.numpy()))
    assert ember.bilinear is F.bilinear


def test_bilinear_rejects_zero_in1_features():
    with pytest.raises(ValueError, match=r"in1_features must be > 0, but got \(in1_features=0\)"):
        nn.Bilinear(0, 2, 3)
    m = nn.Bilinear(2, 0, 0)
    assert tuple(m.weight.shape) == (0, 2, 0)


def test_bilinear_gradients():
    args = [ember.randn(s, dtype=ember.float64, requires_grad=True)
            for s in ((3, 2), (3, 2), (2, 2, 2), (2,))]
    assert gradcheck(F.bilinear, args)
    assert gradgradcheck(F.bilinear, args)


def test_bilinear_errors():
    with pytest.raises(RuntimeError, match="bilinear\\(\\): input2 size does not match weight "
                                           "size: got 4 but expected 3"):
        F.bilinear(ember.randn(2, 3), ember.randn(2, 4), ember.randn(5, 3, 3))
    with pytest.raises(RuntimeError, match="input batch dimensions do not match at dim 0: got "
                                           "2 and 3"):
        F.bilinear(ember.randn(2, 3), ember.randn(3, 4), ember.randn(5, 3, 4))


def test_flatten_unflatten():
    x = ember.randn(2, 3, 4, 5)
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    u = nn.Unflatten(1, (2, 3))
    assert repr(u) == "Unflatten(dim=1, unflattened_size=(2, 3))"
    assert u(ember.randn(4, 6)).shape == (4, 2, 3)
    with pytest.raises(RuntimeError, match=r"unflatten: Provided sizes \[2, 4\] don't multiply "
                                           r"up to the size of dim 1 \(6\)"):
        nn.Unflatten(1, (2, 4))(ember.randn(2, 6))


@pytest.mark.parametrize("shape, with_bias, name", [
    ((2, 3), True, "AddmmBackward0"), ((2, 3), False, "MmBackward0"),
    ((5, 2, 3), True, "ViewBackward0"), ((5, 2, 3), False, "UnsafeViewBackward0"),
    ((3,), True, "ViewBackward0"), ((3,), False, "SqueezeBackward4")])
def test_linear_names_its_backward_as_pytorch(shape, with_bias, name):
    w = ember.randn(4, 3, requires_grad=True)
    b = ember.randn(4, requires_grad=True) if with_bias else None
    out = ember.nn.functional.linear(ember.randn(shape), w, b)
    assert out.grad_fn.name() == name
    out.sum().backward()
    assert w.grad.shape == (4, 3)


def test_linear_on_a_strided_batch_adds_the_bias_last():
    # PyTorch folds only a contiguous batch into one addmm; a strided one takes matmul + add
    w, b = ember.ones(4, 3), ember.ones(4, requires_grad=True)
    for x in (ember.ones(2, 5, 3).transpose(0, 1), ember.ones(1, 5, 3).expand(2, 5, 3),
              ember.ones(2, 5, 2, 3).transpose(1, 2)):
        assert ember.nn.functional.linear(x, w, b).grad_fn.name() == "AddBackward0"
    assert ember.nn.functional.linear(ember.ones(2, 5, 3), w, b).grad_fn.name() == \
        "ViewBackward0"


@pytest.mark.parametrize("a, b, name", [
    ((3,), (3,), "DotBackward0"), ((2, 3), (3,), "MvBackward0"), ((3,), (3, 2), "SqueezeBackward4"),
    ((2, 3), (3, 2), "MmBackward0"), ((5, 2, 3), (3, 2), "UnsafeViewBackward0"),
    ((2, 3), (5, 3, 2), "CloneBackward0")])
def test_matmul_names_its_backward_as_pytorch(a, b, name):
    x, y = ember.randn(a, requires_grad=True), ember.randn(b)
    assert (x @ y).grad_fn.name() == name


def test_linear_dtype_errors_follow_the_bias_path():
    x64, i64 = ember.ones(2, 3, dtype=ember.float64), ember.ones(2, 2, 3, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="^mat1 and mat2 must have the same dtype, but got "
                                           "Long and Float(\n|$)"):
        nn.Linear(3, 4)(i64)
    with pytest.raises(RuntimeError, match="^mat1 and mat2 must have the same dtype, but got "
                                           "Double and Float(\n|$)"):
        nn.Linear(3, 4)(x64)
    with pytest.raises(RuntimeError, match="^expected m1 and m2 to have the same dtype, but "
                                           "got: long int != float(\n|$)"):
        nn.Linear(3, 4, bias=False)(i64)
    with pytest.raises(RuntimeError, match="^self and mat2 must have the same dtype, but got "
                                           "Double and Float$"):
        F.linear(x64, ember.ones(4, 3), ember.ones(4, dtype=ember.float64))


def test_unflatten_checks_size_elements():
    with pytest.raises(TypeError, match="^unflattened_size must be tuple of ints, but found "
                                        "element of type float at pos 0$"):
        nn.Unflatten(1, (2.0, 2))
    with pytest.raises(TypeError, match="^unflattened_size must be tuple of ints, but found "
                                        "element of type tuple at pos 0$"):
        nn.Unflatten(1, (("a", 2), ("b", 2)))
    with pytest.raises(TypeError, match="^unflattened_size must be a tuple of ints, but found "
                                        "type int$"):
        nn.Unflatten(1, 4)
    assert nn.Unflatten(1, [2, -1])(ember.ones(2, 6)).shape == (2, 2, 3)


def test_zero_element_layers_warn_on_init():
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        m = nn.Linear(0, 3)
    assert m.bias.tolist() == [0.0, 0.0, 0.0] and m.weight.shape == (3, 0)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        nn.Conv2d(1, 1, 0)
