"""``torch.utils.data._utils.collate``: ``collate`` with a ``collate_fn_map``, the default map
and its per-type functions under PyTorch's names."""

from ember.utils.data.collate import (collate, collate_float_fn, collate_int_fn,
                                      collate_numpy_array_fn, collate_numpy_scalar_fn,
                                      collate_str_fn, collate_tensor_fn, default_collate,
                                      default_collate_fn_map, default_convert)

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map",
           "collate_tensor_fn", "collate_numpy_array_fn", "collate_numpy_scalar_fn",
           "collate_float_fn", "collate_int_fn", "collate_str_fn"]
