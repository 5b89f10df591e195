"""Forward-mode transforms (round 26), against closed forms: a custom Function's ``jvp`` runs
under ``func.jvp``/``linearize``/``jacfwd`` (NOTE [Function jvp in the double vjp]), inference
mode inside them gives constants, writes into captured tensors are refused (NOTE [Captured
tensors]), and a captured tensor made to require grad inside keeps results in its graph."""

import numpy as np
import pytest

import ember
from ember.func import grad, jacfwd, jvp, linearize, vjp, vmap

X = np.array([0.5, 1.0, 2.0, -0.7])
T = np.array([1.0, -0.5, 0.25, 2.0])
CAPTURED = ("During a grad (vjp, jvp, grad, etc) transform, the function provided attempted "
            "to call in-place operation ({}) that would mutate a captured Tensor. This is not "
            "supported; please rewrite the function being transformed to explicitly accept "
            "the mutated Tensor(s) as inputs.")


class Square(ember.autograd.Function):
    """x², with a jvp of 10·x·t (not the derivative: a result tells which rule ran)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g

    @staticmethod
    def jvp(ctx, tx):
        x, = ctx.saved_tensors
        return 10 * x * tx


class JvpOnly(ember.autograd.Function):
    """sin, with a jvp of 3·cos(x)·t and no backward."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def jvp(ctx, tx):
        x, = ctx.saved_tensors
        return 3 * x.cos() * tx


class Pair(ember.autograd.Function):
    """(x·y·k, x + y), with jvp ((tx·y + x·ty)·k, 5·(tx + ty))."""

    @staticmethod
    def forward(x, y, k):
        return x * y * k, x + y

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(inputs[0], inputs[1])
        ctx.k = inputs[2]

    @staticmethod
    def backward(ctx, g1, g2):
        return g1, g2, None

    @staticmethod
    def jvp(ctx, tx, ty, tk):
        assert tk is None
        x, y = ctx.saved_tensors
        return (tx * y + x * ty) * ctx.k, 5 * (tx + ty)


def _t(a):
    return ember.tensor(a)


def test_jvp_runs_the_functions_jvp_not_its_backward():
    out, tangent = jvp(Square.apply, (_t(X),), (_t(T),))
    np.testing.assert_allclose(out.numpy(), X * X, rtol=1e-6)
    np.testing.assert_allclose(tangent.numpy(), 10 * X * T, rtol=1e-6)


def test_a_function_with_only_a_jvp_works_inside_a_composition():
    # f(a) = JvpOnly(a²)·a: tangent = 3 cos(a²)·2a·t·a + sin(a²)·t
    _, tangent = jvp(lambda a: JvpOnly.apply(a * a) * a, (_t(X),), (_t(T),))
    expected = 3 * np.cos(X * X) * 2 * X * T * X + np.sin(X * X) * T
    np.testing.assert_allclose(tangent.numpy(), expected, rtol=1e-5)


def test_jvp_of_several_inputs_and_outputs_and_a_constant_input():
    y = X[::-1].copy()
    _, (t1, t2) = jvp(lambda a, b: Pair.apply(a, b, 3.0), (_t(X), _t(y)), (_t(T), _t(-T)))
    np.testing.assert_allclose(t1.numpy(), (T * y - X * T) * 3, rtol=1e-6)
    np.testing.assert_allclose(t2.numpy(), np.zeros(4), atol=1e-7)
    # an input without tangent gets zeros
    _, (t1, t2) = jvp(lambda a: Pair.apply(a, _t(y), 2.0), (_t(X),), (_t(T),))
    np.testing.assert_allclose(t1.numpy(), T * y * 2, rtol=1e-6)
    np.testing.assert_allclose(t2.numpy(), 5 * T, rtol=1e-6)


def test_linearize_jacfwd_and_vmap_of_jvp_run_the_functions_jvp():
    _, lin = linearize(Square.apply, _t(X))
    np.testing.assert_allclose(lin(_t(T)).numpy(), 10 * X * T, rtol=1e-6)
    np.testing.assert_allclose(lin(_t(2 * T)).numpy(), 20 * X * T, rtol=1e-6)
    np.testing.assert_allclose(jacfwd(Square.apply)(_t(X)).numpy(), np.diag(10 * X), rtol=1e-6)
    np.testing.assert_allclose(jacfwd(JvpOnly.apply)(_t(X)).numpy(), np.diag(3 * np.cos(X)),
                               rtol=1e-6, atol=1e-7)
    xs, ts = np.stack([X, T]), np.stack([T, X])
    out = vmap(lambda a, b: jvp(Square.apply, (a,), (b,))[1])(_t(xs), _t(ts))
    np.testing.assert_allclose(out.numpy(), 10 * xs * ts, rtol=1e-6)


