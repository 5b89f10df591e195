"""The backward engine: accumulation, graph shapes, hooks, retain/create graph, errors."""

import warnings

import numpy as np
import pytest

import ember
from ember.testing import assert_close


def leaf(*values, dtype=ember.float64):
    return ember.tensor(list(values), dtype=dtype, requires_grad=True)


def test_gradient_of_polynomial():
    x = leaf(1.0, 2.0, 3.0)
    (x * x * x + 2 * x).sum().backward()
    assert_close(x.grad, ember.tensor([5.0, 14.0, 29.0], dtype=ember.float64))


def test_diamond_graph_accumulates_both_paths():
    x = leaf(2.0)
    a, b = x * 3, x * x
    (a * b).sum().backward()            # d/dx 3x^3 = 9x^2
    assert x.grad.item() == 36.0


def test_same_leaf_used_twice_in_one_op():
    x = leaf(3.0)
    (x * x).backward()
    assert x.grad.item() == 6.0


def test_grads_accumulate_across_backward_calls():
    x = leaf(1.0, 2.0)
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


def test_broadcast_gradient_is_summed_to_input_shape():
    x = ember.ones(3, 1, dtype=ember.float64, requires_grad=True)
    y = ember.ones(1, 4, dtype=ember.float64, requires_grad=True)
    (x * y).sum().backward()
    assert x.grad.shape == (3, 1) and x.grad.tolist() == [[4.0]] * 3
    assert y.grad.shape == (1, 4) and y.grad.tolist() == [[3.0] * 4]


def test_gradient_cast_back_to_input_dtype():
    x = ember.ones(2, dtype=ember.float32, requires_grad=True)
    w = ember.ones(2, dtype=ember.float64, requires_grad=True)
    (x * w).sum().backward()
    assert x.grad.dtype is ember.float32 and w.grad.dtype is ember.float64


def test_second_backward_through_freed_graph_raises():
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retain_graph_allows_second_backward():
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_graph_that_saves_nothing_can_be_run_twice():
    x = leaf(1.0, 2.0)
    y = (x + 1).sum()                   # add and sum save no tensors, as in PyTorch
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_double_backward():
    x = leaf(2.0)
    y = x * x * x
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    assert g.item() == 12.0             # 3x^2
    (g2,) = ember.autograd.grad(g, x)
    assert g2.item() == 12.0            # 6x


def test_third_order_through_reciprocal():
    x = leaf(2.0)
    y = x.reciprocal()
    (g1,) = ember.autograd.grad(y, x, create_graph=True)
    (g2,) = ember.autograd.grad(g1, x, create_graph=True)
    (g3,) = ember.autograd.grad(g2, x)
    assert_close(g3.item(), -6 / 2.0 ** 4)


def test_autograd_grad_does_not_touch_dot_grad():
    x = leaf(1.0)
    ember.autograd.grad((x * 2).sum(), x)
    assert x.grad is None


def test_autograd_grad_unused_input():
    x, z = leaf(1.0), leaf(2.0)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        ember.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = ember.autograd.grad(y, [x, z], allow_unused=True, retain_graph=True)
    assert gx.item() == 2.0 and gz is None
    gx, gz = ember.autograd.grad(y, [x, z], materialize_grads=True)
    assert gz.tolist() == [0.0]


def test_autograd_grad_with_respect_to_intermediate():
    x = leaf(3.0)
    h = x * x
    y = h * 5
    (gh,) = ember.autograd.grad(y, h)
    assert gh.item() == 5.0


