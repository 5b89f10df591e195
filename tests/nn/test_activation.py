"""Activation modules and the Python functions of nn.functional (values, grads, errors)."""

import math
import warnings

import numpy as np
import pytest
import scipy.special as sp

import ember
import ember.nn as nn
import ember.nn.functional as F


def _x(*shape, requires_grad=False):
    ember.manual_seed(0)
    return ember.randn(shape, dtype=ember.float64, requires_grad=requires_grad)


@pytest.mark.parametrize("module,ref", [
    (nn.ReLU(), lambda a: np.maximum(a, 0)),
    (nn.ReLU6(), lambda a: np.clip(a, 0, 6)),
    (nn.LeakyReLU(0.2), lambda a: np.where(a > 0, a, 0.2 * a)),
    (nn.ELU(0.5), lambda a: np.where(a > 0, a, 0.5 * np.expm1(a))),
    (nn.CELU(2.0), lambda a: np.where(a > 0, a, 2 * np.expm1(a / 2))),
    (nn.GELU(), lambda a: 0.5 * a * (1 + sp.erf(a / math.sqrt(2)))),
    (nn.SiLU(), lambda a: a * sp.expit(a)),
    (nn.Sigmoid(), sp.expit),
    (nn.Tanh(), np.tanh),
    (nn.Hardtanh(-2.0, 3.0), lambda a: np.clip(a, -2, 3)),
    (nn.Softsign(), lambda a: a / (1 + np.abs(a))),
    (nn.Tanhshrink(), lambda a: a - np.tanh(a)),
    (nn.Threshold(0.1, 20.0), lambda a: np.where(a <= 0.1, 20.0, a)),
    (nn.Softplus(2.0, 5.0), lambda a: np.where(2 * a > 5, a, np.logaddexp(0, 2 * a) / 2)),
    (nn.Softmax(1), lambda a: sp.softmax(a, 1)),
    (nn.LogSoftmax(1), lambda a: sp.log_softmax(a, 1)),
    (nn.Softmin(1), lambda a: sp.softmax(-a, 1)),
    (nn.Softmax2d(), lambda a: sp.softmax(a, -3)),
    (nn.GLU(1), lambda a: a[:, :2] * sp.expit(a[:, 2:])),
    (nn.LogSigmoid(), lambda a: -np.logaddexp(0, -a)),
    (nn.Hardswish(), lambda a: a * np.clip(a + 3, 0, 6) / 6),
    (nn.RReLU().eval(), lambda a: np.where(a >= 0, a, a * (1 / 8 + 1 / 3) / 2)),
])
def test_module_forward_and_gradient(module, ref):
    x = _x(2, 4, 3, requires_grad=True)
    np.testing.assert_allclose(np.asarray(module(x).detach()), ref(np.asarray(x.detach())),
                               rtol=1e-10, atol=1e-12)
    assert ember.autograd.gradcheck(module, (x,))


def test_inplace_functions_write_into_their_input():
    for fn, args in ((F.relu_, ()), (F.elu_, (0.5,)), (F.leaky_relu_, (0.1,)),
                     (F.hardtanh_, (-0.5, 0.5)), (F.threshold_, (0.0, 3.0)), (F.selu_, ()),
                     (F.celu_, (1.5,)), (F.rrelu_, ()), (ember.relu_, ()), (ember.selu_, ())):
        x = _x(3, 4)
        out_of_place = getattr(F, fn.__name__.rstrip("_"))(x, *args)
        assert fn(x, *args) is x, fn
        if fn is not F.rrelu_:              # training=False: deterministic
            np.testing.assert_allclose(np.asarray(x), np.asarray(out_of_place))
    x = _x(3)
    assert F.relu(x, inplace=True) is x and F.silu(x, inplace=True) is x


def test_inplace_on_a_leaf_that_requires_grad_raises():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        F.elu(_x(3, requires_grad=True), inplace=True)


def test_rrelu_training_slopes_are_random_in_bounds():
    ember.manual_seed(0)
    x = -ember.rand(1000, dtype=ember.float64) - 0.1
    y = ember.rrelu(x, 0.1, 0.3, training=True)
    slopes = np.asarray(y) / np.asarray(x)
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    x.requires_grad_()
    y = F.rrelu(x, 0.1, 0.3, training=True)
    y.sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), np.asarray(y.detach()) / np.asarray(
        x.detach()))
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal"):
        ember.rrelu(x, 0.5, 0.1)


