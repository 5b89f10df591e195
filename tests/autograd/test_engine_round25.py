"""Round 25 engine: linear's weight gradient travels its raw edge until someone observes the
TBackward0 node PyTorch's graph has there (RoutedOpNode), routing mid-backward cannot corrupt
the run, and the sole-reference test that lets a leaf adopt its gradient's array holds when
the interpreter's reference counts change after it was calibrated."""

import sys
import weakref

import numpy as np
import pytest

import ember
from ember.autograd import engine
from ember.autograd.graph import Node, grad_accumulator

F = ember.nn.functional


def _linear_case(x_shape=(2, 4), w_shape=(3, 4), bias=True, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[0]) if bias else None
    return x, w, b


def _reference_grads(x, w, b, gy):
    """NumPy gradients of sum(gy * (x @ w.T + b)) for a 2-D weight."""
    x2 = x.reshape(-1, x.shape[-1])
    g2 = gy.reshape(-1, w.shape[0])
    gx = (g2 @ w).reshape(x.shape)
    gw = g2.T @ x2
    gb = g2.sum(0) if b is not None else None
    return gx, gw, gb


def _t_node(y):
    node = y.grad_fn                # (under the view of a batch's result)
    if node.name() not in ("AddmmBackward0", "MmBackward0"):
        node = node.next_functions[0][0]
    return next(n for n, _ in node.next_functions if n is not None
                and n.name() == "TBackward0")


@pytest.mark.parametrize("x_shape", [(2, 4), (4,), (2, 3, 4)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("inspect_first", [False, True])
def test_linear_gradients_raw_and_routed(x_shape, bias, inspect_first):
    xa, wa, ba = _linear_case(x_shape, bias=bias)
    x = ember.tensor(xa, requires_grad=True)
    w = ember.tensor(wa, requires_grad=True)
    b = ember.tensor(ba, requires_grad=True) if bias else None
    y = F.linear(x, w, b)
    if inspect_first:
        assert _t_node(y).name() == "TBackward0"
    gy = np.arange(y.numel(), dtype=np.float64).reshape(y.shape) / 7
    y.backward(ember.tensor(gy))
    gx, gw, gb = _reference_grads(xa, wa, ba, gy)
    np.testing.assert_allclose(x.grad.numpy(), gx)
    np.testing.assert_allclose(w.grad.numpy(), gw)
    if bias:
        np.testing.assert_allclose(b.grad.numpy(), gb)
    assert w.grad.shape == w.shape and w.grad.stride() == (4, 1)


def test_a_backward_nobody_inspected_walks_the_raw_edge_and_adopts_the_product():
    w = ember.ones(3, 4, requires_grad=True)
    y = F.linear(ember.ones(2, 4), w)
    y.sum().backward()
    raw = Node._edges.__get__(y.grad_fn)            # the engine did not route the node
    assert raw[1][0] is grad_accumulator(w)
    assert w.grad._data.flags.owndata and w.grad._data.base is None    # not copied
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 4), 2.0))
    # inspected afterwards, the graph is PyTorch's: the weight behind a TBackward0 node
    t = _t_node(y)
    assert t.next_functions == ((grad_accumulator(w), 0),)


def test_vector_weight():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    w = ember.tensor([0.5, -1.0], requires_grad=True)
    F.linear(x, w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [4.0, 6.0])
    np.testing.assert_allclose(x.grad.numpy(), [[0.5, -1.0], [0.5, -1.0]])


def test_leaves_run_in_the_order_the_t_node_gives():
    # PyTorch: bias and input (fed by addmm directly) before the weight (behind TBackward0)
    order = []
    x = ember.ones(2, 4, requires_grad=True)
    w = ember.ones(3, 4, requires_grad=True)
    b = ember.ones(3, requires_grad=True)
    for name, t in (("x", x), ("w", w), ("b", b)):
        t.register_hook(lambda g, name=name: order.append(name))
        t.register_post_accumulate_grad_hook(lambda t, name=name: order.append(name + "+"))
    F.linear(x, w, b).sum().backward()
    assert order == ["b", "b+", "x", "x+", "w", "w+"]


