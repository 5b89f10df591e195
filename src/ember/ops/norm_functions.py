"""Normalizations built from other ops: instance_norm (batch_norm over a (1, N*C, *) view),
rms_norm, local_response_norm and normalize; and the similarities cosine_similarity and
pairwise_distance."""

import math

import ember
from ember._warn import warn_once
from ember.ops._registry import rename_node
from ember.ops._scalars import float_arg
from ember.autograd.grad_mode import no_grad
from ember.ops.norm_batch import batch_norm
from ember.ops.norm_rows import _fused_rms_norm

__all__ = ["instance_norm", "rms_norm", "local_response_norm", "normalize",
           "cosine_similarity", "pairwise_distance"]


def _size_text(shape):
    return f"ember.Size({list(shape)})"


def _instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                   eps):
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    n, c = input.size(0), input.size(1)     # (PyTorch's errors below 2 dims)
    x = input.reshape((1, n * c) + tuple(input.shape[2:]))

    def tiled(v):
        return None if v is None else v.repeat(n)

    # unlike batch_norm's, these may be of another dtype: when running_mean's is not the
    # weight's (the input's without a weight), both are taken in that dtype (as PyTorch's;
    # a running_var of another dtype alone is not)
    like = (weight if weight is not None else input).dtype
    cast = running_mean is not None and running_mean.dtype != like

    def stats(v):
        return v.to(like) if cast and v is not None else v
    rm, rv = stats(tiled(running_mean)), stats(tiled(running_var))
    out = batch_norm(x, tiled(weight), tiled(bias), rm, rv, use_input_stats, momentum, eps,
                     False)
    if use_input_stats:
        with no_grad():                 # running statistics: the mean over the batch
            for dst, src in ((running_mean, rm), (running_var, rv)):
                if dst is not None:
                    dst.copy_(src.reshape(n, c).mean(0))
    return out.reshape(input.shape)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled):
    """Instance normalization (``torch.instance_norm``'s argument order)."""
    momentum = float_arg(momentum, "instance_norm", "momentum", 7)
    return _instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                          momentum, eps)


