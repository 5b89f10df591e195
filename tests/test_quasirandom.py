"""ember.quasirandom.SobolEngine: the unscrambled points against known values and a direct
construction, the engine's state (draw, fast_forward, reset), dtypes and out=, errors, and the
balance of scrambled points."""

import numpy as np
import pytest

import ember
import ember.quasirandom
from ember.quasirandom import SobolEngine


def _points(t):
    return np.asarray(t.numpy())


def _direct(engine, indices):
    """Points by definition: point p is the XOR of the direction vectors of the set bits of
    p's Gray code (plus the shift), scaled by 2**-30."""
    v = _points(engine.sobolstate)
    shift = _points(engine.shift)
    rows = []
    for p in indices:
        gray = p ^ (p >> 1)
        x = shift.copy()
        for k in range(engine.MAXBIT):
            if gray >> k & 1:
                x ^= v[:, k]
        rows.append(x)
    return np.array(rows, np.float64) / 2.0 ** 30


def test_documented_example():
    eng = SobolEngine(dimension=5)
    expected = [[0, 0, 0, 0, 0], [0.5, 0.5, 0.5, 0.5, 0.5], [0.75, 0.25, 0.25, 0.25, 0.75]]
    out = eng.draw(3)
    assert out.dtype is ember.float32 and out.shape == (3, 5) and out.device.type == "cpu"
    np.testing.assert_array_equal(_points(out), expected)


def test_two_dimensions_first_points():
    expected = [[0, 0], [0.5, 0.5], [0.75, 0.25], [0.25, 0.75], [0.375, 0.375],
                [0.875, 0.875], [0.625, 0.125], [0.125, 0.625]]
    np.testing.assert_array_equal(_points(SobolEngine(2).draw(8)), expected)


def test_direction_numbers():
    state = _points(SobolEngine(6).sobolstate)
    assert state.shape == (6, 30) and state.dtype == np.int64
    np.testing.assert_array_equal(state[0], [1 << (29 - k) for k in range(30)])
    # Joe and Kuo's fourth dimension: x^3 + x + 1 and m = 1, 3, 1, then by the recurrence
    # m_4 = 4 m_2 ^ 8 m_1 ^ m_1 = 5 and m_5 = 4 m_3 ^ 8 m_2 ^ m_2 = 31, each m_k shifted to
    # bit 29 - k of its column
    np.testing.assert_array_equal(state[3, :5] >> (29 - np.arange(5)), [1, 3, 1, 5, 31])
    np.testing.assert_array_equal(state[4, :5], [1 << 29, 1 << 28, 1 << 27, 738197504,
                                                 1040187392])
    # every m_k is odd and below 2**(k+1): column k's lowest set bit is bit 29 - k
    state = _points(SobolEngine(21201).sobolstate)
    assert state.max() < 1 << 30
    np.testing.assert_array_equal(state & -state,
                                  np.broadcast_to(1 << (29 - np.arange(30)), state.shape))


def test_direction_numbers_per_dimension_count_agree():
    # each dimension count builds (and caches) only its rows: they must be the full table's
    # leading rows, and scrambling one engine must not leak into the cached table
    full = _points(SobolEngine(21201).sobolstate)
    for dim in (1, 2, 7, 300):
        np.testing.assert_array_equal(_points(SobolEngine(dim).sobolstate), full[:dim])
    SobolEngine(7, scramble=True, seed=3)
    np.testing.assert_array_equal(_points(SobolEngine(7).sobolstate), full[:7])


@pytest.mark.parametrize("dim", [1, 3, 40, 21201])
def test_matches_direct_construction(dim):
    eng = SobolEngine(dim)
    got = _points(eng.draw(70, dtype=ember.float64))
    np.testing.assert_array_equal(got, _direct(eng, range(70)))
    eng.fast_forward(1000)
    np.testing.assert_array_equal(_points(eng.draw(5, dtype=ember.float64)),
                                  _direct(eng, range(1070, 1075)))
    assert eng.num_generated == 1075


