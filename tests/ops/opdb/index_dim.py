"""OpInfo entries for ember/ops/index_dim.py: index_select, index_add, index_reduce,
index_copy, index_fill, take, put."""

import numpy as np

import ember
from tests.ops.opdb.core import ALL, COMPLEX, ErrorInput, OpInfo, SampleInput, make
from tests.ops.opdb.scatter import number_for, random_index

LONG = ember.int64


def _long(values):
    return ember.tensor(values, dtype=LONG)


def _key(dim, rows, ndim):
    return (slice(None),) * (dim % ndim) + (rows,)


# (input shape, dim, number of indices, noncontiguous)
_CASES = [
    ((5,), 0, 3, False),
    ((3, 4, 5), 0, 2, True),
    ((3, 4, 5), 1, 3, False),
    ((3, 4, 5), 2, 4, False),
    ((3, 4, 5), -1, 2, False),
    ((3, 4), 1, 0, False),
    ((0, 3), 1, 2, False),
]


def _cases(dtype, requires_grad, unique):
    """(input, dim, 1-D index) per case; ``unique=False`` repeats indices. Plus 0-dim inputs,
    a 0-dim index and an int32 one."""
    rng = np.random.default_rng(0)
    for shape, dim, n, nc in _CASES:
        size = shape[dim]
        count = n if unique else n + size
        index = random_index(rng, (count,), size, unique=unique) if size else _long([])
        yield make(shape, dtype, requires_grad, noncontiguous=nc), dim, index, f"{shape}-d{dim}"
    yield make((), dtype, requires_grad), 0, _long([0]), "0-dim"
    yield make((2, 3), dtype, requires_grad), 0, _long(1), "0-dim index"
    yield make((4, 3), dtype, requires_grad), 0, _long([3, 0]).to(ember.int32), "int32"


def _sliced(shape, dim, n):
    """``shape`` with ``n`` along ``dim`` (the source of n indexed slices)."""
    if not shape:
        return ()
    shape = list(shape)
    shape[dim] = n
    return tuple(shape)


# --- index_select -------------------------------------------------------------------------------

def _select_samples(dtype, requires_grad):
    for x, dim, index, name in _cases(dtype, requires_grad, unique=False):
        yield SampleInput(x, (dim, index), name=name)


def _select_ref(x, dim, index):
    x = np.asarray(x)
    return x.copy() if x.ndim == 0 else np.take(x, np.asarray(index).reshape(-1), axis=dim)


def _select_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(x, (1, _long([[0, 1]]))), IndexError,
                     r"index_select\(\): Index is supposed to be a vector")
    yield ErrorInput(SampleInput(x, (1, ember.tensor([2.0]))), RuntimeError,
                     r"index_select\(\): Expected dtype int32 or int64 for index")
    yield ErrorInput(SampleInput(x, (0, _long([2]))), IndexError, "index out of range in self")
    yield ErrorInput(SampleInput(x, (1, _long([-1]))), RuntimeError,
                     "INDICES element is out of DATA bounds, id=-1 axis_dim=3")
    yield ErrorInput(SampleInput(ember.tensor(5.0), (0, _long([0, 0]))), RuntimeError,
                     r"Index to scalar can have only 1 value, got 2 value\(s\)")
    yield ErrorInput(SampleInput(ember.zeros(0, 3), (0, _long([0]))), RuntimeError,
                     "self indexing axis dim should be positive")
    yield ErrorInput(SampleInput(x, (2, _long([0]))), IndexError, "Dimension out of range")


# --- index_add, index_copy ----------------------------------------------------------------------

def _add_samples(dtype, requires_grad):
    for x, dim, index, name in _cases(dtype, requires_grad, unique=False):
        source = make(_sliced(x.shape, dim, index.numel()), dtype, requires_grad)
        yield SampleInput(x, (dim, index, source), name=name)
    x, dim, index, _ = next(_cases(dtype, requires_grad, unique=False))
    source = make(_sliced(x.shape, dim, index.numel()), dtype, requires_grad)
    yield SampleInput(x, (dim, index, source), {"alpha": 2}, name="alpha")
    if dtype.is_floating_point or dtype.is_complex:
        yield SampleInput(x.clone(), (dim, index, source), {"alpha": 0.5}, name="float alpha")
    if dtype.is_complex and not requires_grad:
        # PyTorch's gradient for a complex alpha lacks the conjugate: not compared
        yield SampleInput(x.clone(), (dim, index, source), {"alpha": 1 - 2j},
                          name="complex alpha")


