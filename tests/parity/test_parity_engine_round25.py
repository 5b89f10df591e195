"""Round 25 engine against PyTorch: F.linear's weight gradient skips the TBackward0 node until
the graph is observed (RoutedOpNode), and what can be seen of that node stays PyTorch's: the
order leaves receive their gradients, hooks put on the t() node while backward runs, graphs
of gradients taken with create_graph=True, a backward run again after the node was found."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _both(fn):
    return fn(torch), fn(ember)


def _t_node(y):
    return next(n for n, _ in y.grad_fn.next_functions if n is not None
                and n.name() == "TBackward0")


def _tensor(lib, array, grad=True):
    return lib.tensor(np.asarray(array, dtype=np.float64), requires_grad=grad)


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((2, 4)), rng.standard_normal((3, 4)), rng.standard_normal(3),
            rng.standard_normal((5, 3)))


def test_leaves_receive_gradients_in_pytorchs_order():
    xa, wa, ba, va = _weights()

    def run(lib):
        order = []
        x, w, b, v = (_tensor(lib, a) for a in (xa, wa, ba, va))
        for name, t in (("x", x), ("w", w), ("b", b), ("v", v)):
            t.register_hook(lambda g, name=name: order.append(name))
            t.register_post_accumulate_grad_hook(lambda t, name=name: order.append(name + "+"))
        F = lib.nn.functional
        h = F.linear(x, w, b)
        (F.linear(h.relu(), v).sum() + F.linear(x * 2, w).sum()).backward()
        return order, [t.grad.numpy() for t in (x, w, b, v)]
    (want, want_grads), (got, got_grads) = _both(run)
    assert got == want
    for g, e in zip(got_grads, want_grads):
        np.testing.assert_allclose(g, e, rtol=1e-12)


@pytest.mark.parametrize("how", ["backward", "grad", "backward_inputs"])
def test_a_hook_put_on_the_t_node_while_backward_runs(how):
    xa, wa, ba, _ = _weights(1)

    def run(lib):
        x, w, b = (_tensor(lib, a) for a in (xa, wa, ba))
        y = lib.nn.functional.linear(x, w, b)
        log = []

        def pre(grads):
            _t_node(y).register_prehook(
                lambda g: (log.append(tuple(g[0].shape)), (g[0] * 3,))[1])
        y.grad_fn.register_prehook(pre)
        loss = (y * y).sum()
        if how == "grad":
            got = lib.autograd.grad(loss, [w, x])
        else:
            loss.backward(inputs=[w] if how == "backward_inputs" else None)
            got = (w.grad, x.grad) if how == "backward" else (w.grad,)
        return log, [g.detach().numpy() for g in got]
    (want_log, want), (got_log, got) = _both(run)
    assert got_log == want_log == [(4, 3)]
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-12)


def test_a_backward_run_again_after_the_t_node_was_found():
    xa, wa, ba, _ = _weights(2)

    def run(lib):
        x, w, b = (_tensor(lib, a) for a in (xa, wa, ba))
        y = lib.nn.functional.linear(x, w, b)
        loss = y.pow(2).sum()
        loss.backward(retain_graph=True)
        first = w.grad.clone()
        t = _t_node(y)
        names = [n.name() for n, _ in t.next_functions]
        seen = []
        t.register_hook(lambda gi, go: seen.append((tuple(gi[0].shape), tuple(go[0].shape))))
        w.grad = None
        loss.backward()
        return names, seen, first.numpy(), w.grad.numpy()
    want, got = _both(run)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-12)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-12)


def test_weight_gradient_graph_and_double_backward():
    xa, wa, ba, _ = _weights(3)

    def chain(fn, depth=5):
        if fn is None or depth == 0:
            return None
        return (fn.name(),) + tuple(chain(n, depth - 1) for n, _ in fn.next_functions)

    def run(lib):
        x, w, b = (_tensor(lib, a) for a in (xa, wa, ba))
        y = lib.nn.functional.linear(x.tanh(), w, b)
        (gw,) = lib.autograd.grad(y.pow(2).sum(), [w], create_graph=True)
        graph = chain(gw.grad_fn, 2)
        (gw * gw).sum().backward()
        return graph, gw.detach().numpy(), x.grad.numpy(), w.grad.numpy()
    want, got = _both(run)
    assert got[0] == want[0]
    for g, e in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, e, rtol=1e-10)


def test_a_hook_on_the_node_sees_the_transposed_weights_gradient():
    xa, wa, ba, _ = _weights(4)

    def run(lib):
        x, w, b = (_tensor(lib, a) for a in (xa, wa, ba))
        y = lib.nn.functional.linear(x, w, b)
        seen = []
        y.grad_fn.register_hook(lambda gi, go: seen.append(
            sorted(tuple(g.shape) for g in gi if g is not None)))
        y.sum().backward()
        return seen, w.grad.numpy()
    (want, want_w), (got, got_w) = _both(run)
    assert got == want == [[(2, 4), (3,), (4, 3)]]
    np.testing.assert_allclose(got_w, want_w, rtol=1e-12)
