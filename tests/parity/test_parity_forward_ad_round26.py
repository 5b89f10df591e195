"""Forward-mode transforms against PyTorch (round 26): a custom Function's own ``jvp`` under
``func.jvp``/``linearize``/``jacfwd`` (NOTE [Function jvp in the double vjp]), inference
mode inside them, in-place writes into captured tensors (NOTE [Captured tensors]), and
``requires_grad = True`` on a captured tensor inside a transform."""

import numpy as np
import pytest

import ember
from tests.parity._compare import as_array

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_X = np.array([0.5, 1.0, 2.0, -0.7])
_T = np.array([1.0, -0.5, 0.25, 2.0])


def _args(lib):
    return lib.tensor(_X), lib.tensor(_T)


def _functions(lib):
    """Custom Functions whose jvp differs on purpose from their backward's derivative, so
    that a result tells which rule ran."""

    class Square(lib.autograd.Function):
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

    class JvpOnly(lib.autograd.Function):       # no backward at all
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

    class Pair(lib.autograd.Function):          # two inputs, two outputs, a non-tensor arg
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

    class ExpOut(lib.autograd.Function):        # saves its output for both rules
        @staticmethod
        def forward(x):
            return x.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)
            ctx.save_for_forward(output)

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * y

        @staticmethod
        def jvp(ctx, tx):
            y, = ctx.saved_tensors
            return 2 * tx * y

    return Square, JvpOnly, Pair, ExpOut


def _both(run):
    out_e, out_t = run(ember), run(torch)
    flat_e = out_e if isinstance(out_e, (tuple, list)) else (out_e,)
    flat_t = out_t if isinstance(out_t, (tuple, list)) else (out_t,)
    assert len(flat_e) == len(flat_t)
    for a, b in zip(flat_e, flat_t):
        np.testing.assert_allclose(as_array(a), as_array(b), rtol=1e-6, atol=1e-12)


def _jvp_square(lib):
    x, t = _args(lib)
    return lib.func.jvp(_functions(lib)[0].apply, (x,), (t,))


def _jvp_only(lib):
    x, t = _args(lib)
    return lib.func.jvp(lambda a: _functions(lib)[1].apply(a * a) * a, (x,), (t,))


def _jvp_pair(lib):
    x, t = _args(lib)
    pair = _functions(lib)[2]
    return lib.func.jvp(lambda a, b: pair.apply(a, b, 3.0), (x, x + 1), (t, -t))[1]


def _jvp_pair_one_constant(lib):
    x, t = _args(lib)
    pair = _functions(lib)[2]
    return lib.func.jvp(lambda a: pair.apply(a, x.flip(0), 2.0), (x,), (t,))[1]


def _linearize_square(lib):
    x, t = _args(lib)
    _, jvp_fn = lib.func.linearize(_functions(lib)[0].apply, x)
    return jvp_fn(t), jvp_fn(2 * t)


def _jacfwd_square(lib):
    x, _ = _args(lib)
    return lib.func.jacfwd(_functions(lib)[0].apply)(x)


def _jacfwd_jvp_only(lib):
    x, _ = _args(lib)
    return lib.func.jacfwd(_functions(lib)[1].apply)(x)


def _vmap_jvp_square(lib):
    x, t = _args(lib)
    square = _functions(lib)[0]
    xs, ts = lib.stack([x, t]), lib.stack([t, x])
    return lib.func.vmap(lambda a, b: lib.func.jvp(square.apply, (a,), (b,))[1])(xs, ts)


def _grad_of_jvp(lib):
    x, t = _args(lib)
    exp_out = _functions(lib)[3]
    return lib.func.grad(lambda a: lib.func.jvp(exp_out.apply, (a,), (t,))[1].sum())(x)


def _backward_of_jvp(lib):
    x, t = _args(lib)
    x.requires_grad_()
    _, tangent = lib.func.jvp(_functions(lib)[3].apply, (x,), (t,))
    tangent.sum().backward()
    return x.grad


def _jvp_of_grad(lib):
    x, t = _args(lib)
    exp_out = _functions(lib)[3]
    return lib.func.jvp(lib.func.grad(lambda a: exp_out.apply(a).sum()), (x,), (t,))