def _add_ref(x, dim, index, source, alpha=1):
    out = np.array(x, copy=True)
    source = np.asarray(source)
    if out.ndim == 0:
        return out | source if out.dtype == np.bool_ else out + alpha * source
    for i, row in enumerate(np.asarray(index).reshape(-1)):
        part = np.take(source, i, axis=dim)
        key = _key(dim, row, out.ndim)
        out[key] = (out[key] | part) if out.dtype == np.bool_ else \
            out[key] + (alpha * part).astype(out.dtype)
    return out


def _add_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(x, (1, _long([[0, 0]]), ember.ones(2, 2))), IndexError,
                     r"index_add_\(\): Index is supposed to be a vector, but got dim: 2 with "
                     r"type: Long and size: \[1, 2\]")
    yield ErrorInput(SampleInput(x, (1, ember.tensor([0.0]), ember.ones(2, 1))), RuntimeError,
                     r"index_add_\(\): Expected dtype int32/int64 for index but got: Float")
    yield ErrorInput(SampleInput(x, (1, _long([0]), ember.ones(2, 1).double())), RuntimeError,
                     r"index_add_\(\): self \(Float\) and source \(Double\) must have the same "
                     r"scalar type")
    yield ErrorInput(SampleInput(x, (1, _long([0, 0]), ember.ones(2, 3))), RuntimeError,
                     r"Number of indices \(2\) should be equal to source.size\(dim\): \(3\), for "
                     r"dim: 1")
    yield ErrorInput(SampleInput(x, (1, _long([0, 0]), ember.ones(2))), RuntimeError,
                     "Indexing dim 1 is out of bounds of the source tensor with dim 1")
    yield ErrorInput(SampleInput(x, (1, _long([0, 0]), ember.ones(3, 2))), RuntimeError,
                     r"source tensor shape must match self tensor shape, excluding the specified "
                     r"dimension. Got self.shape = \[2, 3\] source.shape = \[3, 2\]")
    yield ErrorInput(SampleInput(x, (1, _long([0, 3]), ember.ones(2, 2))), RuntimeError,
                     "index 3 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(SampleInput(x, (1, _long([-1]), ember.ones(2, 1))), RuntimeError,
                     "index -1 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(SampleInput(x, (1, _long([0]), ember.ones(2, 1)), {"alpha": 1e300}),
                     RuntimeError, "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(x, (1, _long([0]), 1.0)), TypeError,
                     "must be Tensor, not float")


# --- index_reduce -------------------------------------------------------------------------------

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")
_REDUCE_GRAD_CASES = ("(5,)-d0", "(3, 4, 5)-d-1", "0-dim", "int32")     # keeps gradcheck fast


def _reduce_samples(dtype, requires_grad, grad_only=False):
    for reduce in _INDEX_REDUCTIONS:
        if (reduce == "mean" and dtype is ember.bool) or \
                (reduce in ("amax", "amin") and dtype in COMPLEX):
            continue
        bounds = (-3, 3) if reduce == "prod" else (None, None)
        for include_self in (True, False):
            for x, dim, index, name in _cases(dtype, requires_grad, unique=False):
                if grad_only and name not in _REDUCE_GRAD_CASES:
                    continue
                if (x.ndim <= 1 or not include_self) and (dtype is ember.bool or dtype in COMPLEX):
                    continue            # PyTorch's kernels for these lack the dtype (an error)
                if grad_only and not include_self and index.dtype is not LONG:
                    continue            # PyTorch's gradient takes no int32 index here
                source = make(_sliced(x.shape, dim, index.numel()), dtype, requires_grad,
                              low=bounds[0], high=bounds[1])
                x = make(x.shape, dtype, requires_grad, low=bounds[0], high=bounds[1])
                yield SampleInput(x, (dim, index, source, reduce),
                                  {"include_self": include_self},
                                  name=f"{name}-{reduce}-self{include_self}")
        if reduce == "prod" and (dtype.is_floating_point or dtype.is_complex):
            # zeros, where the gradient divides by nothing (one zero in a group, and two);
            # two rows: PyTorch's 16-bit prod fails on slices of one element
            x = ember.tensor([[2.0, 0.0, 1.5, -1.0], [1.0, 2.0, 0.0, 3.0]], dtype=dtype)
            source = ember.tensor([[0.0, 2.0, 3.0, 0.0, 1.5, 2.0],
                                   [1.0, 0.0, 0.0, 2.0, 1.5, 0.5]], dtype=dtype)
            for include_self in (True, False) if dtype not in COMPLEX else (True,):
                yield SampleInput(x.clone().requires_grad_(requires_grad),
                                  (1, _long([0, 0, 1, 2, 2, 2]),
                                   source.clone().requires_grad_(requires_grad), "prod"),
                                  {"include_self": include_self}, name=f"zeros-self{include_self}")


