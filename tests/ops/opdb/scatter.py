"""OpInfo entries for ember/ops/scatter.py and scatter_reduction.py: gather, scatter,
scatter_add, scatter_reduce, take_along_dim."""

from collections import defaultdict

import numpy as np

import ember
from tests.ops.opdb.core import ALL, COMPLEX, ErrorInput, OpInfo, SampleInput, make

LONG = ember.int64


def _long(values):
    return ember.tensor(values, dtype=LONG)


def random_index(rng, shape, size, dim=0, unique=False, dtype=LONG):
    """An index tensor of ``shape`` with entries in ``[0, size)``; ``unique``: no entry
    repeats along ``dim`` (for ops whose result is unspecified for repeats)."""
    if not shape:
        return ember.tensor(int(rng.integers(0, size)), dtype=dtype)
    if 0 in shape:
        return ember.zeros(shape, dtype=dtype)
    if not unique:
        return ember.tensor(rng.integers(0, size, shape), dtype=dtype)
    full = list(shape)
    full[dim] = size
    order = np.argsort(rng.random(full), axis=dim)
    return ember.tensor(np.take(order, range(shape[dim]), axis=dim), dtype=dtype)


def number_for(dtype):
    """A Python number that fits every dtype of its kind (``value`` arguments)."""
    if dtype is ember.bool:
        return True
    return 2.5 if dtype.is_floating_point or dtype.is_complex else 7


# (input shape, dim, index shape, src shape or None for index's, noncontiguous)
_GATHER_CASES = [
    ((5,), 0, (7,), False),
    ((3, 4, 5), 0, (2, 4, 3), False),
    ((3, 4, 5), 1, (2, 6, 5), True),
    ((3, 4, 5), 2, (3, 2, 4), False),
    ((3, 4, 5), -1, (1, 1, 7), False),
    ((), 0, (), False),
    ((), -1, (1,), False),
    ((3, 4), 1, (3, 0), False),
    ((0, 3), 1, (0, 2), False),
]


def _gather_samples(dtype, requires_grad):
    rng = np.random.default_rng(0)
    for shape, dim, ishape, nc in _GATHER_CASES:
        size = (shape or (1,))[dim]
        yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=nc),
                          (dim, random_index(rng, ishape, size)), name=f"{list(shape)}-d{dim}")
    index = random_index(rng, (2, 3), 4).t()                 # noncontiguous index
    yield SampleInput(make((3, 4), dtype, requires_grad), (1, index), name="nc index")
    yield SampleInput(make((4, 3), dtype, requires_grad),
                      (0, random_index(rng, (5, 3), 4, dtype=ember.int32)), name="int32")
    if not requires_grad:       # PyTorch's gradient would be a sparse tensor
        yield SampleInput(make((4, 3), dtype), (1, random_index(rng, (4, 2), 3)),
                          {"sparse_grad": True}, name="sparse_grad")


def _gather_ref(x, dim, index, sparse_grad=False):
    x1, i1 = np.atleast_1d(x), np.atleast_1d(index)
    out = np.empty(i1.shape, x1.dtype)
    for pos in np.ndindex(*i1.shape):
        at = list(pos)
        at[dim] = i1[pos]
        out[pos] = x1[tuple(at)]
    return out.reshape(np.shape(index))


def _gather_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(x, (1, ember.tensor([[0.0]]))), RuntimeError,
                     r"gather\(\): Expected dtype int32/int64 for index")
    yield ErrorInput(SampleInput(x, (1, _long([0]))), RuntimeError,
                     "Index tensor must have the same number of dimensions as input tensor")
    yield ErrorInput(SampleInput(x, (1, _long([[0], [0], [0]]))), RuntimeError,
                     r"Size does not match at dimension 0 expected index \[3, 1\] to be no "
                     r"larger than self \[2, 3\] apart from dimension 1")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 5]]))), RuntimeError,
                     "index 5 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(SampleInput(x, (0, _long([[0, -1]]))), RuntimeError,
                     "index -1 is out of bounds for dimension 0 with size 2")
    yield ErrorInput(SampleInput(x, (2, _long([[0]]))), IndexError,
                     r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)")


