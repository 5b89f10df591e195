"""ember.linalg: linear algebra (``torch.linalg``). The ops live in ember/ops/; this module
gathers those registered with ``namespace="linalg"``, and PyTorch's other names here."""

from ember import ops as _ops
from ember.ops._linalg_utils import LinAlgError  # noqa: F401
from ember.ops.linalg import matmul  # noqa: F401  (torch.linalg.matmul is torch.matmul)

globals().update(_ops.namespace_functions("linalg"))
