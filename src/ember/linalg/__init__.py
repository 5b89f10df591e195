"""ember.linalg: linear algebra (``torch.linalg``). The ops live in ember/ops/; this module
gathers those registered with ``namespace="linalg"``, and PyTorch's other names here."""

from ember import ops as _ops
from ember.ops._linalg_utils import LinAlgError  # noqa: F401
from ember.ops._registry import REGISTRY as _REGISTRY
from ember.ops.contractions import multi_dot_public as _multi_dot
from ember.ops.least_squares import lstsq_public as _lstsq
from ember.ops.lu import linalg_lu_public as _lu
from ember.ops.norms import cond_public as _cond

globals().update(_ops.namespace_functions("linalg"))
matmul = _REGISTRY["matmul"].function      # torch.linalg.matmul is torch.matmul
lstsq = _lstsq                              # its singular values need no gradient
lu = _lu                                    # its permutation P needs no gradient
cond = _cond                                # that of an empty input needs no gradient
multi_dot = _multi_dot                      # a list or tuple of tensors, as PyTorch parses it
_LinAlgError = LinAlgError                  # its class name (PyTorch's), for pickle
