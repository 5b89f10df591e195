"""Parity of the round-35 autograd review's fixes: hook order at leaves, a custom Function at
backward(inputs=)'s frontier, expanded .grad, materialize_grads with GradientEdge, anomaly."""

import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _leaf_hook_log(lib, how):
    log = []
    a = lib.ones(2, requires_grad=True)
    acc = a.view_as(a).grad_fn.next_functions[0][0]

    def pre(go):
        log.append(("pre", go[0].tolist()))
        return (go[0] * 10.0,)

    acc.register_prehook(pre)
    a.register_hook(lambda g: (log.append(("tensor", g.tolist())), g * 2.0)[1])
    acc.register_hook(lambda gi, go: log.append(("post", len(gi), go[0].tolist())))
    a.register_post_accumulate_grad_hook(lambda t: log.append(("acc", t.grad.tolist())))
    y = (a * 3.0).sum()
    if how == "grad":
        log.append(("result", lib.autograd.grad(y, [a])[0].tolist()))
    else:
        y.backward(inputs=[a] if how == "inputs" else None)
        log.append(("result", a.grad.tolist()))
    return log


@pytest.mark.parametrize("how", ["backward", "inputs", "grad"])
def test_leaf_accumulator_hook_order(how):
    assert _leaf_hook_log(ember, how) == _leaf_hook_log(torch, how)


def _frontier_log(lib, use_grad):
    log = []

    class Twice(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            log.append(("backward", g.tolist()))
            return g * 7.0

    a = lib.ones(2, requires_grad=True)
    b = Twice.apply(a)
    b.grad_fn.register_prehook(lambda go: log.append(("pre", go[0].tolist())))
    b.grad_fn.register_hook(lambda gi, go: log.append(
        ("post", [None if g is None else g.tolist() for g in gi])))
    y = (b * 3.0).sum()
    if use_grad:
        log.append(("result", lib.autograd.grad(y, [b])[0].tolist()))
    else:
        y.backward(inputs=[b])
        log.append(("result", b.grad.tolist(), a.grad))
    return log


@pytest.mark.parametrize("use_grad", [False, True])
def test_custom_function_at_the_frontier(use_grad):
    assert _frontier_log(ember, use_grad) == _frontier_log(torch, use_grad)


def _outcome(fn):
    try:
        return fn()
    except RuntimeError as e:
        return str(e).split(".")[0]


@pytest.mark.parametrize("requires_grad", [False, True])
def test_expanded_grad_accumulation(requires_grad):
    def run(lib):
        a = lib.ones(3, requires_grad=True)
        a.grad = lib.ones(1, requires_grad=requires_grad).expand(3)
        return _outcome(lambda: (a * 2.0).sum().backward())
    assert run(ember) == run(torch)
    assert run(ember).startswith("unsupported operation")


def test_materialize_grads_with_an_unused_gradient_edge():
    def run(lib):
        a = lib.ones(3, requires_grad=True)
        edge = lib.autograd.graph.get_gradient_edge(lib.ones(2, requires_grad=True) * 2.0)
        return _outcome(lambda: lib.autograd.grad((a * a).sum(), [a, edge],
                                                  materialize_grads=True))
    assert run(ember) == run(torch) == ("materialize_grads cannot be used when the given "
                                        "input is a GradientEdge")


def test_anomaly_warning_needs_the_mode_at_backward_time():
    def run(lib):
        class Raises(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                raise ValueError("boom")

        a = lib.ones(3, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly():
                y = Raises.apply(a).sum()
            try:
                y.backward()
            except ValueError:
                pass
            b = a * 2.0
            b.grad_fn.register_prehook(lambda go: 1 / 0)
            with lib.autograd.detect_anomaly():
                try:
                    b.sum().backward()
                except ZeroDivisionError:
                    pass
        return [str(w.message)[:40] for w in caught if "Error detected" in str(w.message)]
    assert run(ember) == run(torch) == ["Error detected in MulBackward0. No forwa"]
