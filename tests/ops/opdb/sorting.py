"""OpInfo entries for ember/ops/sorting.py (sort, argsort, msort, topk, kthvalue, mode, unique,
unique_consecutive), and the sample helpers the sorting family's entries share."""

import math

import numpy as np

import ember
from tests.ops.opdb.core import ALL_REAL, FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput
from tests.ops.opdb.reduction import edited, setting

ORDERED = FLOATS + LOW + INTS
NAN = float("nan")
INF = float("inf")


def distinct(shape, dtype, requires_grad=False, *, seed=0, transpose=False):
    """A tensor of distinct values (multiples of 0.5, exact in every float dtype), so that
    orders and selected indices are unambiguous; random bools for bool. ``transpose``: the
    values of ``shape`` read through a transposed (noncontiguous) view."""
    n = math.prod(shape)
    rng = np.random.default_rng(seed + 7 * n)
    stored = tuple(reversed(shape)) if transpose else shape
    if dtype is ember.bool:
        arr = rng.random(stored) < 0.5
    else:
        values = rng.permutation(n) - (0 if dtype is ember.uint8 else n // 2)
        if dtype.is_floating_point:
            values = values * 0.5
        arr = values.reshape(stored)
    t = ember.from_numpy(np.asarray(arr).astype(dtype.np))
    if transpose:
        t = t.permute(*reversed(range(len(shape))))
    if requires_grad and dtype.is_floating_point:
        t.requires_grad_()
    return t


def few_values(shape, dtype, *, seed=0):
    """A tensor drawn from three values: repeats guaranteed (ties, modes, duplicates)."""
    rng = np.random.default_rng(seed + 11 * math.prod(shape))
    pick = rng.integers(0, 3, size=shape)
    if dtype is ember.bool:
        return ember.from_numpy(np.asarray(pick > 0))
    choices = np.array([2, 0, 5]) if not dtype.is_floating_point else np.array([2.5, -1., 0.5])
    return ember.from_numpy(np.asarray(choices[pick]).astype(dtype.np))


def special_floats(dtype):
    """NaNs (two), infinities, signed zeros and ordinary values, for floating dtypes."""
    return ember.tensor([3., NAN, 1., -0., 0., NAN, INF, -INF, -2.], dtype=dtype)


def along(x, dim, fn, n_out):
    """Apply ``fn`` (1-D array -> ``n_out`` 1-D arrays of one length) to every slice of ``x``
    along ``dim``, stacking the results back along ``dim``."""
    x = np.asarray(x)
    if x.ndim == 0:
        outs = fn(x.reshape(1))
        return tuple(np.asarray(o).reshape(()) for o in outs)
    d = dim % x.ndim
    moved = np.moveaxis(x, d, -1)
    results = [fn(moved[pos]) for pos in np.ndindex(*moved.shape[:-1])]
    # no slices: the output layout of a slice of zeros
    shapes = results[0] if results else fn(np.zeros(moved.shape[-1], dtype=x.dtype))
    outs = []
    for k in range(n_out):
        length, dtype = len(shapes[k]), shapes[k].dtype
        stacked = np.array([r[k] for r in results], dtype=dtype).reshape(
            moved.shape[:-1] + (length,))
        outs.append(np.moveaxis(stacked, -1, d))
    return tuple(outs)


def order_of(values, descending=False):
    """The stable sorting permutation of a 1-D array; NaN is the largest value."""
    values = np.asarray(values)
    nan = np.isnan(values.astype(np.float64)) if values.dtype.kind == "f" else \
        np.zeros(len(values), dtype=bool)
    return np.array(sorted(range(len(values)), reverse=bool(descending),
                           key=lambda i: (bool(nan[i]), 0 if nan[i] else values[i])),
                    dtype=np.int64)


def dims_errors(name=None):
    """Dimension-out-of-range errors for ops taking one ``dim``."""
    def errors():
        x = ember.ones(2, 3)
        yield ErrorInput(SampleInput(x, kwargs={"dim": 2}), IndexError,
                         r"Dimension out of range \(expected to be in range of \[-2, 1\], but "
                         r"got 2\)")
        yield ErrorInput(SampleInput(x, kwargs={"dim": -3}), IndexError, "but got -3")
    return errors


def chain(*fns):
    def errors():
        for fn in fns:
            yield from fn()
    return errors


# --- sort, argsort, msort -----------------------------------------------------------------------

def _sort_ref(x, dim=-1, descending=False, *, stable=False):
    def one(v):
        order = order_of(v, descending)
        return v[order], order
    return along(x, dim, one, 2)


_SORT_CASES = [((6,), {}), ((2, 3, 4), {"dim": 1}), ((2, 3, 4), {"dim": -3, "descending": True}),
               ((2, 3, 4), {"dim": 2, "stable": True}), ((), {}), ((), {"dim": 0,
                                                                          "descending": True}),
               ((0, 3), {"dim": 0}), ((2, 0), {}), ((5,), {"descending": True, "stable": True})]


def sort_samples(positional=True, descending=True):
    """Samples for ops sorting along a dim: each dim form, 0-dim, empty and noncontiguous
    inputs of distinct values, and (forward only) ties and NaNs."""
    def samples(dtype, requires_grad):
        for shape, kwargs in _SORT_CASES:
            if not descending:
                kwargs = {k: v for k, v in kwargs.items() if k != "descending"}
            yield SampleInput(distinct(shape, dtype, requires_grad), kwargs=kwargs,
                              name=str(shape))
        yield SampleInput(distinct((3, 4), dtype, requires_grad, transpose=True),
                          kwargs={"dim": 0}, name="noncontig")
        if positional:
            yield SampleInput(distinct((3, 4), dtype, requires_grad), (0, True),
                              name="positional")
        if requires_grad:
            return
        for kwargs in ({}, {"descending": True}) if descending else ({},):
            yield SampleInput(few_values((3, 7), dtype), kwargs=dict(kwargs), name="ties")
            if dtype.is_floating_point:
                yield SampleInput(special_floats(dtype), kwargs=dict(kwargs), name="nan")
    return samples


def _msort_ref(x):
    return _sort_ref(x, 0)[0]


def _msort_samples(dtype, requires_grad):
    for shape in ((5,), (3, 4), (2, 3, 2), (), (0, 3)):
        yield SampleInput(distinct(shape, dtype, requires_grad), name=str(shape))
    yield SampleInput(distinct((3, 4), dtype, requires_grad, transpose=True), name="noncontig")
    if not requires_grad:
        yield SampleInput(few_values((7, 2), dtype), name="ties")
        if dtype.is_floating_point:
            yield SampleInput(special_floats(dtype), name="nan")


def _sort_errors(name):
    def errors():
        yield ErrorInput(SampleInput(ember.ones(3, dtype=ember.complex64)), RuntimeError,
                         "Sort does not support complex dtypes on CPU")
        yield ErrorInput(SampleInput(ember.tensor(1.), kwargs={"dim": 1}), IndexError,
                         r"Dimension out of range \(expected to be in range of \[-1, 0\], but "
                         r"got 1\)")
        yield ErrorInput(SampleInput(ember.ones(3), (0, False, True)), TypeError,
                         "positional argument")
        yield from dims_errors()()
    return errors


# --- topk, kthvalue, mode -------------------------------------------------------------------------

def _topk_ref(x, k, dim=-1, largest=True, sorted=True):
    if np.asarray(x).ndim == 0:                 # any k in {0, 1} selects the element
        return np.asarray(x), np.asarray(0)

    def one(v):
        order = order_of(v, largest)[:k]
        return v[order], order
    return along(x, dim, one, 2)


def _topk_samples(dtype, requires_grad):
    for shape, args, kwargs in [((6,), (2,), {}), ((2, 3, 4), (2,), {"dim": 1}),
                                ((2, 3, 4), (3,), {"dim": -1, "largest": False}),
                                ((2, 3, 4), (2,), {"dim": 0, "sorted": False}),
                                ((5,), (5,), {}), ((5,), (0,), {}), ((), (1,), {}),
                                ((), (0,), {"largest": False}), ((2, 0), (0,), {}),
                                ((0, 3), (2,), {})]:
        yield SampleInput(distinct(shape, dtype, requires_grad), args, kwargs, name=str(shape))
    yield SampleInput(distinct((4, 3), dtype, requires_grad, transpose=True), (2,),
                      {"dim": 1}, name="noncontig")
    yield SampleInput(distinct((3, 4), dtype, requires_grad), (2, 0, False, True),
                      name="positional")
    if dtype.is_floating_point and not requires_grad:
        # one NaN and no ties: NaN is the largest value
        x = edited(distinct((6,), dtype), setting(NAN, 2))
        yield SampleInput(x, (2,), name="nan")
        yield SampleInput(x, (2,), {"largest": False}, name="nan_smallest")


def _topk_errors():
    x = ember.ones(2, 3)
    yield ErrorInput(SampleInput(x, (4,)), RuntimeError, "selected index k out of range")
    yield ErrorInput(SampleInput(x, (-1,)), RuntimeError, "selected index k out of range")
    yield ErrorInput(SampleInput(ember.tensor(1.), (2,)), RuntimeError,
                     "selected index k out of range")
    yield ErrorInput(SampleInput(ember.tensor([True, False]), (1,)), RuntimeError,
                     "topk does not support bool dtypes on CPU")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64), (1,)), RuntimeError,
                     "topk does not support complex dtypes on CPU")
    yield ErrorInput(SampleInput(x, (1,), {"dim": 2}), IndexError, "Dimension out of range")


