"""What a backward node shows of its saved values once backward freed them (the numbers
PyTorch saves as Scalars stay, pow's result only where it was kept), and backward passes run
inside an autocast region: their derivatives run under it, as PyTorch's do."""

import ml_dtypes
import numpy as np
import pytest

import ember

_FREED = "Trying to backward through the graph a second time"


def _leaf(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return ember.from_numpy(rng.standard_normal(shape).astype(np.float32)).requires_grad_()


def _missing(node, name):
    with pytest.raises(AttributeError, match=f"object has no attribute '{name}'"):
        getattr(node, name)


def _freed(node, name):
    with pytest.raises(RuntimeError, match=_FREED):
        getattr(node, name)


# --- saved values after backward ----------------------------------------------------------------

def test_pow_with_a_number_exponent_never_shows_a_result():
    x = _leaf(3)
    y = x ** 2.0
    node = y.grad_fn
    assert node.name() == "PowBackward0"
    assert node._saved_exponent == 2.0 and ember.equal(node._saved_self, x)
    for name in ("_saved_result", "_raw_saved_result", "_raw_saved_exponent"):
        _missing(node, name)
    y.sum().backward()
    assert node._saved_exponent == 2.0              # a Scalar outlives the freed tensors
    _freed(node, "_saved_self")
    for name in ("_saved_result", "_raw_saved_result", "_raw_saved_exponent"):
        _missing(node, name)
    with pytest.raises(RuntimeError, match="register_hooks on a saved tensor after it has been"):
        node._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    assert ember.allclose(x.grad, 2 * x.detach())


def test_pow_with_a_tensor_exponent_keeps_its_result_until_backward():
    x, e = _leaf(3), _leaf(3, seed=1)
    y = x.abs() ** e
    node = y.grad_fn
    assert node.name() == "PowBackward1" and ember.equal(node._saved_result, y)
    y.sum().backward(retain_graph=True)
    assert ember.equal(node._saved_result, y)       # retained: everything still readable
    y.sum().backward()
    for name in ("_saved_self", "_saved_exponent", "_saved_result"):
        _freed(node, name)
    assert type(node._raw_saved_result).__name__ == "SavedTensor"


def test_pow_of_a_number_keeps_the_number_and_frees_the_rest():
    e = _leaf(3)
    y = 2.0 ** e
    node = y.grad_fn
    assert node.name() == "PowBackward2"
    y.sum().backward()
    assert node._saved_self == 2.0
    _freed(node, "_saved_exponent")
    _freed(node, "_saved_result")
    _missing(node, "_raw_saved_self")
    assert ember.allclose(e.grad, y.detach() * np.log(2.0))


def test_released_nodes_answer_as_before_for_what_they_never_saved():
    x, e = _leaf(3), _leaf(3, seed=1).detach()
    exp, prod, scaled, clamped = x.exp(), x * e, x * 2.0, x.clamp(-0.5, 0.5)
    (exp.sum() + prod.sum() + scaled.sum() + clamped.sum()).backward()
    _missing(exp.grad_fn, "_saved_self")            # exp saves its result only
    _freed(exp.grad_fn, "_saved_result")
    _missing(prod.grad_fn, "_saved_result")
    assert prod.grad_fn._saved_self is None         # not needed by e's (absent) gradient
    _freed(prod.grad_fn, "_saved_other")
    _freed(scaled.grad_fn, "_saved_other")          # PyTorch saves the 2.0 as a tensor
    assert clamped.grad_fn._saved_min == -0.5 and clamped.grad_fn._saved_max == 0.5


# --- backward inside autocast ---------------------------------------------------------------------

def _bf16(a):
    """``a`` rounded to bfloat16, as float32."""
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def test_matrix_products_of_a_float32_graph_round_to_bfloat16_inside_autocast():
    x, w = _leaf(4, 6), _leaf(5, 6, seed=1)
    g = _leaf(4, 5, seed=2).detach()
    out = ember.nn.functional.linear(x, w)          # recorded in float32
    with ember.autocast("cpu", dtype=ember.bfloat16):
        out.backward(g)
    assert x.grad.dtype == w.grad.dtype == ember.float32
    gn, wn, xn = g.numpy(), w.detach().numpy(), x.detach().numpy()
    np.testing.assert_array_equal(x.grad.numpy(), _bf16(_bf16(gn) @ _bf16(wn)))
    np.testing.assert_array_equal(w.grad.numpy(), _bf16(_bf16(gn).T @ _bf16(xn)))
    x.grad = w.grad = None
    ember.nn.functional.linear(x, w).backward(g)    # outside: float32 products
    np.testing.assert_allclose(x.grad.numpy(), gn @ wn, rtol=1e-6)


def test_an_outer_product_gradient_is_a_matrix_product_too():
    v, w = _leaf(6), _leaf(6, 5, seed=1)
    g = _leaf(5, seed=2).detach()
    out = v @ w
    with ember.autocast("cpu", dtype=ember.bfloat16):
        (gw,) = ember.autograd.grad(out, w, g)
    expected = _bf16(_bf16(v.detach().numpy())[:, None] * _bf16(g.numpy())[None, :])
    np.testing.assert_array_equal(gw.numpy(), expected)
    assert gw.dtype == ember.float32


def test_hooks_and_custom_backwards_see_the_callers_autocast_state():
    seen = []

    class Double(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            seen.append(("backward", ember.is_autocast_enabled("cpu")))
            return grad * 2

    x = _leaf(3)
    y = Double.apply(x)
    y.register_hook(lambda g: seen.append(("hook", ember.is_autocast_enabled("cpu"))))
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert seen == [("hook", True), ("backward", True), ("hook", False), ("backward", False)]
    assert not ember.is_autocast_enabled("cpu")


def test_a_graph_recorded_under_autocast_backpropagates_the_same_inside_or_outside():
    F = ember.nn.functional
    x, w, b = _leaf(4, 6), _leaf(5, 6, seed=1), _leaf(5, seed=2)
    target = ember.tensor([0, 3, 1, 4])
    grads = []
    for inside in (False, True):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            loss = F.cross_entropy(F.linear(ember.relu(F.linear(x, w, b)), w[:, :5], b), target)
            if inside:
                loss.backward()
        if not inside:
            loss.backward()
        grads.append([p.grad.clone() for p in (x, w, b)])
        x.grad = w.grad = b.grad = None
    for outside, inside in zip(*grads):
        assert outside.dtype == ember.float32 and ember.equal(outside, inside)


@pytest.mark.parametrize("program", [
    lambda a, b: ember.cdist(a, b),                 # PyTorch's _cdist_backward kernel
    lambda a, b: ember.conv_tbc(a.reshape(4, 2, 3), b.reshape(5, 3, 2)[:3], b[0, :2], 1),
    lambda a, b: ember.nn.functional.layer_norm(a, (6,)) * b[:4],
    lambda a, b: ember.nn.functional.conv2d(a.reshape(1, 1, 4, 6), b[None, None, :3, :3]),
    lambda a, b: a[0] @ b.reshape(5, 6, 1),         # an mv in PyTorch (vector @ batch)
    lambda a, b: ember.inner(a[0], b[0]),           # a dot product
    lambda a, b: ember.nn.functional.scaled_dot_product_attention(     # the CPU flash kernel
        a.reshape(1, 2, 2, 6), b[:4].reshape(1, 2, 2, 6), b[1:].reshape(1, 2, 2, 6)),
], ids=["cdist", "conv_tbc", "layer_norm", "conv2d", "matmul 1-D @ 3-D", "inner", "sdpa"])
def test_backward_kernels_autocast_does_not_list_compute_as_outside(program):
    a, b = _leaf(4, 6), _leaf(5, 6, seed=1)
    out = program(a, b)
    g = ember.ones_like(out)
    outside = ember.autograd.grad(out, (a, b), g, retain_graph=True)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        inside = ember.autograd.grad(out, (a, b), g)
    for o, i in zip(outside, inside):
        assert i.dtype == ember.float32 and ember.equal(o, i)
