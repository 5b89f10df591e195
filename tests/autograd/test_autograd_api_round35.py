"""Autograd API behaviours the round-35 fuzzer found differing from PyTorch (now fixed)."""

import pytest

import ember


def test_a_batched_grad_frees_the_graph_unless_asked_to_keep_it():
    a = ember.ones(2, 3, requires_grad=True)
    y = (a * a).sum(0)
    (g,) = ember.autograd.grad(y, a, ember.ones(2, 3), is_grads_batched=True)
    assert g.shape == (2, 2, 3) and g.tolist() == [[[2.0] * 3] * 2] * 2
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()
    y = (a * a).sum(0)
    ember.autograd.grad(y, a, ember.ones(2, 3), is_grads_batched=True, retain_graph=True)
    y.sum().backward()
    assert a.grad.tolist() == [[2.0] * 3] * 2


def test_materialized_zeros_require_grad_only_with_create_graph():
    a = ember.ones(3, requires_grad=True)
    u = ember.ones(2, requires_grad=True)
    y = (a * a).sum()
    ga, gu = ember.autograd.grad(y, [a, u], materialize_grads=True, retain_graph=True)
    assert gu.tolist() == [0.0, 0.0] and not gu.requires_grad
    ga, gu = ember.autograd.grad(y, [a, u], materialize_grads=True, create_graph=True)
    assert gu.tolist() == [0.0, 0.0] and gu.requires_grad and gu.is_leaf
    assert ga.requires_grad and ga.grad_fn is not None


def test_a_captured_gradient_is_taken_before_the_nodes_pre_hooks():
    a = ember.ones(3, requires_grad=True)
    b = a * 2.0
    c = b * 5.0
    b.grad_fn.register_prehook(lambda go: (go[0] * 2,))
    ga, gb = ember.autograd.grad(c.sum(), [a, b], retain_graph=True)
    assert gb.tolist() == [5.0] * 3 and ga.tolist() == [20.0] * 3
    (gb,) = ember.autograd.grad(c.sum(), [b])
    assert gb.tolist() == [5.0] * 3


def test_backward_inputs_runs_the_input_nodes_hooks_and_frees_it():
    log = []
    a = ember.ones(3, requires_grad=True)
    b = a * a
    c = b * 3.0
    b.grad_fn.register_prehook(lambda go: log.append("pre"))
    b.grad_fn.register_hook(lambda gi, go: log.append(("post", gi, go[0].tolist())))
    c.sum().backward(inputs=[b], retain_graph=True)
    assert log == ["pre", ("post", (None, None), [3.0] * 3)] and a.grad is None
    assert b.grad.tolist() == [3.0] * 3
    log.clear()
    ember.autograd.grad(c.sum(), [b], retain_graph=True)      # autograd.grad does not run it
    assert log == []
    c.sum().backward(inputs=[b])                    # without retain_graph: b's node is freed
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        (b * 1.0).sum().backward()


class _Boom(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * float("nan")


def test_anomaly_mode_warns_of_a_failing_node_recorded_outside_it():
    a = ember.ones(3, requires_grad=True)
    y = _Boom.apply(a).sum()            # recorded without anomaly mode: no forward trace
    with pytest.warns(UserWarning, match="Error detected in _BoomBackward. No forward pass "
                                         "information available. Enable detect anomaly"):
        with ember.autograd.detect_anomaly():
            with pytest.raises(RuntimeError, match="returned nan values"):
                y.backward()


def test_a_pack_hook_may_not_modify_its_input_in_place():
    a = ember.ones(3, requires_grad=True)
    b = a * 1.0
    with ember.autograd.graph.saved_tensors_hooks(lambda t: t.mul_(2.0), lambda p: p):
        with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its "
                                               "input in place"):
            b * b
    assert b.tolist() == [2.0] * 3          # (changed before it is refused, as in PyTorch)
    b = a * 1.0
    with ember.autograd.graph.saved_tensors_hooks(lambda t: t * 2.0, lambda p: p):
        y = (b * b).sum()                # an out-of-place pack is fine
    y.backward()
    assert a.grad.tolist() == [4.0] * 3


def test_unpack_dual_checks_the_level_of_duals_only():
    fwAD = ember.autograd.forward_ad
    x = ember.ones(2)
    assert fwAD.unpack_dual(x, level=0).tangent is None       # no level open
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ember.ones(2) * 3)
        assert fwAD.unpack_dual(x, level=3).tangent is None
        assert fwAD.unpack_dual(d, level=0).tangent.tolist() == [3.0, 3.0]
        with pytest.raises(RuntimeError, match="Invalid level given to _fw_primal"):
            fwAD.unpack_dual(d, level=3)


def test_fewer_gradients_than_outputs_is_refused():
    a = ember.ones(2, requires_grad=True)
    y = a * 2
    with pytest.raises(RuntimeError, match="^got 2 tensors and 1 gradients$"):
        ember.autograd.backward([y, y.sum()], [ember.ones(2)])
    with pytest.raises(RuntimeError, match="^got 1 tensors and 0 gradients$"):
        ember.autograd.grad([y.sum()], a, [])
    with pytest.raises(RuntimeError, match="Mismatch in shape: grad_output"):   # checked first
        ember.autograd.grad([y, y], a, [ember.ones(3)])
    (g,) = ember.autograd.grad(y.sum(), a, [None, None])     # extra ones are ignored
    assert g.tolist() == [2.0, 2.0]


def test_grad_variables_is_deprecated_and_exclusive_with_grad_tensors():
    a = ember.ones(2, requires_grad=True)
    with pytest.warns(FutureWarning, match="`grad_variables` is deprecated"):
        ember.autograd.backward((a * 2).sum(), grad_variables=ember.tensor(3.0))
    assert a.grad.tolist() == [6.0, 6.0]
    with pytest.warns(FutureWarning), pytest.raises(RuntimeError, match="both passed"):
        ember.autograd.backward((a * 2).sum(), ember.tensor(1.0),
                                grad_variables=ember.tensor(1.0))
    with pytest.raises(RuntimeError, match="`inputs` argument to `backward\\(\\)` cannot be"):
        ember.autograd.backward(a * 2, [ember.ones(3)], inputs=[])    # before the shapes


def test_a_grad_that_requires_grad_accumulates_in_place_outside_grad_mode():
    a = ember.ones(3, requires_grad=True)
    g = ember.ones(3, requires_grad=True)
    a.grad = g
    (a * 2).sum().backward()
    assert a.grad is g and g.requires_grad and g.tolist() == [3.0] * 3
    b = ember.ones(3, requires_grad=True)
    (b * b).sum().backward(create_graph=True)       # a .grad with history
    first = b.grad
    (b * 2).sum().backward()
    assert b.grad is first and first.tolist() == [4.0] * 3 and first._version == 1
