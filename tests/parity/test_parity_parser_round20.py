"""Argument-parser leftovers compared with PyTorch: Python's bool/int/float/complex as dtypes,
dims as varargs (``x.squeeze(0, 2)``), the deprecated scalar-first overloads
(``x.add_(-lr, grad)``), the parser's words for missing arguments and bad bools, the
"invalid combination" listings of ``to``/``view``/``arange``, and hsplit/vsplit/dsplit's two
overloads."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import as_array, assert_same_error, dtype_name, ember_names

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _matrix(lib):
    return lib.arange(6.).reshape(2, 3)


def _described(value):
    """Results as [(dtype name, shape, values), ...] whichever library made them."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    return [(dtype_name(v.dtype), tuple(v.shape), as_array(v)) for v in values]


def _outcome(call, lib, make):
    """``call(lib, make(lib))`` described, or its error's (type name, message) with PyTorch's
    names read as ember's."""
    try:
        return _described(call(lib, make(lib)))
    except Exception as error:      # noqa: BLE001 (both libraries' errors are compared)
        return type(error).__name__, ember_names(str(error))


def _same_result(call, make=_matrix):
    """Assert both libraries give the same dtypes and shapes and values (to a few ulps), or
    the same error."""
    ours, theirs = _outcome(call, ember, make), _outcome(call, torch, make)
    if isinstance(ours, tuple) or isinstance(theirs, tuple):
        assert ours == theirs
        return
    assert [o[:2] for o in ours] == [t[:2] for t in theirs]
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o[2], t[2], rtol=1e-12)


# --- Python types as dtypes -------------------------------------------------------------------

_DTYPE_CALLS = {
    "x.sum(dtype=T)": lambda L, x, T: x.sum(dtype=T),
    "sum(x, 0, dtype=T)": lambda L, x, T: L.sum(x, 0, dtype=T),
    "x.prod(dtype=T)": lambda L, x, T: x.prod(dtype=T),
    "x.cumsum(1, dtype=T)": lambda L, x, T: x.cumsum(1, dtype=T),
    "cumprod(x, 0, dtype=T)": lambda L, x, T: L.cumprod(x, 0, dtype=T),
    "x.nansum(dtype=T)": lambda L, x, T: x.nansum(dtype=T),
    "zeros(2, dtype=T)": lambda L, x, T: L.zeros(2, dtype=T),
    "ones_like(x, dtype=T)": lambda L, x, T: L.ones_like(x, dtype=T),
    "full((2,), 1, dtype=T)": lambda L, x, T: L.full((2,), 1, dtype=T),
    "tensor([0, 2], dtype=T)": lambda L, x, T: L.tensor([0, 2], dtype=T),
    "x.new_zeros(2, dtype=T)": lambda L, x, T: x.new_zeros(2, dtype=T),
    "x.to(T)": lambda L, x, T: x.to(T),
    "x.to('cpu', T)": lambda L, x, T: x.to("cpu", T),
    "eye(2, dtype=T)": lambda L, x, T: L.eye(2, dtype=T),
}
_FLOAT_DTYPE_CALLS = {
    "x.mean(dtype=T)": lambda L, x, T: x.mean(dtype=T),
    "x.softmax(1, dtype=T)": lambda L, x, T: x.softmax(1, dtype=T),
    "F.log_softmax(x, 0, dtype=T)": lambda L, x, T: L.nn.functional.log_softmax(x, 0, dtype=T),
    "x.norm(dtype=T)": lambda L, x, T: x.norm(dtype=T),
    "linalg.vector_norm(x, dtype=T)": lambda L, x, T: L.linalg.vector_norm(x, dtype=T),
    "arange(3, dtype=T)": lambda L, x, T: L.arange(3, dtype=T),
    "linspace(0, 1, 3, dtype=T)": lambda L, x, T: L.linspace(0, 1, 3, dtype=T),
    "logspace(0, 1, 3, dtype=T)": lambda L, x, T: L.logspace(0, 1, 3, dtype=T),
    "hann_window(4, dtype=T)": lambda L, x, T: L.hann_window(4, dtype=T),
}


