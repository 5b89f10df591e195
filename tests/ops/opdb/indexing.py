"""OpInfo entries for ember/ops/indexing.py (subscript behaviour: tests/ops/test_indexing.py)."""

import numpy as np

import ember
from tests.ops.opdb.core import ALL, ErrorInput, OpInfo, SampleInput, make

_ = slice(None)

# (input shape, key, noncontiguous) per view op; each op's name is its key's last real step
_BASIC_KEYS = {
    "select": [((3, 4), (1,), False), ((2, 3, 4), (_, -1), False), ((3,), (0,), False),
               ((3, 4), (slice(1, 3), 2), True), ((0, 3), (_, 1), False),
               ((2, 3), (None, 1), False)],
    "slice": [((5,), (slice(1, 4),), False), ((4, 6), (slice(None, None, 2), slice(1, None, 3)),
                                                True),
              ((3, 4), (1, slice(0, 2)), False), ((0, 3), (slice(1, 2),), False),
              ((2, 3), (None, slice(3, 1)), False), ((3,), (slice(-10, 10),), False)],
    "unsqueeze": [((3,), (None,), False), ((), (None, None), False), ((2, 3), (0, None), True),
                  ((0,), (_, None), False)],
    "alias": [((3, 4), (_,), False), ((), (), False), ((0,), (_,), False),
              ((3, 4), (_, _), True)],
}


def _explicit(key):
    return key if any(k is Ellipsis for k in key) else key + (Ellipsis,)


def _basic_samples(kind):
    def samples(dtype, requires_grad):
        for shape, key, nc in _BASIC_KEYS[kind]:
            yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=nc), (key,),
                              name=f"{list(shape)}[{key}]")
    return samples


def _slice_backward_samples(dtype, requires_grad):
    for shape, key, nc in (((3, 4), (1,), False), ((4, 6), (slice(None, None, 2), 1), False),
                           ((2, 3), (None, slice(1, 3)), True), ((), (None,), False),
                           ((0, 3), (_, 2), False)):
        region = np.zeros(shape)[_explicit(key)].shape
        yield SampleInput(make(region, dtype, requires_grad, noncontiguous=nc and region != ()),
                          (shape, key), name=f"{list(shape)}[{key}]")


def _slice_backward_ref(grad, shape, key):
    out = np.zeros(shape, dtype=np.asarray(grad).dtype)
    out[_explicit(key)] = grad
    return out


def _slice_backward_torch(grad, shape, key):
    out = grad.new_zeros(shape)
    out[_explicit(key)] = grad
    return out


# --- advanced indexing ---------------------------------------------------------------------------

def _long(values):
    return ember.tensor(values, dtype=ember.int64)


def _index_cases():
    """(input shape, indices, noncontiguous): ints, int32, masks, None, broadcasting."""
    mask = ember.tensor([[True, False, True, False], [False, False, True, True],
                         [True, True, False, False]])
    return [
        ((5,), (_long([0, 4, -2, 2]),), False),
        ((3, 4), (_long([2, 0, 2]),), True),                  # duplicates
        ((3, 4), (None, ember.tensor([3, 1], dtype=ember.int32)), False),
        ((3, 4, 2), (_long([[0], [2]]), _long([1, 3, 0])), False),     # broadcast indices
        ((3, 4, 2), (_long([0, 2]), None, _long([1, 0])), False),       # not adjacent: first
        ((3, 4), (mask,), True),
        ((3, 4, 2), (mask,), False),
        ((3, 4), (ember.tensor([True, False, True]),), False),
        ((3, 4), (None, _long([])), False),
        ((0, 3), (None, _long([2, 0])), False),
    ]


def _index_samples(dtype, requires_grad):
    for shape, indices, nc in _index_cases():
        yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=nc), (indices,),
                          name=f"{list(shape)}")


def _numpy_key(indices):
    return tuple(_ if i is None else np.asarray(i) for i in indices)


def _index_ref(x, indices):
    return np.asarray(x)[_numpy_key(indices)]


def _index_torch(x, indices):
    # a None in ``indices`` skips a dim (as in aten::index); in a subscript it would add one
    return x[tuple(_ if i is None else i for i in indices)]


