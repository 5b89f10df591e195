"""More round-32 leftovers, checked without PyTorch: binary_cross_entropy_with_logits' mean
gradient node, a circular pad's double backward, ``where``'s ``out=None`` and sparse ``add``
with ``out=``."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def test_bce_with_logits_mean_gradient_is_a_scalar_division():
    x = ember.linspace(-2, 2, 12, dtype=ember.float64).reshape(3, 4).requires_grad_()
    t = ember.linspace(0, 1, 12, dtype=ember.float64).reshape(3, 4)
    w = ember.linspace(0.1, 0.9, 4, dtype=ember.float64)
    y = F.binary_cross_entropy_with_logits(x, t, weight=w)
    g, = ember.autograd.grad(y, x, create_graph=True)
    assert g.grad_fn.name() == "DivBackward1" and len(g.grad_fn.next_functions) == 1
    xs, ts, ws = x.detach().numpy(), t.numpy(), w.numpy()
    expected = (1 / (1 + np.exp(-xs)) - ts) * ws / 12
    np.testing.assert_allclose(g.detach().numpy(), expected, rtol=1e-12)
    gg, = ember.autograd.grad(g.sum(), x)       # sigmoid' * w / n
    s = 1 / (1 + np.exp(-xs))
    np.testing.assert_allclose(gg.numpy(), s * (1 - s) * ws / 12, rtol=1e-12)


def test_bce_with_logits_pos_weight_gradients():
    x = ember.linspace(-3, 3, 8, dtype=ember.float64).requires_grad_()
    t = ember.linspace(0, 1, 8, dtype=ember.float64).requires_grad_()
    pw = ember.linspace(0.5, 2, 8, dtype=ember.float64)
    y = F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="sum")
    gx, gt = ember.autograd.grad(y, (x, t), create_graph=True)
    xs, ts, ps = x.detach().numpy(), t.detach().numpy(), pw.numpy()
    s = 1 / (1 + np.exp(-xs))
    np.testing.assert_allclose(gx.detach().numpy(), (ps * ts + 1 - ts) * s - ps * ts, rtol=1e-12)
    np.testing.assert_allclose(gt.detach().numpy(), -xs - (ps - 1) * np.log(s), rtol=1e-12)
    assert gt.grad_fn.next_functions[0][0].name() == "SubBackward0"
    ggx, = ember.autograd.grad(gt.sum(), x)     # -1 - (pw - 1) (1 - sigmoid)
    np.testing.assert_allclose(ggx.numpy(), -1 - (ps - 1) * (1 - s), rtol=1e-12)


def _circular_adjoint(v, shape, pad):
    """A circular pad's input gradient for the output gradient ``v``, by index bookkeeping."""
    k = len(pad) // 2
    index = np.arange(int(np.prod(shape))).reshape(shape)
    padded = np.pad(index, [(0, 0)] * (len(shape) - k)
                    + [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(k))], mode="wrap")
    out = np.zeros(int(np.prod(shape)))
    np.add.at(out, padded.ravel(), v.ravel())
    return out.reshape(shape)


@pytest.mark.parametrize("shape,pad", [((2, 3), (1, 1)), ((1, 1, 3, 4), (1, 1, 2, 0)),
                                       ((1, 1, 2, 3, 3), (1, 0, 0, 1, 1, 1))])
def test_circular_pad_gradient_slices(shape, pad):
    x = ember.zeros(shape, dtype=ember.float64, requires_grad=True)
    y = F.pad(x, pad, mode="circular")
    v = ember.linspace(-1, 1, y.numel(), dtype=ember.float64).reshape(y.shape)
    v.requires_grad_()
    g, = ember.autograd.grad(y, x, v, create_graph=True)
    names, node = [], g.grad_fn
    while node is not None and node.name() == "SliceBackwardBackward0":
        names.append(node.name())
        node = node.next_functions[0][0]
    assert len(names) == len(pad) // 2
    np.testing.assert_allclose(g.detach().numpy(), _circular_adjoint(v.detach().numpy(), shape,
                                                                     pad))
    w = ember.arange(float(g.numel()), dtype=ember.float64).reshape(g.shape)
    gv, = ember.autograd.grad(g, v, w)        # the adjoint's adjoint: the pad
    expected = np.pad(w.numpy(), [(0, 0)] * (len(shape) - len(pad) // 2)
                      + [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(len(pad) // 2))],
                      mode="wrap")
    np.testing.assert_array_equal(gv.numpy(), expected)


def test_where_out_none_refuses_numbers():
    x = ember.arange(4.0)
    with pytest.raises(TypeError, match=r"argument 'other' \(position 3\) must be Tensor"):
        ember.where(x > 1, x, 0.5, out=None)
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        x.where(x > 1, 0.5, out=None)
    np.testing.assert_array_equal(ember.where(x > 1, x, -x, out=None).numpy(), [0, -1, 2, 3])


def test_sparse_add_out_values():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s1 = ember.sparse_coo_tensor(ember.tensor([[0, 1, 1], [2, 0, 2]]),
                                     ember.tensor([3., 4., 5.]), (2, 3))
        s2 = ember.sparse_coo_tensor(ember.tensor([[0, 1, 0], [2, 1, 2]]),
                                     ember.tensor([1., 2., 7.]), (2, 3))
        out = ember.sparse_coo_tensor(ember.tensor([[0], [0]]),
                                      ember.tensor([9.0], dtype=ember.float64), (2, 3))
        r = ember.add(s1, s2, alpha=2, out=out)
    assert r is out and r.layout is ember.sparse_coo and r.dtype is ember.float64
    np.testing.assert_array_equal(r.to_dense().numpy(), [[0, 0, 19], [4, 4, 5]])
    with pytest.raises(RuntimeError, match="Can't convert result type Float to output Long"):
        ember.add(s1, s2, out=ember.sparse_coo_tensor(ember.tensor([[0], [0]]),
                                                      ember.tensor([9]), (2, 3)))
