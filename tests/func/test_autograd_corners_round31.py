"""Round 31 corners, without PyTorch: linearize's two runs, nested vmap fallback warning
counts, embedding_renorm_ under both AD modes, out= of matrix_power and of the inverse FFTs of
a real signal, and the in-place foreach ops' nodes (the values PyTorch 2.13 gives)."""

import warnings

import numpy as np
import pytest

import ember
from ember.func import linearize, vmap


def test_linearize_runs_f_on_the_input_then_on_a_view_of_it():
    seen = []

    def f(x):
        seen.append((x.is_leaf, x.requires_grad, type(x.grad_fn).__name__))
        return x.sin() * 2
    x = ember.tensor([0.5, 1.0, 2.0], requires_grad=True)
    out, jvp_fn = linearize(f, x)
    assert seen == [(True, True, "NoneType"), (False, True, "ViewBackward0")]
    assert type(out.grad_fn).__name__ == "MulBackward0"
    (g,) = ember.autograd.grad(out.sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 * np.cos([0.5, 1.0, 2.0]), rtol=1e-6)
    t = jvp_fn(ember.ones(3))
    np.testing.assert_allclose(t.detach().numpy(), 2 * np.cos([0.5, 1.0, 2.0]), rtol=1e-6)
    assert t.requires_grad          # (its constants require grad, as PyTorch's)...
    assert ember.autograd.grad(t.sum(), x, allow_unused=True) == (None,)    # ...apart from x
    tangent = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (dt,) = ember.autograd.grad(jvp_fn(tangent).sum(), tangent)
    np.testing.assert_allclose(dt.numpy(), 2 * np.cos([0.5, 1.0, 2.0]), rtol=1e-6)
    with ember.no_grad():
        assert not jvp_fn(tangent).requires_grad


def test_linearize_of_a_plain_input_is_differentiable_in_the_tangent_only():
    calls = []
    _, jvp_fn = linearize(lambda a: (calls.append(1), a.exp())[1], ember.zeros(2))
    assert len(calls) == 2
    assert not jvp_fn(ember.ones(2)).requires_grad
    tangent = ember.ones(2, requires_grad=True)
    (dt,) = ember.autograd.grad(jvp_fn(tangent).sum(), tangent)
    np.testing.assert_allclose(dt.numpy(), [1.0, 1.0])


def _count(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return sum("performance drop" in str(w.message) for w in caught)


def test_nested_vmap_fallback_warns_once_per_call_of_each_loop():
    # PyTorch's loop at a level calls the op once per example of the levels inside it
    x = ember.rand(2, 3, 4, 5)
    q = ember.tensor([0.5])
    assert _count(lambda: vmap(vmap(lambda a: ember.quantile(a, q)))(x[0])) == 1 + 4
    assert _count(lambda: vmap(vmap(vmap(lambda a: ember.quantile(a, q))))(x)) == 1 + 4 + 4 * 3
    ms = vmap(vmap(vmap(lambda a, m, s: a.masked_scatter(m, s))))
    assert _count(lambda: ms(x, x > 0.5, x * 2)) == 1 + 4 + 4 * 3
    a, m, s = x[0].numpy(), x[1].numpy() > 0.5, x[0].numpy() * 2
    out = vmap(vmap(lambda a, m, s: a.masked_scatter(m, s)))(x[0], x[1] > 0.5, x[0] * 2)
    want = a.copy()
    for i in np.ndindex(*a.shape[:2]):      # each example's k-th masked slot takes s[k]
        want[i][m[i]] = s[i][:m[i].sum()]
    np.testing.assert_array_equal(out.numpy(), want)


def test_embedding_renorm_refuses_forward_ad_and_its_backward():
    fwad = ember.autograd.forward_ad
    with fwad.dual_level():
        w = fwad.make_dual(ember.ones(5, 3), ember.ones(5, 3))
        with pytest.raises(NotImplementedError, match=r"^Trying to use forward AD with "
                           r"embedding_renorm_ that does not support it because it has not "
                           r"been implemented yet\.\nPlease file .* prioritize its "
                           r"implementation\.$"):
            ember.embedding_renorm_(w, ember.tensor([0]), 1.0, 2.0)
    w = ember.ones(5, 3, requires_grad=True) * 2
    ember.embedding_renorm_(w, ember.tensor([0, 1]), 1.0, 2.0)
    assert type(w.grad_fn).__name__ == "EmbeddingRenormBackward0"
    np.testing.assert_allclose(np.linalg.norm(w.detach().numpy(), axis=1),
                               [1.0, 1.0, 2 * 3 ** 0.5, 2 * 3 ** 0.5, 2 * 3 ** 0.5], rtol=1e-6)
    with pytest.raises(NotImplementedError, match=r"^the derivative for 'embedding_renorm' is "
                                                  r"not implemented\.$"):
        w.sum().backward()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        ember.embedding_renorm_(ember.ones(5, 3, requires_grad=True), ember.tensor([0]), 1., 2.)


@pytest.mark.parametrize("n, refusal", [(-3, "matmul"), (-1, "linalg_inv_ex"), (0, None),
                                        (1, None), (2, "matmul")])
def test_matrix_power_out_with_input_requiring_grad(n, refusal):
    x = ember.tensor([[2.0, 1.0], [0.5, 3.0]], dtype=ember.float64, requires_grad=True)
    buf = ember.empty(2, 2, dtype=ember.float64)
    if refusal is not None:
        with pytest.raises(RuntimeError, match=rf"^{refusal}\(\): functions with out="):
            ember.linalg.matrix_power(x, n, out=buf)
        return
    ember.linalg.matrix_power(x, n, out=buf)
    want = np.linalg.matrix_power(x.detach().numpy(), n)
    np.testing.assert_allclose(buf.detach().numpy(), want)
    assert buf.requires_grad == (n == 1)
    if n == 1:
        assert type(buf.grad_fn).__name__ == "CopyBackwards"
        buf.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 2)))


