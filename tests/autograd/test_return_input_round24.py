"""Round 24's graph plumbing, checked without PyTorch: ops that return their input itself
(``Op.returns_input_when``) and an op reading an input through ``t()`` (``Op.reads_transposed``:
F.linear's weight gets its TBackward0 node when the graph is first walked)."""

import numpy as np
import pytest

import ember
from ember.ops._recording import _NEXT_FUNCTIONS
from ember.ops._registry import REGISTRY
from ember.overrides import TorchFunctionMode

F = ember.nn.functional


# --- ops returning their input ----------------------------------------------------------------

def test_only_declaring_ops_take_the_early_test():
    unusual = {name for name, op in REGISTRY.items() if op.unusual_inputs}
    declared = {name for name, op in REGISTRY.items() if op.returns_input is not None}
    assert {"flatten", "conj", "conj_physical", "positive"} <= declared
    assert "add" not in unusual and "reshape" not in unusual and "mul" not in unusual
    assert unusual == declared | {name for name, op in REGISTRY.items() if op.seq_inputs}


@pytest.mark.parametrize("grad", [False, True])
def test_flatten_of_one_dim_is_the_input(grad):
    x = ember.ones(3, 4).requires_grad_(grad)
    for call in (lambda: x.flatten(1), lambda: ember.flatten(x, 0, 0), lambda: x.flatten(-1, 1)):
        y = call()
        assert y is x and y.grad_fn is None and y.is_leaf
    y = x.flatten()                     # two dims merged: a view
    assert y is not x and y.shape == (12,) and y._base is x
    assert (y.grad_fn.name() if grad else y.grad_fn) == ("ViewBackward0" if grad else None)
    scalar = ember.tensor(2.0)
    assert scalar.flatten() is not scalar and scalar.flatten().shape == (1,)


def test_returned_input_keeps_the_graph_of_a_non_leaf():
    w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = w * 2
    y = h.flatten().conj().positive()
    assert y is h and y.grad_fn.name() == "MulBackward0"
    (y * ember.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert w.grad.tolist() == [2.0, 20.0, 200.0]


def test_conj_of_real_and_complex():
    real = ember.tensor([1.0, -2.0])
    assert real.conj() is real and ember.conj_physical(real) is real
    z = ember.tensor([1 + 2j, 3 - 1j])
    assert z.conj() is not z and z.conj().tolist() == [1 - 2j, 3 + 1j]
    out = ember.zeros(2)
    assert ember.conj_physical(real, out=out) is out and out.tolist() == [1.0, -2.0]


def test_positive_refuses_bool_before_returning_anything():
    x = ember.tensor([1, 2])
    assert +x is x and x.positive() is x
    with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not supported"):
        +ember.tensor([True])


@pytest.mark.parametrize("args, error", [((2,), IndexError), ((-3, -3), IndexError),
                                         ((1, 0), RuntimeError)])
def test_flatten_errors_still_raise(args, error):
    with pytest.raises(error):
        ember.ones(2, 3).flatten(*args)


def test_a_function_mode_sees_the_call_and_gets_the_input():
    class Seen(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))
    x = ember.ones(3, 4)
    with Seen() as mode:
        y = x.flatten(1)
    assert y is x and mode.names == ["flatten"]


def test_meta_and_no_grad_calls_return_the_input():
    meta = ember.ones(3, 4, device="meta")
    assert meta.flatten(1) is meta
    x = ember.ones(3, requires_grad=True)
    with ember.no_grad():
        assert x.conj() is x
    with ember.inference_mode():
        assert x.flatten() is x


# --- linear's weight through t() --------------------------------------------------------------

def _linear_inputs(x_shape, dtype=ember.float64, out_features=5):
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal(x_shape), dtype=dtype, requires_grad=True)
    w = ember.tensor(rng.standard_normal((out_features, x_shape[-1])), dtype=dtype,
                     requires_grad=True)
    b = ember.tensor(rng.standard_normal(out_features), dtype=dtype, requires_grad=True)
    return x, w, b