def _index_errors():
    x = ember.zeros(3, 4)
    yield ErrorInput(SampleInput(x, ((ember.tensor([0.0]),),)), IndexError,
                     "tensors used as indices must be long, int, byte or bool tensors")
    yield ErrorInput(SampleInput(x, ((ember.tensor([0], dtype=ember.int16),),)), IndexError,
                     "tensors used as indices must be long, int, byte or bool tensors")
    yield ErrorInput(SampleInput(x, ((_long([1, 3]),),)), IndexError,
                     r"index 3 is out of bounds for dimension 0 with size 3")
    yield ErrorInput(SampleInput(x, ((_long([0]), _long([-5])),)), IndexError,
                     r"index -5 is out of bounds for dimension 1 with size 4")
    yield ErrorInput(SampleInput(x, ((None, ember.tensor([True, False, True])),)), IndexError,
                     r"The shape of the mask \[3\] at index 0 does not match the shape of the "
                     r"indexed tensor \[3, 4\] at index 1")
    yield ErrorInput(SampleInput(x, ((_long([0]), _long([0]), _long([0])),)), IndexError,
                     r"too many indices for tensor of dimension 2")


# --- index_put -----------------------------------------------------------------------------------

def _index_put_cases():
    """_index_cases without None (index_put takes Tensors only), and the same index kinds."""
    return [c for c in _index_cases() if None not in c[1]] + [
        ((3, 4), (ember.tensor([2, 1], dtype=ember.int32),), False),
        ((3, 4), (_long([]),), False),
        ((3, 0), (_long([2, 0]),), False),
    ]


def _index_put_samples(dtype, requires_grad):
    for i, (shape, indices, nc) in enumerate(_index_put_cases()):
        region = np.zeros(shape)[_numpy_key(indices)].shape
        duplicates = i == 1
        if i % 2 and region:        # values broadcast along the leading dim
            region = (1,) + region[1:]
        for accumulate in ((True,) if duplicates else (False, True)):
            yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=nc),
                              (indices, make(region, dtype, requires_grad), accumulate),
                              name=f"{list(shape)}-acc{accumulate}")
    yield SampleInput(make((3, 4), dtype, requires_grad), ((_long([1, 2]),),
                                                          make((), dtype, requires_grad)),
                      name="0-dim values")


def _index_put_ref(x, indices, values, accumulate=False):
    out = np.array(x, copy=True)
    key = _numpy_key(indices)
    if accumulate:
        np.add.at(out, key, values)
    else:
        out[key] = values
    return out


def _index_put_errors():
    x = ember.zeros(3, 4)
    yield ErrorInput(SampleInput(x, ((_long([0]),), ember.ones(4, dtype=ember.float64))),
                     RuntimeError, "Index put requires the source and destination dtypes "
                     "match, got Float for the destination and Double for the source.")
    yield ErrorInput(SampleInput(x, ((_long([0, 1]),), ember.ones(3))), RuntimeError,
                     r"shape mismatch: value tensor of shape \[3\] cannot be broadcast to "
                     r"indexing result of shape \[2, 4\]")
    yield ErrorInput(SampleInput(x, ((_long([0]),), ember.ones(1, 1, 4))), RuntimeError,
                     r"value tensor of shape \[1, 1, 4\] cannot be broadcast")
    yield ErrorInput(SampleInput(x, ((_long([5]),), ember.ones(())), {"accumulate": True}),
                     IndexError, "index 5 is out of bounds for dimension 0 with size 3")
    yield ErrorInput(SampleInput(x, ((_long([0]),), 1.0)), TypeError,
                     "argument 'values' .* must be Tensor, not float")
    # None skips a dim only inside a subscript (x[:, idx] = v)
    yield ErrorInput(SampleInput(x, ((None, _long([0])), ember.ones(()))), TypeError,
                     "expected Tensor as element 0 in argument 1, but got NoneType")


# --- masked_fill ---------------------------------------------------------------------------------

def _fill_value(dtype):
    if dtype is ember.bool:
        return True
    return 2.5 if dtype.is_floating_point or dtype.is_complex else 7


