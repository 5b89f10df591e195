"""``torch.cuda.sparse``: PyTorch's legacy sparse CUDA tensor types
(``isinstance(s, ember.cuda.sparse.FloatTensor)``, ``s.type(ember.cuda.sparse.DoubleTensor)``,
``ember.cuda.sparse.FloatTensor(2, 3)`` with a GPU)."""

from ember._legacy_types import CUDA_SPARSE_TYPES

globals().update(CUDA_SPARSE_TYPES)
__all__ = list(CUDA_SPARSE_TYPES)