# --- scatter, scatter_add -----------------------------------------------------------------------

# (input shape, dim, index shape, src shape (None: index's), noncontiguous)
_SCATTER_CASES = [
    ((5,), 0, (3,), None, False),
    ((3, 4, 5), 0, (2, 4, 3), None, True),
    ((3, 4, 5), 1, (2, 3, 5), (3, 4, 5), False),           # src larger than index
    ((3, 4, 5), 2, (3, 2, 4), None, False),
    ((3, 4, 5), -1, (1, 4, 2), None, False),
    ((), 0, (), None, False),
    ((3, 4), 1, (3, 0), None, False),
    ((0, 3), 1, (0, 2), None, False),
]


def _src_samples(dtype, requires_grad, unique, grad_only=False, low=None, high=None):
    """(input, dim, index, src) samples: without ``unique``, the index is longer along dim
    than the input, so that entries repeat. ``grad_only`` skips srcs larger than the index,
    whose gradient PyTorch cannot compute."""
    rng = np.random.default_rng(0)
    for shape, dim, ishape, sshape, nc in _SCATTER_CASES:
        if grad_only and sshape is not None:
            continue
        size = (shape or (1,))[dim]
        axis = dim % len(ishape) if ishape else 0
        if not unique and ishape and ishape[axis]:
            ishape = tuple(n + size if d == axis else n for d, n in enumerate(ishape))
        src_shape = ishape if sshape is None else tuple(map(max, sshape, ishape))
        yield SampleInput(make(shape, dtype, requires_grad, noncontiguous=nc, low=low,
                               high=high),
                          (dim, random_index(rng, ishape, size, axis, unique=unique),
                           make(src_shape, dtype, requires_grad, noncontiguous=nc, low=low,
                                high=high)),
                          name=f"{list(shape)}-d{dim}")
    index = random_index(rng, (3, 2), 4, 1, unique=unique, dtype=ember.int32)
    yield SampleInput(make((3, 4), dtype, requires_grad, low=low, high=high),
                      (1, index, make((3, 2), dtype, requires_grad, low=low, high=high)),
                      name="int32")


def _scatter_samples(dtype, requires_grad, grad_only=False):
    yield from _src_samples(dtype, requires_grad, unique=True, grad_only=grad_only)
    rng = np.random.default_rng(1)
    value = number_for(dtype)
    index = random_index(rng, (3, 2), 4, 1, unique=True)
    yield SampleInput(make((3, 4), dtype, requires_grad), (1, index, value), name="value")
    yield SampleInput(make((3, 4), dtype, requires_grad), (1, index), {"value": value},
                      name="value=")
    yield SampleInput(make((), dtype, requires_grad), (0, _long(0), value), name="0-dim value")
    if grad_only:
        return
    repeats = random_index(rng, (2, 6), 4, 1)
    for reduce in ("add", "multiply"):
        yield SampleInput(make((2, 4), dtype, requires_grad, low=-3, high=3),
                          (1, repeats, value), {"reduce": reduce}, name=f"value-{reduce}")


def _combine(a, b, how):
    if a.dtype == np.bool_:
        return (a | b) if how in ("add", "sum", "amax") else (a & b)
    if how in ("add", "sum", "mean"):
        return a + b
    if how in ("multiply", "prod"):
        return a * b
    return np.maximum(a, b) if how == "amax" else np.minimum(a, b)


def _scatter_ref(x, dim, index, src=None, value=None, reduce=None):
    out = np.atleast_1d(np.array(x, copy=True))
    i1 = np.atleast_1d(index)
    tensor = isinstance(src, np.ndarray)
    s1 = np.atleast_1d(src) if tensor else None
    number = np.asarray(src if value is None else value).astype(out.dtype)
    for pos in np.ndindex(*i1.shape):
        at = list(pos)
        at[dim] = i1[pos]
        at = tuple(at)
        v = s1[pos] if tensor else number
        out[at] = v if reduce is None else _combine(out[at], v, reduce)
    return out.reshape(np.shape(x))


