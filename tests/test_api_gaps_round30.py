"""Small API gaps of round 30, checked against NumPy without torch: one shared node for an
out-of-place foreach call, forward-mode AD through embedding lookups, rms_norm's graph."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def test_foreach_outputs_share_one_named_node_with_the_right_gradients():
    x = [ember.tensor([1.0, 2.0], requires_grad=True), ember.tensor([3.0, 4.0])]
    y = [ember.tensor([5.0, 6.0], requires_grad=True), ember.tensor([7.0, 8.0],
                                                                    requires_grad=True)]
    outs = ember._foreach_mul(x, y)
    assert outs[0].grad_fn is outs[1].grad_fn               # even output 1's input x[1]
    assert outs[0].grad_fn.name() == "ForeachMulBackward0List"
    assert len(outs[0].grad_fn.next_functions) == 4
    (outs[0].sum() + 2 * outs[1].sum()).backward()
    np.testing.assert_array_equal(x[0].grad.numpy(), [5.0, 6.0])
    np.testing.assert_array_equal(y[0].grad.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(y[1].grad.numpy(), [6.0, 8.0])
    assert x[1].grad is None
    z = [ember.tensor([0.5, 2.0], requires_grad=True)]
    (out,) = ember._foreach_addcmul(z, z, z, [0.5])        # one tensor three times: once
    out.sum().backward()
    np.testing.assert_allclose(z[0].grad.numpy(), 1 + np.array([0.5, 2.0]))
    with ember.no_grad():
        assert ember._foreach_exp(z)[0].grad_fn is None
    assert ember._foreach_exp(z)[0].grad_fn.name() == "ForeachExpBackward0"
    assert ember._foreach_pow(2.0, z)[0].grad_fn.name() == "ForeachPowBackward2"



def test_foreach_node_gives_partial_derivatives_under_grad_and_vmap():
    def f(a):       # the second operand's graph runs through the first: counted once
        return sum(o.sum() for o in ember._foreach_mul([a, a * a], [a.sin(), a]))
    a = np.array([1.0, 2.0])
    want = np.sin(a) + a * np.cos(a) + 3 * a ** 2              # d/da (a sin a + a^3)
    got = ember.func.grad(f)(ember.tensor(a))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    batched = ember.func.vmap(ember.func.grad(f))(ember.tensor(np.stack([a, a + 1])))
    np.testing.assert_allclose(batched.numpy()[0], want, rtol=1e-12)


@pytest.mark.parametrize("kwargs", [{}, dict(sparse=True), dict(padding_idx=2),
                                    dict(padding_idx=2, sparse=True)])
def test_embedding_tangent_is_the_lookup_of_the_weight_tangent(kwargs):
    w = ember.arange(15.0, dtype=ember.float64).reshape(5, 3)
    t = ember.cos(ember.arange(15.0, dtype=ember.float64)).reshape(5, 3)
    idx = ember.tensor([[0, 2], [4, 2]])
    _, tangent = ember.func.jvp(lambda w: F.embedding(idx, w, **kwargs), (w,), (t,))
    np.testing.assert_array_equal(tangent.numpy(), t.numpy()[idx.numpy()])


def test_fused_rms_norm_rstd_node_and_argument_errors():
    x = ember.tensor([[3.0, 4.0]], requires_grad=True)
    out, rstd = ember._fused_rms_norm(x, [2], None, 0.0)
    assert rstd.grad_fn.name() == "RsqrtBackward0" and out.grad_fn.name() == "MulBackward0"
    np.testing.assert_allclose(rstd.detach().numpy(), [[1 / np.sqrt(12.5)]], rtol=1e-6)
    (g,) = ember.autograd.grad(rstd.sum(), x)
    np.testing.assert_allclose(g.numpy(), -np.array([[3.0, 4.0]]) / 2 * 12.5 ** -1.5,
                               rtol=1e-5)
    with pytest.raises(TypeError, match=r"^_fused_rms_norm\(\): argument 'normalized_shape' "
                                        r"\(position 2\) must be tuple of ints, not int$"):
        ember._fused_rms_norm(x, 2, None, 1e-5)
    with pytest.raises(TypeError, match=r"^rms_norm\(\): argument 'eps' \(position 4\) must "
                                        r"be float, not str$"):
        F.rms_norm(x, [2], None, "a")


def test_embedding_max_norm_tangent_skips_the_renorm():
    idx = ember.tensor([0, 2, 2])
    w = ember.arange(12.0, dtype=ember.float64).reshape(4, 3) - 4
    t = ember.cos(ember.arange(12.0, dtype=ember.float64)).reshape(4, 3)
    out, tangent = ember.func.jvp(lambda w: F.embedding(idx, w, max_norm=5.0), (w.clone(),),
                                  (t,))
    np.testing.assert_array_equal(tangent.numpy(), t.numpy()[idx.numpy()])
    rows = (w.numpy() / np.maximum(1, np.linalg.norm(w.numpy(), axis=1, keepdims=True) / 5))
    np.testing.assert_allclose(out.numpy(), rows[idx.numpy()], rtol=1e-6)
    with ember.autograd.forward_ad.dual_level():
        dual = ember.autograd.forward_ad.make_dual(w.clone(), t)
        fw = ember.autograd.forward_ad.unpack_dual(F.embedding(idx, dual, max_norm=5.0))
    np.testing.assert_array_equal(fw.tangent.numpy(), t.numpy()[idx.numpy()])
    leaf = w.clone().requires_grad_()
    F.embedding(idx, leaf, max_norm=5.0).sum().backward()
    assert leaf._version == 1
    np.testing.assert_array_equal(leaf.grad.numpy(), [[1] * 3, [0] * 3, [2] * 3, [0] * 3])


@pytest.mark.parametrize("name", ["sub", "pow_", "clamp_min", "clamp_max_", "maximum",
                                  "minimum_"])
def test_foreach_lone_tensor_requiring_grad_is_refused(name):
    s = ember.tensor(0.8, requires_grad=True)
    with pytest.raises(TypeError, match=rf"^_foreach_{name}\(\) received an invalid "
                                        r"combination of arguments - got \(list, Tensor\)"):
        getattr(ember, f"_foreach_{name}")([ember.ones(2)], s)
    with pytest.raises(TypeError, match="invalid combination"):
        getattr(ember, f"_foreach_{name}")([ember.ones(2)], ember.tensor([0.8]))
    out = getattr(ember, f"_foreach_{name}")([ember.ones(2)], ember.tensor(0.5))
    assert out[0].shape == (2,)
    (got,) = ember._foreach_add([ember.ones(2)], s)      # add/mul/div have a tensor overload
    np.testing.assert_allclose(got.detach().numpy(), [1.8, 1.8])


def test_hardsigmoid_has_no_second_derivative_but_a_tangent():
    x = ember.tensor([-4.0, -1.0, 0.5, 2.0, 3.5], requires_grad=True)
    (g,) = ember.autograd.grad(F.hardsigmoid(x).sum(), x, create_graph=True)
    assert g.grad_fn.name() == "torch::autograd::NotImplemented"
    np.testing.assert_allclose(g.detach().numpy(), [0, 1 / 6, 1 / 6, 1 / 6, 0], rtol=1e-6)
    with pytest.raises(RuntimeError, match="derivative for aten::hardsigmoid_backward is not "
                                           "implemented"):
        ember.autograd.grad(g.sum(), x)
    _, tangent = ember.func.jvp(F.hardsigmoid, (x.detach(),), (ember.full((5,), 3.0),))
    np.testing.assert_allclose(tangent.numpy(), [0, 0.5, 0.5, 0.5, 0], rtol=1e-6)
