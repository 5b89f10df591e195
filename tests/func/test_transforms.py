"""grad, vjp, jvp, jacrev, jacfwd, hessian, linearize: values, nesting, pytrees, errors."""

import pytest

import ember
from ember.autograd import functional as AF
from ember.func import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap


def _randn(*shape):
    return ember.randn(shape, dtype=ember.float64)


def test_grad_of_a_sum_of_squares():
    x = _randn(3, 4)
    g = grad(lambda a: (a ** 2).sum())(x)
    assert ember.allclose(g, 2 * x) and not g.requires_grad and not x.requires_grad


def test_grad_argnums_pytrees_and_aux():
    x, y = _randn(3), _randn(3)
    gx, gy = grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, y)
    assert ember.allclose(gx, y) and ember.allclose(gy, x)
    g, aux = grad(lambda d: ((d["w"] * 3).sum(), d["w"] * 2), has_aux=True)({"w": x})
    assert ember.allclose(g["w"], ember.full((3,), 3.0, dtype=ember.float64))
    assert ember.allclose(aux, x * 2)
    g, (value, _) = grad_and_value(lambda a: (a.sin().sum(), a * 0), has_aux=True)(x)
    assert ember.allclose(g, x.cos()) and ember.allclose(value, x.sin().sum())


def test_grad_of_grad_and_closures():
    x = _randn(5)
    assert ember.allclose(grad(grad(lambda a: a.sin().sum().mul(1)))(x[0]), -x[0].sin())
    # the inner gradient treats the closed-over outer input as a constant
    f = grad(lambda a: grad(lambda b: (a * b).sum())(x).mul(a).sum())
    assert ember.allclose(f(x), 2 * x)


def test_grad_errors():
    x = _randn(3)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
        grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a Tensor"):
        grad(lambda a: 3.0)(x)
    with pytest.raises(RuntimeError, match="Got argnum=1, but only 1 positional inputs"):
        grad(lambda a: a.sum(), argnums=1)(x)
    with pytest.raises(RuntimeError, match="argnums must be non-empty"):
        grad(lambda a: a.sum(), argnums=())(x)
    with pytest.raises(RuntimeError, match="should be a tuple: \\(output, aux\\)"):
        grad(lambda a: a.sum(), has_aux=True)(x)
    with pytest.raises(ValueError, match="Thing passed to transform API must be Tensor"):
        grad(lambda a: a)(3.0)


def test_vjp_and_jvp():
    x, v = _randn(4), _randn(4)
    out, fn = vjp(lambda a: a.exp() * 2, x)
    assert ember.allclose(out, x.exp() * 2) and ember.allclose(fn(v)[0], v * x.exp() * 2)
    out, t = jvp(lambda a: a.exp() * 2, (x,), (v,))
    assert ember.allclose(t, v * x.exp() * 2)
    out, push = linearize(lambda a: a.sin(), x)
    assert ember.allclose(push(v), v * x.cos())
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        jvp(lambda a: a, x, x)
    with pytest.raises(RuntimeError, match="same python structure"):
        jvp(lambda a: a, (x,), (x, x))


def _f(a, b):
    return (a.sin() @ b).tanh(), (a * a).sum(0)


def test_jacfwd_jacrev_and_autograd_functional_agree():
    ember.manual_seed(1)
    a, b = _randn(3, 4), _randn(4, 2)
    rev = jacrev(_f, argnums=(0, 1))(a, b)
    fwd = jacfwd(_f, argnums=(0, 1))(a, b)
    ref = AF.jacobian(_f, (a, b))
    vec = AF.jacobian(_f, (a, b), vectorize=True)
    for i in range(2):
        for j in range(2):
            assert rev[i][j].shape == _f(a, b)[i].shape + (a, b)[j].shape
            for other in (fwd, ref, vec):
                assert ember.allclose(rev[i][j], other[i][j])


def test_hessian_of_a_quadratic_form():
    A, x = _randn(4, 4), _randn(4)
    want = A + A.T
    assert ember.allclose(hessian(lambda v: v @ A @ v)(x), want)
    assert ember.allclose(jacrev(jacrev(lambda v: v @ A @ v))(x), want)
    assert ember.allclose(AF.hessian(lambda v: v @ A @ v, x), want)


