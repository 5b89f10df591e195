"""Rules for matrix products: matmul lines batch dims up; the others decompose into it."""

import math
import string

from ember._api import strided
from ember.func._batching import decompose, rule
from ember.func._batching.elementwise import align
from ember.func._batching.reductions import expand_unbatched
from ember.ops._registry import call


@rule("matmul")
def _matmul(op, args, flags, params, size):
    (a, b), (fa, fb) = args, flags
    na, nb = a.ndim - fa, b.ndim - fb
    if na == 0 or nb == 0:
        return NotImplemented
    if na == 1:
        a = a.unsqueeze(-2)
    if nb == 1:
        b = b.unsqueeze(-1)
    if fa and not fb and a.ndim == 3 and b.ndim == 2 and b.layout is not strided:
        # dense examples times one sparse matrix (a sparse operand has no batch dims to
        # line up): the examples' rows stacked into one product
        out = call(op, [a.reshape(-1, a.shape[-1]), b], ())
        out = out.reshape(tuple(a.shape[:2]) + (b.shape[-1],))
        return out.squeeze(-2) if na == 1 else out
    lead = max(na, nb, 2) - 2           # logical batch dims of the product
    if fa and a.ndim - 3 < lead:
        a = a.reshape((size,) + (1,) * (lead - a.ndim + 3) + tuple(a.shape[1:]))
    if fb and b.ndim - 3 < lead:
        b = b.reshape((size,) + (1,) * (lead - b.ndim + 3) + tuple(b.shape[1:]))
    out = call(op, [a, b], ())
    if na == 1:
        out = out.squeeze(-2)
    if nb == 1:
        out = out.squeeze(-1)
    return out


def _matmul_logical(a, b):
    import ember
    return ember.matmul(a, b)


decompose("mm", "bmm", "mv", "dot")(_matmul_logical)


@decompose("vdot")
def _vdot(a, b):
    return _matmul_logical(a.conj(), b)


@decompose("outer")
def _outer(a, b):
    return a.unsqueeze(-1) * b


def _affine(input, product, beta, alpha):
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return (input if beta == 1 else input * beta) + product


@decompose("addmm", "baddbmm", "addmv")
def _addmm(input, a, b, beta, alpha):
    return _affine(input, _matmul_logical(a, b), beta, alpha)


@decompose("addbmm")
def _addbmm(input, a, b, beta, alpha):
    return _affine(input, _matmul_logical(a, b).sum(0), beta, alpha)


@decompose("addr")
def _addr(input, a, b, beta, alpha):
    return _affine(input, _outer(a, b), beta, alpha)


@rule("nn.functional.linear")
def _linear(op, args, flags, params, size):
    (x, w, bias), (fx, fw, fb) = args, flags
    if not fw:
        y = call(op, [x, w, None if fb else bias], ())
        return _add_batched_bias(y, y.ndim - fx, bias, size) if fb else y
    if w.ndim == 2:                         # a batched 1-D weight: y = x . w per element
        x = x if fx else expand_unbatched(x, size)
        y = (x * w.reshape((size,) + (1,) * (x.ndim - 2) + (w.shape[1],))).sum(-1)
        if bias is None:
            return y
        return y + (bias.reshape((size,) + (1,) * (y.ndim - 1)) if fb else bias)
    out_features, in_features = w.shape[1], w.shape[2]
    lead = tuple(x.shape[1:-1] if fx else x.shape[:-1])
    rows = math.prod(lead)          # explicit: -1 is ambiguous when in_features is 0
    x3 = x.reshape(size if fx else 1, rows, in_features)
    y = x3.matmul(w.transpose(1, 2)).reshape((size,) + lead + (out_features,))
    if bias is not None:            # a batched bias may be broadcast, (B, 1) say
        y = _add_batched_bias(y, y.ndim - 1, bias, size) if fb else y + bias
    return y


def _add_batched_bias(y, ndim, bias, size):
    """``y`` (``ndim`` logical dims) plus a batched bias, whose logical dims (0-dim, (1,) or
    (out_features,)) line up with y's last ones."""
    lead = ndim - (bias.ndim - 1)
    return y + bias.reshape((size,) + (1,) * lead + tuple(bias.shape[1:]))


