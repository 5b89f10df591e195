"""ember.linalg: linear algebra (``torch.linalg``). The ops live in ember/ops/; this module
only gathers those registered with ``namespace="linalg"``."""

from ember import ops as _ops

globals().update(_ops.namespace_functions("linalg"))