def test_the_t_node_is_made_when_the_graph_is_walked():
    x, w, b = _linear_inputs((3, 4))
    y = F.linear(x, w, b)
    raw = _NEXT_FUNCTIONS.__get__(y.grad_fn)
    assert raw[2][0].name() == "torch::autograd::AccumulateGrad"     # nothing made yet
    first = y.grad_fn.next_functions                # PyTorch's (bias, input, t(weight))
    t_node = first[2][0]
    assert t_node.name() == "TBackward0" and t_node.next_functions[0][0].variable is w
    assert y.grad_fn.next_functions[2][0] is t_node                   # made once
    assert first[1][0].variable is x and first[0][0].variable is b


@pytest.mark.parametrize("x_shape", [(4,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_gradients_match_numpy(x_shape, bias):
    x, w, b = _linear_inputs(x_shape)
    b = b if bias else None
    y = F.linear(x, w, b)
    g = np.arange(1.0, y.numel() + 1).reshape(y.shape)
    y.backward(ember.tensor(g))
    xs, ws, gs = x.detach().numpy(), w.detach().numpy(), g
    np.testing.assert_allclose(x.grad.numpy(), gs @ ws, rtol=1e-12)
    rows, grads = xs.reshape(-1, xs.shape[-1]), gs.reshape(-1, ws.shape[0])
    np.testing.assert_allclose(w.grad.numpy(), grads.T @ rows, rtol=1e-12)
    assert w.grad.stride() == (4, 1)            # the t() of a transposed mm: row-major again
    if bias:
        np.testing.assert_allclose(b.grad.numpy(), grads.sum(0), rtol=1e-12)


def test_linear_gradcheck_and_gradgradcheck():
    for shape in ((4,), (3, 4), (2, 3, 4)):
        x, w, b = _linear_inputs(shape, out_features=2)
        assert ember.autograd.gradcheck(F.linear, (x, w, b))
        assert ember.autograd.gradgradcheck(F.linear, (x, w, b))


def test_vector_weight_and_complex_weight():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    v = ember.tensor([0.5, -1.0], requires_grad=True)
    F.linear(x, v).sum().backward()
    assert v.grad.tolist() == [4.0, 6.0] and x.grad.tolist() == [[0.5, -1.0], [0.5, -1.0]]
    z = ember.tensor([[1 + 1j, 2 - 1j]], requires_grad=True)
    wz = ember.tensor([[1j, 1.0], [2.0, -1j]], requires_grad=True)
    F.linear(z, wz).abs().pow(2).sum().backward()
    zs, ws = z.detach().numpy(), wz.detach().numpy()
    out = zs @ ws.T                             # d|out|^2 = 2 out, conjugated by the product
    np.testing.assert_allclose(wz.grad.numpy(), 2 * out.T @ zs.conj(), rtol=1e-6)
    np.testing.assert_allclose(z.grad.numpy(), 2 * out @ ws.conj(), rtol=1e-6)


def test_calling_the_node_directly_gives_the_gradient_of_weight_t():
    x, w, _ = _linear_inputs((3, 4))
    y = F.linear(x, w)
    gx, gwt = y.grad_fn(ember.ones(3, 5, dtype=ember.float64))      # MmBackward0's two
    assert gx.shape == (3, 4) and gwt.shape == (4, 5)
    np.testing.assert_allclose(gwt.detach().numpy(), x.detach().numpy().T @ np.ones((3, 5)))


def test_saved_tensor_hooks_retain_graph_and_weight_hooks():
    x, w, b = _linear_inputs((3, 4))
    packed = []
    with ember.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t,
                                                  lambda t: t):
        y = F.linear(x, w, b)
    seen = []
    w.register_hook(lambda g: seen.append(g.shape))
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert packed and seen == [(5, 4), (5, 4)]
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.ones((5, 3)) @ x.detach().numpy())


def test_forward_ad_vmap_and_jacrev_through_linear():
    x, w, b = _linear_inputs((3, 4))
    xs, ws = x.detach(), w.detach()
    tangent = ember.ones_like(ws)
    _, jvp = ember.func.jvp(lambda w_: F.linear(xs, w_, b.detach()), (ws,), (tangent,))
    np.testing.assert_allclose(jvp.numpy(), xs.numpy() @ np.ones((4, 5)), rtol=1e-12)
    jac = ember.func.jacrev(lambda w_: F.linear(xs, w_).sum(0))(ws)
    expected = np.einsum("ij,k->ijk", np.eye(5), xs.numpy().sum(0))
    np.testing.assert_allclose(jac.numpy(), expected, rtol=1e-12)
