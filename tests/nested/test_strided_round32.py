"""Strided nested tensors (round 32): unbound components are views on the graph, the node of
``as_nested_tensor`` is freed by a backward, backward refused where PyTorch's nested kernels
have no derivative, refusals that depend on requires_grad, and ASGD stepping nested
parameters; expected values from NumPy."""

import warnings

import numpy as np
import pytest

import ember
from ember.nested import NO_SIZES

A = np.array([[1., -2., 3., 4.], [4., 5., -6., 7.]], np.float32)
B = np.array([[7., 8., 9., 1.]], np.float32)
MULTI_VIEW = ("is a view and is being modified inplace. This view is the output of a function "
              "that returns multiple views.")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # the prototype warning
        yield


def _nt(requires_grad=True):
    return ember.nested.nested_tensor([ember.tensor(A), ember.tensor(B)],
                                      requires_grad=requires_grad)


def _ones(nt):
    return ember.nested.nested_tensor([ember.ones_like(t) for t in nt.unbind()])


def _grads(nt):
    return [t.numpy() for t in nt.grad.unbind()]


# ----- unbind and indexing --------------------------------------------------------------------

def test_unbind_gives_views_on_the_graph():
    x = _nt()
    parts = x.unbind()
    assert [type(p.grad_fn).__name__ for p in parts] == ["UnbindBackwardAutogradNestedTensor0"] * 2
    assert [p.is_leaf for p in parts] == [False, False]
    assert all(p._is_view() for p in parts)
    assert type(x[1].grad_fn).__name__ == "SelectBackwardAutogradNestedTensor0"
    assert type(x[0, 1].grad_fn).__name__ == "SelectBackward0"
    assert [type(p.grad_fn).__name__ for p in (x * 2).unbind()] == \
        ["UnbindBackwardAutogradNestedTensor0"] * 2
    (parts[0].sum() * 2 + (parts[1] ** 2).sum()).backward()
    g = _grads(x)
    np.testing.assert_array_equal(g[0], np.full_like(A, 2))
    np.testing.assert_array_equal(g[1], 2 * B)


def test_unbound_views_of_a_plain_nested_tensor_write_through():
    x = _nt(False)
    parts = x.unbind()
    assert parts[0].grad_fn is None and parts[0].is_leaf and parts[0]._is_view()
    parts[1].mul_(10)
    x[0].add_(100)
    x[0, 1].fill_(-1)
    want_a = A + 100
    want_a[1] = -1
    np.testing.assert_array_equal(x.unbind()[0].numpy(), want_a)
    np.testing.assert_array_equal(x.unbind()[1].numpy(), B * 10)


@pytest.mark.parametrize("write, message", [
    (lambda x: x.unbind()[1].mul_(2), f"Output 1 of UnbindBackwardAutogradNestedTensor0 "
                                      f"{MULTI_VIEW}"),
    (lambda x: (x * 2).unbind()[0].mul_(2), f"Output 0 of UnbindBackwardAutogradNestedTensor0 "
                                            f"{MULTI_VIEW}"),
    (lambda x: x.unbind()[1][0].mul_(2), f"Output 0 of Select {MULTI_VIEW}"),
    (lambda x: x[0].mul_(2), "a view of a leaf Variable that requires grad is being used in an "
                             "in-place operation."),
    (lambda x: x.unbind()[0].requires_grad_(False), "you can only change requires_grad flags "
                                                    "of leaf variables."),
])
def test_writes_into_unbound_views_of_a_graph_refused(write, message):
    with pytest.raises(RuntimeError) as info:
        write(_nt())
    assert str(info.value).startswith(message)


def test_unbound_view_after_its_base_changed_refused():
    x = _nt()
    parts = x.unbind()
    with ember.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match="Output 0 of UnbindBackwardAutogradNestedTensor0 is "
                                           "a view and its base or another view of its base "
                                           "has been modified inplace"):
        parts[0].grad_fn


@pytest.mark.parametrize("make, index", [(lambda x: x.unbind(), 1),
                                         (lambda x: x.split(1), 1),
                                         (lambda x: x.unsqueeze(0).unbind(), 0)])
def test_multi_output_view_of_a_dense_leaf_named_first(make, index):
    x = ember.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=f"Output {index} of (Unbind|Split) is a view and is "
                                           f"being modified inplace"):
        make(x)[index].mul_(2)