@pytest.mark.parametrize("python_type", [float, int, bool, complex])
@pytest.mark.parametrize("name", list(_DTYPE_CALLS))
def test_python_types_are_dtypes(name, python_type):
    _same_result(lambda L, x: _DTYPE_CALLS[name](L, x, python_type))


@pytest.mark.parametrize("python_type", [float, complex])
@pytest.mark.parametrize("name", list(_FLOAT_DTYPE_CALLS))
def test_python_float_types_are_dtypes(name, python_type):
    _same_result(lambda L, x: _FLOAT_DTYPE_CALLS[name](L, x, python_type))


@pytest.mark.parametrize("name, call", [
    ("arange(0, 3, dtype=int)", lambda L, x: L.arange(0, 3, dtype=int)),
    ("tril_indices(3, 3, dtype=int)", lambda L, x: L.tril_indices(3, 3, dtype=int)),
    ("x.view(bool)", lambda L, x: L.zeros(2, 2).view(bool)),
    ("x.view(dtype=int)", lambda L, x: L.zeros(2, 2).view(dtype=int)),
    ("sum(x, 0, dtype=float, out=...)",
     lambda L, x: L.sum(x, 0, dtype=float, out=L.empty(3, dtype=L.float64))),
])
def test_python_types_in_other_forms(name, call):
    _same_result(call)


@pytest.mark.parametrize("factory", ["rand", "randn", "randint", "randperm", "normal",
                                     "rand_like", "randn_like"])
def test_random_factories_take_python_types(factory):
    calls = {"rand": lambda L: L.rand(2, dtype=float), "randn": lambda L: L.randn(2, dtype=complex),
             "randint": lambda L: L.randint(3, (2,), dtype=float),
             "randperm": lambda L: L.randperm(3, dtype=float),
             "normal": lambda L: L.normal(0., 1., (2,), dtype=float),
             "rand_like": lambda L: L.rand_like(L.ones(2), dtype=float),
             "randn_like": lambda L: L.randn_like(L.ones(2), dtype=float)}
    ours, theirs = calls[factory](ember), calls[factory](torch)
    assert (dtype_name(ours.dtype), tuple(ours.shape)) == (dtype_name(theirs.dtype),
                                                           tuple(theirs.shape))


@pytest.mark.parametrize("name, call", [
    ("x.sum(dtype=np.float64)", lambda L, x: x.sum(dtype=np.float64)),
    ("x.sum(dtype=list)", lambda L, x: x.sum(dtype=list)),
    ("x.mean(0, dtype=str)", lambda L, x: x.mean(0, dtype=str)),
    ("x.view(float)", lambda L, x: x.view(float)),
    ("x.to(str)", lambda L, x: x.to(str)),
    ("x.to(y, float)", lambda L, x: x.to(x, float)),
])
def test_types_that_are_no_dtype_are_refused(name, call):
    assert_same_error(call, _matrix)


# --- dims as varargs --------------------------------------------------------------------------

def _cube(lib):
    return lib.arange(6.).reshape(1, 2, 1, 3)


@pytest.mark.parametrize("name, call", [
    ("x.squeeze(0, 2)", lambda L, x: x.squeeze(0, 2)),
    ("x.squeeze(2, 0)", lambda L, x: x.squeeze(2, 0)),
    ("x.squeeze(0, 1, 2)", lambda L, x: x.squeeze(0, 1, 2)),
    ("x.squeeze_(0, 2)", lambda L, x: x.clone().squeeze_(0, 2)),
    ("x.count_nonzero(0, 3)", lambda L, x: x.count_nonzero(0, 3)),
    ("x.count_nonzero(3, 1)", lambda L, x: x.count_nonzero(3, 1)),
    ("x.count_nonzero(0)", lambda L, x: x.count_nonzero(0)),
])
def test_dims_as_varargs(name, call):
    _same_result(call, _cube)


def test_squeeze_varargs_record_torch_s_node():
    for lib in (ember, torch):
        x = _cube(lib).requires_grad_()
        assert x.squeeze(0, 2).grad_fn.name() == "SqueezeBackward2"
        assert x.squeeze(0).grad_fn.name() == "SqueezeBackward1"


