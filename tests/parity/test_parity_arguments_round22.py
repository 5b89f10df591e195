"""Argument checks found by round 22's program helpers, vs PyTorch: var/std without ``dim``
given ``unbiased`` beside other arguments, linalg.pinv/matrix_rank's old and new tolerances
together, svd_lowrank's mean of another dtype or shape, solve_triangular without ``upper``,
the function forms of in-place clamp with a number and a tensor bound, strings as subscripts,
and autograd.Functions without ``setup_context`` under the functorch transforms."""

import numpy as np
import pytest

import ember
from tests.parity._compare import as_array, assert_close, error, outcome, recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_RNG = np.random.default_rng(22)
_DATA = _RNG.standard_normal((4, 3))
_UPPER = np.triu(_RNG.standard_normal((3, 3))) + 3 * np.eye(3)


def _both(call):
    """``call(lib)``'s outcome (value as a NumPy array or shapes, else the error's type and
    message) and warnings, for ember and then PyTorch."""
    def describe(result):
        if isinstance(result, tuple):
            return "ok", tuple(as_array(r).shape for r in result)
        return "ok", as_array(result).tolist()
    def answer(lib):
        result, warned = recorded(call, lib, describe=describe)
        # (PyTorch's C++ warnings end by naming the source line)
        return result, [(c, m.split(" (Triggered internally")[0]) for c, m in warned]
    return answer(ember), answer(torch)


def _assert_same(call):
    ours, theirs = _both(call)
    assert ours == theirs, f"ember {ours!r}\ntorch {theirs!r}"
    return ours


# --- 1. var/std/var_mean/std_mean: ``unbiased`` with other arguments needs ``dim`` -------------

@pytest.mark.parametrize("call", [
    lambda lib, x: lib.var(x, unbiased=True, keepdim=True),
    lambda lib, x: lib.var(x, unbiased=False, keepdim=False),
    lambda lib, x: lib.std(x, unbiased=True, keepdim=True),
    lambda lib, x: x.var(unbiased=True, keepdim=True),
    lambda lib, x: x.std(unbiased=False, keepdim=False),
    lambda lib, x: lib.var_mean(x, unbiased=True, keepdim=True),
    lambda lib, x: lib.std_mean(x, unbiased=False, keepdim=True),
    lambda lib, x: lib.var(input=x, unbiased=True, keepdim=True),
    lambda lib, x: lib.var(x, unbiased=True, keepdims=True),
    lambda lib, x: lib.var(x, unbiased=True, out=lib.empty(0, dtype=lib.float64)),
    lambda lib, x: lib.var(x, unbiased=True, keepdim=True, correction=1),
])
def test_unbiased_without_dim_refused(call):
    ours, _ = _assert_same(lambda lib: call(lib, lib.tensor(_DATA)))
    assert ours[0] == "TypeError" and "invalid combination of arguments" in ours[1]


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.var(x, unbiased=False),
    lambda lib, x: x.std(unbiased=True),
    lambda lib, x: lib.var(x, None, False, True),
    lambda lib, x: lib.var(x, dim=None, unbiased=False, keepdim=True),
    lambda lib, x: lib.var(x, axis=None, unbiased=True, keepdim=True),
    lambda lib, x: lib.std(x, 0, True, True),
    lambda lib, x: lib.var(x, keepdim=True, correction=0),
    lambda lib, x: lib.var_mean(x, None, unbiased=False, keepdim=True)[0],
])
def test_unbiased_with_dim_or_alone_computes(call):
    ours = call(ember, ember.tensor(_DATA))
    theirs = call(torch, torch.tensor(_DATA))
    assert_close(ours, theirs, rtol=1e-12, same_dtype=True)


def test_unbiased_without_dim_inside_a_helper_refused():
    def spread(lib, x):
        return x.var(unbiased=False, keepdim=True)      # the same call site every time
    for _ in range(2):                                  # (the second read is remembered)
        _assert_same(lambda lib: spread(lib, lib.tensor(_DATA)))


