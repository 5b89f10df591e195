"""autograd.Function under vmap: a user's vmap staticmethod, and the generated rule."""

import numpy as np
import pytest

import ember
from ember.func import grad, jacrev, vmap


class NumpyMul(ember.autograd.Function):
    """Not batchable by itself (NumPy inside forward): batched by its vmap staticmethod."""

    @staticmethod
    def forward(x, y):
        return ember.tensor(np.asarray(x.detach()) * np.asarray(y.detach()))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return NumpyMul.apply(g, y), NumpyMul.apply(g, x)

    @staticmethod
    def vmap(info, in_dims, x, y):
        NumpyMul.calls.append((info.batch_size, info.randomness, in_dims))
        xb, yb = in_dims
        x = x.movedim(xb, -1) if xb is not None else x.unsqueeze(-1)
        y = y.movedim(yb, -1) if yb is not None else y.unsqueeze(-1)
        return NumpyMul.apply(x, y).movedim(-1, 0), 0


class Affine(ember.autograd.Function):
    """y = (x @ w) * scale, with its argmax as a non-differentiable second output."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, w, scale):
        y = (x @ w) * scale
        return y, y.argmax(-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, scale = inputs
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, gy, gidx):
        x, w = ctx.saved_tensors
        return gy @ w.T * ctx.scale, ember.outer(x, gy) * ctx.scale, None


def test_vmap_staticmethod_is_used():
    NumpyMul.calls = []
    x = ember.arange(6.0).reshape(2, 3)
    out = vmap(NumpyMul.apply, in_dims=(0, None), randomness="same")(x, ember.tensor([1., 2., 3.]))
    assert out.tolist() == [[0.0, 2.0, 6.0], [3.0, 8.0, 15.0]]
    assert NumpyMul.calls == [(2, "same", (0, None))]
    g = vmap(grad(lambda a, b: NumpyMul.apply(a, b).sum()))(x, x + 1)
    assert g.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_vmap_staticmethod_errors():
    class Both(NumpyMul):
        generate_vmap_rule = True

    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="has both generate_vmap_rule=True and an overridden "
                                           "vmap staticmethod"):
        vmap(Both.apply)(x, x)

    class BadOut(NumpyMul):
        @staticmethod
        def vmap(info, in_dims, x, y):
            return (x, x), (0,)

    with pytest.raises(RuntimeError, match="returned an incompatible \\(output, out_dims\\)"):
        vmap(BadOut.apply)(x, x)


def test_generated_rule_gives_per_sample_gradients():
    xs = ember.tensor([[1.0, 2.0], [3.0, -1.0]])
    w = ember.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]])

    def loss(x, w_):
        return (Affine.apply(x, w_, 2.0)[0] ** 2).sum()
    gx, gw = vmap(grad(loss, argnums=(0, 1)), in_dims=(0, None))(xs, w)
    for b in range(2):                  # d/dx sum((2xw)^2) = 8 (x w) w^T; d/dw = 8 x (x w)
        y = xs[b] @ w
        assert ember.allclose(gx[b], 8 * y @ w.T)
        assert ember.allclose(gw[b], 8 * ember.outer(xs[b], y))
    total = grad(lambda w_: vmap(lambda x: loss(x, w_))(xs).sum())(w)
    assert ember.allclose(total, gw.sum(0))


def test_generated_rule_records_a_graph_for_backward_after_vmap():
    xs = ember.tensor([[1.0, 2.0], [3.0, -1.0]], requires_grad=True)
    w = ember.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]], requires_grad=True)
    y, idx = vmap(Affine.apply, in_dims=(0, None, None))(xs, w, 1.0)
    assert y.grad_fn.name() == "VmappedAffineBackward" and not idx.requires_grad
    assert idx.tolist() == [1, 2]           # argmax of (1, 2, 0) and (3, -1, 7)
    y.sum().backward()
    assert xs.grad.tolist() == [[3.0, 0.0], [3.0, 0.0]]
    assert w.grad.tolist() == [[4.0, 4.0, 4.0], [1.0, 1.0, 1.0]]
    jac = vmap(jacrev(lambda x: Affine.apply(x, w.detach(), 1.0)[0]))(xs.detach())
    assert jac.shape == (2, 3, 2) and ember.allclose(jac[1], w.detach().T)
