"""ember.backends: the switches PyTorch programs set for the libraries under the ops
(``torch.backends``): cuDNN, cuBLAS and attention kernels, MPS, CPU.

They are accepted, type-checked and remembered, and change nothing in ember, whose
computations are already what each switch permits (each module says which and why). One is
meant to act: ``cuda.flash_sdp_enabled()`` is the switch for ember's CUDA flash-attention
kernel, whose override is to consult it (it does not yet).
"""

from ember.backends import cpu, cuda, cudnn, mps
from ember.backends._precision import (get_float32_matmul_precision,
                                       set_float32_matmul_precision)

__all__ = ["cpu", "cuda", "cudnn", "mps"]
