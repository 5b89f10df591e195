"""OpInfo entries for ember/ops/pooling.py, adaptive_pooling.py, unpooling.py and the
internal gather/scatter and separable-map ops they are built on."""

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, INTS, LOW, ErrorInput, OpInfo, SampleInput, make

MAX_DTYPES = FLOATS + LOW + INTS
AVG_DTYPES = FLOATS + LOW + (ember.int64,)


def _tup(v, nd):
    if v is None:
        return None
    return tuple(v) * (nd if len(tuple(v)) == 1 else 1) if isinstance(v, (tuple, list)) \
        else (v,) * nd


def _out_size(size, k, s, p, d, ceil):
    span = size + 2 * p - d * (k - 1) - 1
    o = (span + (s - 1 if ceil else 0)) // s + 1
    return o - 1 if ceil and (o - 1) * s >= size + p else o


# --- references (plain loops over output positions) ------------------------------------------

def _max_ref(nd):
    def ref(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, *_):
        k, p, d = _tup(kernel_size, nd), _tup(padding, nd), _tup(dilation, nd)
        s = _tup(stride, nd) or k
        size, lead = x.shape[-nd:], x.shape[:-nd]
        out = tuple(_out_size(*a, ceil_mode) for a in zip(size, k, s, p, d))
        values = np.zeros(lead + out, x.dtype)
        indices = np.zeros(lead + out, np.int64)
        for o in np.ndindex(*out):
            best = np.full(lead, -np.inf)
            where = np.full(lead, -1)
            for j in np.ndindex(*k):
                c = [o[i] * s[i] - p[i] + j[i] * d[i] for i in range(nd)]
                if any(ci < 0 or ci >= size[i] for i, ci in enumerate(c)):
                    continue
                v = x[(Ellipsis,) + tuple(c)].astype(np.float64)
                take = (v > best) | np.isnan(v) | (where < 0)
                best = np.where(take, v, best)
                where = np.where(take, np.ravel_multi_index(c, size), where)
            values[(Ellipsis,) + o] = best
            indices[(Ellipsis,) + o] = where
        return values, indices
    return ref


def _avg_ref(nd):
    def ref(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
            divisor_override=None):
        k, p = _tup(kernel_size, nd), _tup(padding, nd)
        s = _tup(stride, nd) or k
        size, lead = x.shape[-nd:], x.shape[:-nd]
        out = tuple(_out_size(*a, 1, ceil_mode) for a in zip(size, k, s, p))
        result = np.zeros(lead + out, np.float64)
        for o in np.ndindex(*out):
            start = [o[i] * s[i] - p[i] for i in range(nd)]
            end = [min(start[i] + k[i], size[i] + p[i]) for i in range(nd)]
            lo = [max(a, 0) for a in start]
            hi = [min(b, n) for b, n in zip(end, size)]
            window = x[(Ellipsis,) + tuple(slice(a, b) for a, b in zip(lo, hi))]
            total = window.astype(np.float64).sum(axis=tuple(range(-nd, 0)))
            if divisor_override:
                div = divisor_override
            elif count_include_pad:
                div = np.prod([b - a for a, b in zip(start, end)])
            else:
                div = np.prod([b - a for a, b in zip(lo, hi)])
            result[(Ellipsis,) + o] = total / div
        if x.dtype.kind == "i":
            return np.trunc(result).astype(x.dtype)
        return result
    return ref


def _bounds(n, o, i):
    return (i * n) // o, -((-(i + 1) * n) // o)


def _adaptive_ref(nd, kind):
    def ref(x, output_size, *_):
        size, lead = x.shape[-nd:], x.shape[:-nd]
        out = tuple(size[i] if v is None else v for i, v in enumerate(_tup(output_size, nd)))
        values = np.zeros(lead + out, np.float64)
        indices = np.zeros(lead + out, np.int64)
        for o in np.ndindex(*out):
            b = [_bounds(size[i], out[i], o[i]) for i in range(nd)]
            window = x[(Ellipsis,) + tuple(slice(a, c) for a, c in b)].astype(np.float64)
            flat = window.reshape(lead + (int(np.prod(window.shape[len(lead):])),))
            if kind == "avg":
                values[(Ellipsis,) + o] = flat.mean(-1)
                continue
            pick = flat.argmax(-1)
            nan = np.isnan(flat)        # PyTorch keeps the last NaN of a window
            pick = np.where(nan.any(-1), flat.shape[-1] - 1 - nan[..., ::-1].argmax(-1), pick)
            values[(Ellipsis,) + o] = np.take_along_axis(flat, pick[..., None], -1)[..., 0]
            local = np.unravel_index(pick, tuple(c - a for a, c in b))
            indices[(Ellipsis,) + o] = np.ravel_multi_index(
                tuple(li + a for li, (a, _) in zip(local, b)), size)
        return values if kind == "avg" else (values, indices)
    return ref


