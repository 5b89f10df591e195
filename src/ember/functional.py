"""ember.functional: PyTorch's ``torch.functional`` module, which some programs import
functions from (``from torch.functional import einsum``); the same functions as ``ember.*``."""

import ember as _ember

_NAMES = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu",
           "norm", "meshgrid", "pca_lowrank", "split", "stft", "svd_lowrank", "tensordot",
           "unique", "unique_consecutive", "unravel_index"]

globals().update({name: getattr(_ember, name) for name in _NAMES})
__all__ = list(_NAMES)