def _kthvalue_ref(x, k, dim=-1, keepdim=False):
    def one(v):
        i = order_of(v)[k - 1]
        return v[i:i + 1], np.array([i])
    values, indices = along(x, dim, one, 2)
    if not keepdim and np.asarray(x).ndim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return values, indices


def _kthvalue_samples(dtype, requires_grad):
    for shape, args, kwargs in [((6,), (2,), {}), ((2, 3, 4), (3,), {"dim": 1}),
                                ((2, 3, 4), (4,), {"dim": -1, "keepdim": True}),
                                ((2, 3, 4), (1,), {"dim": 0}), ((), (1,), {}),
                                ((), (1,), {"dim": 0, "keepdim": True}), ((0, 3), (2,), {})]:
        yield SampleInput(distinct(shape, dtype, requires_grad), args, kwargs, name=str(shape))
    yield SampleInput(distinct((4, 3), dtype, requires_grad, transpose=True), (2,),
                      {"dim": 0}, name="noncontig")
    yield SampleInput(distinct((3, 4), dtype, requires_grad), (2, 0, True), name="positional")
    if dtype.is_floating_point and not requires_grad:
        x = edited(distinct((6,), dtype), setting(NAN, 1))
        yield SampleInput(x, (6,), name="nan_last")
        yield SampleInput(x, (3,), name="nan_present")


