"""Round-15 leftovers checked against PyTorch: factories' ``requires_grad`` type check,
``torch.norm``'s positional order, NumPy arrays on the left of operators, 16-bit empty linalg
inputs, and the 16-bit/in-place backward of hardtanh, elu and softplus."""


import numpy as np
import pytest

import ember
from tests.parity._compare import dtype_name, is_tensor, ok, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn, lib):
    """("ok", ``fn(lib).requires_grad``), or its error's type and message (names unified)."""
    return outcome(fn, lib, quiet=True, describe=lambda r: ok(r.requires_grad),
                   message=lambda text: text.replace("torch", "ember"))


_FACTORIES = {
    "normal": lambda T, g: T.normal(0.0, 1.0, (2,), requires_grad=g),
    "empty_strided": lambda T, g: T.empty_strided((2,), (1,), requires_grad=g),
    "new_empty_strided": lambda T, g: T.zeros(2).new_empty_strided((2,), (1,), requires_grad=g),
    "empty_permuted": lambda T, g: T.empty_permuted((2, 3), (1, 0), requires_grad=g),
    "asarray": lambda T, g: T.asarray([1.0, 2.0], requires_grad=g),
    "range": lambda T, g: T.range(0, 3, requires_grad=g),
    "frombuffer": lambda T, g: T.frombuffer(bytearray(8), dtype=T.float32, requires_grad=g),
    "scalar_tensor": lambda T, g: T.scalar_tensor(1.0, requires_grad=g),
    "tril_indices": lambda T, g: T.tril_indices(3, 3, requires_grad=g),
    "triu_indices": lambda T, g: T.triu_indices(3, 3, requires_grad=g),
    "sparse_coo_tensor": lambda T, g: T.sparse_coo_tensor([[0]], [1.0], (2,), requires_grad=g),
    "sparse_csr_tensor": lambda T, g: T.sparse_csr_tensor([0, 1], [0], [1.0], (1, 2),
                                                          requires_grad=g),
    "sparse_compressed_tensor": lambda T, g: T.sparse_compressed_tensor(
        [0, 1], [0], [1.0], (1, 2), layout=T.sparse_csr, requires_grad=g),
    "hann_window": lambda T, g: T.hann_window(4, requires_grad=g),
    "bartlett_window": lambda T, g: T.bartlett_window(4, requires_grad=g),
    "kaiser_window": lambda T, g: T.kaiser_window(4, requires_grad=g),
}
# the ones whose PyTorch message names the function; the others name an overload list
_NAMED = {"empty_strided", "new_empty_strided", "empty_permuted", "asarray", "range",
          "frombuffer", "scalar_tensor", "tril_indices", "triu_indices"}


@pytest.mark.parametrize("name", sorted(_FACTORIES))
@pytest.mark.parametrize("flag", [1, 0, 1.0, None, True])
def test_factory_requires_grad_must_be_bool(name, flag):
    def call(lib):
        return _FACTORIES[name](lib, flag)
    got, want = _outcome(call, ember), _outcome(call, torch)
    assert got[0] == want[0]
    if name in _NAMED or got[0] == "ok":
        assert got == want


@pytest.mark.parametrize("window", ["bartlett", "cosine", "gaussian", "hann", "kaiser"])
@pytest.mark.parametrize("M", [0, 1, 5])
def test_signal_window_requires_grad_must_be_bool(window, M):
    def call(lib):
        return getattr(lib.signal.windows, window)(M, requires_grad=1)
    assert _outcome(call, ember) == _outcome(call, torch)


def _values(fn, lib):
    """``fn(lib)``'s dtype name and values, or its error's type."""
    return outcome(fn, lib, quiet=True, message=None, describe=lambda r: (
        dtype_name(r.dtype), np.round(np.asarray(r.tolist(), np.float64), 4).tolist()))


@pytest.mark.parametrize("call", [
    lambda T: T.norm(T.ones(2, 3), 2, 1, False, None, T.float64),
    lambda T: T.norm(T.ones(2, 3), "fro", (0, 1), True, None, T.float64),
    lambda T: T.norm(T.ones(2, 3), "nuc", None, False, None, T.float64),
    lambda T: T.norm(T.ones(2, 3), 2, 1, False, T.empty(2)),
    lambda T: T.norm(T.ones(2, 3), 2, 1, False, T.float64),
    lambda T: T.ones(2, 3).norm(2, 1, False, T.float64),
    lambda T: T.functional.norm(T.ones(2, 3), 1, 0, False, None, T.float64),
])
def test_norm_function_takes_out_fifth_and_dtype_sixth(call):
    assert _values(call, ember) == _values(call, torch)


def _result(fn, lib):
    """``fn(lib)``'s type, dtype, values and grad_fn, or its error's type."""
    return outcome(fn, lib, quiet=True, message=None, describe=_facts)