# --- 2. linalg: pinv/matrix_rank tolerances, svd_lowrank's mean, solve_triangular's upper -----

@pytest.mark.parametrize("call", [
    lambda lib, a: lib.linalg.pinv(a, rtol=1e-5, rcond=1e-5),
    lambda lib, a: lib.linalg.pinv(a, rcond=1e-5, atol=1e-5),
    lambda lib, a: lib.linalg.pinv(a, 1e-5, rtol=1e-5),
    lambda lib, a: lib.linalg.pinv(a, rcond=None, rtol=1e-5),
    lambda lib, a: lib.linalg.pinv(a, rtol=None, rcond=1e-5, hermitian=False),
    lambda lib, a: lib.linalg.pinv(a, 1e-5, True, rtol=1e-5),
    lambda lib, a: lib.linalg.matrix_rank(a, tol=1e-5, rtol=1e-5),
    lambda lib, a: lib.linalg.matrix_rank(a, 1e-5, atol=1e-5),
    lambda lib, a: lib.linalg.matrix_rank(a, tol=None, atol=1e-5),
])
def test_old_and_new_tolerances_refused(call):
    ours, _ = _assert_same(lambda lib: call(lib, lib.tensor(_DATA)))
    assert ours[0] == "TypeError" and "invalid combination of arguments" in ours[1]


@pytest.mark.parametrize("call", [
    lambda lib, a: lib.linalg.pinv(a, rcond=1e-5),
    lambda lib, a: lib.linalg.pinv(a, atol=1e-5, rtol=1e-5),
    lambda lib, a: lib.linalg.pinv(a, 1e-5, False),
    lambda lib, a: lib.linalg.matrix_rank(a, 1e-5),
    lambda lib, a: lib.linalg.matrix_rank(a, atol=None, rtol=None),
])
def test_one_kind_of_tolerance_computes(call):
    assert_close(call(ember, ember.tensor(_DATA)), call(torch, torch.tensor(_DATA)), rtol=1e-10)


@pytest.mark.parametrize("call", [
    lambda lib, a: lib.linalg.pinv(a, 1e-5, True),
    lambda lib, a: lib.linalg.pinv(a, hermitian=True, rtol=1e-5),
    lambda lib, a: lib.linalg.matrix_rank(a, 1e-5, True),
])
def test_hermitian_of_a_non_square_matrix(call):
    ours, _ = _assert_same(lambda lib: call(lib, lib.tensor(_DATA)))
    assert ours == ("RuntimeError", "linalg.eigh: A must be batches of square matrices, but they "
                                    "are 4 by 3 matrices")


_MEAN_DTYPES = ("int64", "int32", "bool", "float32", "float16", "complex128")


@pytest.mark.parametrize("shape, mean", [
    *(((4, 3), ((4, 3), d)) for d in _MEAN_DTYPES), ((4, 3), ((3,), "int64")),
    ((4, 3), ((5, 3), "float64")), ((4, 3), ((2, 4, 3), "float64")),
    *(((3, 5), ((3, 5), d)) for d in _MEAN_DTYPES), ((3, 5), ((5,), "int64")),
])
def test_svd_lowrank_mean_refused_before_computing(shape, mean):
    size, dtype = mean
    data = _RNG.standard_normal(shape)

    def call(lib):
        return lib.svd_lowrank(lib.tensor(data), q=2, M=lib.zeros(*size,
                                                                  dtype=getattr(lib, dtype)))
    ours, theirs = error(call, ember), error(call, torch)
    assert theirs is not None and ours == (theirs[0], theirs[1].replace("torch.", "ember."))


@pytest.mark.parametrize("a_dtype, m_dtype", [("int64", "float64"), ("int64", "float32"),
                                              ("complex128", "float64")])
