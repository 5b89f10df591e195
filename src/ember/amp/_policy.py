"""Which ops autocast casts, and to what: PyTorch's published op lists, per device type.

"lower" ops run in the autocast dtype (matrix products and convolutions, where low
precision pays); "fp32" ops run in float32 (reductions, losses, norms and transcendental
functions, where it does not); "promote" ops run in the widest floating dtype among their
inputs (float64 ones left aside). Names are registry op names, or ``nn.functional`` functions
built from ops. Float64 tensors are never cast. A registry op whose PyTorch counterpart is a
composition (``tensordot`` is a matrix product after reshapes) or dispatches on its arguments
(``F.pad`` runs a listed kernel for some modes only) has a rule instead of a kind: a function
of its operands and parameters that returns the kind of a call, or None.

``_rnn_layer``, the recurrence of nn.LSTM, GRU and RNN, stands for PyTorch's cuDNN and
oneDNN recurrent layers, which autocast runs in low precision (on the CPU, GRU layers, LSTM
layers with projections and LSTM/GRU cells step with ember ops instead: see
nn/modules/rnn.py). ``affine_grid_generator`` is listed because PyTorch builds the grid with
``bmm``, which autocast casts.
"""

import math

from ember import _dtype as D
from ember.amp._state import suspended

__all__ = ["POLICY", "TOP_LEVEL_ONLY", "Composite"]

_CPU_LOWER = """conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
    conv_tbc bmm mm baddbmm addmm addbmm matmul linalg.vecdot nn.functional.linear prelu
    nn.functional.scaled_dot_product_attention _rnn_layer affine_grid_generator _linear_addmm
    _linear_mm"""

_CPU_FP32 = """nn.functional.avg_pool3d nn.functional.binary_cross_entropy polar prod quantile
    nanquantile cdist trace view_as_complex inverse pinverse cholesky cholesky_solve
    cholesky_inverse
    lu_solve triangular_solve geqrf orgqr ormqr linalg.householder_product
    nn.functional.max_unpool1d
    _fractional_max_pool2d _fractional_max_pool3d stft max_pool3d
    nn.functional.max_unpool2d nn.functional.max_unpool3d nn.functional.adaptive_avg_pool3d
    nn.functional.adaptive_max_pool3d_with_indices nn.functional.nll_loss
    nn.functional.cross_entropy ctc_loss svd
    fft.fft fft.ifft fft.fft2 fft.ifft2 fft.fftn fft.ifftn fft.rfft fft.irfft fft.rfft2
    fft.irfft2 fft.rfftn fft.irfftn fft.hfft fft.ihfft
    linalg.cond linalg.matrix_rank linalg.solve linalg.cholesky linalg.svdvals linalg.eigvals
    linalg.eigvalsh linalg.inv linalg.qr linalg.cholesky_ex linalg.svd linalg.eig linalg.eigh
    linalg.lstsq linalg.inv_ex linalg.tensorinv linalg.tensorsolve
    mse_loss cosine_embedding_loss hinge_embedding_loss poisson_nll_loss smooth_l1_loss
    l1_loss huber_loss margin_ranking_loss soft_margin_loss triplet_margin_loss
    multi_margin_loss kl_div multilabel_margin_loss binary_cross_entropy_with_logits
    grid_sample"""

_CPU_PROMOTE = "stack cat index_copy"

_CUDA_LOWER = """matmul addbmm addmm addmv addr baddbmm bmm chain_matmul linalg.multi_dot conv1d
    conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d
    nn.functional.linear mm mv prelu nn.functional.scaled_dot_product_attention _rnn_layer
    affine_grid_generator _linear_addmm _linear_mm linalg.vecdot"""

