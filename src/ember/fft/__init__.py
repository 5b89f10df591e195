"""ember.fft: discrete Fourier transforms (``torch.fft``). The ops live in ember/ops/; this
module gathers those registered with ``namespace="fft"`` and adds the frequency helpers."""

from ember import ops as _ops
from ember.fft._helpers import fftfreq, fftshift, ifftshift, rfftfreq  # noqa: F401

globals().update(_ops.namespace_functions("fft"))
