"""CPU autocast against PyTorch's: the dtype each op returns under
``autocast("cpu", dtype=...)`` for float32, float64 and bfloat16 inputs, the same program
written once for both libraries."""

import numpy as np
import pytest

import ember
from tests.parity._compare import dtype_name, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _t(lib, *shape, dtype="float32"):
    a = np.linspace(0.1, 0.9, int(np.prod(shape))).reshape(shape).astype(np.float32)
    return lib.from_numpy(a).to(getattr(lib, dtype))


def _pad(mode, nd):
    return lambda L, d: L.nn.functional.pad(_t(L, 1, 2, *(4,) * nd, dtype=d), (1,) * (2 * nd),
                                            mode=mode)


_CASES = {
    "tensordot": lambda L, d: L.tensordot(_t(L, 3, 4, dtype=d), _t(L, 4, 2, dtype=d), dims=1),
    "tensordot_dot": lambda L, d: L.tensordot(_t(L, 4, dtype=d), _t(L, 4, 1, dtype=d), dims=1),
    "inner": lambda L, d: L.inner(_t(L, 3, 4, dtype=d), _t(L, 2, 4, dtype=d)),
    "inner_1d": lambda L, d: L.inner(_t(L, 4, dtype=d), _t(L, 4, dtype=d)),
    "multi_dot": lambda L, d: L.linalg.multi_dot([_t(L, 4, dtype=d), _t(L, 4, 2, dtype=d)]),
    "matrix_power": lambda L, d: L.linalg.matrix_power(_t(L, 3, 3, dtype=d), 3),
    "matrix_power_1": lambda L, d: L.linalg.matrix_power(_t(L, 3, 3, dtype=d), 1),
    "matrix_power_-1": lambda L, d: L.linalg.matrix_power(_spd(L, d), -1),
    "matrix_power_-2": lambda L, d: L.linalg.matrix_power(_spd(L, d), -2),
    "matrix_power_-3": lambda L, d: L.matrix_power(_spd(L, d), -3),
    "pinv": lambda L, d: L.linalg.pinv(_t(L, 3, 2, dtype=d)),
    "pinv_hermitian": lambda L, d: L.linalg.pinv(_spd(L, d), hermitian=True),
    "pinverse": lambda L, d: L.pinverse(_t(L, 3, 2, dtype=d)),
    "max_pool3d": lambda L, d: L.nn.functional.max_pool3d(_t(L, 1, 1, 4, 4, 4, dtype=d), 2),
    "max_pool3d_indices": lambda L, d: L.nn.functional.max_pool3d(
        _t(L, 1, 1, 4, 4, 4, dtype=d), 2, return_indices=True)[0],
    "lu_solve_method": lambda L, d: _t(L, 3, 2, dtype=d).lu_solve(
        *L.linalg.lu_factor(_spd(L, "float32"))),
    "reflect_1d": _pad("reflect", 1), "reflect_2d": _pad("reflect", 2),
    "reflect_3d": _pad("reflect", 3), "replicate_3d": _pad("replicate", 3),
    "circular_2d": _pad("circular", 2),
    "max_unpool1d": lambda L, d: L.nn.functional.max_unpool1d(
        *L.nn.functional.max_pool1d(_t(L, 1, 2, 6, dtype=d), 2, return_indices=True), 2),
    "householder": lambda L, d: L.linalg.householder_product(_t(L, 3, 3, dtype=d),
                                                             _t(L, 2, dtype=d)),
    "ormqr": lambda L, d: L.ormqr(_t(L, 3, 3, dtype=d), _t(L, 3, dtype=d), _t(L, 3, 2, dtype=d)),
    "conv_tbc": lambda L, d: L.conv_tbc(_t(L, 5, 2, 3, dtype=d), _t(L, 2, 3, 4, dtype=d),
                                        _t(L, 4, dtype=d), 1),
    "index_copy": lambda L, d: _t(L, 3, 2, dtype=d).index_copy(
        0, L.tensor([0, 2]), _t(L, 2, 2, dtype="bfloat16")),
    "gru": lambda L, d: _gru(L)(_t(L, 5, 2, 3, dtype=d))[0],
    "lstm_cell": lambda L, d: _cell(L, "LSTMCell")(_t(L, 2, 3, dtype=d))[1],
    "gru_cell": lambda L, d: _cell(L, "GRUCell")(_t(L, 2, 3, dtype=d)),
}


def _spd(L, dtype):
    """A well-conditioned 3x3 matrix."""
    return (_t(L, 3, 3) + 3 * L.eye(3)).to(getattr(L, dtype))


def _gru(L):
    L.manual_seed(0)
    return L.nn.GRU(3, 4)


def _cell(L, name):
    L.manual_seed(0)
    return getattr(L.nn, name)(3, 4)


def _outcome(L, case, autocast_dtype, dtype):
    """The dtype name of ``case``'s result under CPU autocast, or its error's type name."""
    def run():
        with L.autocast("cpu", dtype=getattr(L, autocast_dtype)):
            return case(L, dtype)
    return outcome(run, catch=(RuntimeError, NotImplementedError), message=None,
                   describe=lambda r: dtype_name(r.dtype))


@pytest.mark.parametrize("autocast_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(_CASES))
def test_output_dtypes_under_cpu_autocast_match(name, autocast_dtype):
    case = _CASES[name]
    for dtype in ("float32", "float64", "bfloat16"):
        if name in ("gru", "lstm_cell", "gru_cell") and dtype != "float32":
            continue                                # weights are float32
        if name == "index_copy" and autocast_dtype == "float16":
            continue    # PyTorch raises for a bfloat16 operand of a float16 promote op
        ours = _outcome(ember, case, autocast_dtype, dtype)
        theirs = _outcome(torch, case, autocast_dtype, dtype)
        assert ours == theirs, (name, autocast_dtype, dtype)


def _region_state(L):
    """What autocast regions report, nested and after ``set_autocast_dtype``."""
    seen = []
    with L.autocast("cpu", dtype=L.float16, cache_enabled=False):
        with L.autocast("cpu"):
            seen += [str(L.get_autocast_dtype("cpu")), L.is_autocast_cache_enabled(),
                     str(L.mm(L.ones(2, 2), L.ones(2, 2)).dtype)]
    L.set_autocast_dtype("cpu", L.float16)
    try:
        seen.append(str(L.autocast("cpu").fast_dtype))
    finally:
        L.set_autocast_dtype("cpu", L.bfloat16)
    seen.append(L.is_autocast_cache_enabled())
    return [str(s).split(".")[-1] for s in seen]


def test_autocast_region_state_matches():
    assert _region_state(ember) == _region_state(torch)


def test_grad_scaler_scaled_dtypes_match():
    def scaled(L):
        scaler = L.amp.GradScaler("cpu")
        inputs = [L.tensor(1.0, dtype=L.float16), L.tensor([1.0], dtype=L.bfloat16),
                  L.tensor([1.0], dtype=L.float64), L.tensor([1, 2])]
        return [(str(s.dtype).split(".")[1], s.tolist()) for s in map(scaler.scale, inputs)]
    assert scaled(ember) == scaled(torch)
