"""Saved-tensor hooks (pack/unpack, save_on_cpu, disabling them) and the graph helpers of
ember.autograd.graph: gradient edges, multi-tensor gradient hooks, version bumps and the
engine's final callbacks."""

import threading

import numpy as np
import pytest

import ember
from ember.autograd.graph import (GradientEdge, disable_saved_tensors_hooks,
                                  get_gradient_edge, increment_version,
                                  register_multi_grad_hook, save_on_cpu, saved_tensors_hooks)
from ember.autograd.saved_hooks import ACTIVE


def _logging_hooks(log):
    def pack(t):
        log.append(("pack", tuple(t.shape), t.grad_fn is not None))
        return t.detach().clone()

    def unpack(p):
        log.append(("unpack", tuple(p.shape)))
        return p
    return pack, unpack


def test_hooks_take_saved_inputs_and_outputs_and_give_them_back():
    x = ember.tensor([0.5, 1.0, 2.0], requires_grad=True)
    log = []
    with saved_tensors_hooks(*_logging_hooks(log)):
        y = x.exp()                     # saves its output
        z = x.sin()                     # saves its input
    assert log == [("pack", (3,), True), ("pack", (3,), False)]
    log.clear()
    (y + z).sum().backward()
    assert sorted(log) == [("unpack", (3,)), ("unpack", (3,))]
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0, 2.0]) + np.cos([0.5, 1, 2]),
                               rtol=1e-6)


def test_packed_copies_are_what_backward_uses():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach() * 0 + 10, lambda p: p):
        y = (x * x).sum()               # d/dx = 2 x, evaluated at the packed 10s
    y.backward()
    assert x.grad.tolist() == [20.0, 20.0]


def test_hooks_free_the_originals():
    x = ember.ones(4, requires_grad=True)
    kept = []
    with saved_tensors_hooks(lambda t: kept.append(t.detach().numpy().copy()) or len(kept) - 1,
                             lambda i: ember.tensor(kept[i])):
        y = x.exp()
    node = y.grad_fn
    assert node._out[0] is None         # the node holds the packed index, not the array
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.e * np.ones(4), rtol=1e-6)


def test_graph_freed_after_backward_still_raises():
    x = ember.ones(2, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_no_version_check_on_packed_tensors():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t):
        y = (x * 1).exp()
    y.add_(1)                           # would fail without hooks; the packed copy is intact
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


def test_unpack_must_return_a_tensor():
    x = ember.ones(2, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: 3):
        y = x.exp().sum()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor but got result "
                                        "of type int"):
        y.backward()


def test_innermost_hooks_win_and_pack_runs_without_grad():
    x = ember.ones(2, requires_grad=True)
    seen = []
    with saved_tensors_hooks(lambda t: ("outer", t), lambda p: p[1]):
        with saved_tensors_hooks(lambda t: (seen.append(ember.is_grad_enabled()), t)[1],
                                 lambda t: t):
            y = x.exp().sum()
    assert seen == [False]
    y.backward()
    assert ACTIVE[0] == 0


def test_double_backward_through_unpacked_copies():
    x = ember.tensor([0.5, 1.5], dtype=ember.float64, requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t):
        y = (x * x * x).sum()
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    assert g.tolist() == [0.75, 6.75]
    assert gg.tolist() == [3.0, 9.0]


def test_custom_function_saved_tensors_are_packed():
    class Double(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, None)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            x, nothing = ctx.saved_tensors
            assert nothing is None
            return grad * x

    x = ember.tensor([3.0, 4.0], requires_grad=True)
    log = []
    with saved_tensors_hooks(*_logging_hooks(log)):
        y = Double.apply(x)
    assert log == [("pack", (2,), False)]
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 4.0]


def test_save_on_cpu_gives_the_same_gradients():
    torch_like = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.GELU(), ember.nn.Linear(8, 1))
    x = ember.randn(5, 4)
    torch_like(x).sum().backward()
    expected = [p.grad.clone() for p in torch_like.parameters()]
    torch_like.zero_grad()
    with save_on_cpu(pin_memory=False):
        out = torch_like(x).sum()
    out.backward()
    for p, g in zip(torch_like.parameters(), expected):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-6)