@pytest.mark.parametrize("name, call", [
    ("x.squeeze(0, 'a')", lambda L, x: x.squeeze(0, "a")),
    ("x.squeeze('a', 0)", lambda L, x: x.squeeze("a", 0)),
    ("x.squeeze(0, 1.5)", lambda L, x: x.squeeze(0, 1.5)),
    ("x.squeeze(0, 0)", lambda L, x: x.squeeze(0, 0)),
    ("x.squeeze_(0, 'a')", lambda L, x: x.squeeze_(0, "a")),
    ("x.squeeze_(('a', 0))", lambda L, x: x.squeeze_(("a", 0))),
    ("x.count_nonzero(0, 'a')", lambda L, x: x.count_nonzero(0, "a")),
    ("x.count_nonzero('a', 0)", lambda L, x: x.count_nonzero("a", 0)),
    ("x.count_nonzero(0, 0)", lambda L, x: x.count_nonzero(0, 0)),
])
def test_varargs_dims_errors(name, call):
    assert_same_error(call, _cube)


# --- the deprecated scalar-first overloads ----------------------------------------------------

def _operands(lib):
    x = lib.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])
    return x, x * 3 - 1, x.abs() + 1


_SCALAR_FIRST = {
    "x.add(2, y)": lambda L, x, y, z: x.add(2, y),
    "x.add(2.5, 3)": lambda L, x, y, z: x.add(2.5, 3),
    "x.add(tensor(2.), y)": lambda L, x, y, z: x.add(L.tensor(2.), y),
    "x.add_(-0.1, y)": lambda L, x, y, z: x.clone().add_(-0.1, y),
    "add(x, 2, y)": lambda L, x, y, z: L.add(x, 2, y),
    "add(x, 2, y, out=)": lambda L, x, y, z: L.add(x, 2, y, out=L.empty(2, 3)),
    "x.sub(2, y)": lambda L, x, y, z: x.sub(2, y),
    "x.sub_(2, y)": lambda L, x, y, z: x.clone().sub_(2, y),
    "sub(x, 2, y)": lambda L, x, y, z: L.sub(x, 2, y),
    "x.addcmul(0.5, y, z)": lambda L, x, y, z: x.addcmul(0.5, y, z),
    "x.addcmul_(0.5, y, z)": lambda L, x, y, z: x.clone().addcmul_(0.5, y, z),
    "addcmul(x, 0.5, y, z)": lambda L, x, y, z: L.addcmul(x, 0.5, y, z),
    "x.addcdiv(-2, y, z)": lambda L, x, y, z: x.addcdiv(-2, y, z),
    "x.addcdiv_(-2, y, z)": lambda L, x, y, z: x.clone().addcdiv_(-2, y, z),
    "addcdiv(x, -2, y, z)": lambda L, x, y, z: L.addcdiv(x, -2, y, z),
}


@pytest.fixture
def warn_always():
    """Both libraries warn every time (their deprecated overloads warn once a process)."""
    ember.set_warn_always(True)
    torch.set_warn_always(True)
    yield
    ember.set_warn_always(False)
    torch.set_warn_always(False)


def _with_warnings(call, lib):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (result,) = _described(call(lib, *_operands(lib)))
    return result, [str(w.message).split(" (Triggered internally")[0] for w in caught]


@pytest.mark.parametrize("name", list(_SCALAR_FIRST))
def test_scalar_first_overloads(name, warn_always):
    ours, our_warnings = _with_warnings(_SCALAR_FIRST[name], ember)
    theirs, their_warnings = _with_warnings(_SCALAR_FIRST[name], torch)
    assert ours[:2] == theirs[:2] and ours[2].tolist() == theirs[2].tolist()
    assert our_warnings == their_warnings and len(our_warnings) == 1


def test_scalar_first_overloads_warn_once_a_process():
    x, y, _ = _operands(ember)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x.add(2, y)
        x.sub(2, y)
        ember.addcmul(x, 2, y, y)
    assert [w.category for w in caught] == [UserWarning]


