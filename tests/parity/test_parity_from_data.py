"""Tensors from Python data against PyTorch: shapes, dtypes, strides, errors and warnings of
``tensor``, ``asarray``, ``frombuffer`` and ``from_dlpack`` on odd inputs."""

import warnings

import numpy as np
import pytest

import ember
import ember._warn
from tests.parity._compare import dtype_name, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn, lib):
    """(dtype name, shape, strides, values) of ``fn(lib)``, or (error type, message)."""
    return outcome(fn, lib, describe=lambda t: (
        dtype_name(t.dtype), tuple(t.shape), t.stride(), t.tolist()))


@pytest.mark.parametrize("data", [
    [[], [1, 2]], [[], 1], [[[]], [1]], [[], [[1]]], [[], [1j]], [[], [True]],
    [[], [np.float64(1)]], [[], [None]], [[], ["a"]], [[1], []],
], ids=repr)
def test_empty_first_item_reads_only_the_leading_shape(data):
    assert _outcome(lambda t: t.tensor(data), ember) == _outcome(lambda t: t.tensor(data), torch)


@pytest.mark.parametrize("data", [
    [np.array(1.5)], (np.array(2),), [[np.array(1)]], [2, np.array(1.5)],
], ids=repr)
def test_zero_dim_arrays_as_first_items(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _outcome(lambda t: t.tensor(data), ember) == \
            _outcome(lambda t: t.tensor(data), torch)


@pytest.mark.parametrize("value", [
    np.longdouble(1.5), np.clongdouble(1), np.datetime64(1, "s"), np.void(b"a"),
    [np.longdouble(1.5)], [1.0, np.clongdouble(2)], np.str_("a"),
], ids=repr)
@pytest.mark.parametrize("make", ["tensor", "as_tensor"])
def test_unsupported_numpy_scalars_raise(value, make):
    assert _outcome(lambda t: getattr(t, make)(value), ember) == \
        _outcome(lambda t: getattr(t, make)(value), torch)


@pytest.mark.parametrize("array", [
    np.broadcast_to(np.arange(3.0), (2, 3)), np.broadcast_to(np.arange(3.0)[:, None], (3, 4)),
    np.arange(6.0).reshape(2, 3).T, np.arange(24.0).reshape(4, 6)[:, ::2].T,
], ids=["stride0-rows", "stride0-cols", "transposed", "sliced"])
def test_tensor_copy_strides(array):
    assert _outcome(lambda t: t.tensor(array), ember) == _outcome(lambda t: t.tensor(array), torch)
    assert _outcome(lambda t: t.asarray(array, copy=True), ember) == \
        _outcome(lambda t: t.asarray(array, copy=True), torch)


@pytest.mark.parametrize("obj", [[1, 2], 5, None], ids=repr)
def test_from_dlpack_of_a_non_exporter(obj):
    assert _outcome(lambda t: t.from_dlpack(obj), ember) == \
        _outcome(lambda t: t.from_dlpack(obj), torch)


def test_from_dlpack_of_a_used_capsule():
    def used(t):
        capsule = t.utils.dlpack.to_dlpack(t.arange(3))
        t.from_dlpack(capsule)
        return t.from_dlpack(capsule)
    assert _outcome(used, ember) == _outcome(used, torch)


def test_to_dlpack_exports_a_tensor_that_requires_grad():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    back = ember.from_dlpack(ember.utils.dlpack.to_dlpack(x))
    assert back.tolist() == [1.0, 2.0] and not back.requires_grad
    with pytest.raises(BufferError, match="Can't export tensors that require gradient"):
        x.__dlpack__()


def _warnings_of(fn, monkeypatch):
    monkeypatch.setattr(ember._warn, "_WARNED_ONCE", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
        except ValueError:
            pass
    return [(str(w.message), w.filename) for w in caught]


def test_asarray_warns_of_inherited_requires_grad(monkeypatch):
    x = ember.zeros(2, requires_grad=True)
    caught = _warnings_of(lambda: ember.asarray(x), monkeypatch)
    assert caught == [("ember.asarray: unspecified requires_grad now defaults to "
                       "obj.requires_grad instead of False. Pass requires_grad=False explicitly "
                       "to get the old behavior and silence this warning.", __file__)]
    assert _warnings_of(lambda: ember.asarray(x, requires_grad=True), monkeypatch) == []
    assert _warnings_of(lambda: ember.asarray(ember.zeros(2)), monkeypatch) == []


@pytest.mark.parametrize("call", [
    lambda lib: lib.frombuffer(b"abcd", dtype=lib.uint8),
    lambda lib: lib.asarray(b"ab"),          # (warns before its size error, as PyTorch)
])
def test_read_only_buffer_warns(call, monkeypatch):
    caught = _warnings_of(lambda: call(ember), monkeypatch)
    assert len(caught) == 1 and caught[0][1] == __file__
    assert caught[0][0].startswith("The given buffer is not writable, and PyTorch does not "
                                   "support non-writable tensors.")
    assert _warnings_of(lambda: ember.frombuffer(bytearray(b"ab"), dtype=ember.uint8),
                        monkeypatch) == []


@pytest.mark.parametrize("data, dtype", [
    ([[1.5], [2 ** 64]], None), ([[2 ** 64], [1.5]], None), ([2 ** 64, 1j], None),
    ([2 ** 64], None), ([2 ** 64, True], None), ([2 ** 64, 0], "bool"),
    ([2 ** 64], "complex64"), ([-2 ** 64], "float64"), ([2 ** 64], "int32"),
], ids=repr)
def test_ints_beyond_int64_read_as_floats_beside_floats(data, dtype):
    def make(t):
        return t.tensor(data, dtype=None if dtype is None else getattr(t, dtype))
    assert _outcome(make, ember) == _outcome(make, torch)


@pytest.mark.parametrize("value", ["decimal", "fraction"])
def test_uninferable_number_types_named_as_cpython_names_them(value):
    import decimal
    import fractions
    data = [decimal.Decimal("1.5")] if value == "decimal" else [fractions.Fraction(1, 2)]
    assert _outcome(lambda t: t.tensor(data), ember) == _outcome(lambda t: t.tensor(data), torch)