def test_reverse_mode_over_the_functions_jvp():
    # d/dx sum(10·x·t) = 10·t
    g = grad(lambda a: jvp(Square.apply, (a,), (_t(T),))[1].sum())(_t(X))
    np.testing.assert_allclose(g.numpy(), 10 * T, rtol=1e-6)
    x = _t(X).requires_grad_()
    _, tangent = jvp(Square.apply, (x,), (_t(T),))
    tangent.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 10 * T, rtol=1e-6)


def test_a_function_called_under_no_grad_inside_jvp_still_runs_its_jvp():
    def f(a):
        with ember.no_grad():
            y = Square.apply(a)
        return y * a
    out, tangent = jvp(f, (_t(X),), (_t(T),))
    np.testing.assert_allclose(out.numpy(), X ** 3, rtol=1e-6)
    np.testing.assert_allclose(tangent.numpy(), 10 * X * T * X + X * X * T, rtol=1e-6)
    assert not out.requires_grad and not tangent.requires_grad
    # reverse mode sees the region as a constant: d/da sum(y·a) = y
    np.testing.assert_allclose(grad(lambda a: f(a).sum())(_t(X)).numpy(), X * X, rtol=1e-6)


def test_a_jvp_returning_the_wrong_number_of_tangents_raises():
    class Bad(Square):
        @staticmethod
        def jvp(ctx, tx):
            return tx, tx
    with pytest.raises(RuntimeError, match=r"Function's jvp returned an invalid number of "
                                           r"forward gradients \(expected 1 but got 2\)"):
        jvp(Bad.apply, (_t(X),), (_t(T),))


def test_inference_mode_inside_jvp_gives_a_constant():
    def f(a):
        with ember.inference_mode():
            c = a * 2
        return c * a
    out, tangent = jvp(f, (_t(X),), (_t(T),))
    np.testing.assert_allclose(out.numpy(), 2 * X * X, rtol=1e-6)
    np.testing.assert_allclose(tangent.numpy(), 2 * X * T, rtol=1e-6)     # c·t only
    np.testing.assert_allclose(jacfwd(f)(_t(X)).numpy(), np.diag(2 * X), rtol=1e-6)
    _, lin = linearize(f, _t(X))
    np.testing.assert_allclose(lin(_t(T)).numpy(), 2 * X * T, rtol=1e-6)


def test_inference_mode_inside_grad_still_refuses():
    def f(a):
        with ember.inference_mode():
            c = a * 2
        return (c * a).sum()
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        grad(f)(_t(X))


@pytest.mark.parametrize("transform", ["jvp", "grad", "vjp", "jacfwd"])
@pytest.mark.parametrize("write, name", [
    (lambda cap, a: cap.add_(a), "aten::add_.Tensor"),
    (lambda cap, a: cap.mul_(2.0), "aten::mul_.Tensor"),
    (lambda cap, a: cap.fill_(1.0), "aten::fill_.Scalar"),
    (lambda cap, a: cap.copy_(a.detach()), "aten::copy_"),
    (lambda cap, a: cap.__setitem__(1, 2.0), "aten::copy_"),
    (lambda cap, a: cap.__setitem__(ember.tensor([0, 3]), 2.0), "aten::index_put_"),
    (lambda cap, a: cap[1:].exp_(), "aten::exp_"),
    (lambda cap, a: cap.detach().add_(1.0), "aten::add_.Tensor")])
def test_writing_into_a_captured_tensor_raises(transform, write, name):
    cap = ember.zeros(4)

    def f(a):
        with ember.no_grad():
            write(cap, a)
        return a * 2
    run = {"jvp": lambda: jvp(f, (_t(X),), (_t(T),)),
           "grad": lambda: grad(lambda a: f(a).sum())(_t(X)),
           "vjp": lambda: vjp(f, _t(X)),
           "jacfwd": lambda: jacfwd(f)(_t(X))}[transform]
    with pytest.raises(RuntimeError) as info:
        run()
    assert str(info.value) == CAPTURED.format(name)
    np.testing.assert_array_equal(cap.numpy(), np.zeros(4))       # refused before writing


