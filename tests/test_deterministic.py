"""Deterministic mode: the flags PyTorch exposes, ``empty``'s fill, and the ordered ``ufunc.at``
a GPU uses under it (run here on NumPy arrays, against NumPy's sequential ``ufunc.at``)."""

import numpy as np
import pytest

import ember
from ember.backend.ordered_sums import ordered_at


@pytest.fixture(autouse=True)
def restore_mode():
    yield
    ember.use_deterministic_algorithms(False)
    ember.utils.deterministic.fill_uninitialized_memory = True


def test_mode_and_warn_only_round_trip():
    assert not ember.are_deterministic_algorithms_enabled()
    assert ember.get_deterministic_debug_mode() == 0
    ember.use_deterministic_algorithms(True)
    assert ember.are_deterministic_algorithms_enabled()
    assert not ember.is_deterministic_algorithms_warn_only_enabled()
    assert ember.get_deterministic_debug_mode() == 2
    ember.use_deterministic_algorithms(True, warn_only=True)
    assert ember.is_deterministic_algorithms_warn_only_enabled()
    assert ember.get_deterministic_debug_mode() == 1
    ember.use_deterministic_algorithms(False)
    assert ember.get_deterministic_debug_mode() == 0


@pytest.mark.parametrize("level, number, enabled, warn_only", [
    ("default", 0, False, False), ("warn", 1, True, True), ("error", 2, True, False),
    (0, 0, False, False), (1, 1, True, True), (2, 2, True, False)])
def test_debug_mode_sets_the_mode(level, number, enabled, warn_only):
    ember.use_deterministic_algorithms(not enabled, warn_only=not warn_only)
    ember.set_deterministic_debug_mode(level)
    assert ember.are_deterministic_algorithms_enabled() is enabled
    assert ember.is_deterministic_algorithms_warn_only_enabled() is warn_only
    assert ember.get_deterministic_debug_mode() == number


