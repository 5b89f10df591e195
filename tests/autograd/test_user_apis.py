"""Autograd user APIs as PyTorch behaves: retain_grad across in-place ops, backward(inputs=)
argument rules, grad(only_inputs=), detect_anomaly's warning, custom Function argument rules,
allow_mutation_on_saved_tensors."""

import pytest

import ember
from ember.autograd.graph import allow_mutation_on_saved_tensors, saved_tensors_hooks


def _x():
    return ember.tensor([1.0, 2.0, 3.0], requires_grad=True)


C = [1.0, 2.0, 3.0]


def test_retain_grad_follows_an_in_place_op():
    # the gradient is the one of the tensor as it is now, not before the in-place op
    x = _x()
    b = x * 1
    b.retain_grad()
    b.mul_(2)
    (b * ember.tensor(C)).sum().backward()
    assert b.grad.tolist() == C
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_retain_grad_follows_in_place_ops_through_views_and_functions():
    x = _x()
    b = x * 1
    b.retain_grad()
    b[1:].mul_(2)                       # the base gets a new grad_fn (CopySlices)
    (b * ember.tensor(C)).sum().backward()
    assert b.grad.tolist() == C
    b = x * 1
    v = b[1:]
    v.retain_grad()
    b.mul_(2)                           # the view's history is rebuilt
    (v * ember.tensor([2.0, 3.0])).sum().backward()
    assert v.grad.tolist() == [2.0, 3.0]

    class Double(ember.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.mark_dirty(t)
            return t.mul_(2)

        @staticmethod
        def backward(ctx, g):
            return g * 2
    b = x * 1
    b.retain_grad()
    Double.apply(b)
    (b * ember.tensor(C)).sum().backward()
    assert b.grad.tolist() == C


def test_backward_inputs_must_require_grad():
    x = _x()
    with pytest.raises(RuntimeError, match="^can't retain_grad on Tensor that has "
                                           "requires_grad=False$"):
        (x * 2).sum().backward(inputs=[ember.ones(3)])


def test_grad_only_inputs_false_warns():
    x = _x()
    with pytest.warns(FutureWarning, match="^only_inputs argument is deprecated"):
        (g,) = ember.autograd.grad((x * 2).sum(), x, only_inputs=False)
    assert g.tolist() == [2.0, 2.0, 2.0]


def test_detect_anomaly_warns_when_made():
    with pytest.warns(UserWarning, match="^Anomaly Detection has been enabled"):
        mode = ember.autograd.detect_anomaly()
    assert not ember.is_anomaly_enabled()
    with mode:
        assert ember.is_anomaly_enabled()


class _Scale(ember.autograd.Function):
    @staticmethod
    def forward(ctx, a, k):
        return a * k

    @staticmethod
    def backward(ctx, g):
        return g * 2, g                 # a gradient for the float argument: an error


def test_function_gradient_for_a_non_tensor_argument_raises():
    with pytest.raises(RuntimeError, match="^function _ScaleBackward returned a gradient "
                                           "different than None at position 2, but the "
                                           "corresponding forward input was not a Variable$"):
        _Scale.apply(_x(), 2.0).sum().backward()


def test_function_instances_warn_and_calling_them_raises():
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        fn = _Scale()
    with pytest.raises(RuntimeError, match=r"static forward method. \(Example: https://"):
        fn(_x(), 2.0)


def test_allow_mutation_on_saved_tensors():
    x = _x()
    with allow_mutation_on_saved_tensors() as ctx:
        a = x * 1
        b = a.sin()
        c = a * a
        a.mul_(2)
        (b.sum() + c.sum()).backward()
        assert [round(v, 4) for v in x.grad.tolist()] == [2.5403, 3.5839, 5.01]
        assert type(ctx).__name__ == "_AllowMutationOnSavedContext"
        with pytest.raises(RuntimeError, match="^allow_mutation_on_saved_tensors contexts "
                                               "cannot be nested$"):
            with allow_mutation_on_saved_tensors():
                pass
        with saved_tensors_hooks(lambda t: t, lambda t: t):
            pass
        d = (x * 1).exp()
    with pytest.raises(AssertionError, match="^Trying to backward outside of the "
                                             "'allow_mutation_on_saved_tensors' context"):
        d.sum().backward()


def _raises(message, fn):
    with pytest.raises(RuntimeError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        fn()


_CG = "The {} of the user-provided function is independent of input {}. This is not allowed " \
      "in strict mode when create_graph=True."


def test_functional_strict_create_graph_needs_a_jacobian_that_depends_on_the_inputs():
    AF = ember.autograd.functional
    x, v = ember.tensor([0.5, 1.0]), ember.ones(2)
    linear = lambda a: a * 2                                       # noqa: E731
    for fn in (lambda: AF.jacobian(linear, x, strict=True, create_graph=True),
               lambda: AF.vjp(linear, x, v, strict=True, create_graph=True),
               lambda: AF.jvp(linear, x, v, strict=True, create_graph=True)):
        _raises(_CG.format("jacobian", 0), fn)
    # without create_graph, or for a non-linear function, strict mode is satisfied
    assert AF.jacobian(linear, x, strict=True).tolist() == [[2.0, 0.0], [0.0, 2.0]]
    J = AF.jacobian(lambda a: a ** 2, x, strict=True, create_graph=True)
    assert J.requires_grad and J.tolist() == [[1.0, 0.0], [0.0, 2.0]]
    assert AF.jvp(lambda a: a ** 2, x, v, strict=True, create_graph=True)[1].tolist() == \
        [1.0, 2.0]


def test_functional_hessian_strict_messages():
    AF = ember.autograd.functional
    x, y = ember.tensor([0.5, 1.0]), ember.tensor([2.0, 3.0])
    _raises("While computing the hessian, found that the jacobian of the user-provided "
            "function with respect to input 1 is independent of the input.",
            lambda: AF.hessian(lambda a, b: (a ** 3).sum(), (x, y), strict=True))
    _raises("Output 0 of the user-provided function does not require gradients.",
            lambda: AF.hessian(lambda a: a.detach().sum(), x, strict=True))
    H = AF.hessian(lambda a: (a ** 3).sum(), x, strict=True, create_graph=True)
    assert H.requires_grad and H.tolist() == [[3.0, 0.0], [0.0, 6.0]]


def test_needs_input_grad_reflects_requires_grad_also_under_no_grad():
    seen = []

    class Probe(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a, k, b):
            seen.append(ctx.needs_input_grad)
            return a * k + b

        @staticmethod
        def backward(ctx, g):
            return g, None, g
    with ember.no_grad():
        out = Probe.apply(_x(), 2, ember.ones(3))
    assert seen == [(True, False, False)] and not out.requires_grad


class _Scaled(ember.autograd.Function):
    @staticmethod
    def forward(a, k=2.0):
        return a * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.inputs = inputs

    @staticmethod
    def backward(ctx, g):
        return g * ctx.inputs[1], None


@pytest.mark.parametrize("call, k", [(lambda x: _Scaled.apply(x, k=3.0), 3.0),
                                     (lambda x: _Scaled.apply(a=x, k=3.0), 3.0),
                                     (lambda x: _Scaled.apply(x), 2.0)])
def test_setup_context_gets_keywords_and_defaults_as_positional_inputs(call, k):
    x = _x()
    out = call(x)
    assert len(out.grad_fn.inputs) == 2 and out.grad_fn.inputs[1] == k
    out.sum().backward()
    assert x.grad.tolist() == [k] * 3


def test_writing_into_a_view_returned_by_a_function_raises():
    class First(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a[:1]

        @staticmethod
        def backward(ctx, g):
            return ember.cat([g, ember.zeros(2)])
    out = First.apply(_x() * 1)
    with pytest.raises(RuntimeError, match="^Output 0 of First is a view and is being modified "
                                           "inplace. This view was created inside a custom "
                                           "Function"):
        out.mul_(2)


def test_function_node_has_one_edge_per_tensor_argument():
    class Mix(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a, k, b, c):
            return a * k + b + c

        @staticmethod
        def backward(ctx, g):
            return g, None, g, g * 2
    x = _x()
    out = Mix.apply(x, 2, ember.ones(3), x * 2)
    edges = [(None if n is None else n.name(), nr) for n, nr in out.grad_fn.next_functions]
    assert edges == [("torch::autograd::AccumulateGrad", 0), (None, 0), ("MulBackward0", 0)]
    assert out.grad_fn._forward_cls is Mix
    out.sum().backward()
    assert x.grad.tolist() == [5.0, 5.0, 5.0]


def test_disable_saved_tensors_hooks_is_also_a_decorator():
    from ember.autograd.graph import disable_saved_tensors_hooks

    @disable_saved_tensors_hooks("no hooks in here")
    def enter_hooks():
        with saved_tensors_hooks(lambda t: t, lambda t: t):
            pass
    with pytest.raises(RuntimeError, match="^no hooks in here$"):
        enter_hooks()
    with saved_tensors_hooks(lambda t: t, lambda t: t):     # enabled again afterwards
        pass


def test_once_differentiable_graph_node_has_pytorchs_name():
    class Exp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.exp()

        @staticmethod
        @ember.autograd.function.once_differentiable
        def backward(ctx, g):
            return g * 2
    x = _x()
    go = ember.ones(3, requires_grad=True)
    (g,) = ember.autograd.grad(Exp.apply(x), x, go, create_graph=True)
    assert g.grad_fn.name() == "torch::autograd::Error" and g.tolist() == [2.0, 2.0, 2.0]


def test_forward_mode_jacobian_keeps_a_complex_output():
    x = ember.tensor([1.0, 2.0])
    jac = ember.autograd.functional.jacobian(lambda a: a * (1 + 2j), x, vectorize=True,
                                             strategy="forward-mode")
    assert jac.is_complex()
    assert ember.view_as_real(jac).tolist() == [[[1.0, 2.0], [0.0, 0.0]],
                                                [[0.0, 0.0], [1.0, 2.0]]]


def test_forward_mode_jacobian_of_an_output_independent_of_the_input_is_zero():
    x = ember.tensor([1.0, 2.0])
    jac = ember.autograd.functional.jacobian(lambda a: (a * 3, ember.ones(3)), x,
                                             vectorize=True, strategy="forward-mode")
    assert jac[0].tolist() == [[3.0, 0.0], [0.0, 3.0]]
    assert jac[1].tolist() == [[0.0, 0.0]] * 3


def test_anomaly_error_warning_points_at_the_frame_that_runs_the_engine():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with ember.autograd.detect_anomaly():
        y = x.exp()
        y.add_(1)
        with pytest.warns(UserWarning, match="Error detected in ExpBackward0") as record:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()
    found = [w for w in record if "Error detected" in str(w.message)]
    assert found[0].filename.replace("\\", "/").endswith("ember/autograd/__init__.py")