def _reduce_ref(x, dim, index, source, reduce, include_self=True):
    out = np.atleast_1d(np.array(x, copy=True))
    dim = dim % out.ndim
    index = np.asarray(index).reshape(-1)
    source = np.asarray(source).reshape(_sliced(out.shape, dim, index.size))
    for row in np.unique(index):
        key = _key(dim, row, out.ndim)
        parts = [np.take(source, i, axis=dim) for i in np.flatnonzero(index == row)]
        values = np.stack(([out[key]] if include_self else []) + parts)
        if reduce == "prod":
            out[key] = np.prod(values, axis=0, dtype=out.dtype)
        elif reduce == "mean":
            total = np.sum(values, axis=0, dtype=out.dtype)
            out[key] = total // len(values) if out.dtype.kind in "iu" else total / len(values)
        else:
            out[key] = (np.max if reduce == "amax" else np.min)(values, axis=0)
    return out.reshape(np.shape(x))


def _reduce_errors():
    x = ember.zeros(2, 3)
    ones = ember.ones(2, 2)
    yield ErrorInput(SampleInput(x, (1, _long([0, 2]), ones, "sum")), RuntimeError,
                     r"index_reduce\(\): Expected reduce to be one of prod, mean, amax or amin "
                     r"but got sum.")
    yield ErrorInput(SampleInput(x, (1, ember.tensor([[0.0, 1.0]]), ones, "prod")), IndexError,
                     r"index_reduce_\(\): Index is supposed to be a vector, but got dim: 2 with "
                     r"type: Float and size: \[1, 2\]")
    yield ErrorInput(SampleInput(x, (1, ember.tensor([0.0, 1.0]), ones, "prod")), RuntimeError,
                     r"index_reduce_\(\): Expected dtype int32/int64 for index but got: Float")
    yield ErrorInput(SampleInput(x, (1, _long([0, 2]), ones.double(), "mean")), RuntimeError,
                     r"index_reduce_\(\): self \(Float\) and source \(Double\) must have the "
                     r"same scalar type")
    yield ErrorInput(SampleInput(x, (1, _long([0, 0]), ember.ones(2), "amax")), RuntimeError,
                     r"index_reduce_\(\): Indexing dim 1 is out of bounds of the source tensor "
                     r"with dim 1")
    yield ErrorInput(SampleInput(x, (1, _long([0]), ones, "amin")), RuntimeError,
                     r"index_reduce_\(\): Number of indices \(1\) should be equal to "
                     r"source.size\(dim\): \(2\), for dim: 1")
    yield ErrorInput(SampleInput(x, (1, _long([0, 0]), ember.ones(3, 2), "prod")), RuntimeError,
                     r"source tensor shape must match self tensor shape, excluding the specified "
                     r"dimension. Got self.shape = \[2, 3\] source.shape = \[3, 2\]")
    yield ErrorInput(SampleInput(x, (1, _long([0, 3]), ones, "prod")), IndexError,
                     "index out of range in self")
    yield ErrorInput(SampleInput(x, (1, _long([-1, 0]), ones, "prod")), IndexError,
                     "index out of range in self")
    yield ErrorInput(SampleInput(ember.zeros(2, 0), (1, _long([0]), ember.ones(2, 1), "prod")),
                     IndexError, r"select\(\): index 0 out of range for tensor of size \[2, 0\] "
                     r"at dimension 1")
    yield ErrorInput(SampleInput(x.bool(), (1, _long([0, 1]), ones.bool(), "mean")),
                     NotImplementedError, "\"div_floor_cpu\" not implemented for 'Bool'")
    c = ember.complex64
    yield ErrorInput(SampleInput(x.to(c), (1, _long([0, 1]), ones.to(c), "amax")),
                     NotImplementedError, "\"maximum_cpu\" not implemented for 'ComplexFloat'")
    yield ErrorInput(SampleInput(x.to(c), (1, _long([0, 1]), ones.to(c), "amin")),
                     NotImplementedError, "\"minimum_cpu\" not implemented for 'ComplexFloat'")
    yield ErrorInput(SampleInput(x, (1, _long([0]), 1.0, "prod")), TypeError,
                     "must be Tensor, not float")
    for v in (ember.ones(3, dtype=ember.bool), ember.ones(3, dtype=c)):
        yield ErrorInput(SampleInput(v, (0, _long([0]), v[:1], "prod")), NotImplementedError,
                         f"\"index_func_\" not implemented for '{v.dtype._torch_name}'")
        m = v.reshape(3, 1)
        yield ErrorInput(SampleInput(m, (0, _long([0]), m[:1], "amax"), {"include_self": False}),
                         NotImplementedError, f"\"index_reduce_func_exclude_input_init\" not "
                         f"implemented for '{v.dtype._torch_name}'")


