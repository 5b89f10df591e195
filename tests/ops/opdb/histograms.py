"""OpInfo entries for ember/ops/histograms.py: searchsorted, bucketize, histc, histogram,
histogramdd, bincount. (NaN boundaries, which send PyTorch's bisection right, are checked
against PyTorch's results in tests/ops/test_sorting.py.)"""

import math

import numpy as np

import ember
from ember._host_values import host_values
from tests.ops.opdb.core import FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput, make
from tests.ops.opdb.sorting import INF, NAN, ORDERED, distinct

# --- searchsorted, bucketize ----------------------------------------------------------------------


def _search(seq, values, side):
    """np.searchsorted over the innermost dim (rows of an N-D ``seq`` pair with rows of
    ``values``)."""
    seq, values = np.asarray(seq), np.asarray(values)
    if seq.ndim == 1:
        return np.asarray(np.searchsorted(seq, values, side), dtype=np.int64)
    out = np.zeros(values.shape, dtype=np.int64)
    for pos in np.ndindex(*seq.shape[:-1]):
        out[pos] = np.searchsorted(seq[pos], values[pos], side)
    return out


def _searchsorted_ref(seq, values, *, out_int32=False, right=False, side=None, sorter=None):
    if sorter is not None:
        seq = np.take_along_axis(np.asarray(seq), sorter, axis=-1)
    side = side or ("right" if right else "left")
    return _search(seq, values, side).astype(np.int32 if out_int32 else np.int64)


def _bucketize_ref(x, boundaries, *, out_int32=False, right=False):
    found = _search(boundaries, x, "right" if right else "left")
    return found.astype(np.int32 if out_int32 else np.int64)


def _ascending(shape, dtype, **kw):
    """Distinct values sorted along the last dim."""
    return distinct(shape, dtype, **kw).sort(-1).values


def _probes(shape, dtype, seq):
    """Values that hit every boundary exactly and fall between and outside them."""
    picks = np.random.default_rng(3).integers(0, seq.numel(), size=shape)
    hits = host_values(seq.reshape(-1).detach())[picks]
    return ember.from_numpy(hits).to(dtype)


def _searchsorted_samples(dtype, requires_grad):
    seq = _ascending((8,), dtype)
    values = distinct((3, 4), dtype, seed=5)
    for kwargs in ({}, {"right": True}, {"side": "right"}, {"side": "left"},
                   {"side": "right", "right": True}, {"out_int32": True}):
        yield SampleInput(seq, (values,), kwargs, name=f"1d{kwargs}")
    hits = _probes((2, 5), dtype, seq)
    yield SampleInput(seq, (hits,), name="hits_left")
    yield SampleInput(seq, (hits,), {"right": True}, name="hits_right")
    rows = _ascending((2, 3, 6), dtype, seed=1)
    yield SampleInput(rows, (distinct((2, 3, 4), dtype, seed=2),), name="nd")
    yield SampleInput(rows, (_probes((2, 3, 4), dtype, rows),), {"side": "right"},
                      name="nd_hits")
    yield SampleInput(seq, (2,), name="python_int")
    if dtype.is_floating_point:
        yield SampleInput(seq, (0.25,), {"right": True}, name="python_float")
    yield SampleInput(seq, (values[1, 2],), name="zero_dim_values")
    yield SampleInput(seq, (distinct((4, 3), dtype, transpose=True),), name="noncontig")
    yield SampleInput(ember.ones(0, dtype=dtype), (values,), name="empty_sequence")
    yield SampleInput(seq, (ember.ones(0, 3, dtype=dtype),), name="empty_values")
    yield SampleInput(seq, (ember.tensor([1, -3, 20]),), name="int64_values")
    shuffled = distinct((8,), dtype, seed=9)
    yield SampleInput(shuffled, (values,), {"sorter": shuffled.argsort()}, name="sorter")
    nd_shuffled = distinct((2, 6), dtype, seed=4)
    yield SampleInput(nd_shuffled, (distinct((2, 3), dtype),),
                      {"sorter": nd_shuffled.argsort(), "right": True}, name="nd_sorter")
    if dtype.is_floating_point:
        yield SampleInput(seq, (ember.tensor([NAN, 0.5, NAN], dtype=dtype),), name="nan_values")
        yield SampleInput(seq, (ember.tensor([NAN, 0.5], dtype=dtype),), {"right": True},
                          name="nan_values_right")