def test_draw_in_pieces_fast_forward_and_reset():
    eng = SobolEngine(7)
    whole = _points(eng.draw(300))
    eng.reset()
    assert eng.num_generated == 0
    pieces = [_points(eng.draw(n)) for n in (1, 1, 5, 120, 0, 173)]
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    eng.reset()
    assert eng.fast_forward(0) is eng and eng.num_generated == 0
    eng.fast_forward(1)
    np.testing.assert_array_equal(_points(eng.draw(3)), whole[1:4])
    eng.fast_forward(96)
    np.testing.assert_array_equal(_points(eng.draw(2)), whole[100:102])
    assert eng.num_generated == 102
    assert eng.reset() is eng
    np.testing.assert_array_equal(_points(eng.draw(1)), whole[:1])
    np.testing.assert_array_equal(_points(eng.quasi), np.zeros(7, np.int64))


def test_draw_base2():
    eng = SobolEngine(3)
    first = eng.draw_base2(2)
    assert first.shape == (4, 3)
    np.testing.assert_array_equal(_points(eng.draw_base2(2)),
                                  [[0.375, 0.375, 0.625], [0.875, 0.875, 0.125],
                                   [0.625, 0.125, 0.875], [0.125, 0.625, 0.375]])
    assert eng.num_generated == 8
    eng = SobolEngine(3)
    assert eng.draw_base2(0).shape == (1, 3) and eng.draw_base2(0).shape == (1, 3)
    eng.draw(1)
    with pytest.raises(ValueError, match=r"^The balance properties of Sobol' points require n "
                       r"to be a power of 2\. 3 points have been previously generated, then: "
                       r"n=3\+2\*\*2=7\. If you still want to do this, please use "
                       r"'SobolEngine\.draw\(\)' instead\.$"):
        eng.draw_base2(2)
    assert eng.num_generated == 3


def test_dtypes_and_out():
    eng = SobolEngine(2)
    assert eng.draw(2, dtype=ember.float64).dtype is ember.float64
    previous = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert SobolEngine(2).draw(3).dtype is ember.float64
    finally:
        ember.set_default_dtype(previous)
    # the first point alone is a cast, so any dtype works for it
    assert SobolEngine(2).draw(1, dtype=ember.int32).dtype is ember.int32
    with pytest.raises(NotImplementedError,
                       match="^\"_sobol_engine_draw\" not implemented for 'Half'$"):
        SobolEngine(2).draw(2, dtype=ember.float16)
    with pytest.raises(NotImplementedError,
                       match="^\"_sobol_engine_draw\" not implemented for 'Long'$"):
        eng.draw(1, dtype=ember.int64)
    out = ember.empty(1, dtype=ember.float64)
    eng = SobolEngine(2)
    assert eng.draw(4, out=out) is out
    assert out.dtype is ember.float64 and out.shape == (4, 2)
    np.testing.assert_array_equal(_points(out), [[0, 0], [0.5, 0.5], [0.75, 0.25],
                                                 [0.25, 0.75]])
    out = ember.empty(1, dtype=ember.int64)
    SobolEngine(2).draw_base2(1, out=out)
    np.testing.assert_array_equal(_points(out), np.zeros((2, 2)))
    with pytest.raises(RuntimeError, match="^cannot resize variables that require grad$"):
        SobolEngine(2).draw(3, out=ember.empty(5, requires_grad=True))


def test_float32_rounding():
    # 30-bit points round once to float32, as PyTorch's
    eng = SobolEngine(1000)
    single = _points(eng.draw(50))
    eng.reset()
    np.testing.assert_array_equal(single, _points(eng.draw(50, dtype=ember.float64))
                                  .astype(np.float32))


