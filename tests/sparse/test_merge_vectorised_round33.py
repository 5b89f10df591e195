"""The merge plan of COO sums with two uncoalesced operands, computed without a loop over
entries, against the step-by-step merge it replaced (kept here as the reference)."""

import warnings

import numpy as np
import pytest

import ember
from ember.sparse._merge import _merge_unsorted, merge_slots


def _merge_loop(ka, kb):
    """PyTorch's CPU merge step by step: the smaller head first, equal heads into one entry."""
    na, nb = len(ka), len(kb)
    slots_a, slots_b = [0] * na, [0] * nb
    i = j = n = 0
    while i < na and j < nb:
        x, y = ka[i], kb[j]
        if x < y:
            slots_a[i] = n
            i += 1
        elif y < x:
            slots_b[j] = n
            j += 1
        else:
            slots_a[i] = slots_b[j] = n
            i += 1
            j += 1
        n += 1
    slots_a[i:] = range(n, n + na - i)
    n += na - i
    slots_b[j:] = range(n, n + nb - j)
    n += nb - j
    return slots_a, slots_b, n


def _check(ka, kb, **kw):
    slots_a, slots_b, n = _merge_unsorted(ka, kb, **kw)
    assert (slots_a.tolist(), slots_b.tolist(), n) == _merge_loop(ka.tolist(), kb.tolist())
    assert slots_a.dtype == slots_b.dtype == np.int64


def _small_cases(seed, count):
    rng = np.random.default_rng(seed)
    for t in range(count):
        hi = int(rng.integers(1, 12))
        ka = rng.integers(0, hi, int(rng.integers(0, 14)))
        kb = rng.integers(0, hi, int(rng.integers(0, 14)))
        if t % 5 == 0:
            kb = ka.copy()                                  # x + x
        if t % 7 == 0:
            kb = np.concatenate([ka[:len(ka) // 2], kb])    # a common prefix
        yield ka, kb


@pytest.mark.parametrize("max_levels", [64, 1, 2])
def test_small_random_lists_merge_as_the_loop(max_levels):
    # max_levels 1 and 2 send the groups still nested to the step-by-step fallback
    for ka, kb in _small_cases(max_levels, 3000):
        _check(ka, kb, max_levels=max_levels)


@pytest.mark.parametrize("n", [1000, 20000])
@pytest.mark.parametrize("spread", [0.01, 0.1, 1.0, 100.0])
def test_large_random_lists_merge_as_the_loop(n, spread):
    # spread 0.01: each position ~100 times in each list (many levels of nested ties)
    rng = np.random.default_rng(int(spread * 100) + n)
    hi = max(1, int(n * spread))
    ka, kb = rng.integers(0, hi, n), rng.integers(0, hi, n + 17)
    _check(ka, kb)
    _check(kb, ka)
    _check(ka, ka.copy())
    _check(ka, rng.permutation(ka))
    _check(ka, np.where(np.arange(n) == n // 2, 0, ka))


def test_structured_lists_merge_as_the_loop():
    n = 3000
    down = np.arange(n)[::-1].copy()
    swapped = down.copy()
    swapped[1:-1:2], swapped[2::2] = down[2::2], down[1:-1:2]
    cases = [(down, swapped), (swapped, down), (down, down[::2].copy()),
             (down, np.concatenate([down[:1], down[2:], down[1:2]])),
             (np.repeat(down[:30], 100), np.tile(down[:30], 100)),
             (np.zeros(500, np.int64), np.zeros(300, np.int64)),
             (np.array([], np.int64), down), (down, np.array([], np.int64)),
             (np.array([], np.int64), np.array([], np.int64))]
    for ka, kb in cases:
        _check(ka, kb)
        _check(ka, kb, max_levels=1)


def test_keys_of_any_sign_and_int32():
    rng = np.random.default_rng(7)
    for _ in range(200):
        ka, kb = rng.integers(-5, 5, 40), rng.integers(-5, 5, 30)
        _check(ka, kb)
        _check(ka.astype(np.int32), kb.astype(np.int32))


def test_huge_positions_rank_instead_of_offsetting():
    # positions near 2**62: the groups' keys cannot be offset by group without overflow
    rng = np.random.default_rng(8)
    big = (1 << 62) - 50
    for _ in range(100):
        ka, kb = big + rng.integers(0, 6, 30), big + rng.integers(0, 6, 25)
        _check(ka, kb)


def test_merge_slots_takes_the_vectorised_merge_for_unsorted_lists():
    rng = np.random.default_rng(9)
    ka, kb = rng.integers(0, 50, 400), rng.integers(0, 50, 300)
    slots_a, slots_b, n = merge_slots(ka, kb)
    assert (slots_a.tolist(), slots_b.tolist(), n) == _merge_loop(ka.tolist(), kb.tolist())


def _reference_sum(ia, va, ib, vb, sizes):
    """``a + b`` of COO operands as NumPy arrays, placed by the loop, added in stored order."""
    ka, kb = (np.ravel_multi_index(tuple(i), sizes) for i in (ia, ib))
    slots_a, slots_b, n = _merge_loop(ka.tolist(), kb.tolist())
    target = np.array(slots_a + slots_b, dtype=np.int64)
    values = np.concatenate([va, vb])
    out = np.zeros((n,) + values.shape[1:], dtype=values.dtype)
    np.add.at(out, target, values)
    indices = np.zeros((len(sizes), n), dtype=np.int64)
    indices[:, target] = np.concatenate([ia, ib], 1)
    return indices, out


@pytest.mark.parametrize("sizes, dense", [((30, 20), ()), ((500,), ()), ((6, 5, 7), ()),
                                          ((12, 12), (3,))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex64])
def test_sums_of_uncoalesced_tensors_match_the_loop_bit_for_bit(sizes, dense, dtype):
    rng = np.random.default_rng(len(sizes) * 10 + len(dense))

    def operand(n):
        idx = np.stack([rng.integers(0, s, n) for s in sizes])
        val = rng.standard_normal((n,) + dense) * 1e3
        if np.dtype(dtype).kind == "c":
            val = val + 1j * rng.standard_normal((n,) + dense)
        return idx, val.astype(dtype)

    (ia, va), (ib, vb) = operand(700), operand(900)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ember.sparse_coo_tensor(ember.tensor(ia), ember.tensor(va), sizes + dense)
        b = ember.sparse_coo_tensor(ember.tensor(ib), ember.tensor(vb), sizes + dense)
    out = a + b
    indices, values = _reference_sum(ia, va, ib, vb, sizes)
    assert not out.is_coalesced()
    assert out._nnz() == indices.shape[1]
    np.testing.assert_array_equal(out._indices().numpy(), indices)
    got = out._values().numpy()
    assert got.dtype == values.dtype
    assert got.tobytes() == values.tobytes()