def test_autograd_grad_input_must_require_grad():
    x = ember.tensor([1.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.autograd.grad(x * 2, x)


def test_autograd_grad_with_no_inputs_raises():
    x = ember.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="`inputs` argument to `grad\\(\\)` cannot be empty."):
        ember.autograd.grad((x * 2).sum(), [])


def test_grad_outputs_weights_the_vjp():
    x = leaf(1.0, 2.0)
    (g,) = ember.autograd.grad(x * x, x, grad_outputs=ember.tensor([1.0, 10.0],
                                                                    dtype=ember.float64))
    assert g.tolist() == [2.0, 40.0]


def test_implicit_grad_only_for_scalars():
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        (x * 2).backward()


def test_grad_shape_mismatch():
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(ember.ones(3, dtype=ember.float64))


def test_backward_on_tensor_without_grad():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        ember.ones(1).sum().backward()


def test_backward_inputs_restricts_accumulation():
    x, w = leaf(1.0), leaf(2.0)
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None and w.grad.item() == 1.0


def test_non_leaf_grad_warns_and_retain_grad_keeps_it():
    x = leaf(1.0, 2.0)
    h = x * 2
    h.retain_grad()
    g = x * 3
    (h * g).sum().backward()
    assert h.grad.tolist() == [3.0, 6.0]
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert g.grad is None


def test_is_leaf_and_requires_grad():
    x = leaf(1.0)
    y = x * 2
    assert x.is_leaf and not y.is_leaf and y.requires_grad
    assert ember.ones(1).is_leaf and (ember.ones(1) * 2).is_leaf


def test_requires_grad_only_for_float():
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        ember.tensor([1, 2]).requires_grad_()


def test_requires_grad_flag_of_non_leaf():
    y = leaf(1.0) * 2
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad = False


def test_hook_can_replace_gradient_and_be_removed():
    x = leaf(1.0, 2.0)
    seen = []
    h = x.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    (x * 1).sum().backward()
    assert seen == [[1.0, 1.0]] and x.grad.tolist() == [10.0, 10.0]
    h.remove()
    x.grad = None
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0] and len(seen) == 1


def test_non_leaf_hook_sees_summed_gradient():
    x = leaf(1.0)
    h = x * 2
    seen = []
    h.register_hook(lambda g: seen.append(g.item()))
    (h * 3 + h * 4).sum().backward()
    assert seen == [7.0] and x.grad.item() == 14.0


def test_hooks_run_in_registration_order():
    x = leaf(1.0)
    order = []
    x.register_hook(lambda g: order.append("first"))
    x.register_hook(lambda g: order.append("second"))
    (x * 2).backward()
    assert order == ["first", "second"]


def test_post_accumulate_grad_hook():
    x = leaf(1.0)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.item()))
    (x * 5).backward()
    assert seen == [5.0]


def test_nodes_expose_next_functions_and_names():
    x = leaf(1.0)
    y = (x * 2).sum()
    assert y.grad_fn.name() == "SumBackward0"
    (mul, _), = y.grad_fn.next_functions
    assert mul.name() == "MulBackward0"
    acc, _ = mul.next_functions[0]
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is x
    assert mul.next_functions[1] == (None, 0)


def test_node_hooks():
    x = leaf(1.0)
    y = x * 2
    calls = []
    y.grad_fn.register_prehook(lambda grads: calls.append(("pre", grads[0].item())))
    y.grad_fn.register_hook(lambda gin, gout: calls.append(("post", gin[0].item())))
    y.backward(ember.tensor([3.0], dtype=ember.float64))
    assert calls == [("pre", 3.0), ("post", 6.0)]


def test_grad_modes():
    x = leaf(1.0)
    with ember.no_grad():
        assert not (x * 2).requires_grad
        with ember.enable_grad():
            assert (x * 2).requires_grad
    with ember.set_grad_enabled(False):
        assert not ember.is_grad_enabled()
    assert ember.is_grad_enabled()
    ember.set_grad_enabled(False)
    assert not ember.is_grad_enabled()
    ember.set_grad_enabled(True)
    with ember.inference_mode():
        assert not (x * 2).requires_grad and ember.is_inference_mode_enabled()


def test_grad_modes_as_decorators():
    x = leaf(1.0)

    @ember.no_grad()
    def f():
        return x * 2

    @ember.no_grad
    def g():
        return x * 2

    @ember.set_grad_enabled(False)
    def h():
        return x * 2

    @ember.inference_mode()
    def i():
        return x * 2

    assert ember.is_grad_enabled()
    assert not f().requires_grad and not g().requires_grad and not h().requires_grad
    assert not i().requires_grad
    assert ember.is_grad_enabled()


def test_version_counter_catches_modified_saved_tensor():
    x = leaf(1.0, 2.0)
    y = x * 2
    z = y * y                           # saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*is at version 1; "
                                           r"expected version 0"):
        z.sum().backward()


