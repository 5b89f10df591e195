"""Tensor contractions: tensordot, inner, vdot, kron, linalg.vecdot, linalg.multi_dot and
the deprecated chain_matmul.

Like the matrix products of ops/linalg.py, the contractions that run a GEMM require one
dtype for both operands (no promotion), refuse bool, and compute 16-bit floats in float32.
"""

import math
import warnings

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember.ops._dims import wrap_dim
from ember.ops._elementwise import conj_grad
from ember.ops._promotion import Policy
from ember.ops._registry import broadcast_message, op
from ember.ops.indexing import CTYPE
from ember.ops.linalg import _check_dot, _h, matrix_product
from ember._warn import user_level

_LOW = D.LOW_PRECISION_NP


def _same_dtype(d, name, operands):
    if operands[0][0] is not operands[1][0]:
        raise RuntimeError("both inputs should have same dtype")
    return d


SAME_DTYPE = Policy("same_dtype", _same_dtype)


def _no_bool(a, kernel="addmm_impl_cpu_"):
    if a.dtype == np.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _no_bool_product(a, m, k, n):
    """PyTorch's error for a bool (m x k) @ (k x n) product; an empty one is allowed."""
    if a.dtype == np.bool_ and m * k * n:
        _no_bool(a, "dot" if m == n == 1 else "addmm_impl_cpu_")


# --- tensordot --------------------------------------------------------------------------------

_DIMS_FORMS = "int or tuple[list[int], list[int]] or list[list[int]] containing two lists"


def _dim_list(dims, position, name):
    if isinstance(dims, int):
        raise TypeError(f"tensordot(): argument '{name}' (position {position}) must be tuple "
                        f"of ints, not int")
    out = []
    for i, d in enumerate(dims):
        if isinstance(d, (bool, float)) or not hasattr(d, "__index__"):
            raise TypeError(f"tensordot(): argument '{name}' (position {position}) must be "
                            f"tuple of ints, but found element of type {type(d).__name__} at "
                            f"pos {i}")
        out.append(d.__index__())
    return out


def tensordot_dims(dims, ndim_a, ndim_b):
    """``dims`` of tensordot as two lists of dims (``a``'s may be negative), validated."""
    if isinstance(dims, Tensor):
        if dims.numel() > 1:
            if dims.shape[0] != 2:
                raise AssertionError(f"dims tensor must have size 2 in first dimension, got "
                                     f"{dims.shape[0]}")
            dims = dims.tolist()
        else:
            dims = int(dims.item())
    if isinstance(dims, int) and not isinstance(dims, bool):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(ndim_a, ndim_b):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got "
                               f"dims={dims}")
        return list(range(-dims, 0)), list(range(dims))
    if not isinstance(dims, (list, tuple)):
        raise RuntimeError(f"tensordot expects dims to be {_DIMS_FORMS}, but got dims={dims}")
    if len(dims) != 2:
        raise RuntimeError(f"tensordot expects dims to be {_DIMS_FORMS}, but got dims={dims}")
    return _dim_list(dims[0], 3, "dims_self"), _dim_list(dims[1], 4, "dims_other")


def _contracted(a_shape, b_shape, dims_a, dims_b):
    """(dims of a, dims of b) contracted, wrapped and checked as PyTorch does (a size-1 dim
    broadcasts against its partner)."""
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    seen_a, seen_b = set(), set()
    for da, db in zip(dims_a, dims_b):
        wa, wb = wrap_dim(da, len(a_shape)), wrap_dim(db, len(b_shape))
        for w, seen in ((wa, seen_a), (wb, seen_b)):
            if w in seen:
                raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
            seen.add(w)
        if a_shape[wa] != b_shape[wb] and 1 not in (a_shape[wa], b_shape[wb]):
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a_shape[wa]} in dim {da} and second has size {b_shape[wb]} "
                               f"in dim {db}")
    return [wrap_dim(d, len(a_shape)) for d in dims_a], [wrap_dim(d, len(b_shape))
                                                           for d in dims_b]


def _broadcast(a_shape, b_shape, dims_a, dims_b):
    """The shapes of a and b with each contracted size-1 dim broadcast to its partner's
    size, as PyTorch's tensordot expands it."""
    full_a, full_b = list(a_shape), list(b_shape)
    for da, db in zip(dims_a, dims_b):
        if full_a[da] == 1:
            full_a[da] = full_b[db]
        elif full_b[db] == 1:
            full_b[db] = full_a[da]
    return tuple(full_a), tuple(full_b)


