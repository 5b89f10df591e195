"""ember.backends: the switches PyTorch programs set for the libraries under the ops
(``torch.backends``): cuDNN, cuBLAS and attention kernels, MPS, CPU, oneDNN, MKL, OpenMP,
opt_einsum and the attention fast path.

They are accepted, type-checked and remembered, and most change nothing in ember, whose
computations are already what each switch permits (each module says which and why). Those
that act: ``cuda.matmul.allow_tf32`` and ``cudnn.allow_tf32`` (TF32 products on a GPU), the
attention switches of ``cuda`` (which attention path may run).
"""

from ember.backends import cpu, cuda, cudnn, mha, mkl, mkldnn, mps, openmp, opt_einsum
from ember.backends._precision import (get_float32_matmul_precision,
                                       set_float32_matmul_precision)

import sys as _sys
import types as _types

from ember.backends import _fp32_precision


class _BackendsModule(_types.ModuleType):
    fp32_precision = property(lambda self: _fp32_precision.get("generic"),
                              lambda self, value: _fp32_precision.set_precision("generic", value),
                              doc="The default fp32_precision of every backend (see "
                                  "backends/_fp32_precision.py).")


_sys.modules[__name__].__class__ = _BackendsModule

__all__ = ["cpu", "cuda", "cudnn", "mha", "mkl", "mkldnn", "mps", "openmp", "opt_einsum"]