def _masked_fill_samples(dtype, requires_grad):
    mask = ember.tensor([[True, False, True], [False, False, True]])
    value = _fill_value(dtype)
    yield SampleInput(make((2, 3), dtype, requires_grad), (mask, value), name="number")
    yield SampleInput(make((2, 3), dtype, requires_grad, noncontiguous=True),
                      (mask, make((), dtype, requires_grad)), name="0-dim tensor value")
    yield SampleInput(make((4, 2, 3), dtype, requires_grad), (mask, value),
                      name="mask broadcasts")
    yield SampleInput(make((3,), dtype, requires_grad), (mask, make((), dtype, requires_grad)),
                      name="input broadcasts")
    yield SampleInput(make((), dtype, requires_grad), (ember.tensor(True), value), name="0-dim")
    yield SampleInput(make((0, 3), dtype, requires_grad), (mask[0], value), name="empty")


def _masked_fill_ref(x, mask, value):
    x = np.asarray(x)
    return np.where(mask, np.asarray(value).astype(x.dtype), x)


def _masked_fill_errors():
    x = ember.zeros(2, 3)
    mask = ember.tensor([True, False, True])
    yield ErrorInput(SampleInput(x, (mask.float(), 1.0)), RuntimeError,
                     "masked_fill_ only supports boolean masks, but got mask with dtype float")
    yield ErrorInput(SampleInput(x, (mask.to(ember.uint8), 1.0)), RuntimeError,
                     "but got mask with dtype unsigned char")
    yield ErrorInput(SampleInput(x, (mask, ember.ones(1))), RuntimeError,
                     r"masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                     r"with 1 dimension\(s\).")
    yield ErrorInput(SampleInput(x, (ember.ones(4, dtype=ember.bool), 1.0)), RuntimeError,
                     r"The size of tensor a \(4\) must match the size of tensor b \(3\) at "
                     r"non-singleton dimension 1")
    yield ErrorInput(SampleInput(x, (mask, 1e300)), RuntimeError,
                     "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(x, (mask, 1 + 2j)), RuntimeError,
                     "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(x.to(ember.uint8), (mask, 300)), RuntimeError,
                     "value cannot be converted to type uint8_t without overflow")


# --- fill_diagonal_ ------------------------------------------------------------------------------

def _fill_diagonal_ref(x, value, wrap=False):
    out = np.array(x, copy=True)
    value = np.asarray(value).astype(out.dtype)
    if out.ndim == 2 and wrap and out.shape[0] > out.shape[1]:
        rows = np.arange(out.shape[0])
        cols = rows % (out.shape[1] + 1)
        out[rows[cols < out.shape[1]], cols[cols < out.shape[1]]] = value
    else:
        out[(np.arange(min(out.shape)),) * out.ndim] = value
    return out


def _fill_diagonal_samples(dtype, requires_grad):
    value = _fill_value(dtype)
    for shape in ((3, 3), (2, 5), (5, 2), (2, 2, 2), (0, 3), (1, 1)):
        yield SampleInput(make(shape, dtype, requires_grad), (value,), name=f"{list(shape)}")
    for rows in (7, 8, 3):
        yield SampleInput(make((rows, 3), dtype, requires_grad), (value,), {"wrap": True},
                          name=f"wrap_{rows}_rows")
    yield SampleInput(make((3, 7), dtype, requires_grad).t(), (value, True),
                      name="wrap_transposed")
    yield SampleInput(make((4, 6), dtype, requires_grad, noncontiguous=True),
                      (make((), dtype),), name="0-dim tensor value")
    if not (dtype.is_floating_point or dtype.is_complex or dtype is ember.bool):
        yield SampleInput(make((2, 3), dtype), (2.7,), name="truncated float")


def _fill_diagonal_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(ember.zeros(3), (1,)), RuntimeError,
                     "dimensions must larger than 1")
    yield ErrorInput(SampleInput(ember.zeros(()), (1,)), RuntimeError,
                     "dimensions must larger than 1")
    yield ErrorInput(SampleInput(ember.zeros(2, 2, 3), (1,)), RuntimeError,
                     "all dimensions of input must be of equal length")
    yield ErrorInput(SampleInput(x, (ember.ones(1),)), TypeError,
                     r"fill_diagonal_\(\): argument 'fill_value' \(position 1\) must be Number, "
                     r"not Tensor")
    yield ErrorInput(SampleInput(x, (None,)), TypeError, "must be Number, not NoneType")
    yield ErrorInput(SampleInput(x, (1e300,)), RuntimeError,
                     "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(x, (1j,)), RuntimeError,
                     "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(x.half(), (1e6,)), RuntimeError,
                     "value cannot be converted to type c10::Half without overflow")
    yield ErrorInput(SampleInput(x.to(ember.int8), (200,)), RuntimeError,
                     "value cannot be converted to type int8_t without overflow")