def _unpool_ref(nd):
    def ref(x, indices, kernel_size, stride=None, padding=0, output_size=None):
        k, p = _tup(kernel_size, nd), _tup(padding, nd)
        s = _tup(stride, nd) or k
        size = tuple(output_size[-nd:]) if output_size is not None else tuple(
            (x.shape[-nd + i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(nd))
        lead = x.shape[:-nd]
        out = np.zeros(lead + (int(np.prod(size)),), x.dtype)
        for pos in np.ndindex(*x.shape):
            out[pos[:len(lead)] + (indices[pos],)] = x[pos]
        return out.reshape(lead + size)
    return ref


# --- samples ----------------------------------------------------------------------------------

_SHAPES = {1: [(2, 3, 7), (3, 6)], 2: [(2, 2, 5, 6), (2, 6, 5)], 3: [(1, 2, 4, 5, 4), (2, 4, 4, 5)]}
_TINY = {1: (1, 2, 6), 2: (1, 3, 4), 3: (1, 2, 2, 3)}      # at most 12 elements: gradgradcheck


def _max_samples(nd):
    def samples(dtype, requires_grad):
        for shape in _SHAPES[nd]:
            yield SampleInput(make(shape, dtype, requires_grad), (2,), name="k2")
        shape = _SHAPES[nd][0]
        for k, s, p, d, c in ((3, 2, 1, 1, False), (2, 1, 1, 2, True), (3, 2, 0, 1, True)):
            yield SampleInput(make(shape, dtype, requires_grad), (k, s, p, d, c),
                              name=f"k{k}s{s}p{p}d{d}c{int(c)}")
        tup = tuple(range(2, 2 + nd))
        yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=True), (tup,),
                          {"stride": 1}, name="tuple_noncontiguous")
        yield SampleInput(make((0,) + shape[1:], dtype, requires_grad), (2,), name="empty")
        yield SampleInput(make(_TINY[nd], dtype, requires_grad), (2, 1), name="tiny")
        if not requires_grad and dtype.is_floating_point:
            yield SampleInput(_with_nans(make(shape, dtype), nd), (3, 2, 1), name="nans")
    return samples


def _with_nans(x, nd):
    """``x`` with a NaN pair in one window and a whole row of NaNs elsewhere."""
    x = x.clone()
    first = (0,) * (x.ndim - nd)
    x[first + (1,) * nd] = float("nan")
    x[first + (2,) * nd] = float("nan")
    x[(x.shape[0] - 1,) + (Ellipsis,) + (x.shape[-1] - 1,)] = float("nan")
    return x


def _avg_samples(nd):
    def samples(dtype, requires_grad):
        for shape in _SHAPES[nd]:
            yield SampleInput(make(shape, dtype, requires_grad), (2,), name="k2")
        shape = _SHAPES[nd][0]
        cases = [(3, 2, 1, False, True), (3, 2, 1, True, False), (2, 1, 1, True, True)]
        for k, s, p, c, cip in cases:
            yield SampleInput(make(shape, dtype, requires_grad), (k, s, p, c, cip),
                              name=f"k{k}s{s}p{p}c{int(c)}cip{int(cip)}")
        if nd > 1:
            yield SampleInput(make(shape, dtype, requires_grad), (3,),
                              {"padding": 1, "divisor_override": 5}, name="divisor")
        yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=True), (2,),
                          name="noncontiguous")
        yield SampleInput(make((0,) + shape[1:], dtype, requires_grad), (2,), name="empty")
        yield SampleInput(make(_TINY[nd], dtype, requires_grad), (2, 1), name="tiny")
    return samples