def _scatter_errors():
    x = ember.zeros(2, 3)
    ones = ember.ones(1, 2)
    yield ErrorInput(SampleInput(x, (1, ember.tensor([[0.0]]), ones)), RuntimeError,
                     r"scatter\(\): Expected dtype int32/int64 for index")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 1]]), ones.double())), RuntimeError,
                     r"scatter\(\): Expected self.dtype to be equal to src.dtype")
    yield ErrorInput(SampleInput(x, (1, _long([0, 1]), 2.0)), RuntimeError,
                     "Index tensor must have the same number of dimensions as self tensor")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 1]]), ember.tensor(2.0))), RuntimeError,
                     "Index tensor must have the same number of dimensions as src tensor")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 1]]), ember.ones(1, 1))), RuntimeError,
                     r"Expected index \[1, 2\] to be no larger than self \[2, 3\] apart from "
                     r"dimension 1 and to be no larger size than src \[1, 1\]")
    yield ErrorInput(SampleInput(x, (1, _long([[0], [1], [2]]), 2.0)), RuntimeError,
                     r"Expected index \[3, 1\] to be no larger than self \[2, 3\] apart from "
                     r"dimension 1$")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 3]]), ones)), RuntimeError,
                     "index 3 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(SampleInput(x, (1, _long([[0, -1]]), 2.0)), RuntimeError,
                     "index -1 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 1]]), 2.0), {"reduce": "mean"}),
                     RuntimeError, "reduce argument must be either add or multiply.")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 1]]), 1e300)), RuntimeError,
                     "value cannot be converted to type float without overflow")
    yield ErrorInput(SampleInput(x.to(ember.uint8), (1, _long([[0, 1]]), 256)), RuntimeError,
                     "value cannot be converted to type uint8_t without overflow")
    yield ErrorInput(SampleInput(x, (2, _long([[0]]), 2.0)), IndexError,
                     "Dimension out of range")


def _scatter_add_samples(dtype, requires_grad, grad_only=False):
    yield from _src_samples(dtype, requires_grad, unique=False, grad_only=grad_only)
    # a 0-dim input counts as one element along dim 0: repeats add up
    yield SampleInput(make((), dtype, requires_grad), (0, _long([0, 0]),
                                                       make((2,), dtype, requires_grad)),
                      name="0-dim input")


def _scatter_add_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(x, (1, _long([[0, 0]]), ember.ones(1, 2).double())),
                     RuntimeError, r"scatter\(\): Expected self.dtype to be equal to src.dtype")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 5]]), ember.ones(1, 2))), RuntimeError,
                     "index 5 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(SampleInput(x, (1, _long([[0], [1], [2]]), ember.ones(3, 4))),
                     RuntimeError, r"Expected index \[3, 1\] to be no larger than self")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 0]]), 2.0)), TypeError,
                     "must be Tensor, not float")


# --- scatter_reduce -----------------------------------------------------------------------------

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_REDUCE_GRAD_CASES = ("[5]-d0", "[3, 4, 5]-d-1", "[]-d0", "[0, 3]-d1")     # keeps gradcheck fast


def _reduce_samples(dtype, requires_grad, grad_only=False):
    for reduce in _REDUCTIONS:
        if (reduce == "mean" and dtype is ember.bool) or \
                (reduce in ("amax", "amin") and dtype in COMPLEX):
            continue
        bounds = (-3, 3) if reduce == "prod" else (None, None)
        for include_self in (True, False):
            kwargs = {"include_self": include_self}
            for s in _src_samples(dtype, requires_grad, unique=False, grad_only=grad_only,
                                  low=bounds[0], high=bounds[1]):
                if (include_self is False and s.name == "int32") or \
                        (grad_only and s.name not in _REDUCE_GRAD_CASES):
                    continue
                yield SampleInput(s.input, s.args + (reduce,), kwargs,
                                  name=f"{s.name}-{reduce}-self{include_self}")
            yield from _special_reduce_samples(dtype, requires_grad, reduce, include_self,
                                               grad_only)


