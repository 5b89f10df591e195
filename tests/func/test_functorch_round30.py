"""Round 30: views and func-transform leftovers, pinned without torch (NumPy/SciPy
references and PyTorch's words): a view copy's out= that requires grad, linearize's view of an
input requiring grad, forward_ad inside vmap(grad), vmap(linearize) over a batched closure,
closures writing an argument, polygamma_/as_strided(_) under vmap, gumbel_softmax's fallback
warning under randomness="different"."""

import warnings

import numpy as np
import pytest
from scipy import special

import ember
from ember.func import grad, jvp, linearize, vjp, vmap

fwAD = ember.autograd.forward_ad
POS = np.array([[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]])
_OUT_REFUSAL = ("aten::transpose_copy(): functions with out=... arguments don't support "
                "automatic differentiation, but one of the arguments requires grad.")
_CAPTURED = ("During a grad (vjp, jvp, grad, etc) transform, the function provided attempted "
             "to call in-place operation (aten::mul_.Tensor) that would mutate a captured "
             "Tensor. This is not supported; please rewrite the function being transformed to "
             "explicitly accept the mutated Tensor(s) as inputs.")


def _fallback(name):
    return (f"There is a performance drop because we have not yet implemented the batching "
            f"rule for {name}. Please file us an issue on GitHub so that we can prioritize its "
            f"implementation.")


def _messages(caught):
    return [str(w.message) for w in caught]


def test_transpose_copy_into_a_view_records_a_refusing_node():
    y = ember.zeros(2, 3, requires_grad=True).clone()
    v = y[0:1]
    assert ember.transpose_copy(ember.arange(3.).reshape(3, 1), 0, 1, out=v) is v
    assert y.grad_fn.name() == "torch::autograd::CopySlices"
    assert type(v.grad_fn).__name__ == "AsStridedBackward0"
    np.testing.assert_array_equal(y.detach().numpy(), [[0, 1, 2], [0, 0, 0]])
    with pytest.raises(RuntimeError, match="derivative for aten::transpose_copy is not "
                                           "implemented"):
        y.sum().backward()