def _searchsorted_errors():
    seq, values = ember.tensor([1., 2., 3.]), ember.tensor([2.])
    yield ErrorInput(SampleInput(seq, (values,), {"side": "middle"}), RuntimeError,
                     r"torch.searchsorted\(\): side can only be 'left' or 'right' but got middle")
    yield ErrorInput(SampleInput(seq, (values,), {"side": "left", "right": True}), RuntimeError,
                     r"torch.searchsorted\(\): side and right can't be set to opposites, got "
                     r"side of left while right was True")
    yield ErrorInput(SampleInput(seq, (values,), {"sorter": ember.tensor([1, 0])}),
                     RuntimeError, r"torch.searchsorted\(\): boundary and sorter must have the "
                                   r"same size, but got boundary tensor \[3\]and got sorter "
                                   r"tensor \[2\]")
    yield ErrorInput(SampleInput(seq, (values,), {"sorter": ember.tensor([1, 0, 2],
                                                                          dtype=ember.int32)}),
                     RuntimeError, r"torch.searchsorted\(\): sorter must be a tensor of long "
                                   r"dtype but got dtype Int")
    yield ErrorInput(SampleInput(seq, (values,), {"sorter": ember.tensor([1, 0, 3])}),
                     RuntimeError, r"torch.searchsorted\(\): sorter index out of range")
    yield ErrorInput(SampleInput(ember.ones(2, 3), (ember.tensor(1.),)), RuntimeError,
                     r"torch.searchsorted\(\): input value can be a scalar only when boundaries "
                     r"tensor dimension is 1, but we got boundaries tensor dim\(2\) and input "
                     r"value's dim\(0\) numel\(1\)")
    yield ErrorInput(SampleInput(ember.tensor(1.), (values,)), RuntimeError,
                     r"torch.searchsorted\(\): boundaries tensor should have positive dimension, "
                     r"but got 0 dimension")
    yield ErrorInput(SampleInput(ember.ones(2, 3), (ember.ones(3, 1),)), RuntimeError,
                     r"torch.searchsorted\(\): boundaries tensor should be 1 dimension or the "
                     r"first N-1 dimensions of boundaries tensor and input value tensor must "
                     r"match, but we got boundaries tensor \[2, 3\] and input value tensor "
                     r"\[3, 1\]")
    yield ErrorInput(SampleInput(ember.tensor([True, False]), (ember.tensor([True]),)),
                     NotImplementedError, "\"searchsorted_out_cpu\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(seq, (ember.tensor([1j]),)), NotImplementedError,
                     "\"searchsorted_out_cpu\" not implemented for 'ComplexFloat'")


def _bucketize_samples(dtype, requires_grad):
    boundaries = _ascending((6,), dtype)
    x = distinct((3, 4), dtype, seed=5)
    for kwargs in ({}, {"right": True}, {"out_int32": True}, {"out_int32": True, "right": True}):
        yield SampleInput(x, (boundaries,), kwargs, name=f"{kwargs}")
    yield SampleInput(_probes((2, 4), dtype, boundaries), (boundaries,), name="hits")
    yield SampleInput(_probes((2, 4), dtype, boundaries), (boundaries,), {"right": True},
                      name="hits_right")
    yield SampleInput(x[0, 1], (boundaries,), name="zero_dim")
    yield SampleInput(2, (boundaries,), name="python_number")
    yield SampleInput(distinct((4, 3), dtype, transpose=True), (boundaries,), name="noncontig")
    yield SampleInput(ember.ones(0, 2, dtype=dtype), (boundaries,), name="empty_input")
    yield SampleInput(x, (ember.ones(0, dtype=dtype),), name="empty_boundaries")
    if dtype.is_floating_point:
        yield SampleInput(ember.tensor([NAN, 0.5], dtype=dtype), (boundaries,), name="nan")