def _jvp_under_no_grad(lib):
    x, t = _args(lib)
    square = _functions(lib)[0]

    def f(a):
        with lib.no_grad():
            y = square.apply(a)
        return y * a
    out, tangent = lib.func.jvp(f, (x,), (t,))
    return out, tangent, lib.func.grad(lambda a: f(a).sum())(x)


@pytest.mark.parametrize("run", [_jvp_square, _jvp_only, _jvp_pair, _jvp_pair_one_constant,
                                 _linearize_square, _jacfwd_square, _jacfwd_jvp_only,
                                 _vmap_jvp_square, _grad_of_jvp, _backward_of_jvp,
                                 _jvp_of_grad, _jvp_under_no_grad])
def test_custom_function_jvp_runs_under_forward_mode_transforms(run):
    _both(run)


@pytest.mark.parametrize("wrong", ["count", "shape"])
def test_function_jvp_returning_wrong_tangents_raises_as_torch(wrong):
    def run(lib):
        class Bad(lib.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 2

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, g):
                return g * 2

            @staticmethod
            def jvp(ctx, tx):
                return (tx, tx) if wrong == "count" else tx[:2]
        x, t = _args(lib)
        with pytest.raises(RuntimeError) as info:
            lib.func.jvp(Bad.apply, (x,), (t,))
        return str(info.value)
    assert run(ember) == run(torch)


# ----- inference mode inside forward-mode transforms -------------------------------------------

def _inference_product(lib):
    def f(a):
        with lib.inference_mode():
            c = a * 2           # an inference tensor: a constant, without tangent
        return c * a
    return f


def _inference_sum(lib):
    def f(a):
        with lib.inference_mode():
            s = a.sum()
        return a / s
    return f


@pytest.mark.parametrize("make", [_inference_product, _inference_sum])
def test_inference_mode_inside_jvp_computes_as_torch(make):
    def run(lib):
        x, t = _args(lib)
        out, tangent = lib.func.jvp(make(lib), (x,), (t,))
        _, lin = lib.func.linearize(make(lib), x)
        return out, tangent, lib.func.jacfwd(make(lib))(x), lin(t)
    _both(run)


def test_inference_weight_made_before_jvp_is_a_constant_as_torch():
    def run(lib):
        x, t = _args(lib)
        with lib.inference_mode():
            w = lib.tensor(_X[::-1].copy())
        return lib.func.jvp(lambda a: (a * w).sin(), (x,), (t,))
    _both(run)


def test_inference_mode_inside_grad_still_refuses_as_torch():
    def run(lib):
        x, _ = _args(lib)
        with pytest.raises(RuntimeError) as info:
            lib.func.grad(lambda a: _inference_product(lib)(a).sum())(x)
        return str(info.value)
    assert run(ember) == run(torch)


# ----- in-place writes into captured tensors --------------------------------------------------

def _writes(lib):
    cap = lib.zeros(4)
    return cap, {
        "add_": lambda a: cap.add_(a),
        "add_number": lambda a: cap.add_(1.0),
        "mul_": lambda a: cap.mul_(2.0),
        "copy_": lambda a: cap.copy_(a.detach()),
        "fill_": lambda a: cap.fill_(3.0),
        "setitem": lambda a: cap.__setitem__(0, 1.0),
        "setitem_advanced": lambda a: cap.__setitem__(lib.tensor([0, 2]), 1.0),
        "view_add_": lambda a: cap[:2].add_(1.0),
        "detach_add_": lambda a: cap.detach().add_(1.0),
        "no_grad_add_": lambda a: lib.no_grad()(lambda: cap.add_(a))(),
        "exp_": lambda a: cap.exp_(),
    }


def _transforms(lib):
    x, t = _args(lib)
    return {
        "jvp": lambda f: lib.func.jvp(f, (x,), (t,)),
        "grad": lambda f: lib.func.grad(lambda a: f(a).sum())(x),
        "vjp": lambda f: lib.func.vjp(f, x),
        "jacrev": lambda f: lib.func.jacrev(f)(x),
        "jacfwd": lambda f: lib.func.jacfwd(f)(x),
        "hessian": lambda f: lib.func.hessian(lambda a: f(a).sum())(x),
    }


def _outcome(lib, transform, write):
    cap, writes = _writes(lib)

    def f(a):
        writes[write](a)
        return a * 2
    try:
        _transforms(lib)[transform](f)
    except RuntimeError as e:
        return "raises", str(e), as_array(cap).tolist()
    return "runs", None, as_array(cap).tolist()


