"""Round 26: outputs PyTorch marks non-differentiable (``differentiable_outputs`` of an op):
layer and batch norm's statistics, lstsq's singular values and SDPA's attention weights have no
grad_fn, node hooks see only the differentiable outputs' gradients, and the derivative gets
None for the others (no zeros filled) while double backward still differentiates through them."""

import numpy as np
import pytest

import ember
from ember.ops._registry import REGISTRY

F = ember.nn.functional


def _x(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def _outputs(name):
    x, w = _x(4, 3, 5), _x(5, seed=1)
    if name == "native_layer_norm":
        return ember.native_layer_norm(x, (5,), w, None, 1e-5)
    if name == "native_batch_norm":
        return ember.native_batch_norm(x, w[:3], None, None, None, True, 0.1, 1e-5)
    return ember.linalg.lstsq(x[0], x[1, :, :2], driver="gelsd")


@pytest.mark.parametrize("name, kept", [("native_layer_norm", (0,)),
                                        ("native_batch_norm", (0,)),
                                        ("linalg.lstsq", (0, 1))])
def test_only_the_differentiable_outputs_have_a_node(name, kept):
    assert REGISTRY[name].differentiable_outputs == kept
    outs = _outputs(name)
    node = outs[0].grad_fn
    assert node is not None
    for nr, t in enumerate(outs):
        if nr in kept:
            assert t.requires_grad and t.grad_fn is node and t.output_nr == nr
        else:
            assert not t.requires_grad and t.grad_fn is None


@pytest.mark.parametrize("name, seen_len", [("native_layer_norm", 1),
                                            ("native_batch_norm", 1),
                                            ("linalg.lstsq", 2)])
def test_node_hooks_see_only_the_differentiable_gradients(name, seen_len):
    outs = _outputs(name)
    seen = []
    outs[0].grad_fn.register_prehook(lambda go: seen.append(("pre", len(go))))
    outs[0].grad_fn.register_hook(lambda gi, go: seen.append(("post", len(go))))
    outs[0].sum().backward()
    assert seen == [("pre", seen_len), ("post", seen_len)]


def test_sdpa_hooks_see_one_gradient():
    q = _x(2, 2, 4, 8)
    y = F.scaled_dot_product_attention(q, q * 2, q * 3)
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append(len(go)))
    y.sum().backward()
    assert seen == [1]


def test_derivative_gets_none_for_the_statistics(monkeypatch):
    op = REGISTRY["native_layer_norm"]
    got = []
    vjp = op.vjp

    def spy(grads, *args, **kwargs):
        got.append(tuple(grads))
        return vjp(grads, *args, **kwargs)
    monkeypatch.setattr(op, "vjp", spy)
    x = _x(3, 5)
    F.layer_norm(x, (5,)).sum().backward()
    assert got[0][0] is not None and got[0][1] is None and got[0][2] is None


def _layer_norm_reference(x, w):
    mean = x.mean(-1, keepdims=True)
    xc = x - mean
    invstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)
    return xc * invstd * w


def test_layer_norm_gradients_and_double_backward_match_a_numeric_reference():
    x, w = _x(3, 5), _x(5, seed=1)
    y = F.layer_norm(x, (5,), w)
    np.testing.assert_allclose(y.detach().numpy(),
                               _layer_norm_reference(x.detach().numpy(), w.detach().numpy()),
                               rtol=1e-10, atol=1e-12)
    # the second derivative runs through the statistics (reads them with the node)
    assert ember.autograd.gradcheck(lambda a, b: F.layer_norm(a, (5,), b), (x, w))
    assert ember.autograd.gradgradcheck(lambda a, b: F.layer_norm(a, (5,), b), (x, w))


def test_batch_norm_and_lstsq_double_backward():
    x, w = _x(4, 3, 2), _x(3, seed=1)
    assert ember.autograd.gradgradcheck(
        lambda a, b: F.batch_norm(a, None, None, b, None, training=True), (x, w))
    a, b = _x(5, 3), _x(5, 2, seed=2)
    assert ember.autograd.gradcheck(lambda a, b: ember.linalg.lstsq(a, b).solution, (a, b))


def test_statistics_cannot_be_differentiated():
    outs = _outputs("native_layer_norm")
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        ember.autograd.grad(outs[1].sum(), outs[0])
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has "
                                           "requires_grad=False"):
        outs[2].retain_grad()