def test_writes_into_what_the_function_made_or_was_given_run():
    cap = ember.ones(4)

    def f(a):
        y = ember.zeros(4)
        y.add_(a)
        y[0] = 5.0
        c = cap.clone()
        c.mul_(a)
        return y * a + c
    out, tangent = jvp(f, (_t(X),), (_t(T),))
    y = np.concatenate([[5.0], X[1:]])
    dy = np.concatenate([[0.0], T[1:]])
    np.testing.assert_allclose(out.numpy(), y * X + X, rtol=1e-6)
    np.testing.assert_allclose(tangent.numpy(), dy * X + y * T + T, rtol=1e-6)
    np.testing.assert_array_equal(cap.numpy(), np.ones(4))
    # vmap and linearize do not refuse
    buf = ember.zeros(4)

    def g(a):
        with ember.no_grad():
            buf.add_(1.0)
        return a * 3
    _, lin = linearize(g, _t(X))
    np.testing.assert_allclose(lin(_t(T)).numpy(), 3 * T, rtol=1e-6)
    # (PyTorch's linearize runs g twice: for the output, then traced for the jvp)
    np.testing.assert_array_equal(buf.numpy(), np.full(4, 2.0))


def test_batch_norm_in_train_mode_inside_jvp_raises_before_touching_its_statistics():
    bn = ember.nn.BatchNorm1d(4)
    x = ember.tensor(np.outer(T, X), dtype=ember.float32)
    with pytest.raises(RuntimeError, match=r"\(aten::add_\.Tensor\) that would mutate a "
                                           r"captured Tensor"):
        jvp(bn, (x,), (x,))
    assert int(bn.num_batches_tracked) == 0
    np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(4))
    bn.eval()       # eval mode reads the statistics only
    _, tangent = jvp(bn, (x,), (x,))
    np.testing.assert_allclose(tangent.detach().numpy(), np.outer(T, X) / np.sqrt(1 + 1e-5),
                               rtol=1e-5)


def test_captured_tensor_made_to_require_grad_keeps_jvp_results_in_its_graph():
    w = ember.tensor(X[::-1].copy())

    def f(a):
        w.requires_grad = True
        return a * w
    out, tangent = jvp(f, (_t(X),), (_t(T),))
    assert out.requires_grad and tangent.requires_grad
    tangent.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), T, rtol=1e-6)


def test_tensor_made_inside_and_made_to_require_grad_stays_the_transforms_own():
    def f(a):
        v = ember.tensor(X[::-1].copy())
        v.requires_grad = True
        return a * v
    out, tangent = jvp(f, (_t(X),), (_t(T),))
    assert not out.requires_grad and not tangent.requires_grad
    np.testing.assert_allclose(tangent.numpy(), T * X[::-1], rtol=1e-6)


@pytest.mark.parametrize("transform", ["jvp", "grad", "vjp"])
@pytest.mark.parametrize("write", ["detach", "data", "view_of_detach", "detach_of_view",
                                   "view_under_no_grad"])
def test_writing_through_an_alias_of_an_input_that_is_a_view_runs(transform, write):
    # the input is x[1], a view of a tensor made outside: its detach shares x's memory as
    # x[1].detach() would, yet it is the function's own (review rc)
    x = _t(np.stack([X, T]))

    def f(a):
        with ember.no_grad():
            {"detach": lambda: a.detach().add_(1.0),
             "data": lambda: a.data.add_(1.0),
             "view_of_detach": lambda: a.detach()[1:].add_(1.0),
             "detach_of_view": lambda: a[1:].detach().add_(1.0),
             "view_under_no_grad": lambda: a[1:].add_(1.0)}[write]()
        return a * 2
    {"jvp": lambda: jvp(f, (x[1],), (_t(T),)),
     "grad": lambda: grad(lambda a: f(a).sum())(x[1]),
     "vjp": lambda: vjp(f, x[1])}[transform]()
    written = T + (1.0 if write in ("detach", "data") else np.array([0.0, 1.0, 1.0, 1.0]))
    np.testing.assert_allclose(x.numpy(), np.stack([X, written]), rtol=1e-6)


