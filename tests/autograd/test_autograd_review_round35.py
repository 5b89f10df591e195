"""Review of the round-35 autograd API fixes: the cases it left differing from PyTorch."""

import warnings

import pytest

import ember


class _Times7(ember.autograd.Function):
    calls = []

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        _Times7.calls.append(g.tolist())
        return g * 7.0


def test_backward_inputs_calls_a_custom_functions_backward_at_the_frontier():
    log = _Times7.calls
    log.clear()
    a = ember.ones(2, requires_grad=True)
    b = _Times7.apply(a)
    c = b * 3.0
    b.grad_fn.register_hook(lambda gi, go: log.append(("post", gi[0].tolist())))
    c.sum().backward(inputs=[b], retain_graph=True)
    assert log == [[3.0, 3.0], ("post", [21.0, 21.0])]      # (PyTorch's order and values)
    assert b.grad.tolist() == [3.0, 3.0] and a.grad is None
    log.clear()
    ember.autograd.grad(c.sum(), [b])                       # autograd.grad does not call it
    assert log == []


class _TwoGrads(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g, g


def test_a_frontier_custom_functions_wrong_gradient_count_is_an_error():
    a = ember.ones(2, requires_grad=True)
    b = _TwoGrads.apply(a)
    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
        (b * 3.0).sum().backward(inputs=[b])


def _leaf_with_hooks(log):
    a = ember.ones(2, requires_grad=True)
    acc = a.view_as(a).grad_fn.next_functions[0][0]

    def pre(go):
        log.append(("pre", go[0].tolist()))
        return (go[0] * 10.0,)

    acc.register_prehook(pre)
    a.register_hook(lambda g: (log.append(("tensor", g.tolist())), g * 2.0)[1])
    acc.register_hook(lambda gi, go: log.append(("post", go[0].tolist())))
    return a


def test_a_leaf_accumulators_pre_hooks_run_after_its_tensor_hooks():
    log = []
    a = _leaf_with_hooks(log)
    (a * 3.0).sum().backward()
    assert a.grad.tolist() == [60.0, 60.0]
    assert log == [("tensor", [3.0, 3.0]), ("pre", [6.0, 6.0]), ("post", [60.0, 60.0])]
    log.clear()
    a.grad = None
    (a * 3.0).sum().backward(inputs=[a])            # the accumulator runs: all its hooks
    assert a.grad.tolist() == [60.0, 60.0]
    assert log == [("tensor", [3.0, 3.0]), ("pre", [6.0, 6.0]), ("post", [60.0, 60.0])]


def test_autograd_grad_captures_a_leafs_gradient_before_its_accumulators_pre_hooks():
    log = []
    a = _leaf_with_hooks(log)
    (g,) = ember.autograd.grad((a * 3.0).sum(), [a])
    assert g.tolist() == [6.0, 6.0] and log == [("tensor", [3.0, 3.0])]


class _Raises(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        raise ValueError("boom")


def test_anomaly_warnings_follow_the_mode_at_backward_time():
    a = ember.ones(3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ember.autograd.detect_anomaly():
            y = _Raises.apply(a).sum()          # a forward trace recorded
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="boom"):
            y.backward()                        # anomaly mode off now: no warning
    assert [str(w.message) for w in caught] == []


def test_anomaly_mode_warns_of_a_node_whose_hook_fails():
    a = ember.ones(3, requires_grad=True)
    b = a * 2.0

    def bad(go):
        raise ValueError("hook")

    b.grad_fn.register_prehook(bad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ember.autograd.detect_anomaly():
            with pytest.raises(ValueError, match="hook"):
                b.sum().backward()
    found = [str(w.message) for w in caught if str(w.message).startswith("Error detected")]
    assert found == ["Error detected in MulBackward0. No forward pass information available. "
                     "Enable detect anomaly during forward pass for more information."]


def test_an_expanded_grad_is_refused_as_an_in_place_add():
    for requires_grad in (False, True):
        a = ember.ones(3, requires_grad=True)
        a.grad = ember.ones(1, requires_grad=requires_grad).expand(3)
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            (a * 2.0).sum().backward()


def test_a_transposed_grad_that_requires_grad_is_added_to_in_place():
    a = ember.ones(2, 3, requires_grad=True)
    g = ember.ones(3, 2, requires_grad=True)
    a.grad = g.t()
    (a * 2.0).sum().backward()
    assert a.grad.stride() == (1, 2) and a.grad._base is g
    assert g.tolist() == [[3.0, 3.0]] * 3


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "complex64"])
def test_a_16_bit_or_complex_grad_that_requires_grad_is_added_to_in_place(dtype):
    dtype = getattr(ember, dtype)
    a = ember.ones(3, dtype=dtype, requires_grad=True)
    g = ember.ones(3, dtype=dtype, requires_grad=True)
    a.grad = g
    (a * 2).sum().abs().backward() if dtype.is_complex else (a * 2).sum().backward()
    assert a.grad is g and g._version == 1 and g.dtype == dtype
    assert g.real.float().tolist() == [3.0, 3.0, 3.0]


def test_a_raw_saved_tensors_pack_hook_may_not_modify_it_in_place():
    a = ember.ones(3, requires_grad=True)
    b = a * 1.0
    c = b * b
    with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its input"):
        c.grad_fn._raw_saved_self.register_hooks(lambda t: t.mul_(2.0), lambda p: p)
    d = (a * 1.0) * (a * 1.0)
    d.grad_fn._raw_saved_self.register_hooks(lambda t: t * 1.0, lambda p: p)
    d.sum().backward()
    assert a.grad.tolist() == [2.0] * 3


def test_unpack_dual_at_a_negative_level_gives_the_tensor_itself():
    fwAD = ember.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(ember.ones(2), ember.ones(2) * 3.0)
        primal, tangent = fwAD.unpack_dual(d, level=-1)
        assert primal is d and tangent is None
        assert fwAD.unpack_dual(d).tangent.tolist() == [3.0, 3.0]


def test_materialize_grads_refuses_an_unused_gradient_edge():
    a = ember.ones(3, requires_grad=True)
    w = ember.ones(2, requires_grad=True) * 2.0
    edge = ember.autograd.graph.get_gradient_edge(w)
    y = (a * a).sum()
    with pytest.raises(RuntimeError, match="materialize_grads cannot be used when the given "
                                           "input is a GradientEdge"):
        ember.autograd.grad(y, [a, edge], materialize_grads=True, retain_graph=True)
    ga, gw = ember.autograd.grad(y, [a, w], materialize_grads=True)
    assert ga.tolist() == [2.0] * 3 and gw.tolist() == [0.0, 0.0]
