"""Jacobians and Hessians through the normalization ops (their backward has array fast
paths, which vmap and higher-order derivatives must not take): values from PyTorch, written
out."""

import ember
from ember.testing import assert_close

F = ember.nn.functional
func = ember.func

X = ember.tensor([0.3, -1.2, 0.7, 2.0], dtype=ember.float64)
W = ember.tensor([1.5, -0.5, 0.8, 1.1], dtype=ember.float64)
C = ember.tensor([0.2, 1.0, -0.7, 0.4], dtype=ember.float64)
X2 = ember.tensor([[0.3, -1.2, 0.7, 2.0], [1.0, 0.5, -0.5, 0.1]], dtype=ember.float64)

LAYER_NORM_HESSIAN = [[-0.101977, 0.065178, 0.010700, 0.026099],
                      [0.065178, -0.044932, -0.011155, -0.009091],
                      [0.010700, -0.011155, 0.053937, -0.053482],
                      [0.026099, -0.009091, -0.053482, 0.036475]]


def layer_norm_loss(x):
    return (F.layer_norm(x, (4,), W, None) * C).pow(2).sum()


def test_layer_norm_hessian_forward_over_reverse():
    expected = ember.tensor(LAYER_NORM_HESSIAN, dtype=ember.float64)
    assert_close(func.hessian(layer_norm_loss)(X), expected, atol=1e-6, rtol=1e-5)
    assert_close(func.jacfwd(func.jacfwd(layer_norm_loss))(X), expected, atol=1e-6, rtol=1e-5)


def test_layer_norm_jacrev_under_vmap():
    jac = func.jacrev(lambda w: F.layer_norm(X2, (4,), w, None).sum(0))(W)
    expected = ember.diag(ember.tensor([1.188092, -1.036243, -1.191472, 1.039624],
                                       dtype=ember.float64))
    assert_close(jac, expected, atol=1e-6, rtol=1e-5)
    assert_close(func.jacrev(func.jacrev(layer_norm_loss))(X),
                 ember.tensor(LAYER_NORM_HESSIAN, dtype=ember.float64), atol=1e-6, rtol=1e-5)


def test_batch_norm_hessian():
    def loss(x):
        return (F.batch_norm(x, None, None, training=True) * C).pow(2).sum()
    h = func.hessian(loss)(X2).reshape(8, 8)
    assert_close(h[0, [0, 4]], ember.tensor([-7.994492e-05, 7.994492e-05],
                                            dtype=ember.float64), atol=1e-9, rtol=1e-5)
    assert_close(h[1, [1, 5]], ember.tensor([-5.746792e-05, 5.746792e-05],
                                            dtype=ember.float64), atol=1e-9, rtol=1e-5)
    assert float(h[0, 1].abs()) < 1e-12


# per-sample gradients batch the parameters: these ops have batching rules (no loop, no
# "performance drop" warning), values from PyTorch

XS = ember.linspace(-1, 1, 12, dtype=ember.float64).reshape(3, 4).sin()
B = ember.tensor([0.1, 0.2, -0.3, 0.4], dtype=ember.float64)


def test_per_sample_layer_norm_parameter_gradients(recwarn):
    def loss(w, b, x):
        return (F.layer_norm(x, (4,), w, b) * C).pow(2).sum()
    gw, gb = func.vmap(func.grad(loss, argnums=(0, 1)), in_dims=(None, None, 0))(W, B, XS)
    assert_close(gw[0], ember.tensor([0.181565, -0.482544, 0.000862, 0.878952],
                                     dtype=ember.float64), atol=1e-6, rtol=1e-5)
    assert_close(gb[2], ember.tensor([-0.161057, 0.777908, 0.115932, 0.572872],
                                     dtype=ember.float64), atol=1e-6, rtol=1e-5)
    assert not [w for w in recwarn if "performance drop" in str(w.message)]


def test_per_sample_group_norm_weight_gradient(recwarn):
    xg = ember.linspace(-1, 1, 24, dtype=ember.float64).reshape(3, 4, 2).cos()

    def loss(w, x):
        return (F.group_norm(x.unsqueeze(0), 2, w) * C.reshape(4, 1)).pow(2).sum()
    g = func.vmap(func.grad(loss), in_dims=(None, 0))(W, xg)
    assert_close(g[1], ember.tensor([0.275927, -1.569621, 1.230583, 0.809385],
                                    dtype=ember.float64), atol=1e-6, rtol=1e-5)
    assert not [w for w in recwarn if "performance drop" in str(w.message)]


def test_per_sample_embedding_gradient_with_padding(recwarn):
    weight = ember.linspace(-1, 1, 15, dtype=ember.float64).reshape(5, 3)
    idx = ember.tensor([[1, 2, 2], [0, 4, 1]])

    def loss(w, i):
        return (F.embedding(i, w, padding_idx=2) ** 2).sum()
    g = func.vmap(func.grad(loss), in_dims=(None, 0))(weight, idx)
    assert_close(g.sum(-1), ember.tensor([[0.0, -2.571429, 0.0, 0.0, 0.0],
                                          [-5.142857, -2.571429, 0.0, 0.0, 5.142857]],
                                         dtype=ember.float64), atol=1e-6, rtol=1e-5)
    assert not [w for w in recwarn if "performance drop" in str(w.message)]