def test_prelu_module():
    m = nn.PReLU(3, init=0.1)
    assert repr(m) == "PReLU(num_parameters=3)"
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    np.testing.assert_array_equal(np.asarray(m.weight.detach()), np.float32([0.1] * 3))
    x = ember.tensor([[-1.0, 2.0, -3.0]])
    np.testing.assert_allclose(np.asarray(m(x).detach()), [[-0.1, 2.0, -0.3]], rtol=1e-6)
    m(x).sum().backward()
    np.testing.assert_allclose(np.asarray(m.weight.grad), [-1.0, 0.0, -3.0])


def test_softmax_implicit_dim_warns_and_picks_torchs_dim():
    x = _x(2, 3, 4, 5)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y = F.softmax(x)
    np.testing.assert_allclose(np.asarray(y).sum(1), 1.0)
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        F.log_softmax(_x(3))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        F.softmin(_x(2, 3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert F.softmax(x, 1, dtype=ember.float32).dtype is ember.float32


def test_gumbel_softmax():
    ember.manual_seed(0)
    logits = ember.tensor([[0.0, 3.0, 0.0]], requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(np.asarray(soft.detach()).sum(-1), 1.0, rtol=1e-6)
    hard = F.gumbel_softmax(logits, hard=True)
    a = np.asarray(hard.detach())
    assert sorted(a.ravel().tolist()) == [0.0, 0.0, 1.0]
    hard[0, 1].backward()
    assert logits.grad is not None and np.abs(np.asarray(logits.grad)).sum() > 0
    counts = np.zeros(3)
    for _ in range(300):
        counts += np.asarray(F.gumbel_softmax(logits.detach(), hard=True))[0]
    assert counts[1] > 200                      # p(argmax = 1) = e^3 / (e^3 + 2) ~ 0.91
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        F.gumbel_softmax(logits, eps=1e-5)


def test_errors():
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(_x(2), 1.0, -1.0)
    with pytest.raises(AssertionError, match=r"max_val \(0\) must be greater than min_val"):
        nn.Hardtanh(1, 0)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 1D"):
        nn.Softmax2d()(_x(3))
    with pytest.raises(RuntimeError, match="glu does not support scalars"):
        F.glu(ember.tensor(1.0))
    with pytest.raises(NotImplementedError, match="\"GeluKernelImpl\" not implemented for "
                                                  "'Long'"):
        nn.GELU()(ember.tensor([1, 2]))


def test_reprs():
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.LeakyReLU(0.2, True)) == "LeakyReLU(negative_slope=0.2, inplace=True)"
    assert repr(nn.RReLU()) == "RReLU(lower=0.125, upper=0.3333333333333333)"
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.Softshrink()) == "Softshrink(0.5)"
    assert repr(nn.Threshold(0.1, 20)) == "Threshold(threshold=0.1, value=20)"
    assert repr(nn.Hardtanh()) == "Hardtanh(min_val=-1.0, max_val=1.0)"
    assert repr(nn.Softmax()) == "Softmax(dim=None)"
    assert repr(nn.Softplus()) == "Softplus(beta=1.0, threshold=20.0)"
    assert repr(nn.Mish(inplace=True)) == "Mish(inplace=True)" and repr(nn.Mish()) == "Mish()"
    assert repr(nn.Hardswish(inplace=True)) == "Hardswish()"


def test_functional_aliases_point_at_the_ops():
    # as PyTorch's: F.sigmoid and F.tanh are functions of their own (no ``out=``)
    assert F.sigmoid is not ember.sigmoid and F.tanh is not ember.tanh
    assert F.prelu is ember.prelu and F.hardshrink is ember.hardshrink


def test_hardtanh_takes_the_deprecated_value_keywords_with_a_warning():
    with pytest.warns(FutureWarning, match="`min_value` is deprecated and renamed to `min_val`"
                      ) as record:
        m = nn.Hardtanh(min_value=-2.0, max_value=3.0)
    assert [w.filename for w in record] == [__file__, __file__]
    assert (m.min_val, m.max_val) == (-2.0, 3.0)
    assert m(ember.tensor([-5.0, 5.0])).tolist() == [-2.0, 3.0]