def _adaptive_samples(nd):
    def samples(dtype, requires_grad):
        for shape in _SHAPES[nd]:
            for o in (1, 3, 4):
                yield SampleInput(make(shape, dtype, requires_grad), (o,), name=f"out{o}")
        shape = _SHAPES[nd][0]
        if nd > 1:
            yield SampleInput(make(shape, dtype, requires_grad),
                              ((None,) + tuple(range(2, 1 + nd)),), name="none_keeps")
        yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=True), (5,),
                          name="noncontiguous_upsampled")
        yield SampleInput(make((0,) + shape[1:], dtype, requires_grad), (2,), name="empty")
        yield SampleInput(make(_TINY[nd], dtype, requires_grad), (2,), name="tiny")
        if not requires_grad:
            yield SampleInput(_with_nans(make(shape, dtype), nd), (3,), name="nans")
    return samples


def _unpool_samples(nd):
    pool = {1: ember.max_pool1d_with_indices,
            2: ember.nn.functional.max_pool2d_with_indices,
            3: ember.nn.functional.max_pool3d_with_indices}[nd]

    def samples(dtype, requires_grad):
        for shape in _SHAPES[nd]:
            x = make(shape, ember.float64)
            _, idx = pool(x, 2)
            yield SampleInput(make(tuple(idx.shape), dtype, requires_grad), (idx, 2),
                              {"output_size": tuple(x.shape[-nd:])}, name="k2")
        x = make(_SHAPES[nd][0], ember.float64)
        _, idx = pool(x, 2, 2, 1)         # windows must not overlap: no repeated indices
        size = tuple(x.shape[-nd:])
        yield SampleInput(make(tuple(idx.shape), dtype, requires_grad), (idx, 2, 2, 1, size),
                          name="padded_output_size")
        _, idx = pool(make((1, 2) + (4,) * nd, ember.float64), 2)
        yield SampleInput(make(tuple(idx.shape), dtype, requires_grad), (idx, 2), name="tiny")
    return samples


# --- errors -----------------------------------------------------------------------------------

def _max_errors(nd):
    fn_shape = _SHAPES[nd][1]

    def errors():
        x = ember.randn(fn_shape)
        yield ErrorInput(SampleInput(ember.randn((4,) * nd), (2,)), RuntimeError,
                         "Expected 2 to 3 dimensions" if nd == 1 else
                         f"non-empty {nd + 1}D or {nd + 2}D")
        yield ErrorInput(SampleInput(x, (2,), {"stride": 0}), RuntimeError,
                         "stride should not be zero")
        yield ErrorInput(SampleInput(x, (2,), {"padding": 2}), RuntimeError,
                         "pad should be at most half of effective kernel size, but got pad=2, "
                         "kernel_size=2 and dilation=1")
        yield ErrorInput(SampleInput(x, (2,), {"dilation": 0}), RuntimeError,
                         "dilation should be greater than zero")
        yield ErrorInput(SampleInput(ember.randn((1,) * (nd + 1)), (2,)), RuntimeError,
                         r"Calculated output size: .*Output size is too small")
        yield ErrorInput(SampleInput(ember.ones(fn_shape, dtype=ember.bool), (2,)),
                         NotImplementedError, "not implemented for 'Bool'")
        yield ErrorInput(SampleInput(x, ((2,) * (nd + 1),)), RuntimeError, "kernel_size")
    return errors


def _avg_errors(nd):
    def errors():
        x = ember.randn(_SHAPES[nd][1])
        yield ErrorInput(SampleInput(x, (2,), {"stride": 0}), RuntimeError,
                         "stride should not be zero")
        yield ErrorInput(SampleInput(x, (2,), {"padding": 2}), RuntimeError,
                         "pad should be at most half of effective kernel size")
        yield ErrorInput(SampleInput(ember.randn((1,) * (nd + 1)), (2,)), RuntimeError,
                         "smaller than kernel size" if nd == 3 else "Output size is too small")
        if nd == 3:
            yield ErrorInput(SampleInput(ember.randn(_SHAPES[3][1]).half(), (2,)),
                             NotImplementedError, "not implemented for 'Half'", cpu_only=True)
        yield ErrorInput(SampleInput(ember.ones(_SHAPES[nd][1], dtype=ember.int32), (2,)),
                         NotImplementedError, "not implemented for 'Int'")
        if nd > 1:
            yield ErrorInput(SampleInput(x, (2,), {"divisor_override": 0}), RuntimeError,
                             "divisor must be not zero")
    return errors