def _kthvalue_errors():
    x = ember.ones(2, 3)
    yield ErrorInput(SampleInput(x, (4,)), RuntimeError,
                     r"kthvalue\(\): selected number k out of range for dimension 1")
    yield ErrorInput(SampleInput(x, (0,), {"dim": 0}), RuntimeError,
                     r"kthvalue\(\): selected number k out of range for dimension 0")
    yield ErrorInput(SampleInput(ember.tensor(1.), (2,)), RuntimeError,
                     r"kthvalue\(\): selected number k out of range for dimension 0")
    yield ErrorInput(SampleInput(ember.ones(2, 0), (1,)), IndexError,
                     r"kthvalue\(\): Expected reduction dim 1 to have non-zero size.")
    yield ErrorInput(SampleInput(ember.tensor([True]), (1,)), NotImplementedError,
                     "\"kthvalue_cpu\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64), (1,)),
                     NotImplementedError, "\"kthvalue_cpu\" not implemented for 'ComplexFloat'")
    yield ErrorInput(SampleInput(x, (1,), {"dim": 2}), IndexError, "Dimension out of range")


def _mode_ref(x, dim=-1, keepdim=False):
    def one(v):
        order = order_of(v)
        best, count, best_count = None, 0, 0
        for k, i in enumerate(order):
            count = count + 1 if k and v[i] == v[order[k - 1]] else 1
            if count > best_count:
                best, best_count = i, count
        return v[best:best + 1], np.array([best])
    values, indices = along(x, dim, one, 2)
    if not keepdim and np.asarray(x).ndim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return values, indices