_CUDA_FP32 = """pow acos asin cosh erfinv exp expm1 log log10 log1p log2 reciprocal rsqrt sinh tan
    nn.functional.softplus native_layer_norm native_group_norm rms_norm norm dist cdist cumprod
    cumsum prod sum renorm softmax log_softmax nn.functional.cross_entropy nn.functional.nll_loss
    cosine_embedding_loss cosine_similarity hinge_embedding_loss kl_div l1_loss
    margin_ranking_loss mse_loss multilabel_margin_loss multi_margin_loss normalize pdist
    poisson_nll_loss smooth_l1_loss soft_margin_loss triplet_margin_loss
    binary_cross_entropy_with_logits softmin huber_loss logsumexp"""

_CUDA_PROMOTE = """addcdiv addcmul atan2 bilinear cross linalg.cross dot grid_sample index_put
    scatter_add tensordot cat stack index_copy"""




# --- rules: the kind of one call -------------------------------------------------------------

def _one_dtype(operands):
    """Whether the tensor operands share one dtype (PyTorch's compositions check this before
    their matrix products, so mixed operands raise their error rather than being cast)."""
    return len({x.dtype for x in operands if hasattr(x, "dtype")}) == 1


def _product(free_a, free_b, operands):
    """The kind of a composition that multiplies a (free_a, k) by a (k, free_b) matrix:
    with mm, in lower precision, unless the result is one number (a dot product)."""
    if free_a * free_b == 1 or not _one_dtype(operands):
        return None
    return "lower"


def _tensordot(operands, params):
    from ember.ops.contractions import tensordot_dims
    a, b = operands
    try:
        dims_a, dims_b = tensordot_dims(params[0], a.ndim, b.ndim)
    except (RuntimeError, AssertionError, TypeError):
        return None                         # the op raises its own error
    contracted_a = {d % max(a.ndim, 1) for d in dims_a}
    contracted_b = {d % max(b.ndim, 1) for d in dims_b}
    free_a = math.prod(s for d, s in enumerate(a.shape) if d not in contracted_a)
    free_b = math.prod(s for d, s in enumerate(b.shape) if d not in contracted_b)
    return _product(free_a, free_b, operands)


def _inner(operands, params):
    a, b = operands
    if not (hasattr(a, "ndim") and hasattr(b, "ndim")) or a.ndim == 0 or b.ndim == 0:
        return None                         # a product by a scalar
    return _product(math.prod(a.shape[:-1]), math.prod(b.shape[:-1]), operands)


def _chain(operands, params):
    """Products of two or more matrices (mm calls); one matrix is returned as it is."""
    return "lower" if len(operands) > 1 and _one_dtype(operands) else None


class Composite:
    """A rule's answer for a call PyTorch computes as a composition of ops, each cast on its
    own: ``run(inputs, params, out)`` computes the call in the op's stead."""

    __slots__ = ("run",)

    def __init__(self, run):
        self.run = run


def _matrix_power(operands, params):
    """n >= 2: products (mm); n = -1: ``linalg.inv`` (in float32, with its derivative, whose
    products autocast casts when the backward runs in the region); n <= -2: the inverse's
    power, as PyTorch composes it (an inverse in float32, then products in lower precision).
    A matrix that is not square is left to the op's own error."""
    n, a = params[0], operands[0]
    if n < 0 and not (getattr(a, "ndim", 0) >= 2 and a.shape[-1] == a.shape[-2]):
        return "fp32"
    return "lower" if n >= 2 else _INVERSE if n == -1 else _INVERSE_POWER if n < 0 else None


def _inverse(inputs, params, out):
    from ember.ops._registry import REGISTRY
    return REGISTRY["linalg.inv"].function(inputs[0], out=out)


def _inverse_power(inputs, params, out):
    from ember.ops._registry import REGISTRY
    inverse = REGISTRY["linalg.inv"].function(inputs[0])
    return REGISTRY["linalg.matrix_power"].function(inverse, -params[0], out=out)


_INVERSE = Composite(_inverse)
_INVERSE_POWER = Composite(_inverse_power)


