"""The input checks that PyTorch's Python attention functions (flex_attention, CausalBias)
share, in its words (``F.scaled_dot_product_attention``'s own are in ops/attention.py)."""

__all__ = ["check_same_dtype", "check_same_device_and_rank"]


def check_same_dtype(query, key, value):
    """Raise ValueError unless query, key and value have one dtype."""
    if not query.dtype == key.dtype == value.dtype:
        raise ValueError(f"Expected query, key, and value to have the same dtype, but got "
                         f"query.dtype: {query.dtype}, key.dtype: {key.dtype}, and "
                         f"value.dtype: {value.dtype} instead.")


def check_same_device_and_rank(query, key, value):
    """Raise ValueError unless query, key and value are on one device, each at least 2-D."""
    if not query.device == key.device == value.device:
        raise ValueError(f"Expected query, key, and value to have the same device type, but "
                         f"got query.device: {query.device}, key.device: {key.device}, and "
                         f"value.device: {value.device} instead.")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(f"Expected query, key, and value to all be  at least 2 dimensional, "
                         f"but got query.dim: {query.dim()}, key.dim: {key.dim()} and "
                         f"value.dim: {value.dim()} instead.")
