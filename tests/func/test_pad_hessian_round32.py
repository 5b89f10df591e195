"""Round 32: second derivatives through a reflect/replicate/circular pad. A vmapped pad backward
carries the batch dims in its input size, so its own derivative (the pad again) saw a tensor of
too many dims: jacrev(jacrev(f)), hessian(f) and jacfwd(jacrev(f)) raised "Padding size 2 is not
supported for 4D input tensor". The Hessian of sum(sin(pad(x))) is diagonal, -sin(x_i) times
the number of padded positions read from x_i; NumPy's reflect/edge/wrap pads count those."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.func import hessian, jacfwd, jacrev, vmap

NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
CASES = [((2, 3, 5), (2, 1)), ((3, 5), (1, 2)), ((1, 2, 4, 5), (2, 1, 1, 0)),
         ((2, 4, 5), (0, 1, 2, 1)), ((1, 1, 3, 3, 4), (1, 1, 0, 2, 1, 0)),
         ((1, 3, 3, 4), (1, 0, 1, 1, 2, 1))]


def _expected(x, pad, mode):
    """The dense Hessian of sum(sin(pad(x))): counts of each source element on the diagonal."""
    k = len(pad) // 2
    widths = [(0, 0)] * (x.ndim - k) + [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(k))]
    index = np.pad(np.arange(x.size).reshape(x.shape), widths, mode=NP_MODE[mode])
    counts = np.bincount(index.ravel(), minlength=x.size)
    return np.diag(-np.sin(x.ravel()) * counts).reshape(x.shape + x.shape)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", CASES)
def test_second_derivatives_through_pad(shape, pad, mode):
    x = np.random.default_rng(len(shape) + len(pad)).standard_normal(shape)
    t = ember.tensor(x)

    def f(v):
        return F.pad(v, pad, mode=mode).sin().sum()

    want = _expected(x, pad, mode)
    for transform in (lambda g: jacrev(jacrev(g)), hessian, lambda g: jacfwd(jacrev(g))):
        got = transform(f)(t)
        assert tuple(got.shape) == shape + shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_pad_backward_double_backward_keeps_its_rank():
    x = ember.tensor(np.arange(10.0).reshape(2, 5), requires_grad=True)
    (g,) = ember.autograd.grad(F.pad(x, (2, 1), mode="reflect").pow(2).sum(), x,
                               create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    counts = np.bincount(np.pad(np.arange(5), (2, 1), mode="reflect"), minlength=5)
    np.testing.assert_allclose(gg.numpy(), np.tile(2.0 * counts, (2, 1)))


def test_nested_vmap_of_pad():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    got = vmap(vmap(lambda v: F.pad(v, (2, 1), mode="reflect")))(ember.tensor(x))
    want = np.pad(x, [(0, 0)] * 3 + [(2, 1)], mode="reflect")
    np.testing.assert_allclose(got.numpy(), want)