def _bucketize_errors():
    yield ErrorInput(SampleInput(ember.ones(3), (ember.ones(1, 2),)), RuntimeError,
                     r"boundaries tensor must be 1 dimension, but got dim\(2\)")
    yield ErrorInput(SampleInput(ember.ones(3), (ember.tensor(1.),)), RuntimeError,
                     r"boundaries tensor must be 1 dimension, but got dim\(0\)")
    yield ErrorInput(SampleInput(ember.tensor([True]), (ember.tensor([True]),)),
                     NotImplementedError, "\"searchsorted_out_cpu\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(ember.tensor([1j]), (ember.tensor([1j]),)),
                     NotImplementedError,
                     "\"searchsorted_out_cpu\" not implemented for 'ComplexFloat'")


def _index_dtype(dtype, sample):
    return ember.int32 if sample is not None and sample.kwargs.get("out_int32") else ember.int64


# --- histc ---------------------------------------------------------------------------------------

def _histc_ref(x, bins=100, min=0, max=0):
    """PyTorch's histc on the sample's values, computed in their (NumPy) dtype."""
    x = np.asarray(x).reshape(-1)
    t = x.dtype.type
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    lo, hi = t(lo), t(hi)
    inside = x[(x >= lo) & (x <= hi)]
    where = np.minimum(((inside - lo) * t(bins) / (hi - lo)).astype(np.int64), bins - 1)
    return np.bincount(where, minlength=bins).astype(x.dtype)


def _histc_samples(dtype, requires_grad):
    # values on a grid of 0.5 and ranges of power-of-two widths keep every bin computation
    # exact in 16-bit floats too
    x = distinct((4, 6), dtype)
    for args in ((16, -8, 8), (8, -2, 2), (4, 0, 0), (8, 3, 3), (1, -1, 3), ()):
        if args == () and dtype in LOW:
            continue            # 100 bins: not exact in 16 bits
        yield SampleInput(x, args, name=f"bins{args}")
    yield SampleInput(x, kwargs={"bins": 8, "min": -4, "max": 4}, name="kwargs")
    yield SampleInput(ember.full((3,), 1.5, dtype=dtype), (4,), name="constant")
    yield SampleInput(ember.ones(0, dtype=dtype), (4,), name="empty")
    yield SampleInput(ember.ones(0, dtype=dtype), (4, -2, 2), name="empty_range")
    yield SampleInput(ember.tensor(2.5, dtype=dtype), (4,), name="zero_dim")
    yield SampleInput(distinct((4, 3), dtype, transpose=True), (8, -4, 4), name="noncontig")
    yield SampleInput(ember.tensor([1., NAN, 2., float("inf"), -float("inf")], dtype=dtype),
                      (4, 0, 4), name="nan_inf_outside")
    if dtype in FLOATS:
        yield SampleInput(make((30,), dtype), (7,), name="random")
        yield SampleInput(make((30,), dtype), (10, -3.3, 4.1), name="random_range")


def _histc_errors():
    x = ember.tensor([1., 2., 3.])
    yield ErrorInput(SampleInput(x, (0,)), RuntimeError,
                     r"torch.histogram\(\): bins must be > 0, but got 0 for dimension 0")
    yield ErrorInput(SampleInput(x, (-1,)), RuntimeError,
                     r"torch.histogram\(\): bins must be > 0, but got -1 for dimension 0")
    yield ErrorInput(SampleInput(x, (2.5,)), TypeError,
                     r"histc\(\): argument 'bins' \(position 2\) must be int, not float")
    yield ErrorInput(SampleInput(x, (4, 2, 1)), RuntimeError,
                     "torch.histc: max must be larger than min")
    yield ErrorInput(SampleInput(ember.tensor([1., NAN]), (4,)), RuntimeError,
                     r"torch.histc: range of \[-?nan, -?nan\] is not finite")
    yield ErrorInput(SampleInput(x, (4, 0, float("inf"))), RuntimeError,
                     r"torch.histc: range of \[0, inf\] is not finite")
    yield ErrorInput(SampleInput(ember.tensor([1., 2.], dtype=ember.float16), (4, 0, 70000.)),
                     RuntimeError, "value cannot be converted to type c10::Half without overflow")
    yield ErrorInput(SampleInput(ember.tensor([1, 2]), (4,)), NotImplementedError,
                     "\"histogram_cpu\" not implemented for 'Long'")
    yield ErrorInput(SampleInput(ember.tensor([True]), (4, 0, 1)), NotImplementedError,
                     "\"linspace_cpu\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(ember.tensor([1j]), (4,)), NotImplementedError,
                     "\"aminmax_cpu\" not implemented for 'ComplexFloat'")


