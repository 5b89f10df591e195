"""forward_ad tangents of ops whose forward formula reads a primal that requires grad (NOTE
[Zero-tangent terms]): they require grad as PyTorch's do, and their gradients have closed
forms."""

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fw

X = np.array([[0.5, -1.0, 2.0], [1.5, -0.25, 0.75]])
Y = np.array([[1.2, 0.8, 1.5], [0.6, 2.0, 1.1]])
T = np.array([[1.0, 2.0, -1.0], [0.5, -3.0, 4.0]])
W = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]])


def _tangent(fn, x_grad=True, y_grad=False):
    x = ember.tensor(X, requires_grad=x_grad)
    y = ember.tensor(Y, requires_grad=y_grad)
    with fw.dual_level():
        tangent = fw.unpack_dual(fn(fw.make_dual(x, ember.tensor(T)), y)).tangent
    return tangent, x, y


@pytest.mark.parametrize("fn,expected", [
    (lambda x, y: x * 2.0, 2 * T),
    (lambda x, y: x * 2, 2 * T),
    (lambda x, y: x / 4.0, T / 4),
    (lambda x, y: x * y, T * Y),
    (lambda x, y: y * x, T * Y),
    (lambda x, y: x / y, T / Y),
    (lambda x, y: ember.addcmul(y, x, y, value=0.5), 0.5 * T * Y),
], ids=["mul_float", "mul_int", "div_float", "mul_tensor", "rmul_tensor", "div_tensor",
        "addcmul"])
def test_other_operands_terms_link_the_primal_with_zero_gradient(fn, expected):
    tangent, x, _ = _tangent(fn)
    np.testing.assert_allclose(tangent.detach().numpy(), expected)
    assert tangent.requires_grad
    assert type(tangent.grad_fn).__name__ == "AddBackward0"
    (g,) = ember.autograd.grad(tangent.sum(), x)
    np.testing.assert_array_equal(g.numpy(), np.zeros_like(X))


def test_matmul_tangent_links_the_primal_and_differentiates_by_the_weight():
    x = ember.tensor(X, requires_grad=True)
    w = ember.tensor(W, requires_grad=True)
    with fw.dual_level():
        tangent = fw.unpack_dual(fw.make_dual(x, ember.tensor(T)) @ w).tangent
    np.testing.assert_allclose(tangent.detach().numpy(), T @ W)
    gx, gw = ember.autograd.grad(tangent.sum(), (x, w))
    np.testing.assert_array_equal(gx.numpy(), np.zeros_like(X))
    np.testing.assert_allclose(gw.numpy(), T.T @ np.ones((2, 2)))


def test_backward_accumulates_zeros_into_the_primal():
    tangent, x, _ = _tangent(lambda x, y: x * 2.0)
    tangent.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros_like(X))


def test_tensor_operand_requiring_grad_still_gets_its_gradient():
    tangent, x, y = _tangent(lambda x, y: x * y, y_grad=True)
    gx, gy = ember.autograd.grad(tangent.sum(), (x, y))
    np.testing.assert_array_equal(gx.numpy(), np.zeros_like(X))
    np.testing.assert_allclose(gy.numpy(), T)


@pytest.mark.parametrize("fn,expected,grad", [
    (lambda x, y: x.sin(), np.cos(X) * T, -np.sin(X) * T),
    (lambda x, y: x.exp(), np.exp(X) * T, np.exp(X) * T),
    (lambda x, y: x ** 2, 2 * X * T, 2 * T),
    (lambda x, y: x * x, 2 * X * T, 2 * T),
    (lambda x, y: (x * 3.0).sin(), 3 * np.cos(3 * X) * T, -9 * np.sin(3 * X) * T),
], ids=["sin", "exp", "pow2", "mul_self", "mul_then_sin"])
def test_double_backward_through_the_tangent(fn, expected, grad):
    tangent, x, _ = _tangent(fn)
    np.testing.assert_allclose(tangent.detach().numpy(), expected, rtol=1e-12)
    (g,) = ember.autograd.grad(tangent.sum(), x)
    np.testing.assert_allclose(g.numpy(), grad, rtol=1e-12)


@pytest.mark.parametrize("fn", [
    lambda x, y: x + y,
    lambda x, y: x - 1.0,
    lambda x, y: 2.0 - x,
    lambda x, y: x.sum(),
    lambda x, y: x.clamp(-0.5, 0.5),
    lambda x, y: x.lerp(y, 0.3),
    lambda x, y: x.masked_fill(y > 1, 0.0),
    lambda x, y: ember.where(y > 1, x, y),
    lambda x, y: ember.maximum(x, y),
    lambda x, y: ember.cat([x, y]),
], ids=["add", "sub", "rsub", "sum", "clamp", "lerp_scalar", "masked_fill", "where", "maximum",
        "cat"])
def test_formulas_reading_no_primal_give_tangents_without_grad(fn):
    tangent, _, _ = _tangent(fn)
    assert not tangent.requires_grad and tangent.grad_fn is None


def test_no_grad_mode_and_plain_primals_record_nothing():
    with ember.no_grad():
        tangent, _, _ = _tangent(lambda x, y: x * y)
    assert not tangent.requires_grad
    tangent, _, _ = _tangent(lambda x, y: x * y, x_grad=False)
    assert not tangent.requires_grad