def _mode_samples(dtype, requires_grad):
    # ties are the point of mode, but make gradients meaningless: distinct values for those
    pick = distinct if requires_grad else (lambda shape, dtype, rg: few_values(shape, dtype))
    for shape, kwargs in [((7,), {}), ((2, 5, 3), {"dim": 1}),
                          ((2, 5, 3), {"dim": -1, "keepdim": True}), ((2, 5, 3), {"dim": 0}),
                          ((), {}), ((), {"dim": 0, "keepdim": True}), ((0, 3), {})]:
        yield SampleInput(pick(shape, dtype, requires_grad), kwargs=kwargs, name=str(shape))
    yield SampleInput(distinct((4, 3), dtype, requires_grad, transpose=True), (0,),
                      name="noncontig")
    yield SampleInput(pick((3, 6), dtype, requires_grad), (1, True), name="positional")
    if not requires_grad:
        yield SampleInput(ember.tensor([2, 5, 3, 5, 2, 1]).to(dtype), name="equal_counts")
        if dtype.is_floating_point:
            yield SampleInput(ember.tensor([0., -0., 1.], dtype=dtype), name="signed_zeros")


def _mode_errors():
    yield ErrorInput(SampleInput(ember.ones(2, 0)), IndexError,
                     r"mode\(\): Expected reduction dim 1 to have non-zero size.")
    yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)), NotImplementedError,
                     "\"mode_cpu\" not implemented for 'ComplexFloat'")
    yield from dims_errors()()


# --- unique, unique_consecutive -------------------------------------------------------------------

def _groups(rows, consecutive):
    """(unique rows, inverse, counts) of a 2-D array's rows: sorted rows (lexicographically,
    NaN never equal) or runs of consecutive equal rows."""
    n = rows.shape[0]
    keys = list(range(n))
    if not consecutive:
        keys.sort(key=lambda i: tuple((v != v, 0 if v != v else v) for v in rows[i].tolist()))
    firsts, inverse, counts = [], np.zeros(n, dtype=np.int64), []
    for pos, i in enumerate(keys):
        if pos == 0 or not np.array_equal(rows[i], rows[keys[pos - 1]]):
            firsts.append(i)
            counts.append(0)
        inverse[i] = len(firsts) - 1
        counts[-1] += 1
    return rows[firsts] if firsts else rows[:0], inverse, np.array(counts, dtype=np.int64)


def _unique_ref(consecutive):
    def ref(x, *args, sorted=True, return_inverse=False, return_counts=False, dim=None):
        if args:                                # (sorted, return_inverse) of unique
            return_inverse = args[1]
        x = np.asarray(x)
        if dim is None:
            values, inverse, counts = _groups(x.reshape(-1, 1), consecutive)
            values, inverse = values[:, 0], inverse.reshape(x.shape)
        else:
            moved = np.moveaxis(x, dim, 0)
            rows = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
            values, inverse, counts = _groups(rows, consecutive)
            values = np.moveaxis(values.reshape((-1,) + moved.shape[1:]), 0, dim)
        out = (values,) + ((inverse,) if return_inverse else ()) + \
            ((counts,) if return_counts else ())
        return out if len(out) > 1 else values
    return ref


def _rows_with_repeats(dtype):
    rows = np.array([[1, 2, 0], [0, 5, 1], [1, 2, 0], [0, 1, 1], [0, 5, 1]])
    if dtype is ember.bool:
        rows = rows > 0
    return ember.from_numpy(rows.astype(dtype.np))


