"""ember.func over nn modules (round 36): the fixes the transforms-over-modules fuzzer
(tests/parity/test_parity_func_modules_fuzz_round36.py) led to, checked without torch."""

import numpy as np
import pytest

import ember
from ember import nn
from ember.func import functional_call, jacfwd, jacrev, stack_module_state, vjp, vmap


def _cell(cls):
    m = getattr(nn, cls)(3, 2).double()
    with ember.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(ember.arange(p.numel(), dtype=ember.float64).reshape(p.shape).sin() + i)
    return m, {k: v.detach() for k, v in m.named_parameters()}


def _arr(t):
    return np.asarray(t.tolist())


@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("with_state", [False, True])
def test_vmapped_backward_of_a_cell_is_not_zero(cls, with_state):
    # the cell's backward read the batched cotangents' placeholder arrays: jacrev and vmap of
    # a vjp gave all-zero gradients for every parameter
    m, params = _cell(cls)
    x = ember.tensor([0.1, 0.2, -0.3], dtype=ember.float64)
    h = ember.tensor([0.4, -0.5], dtype=ember.float64)

    def f(p):
        args = (x, (h, h) if cls == "LSTMCell" else h) if with_state else (x,)
        out = functional_call(m, p, args)
        return out[0] if cls == "LSTMCell" else out
    rev, fwd = jacrev(f)(params), jacfwd(f)(params)
    assert list(rev) == list(params)
    for name in params:
        np.testing.assert_allclose(_arr(rev[name]), _arr(fwd[name]), rtol=1e-10, atol=1e-14)
    assert float(rev["weight_ih"].abs().sum()) > 1e-5
    _, back = vjp(f, params)
    rows = vmap(back)(ember.eye(2, dtype=ember.float64))[0]
    for i in range(2):
        one = back(ember.eye(2, dtype=ember.float64)[i])[0]
        for name in params:
            np.testing.assert_allclose(_arr(rows[name][i]), _arr(one[name]), rtol=1e-10,
                                       atol=1e-14)


def test_vmapped_backward_of_a_layer_matches_the_loop():
    m = nn.GRU(3, 2, num_layers=2, bidirectional=True).double()
    params = {k: v.detach() for k, v in m.named_parameters()}
    x = ember.arange(12, dtype=ember.float64).reshape(4, 3).cos()
    rev = jacrev(lambda p: functional_call(m, p, (x,))[0])(params)
    fwd = jacfwd(lambda p: functional_call(m, p, (x,))[0])(params)
    for name in params:
        np.testing.assert_allclose(_arr(rev[name]), _arr(fwd[name]), rtol=1e-10, atol=1e-14)


def _models(n=3):
    return [nn.Linear(3, 2) for _ in range(n)]


def test_stack_module_state_refuses_mixed_requires_grad():
    models = _models()
    models[1].weight.requires_grad_(False)
    with pytest.raises(RuntimeError, match=r"^Expected weight from each model to have the same "
                                           r"\.requires_grad$"):
        stack_module_state(models)
    for m in models:
        m.weight.requires_grad_(False)
    params, buffers = stack_module_state(models)
    assert not params["weight"].requires_grad and params["bias"].requires_grad
    assert params["bias"].is_leaf and params["weight"].shape == (3, 2, 3) and buffers == {}


def test_stack_module_state_takes_a_sequence():
    with pytest.raises(TypeError, match="has no len"):
        stack_module_state(iter(_models()))
    params, _ = stack_module_state(tuple(_models(2)))
    assert list(params) == ["weight", "bias"] and params["bias"].shape == (2, 2)


def test_batch_norm_checks_sizes_before_dtypes():
    x = ember.ones(4, 3, dtype=ember.float64)
    w, b = ember.ones(3, dtype=ember.float64), ember.zeros(3, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="^bias should contain 3 elements not 2$"):
        ember.nn.functional.batch_norm(x, b, w, w, ember.zeros(2))
    with pytest.raises(RuntimeError, match="^running_mean should contain 3 elements not 2$"):
        ember.nn.functional.batch_norm(x, ember.zeros(2), w, training=True)
    with pytest.raises(RuntimeError, match="^expected scalar type Double but found Float$"):
        ember.nn.functional.batch_norm(x, b, w, w, ember.zeros(3))
    with pytest.raises(RuntimeError, match="^running_var must be defined in evaluation mode$"):
        ember.batch_norm(x, None, None, b, None, False, 0.1, 1e-5, False)


@pytest.mark.parametrize("cls,op", [("LSTMCell", "lstm_cell"), ("GRUCell", "gru_cell"),
                                    ("RNNCell", "rnn_tanh_cell")])
def test_cell_refuses_a_bias_of_another_dtype_and_a_missing_weight(cls, op):
    m, _ = _cell(cls)
    x = ember.ones(3, dtype=ember.float64)
    n = m.weight_hh.shape[0]
    for name in ("bias_ih", "bias_hh"):
        with pytest.raises(RuntimeError, match="^self and mat2 must have the same dtype, but got "
                                               "Float and Double"):
            functional_call(m, {name: ember.zeros(n)}, (x,))
    for name, arg, pos in (("weight_ih", "w_ih", 3), ("weight_hh", "w_hh", 4)):
        with pytest.raises(TypeError, match=rf"^{op}\(\): argument '{arg}' \(position {pos}\) "
                                            rf"must be Tensor, not NoneType"):
            functional_call(m, {name: None}, (x,))
    out = functional_call(m, {"bias_ih": None}, (x,))
    assert (out[0] if cls == "LSTMCell" else out).shape == (2,)


def test_autograd_refuses_an_input_that_is_no_tensor():
    x = ember.ones(2, requires_grad=True)
    y = (x * 2).sum()
    for inputs in ([x, None], (x, 3)):
        with pytest.raises(RuntimeError, match="^all inputs have to be Tensors or GradientEdges, "
                                               f"but got {type(inputs[1]).__name__}$"):
            ember.autograd.grad(y, inputs, retain_graph=True, allow_unused=True)
    with pytest.raises(RuntimeError, match="but got NoneType$"):
        y.backward(inputs=[x, None])
    assert x.grad is None