def test_scalar_first_gradients_are_torch_s():
    grads = []
    for lib in (ember, torch):
        x, y, z = (t.requires_grad_() for t in _operands(lib))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = x.addcmul(0.5, y, z).add(-2, y * z)
        out.sum().backward()
        grads.append([as_array(t.grad).tolist() for t in (x, y, z)] + [out.grad_fn.name()])
    assert grads[0] == grads[1]


@pytest.mark.parametrize("name, call", [
    ("x.add(y, 2)", lambda L, x, y, z: x.add(y, 2)),
    ("x.add(y, y)", lambda L, x, y, z: x.add(y, y)),
    ("x.add(2, 'a')", lambda L, x, y, z: x.add(2, "a")),
    ("x.add(2, [1.])", lambda L, x, y, z: x.add(2, [1.0])),
    ("x.add(2, y, alpha=3)", lambda L, x, y, z: x.add(2, y, alpha=3)),
    ("add(x, 2, y, alpha=2)", lambda L, x, y, z: L.add(x, 2, y, alpha=2)),
    ("add(2, x, y)", lambda L, x, y, z: L.add(2, x, y)),
    ("add(x, y, 2)", lambda L, x, y, z: L.add(x, y, 2)),
    ("x.sub_(y, 2)", lambda L, x, y, z: x.sub_(y, 2)),
    ("x.addcmul(2, 3, y)", lambda L, x, y, z: x.addcmul(2, 3, y)),
    ("x.addcmul(y, z, 2)", lambda L, x, y, z: x.addcmul(y, z, 2)),
    ("addcmul(x, y, y, y)", lambda L, x, y, z: L.addcmul(x, y, y, y)),
    ("addcmul(x, 2, y, z, value=3)", lambda L, x, y, z: L.addcmul(x, 2, y, z, value=3)),
    ("x.addcdiv_(y, z, 2)", lambda L, x, y, z: x.addcdiv_(y, z, 2)),
    ("x.add(True, y)", lambda L, x, y, z: x.add(True, y)),
    # a 0-dim tensor that requires grad is no Number to the parser
    ("x.add(tensor(2., requires_grad=True), y)",
     lambda L, x, y, z: x.add(L.tensor(2., requires_grad=True), y)),
    # more positional arguments than even the deprecated form takes
    ("add(x, y, y, y)", lambda L, x, y, z: L.add(x, y, y, y)),
    ("add(x, 2, y, y, y)", lambda L, x, y, z: L.add(x, 2, y, y, y)),
    ("addcmul(x, y, y, y, y)", lambda L, x, y, z: L.addcmul(x, y, y, y, y)),
    ("addcmul(x, y, y, y, y, y)", lambda L, x, y, z: L.addcmul(x, y, y, y, y, y)),
    ("x.add(y, y, y)", lambda L, x, y, z: x.add(y, y, y)),
    ("x.add(2, y, 2)", lambda L, x, y, z: x.add(2, y, 2)),
    ("x.add(y, y, y, y)", lambda L, x, y, z: x.add(y, y, y, y)),
    ("x.addcdiv_(1, y, y, y)", lambda L, x, y, z: x.addcdiv_(1, y, y, y)),
    ("x.sub(y, y, y, alpha=2)", lambda L, x, y, z: x.sub(y, y, y, alpha=2)),
    ("add(x, y, y, y, out=)", lambda L, x, y, z: L.add(x, y, y, y, out=x)),
])
def test_scalar_first_refusals(name, call):
    assert_same_error(lambda L, operands: call(L, *operands), _operands)


# --- the parser's words -----------------------------------------------------------------------