@pytest.mark.parametrize("write", ["add_", "add_number", "mul_", "copy_", "fill_", "setitem",
                                   "setitem_advanced", "view_add_", "detach_add_",
                                   "no_grad_add_", "exp_"])
@pytest.mark.parametrize("transform", ["jvp", "grad", "vjp", "jacrev", "jacfwd", "hessian"])
def test_writing_into_a_captured_tensor_raises_as_torch(transform, write):
    ours, theirs = _outcome(ember, transform, write), _outcome(torch, transform, write)
    assert ours == theirs
    assert theirs[0] == "raises"


def test_writes_into_tensors_the_function_made_run_as_torch():
    def run(lib):
        x, t = _args(lib)
        cap = lib.ones(4)

        def f(a):
            y = lib.zeros(4)
            y.add_(a)
            y[0] = 5.0
            c = cap.clone()
            c.mul_(a)
            return y * a + c
        out = lib.func.jvp(f, (x,), (t,))
        return out + (lib.func.grad(lambda a: f(a).sum())(x), lib.func.jacfwd(f)(x))
    _both(run)


def test_linearize_lets_its_function_write_into_a_captured_tensor_as_torch():
    def run(lib):
        x, t = _args(lib)
        cap = lib.zeros(4)

        def f(a):
            with lib.no_grad():
                cap.add_(1.0)
            return a * 3
        _, lin = lib.func.linearize(f, x)
        written = as_array(cap)     # (torch runs f more than once: count no calls)
        assert (written >= 1).all() and (written == written[0]).all()
        return lin(t)
    _both(run)


def test_batch_norm_in_train_mode_inside_jvp_raises_as_torch():
    def run(lib):
        lib.manual_seed(0)
        bn = lib.nn.BatchNorm1d(4)
        x = lib.tensor(np.outer(_T, _X))
        with pytest.raises(RuntimeError) as info:
            lib.func.jvp(bn, (x,), (x,))
        return str(info.value).splitlines()[0], as_array(bn.running_mean).tolist(), \
            int(bn.num_batches_tracked)
    assert run(ember) == run(torch)


def test_nested_transform_refuses_writing_into_what_the_outer_function_made():
    def run(lib):
        x, t = _args(lib)

        def outer(a):
            made = lib.zeros(4)

            def inner(b):
                made.add_(b)
                return b
            return lib.func.jvp(inner, (a,), (a,))[1]
        with pytest.raises(RuntimeError) as info:
            lib.func.jvp(outer, (x,), (t,))
        return str(info.value)
    assert run(ember) == run(torch)


# ----- requires_grad = True on a captured tensor inside a transform ---------------------------

@pytest.mark.parametrize("transform", ["jvp", "grad", "vjp"])
def test_captured_tensor_made_to_require_grad_keeps_results_in_its_graph(transform):
    def run(lib):
        x, t = _args(lib)
        w = lib.tensor(_X[::-1].copy())

        def f(a):
            w.requires_grad = True
            return a * w
        if transform == "jvp":
            outs = lib.func.jvp(f, (x,), (t,))
        elif transform == "grad":
            outs = (lib.func.grad(lambda a: f(a).sum())(x),)
        else:
            outs = (lib.func.vjp(f, x)[0],)
        flags = [o.requires_grad for o in outs]
        outs[-1].sum().backward()
        return flags, as_array(w.grad).tolist()
    assert run(ember) == run(torch)


def test_tensor_made_inside_and_made_to_require_grad_stays_the_transforms_own():
    def run(lib):
        x, t = _args(lib)

        def f(a):
            v = lib.tensor(_X[::-1].copy())
            v.requires_grad = True
            return a * v
        out, tangent = lib.func.jvp(f, (x,), (t,))
        return out.requires_grad, tangent.requires_grad, as_array(tangent).tolist()
    assert run(ember) == run(torch)


# ----- review rc: aliases of an input that is a view; non-differentiable outputs; grad(jvp) ----