# --- histogram ----------------------------------------------------------------------------------

def _histogram_ref(x, bins=100, weight=None, *, range=None, density=False):
    x = np.asarray(x).reshape(-1)
    if isinstance(bins, np.ndarray):
        edges = bins
    else:
        if range is None:
            range = (x.min(), x.max()) if x.size else (0., 1.)
        lo, hi = float(range[0]), float(range[1])
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = np.linspace(lo, hi, bins + 1).astype(x.dtype)
    w = None if weight is None else np.asarray(weight).reshape(-1)
    hist, _ = np.histogram(x, edges, weights=w)
    hist = hist.astype(x.dtype)
    if density:
        hist = hist / hist.sum() / np.diff(edges)
    return hist, edges


def _histogram_samples(dtype, requires_grad):
    if dtype in LOW:            # 16-bit inputs need a range (or edges): no kernel finds theirs
        grid = distinct((4, 5), dtype)          # multiples of 0.5, as the edges: exact
        yield SampleInput(grid, (8,), {"range": (-4., 4.)}, name="range")
        yield SampleInput(grid, (ember.tensor([-8., -1., 0.5, 2., 9.], dtype=dtype),),
                          {"weight": distinct((4, 5), dtype, seed=1).abs(), "density": True},
                          name="edges")
        return
    x = make((4, 5), dtype)
    weight = make((4, 5), dtype, low=0, high=2)
    for args, kwargs in [((4,), {}), ((), {}), ((7,), {"range": (-5., 5.)}),
                         ((6,), {"weight": weight}), ((6,), {"density": True}),
                         ((3,), {"weight": weight, "density": True, "range": [-2, 6]}),
                         ((ember.tensor([-8., -1., 0.5, 2., 9.], dtype=dtype),), {}),
                         ((ember.tensor([-3., 0., 4.], dtype=dtype),),
                          {"weight": weight, "density": True})]:
        yield SampleInput(x, args, kwargs, name=f"{args}{sorted(kwargs)}")
    yield SampleInput(make((4, 3), dtype, noncontiguous=True), (5,), name="noncontig")
    yield SampleInput(ember.ones(2, 3, dtype=dtype), (3,), name="constant")
    yield SampleInput(ember.ones(0, dtype=dtype), (3,), name="empty")
    yield SampleInput(ember.ones(0, dtype=dtype), (3,), {"density": True}, name="empty_density")
    yield SampleInput(ember.tensor(2., dtype=dtype), (3,), name="zero_dim")
    yield SampleInput(ember.tensor([1., NAN, 3.], dtype=dtype), (4,), {"range": (0., 4.)},
                      name="nan_outside")
    yield SampleInput(ember.tensor([0., 1., 2., 3., 4.], dtype=dtype), (4,), name="on_edges")
    yield SampleInput(x, (3,), {"weight": ember.zeros(20, dtype=dtype), "density": True},
                      name="zero_weights")


