"""Helpers the distributions share: broadcasting parameters, probabilities and logits."""

import numbers
from functools import update_wrapper

import ember

__all__ = ["broadcast_all", "logits_to_probs", "probs_to_logits", "clamp_probs",
           "lazy_property", "lazy_logits_and_probs", "tril_matrix_to_vec", "vec_to_tril_matrix",
           "euler_constant"]

euler_constant = 0.57721566490153286060


def _sum_rightmost(value, dim):
    """Sum the rightmost ``dim`` dimensions of ``value`` (a number is returned as it is)."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:-dim] + (-1,)).sum(-1)


def broadcast_all(*values):
    """Broadcast tensors and numbers to one shape; numbers take the first tensor's dtype and
    device (the default dtype when every value is a number)."""
    like = None
    for value in values:
        if isinstance(value, ember.Tensor):
            like = like if like is not None else value
        elif not isinstance(value, numbers.Number) and not hasattr(value, "__torch_function__"):
            raise ValueError("Input arguments must all be instances of Number, "
                             "torch.Tensor or objects implementing __torch_function__.")
    if like is None:
        dtype, device = ember.get_default_dtype(), None
    else:
        dtype, device = like.dtype, like.device
    tensors = [v if isinstance(v, ember.Tensor) else ember.tensor(v, dtype=dtype, device=device)
               for v in values]
    return ember.broadcast_tensors(*tensors)


def logits_to_probs(logits, is_binary=False):
    """Probabilities from logits: sigmoid for a binary variable, softmax over the last
    dimension for a categorical one."""
    if is_binary:
        return ember.sigmoid(logits)
    return ember.nn.functional.softmax(logits, dim=-1)


def _standard_normal(shape, dtype, device):
    """N(0, 1) noise of ``shape``, drawn in place into a new tensor as PyTorch's
    reparameterized samplers draw it (so vmap(randomness="different") refuses it alike)."""
    return ember.empty(shape, dtype=dtype, device=device).normal_()


def clamp_probs(probs):
    """``probs`` clamped into [eps, 1 - eps] of their dtype, so logs stay finite."""
    eps = ember.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Logits from probabilities: log-odds for a binary variable, logs for a categorical one
    (clamped so that 0 and 1 give finite values)."""
    clamped = clamp_probs(probs)
    if is_binary:
        return ember.log(clamped) - ember.log1p(-clamped)
    return ember.log(clamped)


class lazy_property:
    """A property computed on first access and then stored on the instance; under
    ``validate_args`` the constructor checks it only once it has been computed."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with ember.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def lazy_logits_and_probs(is_binary=False):
    """The ``logits`` and ``probs`` lazy properties of a distribution given by either one:
    each is computed from the other on first use, as log-odds and sigmoid for a binary
    variable, as logs and softmax over the last dimension for a categorical one."""

    def logits(self):
        return probs_to_logits(self.probs, is_binary=is_binary)

    def probs(self):
        return logits_to_probs(self.logits, is_binary=is_binary)

    if is_binary:
        logits.__doc__ = "The log-odds log(probs / (1 - probs)) of a success."
        probs.__doc__ = "The probability of a success."
    else:
        logits.__doc__ = "The normalized log-probabilities."
        probs.__doc__ = "The normalized probabilities."
    return lazy_property(logits), lazy_property(probs)


def tril_matrix_to_vec(mat, diag=0):
    """The lower triangle (from diagonal ``diag``) of each matrix of ``mat``, row by row."""
    n = mat.shape[-1]
    # (a mask, not index pairs: a matrix that is not square is an IndexError)
    mask = ember.ones(n, n, dtype=ember.bool, device=mat.device).tril(diag)
    return mat[..., mask]


def _tril_count(n, diag):
    """How many entries of an n x n matrix lie on or below diagonal ``diag``."""
    return sum(max(0, min(n, i + diag + 1)) for i in range(n))


def _tril_side(length, diag):
    """The smallest n whose n x n lower triangle from diagonal ``diag`` holds ``length``."""
    n = 0
    while _tril_count(n, diag) < length:
        n += 1
    return n


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of ``tril_matrix_to_vec``: square matrices with ``vec`` in their lower
    triangle from diagonal ``diag`` and zeros elsewhere."""
    length = vec.shape[-1]
    n = _tril_side(length, diag)
    rows, cols = ember.tril_indices(n, n, offset=diag, device=vec.device)
    if rows.numel() != length:
        raise ValueError(f"The size of last dimension is {length} which cannot be expressed "
                         "as the lower triangular part of a square D x D matrix.")
    mat = vec.new_zeros(vec.shape[:-1] + (n, n))
    mat[..., rows, cols] = vec
    return mat


# ----- samplers PyTorch cannot run under vmap -------------------------------------------------
# ember reruns a vmap(randomness="different") as a loop once a random op runs, so a sampler
# whose batched run PyTorch refuses (data-dependent loops, in-place writes into unbatched
# tensors, autograd.Functions without setup_context) would just work here: these refuse first.

def _vmap_randomness():
    from ember.func._batched import STATE
    return [level.randomness for level in STATE.levels]


def refuse_vmap_of_function():
    """Under any vmap (or grad, vjp, jacrev, jvp), raise PyTorch's error for the
    autograd.Function without setup_context its sampler applies (Dirichlet's, which Beta and
    LKJCholesky draw through)."""
    from ember.autograd._forward_traces import _SETUP_CONTEXT, refuses_without_setup_context
    if _vmap_randomness() or refuses_without_setup_context():
        raise RuntimeError(_SETUP_CONTEXT)


def refuse_vmap_different(what):
    """Under vmap(randomness="different") (and no "error" level, whose random-op error comes
    first), raise the error PyTorch's batched run of the sampler meets: ``what`` is
    "control flow" (a data-dependent loop) or the name of an in-place op into an unbatched
    tensor."""
    levels = _vmap_randomness()
    if "different" not in levels or "error" in levels:
        return
    if what == "control flow":
        from ember.func._batched import _CONTROL
        raise RuntimeError(_CONTROL)
    from ember.func._batching import _UNBATCHED_SELF
    raise RuntimeError(_UNBATCHED_SELF.format(op=what, where="in a vmap"))
