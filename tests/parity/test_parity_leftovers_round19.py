"""Leftovers of earlier rounds compared with PyTorch: bool parameters given another type
(std/var's ``unbiased`` and ``keepdim``, every reduction's ``keepdim``), the errors of the
hand-written ops' other names (``concat`` for ``cat``), and jagged nested tensors'
``values()`` node, ``new_*`` methods and unsupported reductions."""

import warnings

import pytest

import ember
from tests.parity._compare import assert_same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_BOOL_ARGUMENTS = {
    "x.std(0, 'a')": lambda L, x: x.std(0, "a"),
    "x.var(0, 'a')": lambda L, x: x.var(0, "a"),
    "std(x, 0, 1)": lambda L, x: L.std(x, 0, 1),
    "var(x, 0, 1)": lambda L, x: L.var(x, 0, 1),
    "std_mean(x, 0, 1)": lambda L, x: L.std_mean(x, 0, 1),
    "var_mean(x, 0, 'a')": lambda L, x: L.var_mean(x, 0, "a"),
    "x.std(0, 1.0)": lambda L, x: x.std(0, 1.0),
    "x.std(0, True, 1)": lambda L, x: x.std(0, True, 1),
    "x.std(0, keepdim=1)": lambda L, x: x.std(0, keepdim=1),
    "x.std(unbiased=1)": lambda L, x: x.std(unbiased=1),
    "x.var(0, keepdim=1, correction=1)": lambda L, x: x.var(0, keepdim=1, correction=1),
    "x.std([0], 1)": lambda L, x: x.std([0], 1),
    "x.std(False, True)": lambda L, x: x.std(False, True),
    "x.std(True, keepdim=True)": lambda L, x: x.std(True, keepdim=True),
    "x.sum(0, 1)": lambda L, x: x.sum(0, 1),
    "sum(x, 0, keepdim=1.0)": lambda L, x: L.sum(x, 0, keepdim=1.0),
    "x.amax(0, 1)": lambda L, x: x.amax(0, 1),
    "amin(x, 0, keepdim=1)": lambda L, x: L.amin(x, 0, keepdim=1),
    "x.argmax(0, 1)": lambda L, x: x.argmax(0, 1),
    "x.logsumexp(0, 1)": lambda L, x: x.logsumexp(0, 1),
    "max(x, 0, 1)": lambda L, x: L.max(x, 0, 1),
    "x.min(0, keepdim=1.0)": lambda L, x: x.min(0, keepdim=1.0),
    "x.median(0, 1)": lambda L, x: x.median(0, 1),
    "x.aminmax(dim=0, keepdim=1)": lambda L, x: x.aminmax(dim=0, keepdim=1),
    "x.all(0, 1)": lambda L, x: x.all(0, 1),
    "mean(x, 0, 1)": lambda L, x: L.mean(x, 0, 1),
    "x.quantile(0.5, 0, 1)": lambda L, x: x.quantile(0.5, 0, 1),
    "x.topk(1, 0, 0)": lambda L, x: x.topk(1, 0, 0),
    "topk(x, 1, 0, True, 0)": lambda L, x: L.topk(x, 1, 0, True, 0),
    "searchsorted(x[0], x, right=1)": lambda L, x: L.searchsorted(x[0], x, right=1),
    "bucketize(x, x[0], out_int32=1)": lambda L, x: L.bucketize(x, x[0], out_int32=1),
    "linalg.cholesky(x[:, :3], upper=1)": lambda L, x: L.linalg.cholesky(x[:, :3], upper=1),
}

_HAND_WRITTEN_ALIASES = {
    "concat([x], dim='a')": lambda L, x: L.concat([x], dim="a"),
    "concat([x], 'a')": lambda L, x: L.concat([x], "a"),
    "concatenate(x)": lambda L, x: L.concatenate(x),
    "concat([x], 0, 1)": lambda L, x: L.concat([x], 0, 1),
    "concatenate([x], dimm=1)": lambda L, x: L.concatenate([x], dimm=1),
    "row_stack(x)": lambda L, x: L.row_stack(x),
    "row_stack([x], 1)": lambda L, x: L.row_stack([x], 1),
}


def _matrix(lib):
    return lib.arange(12.).reshape(3, 4)


@pytest.mark.parametrize("name", list(_BOOL_ARGUMENTS))
def test_bool_parameters_refuse_other_types_as_torch(name):
    assert_same_error(_BOOL_ARGUMENTS[name], _matrix)


