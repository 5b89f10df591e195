"""Tensors as Python objects against torch's: operators with NumPy arrays and NumPy scalars,
nested data given to ``tensor`` (values, dtypes, and the errors with their messages)."""

import operator

import numpy as np
import pytest

import ember
from tests.parity._compare import dtype_name, ember_names, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
       operator.mod, operator.pow, operator.and_, operator.lt, operator.ge, operator.eq,
       operator.ne, operator.matmul]
TENSORS = [([1.5, 2.0], "float32"), ([3, 4], "int64"), ([3, 4], "int32"),
           ([True, False], "bool"), (2.0, "float32")]
ARRAYS = [np.array([1.0, 2.0]), np.array([1.0, 2.0], np.float32), np.array([1, 2]),
          np.array(2.0), np.array(2), np.array([True, True]), np.array([1, 2], np.uint8)]
SCALARS = [True, 2, 2.5, np.float64(2), np.float32(2), np.int64(2), np.int32(2), np.uint8(3)]


def _outcome(fn):
    """(result values, dtype name) or (exception type, message) of ``fn()``."""
    return outcome(fn, quiet=True, message=ember_names, describe=_values)


def _values(r):
    """(values rounded to 4 places, dtype name) of a tensor; (type name, value) of others."""
    if not hasattr(r, "detach"):
        return type(r).__name__, r
    values = np.asarray(r.detach().tolist())
    if values.dtype.kind in "fc":
        values = values.round(4)
    return values.tolist(), dtype_name(r.dtype)


# (torch's ``t != array`` is Python's identity fallback, True: ember compares elementwise)
@pytest.mark.parametrize("op", [f for f in OPS if f is not operator.ne],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("values,dtype", TENSORS)
def test_operators_with_arrays(op, values, dtype):
    for arr in ARRAYS:
        want = _outcome(lambda: op(torch.tensor(values, dtype=getattr(torch, dtype)), arr))
        got = _outcome(lambda: op(ember.tensor(values, dtype=getattr(ember, dtype)), arr))
        assert got == want, (op, arr.dtype, arr.shape)


@pytest.mark.parametrize("op", OPS[:-1], ids=lambda f: f.__name__)
@pytest.mark.parametrize("values,dtype", TENSORS[:3])
def test_operators_with_numpy_scalars_on_both_sides(op, values, dtype):
    for s in SCALARS:
        for swap in (False, True):
            def run(lib, s=s, swap=swap):
                t = lib.tensor(values, dtype=getattr(lib, dtype))
                return op(s, t) if swap else op(t, s)
            assert _outcome(lambda: run(ember)) == _outcome(lambda: run(torch)), (s, swap)


NESTED = [[[1, 2], 3], [1, [2, 3]], [1.0, [2, 3]], [1j, [1]], [[1, 2], [3, [4]]],
          [[[1], [2]], [3, 4]], ["a", "b"], [1, "a"], [[1], "ab"], [1, None], [[1], [None]],
          [[1], [2.5, None]], [1, (2,)], [1, range(2)], [[1, 2], (3, 4)], [[1, 2], None],
          [[1, 2], []], [True, 2], [True, 2.5], [[1, 2], [3.5, 4]]]


@pytest.mark.parametrize("data", NESTED, ids=repr)
@pytest.mark.parametrize("dtype", [None, "bool", "int32", "float64", "complex64"])
def test_nested_data(data, dtype):
    want = _outcome(lambda: torch.tensor(data, dtype=dtype and getattr(torch, dtype)))
    got = _outcome(lambda: ember.tensor(data, dtype=dtype and getattr(ember, dtype)))
    assert got == want
