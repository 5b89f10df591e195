"""The masked reductions of ``torch.masked``: masked-out elements are replaced by the
reduction's identity (0 for sum, -inf for amax, ...) before an ordinary ember op runs."""

import builtins
import math

import ember


def _cast(input, dtype):
    return input if dtype is None else input.to(dtype)


def _mask(input, mask):
    """``mask`` as a bool tensor of ``input``'s shape (all True when None)."""
    if mask is None:
        return ember.ones(input.shape, dtype=ember.bool, device=input.device)
    return mask.to(ember.bool).expand(input.shape)


def _dims(dim, ndim):
    """``dim`` (None, an int or a sequence) as a tuple of dims (all dims for None)."""
    if dim is None:
        return tuple(range(ndim))
    return (dim,) if isinstance(dim, int) else tuple(dim)


def _filled(input, mask, fill):
    return ember.where(_mask(input, mask), input, ember.full((), fill, dtype=input.dtype,
                                                             device=input.device))


def _extreme(dtype, largest):
    if dtype.is_floating_point:
        return math.inf if largest else -math.inf
    if dtype is ember.bool:
        return largest
    info = ember.iinfo(dtype)
    return info.max if largest else info.min


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A001
    """Sum over ``dim`` of the elements where ``mask`` is True."""
    x = _cast(input, dtype)
    return ember.sum(_filled(x, mask, 0), _dims(dim, x.ndim), keepdim=bool(keepdim))


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Product over ``dim`` of the elements where ``mask`` is True."""
    x = _filled(_cast(input, dtype), mask, 1)
    for d in sorted((d % builtins.max(x.ndim, 1) for d in _dims(dim, x.ndim)), reverse=True):
        x = ember.prod(x, d, keepdim=True)
    return x if keepdim else x.reshape(_reduced_shape(input.shape, dim))


def _reduced_shape(shape, dim):
    dims = {d % builtins.max(len(shape), 1) for d in _dims(dim, len(shape))}
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Largest element over ``dim`` among those where ``mask`` is True."""
    x = _cast(input, dtype)
    filled = _filled(x, mask, _extreme(x.dtype, largest=False))
    return ember.amax(filled, _dims(dim, x.ndim), keepdim=bool(keepdim))


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Smallest element over ``dim`` among those where ``mask`` is True."""
    x = _cast(input, dtype)
    filled = _filled(x, mask, _extreme(x.dtype, largest=True))
    return ember.amin(filled, _dims(dim, x.ndim), keepdim=bool(keepdim))


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the largest unmasked element over ``dim``, in the input's dtype as
    PyTorch returns it."""
    x = _cast(input, dtype)
    filled = _filled(x, mask, _extreme(x.dtype, largest=False))
    return ember.argmax(filled, dim, keepdim=bool(keepdim)).to(x.dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the smallest unmasked element over ``dim``, in the input's dtype."""
    x = _cast(input, dtype)
    filled = _filled(x, mask, _extreme(x.dtype, largest=True))
    return ember.argmin(filled, dim, keepdim=bool(keepdim)).to(x.dtype)


def _count(input, dim, keepdim, mask):
    return ember.sum(_mask(input, mask), _dims(dim, input.ndim), keepdim=keepdim)


def _require_float(name, dtype):
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"{name}(): Could not infer output dtype. Input dtype must be either "
                         f"a floating point or complex dtype. Got: {dtype}")


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Mean over ``dim`` of the elements where ``mask`` is True (nan where none are)."""
    x = _cast(input, dtype)
    _require_float("mean", x.dtype)
    total = sum(x, dim, keepdim=keepdim, mask=mask)
    return total / _count(x, dim, bool(keepdim), mask).to(total.dtype)


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Variance over ``dim`` of the unmasked elements (``correction`` 1 by default)."""
    x = _cast(input, dtype)
    _require_float("var", x.dtype)
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    count = _count(x, dim, True, mask).to(x.real.dtype)
    centred = _filled(x - sum(x, dim, keepdim=True, mask=mask) / count, mask, 0)
    squares = ember.sum(centred * centred.conj(), _dims(dim, x.ndim), keepdim=True).real
    # as PyTorch's, a complex input's (real) variance comes in its dtype
    out = squares.to(x.dtype) / ember.clamp(count - correction, min=0)
    if x.requires_grad:
        out = out + _nan_grad_where_empty(x, dim, count == 0)
    return out if keepdim else out.reshape(_reduced_shape(x.shape, dim))


def _nan_grad_where_empty(x, dim, empty):
    """A term that is 0 where a slice has unmasked elements and nan where it has none (the
    variance there is nan already), so that every element of a fully masked slice gets a nan
    gradient, as PyTorch's (its mean over no elements is 0 / 0)."""
    nans = ember.where(empty, ember.full((), math.nan, dtype=x.real.dtype, device=x.device), 0)
    total = ember.sum(ember.where(empty, x, 0), _dims(dim, x.ndim), keepdim=True)
    return total * nans


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Standard deviation over ``dim`` of the unmasked elements."""
    return ember.sqrt(var(input, dim, unbiased, correction=correction, keepdim=keepdim,
                          dtype=dtype, mask=mask))


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """``log(sum(exp(x)))`` over ``dim`` of the unmasked elements (-inf where none are)."""
    x = _cast(input, dtype)
    return ember.logsumexp(_filled(x, mask, -math.inf), _dims(dim, x.ndim),
                           keepdim=bool(keepdim))


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A002
    """Vector ``ord``-norm over ``dim`` of the unmasked elements (masked ones count as 0)."""
    x = _cast(input, dtype)
    return ember.linalg.vector_norm(_filled(x, mask, 0), ord, _dims(dim, x.ndim),
                                    keepdim=bool(keepdim))


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """Lower median over ``dim`` of the unmasked elements (nan where none are)."""
    x = _cast(input, dtype)
    _require_float("median", x.dtype)
    return ember.nanmedian(_filled(x, mask, math.nan), dim, keepdim=bool(keepdim)).values


def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax over ``dim`` with masked-out elements given 0 weight (nan where all are)."""
    x = _cast(input, dtype)
    return ember.softmax(_filled(x, mask, -math.inf), dim)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """Log-softmax over ``dim`` with masked-out elements at -inf."""
    x = _cast(input, dtype)
    return ember.log_softmax(_filled(x, mask, -math.inf), dim)


def softmin(input, dim, *, dtype=None, mask=None):
    """Softmin over ``dim`` with masked-out elements given 0 weight."""
    x = _cast(input, dtype)
    return ember.softmax(_filled(-x, mask, -math.inf), dim)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):  # noqa: A002
    """``input`` divided by its masked ``ord``-norm over ``dim`` (masked elements give 0)."""
    x = _filled(_cast(input, dtype), mask, 0)
    scale = ember.linalg.vector_norm(x, ord, dim, keepdim=True)
    return x / ember.clamp(scale, min=eps)


def cumsum(input, dim, *, dtype=None, mask=None):
    """Cumulative sum over ``dim`` with masked-out elements counted as 0."""
    return ember.cumsum(_filled(_cast(input, dtype), mask, 0), dim)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Cumulative product over ``dim`` with masked-out elements counted as 1."""
    return ember.cumprod(_filled(_cast(input, dtype), mask, 1), dim)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """``log(exp(input) + exp(other))`` with each side's masked-out elements at -inf."""
    x, y = _cast(input, dtype), _cast(other, dtype)
    return ember.logaddexp(_filled(x, input_mask, -math.inf), _filled(y, other_mask, -math.inf))
