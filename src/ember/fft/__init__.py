"""ember.fft: discrete Fourier transforms (``torch.fft``). The ops live in ember/ops/; this
module only gathers those registered with ``namespace="fft"``."""

from ember import ops as _ops

globals().update(_ops.namespace_functions("fft"))