def test_view_copy_out_of_an_input_requiring_grad():
    x = ember.arange(3.).reshape(3, 1).requires_grad_()
    out = ember.zeros(1, 3)
    ember.t_copy(x, out=out)
    assert out.requires_grad and type(out.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::t_copy is not implemented"):
        out.sum().backward()
    with ember.no_grad():
        quiet = ember.zeros(1, 3)
        ember.t_copy(x, out=quiet)
    assert quiet.grad_fn is None and not quiet.requires_grad


def test_view_copy_out_refusals_and_split_copy():
    with pytest.raises(RuntimeError) as info:
        ember.transpose_copy(ember.ones(3, 1), 0, 1, out=ember.zeros(3, requires_grad=True)
                             .view(1, 3))
    assert str(info.value) == _OUT_REFUSAL
    a = ember.zeros(2, requires_grad=True)
    assert ember.split_copy(ember.arange(4.), 2, out=[a, ember.zeros(2)]) is None
    assert a.grad_fn is None and a.tolist() == [0.0, 1.0]


def test_out_refusals_of_unbind_copy_and_frobenius_norm_and_alias_copy_nodes():
    x = ember.arange(3.).reshape(3, 1).requires_grad_()     # (a leaf that is a view)
    for fname in ("alias_copy", "detach_copy"):
        out = ember.zeros(3, 1)
        getattr(ember, fname)(x, out=out)
        assert type(out.grad_fn).__name__ == "NotImplemented"
        assert [type(n).__name__ for n, _ in out.grad_fn.next_functions] == ["AccumulateGrad"]
        np.testing.assert_array_equal(out.detach().numpy(), [[0], [1], [2]])
    with pytest.raises(RuntimeError) as info:
        ember.unbind_copy(ember.ones(2, 3), out=[ember.zeros(3, requires_grad=True),
                                                  ember.zeros(3)])
    assert str(info.value) == _OUT_REFUSAL.replace("aten::transpose_copy", "unbind_copy")
    with ember.no_grad():
        ember.unbind_copy(ember.ones(2, 3), out=[ember.zeros(3, requires_grad=True),
                                                  ember.zeros(3)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (frobenius_norm's deprecation)
        with pytest.raises(RuntimeError) as info:
            ember.frobenius_norm(x, (0,), out=ember.zeros(1))
        assert str(info.value) == _OUT_REFUSAL.replace("aten::transpose_copy", "norm")
        out = ember.zeros(1)
        with ember.no_grad():
            ember.frobenius_norm(x, (0,), out=out)
    np.testing.assert_allclose(out.numpy(), [np.sqrt(5.0)], rtol=1e-6)


def test_linearize_input_requiring_grad_reports_it():
    seen = []

    def f(x):
        seen.append((x.requires_grad, x.is_leaf, x.sin().requires_grad))
        return x.sin()
    x = ember.tensor([0.5, 1.0], requires_grad=True)
    out, jvp_fn = linearize(f, x)
    linearize(f, x.detach())
    jvp(f, (x,), (ember.ones(2),))
    # linearize runs f on x itself, then on a view of it made dual (PyTorch's trace)
    assert seen == [(True, True, True), (True, False, True), (False, True, False),
                    (False, True, False), (False, True, False)]
    np.testing.assert_allclose(jvp_fn(ember.ones(2)).detach().numpy(), np.cos([0.5, 1.0]),
                               rtol=1e-6)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        linearize(lambda t: t.mul_(2), x)


def _loss(w, x, v):
    with fwAD.dual_level():
        y = ember.sin(fwAD.make_dual(x, v) * w).sum()
        return fwAD.unpack_dual(y).tangent ** 2


def test_vmap_grad_through_make_dual():
    w, xs, v = 0.7, POS, np.array([1.0, -2.0, 0.5])
    got = vmap(grad(_loss), in_dims=(None, 0, None))(
        ember.tensor(w, dtype=ember.float64), ember.tensor(xs), ember.tensor(v))
    tangent = (w * np.cos(w * xs) * v).sum(1)
    d_tangent = ((np.cos(w * xs) - w * xs * np.sin(w * xs)) * v).sum(1)
    np.testing.assert_allclose(got.numpy(), 2 * tangent * d_tangent, rtol=1e-10)
    got = vmap(grad(_loss, argnums=1), in_dims=(None, 0, None))(
        ember.tensor(w, dtype=ember.float64), ember.tensor(xs), ember.tensor(v))
    expected = 2 * tangent[:, None] * (-w * w * np.sin(w * xs) * v)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)


def test_vmap_linearize_refuses_a_batched_closure():
    x = ember.tensor([0.5, 1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"Batching rule not implemented for "
                                           r"aten::_unpack_dual; the fallback path"):
        vmap(lambda c: linearize(lambda t: t.sin() * c, x)[0])(ember.tensor(POS))


def test_closure_writing_an_argument_is_refused():
    a = ember.ones(3)

    def f(x):
        a.mul_(2)
        return (x * 3).sum()
    for call in (lambda: grad(f)(a), lambda: vjp(f, a)):
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == _CAPTURED
    assert a.tolist() == [1.0, 1.0, 1.0]


def test_vmap_polygamma_inplace():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = vmap(lambda x: x.clone().polygamma_(1))(ember.tensor(POS))
    np.testing.assert_allclose(got.numpy(), special.polygamma(1, POS), rtol=1e-6)
    assert _messages(caught) == [_fallback("aten::polygamma_")]


def test_vmap_as_strided_rule_and_inplace_fallback():
    data = np.arange(12.0).reshape(2, 6)
    got = vmap(lambda x: x[1:].as_strided((2,), (2,), 2))(ember.tensor(data))
    np.testing.assert_array_equal(got.numpy(), [[2, 4], [8, 10]])
    got = vmap(lambda x: x.as_strided((2,), (2,)), in_dims=1)(ember.tensor(data.T.copy()))
    np.testing.assert_array_equal(got.numpy(), [[0, 1], [6, 7]])
    with pytest.raises(RuntimeError, match=r"result = tensor.as_strided\(\[4\], \[2\], 0\) can "
                                           r"access memory outside of `tensor`"):
        vmap(lambda x: x.as_strided((4,), (2,)))(ember.tensor(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = vmap(lambda x: x.clone().as_strided_((2,), (2,)) + 1)(ember.tensor(data))
    np.testing.assert_array_equal(got.numpy(), data + 1)        # (PyTorch's: unchanged)
    assert _messages(caught) == [_fallback("aten::as_strided_")]


def test_vmap_as_strided_over_no_examples_or_empty_ones():
    got = vmap(lambda x: x.as_strided((2,), (1,)))(ember.zeros(0, 6))
    assert tuple(got.shape) == (0, 2)
    with pytest.raises(RuntimeError, match=r"as_strided\(\[8\], \[1\], 0\) can access memory "
                                           r"outside of `tensor`. `result` can access"):
        vmap(lambda x: x.as_strided((8,), (1,)))(ember.zeros(0, 6))
    with pytest.raises(RuntimeError, match="`tensor` has no storage but the passed-in"):
        vmap(lambda x: x.as_strided((2,), (1,)))(ember.zeros(3, 0))
    assert tuple(vmap(lambda x: x.as_strided((0,), (1,)))(ember.zeros(3, 0)).shape) == (3, 0)


def test_gumbel_softmax_hard_under_different_randomness_warns_as_batched():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = vmap(lambda t: ember.nn.functional.gumbel_softmax(t, hard=True),
                 randomness="different")(ember.zeros(3, 4))
    assert _messages(caught) == [_fallback("aten::scatter_.value")]
    np.testing.assert_array_equal(y.sum(-1).numpy(), [1, 1, 1])
    draws = vmap(lambda t: ember.empty_like(t).exponential_(), randomness="different")(
        ember.zeros(64, 5))
    assert (draws[0] != draws[1]).any() and (draws > 0).all()


def test_inplace_draw_in_nested_vmaps_keeps_the_inner_randomness():
    # the tensor is batched by the outer vmap only: an inner "same" vmap draws once for its
    # batch (per outer example), an inner "different" one refuses it (PyTorch's rules)
    def inner(a, randomness):
        return vmap(lambda t: a.clone().normal_() + t.sum(), randomness=randomness)(
            ember.zeros(2, 1))
    y = vmap(lambda a: inner(a, "same"), randomness="different")(ember.zeros(3, 50))
    assert tuple(y.shape) == (3, 2, 50)
    assert bool((y[:, 0] == y[:, 1]).all())
    assert bool((y[0, 0] != y[1, 0]).any()) and bool((y[1, 0] != y[2, 0]).any())
    with pytest.raises(RuntimeError, match="Cannot ask for different inplace randomness on "
                                           "an unbatched tensor"):
        vmap(lambda a: inner(a, "different"), randomness="different")(ember.zeros(3, 50))


# --- ops PyTorch 2.13 loops under vmap: ember's rules warn as its fallback does ---------------

def _looped(fn):
    """``fn()``'s value and the ATen ops its fallback warnings name, in order."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message).split("batching rule for ")[1].split(". Please")[0]
                 for w in caught if "performance drop" in str(w.message)]


ROWS = ember.tensor([[0.3, -1.2, 2.5, 0.7], [1.1, 0.2, -2.2, 0.9]], dtype=ember.float64)


@pytest.mark.parametrize("fn,names", [
    (lambda: vmap(lambda v: ember.quantile(v, 0.3))(ROWS), ["aten::quantile.scalar"]),
    (lambda: vmap(lambda v: v.nanquantile(ROWS[0, :2].abs() / 3))(ROWS), ["aten::nanquantile"]),
    (lambda: vmap(grad(lambda v: ember.quantile(v, 0.3)))(ROWS), ["aten::lerp_.Tensor"]),
    (lambda: vmap(grad(lambda v: ember.quantile(v, 0.3, interpolation="lower")))(ROWS), []),
    (lambda: vmap(lambda v, m: v.masked_scatter(m, -v))(ROWS, ROWS > 0),
     ["aten::masked_scatter"]),
    (lambda: vmap(grad(lambda v, s: v.masked_scatter(v > 0, s).sum(), argnums=1))(ROWS, ROWS),
     ["aten::masked_scatter", "aten::masked_scatter_backward"]),
], ids=["quantile", "nanquantile", "quantile_grad", "quantile_grad_lower", "masked_scatter",
        "masked_scatter_grad_source"])
def test_rules_pytorch_lacks_warn_and_keep_the_values(fn, names):
    out, shown = _looped(fn)
    assert shown == names
    if names == ["aten::quantile.scalar"]:
        np.testing.assert_allclose(out.numpy(), np.quantile(ROWS.numpy(), 0.3, axis=1))
    if names == ["aten::masked_scatter"]:
        x = ROWS.numpy()
        want = np.stack([np.where(r > 0, -r[np.cumsum(r > 0) - 1], r) for r in x])
        np.testing.assert_array_equal(out.numpy(), want)


def test_quantile_over_an_empty_batch_names_the_overload():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match=r"^Batching rule not implemented for "
                           r"aten::quantile\.scalar\. The fallback path does not support"):
            vmap(lambda v: ember.quantile(v, 0.3))(ROWS[:0])


def test_affine_grid_tangent_under_jacfwd_warns_of_the_forward():
    import ember.nn.functional as F
    theta = ember.tensor([[0.9, 0.1, 0.2], [-0.1, 1.1, 0.3]], dtype=ember.float64)

    def f(t):
        return (F.affine_grid(t.reshape(1, 2, 3), (1, 1, 3, 4), align_corners=False) ** 3).sum()
    _, shown = _looped(lambda: ember.func.jacfwd(f)(theta))
    assert shown == ["aten::affine_grid_generator"]
    _, shown = _looped(lambda: ember.func.hessian(f)(theta))
    assert sorted(shown) == ["aten::affine_grid_generator", "aten::affine_grid_generator_backward"]


@pytest.mark.parametrize("scale", [[1.0, 2.0, 3.0], [[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]]])
def test_vmap_of_a_product_with_a_shared_coo_tensor(scale):
    dense = np.array([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]], dtype=np.float32)
    a = ember.tensor(dense).to_sparse()
    s = ember.tensor(scale)
    out = vmap(lambda x: a * x)(s)
    want = np.asarray(scale, dtype=np.float32).reshape(len(scale), 1, -1) * dense
    assert out.layout is ember.sparse_coo and out.sparse_dim() == 3 and out.is_coalesced()
    assert out.dtype is ember.float32 and out._nnz() == 3 * len(scale)
    np.testing.assert_array_equal(out.to_dense().numpy(), np.broadcast_to(want, out.shape))
