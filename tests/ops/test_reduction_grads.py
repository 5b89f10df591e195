"""Reduction gradients that finite differences cannot check (ties, zeros, NaN, subgradients;
expected values are PyTorch's), complex gradients, and the second derivatives of ops with an
index output."""

import math

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from ember.testing import assert_close
from tests.ops.opdb.core import make

nan, inf = math.nan, math.inf


def _grad(fn, values):
    x = ember.tensor(values, dtype=ember.float64, requires_grad=True)
    out = fn(x)
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    return x.grad


@pytest.mark.parametrize("fn,values,expected", [
    # the whole-tensor extremes share the gradient evenly among ties; NaN counts as a tie
    (lambda x: x.max(), [1., 3., 3.], [0., .5, .5]),
    (lambda x: x.min(), [2., 1., 1., 1.], [0., 1 / 3, 1 / 3, 1 / 3]),
    (lambda x: x.max(), [1., nan, 3.], [0., 1., 0.]),
    (lambda x: x.max(), [1., nan, nan], [0., .5, .5]),
    # amax/amin share per slice; with a NaN result every element gets NaN, as in PyTorch
    (lambda x: x.amax(0), [[1., 3.], [3., 3.]], [[0., .5], [1., .5]]),
    (lambda x: x.amin(1, keepdim=True), [[1., 1., 2.], [0., 5., 0.]],
     [[.5, .5, 0.], [.5, 0., .5]]),
    (lambda x: x.amax(), [1., nan, nan], [nan, nan, nan]),
    # along a dim the gradient goes to the returned index only
    (lambda x: x.max(0), [[1., 3.], [3., 3.]], [[0., 1.], [1., 0.]]),
    (lambda x: x.min(1), [[2., 2., 5.], [4., 1., 1.]], [[1., 0., 0.], [0., 1., 0.]]),
    (lambda x: x.median(), [1., 2., 2., 3.], [0., .5, .5, 0.]),
    (lambda x: x.median(), [1., nan, 2., 3.], [0., 1., 0., 0.]),
    (lambda x: x.nanmedian(), [1., nan, 2., 2.], [0., 0., .5, .5]),
    (lambda x: x.nanmedian(), [nan, nan], [.5, .5]),
    (lambda x: x.median(0), [2., 1., 2., 2., 3.], [0., 0., 1., 0., 0.]),
    (lambda x: x.cummax(0), [1., 3., 2., 3.], [1., 2., 0., 1.]),
    (lambda x: x.cummin(0), [1., nan, 2., nan], [1., 2., 0., 1.]),
    # norms: ties share, and 0 is a subgradient at 0
    (lambda x: x.norm(inf), [1., -3., 3.], [0., -.5, .5]),
    (lambda x: x.norm(-inf), [1., -1., 3.], [.5, -.5, 0.]),
    (lambda x: x.norm(inf, 1), [[nan, 1., -2.], [1., -3., 3.]], [[0., 0., 0.], [0., -.5, .5]]),
    (lambda x: x.norm(), [0., 0.], [0., 0.]),
    (lambda x: x.norm(1), [0., 2.], [0., 1.]),
    (lambda x: x.norm(3), [0., 0.], [0., 0.]),
    (lambda x: x.norm(0.5), [0., 1.], [0., 1.]),
    (lambda x: x.norm(-1), [0., 1.], [0., 0.]),
    (lambda x: x.norm(-1), [2., 1.], [1 / 9, 4 / 9]),
    # products with zeros
    (lambda x: x.prod(), [2., 0., 3.], [0., 6., 0.]),
    (lambda x: x.prod(), [2., 0., 0.], [0., 0., 0.]),
    (lambda x: x.prod(1), [[2., 0., 3.], [1., 2., 3.]], [[0., 6., 0.], [6., 3., 2.]]),
    (lambda x: x.cumprod(0), [2., 0., 3., 0., 5.], [1., 8., 0., 0., 0.]),
    (lambda x: x.cumprod(0), [0., 2., 3.], [9., 0., 0.]),
    (lambda x: x.prod(0), [[nan, 0.], [2., 1.]], [[2., 1.], [nan, 0.]]),
    # NaN-skipping reductions and degenerate statistics
    (lambda x: x.nanmean(), [1., nan, 3.], [.5, 0., .5]),
    (lambda x: x.nansum(), [1., nan, 3.], [1., 0., 1.]),
    (lambda x: x.std(), [2., 2.], [0., 0.]),
    (lambda x: x.logsumexp(0), [-inf, -inf], [nan, nan]),
    (lambda x: x.logsumexp(0), [inf, 1.], [nan, 0.]),
])
def test_gradient_matches_pytorch(fn, values, expected):
    with np.errstate(all="ignore"):
        got = _grad(fn, values)
    assert_close(got, ember.tensor(expected, dtype=ember.float64), equal_nan=True)


