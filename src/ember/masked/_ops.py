"""The masked reductions of ``torch.masked``: masked-out elements are replaced by the
reduction's identity (0 for sum, -inf for amax, ...) before an ordinary ember op runs, so that
dtypes, errors, autograd nodes and gradients are those of that op."""

import math

import ember

_SMALL_INTS = (ember.uint8, ember.bool, ember.int8, ember.int16, ember.int32)


def _input_mask(input, mask):
    """``mask`` as a bool tensor of ``input``'s shape (broadcast when smaller)."""
    if mask.shape != input.shape:
        if mask.ndim > input.ndim:
            raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality "
                             "higher than of the input)")
        mask = ember.broadcast_to(mask.clone(), input.shape)
    return mask.to(dtype=ember.bool)


def _identity(op, input, ord=2.0):  # noqa: A002
    """The value that leaves reduction ``op`` unchanged, as a 0-d tensor of ``input``'s
    dtype (median's is a float nan); NotImplementedError where none is defined."""
    dtype, device = input.dtype, input.device
    fp, signed = input.dtype.is_floating_point, ember.is_signed(input) or dtype == ember.uint8
    value = None
    if op in ("sum", "cumsum"):
        value = 0
    elif op in ("prod", "cumprod"):
        value = 1
    elif op in ("amax", "argmax", "logaddexp", "logsumexp"):
        if fp:
            value = -math.inf
        elif op == "logsumexp" and dtype.is_complex:
            value = complex(-math.inf, 0)
        elif signed:
            value = ember.iinfo(dtype).min
    elif op in ("amin", "argmin"):
        if fp:
            value = math.inf
        elif signed:
            value = ember.iinfo(dtype).max
    elif op == "norm":
        if ord == -math.inf:
            if not fp:
                raise AssertionError(f"input must be floating point, got {dtype}")
            value = math.inf
        else:
            value = 0
    elif op == "median":
        return ember.tensor(math.nan, dtype=dtype if fp else ember.float32, device=device)
    if value is None:
        raise NotImplementedError(f"identity of {op} on {dtype} input")
    return ember.tensor(value, dtype=dtype, device=device)


def _combine(op, input, mask, *args):
    """``input`` with its masked-out elements replaced by ``op``'s identity (``input`` itself
    when ``mask`` is None)."""
    if mask is None:
        return input
    return ember.where(_input_mask(input, mask), input, _identity(op, input, *args))


def _canonical_dim(dim, ndim):
    """``dim`` (None, (), an int or a sequence) as a sorted tuple of non-negative dims."""
    if dim is None or (isinstance(dim, tuple) and dim == ()):
        return tuple(range(ndim))
    ndim = max(ndim, 1)
    seen = []
    for d in (dim,) if isinstance(dim, int) else dim:
        if d in seen:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        if d >= ndim or d < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                             f"{ndim - 1}], but got {d})")
        seen.append(d % ndim)
    return tuple(sorted(seen))