def _special_reduce_samples(dtype, requires_grad, reduce, include_self, grad_only):
    """Ties (amax, amin) and zeros (prod), where the gradients need care."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return
    kwargs = {"include_self": include_self}
    index = _long([[0, 0, 1, 2, 2, 2]])
    if reduce in ("amax", "amin"):
        # two-way ties only (central differences see half the gradient on each of a pair);
        # over 12 elements, so that gradgradcheck skips it: the gradient jumps at a tie
        src = ember.tensor([[3.0, 3.0, -2.0, 1.0, -1.0, 5.0] + [-5.0 - i for i in range(8)]],
                           dtype=dtype)
        x = ember.tensor([[1.0, -2.0, 5.0, 0.5]] if include_self else
                         [[0.25, 0.5, 0.75, 0.5]], dtype=dtype)
        if reduce == "amin":
            src, x = -src, -x
        yield SampleInput(x.requires_grad_(requires_grad),
                          (1, _long([[0, 0, 1, 2, 2, 2] + [3] * 8]),
                           src.requires_grad_(requires_grad), reduce), kwargs, name="ties")
    if reduce == "prod":
        src = ember.tensor([[0.0, 2.0, 3.0, 0.0, 1.5, 2.0]], dtype=dtype)
        x = ember.tensor([[2.0, 0.0, 1.5, -1.0]], dtype=dtype)
        yield SampleInput(x.requires_grad_(requires_grad), (1, index,
                                                            src.requires_grad_(requires_grad),
                                                            reduce), kwargs, name="zeros")
        if not grad_only:       # two zeros in one group: PyTorch has no second derivative
            src = ember.tensor([[0.0, 0.0, 3.0, 0.0, 1.5, 0.0]], dtype=dtype)
            yield SampleInput(x.clone(), (1, index, src, reduce), kwargs, name="two zeros")


def _reduce_ref(x, dim, index, src, reduce, include_self=True):
    out = np.atleast_1d(np.array(x, copy=True))
    i1, s1 = np.atleast_1d(index), np.atleast_1d(src)
    groups = defaultdict(list)
    for pos in np.ndindex(*i1.shape):
        at = list(pos)
        at[dim] = i1[pos]
        groups[tuple(at)].append(s1[pos])
    for at, values in groups.items():
        values = ([out[at]] if include_self else []) + values
        acc = values[0]
        for v in values[1:]:
            acc = _combine(acc, v, reduce)
        if reduce == "mean":
            acc = acc // len(values) if out.dtype.kind in "iu" else acc / len(values)
        out[at] = acc
    return out.reshape(np.shape(x))


def _reduce_errors():
    x = ember.zeros(2, 3)
    ones = ember.ones(1, 2)
    yield ErrorInput(SampleInput(x, (1, _long([[0, 0]]), ones, "add")), RuntimeError,
                     "reduce argument must be either sum, prod, mean, amax or amin, got add")
    yield ErrorInput(SampleInput(x, (1, ember.tensor([[0.0]]), ones, "sum")), RuntimeError,
                     r"scatter\(\): Expected dtype int32/int64 for index")
    yield ErrorInput(SampleInput(x, (1, _long([[0, 0]]), ones.double(), "amax")), RuntimeError,
                     r"scatter\(\): Expected self.dtype to be equal to src.dtype")
    yield ErrorInput(SampleInput(x.bool(), (1, _long([[0, 0]]), ones.bool(), "mean")),
                     NotImplementedError, "\"scatter_gather_tensor_cpu_reduce_mean\" not "
                     "implemented for 'Bool'")
    yield ErrorInput(SampleInput(x.to(ember.complex64), (1, _long([[0]]),
                                                         ones.to(ember.complex64), "amin")),
                     NotImplementedError, "not implemented for 'ComplexFloat'")
    yield ErrorInput(SampleInput(x, (1, _long([[0, -1]]), ones, "prod")), RuntimeError,
                     "index -1 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(SampleInput(x, (1, _long([[0], [1], [2]]), ember.ones(3, 1), "sum")),
                     RuntimeError, r"Expected index \[3, 1\] to be no larger than self")


# --- take_along_dim -----------------------------------------------------------------------------

def _take_along_samples(dtype, requires_grad):
    rng = np.random.default_rng(0)
    m = make
    yield SampleInput(m((3, 4), dtype, requires_grad), (random_index(rng, (3, 6), 4), 1),
                      name="same shape")
    yield SampleInput(m((2, 1, 3), dtype, requires_grad),
                      (random_index(rng, (1, 2, 3), 2), 0), name="both broadcast")
    yield SampleInput(m((2, 5, 3), dtype, requires_grad, noncontiguous=True),
                      (random_index(rng, (1, 4, 1), 5), -2), name="index broadcasts")
    yield SampleInput(m((3, 4), dtype, requires_grad), (_long([[0, -1, -4, 3]]), 1),
                      name="negative")
    yield SampleInput(m((3, 4), dtype, requires_grad), (random_index(rng, (2, 5), 12),),
                      name="flat")
    yield SampleInput(m((), dtype, requires_grad), (_long([0, 0]),), name="0-dim flat")
    yield SampleInput(m((2, 0), dtype, requires_grad), (_long([[1]]), 0), name="empty")
    yield SampleInput(m((3, 4), dtype, requires_grad), (_long([[]]).reshape(1, 0), 1),
                      name="empty index")


def _take_along_ref(x, indices, dim=None):
    x = np.asarray(x)
    if dim is None:
        return x.reshape(-1)[np.asarray(indices).reshape(-1)]
    a = [1 if d == dim % x.ndim else n for d, n in enumerate(x.shape)]
    b = [1 if d == dim % x.ndim else n for d, n in enumerate(np.shape(indices))]
    common = list(np.broadcast_shapes(tuple(a), tuple(b)))
    sx, si = list(common), list(common)
    sx[dim], si[dim] = x.shape[dim], np.shape(indices)[dim]
    return np.take_along_axis(np.broadcast_to(x, sx), np.broadcast_to(indices, si), dim)


def _take_along_errors():
    x = ember.zeros(2, 3)
    yield ErrorInput(SampleInput(x, (ember.tensor([[0]], dtype=ember.int32), 1)), RuntimeError,
                     r"torch.take_along_dim\(\): dtype of indices should be Long but got Int")
    yield ErrorInput(SampleInput(x, (_long([0, 2]), 1)), RuntimeError,
                     r"input and indices should have the same number of dimensions, but got 2 "
                     r"dimensions for input, and 1 dimensions for indices")
    yield ErrorInput(SampleInput(x, (_long([[0, 2], [1, 1], [0, 0]]), 1)), RuntimeError,
                     r"The size of tensor a \(2\) must match the size of tensor b \(3\) at "
                     r"non-singleton dimension 0")
    yield ErrorInput(SampleInput(x, (_long([6]),)), RuntimeError,
                     "index 6 is out of bounds for dimension 0 with size 6")
    yield ErrorInput(SampleInput(ember.tensor(5.0), (_long(0), 0)), IndexError,
                     "Dimension specified as 0 but tensor has no dimensions")


OPS = [
    OpInfo("gather", _gather_ref, _gather_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_gather_errors),
    OpInfo("scatter", _scatter_ref, _scatter_samples, dtypes=ALL, gradgrad=True,
           grad_samples=lambda d, r: _scatter_samples(d, r, grad_only=True),
           error_inputs=_scatter_errors),
    OpInfo("scatter_add", lambda x, dim, index, src: _scatter_ref(x, dim, index, src,
                                                                  reduce="add"),
           _scatter_add_samples, dtypes=ALL, gradgrad=True,
           grad_samples=lambda d, r: _scatter_add_samples(d, r, grad_only=True),
           error_inputs=_scatter_add_errors),
    OpInfo("scatter_reduce", _reduce_ref, _reduce_samples, dtypes=ALL, gradgrad=True,
           grad_samples=lambda d, r: _reduce_samples(d, r, grad_only=True),
           error_inputs=_reduce_errors, skips=("grad_complex",)),  # refused, as in PyTorch
    OpInfo("take_along_dim", _take_along_ref, _take_along_samples, dtypes=ALL, gradgrad=True,
           error_inputs=_take_along_errors),
]