def _histogram_errors():
    x = ember.tensor([1., 2., 3.])
    yield ErrorInput(SampleInput(x, (0,)), RuntimeError,
                     r"torch.histogram\(\): bins must be > 0, but got 0 for dimension 0")
    yield ErrorInput(SampleInput(x, (ember.tensor([1.]),)), RuntimeError,
                     r"torch.histogram\(\): bins must be > 0, but got 0 for dimension 0")
    yield ErrorInput(SampleInput(x, (ember.tensor([0., 1.], dtype=ember.float64),)),
                     RuntimeError, "torch.histogramdd: input tensor and bins tensors should have "
                                   "the same dtype, but got input with dtype float and bins for "
                                   "dimension 0 with dtype double")
    yield ErrorInput(SampleInput(x, (ember.tensor([0, 1]),)), RuntimeError,
                     "bins for dimension 0 with dtype long int")
    yield ErrorInput(SampleInput(x, (ember.ones(1, 2),)), RuntimeError,
                     "torch.histogramdd: bins tensor should have one dimension, but got 2 "
                     "dimensions in the bins tensor for dimension 0")
    yield ErrorInput(SampleInput(x, (ember.ones(0),)), RuntimeError,
                     "torch.histogramdd: bins tensor should have at least 1 element, but got 0 "
                     "elements in the bins tensor for dimension 0")
    yield ErrorInput(SampleInput(x, (3,), {"weight": ember.ones(3, dtype=ember.float64)}),
                     RuntimeError, r"torch.histogramdd: if weight tensor is provided, input "
                                   r"tensor and weight tensor should have the same dtype, but got "
                                   r"input\(float\), and weight\(double\)")
    yield ErrorInput(SampleInput(x, (3,), {"weight": ember.ones(2)}), RuntimeError,
                     r"torch.histogramdd: if weight tensor is provided it should have the same "
                     r"shape as the input tensor excluding its innermost dimension, but got input "
                     r"with shape \[3, 1\] and weight with shape \[2\]")
    yield ErrorInput(SampleInput(x, (3,), {"range": (0.,)}), RuntimeError,
                     "torch.histogramdd: for a 1-dimensional histogram range should have 2 "
                     "elements, but got 1")
    yield ErrorInput(SampleInput(x, (3,), {"range": (0., float("inf"))}), RuntimeError,
                     r"torch.histogramdd: dimension 0's range \[0, inf\] is not finite")
    yield ErrorInput(SampleInput(ember.tensor([1., NAN]), (3,)), RuntimeError,
                     r"torch.histogramdd: dimension 0's range \[nan, nan\] is not finite")
    yield ErrorInput(SampleInput(x, (3,), {"range": (2., 1.)}), RuntimeError,
                     "torch.histogramdd: min should not exceed max, but got min 2 max 1 for "
                     "dimension 0")
    yield ErrorInput(SampleInput(x, (2.5,)), TypeError, "argument .bins.")
    yield ErrorInput(SampleInput(x.half(), (3,)), NotImplementedError,
                     "\"histogramdd\" not implemented for 'Half'")
    yield ErrorInput(SampleInput(ember.tensor([1, 2]), (3,)), NotImplementedError,
                     "\"histogramdd\" not implemented for 'Long'")


# --- histogramdd --------------------------------------------------------------------------------

def _histogramdd_flat(*args, **kwargs):
    """histogramdd's (hist, (edges, ...)) as a flat tuple, for the generic tests."""
    hist, edges = ember.histogramdd(*args, **kwargs)
    return (hist, *edges)


def _torch_histogramdd(*args, **kwargs):
    import torch
    hist, edges = torch.histogramdd(*args, **kwargs)
    return (hist, *edges)


def _is_edges(bins):
    return isinstance(bins, (list, tuple)) and len(bins) > 0 and \
        np.asarray(bins[0]).dtype.kind == "f"


def _histogramdd_ref(x, bins, range=None, weight=None, density=False):
    x = np.asarray(x)
    dims = x.shape[-1]
    points = x.reshape(math.prod(x.shape[:-1]), dims)
    if _is_edges(bins):
        edges = [np.asarray(e) for e in bins]
    else:
        counts = [np.asarray(b).item() for b in bins] if isinstance(bins, (list, tuple)) \
            else [int(bins)] * dims
        edges = []
        for d, count in enumerate(counts):
            if range is not None:
                lo, hi = float(range[2 * d]), float(range[2 * d + 1])
            elif len(points):
                lo, hi = float(points[:, d].min()), float(points[:, d].max())
            else:
                lo, hi = 0., 1.
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            edges.append(np.linspace(lo, hi, count + 1).astype(x.dtype))
    w = None if weight is None else np.asarray(weight).reshape(-1)
    hist = np.histogramdd(points, edges, weights=w)[0] if dims else np.zeros(())
    hist = hist.astype(x.dtype)
    if density:
        volume = np.ones(())
        for e in edges:
            volume = np.multiply.outer(volume, np.diff(e))
        with np.errstate(invalid="ignore", divide="ignore"):
            hist = (hist / hist.sum() / volume).astype(x.dtype)
    return (hist, *edges)