def _copy_samples(dtype, requires_grad):
    for x, dim, index, name in _cases(dtype, requires_grad, unique=True):
        source = make(_sliced(x.shape, dim, index.numel()), dtype, requires_grad)
        if index.dtype is LONG:
            yield SampleInput(x, (dim, index, source), name=name)
    yield SampleInput(make((3,), dtype, requires_grad), (0, _long([1]),
                                                         make((), dtype, requires_grad)),
                      name="0-dim source")


def _copy_ref(x, dim, index, source):
    out = np.array(x, copy=True)
    source = np.asarray(source)
    if out.ndim == 0:
        return source.reshape(()).astype(out.dtype)
    source = source.reshape(_sliced(out.shape, dim, np.size(index)))
    for i, row in enumerate(np.asarray(index).reshape(-1)):
        out[_key(dim, row, out.ndim)] = np.take(source, i, axis=dim)
    return out


def _copy_errors():
    x = ember.zeros(2, 3)
    ones = ember.ones(2, 2)
    yield ErrorInput(SampleInput(x, (1, _long([0, 2]).int(), ones)), RuntimeError,
                     r"index_copy_\(\): Expected a long tensor for index, but got Int")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 2]]), ones)), IndexError,
                     r"index_copy_\(\): Index should have dimension 1 or 0 \(got 2\)")
    yield ErrorInput(SampleInput(x, (1, _long([0, 2]), ones.double())), RuntimeError,
                     r"self and source expected to have the same dtype, but got \(self\) Float "
                     r"and \(source\) Double")
    yield ErrorInput(SampleInput(x, (1, _long([0, 2]), ember.ones(2))), IndexError,
                     r"Source dimensionality \(1\), destination dimensionality \(2\)")
    yield ErrorInput(SampleInput(x, (1, _long([0, 2]), ember.ones(2, 3))), IndexError,
                     r"Number of indices \(2\) should be equal to source.size\(dim\) \(3\)")
    yield ErrorInput(SampleInput(ember.zeros(2, 3, 4), (1, _long([0, 2]), ember.ones(2, 2, 5))),
                     RuntimeError, "Source/destination tensor must have same slice shapes. "
                     "Destination slice shape: 2 4 at dimension 1 and source slice shape: 2 5 at "
                     "dimension 0.")
    yield ErrorInput(SampleInput(x, (1, _long([0, -1]), ones)), IndexError,
                     r"index_copy_\(\): index -1 is out of bounds for dimension 1 with size 3")