def test_std_with_no_degrees_of_freedom_has_nan_gradient():
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        got = _grad(lambda x: x.std(), [2.])
    assert math.isnan(got.item())


# --- complex inputs (the generic gradcheck runs in float64 only) ----------------------------------

@pytest.mark.parametrize("fn", [
    lambda x: x.sum(1), lambda x: x.mean((0, 1)), lambda x: x.prod(1), lambda x: x.prod(),
    lambda x: x.var(1), lambda x: x.std(), lambda x: x.norm(), lambda x: x.norm(1, 1),
    lambda x: x.norm(3, 0), lambda x: x.norm(inf), lambda x: x.logsumexp(1),
    lambda x: x.cumsum(1), lambda x: x.cumprod(0), lambda x: x.cumprod(1),
], ids=["sum", "mean", "prod_dim", "prod", "var", "std", "norm", "norm1", "norm3", "norm_inf",
        "logsumexp", "cumsum", "cumprod0", "cumprod1"])
def test_complex_gradcheck(fn):
    ember.manual_seed(0)
    x = make((2, 3), ember.complex128, requires_grad=True, low=-2, high=2)
    assert gradcheck(fn, (x,))


def test_complex_prod_with_zero():
    x = ember.tensor([[1 + 1j, 0j, 2 - 1j], [1j, 2 + 0j, 0j]], dtype=ember.complex128,
                     requires_grad=True)
    assert gradcheck(lambda t: t.prod(1), (x,))
    assert gradcheck(lambda t: t.cumprod(1), (x,))


# --- ops with two outputs -------------------------------------------------------------------------

def _samples_of(name, dtype=ember.float64):
    from tests.ops.opdb import OPDB
    info = next(i for i in OPDB if i.name == name)
    ember.manual_seed(0)
    return info.function(), list(info.sample_inputs(dtype, True))


@pytest.mark.parametrize("name", ["_max_dim", "_min_dim", "_median_dim", "_nanmedian_dim",
                                  "cummax", "cummin"])
def test_values_gradgradcheck(name):
    fn, samples = _samples_of(name)
    checked = 0
    for s in samples:
        if s.input.numel() == 0 or s.input.numel() > 12:
            continue
        def values(x, s=s):
            return fn(x, *s.args, **s.kwargs).values
        assert gradgradcheck(values, (s.input,)), s
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_moments_with_mean_gradients(name):
    fn, samples = _samples_of(name)
    for s in samples:
        def both(x, s=s):
            # one node per output: the engine cannot yet take two outputs of one node as roots
            first, second = fn(x, *s.args, **s.kwargs)
            return first * 1, second * 1
        assert gradcheck(both, (s.input,)), s
        if s.input.numel() <= 12:
            assert gradgradcheck(both, (s.input,)), s


@pytest.mark.parametrize("call", [lambda x: x.norm(), lambda x: x.norm("fro", (0, 1)),
                                  lambda x: x.norm(2, 1, keepdim=True), lambda x: x.norm(1, 0),
                                  lambda x: x.norm(inf, 1)])
def test_norm_gradgradcheck(call):
    ember.manual_seed(0)
    x = make((2, 3), ember.float64, requires_grad=True, exclude_zero=True)
    assert gradgradcheck(call, (x,))


def test_full_max_of_a_0d_tensor_differentiates_twice():
    """max()'s gradient fills zeros with grad / count at the ties (masked_fill with a tensor
    value): a 0-d mask must not break that node's own backward."""
    x = ember.tensor(2.0, requires_grad=True)
    v = ember.tensor(3.0, requires_grad=True)
    (g,) = ember.autograd.grad(x.max(), x, v, create_graph=True)
    assert type(g.grad_fn).__name__ == "MaskedFillBackward1"
    (gv,) = ember.autograd.grad(g * 5, v)
    assert gv.item() == 5.0