def test_layer_norm_tangent_gradient_is_zero_for_its_sum():
    """A layer norm's outputs sum to zero along the normalized dim, so do their tangents."""
    tangent, x, _ = _tangent(lambda x, y: ember.nn.functional.layer_norm(x, (3,)))
    np.testing.assert_allclose(tangent.detach().numpy().sum(1), 0.0, atol=1e-12)
    (g,) = ember.autograd.grad(tangent.sum(), x)
    np.testing.assert_allclose(g.numpy(), 0.0, atol=1e-12)


def test_linearize_jvp_fn_of_a_random_function_draws_anew_per_call():
    """PyTorch's jvp_fn replays its traced graph, dropout included: each call draws a new
    mask (and moves the default generator); a function without random ops reuses its trace."""
    x = ember.ones(64, dtype=ember.float64)
    ones = ember.ones(64, dtype=ember.float64)
    ember.manual_seed(0)
    _, jvp_fn = ember.func.linearize(
        lambda v: ember.nn.functional.dropout(v, 0.5, training=True), x)
    first, second = jvp_fn(ones).numpy(), jvp_fn(ones).numpy()
    assert set(np.unique(first)) <= {0.0, 2.0} and set(np.unique(second)) <= {0.0, 2.0}
    assert not np.array_equal(first, second)
    _, jvp_fn = ember.func.linearize(lambda v: v.sin() * 2, x)
    state = ember.get_rng_state()
    np.testing.assert_allclose(jvp_fn(ones).numpy(), 2 * np.cos(np.ones(64)))
    assert ember.equal(state, ember.get_rng_state())


def test_zero_terms_found_once_per_signature(monkeypatch):
    """What the op's second run finds is kept per signature (dtypes, shapes, which operands
    require grad): a later call with other values, or another number, links the same primals
    without running the op again; another signature runs it."""
    import ember.autograd._forward_zero_terms as zero_terms
    runs = []
    found = zero_terms._terms_read

    def counted(op, *args):
        runs.append(op.name)
        return found(op, *args)
    monkeypatch.setattr(zero_terms, "_terms_read", counted)
    monkeypatch.setattr(zero_terms, "_READS", {})
    w = ember.tensor(W, requires_grad=True)
    b = ember.tensor([0.5, -1.0], dtype=ember.float64, requires_grad=True)
    for scale, values in ((2.0, X), (3.0, np.zeros_like(X)), (-1.5, X.round())):
        x = ember.tensor(values, requires_grad=True)
        with fw.dual_level():
            d = fw.make_dual(x, ember.tensor(T))
            tangents = [fw.unpack_dual(d * scale).tangent,
                        fw.unpack_dual(ember.nn.functional.linear(d, w.t(), b)).tangent]
        np.testing.assert_allclose(tangents[0].detach().numpy(), scale * T)
        np.testing.assert_allclose(tangents[1].detach().numpy(), T @ W)
        gx, gw, gb = ember.autograd.grad(tangents[0].sum() + tangents[1].sum(), (x, w, b),
                                         allow_unused=True)
        np.testing.assert_array_equal(gx.numpy(), np.zeros_like(X))
        np.testing.assert_allclose(gw.numpy(), T.T @ np.ones((2, 2)))
        assert gb is None
    assert sorted(runs) == ["mul", "nn.functional.linear"]
    x = ember.tensor(X[:1], requires_grad=True)         # another shape: runs again
    with fw.dual_level():
        tangent = fw.unpack_dual(fw.make_dual(x, ember.tensor(T[:1])) * 2.0).tangent
    assert tangent.requires_grad and len(runs) == 3


def test_zero_terms_signature_refuses_tensor_parameters():
    """A parameter holding a tensor (index_put's indices) keeps the op from the cache: its
    values are not in the key, and the key would hold it alive."""
    from ember.autograd._forward_zero_terms import _signature
    from ember.ops._registry import REGISTRY
    op = REGISTRY["mul"]
    x = ember.tensor(X, requires_grad=True)
    assert _signature(op, [x, 2.0], None, (), [0], [1], {0: {0}}) is not None
    assert _signature(op, [x, 2.0], None, ((ember.tensor([0]),),), [0], [1], {0: {0}}) is None
    assert _signature(op, [x, 2.0], None, ([1, 2],), [0], [1], {0: {0}}) is None
    assert _signature(op, [x, 2.0], None, (), [0], [1], {0: {0}}) == \
        _signature(op, [x, 5.0], None, (), [0], [1], {0: {0}})


@pytest.mark.parametrize("draws", [False, True])
def test_linearize_sees_a_draw_from_a_gpu_generator(monkeypatch, draws):
    """A GPU kernel's draw moves its generator's offset, not the CPU stream: jvp_fn traces
    the function anew at each call where the traced run moved it, and only there."""
    from ember.cuda import random as cuda_random
    monkeypatch.setattr(cuda_random, "_GENERATORS", {})
    gen = cuda_random.default_generator(0)
    runs = []

    def f(v):
        runs.append(1)
        if draws:
            gen._offset += 4        # (what dropout's kernel does on a GPU)
        return v * 2
    x = ember.ones(3, dtype=ember.float64)
    _, jvp_fn = ember.func.linearize(f, x)
    traced = len(runs)
    for _ in range(2):
        np.testing.assert_allclose(jvp_fn(ember.ones_like(x)).numpy(), 2.0)
    assert len(runs) - traced == (2 if draws else 0)