def _histogramdd_samples(dtype, requires_grad):
    grid = distinct((12, 2), dtype)             # multiples of 0.5 in [-6, 5.5]
    points3 = distinct((2, 5, 3), dtype, seed=1)
    edges = [ember.tensor([-8., -2., 0., 1., 8.], dtype=dtype),
             ember.tensor([-4., 0., 4.], dtype=dtype)]
    weight = distinct((12,), dtype, seed=2).abs()
    yield SampleInput(grid, ([4, 2],), {"range": [-8., 8., -4., 4.]}, name="range")
    yield SampleInput(grid, (2, [-8, 8, -6, 6], weight), name="positional_range_weight")
    yield SampleInput(grid, (edges,), name="edges")
    yield SampleInput(grid, (tuple(edges),), {"weight": weight, "density": True},
                      name="edges_weight_density")
    yield SampleInput(points3, (4,), {"range": (-8, 8, -8, 8, -8, 8)}, name="3d")
    yield SampleInput(distinct((6, 2), dtype, transpose=True), (edges,), name="noncontig")
    yield SampleInput(ember.ones(0, 2, dtype=dtype), (edges,), name="empty_edges")
    yield SampleInput(ember.ones(0, 2, dtype=dtype), ([2, 4],), name="empty_counts")
    yield SampleInput(ember.ones(3, 0, dtype=dtype), ([],), name="zero_dims")
    yield SampleInput(ember.tensor([[1., NAN], [0., 2.], [NAN, NAN]], dtype=dtype), (2,),
                      {"range": [0., 2., 0., 2.]}, name="nan_outside")
    if dtype not in FLOATS:
        return                  # 16-bit inputs need a range (or edges): no kernel finds theirs
    x = make((20, 2), dtype)
    for args, kwargs in [((3,), {}), (([3, 5],), {}), (((2, 7),), {"density": True}),
                         ((4,), {"weight": make((20,), dtype, low=0, high=2)}),
                         ((3,), {"weight": make((20,), dtype, low=0, high=2), "density": True,
                                 "range": [-5., 5., -3., 7.]})]:
        yield SampleInput(x, args, kwargs, name=f"{args}{sorted(kwargs)}")
    yield SampleInput(make((3, 4, 2), dtype), ([2, 3],), {"weight": make((3, 4), dtype)},
                      name="batched_weight")
    yield SampleInput(make((10, 3), dtype, noncontiguous=True), ([2, 3, 4],), name="noncontig")
    yield SampleInput(make((7, 1), dtype), (5,), {"density": True}, name="one_dim")
    yield SampleInput(ember.ones(4, 2, dtype=dtype), (3,), name="constant")
    yield SampleInput(ember.ones(0, 2, dtype=dtype), (3,), {"density": True}, name="empty_nan")
    yield SampleInput(ember.tensor([[0., 0.], [1., 2.], [2., 4.]], dtype=dtype), ([2, 4],),
                      name="on_edges")
    yield SampleInput(x, (ember.tensor(3),), name="int_tensor_bins")
    yield SampleInput(x, ([ember.tensor([2]), ember.tensor(3)],), name="int_tensor_counts")