def test_ifft_of_a_real_signal_into_out_records_not_implemented():
    x = ember.tensor([1.0, -2.0, 0.5, 4.0], requires_grad=True)
    buf = ember.empty(4, dtype=ember.complex64)
    ember.fft.ifft(x, out=buf)
    np.testing.assert_allclose(buf.detach().numpy(), np.fft.ifft(x.detach().numpy()),
                               rtol=1e-6, atol=1e-7)
    assert type(buf.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match=r"^derivative for aten::conj_physical is not"):
        buf.abs().sum().backward()
    with pytest.raises(RuntimeError, match=r"^_fft_c2c\(\): functions with out="):
        ember.fft.ifft2(x.reshape(2, 2), out=ember.empty(2, 2, dtype=ember.complex64))


def test_inplace_foreach_nodes_as_pytorch_names_them():
    leaf = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    cases = [("add", 1.0, "AddBackward1"), ("add", [ember.ones(3)], "AddBackward0"),
             ("mul", [2.0], "MulBackward1"), ("pow", ember.tensor(2.0), "PowBackward0"),
             ("maximum", [ember.tensor([1.0, 5.0, 0.0])], "MaximumBackward0"),
             ("maximum", 0.5, "NotImplemented")]
    for name, other, node in cases:
        xs = [leaf * 1]
        getattr(ember, f"_foreach_{name}_")(xs, other)
        assert type(xs[0].grad_fn).__name__ == node, (name, other)
    with pytest.raises(RuntimeError, match=r"^derivative for _foreach_maximum_ is not"):
        xs[0].sum().backward()
    leaf.grad = None
    xs = [leaf * 1]
    ember._foreach_maximum_(xs, [ember.tensor([1.0, 5.0, 0.0])])
    xs[0].sum().backward()                  # (a tie shares the gradient)
    np.testing.assert_array_equal(leaf.grad.numpy(), [0.5, 0.0, 1.0])