@pytest.mark.parametrize("name", list(_HAND_WRITTEN_ALIASES))
def test_hand_written_aliases_name_themselves_in_errors(name):
    assert_same_error(_HAND_WRITTEN_ALIASES[name], _matrix)


def test_valid_bool_arguments_still_work():
    x = ember.arange(12.).reshape(3, 4)
    assert x.std(0, True, True).shape == (1, 4) and x.std(True).item() == pytest.approx(
        torch.arange(12.).std(True).item())
    assert x.var(0, unbiased=False).tolist() == pytest.approx([10.6666667] * 4)
    assert x.sum(0, True).tolist() == [[12.0, 15.0, 18.0, 21.0]]
    assert ember.amax(x, dim=1, keepdims=True).tolist() == [[3.0], [7.0], [11.0]]
    assert ember.concatenate([x, x], axis=1).shape == (3, 8)


def test_concat_is_offered_to_torch_function_as_itself():
    seen = []

    class Logged(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    x = ember.ones(2).as_subclass(Logged)
    assert ember.concat([x, x]).tolist() == [1.0] * 4
    assert seen[0] is ember.concat and seen[0] is not ember.cat


def _jagged(lib, requires_grad=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.nested.nested_tensor([lib.arange(6.).reshape(3, 2),
                                         lib.arange(4.).reshape(2, 2)],
                                        layout=lib.jagged, requires_grad=requires_grad)


def test_jagged_values_node_is_torch_s():
    for lib in (torch, ember):
        nt = _jagged(lib, requires_grad=True)
        assert type(nt.values().grad_fn).__name__ == "NestedGetValuesBackward0"
        assert type((nt * 2).values().grad_fn).__name__ == "NestedGetValuesBackward0"
    nt = _jagged(ember, requires_grad=True)
    (nt.values() * ember.arange(2.)).sum().backward()
    assert nt.grad.values().tolist() == [[0.0, 1.0]] * 5


_JAGGED = {
    "new_ones(2, 3)": lambda L, nt: nt.new_ones(2, 3),
    "new_zeros((2,))": lambda L, nt: nt.new_zeros((2,)),
    "new_empty(size=(2,))": lambda L, nt: nt.new_empty(size=(2,)),
    "new_full((), 3.0)": lambda L, nt: nt.new_full((), 3.0),
    "new_ones('a')": lambda L, nt: nt.new_ones("a"),
    "std()": lambda L, nt: nt.std(),
    "var(-1, unbiased=False)": lambda L, nt: nt.var(-1, unbiased=False),
    "var_mean(nt, -1)": lambda L, nt: L.var_mean(nt, -1),
    "norm(dim=-1)": lambda L, nt: nt.norm(dim=-1),
    "linalg.vector_norm(nt, dim=-1)": lambda L, nt: L.linalg.vector_norm(nt, dim=-1),
    "median(-1)": lambda L, nt: nt.median(-1),
    "cumsum(-1)": lambda L, nt: nt.cumsum(-1),
    "argsort(-1)": lambda L, nt: nt.argsort(-1),
    "new_empty_strided((), ())": lambda L, nt: nt.new_empty_strided((), ()),
    "linalg.matrix_norm(nt)": lambda L, nt: L.linalg.matrix_norm(nt),
}


@pytest.mark.parametrize("name", list(_JAGGED))
def test_jagged_unsupported_calls_fail_as_torch(name):
    assert_same_error(_JAGGED[name], _jagged)


def test_transposed_jagged_values_are_a_transpose_as_torch_s():
    names = []
    for lib in (torch, ember):
        values = _jagged(lib, requires_grad=True).transpose(1, 2).values()
        names.append([type(f).__name__ for f, _ in values.grad_fn.next_functions if f])
    assert names[0] == names[1] == ["TransposeBackward0"]


def test_hand_written_aliases_say_what_they_alias():
    assert ember.concat.__doc__ == "Alias of :func:`ember.cat`."
    assert "Alias of :func:`torch.cat`." in torch.concat.__doc__


def test_jagged_new_methods_of_no_dims_work():
    nt = _jagged(ember)
    assert nt.new_ones(()).item() == 1.0 and nt.new_zeros([], dtype=ember.int64).item() == 0
    assert nt.new_empty(()).shape == ()