def _histogramdd_errors():
    x = ember.tensor([[1., 2.], [3., 4.], [5., 6.]])
    edge = ember.tensor([0., 1.])
    shape = r"input with shape \[3, 2\] and weight with shape"
    for bins in (2.5, "a", True, None, edge):
        yield ErrorInput(SampleInput(x, (bins,)), TypeError,     # (PyTorch's parser's words)
                         r"histogramdd\(\) received an invalid combination of arguments - got "
                         r"\(Tensor, ")
    yield ErrorInput(SampleInput(x, ([2.5, 2],)), TypeError,
                     "expected Tensor as element 0 in argument 1, but got float")
    yield ErrorInput(SampleInput(x, ([edge, 3],)), TypeError,
                     "expected Tensor as element 1 in argument 1, but got int")
    yield ErrorInput(SampleInput(ember.tensor(1.), (2,)), IndexError,
                     "Dimension specified as -1 but tensor has no dimensions")
    yield ErrorInput(SampleInput(ember.ones(3), (2,)), RuntimeError,
                     "torch.histogramdd: input tensor should have at least 2 dimensions")
    for bins in ([3], [3, 3, 3], []):
        yield ErrorInput(SampleInput(x, (bins,)), RuntimeError,
                         "histogramdd: The size of bins must be equal to the innermost dimension "
                         "of the input.")
    yield ErrorInput(SampleInput(x, ([edge],)), RuntimeError,
                     "torch.histogramdd: expected 2 sequences of bin edges for a 2-dimensional "
                     "histogram but got 1")
    yield ErrorInput(SampleInput(x, ([2, 0],)), RuntimeError,
                     r"torch.histogram\(\): bins must be > 0, but got 0 for dimension 1")
    yield ErrorInput(SampleInput(x, ([-1, 2],)), RuntimeError,
                     "torch.histogramdd: bins tensor should have at least 1 element, but got 0 "
                     "elements in the bins tensor for dimension 0")
    yield ErrorInput(SampleInput(x, (-2,)), RuntimeError, "number of steps must be non-negative")
    yield ErrorInput(SampleInput(x, (2,), {"range": [0., 1.]}), RuntimeError,
                     "torch.histogramdd: for a 2-dimensional histogram range should have 4 "
                     "elements, but got 2")
    yield ErrorInput(SampleInput(x, ([2],), {"range": [0., 1., 1., 0.]}), RuntimeError,
                     "torch.histogramdd: min should not exceed max, but got min 1 max 0 for "
                     "dimension 1")
    yield ErrorInput(SampleInput(x, (2,), {"range": [0., INF, 0., 1.]}), RuntimeError,
                     r"torch.histogramdd: dimension 0's range \[0, inf\] is not finite")
    yield ErrorInput(SampleInput(ember.tensor([[0., NAN]]), (2,)), RuntimeError,
                     r"torch.histogramdd: dimension 1's range \[nan, nan\] is not finite")
    yield ErrorInput(SampleInput(x, (2,), {"weight": ember.ones(2)}), RuntimeError,
                     rf"torch.histogramdd: if weight tensor is provided it should have the same "
                     rf"shape as the input tensor excluding its innermost dimension, but got "
                     rf"{shape} \[2\]")
    yield ErrorInput(SampleInput(x, (2,), {"weight": ember.ones(3, 1)}), RuntimeError,
                     rf"{shape} \[3, 1\]")
    yield ErrorInput(SampleInput(x, ([ember.tensor([0.]), edge],), {"weight": ember.ones(2)}),
                     RuntimeError, rf"{shape} \[2\]")
    yield ErrorInput(SampleInput(x, (2,), {"weight": ember.ones(3, dtype=ember.float64)}),
                     RuntimeError, r"torch.histogramdd: if weight tensor is provided, input "
                                   r"tensor and weight tensor should have the same dtype, but got "
                                   r"input\(float\), and weight\(double\)")
    yield ErrorInput(SampleInput(x, ([edge, edge.double()],)), RuntimeError,
                     "torch.histogramdd: input tensor and bins tensors should have the same "
                     "dtype, but got input with dtype float and bins for dimension 1 with dtype "
                     "double")
    yield ErrorInput(SampleInput(x, ([edge, edge[None]],)), RuntimeError,
                     "torch.histogramdd: bins tensor should have one dimension, but got 2 "
                     "dimensions in the bins tensor for dimension 1")
    yield ErrorInput(SampleInput(x, ([edge, ember.ones(0)],)), RuntimeError,
                     "torch.histogramdd: bins tensor should have at least 1 element, but got 0 "
                     "elements in the bins tensor for dimension 1")
    yield ErrorInput(SampleInput(x, ([edge, ember.ones(1)],)), RuntimeError,
                     r"torch.histogram\(\): bins must be > 0, but got 0 for dimension 1")
    for dtype, name in ((ember.float16, "Half"), (ember.bfloat16, "BFloat16"),
                        (ember.int64, "Long")):
        yield ErrorInput(SampleInput(x.to(dtype), (2,)), NotImplementedError,
                         f"\"histogramdd\" not implemented for '{name}'")
    for dtype, kernel, name in ((ember.int64, "histogram_cpu", "Long"),
                                (ember.complex64, "histogram_cpu", "ComplexFloat"),
                                (ember.bool, "linspace_cpu", "Bool")):
        yield ErrorInput(SampleInput(x.to(dtype), (2,), {"range": [0., 1., 0., 1.]}),
                         NotImplementedError, f"\"{kernel}\" not implemented for '{name}'")


# --- bincount -----------------------------------------------------------------------------------

