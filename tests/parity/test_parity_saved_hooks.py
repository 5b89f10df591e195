"""Saved-tensor hooks and the autograd.graph helpers against PyTorch: which tensors of
one-input ops reach the pack hook (inputs or outputs), unpack counts per backward, the
gradients under save_on_cpu, multi-grad hooks, gradient edges, and error messages.

ember saves every tensor input of an op that saves inputs (``a * b`` packs both); PyTorch
saves only those the needed gradients use, so two-input ops are not compared here."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

UNARY = ["exp", "sin", "tanh", "sigmoid", "relu", "sqrt", "log", "abs", "neg", "square"]


def _pack_log(lib, op):
    log = []

    def pack(t):
        log.append(("pack", tuple(t.shape), t.grad_fn is not None))
        return t

    def unpack(t):
        log.append("unpack")
        return t
    x = lib.tensor([0.5, 1.5, 2.5], requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = getattr(lib, op)(x)
    y.sum().backward()
    return log, x.grad.tolist()


@pytest.mark.parametrize("op", UNARY)
def test_what_unary_ops_pack(op):
    ours, theirs = _pack_log(ember, op), _pack_log(torch, op)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


def test_save_on_cpu_training_step_matches():
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    grads = []
    for lib in (ember, torch):
        weight = lib.tensor(w, requires_grad=True)
        with lib.autograd.graph.save_on_cpu():
            loss = lib.nn.functional.gelu(lib.ones(2, 3) @ weight).pow(2).mean()
        loss.backward()
        grads.append(weight.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5)


def _multi_log(lib):
    a, b, c = (lib.ones(2, requires_grad=True) for _ in range(3))
    log = []
    graph = lib.autograd.graph
    with graph.register_multi_grad_hook(
            (a, b, c), lambda gs: log.append([None if g is None else g.tolist() for g in gs])):
        (a * 2 + b).sum().backward()
        (c * 4).sum().backward()
    with graph.register_multi_grad_hook((a, b), lambda g: log.append(g.tolist()), mode="any"):
        (a * 2 + b * 5).sum().backward()
    return log


def test_multi_grad_hooks_match():
    assert _multi_log(ember) == _multi_log(torch)


def _messages(lib):
    graph = lib.autograd.graph
    out = []
    for fn in (lambda: graph.get_gradient_edge(lib.ones(2)),
               lambda: graph.register_multi_grad_hook((), print, mode="some"),
               lambda: lib.autograd.Variable._execution_engine.queue_callback(print)):
        with pytest.raises(Exception) as info:
            fn()
        out.append((type(info.value).__name__, str(info.value)))
    x = lib.ones(2, requires_grad=True)
    with graph.saved_tensors_hooks(lambda t: t, lambda t: None):
        y = x.exp().sum()
    with pytest.raises(TypeError) as info:
        y.backward()
    out.append(str(info.value))
    return out


def test_error_messages_match():
    assert _messages(ember) == _messages(torch)
