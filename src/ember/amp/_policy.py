"""Which ops autocast casts, and to what: PyTorch's published op lists, per device type.

"lower" ops run in the autocast dtype (matrix products and convolutions, where low
precision pays); "fp32" ops run in float32 (reductions, losses, norms and transcendental
functions, where it does not); "promote" ops run in the widest floating dtype among their
inputs. Names are registry op names, or ``nn.functional`` functions built from ops. Float64
tensors are never cast by "lower" and "fp32". ``_rnn_layer``, the recurrence of nn.LSTM, GRU
and RNN, stands for PyTorch's cuDNN and oneDNN recurrent layers, which autocast runs in low
precision.
"""

__all__ = ["POLICY"]

_CPU_LOWER = """conv1d conv2d conv3d convolution conv_transpose1d conv_transpose2d conv_transpose3d
    bmm mm baddbmm addmm addbmm matmul linalg.vecdot nn.functional.linear prelu
    nn.functional.scaled_dot_product_attention _rnn_layer"""

_CPU_FP32 = """nn.functional.avg_pool3d nn.functional.binary_cross_entropy polar prod quantile
    nanquantile cdist trace view_as_complex inverse pinverse cholesky_solve cholesky_inverse
    stft nn.functional.max_pool3d_with_indices
    nn.functional.max_unpool2d nn.functional.max_unpool3d nn.functional.adaptive_avg_pool3d
    nn.functional.adaptive_max_pool3d_with_indices nn.functional.nll_loss
    nn.functional.cross_entropy ctc_loss svd
    fft.fft fft.ifft fft.fft2 fft.ifft2 fft.fftn fft.ifftn fft.rfft fft.irfft fft.rfft2
    fft.irfft2 fft.rfftn fft.irfftn fft.hfft fft.ihfft
    linalg.cond linalg.matrix_rank linalg.solve linalg.cholesky linalg.svdvals linalg.eigvals
    linalg.eigvalsh linalg.inv linalg.qr linalg.cholesky_ex linalg.svd linalg.eig linalg.eigh
    linalg.lstsq linalg.inv_ex linalg.lu_solve linalg.tensorinv linalg.tensorsolve
    mse_loss cosine_embedding_loss hinge_embedding_loss poisson_nll_loss smooth_l1_loss
    l1_loss huber_loss margin_ranking_loss soft_margin_loss triplet_margin_loss
    multi_margin_loss kl_div multilabel_margin_loss binary_cross_entropy_with_logits
    grid_sample"""

_CPU_PROMOTE = "stack cat index_copy"

_CUDA_LOWER = """matmul addbmm addmm addmv addr baddbmm bmm chain_matmul linalg.multi_dot conv1d
    conv2d conv3d convolution conv_transpose1d conv_transpose2d conv_transpose3d
    nn.functional.linear mm mv prelu nn.functional.scaled_dot_product_attention _rnn_layer"""

_CUDA_FP32 = """pow acos asin cosh erfinv exp expm1 log log10 log1p log2 reciprocal rsqrt sinh tan
    nn.functional.softplus native_layer_norm native_group_norm norm dist cdist cumprod cumsum prod
    sum renorm softmax log_softmax nn.functional.cross_entropy nn.functional.nll_loss
    cosine_embedding_loss cosine_similarity hinge_embedding_loss kl_div l1_loss
    margin_ranking_loss mse_loss multilabel_margin_loss multi_margin_loss normalize pdist
    poisson_nll_loss smooth_l1_loss soft_margin_loss triplet_margin_loss
    binary_cross_entropy_with_logits softmin"""

_CUDA_PROMOTE = """addcdiv addcmul atan2 bilinear cross linalg.cross dot grid_sample index_put
    scatter_add tensordot cat stack index_copy"""


def _table():
    policy = {}
    for device_type, lists in (("cpu", (_CPU_LOWER, _CPU_FP32, _CPU_PROMOTE)),
                               ("cuda", (_CUDA_LOWER, _CUDA_FP32, _CUDA_PROMOTE))):
        for kind, names in zip(("lower", "fp32", "promote"), lists):
            for name in names.split():
                policy.setdefault(name, {})[device_type] = kind
    return policy


POLICY = _table()       # name -> {device type: "lower" | "fp32" | "promote"}