# --- index_fill ---------------------------------------------------------------------------------

def _fill_samples(dtype, requires_grad):
    value = number_for(dtype)
    rng = np.random.default_rng(2)
    for x, dim, index, name in _cases(dtype, requires_grad, unique=False):
        if index.dtype is not LONG:
            continue
        if index.numel() and x.ndim:                 # negative indices count from the end
            size = x.shape[dim]
            index = index - _long(rng.integers(0, 2, index.shape) * size)
        yield SampleInput(x, (dim, index, value), name=name)
    x = make((3, 4), dtype, requires_grad, noncontiguous=True)
    yield SampleInput(x, (1, _long([0, 2, 2]), make((), dtype, requires_grad)),
                      name="tensor value")
    yield SampleInput(x.clone(), (0, _long([1]), make((), ember.float64, low=0, high=9)),
                      name="float64 value")


def _fill_ref(x, dim, index, value):
    out = np.array(x, copy=True)
    value = np.asarray(value).astype(out.dtype)
    if out.ndim == 0:
        return value.reshape(())
    out[_key(dim, np.asarray(index).reshape(-1), out.ndim)] = value
    return out


def _fill_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(x, (1, _long([0, 2]).int(), 1.0)), IndexError,
                     r"index_fill_\(\): Expected dtype int64 for index.")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 2]]), 1.0)), RuntimeError,
                     "Index has to be a vector/scalar")
    yield ErrorInput(SampleInput(x, (1, _long([0, 2]), ember.ones(1))), RuntimeError,
                     r"index_fill_ only supports a 0-dimensional value tensor, but got tensor "
                     r"with 1 dimension\(s\).")
    yield ErrorInput(SampleInput(x, (1, _long([0, 3]), 1.0)), IndexError,
                     "index 3 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(SampleInput(x, (1, _long([-4]), 1.0)), IndexError,
                     "index -4 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(SampleInput(x, (1, _long([0]), 1 + 2j)), RuntimeError,
                     r"index_fill_\(\): Converting complex Scalar to non-complex type is not "
                     r"supported")
    yield ErrorInput(SampleInput(x.to(ember.uint8), (1, _long([0]), 300)), RuntimeError,
                     "value cannot be converted to type uint8_t without overflow")


# --- take, put ----------------------------------------------------------------------------------

def _take_samples(dtype, requires_grad):
    rng = np.random.default_rng(0)
    yield SampleInput(make((3, 4), dtype, requires_grad), (_long([0, 11, -1, -12, 5, 5]),),
                      name="negative, repeats")
    yield SampleInput(make((2, 3, 4), dtype, requires_grad, noncontiguous=True),
                      (random_index(rng, (2, 5), 24),), name="2-D index")
    yield SampleInput(make((4, 3), dtype, requires_grad).t(), (_long([1, 2, 7]),),
                      name="transposed")
    yield SampleInput(make((3, 4), dtype, requires_grad), (_long(7),), name="0-dim index")
    yield SampleInput(make((), dtype, requires_grad), (_long([0, -1]),), name="0-dim input")
    yield SampleInput(make((0, 3), dtype, requires_grad), (_long([]),), name="empty")


def _take_ref(x, index):
    return np.asarray(x).reshape(-1)[np.asarray(index)]


def _take_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(x, (_long([1]).int(),)), RuntimeError,
                     r"take\(\): Expected a long tensor for index, but got Int")
    yield ErrorInput(SampleInput(x, (_long([6]),)), IndexError,
                     "out of range: tried to access index 6 on a tensor of 6 elements.")
    yield ErrorInput(SampleInput(x, (_long([-7]),)), IndexError,
                     "out of range: tried to access index -7 on a tensor of 6 elements.")
    yield ErrorInput(SampleInput(ember.zeros(0, 3), (_long([0]),)), IndexError,
                     r"take\(\): tried to take from an empty tensor")


