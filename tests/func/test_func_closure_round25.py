"""Round 25: leaves a transformed function makes requiring grad are the transform's own (its
results do not stay in their graph, unlike those of closed-over tensors), and
``requires_grad_()`` is refused inside transformed functions, as PyTorch's transforms do
(NOTE [Leaves made inside a transform] in ember/_transform_state.py)."""

import gc

import numpy as np
import pytest

import ember
from ember._transform_state import STATE
from ember.func import grad, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap

X = [0.5, -1.0, 2.0]
REFUSAL = ("You are attempting to call Tensor.requires_grad_() (or perhaps using "
           "torch.autograd.functional.* APIs) inside of a function being transformed by a "
           "functorch transform. This is unsupported, please attempt to use the functorch "
           "transforms (e.g. grad, vjp, jacrev, jacfwd, hessian) or call requires_grad_() "
           "outside of a function being transformed instead.")


def _x():
    return ember.tensor(X)


def _weighted(make):
    """sum(w * x**2) with w = [2, 2, 2] from ``make``: its gradient is 4x."""
    return lambda x: (make() * x * x).sum()


def _full():
    return ember.full((3,), 2.0, requires_grad=True)


def _parameter():
    return ember.nn.Parameter(ember.full((3,), 2.0))


def _attribute():
    w = ember.full((3,), 2.0)
    w.requires_grad = True
    return w


def _kept(kept=[]):       # noqa: B006 (the made leaf outlives the call on purpose)
    kept.append(ember.full((3,), 2.0, requires_grad=True))
    return kept[-1]


MAKERS = {"factory": _full, "parameter": _parameter, "attribute": _attribute,
          "kept": _kept}


@pytest.mark.parametrize("maker", list(MAKERS))
def test_gradients_through_made_leaves_do_not_require_grad(maker):
    f = _weighted(MAKERS[maker])
    g = grad(f)(_x())
    assert not g.requires_grad
    np.testing.assert_allclose(g.numpy(), [2.0, -4.0, 8.0])
    out, pull = vjp(f, _x())
    assert not out.requires_grad and float(out) == pytest.approx(2 * (0.25 + 1 + 4))
    assert not pull(ember.tensor(1.0))[0].requires_grad
    h = hessian(f)(_x())
    assert not h.requires_grad
    np.testing.assert_allclose(h.numpy(), np.diag([4.0, 4.0, 4.0]))
    per_sample = vmap(grad(f))(ember.tensor([X, [1.0, 1.0, 1.0]]))
    assert not per_sample.requires_grad
    np.testing.assert_allclose(per_sample.numpy(), [[2.0, -4.0, 8.0], [4.0, 4.0, 4.0]])


def test_a_module_built_inside_leaves_no_graph():
    def f(x):
        norm = ember.nn.LayerNorm(3)
        return (norm(x) * ember.tensor([1.0, 0.0, 0.0])).sum()
    for result in (grad(f)(_x()), jacrev(f)(_x()), jvp(f, (_x(),), (_x(),))[1]):
        assert not result.requires_grad


def test_closed_over_tensors_still_keep_results_in_their_graph():
    lr = ember.tensor(0.5, requires_grad=True)
    g = grad(lambda x: (_full() * x * x * lr).sum())(_x())     # 2 * 2x * lr
    assert g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), [1.0, -2.0, 4.0])
    (d_lr,) = ember.autograd.grad(g.sum(), lr)                 # sum(4x) = 6
    assert float(d_lr) == pytest.approx(6.0)


def test_made_leaves_returned_from_the_function_are_cut():
    lr = ember.tensor(0.5, requires_grad=True)

    def f(x):
        w = _full()
        return x * w * lr, w * 3, w
    out = vjp(f, _x())[0]
    assert [y.requires_grad for y in out] == [True, False, False]
    np.testing.assert_allclose(out[1].numpy(), [6.0, 6.0, 6.0])
    aux = grad(lambda x: ((x * x).sum(), _full()), has_aux=True)(_x())[1]
    assert not aux.requires_grad


def test_an_input_that_requires_grad_keeps_only_what_depends_on_it():
    x = ember.tensor(X, requires_grad=True)
    assert not grad(lambda x: (x * _full()).sum())(x).requires_grad    # = w
    g = grad(_weighted(_full))(x)                                      # = 4x
    assert g.requires_grad
    np.testing.assert_allclose(ember.autograd.grad(g.sum(), x)[0].numpy(), [4.0, 4.0, 4.0])