def _layout(a_shape, b_shape, dims):
    """Permutations that bring the contracted dims of a last and of b first, the sizes
    (free dims of a, free dims of b, contracted size), and a's and b's broadcast shapes."""
    dims_a, dims_b = _contracted(a_shape, b_shape, *tensordot_dims(dims, len(a_shape),
                                                                   len(b_shape)))
    full_a, full_b = _broadcast(a_shape, b_shape, dims_a, dims_b)
    free_a = [d for d in range(len(a_shape)) if d not in dims_a]
    free_b = [d for d in range(len(b_shape)) if d not in dims_b]
    k = math.prod(full_a[d] for d in dims_a)
    return (free_a + dims_a, dims_b + free_b, [a_shape[d] for d in free_a],
            [b_shape[d] for d in free_b], k, full_a, full_b)


@op("tensordot(a, b, dims=2)", inputs=2, promote=SAME_DTYPE, scalars=False, method=False)
def _tensordot(xp, a, b, dims):
    """Sums of products over ``dims``: the last ``dims`` dims of ``a`` with the first of
    ``b``, or the two lists of dims given (a contracted size-1 dim broadcasts)."""
    perm_a, perm_b, free_a, free_b, k, full_a, full_b = _layout(a.shape, b.shape, dims)
    if (full_a, full_b) != (a.shape, b.shape):
        a, b = xp.broadcast_to(a, full_a), xp.broadcast_to(b, full_b)
    m, n = math.prod(free_a), math.prod(free_b)
    _no_bool_product(a, m, k, n)
    res = xp.matmul(a.transpose(perm_a).reshape(m, k), b.transpose(perm_b).reshape(k, n))
    return res.reshape(free_a + free_b)


@_tensordot.derivative
def _(grad, a, b, dims):
    perm_a, perm_b, free_a, free_b, k, full_a, full_b = _layout(a.shape, b.shape, dims)
    g = grad.reshape(math.prod(free_a), math.prod(free_b))
    grad_a = grad_b = None
    if a.requires_grad:
        rows = b.expand(full_b).permute(perm_b).reshape(k, math.prod(free_b))
        grad_a = _summed_to(_unpermute(g.mm(_h(rows)).reshape(
            free_a + [full_a[d] for d in perm_a[len(free_a):]]), perm_a), a.shape)
    if b.requires_grad:
        cols = a.expand(full_a).permute(perm_a).reshape(math.prod(free_a), k)
        grad_b = _summed_to(_unpermute(_h(cols).mm(g).reshape(
            [full_b[d] for d in perm_b[:len(perm_b) - len(free_b)]] + free_b), perm_b),
            b.shape)
    return grad_a, grad_b


def _summed_to(t, shape):
    """``t`` summed over the dims it has broadcast from size 1 in ``shape``."""
    dims = [d for d, (have, want) in enumerate(zip(t.shape, shape)) if have != want]
    return t.sum(dims, keepdim=True) if dims else t


_tensordot.name_nodes("ViewBackward0")     # PyTorch reshapes a matrix product


def tensordot(a, b, dims=2, out=None):
    """Sums of products over ``dims``: the last ``dims`` dims of ``a`` with the first of
    ``b``, or the two lists of dims given."""
    if isinstance(dims, (list, tuple)) and len(dims) != 2:      # Python's unpacking errors
        if len(dims) < 2:
            raise ValueError(f"not enough values to unpack (expected 2, got {len(dims)})")
        raise ValueError("too many values to unpack (expected 2)")
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype != b.dtype:
        # PyTorch reads the dims (and compares the lists' lengths) before the dtypes
        dims_a, dims_b = tensordot_dims(dims, a.dim(), b.dim())
        if len(dims_a) != len(dims_b):
            raise RuntimeError("both dimension lists should have same length")
    return _tensordot(a, b, dims, out=out)


def _unpermute(t, perm):
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return t.permute(inverse)


# --- inner, vdot, linalg.vecdot ---------------------------------------------------------------

def _scaled_product(xp, a, b):
    """``a * b`` with one operand 0-dim: PyTorch's weak promotion, 16-bit floats in float32."""
    dtype = D.result_type_of([(D.FROM_NUMPY[a.dtype], D.ZERO_DIM if a.ndim == 0 else D.DIM),
                              (D.FROM_NUMPY[b.dtype], D.ZERO_DIM if b.ndim == 0 else D.DIM)])
    compute = np.float32 if dtype.np in _LOW else dtype.np
    return (a.astype(compute) * b.astype(compute)).astype(dtype.np, copy=False)