def functional_instance_norm(input, running_mean=None, running_var=None, weight=None,
                             bias=None, use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalize each channel of each sample over its spatial dims."""
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{_size_text(input.shape)}")
    momentum = float_arg(momentum, "instance_norm", "momentum", 7)
    return _instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                          momentum, eps)


# ScalarType as PyTorch's C++ warnings print it (its C++ type name)
_CPP_NAMES = {"Float": "float", "Double": "double", "Half": "c10::Half",
              "BFloat16": "c10::BFloat16"}


def _warn_mixed_rms_weight(input, weight):
    """PyTorch's warning for a weight of another dtype than the input's, which its fused
    kernel cannot take (the result is the same): once per process, whatever the dtypes, or
    every time after ``set_warn_always(True)``."""
    if weight is None or weight.dtype == input.dtype:
        return
    names = [_CPP_NAMES.get(t.dtype._torch_name, t.dtype._torch_name) for t in (input, weight)]
    warn_once(f"Mismatch dtype between input and weight: input dtype = {names[0]}, weight "
              f"dtype = {names[1]}, Cannot dispatch to fused implementation.",
              key="rms_norm weight dtype")


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Divide by the root mean square over the trailing ``normalized_shape`` dims, then
    scale (16-bit inputs computed in float32, as in PyTorch)."""
    _warn_mixed_rms_weight(input, weight)
    # (PyTorch's composite ends in contiguous(): a clone of a result laid out as a permuted
    # input)
    return _fused_rms_norm(input, normalized_shape, weight, eps)[0].contiguous()


def _lrn_check_dtype(input):
    """PyTorch's error for dtypes its average pooling lacks (LRN pools over channels: 2-D
    pooling for 3-D input, 3-D pooling above, which takes no 16-bit floats on CPU)."""
    d = input.dtype
    wide = input.ndim == 3 or input.device.type != "cpu"
    if d.is_floating_point and (wide or d.itemsize > 2) or d is ember.int64:
        return
    kernel = "avg_pool2d" if input.ndim == 3 else "avg_pool3d_out_frame"
    raise NotImplementedError(f"\"{kernel}\" not implemented for '{d._torch_name}'")


def _lrn_pools_in_float32(input):
    """Whether PyTorch's LRN pools ``input``'s squares in float32: above 3-D it pools with
    avg_pool3d, a float32 op under CPU autocast (the result then promotes to float32)."""
    return (input.ndim > 3 and input.device.type == "cpu" and input.dtype.is_floating_point
            and input.dtype is not ember.float64 and ember.is_autocast_enabled("cpu"))


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Normalize each element by the squares of its neighbours across channels (dim 1)."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          "
                         f"input (got {input.ndim} dimensions)")
    in_float32 = _lrn_pools_in_float32(input)
    if not in_float32:
        _lrn_check_dtype(input)
    if input.numel() == 0:
        return input
    sq = input * input
    if in_float32:
        sq = sq.float()
    shape = list(sq.shape)
    front, back = size // 2, (size - 1) // 2
    # window sums over zero-padded channels (not differences of a cumulative sum: an inf or
    # NaN, or a large square, would reach every later channel)
    parts = [sq.new_zeros([shape[0], front] + shape[2:]), sq,
             sq.new_zeros([shape[0], back] + shape[2:])]
    window = ember.cat(parts, 1).unfold(1, size, 1).sum(-1)
    if not input.dtype.is_floating_point:   # PyTorch's average pooling of integer squares
        return input / ((window.div(size, rounding_mode="trunc") * alpha + k) ** beta)
    div = (window * (alpha / size) + k) ** beta
    return input / div


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """Divide ``input`` by its ``p``-norm along ``dim`` (at least ``eps``)."""
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is None:
        return input / denom
    return ember.div(input, denom, out=out)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (broadcasting), in their
    promoted dtype, which must be a real floating one."""
    common = ember.promote_types(x1.dtype, x2.dtype)
    if not common.is_floating_point:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                           f"{common._torch_name}")
    # as PyTorch's, only integer inputs are converted: a float16 one is normalized in float16
    x1, x2 = ember.broadcast_tensors(x1 if x1.dtype.is_floating_point else x1.to(common),
                                     x2 if x2.dtype.is_floating_point else x2.to(common))
    return ((x1 / _clamped_norm(x1, dim, eps)) * (x2 / _clamped_norm(x2, dim, eps))).sum(dim)


def _clamped_norm(x, dim, eps):
    """The 2-norm of ``x`` along ``dim`` (kept), at least ``eps``; as PyTorch's, the clamp is
    no part of the graph, so a norm under eps still passes on the gradient of the true norm."""
    n = ember.linalg.vector_norm(x, 2, dim, True)
    if not n.requires_grad:         # no graph to keep out of (forward AD's tangent is the
        return n.clamp_min(eps)     # clamp's either way, as PyTorch's): out of place, faster
    n = n.clone()                   # the norm's own result may be saved for its backward
    with no_grad():
        return n.clamp_min_(eps)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dim."""
    dim = max(x1.ndim, x2.ndim) - 1
    diff = x1 - x2 + eps
    if dim < 0:
        return rename_node(diff.abs() if p != 0 else (diff != 0).to(diff.dtype),
                           "NormBackward1")
    return rename_node(ember.linalg.vector_norm(diff, p, dim, keepdim), "NormBackward1")


def pdist(input, p=2):
    """The ``p``-norm distances between the rows of a matrix (``ember.pdist``)."""
    return ember.pdist(input, p)


for _f, _n in ((functional_instance_norm, "instance_norm"),):
    _f.__name__ = _f.__qualname__ = _n

PUBLIC = {"instance_norm": instance_norm, "rms_norm": rms_norm,
          "cosine_similarity": cosine_similarity, "pairwise_distance": pairwise_distance}
FUNCTIONAL = {"instance_norm": functional_instance_norm, "rms_norm": rms_norm,
              "local_response_norm": local_response_norm, "normalize": normalize,
              "cosine_similarity": cosine_similarity, "pairwise_distance": pairwise_distance,
              "pdist": pdist}