def test_multi_output_view_of_a_plain_base_made_to_require_grad():
    view = ember.ones(2, 3).unbind()[1]
    view.requires_grad_()
    with pytest.raises(RuntimeError, match="^A view was created in no_grad mode and is being "
                                           "modified inplace with grad mode enabled. This view "
                                           "is the output of a function that returns multiple"):
        view.mul_(2)


# ----- as_nested_tensor's node ------------------------------------------------------------------

def _packed():
    x = ember.ones(2, 4, requires_grad=True)
    y = ember.ones(1, 4, requires_grad=True)
    return x, y, ember.nested.as_nested_tensor([x, y])


def test_as_nested_tensor_node_freed_by_a_backward():
    x, y, nt = _packed()
    (nt * 2).backward(_ones(nt))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 4), 2, np.float32))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        (nt * 3).backward(_ones(nt))
    x, y, nt = _packed()
    nt.unbind()[0].sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), np.zeros((1, 4), np.float32))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        nt.unbind()[1].sum().backward()


def test_as_nested_tensor_node_retained():
    x, y, nt = _packed()
    out = nt * 2
    out.backward(_ones(out), retain_graph=True)
    out.backward(_ones(out))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 4), 4, np.float32))
    np.testing.assert_array_equal(y.grad.numpy(), np.full((1, 4), 4, np.float32))


def test_as_nested_tensor_differentiable_dtypes():
    x = ember.ones(2, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="^Autograd not support dtype: Long"):
        ember.nested.as_nested_tensor([x], dtype=ember.int64)
    with pytest.raises(RuntimeError, match="^_nested_tensor_from_tensor_list does not support"):
        ember.nested.as_nested_tensor([x], dtype=ember.complex64)
    ints = ember.nested.as_nested_tensor(x, dtype=ember.int64)     # (converted, then viewed)
    assert not ints.requires_grad and ints.is_leaf
    np.testing.assert_array_equal(ints.unbind()[1].numpy(), np.ones(4, np.int64))
    with ember.no_grad():
        plain = ember.nested.as_nested_tensor([x, ember.ones(1, 4)])
    assert not plain.requires_grad and plain.is_leaf


def test_as_nested_tensor_keeps_negative_zero():
    x = ember.tensor([-0.0, 1.0], requires_grad=True)
    nt = ember.nested.as_nested_tensor([x, ember.ones(1)])
    assert np.signbit(nt.unbind()[0].detach().numpy()[0])


# ----- backward refused ------------------------------------------------------------------------

@pytest.mark.parametrize("fn, error, message", [
    (lambda x: x.tanh(), NotImplementedError, "Could not run 'aten::tanh_backward' with "
                                              "arguments from the 'NestedTensorCPU' backend."),
    (lambda x: (x * 1).tanh_(), NotImplementedError, "Could not run 'aten::tanh_backward'"),
    (lambda x: x.sgn(), RuntimeError, NO_SIZES),
    (lambda x: (x * 1).sgn_(), RuntimeError, NO_SIZES),
    (lambda x: x.chunk(2, -1)[1], RuntimeError, "self.layout() == c10::kJagged INTERNAL ASSERT "
                                                "FAILED"),
    (lambda x: x.select(2, 1), RuntimeError, "NestedTensor must be contiguous to get buffer."),
])
def test_backward_refused_where_the_nested_kernel_has_no_derivative(fn, error, message):
    x = _nt()
    out = fn(x)             # (the forward runs)
    assert out.unbind()[0].requires_grad
    with pytest.raises(error) as info:
        out.backward(_ones(out))
    assert str(info.value).startswith(message)
    with pytest.raises(error):
        ember.autograd.grad(fn(x).unbind()[0].sum(), x)


def test_backward_through_what_pytorch_differentiates():
    x = _nt()
    out = (x * 1).relu_()
    out.backward(_ones(out))
    g = _grads(x)
    np.testing.assert_array_equal(g[0], (A > 0).astype(np.float32))
    np.testing.assert_array_equal(g[1], (B > 0).astype(np.float32))
    x = _nt()
    out = x.split_with_sizes([1, 3], -1)[1]
    out.backward(_ones(out))
    np.testing.assert_array_equal(_grads(x)[0], np.array([[0, 1, 1, 1]] * 2, np.float32))