def _bincount_ref(x, weights=None, minlength=0):
    x = np.asarray(x).astype(np.int64)
    if x.size == 0:
        return np.zeros(minlength, dtype=np.int64)
    if weights is None:
        return np.bincount(x, minlength=minlength)
    w = np.asarray(weights)
    out = np.float32 if w.dtype == np.float32 else np.float64
    return np.bincount(x, w.real.astype(np.float64), minlength).astype(out)


def _bincount_samples(dtype, requires_grad):
    x = make((12,), dtype, low=0, high=6)
    yield SampleInput(x, name="plain")
    yield SampleInput(x, kwargs={"minlength": 10}, name="minlength")
    yield SampleInput(x, kwargs={"minlength": 2}, name="short_minlength")
    for wdtype in (ember.float32, ember.float64, ember.float16, ember.int64, ember.bool):
        yield SampleInput(x, (make((12,), wdtype),), name=f"weights_{wdtype.name}")
    yield SampleInput(x, (make((12,), ember.float32),), {"minlength": 9}, name="both")
    yield SampleInput(make((12,), dtype, low=0, high=6, noncontiguous=True), name="noncontig")
    yield SampleInput(ember.ones(0, dtype=dtype), kwargs={"minlength": 3}, name="empty")
    yield SampleInput(ember.ones(0, dtype=dtype), (ember.ones(0),), name="empty_weights")


def _bincount_dtype(dtype, sample):
    if sample is None or not (sample.args or "weights" in sample.kwargs) or \
            sample.input.numel() == 0:
        return ember.int64
    weights = sample.args[0] if sample.args else sample.kwargs["weights"]
    return ember.float32 if weights.dtype is ember.float32 else ember.float64


def _bincount_errors():
    yield ErrorInput(SampleInput(ember.tensor([1, -3, 0])), RuntimeError,
                     "bincount only supports 1-d non-negative integral inputs.")
    yield ErrorInput(SampleInput(ember.tensor([[1, 3]])), RuntimeError,
                     "bincount only supports 1-d non-negative integral inputs.")
    yield ErrorInput(SampleInput(ember.tensor(3)), RuntimeError,
                     "bincount only supports 1-d non-negative integral inputs.")
    yield ErrorInput(SampleInput(ember.tensor([1., 2.])), NotImplementedError,
                     "\"bincount_cpu\" not implemented for 'Float'")
    yield ErrorInput(SampleInput(ember.tensor([True])), NotImplementedError,
                     "\"bincount_cpu\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(ember.tensor([1, 3]), kwargs={"minlength": -1}), RuntimeError,
                     "minlength should be >= 0")
    yield ErrorInput(SampleInput(ember.tensor([1, 3]), kwargs={"minlength": 2.5}), TypeError,
                     r"bincount\(\): argument 'minlength' must be int, not float")
    yield ErrorInput(SampleInput(ember.tensor([1, 3]), (ember.ones(3),)), RuntimeError,
                     "weights should be 1-d and have the same length as input")
    yield ErrorInput(SampleInput(ember.tensor([1, 3]), (ember.ones(2, 1),)), RuntimeError,
                     "weights should be 1-d and have the same length as input")


OPS = [
    OpInfo("searchsorted", _searchsorted_ref, _searchsorted_samples, dtypes=ORDERED, grad=False,
           result_dtype=_index_dtype, error_inputs=_searchsorted_errors),
    OpInfo("bucketize", _bucketize_ref, _bucketize_samples, dtypes=ORDERED, grad=False,
           result_dtype=_index_dtype, error_inputs=_bucketize_errors),
    OpInfo("histc", _histc_ref, _histc_samples, dtypes=FLOATS + LOW, grad=False,
           error_inputs=_histc_errors),
    OpInfo("histogram", _histogram_ref, _histogram_samples, dtypes=FLOATS + LOW, grad=False,
           error_inputs=_histogram_errors),
    OpInfo("histogramdd", _histogramdd_ref, _histogramdd_samples, dtypes=FLOATS + LOW, grad=False,
           op=_histogramdd_flat, torch_op=_torch_histogramdd, error_inputs=_histogramdd_errors),
    OpInfo("bincount", _bincount_ref, _bincount_samples, dtypes=INTS, grad=False,
           result_dtype=_bincount_dtype, error_inputs=_bincount_errors),
]