def _fill_diagonal_torch(x, value, wrap=False):
    return x.clone().fill_diagonal_(value, wrap)


# --- masked_select, masked_scatter --------------------------------------------------------------

def _mask(shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).random(shape) < 0.5)


# (input shape, mask shape, noncontiguous): input and mask broadcast against each other
_MASKED_CASES = [((2, 3), (2, 3), False), ((4, 2, 3), (2, 3), True), ((3,), (2, 3), False),
                 ((2, 1), (1, 3), False), ((), (), False), ((2, 3), (), False),
                 ((0, 3), (3,), False)]


def _masked_select_samples(dtype, requires_grad):
    for i, (shape, mshape, nc) in enumerate(_MASKED_CASES):
        yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=nc),
                          (_mask(mshape, i),), name=f"{list(shape)}x{list(mshape)}")


def _masked_select_ref(x, mask):
    shape = np.broadcast_shapes(np.shape(x), np.shape(mask))
    return np.broadcast_to(x, shape)[np.broadcast_to(mask, shape)]


def _masked_select_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(x, (ember.ones(2, 3, dtype=ember.uint8),)), RuntimeError,
                     "masked_select: expected BoolTensor for mask")
    yield ErrorInput(SampleInput(x, (ember.tensor([True, False]),)), RuntimeError,
                     r"The size of tensor a \(2\) must match the size of tensor b \(3\) at "
                     r"non-singleton dimension 1")


def _masked_scatter_samples(dtype, requires_grad):
    for i, (shape, mshape, nc) in enumerate(_MASKED_CASES):
        n = int(np.prod(np.broadcast_shapes(shape, mshape)))
        yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=nc),
                          (_mask(mshape, i), make((n + 2,), dtype, requires_grad)),
                          name=f"{list(shape)}x{list(mshape)}")
    yield SampleInput(make((2, 3), dtype, requires_grad),
                      (_mask((2, 3), 9), make((2, 5), dtype, requires_grad)), name="2-D source")


def _masked_scatter_ref(x, mask, source):
    shape = np.broadcast_shapes(np.shape(x), np.shape(mask))
    out = np.array(np.broadcast_to(x, shape))
    where = np.broadcast_to(mask, shape)
    out[where] = np.asarray(source).reshape(-1)[:int(where.sum())]
    return out


def _masked_scatter_errors():
    x = ember.zeros(2, 3)
    mask = ember.tensor([True, False, True])
    yield ErrorInput(SampleInput(x, (mask.float(), ember.ones(6))), RuntimeError,
                     "masked_scatter_ only supports boolean masks, but got mask with dtype Float")
    yield ErrorInput(SampleInput(x, (mask, ember.ones(6).double())), RuntimeError,
                     "masked_scatter: expected self and source to have same dtypes but "
                     "gotFloat and Double")
    yield ErrorInput(SampleInput(x, (mask, ember.ones(3))), RuntimeError,
                     "Number of elements of source < number of ones in mask")
    yield ErrorInput(SampleInput(x, (ember.tensor([True, False]), ember.ones(6))), RuntimeError,
                     r"The size of tensor a \(2\) must match the size of tensor b \(3\)")
    yield ErrorInput(SampleInput(x, (mask, 1.0)), TypeError, "must be Tensor, not float")


# --- nonzero, argwhere ---------------------------------------------------------------------------