# ----- refusals depending on requires_grad ------------------------------------------------------

@pytest.mark.parametrize("fn, refused", [
    (lambda x: x.split(2, -1), "split.Tensor"), (lambda x: x.expand(2, -1, 4), "expand"),
    (lambda x: x.mean(-1), "mean.dim"), (lambda x: x.max(-1), "max.dim"),
    (lambda x: x[:, :, :2], "slice.Tensor"), (lambda x: x.repeat(1, 1, 2), "repeat"),
    (lambda x: x.index_select(2, ember.tensor([0])), "index_select"),
    (lambda x: ember.addmm(ember.ones(3), x, ember.ones(4, 3)), "addmm"),
])
def test_refusals_read_the_sizes_first_under_autograd(fn, refused):
    with pytest.raises(NotImplementedError, match=f"Could not run 'aten::{refused}' with"):
        fn(_nt(False))
    with pytest.raises(RuntimeError, match="doesn't support sizes"):
        fn(_nt())
    with ember.no_grad(), pytest.raises(NotImplementedError, match=f"aten::{refused}'"):
        fn(_nt())


def test_cat_and_squeeze_under_autograd():
    x = _nt()
    out = ember.cat([_nt(False), _nt(False)], -1)
    np.testing.assert_array_equal(out.unbind()[1].numpy(), np.concatenate([B, B], -1))
    for fn in (lambda: ember.cat([x, x], -1), lambda: ember.cat([_nt(False), x], 0),
               lambda: ember.cat([_nt(False), ember.ones(2, 4, requires_grad=True)], -1),
               lambda: x.squeeze()):
        with pytest.raises(RuntimeError, match="doesn't support sizes"):
            fn()
    with ember.no_grad():
        assert not ember.cat([x, x], -1).requires_grad
    with pytest.raises(RuntimeError, match="cat\\(\\): expected each tensor in given list"):
        ember.cat([_nt(False), ember.ones(2, 4)], -1)
    with pytest.raises(RuntimeError, match="^Expected each tensor in given list to be nested"):
        ember.cat([_nt(False), ember.ones(2, 4)], 0)


def test_numpy_and_sizes_refused():
    with pytest.raises(RuntimeError, match="Can't call numpy"):
        _nt().numpy()
    with ember.no_grad(), pytest.raises(RuntimeError, match="doesn't support sizes"):
        _nt().numpy()
    for fn in (lambda x: x.flatten(1), lambda x: x.unflatten(-1, (2, 2)),
               lambda x: x.view_as(x)):
        with pytest.raises(RuntimeError, match="doesn't support sizes"):
            fn(_nt(False))


# ----- ASGD ------------------------------------------------------------------------------------

def _asgd_reference(params, steps, lr, lambd, alpha, t0, weight_decay):
    """NumPy ASGD on ``params`` (the gradient of sum(p * p) is 2 p)."""
    params = [p.astype(np.float64) for p in params]
    ax = [np.zeros_like(p) for p in params]
    eta, mu = lr, 1.0
    for t in range(1, steps + 1):
        for i, p in enumerate(params):
            g = 2 * p + weight_decay * p
            p = p * (1 - lambd * eta) - eta * g
            ax[i] = p.copy() if mu == 1 else ax[i] + (p - ax[i]) * mu
            params[i] = p
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)
    return params, ax, eta, mu


@pytest.mark.parametrize("hyper", [dict(), dict(t0=1), dict(t0=2, weight_decay=0.2),
                                   dict(lambd=0.5, alpha=0.5, t0=1)])
def test_asgd_steps_nested_parameters(hyper):
    hyper = dict(dict(lr=0.1, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0), **hyper)
    x = _nt()
    opt = ember.optim.ASGD([x], **hyper)
    for _ in range(5):
        opt.zero_grad()
        out = x * x
        out.backward(_ones(out))
        opt.step()
    params, ax, eta, mu = _asgd_reference([A, B], 5, **hyper)
    state = opt.state[x]
    for got, want in zip(x.unbind(), params):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    for got, want in zip(state["ax"].unbind(), ax):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert state["ax"].is_nested and state["step"].item() == 5
    np.testing.assert_allclose(state["eta"].item(), eta, rtol=1e-6)
    np.testing.assert_allclose(state["mu"].item(), mu, rtol=1e-6)