@pytest.mark.parametrize("source", ["x", "x[0]"])
def test_a_detach_of_a_captured_tensor_made_inside_is_still_refused(source):
    x = _t(np.stack([X, T]))

    def f(a):
        with ember.no_grad():
            (x if source == "x" else x[0]).detach().add_(1.0)
        return a * 2
    with pytest.raises(RuntimeError, match=r"\(aten::add_\.Tensor\) that would mutate a "
                                           r"captured Tensor"):
        grad(lambda a: f(a).sum())(x[1])
    np.testing.assert_array_equal(x.numpy(), np.stack([X, T]))


class NonDifferentiableSecond(ember.autograd.Function):
    """(2x, 3x), the second marked non-differentiable; its jvp gives a tangent to both."""

    @staticmethod
    def forward(x):
        return x * 2, x * 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, g, _):
        return 2 * g

    @staticmethod
    def jvp(ctx, tx):
        return 2 * tx, 3 * tx


@pytest.mark.parametrize("transform", ["jvp", "linearize", "no_grad"])
def test_a_jvp_giving_a_non_differentiable_output_a_tangent_raises(transform):
    def under_no_grad(a):
        with ember.no_grad():
            y = NonDifferentiableSecond.apply(a)[0]
        return y * a
    run = {"jvp": lambda: jvp(NonDifferentiableSecond.apply, (_t(X),), (_t(T),)),
           "linearize": lambda: linearize(lambda a: NonDifferentiableSecond.apply(a)[0],
                                          _t(X))[1](_t(T)),
           "no_grad": lambda: jvp(under_no_grad, (_t(X),), (_t(T),))}[transform]
    with pytest.raises(RuntimeError) as info:
        run()
    assert str(info.value) == ("Function's jvp returned a gradient at position 1, but  the "
                               "corresponding forward output is not a differentiable Tensor."
                               "You should return None at that position instead.")


def test_inference_mode_inside_jvp_under_grad_refuses():
    def f(a):
        with ember.inference_mode():
            c = a * 2
        return c * a
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        grad(lambda a: jvp(f, (a,), (_t(T),))[1].sum())(_t(X))


def test_an_alias_of_a_captured_tensor_made_in_an_inner_transform_stays_captured_outside_it():
    # the alias's id may be that of a tensor the outer function made and dropped: it must not
    # count as the outer function's own for that (review rc)
    cap = ember.zeros(4)
    outcomes = []

    def outer(a):
        for _ in range(10):
            box = []

            def inner(b):
                box.append(cap.detach())
                return b * 2
            jvp(inner, (a,), (a,))
            with ember.no_grad():
                try:
                    box[0].add_(1.0)
                    outcomes.append("runs")
                except RuntimeError as e:
                    outcomes.append(str(e))
        return a * 1
    grad(lambda a: outer(a).sum())(_t(X))
    assert outcomes == [CAPTURED.format("aten::add_.Tensor")] * 10
    np.testing.assert_array_equal(cap.numpy(), np.zeros(4))


# ----- the writes that are not registry ops, and the aliases' writes, are refused by name ------