def test_svd_lowrank_dtype_order(a_dtype, m_dtype):
    def call(lib):
        a = lib.ones(4, 3, dtype=getattr(lib, a_dtype))
        return lib.svd_lowrank(a, q=2, M=lib.zeros(4, 3, dtype=getattr(lib, m_dtype)))
    assert error(call, ember) == error(call, torch) is not None


def test_svd_lowrank_with_a_mean_of_its_dtype():
    data, mean = _RNG.standard_normal((6, 4)), _RNG.standard_normal(4)
    ours = ember.svd_lowrank(ember.tensor(data), q=4, M=ember.tensor(mean))
    u, s, v = (as_array(t) for t in ours)
    # q covers the rank: the factors rebuild A - M exactly, whatever the random sketch
    np.testing.assert_allclose(u @ np.diag(s) @ v.T, data - mean, atol=1e-10)
    np.testing.assert_allclose(s, np.linalg.svd(data - mean, compute_uv=False), rtol=1e-10)


@pytest.mark.parametrize("call", [
    lambda lib, a, b: lib.linalg.solve_triangular(a, b),
    lambda lib, a, b: lib.linalg.solve_triangular(a, b, left=False),
    lambda lib, a, b: lib.linalg.solve_triangular(a, b, unitriangular=True),
    lambda lib, a, b: lib.linalg.solve_triangular(a, b, out=lib.empty(0, dtype=lib.float64)),
    lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=1),
    lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=None),
])
def test_solve_triangular_upper_required(call):
    b = _RNG.standard_normal((3, 2))
    ours, _ = _assert_same(lambda lib: call(lib, lib.tensor(_UPPER), lib.tensor(b)))
    assert ours[0] == "TypeError"


def test_solve_triangular_with_upper_computes():
    b = _RNG.standard_normal((3, 2))
    ours = ember.linalg.solve_triangular(ember.tensor(_UPPER), ember.tensor(b), upper=True)
    np.testing.assert_allclose(_UPPER @ as_array(ours), b, atol=1e-12)
    import inspect
    assert str(inspect.signature(ember.linalg.solve_triangular)) == \
        "(input, B, *, upper, left=True, unitriangular=False, out=None)"


# --- 3. in-place clamp's function forms with one number and one tensor bound -------------------

@pytest.mark.parametrize("call", [
    lambda lib, x, b: lib.clamp_(x, 0.0, b),
    lambda lib, x, b: lib.clamp_(x, b, 1.0),
    lambda lib, x, b: lib.clip_(x, 0.0, b),
    lambda lib, x, b: lib.clamp_(x, min=0.0, max=b),
    lambda lib, x, b: lib.clip_(x, min=b, max=1),
    lambda lib, x, b: lib.clamp_(x, 0.0, max=b),
    lambda lib, x, b: x.clamp_(0.0, b),
    lambda lib, x, b: x.clip_(min=b, max=1.0),
    lambda lib, x, b: lib.clamp(x, 0.0, b),
])
def test_clamp_mixed_bounds_wording(call):
    data = _RNG.standard_normal(3)
    ours, _ = _assert_same(lambda lib: call(lib, lib.tensor(data), lib.ones(3)))
    assert ours[0] == "TypeError"


def test_clamp_function_form_computes():
    data = _RNG.standard_normal(5)
    ours, theirs = ember.tensor(data), torch.tensor(data)
    ember.clamp_(ours, -0.5, 0.5)
    torch.clamp_(theirs, -0.5, 0.5)
    assert_close(ours, theirs, rtol=0)


# --- 4. strings in a subscript -----------------------------------------------------------------

@pytest.mark.parametrize("key", [
    ["a"], ["a", "b"], [0, "a"], ["a", 0], [[0], ["a"]], (0, ["a"]), ("a",), "a", "ab",
    "a" * 40, ["a" * 40], [b"a"], b"a", [0, 1, "b"],
])
def test_string_subscripts(key):
    def get(lib):
        return lib.arange(6.0).reshape(2, 3)[key]

    def put(lib):
        x = lib.zeros(2, 3)
        x[key] = 1.0
        return x
    for call in (get, put):
        ours = _assert_same(call)
        assert ours[0][0] in ("TypeError", "IndexError")