def test_a_shared_weight_gets_both_gradients():
    w = ember.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    x = ember.ones(2, 4, dtype=ember.float64)
    h = F.linear(x, w)                              # (2, 3)
    z = F.linear(x * 2, w)
    (h * z).sum().backward()
    hz = (np.ones((2, 4)) @ w.detach().numpy().T)
    want = (2 * hz).T @ np.ones((2, 4)) + hz.T @ (2 * np.ones((2, 4)))
    np.testing.assert_allclose(w.grad.numpy(), want)


# --- observing the t() node routes the node ---------------------------------------------------

def test_a_hook_on_the_node_sees_the_gradient_of_the_transposed_weight():
    w = ember.ones(3, 4, requires_grad=True)
    y = F.linear(ember.ones(2, 4), w)
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append(tuple(gi[1].shape)))
    y.sum().backward()
    assert seen == [(4, 3)]
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 4), 2.0))


def test_calling_the_node_returns_the_gradient_of_the_transposed_weight():
    w = ember.ones(3, 4, requires_grad=True)
    y = F.linear(ember.ones(2, 4), w)
    gx, gwt = y.grad_fn(ember.ones(2, 3))[:2]
    assert gwt.shape == (4, 3)
    np.testing.assert_allclose(gwt.numpy(), np.full((4, 3), 2.0))


def _doubling_t_hook(y, log):
    """A pre-hook for y's node that, while backward runs, finds the t() node (routing the
    node) and doubles the gradient passing through it."""
    def pre(grads):
        t = _t_node(y)
        t.register_prehook(lambda g: (log.append(tuple(g[0].shape)), (g[0] * 2,))[1])
    return pre


@pytest.mark.parametrize("how", ["backward", "grad", "backward_inputs"])
def test_routing_while_backward_runs_before_the_node_ran(how):
    x = ember.ones(2, 4, requires_grad=True)
    w = ember.ones(3, 4, requires_grad=True)
    y = F.linear(x, w)
    log = []
    y.grad_fn.register_prehook(_doubling_t_hook(y, log))
    if how == "grad":
        (gw,) = ember.autograd.grad(y.sum(), [w])
    else:
        y.sum().backward(inputs=[w] if how == "backward_inputs" else None)
        gw = w.grad
    assert log == [(4, 3)]                          # the t() node ran, in this run
    np.testing.assert_allclose(gw.numpy(), np.full((3, 4), 4.0))
    if how == "backward":
        np.testing.assert_allclose(x.grad.numpy(), np.full((2, 4), 3.0))


def test_a_hook_put_on_the_node_by_its_own_pre_hook():
    w = ember.ones(3, 4, requires_grad=True)
    b = ember.ones(3, requires_grad=True)
    y = F.linear(ember.ones(2, 4), w, b)
    seen = []
    y.grad_fn.register_prehook(lambda go: y.grad_fn.register_hook(
        lambda gi, go: seen.append(tuple(gi[2].shape))) and None)
    (y * 3).sum().backward()
    assert seen == [(4, 3)]
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 4), 6.0))
    np.testing.assert_allclose(b.grad.numpy(), np.full(3, 6.0))


def test_routing_after_the_node_ran_keeps_its_raw_edges_for_that_run():
    x = ember.ones(2, 4, requires_grad=True)
    w = ember.ones(3, 4, requires_grad=True)
    y = F.linear(x, w)
    log = []
    x.register_hook(lambda g: _doubling_t_hook(y, log)(None))     # x's leaf runs after
    y.sum().backward(retain_graph=True)
    assert log == []                                # routed too late for this run
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 4), 2.0))
    w.grad = None
    y.sum().backward()                              # the next run goes through the t() node
    assert log == [(4, 3)] * 2                      # (its pre-hook, and the one added now)
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 4), 8.0))