@op("inner(input, other)", inputs=2, out=True)
def inner(xp, a, b):
    """Sums of products over the last dim of both (a product when either is 0-dim)."""
    if a.ndim == 0 or b.ndim == 0:
        return _scaled_product(xp, a, b)
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(a.shape)} and {list(b.shape)}")
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    k = a.shape[-1]
    rows = a.reshape(math.prod(a.shape[:-1]), k)
    cols = b.reshape(math.prod(b.shape[:-1]), k)
    _no_bool_product(a, rows.shape[0], k, cols.shape[0])
    return matrix_product(xp, rows, cols.T).reshape(a.shape[:-1] + b.shape[:-1])


# PyTorch's inner is a composite: a product of a 0-dim operand (MulBackward0), else a view
# of a matrix product (ViewBackward0)
inner.named_by(lambda flat, params, out: "ViewBackward0" if flat[0].ndim and flat[1].ndim
               else "MulBackward0")


@inner.derivative
def _(grad, a, b):
    if a.ndim == 0 or b.ndim == 0 or a.ndim == b.ndim == 1:
        # (two vectors: a dot product, whose derivative autocast does not cast, as PyTorch's)
        return grad * conj_grad(b), grad * conj_grad(a)
    p, q = a.ndim - 1, b.ndim - 1
    return (_tensordot(grad, conj_grad(b), ([*range(p, p + q)], [*range(q)]))
            if a.requires_grad else None,
            _tensordot(grad, conj_grad(a), ([*range(p)], [*range(p)]))
            if b.requires_grad else None)


@op("vdot(input, other)", inputs=2, out=True)
def vdot(xp, a, b):
    """The inner product of two 1-D tensors, conjugating the first."""
    _check_dot(a, b)
    return matrix_product(xp, a.conj() if a.dtype.kind == "c" else a, b)


@vdot.derivative
def _(grad, a, b):
    return conj_grad(grad) * b, grad * a


def _vecdot_dtypes(d, name, operands):
    (x, _), (y, _) = operands
    if x.category < D.FLOATING:         # PyTorch checks x's dtype before the pair's
        raise RuntimeError(f"linalg.vecdot: Expected a floating point or complex tensor as "
                           f"input. Got {x._torch_name}")
    if x is not y:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found "
                           f"x of type {x._torch_name} and y of type {y._torch_name} instead")
    return d


def _vecdot_shape(x, y):
    """The broadcast shape of vecdot's operands, checked with PyTorch's messages."""
    if x.ndim == 1 and y.ndim == 1 and x.shape != y.shape:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{x.shape[0]}] and src "
                           f"[{y.shape[0]}] to have the same number of elements, but got "
                           f"{x.shape[0]} and {y.shape[0]} elements respectively")
    try:
        return np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise RuntimeError(broadcast_message([x.shape, y.shape])) from None


@op("vecdot(x, y, *, dim=-1)", inputs=2, promote=Policy("vecdot", _vecdot_dtypes),
    upcast=False, scalars=False, namespace="linalg")
def vecdot(xp, x, y, dim):
    """The dot product of vectors along ``dim``, conjugating ``x``; the others broadcast."""
    shape = _vecdot_shape(x, y)
    d = wrap_dim(dim, len(shape))
    products = (x.conj() if x.dtype.kind == "c" else x) * y
    if not shape:
        return products
    if x.dtype in _LOW:        # as PyTorch: products rounded to 16 bits, summed in float32
        return products.astype(np.float32).sum(axis=d).astype(x.dtype)
    return products.sum(axis=d)


@vecdot.derivative
def _(grad, x, y, dim):
    shape = np.broadcast_shapes(tuple(x.shape), tuple(y.shape))
    g = grad.unsqueeze(wrap_dim(dim, len(shape))).expand(shape) if shape else grad
    return conj_grad(g) * y if x.requires_grad else None, g * x if y.requires_grad else None