@pytest.mark.parametrize("write, name", [
    (lambda cap, a: cap.uniform_(), "aten::uniform_"),
    (lambda cap, a: cap.normal_(), "aten::normal_"),
    (lambda cap, a: cap.bernoulli_(0.5), "aten::bernoulli_.float"),
    (lambda cap, a: cap.bernoulli_(ember.full((4,), 0.5)), "aten::bernoulli_.Tensor"),
    (lambda cap, a: cap.random_(), "aten::random_"),
    (lambda cap, a: cap.random_(5), "aten::random_.to"),
    (lambda cap, a: cap.random_(1, 5), "aten::random_.from"),
    (lambda cap, a: cap.exponential_(), "aten::exponential_"),
    (lambda cap, a: cap.cauchy_(), "aten::cauchy_"),
    (lambda cap, a: ember.nn.init.normal_(cap), "aten::normal_"),
    (lambda cap, a: cap.resize_(4), "aten::resize_"),
    (lambda cap, a: cap.resize_(9), "aten::resize_"),
    (lambda cap, a: cap.resize_as_(a), "aten::resize_as_"),
    (lambda cap, a: cap.zero_(), "aten::zero_"),
    (lambda cap, a: ember.nn.init.zeros_(cap), "aten::zero_"),
    (lambda cap, a: cap.detach_(), "aten::detach_"),
    (lambda cap, a: cap.set_(), "aten::set_"),
    (lambda cap, a: cap.set_(a.detach().float()), "aten::set_.source_Tensor"),
    (lambda cap, a: cap.greater_(a), "aten::greater_.Tensor"),
    (lambda cap, a: cap.less_equal_(1), "aten::less_equal_.Scalar"),
    (lambda cap, a: cap.not_equal_(1), "aten::not_equal_.Scalar"),
    (lambda cap, a: cap.true_divide_(2), "aten::true_divide_.Tensor"),
    (lambda cap, a: cap.divide_(2, rounding_mode="trunc"), "aten::divide_.Tensor_mode"),
    (lambda cap, a: cap.clip_(0, 1), "aten::clip_"),
    (lambda cap, a: cap.clip_(min=a), "aten::clip_.Tensor"),
    (lambda cap, a: cap.arccos_(), "aten::arccos_"),
    (lambda cap, a: cap.view(2, 2).swapdims_(0, 1), "aten::swapdims_"),
    (lambda cap, a: cap.view(2, 2).swapaxes_(0, 1), "aten::swapaxes_"),
    (lambda cap, a: ember.nn.functional.dropout(cap, 0.5, True, True), "aten::mul_.Tensor"),
    (lambda cap, a: ember.nn.functional.rrelu(cap, inplace=True), "aten::rrelu_"),
    (lambda cap, a: ember.nn.functional.relu6(cap, inplace=True), "aten::relu6_"),
    (lambda cap, a: ember.nn.functional.selu(cap, inplace=True), "aten::selu_"),
    (lambda cap, a: ember.nn.functional.silu(cap, inplace=True), "aten::silu_")])
def test_the_refusal_names_the_call_made(write, name):
    cap = ember.zeros(4)

    def f(a):
        with ember.no_grad():
            write(cap, a)
        return a * 2
    with pytest.raises(RuntimeError) as info:
        grad(lambda a: f(a).sum())(_t(X))
    assert str(info.value) == CAPTURED.format(name)
    assert cap.shape == (4,) and cap.dtype == ember.float32
    np.testing.assert_array_equal(cap.numpy(), np.zeros(4))


def test_a_refused_sample_draws_nothing_and_comes_after_only_the_type_checks():
    cap = ember.zeros(3)

    def refused(write):
        def f(a):
            write()
            return a * 2
        with pytest.raises(RuntimeError, match=r"aten::uniform_\) that would mutate"):
            grad(lambda a: f(a).sum())(_t(X))
    ember.manual_seed(0)
    refused(lambda: cap.uniform_())
    refused(lambda: cap.uniform_(2.0, 1.0))      # (bounds PyTorch's kernel would refuse)
    after = ember.rand(3).numpy()
    ember.manual_seed(0)
    np.testing.assert_array_equal(after, ember.rand(3).numpy())
    with pytest.raises(TypeError, match="generator"):
        grad(lambda a: (cap.uniform_(generator=1) * 0 + a).sum())(_t(X))


def test_sampling_resizing_and_setting_what_the_function_made_run():
    def f(a):
        made = ember.zeros(4, dtype=a.dtype)
        made.bernoulli_(1.0)            # ones
        made.resize_(6)
        made.zero_()
        made.set_(a.detach() * 3)
        made.greater_(1.0)              # 3x > 1: [1, 1, 1, 0]
        made.view(2, 2).swapaxes_(0, 1)
        made.detach_()
        return a * made.sum()
    np.testing.assert_allclose(grad(lambda a: f(a).sum())(_t(X)).numpy(), np.full(4, 3.0))


def test_vmap_and_linearize_let_their_function_resize_and_zero_a_captured_tensor():
    buf = ember.ones(4)

    def g(a):
        buf.zero_()
        buf.resize_(2)
        return a * 3
    _, lin = linearize(g, _t(X))
    np.testing.assert_allclose(lin(_t(T)).numpy(), 3 * T, rtol=1e-6)
    np.testing.assert_array_equal(buf.numpy(), np.zeros(2))
    other = ember.ones(3)
    vmap(lambda a: other.zero_() * 0 + a)(_t(X))
    np.testing.assert_array_equal(other.numpy(), np.zeros(3))