@pytest.mark.parametrize("view", [False, True])
def test_an_in_place_op_whose_operand_is_itself_cannot_be_differentiated(view):
    # mul_'s backward needs the old operand, which the op overwrote (it once used the new one)
    x = leaf(1.0, 2.0, 3.0)
    y = x * 1
    target = y[:2] if view else y
    target.mul_(target)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*is at version "
                                           r"\d+; expected version \d+"):
        target.sum().backward()
    z = x * 1
    z.add_(z)                           # add_ needs no operand's values: fine
    z.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_saved_output_modified_in_place():
    x = leaf(2.0)
    y = x.reciprocal()                  # saves its output
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_in_place_on_leaf_requiring_grad_raises():
    x = leaf(1.0)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation."):
        x.add_(1)
    with ember.no_grad():
        x.add_(1)                       # allowed without grad recording
    assert x.tolist() == [2.0]


def test_in_place_on_view_of_leaf_raises():
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable"):
        x.view(2).mul_(2)


def test_in_place_op_gradient():
    x = leaf(1.0, 2.0)
    y = x * 1
    y.mul_(x)                           # y = x^2, computed in place
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]
    assert y.grad_fn.name() == "MulBackward0"


def test_in_place_on_view_updates_base_history():
    x = leaf(1.0, 2.0, 3.0, 4.0)
    base = x * 1
    v = base.view(2, 2).transpose(0, 1)
    v.mul_(10)                          # base is now x * 10
    assert base.grad_fn.name() == "torch::autograd::CopySlices"   # as PyTorch names it
    (base * ember.tensor([1.0, 2.0, 3.0, 4.0], dtype=ember.float64)).sum().backward()
    assert x.grad.tolist() == [10.0, 20.0, 30.0, 40.0]


def test_view_history_follows_base_in_place():
    x = leaf(1.0, 2.0)
    base = x * 1
    v = base.view(2, 1)
    base.mul_(3)
    v.sum().backward()                  # v sees base's new history: d(3x)/dx
    assert x.grad.tolist() == [3.0, 3.0]


def test_detect_anomaly_flags_nan_gradient():
    x = leaf(0.0)
    with ember.autograd.detect_anomaly():
        y = (x * 0).reciprocal() * 0   # inf * 0 = nan in the gradient
        with pytest.raises(RuntimeError, match="returned nan values"):
            y.backward()


