"""Ops on strided nested tensors run on each component: values and gradients from NumPy,
and PyTorch's errors for what its strided nested tensors refuse."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F

_RNG = np.random.default_rng(3)
A = _RNG.standard_normal((2, 3))
B = _RNG.standard_normal((4, 3))
W = _RNG.standard_normal((5, 3))
BIAS = _RNG.standard_normal(5)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # the prototype warning
        yield


def _nt(requires_grad=False, arrays=(A, B)):
    return ember.nested.nested_tensor([ember.tensor(a) for a in arrays], dtype=ember.float64,
                                      requires_grad=requires_grad)


def _parts(nt):
    assert nt.is_nested
    return [t.detach().numpy() for t in nt.unbind()]


def _close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def _softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("fn, ref", [
    (ember.relu, lambda a: np.maximum(a, 0)),
    (lambda x: x.abs(), np.abs),
    (lambda x: -x, np.negative),
    (ember.sin, np.sin),
    (ember.tanh, np.tanh),
    (F.silu, lambda a: a / (1 + np.exp(-a))),
    (lambda x: x * 3 + 1, lambda a: a * 3 + 1),
    (lambda x: 2 + x / 4, lambda a: 2 + a / 4),
    (lambda x: x * x - x, lambda a: a * a - a),
    (lambda x: x + ember.tensor(2.0), lambda a: a + 2),
    (lambda x: x.softmax(-1), lambda a: _softmax(a, -1)),
    (lambda x: F.softmax(x, dim=1), lambda a: _softmax(a, 0)),
    (lambda x: x.transpose(1, 2), lambda a: a.T),
    (lambda x: x.reshape(2, -1, 3, 1), lambda a: a[..., None]),
    (lambda x: x.unsqueeze(1), lambda a: a[None]),
    (lambda x: x.sum(-1, keepdim=True), lambda a: a.sum(-1, keepdims=True)),
    (lambda x: x.masked_fill(x > 0, 0.0), lambda a: np.where(a > 0, 0.0, a)),
    (lambda x: F.linear(x, ember.tensor(W), ember.tensor(BIAS)), lambda a: a @ W.T + BIAS),
    (lambda x: x @ x.transpose(1, 2), lambda a: a @ a.T),
    (lambda x: ember.bmm(x, ember.ones(2, 3, 2, dtype=ember.float64)),
     lambda a: a @ np.ones((3, 2))),
    (lambda x: F.scaled_dot_product_attention(x, x, x),
     lambda a: _softmax(a @ a.T / np.sqrt(3), -1) @ a),
    (lambda x: F.layer_norm(x, (3,), ember.full((3,), 2.0, dtype=ember.float64),
                            ember.ones(3, dtype=ember.float64)),
     lambda a: (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5) * 2
     + 1),
])
def test_ops_run_on_each_component(fn, ref):
    _close(_parts(fn(_nt())), [ref(A), ref(B)])


def test_chunk_and_split_give_nested_tensors_per_piece():
    pieces = _nt().chunk(3, -1)
    assert len(pieces) == 3
    _close(_parts(pieces[1]), [A[:, 1:2], B[:, 1:2]])
    first, rest = _nt().split_with_sizes([1, 2], -1)
    _close(_parts(rest), [A[:, 1:], B[:, 1:]])
    np.testing.assert_array_equal(_nt().select(0, 1).numpy(), B)
    _close(_parts(_nt().select(2, 0)), [A[:, 0], B[:, 0]])


def test_nested_leaf_gradient_is_a_nested_tensor():
    x = _nt(True)
    y = F.linear(ember.relu(x) * x, ember.tensor(W)).softmax(-1)
    assert not y.is_leaf and y.requires_grad and type(y.grad_fn).__name__ == "SoftmaxBackward0"
    gy = [np.full((2, 5), 1.0), np.arange(20.0).reshape(4, 5)]
    y.backward(ember.nested.nested_tensor([ember.tensor(g) for g in gy]))
    assert x.grad.is_nested and x.is_leaf
    for a, g, got in zip((A, B), gy, _parts(x.grad)):
        s = _softmax((np.maximum(a, 0) * a) @ W.T, -1)
        gz = s * (g - (g * s).sum(-1, keepdims=True))        # through softmax
        want = (gz @ W) * 2 * np.maximum(a, 0)                # d(relu(a) * a) = 2 relu(a)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_as_nested_tensor_gradients_reach_the_inputs():
    a = ember.tensor(A, requires_grad=True)
    b = ember.tensor(B, requires_grad=True)
    y = ember.nested.as_nested_tensor([a, b])
    assert type(y.grad_fn).__name__ == "NestedTensorFromTensorListBackward0"
    (y * y).sum(-1, keepdim=True).backward(ember.nested.nested_tensor(
        [ember.ones(2, 1, dtype=ember.float64), ember.full((4, 1), 3.0, dtype=ember.float64)]))
    np.testing.assert_allclose(a.grad.numpy(), 2 * A)
    np.testing.assert_allclose(b.grad.numpy(), 6 * B)


def test_in_place_ops_change_each_component():
    x = _nt()
    assert x.add_(1) is x
    x.mul_(x)
    _close(_parts(x), [(A + 1) ** 2, (B + 1) ** 2])


def test_multihead_attention_fast_path_attends_within_each_component():
    mha = ember.nn.MultiheadAttention(3 * 2, 2, batch_first=True).double().eval()
    arrays = [_RNG.standard_normal((2, 6)), _RNG.standard_normal((5, 6))]
    x = _nt(arrays=arrays)
    with ember.no_grad():
        out, weights = mha(x, x, x)
        for a, got, w in zip(arrays, _parts(out), weights):
            t = ember.tensor(a)[None]
            want, want_w = mha(t, t, t)
            np.testing.assert_allclose(got, want[0].numpy(), rtol=1e-10)
            n = a.shape[0]
            np.testing.assert_allclose(w[:n, :n].numpy(), want_w[0].numpy(), rtol=1e-10)
            assert not w[n:].numpy().any() and not w[:, n:].numpy().any()
    with pytest.raises(AssertionError, match="because training is enabled"):
        mha.train()(x, x, x)


@pytest.mark.parametrize("fn, error, message", [
    (lambda x: x.exp(), NotImplementedError,
     "Could not run 'aten::exp' with arguments from the 'NestedTensorCPU' backend"),
    (lambda x: x ** 2, NotImplementedError, "'aten::pow.Tensor_Scalar'"),
    (lambda x: x + ember.ones(3), RuntimeError,
     "Expected both self and other to be nested, but got a nested self and non-nested other"),
    (lambda x: x + _nt(arrays=(A, A)), RuntimeError,
     "add does not support broadcasting when given a NestedTensor"),
    (lambda x: x.softmax(0), RuntimeError, "Cannot apply softmax across nested dimension 0"),
    (lambda x: x.transpose(0, 1), RuntimeError, "Nested tensor dimension 0 cannot be transposed"),
    (lambda x: x.sum(-1), RuntimeError, "NestedTensor always requires keepdim=True for now."),
    (lambda x: x.sum(1, keepdim=True), RuntimeError,
     "reduced across the last dimension for now got dimension 1 instead"),
    (lambda x: x.reshape(-1, -1, 3), RuntimeError,
     "nested reshape cannot change or infer the implicit batch dimension"),
    (lambda x: x.reshape(2, -1, 2), RuntimeError,
     r"shape '\[2, -1, 2\]' is invalid for input of size 6"),
    (lambda x: F.layer_norm(x, (3,)), ValueError, "NestedTensor layer_norm requires weight"),
    (lambda x: F.linear(x, ember.ones(5, 4, dtype=ember.float64)), RuntimeError,
     "last_dim = 3, and weight.size\\(1\\) = 4"),
    (lambda x: ember.matmul(x, ember.ones(3, 2)), RuntimeError,
     "Expected both to be nested, but got a nested self and non-nested other"),
    (lambda x: ember.bmm(x, x), RuntimeError,
     r"0-th nested matrices in batch cannot be multiplied \(2x3 and 2x3\)"),
    (lambda x: x.chunk(2, -1), RuntimeError, "got: 3 % 2 != 0"),
    (lambda x: x.select(1, 3), IndexError, "of the 0th constituent tensor with size 2"),
    (lambda x: x.unsqueeze(0), RuntimeError, "unsqueezing dimension 0 is not supported"),
    (lambda x: x.backward(), RuntimeError, "grad can be implicitly created only for scalar"),
])
def test_refused_ops_raise_pytorch_errors(fn, error, message):
    with pytest.raises(error, match=message):
        fn(_nt())


def test_leaf_gradient_is_accumulated_once_and_resets_to_none():
    x = _nt(True)
    (x * x).backward(_nt())
    # as PyTorch: a second gradient into a nested leaf's .grad fails (it has no strides)
    with pytest.raises(RuntimeError, match="NestedTensorImpl doesn't support strides"):
        (x * 3).backward(_nt())
    _close(_parts(x.grad), [2 * A * A, 2 * B * B])
    x.grad = None
    (x * 3).backward(_nt())             # (after a reset, a first gradient again)
    _close(_parts(x.grad), [3 * A, 3 * B])
    x.grad = None
    assert x.grad is None
    with pytest.raises(RuntimeError, match="NestedTensorImpl doesn't support sizes"):
        x.grad = _nt()


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = _nt(True)
    y = x * 2
    assert not y.retains_grad
    y.retain_grad()
    (y * y).backward(_nt())
    assert y.retains_grad
    _close(_parts(y.grad), [4 * A * A, 4 * B * B])
    _close(_parts(x.grad), [8 * A * A, 8 * B * B])


def test_in_place_methods_by_alias_run_or_raise_pytorch_errors():
    x = _nt()
    assert x.negative_() is x
    _close(_parts(x.absolute_()), [np.abs(A), np.abs(B)])
    x.copy_(_nt(arrays=(2 * A, 2 * B)))
    _close(_parts(x), [2 * A, 2 * B])
    for method, op in (("exp_", "exp_"), ("arccos_", "acos_"), ("square_", "pow_.Scalar")):
        with pytest.raises(NotImplementedError, match=f"'aten::{op}' with arguments from the "
                                                      f"'NestedTensorCPU' backend"):
            getattr(x, method)()
    with pytest.raises(RuntimeError, match="mul_ does not support broadcasting"):
        x.mul_(_nt(arrays=(A, A)))
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'relu__'"):
        x.relu__()


@pytest.mark.parametrize("fn, error, message", [
    (lambda x: (x * 2).backward(ember.ones(2, 4, 3)), RuntimeError,
     "Expected both self and other to be nested tensors"),
    (lambda x: (x * 2).backward(_nt(arrays=(A,))), RuntimeError,
     r"Mismatch in shape: grad_output\[0\] has a shape of tensor\(\[\[2, 3\]\]\)"),
    (lambda x: (x.detach() * 2).backward(_nt()), RuntimeError,
     "element 0 of tensors does not require grad"),
    (lambda x: x.reshape(2, -1, -1, 1), RuntimeError, "only one dimension can be inferred"),
    (lambda x: x.reshape(2, -1, 1, -1), RuntimeError, "nested tensor does not infer shape"),
    (lambda x: x.sum(-1, keepdim=True, dtype=ember.float32), RuntimeError,
     "NestedTensor does not support dtype argument for now."),
    (lambda x: x @ x.select(2, 0), RuntimeError,
     "only inputs with >= 3 dims are currently supported. 2nd input has rank: 2"),
    (lambda x: x.item(), RuntimeError, "a Tensor with 18 elements cannot be converted"),
    (lambda x: x.detach().numpy(), RuntimeError, "NestedTensorImpl doesn't support sizes"),
])
def test_more_refusals_raise_pytorch_errors(fn, error, message):
    with pytest.raises(error, match=message):
        fn(_nt(True))


def test_multihead_attention_runs_hooks_once_and_obeys_the_fast_path_switch():
    mha = ember.nn.MultiheadAttention(4, 2, batch_first=True).double().eval()
    calls = []
    mha.register_forward_hook(lambda *args: calls.append(1))
    x = _nt(arrays=[_RNG.standard_normal((2, 4)), _RNG.standard_normal((3, 4))])
    with ember.no_grad():
        mha(x, x, x)
        assert calls == [1]
        ember.backends.mha.set_fastpath_enabled(False)
        try:
            with pytest.raises(AssertionError, match=r"get_fastpath_enabled\(\) was not True"):
                mha(x, x, x)
        finally:
            ember.backends.mha.set_fastpath_enabled(True)


def test_components_of_a_new_nested_tensor_are_contiguous():
    ts = [ember.tensor(A).t(), ember.tensor(B).t()]
    for nt in (ember.nested.nested_tensor(ts), ember.nested.as_nested_tensor(ts)):
        assert nt.is_contiguous() and nt.contiguous() is nt
        _close(_parts(nt), [A.T, B.T])


# ----- round 31, second wave -----------------------------------------------------------------

def test_unbound_component_made_to_require_grad_accumulates_as_any_leaf():
    for x in (_nt(), _nt(True).detach()):
        c = x.unbind()[1]
        c.requires_grad_()
        (c * 2).sum().backward()
        (c * 3).sum().backward()
        np.testing.assert_array_equal(c.grad.numpy(), np.full_like(B, 5.0))
    y = _nt().requires_grad_()          # (a leaf now: its gradient, once)
    (y * 2).backward(_nt())
    with pytest.raises(RuntimeError, match="NestedTensorImpl doesn't support strides"):
        (y * 3).backward(_nt())


def test_top_level_in_place_functions_reach_the_nested_tensor():
    x = _nt()
    assert ember.neg_(x) is x
    _close(_parts(x), [-A, -B])
    assert ember.Tensor.add_(x, 1.0, alpha=2) is x
    _close(_parts(x), [2 - A, 2 - B])
    assert ember.Tensor.mul_(x, _nt()) is x
    _close(_parts(x), [(2 - A) * A, (2 - B) * B])
    for fn in (ember.exp_, ember.Tensor.sqrt_):
        with pytest.raises(NotImplementedError, match="'aten::(exp|sqrt)_' with arguments"):
            fn(x)
    with pytest.raises(TypeError, match=r"exp_\(\): expected a Tensor, got list"):
        ember.exp_([1.0])
    y = ember.ones(3)
    assert ember.exp_(y) is y
    np.testing.assert_allclose(y.numpy(), np.full(3, np.e, np.float32), rtol=1e-6)


def test_autograd_grad_and_backward_take_nested_tensors():
    x = _nt(True)
    w = ember.tensor(2.0, dtype=ember.float64, requires_grad=True)
    gx, gw = ember.autograd.grad(x * x * w, [x, w], _nt(arrays=(A, 2 * B)), create_graph=True)
    _close(_parts(gx), [4 * A * A, 8 * B * B])
    assert gx.requires_grad and not gx.is_leaf
    np.testing.assert_allclose(gw.item(), (A ** 3).sum() + 2 * (B ** 3).sum())
    unused = ember.ones(1, requires_grad=True)
    got = ember.autograd.grad(x * 3, [unused, x], _nt(), allow_unused=True)
    assert got[0] is None
    _close(_parts(got[1]), [3 * A, 3 * B])
    zeros = ember.autograd.grad(x * 3, [unused], _nt(), materialize_grads=True)[0]
    np.testing.assert_array_equal(zeros.numpy(), [0.0])
    with pytest.raises(RuntimeError, match="index 0 appears to not have been used"):
        ember.autograd.grad(x * 3, [unused], _nt())
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        ember.autograd.grad(x * 3, x)
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\]"):
        ember.autograd.grad(x * 3, x, _nt(arrays=(A, A)))
    y = _nt(True)
    ember.autograd.backward([y * y], [_nt()], inputs=[y])
    _close(_parts(y.grad), [2 * A * A, 2 * B * B])


def _sgd_reference(steps, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                   maximize=False):
    out = []
    for p in (A.copy(), B.copy()):
        buf = None
        for i in range(steps):
            g = 2 * p * (i + 1) * (A if p.shape == A.shape else B)
            g = -g if maximize else g
            g = g + weight_decay * p
            if momentum:
                buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
                g = g + momentum * buf if nesterov else buf
            p = p - lr * g
        out.append(p)
    return out


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.1), dict(lr=0.05, momentum=0.9, dampening=0.2, weight_decay=0.01),
    dict(lr=0.1, momentum=0.5, nesterov=True, maximize=True)])
def test_sgd_steps_nested_parameters(kwargs):
    x = _nt(True)
    opt = ember.optim.SGD([x], **kwargs)
    for i in range(3):
        opt.zero_grad()
        (x * x * (i + 1)).backward(_nt())
        opt.step()
    _close(_parts(x), _sgd_reference(3, **kwargs))
    assert ("momentum_buffer" in opt.state[x]) == bool(kwargs.get("momentum"))
    opt.zero_grad(set_to_none=False)
    _close(_parts(x.grad), [np.zeros_like(A), np.zeros_like(B)])


def test_sgd_steps_nested_parameters_beside_dense_ones():
    kwargs = dict(lr=0.05, momentum=0.9, dampening=0.2, weight_decay=0.01)
    x, w = _nt(True), ember.tensor(W, requires_grad=True)
    opt = ember.optim.SGD([w, x], **kwargs)     # (one group: the dense one is stepped apart)
    for i in range(3):
        opt.zero_grad()
        (x * x * (i + 1)).backward(_nt())
        (w * w).sum().backward()
        opt.step()
    _close(_parts(x), _sgd_reference(3, **kwargs))
    v, buf = W.copy(), None
    for _ in range(3):
        g = 2 * v + 0.01 * v
        buf = g if buf is None else 0.9 * buf + 0.8 * g
        v = v - 0.05 * buf
    np.testing.assert_allclose(w.detach().numpy(), v, rtol=1e-10)
    assert sorted(opt.state_dict()["state"]) == [0, 1]
    assert opt.state[x]["momentum_buffer"].is_nested


@pytest.mark.parametrize("make, error, message", [
    (lambda x: ember.optim.Adam([x]), NotImplementedError, "'aten::lerp_.Scalar'"),
    (lambda x: ember.optim.AdamW([x], foreach=True), NotImplementedError,
     "'aten::_foreach_mul_.Scalar'"),
    (lambda x: ember.optim.SGD([x], lr=0.1, foreach=True), NotImplementedError,
     "'aten::_foreach_add_.List'"),
    (lambda x: ember.optim.SGD([x], lr=0.1, fused=True), NotImplementedError,
     "'aten::_fused_sgd_'"),
    (lambda x: ember.optim.RMSprop([x]), NotImplementedError, "'aten::addcmul_'"),
    (lambda x: ember.optim.Rprop([x]), NotImplementedError, "'aten::full_like'"),
    (lambda x: ember.optim.Adafactor([x]), RuntimeError, "doesn't support sizes"),
])
def test_other_optimizers_refuse_nested_parameters_as_torch(make, error, message):
    x = _nt(True)
    opt = make(x)
    (x * 2).backward(_nt())
    with pytest.raises(error, match=message):
        opt.step()
    _close(_parts(x), [A, B])           # (nothing stepped)
    with pytest.raises(NotImplementedError, match="'aten::full_like'"):
        ember.optim.Adagrad([x])


def test_as_nested_tensor_puts_every_component_on_the_graph():
    a = ember.tensor(A, requires_grad=True)
    b = ember.tensor(np.array([[-0.0, 1.0, 2.0]]))
    y = ember.nested.as_nested_tensor([a, b])
    parts = y.unbind()
    assert [t.requires_grad for t in parts] == [True, True] and not y.is_leaf
    assert np.signbit(parts[1].detach().numpy()).tolist() == [[True, False, False]]
    (parts[1] * 2).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros_like(A))
    assert b.grad is None


def test_nested_tensors_without_components():
    e = ember.nested.nested_tensor([], dtype=ember.float64)
    assert e.dtype == ember.float64 and e.softmax(-1).unbind() == ()
    padded = ember.nested.to_padded_tensor(e, 1.0, [2, 3])
    assert padded.shape == (0,) and padded.dtype == ember.float64
    for fn, error, message in (
            (lambda: e.unsqueeze(-1), IndexError, "Dimension specified as 0 but tensor has no"),
            (lambda: e.reshape(0, -1), RuntimeError, "empty nested tensor cannot be reshaped"),
            (lambda: e.chunk(2, -1), IndexError, "Dimension specified as 1 but tensor has no"),
            (lambda: F.scaled_dot_product_attention(e, e, e), RuntimeError,
             "query.dim: 1 key.dim: 1 and value.dim: 1"),
            (lambda: ember.cat([e, e], -1), RuntimeError, "doesn't support sizes"),
            (lambda: ember.cat([_nt(), e]), RuntimeError,
             r"zero-dimensional tensor \(at position 1\) cannot be concatenated"),
            (lambda: e.select(0, 0), IndexError, "only select when the NT is not empty")):
        with pytest.raises(error, match=message):
            fn()


def test_storage_queries_and_refused_sparse_methods():
    x = _nt()
    assert x.data_ptr() == x.unbind()[0].data_ptr()
    assert ember.nested.nested_tensor([]).data_ptr() == 0
    assert x.is_pinned() is False and x.is_shared() is False
    assert x.share_memory_() is x
    y = _nt(True) * 2
    assert y.detach_() is y and not y.requires_grad and y.is_leaf and y.grad_fn is None
    for name in ("dense_dim", "sparse_dim", "new_zeros"):
        with pytest.raises(NotImplementedError, match=f"'aten::{name}' with arguments"):
            getattr(x, name)() if name != "new_zeros" else x.new_zeros(2)
    with pytest.raises(RuntimeError, match="Unrecognized tensor type ID: NestedTensorCPU"):
        x.new(2)


def test_where_values_and_mha_without_bias():
    cond = ember.nested.nested_tensor([ember.tensor(A > 0), ember.tensor(B > 0)])
    _close(_parts(ember.where(cond, 0.5, _nt())), [np.where(A > 0, 0.5, A),
                                                    np.where(B > 0, 0.5, B)])
    for call, message in ((lambda: ember.where(cond, _nt(), 0.0), "other must be nested"),
                          (lambda: _nt().where(cond, _nt()), "self must not be nested"),
                          (lambda: ember.where(ember.ones(3, dtype=ember.bool), 0.0, _nt()),
                           "condition must be nested")):
        with pytest.raises(RuntimeError, match=message):
            call()
    x = _nt(True)
    v = x.values()
    np.testing.assert_array_equal(v.detach().numpy(), np.concatenate([A.ravel(), B.ravel()]))
    (v * ember.arange(18.0, dtype=ember.float64)).sum().backward()
    _close(_parts(x.grad), [np.arange(6.0).reshape(2, 3), np.arange(6.0, 18.0).reshape(4, 3)])
    mha = ember.nn.MultiheadAttention(4, 2, batch_first=True, bias=False).eval()
    q = ember.nested.nested_tensor([ember.ones(2, 4), ember.ones(3, 4)])
    with ember.no_grad(), pytest.raises(AssertionError, match="was not hit because $"):
        mha(q, q, q)