def _facts(r):
    """A tensor's dtype, shape, values and grad_fn type; another value's type name."""
    if not is_tensor(r):
        return type(r).__name__
    return ("Tensor", dtype_name(r.dtype), tuple(r.shape),
            str(np.asarray(r.detach().tolist(), np.complex128).round(6).tolist()),  # NaN == NaN
            type(r.grad_fn).__name__)


_ARRAYS = [np.array(2.0), np.array(3), np.array([1.0, 2.0]), np.array([1, 2], np.int32),
           np.array([True, False]), np.ones((2, 2), np.float32), np.array([1 + 1j, 2j])]
_TENSORS = [lambda T: T.tensor([3.0, 7.0]), lambda T: T.tensor([3, 0]), lambda T: T.tensor(3.0),
            lambda T: T.tensor([3.0, 4.0], dtype=T.float16),
            lambda T: T.tensor([3.0, 7.0], requires_grad=True)]


@pytest.mark.parametrize("array", _ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
@pytest.mark.parametrize("make", _TENSORS)
@pytest.mark.parametrize("operator", ["+", "-", "*", "/", "//", "%", "**", "@", "<", "=="])
def test_numpy_array_on_the_left_of_an_operator(array, make, operator):
    def call(lib):
        return eval(f"array {operator} t", {"array": array, "t": make(lib)})  # noqa: S307
    assert _result(call, ember) == _result(call, torch)


_DIVISORS = [lambda T: T.tensor([3.0, 7.0], requires_grad=True),
             lambda T: T.tensor([3.0, 7.0], dtype=T.float16, requires_grad=True),
             lambda T: T.tensor([3, 0]), lambda T: T.tensor(3.0), lambda T: T.tensor([True, False]),
             lambda T: T.tensor([3.0, 7.0], dtype=T.bfloat16)]


@pytest.mark.parametrize("make_self", _DIVISORS)
@pytest.mark.parametrize("make_other", _DIVISORS + [lambda T: T.tensor([1 + 2j, 3j])])
def test_rtruediv_called_with_a_tensor_is_reciprocal_times(make_self, make_other):
    def call(lib):
        t, other = make_self(lib), make_other(lib)
        out = t.__rtruediv__(other)
        grads = None
        if out.requires_grad:
            out.sum().backward()
            grads = [None if x.grad is None else str(x.grad.tolist()) for x in (t, other)]
        return out, grads

    def outcome(lib):
        try:
            out, grads = call(lib)
        except Exception as e:      # noqa: BLE001 - the error itself is compared
            return type(e).__name__
        return _result(lambda _: out, lib), grads
    assert outcome(ember) == outcome(torch)


def _shapes(fn, lib):
    """``fn(lib)``'s dtypes and shapes (of each result of a tuple), or its error's type."""
    try:
        r = fn(lib)
    except Exception as e:          # noqa: BLE001 - the error itself is compared
        return type(e).__name__, str(e).replace("torch", "ember")
    r = r if isinstance(r, tuple) else (r,)
    return [(str(t.dtype).split(".")[-1], tuple(t.shape)) for t in r]


_EMPTY_16BIT = {
    "det": lambda L, x: L.det(x), "cholesky_ex": lambda L, x: L.cholesky_ex(x),
    "eigh": lambda L, x: L.eigh(x), "eigvalsh": lambda L, x: L.eigvalsh(x),
    "svd": lambda L, x: L.svd(x), "svdvals": lambda L, x: L.svdvals(x),
    "cond": lambda L, x: L.cond(x), "solve_ex": lambda L, x: L.solve_ex(x, x),
    "lu": lambda L, x: L.lu(x), "lu_factor_ex": lambda L, x: L.lu_factor_ex(x),
    "ldl_factor": lambda L, x: L.ldl_factor(x),
    "lu_solve": lambda L, x: L.lu_solve(x, L.lu_factor(x.float())[1], x),
    "tensorsolve": lambda L, x: L.tensorsolve(x, x.new_empty(0)),
    # these raise for empty 16-bit inputs too
    "inv": lambda L, x: L.inv(x), "qr": lambda L, x: L.qr(x), "eigvals": lambda L, x: L.eigvals(x),
    "solve_triangular": lambda L, x: L.solve_triangular(x, x, upper=True),
    "matrix_norm_nuc": lambda L, x: L.matrix_norm(x, "nuc"),
}


@pytest.mark.parametrize("name", sorted(_EMPTY_16BIT))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
def test_linalg_of_an_empty_16bit_input(name, dtype, shape):
    def call(lib):
        return _EMPTY_16BIT[name](lib.linalg, lib.empty(shape, dtype=getattr(lib, dtype)))
    assert _shapes(call, ember) == _shapes(call, torch)


@pytest.mark.parametrize("name", ["det", "svd", "cholesky_ex", "solve_ex"])
def test_linalg_of_a_nonempty_16bit_input_still_raises(name):
    def call(lib):
        return _EMPTY_16BIT[name](lib.linalg, lib.eye(2, dtype=lib.float16))
    assert _shapes(call, ember) == _shapes(call, torch)


_NEAR_BOUNDS = [-1.0, -0.1, -0.0999755859375, -0.10009765625, 0.1, 0.0999755859375, 0.10009765625,
                0.7, 0.69970703125, 0.7001953125, -0.3, -0.2998046875, 0.2, 0.2001953125,
                0.19921875, 0.30078125, 0.69921875, -0.298828125, 0.099609375, -0.099609375]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("bounds", [(-0.1, 0.1), (-0.3, 0.7), (0.1, 0.2)])
@pytest.mark.parametrize("create_graph", [False, True])
def test_hardtanh_16bit_gradient_compares_with_float32_bounds(dtype, bounds, create_graph):
    def grad(lib):
        x = lib.tensor(_NEAR_BOUNDS, dtype=getattr(lib, dtype), requires_grad=True)
        y = lib.nn.functional.hardtanh(x, *bounds)
        g, = lib.autograd.grad(y.sum(), x, create_graph=create_graph)
        return g.tolist()
    assert grad(ember) == grad(torch)


_ELU_FAMILY = {
    "elu_": lambda F, x, a: F.elu_(x, a), "elu(inplace)": lambda F, x, a: F.elu(x, a, inplace=True),
    "celu_": lambda F, x, a: F.celu_(x, a), "elu": lambda F, x, a: F.elu(x, a),
    "celu": lambda F, x, a: F.celu(x, a), "selu_": lambda F, x, a: F.selu_(x),
}


@pytest.mark.parametrize("name", sorted(_ELU_FAMILY))
@pytest.mark.parametrize("alpha", [1.0, 0.5, -0.5])
@pytest.mark.parametrize("create_graph", [False, True])
def test_elu_family_gradients_and_inplace_negative_slope(name, alpha, create_graph):
    def grads(lib):
        base = lib.tensor([-3.0, -1.0, -0.5, 0.0, -0.0, 0.5, 2.0], dtype=lib.float64,
                          requires_grad=True)
        y = _ELU_FAMILY[name](lib.nn.functional, base * 1, alpha)
        weights = lib.arange(1.0, 8.0, dtype=lib.float64)
        try:
            g, = lib.autograd.grad((y * weights).sum(), base, create_graph=create_graph)
        except RuntimeError as e:
            return "RuntimeError", str(e)
        second = None
        if create_graph:
            second = np.round(lib.autograd.grad(g.sum(), base)[0].tolist(), 10).tolist()
        # the signs of zero too: elu keeps x = +-0.0 whatever alpha's sign
        return ([str(v) for v in np.round(y.tolist(), 10)], np.round(g.tolist(), 10).tolist(),
                second)
    assert grads(ember) == grads(torch)


@pytest.mark.parametrize("shape, replacement, n", [
    ((0,), True, 2), ((2, 0), True, 2), ((0,), True, 1), ((2, 0), True, 1), ((0, 2), True, 2),
    ((0, 0), True, 2), ((0, 2), False, 1)])
def test_multinomial_of_empty_weights_as_torch(shape, replacement, n):
    def run(lib):
        try:
            return tuple(lib.multinomial(lib.ones(shape), n, replacement).shape)
        except RuntimeError as e:
            return str(e)
    assert run(ember) == run(torch)


@pytest.mark.parametrize("call", [
    lambda T: T.linalg.solve(T.empty(0, 0, dtype=T.half), T.empty(0, 3)),
    lambda T: T.linalg.solve(T.eye(2, dtype=T.half), T.ones(2, 3)),
    lambda T: T.linalg.lu_solve(T.empty(0, 0, dtype=T.half), T.empty(0, dtype=T.int32),
                                T.empty(0, 3)),
    lambda T: T.linalg.tensorsolve(T.empty(0, 0, dtype=T.half), T.empty(0)),
])
def test_16bit_linalg_with_a_right_side_of_another_dtype_raises_as_torch(call):
    with pytest.raises(RuntimeError) as mine:
        call(ember)
    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    assert str(mine.value) == str(theirs.value)


def test_det_of_an_empty_16bit_batch_backpropagates_zeros():
    a = ember.empty(2, 0, 0, dtype=ember.half, requires_grad=True)
    ember.linalg.det(a).sum().backward()
    assert a.grad.dtype is ember.half and tuple(a.grad.shape) == (2, 0, 0)
