"""ember.nn.init: parameter initialization, in place and without recording gradients."""

import math
import warnings

from ember._dtype import float32
from ember._random import _float_dtype
from ember._transform_births import STATE as _BIRTHS, refuse_captured
from ember.autograd.grad_mode import no_grad

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_", "uniform", "normal", "constant",
           "eye", "dirac", "xavier_uniform", "xavier_normal", "kaiming_uniform",
           "kaiming_normal", "orthogonal", "sparse"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for ``nonlinearity`` (``param``: leaky_relu's negative slope)."""
    if nonlinearity in _LINEAR:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill ``tensor`` from U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill ``tensor`` from N(mean, std^2)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill ``tensor`` from N(mean, std^2) truncated to [a, b] (exact rejection sampling)."""
    if tensor.is_meta:                      # no storage: nothing to sample
        return tensor
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    if _BIRTHS.levels:      # (PyTorch's first write into it is a normal_)
        refuse_captured(tensor, "aten::normal_")
    with no_grad():
        # the mass of N(mean, std^2) inside [a, b] picks the cheaper proposal
        inside = _normal_cdf((b - mean) / std) - _normal_cdf((a - mean) / std)
        if inside > 0.3:
            return _trunc_normal_by_normal(tensor, mean, std, a, b, generator)
        return _trunc_normal_by_uniform(tensor, mean, std, a, b, generator)


def _normal_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def _work_buffer(tensor):
    """A flat buffer to sample into: float32 for 16-bit floats (too coarse to sample in)."""
    dtype = tensor.dtype if tensor.element_size() >= 4 else float32
    return tensor.new_empty((tensor.numel(),), dtype=dtype)


def _trunc_normal_by_normal(tensor, mean, std, a, b, generator):
    """Draw from N(mean, std^2) and redraw the draws outside [a, b] until none are left."""
    _float_dtype(tensor.dtype, "normal_kernel_cpu")     # (no sampling into integers/bools)
    work = _work_buffer(tensor).normal_(mean, std, generator=generator)
    outside = (work < a) | (work > b)
    while bool(outside.any()):
        redraw = work.new_empty((int(outside.sum()),)).normal_(mean, std, generator=generator)
        work[outside] = redraw
        outside = (work < a) | (work > b)
    return tensor.copy_(work.view(tensor.shape))


def _trunc_normal_by_uniform(tensor, mean, std, a, b, generator):
    """Draw from U(a, b) and keep each draw x with probability pdf(x) / max pdf on [a, b]."""
    tensor.uniform_(a, b, generator=generator)     # (torch's errors for bad bounds or dtypes)
    work = _work_buffer(tensor)
    peak = max(a, min(mean, b))                     # where the density is largest on [a, b]
    log_peak = -0.5 * ((peak - mean) / std) ** 2
    if (a >= mean or b <= mean) and _decays_across(mean, std, a, b):
        return tensor.copy_(_one_sided_tail(work, mean, std, a, b, generator).view(tensor.shape))
    work.copy_(tensor.reshape(-1))

    def rejected(x):
        log_ratio = ((x - mean) / std).square_().mul_(-0.5).sub_(log_peak)
        return x.new_empty(x.shape).uniform_(generator=generator).log_() > log_ratio

    pending = rejected(work)
    while bool(pending.any()):
        candidates = work.new_empty((int(pending.sum()),)).uniform_(a, b, generator=generator)
        kept = ~rejected(candidates)
        slots = pending.nonzero().squeeze(1)[kept]
        work[slots] = candidates[kept]
        pending[slots] = False
    return tensor.copy_(work.view(tensor.shape))


def _one_sided(mean, std, a, b):
    """[a, b] on one side of the mean, in standard units, mirrored to the right of 0."""
    if b <= mean:
        return (mean - b) / std, (mean - a) / std
    return (a - mean) / std, (b - mean) / std


def _tail_rate(lo):
    """The best rate of an exponential proposal for the normal tail beyond ``lo``."""
    return (lo + math.sqrt(lo * lo + 4)) / 2


def _decays_across(mean, std, a, b):
    """Whether the density falls so much across the one-sided [a, b] (by e^-4 or more) that
    a uniform proposal would be wasteful (at far intervals, endlessly)."""
    lo, hi = _one_sided(mean, std, a, b)
    return _tail_rate(lo) * (hi - lo) > 4


def _one_sided_tail(work, mean, std, a, b, generator):
    """Fill ``work`` from N(mean, std^2) truncated to [a, b] lying on one side of the mean, by
    Robert's (1995) exponential proposal (it accepts at least 76% of draws however far out or
    wide the interval is, where a uniform proposal may accept almost none)."""
    flip = b <= mean                                # sample the mirror image, to the right
    lo, hi = _one_sided(mean, std, a, b)
    rate = _tail_rate(lo)

    def draws(n):
        z = work.new_empty((n,)).uniform_(generator=generator).log_().div_(-rate).add_(lo)
        log_ratio = (z - rate).square_().mul_(-0.5)
        kept = (work.new_empty((n,)).uniform_(generator=generator).log_() <= log_ratio)
        return z[kept & (z <= hi)]

    filled = 0
    while filled < work.numel():
        z = draws(max(work.numel() - filled, 16))[:work.numel() - filled]
        work[filled:filled + z.numel()] = z
        filled += z.numel()
    return work.mul_(-std if flip else std).add_(mean)


def constant_(tensor, val):
    """Fill ``tensor`` with ``val``."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    """Fill ``tensor`` with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fill ``tensor`` with zeros."""
    with no_grad():
        return tensor.zero_()


def eye_(tensor):
    """Fill the 2-D ``tensor`` with the identity matrix."""
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from ember._creation import eye
    with no_grad():     # (into ``out``, as PyTorch's: a transform's captured tensor too)
        eye(*tensor.shape, out=tensor)
    return tensor


def dirac_(tensor, groups=1):
    """Fill the 3/4/5-D ``tensor`` with the Dirac delta (convolutions that keep their input)."""
    if tensor.ndimension() not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.size()
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    center = tuple(s // 2 for s in sizes[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(per_group, sizes[1])):
                tensor[(g * per_group + d, d) + center] = 1
    return tensor


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.size(1) * receptive, tensor.size(0) * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-b, b), b = gain * sqrt(3 / fan_mode)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std^2), std = gain / sqrt(fan_mode)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix (trailing dims flattened), scaled by ``gain``."""
    if tensor.ndimension() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    from ember import linalg
    rows = tensor.size(0)
    cols = tensor.numel() // rows
    with no_grad():
        flat = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator)
        if rows < cols:
            flat = flat.t()
        q, r = linalg.qr(flat)
        q = q * r.diagonal().sign()             # unique, uniformly distributed Q
        if rows < cols:
            q = q.t()
        tensor.copy_(q.reshape(tensor.shape))
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """N(0, std^2) with a fraction ``sparsity`` of each column set to zero."""
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from ember import randperm
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            tensor[randperm(rows, generator=generator)[:num_zeros], col] = 0
    return tensor


def _deprecated(fn):
    name = fn.__name__[:-1]

    def old(*args, **kwargs):
        warnings.warn(f"`nn.init.{name}` is now deprecated in favor of `nn.init.{fn.__name__}`.",
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)
    old.__name__ = name
    old.__doc__ = f"Deprecated alias of :func:`{fn.__name__}`."
    return old


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)

# the private helpers some programs import from torch.nn.init (all run under no_grad already)
_no_grad_uniform_ = uniform_
_no_grad_normal_ = normal_
_no_grad_trunc_normal_ = trunc_normal_
_no_grad_fill_ = constant_
_no_grad_zero_ = zeros_
