"""``torch.utils.data._utils.collate``: ``collate`` with a ``collate_fn_map``, the default map
and its per-type functions under PyTorch's names."""

from ember.utils.data.collate import (_collate_float, _collate_int, _collate_ndarray,
                                      _collate_numpy_scalar, _collate_str, _collate_tensor,
                                      collate, default_collate, default_collate_fn_map,
                                      default_convert)

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map",
           "collate_tensor_fn", "collate_numpy_array_fn", "collate_numpy_scalar_fn",
           "collate_float_fn", "collate_int_fn", "collate_str_fn"]

collate_tensor_fn = _collate_tensor
collate_numpy_array_fn = _collate_ndarray
collate_numpy_scalar_fn = _collate_numpy_scalar
collate_float_fn = _collate_float
collate_int_fn = _collate_int
collate_str_fn = _collate_str