def _adaptive_errors(nd, kind):
    def errors():
        name = f"adaptive_{kind}_pool{nd}d"
        yield ErrorInput(SampleInput(ember.randn((4,) * nd), (2,)), RuntimeError,
                         "Expected 2 to 3 dimensions" if nd == 1 else f"{name}\\(\\): Expected")
        shape = (1, 2) + (0,) + (4,) * (nd - 1)
        yield ErrorInput(SampleInput(ember.randn(shape), (2,)), RuntimeError,
                         "Expected input to have non-zero size for non-batch dimensions")
        yield ErrorInput(SampleInput(ember.ones((1,) + (4,) * nd, dtype=ember.int64), (2,)),
                         NotImplementedError, "not implemented for 'Long'")
        if kind == "avg":
            yield ErrorInput(SampleInput(ember.randn((1,) + (4,) * nd), (-1,)), RuntimeError,
                             "elements of output_size must be greater than or equal to 0")
    return errors


def _unpool_errors(nd):
    def errors():
        shape = (1,) + (2,) * nd
        x = ember.randn(shape)
        idx = ember.zeros(shape, dtype=ember.int64)
        yield ErrorInput(SampleInput(x, (idx.int(), 2)), RuntimeError,
                         "elements in indices should be type int64")
        yield ErrorInput(SampleInput(x, (idx[0], 2)), RuntimeError,
                         "Expected shape of indices to be same as that of the input tensor")
        yield ErrorInput(SampleInput(x, (idx + 99, 2)), RuntimeError,
                         "Found an invalid max index: 99")
        yield ErrorInput(SampleInput(x, (idx, 2), {"output_size": (9,) * nd}), ValueError,
                         "invalid output_size")
        yield ErrorInput(SampleInput(x[0], (idx[0], 2)), RuntimeError,
                         f"Input to max_unpooling{max(nd, 2)}d should be")
    return errors


# --- fractional max pooling -------------------------------------------------------------------

def _fractional_starts(u, n, m, k):
    if m == 1:
        return [n - k]
    alpha = u.dtype.type(n - k) / u.dtype.type(m - 1)
    return [int((u.dtype.type(i) + u) * alpha) - int(u * alpha) for i in range(m - 1)] + [n - k]


def _fractional_ref(nd):
    dims = {2: (1, 0), 3: (0, 1, 2)}[nd]        # the sample each spatial dim takes

    def ref(x, kernel_size, output_size=None, _random_samples=None, **_):
        batched = x.ndim == nd + 2
        x = x if batched else x[None]
        k, out = _tup(kernel_size, nd), _tup(output_size, nd)
        size = x.shape[2:]
        values = np.zeros(x.shape[:2] + out, x.dtype)
        indices = np.zeros(x.shape[:2] + out, np.int64)
        for b, c in np.ndindex(*x.shape[:2]):
            starts = [_fractional_starts(_random_samples[b, c, dims[d]], size[d], out[d], k[d])
                      for d in range(nd)]
            for o in np.ndindex(*out):
                first = [starts[d][o[d]] for d in range(nd)]
                window = x[(b, c) + tuple(slice(a, a + k[d]) for d, a in enumerate(first))]
                pick = np.unravel_index(window.reshape(-1).argmax(), window.shape)
                values[(b, c) + o] = window[pick]
                indices[(b, c) + o] = np.ravel_multi_index(
                    tuple(a + p for a, p in zip(first, pick)), size)
        return (values, indices) if batched else (values[0], indices[0])
    return ref


def _fractional_samples(nd):
    shapes = {2: [(2, 3, 9, 7), (2, 7, 6)], 3: [(1, 2, 5, 7, 7), (2, 6, 7, 8)]}[nd]

    def samples(dtype, requires_grad):
        rng = np.random.default_rng(nd)
        for shape in shapes:
            planes = (shape[0], shape[1]) if len(shape) == nd + 2 else (1, shape[0])
            u = ember.tensor(rng.random(planes + (nd,)), dtype=dtype)
            for k, out in ((2, 3), (3, tuple(range(2, 2 + nd))), (2, 1)):
                yield SampleInput(make(shape, dtype, requires_grad), (k,),
                                  {"output_size": out, "_random_samples": u},
                                  name=f"k{k}_out{out}")
    return samples