def _pinv(operands, params):
    """PyTorch's pinv decomposes in float32 and multiplies the factors back in lower
    precision: a float32 matrix's pseudoinverse comes out in the autocast dtype (other
    dtypes are left alone: float64 and complex, or refused: float16 and bfloat16)."""
    a = operands[0]
    return _PINV if getattr(a, "dtype", None) is D.float32 else None


def _pinv_lower(inputs, params, out):
    from ember.amp.autocast_mode import get_autocast_dtype
    from ember.ops._registry import REGISTRY, call, rename_node
    with suspended(("cpu",)):
        p = call(REGISTRY["linalg.pinv"], inputs, params, out)
        if out is not None:
            return p
        return rename_node(p.to(get_autocast_dtype("cpu")), "LinalgPinvBackward0")


_PINV = Composite(_pinv_lower)


def _pad(operands, params):
    """PyTorch lists the reflection kernels of 1-D and 2-D padding and the replication ones
    of 1-D to 3-D (the kernel is chosen by the length of ``pad``)."""
    pad, mode = params[0], params[1]
    dims = len(pad) // 2
    if (mode == "reflect" and dims in (1, 2)) or (mode == "replicate" and dims in (1, 2, 3)):
        return "fp32"
    return None


def _upsample(operands, params):
    """PyTorch's CUDA list names the upsampling kernels (nearest, nearest-exact, linear,
    bilinear, bicubic, trilinear, antialiased or not); mode "area" is an adaptive average
    pool, which it does not list."""
    return None if params[2] == "area" else "fp32"


def _unless_dtype(operands, params):
    """The norms PyTorch runs in float32 by passing ``dtype=float32``: a call that names
    its own ``dtype`` (the last parameter) is left as it is."""
    return "fp32" if params[-1] is None else None


_UNSAFE_BCE = ("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
               "autocast.\nMany models use a sigmoid layer right before the binary cross "
               "entropy layer.\nIn this case, combine the two layers using "
               "torch.nn.functional.binary_cross_entropy_with_logits\nor "
               "torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and "
               "BCEWithLogits are\nsafe to autocast.")


def _banned_on_gpu(operands, params):
    """CUDA autocast refuses binary_cross_entropy of GPU tensors, whatever their dtype."""
    if any(getattr(getattr(x, "device", None), "type", None) == "cuda" for x in operands):
        raise RuntimeError(_UNSAFE_BCE)


_CPU_RULES = {"tensordot": _tensordot, "inner": _inner, "linalg.multi_dot": _chain,
              "chain_matmul": _chain, "matrix_power": _matrix_power,
              "linalg.matrix_power": _matrix_power, "nn.functional.pad": _pad,
              "linalg.pinv": _pinv}

_CUDA_RULES = {"nn.functional.interpolate": _upsample, "linalg.vector_norm": _unless_dtype,
               "linalg.matrix_norm": _unless_dtype, "linalg.norm": _unless_dtype,
               "nn.functional.binary_cross_entropy": _banned_on_gpu}


def _table():
    policy = {}
    for device_type, lists in (("cpu", (_CPU_LOWER, _CPU_FP32, _CPU_PROMOTE)),
                               ("cuda", (_CUDA_LOWER, _CUDA_FP32, _CUDA_PROMOTE))):
        for kind, names in zip(("lower", "fp32", "promote"), lists):
            for name in names.split():
                policy.setdefault(name, {})[device_type] = kind
    for name, rule in _CPU_RULES.items():
        policy.setdefault(name, {})["cpu"] = rule
    for name, rule in _CUDA_RULES.items():
        policy.setdefault(name, {})["cuda"] = rule
    return policy


POLICY = _table()       # name -> {device type: "lower" | "fp32" | "promote"}

# names cast as the top-level function only: PyTorch casts torch.max_pool3d, which
# F.max_pool3d runs without indices, but not max_pool3d_with_indices, which it runs with them
TOP_LEVEL_ONLY = frozenset({"max_pool3d"})