_ALIAS_WRITES = {
    "input_detach": lambda a, x: a.detach().add_(1.0),
    "input_data": lambda a, x: a.data.add_(1.0),
    "input_detach_twice": lambda a, x: a.detach().detach().add_(1.0),
    "input_view_detach": lambda a, x: a[1:].detach().add_(1.0),
    "input_detach_view": lambda a, x: a.detach()[1:].add_(1.0),
    "input_view": lambda a, x: a[1:].add_(1.0),
    "input_parameter": lambda a, x: lib_parameter(a).add_(1.0),
    "captured_detach": lambda a, x: x.detach().add_(1.0),
    "captured_row_detach": lambda a, x: x[0].detach().add_(1.0),
    "captured_same_row_detach": lambda a, x: x[1].detach().add_(1.0),
    "captured_data": lambda a, x: x.data.add_(1.0),
}


def lib_parameter(a):
    lib = ember if isinstance(a, ember.Tensor) else torch
    return lib.nn.Parameter(a.detach(), requires_grad=False)


@pytest.mark.parametrize("write", sorted(_ALIAS_WRITES))
@pytest.mark.parametrize("transform", ["jvp", "grad", "vjp", "jacrev"])
def test_writes_through_aliases_of_an_input_that_is_a_view_as_torch(transform, write):
    def run(lib):
        x = lib.tensor(np.stack([_X, _T]))

        def f(a):
            with lib.no_grad():
                _ALIAS_WRITES[write](a, x)
            return a * a
        t = lib.tensor(_T)
        try:
            {"jvp": lambda: lib.func.jvp(f, (x[1],), (t,)),
             "grad": lambda: lib.func.grad(lambda a: f(a).sum())(x[1]),
             "vjp": lambda: lib.func.vjp(f, x[1]),
             "jacrev": lambda: lib.func.jacrev(f)(x[1])}[transform]()
        except RuntimeError as e:
            return "raises", str(e), as_array(x).tolist()
        return "runs", None, as_array(x).tolist()
    assert run(ember) == run(torch)


