"""ember.special: special functions (``torch.special``). The ops live in ember/ops/; this
module gathers those registered with ``namespace="special"`` and PyTorch's names for
top-level ops."""

from ember import ops as _ops

globals().update(_ops.namespace_functions("special"))