def _fractional_errors(nd):
    name = f"fractional_max_pool{nd}d"

    def errors():
        x = ember.randn((2, 2) + (5,) * nd)
        u = ember.rand(2, 2, nd)
        yield ErrorInput(SampleInput(x, (2,)), ValueError,
                         f"{name} requires specifying either an output_size or an output_ratio")
        yield ErrorInput(SampleInput(x, (5,), {"output_size": 2, "_random_samples": u}),
                         RuntimeError, "pool (time|height) 5 too large relative to input")
        yield ErrorInput(SampleInput(x, (2,), {"output_size": 2, "_random_samples": u[:1]}),
                         RuntimeError, r"Expect _random_samples.size\(0\) no less then input")
        yield ErrorInput(SampleInput(x, (2,), {"output_size": 2,
                                               "_random_samples": u.double()}),
                         RuntimeError, "Expect _random_samples to have the same dtype")
    return errors


def _torch_fractional(nd):
    def call(x, kernel_size, output_size=None, _random_samples=None):
        import torch
        pool = getattr(torch.nn.functional, f"fractional_max_pool{nd}d_with_indices")
        return pool(x, kernel_size, output_size=output_size, _random_samples=_random_samples)
    return call


# --- internals --------------------------------------------------------------------------------

def _gather_samples(dtype, requires_grad):
    idx = ember.tensor([[[0, 5, 5], [2, 1, 0]], [[3, 3, 4], [1, 0, 2]]])
    yield SampleInput(make((2, 2, 2, 3), dtype, requires_grad), (idx.reshape(2, 2, 1, 3), 2),
                      name="repeats")
    yield SampleInput(make((2, 2, 6), dtype, requires_grad, noncontiguous=True), (idx, 1),
                      name="noncontiguous")


def _gather_ref(x, indices, nd):
    lead = x.shape[:x.ndim - nd]
    flat = x.reshape(lead + (-1,))
    return np.take_along_axis(flat, indices.reshape(lead + (-1,)), -1).reshape(indices.shape)


def _scatter_samples(dtype, requires_grad):
    idx = ember.tensor([[[0, 5, 5], [2, 1, 0]], [[3, 3, 4], [1, 0, 2]]])
    yield SampleInput(make((2, 2, 3), dtype, requires_grad), (idx, (2, 3)), name="repeats")
    yield SampleInput(make((2, 2, 3), dtype, requires_grad, noncontiguous=True), (idx, (6,)),
                      name="noncontiguous")
    distinct = ember.tensor([[[5, 0, 2], [1, 3, 4]], [[0, 1, 2], [4, 3, 5]]])
    yield SampleInput(make((2, 2, 3), dtype, requires_grad), (distinct, (2, 3), True),
                      name="unique")


def _scatter_ref(src, indices, size, unique=False):
    nd = len(size)
    lead = src.shape[:src.ndim - nd]
    out = np.zeros(lead + (int(np.prod(size)),), src.dtype)
    for pos in np.ndindex(*src.shape):
        out[pos[:len(lead)] + (indices[pos],)] += src[pos]
    return out.reshape(lead + tuple(size))


def _torch_plane_gather(x, indices, nd):
    return x.flatten(-nd).gather(-1, indices.flatten(-nd)).view(indices.shape)


def _torch_plane_scatter(src, indices, size, unique=False):
    nd = len(size)
    lead = tuple(src.shape[:src.ndim - nd])
    out = src.new_zeros(lead + (int(np.prod(size)),))
    return out.scatter_add(-1, indices.flatten(-nd), src.flatten(-nd)).view(lead + tuple(size))


def _pool_backward_samples(dtype, requires_grad):
    idx = ember.tensor([[[0, 5, 5], [2, 1, 0]], [[3, 3, 4], [1, 0, 2]]]).reshape(2, 2, 1, 3)
    yield SampleInput(make((2, 2, 1, 3), dtype, requires_grad),
                      (make((2, 2, 2, 3), dtype, requires_grad), idx, 2, "max_pool"),
                      name="repeats")
    distinct = ember.tensor([[[5, 0, 2], [1, 3, 4]], [[0, 1, 2], [4, 3, 5]]])
    yield SampleInput(make((2, 2, 3), dtype, requires_grad, noncontiguous=True),
                      (make((2, 2, 6), dtype, requires_grad), distinct, 1, "adaptive_max_pool",
                       True), name="unique")


def _pool_backward_ref(grad, x, indices, nd, kind, unique=False):
    return _scatter_ref(grad, indices, x.shape[x.ndim - nd:])


def _torch_pool_backward(grad, x, indices, nd, kind, unique=False):
    return _torch_plane_scatter(grad, indices, tuple(x.shape[x.ndim - nd:]))


