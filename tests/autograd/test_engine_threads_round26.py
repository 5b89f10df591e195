"""Backward passes while other threads observe the graph (linear's TBackward0 nodes are made
when the graph is observed: next_functions, a hook) or run backwards of their own over shared
leaves: gradients equal a single-thread run's."""

import sys
import threading
import time

import numpy as np
import pytest

import ember as torch
import ember.nn.functional as F


@pytest.fixture(autouse=True)
def _switch_often():
    """Threads switch every microsecond, so that races show within a short test."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _build(seed, dims):
    """Input, weights and biases (float64) of a stack of linear layers."""
    rng = np.random.default_rng(seed)
    ws = [torch.tensor(rng.standard_normal((dims[i + 1], dims[i])), requires_grad=True)
          for i in range(len(dims) - 1)]
    bs = [torch.tensor(rng.standard_normal(dims[i + 1]), requires_grad=True)
          for i in range(len(dims) - 1)]
    x = torch.tensor(rng.standard_normal((3, dims[0])), requires_grad=True)
    return [x, *ws, *bs]


def _loss(x, ws, bs):
    h = x
    for w, b in zip(ws, bs):
        h = F.linear(h, w, b).tanh()
    weights = torch.arange(1, h.numel() + 1, dtype=h.dtype).reshape(h.shape)
    return (h * weights).sum()


def _split(leaves):
    n = (len(leaves) - 1) // 2
    return leaves[0], leaves[1:1 + n], leaves[1 + n:]


def _reference(seed, dims):
    leaves = _build(seed, dims)
    _loss(*_split(leaves)).backward()
    return [t.grad.numpy().copy() for t in leaves]


def _linear_nodes(loss):
    """The graph's linear nodes, read without routing them (raw edges)."""
    out, stack, seen = [], [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__ == "AddmmBackward0":
            out.append(node)
        stack.extend(nxt for nxt, _ in node._edges)
    return out


def _yield(frame, event, arg):
    """A profile function that lets another thread run."""
    if event == "call":
        time.sleep(0)


def _assert_grads(leaves, expected):
    for t, e in zip(leaves, expected):
        np.testing.assert_allclose(t.grad.numpy(), e, rtol=1e-12, atol=1e-12)


class _Observer:
    """A thread that does ``act(node)`` when asked, while the asking thread waits."""

    def __init__(self, act):
        self.act = act
        self.asked = threading.Event()
        self.done = threading.Event()
        self.node = None
        self.errors = []
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            self.asked.wait()
            self.asked.clear()
            if self.stop:
                return
            try:
                self.act(self.node)
            except Exception as e:          # (reported by the test)
                self.errors.append(e)
            self.done.set()

    def ask(self, node, timeout=5):
        """Have the thread act on ``node``; wait until it has (at most ``timeout`` seconds:
        it may be waiting for this thread)."""
        self.node = node
        self.done.clear()
        self.asked.set()
        self.done.wait(timeout)

    def close(self):
        self.stop = True
        self.asked.set()
        self.thread.join(5)


def _backward_observed_on_return(loss, nodes, observer):
    """``loss.backward()``, with ``observer`` acting on each linear node as soon as the node's
    backward function has returned (before the engine passes its gradients on)."""
    targets = set(nodes)

    def profile(frame, event, arg):
        if event == "return" and frame.f_code.co_name == "apply" \
                and frame.f_back is not None and frame.f_back.f_code.co_name != "apply":
            node = frame.f_locals.get("self")
            if node in targets:
                targets.discard(node)
                observer.ask(node)
    sys.setprofile(profile)
    try:
        loss.backward()
    finally:
        sys.setprofile(None)


@pytest.mark.parametrize("dims", [(8, 8, 8, 8), (5, 7, 4, 6)])
@pytest.mark.parametrize("how", ["next_functions", "register_hook"])
def test_node_observed_by_another_thread_right_after_it_ran(dims, how):
    calls = []

    def act(node):
        if how == "next_functions":
            assert len(node.next_functions) == 3
        else:
            node.register_hook(lambda gi, go: calls.append(1))
    observer = _Observer(act)
    try:
        for seed in range(3):
            expected = _reference(seed, dims)
            leaves = _build(seed, dims)
            loss = _loss(*_split(leaves))
            nodes = _linear_nodes(loss)
            _backward_observed_on_return(loss, nodes, observer)
            assert not observer.errors
            assert all(n._routed for n in nodes)        # each was observed
            _assert_grads(leaves, expected)
    finally:
        observer.close()
    assert calls == []          # registered after the node ran: not called in that backward


def test_hooks_registered_before_a_node_runs_are_called():
    dims = (5, 7, 4)
    expected = _reference(0, dims)
    leaves = _build(0, dims)
    loss = _loss(*_split(leaves))
    seen = []
    observer = _Observer(lambda node: node.register_hook(
        lambda gi, go: seen.append(tuple(None if g is None else tuple(g.shape) for g in gi))))
    try:
        for node in _linear_nodes(loss):
            observer.ask(node)
        loss.backward()
    finally:
        observer.close()
    _assert_grads(leaves, expected)
    # the hooks see t(weight)'s gradient, as PyTorch's AddmmBackward0 hooks do
    shapes = sorted(sorted(map(repr, call)) for call in seen)
    assert shapes == sorted(sorted(map(repr, call)) for call in
                            [((3, 5), (5, 7), (7,)), ((3, 7), (7, 4), (4,))])


def test_a_thread_reads_next_functions_while_another_routes_the_node():
    dims = (5, 7, 4)
    expected = _reference(0, dims)
    leaves = _build(0, dims)
    loss = _loss(*_split(leaves))
    nodes = _linear_nodes(loss)
    got = []
    observer = _Observer(lambda node: got.append(node.next_functions))
    asked = set()

    def profile(frame, event, arg):     # when this thread makes a TBackward0 for the node
        if event == "call" and frame.f_code.co_name == "__init__":
            made = frame.f_locals.get("self")
            if type(made).__name__ == "TBackward0" and not asked:
                asked.add(made)
                observer.ask(nodes[0], timeout=0.3)
    sys.setprofile(profile)
    try:
        mine = nodes[0].next_functions
    finally:
        sys.setprofile(None)
    observer.done.wait(5)               # (it may have waited for this thread)
    observer.close()
    assert asked and not observer.errors
    assert got == [mine]                # one TBackward0 for the weight, seen by both threads
    assert type(mine[2][0]).__name__ == "TBackward0"         # PyTorch's (bias, input, t(weight))
    assert mine[2][0].next_functions[0][0].variable is leaves[2]       # the second weight
    loss.backward()
    _assert_grads(leaves, expected)


def test_backwards_in_threads_accumulate_into_shared_leaves():
    dims = (64, 96, 64)
    _, ws, bs = _split(_build(1, dims))
    params = [*ws, *bs]
    rng = np.random.default_rng(7)
    n_threads, per_thread = 4, 3
    inputs = [torch.tensor(rng.standard_normal((3, dims[0])))
              for _ in range(n_threads * per_thread)]
    expected = [np.zeros(tuple(p.shape)) for p in params]
    for x in inputs:
        grads = torch.autograd.grad(_loss(x, ws, bs), params)
        for e, g in zip(expected, grads):
            e += g.numpy()
    errors = []

    def work(k, start):
        sys.setprofile(_yield)      # (a switch at every call: the threads interleave finely)
        try:
            start.wait()
            for x in inputs[k * per_thread:(k + 1) * per_thread]:
                _loss(x, ws, bs).backward()
        except Exception as e:              # (reported by the test)
            errors.append(e)
        finally:
            sys.setprofile(None)
    for _ in range(4):
        for p in params:
            p.grad = None
        start = threading.Barrier(n_threads)
        threads = [threading.Thread(target=work, args=(k, start)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for p, e in zip(params, expected):
            np.testing.assert_allclose(p.grad.numpy(), e, rtol=1e-10, atol=1e-10)


def test_backward_while_other_threads_observe_the_graph():
    dims = (6, 9, 6, 9, 6)
    current = [()]
    stop = [False]
    errors = []

    def observe(k):
        while not stop[0]:
            for node in current[0]:
                try:
                    if k:
                        node.register_hook(lambda gi, go: None)
                    else:
                        node.next_functions
                except Exception as e:          # (reported by the test)
                    errors.append(e)
    threads = [threading.Thread(target=observe, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    try:
        references = [_reference(seed, dims) for seed in range(4)]
        for i in range(120):
            leaves = _build(i % 4, dims)
            loss = _loss(*_split(leaves))
            current[0] = _linear_nodes(loss)[::-1]
            loss.backward()
            current[0] = ()
            _assert_grads(leaves, references[i % 4])
    finally:
        stop[0] = True
        for t in threads:
            t.join(5)
    assert not errors


def test_first_forwards_in_threads_make_one_accumulator_per_leaf():
    leaf = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    meet = threading.Barrier(2, timeout=0.3)

    def profile(frame, event, arg):     # two threads making the leaf's node meet in __init__
        if event == "call" and frame.f_code.co_name == "__init__" \
                and type(frame.f_locals.get("self")).__name__ == "AccumulateGrad":
            try:
                meet.wait()
            except threading.BrokenBarrierError:    # (alone: the other waits for its node)
                pass
    outs, errors = [None, None], []

    def work(k):
        sys.setprofile(profile)
        try:
            outs[k] = leaf * (k + 1)
        except Exception as e:              # (reported by the test)
            errors.append(e)
        finally:
            sys.setprofile(None)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert outs[0].grad_fn.next_functions[0][0] is outs[1].grad_fn.next_functions[0][0]
    for out in outs:
        out.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [3.0, 3.0, 3.0])