def test_detect_anomaly_names_the_forward_call_of_a_nan_gradient():
    x = leaf(0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ember.autograd.detect_anomaly():
            y = x.sqrt() * 0
    with ember.autograd.detect_anomaly(), \
            pytest.warns(UserWarning, match="Error detected in SqrtBackward0. Traceback of "
                                            "forward call that caused the error:\n") as caught, \
            pytest.raises(RuntimeError, match="Function 'SqrtBackward0' returned nan values in "
                                              "its 0th output."):
        y.backward()
    trace = str(caught[-1].message)
    assert trace.rstrip().endswith("y = x.sqrt() * 0")      # ends at the op's call


def test_detect_anomaly_records_forward_trace():
    x = leaf(1.0)
    with ember.autograd.detect_anomaly():
        y = x * 2
    assert "test_detect_anomaly_records_forward_trace" in y.grad_fn._trace


def test_detach_shares_memory_and_cuts_graph():
    x = leaf(1.0, 2.0)
    d = (x * 2).detach()
    assert not d.requires_grad and d.grad_fn is None
    y = x * 1
    z = y.detach()
    z.zero_()
    assert y.tolist() == [0.0, 0.0]


def test_out_argument_refuses_autograd():
    x = leaf(1.0)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic"):
        ember.mul(x, 2, out=ember.empty(1, dtype=ember.float64))


def test_no_numpy_warning_escapes():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.tensor([0.0]).reciprocal()
        ember.tensor([0.0]) / 0
        ember.tensor([1.0]) / ember.tensor([0.0])


def test_gradcheck_catches_a_wrong_derivative():
    class Wrong(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x                # should be 2x

    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    with pytest.raises(ember.autograd.GradcheckError, match="Jacobian mismatch"):
        ember.autograd.gradcheck(Wrong.apply, (x,))
    assert not ember.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False)


def test_gradcheck_complex():
    z = ember.tensor([1 + 2j, -0.5 + 0.25j], dtype=ember.complex128, requires_grad=True)
    assert ember.autograd.gradcheck(lambda t: t * t * (2 - 1j), (z,))
    assert ember.autograd.gradcheck(lambda t: (t * t.conj()).real, (z,))


def test_gradcheck_inputs_may_hold_numbers():
    # as in PyTorch: gradcheck(f, (x, 2)) passes the number through and checks x only
    x = ember.tensor([1.0, -2.0], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda t, p: t ** p, (x, 3))
    assert ember.autograd.gradgradcheck(lambda t, p: t ** p, (x, 3))


def test_numpy_view_of_grad_is_detached():
    x = leaf(1.0)
    (x * 3).backward()
    arr = x.grad.numpy()
    np.testing.assert_array_equal(arr, [3.0])


def test_several_outputs_of_one_node_as_roots():
    x = leaf(1.0, 2.0, 3.0, 4.0)
    a, b = x.split(2)
    ember.autograd.backward([a, b], [ember.ones(2, dtype=ember.float64),
                                     ember.full((2,), 2.0, dtype=ember.float64)])
    assert x.grad.tolist() == [1.0, 1.0, 2.0, 2.0]


def test_grad_with_batched_grad_outputs_is_one_vjp_per_row():
    x = ember.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * x * 2
    (jac,) = ember.autograd.grad(y, x, ember.eye(3), is_grads_batched=True)
    assert jac.tolist() == [[4.0, 0.0, 0.0], [0.0, -8.0, 0.0], [0.0, 0.0, 12.0]]


def test_pytorch_words_for_unused_inputs_integer_grads_and_anomaly_mode():
    a, b = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="The differentiated Tensor at index 1 appears to "
                                           "not have been used in the graph"):
        ember.autograd.grad((a * 2).sum(), [a, b])
    with pytest.raises(RuntimeError, match="^only Tensors of floating point dtype can require "
                                           "gradients$"):
        ember.tensor([1]).requires_grad_()
    with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex dtype "
                                           "can require gradients$"):
        ember.tensor([1], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        with ember.autograd.detect_anomaly():
            pass


def test_batched_grad_outputs_of_the_wrong_shape_raise_torch_message():
    x = ember.ones(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match=r"If `is_grads_batched=True`, we interpret the first "
                                           r"dimension .* grad_output\[0\] has a shape of "
                                           r"ember.Size\(\[2\]\) and output\[0\] has a shape of "
                                           r"ember.Size\(\[3\]\)"):
        ember.autograd.grad(y, x, ember.eye(2), is_grads_batched=True)


@pytest.mark.parametrize("leaf", [False, True])
def test_tensor_hook_may_not_change_the_gradient_size_or_type(leaf):
    def widen(g):
        return g.double()

    cases = [(widen, RuntimeError, r"hook 'widen' has changed the type of value \(was "
                                   r"ember.FloatTensor got ember.DoubleTensor\)"),
             (lambda g: ember.ones(2), RuntimeError, "hook '<lambda>' has changed the size"),
             (lambda g: 3.0, TypeError, "expected Variable, but hook returned 'float'")]
    for hook, error, message in cases:
        x = ember.ones(3, requires_grad=True)
        y = x * 2
        (x if leaf else y).register_hook(hook)
        with pytest.raises(error, match=message):
            y.sum().backward()
        assert x.grad is None


def test_accumulate_grad_and_copy_slices_have_pytorchs_names():
    x = ember.ones(2, requires_grad=True)
    acc = (x * 2).grad_fn.next_functions[0][0]
    assert acc.name() == "torch::autograd::AccumulateGrad"
    assert repr(acc).startswith("<AccumulateGrad object at 0x")
    z = ember.zeros(3)
    z[0:2] = x * 2
    assert z.grad_fn.name() == "torch::autograd::CopySlices"
    assert "grad_fn=<CopySlices>" in repr(z)


def test_grad_checks_grads_then_outputs_then_inputs_as_pytorch_does():
    x = ember.ones(3, requires_grad=True)
    n = ember.ones(3)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        ember.autograd.grad(n.sum(), n)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        ember.autograd.grad(n * 2, x)           # not "implicitly created only for scalar"
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        ember.autograd.grad(x * 2, n)
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\]"):
        ember.autograd.grad(n, x, ember.ones(4))
    with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not "
                                           "require grad"):
        ember.autograd.grad((x * 2).sum(), n)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        (n * 2).backward()


def test_a_leaf_frozen_after_the_forward_gets_no_grad():
    """As PyTorch: accumulation skips a leaf that no longer requires grad."""
    a = ember.nn.Parameter(ember.ones(2))
    b = ember.nn.Parameter(ember.ones(2))
    loss = (a * b * 3).sum()
    b.requires_grad_(False)
    loss.backward()
    assert a.grad.tolist() == [3.0, 3.0]
    assert b.grad is None