def test_lists_without_strings_still_index():
    _assert_same(lambda lib: lib.arange(6.0).reshape(2, 3)[[None]])
    _assert_same(lambda lib: lib.arange(6.0).reshape(2, 3)[[1, 0]])


# --- 5. autograd.Function without setup_context under the functorch transforms -----------------

def _functions(lib):
    class Old(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class New(lib.autograd.Function):
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
        def jvp(ctx, t):
            return t * 2

        @staticmethod
        def vmap(info, in_dims, x):
            return x * 2, in_dims[0]

    class Generated(lib.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x * 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 3

        @staticmethod
        def jvp(ctx, t):
            return t * 3
    return {"Old": Old, "New": New, "Generated": Generated}


_TRANSFORMS = {
    "vmap": lambda lib, f: lib.func.vmap(f.apply)(lib.arange(3.0)),
    "grad": lambda lib, f: lib.func.grad(f.apply)(lib.tensor(1.5)),
    "jacrev": lambda lib, f: lib.func.jacrev(f.apply)(lib.arange(3.0)),
    "jacfwd": lambda lib, f: lib.func.jacfwd(f.apply)(lib.arange(3.0)),
    "jvp": lambda lib, f: lib.func.jvp(f.apply, (lib.arange(3.0),), (lib.ones(3),))[1],
    "vjp": lambda lib, f: lib.func.vjp(f.apply, lib.arange(3.0))[1](lib.ones(3))[0],
    "hessian": lambda lib, f: lib.func.hessian(lambda t: f.apply(t).sum())(lib.arange(3.0)),
    "vmap_of_grad": lambda lib, f: lib.func.vmap(lib.func.grad(f.apply))(lib.arange(3.0)),
    "unrelated_input": lambda lib, f: lib.func.grad(
        lambda u: f.apply(lib.ones(())) + u)(lib.tensor(1.5)),
    "plain": lambda lib, f: f.apply(lib.arange(3.0)),
}


@pytest.mark.parametrize("transform", sorted(_TRANSFORMS))
@pytest.mark.parametrize("kind", ["Old", "New", "Generated"])
def test_functions_under_transforms(kind, transform):
    def call(lib):
        return _TRANSFORMS[transform](lib, _functions(lib)[kind])
    ours = outcome(call, ember, describe=lambda r: ("ok", as_array(r).tolist()))
    theirs = outcome(call, torch, describe=lambda r: ("ok", as_array(r).tolist()))
    assert ours == theirs
    refused = kind == "Old" and transform != "plain"
    assert (ours[0] == "RuntimeError" and "must override the setup_context" in ours[1]) == refused


@pytest.mark.parametrize("draw", [
    lambda lib, c: lib.func.grad(lambda c: lib.distributions.Dirichlet(c).rsample()[0])(c),
    lambda lib, c: lib.func.jacrev(lambda c: lib.distributions.Dirichlet(c).rsample())(c),
    lambda lib, c: lib.func.grad(
        lambda a: lib.distributions.Beta(a, lib.tensor(2.0)).rsample())(c[0]),
    lambda lib, c: lib.func.grad(lambda c: lib.distributions.Dirichlet(c).sample()[0] * c[0])(c),
])
def test_dirichlet_samplers_under_reverse_transforms(draw):
    def call(lib):
        return draw(lib, lib.tensor([1.0, 2.0, 3.0]))
    ours, theirs = error(call, ember), error(call, torch)
    assert theirs is not None and ours == theirs


def test_dirichlet_log_prob_under_grad():
    def call(lib):
        value = lib.tensor([0.2, 0.3, 0.5])
        return lib.func.grad(lambda c: lib.distributions.Dirichlet(c).log_prob(value))(
            lib.tensor([1.0, 2.0, 3.0]))
    assert_close(call(ember), call(torch), rtol=1e-5)      # (float32 digamma)