@vecdot.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: the sum over ``dim`` of the products (x conjugated first)."""
    x, y = inputs
    shape = _vecdot_shape(x, y)
    wrap_dim(params[0], len(shape))
    if not shape:
        return NotImplemented
    return ((x.conj() if x.is_complex() else x) * y).sum(params[0])


# --- kron -------------------------------------------------------------------------------------

def _as_tensors(d, name, operands):
    return D.result_type_of([(dt, D.DIM) for dt, _ in operands])


# kron reshapes its operands and addr expands ``input`` before promoting: no operand is weak
AS_TENSORS = Policy("as_tensors", _as_tensors)


def _kron_shapes(a_shape, b_shape):
    """Both shapes padded to one rank, and the interleaved shape (a0, b0, a1, b1, ...)."""
    ndim = max(len(a_shape), len(b_shape))
    sa = (1,) * (ndim - len(a_shape)) + tuple(a_shape)
    sb = (1,) * (ndim - len(b_shape)) + tuple(b_shape)
    return sa, sb, tuple(s for pair in zip(sa, sb) for s in pair)


@op("kron(input, other)", inputs=2, promote=AS_TENSORS, scalars=False,
    out=True)
def kron(xp, a, b):
    """The Kronecker product: every element of ``input`` times all of ``other``."""
    sa, sb, both = _kron_shapes(a.shape, b.shape)
    wide_a = a.reshape(tuple(s for n in sa for s in (n, 1)))
    wide_b = b.reshape(tuple(s for n in sb for s in (1, n)))
    return (wide_a * wide_b).reshape(tuple(x * y for x, y in zip(sa, sb)))


@kron.derivative
def _(grad, a, b, *, needs=(True, True)):
    sa, sb, both = _kron_shapes(a.shape, b.shape)
    g = grad.reshape(both)
    even, odd = tuple(range(0, len(both), 2)), tuple(range(1, len(both), 2))
    grad_a = grad_b = None
    if needs[0]:
        wide_b = conj_grad(b).reshape(tuple(s for n in sb for s in (1, n)))
        grad_a = (g * wide_b).sum(odd).reshape(a.shape)
    if needs[1]:
        wide_a = conj_grad(a).reshape(tuple(s for n in sa for s in (n, 1)))
        grad_b = (g * wide_a).sum(even).reshape(b.shape)
    return grad_a, grad_b


kron.name_nodes("UnsafeViewBackward0")     # PyTorch forms kron as a view of a product
kron.reads_inputs((1,), (0,))
kron.aliases_inputs(0, 1)       # PyTorch's product saves _unsafe_views of its operands


# --- multi_dot, chain_matmul ------------------------------------------------------------------

def _check_chain(tensors):
    """multi_dot's checks: ranks, one dtype, and sizes that chain."""
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    for i, t in enumerate(tensors):
        if i == 0 and t.ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got "
                               f"{t.ndim}D")
        if i == n - 1 and t.ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got "
                               f"{t.ndim}D")
        if 0 < i < n - 1 and t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    for i, t in enumerate(tensors[1:], 1):
        if t.dtype != tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but "
                               f"tensor 0 is {_cname(tensors[0])} and tensor {i} "
                               f"{_cname(t)}")
    for i in range(n - 1):
        a, b = tensors[i], tensors[i + 1]
        if a.shape[-1] != b.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(a.shape)} and {list(b.shape)} cannot be multiplied")
    _no_bool(tensors[0])


def _cname(a):
    return CTYPE[D.FROM_NUMPY[a.dtype]]


def _matrices(tensors):
    """The chain with a 1-D first operand as a row and a 1-D last one as a column."""
    first, last = tensors[0], tensors[-1]
    return ([first.reshape(1, -1) if first.ndim == 1 else first] + list(tensors[1:-1]) +
            [last.reshape(-1, 1) if last.ndim == 1 else last])


def chain_order(shapes):
    """The cheapest parenthesization of a matrix chain (dynamic programming on the
    multiplication counts): split[i][j] is where the product of i..j splits."""
    n = len(shapes)
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                # (PyTorch compares three matrices' two orders directly: (AB)C wins a tie)
                if c < cost[i][j] or c == cost[i][j] and n == 3:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain_product(mul, mats, split, i, j):
    if i == j:
        return mats[i]
    k = split[i][j]
    return mul(_chain_product(mul, mats, split, i, k), _chain_product(mul, mats, split, k + 1, j))


def _multiply_chain(xp, tensors):
    _check_chain(tensors)
    mats = _matrices(tensors)
    split = chain_order([m.shape for m in mats])
    # 16-bit floats: each product in float32, rounded (PyTorch runs one mm per product)
    res = _chain_product(lambda a, b: matrix_product(xp, a, b), mats, split, 0, len(mats) - 1)
    return res.reshape(tensors[0].shape[:-1] + tensors[-1].shape[1:])


@op("multi_dot(tensors)", inputs=("tensors*",), out=True, namespace="linalg")
def multi_dot(xp, tensors):
    """The product of a chain of matrices (the first may be a row vector and the last a
    column vector), multiplied in the cheapest order."""
    return _multiply_chain(xp, tensors)


def multi_dot_public(tensors, *, out=None):
    """``linalg.multi_dot`` as PyTorch parses its ``tensors``: a list or tuple of tensors
    (a generator or a tensor refused in its words), at least two of them."""
    from ember.ops.join import _tensors_of
    tensors = _tensors_of(tensors, "linalg_multi_dot")
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    return multi_dot(tensors, out=out)