def test_errors():
    for bad in (0, -1, 21202):
        with pytest.raises(ValueError, match=r"^Supported range of dimensionality for "
                           r"SobolEngine is \[1, 21201\]$"):
            SobolEngine(bad)
    with pytest.raises(TypeError):
        SobolEngine(2.5)
    eng = SobolEngine(3)
    with pytest.raises(RuntimeError, match=r"^Trying to create tensor with negative "
                       r"dimension -1: \[-1, 3\]$"):
        eng.draw(0)
    with pytest.raises(RuntimeError, match=r"negative dimension -3: \[-3, 3\]$"):
        eng.draw(-2)
    assert eng.num_generated == 0
    eng.draw(2)
    assert eng.draw(0).shape == (0, 3)
    with pytest.raises(RuntimeError, match=r"negative dimension -1: \[-1, 3\]$"):
        eng.draw(-1)
    with pytest.raises(TypeError, match="must be int, not float"):
        eng.draw(2.0)
    with pytest.raises(TypeError, match="must be int, not float"):
        eng.fast_forward(2.0)
    with pytest.raises(TypeError, match="must be torch.dtype, not str"):
        eng.draw(2, dtype="float32")
    with pytest.raises(TypeError, match="unsupported operand"):
        eng.draw_base2(-1)
    assert eng.num_generated == 2
    assert eng.draw(ember.tensor(2)).shape == (2, 3)


def test_attributes_and_repr():
    eng = SobolEngine(4, scramble=True, seed=3)
    assert (eng.dimension, eng.scramble, eng.seed, eng.num_generated) == (4, True, 3, 0)
    assert SobolEngine.MAXBIT == 30 and SobolEngine.MAXDIM == 21201
    assert repr(eng) == "SobolEngine(dimension=4, scramble=True, seed=3)"
    assert repr(SobolEngine(2)) == "SobolEngine(dimension=2)"
    assert repr(SobolEngine(2, seed=7)) == "SobolEngine(dimension=2, seed=7)"
    assert repr(SobolEngine(2, scramble=True)) == "SobolEngine(dimension=2, scramble=True)"
    assert eng.quasi.dtype is ember.int64 and eng.shift.shape == (4,)
    assert ember.quasirandom.__all__ == ["SobolEngine"]


def _assert_balanced(points, m):
    """Each of the 2**k equal intervals of each dimension holds 2**(m-k) of the points."""
    for k in range(m + 1):
        cells = np.floor(points * 2 ** k).astype(np.int64)
        for column in cells.T:
            np.testing.assert_array_equal(np.bincount(column, minlength=2 ** k),
                                          np.full(2 ** k, 2 ** (m - k)))


def test_scrambled_points_are_balanced_and_seeded():
    eng = SobolEngine(20, scramble=True, seed=123)
    pts = _points(eng.draw_base2(8, dtype=ember.float64))
    assert np.all((pts >= 0) & (pts < 1))
    _assert_balanced(pts, 8)
    _assert_balanced(_points(eng.draw_base2(8, dtype=ember.float64)), 8)
    # pairs of dimensions: each of the 2**2 x 2**2 boxes holds 2**(8-4) points (a (0,m,2)-net
    # in the first two dimensions, which linear scrambling keeps)
    cells = np.floor(pts[:, :2] * 4).astype(np.int64)
    np.testing.assert_array_equal(np.bincount(cells[:, 0] * 4 + cells[:, 1], minlength=16),
                                  np.full(16, 16))
    # not the unscrambled points, and the same for the same seed
    assert not np.array_equal(pts, _points(SobolEngine(20).draw_base2(8, dtype=ember.float64)))
    again = SobolEngine(20, scramble=True, seed=123)
    np.testing.assert_array_equal(_points(again.draw(256, dtype=ember.float64)), pts)
    other = SobolEngine(20, scramble=True, seed=124).draw(256, dtype=ember.float64)
    assert not np.array_equal(_points(other), pts)
    # the first point is the shift; points follow the direct construction
    np.testing.assert_array_equal(pts, _direct(eng, range(256)))


def test_scrambled_fast_forward_and_global_seed():
    eng = SobolEngine(5, scramble=True, seed=0)
    whole = _points(eng.draw(40))
    eng.reset()
    eng.fast_forward(17)
    np.testing.assert_array_equal(_points(eng.draw(23)), whole[17:])
    ember.manual_seed(5)
    a = _points(SobolEngine(5, scramble=True).draw(8))
    ember.manual_seed(5)
    b = _points(SobolEngine(5, scramble=True).draw(8))
    np.testing.assert_array_equal(a, b)
    c = _points(SobolEngine(5, scramble=True).draw(8))
    assert not np.array_equal(a, c)
    _assert_balanced(_points(SobolEngine(3, scramble=True, seed=9).draw_base2(5)), 5)