def _non_differentiable(lib, second):
    class TwoOutputs(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2, second(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            if output[1].is_floating_point():
                ctx.mark_non_differentiable(output[1])

        @staticmethod
        def backward(ctx, g, _):
            return 2 * g

        @staticmethod
        def jvp(ctx, tx):
            return 2 * tx, tx
    return TwoOutputs


@pytest.mark.parametrize("second", ["marked", "bool", "int64"])
@pytest.mark.parametrize("transform", ["jvp", "linearize", "first_output_only"])
def test_a_jvp_giving_a_non_differentiable_output_a_tangent_raises_as_torch(transform, second):
    def run(lib):
        fn = _non_differentiable(lib, {"marked": lambda x: x * 3, "bool": lambda x: x > 0.6,
                                       "int64": lambda x: x.long()}[second])
        x, t = _args(lib)
        with pytest.raises(RuntimeError) as info:
            if transform == "jvp":
                lib.func.jvp(fn.apply, (x,), (t,))
            elif transform == "linearize":
                lib.func.linearize(fn.apply, x)[1](t)
            else:
                lib.func.jvp(lambda a: fn.apply(a)[0], (x,), (t,))
        return str(info.value)
    assert run(ember) == run(torch)


def test_inference_mode_inside_jvp_under_grad_refuses_as_torch():
    def run(lib):
        x, t = _args(lib)
        with pytest.raises(RuntimeError) as info:
            lib.func.grad(lambda a: lib.func.jvp(_inference_product(lib), (a,), (t,))[1]
                          .sum())(x)
        return str(info.value)
    assert run(ember) == run(torch)


_OVERLOADED_WRITES = {
    "scatter_src": lambda c, a: c.scatter_(0, _index(a), a[:2]),
    "scatter_value": lambda c, a: c.scatter_(0, _index(a), 2.0),
    "scatter_reduce": lambda c, a: c.scatter_(0, _index(a), a[:2], reduce="add"),
    "scatter_value_reduce": lambda c, a: c.scatter_(0, _index(a), 2.0, reduce="multiply"),
    "scatter_reduce_": lambda c, a: c.scatter_reduce_(0, _index(a), a[:2], "sum"),
    "div_mode": lambda c, a: c.div_(2, rounding_mode="floor"),
    "div_tensor_mode": lambda c, a: c.div_(a, rounding_mode="trunc"),
    "floor_divide": lambda c, a: c.floor_divide_(2),
    "index_fill_scalar": lambda c, a: c.index_fill_(0, _index(a)[:1], 2.0),
    "index_fill_tensor": lambda c, a: c.index_fill_(0, _index(a)[:1], a.new_tensor(2.0)),
    "remainder_scalar": lambda c, a: c.remainder_(2),
    "fmod_tensor": lambda c, a: c.fmod_(a),
    "eq_scalar": lambda c, a: c.eq_(1),
    "ne_tensor": lambda c, a: c.ne_(a),
    "copysign_scalar": lambda c, a: c.copysign_(-1.0),
    "xlogy_scalar": lambda c, a: c.xlogy_(2.0),
    "xlogy_tensor": lambda c, a: c.xlogy_(a),
    "float_power_scalar": lambda c, a: c.float_power_(2.0),
    "clamp_scalars": lambda c, a: c.clamp_(0, 1),
    "clamp_tensor": lambda c, a: c.clamp_(min=a),
    "clamp_max_tensor": lambda c, a: c.clamp_max_(a),
    "clamp_min_scalar": lambda c, a: c.clamp_min_(0.0),
    "sub_alpha": lambda c, a: c.sub_(a, alpha=2),
    "addcmul": lambda c, a: c.addcmul_(a, a),
}


def _index(a):
    return (ember if isinstance(a, ember.Tensor) else torch).tensor([0, 1])


@pytest.mark.parametrize("write", sorted(_OVERLOADED_WRITES))
def test_the_refusal_names_the_overload_as_torch(write):
    def run(lib):
        cap = lib.zeros(4, dtype=lib.float64)

        def f(a):
            with lib.no_grad():
                _OVERLOADED_WRITES[write](cap, a)
            return a * 2
        with pytest.raises(RuntimeError) as info:
            lib.func.grad(lambda a: f(a).sum())(lib.tensor(_X))
        return str(info.value)
    assert run(ember) == run(torch)


# ----- refusals of the writes that are not registry ops, and of the aliases' writes -----------

_NAMED_WRITES = {
    "uniform_": lambda c, a: c.uniform_(),
    "uniform_bad_bounds": lambda c, a: c.uniform_(2.0, 1.0),   # refused before the bounds
    "normal_": lambda c, a: c.normal_(),
    "bernoulli_float": lambda c, a: c.bernoulli_(0.5),
    "bernoulli_tensor": lambda c, a: c.bernoulli_(a.detach() * 0 + 0.5),
    "exponential_": lambda c, a: c.exponential_(),
    "geometric_": lambda c, a: c.geometric_(0.5),
    "log_normal_": lambda c, a: c.log_normal_(),
    "cauchy_": lambda c, a: c.cauchy_(),
    "random_": lambda c, a: c.random_(),
    "random_to": lambda c, a: c.random_(5),
    "random_from": lambda c, a: c.random_(1, 5),
    "resize_same": lambda c, a: c.resize_(4),
    "resize_grow": lambda c, a: c.resize_(6),
    "resize_as_": lambda c, a: c.resize_as_(a),
    "zero_": lambda c, a: c.zero_(),
    "detach_": lambda c, a: c.detach_(),
    "set_tensor": lambda c, a: c.set_(a.detach().clone()),
    "set_empty": lambda c, a: c.set_(),
    "set_tensor_offset": lambda c, a: c.set_(a.detach().clone(), 0, (4,)),
    "greater_scalar": lambda c, a: c.greater_(1),
    "greater_tensor": lambda c, a: c.greater_(a),
    "greater_equal": lambda c, a: c.greater_equal_(1),
    "less": lambda c, a: c.less_(1),
    "less_equal": lambda c, a: c.less_equal_(1),
    "not_equal_scalar": lambda c, a: c.not_equal_(1),
    "not_equal_tensor": lambda c, a: c.not_equal_(a),
    "true_divide": lambda c, a: c.true_divide_(2),
    "divide": lambda c, a: c.divide_(a),
    "divide_mode": lambda c, a: c.divide_(2, rounding_mode="floor"),
    "multiply": lambda c, a: c.multiply_(2),
    "subtract": lambda c, a: c.subtract_(a),
    "clip_scalars": lambda c, a: c.clip_(0, 1),
    "clip_tensor": lambda c, a: c.clip_(a, a + 1),
    "absolute": lambda c, a: c.absolute_(),
    "arccos": lambda c, a: c.arccos_(),
    "negative": lambda c, a: c.negative_(),
    "fix": lambda c, a: c.fix_(),
    "swapdims": lambda c, a: c.view(2, 2).swapdims_(0, 1),
    "swapaxes": lambda c, a: c.view(2, 2).swapaxes_(0, 1),
}


def _lib_of(a):
    return torch if isinstance(a, torch.Tensor) else ember


_NAMED_WRITES.update({
    "init_uniform_": lambda c, a: _lib_of(a).nn.init.uniform_(c),
    "init_zeros_": lambda c, a: _lib_of(a).nn.init.zeros_(c),
    "dropout": lambda c, a: _lib_of(a).nn.functional.dropout(c, 0.5, True, inplace=True),
    "dropout_p1": lambda c, a: _lib_of(a).nn.functional.dropout(c, 1.0, True, inplace=True),
    "alpha_dropout": lambda c, a: _lib_of(a).nn.functional.alpha_dropout(c, 0.5, True, True),
    "rrelu_training": lambda c, a: _lib_of(a).nn.functional.rrelu(c, training=True,
                                                                   inplace=True),
    "rrelu_eval": lambda c, a: _lib_of(a).nn.functional.rrelu(c, inplace=True),
    "relu6": lambda c, a: _lib_of(a).nn.functional.relu6(c, inplace=True),
    "hardtanh": lambda c, a: _lib_of(a).nn.functional.hardtanh(c, inplace=True),
    "leaky_relu": lambda c, a: _lib_of(a).nn.functional.leaky_relu(c, inplace=True),
    "elu": lambda c, a: _lib_of(a).nn.functional.elu(c, inplace=True),
    "selu": lambda c, a: _lib_of(a).nn.functional.selu(c, inplace=True),
    "celu": lambda c, a: _lib_of(a).nn.functional.celu(c, inplace=True),
    "silu": lambda c, a: _lib_of(a).nn.functional.silu(c, inplace=True),
    "hardswish": lambda c, a: _lib_of(a).nn.functional.hardswish(c, inplace=True),
})


@pytest.mark.parametrize("grad_mode", ["no_grad", "enabled"])
@pytest.mark.parametrize("write", sorted(_NAMED_WRITES))
def test_the_refusal_names_the_call_as_torch(write, grad_mode):
    def run(lib):
        cap = lib.zeros(4)

        def f(a):
            if grad_mode == "no_grad":
                with lib.no_grad():
                    _NAMED_WRITES[write](cap, a)
            else:
                _NAMED_WRITES[write](cap, a)
            return a * 2
        with pytest.raises(RuntimeError) as info:
            lib.func.grad(lambda a: f(a).sum())(lib.tensor(_X, dtype=lib.float32))
        return str(info.value), cap.shape, as_array(cap).tolist()
    assert run(ember) == run(torch)


@pytest.mark.parametrize("transform", ["jvp", "vjp", "jacrev", "jacfwd", "hessian"])
@pytest.mark.parametrize("write", ["uniform_", "bernoulli_float", "random_from", "resize_grow",
                                   "zero_", "greater_tensor", "swapaxes", "dropout"])
def test_every_tracing_transform_refuses_the_named_writes_as_torch(transform, write):
    def run(lib):
        cap = lib.zeros(4)

        def f(a):
            with lib.no_grad():
                _NAMED_WRITES[write](cap, a)
            return a * 2
        with pytest.raises(RuntimeError) as info:
            _transforms(lib)[transform](lambda a: f(a.float()))
        return str(info.value), as_array(cap).tolist()
    assert run(ember) == run(torch)


def test_writes_of_these_kinds_into_what_the_function_made_run_as_torch():
    def run(lib):
        def f(a):
            made = lib.zeros(4, dtype=a.dtype)
            made.uniform_()
            made.bernoulli_(0.5)
            made.random_(1, 3)
            made.zero_()
            made.resize_(6)
            made.set_(a.detach() * 3)
            made.detach_()
            made.greater_(1.0)
            made.view(2, 2).swapaxes_(0, 1)
            a.detach().clip_(0, 1)
            return a * made.sum()
        return as_array(lib.func.grad(lambda a: f(a).sum())(lib.tensor(_X))).tolist()
    assert run(ember) == run(torch)


def test_linearize_lets_its_function_sample_into_a_captured_tensor_as_torch():
    def run(lib):
        cap = lib.zeros(4)

        def f(a):
            cap.bernoulli_(1.0)
            cap.resize_(2)
            return a * 2
        out, _ = lib.func.linearize(f, lib.tensor(_X))
        return as_array(out).tolist(), as_array(cap).tolist()
    assert run(ember) == run(torch)