def test_nested_transforms_with_a_leaf_made_between_them():
    def f(x):
        w = _full()                     # closed over by the inner grad: 3 y^2 w = 6 y^2
        return (grad(lambda y: (y ** 3 * w).sum())(x) * x).sum()     # sum(6 x^3)
    g = grad(f)(_x())
    assert not g.requires_grad
    np.testing.assert_allclose(g.numpy(), [4.5, 18.0, 72.0])        # 18 x^2
    assert not jacrev(jacfwd(f))(_x()).requires_grad


def test_a_dead_leaf_is_a_constant_to_the_closure_walk():
    def f(x):
        w = _full()
        y = (x * w).sum()
        del w
        gc.collect()
        return y
    assert not vjp(f, _x())[0].requires_grad


def test_the_record_of_made_leaves_lives_only_while_the_outermost_function_runs():
    seen = []

    def f(x):
        seen.append(STATE.made)
        return (x * _full()).sum()
    grad(f)(_x())
    assert isinstance(seen[0], dict) and STATE.made is None
    with pytest.raises(ValueError):
        grad(lambda x: (_ for _ in ()).throw(ValueError("boom")))(_x())
    assert STATE.made is None and STATE.user is None


CALLERS = {
    "grad": lambda f: grad(f)(_x()),
    "vjp": lambda f: vjp(f, _x()),
    "jvp": lambda f: jvp(f, (_x(),), (_x(),)),
    "jacrev": lambda f: jacrev(f)(_x()),
    "jacfwd": lambda f: jacfwd(f)(_x()),
    "hessian": lambda f: hessian(f)(_x()),
    "vmap": lambda f: vmap(f)(ember.ones(2, 3)),
    "vmap_of_grad": lambda f: vmap(grad(f))(ember.ones(2, 3)),
    "grad_of_vmap": lambda f: grad(lambda x: vmap(f)(x[None]).sum())(_x()),
}


def _flags_new(x):
    ember.ones(3).requires_grad_()
    return x.sum()


def _flags_input(x):
    x.requires_grad_()
    return x.sum()


def _unflags_integer(x):
    ember.ones(3, dtype=ember.int64).requires_grad_(False)
    return x.sum()


def _functional_jacobian(x):
    return ember.autograd.functional.jacobian(lambda z: z * z, x).sum()


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize("body", [_flags_new, _flags_input, _unflags_integer,
                                  _functional_jacobian])
def test_requires_grad__is_refused_inside(body, caller):
    with pytest.raises(RuntimeError) as info:
        CALLERS[caller](body)
    assert str(info.value) == REFUSAL
    assert ember.ones(2).requires_grad_().requires_grad        # and allowed again after


def test_requires_grad__checks_its_argument_before_refusing():
    with pytest.raises(TypeError, match="must be bool, not int"):
        grad(lambda x: (x * ember.ones(3).requires_grad_(1)).sum())(_x())


def test_linearize_allows_requires_grad_():
    out, jvp_fn = linearize(lambda x: (x * ember.ones(3).requires_grad_()).sum(), _x())
    assert float(out) == pytest.approx(1.5)
    assert float(jvp_fn(ember.ones(3))) == pytest.approx(3.0)


class _Cube(ember.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g


def _factories(x):
    ember.empty_strided((3,), (1,), requires_grad=True)
    ember.empty_permuted((3,), (0,), requires_grad=True)
    return (x * (ember.zeros(3, requires_grad=True) + ember.ones(3, requires_grad=True)
                 + ember.asarray([0.0, 0.0, 0.0], requires_grad=True))).sum()


ALLOWED = {     # ember's own code flags leaves inside transforms: none of it is refused
    "factories": lambda x: _factories(x),
    "parameter": lambda x: (x * ember.nn.Parameter(ember.ones(3))).sum(),
    "module": lambda x: (ember.nn.Linear(3, 1)(x) * 0).sum() + x.sum(),
    "function": lambda x: _Cube.apply(x).sum() / 3,            # gradient x^2
    "make_tensor": lambda x: (x + 0 * ember.testing.make_tensor(
        3, dtype=ember.float32, device="cpu", requires_grad=True)).sum(),
}


@pytest.mark.parametrize("caller", ["grad", "vmap_of_grad", "jacfwd"])
@pytest.mark.parametrize("case", list(ALLOWED))
def test_what_is_allowed_inside(case, caller):
    if case in ("module", "make_tensor") and caller != "grad":
        pytest.skip("random numbers under vmap (jacfwd's too) are refused")
    if case == "function" and caller == "jacfwd":
        pytest.skip("a custom Function without jvp is refused by forward mode")
    out = CALLERS[caller](ALLOWED[case])
    assert not out.requires_grad
    want = {"function": np.square(np.array(X))}.get(case, np.ones(3))
    if caller == "vmap_of_grad":
        want = np.ones((2, 3))
    elif caller == "jacfwd":
        want = np.broadcast_to(want, (3,))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