_MATS = (np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.25, 0.75, 1.0]]), None,
         np.array([[1.0, -2.0], [0.0, 3.0], [0.5, 0.5]]))


def _along_samples(dtype, requires_grad):
    yield SampleInput(make((2, 4, 3, 2), dtype, requires_grad), (_MATS,), name="three_dims")
    yield SampleInput(make((4, 3, 2), dtype, requires_grad, noncontiguous=True), (_MATS,),
                      name="noncontiguous")
    yield SampleInput(make((0, 4, 3, 2), dtype, requires_grad), (_MATS,), name="empty")


def _along_ref(x, mats):
    nd = len(mats)
    for i, m in enumerate(mats):
        if m is not None:
            x = np.moveaxis(np.tensordot(m, x, axes=([1], [x.ndim - nd + i])), 0,
                            x.ndim - nd + i)
    return x


def _torch_along(x, mats):
    nd = len(mats)
    for i, m in enumerate(mats):
        if m is not None:
            axis = x.ndim - nd + i
            t = x.new_tensor(m)
            x = (x.movedim(axis, -1) @ t.T).movedim(-1, axis)
    return x


# PyTorch sums a 16-bit window in 16 bits (ember in float32, rounding once)
_LOW_SUMS = {ember.float16: (1e-2, 1e-3), ember.bfloat16: (4e-2, 2e-2)}


def _entries():
    for nd in (1, 2, 3):
        ns = None if nd == 1 else "nn.functional"
        prefix = "" if ns is None else ns + "."
        yield OpInfo(f"{prefix}max_pool{nd}d_with_indices", _max_ref(nd), _max_samples(nd),
                     dtypes=MAX_DTYPES, gradgrad=True, error_inputs=_max_errors(nd))
        yield OpInfo(f"{prefix}avg_pool{nd}d", _avg_ref(nd), _avg_samples(nd),
                     dtypes=AVG_DTYPES if nd < 3 else FLOATS + (ember.int64,), gradgrad=True,
                     error_inputs=_avg_errors(nd))
        # (PyTorch's 3-D CPU kernel, as ember's, sums each window in a 16-bit input's dtype)
        yield OpInfo(f"{prefix}adaptive_avg_pool{nd}d", _adaptive_ref(nd, "avg"),
                     _adaptive_samples(nd), dtypes=FLOATS + LOW, gradgrad=True,
                     error_inputs=_adaptive_errors(nd, "avg"), parity_tol=_LOW_SUMS,
                     tol=_LOW_SUMS if nd == 3 else {})
        name = "adaptive_max_pool1d" if nd == 1 else \
            f"nn.functional.adaptive_max_pool{nd}d_with_indices"
        yield OpInfo(name, _adaptive_ref(nd, "max"), _adaptive_samples(nd),
                     dtypes=FLOATS + LOW, gradgrad=True,
                     error_inputs=_adaptive_errors(nd, "max"))
        yield OpInfo(f"nn.functional.max_unpool{nd}d", _unpool_ref(nd), _unpool_samples(nd),
                     dtypes=FLOATS + LOW, gradgrad=True, error_inputs=_unpool_errors(nd),
                     op=getattr(ember.nn.functional, f"max_unpool{nd}d"))
    for nd in (2, 3):
        yield OpInfo(f"_fractional_max_pool{nd}d", _fractional_ref(nd), _fractional_samples(nd),
                     dtypes=FLOATS, gradgrad=True, error_inputs=_fractional_errors(nd),
                     op=getattr(ember.nn.functional, f"fractional_max_pool{nd}d_with_indices"),
                     torch_op=_torch_fractional(nd))
    yield OpInfo("_plane_gather", _gather_ref, _gather_samples, dtypes=FLOATS + LOW,
                 gradgrad=True, torch_op=_torch_plane_gather)
    yield OpInfo("_plane_scatter_add", _scatter_ref, _scatter_samples, dtypes=FLOATS,
                 gradgrad=True, torch_op=_torch_plane_scatter)
    yield OpInfo("_max_pool_backward", _pool_backward_ref, _pool_backward_samples,
                 dtypes=FLOATS, gradgrad=True, torch_op=_torch_pool_backward)
    yield OpInfo("_along_dims", _along_ref, _along_samples, dtypes=FLOATS, gradgrad=True,
                 torch_op=_torch_along)


OPS = list(_entries())