def test_bad_arguments_name_the_problem():
    with pytest.raises(TypeError, match=r"'mode' \(position 1\) must be bool, not int"):
        ember.use_deterministic_algorithms(1)
    with pytest.raises(TypeError, match="'warn_only' must be bool"):
        ember.use_deterministic_algorithms(True, warn_only="yes")
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`, but "
                                           "got loud"):
        ember.set_deterministic_debug_mode("loud")
    with pytest.raises(RuntimeError, match="expected 0, 1, or 2, but got 3"):
        ember.set_deterministic_debug_mode(3)
    with pytest.raises(TypeError, match="debug_mode must be str or int, but got <class 'float'>"):
        ember.set_deterministic_debug_mode(1.0)
    with pytest.raises(RuntimeError, match="expected a bool, but got int"):
        ember.utils.deterministic.fill_uninitialized_memory = 1
    assert not ember.are_deterministic_algorithms_enabled()


def test_empty_fills_like_pytorch_in_deterministic_mode():
    assert ember.empty(2).tolist() == [0.0, 0.0]          # ember's zeros otherwise
    ember.use_deterministic_algorithms(True)
    assert ember.empty(2, 3).isnan().all()
    assert ember.empty(2, dtype=ember.bfloat16).isnan().all()
    assert ember.empty(1, dtype=ember.complex64).isnan().all()
    assert ember.empty(2, dtype=ember.int8).tolist() == [127, 127]
    assert ember.empty(1, dtype=ember.int64).item() == 2 ** 63 - 1
    assert ember.empty(1, dtype=ember.uint8).item() == 255
    assert ember.empty(1, dtype=ember.bool).item() is True
    assert ember.empty_like(ember.ones(2)).isnan().all()
    assert ember.ones(1).new_empty(2).isnan().all()
    assert ember.empty_strided((2, 2), (2, 1)).isnan().all()
    ember.utils.deterministic.fill_uninitialized_memory = False
    assert not ember.utils.deterministic.fill_uninitialized_memory
    assert ember.empty(2).tolist() == [0.0, 0.0]


def test_resize_fills_its_new_memory_like_empty_in_deterministic_mode():
    assert ember.zeros(2).resize_(3).tolist() == [0.0, 0.0, 0.0]  # ember's zeros otherwise
    ember.use_deterministic_algorithms(True)
    grown = ember.arange(4.0).view(2, 2).resize_(3, 2)
    assert grown[:2].tolist() == [[0, 1], [2, 3]] and grown[2].isnan().all()
    assert ember.zeros(2, dtype=ember.int32).resize_(4).tolist() == [0, 0] + [2 ** 31 - 1] * 2
    assert ember.zeros(1, dtype=ember.bool).resize_(2).tolist() == [False, True]
    kept = ember.arange(3.0)
    kept.resize_as_(ember.zeros(5))
    assert kept[:3].tolist() == [0, 1, 2] and kept[3:].isnan().all()
    shrunk = ember.arange(6.0)          # shrinking keeps the memory: nothing new to fill
    shrunk.resize_(2)
    assert shrunk.untyped_storage().nbytes() == 24
    assert shrunk.resize_(5).tolist() == [0, 1, 2, 3, 4]


def test_modules_built_from_empty_are_initialized_in_deterministic_mode():
    ember.use_deterministic_algorithms(True)
    for m in (ember.nn.Linear(3, 2), ember.nn.Conv2d(2, 2, 3), ember.nn.Embedding(4, 2),
              ember.nn.LSTM(3, 4), ember.nn.BatchNorm1d(3)):
        assert all(not p.isnan().any() for p in m.parameters()), type(m).__name__


def _keys(rng):
    """(target shape, index, values shape) in each form ``ufunc.at`` takes."""
    rows = rng.integers(0, 5, 40)
    yield (5,), rows, (40,)                                       # flat, many repeats
    yield (5, 3), rows, (40, 3)                                   # whole rows
    yield (5, 3), rows, (3,)                                      # values broadcast
    yield (5, 3), rows - 5, (40, 3)                               # negative indices
    yield (5, 3), (rows, rng.integers(0, 3, 40)), (40,)          # a tuple of arrays
    yield (5, 3), (slice(None), np.array([0, 2, 0, 0])), (5, 4)  # a slice and an array
    yield (4, 3), rng.random((4, 3)) > 0.5, None                  # a boolean mask


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("ufunc", [np.add, np.multiply])
def test_ordered_at_matches_ufunc_at(dtype, ufunc):
    rng = np.random.default_rng(0)
    for shape, index, vshape in _keys(rng):
        target = (rng.random(shape) + 0.5).astype(dtype)
        vshape = target[index].shape if vshape is None else vshape
        values = (rng.random(vshape) + 0.5).astype(dtype)
        want = target.copy()
        ufunc.at(want, index, values)
        got = target.copy()
        ordered_at(np, ufunc, got, index, values)
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-12)


def test_ordered_at_writes_through_a_view_and_sums_16_bit_floats_in_float32():
    base = np.zeros((3, 4))
    ordered_at(np, np.add, base[:, 1:3], np.array([0, 2, 0]), np.ones((3, 2)))
    assert base.tolist() == [[0, 2, 2, 0], [0, 0, 0, 0], [0, 1, 1, 0]]
    half = np.full(1, 2048, np.float16)             # float16 + 1 rounds back to 2048
    ordered_at(np, np.add, half, np.zeros(4, np.int64), np.ones(4, np.float16))
    assert half[0] == 2052
    empty = np.ones(2)
    ordered_at(np, np.add, empty, np.zeros(0, np.int64), np.zeros(0))
    assert empty.tolist() == [1, 1]


def test_ordered_at_sums_pairwise_in_a_fixed_order():
    # with a = 2**53, a + 1 rounds back to a: left to right a + 1 + 1 - a is 0, pairwise
    # (a + 1) + (1 - a) is 1, since 1 - a is exact. The order is the data's, not the hardware's
    a = 2.0 ** 53
    values = np.array([a, 1.0, 1.0, -a])
    left_to_right = np.zeros(1)
    np.add.at(left_to_right, np.zeros(4, np.int64), values)
    assert left_to_right[0] == 0.0
    pairwise = np.zeros(1)
    ordered_at(np, np.add, pairwise, np.zeros(4, np.int64), values)
    assert pairwise[0] == 1.0