def test_jacobians_compose_with_vmap():
    x = _randn(5, 3)
    batched = vmap(jacrev(lambda a: a.sin() * a.sum()))(x)
    loop = ember.stack([jacrev(lambda a: a.sin() * a.sum())(r) for r in x])
    assert ember.allclose(batched, loop)
    assert ember.allclose(jacrev(vmap(lambda a: a.exp()))(x[0]), ember.diag(x[0].exp()))


def test_argnums_validation_matches_torch():
    x = ember.ones(2)
    f = lambda a, b: (a * b).sum()  # noqa: E731
    with pytest.raises(RuntimeError, match=r"argnums elements must be unique, got \(0, 0\)"):
        grad(f, argnums=(0, -2))(x, 2 * x)
    with pytest.raises(RuntimeError, match="argnum must be int, got: <class 'str'>"):
        grad(f, argnums=(0, "a"))(x, x)
    with pytest.raises(RuntimeError, match="argnums elements must be unique"):
        jacrev(lambda a, b: a * b, argnums=(1, 1))(x, x)
    assert grad(f, argnums=True)(x, 2 * x).tolist() == [1.0, 1.0]   # a bool is an int


def test_vjp_and_jvp_input_and_output_checks():
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match=r"vjp\(f, \.\.\.\): All outputs of f must be "
                                           r"floating-point or complex Tensors"):
        vjp(lambda a: a > 0, x)
    with pytest.raises(RuntimeError, match="All outputs of f must be floating-point"):
        jacrev(lambda a: (a * 2, (a > 0).long()))(x)
    with pytest.raises(RuntimeError, match=r"vjp\(f, \*primals\): expected f\(\*primals\) to "
                                           r"return only tensors, got unsupported type"):
        jacrev(lambda a: 3)(x)
    with pytest.raises(RuntimeError, match=r"jvp\(f, primals, tangents\): expected f"):
        jacfwd(lambda a: 3)(x)
    with pytest.raises(RuntimeError, match="Expected primals to only contain Tensors, got "
                                           "<class 'float'>"):
        jvp(lambda a: a, (3.0,), (x,))
    with pytest.raises(RuntimeError, match="Expected tangents to only contain Tensors"):
        jvp(lambda a: a, (x,), (1.0,))
    with pytest.raises(ValueError, match="Expected primal to be floating point or complex, "
                                         "but got: ember.int64"):
        jvp(lambda a: a, (ember.ones(3, dtype=ember.int64),), (x,))


def test_vjp_cotangent_structure_message_shows_the_trees():
    _, fn = vjp(lambda a: {"s": a.sin(), "c": a.cos()}, ember.ones(2))
    with pytest.raises(RuntimeError, match=r"cotangents: \{'s': \*\}, primal output: "
                                           r"\{'s': \*, 'c': \*\}"):
        fn({"s": ember.ones(2)})


def test_linearize_checks_its_tangents():
    x = ember.ones(3)
    _, jvp_fn = linearize(lambda a: a * 2, x)
    assert jvp_fn(ember.tensor([1.0, 2.0, 3.0])).tolist() == [2.0, 4.0, 6.0]
    with pytest.raises(RuntimeError, match=r"tangent:0 with shape .*\[2\]\) in flattened pytree "
                                           r"doesn't match the shape .*\[3\]\)"):
        jvp_fn(ember.ones(2))
    with pytest.raises(RuntimeError, match="tangent:0 with dtype ember.float64 in flattened "
                                           "pytree doesn't match the dtype ember.float32"):
        jvp_fn(ember.ones(3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="to have the same argspec as the primals"):
        jvp_fn(x, x)


def test_jacobian_errors_name_the_transform_torch_names():
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match=r"^vjp\(f, \*primals\): output of function f should "
                                           r"be a tuple"):
        jacrev(lambda a: a, has_aux=True)(x)
    with pytest.raises(RuntimeError, match=r"^jvp\(f, primals, tangents\): output of function"):
        jacfwd(lambda a: a, has_aux=True)(x)
    with pytest.raises(ValueError, match="Expected primal to be floating point or complex"):
        hessian(lambda a: a.sum())(ember.tensor([1, 2]))