_PARSER_ERRORS = {
    "softmax(x)": lambda L, x: L.softmax(x),
    "x.softmax()": lambda L, x: x.softmax(),
    "cumsum(x)": lambda L, x: L.cumsum(x),
    "x.cumsum_()": lambda L, x: x.cumsum_(),
    "gather(x, axis=1)": lambda L, x: L.gather(x, axis=1),
    "linalg.vector_norm()": lambda L, x: L.linalg.vector_norm(),
    "x.tile()": lambda L, x: x.tile(),
    "x.permute()": lambda L, x: x.permute(),
    "x.reshape()": lambda L, x: x.reshape(),
    "x.flip()": lambda L, x: x.flip(),
    "x.tensor_split()": lambda L, x: x.tensor_split(),
    "tensor_split(x)": lambda L, x: L.tensor_split(x),
    "tensor_split(x, dim=1)": lambda L, x: L.tensor_split(x, dim=1),
    "x.unflatten(0)": lambda L, x: x.unflatten(0),
    "x.view()": lambda L, x: x.view(),
    "x.view(foo=1)": lambda L, x: x.view(foo=1),
    "x.view(2, 3, foo=1)": lambda L, x: x.view(2, 3, foo=1),
    "x.view('a')": lambda L, x: x.view("a"),
    "x.view(None)": lambda L, x: x.view(None),
    "x.view(dtype=float32, size=2)": lambda L, x: x.view(dtype=L.float32, size=2),
    "x.view(2, size=(3, 2))": lambda L, x: x.view(2, size=(3, 2)),
    "x.to(foo=1)": lambda L, x: x.to(foo=1),
    "x.to(dtype=float64, foo=2)": lambda L, x: x.to(dtype=L.float64, foo=2),
    "x.to('cpu', 'a')": lambda L, x: x.to("cpu", "a"),
    "x.to(float64, 1)": lambda L, x: x.to(L.float64, 1),
    "x.to(float64, True, True, True)": lambda L, x: x.to(L.float64, True, True, True),
    "x.to(other=x)": lambda L, x: x.to(other=x),
    "x.to(copy='a')": lambda L, x: x.to(copy="a"),
    "arange()": lambda L, x: L.arange(),
    "arange(dtype=float32)": lambda L, x: L.arange(dtype=L.float32),
    "F.gelu(x, approximate=1)": lambda L, x: L.nn.functional.gelu(x, approximate=1),
    "F.gelu(x, approximate=None)": lambda L, x: L.nn.functional.gelu(x, approximate=None),
    "x.copy_(x, 1)": lambda L, x: x.copy_(x, 1),
    "x.copy_(x, non_blocking=1)": lambda L, x: x.copy_(x, non_blocking=1),
    "multinomial(x[0], 2, 1)": lambda L, x: L.multinomial(x[0], 2, 1),
    "x.svd(1)": lambda L, x: x.svd(1),
    "svd(x, True, 1)": lambda L, x: L.svd(x, True, 1),
    "x.sort(0, 1)": lambda L, x: x.sort(0, 1),
    "argsort(x, descending=1)": lambda L, x: L.argsort(x, descending=1),
    "x.isclose(x, equal_nan=1)": lambda L, x: x.isclose(x, equal_nan=1),
    "isin(x, x, invert=1)": lambda L, x: L.isin(x, x, invert=1),
    "x.index_put_((i,), v, 1)": lambda L, x: x.index_put_((L.tensor([0]),), L.tensor(1.), 1),
    "gather(x, 0, i, sparse_grad=1)":
        lambda L, x: L.gather(x, 0, L.zeros(2, 3, dtype=L.long), sparse_grad=1),
}


@pytest.mark.parametrize("name", list(_PARSER_ERRORS))
def test_parser_errors_are_torch_s(name):
    assert_same_error(_PARSER_ERRORS[name], _matrix)


def test_contiguous_takes_its_memory_format_by_keyword_only():
    for lib in (ember, torch):
        x = _matrix(lib)
        assert x.contiguous(memory_format=lib.contiguous_format) is x
        assert x.is_contiguous(memory_format=lib.contiguous_format)
        for call in (lambda: x.contiguous(lib.contiguous_format),
                     lambda: x.is_contiguous(lib.contiguous_format)):
            with pytest.raises(TypeError):
                call()


# --- hsplit, vsplit, dsplit -------------------------------------------------------------------

def _three(lib):
    return lib.arange(8.).reshape(2, 2, 2)