@pytest.mark.parametrize("other", [1.0, [1.0], ember.tensor(1.0)])
def test_foreach_maximum_with_numbers_differentiates_as_maximum(other):
    # (PyTorch 2.13: clamp's values, maximum's gradient: a tie shares it, a NaN passes it)
    x = ember.tensor([0.0, 1.0, 2.0, float("nan")], requires_grad=True)
    (y,) = ember._foreach_maximum([x], other)
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 1.0, 2.0, np.nan])
    y.backward(ember.tensor([1.0, 2.0, 4.0, 8.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 4.0, 8.0])


def test_linearize_folds_its_constants_in_the_first_calls_grad_mode():
    x = ember.tensor([0.5, 1.0], requires_grad=True)
    with ember.no_grad():           # (the grad mode of linearize's own call does not count)
        _, jvp_fn = linearize(ember.sin, x)
    assert jvp_fn(ember.ones(2)).requires_grad
    _, jvp_fn = linearize(ember.sin, x)
    with ember.no_grad():
        jvp_fn(ember.ones(2))
    later = jvp_fn(ember.ones(2))   # (PyTorch 2.13: folded without grad at the first call)
    assert not later.requires_grad
    np.testing.assert_allclose(later.numpy(), np.cos([0.5, 1.0]), rtol=1e-6)
    assert jvp_fn(ember.ones(2, requires_grad=True)).requires_grad


def test_foreach_addcmul_with_a_tensor_of_values_has_no_derivative():
    xs = [ember.ones(3, requires_grad=True) * 1]
    out = ember._foreach_addcmul(xs, [ember.ones(3)], [ember.full((3,), 2.0)],
                                 ember.tensor([3.0]))
    np.testing.assert_array_equal(out[0].detach().numpy(), [7.0, 7.0, 7.0])
    with pytest.raises(RuntimeError, match=r"^derivative for aten::_foreach_addcmul is not"):
        out[0].sum().backward()
    ember._foreach_addcdiv_(xs, [ember.ones(3)], [ember.full((3,), 2.0)], ember.tensor([3.0]))
    np.testing.assert_array_equal(xs[0].detach().numpy(), [2.5, 2.5, 2.5])
    with pytest.raises(RuntimeError, match=r"^derivative for _foreach_addcdiv_ is not"):
        xs[0].sum().backward()


def test_foreach_version_errors_name_the_tensor_as_pytorch():
    xs = [ember.ones(3, requires_grad=True) * 1, ember.ones(3, requires_grad=True) * 1]
    out = ember._foreach_exp(xs)
    out[1].mul_(2)
    with pytest.raises(RuntimeError, match=r"which is output 1 of ForeachExp, is at version 1"):
        (out[0].sum() + out[1].sum()).backward()
    ys = [ember.ones(3, requires_grad=True) * 1]
    prod = ember._foreach_mul(ys, ys)
    ember._foreach_add_(ys, 1.0)
    with pytest.raises(RuntimeError, match=r"which is output 0 of Add1, is at version 1"):
        prod[0].sum().backward()


@pytest.mark.parametrize("cls", ["RNN", "GRU"])
def test_recurrent_per_sample_grads_are_each_samples_gradient(cls):
    from ember.nn.utils._per_sample_grad import call_for_per_sample_grads
    ember.manual_seed(0)
    m = getattr(ember.nn, cls)(3, 4, batch_first=True, num_layers=2)
    x = ember.randn(3, 5, 3)
    y = call_for_per_sample_grads(m)(x)[0]
    assert type(y.grad_fn).__name__ == "TransposeBackward0"
    (y * y).sum().backward()
    for i in range(3):
        m.zero_grad()
        single = m(x[i:i + 1])[0]
        grads = ember.autograd.grad((single * single).sum(), list(m.parameters()))
        for p, g in zip(m.parameters(), grads):
            np.testing.assert_allclose(p.grad_sample[i].numpy(), g.numpy(), rtol=1e-4,
                                       atol=1e-6)
    with pytest.raises(RuntimeError, match="cannot handle function mkldnn_rnn_layer.default"):
        call_for_per_sample_grads(ember.nn.LSTM(3, 4, batch_first=True))(x)


@pytest.mark.parametrize("cls", ["GRU", "LSTM"])
def test_recurrent_per_sample_grads_of_a_packed_sequence_are_each_samples_gradient(cls):
    from ember.nn.utils._per_sample_grad import call_for_per_sample_grads
    ember.manual_seed(0)
    m = getattr(ember.nn, cls)(3, 4, bidirectional=True).double()
    x = ember.randn(3, 3, 3, dtype=ember.float64)
    lengths = [2, 3, 1]
    packed = ember.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
    out, h = call_for_per_sample_grads(m, batch_size=3)(packed)
    h = h[0] if cls == "LSTM" else h
    ((out.data ** 2).sum() + (h ** 2).sum()).backward()
    per = {n: p.grad_sample.numpy() for n, p in m.named_parameters()}
    # (rows in the packed order, longest first, as PyTorch 2.13 leaves them)
    for row, i in enumerate(packed.sorted_indices.tolist()):
        m.zero_grad()
        o, hi = m(x[:lengths[i], i:i + 1])
        hi = hi[0] if cls == "LSTM" else hi
        ((o ** 2).sum() + (hi ** 2).sum()).backward()
        for n, p in m.named_parameters():
            np.testing.assert_allclose(per[n][row], p.grad.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=n)
