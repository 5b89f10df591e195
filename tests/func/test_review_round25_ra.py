"""Review of bc8ce9a (leaves made inside func transforms), without torch: ember's own code
flagging leaves inside a transformed function is not refused as the user's ``requires_grad_()``
is; the record of made leaves holds them, so a leaf gone from outside still keeps results in
the graph; ``Tensor._make_subclass`` flags its leaf without a handler call."""

import gc

import numpy as np
import pytest

import ember
from ember.func import grad, vjp, vmap

X = [0.5, -1.0, 2.0]


def _x():
    return ember.tensor(X)


def test_embedding_given_its_weight_inside_grad():
    def f(x):
        m = ember.nn.Embedding.from_pretrained(ember.full((4, 3), 2.0), freeze=False)
        return (m(ember.tensor([1])) * x * x).sum()      # 2 x^2: gradient 4x
    g = grad(f)(_x())
    assert not g.requires_grad
    np.testing.assert_allclose(g.numpy(), [2.0, -4.0, 8.0])


def test_sparse_and_jagged_leaves_made_inside_grad():
    def f(x):
        s = ember.sparse_coo_tensor(ember.tensor([[0, 2]]), ember.tensor([1.0, 2.0]), (3,),
                                    requires_grad=True)
        t = ember.sparse_coo_tensor(ember.tensor([[1]]), ember.tensor([3.0]), (3,))
        t.requires_grad = True
        ember.nested.nested_tensor([ember.ones(2), ember.ones(3)], layout=ember.jagged,
                                   requires_grad=True)
        return ((s.to_dense() + t.to_dense()) * x * x).sum()
    g = grad(f)(_x())
    assert not g.requires_grad
    np.testing.assert_allclose(g.numpy(), [1.0, -6.0, 8.0])    # 2 x [1, 3, 2]


def test_the_users_requires_grad__on_sparse_is_refused_inside_only():
    s = ember.sparse_coo_tensor(ember.tensor([[0]]), ember.tensor([1.0]), (3,))
    with pytest.raises(RuntimeError, match=r"Tensor.requires_grad_\(\) \(or perhaps"):
        vmap(lambda x: x * s.requires_grad_().to_dense())(ember.ones(2, 3))
    assert s.requires_grad_().requires_grad


def test_a_leaf_gone_from_outside_keeps_results_in_the_graph():
    def hyper():
        w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
        return w * 2
    h = hyper()
    gc.collect()
    g = grad(lambda x: (x * x * h).sum())(_x())                 # 2 x h
    assert g.requires_grad
    (dh,) = ember.autograd.grad(g.sum(), h)
    np.testing.assert_allclose(dh.numpy(), [1.0, -2.0, 4.0])


def test_a_made_leaf_dropped_before_the_vjp_is_pulled_stays_the_transforms_own():
    h = ember.tensor([1.0, 2.0, 3.0], requires_grad=True) * 1.0

    def f(x):
        w = ember.full((3,), 2.0, requires_grad=True)
        return x * x * w * h                                    # (w dies with f's frame)
    out, pull = vjp(f, _x())
    gc.collect()
    (gx,) = pull(ember.ones(3))                                 # 4 x h
    assert out.requires_grad and gx.requires_grad               # (through h)
    np.testing.assert_allclose(gx.detach().numpy(), [2.0, -8.0, 24.0])
    (dh,) = ember.autograd.grad(gx.sum(), h)
    np.testing.assert_allclose(dh.numpy(), [2.0, -4.0, 8.0])


def test_make_subclass_offers_its_handler_nothing():
    calls = []

    class Logged(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})
    base = ember.Tensor._make_subclass(Logged, ember.ones(2), False)
    calls.clear()
    made = ember.Tensor._make_subclass(Logged, base, True)
    assert calls == []
    assert made._requires_grad and made.is_leaf
    with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex dtype"):
        ember.Tensor._make_subclass(ember.nn.Parameter, ember.ones(2, dtype=ember.int64), True)
    with ember.inference_mode():
        frozen = ember.ones(2)
    with pytest.raises(RuntimeError, match="on inference tensor outside InferenceMode"):
        ember.nn.Parameter(frozen)