@pytest.mark.parametrize("flags, error, message", [
    (dict(foreach=True), NotImplementedError, "Could not run 'aten::_foreach_add.List'"),
    (dict(capturable=True), AssertionError, "If capturable=True, params, mus, etas, and "
                                            "state_steps must be on supported devices"),
    (dict(differentiable=True), RuntimeError, "a leaf Variable that requires grad is being "
                                              "used in an in-place operation."),
])
def test_asgd_refuses_nested_parameters_on_other_paths(flags, error, message):
    x = _nt()
    opt = ember.optim.ASGD([x], **flags)
    out = x * x
    out.backward(_ones(out))
    with pytest.raises(error) as info:
        opt.step()
    assert str(info.value).startswith(message)


# ----- review fixes: split by sizes, narrow's views, select writes, freed views, real/imag ----

@pytest.mark.parametrize("requires_grad", [False, True])
def test_split_with_a_list_of_sizes(requires_grad):
    x = _nt(requires_grad)
    left, right = x.split([1, 3], -1)
    np.testing.assert_array_equal(left.unbind()[1].detach().numpy(), B[:, :1])
    np.testing.assert_array_equal(right.unbind()[0].detach().numpy(), A[:, 1:])
    if requires_grad:
        (left.unbind()[0].sum() * 2 + right.unbind()[1].sum()).backward()
        g = _grads(x)
        np.testing.assert_array_equal(g[0], np.array([[2, 0, 0, 0]] * 2, np.float32))
        np.testing.assert_array_equal(g[1], np.array([[0, 1, 1, 1]], np.float32))
    with pytest.raises(RuntimeError, match="only supported for the last dimension"):
        x.split([1, 1], 1)
    with pytest.raises(NotImplementedError if not requires_grad else RuntimeError):
        x.split(2, -1)          # (an int size: split.Tensor, which nested tensors lack)


def test_narrow_method_views_and_function_copies():
    x = _nt(False)
    x.narrow(0, 1, 1).unbind()[0].mul_(10)
    np.testing.assert_array_equal(x.unbind()[1].numpy(), B * 10)
    y = ember.nested.narrow(x, 0, 1, 1)
    y.unbind()[0].mul_(0)
    np.testing.assert_array_equal(x.unbind()[1].numpy(), B * 10)
    with pytest.raises(RuntimeError, match="only contiguous nested tensors supported"):
        x.transpose(1, 2).narrow(0, 0, 1)


def test_writes_into_selected_components_of_a_graph_refused():
    x = _nt()
    for write in (lambda z: z[0].mul_(2), lambda z: z[0][1].mul_(2),
                  lambda z: z[1, 0].fill_(1)):
        with pytest.raises(RuntimeError, match="doesn't support sizes"):
            write(x * 1)
    z = x * 1
    with ember.no_grad():
        z[1].mul_(2)
    np.testing.assert_array_equal(z.unbind()[1].detach().numpy(), B * 2)


def test_unbound_and_selected_views_freed_by_a_backward():
    x = _nt()
    parts = x.unbind()
    parts[0].sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        parts[1].sum().backward()
    x = _nt()
    first = x[0]
    (first * 2).sum().backward()
    np.testing.assert_array_equal(_grads(x)[0], np.full_like(A, 2))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        first.sum().backward()


def test_real_and_imag_of_nested_tensors():
    x = _nt()
    assert x.real is x
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex"):
        x.imag
    z = x * (1 + 2j)
    for fn in (lambda: z.real, lambda: z.imag, lambda: ember.real(z), lambda: ember.imag(z)):
        with pytest.raises(NotImplementedError, match="aten::view_as_real"):
            fn()


def test_freed_together_nodes_renamed_later_still_run():
    from ember.nested._strided_grad import freed_together
    from ember.ops._recording import rename_node
    x = ember.ones(2, 3, requires_grad=True)
    y = ember.ones(2, 3, requires_grad=True)
    a, b = freed_together([x * 2, y * 3], "GroupBackward0")
    assert type(a.grad_fn).__name__ == "GroupBackward0"
    rename_node(a, "LaterBackward0")        # (a subclass of the freeing class)
    a.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 2, np.float32))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        b.sum().backward()