def test_disable_saved_tensors_hooks():
    with disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        with pytest.raises(RuntimeError, match="not now"):
            with disable_saved_tensors_hooks("not now"):
                pass


def test_hooks_are_per_thread():
    x = ember.ones(2, requires_grad=True)
    packed = []
    entered, done = threading.Event(), threading.Event()

    def other():
        entered.wait()
        x.exp()                         # records while the main thread has hooks on
        done.set()
    thread = threading.Thread(target=other)
    thread.start()
    with saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        entered.set()
        done.wait()
    thread.join()
    assert packed == []


# --- graph helpers ----------------------------------------------------------------------------

def test_multi_grad_hook_all_and_any():
    a, b, c = (ember.ones(2, requires_grad=True) for _ in range(3))
    log = []
    handle = register_multi_grad_hook(
        (a, b, c), lambda grads: log.append([None if g is None else g.tolist() for g in grads]))
    (a * 2 + b).sum().backward()
    (a * 3).sum().backward()
    assert log == [[[2.0, 2.0], [1.0, 1.0], None], [[3.0, 3.0], None, None]]
    handle.remove()
    (a * 3).sum().backward()
    assert len(log) == 2
    with register_multi_grad_hook((a, b), lambda g: log.append(g.tolist()), mode="any"):
        (a * 2 + b * 5).sum().backward()
    assert log[2:] == [[5.0, 5.0]]
    with pytest.raises(ValueError, match="Expects mode to be one of"):
        register_multi_grad_hook((a,), print, mode="x")


def test_gradient_edges():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    x = a * 2
    edge = get_gradient_edge(x)
    assert isinstance(edge, GradientEdge) and edge.node is x.grad_fn and edge.output_nr == 0
    assert get_gradient_edge(a).node.name() == "torch::autograd::AccumulateGrad"
    with pytest.raises(RuntimeError, match="does not require gradients"):
        get_gradient_edge(ember.ones(2))
    y = x.exp().sum()
    (gx, ga) = ember.autograd.grad(y, [edge, a])
    np.testing.assert_allclose(gx.numpy(), np.exp([2.0, 4.0]), rtol=1e-6)
    np.testing.assert_allclose(ga.numpy(), 2 * np.exp([2.0, 4.0]), rtol=1e-6)


def test_increment_version_makes_backward_notice():
    a = ember.ones(2, requires_grad=True)
    b = a * 1
    y = b.exp()
    increment_version(y)
    increment_version([ember.zeros(1)])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_queue_callback_runs_after_the_graph():
    a = ember.ones(2, requires_grad=True)
    engine = ember.autograd.Variable._execution_engine
    with pytest.raises(RuntimeError, match="only be installed during backward"):
        engine.queue_callback(print)
    seen = []
    a.register_hook(lambda g: engine.queue_callback(lambda: seen.append(a.grad.tolist())))
    (a * 2).sum().backward()
    assert seen == [[2.0, 2.0]]


def test_hooks_see_only_the_outputs_a_derivative_reads():
    x = ember.randn(1, 1, 4, 4, requires_grad=True)
    dtypes = []
    with saved_tensors_hooks(lambda t: dtypes.append(t.dtype) or t, lambda t: t):
        values = ember.nn.functional.max_pool2d(x, 2)
    # the input and the indices (PyTorch's), not the values
    assert dtypes == [ember.float32, ember.int64]
    values.relu_().sum().backward()
    assert x.grad.sum().item() == (values > 0).sum().item()


@pytest.mark.parametrize("make", [lambda x, c: x * c, lambda x, c: c * x, lambda x, c: x / c,
                                  lambda x, c: ember.nn.functional.linear(c, x)],
                         ids=["x*c", "c*x", "x/c", "linear"])
def test_hooks_see_only_the_inputs_a_needed_gradient_reads(make):
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    c = ember.tensor([[2.0, 4.0], [8.0, 16.0]])
    packed = []
    with saved_tensors_hooks(lambda t: packed.append(t) or t.detach().clone(), lambda t: t):
        y = make(x, c)
    assert len(packed) == 1 and packed[0] is c      # x's own value is not needed: not packed
    with ember.no_grad():
        x.mul_(10)                      # so changing x in place stays legal
    y.sum().backward()
    assert x.grad is not None and x.grad.abs().sum().item() > 0