def _put_samples(dtype, requires_grad):
    rng = np.random.default_rng(0)
    for accumulate in (False, True):
        unique = not accumulate
        index = _long([0, 11, -2, 5]) if unique else _long([0, 11, -1, -12, 5, 5])
        yield SampleInput(make((3, 4), dtype, requires_grad),
                          (index, make((index.numel(),), dtype, requires_grad), accumulate),
                          name=f"flat-acc{accumulate}")
        order = rng.permutation(24)[:6] if unique else rng.integers(0, 24, 6)
        yield SampleInput(make((2, 3, 4), dtype, requires_grad, noncontiguous=True),
                          (_long(order.reshape(2, 3)), make((3, 2), dtype, requires_grad),
                           accumulate), name=f"2-D-acc{accumulate}")
        yield SampleInput(make((4, 3), dtype, requires_grad).t(),
                          (_long([1, 2]), make((2,), dtype, requires_grad), accumulate),
                          name=f"transposed-acc{accumulate}")
        yield SampleInput(make((), dtype, requires_grad),
                          (_long([0]), make((), dtype, requires_grad), accumulate),
                          name=f"0-dim-acc{accumulate}")
        yield SampleInput(make((0, 3), dtype, requires_grad),
                          (_long([]), make((0,), dtype, requires_grad), accumulate),
                          name=f"empty-acc{accumulate}")
    yield SampleInput(make((3, 4), dtype, requires_grad),
                      (_long([2, 2]), make((2,), dtype, requires_grad)), {"accumulate": True},
                      name="accumulate=")


def _put_ref(x, index, source, accumulate=False):
    out = np.array(x, copy=True)
    flat = out.reshape(-1)
    index, source = np.asarray(index).reshape(-1), np.asarray(source).reshape(-1)
    if not accumulate:
        flat[index] = source
    elif out.dtype == np.bool_:
        np.logical_or.at(flat, index, source)
    else:
        np.add.at(flat, index, source)
    return flat.reshape(out.shape)


def _put_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(x, (_long([0]).int(), ember.ones(1))), RuntimeError,
                     r"put_\(\): Expected a long tensor for index, but got Int")
    yield ErrorInput(SampleInput(x, (_long([0]), ember.ones(1).double())), RuntimeError,
                     r"put_\(\): self and source expected to have the same dtype, but got "
                     r"self.dtype = Float and source.dtype = Double")
    yield ErrorInput(SampleInput(x, (_long([0, 1]), ember.ones(3))), IndexError,
                     r"put_\(\): Expected source and index to have the same number of elements, "
                     r"but got source.numel\(\) = 3, index.numel\(\) = 2")
    yield ErrorInput(SampleInput(x, (_long([6]), ember.ones(1))), IndexError,
                     "out of range: tried to access index 6 on a tensor of 6 elements.")
    yield ErrorInput(SampleInput(ember.zeros(0, 3), (_long([0]), ember.ones(1))), IndexError,
                     r"put_\(\): Tried to put elements into an empty tensor")
    yield ErrorInput(SampleInput(x, (_long([0]), 1.0)), TypeError, "must be Tensor, not float")


OPS = [
    OpInfo("index_select", _select_ref, _select_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_select_errors),
    # along a middle dim, 16-bit floats round after every addition (as in PyTorch), the
    # reference once
    OpInfo("index_add", _add_ref, _add_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_add_errors,
           tol={ember.float16: (1e-3, 1e-2), ember.bfloat16: (1.6e-2, 8e-2)}),
    # 16-bit floats round after every step (as in PyTorch), the reference once
    OpInfo("index_reduce", _reduce_ref, _reduce_samples, dtypes=ALL, gradgrad=True,
           grad_samples=lambda d, r: _reduce_samples(d, r, grad_only=True),
           error_inputs=_reduce_errors, skips=("grad_complex",),     # refused, as in PyTorch
           tol={ember.float16: (1e-3, 1e-2), ember.bfloat16: (1.6e-2, 8e-2)}),
    OpInfo("index_copy", _copy_ref, _copy_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_copy_errors),
    OpInfo("index_fill", _fill_ref, _fill_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_fill_errors),
    OpInfo("take", _take_ref, _take_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_take_errors),
    OpInfo("put", _put_ref, _put_samples, dtypes=ALL, gradgrad=True, error_inputs=_put_errors),
]
