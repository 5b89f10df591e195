"""Accumulating kernels (``combine_at`` on NumPy, backend/numpy_at.py): keys NumPy's
``ufunc.at`` runs slowly (rows of an N-d target, tuples of index arrays, multi-dim indices,
Python numbers) are rewritten as flat positions; results must agree to the bit with the
one-after-another combination, duplicates must sum in index order, integers must wrap."""

import numpy as np
import pytest

import ember
from ember.backend.numpy_at import _FLAT_FROM, _flat_positions, numpy_at


def _sequential(ufunc, target, key, values):
    """The reference: every value combined in turn, in the index's C order."""
    out = target.copy()
    pos = np.arange(out.size).reshape(out.shape)[key]
    vals = np.broadcast_to(np.asarray(values), pos.shape)
    flat = out.reshape(-1)
    for p, v in zip(pos.reshape(-1), vals.reshape(-1)):
        flat[p] = ufunc(flat[p], v)
    return out


def _keys(rng, shape):
    n0, n1 = shape[0], shape[1]
    m = _FLAT_FROM // shape[2] + 3          # enough values to take the flat path
    rows = rng.integers(-n0, n0, m)
    return [
        rows,                                                   # rows of a 3-d target
        (rows,),
        (rows, rng.integers(-n1, n1, m)),                       # two arrays, then a slice
        (rows, rng.integers(0, n1, m), slice(None)),
        (rows.reshape(-1, 1), np.arange(n1).reshape(1, -1)),    # broadcast arrays
        rows[:m - m % 3].reshape(3, -1),                        # a 2-d index
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.uint8,
                                   np.int64, np.complex64])
@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.maximum])
def test_flat_rewrite_matches_sequential(dtype, ufunc):
    if dtype is np.complex64 and ufunc is np.maximum:
        return
    rng = np.random.default_rng(0)
    shape = (7, 5, 40)
    target = (rng.standard_normal(shape) * 60).astype(dtype)
    for key in _keys(rng, shape):
        assert _flat_positions(target, key) is not None       # the rewritten path runs
        region = target[key].shape
        values = (rng.standard_normal(region) * 60).astype(dtype)
        got = target.copy()
        with np.errstate(all="ignore"):
            numpy_at(ufunc, got, key, values)
            want = _sequential(ufunc, target, key, values)
            generic = target.copy()
            ufunc.at(generic, key, values)
        assert got.tobytes() == want.tobytes()
        assert got.tobytes() == generic.tobytes()


def test_python_numbers():
    # held exactly: given in the target's dtype (the fast loop); else NumPy's own float64 steps
    target = np.linspace(-3, 3, 12, dtype=np.float32)
    index = np.array([0, 1, 1, 5, 5, 5, 11, -1])
    for number in (1, 2.5, -0.75, 0.1, 1e-3, True):
        got, want = target.copy(), target.copy()
        numpy_at(np.multiply, got, index, number)
        np.multiply.at(want, index, number)
        assert got.tobytes() == want.tobytes()
    counts = np.zeros(3, np.float16)
    numpy_at(np.add, counts, np.zeros(3000, np.int64), 1)
    assert counts[0] == 2048        # float16 counts step by step, as the generic path did


def test_errors_unchanged():
    target = np.zeros((40, 40))
    rows = np.arange(41)                            # 41 * 40 values: the flat path's size
    with pytest.raises(IndexError, match="index 40 is out of bounds for axis 0 with size 40"):
        numpy_at(np.add, target, rows, 1.0)
    with pytest.raises(IndexError, match="index -41 is out of bounds for axis 0 with size 40"):
        numpy_at(np.add, target, -rows - 1, 1.0)
    assert not target.any()                         # nothing written before the error
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 3"):
        numpy_at(np.add, np.zeros(3), np.array([[0, 3]]), 1.0)


def test_index_put_accumulate_duplicates_sum_in_order():
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((20, 16)).astype(np.float32))
    idx = ember.tensor(rng.integers(-20, 20, 400))
    src = ember.tensor((rng.standard_normal((400, 16)) * 1e4).astype(np.float32))
    got = x.clone().index_put_((idx,), src, accumulate=True)
    want = x.numpy().copy()
    for i, row in zip(idx.numpy(), src.numpy()):
        want[i] = want[i] + row                     # float32 step by step
    assert got.numpy().tobytes() == want.tobytes()


def test_index_put_accumulate_integers_wrap():
    x = ember.full((4, 300), 120, dtype=ember.int8)
    idx = ember.tensor([0, 0, 1, -1] * 3)
    got = x.index_put_((idx,), ember.full((12, 300), 7, dtype=ember.int8), accumulate=True)
    assert got.unique(dim=1)[:, 0].tolist() == [-94, -115, 120, -115]   # 120 + 42, 120 + 21
    u = ember.zeros(4, 300, dtype=ember.uint8)
    u.index_put_((ember.tensor([2] * 5),), ember.full((5, 300), 100, dtype=ember.uint8),
                 accumulate=True)
    assert u[2].unique().tolist() == [500 % 256]


def test_index_put_accumulate_bounds_message():
    x = ember.zeros(50, 30)
    with pytest.raises(IndexError, match="index 50 is out of bounds for dimension 0 with "
                                         "size 50"):
        x.index_put_((ember.tensor([0, 50] * 40),), ember.ones(80, 30), accumulate=True)
    assert not x.any()


def test_index_put_no_duplicates_and_empty():
    x = ember.arange(64 * 40, dtype=ember.float64).reshape(64, 40)
    perm = ember.randperm(64)
    got = x.clone().index_put_((perm,), ember.ones(64, 40, dtype=ember.float64),
                               accumulate=True)
    assert ember.equal(got, x + 1)
    got = x.clone().index_put_((ember.tensor([], dtype=ember.int64),),
                               ember.ones(0, 40, dtype=ember.float64), accumulate=True)
    assert ember.equal(got, x)


def test_advanced_index_backward_sums_repeats():
    w = ember.zeros(30, 64, requires_grad=True)
    idx = ember.tensor([3, 3, 3, -1, 0] * 20)
    w[idx].backward(ember.ones(100, 64))
    assert w.grad[3].unique().tolist() == [60.0]
    assert w.grad[29].unique().tolist() == [20.0]
    assert w.grad[1].abs().sum().item() == 0


def test_index_add_noncontiguous_and_alpha():
    rng = np.random.default_rng(2)
    base = rng.standard_normal((40, 64))
    x = ember.tensor(base).t()                      # (64, 40), not contiguous
    src = ember.tensor(rng.standard_normal((64, 60))).t().contiguous().t()   # (64, 60)
    idx = ember.tensor(rng.integers(0, 40, 60))
    got = x.clone().index_add_(1, idx, src, alpha=2.0)
    want = base.T.copy()
    for j, i in enumerate(idx.numpy()):
        want[:, i] = want[:, i] + 2.0 * src.numpy()[:, j]
    assert got.numpy().tobytes() == want.tobytes()


def test_histc_counts():
    x = ember.tensor(np.random.default_rng(3).standard_normal(5000).astype(np.float32))
    hist = ember.histc(x, bins=40, min=-2, max=2)
    flat = x.numpy()
    inside = flat[(flat >= -2) & (flat <= 2)]
    where = np.minimum(((inside + np.float32(2)) * 40 / np.float32(4)).astype(np.int64), 39)
    assert hist.dtype is ember.float32
    assert hist.tolist() == np.bincount(where, minlength=40).astype(np.float32).tolist()
    assert hist.sum().item() == inside.size