multi_dot_public.__module__ = "ember.linalg"
multi_dot_public.__name__ = multi_dot_public.__qualname__ = "linalg_multi_dot"


@multi_dot.derivative
def _(grad, tensors):
    return (_chain_grads(grad, tensors),)


@multi_dot.composed_when_recording
def _(inputs, params):
    """PyTorch's graph: an unsqueeze of each 1-D end, the chain's mm's in the cheapest
    order, and a view to the result's shape."""
    tensors = inputs[0]
    _check_chain([t._data for t in tensors])
    first, last = tensors[0], tensors[-1]
    mats = ([first.unsqueeze(0) if first.ndim == 1 else first] + list(tensors[1:-1]) +
            [last.unsqueeze(1) if last.ndim == 1 else last])
    split = chain_order([m.shape for m in mats])
    product = _chain_product(lambda a, b: a.mm(b), mats, split, 0, len(mats) - 1)
    return product.view(first.shape[:-1] + last.shape[1:])


def _chain_grads(grad, tensors):
    """d(A1 ... An)/dAi = (A1 ... Ai-1)^H grad (Ai+1 ... An)^H, the partial products
    themselves computed as cheap chains."""
    mats = _matrices(tensors)
    g = grad.reshape(mats[0].shape[0], mats[-1].shape[1])
    grads = []
    for i, t in enumerate(tensors):
        if not t.requires_grad:
            grads.append(None)
            continue
        left = _chain(mats[:i])
        right = _chain(mats[i + 1:])
        gi = g if left is None else _h(left).mm(g)
        gi = gi if right is None else gi.mm(_h(right))
        grads.append(gi.reshape(t.shape))
    return grads


def _chain(mats):
    if not mats:
        return None
    if len(mats) == 1:
        return mats[0]
    return multi_dot(mats)


_CHAIN_WARNING = ("torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                  "release. Use torch.linalg.multi_dot instead, which accepts a list of two or "
                  "more tensors rather than multiple parameters.")


@op("chain_matmul(*matrices)", inputs=("matrices*",), out=True, method=False)
def _chain_matmul(xp, matrices):
    """The product of a chain of 2-D tensors (deprecated: use ``linalg.multi_dot``)."""
    if len(matrices) == 1:
        return matrices[0].copy()
    for m in matrices:
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    return _multiply_chain(xp, matrices)


@_chain_matmul.derivative
def _(grad, matrices):
    if len(matrices) == 1:
        return ([grad],)
    return (_chain_grads(grad, matrices),)


def chain_matmul(*matrices, out=None):
    """The product of a chain of 2-D tensors (deprecated: use ``linalg.multi_dot``)."""
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if not isinstance(m, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(m).__name__}")
    if len(matrices) > 1:
        warnings.warn(_CHAIN_WARNING, UserWarning, stacklevel=user_level(2))
    return _chain_matmul(*matrices, out=out)


ALIASES = {}
PUBLIC = {"tensordot": tensordot, "chain_matmul": chain_matmul}


# --- _int_mm ----------------------------------------------------------------------------------

def _check_int_mm(a, b):
    for name, t in (("self", a), ("mat2", b)):
        if t.ndim != 2:
            raise RuntimeError(f"int_mm_out_cpu: Expected {name} to be of dimension 2 but got "
                               f"{t.ndim}")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"int_mm_out_cpu: self.size(1) needs to match mat2.size(0) but got "
                           f"{a.shape[1]} and {b.shape[0]}")
    if a.dtype not in (np.int8, np.uint8):
        raise RuntimeError(f"int_mm_out_cpu: Expected self dtype to be int8 or uint8 but got "
                           f"{_cname(a)}")
    if b.dtype != np.int8:
        raise RuntimeError(f"int_mm_out_cpu: Expected mat2 dtype to be of type int8 but got "
                           f"{_cname(b)}")


@op("_int_mm(input, mat2)", inputs=2, method=False, out=True, differentiable=False)
def _int_mm(xp, a, b):
    """The int32 product of an int8 (or uint8) and an int8 matrix, summed in int32 (wrapping
    as PyTorch's kernel does): int8 dynamic quantization's matmul."""
    _check_int_mm(a, b)
    return xp.matmul(a.astype(np.int32), b.astype(np.int32))


_int_mm.out_dtype_error = ("int_mm_out_cpu: Expected result dtype to be of type kInt but got "
                           "{got_c}")
PUBLIC["_int_mm"] = _int_mm.function