def test_double_backward_through_the_weight_gradient():
    xa = np.arange(8.0).reshape(2, 4) / 3
    x = ember.tensor(xa, requires_grad=True)
    w = ember.tensor(np.ones((3, 4)), requires_grad=True)
    (gw,) = ember.autograd.grad(F.linear(x, w).sum(), [w], create_graph=True)
    assert gw.grad_fn.name() == "TBackward0"
    assert gw.grad_fn.next_functions[0][0].name() == "TBackward0"
    (gw ** 2).sum().backward()
    # gw[o, i] = sum_n x[n, i]: d/dx[n, i] of sum gw**2 = 2 * 3 * sum_n x[n, i]
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(6 * xa.sum(0), (2, 4)))


# --- the sole-reference calibration -----------------------------------------------------------

class _ReturnsHeld(ember.autograd.Function):
    """A Function whose backward returns a gradient the caller holds (``HELD[0]``)."""

    HELD = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return _ReturnsHeld.HELD[0]


def _shares(a, b):
    return np.shares_memory(a._data, b._data)


def _reads_locals(frame, event, arg):
    frame.f_locals             # (a tracer that reads them makes each frame hold its locals)


def test_a_gradient_held_elsewhere_is_not_adopted_after_the_counts_drop():
    # calibrated while every frame holds one more reference to each of its locals (as while
    # torch dynamo's frame hook is installed), then counted without
    saved = list(engine._SOLE_REFS)
    engine._SOLE_REFS.clear()
    previous = sys.gettrace()
    sys.settrace(_reads_locals)
    try:
        a = ember.ones(3, requires_grad=True)
        (a * 2).sum().backward()
    finally:
        sys.settrace(previous)
    assert engine._SOLE_REFS
    try:
        held = ember.ones(3)
        _ReturnsHeld.HELD[:] = [held]
        x = ember.ones(3, requires_grad=True)
        _ReturnsHeld.apply(x).sum().backward()
        assert not _shares(x.grad, held)
        held.add_(1.0)                              # the .grad is not the caller's tensor
        np.testing.assert_allclose(x.grad.numpy(), np.ones(3))
        # and a gradient nobody else holds is still adopted, not copied
        y = ember.ones(3, requires_grad=True)
        _ReturnsFresh.apply(y).sum().backward()
        assert _ReturnsFresh.MADE[0]() is y.grad._data
    finally:
        _ReturnsHeld.HELD.clear()
        engine._SOLE_REFS[:] = saved


class _ReturnsFresh(ember.autograd.Function):
    """A Function whose backward returns a new gradient, its array watched (``MADE``)."""

    MADE = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        fresh = grad * 3
        _ReturnsFresh.MADE[:] = [weakref.ref(fresh._data)]
        return fresh


def test_sole_gradients_are_adopted_while_frames_hold_their_locals():
    saved = list(engine._SOLE_REFS)
    engine._SOLE_REFS.clear()
    a = ember.ones(2, requires_grad=True)
    (a * 2).sum().backward()                        # calibrated without
    assert engine._SOLE_REFS
    previous = sys.gettrace()
    sys.settrace(_reads_locals)
    try:
        y = ember.ones(3, requires_grad=True)
        _ReturnsFresh.apply(y).sum().backward()
        held = ember.ones(3)
        _ReturnsHeld.HELD[:] = [held]
        x = ember.ones(3, requires_grad=True)
        _ReturnsHeld.apply(x).sum().backward()
    finally:
        sys.settrace(previous)
        _ReturnsHeld.HELD.clear()
        engine._SOLE_REFS[:] = saved
    assert _ReturnsFresh.MADE[0]() is y.grad._data          # adopted, not copied
    np.testing.assert_allclose(y.grad.numpy(), np.full(3, 3.0))
    assert not _shares(x.grad, held)
