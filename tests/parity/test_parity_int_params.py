"""Parameters PyTorch types as ``int`` (not ``SymInt``): Python and NumPy integers and 0-dim
integer tensors are read as their value; bools, floats, NumPy bools and tensors with a dim or a
non-integer dtype are refused with a TypeError. The same program runs on both libraries and
must give the same values, or the same exception and message."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_KINDS = {
    "int": lambda L: 2,
    "np_int64": lambda L: np.int64(2),
    "int_tensor0": lambda L: L.tensor(2),
    "uint8_tensor0": lambda L: L.tensor(2, dtype=L.uint8),
    "int_tensor1": lambda L: L.tensor([2]),
    "float_tensor0": lambda L: L.tensor(2.0),
    "bool_tensor0": lambda L: L.tensor(True),
    "bool": lambda L: True,
    "np_bool": lambda L: np.bool_(True),
    "float": lambda L: 2.0,
}


def _x(L):
    return L.tensor([3.0, 2.5, 4.25], dtype=L.float64)


# methods name themselves and count positions differently, and round's overloads give
# PyTorch's "invalid combination" message (known, left): exception types only there
_TYPES_ONLY = {"polygamma_method", "mvlgamma_inplace", "round_decimals"}

_CASES = {
    "polygamma": lambda L, n: L.polygamma(n, _x(L)),
    "polygamma_method": lambda L, n: _x(L).polygamma(n),
    "mvlgamma": lambda L, p: L.mvlgamma(_x(L), p),
    "mvlgamma_inplace": lambda L, p: _x(L).mvlgamma_(p),
    "tensorinv_ind": lambda L, ind: L.linalg.tensorinv(L.eye(4).reshape(2, 2, 4), ind=ind),
    "round_decimals": lambda L, d: L.round(_x(L) / 7, decimals=d),
    "matrix_power": lambda L, n: L.matrix_power(_x(L).reshape(3, 1) * L.eye(3), n),
    "linalg_matrix_power": lambda L, n: L.linalg.matrix_power(_x(L).reshape(3, 1) * L.eye(3), n),
}


def _run(L, case, kind):
    try:
        return _CASES[case](L, _KINDS[kind](L)).tolist()
    except Exception as e:  # noqa: BLE001 (the exception is the result compared)
        return type(e).__name__, str(e)


@pytest.mark.parametrize("kind", list(_KINDS))
@pytest.mark.parametrize("case", list(_CASES))
def test_int_param_parsing_matches_torch(case, kind):
    expected, got = _run(torch, case, kind), _run(ember, case, kind)
    if isinstance(expected, tuple):
        assert got[0] == expected[0]
        if case not in _TYPES_ONLY:
            assert got[1] == expected[1]
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_tensor_orders_keep_the_gradient():
    grads = []
    for L in (torch, ember):
        x = L.tensor([3.0, 2.5], dtype=L.float64, requires_grad=True)
        power = L.linalg.matrix_power(x.diag(), L.tensor(-2)).sum()
        (L.polygamma(L.tensor(1), x).sum() + L.mvlgamma(x, L.tensor(2)).sum() + power).backward()
        grads.append(x.grad.tolist())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64", "float16",
                                   "float64"])
@pytest.mark.parametrize("decimals", [0, 1])
def test_special_round_has_no_integer_kernel(dtype, decimals):
    results = []
    for L in (torch, ember):
        x = L.tensor([1.5, 2.5, 0.0]).to(getattr(L, dtype))
        try:
            results.append(L.special.round(x, decimals=decimals).tolist())
        except NotImplementedError as e:
            results.append(str(e))
    assert results[1] == results[0]