def _sum_dtype(input, dtype):
    if dtype is not None:
        return dtype
    return ember.int64 if input.dtype in _SMALL_INTS else input.dtype


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A001
    """Sum over ``dim`` of the elements where ``mask`` is True."""
    dtype = _sum_dtype(input, dtype)
    dims = _canonical_dim(dim, input.ndim)
    return ember.sum(_combine("sum", input, mask), dims, bool(keepdim), dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Product over ``dim`` of the elements where ``mask`` is True."""
    dtype = _sum_dtype(input, dtype)
    dims = _canonical_dim(dim, input.ndim)
    result = _combine("prod", input, mask).to(dtype=dtype)
    for d in reversed(dims):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def cumsum(input, dim, *, dtype=None, mask=None):
    """Cumulative sum over ``dim`` with masked-out elements counted as 0."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return ember.cumsum(_combine("sum", input, mask), d, dtype=dtype).to(dtype=dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Cumulative product over ``dim`` with masked-out elements counted as 1."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return ember.cumprod(_combine("prod", input, mask), d, dtype=dtype).to(dtype=dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Largest element over ``dim`` among those where ``mask`` is True."""
    dtype = input.dtype if dtype is None else dtype
    filled = _combine("amax", input, mask)
    dims = _canonical_dim(dim, filled.ndim)
    return ember.amax(filled, dims, bool(keepdim)).to(dtype=dtype)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Smallest element over ``dim`` among those where ``mask`` is True."""
    dtype = input.dtype if dtype is None else dtype
    filled = _combine("amin", input, mask)
    dims = _canonical_dim(dim, filled.ndim)
    return ember.amin(filled, dims, bool(keepdim)).to(dtype=dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the largest unmasked element over ``dim``, in the input's dtype as
    PyTorch returns it."""
    dtype = input.dtype if dtype is None else dtype
    return ember.argmax(_combine("argmax", input, mask), dim, bool(keepdim)).to(dtype=dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the smallest unmasked element over ``dim``, in the input's dtype."""
    dtype = input.dtype if dtype is None else dtype
    return ember.argmin(_combine("argmin", input, mask), dim, bool(keepdim)).to(dtype=dtype)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Mean over ``dim`` of the elements where ``mask`` is True (nan where none are)."""
    source = "Optional" if dtype is not None else "Input"
    dtype = input.dtype if dtype is None else dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"mean(): Could not infer output dtype. {source} dtype must be either "
                         f"a floating point or complex dtype. Got: {dtype}")
    if mask is None:
        ones = ember.ones(input.shape, dtype=ember.int64, device=input.device)
        count = sum(ones, dim, keepdim=keepdim)
        total = sum(input, dim, keepdim=keepdim, dtype=dtype)
    else:
        inmask = _input_mask(input, mask)
        count = inmask.sum(dim=dim, keepdim=bool(keepdim))
        total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=inmask)
    return total / count


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """Lower median over ``dim`` of the unmasked elements (nan where none are; an error there
    for a non-float input)."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    is_float = input.dtype.is_floating_point
    if not is_float:
        input = input.to(dtype=ember.float32)
    out = ember.nanmedian(_combine("median", input, mask), d, keepdim).values
    if is_float:
        return out
    if ember.isnan(out).any():
        raise ValueError("masked median expects no fully masked out rows if dtype is not "
                         "floating point")
    return out.to(dtype=dtype)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """``log(sum(exp(x)))`` over ``dim`` of the unmasked elements (-inf where none are)."""
    dtype = input.dtype if dtype is None else dtype
    dims = _canonical_dim(dim, input.ndim)
    filled = _combine("logsumexp", input, mask)
    return ember.logsumexp(filled, dims, keepdim=keepdim).to(dtype=dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """``log(exp(input) + exp(other))`` with each side's masked-out elements at -inf."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("logaddexp", input, input_mask)
    y = _combine("logaddexp", other, other_mask)
    return ember.logaddexp(x, y).to(dtype=dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):  # noqa: A002
    """Vector ``ord``-norm over ``dim`` of the unmasked elements."""
    dtype = input.dtype if dtype is None else dtype
    filled = _combine("norm", input, mask, ord)
    dims = _canonical_dim(dim, input.ndim)
    return ember.linalg.vector_norm(filled, ord, dims, bool(keepdim), dtype=dtype)


def _std_var(input, dim, unbiased, correction_opt, keepdim, dtype, mask, take_sqrt):
    if unbiased is not None and correction_opt is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = float(correction_opt)
    if dtype is None:
        dtype = input.dtype
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = ember.float32
    compute = dtype if dtype.is_floating_point or dtype.is_complex else ember.float32
    if mask is None:
        ones = ember.ones(input.shape, dtype=ember.int64, device=input.device)
        count = sum(ones, dim, keepdim=True)
        total = sum(input, dim, keepdim=True, dtype=dtype)
    else:
        mask = _input_mask(input, mask)
        count = mask.sum(dim=dim, keepdim=True)
        total = sum(input, dim, keepdim=True, dtype=dtype, mask=mask)
    x = ember.subtract(input, ember.divide(total, count))
    total = sum(x * x.conj(), dim, keepdim=keepdim, dtype=compute, mask=mask)
    if not keepdim:
        count = count.reshape(total.shape)
    if correction != 0:
        count = count.to(compute.to_real() if compute.is_complex else compute)
        count = ember.subtract(count, correction)
        count = ember.maximum(count, count.new_zeros([]))
    out = ember.divide(total, count).to(dtype=dtype)
    return ember.sqrt(out) if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Variance over ``dim`` of the unmasked elements (``correction`` 1 by default)."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Standard deviation over ``dim`` of the unmasked elements."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, True)


def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax over ``dim`` with masked-out elements given 0 weight (nan where all are)."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return ember.nn.functional.softmax(_combine("amax", input, mask), d, dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """Log-softmax over ``dim`` with masked-out elements at -inf."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return ember.nn.functional.log_softmax(_combine("amax", input, mask), d, dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    """Softmin over ``dim`` with masked-out elements given 0 weight."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return ember.nn.functional.softmin(_combine("amin", input, mask), d, dtype=dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):  # noqa: A002
    """``input`` divided by its masked ``ord``-norm over ``dim`` (masked elements give 0)."""
    dtype = input.dtype if dtype is None else dtype
    filled = _combine("sum", input, mask)
    scale = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return ember.divide(filled, ember.maximum(scale, scale.new_full([], eps)))