_SPLITS = {
    "x.hsplit(tensor([1]))": lambda L, x: x.hsplit(L.tensor([1])),
    "x.hsplit(tensor([[1]]))": lambda L, x: x.hsplit(L.tensor([[1]])),
    "x.hsplit(tensor(2))": lambda L, x: x.hsplit(L.tensor(2)),
    "x.hsplit(indices=(1,))": lambda L, x: x.hsplit(indices=(1,)),
    "x.hsplit([])": lambda L, x: x.hsplit([]),
    "x.hsplit([1, True])": lambda L, x: x.hsplit([1, True]),
    "x.hsplit(1, 2)": lambda L, x: x.hsplit(1, 2),
    "hsplit(input=x, sections=2)": lambda L, x: L.hsplit(input=x, sections=2),
    "hsplit(x, [tensor(1)])": lambda L, x: L.hsplit(x, [L.tensor(1)]),
    "hsplit(x, np.int64(2))": lambda L, x: L.hsplit(x, np.int64(2)),
    "vsplit(x, [1])": lambda L, x: L.vsplit(x, [1]),
    "dsplit(x, 2)": lambda L, x: L.dsplit(x, 2),
    "x.dsplit(indices=[1])": lambda L, x: x.dsplit(indices=[1]),
}


@pytest.mark.parametrize("name", list(_SPLITS))
def test_directional_splits(name):
    _same_result(_SPLITS[name], _three)


_SPLIT_ERRORS = {
    "x.hsplit('a')": lambda L, x: x.hsplit("a"),
    "x.hsplit(1.5)": lambda L, x: x.hsplit(1.5),
    "x.hsplit(None)": lambda L, x: x.hsplit(None),
    "x.hsplit(True)": lambda L, x: x.hsplit(True),
    "x.hsplit([1, 'a'])": lambda L, x: x.hsplit([1, "a"]),
    "x.hsplit((1, 2.5))": lambda L, x: x.hsplit((1, 2.5)),
    "x.hsplit([True, 1])": lambda L, x: x.hsplit([True, 1]),
    "x.hsplit(tensor([1, 2]))": lambda L, x: x.hsplit(L.tensor([1, 2])),
    "x.hsplit(tensor([1.]))": lambda L, x: x.hsplit(L.tensor([1.0])),
    "x.hsplit(range(1, 2))": lambda L, x: x.hsplit(range(1, 2)),
    "x.hsplit(1, 'a')": lambda L, x: x.hsplit(1, "a"),
    "x.hsplit()": lambda L, x: x.hsplit(),
    "x.hsplit(foo=1)": lambda L, x: x.hsplit(foo=1),
    "x.hsplit(input=x)": lambda L, x: x.hsplit(input=x),
    "x.hsplit(sections=[1])": lambda L, x: x.hsplit(sections=[1]),
    "x.hsplit(indices=2)": lambda L, x: x.hsplit(indices=2),
    "x.hsplit(3, sections=3)": lambda L, x: x.hsplit(3, sections=3),
    "hsplit(x)": lambda L, x: L.hsplit(x),
    "hsplit()": lambda L, x: L.hsplit(),
    "hsplit(x, 1, 2)": lambda L, x: L.hsplit(x, 1, 2),
    "hsplit(x, 1, foo=2)": lambda L, x: L.hsplit(x, 1, foo=2),
    "hsplit(x, indices_or_sections=2)": lambda L, x: L.hsplit(x, indices_or_sections=2),
    "hsplit(x, sections=2, indices=[1])": lambda L, x: L.hsplit(x, sections=2, indices=[1]),
    "hsplit(2, 2)": lambda L, x: L.hsplit(2, 2),
    "vsplit(x, [1], 1)": lambda L, x: L.vsplit(x, [1], 1),
    "dsplit(x, 'a')": lambda L, x: L.dsplit(x, "a"),
    "dsplit(x[0], 'a')": lambda L, x: L.dsplit(x[0], "a"),
    "dsplit(x, [1, 'b'])": lambda L, x: L.dsplit(x, [1, "b"]),
    "x.tensor_split()": lambda L, x: x.tensor_split(),
}


@pytest.mark.parametrize("name", list(_SPLIT_ERRORS))
def test_directional_split_errors(name):
    assert_same_error(_SPLIT_ERRORS[name], _three)