def _nonzero_samples(dtype, requires_grad):
    """About a third of the values are zeros. (as_tuple=True is where(condition)'s form,
    tested with where: PyTorch rejects out= for it, which an op cannot see.)"""
    for shape, nc in (((5,), False), ((3, 4), True), ((2, 3, 4), False), ((), False),
                      ((0, 3), False)):
        full = shape[:-1] + (2 * shape[-1],) if nc else shape
        x = make(full, ember.int64, low=-1, high=2).to(dtype)
        yield SampleInput(x[..., ::2] if nc else x, name=f"{list(shape)}")
    yield SampleInput(ember.zeros((), dtype=dtype), name="0-dim zero")


def _nonzero_errors():
    yield ErrorInput(SampleInput(ember.ones(3), kwargs={"as_tuple": None}), TypeError,
                     r"nonzero\(\): argument 'as_tuple' must be bool, not NoneType")


def _nonzero_static_samples(dtype, requires_grad):
    """Cut short, padded with the default and with a given fill, and exactly the count."""
    for i, sample in enumerate(_nonzero_samples(dtype, requires_grad)):
        x = sample.input
        count = int((x != 0).sum())
        for size, fill in ((count + 2, -1), (max(count - 1, 0), -1), (count, 7), (3, -5)):
            kwargs = {"size": size} if fill == -1 else {"size": size, "fill_value": fill}
            yield SampleInput(x, kwargs=kwargs, name=f"{sample.name} size={size} fill={fill}")


def _nonzero_static_ref(x, size, fill_value=-1):
    found = np.argwhere(np.asarray(x))[:size].astype(np.int64)
    pad = np.full((size - found.shape[0], np.ndim(x)), fill_value, dtype=np.int64)
    return np.concatenate([found, pad])


def _nonzero_static_errors():
    x = ember.ones(2, 3)
    yield ErrorInput(SampleInput(x, kwargs={"size": -1}), RuntimeError,
                     "nonzero_static: 'size' must be an non-negative integer")
    yield ErrorInput(SampleInput(x, kwargs={"size": 1.5}), TypeError,
                     r"nonzero_static\(\): argument 'size' must be int, not float")
    yield ErrorInput(SampleInput(x, kwargs={"size": 2, "fill_value": 0.5}), TypeError,
                     r"nonzero_static\(\): argument 'fill_value' must be int, not float")
    for dtype, name in ((ember.int32, "Int"), (ember.float32, "Float")):
        yield ErrorInput(SampleInput(x, kwargs={"size": 2, "out": ember.empty(2, 2, dtype=dtype)}),
                         RuntimeError, "nonzero_static: Expected out tensor to have scalar type "
                         f"Long but got scalar type{name}$")


OPS = [
    *(OpInfo(f"_getitem_{kind}", lambda x, key: np.asarray(x)[_explicit(key)],
             _basic_samples(kind), dtypes=ALL, gradgrad=True, torch_name="__getitem__")
      for kind in _BASIC_KEYS),
    OpInfo("_slice_backward", _slice_backward_ref, _slice_backward_samples, dtypes=ALL,
           gradgrad=True, torch_op=_slice_backward_torch),
    OpInfo("_index", _index_ref, _index_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_index_errors, torch_op=_index_torch),
    OpInfo("index_put", _index_put_ref, _index_put_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_index_put_errors),
    OpInfo("masked_fill", _masked_fill_ref, _masked_fill_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_masked_fill_errors),
    OpInfo("fill_diagonal_", _fill_diagonal_ref, _fill_diagonal_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_fill_diagonal_errors, torch_op=_fill_diagonal_torch),
    OpInfo("masked_select", _masked_select_ref, _masked_select_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_masked_select_errors),
    OpInfo("masked_scatter", _masked_scatter_ref, _masked_scatter_samples, dtypes=ALL,
           gradgrad=True, error_inputs=_masked_scatter_errors),
    OpInfo("nonzero", np.argwhere, _nonzero_samples, dtypes=ALL, result_dtype="int64",
           grad=False, error_inputs=_nonzero_errors),
    OpInfo("argwhere", np.argwhere, _nonzero_samples, dtypes=ALL, result_dtype="int64",
           grad=False),
    OpInfo("nonzero_static", _nonzero_static_ref, _nonzero_static_samples, dtypes=ALL,
           result_dtype="int64", grad=False, error_inputs=_nonzero_static_errors),
]