def unique_samples(consecutive):
    def samples(dtype, requires_grad):
        flags = {"return_inverse": True, "return_counts": True}
        for shape, kwargs in [((9,), {}), ((9,), flags), ((3, 4), {"return_inverse": True}),
                              ((3, 4), {"return_counts": True}), ((), flags), ((0, 3), flags),
                              ((2, 3, 4), {"dim": 1, **flags}), ((2, 3, 4), {"dim": -1}),
                              ((0, 3), {"dim": 0, **flags}), ((2, 0), {"dim": 1, **flags})]:
            yield SampleInput(few_values(shape, dtype), kwargs=kwargs, name=str(shape))
        rows = _rows_with_repeats(dtype)
        yield SampleInput(rows, kwargs={"dim": 0, **flags}, name="rows")
        yield SampleInput(rows.t(), kwargs={"dim": 1, **flags}, name="columns_noncontig")
        yield SampleInput(few_values((4, 6), dtype)[:, ::2], kwargs=flags, name="noncontig")
        if not consecutive:
            # (torch.unique_consecutive(x, True) returns an empty inverse: a PyTorch quirk of
            # its positional flags, not followed here)
            yield SampleInput(few_values((6,), dtype), (True, True), name="positional")
            yield SampleInput(few_values((9,), dtype), kwargs={"sorted": False, **flags},
                              name="unsorted")
        if dtype.is_floating_point:
            yield SampleInput(special_floats(dtype), kwargs=flags, name="nan")
            yield SampleInput(ember.tensor([0., 1., -0., -0., 0.], dtype=dtype), kwargs=flags,
                              name="signed_zeros")
    return samples


def _unique_errors(consecutive):
    def errors():
        dim_kernel = "unique" if consecutive else "unique_dim"
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64)),
                         NotImplementedError, "\"unique\" not implemented for 'ComplexFloat'")
        yield ErrorInput(SampleInput(ember.ones(2, dtype=ember.complex64), kwargs={"dim": 0}),
                         NotImplementedError,
                         f"\"{dim_kernel}\" not implemented for 'ComplexFloat'")
        yield ErrorInput(SampleInput(ember.tensor(1.), kwargs={"dim": 0}), IndexError,
                         "Dimension specified as 0 but tensor has no dimensions")
        yield ErrorInput(SampleInput(ember.ones(0, 3), kwargs={"dim": 1}), RuntimeError,
                         "There are 0 sized dimensions, and they aren't selected, so unique "
                         "cannot be applied")
        yield from dims_errors()()
    return errors


OPS = [
    OpInfo("sort", _sort_ref, sort_samples(), dtypes=ALL_REAL, gradgrad=True,
           error_inputs=_sort_errors("sort")),
    OpInfo("argsort", lambda *a, **k: _sort_ref(*a, **k)[1], sort_samples(), dtypes=ALL_REAL,
           grad=False, result_dtype="int64", error_inputs=_sort_errors("argsort")),
    OpInfo("msort", _msort_ref, _msort_samples, dtypes=ALL_REAL, gradgrad=True,
           error_inputs=lambda: [ErrorInput(SampleInput(ember.ones(3, dtype=ember.complex64)),
                                            RuntimeError, "Sort does not support complex")]),
    OpInfo("topk", _topk_ref, _topk_samples, dtypes=ORDERED, gradgrad=True,
           error_inputs=_topk_errors),
    OpInfo("kthvalue", _kthvalue_ref, _kthvalue_samples, dtypes=ORDERED, gradgrad=True,
           error_inputs=_kthvalue_errors),
    OpInfo("mode", _mode_ref, _mode_samples, dtypes=ALL_REAL, gradgrad=True,
           error_inputs=_mode_errors),
    OpInfo("unique", _unique_ref(False), unique_samples(False), dtypes=ALL_REAL, grad=False,
           error_inputs=_unique_errors(False)),
    OpInfo("unique_consecutive", _unique_ref(True), unique_samples(True), dtypes=ALL_REAL,
           grad=False, error_inputs=_unique_errors(True)),
]