@rule("einsum")
def _einsum(op, args, flags, params, size):
    (operands,), (oflags,), (equation,) = args, flags, params
    if not isinstance(equation, str):   # a parsed Spec (einsum's own derivative passes one)
        return call(op, [operands], (_batched_spec(equation, oflags),))
    equation = equation.replace(" ", "")
    free = [c for c in string.ascii_letters if c not in equation]
    if "->" not in equation:            # implicit output: "..." then the once-used labels
        counts = {c: equation.count(c) for c in equation if c.isalpha()}
        equation += "->" + ("..." if "..." in equation else "") + \
            "".join(sorted(c for c, n in counts.items() if n == 1))
    lhs, rhs = equation.split("->")
    z = free[0]
    terms = [z + t if f else t for t, f in zip(lhs.split(","), oflags)]
    return call(op, [operands], (",".join(terms) + "->" + z + rhs,))


def _batched_spec(spec, oflags):
    """``spec`` (integer labels) with a new label for the batch dim leading the batched
    operands and the output."""
    used = {label for labels in (*spec.inputs, spec.output) for label in labels}
    z = min(set(range(len(used) + 1)) - used)
    inputs = tuple((z,) + tuple(t) if f else tuple(t) for t, f in zip(spec.inputs, oflags))
    return type(spec)(inputs, (z,) + tuple(spec.output))


def ember_mul(a, b):
    """``a * b`` (ember.mul, which the vmap rules may call on values)."""
    import ember
    return ember.mul(a, b)


@rule("inner")
def _inner(op, args, flags, params, size):
    (a, b), (fa, fb) = args, flags
    na, nb = a.ndim - fa, b.ndim - fb
    if (na == 0 or nb == 0) and a.dtype != b.dtype:
        return NotImplemented           # a 0-dim operand's weak dtype: the loop promotes
    if na == 0 or nb == 0:              # inner with a scalar is a product
        return ember_mul(*align([a, b], flags, size))
    return _contract(a, b, flags, size, [na - 1], [nb - 1])


@rule("tensordot")
def _tensordot(op, args, flags, params, size):
    (a, b), (fa, fb), (dims,) = args, flags, params
    na, nb = a.ndim - fa, b.ndim - fb
    if isinstance(dims, int):
        if dims < 0 or dims > min(na, nb):
            return NotImplemented       # the op's own error
        dims_a, dims_b = list(range(na - dims, na)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(dims_a) != len(dims_b) or not all(-n <= d < n for ds, n in
                                                  ((dims_a, na), (dims_b, nb)) for d in ds):
            return NotImplemented
    return _contract(a, b, flags, size, [d % na for d in dims_a], [d % nb for d in dims_b])


def _contract(a, b, flags, size, dims_a, dims_b):
    """Sum a * b over the logical dims ``dims_a`` of ``a`` paired with ``dims_b`` of ``b``,
    with one matmul over the batch; NotImplemented where the op must raise its own error."""
    a, b = [x if f else expand_unbatched(x, size) for x, f in zip((a, b), flags)]
    if a.dtype != b.dtype or len(set(dims_a)) != len(dims_a) or \
            any(a.shape[i + 1] != b.shape[j + 1] for i, j in zip(dims_a, dims_b)):
        return NotImplemented
    free_a = [d for d in range(a.ndim - 1) if d not in dims_a]
    free_b = [d for d in range(b.ndim - 1) if d not in dims_b]
    inner = math.prod(a.shape[d + 1] for d in dims_a)
    rows_a = [a.shape[d + 1] for d in free_a]
    cols_b = [b.shape[d + 1] for d in free_b]
    # explicit sizes: -1 is ambiguous when a contracted dim is empty
    lhs = a.permute([0] + [d + 1 for d in free_a + dims_a]).reshape(
        size, math.prod(rows_a), inner)
    rhs = b.permute([0] + [d + 1 for d in dims_b + free_b]).reshape(
        size, inner, math.prod(cols_b))
    shape = rows_a + cols_b
    return lhs.matmul(rhs).reshape([size] + shape)


@decompose("kron")
def _kron(a, b):
    rank = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (rank - a.ndim) + tuple(a.shape))
    b = b.reshape((1,) * (rank - b.ndim) + tuple(b.shape))
    interleaved_a = [s for n in a.shape for s in (n, 1)]
    interleaved_b = [s for n in b.shape for s in (1, n)]
    product = a.reshape(interleaved_a) * b.reshape(interleaved_b)
    return product.reshape([m * n for m, n in zip(a.shape, b.shape)])
